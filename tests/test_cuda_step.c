/* test_cuda_step.c — the whole training step on the GPU (label gpu; exit 77 without one).
 *
 * - graph replay vs eager: the same seed through a captured-and-replayed step and through
 *   eager launches gives identical loss bits at every step and an identical final state;
 * - two graph runs of the same seed are bitwise equal;
 * - CPU vs GPU: the loss trajectories of 20 steps of unet_tiny agree within a tolerance
 *   (fp32: 2e-3 relative per step — different summation orders and libm, through a network
 *   whose loss is O(1) and whose parameters move by ~lr per step, stay near 1e-5 for the first
 *   steps and drift slowly; bf16: 3e-2, bf16 rounding of every activation), and so does every
 *   parameter tensor's Adam m after M_STEP steps, a running mean of its gradients (worst_m_diff:
 *   fp32 1e-2, bf16 0.15 normwise; the host emulation shows 2e-4 and 4e-2), which sees the
 *   layers the losses of a few steps cannot;
 * - gradient accumulation (2 micro-batches, fp32): graph replay vs eager bitwise, two graph runs
 *   bitwise, CPU vs GPU within the fp32 tolerance, and within it of the GPU's one-pass step
 *   (the same data, noise and dropout; only the gradients' summation order differs);
 * - fusion (--fuse 1, planner/fuse.c; bf16 runs both ways): the fused step (GroupNorm + SiLU +
 * dropout computed inside the tensor-core convolutions that read them, the residual adds in their
 * stores) gives the unfused step's (--fuse 0) losses and final state bit for bit, on the GPU and on
 *   the CPU (which materialises the fused operands with its apply kernel: the same values);
 *   the two fusions that change the bits (the upsample conv as upconv2d: folded weights
 *   rounded once; the shortcut folded into conv2 as conv2d_sc: summed in fp32, not rounded to
 *   bf16 and added) are left out of that (SG_FUSE_BITWISE) and the default fused step is
 *   checked within the bf16 loss tolerance of the unfused one, on each backend;
 * - bf16: the weight copy equals round(params) after the steps of every run, and a resume
 *   (1 step, checkpoint, a fresh executor loading it, 1 step) gives the straight run's losses
 *   and final state bit for bit, its copy remade from the loaded parameters;
 * - the statistics' partials of each normalisation computed by the convolution before it
 *   (graph/backend_cuda_run.c, prepare_norm_stats: in the tensor-core epilogue where the tile fits)
 *   give the bits of SG_FUSE_STATS=0 (every normalisation's own partials pass) and of
 *   SG_FUSE_STATS=fwd (the forward's alone; bf16);
 * - the one-pass normalisations: the default (the forward in one pass) ran the one-pass
 *   forward kernel, and gives the bits of SG_NORM_ONEPASS=0 (two passes both ways, which runs
 *   none) and of SG_NORM_ONEPASS=1 (the backward in one pass too, which ran);
 * - the thin convolutions (conv.cu, the image's conv_in and conv_out where the own engine runs
 *   them): the bits of the 64 x 64 tiles (SG_CONV_THIN=0), and they ran on the own engine;
 *   SG_CONV_THIN=3x is refused by name;
 * - programmatic dependent launch (SG_PDL=1, bf16): the replayed step's bits are the ones
 *   without it;
 * - the linear groups (the time-embedding projections as one launch each way): formed where
 *   unet_tiny's plan has them, none under SG_LINEAR_GROUPS=0, another value refused;
 * - the captured graph's shape in describe() (roots, edges, nodes by type);
 * - the Winograd form of the own engine's fp32 3x3 convolutions (SG_CONV_WINO=1), and the direct
 *   tiles on the tensor cores (SG_CONV_F32_TC=1): ran, graph =
 *   eager bitwise, within the fp32 loss tolerance of the CPU and of the step without it;
 * - a plan that does not fit says so before allocating (an absurd batch).
 *
 * SG_TEST_STEPS=N (1..20) and SG_TEST_BATCH=B shorten it: the host execution of the CUDA
 * backend (tests/cuda_host.cmake) runs every thread of every block as a fiber on the CPU, so
 * CI runs 3 steps at batch 2 there; a GPU runs the full 20 at the preset batch. SG_TEST_ACCUM=0
 * leaves out the gradient-accumulation runs (CI's second thread order: they add no kernel).
 *
 * SG_CONV_TC=wgmma: the bf16 runs once more on the Hopper wgmma convolutions (check_wgmma).
 *
 * All of it runs twice: on the default conv engine (auto: cuDNN where the build has it, and
 * the 1x1 convs as cuBLASLt GEMMs, the gemm engine) and on the own kernels (--conv-engine own),
 * so every engine is checked inside the captured graph. Where the build has no cuDNN, auto's
 * runs are the bf16 ones: its fp32 runs would repeat own's. SG_TEST_ENGINE=auto (or own) runs
 * that engine's part alone: the host execution's build with the emulated cuDNN
 * (test_cuda_step_host_cudnn) runs auto's, since own's is the other host step tests'.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "graph/exec.h"
#include "kernels/cuda/cuda_kernels.h"
#include "planner/op_dims.h"
#include "planner/plan.h"
#include "tests/sg_test.h"

enum { MAX_STEPS = 20 };
static int STEPS = MAX_STEPS;

/* an integer from the environment in [lo, hi], or dflt */
static int env_int(const char *name, int lo, int hi, int dflt) {
    const char *v = getenv(name);
    char *end;
    long x = v ? strtol(v, &end, 10) : dflt;
    return v && (*end || x < lo || x > hi) ? dflt : (int)x;
}

static uint8_t *data_for(const sg_model_cfg *c) {
    int64_t n = c->data_n * c->data_h * c->data_w * c->in_ch;
    uint8_t *d = malloc((size_t)n);
    uint64_t s = 4;
    for (int64_t i = 0; i < n; i++) d[i] = (uint8_t)(sg_test_next(&s) >> 56);
    return d;
}

/* bf16 runs: the plan's weight copy (what every bf16 conv and linear reads) is round(params),
 * element for element, on this backend; fp32 runs have none */
static int copy_is_rounded(sg_exec *e) {
    const sg_step_io *io = &e->plan.io;
    if (io->params_bf16 < 0) return 1;
    const int64_t n = sg_numel(&e->plan.g.t[io->params]);
    float *w = malloc((size_t)n * 4);
    sg_bf16 *h = malloc((size_t)n * 2);
    int ok = !sg_exec_read(e, io->params, w) && !sg_exec_read(e, io->params_bf16, h);
    for (int64_t i = 0; i < n && ok; i++) ok = h[i] == sg_f32_to_bf16(w[i]);
    free(w), free(h);
    return ok;
}

/* After this many steps (or the last, if fewer) the CPU-vs-GPU comparison of the gradients
 * takes Adam's m: later, bf16 trajectories have drifted apart enough that a small gradient (a
 * GroupNorm bias's) differs by half its norm after 20 steps on the host emulation. */
#define M_STEP 3

/* losses of `steps` steps and the final params+m+v+ema bytes; m_early (NULL: not wanted) gets
 * a malloc'ed copy of Adam's m after min(steps, M_STEP) steps */
/* e planned on be for c, the dataset uploaded, the state from seed 11; on failure e is freed
 * and the error said */
static int setup(sg_exec *e, const sg_model_cfg *c, const uint8_t *data, sg_backend *be) {
    if (sg_exec_init(e, c, 1, be) ||
        sg_exec_upload_dataset(e, data, e->plan.g.t[e->plan.io.dataset].bytes, NULL) ||
        sg_exec_init_state(e, 11)) {
        fprintf(stderr, "setup: %s\n", sg_last_error());
        sg_exec_free(e);
        return SG_ERR;
    }
    return SG_OK;
}

