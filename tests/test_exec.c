/* test_exec.c — the executor on the CPU backend: the whole training step runs, is
 * deterministic (same seed => same bits, twice), learns (loss falls on a fixed batch source),
 * and resumes exactly from a checkpoint (straight N steps == K steps, save, load, N-K steps),
 * bitwise for parameters, AdamW state, EMA and every per-step loss. bf16 too. And the
 * backward pass's recomputed activations equal the forward's, bit for bit.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoints/ckpt.h"
#include "graph/exec.h"
#include "kernels/cpu/cpu_kernels.h"
#include "tests/sg_test.h"

static uint8_t *fake_data(const sg_model_cfg *c) {
    int64_t n = c->data_n * c->data_h * c->data_w * c->in_ch;
    uint8_t *d = malloc((size_t)n);
    uint64_t s = 99;
    /* smooth blobs rather than noise: something a UNet can learn a little in a few steps */
    for (int64_t i = 0; i < c->data_n; i++)
        for (int y = 0; y < c->data_h; y++)
            for (int x = 0; x < c->data_w; x++)
                for (int ch = 0; ch < c->in_ch; ch++) {
                    int64_t k = ((i * c->data_h + y) * c->data_w + x) * c->in_ch + ch;
                    int v = ((x + (int)i) % 8 < 4) ^ ((y + ch) % 8 < 4) ? 220 : 30;
                    d[k] = (uint8_t)(v + (int)(sg_test_next(&s) % 16));
                }
    return d;
}

typedef struct {
    float losses[64];
    unsigned char *state; /* params, m, v, ema regions */
    int64_t state_bytes;
} run_result;

static int open_exec(sg_exec *e, const sg_model_cfg *c, const uint8_t *data) {
    if (sg_exec_init(e, c, 1, sg_backend_cpu_create())) return SG_ERR;
    const sg_tensor *d = &e->plan.g.t[e->plan.io.dataset];
    return sg_exec_upload_dataset(e, data, d->bytes, NULL);
}

static void snapshot(sg_exec *e, run_result *r) {
    const sg_plan *p = &e->plan;
    int regions[4] = {p->io.params, p->io.adam_m, p->io.adam_v, p->io.ema};
    int64_t rb = p->g.t[p->io.params].bytes;
    r->state_bytes = 4 * rb;
    r->state = malloc((size_t)r->state_bytes);
    for (int k = 0; k < 4; k++) sg_exec_read(e, regions[k], r->state + k * rb);
}

static void run(const sg_model_cfg *c, const uint8_t *data, int steps, uint64_t seed,
                run_result *r) {
    sg_exec e;
    CHECK(open_exec(&e, c, data) == SG_OK, "exec init: %s", sg_last_error());
    CHECK(sg_exec_init_state(&e, seed) == SG_OK, "init state");
    for (int s = 0; s < steps; s++) {
        CHECK(sg_exec_step(&e) == SG_OK, "step: %s", sg_last_error());
        r->losses[s] = sg_exec_loss(&e);
    }
    CHECK(sg_exec_step_count(&e) == steps, "step counter %lld", (long long)sg_exec_step_count(&e));
    snapshot(&e, r);
    sg_exec_free(&e);
}

/* bf16 runs: the weight copy holds round(params) element for element (sg_f32_to_bf16), and it is
 * what every bf16 conv / linear of the step reads: the first index where not, or -1. fp32 runs
 * have no copy (and no bytes for one). */
static int64_t copy_mismatch(sg_exec *e) {
    const sg_plan *p = &e->plan;
    const sg_graph *g = &p->g;
    if (p->io.params_bf16 < 0) {
        CHECK(p->role_bytes[ROLE_PARAM_BF16] == 0, "an fp32 plan has %lld bytes of bf16 copy",
              (long long)p->role_bytes[ROLE_PARAM_BF16]);
        return -1;
    }
    for (int i = 0; i < g->nn; i++) {
        const sg_node *nd = &g->n[i];
        if (nd->op != OP_CONV2D && nd->op != OP_CONV2D_BWD_DATA && nd->op != OP_LINEAR &&
            nd->op != OP_LINEAR_BWD_DATA)
            continue;
        const sg_tensor *w = &g->t[nd->in[1]];
        CHECK(w->role == ROLE_PARAM_BF16 && w->copy_of >= 0 &&
                  (w->offset - g->t[p->io.params_bf16].offset) * 2 ==
                      g->t[w->copy_of].offset - g->t[p->io.params].offset,
              "node %d (%s) does not read its weights' bf16 copy (%s)", i, sg_ops[nd->op].name,
              w->name);
    }
    const int64_t n = sg_numel(&g->t[p->io.params]);
    CHECK(sg_numel(&g->t[p->io.params_bf16]) == n, "the copy has %lld elements, params %lld",
          (long long)sg_numel(&g->t[p->io.params_bf16]), (long long)n);
    float *w = malloc((size_t)n * 4);
    sg_bf16 *h = malloc((size_t)n * 2);
    int64_t bad = -1;
    if (sg_exec_read(e, p->io.params, w) || sg_exec_read(e, p->io.params_bf16, h)) bad = 0;
    for (int64_t i = 0; i < n && bad < 0; i++)
        if (h[i] != sg_f32_to_bf16(w[i])) bad = i;
    free(w), free(h);
    return bad;
}

