/* cuda_kernels.h — the CUDA kernels: one launcher per CPU reference kernel (cpu_kernels.h).
 *
 * Each cuda_<name> computes what cpu_<name> computes, with these differences, shared by all:
 * - Every launcher takes the stream it enqueues on and returns SG_OK, or SG_ERR with a message
 *   (sg_last_error) for bad arguments, a too-small workspace or a failed launch. Nothing
 *   allocates, synchronises or copies to the host: every launcher can be captured into a CUDA
 *   graph, and a replay does what the eager call did.
 * - Activations (x, y, dx, dy, qkv, v of add_nc, ...) carry a dtype `dt`: DT_F32 or DT_BF16
 *   (bf16 storage, fp32 arithmetic, round to nearest even once on store, as sg_f32_to_bf16).
 *   Parameters, parameter gradients, GroupNorm mean/rstd, attention P, the loss and optimizer
 *   state are always fp32, with one exception: the weights a conv or linear layer multiplies
 *   come in its activations' dtype (bf16 runs: the plan's bf16 copy of the parameters, kept by
 *   the optimizer's pass and refreshed on every upload; no launcher converts weights).
 * - Outputs that can be gradients take `accum`: 0 overwrites, 1 adds the result to what the
 *   output holds (in fp32, then one rounding). There are no atomics: every reduction runs in
 *   an order fixed by the shapes, so the same inputs give the same bits, run after run.
 * - Values that change from step to step (step counter, seed, timesteps, clip scale) are read
 *   from device memory inside the kernels, never passed from the host, so a captured graph
 *   replays correctly.
 * - Scratch: launchers marked [ws] take `ws` (SG_WS_ALIGN-aligned device memory) and its size
 *   `ws_bytes`; common/sg_workspace.h gives the size each needs (sg_ws_<name>).
 * - GEMMs: launchers marked [gemm] take an sg_blas context (below) created for `st`; a context
 *   of another stream is an error. Every GEMM runs through cuBLASLt with CUBLAS_COMPUTE_32F
 *   (no TF32) and the algorithm pinned for its descriptor.
 * - Outputs never alias inputs unless stated (as in cpu_kernels.h).
 *
 * Channel concatenation: a skip connection concatenates channels, which NHWC cannot do by
 * placing two buffers side by side. Operands of type sg_cat are the concatenation of up to
 * two NHWC buffers along channels: channels [0, c[0]) come from p[0] (pixel stride c[0]) and
 * [c[0], c[0]+c[1]) from p[1] (pixel stride c[1]); c[1] = 0 means one buffer. Conv inputs and
 * input gradients and GroupNorm inputs and input gradients take them.
 *
 * Plain C11 with cuda_runtime_api.h; extern "C" from CUDA/C++.
 */
#ifndef SG_CUDA_KERNELS_H
#define SG_CUDA_KERNELS_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#include "common/sg_base.h"
#include "common/sg_pointwise.h"
#include "common/sg_sample_step.h"
#include "common/sg_schedule.h"
#include "common/sg_workspace.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    void *p[2];
    int c[2];
} sg_cat;

/* sg_cat describes inputs and outputs alike, so it holds non-const pointers; a launcher never
 * writes through an input's. The cast goes through uintptr_t to say that on purpose
 * (-Wcast-qual). */
static inline void *sg_cat_ptr(const void *p) {
    return (void *)(uintptr_t)p;
}
/* One buffer of c channels. */
static inline sg_cat sg_cat1(const void *p, int c) {
    sg_cat r = {{sg_cat_ptr(p), NULL}, {c, 0}};
    return r;
}
/* Channels [0, c0) from p0, then [c0, c0 + c1) from p1. */
static inline sg_cat sg_cat2(const void *p0, int c0, const void *p1, int c1) {
    sg_cat r = {{sg_cat_ptr(p0), sg_cat_ptr(p1)}, {c0, c1}};
    return r;
}

/* The dropout after a norm_act op's activation: p = 0 for none; else an element is kept where
 * sg_rng_dropout(*seed, *step, purpose, i0 + its index in x) >= p (cuda_dropout_fwd's mask;
 * seed and step are device pointers). No padding bytes: kernels take it by value. */
typedef struct {
    float p;
    uint32_t purpose;
    const uint64_t *seed;
    const int64_t *step;
    uint64_t i0;
} sg_drop;

/* ---- Programmatic dependent launch (Hopper; elementwise.cu). With it on, every kernel of
 * these launchers is launched with cudaLaunchAttributeProgrammaticStreamSerialization: it may
 * start while the kernel before it in the stream drains, and waits (griddepcontrol.wait, the
 * first statement of every kernel: SG_PDL_ENTER) for that kernel's completion and memory
 * before it touches any; each kernel also lets its own successor start early
 * (griddepcontrol.launch_dependents). What it saves is the launch latency between dependent
 * kernels; the arithmetic and its order are untouched, so the bits are the same on or off.
 * Process-wide, off by default; the CUDA backend sets it from SG_PDL before each run of its
 * nodes (eager or captured). Off on devices below compute capability 9.0. */
void sg_cuda_set_pdl(int on);
int sg_cuda_pdl(void);

/* ---- Whether the current device can run this build's kernels (elementwise.cu): cudaSuccess,
 * or what cudaFuncGetAttributes says of one of them (cudaErrorNoKernelImageForDevice where the
 * build's CUDA architectures do not cover the device). The architectures the kernels were built
 * for, as CMAKE_CUDA_ARCHITECTURES gave them ("90", "80,90"): sg_cuda_build_archs. */
int sg_cuda_kernel_image(void);
const char *sg_cuda_build_archs(void);

/* ---- windows of device time (timing.cu): every measurement outside the step (bench's
 * breakdown, the engine tuning, cuDNN's and cuBLASLt's timed choices) brackets its work with
 * sg_cuda_window_begin (a hold kernel that keeps the device busy while the host issues the
 * work, then the first event) and sg_cuda_window_end (the second event, waited for: *ms the
 * device's time between them). A window whose issue outlasted its hold is counted host-bound;
 * each window sets the next one's hold from its issue time (timing.cu says how and why). One
 * sg_cuda_window may serve any number of windows on any stream, one at a time (a begin while
 * one is open, or an end with none, is an error). Not during capture. */
typedef struct {
    double hold_s;      /* the next window's hold */
    double t0;          /* the host clock at the open window's begin */
    double issue_max_s; /* the longest issue seen */
    int windows;        /* windows closed */
    int host_bound;     /* ... whose issue outlasted their hold: their times may hold host time */
    int open;           /* begun, not yet ended */
} sg_cuda_window;
/* the shortest hold (and the first), the longest, and the time allowed between a launch's
 * return on the host and the device seeing it queued (a window is host-bound where its issue +
 * the margin > its hold) */
#define SG_CUDA_HOLD_START_S 2e-4
#define SG_CUDA_HOLD_MAX_S 2e-2
#define SG_CUDA_HOLD_MARGIN_S 2e-5
void sg_cuda_window_init(sg_cuda_window *w);
int sg_cuda_window_begin(sg_cuda_window *w, cudaStream_t st, cudaEvent_t ev0);
int sg_cuda_window_end(sg_cuda_window *w, cudaStream_t st, cudaEvent_t ev0, cudaEvent_t ev1,
                       float *ms);
/* closes an open window without a time: where the timed work failed (the caller says why) */
void sg_cuda_window_cancel(sg_cuda_window *w);

