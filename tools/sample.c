/* sample — draw images from a checkpoint with DDPM ancestral or DDIM sampling, to a PNG grid,
 * one PNG per image (--out-dir) and/or one numpy .npz (--npz: the array FID tools read).
 *
 *   build/sample --ckpt run/ckpt_00100000.sgck [--n 64] [--ddim-steps 50] [--out samples.png]
 *   build/sample run --n 50000 --batch 256 --ddim-steps 100 --out-dir fid/ --npz fid.npz
 *
 * A thin program over graph/ (executor, sampler), checkpoints/ (the metadata carries the model
 * config, so no model flags are repeated; the atomic writer) and data/ (PNG, npz). The EMA
 * weights are used unless --no-ema. The math and the random-number keying are documented in
 * graph/sampler.h.
 *
 * --out-dir loses no work: each batch's images are written as it finishes (each file under a
 * hidden temporary name, then renamed), so a run stopped by Ctrl-C, a crash or a lost machine
 * continues where it was when the same command is given again. DIR/samples.json records what
 * made the images (the weights' content hash, seed, sampler, batch, backend, precision); a
 * continuation must match it (every image's noise is keyed by its number, so with the same
 * batch size and backend the images drawn later are the bits an unbroken run draws). A batch
 * counts as done when every one of its files decodes as an image of the right size: a file
 * damaged by a crash (no fsync per image: that would cost more than the sampling at small
 * images) is found there and its batch drawn again.
 */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoints/ckpt.h"
#include "checkpoints/ckpt_hash.h"
#include "checkpoints/ckpt_json.h"
#include "data/image_io.h"
#include "data/npz.h"
#include "graph/exec.h"
#include "graph/sampler.h"
#include "graph/weights.h"
#include "tools/cli.h"

#define DEFAULT_BATCH 16
/* --class all (image i is class i mod K) and none (the null class K) */
enum { CLASS_ALL = -1, CLASS_NONE = -2, CLASS_LIST = -3 };
enum { CLASS_LIST_MAX = 64 }; /* --class A,B,...: at most this many */
enum { DIR_MAX = 3800, MAX_DIR_IMAGES = 1000000, EXIT_SIGNAL = 130, TRAJ_ROWS = 8, TRAJ_COLS = 10 };
#define MANIFEST "samples.json"