/* The noising table the CUDA kernel reads: written by sg_exec_init, every timestep's
 * coefficients as the CPU reference computes them (kernels/cpu: cpu_ddpm_table). */
static void check_ddpm_table(sg_exec *e, const char *name) {
    const sg_plan *p = &e->plan;
    CHECK(p->io.ddpm_table >= 0, "%s: the training plan has no noising table", name);
    if (p->io.ddpm_table < 0) return;
    const int T = p->cfg.T;
    sg_ddpm_row *want = malloc(sizeof(sg_ddpm_row) * (size_t)T);
    sg_ddpm_row *got = malloc(sizeof(sg_ddpm_row) * (size_t)T);
    const sg_betas betas = {
        .T = T, .schedule = p->cfg.beta_schedule, .beta1 = p->cfg.beta1, .betaT = p->cfg.betaT};
    cpu_ddpm_table(want, &betas);
    CHECK(p->g.t[p->io.ddpm_table].bytes == (int64_t)sizeof(sg_ddpm_row) * T &&
              sg_exec_read(e, p->io.ddpm_table, got) == SG_OK &&
              !memcmp(got, want, sizeof(sg_ddpm_row) * (size_t)T),
          "%s: the noising table is not cpu_ddpm_table's", name);
    free(want), free(got);
}

static void test_determinism_and_resume(sg_dtype dt) {
    sg_model_cfg c;
    sg_model_preset(&c, "unet_tiny");
    c.act_dt = dt;
    c.data_n = 64;
    c.warmup = 1; /* full learning rate at once: the loss moves within a few steps */
    c.lr = 1e-3f;
    uint8_t *data = fake_data(&c);
    const char *name = dt == DT_BF16 ? "bf16" : "fp32";
    enum { N = 6, K = 3 };

    run_result a = {0}, b = {0};
    run(&c, data, N, 7, &a);
    run(&c, data, N, 7, &b);
    for (int s = 0; s < N; s++)
        CHECK(isfinite(a.losses[s]), "%s: loss %d = %g", name, s, a.losses[s]);
    CHECK(!memcmp(a.losses, b.losses, sizeof(float) * N), "%s: same seed, different losses", name);
    CHECK(a.state_bytes == b.state_bytes && !memcmp(a.state, b.state, (size_t)a.state_bytes),
          "%s: same seed, different final state", name);
    run_result other = {0};
    run(&c, data, 2, 8, &other);
    CHECK(memcmp(a.losses, other.losses, sizeof(float) * 2), "%s: seed changes nothing", name);

    /* stop at K, checkpoint, resume in a fresh executor, finish */
    char dir[] = "/tmp/sg_exec_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char path[256];
    snprintf(path, sizeof path, "%s/k.sgck", dir);
    run_result r = {0};
    sg_exec e;
    CHECK(open_exec(&e, &c, data) == SG_OK, "init");
    sg_exec_init_state(&e, 7);
    CHECK(copy_mismatch(&e) < 0, "%s: the weight copy after initialisation is not round(params)",
          name);
    for (int s = 0; s < K; s++) {
        sg_exec_step(&e);
        r.losses[s] = sg_exec_loss(&e);
    }
    CHECK(copy_mismatch(&e) < 0, "%s: the weight copy after %d steps is not round(params)", name,
          K);
    CHECK(sg_exec_save(&e, path, NULL) == SG_OK, "%s: save: %s", name, sg_last_error());
    sg_exec_free(&e);
    CHECK(open_exec(&e, &c, data) == SG_OK, "init 2");
    check_ddpm_table(&e, name);
    CHECK(sg_test_poison_state(&e) == SG_OK, "%s: poison: %s", name, sg_last_error());
    CHECK(sg_exec_load(&e, path, 0, 0) == SG_OK, "%s: load: %s", name, sg_last_error());
    CHECK(sg_exec_step_count(&e) == K, "%s: resumed at step %lld", name,
          (long long)sg_exec_step_count(&e));
    /* what the first resumed step's convs and linears read: round(the loaded params) */
    int64_t bad = copy_mismatch(&e);
    CHECK(bad < 0, "%s: after the resume the weight copy differs from round(params) at %lld", name,
          (long long)bad);
    for (int s = K; s < N; s++) {
        sg_exec_step(&e);
        r.losses[s] = sg_exec_loss(&e);
    }
    snapshot(&e, &r);
    sg_exec_free(&e);
    CHECK(!memcmp(a.losses, r.losses, sizeof(float) * N), "%s: resumed losses differ", name);
    CHECK(r.state_bytes == a.state_bytes && !memcmp(a.state, r.state, (size_t)a.state_bytes),
          "%s: resumed state differs from the straight run", name);

    /* a checkpoint from another config is refused, naming the difference */
    sg_model_cfg c2 = c;
    c2.ch = 16;
    sg_exec e2;
    CHECK(open_exec(&e2, &c2, data) == SG_OK, "init other config");
    CHECK(sg_exec_load(&e2, path, 0, 0) == SG_ERR, "%s: loaded a checkpoint of another config",
          name);
    CHECK(strstr(sg_last_error(), "ch") != NULL, "error names the field: %s", sg_last_error());
    sg_exec_free(&e2);
    unlink(path);
    rmdir(dir);

    free(a.state), free(b.state), free(r.state), free(other.state);
    free(data);
}