static int run(const sg_model_cfg *c, const uint8_t *data, sg_backend *be, int steps, float *loss,
               unsigned char **state, int64_t *bytes, float **m_early) {
    sg_exec e;
    if (setup(&e, c, data, be)) return SG_ERR;
    for (int s = 0; s < steps; s++) {
        if (sg_exec_step(&e)) {
            fprintf(stderr, "step %d: %s\n", s, sg_last_error());
            sg_exec_free(&e);
            return SG_ERR;
        }
        loss[s] = sg_exec_loss(&e);
        if (m_early && s + 1 == (steps < M_STEP ? steps : M_STEP)) {
            *m_early = malloc((size_t)e.plan.g.t[e.plan.io.adam_m].bytes);
            sg_exec_read(&e, e.plan.io.adam_m, *m_early);
        }
    }
    CHECK(copy_is_rounded(&e), "%s: after %d steps the bf16 weight copy is not round(params)",
          be->name, steps);
    int regions[4] = {e.plan.io.params, e.plan.io.adam_m, e.plan.io.adam_v, e.plan.io.ema};
    int64_t rb = e.plan.g.t[e.plan.io.params].bytes;
    *bytes = 4 * rb;
    *state = malloc((size_t)*bytes);
    for (int k = 0; k < 4; k++) sg_exec_read(&e, regions[k], *state + k * rb);
    sg_exec_free(&e);
    return SG_OK;
}

/* the CUDA backend on conv engine `engine` (SG_CONV_ENGINE_*) */
static sg_backend *cuda_on(int use_graph, int engine) {
    sg_backend *be = sg_backend_cuda_create(0, use_graph);
    if (be) be->conv_engine = engine;
    return be;
}

/* unet_tiny in dt at the test's batch, as the precision and switch checks train it */
static sg_model_cfg tiny_cfg(sg_dtype dt) {
    sg_model_cfg c;
    sg_model_preset(&c, "unet_tiny");
    c.act_dt = dt;
    c.batch = env_int("SG_TEST_BATCH", 1, 64, c.batch);
    c.data_n = 64;
    c.warmup = 1;
    c.lr = 1e-3f;
    return c;
}

/* var set to val for a while: env_push returns its old value (malloc'ed; NULL where unset),
 * env_pop puts that back and frees it */
static char *env_push(const char *var, const char *val) {
    char *keep = getenv(var) ? strdup(getenv(var)) : NULL;
    setenv(var, val, 1);
    return keep;
}
static void env_pop(const char *var, char *keep) {
    if (keep)
        setenv(var, keep, 1);
    else
        unsetenv(var);
    free(keep);
}

/* The replayed step with var=val in the environment (read when the backend is created) gives
 * the losses lg and final state sg (bg bytes) bit for bit; `base` names the run without it. */
static void same_under_env(const char *nm, const char *var, const char *val, const char *base,
                           const sg_model_cfg *c, const uint8_t *data, int engine, const float *lg,
                           const unsigned char *sg, int64_t bg) {
    float ln[MAX_STEPS];
    unsigned char *sn = NULL;
    int64_t bn = 0;
    setenv(var, val, 1);
    const int ok = !run(c, data, cuda_on(1, engine), STEPS, ln, &sn, &bn, NULL);
    unsetenv(var);
    CHECK(ok && !memcmp(lg, ln, sizeof(float) * (size_t)STEPS) && bn == bg &&
              !memcmp(sg, sn, (size_t)bg),
          "%s: the step with %s differs from %s=%s's (loss 0: %a vs %a)", nm, base, var, val, lg[0],
          ok ? ln[0] : 0.0f);
    if (ok) printf("%s: %s vs %s=%s: identical\n", nm, base, var, val);
    free(sn);
}

/* Resume on the CUDA backend (bf16: the weight copy must be remade from the loaded parameters):
 * 2 straight steps vs 1 step, a checkpoint, a fresh executor that loads it, 1 step: the same
 * losses and the same final state, bit for bit, and the copy equal to round(params) right
 * after the load (what the first resumed step's convs and linears read). */
static void check_resume(const sg_model_cfg *c, const uint8_t *data, int engine) {
    char nm[64], dir[] = "/tmp/sg_cuda_step_XXXXXX", path[256];
    snprintf(nm, sizeof nm, "resume %s%s, conv engine %s", c->act_dt == DT_BF16 ? "bf16" : "fp32",
             sg_model_fuse(c) ? " fused" : "", sg_conv_engine_name(engine));
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(path, sizeof path, "%s/k.sgck", dir);
    float straight[2], resumed[2];
    unsigned char *ss = NULL, *sr = NULL;
    int64_t bs = 0, br = 0;
    sg_exec e;
    memset(&e, 0, sizeof e); /* freed below even where the straight run failed before its init */
    int ok = !run(c, data, cuda_on(1, engine), 2, straight, &ss, &bs, NULL) &&
             !sg_exec_init(&e, c, 1, cuda_on(1, engine));
    ok = ok && !sg_exec_upload_dataset(&e, data, e.plan.g.t[e.plan.io.dataset].bytes, NULL) &&
         !sg_exec_init_state(&e, 11) && !sg_exec_step(&e) && !sg_exec_save(&e, path, NULL);
    if (ok) resumed[0] = sg_exec_loss(&e);
    sg_exec_free(&e);
    ok = ok && !sg_exec_init(&e, c, 1, cuda_on(1, engine)) &&
         !sg_exec_upload_dataset(&e, data, e.plan.g.t[e.plan.io.dataset].bytes, NULL) &&
         !sg_test_poison_state(&e) && !sg_exec_load(&e, path, 0, 0);
    CHECK(ok, "%s: %s", nm, sg_last_error());
    if (ok) {
        CHECK(copy_is_rounded(&e), "%s: after the load the bf16 weight copy is not round(params)",
              nm);
        ok = !sg_exec_step(&e);
        CHECK(ok, "%s: the resumed step: %s", nm, sg_last_error());
        resumed[1] = sg_exec_loss(&e);
        int regions[4] = {e.plan.io.params, e.plan.io.adam_m, e.plan.io.adam_v, e.plan.io.ema};
        const int64_t rb = e.plan.g.t[e.plan.io.params].bytes;
        br = 4 * rb;
        sr = malloc((size_t)br);
        for (int k = 0; k < 4; k++) sg_exec_read(&e, regions[k], sr + k * rb);
        CHECK(!memcmp(straight, resumed, sizeof straight),
              "%s: losses %.9g %.9g vs straight %.9g "
              "%.9g",
              nm, resumed[0], resumed[1], straight[0], straight[1]);
        CHECK(bs == br && !memcmp(ss, sr, (size_t)bs),
              "%s: the final state differs from the "
              "straight run's",
              nm);
    }
    sg_exec_free(&e);
    unlink(path);
    rmdir(dir);
    free(ss), free(sr);
}

static void check_resume_bf16(int engine, int fuse) {
    sg_model_cfg c = tiny_cfg(DT_BF16);
    c.fuse = fuse;
    uint8_t *data = data_for(&c);
    check_resume(&c, data, engine);
    free(data);
}

/* The GPU's and the CPU's Adam first moments after M_STEP steps, parameter tensor by parameter
 * tensor: m after a few steps is a running mean of the gradients, so this compares
 * every gradient of the step, which the losses alone cannot (a layer whose output the next one
 * multiplies by zero-initialised weights, as the attention before its to_out, moves no loss of
 * the first steps). The worst normwise relative difference, its tensor named in `name`. */
