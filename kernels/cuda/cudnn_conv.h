/* cudnn_conv.h — the cuDNN convolution engine: forward, backward-data and backward-filter
 * through cuDNN's backend (graph) API, each distinct convolution with one deterministic engine
 * configuration chosen once and pinned. Built only with SG_HAVE_CUDNN (CMake SG_CUDNN, on when
 * cuDNN is found); every caller keeps its use behind that guard, and the `own` kernels
 * (conv.cu) are the engine that always exists.
 *
 * Shapes as conv.cu (NHWC, weights [Co][K][K][Ci] in the activations' dtype): x[N,H,W,Ci],
 * w[Co,K,K,Ci], b[Co], y[N,Ho,Wo,Co]; K in {1,3}, S in {1,2}, `pad` (0..K/2) at the top/left
 * and at the bottom/right what the output size Ho = (H + 2 (K/2) - K) / S + 1 needs: DDPM's
 * SAME stride-2 downsample pads 0 before and 1 after, which only the graph API's separate pre-
 * and post-paddings express (the legacy cudnnConvolutionDescriptor is symmetric). Activations
 * fp32 or bf16 (`dt`); compute fp32 always.
 *
 * - bf16: cuDNN wants x and w in one type: w is the plan's bf16 copy of the weights (kept by the
 *   optimizer's pass), read as it is; fp32: no TF32 (engines whose numerical
 *   notes say TENSOR_CORE or DOWN_CONVERT_INPUTS are refused for fp32) unless asked for
 *   (sg_cudnn_allow_tf32).
 * - Deterministic only: every engine configuration whose notes say NONDETERMINISTIC or
 *   REDUCED_PRECISION_REDUCTION is refused, for all three passes.
 * - Chosen once: the first time a descriptor (pass, shapes, dtypes, padding, accumulate, bias,
 *   the pointers' alignments) is seen, heuristics mode A lists the configurations and the first
 *   that passes the filters, whose execution plan finalizes and whose workspace fits the
 *   budget, is kept with its plan; later calls with that descriptor execute that plan. A tuning
 *   run may ask for the choice by timing instead (sg_cudnn_set_timing): the candidates of
 *   heuristics modes A, B and FALLBACK that pass the same filters, each run on the call's
 *   operands, the fastest kept; its names reach training runs only through the engine table
 *   (bench --tune-engines), so no training run's bits depend on a timing. After
 *   sg_cudnn_freeze (the CUDA backend calls it after the eager warm-up step, before capture) a
 *   descriptor not in the table is an error. The table (descriptor, engine global index, knob
 *   choices, workspace) has a hash (sg_cudnn_hash) for describe() and checkpoints.
 * - Workspace: the library workspace of the plan (the arena's cublas_workspace region, 32 MiB:
 *   cuBLAS and cuDNN calls are serialised on the one stream, so they share it). The engine gets
 *   all of it (the budget), less the front a bf16 dw takes in the +dw_bf16 variant of the
 *   backward-filter: nothing is allocated by a step.
 * - Accumulate (`accum`): beta = 1 in the operation, so cuDNN adds in fp32 and rounds once.
 * - Forward bias: first tried fused (conv -> virtual fp32 -> pointwise add of b -> y), so y is
 *   rounded once; when no deterministic engine runs that graph, the conv alone and
 *   *bias_done = 0: the caller adds b with cuda_conv2d_bias_add. Backward-filter: dw is fp32,
 *   written by cuDNN (beta = 1 to accumulate); in bf16, where no deterministic engine writes an
 *   fp32 dw from bf16 operands, cuDNN writes a bf16 dw into the workspace and cuda_copy widens
 *   (and accumulates) it into dw: one bf16 rounding of dw, as PyTorch's autocast has (the
 *   engine name says "+dw_bf16"). db (the call's db, where given) is computed after cuDNN: in the
 *   same launch as that widening, or alone (cuda_conv2d_bwd_bias).
 * - Concatenated (two-buffer) operands are not handled: the CUDA backend runs such nodes on
 *   the own engine (a channel slice of one NHWC tensor is not a concatenation of two).
 *
 * Every cuDNN status is checked; a failure names the call and gives cudnnGetErrorString and
 * cudnnGetLastErrorString. sg_cudnn_probe answers "can cuDNN run this conv" without an error
 * being fatal, so the backend can fall back to the own engine loudly, naming the layer.
 */
#ifndef SG_CUDNN_CONV_H
#define SG_CUDNN_CONV_H

#include <stdint.h>
#include <stdio.h>

#include <cuda_runtime_api.h>

#include "kernels/cuda/cuda_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sg_cudnn sg_cudnn;

typedef enum { SG_CUDNN_FWD = 0, SG_CUDNN_BWD_DATA = 1, SG_CUDNN_BWD_FILTER = 2 } sg_cudnn_pass;

