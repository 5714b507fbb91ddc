/* backend.h — one backend interface (a struct of function pointers plus a context), two
 * implementations: the CPU reference (graph/backend_cpu.c) and CUDA (graph/backend_cuda*.c).
 *
 * A backend owns exactly one arena allocation of the plan's size; every tensor lives at
 * arena base + its planned offset. `prepare` allocates everything up front (arena, and the
 * CPU's conversion scratch or the CUDA handles); nothing is allocated while a step runs.
 */
#ifndef SG_BACKEND_H
#define SG_BACKEND_H

#include <stdint.h>
#include <string.h>

#include "graph/dist.h"
#include "planner/engine_table.h"
#include "planner/plan.h"

typedef struct sg_backend sg_backend;

/* The convolution engine (issue 14): `own` is the project's kernels (kernels/cuda/conv.cu,
 * always built, the GPU's reference), `cudnn` the cuDNN engine (kernels/cuda/cudnn_conv.h,
 * built with SG_HAVE_CUDNN), `auto` cuDNN when built with it. Chosen per conv node in the CUDA
 * backend's prepare; the CPU backend has one engine and ignores it. */
enum { SG_CONV_ENGINE_AUTO = 0, SG_CONV_ENGINE_OWN = 1, SG_CONV_ENGINE_CUDNN = 2 };
/* time_node_engine's own side on the Hopper wgmma kernels (a timing choice, not an engine to
 * ask for); the same on the resident-halo kernels (every forward, SG_TC_HALO=all; the stride-1
 * 3x3 data gradients, SG_WG_DGRAD_HALO=1) or per tap (SG_TC_HALO=0, SG_WG_DGRAD_HALO=0),
 * whatever the step's knobs say: the same bits every way, so a GPU times both */
enum { SG_TIME_OWN_WGMMA = 8, SG_TIME_WGMMA_HALO = 9, SG_TIME_WGMMA_PER_TAP = 10 };
/* an attention node (forward or backward) on the GEMM path or the fused kernels (SG_ATTN=gemm |
 * fused), whichever the step runs: each engine its own bits, so this times, it changes nothing */
enum { SG_TIME_ATTN_GEMM = 11, SG_TIME_ATTN_FUSED = 12 };
/* own with the Winograd form of the fp32 3x3 stride-1 forwards and data gradients on (-1 where
 * it does not take the node) or off (the direct tiles), whatever SG_CONV_WINO says: other bits,
 * so this times, it changes nothing */
enum { SG_TIME_OWN_WINO = 13, SG_TIME_OWN_DIRECT = 14 };
/* ... and a node already on the wgmma kernels, timed under schedule s (SG_WG_SCHED_*,
 * planner/engine_table.h): SG_TIME_WGMMA_SCHED + s */
enum { SG_TIME_WGMMA_SCHED = 16 };
/* own on the direct tiles (Winograd off) with their products on the tensor cores (3xTF32,
 * SG_CONV_F32_TC's form; -1 where no tile launch takes the node) or on the CUDA cores' FMAs,
 * whatever SG_CONV_F32_TC says: other bits, so this times, it changes nothing (clear of
 * SG_TIME_WGMMA_SCHED's range, backend_cuda_time.c checks) */
enum { SG_TIME_OWN_TILES_TC = 20, SG_TIME_OWN_TILES_FMA = 21 };
/* the engine table's per-layer choices (planner/engine_table.h) are these engines */
_Static_assert((int)SG_LAYER_OWN == (int)SG_CONV_ENGINE_OWN &&
                   (int)SG_LAYER_CUDNN == (int)SG_CONV_ENGINE_CUDNN,
               "engine table choices are conv engines");
/* "auto" / "own" / "cudnn" <-> SG_CONV_ENGINE_*; parse returns -1 for anything else. */
static inline int sg_conv_engine_parse(const char *s) {
    if (!s) return -1;
    if (!strcmp(s, "auto")) return SG_CONV_ENGINE_AUTO;
    if (!strcmp(s, "own")) return SG_CONV_ENGINE_OWN;
    if (!strcmp(s, "cudnn")) return SG_CONV_ENGINE_CUDNN;
    return -1;
}
static inline const char *sg_conv_engine_name(int e) {
    return e == SG_CONV_ENGINE_OWN ? "own" : e == SG_CONV_ENGINE_CUDNN ? "cudnn" : "auto";
}