static double worst_m_diff(const sg_model_cfg *c, const float *mg, const float *mc, char *name,
                           int cap) {
    sg_plan p;
    snprintf(name, (size_t)cap, "(none)");
    if (sg_plan_build(&p, c, 1)) return INFINITY;
    const sg_graph *g = &p.g;
    const sg_tensor *reg = &g->t[p.io.params];
    double worst = 0;
    for (int t = 0; t < g->nt; t++) {
        const sg_tensor *x = &g->t[t];
        if (x->role != ROLE_PARAM || x->region) continue;
        const int64_t o = (x->offset - reg->offset) / 4, n = sg_numel(x);
        double d = 0, r = 0;
        for (int64_t i = o; i < o + n; i++)
            d += ((double)mg[i] - mc[i]) * ((double)mg[i] - mc[i]), r += (double)mc[i] * mc[i];
        const double e = r > 0 ? sqrt(d / r) : d > 0 ? INFINITY : 0;
        if (e > worst) worst = e, snprintf(name, (size_t)cap, "%s", x->name);
    }
    sg_plan_free(&p);
    return worst;
}

/* accum: K micro-batches per step (--grad-accum); the batch is rounded up to a multiple */
/* fuse: SG_FUSE_AUTO (the default, unfused) or 1 */
static void check_precision(sg_dtype dt, int engine, int accum, int fuse) {
    char nm[112];
    const char *tc = getenv("SG_CONV_TC");
    snprintf(nm, sizeof nm, "%s%s, conv engine %s%s%s, %d micro-batch(es)",
             dt == DT_BF16 ? "bf16" : "fp32", fuse == 1 ? " fused" : "",
             sg_conv_engine_name(engine), tc ? ", SG_CONV_TC=" : "", tc ? tc : "", accum);
    sg_model_cfg c = tiny_cfg(dt);
    c.fuse = fuse;
    c.batch = (c.batch + accum - 1) / accum * accum;
    c.grad_accum = accum;
    uint8_t *data = data_for(&c);
    float lg[MAX_STEPS], le[MAX_STEPS], lg2[MAX_STEPS], lc[MAX_STEPS];
    unsigned char *sg = NULL, *se = NULL, *sg2 = NULL, *sc = NULL;
    int64_t bg = 0, be_ = 0, bg2 = 0, bc = 0;
    float *mg = NULL, *mc = NULL;
    const long thin0 = cuda_conv_thin_launches(), one0 = cuda_norm_onepass_launches();
    int ok = !run(&c, data, cuda_on(1, engine), STEPS, lg, &sg, &bg, &mg) &&
             !run(&c, data, cuda_on(0, engine), STEPS, le, &se, &be_, NULL) &&
             !run(&c, data, cuda_on(1, engine), STEPS, lg2, &sg2, &bg2, NULL) &&
             !run(&c, data, sg_backend_cpu_create(), STEPS, lc, &sc, &bc, &mc);
    const long one_default = cuda_norm_onepass_launches() - one0;
    CHECK(ok, "%s: runs failed", nm);
    if (ok) {
        int first = -1;
        for (int s = 0; s < STEPS && first < 0; s++)
            if (memcmp(&lg[s], &le[s], 4)) first = s;
        CHECK(first < 0, "%s: graph vs eager loss differs first at step %d: %.9g vs %.9g", nm,
              first, first >= 0 ? lg[first] : 0, first >= 0 ? le[first] : 0);
        CHECK(bg == be_ && !memcmp(sg, se, (size_t)bg), "%s: graph vs eager final state differs",
              nm);
        CHECK(!memcmp(lg, lg2, sizeof(float) * (size_t)STEPS) && !memcmp(sg, sg2, (size_t)bg),
              "%s: two graph runs differ", nm);
        if (accum == 1) {
            /* the statistics' partials of every normalisation by its own pass instead of the
             * conv before it (graph/backend_cuda_run.c, prepare_norm_stats): the same bits */
            static const char *const modes[] = {"0", "fwd"};     /* none; the forward alone */
            for (int mi = 0; mi < (dt == DT_BF16 ? 2 : 1); mi++) /* fp32: the passes only */
                same_under_env(nm, "SG_FUSE_STATS", modes[mi],
                               "the statistics' partials in the convolutions", &c, data, engine, lg,
                               sg, bg);
        }
        /* the one-pass normalisations (cuda_kernels.h): x (and dy) read once, their partials no
         * longer computed by the convolutions before (forward) and after (the data gradient
         * that writes dy). The default runs the forward so; two passes both ways
         * (SG_NORM_ONEPASS=0) and one pass both ways (=1) give the same bits */
        if (accum == 1 && fuse != 1) { /* (the fused plans store few normalised tensors) */
            CHECK(one_default > 0, "%s: the default step ran no one-pass forward", nm);
            const long l0 = cuda_norm_onepass_launches();
            same_under_env(nm, "SG_NORM_ONEPASS", "0", "the default normalisations", &c, data,
                           engine, lg, sg, bg);
            CHECK(cuda_norm_onepass_launches() == l0,
                  "%s: SG_NORM_ONEPASS=0 ran a one-pass forward", nm);
            const long b0 = cuda_norm_bwd_onepass_launches();
            same_under_env(nm, "SG_NORM_ONEPASS", "1", "the default normalisations", &c, data,
                           engine, lg, sg, bg);
            CHECK(cuda_norm_bwd_onepass_launches() > b0,
                  "%s: SG_NORM_ONEPASS=1 ran no one-pass backward", nm);
        }
        /* the thin convolutions (conv.cu: conv_in's forward and weight gradient, conv_out's
         * gradients) where the own engine runs them: on the 64 x 64 tiles (SG_CONV_THIN=0), the
         * same bits */
        if (accum == 1 && fuse != 1) {
            const int thin_ran = cuda_conv_thin_launches() > thin0;
            CHECK(thin_ran || engine != SG_CONV_ENGINE_OWN,
                  "%s: the own engine ran no pass on the thin kernels", nm);
            if (thin_ran)
                same_under_env(nm, "SG_CONV_THIN", "0", "the thin convolutions", &c, data, engine,
                               lg, sg, bg);
        }
        /* programmatic dependent launch (SG_PDL=1, cuda_kernels.h): each kernel may start while
         * the one before it drains and waits for it first: the same bits, replayed */
        if (accum == 1 && dt == DT_BF16)
            same_under_env(nm, "SG_PDL", "1", "programmatic dependent launch off", &c, data, engine,
                           lg, sg, bg);
        double tol = dt == DT_BF16 ? 3e-2 : 2e-3, worst = 0;
        for (int s = 0; s < STEPS; s++) {
            CHECK(isfinite(lg[s]), "%s: GPU loss %d not finite", nm, s);
            double r = fabs((double)lg[s] - lc[s]) / fabs((double)lc[s]);
            if (r > worst) worst = r;
        }
        printf("%s: CPU vs GPU loss over %d steps: worst relative difference %.3e (tol %.0e)\n", nm,
               STEPS, worst, tol);
        CHECK(worst <= tol, "%s: CPU vs GPU losses differ by %.3e", nm, worst);
        char wn[SG_NAME_MAX];
        const double mt = dt == DT_BF16 ? 0.15 : 1e-2, mw = worst_m_diff(&c, mg, mc, wn, sizeof wn);
        printf("%s: CPU vs GPU Adam m after %d steps: worst tensor %s, normwise %.3e (tol %.2g)\n",
               nm, STEPS < M_STEP ? STEPS : M_STEP, wn, mw, mt);
        CHECK(mw <= mt, "%s: CPU vs GPU gradients (Adam m) of %s differ by %.3e", nm, wn, mw);
    }
    if (ok && dt == DT_BF16 && sg_model_fuse(&c)) {
        /* the same step unfused: the same bits as the fusions that keep them (SG_FUSE_BITWISE:
         * all but upconv2d and conv2d_sc, which round differently), on both backends (under
         * SG_CONV_TC=wgmma every tensor-core conv of both plans, fused or not, runs on the wgmma
         * kernels, whose fused and unfused paths give the same bits); the full fusion (the runs
         * above: unet_tiny's upsample conv as upconv2d, its shortcuts folded) within the bf16 loss
         * tolerance of the unfused step */
        sg_model_cfg u = c, f = c;
        u.fuse = 0;
        f.fuse = SG_FUSE_BITWISE;
        float lu[MAX_STEPS], lcu[MAX_STEPS], lf[MAX_STEPS], lcf[MAX_STEPS];
        unsigned char *su = NULL, *scu = NULL, *sf = NULL, *scf = NULL;
        int64_t bu = 0, bcu = 0, bf = 0, bcf = 0;
        const int uok = !run(&u, data, cuda_on(1, engine), STEPS, lu, &su, &bu, NULL) &&
                        !run(&u, data, sg_backend_cpu_create(), STEPS, lcu, &scu, &bcu, NULL) &&
                        !run(&f, data, cuda_on(1, engine), STEPS, lf, &sf, &bf, NULL) &&
                        !run(&f, data, sg_backend_cpu_create(), STEPS, lcf, &scf, &bcf, NULL);
        CHECK(uok, "%s: unfused runs failed", nm);
        /* bit for bit on the GPU only where both plans run every conv on the own kernels: under
         * auto with cuDNN built, the unfused plan's convs run on cuDNN and the fused ones on the
         * own kernels, other bits by design (the first GPU run); the tolerance below holds */
        const int one_engine = engine == SG_CONV_ENGINE_OWN;
        if (uok) {
            CHECK(!one_engine || (!memcmp(lf, lu, sizeof(float) * (size_t)STEPS) && bu == bf &&
                                  !memcmp(sf, su, (size_t)bf)),
                  "%s: the fused GPU step differs from the unfused one (loss 0: %a vs %a)", nm,
                  lf[0], lu[0]);
            CHECK(!memcmp(lcf, lcu, sizeof(float) * (size_t)STEPS) && bcu == bcf &&
                      !memcmp(scf, scu, (size_t)bcf),
                  "%s: the fused CPU step differs from the unfused one (loss 0: %a vs %a)", nm,
                  lcf[0], lcu[0]);
            double worst = 0;
            for (int s = 0; s < STEPS; s++) {
                const double rg = fabs((double)lg[s] - lu[s]) / fabs((double)lu[s]);
                const double rc = fabs((double)lc[s] - lcu[s]) / fabs((double)lcu[s]);
                worst = fmax(worst, fmax(rg, rc));
            }
            CHECK(worst <= 3e-2, "%s: the upconv2d/conv2d_sc step is %.3e from the unfused one", nm,
                  worst);
            printf("%s: fused but upconv2d/conv2d_sc vs unfused (--fuse 0): identical losses and "
                   "state on %s; with them worst relative loss difference %.3e\n",
                   nm, one_engine ? "the GPU and on the CPU" : "the CPU (two engines on the GPU)",
                   worst);
        }
        free(su), free(scu), free(sf), free(scf);
    }
    if (ok && accum > 1) {
        /* the same global batch in one pass on the GPU: the same losses up to summation order */
        sg_model_cfg one = c;
        one.grad_accum = 1;
        float l1[MAX_STEPS];
        unsigned char *s1 = NULL;
        int64_t b1 = 0;
        CHECK(!run(&one, data, cuda_on(1, engine), STEPS, l1, &s1, &b1, NULL), "%s: one pass", nm);
        double worst = 0;
        for (int s = 0; s1 && s < STEPS; s++) {
            double r = fabs((double)lg[s] - l1[s]) / fabs((double)l1[s]);
            if (r > worst) worst = r;
        }
        printf("%s: vs one pass over the batch on the GPU: worst relative loss difference %.3e\n",
               nm, worst);
        CHECK(s1 && worst <= 2e-5, "%s: vs one pass: losses differ by %.3e", nm, worst);
        free(s1);
    }
    free(sg), free(se), free(sg2), free(sc), free(mg), free(mc), free(data);
}

