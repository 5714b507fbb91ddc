/* test_sampler.c — DDPM / DDIM sampling (graph/sampler.c) and the `sample` CLI.
 *
 *   test_sampler              the math and the sampling loop (CPU backend)
 *   test_sampler --cli BIN    the CLI at BIN on a checkpoint written here
 *   test_sampler --cuda       the CUDA backend's sampling, (f) below; exit 77 without a CUDA
 *                             device (linked against tests/cuda_host: its host execution)
 *
 * Oracles: (a) each step against Ho et al. Algorithm 2 / the DDIM update written out here with
 * alpha and abar as products in long double (not sg_ddpm_abar); (b) an "oracle" eps — x_t made
 * from a known x0 — for which DDIM to t = -1 returns x0 and DDPM's mean is the closed-form
 * posterior mean of q(x_{t-1} | x_t, x0); (c) sampling a tiny random UNet end to end: finite,
 * same seed => same bits, other seed => other bits, the documented Philox keying (a loop
 * rebuilt here gives the same bits), an image independent of its batch's size and a partial
 * last batch; (d) the CLI: a PNG of the right size, reproducible, EMA vs raw weights, and a
 * one-line error with the right exit code for every bad input; (d') --out-dir and --npz: the
 * PNGs, the npz and a grid hold the same pixels, a continued run (files missing, damaged, a
 * killed run's temporary file, Ctrl-C) ends with the files of one run from scratch byte for
 * byte, and a change of what made them is refused naming it; (e) the device-resident loop:
 * its step (sg_sample_table + cpu_sample_step, what both backends run) against sg_ddpm_step /
 * sg_ddim_step bit for bit at every step, and sg_sample_ex against the host loop it replaced
 * (rebuilt here) bit for bit; (f) with --cuda: the CUDA backend's sampling, graph replay vs
 * eager bitwise, twice on one executor bitwise, against the CPU backend within tolerance.
 */
#include <ctype.h>
#include <float.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "checkpoints/ckpt.h"
#include "common/philox.h"
#include "data/dataset.h"
#include "data/image_io.h"
#include "graph/exec.h"
#include "graph/sampler.h"
#include "kernels/cpu/cpu_kernels.h"
#include "tests/sg_test.h"

enum { TT = 1000 };
static const double B1 = 1e-4, BT = 0.02;

/* the schedule, independently: alpha_i = 1 - beta_i, abar_t = prod alpha_i, long double;
 * linear from B1 to BT, or cosine (Nichol & Dhariwal 2021: 1 - f(i+1)/f(i) capped at 0.999,
 * f(u) = cos((u/T + 0.008) / 1.008 pi/2)^2) */
static long double ref_cos_f(int i, int T) {
    const long double c = cosl(((long double)i / T + 0.008L) / 1.008L * acosl(-1.0L) / 2);
    return c * c;
}
static long double ref_beta(int i, int T, int schedule) {
    if (schedule == SG_BETA_COSINE) {
        const long double b = 1 - ref_cos_f(i + 1, T) / ref_cos_f(i, T);
        return b < 0.999L ? b : 0.999L;
    }
    return (long double)B1 + ((long double)BT - (long double)B1) * i / (long double)(T - 1);
}
static long double ref_abar(int t, int T, int schedule) {
    long double a = 1.0L;
    for (int i = 0; i <= t; i++) a *= 1.0L - ref_beta(i, T, schedule);
    return t < 0 ? 1.0L : a;
}
static long double ref_clamp(long double v) {
    return v < -1 ? -1 : v > 1 ? 1 : v;
}

static void fill_normal(float *x, int n, uint64_t seed) {
    for (int i = 0; i < n; i++) x[i] = sg_rng_normal(seed, 0, SG_RNG_SAMPLE, (uint64_t)i);
}

/* |got - want| <= rel * |want| + abs, everywhere; returns the worst excess ratio */
static double worst(const float *got, const long double *want, int n, double rel, double abs_) {
    double w = 0;
    for (int i = 0; i < n; i++) {
        double err = fabsl((long double)got[i] - want[i]);
        double tol = rel * fabsl(want[i]) + abs_;
        if (!(err <= tol)) w = err != err ? INFINITY : fmax(w, err / tol);
    }
    return w;
}

enum { NV = 4096 };

/* (a) one step of each sampler against the formulas written out in long double, for the
 * schedule's betas */
static void test_step_math(int schedule) {
    static float x[NV], eps[NV], z[NV], out[NV], out2[NV];
    static long double want[NV];
    const sg_betas BB = {.T = TT, .schedule = schedule, .beta1 = B1, .betaT = BT};
    const char *sn = schedule == SG_BETA_COSINE ? "cosine" : "linear";
    const int ts[] = {0, 1, 2, 10, 500, TT - 2, TT - 1};
    for (int k = 0; k < SG_ARRAY_LEN(ts); k++) {
        int t = ts[k];
        fill_normal(x, NV, 100 + (uint64_t)t);
        fill_normal(eps, NV, 200 + (uint64_t)t);
        fill_normal(z, NV, 300 + (uint64_t)t);
        long double beta = ref_beta(t, TT, schedule), alpha = 1 - beta;
        long double abar = ref_abar(t, TT, schedule), abar_prev = ref_abar(t - 1, TT, schedule);
        long double sigma = t > 0 ? sqrtl(beta * (1 - abar_prev) / (1 - abar)) : 0;
        /* Algorithm 2, no clipping */
        for (int i = 0; i < NV; i++)
            want[i] = (x[i] - beta / sqrtl(1 - abar) * eps[i]) / sqrtl(alpha) + sigma * z[i];
        for (int i = 0; i < NV; i++) out[i] = NAN;
        sg_ddpm_step(out, x, eps, z, NV, t, &BB, 0);
        double w = worst(out, want, NV, 1e-6, 1e-6);
        CHECK(w <= 1, "%s DDPM t=%d: error %.3g x tolerance", sn, t, w);
        /* in place gives the same bits */
        memcpy(out2, x, sizeof x);
        sg_ddpm_step(out2, out2, eps, z, NV, t, &BB, 0);
        CHECK(!memcmp(out, out2, sizeof out), "%s DDPM t=%d: in place differs", sn, t);
        /* the variance beta_t (large), clipped or not: the same mean, sqrt(beta_t) z */
        for (int clip = 0; clip < 2; clip++) {
            for (int i = 0; i < NV; i++) {
                long double x0 = ref_clamp((x[i] - sqrtl(1 - abar) * eps[i]) / sqrtl(abar));
                long double mu = clip ? sqrtl(abar_prev) * beta / (1 - abar) * x0 +
                                            sqrtl(alpha) * (1 - abar_prev) / (1 - abar) * x[i]
                                      : (x[i] - beta / sqrtl(1 - abar) * eps[i]) / sqrtl(alpha);
                want[i] = mu + (t > 0 ? sqrtl(beta) * z[i] : 0);
            }
            sg_ddpm_step_var(out2, x, eps, z, NV, t, &BB, clip, 1);
            w = worst(out2, want, NV, 1e-6, 1e-6);
            CHECK(w <= 1, "%s DDPM large variance clip %d t=%d: error %.3g x tolerance", sn, clip,
                  t, w);
        }
        /* t = 0 takes no noise: z is ignored (and may be NULL) */
        if (t == 0) {
            sg_ddpm_step(out2, x, eps, NULL, NV, t, &BB, 0);
            CHECK(!memcmp(out, out2, sizeof out), "DDPM t=0 used z");
        }
        /* clipped: the x0-parameterised posterior mean with x0_pred clamped */
        int nclamped = 0;
        for (int i = 0; i < NV; i++) {
            long double x0 = (x[i] - sqrtl(1 - abar) * eps[i]) / sqrtl(abar);
            nclamped += fabsl(x0) > 1;
            x0 = ref_clamp(x0);
            want[i] = sqrtl(abar_prev) * beta / (1 - abar) * x0 +
                      sqrtl(alpha) * (1 - abar_prev) / (1 - abar) * x[i] + sigma * z[i];
        }
        sg_ddpm_step(out, x, eps, z, NV, t, &BB, 1);
        w = worst(out, want, NV, 1e-6, 1e-6);
        CHECK(w <= 1, "%s DDPM clip t=%d: error %.3g x tolerance", sn, t, w);
        CHECK(t < 10 || nclamped > NV / 4, "t=%d: random eps should clamp often (%d)", t, nclamped);

        /* DDIM from t to a few earlier timesteps, -1 included */
        const int tps[] = {-1, t / 2, t - 1};
        for (int m = 0; m < 3; m++) {
            int tp = tps[m];
            if (tp >= t || (m > 0 && tp < 0)) continue;
            long double ap = ref_abar(tp, TT, schedule);
            for (int clip = 0; clip < 2; clip++) {
                for (int i = 0; i < NV; i++) {
                    long double x0 = (x[i] - sqrtl(1 - abar) * eps[i]) / sqrtl(abar);
                    if (clip) x0 = ref_clamp(x0);
                    want[i] = sqrtl(ap) * x0 + sqrtl(1 - ap) * eps[i];
                }
                for (int i = 0; i < NV; i++) out[i] = NAN;
                sg_ddim_step(out, x, eps, NV, t, tp, &BB, clip);
                w = worst(out, want, NV, 1e-6, 1e-6);
                CHECK(w <= 1, "%s DDIM t=%d -> %d clip %d: error %.3g x tolerance", sn, t, tp, clip,
                      w);
                /* eta = 0 with noise given: the same bits (no noise is added) */
                sg_ddim_step_eta(out2, x, eps, z, NV, t, tp, &BB, 0.0, clip);
                CHECK(!memcmp(out, out2, sizeof out), "%s DDIM eta 0 t=%d -> %d differs", sn, t,
                      tp);
                /* eta > 0 (Song et al. 2021, eq. 12 with eq. 16's sigma, written out) */
                const double etas[] = {0.5, 1.0};
                for (int ei = 0; ei < 2; ei++) {
                    const long double sg =
                        etas[ei] * sqrtl((1 - ap) / (1 - abar)) * sqrtl(1 - abar / ap);
                    for (int i = 0; i < NV; i++) {
                        long double x0 = (x[i] - sqrtl(1 - abar) * eps[i]) / sqrtl(abar);
                        if (clip) x0 = ref_clamp(x0);
                        want[i] = sqrtl(ap) * x0 + sqrtl(1 - ap - sg * sg) * eps[i] + sg * z[i];
                    }
                    sg_ddim_step_eta(out, x, eps, z, NV, t, tp, &BB, etas[ei], clip);
                    w = worst(out, want, NV, 1e-6, 1e-6);
                    CHECK(w <= 1, "%s DDIM eta %g t=%d -> %d clip %d: error %.3g x tolerance", sn,
                          etas[ei], t, tp, clip, w);
                    /* eta 1 at a one-step gap is the DDPM posterior's variance */
                    if (etas[ei] == 1.0 && tp == t - 1 && t > 0)
                        CHECK(fabsl(sg * sg - beta * (1 - abar_prev) / (1 - abar)) <=
                                  1e-15L + 1e-12L * sg * sg,
                              "%s: eta 1 from t=%d to t-1 is beta~", sn, t);
                }
            }
        }
    }
    if (schedule != SG_BETA_LINEAR) return;
    /* T = 1: one step, beta = beta1 */
    const sg_betas B_1 = {.T = 1, .schedule = SG_BETA_LINEAR, .beta1 = B1, .betaT = BT};
    fill_normal(x, NV, 7);
    fill_normal(eps, NV, 8);
    long double abar1 = 1 - (long double)B1;
    for (int i = 0; i < NV; i++) want[i] = (x[i] - sqrtl(1 - abar1) * eps[i]) / sqrtl(abar1);
    sg_ddpm_step(out, x, eps, NULL, NV, 0, &B_1, 0);
    CHECK(worst(out, want, NV, 1e-6, 1e-6) <= 1, "DDPM with T = 1");
}

static void test_ddim_timesteps(void) {
    int ts[TT];
    CHECK(sg_ddim_timesteps(TT, TT, ts) == SG_OK, "S = T");
    int ok = 1;
    for (int j = 0; j < TT; j++) ok &= ts[j] == TT - 1 - j;
    CHECK(ok, "S = T visits every timestep, T-1 first");
    CHECK(sg_ddim_timesteps(10, TT, ts) == SG_OK, "S = 10");
    ok = 1;
    for (int j = 0; j < 10; j++) ok &= ts[j] == 999 - 100 * j;
    CHECK(ok, "S = 10: 999, 899, ..., 99 (got %d %d .. %d)", ts[0], ts[1], ts[9]);
    /* numpy: np.round(np.arange(1000, 0, -1000 / 3)) - 1 = [999, 666, 332] */
    CHECK(sg_ddim_timesteps(3, TT, ts) == SG_OK && ts[0] == 999 && ts[1] == 666 && ts[2] == 332,
          "S = 3: %d %d %d", ts[0], ts[1], ts[2]);
    /* np.round(np.arange(1000, 0, -1000 / 7)) - 1 = [999, 856, 713, 570, 428, 285, 142] */
    const int s7[7] = {999, 856, 713, 570, 428, 285, 142};
    CHECK(sg_ddim_timesteps(7, TT, ts) == SG_OK && !memcmp(ts, s7, sizeof s7), "S = 7");
    CHECK(sg_ddim_timesteps(1, TT, ts) == SG_OK && ts[0] == TT - 1, "S = 1");
    CHECK(sg_ddim_timesteps(0, TT, ts) == SG_ERR, "S = 0 refused");
    CHECK(sg_ddim_timesteps(TT + 1, TT, ts) == SG_ERR, "S > T refused");
    /* every S: strictly decreasing, within [0, T), starting at T-1 */
    ok = 1;
    for (int S = 1; S <= TT; S++) {
        sg_ddim_timesteps(S, TT, ts);
        ok &= ts[0] == TT - 1 && ts[S - 1] >= 0;
        for (int j = 1; j < S; j++) ok &= ts[j] < ts[j - 1];
    }
    CHECK(ok, "every S in [1, T] gives distinct decreasing timesteps in [0, T)");
}

/* The other spacings against diffusers' DDIMScheduler.set_timesteps (numpy 1.24's values) */
static void test_spacings(void) {
    int ts[TT];
    const int L = SG_SPACING_LEADING, LIN = SG_SPACING_LINSPACE;
    /* (np.arange(0, S) * (1000 // S)).round()[::-1] (+ steps_offset) */
    const int l4[4] = {750, 500, 250, 0}, l7[7] = {852, 710, 568, 426, 284, 142, 0};
    const int l4o[4] = {751, 501, 251, 1};
    CHECK(sg_ddim_timesteps_spaced(4, TT, L, 0, ts) == SG_OK && !memcmp(ts, l4, sizeof l4),
          "leading 4: %d %d %d %d", ts[0], ts[1], ts[2], ts[3]);
    CHECK(sg_ddim_timesteps_spaced(7, TT, L, 0, ts) == SG_OK && !memcmp(ts, l7, sizeof l7),
          "leading 7: %d .. %d", ts[0], ts[6]);
    CHECK(sg_ddim_timesteps_spaced(4, TT, L, 1, ts) == SG_OK && !memcmp(ts, l4o, sizeof l4o),
          "leading 4, offset 1: %d .. %d", ts[0], ts[3]);
    /* the largest offset keeps the first step at T - 1; one more is refused, saying why */
    CHECK(sg_ddim_timesteps_spaced(4, TT, L, 249, ts) == SG_OK && ts[0] == TT - 1,
          "leading 4, offset 249: %d", ts[0]);
    CHECK(sg_ddim_timesteps_spaced(4, TT, L, 250, ts) == SG_ERR &&
              strstr(sg_last_error(), "an offset in [0, 249]"),
          "leading 4, offset 250 refused: %s", sg_last_error());
    CHECK(sg_ddim_timesteps_spaced(7, TT, L, 148, ts) == SG_ERR, "leading 7, offset 148 refused");
    /* np.linspace(0, 999, S).round()[::-1]: halves to even (166.5, 499.5, 832.5) */
    const int n4[4] = {999, 666, 333, 0}, n7[7] = {999, 832, 666, 500, 333, 166, 0};
    const int n30[30] = {99, 96, 92, 89, 85, 82, 79, 75, 72, 68, 65, 61, 58, 55, 51,
                         48, 44, 41, 38, 34, 31, 27, 24, 20, 17, 14, 10, 7,  3,  0};
    CHECK(sg_ddim_timesteps_spaced(4, TT, LIN, 0, ts) == SG_OK && !memcmp(ts, n4, sizeof n4),
          "linspace 4: %d %d %d %d", ts[0], ts[1], ts[2], ts[3]);
    CHECK(sg_ddim_timesteps_spaced(7, TT, LIN, 0, ts) == SG_OK && !memcmp(ts, n7, sizeof n7),
          "linspace 7: %d %d %d %d %d %d %d", ts[0], ts[1], ts[2], ts[3], ts[4], ts[5], ts[6]);
    CHECK(sg_ddim_timesteps_spaced(30, 100, LIN, 0, ts) == SG_OK && !memcmp(ts, n30, sizeof n30),
          "linspace 30 of 100");
    CHECK(sg_ddim_timesteps_spaced(1, TT, LIN, 0, ts) == SG_OK && ts[0] == 0, "linspace 1: 0");
    /* trailing is sg_ddim_timesteps; an offset is leading's alone; unknown spacings, S out of
     * range: refused */
    int tr[7];
    sg_ddim_timesteps(7, TT, tr);
    CHECK(sg_ddim_timesteps_spaced(7, TT, SG_SPACING_TRAILING, 0, ts) == SG_OK &&
              !memcmp(ts, tr, sizeof tr),
          "trailing 7 = sg_ddim_timesteps");
    CHECK(sg_ddim_timesteps_spaced(4, TT, LIN, 1, ts) == SG_ERR &&
              strstr(sg_last_error(), "leading spacing only"),
          "an offset on linspace refused: %s", sg_last_error());
    CHECK(sg_ddim_timesteps_spaced(4, TT, 3, 0, ts) == SG_ERR, "spacing 3 refused");
    CHECK(sg_ddim_timesteps_spaced(0, TT, L, 0, ts) == SG_ERR &&
              sg_ddim_timesteps_spaced(TT + 1, TT, LIN, 0, ts) == SG_ERR,
          "S out of [1, T] refused");
    CHECK(sg_spacing_parse("leading") == L && sg_spacing_parse("linspace") == LIN &&
              sg_spacing_parse("trailing") == SG_SPACING_TRAILING &&
              sg_spacing_parse("Leading") == -1 && !strcmp(sg_spacing_name(LIN), "linspace") &&
              !sg_spacing_name(3),
          "spacing names");
    /* every S of both (and leading's largest offset): distinct, decreasing, in [0, T) */
    int ok = 1;
    for (int S = 1; S <= TT; S++)
        for (int k = 0; k < 3; k++) {
            const int sp = k == 1 ? LIN : L, off = k == 2 ? TT - 1 - (S - 1) * (TT / S) : 0;
            ok &= sg_ddim_timesteps_spaced(S, TT, sp, off, ts) == SG_OK && ts[0] < TT &&
                  ts[S - 1] >= 0 && (k != 2 || ts[0] == TT - 1);
            for (int j = 1; j < S; j++) ok &= ts[j] < ts[j - 1];
        }
    CHECK(ok, "every S in [1, T], leading and linspace: distinct decreasing timesteps in [0, T)");
}

