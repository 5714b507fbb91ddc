/* test_engine_table.c — the per-layer conv engine table (issue 17, item 3): its JSON form
 * (graph/engine_table_io.h), the planner applying it (planner/engine_table.h, planner/fuse.c),
 * the tuning run (graph/engine_tune.h), training with it, and checkpoints carrying it.
 *
 * - io: write / read back / parse round trip; the hash depends on the choices alone (order,
 *   timings and device do not change it, one engine does, and so does a cudnn layer's timed
 *   cuDNN engine and an own layer's tensor-core generation); malformed tables refused, naming
 *   what is wrong.
 * - plan: a table with every layer own plans the fusions of no table; a layer chosen cudnn keeps
 *   the normalisation it reads stored (and recomputed in the backward pass), every other site
 *   stays fused, the plan's fused counts and bytes follow; a table for another model,
 *   precision or batch, with an unknown or a missing layer, is refused.
 * - tune: the tuning run on this backend lists every conv layer once, measures own (on the CUDA
 *   backend of compute capability 9.0 on both generations, the faster kept), and marks
 *   cuDNN unavailable (no backend here has it: cudnn_ms null, the layer own) except where the
 *   CUDA backend's library side is its gemm engine (the 1x1 layers: measured, the faster side
 *   chosen); no timed cuDNN engine is recorded; its charging puts a normalisation on the layer
 *   that reads it.
 * - train: the step planned with a table gives the bits of the step without one (fused and
 *   unfused are bitwise equal; no cuDNN here), on this backend.
 * - checkpoints: the table is recorded whole and read back; a resume with the checkpoint's table
 *   gives the straight run's bits; a resume that replaces it (may_differ "engine_table") is
 *   planned against the checkpoint's own table and goes on; a plain load with another table, or
 *   none, is refused.
 *
 * - generation (CUDA): an own layer's "tc":"wgmma" puts its conv nodes (a folded shortcut's
 *   backward passes with conv2) on the wgmma kernels and the rest on mma.sync; SG_CONV_TC=mma
 *   overrides it; the wgmma kernels run (the emulation's count), and a resume gives the
 *   straight run's bits.
 *
 * Built twice: on the CPU backend (engine_table) and on the host emulation of the CUDA backend
 * (engine_table_cuda_host, SG_TEST_CUDA_HOST: the real backend_cuda*.c, own engine only).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "graph/engine_table_io.h"
#include "graph/engine_tune.h"
#include "graph/exec.h"
#include "planner/op_dims.h"
#include "tests/sg_test.h"

static sg_backend *make_backend(const void *ctx) {
    (void)ctx;
#ifdef SG_TEST_CUDA_HOST
    /* own: every conv on the own kernels whatever the table (a tuning run sets auto itself), so
     * that a table changes the plan alone: under auto the gemm engine would run the 1x1 convs
     * of an untabled plan and leave a table's own layers on own, other bits */
    sg_backend *be = sg_backend_cuda_create(0, 1);
    if (be) be->conv_engine = SG_CONV_ENGINE_OWN;
    return be;
#else
    return sg_backend_cpu_create();
#endif
}

static sg_model_cfg tiny(void) {
    sg_model_cfg c;
    sg_model_preset(&c, "unet_tiny");
    c.act_dt = DT_BF16;
    c.fuse = 1; /* the table's plans fuse where it says own (sg_model_fuse) */
    c.batch = 2;
    c.data_n = 64;
    c.warmup = 1;
    c.lr = 1e-3f;
    return c;
}

static uint8_t *data_for(const sg_model_cfg *c) {
    const int64_t n = c->data_n * c->data_h * c->data_w * c->in_ch;
    uint8_t *d = malloc((size_t)n);
    uint64_t s = 9;
    for (int64_t i = 0; i < n; i++) d[i] = (uint8_t)(sg_test_next(&s) >> 56);
    return d;
}

/* A table of every conv layer of c's model: cudnn where cudnn(layer) says so, else own (cudnn
 * NULL: all own); made-up timings. */
static int pick_conv1(const char *layer) {
    const size_t n = strlen(layer);
    return n > 6 && !strcmp(layer + n - 6, ".conv1");
}
static void table_for(const sg_model_cfg *c, sg_engine_table *t, int (*cudnn)(const char *)) {
    sg_model_cfg plain = *c;
    plain.engines = NULL;
    plain.fuse = 0; /* the layers of the unfused plan: every conv weight, which fused forms cover */
    sg_plan p;
    sg_engine_table_init(t);
    snprintf(t->model, sizeof t->model, "%s", c->name);
    snprintf(t->precision, sizeof t->precision, "%s", c->act_dt == DT_BF16 ? "bf16" : "fp32");
    t->batch = sg_model_micro_batch(c);
    SG_ASSERT(!sg_plan_build(&p, &plain, 1));
    for (int i = 0; i < p.g.n_forward; i++) {
        char layer[SG_NAME_MAX];
        if (sg_conv_layer_of(&p.g, i, layer) < 0) continue;
        const int e = cudnn && cudnn(layer) ? SG_LAYER_CUDNN : SG_LAYER_OWN;
        SG_ASSERT(!sg_engine_table_add(t, layer, e, 1.0 + i, e == SG_LAYER_CUDNN ? 0.5 : -1));
    }
    sg_plan_free(&p);
}

/* ---- io */
/* A copy of t0 through its JSON text into t (the caller frees it; the text into *text when asked,
 * else freed), and the indices of its first cudnn and first own layer. */
static void io_copy(const sg_engine_table *t0, sg_engine_table *t, char **text, int *dnn,
                    int *own) {
    char *j = sg_engine_table_json(t0);
    SG_ASSERT(j && !sg_engine_table_parse(j, "copy", t));
    if (text)
        *text = j;
    else
        free(j);
    *dnn = *own = -1;
    for (int k = 0; k < t->n; k++) {
        if (t->e[k].engine == SG_LAYER_CUDNN && *dnn < 0) *dnn = k;
        if (t->e[k].engine == SG_LAYER_OWN && *own < 0) *own = k;
    }
    SG_ASSERT(*dnn >= 0 && *own >= 0);
}
/* A timed tuning run's cuDNN engine names (sg_engine_entry.cudnn): part of a cudnn layer's
 * choice (the hash, the diff), kept by the JSON round trip, nothing for an own layer. */
static void check_io_cudnn_names(const sg_engine_table *t0) {
    sg_engine_table t, back;
    int dnn, own;
    io_copy(t0, &t, NULL, &dnn, &own);
    const uint64_t h0 = t.hash;
    CHECK(!sg_engine_table_set_cudnn(&t, t.e[own].layer, SG_CONV_PASS_FWD, "e9 ws0") &&
              t.hash == h0,
          "a cuDNN engine on an own layer changed the hash");
    CHECK(!sg_engine_table_set_cudnn(&t, t.e[dnn].layer, SG_CONV_PASS_BWD_DATA,
                                     "e67k2=0k13=1 ws131") &&
              t.hash != h0,
          "a cudnn layer's timed engine did not change the hash");
    CHECK(sg_engine_table_diff(t0, &t, "(expected) ") == 1, "diff: the timed engine's layer");
    CHECK(sg_engine_table_set_cudnn(&t, "no.such.layer", 0, "e1 ws0") == SG_ERR &&
              sg_engine_table_set_cudnn(&t, t.e[dnn].layer, 3, "e1 ws0") == SG_ERR,
          "set_cudnn: an unknown layer or pass accepted");
    char *text = sg_engine_table_json(&t);
    CHECK(text && !sg_engine_table_parse(text, "text", &back) && back.hash == t.hash &&
              !strcmp(back.e[dnn].cudnn[SG_CONV_PASS_BWD_DATA], "e67k2=0k13=1 ws131") &&
              !back.e[dnn].cudnn[SG_CONV_PASS_FWD][0] &&
              !strcmp(back.e[own].cudnn[SG_CONV_PASS_FWD], "e9 ws0") &&
              strstr(text, "\"cudnn_engines\":{\"bwd_data\":\"e67k2=0k13=1 ws131\"}"),
          "the timed engines' JSON round trip: %s", text ? text : sg_last_error());
    free(text);
    printf("io: timed cuDNN engines in the hash (cudnn layers), the diff and the JSON\n");
    sg_engine_table_free(&t), sg_engine_table_free(&back);
}

/* An own layer's tensor-core generation (sg_engine_entry.tc): part of its choice (the hash, the
 * diff; a table without wgmma hashes as before), kept by the JSON round trip with its time,
 * refused on a cudnn layer. */
static void check_io_tc(const sg_engine_table *t0) {
    sg_engine_table t, back;
    int dnn, own;
    char *text;
    io_copy(t0, &t, &text, &dnn, &own);
    CHECK(!strstr(text, "\"tc\"") && !strstr(text, "wgmma_ms"),
          "a table without wgmma writes a generation: %s", text);
    free(text);
    const uint64_t h0 = t.hash;
    CHECK(t.e[own].tc == SG_TC_MMA && t.e[own].wgmma_ms < 0, "a new entry is not mma, unmeasured");
    CHECK(!sg_engine_table_set_tc(&t, t.e[dnn].layer, SG_TC_MMA, 0.25) && t.hash == h0,
          "mma with a wgmma time on a cudnn layer changed the hash or was refused");
    CHECK(sg_engine_table_set_tc(&t, t.e[dnn].layer, SG_TC_WGMMA, 0.25) == SG_ERR &&
              strstr(sg_last_error(), "own layer's generation"),
          "wgmma on a cudnn layer: %s", sg_last_error());
    CHECK(sg_engine_table_set_tc(&t, "no.such.layer", SG_TC_WGMMA, -1) == SG_ERR &&
              sg_engine_table_set_tc(&t, t.e[own].layer, 7, -1) == SG_ERR,
          "set_tc: an unknown layer or generation accepted");
    CHECK(!sg_engine_table_set_tc(&t, t.e[own].layer, SG_TC_WGMMA, 0.5) && t.hash != h0,
          "an own layer's wgmma did not change the hash");
    CHECK(sg_engine_table_node_tc(&t, NULL, -1) == SG_TC_MMA, "no node: mma");
    CHECK(sg_engine_table_diff(t0, &t, "(expected) ") == 1, "diff: the generation's layer");
    text = sg_engine_table_json(&t);
    CHECK(text && !sg_engine_table_parse(text, "text", &back) && back.hash == t.hash &&
              back.e[own].tc == SG_TC_WGMMA && back.e[own].wgmma_ms == 0.5 &&
              back.e[dnn].tc == SG_TC_MMA && back.e[dnn].wgmma_ms == 0.25 &&
              strstr(text, "\"tc\":\"wgmma\",\"wgmma_ms\":0.5"),
          "the generation's JSON round trip: %s", text ? text : sg_last_error());
    free(text);
    printf("io: an own layer's tensor-core generation in the hash, the diff and the JSON\n");
    sg_engine_table_free(&t), sg_engine_table_free(&back);
}

/* A cudnn layer's passes on own (sg_engine_entry.pass_own): part of its choice (the hash, the
 * diff), kept by the JSON round trip with the pass times, refused on an own layer; an own
 * layer's pass times are a record (no "engine", nothing hashed). */
static void check_io_passes(const sg_engine_table *t0) {
    sg_engine_table t, back;
    int dnn, own;
    char *text;
    io_copy(t0, &t, &text, &dnn, &own);
    CHECK(!strstr(text, "\"passes\""), "a table without pass times writes passes: %s", text);
    free(text);
    const uint64_t h0 = t.hash;
    CHECK(sg_engine_table_set_pass(&t, t.e[own].layer, SG_CONV_PASS_FWD, 1, 0.1, 0.2) == SG_ERR &&
              strstr(sg_last_error(), "a cudnn layer's choice"),
          "a pass on own on an own layer: %s", sg_last_error());
    CHECK(sg_engine_table_set_pass(&t, "no.such.layer", 0, 0, -1, -1) == SG_ERR &&
              sg_engine_table_set_pass(&t, t.e[dnn].layer, 3, 1, -1, -1) == SG_ERR,
          "set_pass: an unknown layer or pass accepted");
    CHECK(!sg_engine_table_set_pass(&t, t.e[own].layer, SG_CONV_PASS_BWD_DATA, 0, 0.375, 0.4375) &&
              !sg_engine_table_set_pass(&t, t.e[dnn].layer, SG_CONV_PASS_BWD_DATA, 0, 0.625, 0.5) &&
              t.hash == h0,
          "pass times alone changed the hash");
    CHECK(!sg_engine_table_set_pass(&t, t.e[dnn].layer, SG_CONV_PASS_FWD, 1, 0.25, 0.75) &&
              t.hash != h0,
          "a cudnn layer's pass on own did not change the hash");
    CHECK(sg_engine_table_diff(t0, &t, "(expected) ") == 1, "diff: the pass's layer");
    text = sg_engine_table_json(&t);
    CHECK(text && !sg_engine_table_parse(text, "text", &back) && back.hash == t.hash &&
              back.e[dnn].pass_own[SG_CONV_PASS_FWD] && !back.e[dnn].pass_own[1] &&
              back.e[dnn].pass_own_ms[0] == 0.25 && back.e[dnn].pass_lib_ms[0] == 0.75 &&
              back.e[dnn].pass_own_ms[1] == 0.625 && back.e[own].pass_lib_ms[1] == 0.4375 &&
              back.e[own].pass_own_ms[2] < 0 &&
              strstr(text, "\"passes\":{\"fwd\":{\"own_ms\":0.25,\"lib_ms\":0.75,\"engine\":"
                           "\"own\"},\"bwd_data\":{\"own_ms\":0.625,\"lib_ms\":0.5,\"engine\":"
                           "\"cudnn\"}}") &&
              strstr(text, "\"passes\":{\"bwd_data\":{\"own_ms\":0.375,\"lib_ms\":0.4375}}"),
          "the passes' JSON round trip: %s", text ? text : sg_last_error());
    free(text);
    sg_engine_table_free(&back);
    /* a pass on own's generation (pass_tc): wgmma only where the pass runs on own; part of the
     * choice; its wgmma time a record everywhere */
    const uint64_t h1 = t.hash;
    CHECK(sg_engine_table_set_pass_tc(&t, t.e[dnn].layer, SG_CONV_PASS_BWD_DATA, SG_TC_WGMMA,
                                      0.3) == SG_ERR &&
              strstr(sg_last_error(), "does not run on own") &&
              sg_engine_table_set_pass_tc(&t, t.e[dnn].layer, SG_CONV_PASS_FWD, 2, 0.3) == SG_ERR,
          "pass_tc: wgmma on a library pass or a bad generation accepted: %s", sg_last_error());
    CHECK(!sg_engine_table_set_pass_tc(&t, t.e[dnn].layer, SG_CONV_PASS_BWD_DATA, SG_TC_MMA,
                                       0.6875) &&
              t.hash == h1,
          "a pass's wgmma time alone changed the hash");
    CHECK(!sg_engine_table_set_pass_tc(&t, t.e[dnn].layer, SG_CONV_PASS_FWD, SG_TC_WGMMA, 0.125) &&
              t.hash != h1,
          "a pass on own's generation did not change the hash");
    sg_engine_table mma_twin;
    text = sg_engine_table_json(&t);
    CHECK(text && !sg_engine_table_parse(text, "text", &back) && back.hash == t.hash &&
              back.e[dnn].pass_tc[SG_CONV_PASS_FWD] == SG_TC_WGMMA &&
              back.e[dnn].pass_wgmma_ms[0] == 0.125 &&
              back.e[dnn].pass_tc[SG_CONV_PASS_BWD_DATA] == SG_TC_MMA &&
              back.e[dnn].pass_wgmma_ms[1] == 0.6875 && back.e[dnn].pass_wgmma_ms[2] < 0 &&
              strstr(text, "\"engine\":\"own\",\"tc\":\"wgmma\",\"wgmma_ms\":0.125}") &&
              strstr(text, "\"engine\":\"cudnn\",\"tc\":\"mma\",\"wgmma_ms\":0.6875}"),
          "the pass generation's JSON round trip: %s", text ? text : sg_last_error());
    free(text);
    text = sg_engine_table_json(&t);
    CHECK(text && !sg_engine_table_parse(text, "text", &mma_twin) &&
              !sg_engine_table_set_pass_tc(&mma_twin, t.e[dnn].layer, SG_CONV_PASS_FWD, SG_TC_MMA,
                                           0.125) &&
              sg_engine_table_diff(&mma_twin, &t, "(expected) ") == 1,
          "diff: a pass on own on another generation");
    free(text);
    const char *bad = "{\"format\":\"stepgraph_engine_table\",\"version\":1,\"model\":\"m\","
                      "\"precision\":\"bf16\",\"batch\":2,\"layers\":[{\"layer\":\"a\","
                      "\"engine\":\"cudnn\",\"passes\":{\"fwd\":{\"engine\":\"cudnn\","
                      "\"tc\":\"wgmma\"}}}]}";
    sg_engine_table bt;
    CHECK(sg_engine_table_parse(bad, "bad", &bt) == SG_ERR &&
              strstr(sg_last_error(), "does not run on own"),
          "a library pass on wgmma parsed: %s", sg_last_error());
    sg_engine_table_free(&bt);
    printf("io: a cudnn layer's passes on own, and their generation, in the hash, the diff and "
           "the JSON; pass times a record\n");
    sg_engine_table_free(&t), sg_engine_table_free(&back), sg_engine_table_free(&mma_twin);
}

/* Parse a one-layer unet_tiny table with one more top-level field ("key":value) and, where
 * layer_field is not NULL, one more field of its layer into t. */
static int parse_with_fields(const char *field, const char *layer_field, sg_engine_table *t) {
    char doc[512];
    snprintf(doc, sizeof doc,
             "{\"format\":\"stepgraph_engine_table\",\"version\":1,\"model\":\"unet_tiny\","
             "\"precision\":\"bf16\",\"batch\":2,%s,\"layers\":[{\"layer\":\"a\","
             "\"engine\":\"own\"%s%s}]}",
             field, layer_field ? "," : "", layer_field ? layer_field : "");
    return sg_engine_table_parse(doc, "text", t);
}
static int parse_with_field(const char *field, sg_engine_table *t) {
    return parse_with_fields(field, NULL, t);
}

/* The wgmma schedule (sg_engine_table.wg_sched, SG_WG_SCHED_*): a table-wide record of the
 * tuning's timing, kept by the JSON round trip, never in the hash (the same bits every way);
 * absent from a table without it; a malformed one refused. */
