/* verify — replay training and check that it is reproducible, bit for bit.
 *
 *   build/verify --model unet_tiny [--steps 8] [--resume-at 4] [--backend cpu|cuda] [--json]
 *
 * Checks, printed as a table (check | result | detail), then an overall line:
 *   (a) the same seed twice gives identical per-step loss bits and an identical final state
 *       (parameters, AdamW m and v, EMA, step state), compared through a hash and bytewise;
 *   (b) a run stopped at step K, checkpointed, loaded into a fresh executor and finished gives
 *       the same bits as the straight run;
 *   (c) on CUDA, graph replay gives the same bits as eager launches (SKIP without a GPU);
 *   (d) on CUDA, the loss trajectory is close to the CPU reference's (a tolerance, not bits:
 *       the two backends sum in different orders).
 * On a mismatch it names the first divergence: the first step whose loss differs, and the
 * first step after which the state differs, with the tensor, the index inside it and both
 * values (found by replaying both runs with a state hash after every step, then replaying
 * both to that step and comparing element by element).
 * Exit status: 0 when every check that ran passed, 1 when one failed, 2 for bad flags.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoints/ckpt.h"
#include "checkpoints/ckpt_hash.h"
#include "data/dataset.h"
#include "graph/exec.h"
#include "tools/cli.h"

static double now_s(void) {
    return cli_now_ms() / 1e3;
}

/* ---------------------------------------------------------------------------------------
 * The state a run ends in: the four optimizer regions, then every step-state tensor
 * ------------------------------------------------------------------------------------- */

enum { MAX_PARTS = 32 };

typedef struct {
    int tensor;     /* a region tensor (params, adam_m, adam_v, ema) or a ROLE_STATE scalar */
    int64_t offset; /* where it sits in a snapshot */
    int64_t bytes;
} state_part;

typedef enum { RUN_CPU = 0, RUN_CUDA_GRAPH, RUN_CUDA_EAGER } run_backend;
static const char *const run_backend_names[] = {"cpu", "cuda graph replay", "cuda eager"};

typedef struct {
    run_backend be;
    int resume_at;    /* save after this step, load into a fresh executor, go on; -1: never */
    int inject_after; /* add one ulp to one parameter element after this step; -1: never */
} run_spec;

typedef struct {
    int steps;            /* steps completed */
    float *loss;          /* the loss after each step */
    uint64_t *step_hash;  /* [s]: the state hash after step s, 0..steps (when asked for) */
    unsigned char *state; /* the final state (state_part layout) */
    uint64_t hash;        /* XXH64 of the final state */
    double seconds;
} run_out;

typedef struct {
    sg_model_cfg cfg;
    sg_plan plan; /* the reference plan: layout and names; every run must build the same one */
    sg_dataset data;
    uint64_t seed;
    int steps;
    state_part parts[MAX_PARTS];
    int nparts;
    int64_t state_bytes;
    char ckpt_dir[64], ckpt_path[128];
    int inject_tensor; /* the parameter --inject-divergence perturbs */
    int64_t inject_index;
    int tty;
    const char *label; /* the run in progress, for the progress line */
    int conv_engine;   /* --conv-engine for the CUDA runs; -1: the backend's default */
} verify_ctx;

static void layout_state(verify_ctx *v) {
    const sg_plan *p = &v->plan;
    const sg_graph *g = &p->g;
    int regions[4] = {p->io.params, p->io.adam_m, p->io.adam_v, p->io.ema};
    int64_t off = 0;
    v->nparts = 0;
    for (int k = 0; k < 4; k++) {
        v->parts[v->nparts++] = (state_part){regions[k], off, g->t[regions[k]].bytes};
        off += g->t[regions[k]].bytes;
    }
    for (int t = 0; t < g->nt && v->nparts < MAX_PARTS; t++) {
        const sg_tensor *x = &g->t[t];
        if (x->role != ROLE_STATE || x->region || x->nparts) continue;
        v->parts[v->nparts++] = (state_part){t, off, x->bytes};
        off += x->bytes;
    }
    v->state_bytes = off;
}

static int snapshot(verify_ctx *v, sg_exec *e, unsigned char *dst) {
    for (int k = 0; k < v->nparts; k++)
        if (sg_exec_read(e, v->parts[k].tensor, dst + v->parts[k].offset)) return SG_ERR;
    return SG_OK;
}

/* "0x3d4c8f12 (0.0498...)" for floats, the integer for counters and seeds */
static void format_value(const unsigned char *p, sg_dtype dt, char *buf, int cap) {
    if (dt == DT_F32) {
        float f;
        uint32_t u;
        memcpy(&f, p, 4), memcpy(&u, p, 4);
        snprintf(buf, (size_t)cap, "0x%08x (%.9g)", u, (double)f);
    } else if (dt == DT_I64) {
        int64_t x;
        memcpy(&x, p, 8);
        snprintf(buf, (size_t)cap, "%lld", (long long)x);
    } else if (dt == DT_U64) {
        uint64_t x;
        memcpy(&x, p, 8);
        snprintf(buf, (size_t)cap, "%llu", (unsigned long long)x);
    } else {
        uint32_t x;
        memcpy(&x, p, 4);
        snprintf(buf, (size_t)cap, "0x%08x", x);
    }
}

