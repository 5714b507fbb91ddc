/* test_rng_ops.c — kernels/cpu/rng_ops.c: batch gathering against hand-written expected
 * images (normalisation, padding, crop, flips), data-order coverage (each item exactly once per
 * epoch), timesteps, Gaussian noise and dropout (masks of forward and backward agree, keep rate
 * ~ 1-p, the same call gives the same bits), and the data-parallel slicing: R ranks, each
 * drawing its slice at its global offset, together draw bit for bit what one call over the
 * whole batch draws (docs/data-parallel.md); the class labels of the gathered items and their
 * dropout to the null class. Outputs are poisoned with NaN first so an
 * unwritten element fails. */
#include "common/philox.h"
#include "kernels/cpu/cpu_kernels.h"
#include "tests/sg_test.h"

static void poison(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] = NAN;
}

/* v / 127.5 - 1, the normalisation under test, written out for the expectations */
static float norm(int v) {
    return (float)v / 127.5f - 1.0f;
}

/* Dataset of 5 items, 2x3 pixels, 1 channel: item k has pixel p = base[p] + k, so every value
 * names its item. Gathered into a 4x6 canvas: (4-2)/2 = 1 row above, 1 below; (6-3)/2 = 1
 * column left, 2 right. The padding is uneven on purpose: a flip mirrors the image where it
 * sits, not the whole canvas. */
static void test_gather_layout(void) {
    enum { ND = 5, H0 = 2, W0 = 3, H = 4, W = 6, N = 8 };
    static const int base[H0 * W0] = {0, 50, 100, 150, 200, 250};
    uint8_t data[ND * H0 * W0];
    for (int k = 0; k < ND; k++)
        for (int p = 0; p < H0 * W0; p++) data[k * H0 * W0 + p] = (uint8_t)(base[p] + k);
    /* the canvas, as source pixel index or -1 for padding; and its mirror image */
    static const int plain[H][W] = {{-1, -1, -1, -1, -1, -1},
                                    {-1, 0, 1, 2, -1, -1},
                                    {-1, 3, 4, 5, -1, -1},
                                    {-1, -1, -1, -1, -1, -1}};
    static const int mirror[H][W] = {{-1, -1, -1, -1, -1, -1},
                                     {-1, 2, 1, 0, -1, -1},
                                     {-1, 5, 4, 3, -1, -1},
                                     {-1, -1, -1, -1, -1, -1}};
    float x0[N * H * W];
    const uint64_t seed = 99;
    int flips = 0;
    for (int64_t step = 0; step < 4; step++) {
        for (int flip = 0; flip <= 1; flip++) {
            poison(x0, N * H * W);
            cpu_gather_batch(x0, data, ND, H0, W0, 1, N, H, W, seed, step, flip, N, 0);
            for (int i = 0; i < N; i++) {
                int64_t g = step * N + i;
                int item = (int)sg_perm(seed, g / ND, g % ND, ND);
                int mirrored = flip && sg_rng_bit(seed, step, SG_RNG_FLIP, (uint64_t)i);
                flips += mirrored;
                int bad = 0;
                for (int y = 0; y < H; y++)
                    for (int x = 0; x < W; x++) {
                        int p = mirrored ? mirror[y][x] : plain[y][x];
                        float want = p < 0 ? -1.0f : norm(base[p] + item);
                        bad += !(x0[(i * H + y) * W + x] == want);
                    }
                CHECK(bad == 0, "step %lld sample %d (item %d, mirrored %d): %d pixels differ",
                      (long long)step, i, item, mirrored, bad);
            }
        }
    }
    CHECK(flips > 4 && flips < 28, "flip bits over 32 samples: %d", flips);
    /* the normalisation end points are exact */
    CHECK(norm(0) == -1.0f && norm(255) == 1.0f, "0 -> -1, 255 -> 1");
}

/* Three channels stay together (HWC) through padding and flips; a canvas smaller than the
 * image centre-crops. */