/* (b) the oracle eps: x_t = sqrt(abar) x0 + sqrt(1 - abar) eps from a known x0 */
static void test_oracle(int schedule) {
    static float x0[NV], eps[NV], xt[NV], out[NV], zero[NV];
    static long double want[NV];
    const sg_betas BB = {.T = TT, .schedule = schedule, .beta1 = B1, .betaT = BT};
    for (int i = 0; i < NV; i++)
        x0[i] = 2 * sg_rng_uniform(5, 0, SG_RNG_SAMPLE, (uint64_t)i) - 1; /* in (-1, 1) */
    fill_normal(eps, NV, 6);
    const int ts[] = {0, 1, 10, 250, 500, TT - 1};
    for (int k = 0; k < SG_ARRAY_LEN(ts); k++) {
        int t = ts[k];
        long double abar = ref_abar(t, TT, BB.schedule),
                    abar_prev = ref_abar(t - 1, TT, BB.schedule);
        long double beta = ref_beta(t, TT, BB.schedule);
        for (int i = 0; i < NV; i++)
            xt[i] = (float)(sqrtl(abar) * x0[i] + sqrtl(1 - abar) * eps[i]);
        /* DDIM t -> -1 with the true eps returns x0: the only error is x_t's fp32 rounding,
         * magnified by 1/sqrt(abar) */
        for (int clip = 0; clip < 2; clip++) {
            sg_ddim_step(out, xt, eps, NV, t, -1, &BB, clip);
            double maxerr = 0, bound = 0;
            for (int i = 0; i < NV; i++) {
                maxerr = fmax(maxerr, fabs((double)out[i] - x0[i]));
                bound = fmax(bound, 2 * FLT_EPSILON * (fabs(xt[i]) + 1) / sqrt((double)abar));
            }
            CHECK(maxerr <= bound, "DDIM oracle t=%d clip %d: |x0 - recovered| %.3g > %.3g", t,
                  clip, maxerr, bound);
        }
        /* DDPM with z = 0 and the true eps is the posterior mean
         *   mu~(x_t, x0) = sqrt(abar_{t-1}) beta / (1 - abar) x0
         *                + sqrt(alpha) (1 - abar_{t-1}) / (1 - abar) x_t */
        for (int i = 0; i < NV; i++)
            want[i] = sqrtl(abar_prev) * beta / (1 - abar) * x0[i] +
                      sqrtl(1 - beta) * (1 - abar_prev) / (1 - abar) * xt[i];
        for (int clip = 0; clip < 2; clip++) {
            sg_ddpm_step(out, xt, eps, zero, NV, t, &BB, clip);
            double w = worst(out, want, NV, 1e-5, 1e-5 / sqrt((double)abar));
            CHECK(w <= 1, "DDPM oracle t=%d clip %d: posterior mean off by %.3g x tolerance", t,
                  clip, w);
        }
    }
    /* a DDIM chain over 10 steps with the true eps stays on x0's trajectory and lands on it */
    int ts10[10];
    sg_ddim_timesteps(10, TT, ts10);
    long double a = ref_abar(ts10[0], TT, BB.schedule);
    for (int i = 0; i < NV; i++) xt[i] = (float)(sqrtl(a) * x0[i] + sqrtl(1 - a) * eps[i]);
    for (int j = 0; j < 10; j++)
        sg_ddim_step(xt, xt, eps, NV, ts10[j], j + 1 < 10 ? ts10[j + 1] : -1, &BB, 0);
    /* the first step's x0 carries x_T's fp32 rounding over sqrt(abar): 2.4e-9 at cosine's
     * T - 1, where that bound is the larger */
    double maxerr = 0, bound = 2e-4;
    for (int i = 0; i < NV; i++) {
        maxerr = fmax(maxerr, fabs((double)xt[i] - x0[i]));
        bound = fmax(bound, 2 * FLT_EPSILON * (fabs(x0[i]) + fabs(eps[i]) + 1) / sqrtl(a));
    }
    CHECK(maxerr < bound, "%s DDIM 10-step chain with the true eps: |x0 error| %.3g > %.3g",
          schedule == SG_BETA_COSINE ? "cosine" : "linear", maxerr, bound);
}

/* (b') v prediction: with the true v = sqrt(abar) eps - sqrt(1 - abar) x0 of a known x0, the
 * device update (a row with v_pred, sg_sample_update) recovers x0 by DDIM to -1 and takes the
 * posterior mean by DDPM with z = 0, as the true eps does (graph/sampler.h's conversion
 * eps = sqrt(abar) v + sqrt(1 - abar) x_t); and a v row on an eps prediction is another step */
static void test_v_oracle(int schedule) {
    static float x0[NV], eps[NV], v[NV], xt[NV];
    const sg_betas BB = {.T = TT, .schedule = schedule, .beta1 = B1, .betaT = BT};
    for (int i = 0; i < NV; i++) x0[i] = 2 * sg_rng_uniform(5, 0, SG_RNG_SAMPLE, (uint64_t)i) - 1;
    fill_normal(eps, NV, 6);
    const int ts[] = {0, 1, 10, 250, 500, TT - 1};
    for (int k = 0; k < SG_ARRAY_LEN(ts); k++) {
        const int t = ts[k];
        const long double abar = ref_abar(t, TT, schedule),
                          abar_prev = ref_abar(t - 1, TT, schedule);
        const long double beta = ref_beta(t, TT, schedule);
        for (int i = 0; i < NV; i++) {
            xt[i] = (float)(sqrtl(abar) * x0[i] + sqrtl(1 - abar) * eps[i]);
            v[i] = (float)(sqrtl(abar) * eps[i] - sqrtl(1 - abar) * x0[i]);
        }
        sg_sample_row r[1];
        const int one[1] = {t};
        /* DDIM t -> -1: x0, up to x_t's and v's fp32 rounding over sqrt(abar) */
        CHECK(sg_sample_table(r, 1, one, 1, 1, 0, 0.0, 0, &BB) == SG_OK, "table");
        r[0].v_pred = 1;
        double maxerr = 0, bound = 0, other = 0;
        for (int i = 0; i < NV; i++) {
            maxerr = fmax(maxerr, fabs((double)sg_sample_update(r, xt[i], v[i], 0) - x0[i]));
            bound = fmax(bound, 4 * FLT_EPSILON * (fabs(xt[i]) + fabs(v[i]) + 1) / sqrtl(abar));
        }
        r[0].v_pred = 0; /* the same numbers read as eps: far off */
        for (int i = 0; i < NV; i++)
            other = fmax(other, fabs((double)sg_sample_update(r, xt[i], v[i], 0) - x0[i]));
        CHECK(maxerr <= bound && (t < 10 || other > 100 * bound), /* at t < 10 s is ~1e-2 */
              "v DDIM oracle t=%d: |x0 - recovered| %.3g > %.3g (as eps: %.3g)", t, maxerr, bound,
              other);
        /* DDPM t -> t-1 with z = 0: the posterior mean mu~(x_t, x0) */
        CHECK(sg_sample_table(r, 1, one, 1, 0, 0, 0.0, 0, &BB) == SG_OK, "table");
        r[0].v_pred = 1;
        double w = 0;
        for (int i = 0; i < NV; i++) {
            const long double want = sqrtl(abar_prev) * beta / (1 - abar) * x0[i] +
                                     sqrtl(1 - beta) * (1 - abar_prev) / (1 - abar) * xt[i];
            const double err = fabsl(sg_sample_update(r, xt[i], v[i], 0) - want);
            w = fmax(w, err / (1e-5 * fabsl(want) + 1e-5 / sqrt((double)abar)));
        }
        CHECK(w <= 1, "v DDPM oracle t=%d: posterior mean off by %.3g x tolerance", t, w);
    }
}

/* Whole chains with the exact eps of Gaussian data x0 ~ N(0, s^2 I): x_t ~ N(0, v_t) with
 * v_t = abar s^2 + 1 - abar, and E[eps | x_t] = sqrt(1 - abar) x_t / v_t. Every step is then
 * linear, x_prev = g_t x_t + sigma_t z, and the variance follows the recursion
 * var <- g_t^2 var + sigma_t^2 (DDPM: g_t = (1 - beta_t / v_t) / sqrt(alpha_t); DDIM:
 * g_t = sqrt(abar_prev) (1 - (1 - abar) / v_t) / sqrt(abar) + sqrt(1 - abar_prev)
 * sqrt(1 - abar) / v_t, sigma_t = 0), evaluated here in long double. DDIM is deterministic,
 * so its sample mean and variance must follow the recursion from x_T's own to rounding; DDPM
 * must match it to sampling error (NV values: about 2.2% on a variance). A wrong
 * coefficient or noise scale anywhere in the chain moves the result. */
static void gaussian_chain(int ddim_steps, double s, int schedule, double eta) {
    static float x[NV], eps[NV], z[NV];
    const sg_betas BB = {.T = TT, .schedule = schedule, .beta1 = B1, .betaT = BT};
    int ts[TT], n = ddim_steps ? ddim_steps : TT;
    if (ddim_steps)
        sg_ddim_timesteps(ddim_steps, TT, ts);
    else
        for (int k = 0; k < TT; k++) ts[k] = TT - 1 - k;
    for (int i = 0; i < NV; i++) x[i] = sg_rng_normal(9, TT, SG_RNG_SAMPLE, (uint64_t)i);
    long double m0 = 0, q0 = 0;
    for (int i = 0; i < NV; i++) m0 += x[i], q0 += (long double)x[i] * x[i];
    m0 /= NV;
    /* predicted: DDIM from the sample's own moments; DDPM from N(0, 1) */
    const int exact = ddim_steps && eta == 0; /* deterministic: the recursion to rounding */
    long double pm = m0, pv = exact ? q0 / NV - m0 * m0 : 1.0L;
    for (int k = 0; k < n; k++) {
        int t = ts[k], tp = ddim_steps ? (k + 1 < n ? ts[k + 1] : -1) : t - 1;
        long double abar = ref_abar(t, TT, BB.schedule), ap = ref_abar(tp, TT, BB.schedule);
        long double v = abar * s * s + 1 - abar, e = sqrtl(1 - abar) / v;
        for (int i = 0; i < NV; i++) eps[i] = (float)(e * x[i]);
        long double g, sig2 = 0;
        if (ddim_steps && eta == 0) {
            sg_ddim_step(x, x, eps, NV, t, tp, &BB, 0);
            g = sqrtl(ap) * (1 - sqrtl(1 - abar) * e) / sqrtl(abar) + sqrtl(1 - ap) * e;
        } else if (ddim_steps) {
            for (int i = 0; i < NV; i++) z[i] = sg_rng_normal(9, t, SG_RNG_SAMPLE, (uint64_t)i);
            sg_ddim_step_eta(x, x, eps, z, NV, t, tp, &BB, eta, 0);
            sig2 = eta * eta * (1 - ap) / (1 - abar) * (1 - abar / ap);
            g = sqrtl(ap) * (1 - sqrtl(1 - abar) * e) / sqrtl(abar) + sqrtl(1 - ap - sig2) * e;
        } else {
            for (int i = 0; i < NV; i++) z[i] = sg_rng_normal(9, t, SG_RNG_SAMPLE, (uint64_t)i);
            sg_ddpm_step(x, x, eps, z, NV, t, &BB, 0);
            long double beta = ref_beta(t, TT, BB.schedule);
            g = (1 - beta / v) / sqrtl(1 - beta);
            sig2 = beta * (1 - ap) / (1 - abar);
        }
        pm *= g;
        pv = g * g * pv + sig2;
    }
    double m = 0, q = 0;
    for (int i = 0; i < NV; i++) m += x[i], q += (double)x[i] * x[i];
    m /= NV;
    double var = q / NV - m * m;
    printf("Gaussian data, s^2 = %.3f, %s betas: %s%s %4d steps: sample mean %+.5f variance "
           "%.5f; recursion mean %+.5f variance %.5f\n",
           s * s, schedule == SG_BETA_COSINE ? "cosine" : "linear", ddim_steps ? "DDIM" : "DDPM",
           eta > 0 ? (eta == 1 ? " eta 1" : " eta .5") : "", n, m, var, (double)pm, (double)pv);
    if (exact) {
        CHECK(fabs(m - (double)pm) < 1e-4 && fabs(var / (double)pv - 1) < 1e-4,
              "DDIM %d: sample N(%.6f, %.6f), the recursion says N(%.6f, %.6f)", n, m, var,
              (double)pm, (double)pv);
    } else {
        /* DDPM's 1000 steps also land on the data's variance; 50 stochastic DDIM steps keep a
         * discretisation gap the recursion carries (eta 1: 0.197 against the data's 0.25) */
        CHECK(fabs(m) < 0.05 && fabs(var / (double)pv - 1) < 0.08 &&
                  (ddim_steps || fabs(var / (s * s) - 1) < 0.08),
              "%s eta %g: sample N(%.4f, %.4f), the recursion says variance %.4f, the data %.4f",
              ddim_steps ? "DDIM" : "DDPM", eta, m, var, (double)pv, s * s);
    }
}

/* Zero terminal SNR (Lin et al. 2024; sg_betas.zero_snr), independently: sqrt(abar) of the
 * schedule shifted and scaled in long double, s'_t = (s_t - s_{T-1}) s_0 / (s_0 - s_{T-1}),
 * abar'_t = s'_t^2 (stepgraph takes the product of the rescaled betas instead: the same to
 * rounding, and exactly 0 at T - 1). */
static long double ref_zsnr_abar(int t, int schedule) {
    if (t < 0) return 1.0L;
    const long double s0 = sqrtl(ref_abar(0, TT, schedule)),
                      sT = sqrtl(ref_abar(TT - 1, TT, schedule));
    const long double s = (sqrtl(ref_abar(t, TT, schedule)) - sT) * s0 / (s0 - sT);
    return s * s;
}

/* The rescaled schedule, and whole chains of the device update (sg_sample_update) on it with
 * the exact v of Gaussian data x0 ~ N(0, s^2): E[v | x_t] = sqrt(abar (1 - abar)) (1 - s^2) x_t /
 * v_t (v_t = abar s^2 + 1 - abar), so each step is linear, x_prev = g x_t + sigma z, with g from
 * the v model's x0 = sqrt(abar) x - sqrt(1 - abar) v and eps = sqrt(abar) v + sqrt(1 - abar) x.
 * The first step is at abar = 0 exactly: an update that divides by sqrt(abar) (x0 from eps)
 * gives NaN there, and Algorithm 2's mean 1 / sqrt(alpha) (alpha = 0) too. DDIM is
 * deterministic (the recursion to rounding); DDPM's 1000 steps land on the data's variance. */
static void zero_snr_chains(int schedule) {
    const sg_betas zs = {.T = TT, .schedule = schedule, .beta1 = B1, .betaT = BT, .zero_snr = 1};
    const char *name = schedule == SG_BETA_COSINE ? "cosine" : "linear";
    double *ab = malloc(sizeof(double) * TT), *be = malloc(sizeof(double) * TT);
    sg_ddpm_abars(&zs, ab);
    sg_ddpm_betas(&zs, be);
    double off = 0;
    int at = -1, same = 1;
    for (int t = 0; t < TT; t++) {
        const long double want = ref_zsnr_abar(t, schedule);
        if (want > 0 && fabsl(ab[t] - want) / want > off)
            off = (double)(fabsl(ab[t] - want) / want), at = t;
        if (t % 97 == 0 || t >= TT - 2) {
            const double a1 = sg_ddpm_abar(&zs, t), b1 = sg_ddpm_beta(&zs, t);
            same &= !memcmp(&a1, &ab[t], 8) && !memcmp(&b1, &be[t], 8);
        }
    }
    CHECK(off < 1e-11 && ab[TT - 1] == 0.0 && be[TT - 1] == 1.0 && ab[TT - 2] > 0 && same &&
              fabs(ab[0] / (double)ref_abar(0, TT, schedule) - 1) < 1e-15,
          "%s zero-SNR: abar %.3g off Lin et al.'s (relative, at t=%d); abar(T-1) %.17g beta(T-1) "
          "%.17g (want 0, 1); abar(T-2) %.3g; abar(0) %.17g; sg_ddpm_abar / _beta %s the arrays",
          name, off, at, ab[TT - 1], be[TT - 1], ab[TT - 2], ab[0], same ? "match" : "differ from");
    free(ab), free(be);
    static float x[NV];
    const double s = 0.5;
    const int steps[3] = {0, 10, 50};
    sg_sample_row *rows = malloc(sizeof(sg_sample_row) * TT);
    for (int c = 0; c < 3; c++) {
        const int ddim = steps[c], n = ddim ? ddim : TT;
        int ts[TT];
        if (ddim)
            sg_ddim_timesteps(ddim, TT, ts);
        else
            for (int k = 0; k < TT; k++) ts[k] = TT - 1 - k;
        CHECK(sg_sample_table(rows, TT, ts, n, ddim > 0, 0, 0.0, 0, &zs) == SG_OK, "the table");
        for (int i = 0; i < NV; i++) x[i] = sg_rng_normal(9, TT, SG_RNG_SAMPLE, (uint64_t)i);
        long double m0 = 0, q0 = 0;
        for (int i = 0; i < NV; i++) m0 += x[i], q0 += (long double)x[i] * x[i];
        m0 /= NV;
        long double pm = m0, pv = ddim ? q0 / NV - m0 * m0 : 1.0L;
        for (int k = 0; k < n; k++) {
            rows[k].v_pred = 1;
            const int t = ts[k], tp = ddim ? (k + 1 < n ? ts[k + 1] : -1) : t - 1;
            const long double a = ref_zsnr_abar(t, schedule), ap = ref_zsnr_abar(tp, schedule);
            const long double vt = a * s * s + 1 - a, cv = sqrtl(a * (1 - a)) * (1 - s * s) / vt;
            const long double k0 = sqrtl(a) - sqrtl(1 - a) * cv, ke = sqrtl(a) * cv + sqrtl(1 - a);
            long double g, sig2 = 0;
            if (ddim) {
                g = sqrtl(ap) * k0 + sqrtl(1 - ap) * ke;
            } else {
                const long double beta = 1 - a / ap;
                g = sqrtl(ap) * beta / (1 - a) * k0 + sqrtl(1 - beta) * (1 - ap) / (1 - a);
                sig2 = beta * (1 - ap) / (1 - a);
            }
            for (int i = 0; i < NV; i++) {
                const float z = sg_sample_row_noise(&rows[k])
                                    ? sg_rng_normal(9, t, SG_RNG_SAMPLE, (uint64_t)i)
                                    : 0.0f;
                x[i] = sg_sample_update(&rows[k], x[i], (double)(float)(cv * x[i]), z);
            }
            pm *= g;
            pv = g * g * pv + sig2;
        }
        double m = 0, q = 0;
        for (int i = 0; i < NV; i++) m += x[i], q += (double)x[i] * x[i];
        m /= NV;
        const double var = q / NV - m * m;
        printf("Gaussian data, s^2 = %.3f, %s zero-SNR betas, v: %s %4d steps: sample mean %+.5f "
               "variance %.5f; recursion mean %+.5f variance %.5f\n",
               s * s, name, ddim ? "DDIM" : "DDPM", n, m, var, (double)pm, (double)pv);
        if (ddim)
            CHECK(fabs(m - (double)pm) < 1e-4 && fabs(var / (double)pv - 1) < 1e-4,
                  "%s zero-SNR DDIM %d: sample N(%.6f, %.6f), the recursion says N(%.6f, %.6f)",
                  name, n, m, var, (double)pm, (double)pv);
        else
            CHECK(fabs(m) < 0.05 && fabs(var / (double)pv - 1) < 0.08 &&
                      fabs(var / (s * s) - 1) < 0.08,
                  "%s zero-SNR DDPM: sample N(%.4f, %.4f), the recursion says variance %.4f, the "
                  "data %.4f",
                  name, m, var, (double)pv, s * s);
    }
    free(rows);
}

