/* sampler.c — DDPM ancestral and DDIM sampling (the math and conventions are in sampler.h).
 *
 * Shapes: one batch of images is x[B][H][W][C] (NHWC, the plan's x_t layout), per = H*W*C
 * values each; the update math is elementwise, so it treats the batch as B*per flat values.
 */
#include "graph/sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/philox.h"
#include "kernels/cpu/cpu_kernels.h"

/* clamp to [-1, 1]; NaN passes through (a broken model stays visible) */
static double clamp1(double v) {
    return v < -1.0 ? -1.0 : v > 1.0 ? 1.0 : v;
}

void sg_ddpm_step_var(float *x_prev, const float *x_t, const float *eps, const float *z, int64_t n,
                      int t, const sg_betas *b, int clip, int large) {
    double beta = sg_ddpm_beta(b, t), alpha = 1.0 - beta;
    double abar = sg_ddpm_abar(b, t);
    double abar_prev = t > 0 ? sg_ddpm_abar(b, t - 1) : 1.0;
    /* posterior variance beta~_t (exactly 0 at t = 0: abar_prev = 1), or beta_t (large; unused
     * at t = 0, where no noise is added) */
    double sigma = large ? sqrt(beta) : sqrt(beta * (1.0 - abar_prev) / (1.0 - abar));
    int noise = t > 0 && z != NULL;
    if (!clip) {
        /* Algorithm 2: 1/sqrt(alpha_t) (x_t - beta_t / sqrt(1 - abar_t) eps) + sigma_t z */
        double inv_sqrt_alpha = 1.0 / sqrt(alpha), k_eps = beta / sqrt(1.0 - abar);
        for (int64_t i = 0; i < n; i++) {
            double mu = inv_sqrt_alpha * ((double)x_t[i] - k_eps * (double)eps[i]);
            x_prev[i] = (float)(noise ? mu + sigma * (double)z[i] : mu);
        }
        return;
    }
    /* x0-parameterised posterior mean with x0_pred clamped to [-1, 1] */
    double sqrt_abar = sqrt(abar), sqrt_1m_abar = sqrt(1.0 - abar);
    double c_x0 = sqrt(abar_prev) * beta / (1.0 - abar);
    double c_xt = sqrt(alpha) * (1.0 - abar_prev) / (1.0 - abar);
    for (int64_t i = 0; i < n; i++) {
        double x = x_t[i];
        double x0 = clamp1((x - sqrt_1m_abar * (double)eps[i]) / sqrt_abar);
        double mu = c_x0 * x0 + c_xt * x;
        x_prev[i] = (float)(noise ? mu + sigma * (double)z[i] : mu);
    }
}

void sg_ddim_step_eta(float *x_prev, const float *x_t, const float *eps, const float *z, int64_t n,
                      int t, int t_prev, const sg_betas *b, double eta, int clip) {
    double abar = sg_ddpm_abar(b, t);
    double abar_prev = t_prev >= 0 ? sg_ddpm_abar(b, t_prev) : 1.0;
    double sqrt_abar = sqrt(abar), sqrt_1m_abar = sqrt(1.0 - abar);
    double sigma = eta * sqrt((1.0 - abar_prev) / (1.0 - abar) * (1.0 - abar / abar_prev));
    double sqrt_abar_prev = sqrt(abar_prev),
           sqrt_1m_abar_prev = sqrt(1.0 - abar_prev - sigma * sigma);
    int noise = sigma > 0.0 && z != NULL;
    for (int64_t i = 0; i < n; i++) {
        double e = eps[i];
        double x0 = ((double)x_t[i] - sqrt_1m_abar * e) / sqrt_abar;
        if (clip) x0 = clamp1(x0);
        double xp = sqrt_abar_prev * x0 + sqrt_1m_abar_prev * e;
        x_prev[i] = (float)(noise ? xp + sigma * (double)z[i] : xp);
    }
}

