/* embedding.c — the sinusoidal timestep embedding, the class embedding and the DDPM
 * forward-noising step.
 *
 * Shapes: t[N] (int32 timesteps), y[N,dim]; x0, eps, xt [N,per] (per = H*W*C values/sample).
 *
 * Timestep embedding (DDPM; diffusers with flip_sin_to_cos=False, downscale_freq_shift=1):
 *   half = dim/2, f_i = exp(-ln(10000) * i / (half - 1)), i < half,
 *   y[n] = [sin(t_n f_0), ..., sin(t_n f_{half-1}), cos(t_n f_0), ..., cos(t_n f_{half-1})].
 * Computed in double and rounded once: t f_i reaches ~1000 rad, where an fp32 argument would
 * already be off by ~6e-5, and the reference should be the exact value.
 *
 * DDPM (Ho et al. 2020) over T steps, with the betas of the schedule (common/sg_schedule.h):
 *   linear: beta_i = beta1 + (betaT - beta1) * i / (T-1)
 *   cosine: beta_i = min(1 - f(i+1) / f(i), 0.999), f(i) = cos((i/T + 0.008) / 1.008 * pi/2)^2
 *   abar_t = prod_{i<=t} (1 - beta_i),  x_t = sqrt(abar_t) x0 + sqrt(1 - abar_t) eps.
 * The cosine betas are improved-diffusion's (betas_for_alpha_bar) operation for operation in
 * double, but for the square: c * c here (exact, then rounded once), Python's c ** 2 is libm's
 * pow, which can be an ulp away; abar agrees with its np.cumprod(1 - betas) to ~1e-15
 * (tests/test_cpu_kernels.c against the closed form; tools/torch_ref/oracle.py and
 * tests/diffusers_interop.py against numpy and diffusers).
 * The CUDA noising reads the coefficients from a table of every timestep's (cpu_ddpm_table,
 * written once per run by the executor) instead of recomputing the product: the same values.
 */
#include "common/sg_base.h"
#include "kernels/cpu/cpu_kernels.h"

#include <math.h>

void cpu_timestep_emb(float *y, const int32_t *t, int N, int dim) {
    SG_ASSERT(dim >= 4 && dim % 2 == 0); /* half - 1 must be > 0 */
    int half = dim / 2;
    double step = -log(10000.0) / (half - 1);
    for (int n = 0; n < N; n++) {
        float *yn = y + (int64_t)n * dim;
        for (int i = 0; i < half; i++) {
            double arg = (double)t[n] * exp(step * i);
            yn[i] = (float)sin(arg);
            yn[half + i] = (float)cos(arg);
        }
    }
}

void cpu_class_emb_fwd(float *y, const int32_t *lab, const float *table, int N, int dim) {
    for (int n = 0; n < N; n++)
        for (int d = 0; d < dim; d++) y[(int64_t)n * dim + d] = table[(int64_t)lab[n] * dim + d];
}

void cpu_class_emb_bwd(float *dtable, const float *dy, const int32_t *lab, int N, int dim,
                       int rows) {
    for (int64_t i = 0; i < (int64_t)rows * dim; i++) dtable[i] = 0.0f;
    for (int n = 0; n < N; n++) {
        SG_ASSERT(lab[n] >= 0 && lab[n] < rows);
        for (int d = 0; d < dim; d++) dtable[(int64_t)lab[n] * dim + d] += dy[(int64_t)n * dim + d];
    }
}

/* the cosine schedule's f(i) = alpha_bar(i / T), written as improved-diffusion's lambda */
static double cosine_f(int i, int T) {
    const double pi = 3.14159265358979323846;
    const double c = cos(((double)i / T + 0.008) / 1.008 * pi / 2);
    return c * c;
}

/* the schedule's own beta_t, before any rescaling */
static double base_beta(const sg_betas *b, int t) {
    if (b->schedule == SG_BETA_COSINE) {
        const double beta = 1.0 - cosine_f(t + 1, b->T) / cosine_f(t, b->T);
        return beta < 0.999 ? beta : 0.999;
    }
    SG_ASSERT(b->schedule == SG_BETA_LINEAR);
    return b->T > 1 ? b->beta1 + (b->betaT - b->beta1) * t / (b->T - 1) : b->beta1;
}

/* The betas in order, t = 0, 1, ..., without storing them. With zero_snr the schedule's
 * sqrt(abar) is shifted and scaled to end at 0 and keep its start (Lin et al. 2024, Algorithm 1;
 * diffusers' rescale_zero_terminal_snr, here in double):
 *   s_t = sqrt(prod_{i<=t} (1 - beta_i)),  s'_t = (s_t - s_{T-1}) s_0 / (s_0 - s_{T-1}),
 *   a_t = s'_t^2,  beta'_0 = 1 - a_0,  beta'_t = 1 - a_t / a_{t-1}
 * so beta'_{T-1} = 1 exactly (a_{T-1} = 0) and the abar of the rescaled betas ends at 0. The
 * first pass finds s_{T-1}; the walk is O(T) in all. */
typedef struct {
    const sg_betas *b;
    int t;         /* the next beta's index */
    double p;      /* the schedule's running product (zero_snr) */
    double s0, sT; /* its sqrt(abar) at 0 and T - 1 */
    double a_prev; /* a_{t-1} */
} beta_walk;

static beta_walk walk_begin(const sg_betas *b) {
    SG_ASSERT(b->T >= 1 && (!b->zero_snr || b->T >= 2));
    beta_walk w = {.b = b, .p = 1.0};
    if (b->zero_snr) {
        double p = 1.0;
        for (int i = 0; i < b->T; i++) p *= 1.0 - base_beta(b, i);
        w.s0 = sqrt(1.0 - base_beta(b, 0)), w.sT = sqrt(p);
    }
    return w;
}

