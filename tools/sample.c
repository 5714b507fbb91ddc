/* sample — draw images from a checkpoint with DDPM ancestral or DDIM sampling, to a PNG grid.
 *
 *   build/sample --ckpt run/ckpt_00100000.sgck [--n 64] [--ddim-steps 50] [--out samples.png]
 *
 * A thin program over graph/ (executor, sampler), checkpoints/ (the metadata carries the model
 * config, so no model flags are repeated) and data/ (the PNG grid). The EMA weights are used
 * unless --no-ema. The math and the random-number keying are documented in graph/sampler.h.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoints/ckpt.h"
#include "checkpoints/ckpt_json.h"
#include "data/image_io.h"
#include "graph/exec.h"
#include "graph/sampler.h"
#include "graph/weights.h"
#include "tools/cli.h"

#define DEFAULT_BATCH 16

static void usage(FILE *f) {
    fprintf(f,
            "usage: sample [--ckpt] PATH | --weights PATH [options]\n"
            "Draw images from a stepgraph checkpoint and write them as one PNG grid.\n"
            "The model configuration (architecture, T, betas) is read from the checkpoint.\n\n"
            "  --ckpt PATH          checkpoint (.sgck) written by train, or the run folder it\n"
            "                       writes them to (train --out: the checkpoint its `latest`\n"
            "                       names, else its newest); a bare PATH is --ckpt PATH\n"
            "  --weights PATH       instead: a diffusers UNet2DModel folder (config.json +\n"
            "                       diffusion_pytorch_model.safetensors; T and betas from its\n"
            "                       scheduler_config.json), a checkpoint or run folder, or a\n"
            "                       .safetensors file with diffusers names together with\n"
            "                       --model NAME\n"
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
            "  --no-ema             a checkpoint's raw parameters instead of its EMA weights\n"
            "  --cols C             images per grid row (default: about square)\n"
            "  --scale S            upscale each pixel to an SxS block, 1..64 (default 1)\n"
            "  --help               this text\n\n"
            "Progress (step, images done, ETA) goes to stderr; the summary to stdout.\n"
            "Exit status: 0 ok, 1 failure (checkpoint, backend, non-finite samples), 2 usage.\n",
            DEFAULT_BATCH);
}

static double now_s(void) {
    return cli_now_ms() / 1e3;
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

typedef struct {
    const char *ckpt_path, *weights, *model, *out_path, *backend, *precision;
    int n, ddim_steps, batch, cols, scale, ema, clip;
    uint64_t seed;
} sample_args;

/* 0 parsed, 1 --help printed, 2 usage error (printed) */
static int parse_args(int argc, char **argv, sample_args *a) {
    cli_args c;
    cli_args_init(&c, "sample", argc, argv);
    c.positional = "--ckpt"; /* sample PATH */
    while (cli_next(&c)) {
        int bad = 0;
        if (cli_is(&c, "--help"))
            return usage(stdout), 1;
        else if (cli_is(&c, "--no-ema"))
            a->ema = 0;
        else if (cli_is(&c, "--clip") || cli_is(&c, "--no-clip"))
            a->clip = cli_is(&c, "--clip");
        else if (cli_is(&c, "--ckpt"))
            bad = !(a->ckpt_path = cli_value(&c));
        else if (cli_is(&c, "--weights"))
            bad = !(a->weights = cli_value(&c));
        else if (cli_is(&c, "--model"))
            bad = !(a->model = cli_value(&c));
        else if (cli_is(&c, "--out"))
            bad = !(a->out_path = cli_value(&c)) ||
                  (!*a->out_path && fprintf(stderr, "sample: --out expects a path\n"));
        else if (cli_is(&c, "--backend"))
            bad = !(a->backend = cli_value(&c)) || cli_check_backend("sample", a->backend);
        else if (cli_is(&c, "--precision"))
            bad = !(a->precision = cli_value(&c)) ||
                  (strcmp(a->precision, "fp32") && strcmp(a->precision, "bf16") &&
                   fprintf(stderr, "sample: --precision expects fp32 or bf16, got '%s'\n",
                           a->precision));
        else if (cli_is(&c, "--n"))
            bad = cli_int(&c, 1, 1 << 20, &a->n);
        else if (cli_is(&c, "--seed"))
            bad = cli_u64(&c, &a->seed);
        else if (cli_is(&c, "--ddim-steps"))
            bad = cli_int(&c, 0, 1 << 20, &a->ddim_steps);
        else if (cli_is(&c, "--batch"))
            bad = cli_int(&c, 1, 1 << 16, &a->batch);
        else if (cli_is(&c, "--cols"))
            bad = cli_int(&c, 1, 1 << 16, &a->cols);
        else if (cli_is(&c, "--scale"))
            bad = cli_int(&c, 1, 64, &a->scale);
        else
            return cli_unknown(&c);
        if (bad) return 2;
    }
    if (a->ckpt_path && a->weights) {
        fprintf(stderr, "sample: --ckpt PATH and --weights PATH exclude each other: give one of "
                        "them, not both\n");
        return 2;
    }
    if (!a->ckpt_path && !a->weights) {
        fprintf(stderr, "sample: one of --ckpt PATH, --weights PATH is required (see sample "
                        "--help)\n");
        return 2;
    }
    if (!a->weights) a->weights = a->ckpt_path;
    return 0;
}