/* Conv engines in checkpoints (graph/exec.c): a backend with several conv engines (CUDA:
 * own / cudnn) has each conv node's recorded in the checkpoint; a resume whose engines differ
 * counts (and warns about) the layers. Played here by the CPU backend with a node_engine hook
 * whose answer the test sets. */
static const char *g_engine_odd = "cudnn e7 ws0", *g_engine_even = "cudnn e7 ws0";
static void fake_node_engine(sg_backend *be, const sg_plan *p, int node, char *buf, int cap) {
    (void)be;
    int op = p->g.n[node].op;
    int conv = op == OP_CONV2D || op == OP_CONV2D_BWD_DATA || op == OP_CONV2D_BWD_WEIGHT;
    snprintf(buf, (size_t)cap, "%s", !conv ? "" : node % 2 ? g_engine_odd : g_engine_even);
}
/* and engine choices in describe()'s record, as the CUDA backend's (SG_ATTN, SG_CONV_TC,
 * SG_CONV_WINO) */
static const char *g_attn_engine = "gemm", *g_conv_tc = "mma", *g_conv_wino = "off";
static void fake_describe(sg_backend *be, char *buf, int cap) {
    (void)be;
    snprintf(
        buf, (size_t)cap,
        "{\"backend\":\"fake\",\"attn_engine\":\"%s\",\"conv_tc\":\"%s\",\"conv_wino\":\"%s\"}",
        g_attn_engine, g_conv_tc, g_conv_wino);
}
static int open_exec_engines(sg_exec *e, const sg_model_cfg *c, const uint8_t *data, int hook) {
    sg_backend *be = sg_backend_cpu_create();
    if (be && hook) be->node_engine = fake_node_engine, be->describe = fake_describe;
    if (sg_exec_init(e, c, 1, be)) return SG_ERR;
    const sg_tensor *d = &e->plan.g.t[e->plan.io.dataset];
    return sg_exec_upload_dataset(e, data, d->bytes, NULL);
}

