/* engine_tune.h — measuring the per-layer conv engine table (planner/engine_table.h; issue 17,
 * item 3): what `bench --tune-engines` runs, in graph/ so that the tests run it on the CPU
 * backend and on the host emulation of the CUDA backend.
 *
 * The step of cfg is planned twice, on a fresh backend each: every conv layer `own` (the fused
 * plan on the own kernels) and every layer `cudnn` (nothing fused into a conv; cuDNN wherever
 * the backend can run it). Each is warmed up, then every schedule node is timed eagerly
 * (`time_nodes`) `iters` times, and each node is charged to a conv layer (a layer's time: on a
 * backend that can replay (CUDA: time_nodes_replay), the median of `iters` replays of its
 * charged nodes captured as one graph, the cost inside a replayed step without the eager
 * launch gaps; elsewhere the sum of its nodes' eager medians): its conv
 * nodes (forward, backward-data, backward-weight, every micro-batch; a conv2d_sc's to conv2,
 * an upconv2d's to the upsampler's conv), and the normalisation or nearest upsample whose
 * output only that layer's convs read, with its recomputation and backward nodes. The layers
 * are the unfused plan's; a folded pair (conv2 and its shortcut, one conv2d_sc in the fused
 * plan) is chosen together, on the sum of both. So a fusion site's two whole alternatives are
 * compared: stats-only GroupNorm and a conv computing the normalised operand in its load,
 * against GroupNorm with its apply pass, a cuDNN conv and the recomputation before the weight
 * gradient. A layer gets `cudnn` iff every one of its conv nodes ran on the library side in the
 * second plan (`node_engine`: cuDNN, or the CUDA backend's cuBLASLt GEMMs for a 1x1 conv) and
 * its charged time there is lower; otherwise `own`, with cudnn_ms < 0 where cuDNN did not run
 * it (a backend or build without cuDNN: nothing is invented). With cudnn_time_reps, the cuDNN
 * alternative picks each convolution's cuDNN engine by timing its deterministic candidates
 * (cudnn_conv.h), and a cudnn layer's entry records the engine of each pass, which every run
 * given the table asks for. Last (gemm_reps), the step of the chosen table is planned once more
 * and warmed up, and each of its GEMMs is timed on every candidate algorithm of the backend's
 * GEMM library (the CUDA backend: cuBLASLt), the pick recorded per GEMM ("gemms"): the GEMMs a
 * run given the table pins are those of that plan. Then (knob_steps) the table's whole step is
 * replayed with each of the step knobs that leave the bits alone (PDL, the halo forwards, the
 * statistics' epilogues), and the fastest values go into the table ("knobs"). The timings
 * never reach a training run except through the table file it writes.
 */
#ifndef SG_ENGINE_TUNE_H
#define SG_ENGINE_TUNE_H

#include <stdio.h>

#include "graph/backend.h"
#include "planner/engine_table.h"

typedef struct {
    /* a fresh backend per plan (conv_engine is set to auto here: the table decides) */
    sg_backend *(*make_backend)(const void *ctx);
    const void *ctx;
    const uint8_t *pixels; /* the dataset cfg's data_n/h/w describe, uploaded to each plan */
    int64_t pixel_bytes;
    const int32_t *labels; /* its labels (a class-conditional cfg), or NULL */
    int warmup, iters;     /* untimed steps first; per-node timing passes (median), >= 1 */
    /* the cuDNN alternative's engines chosen by timing, this many runs per candidate
     * (sg_backend.cudnn_time_reps), recorded per layer and pass in the table; 0: the
     * heuristics' first, recorded as none */
    int cudnn_time_reps;
    /* the GEMMs' algorithms (backend.h: tune_gemms) timed in a last plan, the chosen table's,
     * this many runs per candidate, and recorded in the table ("gemms"): the fastest where it
     * beats the heuristic's first by gemm_min_gain (a fraction), else the first; 0: not timed,
     * none recorded (every run pins the heuristic's first) */
    int gemm_reps;
    double gemm_min_gain;
    /* the step's knobs that leave the bits alone (sg_step_knobs), on a backend that applies
     * them (be->step_knobs), chosen last, one at a time: the chosen table's step replayed
     * knob_steps times (median) with each value of a knob the environment leaves unset, the
     * value kept where it is knob_min_gain (a fraction) faster than the best so far; 0: none
     * timed, the backend's defaults. The same margin decides a layer's own wgmma schedule
     * (sg_engine_entry.wg_sched) against the table's on its nodes, before the step tries them. */
    int knob_steps;
    double knob_min_gain;
    /* called once the layers are chosen, before the GEMM and knob passes (t complete but for
     * those), or NULL: bench writes the table so far, so that a tuning cut short (a device
     * call's time limit) still leaves the layers' choice; an error stops the tuning */
    int (*chosen)(const sg_engine_table *t, const void *ctx);
    uint64_t seed;
    FILE *progress; /* a line per plan, or NULL */
} sg_engine_tune_opts;

/* The conv layer a node's time is charged to (name into layer, SG_NAME_MAX bytes): 0, or -1
 * for a node charged to none (it runs the same in both plans). */
int sg_engine_tune_charge(const sg_graph *g, int node, char *layer);
/* Measure the table for cfg (its engines ignored) into t (initialised here; the caller frees
 * it, also on failure): each layer's own alternative on mma.sync, and on the wgmma kernels where
 * the backend has them (be->conv_wgmma, bf16), and its cuDNN alternative; the fastest kept. Header:
 * model, precision, per-pass batch, the backend's name and, from its describe(), the device, driver
 * and cuDNN version. */
int sg_engine_tune(const sg_model_cfg *cfg, const sg_engine_tune_opts *o, sg_engine_table *t);

#endif
