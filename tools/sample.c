/* sample — draw images from a checkpoint with DDPM ancestral or DDIM sampling, to a PNG grid.
 *
 *   build/sample --ckpt run/ckpt_00100000.sgck [--n 64] [--ddim-steps 50] [--out samples.png]
 *
 * A thin program over graph/ (executor, sampler), checkpoints/ (the metadata carries the model
 * config, so no model flags are repeated) and data/ (the PNG grid). The EMA weights are used
 * unless --no-ema. The math and the random-number keying are documented in graph/sampler.h.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "checkpoints/ckpt.h"
#include "checkpoints/ckpt_json.h"
#include "data/image_io.h"
#include "graph/exec.h"
#include "graph/sampler.h"
#include "graph/weights.h"

#define DEFAULT_BATCH 16

static void usage(FILE *f) {
    fprintf(f,
            "usage: sample --ckpt PATH | --weights PATH [options]\n"
            "Draw images from a stepgraph checkpoint and write them as one PNG grid.\n"
            "The model configuration (architecture, T, betas) is read from the checkpoint.\n\n"
            "  --ckpt PATH          checkpoint (.sgck) written by train\n"
            "  --weights PATH       instead: a diffusers UNet2DModel folder (config.json +\n"
            "                       diffusion_pytorch_model.safetensors; T and betas from its\n"
            "                       scheduler_config.json), a checkpoint, or a .safetensors\n"
            "                       file with diffusers names together with --model NAME\n"
            "  --model NAME         the preset a bare .safetensors --weights file is for\n"
            "  --n N                images to draw (default 64)\n"
            "  --seed S             sampler seed, an unsigned integer (default 0); the same\n"
            "                       seed, checkpoint and backend give the same bits\n"
            "  --ddim-steps N       DDIM (eta = 0) with N steps in 1..T (trailing spacing,\n"
            "                       first step T-1); without it (or 0): DDPM ancestral\n"
            "                       sampling over all T steps\n"
            "  --clip / --no-clip   clamp the predicted x0 to [-1, 1] at every step (default:\n"
            "                       on for DDPM, off for DDIM)\n"
            "  --out PATH           output PNG (default samples.png)\n"
            "  --backend B          cpu | cuda (default: cuda when a GPU is usable, else cpu)\n"
            "  --batch B            images per forward pass (default %d; at most --n)\n"
            "  --precision P        fp32 | bf16 activations (default: the checkpoint's)\n"
            "  --no-ema             use the raw parameters instead of the EMA weights\n"
            "  --cols C             images per grid row (default: about square)\n"
            "  --scale S            upscale each pixel to an SxS block, 1..64 (default 1)\n"
            "  --help               this text\n\n"
            "Progress (step, images done, ETA) goes to stderr; the summary to stdout.\n"
            "Exit status: 0 ok, 1 failure (checkpoint, backend, non-finite samples), 2 usage.\n",
            DEFAULT_BATCH);
}

static int parse_int(const char *v, long lo, long hi, int *out) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (!*v || *end || errno || x < lo || x > hi) return -1;
    *out = (int)x;
    return 0;
}

static int parse_u64(const char *v, uint64_t *out) {
    char *end;
    errno = 0;
    if (!*v || *v == '-' || *v == '+') return -1;
    unsigned long long x = strtoull(v, &end, 10);
    if (*end || errno) return -1;
    *out = (uint64_t)x;
    return 0;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- the model config and the weights' source: --ckpt, or --weights (a stepgraph
 * checkpoint, a diffusers folder, or a safetensors file with --model) */
static int sample_config(const char *weights, const char *model, sg_model_cfg *cfg) {
    if (model && weights && strstr(weights, ".safetensors")) {
        if (sg_model_preset(cfg, model)) return SG_ERR;
        cfg->data_n = 1, cfg->data_h = cfg->img, cfg->data_w = cfg->img;
        return SG_OK;
    }
    if (model) return sg_set_error("--model is only for a bare .safetensors --weights file");
    if (strstr(weights, ".safetensors"))
        return sg_set_error("a bare safetensors file carries no model config: add --model NAME "
                            "(or give its diffusers folder)");
    char json[8192];
    if (sg_weights_config(weights, json, sizeof json)) return SG_ERR;
    return sg_model_cfg_from_json(json, cfg);
}

/* ---- progress on stderr: one line rewritten in place on a terminal; elsewhere one line
 * per finished batch so logs stay short */
typedef struct {
    double t0, last;
    int tty, batches, batch_size;
    const char *what;
} progress_state;

static void fmt_time(double s, char *buf, size_t cap) {
    if (!isfinite(s) || s < 0) s = 0;
    long v = (long)(s + 0.5);
    if (v >= 3600)
        snprintf(buf, cap, "%ld:%02ld:%02ld", v / 3600, v / 60 % 60, v % 60);
    else
        snprintf(buf, cap, "%ld:%02ld", v / 60, v % 60);
}

