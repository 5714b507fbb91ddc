/* sg_forward_dump.c — stepgraph's CPU forward pass on given x_t and t, for comparisons with
 * other implementations (tests/diffusers_interop.py).
 *
 *   sg_forward_dump WEIGHTS XT.f32 T.i32 OUT.f32 [MODEL]
 *
 * WEIGHTS: a stepgraph checkpoint (its EMA weights), a diffusers UNet2DModel folder, or a
 * .safetensors file with diffusers names (then MODEL names the preset). The config comes from
 * the weights (graph/weights.h). XT.f32: x_t as raw little-endian fp32, NHWC [N][img][img][C];
 * T.i32: N raw int32 timesteps (N is its size / 4). Writes the predicted noise, NHWC fp32.
 * fp32 activations, the CPU backend, dropout off: the function the weights compute.
 *
 *   sg_forward_dump --abar WEIGHTS OUT.f64
 *
 * instead writes the noise schedule of the weights' config: abar_t for t < T, raw
 * little-endian float64 (kernels/cpu: sg_ddpm_abars), the values training and sampling use.
 *
 *   sg_forward_dump --ddim WEIGHTS XT.f32 S CLIP OUT.f32 [ETA Z.f32]
 *
 * instead runs `sample --ddim-steps S` (CLIP 1: --clip; --eta ETA, default 0, its noise written
 * to Z.f32 as below) from the given x_T (NHWC fp32,
 * N images) rather than from the sampler's own noise: the sampler's timesteps and step table
 * (graph/sampler.h: sg_ddim_timesteps; sg_sample_table) and its update (cpu_sample_step, what the
 * CPU backend's sampler node runs), the forward as above; prints the timesteps and writes the
 * final x (NHWC fp32).
 *
 *   sg_forward_dump --ddpm WEIGHTS XT.f32 CLIP OUT.f32 Z.f32 [large]
 *
 * likewise `sample` without --ddim-steps (DDPM over all T steps; CLIP 0: --no-clip; large:
 * --variance large), also
 * writing the noise z its steps drew (seed 0, the first batch: Philox's keys), step after step,
 * each NHWC fp32, for a sampler elsewhere to add the same noise.
 *
 * A class-conditional model's labels come first: --labels Y.i32 (N raw int32 classes, the
 * null class allowed) before any of the forms above, and for --ddim / --ddpm also --guidance W
 * (classifier-free guidance: each step predicts every image with its class and with the null
 * class and mixes them, as `sample --guidance W`) and --guidance-rescale PHI (as `sample
 * --guidance-rescale`). --spacing NAME and --steps-offset K, also before --ddim, are `sample
 * --spacing`'s and `--steps-offset`'s (graph/sampler.h: sg_ddim_timesteps_spaced); --solver
 * NAME, before --ddim, is `sample --solver` (dpm++2m: DPM-Solver++(2M) at --ddim's timesteps),
 * and --karras (no value) `sample --karras` (its steps between Karras sigmas).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/philox.h"
#include "graph/exec.h"
#include "graph/sampler.h"
#include "graph/weights.h"
#include "kernels/cpu/cpu_kernels.h"

static void *slurp(const char *path, long *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *size = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *buf = malloc((size_t)*size + 1);
    if (buf && fread(buf, 1, (size_t)*size, f) != (size_t)*size) free(buf), buf = NULL;
    fclose(f);
    return buf;
}

static int dump_abar(const char *weights, const char *out) {
    sg_model_cfg cfg;
    char json[8192];
    if (sg_weights_config(weights, json, sizeof json) || sg_model_cfg_from_json(json, &cfg) ||
        sg_model_validate(&cfg))
        return fprintf(stderr, "sg_forward_dump: %s\n", sg_last_error()), 1;
    const sg_betas b = sg_model_betas(&cfg);
    double *abar = malloc(sizeof(double) * (size_t)b.T);
    FILE *f = fopen(out, "wb");
    int ok = abar && f;
    if (ok) sg_ddpm_abars(&b, abar);
    ok = ok && fwrite(abar, sizeof(double), (size_t)b.T, f) == (size_t)b.T;
    ok = f && !fclose(f) && ok;
    free(abar);
    if (!ok) return fprintf(stderr, "sg_forward_dump: cannot write %s\n", out), 1;
    return 0;
}

/* The weights' config (MODEL: a preset for a bare .safetensors file) with fp32 activations. */
static int weights_cfg(const char *weights, const char *model, sg_model_cfg *cfg) {
    char json[8192];
    if (model) {
        if (sg_model_preset(cfg, model)) return fprintf(stderr, "%s\n", sg_last_error()), 1;
        cfg->data_n = 1, cfg->data_h = cfg->data_w = cfg->img;
    } else if (sg_weights_config(weights, json, sizeof json) || sg_model_cfg_from_json(json, cfg)) {
        return fprintf(stderr, "sg_forward_dump: %s\n", sg_last_error()), 1;
    }
    cfg->act_dt = DT_F32;
    return 0;
}

