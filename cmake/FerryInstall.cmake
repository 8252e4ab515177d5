# Installation: the five libraries, their public headers under include/ferry/, the umbrella
# header ferry/ferry.h, a CMake package (find_package(Ferry CONFIG)) with exported targets
# ferry::base, ferry::memory, ferry::kernels, ferry::loader and ferry::runtime, and a pkg-config file.
include(CMakePackageConfigHelpers)

set(FERRY_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Ferry)

install(TARGETS ferry_base ferry_memory ferry_kernels ferry_loader ferry_runtime
  EXPORT FerryTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

# Public headers: everything but internal/ and the CUDA parts (which no public header includes).
install(DIRECTORY base memory kernels loader runtime
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ferry
  FILES_MATCHING PATTERN "*.h"
  PATTERN "internal" EXCLUDE
  PATTERN "cuda" EXCLUDE
  PATTERN "cli" EXCLUDE
  PATTERN "schema" EXCLUDE)
# The CUDA device type's options are plain C++ that public headers include (memory/
# device_registry.h); the rest of its folder names CUDA types and stays out.
install(FILES memory/devices/cuda/cuda_options.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ferry/memory/devices/cuda)
install(FILES ferry.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ferry)

install(EXPORT FerryTargets
  NAMESPACE ferry::
  FILE FerryTargets.cmake
  DESTINATION ${FERRY_CMAKE_DIR})
configure_package_config_file(cmake/FerryConfig.cmake.in
  ${PROJECT_BINARY_DIR}/FerryConfig.cmake
  INSTALL_DESTINATION ${FERRY_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/FerryConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/FerryConfig.cmake ${PROJECT_BINARY_DIR}/FerryConfigVersion.cmake
  DESTINATION ${FERRY_CMAKE_DIR})

# pkg-config: the same (static) libraries, with Abseil's and FlatBuffers' .pc files as requirements
# and what the libraries themselves link (libdl, the threads library, OpenBLAS, the CUDA runtime)
# on the link line.
set(FERRY_PC_REQUIRES "absl_status absl_statusor absl_strings absl_str_format absl_span absl_flat_hash_map absl_flat_hash_set absl_inlined_vector flatbuffers")
set(FERRY_PC_LIBS_EXTRA "")
if(CMAKE_DL_LIBS)
  set(FERRY_PC_LIBS_EXTRA "-l${CMAKE_DL_LIBS}")
endif()
if(CMAKE_THREAD_LIBS_INIT)
  string(APPEND FERRY_PC_LIBS_EXTRA " ${CMAKE_THREAD_LIBS_INIT}")
endif()
if(FERRY_HAVE_BLAS)
  string(APPEND FERRY_PC_LIBS_EXTRA " ${FERRY_OPENBLAS_LIBRARY}")
endif()
if(FERRY_HAVE_CUDA)
  string(APPEND FERRY_PC_LIBS_EXTRA " -L${CUDAToolkit_LIBRARY_DIR} -lcudart")
endif()
# The prefix is found from the file's own place (${pcfiledir}), as FerryConfig.cmake does: the
# prefix given at configure time is not the one of `cmake --install --prefix` or of a moved tree.
# Absolute install dirs (-DCMAKE_INSTALL_LIBDIR=/usr/lib64) are written as they are.
set(FERRY_PC_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}" OR IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(FERRY_PC_PREFIX ${CMAKE_INSTALL_PREFIX})
  set(FERRY_PC_LIBDIR ${CMAKE_INSTALL_FULL_LIBDIR})
  set(FERRY_PC_INCLUDEDIR ${CMAKE_INSTALL_FULL_INCLUDEDIR})
else()
  # lib/pkgconfig -> ../..
  string(REGEX REPLACE "[^/]+" ".." FERRY_PC_TO_PREFIX "${FERRY_PC_DIR}")
  set(FERRY_PC_PREFIX "\${pcfiledir}/${FERRY_PC_TO_PREFIX}")
  set(FERRY_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
  set(FERRY_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file(cmake/ferry.pc.in ${PROJECT_BINARY_DIR}/ferry.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/ferry.pc DESTINATION ${FERRY_PC_DIR})
