/* test_ckpt_fixture.c — writes the checkpoints the CLI and export tests read (a ctest fixture).
 *
 * The tensors are those of a small UNet named as in docs/model.md (the unet_tiny config:
 * img 16, in_ch 3, ch 32, ch_mult 1,2, nrb 1, attention at 8x8 and in the middle block), with
 * fresh random values: parameters, "ema:" copies, "adam_m:" / "adam_v:" moments and a few
 * state tensors. Files written to DIR:
 *   a.sgck          the checkpoint
 *   a_copy.sgck     the same tensors and metadata written again (bitwise equal file)
 *   b.sgck          a with one parameter element changed and step + 1
 *   corrupt.sgck    a with one byte flipped inside the payload of the tensor named in
 *                   corrupt_tensor.txt
 * usage: test_ckpt_fixture DIR
 */
#include <sys/stat.h>

#include "checkpoints/ckpt.h"
#include "tests/sg_test.h"

#define MAXP 512

typedef struct {
    char name[MAXP][96];
    int ndim[MAXP];
    int64_t shape[MAXP][4];
    int n;
} param_list;

static void param(param_list *p, const char *name, int ndim, int64_t a, int64_t b, int64_t c,
                  int64_t d) {
    snprintf(p->name[p->n], sizeof p->name[0], "%s", name);
    p->ndim[p->n] = ndim;
    int64_t s[4] = {a, b, c, d};
    memcpy(p->shape[p->n], s, sizeof s);
    p->n++;
}

static void vec(param_list *p, const char *prefix, const char *what, int64_t n) {
    char nm[96];
    snprintf(nm, sizeof nm, "%s%s%s.weight", prefix, *prefix ? "." : "", what);
    param(p, nm, 1, n, 0, 0, 0);
    snprintf(nm, sizeof nm, "%s%s%s.bias", prefix, *prefix ? "." : "", what);
    param(p, nm, 1, n, 0, 0, 0);
}

static void conv(param_list *p, const char *prefix, const char *what, int64_t co, int64_t k,
                 int64_t ci) {
    char nm[96];
    snprintf(nm, sizeof nm, "%s%s%s.weight", prefix, *prefix ? "." : "", what);
    param(p, nm, 4, co, k, k, ci);
    snprintf(nm, sizeof nm, "%s%s%s.bias", prefix, *prefix ? "." : "", what);
    param(p, nm, 1, co, 0, 0, 0);
}

static void linear(param_list *p, const char *prefix, const char *what, int64_t out, int64_t in) {
    char nm[96];
    snprintf(nm, sizeof nm, "%s.%s.weight", prefix, what);
    param(p, nm, 2, out, in, 0, 0);
    snprintf(nm, sizeof nm, "%s.%s.bias", prefix, what);
    param(p, nm, 1, out, 0, 0, 0);
}

static void resblock(param_list *p, const char *prefix, int64_t in, int64_t c, int64_t temb) {
    vec(p, prefix, "norm1", in);
    conv(p, prefix, "conv1", c, 3, in);
    linear(p, prefix, "time_emb_proj", c, temb);
    vec(p, prefix, "norm2", c);
    conv(p, prefix, "conv2", c, 3, c);
    if (in != c) conv(p, prefix, "conv_shortcut", c, 1, in);
}

static void attn(param_list *p, const char *prefix, int64_t c) {
    vec(p, prefix, "group_norm", c);
    conv(p, prefix, "to_qkv", 3 * c, 1, c);
    conv(p, prefix, "to_out.0", c, 1, c);
}