static void check_io_wg_sched(const sg_engine_table *t0) {
    sg_engine_table t, back;
    int dnn, own;
    char *text;
    io_copy(t0, &t, &text, &dnn, &own);
    CHECK(!strstr(text, "wg_sched") && t.wg_sched == 0 && t.wg_sched_ms[0] < 0,
          "a table without a schedule writes or reads one: %s", text);
    free(text);
    const uint64_t h0 = t.hash;
    t.wg_sched = SG_WG_SCHED_PERSIST | SG_WG_SCHED_FILL;
    const double ms[SG_WG_SCHEDS] = {4.0, 3.5, 3.75, 3.25};
    for (int s = 0; s < SG_WG_SCHEDS; s++) t.wg_sched_ms[s] = ms[s];
    CHECK(sg_engine_table_hash(&t) == h0, "the schedule changed the hash");
    text = sg_engine_table_json(&t);
    sg_engine_table_init(&back);
    int same =
        text && !sg_engine_table_parse(text, "text", &back) && back.hash == h0 &&
        back.wg_sched == t.wg_sched &&
        strstr(text, "\"wg_sched\":{\"persist\":true,\"fill\":true,\"ms\":[4.0,3.5,3.75,3.25]}");
    for (int s = 0; same && s < SG_WG_SCHEDS; s++)
        same = back.wg_sched_ms[s] == ms[s] && back.wg_sched_step_ms[s] < 0;
    CHECK(same, "the schedule's JSON round trip: %s", text ? text : sg_last_error());
    free(text);
    sg_engine_table_free(&back);
    /* ... with the whole step's times where the knob pass timed them (null: one not timed) */
    const double step[SG_WG_SCHEDS] = {20.0, -1, 19.5, 19.75};
    for (int s = 0; s < SG_WG_SCHEDS; s++) t.wg_sched_step_ms[s] = step[s];
    text = sg_engine_table_json(&t);
    sg_engine_table_init(&back);
    same = text && !sg_engine_table_parse(text, "text", &back) && back.hash == h0 &&
           strstr(text, "\"ms\":[4.0,3.5,3.75,3.25],\"step_ms\":[20.0,null,19.5,19.75]}");
    for (int s = 0; same && s < SG_WG_SCHEDS; s++) same = back.wg_sched_step_ms[s] == step[s];
    CHECK(same, "the schedule's step times through the JSON: %s", text ? text : sg_last_error());
    free(text);
    sg_engine_table_free(&back);
    /* malformed: refused with the key's form */
    static const char *const bad[] = {"\"wg_sched\":3",
                                      "\"wg_sched\":{\"persist\":1}",
                                      "\"wg_sched\":{\"ms\":[1,2]}",
                                      "\"wg_sched\":{\"ms\":[1,2,-3,4]}",
                                      "\"wg_sched\":{\"step_ms\":[1,2,3]}",
                                      "\"wg_sched\":{\"step_ms\":[1,\"2\",3,4]}"};
    for (int k = 0; k < SG_ARRAY_LEN(bad); k++) {
        CHECK(parse_with_field(bad[k], &back) == SG_ERR && strstr(sg_last_error(), "wg_sched"),
              "a malformed schedule (%s): %s", bad[k], sg_last_error());
        sg_engine_table_free(&back);
    }
    /* the choice: the least measured time, the fewer knobs on a tie, 0 where none is measured */
    static const double cases[][SG_WG_SCHEDS] = {{4, 3, 2, 1},   {1, 2, 3, 4},     {4, 2, 2, 3},
                                                 {-1, 5, -1, 6}, {-1, -1, -1, -1}, {3, -1, 1, 1}};
    static const int best[] = {3, 0, 1, 1, 0, 2};
    for (int k = 0; k < SG_ARRAY_LEN(best); k++)
        CHECK(sg_wg_sched_best(cases[k]) == best[k], "sg_wg_sched_best case %d: %d, want %d", k,
              sg_wg_sched_best(cases[k]), best[k]);
    printf("io: the wgmma schedule kept by the JSON, outside the hash; malformed ones refused\n");
    sg_engine_table_free(&t);
}

/* A layer's own wgmma schedule (sg_engine_entry.wg_sched, -1: the table's) and its wgmma nodes'
 * times under each (wg_sched_ms), and the step the tuning timed with the layers' own
 * (wg_layers_step_ms): kept by the JSON round trip, outside the hash, absent where neither;
 * the node's schedule (sg_engine_table_node_sched) is its layer's; malformed ones refused. */
static void check_io_layer_sched(const sg_engine_table *t0) {
    sg_engine_table t, back;
    int dnn, own;
    char *text;
    io_copy(t0, &t, &text, &dnn, &own);
    int none = !strstr(text, "wg_sched") && t.wg_layers_step_ms < 0;
    for (int k = 0; k < t.n; k++) none &= t.e[k].wg_sched < 0 && t.e[k].wg_sched_ms[0] < 0;
    CHECK(none, "a table without layer schedules writes or reads one: %s", text);
    free(text);
    const uint64_t h0 = t.hash;
    const double ms[SG_WG_SCHEDS] = {2.0, 1.5, -1, 1.25}, ms2[SG_WG_SCHEDS] = {1, 2, 3, 4};
    CHECK(!sg_engine_table_set_sched(&t, t.e[own].layer, SG_WG_SCHED_FILL, ms) &&
              !sg_engine_table_set_sched(&t, t.e[dnn].layer, -1, ms2),
          "set_sched: %s", sg_last_error());
    CHECK(sg_engine_table_set_sched(&t, "no.such.layer", 0, NULL) == SG_ERR &&
              sg_engine_table_set_sched(&t, t.e[own].layer, SG_WG_SCHEDS, NULL) == SG_ERR &&
              t.e[own].wg_sched == SG_WG_SCHED_FILL,
          "set_sched takes an unknown layer or schedule");
    t.wg_layers_step_ms = 18.5;
    CHECK(sg_engine_table_hash(&t) == h0, "a layer's schedule changed the hash");
    text = sg_engine_table_json(&t);
    sg_engine_table_init(&back);
    int same = text && !sg_engine_table_parse(text, "text", &back) && back.hash == h0 &&
               back.e[own].wg_sched == SG_WG_SCHED_FILL && back.e[dnn].wg_sched == -1 &&
               back.wg_layers_step_ms == 18.5 &&
               strstr(text, "\"wg_sched\":{\"persist\":false,\"fill\":true,"
                            "\"ms\":[2.0,1.5,null,1.25]}") &&
               strstr(text, "\"wg_sched\":{\"ms\":[1.0,2.0,3.0,4.0]}") &&
               strstr(text, "\"layers_step_ms\":18.5");
    for (int s = 0; same && s < SG_WG_SCHEDS; s++)
        same = back.e[own].wg_sched_ms[s] == ms[s] && back.e[dnn].wg_sched_ms[s] == ms2[s];
    for (int k = 0; same && k < t.n; k++)
        same = k == own || k == dnn || (back.e[k].wg_sched < 0 && back.e[k].wg_sched_ms[1] < 0);
    CHECK(same, "the layers' schedules through the JSON: %s", text ? text : sg_last_error());
    free(text);
    /* every node of the layer (forward, backward, each micro-batch) takes it; others none */
    sg_model_cfg c = tiny();
    c.engines = &back;
    sg_plan p;
    CHECK(!sg_plan_build(&p, &c, 1), "plan: %s", sg_last_error());
    int of_own = 0, other = 0;
    for (int i = 0; i < p.g.nn; i++) {
        char layer[SG_NAME_MAX];
        const int f = p.g.n[i].fwd >= 0 ? p.g.n[i].fwd : i;
        const int mine = sg_conv_layer_of(&p.g, f, layer) >= 0 && !strcmp(layer, t.e[own].layer);
        const int s = sg_engine_table_node_sched(&back, &p.g, i);
        of_own += mine && s == SG_WG_SCHED_FILL;
        other += !mine && s >= 0;
    }
    CHECK(of_own >= 2 && !other, "node schedules: %d nodes of layer %s have its own, %d others one",
          of_own, t.e[own].layer, other);
    sg_plan_free(&p);
    sg_engine_table_free(&back);
    /* malformed: refused with the key's form */
    static const char *const bad[] = {"\"wg_sched\":2", "\"wg_sched\":{\"fill\":\"yes\"}",
                                      "\"wg_sched\":{\"ms\":[1,2,3]}",
                                      "\"wg_sched\":{\"persist\":true,\"ms\":[1,-2,3,4]}"};
    for (int k = 0; k < SG_ARRAY_LEN(bad); k++) {
        CHECK(parse_with_fields("\"device\":\"test\"", bad[k], &back) == SG_ERR &&
                  strstr(sg_last_error(), "wg_sched"),
              "a layer's malformed schedule (%s): %s", bad[k], sg_last_error());
        sg_engine_table_free(&back);
    }
    CHECK(parse_with_field("\"wg_sched\":{\"layers_step_ms\":-1}", &back) == SG_ERR,
          "a negative layers_step_ms was taken");
    sg_engine_table_free(&back);
    CHECK(!parse_with_fields("\"device\":\"test\"", "\"wg_sched\":{\"persist\":true}", &back) &&
              back.e[0].wg_sched == SG_WG_SCHED_PERSIST,
          "a layer's schedule without times: %s", sg_last_error());
    sg_engine_table_free(&back);
    printf("io: the layers' own wgmma schedules kept by the JSON, outside the hash, on every node "
           "of theirs; malformed ones refused\n");
    sg_engine_table_free(&t);
}

/* The GEMMs' algorithms (sg_engine_table.gemm, sg_gemm_pick): in the hash (another algorithm,
 * other bits) whatever their order or timings, kept by the JSON round trip, named by the diff;
 * absent from a table without them; malformed ones refused. */
static void check_io_gemms(const sg_engine_table *t0) {
    sg_engine_table t, back, rev;
    int dnn, own;
    char *text;
    io_copy(t0, &t, &text, &dnn, &own);
    CHECK(!strstr(text, "gemms") && t.ngemm == 0, "a table without GEMM picks writes some: %s",
          text);
    free(text);
    const uint64_t h0 = t.hash;
    static const char *const keys[2] = {
        "m256 n32768 k768 opNN bf16,bf16>bf16 ld256,768,256 b1 s0,0,0 al256,256,256",
        "m768 n256 k32768 opNT bf16,bf16>f32 ld768,256,768 b1 s0,0,0 al256,256,256"};
    CHECK(!sg_engine_table_set_gemm(&t, keys[0], 0x0123456789abcdefull, 0.025, 0.0875) &&
              t.hash != h0 && !sg_engine_table_set_gemm(&t, keys[1], 0xfedcba9876543210ull, -1, -1),
          "set_gemm: %s", sg_last_error());
    const uint64_t h2 = t.hash;
    CHECK(!sg_engine_table_set_gemm(&t, keys[0], 0x0123456789abcdefull, 0.5, 0.5) && t.hash == h2 &&
              t.ngemm == 2 && sg_engine_table_gemm(&t, keys[0])->ms == 0.5,
          "a pick's times changed the hash, or a key was added twice");
    CHECK(sg_engine_table_set_gemm(&t, "", 1, 1, 1) == SG_ERR && !sg_engine_table_gemm(&t, "x") &&
              !sg_engine_table_gemm(NULL, keys[0]),
          "an empty key accepted, or a missing one found");
    /* the order does not matter to the hash */
    io_copy(t0, &rev, &text, &dnn, &own);
    free(text);
    CHECK(!sg_engine_table_set_gemm(&rev, keys[1], 0xfedcba9876543210ull, 1, 2) &&
              !sg_engine_table_set_gemm(&rev, keys[0], 0x0123456789abcdefull, 3, 4) &&
              rev.hash == t.hash && sg_engine_table_diff(&rev, &t, "(unexpected) ") == 0,
          "the GEMM picks' hash depends on their order or times");
    CHECK(!sg_engine_table_set_gemm(&rev, keys[1], 0xfedcba9876543211ull, 1, 2) &&
              rev.hash != t.hash && sg_engine_table_diff(&rev, &t, "(expected) ") == 1,
          "another algorithm: the hash or the diff did not see it");
    text = sg_engine_table_json(&t);
    sg_engine_table_init(&back);
    CHECK(text && !sg_engine_table_parse(text, "text", &back) && back.hash == t.hash &&
              back.ngemm == 2 && back.gemm[0].ms == 0.5 && back.gemm[1].first_ms < 0 &&
              back.gemm[1].algo == 0xfedcba9876543210ull &&
              strstr(text, "\"gemms\":[{\"gemm\":\"m256 n32768") &&
              strstr(text, "\"algo\":\"fedcba9876543210\",\"ms\":null,\"first_ms\":null}"),
          "the GEMM picks' JSON round trip: %s", text ? text : sg_last_error());
    free(text);
    sg_engine_table_free(&back);
    static const char *const bad[] = {
        "\"gemms\":3",
        "\"gemms\":[{\"gemm\":\"k\"}]",
        "\"gemms\":[{\"gemm\":\"k\",\"algo\":\"0123\"}]",
        "\"gemms\":[{\"gemm\":\"k\",\"algo\":\"0123456789ABCDEF\"}]",
        "\"gemms\":[{\"gemm\":\"k\",\"algo\":\"0123456789abcdef\",\"ms\":-1}]",
        "\"gemms\":[{\"gemm\":\"k\",\"algo\":\"0123456789abcdef\"},{\"gemm\":\"k\","
        "\"algo\":\"0123456789abcdef\"}]"};
    static const char *const says[] = {"must be an array", "16 lowercase hex", "16 lowercase hex",
                                       "16 lowercase hex", "\"ms\"",           "listed twice"};
    for (int k = 0; k < SG_ARRAY_LEN(bad); k++) {
        CHECK(parse_with_field(bad[k], &back) == SG_ERR && strstr(sg_last_error(), says[k]),
              "a malformed GEMM pick (%s): %s", bad[k], sg_last_error());
        sg_engine_table_free(&back);
    }
    printf("io: the GEMM picks in the hash, the diff and the JSON; malformed ones refused\n");
    sg_engine_table_free(&t), sg_engine_table_free(&rev);
}

/* The step's knobs (sg_engine_table.knobs, sg_step_knobs): a record of the tuning's timing,
 * kept by the JSON round trip, never in the hash (the same bits every way); absent from a table
 * without them; a malformed one refused. */
static void check_io_knobs(const sg_engine_table *t0) {
    sg_engine_table t, back;
    int dnn, own;
    char *text;
    io_copy(t0, &t, &text, &dnn, &own);
    CHECK(!strstr(text, "knobs") && t.knobs.pdl == SG_KNOB_UNSET &&
              t.knobs.tc_halo == SG_KNOB_UNSET && t.knobs.dgrad_stats == SG_KNOB_UNSET &&
              t.knobs.fuse_stats == SG_KNOB_UNSET && t.knobs.norm_onepass == SG_KNOB_UNSET &&
              t.knobs.base_ms < 0,
          "a table without knobs writes or reads some: %s", text);
    free(text);
    const uint64_t h0 = t.hash;
    t.knobs = (sg_step_knobs){.pdl = 1,
                              .tc_halo = SG_KNOB_HALO_ALL,
                              .dgrad_stats = SG_KNOB_UNSET,
                              .fuse_stats = SG_KNOB_STATS_FWD,
                              .norm_onepass = SG_KNOB_STATS_BWD,
                              .base_ms = 24.5,
                              .step_ms = 22.25};
    CHECK(sg_engine_table_hash(&t) == h0, "the knobs changed the hash");
    text = sg_engine_table_json(&t);
    sg_engine_table_init(&back);
    CHECK(text && !sg_engine_table_parse(text, "text", &back) && back.hash == h0 &&
              back.knobs.pdl == 1 && back.knobs.tc_halo == SG_KNOB_HALO_ALL &&
              back.knobs.dgrad_stats == SG_KNOB_UNSET &&
              back.knobs.fuse_stats == SG_KNOB_STATS_FWD &&
              back.knobs.norm_onepass == SG_KNOB_STATS_BWD && back.knobs.base_ms == 24.5 &&
              back.knobs.step_ms == 22.25 &&
              strstr(text, "\"knobs\":{\"pdl\":true,\"tc_halo\":\"all\",\"dgrad_stats\":null,"
                           "\"fuse_stats\":\"fwd\",\"norm_onepass\":\"bwd\",\"base_ms\":24.5,"
                           "\"step_ms\":22.25}"),
          "the knobs' JSON round trip: %s", text ? text : sg_last_error());
    free(text);
    sg_engine_table_free(&back);
    static const char *const bad[] = {"\"knobs\":1",
                                      "\"knobs\":{\"pdl\":1}",
                                      "\"knobs\":{\"tc_halo\":\"some\"}",
                                      "\"knobs\":{\"fuse_stats\":\"2\"}",
                                      "\"knobs\":{\"norm_onepass\":1}",
                                      "\"knobs\":{\"norm_onepass\":true}",
                                      "\"knobs\":{\"norm_onepass\":\"both\"}",
                                      "\"knobs\":{\"step_ms\":-2}"};
    for (int k = 0; k < SG_ARRAY_LEN(bad); k++) {
        CHECK(parse_with_field(bad[k], &back) == SG_ERR && strstr(sg_last_error(), "knobs"),
              "malformed knobs (%s): %s", bad[k], sg_last_error());
        sg_engine_table_free(&back);
    }
    printf("io: the step knobs kept by the JSON, outside the hash; malformed ones refused\n");
    sg_engine_table_free(&t);
}

/* The attention engine (sg_engine_table.attn): absent from a table that neither sets nor
 * measured it (which hashes as before it existed); fused in the hash, gemm with times not; kept
 * by the JSON round trip; a malformed one refused. */
static void check_io_attn(const sg_engine_table *t0) {
    sg_engine_table t, back;
    int dnn, own;
    char *text;
    io_copy(t0, &t, &text, &dnn, &own);
    CHECK(!strstr(text, "\"attention\"") && t.attn == SG_ATTN_GEMM && t.attn_ms[0] < 0 &&
              t.attn_ms[1] < 0,
          "a table without an attention engine writes or reads one: %s", text);
    free(text);
    const uint64_t h0 = t.hash;
    CHECK(!sg_engine_table_set_attn(&t, SG_ATTN_GEMM, 3.5, 4.25) && t.hash == h0,
          "gemm with its times changed the hash");
    CHECK(!sg_engine_table_set_attn(&t, SG_ATTN_FUSED, 3.5, 1.25) && t.hash != h0,
          "fused left the hash alone");
    CHECK(sg_engine_table_diff(t0, &t, "(expected) ") == 1, "diff: the attention engine");
    CHECK(sg_engine_table_set_attn(&t, 2, 1, 1) == SG_ERR && t.attn == SG_ATTN_FUSED,
          "attention engine 2 taken");
    text = sg_engine_table_json(&t);
    sg_engine_table_init(&back);
    CHECK(text && !sg_engine_table_parse(text, "text", &back) && back.hash == t.hash &&
              back.attn == SG_ATTN_FUSED && back.attn_ms[0] == 3.5 && back.attn_ms[1] == 1.25 &&
              strstr(text, "\"attention\":{\"engine\":\"fused\",\"gemm_ms\":3.5,"
                           "\"fused_ms\":1.25}"),
          "the attention engine's JSON round trip: %s", text ? text : sg_last_error());
    free(text);
    sg_engine_table_free(&back);
    static const char *const bad[] = {"\"attention\":1", "\"attention\":{}",
                                      "\"attention\":{\"engine\":\"flash\"}",
                                      "\"attention\":{\"engine\":\"fused\",\"gemm_ms\":-1}"};
    for (int k = 0; k < SG_ARRAY_LEN(bad); k++) {
        CHECK(parse_with_field(bad[k], &back) == SG_ERR && strstr(sg_last_error(), "attention"),
              "a malformed attention engine (%s): %s", bad[k], sg_last_error());
        sg_engine_table_free(&back);
    }
    printf("io: the attention engine in the hash where fused, kept by the JSON; malformed ones "
           "refused\n");
    sg_engine_table_free(&t);
}

