/* train — train a DDPM UNet by running (on CUDA: replaying) one planned training step.
 *
 *   build/train                                   # unet_fmnist on Fashion-MNIST, 2000 steps
 *   build/train --model unet_cifar --data cifar10:DIR --backend cuda --precision bf16
 *   build/train --resume runs/unet_fmnist --steps 4000
 *
 * The run directory (--out) holds one run: config.json (the full config, and every resume
 * with what it changed), metrics.jsonl, loss.png, rotating checkpoints (ckpt_<step>.sgck,
 * latest) and sample grids. A fresh run refuses a directory holding another (--overwrite),
 * and a lock file keeps two trainers out of one directory. Ctrl-C / SIGTERM finishes the step,
 * writes a checkpoint and exits 130. A NaN or Inf loss stops the run at the step where it
 * happened without overwriting the last good checkpoint.
 *
 * Data parallel: `mpirun -np N build/train --batch B ...` runs N ranks of B/N samples each,
 * one all-reduce per step; rank 0 prints and writes, every rank reads (tools/train_dp.h,
 * docs/data-parallel.md).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoints/ckpt.h"
#include "checkpoints/ckpt_json.h"
#include "data/dataset.h"
#include "data/image_io.h"
#include "graph/engine_table_io.h"
#include "graph/exec.h"
#include "graph/sampler.h"
#include "graph/weights.h"
#include "tools/cli.h"
#include "tools/train_dp.h"

enum { EXIT_NONFINITE = 3, EXIT_RANKS_DIFFER = 4, EXIT_SIGNAL = 130, OUT_MAX = 900 };

static volatile sig_atomic_t stop_requested;
static void on_signal(int sig) {
    (void)sig;
    stop_requested = 1;
}

/* What the command line asked for. The *_set fields say which flags were given: a resume
 * takes everything else from the checkpoint. */
typedef struct {
    const char *model, *data, *out, *resume, *backend, *init_from;
    int64_t steps, ckpt_every, sample_every, log_every;
    int keep, n_samples, ddim_steps, overwrite, check_every, ranks;
    int conv_engine;               /* -1: not given (SG_CONV_ENGINE, else auto) */
    const char *engine_table_path; /* --engine-table: read into engine_table */
    sg_engine_table engine_table;
    uint64_t seed;
    int seed_set, steps_set, samples_set, ddim_set, cadence_set[4]; /* log, ckpt, sample, keep */
    int sample_solver, sample_solver_set; /* --sample-solver (sg_solver), given */
    /* safe to change on resume: the learning rate, its warm-up and schedule, the EMA decay and
     * its warm-up */
    float lr, ema_decay, lr_min, ema_inv_gamma, ema_power;
    int warmup, lr_set, ema_set, warmup_set, lr_schedule, ema_warmup;
    int64_t lr_decay_steps;
    int sched_set, lr_min_set, decay_set, ema_warm_set, inv_gamma_set, power_set;
    char fixed_flag[64]; /* the first flag given that a resume may not change (--data, ...) */
} train_args;

/* --init-from: a fresh state (step 0, AdamW zero, seed's RNG), then the parameters and EMA
 * from outside weights (graph/weights.h checks the architecture first). */
static int init_from(sg_exec *e, const char *path, uint64_t seed) {
    if (sg_exec_init_state(e, seed) || sg_exec_load_weights(e, path, SG_WEIGHTS_SET_EMA))
        return SG_ERR;
    printf("train: parameters and EMA from %s (a fresh run: step 0, AdamW state zero)\n", path);
    /* the architecture must match (checked by the load); the objective may differ, on purpose
     * or not: say so (a bare .safetensors file records none) */
    char json[8192];
    sg_model_cfg w;
    const sg_model_cfg *r = &e->plan.cfg;
    if (sg_weights_config(path, json, sizeof json) || sg_model_cfg_from_json(json, &w))
        return SG_OK;
    if (w.prediction != r->prediction)
        printf("train: note: those weights were trained to predict %s; this run trains %s "
               "(--prediction)\n",
               sg_prediction_name(w.prediction), sg_prediction_name(r->prediction));
    if (w.beta_schedule != r->beta_schedule || w.T != r->T || w.zero_snr != r->zero_snr)
        printf("train: note: those weights were trained with %s%s betas over T = %d; this run uses "
               "%s%s over T = %d (--beta-schedule, --zero-snr, --timesteps)\n",
               sg_beta_schedule_name(w.beta_schedule), w.zero_snr ? " zero-SNR" : "", w.T,
               sg_beta_schedule_name(r->beta_schedule), r->zero_snr ? " zero-SNR" : "", r->T);
    return SG_OK;
}

static void usage(FILE *f) {
    fprintf(
        f,
        "usage: train [flags]            (--flag value or --flag=value)\n"
        "Train a DDPM UNet; the whole step (data gather, noising, forward, backward, clip,\n"
        "AdamW, EMA) runs from one static plan; on CUDA it is one replayed graph.\n\n"
        "  --model NAME         unet_fmnist (default), unet_cifar, unet_adm64, unet_tiny\n"
        "  --data SPEC          fmnist (default; Debian's dataset-fashion-mnist),\n"
        "                       folder:DIR (your PNG/JPEG images, subfolders included:\n"
        "                       centre-cropped, resized to --img, grey or RGB as --in-ch),\n"
        "                       cifar10:DIR (data_batch_*.bin),\n"
        "                       idx:IMAGES_FILE, synthetic[:N[:HxWxC]] (default: the model's\n"
        "                       shape)\n"
        "  --steps N            train until step N (default 2000)\n"
        "  --lr X               peak learning rate (default: the model's)\n"
        "  --warmup N           linear warm-up steps\n"
        "  --lr-schedule S      constant | cosine | linear after the warm-up (default constant)\n"
        "  --lr-min F           where cosine/linear end, a fraction of --lr (default 0)\n"
        "  --lr-decay-steps N   the step where the decay ends (default: --steps of the run\n"
        "                       that chose the schedule)\n"
        "  --ema-warmup 0|1     diffusers' EMA warm-up: decay 1 - (1 + step/inv_gamma)^-power,\n"
        "                       at most --ema-decay (default 0: the fixed --ema-decay)\n"
        "  --ema-inv-gamma F    its inv_gamma (default 1); --ema-power F its power (default 0.75)\n"
        "  --wd X               AdamW weight decay\n"
        "  --adam-eps X         AdamW epsilon (default 1e-8)\n"
        "  --clip X             global gradient-norm clip\n"
        "  --ema-decay X        EMA decay\n"
        "  --seed N             run seed: init, data order, noise, dropout (default 0)\n"
        "  --out DIR            the run directory (default runs/<model>; parents are created)\n"
        "  --overwrite          replace the run already in --out (else a fresh run refuses)\n"
        "  --ckpt-every N       checkpoint every N steps (default 500; 0: only at the end)\n"
        "  --keep N             checkpoints kept (default 3; 0 keeps all)\n"
        "  --sample-every N     sample grid every N steps (default 0: only at the end)\n"
        "  --samples N          images per grid (default 16); --ddim-steps N (default 50)\n"
        "  --sample-solver S    the grids' solver over those steps: ddim (the default) |\n"
        "                       dpm++2m (DPM-Solver++(2M), as sample --solver: second\n"
        "                       order, so fewer steps, e.g. --ddim-steps 20)\n"
        "  --log-every N        metrics/progress every N steps (default 10)\n"
        "  --resume DIR|CKPT    continue a run: model, data, run directory and step target\n"
        "                       come from the checkpoint (a directory: the one `latest`\n"
        "                       names, else the newest; a damaged one: the next older);\n"
        "                       --steps, the lr and EMA flags above and the cadences may\n"
        "                       change (recorded in config.json), nothing else: the model\n"
        "                       flags, --grad-accum included, stay the checkpoint's\n"
        "  --init-from W        start a fresh run (step 0, fresh AdamW state) with parameters\n"
        "                       and EMA from W: a diffusers UNet2DModel folder, a .safetensors\n"
        "                       file with diffusers names, a stepgraph checkpoint or run\n"
        "                       folder (the checkpoint its `latest` names); its\n"
        "                       architecture must be this model's (the first difference is\n"
        "                       named)\n"
        "  --backend B          cpu | cuda (default: cuda when a GPU is present)\n"
        "  --conv-engine E      CUDA convolutions: auto (cudnn where built with it, 1x1 convs\n"
        "                       as cuBLASLt GEMMs) | own | cudnn (default: $SG_CONV_ENGINE,\n"
        "                       else auto);\n"
        "                       SG_CONV_TC=wgmma: own's bf16 tensor-core convs on the Hopper\n"
        "                       wgmma kernels (compute capability 9.0 only);\n"
        "                       SG_CONV_WINO=1: own's fp32 3x3 stride-1 convs as Winograd\n"
        "                       F(2x2, 3x3) (other bits; never run on a GPU; unset: where\n"
        "                       an fp32 engine table's layer says \"wino\"; 0: nowhere);\n"
        "                       SG_CONV_F32_TC=1: own's fp32 tiles with their products on\n"
        "                       the tensor cores at fp32 accuracy (3xTF32; other bits;\n"
        "                       never run on a GPU; unset: where an fp32 engine table's\n"
        "                       layer says \"f32tc\"; 0: nowhere)\n"
        "  --engine-table FILE  per-layer conv engines measured by bench --tune-engines: the\n"
        "                       plan stores (does not fuse) the normalisation a cudnn layer\n"
        "                       reads, and under --conv-engine auto each layer runs where the\n"
        "                       table says; recorded in the checkpoints. A resume plans with\n"
        "                       the checkpoint's table; given on a resume, FILE replaces it\n"
        "                       (a warning names the layers whose engine changes)\n"
        "  --ranks N            data parallel: the rank count expected (default: mpirun's);\n"
        "                       --ranks 1 in one process runs the data-parallel step alone\n"
        "  --check-every N      data parallel: compare the ranks' state checksums every N\n"
        "                       steps (default 100; also at every checkpoint and the end)\n"
        "  --help               this text\n"
        "data parallel: mpirun -np N build/train --batch B ... (B is the global batch)\n"
        "gradient accumulation: --grad-accum K runs each step as K micro-batches of B/K (per\n"
        "rank: B/(N K)) inside the one captured step; the data order, noise and dropout are\n"
        "those of one pass over B, so only the gradients' summation order differs\n"
        "model flags:\n%s"
        "exit status: 0 done, 1 failure (also a sample grid that could not be drawn or written:\n"
        "training goes on, with its checkpoints, and says so at the end), 2 usage, 3 non-finite\n"
        "loss (the last good checkpoint is kept), 4 the data-parallel ranks' states differ, 130\n"
        "stopped by SIGINT/SIGTERM after writing a checkpoint\n",
        sg_model_flags_help);
}

