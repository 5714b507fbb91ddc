# bench_tests.cmake — build/bench on the CPU backend, and tools/bench.sh + tools/bench_report.py end
# to end with fake stepgraph / PyTorch programs (tests/test_bench.sh).
if(TARGET bench)
  add_test(NAME bench_cli COMMAND bash ${CMAKE_SOURCE_DIR}/tests/test_bench.sh $<TARGET_FILE:bench>)
  set_tests_properties(bench_cli PROPERTIES TIMEOUT 300)
endif()
# tools/ncu_summary.py (tools/gpu_profile.sh's report) on a hand-written CSV in ncu's raw layout
add_test(NAME ncu_summary COMMAND bash ${CMAKE_SOURCE_DIR}/tests/test_ncu_summary.sh)