/* An own layer's fp32 form choice (sg_engine_entry.wino or .f32tc, fp32 tables): in the hash
 * where on (not its times), in the diff, kept by the JSON; refused on a cudnn layer, on a bf16
 * table, and malformed. */
typedef struct {
    const char *form, *ms0, *ms1, *words;
    int (*set)(sg_engine_table *, const char *, int, double, double);
    int f32tc; /* which of the entry's choices: .f32tc (1) or .wino (0) */
} form_case;
static const form_case form_cases[2] = {
    {"wino", "direct_ms", "wino_ms", "Winograd", sg_engine_table_set_wino, 0},
    {"f32tc", "fma_ms", "f32tc_ms", "3xTF32 tiles", sg_engine_table_set_f32tc, 1}};
static int form_on(const sg_engine_entry *e, const form_case *f) {
    return f->f32tc ? e->f32tc : e->wino;
}
static const double *form_ms(const sg_engine_entry *e, const form_case *f) {
    return f->f32tc ? e->f32tc_ms : e->wino_ms;
}
static void check_io_form(const sg_engine_table *t0, const form_case *f) {
    sg_engine_table t, back;
    int dnn, own;
    char *text, key[48];
    io_copy(t0, &t, &text, &dnn, &own);
    snprintf(key, sizeof key, "\"%s\"", f->form);
    CHECK(!strstr(text, key) && !form_on(&t.e[own], f) && form_ms(&t.e[own], f)[0] < 0 &&
              form_ms(&t.e[own], f)[1] < 0,
          "a table without %s writes or reads it: %s", f->words, text);
    free(text);
    const char *L = t.e[own].layer;
    CHECK(f->set(&t, L, 1, 2, 1) == SG_ERR && strstr(sg_last_error(), "bf16"),
          "%s on a bf16 table taken: %s", f->words, sg_last_error());
    snprintf(t.precision, sizeof t.precision, "fp32");
    const uint64_t h0 = sg_engine_table_hash(&t);
    CHECK(!f->set(&t, L, 0, 2.5, 3.25) && t.hash == h0, "%s off with its times changed the hash",
          f->words);
    CHECK(!f->set(&t, L, 1, 2.5, 1.25) && t.hash != h0, "%s left the hash alone", f->words);
    /* the two forms hash apart */
    const form_case *other = &form_cases[!f->f32tc];
    sg_engine_table o;
    io_copy(t0, &o, NULL, &dnn, &own);
    snprintf(o.precision, sizeof o.precision, "fp32");
    CHECK(!other->set(&o, L, 1, 2.5, 1.25) && o.hash != t.hash, "%s and %s hash alike", f->words,
          other->words);
    sg_engine_table_free(&o);
    CHECK(f->set(&t, t.e[dnn].layer, 1, 2, 1) == SG_ERR && strstr(sg_last_error(), "own layer") &&
              !form_on(&t.e[dnn], f),
          "%s on a cudnn layer taken: %s", f->words, sg_last_error());
    CHECK(f->set(&t, L, 2, 2, 1) == SG_ERR && form_on(&t.e[own], f) == 1, "%s choice 2 taken",
          f->words);
    CHECK(f->set(&t, "no.such.layer", 1, 2, 1) == SG_ERR, "an unknown layer");
    sg_engine_table ref;
    io_copy(t0, &ref, NULL, &dnn, &own);
    snprintf(ref.precision, sizeof ref.precision, "fp32");
    CHECK(sg_engine_table_diff(&ref, &t, "(expected) ") == 1, "diff: one layer's %s", f->words);
    sg_engine_table_free(&ref);
    text = sg_engine_table_json(&t);
    sg_engine_table_init(&back);
    char want[128];
    snprintf(want, sizeof want, "\"%s\":true,\"%s\":2.5,\"%s\":1.25", f->form, f->ms0, f->ms1);
    CHECK(text && !sg_engine_table_parse(text, "text", &back) && back.hash == t.hash &&
              form_on(&back.e[own], f) == 1 && form_ms(&back.e[own], f)[0] == 2.5 &&
              form_ms(&back.e[own], f)[1] == 1.25 && strstr(text, want),
          "%s's JSON round trip: %s", f->words, text ? text : sg_last_error());
    sg_engine_table_free(&back);
    /* a bf16 table naming it, malformed values: refused by name */
    char from[4][2][64];
    snprintf(from[0][0], 64, "\"precision\":\"fp32\"");
    snprintf(from[0][1], 64, "\"precision\":\"bf16\"");
    snprintf(from[1][0], 64, "\"%s\":true", f->form);
    snprintf(from[1][1], 64, "\"%s\":1", f->form);
    snprintf(from[2][0], 64, "\"%s\":1.25", f->ms1);
    snprintf(from[2][1], 64, "\"%s\":-1", f->ms1);
    snprintf(from[3][0], 64, "\"%s\":2.5", f->ms0);
    snprintf(from[3][1], 64, "\"%s\":\"x\"", f->ms0);
    for (int k = 0; k < 4 && text; k++) {
        const char *at = strstr(text, from[k][0]);
        SG_ASSERT(at);
        const size_t n = strlen(text) + 16, pre = (size_t)(at - text);
        char *bad = malloc(n);
        snprintf(bad, n, "%.*s%s%s", (int)pre, text, from[k][1], at + strlen(from[k][0]));
        CHECK(sg_engine_table_parse(bad, "bad", &back) == SG_ERR &&
                  strstr(sg_last_error(), k == 0   ? "bf16"
                                          : k == 1 ? key
                                                   : "_ms"),
              "a malformed %s choice (%s): %s", f->words, from[k][1], sg_last_error());
        sg_engine_table_free(&back);
        free(bad);
    }
    free(text);
    printf("io: an own layer's %s choice in the hash where on, in the diff, kept by the JSON; on "
           "a cudnn layer, a bf16 table or malformed, refused\n",
           f->words);
    sg_engine_table_free(&t);
}

/* What an own entry's fp32 forms save on its own time (sg_engine_entry_form_saving): the tiles'
 * products on the tensor cores against the FMAs, Winograd against its passes in the chosen form
 * (an older table's Winograd alone where the tiles were not measured), nothing off or on cudnn. */
static void check_form_saving(void) {
    sg_engine_entry e;
    memset(&e, 0, sizeof e);
    e.engine = SG_LAYER_OWN;
    e.f32tc_ms[0] = 10, e.f32tc_ms[1] = 6, e.wino_ms[0] = 3, e.wino_ms[1] = 1;
    const double none = sg_engine_entry_form_saving(&e);
    e.f32tc = 1;
    const double tc = sg_engine_entry_form_saving(&e);
    e.wino = 1;
    const double both = sg_engine_entry_form_saving(&e);
    e.f32tc = 0;
    const double wino = sg_engine_entry_form_saving(&e);
    e.f32tc_ms[0] = e.f32tc_ms[1] = -1;
    const double old = sg_engine_entry_form_saving(&e);
    e.engine = SG_LAYER_CUDNN;
    const double dnn = sg_engine_entry_form_saving(&e);
    CHECK(none == 0 && tc == 4 && both == 6 && wino == 2 && old == 2 && dnn == 0,
          "form savings: off %g, tiles %g (want 4), both %g (6), Winograd %g (2), an older "
          "table's %g (2), cudnn %g",
          none, tc, both, wino, old, dnn);
}

static void check_io(void) {
    const sg_model_cfg c = tiny();
    sg_engine_table t, back, rev;
    table_for(&c, &t, pick_conv1);
    snprintf(t.device, sizeof t.device, "test device");
    char path[] = "/tmp/sg_engine_table_XXXXXX";
    const int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    CHECK(!sg_engine_table_write(path, &t), "write: %s", sg_last_error());
    CHECK(!sg_engine_table_read(path, &back), "read: %s", sg_last_error());
    int same = back.n == t.n && back.hash == t.hash && back.batch == t.batch &&
               !strcmp(back.model, t.model) && !strcmp(back.device, t.device);
    for (int k = 0; same && k < t.n; k++)
        same = !strcmp(back.e[k].layer, t.e[k].layer) && back.e[k].engine == t.e[k].engine &&
               back.e[k].own_ms == t.e[k].own_ms && back.e[k].cudnn_ms == t.e[k].cudnn_ms;
    CHECK(same, "the table read back differs from the one written");
    char *text = sg_engine_table_json(&t);
    sg_engine_table_free(&back);
    CHECK(text && !sg_engine_table_parse(text, "text", &back) && back.hash == t.hash,
          "JSON text round trip");
    free(text);
    /* the hash: the choices alone */
    sg_engine_table_init(&rev);
    snprintf(rev.model, sizeof rev.model, "other");
    for (int k = t.n - 1; k >= 0; k--)
        sg_engine_table_add(&rev, t.e[k].layer, t.e[k].engine, 99, 98);
    CHECK(rev.hash == t.hash, "the hash depends on the order, the timings or the header");
    rev.e[0].engine = rev.e[0].engine == SG_LAYER_OWN ? SG_LAYER_CUDNN : SG_LAYER_OWN;
    CHECK(sg_engine_table_hash(&rev) != t.hash, "one engine changed, the hash did not");
    CHECK(sg_engine_table_diff(&t, &rev, "(expected) ") == 1, "diff counts one layer");
    check_io_cudnn_names(&t);
    check_io_tc(&t);
    check_io_passes(&t);
    check_io_wg_sched(&t);
    check_io_layer_sched(&t);
    check_io_gemms(&t);
    check_io_knobs(&t);
    check_io_attn(&t);
    for (int f = 0; f < 2; f++) check_io_form(&t, &form_cases[f]);
    check_form_saving();
    /* malformed tables: refused with what is wrong */
    static const struct {
        const char *json, *says;
    } bad[] = {
        {"{bad", "not JSON"},
        {"{\"format\":\"x\",\"version\":1}", "not an engine table"},
        {"{\"format\":\"stepgraph_engine_table\",\"version\":2}", "version"},
        {"{\"format\":\"stepgraph_engine_table\",\"version\":1,\"model\":\"m\",\"precision\":"
         "\"bf16\",\"batch\":0,\"layers\":[]}",
         "batch"},
        {"{\"format\":\"stepgraph_engine_table\",\"version\":1,\"model\":\"m\",\"precision\":"
         "\"bf16\",\"batch\":2,\"layers\":[]}",
         "non-empty"},
        {"{\"format\":\"stepgraph_engine_table\",\"version\":1,\"model\":\"m\",\"precision\":"
         "\"bf16\",\"batch\":2,\"layers\":[{\"layer\":\"a\",\"engine\":\"tf32\"}]}",
         "\"own\" or \"cudnn\""},
        {"{\"format\":\"stepgraph_engine_table\",\"version\":1,\"model\":\"m\",\"precision\":"
         "\"bf16\",\"batch\":2,\"layers\":[{\"layer\":\"a\",\"engine\":\"own\"},{\"layer\":\"a\","
         "\"engine\":\"own\"}]}",
         "twice"},
        {"{\"format\":\"stepgraph_engine_table\",\"version\":1,\"model\":\"m\",\"precision\":"
         "\"bf16\",\"batch\":2,\"layers\":[{\"layer\":\"a\",\"engine\":\"own\",\"own_ms\":-1}]}",
         "own_ms"},
        {"{\"format\":\"stepgraph_engine_table\",\"version\":1,\"precision\":\"bf16\","
         "\"batch\":2,\"layers\":[{\"layer\":\"a\",\"engine\":\"own\"}]}",
         "\"model\""},
        {"{\"format\":\"stepgraph_engine_table\",\"version\":1,\"model\":\"m\",\"precision\":"
         "\"bf16\",\"batch\":2,\"layers\":[{\"layer\":\"a\",\"engine\":\"cudnn\","
         "\"cudnn_engines\":{\"fwd\":4}}]}",
         "cudnn_engines"},
        {"{\"format\":\"stepgraph_engine_table\",\"version\":1,\"model\":\"m\",\"precision\":"
         "\"bf16\",\"batch\":2,\"layers\":[{\"layer\":\"a\",\"engine\":\"cudnn\","
         "\"cudnn_engines\":{\"dgrad\":\"e1 ws0\"}}]}",
         "bwd_filter"},
        {"{\"format\":\"stepgraph_engine_table\",\"version\":1,\"model\":\"m\",\"precision\":"
         "\"bf16\",\"batch\":2,\"layers\":[{\"layer\":\"a\",\"engine\":\"own\",\"tc\":"
         "\"hopper\"}]}",
         "\"mma\" or \"wgmma\""},
        {"{\"format\":\"stepgraph_engine_table\",\"version\":1,\"model\":\"m\",\"precision\":"
         "\"bf16\",\"batch\":2,\"layers\":[{\"layer\":\"a\",\"engine\":\"cudnn\",\"tc\":"
         "\"wgmma\"}]}",
         "own layer's generation"},
        {"{\"format\":\"stepgraph_engine_table\",\"version\":1,\"model\":\"m\",\"precision\":"
         "\"bf16\",\"batch\":2,\"layers\":[{\"layer\":\"a\",\"engine\":\"own\",\"wgmma_ms\":"
         "\"fast\"}]}",
         "wgmma_ms"},
        {"{\"format\":\"stepgraph_engine_table\",\"version\":1,\"model\":\"m\",\"precision\":"
         "\"bf16\",\"batch\":2,\"layers\":[{\"layer\":\"a\",\"engine\":\"cudnn\",\"passes\":"
         "{\"fwd\":{\"engine\":\"tf32\"}}}]}",
         "takes fwd, bwd_data and bwd_filter"},
        {"{\"format\":\"stepgraph_engine_table\",\"version\":1,\"model\":\"m\",\"precision\":"
         "\"bf16\",\"batch\":2,\"layers\":[{\"layer\":\"a\",\"engine\":\"cudnn\",\"passes\":"
         "{\"wgrad\":{\"engine\":\"own\"}}}]}",
         "(\"wgrad\")"},
        {"{\"format\":\"stepgraph_engine_table\",\"version\":1,\"model\":\"m\",\"precision\":"
         "\"bf16\",\"batch\":2,\"layers\":[{\"layer\":\"a\",\"engine\":\"own\",\"passes\":"
         "{\"fwd\":{\"engine\":\"own\"}}}]}",
         "a cudnn layer's choice"},
        {"{\"format\":\"stepgraph_engine_table\",\"version\":1,\"model\":\"m\",\"precision\":"
         "\"bf16\",\"batch\":2,\"layers\":[{\"layer\":\"a\",\"engine\":\"cudnn\",\"passes\":"
         "{\"fwd\":{\"own_ms\":-2}}}]}",
         "own_ms"},
    };
    for (int i = 0; i < SG_ARRAY_LEN(bad); i++) {
        sg_engine_table x;
        const int rc = sg_engine_table_parse(bad[i].json, "bad.json", &x);
        CHECK(rc == SG_ERR && strstr(sg_last_error(), bad[i].says) &&
                  strstr(sg_last_error(), "bad.json"),
              "malformed table %d: rc %d, '%s' (expected '%s')", i, rc, sg_last_error(),
              bad[i].says);
        sg_engine_table_free(&x);
    }
    sg_engine_table_free(&back); /* read and parse initialise their table */
    CHECK(sg_engine_table_read("/nonexistent/table.json", &back) == SG_ERR, "a missing file");
    unlink(path);
    sg_engine_table_free(&t), sg_engine_table_free(&back), sg_engine_table_free(&rev);
}

/* ---- the planner applies it */
static int reads_layer(const sg_graph *g, int y, int (*pick)(const char *)) {
    for (int i = 0; i < g->n_forward; i++) {
        char layer[SG_NAME_MAX];
        if (sg_conv_layer_of(g, i, layer) >= 0 && g->n[i].in[0] == y && pick(layer)) return 1;
    }
    return 0;
}

static void check_plan(void) {
    sg_model_cfg c = tiny();
    sg_plan p0, pown, pt;
    sg_engine_table own, t;
    table_for(&c, &own, NULL);
    table_for(&c, &t, pick_conv1);
    CHECK(!sg_plan_build(&p0, &c, 1), "no table: %s", sg_last_error());
    c.engines = &own;
    CHECK(!sg_plan_build(&pown, &c, 1), "all own: %s", sg_last_error());
    c.engines = &t;
    CHECK(!sg_plan_build(&pt, &c, 1), "conv1 on cudnn: %s", sg_last_error());
    CHECK(!sg_plan_verify(&pt), "verify: %s", sg_last_error());
    /* all own: the fusions of no table (another config hash: the table is recorded) */
    CHECK(pown.fused_norms == p0.fused_norms &&
              pown.unmaterialised_bytes == p0.unmaterialised_bytes &&
              pown.arena_bytes == p0.arena_bytes && pown.g.nn == p0.g.nn,
          "an all-own table changed the plan");
    CHECK(pown.hash != p0.hash, "the plan hash does not pin the table");
    /* conv1 on cudnn: norm1 of every res block stored and recomputed, norm2 still fused */
    int sites = 0, wrong = 0, fused_left = 0;
    for (int i = 0; i < pt.g.n_forward; i++) {
        const sg_node *nd = &pt.g.n[i];
        if (nd->op != OP_NORM_ACT && nd->op != OP_NORM_ACT_TEMB) continue;
        const sg_tensor *y = &pt.g.t[nd->out[0]];
        const sg_tensor *y0 = &p0.g.t[p0.g.n[i].out[0]];
        if (reads_layer(&pt.g, nd->out[0], pick_conv1)) {
            sites++;
            wrong += y->vnorm >= 0 || y->recomputed < 0 || y->bytes == 0 || y0->vnorm < 0;
        } else {
            wrong += (y->vnorm >= 0) != (y0->vnorm >= 0);
            fused_left += y->vnorm >= 0;
        }
    }
    CHECK(sites > 0 && !wrong, "%d conv1 sites, %d normalisations planned wrong", sites, wrong);
    CHECK(pt.fused_norms == p0.fused_norms - sites && pt.fused_norms == fused_left,
          "fused normalisations %d, expected %d - %d", pt.fused_norms, p0.fused_norms, sites);
    CHECK(pt.unmaterialised_bytes < p0.unmaterialised_bytes &&
              pt.no_reuse_bytes > p0.no_reuse_bytes &&
              /* every normalisation is recomputed for its weight gradients, fused or not */
              pt.role_tensors[ROLE_RECOMPUTED] == p0.role_tensors[ROLE_RECOMPUTED],
          "the memory plan does not follow the table (unmaterialised %lld vs %lld)",
          (long long)pt.unmaterialised_bytes, (long long)p0.unmaterialised_bytes);
    printf("plan: %d conv1 sites on cudnn: fused normalisations %d -> %d, unmaterialised %lld -> "
           "%lld bytes, without reuse %lld -> %lld bytes\n",
           sites, p0.fused_norms, pt.fused_norms, (long long)p0.unmaterialised_bytes,
           (long long)pt.unmaterialised_bytes, (long long)p0.no_reuse_bytes,
           (long long)pt.no_reuse_bytes);
    /* every node of a layer (backward ones too) reads its layer's choice */
    int conv_nodes = 0, agree = 0;
    for (int i = 0; i < pt.g.nn; i++) {
        char layer[SG_NAME_MAX];
        if (sg_conv_layer_of(&pt.g, i, layer) < 0) continue;
        conv_nodes++;
        agree += sg_engine_table_node(&t, &pt.g, i) ==
                 (pick_conv1(layer) ? SG_LAYER_CUDNN : SG_LAYER_OWN);
    }
    CHECK(conv_nodes > 0 && agree == conv_nodes, "%d of %d conv nodes read their layer's choice",
          agree, conv_nodes);
    sg_plan_free(&p0), sg_plan_free(&pown), sg_plan_free(&pt);
    /* tables that do not fit */
    sg_plan p;
    sg_model_cfg o = tiny();
    o.engines = &t;
    o.act_dt = DT_F32;
    CHECK(sg_plan_build(&p, &o, 1) && strstr(sg_last_error(), "precision"), "precision: %s",
          sg_last_error());
    sg_plan_free(&p);
    o = tiny(), o.engines = &t, o.batch = 4;
    CHECK(sg_plan_build(&p, &o, 1) && strstr(sg_last_error(), "batch"), "batch: %s",
          sg_last_error());
    sg_plan_free(&p);
    CHECK(!sg_plan_build(&p, &o, 0), "a forward plan takes another batch: %s", sg_last_error());
    sg_plan_free(&p);
    sg_model_preset(&o, "unet_fmnist"), o.act_dt = DT_BF16, o.engines = &t;
    CHECK(sg_plan_build(&p, &o, 1) && strstr(sg_last_error(), "model"), "model: %s",
          sg_last_error());
    sg_plan_free(&p);
    o = tiny(), o.engines = &t;
    sg_engine_table_add(&t, "down_blocks.9.resnets.0.conv1", SG_LAYER_OWN, -1, -1);
    CHECK(sg_plan_build(&p, &o, 1) && strstr(sg_last_error(), "down_blocks.9.resnets.0.conv1"),
          "an unknown layer: %s", sg_last_error());
    sg_plan_free(&p);
    t.n -= 2; /* the unknown one and the last real layer (conv_out) */
    CHECK(sg_plan_build(&p, &o, 1) && strstr(sg_last_error(), "no entry for conv layer conv_out"),
          "a missing layer: %s", sg_last_error());
    sg_plan_free(&p);
    sg_engine_table_free(&own), sg_engine_table_free(&t);
}