static double walk_next(beta_walk *w) {
    const int t = w->t++;
    SG_ASSERT(t < w->b->T);
    if (!w->b->zero_snr) return base_beta(w->b, t);
    w->p *= 1.0 - base_beta(w->b, t);
    const double s = (sqrt(w->p) - w->sT) * (w->s0 / (w->s0 - w->sT)), a = s * s;
    const double beta = 1.0 - (t ? a / w->a_prev : a);
    w->a_prev = a;
    return beta;
}

double sg_ddpm_beta(const sg_betas *b, int t) {
    SG_ASSERT(b->T >= 1 && t >= 0 && t < b->T);
    if (!b->zero_snr) return base_beta(b, t);
    beta_walk w = walk_begin(b);
    double beta = 0.0;
    for (int i = 0; i <= t; i++) beta = walk_next(&w);
    return beta;
}

void sg_ddpm_betas(const sg_betas *b, double *beta) {
    beta_walk w = walk_begin(b);
    for (int t = 0; t < b->T; t++) beta[t] = walk_next(&w);
}

/* The product runs in increasing i in double, as the contract fixes, so every caller (this
 * noising, the sampler's coefficients in graph/sampler.c and kernels/cpu/sample_step.c, the
 * CUDA noising's table) gets the same value. */
double sg_ddpm_abar(const sg_betas *b, int t) {
    SG_ASSERT(b->T >= 1 && t >= 0 && t < b->T);
    beta_walk w = walk_begin(b);
    double abar = 1.0;
    for (int i = 0; i <= t; i++) abar *= 1.0 - walk_next(&w);
    return abar;
}

/* every abar_t at once: the running product is sg_ddpm_abar's, step for step, so the same bits
 * in O(T) */
void sg_ddpm_abars(const sg_betas *b, double *abar) {
    beta_walk w = walk_begin(b);
    double p = 1.0;
    for (int t = 0; t < b->T; t++) abar[t] = p *= 1.0 - walk_next(&w);
}

double sg_min_snr_weight(double abar, double gamma, int vpred) {
    const double snr = abar / (1.0 - abar);
    /* abar 0 (a product of many large betas underflows): the limits as SNR -> 0, not 0 / 0 */
    if (!(snr > 0)) return vpred ? 0.0 : 1.0;
    return (snr < gamma ? snr : gamma) / (vpred ? snr + 1.0 : snr);
}

double sg_p2_weight(double abar, double gamma, double k, int vpred) {
    const double snr = abar / (1.0 - abar), w = pow(k + snr, -gamma);
    return vpred ? w * (snr / (snr + 1.0)) : w;
}

/* every timestep's min-SNR (p2 0) or P2 (p2 1) weight */
static void weight_table(float *w, const sg_betas *b, int p2, double gamma, double k, int vpred) {
    beta_walk wk = walk_begin(b);
    double abar = 1.0; /* sg_ddpm_abars' running product */
    for (int t = 0; t < b->T; t++) {
        abar *= 1.0 - walk_next(&wk);
        w[t] = (float)(p2 ? sg_p2_weight(abar, gamma, k, vpred)
                          : sg_min_snr_weight(abar, gamma, vpred));
    }
}

void cpu_loss_weight_table(float *w, const sg_betas *b, double gamma, int vpred) {
    weight_table(w, b, 0, gamma, 0.0, vpred);
}

void cpu_p2_weight_table(float *w, const sg_betas *b, double gamma, double k, int vpred) {
    weight_table(w, b, 1, gamma, k, vpred);
}

/* timestep t's coefficients, by cpu_ddpm_table's expression */
static sg_ddpm_row ddpm_row(const sg_betas *b, int t) {
    const double abar = sg_ddpm_abar(b, t);
    const sg_ddpm_row r = {sqrt(abar), sqrt(1.0 - abar)};
    return r;
}

void cpu_ddpm_table(sg_ddpm_row *rows, const sg_betas *b) {
    beta_walk w = walk_begin(b);
    double abar = 1.0; /* sg_ddpm_abar's running product: the same bits in O(T) */
    for (int t = 0; t < b->T; t++) {
        abar *= 1.0 - walk_next(&w);
        rows[t] = (sg_ddpm_row){sqrt(abar), sqrt(1.0 - abar)};
    }
}

/* out = sqrt(abar_t) p + sign sqrt(1 - abar_t) q per sample: the CUDA kernel's expression with
 * its table's second column (negated for v: a eps + (-s) x0 is a eps - s x0 to the bit, IEEE
 * negation being exact) */
static void ddpm_mix(float *out, const float *p, const float *q, const int32_t *t, int N, int per,
                     const sg_betas *b, double sign) {
    for (int n = 0; n < N; n++) {
        const sg_ddpm_row r = ddpm_row(b, t[n]);
        const double a = r.sqrt_abar, s = sign * r.sqrt_1m_abar;
        int64_t off = (int64_t)n * per;
        for (int i = 0; i < per; i++) out[off + i] = (float)(a * p[off + i] + s * q[off + i]);
    }
}

void cpu_ddpm_v(float *v, const float *x0, const float *eps, const int32_t *t, int N, int per,
                const sg_betas *b) {
    ddpm_mix(v, eps, x0, t, N, per, b, -1.0);
}

void cpu_ddpm_noise(float *xt, const float *x0, const float *eps, const int32_t *t, int N, int per,
                    const sg_betas *b) {
    ddpm_mix(xt, x0, eps, t, N, per, b, 1.0);
}