static void test_gather_channels_and_crop(void) {
    enum { H0 = 3, W0 = 4, C = 3 };
    uint8_t data[2 * H0 * W0 * C];
    for (int i = 0; i < 2 * H0 * W0 * C; i++) data[i] = (uint8_t)(i * 7 % 256);
    /* crop 3x4 -> 1x2: top = (1-3)/2 = -1, left = (2-4)/2 = -1: source rows 1, cols 1..2 */
    float y[2 * 1 * 2 * C];
    poison(y, SG_ARRAY_LEN(y));
    cpu_gather_batch(y, data, 2, H0, W0, C, 2, 1, 2, 5, 0, 0, 2, 0);
    int bad = 0;
    for (int i = 0; i < 2; i++) {
        int item = (int)sg_perm(5, 0, i, 2);
        for (int x = 0; x < 2; x++)
            for (int c = 0; c < C; c++)
                bad +=
                    y[(i * 2 + x) * C + c] != norm(data[((item * H0 + 1) * W0 + (x + 1)) * C + c]);
    }
    CHECK(bad == 0, "crop: %d values differ", bad);
    /* flipped RGB: channel order within a pixel is kept */
    float z[2 * H0 * W0 * C];
    for (int64_t step = 0; step < 8; step++) {
        poison(z, SG_ARRAY_LEN(z));
        cpu_gather_batch(z, data, 2, H0, W0, C, 2, H0, W0, 5, step, 1, 2, 0);
        bad = 0;
        for (int i = 0; i < 2; i++) {
            int64_t g = step * 2 + i;
            int item = (int)sg_perm(5, g / 2, g % 2, 2);
            int m = sg_rng_bit(5, step, SG_RNG_FLIP, (uint64_t)i);
            for (int yy = 0; yy < H0; yy++)
                for (int x = 0; x < W0; x++)
                    for (int c = 0; c < C; c++) {
                        int sx = m ? W0 - 1 - x : x;
                        bad += z[((i * H0 + yy) * W0 + x) * C + c] !=
                               norm(data[((item * H0 + yy) * W0 + sx) * C + c]);
                    }
        }
        CHECK(bad == 0, "rgb step %lld: %d values differ", (long long)step, bad);
    }
}

/* Over the run, epoch e consists of samples g in [e*ndata, (e+1)*ndata): every item exactly
 * once, whether or not the batch size divides ndata; epochs are in different orders. */
static void test_gather_epoch_coverage(void) {
    static const int cases[][2] = {{7, 3}, {10, 10}, {1000, 128}, {256, 1}, {1, 4}};
    for (int k = 0; k < SG_ARRAY_LEN(cases); k++) {
        int nd = cases[k][0], N = cases[k][1], epochs = 3;
        uint8_t *data = malloc((size_t)nd * 2);
        for (int j = 0; j < nd; j++) { /* 1x1 images, 2 channels encode the item: j = hi*256+lo */
            data[2 * j] = (uint8_t)(j & 255);
            data[2 * j + 1] = (uint8_t)(j >> 8);
        }
        int64_t total = (int64_t)nd * epochs, steps = (total + N - 1) / N;
        int *order = malloc(sizeof(int) * (size_t)(steps * N));
        float *x0 = malloc(sizeof(float) * 2 * (size_t)N);
        for (int64_t s = 0; s < steps; s++) {
            poison(x0, 2 * N);
            cpu_gather_batch(x0, data, nd, 1, 1, 2, N, 1, 1, 31337, s, 1, N, 0);
            for (int i = 0; i < N; i++) {
                int lo = (int)lrintf((x0[2 * i] + 1.0f) * 127.5f);
                int hi = (int)lrintf((x0[2 * i + 1] + 1.0f) * 127.5f);
                order[s * N + i] = hi * 256 + lo;
            }
        }
        int *count = calloc((size_t)nd, sizeof(int));
        for (int e = 0; e < epochs; e++) {
            memset(count, 0, sizeof(int) * (size_t)nd);
            int ok = 1;
            for (int j = 0; j < nd; j++) {
                int it = order[e * nd + j];
                if (it < 0 || it >= nd || count[it]++) ok = 0;
            }
            CHECK(ok, "ndata %d batch %d epoch %d: not each item exactly once", nd, N, e);
        }
        if (nd >= 10) {
            int same = 0;
            for (int j = 0; j < nd; j++) same += order[j] == order[nd + j];
            CHECK(same < nd / 2, "ndata %d: epochs 0 and 1 share %d positions", nd, same);
        }
        free(count);
        free(x0);
        free(order);
        free(data);
    }
}