static void usage(FILE *f) {
    fprintf(f,
            "usage: sample [--ckpt] PATH | --weights PATH [options]\n"
            "Draw images from a stepgraph checkpoint: a PNG grid, one PNG per image, an npz,\n"
            "a picture of the denoising.\n"
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
            "  --steps N            N steps of --solver (DDIM by default) in 1..T, at the\n"
            "                       timesteps --spacing says; without it (or 0): DDPM\n"
            "                       ancestral sampling over all T steps\n"
            "  --ddim-steps N       the same as --steps N\n"
            "  --solver S           the N steps' solver: ddim (the default) | dpm++2m\n"
            "                       (DPM-Solver++(2M), Lu et al. 2022; diffusers'\n"
            "                       DPMSolverMultistepScheduler: deterministic, its error\n"
            "                       falling as 1/N^2 where DDIM's falls as 1/N)\n"
            "  --spacing S          the N steps' timesteps (diffusers' timestep_spacing; Lin\n"
            "                       et al. 2024's Table 2): trailing (the default: first step\n"
            "                       T-1) | leading (DDIM: t = j floor(T/N) + offset, diffusers'\n"
            "                       default and DDIM's uniform: 4 of 1000 visit 750, 500,\n"
            "                       250, 0) | linspace (DDIM: rounded linspace(0, T-1, N));\n"
            "                       dpm++2m: N+1 points, the last dropped, as diffusers\n"
            "  --karras             dpm++2m's steps between Karras et al. 2022's sigmas\n"
            "                       (diffusers' use_karras_sigmas; instead of --spacing): the\n"
            "                       \"DPM++ 2M Karras\" sampler\n"
            "  --steps-offset K     leading spacing's offset (diffusers' steps_offset,\n"
            "                       default 0)\n"
            "  --variance V         DDPM's noise: small (sigma^2 = the posterior's beta~_t;\n"
            "                       diffusers' fixed_small; the default) | large (beta_t:\n"
            "                       fixed_large, the DDPM CIFAR-10 model's setting)\n"
            "  --eta E              DDIM's eta in [0, 1] (default 0: deterministic; 1: the\n"
            "                       DDPM posterior's variance at each step's gap)\n"
            "  --clip / --no-clip   clamp the predicted x0 to [-1, 1] at every step (default:\n"
            "                       on for DDPM, off for DDIM and dpm++2m)\n"
            "  --class C            a class-conditional model's (train --classes K) class:\n"
            "                       all (the default: image i is class i mod K, and the grid\n"
            "                       has K columns, one class each) | 0..K-1 | a comma list\n"
            "                       such as 3,5,7 (image i is its (i mod count)-th class, a\n"
            "                       column each) | none (the null class: the unconditional\n"
            "                       prediction)\n"
            "  --guidance W         classifier-free guidance (Ho & Salimans 2022; diffusers'\n"
            "                       guidance_scale): eps = eps_none + W (eps_class - eps_none),\n"
            "                       each step predicting every image twice (default 1: the\n"
            "                       class's prediction alone, one pass; 0: unconditional)\n"
            "  --guidance-rescale F guided (--guidance W, W != 1): Lin et al. 2024's rescale\n"
            "                       (diffusers' guidance_rescale), each image's guided\n"
            "                       prediction times F std(class) / std(guided) + 1 - F;\n"
            "                       F in [0, 1], 0.7 is theirs (default 0: none)\n"
            "  --out PATH           the PNG grid (default samples.png, unless --out-dir or\n"
            "                       --npz is given: then only where asked)\n"
            "  --out-dir DIR        also each image as DIR/NNNNNN.png (numbered from 000000),\n"
            "                       written as its batch finishes; stopped (Ctrl-C, a crash),\n"
            "                       the same command continues where it was, with the same\n"
            "                       bits (DIR/samples.json must match: weights, seed, sampler,\n"
            "                       batch, backend, precision; --n may grow); at most %d\n"
            "  --npz FILE           also all images as one numpy .npz: arr_0, uint8\n"
            "                       [N, H, W, C] (what FID evaluators such as ADM's read),\n"
            "                       written at the end\n"
            "  --trajectory FILE    also a picture of the denoising: for the first batch's\n"
            "                       first images (at most 8), x_t and the x_0 the model\n"
            "                       predicts, after 10 evenly spaced steps (first to last)\n"
            "  --backend B          cpu | cuda (default: cuda when a GPU is usable, else cpu)\n"
            "  --batch B            images per forward pass (default %d; at most --n, but\n"
            "                       with --out-dir as given)\n"
            "  --precision P        fp32 | bf16 activations (default: the checkpoint's)\n"
            "  --no-ema             a checkpoint's raw parameters instead of its EMA weights\n"
            "  --cols C             images per grid row (default: about square)\n"
            "  --scale S            upscale each pixel to an SxS block, 1..64 (default 1)\n"
            "  --help               this text\n\n"
            "Pixels: (x + 1) * 127.5 rounded, clamped to 0..255.\n"
            "Progress (step, images done, ETA) goes to stderr; the summary to stdout.\n"
            "Exit status: 0 ok, 1 failure (checkpoint, backend, non-finite samples), 2 usage,\n"
            "130 interrupted (SIGINT/SIGTERM: --out-dir keeps every finished batch).\n",
            MAX_DIR_IMAGES, DEFAULT_BATCH);
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
    int tty, batch, batches, runs; /* batch size, batches to run, batches run so far */
    int images;                    /* images there so far: found in --out-dir, and drawn */
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

static void on_progress(void *ctx, int first, int batch_images, int n_images, int step, int n_steps,
                        int t) {
    progress_state *ps = ctx;
    (void)first;
    double now = now_s();
    int batch_end = step == n_steps;
    if (ps->tty ? (!batch_end && now - ps->last < 0.1) : !batch_end) return;
    ps->last = now;
    double done = (double)ps->runs * n_steps + step, total = (double)ps->batches * n_steps;
    double el = now - ps->t0, eta = el / done * (total - done);
    char e1[32], e2[32];
    fmt_time(el, e1, sizeof e1);
    fmt_time(eta, e2, sizeof e2);
    fprintf(stderr,
            "%ssample: %s step %d/%d (t=%d) | images %d/%d | %.1f steps/s | elapsed %s | "
            "ETA %s%s",
            ps->tty ? "\r" : "", ps->what, step, n_steps, t,
            ps->images + (batch_end ? batch_images : 0), n_images, done / (el > 0 ? el : 1e-9), e1,
            e2, ps->tty ? "\033[K" : "\n");
    fflush(stderr);
}

typedef struct {
    const char *ckpt_path, *weights, *model, *out_path, *backend, *precision;
    const char *out_dir, *npz, *trajectory; /* NULL: not asked */
    int n, ddim_steps, batch, cols, scale, ema, clip;
    int solver, solver_set;         /* --solver (sg_solver), given */
    int karras;                     /* --karras: DPM-Solver++(2M) between Karras sigmas */
    int spacing, steps_offset;      /* --spacing (sg_spacing), --steps-offset */
    int spacing_set, var_set;       /* --spacing / --steps-offset, --variance given */
    int var_large;                  /* --variance large: DDPM's sigma^2 = beta_t */
    int cls;                        /* --class: CLASS_ALL, CLASS_NONE, CLASS_LIST or a class */
    int ncls, list[CLASS_LIST_MAX]; /* CLASS_LIST: image i is class list[i mod ncls] */
    float eta, guidance, rescale;
    uint64_t seed;
} sample_args;

/* 0 parsed, 1 --help printed, 2 usage error (printed) */
/* --class V: all, none, a class number, or a comma list of class numbers (two or more: image
 * i is the (i mod count)-th); 0 or 1 (the message printed) */
static int parse_class(const char *v, sample_args *a) {
    if (!strcmp(v, "all") || !strcmp(v, "none")) {
        a->cls = !strcmp(v, "all") ? CLASS_ALL : CLASS_NONE;
        return 0;
    }
    int n = 0;
    for (const char *s = v;; s++) {
        char *end = NULL;
        const long x = *s >= '0' && *s <= '9' ? strtol(s, &end, 10) : -1;
        if (x < 0 || x > 65535 || n == CLASS_LIST_MAX || (*end && *end != ','))
            return fprintf(stderr,
                           "sample: --class expects all, none, a class number or a comma list "
                           "of at most %d, got '%s'\n",
                           CLASS_LIST_MAX, v),
                   1;
        a->list[n++] = (int)x;
        if (!*end) break;
        s = end;
    }
    a->ncls = n;
    a->cls = n == 1 ? a->list[0] : CLASS_LIST;
    return 0;
}

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
        else if (cli_is(&c, "--out-dir"))
            bad = !(a->out_dir = cli_value(&c)) ||
                  (!*a->out_dir && fprintf(stderr, "sample: --out-dir expects a directory\n"));
        else if (cli_is(&c, "--trajectory"))
            bad = !(a->trajectory = cli_value(&c)) ||
                  (!*a->trajectory && fprintf(stderr, "sample: --trajectory expects a path\n"));
        else if (cli_is(&c, "--npz"))
            bad = !(a->npz = cli_value(&c)) ||
                  (!*a->npz && fprintf(stderr, "sample: --npz expects a path\n"));
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
        else if (cli_is(&c, "--ddim-steps") || cli_is(&c, "--steps"))
            bad = cli_int(&c, 0, 1 << 20, &a->ddim_steps);
        else if (cli_is(&c, "--karras"))
            a->karras = 1;
        else if (cli_is(&c, "--solver")) {
            const char *v = cli_value(&c);
            a->solver_set = 1;
            bad =
                !v || ((a->solver = sg_solver_parse(v)) < 0 &&
                       fprintf(stderr, "sample: --solver expects ddim or dpm++2m, got '%s'\n", v));
        } else if (cli_is(&c, "--spacing")) {
            const char *v = cli_value(&c);
            a->spacing_set = 1;
            bad = !v || ((a->spacing = sg_spacing_parse(v)) < 0 &&
                         fprintf(stderr,
                                 "sample: --spacing expects trailing, leading or linspace, got "
                                 "'%s'\n",
                                 v));
        } else if (cli_is(&c, "--steps-offset"))
            bad = cli_int(&c, 0, 1 << 20, &a->steps_offset), a->spacing_set = 1;
        else if (cli_is(&c, "--eta"))
            bad = cli_float(&c, 0.0, 1.0, &a->eta);
        else if (cli_is(&c, "--guidance"))
            bad = cli_float(&c, 0.0, 1000.0, &a->guidance);
        else if (cli_is(&c, "--guidance-rescale"))
            bad = cli_float(&c, 0.0, 1.0, &a->rescale);
        else if (cli_is(&c, "--class")) {
            const char *v = cli_value(&c);
            bad = !v || parse_class(v, a);
        } else if (cli_is(&c, "--variance")) {
            const char *v = cli_value(&c);
            bad =
                !v || (strcmp(v, "small") && strcmp(v, "large") &&
                       fprintf(stderr, "sample: --variance expects small or large, got '%s'\n", v));
            if (!bad) a->var_large = !strcmp(v, "large"), a->var_set = 1;
        } else if (cli_is(&c, "--batch"))
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
    if (a->solver == SG_SOLVER_DPMPP_2M && !a->ddim_steps) {
        fprintf(stderr, "sample: --solver dpm++2m needs its number of steps: give --steps N (20 "
                        "is common)\n");
        return 2;
    }
    if (a->karras && (a->solver != SG_SOLVER_DPMPP_2M || a->spacing_set)) {
        fprintf(stderr, "sample: --karras places DPM-Solver++(2M)'s steps: give --solver dpm++2m, "
                        "and no --spacing or --steps-offset\n");
        return 2;
    }
    if (a->solver == SG_SOLVER_DPMPP_2M && a->eta > 0) {
        fprintf(stderr, "sample: --eta is DDIM's: DPM-Solver++(2M) is deterministic\n");
        return 2;
    }
    if (a->eta > 0 && !a->ddim_steps) {
        fprintf(stderr, "sample: --eta is DDIM's: give --ddim-steps N too (DDPM's variance is "
                        "fixed)\n");
        return 2;
    }
    if ((a->spacing != SG_SPACING_TRAILING || a->steps_offset) && !a->ddim_steps) {
        fprintf(stderr,
                "sample: --%s is for --steps N (DDIM, DPM-Solver++): give --steps N too "
                "(DDPM visits all T steps)\n",
                a->steps_offset ? "steps-offset" : "spacing");
        return 2;
    }
    if (a->steps_offset && a->spacing != SG_SPACING_LEADING) {
        fprintf(stderr, "sample: --steps-offset shifts leading spacing only: give --spacing "
                        "leading\n");
        return 2;
    }
    if (a->var_large && a->ddim_steps) {
        fprintf(stderr, "sample: --variance is DDPM's: DDIM's noise is --eta\n");
        return 2;
    }
    if (!a->weights) a->weights = a->ckpt_path;
    if (!a->out_path && !a->out_dir && !a->npz && !a->trajectory) a->out_path = "samples.png";
    if (a->out_dir && a->n > MAX_DIR_IMAGES) {
        fprintf(stderr, "sample: --out-dir holds at most %d images (six-digit names); got --n %d\n",
                MAX_DIR_IMAGES, a->n);
        return 2;
    }
    if (a->out_dir && strlen(a->out_dir) > DIR_MAX) {
        fprintf(stderr, "sample: --out-dir path too long\n");
        return 2;
    }
    return 0;
}

