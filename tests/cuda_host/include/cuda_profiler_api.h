/* cuda_profiler_api.h — the host stand-in for the CUDA profiler API (tests/cuda_host only): the
 * real names and signatures. The emulation has no profiler: both calls check that a start and a
 * stop alternate (as a profiler's collection range would) and otherwise do nothing
 * (tests/cuda_host/sim_runtime.cpp). */
#ifndef SG_SIM_CUDA_PROFILER_API_H
#define SG_SIM_CUDA_PROFILER_API_H

#include "cuda_runtime_api.h"

#ifdef __cplusplus
extern "C" {
#endif

cudaError_t cudaProfilerStart(void);
cudaError_t cudaProfilerStop(void);

#ifdef __cplusplus
}
#endif

#endif