/* ---- the captured step's memset nodes as kernel nodes (graph_edit.cu says why) ----
 * Each memset node of g (the libraries' workspace clears) becomes a kernel node that sets the
 * same bytes to the same values, with the same dependencies and dependents. *replaced: how many;
 * *kept: memset nodes left as captured (an edge with non-default data, or parameters the kernel
 * does not take). SG_ERR with a message where a graph call fails; g may then be half edited
 * (the caller destroys it). Not during capture. */
int sg_cuda_graph_memsets_to_kernels(cudaGraph_t g, int *replaced, int *kept);

/* ---- the step's graph launched from the device (graph_launch.cu says why) ----
 * A graph of one kernel node that tail-launches `step` (instantiated with
 * cudaGraphInstantiateFlagDeviceLaunch and uploaded) into *out; the kernel stores the device-side
 * launch's error in *status (device memory, set to 0 by the caller) where it fails. SG_ERR with a
 * message where a graph call fails. */
int sg_cuda_graph_launcher(cudaGraph_t *out, cudaGraphExec_t step, int *status);

/* ---- GEMM context (blas.cu): the cuBLASLt handle, the stream, the workspace (the arena's
 * cuBLAS workspace) and the table of pinned algorithms, one per distinct GEMM descriptor (m,
 * n, k, transposes, types, leading dimensions, batch count and strides, operand alignment).
 * A GEMM not yet in the table gets cublasLtMatmulAlgoGetHeuristic's first algorithm that
 * fits the workspace, once; after sg_blas_freeze a GEMM not in the table is an error. The
 * CUDA backend freezes after its eager warm-up step, before capture, so eager and captured
 * steps run the same algorithms. */
typedef struct sg_blas sg_blas;
/* ws: device memory of ws_bytes that outlives the context; st: the stream of every GEMM. */
int sg_blas_create(sg_blas **out, cudaStream_t st, void *ws, int64_t ws_bytes);
void sg_blas_destroy(sg_blas *blas);
void sg_blas_freeze(sg_blas *blas);
int sg_blas_frozen(const sg_blas *blas);
/* The number of pinned GEMMs, and a 64-bit hash of the table (descriptors and algorithms, in
 * the order they were pinned): the same hash, the same algorithms. */
int sg_blas_count(const sg_blas *blas);
uint64_t sg_blas_hash(const sg_blas *blas);
/* cublasLtGetVersion() */
size_t sg_blas_version(void);
/* 1 where the library offers cuBLASLt's bias epilogue with an fp32 bias for bf16 GEMMs (the
 * heuristic asked for a 1x1 conv's shape; nothing runs, nothing is pinned), else 0: the bf16
 * GEMM forward (cu_gemm_fwd) then rounds once from the GEMM, without the fp32 tile. 0 with
 * SG_GEMM_EPILOGUE=0 set, which keeps every forward on the tile. */
int sg_blas_bias_epilogue(sg_blas *blas);
/* The GEMMs of the table whose bias epilogue the library refused (its heuristic, or the first
 * run of the key): they take the fp32 tile instead (describe()'s gemm_epilogue_refused). */
int sg_blas_refused(const sg_blas *blas);
/* The algorithms' choice by measurement (bench --tune-engines; the engine table's "gemms").
 * A pinned GEMM is named by its key as text (SG_BLAS_KEY_MAX bytes at most: "m256 n32768 k768
 * opNN bf16,bf16>bf16 ld256,768,256 b1 s0,0,0 al256,256,256"), an algorithm by its id (a hash
 * of cuBLASLt's opaque algorithm: the same library, GPU and descriptors give the same id).
 * - sg_blas_key_text: pinned GEMM i's key (i in [0, sg_blas_count));
 * - sg_blas_algo_id: the id of the algorithm GEMM i runs (0 for no such GEMM, or a refused
 *   bias epilogue: cu_blas_gemm_bias);
 * - sg_blas_time_algos: up to `most` (at most 16) of the heuristic's candidates for GEMM i, each
 *   run once untimed and then `reps` times in a window of `win` (above) on scratch operands of
 *   the key's shape and alignment (cudaMalloc'd and freed here; the table's workspace): ms[c] the
 * mean of candidate c (-1: refused or beyond the workspace), ids[c] its id, *n the candidates;
 * - sg_blas_prefer: before the first GEMM is pinned, the algorithm of id `algo` for the GEMM of
 *   this key: it is pinned instead of the heuristic's first where the heuristic offers it (among
 *   its first 16); where not, a line on stderr says so and the first is pinned;
 * - sg_blas_preferences: *met the preferred algorithms pinned so far, *missed those not offered. */
#define SG_BLAS_KEY_MAX 256
int sg_blas_key_text(const sg_blas *blas, int i, char *buf, int cap);
uint64_t sg_blas_algo_id(const sg_blas *blas, int i);
int sg_blas_time_algos(sg_blas *blas, int i, int most, int reps, sg_cuda_window *win, float *ms,
                       uint64_t *ids, int *n);
int sg_blas_prefer(sg_blas *blas, const char *key, uint64_t algo);
void sg_blas_preferences(const sg_blas *blas, int *met, int *missed);
/* One plain GEMM through the table, for measurements outside the step (tools/bench's
 * same-size-GEMM column): row-major C[m][n] = A[m][k] B[n][k]^T, both operands K-contiguous
 * (a convolution's implicit-GEMM layout), operands and C of dtype dt (DT_BF16 or DT_F32),
 * fp32 accumulation. */
int sg_blas_gemm_rowmajor_nt(sg_blas *blas, cudaStream_t st, int m, int n, int k, int dt,
                             const void *A, const void *B, void *C);

/* ---- convolution (conv.cu): K in {1, 3}, S in {1, 2}; zero padding `pad` (0..K/2) at the
 * top/left, at the bottom/right what Ho = (H + 2 (K/2) - K) / S + 1 needs (cpu_kernels.h);
 * Ci = x.c[0] + x.c[1].
 * w[Co,K,K,Ci] in dt (fp32, or the bf16 weight copy). Three paths (cuda_conv2d_path): bf16 on
 * tensor cores (conv_tc.cu: implicit GEMMs on mma.sync); otherwise 1x1 stride 1 as cuBLASLt
 * GEMMs and the rest as fp32 CUDA-core implicit-GEMM kernels. */
typedef enum {
    SG_CONV_PATH_TENSOR_CORE, /* bf16, every part of x and Co multiples of 8, 16-byte aligned */
    SG_CONV_PATH_CUDA_CORE,   /* fp32 tiles on CUDA cores (fp32, or bf16 that does not fit) */
    SG_CONV_PATH_CUBLAS       /* 1x1 stride 1 off the tensor-core path: cuBLASLt GEMMs */
} sg_conv_path;
/* The path all three launchers take for a convolution: x is the input (forward, backward
 * weight) or the input gradient (backward data), y the output or the output gradient. The
 * launchers dispatch on it; tests assert it. */
sg_conv_path cuda_conv2d_path(sg_cat x, const void *y, int N, int H, int W, int Co, int K, int S,
                              int dt);
