# dp_mpi.cmake — data parallel end to end (tests/test_dp_mpi.sh): train under mpirun with 2
# ranks against 1 rank, twice, and stopped/resumed. Needs MPI in the build and mpirun.
if(TARGET train AND TARGET ckpt AND TARGET sg_ckpt)
  add_executable(dp_compare ${CMAKE_SOURCE_DIR}/tests/dp_compare.c)
  target_link_libraries(dp_compare PRIVATE sg_ckpt m)
  if(SG_HAVE_MPI)
    find_program(SG_MPIRUN NAMES mpirun mpiexec)
    add_test(NAME dp_mpi COMMAND bash ${CMAKE_SOURCE_DIR}/tests/test_dp_mpi.sh
                                 $<TARGET_FILE:train> $<TARGET_FILE:dp_compare>
                                 $<TARGET_FILE:ckpt> ${SG_MPIRUN})
    set_tests_properties(dp_mpi PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77)
  endif()
endif()