/* SG_CONV_TC=wgmma (graph/backend_cuda_engines.c): the own engine's bf16 tensor-core convolutions
 * on the Hopper wgmma kernels. An fp32 plan is refused with the reason (bf16 only; on a device
 * other than compute capability 9.0, that reason instead, and nothing more runs); where the
 * device can run them (the host emulation is a 9.0 device), the bf16 checks above on them
 * (`auto` means own with SG_CONV_TC=wgmma). */
/* describe()'s record names the schedule knobs this process runs under (SG_TC_HALO, SG_WG_PERSIST,
 * SG_WG_FILL), so that a measurement says what it ran: the values the environment gives (1: as
 * many as the device has SMs) */
static void check_env_knobs(sg_backend *be) {
    char env[2048], want[96];
    be->describe(be, env, sizeof env);
    const char *h = getenv("SG_TC_HALO");
    snprintf(want, sizeof want, "\"tc_halo\":\"%s\"",
             !h || !*h || !strcmp(h, "1") ? "prologue"
             : !strcmp(h, "all")          ? "all"
                                          : "none");
    CHECK(strstr(env, want) != NULL, "describe() lacks %s: %s", want, env);
    static const char *const knobs[2][2] = {{"SG_WG_PERSIST", "wg_persist"},
                                            {"SG_WG_FILL", "wg_fill"}};
    for (int k = 0; k < 2; k++) {
        const char *v = getenv(knobs[k][0]);
        snprintf(want, sizeof want, "\"%s\":", knobs[k][1]);
        const char *at = strstr(env, want);
        CHECK(at != NULL, "describe() lacks %s: %s", want, env);
        if (!at) continue;
        const long got = strtol(at + strlen(want), NULL, 10), set = v && *v ? atol(v) : 0;
        CHECK(set == 1 ? got > 1 : got == set, "%s=%s recorded as %s%ld", knobs[k][0],
              v ? v : "(unset)", want, got);
    }
    printf("describe(): %s\n", strstr(env, "\"tc_halo\""));
}

/* The linear groups (graph/backend_cuda_run.c, prepare_linear_groups): in unet_tiny's training
 * plan, the ResBlocks' time-embedding projections run as one group (planner/unet.c puts them
 * together), their backward nodes as another, and the time MLP's second linear's two
 * backward passes as a third; the step checks above ran on them (their CPU agreement is the
 * groups'). SG_LINEAR_GROUPS=0 forms none; another value is refused by name. */
static long describe_long(sg_backend *be, const char *key) {
    char env[2048], want[64];
    be->describe(be, env, sizeof env);
    snprintf(want, sizeof want, "\"%s\":", key);
    const char *at = strstr(env, want);
    CHECK(at != NULL, "describe() lacks %s: %s", want, env);
    return at ? strtol(at + strlen(want), NULL, 10) : -1;
}

/* The captured graph's shape in describe() (graph/backend_cuda.c, graph_shape): -1 before the
 * capture; after it, the emulation's straight line (one root, an edge into each later node)
 * and the nodes by type adding up to graph_nodes, kernels among them. On a GPU the same
 * fields say whether a library made the graph other than a line. */
/* the CUDA runtime is tests/cuda_host's emulation (its cuda_runtime_api.h says so) */
static int on_emulation(void) {
#ifdef SG_CUDA_SIM
    return 1;
#else
    return 0;
#endif
}