/* What the checkpoint and the flags allow, checked before any sampling: 0, or the exit code
 * (the message printed). */
static int check_request(const sample_args *a, sg_model_cfg *cfg) {
    if (a->precision) cfg->act_dt = strcmp(a->precision, "bf16") ? DT_F32 : DT_BF16;
    if (!cfg->classes && (a->cls != CLASS_ALL || a->guidance != 1.0f)) {
        fprintf(stderr,
                "sample: --%s is a class-conditional model's (train --classes K); %s is "
                "unconditional\n",
                a->guidance != 1.0f ? "guidance" : "class", a->weights);
        return 2;
    }
    for (int i = 0; i < (a->cls == CLASS_LIST ? a->ncls : 1); i++) {
        const int y = a->cls == CLASS_LIST ? a->list[i] : a->cls;
        if (y >= cfg->classes) {
            fprintf(stderr,
                    "sample: --class %d: the model has %d classes, 0..%d (none: the null "
                    "class)\n",
                    y, cfg->classes, cfg->classes - 1);
            return 2;
        }
    }
    cfg->guidance = a->guidance;
    if (a->rescale > 0.0f && (a->guidance == 1.0f)) {
        fprintf(stderr,
                "sample: --guidance-rescale %g rescales a guided prediction: give "
                "--guidance W (W != 1)\n",
                (double)a->rescale);
        return 2;
    }
    cfg->guidance_rescale = a->rescale;
    /* the null class a guided or unconditional draw reads was never trained */
    if (cfg->classes > 0 && cfg->class_dropout == 0.0f &&
        (a->guidance != 1.0f || a->cls == CLASS_NONE))
        fprintf(stderr,
                "sample: warning: %s was trained with --class-dropout 0: its null class (the "
                "unconditional prediction %s uses) never saw training\n",
                a->weights, a->cls == CLASS_NONE ? "--class none" : "--guidance");
    if (a->karras && cfg->zero_snr) {
        fprintf(stderr,
                "sample: --karras needs a finite largest sigma, and %s was trained at "
                "zero terminal SNR (abar 0 at T - 1): drop --karras\n",
                a->weights);
        return 2;
    }
    if (a->ddim_steps > cfg->T) {
        fprintf(stderr, "sample: --ddim-steps %d exceeds the checkpoint's T = %d\n", a->ddim_steps,
                cfg->T);
        return 2;
    }
    if (a->ddim_steps && !a->karras) { /* the spacing's timesteps fit the checkpoint's T */
        int *ts = malloc(sizeof(int) * (size_t)a->ddim_steps);
        const int bad = !ts || sg_solver_timesteps(a->solver, a->ddim_steps, cfg->T, a->spacing,
                                                   a->steps_offset, ts);
        free(ts);
        if (bad) return fprintf(stderr, "sample: %s\n", ts ? sg_last_error() : "out of memory"), 2;
    }
    if (cfg->in_ch != 1 && cfg->in_ch != 3 && (a->out_path || a->out_dir || a->trajectory)) {
        fprintf(stderr,
                "sample: a PNG needs 1 or 3 channels; the model has %d (--npz alone takes "
                "any)\n",
                cfg->in_ch);
        return 1;
    }
    int n = a->n, eff_cols = a->cols > 0 ? (a->cols < n ? a->cols : n) : (int)ceil(sqrt(n));
    int64_t tile = (int64_t)cfg->img * a->scale + 1;
    int64_t gw = eff_cols * tile + 1, gh = (int64_t)((n + eff_cols - 1) / eff_cols) * tile + 1;
    if (a->out_path && (gw > 65535 || gh > 65535)) {
        fprintf(stderr,
                "sample: a %lldx%lld grid is larger than PNG allows here (65535); use "
                "fewer images, a smaller --scale or other --cols%s\n",
                (long long)gw, (long long)gh,
                a->out_dir || a->npz ? ", or leave --out out" : ", or --out-dir / --npz");
        return 2;
    }
    /* the output files: before sampling, not after (sg_probe_writable) */
    if (a->out_path && sg_probe_writable(a->out_path)) {
        fprintf(stderr, "sample: cannot write --out %s: %s\n", a->out_path, sg_last_error());
        return 1;
    }
    if (a->npz && sg_probe_writable(a->npz)) {
        fprintf(stderr, "sample: cannot write --npz %s: %s\n", a->npz, sg_last_error());
        return 1;
    }
    if (a->trajectory && sg_probe_writable(a->trajectory)) {
        fprintf(stderr, "sample: cannot write --trajectory %s: %s\n", a->trajectory,
                sg_last_error());
        return 1;
    }
    /* the batch as asked with --out-dir, however few images: a later run that draws more
     * continues with the same batch size, so with the same bits */
    int batch = a->batch ? a->batch : DEFAULT_BATCH;
    cfg->batch = batch < n || a->out_dir ? batch : n;
    return 0;
}