static void test_gaussian_chains(void) {
    for (int sc = SG_BETA_LINEAR; sc <= SG_BETA_COSINE; sc++) {
        gaussian_chain(0, 0.5, sc, 0);
        gaussian_chain(50, 0.5, sc, 0);
        gaussian_chain(10, 0.5, sc, 0);
        gaussian_chain(TT, 0.5, sc, 0);
        /* stochastic DDIM: the data's variance to sampling error, like DDPM */
        gaussian_chain(50, 0.5, sc, 1.0);
        gaussian_chain(50, 0.5, sc, 0.5);
    }
}

/* ---- (c) end to end on a tiny random UNet */

static void tiny_cfg(sg_model_cfg *c, int batch, sg_dtype dt) {
    sg_model_preset(c, "unet_tiny");
    c->batch = batch;
    c->act_dt = dt;
    c->data_n = 8;
}

/* unet_tiny at 8x8 and 16 channels, batch 2: every op of the full model at a sixteenth of its
 * work, for the tests that sample many times (and on the host execution of CUDA) */
static void small_cfg(sg_model_cfg *c, sg_dtype dt) {
    tiny_cfg(c, 2, dt);
    c->img = c->data_h = c->data_w = 8, c->ch = 16, c->attn_res[0] = 4;
}

/* sampling executor on backend be with parameters from Philox(seed) (docs/model.md's
 * initialisation) */
static int open_on(sg_exec *e, const sg_model_cfg *c, uint64_t seed, sg_backend *be) {
    if (!be) return SG_ERR;
    if (sg_exec_init(e, c, 0, be)) return SG_ERR;
    const sg_plan *p = &e->plan;
    int64_t pb = p->role_bytes[ROLE_PARAM];
    float *buf = malloc((size_t)pb);
    sg_exec_param_init_values(p, seed, buf);
    int rc = e->be->upload(e->be, p->g.t[p->io.params].offset, buf, pb);
    free(buf);
    return rc;
}

static int open_forward(sg_exec *e, const sg_model_cfg *c, uint64_t seed) {
    return open_on(e, c, seed, sg_backend_cpu_create());
}

static int all_finite_in_range(const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i]) || x[i] < -1 || x[i] > 1) return 0;
    return 1;
}

/* The host loop sg_sample_ex ran before the sampler moved onto the device (the reference for
 * the device-resident loop), rebuilt from sampler.h's contract: per batch x_T from Philox(seed,
 * step T, SG_RNG_SAMPLE, image * per + element); per step x written into x_t (rounded to bf16
 * for a bf16 plan), t written, the forward nodes alone run, the prediction read back (as fp32),
 * then sg_ddpm_step (z from Philox at step t) or sg_ddim_step on the host. */
static void host_loop_sample(sg_exec *e, int n_images, uint64_t seed, int S, int clip, float *out) {
    const sg_plan *p = &e->plan;
    int B = p->cfg.batch, T = p->cfg.T, n_steps = S ? S : T;
    const sg_betas pb = sg_model_betas(&p->cfg);
    int64_t per = (int64_t)p->cfg.img * p->cfg.img * p->cfg.in_ch, count = B * per;
    const sg_tensor *xt = &p->g.t[p->io.xt];
    float *x = malloc((size_t)count * 4), *eps = malloc((size_t)count * 4),
          *z = malloc((size_t)count * 4);
    sg_bf16 *h = malloc((size_t)count * 2);
    int32_t tb[64];
    int *ts = malloc(sizeof(int) * (size_t)n_steps);
    if (S)
        sg_ddim_timesteps(S, T, ts);
    else
        for (int k = 0; k < T; k++) ts[k] = T - 1 - k;
    for (int b0 = 0; b0 < n_images; b0 += B) {
        uint64_t first = (uint64_t)b0 * (uint64_t)per;
        for (int64_t i = 0; i < count; i++)
            x[i] = sg_rng_normal(seed, T, SG_RNG_SAMPLE, first + (uint64_t)i);
        for (int k = 0; k < n_steps; k++) {
            int t = ts[k];
            for (int j = 0; j < B; j++) tb[j] = t;
            if (xt->dtype == DT_BF16) {
                for (int64_t i = 0; i < count; i++) h[i] = sg_f32_to_bf16(x[i]);
                sg_exec_write(e, p->io.xt, h);
            } else {
                sg_exec_write(e, p->io.xt, x);
            }
            sg_exec_write(e, p->io.t, tb);
            sg_exec_run_nodes(e, 0, p->g.n_forward);
            if (xt->dtype == DT_BF16) {
                sg_exec_read(e, p->io.pred, h);
                for (int64_t i = 0; i < count; i++) eps[i] = sg_bf16_to_f32(h[i]);
            } else {
                sg_exec_read(e, p->io.pred, eps);
            }
            if (S) {
                sg_ddim_step(x, x, eps, count, t, k + 1 < n_steps ? ts[k + 1] : -1, &pb, clip);
            } else {
                for (int64_t i = 0; i < count && t > 0; i++)
                    z[i] = sg_rng_normal(seed, t, SG_RNG_SAMPLE, first + (uint64_t)i);
                sg_ddpm_step(x, x, eps, t > 0 ? z : NULL, count, t, &pb, clip);
            }
        }
        for (int64_t i = 0; i < (n_images - b0 < B ? n_images - b0 : B) * per; i++)
            out[b0 * per + i] = isfinite(x[i]) ? (x[i] < -1 ? -1 : x[i] > 1 ? 1 : x[i]) : x[i];
    }
    free(x), free(eps), free(z), free(h), free(ts);
}

static int progress_calls;
static void count_progress(void *ctx, int done, int nb, int n, int step, int nsteps, int t) {
    (void)ctx, (void)done, (void)nb, (void)n, (void)step, (void)nsteps, (void)t;
    progress_calls++;
}

/* sg_sample_opts' per-batch callbacks, recorded */
typedef struct {
    int64_t per;
    int skip_first; /* the batch starting at this image is skipped (-1: none) */
    int refuse;     /* on_batch refuses the first batch */
    float *x;       /* the images, at their place */
    int calls, firsts[8], counts[8];
} batch_log;
static int log_skip(void *ctx, int first, int count) {
    (void)count;
    return first == ((batch_log *)ctx)->skip_first;
}
static int log_batch(void *ctx, int first, int count, const float *x) {
    batch_log *l = ctx;
    if (l->calls < 8) l->firsts[l->calls] = first, l->counts[l->calls] = count;
    l->calls++;
    memcpy(l->x + first * l->per, x, sizeof(float) * (size_t)(count * l->per));
    return l->refuse ? sg_set_error("refused here") : SG_OK;
}

/* sg_sample_opts' snapshots of the first batch, recorded */
typedef struct {
    int64_t per;
    int calls, ks[16], firsts[16];
    int x0_null;
    float x_T[2 * 16 * 16 * 3], last[2 * 16 * 16 * 3], last_x0[2 * 16 * 16 * 3];
} snap_log;
static int snap_first_batch(void *ctx, int first, int k, int n_steps) {
    (void)ctx, (void)k, (void)n_steps;
    return first == 0;
}
static int log_snap(void *ctx, int first, int count, int k, const float *x, const float *x0) {
    snap_log *l = ctx;
    if (l->calls < 16) l->ks[l->calls] = k, l->firsts[l->calls] = first;
    l->calls++;
    l->x0_null += (x0 == NULL) != (k < 0);
    memcpy(k < 0 ? l->x_T : l->last, x, sizeof(float) * (size_t)(count * l->per));
    if (x0) memcpy(l->last_x0, x0, sizeof(float) * (size_t)(count * l->per));
    return SG_OK;
}

static void test_end_to_end(void) {
    sg_model_cfg c;
    tiny_cfg(&c, 2, DT_F32);
    sg_exec e;
    CHECK(open_forward(&e, &c, 11) == SG_OK, "forward executor: %s", sg_last_error());
    int64_t per = 16 * 16 * 3;
    float *a = malloc((size_t)(3 * per) * 4), *b = malloc((size_t)(3 * per) * 4),
          *m = malloc((size_t)(3 * per) * 4);
    for (int64_t i = 0; i < 3 * per; i++) a[i] = b[i] = NAN;

    progress_calls = 0;
    CHECK(sg_sample(&e, 2, 42, 5, a, count_progress, NULL) == SG_OK, "DDIM 5: %s", sg_last_error());
    CHECK(progress_calls == 5, "progress called %d times for 5 steps", progress_calls);
    CHECK(all_finite_in_range(a, 2 * per), "DDIM samples finite and in [-1, 1]");
    CHECK(sg_sample(&e, 2, 42, 5, b, NULL, NULL) == SG_OK, "DDIM again");
    CHECK(!memcmp(a, b, (size_t)(2 * per) * 4), "same seed, different bits");
    CHECK(sg_sample(&e, 2, 43, 5, b, NULL, NULL) == SG_OK, "DDIM seed 43");
    CHECK(memcmp(a, b, (size_t)per * 4) && memcmp(a + per, b + per, (size_t)per * 4),
          "another seed gives the same images");
    /* the two images of one run differ (per-image noise indices) */
    CHECK(memcmp(a, a + per, (size_t)per * 4), "two images of a batch are identical");
    /* the loop matches the documented keying and update order bit for bit */
    host_loop_sample(&e, 2, 42, 5, 0, m);
    CHECK(!memcmp(a, m, (size_t)(2 * per) * 4), "sg_sample differs from the loop rebuilt here");

    /* a partial last batch: 3 images in batches of 2; image 0, 1 are those drawn above */
    for (int64_t i = 0; i < 3 * per; i++) b[i] = NAN;
    CHECK(sg_sample(&e, 3, 42, 5, b, NULL, NULL) == SG_OK, "3 images, batch 2");
    CHECK(all_finite_in_range(b, 3 * per), "every value of the partial batch written");
    CHECK(!memcmp(a, b, (size_t)(2 * per) * 4), "first batch changed by a third image");
    /* per batch: skip() leaves a batch out (nothing runs for it), on_batch() gets the others as
     * `out` holds them, and a refusal from it stops sampling */
    batch_log log = {.per = per, .skip_first = 0};
    for (int64_t i = 0; i < 3 * per; i++) m[i] = NAN;
    sg_sample_opts bo = {.ddim_steps = 5,
                         .clip = -1,
                         .skip = log_skip,
                         .on_batch = log_batch,
                         .batch_ctx = &log,
                         .progress = count_progress};
    progress_calls = 0;
    log.x = m;
    CHECK(sg_sample_ex(&e, 3, 42, &bo, NULL) == SG_OK, "batches to a callback: %s",
          sg_last_error());
    CHECK(log.calls == 1 && log.firsts[0] == 2 && log.counts[0] == 1 && progress_calls == 5,
          "skip batch 0: %d on_batch calls (first %d, %d images), %d steps", log.calls,
          log.firsts[0], log.counts[0], progress_calls);
    CHECK(isnan(m[0]) && !memcmp(m + 2 * per, b + 2 * per, (size_t)per * 4),
          "the batch drawn alone differs from the same batch in a full run");
    log = (batch_log){.per = per, .skip_first = -1, .x = m, .refuse = 1};
    CHECK(sg_sample_ex(&e, 3, 42, &bo, NULL) == SG_ERR && log.calls == 1 &&
              strstr(sg_last_error(), "refused here"),
          "on_batch's refusal did not stop sampling (%d calls): %s", log.calls, sg_last_error());
    /* snapshots of batch 0: x_T (k = -1, standard normal), then the state after every step;
     * the last is the image before clamping */
    snap_log sl = {.per = per};
    sg_sample_opts so = {.ddim_steps = 5,
                         .clip = -1,
                         .snap_at = snap_first_batch,
                         .on_snap = log_snap,
                         .batch_ctx = &sl};
    CHECK(sg_sample_ex(&e, 3, 42, &so, b) == SG_OK, "snapshots: %s", sg_last_error());
    int ks_ok = sl.calls == 6;
    for (int i = 0; ks_ok && i < 6; i++) ks_ok = sl.ks[i] == i - 1 && sl.firsts[i] == 0;
    CHECK(ks_ok, "snapshots: %d calls, not k = -1 .. 4 of batch 0", sl.calls);
    int xT_bad = 0;
    for (int64_t i = 0; i < 2 * per; i++)
        xT_bad += sl.x_T[i] != sg_rng_normal(42, e.plan.cfg.T, SG_RNG_SAMPLE, (uint64_t)i);
    CHECK(xT_bad == 0, "the k = -1 snapshot is not x_T (graph/sampler.h's keying) in %d values",
          xT_bad);
    int clamp_bad = 0;
    for (int64_t i = 0; i < 2 * per; i++)
        clamp_bad += (float)sg_sample_clamp1((double)sl.last[i]) != a[i];
    CHECK(clamp_bad == 0, "the last snapshot, clamped, differs from the image in %d values",
          clamp_bad);
    /* the x0 each step predicts: none for x_T; DDIM's last step goes to abar = 1, so its image
     * is its x0 exactly */
    CHECK(sl.x0_null == 0, "x0 given at x_T or missing after a step (%d)", sl.x0_null);
    CHECK(!memcmp(sl.last_x0, sl.last, sizeof(float) * (size_t)(2 * per)),
          "the last step's predicted x0 is not the image it wrote");
    bo.on_batch = NULL;
    CHECK(sg_sample_ex(&e, 3, 42, &bo, NULL) == SG_ERR, "sampled to nowhere");
    sg_exec_free(&e);

    /* the same images from a batch-3 plan: noise keyed by image, not by batch slot (the conv
     * kernels may sum in another order at another N, so compare closely, not bitwise) */
    tiny_cfg(&c, 3, DT_F32);
    CHECK(open_forward(&e, &c, 11) == SG_OK, "batch-3 executor");
    CHECK(sg_sample(&e, 3, 42, 5, m, NULL, NULL) == SG_OK, "3 images, batch 3");
    CHECK(sg_test_rel_err(m, b, 3 * per) < 1e-4, "batch size changed the images: %.3g",
          sg_test_rel_err(m, b, 3 * per));
    sg_exec_free(&e);

    /* DDPM over a short schedule (T = 12): every step, noise included */
    tiny_cfg(&c, 2, DT_F32);
    c.T = 12;
    CHECK(open_forward(&e, &c, 11) == SG_OK, "T=12 executor");
    progress_calls = 0;
    CHECK(sg_sample(&e, 2, 42, 0, a, count_progress, NULL) == SG_OK, "DDPM: %s", sg_last_error());
    CHECK(progress_calls == 12, "DDPM took %d steps of 12", progress_calls);
    CHECK(all_finite_in_range(a, 2 * per), "DDPM samples finite");
    CHECK(sg_sample(&e, 2, 42, 0, b, NULL, NULL) == SG_OK, "DDPM again");
    CHECK(!memcmp(a, b, (size_t)(2 * per) * 4), "DDPM: same seed, different bits");
    sg_sample_opts o = {.ddim_steps = 12, .clip = 1};
    CHECK(sg_sample_ex(&e, 2, 42, &o, b) == SG_OK, "DDIM 12 with clip");
    CHECK(memcmp(a, b, (size_t)(2 * per) * 4), "DDPM and DDIM gave the same images");
    CHECK(sg_sample(&e, 2, 42, 13, b, NULL, NULL) == SG_ERR, "DDIM steps > T accepted");
    CHECK(sg_sample(&e, 0, 42, 5, b, NULL, NULL) == SG_ERR, "0 images accepted");
    /* DPM-Solver++(2M): 12 steps at trailing, not at linspace (S + 1 points need T > S), not
     * with eta, not without steps (DDPM), not a solver that does not exist */
    sg_sample_opts dpm = {.ddim_steps = 12, .solver = SG_SOLVER_DPMPP_2M, .clip = -1};
    CHECK(sg_sample_ex(&e, 2, 42, &dpm, b) == SG_OK && all_finite_in_range(b, 2 * per),
          "DPM-Solver++(2M) 12: %s", sg_last_error());
    const sg_sample_opts refused[4] = {
        {.ddim_steps = 12, .solver = SG_SOLVER_DPMPP_2M, .spacing = SG_SPACING_LINSPACE},
        {.ddim_steps = 4, .solver = SG_SOLVER_DPMPP_2M, .eta = 0.5},
        {.ddim_steps = 0, .solver = SG_SOLVER_DPMPP_2M},
        {.ddim_steps = 4, .solver = 2}};
    const char *says[4] = {"takes steps in [1, 11]", "deterministic", "DDPM none", "solver 2"};
    for (int i = 0; i < 4; i++)
        CHECK(sg_sample_ex(&e, 2, 42, &refused[i], b) == SG_ERR && strstr(sg_last_error(), says[i]),
              "refused DPM-Solver++(2M) case %d: %s", i, sg_last_error());
    sg_exec_free(&e);

    /* bf16 activations: the x_t written as bf16 */
    tiny_cfg(&c, 2, DT_BF16);
    CHECK(open_forward(&e, &c, 11) == SG_OK, "bf16 executor");
    CHECK(sg_sample(&e, 2, 42, 5, a, NULL, NULL) == SG_OK, "bf16 DDIM: %s", sg_last_error());
    CHECK(sg_sample(&e, 2, 42, 5, b, NULL, NULL) == SG_OK, "bf16 DDIM again");
    CHECK(all_finite_in_range(a, 2 * per), "bf16 samples finite");
    CHECK(!memcmp(a, b, (size_t)(2 * per) * 4), "bf16: same seed, different bits");
    sg_exec_free(&e);

    /* a training plan is refused */
    tiny_cfg(&c, 2, DT_F32);
    CHECK(sg_exec_init(&e, &c, 1, sg_backend_cpu_create()) == SG_OK, "train executor");
    CHECK(sg_sample(&e, 2, 42, 5, a, NULL, NULL) == SG_ERR, "sampled from a training plan");
    sg_exec_free(&e);
    free(a), free(b), free(m);
}

