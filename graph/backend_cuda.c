/* backend_cuda.c — the CUDA backend: one cudaMalloc for the arena, the plan's schedule run with
 * kernels/cuda, and the whole training step captured once into a CUDA graph and replayed.
 *
 * Life of a training run: prepare() checks the free GPU memory against the plan (and says how
 * much it needs and how much is free before allocating anything), allocates the arena and zeroes
 * it, creates one stream and the GEMM context (sg_blas: cuBLASLt on that stream, its workspace
 * inside the arena; a plain cuBLAS handle is kept only to measure the matmul peak). The first
 * run_step() runs the schedule eagerly (a real step: warm-up and validation, during which each
 * distinct GEMM's algorithm is chosen and pinned), freezes the GEMM table, then captures the
 * same launches into a graph, instantiates and uploads it; every later run_step() is one
 * cudaGraphLaunch. A GEMM the warm-up did not pin is an error from then on. Nothing in the step
 * depends on a host value: step counter, seed, timesteps, noise, dropout masks and batch indices
 * are read or computed on the device.
 *
 * Data parallel (docs/data-parallel.md): with a communicator (be->dist) the random draws start
 * at this rank's global offsets, and the plan's OP_ALLREDUCE is one grouped NCCL launch on the
 * step's stream (gradients summed, the loss averaged), captured into the graph like any
 * kernel. The NCCL communicator is made in prepare() from rank 0's unique id, broadcast over
 * the dist communicator (MPI). Built without NCCL (SG_HAVE_NCCL unset), a plan for more than
 * one rank is refused and a one-rank plan's all-reduce is the identity (the loss x 1/1).
 *
 * Convolution engines (issue 14; kernels/cuda/cudnn_conv.h): each conv node (forward,
 * backward-data, backward-filter) runs on `own` (conv.cu) or `cudnn`, decided once in prepare()
 * from be->conv_engine and recorded per node (node_engine(), describe()). With cuDNN asked for
 * (auto or cudnn, in a build with SG_HAVE_CUDNN), prepare() picks and pins every eligible
 * node's deterministic engine configuration and builds its execution plan, in the library
 * workspace (the plan's cublas_workspace), before the warm-up step; the table is frozen with
 * the GEMM table after it, so the captured step runs exactly the plans the eager step ran.
 * A node whose operand is a two-buffer concatenation (the decoder's skip inputs) or a virtual
 * normalised tensor (a fused GroupNorm + SiLU, planner/fuse.c) runs on own: cuDNN needs one
 * stored tensor. A node cuDNN has no deterministic engine for within the budget is an
 * error under `cudnn` and runs on own under `auto`, each with a line on stderr naming the layer
 * and the reason. Every cuDNN reference is behind SG_HAVE_CUDNN: without it, every conv is own.
 * With an engine table in the plan's config (planner/engine_table.h) and `auto`, a node goes
 * to cuDNN only when its layer's entry says cudnn (and its pass is not one the table sends to
 * own: "passes"), and stays on own when it says own.
 *
 * The GEMM engine (`gemm`, CONV_ENGINE_GEMM): under `auto`, every 1x1 stride-1 conv node
 * (the ResBlock shortcuts, attention's qkv and output projections) whose input is stored runs
 * as cuBLASLt GEMMs (conv.cu's cuda_conv2d_gemm_*: linear.cu's GEMM layer, algorithms pinned
 * in the GEMM table), in every build, with or without cuDNN: a 1x1 conv is a GEMM, and the
 * first GPU run measured cuBLASLt's GEMM of each such layer's size 2-5x faster than both the
 * cuDNN engine and the own kernels on that layer (bench/results/2026-11-28-nvidia-h200-bench-2.md,
 * per conv layer: 4.8 ms of the step's 75 1x1 passes against 1.4 ms as GEMMs). It takes the
 * skip concatenation as one GEMM per part, so the decoder's 1x1 shortcuts leave the own
 * kernels too. An engine table's `cudnn` for a 1x1 layer means this library side; `own` keeps
 * the own kernels; --conv-engine own and cudnn force their engine for 1x1 convs as well; a
 * conv whose input is a virtual normalised tensor (a fused prologue) stays own.
 * Since then the own kernels got faster: the second GPU session measured every 1x1 forward of
 * unet_cifar in bf16 faster on own's tensor-core kernel than as a GEMM (the GEMM writes fp32
 * products to a workspace tile, then a second pass adds the bias and rounds, and the
 * statistics' partials are a third; own does all three in its epilogue): 25 nodes, 1.110
 * against 1.913 ms at batch 128, 0.329 against 1.124 at batch 8, each node faster
 * (bench/results/2026-11-28-nvidia-h200-bench-3.md), while both backward passes stayed faster
 * as GEMMs. So without an engine table entry for its layer, a bf16 1x1 forward whose channels
 * the tensor-core kernel takes (multiples of 8) runs on own (FWD_1X1_OWN), its backward passes
 * on gemm; a resume's record of gemm keeps gemm. Since then the GEMM's forward of a one-part
 * input rounds once from cuBLASLt's bias epilogue (kernels/cuda/linear.cu), no tile and no
 * second pass: the GEMM the fourth GPU session timed beside each layer (the per-layer table's
 * same-size GEMM, both operands K-contiguous, bf16 out: the epilogue's layout) took 0.030 ms for
 * a to_qkv forward at batch 128 against own's 0.093, 0.013 for a to_out against 0.037
 * (bench/results/2026-12-04-nvidia-h200-session2-side-by-side.md). So where the library offers
 * the epilogue (sg_blas_bias_epilogue, asked once in prepare: describe()'s gemm_epilogue),
 * FWD_1X1_OWN keeps on own only the 1x1 forwards whose input is a concatenation (the decoder's
 * shortcuts, whose parts still sum in the tile); the others run on gemm. Not yet run on a GPU
 * (docs/gpu-status.md); SG_GEMM_EPILOGUE=0 turns the epilogue off (the tile everywhere, the
 * rule as before). THIN_OWN: with SG_CONV_THIN=own, a pass of a
 * convolution with 1 to 4 channels on one side (the image's conv_in and conv_out) that the own
 * engine's thin kernels take (cuda_conv2d_thin_passes) runs on own under auto unless the engine
 * table names its layer or a resume's record says cudnn: cuDNN took 0.17 to 0.22 ms for each of
 * four such passes of unet_cifar at batch 128 (bench-3.md), the thin kernels are unmeasured, so
 * this is off by default until a GPU times it (gpu_call.sh's thin_own variant). SG_CONV_THIN=0
 * runs the own engine's thin passes on the 64 x 64 tiles instead (the same bits).
 * F32_OWN: an fp32 conv pass (no TF32) whose input is 32 x 32 or larger runs on own under
 * auto unless the engine table names its layer or a resume's record says cudnn. The fourth GPU
 * session timed unet_adm64 at batch 32 in fp32 at 359.4 ms a step against PyTorch eager's 66.4:
 * the deterministic fp32 cuDNN engines the heuristics put first (workspace within the budget)
 * took 19.7 to 58.2 ms for each 64 x 64 data gradient that own's kernels did in 0.54 to 1.46,
 * 274.0 against 7.7 ms for the 11; at 64 x 64 the forward and weight gradient were 1.9 and 1.5x
 * faster on own as well, at 32 x 32 the forward, while at 8 x 8 and 16 x 16 cuDNN was faster in
 * every pass (bench/results/2026-12-04-nvidia-h200-session2-side-by-side.md, per conv layer).
 * Summed over the conv layers: 345.3 ms as chosen, 70.8 every pass on own, 63.1 under this
 * rule, 59.0 the per-layer best (the engine table's). SG_CONV_F32=cudnn turns it off. The rule
 * is sg_conv_f32_own_node (planner/engine_table.h), which `plan` counts with.
 *
 * Attention engines (issue 14): SG_ATTN=gemm (the default: cuBLASLt GEMMs + softmax kernels)
 * or fused (scores and softmax in registers, bf16 shapes it takes: kernels/cuda/attention.cu), read
 * when the backend is created. Both take the same plan, workspace and saved P; their bits
 * differ, so a run keeps one (describe() records it as attn_engine; node_engine() names it).
 * Within own, each conv node's tensor-core generation (CONV_ENGINE_WGMMA: the Hopper kernels,
 * conv_wgmma.cu, instead of conv_tc.cu's mma.sync ones; bf16, compute capability 9.0) comes from
 * the engine table's layer ("tc":"wgmma", measured by bench --tune-engines), a resume's record,
 * or SG_CONV_TC=mma|wgmma, which forces one generation on every own conv (prepare_conv_tc).
 */
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
    /* per node: 1 where its own launches run as Winograd (prepare: SG_CONV_WINO, else the
     * table's layer), the switch every launch of the node sets (cuda_run_node_on) */
    unsigned char *node_wino;
    int wino_force; /* a timing's Winograd switch over node_wino (SG_TIME_OWN_*), -1: none */
    /* F32_OWN (the file comment): on unless SG_CONV_F32=cudnn or SG_CUDNN_TF32=1;
     * f32_own_nodes: the conv nodes it put on own (every build: without cuDNN all are own) */
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

int sg_cuda_available(void) {
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

int sg_cuda_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) cudaGetLastError(), n = 0;
    return n;
}

/* The NCCL communicator of a plan with an all-reduce: rank 0 makes the unique id, the dist
 * communicator (MPI) carries it to every rank, every rank joins. Collective: every rank of the
 * plan calls it. */
static int prepare_allreduce(sg_backend *be, const sg_plan *p) {
    cuda_ctx *c = be->ctx;
    c->rank = be->dist ? be->dist->rank : 0;
    int ranks = 0;
    for (int i = 0; i < p->g.nn; i++)
        if (p->g.n[i].op == OP_ALLREDUCE) ranks = p->g.n[i].a.allreduce.ranks;
    if (!ranks) return SG_OK;
    const int size = be->dist ? be->dist->size : 1;
    if (size != ranks)
        return sg_set_error("the plan is for %d ranks but this process is one of %d", ranks, size);
#ifdef SG_HAVE_NCCL
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (c->rank == 0) NC(ncclGetUniqueId(&id));
    if (be->dist && be->dist->bcast(be->dist, &id, (int64_t)sizeof id)) return SG_ERR;
    NC(ncclCommInitRank(&c->nccl, size, id, c->rank));
    return SG_OK;
#else
    if (size > 1)
        return sg_set_error("this build has no NCCL: the CUDA backend cannot all-reduce over %d "
                            "ranks (rebuild with NCCL found, -DSG_NCCL_ROOT=DIR)",
                            size);
    return SG_OK;
#endif
}

/* the cuBLAS workspace: Hopper wants 32 MiB; it lives in the arena like everything else */
#define SG_CUBLAS_WS_NAME "cublas_workspace"
#define SG_KERNEL_WS_NAME "workspace"

/* The accumulate bits the launchers can honour. The CPU backend honours every bit of every
 * output; the CUDA launchers take one flag per backward output, shared by the two halves of a
 * concatenated output, by dw and db, and by dgamma and dbeta, and none for forward or optimizer
 * ops but the loss (mse: gradient accumulation adds the micro-batches' shares of the mean). A
 * plan asking for anything else is refused here, not computed differently. */
static int check_accum(const sg_graph *g) {
    for (int i = 0; i < g->nn; i++) {
        const sg_node *nd = &g->n[i];
        const char *why = NULL;
        for (int k = 0; k < nd->nout && !why; k++) {
            unsigned b = sg_accum_bits(nd, k);
            if (g->t[nd->out[k]].nparts && (b == 1u || b == 2u))
                why = "the two halves of a concatenated output differ in accumulation";
        }
        /* the loss is the one forward output that accumulates: over the micro-batches */
        if (!why && nd->accum && nd->op != OP_MSE &&
            (sg_op_is_forward(nd->op) || sg_op_is_optimizer(nd->op)))
            why = "a forward or optimizer op accumulates";
        if (!why &&
            (nd->op == OP_LINEAR_BWD_WEIGHT || nd->op == OP_CONV2D_BWD_WEIGHT ||
             nd->op == OP_UPCONV2D_BWD_WEIGHT) &&
            sg_accum_bits(nd, 1) != sg_accum_bits(nd, 0))
            why = "dw and db differ in accumulation";
        if (!why && nd->op == OP_GROUP_NORM_BWD && sg_accum_bits(nd, 2) != sg_accum_bits(nd, 1))
            why = "dgamma and dbeta differ in accumulation";
        if (!why && (nd->op == OP_NORM_ACT_BWD || nd->op == OP_NORM_ACT_TEMB_BWD)) {
            const int k = nd->op == OP_NORM_ACT_TEMB_BWD ? 2 : 1; /* dgamma's slot */
            if (sg_accum_bits(nd, k + 1) != sg_accum_bits(nd, k))
                why = "dgamma and dbeta differ in accumulation";
        }
        if (why)
            return sg_set_error("node %d (%s -> %s): %s, which the CUDA kernels do not support", i,
                                sg_ops[nd->op].name, g->t[nd->out[0]].name, why);
    }
    return SG_OK;
}

static int prepare_conv_engines(sg_backend *be, const sg_plan *p, void *lib_ws, int64_t lib_wsb);

static int check_fused_operands(const cuda_ctx *c, const sg_graph *g);
static int prepare_norm_stats(cuda_ctx *c, const sg_graph *g, const sg_engine_table *table);
static int prepare_linear_groups(cuda_ctx *c, const sg_graph *g);
static void unpair_stats_after(cuda_ctx *c, const sg_graph *g);

/* Whether node i is an attention node whose shape the fused kernels take (SG_ATTN=fused then
 * runs it fused; other shapes stay on the GEMM path). 0 for every other op. */
static int attn_node_fusable(const sg_graph *g, int i) {
    const sg_node *nd = &g->n[i];
    if (nd->op != OP_ATTENTION && nd->op != OP_ATTENTION_BWD) return 0;
    const sg_attn_dims d = sg_attn_dims_of(g, nd);
    return cuda_attention_fused_ok(d.L, d.C, d.heads, g->t[nd->out[0]].dtype);
}