/* A table that sends the shortcuts and the upsamplers' convs to cuDNN: the plan folds no
 * shortcut (conv2d_sc) and fuses no upsample (upconv2d), forms only the own kernels run; every
 * layer still computed, the plan still valid */
static int pick_fold_sites(const char *layer) {
    return strstr(layer, ".conv_shortcut") || strstr(layer, ".upsamplers.0.conv");
}
static int count_op(const sg_graph *g, sg_op op) {
    int n = 0;
    for (int i = 0; i < g->nn; i++) n += g->n[i].op == op;
    return n;
}
static void check_folds(void) {
    sg_model_cfg c = tiny();
    sg_engine_table t;
    table_for(&c, &t, pick_fold_sites);
    sg_plan p0, pt;
    CHECK(!sg_plan_build(&p0, &c, 1), "no table: %s", sg_last_error());
    c.engines = &t;
    CHECK(!sg_plan_build(&pt, &c, 1), "the table: %s", sg_last_error());
    CHECK(!sg_plan_verify(&pt), "verify: %s", sg_last_error());
    const int sc0 = count_op(&p0.g, OP_CONV2D_SC), up0 = count_op(&p0.g, OP_UPCONV2D);
    const int sct = count_op(&pt.g, OP_CONV2D_SC), upt = count_op(&pt.g, OP_UPCONV2D);
    CHECK(sc0 > 0 && up0 > 0 && sct == 0 && upt == 0,
          "conv2d_sc %d -> %d, upconv2d %d -> %d with their layers on cudnn", sc0, sct, up0, upt);
    /* those layers' convs are plain convs now, each asking the table for cudnn */
    int asked = 0;
    for (int i = 0; i < pt.g.n_forward; i++) {
        char layer[SG_NAME_MAX];
        asked += sg_conv_layer_of(&pt.g, i, layer) >= 0 && pick_fold_sites(layer) &&
                 sg_engine_table_node(&t, &pt.g, i) == SG_LAYER_CUDNN;
    }
    CHECK(asked == sc0 + up0, "%d of %d unfolded layers on cudnn", asked, sc0 + up0);
    printf("folds: %d conv2d_sc and %d upconv2d with their layers on own, none on cudnn\n", sc0,
           up0);
    sg_plan_free(&p0), sg_plan_free(&pt);
    sg_engine_table_free(&t);
}

/* ---- the tuning run */
/* a folded shortcut's conv2 (pair[shortcut] = conv2): conv2's partner, -1 for any other layer */
static int pair_of(const int *pair, int n, int k) {
    for (int j = 0; j < n; j++)
        if (pair[j] == k) return j;
    return -1;
}

/* The tuning's backends with their layer replays observed (CUDA): each replay runs for real,
 * then reports 1e6 ms plus its node count, so that a layer's time in the table says it came
 * from the replay of exactly its charged nodes (an eager sum here is far below 1e6 ms); and the
 * wgmma schedule set before the replays and restored after them counted. */
static int (*g_replay_real)(sg_backend *, const sg_plan *, const int *, int, int, float *);
static void (*g_sched_real)(sg_backend *, int);
static int g_replays, g_sched_sets, g_sched_restores;
static int replay_observed(sg_backend *be, const sg_plan *p, const int *nodes, int n, int reps,
                           float *ms) {
    const int rc = g_replay_real(be, p, nodes, n, reps, ms);
    for (int r = 0; r < reps && !rc; r++) ms[r] = n ? 1e6f + (float)n : 0.0f;
    g_replays++;
    return rc;
}
static void sched_observed(sg_backend *be, int s) {
    g_sched_real(be, s);
    if (s >= 0)
        g_sched_sets++;
    else
        g_sched_restores++;
}
static sg_backend *make_backend_observed(const void *ctx) {
    sg_backend *be = make_backend(ctx);
    if (be && be->time_nodes_replay) {
        g_replay_real = be->time_nodes_replay, be->time_nodes_replay = replay_observed;
        if (be->wg_sched) g_sched_real = be->wg_sched, be->wg_sched = sched_observed;
    }
    return be;
}

#ifdef SG_TEST_CUDA_HOST
/* the charged nodes of layer `name` in the plan of cfg with every layer on `engine` */
static int charged_nodes(const sg_model_cfg *c0, const sg_engine_table *t, int engine,
                         const char *name) {
    sg_engine_table all;
    sg_engine_table_init(&all);
    for (int k = 0; k < t->n; k++)
        SG_ASSERT(!sg_engine_table_add(&all, t->e[k].layer, engine, -1, -1));
    snprintf(all.model, sizeof all.model, "%s", t->model);
    snprintf(all.precision, sizeof all.precision, "%s", t->precision);
    all.batch = t->batch;
    sg_model_cfg c = *c0;
    c.engines = &all;
    sg_plan p;
    SG_ASSERT(!sg_plan_build(&p, &c, 1));
    int n = 0;
    for (int i = 0; i < p.g.nn; i++) {
        char layer[SG_NAME_MAX];
        n += !sg_engine_tune_charge(&p.g, i, layer) && !strcmp(layer, name);
    }
    sg_plan_free(&p);
    sg_engine_table_free(&all);
    return n;
}
#endif

/* sg_engine_tune_opts.chosen: the table as it stands once the layers are chosen */
static int g_chosen_calls, g_chosen_n, g_chosen_gemms;
static uint64_t g_chosen_hash;
static int tune_chosen(const sg_engine_table *t, const void *ctx) {
    (void)ctx;
    g_chosen_calls++, g_chosen_n = t->n, g_chosen_gemms = t->ngemm, g_chosen_hash = t->hash;
    return SG_OK;
}

/* the tests' tuning options: one timed run a node, one replay a knob trial, the knobs' 1% */
static sg_engine_tune_opts tune_opts(const sg_model_cfg *c, const uint8_t *data,
                                     sg_backend *(*make)(const void *),
                                     int (*chosen)(const sg_engine_table *, const void *)) {
    return (sg_engine_tune_opts){.make_backend = make,
                                 .pixels = data,
                                 .pixel_bytes = c->data_n * c->data_h * c->data_w * c->in_ch,
                                 .warmup = 0,
                                 .iters = 1,
                                 .knob_steps = 1,
                                 .knob_min_gain = 0.01,
                                 .chosen = chosen,
                                 .seed = 3};
}