/* A class-conditional model's labels (--labels), the file's count (0: none given) */
static int32_t *g_labels;
static long g_nlabels;
/* DDIM's timesteps (--spacing, --steps-offset), solver (--solver) and Karras sigmas (--karras) */
static int g_spacing, g_offset, g_solver, g_karras;

/* The UNet alone on x (the forward pass's images) at the timesteps t, with the classes y
 * (NULL for an unconditional model): pred. */
static int forward(sg_exec *e, const float *x, const int32_t *t, const int32_t *y, float *pred) {
    if (e->plan.io.class_labels >= 0 && !y)
        return sg_set_error("the model is class-conditional: give --labels Y.i32");
    if (e->plan.io.class_labels < 0 && y)
        return sg_set_error("the model is unconditional: it takes no --labels");
    return sg_exec_write(e, e->plan.io.xt, x) || sg_exec_write(e, e->plan.io.t, t) ||
           (y && sg_exec_write(e, e->plan.io.class_labels, y)) ||
           sg_exec_run_nodes(e, 0, e->plan.g.n_forward) || sg_exec_read(e, e->plan.io.pred, pred);
}

static int write_file(const char *path, const void *data, size_t bytes) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, bytes, f) != bytes || fclose(f))
        return fprintf(stderr, "cannot write %s\n", path), 1;
    return 0;
}

