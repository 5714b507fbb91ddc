/* engine_table.h — the per-layer convolution engine table (issue 17, item 3): for every conv
 * layer of a model, `own` (stepgraph's kernels, with the GroupNorm + SiLU before it fused into
 * the conv where the fused kernels take it) or `cudnn` (cuDNN, with that normalisation written
 * to memory as a separate pass), measured once on a GPU (bench --tune-engines) and read back by
 * every run that gives the file (--engine-table): the same table, the same plan and bits. An own
 * layer also names its tensor-core generation (mma.sync or wgmma), and a cudnn layer may send
 * single passes to own where they measured faster there; both are the CUDA backend's alone.
 *
 * A layer is named by its weight's module path ("down_blocks.0.resnets.1.conv1"): the forward,
 * backward-data and backward-weight nodes of a layer, in every micro-batch, share it. The
 * planner applies the table (planner/fuse.c: a normalisation read by a `cudnn` layer is not
 * fused) and checks it against the model (sg_engine_table_check); the CUDA backend reads each
 * node's choice (sg_engine_table_node). The JSON form is read and written by
 * graph/engine_table_io.h (the planner holds no JSON library). docs/design-notes.md has the
 * decisions.
 */
#ifndef SG_ENGINE_TABLE_H
#define SG_ENGINE_TABLE_H

#include "planner/ir.h"
#include "planner/model.h"

/* The attention engines (sg_engine_table.attn). */
enum { SG_ATTN_GEMM = 0, SG_ATTN_FUSED = 1 };

/* A layer's choice: the values of graph/backend.h's SG_CONV_ENGINE_OWN / _CUDNN (a static
 * assert there keeps them equal). 0: no choice (no table, or not a conv node). */
enum { SG_LAYER_OWN = 1, SG_LAYER_CUDNN = 2 };
/* An own layer's tensor-core generation (the bf16 convolutions): mma.sync (kernels/cuda/conv_tc.cu,
 * sm_80 and later, the default) or the Hopper wgmma kernels (conv_wgmma.cu, compute capability
 * 9.0 only). Different kernels, different summation orders: other bits, so the table pins it. */
enum { SG_TC_MMA = 0, SG_TC_WGMMA = 1 };

/* The wgmma kernels' schedule, a bitmask: persistent grids (PERSIST: SG_WG_PERSIST=1, a block
 * per SM walking the tiles) and the N tile that fills the SMs (FILL: SG_WG_FILL=1). Neither
 * changes a bit (kernels/cuda/conv_wgmma.cu), only the speed, so a table's schedule is measured
 * and kept with it but is not part of its hash. */
enum { SG_WG_SCHED_PERSIST = 1, SG_WG_SCHED_FILL = 2, SG_WG_SCHEDS = 4 };

/* The step's schedule knobs that leave every bit alone (the CUDA backend's SG_PDL, SG_TC_HALO,
 * SG_TC_DGRAD_STATS, SG_FUSE_STATS, SG_NORM_ONEPASS), as the tuning chose them by timing the
 * replayed step (sg_engine_table.knobs). SG_KNOB_UNSET: the backend's default. Values: pdl 0/1;
 * tc_halo SG_KNOB_HALO_*; dgrad_stats 0/1; fuse_stats SG_KNOB_STATS_* (the directions whose
 * statistics' partials come from the conv epilogues); norm_onepass SG_KNOB_STATS_* too (the
 * directions whose normalisations run one pass: SG_NORM_ONEPASS_FWD / _BWD's bits). */
enum { SG_KNOB_UNSET = -1 };
enum { SG_KNOB_HALO_PROLOGUE = 0, SG_KNOB_HALO_NONE = 1, SG_KNOB_HALO_ALL = 2 };
enum {
    SG_KNOB_STATS_NONE = 0,
    SG_KNOB_STATS_FWD = 1,
    SG_KNOB_STATS_BWD = 2,
    SG_KNOB_STATS_BOTH = 3
};
/* The CUDA backend's value of a directions knob that neither the environment nor a table sets:
 * both backend and tuning read these (the tuning trials every other value, so a table never
 * records a default). fuse_stats: both directions; norm_onepass: the forward, which the third
 * GPU session timed fastest (19.830 against 20.399 ms for neither). */
