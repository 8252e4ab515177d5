# One packaging test (see CMakeLists.txt here), run by ctest as `cmake -DMODE=... -P`:
#   install           cmake --install FERRY_BINARY_DIR --prefix PREFIX, and check what is there
#   find_package      build and run README.md's example with consumer/ against PREFIX
#   pkg_config        compile and link it with `pkg-config --cflags --libs ferry` against PREFIX
#   add_subdirectory  build and run it with consumer/ taking Ferry's sources as a subproject
# Every mode but install works in WORK, made fresh; it is removed when the test passes and kept
# (and named) when it fails.
cmake_minimum_required(VERSION 3.25)

foreach(var MODE FERRY_SOURCE_DIR FERRY_BINARY_DIR PREFIX WORK CXX NINJA JOBS EXPECTED)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "packaging_test.cmake: -D${var}=... is required")
  endif()
endforeach()
if(DEFINED ENV{FERRY_JOBS})
  set(JOBS $ENV{FERRY_JOBS})
endif()

# run(<what> COMMAND ...): runs the command, its output shown as it comes; stops on failure.
function(run what)
  string(TIMESTAMP start "%s")
  message(STATUS "packaging: ${what}")
  execute_process(${ARGN} RESULT_VARIABLE result)
  string(TIMESTAMP end "%s")
  math(EXPR seconds "${end} - ${start}")
  if(NOT result EQUAL 0)
    fail("${what} failed (${result}) after ${seconds} s")
  endif()
  message(STATUS "packaging: ${what}: ${seconds} s")
endfunction()

function(fail message)
  if(NOT MODE STREQUAL "install")
    string(APPEND message "\n(the test's files are kept in ${WORK})")
  endif()
  message(FATAL_ERROR "${message}")
endfunction()