void sg_ddpm_step(float *x_prev, const float *x_t, const float *eps, const float *z, int64_t n,
                  int t, const sg_betas *b, int clip) {
    sg_ddpm_step_var(x_prev, x_t, eps, z, n, t, b, clip, 0);
}

void sg_ddim_step(float *x_prev, const float *x_t, const float *eps, int64_t n, int t, int t_prev,
                  const sg_betas *b, int clip) {
    sg_ddim_step_eta(x_prev, x_t, eps, NULL, n, t, t_prev, b, 0.0, clip);
}

int sg_ddim_timesteps(int S, int T, int *ts) {
    if (T < 1 || S < 1 || S > T)
        return sg_set_error("DDIM steps must be in [1, %d] (the schedule's T), got %d", T, S);
    /* numpy: np.round(np.arange(T, 0, -T / S)) - 1, element j = T + j * (-T / S) */
    double step = -(double)T / S;
    for (int j = 0; j < S; j++) ts[j] = (int)rint((double)T + j * step) - 1;
    return SG_OK;
}

static const char *const spacing_names[] = {"trailing", "leading", "linspace"};
static const char *const solver_names[] = {"ddim", "dpm++2m"};

/* names[i] for i in [0, n), else NULL; and back, -1 for a name not there */
static const char *enum_name(const char *const *names, int n, int i) {
    return i >= 0 && i < n ? names[i] : NULL;
}
static int enum_parse(const char *const *names, int n, const char *name) {
    for (int i = 0; name && i < n; i++)
        if (!strcmp(name, names[i])) return i;
    return -1;
}

const char *sg_spacing_name(int spacing) {
    return enum_name(spacing_names, SG_ARRAY_LEN(spacing_names), spacing);
}
int sg_spacing_parse(const char *name) {
    return enum_parse(spacing_names, SG_ARRAY_LEN(spacing_names), name);
}
const char *sg_solver_name(int solver) {
    return enum_name(solver_names, SG_ARRAY_LEN(solver_names), solver);
}
int sg_solver_parse(const char *name) {
    return enum_parse(solver_names, SG_ARRAY_LEN(solver_names), name);
}

int sg_ddim_timesteps_spaced(int S, int T, int spacing, int offset, int *ts) {
    if (!sg_spacing_name(spacing)) return sg_set_error("unknown DDIM spacing %d", spacing);
    if (offset != 0 && spacing != SG_SPACING_LEADING)
        return sg_set_error("a steps offset (%d) shifts leading spacing only, not %s", offset,
                            sg_spacing_name(spacing));
    if (spacing == SG_SPACING_TRAILING) return sg_ddim_timesteps(S, T, ts);
    if (T < 1 || S < 1 || S > T)
        return sg_set_error("DDIM steps must be in [1, %d] (the schedule's T), got %d", T, S);
    if (spacing == SG_SPACING_LEADING) {
        /* (np.arange(0, S) * (T // S)).round()[::-1] + steps_offset */
        const int r = T / S, first = (S - 1) * r;
        if (offset < 0 || offset > T - 1 - first)
            return sg_set_error("leading spacing's steps offset %d: its %d steps of %d start at "
                                "t = %d + offset, which must stay in [0, %d] (an offset in "
                                "[0, %d])",
                                offset, S, T, first, T - 1, T - 1 - first);
        for (int j = 0; j < S; j++) ts[j] = (S - 1 - j) * r + offset;
        return SG_OK;
    }
    /* np.linspace(0, T - 1, S).round()[::-1]: element i = i * ((T - 1) / (S - 1)), the last
     * exactly T - 1, rounded half to even; S = 1: [0] */
    const double step = S > 1 ? (double)(T - 1) / (S - 1) : 0.0;
    for (int i = 0; i < S; i++) ts[S - 1 - i] = i == S - 1 && S > 1 ? T - 1 : (int)rint(i * step);
    return SG_OK;
}

