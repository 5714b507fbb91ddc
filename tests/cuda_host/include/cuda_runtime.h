/* cuda_runtime.h — the host stand-in's cuda_runtime.h: the runtime API and, for C++ built with
 * SG_CUDA_HOST (the .cu files compiled as host C++), the emulated execution model (cuda_sim.hpp:
 * __global__, threadIdx, __syncthreads, warp shuffles, SG_LAUNCH's host side).
 */
#ifndef SG_SIM_CUDA_RUNTIME_H
#define SG_SIM_CUDA_RUNTIME_H

#include "cuda_runtime_api.h"

#if defined(__cplusplus)
/* the C++ overload of the real header: any kernel pointer */
template <class T>
static inline cudaError_t cudaFuncSetAttribute(T *entry, enum cudaFuncAttribute attr, int value) {
    return cudaFuncSetAttribute((const void *)entry, attr, value);
}
template <class T>
static inline cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *attr, T *entry) {
    return cudaFuncGetAttributes(attr, (const void *)entry);
}
#if defined(SG_CUDA_HOST)
#include "cuda_sim.hpp"
#endif
#endif

#endif