/* ddim: DDIM with S steps and eta; else DDPM over all T steps; the noise drawn to zpath */
static int run_sampler(const char *weights, const char *xt_path, int ddim, int S, int clip,
                       double eta, int var_large, const char *out, const char *zpath, float w,
                       float phi) {
    sg_model_cfg cfg;
    if (weights_cfg(weights, NULL, &cfg)) return 1;
    cfg.guidance = w;
    cfg.guidance_rescale = phi;
    long xs;
    float *x = slurp(xt_path, &xs);
    const long per = (long)cfg.img * cfg.img * cfg.in_ch;
    if (!x || xs <= 0 || xs % (per * 4))
        return fprintf(stderr, "x_T must be whole %dx%dx%d fp32 images\n", cfg.img, cfg.img,
                       cfg.in_ch),
               1;
    cfg.batch = (int)(xs / (per * 4));
    if (g_labels && g_nlabels != cfg.batch)
        return fprintf(stderr, "--labels has %ld classes for %d images\n", g_nlabels, cfg.batch), 1;
    /* guided: the forward pass holds each image twice, its class then the null class */
    const int copies = sg_model_guided(&cfg) ? 2 : 1, B2 = copies * cfg.batch;
    const int n = ddim ? (S > 0 ? S : 1) : cfg.T;
    const int64_t nx = (int64_t)cfg.batch * per;
    int *ts = malloc(sizeof(int) * (size_t)n);
    sg_sample_row *rows = malloc(sizeof(sg_sample_row) * (size_t)n);
    int32_t *t = malloc(sizeof(int32_t) * (size_t)B2), *y = malloc(sizeof(int32_t) * (size_t)B2);
    float *pred = malloc((size_t)xs * copies), *z = malloc((size_t)xs);
    float *xin = malloc((size_t)xs * copies), *x0h = calloc((size_t)xs, 1);
    for (int i = 0; y && i < B2; i++) y[i] = i < cfg.batch && g_labels ? g_labels[i] : cfg.classes;
    FILE *zf = zpath ? fopen(zpath, "wb") : NULL;
    const sg_betas b = sg_model_betas(&cfg);
    sg_exec e;
    int rc = !ts || !rows || !t || !y || !pred || !z || !xin || !x0h || (zpath && !zf);
    if (!rc && ddim && !g_karras)
        rc = sg_solver_timesteps(g_solver, S, cfg.T, g_spacing, g_offset, ts);
    for (int k = 0; !rc && !ddim && k < n; k++) ts[k] = cfg.T - 1 - k; /* as the sampler */
    const int sampler = !ddim                            ? SG_TABLE_DDPM
                        : g_solver == SG_SOLVER_DPMPP_2M ? SG_TABLE_DPM2M
                                                         : SG_TABLE_DDIM;
    rc = rc ||
         (g_karras ? sg_sample_table_karras(rows, n, ts, n, clip, &b)
                   : sg_sample_table(rows, n, ts, n, sampler, clip, eta, var_large, &b)) ||
         sg_exec_init(&e, &cfg, 0, sg_backend_cpu_create());
    if (rc) return fprintf(stderr, "sg_forward_dump: %s\n", sg_last_error()), 1;
    for (int k = 0; k < n; k++) rows[k].v_pred = cfg.prediction == SG_PRED_V; /* as the sampler */
    rc = sg_exec_load_weights(&e, weights, SG_WEIGHTS_FROM_EMA);
    printf("timesteps");
    for (int k = 0; k < n; k++) printf(" %d", ts[k]);
    printf("\n");
    for (int k = 0; k < n && !rc; k++) {
        for (int i = 0; i < B2; i++) t[i] = rows[k].t;
        for (int c = 0; c < copies; c++) memcpy(xin + c * nx, x, (size_t)xs);
        rc = forward(&e, xin, t, g_labels ? y : NULL, pred);
        if (rc) break;
        /* the noise the step draws (seed 0, first element 0), written for the other sampler */
        if (zf && sg_sample_row_noise(&rows[k])) {
            for (int64_t i = 0; i < nx; i++)
                z[i] = sg_rng_normal(0, rows[k].t, SG_RNG_SAMPLE, (uint64_t)i);
            rc = fwrite(z, sizeof(float), (size_t)nx, zf) != (size_t)nx;
            if (rc) sg_set_error("cannot write %s", zpath);
        }
        if (!rc)
            cpu_sample_step(x, xin, t, x0h, pred, rows, n, k, 0, 0, cfg.batch, per, cfg.T,
                            copies == 2, (double)cfg.guidance, (double)cfg.guidance_rescale);
    }
    if (rc) fprintf(stderr, "sg_forward_dump: %s\n", sg_last_error());
    sg_exec_free(&e);
    rc = (zf && fclose(zf)) || rc || write_file(out, x, (size_t)xs);
    free(x), free(ts), free(rows), free(t), free(y), free(pred), free(z), free(xin), free(x0h);
    return rc;
}

