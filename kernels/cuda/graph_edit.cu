/* graph_edit.cu — the captured step's memset nodes as kernel nodes.
 *
 * cuDNN and cuBLASLt clear parts of their workspaces with cudaMemsetAsync, and a capture records
 * each as a memset node. The fourth GPU session found every step graph a straight line, yet a
 * launch cost 245 us of host time at unet_cifar batch 128 and 28 us at batch 8, for graphs of
 * about the same number of kernel nodes (bench/results/2026-12-04-nvidia-h200-session2-run.md);
 * what differs is the memset nodes the libraries captured: 69 against 6 (17 and 97 us for
 * unet_adm64). CUDA launches a straight line of kernel nodes in about constant host time; a
 * memset node in it looks to cost some microseconds of host time each (a fit of the three rows,
 * not proven). DESIGN.md's target is 20 us a replayed step.
 *
 * So after the capture, each memset node becomes a kernel node of memset_node_kernel that sets
 * the same bytes to the same values, with the same dependencies and dependents; the graph is
 * otherwise untouched. The device does the same work (a memset node is a small kernel too). A
 * node whose edges carry non-default data (the query says lossy) or whose parameters this kernel
 * does not take is left as captured, and counted. bench measures the launch of both graphs in
 * the same run (host_us_per_step and host_us_captured).
 */
#include "kernels/cuda/cuda_common.cuh"

#include <stdlib.h>

/* One memset node's bytes: `height` rows of `row_bytes` bytes, `pitch` bytes apart from `dst`,
 * each 4-byte-aligned word of them `word` (the element's value repeated: an element of 1, 2 or
 * 4 bytes at an address aligned to its size sits at the same place in every aligned word). Work
 * item (row, k): the row's k-th 16-byte-aligned chunk, stored whole where it lies inside the
 * row, byte by byte at the row's two ends. */
__global__ void memset_node_kernel(unsigned char *dst, size_t pitch, uint32_t word,
                                   size_t row_bytes, size_t height) {
    SG_PDL_ENTER();
    const size_t per_row = row_bytes / 16 + 2, n = per_row * height;
    const uint4 w4 = make_uint4(word, word, word, word);
    SG_GRID_STRIDE(i, (int64_t)n) {
        const size_t r = (size_t)i / per_row, k = (size_t)i % per_row;
        unsigned char *s = dst + r * pitch, *e = s + row_bytes;
        unsigned char *c = s - ((uintptr_t)s & 15) + 16 * k;
        if (c >= e) continue;
        if (c >= s && c + 16 <= e) {
            *(uint4 *)c = w4;
        } else {
            unsigned char *b = c < s ? s : c, *end = c + 16 < e ? c + 16 : e;
            for (; b < end; b++) *b = (unsigned char)(word >> (8 * ((uintptr_t)b & 3)));
        }
    }
}

/* the memset's value as an aligned word; 0 where the kernel does not take the parameters */
static int memset_word(const struct cudaMemsetParams *m, uint32_t *word) {
    const size_t es = m->elementSize;
    if (es != 1 && es != 2 && es != 4) return 0;
    if ((uintptr_t)m->dst % es || (m->height > 1 && m->pitch % es)) return 0;
    const uint32_t v = m->value;
    *word = es == 1 ? (v & 0xffu) * 0x01010101u : es == 2 ? (v & 0xffffu) * 0x00010001u : v;
    return 1;
}

#define GE_CALL(call)                                                                              \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            free(nodes), free(links);                                                              \
            return sg_set_error("replacing the graph's memset nodes: %s: %s", #call,               \
                                cudaGetErrorString(e_));                                           \
        }                                                                                          \
    } while (0)

/* node's dependencies (out 0) or dependents (out 1) into *links (grown to *cap), their number
 * into *n; cudaErrorLossyQuery where an edge carries non-default data */