/* The tensor that owns element i of a region (offsets relative to the region start), and
 * the index inside it; -1 when i falls in the alignment padding after a tensor. */
static int region_owner(const sg_plan *p, int region, int64_t i, int64_t *index, int *before) {
    const sg_graph *g = &p->g;
    const sg_tensor *r = &g->t[region];
    int64_t byte = r->offset + i * sg_dtype_size(r->dtype);
    *before = -1;
    for (int t = 0; t < g->nt; t++) {
        const sg_tensor *x = &g->t[t];
        if (x->role != r->role || x->region || x->nparts) continue;
        if (byte >= x->offset && byte < x->offset + x->bytes) {
            *index = (byte - x->offset) / sg_dtype_size(x->dtype);
            return t;
        }
        if (x->offset <= byte && (*before < 0 || x->offset > g->t[*before].offset)) *before = t;
    }
    return -1;
}

/* ---------------------------------------------------------------------------------------
 * Running one configuration
 * ------------------------------------------------------------------------------------- */

static void progress(verify_ctx *v, int step, int steps) {
    if (!v->tty) return;
    fprintf(stderr, "\r\033[Kverify: %s: step %d/%d", v->label, step, steps);
    fflush(stderr);
}

static void progress_done(verify_ctx *v) {
    if (v->tty) fprintf(stderr, "\r\033[K");
}

/* pins: a checkpoint's conv-engine record to resume on (sg_backend.conv_pins), or NULL */
static int exec_open_pinned(verify_ctx *v, run_backend kind, sg_exec *e, const char *pins) {
    sg_backend *be = kind == RUN_CPU ? sg_backend_cpu_create()
                                     : sg_backend_cuda_create(0, kind == RUN_CUDA_GRAPH);
    if (be && v->conv_engine >= 0) be->conv_engine = v->conv_engine;
    if (be) be->conv_pins = pins;
    int rc = sg_exec_init(e, &v->cfg, 1, be);
    if (be) be->conv_pins = NULL;
    if (rc) return SG_ERR;
    if (e->plan.hash != v->plan.hash)
        return sg_set_error("the %s backend planned a different step (plan hash %016llx, "
                            "expected %016llx)",
                            run_backend_names[kind], (unsigned long long)e->plan.hash,
                            (unsigned long long)v->plan.hash);
    const sg_dataset *d = &v->data;
    return sg_exec_upload_dataset(e, d->pixels, d->n * d->h * d->w * d->c, d->labels);
}

static int exec_open(verify_ctx *v, run_backend kind, sg_exec *e) {
    return exec_open_pinned(v, kind, e, NULL);
}

/* checkpoint, tear the executor down, and continue in a fresh one from the file (on the conv
 * engines the checkpoint recorded, as train --resume does) */
static int stop_and_resume(verify_ctx *v, const run_spec *sp, sg_exec *e) {
    if (sg_exec_save(e, v->ckpt_path, NULL)) return SG_ERR;
    sg_exec_free(e);
    char *pins = sg_exec_ckpt_conv_engines(v->ckpt_path);
    int rc = exec_open_pinned(v, sp->be, e, pins);
    free(pins);
    if (!rc) rc = sg_exec_load(e, v->ckpt_path, 0, 0);
    unlink(v->ckpt_path);
    return rc;
}

/* --inject-divergence: one parameter element moves by one ulp */
static int inject(verify_ctx *v, sg_exec *e) {
    const sg_tensor *x = &v->plan.g.t[v->inject_tensor];
    float *w = malloc((size_t)x->bytes);
    if (!w) return sg_set_error("out of host memory");
    int rc = sg_exec_read(e, v->inject_tensor, w);
    if (!rc) {
        w[v->inject_index] = nextafterf(w[v->inject_index], INFINITY);
        rc = sg_exec_write(e, v->inject_tensor, w);
    }
    free(w);
    return rc;
}

static void run_out_free(run_out *o) {
    free(o->loss), free(o->step_hash), free(o->state);
    memset(o, 0, sizeof *o);
}

/* Fresh state from the seed, `stop` steps, the loss after each; with `hashes`, the state hash
 * after each step too. The final state stays in o->state. */
