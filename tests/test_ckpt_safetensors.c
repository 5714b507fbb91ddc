/* test_ckpt_safetensors.c — the safetensors reader and the diffusers config translation of
 * checkpoints/ (ckpt_st_*, ckpt_diffusers_*, ckpt_config_check_arch), without diffusers.
 *
 * - Layouts: a file written here by hand (an independent writer: header text and bytes laid
 *   out in this file) with fresh random values in diffusers layouts (OIHW conv, to_q/k/v and
 *   to_out.0 Linear, F16 and BF16 tensors) is read into stepgraph layouts; every element is
 *   checked against the index math written out here, outputs poisoned first.
 * - Corruption: every truncation of the file, every single-byte change of its header, and
 *   named bad headers (lengths, offsets, shapes, dtypes) are either refused with an error
 *   naming the file, or (a change that still makes a valid file) read without going out of
 *   bounds (this test runs under ASan in CI).
 * - Configs: the diffusers config of a stepgraph config reads back as the same architecture;
 *   a changed field is named; what diffusers cannot express is refused with the reason.
 */
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoints/ckpt.h"
#include "tests/sg_test.h"

static char dir[] = "/tmp/sg_st_XXXXXX";

typedef struct {
    const char *name, *dtype;
    int ndim;
    int64_t shape[4];
    float *v; /* values (F16/BF16: already representable) */
} st_tensor;

static uint16_t to_bf16(float f) {
    uint32_t b;
    memcpy(&b, &f, 4);
    return (uint16_t)(b >> 16); /* k / 64, |k| < 128: 8 significant bits, exact in bf16 */
}
static uint16_t to_f16(float f) { /* f = k / 64 with |k| < 128: exact in f16 */
    if (f == 0) return 0;
    uint32_t b;
    memcpy(&b, &f, 4);
    uint32_t sign = b >> 31, exp = (b >> 23) & 255, man = b & 0x7fffff;
    return (uint16_t)(sign << 15 | (exp - 112) << 10 | man >> 13);
}

static int64_t numel(const st_tensor *t) {
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
    return n;
}

/* The file as bytes: header JSON, padded with spaces to 8, then the data in order. */
static uint8_t *build(const st_tensor *ts, int n, size_t *size) {
    char hdr[8192];
    size_t hp = (size_t)snprintf(hdr, sizeof hdr, "{\"__metadata__\":{\"model\":\"m\"}");
    int64_t off = 0;
    for (int i = 0; i < n; i++) {
        int es = strcmp(ts[i].dtype, "F32") ? 2 : 4;
        hp += (size_t)snprintf(hdr + hp, sizeof hdr - hp, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[",
                               ts[i].name, ts[i].dtype);
        for (int d = 0; d < ts[i].ndim; d++)
            hp += (size_t)snprintf(hdr + hp, sizeof hdr - hp, "%s%lld", d ? "," : "",
                                   (long long)ts[i].shape[d]);
        hp += (size_t)snprintf(hdr + hp, sizeof hdr - hp, "],\"data_offsets\":[%lld,%lld]}",
                               (long long)off, (long long)(off + numel(&ts[i]) * es));
        off += numel(&ts[i]) * es;
    }
    hp += (size_t)snprintf(hdr + hp, sizeof hdr - hp, "}");
    while (hp % 8) hdr[hp++] = ' ';
    *size = 8 + hp + (size_t)off;
    uint8_t *b = malloc(*size), *p = b + 8 + hp;
    for (int k = 0; k < 8; k++) b[k] = (uint8_t)((uint64_t)hp >> (8 * k));
    memcpy(b + 8, hdr, hp);
    for (int i = 0; i < n; i++)
        for (int64_t k = 0; k < numel(&ts[i]); k++) {
            if (!strcmp(ts[i].dtype, "F32")) {
                memcpy(p, &ts[i].v[k], 4), p += 4;
            } else {
                uint16_t h =
                    !strcmp(ts[i].dtype, "BF16") ? to_bf16(ts[i].v[k]) : to_f16(ts[i].v[k]);
                *p++ = (uint8_t)h, *p++ = (uint8_t)(h >> 8);
            }
        }
    return b;
}

static void spit(const char *path, const uint8_t *b, size_t n) {
    FILE *f = fopen(path, "wb");
    fwrite(b, 1, n, f);
    fclose(f);
}

/* fresh values; F16/BF16 ones on a grid both hold exactly (k / 64, |k| < 128) */
static float *vals(int64_t n, uint64_t *s, int grid) {
    float *v = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        v[i] =
            grid ? (float)((int)(sg_test_next(s) % 255) - 127) / 64.0f : sg_test_uniform(s, -1, 1);
    return v;
}

static float *poisoned(int64_t n) {
    float *v = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) v[i] = NAN;
    return v;
}