/* ---- (e) the device-resident loop (graph/sampler.h) against the host reference */

/* One run of the device step's CPU reference (sg_sample_table + cpu_sample_step: what both
 * backends run) against sg_ddpm_step / sg_ddim_step (the host reference), bit for bit at every
 * step: the start (k = -1: x_T from Philox at step T), then every step k on fresh x and eps,
 * with z drawn by the test from Philox at step t; x_t = x and t = the next step's timestep
 * after each (unchanged after the last); past the run, x stays. */
static void device_step_run(int T, int S, int clip, int schedule, double eta, int large) {
    const sg_betas bb = {.T = T, .schedule = schedule, .beta1 = B1, .betaT = BT};
    enum { N = 4, PER = 128, NS = N * PER };
    static float x[NS], eps[NS], z[NS], ref[NS], xt[NS], x0h[NS];
    static int ts[TT];
    int32_t t[N];
    const uint64_t seed = 77, first = 1000 * PER;
    int n = S ? S : T, bad_x = 0, bad_xt = 0, bad_t = 0, first_bad = -2;
    if (S)
        sg_ddim_timesteps(S, T, ts);
    else
        for (int k = 0; k < T; k++) ts[k] = T - 1 - k;
    sg_sample_row *rows = malloc(sizeof(sg_sample_row) * (size_t)T);
    CHECK(sg_sample_table(rows, T, ts, n, S > 0, clip, eta, large, &bb) == SG_OK, "the step table");
    for (int k = -1; k < n; k++) {
        if (k >= 0) {
            fill_normal(x, NS, 300 + (uint64_t)k);
            fill_normal(eps, NS, 600 + (uint64_t)k);
        }
        int tk = k >= 0 ? ts[k] : T;
        if (k < 0) {
            for (int i = 0; i < NS; i++)
                ref[i] = sg_rng_normal(seed, T, SG_RNG_SAMPLE, first + (uint64_t)i);
        } else if (S) {
            for (int i = 0; i < NS; i++)
                z[i] = sg_rng_normal(seed, tk, SG_RNG_SAMPLE, first + (uint64_t)i);
            sg_ddim_step_eta(ref, x, eps, z, NS, tk, k + 1 < n ? ts[k + 1] : -1, &bb, eta, clip);
        } else {
            for (int i = 0; i < NS; i++)
                z[i] = sg_rng_normal(seed, tk, SG_RNG_SAMPLE, first + (uint64_t)i);
            sg_ddpm_step_var(ref, x, eps, tk > 0 ? z : NULL, NS, tk, &bb, clip, large);
        }
        for (int j = 0; j < N; j++) t[j] = -7;
        cpu_sample_step(x, xt, t, x0h, eps, rows, T, k, seed, first, N, PER, T, 0, 1.0, 0.0);
        int bx = memcmp(x, ref, sizeof x) != 0;
        bad_x += bx;
        bad_xt += memcmp(xt, x, sizeof x) != 0;
        for (int j = 0; j < N; j++) bad_t += t[j] != (k + 1 < n ? ts[k + 1] : -7);
        if (bx && first_bad == -2) first_bad = k;
    }
    CHECK(bad_x == 0 && bad_xt == 0 && bad_t == 0,
          "T %d %s %d clip %d eta %g%s: the device step differs from the host reference at %d "
          "step(s) (first k = %d), x_t at %d, t at %d",
          T, S ? "DDIM" : "DDPM", n, clip, eta, large ? " large variance" : "", bad_x, first_bad,
          bad_xt, bad_t);
    /* past the run (a NONE row where n < T, then past the table): x stays, x_t = x */
    memcpy(ref, x, sizeof x);
    for (int k = n; k <= T; k += (T - n > 1 ? T - n : 1)) {
        cpu_sample_step(x, xt, t, x0h, eps, rows, T, k, seed, first, N, PER, T, 0, 1.0, 0.0);
        CHECK(!memcmp(x, ref, sizeof x) && !memcmp(xt, x, sizeof x),
              "T %d S %d: step %d past the run changed x", T, S, k);
    }
    free(rows);
}

/* Classifier-free guidance in the device step (cpu_sample_step, guided): the prediction the
 * update reads is eps_none + w (eps_class - eps_none) of each image's two (the conditional
 * copies first), in double: w = 1 gives the conditional step's bits, w = 0 the unconditional
 * one's, and w = 3 the step on the mix computed here in long double; x_t and t are written for
 * both copies. DDPM with noise, DDIM, and a v-prediction row. */
static void test_guided_step(void) {
    enum { N = 3, PER = 50, NS = N * PER };
    static float x0[NS], x[NS], ref[NS], pred[2 * NS], xt[2 * NS], x0h[NS];
    int32_t t[2 * N];
    const sg_betas bb = {.T = TT, .schedule = SG_BETA_LINEAR, .beta1 = B1, .betaT = BT};
    int ts[TT];
    sg_ddim_timesteps(7, TT, ts);
    sg_sample_row *rows = malloc(sizeof(sg_sample_row) * TT);
    for (int kind = 0; kind < 3; kind++) {
        const int ddim = kind > 0;
        if (!ddim)
            for (int k = 0; k < TT; k++) ts[k] = TT - 1 - k;
        CHECK(sg_sample_table(rows, TT, ts, ddim ? 7 : TT, ddim, 1, 0.0, 0, &bb) == SG_OK,
              "the step table");
        for (int k = 0; k < TT; k++) rows[k].v_pred = kind == 2;
        const int64_t k = 2;
        fill_normal(x0, NS, 11);
        fill_normal(pred, 2 * NS, 12);
        const double ws[3] = {1.0, 0.0, 3.0};
        for (int wi = 0; wi < 3; wi++) {
            const double w = ws[wi];
            for (int i = 0; i < NS; i++) {
                const long double c = pred[i], u = pred[NS + i];
                const double mix = (double)(u + (long double)w * (c - u));
                const float z = sg_rng_normal(5, rows[k].t, SG_RNG_SAMPLE, 40 + (uint64_t)i);
                ref[i] = wi == 0   ? sg_sample_update(&rows[k], x0[i], pred[i], z)
                         : wi == 1 ? sg_sample_update(&rows[k], x0[i], pred[NS + i], z)
                                   : sg_sample_update(&rows[k], x0[i], mix, z);
            }
            memcpy(x, x0, sizeof x);
            for (int j = 0; j < 2 * N; j++) t[j] = -7;
            cpu_sample_step(x, xt, t, x0h, pred, rows, TT, k, 5, 40, N, PER, TT, 1, w, 0.0);
            int bad_t = 0;
            for (int j = 0; j < 2 * N; j++) bad_t += t[j] != rows[k + 1].t;
            CHECK(!memcmp(x, ref, sizeof x) && !memcmp(xt, x, sizeof x) &&
                      !memcmp(xt + NS, x, sizeof x) && !bad_t,
                  "%s guided step, w %g: x %s the step on the mix, x_t's copies %s, t %d wrong",
                  kind == 0   ? "DDPM"
                  : kind == 1 ? "DDIM"
                              : "DDIM v",
                  w, memcmp(x, ref, sizeof x) ? "is not" : "is",
                  memcmp(xt, x, sizeof x) || memcmp(xt + NS, x, sizeof x) ? "differ" : "agree",
                  bad_t);
        }
    }
    free(rows);
}

/* Guidance rescale (Lin et al. 2024; diffusers' rescale_noise_cfg) in the device step: each
 * image's guided prediction g times f = phi std(c) / std(g) + 1 - phi, computed here in long
 * double (two-pass standard deviations) and compared with cpu_sample_step; phi 1 gives every
 * image's rescaled prediction its conditional prediction's spread; phi 0 is the plain guided
 * step, bit for bit. 700 values per image: the lanes of the fixed-order sum hold several. */
static void test_guidance_rescale(void) {
    enum { N = 3, PER = 700, NS = N * PER };
    static float x0[NS], x[NS], plain[NS], pred[2 * NS], xt[2 * NS], x0h[NS];
    static double got_p[NS];
    int32_t t[2 * N];
    const sg_betas bb = {.T = TT, .schedule = SG_BETA_LINEAR, .beta1 = B1, .betaT = BT};
    int ts[TT];
    sg_ddim_timesteps(10, TT, ts);
    sg_sample_row *rows = malloc(sizeof(sg_sample_row) * TT);
    CHECK(sg_sample_table(rows, TT, ts, 10, 1, 0, 0.0, 0, &bb) == SG_OK, "the step table");
    fill_normal(x0, NS, 21);
    fill_normal(pred, 2 * NS, 22);
    for (int i = 0; i < NS; i++) pred[NS + i] = 0.4f * pred[NS + i] + 0.1f; /* another spread */
    const double w = 4.0;
    const int64_t k = 3;
    memcpy(plain, x0, sizeof x0);
    cpu_sample_step(plain, xt, t, x0h, pred, rows, TT, k, 5, 40, N, PER, TT, 1, w, 0.0);
    const double phis[3] = {0.0, 0.7, 1.0};
    for (int pi = 0; pi < 3; pi++) {
        const double phi = phis[pi];
        double worst = 0, spread = 0;
        for (int b = 0; b < N; b++) {
            long double mc = 0, mg = 0, vc = 0, vg = 0, g[PER];
            for (int j = 0; j < PER; j++) {
                const long double c = pred[b * PER + j], u = pred[NS + b * PER + j];
                g[j] = u + (long double)w * (c - u);
                mc += c, mg += g[j];
            }
            mc /= PER, mg /= PER;
            for (int j = 0; j < PER; j++) {
                const long double dc = pred[b * PER + j] - mc, dg = g[j] - mg;
                vc += dc * dc, vg += dg * dg;
            }
            const long double f = phi * sqrtl(vc / vg) + 1 - phi;
            long double m = 0, v = 0;
            for (int j = 0; j < PER; j++) m += g[j] * f;
            m /= PER;
            for (int j = 0; j < PER; j++) v += (g[j] * f - m) * (g[j] * f - m);
            if (phi == 1.0) spread = fmax(spread, fabs((double)(sqrtl(v / vc)) - 1));
            for (int j = 0; j < PER; j++) got_p[b * PER + j] = (double)(g[j] * f);
        }
        memcpy(x, x0, sizeof x0);
        cpu_sample_step(x, xt, t, x0h, pred, rows, TT, k, 5, 40, N, PER, TT, 1, w, phi);
        for (int i = 0; i < NS; i++) {
            const float want = sg_sample_update(&rows[k], x0[i], got_p[i], 0.0f);
            worst = fmax(worst, fabs((double)x[i] - want) / (fabs((double)want) + 1));
        }
        CHECK(worst <= 1e-6 && spread <= 1e-12 && (phi > 0 || !memcmp(x, plain, sizeof x)) &&
                  (phi == 0 || memcmp(x, plain, sizeof x)),
              "guidance rescale phi %g: x %.3g off the long-double step (relative); phi 1's "
              "spread %.3g off the conditional one's; phi 0 %s the plain guided step",
              phi, worst, spread, memcmp(x, plain, sizeof x) ? "is not" : "is");
    }
    free(rows);
}

static void test_device_step(void) {
    for (int sc = SG_BETA_LINEAR; sc <= SG_BETA_COSINE; sc++)
        for (int clip = 0; clip < 2; clip++) {
            device_step_run(TT, 0, clip, sc, 0, 0);
            device_step_run(12, 0, clip, sc, 0, 0);
            device_step_run(1, 0, clip, sc, 0, 0);
            const int ss[] = {1, 3, 7, 50, TT};
            for (int i = 0; i < SG_ARRAY_LEN(ss); i++) device_step_run(TT, ss[i], clip, sc, 0, 0);
            device_step_run(12, 5, clip, sc, 0, 0);
            /* DDIM with eta: noise where sigma > 0, keyed as DDPM's */
            device_step_run(TT, 7, clip, sc, 1.0, 0);
            device_step_run(TT, 50, clip, sc, 0.5, 0);
            device_step_run(12, 5, clip, sc, 0.3, 0);
            /* DDPM with the variance beta_t (--variance large): another sigma in the row */
            device_step_run(TT, 0, clip, sc, 0, 1);
            device_step_run(12, 0, clip, sc, 0, 1);
        }
}

/* ---- (g) DPM-Solver++(2M) (graph/sampler.h; the table's dpm_row, sg_sample_update_x0h) */

/* diffusers' DPMSolverMultistepScheduler (dpmsolver++, order 2, midpoint, lower_order_final,
 * final sigma 0) written out in long double, its own way: sigma_VE = sqrt((1 - abar) / abar),
 * alpha = 1 / sqrt(sigma_VE^2 + 1), sigma = sigma_VE alpha, lambda = log alpha - log sigma;
 * D0 = x0, D1 = (x0 - x0_prev) / r0 (r0 = h_0 / h), x_t = (sigma_t / sigma_s) x - alpha_t
 * (e^-h - 1) (D0 + D1 / 2), first order (D1 = 0) at the first and the last step. Against the
 * device step's CPU reference (cpu_sample_step over sg_sample_table's DPM rows) on a chain of S
 * steps from x_T, the prediction of each step fresh normals (eps or v), clipped or not. */
static void dpm_chain(int schedule, int S, int vpred, int clip, int karras) {
    enum { N = 2, PER = 64, NS = N * PER };
    static float x[NS], xt[NS], x0h[NS], p[NS];
    static long double ref[NS], mprev[NS], ve[TT + 1];
    const sg_betas bb = {.T = TT, .schedule = schedule, .beta1 = B1, .betaT = BT};
    int ts[TT], tt[N];
    sg_sample_row *rows = malloc(sizeof(sg_sample_row) * TT);
    if (karras) {
        /* Karras et al. 2022 (rho 7) between the VE sigmas at T - 1 and at 0 */
        CHECK(sg_sample_table_karras(rows, TT, ts, S, clip, &bb) == SG_OK, "table");
        const long double a0 = ref_abar(0, TT, schedule), a1 = ref_abar(TT - 1, TT, schedule);
        const long double lo = powl(sqrtl((1 - a0) / a0), 1.0L / 7),
                          hi = powl(sqrtl((1 - a1) / a1), 1.0L / 7);
        for (int k = 0; k < S; k++)
            ve[k] = powl(hi + (S > 1 ? (long double)k / (S - 1) : 0) * (lo - hi), 7);
    } else {
        sg_ddim_timesteps(S, TT, ts);
        CHECK(sg_sample_table(rows, TT, ts, S, SG_TABLE_DPM2M, clip, 0.0, 0, &bb) == SG_OK,
              "table");
        for (int k = 0; k < S; k++) {
            const long double ab = ref_abar(ts[k], TT, schedule);
            ve[k] = sqrtl((1 - ab) / ab);
        }
    }
    ve[S] = 0; /* after the last step */
    for (int k = 0; k < TT; k++) rows[k].v_pred = vpred;
    cpu_sample_step(x, xt, tt, x0h, p, rows, TT, -1, 3, 0, N, PER, TT, 0, 1.0, 0.0); /* x_T */
    for (int i = 0; i < NS; i++) ref[i] = x[i];
    long double lam_prev = 0;
    for (int k = 0; k < S; k++) {
        fill_normal(p, NS, 900 + (uint64_t)k);
        cpu_sample_step(x, xt, tt, x0h, p, rows, TT, k, 3, 0, N, PER, TT, 0, 1.0, 0.0);
        const long double al_s = 1 / sqrtl(ve[k] * ve[k] + 1), sg_s = ve[k] * al_s;
        const long double lam_s = logl(al_s) - logl(sg_s);
        const long double al_t = 1 / sqrtl(ve[k + 1] * ve[k + 1] + 1), sg_t = ve[k + 1] * al_t;
        const long double h = logl(al_t) - logl(sg_t) - lam_s, em1 = expl(-h) - 1;
        const int second = k > 0 && k + 1 < S;
        for (int i = 0; i < NS; i++) {
            long double x0 = vpred ? al_s * ref[i] - sg_s * p[i] : (ref[i] - sg_s * p[i]) / al_s;
            if (clip) x0 = ref_clamp(x0);
            const long double d1 = second ? (x0 - mprev[i]) / ((lam_s - lam_prev) / h) : 0;
            ref[i] = sg_t / sg_s * ref[i] - al_t * em1 * x0 - 0.5L * al_t * em1 * d1;
            mprev[i] = x0;
        }
        lam_prev = lam_s;
    }
    long double scale = 0;
    for (int i = 0; i < NS; i++) scale = fmaxl(scale, fabsl(ref[i]));
    const double w = worst(x, ref, NS, 0, 1e-5 * (double)scale);
    CHECK(w <= 1,
          "DPM-Solver++(2M) %d steps%s, %s betas%s%s: the device step's chain vs "
          "diffusers' form in long double: %.3g of the tolerance (1e-5 of max %.3Lg)",
          S, karras ? " (Karras sigmas)" : "", schedule == SG_BETA_COSINE ? "cosine" : "linear",
          vpred ? ", v" : "", clip ? ", clipped" : "", w, scale);
    free(rows);
}

/* sg_karras_timesteps: the sigmas against Karras et al.'s formula in long double (rho 7, from
 * the sigma at T - 1 to the one at 0), the timesteps the first T - 1 and the last 0, never
 * increasing, each the rounded log-sigma interpolation of its sigma; refused at zero terminal
 * SNR (an infinite sigma). */
