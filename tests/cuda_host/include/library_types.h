/* library_types.h — the CUDA host emulation's stand-in (tests/cuda_host): the data types the
 * libraries name (cuBLAS, cuBLASLt, and cuDNN's headers, which include this file by name). */
#ifndef SG_SIM_LIBRARY_TYPES_H
#define SG_SIM_LIBRARY_TYPES_H

typedef enum cudaDataType_t { CUDA_R_16F = 2, CUDA_R_16BF = 14, CUDA_R_32F = 0 } cudaDataType_t;
typedef cudaDataType_t cudaDataType;

typedef enum libraryPropertyType_t {
    MAJOR_VERSION,
    MINOR_VERSION,
    PATCH_LEVEL
} libraryPropertyType;

#endif