static void check_tune(const uint8_t *data) {
    const sg_model_cfg c = tiny();
    sg_engine_tune_opts o = tune_opts(&c, data, make_backend_observed, tune_chosen);
    o.cudnn_time_reps = 3; /* asked for; no cuDNN here: nothing timed */
    o.gemm_reps = 2, o.gemm_min_gain = 0.03;
    sg_engine_table t, want;
    table_for(&c, &want, NULL);
    const int rc = sg_engine_tune(&c, &o, &t);
    CHECK(!rc, "tune: %s", sg_last_error());
    /* every conv layer once, in the table's order (the choices: below) */
    int ok = !rc && t.n == want.n && t.batch == 2 && !strcmp(t.model, "unet_tiny") &&
             !strcmp(t.precision, "bf16") && t.device[0];
    for (int k = 0; ok && k < t.n; k++) ok = !strcmp(t.e[k].layer, want.e[k].layer);
    /* the library side without cuDNN: none on the CPU; on the CUDA backend the 1x1 layers' gemm
     * engine (cuBLASLt), measured, the faster side chosen; no timed cuDNN engine anywhere */
    sg_plan p0;
    SG_ASSERT(!sg_plan_build(&p0, &c, 1));
    /* the shortcuts the fused plan folds into their block's conv2 (conv2d_sc): no node of their
     * own there, their own time charged to conv2 (own_ms 0), one choice for the pair */
    int pair[64];
    SG_ASSERT(t.n <= 64);
    for (int k = 0; k < t.n; k++) pair[k] = -1;
    int folded_pairs = 0;
    for (int i = 0; !rc && i < p0.g.n_forward; i++) {
        char names[2][SG_NAME_MAX];
        if (sg_conv_layers_computed(&p0.g, i, names) != 2) continue;
        int a = 0, b = 0;
        while (a < t.n && strcmp(t.e[a].layer, names[0])) a++;
        while (b < t.n && strcmp(t.e[b].layer, names[1])) b++;
        SG_ASSERT(a < t.n && b < t.n);
        pair[b] = a, folded_pairs++;
    }
    int measured = 0, gemm_layers = 0, wgmma_measured = 0, on_wgmma = 0;
    int passes_measured = 0, pass_wrong = 0, on_own_passes = 0, pass_wg_measured = 0;
    for (int k = 0; !rc && k < t.n; k++) {
        if (pair[k] >= 0) { /* a folded shortcut */
            measured += t.e[k].own_ms == 0 && t.e[k].engine == t.e[pair[k]].engine;
            continue;
        }
        int lib = 0; /* the library side measured: a 1x1 layer on the CUDA backend */
#ifdef SG_TEST_CUDA_HOST
        for (int i = 0; i < p0.g.n_forward; i++) {
            char layer[SG_NAME_MAX];
            if (sg_conv_layer_of(&p0.g, i, layer) >= 0 && !strcmp(layer, t.e[k].layer))
                lib = sg_conv_dims_of(&p0.g, &p0.g.n[i]).K == 1;
        }
#endif
        gemm_layers += lib;
        /* the own alternative: the faster generation where wgmma was measured (the host
         * emulation reports compute capability 9.0: every layer; the CPU: none) */
        const sg_engine_entry *x = &t.e[k];
        const int q = pair_of(pair, t.n, k);
        const double mma = x->own_ms + (q >= 0 ? t.e[q].own_ms : 0);
        const double wg = x->wgmma_ms < 0 ? -1 : x->wgmma_ms + (q >= 0 ? t.e[q].wgmma_ms : 0);
        const int tc = wg >= 0 && wg < mma ? SG_TC_WGMMA : SG_TC_MMA;
        const double own = tc == SG_TC_WGMMA ? wg : mma;
        wgmma_measured += x->wgmma_ms > 0;
        /* cuDNN's side with its passes on own where they were faster there (the host emulation:
         * the 1x1 layers' gemm passes, each also timed on own; the CPU: none) */
        double saved = 0;
        for (int p = 0; p < 3; p++) {
            const double l = x->pass_lib_ms[p], w = x->pass_own_ms[p];
            passes_measured += l > 0 && w > 0;
            saved += l >= 0 && w >= 0 && w < l ? l - w : 0;
            if (q >= 0) {
                const double lq = t.e[q].pass_lib_ms[p], wq = t.e[q].pass_own_ms[p];
                saved += lq >= 0 && wq >= 0 && wq < lq ? lq - wq : 0;
            }
            pass_wrong +=
                x->pass_own[p] != (x->engine == SG_LAYER_CUDNN && l >= 0 && w >= 0 && w < l);
            /* own's side is the better generation: wgmma where its time is pass_own_ms */
            const double wgp = x->pass_wgmma_ms[p];
            pass_wg_measured += l > 0 && wgp > 0;
            pass_wrong += wgp >= 0 && wgp < w; /* a faster wgmma side left out */
            pass_wrong += x->pass_tc[p] == SG_TC_WGMMA && (!x->pass_own[p] || wgp != w);
            on_own_passes += x->pass_own[p];
        }
        const double dside = x->cudnn_ms + (q >= 0 ? t.e[q].cudnn_ms : 0) - saved;
        const int choice = lib && dside < own ? SG_LAYER_CUDNN : SG_LAYER_OWN;
        measured += x->own_ms > 0 && (lib ? x->cudnn_ms > 0 : x->cudnn_ms < 0) &&
                    x->engine == choice && (choice == SG_LAYER_CUDNN || x->tc == tc) &&
                    !x->cudnn[0][0] && !x->cudnn[1][0] && !x->cudnn[2][0];
        on_wgmma += x->engine == SG_LAYER_OWN && x->tc == SG_TC_WGMMA;
    }
#ifdef SG_TEST_CUDA_HOST
    const int want_wgmma = t.n - folded_pairs; /* the shortcuts' own time is 0 */
#else
    const int want_wgmma = 0;
#endif
#ifdef SG_TEST_CUDA_HOST
    const int want_passes = 1; /* at least one: every gemm layer's passes */
#else
    const int want_passes = 0;
#endif
    CHECK(!pass_wrong && (want_passes ? passes_measured >= gemm_layers : passes_measured == 0),
          "tune: %d passes measured on both sides (%d gemm layers), %d pass choices wrong",
          passes_measured, gemm_layers, pass_wrong);
    /* ... and on the wgmma kernels where the backend has them and they take the pass's nodes
     * (on the host emulation not the attentions' to_out forward: an operand not 128-byte
     * aligned, so its launcher too would run mma.sync) */
    CHECK(want_wgmma ? pass_wg_measured > 0 && pass_wg_measured <= passes_measured
                     : pass_wg_measured == 0,
          "tune: %d passes measured on wgmma, of %d measured on both sides", pass_wg_measured,
          passes_measured);
    CHECK(wgmma_measured == want_wgmma,
          "tune: %d layers with a wgmma time, expected %d (the backend %s the wgmma kernels)",
          wgmma_measured, want_wgmma, want_wgmma ? "has" : "lacks");
    /* the wgmma schedule: every one timed on the wgmma nodes where the backend has the kernels,
     * the fastest kept; then, where the chosen table runs any node on wgmma, every one timed on
     * the whole step (check_tune_sched), the per-node choice replaced only by one faster by
     * knob_min_gain, so that none is 1% faster than the one kept */
    int runs_wg = 0;
    for (int k = 0; k < t.n; k++) {
        runs_wg |= t.e[k].engine == SG_LAYER_OWN && t.e[k].tc == SG_TC_WGMMA;
        for (int p = 0; p < 3; p++)
            runs_wg |= t.e[k].pass_own[p] && t.e[k].pass_tc[p] == SG_TC_WGMMA;
    }
    const int first = sg_wg_sched_best(t.wg_sched_ms);
    const double *stepms = t.wg_sched_step_ms;
    /* the layers' own schedules (sg_engine_entry.wg_sched): each one 1% faster on the layer's
     * nodes than the table's, on a layer that runs wgmma; kept where the step with them was 1%
     * faster (then it is the step's time), else none */
    int own_sched = 0, layers_ok = 1;
    for (int k = 0; k < t.n; k++) {
        const sg_engine_entry *x = &t.e[k];
        int timed = 0;
        for (int s = 0; s < SG_WG_SCHEDS; s++) timed += x->wg_sched_ms[s] > 0;
        layers_ok &= (timed == 0 || (want_wgmma && timed == SG_WG_SCHEDS)) && x->wg_sched >= -1 &&
                     x->wg_sched < SG_WG_SCHEDS;
        if (x->wg_sched < 0) continue;
        own_sched++;
        layers_ok &= x->wg_sched != t.wg_sched && timed == SG_WG_SCHEDS &&
                     x->wg_sched_ms[x->wg_sched] < 0.99 * x->wg_sched_ms[t.wg_sched];
    }
    const double layers_ms = t.wg_layers_step_ms, table_ms = stepms[t.wg_sched];
    layers_ok &= own_sched ? runs_wg && layers_ms > 0 && layers_ms < 0.99 * table_ms &&
                                 t.knobs.step_ms == layers_ms
                           : layers_ms < 0 || layers_ms >= 0.99 * table_ms;
    CHECK(layers_ok,
          "tune: %d layers on their own wgmma schedule, the step with them %g ms "
          "against %g",
          own_sched, layers_ms, table_ms);
    int sched_ok = runs_wg ? table_ms <= stepms[first] && (own_sched || table_ms == t.knobs.step_ms)
                           : t.wg_sched == first;
    for (int s = 0; s < SG_WG_SCHEDS; s++) {
        sched_ok &= want_wgmma ? t.wg_sched_ms[s] > 0 && t.wg_sched_ms[first] <= t.wg_sched_ms[s]
                               : t.wg_sched_ms[s] < 0 && t.wg_sched == 0;
        sched_ok &=
            runs_wg ? stepms[s] > 0 && stepms[s] >= 0.99 * stepms[t.wg_sched] : stepms[s] < 0;
    }
    CHECK(sched_ok,
          "tune: the wgmma schedule %d of ms %g %g %g %g (nodes), %g %g %g %g (the step; any "
          "node on wgmma: %d)",
          t.wg_sched, t.wg_sched_ms[0], t.wg_sched_ms[1], t.wg_sched_ms[2], t.wg_sched_ms[3],
          stepms[0], stepms[1], stepms[2], stepms[3], runs_wg);
    printf("tune: the wgmma schedule %d (ms of its nodes: %g %g %g %g; of the step: %g %g %g "
           "%g)\n",
           t.wg_sched, t.wg_sched_ms[0], t.wg_sched_ms[1], t.wg_sched_ms[2], t.wg_sched_ms[3],
           stepms[0], stepms[1], stepms[2], stepms[3]);
    sg_plan_free(&p0);
    CHECK(ok && measured == t.n && folded_pairs > 0,
          "tune: %d layers (want %d), %d measured as expected (%d 1x1 layers on gemm, %d folded "
          "shortcuts, the rest own with cuDNN unavailable); device '%s'",
          t.n, want.n, measured, gemm_layers, folded_pairs, t.device);
    printf("tune on %s: %d conv layers, own measured (%d with a wgmma time, %d chosen on it), the "
           "library side on %d (gemm, 1x1; %d passes timed on both sides, %d also on wgmma, %d on "
           "own), %d folded shortcuts with their conv2, cudnn_ms null elsewhere (no cuDNN here)\n",
           t.backend, t.n, wgmma_measured, on_wgmma, gemm_layers, passes_measured, pass_wg_measured,
           on_own_passes, folded_pairs);
    /* a layer's time: on the CUDA backend its charged nodes' replay (1e6 ms + their count, as
     * replay_observed reports it; the wgmma pass's under its chosen schedule, set before the
     * first replay and again only where a layer's own differs, restored once after), elsewhere
     * the eager sum */
#ifdef SG_TEST_CUDA_HOST
    int replayed = 0;
    for (int k = 0; k < t.n; k++) {
        const sg_engine_entry *x = &t.e[k];
        const int own_n = charged_nodes(&c, &t, SG_LAYER_OWN, x->layer);
        const int dnn_n = charged_nodes(&c, &t, SG_LAYER_CUDNN, x->layer);
        replayed += x->own_ms == (own_n ? 1e6 + own_n : 0) &&
                    (x->cudnn_ms < 0 || x->cudnn_ms == (dnn_n ? 1e6 + dnn_n : 0));
    }
    CHECK(replayed == t.n && g_replays >= 3 * t.n && g_sched_sets >= 1 && g_sched_sets <= t.n &&
              g_sched_restores == 1,
          "tune: %d of %d layers timed by their nodes' replay (%d replays; the wgmma schedule set "
          "%d times, restored %d)",
          replayed, t.n, g_replays, g_sched_sets, g_sched_restores);
#else
    CHECK(g_replays == 0 && t.e[0].own_ms > 0 && t.e[0].own_ms < 1e6,
          "tune on the CPU: %d replays, own_ms %g", g_replays, t.e[0].own_ms);
#endif
    /* the layers' choice handed over before the GEMM and knob passes: the same layers, no
     * GEMM yet, the hash of the choices the final table has but for its GEMMs */
    CHECK(g_chosen_calls == 1 && g_chosen_n == t.n && g_chosen_gemms == 0 &&
              (t.ngemm ? g_chosen_hash != t.hash : g_chosen_hash == t.hash),
          "tune: the chosen layers handed over %d times (%d layers, %d GEMMs)", g_chosen_calls,
          g_chosen_n, g_chosen_gemms);
    /* the step knobs: on the CUDA backend the defaults' step and the best timed (a knob kept
     * only where its value beat the best so far: the step no slower than the defaults'); on the
     * CPU none timed, none set */
    const sg_step_knobs *kn = &t.knobs;
    const int knobs_valid = kn->pdl >= SG_KNOB_UNSET && kn->pdl <= 1 &&
                            kn->tc_halo >= SG_KNOB_UNSET && kn->tc_halo <= SG_KNOB_HALO_ALL &&
                            kn->tc_halo != SG_KNOB_HALO_PROLOGUE && kn->dgrad_stats <= 1 &&
                            kn->fuse_stats <= SG_KNOB_STATS_BWD &&
                            kn->norm_onepass <= SG_KNOB_STATS_BOTH &&
                            kn->norm_onepass != SG_KNOB_STATS_FWD; /* the default: not a trial */
#ifdef SG_TEST_CUDA_HOST
    CHECK(knobs_valid && kn->base_ms > 0 && kn->step_ms > 0 && kn->step_ms <= kn->base_ms,
          "tune: the step knobs pdl %d halo %d dgrad %d stats %d, %g ms against %g", kn->pdl,
          kn->tc_halo, kn->dgrad_stats, kn->fuse_stats, kn->step_ms, kn->base_ms);
#else
    CHECK(knobs_valid && kn->pdl < 0 && kn->tc_halo < 0 && kn->dgrad_stats < 0 &&
              kn->fuse_stats < 0 && kn->norm_onepass < 0 && kn->base_ms < 0,
          "tune on the CPU: step knobs timed");
#endif
    /* the attention engine: on the CUDA backend unet_tiny's attention nodes timed on both, fused
     * where their sum is knob_min_gain faster; on the CPU none timed, gemm */
#ifdef SG_TEST_CUDA_HOST
    CHECK(t.attn_ms[0] > 0 && t.attn_ms[1] > 0 &&
              t.attn == (t.attn_ms[1] < (1.0 - o.knob_min_gain) * t.attn_ms[0] ? SG_ATTN_FUSED
                                                                               : SG_ATTN_GEMM),
          "tune: attention %d from gemm %g ms, fused %g ms", t.attn, t.attn_ms[0], t.attn_ms[1]);
#else
    CHECK(t.attn == SG_ATTN_GEMM && t.attn_ms[0] < 0 && t.attn_ms[1] < 0,
          "tune on the CPU: attention timed (%d, %g, %g)", t.attn, t.attn_ms[0], t.attn_ms[1]);
#endif
    /* the GEMMs' algorithms: on the CUDA backend every GEMM of the chosen plan's step, each on
     * the fastest candidate where it beat the heuristic's first by 3%, else on the first (the
     * host emulation offers 3 candidates, the same arithmetic); on the CPU none */
    int gemm_wrong = 0;
    for (int i = 0; i < t.ngemm; i++) {
        const sg_gemm_pick *x = &t.gemm[i];
        gemm_wrong += !(x->first_ms >= 0 && x->ms >= 0 &&
                        (x->ms == x->first_ms || x->ms < 0.97 * x->first_ms) &&
                        strstr(x->key, " op") && strstr(x->key, " al"));
    }
#ifdef SG_TEST_CUDA_HOST
    const int want_gemms = 1;
#else
    const int want_gemms = 0;
#endif
    CHECK(!gemm_wrong && (want_gemms ? t.ngemm > 0 : t.ngemm == 0),
          "tune: %d GEMM picks, %d of them wrong", t.ngemm, gemm_wrong);
#ifdef SG_TEST_CUDA_HOST
    /* a run given the tuned table (auto) pins every pick: the same plan, the same GEMMs */
    {
        sg_model_cfg ct = c;
        ct.engines = &t;
        sg_exec e;
        char env[2048] = "", want_met[64];
        sg_backend *be = make_backend(NULL);
        be->conv_engine = SG_CONV_ENGINE_AUTO; /* as the tuning's: the table decides */
        int rc2 = sg_exec_init(&e, &ct, 1, be);
        if (!rc2) rc2 = sg_exec_upload_dataset(&e, data, e.plan.g.t[e.plan.io.dataset].bytes, NULL);
        if (!rc2) rc2 = sg_exec_init_state(&e, 5);
        if (!rc2) rc2 = sg_exec_step(&e);
        if (!rc2) e.be->describe(e.be, env, sizeof env);
        snprintf(want_met, sizeof want_met, "\"gemm_prefs_met\":%d,\"gemm_prefs_missed\":0,",
                 t.ngemm);
        CHECK(!rc2 && strstr(env, want_met), "the tuned table's %d GEMM picks pinned: %s (%s)",
              t.ngemm, env, rc2 ? sg_last_error() : "");
        sg_exec_free(&e);
    }
#endif
    printf("tune: %d GEMMs timed on every candidate algorithm, picks pinned by a run given the "
           "table\n",
           t.ngemm);
    /* the table fits the unfused plan too */
    sg_model_cfg unfused = c;
    unfused.fuse = 0, unfused.engines = &t;
    sg_plan pu;
    CHECK(!sg_plan_build(&pu, &unfused, 1), "the tuned table at --fuse 0: %s", sg_last_error());
    sg_plan_free(&pu);
    /* charging: the normalisation feeding a conv2 (and its backward) goes to that conv2, also
     * where conv2 has the block's shortcut folded in (conv2d_sc: conv2 is its first layer) */
    sg_plan p;
    SG_ASSERT(!sg_plan_build(&p, &c, 1));
    int norms = 0, charged = 0, folded = 0;
    for (int i = 0; i < p.g.nn; i++) {
        const int f = p.g.n[i].fwd >= 0 ? p.g.n[i].fwd : i;
        if (p.g.n[f].op != OP_NORM_ACT_TEMB) continue; /* a ResBlock's norm2: read by conv2 */
        for (int r = 0; r < p.g.nn; r++)
            folded += p.g.n[r].op == OP_CONV2D_SC && p.g.n[r].in[0] == p.g.n[f].out[0];
        char layer[SG_NAME_MAX] = "", want_layer[SG_NAME_MAX];
        norms++;
        snprintf(want_layer, sizeof want_layer, "%s", p.g.t[p.g.n[f].out[0]].name);
        char *dot = strrchr(want_layer, '.');
        if (dot) snprintf(dot, sizeof want_layer - (size_t)(dot - want_layer), ".conv2");
        charged += !sg_engine_tune_charge(&p.g, i, layer) && !strcmp(layer, want_layer);
    }
    CHECK(norms > 0 && folded > 0 && charged == norms,
          "%d of %d norm2 nodes charged to their conv2 (%d folded)", charged, norms, folded);
    sg_plan_free(&p);
    /* the unfused plan's nearest upsample (forward, recomputation, backward) goes to the conv
     * after it, the layer whose upconv2d computes it in the fused plan */
    sg_model_cfg cu = c;
    cu.fuse = 0;
    SG_ASSERT(!sg_plan_build(&p, &cu, 1));
    int ups = 0, up_charged = 0;
    for (int i = 0; i < p.g.nn; i++) {
        const int f = p.g.n[i].fwd >= 0 ? p.g.n[i].fwd : i;
        if (p.g.n[f].op != OP_UPSAMPLE2X) continue;
        char layer[SG_NAME_MAX] = "";
        ups++;
        up_charged += !sg_engine_tune_charge(&p.g, i, layer) && strstr(layer, ".upsamplers.0.conv");
    }
    CHECK(ups >= 3 && up_charged == ups, "%d of %d upsample nodes charged to the conv after them",
          up_charged, ups);
    sg_plan_free(&p);
    sg_engine_table_free(&t), sg_engine_table_free(&want);
}

/* ---- training and checkpoints */
/* `steps` steps of c from seed 11 (or resumed from `resume`), saved to `save` where given; the
 * state (parameters, both moments, the EMA) into *state (*bytes) where state is not NULL, and the
 * backend's describe() record into env (env_cap bytes) where env is not NULL */
static int run_env(const sg_model_cfg *c, const uint8_t *data, int steps, unsigned char **state,
                   int64_t *bytes, const char *save, const char *resume, char *env,
                   size_t env_cap) {
    sg_exec e;
    static const char *const may_differ[] = {"engine_table", NULL};
    int rc = sg_exec_init(&e, c, 1, make_backend(NULL)) ||
             sg_exec_upload_dataset(&e, data, e.plan.g.t[e.plan.io.dataset].bytes, NULL) ||
             (resume ? sg_exec_resume(&e, resume, may_differ) : sg_exec_init_state(&e, 11));
    for (int s = 0; s < steps && !rc; s++) rc = sg_exec_step(&e);
    if (!rc && save) rc = sg_exec_save(&e, save, NULL);
    if (!rc && state) {
        const int regions[4] = {e.plan.io.params, e.plan.io.adam_m, e.plan.io.adam_v,
                                e.plan.io.ema};
        const int64_t rb = e.plan.g.t[e.plan.io.params].bytes;
        *bytes = 4 * rb;
        *state = malloc((size_t)*bytes);
        for (int k = 0; k < 4; k++) sg_exec_read(&e, regions[k], *state + k * rb);
    }
    if (!rc && env && e.be->describe) e.be->describe(e.be, env, env_cap);
    if (rc) fprintf(stderr, "run: %s\n", sg_last_error());
    sg_exec_free(&e);
    return rc;
}
static int run(const sg_model_cfg *c, const uint8_t *data, int steps, unsigned char **state,
               int64_t *bytes, const char *save, const char *resume) {
    return run_env(c, data, steps, state, bytes, save, resume, NULL, 0);
}

static void check_train(const uint8_t *data) {
    sg_model_cfg c = tiny(), ct = c;
    sg_engine_table t, own, back;
    table_for(&c, &t, pick_conv1);
    table_for(&c, &own, NULL);
    ct.engines = &t;
    unsigned char *s0 = NULL, *st = NULL, *sr = NULL, *so = NULL;
    int64_t b0 = 0, bt = 0, br = 0, bo = 0;
    char dir[] = "/tmp/sg_engine_table_ckpt_XXXXXX", p1[300], pn[300];
    SG_ASSERT(mkdtemp(dir));
    snprintf(p1, sizeof p1, "%s/t1.sgck", dir);
    snprintf(pn, sizeof pn, "%s/none.sgck", dir);
    /* the table changes the plan, not the bits */
    CHECK(!run(&c, data, 2, &s0, &b0, pn, NULL) && !run(&ct, data, 2, &st, &bt, NULL, NULL),
          "runs failed");
    CHECK(s0 && st && b0 == bt && !memcmp(s0, st, (size_t)b0),
          "the step planned with the table differs from the step without one");
    /* the checkpoint carries the table whole */
    CHECK(!run(&ct, data, 1, NULL, NULL, p1, NULL), "1 step + save");
    CHECK(sg_exec_ckpt_engine_table(p1, &back) == 1 && back.hash == t.hash && back.n == t.n,
          "the checkpoint's table: %s", sg_last_error());
    sg_engine_table_free(&back);
    CHECK(sg_exec_ckpt_engine_table(pn, &back) == 0 && back.n == 0, "a checkpoint without one");
    /* a resume with its table: the straight run's bits */
    CHECK(!run(&ct, data, 1, &sr, &br, NULL, p1) && sr && br == bt && !memcmp(sr, st, (size_t)bt),
          "resumed with the checkpoint's table: not the straight run's state");
    /* another table on a resume: planned against the checkpoint's own, and it goes on (the
     * same bits here: no cuDNN, so no layer changes engine) */
    sg_model_cfg co = c;
    co.engines = &own;
    CHECK(!run(&co, data, 1, &so, &bo, NULL, p1) && so && bo == bt && !memcmp(so, st, (size_t)bt),
          "resumed with another table");
    /* a plain load checks the config: another table, or none, is refused */
    sg_exec e;
    CHECK(!sg_exec_init(&e, &co, 1, make_backend(NULL)), "init");
    CHECK(sg_exec_load(&e, p1, 0, 0) == SG_ERR && strstr(sg_last_error(), "engine_table"),
          "a load with another table: %s", sg_last_error());
    sg_exec_free(&e);
    CHECK(!sg_exec_init(&e, &c, 1, make_backend(NULL)), "init");
    CHECK(sg_exec_load(&e, p1, 0, 0) == SG_ERR && strstr(sg_last_error(), "engine_table"),
          "a load without the table: %s", sg_last_error());
    sg_exec_free(&e);
    unlink(p1), unlink(pn), rmdir(dir);
    free(s0), free(st), free(sr), free(so);
    sg_engine_table_free(&t), sg_engine_table_free(&own);
}

#ifdef SG_TEST_CUDA_HOST
/* ---- an own layer's tensor-core generation on the CUDA backend */
/* the host emulation's count of wgmma.mma_async instructions issued (tests/cuda_host) */
uint64_t sg_sim_wgmma_count(void);
static int pick_down1(const char *layer) {
    return !strncmp(layer, "down_blocks.1.", 14);
}
/* the generation each conv node of e's plan runs on is its layer's in t (a folded shortcut's
 * backward passes: conv2's); the count of nodes on wgmma into *wg */
static int nodes_follow(sg_exec *e, const sg_engine_table *t, int forced_mma, int *wg) {
    const sg_graph *g = &e->plan.g;
    int wrong = 0;
    *wg = 0;
    for (int i = 0; i < g->nn; i++) {
        if (!sg_op_is_conv(g->n[i].op)) continue;
        char name[160] = "";
        e->be->node_engine(e->be, &e->plan, i, name, sizeof name);
        const int want = !forced_mma && sg_engine_table_node_tc(t, g, i) == SG_TC_WGMMA;
        *wg += !strcmp(name, "wgmma");
        if (strcmp(name, want ? "wgmma" : "own") && wrong++ < 4)
            fprintf(stderr, "node %d (%s -> %s): on %s, expected %s\n", i, sg_ops[g->n[i].op].name,
                    g->t[g->n[i].out[0]].name, name, want ? "wgmma" : "own");
    }
    return wrong;
}
/* a cudnn layer's pass on own: that pass's nodes on own, the others on the library side (gemm
 * for a 1x1 layer on the host emulation), under auto */
static int pick_qkv(const char *layer) {
    return strstr(layer, ".to_qkv") != NULL;
}
static void check_backend_passes(void) {
    sg_model_cfg c = tiny();
    sg_engine_table t;
    table_for(&c, &t, pick_qkv);
    int layers = 0;
    for (int k = 0; k < t.n; k++)
        if (t.e[k].engine == SG_LAYER_CUDNN)
            layers++, SG_ASSERT(!sg_engine_table_set_pass(&t, t.e[k].layer, SG_CONV_PASS_FWD, 1,
                                                          0.1, 0.2) &&
                                !sg_engine_table_set_pass(&t, t.e[k].layer, SG_CONV_PASS_BWD_DATA,
                                                          1, 0.1, 0.2) &&
                                !sg_engine_table_set_pass_tc(
                                    &t, t.e[k].layer, SG_CONV_PASS_BWD_DATA, SG_TC_WGMMA, 0.1));
    c.engines = &t;
    sg_exec e;
    sg_backend *be = sg_backend_cuda_create(0, 1); /* auto: the table decides */
    CHECK(be && !sg_exec_init(&e, &c, 1, be), "init: %s", sg_last_error());
    const sg_graph *g = &e.plan.g;
    /* the forward on own (mma.sync), the data gradient on own's wgmma kernels (the host
     * emulation reports compute capability 9.0), the weight gradient on gemm */
    int fwd_own = 0, data_wgmma = 0, bwd_gemm = 0, wrong = 0;
    for (int i = 0; i < g->nn; i++) {
        char layer[SG_NAME_MAX], name[160] = "";
        if (sg_conv_layer_of(g, i, layer) < 0 || !pick_qkv(layer)) continue;
        be->node_engine(be, &e.plan, i, name, sizeof name);
        const int pass = sg_conv_pass_of(g->n[i].op);
        const char *want = pass == SG_CONV_PASS_FWD        ? "own"
                           : pass == SG_CONV_PASS_BWD_DATA ? "wgmma"
                                                           : "gemm";
        fwd_own += pass == SG_CONV_PASS_FWD && !strcmp(name, "own");
        data_wgmma += pass == SG_CONV_PASS_BWD_DATA && !strcmp(name, "wgmma");
        bwd_gemm += pass == SG_CONV_PASS_BWD_FILTER && !strcmp(name, "gemm");
        wrong += strcmp(name, want) != 0;
    }
    CHECK(layers > 0 && !wrong && fwd_own == layers && data_wgmma == layers && bwd_gemm == layers,
          "%d qkv layers: %d forward nodes on own, %d data gradients on wgmma, %d weight "
          "gradients on gemm, %d wrong",
          layers, fwd_own, data_wgmma, bwd_gemm, wrong);
    printf("passes: %d cudnn (1x1: gemm) layers with their forward on own and their data "
           "gradient on own's wgmma kernels (pass_tc): %d forward nodes on own, %d on wgmma, %d "
           "weight gradients on gemm\n",
           layers, fwd_own, data_wgmma, bwd_gemm);
    sg_exec_free(&e);
    sg_engine_table_free(&t);
}

