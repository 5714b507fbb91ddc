/* weights_fuzz_target.c — the fuzz target of weights from outside stepgraph: a diffusers
 * UNet2DModel folder, the input `sample --weights DIR` and `train --init-from DIR` read.
 *
 * The input is the folder's three files separated by NUL bytes,
 *   config.json \0 scheduler_config.json \0 diffusion_pytorch_model.safetensors
 * (an empty or absent part: that file is absent). Each input is written to a private
 * temporary folder and taken the way sg_weights_config and sg_exec_load_weights take it:
 * ckpt_diffusers_to_config -> sg_model_cfg_from_json -> sg_model_validate -> a forward plan
 * -> every parameter of the plan read from the safetensors file (ckpt_st_read_param, into a
 * buffer of exactly its size) -> ckpt_st_first_unused. The safetensors file is also opened
 * and walked on its own, whatever the config did. Properties, beyond no crash, overflow or
 * leak (built with ASan/UBSan):
 *   - every refusal sets an error message (what the user is shown);
 *   - a config that plans survives stepgraph's own export: its diffusers config
 *     (ckpt_diffusers_unet_config, what `ckpt export --diffusers` writes) read back with the
 *     same scheduler gives the same stepgraph config text.
 *
 * Built two ways: with -DSG_LIBFUZZER as a libFuzzer target (tests/fuzz/build.sh), and into
 * test_weights_corpus, which replays tests/fuzz/weights_corpus/ under ctest.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoints/ckpt.h"
#include "graph/weights.h"
#include "planner/plan.h"

int weights_fuzz_one(const uint8_t *data, size_t size);

enum { CFG_CAP = 8192 };

static char dir[64], dir2[64]; /* the input's folder, and the export round trip's */

static void require(int cond, const char *what) {
    if (cond) return;
    fprintf(stderr, "weights fuzz: property violated: %s (last error: %s)\n", what,
            sg_last_error());
    abort();
}

static void cleanup(void) {
    static const char *const names[] = {"config.json", "scheduler_config.json",
                                        "diffusion_pytorch_model.safetensors"};
    char p[128];
    for (int d = 0; d < 2; d++) {
        const char *base = d ? dir2 : dir;
        if (!*base) continue;
        for (int k = 0; k < 3; k++) {
            snprintf(p, sizeof p, "%s/%s", base, names[k]);
            unlink(p);
        }
        rmdir(base);
    }
}

static void make_dirs(void) {
    if (*dir) return;
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%.40s/sg_wfuzz_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    snprintf(dir2, sizeof dir2, "%.40s/sg_wfuzz_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir) || !mkdtemp(dir2)) {
        perror("weights fuzz: mkdtemp");
        abort();
    }
    atexit(cleanup);
}

/* write (or, with len < 0, remove) base/name */
static void put_file(const char *base, const char *name, const uint8_t *p, ptrdiff_t len) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s", base, name);
    unlink(path);
    if (len < 0) return;
    FILE *f = fopen(path, "wb");
    if (!f || (len && fwrite(p, 1, (size_t)len, f) != (size_t)len) || fclose(f)) {
        perror("weights fuzz: writing the input");
        abort();
    }
}

/* the part of data starting at *pos, up to the next NUL (or the end); -1 when none is left */
static ptrdiff_t next_part(const uint8_t *data, size_t size, size_t *pos, int last) {
    if (*pos > size) return -1;
    size_t start = *pos, end = start;
    if (last)
        end = size;
    else
        while (end < size && data[end]) end++;
    *pos = end + 1;
    return end > start ? (ptrdiff_t)(end - start) : -1;
}

/* the safetensors file on its own: names, lookups */
static void walk_safetensors(const char *path) {
    ckpt_st *s = ckpt_st_open(path);
    if (!s) {
        require(*sg_last_error(), "a refused safetensors file without a message");
        return;
    }
    (void)ckpt_st_model(s);
    for (int i = 0; i < ckpt_st_count(s); i++)
        require(ckpt_st_find(s, ckpt_st_name(s, i)) <= i, "lookup");
    ckpt_st_close(s);
}