static void note_fixed(train_args *a, const cli_args *c) {
    if (!a->fixed_flag[0]) snprintf(a->fixed_flag, sizeof a->fixed_flag, "%s", c->flag);
}

/* A training flag with a value; 1 taken, 0 not ours, -1 bad value (printed). */
static int train_flag(cli_args *c, train_args *a, sg_model_cfg *cfg) {
    int bad = 0;
    if (cli_is(c, "--data"))
        bad = !(a->data = cli_value(c)), note_fixed(a, c);
    else if (cli_is(c, "--out"))
        bad = !(a->out = cli_value(c)), note_fixed(a, c);
    else if (cli_is(c, "--resume"))
        bad = !(a->resume = cli_value(c));
    else if (cli_is(c, "--init-from"))
        bad = !(a->init_from = cli_value(c)), note_fixed(a, c);
    else if (cli_is(c, "--backend"))
        bad = !(a->backend = cli_value(c)) || cli_check_backend("train", a->backend);
    else if (cli_is(c, "--conv-engine"))
        bad = cli_conv_engine(c, &a->conv_engine);
    else if (cli_is(c, "--engine-table"))
        bad = cli_engine_table(c, &a->engine_table, &a->engine_table_path);
    else if (cli_is(c, "--steps"))
        bad = cli_i64(c, 0, INT64_MAX / 2, &a->steps), a->steps_set = 1;
    else if (cli_is(c, "--seed"))
        bad = cli_u64(c, &a->seed), a->seed_set = 1, note_fixed(a, c);
    else if (cli_is(c, "--log-every"))
        bad = cli_i64(c, 1, INT64_MAX / 2, &a->log_every), a->cadence_set[0] = 1;
    else if (cli_is(c, "--ckpt-every"))
        bad = cli_i64(c, 0, INT64_MAX / 2, &a->ckpt_every), a->cadence_set[1] = 1;
    else if (cli_is(c, "--sample-every"))
        bad = cli_i64(c, 0, INT64_MAX / 2, &a->sample_every), a->cadence_set[2] = 1;
    else if (cli_is(c, "--keep"))
        bad = cli_int(c, 0, 1 << 20, &a->keep), a->cadence_set[3] = 1;
    else if (cli_is(c, "--samples"))
        bad = cli_int(c, 1, 1024, &a->n_samples), a->samples_set = 1;
    else if (cli_is(c, "--ddim-steps"))
        bad = cli_int(c, 1, 100000, &a->ddim_steps), a->ddim_set = 1;
    else if (cli_is(c, "--sample-solver")) {
        const char *v = cli_value(c);
        a->sample_solver_set = 1;
        bad = !v ||
              ((a->sample_solver = sg_solver_parse(v)) < 0 &&
               fprintf(stderr, "train: --sample-solver expects ddim or dpm++2m, got '%s'\n", v));
    } else if (cli_is(c, "--lr"))
        bad = cli_float(c, 0, 10, &a->lr), a->lr_set = 1;
    else if (cli_is(c, "--ema-decay"))
        bad = cli_float(c, 0, 1, &a->ema_decay), a->ema_set = 1;
    else if (cli_is(c, "--warmup"))
        bad = cli_int(c, 0, 1 << 30, &a->warmup), a->warmup_set = 1;
    else if (cli_is(c, "--lr-schedule")) {
        const char *v = cli_value(c);
        a->sched_set = 1;
        bad = !v || (a->lr_schedule = sg_lr_schedule_parse(v)) < 0;
        if (v && bad)
            fprintf(stderr, "train: --lr-schedule expects constant, cosine or linear, got '%s'\n",
                    v);
    } else if (cli_is(c, "--lr-min"))
        bad = cli_float(c, 0, 1, &a->lr_min), a->lr_min_set = 1;
    else if (cli_is(c, "--lr-decay-steps"))
        bad = cli_i64(c, 1, INT64_MAX / 2, &a->lr_decay_steps), a->decay_set = 1;
    else if (cli_is(c, "--ema-warmup"))
        bad = cli_int(c, 0, 1, &a->ema_warmup), a->ema_warm_set = 1;
    else if (cli_is(c, "--ema-inv-gamma"))
        bad = cli_float(c, 1e-6, 1e9, &a->ema_inv_gamma), a->inv_gamma_set = 1;
    else if (cli_is(c, "--ema-power"))
        bad = cli_float(c, 1e-6, 100, &a->ema_power), a->power_set = 1;
    else if (cli_is(c, "--ranks"))
        bad = cli_int(c, 1, 1 << 16, &a->ranks);
    else if (cli_is(c, "--check-every"))
        bad = cli_int(c, 0, 1 << 30, &a->check_every);
    else if (cli_is(c, "--wd"))
        bad = cli_float(c, 0, 10, &cfg->wd), note_fixed(a, c);
    else if (cli_is(c, "--clip"))
        bad = cli_float(c, 1e-6, 1e9, &cfg->clip), note_fixed(a, c);
    else if (cli_is(c, "--adam-eps"))
        bad = cli_float(c, 1e-12, 1, &cfg->eps), note_fixed(a, c);
    else
        return 0;
    return bad ? -1 : 1;
}

/* 0 parsed, 1 --help printed, 2 usage error (printed) */
static int parse_args(int argc, char **argv, train_args *a, sg_model_cfg *cfg) {
    if (cli_model_prelude("train", argc, argv, a->model, cfg)) return 2;
    cli_args c;
    cli_args_init(&c, "train", argc, argv);
    while (cli_next(&c)) {
        if (cli_is(&c, "--help")) return usage(stdout), 1;
        if (cli_is(&c, "--overwrite")) {
            a->overwrite = 1;
            continue;
        }
        int r = train_flag(&c, a, cfg);
        if (!r && (r = cli_model_flag(&c, cfg)) > 0) note_fixed(a, &c);
        if (r < 0) return 2;
        if (!r) return cli_unknown(&c);
    }
    if (a->resume && a->init_from) {
        fprintf(stderr, "train: --resume continues a run, --init-from starts one: give one\n");
        return 2;
    }
    /* a run folder stands for its checkpoint (sg_weights_path); one with none yet is no
     * diffusers folder either: say which it is */
    char ck[4200];
    if (a->init_from && cli_is_run_config(sg_weights_path(a->init_from, ck, sizeof ck))) {
        fprintf(stderr, "train: --init-from %s: a training run's folder with no checkpoint yet\n",
                a->init_from);
        return 2;
    }
    if (a->resume && a->overwrite) {
        fprintf(stderr, "train: --overwrite replaces a run with a fresh one, --resume continues "
                        "it: give one\n");
        return 2;
    }
    return 0;
}