enum {
    SG_KNOB_FUSE_STATS_DEFAULT = SG_KNOB_STATS_BOTH,
    SG_KNOB_NORM_ONEPASS_DEFAULT = SG_KNOB_STATS_FWD
};
typedef struct {
    int pdl, tc_halo, dgrad_stats, fuse_stats, norm_onepass;
    /* measured: the replayed step with the backend's defaults and with these knobs; < 0: not
     * measured */
    double base_ms, step_ms;
} sg_step_knobs;

/* A conv node's pass, the index of an entry's cuDNN engine names: forward, backward-data,
 * backward-filter (sg_conv_pass_of). */
enum { SG_CONV_PASS_FWD = 0, SG_CONV_PASS_BWD_DATA = 1, SG_CONV_PASS_BWD_FILTER = 2 };
/* The longest cuDNN engine name kept (kernels/cuda/cudnn_conv.h, sg_cudnn_engine_name). */
#define SG_ENGINE_NAME_MAX 160

typedef struct {
    char layer[SG_NAME_MAX];
    int engine;      /* SG_LAYER_OWN or SG_LAYER_CUDNN */
    double own_ms;   /* measured: the layer's whole own alternative per step; < 0: not measured */
    double cudnn_ms; /* the whole cuDNN alternative; < 0: not measured or cuDNN unavailable */
    /* an own layer's tensor-core generation (SG_TC_*): the faster of the two where both were
     * measured; wgmma_ms the own alternative on the wgmma kernels (own_ms then is mma.sync's),
     * < 0: not measured (no Hopper GPU, or fp32) */
    int tc;
    double wgmma_ms;
    /* a cudnn layer's cuDNN engine per pass (SG_CONV_PASS_*), as a timed tuning run chose it
     * ("e4k24=27+bias ws0"), or "": the backend's own choice (the heuristics' first). The CUDA
     * backend asks for these before it chooses (sg_cudnn_prefer), so a table carries the timed
     * choice to every run that gives it, and no run's bits depend on a timing of its own. */
    char cudnn[3][SG_ENGINE_NAME_MAX];
    /* a cudnn layer's passes (SG_CONV_PASS_*) that run on the own kernels all the same: the
     * tuning timed that pass's nodes, in the plan where the layer's input is stored, on both
     * sides and own was faster (its input stays stored: the layer is still cudnn to the
     * planner). pass_own_ms / pass_lib_ms: those times, < 0 where not measured. */
    unsigned char pass_own[3];
    double pass_own_ms[3], pass_lib_ms[3];
    /* such a pass's tensor-core generation (SG_TC_*): wgmma where the tuning timed the pass's
     * nodes faster on the wgmma kernels than on mma.sync (pass_own_ms is then the wgmma time,
     * the better own side); pass_wgmma_ms: the wgmma time of every pass it measured, < 0 where
     * not measured (no Hopper GPU, fp32, or a node the wgmma kernels do not take) */
    unsigned char pass_tc[3];
    double pass_wgmma_ms[3];
    /* the layer's own wgmma schedule (SG_WG_SCHED_*) for its nodes on the wgmma kernels, where
     * the tuning found one faster on the layer than the table's (sg_engine_table.wg_sched) and
     * the whole step with every such layer's faster too; -1: the table's. wg_sched_ms: the
     * layer's wgmma nodes' medians summed under each schedule (< 0: not measured). Not in the
     * hash (the same bits every way). */
    int wg_sched;
    double wg_sched_ms[SG_WG_SCHEDS];
    /* an own layer's fp32 3x3 stride-1 passes as Winograd F(2x2, 3x3) (1; kernels/cuda/
     * conv_wino.cu) or on the direct tiles (0, the default): Winograd where the tuning timed the
     * layer's passes that it takes faster that way. wino_ms: those passes' medians summed, [0] on
     * the direct tiles, [1] as Winograd, < 0 not measured. The CUDA backend's SG_CONV_WINO
     * overrides it. Other kernels, other bits: in the hash where on. */
    int wino;
    double wino_ms[2];
    /* an own layer's fp32 direct tiles with their products on the tensor cores (1; three TF32
     * products each, fp32 accuracy: kernels/cuda/conv.cu's conv_tile_mma3) or on the CUDA cores
     * (0, the default), for its passes that the tiles take (those on Winograd are Winograd's).
     * f32tc_ms: those passes' medians summed, [0] on the CUDA cores, [1] on the tensor cores, < 0
     * not measured; where measured, wino_ms[0] is the Winograd passes' time in the chosen form.
     * The CUDA backend's SG_CONV_F32_TC overrides it. Other bits: in the hash where on. */
    int f32tc;
    double f32tc_ms[2];
} sg_engine_entry;

