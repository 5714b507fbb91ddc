/* ckpt_bench — checkpoint speed and size on a real training state.
 *
 *   build/ckpt_bench                          # unet_cifar, Fashion-MNIST, 50 CPU steps
 *   build/ckpt_bench --steps 20 --reps 3 --json out.json
 *
 * Builds the model's whole training state on the CPU backend (parameters, AdamW m and v, EMA,
 * step state: what sg_exec_save writes) and measures it twice: at initialisation (m = v = 0,
 * EMA = parameters: compresses trivially) and after --steps training steps on the data (the
 * meaningful one). For each state:
 *   - save: ckpt_write at the level and thread count asked (default: the library's defaults),
 *     shuffle auto / on / off; median of --reps runs; the file size;
 *   - load: ckpt_open alone; ckpt_open + ckpt_read of every tensor on one thread (what
 *     sg_exec_load does); ckpt_open + ckpt_read_many on the same threads; medians; the bytes
 *     read back are compared with the originals;
 *   - end to end: sg_exec_save and sg_exec_load (arena download / upload included);
 *   - plain zstd of the same bytes (every tensor's raw bytes concatenated, in file order) at
 *     the same level: one-shot single-threaded, and with nbWorkers = the same thread count;
 *     sizes, compression and (single-threaded) decompression times.
 * Throughputs are raw (uncompressed) state bytes per second, GB = 1e9 bytes. Files go to
 * --dir (default /dev/shm when it exists: a tmpfs, so the disk is out of the measurement).
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "checkpoints/ckpt.h"
#include "checkpoints/ckpt_hash.h"
#include "data/dataset.h"
#include "graph/exec.h"
#include "tools/cli.h"

#define MAX_REPS 64
#define TMPFS_MAGIC_NUM 0x01021994L

static double now_s(void) {
    return cli_now_ms() / 1e3;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct {
    double med, min, max;
} tstat;

static tstat summarize(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    tstat s = {n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]), v[0], v[n - 1]};
    return s;
}

static void die(const char *what) {
    fprintf(stderr, "ckpt_bench: %s: %s\n", what, sg_last_error());
    exit(1);
}

static void loadavg(char *buf, size_t cap) {
    snprintf(buf, cap, "?");
    FILE *f = fopen("/proc/loadavg", "r");
    if (!f) return;
    if (fgets(buf, (int)cap, f)) buf[strcspn(buf, "\n")] = 0;
    fclose(f);
}

typedef struct {
    char label[32];
    int64_t step;
    float loss;
    int n;
    int64_t raw, raw_role[ROLE_COUNT], stored_role[ROLE_COUNT];
    int n_shuffled, n_raw_codec, roundtrip_ok;
    int64_t file_auto, file_on, file_off;
    tstat save_auto, save_on, save_off, open, load_serial, load_par, exec_save, exec_load;
    tstat download; /* what sg_exec_save does before ckpt_write: a fresh buffer, every tensor */
    int64_t z1_bytes, zt_bytes; /* zt_bytes < 0: zstd without multithreading */
    tstat z1_c, zt_c, z1_d;
    /* one core, whole state: what ckpt_write does per byte */
    tstat c_memcpy, c_hash, c_shuf, c_zplain, c_zshuf;
    int64_t zplain_bytes, zshuf_bytes;
} state_res;

typedef struct {
    int reps, level, threads;
    char dir[900];
} bench_opts;

/* the tensors sg_exec_save writes (exec.c's ckpt_carries), downloaded into one buffer */
static int carried(const sg_tensor *x) {
    if (x->region || x->nparts) return 0;
    return x->role == ROLE_PARAM || x->role == ROLE_ADAM_M || x->role == ROLE_ADAM_V ||
           x->role == ROLE_EMA || x->role == ROLE_STATE;
}

static void collect(sg_exec *e, ckpt_tensor_desc **dout, int *nout, unsigned char **mout,
                    int64_t *rawout) {
    const sg_graph *g = &e->plan.g;
    int n = 0;
    int64_t total = 0;
    for (int t = 0; t < g->nt; t++)
        if (carried(&g->t[t])) n++, total += g->t[t].bytes;
    ckpt_tensor_desc *d = calloc((size_t)n, sizeof *d);
    unsigned char *mem = malloc((size_t)total + 1);
    if (!d || !mem) sg_set_error("out of host memory"), die("collect");
    int k = 0;
    int64_t off = 0;
    for (int t = 0; t < g->nt; t++) {
        const sg_tensor *x = &g->t[t];
        if (!carried(x)) continue;
        if (sg_exec_read(e, t, mem + off)) die("download");
        d[k] = (ckpt_tensor_desc){.name = x->name,
                                  .role = x->role,
                                  .dtype = x->dtype,
                                  .ndim = x->ndim,
                                  .data = mem + off,
                                  .bytes = x->bytes,
                                  .offset = x->offset};
        for (int i = 0; i < x->ndim; i++) d[k].shape[i] = x->shape[i];
        off += x->bytes, k++;
    }
    *dout = d, *nout = n, *mout = mem, *rawout = total;
}