/* ---- the run directory */

/* A fresh run: refuse a directory that holds another run, or (overwrite) delete that run's
 * files — only the files a run writes, nothing else in the directory. A config.json that is
 * not a run's is refused either way: --overwrite must not delete another tool's file. */
static int claim_fresh_dir(const char *out, int overwrite) {
    struct stat st;
    char cfg[OUT_MAX + 32];
    snprintf(cfg, sizeof cfg, "%s/config.json", out);
    if (!stat(cfg, &st) && !cli_is_run_config(out))
        return sg_set_error("%s holds a config.json that is not a stepgraph run's (a diffusers "
                            "export?): choose another --out",
                            out);
    DIR *d = opendir(out);
    if (!d) return sg_set_error("cannot read %s: %s", out, strerror(errno));
    int rc = SG_OK;
    char first[300] = "";
    for (struct dirent *de; (de = readdir(d));) {
        if (!cli_is_run_file(de->d_name)) continue;
        if (!overwrite) {
            snprintf(first, sizeof first, "%s", de->d_name);
            break;
        }
        char path[OUT_MAX + 300];
        snprintf(path, sizeof path, "%s/%s", out, de->d_name);
        if (unlink(path)) rc = sg_set_error("cannot remove %s: %s", path, strerror(errno));
    }
    closedir(d);
    if (first[0])
        return sg_set_error("%s holds another run (%s): resume it with --resume %s, or replace it "
                            "with --overwrite, or choose another --out",
                            out, first, out);
    return rc;
}

/* An exclusive lock on OUT/.lock for the life of the process; -1 when another trainer has it. */
static int lock_dir(const char *out) {
    char path[OUT_MAX + 16];
    snprintf(path, sizeof path, "%s/.lock", out);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return sg_set_error("cannot open %s: %s", path, strerror(errno)), -1;
    if (flock(fd, LOCK_EX | LOCK_NB)) {
        close(fd);
        return sg_set_error("%s is in use by another trainer (%s is locked)", out, path), -1;
    }
    return fd;
}

/* Keep only metrics lines up to step: a crash after a log line and before the checkpoint
 * would otherwise repeat those steps after the resume. */
static int trim_metrics(const char *out, int64_t step) {
    char path[OUT_MAX + 32], tmp[OUT_MAX + 40];
    snprintf(path, sizeof path, "%s/metrics.jsonl", out);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *in = fopen(path, "r");
    if (!in) return SG_OK;
    FILE *o = fopen(tmp, "w");
    if (!o) return fclose(in), sg_set_error("cannot write %s: %s", tmp, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, in) > 0) {
        json_t *j = json_loads(line, 0, NULL);
        json_t *s = json_object_get(j, "step");
        if (json_is_integer(s) && json_integer_value(s) <= step) fputs(line, o);
        json_decref(j);
    }
    free(line);
    fclose(in);
    if (fclose(o) || rename(tmp, path))
        return sg_set_error("cannot rewrite %s: %s", path, strerror(errno));
    return SG_OK;
}

/* ---- resume */

/* The checkpoint to resume: CKPT itself, or in a run directory the one its `latest` names (the
 * run's last save; where `latest` is absent, names no checkpoint or a missing one, that is
 * said and the highest step taken) that opens cleanly; a damaged one is named and the next
 * older one tried. Checkpoints of a higher step than `latest`'s are left
 * from a branch the run abandoned (a resume from an older checkpoint, which saves on from
 * there): named, never taken. Every ckpt_*.sgck is considered, however many. */
static int cmp_step_desc(const void *x, const void *y) {
    const int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return a < b ? 1 : a > b ? -1 : 0;
}
static int find_resume_ckpt(const char *resume, char *path, size_t cap) {
    struct stat st;
    if (stat(resume, &st) || !S_ISDIR(st.st_mode)) {
        snprintf(path, cap, "%s", resume);
        return SG_OK;
    }
    int64_t *steps = NULL;
    size_t n = 0, scap = 0;
    DIR *d = opendir(resume);
    if (!d) return sg_set_error("cannot read %s: %s", resume, strerror(errno));
    for (struct dirent *de; (de = readdir(d));) {
        long long s;
        char tail[8];
        if (sscanf(de->d_name, "ckpt_%lld.sgc%1s", &s, tail) != 2 || strcmp(tail, "k")) continue;
        if (n == scap) {
            int64_t *ns = realloc(steps, sizeof *steps * (scap = scap ? 2 * scap : 64));
            if (!ns) return closedir(d), free(steps), sg_set_error("out of memory");
            steps = ns;
        }
        steps[n++] = s;
    }
    closedir(d);
    qsort(steps, n, sizeof *steps, cmp_step_desc);
    /* the step `latest` names, if it names one of these */
    int64_t top = -1;
    char named[OUT_MAX + 300];
    long long ls;
    char tail[8];
    const char *base = NULL;
    if (!ckpt_latest_named(resume, named, sizeof named) && (base = strrchr(named, '/')) &&
        sscanf(base + 1, "ckpt_%lld.sgc%1s", &ls, tail) == 2 && !strcmp(tail, "k"))
        top = ls;
    else if (n)
        fprintf(stderr,
                "train: warning: %s; resuming the newest checkpoint that opens (give a "
                "checkpoint file to --resume to choose another)\n",
                sg_last_error());
    size_t first = 0;
    while (top >= 0 && first < n && steps[first] > top) first++;
    if (first) {
        ckpt_rotating_path(resume, steps[0], path, cap);
        fprintf(stderr,
                "train: warning: %s holds %zu checkpoint(s) past the one `latest` names (step "
                "%lld), up to %s: left from a run resumed from an older checkpoint; resuming "
                "step %lld (give a checkpoint file to --resume to take another)\n",
                resume, first, (long long)top, path, (long long)top);
    }
    for (size_t i = first; i < n; i++) {
        ckpt_rotating_path(resume, steps[i], path, cap);
        ckpt_file *f = ckpt_open(path);
        if (f) return ckpt_close(f), free(steps), SG_OK;
        fprintf(stderr, "train: warning: %s is damaged (%s); trying an older checkpoint\n", path,
                sg_last_error());
    }
    free(steps);
    return sg_set_error("%s holds no valid checkpoint to resume", resume);
}

static int64_t meta_int(const json_t *o, const char *key, int64_t dflt) {
    json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? json_integer_value(v) : dflt;
}

/* Take model, data, run directory, step target and cadences from the checkpoint; apply the
 * changes the flags may make; record them in `changes`. */