/* A GEMM's cuBLASLt algorithm, as the tuning chose it by timing (the CUDA backend's GEMMs:
 * 1x1 convs on its gemm engine, attention, linear layers). A GEMM is named by its key
 * (kernels/cuda/cuda_kernels.h: sg_blas_key_text; SG_GEMM_KEY_MAX is its SG_BLAS_KEY_MAX), the
 * algorithm by its id (sg_blas_algo_id). Another algorithm may sum in another order: other
 * bits, so the picks are part of the table's hash. */
#define SG_GEMM_KEY_MAX 256
typedef struct {
    char key[SG_GEMM_KEY_MAX];
    uint64_t algo;
    /* measured: the algorithm's time and the heuristic's first's (the one pinned without a
     * table); < 0: not measured */
    double ms, first_ms;
} sg_gemm_pick;

typedef struct sg_engine_table {
    /* what it was measured for: checked against the config (sg_engine_table_check) */
    char model[32], precision[8];
    int batch; /* the per-pass batch: the samples one forward pass sees (sg_model_micro_batch) */
    /* where it was measured (informational: a table may be used on another GPU) */
    char device[128], driver[64], cudnn[64], backend[16];
    int n, cap;
    sg_engine_entry *e;
    uint64_t hash; /* sg_engine_table_hash: of the choices alone */
    /* the wgmma kernels' schedule for the whole step (SG_WG_SCHED_*), the fastest of the
     * SG_WG_SCHEDS the tuning timed on the wgmma plan's wgmma nodes (wg_sched_ms: the sum of
     * those nodes' medians under each, < 0: not measured); the CUDA backend applies each of its
     * two knobs that the environment (SG_WG_PERSIST, SG_WG_FILL) leaves unset. Then, where the
     * chosen table runs any node on wgmma, the whole replayed step under each schedule
     * (wg_sched_step_ms, < 0: not timed; the knob trials, sg_step_knobs): another schedule
     * replaces the per-node choice where its step is knob_min_gain faster. */
    int wg_sched;
    double wg_sched_ms[SG_WG_SCHEDS], wg_sched_step_ms[SG_WG_SCHEDS];
    /* the whole replayed step with the layers' own schedules (sg_engine_entry.wg_sched, tried
     * after the table's: all at once, then, where that is not kept, each group of the layers
     * that picked one schedule, on top of the groups kept before it): the step with those kept,
     * or all at once where none is; < 0 not timed. Layers keep theirs only where their step was
     * knob_min_gain faster than the step before */
    double wg_layers_step_ms;
    /* the step's knobs that leave the bits alone (sg_step_knobs; not in the hash): the CUDA
     * backend applies each one the environment leaves unset */
    sg_step_knobs knobs;
    /* the attention engine of the whole step (the CUDA backend's SG_ATTN, which overrides it):
     * SG_ATTN_GEMM (the backend's default) or SG_ATTN_FUSED, as the tuning chose it from the
     * step's attention nodes timed on both (attn_ms: their sums, gemm then fused, over the nodes
     * the fused kernels take; < 0 not measured). Other kernels, other bits: in the hash where
     * fused. */
    int attn;
    double attn_ms[2];
    /* the GEMMs' algorithms (sg_engine_table_set_gemm), in the order the tuned step pinned them */
    int ngemm, gemm_cap;
    sg_gemm_pick *gemm;
} sg_engine_table;