static int cuda_prepare(sg_backend *be, const sg_plan *p) {
    cuda_ctx *c = be->ctx;
    const sg_graph *g = &p->g;
    if (check_accum(g)) return SG_ERR;
    CU(cudaSetDevice(c->dev));
    size_t free_b = 0, total_b = 0;
    CU(cudaMemGetInfo(&free_b, &total_b));
    if ((uint64_t)p->arena_bytes + (64u << 20) > free_b)
        return sg_set_error("the plan needs %.2f GiB on the GPU (arena %lld bytes) but only %.2f "
                            "GiB of %.2f GiB are free: try a smaller --batch, or --precision bf16",
                            p->arena_bytes / 1073741824.0, (long long)p->arena_bytes,
                            free_b / 1073741824.0, total_b / 1073741824.0);
    CU(cudaMalloc((void **)&c->arena, (size_t)p->arena_bytes));
    c->arena_bytes = p->arena_bytes;
    CU(cudaMemset(c->arena, 0, (size_t)p->arena_bytes));
    CU(cudaStreamCreateWithFlags(&c->st, cudaStreamNonBlocking));
    CU(cudaEventCreate(&c->ev[0]));
    CU(cudaEventCreate(&c->ev[1]));
    sg_cuda_window_init(&c->win);
    CB(cublasCreate(&c->cb));
    CB(cublasSetStream(c->cb, c->st));
    /* fp32 math only: no TF32 (CUBLAS_DEFAULT_MATH does not allow it), and split-K partial
     * sums of a bf16 output are reduced in fp32, not rounded to bf16 on the way */
    CB(cublasSetMathMode(c->cb,
                         CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
    int cw = sg_find_tensor(g, SG_CUBLAS_WS_NAME), kw = sg_find_tensor(g, SG_KERNEL_WS_NAME);
    if (cw < 0 || kw < 0) return sg_set_error("the plan has no workspace tensors");
    CB(cublasSetWorkspace(c->cb, c->arena + g->t[cw].offset, (size_t)g->t[cw].bytes));
    if (sg_blas_create(&c->blas, c->st, c->arena + g->t[cw].offset, g->t[cw].bytes)) return SG_ERR;
    c->gemm_epi = sg_blas_bias_epilogue(c->blas);
    /* the engine table's GEMM algorithms (the tuning's timed picks), asked for before any GEMM
     * is pinned */
    for (int i = 0; p->cfg.engines && i < p->cfg.engines->ngemm; i++)
        if (sg_blas_prefer(c->blas, p->cfg.engines->gemm[i].key, p->cfg.engines->gemm[i].algo))
            return SG_ERR;
    c->ws = c->arena + g->t[kw].offset;
    c->ws_bytes = g->t[kw].bytes;
    c->rank = be->dist ? be->dist->rank : 0;
    if (check_fused_operands(c, g)) return SG_ERR;
    /* SG_PDL unset: the engine table's knob (the tuning's timed choice), where it sets one */
    const char *pdl_env = getenv("SG_PDL");
    if ((!pdl_env || !*pdl_env) && p->cfg.engines && p->cfg.engines->knobs.pdl >= 0)
        c->pdl = p->cfg.engines->knobs.pdl && c->pdl_ok;
    /* SG_ATTN unset: the engine table's attention engine (the tuning's timed choice) */
    const char *attn_env = getenv("SG_ATTN");
    if ((!attn_env || !*attn_env) && p->cfg.engines)
        c->attn_fused = p->cfg.engines->attn == SG_ATTN_FUSED;
    c->attn_fused_nodes = 0;
    for (int i = 0; c->attn_fused && i < g->nn; i++) c->attn_fused_nodes += attn_node_fusable(g, i);
    /* SG_NORM_ONEPASS unset: likewise (prepare_norm_stats reads it) */
    const char *onepass_env = getenv("SG_NORM_ONEPASS");
    if ((!onepass_env || !*onepass_env) && p->cfg.engines &&
        p->cfg.engines->knobs.norm_onepass >= 0)
        c->norm_onepass = p->cfg.engines->knobs.norm_onepass;
    if (prepare_norm_stats(c, g, p->cfg.engines)) return SG_ERR;
    if (prepare_linear_groups(c, g)) return SG_ERR;
    if (!sg_plan_bf16_copy(p, &c->copy_param_off, &c->copy_n, &c->copy_off)) c->copy_n = 0;
    if (prepare_conv_engines(be, p, c->arena + g->t[cw].offset, g->t[cw].bytes)) return SG_ERR;
    unpair_stats_after(c, g);
    CU(cudaDeviceSynchronize());
    return prepare_allreduce(be, p);
}

/* Host <-> arena copies go on the step's stream, so they are ordered with the kernels before
 * and after them: a plain cudaMemcpy runs on the legacy default stream, which does not wait
 * for work on a non-blocking stream (cudaStreamNonBlocking), so an upload could overwrite
 * what a running step still reads, or a download read a half-written tensor. The host
 * buffers are pageable; waiting for the stream before returning lets the caller reuse or
 * read them at once. */
static int cuda_upload(sg_backend *be, int64_t off, const void *src, int64_t bytes) {
    cuda_ctx *c = be->ctx;
    if (off < 0 || off + bytes > c->arena_bytes) return sg_set_error("upload outside the arena");
    CU(cudaMemcpyAsync(c->arena + off, src, (size_t)bytes, cudaMemcpyHostToDevice, c->st));
    /* parameters written: their bf16 copy follows, element for element (graph/backend.h) */
    int64_t i0, n;
    if (sg_backend_param_span(c->copy_param_off, c->copy_n, off, bytes, &i0, &n) &&
        cuda_copy(c->st, c->arena + c->copy_off + 2 * i0, DT_BF16,
                  c->arena + c->copy_param_off + 4 * i0, DT_F32, n, 0))
        return SG_ERR;
    CU(cudaStreamSynchronize(c->st));
    return SG_OK;
}

static int cuda_download(sg_backend *be, int64_t off, void *dst, int64_t bytes) {
    cuda_ctx *c = be->ctx;
    if (off < 0 || off + bytes > c->arena_bytes) return sg_set_error("download outside the arena");
    CU(cudaMemcpyAsync(dst, c->arena + off, (size_t)bytes, cudaMemcpyDeviceToHost, c->st));
    CU(cudaStreamSynchronize(c->st));
    return SG_OK;
}

/* device pointer of tensor t (NULL for virtual tensors) */
static void *P(const cuda_ctx *c, const sg_graph *g, int t) {
    return sg_tensor_virtual(&g->t[t]) ? NULL : c->arena + g->t[t].offset;
}

/* a (possibly virtual) NHWC operand as a two-pointer concatenation */
static sg_cat CAT(const cuda_ctx *c, const sg_graph *g, int t) {
    const sg_tensor *x = &g->t[t];
    if (!x->nparts) return sg_cat1(P(c, g, t), (int)x->shape[3]);
    const sg_tensor *a = &g->t[x->parts[0]], *b = &g->t[x->parts[1]];
    return sg_cat2(P(c, g, x->parts[0]), (int)a->shape[3], P(c, g, x->parts[1]), (int)b->shape[3]);
}

/* The dropout's key of norm_act node nd
 * (slice: its sg_node_slice) as cuda_run_dropout's */
static sg_drop node_drop(const cuda_ctx *c, const sg_graph *g, const sg_node *nd, uint64_t slice) {
    const sg_gn_args *a = &nd->a.gn;
    const sg_norm_operands o = sg_norm_operands_of(nd);
    sg_drop d = {.p = 0.0f, .purpose = 0, .seed = NULL, .step = NULL, .i0 = 0};
    if (o.temb && a->p > 0.0f) {
        d.p = a->p;
        d.purpose = SG_RNG_DROPOUT_BASE + (uint32_t)a->purpose;
        d.seed = P(c, g, nd->in[o.seed]);
        d.step = P(c, g, nd->in[o.step]);
        d.i0 = slice * (uint64_t)sg_in_numel(g, nd, o.x);
    }
    return d;
}
static int is_conv(int op) {
    return sg_op_is_conv((sg_op)op);
}

/* The per-node engine of 1x1 stride-1 convs on cuBLASLt (the file comment): internal to this
 * backend (its node_engine() name is "gemm"), beside graph/backend.h's own and cudnn. */
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

#ifdef SG_HAVE_CUDNN
/* Conv node nd as a cuDNN call (cudnn_conv.h); 0 when an operand is a two-buffer
 * concatenation, which cuDNN cannot take, or the activations differ in dtype. */
static int conv_cudnn_call(const cuda_ctx *c, const sg_graph *g, const sg_node *nd,
                           sg_cudnn_conv *cv) {
    sg_conv_dims d = sg_conv_dims_of(g, nd);
    memset(cv, 0, sizeof *cv);
    cv->N = d.N, cv->H = d.H, cv->W = d.W, cv->Ci = d.Ci, cv->Co = d.Co, cv->K = d.K, cv->S = d.S;
    cv->pad = d.pad;
    cv->dt = (int)g->t[nd->in[0]].dtype; /* x forward, dy backward */
    cv->out = P(c, g, nd->out[0]);
    cv->in = P(c, g, nd->in[0]);
    if (nd->op == OP_CONV2D || nd->op == OP_CONV2D_ADD) {
        cv->pass = SG_CUDNN_FWD;
        cv->w = P(c, g, nd->in[1]);
        cv->b = P(c, g, nd->in[2]);
    } else if (nd->op == OP_CONV2D_BWD_DATA) {
        cv->pass = SG_CUDNN_BWD_DATA;
        cv->w = P(c, g, nd->in[1]);
        cv->accum = (int)(sg_accum_bits(nd, 0) & 1u);
    } else {
        SG_ASSERT(nd->op == OP_CONV2D_BWD_WEIGHT);
        cv->pass = SG_CUDNN_BWD_FILTER;
        cv->x = P(c, g, nd->in[1]);
        cv->accum = (int)(sg_accum_bits(nd, 0) & 1u);
        /* db too, by the call (with a bf16 dw's widening: one launch), its partials in the
         * kernel workspace; so a timed choice times the whole pass */
        cv->db = (float *)P(c, g, nd->out[1]);
        cv->db_ws = c->ws, cv->db_ws_bytes = c->ws_bytes;
    }
    /* one dtype for the activations of the call, as the own kernels also assume */
    const int other = nd->op == OP_CONV2D || nd->op == OP_CONV2D_ADD ? nd->out[0]
                      : nd->op == OP_CONV2D_BWD_DATA                 ? nd->out[0]
                                                                     : nd->in[1];
    return cv->out && cv->in && (cv->pass == SG_CUDNN_BWD_FILTER ? cv->x != NULL : cv->w != NULL) &&
           (int)g->t[other].dtype == cv->dt;
}
#endif

#ifdef SG_HAVE_CUDNN
/* A resume (be->conv_pins: the checkpoint's {"table":[names],"nodes":[index per conv node]}):
 * each conv node's recorded engine is marked in pinned[] (SG_CONV_ENGINE_OWN, _CUDNN,
 * CONV_ENGINE_GEMM), and each recorded cuDNN engine is asked for (sg_cudnn_prefer) on its
 * node's descriptor. A record that does not fit this plan is said
 * and ignored: the engines are then chosen afresh, and the resume's comparison names the
 * layers that differ. */
static void apply_conv_pins(cuda_ctx *c, const sg_graph *g, const char *pins, unsigned char *pinned,
                            int *n_own, int *n_cudnn) {
    json_error_t err;
    json_t *r = json_loads(pins, 0, &err);
    json_t *table = json_object_get(r, "table"), *nodes = json_object_get(r, "nodes");
    int convs = 0, bad = 0;
    for (int i = 0; i < g->nn; i++) convs += is_conv(g->n[i].op);
    if (!json_is_array(table) || !json_is_array(nodes) || (int)json_array_size(nodes) != convs) {
        fprintf(stderr,
                "stepgraph: warning: the checkpoint's conv-engine record does not fit this "
                "plan (%d conv nodes): engines chosen afresh\n",
                convs);
        json_decref(r);
        return;
    }
    for (int i = 0, k = 0; i < g->nn; i++) {
        if (!is_conv(g->n[i].op)) continue;
        const char *name = json_string_value(
            json_array_get(table, (size_t)json_integer_value(json_array_get(nodes, (size_t)k++))));
        sg_cudnn_conv cv;
        if (!name) {
            bad++;
        } else if (!strcmp(name, "own") || !strcmp(name, "wgmma")) {
            pinned[i] = !strcmp(name, "own") ? SG_CONV_ENGINE_OWN : CONV_ENGINE_WGMMA, (*n_own)++;
        } else if (!strcmp(name, "gemm")) {
            pinned[i] = CONV_ENGINE_GEMM;
        } else if (!strncmp(name, "cudnn ", 6) && conv_cudnn_call(c, g, &g->n[i], &cv)) {
            if (sg_cudnn_prefer(c->dnn, &cv, name + 6) == SG_OK)
                pinned[i] = SG_CONV_ENGINE_CUDNN, (*n_cudnn)++;
            else
                bad++, fprintf(stderr, "stepgraph: warning: node %d: %s\n", i, sg_last_error());
        } else {
            bad++;
        }
    }
    if (bad)
        fprintf(stderr,
                "stepgraph: warning: %d conv node(s) of the checkpoint's engine record "
                "could not be asked for\n",
                bad);
    json_decref(r);
}
#endif

#ifdef SG_HAVE_CUDNN
/* The engine table's cuDNN engine names (planner/engine_table.h: a timed tuning run's choice)
 * asked for on every conv node of a cudnn layer that cuDNN may run; a name that does not fit is
 * said and left to the heuristics. */
static void apply_table_engines(cuda_ctx *c, const sg_graph *g, const sg_engine_table *t) {
    int asked = 0, bad = 0;
    for (int i = 0; i < g->nn; i++) {
        const sg_engine_entry *x = sg_engine_table_entry_of(t, g, i);
        const int pass = sg_conv_pass_of(g->n[i].op);
        sg_cudnn_conv cv;
        if (!x || x->engine != SG_LAYER_CUDNN || pass < 0 || !x->cudnn[pass][0] ||
            sg_conv_gemm_node(g, i) || !conv_cudnn_call(c, g, &g->n[i], &cv))
            continue;
        if (sg_cudnn_prefer(c->dnn, &cv, x->cudnn[pass]) == SG_OK) {
            asked++;
        } else {
            bad++;
            fprintf(stderr, "stepgraph: warning: node %d (layer %s): %s\n", i, x->layer,
                    sg_last_error());
        }
    }
    if (asked || bad)
        fprintf(stderr,
                "stepgraph: engine table: %d conv node(s) asked for their timed cuDNN engine%s\n",
                asked, bad ? " (some could not be: said above)" : "");
}
#endif

/* A wgmma grid knob (SG_WG_PERSIST, SG_WG_FILL): unset or 0 -> 0, 1 -> -1 (the device's SM
 * count), n > 1 -> n; anything else an error naming it, `expected` what it takes. */
static int env_wg_knob(const char *name, const char *expected, int *v) {
    const char *s = getenv(name);
    *v = 0;
    if (!s || !*s) return SG_OK;
    char *end = NULL;
    const long n = strtol(s, &end, 10);
    if (*end || n < 0 || n > 1 << 20) return sg_set_error("%s=%s: expected %s", name, s, expected);
    *v = n == 1 ? -1 : (int)n;
    return SG_OK;
}

/* SG_CONV_TC (unset, "mma" or "wgmma"): one tensor-core generation for every own bf16
 * convolution, whatever the engine table says (unset: each layer's from the table, mma.sync
 * without one). wgmma is refused here, with the reason, where it cannot run: a device other
 * than compute capability 9.0 (the kernels are sm_90a code), a plan whose convolutions are not
 * bf16, --conv-engine cudnn (a plan without convolutions is left alone). With `auto` it means
 * own. A wgmma node's calls go to wgmma unless cuda_conv2d_wgmma_refusal refuses the call (not
 * a tensor-core convolution, e.g. the 3-channel image convs; an operand not 128-byte aligned):
 * that call runs where own would run it (fixed by the plan, so the same calls every step). */
/* The wgmma kernels' schedule s (SG_WG_SCHED_*: a persistent grid of a block per SM, the N tile
 * that fills the SMs) for the launches that follow */
static void wg_sched_set(int s) {
    cuda_conv_wgmma_persist(s & SG_WG_SCHED_PERSIST ? -1 : 0);
    cuda_conv_wgmma_fill(s & SG_WG_SCHED_FILL ? -1 : 0);
}

/* The wgmma knobs for the launches that follow: schedule s where s >= 0 (a layer's own, each
 * knob the environment leaves unset), else the step's (wg_persist, wg_fill); a forced schedule
 * (wg_force) wins over both. */
static void wg_sched_apply(const cuda_ctx *c, int s) {
    if (c->wg_force >= 0) {
        wg_sched_set(c->wg_force);
        return;
    }
    cuda_conv_wgmma_persist(s < 0 || c->wg_env_persist ? c->wg_persist
                            : s & SG_WG_SCHED_PERSIST  ? -1
                                                       : 0);
    cuda_conv_wgmma_fill(s < 0 || c->wg_env_fill ? c->wg_fill : s & SG_WG_SCHED_FILL ? -1 : 0);
}

/* backend.h: wg_sched */
static void cuda_wg_sched(sg_backend *be, int s) {
    cuda_ctx *c = be->ctx;
    c->wg_force = s >= 0 ? s : -1;
    wg_sched_apply(c, -1);
}

static int prepare_conv_tc(cuda_ctx *c, const sg_graph *g, const sg_engine_table *table) {
    /* SG_TC_HALO (unset or 1, 0, all): the fused prologue's forward on the resident halo or
     * per tap, or every tensor-core forward on the halo (conv_tc.cu; the same bits, so a GPU
     * can time each) */
    const char *halo = getenv("SG_TC_HALO");
    if (halo && *halo && strcmp(halo, "0") && strcmp(halo, "1") && strcmp(halo, "all"))
        return sg_set_error("SG_TC_HALO=%s: expected 1 (the default), 0 or all", halo);
    c->tc_halo = !halo || !*halo || !strcmp(halo, "1") ? SG_TC_HALO_PROLOGUE
                 : !strcmp(halo, "all")                ? SG_TC_HALO_ALL
                                                       : SG_TC_HALO_NONE;
    /* unset: the engine table's timed choice, where it makes one */
    if ((!halo || !*halo) && table && table->knobs.tc_halo >= 0)
        c->tc_halo = table->knobs.tc_halo == SG_KNOB_HALO_ALL    ? SG_TC_HALO_ALL
                     : table->knobs.tc_halo == SG_KNOB_HALO_NONE ? SG_TC_HALO_NONE
                                                                 : SG_TC_HALO_PROLOGUE;
    /* SG_TC_DGRAD_STATS (unset or 0, 1): the mma.sync data gradient's backward partials by the
     * partials pass after it or in its epilogue (conv_tc.cu; the same bits) */
    const char *ds = getenv("SG_TC_DGRAD_STATS");
    if (ds && *ds && strcmp(ds, "0") && strcmp(ds, "1"))
        return sg_set_error("SG_TC_DGRAD_STATS=%s: expected 0 (the default) or 1", ds);
    c->dgrad_epilogue = ds && !strcmp(ds, "1");
    if ((!ds || !*ds) && table && table->knobs.dgrad_stats >= 0)
        c->dgrad_epilogue = table->knobs.dgrad_stats;
    /* SG_WG_PERSIST: the wgmma pipelined kernels on a block per tile, on a persistent grid of
     * one block per SM, or of at most n blocks (host tests: several tiles per block); SG_WG_FILL:
     * the wgmma forwards' and data gradients' N tile by padding alone, or narrower where it fills
     * the device's SMs (or n SMs: host tests) better; conv_wgmma.cu, the same bits every way */
    int persist, fill;
    if (env_wg_knob("SG_WG_PERSIST",
                    "0 (the default: a block per tile), 1 (a block per SM) or a block count",
                    &persist) ||
        env_wg_knob("SG_WG_FILL",
                    "0 (the default: the widest tile), 1 (the tile width that fills the SMs) or "
                    "an SM count",
                    &fill))
        return SG_ERR;
    /* a knob the environment leaves unset: the engine table's schedule (measured by the
     * tuning), where it has one */
    const char *pe = getenv("SG_WG_PERSIST"), *fe = getenv("SG_WG_FILL");
    c->wg_env_persist = pe && *pe, c->wg_env_fill = fe && *fe;
    if (!c->wg_env_persist && table) persist = table->wg_sched & SG_WG_SCHED_PERSIST ? -1 : 0;
    if (!c->wg_env_fill && table) fill = table->wg_sched & SG_WG_SCHED_FILL ? -1 : 0;
    c->wg_persist = persist, c->wg_fill = fill, c->wg_force = -1;
    wg_sched_apply(c, -1);
    /* SG_WG_DGRAD_HALO (unset or 1, 0): the wgmma stride-1 3x3 data gradients on a resident halo
     * of dy where it fits, or per tap (conv_wgmma.cu; the same bits, so a GPU can time both) */
    const char *dh = getenv("SG_WG_DGRAD_HALO");
    if (dh && *dh && strcmp(dh, "0") && strcmp(dh, "1"))
        return sg_set_error("SG_WG_DGRAD_HALO=%s: expected 1 (the default) or 0", dh);
    c->wg_dgrad_halo = !dh || !*dh || !strcmp(dh, "1");
    cuda_conv_wgmma_dgrad_halo(c->wg_dgrad_halo);
    int major = 0, minor = 0;
    CU(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, c->dev));
    CU(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, c->dev));
    c->wgmma_ok = major == 9 && minor == 0;
    const char *env = getenv("SG_CONV_TC");
    c->conv_tc_force = -1;
    if (!env || !*env) return SG_OK;
    c->conv_tc_force = sg_tc_parse(env);
    if (c->conv_tc_force < 0)
        return sg_set_error("SG_CONV_TC=%s: expected mma or wgmma (unset: the engine table's "
                            "per layer, else mma)",
                            env);
    if (c->conv_tc_force == SG_TC_MMA) return SG_OK;
    int convs = 0, bf16 = 0;
    for (int i = 0; i < g->nn; i++)
        if (is_conv(g->n[i].op)) convs++, bf16 += g->t[g->n[i].in[0]].dtype == DT_BF16;
    if (!convs) return SG_OK; /* nothing to run there (a sampler's plan, an op test) */
    if (c->conv_engine == SG_CONV_ENGINE_CUDNN)
        return sg_set_error("SG_CONV_TC=wgmma selects the own engine's kernels, but --conv-engine "
                            "cudnn asks for cuDNN");
    if (!c->wgmma_ok)
        return sg_set_error("SG_CONV_TC=wgmma: the wgmma convolutions are sm_90a code and need a "
                            "compute capability 9.0 GPU (H100/H200); this device is %d.%d",
                            major, minor);
    if (!bf16)
        return sg_set_error("SG_CONV_TC=wgmma: the wgmma convolutions are bf16 only and this "
                            "plan has no bf16 convolution (--precision bf16)");
    c->conv_engine = SG_CONV_ENGINE_OWN;
    fprintf(stderr, "stepgraph: SG_CONV_TC=wgmma: the own engine's bf16 tensor-core convolutions "
                    "run on the wgmma kernels (conv_wgmma.cu)\n");
    return SG_OK;
}

/* An own conv node's generation: SG_CONV_TC's where forced, else a resume's record (pin), else
 * the engine table's layer (also under --conv-engine own, which forces the engine, not which
 * own kernels); wgmma only for a bf16 node on a device that runs it (a table or
 * record that asks for it elsewhere is counted in *refused, said once by the caller). */
static int own_generation(const cuda_ctx *c, const sg_plan *p, int i, int pin, int *refused) {
    const sg_graph *g = &p->g;
    const int tc = c->conv_tc_force >= 0       ? c->conv_tc_force
                   : pin == CONV_ENGINE_WGMMA  ? SG_TC_WGMMA
                   : pin == SG_CONV_ENGINE_OWN ? SG_TC_MMA
                                               : sg_engine_table_node_tc(p->cfg.engines, g, i);
    if (tc != SG_TC_WGMMA) return SG_CONV_ENGINE_OWN;
    if (!c->wgmma_ok || g->t[g->n[i].in[0]].dtype != DT_BF16) {
        (*refused)++;
        return SG_CONV_ENGINE_OWN;
    }
    return CONV_ENGINE_WGMMA;
}

/* The own-only ops (no engine-chosen conv node) on the wgmma kernels: node_eng[i] =
 * CONV_ENGINE_WGMMA (0 otherwise: mma.sync) for a shortcut fold (conv2d_sc) where its backward
 * passes are on them (their layers' generation: SG_CONV_TC, a resume's record, the table's
 * conv2 layer, sg_engine_table_node_tc); for an upsample conv (upconv2d, and its two backward
 * passes with it), or a fold in a plan without backward passes (sampling), where SG_CONV_TC or
 * the table's (first) layer says wgmma; only for bf16 on a device that runs them. The call
 * itself still runs on mma.sync where the wgmma refusal refuses an operand (fixed by the plan,
 * so the same calls every step). */
static void prepare_own_only(cuda_ctx *c, const sg_plan *p) {
    const sg_graph *g = &p->g;
    int on[2] = {0, 0};
    for (int i = 0; i < g->nn; i++) {
        const int up = g->n[i].op == OP_UPCONV2D;
        if (g->n[i].op != OP_CONV2D_SC && !up) continue;
        int gen = -1;
        /* (its backward passes on own: a 1x1 shortcut's may be on gemm under auto) */
        for (int j = 0; j < g->nn && gen < 0; j++)
            if (is_conv(g->n[j].op) && g->n[j].fwd == i && on_own(c->node_eng[j]))
                gen = c->node_eng[j] == CONV_ENGINE_WGMMA;
        if (gen < 0) {
            char names[2][SG_NAME_MAX];
            const sg_engine_entry *e = sg_conv_layers_computed(g, i, names) > 0
                                           ? sg_engine_table_find(p->cfg.engines, names[0])
                                           : NULL;
            gen = c->conv_tc_force >= 0 ? c->conv_tc_force == SG_TC_WGMMA
                                        : e && e->engine == SG_LAYER_OWN && e->tc == SG_TC_WGMMA;
        }
        c->node_eng[i] =
            gen > 0 && c->wgmma_ok && g->t[g->n[i].in[0]].dtype == DT_BF16 ? CONV_ENGINE_WGMMA : 0;
        on[up] += c->node_eng[i] != 0;
        for (int j = 0; up && j < g->nn; j++)
            if (g->n[j].fwd == i &&
                (g->n[j].op == OP_UPCONV2D_BWD_DATA || g->n[j].op == OP_UPCONV2D_BWD_WEIGHT))
                c->node_eng[j] = c->node_eng[i];
    }
    if (on[0] || on[1])
        fprintf(stderr,
                "stepgraph: %d shortcut fold(s) (conv2d_sc) and %d upsample conv(s) (upconv2d, "
                "with their backward passes) on the wgmma kernels\n",
                on[0], on[1]);
}

/* FWD_1X1_OWN (the file comment): is conv node i a bf16 1x1 forward on a stored input (a gemm
 * node) whose channels own's tensor-core kernel takes, and whose GEMM would need the fp32 tile
 * (its input a concatenation, or the library without the bias epilogue)? */
static int fwd_1x1_own(const cuda_ctx *c, const sg_graph *g, int i) {
    const sg_node *nd = &g->n[i];
    if (!sg_conv_gemm_node(g, i) || sg_conv_pass_of(nd->op) != SG_CONV_PASS_FWD ||
        g->t[nd->in[0]].dtype != DT_BF16 || (c->gemm_epi && !g->t[nd->in[0]].nparts))
        return 0;
    const sg_conv_dims d = sg_conv_dims_of(g, nd);
    return d.Ci % 8 == 0 && d.Co % 8 == 0;
}

/* describe()'s conv_wino: "on" (SG_CONV_WINO=1), "table" (unset, and the engine table puts
 * passes on Winograd), "off" (neither) */
static const char *wino_text(const cuda_ctx *c) {
    return c->conv_wino > 0 ? "on" : c->conv_wino < 0 && c->wino_nodes ? "table" : "off";
}

/* Would the Winograd form (kernels/cuda/conv_wino.cu) take conv node `node` with the switch on:
 * an fp32 3x3 stride-1 padding-1 pass that the thin kernels (before it in conv.cu) leave to the
 * tiles */