/* the unet_tiny parameters, in the order of docs/model.md */
static void unet_tiny(param_list *p, int64_t ch) {
    const int64_t img = 16, in_ch = 3, mult[2] = {1, 2}, nrb = 1, attn_res = 8;
    const int levels = 2;
    int64_t temb = 4 * ch;
    char pre[96];
    linear(p, "time_embedding", "linear_1", temb, ch);
    linear(p, "time_embedding", "linear_2", temb, temb);
    conv(p, "", "conv_in", ch, 3, in_ch);
    int64_t hs[16], nhs = 0, h = ch;
    hs[nhs++] = ch;
    for (int i = 0; i < levels; i++) {
        int64_t c = ch * mult[i], r = img >> i;
        for (int j = 0; j < nrb; j++) {
            snprintf(pre, sizeof pre, "down_blocks.%d.resnets.%d", i, j);
            resblock(p, pre, h, c, temb);
            h = c;
            if (r == attn_res) {
                snprintf(pre, sizeof pre, "down_blocks.%d.attentions.%d", i, j);
                attn(p, pre, c);
            }
            hs[nhs++] = h;
        }
        if (i != levels - 1) {
            snprintf(pre, sizeof pre, "down_blocks.%d.downsamplers.0", i);
            conv(p, pre, "conv", h, 3, h);
            hs[nhs++] = h;
        }
    }
    resblock(p, "mid_block.resnets.0", h, h, temb);
    attn(p, "mid_block.attentions.0", h);
    resblock(p, "mid_block.resnets.1", h, h, temb);
    for (int i = levels - 1; i >= 0; i--) {
        int k = levels - 1 - i;
        int64_t c = ch * mult[i], r = img >> i;
        for (int j = 0; j < nrb + 1; j++) {
            snprintf(pre, sizeof pre, "up_blocks.%d.resnets.%d", k, j);
            resblock(p, pre, h + hs[--nhs], c, temb);
            h = c;
            if (r == attn_res) {
                snprintf(pre, sizeof pre, "up_blocks.%d.attentions.%d", k, j);
                attn(p, pre, c);
            }
        }
        if (i != 0) {
            snprintf(pre, sizeof pre, "up_blocks.%d.upsamplers.0", k);
            conv(p, pre, "conv", h, 3, h);
        }
    }
    vec(p, "", "conv_norm_out", h);
    conv(p, "", "conv_out", in_ch, 3, h);
}

typedef struct {
    ckpt_tensor_desc d[4 * MAXP + 8];
    char names[4 * MAXP + 8][128];
    float *data[4 * MAXP + 8];
    int n;
} fixture_set;

static const char *const prefixes[4] = {"", "ema:", "adam_m:", "adam_v:"};
static const int roles[4] = {ROLE_PARAM, ROLE_EMA, ROLE_ADAM_M, ROLE_ADAM_V};

static void build(fixture_set *s, const param_list *p, uint64_t seed) {
    uint64_t r = seed;
    int64_t offset = 0;
    memset(s, 0, sizeof *s);
    for (int g = 0; g < 4; g++)
        for (int i = 0; i < p->n; i++) {
            ckpt_tensor_desc *d = &s->d[s->n];
            snprintf(s->names[s->n], sizeof s->names[0], "%s%s", prefixes[g], p->name[i]);
            int64_t numel = 1;
            for (int k = 0; k < p->ndim[i]; k++)
                numel *= p->shape[i][k], d->shape[k] = p->shape[i][k];
            float *v = malloc((size_t)numel * 4);
            float scale = g == 3 ? 1e-6f : g == 2 ? 1e-3f : 0.2f;
            for (int64_t k = 0; k < numel; k++)
                v[k] = g == 3 ? sg_test_uniform(&r, 0, scale) : sg_test_uniform(&r, -scale, scale);
            d->name = s->names[s->n];
            d->role = roles[g];
            d->dtype = DT_F32;
            d->ndim = p->ndim[i];
            d->data = v;
            d->bytes = numel * 4;
            d->offset = offset;
            offset += SG_ALIGN_UP(d->bytes, 256);
            s->data[s->n++] = v;
        }
    /* state: step counter and rng seed */
    static int32_t step[1] = {1000};
    static uint32_t rng[2] = {42, 7};
    ckpt_tensor_desc st[2] = {
        {.name = "state.step",
         .role = ROLE_STATE,
         .dtype = DT_I32,
         .ndim = 0,
         .data = step,
         .bytes = 4,
         .offset = offset},
        {.name = "state.rng",
         .role = ROLE_STATE,
         .dtype = DT_U32,
         .ndim = 1,
         .shape = {2},
         .data = rng,
         .bytes = 8,
         .offset = offset + 256},
    };
    s->d[s->n++] = st[0];
    s->d[s->n++] = st[1];
}