static void test_layouts(void) {
    uint64_t s = 42;
    enum { CO = 5, CI = 3, K = 3, C = 4 };
    st_tensor ts[] = {
        {"conv.weight", "F32", 4, {CO, CI, K, K}, vals(CO * CI * K * K, &s, 0)},
        {"conv.bias", "F16", 1, {CO}, vals(CO, &s, 1)},
        {"a.to_q.weight", "F32", 2, {C, C}, vals(C * C, &s, 0)},
        {"a.to_k.weight", "F32", 2, {C, C}, vals(C * C, &s, 0)},
        {"a.to_v.weight", "BF16", 2, {C, C}, vals(C * C, &s, 1)},
        {"a.to_q.bias", "F32", 1, {C}, vals(C, &s, 0)},
        {"a.to_k.bias", "F32", 1, {C}, vals(C, &s, 0)},
        {"a.to_v.bias", "F32", 1, {C}, vals(C, &s, 0)},
        {"a.to_out.0.weight", "F32", 2, {C, C}, vals(C * C, &s, 0)},
        {"a.group_norm.weight", "F32", 1, {C}, vals(C, &s, 0)},
        {"lin.weight", "F32", 2, {7, C}, vals(7 * C, &s, 0)},
    };
    int n = SG_ARRAY_LEN(ts);
    size_t size;
    uint8_t *b = build(ts, n, &size);
    char path[600];
    snprintf(path, sizeof path, "%s/w.safetensors", dir);
    spit(path, b, size);
    ckpt_st *st = ckpt_st_open(path);
    CHECK(st && ckpt_st_count(st) == n && !strcmp(ckpt_st_model(st), "m"), "open: %s",
          st ? "" : sg_last_error());
    if (!st) return;

    /* conv: [Co][K][K][Ci] here from OIHW there */
    int64_t cs[4] = {CO, K, K, CI};
    float *w = poisoned(CO * K * K * CI);
    CHECK(ckpt_st_read_param(st, "conv.weight", 4, cs, w) == SG_OK, "conv: %s", sg_last_error());
    int bad = 0;
    for (int o = 0; o < CO; o++)
        for (int y = 0; y < K; y++)
            for (int x = 0; x < K; x++)
                for (int i = 0; i < CI; i++)
                    bad += w[((o * K + y) * K + x) * CI + i] !=
                           ts[0].v[((o * CI + i) * K + y) * K + x];
    CHECK(!bad, "conv weight transposed wrongly at %d elements", bad);
    int64_t bs[1] = {CO};
    float *bb = poisoned(CO);
    CHECK(ckpt_st_read_param(st, "conv.bias", 1, bs, bb) == SG_OK &&
              !memcmp(bb, ts[1].v, CO * sizeof(float)),
          "F16 bias exact");
    /* to_qkv: rows q, k, v; weights as 1x1 convs [3C][1][1][C] */
    int64_t qs[4] = {3 * C, 1, 1, C}, qb[1] = {3 * C};
    float *q = poisoned(3 * C * C), *qbv = poisoned(3 * C);
    CHECK(ckpt_st_read_param(st, "a.to_qkv.weight", 4, qs, q) == SG_OK, "qkv: %s", sg_last_error());
    CHECK(!memcmp(q, ts[2].v, C * C * 4) && !memcmp(q + C * C, ts[3].v, C * C * 4) &&
              !memcmp(q + 2 * C * C, ts[4].v, C * C * 4),
          "to_qkv rows are q, k, v (v from BF16)");
    CHECK(ckpt_st_read_param(st, "a.to_qkv.bias", 1, qb, qbv) == SG_OK &&
              !memcmp(qbv, ts[5].v, C * 4) && !memcmp(qbv + C, ts[6].v, C * 4) &&
              !memcmp(qbv + 2 * C, ts[7].v, C * 4),
          "to_qkv bias");
    int64_t os[4] = {C, 1, 1, C};
    float *ow = poisoned(C * C);
    CHECK(ckpt_st_read_param(st, "a.to_out.0.weight", 4, os, ow) == SG_OK &&
              !memcmp(ow, ts[8].v, C * C * 4),
          "to_out.0 Linear -> 1x1 conv");
    CHECK(ckpt_st_first_unused(st) >= 0, "unused tensors are reported");
    /* errors: a missing tensor, a misshapen one (named, with both shapes) */
    int64_t wrong[4] = {CO, K, K, CI + 1};
    CHECK(ckpt_st_read_param(st, "conv.weight", 4, wrong, w) == SG_ERR &&
              strstr(sg_last_error(), "'conv.weight' is [5,3,3,3]") &&
              strstr(sg_last_error(), "[5,4,3,3]"),
          "misshapen: %s", sg_last_error());
    CHECK(ckpt_st_read_param(st, "nope.weight", 1, bs, bb) == SG_ERR &&
              strstr(sg_last_error(), "no tensor 'nope.weight'"),
          "missing: %s", sg_last_error());
    int64_t g1[1] = {C}, l2[2] = {7, C};
    float *gg = poisoned(C), *ll = poisoned(7 * C);
    CHECK(ckpt_st_read_param(st, "a.group_norm.weight", 1, g1, gg) == SG_OK &&
              ckpt_st_read_param(st, "lin.weight", 2, l2, ll) == SG_OK &&
              !memcmp(ll, ts[10].v, 7 * C * 4) && ckpt_st_first_unused(st) < 0,
          "plain tensors; then nothing is left unused");
    ckpt_st_close(st);

    /* every truncation and every single-byte header change: refused or in bounds */
    char cpath[600];
    snprintf(cpath, sizeof cpath, "%s/c.safetensors", dir);
    int refused_named = 1, opened = 0;
    for (size_t len = 0; len < size; len++) {
        spit(cpath, b, len);
        ckpt_st *c = ckpt_st_open(cpath);
        if (c) opened++;
        if (!c && !strstr(sg_last_error(), "c.safetensors")) refused_named = 0;
        ckpt_st_close(c);
    }
    CHECK(opened == 0 && refused_named, "every truncation refused with the file named (%d opened)",
          opened);
    uint64_t hl = 0;
    for (int k = 0; k < 8; k++) hl |= (uint64_t)b[k] << (8 * k);
    uint8_t *m = malloc(size);
    for (size_t pos = 0; pos < 8 + hl; pos++) {
        memcpy(m, b, size);
        m[pos] ^= (uint8_t)(1 + sg_test_next(&s) % 255);
        spit(cpath, m, size);
        ckpt_st *c = ckpt_st_open(cpath);
        if (c) { /* still a valid file: every tensor reads within bounds */
            for (int i = 0; i < ckpt_st_count(c); i++) {
                int64_t one[1] = {1};
                float tmp[1];
                (void)ckpt_st_read_param(c, ckpt_st_name(c, i), 1, one, tmp);
            }
        } else if (!strstr(sg_last_error(), "c.safetensors")) {
            refused_named = 0;
        }
        ckpt_st_close(c);
    }
    CHECK(refused_named, "header byte changes: refused with the file named");
    /* named bad headers */
    struct {
        const char *json, *why;
    } bad_hdr[] = {
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", "2 elements"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,400]}}", "outside"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", "outside"},
        {"{\"t\":{\"dtype\":\"Q4\",\"shape\":[1],\"data_offsets\":[0,4]}}", "unknown dtype"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", "bad shape"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}",
         "bad shape"},
        {"{\"t\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", "lacks"},
        {"[1]", "not a JSON object"},
    };
    for (int i = 0; i < SG_ARRAY_LEN(bad_hdr); i++) {
        size_t hl2 = strlen(bad_hdr[i].json);
        uint8_t f[512] = {0};
        for (int k = 0; k < 8; k++) f[k] = (uint8_t)((uint64_t)hl2 >> (8 * k));
        memcpy(f + 8, bad_hdr[i].json, hl2);
        spit(cpath, f, 8 + hl2 + 8); /* 8 data bytes */
        ckpt_st *c = ckpt_st_open(cpath);
        CHECK(!c && strstr(sg_last_error(), bad_hdr[i].why), "bad header %d: %s", i,
              c ? "accepted" : sg_last_error());
        ckpt_st_close(c);
    }
    free(m), free(b), free(w), free(bb), free(q), free(qbv), free(ow), free(gg), free(ll);
    for (int i = 0; i < n; i++) free(ts[i].v);
}