static tstat time_save(const char *path, const char *meta, const ckpt_tensor_desc *d, int n,
                       const ckpt_write_opts *o, int reps, int64_t *size) {
    double v[MAX_REPS];
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        if (ckpt_write(path, meta, d, n, o)) die("ckpt_write");
        v[r] = now_s() - t0;
        struct stat st;
        if (stat(path, &st)) sg_set_error("%s: %s", path, strerror(errno)), die("stat");
        if (r && st.st_size != *size)
            sg_set_error("file size changed between runs"), die("determinism");
        *size = st.st_size;
    }
    return summarize(v, reps);
}

/* The library's byte-plane shuffle (checkpoints/ckpt_util.c, format: docs/checkpoint-format.md),
 * copied: its own is internal to checkpoints/. */
static void shuffle(uint8_t *dst, const uint8_t *src, int64_t n, int esize) {
    if (esize == 4) {
        uint8_t *p0 = dst, *p1 = dst + n, *p2 = dst + 2 * n, *p3 = dst + 3 * n;
        for (int64_t i = 0; i < n; i++) {
            const uint8_t *q = src + 4 * i;
            p0[i] = q[0], p1[i] = q[1], p2[i] = q[2], p3[i] = q[3];
        }
    } else {
        for (int b = 0; b < esize; b++)
            for (int64_t i = 0; i < n; i++) dst[b * n + i] = src[i * esize + b];
    }
}

/* Per-core cost of each stage of a save, one thread over the whole state, tensor by tensor in
 * CKPT_DEFAULT_BLOCK blocks as ckpt_write cuts them: memcpy (memory bandwidth), XXH64, the
 * shuffle, zstd of every block unshuffled and shuffled (independent frames). */
static void breakdown(const ckpt_tensor_desc *d, int n, const unsigned char *mem, int64_t raw,
                      int level, int reps, state_res *r) {
    const int64_t blk = CKPT_DEFAULT_BLOCK;
    size_t cap = ZSTD_compressBound((size_t)blk);
    uint8_t *copy = malloc((size_t)raw + 1), *scratch = malloc((size_t)blk), *out = malloc(cap);
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    if (!copy || !scratch || !out || !cc) sg_set_error("out of memory"), die("breakdown");
    double vm[MAX_REPS], vh[MAX_REPS], vs[MAX_REPS], vzp[MAX_REPS], vzs[MAX_REPS];
    volatile uint64_t sink = 0;
    for (int rep = 0; rep < reps; rep++) {
        double t0 = now_s();
        memcpy(copy, mem, (size_t)raw);
        vm[rep] = now_s() - t0;
        t0 = now_s();
        for (int i = 0; i < n; i++) sink ^= ckpt_xxh64(d[i].data, (size_t)d[i].bytes, 0);
        vh[rep] = now_s() - t0;
        double ts = 0, tzp = 0, tzs = 0;
        int64_t zp = 0, zs = 0;
        for (int i = 0; i < n; i++) {
            int es = sg_dtype_size(d[i].dtype);
            for (int64_t off = 0; off < d[i].bytes; off += blk) {
                int64_t len = d[i].bytes - off < blk ? d[i].bytes - off : blk;
                const uint8_t *src = (const uint8_t *)d[i].data + off;
                t0 = now_s();
                size_t z = ZSTD_compressCCtx(cc, out, cap, src, (size_t)len, level);
                double t1 = now_s();
                if (ZSTD_isError(z)) sg_set_error("%s", ZSTD_getErrorName(z)), die("zstd");
                tzp += t1 - t0, zp += (int64_t)z;
                if (es > 1) {
                    shuffle(scratch, src, len / es, es);
                    double t2 = now_s();
                    z = ZSTD_compressCCtx(cc, out, cap, scratch, (size_t)len, level);
                    if (ZSTD_isError(z)) sg_set_error("%s", ZSTD_getErrorName(z)), die("zstd");
                    ts += t2 - t1, tzs += now_s() - t2;
                }
                zs += (int64_t)z;
            }
        }
        vs[rep] = ts, vzp[rep] = tzp, vzs[rep] = tzs;
        r->zplain_bytes = zp, r->zshuf_bytes = zs;
    }
    (void)sink;
    r->c_memcpy = summarize(vm, reps);
    r->c_hash = summarize(vh, reps);
    r->c_shuf = summarize(vs, reps);
    r->c_zplain = summarize(vzp, reps);
    r->c_zshuf = summarize(vzs, reps);
    ZSTD_freeCCtx(cc);
    free(copy);
    free(scratch);
    free(out);
}