static void karras_timesteps(int schedule) {
    const sg_betas bb = {.T = TT, .schedule = schedule, .beta1 = B1, .betaT = BT};
    static double ab[TT], sig[TT];
    static int ts[TT];
    sg_ddpm_abars(&bb, ab);
    const int steps[3] = {1, 10, 200};
    for (int si = 0; si < 3; si++) {
        const int S = steps[si];
        CHECK(sg_karras_timesteps(S, ab, TT, sig, ts) == SG_OK, "karras %d: %s", S,
              sg_last_error());
        const long double lo = powl(sqrtl((1 - (long double)ab[0]) / ab[0]), 1.0L / 7),
                          hi = powl(sqrtl((1 - (long double)ab[TT - 1]) / ab[TT - 1]), 1.0L / 7);
        double worst_sig = 0;
        int bad_t = 0;
        for (int j = 0; j < S; j++) {
            const long double want =
                powl(hi + (S > 1 ? (long double)j / (S - 1) : 0) * (lo - hi), 7);
            worst_sig = fmax(worst_sig, (double)fabsl(sig[j] / want - 1));
            /* the t of the formula's sigma, linear in log sigma between the two timesteps
             * whose sigmas bracket it, rounded */
            const long double l = logl(want);
            int i = 0;
            while (i + 1 < TT - 1 && logl(sqrtl((1 - (long double)ab[i + 1]) / ab[i + 1])) <= l)
                i++;
            const long double l0 = logl(sqrtl((1 - (long double)ab[i]) / ab[i]));
            const long double l1 = logl(sqrtl((1 - (long double)ab[i + 1]) / ab[i + 1]));
            const long double w = fminl(fmaxl((l0 - l) / (l0 - l1), 0), 1);
            const int t = ts[j];
            bad_t += t != (int)rintl(i + w) || (j > 0 && t > ts[j - 1]);
        }
        CHECK(worst_sig <= 1e-12 && !bad_t && ts[0] == TT - 1 && (S == 1 || ts[S - 1] == 0),
              "%s betas, Karras %d: sigmas %.3g off the formula (relative), %d timesteps not the "
              "interpolation's or out of order, first %d, last %d",
              schedule == SG_BETA_COSINE ? "cosine" : "linear", S, worst_sig, bad_t, ts[0],
              ts[S - 1]);
    }
    const sg_betas zs = {.T = TT, .schedule = schedule, .beta1 = B1, .betaT = BT, .zero_snr = 1};
    sg_ddpm_abars(&zs, ab);
    CHECK(sg_karras_timesteps(10, ab, TT, sig, ts) == SG_ERR &&
              strstr(sg_last_error(), "zero terminal SNR"),
          "Karras sigmas at zero terminal SNR: %s", sg_last_error());
}

/* On Gaussian data (x0 ~ N(0, s^2)) the best eps prediction is linear, eps* = sqrt(1 - abar)
 * x / v_t with v_t = abar s^2 + 1 - abar, and the probability-flow ODE that DDIM (eta 0) and
 * DPM-Solver solve maps x at T - 1 to x sqrt(v_t / v_{T-1}) at t. Both solvers run from T - 1 to
 * t = 99 (a timestep every step count below visits) and are checked against that: DDIM's error
 * falls as 1 / S (first order), DPM-Solver++(2M)'s as 1 / S^2 (second order), and the latter
 * is the smaller at every S. */
static void dpm_gaussian(int schedule) {
    const double s2 = 0.25;
    const sg_betas bb = {.T = TT, .schedule = schedule, .beta1 = B1, .betaT = BT};
    int ts[TT];
    sg_sample_row *rows = malloc(sizeof(sg_sample_row) * TT);
    enum { NSTEPS = 4, T_END = 99 };
    const int steps[NSTEPS] = {10, 20, 40, 100};
    double err[NSTEPS][2];
    for (int si = 0; si < NSTEPS; si++) {
        const int S = steps[si];
        sg_ddim_timesteps(S, TT, ts);
        for (int dpm = 0; dpm < 2; dpm++) {
            CHECK(sg_sample_table(rows, TT, ts, S, dpm ? SG_TABLE_DPM2M : SG_TABLE_DDIM, 0, 0.0, 0,
                                  &bb) == SG_OK,
                  "table");
            float x = 1.0f, h = 0.0f;
            int k = 0;
            for (; ts[k] > T_END; k++) {
                const double ab = (double)ref_abar(ts[k], TT, schedule);
                const double e = sqrt(1 - ab) * x / (ab * s2 + 1 - ab);
                x = sg_sample_update_x0h(&rows[k], x, e, 0.0f, &h);
            }
            const double a0 = (double)ref_abar(ts[0], TT, schedule);
            const double ae = (double)ref_abar(T_END, TT, schedule);
            err[si][dpm] = fabs(x / sqrt((ae * s2 + 1 - ae) / (a0 * s2 + 1 - a0)) - 1);
            CHECK(ts[k] == T_END, "%d steps do not visit t = %d", S, T_END);
        }
        printf("Gaussian data, s^2 = %.2f, %s betas, %3d steps: the ODE's x at t = %d off by "
               "%.2e (DDIM), %.2e (DPM-Solver++(2M))\n",
               s2, schedule == SG_BETA_COSINE ? "cosine" : "linear", S, T_END, err[si][0],
               err[si][1]);
        CHECK(err[si][1] < err[si][0],
              "%d steps: DPM-Solver++(2M) off the ODE by %.3g, DDIM by %.3g", S, err[si][1],
              err[si][0]);
    }
    /* the orders, from 40 to 100 steps (2.5x; fewer are not yet asymptotic): DDIM's error
     * 2.5x smaller, DPM's 6.25x */
    const double ddim = err[2][0] / err[3][0], dpm = err[2][1] / err[3][1];
    CHECK(ddim > 2 && ddim < 3.2 && dpm > 5,
          "%s betas, 40 to 100 steps: DDIM's error %.3gx smaller (first order: 2.5), "
          "DPM-Solver++(2M)'s %.3gx (second: 6.25)",
          schedule == SG_BETA_COSINE ? "cosine" : "linear", ddim, dpm);
    free(rows);
}

/* The first and last steps are DDIM's map (order 1; other roundings), and the table's orders */
static void dpm_rows(void) {
    const sg_betas bb = {.T = TT, .schedule = SG_BETA_LINEAR, .beta1 = B1, .betaT = BT};
    int ts[TT];
    sg_ddim_timesteps(8, TT, ts);
    sg_sample_row *a = malloc(sizeof(sg_sample_row) * TT), *b = malloc(sizeof(sg_sample_row) * TT);
    CHECK(sg_sample_table(a, TT, ts, 8, SG_TABLE_DPM2M, 0, 0.0, 0, &bb) == SG_OK &&
              sg_sample_table(b, TT, ts, 8, SG_TABLE_DDIM, 0, 0.0, 0, &bb) == SG_OK,
          "tables");
    int bad_order = 0;
    for (int k = 0; k < 8; k++) bad_order += a[k].order != (k == 0 || k == 7 ? 1 : 2);
    double worst_rel = 0;
    for (int k = 0; k < 8; k += 7)
        for (int i = 0; i < 200; i++) {
            const float x = sg_rng_normal(4, k, SG_RNG_SAMPLE, (uint64_t)i), h = 0.0f;
            const double p = sg_rng_normal(5, k, SG_RNG_SAMPLE, (uint64_t)i);
            float hh = h;
            const float d = sg_sample_update_x0h(&a[k], x, p, 0.0f, &hh);
            const float r = sg_sample_update(&b[k], x, p, 0.0f);
            worst_rel = fmax(worst_rel, fabs((double)d - r) / (fabs((double)r) + 1e-3));
        }
    CHECK(bad_order == 0 && worst_rel <= 1e-6,
          "DPM-Solver++(2M) rows: %d orders wrong; order 1 vs DDIM: relative %.3g", bad_order,
          worst_rel);
    free(a), free(b);
}

static void test_dpm(void) {
    dpm_rows();
    for (int sc = SG_BETA_LINEAR; sc <= SG_BETA_COSINE; sc++) {
        dpm_gaussian(sc);
        dpm_chain(sc, 10, 0, 0, 0);
        dpm_chain(sc, 7, 1, 0, 0);
        dpm_chain(sc, 6, 0, 1, 0);
        dpm_chain(sc, 2, 1, 1, 0);
        dpm_chain(sc, 10, 0, 0, 1);
        dpm_chain(sc, 25, 1, 1, 1);
        karras_timesteps(sc);
    }
}

/* sg_sample_ex (the device-resident loop on the CPU backend) against host_loop_sample (the host
 * loop it replaced): the same images bit for bit, DDPM and DDIM, clipped or not, fp32 and bf16,
 * over several batches with a partial last one. */
static void test_device_vs_host_loop(void) {
    const struct {
        sg_dtype dt;
        int T, S, clip, n;
    } cs[] = {{DT_F32, TT, 5, 0, 3}, {DT_F32, TT, 3, 1, 2},  {DT_F32, 6, 0, 1, 3},
              {DT_F32, 6, 0, 0, 2},  {DT_BF16, TT, 3, 0, 3}, {DT_BF16, 6, 0, 1, 2}};
    int64_t per = 8 * 8 * 3;
    float *a = malloc(sizeof(float) * (size_t)(3 * per)),
          *b = malloc(sizeof(float) * (size_t)(3 * per));
    for (int i = 0; i < SG_ARRAY_LEN(cs); i++) {
        sg_model_cfg c;
        small_cfg(&c, cs[i].dt);
        c.T = cs[i].T;
        sg_exec e;
        CHECK(open_forward(&e, &c, 11) == SG_OK, "executor: %s", sg_last_error());
        sg_sample_opts o = {.ddim_steps = cs[i].S, .clip = cs[i].clip};
        CHECK(sg_sample_ex(&e, cs[i].n, 5, &o, a) == SG_OK, "sample: %s", sg_last_error());
        host_loop_sample(&e, cs[i].n, 5, cs[i].S, cs[i].clip, b);
        CHECK(!memcmp(a, b, sizeof(float) * (size_t)(cs[i].n * per)),
              "%s T %d %s %d clip %d, %d images: the device loop differs from the host loop "
              "(normalised error %.3g)",
              cs[i].dt == DT_BF16 ? "bf16" : "fp32", cs[i].T, cs[i].S ? "DDIM" : "DDPM",
              cs[i].S ? cs[i].S : cs[i].T, cs[i].clip, cs[i].n,
              sg_test_rel_err(a, b, cs[i].n * per));
        sg_exec_free(&e);
    }
    free(a), free(b);
}

/* ---- (f) the CUDA backend (run on the host execution in CI: tests/cuda_host): the same
 * sampling through a captured-and-replayed graph, eagerly, twice, and on the CPU backend. */

static sg_backend *make_backend(int which) {
    return which == 0 ? sg_backend_cpu_create() : sg_backend_cuda_create(0, which == 1);
}

/* `runs` samplings of n images on one executor of backend `which` (0 cpu, 1 cuda graph, 2 cuda
 * eager), each with its own sampler (S, clip, eta), into out[run] */
/* a class-conditional config's labels for n <= 16 images: the classes and the null class in
 * turn; NULL for an unconditional one */
static const int32_t *case_labels(const sg_model_cfg *c) {
    static int32_t lab[16];
    for (int i = 0; i < 16; i++) lab[i] = c->classes > 0 ? i % (c->classes + 1) : 0;
    return c->classes > 0 ? lab : NULL;
}

static int sample_runs(int which, const sg_model_cfg *c, int n, const int *S, const int *solver,
                       const int *clip, const double *eta, int runs, float **out) {
    sg_exec e;
    if (open_on(&e, c, 11, make_backend(which))) {
        fprintf(stderr, "executor: %s\n", sg_last_error());
        return SG_ERR;
    }
    int rc = SG_OK;
    for (int r = 0; r < runs && !rc; r++) {
        sg_sample_opts o = {.ddim_steps = S[r],
                            .solver = solver[r],
                            .clip = clip[r],
                            .eta = eta[r],
                            .labels = case_labels(c)};
        rc = sg_sample_ex(&e, n, 9, &o, out[r]);
        if (rc) fprintf(stderr, "sample: %s\n", sg_last_error());
    }
    sg_exec_free(&e);
    return rc;
}

/* Kept small for the host execution, where every GPU thread is a fiber: small_cfg, DDIM 2
 * steps, DDPM over T = 3 (clipped: its default), DDIM 2 again on one executor (the graph
 * replayed for a second table, then the first again), DDIM 2 with eta 1 (noise drawn in the
 * DDIM update), DPM-Solver++(2M) 3 (orders 1, 2, 1: the x0 history across replays); n_img
 * images (3: two batches, the second partial) */
static void cuda_case(sg_dtype dt, int n_img, double tol, int vpred, float guidance, float phi) {
    enum { RUNS = 5 };
    const int S[RUNS] = {2, 0, 2, 2, 3}, clip[RUNS] = {-1, -1, -1, -1, -1};
    const int solver[RUNS] = {0, 0, 0, 0, SG_SOLVER_DPMPP_2M};
    const double eta[RUNS] = {0, 0, 0, 1, 0};
    sg_model_cfg c;
    small_cfg(&c, dt);
    c.T = 3;
    c.prediction = vpred ? SG_PRED_V : SG_PRED_EPS;
    if (guidance > 0) c.classes = 3, c.guidance = guidance; /* a class-conditional model */
    c.guidance_rescale = phi;
    int64_t per = 8 * 8 * 3, nv = n_img * per;
    float *buf[3][RUNS];
    for (int b = 0; b < 3; b++)
        for (int r = 0; r < RUNS; r++) buf[b][r] = malloc(sizeof(float) * (size_t)nv);
    const char *nm = phi > 0         ? "fp32 v guided, rescaled"
                     : guidance > 0  ? "fp32 guided"
                     : vpred         ? "fp32 v"
                     : dt == DT_BF16 ? "bf16"
                                     : "fp32";
    int ok = !sample_runs(0, &c, n_img, S, solver, clip, eta, RUNS, buf[0]) &&
             !sample_runs(1, &c, n_img, S, solver, clip, eta, RUNS, buf[1]) &&
             !sample_runs(2, &c, n_img, S, solver, clip, eta, RUNS, buf[2]);
    CHECK(ok, "%s: sampling failed", nm);
    for (int r = 0; ok && r < RUNS; r++) {
        const char *what = !S[r]        ? "DDPM 3"
                           : solver[r]  ? "DPM-Solver++(2M) 3"
                           : eta[r] > 0 ? "DDIM 2 eta 1"
                                        : "DDIM 2";
        CHECK(all_finite_in_range(buf[1][r], nv), "%s %s: CUDA samples not finite", nm, what);
        CHECK(!memcmp(buf[1][r], buf[2][r], sizeof(float) * (size_t)nv),
              "%s %s: graph replay and eager differ", nm, what);
        double err = sg_test_rel_err(buf[1][r], buf[0][r], nv);
        printf("%s %s: CUDA vs CPU normalised error %.3g (tolerance %.0e)\n", nm, what, err, tol);
        CHECK(err <= tol, "%s %s: CUDA vs CPU normalised error %.3g > %.3g", nm, what, err, tol);
    }
    /* the same sampler twice on one (captured) executor: the same bits */
    CHECK(!ok || !memcmp(buf[1][0], buf[1][2], sizeof(float) * (size_t)nv),
          "%s: DDIM 2 twice on one executor differs", nm);
    CHECK(!ok || sg_test_rel_err(buf[1][3], buf[1][0], nv) > 1e-3,
          "%s: DDIM 2 with eta 1 drew no noise (%.3g from eta 0)", nm,
          sg_test_rel_err(buf[1][3], buf[1][0], nv));
    /* snapshots between the replays (reads of the state and the prediction) change no bit, and
     * the last step's x0 is the image (DDIM) */
    sg_exec e;
    if (ok && open_on(&e, &c, 11, make_backend(1)) == SG_OK) {
        snap_log sl = {.per = per};
        sg_sample_opts so = {.ddim_steps = 2,
                             .clip = -1,
                             .labels = case_labels(&c),
                             .snap_at = snap_first_batch,
                             .on_snap = log_snap,
                             .batch_ctx = &sl};
        CHECK(sg_sample_ex(&e, n_img, 9, &so, buf[2][1]) == SG_OK, "%s snapshots: %s", nm,
              sg_last_error());
        CHECK(!memcmp(buf[2][1], buf[1][0], sizeof(float) * (size_t)nv) && sl.calls == 3,
              "%s: sampling with snapshots differs from without (%d snapshots)", nm, sl.calls);
        CHECK(!memcmp(sl.last_x0, sl.last, sizeof(float) * (size_t)(2 * per)),
              "%s: the last x0 is not the image", nm);
        sg_exec_free(&e);
    } else {
        CHECK(0, "%s: a CUDA executor for the snapshots: %s", nm, sg_last_error());
    }
    for (int b = 0; b < 3; b++)
        for (int r = 0; r < RUNS; r++) free(buf[b][r]);
}

static int test_cuda(void) {
    if (!sg_cuda_available()) {
        printf("no CUDA device: skipped\n");
        return SG_TEST_SKIP;
    }
    /* fp32: the same network on both (~2e-7 on the host execution, GEMM orders); bf16: the
     * GPU's GEMMs take bf16 copies of the weights, the CPU reference fp32 ones (~3e-3) */
    cuda_case(DT_F32, 3, 1e-4, 0, 0, 0);
    cuda_case(DT_BF16, 2, 2e-2, 0, 0, 0);
    cuda_case(DT_F32, 2, 1e-4, 1, 0, 0); /* a v-prediction model: x0 and eps from v */
    /* a class-conditional model with classifier-free guidance: each image twice per step; and
     * a v model's with guidance rescale (a block per image) */
    cuda_case(DT_F32, 3, 1e-4, 0, 2.5f, 0);
    cuda_case(DT_F32, 2, 1e-4, 1, 2.5f, 0.7f);
    return sg_test_end();
}

/* ---- (d) the CLI */

static char tmpdir[] = "/tmp/sg_sampler_XXXXXX";
static const char *sample_bin;

/* run `sample ARGS`, stdout and stderr to files; returns the exit status (-1: signal) */
static int run_cli(const char *args) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' %s >'%s/stdout' 2>'%s/stderr'", sample_bin, args, tmpdir,
             tmpdir);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static long read_file(const char *path, char *buf, long cap) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    long n = (long)fread(buf, 1, (size_t)cap - 1, f);
    fclose(f);
    buf[n > 0 ? n : 0] = 0;
    return n;
}

/* the last run's stdout (its summary line) */
static long read_stdout(char *buf, long cap) {
    char path[300];
    snprintf(path, sizeof path, "%s/stdout", tmpdir);
    return read_file(path, buf, cap);
}

static int stderr_lines(char *text, long cap) {
    char p[512];
    snprintf(p, sizeof p, "%s/stderr", tmpdir);
    long n = read_file(p, text, cap);
    int lines = 0;
    for (long i = 0; i < n; i++) lines += text[i] == '\n';
    return lines;
}

