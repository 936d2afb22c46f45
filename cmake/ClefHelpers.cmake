# Helpers shared by tests/, bench/ and fuzz/.

# clef_add_test(NAME name SOURCES a.c b.c [ARGS ...] [LABELS ...])
# Builds one test program against libclef and registers it with ctest. Tests run from the
# source tree root so that fixture paths are relative to it.
function(clef_add_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;ARGS;LABELS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  target_include_directories(${T_NAME} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  target_link_libraries(${T_NAME} PRIVATE clef_static)
  add_test(NAME ${T_NAME} COMMAND ${T_NAME} ${T_ARGS} WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  if(T_LABELS)
    set_tests_properties(${T_NAME} PROPERTIES LABELS "${T_LABELS}")
  endif()
  if(T_TIMEOUT)
    set_tests_properties(${T_NAME} PROPERTIES TIMEOUT ${T_TIMEOUT})
  else()
    set_tests_properties(${T_NAME} PROPERTIES TIMEOUT 600)
  endif()
endfunction()

# clef_add_fuzz_target(NAME name SOURCE fuzz/x.c CORPUS fuzz/corpus/x)
# A fuzz target defines LLVMFuzzerTestOneInput. Every build makes `name_replay` (the target
# plus fuzz/replay_main.c) and a ctest that runs it over the committed corpus, so CI replays
# the corpus under the sanitizer build. With -DCLEF_FUZZ=ON (clang) it also makes `name`,
# the libFuzzer binary for real campaigns (see docs/fuzzing.md).
function(clef_add_fuzz_target)
  cmake_parse_arguments(F "" "NAME;SOURCE;CORPUS" "" ${ARGN})
  add_executable(${F_NAME}_replay ${F_SOURCE} ${PROJECT_SOURCE_DIR}/fuzz/replay_main.c)
  target_link_libraries(${F_NAME}_replay PRIVATE clef_static)
  add_test(NAME fuzz_replay_${F_NAME} COMMAND ${F_NAME}_replay ${PROJECT_SOURCE_DIR}/${F_CORPUS}
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(fuzz_replay_${F_NAME} PROPERTIES LABELS fuzz TIMEOUT 600)
  if(CLEF_FUZZ)
    add_executable(${F_NAME} ${F_SOURCE})
    target_link_libraries(${F_NAME} PRIVATE clef_static)
    target_link_options(${F_NAME} PRIVATE -fsanitize=fuzzer)
  endif()
endfunction()
