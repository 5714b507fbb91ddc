/* backend_cuda_ctx.h — what the CUDA backend's files share: the context (cuda_ctx), one node's
 * launch (cuda_call), the small helpers every part uses, and each file's functions the others
 * call. Internal to graph/backend_cuda*.c (graph/backend.h is the backend's interface):
 *   backend_cuda.c          the life of a run: create, prepare (the arena, the stream, the
 *                           libraries), uploads and downloads, the eager step, the capture and
 *                           the replays, sync, describe, destroy;
 *   backend_cuda_engines.c  which engine runs each conv node (own, cuDNN, the GEMM engine, own on
 *                           the wgmma kernels), decided once in prepare, and node_engine();
 *   backend_cuda_run.c      one launcher per op (cuda_run_<id>, planner/op_list.h), the linear
 *                           groups and the normalisation statistics' producer pairs;
 *   backend_cuda_time.c     the timing hooks bench and the engine tuning call (whole steps,
 *                           nodes, replays, peaks, a node on each engine, GEMMs).
 */
#ifndef SG_BACKEND_CUDA_CTX_H
#define SG_BACKEND_CUDA_CTX_H
#ifdef SG_HAVE_CUDA

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cublas_v2.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>
#ifdef SG_HAVE_NCCL
#include <nccl.h>
#endif

#include "common/philox.h"
#include "graph/backend.h"
#include "kernels/cuda/cuda_kernels.h"
#include "planner/op_dims.h"
#ifdef SG_HAVE_CUDNN
#include <jansson.h>

#include "kernels/cuda/cudnn_conv.h"
#endif