/* gather_labels: the labels of the very items gather_batch takes (the dataset encodes each
 * item in its pixels), dropped to the null class K at rate ~p, keyed by the sample's global
 * index (ranks and micro-batches draw what one call draws); p 0 and 1 never / always drop */
static void test_gather_labels(void) {
    enum { ND = 37, N = 4096, K = 7 };
    uint8_t data[ND];
    int32_t labels[ND];
    for (int j = 0; j < ND; j++) data[j] = (uint8_t)j, labels[j] = (j * 5 + 3) % K;
    float *x0 = malloc(sizeof(float) * N);
    int32_t *y = malloc(sizeof(int32_t) * N), *y2 = malloc(sizeof(int32_t) * N);
    const float ps[3] = {0.0f, 0.25f, 1.0f};
    for (int k = 0; k < 3; k++) {
        const float p = ps[k];
        for (int64_t step = 0; step < 3; step++) {
            poison(x0, N);
            for (int i = 0; i < N; i++) y[i] = y2[i] = -9;
            cpu_gather_batch(x0, data, ND, 1, 1, 1, N, 1, 1, 99, step, 0, N, 0);
            cpu_gather_labels(y, labels, ND, N, K, p, 99, step, N, 0);
            int wrong = 0, dropped = 0;
            for (int i = 0; i < N; i++) {
                const int item = (int)lrintf((x0[i] + 1.0f) * 127.5f);
                dropped += y[i] == K;
                wrong += y[i] != K && y[i] != labels[item];
            }
            CHECK(wrong == 0, "p %g step %lld: %d labels are not their images' items'", (double)p,
                  (long long)step, wrong);
            const double rate = (double)dropped / N; /* sd sqrt(p(1-p)/N) <= 0.008 */
            CHECK(fabs(rate - p) < 0.04, "p %g: %.3f of the labels dropped", (double)p, rate);
            /* four slices of N/4 at their global offsets draw what one call draws */
            for (int r = 0; r < 4; r++)
                cpu_gather_labels(y2 + r * (N / 4), labels, ND, N / 4, K, p, 99, step, N,
                                  (int64_t)r * (N / 4));
            CHECK(!memcmp(y, y2, sizeof(int32_t) * N), "p %g: 4 slices differ from one call",
                  (double)p);
        }
    }
    free(x0), free(y), free(y2);
}

static void test_timesteps(void) {
    enum { N = 4096, T = 1000 };
    int32_t t[N], u[N];
    for (int i = 0; i < N; i++) t[i] = u[i] = -7;
    cpu_sample_timesteps(t, N, T, 17, 3, 0);
    cpu_sample_timesteps(u, N, T, 17, 3, 0);
    int in_range = 1, differs = 0;
    double mean = 0;
    for (int i = 0; i < N; i++) {
        in_range &= t[i] >= 0 && t[i] < T;
        mean += t[i];
        differs += t[i] != (int32_t)sg_rng_index(17, 3, SG_RNG_TIMESTEP, (uint64_t)i, T);
    }
    CHECK(in_range, "timestep out of [0, T)");
    CHECK(differs == 0, "timesteps differ from sg_rng_index in %d places", differs);
    CHECK(memcmp(t, u, sizeof t) == 0, "same call, different timesteps");
    mean /= N; /* uniform on [0, 999]: mean 499.5, sd of the mean ~4.5 */
    CHECK(fabs(mean - 499.5) < 25, "timestep mean %f", mean);
    cpu_sample_timesteps(u, N, T, 17, 4, 0);
    CHECK(memcmp(t, u, sizeof t) != 0, "steps 3 and 4 drew the same timesteps");
}

