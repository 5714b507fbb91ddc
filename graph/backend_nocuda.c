/* backend_nocuda.c — what the CUDA entry points say in a build without CUDA. Every tool's
 * "no CUDA backend" message is this one: it names why, as CMake configured the build
 * (SG_NO_CUDA_BY_OPTION: -DSG_NO_CUDA=ON; otherwise nvcc was not found). */
#include "graph/backend.h"

#ifndef SG_HAVE_CUDA
#ifdef SG_NO_CUDA_BY_OPTION
#define SG_NO_CUDA_REASON "it was configured with -DSG_NO_CUDA=ON"
#else
#define SG_NO_CUDA_REASON "nvcc was not found at configure time"
#endif

sg_backend *sg_backend_cuda_create(int dev, int use_graph) {
    (void)dev, (void)use_graph;
    sg_set_error("this build has no CUDA backend (" SG_NO_CUDA_REASON ")");
    return NULL;
}

int sg_cuda_available(void) {
    return 0;
}

int sg_cuda_device_count(void) {
    return 0;
}
#else
typedef int sg_backend_nocuda_unused; /* ISO C forbids an empty translation unit */
#endif