void sg_engine_table_init(sg_engine_table *t);
void sg_engine_table_free(sg_engine_table *t);
/* Append a layer (SG_ERR on a duplicate name, an unknown engine or out of memory). */
int sg_engine_table_add(sg_engine_table *t, const char *layer, int engine, double own_ms,
                        double cudnn_ms);
/* Set an own layer's tensor-core generation (SG_TC_*) and its wgmma time (< 0: not measured), and
 * rehash. SG_ERR for an unknown layer, a bad generation, or wgmma on a cudnn layer. */
int sg_engine_table_set_tc(sg_engine_table *t, const char *layer, int tc, double wgmma_ms);
/* Set a cudnn layer's pass (SG_CONV_PASS_*) to run on own (own 1) or its library side (0), with
 * the pass's measured times (< 0: not measured), and rehash. SG_ERR for an unknown layer, a bad
 * pass, or own on a layer that is not cudnn (an own layer runs every pass on own). */
int sg_engine_table_set_pass(sg_engine_table *t, const char *layer, int pass, int own,
                             double own_ms, double lib_ms);
/* Set a cudnn layer's pass (SG_CONV_PASS_*) tensor-core generation on own (SG_TC_*) and its
 * measured wgmma time (< 0: not measured), and rehash. SG_ERR for an unknown layer, a bad pass
 * or generation, or wgmma for a pass that does not run on own (sg_engine_table_set_pass). */
int sg_engine_table_set_pass_tc(sg_engine_table *t, const char *layer, int pass, int tc,
                                double wgmma_ms);
/* Set a layer's own wgmma schedule (SG_WG_SCHED_*, -1: the table's) and, where ms is not NULL,
 * its SG_WG_SCHEDS measured times (< 0: not measured). SG_ERR for an unknown layer or a bad
 * schedule. Not in the hash. */
int sg_engine_table_set_sched(sg_engine_table *t, const char *layer, int sched, const double *ms);
/* Set an own layer's Winograd choice (wino 0 or 1) with its passes' measured sums (direct_ms,
 * wino_ms; < 0 not measured), and rehash. SG_ERR for an unknown layer, Winograd on a layer that
 * is not own, or on a bf16 table (the Winograd kernels are fp32 alone). */
int sg_engine_table_set_wino(sg_engine_table *t, const char *layer, int wino, double direct_ms,
                             double wino_ms);
/* Set an own layer's fp32 tiles' product form (f32tc 1: the tensor cores, 0: the CUDA cores)
 * with its passes' measured sums (fma_ms, tc_ms; < 0 not measured), and rehash. SG_ERR as
 * sg_engine_table_set_wino's (the tensor-core form of the tiles is taken for fp32 tables alone). */
int sg_engine_table_set_f32tc(sg_engine_table *t, const char *layer, int f32tc, double fma_ms,
                              double tc_ms);
/* What an own entry's fp32 forms (f32tc, wino) save on its own_ms, which the tuning measured with
 * every pass on the direct tiles' CUDA-core form: 0 where neither is on or measured. */
double sg_engine_entry_form_saving(const sg_engine_entry *e);
/* Set a layer's cuDNN engine name of a pass (SG_CONV_PASS_*; "" clears it) and rehash. SG_ERR
 * for an unknown layer, a bad pass or a name too long. */
int sg_engine_table_set_cudnn(sg_engine_table *t, const char *layer, int pass, const char *name);
/* Set the algorithm (its id) of the GEMM of this key, with its time and the heuristic's first's
 * (< 0: not measured), replacing an earlier one, and rehash. SG_ERR for an empty key or one
 * longer than SG_GEMM_KEY_MAX - 1. */
int sg_engine_table_set_gemm(sg_engine_table *t, const char *key, uint64_t algo, double ms,
                             double first_ms);