static int wino_node(const sg_plan *p, int node) {
    const sg_node *nd = &p->g.n[node];
    const int pass = sg_conv_pass_of(nd->op);
    if (!sg_op_is_conv(nd->op) || pass < 0) return 0;
    const sg_conv_dims d = sg_conv_dims_of(&p->g, nd);
    const int x = pass == SG_CONV_PASS_BWD_DATA     ? nd->out[0]
                  : pass == SG_CONV_PASS_BWD_FILTER ? nd->in[1]
                                                    : nd->in[0];
    return p->g.t[x].dtype == DT_F32 && d.K == 3 && d.S == 1 && d.pad == 1 &&
           !(cuda_conv2d_thin_passes(d.Ci, d.Co, d.K, d.S) & (1u << pass));
}

/* THIN_OWN (the file comment): is conv node i a pass the thin kernels take, its x (forward,
 * weight gradient) or dx (data gradient) one buffer? */
static int thin_own_node(const sg_graph *g, int i) {
    const sg_node *nd = &g->n[i];
    const int pass = sg_conv_pass_of(nd->op);
    if (pass < 0) return 0;
    const int x = pass == SG_CONV_PASS_BWD_DATA     ? nd->out[0]
                  : pass == SG_CONV_PASS_BWD_FILTER ? nd->in[1]
                                                    : nd->in[0];
    if (g->t[x].nparts) return 0;
    const sg_conv_dims d = sg_conv_dims_of(g, nd);
    return (cuda_conv2d_thin_passes(d.Ci, d.Co, d.K, d.S) >> pass) & 1u;
}

/* Decide every conv node's engine (see the file comment), once, before the warm-up step. */
static int prepare_conv_engines(sg_backend *be, const sg_plan *p, void *lib_ws, int64_t lib_wsb) {
    cuda_ctx *c = be->ctx;
    const sg_graph *g = &p->g;
    c->conv_engine = be->conv_engine;
    if (c->conv_engine < SG_CONV_ENGINE_AUTO || c->conv_engine > SG_CONV_ENGINE_CUDNN)
        return sg_set_error("conv engine %d is not auto, own or cudnn", c->conv_engine);
    if (prepare_conv_tc(c, g, p->cfg.engines)) return SG_ERR;
    c->node_eng = calloc((size_t)(g->nn > 0 ? g->nn : 1), 1);
    if (!c->node_eng) return sg_set_error("out of host memory");
    int want = c->conv_engine != SG_CONV_ENGINE_OWN, concat = 0, first_concat = -1;
    int tc_refused = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
#ifdef SG_HAVE_CUDNN
    if (want && sg_cudnn_create(&c->dnn, c->st, lib_ws, lib_wsb)) {
        if (c->conv_engine == SG_CONV_ENGINE_CUDNN)
            return sg_set_error("--conv-engine cudnn: %s", sg_last_error());
        fprintf(stderr,
                "stepgraph: warning: cuDNN is unusable (%s): every conv runs on the own "
                "engine\n",
                sg_last_error());
        want = 0;
    }
    /* fp32 convs on TF32 tensor cores only when asked for (cudnn_conv.h) */
    const char *tf32 = getenv("SG_CUDNN_TF32");
    if (c->dnn && tf32 && !strcmp(tf32, "1")) {
        sg_cudnn_allow_tf32(c->dnn, 1);
        c->f32_own = 0; /* TF32 engines are another matter: unmeasured against own */
        fprintf(stderr, "stepgraph: SG_CUDNN_TF32=1: fp32 convs may run on TF32 engines\n");
    }
    /* a tuning run: each cuDNN engine chosen by timing (graph/engine_tune.h) */
    if (c->dnn && be->cudnn_time_reps > 0) {
        if (sg_cudnn_set_timing(c->dnn, be->cudnn_time_reps, &c->win, stderr)) return SG_ERR;
        fprintf(stderr,
                "stepgraph: cuDNN engines chosen by timing (%d runs of each candidate), for the "
                "engine table\n",
                be->cudnn_time_reps);
    }
    /* the engine table's timed cuDNN engines, asked for before any engine is chosen (a
     * resume's record, below, is asked for after them and wins) */
    if (want && c->conv_engine == SG_CONV_ENGINE_AUTO && p->cfg.engines)
        apply_table_engines(c, g, p->cfg.engines);
    /* a resume: the engines the checkpoint's step ran (before any engine is chosen) */
    unsigned char *pinned = NULL;
    int pins_own = 0, pins_cudnn = 0;
    if (want && be->conv_pins) {
        pinned = calloc((size_t)(g->nn > 0 ? g->nn : 1), 1);
        if (!pinned) return sg_set_error("out of host memory");
        apply_conv_pins(c, g, be->conv_pins, pinned, &pins_own, &pins_cudnn);
    }
#else
    (void)lib_ws, (void)lib_wsb;
    if (c->conv_engine == SG_CONV_ENGINE_CUDNN)
        return sg_set_error("--conv-engine cudnn: this build has no cuDNN (none was found at "
                            "configure time: -DSG_CUDNN_ROOT=DIR, see README.md)");
    want = 0;
#endif
    for (int i = 0; i < g->nn; i++) {
        const sg_node *nd = &g->n[i];
        if (!is_conv(nd->op)) continue;
        int eng = SG_CONV_ENGINE_OWN;
        /* the engine table's choice for this layer (auto only: own / cudnn force), own for a
         * cudnn layer's pass the tuning measured faster on own (its input stored all the same) */
        const int layer_pick =
            c->conv_engine == SG_CONV_ENGINE_AUTO ? sg_engine_table_node(p->cfg.engines, g, i) : 0;
        const int pick =
            layer_pick == SG_LAYER_CUDNN && sg_engine_table_node_pass_own(p->cfg.engines, g, i)
                ? SG_LAYER_OWN
                : layer_pick;
        /* auto's library side of a 1x1 stride-1 conv: cuBLASLt GEMMs (own where the table says
         * own; cuDNN only when asked for by --conv-engine cudnn or a resume's record) */
        const int gemm = c->conv_engine == SG_CONV_ENGINE_AUTO && pick != SG_LAYER_OWN &&
                         sg_conv_gemm_node(g, i);
        /* ... but its forward on own by default (the file comment) */
        const int fwd_own = gemm && !layer_pick && fwd_1x1_own(c, g, i);
        /* SG_CONV_THIN=own: a thin pass on own (THIN_OWN, the file comment) */
        const int thin_own = c->thin_own && c->conv_engine == SG_CONV_ENGINE_AUTO && !layer_pick &&
                             thin_own_node(g, i);
        /* an fp32 pass at 32 x 32 and above on own (F32_OWN, the file comment) */
        const int f32_own = c->f32_own && c->conv_engine == SG_CONV_ENGINE_AUTO && !layer_pick &&
                            sg_conv_f32_own_node(g, i);
#ifdef SG_HAVE_CUDNN
        sg_cudnn_conv cv;
        const int eligible = want && conv_cudnn_call(c, g, nd, &cv);
        const int pin = pinned ? pinned[i] : 0;
        if (gemm && (pin == CONV_ENGINE_GEMM ||
                     (!fwd_own && !on_own(pin) && pin != SG_CONV_ENGINE_CUDNN))) {
            eng = CONV_ENGINE_GEMM;
        } else if (fwd_own && pin != SG_CONV_ENGINE_CUDNN) {
            /* own's tensor-core kernel, measured faster than the GEMM (the file comment) */
        } else if (thin_own && pin != SG_CONV_ENGINE_CUDNN) {
            c->thin_own_nodes++; /* the thin kernels, asked for (the file comment) */
        } else if (f32_own && pin != SG_CONV_ENGINE_CUDNN) {
            c->f32_own_nodes++; /* measured faster on own (the file comment) */
        } else if (!want) {
            /* own asked for, or cuDNN unusable (said above) */
        } else if (!eligible) {
            if (first_concat < 0) first_concat = i;
            concat++;
            if (pick == SG_LAYER_CUDNN)
                fprintf(stderr,
                        "stepgraph: warning: node %d (%s -> %s): the engine table says cudnn, but "
                        "cuDNN cannot take its operands: own\n",
                        i, sg_ops[nd->op].name, g->t[nd->out[0]].name);
        } else if (on_own(pin) && c->conv_engine != SG_CONV_ENGINE_CUDNN &&
                   pick != SG_LAYER_CUDNN) {
            /* own in the checkpoint's step: own again (an explicit --conv-engine cudnn, or a
             * table given on the resume that says cudnn, wins) */
        } else if (pick == SG_LAYER_OWN) {
            /* the engine table measured own faster for this layer */
        } else if (sg_cudnn_probe(c->dnn, &cv) == SG_OK) {
            eng = SG_CONV_ENGINE_CUDNN;
        } else if (c->conv_engine == SG_CONV_ENGINE_CUDNN) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", sg_last_error());
            free(pinned);
            return sg_set_error("node %d (%s -> %s): --conv-engine cudnn, but %s", i,
                                sg_ops[nd->op].name, g->t[nd->out[0]].name, msg);
        } else {
            fprintf(stderr,
                    "stepgraph: warning: node %d (%s -> %s) runs on the own conv engine: %s\n", i,
                    sg_ops[nd->op].name, g->t[nd->out[0]].name, sg_last_error());
            c->convs_fallback++;
        }
#else
        const int pin = 0;
        (void)thin_own; /* every conv is own without cuDNN; F32_OWN's counted all the same */
        c->f32_own_nodes += f32_own;
        if (gemm && !fwd_own) eng = CONV_ENGINE_GEMM;
#endif
        if (eng == SG_CONV_ENGINE_OWN) eng = own_generation(c, p, i, pin, &tc_refused);
        c->node_eng[i] = (unsigned char)eng;
        if (eng == SG_CONV_ENGINE_CUDNN)
            c->convs_cudnn++;
        else if (eng == CONV_ENGINE_GEMM)
            c->convs_gemm++;
        else
            c->convs_own++, c->convs_wgmma += eng == CONV_ENGINE_WGMMA;
    }
    prepare_own_only(c, p);
    /* the Winograd form: SG_CONV_WINO's where set (also for a library node timed on own),
     * else the table's layer on own */
    c->node_wino = calloc((size_t)(g->nn > 0 ? g->nn : 1), 1);
    if (!c->node_wino) return sg_set_error("out of host memory");
    for (int i = 0; i < g->nn; i++) {
        c->node_wino[i] =
            (unsigned char)(wino_node(p, i) && (c->conv_wino >= 0 ? c->conv_wino
                                                                  : on_own(c->node_eng[i]) &&
                                                                        sg_engine_table_node_wino(
                                                                            p->cfg.engines, g, i)));
        c->wino_nodes += c->node_wino[i] && on_own(c->node_eng[i]);
    }
    if (c->conv_wino > 0 || c->wino_nodes)
        fprintf(stderr,
                "stepgraph: %s: %d conv pass(es) on the own engine as Winograd F(2x2, 3x3) (fp32 "
                "3x3 stride 1; other bits than the direct tiles)\n",
                c->conv_wino > 0 ? "SG_CONV_WINO=1" : "engine table", c->wino_nodes);
    /* the layers' own wgmma schedules (engine table) for their nodes on the wgmma kernels */
    c->node_sched = malloc((size_t)(g->nn > 0 ? g->nn : 1));
    if (!c->node_sched) return sg_set_error("out of host memory");
    const int env_both = c->wg_env_persist && c->wg_env_fill; /* nothing left to a layer */
    for (int i = 0; i < g->nn; i++) {
        c->node_sched[i] = (signed char)(c->node_eng[i] == CONV_ENGINE_WGMMA && !env_both
                                             ? sg_engine_table_node_sched(p->cfg.engines, g, i)
                                             : -1);
        c->wg_layer_nodes += c->node_sched[i] >= 0;
    }
    if (c->wg_layer_nodes)
        fprintf(stderr,
                "stepgraph: %d node(s) on the wgmma kernels run under their layer's own schedule "
                "(engine table)%s\n",
                c->wg_layer_nodes,
                c->wg_env_persist ? ", but for SG_WG_PERSIST"
                : c->wg_env_fill  ? ", but for SG_WG_FILL"
                                  : "");
    if (c->thin_own)
        fprintf(stderr,
                "stepgraph: SG_CONV_THIN=own: %d conv pass(es) with 1 to 4 channels on one side "
                "on the own engine's thin kernels\n",
                c->thin_own_nodes);
    if (c->f32_own_nodes && want) /* without cuDNN every conv is own anyway */
        fprintf(stderr,
                "stepgraph: %d fp32 conv pass(es) at 32 x 32 and above on the own engine "
                "(measured faster than cuDNN's deterministic fp32 engines; SG_CONV_F32=cudnn: "
                "not)\n",
                c->f32_own_nodes);
    if (tc_refused)
        fprintf(stderr,
                "stepgraph: warning: %d own conv node(s) asked for the wgmma kernels (engine "
                "table or checkpoint) run on mma.sync: %s\n",
                tc_refused,
                c->wgmma_ok ? "their convolutions are not bf16"
                            : "this device is not compute capability 9.0 (H100/H200)");
#ifdef SG_HAVE_CUDNN
    free(pinned);
    if (want && be->conv_pins) {
        int met = 0, missed = 0;
        const int descs = sg_cudnn_preferences(c->dnn, &met, &missed);
        fprintf(stderr,
                "stepgraph: conv engines from the checkpoint: %d node(s) kept on own; %d node(s) "
                "asked for their cuDNN engine (%d descriptors: %d had, %d not, chosen afresh as "
                "said above)\n",
                pins_own, pins_cudnn, descs, met, missed);
    }
#endif
    clock_gettime(CLOCK_MONOTONIC, &t1);
    /* the engine choice builds every plan (runtime-compiled engines compile here): its time */
    const double sec = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (!want && c->convs_gemm)
        fprintf(stderr,
                "stepgraph: conv engines (%s, no cuDNN): %d conv nodes on gemm (1x1, cuBLASLt), "
                "%d on own (%d on the wgmma kernels)\n",
                sg_conv_engine_name(c->conv_engine), c->convs_gemm, c->convs_own, c->convs_wgmma);
    else if (want)
        fprintf(stderr,
                "stepgraph: conv engines (%s): %d conv nodes on cudnn, %d on gemm (1x1, "
                "cuBLASLt), %d on own (%d on the wgmma kernels; %d with a concatenated or fused "
                "operand or mixed dtypes, "
                "e.g. node %d -> %s; %d for lack of a deterministic cuDNN engine); %.1f s to "
                "choose and build the plans\n",
                sg_conv_engine_name(c->conv_engine), c->convs_cudnn, c->convs_gemm, c->convs_own,
                c->convs_wgmma, concat, first_concat,
                first_concat >= 0 ? g->t[g->n[first_concat].out[0]].name : "-", c->convs_fallback,
                sec);
    return SG_OK;
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
static void *kin(const cuda_call *k, int i) {
    return P(k->c, k->g, k->nd->in[i]);
}
static void *kout(const cuda_call *k, int i) {
    return P(k->c, k->g, k->nd->out[i]);
}
static sg_cat kin_cat(const cuda_call *k, int i) {
    return CAT(k->c, k->g, k->nd->in[i]);
}
static sg_cat kout_cat(const cuda_call *k, int i) {
    return CAT(k->c, k->g, k->nd->out[i]);
}
/* the kernels take one accumulate flag per output: both halves of a virtual output agree
 * (cuda_prepare checks it) */
static int kacc(const cuda_call *k, int i) {
    return (int)(sg_accum_bits(k->nd, i) & 1u);
}

/* ---- one function per op, cuda_run_<id> (planner/op_list.h), in op-family order, each
 * returning its launcher's status. Sizes from planner/op_dims.h, args by name. */
#define CUDA_RUN(id) static int cuda_run_##id(const cuda_call *k)

CUDA_RUN(gather_batch) {
    const sg_tensor *ds = &k->g->t[k->nd->in[0]];
    const sg_gather_args *a = &k->a->gather;
    return cuda_gather_batch(k->st, kout(k, 0), kin(k, 0), ds->shape[0], (int)ds->shape[1],
                             (int)ds->shape[2], (int)ds->shape[3], a->N, a->img, a->img, kin(k, 1),
                             kin(k, 2), a->flip, a->batch, (int64_t)k->slice * a->N);
}
CUDA_RUN(sample_t) {
    return cuda_sample_timesteps(k->st, kout(k, 0), k->a->sample_t.N, k->a->sample_t.T, kin(k, 0),
                                 kin(k, 1), k->slice * (uint64_t)k->a->sample_t.N);
}
CUDA_RUN(noise) {
    return cuda_gaussian(k->st, kout(k, 0), k->n0, kin(k, 1), kin(k, 2), SG_RNG_NOISE,
                         k->slice * (uint64_t)k->n0);
}
CUDA_RUN(ddpm_noise) {
    const sg_ddpm_args *a = &k->a->ddpm;
    int N = (int)k->g->t[k->nd->in[0]].shape[0];
    return cuda_ddpm_noise(k->st, kout(k, 0), kin(k, 0), kin(k, 1), kin(k, 2), kin(k, 3), N,
                           (int)(k->n0 / N), a->T, k->dt);
}
CUDA_RUN(timestep_emb) {
    return cuda_timestep_emb(k->st, kout(k, 0), kin(k, 0), (int)k->g->t[k->nd->in[0]].shape[0],
                             k->a->temb.dim, k->dt);
}

/* conv / linear forward and backward-data: the weights (input 1) come in the activations' dtype
 * act_dt, as the launchers take them (bf16: the plan's copy; sg_plan_verify holds plans to it) */
static int weights_in(const cuda_call *k, int act_dt) {
    const sg_tensor *w = &k->g->t[k->nd->in[1]];
    if ((int)w->dtype != act_dt)
        return sg_set_error("the weights %s are %s, the activations %s", w->name,
                            sg_dtype_names[w->dtype], sg_dtype_names[act_dt]);
    return SG_OK;
}

/* ---- Linear groups. A run of consecutive linear nodes on one input (the ResBlocks'
 * time-embedding projections, planner/unet.c: right after the time MLP), and the run of their
 * backward nodes (data passes adding into that input's one gradient, weight passes on that
 * input), each run as one group: one launch of kernels/cuda/linear.cu's group kernels a pass,
 * where each node took cuBLASLt's GEMM and a bias or column-sum pass. The bits are the group
 * kernels' (cuda_kernels.h states every sum), a function of the plan: an eager step, a replay
 * and a resume all have them. A group runs at its last node, the others launch nothing; so
 * prepare_linear_groups takes a run only where what its nodes write lies apart from everything
 * else they read and write (lin_run_apart). */

/* tensor t may be a group's operand: stored, one buffer */
static int lin_operand(const sg_graph *g, int t) {
    return t >= 0 && !sg_tensor_virtual(&g->t[t]) && !g->t[t].nparts && g->t[t].offset >= 0;
}

/* Every tensor nodes first..last write lies apart from every other tensor they read or write
 * (the data passes' one dx, which they all write, aside): nothing a node of the run reads is
 * overwritten inside the run, and no two outputs share bytes. */
static int lin_run_apart(const sg_graph *g, int first, int last) {
    for (int i = first; i <= last; i++) {
        const sg_node *a = &g->n[i];
        for (int o = 0; o < a->nout; o++) {
            const sg_tensor *x = &g->t[a->out[o]];
            for (int j = first; j <= last; j++) {
                const sg_node *b = &g->n[j];
                for (int q = 0; q < b->nin + b->nout; q++) {
                    const int t = q < b->nin ? b->in[q] : b->out[q - b->nin];
                    const sg_tensor *y = &g->t[t];
                    if (t != a->out[o] && x->offset < y->offset + y->bytes &&
                        y->offset < x->offset + x->bytes)
                        return 0;
                }
            }
        }
    }
    return 1;
}

/* The last node of the run of linear-family nodes that begins at node f (f itself: none):
 * forward, linear nodes on f's input; backward, data passes into one dx (every one but the
 * first adding) and weight passes on one x, all of one N, K, dtype and at most
 * SG_LINEAR_GROUP_MAX layers a pass; every operand stored, in the dtypes the group kernels take
 * (the weights in the activations' dtype, as weights_in requires). */
