# spark_add_x86_kernels(TARGET [AS_MODELS]): compiles the x86 variants'
# hand-written matrix and attention kernels (targets/x86/lib) into TARGET,
# each with the instruction-set flags spark-compile gives it in model libraries
# (X86Schedules.cpp), for the tests and benchmarks that call them directly.
#
# By default with the project's C compiler and flags (so the sanitized builds
# instrument them, and a second compiler checks the sources); AS_MODELS
# compiles them as spark-compile does for a model library (Library.cpp's
# compileC: clang-22, -std=gnu11 -O2 -fPIC), so that a benchmark measures the
# code models run.
set(SPARK_X86_KERNELS ${PROJECT_SOURCE_DIR}/targets/x86/lib)

# spark_compile_as_model(TARGET SOURCE FLAGS...): SOURCE compiled into TARGET
# as spark-compile compiles it for a model library, with FLAGS.
function(spark_compile_as_model target source)
  get_filename_component(name ${source} NAME_WE)
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/${target}-as-model)
  set(object ${dir}/${name}.o)
  set(includes ${SPARK_HALIDE_INCLUDE_DIR} ${PROJECT_SOURCE_DIR}/runtime/include
    ${PROJECT_SOURCE_DIR}/targets/common/lib)
  list(TRANSFORM includes PREPEND -I)
  add_custom_command(OUTPUT ${object}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${dir}
    COMMAND ${SPARK_CLANG} -std=gnu11 -O2 -Wall -fPIC
            -Werror=implicit-function-declaration ${ARGN} ${includes}
            -MD -MF ${object}.d -c ${source} -o ${object}
    DEPENDS ${source}
    DEPFILE ${object}.d
    COMMENT "Building ${name}.c for ${target} as model libraries are built"
    VERBATIM)
  target_sources(${target} PRIVATE ${object})
endfunction()

function(spark_add_x86_kernels target)
  cmake_parse_arguments(ARG "AS_MODELS" "" "" ${ARGN})
  set(dir ${SPARK_X86_KERNELS})
  set(flags_avx2_linear -mavx2 -mfma -mf16c)
  set(flags_avx2_attention -mavx2 -mfma -mf16c)
  set(flags_avx512_attention -mavx512f -mavx2 -mfma -mf16c)
  set(flags_int8_linear -mavx512f -mavx512bw -mavx512vnni -mf16c)
  set(flags_w4_linear -mavx512f -mavx512bw -mf16c)
  set(flags_bf16_linear -mavx512f -mavx512bw -mavx512bf16 -mavx512vnni -mf16c)
  foreach(name avx2_linear avx2_attention avx512_attention int8_linear
          w4_linear bf16_linear)
    if(ARG_AS_MODELS)
      spark_compile_as_model(${target} ${dir}/${name}.c ${flags_${name}})
    else()
      target_sources(${target} PRIVATE ${dir}/${name}.c)
      set_source_files_properties(${dir}/${name}.c TARGET_DIRECTORY ${target}
        PROPERTIES COMPILE_OPTIONS "${flags_${name}}")
    endif()
  endforeach()
  target_include_directories(${target} PRIVATE ${SPARK_HALIDE_INCLUDE_DIR}
    ${PROJECT_SOURCE_DIR}/targets/common/lib ${dir})
endfunction()
