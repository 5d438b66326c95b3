# spark_add_model(<name> CHECKPOINT <dir>
#                 [TARGET_DEVICE host|spr|arm64|hexagon]   (default host)
#                 [QUANT none|w8a16|w8a8|w4a16|w4a8]       (default none)
#                 [MAX_CONTEXT <positions>]                 (default 4096)
#                 [ENTRY_POINT <C name>]                    (default spark_model_definition)
#                 [EXTRA_ARGS <spark-compile arguments>...])
#
# Runs spark-compile at build time into ${CMAKE_CURRENT_BINARY_DIR}/<name>/
# (again whenever a file of the checkpoint or spark-compile itself changes)
# and makes <name> a static library target to link: the model library, its
# generated spark_model.h on the include path, and Spark::runtime. The
# target's properties SPARK_MODEL_DIR and SPARK_MODEL_PACK give the output
# folder and its weight pack (model.spkw), which the program opens at run
# time. Give each model of one program its own ENTRY_POINT.
function(spark_add_model name)
  cmake_parse_arguments(PARSE_ARGV 1 ARG ""
    "CHECKPOINT;TARGET_DEVICE;QUANT;MAX_CONTEXT;ENTRY_POINT" "EXTRA_ARGS")
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "spark_add_model(${name}): unknown arguments ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT ARG_CHECKPOINT)
    message(FATAL_ERROR "spark_add_model(${name}): CHECKPOINT <dir> is required")
  endif()
  get_filename_component(checkpoint "${ARG_CHECKPOINT}" ABSOLUTE)
  if(NOT EXISTS "${checkpoint}/config.json")
    message(FATAL_ERROR "spark_add_model(${name}): ${checkpoint} has no config.json; "
                        "expected a Spark-X2.5 checkpoint folder")
  endif()
  if(NOT ARG_TARGET_DEVICE)
    set(ARG_TARGET_DEVICE host)
  endif()
  if(ARG_TARGET_DEVICE STREQUAL "s25")
    message(FATAL_ERROR "spark_add_model(${name}): TARGET_DEVICE s25 is a bundle of two "
                        "libraries; add the arm64 part (and build the hexagon part for the DSP)")
  endif()
  set(args "${checkpoint}" "--target=${ARG_TARGET_DEVICE}" --quiet)
  if(ARG_QUANT)
    list(APPEND args "--quant=${ARG_QUANT}")
  endif()
  if(ARG_MAX_CONTEXT)
    list(APPEND args "--max-context=${ARG_MAX_CONTEXT}")
  endif()
  if(ARG_ENTRY_POINT)
    list(APPEND args "--entry-point=${ARG_ENTRY_POINT}")
  endif()
  list(APPEND args ${ARG_EXTRA_ARGS})

  set(out "${CMAKE_CURRENT_BINARY_DIR}/${name}")
  # spark-compile fills an empty folder; the include path must exist now.
  file(MAKE_DIRECTORY "${out}")
  file(GLOB inputs CONFIGURE_DEPENDS "${checkpoint}/*")
  add_custom_command(
    OUTPUT "${out}/libspark_model.a" "${out}/model.spkw" "${out}/spark_model.h"
    COMMAND Spark::spark-compile ${args} -o "${out}"
    DEPENDS ${inputs} Spark::spark-compile
    COMMENT "spark-compile: ${name} (${ARG_TARGET_DEVICE})"
    VERBATIM)
  add_custom_target(${name}_compile DEPENDS "${out}/libspark_model.a")

  add_library(${name} STATIC IMPORTED GLOBAL)
  set_target_properties(${name} PROPERTIES
    IMPORTED_LOCATION "${out}/libspark_model.a"
    INTERFACE_INCLUDE_DIRECTORIES "${out}"
    SPARK_MODEL_DIR "${out}"
    SPARK_MODEL_PACK "${out}/model.spkw")
  target_link_libraries(${name} INTERFACE Spark::runtime Threads::Threads ${CMAKE_DL_LIBS} m)
  add_dependencies(${name} ${name}_compile)
endfunction()