static void test_conv_engine_record(void) {
    sg_model_cfg c;
    sg_model_preset(&c, "unet_tiny");
    c.batch = 2, c.data_n = 8;
    uint8_t *data = fake_data(&c);
    char dir[] = "/tmp/sg_exec_engXXXXXX", path[256];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(path, sizeof path, "%s/k.sgck", dir);
    sg_exec e;
    CHECK(open_exec_engines(&e, &c, data, 1) == SG_OK, "init: %s", sg_last_error());
    sg_exec_init_state(&e, 3);
    CHECK(sg_exec_step(&e) == SG_OK, "step: %s", sg_last_error());
    CHECK(sg_exec_save(&e, path, NULL) == SG_OK, "save: %s", sg_last_error());
    int convs = 0, odd = 0;
    for (int i = 0; i < e.plan.g.nn; i++) {
        int op = e.plan.g.n[i].op;
        if (op == OP_CONV2D || op == OP_CONV2D_BWD_DATA || op == OP_CONV2D_BWD_WEIGHT)
            convs++, odd += i % 2;
    }
    sg_exec_free(&e);
    CHECK(convs > 0 && odd > 0 && odd < convs, "unet_tiny has conv nodes on both parities");
    /* the record as a resume hands it to the next backend (sg_backend.conv_pins) */
    char *pins = sg_exec_ckpt_conv_engines(path);
    CHECK(pins && strstr(pins, "\"table\":[\"cudnn e7 ws0\"]") && strstr(pins, "\"nodes\":[0,"),
          "the checkpoint's conv-engine record: %s", pins ? pins : "(none)");
    free(pins);
    /* the same engines: nothing differs */
    CHECK(open_exec_engines(&e, &c, data, 1) == SG_OK, "init 2");
    CHECK(sg_exec_load(&e, path, 0, 0) == SG_OK, "load: %s", sg_last_error());
    CHECK(e.ckpt_conv_engines_differ == 0, "same engines, %d differ", e.ckpt_conv_engines_differ);
    CHECK(e.ckpt_env_engines_differ == 0, "same env engines, %d reported as differing",
          e.ckpt_env_engines_differ);
    sg_exec_free(&e);
    /* another attention engine, then two, then three (the Winograd convolutions too):
     * reported, the load goes on */
    for (int more = 0; more < 3; more++) {
        g_attn_engine = "fused", g_conv_tc = more ? "wgmma" : "mma";
        g_conv_wino = more == 2 ? "on" : "off";
        CHECK(open_exec_engines(&e, &c, data, 1) == SG_OK, "init 2b");
        CHECK(sg_exec_load(&e, path, 0, 0) == SG_OK, "load 2b: %s", sg_last_error());
        CHECK(e.ckpt_env_engines_differ == 1 + more, "%d env engines differ, %d reported", 1 + more,
              e.ckpt_env_engines_differ);
        sg_exec_free(&e);
    }
    g_attn_engine = "gemm", g_conv_tc = "mma", g_conv_wino = "off";
    /* the odd nodes on another engine: exactly those differ */
    g_engine_odd = "own";
    CHECK(open_exec_engines(&e, &c, data, 1) == SG_OK, "init 3");
    CHECK(sg_exec_load(&e, path, 0, 0) == SG_OK, "a resume on other engines still loads: %s",
          sg_last_error());
    CHECK(e.ckpt_conv_engines_differ == odd, "%d conv nodes differ, %d expected",
          e.ckpt_conv_engines_differ, odd);
    sg_exec_free(&e);
    /* one engine (no hook): no record to compare, nothing reported */
    CHECK(open_exec_engines(&e, &c, data, 0) == SG_OK, "init 4");
    CHECK(sg_exec_load(&e, path, 0, 0) == SG_OK, "load 4: %s", sg_last_error());
    CHECK(e.ckpt_conv_engines_differ == 0 && e.ckpt_env_engines_differ == 0,
          "a one-engine backend compares nothing");
    /* and what it writes carries no record */
    char path2[300];
    snprintf(path2, sizeof path2, "%s/k2.sgck", dir);
    CHECK(sg_exec_save(&e, path2, NULL) == SG_OK, "save 2: %s", sg_last_error());
    pins = sg_exec_ckpt_conv_engines(path2);
    CHECK(pins == NULL, "a one-engine checkpoint has no conv-engine record: %s", pins);
    free(pins);
    unlink(path2);
    sg_exec_free(&e);
    g_engine_odd = "cudnn e7 ws0";
    unlink(path);
    rmdir(dir);
    free(data);
}

/* A copy of checkpoint src at dst whose metadata says another plan (one hex digit of
 * plan_hash changed): what a build that plans the same config differently wrote. */
