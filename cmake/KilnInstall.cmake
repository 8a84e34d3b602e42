# Install rules and the CMake package: find_package(kiln) then link kiln::kiln.
include(CMakePackageConfigHelpers)

install(TARGETS kiln kiln_runtime kiln_ir kiln_passes kiln_codegen kiln_frontend EXPORT kilnTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# What `kiln aot` links into each model's library (not part of the CMake package).
install(TARGETS kiln_runtime_aot ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
# Public headers keep their repository paths under include/kiln/ (runtime/tensor.h, ...).
install(FILES include/kiln/kiln.h include/kiln/kiln_aot.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kiln)
foreach(layer runtime ir passes frontend)
  install(DIRECTORY ${layer}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kiln/${layer}
          FILES_MATCHING PATTERN "*.h" PATTERN "*.def")
endforeach()
install(EXPORT kilnTargets NAMESPACE kiln:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)
configure_package_config_file(cmake/kilnConfig.cmake.in
  ${PROJECT_BINARY_DIR}/kilnConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/kilnConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/kilnConfig.cmake ${PROJECT_BINARY_DIR}/kilnConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)