static void test_gaussian(void) {
    const int64_t n = 1 << 20;
    float *a = malloc(sizeof(float) * (size_t)n), *b = malloc(sizeof(float) * (size_t)n);
    poison(a, n);
    poison(b, n);
    cpu_gaussian(a, n, 2024, 12, SG_RNG_NOISE, 0);
    cpu_gaussian(b, n, 2024, 12, SG_RNG_NOISE, 0);
    double s1 = 0, s2 = 0;
    int finite = 1, differs = 0;
    for (int64_t i = 0; i < n; i++) {
        finite &= isfinite(a[i]) != 0;
        s1 += a[i];
        s2 += (double)a[i] * a[i];
        differs += a[i] != sg_rng_normal(2024, 12, SG_RNG_NOISE, (uint64_t)i);
    }
    double mean = s1 / n, var = s2 / n - mean * mean;
    CHECK(finite, "non-finite (or unwritten) noise");
    CHECK(differs == 0, "noise differs from sg_rng_normal in %d places", differs);
    CHECK(memcmp(a, b, sizeof(float) * (size_t)n) == 0, "same call, different noise");
    CHECK(fabs(mean) < 0.005 && fabs(var - 1) < 0.01, "noise mean %f var %f", mean, var);
    cpu_gaussian(b, n, 2024, 12, SG_RNG_SAMPLE, 0);
    int same = 0;
    for (int64_t i = 0; i < n; i++) same += a[i] == b[i];
    CHECK(same < 16, "purposes NOISE and SAMPLE share %d values", same);
    free(a);
    free(b);
}

/* Offset noise: eps - z (z: the plain noise of the same key) is one value per (sample,
 * channel), s times a standard normal (over 512 samples x 4 channels: mean ~0, variance ~s^2),
 * the same for every pixel of the sample and channel, another for the next; four slices
 * (q0, i0 at their samples) draw what one call draws. */
static void test_noise_offset(void) {
    enum { NS = 512, PER = 6 * 6 * 4, C = 4 };
    const int64_t n = (int64_t)NS * PER;
    const float s = 0.25f;
    float *a = malloc(sizeof(float) * (size_t)n), *z = malloc(sizeof(float) * (size_t)n),
          *b = malloc(sizeof(float) * (size_t)n);
    poison(a, n);
    cpu_noise_offset(a, n, PER, C, s, 77, 3, 0, 0);
    cpu_gaussian(z, n, 77, 3, SG_RNG_NOISE, 0);
    double m = 0, v = 0, worst = 0;
    int spread = 0;
    for (int q = 0; q < NS; q++)
        for (int c = 0; c < C; c++) {
            const double o = (double)a[(int64_t)q * PER + c] - z[(int64_t)q * PER + c];
            for (int j = c; j < PER; j += C) {
                const int64_t i = (int64_t)q * PER + j;
                worst = fmax(worst, fabs((double)a[i] - z[i] - o));
            }
            m += o, v += o * o;
            spread +=
                q > 0 && o == (double)a[(int64_t)(q - 1) * PER + c] - z[(int64_t)(q - 1) * PER + c];
        }
    m /= NS * C, v = v / (NS * C) - m * m;
    CHECK(worst < 1e-6 && spread == 0 && fabs(m) < 0.03 && fabs(v / (s * s) - 1) < 0.1,
          "offset noise: eps - z varies %.3g within a (sample, channel); %d repeats across "
          "samples; offsets mean %.4f, variance %.4f (want %.4f)",
          worst, spread, m, v, (double)(s * s));
    for (int k = 0; k < 4; k++)
        cpu_noise_offset(b + (int64_t)k * (NS / 4) * PER, (int64_t)(NS / 4) * PER, PER, C, s, 77, 3,
                         (uint64_t)k * (NS / 4) * PER, (uint64_t)k * (NS / 4));
    CHECK(!memcmp(a, b, sizeof(float) * (size_t)n),
          "offset noise: four slices differ from one call");
    free(a), free(z), free(b);
}

/* Input perturbation: on noise z (cpu_gaussian), eps - z is g times a standard normal per
 * element from its own stream (mean ~0, variance ~g^2, uncorrelated with z), each eps the float
 * z + g * xi with the product rounded first; four slices at their global offsets draw what one
 * call draws. */