/* plain zstd of the same bytes at the same level: one thread, then the library's threads */
static void bench_plain_zstd(const bench_opts *b, const unsigned char *mem, unsigned char *back,
                             int64_t raw, state_res *r) {
    size_t bound = ZSTD_compressBound((size_t)raw);
    unsigned char *z = malloc(bound);
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    ZSTD_DCtx *dc = ZSTD_createDCtx();
    if (!z || !cc || !dc) sg_set_error("out of memory"), die("zstd");
    double v1[MAX_REPS], vt[MAX_REPS], vd[MAX_REPS];
    for (int rep = 0; rep < b->reps; rep++) {
        double t0 = now_s();
        size_t zs = ZSTD_compressCCtx(cc, z, bound, mem, (size_t)raw, b->level);
        v1[rep] = now_s() - t0;
        if (ZSTD_isError(zs)) sg_set_error("%s", ZSTD_getErrorName(zs)), die("ZSTD_compress");
        r->z1_bytes = (int64_t)zs;
        t0 = now_s();
        size_t ds = ZSTD_decompressDCtx(dc, back, (size_t)raw, z, zs);
        vd[rep] = now_s() - t0;
        if (ZSTD_isError(ds) || ds != (size_t)raw || memcmp(back, mem, (size_t)raw))
            sg_set_error("plain zstd round trip failed"), die("ZSTD_decompress");
    }
    r->z1_c = summarize(v1, b->reps);
    r->z1_d = summarize(vd, b->reps);
    ZSTD_CCtx_reset(cc, ZSTD_reset_session_and_parameters);
    r->zt_bytes = -1;
    if (!ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, b->level)) &&
        !ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_nbWorkers, b->threads))) {
        for (int rep = 0; rep < b->reps; rep++) {
            double t0 = now_s();
            size_t zs = ZSTD_compress2(cc, z, bound, mem, (size_t)raw);
            vt[rep] = now_s() - t0;
            if (ZSTD_isError(zs)) sg_set_error("%s", ZSTD_getErrorName(zs)), die("ZSTD_compress2");
            r->zt_bytes = (int64_t)zs;
        }
        r->zt_c = summarize(vt, b->reps);
    }
    ZSTD_freeCCtx(cc);
    ZSTD_freeDCtx(dc);
    free(z);
}