int sg_solver_timesteps(int solver, int S, int T, int spacing, int offset, int *ts) {
    if (!sg_solver_name(solver)) return sg_set_error("unknown solver %d", solver);
    if (solver == SG_SOLVER_DDIM || spacing == SG_SPACING_TRAILING)
        return sg_ddim_timesteps_spaced(S, T, spacing, offset, ts);
    /* DPMSolverMultistepScheduler.set_timesteps: S + 1 points, the last (0) dropped */
    if (!sg_spacing_name(spacing)) return sg_set_error("unknown spacing %d", spacing);
    if (offset != 0 && spacing != SG_SPACING_LEADING)
        return sg_set_error("a steps offset (%d) shifts leading spacing only, not %s", offset,
                            sg_spacing_name(spacing));
    if (T < 2 || S < 1 || S > T - 1)
        return sg_set_error("DPM-Solver++(2M) at %s spacing takes steps in [1, %d] (the "
                            "schedule's T - 1: S + 1 distinct points), got %d",
                            sg_spacing_name(spacing), T - 1, S);
    if (spacing == SG_SPACING_LEADING) {
        /* (np.arange(0, S + 1) * (T // (S + 1))).round()[::-1][:-1] + steps_offset */
        const int r = T / (S + 1), first = S * r;
        if (offset < 0 || offset > T - 1 - first)
            return sg_set_error("leading spacing's steps offset %d: DPM-Solver++(2M)'s %d steps "
                                "of %d start at t = %d + offset, which must stay in [0, %d] (an "
                                "offset in [0, %d])",
                                offset, S, T, first, T - 1, T - 1 - first);
        for (int j = 0; j < S; j++) ts[j] = (S - j) * r + offset;
        return SG_OK;
    }
    /* np.linspace(0, T - 1, S + 1).round()[::-1][:-1]: element i = i * ((T - 1) / S), the last
     * exactly T - 1, rounded half to even */
    const double step = (double)(T - 1) / S;
    for (int j = 0; j < S; j++) ts[j] = j == 0 ? T - 1 : (int)rint((S - j) * step);
    return SG_OK;
}

/* The host waits for the device (a stream sync: no transfer) every SAMPLE_IN_FLIGHT steps when
 * someone watches (a progress callback or a cancel flag), so that progress and cancellation
 * stay within that many steps of the device; without a watcher it never waits until the end. */
enum { SAMPLE_IN_FLIGHT = 4 };

/* The sampling plan's shapes as sg_sample_ex drives them (planner/sample_graph.c). */
static int check_plan(const sg_plan *p, int64_t count) {
    const sg_model_cfg *c = &p->cfg;
    const sg_step_io *io = &p->io;
    if (p->train || io->xt < 0 || io->t < 0 || io->pred < 0 || io->sample_node < 0)
        return sg_set_error("sampling needs a sampling plan (sg_exec_init with train = 0)");
    const sg_tensor *xt = &p->g.t[io->xt], *pred = &p->g.t[io->pred], *tt = &p->g.t[io->t];
    const sg_tensor *x = &p->g.t[io->sample_x], *tab = &p->g.t[io->sample_table];
    const sg_tensor *x0h = &p->g.t[io->sample_x0h];
    const int copies = sg_model_guided(c) ? 2 : 1; /* the forward pass's images per image */
    if (sg_numel(xt) != copies * count || sg_numel(pred) != copies * count ||
        sg_numel(x) != count || x->dtype != DT_F32 || sg_numel(x0h) != count ||
        x0h->dtype != DT_F32 || sg_numel(tt) != copies * c->batch || tt->dtype != DT_I32 ||
        tab->shape[0] != c->T || (xt->dtype != DT_F32 && xt->dtype != DT_BF16) ||
        (c->classes > 0) != (io->class_labels >= 0) ||
        (io->class_labels >= 0 && sg_numel(&p->g.t[io->class_labels]) != copies * c->batch))
        return sg_set_error("the plan's x_t / t / pred / sample_x and sample_x0h / sample_table / "
                            "class_labels tensors are not %d x [%d,%d,%d,%d] / i32[%d] / x_t's "
                            "dtype / fp32 / %d rows / i32 as sampling expects",
                            copies, c->batch, c->img, c->img, c->in_ch, copies * c->batch, c->T);
    return SG_OK;
}