static cudaError_t node_links(cudaGraphNode_t node, int out, cudaGraphNode_t **links, size_t *cap,
                              size_t *n) {
    *n = 0;
    cudaError_t e = out ? cudaGraphNodeGetDependentNodes(node, NULL, NULL, n)
                        : cudaGraphNodeGetDependencies(node, NULL, NULL, n);
    if (e != cudaSuccess || *n == 0) return e;
    if (*n > *cap) {
        cudaGraphNode_t *p = (cudaGraphNode_t *)realloc(*links, sizeof **links * *n);
        if (!p) return cudaErrorMemoryAllocation;
        *links = p, *cap = *n;
    }
    return out ? cudaGraphNodeGetDependentNodes(node, *links, NULL, n)
               : cudaGraphNodeGetDependencies(node, *links, NULL, n);
}

extern "C" int sg_cuda_graph_memsets_to_kernels(cudaGraph_t g, int *replaced, int *kept) {
    SG_ARG_CHECK(g && replaced && kept, "sg_cuda_graph_memsets_to_kernels: no graph or counts");
    *replaced = *kept = 0;
    cudaGraphNode_t *nodes = NULL, *links = NULL;
    size_t n = 0, cap = 0;
    GE_CALL(cudaGraphGetNodes(g, NULL, &n));
    if (n == 0) return SG_OK;
    nodes = (cudaGraphNode_t *)malloc(sizeof *nodes * n);
    if (!nodes) return sg_set_error("replacing the graph's memset nodes: out of host memory");
    GE_CALL(cudaGraphGetNodes(g, nodes, &n));
    void *func = SG_KERNEL_NODE_FUNC(memset_node_kernel);
    for (size_t i = 0; i < n; i++) {
        enum cudaGraphNodeType t;
        GE_CALL(cudaGraphNodeGetType(nodes[i], &t));
        if (t != cudaGraphNodeTypeMemset) continue;
        struct cudaMemsetParams m;
        GE_CALL(cudaGraphMemsetNodeGetParams(nodes[i], &m));
        uint32_t word;
        size_t nd = 0, ns = 0;
        cudaError_t e = cudaSuccess;
        if (!memset_word(&m, &word) ||
            (e = node_links(nodes[i], 0, &links, &cap, &nd)) != cudaSuccess) {
            if (e != cudaSuccess && e != cudaErrorLossyQuery) GE_CALL(e);
            (void)cudaGetLastError(); /* a lossy query is an answer here, not a failure */
            ++*kept;
            continue;
        }
        /* the new node, after the memset's dependencies */
        unsigned char *dst = (unsigned char *)m.dst;
        size_t pitch = m.height > 1 ? m.pitch : 0, row_bytes = m.width * m.elementSize,
               height = m.height;
        void *args[] = {&dst, &pitch, &word, &row_bytes, &height};
        /* func, grid, block, shared memory, kernelParams, extra (positional: the emulation's
         * built-in variables are macros named like two of the fields) */
        const struct cudaKernelNodeParams kp = {
            func,
            dim3(sg_grid_for((int64_t)((row_bytes / 16 + 2) * height))),
            dim3(SG_THREADS),
            0,
            args,
            NULL};
        cudaGraphNode_t k = NULL;
        GE_CALL(cudaGraphAddKernelNode(&k, g, links, nd, &kp));
        /* ... before its dependents */
        e = node_links(nodes[i], 1, &links, &cap, &ns);
        if (e == cudaErrorLossyQuery) { /* undo: the memset stays */
            (void)cudaGetLastError();
            GE_CALL(cudaGraphDestroyNode(k));
            ++*kept;
            continue;
        }
        GE_CALL(e);
        for (size_t j = 0; j < ns; j++)
            GE_CALL(cudaGraphAddDependencies(g, &k, &links[j], NULL, 1));
        GE_CALL(cudaGraphDestroyNode(nodes[i]));
        ++*replaced;
    }
    free(nodes), free(links);
    return SG_OK;
}