static int run_steps(verify_ctx *v, const run_spec *sp, int stop, int hashes, run_out *o) {
    memset(o, 0, sizeof *o);
    double t0 = now_s();
    o->loss = calloc((size_t)stop + 1, sizeof *o->loss);
    o->step_hash = hashes ? calloc((size_t)stop + 2, sizeof *o->step_hash) : NULL;
    o->state = malloc((size_t)v->state_bytes);
    if (!o->loss || !o->state || (hashes && !o->step_hash))
        return sg_set_error("out of host memory for a run's state (%lld bytes)",
                            (long long)v->state_bytes);
    sg_exec e;
    const sg_step_io *io = &v->plan.io;
    int rc = exec_open(v, sp->be, &e);
    if (!rc) rc = sg_exec_init_state(&e, v->seed);
    if (!rc && sp->inject_after == 0) rc = inject(v, &e);
    if (!rc && sp->resume_at == 0) rc = stop_and_resume(v, sp, &e);
    if (!rc && hashes && !(rc = snapshot(v, &e, o->state)))
        o->step_hash[0] = ckpt_xxh64(o->state, (size_t)v->state_bytes, 0);
    for (int s = 1; s <= stop && !rc; s++) {
        progress(v, s, stop);
        if ((rc = sg_exec_step(&e))) break;
        if ((rc = sg_exec_read(&e, io->loss, &o->loss[s - 1]))) break;
        o->steps = s;
        if (sp->inject_after == s && (rc = inject(v, &e))) break;
        if (sp->resume_at == s && (rc = stop_and_resume(v, sp, &e))) break;
        if (hashes) {
            if ((rc = snapshot(v, &e, o->state))) break;
            o->step_hash[s] = ckpt_xxh64(o->state, (size_t)v->state_bytes, 0);
        }
    }
    if (!rc && sg_exec_step_count(&e) != stop)
        rc = sg_set_error("the step counter reads %lld after %d steps",
                          (long long)sg_exec_step_count(&e), stop);
    if (!rc) rc = snapshot(v, &e, o->state);
    if (!rc) o->hash = ckpt_xxh64(o->state, (size_t)v->state_bytes, 0);
    sg_exec_free(&e);
    progress_done(v);
    o->seconds = now_s() - t0;
    return rc;
}

/* ---------------------------------------------------------------------------------------
 * Comparing two runs
 * ------------------------------------------------------------------------------------- */

typedef struct {
    int loss_step;        /* first step (1-based) whose loss bits differ; 0: none */
    float loss_a, loss_b; /* its two losses */
    int state_differs;    /* the final states differ */
    int state_step;       /* the first step after which the state differs; -1: not found */
    char tensor[2 * SG_NAME_MAX + 32];
    int64_t index; /* inside that tensor */
    char val_a[64], val_b[64];
    int64_t ndiff;       /* differing elements in that state, over every part */
    int64_t final_ndiff; /* differing elements in the final state */
    char note[256];      /* why the search for the first state step came back empty */
} divergence;

static void first_state_difference(verify_ctx *v, const unsigned char *a, const unsigned char *b,
                                   divergence *d) {
    const sg_graph *g = &v->plan.g;
    int found = 0;
    d->ndiff = 0;
    for (int k = 0; k < v->nparts; k++) {
        const state_part *sp = &v->parts[k];
        const sg_tensor *x = &g->t[sp->tensor];
        int64_t es = sg_dtype_size(x->dtype), n = sp->bytes / es;
        ckpt_value_diff cd;
        if (ckpt_compare(a + sp->offset, b + sp->offset, x->dtype, n, &cd)) continue;
        d->ndiff += cd.ndiff;
        if (found || cd.first < 0) continue;
        found = 1;
        const unsigned char *pa = a + sp->offset + cd.first * es,
                            *pb = b + sp->offset + cd.first * es;
        format_value(pa, x->dtype, d->val_a, sizeof d->val_a);
        format_value(pb, x->dtype, d->val_b, sizeof d->val_b);
        if (!x->region) {
            snprintf(d->tensor, sizeof d->tensor, "%s", x->name);
            d->index = cd.first;
            continue;
        }
        int before;
        int owner = region_owner(&v->plan, sp->tensor, cd.first, &d->index, &before);
        if (owner >= 0) {
            snprintf(d->tensor, sizeof d->tensor, "%s", g->t[owner].name);
        } else {
            snprintf(d->tensor, sizeof d->tensor, "(%s padding after %s)", x->name,
                     before >= 0 ? g->t[before].name : "its start");
            d->index = cd.first;
        }
    }
}

/* Loss bits and final state; 1 when they differ (d says where). */
static int compare_runs(verify_ctx *v, const run_out *a, const run_out *b, divergence *d) {
    memset(d, 0, sizeof *d);
    d->state_step = -1;
    for (int s = 0; s < a->steps && s < b->steps; s++)
        if (memcmp(&a->loss[s], &b->loss[s], sizeof(float))) {
            d->loss_step = s + 1;
            d->loss_a = a->loss[s], d->loss_b = b->loss[s];
            break;
        }
    d->state_differs = a->hash != b->hash || memcmp(a->state, b->state, (size_t)v->state_bytes);
    if (d->state_differs) {
        d->state_step = a->steps;
        first_state_difference(v, a->state, b->state, d);
        d->final_ndiff = d->ndiff;
    }
    return d->loss_step || d->state_differs;
}

/* The final states differ: replay both with a state hash after every step to find the first
 * step after which they differ, then replay both to that step and compare the states. */