/* a literal, so that -Wformat=2 can check the snprintf calls below */
#define META_FMT                                                                                   \
    "{\"format\":\"stepgraph-checkpoint\",\"model\":\"unet_tiny\",\"config\":{\"img\":16,"         \
    "\"in_ch\":3,\"ch\":32,\"ch_mult\":[1,2],\"nrb\":1,\"attn_res\":[8],\"heads\":1,"              \
    "\"groups\":8,\"dropout\":0.1,\"resample_conv\":true,\"batch\":4},\"plan_hash\":"              \
    "\"0123456789abcdef\",\"step\":%d,\"seed\":42,\"data\":{\"epoch\":3,\"position\":1024},"       \
    "\"precision\":\"f32\",\"env\":{\"backend\":\"cpu\",\"gpu\":\"\",\"sm_count\":0,"              \
    "\"cuda\":\"\",\"cublas\":\"\",\"build_id\":\"test\"}}"

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_ckpt_fixture DIR\n");
        return 2;
    }
    const char *dir = argv[1];
    mkdir(dir, 0755);
    static param_list p;
    unet_tiny(&p, 32);
    static fixture_set s;
    build(&s, &p, 2024);
    char path[512], meta[1024];
    snprintf(meta, sizeof meta, META_FMT, 1000);
    snprintf(path, sizeof path, "%s/a.sgck", dir);
    CHECK(ckpt_write(path, meta, s.d, s.n, NULL) == SG_OK, "a: %s", sg_last_error());
    snprintf(path, sizeof path, "%s/a_copy.sgck", dir);
    CHECK(ckpt_write(path, meta, s.d, s.n, NULL) == SG_OK, "a_copy: %s", sg_last_error());

    /* b: one element of one parameter changed, step + 1 */
    int victim = 0;
    for (int i = 0; i < s.n; i++)
        if (!strcmp(s.d[i].name, "down_blocks.1.attentions.0.to_qkv.weight")) victim = i;
    s.data[victim][5] += 0.25f;
    snprintf(meta, sizeof meta, META_FMT, 1001);
    snprintf(path, sizeof path, "%s/b.sgck", dir);
    CHECK(ckpt_write(path, meta, s.d, s.n, NULL) == SG_OK, "b: %s", sg_last_error());

    /* corrupt: flip one byte in the middle of a payload of a */
    snprintf(path, sizeof path, "%s/a.sgck", dir);
    ckpt_file *f = ckpt_open(path);
    CHECK(f != NULL, "reopen a: %s", sg_last_error());
    if (f) {
        const char *damaged = "mid_block.resnets.1.conv1.weight";
        int k = ckpt_find(f, damaged);
        ckpt_entry e;
        ckpt_tensor_info(f, k, &e);
        int64_t at = e.file_offset + e.stored_bytes / 2;
        ckpt_close(f);
        FILE *in = fopen(path, "rb");
        fseek(in, 0, SEEK_END);
        long size = ftell(in);
        fseek(in, 0, SEEK_SET);
        uint8_t *b = malloc((size_t)size);
        CHECK(fread(b, 1, (size_t)size, in) == (size_t)size, "read a");
        fclose(in);
        b[at] ^= 0x10;
        snprintf(path, sizeof path, "%s/corrupt.sgck", dir);
        FILE *out = fopen(path, "wb");
        fwrite(b, 1, (size_t)size, out);
        fclose(out);
        free(b);
        snprintf(path, sizeof path, "%s/corrupt_tensor.txt", dir);
        out = fopen(path, "w");
        fprintf(out, "%s\n", damaged);
        fclose(out);
    }
    for (int i = 0; i < s.n - 2; i++) free(s.data[i]);
    printf("%d parameters (%d tensors) written to %s\n", p.n, s.n, dir);
    return sg_test_end();
}