static int resume_setup(train_args *a, sg_model_cfg *cfg, const char *ckpt_path, char *out,
                        json_t *changes) {
    if (a->fixed_flag[0])
        return sg_set_error("%s cannot change on --resume: the checkpoint fixes the model, the "
                            "data and the run directory",
                            a->fixed_flag);
    ckpt_file *f = ckpt_open(ckpt_path);
    if (!f) return SG_ERR;
    char err[200];
    json_t *m = ckpt_meta_load(ckpt_meta(f), err, sizeof err);
    ckpt_close(f);
    if (!m) return sg_set_error("%s: metadata: %s", ckpt_path, err);
    int rc = cli_model_from_json(json_object_get(m, "config"), cfg);
    const json_t *run = json_object_get(m, "run");
    const char *spec = json_string_value(json_object_get(json_object_get(m, "data"), "spec"));
    static char data_spec[4096];
    if (!rc && !spec) rc = sg_set_error("%s names no data source (\"data\".\"spec\")", ckpt_path);
    if (!rc && strlen(spec) >= sizeof data_spec)
        rc = sg_set_error("%s: the data source's name is too long", ckpt_path);
    if (!rc) strcpy(data_spec, spec), a->data = data_spec;
    /* the run directory is where the checkpoint is (so a moved run still resumes) */
    size_t len = strlen(ckpt_path);
    if (!rc && len >= OUT_MAX) rc = sg_set_error("%s: path too long", ckpt_path);
    memcpy(out, ckpt_path, rc ? 0 : len);
    out[rc ? 0 : len] = 0;
    char *sl = strrchr(out, '/');
    if (sl)
        *sl = 0;
    else
        strcpy(out, ".");
    int64_t ckpt_steps = meta_int(run, "steps", a->steps);
    if (!a->steps_set)
        a->steps = ckpt_steps;
    else if (a->steps != ckpt_steps)
        json_object_set_new(changes, "steps", json_integer(a->steps));
    /* the run's cadences, in the ranges their flags take (a checkpoint is input too) */
    static const struct {
        const char *key;
        int64_t lo, hi;
    } lim[] = {{"log_every", 1, INT64_MAX / 2},
               {"ckpt_every", 0, INT64_MAX / 2},
               {"sample_every", 0, INT64_MAX / 2},
               {"keep", 0, 1 << 20},
               {"samples", 1, 1024},
               {"ddim_steps", 1, 100000},
               {"steps", 0, INT64_MAX / 2}};
    for (size_t i = 0; !rc && i < sizeof lim / sizeof lim[0]; i++) {
        const json_t *v = json_object_get(run, lim[i].key);
        if (v && (!json_is_integer(v) || json_integer_value(v) < lim[i].lo ||
                  json_integer_value(v) > lim[i].hi))
            rc = sg_set_error("%s: its run.%s is not a whole number in [%lld, %lld]", ckpt_path,
                              lim[i].key, (long long)lim[i].lo, (long long)lim[i].hi);
    }
    if (!a->cadence_set[0]) a->log_every = meta_int(run, "log_every", a->log_every);
    if (!a->cadence_set[1]) a->ckpt_every = meta_int(run, "ckpt_every", a->ckpt_every);
    if (!a->cadence_set[2]) a->sample_every = meta_int(run, "sample_every", a->sample_every);
    if (!a->cadence_set[3]) a->keep = (int)meta_int(run, "keep", a->keep);
    if (!a->samples_set) a->n_samples = (int)meta_int(run, "samples", a->n_samples);
    if (!a->ddim_set) a->ddim_steps = (int)meta_int(run, "ddim_steps", a->ddim_steps);
    /* the grids' solver: absent is DDIM (a run from before --sample-solver) */
    const json_t *sv = json_object_get(run, "sample_solver");
    if (!rc && sv && (!json_is_string(sv) || sg_solver_parse(json_string_value(sv)) < 0))
        rc = sg_set_error("%s: its run.sample_solver is not ddim or dpm++2m", ckpt_path);
    if (!rc && sv && !a->sample_solver_set)
        a->sample_solver = sg_solver_parse(json_string_value(sv));
    const char *cad[] = {"log_every", "ckpt_every", "sample_every", "keep"};
    int64_t val[] = {a->log_every, a->ckpt_every, a->sample_every, a->keep};
    for (int i = 0; i < 4; i++)
        if (a->cadence_set[i]) json_object_set_new(changes, cad[i], json_integer(val[i]));
    json_decref(m);
    return rc;
}

/* The schedule flags (common/sg_schedule.h), recorded in changes when they change the config.
 * A decaying schedule without --lr-decay-steps ends at this run's --steps; switching back to
 * constant forgets the decay. */
static void apply_schedule_flags(const train_args *a, sg_model_cfg *cfg, json_t *changes) {
    const sg_model_cfg old = *cfg;
    if (a->sched_set) cfg->lr_schedule = a->lr_schedule;
    if (a->lr_min_set) cfg->lr_min = a->lr_min;
    if (a->decay_set) cfg->lr_decay_steps = a->lr_decay_steps;
    if (cfg->lr_schedule != SG_LR_CONSTANT && !cfg->lr_decay_steps) cfg->lr_decay_steps = a->steps;
    if (cfg->lr_schedule == SG_LR_CONSTANT) cfg->lr_decay_steps = 0, cfg->lr_min = 0;
    if (a->ema_warm_set) cfg->ema_warmup = a->ema_warmup;
    if (a->inv_gamma_set) cfg->ema_inv_gamma = a->ema_inv_gamma;
    if (a->power_set) cfg->ema_power = a->ema_power;
    if (cfg->lr_schedule != old.lr_schedule)
        json_object_set_new(changes, "lr_schedule",
                            json_string(sg_lr_schedule_name(cfg->lr_schedule)));
    if (cfg->lr_min != old.lr_min)
        json_object_set_new(changes, "lr_min", cli_json_float(cfg->lr_min));
    if (cfg->lr_decay_steps != old.lr_decay_steps)
        json_object_set_new(changes, "lr_decay_steps", json_integer(cfg->lr_decay_steps));
    if (cfg->ema_warmup != old.ema_warmup)
        json_object_set_new(changes, "ema_warmup", json_integer(cfg->ema_warmup));
    if (cfg->ema_inv_gamma != old.ema_inv_gamma)
        json_object_set_new(changes, "ema_inv_gamma", cli_json_float(cfg->ema_inv_gamma));
    if (cfg->ema_power != old.ema_power)
        json_object_set_new(changes, "ema_power", cli_json_float(cfg->ema_power));
}

/* The flags a fresh run and a resume both apply last: lr, warm-up, EMA decay, schedules. */
static void apply_safe_flags(const train_args *a, sg_model_cfg *cfg, json_t *changes) {
    if (a->lr_set && a->lr != cfg->lr) json_object_set_new(changes, "lr", cli_json_float(a->lr));
    if (a->ema_set && a->ema_decay != cfg->ema_decay)
        json_object_set_new(changes, "ema_decay", cli_json_float(a->ema_decay));
    if (a->warmup_set && a->warmup != cfg->warmup)
        json_object_set_new(changes, "warmup", json_integer(a->warmup));
    if (a->lr_set) cfg->lr = a->lr;
    if (a->ema_set) cfg->ema_decay = a->ema_decay;
    if (a->warmup_set) cfg->warmup = a->warmup;
    apply_schedule_flags(a, cfg, changes);
}

/* ---- the run: everything main sets up, freed in one place */
typedef struct {
    train_args a;
    sg_model_cfg cfg;
    const char *backend;
    char out[OUT_MAX + 1], resume_path[OUT_MAX + 64], last_ckpt[OUT_MAX + 64];
    sg_dataset ds;
    int ds_loaded, exec_made, lock_fd;
    sg_exec e;
    json_t *changes;
    char *extra_json; /* "data" and "run" members for every checkpoint's metadata */
    FILE *metrics;
    int64_t step, step_start;
    double t_setup;
    train_dp dp;
    int dp_made, root; /* root: the rank that prints and writes (the only one without MPI) */
    sg_engine_table ckpt_table; /* a resume: the engine table its checkpoint was planned with */
    int had_table;              /* ... 1 when it had one */
    int grids_failed;           /* sample grids not drawn or written: the exit status is 1 */
    int64_t first_failed_grid;  /* ... the step of the first */
} train_run;

static void run_free(train_run *r) {
    if (r->ds_loaded) data_free(&r->ds);
    if (r->exec_made) sg_exec_free(&r->e);
    if (r->metrics) fclose(r->metrics);
    if (r->lock_fd > 0) close(r->lock_fd);
    json_decref(r->changes);
    free(r->extra_json);
    sg_engine_table_free(&r->a.engine_table);
    sg_engine_table_free(&r->ckpt_table);
}

/* The members every checkpoint adds to its metadata: where the data came from and what the
 * run was asked to do (a resume reads them back). Built with jansson: any path is valid. */