/* every parameter of the plan from the file, as sg_exec_load_weights reads them */
static void read_params(const sg_plan *p, const char *path) {
    ckpt_st *s = ckpt_st_open(path);
    if (!s) return;
    const sg_graph *g = &p->g;
    int rc = SG_OK;
    for (int t = 0; t < g->nt && !rc; t++) {
        const sg_tensor *x = &g->t[t];
        if (x->role != ROLE_PARAM || x->region) continue;
        int64_t n = 1;
        for (int d = 0; d < x->ndim; d++) n *= x->shape[d];
        float *buf = malloc((size_t)n * sizeof *buf); /* exactly: ASan sees an overrun */
        require(buf != NULL, "out of memory");
        rc = ckpt_st_read_param(s, x->name, x->ndim, x->shape, buf);
        require(!rc || *sg_last_error(), "a refused parameter without a message");
        free(buf);
    }
    if (!rc) (void)ckpt_st_first_unused(s);
    ckpt_st_close(s);
}

int weights_fuzz_one(const uint8_t *data, size_t size) {
    make_dirs();
    size_t pos = 0;
    ptrdiff_t lc, ls, lw;
    size_t oc, os, ow;
    oc = pos, lc = next_part(data, size, &pos, 0);
    os = pos, ls = next_part(data, size, &pos, 0);
    ow = pos, lw = next_part(data, size, &pos, 1);
    put_file(dir, "config.json", data + oc, lc);
    put_file(dir, "scheduler_config.json", data + os, ls);
    put_file(dir, "diffusion_pytorch_model.safetensors", data + ow, lw);
    char st_path[128];
    snprintf(st_path, sizeof st_path, "%s/diffusion_pytorch_model.safetensors", dir);
    if (lw >= 0) walk_safetensors(st_path);

    static char cfg_json[CFG_CAP], cfg_back[CFG_CAP], exported[CFG_CAP];
    sg_set_error("%s", "");
    if (ckpt_diffusers_to_config(dir, cfg_json, sizeof cfg_json)) {
        require(*sg_last_error(), "a refused diffusers folder without a message");
        return 0;
    }
    sg_model_cfg cfg;
    sg_set_error("%s", "");
    if (sg_model_cfg_from_json(cfg_json, &cfg) || sg_model_validate(&cfg)) {
        require(*sg_last_error(), "a refused translated config without a message");
        return 0;
    }
#ifdef SG_LIBFUZZER
    /* fuzzing speed, as the config fuzzer: the deepest models are planned by the replay */
    if (cfg.nlevels * cfg.nrb > 24) return 0;
#endif
    sg_plan p;
    if (sg_plan_build(&p, &cfg, 0) == SG_OK) {
        /* the export's config reads back as the same config */
        if (ckpt_diffusers_unet_config(cfg_json, exported, sizeof exported) == SG_OK) {
            put_file(dir2, "config.json", (const uint8_t *)exported, (ptrdiff_t)strlen(exported));
            put_file(dir2, "scheduler_config.json", data + os, ls);
            require(ckpt_diffusers_to_config(dir2, cfg_back, sizeof cfg_back) == SG_OK,
                    "the exported diffusers config does not read back");
            require(!strcmp(cfg_back, cfg_json), "the exported diffusers config reads back as "
                                                 "another config");
        }
        /* the weights: a model of at most 2^22 parameters (16 MiB of buffers at once) */
        int64_t total = 0;
        for (int t = 0; t < p.g.nt; t++)
            if (p.g.t[t].role == ROLE_PARAM && !p.g.t[t].region) total += p.g.t[t].bytes / 4;
        if (lw >= 0 && total <= (1 << 22)) read_params(&p, st_path);
    } else {
        require(*sg_last_error(), "a refused plan without a message");
    }
    sg_plan_free(&p);
    return 0;
}

#ifdef SG_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    return weights_fuzz_one(data, size);
}
#endif
