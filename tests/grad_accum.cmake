# grad_accum.cmake — gradient accumulation end to end (tests/test_grad_accum.sh): train
# --grad-accum K against the plain step, twice, stopped/resumed, bad K, and the plan.
if(TARGET train AND TARGET ckpt AND TARGET plan AND TARGET dp_compare)
  add_test(NAME grad_accum COMMAND bash ${CMAKE_SOURCE_DIR}/tests/test_grad_accum.sh
                                   $<TARGET_FILE:train> $<TARGET_FILE:dp_compare>
                                   $<TARGET_FILE:ckpt> $<TARGET_FILE:plan>)
  set_tests_properties(grad_accum PROPERTIES TIMEOUT 300)
endif()