static sg_backend *make_backend(const char *name, int *use_cuda) {
    *use_cuda = !strcmp(cli_backend_name(name), "cuda");
    /* CUDA: the denoising step (forward pass and update) captured once and replayed */
    return *use_cuda ? sg_backend_cuda_create(0, 1) : sg_backend_cpu_create();
}

/* ---- --out-dir: what made the images (DIR/samples.json), the images already there */

static volatile sig_atomic_t stop_requested;
static void on_signal(int sig) {
    (void)sig;
    stop_requested = 1;
}

/* The weights' identity: XXH64 over the model's config (architecture and schedule) and the
 * weights file's bytes (a diffusers folder's safetensors file). */
static int weights_digest(const char *path, const sg_model_cfg *cfg, uint64_t *out) {
    char js[8192], file[4200];
    if (sg_model_json(cfg, js, sizeof js) < 0) return sg_set_error("model config too long");
    ckpt_xxh64_state h;
    ckpt_xxh64_init(&h, 0);
    ckpt_xxh64_update(&h, js, strlen(js));
    struct stat st;
    snprintf(file, sizeof file, "%s", path);
    if (!stat(path, &st) && S_ISDIR(st.st_mode)) {
        snprintf(file, sizeof file, "%s/diffusion_pytorch_model.safetensors", path);
        if (stat(file, &st))
            snprintf(file, sizeof file, "%s/unet/diffusion_pytorch_model.safetensors", path);
    }
    FILE *f = fopen(file, "rb");
    uint8_t *buf = malloc(1 << 20);
    if (!f || !buf) {
        int e = errno;
        if (f) fclose(f);
        free(buf);
        return sg_set_error("%s: cannot read: %s", file, strerror(e));
    }
    size_t k;
    while ((k = fread(buf, 1, 1 << 20, f)) > 0) ckpt_xxh64_update(&h, buf, k);
    int err = ferror(f);
    fclose(f);
    free(buf);
    if (err) return sg_set_error("%s: read error", file);
    *out = ckpt_xxh64_digest(&h);
    return SG_OK;
}

/* The fields a continuation must match, in the order a difference is reported, then "n" and
 * the weights' path (which may change: the folder moved), both informational. */
/* clang-format off */
static const char *const manifest_keys[] = {
    "image", "weights_xxh64", "weights_used", "sampler", "steps", "spacing", "steps_offset",
    "karras", "eta", "variance", "clip", "class", "guidance", "guidance_rescale", "seed", "batch",
    "backend", "precision"};
/* clang-format on */