static int lin_run_end(const sg_graph *g, int f) {
    const int fwd = g->n[f].op == OP_LINEAR;
    if (!fwd && g->n[f].op != OP_LINEAR_BWD_DATA && g->n[f].op != OP_LINEAR_BWD_WEIGHT) return f;
    const sg_linear_dims d0 = sg_linear_dims_of(g, &g->n[f]);
    const int dt = (int)g->t[g->n[f].in[0]].dtype;
    int dx = -1, x = -1, nd = 0, nw = 0, i;
    for (i = f; i < g->nn; i++) {
        const sg_node *n = &g->n[i];
        if (fwd ? n->op != OP_LINEAR : n->op != OP_LINEAR_BWD_DATA && n->op != OP_LINEAR_BWD_WEIGHT)
            break;
        const sg_linear_dims d = sg_linear_dims_of(g, n);
        int ok = d.N == d0.N && d.K == d0.K && (int)g->t[n->in[0]].dtype == dt;
        for (int q = 0; q < n->nin + n->nout && ok; q++)
            ok = lin_operand(g, q < n->nin ? n->in[q] : n->out[q - n->nin]);
        /* x, w, dy, y and dx in dt; b, dw and db fp32 */
        if (ok && n->op != OP_LINEAR_BWD_WEIGHT)
            ok = (int)g->t[n->in[1]].dtype == dt && (int)g->t[n->out[0]].dtype == dt;
        if (ok && n->op == OP_LINEAR) ok = g->t[n->in[2]].dtype == DT_F32;
        if (ok && n->op == OP_LINEAR_BWD_WEIGHT)
            ok = g->t[n->out[0]].dtype == DT_F32 && g->t[n->out[1]].dtype == DT_F32;
        if (ok && fwd) ok = n->in[0] == g->n[f].in[0] && nd++ < SG_LINEAR_GROUP_MAX;
        if (ok && n->op == OP_LINEAR_BWD_DATA) {
            ok = (dx < 0 || (n->out[0] == dx && (sg_accum_bits(n, 0) & 1u))) &&
                 nd++ < SG_LINEAR_GROUP_MAX;
            dx = n->out[0];
        }
        if (ok && n->op == OP_LINEAR_BWD_WEIGHT) {
            ok = (x < 0 || n->in[1] == x) && nw++ < SG_LINEAR_GROUP_MAX;
            x = n->in[1];
        }
        if (!ok) break;
    }
    return i - 1 < f ? f : i - 1;
}

static int prepare_linear_groups(cuda_ctx *c, const sg_graph *g) {
    c->lin_first = malloc(sizeof(int) * (size_t)(g->nn > 0 ? g->nn : 1));
    if (!c->lin_first) return sg_set_error("out of memory");
    for (int i = 0; i < g->nn; i++) c->lin_first[i] = -1;
    const char *env = getenv("SG_LINEAR_GROUPS");
    if (env && *env && strcmp(env, "1") != 0) {
        if (strcmp(env, "0") != 0)
            return sg_set_error("SG_LINEAR_GROUPS=%s: expected 1 (the default: runs of linear "
                                "nodes as groups) or 0 (each node on cuBLASLt)",
                                env);
        return SG_OK;
    }
    for (int f = 0; f < g->nn;) {
        const int last = lin_run_end(g, f);
        if (last > f && lin_run_apart(g, f, last)) {
            for (int i = f; i <= last; i++) c->lin_first[i] = f;
            c->lin_groups++;
            c->lin_group_nodes += last - f + 1;
        }
        f = last + 1;
    }
    return SG_OK;
}

/* Node k's part of its group: nothing before the group's last node; there, the group's
 * launches (forward: one; backward: the data pass's, then the weight pass's). */
static int lin_group_run(const cuda_call *k) {
    const cuda_ctx *c = k->c;
    const sg_graph *g = k->g;
    const int i = (int)(k->nd - g->n), f = c->lin_first[i];
    if (i + 1 < g->nn && c->lin_first[i + 1] == f) return SG_OK;
    sg_linear_group gf = {0}, gd = {0}, gw = {0};
    const void *x = NULL;
    void *dx = NULL;
    int accum_dx = 0;
    for (int n = f; n <= i; n++) {
        const sg_node *nd = &g->n[n];
        const int M = sg_linear_dims_of(g, nd).M;
        if (nd->op == OP_LINEAR) {
            const int j = gf.n++;
            gf.M[j] = M, x = P(c, g, nd->in[0]);
            gf.w[j] = P(c, g, nd->in[1]), gf.b[j] = (const float *)P(c, g, nd->in[2]);
            gf.y[j] = P(c, g, nd->out[0]);
        } else if (nd->op == OP_LINEAR_BWD_DATA) {
            const int j = gd.n++;
            gd.M[j] = M, gd.dy[j] = P(c, g, nd->in[0]), gd.w[j] = P(c, g, nd->in[1]);
            if (!dx) dx = P(c, g, nd->out[0]), accum_dx = (int)(sg_accum_bits(nd, 0) & 1u);
        } else {
            const int j = gw.n++;
            gw.M[j] = M, gw.dy[j] = P(c, g, nd->in[0]), x = P(c, g, nd->in[1]);
            gw.dw[j] = (float *)P(c, g, nd->out[0]), gw.db[j] = (float *)P(c, g, nd->out[1]);
            gw.accum |= (sg_accum_bits(nd, 0) & 1u) << j;
        }
    }
    const sg_linear_dims d = sg_linear_dims_of(g, &g->n[f]);
    const int dt = (int)g->t[g->n[f].in[0]].dtype;
    if (gf.n) return cuda_linear_group_fwd(k->st, &gf, x, d.N, d.K, dt);
    if (gd.n && cuda_linear_group_bwd_data(k->st, &gd, dx, d.N, d.K, dt, accum_dx, k->ws, k->wsb))
        return SG_ERR;
    return gw.n ? cuda_linear_group_bwd_weight(k->st, &gw, x, d.N, d.K, dt) : SG_OK;
}

/* node k runs in a linear group */
static int in_lin_group(const cuda_call *k) {
    return k->c->lin_first && k->c->lin_first[k->nd - k->g->n] >= 0;
}

CUDA_RUN(linear) {
    if (in_lin_group(k)) return lin_group_run(k);
    sg_linear_dims d = sg_linear_dims_of(k->g, k->nd);
    if (weights_in(k, k->dt)) return SG_ERR;
    return cuda_linear_fwd(k->st, k->blas, kout(k, 0), kin(k, 0), kin(k, 1), kin(k, 2), d.N, d.K,
                           d.M, k->dt, k->ws, k->wsb);
}
CUDA_RUN(linear_bwd_data) {
    if (in_lin_group(k)) return lin_group_run(k);
    sg_linear_dims d = sg_linear_dims_of(k->g, k->nd);
    if (weights_in(k, k->dt)) return SG_ERR;
    return cuda_linear_bwd_data(k->st, k->blas, kout(k, 0), kin(k, 0), kin(k, 1), d.N, d.K, d.M,
                                k->dt, kacc(k, 0), k->ws, k->wsb);
}
CUDA_RUN(linear_bwd_weight) {
    if (in_lin_group(k)) return lin_group_run(k);
    sg_linear_dims d = sg_linear_dims_of(k->g, k->nd);
    return cuda_linear_bwd_weight(k->st, k->blas, kout(k, 0), kout(k, 1), kin(k, 0), kin(k, 1), d.N,
                                  d.K, d.M, k->dy_dt, kacc(k, 0), k->ws, k->wsb);
}

/* A conv node on the cuDNN engine: the call (cudnn_conv.h; a weight gradient's db included),
 * then the forward bias where cuDNN could not fuse it. */
static int conv_run_cudnn(const cuda_call *k, sg_conv_dims d) {
#ifdef SG_HAVE_CUDNN
    sg_cudnn_conv cv;
    if (!conv_cudnn_call(k->c, k->g, k->nd, &cv))
        return sg_set_error("conv: a concatenated operand cannot run on cuDNN (prepare chose it)");
    int bias_done = 0;
    if (sg_cudnn_run(k->c->dnn, &cv, &bias_done)) return SG_ERR;
    const int64_t P = (int64_t)d.N * d.Ho * d.Wo;
    if ((k->nd->op == OP_CONV2D || k->nd->op == OP_CONV2D_ADD) && !bias_done &&
        cuda_conv2d_bias_add(k->st, kout(k, 0), kin(k, 2), P, d.Co, k->dt))
        return SG_ERR;
    if (k->nd->op == OP_CONV2D_ADD) /* the residual: the unfused add (res + y in place) */
        return cuda_add_fwd(k->st, kout(k, 0), kin(k, 3), kout(k, 0), P * d.Co, k->dt);
    return SG_OK;
#else
    (void)k, (void)d;
    return sg_set_error("conv: this build has no cuDNN engine");
#endif
}

/* The node is on the wgmma kernels (own_generation) and this call can run there: x the
 * (concatenated) input, y the other activation (y, or dy for the backward passes), w the bf16
 * weights (NULL for the weight gradient) */
static int conv_on_wgmma(const cuda_call *k, sg_conv_dims d, sg_cat x, const void *y, const void *w,
                         int dt) {
    return k->engine == CONV_ENGINE_WGMMA &&
           cuda_conv2d_wgmma_refusal(x, y, w, d.N, d.H, d.W, d.Co, d.K, d.S, dt) == NULL;
}

/* A conv's input t as the launchers take it: a stored tensor or concatenation as it is; a
 * virtual normalised tensor (planner/fuse.c) as its norm_act node's input x, with the
 * normalisation to apply in *f (f->norm = 0 otherwise); f->halo: SG_TC_HALO's choice. */
static sg_cat conv_input(const cuda_ctx *c, const sg_graph *g, int t, sg_conv_fuse *f) {
    memset(f, 0, sizeof *f);
    f->halo = c->tc_halo;
    const int vn = g->t[t].vnorm;
    if (vn < 0) return CAT(c, g, t);
    const sg_node *nd = &g->n[vn];
    const sg_norm_operands o = sg_norm_operands_of(nd);
    f->norm = 1;
    f->mean = P(c, g, nd->out[1]), f->rstd = P(c, g, nd->out[2]);
    f->gamma = P(c, g, nd->in[o.gamma]), f->beta = P(c, g, nd->in[o.beta]);
    f->v = o.temb ? P(c, g, nd->in[o.v]) : NULL;
    f->G = nd->a.gn.groups, f->act = nd->a.gn.act;
    f->drop = node_drop(c, g, nd, sg_node_slice(g, nd, c->rank));
    return CAT(c, g, nd->in[o.x]);
}

/* A virtual normalised operand (planner/fuse.c) is computed inside the bf16 tensor-core
 * convolutions only (kernels/cuda/conv_tc.cu, conv_wgmma.cu): a plan that gives one to any other
 * reader is refused here, before the step, naming the node (the arena is allocated: the path
 * depends on the operands' alignment, which the plan's offsets fix). */
static int check_fused_operands(const cuda_ctx *c, const sg_graph *g) {
    for (int i = 0; i < g->nn; i++) {
        const sg_node *nd = &g->n[i];
        if (nd->op == OP_CONV2D_SC) { /* the fold: the tensor cores take both GEMM parts */
            sg_conv_dims d = sg_conv_dims_of(g, nd);
            sg_conv_fuse f;
            const sg_cat h = conv_input(c, g, nd->in[0], &f);
            const void *y = P(c, g, nd->out[0]);
            if (g->t[nd->out[0]].dtype != DT_BF16 ||
                cuda_conv2d_path(h, y, d.N, d.H, d.W, d.Co, d.K, 1, DT_BF16) !=
                    SG_CONV_PATH_TENSOR_CORE ||
                cuda_conv2d_path(CAT(c, g, nd->in[3]), y, d.N, d.H, d.W, d.Co, 1, 1, DT_BF16) !=
                    SG_CONV_PATH_TENSOR_CORE)
                return sg_set_error("node %d (conv2d_sc -> %s): the 1x1 shortcut folded into "
                                    "conv2 runs on the bf16 tensor-core convolutions only (bf16, "
                                    "every channel count a multiple of 8); plan with --fuse 0",
                                    i, g->t[nd->out[0]].name);
        }
        for (int k = 0; k < nd->nin; k++) {
            const sg_tensor *t = &g->t[nd->in[k]];
            if (t->vnorm < 0) continue;
            const int conv_x =
                ((nd->op == OP_CONV2D || nd->op == OP_CONV2D_ADD || nd->op == OP_CONV2D_SC) &&
                 k == 0) ||
                (nd->op == OP_CONV2D_BWD_WEIGHT && k == 1);
            const char *why = NULL;
            if (!conv_x) {
                why = "only a convolution's input can be";
            } else {
                sg_conv_dims d = sg_conv_dims_of(g, nd);
                sg_conv_fuse f;
                const sg_cat x = conv_input(c, g, nd->in[k], &f);
                const int other = nd->op == OP_CONV2D_BWD_WEIGHT ? nd->in[0] : nd->out[0];
                if (t->dtype != DT_BF16 ||
                    cuda_conv2d_path(x, P(c, g, other), d.N, d.H, d.W, d.Co, d.K, d.S, DT_BF16) !=
                        SG_CONV_PATH_TENSOR_CORE)
                    why = "the CUDA kernels compute one only in bf16 tensor-core convolutions "
                          "(bf16, every channel count a multiple of 8)";
            }
            if (why)
                return sg_set_error("node %d (%s -> %s): its input %s is a fused normalisation "
                                    "(--fuse 1: never stored), and %s; plan with --fuse 0",
                                    i, sg_ops[nd->op].name, g->t[nd->out[0]].name, t->name, why);
        }
    }
    return SG_OK;
}

static int node_writes(const sg_node *nd, int t) {
    for (int k = 0; k < nd->nout; k++)
        if (nd->out[k] == t) return 1;
    return 0;
}
/* The statistics' partials of each forward norm_act node (kernels/cuda/norm.cu) are computed by
 * the conv-like node that writes its input x (or the first part of a concatenated x) when that
 * node runs right before it (only virtual concatenations between) and computes them in its
 * tensor-core epilogue (a producer that would run a pass after itself is unpaired once the engines
 * are chosen: unpair_stats_after, below). The partials lie in the
 * kernel workspace after the producer's own scratch (the plan sizes the workspace per node;
 * a pair that does not fit in it is not made), where the normalisation, the next node to
 * run, finds them. The partials are one fixed function of x whoever computes them, so this
 * changes no bits (SG_FUSE_STATS=0 turns it off, fwd or bwd keeps one direction; cuda_step_host
 * compares). The pairs depend on the plan alone: the same launches every step, eager and
 * captured. */
static int prepare_norm_stats(cuda_ctx *c, const sg_graph *g, const sg_engine_table *table) {
    const int nn = g->nn > 0 ? g->nn : 1;
    c->stats_to = malloc(sizeof(int) * (size_t)nn);
    c->norm_done = calloc((size_t)nn, sizeof(int));
    c->norm_off = calloc((size_t)nn, sizeof(int64_t));
    if (!c->stats_to || !c->norm_done || !c->norm_off) return sg_set_error("out of host memory");
    for (int i = 0; i < nn; i++) c->stats_to[i] = -1;
    c->stats_fused = c->stats_fused_fwd = 0;
    /* SG_FUSE_STATS: 1 (the default) both directions, fwd or bwd one, 0 none: the same bits
     * every way, so a GPU can time each (docs/gpu-status.md) */
    const char *env = getenv("SG_FUSE_STATS");
    int fwd = (SG_KNOB_FUSE_STATS_DEFAULT & SG_KNOB_STATS_FWD) != 0,
        bwd = (SG_KNOB_FUSE_STATS_DEFAULT & SG_KNOB_STATS_BWD) != 0;
    if (env && *env) {
        fwd = !strcmp(env, "1") || !strcmp(env, "fwd");
        bwd = !strcmp(env, "1") || !strcmp(env, "bwd");
        if (!fwd && !bwd && strcmp(env, "0"))
            return sg_set_error("SG_FUSE_STATS=%s: expected 1 (the default), fwd, bwd or 0", env);
    } else if (table && table->knobs.fuse_stats >= 0) { /* the table's timed choice */
        fwd = (table->knobs.fuse_stats & SG_KNOB_STATS_FWD) != 0;
        bwd = (table->knobs.fuse_stats & SG_KNOB_STATS_BWD) != 0;
    }
    /* SG_NORM_ONEPASS: a forward normalisation that stores y, or a backward one, whose shape the
     * one-pass kernel takes computes its own partials, in that pass: not the convolution before
     * (forward) or after (the data gradient that writes dy) */
    c->norm_onepass_nodes = c->norm_bwd_onepass_nodes = 0;
    for (int j = 0; j < g->nn && c->norm_onepass; j++) {
        const sg_node *nj = &g->n[j];
        const int fwd_op = nj->op == OP_NORM_ACT || nj->op == OP_NORM_ACT_TEMB;
        const int bwd_op = nj->op == OP_NORM_ACT_BWD || nj->op == OP_NORM_ACT_TEMB_BWD;
        if (!fwd_op && !bwd_op) continue;
        const sg_gn_dims d = sg_gn_dims_of(g, nj);
        const int x = nj->in[sg_norm_operands_of(nj).x], dt = g->t[x].dtype;
        if (fwd_op && (c->norm_onepass & SG_NORM_ONEPASS_FWD) && g->t[nj->out[0]].vnorm < 0 &&
            cuda_norm_act_onepass_groups((int)d.N, (int)d.HW, (int)d.C, (int)d.G, dt) > 0)
            c->norm_done[j] = -1, c->norm_onepass_nodes++; /* -1: not paired (below) */
        if (bwd_op && (c->norm_onepass & SG_NORM_ONEPASS_BWD) &&
            cuda_norm_act_bwd_onepass_groups((int)d.N, (int)d.HW, (int)d.C, (int)d.G, dt) > 0)
            c->norm_done[j] = -1, c->norm_bwd_onepass_nodes++;
    }
    for (int j = 0; j < g->nn && fwd; j++) {
        const sg_node *nj = &g->n[j];
        if (nj->op != OP_NORM_ACT && nj->op != OP_NORM_ACT_TEMB) continue;
        if (c->norm_done[j] < 0) continue;
        const int x = nj->in[sg_norm_operands_of(nj).x];
        const int first = g->t[x].nparts ? g->t[x].parts[0] : x;
        int i = j - 1;
        while (i >= 0 && g->n[i].op == OP_CONCAT) i--;
        if (i < 0) continue;
        const sg_op op = g->n[i].op;
        if ((op != OP_CONV2D && op != OP_CONV2D_ADD && op != OP_CONV2D_SC && op != OP_UPCONV2D) ||
            g->n[i].out[0] != first)
            continue;
        const sg_gn_dims d = sg_gn_dims_of(g, nj);
        const int64_t off = sg_ws_align(sg_node_workspace_bytes(g, &g->n[i]));
        if (off + sg_ws_norm_act_fwd(d.N, d.HW, d.C, d.G) > c->ws_bytes) continue;
        c->stats_to[i] = j;
        c->norm_off[j] = off;
        c->norm_done[j] = (int)g->t[first].shape[3];
        c->stats_fused++, c->stats_fused_fwd++;
    }
    /* the backward: each norm_act's backward with the data gradient that last wrote its dy (the
     * gradient of its output y, which only convolutions read), its backward partials after the
     * scratch of every node from that one to it (e.g. the time-embedding projection's
     * backward: small), when that fits in the workspace */
    for (int j = 0; j < g->nn && bwd; j++) {
        const sg_node *nj = &g->n[j];
        if (nj->op != OP_NORM_ACT_BWD && nj->op != OP_NORM_ACT_TEMB_BWD) continue;
        if (c->norm_done[j] < 0) continue;
        const sg_norm_operands o = sg_norm_operands_of(nj);
        const int dy = nj->in[o.dy];
        int i = j - 1;
        while (i >= 0 && !node_writes(&g->n[i], dy)) i--;
        if (i < 0 || g->n[i].op != OP_CONV2D_BWD_DATA || g->t[dy].nparts) continue;
        int64_t off = 0;
        for (int k = i; k < j; k++) {
            const int64_t b = sg_ws_align(sg_node_workspace_bytes(g, &g->n[k]));
            off = b > off ? b : off;
        }
        const sg_gn_dims d = sg_gn_dims_of(g, nj);
        if (off + sg_ws_norm_act_bwd(d.N, d.HW, d.C, d.G, o.temb) > c->ws_bytes) continue;
        c->stats_to[i] = j;
        c->norm_off[j] = off;
        c->norm_done[j] = 1;
        c->stats_fused++;
    }
    for (int j = 0; j < g->nn; j++)
        if (c->norm_done[j] < 0) c->norm_done[j] = 0;
    return SG_OK;
}
/* A forward pair saves the normalisation a read of x only where the conv computes the partials
 * in its epilogue: a conv2d or conv2d_add on the own engine's bf16 tensor-core kernels (mma.sync,
 * wgmma), and every shortcut fold (conv2d_sc: those kernels alone). Any other producer (a conv
 * on cuDNN, on the GEMM engine's cuBLASLt, on the CUDA-core tiles; an upsample conv) runs them
 * as a pass after itself (cuda_norm_partials), and the normalisation then merges them in a
 * launch of its own (norm_stats_final_kernel): two launches where the normalisation alone takes
 * one (norm_stats_kernel: the partials, then each sample's last block merges), for the same
 * bytes read and the same bits. So, once the engines are chosen (prepare_conv_engines), those
 * forward pairs are undone: unet_cifar's default step (bf16, its 3x3 convs on cuDNN) loses a
 * launch for each of its 29 normalisations after a conv. (A tensor-core forward whose tiles do
 * not cover whole segments still runs the pass after: its launcher decides, tc_fwd_fuse and
 * conv_wg_fwd_launch.) The backward pairs stay: a data gradient's partials pass (the terms in
 * the same launch) replaces the normalisation's own, launch for launch. */
