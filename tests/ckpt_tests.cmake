# ckpt_tests.cmake — tests of the checkpoint library (checkpoints/), the `ckpt` CLI (tools/ckpt.c),
# the safetensors export and the fuzz corpus replay.
set(SG_CKPT_TESTS test_ckpt_hash test_ckpt_roundtrip test_ckpt_corrupt test_ckpt_faults
    test_ckpt_rotate test_ckpt_json)
foreach(t ${SG_CKPT_TESTS})
  add_executable(${t} ${CMAKE_SOURCE_DIR}/tests/${t}.c)
  target_link_libraries(${t} PRIVATE sg_ckpt)
  add_test(NAME ${t} COMMAND ${t})
  set_tests_properties(${t} PROPERTIES TIMEOUT 60)
endforeach()

# Fixture: a small UNet checkpoint (+ a copy, a changed one, a damaged one) for the CLI tests.
set(SG_CKPT_FIXTURE_DIR ${CMAKE_BINARY_DIR}/ckpt_fixture)
add_executable(test_ckpt_fixture ${CMAKE_SOURCE_DIR}/tests/test_ckpt_fixture.c)
target_link_libraries(test_ckpt_fixture PRIVATE sg_ckpt)
add_test(NAME test_ckpt_fixture COMMAND test_ckpt_fixture ${SG_CKPT_FIXTURE_DIR})
set_tests_properties(test_ckpt_fixture PROPERTIES FIXTURES_SETUP ckpt_fixture TIMEOUT 60)

add_executable(test_ckpt_cli ${CMAKE_SOURCE_DIR}/tests/test_ckpt_cli.c)
target_link_libraries(test_ckpt_cli PRIVATE sg_ckpt)
add_dependencies(test_ckpt_cli ckpt)
add_test(NAME test_ckpt_cli COMMAND test_ckpt_cli $<TARGET_FILE:ckpt> ${SG_CKPT_FIXTURE_DIR})
set_tests_properties(test_ckpt_cli PROPERTIES FIXTURES_REQUIRED ckpt_fixture TIMEOUT 60)

# The safetensors export, checked by an independent Python reader (json/struct only).
# Skipped (77) only where /usr/bin/python3 is absent.
add_test(NAME ckpt_export_check
         COMMAND sh -c "if [ -x /usr/bin/python3 ]; then exec /usr/bin/python3 \"$0\" \"$1\" \"$2\"; else echo 'no /usr/bin/python3'; exit 77; fi"
                 ${CMAKE_SOURCE_DIR}/tests/ckpt_export_check.py $<TARGET_FILE:ckpt> ${SG_CKPT_FIXTURE_DIR})
set_tests_properties(ckpt_export_check PROPERTIES FIXTURES_REQUIRED ckpt_fixture
                     SKIP_RETURN_CODE 77 TIMEOUT 120)

# Replay of the checkpoint fuzz corpus: the reader, the metadata JSON.
sg_corpus_test(test_ckpt_corpus ckpt_fuzz_one ckpt_fuzz_target.c corpus sg_ckpt)

# ckpt_bench's JSON report with user text in it (tests/test_ckpt_bench.sh)
if(TARGET ckpt_bench)
  add_test(NAME ckpt_bench_json COMMAND bash ${CMAKE_SOURCE_DIR}/tests/test_ckpt_bench.sh
                                        $<TARGET_FILE:ckpt_bench>)
  set_tests_properties(ckpt_bench_json PROPERTIES TIMEOUT 120)
endif()
