# The whole training step of the CPU backend against the independent PyTorch reference
# (tools/torch_ref). Skips (77) only where PyTorch is absent; .ci/run installs it.
if(TARGET sg_graph)
  add_executable(test_torch_parity ${CMAKE_SOURCE_DIR}/tests/test_torch_parity.c)
  target_link_libraries(test_torch_parity PRIVATE sg_graph)
  add_test(NAME torch_parity_tiny COMMAND test_torch_parity unet_tiny 2 ${CMAKE_SOURCE_DIR})
  add_test(NAME torch_parity_cifar COMMAND test_torch_parity unet_cifar 2 ${CMAKE_SOURCE_DIR})
  set_tests_properties(torch_parity_tiny torch_parity_cifar PROPERTIES SKIP_RETURN_CODE 77)
  set_tests_properties(torch_parity_cifar PROPERTIES TIMEOUT 900)
endif()
add_test(NAME torch_ref_selftest COMMAND /usr/bin/python3 ${CMAKE_SOURCE_DIR}/tests/torch_ref_selftest.py --skip-bench)
set_tests_properties(torch_ref_selftest PROPERTIES TIMEOUT 600)