static void bench_state(sg_exec *e, const bench_opts *b, state_res *r) {
    ckpt_tensor_desc *d;
    unsigned char *mem;
    int n;
    int64_t raw;
    r->step = sg_exec_step_count(e);
    collect(e, &d, &n, &mem, &raw);
    r->n = n, r->raw = raw;
    double v_dl[MAX_REPS];
    for (int rep = 0; rep < b->reps; rep++) {
        ckpt_tensor_desc *d2;
        unsigned char *m2;
        int n2;
        int64_t raw2;
        double t0 = now_s();
        collect(e, &d2, &n2, &m2, &raw2);
        free(d2);
        free(m2);
        v_dl[rep] = now_s() - t0;
    }
    r->download = summarize(v_dl, b->reps);
    for (int i = 0; i < n; i++) r->raw_role[d[i].role] += d[i].bytes;
    char *meta = malloc(8192);
    if (!meta || sg_exec_meta_json(e, "\"bench\":\"ckpt_bench\"", meta, 8192)) die("metadata");
    char path[1000];
    snprintf(path, sizeof path, "%s/ckpt_bench.sgck", b->dir);
    fprintf(stderr, "ckpt_bench: %s: %d tensors, %.1f MB raw\n", r->label, n, raw / 1e6);

    /* save: the library's default shuffle (auto), then forced on / off */
    ckpt_write_opts o = {.level = b->level, .threads = b->threads, .shuffle = CKPT_SHUFFLE_ON};
    r->save_on = time_save(path, meta, d, n, &o, b->reps, &r->file_on);
    o.shuffle = CKPT_SHUFFLE_OFF;
    r->save_off = time_save(path, meta, d, n, &o, b->reps, &r->file_off);
    o.shuffle = CKPT_SHUFFLE_AUTO;
    r->save_auto = time_save(path, meta, d, n, &o, b->reps, &r->file_auto);
    fprintf(stderr, "ckpt_bench: %s: saved, %.1f MB\n", r->label, r->file_auto / 1e6);

    /* load the auto file: open alone; open + serial reads; open + parallel reads */
    unsigned char *back = malloc((size_t)raw + 1);
    int *idx = malloc(sizeof(int) * (size_t)n);
    void **dst = malloc(sizeof(void *) * (size_t)n);
    int64_t *cap = malloc(sizeof(int64_t) * (size_t)n);
    if (!back || !idx || !dst || !cap) sg_set_error("out of host memory"), die("load buffers");
    /* where each saved tensor is in the file, and where it goes in `back` (its place in mem) */
    ckpt_file *f = ckpt_open(path);
    if (!f) die("ckpt_open");
    if (ckpt_count(f) != n) sg_set_error("tensor count differs"), die("load");
    for (int k = 0; k < n; k++) {
        if ((idx[k] = ckpt_find(f, d[k].name)) < 0)
            sg_set_error("%s missing", d[k].name), die("load");
        dst[k] = back + ((const unsigned char *)d[k].data - mem), cap[k] = d[k].bytes;
    }
    ckpt_close(f);
    double v_open[MAX_REPS], v_ser[MAX_REPS], v_par[MAX_REPS];
    for (int rep = 0; rep < b->reps; rep++) {
        double t0 = now_s();
        if (!(f = ckpt_open(path))) die("ckpt_open");
        v_open[rep] = now_s() - t0;
        ckpt_close(f);

        memset(back, 0xA5, (size_t)raw);
        t0 = now_s();
        if (!(f = ckpt_open(path))) die("ckpt_open");
        for (int k = 0; k < n; k++)
            if (ckpt_read(f, idx[k], dst[k], cap[k])) die("ckpt_read");
        ckpt_close(f);
        v_ser[rep] = now_s() - t0;
        if (memcmp(back, mem, (size_t)raw)) sg_set_error("bytes differ"), die("ckpt_read");

        memset(back, 0xA5, (size_t)raw);
        t0 = now_s();
        if (!(f = ckpt_open(path))) die("ckpt_open");
        if (ckpt_read_many(f, idx, dst, cap, n, b->threads)) die("ckpt_read_many");
        ckpt_close(f);
        v_par[rep] = now_s() - t0;
    }
    r->open = summarize(v_open, b->reps);
    r->load_serial = summarize(v_ser, b->reps);
    r->load_par = summarize(v_par, b->reps);
    r->roundtrip_ok = memcmp(back, mem, (size_t)raw) == 0;

    /* what the index says: stored bytes per role, shuffled tensors, raw-stored tensors */
    if (!(f = ckpt_open(path))) die("ckpt_open");
    for (int i = 0; i < n; i++) {
        ckpt_entry en;
        ckpt_tensor_info(f, i, &en);
        r->stored_role[en.role] += en.stored_bytes;
        r->n_shuffled += en.shuffled;
        r->n_raw_codec += en.codec == CKPT_CODEC_RAW;
    }
    ckpt_close(f);
    unlink(path);
    fprintf(stderr, "ckpt_bench: %s: loaded\n", r->label);

    /* end to end through the executor (default options, arena copies included) */
    double v_es[MAX_REPS], v_el[MAX_REPS];
    for (int rep = 0; rep < b->reps; rep++) {
        double t0 = now_s();
        if (sg_exec_save(e, path, NULL)) die("sg_exec_save");
        v_es[rep] = now_s() - t0;
        t0 = now_s();
        if (sg_exec_load(e, path, 0, 0)) die("sg_exec_load");
        v_el[rep] = now_s() - t0;
    }
    r->exec_save = summarize(v_es, b->reps);
    r->exec_load = summarize(v_el, b->reps);
    unlink(path);

    bench_plain_zstd(b, mem, back, raw, r);
    fprintf(stderr, "ckpt_bench: %s: plain zstd done\n", r->label);
    breakdown(d, n, mem, raw, b->level, b->reps, r);
    fprintf(stderr, "ckpt_bench: %s: per-stage costs done\n", r->label);
    free(back);
    free(idx);
    free(dst);
    free(cap);
    free(meta);
    free(d);
    free(mem);
}

/* ---- output */

static double gbps(int64_t bytes, tstat t) {
    return t.med > 0 ? bytes / t.med / 1e9 : 0;
}

static void row_time(FILE *o, const char *name, const state_res *s, int ns, size_t off) {
    fprintf(o, "| %s |", name);
    for (int i = 0; i < ns; i++) {
        const tstat *t = (const tstat *)((const char *)&s[i] + off);
        fprintf(o, " %.3f s (%.3f–%.3f) = **%.2f GB/s** |", t->med, t->min, t->max,
                gbps(s[i].raw, *t));
    }
    fprintf(o, "\n");
}

