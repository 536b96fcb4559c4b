# Helpers every component uses, so tests, benchmarks and fuzz targets are declared the same way.

# gpuvm_test(NAME name SOURCES a_test.cc ... LIBS lib ...)
# A GoogleTest binary; each TEST becomes its own CTest test (discovered when ctest runs, so the build
# stays fast). Unit tests sit beside their sources.
function(gpuvm_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;LIBS" ${ARGN})
  if(GPUVM_FUZZ)
    return()
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} GTest::gtest GTest::gmock GTest::gtest_main
                                          Threads::Threads)
  gtest_discover_tests(${T_NAME} DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 60
                       PROPERTIES TIMEOUT ${T_TIMEOUT})
endfunction()

# gpuvm_fuzz(NAME name SOURCES fuzz.cc LIBS lib ...)
# A libFuzzer target; built only in the clang fuzz build (make fuzz).
function(gpuvm_fuzz)
  cmake_parse_arguments(F "" "NAME" "SOURCES;LIBS" ${ARGN})
  if(NOT GPUVM_FUZZ)
    return()
  endif()
  add_executable(${F_NAME} ${F_SOURCES})
  target_link_libraries(${F_NAME} PRIVATE ${F_LIBS} Threads::Threads)
  target_link_options(${F_NAME} PRIVATE -fsanitize=fuzzer)
  set_property(GLOBAL APPEND PROPERTY GPUVM_FUZZ_TARGETS ${F_NAME})
endfunction()
