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
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/exec.h"
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

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "--abar")) return dump_abar(argv[2], argv[3]);
    if (argc != 5 && argc != 6) {
        fprintf(stderr, "usage: sg_forward_dump WEIGHTS XT.f32 T.i32 OUT.f32 [MODEL]\n");
        return 2;
    }
    const char *weights = argv[1];
    sg_model_cfg cfg;
    char json[8192];
    if (argc == 6) {
        if (sg_model_preset(&cfg, argv[5])) return fprintf(stderr, "%s\n", sg_last_error()), 1;
        cfg.data_n = 1, cfg.data_h = cfg.data_w = cfg.img;
    } else if (sg_weights_config(weights, json, sizeof json) ||
               sg_model_cfg_from_json(json, &cfg)) {
        return fprintf(stderr, "sg_forward_dump: %s\n", sg_last_error()), 1;
    }
    cfg.act_dt = DT_F32;
    long xs, ts;
    float *x = slurp(argv[2], &xs);
    int32_t *t = slurp(argv[3], &ts);
    if (!x || !t || ts < 4 || ts % 4) return fprintf(stderr, "cannot read x_t / t\n"), 1;
    cfg.batch = (int)(ts / 4);
    long per = (long)cfg.img * cfg.img * cfg.in_ch;
    if (xs != (long)cfg.batch * per * 4)
        return fprintf(stderr, "x_t has %ld bytes, %d images of %dx%dx%d need %ld\n", xs, cfg.batch,
                       cfg.img, cfg.img, cfg.in_ch, (long)cfg.batch * per * 4),
               1;
    sg_exec e;
    float *y = malloc((size_t)xs);
    int rc = sg_exec_init(&e, &cfg, 0, sg_backend_cpu_create());
    if (!rc) rc = sg_exec_load_weights(&e, weights, SG_WEIGHTS_FROM_EMA);
    if (!rc) rc = sg_exec_write(&e, e.plan.io.xt, x) || sg_exec_write(&e, e.plan.io.t, t);
    if (!rc) rc = sg_exec_run_nodes(&e, 0, e.plan.g.n_forward); /* the UNet alone */
    if (!rc) rc = sg_exec_read(&e, e.plan.io.pred, y);
    if (rc) {
        fprintf(stderr, "sg_forward_dump: %s\n", sg_last_error());
        sg_exec_free(&e);
        return 1;
    }
    sg_exec_free(&e);
    FILE *f = fopen(argv[4], "wb");
    if (!f || fwrite(y, 1, (size_t)xs, f) != (size_t)xs || fclose(f))
        return fprintf(stderr, "cannot write %s\n", argv[4]), 1;
    printf("sg_forward_dump: %s (%s, %d x %dx%dx%d) -> %s\n", weights, cfg.name, cfg.batch, cfg.img,
           cfg.img, cfg.in_ch, argv[4]);
    free(x), free(t), free(y);
    return 0;
}