/* What a convolution fuses around its GEMM (issue 17, planner/fuse.c); NULL (or a zeroed
 * struct) fuses nothing.
 *
 * Prologue, norm = 1 (forward and backward weight; the tensor-core path only, the launchers
 * refuse it elsewhere): the convolution's input is norm_act's output y, never stored. x (the
 * launcher's sg_cat, Ci channels) is norm_act's input, and each value of y is computed as the
 * tile of x is loaded, with the apply pass's arithmetic (kernels/cuda/norm_apply.cuh:
 *   y = dropout(act(fmaf(x + v[n,c] - mean[n,g], rstd[n,g] gamma[c], beta[c]))), g = c / (Ci/G),
 * the dropout's element index that of x) and rounded to bf16: the values cuda_norm_act_apply
 * would have stored. The convolution's zero padding is padding of y: applied after it.
 *
 * Epilogue, res != NULL (forward): the residual add, y = round(round(conv(x, w) + b) + res),
 * res [N,Ho,Wo,Co] (dt): the conv's output rounded to dt, then cuda_add_fwd's sum with res,
 * rounded: the bits of the conv followed by the add. In the store on the tensor-core path;
 * the other paths run cuda_add_fwd after the conv.
 *
 * Statistics, stats != NULL (forward): also the canonical partials (mean, M2) of y's channels
 * [0, Co) as the normalisation after it takes them (cuda_norm_act_fwd's c_done), into
 * stats[n][s][c] (float2, stats_ld channels a segment): in the tensor-core kernels' epilogue
 * when an output tile covers whole segments (bf16, HW a multiple of 64 or a divisor of 64),
 * else by the normalisation's own partials pass after the conv: the same bits either way. */
typedef struct {
    const float *mean, *rstd;  /* [N, G] */
    const float *gamma, *beta; /* [Ci] */
    const void *v;             /* [N, Ci] (dt), or NULL: norm_act without the time embedding */
    const void *res;           /* the residual, or NULL */
    float *stats;              /* the statistics' partials of y, or NULL (below) */
    sg_drop drop;
    int norm;
    int G, act;    /* groups; SG_ACT_NONE or SG_ACT_SILU */
    int stats_ld;  /* the partials' channels per segment (>= Co: y may be part 0 of a concat) */
    int stats_seg; /* set by the launchers (sg_ws_norm_seg of y's pixels per image) */
    int halo;      /* SG_TC_HALO_*, below (also the last int: no padding bytes, kernels take the
                      struct by value) */
} sg_conv_fuse;
/* sg_conv_fuse.halo: which tensor-core forwards run on the resident-halo kernels (conv_tc.cu;
 * conv_wgmma.cu's under cuda_conv2d_wgmma_fwd), which load a block's input once (and, with a
 * fused prologue, norm, transform each element once per block): PROLOGUE (0, the default,
 * also where fuse is NULL) those with the prologue, ALL every one, NONE none (the per-tap
 * kernels, which load, and transform, once per tap). The same bits every way; the CUDA
 * backend passes SG_TC_HALO's (graph/backend_cuda_run.c) so a GPU can time each. */
enum { SG_TC_HALO_PROLOGUE = 0, SG_TC_HALO_NONE = 1, SG_TC_HALO_ALL = 2 };
/* [gemm] [ws] y[N,Ho,Wo,Co] (dt) = conv(x, w) + b (b may be NULL), with `fuse` (may be NULL). */
int cuda_conv2d_fwd(cudaStream_t st, sg_blas *blas, void *y, sg_cat x, const void *w,
                    const float *b, const sg_conv_fuse *fuse, int N, int H, int W, int Ci, int Co,
                    int K, int S, int pad, int dt, void *ws, int64_t ws_bytes);
/* The shortcut fold (conv2d_sc): y[N,H,W,Co] = conv(h, w) + b + x ws^T + bs as ONE implicit
 * GEMM on the tensor cores, the reduction over conv's K K Ci then the shortcut's Cin = x.c[0] +
 * x.c[1], both biases added in the store, rounded once to bf16. h[N,H,W,Ci] (with fuse->norm:
 * norm_act's input, the prologue as cuda_conv2d_fwd's), w[Co,K,K,Ci] and ws[Co,1,1,Cin] bf16,
 * b, bs fp32 (may be NULL), stride 1, padding pad. bf16 tensor-core path only (h, x and Co
 * multiples of 8, 16-byte aligned): anything else is refused. No workspace. */
int cuda_conv2d_sc_fwd(cudaStream_t st, void *y, sg_cat h, const void *w, const float *b,
                       const sg_conv_fuse *fuse, sg_cat x, const void *ws, const float *bs, int N,
                       int H, int W, int Ci, int Co, int K, int pad, int dt);
/* The backward statistics' partials of a data gradient's output, for the normalisation before
 * the convolution (whose input is that norm_act's output y: dx is the norm's dy). part != NULL
 * (the start of that norm_act backward's workspace, sg_ws_norm_act_bwd) asks for
 * cuda_norm_bwd_partials' bits of dx as stored (after any accumulation) into part, and their
 * terms after them (cuda_norm_bwd_partials, below),
 * with x, v, mean, rstd, gamma, beta, drop, G, act the norm_act's operands (x: its input, Ci
 * channels): in the tensor-core data gradient's epilogue where an output tile holds whole
 * segments (bf16, stride 1, dx one buffer, HW a multiple of 64 or a divisor of 64), else by
 * cuda_norm_bwd_partials after the data gradient (and with epilogue 0, always after). No
 * padding bytes (kernels take it by value). */
typedef struct {
    sg_cat x;
    const float *mean, *rstd, *gamma, *beta;
    const void *v;
    float *part;
    sg_drop drop;
    int G, act;
    int seg; /* set by the launchers (sg_ws_norm_seg(H W)) */
    /* 1: the mma.sync data gradient computes the partials in its epilogue where the tile allows;
     * 0 (the default): cuda_norm_bwd_partials after it, as after the wgmma and cuDNN gradients
     * (the epilogue form measured 3-4x slower on an H200). The same bits either way; the CUDA
     * backend passes SG_TC_DGRAD_STATS's. */
    int epilogue;
} sg_norm_bwd_fuse;
/* [gemm] [ws] dx (dt, concatenation like x) from dy[N,Ho,Wo,Co] (dt); accum applies to dx;
 * nb (may be NULL): the backward partials of dx (above). */
int cuda_conv2d_bwd_data(cudaStream_t st, sg_blas *blas, sg_cat dx, const void *dy, const void *w,
                         int N, int H, int W, int Ci, int Co, int K, int S, int pad, int dt,
                         int accum, void *ws, int64_t ws_bytes, const sg_norm_bwd_fuse *nb);
/* [gemm] [ws] dw[Co,K,K,Ci], db[Co] (fp32, db may be NULL) from dy and x (dt); accum applies
 * to dw and db. The implicit GEMMs reduce over the output pixels in chunks whose fp32 partials
 * are summed in chunk order: sg_ws_wgrad_chunks(P, nw) of them on the CUDA cores, at most that
 * on the tensor cores (cuda_conv2d_tc_wgrad_chunks). fuse (may be NULL): the prologue alone (x
 * is norm_act's input). */
int cuda_conv2d_bwd_weight(cudaStream_t st, sg_blas *blas, float *dw, float *db, const void *dy,
                           sg_cat x, const sg_conv_fuse *fuse, int N, int H, int W, int Ci, int Co,
                           int K, int S, int pad, int dt, int accum, void *ws, int64_t ws_bytes);
/* The weight gradient's chunk count on the mma.sync kernels (cuda_conv2d_bwd_weight's tensor-core
 * path) and on the wgmma kernels (cuda_conv2d_wgmma_bwd_weight, x one part): of at most
 * sg_ws_wgrad_chunks(P, nw), the count whose grid fills an H100's or H200's SMs in the fewest
 * waves (conv_tc.cu, conv_wgmma.cu). A function of the shapes alone; tests and bench read it. */
