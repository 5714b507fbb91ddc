# dp_mpi.cmake — data parallel: graph/dist.c's all-reduce on 4 ranks (tests/test_dist.c), and
# end to end (tests/test_dp_mpi.sh): train under mpirun with 2 ranks against 1 rank, twice,
# and stopped/resumed. Needs MPI in the build and mpirun.
if(TARGET train AND TARGET ckpt AND TARGET sg_ckpt)
  add_executable(dp_compare ${CMAKE_SOURCE_DIR}/tests/dp_compare.c)
  target_link_libraries(dp_compare PRIVATE sg_ckpt m)
  if(SG_HAVE_MPI)
    find_program(SG_MPIRUN NAMES mpirun mpiexec)
    add_test(NAME dp_mpi COMMAND bash ${CMAKE_SOURCE_DIR}/tests/test_dp_mpi.sh
                                 $<TARGET_FILE:train> $<TARGET_FILE:dp_compare>
                                 $<TARGET_FILE:ckpt> ${SG_MPIRUN})
    set_tests_properties(dp_mpi PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77)
    # the fixed-order all-reduce itself on 4 ranks (with 2, x0 + x1 = x1 + x0 hides any order)
    add_executable(test_dist ${CMAKE_SOURCE_DIR}/tests/test_dist.c)
    target_link_libraries(test_dist PRIVATE sg_graph)
    add_test(NAME dist_mpi COMMAND ${SG_MPIRUN} --oversubscribe -np 4 $<TARGET_FILE:test_dist>)
    set_tests_properties(dist_mpi PROPERTIES TIMEOUT 120 ENVIRONMENT
      "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_btl_vader_single_copy_mechanism=none")
    # and on 2 ranks, which Open MPI binds to a core each where there are two (4 ranks on fewer
    # cores run unbound): cpu_sharers then counts disjoint masks, not one shared one
    add_test(NAME dist_mpi_2 COMMAND ${SG_MPIRUN} --oversubscribe -np 2 $<TARGET_FILE:test_dist>)
    set_tests_properties(dist_mpi_2 PROPERTIES TIMEOUT 120 ENVIRONMENT
      "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_btl_vader_single_copy_mechanism=none")
  endif()
endif()