static void check_graph_shape(void) {
    sg_model_cfg c;
    sg_model_preset(&c, "unet_tiny");
    c.batch = env_int("SG_TEST_BATCH", 1, 4096, c.batch);
    c.act_dt = DT_BF16;
    c.data_n = 64;
    uint8_t *data = data_for(&c);
    sg_exec e;
    if (setup(&e, &c, data, cuda_on(1, SG_CONV_ENGINE_AUTO))) {
        CHECK(0, "graph shape: %s", sg_last_error());
        free(data);
        return;
    }
    const long r0 = describe_long(e.be, "graph_roots"), e0 = describe_long(e.be, "graph_edges"),
               k0 = describe_long(e.be, "kernel");
    CHECK(r0 == -1 && e0 == -1 && k0 == -1, "graph shape before the capture: %ld %ld %ld", r0, e0,
          k0);
    for (int s = 0; s < 2; s++)
        CHECK(!sg_exec_step(&e), "graph shape, step %d: %s", s, sg_last_error());
    const long n = describe_long(e.be, "graph_nodes"), roots = describe_long(e.be, "graph_roots"),
               edges = describe_long(e.be, "graph_edges"), k = describe_long(e.be, "kernel"),
               ms = describe_long(e.be, "memset"), mc = describe_long(e.be, "memcpy"),
               other = describe_long(e.be, "other");
    CHECK(n > 0 && roots == 1 && edges == n - 1 && k > 0 && ms >= 0 && mc >= 0 && other == 0 &&
              k + ms + mc + other == n,
          "graph shape: %ld nodes, %ld roots, %ld edges; kernel %ld, memset %ld, memcpy %ld, "
          "other %ld",
          n, roots, edges, k, ms, mc, other);
    printf("graph shape: %ld nodes (kernel %ld, memset %ld, memcpy %ld), %ld root, %ld edges\n", n,
           k, ms, mc, roots, edges);
    /* the libraries' memset nodes became kernel nodes (kernels/cuda/graph_edit.cu), each in its
     * memset's place: the line stays a line. The emulated libraries capture some only with
     * SG_SIM_LIB_MEMSETS=1 (a cuBLASLt workspace clear before each GEMM); a GPU's do. */
    const long cap = describe_long(e.be, "graph_memsets_captured"),
               rep = describe_long(e.be, "graph_memsets_replaced"),
               kept = describe_long(e.be, "graph_memsets_kept");
    const char *lib = getenv("SG_SIM_LIB_MEMSETS");
    const int sim_lib = lib && !strcmp(lib, "1");
    CHECK(rep + kept == cap && ms == kept && (!on_emulation() || (sim_lib ? cap > 0 : cap == 0)),
          "graph memsets: %ld captured, %ld replaced, %ld kept, %ld memset nodes after (the "
          "emulation's libraries %s)",
          cap, rep, kept, ms, sim_lib ? "clear workspaces" : "capture none");
    printf("graph memsets: %ld captured, %ld as kernel nodes, %ld kept\n", cap, rep, kept);
    sg_exec_free(&e);
    if (cap > 0) { /* SG_GRAPH_MEMSETS=keep: the graph as captured, node for node */
        setenv("SG_GRAPH_MEMSETS", "keep", 1);
        if (setup(&e, &c, data, cuda_on(1, SG_CONV_ENGINE_AUTO))) {
            CHECK(0, "graph memsets kept: %s", sg_last_error());
        } else {
            for (int s = 0; s < 2; s++)
                CHECK(!sg_exec_step(&e), "graph memsets kept, step %d: %s", s, sg_last_error());
            const long n2 = describe_long(e.be, "graph_nodes"), ms2 = describe_long(e.be, "memset"),
                       rep2 = describe_long(e.be, "graph_memsets_replaced");
            CHECK(n2 == n && ms2 == cap && rep2 == 0,
                  "graph memsets kept: %ld nodes (%ld with them replaced), %ld memset nodes of "
                  "%ld, %ld replaced",
                  n2, n, ms2, cap, rep2);
            sg_exec_free(&e);
        }
        /* a driver that refuses the edit (SG_SIM_GRAPH_EDIT_FAIL=1 on the emulation): the graph
         * as captured, the step runs */
        if (on_emulation()) {
            unsetenv("SG_GRAPH_MEMSETS");
            setenv("SG_SIM_GRAPH_EDIT_FAIL", "1", 1);
            if (setup(&e, &c, data, cuda_on(1, SG_CONV_ENGINE_AUTO))) {
                CHECK(0, "graph memsets, edit refused: %s", sg_last_error());
            } else {
                for (int s = 0; s < 2; s++)
                    CHECK(!sg_exec_step(&e), "graph memsets, edit refused, step %d: %s", s,
                          sg_last_error());
                const long ms3 = describe_long(e.be, "memset"),
                           rep3 = describe_long(e.be, "graph_memsets_replaced"),
                           kept3 = describe_long(e.be, "graph_memsets_kept");
                CHECK(ms3 == cap && rep3 == 0 && kept3 == cap,
                      "graph memsets, edit refused: %ld memset nodes of %ld, %ld replaced, %ld "
                      "kept",
                      ms3, cap, rep3, kept3);
                sg_exec_free(&e);
            }
            unsetenv("SG_SIM_GRAPH_EDIT_FAIL");
        }
        setenv("SG_GRAPH_MEMSETS", "bogus", 1);
        sg_backend *bad = sg_backend_cuda_create(0, 1);
        CHECK(!bad && strstr(sg_last_error(), "SG_GRAPH_MEMSETS=bogus"),
              "SG_GRAPH_MEMSETS=bogus: not refused by name (%s)",
              bad ? "created" : sg_last_error());
        if (bad) bad->destroy(bad);
        unsetenv("SG_GRAPH_MEMSETS");
    }
    free(data);
}

/* SG_GRAPH_LAUNCH=device (kernels/cuda/graph_launch.cu): every replay launches one node that
 * tail-launches the step's graph, instantiated for device launch. The losses and final state are
 * the host launch's bit for bit, describe's graph_launch says "device", and on the emulation each
 * replay ran one tail launch. A driver that refuses the device instantiation (the emulation's
 * SG_SIM_DEVICE_GRAPH=refuse): the host launch, the same bits, said in graph_launch. A
 * device-side launch that fails (=fail_launch): the next synchronisation says so, never a step
 * taken as run. SG_GRAPH_LAUNCH=bogus is refused by name. */
#ifdef SG_CUDA_SIM
long sg_sim_tail_launches(void); /* tests/cuda_host: the tail launches run so far */
#else
static long sg_sim_tail_launches(void) {
    return 0;
}
#endif
static void check_graph_launch(void) {
    const sg_model_cfg c = tiny_cfg(DT_BF16);
    uint8_t *data = data_for(&c);
    float lh[MAX_STEPS], ld[MAX_STEPS];
    unsigned char *sh = NULL;
    int64_t bh = 0;
    const int steps = STEPS < 3 ? STEPS : 3;
    CHECK(!run(&c, data, cuda_on(1, SG_CONV_ENGINE_AUTO), steps, lh, &sh, &bh, NULL),
          "graph launch from the host: %s", sg_last_error());
    static const char *const modes[3] = {"", "refuse", "fail_launch"};
    /* (the failing launch is the first replay's: it needs a second step) */
    const int nmodes = on_emulation() ? (steps >= 2 ? 3 : 2) : 1;
    for (int m = 0; m < nmodes && sh; m++) {
        char *keep = env_push("SG_GRAPH_LAUNCH", "device");
        char *sim = m ? env_push("SG_SIM_DEVICE_GRAPH", modes[m]) : NULL;
        sg_exec e;
        if (setup(&e, &c, data, cuda_on(1, SG_CONV_ENGINE_AUTO))) {
            CHECK(0, "graph launch from the device (%s): %s", modes[m], sg_last_error());
        } else {
            const long t0 = sg_sim_tail_launches();
            int rc = SG_OK, s = 0;
            for (; s < steps && !rc; s++) {
                rc = sg_exec_step(&e) || e.be->sync(e.be);
                if (!rc) ld[s] = sg_exec_loss(&e);
            }
            const long tails = sg_sim_tail_launches() - t0;
            char env[4096] = "";
            e.be->describe(e.be, env, sizeof env);
            if (m == 2) {
                /* the first step runs eagerly; the first replay's device launch fails */
                CHECK(rc && s == 2 && strstr(sg_last_error(), "from the device") && tails == 0,
                      "a failed device launch: step %d, %s (%ld tail launches)", s,
                      rc ? sg_last_error() : "no error", tails);
            } else {
                unsigned char *sd = malloc((size_t)bh);
                const int regions[4] = {e.plan.io.params, e.plan.io.adam_m, e.plan.io.adam_v,
                                        e.plan.io.ema};
                const int64_t rb = e.plan.g.t[e.plan.io.params].bytes;
                for (int k = 0; k < 4 && !rc && 4 * rb == bh; k++)
                    rc = sg_exec_read(&e, regions[k], sd + k * rb);
                const char *want = m ? "\"graph_launch\":\"host (device refused)\""
                                     : "\"graph_launch\":\"device\"";
                CHECK(!rc && 4 * rb == bh && !memcmp(lh, ld, sizeof(float) * (size_t)steps) &&
                          !memcmp(sh, sd, (size_t)bh) && strstr(env, want) &&
                          (!on_emulation() || tails == (m ? 0 : steps - 1)),
                      "graph launch from the device%s: %s, %s bits, %ld tail launches: %s",
                      m ? " (refused)" : "", rc ? sg_last_error() : "ran",
                      !rc && !memcmp(sh, sd, (size_t)bh) ? "the host launch's" : "other", tails,
                      env);
                if (!rc)
                    printf("graph launch from the device%s: the host launch's bits, %ld tail "
                           "launches in %d steps\n",
                           m ? " (refused: from the host)" : "", tails, steps);
                free(sd);
            }
            sg_exec_free(&e);
        }
        if (m) env_pop("SG_SIM_DEVICE_GRAPH", sim);
        env_pop("SG_GRAPH_LAUNCH", keep);
    }
    char *keep = env_push("SG_GRAPH_LAUNCH", "bogus");
    sg_backend *bad = sg_backend_cuda_create(0, 1);
    CHECK(!bad && strstr(sg_last_error(), "SG_GRAPH_LAUNCH=bogus"),
          "SG_GRAPH_LAUNCH=bogus: not refused by name (%s)", bad ? "created" : sg_last_error());
    if (bad) bad->destroy(bad);
    env_pop("SG_GRAPH_LAUNCH", keep);
    free(sh);
    free(data);
}