static void print_table(FILE *o, const state_res *s, int ns, const bench_opts *b) {
    fprintf(o, "\n| | ");
    for (int i = 0; i < ns; i++) fprintf(o, "%s (step %lld) |", s[i].label, (long long)s[i].step);
    fprintf(o, "\n|---|");
    for (int i = 0; i < ns; i++) fprintf(o, "---|");
    fprintf(o, "\n| tensors, raw state |");
    for (int i = 0; i < ns; i++) fprintf(o, " %d, %.1f MB |", s[i].n, s[i].raw / 1e6);
    static const int roles[] = {ROLE_PARAM, ROLE_ADAM_M, ROLE_ADAM_V, ROLE_EMA, ROLE_STATE};
    for (int k = 0; k < 5; k++) {
        fprintf(o, "\n| ckpt stored / raw: %s |", ckpt_role_name(roles[k]));
        for (int i = 0; i < ns; i++)
            fprintf(o, " %.1f / %.1f MB (%.3f) |", s[i].stored_role[roles[k]] / 1e6,
                    s[i].raw_role[roles[k]] / 1e6,
                    s[i].raw_role[roles[k]]
                        ? (double)s[i].stored_role[roles[k]] / s[i].raw_role[roles[k]]
                        : 0);
    }
    fprintf(o, "\n| **ckpt file (shuffle auto, default)** |");
    for (int i = 0; i < ns; i++)
        fprintf(o, " **%.1f MB** (%.3f of raw; %d of %d tensors shuffled, %d stored raw) |",
                s[i].file_auto / 1e6, (double)s[i].file_auto / s[i].raw, s[i].n_shuffled, s[i].n,
                s[i].n_raw_codec);
    fprintf(o, "\n| ckpt file, shuffle on / off |");
    for (int i = 0; i < ns; i++)
        fprintf(o, " %.1f / %.1f MB |", s[i].file_on / 1e6, s[i].file_off / 1e6);
    fprintf(o, "\n| plain zstd -%d, 1 thread |", b->level);
    for (int i = 0; i < ns; i++) fprintf(o, " %.1f MB |", s[i].z1_bytes / 1e6);
    fprintf(o, "\n| plain zstd -%d, %d worker threads |", b->level, b->threads);
    for (int i = 0; i < ns; i++)
        if (s[i].zt_bytes >= 0)
            fprintf(o, " %.1f MB |", s[i].zt_bytes / 1e6);
        else
            fprintf(o, " (no multithreaded zstd) |");
    fprintf(o, "\n| **ckpt / plain zstd** (1 thread; %d threads) |", b->threads);
    for (int i = 0; i < ns; i++)
        fprintf(o, " **%.3f**; %.3f |", (double)s[i].file_auto / s[i].z1_bytes,
                s[i].zt_bytes > 0 ? (double)s[i].file_auto / s[i].zt_bytes : NAN);
    fprintf(o, "\n");
    row_time(o, "**save**: ckpt_write, shuffle auto", s, ns, offsetof(state_res, save_auto));
    row_time(o, "save: ckpt_write, shuffle on", s, ns, offsetof(state_res, save_on));
    row_time(o, "save: ckpt_write, shuffle off", s, ns, offsetof(state_res, save_off));
    row_time(o, "load: ckpt_open alone (validation, file checksum)", s, ns,
             offsetof(state_res, open));
    row_time(o, "**load**: ckpt_open + ckpt_read all, 1 thread", s, ns,
             offsetof(state_res, load_serial));
    char name[96];
    snprintf(name, sizeof name, "**load**: ckpt_open + ckpt_read_many, %d threads", b->threads);
    row_time(o, name, s, ns, offsetof(state_res, load_par));
    row_time(o, "sg_exec_save (download + write)", s, ns, offsetof(state_res, exec_save));
    row_time(o, "its download alone (malloc, every tensor out of the arena, free)", s, ns,
             offsetof(state_res, download));
    row_time(o, "sg_exec_load (read + upload)", s, ns, offsetof(state_res, exec_load));
    snprintf(name, sizeof name, "plain zstd -%d compress, 1 thread", b->level);
    row_time(o, name, s, ns, offsetof(state_res, z1_c));
    snprintf(name, sizeof name, "plain zstd -%d compress, %d workers", b->level, b->threads);
    row_time(o, name, s, ns, offsetof(state_res, zt_c));
    row_time(o, "plain zstd decompress, 1 thread", s, ns, offsetof(state_res, z1_d));
    fprintf(o, "| *one core, whole state, per stage of a save:* |");
    for (int i = 0; i < ns; i++) fprintf(o, " |");
    fprintf(o, "\n");
    row_time(o, "memcpy (memory bandwidth)", s, ns, offsetof(state_res, c_memcpy));
    row_time(o, "XXH64", s, ns, offsetof(state_res, c_hash));
    row_time(o, "byte-plane shuffle, 4 MiB blocks", s, ns, offsetof(state_res, c_shuf));
    snprintf(name, sizeof name, "zstd -%d, 4 MiB frames, unshuffled", b->level);
    row_time(o, name, s, ns, offsetof(state_res, c_zplain));
    snprintf(name, sizeof name, "zstd -%d, 4 MiB frames, shuffled", b->level);
    row_time(o, name, s, ns, offsetof(state_res, c_zshuf));
    fprintf(o, "| 4 MiB frames: unshuffled / shuffled size |");
    for (int i = 0; i < ns; i++)
        fprintf(o, " %.1f / %.1f MB |", s[i].zplain_bytes / 1e6, s[i].zshuf_bytes / 1e6);
    fprintf(o, "\n| loaded bytes == saved bytes |");
    for (int i = 0; i < ns; i++) fprintf(o, " %s |", s[i].roundtrip_ok ? "yes" : "**NO**");
    fprintf(o, "\n");
}