static int make_extra_json(train_run *r) {
    const train_args *a = &r->a;
    json_t *j = json_pack("{s:{s:s, s:I}, s:{s:I, s:I, s:I, s:I, s:i, s:i, s:i}}", "data", "spec",
                          a->data, "n", (json_int_t)r->cfg.data_n, "run", "steps",
                          (json_int_t)a->steps, "log_every", (json_int_t)a->log_every, "ckpt_every",
                          (json_int_t)a->ckpt_every, "sample_every", (json_int_t)a->sample_every,
                          "keep", a->keep, "samples", a->n_samples, "ddim_steps", a->ddim_steps);
    /* only when not DDIM: a run from before reads as DDIM */
    if (j && a->sample_solver != SG_SOLVER_DDIM)
        json_object_set_new(json_object_get(j, "run"), "sample_solver",
                            json_string(sg_solver_name(a->sample_solver)));
    char *s = j ? cli_json_string(j) : NULL;
    if (!s) return sg_set_error("cannot describe the data source %s as JSON", r->a.data);
    /* sg_exec_save merges members: drop the outer braces */
    size_t n = strlen(s);
    memmove(s, s + 1, n - 2);
    s[n - 2] = 0;
    r->extra_json = s;
    return SG_OK;
}

/* OUT/config.json: the run's full config; a resume appends what it changed. */
static int write_run_config(train_run *r, int argc, char **argv) {
    char path[OUT_MAX + 32];
    snprintf(path, sizeof path, "%s/config.json", r->out);
    json_t *cmd = json_array();
    for (int i = 0; i < argc; i++) json_array_append_new(cmd, json_string(argv[i]));
    json_t *old = r->resume_path[0] ? json_load_file(path, 0, NULL) : NULL;
    json_t *resumes = json_object_get(old, "resumes");
    resumes = json_is_array(resumes) ? json_incref(resumes) : json_array();
    if (r->resume_path[0])
        json_array_append_new(resumes, json_pack("{s:I, s:s, s:O, s:o}", "step",
                                                 (json_int_t)r->step, "checkpoint", r->resume_path,
                                                 "changes", r->changes, "command", cmd));
    json_t *j = json_pack("{s:o, s:{s:s, s:I}, s:I, s:I, s:I, s:I, s:I, s:i, s:i, s:s, s:o}",
                          "model", cli_model_json(&r->cfg), "data", "spec", r->a.data, "n",
                          (json_int_t)r->cfg.data_n, "steps", (json_int_t)r->a.steps, "seed",
                          (json_int_t)r->e.seed, "log_every", (json_int_t)r->a.log_every,
                          "ckpt_every", (json_int_t)r->a.ckpt_every, "sample_every",
                          (json_int_t)r->a.sample_every, "keep", r->a.keep, "samples",
                          r->a.n_samples, "backend", r->backend, "resumes", resumes);
    if (j) json_object_set(j, "command", r->resume_path[0] ? json_object_get(old, "command") : cmd);
    if (!r->resume_path[0]) json_decref(cmd);
    json_decref(old);
    if (!j || json_dump_file(j, path, JSON_INDENT(2) | JSON_REAL_PRECISION(9)))
        return json_decref(j), sg_set_error("cannot write %s", path);
    json_decref(j);
    return SG_OK;
}

/* ---- the loss curve: loss, learning rate and gradient norm over the steps */
static int plot_metrics(const char *out) {
    char path[OUT_MAX + 32];
    snprintf(path, sizeof path, "%s/metrics.jsonl", out);
    FILE *f = fopen(path, "r");
    if (!f) return SG_OK;
    int cap = 0, n = 0, rc = SG_OK;
    double *v = NULL; /* step, loss, lr, grad_norm per line */
    char *line = NULL;
    size_t lcap = 0;
    while (getline(&line, &lcap, f) > 0) {
        json_t *j = json_loads(line, 0, NULL);
        double step = json_number_value(json_object_get(j, "step"));
        double x[4] = {step, json_number_value(json_object_get(j, "loss")),
                       json_number_value(json_object_get(j, "lr")),
                       json_number_value(json_object_get(j, "grad_norm"))};
        json_decref(j);
        if (n == cap) {
            double *nv = realloc(v, sizeof(double) * 4 * (size_t)(cap = cap ? 2 * cap : 1024));
            if (!nv) break;
            v = nv;
        }
        memcpy(v + 4 * n++, x, sizeof x);
    }
    free(line);
    fclose(f);
    double *cols = n >= 2 ? malloc(sizeof(double) * 4 * (size_t)n) : NULL;
    for (int i = 0; cols && i < n; i++)
        for (int k = 0; k < 4; k++) cols[k * n + i] = v[4 * i + k];
    static const char *const titles[] = {"training loss (MSE on eps, mean per log interval)",
                                         "learning rate", "gradient norm (before clipping)"};
    static const char *const names[] = {"loss", "lr", "grad norm"};
    static const int logs[] = {1, 0, 1};
    const double *ys[3] = {cols + n, cols + 2 * n, cols + 3 * n};
    snprintf(path, sizeof path, "%s/loss.png", out);
    if (cols) rc = img_plot_panels_png(path, cols, ys, n, 3, titles, "step", names, logs);
    free(cols);
    free(v);
    return rc;
}

/* ---- samples */
static void sample_progress(void *ctx, int done, int batch, int n, int step, int n_steps, int t) {
    (void)ctx, (void)t;
    if (isatty(2))
        fprintf(stderr, "\r  sampling images %d-%d of %d: step %d/%d   ", done + 1, done + batch, n,
                step, n_steps);
}

/* EMA weights of the training executor -> a forward plan -> a PNG grid. Ctrl-C stops it. */
static int write_samples(train_run *r) {
    sg_exec *train = &r->e;
    sg_model_cfg c = train->plan.cfg;
    int n = r->a.n_samples;
    c.batch = n < 16 ? n : 16;
    c.ranks = 0;      /* sampling runs on rank 0 alone */
    c.engines = NULL; /* and is planned without the step's engine table (another batch) */
    sg_backend *be =
        !strcmp(r->backend, "cuda") ? sg_backend_cuda_create(0, 1) : sg_backend_cpu_create();
    if (!be) return SG_ERR;
    if (r->a.conv_engine >= 0) be->conv_engine = r->a.conv_engine;
    sg_exec fe;
    int rc = sg_exec_init(&fe, &c, 0, be);
    float *out = NULL;
    unsigned char *ema = NULL;
    int64_t pb = train->plan.g.t[train->plan.io.ema].bytes;
    if (!rc && fe.plan.g.t[fe.plan.io.params].bytes != pb)
        rc = sg_set_error("sampling plan's parameters differ from the training plan's");
    if (!rc && !(ema = malloc((size_t)pb))) rc = sg_set_error("out of host memory");
    if (!rc) rc = sg_exec_read(train, train->plan.io.ema, ema);
    if (!rc) rc = sg_exec_write(&fe, fe.plan.io.params, ema);
    int64_t per = (int64_t)c.img * c.img * c.in_ch;
    if (!rc && !(out = malloc(sizeof(float) * (size_t)(per * n))))
        rc = sg_set_error("out of memory");
    /* a class-conditional model: image i is class i mod K, the grid a column per class (as
     * sample's --class all), unguided */
    int32_t *labels = c.classes > 0 ? malloc(sizeof(int32_t) * (size_t)n) : NULL;
    if (!rc && c.classes > 0 && !labels) rc = sg_set_error("out of memory");
    for (int i = 0; labels && i < n; i++) labels[i] = i % c.classes;
    /* clipped as the sample tool's --clip: what a grid during training should show */
    sg_sample_opts o = {.ddim_steps = r->a.ddim_steps,
                        .solver = r->a.sample_solver,
                        .clip = 1,
                        .labels = labels,
                        .progress = sample_progress,
                        .cancel = &stop_requested};
    if (!rc) rc = sg_sample_ex(&fe, n, r->e.seed, &o, out);
    free(labels);
    if (isatty(2)) fprintf(stderr, "\r");
    char path[OUT_MAX + 64];
    snprintf(path, sizeof path, "%s/samples_%08lld.png", r->out, (long long)r->step);
    int cols = 1;
    while (cols * cols < n) cols++;
    if (c.classes > 0) cols = c.classes < n ? c.classes : n;
    char caption[128];
    const char *solver = r->a.sample_solver == SG_SOLVER_DPMPP_2M ? "DPM-Solver++(2M)" : "DDIM";
    snprintf(caption, sizeof caption, "step %lld  EMA  %s %d  clip%s", (long long)r->step, solver,
             r->a.ddim_steps, c.classes > 0 ? "  class per column" : "");
    if (!rc)
        rc = img_write_grid_captioned_png(path, out, n, c.img, c.img, c.in_ch, cols, 2, caption);
    if (!rc)
        fprintf(stderr, "  samples: %s (EMA weights, %s %d steps, x0 clipped)\n", path, solver,
                r->a.ddim_steps);
    free(out);
    free(ema);
    sg_exec_free(&fe);
    return rc;
}