static void on_progress(void *ctx, int images_done, int batch_images, int n_images, int step,
                        int n_steps, int t) {
    progress_state *ps = ctx;
    double now = now_s();
    int batch_end = step == n_steps;
    if (ps->tty ? (!batch_end && now - ps->last < 0.1) : !batch_end) return;
    ps->last = now;
    int batch_index = images_done / ps->batch_size;
    double done = (double)batch_index * n_steps + step, total = (double)ps->batches * n_steps;
    double el = now - ps->t0, eta = el / done * (total - done);
    char e1[32], e2[32];
    fmt_time(el, e1, sizeof e1);
    fmt_time(eta, e2, sizeof e2);
    fprintf(stderr,
            "%ssample: %s step %d/%d (t=%d) | images %d/%d | %.1f steps/s | elapsed %s | "
            "ETA %s%s",
            ps->tty ? "\r" : "", ps->what, step, n_steps, t,
            images_done + (batch_end ? batch_images : 0), n_images, done / (el > 0 ? el : 1e-9), e1,
            e2, ps->tty ? "\033[K" : "\n");
    fflush(stderr);
}

/* is the directory that will hold path writable? (checked before sampling, not after) */
static int out_dir_writable(const char *path) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash) return access(".", W_OK | X_OK) == 0;
    if (slash == dir)
        slash[1] = 0;
    else
        *slash = 0;
    return access(dir, W_OK | X_OK) == 0;
}

int main(int argc, char **argv) {
    const char *ckpt_path = NULL, *out_path = "samples.png", *backend_name = NULL,
               *precision = NULL, *weights = NULL, *model = NULL;
    int n = 64, ddim_steps = 0, batch = 0, cols = 0, scale = 1, ema = 1, clip = -1;
    uint64_t seed = 0;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "--help") || !strcmp(f, "-h")) return usage(stdout), 0;
        if (!strcmp(f, "--no-ema")) {
            ema = 0;
            continue;
        }
        if (!strcmp(f, "--clip") || !strcmp(f, "--no-clip")) {
            clip = !strcmp(f, "--clip");
            continue;
        }
        int takes_value =
            !strcmp(f, "--ckpt") || !strcmp(f, "--weights") || !strcmp(f, "--model") ||
            !strcmp(f, "--n") || !strcmp(f, "--seed") || !strcmp(f, "--ddim-steps") ||
            !strcmp(f, "--out") || !strcmp(f, "--backend") || !strcmp(f, "--batch") ||
            !strcmp(f, "--cols") || !strcmp(f, "--scale") || !strcmp(f, "--precision");
        if (!takes_value) {
            fprintf(stderr, "sample: unknown flag '%s' (see sample --help)\n", f);
            return 2;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "sample: %s needs a value (see sample --help)\n", f);
            return 2;
        }
        const char *v = argv[++i];
        int bad = 0;
        if (!strcmp(f, "--ckpt"))
            ckpt_path = v;
        else if (!strcmp(f, "--weights"))
            weights = v;
        else if (!strcmp(f, "--model"))
            model = v;
        else if (!strcmp(f, "--out"))
            out_path = v, bad = !*v;
        else if (!strcmp(f, "--backend"))
            backend_name = v, bad = strcmp(v, "cpu") && strcmp(v, "cuda");
        else if (!strcmp(f, "--precision"))
            precision = v, bad = strcmp(v, "fp32") && strcmp(v, "bf16");
        else if (!strcmp(f, "--n"))
            bad = parse_int(v, 1, 1 << 20, &n);
        else if (!strcmp(f, "--seed"))
            bad = parse_u64(v, &seed);
        else if (!strcmp(f, "--ddim-steps"))
            bad = parse_int(v, 0, 1 << 20, &ddim_steps);
        else if (!strcmp(f, "--batch"))
            bad = parse_int(v, 1, 1 << 16, &batch);
        else if (!strcmp(f, "--cols"))
            bad = parse_int(v, 1, 1 << 16, &cols);
        else if (!strcmp(f, "--scale"))
            bad = parse_int(v, 1, 64, &scale);
        if (bad) {
            const char *want = !strcmp(f, "--backend")      ? "cpu or cuda"
                               : !strcmp(f, "--precision")  ? "fp32 or bf16"
                               : !strcmp(f, "--out")        ? "a path"
                               : !strcmp(f, "--seed")       ? "an unsigned 64-bit integer"
                               : !strcmp(f, "--scale")      ? "an integer in [1, 64]"
                               : !strcmp(f, "--ddim-steps") ? "a step count (0: DDPM)"
                                                            : "a positive integer";
            fprintf(stderr, "sample: %s expects %s, got '%s'\n", f, want, v);
            return 2;
        }
    }
    if (!ckpt_path == !weights) {
        fprintf(stderr, "sample: one of --ckpt PATH, --weights PATH is required (see sample "
                        "--help)\n");
        return 2;
    }
    if (!weights) weights = ckpt_path;

    /* the configuration, from the checkpoint (or folder) itself */
    sg_model_cfg cfg;
    if (sample_config(weights, model, &cfg)) {
        fprintf(stderr, "sample: %s: %s\n", weights, sg_last_error());
        return 1;
    }
    if (precision) cfg.act_dt = strcmp(precision, "bf16") ? DT_F32 : DT_BF16;
    if (ddim_steps > cfg.T) {
        fprintf(stderr, "sample: --ddim-steps %d exceeds the checkpoint's T = %d\n", ddim_steps,
                cfg.T);
        return 2;
    }
    if (cfg.in_ch != 1 && cfg.in_ch != 3) {
        fprintf(stderr, "sample: a PNG grid needs 1 or 3 channels; the model has %d\n", cfg.in_ch);
        return 1;
    }
    int eff_cols = cols > 0 ? (cols < n ? cols : n) : (int)ceil(sqrt((double)n));
    int64_t tile = (int64_t)cfg.img * scale + 1;
    int64_t gw = eff_cols * tile + 1, gh = (int64_t)((n + eff_cols - 1) / eff_cols) * tile + 1;
    if (gw > 65535 || gh > 65535) {
        fprintf(stderr,
                "sample: a %lldx%lld grid is larger than PNG allows here (65535); use "
                "fewer images, a smaller --scale or other --cols\n",
                (long long)gw, (long long)gh);
        return 2;
    }
    if (!out_dir_writable(out_path)) {
        fprintf(stderr, "sample: cannot write %s: its directory is missing or not writable\n",
                out_path);
        return 1;
    }
    if (!batch) batch = DEFAULT_BATCH;
    cfg.batch = batch < n ? batch : n;

    /* the backend */
    int use_cuda = 0;