static int locate_state_divergence(verify_ctx *v, const run_spec *sa, const run_spec *sb,
                                   divergence *d) {
    run_out a, b;
    memset(&a, 0, sizeof a), memset(&b, 0, sizeof b);
    int rc = SG_OK, S = -1;
    v->label = "locating the divergence (replay 1 of 2)";
    rc = run_steps(v, sa, v->steps, 1, &a);
    if (!rc)
        v->label = "locating the divergence (replay 2 of 2)",
        rc = run_steps(v, sb, v->steps, 1, &b);
    for (int s = 0; !rc && s <= v->steps; s++)
        if (a.step_hash[s] != b.step_hash[s]) {
            S = s;
            break;
        }
    if (!rc && S < 0)
        snprintf(d->note, sizeof d->note,
                 "replaying both runs again gave identical states: "
                 "the divergence itself is not reproducible");
    if (!rc && S >= 0 && S < v->steps) {
        run_out_free(&a), run_out_free(&b);
        v->label = "replaying to the first divergent step";
        rc = run_steps(v, sa, S, 0, &a);
        if (!rc) rc = run_steps(v, sb, S, 0, &b);
    }
    if (!rc && S >= 0) {
        divergence at;
        memset(&at, 0, sizeof at);
        first_state_difference(v, a.state, b.state, &at);
        if (at.ndiff) {
            d->state_step = S;
            snprintf(d->tensor, sizeof d->tensor, "%s", at.tensor);
            d->index = at.index;
            memcpy(d->val_a, at.val_a, sizeof d->val_a);
            memcpy(d->val_b, at.val_b, sizeof d->val_b);
            d->ndiff = at.ndiff;
        } else {
            snprintf(d->note, sizeof d->note,
                     "the replay to step %d did not diverge again: the "
                     "divergence itself is not reproducible",
                     S);
        }
    }
    if (rc)
        snprintf(d->note, sizeof d->note, "a replay to locate it failed: %.200s", sg_last_error());
    run_out_free(&a), run_out_free(&b);
    return rc;
}

/* ---------------------------------------------------------------------------------------
 * Checks
 * ------------------------------------------------------------------------------------- */

typedef enum { CHECK_PASS, CHECK_FAIL, CHECK_SKIP } check_result;
static const char *const check_result_names[] = {"PASS", "FAIL", "SKIP"};

typedef struct {
    const char *id, *name;
    check_result result;
    char detail[2048]; /* lines separated by '\n' */
    double seconds;
    int has_div;
    divergence div;
    double max_rel; /* (d): the largest relative loss difference; -1 where it does not apply */
} check_row;

static void describe_divergence(verify_ctx *v, const divergence *d, const char *an, const char *bn,
                                char *out, size_t cap) {
    size_t n = 0;
    if (d->loss_step) {
        uint32_t ua, ub;
        memcpy(&ua, &d->loss_a, 4), memcpy(&ub, &d->loss_b, 4);
        n = (size_t)snprintf(out, cap, "step %d: loss differs (%s=0x%08x %.9g, %s=0x%08x %.9g)\n",
                             d->loss_step, an, ua, (double)d->loss_a, bn, ub, (double)d->loss_b);
    } else {
        n = (size_t)snprintf(out, cap, "losses identical at every step\n");
    }
    if (n < cap && d->state_differs) {
        char where[64], count[96];
        if (d->state_step >= 0 && d->state_step < v->steps) {
            if (d->state_step)
                snprintf(where, sizeof where, "state after step %d", d->state_step);
            else
                snprintf(where, sizeof where, "initial state (before step 1)");
            snprintf(count, sizeof count, "%lld element%s differ%s then, %lld at the end",
                     (long long)d->ndiff, d->ndiff == 1 ? "" : "s", d->ndiff == 1 ? "s" : "",
                     (long long)d->final_ndiff);
        } else {
            snprintf(where, sizeof where, "final state (step %d)", v->steps);
            snprintf(count, sizeof count, "%lld element%s differ%s", (long long)d->ndiff,
                     d->ndiff == 1 ? "" : "s", d->ndiff == 1 ? "s" : "");
        }
        n += (size_t)snprintf(out + n, cap - n, "%s: tensor %s index %lld: %s=%s %s=%s (%s)\n",
                              where, d->tensor, (long long)d->index, an, d->val_a, bn, d->val_b,
                              count);
        if (n < cap && d->note[0]) n += (size_t)snprintf(out + n, cap - n, "%s\n", d->note);
    } else if (n < cap) {
        n += (size_t)snprintf(out + n, cap - n, "final states identical\n");
    }
    if (n > 0 && n <= cap && out[n - 1] == '\n') out[n - 1] = 0;
}

/* Compare run b with the reference a; fill the row (PASS, or FAIL naming the divergence). */
static void bitwise_check(verify_ctx *v, check_row *row, const run_out *a, const run_out *b,
                          const run_spec *sa, const run_spec *sb, const char *an, const char *bn,
                          const char *what) {
    if (!compare_runs(v, a, b, &row->div)) {
        row->result = CHECK_PASS;
        snprintf(row->detail, sizeof row->detail,
                 "%s: %d loss%s and the final state (hash %016llx) identical", what, a->steps,
                 a->steps == 1 ? "" : "es", (unsigned long long)a->hash);
        return;
    }
    row->result = CHECK_FAIL;
    row->has_div = 1;
    if (row->div.state_differs && row->div.state_step == v->steps) {
        double t0 = now_s();
        locate_state_divergence(v, sa, sb, &row->div);
        row->seconds += now_s() - t0;
    }
    describe_divergence(v, &row->div, an, bn, row->detail, sizeof row->detail);
}

static void run_failed(check_row *row, const char *which) {
    row->result = CHECK_FAIL;
    snprintf(row->detail, sizeof row->detail, "%s failed: %.1500s", which, sg_last_error());
}