typedef struct {
    int dev, use_graph;
    cudaStream_t st;
    cublasHandle_t cb; /* the matmul-peak measurement only */
    sg_blas *blas;     /* every GEMM of the step */
    sg_blas *blas_off; /* GEMMs outside the step (bench: a cuDNN node timed on own), made when
                          first needed, so the step's pinned table stays what the step ran */
    unsigned char *arena;
    int64_t arena_bytes;
    void *ws; /* the plan's kernel workspace */
    int64_t ws_bytes;
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    int graph_nodes; /* the captured step's nodes (kernels, copies, memsets); 0 before */
    /* its shape (graph_shape): root nodes, edges, and nodes by type (kernel, memset, memcpy,
     * any other); -1 where the query failed or before the capture */
    int graph_roots, graph_edges, graph_types[4];
    int replay_types[4]; /* the last time_nodes_replay's graph, likewise (last_replay_types) */
    /* SG_GRAPH_MEMSETS: the memset nodes the libraries capture become kernel nodes after the
     * capture (kernels/cuda/graph_edit.cu says why; 1, the default) or stay as captured (0,
     * "keep"). memsets_replaced / memsets_kept: how many did, of the graph_types_captured[1]
     * there were; graph_captured: the graph as captured (NULL where none was replaced), for
     * bench's launch timing of both */
    int graph_memsets, memsets_replaced, memsets_kept, graph_types_captured[4];
    cudaGraph_t graph_captured;
    /* SG_GRAPH_LAUNCH=device (kernels/cuda/graph_launch.cu says why): the step's graph is
     * instantiated for device launch and each replay launches `launcher`, one node that
     * tail-launches it; launch_status: device memory where that node stores a failed launch's
     * error (read at every sync). graph_launch: 0 host, 1 device asked for, 2 device in use,
     * -1 device refused at the capture (the host launch instead, said on stderr) */
    int graph_launch;
    cudaGraph_t launcher;
    cudaGraphExec_t launcher_exec;
    int *launch_status;
    int steps_run; /* run_step calls so far: the first one is eager */
    cudaEvent_t ev[2];
    int rank; /* data parallel: this process's rank (0 alone), part of the random draws' offset */
#ifdef SG_HAVE_NCCL
    ncclComm_t nccl; /* NULL unless the plan has an all-reduce */
#endif
    /* the plan's bf16 copy of the parameters (sg_plan_bf16_copy; copy_n 0: none), refreshed by
     * every upload into the parameter region */
    int64_t copy_param_off, copy_n, copy_off;
    int conv_engine;         /* asked for: SG_CONV_ENGINE_* */
    unsigned char *node_eng; /* per node: SG_CONV_ENGINE_OWN / _CUDNN / CONV_ENGINE_GEMM /
                                CONV_ENGINE_WGMMA for conv nodes, else 0 */
    int convs_own, convs_cudnn, convs_gemm; /* conv nodes per engine (own: both generations) */
    int pdl;    /* SG_PDL: launches allow programmatic dependent launch (cuda_kernels.h) */
    int pdl_ok; /* the device has it (compute capability 9.0 and above) */
    /* SG_NORM_ONEPASS: the directions (SG_NORM_ONEPASS_FWD / _BWD) whose normalisations run in
     * one pass where their shape is taken (cuda_kernels.h; the same bits): norm_onepass_nodes
     * forward nodes, norm_bwd_onepass_nodes backward ones */
    int norm_onepass, norm_onepass_nodes, norm_bwd_onepass_nodes;
    /* SG_CONV_THIN=own: under auto, the conv passes the thin kernels take (conv.cu: the image's
     * convolutions) run on own where the engine table does not name their layer (THIN_OWN, the
     * file comment); thin_own_nodes: how many did */
    int thin_own, thin_own_nodes;
    int thin_tiles; /* SG_CONV_THIN=0: the thin kernels off (cuda_conv_thin_enable) */
    /* SG_CONV_WINO=1: the own engine's fp32 3x3 stride-1 passes as Winograd F(2x2, 3x3)
     * (kernels/cuda/conv_wino.cu; other bits: describe's conv_wino); 0: on the direct tiles;
     * -1 (unset): where the engine table's layer says "wino" */
    int conv_wino, wino_nodes; /* ... and the conv nodes on own it takes (prepare) */
    /* SG_CONV_F32_TC=1: the direct tiles' products on the tensor cores (3xTF32, conv.cu's
     * conv_tile_mma3; other bits: describe's conv_f32_tc); 0: on the CUDA cores; -1 (unset):
     * where the engine table's layer says "f32tc", else the CUDA cores */
    int f32_tc, f32tc_nodes; /* ... and the conv nodes on own whose tiles it puts there */
    /* per node: 1 where its own launches run as Winograd (prepare: SG_CONV_WINO, else the
     * table's layer), the switch every launch of the node sets (cuda_run_node_on) */
    unsigned char *node_wino;
    int wino_force; /* a timing's Winograd switch over node_wino (SG_TIME_OWN_*), -1: none */
    /* per node: 1 where its tile launches take the tensor cores (prepare: SG_CONV_F32_TC, else
     * the table's layer), set for every launch of the node as node_wino is */
    unsigned char *node_f32tc;
    int f32tc_force; /* a timing's switch over node_f32tc (SG_TIME_OWN_TILES_*), -1: none */
    /* F32_OWN (backend_cuda_engines.c's file comment): on unless SG_CONV_F32=cudnn or
     * SG_CUDNN_TF32=1; f32_own_nodes: the conv nodes it put on own (every build: without cuDNN all
     * are own) */
    int f32_own, f32_own_nodes;
    /* sg_blas_bias_epilogue's answer (prepare): the GEMM forward rounds once from cuBLASLt's
     * bias epilogue, so FWD_1X1_OWN keeps only the concatenated inputs' 1x1 forwards on own */
    int gemm_epi;
    int convs_wgmma;    /* ... of them on the wgmma kernels */
    int convs_fallback; /* on own for lack of a deterministic cuDNN engine */
    int attn_fused; /* SG_ATTN=fused: attention nodes on the fused kernels, else the GEMM path */
    int attn_fused_nodes; /* ... and the attention nodes (both directions) they take (prepare) */
    int profile_first;    /* SG_PROFILE_FIRST_STEP=1: the first step in a profiler range */
    /* SG_CONV_TC=mma|wgmma: one tensor-core generation forced on every own conv (SG_TC_*), -1:
     * each node's from the engine table or a resume's record (prepare_conv_tc) */
    int conv_tc_force;
    int wgmma_ok; /* the device can run the wgmma kernels (compute capability 9.0) */
    /* SG_TC_HALO and SG_TC_DGRAD_STATS (prepare_conv_tc): every tensor-core forward's
     * sg_conv_fuse.halo and every data gradient's sg_norm_bwd_fuse.epilogue */
    int tc_halo, dgrad_epilogue;
    int wg_persist, wg_fill; /* SG_WG_PERSIST, SG_WG_FILL (conv_wgmma.cu's schedule knobs) */
    int wg_dgrad_halo;       /* SG_WG_DGRAD_HALO: stride-1 wgmma data gradients on dy's halo */
    int wg_env_persist, wg_env_fill; /* ... set by the environment (a layer's schedule yields) */
    /* per node: its layer's own wgmma schedule (SG_WG_SCHED_*, sg_engine_table_node_sched) for
     * a node on the wgmma kernels, applied around its launches; -1: the step's (wg_persist,
     * wg_fill). wg_layer_nodes: how many nodes have one. */
    signed char *node_sched;
    int wg_layer_nodes;
    /* a schedule every wgmma launch takes (be->wg_sched, a timing under one), -1: none */
    int wg_force;
    /* every timing outside the step (bench's breakdown, the engine tuning, cuDNN's and cuBLASLt's
     * timed choices): device time, the host's issue held out (timing.cu) */
    sg_cuda_window win;
    /* The statistics' partials of a normalisation computed by the convolution before it
     * (prepare_norm_stats): stats_to[i] = the norm_act (or norm_act backward) node that takes
     * conv-like (or data gradient) node i's partials, -1 for none; per norm_act node j,
     * norm_off[j] = where in the kernel workspace its partials lie (after its producer's own
     * scratch) and norm_done[j] = the channels whose partials the producer wrote (the
     * backward: 1, all of them; 0: it computes all of them). Off with SG_FUSE_STATS=0: the
     * same bits, one more pass per normalisation. */
    int *stats_to, *norm_done;
    int64_t *norm_off;
    int stats_fused, stats_fused_fwd; /* pairs; the forward ones among them */
    /* Linear groups (prepare_linear_groups): per node, the first node of the group it runs in,
     * -1 for none; lin_groups groups of lin_group_nodes nodes in all. SG_LINEAR_GROUPS=0: none
     * (each node on cuBLASLt: other bits, for comparisons). */
    int *lin_first;
    int lin_groups, lin_group_nodes;
#ifdef SG_HAVE_CUDNN
    sg_cudnn *dnn; /* the cuDNN engine's pinned table (NULL when not asked for) */
#endif
} cuda_ctx;