static void check_linear_groups(void) {
    sg_model_cfg c;
    sg_model_preset(&c, "unet_tiny");
    c.batch = env_int("SG_TEST_BATCH", 1, 4096, c.batch);
    c.act_dt = DT_BF16;
    for (int off = 0; off < 3; off++) {
        if (off) setenv("SG_LINEAR_GROUPS", off == 1 ? "0" : "2", 1);
        sg_exec e;
        const int rc = sg_exec_init(&e, &c, 1, cuda_on(1, SG_CONV_ENGINE_OWN));
        if (off == 2) {
            CHECK(rc == SG_ERR && strstr(sg_last_error(), "SG_LINEAR_GROUPS=2"),
                  "SG_LINEAR_GROUPS=2 must be refused by name: %s",
                  rc == SG_ERR ? sg_last_error() : "accepted");
        } else if (rc == SG_OK) {
            int blocks = 0;
            for (int i = 0; i < e.plan.g.nn; i++)
                blocks += e.plan.g.n[i].op == OP_NORM_ACT_TEMB && !e.plan.g.n[i].micro;
            const long groups = describe_long(e.be, "linear_groups"),
                       nodes = describe_long(e.be, "linear_group_nodes");
            CHECK(off ? groups == 0 && nodes == 0 : groups == 3 && nodes == 3 * blocks + 2,
                  "%s: %ld linear groups of %ld nodes (%d ResBlocks)",
                  off ? "SG_LINEAR_GROUPS=0" : "the default", groups, nodes, blocks);
            printf("linear groups%s: %ld of %ld nodes (%d ResBlocks)\n",
                   off ? " (SG_LINEAR_GROUPS=0)" : "", groups, nodes, blocks);
        } else {
            CHECK(0, "unet_tiny bf16: %s", sg_last_error());
        }
        sg_exec_free(&e);
    }
    unsetenv("SG_LINEAR_GROUPS");
}

/* The forward statistics' pairs (graph/backend_cuda_run.c, unpair_stats_after): made only where
 * the conv computes the partials in its tensor-core epilogue. unet_tiny on the own engine: in
 * fp32 every conv runs on the CUDA-core tiles (the partials would be a pass after the conv): no
 * forward pair; in bf16 every normalisation after a conv pairs but the one after conv_in (3
 * input channels: the CUDA-core tiles). The bits are the same every way (check_precision's
 * SG_FUSE_STATS runs). With the two-pass normalisations (SG_NORM_ONEPASS=0): a forward that
 * runs in one pass, the default where its shape is taken, computes its own partials and pairs
 * with no conv. */
static void check_stats_pairs(void) {
    setenv("SG_NORM_ONEPASS", "0", 1);
    for (int bf = 0; bf < 2; bf++) {
        sg_model_cfg c;
        sg_model_preset(&c, "unet_tiny");
        c.batch = env_int("SG_TEST_BATCH", 1, 4096, c.batch);
        c.act_dt = bf ? DT_BF16 : DT_F32;
        sg_exec e;
        if (sg_exec_init(&e, &c, 1, cuda_on(1, SG_CONV_ENGINE_OWN))) {
            CHECK(0, "unet_tiny %s: %s", bf ? "bf16" : "fp32", sg_last_error());
            sg_exec_free(&e);
            continue;
        }
        /* the normalisations right after a conv writing their x (or its first part) */
        const sg_graph *g = &e.plan.g;
        int after_conv = 0, after_conv_in = 0;
        for (int j = 0; j < g->nn; j++) {
            const sg_node *nj = &g->n[j];
            if (nj->op != OP_NORM_ACT && nj->op != OP_NORM_ACT_TEMB) continue;
            const int x = nj->in[0], first = g->t[x].nparts ? g->t[x].parts[0] : x;
            int i = j - 1;
            while (i >= 0 && g->n[i].op == OP_CONCAT) i--;
            if (i < 0 || g->n[i].op != OP_CONV2D || g->n[i].out[0] != first) continue;
            after_conv++;
            after_conv_in += g->t[g->n[i].in[0]].shape[3] == c.in_ch;
        }
        const long fwd = describe_long(e.be, "norm_stats_fused_fwd");
        CHECK(bf ? after_conv_in == 1 && fwd == after_conv - 1 : fwd == 0,
              "unet_tiny %s, own: %ld forward statistics pairs; %d normalisations follow a conv "
              "(%d of them conv_in)",
              bf ? "bf16" : "fp32", fwd, after_conv, after_conv_in);
        printf("unet_tiny %s, own: %ld forward statistics pairs (%d normalisations after a conv)\n",
               bf ? "bf16" : "fp32", fwd, after_conv);
        sg_exec_free(&e);
    }
    unsetenv("SG_NORM_ONEPASS");
}