/* No table, auto (graph/backend_cuda_engines.c, FWD_1X1_OWN): a bf16 1x1 forward runs on gemm where
 * its input is one tensor and the library takes the bias epilogue (describe()'s gemm_epilogue), on
 * own where its input is a concatenation (the decoder's shortcuts: the GEMM would need the fp32
 * tile) or the epilogue is unavailable (SG_GEMM_EPILOGUE=0, or a library that refuses it:
 * SG_SIM_LT_BIAS=refuse), its backward passes on gemm; in fp32 all three on gemm. Another value
 * of SG_GEMM_EPILOGUE is refused by name. */
static void check_backend_1x1_default(void) {
    const char *ways[3] = {"the epilogue", "SG_GEMM_EPILOGUE=0", "the epilogue refused"};
    for (int bf16 = 1; bf16 >= 0; bf16--)
        for (int way = 0; way < (bf16 ? 3 : 1); way++) {
            sg_model_cfg c = tiny();
            c.fuse = 0; /* every 1x1 reads a stored input */
            if (!bf16) c.act_dt = DT_F32;
            if (way == 1) setenv("SG_GEMM_EPILOGUE", "0", 1);
            if (way == 2) setenv("SG_SIM_LT_BIAS", "refuse", 1);
            sg_exec e;
            sg_backend *be = sg_backend_cuda_create(0, 1);
            CHECK(be && !sg_exec_init(&e, &c, 1, be), "init: %s", sg_last_error());
            unsetenv("SG_GEMM_EPILOGUE");
            unsetenv("SG_SIM_LT_BIAS");
            const sg_graph *g = &e.plan.g;
            const int epi = way == 0; /* the library's answer, whatever the plan's dtype */
            int fwd = 0, fwd_cat = 0, bwd = 0, wrong = 0;
            for (int i = 0; i < g->nn; i++) {
                char name[160] = "";
                if (!sg_conv_gemm_node(g, i)) continue;
                be->node_engine(be, &e.plan, i, name, sizeof name);
                const int f = sg_conv_pass_of(g->n[i].op) == SG_CONV_PASS_FWD;
                const int cat = f && g->t[g->n[i].in[0]].nparts > 0;
                fwd += f, fwd_cat += cat, bwd += !f;
                const char *want = f && bf16 && (cat || !epi) ? "own" : "gemm";
                if (strcmp(name, want) && wrong++ < 4)
                    fprintf(stderr, "%s, %s: node %d (%s -> %s): on %s, not %s\n",
                            bf16 ? "bf16" : "fp32", ways[way], i, sg_ops[g->n[i].op].name,
                            g->t[g->n[i].out[0]].name, name, want);
            }
            char env[2048] = "";
            be->describe(be, env, sizeof env);
            const int said =
                strstr(env, epi ? "\"gemm_epilogue\":true" : "\"gemm_epilogue\":false") != NULL;
            CHECK(fwd > fwd_cat && fwd_cat > 0 && bwd == 2 * fwd && !wrong && said,
                  "%s, %s, no table: %d 1x1 forward (%d concatenated) and %d backward nodes, %d "
                  "on the wrong engine; describe() %s gemm_epilogue %s",
                  bf16 ? "bf16" : "fp32", ways[way], fwd, fwd_cat, bwd, wrong,
                  said ? "says" : "does not say", epi ? "true" : "false");
            if (!wrong)
                printf("no table, %s, %s: %d 1x1 forward nodes on %s (%d concatenated on %s), %d "
                       "backward nodes on gemm\n",
                       bf16 ? "bf16" : "fp32", ways[way], fwd - fwd_cat,
                       bf16 && !epi ? "own" : "gemm", fwd_cat, bf16 ? "own" : "gemm", bwd);
            sg_exec_free(&e);
        }
    /* a misspelt switch is refused by name, not taken for 1 */
    setenv("SG_GEMM_EPILOGUE", "yes", 1);
    sg_backend *bad = sg_backend_cuda_create(0, 1);
    unsetenv("SG_GEMM_EPILOGUE");
    CHECK(!bad && strstr(sg_last_error(), "SG_GEMM_EPILOGUE=yes"),
          "SG_GEMM_EPILOGUE=yes: not refused by name (%s)", bad ? "created" : sg_last_error());
    if (bad) bad->destroy(bad);
}

/* No table, auto (graph/backend_cuda_engines.c, F32_OWN): an fp32 conv pass whose input is 32 x 32
 * or larger goes to own, counted in describe()'s f32_own_nodes in every build (without cuDNN every
 * conv is own): at unet_tiny's 32 x 32 level each pass of a 3x3 conv, at 16 x 16 none, in bf16
 * none; a table naming every layer, or SG_CONV_F32=cudnn (-1: off), leaves it to them; another
 * value of SG_CONV_F32 is refused by name. */
static int f32_own_count(const sg_model_cfg *c, const sg_engine_table *t, int *want) {
    sg_model_cfg m = *c;
    m.engines = t;
    sg_exec e;
    sg_backend *be = sg_backend_cuda_create(0, 1);
    CHECK(be && !sg_exec_init(&e, &m, 1, be), "init: %s", sg_last_error());
    const sg_graph *g = &e.plan.g;
    *want = 0;
    for (int i = 0; i < g->nn; i++) {
        const int pass = sg_conv_pass_of(g->n[i].op);
        if (pass < 0 || !sg_op_is_conv(g->n[i].op) || sg_conv_gemm_node(g, i)) continue;
        const sg_conv_dims d = sg_conv_dims_of(g, &g->n[i]);
        *want += m.act_dt == DT_F32 && d.H == 32 && d.W == 32;
    }
    char env[4096] = "";
    e.be->describe(e.be, env, sizeof env);
    const char *f = strstr(env, "\"f32_own_nodes\":");
    const int got = f ? atoi(f + 16) : -2;
    sg_exec_free(&e);
    return got;
}
/* ---- an own layer's Winograd choice on the CUDA backend */
long cuda_conv_wino_launches(void); /* kernels/cuda/cuda_kernels.h: the Winograd launches */
/* unet_tiny in fp32, unfused (the fp32 kernels have no prologue) */
static sg_model_cfg tiny_f32(void) {
    sg_model_cfg c = tiny();
    c.act_dt = DT_F32;
    c.fuse = 0;
    return c;
}
long cuda_conv_f32_tc_launches(void); /* the tile launches on the tensor cores */
unsigned cuda_conv2d_thin_passes(int Ci, int Co, int K, int S); /* the passes the thin take */
/* a form's backend case: its variable, launch count, describe's keys, the nodes it takes */
typedef struct {
    const form_case *f;
    const char *env, *text_key, *nodes_key;
    long (*launches)(void);
    int (*takes)(const sg_graph *g, int node);
} form_backend;
/* the Winograd kernels: 3x3 stride 1 padding 1 (the conv1 layers have 32 or more channels) */
static int wino_takes(const sg_graph *g, int i) {
    const sg_conv_dims d = sg_conv_dims_of(g, &g->n[i]);
    return d.K == 3 && d.S == 1 && d.pad == 1;
}
/* the direct tiles: no 1x1 stride-1 GEMM, and a pass the thin kernels leave */
static int tiles_take(const sg_graph *g, int i) {
    const sg_conv_dims d = sg_conv_dims_of(g, &g->n[i]);
    return !(d.K == 1 && d.S == 1) &&
           !(cuda_conv2d_thin_passes(d.Ci, d.Co, d.K, d.S) & (1u << sg_conv_pass_of(g->n[i].op)));
}
/* one run of `steps` steps of c with the form's variable set to v (NULL: unset): the state,
 * describe's record, the form's launches it made and the nodes describe says it took */
static int run_form(const form_backend *fb, const sg_model_cfg *c, const uint8_t *data,
                    const char *v, int steps, unsigned char **state, int64_t *bytes, char *env,
                    size_t cap, long *launches, int *nodes) {
    if (v)
        setenv(fb->env, v, 1);
    else
        unsetenv(fb->env);
    const long w0 = fb->launches();
    const int rc = run_env(c, data, steps, state, bytes, NULL, NULL, env, cap);
    unsetenv(fb->env);
    *launches = fb->launches() - w0;
    const char *f = strstr(env, fb->nodes_key);
    *nodes = f ? atoi(f + strlen(fb->nodes_key)) : -2;
    return rc;
}
/* The table's fp32 form where its variable is unset (SG_CONV_WINO: the layers that say "wino";
 * SG_CONV_F32_TC: "f32tc"): their passes that form takes, and only theirs, run so (describe:
 * "table", the nodes; the kernels' launch count), a table with every layer on it gives the bits
 * of the variable's 1 without a table's choice, and the environment's 0 or 1 wins over the
 * table. */
static void check_backend_form(const uint8_t *data, const form_backend *fb) {
    const form_case *fc = fb->f;
    sg_model_cfg c = tiny_f32(), cn = c;
    sg_engine_table t, all;
    table_for(&c, &t, NULL);
    table_for(&c, &all, NULL);
    /* the passes the form takes of the conv1 layers, each a node the table runs so */
    sg_plan p;
    SG_ASSERT(!sg_plan_build(&p, &c, 1));
    int want = 0;
    for (int i = 0; i < p.g.nn; i++) {
        char layer[SG_NAME_MAX];
        if (!sg_op_is_conv(p.g.n[i].op) || sg_conv_layer_of(&p.g, i, layer) < 0) continue;
        want += pick_conv1(layer) && fb->takes(&p.g, i);
    }
    sg_plan_free(&p);
    for (int k = 0; k < t.n; k++) {
        if (pick_conv1(t.e[k].layer)) SG_ASSERT(!fc->set(&t, t.e[k].layer, 1, 2, 1));
        SG_ASSERT(!fc->set(&all, all.e[k].layer, 1, 2, 1));
    }
    c.engines = &t;
    sg_model_cfg ca = c;
    ca.engines = &all;
    unsigned char *s0 = NULL, *s1 = NULL, *sa = NULL, *se = NULL, *sz = NULL;
    int64_t b0 = 0, b1 = 0, ba = 0, be = 0, bz = 0;
    char e0[4096] = "", e1[4096] = "", ea[4096] = "", ee[4096] = "", ez[4096] = "";
    long l0, l1, la, le, lz;
    int n0, n1, na, ne, nz;
    const int steps = 2;
    CHECK(!run_form(fb, &cn, data, NULL, steps, &s0, &b0, e0, sizeof e0, &l0, &n0) &&
              !run_form(fb, &c, data, NULL, steps, &s1, &b1, e1, sizeof e1, &l1, &n1) &&
              !run_form(fb, &ca, data, NULL, steps, &sa, &ba, ea, sizeof ea, &la, &na) &&
              !run_form(fb, &cn, data, "1", steps, &se, &be, ee, sizeof ee, &le, &ne) &&
              !run_form(fb, &c, data, "0", steps, &sz, &bz, ez, sizeof ez, &lz, &nz),
          "runs (%s): %s", fb->env, sg_last_error());
    char off[64], table[64], on[64];
    snprintf(off, sizeof off, "%s\"off\"", fb->text_key);
    snprintf(table, sizeof table, "%s\"table\"", fb->text_key);
    snprintf(on, sizeof on, "%s\"on\"", fb->text_key);
    /* no table: the CUDA cores' direct tiles */
    CHECK(strstr(e0, off) && n0 == -1 && l0 == 0, "%s, no table: off, %d nodes, %ld launches: %s",
          fb->env, n0, l0, e0);
    /* the conv1 layers: their passes alone, other bits than the direct tiles' */
    CHECK(want > 0 && strstr(e1, table) && n1 == want && l1 > 0 && b1 == b0 &&
              memcmp(s1, s0, (size_t)b0),
          "the conv1 layers on %s: %d nodes (want %d), %ld launches, %s bits: %s", fc->words, n1,
          want, l1, b1 == b0 && !memcmp(s1, s0, (size_t)b0) ? "the FMA tiles'" : "other", e1);
    /* every layer: the variable's 1's nodes, launches and bits */
    CHECK(strstr(ea, table) && strstr(ee, on) && na == ne && la == le && na > n1 && ba == be &&
              !memcmp(sa, se, (size_t)ba),
          "every layer on %s (%d nodes, %ld launches) against %s=1 (%d, %ld): %s", fc->words, na,
          la, fb->env, ne, le,
          ba == be && !memcmp(sa, se, (size_t)ba) ? "same bits" : "other bits");
    /* the variable's 0 over the table's: the FMA tiles' bits */
    CHECK(strstr(ez, off) && nz == -1 && lz == 0 && bz == b0 && !memcmp(sz, s0, (size_t)b0),
          "%s=0 over the table: %d nodes, %ld launches: %s", fb->env, nz, lz, ez);
    printf("backend: the table's %s layers (%d of the conv1 layers' passes, %ld launches in %d "
           "steps), every layer's = %s=1's bits, the environment's 0 over it\n",
           fc->words, n1, l1, steps, fb->env);
    free(s0), free(s1), free(sa), free(se), free(sz);
    sg_engine_table_free(&t), sg_engine_table_free(&all);
}
static void check_backend_forms(const uint8_t *data) {
    const form_backend fb[2] = {
        {&form_cases[0], "SG_CONV_WINO",
         "\"conv_wino\":", "\"wino_nodes\":", cuda_conv_wino_launches, wino_takes},
        {&form_cases[1], "SG_CONV_F32_TC",
         "\"conv_f32_tc\":", "\"f32tc_nodes\":", cuda_conv_f32_tc_launches, tiles_take}};
    for (int k = 0; k < 2; k++) check_backend_form(data, &fb[k]);
}

/* The tuning's fp32 forms: each own node the direct tiles take is timed with their products on
 * the CUDA cores and on the tensor cores, each one Winograd takes as Winograd too (here faked:
 * 2 ms on the FMAs; on the tensor cores 1.5 ms for the conv2 layers' passes, 2.5 for the
 * others'; as Winograd 1 ms for the conv1 layers', 3 for the others'), summed per layer
 * (fma_ms / f32tc_ms, direct_ms / wino_ms) and each layer given the fastest combination: the
 * conv1 layers Winograd on the FMA tiles, the conv2 layers the tensor cores, none the others
 * (on a tie, the form it ran with). SG_CONV_WINO or SG_CONV_F32_TC in the tuning's environment
 * leaves its form unmeasured and off (it overrides a table); both, nothing timed. */
static int pick_conv2(const char *layer) {
    const size_t n = strlen(layer);
    return n > 6 && !strcmp(layer + n - 6, ".conv2");
}
static int (*g_form_real)(sg_backend *, const sg_plan *, int, int, float *);
static int g_form_timed[3]; /* FMA, TC, Winograd */
static int tne_form_faked(sg_backend *be, const sg_plan *p, int node, int engine, float *ms) {
    const int rc = g_form_real(be, p, node, engine, ms);
    char layer[SG_NAME_MAX];
    const int f = engine == SG_TIME_OWN_TILES_FMA  ? 0
                  : engine == SG_TIME_OWN_TILES_TC ? 1
                  : engine == SG_TIME_OWN_WINO     ? 2
                                                   : -1;
    if (rc || *ms < 0 || f < 0 || sg_conv_layer_of(&p->g, node, layer) < 0) return rc;
    g_form_timed[f]++;
    *ms = f == 0   ? 2.0f
          : f == 1 ? (pick_conv2(layer) ? 1.5f : 2.5f)
                   : (pick_conv1(layer) ? 1.0f : 3.0f);
    return rc;
}
static sg_backend *make_backend_form(const void *ctx) {
    sg_backend *be = make_backend(ctx);
    if (be && be->time_node_engine)
        g_form_real = be->time_node_engine, be->time_node_engine = tne_form_faked;
    return be;
}
static void check_tune_forms(const uint8_t *data) {
    const sg_model_cfg c = tiny_f32();
    sg_engine_tune_opts o = tune_opts(&c, data, make_backend_form, NULL);
    o.knob_steps = 0;
    /* env 0-3: SG_CONV_WINO=0 (bit 0), SG_CONV_F32_TC=0 (bit 1); 4: SG_CONV_F32_TC=1 alone */
    for (int env = 0; env < 5; env++) {
        const int tc_set = env == 4; /* the tiles' products on the tensor cores, not measured */
        const int wino_tuned = tc_set || !(env & 1), tc_tuned = !tc_set && !(env & 2);
        if (!wino_tuned) setenv("SG_CONV_WINO", "0", 1);
        if (!tc_tuned) setenv("SG_CONV_F32_TC", tc_set ? "1" : "0", 1);
        g_form_timed[0] = g_form_timed[1] = g_form_timed[2] = 0;
        sg_engine_table t;
        const int rc = sg_engine_tune(&c, &o, &t);
        unsetenv("SG_CONV_WINO"), unsetenv("SG_CONV_F32_TC");
        char what[64];
        snprintf(what, sizeof what, "fp32%s%s", wino_tuned ? "" : ", SG_CONV_WINO=0",
                 tc_tuned ? ""
                 : tc_set ? ", SG_CONV_F32_TC=1"
                          : ", SG_CONV_F32_TC=0");
        CHECK(!rc && !strcmp(t.precision, "fp32"), "tune (%s): %s", what, sg_last_error());
        /* a layer's sums: its nodes the tiles took (2 ms each on the FMAs), of those the ones
         * Winograd took, their direct side in the layer's product form */
        int tiles = 0, winos = 0, on_tc = 0, on_wino = 0, wrong = 0;
        for (int k = 0; !rc && k < t.n; k++) {
            const sg_engine_entry *x = &t.e[k];
            const double *f = x->f32tc_ms, *w = x->wino_ms;
            const int own = x->engine == SG_LAYER_OWN, c1 = pick_conv1(x->layer),
                      c2 = pick_conv2(x->layer);
            const int nt = f[0] > 0 ? (int)(f[0] / 2.0 + 0.5) : 0;
            const int nw = w[1] > 0 ? (int)(w[1] / (c1 ? 1.0 : 3.0) + 0.5) : 0;
            const int want_tc = own && tc_tuned && nt && c2;
            const int want_wino = own && wino_tuned && nw && c1;
            tiles += nt > 0, winos += nw > 0, on_tc += x->f32tc, on_wino += x->wino;
            const int bad_tc =
                tc_tuned ? nt && f[1] != nt * (c2 ? 1.5 : 2.5) : f[0] >= 0 || f[1] >= 0;
            const int bad_w = wino_tuned
                                  ? nw && w[0] != nw * (x->f32tc || tc_set ? (c2 ? 1.5 : 2.5) : 2.0)
                                  : w[0] >= 0 || w[1] >= 0;
            if (bad_tc || bad_w || x->f32tc != want_tc || x->wino != want_wino) {
                if (wrong++ < 4)
                    fprintf(stderr,
                            "layer %s: f32tc %d (want %d), FMA %g ms, TC %g; wino %d (want %d), "
                            "direct %g ms, Winograd %g\n",
                            x->layer, x->f32tc, want_tc, f[0], f[1], x->wino, want_wino, w[0],
                            w[1]);
            }
        }
        const int *n = g_form_timed;
        const int timed_ok = !wino_tuned && !tc_tuned
                                 ? !n[0] && !n[1] && !n[2]
                                 : n[tc_set] > 0 && (tc_tuned ? n[1] == n[0] : !n[!tc_set]) &&
                                       (wino_tuned ? n[2] > 0 : !n[2]);
        CHECK(!rc && !wrong && timed_ok &&
                  (tc_tuned ? tiles > 0 && on_tc > 0 && on_tc < tiles : !tiles && !on_tc) &&
                  (wino_tuned ? winos > 0 && on_wino > 0 && on_wino < winos : !winos && !on_wino),
              "tune (%s): %d layers measured on the tiles both ways, %d on the tensor cores; %d "
              "with Winograd passes, %d on Winograd; %d not as expected; nodes timed %d on the "
              "FMAs, %d on the tensor cores, %d as Winograd",
              what, tiles, on_tc, winos, on_wino, wrong, n[0], n[1], n[2]);
        printf("tune (%s): %d layers' tile passes timed both ways, %d faster on the tensor cores; "
               "%d with Winograd's, %d faster so; nodes timed %d/%d/%d\n",
               what, tiles, on_tc, winos, on_wino, n[0], n[1], n[2]);
        sg_engine_table_free(&t);
    }
}