/* exit code `want` and exactly one line on stderr */
static void expect_error(const char *args, int want) {
    char err[4096];
    int rc = run_cli(args);
    int lines = stderr_lines(err, sizeof err);
    CHECK(rc == want, "sample %s: exit %d, expected %d (%s)", args, rc, want, err);
    CHECK(lines == 1 && strlen(err) > 10, "sample %s: %d stderr lines: %s", args, lines, err);
}

/* expect_error, and its one line says `says` */
static void expect_error_saying(const char *args, int want, const char *says) {
    char err[4096];
    expect_error(args, want);
    stderr_lines(err, sizeof err);
    CHECK(strstr(err, says) != NULL, "sample %s: the error does not say '%s': %s", args, says, err);
}

/* the last run's stderr names path exactly once (a message that repeats the path reads badly) */
static void expect_path_once(const char *path) {
    char err[4096];
    stderr_lines(err, sizeof err);
    int times = 0;
    for (const char *p = strstr(err, path); p; p = strstr(p + 1, path)) times++;
    CHECK(times == 1, "stderr names %s %d times: %s", path, times, err);
}

static int png_size(const char *path, int *w, int *h) {
    unsigned char b[24];
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    size_t n = fread(b, 1, 24, f);
    fclose(f);
    if (n != 24 || memcmp(b, "\x89PNG\r\n\x1a\n", 8) || memcmp(b + 12, "IHDR", 4)) return -1;
    *w = (b[16] << 24) | (b[17] << 16) | (b[18] << 8) | b[19];
    *h = (b[20] << 24) | (b[21] << 16) | (b[22] << 8) | b[23];
    return 0;
}

static int same_file(const char *a, const char *b) {
    static char x[1 << 20], y[1 << 20];
    long na = read_file(a, x, sizeof x), nb = read_file(b, y, sizeof y);
    return na > 0 && na == nb && !memcmp(x, y, (size_t)na);
}

/* ---- (d') --out-dir and --npz: every image a PNG written as its batch finishes, a run that
 * continues where it was with the same bits, one npz */

/* the arr_0 bytes of an npz that sample wrote, found through the zip's local header and the
 * .npy header; NULL unless the file holds exactly `bytes` of them before its trailer */
static uint8_t *npz_array(const char *path, int64_t bytes) {
    struct stat st;
    if (stat(path, &st)) return NULL;
    uint8_t *b = malloc((size_t)st.st_size + 1), *arr = NULL;
    long n = read_file(path, (char *)b, (long)st.st_size + 1);
    if (n > 40 && !memcmp(b, "PK\3\4", 4)) {
        long npy = 30 + (b[26] | b[27] << 8) + (b[28] | b[29] << 8);
        if (npy + 10 < n && !memcmp(b + npy, "\x93NUMPY", 6)) {
            long data = npy + 10 + (b[npy + 8] | b[npy + 9] << 8);
            /* the central directory (46 + 9 bytes) and the end record (22) follow */
            if (data + bytes + 46 + 9 + 22 == n && !memcmp(b + data + bytes, "PK\1\2", 4)) {
                arr = malloc((size_t)bytes);
                memcpy(arr, b + data, (size_t)bytes);
            }
        }
    }
    free(b);
    return arr;
}

/* entries of dir: those not starting with '.', and the others (temporary files left) */
static int dir_entries(const char *dir, int *hidden) {
    char cmd[600], out[64];
    snprintf(cmd, sizeof cmd, "ls -A '%s' | grep -c -v '^\\.' > '%s/count'", dir, tmpdir);
    if (system(cmd) < 0) return -1;
    snprintf(cmd, sizeof cmd, "%s/count", tmpdir);
    read_file(cmd, out, sizeof out);
    int n = atoi(out);
    snprintf(cmd, sizeof cmd, "ls -A '%s' | grep -c '^\\.' > '%s/count'", dir, tmpdir);
    if (system(cmd) < 0) return -1;
    snprintf(cmd, sizeof cmd, "%s/count", tmpdir);
    read_file(cmd, out, sizeof out);
    *hidden = atoi(out);
    return n;
}

/* every image file i < n of two folders has the same bytes */
static int same_images(const char *a, const char *b, int n) {
    char pa[512], pb[512];
    for (int i = 0; i < n; i++) {
        snprintf(pa, sizeof pa, "%s/%06d.png", a, i);
        snprintf(pb, sizeof pb, "%s/%06d.png", b, i);
        if (!same_file(pa, pb)) return 0;
    }
    return 1;
}

static void test_cli_out_dir(const char *ck) {
    enum { PER = 16 * 16 * 3, N = 7 };
    char d1[256], d2[256], d3[256], n1[256], n2[256], g[256], args[2048], err[4096], out[4096];
    char path[512];
    snprintf(d1, sizeof d1, "%s/outs/d1", tmpdir); /* its parent is made too */
    snprintf(d2, sizeof d2, "%s/d2", tmpdir);
    snprintf(d3, sizeof d3, "%s/d3", tmpdir);
    snprintf(n1, sizeof n1, "%s/n1.npz", tmpdir);
    snprintf(n2, sizeof n2, "%s/n2.npz", tmpdir);
    snprintf(g, sizeof g, "%s/g.png", tmpdir);
    const char *common = "--ddim-steps 3 --backend cpu --batch 2";

    /* 7 images: 7 PNGs and samples.json, no temporary file left, the npz holds the same pixels,
     * and so does a grid of the same images */
    snprintf(args, sizeof args, "--ckpt '%s' %s --n %d --out-dir '%s' --npz '%s'", ck, common, N,
             d1, n1);
    int rc = run_cli(args);
    stderr_lines(err, sizeof err);
    CHECK(rc == 0, "--out-dir --npz: exit %d: %s", rc, err);
    int hidden = -1, files = dir_entries(d1, &hidden);
    CHECK(files == N + 1 && hidden == 0, "%s: %d files and %d hidden ones, expected %d and 0", d1,
          files, hidden, N + 1);
    static uint8_t img[N][PER];
    for (int i = 0; i < N; i++) {
        snprintf(path, sizeof path, "%s/%06d.png", d1, i);
        CHECK(img_read_png(path, 16, 16, 3, img[i]) == SG_OK, "%s", sg_last_error());
    }
    uint8_t *arr = npz_array(n1, (int64_t)N * PER);
    CHECK(arr && !memcmp(arr, img, sizeof img), "the npz is not the PNGs' pixels");
    free(arr);
    /* the folder is a dataset train reads (--data folder:DIR): the same pixels */
    sg_dataset ds;
    CHECK(data_load_folder(&ds, d1, 16, 3) == SG_OK && ds.n == N &&
              !memcmp(ds.pixels, img, sizeof img),
          "--data folder:%s does not read the images back: %s", d1, sg_last_error());
    data_free(&ds);
    snprintf(args, sizeof args, "--ckpt '%s' %s --n %d --out '%s' --cols %d", ck, common, N, g, N);
    CHECK(run_cli(args) == 0, "the grid of the same images");
    enum { GW = N * 17 + 1, GH = 18 };
    static uint8_t grid[GH * GW * 3];
    CHECK(img_read_png(g, GH, GW, 3, grid) == SG_OK, "grid: %s", sg_last_error());
    int bad = 0;
    for (int i = 0; i < N; i++)
        for (int y = 0; y < 16; y++)
            for (int x = 0; x < 16 * 3; x++)
                bad += grid[((1 + y) * GW + 1 + i * 17) * 3 + x] != img[i][y * 16 * 3 + x];
    CHECK(bad == 0, "%d grid values differ from the PNGs'", bad);

    /* a second run continues: the files of whole batches are kept, a missing file's and a
     * damaged file's batches drawn again (named), and --n may grow; the result is the files of
     * one run from scratch, byte for byte, and its npz */
    snprintf(path, sizeof path, "%s/000003.png", d1);
    remove(path);
    snprintf(path, sizeof path, "%s/000005.png", d1);
    CHECK(truncate(path, 60) == 0, "truncate");
    /* a killed run's temporary file is removed (no process has that number: above the
     * kernel's pid_max), a live process's is not */
    snprintf(path, sizeof path, "%s/.000007.png.tmp.99999999", d1);
    FILE *stale = fopen(path, "w");
    CHECK(stale && fclose(stale) == 0, "%s", path);
    char live[512];
    snprintf(live, sizeof live, "%s/.000008.png.tmp.%ld", d1, (long)getpid());
    stale = fopen(live, "w");
    CHECK(stale && fclose(stale) == 0, "%s", live);
    snprintf(args, sizeof args, "--ckpt '%s' %s --n 9 --out-dir '%s' --npz '%s'", ck, common, d1,
             n1);
    rc = run_cli(args);
    stderr_lines(err, sizeof err);
    snprintf(path, sizeof path, "%s/stdout", tmpdir);
    read_file(path, out, sizeof out);
    CHECK(rc == 0 && strstr(out, "; 2 of them were there already"), "continued: exit %d: %s%s", rc,
          out, err);
    CHECK(strstr(err, "000005.png") && strstr(err, "drawn again") &&
              strstr(err, "holds 2 of the 9 images already"),
          "the damaged file or the count not said: %s", err);
    snprintf(args, sizeof args, "--ckpt '%s' %s --n 9 --out-dir '%s' --npz '%s'", ck, common, d2,
             n2);
    CHECK(run_cli(args) == 0, "9 images from scratch");
    CHECK(same_images(d1, d2, 9) && same_file(n1, n2),
          "a continued run differs from one run from scratch");
    files = dir_entries(d1, &hidden);
    CHECK(files == 10 && hidden == 1 && access(live, F_OK) == 0, "%s: %d files, %d hidden", d1,
          files, hidden);
    remove(live);
    /* every batch there: nothing drawn, the npz of the first 3 */
    snprintf(args, sizeof args, "--ckpt '%s' %s --n 3 --out-dir '%s' --npz '%s'", ck, common, d1,
             n1);
    rc = run_cli(args);
    read_file(path, out, sizeof out);
    arr = npz_array(n1, 3 * PER);
    CHECK(rc == 0 && strstr(out, "; 3 of them were there already") && arr &&
              !memcmp(arr, img, 3 * PER),
          "all there: exit %d, %s", rc, out);
    free(arr);

    /* --trajectory: two rows for each of the first batch's images (x_t, the predicted x0), the
     * images at the right (DDIM 3: 3 columns); a continued run draws that batch again, with the
     * same bits */
    char t1[300], t2[300], d7[300];
    snprintf(t1, sizeof t1, "%s/t1.png", tmpdir);
    snprintf(t2, sizeof t2, "%s/t2.png", tmpdir);
    snprintf(d7, sizeof d7, "%s/d7", tmpdir);
    for (int k = 0; k < 2; k++) {
        snprintf(args, sizeof args, "--ckpt '%s' %s --n 3 --out-dir '%s' --trajectory '%s'", ck,
                 common, d7, k ? t2 : t1);
        rc = run_cli(args);
        stderr_lines(err, sizeof err);
        read_file(path, out, sizeof out);
        CHECK(rc == 0 && (!k || strstr(out, "; 1 of them were there already")),
              "--trajectory, run %d: exit %d: %s%s", k, rc, out, err);
    }
    CHECK(same_file(t1, t2), "the trajectory of a continued run differs");
    enum { TW = 3 * 17 + 1, TH = 15 + 4 * 17 + 1 };
    static uint8_t traj[TH * TW * 3], im0[PER];
    CHECK(img_read_png(t1, TH, TW, 3, traj) == SG_OK, "trajectory: %s", sg_last_error());
    int last_bad = 0;
    for (int r = 0; r < 4; r++) { /* x_t and x0 of image 0, then of image 1 */
        char ip[512];
        snprintf(ip, sizeof ip, "%s/%06d.png", d7, r / 2);
        CHECK(img_read_png(ip, 16, 16, 3, im0) == SG_OK, "%s", sg_last_error());
        for (int y = 0; y < 16; y++)
            for (int x = 0; x < 16 * 3; x++)
                last_bad +=
                    traj[(15 + 1 + r * 17 + y) * TW * 3 + (1 + 2 * 17) * 3 + x] != im0[y * 48 + x];
    }
    CHECK(last_bad == 0, "the trajectory's last column differs from the images in %d values",
          last_bad);
    snprintf(args, sizeof args,
             "--ckpt '%s' %s --n 3 --out-dir '%s' --trajectory /nonexistent/t.png", ck, common, d7);
    expect_error(args, 1);

    /* what made the images must not change: one line naming the first difference */
    static const char *const changes[][2] = {
        {"--seed 1", "seed"},        {"--batch 3", "batch"}, {"--no-ema", "weights_used"},
        {"--ddim-steps 4", "steps"}, {"--clip", "clip"},     {"--precision bf16", "precision"},
        {"--eta 0.5", "eta"}};
    for (int i = 0; i < SG_ARRAY_LEN(changes); i++) {
        snprintf(args, sizeof args, "--ckpt '%s' %s --n 9 --out-dir '%s' %s", ck, common, d1,
                 changes[i][0]);
        expect_error(args, 1);
        stderr_lines(err, sizeof err);
        char want[64];
        snprintf(want, sizeof want, "made with %s ", changes[i][1]);
        CHECK(strstr(err, want) != NULL, "%s: %s", changes[i][0], err);
    }
    /* other weights: another checkpoint's bytes */
    char ck2[300];
    snprintf(ck2, sizeof ck2, "%s/other.sgck", tmpdir);
    snprintf(args, sizeof args, "cp '%s' '%s' && printf x >> '%s'", ck, ck2, ck2);
    CHECK(system(args) == 0, "copy");
    snprintf(args, sizeof args, "--ckpt '%s' %s --n 9 --out-dir '%s'", ck2, common, d1);
    rc = run_cli(args);
    stderr_lines(err, sizeof err);
    CHECK(rc == 1 && (strstr(err, "weights_xxh64") || strstr(err, ck2)),
          "other weights: exit %d: %s", rc, err);
    /* a diffusers folder's weights: its safetensors file is what is hashed */
    char dif[300], d6[300];
    snprintf(dif, sizeof dif, "%s/dif", tmpdir);
    snprintf(d6, sizeof d6, "%s/d6", tmpdir);
    ckpt_file *cf = ckpt_open(ck);
    CHECK(cf && ckpt_export_diffusers(cf, dif, 1) == SG_OK, "export: %s", sg_last_error());
    if (cf) ckpt_close(cf);
    for (int k = 0; k < 2; k++) {
        snprintf(args, sizeof args, "--weights '%s' %s --n 2 --out-dir '%s'", dif, common, d6);
        rc = run_cli(args);
        read_file(path, out, sizeof out);
        CHECK(rc == 0 && (!k || strstr(out, "; 2 of them were there already")),
              "a diffusers folder, run %d: exit %d: %s", k, rc, out);
    }
    /* a folder that is not sample's: other files, a file, a foreign samples.json */
    snprintf(args, sizeof args, "--ckpt '%s' %s --n 2 --out-dir '%s'", ck, common, tmpdir);
    expect_error(args, 1);
    stderr_lines(err, sizeof err);
    CHECK(strstr(err, "holds other files"), "a folder of other files: %s", err);
    snprintf(args, sizeof args, "--ckpt '%s' %s --n 2 --out-dir '%s'", ck, common, ck);
    expect_error(args, 1);
    snprintf(args, sizeof args, "mkdir '%s' && echo '{\"n\": 3}' > '%s/samples.json'", d3, d3);
    CHECK(system(args) == 0, "d3");
    snprintf(args, sizeof args, "--ckpt '%s' %s --n 2 --out-dir '%s'", ck, common, d3);
    expect_error(args, 1);
    stderr_lines(err, sizeof err);
    CHECK(strstr(err, "not a samples.json that sample wrote"), "a foreign samples.json: %s", err);
    snprintf(args, sizeof args, "--ckpt '%s' %s --n 1000001 --out-dir '%s'", ck, common, d2);
    expect_error(args, 2);

    /* Ctrl-C: the finished batches stay, exit 130, and the same command finishes the run with
     * the bits of one uninterrupted run (DDPM over T = 12: 12 steps a batch) */
    char d4[256], d5[256], first[512], cmd[4096];
    snprintf(d4, sizeof d4, "%s/d4", tmpdir);
    snprintf(d5, sizeof d5, "%s/d5", tmpdir);
    snprintf(first, sizeof first, "%s/000001.png", d4);
    const char *ddpm = "--backend cpu --batch 2 --n 60";
    snprintf(cmd, sizeof cmd,
             "'%s' --ckpt '%s' %s --out-dir '%s' >'%s/stdout' 2>'%s/stderr' & p=$!; i=0; "
             "while [ ! -e '%s' ] && [ $i -lt 3000 ]; do sleep 0.01; i=$((i+1)); done; "
             "kill -INT $p; wait $p",
             sample_bin, ck, ddpm, d4, tmpdir, tmpdir, first);
    int st = system(cmd);
    rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    stderr_lines(err, sizeof err);
    CHECK(rc == 130 && strstr(err, "sample: interrupted: ") && strstr(err, "the same command"),
          "SIGINT: exit %d: %s", rc, err);
    files = dir_entries(d4, &hidden);
    CHECK(files >= 3 && files < 61 && hidden == 0, "interrupted: %d files, %d hidden", files,
          hidden);
    snprintf(args, sizeof args, "--ckpt '%s' %s --out-dir '%s'", ck, ddpm, d4);
    rc = run_cli(args);
    read_file(path, out, sizeof out);
    CHECK(rc == 0 && strstr(out, "of them were there already"), "after SIGINT: exit %d: %s", rc,
          out);
    snprintf(args, sizeof args, "--ckpt '%s' %s --out-dir '%s'", ck, ddpm, d5);
    CHECK(run_cli(args) == 0, "60 images in one run");
    CHECK(same_images(d4, d5, 60), "interrupted and continued differs from one run");
}

/* sample --ckpt CK --n 2 --backend cpu --batch 2 FLAGS --out-dir DIR: its exit status, and
 * DIR/samples.json into out (empty where there is none) */
static int out_dir_run(const char *ck, const char *dir, const char *flags, char *out, long cap) {
    char args[2048], path[1024];
    snprintf(args, sizeof args, "--ckpt '%s' --n 2 --backend cpu --batch 2 %s --out-dir '%s'", ck,
             flags, dir);
    const int rc = run_cli(args);
    snprintf(path, sizeof path, "%s/samples.json", dir);
    if (read_file(path, out, cap) < 0) out[0] = 0;
    return rc;
}

/* the same continuing DIR with other FLAGS: refused (exit 1) saying `says` */
static void out_dir_refused(const char *ck, const char *dir, const char *flags, const char *says) {
    char args[2048];
    snprintf(args, sizeof args, "--ckpt '%s' --n 2 --backend cpu --batch 2 %s --out-dir '%s'", ck,
             flags, dir);
    expect_error_saying(args, 1, says);
}

