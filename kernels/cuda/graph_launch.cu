/* graph_launch.cu — the step's graph launched from the device (SG_GRAPH_LAUNCH=device,
 * graph/backend_cuda.c; docs/design-notes.md says why).
 *
 * The host time of cudaGraphLaunch grows with the graph (28 us for 674 nodes at unet_cifar batch
 * 8 in the fourth GPU session, 97 us for unet_adm64's 1658; DESIGN.md's target is 20 us a
 * replayed step). A graph instantiated with cudaGraphInstantiateFlagDeviceLaunch may be launched
 * by a kernel of another graph; launched into cudaStreamGraphTailLaunch, it runs after the
 * launching graph completes, as part of the same launch from the host. So the host launches a
 * graph of one node, graph_tail_launch_kernel, which tail-launches the step: the host's cost is
 * that of one node whatever the step's size.
 *
 * A device-side launch that fails returns an error to the kernel alone: the kernel stores it in
 * *status (sticky: only a failure writes), which the backend reads at every synchronisation, so
 * a step that did not run is never taken for one that did.
 *
 * The device runtime's cudaGraphLaunch needs relocatable device code (-rdc, cudadevrt): this
 * file is its own library, kernels/CMakeLists.txt, so that no other kernel is compiled so. */
#include "kernels/cuda/cuda_common.cuh"

/* One thread: the step's executable graph (a handle passed as an integer: the emulation checks
 * every pointer argument against its allocations) launched at the tail of this graph. */
__global__ void graph_tail_launch_kernel(unsigned long long step, int *status) {
    SG_PDL_ENTER();
    const cudaError_t e = cudaGraphLaunch((cudaGraphExec_t)step, cudaStreamGraphTailLaunch);
    if (e != cudaSuccess) *status = (int)e;
}

extern "C" int sg_cuda_graph_launcher(cudaGraph_t *out, cudaGraphExec_t step, int *status) {
    SG_ARG_CHECK(out && step && status, "sg_cuda_graph_launcher: no graph, step or status");
    *out = NULL;
    cudaGraph_t g = NULL;
    cudaError_t e = cudaGraphCreate(&g, 0);
    unsigned long long handle = (unsigned long long)(uintptr_t)step;
    void *args[] = {&handle, &status};
    /* func, grid, block, shared memory, kernelParams, extra (positional: the emulation's
     * built-in variables are macros named like two of the fields) */
    const struct cudaKernelNodeParams kp = {
        SG_KERNEL_NODE_FUNC(graph_tail_launch_kernel), dim3(1), dim3(1), 0, args, NULL};
    cudaGraphNode_t k = NULL;
    if (e == cudaSuccess) e = cudaGraphAddKernelNode(&k, g, NULL, 0, &kp);
    if (e != cudaSuccess) {
        if (g) cudaGraphDestroy(g);
        return sg_set_error("building the step's launcher graph: %s", cudaGetErrorString(e));
    }
    *out = g;
    return SG_OK;
}