/* Set the step's attention engine (SG_ATTN_*) with the two sums it was chosen from (ms: gemm,
 * fused; < 0 not measured), and rehash. SG_ERR for an unknown engine. */
int sg_engine_table_set_attn(sg_engine_table *t, int attn, double gemm_ms, double fused_ms);
/* The pick for a GEMM key; NULL when the table (which may be NULL) has none. */
const sg_gemm_pick *sg_engine_table_gemm(const sg_engine_table *t, const char *key);
/* FNV-1a over "layer=own|cudnn;" of the entries sorted by layer name, each cudnn layer's engine
 * names (where set) after its choice as "pass:name;", an own layer's "tc:wgmma;" where it says
 * wgmma (a table without wgmma hashes as before the generation existed), a cudnn layer's
 * passes on own as "own:pass;" (and "wg:pass;" for such a pass on wgmma), an own layer's
 * "wino;" where it says Winograd and "f32tc;" where its tiles are on the tensor cores (a table
 * without them hashes as before), then the GEMM picks
 * sorted by key as "gemm:key=<algo id, 16 hex digits>;" (none: nothing), then "attn:fused;"
 * where the attention engine is fused (gemm: nothing): two tables with the same
 * choices hash alike whatever their order, timings or device. Stored in t->hash (kept current by
 * sg_engine_table_add and _set_cudnn) and returned. */
uint64_t sg_engine_table_hash(sg_engine_table *t);
/* A layer's entry; NULL when the table (which may be NULL) has no such layer. */
const sg_engine_entry *sg_engine_table_find(const sg_engine_table *t, const char *layer);
/* The choice for a layer name; 0 when the table has no such layer. */
int sg_engine_table_layer(const sg_engine_table *t, const char *layer);
/* The conv layer of conv node `node` (forward or backward, any micro-batch): its weight
 * parameter's id, the layer name (the weight's name without ".weight") into name
 * (SG_NAME_MAX bytes); -1 for a node that is not a convolution or is one of no layer (the
 * backward passes of a conv2d_sc, whose forward only the own kernels run). */
int sg_conv_layer_of(const sg_graph *g, int node, char *name);
/* The conv layers forward node `node` computes, named as sg_conv_layer_of names them, into
 * names[0..1]: one for conv2d, conv2d_add and upconv2d (the nearest upsample inside the
 * upsampler's conv), two for conv2d_sc (conv2's, then the folded shortcut's); 0 for any other
 * node (backward nodes included). A table lists every layer of the unfused plan, which the
 * fused forms cover; the planner fuses a conv2d_sc or an upconv2d only where the table sends
 * none of its layers to cudnn (planner/unet.c): those forms run on the own kernels alone. */
int sg_conv_layers_computed(const sg_graph *g, int node, char names[2][SG_NAME_MAX]);
/* The layer conv-like node `node` (any pass, the fused forms and a folded shortcut's backward
 * passes included) is charged to: the first of those its forward computes
 * (sg_conv_layers_computed of the node, or of its forward), into layer (SG_NAME_MAX bytes).
 * 0 where there is one, -1 otherwise. The one rule of the tuning's charges and the table's
 * per-node schedule. */
int sg_conv_layer_charged(const sg_graph *g, int node, char *layer);
/* Does the CUDA backend's `auto` run conv node `node` on its gemm engine (cuBLASLt GEMMs,
 * graph/backend_cuda_engines.c): a 1x1 stride-1 unpadded conv pass whose operand a fused prologue
 * would normalise (x of the forward and of the weight gradient) is stored. The one rule, shared by
 * the backend and `plan`. */
int sg_conv_gemm_node(const sg_graph *g, int node);
/* Does the CUDA backend's `auto` put conv node `node` on own by its F32_OWN rule (where no
 * engine table names the layer, graph/backend_cuda_engines.c): an fp32 pass, not a gemm node, whose
 * input x is 32 x 32 or larger (the fourth GPU session: cuDNN's deterministic fp32 engines up
 * to 36x slower there). The one rule, shared by the backend and `plan`. */