static void check_backend_f32_own(void) {
    sg_model_cfg c = tiny();
    c.img = c.data_h = c.data_w = 32; /* a 32 x 32 level and a 16 x 16 one */
    for (int k = 0; k < c.nattn; k++) c.attn_res[k] *= 2;
    c.fuse = 0;
    int want = 0, got = 0;
    c.act_dt = DT_F32;
    got = f32_own_count(&c, NULL, &want);
    CHECK(want > 0 && got == want, "fp32, no table: %d passes on own by F32_OWN, want %d", got,
          want);
    printf("no table, fp32: %d conv passes at 32 x 32 on own (F32_OWN), none at 16 x 16\n", got);
    sg_engine_table t;
    table_for(&c, &t, NULL); /* every layer named */
    got = f32_own_count(&c, &t, &want);
    CHECK(got == 0, "fp32, a table naming every layer: %d passes on own by F32_OWN", got);
    sg_engine_table_free(&t);
    setenv("SG_CONV_F32", "cudnn", 1);
    got = f32_own_count(&c, NULL, &want);
    CHECK(got == -1, "SG_CONV_F32=cudnn: f32_own_nodes %d, want -1 (off)", got);
    setenv("SG_CONV_F32", "yes", 1);
    sg_backend *be = sg_backend_cuda_create(0, 1);
    CHECK(!be && strstr(sg_last_error(), "SG_CONV_F32=yes: expected own"), "SG_CONV_F32=yes: %s",
          be ? "accepted" : sg_last_error());
    if (be) be->destroy(be);
    unsetenv("SG_CONV_F32");
    c.act_dt = DT_BF16;
    got = f32_own_count(&c, NULL, &want);
    CHECK(got == 0, "bf16: %d passes on own by F32_OWN", got);
    printf("F32_OWN: a table's layers, SG_CONV_F32=cudnn and bf16 leave it off; SG_CONV_F32=yes "
           "refused\n");
}

/* The table's wgmma schedule reaches the CUDA backend (describe()'s wg_persist and wg_fill: the
 * emulation's SMs where on), each knob unless SG_WG_PERSIST or SG_WG_FILL sets it: the
 * environment wins, knob by knob. */
static void check_backend_wg_sched(void) {
    sg_model_cfg c = tiny();
    sg_engine_table t;
    table_for(&c, &t, NULL);
    c.engines = &t;
    for (int k = 0; k < 4; k++) {
        t.wg_sched = k < 3 ? k : SG_WG_SCHED_PERSIST | SG_WG_SCHED_FILL;
        if (k == 3) setenv("SG_WG_PERSIST", "0", 1);
        sg_exec e;
        char env[2048] = "";
        CHECK(!sg_exec_init(&e, &c, 1, make_backend(NULL)), "init: %s", sg_last_error());
        if (e.be && e.be->describe) e.be->describe(e.be, env, sizeof env);
        const char *p = strstr(env, "\"wg_persist\":"), *f = strstr(env, "\"wg_fill\":");
        const long pv = p ? atol(p + 13) : -1, fv = f ? atol(f + 10) : -1;
        const int want_p = k == 1, want_f = k >= 2; /* k = 3: persist forced off by the env */
        CHECK(p && f && (pv > 0) == want_p && (fv > 0) == want_f,
              "schedule %d%s: describe() says %s", t.wg_sched,
              k == 3 ? " under SG_WG_PERSIST=0" : "", env);
        sg_exec_free(&e);
    }
    unsetenv("SG_WG_PERSIST");
    printf("the table's wgmma schedule applied by the backend; SG_WG_PERSIST overrides it\n");
    sg_engine_table_free(&t);
}

/* A layer's own wgmma schedule reaches its nodes' launches alone (the wgmma kernels' count of
 * launches on a persistent grid): every layer on wgmma; with the table's schedule persistent
 * (a launches), one layer's own persistent under the table's plain (b) and that layer's own
 * plain under the table's persistent (c) split them, b + c = a; every other layer's own
 * persistent under the table's plain gives c again (a schedule that leaked into the next
 * launches would move launches between b and c alike, but not here); the same bits every way;
 * SG_WG_PERSIST=0 overrides a layer's own. */
long cuda_conv_wgmma_persistent_launches(void);
static long persistent_run(const sg_model_cfg *c, const uint8_t *data, unsigned char **state,
                           int64_t *bytes, int *layer_nodes) {
    const long n0 = cuda_conv_wgmma_persistent_launches();
    char env[2048] = "";
    CHECK(!run_env(c, data, 2, state, bytes, NULL, NULL, env, sizeof env), "the run failed");
    const long n = cuda_conv_wgmma_persistent_launches() - n0;
    const char *w = strstr(env, "\"wg_layer_nodes\":");
    *layer_nodes = w ? atoi(w + 17) : -1;
    return n;
}
static void check_backend_layer_sched(const uint8_t *data) {
    sg_model_cfg c = tiny();
    sg_engine_table t;
    table_for(&c, &t, NULL);
    int picked = 0;
    for (int k = 0; k < t.n; k++) {
        SG_ASSERT(!sg_engine_table_set_tc(&t, t.e[k].layer, SG_TC_WGMMA, 1.0));
        picked += pick_down1(t.e[k].layer);
    }
    c.engines = &t;
    unsigned char *s[6] = {NULL};
    int64_t b[6] = {0};
    int nodes[6];
    long n[6];
    /* 0: none persistent; 1: all (the table's); 2: one layer's own; 3: all but that layer */
    for (int run_k = 0; run_k < 4; run_k++) {
        t.wg_sched = run_k == 1 || run_k == 3 ? SG_WG_SCHED_PERSIST : 0;
        for (int k = 0; k < t.n; k++)
            SG_ASSERT(!sg_engine_table_set_sched(&t, t.e[k].layer,
                                                 run_k < 2 || !pick_down1(t.e[k].layer) ? -1
                                                 : run_k == 2
                                                     ? SG_WG_SCHED_PERSIST | SG_WG_SCHED_FILL
                                                     : SG_WG_SCHED_FILL,
                                                 NULL));
        n[run_k] = persistent_run(&c, data, &s[run_k], &b[run_k], &nodes[run_k]);
    }
    /* 4: one layer's own persistent, under SG_WG_PERSIST=0 */
    t.wg_sched = 0;
    for (int k = 0; k < t.n; k++)
        if (pick_down1(t.e[k].layer))
            SG_ASSERT(!sg_engine_table_set_sched(&t, t.e[k].layer, SG_WG_SCHED_PERSIST, NULL));
    setenv("SG_WG_PERSIST", "0", 1);
    n[4] = persistent_run(&c, data, &s[4], &b[4], &nodes[4]);
    unsetenv("SG_WG_PERSIST");
    /* 5: every other layer's own persistent, the table's plain */
    for (int k = 0; k < t.n; k++)
        SG_ASSERT(!sg_engine_table_set_sched(
            &t, t.e[k].layer, pick_down1(t.e[k].layer) ? -1 : SG_WG_SCHED_PERSIST, NULL));
    n[5] = persistent_run(&c, data, &s[5], &b[5], &nodes[5]);
    CHECK(picked > 0 && n[0] == 0 && n[1] > 0 && n[2] > 0 && n[3] > 0 && n[2] + n[3] == n[1] &&
              n[4] == 0 && n[5] == n[3],
          "persistent launches: none %ld, all %ld, the layer's own %ld, all but the layer %ld "
          "(want those two to sum to all), the layer's own under SG_WG_PERSIST=0 %ld, the other "
          "layers' own %ld (want all but the layer's)",
          n[0], n[1], n[2], n[3], n[4], n[5]);
    CHECK(nodes[0] == 0 && nodes[1] == 0 && nodes[2] > 0 && nodes[3] == nodes[2] &&
              nodes[4] == nodes[2],
          "describe()'s wg_layer_nodes: %d %d %d %d %d", nodes[0], nodes[1], nodes[2], nodes[3],
          nodes[4]);
    /* both knobs set by the environment: no layer's own schedule left to apply */
    setenv("SG_WG_PERSIST", "1", 1), setenv("SG_WG_FILL", "0", 1);
    sg_exec e;
    char env[2048] = "";
    CHECK(!sg_exec_init(&e, &c, 1, make_backend(NULL)), "init: %s", sg_last_error());
    if (e.be && e.be->describe) e.be->describe(e.be, env, sizeof env);
    sg_exec_free(&e);
    unsetenv("SG_WG_PERSIST"), unsetenv("SG_WG_FILL");
    CHECK(strstr(env, "\"wg_layer_nodes\":0,") || strstr(env, "\"wg_layer_nodes\":0}"),
          "both knobs from the environment: %s", env);
    int same = 1;
    for (int k = 1; k < 6; k++) same &= s[k] && s[0] && b[k] == b[0] && !memcmp(s[k], s[0], b[0]);
    CHECK(same, "a schedule changed the bits");
    printf("a layer's own wgmma schedule: on its %d nodes alone (persistent launches %ld + %ld = "
           "%ld), the same bits, SG_WG_PERSIST overrides it\n",
           nodes[2], n[2], n[3], n[1]);
    for (int k = 0; k < 6; k++) free(s[k]);
    sg_engine_table_free(&t);
}

/* The table's step knobs applied by the backend where the environment leaves them unset
 * (describe() records them; the statistics' epilogues by their count, against SG_FUSE_STATS
 * itself), and the environment's value where it sets one. */
static int stats_fused_of(const char *env) {
    const char *p = strstr(env, "\"norm_stats_fused\":");
    return p ? atoi(p + 19) : -1;
}
static void describe_with(const sg_model_cfg *c, char *env, int cap) {
    sg_exec e;
    env[0] = 0;
    CHECK(!sg_exec_init(&e, c, 1, make_backend(NULL)), "init: %s", sg_last_error());
    if (e.be && e.be->describe) e.be->describe(e.be, env, cap);
    sg_exec_free(&e);
}
/* The table's attention engine where SG_ATTN leaves it unset (describe's attn_engine), and
 * the environment's over it. */
static void check_backend_attn(void) {
    sg_model_cfg c = tiny();
    sg_engine_table t;
    table_for(&c, &t, NULL);
    c.engines = &t;
    char env[2048];
    describe_with(&c, env, sizeof env);
    CHECK(strstr(env, "\"attn_engine\":\"gemm\""), "no attention engine in the table: %s", env);
    sg_engine_table_set_attn(&t, SG_ATTN_FUSED, 2, 1);
    describe_with(&c, env, sizeof env);
    CHECK(strstr(env, "\"attn_engine\":\"fused\""), "the table's fused attention: %s", env);
    setenv("SG_ATTN", "gemm", 1);
    describe_with(&c, env, sizeof env);
    unsetenv("SG_ATTN");
    CHECK(strstr(env, "\"attn_engine\":\"gemm\""), "SG_ATTN=gemm over the table's fused: %s", env);
    printf("backend: the table's attention engine, the environment's over it\n");
    sg_engine_table_free(&t);
}

static void check_backend_knobs(void) {
    sg_model_cfg c = tiny();
    sg_engine_table t;
    table_for(&c, &t, NULL);
    c.engines = &t;
    char env[2048], ref[2048];
    describe_with(&c, env, sizeof env);
    const int stats_all = stats_fused_of(env);
    const char *o1 = strstr(env, "\"norm_onepass\":"); /* the default: the forward in one pass */
    CHECK(strstr(env, "\"pdl\":false") && strstr(env, "\"tc_halo\":\"prologue\"") &&
              strstr(env, "\"dgrad_stats\":false") && o1 && atoi(o1 + 15) > 0 &&
              strstr(env, "\"norm_bwd_onepass\":-1,") && stats_all > 0,
          "the defaults: %s", env);
    setenv("SG_FUSE_STATS", "fwd", 1);
    describe_with(&c, ref, sizeof ref);
    unsetenv("SG_FUSE_STATS");
    t.knobs.pdl = 1, t.knobs.tc_halo = SG_KNOB_HALO_ALL, t.knobs.dgrad_stats = 1;
    t.knobs.fuse_stats = SG_KNOB_STATS_FWD;
    describe_with(&c, env, sizeof env);
    CHECK(strstr(env, "\"pdl\":true") && strstr(env, "\"tc_halo\":\"all\"") &&
              strstr(env, "\"dgrad_stats\":true") && stats_fused_of(env) == stats_fused_of(ref) &&
              stats_fused_of(ref) < stats_all,
          "the table's knobs: %s (SG_FUSE_STATS=fwd: %d fused, all: %d)", env, stats_fused_of(ref),
          stats_all);
    setenv("SG_PDL", "0", 1), setenv("SG_TC_HALO", "0", 1), setenv("SG_TC_DGRAD_STATS", "0", 1);
    setenv("SG_FUSE_STATS", "1", 1);
    describe_with(&c, env, sizeof env);
    CHECK(strstr(env, "\"pdl\":false") && strstr(env, "\"tc_halo\":\"none\"") &&
              strstr(env, "\"dgrad_stats\":false") && stats_fused_of(env) == stats_all,
          "the environment over the table's knobs: %s", env);
    unsetenv("SG_PDL"), unsetenv("SG_TC_HALO"), unsetenv("SG_TC_DGRAD_STATS");
    unsetenv("SG_FUSE_STATS");
    /* the one-pass normalisations: the table's directions (backward alone, then both), then
     * the environment's "0" and "fwd" over them */
    t.knobs = (sg_step_knobs){.pdl = SG_KNOB_UNSET,
                              .tc_halo = SG_KNOB_UNSET,
                              .dgrad_stats = SG_KNOB_UNSET,
                              .fuse_stats = SG_KNOB_UNSET,
                              .norm_onepass = SG_KNOB_STATS_BWD,
                              .base_ms = -1,
                              .step_ms = -1};
    describe_with(&c, env, sizeof env);
    const char *ob = strstr(env, "\"norm_bwd_onepass\":");
    CHECK(strstr(env, "\"norm_onepass\":-1,") && ob && atoi(ob + 19) > 0,
          "the table's norm_onepass bwd: %s", env);
    t.knobs.norm_onepass = SG_KNOB_STATS_BOTH;
    describe_with(&c, env, sizeof env);
    const char *op = strstr(env, "\"norm_onepass\":");
    ob = strstr(env, "\"norm_bwd_onepass\":");
    CHECK(op && atoi(op + 15) > 0 && ob && atoi(ob + 19) > 0, "the table's norm_onepass 1: %s",
          env);
    setenv("SG_NORM_ONEPASS", "0", 1);
    describe_with(&c, env, sizeof env);
    CHECK(strstr(env, "\"norm_onepass\":-1,") && strstr(env, "\"norm_bwd_onepass\":-1,"),
          "SG_NORM_ONEPASS=0 over the table's: %s", env);
    unsetenv("SG_NORM_ONEPASS");
    /* a table that kept neither direction (the tuning's trial of 0) turns the default off */
    t.knobs.norm_onepass = SG_KNOB_STATS_NONE;
    describe_with(&c, env, sizeof env);
    CHECK(strstr(env, "\"norm_onepass\":-1,") && strstr(env, "\"norm_bwd_onepass\":-1,"),
          "the table's norm_onepass 0: %s", env);
    t.knobs.norm_onepass = SG_KNOB_STATS_BOTH;
    setenv("SG_NORM_ONEPASS", "fwd", 1);
    describe_with(&c, env, sizeof env);
    unsetenv("SG_NORM_ONEPASS");
    op = strstr(env, "\"norm_onepass\":");
    CHECK(op && atoi(op + 15) > 0 && strstr(env, "\"norm_bwd_onepass\":-1,"),
          "SG_NORM_ONEPASS=fwd over the table's: %s", env);
    /* a value it does not know: no backend, and the error names the variable and its values */
    setenv("SG_NORM_ONEPASS", "both", 1);
    sg_backend *bad = sg_backend_cuda_create(0, 1);
    unsetenv("SG_NORM_ONEPASS");
    CHECK(!bad && strstr(sg_last_error(), "SG_NORM_ONEPASS=both") &&
              strstr(sg_last_error(), "fwd (the default), 1 (forward and backward), bwd or 0"),
          "SG_NORM_ONEPASS=both: %s", bad ? "a backend" : sg_last_error());
    if (bad) bad->destroy(bad);
    printf("the table's step knobs applied by the backend; the environment overrides them\n");
    sg_engine_table_free(&t);
}