static void check_wgmma(void) {
    setenv("SG_CONV_TC", "wgmma", 1);
    sg_model_cfg c;
    sg_model_preset(&c, "unet_tiny");
    c.act_dt = DT_F32;
    c.batch = 2;
    c.data_n = 64;
    sg_exec e;
    const int rc = sg_exec_init(&e, &c, 1, cuda_on(1, SG_CONV_ENGINE_AUTO));
    const int sm90 = rc == SG_ERR && strstr(sg_last_error(), "bf16 only") != NULL;
    CHECK(rc == SG_ERR && (sm90 || strstr(sg_last_error(), "compute capability 9.0")),
          "fp32 with SG_CONV_TC=wgmma must be refused with the reason: %s",
          rc == SG_ERR ? sg_last_error() : "accepted");
    if (rc == SG_ERR) printf("fp32 with SG_CONV_TC=wgmma refused: %s\n", sg_last_error());
    sg_exec_free(&e);
    /* a malformed SG_CONV_THIN (conv.cu's thin convolutions) is refused by name */
    {
        char *keep = env_push("SG_CONV_THIN", "3x");
        sg_backend *tb = sg_backend_cuda_create(0, 1);
        CHECK(!tb && strstr(sg_last_error(), "SG_CONV_THIN=3x") && strstr(sg_last_error(), "own"),
              "SG_CONV_THIN=3x must be refused by name, with the values: %s",
              !tb ? sg_last_error() : "accepted");
        if (tb) tb->destroy(tb);
        env_pop("SG_CONV_THIN", keep);
    }
    /* a malformed SG_WG_PERSIST (the persistent grid of the wgmma kernels) or SG_WG_FILL (their
     * N tile) is refused by name */
    c.act_dt = DT_BF16;
    static const char *const knobs[2] = {"SG_WG_PERSIST", "SG_WG_FILL"};
    for (int kn = 0; kn < 2; kn++) {
        const char *wp = getenv(knobs[kn]);
        if (sm90) printf("wgmma step: %s=%s\n", knobs[kn], wp ? wp : "(unset: the default)");
        char *keep = env_push(knobs[kn], "3x");
        const int bad = sg_exec_init(&e, &c, 1, cuda_on(1, SG_CONV_ENGINE_AUTO));
        CHECK(bad == SG_ERR && strstr(sg_last_error(), knobs[kn]) && strstr(sg_last_error(), "=3x"),
              "%s=3x must be refused by name: %s", knobs[kn],
              bad == SG_ERR ? sg_last_error() : "accepted");
        sg_exec_free(&e);
        env_pop(knobs[kn], keep);
    }
    if (sm90) check_precision(DT_BF16, SG_CONV_ENGINE_AUTO, 1, 1);
    /* the fused plan's shortcut folds (conv2d_sc) and upsample convs (upconv2d and its two
     * backward passes) follow the generation: the wgmma kernels under SG_CONV_TC=wgmma (node_engine
     * "wgmma"), mma.sync without it (no name) */
    for (int tc = 0; sm90 && tc < 2; tc++) {
        if (!tc) unsetenv("SG_CONV_TC");
        c.fuse = 1;
        sg_exec f;
        CHECK(sg_exec_init(&f, &c, 1, cuda_on(1, SG_CONV_ENGINE_AUTO)) == SG_OK, "fused plan: %s",
              sg_last_error());
        check_env_knobs(f.be);
        int folds = 0, on = 0;
        for (int i = 0; i < f.plan.g.nn; i++) {
            const int op = f.plan.g.n[i].op;
            if (op != OP_CONV2D_SC && op != OP_UPCONV2D && op != OP_UPCONV2D_BWD_DATA &&
                op != OP_UPCONV2D_BWD_WEIGHT)
                continue;
            char name[64] = "";
            if (f.be->node_engine) f.be->node_engine(f.be, &f.plan, i, name, sizeof name);
            folds++, on += !strcmp(name, "wgmma");
        }
        CHECK(folds > 0 && on == (tc ? folds : 0),
              "%d of %d shortcut folds and upsample convs on the wgmma kernels%s", on, folds,
              tc ? " under SG_CONV_TC=wgmma" : " without SG_CONV_TC");
        printf("shortcut folds and upsample convs on wgmma%s: %d of %d\n",
               tc ? " (SG_CONV_TC=wgmma)" : "", on, folds);
        sg_exec_free(&f);
        setenv("SG_CONV_TC", "wgmma", 1);
    }
    unsetenv("SG_CONV_TC");
}

/* SG_CONV_WINO=1 (kernels/cuda/conv_wino.cu): the own engine's fp32 3x3 stride-1 passes as
 * Winograd F(2x2, 3x3). They ran on it; the replayed step and the eager one
 * give the same bits, and so do two replayed runs; the losses stay within the fp32 tolerance of
 * the CPU's and of the direct tiles' step (another arithmetic: not their bits); describe()
 * records it (conv_wino, which a resume compares); SG_CONV_WINO=2 is refused by name. */
/* An fp32 switch between two forms of the same arithmetic in another order (the CUDA backend
 * reads it when created): its kernels ran; the replayed step and the eager one give the same
 * bits, and so do two replayed runs; the losses stay within the fp32 tolerance of the CPU's and
 * of the step without it, the final state near that step's but not its bits; describe() records
 * it; a malformed value is refused by name. */
typedef struct {
    const char *knob, *on, *bad;      /* the variable, its value, a value it must refuse */
    long (*launches)(void);           /* launches of the kernels it switches to */
    const char *desc_on, *desc_nodes; /* describe() with it: a field, the key of its node count
                                         (NULL: none) */
    const char *what, *without;       /* "<n> <what>" ran; the step without it */
} f32_switch;

/* the runs without any switch (lo, so, bo) and on the CPU (lc) are the caller's */
static void check_f32_switch(const f32_switch *w, const sg_model_cfg *c, const uint8_t *data,
                             const float *lo, const unsigned char *so, int64_t bo,
                             const float *lc) {
    char nm[96];
    snprintf(nm, sizeof nm, "fp32, conv engine own, %s=%s", w->knob, w->on);
    float lw[MAX_STEPS], le[MAX_STEPS], lw2[MAX_STEPS];
    unsigned char *sw = NULL, *se = NULL, *sw2 = NULL;
    int64_t bw = 0, be_ = 0, bw2 = 0;
    char *keep = env_push(w->knob, w->on);
    const long l0 = w->launches();
    const int ok = !run(c, data, cuda_on(1, SG_CONV_ENGINE_OWN), STEPS, lw, &sw, &bw, NULL) &&
                   !run(c, data, cuda_on(0, SG_CONV_ENGINE_OWN), STEPS, le, &se, &be_, NULL) &&
                   !run(c, data, cuda_on(1, SG_CONV_ENGINE_OWN), STEPS, lw2, &sw2, &bw2, NULL);
    const long ran = w->launches() - l0;
    sg_exec e;
    char env[2048] = "";
    if (!sg_exec_init(&e, c, 1, cuda_on(1, SG_CONV_ENGINE_OWN)))
        e.be->describe(e.be, env, sizeof env);
    sg_exec_free(&e);
    const char *wn = w->desc_nodes ? strstr(env, w->desc_nodes) : NULL;
    CHECK(strstr(env, w->desc_on) &&
              (!w->desc_nodes || (wn && atol(wn + strlen(w->desc_nodes)) > 0)),
          "%s: describe() does not record it and the nodes it takes: %s", nm, env);
    setenv(w->knob, w->bad, 1);
    sg_backend *bad = sg_backend_cuda_create(0, 1);
    char want[64];
    snprintf(want, sizeof want, "%s=%s", w->knob, w->bad);
    CHECK(!bad && strstr(sg_last_error(), want), "%s must be refused by name: %s", want,
          bad ? "accepted" : sg_last_error());
    if (bad) bad->destroy(bad);
    env_pop(w->knob, keep);
    CHECK(ok, "%s: runs failed", nm);
    CHECK(ran > 0, "%s: nothing ran on its kernels", nm);
    if (ok) {
        CHECK(!memcmp(lw, le, sizeof(float) * (size_t)STEPS) && bw == be_ &&
                  !memcmp(sw, se, (size_t)bw),
              "%s: graph vs eager differ (loss 0: %a vs %a)", nm, lw[0], le[0]);
        CHECK(!memcmp(lw, lw2, sizeof(float) * (size_t)STEPS) && !memcmp(sw, sw2, (size_t)bw),
              "%s: two graph runs differ", nm);
        double wc = 0, wd = 0;
        for (int s = 0; s < STEPS; s++) {
            CHECK(isfinite(lw[s]), "%s: loss %d not finite", nm, s);
            wc = fmax(wc, fabs((double)lw[s] - lc[s]) / fabs((double)lc[s]));
            wd = fmax(wd, fabs((double)lw[s] - lo[s]) / fabs((double)lo[s]));
        }
        /* the final state (parameters, m, v, EMA) against the step without it: other bits (the
         * other order reached it), normwise within 1e-3 */
        double dd = 0, nn = 0;
        for (int64_t i = 0; bw == bo && i < bw / 4; i++) {
            float a, b;
            memcpy(&a, sw + 4 * i, 4), memcpy(&b, so + 4 * i, 4);
            dd += ((double)a - b) * ((double)a - b), nn += (double)b * b;
        }
        const double sdiff = bw == bo && nn > 0 ? sqrt(dd / nn) : 1;
        printf("%s: %ld %s; graph = eager = a second graph run; worst relative loss difference "
               "over %d steps: %.3e against the CPU, %.3e against %s (tol 2e-3); final state "
               "%.3e normwise from that of %s (tol 1e-3)\n",
               nm, ran, w->what, STEPS, wc, wd, w->without, sdiff, w->without);
        CHECK(wc <= 2e-3 && wd <= 2e-3, "%s: losses %.3e from the CPU's, %.3e from %s", nm, wc, wd,
              w->without);
        CHECK(sdiff <= 1e-3 && memcmp(sw, so, (size_t)bw),
              "%s: the final state is %.3e normwise from %s (%s)", nm, sdiff, w->without,
              memcmp(sw, so, (size_t)bw) ? "tol 1e-3"
                                         : "the same bits: the switch changed nothing");
    }
    free(sw), free(se), free(sw2);
}