int64_t cuda_conv2d_tc_wgrad_chunks(int N, int H, int W, int Ci, int Co, int K, int S);
int64_t cuda_conv2d_wgmma_wgrad_chunks(int N, int H, int W, int Ci, int Co, int K, int S, int pad);
/* The GEMM engine of 1x1 stride-1 convolutions (graph/backend_cuda_engines.c puts the library
 * side's 1x1 convs here, beside cuDNN's spatial ones): the three passes above with K = 1, S = 1,
 * pad = 0 on the SG_CONV_PATH_CUBLAS path whatever the dtype and alignment (linear.cu's GEMM
 * layer: cuBLASLt, pinned algorithms), a concatenated operand one GEMM per part. The same
 * arithmetic as the tensor-core path (fp32 accumulation; y = round(acc + b), then the residual
 * as the add node; dx = round(old + acc); dw fp32), in cuBLASLt's summation order. A normalised
 * input (fuse->norm) is refused: it exists on the tensor-core path only. */
int cuda_conv2d_gemm_fwd(cudaStream_t st, sg_blas *blas, void *y, sg_cat x, const void *w,
                         const float *b, const sg_conv_fuse *fuse, int N, int H, int W, int Ci,
                         int Co, int dt, void *ws, int64_t ws_bytes);
int cuda_conv2d_gemm_bwd_data(cudaStream_t st, sg_blas *blas, sg_cat dx, const void *dy,
                              const void *w, int N, int H, int W, int Ci, int Co, int dt, int accum,
                              void *ws, int64_t ws_bytes, const sg_norm_bwd_fuse *nb);
int cuda_conv2d_gemm_bwd_weight(cudaStream_t st, sg_blas *blas, float *dw, float *db,
                                const void *dy, sg_cat x, int N, int H, int W, int Ci, int Co,
                                int dt, int accum, void *ws, int64_t ws_bytes);
/* ---- nearest-upsample + 3x3 conv from the low-res input (upconv2d, conv.cu; planner/fuse.c):
 * y[N,2H,2W,Co] (dt) = conv3x3_pad1(upsample2x(x[N,H,W,Ci] (dt)), w) + b (b may be NULL) without
 * the upsampled tensor: four 2x2 sub-pixel convs of x with folded weights. w [Co,3,3,Ci]: the
 * fp32 MASTER weights (not the bf16 copy): the launchers fold them in fp32 into ws and store the
 * folded weights in dt (bf16: rounded once). H, W: x's size. ws: sg_ws_upconv2d_fold (forward,
 * backward data), sg_ws_upconv2d_bwd_weight. Paths (cuda_upconv2d_path): bf16 with Ci, Co
 * multiples of 8 and 16-byte aligned x, y on tensor cores, anything else on direct CUDA-core
 * kernels. dw [Co,3,3,Ci] and db fp32, accumulated into with accum (dx likewise). */
sg_conv_path cuda_upconv2d_path(const void *x, const void *y, int N, int H, int W, int Ci, int Co,
                                int dt);
int cuda_upconv2d_fwd(cudaStream_t st, void *y, const void *x, const float *w, const float *b,
                      int N, int H, int W, int Ci, int Co, int dt, void *ws, int64_t ws_bytes);
int cuda_upconv2d_bwd_data(cudaStream_t st, void *dx, const void *dy, const float *w, int N, int H,
                           int W, int Ci, int Co, int dt, int accum, void *ws, int64_t ws_bytes);
int cuda_upconv2d_bwd_weight(cudaStream_t st, float *dw, float *db, const void *dy, const void *x,
                             int N, int H, int W, int Ci, int Co, int dt, int accum, void *ws,
                             int64_t ws_bytes);
/* The same three passes on Hopper's wgmma (conv_wgmma.cu: TMA, mbarrier pipelines,
 * warp-specialised blocks; sm_90a code, run only on a compute capability 9.0 device), for the
 * convolutions of the tensor-core path with every operand (w included: the bf16 weight copy)
 * 128-byte aligned. Contracts, shapes, workspace rules (sg_ws_conv2d_*) and accumulation as
 * cuda_conv2d_fwd / _bwd_data / _bwd_weight. y and dx take the mma.sync kernels' k16 slices in
 * the same order (equal bits wherever the tensor cores sum a slice alike for both
 * instructions: on the host emulation, checked); dw groups the pixels differently (fp32
 * rounding of the sums). fuse (may be NULL) as the mma.sync launchers take it: the forward
 * both fusions, the weight gradient the prologue alone, with the same bits as the unfused
 * wgmma calls (cuda_norm_act_apply, then the conv; the conv, then cuda_add_fwd); the forward's
 * statistics' partials (fuse->stats) in its epilogue where the launch allows (a block per tile,
 * tiles of whole image rows in whole segments), else by cuda_norm_partials after it: the same
 * bits either way. Never run on a
 * GPU; not the default: the backend routes to them with SG_CONV_TC=wgmma. cuda_conv2d_wgmma_refusal
 * says why a convolution cannot run there (this device, the path, alignment; w NULL for the weight
 * gradient), NULL when it can; the launchers refuse such a call with that reason. */
const char *cuda_conv2d_wgmma_refusal(sg_cat x, const void *y, const void *w, int N, int H, int W,
                                      int Co, int K, int S, int dt);
int cuda_conv2d_wgmma_fwd(cudaStream_t st, void *y, sg_cat x, const void *w, const float *b,
                          const sg_conv_fuse *fuse, int N, int H, int W, int Ci, int Co, int K,
                          int S, int pad, int dt, void *ws, int64_t ws_bytes);
int cuda_conv2d_wgmma_bwd_data(cudaStream_t st, sg_cat dx, const void *dy, const void *w, int N,
                               int H, int W, int Ci, int Co, int K, int S, int pad, int dt,
                               int accum, void *ws, int64_t ws_bytes);
int cuda_conv2d_wgmma_bwd_weight(cudaStream_t st, float *dw, float *db, const void *dy, sg_cat x,
                                 const sg_conv_fuse *fuse, int N, int H, int W, int Ci, int Co,
                                 int K, int S, int pad, int dt, int accum, void *ws,
                                 int64_t ws_bytes);
/* The shortcut fold (conv2d_sc, as cuda_conv2d_sc_fwd: same contract, same k order, so the same
 * bits on the host emulation) on the wgmma kernels: conv2's taps, then the shortcut's channels
 * in one accumulator, both biases in the store; h (with fuse: the prologue), x, w, ws and y
 * 128-byte aligned (the tensor maps), refused with cuda_conv2d_wgmma_refusal's reason else. */
int cuda_conv2d_wgmma_sc_fwd(cudaStream_t st, void *y, sg_cat h, const void *w, const float *b,
                             const sg_conv_fuse *fuse, sg_cat x, const void *ws, const float *bs,
                             int N, int H, int W, int Ci, int Co, int K, int pad, int dt);
/* upconv2d's three passes on the wgmma kernels: cuda_upconv2d_fwd's, _bwd_data's and
 * _bwd_weight's contracts, workspaces and bf16 fold (ws); y and dx take the mma.sync kernels'
 * k16 slices in the same order (the same bits on the host emulation); dw groups the low-res
 * pixels by 64-pixel box (fp32 rounding of the sums against mma.sync, as the conv's). Operands
 * 128-byte aligned, bf16, Ci and Co multiples of 8, else refused with the reason
 * cuda_upconv2d_wgmma_refusal gives: lo the low-res tensor (x or dx), hi the high-res one (y or
 * dy), wf the fold's workspace (NULL for the weight gradient); NULL when the kernels take it. */
const char *cuda_upconv2d_wgmma_refusal(const void *lo, const void *hi, const void *wf, int N,
                                        int H, int W, int Ci, int Co, int dt);
int cuda_upconv2d_wgmma_fwd(cudaStream_t st, void *y, const void *x, const float *w, const float *b,
                            int N, int H, int W, int Ci, int Co, int dt, void *ws,
                            int64_t ws_bytes);
