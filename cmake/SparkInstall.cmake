# `cmake --install`: the tools, the runtime and text libraries, their
# headers, spark-compile's data files and a CMake package (find_package(Spark):
# Spark::runtime, Spark::text, spark_add_model()) plus pkg-config files.
# docs/package.md describes the result.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(SPARK_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/Spark)
set(SPARK_INSTALL_DATADIR ${CMAKE_INSTALL_DATADIR}/spark-compile)

install(TARGETS spark-compile spark-run spark-bench spark-fidelity
                spark-perplexity spark-tokenize spark-mkmodel
        EXPORT SparkTools RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
set_target_properties(spark_runtime PROPERTIES EXPORT_NAME runtime)
set_target_properties(spark_text PROPERTIES EXPORT_NAME text)
install(TARGETS spark_runtime spark_text EXPORT SparkLibraries
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES runtime/include/spark/runtime.h runtime/include/spark/model_abi.h
              runtime/include/spark/pack_format.h runtime/include/spark/text.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/spark)

# What spark-compile compiles into model libraries
# (kernels/include/spark/Kernels/DataFiles.h), and the runtime's source, which
# the package builds for a cross-compiled project.
install(DIRECTORY runtime/include DESTINATION ${SPARK_INSTALL_DATADIR}/runtime)
install(FILES runtime/lib/runtime.c runtime/lib/checksum_x86.h
        DESTINATION ${SPARK_INSTALL_DATADIR}/runtime/lib)
install(FILES tools/spark-run/spark-run.c
        DESTINATION ${SPARK_INSTALL_DATADIR}/tools/spark-run)
install(FILES tools/loader/options.h
        DESTINATION ${SPARK_INSTALL_DATADIR}/tools/loader)
foreach(dir common x86 arm64 hexagon)
  install(DIRECTORY targets/${dir}/lib DESTINATION ${SPARK_INSTALL_DATADIR}/targets/${dir}
          FILES_MATCHING PATTERN "*.c" PATTERN "*.h" PATTERN "*.h.in")
endforeach()
install(DIRECTORY targets/hexagon/libc DESTINATION ${SPARK_INSTALL_DATADIR}/targets/hexagon)
install(DIRECTORY targets/hexagon/s25 DESTINATION ${SPARK_INSTALL_DATADIR}/targets/hexagon)

install(EXPORT SparkTools NAMESPACE Spark:: DESTINATION ${SPARK_INSTALL_CMAKEDIR})
install(EXPORT SparkLibraries NAMESPACE Spark:: DESTINATION ${SPARK_INSTALL_CMAKEDIR})
configure_package_config_file(cmake/package/SparkConfig.cmake.in
  ${PROJECT_BINARY_DIR}/package/SparkConfig.cmake
  INSTALL_DESTINATION ${SPARK_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/package/SparkConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/package/SparkConfig.cmake
              ${PROJECT_BINARY_DIR}/package/SparkConfigVersion.cmake
              cmake/package/SparkModel.cmake
        DESTINATION ${SPARK_INSTALL_CMAKEDIR})

# pkg-config, for other build systems (host libraries).
foreach(pc spark spark-text)
  configure_file(cmake/package/${pc}.pc.in ${PROJECT_BINARY_DIR}/package/${pc}.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/package/${pc}.pc
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endforeach()