/* What the checkpoint and the flags allow, checked before any sampling: 0, or the exit code
 * (the message printed). */
static int check_request(const sample_args *a, sg_model_cfg *cfg) {
    if (a->precision) cfg->act_dt = strcmp(a->precision, "bf16") ? DT_F32 : DT_BF16;
    if (a->ddim_steps > cfg->T) {
        fprintf(stderr, "sample: --ddim-steps %d exceeds the checkpoint's T = %d\n", a->ddim_steps,
                cfg->T);
        return 2;
    }
    if (cfg->in_ch != 1 && cfg->in_ch != 3) {
        fprintf(stderr, "sample: a PNG grid needs 1 or 3 channels; the model has %d\n", cfg->in_ch);
        return 1;
    }
    int n = a->n, eff_cols = a->cols > 0 ? (a->cols < n ? a->cols : n) : (int)ceil(sqrt(n));
    int64_t tile = (int64_t)cfg->img * a->scale + 1;
    int64_t gw = eff_cols * tile + 1, gh = (int64_t)((n + eff_cols - 1) / eff_cols) * tile + 1;
    if (gw > 65535 || gh > 65535) {
        fprintf(stderr,
                "sample: a %lldx%lld grid is larger than PNG allows here (65535); use "
                "fewer images, a smaller --scale or other --cols\n",
                (long long)gw, (long long)gh);
        return 2;
    }
    /* the grid's file: before sampling, not after (sg_probe_writable) */
    if (sg_probe_writable(a->out_path)) {
        fprintf(stderr, "sample: cannot write --out %s: %s\n", a->out_path, sg_last_error());
        return 1;
    }
    int batch = a->batch ? a->batch : DEFAULT_BATCH;
    cfg->batch = batch < n ? batch : n;
    return 0;
}

static sg_backend *make_backend(const char *name, int *use_cuda) {
    *use_cuda = !strcmp(cli_backend_name(name), "cuda");
    /* CUDA: the denoising step (forward pass and update) captured once and replayed */
    return *use_cuda ? sg_backend_cuda_create(0, 1) : sg_backend_cpu_create();
}