int cuda_upconv2d_wgmma_bwd_data(cudaStream_t st, void *dx, const void *dy, const float *w, int N,
                                 int H, int W, int Ci, int Co, int dt, int accum, void *ws,
                                 int64_t ws_bytes);
int cuda_upconv2d_wgmma_bwd_weight(cudaStream_t st, float *dw, float *db, const void *dy,
                                   const void *x, int N, int H, int W, int Ci, int Co, int dt,
                                   int accum, void *ws, int64_t ws_bytes);
/* The grid of the wgmma passes' pipelined kernels (the forward per tap, the data and weight
 * gradients, upconv2d's three passes; the halo forward keeps a block per tile), for every later
 * call of this process: 0 (the default) a block per tile; -1 persistent, one block per SM, each
 * running tiles blockIdx.x, + gridDim.x, .. with its stage ring carried from one tile to the next
 * (the next tile's copies overlap the current one's last k-tiles and store); n > 0 at most n blocks
 * (tests: several tiles per block on a small case). The same tiles in the same order every
 * way: the same bits (test_cuda_ops checks it). The backend sets it from SG_WG_PERSIST. */
void cuda_conv_wgmma_persist(int blocks);
/* The N tile of the wgmma forwards and data gradients (conv and upconv2d), for every later call
 * of this process: 0 (the default) the fewest padded columns, the widest of those; -1 the same
 * columns in the tile width that fills the device's SMs best (estimated waves x width: narrower
 * tiles where few row tiles would leave SMs idle, the low-resolution layers); n > 0 as if the
 * device had n SMs (tests). Each output's k order does not depend on the width: the same bits
 * (test_cuda_ops checks it). The backend sets it from SG_WG_FILL. */
void cuda_conv_wgmma_fill(int sms);
/* How many wgmma forwards of this process computed the statistics' partials (sg_conv_fuse.stats)
 * in their epilogue rather than by the partials pass after them (tests: both happen). */
long cuda_conv_wgmma_stats_epilogues(void);
/* How many forwards of this process each tensor-core generation ran on its resident-halo kernel
 * (conv_tc_fwd_halo_kernel, conv_wg_fwd_halo_kernel) rather than per tap: the choice that
 * sg_conv_fuse.halo makes (tests: the mode reaches the launchers). */
long cuda_conv_tc_halo_forwards(void);
long cuda_conv_wgmma_halo_forwards(void);
/* The wgmma data gradients of stride-1 K x K convolutions (K > 1) on a resident halo of dy
 * (conv_wg_dgrad_halo_kernel: dy's pixels copied once for every tap, not a box per tap), for
 * every later call of this process: 1 (the default) where the halo fits in shared memory, 0
 * always per tap. The same k order and store: the same bits (test_cuda_ops checks it). The
 * backend sets it from SG_WG_DGRAD_HALO. cuda_conv_wgmma_halo_dgrads counts the calls that ran
 * on the halo. */
void cuda_conv_wgmma_dgrad_halo(int on);
long cuda_conv_wgmma_halo_dgrads(void);
/* The CUDA-core path's thin convolutions (conv.cu: 1 to 4 channels on one side, the image's
 * conv_in and conv_out): how many passes of this process ran on the thin kernels rather than
 * the 64 x 64 tiles, and a switch for every later call (1, the default: where they take the
 * shapes; 0: the tiles always). The same bits either way (tests compare the two). */
long cuda_conv_thin_launches(void);
void cuda_conv_thin_enable(int on);
/* The CUDA-core path's Winograd form (conv_wino.cu: fp32 3x3 stride-1 padding-1 passes as
 * F(2x2, 3x3), 2.25x fewer multiplies than the direct tiles): a switch for
 * every later call of this process (0, the default: the direct tiles; 1: Winograd where it takes
 * the pass, after the thin kernels) and how many passes ran on it. Other bits than the tiles'
 * (within the fp32 tolerance of the CPU reference): the CUDA backend sets it from SG_CONV_WINO and
 * records it (describe's conv_wino). */
void cuda_conv_wino_enable(int on);
long cuda_conv_wino_launches(void);
/* The direct tiles' products on the tensor cores (conv.cu's conv_tile_mma3: each fp32 operand
 * split into two TF32 values, three mma.sync m16n8k8 products, fp32 accumulation; an error near
 * 2^-21 of a product, within the fp32 tolerance): a switch for every later call of this process
 * (0, the default: the CUDA cores' FMAs; 1: the tensor cores) and how many tile launches ran on
 * them. Other bits than the FMAs' (the CUDA backend sets it from SG_CONV_F32_TC and records it:
 * describe's conv_f32_tc). The thin kernels and Winograd, where they take a pass, stay as they
 * are. */
void cuda_conv_f32_tc_enable(int on);
long cuda_conv_f32_tc_launches(void);
/* The passes of a convolution (bit 0 forward, 1 data gradient, 2 weight gradient) that the thin
 * kernels take where the switch is on, x (and dx) one buffer and the operands aligned as the
 * arena aligns them: a function of the shapes (the CUDA backend's SG_CONV_THIN=own reads it). */
unsigned cuda_conv2d_thin_passes(int Ci, int Co, int K, int S);
/* How many wgmma pipelined launches of this process took the persistent grid
 * (cuda_conv_wgmma_persist on; tests: the schedule in force reaches each launch). */
long cuda_conv_wgmma_persistent_launches(void);
/* For a convolution run by the cuDNN engine: y[P,Co] (dt) = y + b in place (fp32 sum, one
 * rounding), where cuDNN could not fuse the bias; and [ws] db[Co] (fp32, accum) = the column
 * sum of dy[P,Co] (dt), bit for bit cuda_conv2d_bwd_weight's db (ws: sg_ws_colsum(1, P, Co),
 * which sg_ws_conv2d_bwd_weight covers). */
int cuda_conv2d_bias_add(cudaStream_t st, void *y, const float *b, int64_t P, int Co, int dt);
int cuda_conv2d_bwd_bias(cudaStream_t st, float *db, const void *dy, int64_t P, int Co, int dt,
                         int accum, void *ws, int64_t ws_bytes);
/* [ws] The finish of a backward-filter that cuDNN wrote in bf16 (its +dw_bf16 variant,
 * cudnn_conv.c), in one launch: dw[nw] (fp32) = or (accum) += dwb[nw] (bf16) widened, bit for bit
 * cuda_copy's, and, where db is not NULL, cuda_conv2d_bwd_bias's db (the same accum and ws), bit
 * for bit: the two launches it replaces. */
int cuda_conv2d_bwd_widen(cudaStream_t st, float *dw, const void *dwb, int64_t nw, float *db,
                          const void *dy, int64_t P, int Co, int dt, int accum, void *ws,
                          int64_t ws_bytes);

/* ---- linear (linear.cu): x[N,K], w[M,K] (in dt: fp32, or the bf16 weight copy), y[N,M]; all
 * through cuBLASLt. */
/* [gemm] [ws] y = x w^T + b (b may be NULL). */
int cuda_linear_fwd(cudaStream_t st, sg_blas *blas, void *y, const void *x, const void *w,
                    const float *b, int N, int K, int M, int dt, void *ws, int64_t ws_bytes);
/* [gemm] [ws] dx[N,K] = dy w. */
int cuda_linear_bwd_data(cudaStream_t st, sg_blas *blas, void *dx, const void *dy, const void *w,
                         int N, int K, int M, int dt, int accum, void *ws, int64_t ws_bytes);
/* [gemm] [ws] dw[M,K] = dy^T x, db[M] = column sums of dy (db may be NULL). */
int cuda_linear_bwd_weight(cudaStream_t st, sg_blas *blas, float *dw, float *db, const void *dy,
                           const void *x, int N, int K, int M, int dt, int accum, void *ws,
                           int64_t ws_bytes);