/* {"median_s", "min_s", "max_s", "GBps"} of one timing */
static json_t *json_tstat(int64_t raw, tstat t) {
    return json_pack("{s:f, s:f, s:f, s:f}", "median_s", t.med, "min_s", t.min, "max_s", t.max,
                     "GBps", gbps(raw, t));
}

static json_t *state_json(const state_res *r) {
    json_t *roles = json_object();
    for (int k = 0; k < ROLE_COUNT; k++)
        if (r->raw_role[k])
            json_object_set_new(roles, ckpt_role_name(k),
                                json_pack("{s:I, s:I}", "raw", (json_int_t)r->raw_role[k], "stored",
                                          (json_int_t)r->stored_role[k]));
    json_t *j = json_pack(
        "{s:s, s:I, s:f, s:i, s:I, s:I, s:I, s:I, s:i, s:i, s:I, s:I, s:f, s:f, s:b, s:o}", "state",
        r->label, "step", (json_int_t)r->step, "loss", isfinite(r->loss) ? (double)r->loss : -1.0,
        "tensors", r->n, "raw_bytes", (json_int_t)r->raw, "file_bytes", (json_int_t)r->file_auto,
        "file_bytes_shuffle_on", (json_int_t)r->file_on, "file_bytes_shuffle_off",
        (json_int_t)r->file_off, "shuffled_tensors", r->n_shuffled, "raw_codec_tensors",
        r->n_raw_codec, "zstd_1t_bytes", (json_int_t)r->z1_bytes, "zstd_mt_bytes",
        (json_int_t)r->zt_bytes, "ratio_vs_zstd_1t", (double)r->file_auto / r->z1_bytes,
        "ratio_vs_zstd_mt", r->zt_bytes > 0 ? (double)r->file_auto / r->zt_bytes : -1.0,
        "roundtrip_ok", r->roundtrip_ok, "stored_by_role", roles);
    const struct {
        const char *key;
        const tstat *t;
    } times[] = {{"save", &r->save_auto},
                 {"save_shuffle_on", &r->save_on},
                 {"save_shuffle_off", &r->save_off},
                 {"open", &r->open},
                 {"load_1t", &r->load_serial},
                 {"load_mt", &r->load_par},
                 {"exec_save", &r->exec_save},
                 {"exec_load", &r->exec_load},
                 {"exec_download", &r->download},
                 {"zstd_1t_compress", &r->z1_c},
                 {"zstd_mt_compress", &r->zt_c},
                 {"zstd_1t_decompress", &r->z1_d}};
    for (int i = 0; j && i < SG_ARRAY_LEN(times); i++)
        json_object_set_new(j, times[i].key, json_tstat(r->raw, *times[i].t));
    json_t *core = json_pack(
        "{s:I, s:I, s:o, s:o, s:o, s:o, s:o}", "frames_unshuffled_bytes",
        (json_int_t)r->zplain_bytes, "frames_shuffled_bytes", (json_int_t)r->zshuf_bytes, "memcpy",
        json_tstat(r->raw, r->c_memcpy), "xxh64", json_tstat(r->raw, r->c_hash), "shuffle",
        json_tstat(r->raw, r->c_shuf), "zstd_frames_unshuffled", json_tstat(r->raw, r->c_zplain),
        "zstd_frames_shuffled", json_tstat(r->raw, r->c_zshuf));
    if (j) json_object_set_new(j, "one_core", core);
    return j;
}

/* The report as JSON, through jansson: the data spec and --dir are user text (quotes,
 * backslashes, any bytes) and come out as valid JSON strings. */
