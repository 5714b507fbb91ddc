# cli.cmake — the tools' shared library (tools/cli.h) and the train CLI end to end.
if(TARGET sg_cli)
  add_executable(test_cli ${CMAKE_SOURCE_DIR}/tests/test_cli.c)
  target_link_libraries(test_cli PRIVATE sg_cli)
  add_test(NAME test_cli COMMAND test_cli)
endif()
if(TARGET train AND TARGET ckpt)
  add_test(NAME train_cli COMMAND bash ${CMAKE_SOURCE_DIR}/tests/test_train_cli.sh
                                  $<TARGET_FILE:train> $<TARGET_FILE:ckpt>)
  set_tests_properties(train_cli PROPERTIES TIMEOUT 300)
endif()
add_test(NAME launchers COMMAND bash ${CMAKE_SOURCE_DIR}/tests/test_launchers.sh ${CMAKE_SOURCE_DIR}
                                ${CMAKE_BINARY_DIR})
set_tests_properties(launchers PROPERTIES SKIP_RETURN_CODE 77)
# Replay of the config fuzz corpus (tests/fuzz/README.md): flags -> build -> plan -> verify.
if(TARGET sg_cli)
  sg_corpus_test(test_config_corpus config_fuzz_one config_fuzz_target.c config_corpus sg_cli)
endif()