/* ---- linear groups (linear.cu): layers j = 0..n-1 on one input x[N,K] (dt), layer j's
 * w_j[M_j,K] (dt), b_j[M_j] (fp32); own kernels on CUDA cores, no library: what the
 * CUDA backend runs for a run of consecutive linear nodes on one input, the ResBlocks'
 * time-embedding projections (graph/backend_cuda_run.c, prepare_linear_groups), one launch a pass
 * where cuBLASLt took two or three a layer. Every sum is a chain of fp32 fused multiply-adds
 * from +0 in the order written (the reference is exactly that chain in C):
 *   forward      y_j[n,m]  = round(s + b_j[m]), s = sum over k of x[n,k] w_j[m,k]
 *   backward     dx[n,k]   = round(old + s) or round(s): the reduction over j, then m (the
 *     data                   layers in the group's order), in chunks of 32 m of one layer, cut
 *                            into sg_ws_lg_slices(N, K, chunks) slices of whole chunks (slice q:
 *                            chunks [q C / S, (q + 1) C / S) of the C); each slice's chain of
 *                            dy_j[n,m] w_j[m,k], and s = the slices' sum in order, plain adds
 *                            from +0 (one slice: its chain)
 *   backward     dw_j[m,k] = old + s or s, s = sum over n of dy_j[n,m] x[n,k];
 *     weight     db_j[m]   = old + t or t, t = sum over n of dy_j[n,m] (plain adds) */
#define SG_LINEAR_GROUP_MAX 32
typedef struct {
    int n;                               /* layers, 1 to SG_LINEAR_GROUP_MAX */
    int M[SG_LINEAR_GROUP_MAX];          /* each layer's outputs */
    const void *w[SG_LINEAR_GROUP_MAX];  /* forward, backward data: [M_j,K] (dt) */
    const float *b[SG_LINEAR_GROUP_MAX]; /* forward: [M_j], or NULL */
    void *y[SG_LINEAR_GROUP_MAX];        /* forward: y_j[N,M_j] (dt) */
    const void *dy[SG_LINEAR_GROUP_MAX]; /* backward: dy_j[N,M_j] (dt) */
    float *dw[SG_LINEAR_GROUP_MAX];      /* backward weight: [M_j,K] (fp32) */
    float *db[SG_LINEAR_GROUP_MAX];      /* backward weight: [M_j] (fp32), or NULL */
    unsigned accum;                      /* backward weight: bit j, layer j's dw and db add */
} sg_linear_group;
/* y_j (the group's w, b, y) for every layer. */
int cuda_linear_group_fwd(cudaStream_t st, const sg_linear_group *g, const void *x, int N, int K,
                          int dt);
/* [ws] dx[N,K] (dt; accum: added to what it holds, in fp32, rounded once) from every layer's
 * dy and w (ws: sg_ws_linear_group_bwd_data(N, K) bytes, the slices' partials). */
int cuda_linear_group_bwd_data(cudaStream_t st, const sg_linear_group *g, void *dx, int N, int K,
                               int dt, int accum, void *ws, int64_t ws_bytes);
/* dw_j and db_j (the group's dy, dw, db, accum) for every layer. */
int cuda_linear_group_bwd_weight(cudaStream_t st, const sg_linear_group *g, const void *x, int N,
                                 int K, int dt);

/* ---- group norm (norm.cu): x[N,HW,C] (a concatenation, C = x.c[0] + x.c[1]), G | C. */
/* y[N,HW,C] (dt, one buffer), mean[N,G], rstd[N,G] (fp32). */
int cuda_group_norm_fwd(cudaStream_t st, void *y, float *mean, float *rstd, sg_cat x,
                        const float *gamma, const float *beta, int N, int HW, int C, int G,
                        float eps, int dt);
/* [ws] dx (dt, concatenation), dgamma[C], dbeta[C] (fp32); accum_dx applies to dx,
 * accum_param to dgamma and dbeta. */
int cuda_group_norm_bwd(cudaStream_t st, sg_cat dx, float *dgamma, float *dbeta, const void *dy,
                        sg_cat x, const float *mean, const float *rstd, const float *gamma, int N,
                        int HW, int C, int G, int dt, int accum_dx, int accum_param, void *ws,
                        int64_t ws_bytes);

/* ---- norm_act (norm.cu; the math: kernels/cpu/norm.c): y = dropout(act(group_norm(x + v))),
 * x[N,HW,C] a concatenation, v[N,C] (dt) or NULL, act SG_ACT_NONE or SG_ACT_SILU, the dropout
 * after it described by sg_drop. C <= SG_NORM_ACT_MAX_C. Activations move in 16-byte vectors
 * (4 fp32 or 8 bf16 channels) when C and the first part's channels are multiples of that and
 * every activation pointer is 16-byte aligned, else one element at a time (same results).
 * The statistics are a fixed function of x and v: mean and rstd merged from the canonical
 * partials of x (sg_ws_norm_seg: per sample, 64-row segment and channel, one sequential
 * Welford pass; norm.cu), whoever computed them.
 *
 * c_done: the partials of channels [0, c_done) are in ws already, [N][segs][C] float2 (the
 * convolution before wrote them: sg_conv_fuse.stats; graph/backend_cuda_run.c), and the first pass
 * computes only the others; 0: all. */
#define SG_NORM_ACT_MAX_C 2048
/* The statistics' partials of channels [c0, C) of x[N,HW,C] (dt, a concatenation) into
 * part[n][s][c] (float2 (mean, M2), ld >= C channels a segment): the normalisation's own first
 * pass, and what a convolution whose tile cannot do it runs after it (sg_conv_fuse.stats). */
int cuda_norm_partials(cudaStream_t st, float *part, int ld, sg_cat x, int N, int HW, int c0,
                       int dt);
/* [ws] both passes: y[N,HW,C] (dt, one buffer), mean[N,G], rstd[N,G] (fp32). */
int cuda_norm_act_fwd(cudaStream_t st, void *y, float *mean, float *rstd, sg_cat x, const void *v,
                      const float *gamma, const float *beta, int N, int HW, int C, int G, float eps,
                      int act, sg_drop drop, int dt, void *ws, int64_t ws_bytes, int c_done);
/* The one-pass normalisations (norm.cu's norm_onepass_kernel, norm_bwd_onepass_kernel), the
 * switch's bits:
 * - SG_NORM_ONEPASS_FWD: cuda_norm_act_fwd with c_done = 0, 16-byte vectors and a shape that
 *   cuda_norm_act_onepass_groups takes runs one kernel that reads x once (a tile of groups of
 *   one sample copied into shared memory), where the two passes read x twice and launch three
 *   kernels;
 * - SG_NORM_ONEPASS_BWD: cuda_norm_act_bwd with part_done = 0, 16-byte vectors and a shape that
 *   cuda_norm_act_bwd_onepass_groups takes runs one kernel that reads x and dy once (both
 *   copied), then the finish kernel, where the two passes read both twice and launch four.
 * The same bits as the two passes. Process-wide, off until set; the CUDA backend sets it from
 * SG_NORM_ONEPASS before each run of its nodes, an engine table's knob or
 * SG_KNOB_NORM_ONEPASS_DEFAULT (planner/engine_table.h) where that is unset. The _groups functions:
 * the groups a tile takes for that shape, fewer where N samples would make a small grid (0: not
 * taken; the device's shared memory decides too). */