static json_t *manifest_json(const sample_args *a, const sg_model_cfg *cfg, uint64_t digest,
                             int use_cuda) {
    char hex[17], seed[24];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)digest);
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)a->seed);
    const int ddim = a->ddim_steps > 0, clip = a->clip < 0 ? !ddim : a->clip;
    const char *used = !sg_weights_has_ema(a->weights) ? "as stored" : a->ema ? "EMA" : "raw";
    json_t *j = json_object();
    json_object_set_new(j, "made_by", json_string("stepgraph sample"));
    json_object_set_new(j, "image", json_pack("[iii]", cfg->img, cfg->img, cfg->in_ch));
    json_object_set_new(j, "weights_xxh64", json_string(hex));
    json_object_set_new(j, "weights_used", json_string(used));
    json_object_set_new(j, "sampler",
                        json_string(!ddim                             ? "DDPM"
                                    : a->solver == SG_SOLVER_DPMPP_2M ? "DPM-Solver++(2M)"
                                                                      : "DDIM"));
    json_object_set_new(j, "steps", json_integer(ddim ? a->ddim_steps : cfg->T));
    /* only when not trailing: a folder from before --spacing reads as trailing */
    if (a->spacing != SG_SPACING_TRAILING)
        json_object_set_new(j, "spacing", json_string(sg_spacing_name(a->spacing)));
    if (a->steps_offset) json_object_set_new(j, "steps_offset", json_integer(a->steps_offset));
    if (a->karras) json_object_set_new(j, "karras", json_true());
    /* only when stochastic: a folder from before --eta reads as eta 0 */
    if (a->eta > 0) json_object_set_new(j, "eta", json_real(a->eta));
    /* only when not the default (beta~_t): a folder from before --variance reads as small */
    if (a->var_large) json_object_set_new(j, "variance", json_string("large"));
    json_object_set_new(j, "clip", json_boolean(clip));
    /* a class-conditional model's classes and guidance (an unconditional model's folder has
     * neither, as every folder from before them) */
    if (cfg->classes > 0) {
        json_t *list = json_array();
        for (int i = 0; a->cls == CLASS_LIST && i < a->ncls; i++)
            json_array_append_new(list, json_integer(a->list[i]));
        json_object_set_new(j, "class",
                            a->cls == CLASS_LIST   ? list
                            : a->cls == CLASS_ALL  ? json_string("all")
                            : a->cls == CLASS_NONE ? json_string("none")
                                                   : json_integer(a->cls));
        if (a->cls != CLASS_LIST) json_decref(list);
        json_object_set_new(j, "guidance", json_real(a->guidance));
        /* only when on: a folder from before it reads as none */
        if (a->rescale > 0) json_object_set_new(j, "guidance_rescale", json_real(a->rescale));
    }
    json_object_set_new(j, "seed", json_string(seed));
    json_object_set_new(j, "batch", json_integer(cfg->batch));
    json_object_set_new(j, "backend", json_string(use_cuda ? "cuda" : "cpu"));
    json_object_set_new(j, "precision", json_string(cfg->act_dt == DT_BF16 ? "bf16" : "fp32"));
    json_object_set_new(j, "n", json_integer(a->n));
    json_object_set_new(j, "weights", cli_json_text(a->weights));
    return j;
}

/* A run killed while writing an image leaves its hidden temporary file (image_path): gone once
 * the folder is known to be sample's, unless the process that named it still runs here (two
 * runs into one folder write the same bits, each under its own names). */
static void remove_stale_tmp(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *de;
    char path[DIR_MAX + 300];
    while (d && (de = readdir(d))) {
        const char *nm = de->d_name;
        if (nm[0] != '.' || strspn(nm + 1, "0123456789") != 6 || strncmp(nm + 7, ".png.tmp.", 9))
            continue;
        char *end;
        long pid = strtol(nm + 16, &end, 10);
        if (*end == 0 && pid > 0 && pid <= INT32_MAX &&
            (kill((pid_t)pid, 0) == 0 || errno == EPERM))
            continue; /* its writer is alive */
        snprintf(path, sizeof path, "%s/%s", dir, nm);
        remove(path);
    }
    if (d) closedir(d);
}

/* DIR made or checked: a new or empty directory gets samples.json; one that has it must match
 * it (the first difference is named); anything else is refused. 0, or the exit code (the
 * message printed). */
static int claim_out_dir(const char *dir, json_t *want) {
    char path[DIR_MAX + 64];
    snprintf(path, sizeof path, "%s/" MANIFEST, dir);
    struct stat st;
    if (!stat(dir, &st) && !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "sample: --out-dir %s is not a directory\n", dir);
        return 1;
    }
    if (cli_make_dirs(dir)) {
        fprintf(stderr, "sample: --out-dir: %s\n", sg_last_error());
        return 1;
    }
    if (!stat(path, &st)) {
        json_error_t jerr;
        json_t *have = json_load_file(path, 0, &jerr);
        const char *made = json_string_value(json_object_get(have, "made_by"));
        if (!made || strcmp(made, "stepgraph sample")) {
            fprintf(stderr, "sample: %s is not a samples.json that sample wrote (%s)\n", path,
                    have ? "no \"made_by\": \"stepgraph sample\"" : jerr.text);
            json_decref(have);
            return 1;
        }
        for (int i = 0; i < SG_ARRAY_LEN(manifest_keys); i++) {
            json_t *x = json_object_get(have, manifest_keys[i]);
            json_t *y = json_object_get(want, manifest_keys[i]);
            if ((!x && !y) || json_equal(x, y)) continue; /* absent in both: eta 0 */
            char *xs = x ? json_dumps(x, JSON_ENCODE_ANY) : NULL;
            char *ys = y ? json_dumps(y, JSON_ENCODE_ANY) : NULL;
            fprintf(stderr,
                    "sample: %s holds images made with %s %s (%s); this run's is %s: continue "
                    "with the same, or use another --out-dir\n",
                    dir, manifest_keys[i], xs ? xs : "(none)", path, ys ? ys : "(none)");
            free(xs), free(ys);
            json_decref(have);
            return 1;
        }
        json_decref(have);
        remove_stale_tmp(dir);
    } else {
        DIR *d = opendir(dir);
        struct dirent *de;
        int other = 0;
        while (d && (de = readdir(d))) other += de->d_name[0] != '.';
        if (d) closedir(d);
        if (other) {
            fprintf(stderr,
                    "sample: --out-dir %s holds other files and no " MANIFEST
                    ": give a new or empty directory\n",
                    dir);
            return 1;
        }
    }
    char *text = json_dumps(want, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    char *line = text ? realloc(text, strlen(text) + 2) : NULL;
    if (line) strcat(line, "\n"), text = line;
    int rc = line ? ckpt_write_file_atomic(path, text, (int64_t)strlen(text), NULL) : SG_ERR;
    free(text);
    if (rc) {
        fprintf(stderr, "sample: cannot write %s: %s\n", path, sg_last_error());
        return 1;
    }
    return 0;
}