/* Snapshot buffers: the state before the step (then its x0), the prediction eps (fp32), and
 * the bf16 prediction as read where the model runs in bf16. */
typedef struct {
    float *xin, *eps;
    sg_bf16 *h;
    int32_t *labels; /* a class-conditional plan's labels of one forward pass */
} snap_bufs;

static int want_snap(const sg_sample_opts *opts, int b0, int k, int n_steps) {
    return opts->snap_at && opts->on_snap && opts->snap_at(opts->batch_ctx, b0, k, n_steps);
}

/* After step k (row; -1: x_T, row NULL) with its input state in sb->xin: the state x, and the
 * x0 the step predicted, to opts->on_snap. */
static int snapshot(sg_exec *e, int b0, int nb, int k, const sg_sample_row *row,
                    const sg_sample_opts *opts, float *x, snap_bufs *sb) {
    const sg_step_io *io = &e->plan.io;
    if (sg_exec_read(e, io->sample_x, x)) return SG_ERR;
    if (!row) return opts->on_snap(opts->batch_ctx, b0, nb, k, x, NULL);
    const int64_t all = sg_numel(&e->plan.g.t[io->pred]),
                  count = sg_numel(&e->plan.g.t[io->sample_x]);
    if (e->plan.g.t[io->pred].dtype == DT_BF16) {
        if (sg_exec_read(e, io->pred, sb->h)) return SG_ERR;
        for (int64_t i = 0; i < all; i++) sb->eps[i] = sg_bf16_to_f32(sb->h[i]);
    } else if (sg_exec_read(e, io->pred, sb->eps)) {
        return SG_ERR;
    }
    /* the prediction the update used: guided, the mix of each image's two (sg_sample_guide),
     * times its guidance-rescale factor where phi > 0 */
    const int guided = sg_model_guided(&e->plan.cfg);
    const double w = (double)e->plan.cfg.guidance, phi = (double)e->plan.cfg.guidance_rescale;
    const int64_t per = count / e->plan.cfg.batch;
    double f = 1.0;
    for (int64_t i = 0; i < count; i++) {
        if (guided && phi > 0.0 && i % per == 0)
            f = cpu_sample_rescale_factor(sb->eps, count, i, per, w, phi);
        const double xi = (double)sb->xin[i];
        double pi = guided ? sg_sample_guide(w, sb->eps[i], sb->eps[count + i]) : sb->eps[i];
        if (guided && phi > 0.0) pi = SG_DMUL(pi, f);
        sb->xin[i] = (float)sg_sample_x0(row, xi, pi);
    }
    return opts->on_snap(opts->batch_ctx, b0, nb, k, x, sb->xin);
}

/* One batch of the plan's size: k = -1 and the key, the sampler nodes once (x = x_T, x_t, t
 * for the first step, k = 0), then n_steps runs of the whole plan (on CUDA: replays of its
 * graph), then x read back once. Returns SG_ERR on a failure or a cancel. */