#define CU(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess)                                                                     \
            return sg_set_error("%s:%d: %s: %s", __FILE__, __LINE__, #call,                        \
                                cudaGetErrorString(e_));                                           \
    } while (0)
#define CB(call)                                                                                   \
    do {                                                                                           \
        cublasStatus_t s_ = (call);                                                                \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                           \
            return sg_set_error("%s:%d: %s: cuBLAS status %d", __FILE__, __LINE__, #call,          \
                                (int)s_);                                                          \
    } while (0)

#ifdef SG_HAVE_NCCL
#define NC(call)                                                                                   \
    do {                                                                                           \
        ncclResult_t r_ = (call);                                                                  \
        if (r_ != ncclSuccess)                                                                     \
            return sg_set_error("%s:%d: %s: %s", __FILE__, __LINE__, #call,                        \
                                ncclGetErrorString(r_));                                           \
    } while (0)
#endif

/* the cuBLAS workspace: Hopper wants 32 MiB; it lives in the arena like everything else */
#define SG_CUBLAS_WS_NAME "cublas_workspace"
#define SG_KERNEL_WS_NAME "workspace"

/* device pointer of tensor t (NULL for virtual tensors) */
static inline void *P(const cuda_ctx *c, const sg_graph *g, int t) {
    return sg_tensor_virtual(&g->t[t]) ? NULL : c->arena + g->t[t].offset;
}

