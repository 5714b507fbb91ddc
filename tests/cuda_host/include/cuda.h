/* cuda.h — the host stand-in for the CUDA driver API (tests/cuda_host only): the tensor-map
 * subset the Hopper kernels use (kernels/cuda/hopper.cuh), with the real names, types, enum
 * values and signatures (copied from the CUDA 13 header: they are API facts). C-compatible.
 * The implementation is tests/cuda_host/sim_hopper.cpp: cuTensorMapEncodeTiled and
 * cuTensorMapEncodeIm2col validate their arguments as the driver API documents (and, where the
 * emulated copy engine cannot place the bytes exactly, refuse with a message saying so), then
 * encode them into the opaque 128 bytes for the emulated cp.async.bulk.tensor to read back.
 * Never on the include path of the shipping build.
 */
#ifndef SG_SIM_CUDA_H
#define SG_SIM_CUDA_H

#include <stddef.h>
#include <stdint.h>

#define CUDA_VERSION 13000

#ifdef __cplusplus
extern "C" {
#endif

typedef uint32_t cuuint32_t;
typedef uint64_t cuuint64_t;

typedef enum cudaError_enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_NOT_SUPPORTED = 801
} CUresult;

#define CU_TENSOR_MAP_NUM_QWORDS 16

typedef struct CUtensorMap_st {
#if defined(__cplusplus) && (__cplusplus >= 201103L)
    alignas(128)
#elif __STDC_VERSION__ >= 201112L
    _Alignas(128)
#endif
        cuuint64_t opaque[CU_TENSOR_MAP_NUM_QWORDS];
} CUtensorMap;

typedef enum CUtensorMapDataType_enum {
    CU_TENSOR_MAP_DATA_TYPE_UINT8 = 0,
    CU_TENSOR_MAP_DATA_TYPE_UINT16,
    CU_TENSOR_MAP_DATA_TYPE_UINT32,
    CU_TENSOR_MAP_DATA_TYPE_INT32,
    CU_TENSOR_MAP_DATA_TYPE_UINT64,
    CU_TENSOR_MAP_DATA_TYPE_INT64,
    CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
    CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
    CU_TENSOR_MAP_DATA_TYPE_FLOAT64,
    CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
    CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ,
    CU_TENSOR_MAP_DATA_TYPE_TFLOAT32,
    CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ,
    CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B,
    CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B,
    CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B
} CUtensorMapDataType;

typedef enum CUtensorMapInterleave_enum {
    CU_TENSOR_MAP_INTERLEAVE_NONE = 0,
    CU_TENSOR_MAP_INTERLEAVE_16B,
    CU_TENSOR_MAP_INTERLEAVE_32B
} CUtensorMapInterleave;

typedef enum CUtensorMapSwizzle_enum {
    CU_TENSOR_MAP_SWIZZLE_NONE = 0,
    CU_TENSOR_MAP_SWIZZLE_32B,
    CU_TENSOR_MAP_SWIZZLE_64B,
    CU_TENSOR_MAP_SWIZZLE_128B,
    CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B,
    CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B_FLIP_8B,
    CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B
} CUtensorMapSwizzle;

typedef enum CUtensorMapL2promotion_enum {
    CU_TENSOR_MAP_L2_PROMOTION_NONE = 0,
    CU_TENSOR_MAP_L2_PROMOTION_L2_64B,
    CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
    CU_TENSOR_MAP_L2_PROMOTION_L2_256B
} CUtensorMapL2promotion;

typedef enum CUtensorMapFloatOOBfill_enum {
    CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0,
    CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA
} CUtensorMapFloatOOBfill;

CUresult cuTensorMapEncodeTiled(CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType,
                                cuuint32_t tensorRank, void *globalAddress,
                                const cuuint64_t *globalDim, const cuuint64_t *globalStrides,
                                const cuuint32_t *boxDim, const cuuint32_t *elementStrides,
                                CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                                CUtensorMapL2promotion l2Promotion,
                                CUtensorMapFloatOOBfill oobFill);

CUresult cuTensorMapEncodeIm2col(CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType,
                                 cuuint32_t tensorRank, void *globalAddress,
                                 const cuuint64_t *globalDim, const cuuint64_t *globalStrides,
                                 const int *pixelBoxLowerCorner, const int *pixelBoxUpperCorner,
                                 cuuint32_t channelsPerPixel, cuuint32_t pixelsPerColumn,
                                 const cuuint32_t *elementStrides, CUtensorMapInterleave interleave,
                                 CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion,
                                 CUtensorMapFloatOOBfill oobFill);

#ifdef __cplusplus
}
#endif

#endif
