/* test_torch_parity.c — one whole training step of the CPU or CUDA backend against PyTorch.
 *
 * The C side builds the plan (dropout off), initialises the state, runs the step's input nodes
 * (batch gather, t, eps) and writes a case folder: config.json, params/<name>.npy, x0, t, eps.
 * tools/torch_ref/oracle.py (an independent PyTorch implementation written from docs/model.md)
 * computes the same step in float64. The C side runs the rest of its schedule, capturing the
 * prediction, loss, raw gradients, and the parameters, AdamW moments and EMA after the update,
 * and tools/torch_ref/compare.py judges them.
 *
 * Tolerances (compare.py; fp32 against a float64 truth): x_t 1e-6 and the prediction 1e-4 of
 * max|ref| (fp32 rounding through ~40 layers of depth with O(1e2)-term dot products stays below
 * 1e-5; 1e-4 leaves 10x room), the loss 1e-5 relative, every gradient 2e-4 of its tensor's
 * max|ref| (gradients pass the network twice, and small tensors such as GroupNorm betas sum
 * many terms of both signs), m/v 2e-4/5e-4, and the update bounded per element by Adam's
 * sensitivity to the gradient error: at step 0 the update is ~lr·sign(g), so a gradient that
 * is nearly zero can legitimately flip — a flat tolerance would be wrong there.
 *
 * Usage: test_torch_parity MODEL BATCH REPO_DIR [cpu|cuda [fp32|bf16 [OBJECTIVE]]]; OBJECTIVE is
 * linear (the default), cosine (the cosine betas over T = 4000 steps: the oracle computes them
 * itself), v (v prediction: the loss's target v = sqrt(abar) eps - sqrt(1 - abar) x0), snr
 * (min-SNR-gamma loss weighting, gamma 2.5: the oracle computes the weights as diffusers'
 * training scripts do), classes (a class-conditional model: 3 classes, label dropout 0.5, the
 * gathered labels handed to the oracle), or a comma list of the last four. Exit 77 (skip) when
 * PyTorch is absent, or for cuda when there is no GPU. bf16 (bf16 activations, the oracle still
 * float64) is held to compare.py's bf16 tolerances (--bf16). On cuda, PyTorch's own step
 * on the same GPU from the same case folder (tools/torch_ref/bench.py --parity) is compared with
 * the same float64 truth and the same tolerances, and printed beside ours: the yardstick of
 * what a GPU's rounding does to this step (it does not decide the test).
 * Python: $SG_PYTHON, else /usr/bin/python3 (Debian's PyTorch), else python3 on PATH (the GPU
 * machine's environment), the first that imports torch.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "graph/exec.h"
#include "tests/sg_test.h"

static int write_npy(const char *path, const char *descr, const int64_t *shape, int ndim,
                     const void *data, int64_t bytes) {
    char hdr[256], sh[96] = "";
    for (int i = 0; i < ndim; i++)
        snprintf(sh + strlen(sh), sizeof sh - strlen(sh), "%lld,%s", (long long)shape[i],
                 i + 1 < ndim ? " " : "");
    int n = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }",
                     descr, sh);
    int total = 10 + n + 1, pad = (64 - total % 64) % 64;
    FILE *f = fopen(path, "wb");
    if (!f) return sg_set_error("cannot write %s", path);
    unsigned short hl = (unsigned short)(n + pad + 1);
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    fputc(hl & 0xff, f), fputc(hl >> 8, f);
    fwrite(hdr, 1, (size_t)n, f);
    for (int i = 0; i < pad; i++) fputc(' ', f);
    fputc('\n', f);
    fwrite(data, 1, (size_t)bytes, f);
    return fclose(f) ? sg_set_error("short write %s", path) : SG_OK;
}

static int dump_tensor(sg_exec *e, int t, const char *dir, const char *name) {
    const sg_tensor *x = &e->plan.g.t[t];
    void *buf = malloc((size_t)x->bytes);
    char path[512];
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    int rc = sg_exec_read(e, t, buf);
    const char *descr = x->dtype == DT_I32 ? "<i4" : "<f4";
    int64_t bytes = x->bytes;
    if (!rc && x->dtype == DT_BF16) { /* widened: .npy has no bf16 */
        const int64_t n = x->bytes / 2;
        float *w = malloc((size_t)n * sizeof(float));
        for (int64_t i = 0; w && i < n; i++) w[i] = sg_bf16_to_f32(((const uint16_t *)buf)[i]);
        free(buf);
        buf = w, bytes = n * (int64_t)sizeof(float);
        if (!w) rc = sg_set_error("out of host memory");
    }
    if (!rc) rc = write_npy(path, descr, x->shape, x->ndim, buf, bytes);
    free(buf);
    return rc;
}