#ifdef SG_HAVE_CUDA
    use_cuda = backend_name ? !strcmp(backend_name, "cuda") : sg_cuda_available();
#else
    if (backend_name && !strcmp(backend_name, "cuda")) {
        fprintf(stderr, "sample: this build has no CUDA backend (built without nvcc or with "
                        "SG_NO_CUDA); use --backend cpu\n");
        return 1;
    }
#endif
    sg_backend *be = NULL;
#ifdef SG_HAVE_CUDA
    if (use_cuda) be = sg_backend_cuda_create(0, 0);
#endif
    if (!use_cuda) be = sg_backend_cpu_create();
    if (!be) {
        fprintf(stderr, "sample: %s backend: %s\n", use_cuda ? "cuda" : "cpu", sg_last_error());
        return 1;
    }

    sg_exec e;
    if (sg_exec_init(&e, &cfg, 0, be)) {
        fprintf(stderr, "sample: %s: %s\n", weights, sg_last_error());
        sg_exec_free(&e);
        return 1;
    }
    if (sg_exec_load_weights(&e, weights, ema ? SG_WEIGHTS_FROM_EMA : 0)) {
        fprintf(stderr, "sample: %s\n", sg_last_error());
        sg_exec_free(&e);
        return 1;
    }
    int64_t per = (int64_t)cfg.img * cfg.img * cfg.in_ch;
    float *out = malloc((size_t)(n * per) * sizeof(float));
    if (!out) {
        fprintf(stderr, "sample: out of host memory for %d images\n", n);
        sg_exec_free(&e);
        return 1;
    }
    char what[64];
    if (ddim_steps)
        snprintf(what, sizeof what, "DDIM %d", ddim_steps);
    else
        snprintf(what, sizeof what, "DDPM %d", cfg.T);
    progress_state ps = {.t0 = now_s(),
                         .tty = isatty(2),
                         .batches = (n + cfg.batch - 1) / cfg.batch,
                         .batch_size = cfg.batch,
                         .what = what};
    sg_sample_opts opts = {
        .ddim_steps = ddim_steps, .clip = clip, .progress = on_progress, .progress_ctx = &ps};
    int rc = sg_sample_ex(&e, n, seed, &opts, out);
    if (ps.tty) fputc('\n', stderr);
    double secs = now_s() - ps.t0;
    sg_exec_free(&e);
    if (rc) {
        fprintf(stderr, "sample: %s\n", sg_last_error());
        free(out);
        return 1;
    }
    int64_t bad = 0;
    for (int64_t i = 0; i < n * per; i++) bad += !isfinite(out[i]);
    if (img_write_grid_png(out_path, out, n, cfg.img, cfg.img, cfg.in_ch, cols, scale)) {
        fprintf(stderr, "sample: %s\n", sg_last_error());
        free(out);
        return 1;
    }
    free(out);
    if (bad) {
        fprintf(stderr,
                "sample: %lld of %lld sample values are NaN or Inf (the weights in %s are "
                "broken?); wrote %s anyway\n",
                (long long)bad, (long long)(n * per), weights, out_path);
        return 1;
    }
    printf("sample: wrote %s: %d images (%s, %s weights, seed %llu, %s backend) in %.1f s\n",
           out_path, n, what, ema ? "EMA" : "raw", (unsigned long long)seed,
           use_cuda ? "cuda" : "cpu", secs);
    return 0;
}