static int stats_in_epilogue(const cuda_ctx *c, const sg_graph *g, int i) {
    const sg_node *nd = &g->n[i];
    if (nd->op == OP_CONV2D_SC) return 1;
    if ((nd->op != OP_CONV2D && nd->op != OP_CONV2D_ADD) || !on_own(c->node_eng[i])) return 0;
    const sg_conv_dims d = sg_conv_dims_of(g, nd);
    sg_conv_fuse f;
    const sg_cat x = conv_input(c, g, nd->in[0], &f);
    return cuda_conv2d_path(x, P(c, g, nd->out[0]), d.N, d.H, d.W, d.Co, d.K, d.S,
                            (int)g->t[nd->out[0]].dtype) == SG_CONV_PATH_TENSOR_CORE;
}
static void unpair_stats_after(cuda_ctx *c, const sg_graph *g) {
    for (int i = 0; i < g->nn; i++) {
        const int j = c->stats_to[i];
        if (j < 0 || (g->n[j].op != OP_NORM_ACT && g->n[j].op != OP_NORM_ACT_TEMB) ||
            stats_in_epilogue(c, g, i))
            continue;
        c->stats_to[i] = -1;
        c->norm_done[j] = 0;
        c->norm_off[j] = 0;
        c->stats_fused--;
        c->stats_fused_fwd--;
    }
}

/* Where node k writes the partials of the normalisation after it (NULL: nowhere), and their
 * channels per segment (that normalisation's C) */
static float *node_stats(const cuda_call *k, int *ld) {
    const int i = (int)(k->nd - k->g->n), j = k->c->stats_to[i];
    if (j < 0) return NULL;
    *ld = sg_gn_dims_of(k->g, &k->g->n[j]).C;
    return (float *)((char *)k->c->ws + k->c->norm_off[j]);
}
/* The backward partials data gradient k computes for the norm_act backward after it (its
 * operands: the norm's x, v, statistics, gamma, beta, dropout), or part = NULL */
static sg_norm_bwd_fuse node_bwd_stats(const cuda_call *k) {
    sg_norm_bwd_fuse nb;
    memset(&nb, 0, sizeof nb);
    const int i = (int)(k->nd - k->g->n), j = k->c->stats_to[i];
    if (j < 0) return nb;
    const sg_node *nj = &k->g->n[j];
    const sg_norm_operands o = sg_norm_operands_of(nj);
    nb.x = CAT(k->c, k->g, nj->in[o.x]);
    nb.mean = P(k->c, k->g, nj->in[o.mean]), nb.rstd = P(k->c, k->g, nj->in[o.rstd]);
    nb.gamma = P(k->c, k->g, nj->in[o.gamma]), nb.beta = P(k->c, k->g, nj->in[o.beta]);
    nb.v = o.temb ? P(k->c, k->g, nj->in[o.v]) : NULL;
    nb.drop = node_drop(k->c, k->g, nj, sg_node_slice(k->g, nj, k->c->rank));
    nb.G = nj->a.gn.groups, nb.act = nj->a.gn.act;
    nb.part = (float *)((char *)k->c->ws + k->c->norm_off[j]);
    nb.epilogue = k->c->dgrad_epilogue;
    return nb;
}
/* ... by the partials pass after a data gradient off the own launchers (cuDNN, wgmma) */
static int node_bwd_stats_after(const cuda_call *k, sg_conv_dims d) {
    const sg_norm_bwd_fuse nb = node_bwd_stats(k);
    return nb.part ? cuda_norm_bwd_partials(k->st, &nb, kout(k, 0), d.N, d.H * d.W, d.Ci, k->dy_dt)
                   : SG_OK;
}

/* The partials pass after a conv that ran off the fused launchers (cuDNN, upconv2d) */
static int node_stats_after(const cuda_call *k, int N, int HW, int Co) {
    int ld = 0;
    float *stats = node_stats(k, &ld);
    return stats ? cuda_norm_partials(k->st, stats, ld, sg_cat1(kout(k, 0), Co), N, HW, 0, k->dt)
                 : SG_OK;
}

/* the forward conv, with the residual res added in its store where not NULL (conv2d_add) */
static int conv_fwd_run(const cuda_call *k, const void *res) {
    sg_conv_dims d = sg_conv_dims_of(k->g, k->nd);
    if (weights_in(k, k->dt)) return SG_ERR;
    if (k->engine == SG_CONV_ENGINE_CUDNN)
        return conv_run_cudnn(k, d) || node_stats_after(k, d.N, d.Ho * d.Wo, d.Co);
    sg_conv_fuse f;
    const sg_cat x = conv_input(k->c, k->g, k->nd->in[0], &f);
    f.res = res;
    f.stats = node_stats(k, &f.stats_ld);
    if (k->engine == CONV_ENGINE_GEMM)
        return cuda_conv2d_gemm_fwd(k->st, k->blas, kout(k, 0), x, kin(k, 1), kin(k, 2), &f, d.N,
                                    d.H, d.W, d.Ci, d.Co, k->dt, k->ws, k->wsb);
    if (conv_on_wgmma(k, d, x, kout(k, 0), kin(k, 1), k->dt))
        return cuda_conv2d_wgmma_fwd(k->st, kout(k, 0), x, kin(k, 1), kin(k, 2), &f, d.N, d.H, d.W,
                                     d.Ci, d.Co, d.K, d.S, d.pad, k->dt, k->ws, k->wsb);
    return cuda_conv2d_fwd(k->st, k->blas, kout(k, 0), x, kin(k, 1), kin(k, 2), &f, d.N, d.H, d.W,
                           d.Ci, d.Co, d.K, d.S, d.pad, k->dt, k->ws, k->wsb);
}
CUDA_RUN(conv2d) {
    return conv_fwd_run(k, NULL);
}
/* the conv with the residual add in its store (sg_conv_fuse.res; after it off the tensor
 * cores), and its input normalised in its tile loads where that is virtual */
CUDA_RUN(conv2d_add) {
    return conv_fwd_run(k, kin(k, 3));
}
/* conv2 with its 1x1 shortcut folded into one tensor-core GEMM (conv2d_sc): always the own
 * kernels, whatever the conv engine (cuDNN takes no fold; it is no engine-chosen conv node,
 * sg_op_is_conv), on mma.sync or, where prepare_own_only put it there and both operands suit
 * them, on the wgmma kernels (the same k order); h normalised in its tile loads where it is
 * virtual, x (the block's input, often the skip concatenation) loaded as it is */
CUDA_RUN(conv2d_sc) {
    sg_conv_dims d = sg_conv_dims_of(k->g, k->nd);
    if (weights_in(k, k->dt)) return SG_ERR;
    const sg_tensor *ws = &k->g->t[k->nd->in[4]];
    if ((int)ws->dtype != k->dt)
        return sg_set_error("the shortcut weights %s are %s, the activations %s", ws->name,
                            sg_dtype_names[ws->dtype], sg_dtype_names[k->dt]);
    sg_conv_fuse f;
    const sg_cat h = conv_input(k->c, k->g, k->nd->in[0], &f);
    f.stats = node_stats(k, &f.stats_ld);
    const sg_cat x = CAT(k->c, k->g, k->nd->in[3]);
    if (conv_on_wgmma(k, d, h, kout(k, 0), kin(k, 1), k->dt) &&
        cuda_conv2d_wgmma_refusal(x, kout(k, 0), kin(k, 4), d.N, d.H, d.W, d.Co, 1, 1, k->dt) ==
            NULL)
        return cuda_conv2d_wgmma_sc_fwd(k->st, kout(k, 0), h, kin(k, 1), kin(k, 2), &f, x,
                                        kin(k, 4), kin(k, 5), d.N, d.H, d.W, d.Ci, d.Co, d.K, d.pad,
                                        k->dt);
    return cuda_conv2d_sc_fwd(k->st, kout(k, 0), h, kin(k, 1), kin(k, 2), &f, x, kin(k, 4),
                              kin(k, 5), d.N, d.H, d.W, d.Ci, d.Co, d.K, d.pad, k->dt);
}
CUDA_RUN(conv2d_bwd_data) {
    sg_conv_dims d = sg_conv_dims_of(k->g, k->nd);
    if (weights_in(k, k->dy_dt)) return SG_ERR;
    if (k->engine == SG_CONV_ENGINE_CUDNN)
        return conv_run_cudnn(k, d) || node_bwd_stats_after(k, d);
    if (k->engine == CONV_ENGINE_GEMM) {
        const sg_norm_bwd_fuse nb = node_bwd_stats(k);
        return cuda_conv2d_gemm_bwd_data(k->st, k->blas, kout_cat(k, 0), kin(k, 0), kin(k, 1), d.N,
                                         d.H, d.W, d.Ci, d.Co, k->dy_dt, kacc(k, 0), k->ws, k->wsb,
                                         nb.part ? &nb : NULL);
    }
    if (conv_on_wgmma(k, d, kout_cat(k, 0), kin(k, 0), kin(k, 1), k->dy_dt))
        return cuda_conv2d_wgmma_bwd_data(k->st, kout_cat(k, 0), kin(k, 0), kin(k, 1), d.N, d.H,
                                          d.W, d.Ci, d.Co, d.K, d.S, d.pad, k->dy_dt, kacc(k, 0),
                                          k->ws, k->wsb) ||
               node_bwd_stats_after(k, d);
    const sg_norm_bwd_fuse nb = node_bwd_stats(k);
    return cuda_conv2d_bwd_data(k->st, k->blas, kout_cat(k, 0), kin(k, 0), kin(k, 1), d.N, d.H, d.W,
                                d.Ci, d.Co, d.K, d.S, d.pad, k->dy_dt, kacc(k, 0), k->ws, k->wsb,
                                nb.part ? &nb : NULL);
}
CUDA_RUN(conv2d_bwd_weight) {
    sg_conv_dims d = sg_conv_dims_of(k->g, k->nd);
    if (k->engine == SG_CONV_ENGINE_CUDNN) return conv_run_cudnn(k, d);
    sg_conv_fuse f;
    const sg_cat x = conv_input(k->c, k->g, k->nd->in[1], &f);
    if (k->engine == CONV_ENGINE_GEMM)
        return cuda_conv2d_gemm_bwd_weight(k->st, k->blas, kout(k, 0), kout(k, 1), kin(k, 0), x,
                                           d.N, d.H, d.W, d.Ci, d.Co, k->dy_dt, kacc(k, 0), k->ws,
                                           k->wsb);
    if (conv_on_wgmma(k, d, x, kin(k, 0), NULL, k->dy_dt))
        return cuda_conv2d_wgmma_bwd_weight(k->st, kout(k, 0), kout(k, 1), kin(k, 0), x, &f, d.N,
                                            d.H, d.W, d.Ci, d.Co, d.K, d.S, d.pad, k->dy_dt,
                                            kacc(k, 0), k->ws, k->wsb);
    return cuda_conv2d_bwd_weight(k->st, k->blas, kout(k, 0), kout(k, 1), kin(k, 0), x, &f, d.N,
                                  d.H, d.W, d.Ci, d.Co, d.K, d.S, d.pad, k->dy_dt, kacc(k, 0),
                                  k->ws, k->wsb);
}

/* upconv2d: w (input 1) is the fp32 master weights, folded by the launchers (kernels/cuda/conv.cu);
 * each pass on the wgmma kernels where prepare_own_only put the node and they take its operands
 * (cuda_upconv2d_wgmma_refusal: fixed by the plan, so the same kernels every step) */
static int upconv_on_wgmma(const cuda_call *k, const void *lo, const void *hi, const void *wf) {
    const sg_conv_dims d = sg_upconv_dims_of(k->g, k->nd);
    return k->engine == CONV_ENGINE_WGMMA &&
           cuda_upconv2d_wgmma_refusal(lo, hi, wf, d.N, d.H, d.W, d.Ci, d.Co, k->dy_dt) == NULL;
}
CUDA_RUN(upconv2d) {
    sg_conv_dims d = sg_upconv_dims_of(k->g, k->nd);
    return (upconv_on_wgmma(k, kin(k, 0), kout(k, 0), k->ws)
                ? cuda_upconv2d_wgmma_fwd(k->st, kout(k, 0), kin(k, 0), kin(k, 1), kin(k, 2), d.N,
                                          d.H, d.W, d.Ci, d.Co, k->dt, k->ws, k->wsb)
                : cuda_upconv2d_fwd(k->st, kout(k, 0), kin(k, 0), kin(k, 1), kin(k, 2), d.N, d.H,
                                    d.W, d.Ci, d.Co, k->dt, k->ws, k->wsb)) ||
           node_stats_after(k, d.N, 4 * d.H * d.W, d.Co);
}
CUDA_RUN(upconv2d_bwd_data) {
    sg_conv_dims d = sg_upconv_dims_of(k->g, k->nd);
    if (upconv_on_wgmma(k, kout(k, 0), kin(k, 0), k->ws))
        return cuda_upconv2d_wgmma_bwd_data(k->st, kout(k, 0), kin(k, 0), kin(k, 1), d.N, d.H, d.W,
                                            d.Ci, d.Co, k->dy_dt, kacc(k, 0), k->ws, k->wsb);
    return cuda_upconv2d_bwd_data(k->st, kout(k, 0), kin(k, 0), kin(k, 1), d.N, d.H, d.W, d.Ci,
                                  d.Co, k->dy_dt, kacc(k, 0), k->ws, k->wsb);
}
CUDA_RUN(upconv2d_bwd_weight) {
    sg_conv_dims d = sg_upconv_dims_of(k->g, k->nd);
    if (upconv_on_wgmma(k, kin(k, 1), kin(k, 0), NULL))
        return cuda_upconv2d_wgmma_bwd_weight(k->st, kout(k, 0), kout(k, 1), kin(k, 0), kin(k, 1),
                                              d.N, d.H, d.W, d.Ci, d.Co, k->dy_dt, kacc(k, 0),
                                              k->ws, k->wsb);
    return cuda_upconv2d_bwd_weight(k->st, kout(k, 0), kout(k, 1), kin(k, 0), kin(k, 1), d.N, d.H,
                                    d.W, d.Ci, d.Co, k->dy_dt, kacc(k, 0), k->ws, k->wsb);
}

CUDA_RUN(group_norm) {
    sg_gn_dims d = sg_gn_dims_of(k->g, k->nd);
    return cuda_group_norm_fwd(k->st, kout(k, 0), kout(k, 1), kout(k, 2), kin_cat(k, 0), kin(k, 1),
                               kin(k, 2), d.N, d.HW, d.C, d.G, k->a->gn.eps, k->dt);
}
CUDA_RUN(group_norm_bwd) {
    sg_gn_dims d = sg_gn_dims_of(k->g, k->nd);
    return cuda_group_norm_bwd(k->st, kout_cat(k, 0), kout(k, 1), kout(k, 2), kin(k, 0),
                               kin_cat(k, 1), kin(k, 2), kin(k, 3), kin(k, 4), d.N, d.HW, d.C, d.G,
                               k->dy_dt, kacc(k, 0), kacc(k, 1), k->ws, k->wsb);
}

/* the norm_act family: operands by sg_norm_operands_of (node_drop, above: the dropout) */
static int run_norm_act(const cuda_call *k) {
    sg_gn_dims d = sg_gn_dims_of(k->g, k->nd);
    sg_norm_operands o = sg_norm_operands_of(k->nd);
    const sg_gn_args *a = &k->a->gn;
    const void *v = o.temb ? kin(k, o.v) : NULL;
    const sg_drop drop = node_drop(k->c, k->g, k->nd, k->slice);
    /* the partials: where the conv before left them (prepare_norm_stats) */
    const int j = (int)(k->nd - k->g->n);
    void *ws = (char *)k->ws + k->c->norm_off[j];
    const int64_t wsb = k->wsb - k->c->norm_off[j];
    /* y virtual (planner/fuse.c): the convolutions that read it compute it; here the statistics
     * alone */
    if (!o.bwd && !o.apply && k->g->t[k->nd->out[0]].vnorm >= 0)
        return cuda_norm_act_stats(k->st, kout(k, 1), kout(k, 2), kin_cat(k, o.x), v, d.N, d.HW,
                                   d.C, d.G, a->eps, k->dt, ws, wsb, k->c->norm_done[j]);
    if (o.bwd)
        return cuda_norm_act_bwd(
            k->st, kout_cat(k, 0), o.temb ? kout(k, 1) : NULL, kout(k, o.temb + 1),
            kout(k, o.temb + 2), kin(k, o.dy), kin_cat(k, o.x), v, kin(k, o.mean), kin(k, o.rstd),
            kin(k, o.gamma), kin(k, o.beta), d.N, d.HW, d.C, d.G, a->act, drop, k->dy_dt,
            kacc(k, 0), o.temb ? kacc(k, 1) : 0, kacc(k, o.temb + 1), ws, wsb, k->c->norm_done[j]);
    if (o.apply)
        return cuda_norm_act_apply(k->st, kout(k, 0), kin_cat(k, o.x), v, kin(k, o.mean),
                                   kin(k, o.rstd), kin(k, o.gamma), kin(k, o.beta), d.N, d.HW, d.C,
                                   d.G, a->act, drop, k->dt);
    return cuda_norm_act_fwd(k->st, kout(k, 0), kout(k, 1), kout(k, 2), kin_cat(k, o.x), v,
                             kin(k, o.gamma), kin(k, o.beta), d.N, d.HW, d.C, d.G, a->eps, a->act,
                             drop, k->dt, ws, wsb, k->c->norm_done[j]);
}
CUDA_RUN(norm_act) {
    return run_norm_act(k);
}
CUDA_RUN(norm_act_temb) {
    return run_norm_act(k);
}
CUDA_RUN(norm_act_apply) {
    return run_norm_act(k);
}
CUDA_RUN(norm_act_temb_apply) {
    return run_norm_act(k);
}
CUDA_RUN(norm_act_bwd) {
    return run_norm_act(k);
}
CUDA_RUN(norm_act_temb_bwd) {
    return run_norm_act(k);
}

/* the pointwise ops (common/sg_pointwise.h): cuda_<fn>(outputs, inputs, n, dt[, accumulate
 * flags]), one per row */
#define CUDA_PW_OUT(i) kout(k, i)
#define CUDA_PW_IN(i) kin(k, i)
#define CUDA_PW_ACC(i) kacc(k, i)
#define CUDA_RUN_POINTWISE(op, fn, nin, nout, acc)                                                 \
    CUDA_RUN(op) {                                                                                 \
        return cuda_##fn(k->st, SG_PW_EACH_##nout(CUDA_PW_OUT), SG_PW_EACH_##nin(CUDA_PW_IN),      \
                         k->n0, k->dt SG_PW_IF_ACC_##acc(CUDA_PW_ACC, nout));                      \
    }
SG_POINTWISE_LIST(CUDA_RUN_POINTWISE)

CUDA_RUN(add_nc) {
    sg_nhwc_dims d = sg_nhwc_dims_of(k->g, k->nd);
    return cuda_add_nc_fwd(k->st, kout(k, 0), kin(k, 0), kin(k, 1), d.N, d.HW, d.C, k->dt);
}
CUDA_RUN(add_nc_bwd) {
    sg_nhwc_dims d = sg_nhwc_dims_of(k->g, k->nd);
    return cuda_add_nc_bwd(k->st, kout(k, 0), kin(k, 0), d.N, d.HW, d.C, k->dt, kacc(k, 0), k->ws,
                           k->wsb);
}
CUDA_RUN(concat) {
    (void)k; /* virtual: consumers read both parts */
    return SG_OK;
}

CUDA_RUN(upsample2x) {
    sg_nhwc_dims d = sg_nhwc_dims_of(k->g, k->nd);
    return cuda_upsample2x_fwd(k->st, kout(k, 0), kin(k, 0), d.N, d.H, d.W, d.C, k->dt);
}
CUDA_RUN(upsample2x_apply) { /* the recomputation: upsample2x's values */
    return cuda_run_upsample2x(k);
}
CUDA_RUN(upsample2x_bwd) {
    sg_nhwc_dims d = sg_nhwc_dims_of(k->g, k->nd);
    return cuda_upsample2x_bwd(k->st, kout(k, 0), kin(k, 0), d.N, d.H, d.W, d.C, k->dt, kacc(k, 0));
}
CUDA_RUN(avgpool2x) {
    sg_nhwc_dims d = sg_nhwc_dims_of(k->g, k->nd);
    return cuda_avgpool2x_fwd(k->st, kout(k, 0), kin(k, 0), d.N, d.H, d.W, d.C, k->dt);
}
CUDA_RUN(avgpool2x_bwd) {
    sg_nhwc_dims d = sg_nhwc_dims_of(k->g, k->nd);
    return cuda_avgpool2x_bwd(k->st, kout(k, 0), kin(k, 0), d.N, d.H, d.W, d.C, k->dt, kacc(k, 0));
}

CUDA_RUN(attention) {
    sg_attn_dims d = sg_attn_dims_of(k->g, k->nd);
    return (k->c->attn_fused ? cuda_attention_fused_fwd : cuda_attention_fwd)(
        k->st, k->blas, kout(k, 0), kout(k, 1), kin(k, 0), d.N, d.L, d.C, d.heads, k->dt, k->ws,
        k->wsb);
}
CUDA_RUN(attention_bwd) {
    sg_attn_dims d = sg_attn_dims_of(k->g, k->nd);
    return (k->c->attn_fused ? cuda_attention_fused_bwd : cuda_attention_bwd)(
        k->st, k->blas, kout(k, 0), kin(k, 0), kin(k, 1), kin(k, 2), d.N, d.L, d.C, d.heads, k->dt,
        kacc(k, 0), k->ws, k->wsb);
}