static void test_noise_perturb(void) {
    enum { N = 1 << 18 };
    const float g = 0.1f;
    float *a = malloc(sizeof(float) * N), *z = malloc(sizeof(float) * N),
          *b = malloc(sizeof(float) * N);
    cpu_gaussian(z, N, 77, 3, SG_RNG_NOISE, 0);
    memcpy(a, z, sizeof(float) * N);
    cpu_noise_perturb(a, N, g, 77, 3, 0);
    double m = 0, v = 0, cz = 0;
    int64_t exact = 0;
    for (int64_t i = 0; i < N; i++) {
        const double d = (double)a[i] - z[i];
        m += d, v += d * d, cz += d * z[i];
        const float gx = g * sg_rng_normal(77, 3, SG_RNG_PERTURB, (uint64_t)i);
        exact += a[i] == z[i] + gx;
    }
    m /= N, v = v / N - m * m, cz /= N * (double)g;
    CHECK(exact == N && fabs(m) < 1e-3 && fabs(v / (g * g) - 1) < 0.02 && fabs(cz) < 0.01,
          "input perturbation: %lld of %d values are z + g xi; eps - z mean %.2e, variance %.4g "
          "(want %.4g), correlation with z %.4f",
          (long long)exact, N, m, v, (double)(g * g), cz);
    memcpy(b, z, sizeof(float) * N);
    for (int k = 0; k < 4; k++)
        cpu_noise_perturb(b + k * (N / 4), N / 4, g, 77, 3, (uint64_t)k * (N / 4));
    CHECK(!memcmp(a, b, sizeof(float) * N), "input perturbation: four slices differ from one call");
    free(a), free(z), free(b);
}

static void test_dropout(void) {
    const int64_t n = 1 << 20;
    const float p = 0.1f, scale = 1.0f / (1.0f - p);
    const uint32_t purpose = SG_RNG_DROPOUT_BASE + 3;
    uint64_t s = 1;
    float *x = malloc(sizeof(float) * (size_t)n), *dy = malloc(sizeof(float) * (size_t)n);
    float *y = malloc(sizeof(float) * (size_t)n), *y2 = malloc(sizeof(float) * (size_t)n);
    float *dx = malloc(sizeof(float) * (size_t)n);
    sg_test_fill(x, n, &s, 0.5f, 2.0f); /* never zero: a zero output means dropped */
    sg_test_fill(dy, n, &s, -2.0f, -0.5f);
    poison(y, n);
    poison(y2, n);
    poison(dx, n);
    cpu_dropout_fwd(y, x, n, p, 7, 100, purpose, 0);
    cpu_dropout_fwd(y2, x, n, p, 7, 100, purpose, 0);
    cpu_dropout_bwd(dx, dy, n, p, 7, 100, purpose, 0);
    int64_t kept = 0, mask_mismatch = 0, wrong_value = 0;
    for (int64_t i = 0; i < n; i++) {
        int k = y[i] != 0.0f;
        kept += k;
        mask_mismatch += k != (dx[i] != 0.0f);
        if (k)
            wrong_value += y[i] != x[i] * scale || dx[i] != dy[i] * scale;
        else
            wrong_value += y[i] != 0.0f || dx[i] != 0.0f; /* also catches NaN (unwritten) */
    }
    double rate = (double)kept / n; /* sd of the rate ~ 0.0003 */
    CHECK(fabs(rate - 0.9) < 0.003, "keep rate %f, want 0.9", rate);
    CHECK(mask_mismatch == 0, "forward and backward masks differ in %lld places",
          (long long)mask_mismatch);
    CHECK(wrong_value == 0, "%lld values are not x/(1-p) or 0", (long long)wrong_value);
    CHECK(memcmp(y, y2, sizeof(float) * (size_t)n) == 0, "same call, different mask");
    /* in place (y aliases x; dx aliases dy) gives the same result */
    memcpy(y2, x, sizeof(float) * (size_t)n);
    cpu_dropout_fwd(y2, y2, n, p, 7, 100, purpose, 0);
    CHECK(memcmp(y, y2, sizeof(float) * (size_t)n) == 0, "in-place forward differs");
    memcpy(y2, dy, sizeof(float) * (size_t)n);
    cpu_dropout_bwd(y2, y2, n, p, 7, 100, purpose, 0);
    CHECK(memcmp(dx, y2, sizeof(float) * (size_t)n) == 0, "in-place backward differs");
    /* another step or another dropout node gives an unrelated mask (agreement ~ 0.82) */
    int64_t agree_step = 0, agree_node = 0;
    cpu_dropout_fwd(y2, x, n, p, 7, 101, purpose, 0);
    for (int64_t i = 0; i < n; i++) agree_step += (y[i] != 0) == (y2[i] != 0);
    cpu_dropout_fwd(y2, x, n, p, 7, 100, purpose + 1, 0);
    for (int64_t i = 0; i < n; i++) agree_node += (y[i] != 0) == (y2[i] != 0);
    CHECK(fabs((double)agree_step / n - 0.82) < 0.01 && fabs((double)agree_node / n - 0.82) < 0.01,
          "mask agreement across steps %f, nodes %f (want 0.82)", (double)agree_step / n,
          (double)agree_node / n);
    /* p = 0 is the identity; p = 1 drops everything */
    cpu_dropout_fwd(y2, x, n, 0.0f, 7, 100, purpose, 0);
    CHECK(memcmp(y2, x, sizeof(float) * (size_t)n) == 0, "p=0 is not the identity");
    cpu_dropout_fwd(y2, x, n, 1.0f, 7, 100, purpose, 0);
    int64_t nonzero = 0;
    for (int64_t i = 0; i < n; i++) nonzero += y2[i] != 0.0f;
    CHECK(nonzero == 0, "p=1 kept %lld values", (long long)nonzero);
    /* a high rate, checked the same way */
    cpu_dropout_fwd(y2, x, n, 0.75f, 8, 0, SG_RNG_DROPOUT_BASE, 0);
    kept = 0;
    for (int64_t i = 0; i < n; i++) kept += y2[i] != 0.0f;
    CHECK(fabs((double)kept / n - 0.25) < 0.003, "p=0.75 keep rate %f", (double)kept / n);
    free(x);
    free(dy);
    free(y);
    free(y2);
    free(dx);
}