static int sample_batch(sg_exec *e, uint64_t seed, int b0, int nb, int n_images, const int *ts,
                        const sg_sample_row *rows, int n_steps, const sg_sample_opts *opts,
                        float *x, snap_bufs *sb) {
    const sg_plan *p = &e->plan;
    const sg_step_io *io = &p->io;
    int64_t per = (int64_t)p->cfg.img * p->cfg.img * p->cfg.in_ch, k0 = -1;
    uint64_t key[2] = {seed, (uint64_t)b0 * (uint64_t)per};
    if (io->class_labels >= 0) {
        /* the batch's classes (slots past the last image: the null class; discarded), then,
         * guided, the null class for every image's unconditional copy */
        const int B = p->cfg.batch, K = p->cfg.classes;
        for (int j = 0; j < B; j++) sb->labels[j] = j < nb ? opts->labels[b0 + j] : K;
        for (int j = B; j < (sg_model_guided(&p->cfg) ? 2 * B : B); j++) sb->labels[j] = K;
        if (sg_exec_write(e, io->class_labels, sb->labels)) return SG_ERR;
    }
    if (sg_exec_write(e, io->sample_key, key) || sg_exec_write(e, io->sample_k, &k0) ||
        sg_exec_run_nodes(e, io->sample_node, p->g.nn))
        return SG_ERR;
    int watched = opts->progress || opts->cancel;
    if (want_snap(opts, b0, -1, n_steps) && snapshot(e, b0, nb, -1, NULL, opts, x, sb))
        return SG_ERR;
    for (int k = 0; k < n_steps; k++) {
        const int snap = want_snap(opts, b0, k, n_steps);
        if (snap && sg_exec_read(e, io->sample_x, sb->xin)) return SG_ERR; /* the step's input */
        /* the whole plan: the forward pass at ts[k], the update, k += 1. On the CUDA backend the
         * first call runs it eagerly and captures it into a graph; every later one replays it */
        if (sg_exec_step(e)) return SG_ERR;
        if (watched && ((k + 1) % SAMPLE_IN_FLIGHT == 0 || k + 1 == n_steps) && e->be->sync(e->be))
            return SG_ERR;
        if (snap && snapshot(e, b0, nb, k, &rows[k], opts, x, sb)) return SG_ERR;
        if (opts->progress)
            opts->progress(opts->progress_ctx, b0, nb, n_images, k + 1, n_steps, ts[k]);
        if (opts->cancel && *opts->cancel) return sg_set_error("sampling interrupted");
    }
    return sg_exec_read(e, io->sample_x, x);
}