# Runs the example built at `exe`: it must exit with 0 and print the sum line.
function(run_example exe)
  execute_process(COMMAND ${exe} RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("${out}${err}")
  if(NOT result EQUAL 0)
    fail("README.md's example exited with ${result}")
  endif()
  string(FIND "${out}" "${EXPECTED}" at)
  if(at EQUAL -1)
    fail("README.md's example did not print `${EXPECTED}`")
  endif()
endfunction()

# The app's sources: README.md's example, as README.md shows it.
function(extract_example out)
  run("extracting README.md's example"
      COMMAND ${CMAKE_COMMAND} -DREADME=${FERRY_SOURCE_DIR}/README.md -DNAME=readme_example.cc
              -DOUT=${out} -P ${CMAKE_CURRENT_LIST_DIR}/extract_example.cmake)
endfunction()

if(MODE STREQUAL "install")
  file(REMOVE_RECURSE ${PREFIX})
  run("cmake --install ${FERRY_BINARY_DIR} --prefix ${PREFIX}"
      COMMAND ${CMAKE_COMMAND} --install ${FERRY_BINARY_DIR} --prefix ${PREFIX})
  foreach(file IN ITEMS include/ferry/ferry.h include/ferry/runtime/runtime.h
                        ${LIBDIR}/libferry_runtime.a ${LIBDIR}/cmake/Ferry/FerryConfig.cmake
                        ${LIBDIR}/cmake/Ferry/FerryConfigVersion.cmake
                        ${LIBDIR}/cmake/Ferry/FerryTargets.cmake ${LIBDIR}/pkgconfig/ferry.pc)
    if(NOT EXISTS ${PREFIX}/${file})
      fail("cmake --install did not install ${file}")
    endif()
  endforeach()
  file(GLOB_RECURSE internal RELATIVE ${PREFIX}/include/ferry ${PREFIX}/include/ferry/*)
  list(FILTER internal INCLUDE REGEX "(^|/)internal/")
  if(internal)
    fail("internal headers were installed: ${internal}")
  endif()
  return()
endif()

file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
extract_example(${WORK}/readme_example.cc)
set(build ${WORK}/build)

if(MODE STREQUAL "find_package")
  run("configuring the app with find_package(Ferry) from ${PREFIX}"
      COMMAND ${CMAKE_COMMAND} -S ${CMAKE_CURRENT_LIST_DIR}/consumer -B ${build} -G Ninja
              -DCMAKE_MAKE_PROGRAM=${NINJA} -DCMAKE_CXX_COMPILER=${CXX}
              -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=${PREFIX}
              -DEXAMPLE_SOURCE=${WORK}/readme_example.cc
              -DEXPECT_FERRY_HAVE_CUDA=${EXPECT_FERRY_HAVE_CUDA})
  run("building the app"
      COMMAND ${CMAKE_COMMAND} --build ${build} -j ${JOBS})
  run_example(${build}/readme_example)

elseif(MODE STREQUAL "pkg_config")
  if(NOT PKG_CONFIG OR NOT EXISTS "${PKG_CONFIG}")
    # Matched by the test's SKIP_REGULAR_EXPRESSION.
    message("packaging: skipped: pkg-config is not installed")
    file(REMOVE_RECURSE ${WORK})
    return()
  endif()
  set(pc_env ${CMAKE_COMMAND} -E env PKG_CONFIG_PATH=${PREFIX}/${LIBDIR}/pkgconfig)
  execute_process(COMMAND ${pc_env} ${PKG_CONFIG} --cflags --libs ferry
                  RESULT_VARIABLE result OUTPUT_VARIABLE flags ERROR_VARIABLE err
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT result EQUAL 0)
    fail("pkg-config --cflags --libs ferry failed:\n${err}")
  endif()
  message(STATUS "packaging: pkg-config --cflags --libs ferry: ${flags}")
  separate_arguments(flags UNIX_COMMAND "${flags}")
  run("compiling and linking the example with pkg-config's flags"
      COMMAND ${CXX} ${WORK}/readme_example.cc -o ${WORK}/readme_example ${flags})
  run_example(${WORK}/readme_example)

elseif(MODE STREQUAL "add_subdirectory")
  # No build type: a subproject that set its own would show. The CUDA parts are left out to keep
  # this second build of Ferry's libraries short.
  run("configuring the app with add_subdirectory(${FERRY_SOURCE_DIR})"
      COMMAND ${CMAKE_COMMAND} -S ${CMAKE_CURRENT_LIST_DIR}/consumer -B ${build} -G Ninja
              -DCMAKE_MAKE_PROGRAM=${NINJA} -DCMAKE_CXX_COMPILER=${CXX}
              -DFERRY_SOURCE_DIR=${FERRY_SOURCE_DIR} -DFERRY_CUDA=OFF
              -DEXAMPLE_SOURCE=${WORK}/readme_example.cc)

  # Neither tests nor benchmarks among the targets, and no ctest files.
  execute_process(COMMAND ${CMAKE_COMMAND} --build ${build} --target help
                  RESULT_VARIABLE result OUTPUT_VARIABLE targets)
  if(NOT result EQUAL 0)
    fail("cmake --build ${build} --target help failed")
  endif()
  # Lines "path/to/target: rule"; the names, not the paths (the app's own is under tests/).
  string(REGEX MATCHALL "[^\n:]+: [A-Za-z_]+" targets "${targets}")
  set(unwanted "")
  foreach(line IN LISTS targets)
    string(REGEX REPLACE "^(.*/)?([^/]+): .*$" "\\2" name "${line}")
    if(name MATCHES "test|gtest|gmock|bench")
      list(APPEND unwanted ${name})
    endif()
  endforeach()
  if(unwanted)
    fail("Ferry as a subproject configured test or benchmark targets:\n${unwanted}")
  endif()
  if(EXISTS ${build}/ferry/CTestTestfile.cmake)
    fail("Ferry as a subproject registered tests (${build}/ferry/CTestTestfile.cmake)")
  endif()

  # The app's default build makes the app and what it links, none of Ferry's own executables.
  execute_process(COMMAND ${NINJA} -C ${build} -n RESULT_VARIABLE result OUTPUT_VARIABLE plan)
  if(NOT result EQUAL 0)
    fail("ninja -n in ${build} failed")
  endif()
  string(REGEX MATCHALL "Linking [A-Z]+ executable [^\n]*" executables "${plan}")
  list(FILTER executables EXCLUDE REGEX " readme_example$")
  if(executables)
    fail("the app's default build would build Ferry's executables:\n${executables}")
  endif()

  run("building the app and Ferry's libraries (-j ${JOBS})"
      COMMAND ${CMAKE_COMMAND} --build ${build} -j ${JOBS})
  run_example(${build}/readme_example)

else()
  message(FATAL_ERROR "packaging_test.cmake: unknown MODE ${MODE}")
endif()

file(REMOVE_RECURSE ${WORK})