static int copy_other_plan(const char *src, const char *dst) {
    ckpt_file *f = ckpt_open(src);
    if (!f) return SG_ERR;
    int n = ckpt_count(f), rc = SG_OK;
    ckpt_tensor_desc *d = calloc((size_t)n, sizeof *d);
    void **bufs = calloc((size_t)n, sizeof *bufs);
    char *meta = strdup(ckpt_meta(f)), *h = strstr(meta, "\"plan_hash\":\"");
    for (int i = 0; i < n && !rc; i++) {
        ckpt_entry en;
        ckpt_tensor_info(f, i, &en);
        bufs[i] = malloc((size_t)en.raw_bytes + 1);
        rc = ckpt_read(f, i, bufs[i], en.raw_bytes);
        d[i] = (ckpt_tensor_desc){.name = en.name,
                                  .role = en.role,
                                  .dtype = en.dtype,
                                  .ndim = en.ndim,
                                  .data = bufs[i],
                                  .bytes = en.raw_bytes,
                                  .offset = en.offset};
        memcpy(d[i].shape, en.shape, sizeof d[i].shape);
    }
    if (!h) rc = SG_ERR;
    if (!rc) {
        char *digit = h + strlen("\"plan_hash\":\"");
        *digit = *digit == '0' ? '1' : '0';
        rc = ckpt_write(dst, meta, d, n, NULL);
    }
    for (int i = 0; i < n; i++) free(bufs[i]);
    free(bufs), free(d), free(meta);
    ckpt_close(f);
    return rc;
}

/* A checkpoint of the same config but another plan (another build's graph or layout) is
 * refused, by a plain load and by a resume that lets the learning rate change (which hashes
 * into the plan, so the resume compares against the plan of the checkpoint's own config), with
 * a message that says so; the genuine checkpoint resumes with another learning rate. */
static void test_other_plan_refused(void) {
    sg_model_cfg c;
    sg_model_preset(&c, "unet_tiny");
    c.batch = 2, c.data_n = 8;
    uint8_t *data = fake_data(&c);
    char dir[] = "/tmp/sg_exec_planXXXXXX", path[256], other[256];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(path, sizeof path, "%s/k.sgck", dir);
    snprintf(other, sizeof other, "%s/other.sgck", dir);
    sg_exec e;
    CHECK(open_exec(&e, &c, data) == SG_OK, "init: %s", sg_last_error());
    sg_exec_init_state(&e, 3);
    CHECK(sg_exec_step(&e) == SG_OK && sg_exec_save(&e, path, NULL) == SG_OK, "save: %s",
          sg_last_error());
    sg_exec_free(&e);
    CHECK(copy_other_plan(path, other) == SG_OK, "rewrite: %s", sg_last_error());
    static const char *const lr_only[] = {"lr", NULL};
    sg_model_cfg c2 = c;
    c2.lr *= 0.5f;
    for (int k = 0; k < 2; k++) {
        CHECK(open_exec(&e, k ? &c2 : &c, data) == SG_OK, "init %d", k);
        int rc = k ? sg_exec_resume(&e, other, lr_only) : sg_exec_load(&e, other, 0, 0);
        CHECK(rc == SG_ERR && strstr(sg_last_error(), "plan differs from this build") &&
                  strstr(sg_last_error(), "--init-from"),
              "%s of another plan: rc %d, %s", k ? "resume" : "load", rc, sg_last_error());
        sg_exec_free(&e);
    }
    CHECK(open_exec(&e, &c2, data) == SG_OK, "init 3");
    CHECK(sg_exec_resume(&e, path, lr_only) == SG_OK, "resume with another lr: %s",
          sg_last_error());
    sg_exec_free(&e);
    unlink(path), unlink(other), rmdir(dir);
    free(data);
}

/* Recomputation (planner/autodiff.c): every copy a recompute node makes in the backward pass
 * has, bit for bit, the value of the forward tensor it stands for. The step runs node by node
 * on the CPU backend; each tensor marked for recomputation is read as soon as its producer ran
 * (its memory is reused long before the backward pass), and each copy as soon as its recompute
 * node ran. fp32 and bf16, dropout on (the temb variant's mask comes from Philox again). */