/* Sample into a grid; 0 or the exit code (the message printed). */
static int draw(const sample_args *a, const sg_model_cfg *cfg, sg_exec *e, int use_cuda) {
    int n = a->n;
    int64_t per = (int64_t)cfg->img * cfg->img * cfg->in_ch;
    float *out = malloc((size_t)(n * per) * sizeof(float));
    if (!out) return fprintf(stderr, "sample: out of host memory for %d images\n", n), 1;
    char what[64];
    if (a->ddim_steps)
        snprintf(what, sizeof what, "DDIM %d", a->ddim_steps);
    else
        snprintf(what, sizeof what, "DDPM %d", cfg->T);
    progress_state ps = {.t0 = now_s(),
                         .tty = isatty(2),
                         .batches = (n + cfg->batch - 1) / cfg->batch,
                         .batch_size = cfg->batch,
                         .what = what};
    sg_sample_opts opts = {
        .ddim_steps = a->ddim_steps, .clip = a->clip, .progress = on_progress, .progress_ctx = &ps};
    int rc = sg_sample_ex(e, n, a->seed, &opts, out);
    if (ps.tty) fputc('\n', stderr);
    double secs = now_s() - ps.t0;
    if (!rc)
        rc = img_write_grid_png(a->out_path, out, n, cfg->img, cfg->img, cfg->in_ch, a->cols,
                                a->scale);
    int64_t bad = 0;
    for (int64_t i = 0; i < n * per && !rc; i++) bad += !isfinite(out[i]);
    free(out);
    if (rc) return cli_fail("sample", 1);
    if (bad) {
        fprintf(stderr,
                "sample: %lld of %lld sample values are NaN or Inf (the weights in %s are "
                "broken?); wrote %s anyway\n",
                (long long)bad, (long long)(n * per), a->weights, a->out_path);
        return 1;
    }
    /* a checkpoint's EMA or raw weights; another source's weights as they are */
    const char *kind = !sg_weights_has_ema(a->weights) ? "" : a->ema ? "EMA " : "raw ";
    printf("sample: wrote %s: %d images (%s, %sweights from %s, seed %llu, %s backend) in %.1f s\n",
           a->out_path, n, what, kind, a->weights, (unsigned long long)a->seed,
           use_cuda ? "cuda" : "cpu", secs);
    return 0;
}

/* A failure to read the weights from path: the library's message names the file itself
 * most of the time; name it once. Returns 1. */
static int weights_failed(const char *path) {
    if (strstr(sg_last_error(), path))
        fprintf(stderr, "sample: %s\n", sg_last_error());
    else
        fprintf(stderr, "sample: %s: %s\n", path, sg_last_error());
    return 1;
}

int main(int argc, char **argv) {
    sample_args a = {.out_path = "samples.png", .n = 64, .scale = 1, .ema = 1, .clip = -1};
    int rc = parse_args(argc, argv, &a);
    if (rc) return rc == 1 ? 0 : rc;
    /* a training run's folder stands for its checkpoint, named from here on */
    char ck[4200];
    a.weights = sg_weights_path(a.weights, ck, sizeof ck);
    if (cli_is_run_config(a.weights)) {
        fprintf(stderr, "sample: %s is a training run's folder with no checkpoint yet\n",
                a.weights);
        return 1;
    }
    sg_model_cfg cfg;
    if (sample_config(a.weights, a.model, &cfg)) return weights_failed(a.weights);
    if (!a.ema && !sg_weights_has_ema(a.weights)) {
        fprintf(stderr,
                "sample: --no-ema: %s holds one set of weights (only a stepgraph checkpoint keeps "
                "its EMA apart): drop --no-ema\n",
                a.weights);
        return 2;
    }
    if ((rc = check_request(&a, &cfg))) return rc;
    int use_cuda;
    sg_backend *be = make_backend(a.backend, &use_cuda);
    if (!be) return cli_fail("sample", 1);
    sg_exec e;
    if (sg_exec_init(&e, &cfg, 0, be) ||
        sg_exec_load_weights(&e, a.weights, a.ema ? SG_WEIGHTS_FROM_EMA : 0)) {
        sg_exec_free(&e);
        return weights_failed(a.weights);
    }
    rc = draw(&a, &cfg, &e, use_cuda);
    sg_exec_free(&e);
    return rc;
}
