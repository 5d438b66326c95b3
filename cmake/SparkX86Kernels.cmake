# spark_add_x86_kernels(TARGET): compiles the x86 variants' hand-written
# matrix and attention kernels (targets/x86-amx/lib) into TARGET, each with
# the instruction-set flags spark-compile gives it in model libraries
# (X86Schedules.cpp), for the tests and benchmarks that call them directly.
set(SPARK_X86_KERNELS ${PROJECT_SOURCE_DIR}/targets/x86-amx/lib)

function(spark_add_x86_kernels target)
  set(dir ${SPARK_X86_KERNELS})
  target_sources(${target} PRIVATE
    ${dir}/avx2_linear.c ${dir}/int8_linear.c ${dir}/w4_linear.c
    ${dir}/bf16_linear.c ${dir}/avx2_attention.c ${dir}/avx512_attention.c)
  set(flags_avx2 "-mavx2;-mfma;-mf16c")
  set(flags_avx512 "-mavx512f;-mavx512bw;-mf16c")
  set_source_files_properties(${dir}/avx2_linear.c TARGET_DIRECTORY ${target}
    PROPERTIES COMPILE_OPTIONS "${flags_avx2}")
  set_source_files_properties(${dir}/avx2_attention.c TARGET_DIRECTORY ${target}
    PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma")
  set_source_files_properties(${dir}/avx512_attention.c
    TARGET_DIRECTORY ${target}
    PROPERTIES COMPILE_OPTIONS "-mavx512f;-mavx2;-mfma;-mf16c")
  set_source_files_properties(${dir}/int8_linear.c TARGET_DIRECTORY ${target}
    PROPERTIES COMPILE_OPTIONS "-mavx512f;-mavx512bw;-mavx512vnni;-mf16c")
  set_source_files_properties(${dir}/w4_linear.c TARGET_DIRECTORY ${target}
    PROPERTIES COMPILE_OPTIONS "${flags_avx512}")
  set_source_files_properties(${dir}/bf16_linear.c TARGET_DIRECTORY ${target}
    PROPERTIES COMPILE_OPTIONS
    "-mavx512f;-mavx512bw;-mavx512bf16;-mavx512vnni;-mf16c")
  target_include_directories(${target} PRIVATE ${SPARK_HALIDE_INCLUDE_DIR}
    ${PROJECT_SOURCE_DIR}/targets/common/lib ${dir})
endfunction()
