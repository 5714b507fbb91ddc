/* train — train a DDPM UNet by running (on CUDA: replaying) one planned training step.
 *
 *   build/train                                   # unet_fmnist on Fashion-MNIST, 2000 steps
 *   build/train --model unet_cifar --data cifar10:DIR --backend cuda --precision bf16
 *
 * Prints a progress line, appends metrics to OUT/metrics.jsonl, keeps OUT/loss.png current,
 * writes rotating checkpoints (OUT/ckpt_<step>.sgck, OUT/latest) and sample grids, and on
 * Ctrl-C / SIGTERM finishes the step, writes a checkpoint and exits. A NaN or Inf loss stops
 * the run without overwriting the last good checkpoint.
 *
 * Data parallel: `mpirun -np N build/train --batch B ...` runs N ranks of B/N samples each,
 * one all-reduce per step; rank 0 prints and writes, every rank reads (tools/train_dp.h,
 * docs/data-parallel.md).
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "checkpoints/ckpt.h"
#include "data/dataset.h"
#include "data/image_io.h"
#include "graph/exec.h"
#include "graph/sampler.h"
#include "tools/train_dp.h"

static volatile sig_atomic_t stop_requested;
static void on_signal(int sig) {
    (void)sig;
    stop_requested = 1;
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static const char *fmt_time(double s, char *buf) {
    if (s < 0 || s > 1e8) return strcpy(buf, "?");
    int h = (int)(s / 3600), m = (int)(s / 60) % 60, sec = (int)s % 60;
    if (h)
        sprintf(buf, "%dh%02dm", h, m);
    else if (m)
        sprintf(buf, "%dm%02ds", m, sec);
    else
        sprintf(buf, "%ds", sec);
    return buf;
}

typedef struct {
    const char *model, *data, *out, *resume, *backend;
    int64_t steps;
    int ckpt_every, sample_every, log_every, keep, n_samples, ddim_steps, check_every, ranks;
    uint64_t seed;
    int seed_set;
} train_args;

static void usage(FILE *f) {
    fprintf(
        f,
        "usage: train [flags]\n"
        "Train a DDPM UNet; the whole step (data gather, noising, forward, backward, clip,\n"
        "AdamW, EMA) runs from one static plan; on CUDA it is one replayed graph.\n\n"
        "  --model NAME         unet_fmnist (default), unet_cifar, unet_adm64, unet_tiny\n"
        "  --data SPEC          fmnist (default; Debian's dataset-fashion-mnist),\n"
        "                       cifar10:DIR (data_batch_*.bin), idx:IMAGES_FILE, synthetic[:N]\n"
        "  --steps N            train until step N (default 2000)\n"
        "  --lr X               peak learning rate (default: the model's)\n"
        "  --warmup N           linear warm-up steps\n"
        "  --wd X               AdamW weight decay\n"
        "  --clip X             global gradient-norm clip\n"
        "  --ema-decay X        EMA decay\n"
        "  --seed N             run seed: init, data order, noise, dropout (default 0)\n"
        "  --out DIR            where checkpoints, samples, metrics go (default runs/<model>)\n"
        "  --ckpt-every N       checkpoint every N steps (default 500; 0: only at the end)\n"
        "  --keep N             checkpoints kept (default 3)\n"
        "  --sample-every N     sample grid every N steps (default 0: only at the end)\n"
        "  --samples N          images per grid (default 16); --ddim-steps N (default 50)\n"
        "  --log-every N        metrics/progress every N steps (default 10)\n"
        "  --resume CKPT        continue from a checkpoint (or a run directory: its latest)\n"
        "  --backend B          cpu | cuda (default: cuda when a GPU is present)\n"
        "  --ranks N            data parallel: the rank count expected (default: mpirun's);\n"
        "                       --ranks 1 in one process runs the data-parallel step alone\n"
        "  --check-every N      data parallel: compare the ranks' state checksums every N\n"
        "                       steps (default 100; also at every checkpoint and the end)\n"
        "data parallel: mpirun -np N build/train --batch B ... (B is the global batch)\n"
        "  --help               this text\n"
        "model flags:\n%s",
        sg_model_flags_help);
}

static int parse_u64(const char *v, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (!*v || *end || errno || v[0] == '-') return -1;
    *out = x;
    return 0;
}

static int parse_float(const char *v, float lo, float hi, float *out) {
    char *end;
    double x = strtod(v, &end);
    if (!*v || *end || !(x >= lo && x <= hi)) return -1;
    *out = (float)x;
    return 0;
}

/* A float training flag; 1 applied, 0 not ours, -1 bad value. */
static int train_float_flag(sg_model_cfg *c, const char *f, const char *v) {
    struct {
        const char *name;
        float *field;
        float lo, hi;
    } fl[] = {{"--lr", &c->lr, 0, 10},
              {"--wd", &c->wd, 0, 10},
              {"--clip", &c->clip, 1e-6f, 1e9f},
              {"--ema-decay", &c->ema_decay, 0, 1}};
    for (int i = 0; i < SG_ARRAY_LEN(fl); i++)
        if (!strcmp(f, fl[i].name)) {
            if (parse_float(v, fl[i].lo, fl[i].hi, fl[i].field))
                return sg_set_error("%s expects a number in [%g, %g], got '%s'", f, fl[i].lo,
                                    fl[i].hi, v),
                       -1;
            return 1;
        }
    if (!strcmp(f, "--warmup")) {
        uint64_t x;
        if (parse_u64(v, &x) || x > 1u << 30) return sg_set_error("--warmup expects steps"), -1;
        c->warmup = (int)x;
        return 1;
    }
    return 0;
}

