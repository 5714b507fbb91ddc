# verify_tests.cmake — the reproducibility checker end to end (tests/test_verify.sh over build/verify).
if(TARGET verify)
  add_test(NAME verify_cli COMMAND bash ${CMAKE_SOURCE_DIR}/tests/test_verify.sh $<TARGET_FILE:verify>)
  set_tests_properties(verify_cli PROPERTIES TIMEOUT 120)
endif()
