/* backend_nocuda.c — what the CUDA entry points say in a build without CUDA. */
#include "graph/backend.h"

#ifndef SG_HAVE_CUDA
sg_backend *sg_backend_cuda_create(int dev, int use_graph) {
    (void)dev, (void)use_graph;
    sg_set_error("this build has no CUDA backend (nvcc was not found at configure time)");
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
