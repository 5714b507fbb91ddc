# rng_data.cmake — tests of common/philox.h, the CPU random/data kernels (kernels/cpu/rng_ops.c),
# the dataset loaders (data/dataset.c) and the PNG writers (data/image_io.c).
add_executable(test_philox ${CMAKE_SOURCE_DIR}/tests/test_philox.c)
target_link_libraries(test_philox PRIVATE sg_common m)
add_test(NAME test_philox COMMAND test_philox)

add_executable(test_rng_ops ${CMAKE_SOURCE_DIR}/tests/test_rng_ops.c)
target_link_libraries(test_rng_ops PRIVATE sg_kernels_cpu sg_common m)
add_test(NAME test_rng_ops COMMAND test_rng_ops)

# test_data writes ~150 MB of fake CIFAR-10 batches to a temporary folder and removes them.
add_executable(test_data ${CMAKE_SOURCE_DIR}/tests/test_data.c)
target_link_libraries(test_data PRIVATE sg_data sg_common PkgConfig::ZLIB m)
add_test(NAME test_data COMMAND test_data)

add_executable(test_image_io ${CMAKE_SOURCE_DIR}/tests/test_image_io.c)
target_link_libraries(test_image_io PRIVATE sg_data sg_common PkgConfig::PNG m)
add_test(NAME test_image_io COMMAND test_image_io)

add_executable(test_image_folder ${CMAKE_SOURCE_DIR}/tests/test_image_folder.c)
target_link_libraries(test_image_folder PRIVATE sg_data sg_common PkgConfig::PNG PkgConfig::JPEG)
add_test(NAME test_image_folder COMMAND test_image_folder)
# Replay of the data fuzz corpus (tests/fuzz/README.md): each input as IDX images, a PNG and a
# JPEG (also under ASan).
sg_corpus_test(test_data_corpus data_fuzz_one data_fuzz_target.c data_corpus sg_data sg_common)