static int plot_loss(const char *out_dir) {
    char path[1100];
    snprintf(path, sizeof path, "%s/metrics.jsonl", out_dir);
    FILE *f = fopen(path, "r");
    if (!f) return SG_OK;
    int cap = 1024, n = 0;
    double *xs = malloc(sizeof(double) * (size_t)cap), *ys = malloc(sizeof(double) * (size_t)cap);
    char line[512];
    while (xs && ys && fgets(line, sizeof line, f)) {
        long long s;
        double l;
        if (sscanf(line, "{\"step\":%lld,\"loss\":%lf", &s, &l) != 2) continue;
        if (n == cap) {
            cap *= 2;
            double *nx = realloc(xs, sizeof(double) * (size_t)cap);
            double *ny = realloc(ys, sizeof(double) * (size_t)cap);
            if (!nx || !ny) {
                xs = nx ? nx : xs, ys = ny ? ny : ys;
                break;
            }
            xs = nx, ys = ny;
        }
        xs[n] = (double)s, ys[n] = l, n++;
    }
    fclose(f);
    int rc = SG_OK;
    if (n >= 2) {
        snprintf(path, sizeof path, "%s/loss.png", out_dir);
        rc = img_plot_curve_png(path, xs, ys, n, "training loss (MSE on eps)", "step", "loss", 1);
    }
    free(xs);
    free(ys);
    return rc;
}

static void sample_progress(void *ctx, int done, int batch, int n, int step, int n_steps, int t) {
    (void)ctx, (void)t;
    if (isatty(2))
        fprintf(stderr, "\r  sampling images %d-%d of %d: step %d/%d   ", done + 1, done + batch, n,
                step, n_steps);
}

/* EMA weights of the training executor -> a forward plan -> a PNG grid */
static int write_samples(sg_exec *train, const char *backend, const char *out_dir, int64_t step,
                         int n, int ddim, uint64_t seed) {
    sg_model_cfg c = train->plan.cfg;
    c.batch = n < 16 ? n : 16;
    c.ranks = 0; /* sampling runs on rank 0 alone */
    sg_backend *be =
        !strcmp(backend, "cuda") ? sg_backend_cuda_create(0, 0) : sg_backend_cpu_create();
    if (!be) return SG_ERR;
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
    if (!rc) rc = sg_sample(&fe, n, seed, ddim, out, sample_progress, NULL);
    if (isatty(2)) fprintf(stderr, "\r");
    char path[1100];
    snprintf(path, sizeof path, "%s/samples_%08lld.png", out_dir, (long long)step);
    int cols = 1;
    while (cols * cols < n) cols++;
    if (!rc) rc = img_write_grid_png(path, out, n, c.img, c.img, c.in_ch, cols, 2);
    if (!rc) fprintf(stderr, "  samples: %s (EMA weights, DDIM %d steps)\n", path, ddim);
    free(out);
    free(ema);
    sg_exec_free(&fe);
    return rc;
}

