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

# gpuvm_fuzz(NAME name SOURCES fuzz/name.cc LIBS lib ... [KERNEL_CORPUS_SEEDS])
# A libFuzzer target; built only in the clang fuzz build (make fuzz). One layout everywhere: the
# target's source is <component>/fuzz/<name>.cc and its committed seeds <component>/fuzz/<name>/
# (scripts/fuzz.sh finds them by name). KERNEL_CORPUS_SEEDS: the kernel corpus's PTX
# (bench/kernels/*.ptx, gpuvm_kernel_corpus's GPUVM_CORPUS_PTX) are seeds too, copied at build time
# into <build>/fuzz-seeds/<name>/, so that no seed folder keeps a copy of a corpus file.
function(gpuvm_fuzz)
  cmake_parse_arguments(F "KERNEL_CORPUS_SEEDS" "NAME" "SOURCES;LIBS" ${ARGN})
  if(NOT GPUVM_FUZZ)
    return()
  endif()
  add_executable(${F_NAME} ${F_SOURCES})
  target_link_libraries(${F_NAME} PRIVATE ${F_LIBS} Threads::Threads)
  target_link_options(${F_NAME} PRIVATE -fsanitize=fuzzer)
  set_property(GLOBAL APPEND PROPERTY GPUVM_FUZZ_TARGETS ${F_NAME})
  if(F_KERNEL_CORPUS_SEEDS)
    set(seeds ${CMAKE_BINARY_DIR}/fuzz-seeds/${F_NAME})
    set(corpus_ptx "$<TARGET_PROPERTY:gpuvm_kernel_corpus,GPUVM_CORPUS_PTX>")
    add_custom_command(
      OUTPUT ${seeds}.stamp
      COMMAND ${CMAKE_COMMAND} -E rm -rf ${seeds}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${seeds}
      COMMAND ${CMAKE_COMMAND} -E copy ${corpus_ptx} ${seeds}
      COMMAND ${CMAKE_COMMAND} -E touch ${seeds}.stamp
      DEPENDS ${corpus_ptx}
      COMMENT "Kernel corpus PTX as seeds of ${F_NAME}"
      COMMAND_EXPAND_LISTS VERBATIM)
    add_custom_target(${F_NAME}_corpus_seeds DEPENDS ${seeds}.stamp)
    add_dependencies(${F_NAME} ${F_NAME}_corpus_seeds)
  endif()
endfunction()

# gpuvm_sanitizer_preload(OUT_VAR)
# Under GPUVM_SANITIZE our libraries are instrumented but the programs nvcc builds are not: their
# processes must load the sanitizer runtimes first. Sets OUT_VAR to the runtimes' paths joined by
# ':' (an LD_PRELOAD value), or to nothing when the build is not sanitized.
function(gpuvm_sanitizer_preload OUT_VAR)
  set(preload)
  if(GPUVM_SANITIZE)
    foreach(rt libasan.so libubsan.so)
      execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=${rt}
                      OUTPUT_VARIABLE rt_path OUTPUT_STRIP_TRAILING_WHITESPACE)
      if(EXISTS "${rt_path}")
        list(APPEND preload ${rt_path})
      endif()
    endforeach()
    string(REPLACE ";" ":" preload "${preload}")
  endif()
  set(${OUT_VAR} "${preload}" PARENT_SCOPE)
endfunction()