static void check_backend_tc(const uint8_t *data) {
    sg_model_cfg c = tiny(), cw = c;
    sg_engine_table t, mma;
    table_for(&c, &t, NULL);
    table_for(&c, &mma, NULL);
    int picked = 0;
    for (int k = 0; k < t.n; k++)
        if (pick_down1(t.e[k].layer))
            picked++, SG_ASSERT(!sg_engine_table_set_tc(&t, t.e[k].layer, SG_TC_WGMMA, 1.0));
    cw.engines = &t;
    /* every node where its layer says */
    sg_exec e;
    int wg = 0;
    CHECK(!sg_exec_init(&e, &cw, 1, make_backend(NULL)), "init: %s", sg_last_error());
    CHECK(!nodes_follow(&e, &t, 0, &wg) && wg > 0, "the table's generations: %d nodes on wgmma",
          wg);
    const int on_wg = wg;
    sg_exec_free(&e);
    /* under auto, where a fold's 1x1 shortcut passes run on gemm, each shortcut fold still
     * takes its conv2 layer's generation */
    sg_backend *ba = sg_backend_cuda_create(0, 1);
    if (ba) ba->conv_engine = SG_CONV_ENGINE_AUTO;
    CHECK(ba && !sg_exec_init(&e, &cw, 1, ba), "init under auto: %s", sg_last_error());
    int folds_wg = 0, folds_wrong = 0;
    for (int i = 0; ba && i < e.plan.g.nn; i++) {
        char names[2][SG_NAME_MAX], name[160] = "";
        if (e.plan.g.n[i].op != OP_CONV2D_SC || sg_conv_layers_computed(&e.plan.g, i, names) != 2)
            continue;
        const sg_engine_entry *x = sg_engine_table_find(&t, names[0]);
        const int want = x && x->engine == SG_LAYER_OWN && x->tc == SG_TC_WGMMA;
        e.be->node_engine(e.be, &e.plan, i, name, sizeof name);
        folds_wg += want, folds_wrong += want != !strcmp(name, "wgmma");
    }
    CHECK(folds_wg > 0 && !folds_wrong,
          "under auto: %d shortcut folds of wgmma layers, %d not on their generation", folds_wg,
          folds_wrong);
    sg_exec_free(&e);
    /* SG_CONV_TC=mma forces mma.sync on every own conv, whatever the table */
    setenv("SG_CONV_TC", "mma", 1);
    CHECK(!sg_exec_init(&e, &cw, 1, make_backend(NULL)), "init: %s", sg_last_error());
    CHECK(!nodes_follow(&e, &t, 1, &wg) && wg == 0, "SG_CONV_TC=mma: %d nodes on wgmma", wg);
    sg_exec_free(&e);
    setenv("SG_CONV_TC", "tensor", 1);
    CHECK(sg_exec_init(&e, &cw, 1, make_backend(NULL)) == SG_ERR &&
              strstr(sg_last_error(), "SG_CONV_TC=tensor"),
          "a bad SG_CONV_TC: %s", sg_last_error());
    sg_exec_free(&e);
    unsetenv("SG_CONV_TC");
    /* other kernels, other bits; a resume keeps them: the straight run's bits */
    unsigned char *sm = NULL, *sw = NULL, *sr = NULL;
    int64_t bm = 0, bw = 0, br = 0;
    char dir[] = "/tmp/sg_engine_table_tc_XXXXXX", p1[300];
    SG_ASSERT(mkdtemp(dir));
    snprintf(p1, sizeof p1, "%s/w1.sgck", dir);
    sg_model_cfg cm = c;
    cm.engines = &mma;
    const uint64_t w0 = sg_sim_wgmma_count();
    CHECK(!run(&cm, data, 2, &sm, &bm, NULL, NULL), "the mma.sync run failed");
    const uint64_t w1 = sg_sim_wgmma_count();
    CHECK(!run(&cw, data, 2, &sw, &bw, NULL, NULL) && !run(&cw, data, 1, NULL, NULL, p1, NULL) &&
              !run(&cw, data, 1, &sr, &br, NULL, p1),
          "runs failed");
    const uint64_t w2 = sg_sim_wgmma_count();
    CHECK(w1 == w0 && w2 > w1, "wgmma instructions: %llu in the all-mma run, %llu with the table",
          (unsigned long long)(w1 - w0), (unsigned long long)(w2 - w1));
    /* the emulation sums a k16 slice alike for both generations, and the two kernels' y and dx
     * run the same slices in the same order (kernels/cuda/conv_wgmma.cu): whatever the weight
     * gradients' grouping, equal bits here would not show the kernels did not run; the count
     * does. On a GPU the bits may differ, and the checkpoint records the generation per node. */
    (void)sm;
    CHECK(sr && br == bw && !memcmp(sr, sw, (size_t)bw),
          "resumed with the checkpoint's table: not the straight run's state");
    printf("generation: %d layers on wgmma (%d conv nodes, %llu wgmma instructions in 4 steps), "
           "SG_CONV_TC=mma overrides, a resume gives the straight run's bits\n",
           picked, on_wg, (unsigned long long)(w2 - w1));
    unlink(p1), rmdir(dir);
    free(sm), free(sw), free(sr);
    sg_engine_table_free(&t), sg_engine_table_free(&mma);
}
#endif

#ifdef SG_TEST_CUDA_HOST
/* The tuning's backends for check_tune_sched: a layer replay in a plan with any node on wgmma
 * reports half a millisecond less than the same replay without (so the own layers go there);
 * a whole step reports 100 ms, 90 ms under the schedule g_sched_want (set once the layers are
 * chosen: another than the per-node pass chose). */
static int (*g_steps_real)(sg_backend *, const sg_plan *, int, float *);
static int g_sched_want = -1, g_sched_steps[SG_WG_SCHEDS];
static int plan_runs_wgmma(const sg_plan *p) {
    for (int i = 0; i < p->g.nn; i++)
        if (sg_engine_table_node_tc(p->cfg.engines, &p->g, i) == SG_TC_WGMMA) return 1;
    return 0;
}
/* ... and which schedule the tuning forces for a layer's replay (be->wg_sched): in a wgmma plan,
 * down_blocks.1's layers under their favourite (both knobs: layer_sched_pick), the others under
 * the table's (not that one) */
static void (*g_force_real)(sg_backend *, int);
static int g_forced = -1, g_replay_own, g_replay_wrong;
static void force_observed(sg_backend *be, int s) {
    g_force_real(be, s);
    g_forced = s;
}
static int replay_wg_favoured(sg_backend *be, const sg_plan *p, const int *nodes, int n, int reps,
                              float *ms) {
    const int rc = g_replay_real(be, p, nodes, n, reps, ms);
    const int wg = plan_runs_wgmma(p);
    char layer[SG_NAME_MAX];
    if (wg && n && !sg_engine_tune_charge(&p->g, nodes[0], layer)) {
        const int down1 = pick_down1(layer), own = g_forced == SG_WG_SCHEDS - 1;
        g_replay_own += down1 && own;
        g_replay_wrong += g_forced < 0 || down1 != own;
    }
    const float less = wg ? 0.5f : 0.0f;
    for (int r = 0; r < reps && !rc; r++) ms[r] = n ? 1e6f + (float)n - less : 0.0f;
    return rc;
}
/* ... and a step with layers on their own schedules: g_layers_ms with both knobs' layers and
 * the others', g_down1_ms with only down_blocks.1's layers (both knobs), 100 ms with only the
 * others' */
static float g_layers_ms, g_down1_ms;
static int g_layers_steps;
static int steps_sched(sg_backend *be, const sg_plan *p, int n, float *ms) {
    const int rc = g_steps_real(be, p, n, ms);
    const sg_engine_table *t = p->cfg.engines;
    const int s = t ? t->wg_sched : 0;
    int layers = 0; /* the schedules layers take, a bitmask */
    for (int k = 0; t && k < t->n; k++)
        if (t->e[k].wg_sched >= 0) layers |= 1 << t->e[k].wg_sched;
    g_sched_steps[s]++, g_layers_steps += layers != 0;
    const float sched_ms = s == g_sched_want ? 90.0f : 100.0f;
    for (int r = 0; r < n && !rc; r++)
        ms[r] = !layers                             ? sched_ms
                : layers == 1 << (SG_WG_SCHEDS - 1) ? g_down1_ms
                : layers & 1 << (SG_WG_SCHEDS - 1)  ? g_layers_ms
                                                    : 100.0f;
    return rc;
}
/* ... and a wgmma node under a schedule: 1 ms under its layer's favourite (both knobs on for
 * down_blocks.1's layers, neither for the others), 2 ms under the others */
static int (*g_tne_real)(sg_backend *, const sg_plan *, int, int, float *);
static int g_sched_sc, g_sched_up; /* such timings of shortcut folds, of upsample convs */
static int tne_layer_favoured(sg_backend *be, const sg_plan *p, int node, int engine, float *ms) {
    const int rc = g_tne_real(be, p, node, engine, ms);
    const sg_op op = p->g.n[node].op;
    const int timed = !rc && *ms >= 0 && engine >= SG_TIME_WGMMA_SCHED;
    g_sched_sc += timed && op == OP_CONV2D_SC;
    g_sched_up +=
        timed && (op == OP_UPCONV2D || op == OP_UPCONV2D_BWD_DATA || op == OP_UPCONV2D_BWD_WEIGHT);
    char layer[SG_NAME_MAX];
    if (!rc && *ms >= 0 && engine >= SG_TIME_WGMMA_SCHED &&
        engine < SG_TIME_WGMMA_SCHED + SG_WG_SCHEDS && !sg_engine_tune_charge(&p->g, node, layer))
        *ms = engine - SG_TIME_WGMMA_SCHED == (pick_down1(layer) ? SG_WG_SCHEDS - 1 : 0) ? 1.0f
                                                                                         : 2.0f;
    return rc;
}
static sg_backend *make_backend_sched(const void *ctx) {
    sg_backend *be = make_backend(ctx);
    if (be && be->time_nodes_replay && be->time_steps && be->time_node_engine) {
        g_replay_real = be->time_nodes_replay, be->time_nodes_replay = replay_wg_favoured;
        g_steps_real = be->time_steps, be->time_steps = steps_sched;
        g_tne_real = be->time_node_engine, be->time_node_engine = tne_layer_favoured;
        if (be->wg_sched) g_force_real = be->wg_sched, be->wg_sched = force_observed;
    }
    return be;
}
static int sched_chosen(const sg_engine_table *t, const void *ctx) {
    (void)ctx;
    g_sched_want = (t->wg_sched + 1) % SG_WG_SCHEDS;
    return SG_OK;
}

/* The wgmma schedule as one more knob on the whole replayed step (sg_engine_table
 * .wg_sched_step_ms): where the chosen table runs nodes on wgmma, the schedules the per-node
 * pass did not choose are timed on the step and one faster by knob_min_gain replaces it; the
 * step knobs that gain nothing stay unset. */
static void check_tune_sched(const uint8_t *data, float layers_ms, float down1_ms) {
    const sg_model_cfg c = tiny();
    const sg_engine_tune_opts o = tune_opts(&c, data, make_backend_sched, sched_chosen);
    sg_engine_table t;
    g_layers_ms = layers_ms, g_down1_ms = down1_ms, g_layers_steps = 0, g_sched_want = -1;
    g_sched_sc = g_sched_up = 0;
    g_forced = -1, g_replay_own = g_replay_wrong = 0;
    memset(g_sched_steps, 0, sizeof g_sched_steps);
    const int rc = sg_engine_tune(&c, &o, &t);
    CHECK(!rc, "tune (the schedule on the step): %s", sg_last_error());
    int on_wg = 0, steps_ok = 1;
    for (int k = 0; !rc && k < t.n; k++)
        on_wg += t.e[k].engine == SG_LAYER_OWN && t.e[k].tc == SG_TC_WGMMA;
    /* the layers' own schedules, against the table's 1 (the step's choice): down_blocks.1's
     * both knobs, the others' neither, wherever the layer runs on wgmma (an own layer on it, or
     * a cudnn layer's pass: which of them the emulation's timings decide); tried on the step all
     * at once and kept where it is 1% faster than 90 ms; where not, the others' alone (100 ms:
     * not kept), then down_blocks.1's alone, kept on the same rule */
    const int kept = layers_ms < 0.99f * 90.0f, down1_kept = !kept && down1_ms < 0.99f * 90.0f;
    const double step_ms = kept ? layers_ms : down1_kept ? down1_ms : 90.0;
    int own = 0, down1 = 0, wrong = 0;
    for (int k = 0; !rc && k < t.n; k++) {
        const sg_engine_entry *x = &t.e[k];
        /* (a layer runs wgmma nodes where it is own on wgmma or a pass of it is) */
        int runs = x->engine == SG_LAYER_OWN && x->tc == SG_TC_WGMMA;
        for (int q = 0; q < 3; q++) runs |= x->pass_own[q] && x->pass_tc[q] == SG_TC_WGMMA;
        const int pick =
            runs && x->wg_sched_ms[0] > 0 ? (pick_down1(x->layer) ? SG_WG_SCHEDS - 1 : 0) : -1;
        const int want = kept || (down1_kept && pick == SG_WG_SCHEDS - 1) ? pick : -1;
        own += x->wg_sched >= 0, down1 += x->wg_sched == SG_WG_SCHEDS - 1;
        if (x->wg_sched != want && wrong++ < 4)
            fprintf(stderr,
                    "layer %s (%s, %s): schedule %d, expected %d (its ms %g %g %g %g, the table's "
                    "%d)\n",
                    x->layer, sg_layer_engine_name(x->engine), sg_tc_name(x->tc), x->wg_sched, want,
                    x->wg_sched_ms[0], x->wg_sched_ms[1], x->wg_sched_ms[2], x->wg_sched_ms[3],
                    t.wg_sched);
    }
    /* the layer replays that decide own against cuDNN: each under the schedule it would take */
    CHECK(g_replay_own > 0 && !g_replay_wrong,
          "tune: %d replays of down_blocks.1's layers on their own schedule, %d replays under "
          "another than the layer would take",
          g_replay_own, g_replay_wrong);
    /* the shortcut folds and the upsample convs on wgmma timed under each schedule too (their
     * layers' sums include them; under auto a fold's 1x1 backward passes are on gemm, and its
     * generation is still its layer's) */
    CHECK(g_sched_sc > 0 && g_sched_sc % SG_WG_SCHEDS == 0 && g_sched_up > 0 &&
              g_sched_up % SG_WG_SCHEDS == 0,
          "tune: %d schedule timings of shortcut folds, %d of upsample conv passes", g_sched_sc,
          g_sched_up);
    CHECK(!rc && g_layers_steps == (kept ? 1 : 3) &&
              t.wg_layers_step_ms == (down1_kept ? down1_ms : layers_ms) && down1 <= own &&
              (kept         ? own > down1 && down1 > 0
               : down1_kept ? own == down1 && own > 0
                            : own == 0) &&
              !wrong && t.knobs.step_ms == step_ms,
          "tune, the layers' own schedules (their step %g ms, %s; down_blocks.1's alone %g ms, "
          "%s): %d step(s) with them, the table's %g ms; %d layers on their own (%d on both "
          "knobs), %d not as expected; the step %g ms",
          layers_ms, kept ? "kept" : "not kept", down1_ms, down1_kept ? "kept" : "not kept",
          g_layers_steps, t.wg_layers_step_ms, own, down1, wrong, t.knobs.step_ms);
    for (int s = 0; s < SG_WG_SCHEDS; s++) {
        steps_ok &= t.wg_sched_step_ms[s] == (s == g_sched_want ? 90.0 : 100.0);
        /* the chosen schedule's step: the defaults' and the four knobs' eight trials */
        steps_ok &= g_sched_steps[s] >= 1;
    }
    const sg_step_knobs *kn = &t.knobs;
    CHECK(!rc && on_wg > 0 && g_sched_want >= 0 && t.wg_sched == g_sched_want && steps_ok &&
              kn->base_ms == 100.0 && kn->pdl < 0 && kn->tc_halo < 0 && kn->dgrad_stats < 0 &&
              kn->fuse_stats < 0,
          "tune: %d layers on wgmma, schedule %d (want %d), its step %g %g %g %g ms; knobs %d %d "
          "%d %d, %g ms against %g",
          on_wg, t.wg_sched, g_sched_want, t.wg_sched_step_ms[0], t.wg_sched_step_ms[1],
          t.wg_sched_step_ms[2], t.wg_sched_step_ms[3], kn->pdl, kn->tc_halo, kn->dgrad_stats,
          kn->fuse_stats, kn->step_ms, kn->base_ms);
    /* ... kept by the JSON */
    char *text = sg_engine_table_json(&t);
    sg_engine_table back;
    int same = text && !sg_engine_table_parse(text, "schedule", &back) &&
               back.wg_sched == t.wg_sched && back.wg_layers_step_ms == t.wg_layers_step_ms &&
               !memcmp(back.wg_sched_step_ms, t.wg_sched_step_ms, sizeof back.wg_sched_step_ms);
    for (int k = 0; same && k < t.n; k++)
        same = back.e[k].wg_sched == t.e[k].wg_sched &&
               !memcmp(back.e[k].wg_sched_ms, t.e[k].wg_sched_ms, sizeof back.e[k].wg_sched_ms);
    CHECK(same, "the schedules' times through the JSON: %s", text ? text : sg_last_error());
    if (text) sg_engine_table_free(&back);
    free(text);
    printf("tune: %d layers on wgmma; the schedule on the whole step: %d (%g %g %g %g ms), the "
           "per-node choice replaced; %d layers on their own (%g ms: %s); schedule timings of "
           "folds %d, of upsample convs %d; %d layer replays on their own schedule\n",
           on_wg, t.wg_sched, t.wg_sched_step_ms[0], t.wg_sched_step_ms[1], t.wg_sched_step_ms[2],
           t.wg_sched_step_ms[3], own, t.wg_layers_step_ms,
           kept         ? "all kept"
           : down1_kept ? "down_blocks.1's kept alone"
                        : "none kept",
           g_sched_sc, g_sched_up, g_replay_own);
    sg_engine_table_free(&t);
}
#endif

int main(void) {
#ifdef SG_TEST_CUDA_HOST
    if (!sg_cuda_available()) {
        printf("no CUDA backend: skipped\n");
        return SG_TEST_SKIP;
    }
#endif
    const sg_model_cfg c = tiny();
    uint8_t *data = data_for(&c);
    check_io();
    check_plan();
    check_folds();
    check_tune(data);
    check_train(data);
#ifdef SG_TEST_CUDA_HOST
    check_tune_sched(data, 80.0f, 95.0f); /* all at once kept */
    check_tune_sched(data, 95.0f, 85.0f); /* not, but down_blocks.1's alone */
    check_tune_sched(data, 95.0f, 95.0f); /* none */
    check_backend_tc(data);
    check_backend_wg_sched();
    check_backend_layer_sched(data);
    check_backend_knobs();
    check_backend_attn();
    check_backend_passes();
    check_backend_1x1_default();
    check_backend_f32_own();
    check_backend_forms(data);
    check_tune_forms(data);
#endif
    free(data);
    return sg_test_end();
}
