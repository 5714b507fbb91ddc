/* rng_ops.c — the CPU reference for every op that draws random numbers or reads the dataset:
 * batch gathering (data order, normalisation, padding, flips), diffusion timesteps, Gaussian
 * noise and dropout masks.
 *
 * Every draw comes from common/philox.h keyed by (seed, step, purpose, element index), so the
 * result depends on nothing but the arguments: the CUDA kernels draw the same words with the
 * same keys, any element can be computed by any thread, and no mask or permutation is stored.
 * Shapes: NHWC, as everywhere; data[ndata][H0][W0][C] is the uploaded uint8 dataset.
 */
#include "common/philox.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/scratch.h"

/* Sample i of this batch is sample g = step*B + s0 + i of the run (B: the global batch, s0:
 * this rank's first sample; one process: B = N, s0 = 0): epoch g / ndata reads the dataset in
 * the order of sg_perm(seed, epoch, ., ndata), and the flip is drawn at index s0 + i, so N
 * ranks of B/N samples draw exactly what one process of B samples draws. The image is placed
 * centred in the H x W output, with top = (H - H0) / 2 rows and left = (W - W0) / 2 columns of
 * padding (negative offsets centre-crop instead); padding is -1, the value of a black pixel. A
 * flipped sample mirrors the source image (column W0-1-sx for sx), not the padded canvas, so
 * flips keep the image where it is even when the padding is uneven. */
void cpu_gather_batch(float *x0, const uint8_t *data, int64_t ndata, int H0, int W0, int C, int N,
                      int H, int W, uint64_t seed, int64_t step, int flip, int64_t B, int64_t s0) {
    const int top = (H - H0) / 2, left = (W - W0) / 2;
    const int64_t image = (int64_t)H0 * W0 * C;
    for (int i = 0; i < N; i++) {
        int64_t g = step * B + s0 + i;
        int64_t item = sg_batch_item(seed, g, ndata);
        int mirror = flip && sg_rng_bit(seed, step, SG_RNG_FLIP, (uint64_t)(s0 + i));
        const uint8_t *src = data + item * image;
        float *dst = x0 + (int64_t)i * H * W * C;
        for (int y = 0; y < H; y++) {
            int sy = y - top;
            for (int x = 0; x < W; x++) {
                int sx = x - left;
                float *d = dst + ((int64_t)y * W + x) * C;
                if (sy < 0 || sy >= H0 || sx < 0 || sx >= W0) {
                    for (int c = 0; c < C; c++) d[c] = -1.0f;
                    continue;
                }
                if (mirror) sx = W0 - 1 - sx;
                const uint8_t *s = src + ((int64_t)sy * W0 + sx) * C;
                /* v / 127.5 - 1 maps 0 -> -1 and 255 -> 1; written as one division and one
                 * subtraction so CUDA computes the identical float */
                for (int c = 0; c < C; c++) d[c] = (float)s[c] / 127.5f - 1.0f;
            }
        }
    }
}

void cpu_gather_labels(int32_t *y, const int32_t *labels, int64_t ndata, int N, int classes,
                       float p, uint64_t seed, int64_t step, int64_t B, int64_t s0) {
    for (int i = 0; i < N; i++) {
        const int64_t item = sg_batch_item(seed, step * B + s0 + i, ndata);
        const int drop = sg_rng_uniform(seed, step, SG_RNG_CLASS_DROP, (uint64_t)(s0 + i)) < p;
        y[i] = drop ? classes : labels[item];
    }
}

/* i0 here and below: the global index of element 0 (see cpu_kernels.h) */
void cpu_sample_timesteps(int32_t *t, int N, int T, uint64_t seed, int64_t step, uint64_t i0) {
    for (int i = 0; i < N; i++)
        t[i] = (int32_t)sg_rng_index(seed, step, SG_RNG_TIMESTEP, i0 + (uint64_t)i, (uint32_t)T);
}

void cpu_gaussian(float *eps, int64_t n, uint64_t seed, int64_t step, uint32_t purpose,
                  uint64_t i0) {
    for (int64_t i = 0; i < n; i++) eps[i] = sg_rng_normal(seed, step, purpose, i0 + (uint64_t)i);
}

void cpu_noise_offset(float *eps, int64_t n, int64_t per, int C, float s, uint64_t seed,
                      int64_t step, uint64_t i0, uint64_t q0) {
    for (int64_t i = 0; i < n; i++) {
        const uint64_t q = q0 + (uint64_t)(i / per);
        const float zo =
            sg_rng_normal(seed, step, SG_RNG_NOISE_OFFSET, q * (uint64_t)C + (uint64_t)(i % C));
        const float so = s * zo;
        eps[i] = sg_rng_normal(seed, step, SG_RNG_NOISE, i0 + (uint64_t)i) + so;
    }
}

void cpu_noise_perturb(float *eps, int64_t n, float g, uint64_t seed, int64_t step, uint64_t i0) {
    for (int64_t i = 0; i < n; i++) {
        const float gx = g * sg_rng_normal(seed, step, SG_RNG_PERTURB, i0 + (uint64_t)i);
        eps[i] = eps[i] + gx;
    }
}

/* elements per run of uniforms (sg_rng_dropout_run) */
#define DROP_RUN 256

/* The keep scale 1/(1-p), computed once in float exactly as the CUDA kernel does; p >= 1 drops
 * everything (the uniform is always < 1), and the scale is never applied then. */
static float dropout_scale(float p) {
    return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
}

/* y may alias x. */
void cpu_dropout_fwd(float *y, const float *x, int64_t n, float p, uint64_t seed, int64_t step,
                     uint32_t purpose, uint64_t i0) {
    const float scale = dropout_scale(p);
    float u[DROP_RUN];
    for (int64_t i0r = 0; i0r < n; i0r += DROP_RUN) {
        const int64_t m = n - i0r < DROP_RUN ? n - i0r : DROP_RUN;
        sg_rng_dropout_run(u, m, seed, step, purpose, i0 + (uint64_t)i0r);
        for (int64_t k = 0; k < m; k++)
            y[i0r + k] = sg_cpu_keep_or_zero(x[i0r + k] * scale, u[k] >= p);
    }
}

/* The mask is regenerated from the same key, so the backward needs nothing saved: it is the
 * forward applied to dy (the same mask, the same scale); dx may alias dy. */
void cpu_dropout_bwd(float *dx, const float *dy, int64_t n, float p, uint64_t seed, int64_t step,
                     uint32_t purpose, uint64_t i0) {
    cpu_dropout_fwd(dx, dy, n, p, seed, step, purpose, i0);
}