int main(int argc, char **argv) {
    float w = 1.0f, phi = 0.0f;
    for (;;) { /* the leading options: --labels Y.i32, --guidance W, --guidance-rescale PHI,
                * --spacing NAME, --steps-offset K, --solver NAME */
        if (argc > 2 && !strcmp(argv[1], "--labels")) {
            if (!(g_labels = slurp(argv[2], &g_nlabels)) || g_nlabels % 4)
                return fprintf(stderr, "cannot read the labels %s\n", argv[2]), 1;
            g_nlabels /= 4;
        } else if (argc > 2 && !strcmp(argv[1], "--guidance")) {
            w = (float)atof(argv[2]);
        } else if (argc > 2 && !strcmp(argv[1], "--guidance-rescale")) {
            phi = (float)atof(argv[2]);
        } else if (argc > 2 && !strcmp(argv[1], "--spacing")) {
            if ((g_spacing = sg_spacing_parse(argv[2])) < 0)
                return fprintf(stderr, "unknown spacing %s\n", argv[2]), 1;
        } else if (argc > 1 && !strcmp(argv[1], "--karras")) {
            g_karras = 1;
            argv[1] = argv[0], argv++, argc--;
            continue;
        } else if (argc > 2 && !strcmp(argv[1], "--solver")) {
            if ((g_solver = sg_solver_parse(argv[2])) < 0)
                return fprintf(stderr, "unknown solver %s\n", argv[2]), 1;
        } else if (argc > 2 && !strcmp(argv[1], "--steps-offset")) {
            g_offset = atoi(argv[2]);
        } else {
            break;
        }
        argv[2] = argv[0], argv += 2, argc -= 2;
    }
    if (argc == 4 && !strcmp(argv[1], "--abar")) return dump_abar(argv[2], argv[3]);
    if ((argc == 7 || argc == 9) && !strcmp(argv[1], "--ddim"))
        return run_sampler(argv[2], argv[3], 1, atoi(argv[4]), atoi(argv[5]),
                           argc == 9 ? atof(argv[7]) : 0.0, 0, argv[6], argc == 9 ? argv[8] : NULL,
                           w, phi);
    if ((argc == 7 || argc == 8) && !strcmp(argv[1], "--ddpm"))
        return run_sampler(argv[2], argv[3], 0, 0, atoi(argv[4]), 0.0,
                           argc == 8 && !strcmp(argv[7], "large"), argv[5], argv[6], w, phi);
    if (argc != 5 && argc != 6) {
        fprintf(stderr,
                "usage: [--labels Y.i32 [--guidance W [--guidance-rescale PHI]]] then one of\n"
                "       sg_forward_dump WEIGHTS XT.f32 T.i32 OUT.f32 [MODEL]\n"
                "       sg_forward_dump --abar WEIGHTS OUT.f64\n"
                "       sg_forward_dump --ddim WEIGHTS XT.f32 S CLIP OUT.f32 [ETA Z.f32]\n"
                "       sg_forward_dump --ddpm WEIGHTS XT.f32 CLIP OUT.f32 Z.f32 [large]\n");
        return 2;
    }
    const char *weights = argv[1];
    sg_model_cfg cfg;
    if (weights_cfg(weights, argc == 6 ? argv[5] : NULL, &cfg)) return 1;
    long xs, ts;
    float *x = slurp(argv[2], &xs);
    int32_t *t = slurp(argv[3], &ts);
    if (!x || !t || ts < 4 || ts % 4) return fprintf(stderr, "cannot read x_t / t\n"), 1;
    cfg.batch = (int)(ts / 4);
    if (g_labels && g_nlabels != cfg.batch)
        return fprintf(stderr, "--labels has %ld classes for %d images\n", g_nlabels, cfg.batch), 1;
    long per = (long)cfg.img * cfg.img * cfg.in_ch;
    if (xs != (long)cfg.batch * per * 4)
        return fprintf(stderr, "x_t has %ld bytes, %d images of %dx%dx%d need %ld\n", xs, cfg.batch,
                       cfg.img, cfg.img, cfg.in_ch, (long)cfg.batch * per * 4),
               1;
    sg_exec e;
    float *y = malloc((size_t)xs);
    int rc = sg_exec_init(&e, &cfg, 0, sg_backend_cpu_create());
    if (!rc) rc = sg_exec_load_weights(&e, weights, SG_WEIGHTS_FROM_EMA);
    if (!rc) rc = forward(&e, x, t, g_labels, y);
    if (rc) {
        fprintf(stderr, "sg_forward_dump: %s\n", sg_last_error());
        sg_exec_free(&e);
        return 1;
    }
    sg_exec_free(&e);
    if (write_file(argv[4], y, (size_t)xs)) return 1;
    printf("sg_forward_dump: %s (%s, %d x %dx%dx%d) -> %s\n", weights, cfg.name, cfg.batch, cfg.img,
           cfg.img, cfg.in_ch, argv[4]);
    free(x), free(t), free(y);
    return 0;
}