#define SG_NORM_ONEPASS_FWD 1
#define SG_NORM_ONEPASS_BWD 2
void sg_cuda_set_norm_onepass(int mode);
int sg_cuda_norm_onepass(void);
int cuda_norm_act_onepass_groups(int N, int HW, int C, int G, int dt);
int cuda_norm_act_bwd_onepass_groups(int N, int HW, int C, int G, int dt);
/* forwards and backwards launched on the one-pass kernels, so far (the op test's check that
 * they ran) */
long cuda_norm_onepass_launches(void);
long cuda_norm_bwd_onepass_launches(void);
/* [ws] The first pass alone: mean[N,G], rstd[N,G], the bits cuda_norm_act_fwd saves. The
 * fused plan's norm_act node (its y virtual: computed by the convolutions that read it). */
int cuda_norm_act_stats(cudaStream_t st, float *mean, float *rstd, sg_cat x, const void *v, int N,
                        int HW, int C, int G, float eps, int dt, void *ws, int64_t ws_bytes,
                        int c_done);
/* The second pass alone, from saved statistics: the recomputation of y, bit for bit the
 * forward's (the same kernel on the same inputs). */
int cuda_norm_act_apply(cudaStream_t st, void *y, sg_cat x, const void *v, const float *mean,
                        const float *rstd, const float *gamma, const float *beta, int N, int HW,
                        int C, int G, int act, sg_drop drop, int dt);
/* The backward statistics' partials of dy[N,HW,C] (dt) and their terms, in one launch, into
 * cuda_norm_act_bwd's workspace at nb->part (sg_ws_norm_act_bwd: its first three regions):
 * part[n][s][c] = (sum dz, sum dz xhat) over segment s's rows in order (float2; dz the gradient
 * of the normalised value z through the activation and the dropout, xhat = (x + v - mean)
 * rstd); then the terms, S[n][c] = the sums of those over the segments in order and m[n][g] =
 * the group's (mean(dxhat), mean(dxhat xhat)). nb's other fields are the norm_act's operands
 * (sg_norm_bwd_fuse; seg is not read). cuda_norm_act_bwd's first pass, and what a data gradient
 * whose tile cannot compute the partials runs after it. */
int cuda_norm_bwd_partials(cudaStream_t st, const sg_norm_bwd_fuse *nb, const void *dy, int N,
                           int HW, int C, int dt);
/* The terms alone (S and m above) from the partials already at nb->part (a data gradient's
 * epilogue wrote them); reads nb->part, gamma and G. */
int cuda_norm_bwd_terms(cudaStream_t st, const sg_norm_bwd_fuse *nb, int N, int HW, int C);
/* [ws] dx (dt, a concatenation like x), dv[N,C] (dt; NULL: not wanted), dgamma[C], dbeta[C]
 * (fp32) from dy (dt); accum_dx, accum_dv, accum_param (dgamma and dbeta) as usual.
 * part_done: the backward partials and their terms are in ws already (the data gradient that
 * wrote dy computed them: sg_norm_bwd_fuse; graph/backend_cuda_run.c); 0: the first pass computes
 * them. */
int cuda_norm_act_bwd(cudaStream_t st, sg_cat dx, void *dv, float *dgamma, float *dbeta,
                      const void *dy, sg_cat x, const void *v, const float *mean, const float *rstd,
                      const float *gamma, const float *beta, int N, int HW, int C, int G, int act,
                      sg_drop drop, int dt, int accum_dx, int accum_dv, int accum_param, void *ws,
                      int64_t ws_bytes, int part_done);

/* ---- pointwise ops (common/sg_pointwise.h, one row each; elementwise.cu): cuda_<fn> computes
 * cpu_<fn> over n values of dtype dt; outputs may alias inputs elementwise; a gradient op
 * takes one accumulate flag per output. */
#define SG_PW_CUDA_DECL(op, fn, nin, nout, acc) int cuda_##fn(SG_PW_CUDA_PARAMS(nin, nout, acc));
SG_POINTWISE_LIST(SG_PW_CUDA_DECL)
#undef SG_PW_CUDA_DECL

/* ---- other elementwise ops (elementwise.cu), n values; outputs may alias inputs. */
/* y (ydt) = x (xdt), converting dtype; with accum, y += x. */
int cuda_copy(cudaStream_t st, void *y, int ydt, const void *x, int xdt, int64_t n, int accum);
int cuda_scale(cudaStream_t st, void *y, const void *x, float s, int64_t n, int dt, int accum);
/* y[N,HW,C] = x + v[N,C] broadcast over HW (v has dtype dt too). */
int cuda_add_nc_fwd(cudaStream_t st, void *y, const void *x, const void *v, int N, int HW, int C,
                    int dt);
/* [ws] dv[N,C] (dt) = sum over HW of dy. */
int cuda_add_nc_bwd(cudaStream_t st, void *dv, const void *dy, int N, int HW, int C, int dt,
                    int accum, void *ws, int64_t ws_bytes);

/* ---- resampling (resample.cu); H, W are the input's size. */
int cuda_upsample2x_fwd(cudaStream_t st, void *y, const void *x, int N, int H, int W, int C,
                        int dt);
int cuda_upsample2x_bwd(cudaStream_t st, void *dx, const void *dy, int N, int H, int W, int C,
                        int dt, int accum);
int cuda_avgpool2x_fwd(cudaStream_t st, void *y, const void *x, int N, int H, int W, int C, int dt);
int cuda_avgpool2x_bwd(cudaStream_t st, void *dx, const void *dy, int N, int H, int W, int C,
                       int dt, int accum);

/* ---- embeddings (embedding.cu): t[N] int32 on the device. */
int cuda_timestep_emb(cudaStream_t st, void *y, const int32_t *t, int N, int dim, int dt);
/* y[N,dim] (dt) = table[lab[n]] (table [rows, dim] fp32, labels clamped to [0, rows)); the
 * backward dtable (+)= the sum over the samples that picked each row of dy[n] (dt), in sample
 * order (cpu_class_emb_bwd's bits). */
int cuda_class_emb_fwd(cudaStream_t st, void *y, const int32_t *lab, const float *table, int N,
                       int dim, int rows, int dt);
int cuda_class_emb_bwd(cudaStream_t st, float *dtable, const void *dy, const int32_t *lab, int N,
                       int dim, int rows, int dt, int accum);
/* xt[N,per] (dt) = sqrt(abar_t) x0 + sqrt(1 - abar_t) eps (x0, eps fp32), the coefficients of
 * t[n] (clamped to [0, T)) read from table: T rows of sg_ddpm_row (common/sg_schedule.h; the
 * CPU's are cpu_ddpm_table). */
int cuda_ddpm_noise(cudaStream_t st, void *xt, const float *x0, const float *eps, const int32_t *t,
                    const void *table, int N, int per, int T, int dt);

/* ---- attention (attention.cu): qkv[N,L,3C], P[N,heads,L,L] fp32, y[N,L,C]. */
/* [gemm] [ws] y NULL: P alone, as the forward computes it (attention_p, the recompute of P in the
 * backward pass; also the fused forward's) */
int cuda_attention_fwd(cudaStream_t st, sg_blas *blas, void *y, float *P, const void *qkv, int N,
                       int L, int C, int heads, int dt, void *ws, int64_t ws_bytes);
/* [gemm] [ws] dqkv[N,L,3C] (dt); accum applies to dqkv. */
int cuda_attention_bwd(cudaStream_t st, sg_blas *blas, void *dqkv, const void *dy, const void *qkv,
                       const float *P, int N, int L, int C, int heads, int dt, int accum, void *ws,
                       int64_t ws_bytes);
