# diffusers.cmake — diffusers interop. test_ckpt_safetensors: the safetensors reader and the
# config translation of checkpoints/, no diffusers needed (also under ASan).
# diffusers_interop: stepgraph against the real diffusers (tests/diffusers_interop.py):
# ckpt export --diffusers -> from_pretrained -> the same predicted noise; diffusers weights ->
# --init-from / --weights -> the same; DDPMPipeline from an exported folder draws images.
# The venv with the pinned diffusers is made by the test itself (tests/diffusers_interop.sh);
# skipped (77) only where it cannot be installed.
add_executable(test_ckpt_safetensors ${CMAKE_SOURCE_DIR}/tests/test_ckpt_safetensors.c)
target_link_libraries(test_ckpt_safetensors PRIVATE sg_ckpt)
add_test(NAME test_ckpt_safetensors COMMAND test_ckpt_safetensors)
set_tests_properties(test_ckpt_safetensors PROPERTIES LABELS asan TIMEOUT 120)

if(TARGET sg_graph AND TARGET train AND TARGET ckpt AND TARGET sample)
  add_executable(sg_forward_dump ${CMAKE_SOURCE_DIR}/tests/sg_forward_dump.c)
  target_link_libraries(sg_forward_dump PRIVATE sg_graph)
  add_dependencies(sg_forward_dump train ckpt sample)
  add_test(NAME diffusers_interop
           COMMAND sh ${CMAKE_SOURCE_DIR}/tests/diffusers_interop.sh ${CMAKE_BINARY_DIR}
                   ${CMAKE_SOURCE_DIR})
  set_tests_properties(diffusers_interop PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900)
endif()

# Replay of the weights fuzz corpus (tests/fuzz/README.md): a diffusers folder -> its config
# -> a forward plan -> every parameter from its safetensors file (also under ASan).
if(TARGET sg_graph)
  sg_corpus_test(test_weights_corpus weights_fuzz_one weights_fuzz_target.c weights_corpus sg_graph)
endif()