/* One convolution call: the pass and its operands. For SG_CUDNN_FWD: out = y, in = x, w = the
 * weights in dt (fp32, or the plan's bf16 copy), b = bias (fp32) or NULL. BWD_DATA: out = dx,
 * in = dy, w. BWD_FILTER: out = dw (fp32), in = dy, x = the forward input (w unused), and db
 * (fp32, accumulated like dw) = the column sums of dy, where not NULL: computed by the call
 * after cuDNN's, in the launch that widens a bf16 dw (cuda_conv2d_bwd_widen) or alone
 * (cuda_conv2d_bwd_bias), its partials in db_ws[db_ws_bytes] (the kernel workspace: the
 * library one holds the bf16 dw). */
typedef struct {
    int pass;
    int N, H, W, Ci, Co, K, S, pad;
    int dt;    /* activations: DT_F32 or DT_BF16 */
    int accum; /* beta = 1 (backward passes only) */
    void *out;
    const void *in;
    const void *x;
    const void *w;
    const float *b;
    float *db;
    void *db_ws;
    int64_t db_ws_bytes;
} sg_cudnn_conv;

/* A context on stream st with the library workspace ws[ws_bytes] (SG_WS_ALIGN-aligned). */
int sg_cudnn_create(sg_cudnn **out, cudaStream_t st, void *ws, int64_t ws_bytes);
void sg_cudnn_destroy(sg_cudnn *c);
/* Pick (when new and not frozen) and pin the engine of this call's descriptor. SG_OK: cuDNN
 * runs it; SG_ERR with sg_last_error saying why not (no deterministic configuration within the
 * budget, a status from cuDNN). Runs nothing on the GPU (unless timing: sg_cudnn_set_timing). */
int sg_cudnn_probe(sg_cudnn *c, const sg_cudnn_conv *cv);
/* Choose new descriptors' engines by timing (above): reps executions of each candidate in a
 * window of device time of `win` (cuda_kernels.h; it must outlive the timing) after one untimed
 * run; a line per descriptor on log (may be NULL). Only before the first convolution is pinned;
 * reps 0 turns it off. The probe then RUNS each candidate on the call's operands, writing (or
 * with accumulate, adding to) its output: for tuning runs, whose step writes every output
 * afresh. */
int sg_cudnn_set_timing(sg_cudnn *c, int reps, sg_cuda_window *win, FILE *log);
/* Run the call (probing first when new). *bias_done (forward with b): 1 when the bias was
 * added in the conv call, 0 when the caller must add it. */
int sg_cudnn_run(sg_cudnn *c, const sg_cudnn_conv *cv, int *bias_done);
/* fp32 convolutions: allow TF32 tensor-core engines (refused unless asked for; the CUDA
 * backend asks when SG_CUDNN_TF32=1). Only before the first convolution is pinned; part of
 * the table's hash. */
void sg_cudnn_allow_tf32(sg_cudnn *c, int allow);
int sg_cudnn_tf32(const sg_cudnn *c);
void sg_cudnn_freeze(sg_cudnn *c);
/* Reuse on resume: ask for the engine a checkpoint recorded for this call's descriptor (its
 * sg_cudnn_engine_name). Before the first convolution is pinned; the descriptor then tries that
 * engine configuration first (same filters, same budget) and, when it cannot be had, says why
 * on stderr and chooses afresh. SG_ERR for a name that does not parse or fit the pass. */
int sg_cudnn_prefer(sg_cudnn *c, const sg_cudnn_conv *cv, const char *engine_name);
/* Preferences given; *met / *missed: those honoured / not (so far). */
int sg_cudnn_preferences(const sg_cudnn *c, int *met, int *missed);
int sg_cudnn_frozen(const sg_cudnn *c);
/* Pinned descriptors, and a hash of the table (descriptors, engines, knobs, workspaces). */
int sg_cudnn_count(const sg_cudnn *c);
uint64_t sg_cudnn_hash(const sg_cudnn *c);
/* "e<global index>[k<type>=<value>...] ws<bytes>" of the engine pinned for this call's
 * descriptor, or "-" when it has none yet. */
void sg_cudnn_engine_name(const sg_cudnn *c, const sg_cudnn_conv *cv, char *buf, int cap);
/* The cuDNN library version (cudnnGetVersion), e.g. 91900. */
size_t sg_cudnn_version(void);
/* The engine budget of the call's plain variant: the library workspace (the +dw_bf16 variant of
 * a bf16 backward-filter has less: its bf16 dw takes the front). */
int64_t sg_cudnn_budget(const sg_cudnn *c, const sg_cudnn_conv *cv);

#ifdef __cplusplus
}
#endif

#endif