static void test_recompute_bits(sg_dtype dt) {
    sg_model_cfg c;
    sg_model_preset(&c, "unet_tiny");
    c.act_dt = dt, c.batch = 2, c.data_n = 8;
    uint8_t *data = fake_data(&c);
    sg_exec e;
    CHECK(open_exec(&e, &c, data) == SG_OK, "init: %s", sg_last_error());
    sg_exec_init_state(&e, 5);
    const sg_graph *g = &e.plan.g;
    unsigned char **fwd = calloc((size_t)g->nt, sizeof *fwd);
    int compared = 0, copies = 0;
    for (int step = 0; step < 2; step++) /* step 1: another dropout mask */
        for (int i = 0; i < g->nn; i++) {
            CHECK(sg_exec_run_nodes(&e, i, i + 1) == SG_OK, "node %d: %s", i, sg_last_error());
            for (int k = 0; k < g->n[i].nout; k++) { /* attention's P is its output 1 */
                const int y = g->n[i].out[k];
                if (g->t[y].recompute) {
                    free(fwd[y]);
                    fwd[y] = malloc((size_t)g->t[y].bytes);
                    sg_exec_read(&e, y, fwd[y]);
                }
            }
            const int y = g->n[i].out[0];
            if (g->t[y].role == ROLE_RECOMPUTED) {
                const sg_node *fn = &g->n[g->n[i].fwd];
                int f = -1; /* the forward output this copy stands for */
                for (int k = 0; k < fn->nout; k++)
                    if (g->t[fn->out[k]].recomputed == y) f = fn->out[k];
                SG_ASSERT(f >= 0);
                unsigned char *copy = malloc((size_t)g->t[y].bytes);
                sg_exec_read(&e, y, copy);
                CHECK(fwd[f] && g->t[y].bytes == g->t[f].bytes &&
                          !memcmp(copy, fwd[f], (size_t)g->t[y].bytes),
                      "%s: step %d: %s differs from the forward's %s", sg_dtype_names[dt], step,
                      g->t[y].name, g->t[f].name);
                free(copy);
                compared++;
            }
        }
    for (int t = 0; t < g->nt; t++) {
        copies += g->t[t].role == ROLE_RECOMPUTED;
        free(fwd[t]);
    }
    CHECK(copies > 0 && compared == 2 * copies, "%s: %d recomputed copies, %d compared",
          sg_dtype_names[dt], copies, compared);
    int attn = 0; /* attention's P among them */
    for (int i = 0; i < g->nn; i++) attn += g->n[i].op == OP_ATTENTION_P;
    CHECK(attn > 0, "%s: no attention_p node", sg_dtype_names[dt]);
    free(fwd);
    sg_exec_free(&e);
    free(data);
}

/* --store-norm keeps the normalisations the backward pass would recompute, --store-attn each
 * attention's P (attention_p): the recomputations have the forward's bits (above), so three
 * steps give the same losses and state bit for bit with either switch on. */
static void test_store_bits(sg_dtype dt, int attn) {
    sg_model_cfg c;
    sg_model_preset(&c, "unet_tiny");
    c.act_dt = dt, c.batch = 2, c.data_n = 8;
    uint8_t *data = fake_data(&c);
    run_result a = {0}, b = {0};
    run(&c, data, 3, 7, &a);
    *(attn ? &c.store_attn : &c.store_norm) = 1;
    run(&c, data, 3, 7, &b);
    CHECK(a.state && b.state && a.state_bytes == b.state_bytes &&
              !memcmp(a.state, b.state, (size_t)a.state_bytes) &&
              !memcmp(a.losses, b.losses, 3 * sizeof(float)),
          "%s: %s changed the bits", sg_dtype_names[dt], attn ? "--store-attn" : "--store-norm");
    free(a.state), free(b.state), free(data);
}

/* Learning: with a fixed small dataset and lr 1e-3, the mean loss of the last steps is below
 * that of the first steps. A model that does not learn fails this. */
static void test_learns(void) {
    sg_model_cfg c;
    sg_model_preset(&c, "unet_tiny");
    c.data_n = 16, c.warmup = 1, c.lr = 2e-3f, c.dropout = 0;
    uint8_t *data = fake_data(&c);
    run_result a = {0};
    enum { N = 40 };
    float losses[N];
    sg_exec e;
    CHECK(open_exec(&e, &c, data) == SG_OK, "init");
    sg_exec_init_state(&e, 1);
    for (int s = 0; s < N; s++) {
        sg_exec_step(&e);
        losses[s] = sg_exec_loss(&e);
    }
    sg_exec_free(&e);
    double first = 0, last = 0;
    for (int s = 0; s < 10; s++) first += losses[s] / 10, last += losses[N - 10 + s] / 10;
    printf("learning: mean loss first 10 steps %.4f, last 10 steps %.4f\n", first, last);
    CHECK(last < 0.8 * first, "loss did not fall: %.4f -> %.4f", first, last);
    (void)a;
    free(data);
}

int main(void) {
    test_determinism_and_resume(DT_F32);
    test_determinism_and_resume(DT_BF16);
    test_learns();
    test_conv_engine_record();
    test_recompute_bits(DT_F32);
    test_recompute_bits(DT_BF16);
    for (int attn = 0; attn < 2; attn++) {
        test_store_bits(DT_F32, attn);
        test_store_bits(DT_BF16, attn);
    }
    test_other_plan_refused();
    return sg_test_end();
}