static const char *TINY =
    "{\"model\":\"unet_tiny\",\"img\":16,\"in_ch\":3,\"ch\":32,\"ch_mult\":[1,2],\"nrb\":1,"
    "\"attn_res\":[8],\"heads\":1,\"head_ch\":0,\"groups\":8,\"dropout\":0.1,\"resample_conv\":1,"
    "\"down_pad\":\"same\",\"batch\":4,\"precision\":\"fp32\",\"T\":1000,\"beta1\":1e-4,"
    "\"betaT\":0.02}";

static void write_file(const char *path, const char *text) {
    spit(path, (const uint8_t *)text, strlen(text));
}

static void test_configs(void) {
    char unet[8192], back[4096], path[700], sub[600];
    CHECK(ckpt_diffusers_unet_config(TINY, unet, sizeof unet) == SG_OK, "tiny: %s",
          sg_last_error());
    CHECK(strstr(unet, "\"downsample_padding\": 0") && strstr(unet, "\"flip_sin_to_cos\": false") &&
              strstr(unet, "\"freq_shift\": 1") && strstr(unet, "\"norm_eps\": 1e-06") &&
              strstr(unet, "\"attention_head_dim\": null") &&
              strstr(unet, "[\"DownBlock2D\", \"AttnDownBlock2D\"]") &&
              strstr(unet, "[\"AttnUpBlock2D\", \"UpBlock2D\"]"),
          "tiny's diffusers config:\n%s", unet);
    snprintf(sub, sizeof sub, "%s/dm", dir);
    mkdir(sub, 0755);
    snprintf(path, sizeof path, "%s/config.json", sub);
    write_file(path, unet);
    CHECK(ckpt_diffusers_to_config(sub, back, sizeof back) == SG_OK, "read back: %s",
          sg_last_error());
    CHECK(ckpt_config_check_arch(TINY, back, "dm") == SG_OK, "same architecture: %s\n%s",
          sg_last_error(), back);
    /* the scheduler's T and betas come back */
    snprintf(path, sizeof path, "%s/scheduler_config.json", sub);
    write_file(path, "{\"num_train_timesteps\": 500, \"beta_start\": 0.001, \"beta_end\": 0.03}");
    CHECK(ckpt_diffusers_to_config(sub, back, sizeof back) == SG_OK && strstr(back, "\"T\":500") &&
              strstr(back, "\"beta1\":0.001"),
          "schedule: %s", back);
    /* cosine (diffusers' squaredcos_cap_v2): T from the file, its beta_start / beta_end (which
     * diffusers does not read for it) not taken: the config's betas stay DDPM's, unused */
    write_file(path, "{\"beta_schedule\": \"squaredcos_cap_v2\", \"num_train_timesteps\": 4000, "
                     "\"beta_start\": 0.005, \"beta_end\": 0.05}");
    CHECK(ckpt_diffusers_to_config(sub, back, sizeof back) == SG_OK &&
              strstr(back, "\"beta_schedule\":\"cosine\"") && strstr(back, "\"T\":4000") &&
              strstr(back, "\"beta1\":0.0001,") && strstr(back, "\"betaT\":0.02"),
          "cosine schedule: %s (%s)", back, sg_last_error());
    write_file(path, "{\"beta_schedule\": \"linear\"}");
    CHECK(ckpt_diffusers_to_config(sub, back, sizeof back) == SG_OK &&
              !strstr(back, "beta_schedule"),
          "linear: no beta_schedule key (the default): %s", back);
    /* what stepgraph does not train is refused, naming the field and what it takes */
    write_file(path, "{\"beta_schedule\": \"scaled_linear\"}");
    CHECK(ckpt_diffusers_to_config(sub, back, sizeof back) == SG_ERR &&
              strstr(sg_last_error(), "\"beta_schedule\" is \"scaled_linear\"") &&
              strstr(sg_last_error(), "squaredcos_cap_v2"),
          "scaled_linear refused: %s", sg_last_error());
    /* zero terminal SNR: the betas rescaled (zero_snr 1); false is DDPM's betas; not a
     * boolean: refused, named */
    write_file(path, "{\"rescale_betas_zero_snr\": true, \"prediction_type\": \"v_prediction\"}");
    CHECK(ckpt_diffusers_to_config(sub, back, sizeof back) == SG_OK &&
              strstr(back, "\"zero_snr\":1") && strstr(back, "\"prediction\":\"v\""),
          "rescale_betas_zero_snr true: %s (%s)", back, sg_last_error());
    write_file(path, "{\"rescale_betas_zero_snr\": false, \"timestep_spacing\": \"leading\"}");
    CHECK(ckpt_diffusers_to_config(sub, back, sizeof back) == SG_OK && !strstr(back, "zero_snr"),
          "rescale_betas_zero_snr false and a spacing: read (%s)", sg_last_error());
    write_file(path, "{\"rescale_betas_zero_snr\": \"yes\"}");
    CHECK(ckpt_diffusers_to_config(sub, back, sizeof back) == SG_ERR &&
              strstr(sg_last_error(), "\"rescale_betas_zero_snr\" is \"yes\", not a boolean"),
          "rescale_betas_zero_snr \"yes\" refused: %s", sg_last_error());
    /* v prediction comes back; other prediction types are refused, named */
    write_file(path, "{\"prediction_type\": \"v_prediction\"}");
    CHECK(ckpt_diffusers_to_config(sub, back, sizeof back) == SG_OK &&
              strstr(back, "\"prediction\":\"v\""),
          "v_prediction: %s (%s)", back, sg_last_error());
    write_file(path, "{\"prediction_type\": \"sample\"}");
    CHECK(ckpt_diffusers_to_config(sub, back, sizeof back) == SG_ERR &&
              strstr(sg_last_error(), "\"prediction_type\" is \"sample\"") &&
              strstr(sg_last_error(), "v_prediction"),
          "prediction_type sample refused: %s", sg_last_error());
    write_file(path, "{\"beta_schedule\": 3}");
    CHECK(ckpt_diffusers_to_config(sub, back, sizeof back) == SG_ERR &&
              strstr(sg_last_error(), "\"beta_schedule\" is 3"),
          "a number refused: %s", sg_last_error());
    unlink(path);

    /* each field stepgraph does not compute is named (absent keys: diffusers' defaults) */
    struct {
        const char *from, *to, *named;
    } edits[] = {
        {"\"flip_sin_to_cos\": false", "\"flip_sin_to_cos\": true", "flip_sin_to_cos"},
        {"\"freq_shift\": 1,\n", "", "freq_shift"},
        {"\"norm_eps\": 1e-06", "\"norm_eps\": 1e-05", "norm_eps"},
        {"\"act_fn\": \"silu\"", "\"act_fn\": \"gelu\"", "act_fn"},
        {"\"AttnUpBlock2D\", \"UpBlock2D\"", "\"UpBlock2D\", \"UpBlock2D\"", "one path only"},
        {"\"out_channels\": 3", "\"out_channels\": 6", "out_channels"},
    };
    for (int i = 0; i < SG_ARRAY_LEN(edits); i++) {
        char mod[8192];
        const char *at = strstr(unet, edits[i].from);
        CHECK(at != NULL, "edit %d finds '%s'", i, edits[i].from);
        if (!at) continue;
        snprintf(mod, sizeof mod, "%.*s%s%s", (int)(at - unet), unet, edits[i].to,
                 at + strlen(edits[i].from));
        snprintf(path, sizeof path, "%s/config.json", sub);
        write_file(path, mod);
        CHECK(ckpt_diffusers_to_config(sub, back, sizeof back) == SG_ERR &&
                  strstr(sg_last_error(), edits[i].named),
              "edit %d refused naming %s: %s", i, edits[i].named, sg_last_error());
    }
    /* architecture differences are named */
    const char *ch64 = "{\"model\":\"x\",\"img\":16,\"in_ch\":3,\"ch\":64,\"ch_mult\":[1,2],"
                       "\"nrb\":1,\"attn_res\":[8],\"heads\":1,\"head_ch\":0,\"groups\":8,"
                       "\"dropout\":0,\"resample_conv\":1,\"down_pad\":\"same\",\"T\":1000,"
                       "\"beta1\":1e-4,\"betaT\":0.02}";
    CHECK(ckpt_config_check_arch(TINY, ch64, "W") == SG_ERR &&
              strstr(sg_last_error(), "ch is 64 there, 32 here"),
          "ch: %s", sg_last_error());
    const char *old = "{\"model\":\"x\",\"img\":16,\"in_ch\":3,\"ch\":32,\"ch_mult\":[1,2],"
                      "\"nrb\":1,\"attn_res\":[8],\"heads\":1,\"head_ch\":0,\"groups\":8,"
                      "\"dropout\":0,\"resample_conv\":1,\"T\":1000,\"beta1\":1e-4,\"betaT\":0.02}";
    CHECK(ckpt_config_check_arch(TINY, old, "W") == SG_ERR &&
              strstr(sg_last_error(), "down_pad is \"symmetric\" there"),
          "no down_pad means symmetric: %s", sg_last_error());
    const char *head_ch = "{\"model\":\"x\",\"img\":16,\"in_ch\":3,\"ch\":32,\"ch_mult\":[1,2],"
                          "\"nrb\":1,\"attn_res\":[8],\"heads\":0,\"head_ch\":64,\"groups\":8,"
                          "\"dropout\":0,\"resample_conv\":1,\"down_pad\":\"same\",\"T\":1000,"
                          "\"beta1\":1e-4,\"betaT\":0.02}";
    CHECK(ckpt_config_check_arch(TINY, head_ch, "W") == SG_OK,
          "64 channels per head on 64-channel blocks is one head: %s", sg_last_error());
    /* what diffusers cannot express */
    const char *pool =
        "{\"model\":\"x\",\"img\":16,\"in_ch\":3,\"ch\":32,\"ch_mult\":[1,2],"
        "\"nrb\":1,\"attn_res\":[],\"heads\":1,\"head_ch\":0,\"groups\":8,"
        "\"dropout\":0,\"resample_conv\":0,\"T\":1000,\"beta1\":1e-4,\"betaT\":0.02}";
    CHECK(ckpt_diffusers_unet_config(pool, unet, sizeof unet) == SG_ERR &&
              strstr(sg_last_error(), "resample_conv 0"),
          "pooling refused: %s", sg_last_error());
    const char *heads2 = "{\"model\":\"x\",\"img\":16,\"in_ch\":3,\"ch\":32,\"ch_mult\":[1,2],"
                         "\"nrb\":1,\"attn_res\":[16],\"heads\":2,\"head_ch\":0,\"groups\":8,"
                         "\"dropout\":0,\"resample_conv\":1,\"T\":1000,\"beta1\":1e-4,"
                         "\"betaT\":0.02}";
    CHECK(ckpt_diffusers_unet_config(heads2, unet, sizeof unet) == SG_ERR &&
              strstr(sg_last_error(), "attention_head_dim"),
          "2 heads of 16 and of 32 channels refused: %s", sg_last_error());
}

int main(void) {
    if (!mkdtemp(dir)) return fprintf(stderr, "mkdtemp\n"), 1;
    test_layouts();
    test_configs();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
    return sg_test_end();
}