/* The fused engine (SG_ATTN=fused): bf16 on tensor cores, a head's scores and softmax in
 * registers (one kernel forward, two a head backward: rows for dq, columns for dk and dv, dS and
 * P passing through the workspace); fp32 on the CUDA cores (attention_f32.cu: a 64-row tile's
 * scores in shared memory, every head in one launch; one kernel forward, two backward, the
 * columns recomputing dP from the rows' per-row sums); the same arguments, outputs and saved P,
 * other bits (another summation order). Shapes it does not take (cuda_attention_fused_ok: L <=
 * 256; bf16: C / heads a multiple of 16 and at most 256; fp32: C / heads 32 or 64) go to the
 * GEMM path above. */
int cuda_attention_fused_ok(int L, int C, int heads, int dt);
int cuda_attention_fused_fwd(cudaStream_t st, sg_blas *blas, void *y, float *P, const void *qkv,
                             int N, int L, int C, int heads, int dt, void *ws, int64_t ws_bytes);
int cuda_attention_fused_bwd(cudaStream_t st, sg_blas *blas, void *dqkv, const void *dy,
                             const void *qkv, const float *P, int N, int L, int C, int heads,
                             int dt, int accum, void *ws, int64_t ws_bytes);
/* launches of the fp32 fused kernels since the process started (tests: which path ran) */
long cuda_attention_f32_launches(void);

/* ---- loss (loss.cu): pred has dtype pdt, target tdt; loss[0] fp32 in device memory.
 * Weighted (min-SNR; w not NULL): the N samples of n/N values each, sample b's terms times
 * w_b = table[t[b]] (kernels/cpu/cpu_kernels.h: cpu_mse_w_fwd / cpu_mse_w_bwd, the reference). */
typedef struct {
    const int32_t *t;   /* [N] the samples' timesteps (device) */
    const float *table; /* [T] every timestep's weight (device) */
    int N;
} sg_loss_weights;
/* [ws] loss[0] (+= with accum) sum w (pred - target)^2 / (n parts): parts > 1 is one of that many
 * micro-batches' share of their mean. */
int cuda_mse_fwd(cudaStream_t st, float *loss, const void *pred, int pdt, const void *target,
                 int tdt, int64_t n, int parts, int accum, const sg_loss_weights *w, void *ws,
                 int64_t ws_bytes);
/* dpred (pdt) = dloss * 2 w (pred - target) / n; dloss is a constant of the plan. */
int cuda_mse_bwd(cudaStream_t st, void *dpred, const void *pred, int pdt, const void *target,
                 int tdt, int64_t n, float dloss, int accum, const sg_loss_weights *w);

/* ---- optimizer (optim.cu): flat fp32 regions of n values; scalars in device memory. */
/* [ws] out[0] = sum of g^2. */
int cuda_sumsq(cudaStream_t st, float *out, const float *g, int64_t n, void *ws, int64_t ws_bytes);
int cuda_clip_scale(cudaStream_t st, float *scale, const float *sumsq, float max_norm);
/* step: device int64 (0-based); scale: device float or NULL (1); lr_out: device or NULL; the
 * lr at the step from the peak lr, the warm-up and sched (common/sg_schedule.h), on the
 * device. */
int cuda_adamw(cudaStream_t st, float *p, float *m, float *v, const float *grad, int64_t n,
               const float *scale, const int64_t *step, float lr, float b1, float b2, float eps,
               float wd, int warmup, sg_lr_sched sched, float *lr_out);
/* ema = d ema + (1 - d) p: d = decay, or with warm (not NULL) the warm-up decay at the device
 * step (0-based, the step being finished), at most decay; step may be NULL without warm. */
int cuda_ema(cudaStream_t st, float *ema, const float *p, int64_t n, float decay,
             const sg_ema_sched *warm, const int64_t *step);
/* cuda_adamw, then cuda_ema of the updated p, in one vectorised pass (bit for bit the two
 * launches); p_bf16 (NULL: none) receives the updated p rounded to bf16 (the plan's bf16 weight
 * copy). The fp32 regions must be 16-byte aligned, p_bf16 8-byte aligned (arena offsets are);
 * any n. */
int cuda_adamw_ema(cudaStream_t st, float *p, float *m, float *v, float *ema, uint16_t *p_bf16,
                   const float *grad, int64_t n, const float *scale, const int64_t *step, float lr,
                   float b1, float b2, float eps, float wd, int warmup, sg_lr_sched sched,
                   float *lr_out, float decay, const sg_ema_sched *warm);
/* step[0] += 1 (the last node of a training step; no CPU counterpart needed). */
int cuda_step_increment(cudaStream_t st, int64_t *step);
/* watch: step + 1 of the first step whose loss or gradient sum of squares was not finite
 * (0 while none was); loss_sum += loss. One thread (kernels/cpu: cpu_loss_watch). */
int cuda_loss_watch(cudaStream_t st, const float *loss, const float *sumsq, const int64_t *step,
                    int64_t *watch, float *loss_sum);

/* ---- randomness and data (rng_ops.cu): seed and step are device pointers; i0 (s0, B for the
 * batch) are the global indices of cpu_kernels.h, 0 (s0 = 0, B = N) in one process. */
int cuda_gather_batch(cudaStream_t st, float *x0, const uint8_t *data, int64_t ndata, int H0,
                      int W0, int C, int N, int H, int W, const uint64_t *seed, const int64_t *step,
                      int flip, int64_t B, int64_t s0);
int cuda_sample_timesteps(cudaStream_t st, int32_t *t, int N, int T, const uint64_t *seed,
                          const int64_t *step, uint64_t i0);
/* cpu_gather_labels on the device */
int cuda_gather_labels(cudaStream_t st, int32_t *y, const int32_t *labels, int64_t ndata, int N,
                       int classes, float p, const uint64_t *seed, const int64_t *step, int64_t B,
                       int64_t s0);
int cuda_gaussian(cudaStream_t st, float *eps, int64_t n, const uint64_t *seed, const int64_t *step,
                  uint32_t purpose, uint64_t i0);
/* cpu_noise_offset on the device */
int cuda_noise_offset(cudaStream_t st, float *eps, int64_t n, int64_t per, int C, float s,
                      const uint64_t *seed, const int64_t *step, uint64_t i0, uint64_t q0);
/* cpu_noise_perturb on the device (in place) */
int cuda_noise_perturb(cudaStream_t st, float *eps, int64_t n, float g, const uint64_t *seed,
                       const int64_t *step, uint64_t i0);
int cuda_dropout_fwd(cudaStream_t st, void *y, const void *x, int64_t n, float p,
                     const uint64_t *seed, const int64_t *step, uint32_t purpose, uint64_t i0,
                     int dt);
int cuda_dropout_bwd(cudaStream_t st, void *dx, const void *dy, int64_t n, float p,
                     const uint64_t *seed, const int64_t *step, uint32_t purpose, uint64_t i0,
                     int dt, int accum);

/* ---- the device-resident sampler (sample_step.cu): one denoising step of cpu_sample_step,
 * the step counter k (int64) and the key {seed, first} (uint64[2]) read from device memory;
 * rows[n_rows] is the step table in device memory. x fp32 in place, xt (xt_dt) = x, t[N],
 * x0h fp32 in place (DPM-Solver++(2M)'s x0 history); guided: cpu_sample_step's classifier-free
 * guidance with scale w (xt, eps, t twice as long); phi > 0 (guided only): its guidance rescale, a
 * block per image. */
int cuda_sample_step(cudaStream_t st, float *x, void *xt, int xt_dt, int32_t *t, float *x0h,
                     const void *eps, int eps_dt, const sg_sample_row *rows, int n_rows,
                     const int64_t *k, const uint64_t *key, int N, int64_t per, int T, int guided,
                     double w, double phi);

#ifdef __cplusplus
}
#endif

#endif