/* ---- the images: each batch as it finishes */
typedef struct {
    const sample_args *a;
    int64_t per;   /* values per image */
    int img, ch;   /* image side, channels */
    uint8_t *u8;   /* every image, for the grid and the npz; NULL when neither is asked */
    uint8_t *one;  /* one image (--out-dir without them) */
    uint8_t *done; /* per batch: its images were in --out-dir already */
    /* --trajectory: the first TRAJ_ROWS images of the first batch after traj_cols of the steps
     * (traj_k), two grid rows an image (the state x_t, the predicted x0),
     * traj[(row * traj_cols + col) * per] */
    int traj_rows, traj_cols, traj_k[TRAJ_COLS];
    float *traj;
    int64_t bad; /* non-finite values among the images drawn */
    int found;   /* images found in --out-dir */
    progress_state *ps;
} sink;

static void image_path(const sink *k, int i, char *buf, size_t cap, int tmp) {
    if (tmp)
        snprintf(buf, cap, "%s/.%06d.png.tmp.%ld", k->a->out_dir, i, (long)getpid());
    else
        snprintf(buf, cap, "%s/%06d.png", k->a->out_dir, i);
}

/* Which batches --out-dir holds whole, each file decoding to an image of the right size (kept
 * in u8 when that is asked); a damaged file is named and its batch drawn again. */
static int scan_out_dir(sink *k, int n, int B) {
    char path[DIR_MAX + 64];
    for (int b0 = 0, b = 0; b0 < n; b0 += B, b++) {
        int nb = n - b0 < B ? n - b0 : B, ok = 1;
        for (int i = b0; i < b0 + nb && ok; i++) {
            image_path(k, i, path, sizeof path, 0);
            if (access(path, F_OK)) {
                ok = 0;
                break;
            }
            uint8_t *dst = k->u8 ? k->u8 + (int64_t)i * k->per : k->one;
            if (img_read_png(path, k->img, k->img, k->ch, dst)) {
                fprintf(stderr, "sample: %s: its batch is drawn again\n", sg_last_error());
                ok = 0;
            }
        }
        k->done[b] = (uint8_t)ok;
        k->found += ok ? nb : 0;
    }
    return SG_OK;
}

static int skip_batch(void *ctx, int first, int count) {
    const sink *k = ctx;
    (void)count;
    return k->done && k->done[first / k->ps->batch];
}

/* the trajectory's columns: evenly spaced steps from the first to the last (distinct: at most
 * n_steps of them) */
static void traj_columns(sink *k, int n_steps) {
    k->traj_cols = n_steps < TRAJ_COLS ? n_steps : TRAJ_COLS;
    for (int j = 0; j < k->traj_cols; j++)
        k->traj_k[j] =
            k->traj_cols > 1 ? (int)lround((double)j * (n_steps - 1) / (k->traj_cols - 1)) : 0;
}

static int traj_col(const sink *k, int step) {
    for (int j = 0; j < k->traj_cols; j++)
        if (k->traj_k[j] == step) return j;
    return -1;
}

static int snap_at(void *ctx, int first, int step, int n_steps) {
    (void)n_steps;
    const sink *k = ctx;
    return k->traj && first == 0 && traj_col(k, step) >= 0;
}

static int on_snap(void *ctx, int first, int count, int step, const float *x, const float *x0) {
    sink *k = ctx;
    (void)first, (void)count;
    const int j = traj_col(k, step);
    const size_t bytes = sizeof(float) * (size_t)k->per;
    for (int r = 0; r < k->traj_rows; r++) {
        memcpy(k->traj + ((int64_t)2 * r * k->traj_cols + j) * k->per, x + r * k->per, bytes);
        memcpy(k->traj + ((int64_t)(2 * r + 1) * k->traj_cols + j) * k->per, x0 + r * k->per,
               bytes);
    }
    return SG_OK;
}

static int on_batch(void *ctx, int first, int count, const float *x) {
    sink *k = ctx;
    char path[DIR_MAX + 64], tmp[DIR_MAX + 64];
    for (int i = 0; i < count; i++) {
        const float *src = x + (int64_t)i * k->per;
        for (int64_t v = 0; v < k->per; v++) k->bad += !isfinite(src[v]);
        uint8_t *dst = k->u8 ? k->u8 + (int64_t)(first + i) * k->per : k->one;
        img_f32_to_u8(src, k->per, dst);
        if (!k->a->out_dir) continue;
        image_path(k, first + i, path, sizeof path, 0);
        image_path(k, first + i, tmp, sizeof tmp, 1);
        if (img_write_png(tmp, dst, k->img, k->img, k->ch)) return SG_ERR;
        if (rename(tmp, path)) {
            int e = errno;
            remove(tmp);
            return sg_set_error("cannot rename %s to %s: %s", tmp, path, strerror(e));
        }
    }
    k->ps->runs++;
    k->ps->images += count;
    return SG_OK;
}

static int write_npz(const char *path, const uint8_t *x, int n, int img, int ch) {
    const int64_t shape[4] = {n, img, img, ch};
    npz_frame f;
    if (npz_u8_frame("arr_0", x, shape, 4, 0, &f)) return SG_ERR;
    const void *parts[3] = {f.head, x, f.tail};
    const int64_t sizes[3] = {(int64_t)f.head_n, (int64_t)n * img * img * ch, (int64_t)f.tail_n};
    return ckpt_write_parts_atomic(path, parts, sizes, 3, NULL);
}