CUDA_RUN(dropout) {
    return cuda_dropout_fwd(k->st, kout(k, 0), kin(k, 0), k->n0, k->a->dropout.p, kin(k, 1),
                            kin(k, 2), SG_RNG_DROPOUT_BASE + (uint32_t)k->a->dropout.purpose,
                            k->slice * (uint64_t)k->n0, k->dt);
}
CUDA_RUN(dropout_bwd) {
    return cuda_dropout_bwd(k->st, kout(k, 0), kin(k, 0), k->n0, k->a->dropout.p, kin(k, 1),
                            kin(k, 2), SG_RNG_DROPOUT_BASE + (uint32_t)k->a->dropout.purpose,
                            k->slice * (uint64_t)k->n0, k->dt, kacc(k, 0));
}

CUDA_RUN(mse) {
    const sg_tensor *pred = &k->g->t[k->nd->in[0]], *tgt = &k->g->t[k->nd->in[1]];
    return cuda_mse_fwd(k->st, kout(k, 0), kin(k, 0), pred->dtype, kin(k, 1), tgt->dtype,
                        sg_numel(pred), k->a->mse.micro_batches, kacc(k, 0), k->ws, k->wsb);
}
CUDA_RUN(mse_bwd) {
    const sg_tensor *pred = &k->g->t[k->nd->in[0]], *tgt = &k->g->t[k->nd->in[1]];
    return cuda_mse_bwd(k->st, kout(k, 0), kin(k, 0), pred->dtype, kin(k, 1), tgt->dtype, k->n0,
                        k->a->mse.loss_scale, kacc(k, 0));
}
CUDA_RUN(accum) {
    /* in place (the planner merged the buffers) and not accumulating: nothing to move */
    if (kout(k, 0) == kin(k, 0) && !kacc(k, 0)) return SG_OK;
    return cuda_copy(k->st, kout(k, 0), k->dt, kin(k, 0), k->dy_dt, k->n0, kacc(k, 0));
}

CUDA_RUN(grad_sumsq) {
    return cuda_sumsq(k->st, kout(k, 0), kin(k, 0), sg_in_numel(k->g, k->nd, 0), k->ws, k->wsb);
}
CUDA_RUN(clip_scale) {
    return cuda_clip_scale(k->st, kout(k, 0), kin(k, 0), k->a->clip.max_norm);
}
CUDA_RUN(adamw) {
    const sg_adamw_args *a = &k->a->adamw;
    return cuda_adamw(
        k->st, kout(k, 0), kout(k, 1), kout(k, 2), kin(k, 1), sg_in_numel(k->g, k->nd, 0),
        kin(k, 4), kin(k, 5), a->lr, a->b1, a->b2, a->eps, a->wd, a->warmup,
        (sg_lr_sched){.decay_steps = a->decay_steps, .lr_min = a->lr_min, .schedule = a->schedule},
        kout(k, 3));
}
CUDA_RUN(ema) {
    const sg_ema_args *a = &k->a->ema;
    const sg_ema_sched warm = {a->inv_gamma, a->power};
    return cuda_ema(k->st, kout(k, 0), kin(k, 1), k->n0, a->decay, a->warmup ? &warm : NULL,
                    kin(k, 2));
}
/* params, grads, m, v, ema, scale, step -> params, m, v, ema, lr (in place on the regions), and
 * with copy (adamw_ema_bf16's output 5) the bf16 copy of the updated parameters */
static int run_adamw_ema(const cuda_call *k, uint16_t *copy) {
    const sg_adamw_args *a = &k->a->optim.adamw;
    const sg_ema_args *e = &k->a->optim.ema;
    const sg_ema_sched warm = {e->inv_gamma, e->power};
    return cuda_adamw_ema(
        k->st, kout(k, 0), kout(k, 1), kout(k, 2), kout(k, 3), copy, kin(k, 1),
        sg_in_numel(k->g, k->nd, 0), kin(k, 5), kin(k, 6), a->lr, a->b1, a->b2, a->eps, a->wd,
        a->warmup,
        (sg_lr_sched){.decay_steps = a->decay_steps, .lr_min = a->lr_min, .schedule = a->schedule},
        kout(k, 4), e->decay, e->warmup ? &warm : NULL);
}
CUDA_RUN(adamw_ema) {
    return run_adamw_ema(k, NULL);
}
CUDA_RUN(adamw_ema_bf16) {
    return run_adamw_ema(k, kout(k, 5));
}
CUDA_RUN(step_inc) {
    return cuda_step_increment(k->st, kout(k, 0));
}
CUDA_RUN(loss_watch) {
    return cuda_loss_watch(k->st, kin(k, 0), kin(k, 1), kin(k, 2), kout(k, 0), kout(k, 1));
}

/* OP_ALLREDUCE: one grouped NCCL launch on the step's stream (captured like a kernel):
 * gradients summed (the 1/ranks is already in the loss gradient), the loss summed, then times
 * the op's loss factor, as the CPU backend does (ncclAvg ignored the factor: backend_ops_gpu's
 * one-rank case with a factor of 0.5 caught it on the first GPU run). Summation order is NCCL's:
 * deterministic for a fixed rank count, topology, NCCL version and algorithm
 * (docs/data-parallel.md pins NCCL_ALGO); every rank receives the same bits. */
CUDA_RUN(allreduce) {
    float *grads = kin(k, 0), *loss = kin(k, 1);
#ifdef SG_HAVE_NCCL
    if (!k->c->nccl) return sg_set_error("allreduce: no NCCL communicator (prepare not run?)");
    NC(ncclGroupStart());
    NC(ncclAllReduce(grads, grads, (size_t)sg_in_numel(k->g, k->nd, 0), ncclFloat32, ncclSum,
                     k->c->nccl, k->st));
    NC(ncclAllReduce(loss, loss, 1, ncclFloat32, ncclSum, k->c->nccl, k->st));
    NC(ncclGroupEnd());
#else
    (void)grads; /* one rank (prepare refused more): the sum is the identity */
#endif
    return cuda_scale(k->st, loss, loss, k->a->allreduce.loss_factor, 1, DT_F32, 0);
}

/* x, pred, table, k, key -> x (in place), x_t, t */
CUDA_RUN(sample_step) {
    const sg_tensor *x = &k->g->t[k->nd->in[0]], *table = &k->g->t[k->nd->in[2]];
    const int N = (int)x->shape[0];
    return cuda_sample_step(k->st, kout(k, 0), kout(k, 1), (int)k->g->t[k->nd->out[1]].dtype,
                            kout(k, 2), kin(k, 1), (int)k->g->t[k->nd->in[1]].dtype, kin(k, 2),
                            (int)table->shape[0], kin(k, 3), kin(k, 4), N, sg_numel(x) / N,
                            k->a->sampler.T);
}

/* every op's function, from the op list: an op without a cuda_run_<id> does not compile */
typedef int (*cuda_run_fn)(const cuda_call *k);
#define CUDA_RUN_ROW(op, id, ...) [op] = cuda_run_##id,
static const cuda_run_fn cuda_run[OP_COUNT] = {SG_OP_LIST(CUDA_RUN_ROW)};

static int cuda_run_node_on(sg_backend *be, const sg_plan *p, int i, int engine, sg_blas *blas) {
    cuda_ctx *c = be->ctx;
    sg_cuda_set_pdl(c->pdl); /* process-wide: this backend's, for every launch of its nodes */
    sg_cuda_set_norm_onepass(c->norm_onepass); /* likewise */
    const sg_graph *g = &p->g;
    const sg_node *nd = &g->n[i];
    cuda_call k = {.c = c,
                   .g = g,
                   .nd = nd,
                   .a = &nd->a,
                   .st = c->st,
                   .blas = blas ? blas : c->blas,
                   .ws = c->ws,
                   .wsb = c->ws_bytes,
                   .dt = (int)g->t[nd->out[0]].dtype,
                   .dy_dt = (int)g->t[nd->in[0]].dtype,
                   .n0 = sg_out_numel(g, nd, 0),
                   .engine = engine        ? engine
                             : c->node_eng ? c->node_eng[i]
                                           : 0,
                   .slice = sg_node_slice(g, nd, c->rank)};
    /* a wgmma node of a layer with its own schedule: that schedule for its launches alone */
    const int sched = k.engine == CONV_ENGINE_WGMMA && c->node_sched ? c->node_sched[i] : -1;
    if (sched >= 0) wg_sched_apply(c, sched);
    /* the Winograd switch, process-wide, for this node's launches (read as they are issued: a
     * capture keeps it) */
    cuda_conv_wino_enable(c->wino_force >= 0 ? c->wino_force : c->node_wino ? c->node_wino[i] : 0);
    const int rc = cuda_run[nd->op](&k);
    if (sched >= 0) wg_sched_apply(c, -1);
    if (rc) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", sg_last_error());
        return sg_set_error("node %d (%s -> %s): %s", i, sg_ops[nd->op].name, g->t[nd->out[0]].name,
                            msg);
    }
    return SG_OK;
}

/* One node's launches inside an NVTX range named after it ("node 12 conv2d -> h3"): nsys and
 * ncu profiles show which node a kernel belongs to, and the host emulation names the node in
 * every message (tests/cuda_host). */
static int cuda_run_node(sg_backend *be, const sg_plan *p, int i) {
    const sg_node *nd = &p->g.n[i];
    char name[160];
    snprintf(name, sizeof name, "node %d %s -> %s", i, sg_ops[nd->op].name,
             nd->nout ? p->g.t[nd->out[0]].name : "-");
    nvtxRangePushA(name);
    int rc = cuda_run_node_on(be, p, i, 0, NULL);
    nvtxRangePop();
    return rc;
}

static int run_eager(sg_backend *be, const sg_plan *p) {
    for (int i = 0; i < p->g.nn; i++)
        if (cuda_run_node(be, p, i)) return SG_ERR;
    return SG_OK;
}

/* The captured graph's shape, for describe(). A straight line (one root, one edge into each
 * later node, kernels, memsets and copies alone) is what CUDA's drivers launch in constant
 * time; a fork a library made inside its call, a child graph or an event node makes a launch
 * cost per node. The third GPU session measured 270 us a launch at batch 128 against 27 us at
 * batch 8, for 849 and 725 nodes: this says which graph is not a line. The fourth found every
 * graph a line; what differs is the memset nodes the libraries capture (69 at batch 128, 6 at
 * batch 8). Diagnostics only: a query that fails leaves -1, and no error behind it for the
 * step's own checks. */
static void graph_shape_unknown(cuda_ctx *c) {
    c->graph_roots = c->graph_edges = -1;
    for (int k = 0; k < 4; k++) c->graph_types[k] = -1;
}
/* graph's n commands by type (kernel, memset, memcpy, other) into types; -1 each where a query
 * fails (diagnostics: the error is cleared) */
static void graph_types(cudaGraph_t graph, size_t n, int types[4]) {
    cudaGraphNode_t *nodes = n ? malloc(sizeof *nodes * n) : NULL;
    int t4[4] = {0, 0, 0, 0},
        ok = !n || (nodes && cudaGraphGetNodes(graph, nodes, &n) == cudaSuccess);
    for (size_t i = 0; ok && i < n; i++) {
        enum cudaGraphNodeType t;
        if (!(ok = cudaGraphNodeGetType(nodes[i], &t) == cudaSuccess)) break;
        t4[t == cudaGraphNodeTypeKernel   ? 0
           : t == cudaGraphNodeTypeMemset ? 1
           : t == cudaGraphNodeTypeMemcpy ? 2
                                          : 3]++;
    }
    for (int k = 0; k < 4; k++) types[k] = ok ? t4[k] : -1;
    free(nodes);
    (void)cudaGetLastError();
}
static void graph_shape(cuda_ctx *c, cudaGraph_t graph) {
    graph_shape_unknown(c);
    size_t n = 0;
    if (cudaGraphGetRootNodes(graph, NULL, &n) == cudaSuccess) c->graph_roots = (int)n;
    if (cudaGraphGetEdges(graph, NULL, NULL, NULL, &n) == cudaSuccess) c->graph_edges = (int)n;
    graph_types(graph, (size_t)c->graph_nodes, c->graph_types);
}

/* SG_GRAPH_LAUNCH=device at the capture: the step's graph instantiated for device launch into
 * c->exec, and the launcher graph that tail-launches it (graph_launch 2). Where the driver refuses
 * the device instantiation (a node it cannot launch from the device), the host launch instead
 * (graph_launch -1, a line on stderr, c->exec left to the caller); SG_ERR where the launcher
 * cannot be built. */
static int device_launch_setup(cuda_ctx *c, cudaGraph_t graph) {
    const cudaError_t e =
        cudaGraphInstantiateWithFlags(&c->exec, graph, cudaGraphInstantiateFlagDeviceLaunch);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        c->exec = NULL;
        c->graph_launch = -1;
        fprintf(stderr,
                "stepgraph: SG_GRAPH_LAUNCH=device: the step's graph cannot be instantiated for "
                "device launch (%s): launched from the host\n",
                cudaGetErrorString(e));
        return SG_OK;
    }
    CU(cudaMalloc((void **)&c->launch_status, sizeof(int)));
    CU(cudaMemsetAsync(c->launch_status, 0, sizeof(int), c->st));
    if (sg_cuda_graph_launcher(&c->launcher, c->exec, c->launch_status)) return SG_ERR;
    CU(cudaGraphInstantiate(&c->launcher_exec, c->launcher, 0));
    c->graph_launch = 2;
    return SG_OK;
}

/* capture the schedule's launches into one graph; nothing runs while capturing */
static int capture(sg_backend *be, const sg_plan *p) {
    cuda_ctx *c = be->ctx;
    CU(cudaStreamBeginCapture(c->st, cudaStreamCaptureModeThreadLocal));
    int rc = run_eager(be, p);
    cudaGraph_t graph = NULL;
    cudaError_t e = cudaStreamEndCapture(c->st, &graph);
    if (rc) {
        if (graph) cudaGraphDestroy(graph);
        return SG_ERR;
    }
    if (e != cudaSuccess)
        return sg_set_error("capturing the step into a CUDA graph failed: %s (something in the "
                            "step synchronised or allocated)",
                            cudaGetErrorString(e));
    c->graph = graph;
    size_t nodes = 0;
    CU(cudaGraphGetNodes(graph, NULL, &nodes));
    graph_types(graph, nodes, c->graph_types_captured);
    if (c->graph_memsets && c->graph_types_captured[1] != 0) {
        CU(cudaGraphClone(&c->graph_captured, graph));
        if (sg_cuda_graph_memsets_to_kernels(graph, &c->memsets_replaced, &c->memsets_kept)) {
            /* a driver that refuses an edit: the graph as captured, which the step ran before
             * this rewrite existed, with a line saying why (describe: none replaced) */
            fprintf(stderr, "stepgraph: the step's memset nodes stay as captured: %s\n",
                    sg_last_error());
            (void)cudaGetLastError();
            cudaGraphDestroy(graph);
            graph = c->graph = c->graph_captured;
            c->graph_captured = NULL;
            c->memsets_replaced = 0;
            c->memsets_kept = c->graph_types_captured[1];
        }
        if (!c->memsets_replaced && c->graph_captured) {
            cudaGraphDestroy(c->graph_captured);
            c->graph_captured = NULL;
        }
        CU(cudaGraphGetNodes(graph, NULL, &nodes));
    }
    c->graph_nodes = (int)nodes;
    graph_shape(c, graph);
    if (c->graph_launch == 1 && device_launch_setup(c, graph)) return SG_ERR;
    if (c->graph_launch != 2) CU(cudaGraphInstantiate(&c->exec, graph, 0));
    CU(cudaGraphUpload(c->exec, c->st));
    if (c->graph_launch == 2) CU(cudaGraphUpload(c->launcher_exec, c->st));
    CU(cudaStreamSynchronize(c->st));
    return SG_OK;
}

static int cuda_run_step(sg_backend *be, const sg_plan *p) {
    cuda_ctx *c = be->ctx;
    if (!c->use_graph || c->steps_run == 0) {
        /* eager: always when graphs are off; otherwise the first (warm-up) step, begun on an
         * idle stream, so that work the caller issued before it (the sampler's start: nodes
         * run one by one) is not taken for part of the step the graph will capture (the host
         * execution compares the capture with exactly this eager step) */
        if (c->use_graph && c->steps_run == 0) CU(cudaStreamSynchronize(c->st));
        /* SG_PROFILE_FIRST_STEP=1: the first step alone inside a profiler collection range
         * (ncu --profile-from-start off, nsys --capture-range=cudaProfilerApi:
         * tools/gpu_profile.sh): its kernels are every replay's, in the same order */
        const int prof = c->steps_run == 0 && c->profile_first;
        if (prof) CU(cudaProfilerStart());
        if (run_eager(be, p)) return SG_ERR;
        if (prof) {
            CU(cudaStreamSynchronize(c->st));
            CU(cudaProfilerStop());
        }
        CU(cudaGetLastError());
        /* every GEMM of the step has its algorithm now: no other may appear (see sg_blas) */
        sg_blas_freeze(c->blas);
#ifdef SG_HAVE_CUDNN
        sg_cudnn_freeze(c->dnn); /* likewise every cuDNN convolution's engine */
#endif
        if (c->use_graph) {
            CU(cudaStreamSynchronize(c->st)); /* validation: the eager step completed */
            if (capture(be, p)) return SG_ERR;
        }
    } else {
        /* SG_GRAPH_LAUNCH=device: one node, which tail-launches the step */
        CU(cudaGraphLaunch(c->graph_launch == 2 ? c->launcher_exec : c->exec, c->st));
    }
    c->steps_run++;
    return SG_OK;
}

static int cuda_sync(sg_backend *be) {
    cuda_ctx *c = be->ctx;
    CU(cudaStreamSynchronize(c->st));
    /* a device-side launch of the step that failed: its error, never a step taken as run */
    if (c->graph_launch == 2) {
        int status = 0;
        CU(cudaMemcpyAsync(&status, c->launch_status, sizeof status, cudaMemcpyDeviceToHost,
                           c->st));
        CU(cudaStreamSynchronize(c->st));
        if (status)
            return sg_set_error("the step's graph failed to launch from the device: %s "
                                "(SG_GRAPH_LAUNCH=host launches it from the host)",
                                cudaGetErrorString((cudaError_t)status));
    }
    return SG_OK;
}

static int cuda_time_steps(sg_backend *be, const sg_plan *p, int n, float *ms) {
    cuda_ctx *c = be->ctx;
    for (int i = 0; i < n; i++) {
        CU(cudaEventRecord(c->ev[0], c->st));
        if (cuda_run_step(be, p)) return SG_ERR;
        CU(cudaEventRecord(c->ev[1], c->st));
        CU(cudaEventSynchronize(c->ev[1]));
        CU(cudaEventElapsedTime(&ms[i], c->ev[0], c->ev[1]));
    }
    return SG_OK;
}

/* bench: the host time of n launches of the step's graph as the libraries captured it (memset
 * nodes and all), each on an idle stream as run_step's are timed; us[0] = -1 where no memset node
 * was replaced (the launched graph is the captured one). Each launch runs a step. */
static int cuda_time_launch_captured(sg_backend *be, const sg_plan *p, int n, float *us) {
    cuda_ctx *c = be->ctx;
    (void)p;
    if (n > 0) us[0] = -1;
    if (!c->graph_captured || n <= 0) return SG_OK;
    cudaGraphExec_t x = NULL;
    CU(cudaGraphInstantiate(&x, c->graph_captured, 0));
    cudaError_t e = cudaGraphUpload(x, c->st);
    if (e == cudaSuccess) e = cudaGraphLaunch(x, c->st); /* warm */
    for (int i = 0; i < n && e == cudaSuccess; i++) {
        struct timespec t0, t1;
        e = cudaStreamSynchronize(c->st);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        if (e == cudaSuccess) e = cudaGraphLaunch(x, c->st);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        us[i] = (float)((double)(t1.tv_sec - t0.tv_sec) * 1e6 +
                        (double)(t1.tv_nsec - t0.tv_nsec) * 1e-3);
    }
    if (e == cudaSuccess) e = cudaStreamSynchronize(c->st);
    cudaGraphExecDestroy(x);
    if (e != cudaSuccess)
        return sg_set_error("launching the step's graph as captured: %s", cudaGetErrorString(e));
    return SG_OK;
}

static int cuda_time_nodes(sg_backend *be, const sg_plan *p, float *ms) {
    cuda_ctx *c = be->ctx;
    for (int i = 0; i < p->g.nn; i++) {
        if (sg_cuda_window_begin(&c->win, c->st, c->ev[0])) return SG_ERR;
        if (cuda_run_node(be, p, i)) {
            sg_cuda_window_cancel(&c->win);
            return SG_ERR;
        }
        if (sg_cuda_window_end(&c->win, c->st, c->ev[0], c->ev[1], &ms[i])) return SG_ERR;
    }
    return SG_OK;
}

static void cuda_last_replay_types(sg_backend *be, int types[4]) {
    const cuda_ctx *c = be->ctx;
    memcpy(types, c->replay_types, sizeof c->replay_types);
}