/* a (possibly virtual) NHWC operand as a two-pointer concatenation */
static inline sg_cat CAT(const cuda_ctx *c, const sg_graph *g, int t) {
    const sg_tensor *x = &g->t[t];
    if (!x->nparts) return sg_cat1(P(c, g, t), (int)x->shape[3]);
    const sg_tensor *a = &g->t[x->parts[0]], *b = &g->t[x->parts[1]];
    return sg_cat2(P(c, g, x->parts[0]), (int)a->shape[3], P(c, g, x->parts[1]), (int)b->shape[3]);
}

static inline int is_conv(int op) {
    return sg_op_is_conv((sg_op)op);
}

/* The per-node engine of 1x1 stride-1 convs on cuBLASLt (backend_cuda_engines.c's file comment):
 * internal to this backend (its node_engine() name is "gemm"), beside graph/backend.h's own and
 * cudnn. */
#define CONV_ENGINE_GEMM 3
_Static_assert(CONV_ENGINE_GEMM != SG_CONV_ENGINE_OWN && CONV_ENGINE_GEMM != SG_CONV_ENGINE_CUDNN &&
                   CONV_ENGINE_GEMM != SG_CONV_ENGINE_AUTO,
               "the GEMM engine is a value of its own");
/* ... and of own convs on the Hopper wgmma kernels (conv_wgmma.cu; node_engine() name "wgmma"):
 * the own engine in every respect but the tensor-core generation its calls run on */
#define CONV_ENGINE_WGMMA 4
_Static_assert(CONV_ENGINE_WGMMA != CONV_ENGINE_GEMM && CONV_ENGINE_WGMMA != SG_CONV_ENGINE_OWN &&
                   CONV_ENGINE_WGMMA != SG_CONV_ENGINE_CUDNN &&
                   CONV_ENGINE_WGMMA != SG_CONV_ENGINE_AUTO,
               "the wgmma engine is a value of its own");
_Static_assert(SG_GEMM_KEY_MAX == SG_BLAS_KEY_MAX, "an engine table holds a GEMM's whole key");
static inline int on_own(int eng) {
    return eng == SG_CONV_ENGINE_OWN || eng == CONV_ENGINE_WGMMA;
}

/* One node's launch: the context, the node, and what many launchers take. */
typedef struct {
    const cuda_ctx *c;
    const sg_graph *g;
    const sg_node *nd;
    const sg_op_args *a;
    cudaStream_t st;
    sg_blas *blas;
    void *ws; /* the plan's kernel workspace */
    int64_t wsb;
    int dt;     /* output 0's dtype */
    int dy_dt;  /* input 0's dtype (dy, for backward ops) */
    int64_t n0; /* output 0's elements */
    int engine; /* conv nodes: the engine that runs this call (SG_CONV_ENGINE_OWN / _CUDNN,
                   CONV_ENGINE_GEMM) */
    /* the node's slice of the global batch (sg_node_slice: this rank, the node's micro-batch):
     * where its gathered samples and random draws start, a constant of the captured launch */
    uint64_t slice;
} cuda_call;