static int print_json(FILE *o, const state_res *s, int ns, const bench_opts *b,
                      const sg_model_cfg *c, const char *data, int64_t nparams, int tmpfs,
                      const char *la0, const char *la1) {
    json_t *states = json_array();
    for (int i = 0; i < ns; i++) json_array_append_new(states, state_json(&s[i]));
    json_t *j =
        json_pack("{s:s, s:s, s:i, s:i, s:I, s:o, s:i, s:i, s:i, s:o, s:b, s:I, s:s, "
                  "s:s, s:o}",
                  "bench", "ckpt", "model", c->name, "in_ch", c->in_ch, "batch", c->batch, "params",
                  (json_int_t)nparams, "data", cli_json_text(data), "level", b->level, "threads",
                  b->threads, "reps", b->reps, "dir", cli_json_text(b->dir), "tmpfs", tmpfs,
                  "online_cpus", (json_int_t)sysconf(_SC_NPROCESSORS_ONLN), "loadavg_start", la0,
                  "loadavg_end", la1, "states", states);
    return cli_json_print(o, j);
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: ckpt_bench [flags]\n"
            "Checkpoint save/load throughput and size vs plain zstd, on a model's full training\n"
            "state at initialisation and after training steps on the CPU backend.\n\n"
            "  --model NAME     model preset (default unet_cifar)\n"
            "  --data SPEC      training data (default fmnist); the model's input channels\n"
            "                   follow the data unless --in-ch is given\n"
            "  --steps K        training steps before the second measurement (default 50;\n"
            "                   0: the initial state only)\n"
            "  --reps N         repetitions of every timing, median reported (default 5)\n"
            "  --level L        zstd level for ckpt and plain zstd (default %d)\n"
            "  --threads T      ckpt and zstd threads (default: online CPUs, at most 32,\n"
            "                   as ckpt_write)\n"
            "  --dir DIR        where files go (default /dev/shm if present, else /tmp)\n"
            "  --seed N         init / training seed (default 0)\n"
            "  --json FILE      also write the results as JSON ('-': stdout, table on stderr)\n"
            "model flags (default --batch 2):\n%s",
            CKPT_DEFAULT_LEVEL, sg_model_flags_help);
}

typedef struct {
    const char *data, *json;
    int64_t steps;
    uint64_t seed;
    int in_ch_set, batch_set;
} cb_args;

/* 0 parsed, 1 --help printed, 2 usage error (printed) */
static int parse_args(int argc, char **argv, cb_args *a, bench_opts *b, sg_model_cfg *cfg) {
    if (cli_model_prelude("ckpt_bench", argc, argv, "unet_cifar", cfg)) return 2;
    cli_args c;
    cli_args_init(&c, "ckpt_bench", argc, argv);
    while (cli_next(&c)) {
        int bad = 0;
        const char *v;
        if (cli_is(&c, "--help"))
            return usage(stdout), 1;
        else if (cli_is(&c, "--data"))
            bad = !(a->data = cli_value(&c));
        else if (cli_is(&c, "--json"))
            bad = !(a->json = cli_value(&c));
        else if (cli_is(&c, "--dir"))
            bad = !(v = cli_value(&c)) || snprintf(b->dir, sizeof b->dir, "%s", v) < 0;
        else if (cli_is(&c, "--seed"))
            bad = cli_u64(&c, &a->seed);
        else if (cli_is(&c, "--steps"))
            bad = cli_i64(&c, 0, 1000000, &a->steps);
        else if (cli_is(&c, "--reps"))
            bad = cli_int(&c, 1, MAX_REPS, &b->reps);
        else if (cli_is(&c, "--level"))
            bad = cli_int(&c, -131072, 22, &b->level);
        else if (cli_is(&c, "--threads"))
            bad = cli_int(&c, 0, 32, &b->threads);
        else {
            a->in_ch_set |= cli_is(&c, "--in-ch"), a->batch_set |= cli_is(&c, "--batch");
            int r = cli_model_flag(&c, cfg);
            if (!r) return cli_unknown(&c);
            bad = r < 0;
        }
        if (bad) return 2;
    }
    return 0;
}