/* sample --ckpt CK --out (a scratch path) --n 3 --backend cpu --batch 2 FLAGS: refused, exit 2,
 * one line saying `says` */
static void refused(const char *ck, const char *flags, const char *says) {
    char args[2048];
    snprintf(args, sizeof args,
             "--ckpt '%s' --out '%s/refused.png' --n 3 --backend cpu --batch 2 %s", ck, tmpdir,
             flags);
    expect_error_saying(args, 2, says);
}

/* A checkpoint of a tiny model at T = 12 whose EMA differs from its parameters; zsnr: a v model
 * at zero terminal SNR */
static void write_tiny_ckpt(const char *ck, int zsnr) {
    sg_model_cfg c;
    tiny_cfg(&c, 2, DT_F32);
    c.T = 12;
    if (zsnr) c.zero_snr = 1, c.prediction = SG_PRED_V;
    sg_exec e;
    CHECK(sg_exec_init(&e, &c, 1, sg_backend_cpu_create()) == SG_OK, "train exec: %s",
          sg_last_error());
    CHECK(sg_exec_init_state(&e, 3) == SG_OK, "init state");
    int64_t pbytes = e.plan.role_bytes[ROLE_PARAM];
    float *buf = malloc((size_t)pbytes);
    sg_exec_param_init_values(&e.plan, 4, buf);
    CHECK(e.be->upload(e.be, e.plan.g.t[e.plan.io.ema].offset, buf, pbytes) == SG_OK, "EMA");
    free(buf);
    CHECK(sg_exec_save(&e, ck, NULL) == SG_OK, "save: %s", sg_last_error());
    sg_exec_free(&e);
}

/* sample --solver dpm++2m --steps N at T = 12: the same bits twice, another image than DDIM's
 * (but DDIM's at one step: both land on x0_pred, exactly); its spacings (DPMSolverMultistep
 * Scheduler's: linspace 11, 7, 4 and leading 9, 6, 3 where trailing visits 11, 7, 3), each an
 * image of its own; the summary and --out-dir's samples.json name it and a continuation with
 * DDIM is refused; refused without --steps, with --eta, at leading with too many steps or too
 * large an offset, and a solver it does not know. */
static void test_cli_dpm(const char *ck) {
    const char *common = "--n 3 --backend cpu --batch 2";
    char p[6][300], d[300], args[2048], out[4096];
    const char *names[6] = {"dpm3", "dpm3b", "ddim3", "dpm1", "ddim1", "dpm3lin"};
    for (int i = 0; i < 6; i++) snprintf(p[i], sizeof p[i], "%s/%s.png", tmpdir, names[i]);
    snprintf(d, sizeof d, "%s/dpm_dir", tmpdir);
    snprintf(args, sizeof args, "--ckpt '%s' --out '%s' %s --solver dpm++2m --steps 3", ck, p[0],
             common);
    int rc = run_cli(args);
    read_stdout(out, sizeof out);
    CHECK(rc == 0 && strstr(out, "(DPM-Solver++(2M) 3,"), "--solver dpm++2m: exit %d: %s", rc, out);
    snprintf(args, sizeof args, "--ckpt '%s' --out '%s' %s --solver dpm++2m --ddim-steps 3", ck,
             p[1], common);
    rc = run_cli(args);
    snprintf(args, sizeof args, "--ckpt '%s' --out '%s' %s --ddim-steps 3", ck, p[2], common);
    rc |= run_cli(args);
    CHECK(rc == 0 && same_file(p[0], p[1]) && !same_file(p[0], p[2]),
          "dpm++2m 3: exit %d, the same bits twice, another image than DDIM 3", rc);
    snprintf(args, sizeof args, "--ckpt '%s' --out '%s' %s --solver dpm++2m --steps 1", ck, p[3],
             common);
    rc = run_cli(args);
    snprintf(args, sizeof args, "--ckpt '%s' --out '%s' %s --steps 1 --solver ddim", ck, p[4],
             common);
    rc |= run_cli(args);
    CHECK(rc == 0 && same_file(p[3], p[4]), "one step: exit %d, dpm++2m's bits are not DDIM's", rc);
    snprintf(args, sizeof args,
             "--ckpt '%s' --out '%s' %s --solver dpm++2m --steps 3 --spacing "
             "linspace",
             ck, p[5], common);
    rc = run_cli(args);
    read_stdout(out, sizeof out);
    CHECK(rc == 0 && strstr(out, "(DPM-Solver++(2M) 3 linspace spacing,") && !same_file(p[5], p[0]),
          "dpm++2m linspace: exit %d, an image of its own: %s", rc, out);
    snprintf(args, sizeof args,
             "--ckpt '%s' --out '%s' %s --solver dpm++2m --steps 3 --spacing "
             "leading",
             ck, p[1], common);
    rc = run_cli(args);
    CHECK(rc == 0 && !same_file(p[1], p[0]) && !same_file(p[1], p[5]),
          "dpm++2m leading: exit %d, an image of its own", rc);
    CHECK(out_dir_run(ck, d, "--steps 3 --solver dpm++2m", out, sizeof out) == 0 &&
              strstr(out, "\"sampler\": \"DPM-Solver++(2M)\""),
          "dpm++2m --out-dir: samples.json names the solver: %s", out);
    out_dir_refused(ck, d, "--steps 3", "made with sampler \"DPM-Solver++(2M)\"");
    refused(ck, "--solver dpm++2m", "--solver dpm++2m needs its number of steps");
    refused(ck, "--solver dpm++2m --steps 3 --eta 0.5", "DPM-Solver++(2M) is deterministic");
    refused(ck, "--solver dpm++2m --steps 12 --spacing linspace", "takes steps in [1, 11]");
    refused(ck, "--solver dpm++2m --steps 3 --spacing leading --steps-offset 3",
            "an offset in [0, 2]");
    refused(ck, "--solver euler --steps 3", "--solver expects ddim or dpm++2m");
    /* --karras: its own image, named in the summary and samples.json (a continuation without it
     * refused); not without dpm++2m, not with a spacing */
    snprintf(args, sizeof args, "--ckpt '%s' --out '%s' %s --solver dpm++2m --steps 3 --karras", ck,
             p[1], common);
    rc = run_cli(args);
    read_stdout(out, sizeof out);
    CHECK(rc == 0 && strstr(out, "(DPM-Solver++(2M) Karras 3,") && !same_file(p[1], p[0]) &&
              !same_file(p[1], p[5]),
          "--karras: exit %d, an image of its own: %s", rc, out);
    snprintf(d, sizeof d, "%s/karras_dir", tmpdir);
    CHECK(out_dir_run(ck, d, "--steps 3 --solver dpm++2m --karras", out, sizeof out) == 0 &&
              strstr(out, "\"karras\": true"),
          "--karras --out-dir: samples.json records it: %s", out);
    out_dir_refused(ck, d, "--steps 3 --solver dpm++2m", "made with karras");
    refused(ck, "--steps 3 --karras", "--karras places DPM-Solver++(2M)'s steps");
    refused(ck, "--solver dpm++2m --steps 3 --karras --spacing linspace", "no --spacing");
    char zs[300];
    snprintf(zs, sizeof zs, "%s/zsnr.sgck", tmpdir);
    write_tiny_ckpt(zs, 1);
    snprintf(args, sizeof args, "--ckpt '%s' --out '%s' %s --solver dpm++2m --steps 3", zs, p[1],
             common);
    CHECK(run_cli(args) == 0, "DPM-Solver++(2M) on a zero-SNR v model");
    refused(zs, "--solver dpm++2m --steps 3 --karras", "--karras needs a finite largest sigma");
}

/* A class-conditional model (3 classes): --class all (one column per class) / N / none and
 * --guidance W draw, the same bits twice, each another image; the summary and --out-dir's
 * samples.json say which, a continuation with another guidance is refused; an unconditional
 * model refuses both flags, a class past the model's is refused. */
static void test_cli_classes(const char *plain_ck) {
    char ck[256], args[4096], p[6][300], dir[300], out[4096];
    snprintf(ck, sizeof ck, "%s/classes.sgck", tmpdir);
    sg_model_cfg c;
    tiny_cfg(&c, 2, DT_F32);
    c.T = 12, c.classes = 3;
    sg_exec e;
    CHECK(sg_exec_init(&e, &c, 1, sg_backend_cpu_create()) == SG_OK &&
              sg_exec_init_state(&e, 3) == SG_OK && sg_exec_save(&e, ck, NULL) == SG_OK,
          "a class-conditional checkpoint: %s", sg_last_error());
    sg_exec_free(&e);
    for (int i = 0; i < 6; i++) snprintf(p[i], sizeof p[i], "%s/cls%d.png", tmpdir, i);
    snprintf(dir, sizeof dir, "%s/cls_dir", tmpdir);
    const char *common = "--n 6 --ddim-steps 3 --backend cpu --batch 4";
    static const char *const flags[6] = {
        "", "--class all", "--class 1", "--class none", "--guidance 3", "--class 1 --guidance 0"};
    int rc = 0;
    for (int i = 0; i < 6; i++) {
        snprintf(args, sizeof args, "--ckpt '%s' --out '%s' %s %s", ck, p[i], common, flags[i]);
        rc |= run_cli(args);
    }
    int w = 0, h = 0;
    CHECK(rc == 0 && png_size(p[0], &w, &h) == 0 && w == 3 * 17 + 1 && h == 2 * 17 + 1,
          "--class all: exit %d, a %dx%d grid, not 3 columns (a class each) of 2 rows", rc, w, h);
    CHECK(same_file(p[0], p[1]) && !same_file(p[0], p[2]) && !same_file(p[2], p[3]) &&
              !same_file(p[0], p[4]) && !same_file(p[2], p[5]),
          "classes: all = the default; class 1, none and guidance 3 each another image");
    /* guidance 0 is the null class's prediction alone: class 1 at w 0 draws what --class none
     * draws, bit for bit (the guided pass holds 8 images, not 4: the CPU backend's bits of an
     * image do not depend on the others in its batch) */
    CHECK(same_file(p[3], p[5]), "--class 1 --guidance 0 is not --class none");
    snprintf(args, sizeof args, "--ckpt '%s' --out '%s' %s --class 1 --guidance 3", ck, p[5],
             common);
    CHECK(run_cli(args) == 0 && !same_file(p[4], p[5]), "--class 1 --guidance 3 vs all");
    read_stdout(out, sizeof out);
    CHECK(strstr(out, "(DDIM 3, class 1, guidance 3,") != NULL, "the summary: %s", out);
    snprintf(args, sizeof args, "--ckpt '%s' --out-dir '%s' %s --guidance 2", ck, dir, common);
    CHECK(run_cli(args) == 0, "--out-dir with --guidance");
    snprintf(args, sizeof args, "%s/samples.json", dir);
    read_file(args, out, sizeof out);
    CHECK(strstr(out, "\"class\": \"all\"") && strstr(out, "\"guidance\": 2"),
          "samples.json does not record the class and the guidance: %s", out);
    snprintf(args, sizeof args, "--ckpt '%s' --out-dir '%s' %s --guidance 3", ck, dir, common);
    expect_error_saying(args, 1, "guidance");
    /* a model trained without label dropout: guidance warns that the null class is untrained */
    char ck0[300];
    snprintf(ck0, sizeof ck0, "%s/classes_p0.sgck", tmpdir);
    c.class_dropout = 0;
    CHECK(sg_exec_init(&e, &c, 1, sg_backend_cpu_create()) == SG_OK &&
              sg_exec_init_state(&e, 3) == SG_OK && sg_exec_save(&e, ck0, NULL) == SG_OK,
          "a class-conditional checkpoint without label dropout: %s", sg_last_error());
    sg_exec_free(&e);
    snprintf(args, sizeof args, "--ckpt '%s' --out '%s' %s --guidance 2", ck0, p[5], common);
    rc = run_cli(args);
    stderr_lines(out, sizeof out);
    CHECK(rc == 0 && strstr(out, "trained with --class-dropout 0: its null class"),
          "--guidance on a model without label dropout: exit %d, no warning: %s", rc, out);
    snprintf(args, sizeof args, "--ckpt '%s' --out '%s' %s --guidance 2", ck, p[5], common);
    rc = run_cli(args);
    stderr_lines(out, sizeof out);
    CHECK(rc == 0 && !strstr(out, "warning"), "--guidance with label dropout warned: %s", out);
    snprintf(args, sizeof args, "--ckpt '%s' --out '%s' %s --class 3", ck, p[5], common);
    expect_error_saying(args, 2, "the model has 3 classes, 0..2");
    snprintf(args, sizeof args, "--ckpt '%s' --out '%s' %s --class two", ck, p[5], common);
    expect_error_saying(args, 2, "--class expects all, none, a class number or a comma list");
    snprintf(args, sizeof args, "--ckpt '%s' --out '%s' %s --guidance -1", ck, p[5], common);
    expect_error(args, 2);
    snprintf(args, sizeof args, "--ckpt '%s' --out '%s' %s --class 1", plain_ck, p[5], common);
    expect_error_saying(args, 2, "--class is a class-conditional model's");
    snprintf(args, sizeof args, "--ckpt '%s' --out '%s' %s --guidance 2", plain_ck, p[5], common);
    expect_error_saying(args, 2, "--guidance is a class-conditional model's");
    /* a comma list of classes: 1,1 is class 1's draw, 1,2 another, named and recorded; a bad
     * list refused */
    snprintf(args, sizeof args, "--ckpt '%s' --out '%s' %s --class 1 --cols 2", ck, p[2], common);
    CHECK(run_cli(args) == 0, "--class 1 --cols 2");
    snprintf(args, sizeof args, "--ckpt '%s' --out '%s' %s --class 1,1 --cols 2", ck, p[3], common);
    CHECK(run_cli(args) == 0 && same_file(p[2], p[3]), "--class 1,1 is not --class 1");
    snprintf(args, sizeof args, "--ckpt '%s' --out '%s' %s --class 1,2", ck, p[3], common);
    CHECK(run_cli(args) == 0 && !same_file(p[2], p[3]), "--class 1,2 draws what --class 1 draws");
    read_stdout(out, sizeof out);
    CHECK(strstr(out, ", classes 1,2,") != NULL, "the summary of --class 1,2: %s", out);
    snprintf(args, sizeof args, "--ckpt '%s' --out-dir '%s/l' %s --class 2,0", ck, dir, common);
    CHECK(run_cli(args) == 0, "--out-dir with --class 2,0");
    snprintf(args, sizeof args, "%s/l/samples.json", dir);
    read_file(args, out, sizeof out);
    int o = 0; /* without the indentation's white space */
    for (int i = 0; out[i]; i++)
        if (!isspace((unsigned char)out[i])) out[o++] = out[i];
    out[o] = 0;
    CHECK(strstr(out, "\"class\":[2,0]") != NULL, "samples.json of --class 2,0: %s", out);
    snprintf(args, sizeof args, "--ckpt '%s' --out '%s' %s --class 1,5", ck, p[3], common);
    expect_error_saying(args, 2, "--class 5: the model has 3 classes");
    snprintf(args, sizeof args, "--ckpt '%s' --out '%s' %s --class 1,", ck, p[3], common);
    expect_error_saying(args, 2, "a comma list of at most 64, got '1,'");
    /* guidance rescale: another image than the plain guided draw, named in the summary and
     * samples.json; without guidance, or out of [0, 1], refused */
    snprintf(args, sizeof args, "--ckpt '%s' --out '%s' %s --class 1 --guidance 3", ck, p[5],
             common);
    CHECK(run_cli(args) == 0, "--class 1 --guidance 3");
    snprintf(args, sizeof args,
             "--ckpt '%s' --out '%s' %s --class 1 --guidance 3 "
             "--guidance-rescale 0.7",
             ck, p[2], common);
    CHECK(run_cli(args) == 0 && !same_file(p[2], p[5]), "--guidance-rescale 0.7: another image");
    read_stdout(out, sizeof out);
    CHECK(strstr(out, "guidance 3 rescaled 0.7,") != NULL, "the summary: %s", out);
    snprintf(args, sizeof args,
             "--ckpt '%s' --out '%s' %s --class 1 --guidance 3 "
             "--guidance-rescale 0",
             ck, p[2], common);
    CHECK(run_cli(args) == 0 && same_file(p[2], p[5]), "--guidance-rescale 0 is the guided draw");
    snprintf(args, sizeof args,
             "--ckpt '%s' --out-dir '%s/r' %s --guidance 2 "
             "--guidance-rescale 0.5",
             ck, dir, common);
    CHECK(run_cli(args) == 0, "--out-dir with --guidance-rescale");
    snprintf(args, sizeof args, "%s/r/samples.json", dir);
    read_file(args, out, sizeof out);
    CHECK(strstr(out, "\"guidance_rescale\": 0.5") != NULL,
          "samples.json does not record the guidance rescale: %s", out);
    snprintf(args, sizeof args, "--ckpt '%s' --out-dir '%s/r' %s --guidance 2", ck, dir, common);
    expect_error_saying(args, 1, "guidance_rescale");
    snprintf(args, sizeof args, "--ckpt '%s' --out '%s' %s --guidance-rescale 0.7", ck, p[5],
             common);
    expect_error_saying(args, 2, "--guidance-rescale 0.7 rescales a guided prediction");
    snprintf(args, sizeof args, "--ckpt '%s' --out '%s' %s --guidance 2 --guidance-rescale 1.5", ck,
             p[5], common);
    expect_error(args, 2);
}