/* The grid of this step. One that fails loses no training: a warning, the run goes on, and it
 * ends with exit status 1 (grids_failed); a signal's interruption is no failure. */
static void sample_grid(train_run *r) {
    if (!write_samples(r) || stop_requested) return;
    if (!r->grids_failed++) r->first_failed_grid = r->step;
    fprintf(stderr,
            "train: warning: the sample grid of step %lld failed: %s; training goes on (exit "
            "status 1 at the end)\n",
            (long long)r->step, sg_last_error());
}

/* ---- the loop */

/* One metrics line and the progress line: the loss is the mean over the steps since the last
 * line (every step's loss is read back, so the mean is exact and a NaN is caught at its step). */
static void log_line(train_run *r, double loss_sum, int64_t n, double t_last, double t_now) {
    float gsq = NAN, lr = NAN;
    sg_exec_read(&r->e, r->e.plan.io.grad_sumsq, &gsq);
    sg_exec_read(&r->e, r->e.plan.io.lr, &lr);
    double mean = loss_sum / (double)n, ms = (t_now - t_last) / (double)n;
    double epoch = (double)r->step * r->cfg.batch / (double)r->cfg.data_n;
    /* the decay the EMA used at the last step (0-based r->step - 1): the same function as the
     * kernels' */
    const sg_model_cfg *c = &r->cfg;
    double ema_decay =
        sg_ema_decay_at(c->ema_decay, r->step - 1, c->ema_warmup, c->ema_inv_gamma, c->ema_power);
    json_t *j = json_pack("{s:I, s:f, s:o, s:o, s:f, s:f, s:f, s:f, s:f}", "step",
                          (json_int_t)r->step, "loss", mean, "lr", cli_json_float(lr), "ema_decay",
                          cli_json_float(ema_decay), "grad_norm", sqrt((double)gsq), "epoch", epoch,
                          "wall_s", (t_now - r->t_setup) / 1e3, "ms_per_step", ms, "img_per_s",
                          1e3 * r->cfg.batch / ms);
    cli_json_print(r->metrics, j);
    fflush(r->metrics);
    char eta[16];
    double done = (double)(r->step - r->step_start);
    int tty = isatty(2);
    if (r->root)
        fprintf(stderr,
                "%sstep %lld/%lld  loss %.4f (mean of the last %lld steps)  lr %.3g  %.1f ms/step  "
                "%.1f img/s  ETA %s%s",
                tty ? "\r" : "", (long long)r->step, (long long)r->a.steps, mean, (long long)n, lr,
                ms, 1e3 * r->cfg.batch / ms,
                cli_fmt_duration((double)(r->a.steps - r->step) * (t_now - r->t_setup) / done / 1e3,
                                 eta),
                tty ? "   " : "\n");
}

static int save_ckpt(train_run *r) {
    if (sg_exec_save_rotating(&r->e, r->out, r->extra_json, r->a.keep, r->last_ckpt,
                              sizeof r->last_ckpt)) {
        fprintf(stderr, "\ntrain: checkpoint at step %lld failed: %s\n", (long long)r->step,
                sg_last_error());
        return SG_ERR;
    }
    plot_metrics(r->out);
    if (isatty(2)) fprintf(stderr, "\n");
    fprintf(stderr, "  checkpoint: %s\n", r->last_ckpt);
    return SG_OK;
}

/* Did a step since the last look go wrong? The step itself writes the watch on the device
 * (the loss_watch op): the first step whose loss or gradient was not finite, 0 while none. */
static int check_watch(train_run *r) {
    int64_t bad = 0;
    if (sg_exec_read(&r->e, r->e.plan.io.watch, &bad)) return 1;
    if (!bad) return 0;
    fprintf(stderr,
            "\ntrain: the loss or its gradient was not finite at step %lld (seen at step %lld): "
            "stopping; the last good checkpoint is %s\n",
            (long long)bad, (long long)r->step, r->last_ckpt);
    return EXIT_NONFINITE;
}

/* Train to the target; returns the exit status. The host reads the device only at log,
 * checkpoint and sample steps: no sync after every step. */
static int train_loop(train_run *r) {
    double t_last = cli_now_ms();
    int64_t n = 0; /* steps in loss_sum: since the last log line (or the resume) */
    const float zero = 0;
    r->t_setup = t_last;
    /* A signal is acted on where the flag is read, once a step, right after it: that step is
     * then the last, and checkpointed. (The loop's condition read the flag too, so a signal
     * during a step's log line ended the run there without its checkpoint, the resume hint
     * naming a run with none: the flaky train_cli check.) SG_TEST_SIGINT_AT_LOG=N raises
     * SIGINT in step N's log line, to hold that to a test. */
    const char *raise_at = getenv("SG_TEST_SIGINT_AT_LOG");
    const long long raise_step = raise_at && *raise_at ? atoll(raise_at) : -1;
    int stop = 0;
    while (r->step < r->a.steps && !stop) {
        if (sg_exec_step(&r->e)) {
            fprintf(stderr, "\ntrain: step %lld failed: %s\n", (long long)r->step + 1,
                    sg_last_error());
            return 1;
        }
        r->step++, n++;
        stop = stop_requested;
        /* a signal may reach the ranks at different steps: they stop together */
        if (r->cfg.ranks > 1) stop_requested = stop = train_dp_any(&r->dp, stop);
        int last = r->step == r->a.steps || stop;
        int log_now = r->step % r->a.log_every == 0 || last;
        int ckpt_now = (r->a.ckpt_every && r->step % r->a.ckpt_every == 0) || last;
        int sample_now = r->a.sample_every && r->step % r->a.sample_every == 0 && !last;
        /* the ranks' states compared before any checkpoint is written, and every K steps */
        if (r->cfg.ranks > 1 &&
            (ckpt_now || (r->dp.check_every && r->step % r->dp.check_every == 0)) &&
            train_dp_check_state(&r->dp, &r->e, r->step))
            return fprintf(stderr, "\ntrain: %s\n", sg_last_error()), EXIT_RANKS_DIFFER;
        if (!log_now && !ckpt_now && !sample_now) continue;
        int rc = check_watch(r);
        if (rc) return rc;
        if (log_now) {
            float sum = NAN;
            double t = cli_now_ms();
            if (sg_exec_read(&r->e, r->e.plan.io.loss_sum, &sum) ||
                sg_exec_write(&r->e, r->e.plan.io.loss_sum, &zero))
                return fprintf(stderr, "\ntrain: %s\n", sg_last_error()), 1;
            log_line(r, sum, n, t_last, t);
            if (r->step == raise_step) raise(SIGINT);
            n = 0, t_last = t;
        }
        if (ckpt_now && r->root && save_ckpt(r)) return 1;
        if (sample_now && r->root) sample_grid(r);
    }
    if (r->root && isatty(2)) fprintf(stderr, "\n");
    return 0;
}

/* A word a POSIX shell reads back as s: as is when plain, else in single quotes. */
static void print_shell_word(const char *s) {
    if (*s &&
        strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%") ==
            strlen(s)) {
        fputs(s, stderr);
        return;
    }
    fputc('\'', stderr);
    for (; *s; s++) *s == '\'' ? fputs("'\\''", stderr) : fputc(*s, stderr);
    fputc('\'', stderr);
}

/* ---- setup */

/* The engine table the plan is made with: --engine-table's; on a resume without it, the
 * checkpoint's (the same plan and engines, the same bits); given on a resume, it replaces the
 * checkpoint's, and the layers whose engine changes are named. */
static int setup_engine_table(train_run *r) {
    const train_args *a = &r->a;
    const int given = a->engine_table_path != NULL;
    int had = 0;
    if (r->resume_path[0] && (had = sg_exec_ckpt_engine_table(r->resume_path, &r->ckpt_table)) < 0)
        return 2;
    r->cfg.engines = given ? &a->engine_table : had ? &r->ckpt_table : NULL;
    r->had_table = had;
    if (r->resume_path[0] && given && (!had || r->ckpt_table.hash != a->engine_table.hash))
        json_object_set_new(r->changes, "engine_table", json_string(a->engine_table_path));
    return 0;
}

/* A resume given another engine table: what changes, said once the plan has taken the table
 * (a table refused for this model is refused before any of this is said) */