static int cuda_time_nodes_replay(sg_backend *be, const sg_plan *p, const int *nodes, int n,
                                  int reps, float *ms) {
    cuda_ctx *c = be->ctx;
    for (int r = 0; r < reps; r++) ms[r] = 0;
    for (int k = 0; k < 4; k++) c->replay_types[k] = n > 0 && reps > 0 ? -1 : 0;
    if (n <= 0 || reps <= 0) return SG_OK;
    /* the nodes once eagerly, between two synchronisations, then captured: as the step is
     * (the host execution checks that a capture replays the eager commands before it) */
    CU(cudaStreamSynchronize(c->st));
    for (int k = 0; k < n; k++)
        if (cuda_run_node(be, p, nodes[k])) return SG_ERR;
    CU(cudaStreamSynchronize(c->st));
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    cudaError_t e = cudaStreamBeginCapture(c->st, cudaStreamCaptureModeThreadLocal);
    int rc = e == cudaSuccess ? SG_OK : sg_set_error("capture: %s", cudaGetErrorString(e));
    for (int k = 0; k < n && !rc; k++) rc = cuda_run_node(be, p, nodes[k]);
    if (e == cudaSuccess) {
        e = cudaStreamEndCapture(c->st, &graph);
        if (!rc && e != cudaSuccess)
            rc = sg_set_error("capturing %d nodes: %s", n, cudaGetErrorString(e));
    }
    size_t launches = 0;
    if (!rc) {
        e = cudaGraphGetNodes(graph, NULL, &launches);
        if (e != cudaSuccess) rc = sg_set_error("cudaGraphGetNodes: %s", cudaGetErrorString(e));
    }
    if (!rc) graph_types(graph, launches, c->replay_types);
    /* nodes that launch nothing (an accum whose input is its output) cost nothing */
    if (!rc && launches > 0) {
        e = cudaGraphInstantiate(&exec, graph, 0);
        if (e != cudaSuccess) rc = sg_set_error("instantiate: %s", cudaGetErrorString(e));
        if (!rc && cudaGraphLaunch(exec, c->st) != cudaSuccess) /* warm: uploaded, caches */
            rc = sg_set_error("replay: %s", cudaGetErrorString(cudaGetLastError()));
        for (int r = 0; r < reps && !rc; r++) {
            rc = sg_cuda_window_begin(&c->win, c->st, c->ev[0]);
            if (!rc && cudaGraphLaunch(exec, c->st) != cudaSuccess) {
                sg_cuda_window_cancel(&c->win);
                rc = sg_set_error("replay: %s", cudaGetErrorString(cudaGetLastError()));
            }
            if (!rc) rc = sg_cuda_window_end(&c->win, c->st, c->ev[0], c->ev[1], &ms[r]);
        }
    }
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    if (!rc) CU(cudaStreamSynchronize(c->st));
    return rc;
}

/* dense GEMM peak with cuBLAS on square matrices (n = 8192 bf16 / 4096 fp32), for MFU. This
 * is a measurement utility outside the step, so it allocates its own buffers. */