static void test_cli(void) {
    CHECK(mkdtemp(tmpdir) != NULL, "mkdtemp");
    char ck[256], bad[512], args[1024], pa[256], pb[256], pc[256], pd[256];
    snprintf(ck, sizeof ck, "%s/tiny.sgck", tmpdir);

    /* a checkpoint of a tiny model (T = 12 so DDPM is quick) whose EMA differs from the
     * parameters */
    write_tiny_ckpt(ck, 0);

    snprintf(pa, sizeof pa, "%s/a.png", tmpdir);
    snprintf(pb, sizeof pb, "%s/b.png", tmpdir);
    snprintf(pc, sizeof pc, "%s/c.png", tmpdir);
    snprintf(pd, sizeof pd, "%s/d.png", tmpdir);
    const char *common = "--n 3 --ddim-steps 3 --backend cpu --batch 2 --cols 2 --scale 2";
    char err[4096];

    snprintf(args, sizeof args, "--ckpt '%s' --out '%s' %s", ck, pa, common);
    int rc = run_cli(args);
    stderr_lines(err, sizeof err);
    CHECK(rc == 0, "sample: exit %d: %s", rc, err);
    int w = 0, h = 0;
    /* 2 columns, 2 rows of 16x16 tiles at scale 2 with 1-pixel frames: 2*(32+1)+1 = 67 */
    CHECK(png_size(pa, &w, &h) == 0 && w == 67 && h == 67, "PNG %dx%d, expected 67x67", w, h);
    CHECK(strstr(err, "images 3/3") != NULL, "progress line missing: %s", err);
    snprintf(args, sizeof args, "--ckpt '%s' --out '%s' %s --seed 0", ck, pb, common);
    CHECK(run_cli(args) == 0 && same_file(pa, pb), "same seed, different PNG");
    snprintf(args, sizeof args, "--ckpt '%s' --out '%s' %s --seed 1", ck, pc, common);
    CHECK(run_cli(args) == 0 && !same_file(pa, pc), "seed 1 gives the same PNG");
    snprintf(args, sizeof args, "--ckpt '%s' --out '%s' %s --no-ema", ck, pd, common);
    CHECK(run_cli(args) == 0 && !same_file(pa, pd), "--no-ema gives the EMA's PNG");
    /* a training run's folder (train --out) stands for the checkpoint its `latest` names, as for
     * train --resume; its config.json is train's, not a diffusers folder's (it was read as one) */
    char run[256], path[512];
    snprintf(run, sizeof run, "%s/run", tmpdir);
    snprintf(args, sizeof args, "mkdir '%s' && cp '%s' '%s/ckpt_00000002.sgck'", run, ck, run);
    CHECK(system(args) == 0, "run folder");
    snprintf(path, sizeof path, "%s/latest", run);
    FILE *fp = fopen(path, "w");
    CHECK(fp && fputs("ckpt_00000002.sgck\n", fp) >= 0 && fclose(fp) == 0, "%s", path);
    snprintf(path, sizeof path, "%s/config.json", run);
    fp = fopen(path, "w");
    CHECK(fp && fputs("{\"model\": {\"model\": \"unet_tiny\"}, \"resumes\": []}\n", fp) >= 0 &&
              fclose(fp) == 0,
          "%s", path);
    for (int k = 0; k < 2; k++) {
        remove(pd);
        snprintf(args, sizeof args, "%s '%s' --out '%s' %s", k ? "--weights" : "--ckpt", run, pd,
                 common);
        rc = run_cli(args);
        stderr_lines(err, sizeof err);
        CHECK(rc == 0 && same_file(pa, pd), "%s RUN: exit %d, not its checkpoint's PNG: %s",
              k ? "--weights" : "--ckpt", rc, err);
    }
    /* the summary names the weights: a checkpoint's EMA or raw ones (--no-ema) and the file; an
     * exported safetensors file's as they are (they were called "EMA weights") */
    char out[4096], want[600];
    snprintf(path, sizeof path, "%s/stdout", tmpdir);
    read_file(path, out, sizeof out);
    snprintf(want, sizeof want, "EMA weights from %s/ckpt_00000002.sgck,", run);
    CHECK(strstr(out, want) != NULL, "--weights RUN: the summary does not say '%s': %s", want, out);
    snprintf(args, sizeof args, "--ckpt '%s' --out '%s' %s --no-ema", ck, pd, common);
    rc = run_cli(args);
    read_file(path, out, sizeof out);
    snprintf(want, sizeof want, "raw weights from %s,", ck);
    CHECK(rc == 0 && strstr(out, want) != NULL, "--no-ema: the summary does not say '%s': %s", want,
          out);
    char sf[256];
    snprintf(sf, sizeof sf, "%s/w.safetensors", tmpdir);
    ckpt_file *cf = ckpt_open(ck);
    CHECK(cf && ckpt_export_safetensors(cf, sf, 1) == SG_OK, "export: %s", sg_last_error());
    if (cf) ckpt_close(cf);
    snprintf(args, sizeof args, "--weights '%s' --model unet_tiny --out '%s' %s", sf, pd, common);
    rc = run_cli(args);
    read_file(path, out, sizeof out);
    snprintf(want, sizeof want, " weights from %s,", sf);
    CHECK(rc == 0 && strstr(out, want) != NULL && !strstr(out, "EMA"),
          "a safetensors file: the summary does not say '%s' alone: %s", want, out);
    /* DDIM's eta: stochastic (another image than eta 0, the same bits twice); not for DDPM */
    char pe[300], pe2[300];
    snprintf(pe, sizeof pe, "%s/eta.png", tmpdir);
    snprintf(pe2, sizeof pe2, "%s/eta2.png", tmpdir);
    snprintf(args, sizeof args, "--ckpt '%s' --out '%s' %s --eta 1", ck, pe, common);
    rc = run_cli(args);
    snprintf(args, sizeof args, "--ckpt '%s' --out '%s' %s --eta 1", ck, pe2, common);
    rc |= run_cli(args);
    read_file(path, out, sizeof out);
    CHECK(rc == 0 && same_file(pe, pe2) && !same_file(pe, pa) && strstr(out, "(DDIM 3 eta 1,"),
          "--eta 1: exit %d, the same bits twice, another image than eta 0: %s", rc, out);
    snprintf(args, sizeof args, "--ckpt '%s' --out '%s' --n 2 --eta 0.5", ck, pe);
    expect_error_saying(args, 2, "--eta is DDIM's");
    /* DDPM's variance beta_t: the same bits twice, another image than beta~_t, named in the
     * summary and in --out-dir's samples.json; not for DDIM, no other value */
    char pv[300], pv2[300], ps[300], dv[300];
    snprintf(pv, sizeof pv, "%s/var.png", tmpdir);
    snprintf(pv2, sizeof pv2, "%s/var2.png", tmpdir);
    snprintf(ps, sizeof ps, "%s/var_small.png", tmpdir);
    snprintf(dv, sizeof dv, "%s/var_dir", tmpdir);
    const char *ddpm = "--n 2 --backend cpu --batch 2";
    snprintf(args, sizeof args, "--ckpt '%s' --out '%s' %s --variance large", ck, pv, ddpm);
    rc = run_cli(args);
    read_file(path, out, sizeof out);
    CHECK(rc == 0 && strstr(out, "(DDPM 12 large variance,"), "--variance large: exit %d: %s", rc,
          out);
    snprintf(args, sizeof args, "--ckpt '%s' --out '%s' %s --variance large --out-dir '%s'", ck,
             pv2, ddpm, dv);
    rc = run_cli(args);
    snprintf(args, sizeof args, "--ckpt '%s' --out '%s' %s --variance small", ck, ps, ddpm);
    rc |= run_cli(args);
    CHECK(rc == 0 && same_file(pv, pv2) && !same_file(pv, ps),
          "--variance large: exit %d, the same bits twice, another image than small", rc);
    snprintf(args, sizeof args, "--ckpt '%s' %s --out-dir '%s'", ck, ddpm, dv);
    expect_error_saying(args, 1, "made with variance \"large\"");
    snprintf(args, sizeof args, "--ckpt '%s' --out '%s' %s --variance large", ck, pv, common);
    expect_error_saying(args, 2, "--variance is DDPM's");
    snprintf(args, sizeof args, "--ckpt '%s' --out '%s' %s --variance huge", ck, pv, ddpm);
    expect_error_saying(args, 2, "--variance expects small or large");
    /* DDIM's spacings at T = 12, 3 steps: trailing 11, 7, 3 (pa); leading 8, 4, 0, and with
     * offset 3 the trailing steps (the same bits as pa); linspace 11, 6, 0. Named in the summary
     * and --out-dir's samples.json; refused without DDIM, an offset without leading, or one that
     * puts the first step past T - 1 */
    char pl[300], plo[300], pn[300], dl[300];
    snprintf(pl, sizeof pl, "%s/leading.png", tmpdir);
    snprintf(plo, sizeof plo, "%s/leading3.png", tmpdir);
    snprintf(pn, sizeof pn, "%s/linspace.png", tmpdir);
    snprintf(dl, sizeof dl, "%s/leading_dir", tmpdir);
    snprintf(args, sizeof args, "--ckpt '%s' --out '%s' %s --spacing leading", ck, pl, common);
    rc = run_cli(args);
    read_file(path, out, sizeof out);
    CHECK(rc == 0 && strstr(out, "(DDIM 3 leading spacing,") && !same_file(pl, pa),
          "--spacing leading: exit %d, another image than trailing: %s", rc, out);
    snprintf(args, sizeof args, "--ckpt '%s' --out '%s' %s --spacing leading --steps-offset 3", ck,
             plo, common);
    rc = run_cli(args);
    read_file(path, out, sizeof out);
    CHECK(rc == 0 && strstr(out, "(DDIM 3 leading spacing, steps offset 3,") && same_file(plo, pa),
          "--spacing leading --steps-offset 3 (trailing's timesteps): exit %d, trailing's bits: "
          "%s",
          rc, out);
    snprintf(args, sizeof args, "--ckpt '%s' --out '%s' %s --spacing linspace", ck, pn, common);
    rc = run_cli(args);
    CHECK(rc == 0 && !same_file(pn, pa) && !same_file(pn, pl),
          "--spacing linspace: exit %d, an image of its own", rc);
    CHECK(out_dir_run(ck, dl, "--ddim-steps 3 --spacing leading --steps-offset 1", out,
                      sizeof out) == 0 &&
              strstr(out, "\"spacing\": \"leading\"") && strstr(out, "\"steps_offset\": 1"),
          "--spacing leading --out-dir: samples.json records the spacing and offset: %s", out);
    snprintf(path, sizeof path, "%s/stdout", tmpdir);
    out_dir_refused(ck, dl, "--ddim-steps 3 --spacing leading", "made with steps_offset 1");
    out_dir_refused(ck, dl, "--ddim-steps 3", "made with spacing \"leading\"");
    snprintf(args, sizeof args, "--ckpt '%s' --out '%s' %s --spacing leading", ck, pl, ddpm);
    expect_error_saying(args, 2, "--spacing is for --steps N");
    snprintf(args, sizeof args, "--ckpt '%s' --out '%s' %s --steps-offset 1", ck, pl, common);
    expect_error_saying(args, 2, "--steps-offset shifts leading spacing only");
    snprintf(args, sizeof args, "--ckpt '%s' --out '%s' %s --spacing leading --steps-offset 4", ck,
             pl, common);
    expect_error_saying(args, 2, "an offset in [0, 3]");
    snprintf(args, sizeof args, "--ckpt '%s' --out '%s' %s --spacing uniform", ck, pl, common);
    expect_error_saying(args, 2, "--spacing expects trailing, leading or linspace");
    /* --no-ema where there is no EMA apart (it did nothing, without a word): refused */
    snprintf(args, sizeof args, "--weights '%s' --model unet_tiny --out '%s' %s --no-ema", sf, pd,
             common);
    expect_error(args, 2);
    stderr_lines(err, sizeof err);
    CHECK(strstr(err, "--no-ema: ") && strstr(err, "holds one set of weights"),
          "--no-ema on a safetensors file: %s", err);
    /* a run folder with no checkpoint yet: said so, not read as a diffusers folder */
    snprintf(args, sizeof args, "rm '%s/ckpt_00000002.sgck' '%s/latest'", run, run);
    CHECK(system(args) == 0, "run folder without a checkpoint");
    snprintf(args, sizeof args, "--ckpt '%s' --backend cpu --out '%s'", run, pd);
    expect_error(args, 1);
    stderr_lines(err, sizeof err);
    CHECK(strstr(err, "training run's folder with no checkpoint yet") != NULL,
          "--ckpt RUN without a checkpoint: %s", err);
    test_cli_classes(ck);
    test_cli_dpm(ck);
    /* DDPM over the checkpoint's T = 12, grid about square, bf16 */
    snprintf(args, sizeof args, "--ckpt '%s' --out '%s' --n 4 --backend cpu --precision bf16", ck,
             pd);
    rc = run_cli(args);
    stderr_lines(err, sizeof err);
    CHECK(rc == 0 && png_size(pd, &w, &h) == 0 && w == 35 && h == 35, "DDPM: exit %d, %dx%d (%s)",
          rc, w, h, err);
    CHECK(strstr(err, "DDPM 12") != NULL, "DDPM progress: %s", err);

    CHECK(run_cli("--help") == 0, "--help");
    snprintf(bad, sizeof bad, "%s/stdout", tmpdir);
    char help[8192];
    read_file(bad, help, sizeof help);
    const char *flags[] = {"--ckpt",    "--n",         "--seed",    "--ddim-steps", "--out",
                           "--backend", "--batch",     "--no-ema",  "--cols",       "--scale",
                           "--clip",    "--precision", "--out-dir", "--npz",        "--trajectory",
                           "--steps",   "--solver"};
    for (int i = 0; i < SG_ARRAY_LEN(flags); i++)
        CHECK(strstr(help, flags[i]) != NULL, "--help does not mention %s", flags[i]);

    /* usage errors: exit 2, one line */
    expect_error("--n 3", 2);
    expect_error("--help=3", 2); /* it printed the help */
    snprintf(args, sizeof args, "--ckpt '%s' --weights '%s'", ck, ck);
    expect_error(args, 2);
    stderr_lines(err, sizeof err);
    CHECK(strstr(err, "not both") != NULL, "--ckpt with --weights: %s", err);
    snprintf(args, sizeof args, "--ckpt '%s' --n 0", ck);
    expect_error(args, 2);
    snprintf(args, sizeof args, "--ckpt '%s' --bogus 1", ck);
    expect_error(args, 2);
    snprintf(args, sizeof args, "--ckpt '%s' --seed -1", ck);
    expect_error(args, 2);
    snprintf(args, sizeof args, "--ckpt '%s' --backend tpu", ck);
    expect_error(args, 2);
    snprintf(args, sizeof args, "--ckpt '%s' --ddim-steps 13", ck);
    expect_error(args, 2);
    snprintf(args, sizeof args, "--ckpt '%s' --scale", ck);
    expect_error(args, 2);
    char stray[256];
    snprintf(stray, sizeof stray, "%s/stray.png", tmpdir);
#ifndef SG_HAVE_CUDA
    /* the output path is tried before the backend is made: that failure leaves no empty file */
    snprintf(args, sizeof args, "--ckpt '%s' --backend cuda --out '%s'", ck, stray);
    expect_error(args, 1);
    CHECK(access(stray, F_OK) != 0, "a failed sample left %s behind", stray);
    /* the one wording every tool gives (graph/backend_nocuda.c), with the configured reason */
#ifdef SG_NO_CUDA_BY_OPTION
    const char *no_cuda = "this build has no CUDA backend (it was configured with -DSG_NO_CUDA=ON)";
#else
    const char *no_cuda = "this build has no CUDA backend (nvcc was not found at configure time)";
#endif
    stderr_lines(err, sizeof err);
    snprintf(want, sizeof want, "sample: %s\n", no_cuda); /* not "sample: cuda backend: ..." */
    CHECK(!strcmp(err, want), "--backend cuda without CUDA: %s", err);
#endif

    /* bad checkpoints: exit 1, one line naming the problem */
    snprintf(bad, sizeof bad, "%s/missing.sgck", tmpdir);
    snprintf(args, sizeof args, "--ckpt '%s' --backend cpu", bad);
    expect_error(args, 1);
    expect_path_once(bad);
    /* a message of sample's own that does not name the file gets it once, too */
    snprintf(bad, sizeof bad, "%s/bare.safetensors", tmpdir);
    snprintf(args, sizeof args, "--weights '%s' --backend cpu", bad);
    expect_error(args, 1);
    expect_path_once(bad);
    struct stat st;
    CHECK(stat(ck, &st) == 0 && st.st_size > 1000, "checkpoint size");
    long cap = (long)st.st_size + 1;
    char *bytes = malloc((size_t)cap);
    long n = read_file(ck, bytes, cap);
    CHECK(n == (long)st.st_size, "read %ld of %ld checkpoint bytes", n, (long)st.st_size);
    snprintf(bad, sizeof bad, "%s/corrupt.sgck", tmpdir);
    bytes[n / 2] ^= 0x40; /* one bit inside the payloads */
    FILE *f = fopen(bad, "wb");
    fwrite(bytes, 1, (size_t)n, f);
    fclose(f);
    snprintf(args, sizeof args, "--ckpt '%s' --backend cpu --ddim-steps 2 --out '%s'", bad, pd);
    expect_error(args, 1);
    expect_path_once(bad);
    snprintf(bad, sizeof bad, "%s/truncated.sgck", tmpdir);
    bytes[n / 2] ^= 0x40;
    f = fopen(bad, "wb");
    fwrite(bytes, 1, (size_t)(n * 2 / 3), f);
    fclose(f);
    snprintf(args, sizeof args, "--ckpt '%s' --backend cpu --ddim-steps 2 --out '%s'", bad, pd);
    expect_error(args, 1);
    expect_path_once(bad);
    free(bytes);
    /* an unwritable output is reported before sampling (one line: no progress lines) */
    snprintf(args, sizeof args, "--ckpt '%s' --backend cpu --out '%s/no/such/dir.png'", ck, tmpdir);
    expect_error(args, 1);
    snprintf(args, sizeof args, "--ckpt '%s' --backend cpu --ddim-steps 2 --out '%s'", ck, tmpdir);
    expect_error(args, 1);
    stderr_lines(err, sizeof err);
    CHECK(strstr(err, "directory") != NULL, "--out DIR does not say it is a directory: %s", err);
    snprintf(args, sizeof args, "--ckpt '%s' --backend cpu --ddim-steps 2 --out /proc/sg_x.png",
             ck);
    expect_error(args, 1);
    /* the check leaves a new path free for the PNG writer */
    snprintf(args, sizeof args, "--ckpt '%s' --out '%s' %s", ck, stray, common);
    CHECK(run_cli(args) == 0 && png_size(stray, &w, &h) == 0, "sample to a new file");

    test_cli_out_dir(ck);

    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    CHECK(system(cmd) == 0, "cleanup");
}

int main(int argc, char **argv) {
    if (argc == 2 && !strcmp(argv[1], "--cuda")) return test_cuda();
    if (argc == 3 && !strcmp(argv[1], "--cli")) {
        sample_bin = argv[2];
        test_cli();
        return sg_test_end();
    }
    if (argc != 1) {
        fprintf(stderr, "usage: test_sampler [--cli PATH_TO_SAMPLE | --cuda]\n");
        return 2;
    }
    test_step_math(SG_BETA_LINEAR);
    test_step_math(SG_BETA_COSINE);
    test_ddim_timesteps();
    test_spacings();
    test_oracle(SG_BETA_LINEAR);
    test_oracle(SG_BETA_COSINE);
    test_v_oracle(SG_BETA_LINEAR);
    test_v_oracle(SG_BETA_COSINE);
    test_gaussian_chains();
    zero_snr_chains(SG_BETA_LINEAR);
    zero_snr_chains(SG_BETA_COSINE);
    test_end_to_end();
    test_device_step();
    test_guided_step();
    test_guidance_rescale();
    test_device_vs_host_loop();
    test_dpm();
    return sg_test_end();
}