struct sg_backend {
    const char *name; /* "cpu" or "cuda" */
    void *ctx;
    /* Data parallel (graph/dist.h): set by the caller BEFORE prepare; NULL in one process.
     * The backend reads the rank (the global offsets of the step's random draws) and runs the
     * plan's OP_ALLREDUCE over it. Not owned: the caller finalizes it after destroy. */
    sg_dist *dist;
    /* The convolution engine asked for (SG_CONV_ENGINE_*), set by the caller BEFORE prepare;
     * 0 (auto) by default. */
    int conv_engine;
    /* Resume: the checkpoint's per-conv-node engine record (its "conv_engines" JSON,
     * sg_exec_ckpt_conv_engines), set BEFORE prepare, or NULL. A backend with several engines
     * gives each conv node the engine recorded for it where it can (CUDA: own stays own, a
     * cuDNN engine is asked for by its index and knobs). Not owned. */
    const char *conv_pins;
    /* Engine tuning only (graph/engine_tune.h): choose each cuDNN convolution's engine by
     * timing, this many runs per candidate (kernels/cuda/cudnn_conv.h, sg_cudnn_set_timing),
     * set BEFORE prepare; 0, the default: the heuristics' first. Its choices reach a training
     * run through the engine table alone. */
    int cudnn_time_reps;
    /* Set by the backend when created: 1 where its own convolutions can run on the Hopper wgmma
     * kernels (CUDA on a compute capability 9.0 device; planner/engine_table.h's SG_TC_WGMMA),
     * so engine tuning times that generation too; 0 otherwise. */
    int conv_wgmma;
    /* Set by the backend when created: 1 where it applies an engine table's step knobs
     * (planner/engine_table.h: sg_step_knobs; CUDA), so engine tuning times them; 0 otherwise. */
    int step_knobs;
    /* Allocate the arena (plan->arena_bytes, zero-filled) and per-plan resources. */
    int (*prepare)(sg_backend *be, const sg_plan *plan);
    /* Host <-> arena copies (offsets in bytes). An upload that writes parameters (any bytes of
     * the parameter region) also writes their bf16 copy when the plan has one
     * (sg_plan_bf16_copy): the copy is round(params) whatever wrote them — initialisation, a
     * checkpoint load or resume, --init-from, a data-parallel broadcast, a test — so no such
     * path can leave the bf16 convs and linears reading stale weights. */
    int (*upload)(sg_backend *be, int64_t offset, const void *src, int64_t bytes);
    int (*download)(sg_backend *be, int64_t offset, void *dst, int64_t bytes);
    /* Run one node of the plan's schedule (eagerly). */
    int (*run_node)(sg_backend *be, const sg_plan *plan, int node);
    /* Run the whole schedule once: one training step. CUDA replays its captured graph. */
    int (*run_step)(sg_backend *be, const sg_plan *plan);
    /* Wait until everything issued has finished. */
    int (*sync)(sg_backend *be);
    /* Timing (tools/bench): ms of each of n whole steps (CUDA: events around each replay),
     * and of each schedule node run eagerly (the per-op breakdown). */
    int (*time_steps)(sg_backend *be, const sg_plan *plan, int n, float *ms);
    int (*time_nodes)(sg_backend *be, const sg_plan *plan, float *ms_per_node);
    /* Optional (CUDA, after the capture): the host time in us of n launches, each on an idle
     * stream, of the step's graph as the libraries captured it, where the launched graph differs
     * (its memset nodes became kernel nodes: kernels/cuda/graph_edit.cu); else us[0] = -1. Each
     * launch runs a step. */
    int (*time_launch_captured)(sg_backend *be, const sg_plan *plan, int n, float *us);
    /* ms of each of reps replays (events around each) of a graph that captures the n
     * schedule nodes `nodes` in that order, each launched as the step launches it: an op
     * family's cost inside a replayed graph, without the eager per-node launch gaps (the
     * per-op breakdown's replay column); all 0 where the nodes launch nothing. The nodes
     * compute on whatever the arena holds: for timing only, the state after it is not a
     * step's. NULL: not available (the CPU backend). */
    int (*time_nodes_replay)(sg_backend *be, const sg_plan *plan, const int *nodes, int n, int reps,
                             float *ms);
    /* The commands of the graph the last time_nodes_replay captured, by type: kernel, memset,
     * memcpy, other (-1 each where unknown): which rows' library calls add memset nodes, which
     * the fourth GPU session found differ with the batch alongside the launch's host time.
     * NULL: not available. */
    void (*last_replay_types)(sg_backend *be, int types[4]);
    /* The wgmma kernels' schedule (planner/engine_table.h: SG_WG_SCHED_*, the same bits every
     * way) for the eager launches and captures that follow; s < 0: the step's own again (the
     * engine tuning's replays of a layer's nodes under the schedule it chose). NULL: no such
     * kernels (the CPU backend). */
    void (*wg_sched)(sg_backend *be, int s);
    /* Measured dense matrix-multiply peak in TFLOP/s for dtype (DT_BF16 or DT_F32), for MFU;
     * 0 where not measured. */
    double (*matmul_peak_tflops)(sg_backend *be, int dtype);
    /* Measured memory bandwidth in GB/s: a device-to-device copy of `bytes` (CUDA; the CPU:
     * memcpy), its bytes read plus written over its time (the median of a few), for the per-op
     * breakdown's memory columns; 0 where not measured. Outside the step: its own buffers,
     * made and freed here. NULL: not available. */
    double (*mem_peak_gbs)(sg_backend *be, int64_t bytes);
    /* The engine that runs node `node` (a conv node: e.g. "own", "gemm" or "cudnn e12k3=1 ws0"; an
     * attention node: "gemm" or "fused"; "" for others), into buf. NULL: one engine (the CPU
     * backend). */
    void (*node_engine)(sg_backend *be, const sg_plan *plan, int node, char *buf, int cap);
    /* ms of node `node` run eagerly on engine `engine` (SG_CONV_ENGINE_OWN, or _CUDNN: the
     * library side, which is cuBLASLt for a 1x1 conv the CUDA backend runs as GEMMs; or
     * SG_TIME_OWN_WGMMA: own on the wgmma kernels; SG_TIME_WGMMA_HALO and _PER_TAP: the same
     * on the resident-halo kernels or per tap, the halo's -1 where no call of the node takes a
     * halo kernel; SG_TIME_WGMMA_SCHED + s: a node on the wgmma kernels under their schedule s,
     * the same bits; SG_TIME_ATTN_GEMM or _FUSED: an attention node on that engine), or -1 when
     * that engine cannot run it (tools/bench's per-layer tables, the engine tuning's passes).
     * NULL: not available. */
    int (*time_node_engine)(sg_backend *be, const sg_plan *plan, int node, int engine, float *ms);
    /* ms of one plain dense GEMM, row-major C[m][n] = A[m][k] B[n][k]^T with operands and C of
     * dtype (DT_BF16 or DT_F32) and fp32 accumulation, on the backend's GEMM library (CUDA:
     * cuBLASLt on the plan's library workspace, operands in one temporary device allocation
     * made and freed here, never the arena): what a convolution's implicit GEMM of that size
     * is compared with (tools/bench's per-layer table). Outside the step: it changes nothing
     * the step computes. NULL: not available (the CPU backend). */
    int (*time_gemm)(sg_backend *be, const sg_plan *plan, int64_t m, int64_t n, int64_t k,
                     int dtype, float *ms);
    /* The GEMM library's algorithms chosen by measurement (bench --tune-engines: the engine
     * table's "gemms"): after a step ran, every GEMM the step pinned is timed on each of the
     * library's candidate algorithms (reps runs each, on scratch operands of its shape), and
     * its pick goes into t (sg_engine_table_set_gemm): the fastest where it is at least
     * min_gain (a fraction) faster than the heuristic's first, else the first. Sets *timed to
     * the GEMMs timed. Outside the step: it changes nothing the step computes (a run that
     * gives t pins its picks, sg_blas_prefer). NULL: not available (the CPU backend). */
    int (*tune_gemms)(sg_backend *be, const sg_plan *plan, int reps, double min_gain,
                      sg_engine_table *t, int *timed);
    /* Environment description for checkpoints: device name, SM count, library versions. */
    void (*describe)(sg_backend *be, char *buf, int cap);
    void (*destroy)(sg_backend *be);
};