/* Sample to the grid, --out-dir and --npz; 0 or the exit code (the message printed). */
static int draw(const sample_args *a, const sg_model_cfg *cfg, sg_exec *e, int use_cuda) {
    int n = a->n, B = cfg->batch;
    char what[512];
    if (a->ddim_steps && a->eta > 0)
        snprintf(what, sizeof what, "DDIM %d eta %g", a->ddim_steps, (double)a->eta);
    else if (a->ddim_steps)
        snprintf(what, sizeof what, "%s %d",
                 a->solver != SG_SOLVER_DPMPP_2M ? "DDIM"
                 : a->karras                     ? "DPM-Solver++(2M) Karras"
                                                 : "DPM-Solver++(2M)",
                 a->ddim_steps);
    else
        snprintf(what, sizeof what, "DDPM %d%s", cfg->T, a->var_large ? " large variance" : "");
    if (a->spacing != SG_SPACING_TRAILING)
        snprintf(what + strlen(what), sizeof what - strlen(what), " %s spacing",
                 sg_spacing_name(a->spacing));
    if (a->steps_offset)
        snprintf(what + strlen(what), sizeof what - strlen(what), ", steps offset %d",
                 a->steps_offset);
    if (cfg->classes > 0 && a->cls >= 0)
        snprintf(what + strlen(what), sizeof what - strlen(what), ", class %d", a->cls);
    if (cfg->classes > 0 && (a->cls == CLASS_ALL || a->cls == CLASS_NONE))
        snprintf(what + strlen(what), sizeof what - strlen(what), ", class %s",
                 a->cls == CLASS_ALL ? "i mod K" : "none");
    for (int i = 0; cfg->classes > 0 && a->cls == CLASS_LIST && i < a->ncls; i++)
        snprintf(what + strlen(what), sizeof what - strlen(what), "%s%d", i ? "," : ", classes ",
                 a->list[i]);
    if (cfg->guidance != 1.0f)
        snprintf(what + strlen(what), sizeof what - strlen(what), ", guidance %g",
                 (double)cfg->guidance);
    if (cfg->guidance_rescale > 0.0f)
        snprintf(what + strlen(what), sizeof what - strlen(what), " rescaled %g",
                 (double)cfg->guidance_rescale);
    progress_state ps = {.tty = isatty(2), .batch = B, .what = what};
    sink k = {.a = a,
              .per = (int64_t)cfg->img * cfg->img * cfg->in_ch,
              .img = cfg->img,
              .ch = cfg->in_ch,
              .ps = &ps};
    const int batches = (n + B - 1) / B;
    int32_t *labels = NULL; /* a class-conditional model's: each image's class */
    if (cfg->classes > 0 && (labels = malloc(sizeof(int32_t) * (size_t)n)))
        for (int i = 0; i < n; i++)
            labels[i] = a->cls == CLASS_ALL    ? i % cfg->classes
                        : a->cls == CLASS_NONE ? cfg->classes
                        : a->cls == CLASS_LIST ? a->list[i % a->ncls]
                                               : a->cls;
    if (cfg->classes > 0 && !labels) return fprintf(stderr, "sample: out of host memory\n"), 1;
    if (a->out_path || a->npz) k.u8 = malloc((size_t)(n * k.per));
    k.one = malloc((size_t)k.per);
    if (a->out_dir) k.done = calloc((size_t)batches, 1);
    if (a->trajectory) {
        k.traj_rows = n < B ? n : B;
        k.traj_rows = k.traj_rows < TRAJ_ROWS ? k.traj_rows : TRAJ_ROWS;
        traj_columns(&k, a->ddim_steps ? a->ddim_steps : cfg->T);
        k.traj = malloc(sizeof(float) * (size_t)(2 * k.traj_rows * k.traj_cols * k.per));
    }
    if ((!k.u8 && (a->out_path || a->npz)) || !k.one || (a->out_dir && !k.done) ||
        (a->trajectory && !k.traj)) {
        free(k.u8), free(k.one), free(k.done), free(k.traj), free(labels);
        return fprintf(stderr, "sample: out of host memory for %d images\n", n), 1;
    }
    if (a->out_dir) {
        scan_out_dir(&k, n, B);
        if (k.traj && k.done[0]) { /* the trajectory's batch runs again (the same bits) */
            k.done[0] = 0;
            k.found -= n < B ? n : B;
        }
        if (k.found)
            fprintf(stderr, "sample: %s holds %d of the %d images already: drawing the other %d\n",
                    a->out_dir, k.found, n, n - k.found);
    }
    ps.batches = batches;
    for (int b = 0; k.done && b < batches; b++) ps.batches -= k.done[b];
    ps.images = k.found;
    ps.t0 = now_s();
    sg_sample_opts opts = {.ddim_steps = a->ddim_steps,
                           .solver = a->solver,
                           .karras = a->karras,
                           .spacing = a->spacing,
                           .steps_offset = a->steps_offset,
                           .eta = a->eta,
                           .var_large = a->var_large,
                           .clip = a->clip,
                           .labels = labels,
                           .progress = on_progress,
                           .progress_ctx = &ps,
                           .cancel = &stop_requested,
                           .skip = skip_batch,
                           .on_batch = on_batch,
                           .snap_at = snap_at,
                           .on_snap = on_snap,
                           .batch_ctx = &k};
    int rc = ps.batches ? sg_sample_ex(e, n, a->seed, &opts, NULL) : SG_OK;
    free(labels);
    if (ps.tty && ps.batches) fputc('\n', stderr);
    double secs = now_s() - ps.t0;
    if (rc && stop_requested) {
        if (a->out_dir)
            fprintf(stderr,
                    "sample: interrupted: %d of the %d images are in %s; the same command "
                    "continues from there\n",
                    ps.images, n, a->out_dir);
        else
            fprintf(stderr, "sample: interrupted: nothing written (--out-dir keeps finished "
                            "batches)\n");
        free(k.u8), free(k.one), free(k.done), free(k.traj);
        return EXIT_SIGNAL;
    }
    if (!rc && a->out_path)
        rc = img_write_grid_u8_png(a->out_path, k.u8, n, cfg->img, cfg->img, cfg->in_ch, a->cols,
                                   a->scale);
    if (!rc && a->npz && write_npz(a->npz, k.u8, n, cfg->img, cfg->in_ch))
        rc = sg_set_error("--npz %s: %s", a->npz, sg_last_error());
    if (!rc && a->trajectory) {
        char caption[160];
        snprintf(caption, sizeof caption, "%s: x_t above, the predicted x_0 below", what);
        rc = img_write_grid_captioned_png(a->trajectory, k.traj, 2 * k.traj_rows * k.traj_cols,
                                          cfg->img, cfg->img, cfg->in_ch, k.traj_cols, a->scale,
                                          caption);
    }
    free(k.u8), free(k.one), free(k.done), free(k.traj);
    if (rc) return cli_fail("sample", 1);
    /* what was written, in the order of the flags' help */
    char wrote[5 * 4200] = "";
    const char *outs[4] = {a->out_path, a->out_dir, a->npz, a->trajectory};
    for (int i = 0, w = 0; i < 4; i++)
        if (outs[i])
            w += snprintf(wrote + w, sizeof wrote - (size_t)w, "%s%s%s", w ? ", " : "", outs[i],
                          i == 1 ? "/" : "");
    if (k.bad) {
        fprintf(stderr,
                "sample: %lld of %lld sample values are NaN or Inf (the weights in %s are "
                "broken?); wrote %s anyway\n",
                (long long)k.bad, (long long)(n - k.found) * k.per, a->weights, wrote);
        return 1;
    }
    /* a checkpoint's EMA or raw weights; another source's weights as they are */
    const char *kind = !sg_weights_has_ema(a->weights) ? "" : a->ema ? "EMA " : "raw ";
    char found[64] = "";
    if (k.found) snprintf(found, sizeof found, "; %d of them were there already", k.found);
    printf("sample: wrote %s: %d images (%s, %sweights from %s, seed %llu, %s backend) in %.1f "
           "s%s\n",
           wrote, n, what, kind, a->weights, (unsigned long long)a->seed, use_cuda ? "cuda" : "cpu",
           secs, found);
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

/* A diffusers folder whose scheduler_config.json samples otherwise than this run (its scheduler
 * DPMSolverMultistepScheduler where no --solver chose; its timestep_spacing for the run's
 * solver, when the folder's scheduler is that solver's; its variance_type for DDPM) and no flag
 * chose: a note on stderr naming the flags that follow it (sample does not read the
 * scheduler's sampling options: docs/diffusers.md). */
static void scheduler_note(const sample_args *a) {
    struct stat st;
    char cls[64], sp[64];
    int off, large, karras;
    if (stat(a->weights, &st) || !S_ISDIR(st.st_mode) ||
        ckpt_diffusers_sampling(a->weights, cls, sp, sizeof sp, &off, &large, &karras) || !*sp)
        return;
    const int want = sg_spacing_parse(sp), dpm = a->solver == SG_SOLVER_DPMPP_2M;
    const int dpm_folder = !strcmp(cls, "DPMSolverMultistepScheduler");
    off = want == SG_SPACING_LEADING ? off : 0; /* diffusers shifts leading's steps only */
    char says[160] = "", flags[96] = "";
#define NOTE_ADD(buf, ...) snprintf(buf + strlen(buf), sizeof buf - strlen(buf), __VA_ARGS__)
    if (dpm_folder && !a->solver_set) {
        NOTE_ADD(says, "_class_name \"%s\"", cls);
        NOTE_ADD(flags, "--solver dpm++2m%s", a->ddim_steps ? "" : " --steps N");
    }
    /* the spacing (or the Karras sigmas, which replace it) where the run's solver is the
     * folder's, or will be by the note */
    const int same = dpm_folder ? dpm || !a->solver_set : !dpm;
    karras = karras && dpm_folder;
    if (same && karras && !a->karras && !a->spacing_set) {
        NOTE_ADD(says, "%suse_karras_sigmas true", *says ? ", " : "");
        NOTE_ADD(flags, "%s--karras", *flags ? " " : "");
    } else if ((a->ddim_steps || *flags) && same && !karras && !a->karras && !a->spacing_set &&
               want >= 0 && (want != a->spacing || off)) {
        NOTE_ADD(says, "%stimestep_spacing \"%s\"", *says ? ", " : "", sp);
        NOTE_ADD(flags, "%s--spacing %s", *flags ? " " : "", sp);
        if (off) {
            NOTE_ADD(says, ", steps_offset %d", off);
            NOTE_ADD(flags, " --steps-offset %d", off);
        }
    } else if (!dpm_folder && !a->ddim_steps && !a->var_set && large) {
        NOTE_ADD(says, "variance_type \"fixed_large\"");
        NOTE_ADD(flags, "--variance large");
    }
#undef NOTE_ADD
    if (*flags)
        fprintf(stderr,
                "sample: note: %s's scheduler_config.json says %s, which this run does not follow "
                "(sample reads no scheduler options): add %s to sample as diffusers would\n",
                a->weights, says, flags);
}

int main(int argc, char **argv) {
    sample_args a = {.n = 64, .scale = 1, .ema = 1, .clip = -1, .cls = CLASS_ALL, .guidance = 1};
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
    /* every class in a column of its own */
    if (cfg.classes > 0 && a.cls == CLASS_ALL && !a.cols)
        a.cols = cfg.classes < a.n ? cfg.classes : a.n;
    if (cfg.classes > 0 && a.cls == CLASS_LIST && !a.cols) a.cols = a.ncls < a.n ? a.ncls : a.n;
    uint64_t digest = 0;
    if (a.out_dir && weights_digest(a.weights, &cfg, &digest)) return weights_failed(a.weights);
    if ((rc = check_request(&a, &cfg))) return rc;
    scheduler_note(&a);
    if (a.out_dir) {
        json_t *m = manifest_json(&a, &cfg, digest, !strcmp(cli_backend_name(a.backend), "cuda"));
        rc = m ? claim_out_dir(a.out_dir, m) : 1;
        json_decref(m);
        if (rc) return rc;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
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