static void warn_table_change(const train_run *r) {
    const train_args *a = &r->a;
    if (!r->resume_path[0] || !a->engine_table_path) return;
    char prefix[OUT_MAX + 96];
    snprintf(prefix, sizeof prefix,
             "train: warning: --engine-table %s replaces %s's: ", a->engine_table_path,
             r->resume_path);
    const int had = r->had_table;
    const int differ = had ? sg_engine_table_diff(&r->ckpt_table, &a->engine_table, prefix) : 0;
    if (!had)
        fprintf(stderr,
                "train: warning: %s was planned without an engine table; this run plans with "
                "%s\n",
                r->resume_path, a->engine_table_path);
    if (!had || differ)
        fprintf(stderr,
                "train: warning: %d conv layer(s) change engine (or GEMM(s) algorithm): the "
                "resumed run will not give the same bits as a straight one where one changes\n",
                had ? differ : a->engine_table.n);
}

/* Resolve the run: a resume reads the checkpoint; both then choose the backend. */
static int setup_config(train_run *r) {
    train_args *a = &r->a;
    if (a->resume) {
        if (find_resume_ckpt(a->resume, r->resume_path, sizeof r->resume_path) ||
            resume_setup(a, &r->cfg, r->resume_path, r->out, r->changes))
            return 2;
    } else {
        snprintf(r->out, sizeof r->out, "%s", a->out ? a->out : "");
        if (!a->out) snprintf(r->out, sizeof r->out, "runs/%s", r->cfg.name);
        if (a->out && strlen(a->out) >= OUT_MAX)
            return sg_set_error("--out is longer than %d characters", OUT_MAX - 1), 2;
    }
    apply_safe_flags(a, &r->cfg, r->changes);
    /* the decay's flags shape a decaying schedule: with the constant one they would be dropped */
    if (r->cfg.lr_schedule == SG_LR_CONSTANT && (a->lr_min_set || a->decay_set))
        return sg_set_error("%s applies to a decaying learning rate, and the schedule is "
                            "constant: give --lr-schedule cosine or linear",
                            a->lr_min_set ? "--lr-min" : "--lr-decay-steps"),
               2;
    /* the sample grids' DDIM steps: at most the schedule's (else every grid would fail) */
    if (a->ddim_steps > r->cfg.T)
        return sg_set_error("--ddim-steps %d: at most the schedule's T = %d", a->ddim_steps,
                            r->cfg.T),
               2;
    r->backend = cli_backend_name(a->backend);
    return setup_engine_table(r);
}

/* A folder's decoding, on stderr once it has taken a second: a line rewritten in place on a
 * terminal, else a line at each tenth; then what it took. */
typedef struct {
    double t0;
    int tty, tenth;
    const char *dir;
} load_progress;

static void on_load_progress(void *ctx, int64_t done, int64_t total, int final) {
    load_progress *p = ctx;
    const double el = cli_now_ms() / 1e3 - p->t0;
    char t[16];
    if (final) {
        fprintf(stderr, "%sdata: decoded %lld of %lld images from %s (%s)%s\n", p->tty ? "\r" : "",
                (long long)done, (long long)total, p->dir, cli_fmt_duration(el, t),
                p->tty ? "\033[K" : "");
        return;
    }
    const int tenth = (int)(10 * done / total);
    if (!p->tty && tenth == p->tenth) return;
    p->tenth = tenth;
    fprintf(stderr, "%sdata: decoding %s: %lld/%lld images (%d%%), ETA %s%s", p->tty ? "\r" : "",
            p->dir, (long long)done, (long long)total, (int)(100 * done / total),
            cli_fmt_duration(el * (double)(total - done) / (double)(done ? done : 1), t),
            p->tty ? "\033[K" : "\n");
}

/* The data for the model: folder:DIR is decoded to the model's size and channels, and
 * synthetic or synthetic:N draws images of the model's shape; every other spec as it is. */
static int load_data(train_run *r) {
    const char *spec = r->a.data;
    const sg_model_cfg *c = &r->cfg;
    if (!strncmp(spec, "folder:", 7)) {
        load_progress p = {.t0 = cli_now_ms() / 1e3, .tty = isatty(2), .dir = spec + 7};
        if (r->root) data_set_progress(on_load_progress, &p, 1.0, p.tty ? 0.25 : 0.0);
        const int rc = data_load_folder(&r->ds, spec + 7, c->img, c->in_ch);
        data_set_progress(NULL, NULL, 0, 0);
        return rc;
    }
    int64_t n = 1024;
    if (!strcmp(spec, "synthetic")) return data_synthetic(&r->ds, n, c->img, c->img, c->in_ch);
    /* synthetic:N: N images of the model's shape (a bad N said so, not as another shape's) */
    if (!strncmp(spec, "synthetic:", 10) && !strchr(spec + 10, ':'))
        return cli_parse_i64("--data synthetic:N", spec + 10, 1, 1LL << 31, &n)
                   ? SG_ERR
                   : data_synthetic(&r->ds, n, c->img, c->img, c->in_ch);
    return data_load(&r->ds, spec);
}

/* The communicator (MPI_Init under a launcher) and the plan's rank count: after the config
 * (a resume's comes from its checkpoint), before the plan. */
static int setup_dp(train_run *r, int *argc, char ***argv) {
    const int rc = train_dp_init(&r->dp, argc, argv, &r->cfg, r->a.ranks);
    r->dp_made = 1; /* finalized on every exit path: a refused config's communicator too */
    if (rc) return 2;
    r->dp.check_every = r->a.check_every;
    r->root = train_dp_is_root(&r->dp);
    return 0;
}

/* Load the data, build the plan, load or initialise the state. */
static int setup_exec(train_run *r) {
    if (load_data(r)) return 1;
    r->ds_loaded = 1;
    sg_dataset *ds = &r->ds;
    if (ds->c != r->cfg.in_ch)
        return sg_set_error("%s has %d channel(s) but model %s expects %d (--in-ch)", ds->source,
                            ds->c, r->cfg.name, r->cfg.in_ch),
               2;
    if (ds->h > r->cfg.img || ds->w > r->cfg.img)
        return sg_set_error("%s images are %dx%d, larger than the model's %dx%d (--img)",
                            ds->source, ds->h, ds->w, r->cfg.img, r->cfg.img),
               2;
    r->cfg.data_n = ds->n, r->cfg.data_h = ds->h, r->cfg.data_w = ds->w;
    /* one GPU per rank: the rank's index on its machine picks the device */
    int cuda = !strcmp(r->backend, "cuda"), ndev = cuda ? sg_cuda_device_count() : 0;
    sg_backend *be = cuda
                         ? sg_backend_cuda_create(r->dp.dist->local_rank % (ndev > 0 ? ndev : 1), 1)
                         : sg_backend_cpu_create();
    if (!be) return 1;
    be->dist = r->dp.dist;
    if (r->a.conv_engine >= 0) be->conv_engine = r->a.conv_engine;
    /* a resume asks for the conv engines the checkpoint's step ran (the same bits) */
    char *pins = r->resume_path[0] ? sg_exec_ckpt_conv_engines(r->resume_path) : NULL;
    be->conv_pins = pins;
    r->exec_made = 1;
    static const char *const may_differ[] = {
        "lr",         "ema_decay",     "warmup",    "lr_schedule",  "lr_min", "lr_decay_steps",
        "ema_warmup", "ema_inv_gamma", "ema_power", "engine_table", NULL};
    int init_rc = sg_exec_init(&r->e, &r->cfg, 1, be);
    be->conv_pins = NULL;
    free(pins);
    if (!init_rc && r->root) warn_table_change(r);
    if (init_rc ||
        sg_exec_upload_dataset(&r->e, ds->pixels, ds->n * ds->h * ds->w * ds->c, ds->labels) ||
        (r->resume_path[0] ? sg_exec_resume(&r->e, r->resume_path, may_differ)
         : r->a.init_from  ? init_from(&r->e, r->a.init_from, r->a.seed)
                           : sg_exec_init_state(&r->e, r->a.seed)))
        return 1;
    if (r->resume_path[0]) train_dp_note_resume(&r->dp, &r->e);
    data_free(ds), r->ds_loaded = 0; /* the arena holds it now */
    /* the first log interval starts here: a checkpoint between log lines holds a partial sum */
    const float zero = 0;
    if (sg_exec_write(&r->e, r->e.plan.io.loss_sum, &zero)) return 1;
    r->step = r->step_start = sg_exec_step_count(&r->e);
    if (r->a.steps <= r->step)
        return sg_set_error("the run is at step %lld and --steps is %lld: nothing to train (give "
                            "--steps above %lld)",
                            (long long)r->step, (long long)r->a.steps, (long long)r->step),
               2;
    return make_extra_json(r);
}