/* The elements [*i0, *i0 + *n) of a parameter region of n_params fp32 values at param_off that an
 * upload of [off, off + bytes) writes (partly written values included); 0 when it writes none
 * or there is no region (n_params 0). The backends' uploads refresh those elements' copy. */
static inline int sg_backend_param_span(int64_t param_off, int64_t n_params, int64_t off,
                                        int64_t bytes, int64_t *i0, int64_t *n) {
    const int64_t lo = off > param_off ? off : param_off;
    const int64_t end = param_off + 4 * n_params, hi = off + bytes < end ? off + bytes : end;
    if (n_params <= 0 || hi <= lo) return 0;
    *i0 = (lo - param_off) / 4;
    *n = (hi - param_off + 3) / 4 - *i0;
    return 1;
}

/* The CUDA backend's environment knobs, SG_N_CUDA_ENV_KNOBS names in order: every
 * getenv("SG_...") of graph/backend_cuda*.c and kernels/cuda/ (tests/test_train_cli.sh holds the
 * list to them). The CPU backend names the ones set as ignored; the CUDA backend's record
 * (describe's "env_knobs") gives the ones set with their values, so that a measurement says
 * what it ran. */
#define SG_N_CUDA_ENV_KNOBS 21
extern const char *const sg_cuda_env_knobs[SG_N_CUDA_ENV_KNOBS];

/* The CPU reference backend. */
sg_backend *sg_backend_cpu_create(void);
/* The threads its kernels use: SG_CPU_THREADS when set, else the CPUs this process may run on
 * (its affinity mask), shared out once prepared among the data-parallel ranks whose masks
 * overlap it (sg_dist's cpu_sharers). The bits never depend on it. */
int sg_backend_cpu_threads(void);
/* The CUDA backend on device `dev`; NULL (with sg_last_error) when there is no usable GPU or
 * the build has no CUDA. `use_graph`: capture the step into a CUDA graph after one eager
 * warm-up step (0: run every step eagerly, for verification). */
sg_backend *sg_backend_cuda_create(int dev, int use_graph);
/* Is a CUDA device present (and the build able to use it)? */
int sg_cuda_available(void);
/* Visible CUDA devices (0 without CUDA): data-parallel ranks pick local_rank % count. */
int sg_cuda_device_count(void);

#endif