static double cuda_matmul_peak(sg_backend *be, int dtype) {
    cuda_ctx *c = be->ctx;
    int n = dtype == DT_BF16 ? 8192 : 4096, es = dtype == DT_BF16 ? 2 : 4, reps = 10;
    void *a = NULL, *b = NULL, *d = NULL;
    double tflops = 0;
    size_t bytes = (size_t)n * n * (size_t)es;
    unsigned char *host = malloc(bytes);
    if (!host || cudaMalloc(&a, bytes) || cudaMalloc(&b, bytes) || cudaMalloc(&d, bytes)) {
        free(host);
        goto out;
    }
    /* random operands: all-zero matrices can run at clocks real data does not */
    for (size_t i = 0; i < (size_t)n * n; i++) {
        float v = sg_rng_uniform(1, 0, SG_RNG_INIT, i) - 0.5f;
        if (dtype == DT_BF16)
            ((sg_bf16 *)host)[i] = sg_f32_to_bf16(v);
        else
            ((float *)host)[i] = v;
    }
    /* on the GEMMs' stream (see cuda_upload), then wait: host is freed right after */
    cudaMemcpyAsync(a, host, bytes, cudaMemcpyHostToDevice, c->st);
    cudaMemcpyAsync(b, host, bytes, cudaMemcpyHostToDevice, c->st);
    cudaStreamSynchronize(c->st);
    free(host);
    cudaDataType t = dtype == DT_BF16 ? CUDA_R_16BF : CUDA_R_32F;
    float one = 1, zero = 0;
    for (int k = 0; k < reps + 2; k++) {
        if (k == 2) cudaEventRecord(c->ev[0], c->st);
        if (cublasGemmEx(c->cb, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, t, n, b, t, n, &zero, d,
                         t, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS)
            goto out;
    }
    cudaEventRecord(c->ev[1], c->st);
    cudaEventSynchronize(c->ev[1]);
    float ms = 0;
    cudaEventElapsedTime(&ms, c->ev[0], c->ev[1]);
    if (ms > 0) tflops = 2.0 * n * (double)n * n * reps / (ms * 1e-3) / 1e12;
out:
    cudaFree(a), cudaFree(b), cudaFree(d);
    cudaGetLastError();
    return tflops;
}

/* memory bandwidth: device-to-device copies of `bytes` (beyond the L2 cache at the size bench
 * asks for, 256 MiB), each timed alone with events after two untimed ones, the median; read plus
 * written bytes over its time. Its own buffers, as the matmul peak. */
static double cuda_mem_peak(sg_backend *be, int64_t bytes) {
    cuda_ctx *c = be->ctx;
    enum { REPS = 9 };
    void *a = NULL, *b = NULL;
    float ms[REPS];
    double gbs = 0;
    int ok = bytes > 0 && cudaMalloc(&a, (size_t)bytes) == cudaSuccess &&
             cudaMalloc(&b, (size_t)bytes) == cudaSuccess &&
             cudaMemsetAsync(a, 1, (size_t)bytes, c->st) == cudaSuccess;
    for (int r = -2; r < REPS && ok; r++) {
        ok = cudaEventRecord(c->ev[0], c->st) == cudaSuccess &&
             cudaMemcpyAsync(b, a, (size_t)bytes, cudaMemcpyDeviceToDevice, c->st) == cudaSuccess &&
             cudaEventRecord(c->ev[1], c->st) == cudaSuccess &&
             cudaEventSynchronize(c->ev[1]) == cudaSuccess;
        if (ok && r >= 0) ok = cudaEventElapsedTime(&ms[r], c->ev[0], c->ev[1]) == cudaSuccess;
    }
    if (ok) {
        sg_sort_f32(ms, REPS);
        const double med = sg_quantile_sorted(ms, REPS, 0.5);
        if (med > 0) gbs = 2.0 * (double)bytes / (med * 1e-3) / 1e9;
    }
    cudaStreamSynchronize(c->st);
    cudaFree(a), cudaFree(b);
    cudaGetLastError();
    return gbs;
}

static void cuda_node_engine(sg_backend *be, const sg_plan *p, int node, char *buf, int cap) {
    cuda_ctx *c = be->ctx;
    if (cap <= 0) return;
    buf[0] = 0;
    if (node >= 0 && node < p->g.nn &&
        (p->g.n[node].op == OP_ATTENTION || p->g.n[node].op == OP_ATTENTION_BWD)) {
        const int fused = c->attn_fused && attn_node_fusable(&p->g, node);
        snprintf(buf, (size_t)cap, "%s", fused ? "fused" : "gemm");
        return;
    }
    if (node < 0 || node >= p->g.nn || !c->node_eng || !c->node_eng[node]) return;
    if (c->node_eng[node] != SG_CONV_ENGINE_CUDNN) {
        const int e = c->node_eng[node];
        snprintf(buf, (size_t)cap, "%s",
                 e == CONV_ENGINE_GEMM    ? "gemm"
                 : e == CONV_ENGINE_WGMMA ? "wgmma"
                                          : "own");
        return;
    }
#ifdef SG_HAVE_CUDNN
    sg_cudnn_conv cv;
    char name[160] = "-";
    if (conv_cudnn_call(c, &p->g, &p->g.n[node], &cv))
        sg_cudnn_engine_name(c->dnn, &cv, name, sizeof name);
    snprintf(buf, (size_t)cap, "cudnn %s", name);
#endif
}

/* the GEMM table for work outside the step (c->blas_off), made when first needed on the plan's
 * library workspace: the step's pinned table stays what the step ran */
static int blas_outside_step(cuda_ctx *c, const sg_plan *p) {
    if (c->blas_off) return SG_OK;
    const sg_graph *g = &p->g;
    const int cw = sg_find_tensor(g, SG_CUBLAS_WS_NAME);
    if (cw < 0) return sg_set_error("the plan has no library workspace");
    return sg_blas_create(&c->blas_off, c->st, c->arena + g->t[cw].offset, g->t[cw].bytes);
}

/* One plain cuBLASLt GEMM of the given size (backend.h: time_gemm), on the outside-the-step
 * table. Its operands are one temporary cudaMalloc made and freed here, not the arena: the
 * largest same-size GEMM of unet_cifar b128 (a 3x3 conv's weight gradient, K = N*Ho*Wo)
 * needs A and B as large as an im2col of the layer, which no arena tensor is, and arena
 * memory belongs to the step's state (parameters, moments) that a measurement must not
 * overwrite. The operands are filled with a fixed random pattern (all-zero matrices can run
 * at clocks real data does not), one untimed run picks the algorithm, then `reps` runs are
 * timed between two events and averaged. */
static int cuda_time_gemm(sg_backend *be, const sg_plan *p, int64_t m, int64_t n, int64_t k,
                          int dtype, float *ms) {
    cuda_ctx *c = be->ctx;
    *ms = -1;
    if (m <= 0 || n <= 0 || k <= 0 || m > INT32_MAX || n > INT32_MAX || k > INT32_MAX)
        return sg_set_error("time_gemm: GEMM m=%lld n=%lld k=%lld out of range", (long long)m,
                            (long long)n, (long long)k);
    if (dtype != DT_BF16 && dtype != DT_F32)
        return sg_set_error("time_gemm: dtype %d is not bf16 or fp32", dtype);
    if (blas_outside_step(c, p)) return SG_ERR;
    const size_t es = dtype == DT_BF16 ? 2 : 4, na = (size_t)(m * k), nb = (size_t)(n * k);
    const size_t total = (na + nb + (size_t)(m * n)) * es;
    unsigned char *buf = NULL;
    if (cudaMalloc((void **)&buf, total) != cudaSuccess) {
        cudaGetLastError();
        return sg_set_error("time_gemm: no %.1f MiB of device memory for a GEMM m=%lld n=%lld "
                            "k=%lld",
                            total / 1048576.0, (long long)m, (long long)n, (long long)k);
    }
    /* a 1 MiB random pattern copied over A and B */
    enum { PAT = 1 << 20 };
    unsigned char *pat = malloc(PAT);
    int rc = pat ? SG_OK : sg_set_error("out of host memory");
    for (size_t i = 0; !rc && i < PAT / es; i++) {
        const float v = sg_rng_uniform(1, 0, SG_RNG_INIT, i) - 0.5f;
        if (dtype == DT_BF16)
            ((sg_bf16 *)pat)[i] = sg_f32_to_bf16(v);
        else
            ((float *)pat)[i] = v;
    }
    const size_t ab = (na + nb) * es;
    for (size_t off = 0; !rc && off < ab; off += PAT)
        if (cudaMemcpyAsync(buf + off, pat, ab - off < PAT ? ab - off : PAT, cudaMemcpyHostToDevice,
                            c->st) != cudaSuccess)
            rc = sg_set_error("time_gemm: %s", cudaGetErrorString(cudaGetLastError()));
    if (!rc && cudaStreamSynchronize(c->st) != cudaSuccess)
        rc = sg_set_error("time_gemm: %s", cudaGetErrorString(cudaGetLastError()));
    free(pat);
    const void *A = buf, *B = buf + na * es;
    void *C = buf + (na + nb) * es;
    const int reps = 3;
    if (!rc)
        rc = sg_blas_gemm_rowmajor_nt(c->blas_off, c->st, (int)m, (int)n, (int)k, dtype, A, B, C);
    const int timed = !rc && !(rc = sg_cuda_window_begin(&c->win, c->st, c->ev[0]));
    for (int r = 0; r < reps && !rc; r++)
        rc = sg_blas_gemm_rowmajor_nt(c->blas_off, c->st, (int)m, (int)n, (int)k, dtype, A, B, C);
    float t = 0;
    if (!rc)
        rc = sg_cuda_window_end(&c->win, c->st, c->ev[0], c->ev[1], &t);
    else if (timed)
        sg_cuda_window_cancel(&c->win);
    cudaStreamSynchronize(c->st); /* nothing may still read buf when it is freed */
    cudaFree(buf);
    if (!rc) *ms = t / reps;
    return rc;
}

/* backend.h: tune_gemms. The step's own GEMM table is frozen; its entries are timed through it
 * (sg_blas_time_algos: scratch operands, the table's workspace), the pinned algorithms stay. */
static int cuda_tune_gemms(sg_backend *be, const sg_plan *p, int reps, double min_gain,
                           sg_engine_table *t, int *timed) {
    cuda_ctx *c = be->ctx;
    (void)p;
    *timed = 0;
    enum { MOST = 16 };
    float ms[MOST];
    uint64_t ids[MOST];
    for (int i = 0; i < sg_blas_count(c->blas); i++) {
        char key[SG_BLAS_KEY_MAX];
        int n = 0;
        if (sg_blas_key_text(c->blas, i, key, sizeof key) ||
            sg_blas_time_algos(c->blas, i, MOST, reps, &c->win, ms, ids, &n))
            return SG_ERR;
        if (n < 1 || ms[0] < 0) continue; /* the first unmeasured: nothing to compare with */
        int best = 0;
        for (int k = 1; k < n; k++)
            if (ms[k] >= 0 && ms[k] < ms[best]) best = k;
        if (ms[best] > (1.0 - min_gain) * ms[0]) best = 0;
        if (sg_engine_table_set_gemm(t, key, ids[best], ms[best], ms[0])) return SG_ERR;
        ++*timed;
    }
    return SG_OK;
}

/* Would the wgmma kernels run conv-like node i (a conv pass, the residual-add or shortcut-fold
 * forward, an upsample conv's pass)? The operands its launcher would give conv_on_wgmma or
 * upconv_on_wgmma (the CUDA_RUN functions above), checked without a launch: time_node_engine's
 * wgmma side times nothing that would silently run on mma.sync. */
static int node_on_wgmma(cuda_ctx *c, const sg_plan *p, int i) {
    const sg_graph *g = &p->g;
    const sg_node *nd = &g->n[i];
    if (!c->wgmma_ok || g->t[nd->in[0]].dtype != DT_BF16) return 0;
    const cuda_call k = {.c = c,
                         .g = g,
                         .nd = nd,
                         .engine = CONV_ENGINE_WGMMA,
                         .ws = c->ws,
                         .wsb = c->ws_bytes,
                         .dt = DT_BF16,
                         .dy_dt = DT_BF16};
    sg_conv_fuse f;
    switch (nd->op) {
    case OP_UPCONV2D:
        return upconv_on_wgmma(&k, kin(&k, 0), kout(&k, 0), k.ws);
    case OP_UPCONV2D_BWD_DATA:
        return upconv_on_wgmma(&k, kout(&k, 0), kin(&k, 0), k.ws);
    case OP_UPCONV2D_BWD_WEIGHT:
        return upconv_on_wgmma(&k, kin(&k, 1), kin(&k, 0), NULL);
    default:
        break;
    }
    const sg_conv_dims d = sg_conv_dims_of(g, nd);
    switch (nd->op) {
    case OP_CONV2D:
    case OP_CONV2D_ADD:
        return conv_on_wgmma(&k, d, conv_input(c, g, nd->in[0], &f), kout(&k, 0), kin(&k, 1),
                             DT_BF16);
    case OP_CONV2D_SC:
        return conv_on_wgmma(&k, d, conv_input(c, g, nd->in[0], &f), kout(&k, 0), kin(&k, 1),
                             DT_BF16) &&
               cuda_conv2d_wgmma_refusal(CAT(c, g, nd->in[3]), kout(&k, 0), kin(&k, 4), d.N, d.H,
                                         d.W, d.Co, 1, 1, DT_BF16) == NULL;
    case OP_CONV2D_BWD_DATA:
        return conv_on_wgmma(&k, d, kout_cat(&k, 0), kin(&k, 0), kin(&k, 1), DT_BF16);
    case OP_CONV2D_BWD_WEIGHT:
        return conv_on_wgmma(&k, d, conv_input(c, g, nd->in[1], &f), kin(&k, 0), NULL, DT_BF16);
    default:
        return 0;
    }
}

/* An attention node on the GEMM path or the fused kernels (SG_TIME_ATTN_*): -1 where it is no
 * attention node or the fused kernels do not take its shape. Off the step's engine, the GEMM
 * path's algorithms come from the outside-the-step table, and one untimed run picks them. */
static int time_attention_engine(sg_backend *be, const sg_plan *p, int node, int fused, float *ms) {
    cuda_ctx *c = be->ctx;
    if (node < 0 || node >= p->g.nn) return SG_OK;
    const sg_node *nd = &p->g.n[node];
    if (nd->op != OP_ATTENTION && nd->op != OP_ATTENTION_BWD) return SG_OK;
    if (fused && !attn_node_fusable(&p->g, node)) return SG_OK;
    const int step = c->attn_fused;
    sg_blas *blas = NULL;
    int rc = SG_OK;
    c->attn_fused = fused;
    if (fused != step) {
        rc = blas_outside_step(c, p);
        blas = c->blas_off;
        if (!rc) rc = cuda_run_node_on(be, p, node, 0, blas);
    }
    if (!rc && !(rc = sg_cuda_window_begin(&c->win, c->st, c->ev[0]))) {
        rc = cuda_run_node_on(be, p, node, 0, blas);
        if (!rc)
            rc = sg_cuda_window_end(&c->win, c->st, c->ev[0], c->ev[1], ms);
        else
            sg_cuda_window_cancel(&c->win);
    }
    c->attn_fused = step;
    if (rc) *ms = -1;
    return rc;
}

static int cuda_time_node_engine(sg_backend *be, const sg_plan *p, int node, int engine,
                                 float *ms) {
    cuda_ctx *c = be->ctx;
    *ms = -1;
    if (engine == SG_TIME_ATTN_GEMM || engine == SG_TIME_ATTN_FUSED)
        return time_attention_engine(be, p, node, engine == SG_TIME_ATTN_FUSED, ms);
    if (node < 0 || node >= p->g.nn || !c->node_eng) return SG_OK;
    /* node_eng 0: no conv node, or an own-only one (a shortcut fold, an upsample conv's pass) on
     * mma.sync, which only its wgmma side times (on the halo or per tap too) */
    const int wg_side = engine == SG_TIME_OWN_WGMMA || engine == SG_TIME_WGMMA_HALO ||
                        engine == SG_TIME_WGMMA_PER_TAP;
    if (!c->node_eng[node] && !(wg_side && node_on_wgmma(c, p, node))) return SG_OK;
    /* a wgmma node under another schedule: one untimed run, then the timed one, then the
     * step's schedule again (the same bits every way) */
    if (engine >= SG_TIME_WGMMA_SCHED && engine < SG_TIME_WGMMA_SCHED + SG_WG_SCHEDS) {
        if (c->node_eng[node] != CONV_ENGINE_WGMMA) return SG_OK;
        const int force = c->wg_force;
        c->wg_force = engine - SG_TIME_WGMMA_SCHED;
        wg_sched_apply(c, -1);
        int rc = cuda_run_node_on(be, p, node, CONV_ENGINE_WGMMA, NULL);
        if (!rc && !(rc = sg_cuda_window_begin(&c->win, c->st, c->ev[0]))) {
            rc = cuda_run_node_on(be, p, node, CONV_ENGINE_WGMMA, NULL);
            if (!rc)
                rc = sg_cuda_window_end(&c->win, c->st, c->ev[0], c->ev[1], ms);
            else
                sg_cuda_window_cancel(&c->win);
        }
        c->wg_force = force;
        wg_sched_apply(c, -1);
        if (rc) *ms = -1;
        return rc;
    }
    /* own with the Winograd form switched on, or off, where it takes the node (the kernels
     * count its launches); the step's switch again after */
    if (engine == SG_TIME_OWN_WINO || engine == SG_TIME_OWN_DIRECT) {
        if (!wino_node(p, node)) return SG_OK;
        const long w0 = cuda_conv_wino_launches();
        c->wino_force = engine == SG_TIME_OWN_WINO;
        const int rc = cuda_time_node_engine(be, p, node, SG_CONV_ENGINE_OWN, ms);
        c->wino_force = -1;
        if (engine == SG_TIME_OWN_WINO && cuda_conv_wino_launches() == w0) *ms = -1;
        return rc;
    }
    /* own on the wgmma kernels with every forward and stride-1 3x3 data gradient on its
     * resident-halo kernel, or every one per tap; the halo's time only where a call took one
     * (the kernels count them) */
    if (engine == SG_TIME_WGMMA_HALO || engine == SG_TIME_WGMMA_PER_TAP) {
        const int halo = engine == SG_TIME_WGMMA_HALO, mode = c->tc_halo;
        const long h0 = cuda_conv_wgmma_halo_forwards() + cuda_conv_wgmma_halo_dgrads();
        c->tc_halo = halo ? SG_TC_HALO_ALL : SG_TC_HALO_NONE;
        cuda_conv_wgmma_dgrad_halo(halo);
        const int rc = cuda_time_node_engine(be, p, node, SG_TIME_OWN_WGMMA, ms);
        c->tc_halo = mode;
        cuda_conv_wgmma_dgrad_halo(c->wg_dgrad_halo);
        if (halo && cuda_conv_wgmma_halo_forwards() + cuda_conv_wgmma_halo_dgrads() == h0) *ms = -1;
        return rc;
    }
    if (engine != SG_CONV_ENGINE_OWN && engine != SG_CONV_ENGINE_CUDNN &&
        engine != SG_TIME_OWN_WGMMA)
        return sg_set_error("time_node_engine: engine %d is not own, cudnn, own on wgmma (on the "
                            "halo or per tap) or a wgmma schedule",
                            engine);
    /* own on the wgmma kernels: where they take the node as its launcher would call them */
    if (engine == SG_TIME_OWN_WGMMA) {
        if (!node_on_wgmma(c, p, node)) return SG_OK;
        engine = CONV_ENGINE_WGMMA;
    }
    /* the library side: cuDNN only where prepare pinned it (after the warm-up nothing new may
     * be chosen); a 1x1 node on the GEMM engine is its library side, and so is the GEMM for a
     * 1x1 forward auto put on own (FWD_1X1_OWN, the file comment: the per-layer table keeps
     * showing both) */
    if (engine == SG_CONV_ENGINE_CUDNN &&
        (c->node_eng[node] == CONV_ENGINE_GEMM ||
         (c->conv_engine == SG_CONV_ENGINE_AUTO && on_own(c->node_eng[node]) &&
          fwd_1x1_own(c, &p->g, node))))
        engine = CONV_ENGINE_GEMM;
    /* the own side of a node on the wgmma kernels is those kernels */
    if (engine == SG_CONV_ENGINE_OWN && c->node_eng[node] == CONV_ENGINE_WGMMA)
        engine = CONV_ENGINE_WGMMA;
    if (engine == SG_CONV_ENGINE_CUDNN && c->node_eng[node] != SG_CONV_ENGINE_CUDNN) return SG_OK;
    /* a node run off its engine may need GEMMs the frozen step table never saw: they go to a
     * second table, outside the step's, and one untimed run first picks their algorithms (host
     * work that would otherwise sit between the two events) */
    sg_blas *blas = NULL;
    if (engine != c->node_eng[node]) {
        if (blas_outside_step(c, p)) return SG_ERR;
        blas = c->blas_off;
        if (cuda_run_node_on(be, p, node, engine, blas)) return SG_ERR;
    }
    if (sg_cuda_window_begin(&c->win, c->st, c->ev[0])) return SG_ERR;
    if (cuda_run_node_on(be, p, node, engine, blas)) {
        sg_cuda_window_cancel(&c->win);
        return SG_ERR;
    }
    return sg_cuda_window_end(&c->win, c->st, c->ev[0], c->ev[1], ms);
}

/* The backend's record (bench's "env", the checkpoint's): the device and libraries, the engines
 * and their tables, and the schedule knobs that leave the bits alone but not the speed
 * (SG_TC_HALO as tc_halo, SG_TC_DGRAD_STATS as dgrad_stats; SG_WG_PERSIST and SG_WG_FILL as
 * wg_persist and wg_fill: 0 off, else the blocks of the persistent grid or the SMs the tile width
 * fills; wg_layer_nodes: the wgmma nodes under their layer's own schedule instead;
 * SG_WG_DGRAD_HALO as wg_dgrad_halo; env_knobs: every knob of backend.h's list that is set, with
 * its value), so that a measurement says what it ran. */
/* The knobs set, "NAME=value" space-separated into buf (a value's characters outside a plain set
 * shown as '?', and at most 32 of them: the record is JSON) */
static void env_knobs_set(char *buf, size_t cap) {
    buf[0] = 0;
    for (int k = 0; k < SG_N_CUDA_ENV_KNOBS; k++) {
        const char *v = getenv(sg_cuda_env_knobs[k]);
        if (!v || !*v) continue;
        char val[33];
        int n = 0;
        for (; v[n] && n < 32; n++)
            val[n] = isalnum((unsigned char)v[n]) || strchr("_.,:/+-", v[n]) ? v[n] : '?';
        val[n] = 0;
        const size_t used = strlen(buf);
        snprintf(buf + used, cap - used, "%s%s=%s", used ? " " : "", sg_cuda_env_knobs[k], val);
    }
}
static void cuda_describe(sg_backend *be, char *buf, int cap) {
    cuda_ctx *c = be->ctx;
    struct cudaDeviceProp prop;
    int rt = 0, drv = 0, cbv = 0;
    memset(&prop, 0, sizeof prop);
    cudaGetDeviceProperties(&prop, c->dev);
    cudaRuntimeGetVersion(&rt);
    cudaDriverGetVersion(&drv);
    if (c->cb) cublasGetVersion(c->cb, &cbv);
    int dnn_n = 0, dnn_frozen = 0, dnn_tf32 = 0, prefs_met = 0, prefs_missed = 0;
    sg_blas_preferences(c->blas, &prefs_met, &prefs_missed);
    size_t dnn_ver = 0;
    uint64_t dnn_hash = 0;
    char knobs[384];
    env_knobs_set(knobs, sizeof knobs);
#ifdef SG_HAVE_CUDNN
    dnn_n = sg_cudnn_count(c->dnn), dnn_frozen = sg_cudnn_frozen(c->dnn);
    dnn_ver = sg_cudnn_version(), dnn_hash = sg_cudnn_hash(c->dnn);
    dnn_tf32 = sg_cudnn_tf32(c->dnn);
#endif
    snprintf(
        buf, (size_t)cap,
        "{\"backend\":\"cuda\",\"gpu\":\"%s\",\"sm_count\":%d,\"cc\":\"%d.%d\","
        "\"cuda_runtime\":%d,\"driver\":%d,\"cublas\":%d,\"cublaslt\":%zu,\"graph\":%s,"
        "\"graph_nodes\":%d,\"graph_roots\":%d,\"graph_edges\":%d,"
        "\"graph_node_types\":{\"kernel\":%d,\"memset\":%d,\"memcpy\":%d,\"other\":%d},"
        "\"graph_memsets\":\"%s\",\"graph_memsets_captured\":%d,\"graph_memsets_replaced\":%d,"
        "\"graph_memsets_kept\":%d,\"graph_launch\":\"%s\","
        "\"gemms_pinned\":%d,\"gemm_table_frozen\":%s,\"gemm_table_hash\":\"%016llx\","
        "\"gemm_prefs_met\":%d,\"gemm_prefs_missed\":%d,\"gemm_epilogue\":%s,"
        "\"conv_engine\":\"%s\",\"cudnn\":%zu,\"convs_cudnn\":%d,\"convs_gemm\":%d,"
        "\"convs_own\":%d,\"convs_wgmma\":%d,"
        "\"cudnn_plans\":%d,\"cudnn_table_frozen\":%s,\"cudnn_table_hash\":\"%016llx\","
        "\"cudnn_tf32\":%s,\"attn_engine\":\"%s\",\"attn_fused_nodes\":%d,"
        "\"conv_tc\":\"%s\",\"norm_stats_fused\":%d,"
        "\"norm_stats_fused_fwd\":%d,\"pdl\":%s,\"tc_halo\":\"%s\",\"dgrad_stats\":%s,"
        "\"wg_persist\":%d,\"wg_fill\":%d,\"wg_dgrad_halo\":%s,"
        "\"norm_onepass\":%d,\"norm_bwd_onepass\":%d,"
        "\"conv_thin\":\"%s\",\"thin_own_nodes\":%d,\"f32_own_nodes\":%d,\"conv_wino\":\"%s\","
        "\"wino_nodes\":%d,"
        "\"timing_windows\":%d,\"timing_host_bound\":%d,\"timing_hold_ms\":%.3f,"
        "\"timing_issue_max_ms\":%.3f,\"wg_layer_nodes\":%d,"
        "\"linear_groups\":%d,\"linear_group_nodes\":%d,\"env_knobs\":\"%s\"}",
        prop.name, prop.multiProcessorCount, prop.major, prop.minor, rt, drv, cbv,
        sg_blas_version(), c->use_graph ? "true" : "false", c->graph_nodes, c->graph_roots,
        c->graph_edges, c->graph_types[0], c->graph_types[1], c->graph_types[2], c->graph_types[3],
        c->graph_memsets ? "kernel" : "keep", c->graph_types_captured[1], c->memsets_replaced,
        c->memsets_kept,
        c->graph_launch == 2    ? "device"
        : c->graph_launch == -1 ? "host (device refused)"
        : c->graph_launch == 1  ? "device (not yet captured)"
                                : "host",
        sg_blas_count(c->blas), sg_blas_frozen(c->blas) ? "true" : "false",
        (unsigned long long)sg_blas_hash(c->blas), prefs_met, prefs_missed,
        c->gemm_epi ? "true" : "false", sg_conv_engine_name(c->conv_engine), dnn_ver,
        c->convs_cudnn, c->convs_gemm, c->convs_own, c->convs_wgmma, dnn_n,
        dnn_frozen ? "true" : "false", (unsigned long long)dnn_hash, dnn_tf32 ? "true" : "false",
        c->attn_fused ? "fused" : "gemm", c->attn_fused ? c->attn_fused_nodes : -1,
        !c->convs_wgmma                  ? "mma"
        : c->convs_wgmma == c->convs_own ? "wgmma"
                                         : "per-layer",
        c->stats_fused, c->stats_fused_fwd, c->pdl ? "true" : "false",
        c->tc_halo == SG_TC_HALO_ALL    ? "all"
        : c->tc_halo == SG_TC_HALO_NONE ? "none"
                                        : "prologue",
        c->dgrad_epilogue ? "true" : "false",
        c->wg_persist < 0 ? prop.multiProcessorCount : c->wg_persist,
        c->wg_fill < 0 ? prop.multiProcessorCount : c->wg_fill, c->wg_dgrad_halo ? "true" : "false",
        c->norm_onepass & SG_NORM_ONEPASS_FWD ? c->norm_onepass_nodes : -1,
        c->norm_onepass & SG_NORM_ONEPASS_BWD ? c->norm_bwd_onepass_nodes : -1,
        c->thin_own     ? "own"
        : c->thin_tiles ? "0"
                        : "1",
        c->thin_own ? c->thin_own_nodes : -1, c->f32_own ? c->f32_own_nodes : -1, wino_text(c),
        c->conv_wino > 0 || c->wino_nodes ? c->wino_nodes : -1, c->win.windows, c->win.host_bound,
        c->win.hold_s * 1e3, c->win.issue_max_s * 1e3, c->wg_layer_nodes, c->lin_groups,
        c->lin_group_nodes, knobs);
}

static void cuda_destroy(sg_backend *be) {
    if (!be) return;
    cuda_ctx *c = be->ctx;
    if (c) {
        if (c->launcher_exec) cudaGraphExecDestroy(c->launcher_exec);
        if (c->launcher) cudaGraphDestroy(c->launcher);
        if (c->launch_status) cudaFree(c->launch_status);
        if (c->exec) cudaGraphExecDestroy(c->exec);
        if (c->graph) cudaGraphDestroy(c->graph);
        if (c->graph_captured) cudaGraphDestroy(c->graph_captured);
        if (c->cb) cublasDestroy(c->cb);
        sg_blas_destroy(c->blas);
        sg_blas_destroy(c->blas_off);
#ifdef SG_HAVE_CUDNN
        sg_cudnn_destroy(c->dnn);
#endif
        free(c->node_eng), free(c->node_sched), free(c->node_wino);
        free(c->stats_to), free(c->norm_done), free(c->norm_off);
        free(c->lin_first);
        if (c->ev[0]) cudaEventDestroy(c->ev[0]);
        if (c->ev[1]) cudaEventDestroy(c->ev[1]);
        if (c->st) cudaStreamDestroy(c->st);
        if (c->arena) cudaFree(c->arena);
#ifdef SG_HAVE_NCCL
        if (c->nccl) ncclCommDestroy(c->nccl);
#endif
        free(c);
    }
    free(be);
}

/* the function table; sg_backend_cuda_create copies it and adds the context */
static const sg_backend cuda_vtable = {
    .name = "cuda",
    .prepare = cuda_prepare,
    .upload = cuda_upload,
    .download = cuda_download,
    .run_node = cuda_run_node,
    .run_step = cuda_run_step,
    .sync = cuda_sync,
    .time_steps = cuda_time_steps,
    .time_nodes = cuda_time_nodes,
    .time_launch_captured = cuda_time_launch_captured,
    .time_nodes_replay = cuda_time_nodes_replay,
    .last_replay_types = cuda_last_replay_types,
    .wg_sched = cuda_wg_sched,
    .matmul_peak_tflops = cuda_matmul_peak,
    .mem_peak_gbs = cuda_mem_peak,
    .node_engine = cuda_node_engine,
    .time_node_engine = cuda_time_node_engine,
    .time_gemm = cuda_time_gemm,
    .tune_gemms = cuda_tune_gemms,
    .describe = cuda_describe,
    .destroy = cuda_destroy,
};

/* An environment knob with a fixed set of values, v = getenv(name) (spelt out at each call: the
 * tests list the knobs by their getenv calls): its index in vals (n of them), dflt where it is
 * unset or empty, -1 (with "NAME=value: expected ...") for anything else */
static int env_choice(const char *name, const char *v, const char *const *vals, int n, int dflt,
                      const char *expect) {
    if (!v || !*v) return dflt;
    for (int k = 0; k < n; k++)
        if (!strcmp(v, vals[k])) return k;
    sg_set_error("%s=%s: expected %s", name, v, expect);
    return -1;
}

sg_backend *sg_backend_cuda_create(int dev, int use_graph) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        sg_set_error("no CUDA device: %s",
                     e != cudaSuccess ? cudaGetErrorString(e) : "no GPU is visible");
        cudaGetLastError();
        return NULL;
    }
    if (dev < 0 || dev >= n) {
        sg_set_error("CUDA device %d does not exist (%d visible)", dev, n);
        return NULL;
    }
    sg_backend *be = calloc(1, sizeof *be);
    cuda_ctx *c = calloc(1, sizeof *c);
    if (!be || !c) {
        free(be), free(c);
        sg_set_error("out of host memory");
        return NULL;
    }
    c->dev = dev;
    c->use_graph = use_graph;
    c->wg_force = -1;
    graph_shape_unknown(c); /* no graph yet */
    for (int k = 0; k < 4; k++) c->replay_types[k] = -1;
    *be = cuda_vtable;
    be->ctx = c;
    /* the conv engine's default: SG_CONV_ENGINE=auto|own|cudnn in the environment (every tool),
     * else auto; a tool's --conv-engine sets be->conv_engine after this */
    const char *env = getenv("SG_CONV_ENGINE");
    if (env && *env) {
        be->conv_engine = sg_conv_engine_parse(env);
        if (be->conv_engine < 0) {
            sg_set_error("SG_CONV_ENGINE=%s: expected auto, own or cudnn", env);
            free(c), free(be);
            return NULL;
        }
    }
    const char *prof = getenv("SG_PROFILE_FIRST_STEP");
    c->profile_first = prof && !strcmp(prof, "1");
    /* the wgmma kernels are sm_90a code (prepare_conv_tc checks again) */
    int major = 0, minor = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) == cudaSuccess)
        be->conv_wgmma = major == 9 && minor == 0;
    cudaGetLastError();
    /* programmatic dependent launch (cuda_kernels.h): SG_PDL=1 on compute capability 9.0 and
     * above; unset or 0: off (the same bits either way) */
    static const char *const off_on[] = {"0", "1"};
    const int pdl = env_choice("SG_PDL", getenv("SG_PDL"), off_on, 2, 0, "0 (the default) or 1");
    if (pdl < 0) {
        free(c), free(be);
        return NULL;
    }
    c->pdl_ok = major >= 9;
    be->step_knobs = 1;
    c->pdl = pdl && major >= 9;
    if (pdl && !c->pdl)
        fprintf(stderr,
                "stepgraph: SG_PDL=1: this device (compute capability %d.%d) has no "
                "programmatic dependent launch: off\n",
                major, minor);
    /* the libraries' memset nodes (kernels/cuda/graph_edit.cu): SG_GRAPH_MEMSETS=kernel (the
     * default: each becomes a kernel node after the capture) or keep (the graph as captured) */
    static const char *const memsets[] = {"keep", "kernel"};
    c->graph_memsets = env_choice("SG_GRAPH_MEMSETS", getenv("SG_GRAPH_MEMSETS"), memsets, 2, 1,
                                  "kernel (the default) or keep");
    /* the step's graph launched from the host (the default) or from the device (one node a
     * replay: kernels/cuda/graph_launch.cu) */
    static const char *const launches[] = {"host", "device"};
    c->graph_launch = env_choice("SG_GRAPH_LAUNCH", getenv("SG_GRAPH_LAUNCH"), launches, 2, 0,
                                 "host (the default) or device");
    if (c->graph_memsets < 0 || c->graph_launch < 0) {
        free(c), free(be);
        return NULL;
    }
    for (int k = 0; k < 4; k++) c->graph_types_captured[k] = -1;
    /* the one-pass normalisations (cuda_kernels.h): SG_NORM_ONEPASS=1 both directions, fwd or
     * bwd one, 0 neither (the same bits every way); unset: the forward, the default since the
     * third GPU session timed it (2.8% off the unet_cifar batch-128 step; the backward one-pass
     * was slower there) */
    const char *onepass = getenv("SG_NORM_ONEPASS");
    _Static_assert(SG_KNOB_STATS_FWD == SG_NORM_ONEPASS_FWD &&
                       SG_KNOB_STATS_BWD == SG_NORM_ONEPASS_BWD,
                   "the knob's directions are the switch's bits");
    c->norm_onepass =
        onepass && *onepass ? sg_knob_stats_parse(onepass) : SG_KNOB_NORM_ONEPASS_DEFAULT;
    if (c->norm_onepass < 0) {
        sg_set_error("SG_NORM_ONEPASS=%s: expected fwd (the default), 1 (forward and backward), "
                     "bwd or 0 (neither)",
                     onepass);
        free(c), free(be);
        return NULL;
    }
    /* the thin convolutions (conv.cu, THIN_OWN in the file comment): SG_CONV_THIN unset or 1,
     * the own engine's thin passes on the thin kernels; 0, on the 64 x 64 tiles (the same bits);
     * own, also on own under auto */
    static const char *const thin_vals[] = {"0", "1", "own"};
    const int thin = env_choice("SG_CONV_THIN", getenv("SG_CONV_THIN"), thin_vals, 3, 1,
                                "1 (the default: the thin kernels), 0 (the 64 x 64 tiles) or own "
                                "(also the image convolutions' passes on own under auto)");
    /* F32_OWN (the file comment): SG_CONV_F32 unset or own, the fp32 passes at 32 x 32 and
     * above on own under auto; cudnn, on cuDNN where it has an engine */
    static const char *const f32_vals[] = {"cudnn", "own"};
    c->f32_own = env_choice("SG_CONV_F32", getenv("SG_CONV_F32"), f32_vals, 2, 1,
                            "own (the default: fp32 convolutions at 32 x 32 and above on the own "
                            "engine under auto) or cudnn");
    /* the Winograd form of the own engine's fp32 3x3 stride-1 passes
     * (kernels/cuda/conv_wino.cu): SG_CONV_WINO 0, the direct tiles; 1, Winograd (other bits, so
     * describe records it and a resume that changes it is warned about); unset, the engine
     * table's layers that say "wino" (none: the direct tiles) */
    const char *wino_env = getenv("SG_CONV_WINO");
    const int wino = env_choice("SG_CONV_WINO", wino_env, off_on, 2, 0,
                                "0 (the own engine's fp32 3x3 convolutions on the direct tiles) or "
                                "1 (their three passes as Winograd F(2x2, 3x3)); unset, the engine "
                                "table's choice per layer");
    c->conv_wino = wino_env && *wino_env ? wino : -1;
    c->wino_force = -1;
    /* the attention engine: SG_ATTN=gemm (default) | fused */
    static const char *const attn_vals[] = {"gemm", "fused"};
    c->attn_fused = env_choice("SG_ATTN", getenv("SG_ATTN"), attn_vals, 2, 0, "gemm or fused");
    /* the GEMM forward's bias epilogue (kernels/cuda/blas.cu reads it where a GEMM context is
     * made): checked here, so that a misspelt value is refused, not taken for 1 */
    const int epi = env_choice("SG_GEMM_EPILOGUE", getenv("SG_GEMM_EPILOGUE"), off_on, 2, 1,
                               "1 (the default: a bf16 GEMM forward rounds once from cuBLASLt's "
                               "bias epilogue where the library offers it) or 0 (an fp32 tile and "
                               "a second pass)");
    if (thin < 0 || c->f32_own < 0 || wino < 0 || c->attn_fused < 0 || epi < 0) {
        free(c), free(be);
        return NULL;
    }
    c->thin_own = thin == 2;
    c->thin_tiles = thin == 0;
    cuda_conv_thin_enable(!c->thin_tiles);
    return be;
}

#else
typedef int sg_backend_cuda_unused; /* ISO C forbids an empty translation unit */
#endif