/* device pointers of input / output i, and the same as (possibly virtual) NHWC operands */
static inline void *kin(const cuda_call *k, int i) {
    return P(k->c, k->g, k->nd->in[i]);
}
static inline void *kout(const cuda_call *k, int i) {
    return P(k->c, k->g, k->nd->out[i]);
}
static inline sg_cat kin_cat(const cuda_call *k, int i) {
    return CAT(k->c, k->g, k->nd->in[i]);
}
static inline sg_cat kout_cat(const cuda_call *k, int i) {
    return CAT(k->c, k->g, k->nd->out[i]);
}
/* the kernels take one accumulate flag per output: both halves of a virtual output agree
 * (cuda_prepare checks it) */
static inline int kacc(const cuda_call *k, int i) {
    return (int)(sg_accum_bits(k->nd, i) & 1u);
}

/* ---- backend_cuda.c */
void graph_types(cudaGraph_t graph, size_t n, int types[4]);
int cuda_run_step(sg_backend *be, const sg_plan *p);

/* ---- backend_cuda_engines.c: the engine choice */
int attn_node_fusable(const sg_graph *g, int i);
#ifdef SG_HAVE_CUDNN
int conv_cudnn_call(const cuda_ctx *c, const sg_graph *g, const sg_node *nd, sg_cudnn_conv *cv);
#endif
void wg_sched_apply(const cuda_ctx *c, int s);
void cuda_wg_sched(sg_backend *be, int s);
int fwd_1x1_own(const cuda_ctx *c, const sg_graph *g, int i);
const char *wino_text(const cuda_ctx *c);
int wino_node(const sg_plan *p, int node);
int tiles_node(const sg_plan *p, int node);
const char *f32tc_text(const cuda_ctx *c);
int prepare_conv_engines(sg_backend *be, const sg_plan *p, void *lib_ws, int64_t lib_wsb);
void cuda_node_engine(sg_backend *be, const sg_plan *p, int node, char *buf, int cap);

/* ---- backend_cuda_run.c: the launchers */
int prepare_linear_groups(cuda_ctx *c, const sg_graph *g);
int conv_on_wgmma(const cuda_call *k, sg_conv_dims d, sg_cat x, const void *y, const void *w,
                  int dt);
sg_cat conv_input(const cuda_ctx *c, const sg_graph *g, int t, sg_conv_fuse *f);
int check_fused_operands(const cuda_ctx *c, const sg_graph *g);
int prepare_norm_stats(cuda_ctx *c, const sg_graph *g, const sg_engine_table *table);
void unpair_stats_after(cuda_ctx *c, const sg_graph *g);
int upconv_on_wgmma(const cuda_call *k, const void *lo, const void *hi, const void *wf);
int cuda_run_node_on(sg_backend *be, const sg_plan *p, int i, int engine, sg_blas *blas);
int cuda_run_node(sg_backend *be, const sg_plan *p, int i);
int run_eager(sg_backend *be, const sg_plan *p);

/* ---- backend_cuda_time.c: the timing hooks */
int cuda_time_steps(sg_backend *be, const sg_plan *p, int n, float *ms);
int cuda_time_launch_captured(sg_backend *be, const sg_plan *p, int n, float *us);
int cuda_time_nodes(sg_backend *be, const sg_plan *p, float *ms);
void cuda_last_replay_types(sg_backend *be, int types[4]);
int cuda_time_nodes_replay(sg_backend *be, const sg_plan *p, const int *nodes, int n, int reps,
                           float *ms);
double cuda_matmul_peak(sg_backend *be, int dtype);
double cuda_mem_peak(sg_backend *be, int64_t bytes);
int cuda_time_gemm(sg_backend *be, const sg_plan *p, int64_t m, int64_t n, int64_t k, int dtype,
                   float *ms);
int cuda_tune_gemms(sg_backend *be, const sg_plan *p, int reps, double min_gain, sg_engine_table *t,
                    int *timed);
int cuda_time_node_engine(sg_backend *be, const sg_plan *p, int node, int engine, float *ms);

#endif /* SG_HAVE_CUDA */
#endif