int main(int argc, char **argv) {
    cb_args a = {.data = "fmnist", .steps = 50};
    bench_opts b = {.reps = 5, .level = CKPT_DEFAULT_LEVEL};
    struct stat st;
    snprintf(b.dir, sizeof b.dir, "%s", stat("/dev/shm", &st) == 0 ? "/dev/shm" : "/tmp");
    sg_model_cfg cfg;
    int pr = parse_args(argc, argv, &a, &b, &cfg);
    if (pr) return pr == 1 ? 0 : pr;
    const char *data = a.data, *json = a.json;
    int64_t steps = a.steps;
    uint64_t seed = a.seed;
    int in_ch_set = a.in_ch_set, batch_set = a.batch_set;
    if (b.threads <= 0) {
        long nc = sysconf(_SC_NPROCESSORS_ONLN);
        b.threads = nc < 1 ? 1 : nc > 32 ? 32 : (int)nc;
    }
    if (!batch_set) cfg.batch = 2;

    char la0[128], la1[128];
    loadavg(la0, sizeof la0);
    sg_dataset ds;
    if (data_load(&ds, data)) return cli_fail("ckpt_bench", 1); /* its message says "data:" */
    if (!in_ch_set) cfg.in_ch = ds.c;
    if (ds.c != cfg.in_ch || ds.h > cfg.img || ds.w > cfg.img) {
        fprintf(stderr, "ckpt_bench: %s is %dx%dx%d, model %s takes %dx%dx%d\n", ds.source, ds.h,
                ds.w, ds.c, cfg.name, cfg.img, cfg.img, cfg.in_ch);
        return 2;
    }
    cfg.data_n = ds.n, cfg.data_h = ds.h, cfg.data_w = ds.w;
    sg_backend *be = sg_backend_cpu_create();
    if (!be) die("cpu backend");
    sg_exec e;
    if (sg_exec_init(&e, &cfg, 1, be)) die("sg_exec_init");
    if (sg_exec_upload_dataset(&e, ds.pixels, ds.n * ds.h * ds.w * ds.c, ds.labels)) die("dataset");
    if (sg_exec_init_state(&e, seed)) die("init state");
    struct statfs sf;
    int tmpfs = statfs(b.dir, &sf) == 0 && (long)sf.f_type == TMPFS_MAGIC_NUM;
    fprintf(stderr,
            "ckpt_bench: %s (in_ch %d, batch %d), %lld parameters, data %s (%lld images); "
            "level %d, %d threads, %d reps; files in %s (%s); load average %s\n",
            cfg.name, cfg.in_ch, cfg.batch, (long long)e.plan.io.n_params, ds.source,
            (long long)ds.n, b.level, b.threads, b.reps, b.dir, tmpfs ? "tmpfs" : "not tmpfs", la0);
    data_free(&ds);

    state_res res[2];
    memset(res, 0, sizeof res);
    int ns = 0;
    snprintf(res[ns].label, sizeof res[ns].label, "init");
    res[ns].loss = NAN;
    bench_state(&e, &b, &res[ns++]);
    if (steps > 0) {
        double t0 = now_s();
        float l0 = NAN;
        for (long k = 0; k < steps; k++) {
            if (sg_exec_step(&e)) die("sg_exec_step");
            if (!k) l0 = sg_exec_loss(&e);
            if ((k + 1) % 10 == 0 || k + 1 == steps)
                fprintf(stderr, "ckpt_bench: training step %ld/%ld, loss %.4f\n", k + 1, steps,
                        sg_exec_loss(&e));
        }
        double tt = now_s() - t0;
        snprintf(res[ns].label, sizeof res[ns].label, "trained");
        res[ns].loss = sg_exec_loss(&e);
        fprintf(stderr,
                "ckpt_bench: trained %ld steps in %.1f s (%.2f s/step), loss %.4f -> %.4f\n", steps,
                tt, tt / steps, l0, res[ns].loss);
        bench_state(&e, &b, &res[ns++]);
    }
    loadavg(la1, sizeof la1);

    FILE *out = json && !strcmp(json, "-") ? stderr : stdout;
    fprintf(out,
            "ckpt_bench: %s (in_ch %d, batch %d), %lld parameters; zstd level %d; %d threads "
            "(online CPUs %ld); %d repetitions: median s (min–max), GB/s = raw state bytes / "
            "median / 1e9; files in %s (%s)\nload average: start %s; end %s\n",
            cfg.name, cfg.in_ch, cfg.batch, (long long)e.plan.io.n_params, b.level, b.threads,
            sysconf(_SC_NPROCESSORS_ONLN), b.reps, b.dir, tmpfs ? "tmpfs" : "not tmpfs", la0, la1);
    if (ns > 1)
        fprintf(out, "trained: %lld steps on %s, last loss %.4f\n", (long long)res[1].step, data,
                res[1].loss);
    print_table(out, res, ns, &b);
    const state_res *m = &res[ns - 1];
    double save = gbps(m->raw, m->save_auto), load = gbps(m->raw, m->load_serial),
           loadp = gbps(m->raw, m->load_par);
    fprintf(out,
            "\ntarget (DESIGN.md: save and load >= 1 GB/s; smaller than plain zstd), %s state "
            "on this machine (%d threads): save %.2f GB/s %s; load %.2f GB/s (1 thread) / "
            "%.2f GB/s (%d threads) %s; size %.3f of plain zstd %s\n",
            m->label, b.threads, save, save >= 1 ? "met" : "NOT met", load, loadp, b.threads,
            load >= 1 && loadp >= 1 ? "met"
            : loadp >= 1            ? "met with threads only"
                                    : "NOT met",
            (double)m->file_auto / m->z1_bytes, m->file_auto < m->z1_bytes ? "met" : "NOT met");
    if (json) {
        FILE *jf = !strcmp(json, "-") ? stdout : fopen(json, "w");
        if (!jf) return fprintf(stderr, "ckpt_bench: cannot write %s\n", json), 1;
        int jrc = print_json(jf, res, ns, &b, &cfg, data, e.plan.io.n_params, tmpfs, la0, la1);
        if (jf != stdout && fclose(jf)) jrc = sg_set_error("cannot write %s", json);
        if (jrc) return fprintf(stderr, "ckpt_bench: %s\n", sg_last_error()), 1;
    }
    sg_exec_free(&e);
    int ok = 1;
    for (int i = 0; i < ns; i++) ok &= res[i].roundtrip_ok;
    return ok ? 0 : 1;
}