/* SG_CONV_WINO=1 (kernels/cuda/conv_wino.cu: the own engine's fp32 3x3 stride-1 passes as
 * Winograd F(2x2, 3x3)), SG_ATTN=fused (kernels/cuda/attention_f32.cu: the fp32 attention on
 * the CUDA cores) and SG_CONV_F32_TC=1 (kernels/cuda/conv.cu's conv_tile_mma3: the direct
 * tiles' products on the tensor cores, 3xTF32) against one step without any, on the own
 * engine, and the CPU's. */
static void check_f32_switches(void) {
    static const f32_switch sw[] = {
        {"SG_CONV_WINO", "1", "2", cuda_conv_wino_launches, "\"conv_wino\":\"on\"",
         "\"wino_nodes\":", "passes on Winograd", "the direct tiles"},
        {"SG_ATTN", "fused", "flash", cuda_attention_f32_launches, "\"attn_engine\":\"fused\"",
         "\"attn_fused_nodes\":", "launches of the fp32 fused attention", "the GEMM path"},
        {"SG_CONV_F32_TC", "1", "2", cuda_conv_f32_tc_launches, "\"conv_f32_tc\":\"on\"", NULL,
         "tile launches on the tensor cores", "the CUDA cores' FMAs"},
    };
    const sg_model_cfg c = tiny_cfg(DT_F32);
    uint8_t *data = data_for(&c);
    float lo[MAX_STEPS], lc[MAX_STEPS];
    unsigned char *so = NULL, *sc = NULL;
    int64_t bo = 0, bc = 0;
    char *keep[3] = {env_push("SG_CONV_WINO", "0"), env_push("SG_ATTN", "gemm"),
                     env_push("SG_CONV_F32_TC", "0")};
    const int ok = !run(&c, data, cuda_on(1, SG_CONV_ENGINE_OWN), STEPS, lo, &so, &bo, NULL) &&
                   !run(&c, data, sg_backend_cpu_create(), STEPS, lc, &sc, &bc, NULL);
    CHECK(ok, "fp32 switches: the runs without them failed");
    for (int k = 0; ok && k < SG_ARRAY_LEN(sw); k++)
        check_f32_switch(&sw[k], &c, data, lo, so, bo, lc);
    env_pop("SG_CONV_F32_TC", keep[2]);
    env_pop("SG_ATTN", keep[1]);
    env_pop("SG_CONV_WINO", keep[0]);
    free(so), free(sc), free(data);
}

/* SG_ATTN=fused takes every attention node of unet_tiny (L 64, C 64: fp32 one head of 64
 * channels, bf16 four heads of 16, which the fp32 kernels do not take), the three of each
 * attention: its forward, its backward and the recompute of its P (attention_p, whose output is
 * fp32 P whatever the activations: the engine decides by qkv's dtype); describe() counts them */
static void check_attn_fused_nodes(void) {
    char *keep = env_push("SG_ATTN", "fused");
    for (int dt = DT_F32; dt <= DT_BF16; dt++) {
        sg_model_cfg c = tiny_cfg((sg_dtype)dt);
        c.heads = dt == DT_BF16 ? 4 : 1, c.head_ch = 0;
        sg_exec e;
        char env[2048] = "";
        int attn = 0, ap = 0;
        if (!sg_exec_init(&e, &c, 1, cuda_on(1, SG_CONV_ENGINE_OWN))) {
            e.be->describe(e.be, env, sizeof env);
            for (int i = 0; i < e.plan.g.nn; i++)
                attn += sg_op_is_attention(e.plan.g.n[i].op),
                    ap += e.plan.g.n[i].op == OP_ATTENTION_P;
        }
        sg_exec_free(&e);
        const char *n = strstr(env, "\"attn_fused_nodes\":");
        CHECK(n && ap > 0 && attn == 3 * ap && atol(n + strlen("\"attn_fused_nodes\":")) == attn,
              "%s: SG_ATTN=fused takes %s of %d attention nodes (%d attention_p)",
              sg_dtype_names[dt], n ? n : "(none)", attn, ap);
    }
    env_pop("SG_ATTN", keep);
}

int main(void) {
    STEPS = env_int("SG_TEST_STEPS", 1, MAX_STEPS, MAX_STEPS);
    if (!sg_cuda_available()) {
        printf("no GPU: skipped\n");
        return SG_TEST_SKIP;
    }
    const char *only = getenv("SG_TEST_ENGINE");
    if (only && strcmp(only, "auto") && strcmp(only, "own")) {
        fprintf(stderr, "SG_TEST_ENGINE=%s: expected auto or own\n", only);
        return 2;
    }
    for (int engine = SG_CONV_ENGINE_AUTO; engine <= SG_CONV_ENGINE_OWN; engine++) {
        /* auto: cuDNN and the gemm engine's 1x1 convs, then own. Without cuDNN, auto differs
         * from own only in the bf16 1x1 convs (gemm; fp32 1x1 convs are cuBLAS GEMMs on own
         * too): its fp32 runs and the fused resume would repeat own's */
        if (only && strcmp(only, sg_conv_engine_name(engine))) continue;
#ifdef SG_HAVE_CUDNN
        const int all = 1;
#else
        const int all = engine == SG_CONV_ENGINE_OWN;
#endif
        if (all) check_precision(DT_F32, engine, 1, SG_FUSE_AUTO);
        check_precision(DT_BF16, engine, 1, SG_FUSE_AUTO); /* the default: unfused */
        check_precision(DT_BF16, engine, 1, 1);            /* fused: the own kernels' fusions */
        check_resume_bf16(engine, SG_FUSE_AUTO);
        if (all) check_resume_bf16(engine, 1);
        if (all && env_int("SG_TEST_ACCUM", 0, 1, 1)) /* accumulation inside the captured graph */
            check_precision(DT_F32, engine, 2, SG_FUSE_AUTO);
    }
    check_wgmma();
    check_f32_switches();
    check_attn_fused_nodes();
    check_linear_groups();
    check_stats_pairs();
    check_graph_shape();
    check_graph_launch();
    /* a plan that cannot fit: refused with the sizes, before allocating */
    sg_model_cfg c;
    sg_model_preset(&c, "unet_cifar");
    c.batch = 60000;
    sg_exec e;
    int rc = sg_exec_init(&e, &c, 1, sg_backend_cuda_create(0, 1));
    CHECK(rc == SG_ERR && strstr(sg_last_error(), "free"), "huge plan: %s", sg_last_error());
    sg_exec_free(&e);
    return sg_test_end();
}