/* every tensor of `role`, saved under its parameter's name (prefix stripped) */
static int dump_role(sg_exec *e, sg_role role, const char *dir) {
    const sg_graph *g = &e->plan.g;
    mkdir(dir, 0755);
    for (int t = 0; t < g->nt; t++) {
        if (g->t[t].role != role || g->t[t].region) continue;
        const char *name = strchr(g->t[t].name, ':') ? strchr(g->t[t].name, ':') + 1 : g->t[t].name;
        if (dump_tensor(e, t, dir, name)) return SG_ERR;
    }
    return SG_OK;
}

static int find_node_writing(const sg_graph *g, int t) {
    for (int i = 0; i < g->nn; i++)
        for (int k = 0; k < g->n[i].nout; k++)
            if (g->n[i].out[k] == t) return i;
    return -1;
}

/* the python that imports torch (see the top), or NULL */
static const char *find_python(void) {
    static const char *cands[3];
    cands[0] = getenv("SG_PYTHON"), cands[1] = "/usr/bin/python3", cands[2] = "python3";
    for (int i = 0; i < 3; i++) {
        char cmd[512];
        if (!cands[i] || !cands[i][0]) continue;
        snprintf(cmd, sizeof cmd, "%s -c 'import torch, numpy' >/dev/null 2>&1", cands[i]);
        if (!system(cmd)) return cands[i];
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 4 || argc > 7)
        return fprintf(stderr, "usage: test_torch_parity MODEL BATCH REPO [cpu|cuda [fp32|bf16 "
                               "[OBJECTIVE]]]\n(OBJECTIVE: linear, or a comma list of cosine, "
                               "v, snr, p2, classes, zsnr, perturb)\n"),
               2;
    const char *repo = argv[3];
    const int cuda = argc > 4 && !strcmp(argv[4], "cuda");
    const int bf16 = argc > 5 && !strcmp(argv[5], "bf16");
    int cosine = 0, vpred = 0, snr = 0, p2 = 0, classes = 0, zsnr = 0, perturb = 0, bad_obj = 0;
    if (argc > 6 && strcmp(argv[6], "linear")) {
        char obj[64];
        snprintf(obj, sizeof obj, "%s", argv[6]);
        for (char *tok = strtok(obj, ","); tok; tok = strtok(NULL, ","))
            *(!strcmp(tok, "cosine")    ? &cosine
              : !strcmp(tok, "v")       ? &vpred
              : !strcmp(tok, "snr")     ? &snr
              : !strcmp(tok, "p2")      ? &p2
              : !strcmp(tok, "classes") ? &classes
              : !strcmp(tok, "zsnr")    ? &zsnr
              : !strcmp(tok, "perturb") ? &perturb
                                        : &bad_obj) = 1;
    }
    if ((argc > 4 && !cuda && strcmp(argv[4], "cpu")) ||
        (argc > 5 && !bf16 && strcmp(argv[5], "fp32")) || bad_obj)
        return fprintf(stderr, "test_torch_parity: backend cpu|cuda, precision fp32|bf16, "
                               "objective linear or a comma list of cosine, v, snr, p2, "
                               "classes, zsnr, perturb\n"),
               2;
    const char *py = find_python();
    if (!py) {
        printf("PyTorch is not installed ($SG_PYTHON, /usr/bin/python3, python3): skipped\n");
        return SG_TEST_SKIP;
    }
    if (cuda && !sg_cuda_available()) {
        printf("no GPU: skipped\n");
        return SG_TEST_SKIP;
    }
    sg_model_cfg c;
    if (sg_model_preset(&c, argv[1])) return fprintf(stderr, "%s\n", sg_last_error()), 2;
    c.batch = atoi(argv[2]);
    c.act_dt = bf16 ? DT_BF16 : DT_F32;
    c.dropout = 0; /* the oracle has no access to our dropout masks */
    c.data_n = 8, c.data_h = c.img - 4, c.data_w = c.img - 4; /* padding exercised too */
    c.warmup = 10; /* a visible learning rate at step 0 */
    if (cosine) c.beta_schedule = SG_BETA_COSINE, c.T = 4000;
    if (vpred) c.prediction = SG_PRED_V;
    if (snr) c.snr_gamma = 2.5f; /* within the SNRs a batch of 2 meets: some weights below 1 */
    if (p2) c.p2_gamma = 1.0f, c.p2_k = 1.0f; /* Choi et al.'s */
    /* class-conditional: 3 classes, half the labels dropped to the null class, so that a
     * batch of 4 picks some rows twice, the null row, and leaves a row unpicked (checked) */
    if (classes) c.classes = 3, c.class_dropout = 0.5f;
    /* zero terminal SNR over T = 6, so that a batch of 4 meets the last step (abar = 0:
     * x_t = eps, v = -x0, a min-SNR v weight of 0; checked below) */
    if (zsnr) c.zero_snr = 1, c.T = 6;
    /* input perturbation: x_t from eps_in (dumped), the target from eps */
    if (perturb) c.input_perturbation = 0.1f;

    sg_exec e;
    if (sg_exec_init(&e, &c, 1, cuda ? sg_backend_cuda_create(0, 0) : sg_backend_cpu_create()))
        return fprintf(stderr, "%s\n", sg_last_error()), 1;
    int64_t nd = c.data_n * c.data_h * c.data_w * c.in_ch;
    uint8_t *data = malloc((size_t)nd);
    uint64_t s = 5;
    for (int64_t i = 0; i < nd; i++) data[i] = (uint8_t)(sg_test_next(&s) >> 56);
    int32_t labels[8];
    for (int i = 0; i < 8; i++) labels[i] = i % 3;
    CHECK(sg_exec_upload_dataset(&e, data, nd, classes ? labels : NULL) == SG_OK, "upload: %s",
          sg_last_error());
    CHECK(sg_exec_init_state(&e, 3) == SG_OK, "init");

    char dir[] = "/tmp/sg_parity_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char sub[600];
    const sg_graph *g = &e.plan.g;
    const sg_step_io *io = &e.plan.io;

    /* the step's inputs: run up to and including the noising node */
    int n_xt = find_node_writing(g, io->xt), n_pred = find_node_writing(g, io->pred);
    int n_loss = find_node_writing(g, io->loss);
    CHECK(sg_exec_run_nodes(&e, 0, n_xt + 1) == SG_OK, "inputs: %s", sg_last_error());
    snprintf(sub, sizeof sub, "%s/params", dir);
    CHECK(dump_role(&e, ROLE_PARAM, sub) == SG_OK, "dump params");
    CHECK(dump_tensor(&e, io->x0, dir, "x0") == SG_OK, "x0");
    CHECK(dump_tensor(&e, io->t, dir, "t") == SG_OK, "t");
    if (snr || p2) { /* the case must weigh: some sample's weight below 1 */
        int32_t tv[64];
        float *w = malloc(sizeof(float) * (size_t)c.T), lo = 1.0f;
        CHECK(w && c.batch <= 64 && sg_exec_read(&e, io->t, tv) == SG_OK &&
                  sg_exec_read(&e, io->loss_weight, w) == SG_OK,
              "read t and the loss weights");
        for (int i = 0; i < c.batch; i++) {
            lo = w[tv[i]] < lo ? w[tv[i]] : lo;
            printf("sample %d: t %d, loss weight %.6g\n", i, tv[i], (double)w[tv[i]]);
        }
        free(w);
        CHECK(lo < 0.99f, "no sample's loss weight is below 1: the case does not test weighting");
    }
    if (zsnr) { /* the case meets the last step */
        int32_t tv[64];
        int last = 0;
        CHECK(c.batch <= 64 && sg_exec_read(&e, io->t, tv) == SG_OK, "read t");
        for (int i = 0; i < c.batch; i++) last |= tv[i] == c.T - 1;
        CHECK(last, "no sample is at t = T - 1: the case does not test zero terminal SNR");
    }
    if (classes) { /* the case uses the table: rows picked twice, and one left out */
        int32_t y[64], seen[4] = {0};
        CHECK(c.batch <= 64 && sg_exec_read(&e, io->class_labels, y) == SG_OK, "read labels");
        for (int i = 0; i < c.batch; i++) seen[y[i]]++, printf("sample %d: class %d\n", i, y[i]);
        int twice = 0, unpicked = 0;
        for (int r = 0; r < 4; r++) twice |= seen[r] > 1, unpicked |= seen[r] == 0;
        CHECK(twice && unpicked && seen[3],
              "the labels do not pick a row twice, leave one out and drop one to the null class");
        CHECK(dump_tensor(&e, io->class_labels, dir, "class_labels") == SG_OK, "class_labels");
    }
    CHECK(dump_tensor(&e, io->eps, dir, "eps") == SG_OK, "eps");
    if (perturb) { /* eps_in - eps: the perturbation's normals times 0.1 */
        const int64_t n = (int64_t)c.batch * c.img * c.img * c.in_ch;
        float *a = malloc(sizeof(float) * (size_t)(2 * n)), *b2 = a ? a + n : NULL;
        CHECK(a && sg_exec_read(&e, io->eps, a) == SG_OK &&
                  sg_exec_read(&e, io->eps_in, b2) == SG_OK,
              "read eps and eps_in");
        double ss = 0;
        for (int64_t i = 0; i < n; i++) ss += ((double)b2[i] - a[i]) * ((double)b2[i] - a[i]);
        free(a);
        const double sd = sqrt(ss / (double)n);
        printf("input perturbation: rms(eps_in - eps) %.4f over %lld values (0.1 expected)\n", sd,
               (long long)n);
        CHECK(sd > 0.09 && sd < 0.11, "eps_in - eps has rms %.4f, not about 0.1", sd);
        CHECK(dump_tensor(&e, io->eps_in, dir, "eps_in") == SG_OK, "eps_in");
    }
    snprintf(sub, sizeof sub, "%s/out_c", dir);
    mkdir(sub, 0755);
    CHECK(dump_tensor(&e, io->xt, sub, "xt") == SG_OK, "xt");
    char cfg_json[2048], path[700];
    sg_model_json(&c, cfg_json, sizeof cfg_json);
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    /* the model json plus the 0-based step of this update */
    cfg_json[strlen(cfg_json) - 1] = 0;
    fprintf(f, "%s,\"step\":0}\n", cfg_json);
    fclose(f);

    /* the model, the loss, the backward, the optimizer */
    CHECK(sg_exec_run_nodes(&e, n_xt + 1, n_pred + 1) == SG_OK, "forward");
    CHECK(dump_tensor(&e, io->pred, sub, "pred") == SG_OK, "pred");
    CHECK(sg_exec_run_nodes(&e, n_pred + 1, n_loss + 1) == SG_OK, "loss");
    CHECK(dump_tensor(&e, io->loss, sub, "loss") == SG_OK, "loss");
    CHECK(sg_exec_run_nodes(&e, n_loss + 1, g->nn) == SG_OK, "rest");
    char gsub[700];
    snprintf(gsub, sizeof gsub, "%s/grads", sub);
    CHECK(dump_role(&e, ROLE_GRAD, gsub) == SG_OK, "grads");
    snprintf(gsub, sizeof gsub, "%s/params_after", sub);
    CHECK(dump_role(&e, ROLE_PARAM, gsub) == SG_OK, "params after");
    snprintf(gsub, sizeof gsub, "%s/m_after", sub);
    CHECK(dump_role(&e, ROLE_ADAM_M, gsub) == SG_OK, "m");
    snprintf(gsub, sizeof gsub, "%s/v_after", sub);
    CHECK(dump_role(&e, ROLE_ADAM_V, gsub) == SG_OK, "v");
    snprintf(gsub, sizeof gsub, "%s/ema_after", sub);
    CHECK(dump_role(&e, ROLE_EMA, gsub) == SG_OK, "ema");
    float sq, scale, lr;
    sg_exec_read(&e, io->grad_sumsq, &sq);
    sg_exec_read(&e, io->clip_scale, &scale);
    sg_exec_read(&e, io->lr, &lr);
    float norm = sqrtf(sq);
    int64_t one[1] = {1};
    snprintf(path, sizeof path, "%s/grad_norm.npy", sub);
    write_npy(path, "<f4", one, 1, &norm, 4);
    snprintf(path, sizeof path, "%s/clip_scale.npy", sub);
    write_npy(path, "<f4", one, 1, &scale, 4);
    snprintf(path, sizeof path, "%s/lr.npy", sub);
    write_npy(path, "<f4", one, 1, &lr, 4);
    sg_exec_free(&e);
    free(data);

    /* the oracle in float64, then the comparison */
    char cmd[3072];
    const char *tol = bf16 ? "--bf16" : "";
    printf("stepgraph (%s, %s%s%s%s%s%s%s) against the float64 oracle:\n", cuda ? "cuda" : "cpu",
           bf16 ? "bf16" : "fp32", cosine ? ", cosine betas, T 4000" : "",
           zsnr ? ", zero-terminal-SNR betas, T 6" : "", vpred ? ", v prediction" : "",
           snr  ? ", min-SNR weighting (gamma 2.5)"
           : p2 ? ", P2 weighting (gamma 1, k 1)"
                : "",
           classes ? ", 3 classes" : "", perturb ? ", input perturbation 0.1" : "");
    fflush(stdout);
    snprintf(cmd, sizeof cmd,
             "%s %s/tools/torch_ref/oracle.py %s --dtype float64 -q && "
             "%s %s/tools/torch_ref/compare.py %s %s/out %s/out_c",
             py, repo, dir, py, repo, tol, dir, dir);
    int rc = system(cmd);
    CHECK(rc == 0, "PyTorch oracle / comparison failed for %s batch %d (case kept in %s)", argv[1],
          c.batch, dir);
    if (rc == 0 && cuda) {
        printf("PyTorch (%s, on the same GPU, the same case) against the float64 oracle "
               "(printed, not judged):\n",
               bf16 ? "bf16 autocast" : "fp32, TF32 off");
        fflush(stdout);
        snprintf(cmd, sizeof cmd,
                 "%s %s/tools/torch_ref/bench.py --parity %s --device cuda --precision %s "
                 "--tf32 off --out %s/out_torch >/dev/null && "
                 "%s %s/tools/torch_ref/compare.py %s %s/out %s/out_torch",
                 py, repo, dir, bf16 ? "bf16" : "fp32", dir, py, repo, tol, dir, dir);
        if (system(cmd)) printf("(PyTorch's step is outside these tolerances, or did not run)\n");
    }
    if (rc == 0) {
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
    }
    return sg_test_end();
}
