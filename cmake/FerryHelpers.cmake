# ferry_library(NAME SOURCES ... PUBLIC_DEPS ... PRIVATE_DEPS ...)
# Adds the static library ferry_NAME with the alias ferry::NAME (exported as ferry::NAME too).
# Its users include Ferry's headers as "ferry/memory/device.h", in the build tree
# (FERRY_INCLUDE_ROOT) and installed alike; generated headers are the library's own business.
function(ferry_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;PUBLIC_DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(ferry_${name} STATIC ${ARG_SOURCES})
  add_library(ferry::${name} ALIAS ferry_${name})
  set_target_properties(ferry_${name} PROPERTIES EXPORT_NAME ${name})
  target_include_directories(ferry_${name}
    PUBLIC $<BUILD_INTERFACE:${FERRY_INCLUDE_ROOT}> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
    PRIVATE ${PROJECT_BINARY_DIR})
  # The public headers are C++20 (memory/device.h defaults operator<=>), so users compile as such.
  target_compile_features(ferry_${name} PUBLIC cxx_std_20)
  target_compile_options(ferry_${name} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${FERRY_WARNINGS}>)
  target_link_libraries(ferry_${name} PUBLIC ${ARG_PUBLIC_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
endfunction()

# ferry_test(NAME SOURCES ... DEPS ... [LABELS ...] [TEST_PREFIX prefix] [NO_PRETTY_VALUES]
#            [SEES_GPUS])
# One gtest binary; its tests are discovered by ctest one by one. Sources may be .cu (CUDA builds).
# TEST_PREFIX is put before every ctest name; NO_PRETTY_VALUES keeps value-parameterized names as
# the test named them, without the printed parameter. Under ctest, a test binary without SEES_GPUS
# runs with CUDA_VISIBLE_DEVICES empty: its programs' cuda:N run on the sim:N stand-ins on every
# machine, as the expectations of such tests assume; SEES_GPUS tests (the `cuda` tests and the
# conformance cases) run on the machine's GPUs where it has them.
function(ferry_test name)
  cmake_parse_arguments(ARG "NO_PRETTY_VALUES;SEES_GPUS" "TEST_PREFIX" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_compile_options(${name} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${FERRY_WARNINGS}>)
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} ferry::testing GTest::gmock GTest::gtest_main)
  set(props PROPERTIES)
  if(ARG_LABELS)
    list(APPEND props LABELS "${ARG_LABELS}")
  endif()
  # Every program a test loads is checked against the model's invariants (VerifyMethodDef), in
  # every build type: a reader's bug fails the test that loads the program it misreads.
  # (One variable a property: a list would be split on its way through gtest_discover_tests.)
  list(APPEND props ENVIRONMENT_MODIFICATION "FERRY_VERIFY_METHODS=set:1")
  if(NOT ARG_SEES_GPUS)
    list(APPEND props ENVIRONMENT "CUDA_VISIBLE_DEVICES=")
  endif()
  set(discovery "")
  if(ARG_TEST_PREFIX)
    list(APPEND discovery TEST_PREFIX "${ARG_TEST_PREFIX}")
  endif()
  if(ARG_NO_PRETTY_VALUES)
    list(APPEND discovery NO_PRETTY_VALUES)
  endif()
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 ${discovery} ${props})
endfunction()