int sg_sample_ex(sg_exec *e, int n_images, uint64_t seed, const sg_sample_opts *opts, float *out) {
    const sg_plan *p = &e->plan;
    const sg_model_cfg *c = &p->cfg;
    int B = c->batch;
    int64_t per = (int64_t)c->img * c->img * c->in_ch, count = B * per;
    if (check_plan(p, count)) return SG_ERR;
    if (n_images < 1) return sg_set_error("nothing to sample: %d images", n_images);
    if (!out && !opts->on_batch) return sg_set_error("sampling: nowhere to put the images");
    int S = opts->ddim_steps;
    if (S < 0 || S > c->T)
        return sg_set_error("DDIM steps must be in [1, %d] (the schedule's T), or 0 for DDPM; "
                            "got %d",
                            c->T, S);
    int ddim = S > 0, n_steps = ddim ? S : c->T;
    int clip = opts->clip < 0 ? !ddim : opts->clip != 0;
    if (!(opts->eta >= 0.0 && opts->eta <= 1.0) || (!ddim && opts->eta != 0.0))
        return sg_set_error("eta %g: DDIM takes an eta in [0, 1]; DDPM none", opts->eta);
    if ((opts->var_large != 0 && opts->var_large != 1) || (ddim && opts->var_large))
        return sg_set_error("the variance choice is DDPM's (beta~_t or beta_t), not DDIM's");
    if (!ddim && (opts->spacing != SG_SPACING_TRAILING || opts->steps_offset != 0))
        return sg_set_error("the timestep spacing is DDIM's: DDPM visits all T steps");
    const int dpm = opts->solver == SG_SOLVER_DPMPP_2M;
    if (!sg_solver_name(opts->solver) || (!ddim && dpm))
        return sg_set_error("solver %d: DDIM's timesteps take ddim (0) or dpm++2m (1); DDPM none",
                            opts->solver);
    if (dpm && opts->eta != 0.0)
        return sg_set_error("DPM-Solver++(2M) is deterministic: eta %g is DDIM's", opts->eta);
    if (opts->karras && (!dpm || opts->spacing != SG_SPACING_TRAILING || opts->steps_offset))
        return sg_set_error("Karras sigmas are DPM-Solver++(2M)'s here, and place its steps "
                            "themselves (no spacing)");

    float *x = malloc((size_t)count * sizeof(float));
    int *ts = malloc((size_t)n_steps * sizeof(int));
    sg_sample_row *rows = malloc((size_t)c->T * sizeof(sg_sample_row));
    snap_bufs sb = {0};
    const int copies = sg_model_guided(c) ? 2 : 1; /* predictions per image */
    if (opts->snap_at && opts->on_snap) {
        sb.xin = malloc((size_t)count * sizeof(float));
        sb.eps = malloc((size_t)(copies * count) * sizeof(float));
        sb.h = malloc((size_t)(copies * count) * sizeof(sg_bf16));
    }
    if (c->classes > 0) sb.labels = malloc(sizeof(int32_t) * (size_t)(copies * B));
    int rc = SG_OK;
    if (!x || !ts || !rows || (opts->snap_at && opts->on_snap && (!sb.xin || !sb.eps || !sb.h)) ||
        (c->classes > 0 && !sb.labels))
        rc = sg_set_error("out of host memory for a sampling batch of %d", B);
    if (!rc && (c->classes > 0) != (opts->labels != NULL))
        rc = sg_set_error(c->classes > 0 ? "the model is class-conditional: sampling needs each "
                                           "image's class"
                                         : "the model is unconditional: it takes no classes");
    for (int i = 0; !rc && opts->labels && i < n_images; i++)
        if (opts->labels[i] < 0 || opts->labels[i] > c->classes)
            rc = sg_set_error("image %d's class %d is not one of the model's 0..%d (%d: none)", i,
                              opts->labels[i], c->classes, c->classes);
    if (!rc && ddim && !opts->karras)
        rc = sg_solver_timesteps(opts->solver, S, c->T, opts->spacing, opts->steps_offset, ts);
    for (int k = 0; k < n_steps && !rc && !ddim; k++) ts[k] = c->T - 1 - k;
    if (!rc) {
        /* the step table, written once: every batch runs the same steps */
        const sg_betas betas = sg_model_betas(c);
        rc = opts->karras ? sg_sample_table_karras(rows, c->T, ts, n_steps, clip, &betas)
                          : sg_sample_table(rows, c->T, ts, n_steps,
                                            dpm    ? SG_TABLE_DPM2M
                                            : ddim ? SG_TABLE_DDIM
                                                   : SG_TABLE_DDPM,
                                            clip, opts->eta, opts->var_large, &betas);
        /* a v-prediction model: every step reads its prediction as v (sg_sample_eps, _x0) */
        for (int k = 0; !rc && k < n_steps; k++) rows[k].v_pred = c->prediction == SG_PRED_V;
        if (!rc) rc = sg_exec_write(e, p->io.sample_table, rows);
    }
    for (int b0 = 0; b0 < n_images && !rc; b0 += B) {
        int nb = n_images - b0 < B ? n_images - b0 : B;
        if (opts->skip && opts->skip(opts->batch_ctx, b0, nb)) continue;
        rc = sample_batch(e, seed, b0, nb, n_images, ts, rows, n_steps, opts, x, &sb);
        for (int64_t i = 0; i < nb * per && !rc; i++)
            x[i] = isfinite(x[i]) ? (float)sg_sample_clamp1((double)x[i]) : x[i];
        if (!rc && out) memcpy(out + b0 * per, x, sizeof(float) * (size_t)(nb * per));
        if (!rc && opts->on_batch) rc = opts->on_batch(opts->batch_ctx, b0, nb, x);
    }
    free(x), free(ts), free(rows), free(sb.xin), free(sb.eps), free(sb.h), free(sb.labels);
    return rc;
}

int sg_sample(sg_exec *e, int n_images, uint64_t seed, int ddim_steps, float *out,
              sg_sample_progress_fn progress, void *progress_ctx) {
    sg_sample_opts o = {
        .ddim_steps = ddim_steps, .clip = -1, .progress = progress, .progress_ctx = progress_ctx};
    return sg_sample_ex(e, n_images, seed, &o, out);
}