static int nonfinite_step(const run_out *o) {
    for (int s = 0; s < o->steps; s++)
        if (!isfinite(o->loss[s])) return s + 1;
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Output
 * ------------------------------------------------------------------------------------- */

static void print_table(const check_row *rows, int n, int failed, int passed, int skipped,
                        double total) {
    printf("%-36s %-6s %s\n", "check", "result", "detail");
    for (int i = 0; i < n; i++) {
        char name[64];
        snprintf(name, sizeof name, "(%s) %s", rows[i].id, rows[i].name);
        const char *d = rows[i].detail;
        int first = 1;
        while (*d || first) {
            const char *nl = strchr(d, '\n');
            int len = nl ? (int)(nl - d) : (int)strlen(d);
            if (first)
                printf("%-36s %-6s %.*s", name, check_result_names[rows[i].result], len, d);
            else
                printf("%-36s %-6s %.*s", "", "", len, d);
            if (!nl && rows[i].result != CHECK_SKIP) printf(" (%.1f s)", rows[i].seconds);
            putchar('\n');
            first = 0;
            d += len + (nl ? 1 : 0);
            if (!nl) break;
        }
    }
    printf("overall: %s (%d passed, %d failed, %d skipped; %.1f s)\n", failed ? "FAIL" : "PASS",
           passed, failed, skipped, total);
}

static json_t *bits_json(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    char b[16];
    snprintf(b, sizeof b, "0x%08x", u);
    return json_string(b);
}

static json_t *divergence_json(const divergence *d) {
    json_t *o = json_pack("{s:i}", "loss_step", d->loss_step);
    if (d->loss_step) {
        json_object_set_new(o, "loss_a", bits_json(d->loss_a));
        json_object_set_new(o, "loss_b", bits_json(d->loss_b));
    }
    json_object_set_new(o, "state_differs", json_boolean(d->state_differs));
    if (d->state_differs)
        json_object_update_new(o, json_pack("{s:i, s:s, s:I, s:s, s:s, s:I, s:I}", "state_step",
                                            d->state_step, "tensor", d->tensor, "index",
                                            (json_int_t)d->index, "a", d->val_a, "b", d->val_b,
                                            "elements_differ", (json_int_t)d->ndiff,
                                            "elements_differ_final", (json_int_t)d->final_ndiff));
    return o;
}

static int print_json(verify_ctx *v, const char *backend, int resume_at, const char *data_spec,
                      const run_out *ref, const check_row *rows, int n, int failed, double total) {
    char hash[20];
    snprintf(hash, sizeof hash, "%016llx", (unsigned long long)v->plan.hash);
    json_t *j =
        json_pack("{s:s, s:o, s:s, s:i, s:i, s:I, s:s, s:s, s:f}", "result",
                  failed ? "FAIL" : "PASS", "model", cli_model_json(&v->cfg), "backend", backend,
                  "steps", v->steps, "resume_at", resume_at, "seed", (json_int_t)v->seed, "data",
                  data_spec, "plan_hash", hash, "seconds", total);
    if (j && ref && ref->steps == v->steps) {
        snprintf(hash, sizeof hash, "%016llx", (unsigned long long)ref->hash);
        json_t *losses = json_array();
        for (int s = 0; s < ref->steps; s++)
            json_array_append_new(losses, json_pack("{s:i, s:o, s:o}", "step", s + 1, "loss",
                                                    cli_json_float(ref->loss[s]), "bits",
                                                    bits_json(ref->loss[s])));
        json_object_set_new(j, "state_hash", json_string(hash));
        json_object_set_new(j, "losses", losses);
    }
    json_t *checks = json_array();
    for (int i = 0; i < n; i++) {
        const check_row *r = &rows[i];
        json_t *c =
            json_pack("{s:s, s:s, s:s, s:f, s:s}", "id", r->id, "name", r->name, "result",
                      check_result_names[r->result], "seconds", r->seconds, "detail", r->detail);
        if (c && r->max_rel >= 0)
            json_object_set_new(c, "max_rel_loss_diff", json_real(r->max_rel));
        if (c && r->has_div) json_object_set_new(c, "divergence", divergence_json(&r->div));
        json_array_append_new(checks, c);
    }
    if (!j) return json_decref(checks), sg_set_error("verify: cannot build the JSON output");
    json_object_set_new(j, "checks", checks);
    return cli_json_print(stdout, j);
}

/* ---------------------------------------------------------------------------------------
 * Flags
 * ------------------------------------------------------------------------------------- */

#define VERIFY_DEFAULT_MODEL "unet_tiny"

static void usage(FILE *f) {
    fprintf(f,
            "usage: verify [--model NAME] [flags]\n"
            "Replay training and check that it is reproducible, bit for bit:\n"
            "  (a) the same seed twice: identical loss bits at every step, identical final state\n"
            "      (parameters, AdamW m and v, EMA, step state);\n"
            "  (b) stop at step K, checkpoint, load into a fresh executor, finish: identical to\n"
            "      the straight run;\n"
            "  (c) CUDA graph replay against eager CUDA: identical (skipped without a GPU);\n"
            "  (d) CPU against CUDA: loss trajectories within --tol (not bitwise).\n"
            "On a mismatch it names the first divergence (step, tensor, index, both values).\n"
            "Exit status: 0 every check that ran passed, 1 a check failed, 2 bad flags.\n\n"
            "  --model NAME         one of:\n");
    cli_print_models(f, VERIFY_DEFAULT_MODEL);
    fprintf(f,
            "  --steps N            steps per run (default 8)\n"
            "  --resume-at K        where (b) stops and resumes, 0 <= K <= N (default N/2)\n"
            "  --seed N             run seed (default 0)\n"
            "  --data SPEC          dataset (default synthetic:256:<img>x<img>x<in-ch>); see\n"
            "                       train --help for the specs\n"
            "  --backend B          cpu | cuda (default: cuda when a GPU is present)\n"
            "  --conv-engine E      the CUDA runs' convolutions: auto | own | cudnn (default:\n"
            "                       $SG_CONV_ENGINE, else auto: cudnn where built with it,\n"
            "                       1x1 convs as cuBLASLt GEMMs)\n"
            "  --tol X              (d): largest relative loss difference allowed (default 1e-2,\n"
            "                       3e-2 with bf16)\n"
            "  --json               machine-readable result on stdout\n"
            "  --help               this text\n"
            "testing aid:\n"
            "  --inject-divergence S  in the second run of (a), add one ulp to one parameter\n"
            "                       element after step S (0: before the first step), to show\n"
            "                       that verify fails and names the divergence\n"
            "model flags:\n%s",
            sg_model_flags_help);
}

typedef struct {
    const char *model, *data, *backend;
    int steps, resume_at, inject, json;
    int conv_engine; /* -1: not given */
    uint64_t seed;
    double tol;
} verify_args;

/* 0: go on; 1: --help printed; 2: bad flags (message printed) */
static int parse_args(int argc, char **argv, verify_args *a, sg_model_cfg *cfg) {
    if (cli_model_prelude("verify", argc, argv, a->model, cfg)) return 2;
    cli_args c;
    cli_args_init(&c, "verify", argc, argv);
    while (cli_next(&c)) {
        int bad = 0;
        if (cli_is(&c, "--help"))
            return usage(stdout), 1;
        else if (cli_is(&c, "--json"))
            a->json = 1;
        else if (cli_is(&c, "--data"))
            bad = !(a->data = cli_value(&c));
        else if (cli_is(&c, "--backend"))
            bad = !(a->backend = cli_value(&c)) || cli_check_backend("verify", a->backend);
        else if (cli_is(&c, "--conv-engine"))
            bad = cli_conv_engine(&c, &a->conv_engine);
        else if (cli_is(&c, "--steps"))
            bad = cli_int(&c, 1, 1000000, &a->steps);
        else if (cli_is(&c, "--resume-at"))
            bad = cli_int(&c, 0, 1000000, &a->resume_at);
        else if (cli_is(&c, "--inject-divergence"))
            bad = cli_int(&c, 0, 1000000, &a->inject);
        else if (cli_is(&c, "--seed"))
            bad = cli_u64(&c, &a->seed);
        else if (cli_is(&c, "--tol")) {
            float tol;
            bad = cli_float(&c, 0, 1e30, &tol), a->tol = tol;
        } else {
            int r = cli_model_flag(&c, cfg);
            if (!r) return cli_unknown(&c);
            bad = r < 0;
        }
        if (bad) return 2;
    }
    if (a->resume_at < 0) a->resume_at = a->steps / 2;
    if (a->resume_at > a->steps)
        return fprintf(stderr, "verify: --resume-at %d is past --steps %d\n", a->resume_at,
                       a->steps),
               2;
    if (a->inject > a->steps)
        return fprintf(stderr, "verify: --inject-divergence %d is past --steps %d\n", a->inject,
                       a->steps),
               2;
    if (sg_model_validate(cfg)) return fprintf(stderr, "verify: %s\n", sg_last_error()), 2;
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * main
 * ------------------------------------------------------------------------------------- */

static void pick_inject_target(verify_ctx *v) {
    /* the middle element of the largest parameter tensor */
    const sg_graph *g = &v->plan.g;
    int best = -1;
    for (int t = 0; t < g->nt; t++) {
        const sg_tensor *x = &g->t[t];
        if (x->role != ROLE_PARAM || x->region || x->nparts) continue;
        if (best < 0 || x->bytes > g->t[best].bytes) best = t;
    }
    v->inject_tensor = best;
    v->inject_index = best >= 0 ? sg_numel(&g->t[best]) / 2 : 0;
}

/* The data (it decides the plan's dataset region), the plan, the state layout. 0 or an exit
 * code (the message printed). */
static int setup_plan(verify_ctx *v, const verify_args *a, char *data_spec, size_t cap) {
    if (a->data)
        snprintf(data_spec, cap, "%s", a->data);
    else
        snprintf(data_spec, cap, "synthetic:256:%dx%dx%d", v->cfg.img, v->cfg.img, v->cfg.in_ch);
    if (data_load_for_model(&v->data, data_spec, v->cfg.img, v->cfg.in_ch))
        return cli_fail("verify", 1);
    if (v->data.c != v->cfg.in_ch) {
        fprintf(stderr, "verify: %s has %d channel(s) but model %s expects %d (--in-ch)\n",
                v->data.source, v->data.c, v->cfg.name, v->cfg.in_ch);
        return 2;
    }
    if (v->data.h > v->cfg.img || v->data.w > v->cfg.img) {
        fprintf(stderr, "verify: %s images are %dx%d, larger than the model's %dx%d (--img)\n",
                v->data.source, v->data.h, v->data.w, v->cfg.img, v->cfg.img);
        return 2;
    }
    v->cfg.data_n = v->data.n, v->cfg.data_h = v->data.h, v->cfg.data_w = v->data.w;
    if (sg_plan_build(&v->plan, &v->cfg, 1)) return cli_fail("verify", 1);
    layout_state(v);
    pick_inject_target(v);
    snprintf(v->ckpt_dir, sizeof v->ckpt_dir, "/tmp/sg_verify_XXXXXX");
    if (!mkdtemp(v->ckpt_dir)) {
        v->ckpt_dir[0] = 0;
        fprintf(stderr, "verify: cannot create a temporary directory in /tmp\n");
        return 1;
    }
    snprintf(v->ckpt_path, sizeof v->ckpt_path, "%s/resume.sgck", v->ckpt_dir);
    return 0;
}

/* cuda by default where a GPU is present; no_cuda says why the CUDA checks are skipped */
static int choose_backend(const char *name, run_backend *main_be, char *no_cuda, size_t cap) {
    *main_be = !strcmp(cli_backend_name(name), "cuda") ? RUN_CUDA_GRAPH : RUN_CPU;
    if (*main_be == RUN_CUDA_GRAPH && !sg_cuda_available()) {
        sg_backend *probe = sg_backend_cuda_create(0, 1);
        if (probe) probe->destroy(probe);
        fprintf(stderr, "verify: --backend cuda: %s\n", sg_last_error());
        return 1;
    }
    if (*main_be == RUN_CPU) {
        if (sg_cuda_available()) {
            snprintf(no_cuda, cap, "--backend cpu: no CUDA runs asked for");
        } else {
            sg_backend *probe = sg_backend_cuda_create(0, 1);
            if (probe) probe->destroy(probe);
            snprintf(no_cuda, cap, "no GPU: %.480s", sg_last_error());
        }
    }
    return 0;
}

/* (a) same seed twice; the first run is the reference of every other check */
static int check_same_seed(verify_ctx *v, const verify_args *a, run_backend be, check_row *row,
                           run_out *ref) {
    run_spec straight = {be, -1, -1}, second = {be, -1, a->inject};
    run_out other;
    memset(&other, 0, sizeof other);
    v->label = "(a) first run";
    int ref_ok = !run_steps(v, &straight, a->steps, 0, ref);
    row->seconds = ref->seconds;
    if (!ref_ok) return run_failed(row, "the first run"), 0;
    v->label = "(a) second run";
    int ok = !run_steps(v, &second, a->steps, 0, &other);
    row->seconds += other.seconds;
    int nf = nonfinite_step(ref);
    if (!ok) {
        run_failed(row, "the second run");
    } else if (nf) {
        row->result = CHECK_FAIL;
        snprintf(row->detail, sizeof row->detail,
                 "step %d: the loss is not finite (%g): nothing to compare", nf,
                 (double)ref->loss[nf - 1]);
    } else {
        bitwise_check(v, row, ref, &other, &straight, &second, "a", "b", "2 runs of the same seed");
    }
    run_out_free(&other);
    return 1;
}

/* (b) stop, save, load, resume vs straight; (c) graph replay vs eager: bitwise */
static void check_bitwise(verify_ctx *v, const verify_args *a, const run_spec *straight,
                          const run_spec *spec, const run_out *ref, check_row *row,
                          const char *label, const char *which, const char *an, const char *bn,
                          const char *what) {
    run_out other;
    memset(&other, 0, sizeof other);
    v->label = label;
    int ok = !run_steps(v, spec, a->steps, 0, &other);
    row->seconds = other.seconds;
    if (!ok)
        run_failed(row, which);
    else
        bitwise_check(v, row, ref, &other, straight, spec, an, bn, what);
    run_out_free(&other);
}

/* (d) CPU vs CUDA: losses within a tolerance */
static void check_cpu_vs_cuda(verify_ctx *v, const verify_args *a, const run_out *ref,
                              check_row *row) {
    run_spec cpu = {RUN_CPU, -1, -1};
    run_out other;
    memset(&other, 0, sizeof other);
    v->label = "(d) cpu reference";
    int ok = !run_steps(v, &cpu, a->steps, 0, &other);
    row->seconds = other.seconds;
    double tol = a->tol >= 0 ? a->tol : v->cfg.act_dt == DT_BF16 ? 3e-2 : 1e-2;
    if (!ok) {
        run_failed(row, "the CPU run");
        run_out_free(&other);
        return;
    }
    double worst = 0;
    int worst_step = 1;
    for (int s = 0; s < a->steps; s++) {
        double x = ref->loss[s], y = other.loss[s];
        double rel = fabs(x - y) / fmax(fmax(fabs(x), fabs(y)), 1e-30);
        if (!(rel <= worst)) worst = rel, worst_step = s + 1; /* NaN counts as worst */
    }
    row->max_rel = worst;
    ckpt_value_diff pd;
    const state_part *pp = &v->parts[0];
    ckpt_compare(ref->state + pp->offset, other.state + pp->offset, DT_F32, pp->bytes / 4, &pd);
    row->result = worst <= tol ? CHECK_PASS : CHECK_FAIL;
    snprintf(row->detail, sizeof row->detail,
             "max relative loss difference %.3g at step %d (tolerance %.3g; cuda %.9g, "
             "cpu %.9g)\nfinal parameters: %lld of %lld elements differ, max |diff| %.3g",
             worst, worst_step, tol, (double)ref->loss[worst_step - 1],
             (double)other.loss[worst_step - 1], (long long)pd.ndiff, (long long)(pp->bytes / 4),
             pd.max_abs);
    run_out_free(&other);
}

static void skip(check_row *row, const char *why) {
    row->result = CHECK_SKIP;
    snprintf(row->detail, sizeof row->detail, "%s", why);
}

static void cleanup(verify_ctx *v) {
    if (v->ckpt_dir[0]) unlink(v->ckpt_path), rmdir(v->ckpt_dir);
    sg_plan_free(&v->plan);
    data_free(&v->data);
}

int main(int argc, char **argv) {
    verify_args a = {.model = VERIFY_DEFAULT_MODEL,
                     .steps = 8,
                     .resume_at = -1,
                     .inject = -1,
                     .tol = -1,
                     .conv_engine = -1};
    static verify_ctx v;
    int rc = parse_args(argc, argv, &a, &v.cfg);
    if (rc) return rc == 1 ? 0 : 2;
    v.seed = a.seed, v.steps = a.steps, v.tty = isatty(2), v.conv_engine = a.conv_engine;
    double t_start = now_s();
    char data_spec[600], no_cuda[512] = "";
    run_backend be;
    if ((rc = setup_plan(&v, &a, data_spec, sizeof data_spec)) ||
        (rc = choose_backend(a.backend, &be, no_cuda, sizeof no_cuda)))
        return cleanup(&v), rc;
    const char *backend = cli_backend_name(a.backend);
    char micro[64] = "";
    if (v.cfg.grad_accum > 1)
        snprintf(micro, sizeof micro, ", batch %d as %d micro-batches", v.cfg.batch,
                 v.cfg.grad_accum);
    fprintf(stderr,
            "verify: %s (%lld parameters) on %s, %s backend%s, %d step%s, resume at %d, seed "
            "%llu\n",
            v.cfg.name, (long long)v.plan.io.n_params, data_spec, backend, micro, a.steps,
            a.steps == 1 ? "" : "s", a.resume_at, (unsigned long long)a.seed);
    if (a.inject >= 0)
        fprintf(stderr,
                "verify: --inject-divergence: the second run of (a) adds one ulp to %s index "
                "%lld after step %d\n",
                v.plan.g.t[v.inject_tensor].name, (long long)v.inject_index, a.inject);
    check_row rows[4] = {
        {.id = "a", .name = "same seed twice", .max_rel = -1},
        {.id = "b", .name = "stop/resume vs straight", .max_rel = -1},
        {.id = "c", .name = "CUDA graph replay vs eager", .max_rel = -1},
        {.id = "d", .name = "CPU vs CUDA losses (tolerance)", .max_rel = -1},
    };
    run_spec straight = {be, -1, -1}, resumed = {be, a.resume_at, -1},
             eager = {RUN_CUDA_EAGER, -1, -1};
    run_out ref;
    memset(&ref, 0, sizeof ref);
    int ref_ok = check_same_seed(&v, &a, be, &rows[0], &ref);
    char what[64];
    snprintf(what, sizeof what, "resumed at step %d", a.resume_at);
    if (!ref_ok) {
        for (int i = 1; i < 4; i++) skip(&rows[i], "the reference run failed");
    } else {
        check_bitwise(&v, &a, &straight, &resumed, &ref, &rows[1], "(b) stop, save, load, resume",
                      "the stop/resume run", "straight", "resumed", what);
        if (be == RUN_CPU) {
            skip(&rows[2], no_cuda), skip(&rows[3], no_cuda);
        } else {
            check_bitwise(&v, &a, &straight, &eager, &ref, &rows[2], "(c) cuda eager",
                          "the eager CUDA run", "graph", "eager", "graph replay vs eager");
            check_cpu_vs_cuda(&v, &a, &ref, &rows[3]);
        }
    }
    int passed = 0, failed = 0, skipped = 0;
    for (int i = 0; i < 4; i++)
        passed += rows[i].result == CHECK_PASS, failed += rows[i].result == CHECK_FAIL,
            skipped += rows[i].result == CHECK_SKIP;
    double total = now_s() - t_start;
    if (a.json)
        print_json(&v, backend, a.resume_at, data_spec, ref_ok ? &ref : NULL, rows, 4, failed,
                   total);
    else
        print_table(rows, 4, failed, passed, skipped, total);
    run_out_free(&ref);
    cleanup(&v);
    return failed ? 1 : 0;
}