/* The run directory: created, claimed (fresh) or trimmed (resume), locked, config written. */
static int setup_dir(train_run *r, int argc, char **argv) {
    snprintf(r->last_ckpt, sizeof r->last_ckpt, "%s",
             r->resume_path[0] ? r->resume_path : "(none)");
    if (!r->root) { /* the other ranks write nothing: their numbers are rank 0's */
        if (!(r->metrics = fopen("/dev/null", "w")))
            return sg_set_error("cannot open /dev/null: %s", strerror(errno));
        return 0;
    }
    if (cli_make_dirs(r->out)) return 1;
    if ((r->lock_fd = lock_dir(r->out)) < 0) return 1;
    if (r->resume_path[0] ? trim_metrics(r->out, r->step) : claim_fresh_dir(r->out, r->a.overwrite))
        return 1;
    if (write_run_config(r, argc, argv)) return 1;
    char path[OUT_MAX + 32];
    snprintf(path, sizeof path, "%s/metrics.jsonl", r->out);
    if (!(r->metrics = fopen(path, r->resume_path[0] ? "a" : "w")))
        return sg_set_error("cannot write %s: %s", path, strerror(errno));
    return 0;
}

/* The communicator's end: a failure on one of several ranks aborts them all (the others
 * would wait in the next collective); otherwise finalize and free it. Returns rc. */
static int finish_dp(train_run *r, int rc) {
    if (!r->dp_made) return rc;
    if (rc && rc != EXIT_SIGNAL) rc = train_dp_fail(&r->dp, rc);
    train_dp_finalize(&r->dp);
    return rc;
}

int main(int argc, char **argv) {
    train_run r = {.a = {.model = "unet_fmnist",
                         .data = "fmnist",
                         .steps = 2000,
                         .ckpt_every = 500,
                         .log_every = 10,
                         .keep = 3,
                         .n_samples = 16,
                         .ddim_steps = 50,
                         .check_every = 100,
                         .conv_engine = -1},
                   .lock_fd = -1};
    int rc = parse_args(argc, argv, &r.a, &r.cfg);
    if (rc) return rc == 1 ? 0 : rc;
    double t0 = cli_now_ms();
    r.changes = json_object();
    if ((rc = setup_config(&r)) || (rc = setup_dp(&r, &argc, &argv)) || (rc = setup_exec(&r)) ||
        (rc = setup_dir(&r, argc, argv))) {
        fprintf(stderr, "train: %s\n", sg_last_error());
        run_free(&r);
        return finish_dp(&r, rc);
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    if (r.root && r.cfg.ranks > 0)
        fprintf(stderr, "train: data parallel: %d rank(s) (%s) x %d samples = global batch %d\n",
                r.cfg.ranks, r.dp.dist->name, sg_model_rank_batch(&r.cfg), r.cfg.batch);
    char micro[96] = "";
    if (r.cfg.grad_accum > 1)
        snprintf(micro, sizeof micro, " (%d micro-batches of %d%s, --grad-accum)", r.cfg.grad_accum,
                 sg_model_micro_batch(&r.cfg), r.cfg.ranks > 0 ? " per rank" : "");
    char threads[48] = "";
    if (!strcmp(r.backend, "cpu")) {
        const int nt = sg_backend_cpu_threads();
        snprintf(threads, sizeof threads, " (%d thread%s%s)", nt, nt == 1 ? "" : "s",
                 r.cfg.ranks > 0 ? " per rank" : "");
    }
    /* the objective where it is not DDPM's (eps, linear betas over 1000 steps) */
    char noise[256] = "";
    if (r.cfg.beta_schedule != SG_BETA_LINEAR || r.cfg.T != 1000 || r.cfg.zero_snr)
        snprintf(noise, sizeof noise, ", %s%s betas over T = %d",
                 sg_beta_schedule_name(r.cfg.beta_schedule),
                 r.cfg.zero_snr ? " zero-terminal-SNR" : "", r.cfg.T);
    if (r.cfg.prediction == SG_PRED_V)
        snprintf(noise + strlen(noise), sizeof noise - strlen(noise), ", v prediction");
    if (r.cfg.snr_gamma > 0)
        snprintf(noise + strlen(noise), sizeof noise - strlen(noise),
                 ", min-SNR loss weighting (gamma %g)", (double)r.cfg.snr_gamma);
    if (r.cfg.p2_gamma > 0)
        snprintf(noise + strlen(noise), sizeof noise - strlen(noise),
                 ", P2 loss weighting (gamma %g, k %g)", (double)r.cfg.p2_gamma,
                 (double)r.cfg.p2_k);
    if (r.cfg.noise_offset > 0)
        snprintf(noise + strlen(noise), sizeof noise - strlen(noise), ", offset noise %g",
                 (double)r.cfg.noise_offset);
    if (r.cfg.input_perturbation > 0)
        snprintf(noise + strlen(noise), sizeof noise - strlen(noise), ", input perturbation %g",
                 (double)r.cfg.input_perturbation);
    if (r.cfg.classes > 0)
        snprintf(noise + strlen(noise), sizeof noise - strlen(noise),
                 ", class-conditional (%d classes, label dropout %g)", r.cfg.classes,
                 (double)r.cfg.class_dropout);
    if (r.root)
        fprintf(stderr,
                "train: %s on %s (%lld images), %s backend%s, batch %d%s, %s%s, %lld parameters, "
                "arena %.1f MiB; steps %lld -> %lld; out %s (setup %.1fs)\n",
                r.cfg.name, r.a.data, (long long)r.cfg.data_n, r.backend, threads, r.cfg.batch,
                micro, r.cfg.act_dt == DT_BF16 ? "bf16" : "fp32", noise,
                (long long)r.e.plan.io.n_params, r.e.plan.arena_bytes / 1048576.0,
                (long long)r.step, (long long)r.a.steps, r.out, (cli_now_ms() - t0) / 1e3);
    rc = train_loop(&r);
    if (!rc && r.root && !stop_requested) sample_grid(&r);
    char took[16];
    if (!rc && stop_requested && !r.root) {
        rc = EXIT_SIGNAL;
    } else if (!rc && stop_requested && r.step >= r.a.steps) {
        /* the signal came after the last step (during the final sample grid): nothing to resume */
        fprintf(stderr,
                "train: stopped by a signal after the last step (%lld): the training is complete, "
                "its checkpoint %s; the final sample grid was not drawn (sample --ckpt draws it)\n",
                (long long)r.step, r.last_ckpt);
        rc = EXIT_SIGNAL;
    } else if (!rc && stop_requested) {
        fprintf(stderr, "train: stopped at step %lld by a signal; continue with:\n  ",
                (long long)r.step);
        print_shell_word(argv[0]);
        fputs(" --resume ", stderr);
        print_shell_word(r.out);
        fputc('\n', stderr);
        rc = EXIT_SIGNAL;
    } else if (!rc && r.root) {
        /* the curve is drawn at each checkpoint, from two logged steps on */
        char curve[OUT_MAX + 32];
        struct stat st;
        snprintf(curve, sizeof curve, "%s/loss.png", r.out);
        fprintf(stderr, "train: done, %lld steps in %s; %s%s\n", (long long)(r.step - r.step_start),
                cli_fmt_duration((cli_now_ms() - r.t_setup) / 1e3, took),
                stat(curve, &st) ? "no loss curve (it needs a checkpoint and two logged steps: "
                                   "--ckpt-every, --log-every)"
                                 : "loss curve ",
                stat(curve, &st) ? "" : curve);
        if (r.grids_failed)
            fprintf(stderr,
                    "train: but %d sample grid(s) failed, the first at step %lld (said above); "
                    "the checkpoints are written (sample --ckpt draws from one): exit status 1\n",
                    r.grids_failed, (long long)r.first_failed_grid);
    }
    run_free(&r);
    /* a failed grid is no reason to abort the other ranks (finish_dp): their training is done */
    rc = finish_dp(&r, rc);
    return rc ? rc : r.grids_failed ? 1 : 0;
}