/* The global-index keying: the whole batch of B samples drawn at once, against R = 1, 2, 4
 * ranks each drawing its B/R samples at offset r*B/R (the elements of a sample-major tensor at
 * offset r*numel/R) and placed side by side. Every random draw of a training step must pass
 * this for a 2-rank run to see the numbers a 1-rank run sees. */
static void test_rank_slices(void) {
    enum { ND = 11, H0 = 3, W0 = 3, C = 2, H = 4, W = 4, B = 8, PER = H * W * C };
    uint8_t data[ND * H0 * W0 * C];
    uint64_t s = 0x5eedull;
    for (int i = 0; i < ND * H0 * W0 * C; i++) data[i] = (uint8_t)(sg_test_next(&s) & 255);
    float whole[B * PER], parts[B * PER], x[B * PER];
    int32_t t_whole[B], t_parts[B];
    sg_test_fill(x, B * PER, &s, 0.5f, 2.0f);
    const uint64_t seed = 4242;
    const uint32_t purpose = SG_RNG_DROPOUT_BASE + 5;
    for (int R = 1; R <= 4; R *= 2) {
        const int n = B / R;
        for (int64_t step = 0; step < 3; step++) {
            const char *what[4] = {"gather", "timesteps", "noise", "dropout"};
            for (int k = 0; k < 4; k++) {
                poison(whole, B * PER);
                poison(parts, B * PER);
                for (int r = -1; r < R; r++) { /* r = -1: the whole batch in one call */
                    int64_t s0 = r < 0 ? 0 : (int64_t)r * n, cnt = r < 0 ? B : n;
                    float *o = (r < 0 ? whole : parts) + s0 * PER;
                    int32_t *ot = (r < 0 ? t_whole : t_parts) + s0;
                    if (k == 0)
                        cpu_gather_batch(o, data, ND, H0, W0, C, (int)cnt, H, W, seed, step, 1, B,
                                         s0);
                    else if (k == 1)
                        cpu_sample_timesteps(ot, (int)cnt, 1000, seed, step, (uint64_t)s0);
                    else if (k == 2)
                        cpu_gaussian(o, cnt * PER, seed, step, SG_RNG_NOISE, (uint64_t)(s0 * PER));
                    else
                        cpu_dropout_fwd(o, x + s0 * PER, cnt * PER, 0.3f, seed, step, purpose,
                                        (uint64_t)(s0 * PER));
                }
                int same = k == 1 ? !memcmp(t_whole, t_parts, sizeof t_whole)
                                  : !memcmp(whole, parts, sizeof whole);
                CHECK(same, "%s: %d ranks x %d samples differ from 1 x %d at step %lld", what[k], R,
                      n, B, (long long)step);
            }
        }
    }
}

int main(void) {
    test_rank_slices();
    test_gather_layout();
    test_gather_channels_and_crop();
    test_gather_epoch_coverage();
    test_timesteps();
    test_gather_labels();
    test_gaussian();
    test_noise_offset();
    test_noise_perturb();
    test_dropout();
    return sg_test_end();
}