int main(int argc, char **argv) {
    train_args a = {.model = "unet_fmnist",
                    .data = "fmnist",
                    .steps = 2000,
                    .ckpt_every = 500,
                    .log_every = 10,
                    .keep = 3,
                    .n_samples = 16,
                    .ddim_steps = 50,
                    .check_every = 100};
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--model") && i + 1 < argc) a.model = argv[i + 1];
    sg_model_cfg cfg;
    if (sg_model_preset(&cfg, a.model)) return fprintf(stderr, "train: %s\n", sg_last_error()), 2;

    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(f, "--help") || !strcmp(f, "-h")) return usage(stdout), 0;
        if (!v || strncmp(f, "--", 2)) {
            fprintf(stderr, "train: unknown or incomplete flag '%s' (see train --help)\n", f);
            return 2;
        }
        int r = sg_model_flag(&cfg, f, v);
        if (!r) r = train_float_flag(&cfg, f, v);
        if (r < 0) return fprintf(stderr, "train: %s\n", sg_last_error()), 2;
        i++;
        if (r > 0) continue;
        uint64_t x = 0;
        int bad = 0;
        if (!strcmp(f, "--model"))
            continue;
        else if (!strcmp(f, "--data"))
            a.data = v;
        else if (!strcmp(f, "--out"))
            a.out = v;
        else if (!strcmp(f, "--resume"))
            a.resume = v;
        else if (!strcmp(f, "--backend"))
            a.backend = v;
        else if (!strcmp(f, "--steps"))
            bad = parse_u64(v, &x), a.steps = (int64_t)x;
        else if (!strcmp(f, "--seed"))
            bad = parse_u64(v, &a.seed), a.seed_set = 1;
        else if (!strcmp(f, "--ckpt-every"))
            bad = parse_u64(v, &x), a.ckpt_every = (int)x;
        else if (!strcmp(f, "--sample-every"))
            bad = parse_u64(v, &x), a.sample_every = (int)x;
        else if (!strcmp(f, "--log-every"))
            bad = parse_u64(v, &x) || !x, a.log_every = (int)x;
        else if (!strcmp(f, "--keep"))
            bad = parse_u64(v, &x), a.keep = (int)x;
        else if (!strcmp(f, "--samples"))
            bad = parse_u64(v, &x) || !x || x > 1024, a.n_samples = (int)x;
        else if (!strcmp(f, "--ddim-steps"))
            bad = parse_u64(v, &x) || !x || x > 100000, a.ddim_steps = (int)x;
        else if (!strcmp(f, "--ranks"))
            bad = parse_u64(v, &x) || !x || x > 1u << 16, a.ranks = (int)x;
        else if (!strcmp(f, "--check-every"))
            bad = parse_u64(v, &x) || x > 1u << 30, a.check_every = (int)x;
        else {
            fprintf(stderr, "train: unknown flag '%s' (see train --help)\n", f);
            return 2;
        }
        if (bad) return fprintf(stderr, "train: bad value '%s' for %s\n", v, f), 2;
    }
    if (a.backend && strcmp(a.backend, "cpu") && strcmp(a.backend, "cuda"))
        return fprintf(stderr, "train: --backend expects cpu or cuda, got '%s'\n", a.backend), 2;
    train_dp dp;
    if (train_dp_init(&dp, &argc, &argv, &cfg, a.ranks)) {
        fprintf(stderr, "train: %s\n", sg_last_error());
        return train_dp_fail(&dp, 2);
    }
    dp.check_every = a.check_every;
    const int root = train_dp_is_root(&dp);
    const char *backend = a.backend ? a.backend : sg_cuda_available() ? "cuda" : "cpu";
    char out_dir[1024];
    snprintf(out_dir, sizeof out_dir, "%s", a.out ? a.out : "");
    if (!a.out) snprintf(out_dir, sizeof out_dir, "runs/%s", cfg.name);

    /* resume: a run directory means its latest checkpoint */
    char resume_path[1100] = "";
    if (a.resume) {
        struct stat st;
        if (!stat(a.resume, &st) && S_ISDIR(st.st_mode)) {
            if (ckpt_latest(a.resume, resume_path, sizeof resume_path))
                return fprintf(stderr, "train: %s\n", sg_last_error()), 1;
        } else {
            snprintf(resume_path, sizeof resume_path, "%s", a.resume);
        }
    }

    /* the data decides the plan's dataset region */
    sg_dataset ds;
    double t0 = now_ms();
    if (data_load(&ds, a.data)) return fprintf(stderr, "train: %s\n", sg_last_error()), 1;
    if (ds.c != cfg.in_ch)
        return fprintf(stderr, "train: %s has %d channel(s) but model %s expects %d (--in-ch)\n",
                       ds.source, ds.c, cfg.name, cfg.in_ch),
               2;
    if (ds.h > cfg.img || ds.w > cfg.img)
        return fprintf(stderr,
                       "train: %s images are %dx%d, larger than the model's %dx%d (--img)\n",
                       ds.source, ds.h, ds.w, cfg.img, cfg.img),
               2;
    cfg.data_n = ds.n, cfg.data_h = ds.h, cfg.data_w = ds.w;

    /* one GPU per rank: the rank's index on its machine picks the device */
    int ndev = 0;
    if (!strcmp(backend, "cuda")) ndev = sg_cuda_device_count();
    sg_backend *be = !strcmp(backend, "cuda")
                         ? sg_backend_cuda_create(dp.dist->local_rank % (ndev > 0 ? ndev : 1), 1)
                         : sg_backend_cpu_create();
    if (!be) return fprintf(stderr, "train: %s\n", sg_last_error()), train_dp_fail(&dp, 1);
    be->dist = dp.dist;
    sg_exec e;
    if (sg_exec_init(&e, &cfg, 1, be)) {
        fprintf(stderr, "train: %s\n", sg_last_error());
        sg_exec_free(&e);
        return train_dp_fail(&dp, 1);
    }
    if (sg_exec_upload_dataset(&e, ds.pixels, ds.n * ds.h * ds.w * ds.c) ||
        (resume_path[0] ? sg_exec_load(&e, resume_path, 0, 0) : sg_exec_init_state(&e, a.seed))) {
        fprintf(stderr, "train: %s\n", sg_last_error());
        sg_exec_free(&e);
        return train_dp_fail(&dp, 1);
    }
    if (resume_path[0]) train_dp_note_resume(&dp, &e);
    if (root && resume_path[0] && a.seed_set && a.seed != e.seed)
        fprintf(stderr, "train: note: --seed %llu ignored; the checkpoint's seed %llu continues\n",
                (unsigned long long)a.seed, (unsigned long long)e.seed);
    char source_json[700];
    snprintf(source_json, sizeof source_json, "\"data\":{\"spec\":\"%s\",\"n\":%lld}", a.data,
             (long long)ds.n);
    for (char *p = source_json; *p; p++)
        if (*p == '\\') *p = '/';
    data_free(&ds);

    if (root && mkdir(out_dir, 0755) && errno != EEXIST) {
        /* create parents one level up (runs/) */
        char parent[1024];
        snprintf(parent, sizeof parent, "%s", out_dir);
        char *sl = strrchr(parent, '/');
        if (sl) *sl = 0, mkdir(parent, 0755);
        if (mkdir(out_dir, 0755) && errno != EEXIST)
            return fprintf(stderr, "train: cannot create %s: %s\n", out_dir, strerror(errno)),
                   train_dp_fail(&dp, 1);
    }
    char path[1100];
    snprintf(path, sizeof path, "%s/metrics.jsonl", out_dir);
    /* rank 0 writes; the other ranks write nothing (their numbers are rank 0's) */
    FILE *metrics = fopen(root ? path : "/dev/null", resume_path[0] ? "a" : "w");
    if (!metrics)
        return fprintf(stderr, "train: cannot write %s: %s\n", path, strerror(errno)),
               train_dp_fail(&dp, 1);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    int64_t step = sg_exec_step_count(&e);
    char hb[32], hb2[32];
    if (cfg.ranks > 0 && root)
        fprintf(stderr, "train: data parallel: %d rank(s) (%s) x %d samples = global batch %d\n",
                cfg.ranks, dp.dist->name, sg_model_rank_batch(&cfg), cfg.batch);
    if (root)
        fprintf(stderr,
                "train: %s on %s (%lld images), %s backend, batch %d, %s, %lld parameters, arena "
                "%.1f MiB; steps %lld -> %lld; out %s (setup %.1fs)\n",
                cfg.name, a.data, (long long)cfg.data_n, backend, cfg.batch,
                cfg.act_dt == DT_BF16 ? "bf16" : "fp32", (long long)e.plan.io.n_params,
                e.plan.arena_bytes / 1048576.0, (long long)step, (long long)a.steps, out_dir,
                (now_ms() - t0) / 1e3);
    int tty = root && isatty(2), rc = 0;
    char last_ckpt[1100] = "";
    snprintf(last_ckpt, sizeof last_ckpt, "%s", resume_path[0] ? resume_path : "(none)");
    double t_start = now_ms(), t_last = t_start, loss_avg = 0;
    int64_t step_start = step, step_last = step;
    while (step < a.steps && !stop_requested) {
        if (sg_exec_step(&e)) {
            fprintf(stderr, "\ntrain: step %lld failed: %s\n", (long long)step + 1,
                    sg_last_error());
            rc = 1;
            break;
        }
        step++;
        /* a signal may reach the ranks at different steps: they stop together */
        if (cfg.ranks > 1) stop_requested = train_dp_any(&dp, stop_requested);
        int log_now = step % a.log_every == 0 || step == a.steps || stop_requested;
        int ckpt_now =
            (a.ckpt_every && step % a.ckpt_every == 0) || step == a.steps || stop_requested;
        /* the ranks' states compared before any checkpoint is written, and every K steps */
        if (cfg.ranks > 1 && (ckpt_now || (dp.check_every && step % dp.check_every == 0))) {
            if (train_dp_check_state(&dp, &e, step)) {
                fprintf(stderr, "\ntrain: %s\n", sg_last_error());
                rc = 4;
                break;
            }
        }
        if (!log_now && !ckpt_now) continue;
        float loss = sg_exec_loss(&e), gsq = NAN, lr = NAN;
        sg_exec_read(&e, e.plan.io.grad_sumsq, &gsq);
        sg_exec_read(&e, e.plan.io.lr, &lr);
        if (!isfinite(loss) || !isfinite(gsq)) {
            fprintf(stderr,
                    "\ntrain: loss is %s at step %lld (grad norm %g): stopping; the last good "
                    "checkpoint is %s\n",
                    isfinite(loss) ? "finite but the gradient is not" : "not finite",
                    (long long)step, sqrt(gsq), last_ckpt);
            rc = 3;
            break;
        }
        double t = now_ms();
        double ms = (t - t_last) / (double)(step - step_last);
        t_last = t, step_last = step;
        loss_avg = step - step_start <= a.log_every ? loss : 0.9 * loss_avg + 0.1 * loss;
        fprintf(metrics,
                "{\"step\":%lld,\"loss\":%.6g,\"lr\":%.6g,\"grad_norm\":%.6g,\"ms_per_step\":%.3f,"
                "\"img_per_s\":%.2f}\n",
                (long long)step, loss, lr, sqrt(gsq), ms, 1e3 * cfg.batch / ms);
        fflush(metrics);
        double eta = (double)(a.steps - step) * (t - t_start) / (double)(step - step_start) / 1e3;
        if (root)
            fprintf(stderr,
                    "%sstep %lld/%lld  loss %.4f (avg %.4f)  %.1f ms/step  %.1f img/s  ETA %s%s",
                    tty ? "\r" : "", (long long)step, (long long)a.steps, loss, loss_avg, ms,
                    1e3 * cfg.batch / ms, fmt_time(eta, hb), tty ? "   " : "\n");
        if (ckpt_now && root) {
            if (sg_exec_save_rotating(&e, out_dir, source_json, a.keep, last_ckpt,
                                      sizeof last_ckpt)) {
                fprintf(stderr, "\ntrain: checkpoint at step %lld failed: %s\n", (long long)step,
                        sg_last_error());
                rc = 1;
                break;
            }
            plot_loss(out_dir);
            if (tty) fprintf(stderr, "\n");
            fprintf(stderr, "  checkpoint: %s\n", last_ckpt);
        }
        if (root && a.sample_every && step % a.sample_every == 0 && step != a.steps)
            if (write_samples(&e, backend, out_dir, step, a.n_samples, a.ddim_steps, a.seed))
                fprintf(stderr, "train: sampling failed: %s\n", sg_last_error());
    }
    if (tty) fprintf(stderr, "\n");
    fclose(metrics);
    if (!rc && stop_requested && root)
        fprintf(stderr, "train: stopped at step %lld by signal; resume with --resume %s\n",
                (long long)step, out_dir);
    if (!rc && !stop_requested && step_start < a.steps && root) {
        if (write_samples(&e, backend, out_dir, step, a.n_samples, a.ddim_steps, a.seed))
            fprintf(stderr, "train: sampling failed: %s\n", sg_last_error());
        fprintf(stderr, "train: done, %lld steps in %s; loss curve %s/loss.png\n",
                (long long)(step - step_start), fmt_time((now_ms() - t_start) / 1e3, hb2), out_dir);
    }
    sg_exec_free(&e);
    if (rc) return train_dp_fail(&dp, rc);
    train_dp_finalize(&dp);
    return rc;
}