int sg_conv_f32_own_node(const sg_graph *g, int node);
/* The pass of a conv op (SG_CONV_PASS_*), -1 for other ops. */
int sg_conv_pass_of(int op);
/* The table's entry of conv node `node`'s layer; NULL without a table or for other nodes. */
const sg_engine_entry *sg_engine_table_entry_of(const sg_engine_table *t, const sg_graph *g,
                                                int node);
/* The table's choice for conv node `node`; 0 without a table or for other nodes. */
int sg_engine_table_node(const sg_engine_table *t, const sg_graph *g, int node);
/* Does the table run conv node `node` on own although its layer is cudnn (its pass's
 * pass_own)? 0 without a table, for other nodes and for other layers. */
int sg_engine_table_node_pass_own(const sg_engine_table *t, const sg_graph *g, int node);
/* The tensor-core generation the table gives conv node `node` (SG_TC_WGMMA only for a layer
 * whose entry says own and wgmma, or a cudnn layer's pass on own that says wgmma (pass_tc);
 * SG_TC_MMA otherwise, without a table included). The backward passes of a folded shortcut
 * (conv2d_sc), which belong to no layer, take conv2's. */
int sg_engine_table_node_tc(const sg_engine_table *t, const sg_graph *g, int node);
/* Does the table run conv node `node` as Winograd (its layer own and "wino")? 0 without a
 * table, for other nodes and layers. Whether the Winograd kernels take the node's shape is the
 * backend's to say. */
int sg_engine_table_node_wino(const sg_engine_table *t, const sg_graph *g, int node);
/* Does the table run conv node `node`'s fp32 tiles on the tensor cores (its layer own and
 * "f32tc")? 0 without a table, for other nodes and layers. Whether the tiles take the node is
 * the backend's to say. */
int sg_engine_table_node_f32tc(const sg_engine_table *t, const sg_graph *g, int node);
/* The wgmma schedule the table gives node `node` (SG_WG_SCHED_*): its layer's own
 * (sg_engine_entry.wg_sched) where it has one, else -1 (the table's, or no table). A node's
 * layer is the one the tuning charges it to (sg_conv_layer_charged). */
int sg_engine_table_node_sched(const sg_engine_table *t, const sg_graph *g, int node);
/* Does the table fit the graph built from cfg: model name, precision, and (train: a training
 * step's table is timed at its batch) the per-pass batch; every conv layer the graph computes
 * (sg_conv_layers_computed) in the table and every table layer computed by the graph. SG_ERR
 * with a one-line message otherwise. */
int sg_engine_table_check(const sg_engine_table *t, const sg_graph *g, const sg_model_cfg *cfg,
                          int train);
/* "own" / "cudnn"; parse returns 0 for anything else. */
const char *sg_layer_engine_name(int engine);
int sg_layer_engine_parse(const char *s);
/* The fastest of the wgmma schedules' times ms[SG_WG_SCHEDS] (< 0: not measured): the schedule
 * (SG_WG_SCHED_*) of the least measured time, the lower one on a tie; 0 where none is. */
int sg_wg_sched_best(const double *ms);
/* Schedule s (SG_WG_SCHED_*) in words, the same in every listing: "persistent grid on, N tile
 * that fills the SMs off", or with brief "persistent on, fill off". */
const char *sg_wg_sched_text(int s, int brief);
/* The names of the knobs' values ("prologue" / "none" / "all"; "1" / "fwd" / "bwd" / "0", as
 * SG_TC_HALO and SG_FUSE_STATS take them); parse returns SG_KNOB_UNSET for anything else. */
const char *sg_knob_halo_name(int v);
int sg_knob_halo_parse(const char *s);
const char *sg_knob_stats_name(int v);
int sg_knob_stats_parse(const char *s);
/* The knobs as a line's text: "pdl on, tc_halo all, dgrad_stats default, fuse_stats fwd" */
void sg_step_knobs_text(const sg_step_knobs *k, char *buf, int cap);
/* "mma" / "wgmma"; parse returns -1 for anything else. */
const char *sg_tc_name(int tc);
int sg_tc_parse(const char *s);

#endif
