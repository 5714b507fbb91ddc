/* ckpt_write.c — writing a checkpoint (layout: docs/checkpoint-format.md).
 *
 * Three steps:
 *   1. per tensor, in parallel: XXH64 of the raw bytes; in auto mode, the shuffle decision
 *      (compress a sample both ways, keep the smaller);
 *   2. every tensor is cut into blocks of block_bytes raw bytes; worker threads compress the
 *      blocks (shuffled first when chosen), each into one independent zstd frame;
 *   3. the calling thread writes the blocks in order as they complete, through the crash-safe
 *      writer, then the index and the trailer.
 * Workers run at most a small window of blocks ahead of the writer, so memory stays bounded.
 * A frame depends only on its block's bytes, the level and the shuffle decision, and blocks
 * are written in index order: the file bytes do not depend on the thread count.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "checkpoints/ckpt_internal.h"
#include "checkpoints/ckpt_json.h"

#define SAMPLE_SLICE 4096
#define SAMPLE_SLICES 4

typedef struct {
    const ckpt_tensor_desc *t;
    int esize;
    int role_code, dtype_code;
    int shuffle;
    uint64_t raw_hash;
    int64_t first_block, nblocks;
} tensor_plan;

typedef struct {
    uint8_t *data;
    size_t size;
    int done;
} block_slot;

typedef struct {
    tensor_plan *tp;
    int n;
    int64_t nblocks;
    int *block_tensor; /* block -> tensor */
    block_slot *slots;
    int level, shuffle_mode;
    int64_t block_bytes;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int64_t next, consumed, window;
    int abort;
    char err[1200];
} write_job;

static void job_fail(write_job *job, const char *msg) {
    pthread_mutex_lock(&job->mu);
    if (!job->abort) snprintf(job->err, sizeof job->err, "%s", msg);
    job->abort = 1;
    pthread_cond_broadcast(&job->cv);
    pthread_mutex_unlock(&job->mu);
}

/* ---- step 1: hash and shuffle decision ---- */

static size_t compressed_size(ZSTD_CCtx *cc, uint8_t *dst, size_t cap, const uint8_t *src, size_t n,
                              int level) {
    size_t r = ZSTD_compressCCtx(cc, dst, cap, src, n, level);
    return ZSTD_isError(r) ? (size_t)-1 : r;
}

static int decide_shuffle(write_job *job, tensor_plan *tp) {
    const ckpt_tensor_desc *t = tp->t;
    if (tp->esize == 1 || t->bytes == 0 || job->shuffle_mode == CKPT_SHUFFLE_OFF) return 0;
    if (job->shuffle_mode == CKPT_SHUFFLE_ON) return 1;
    const uint8_t *src = t->data;
    size_t total = (size_t)t->bytes;
    int slices = total <= SAMPLE_SLICE * SAMPLE_SLICES ? 1 : SAMPLE_SLICES;
    size_t slice = slices == 1 ? total : SAMPLE_SLICE;
    size_t cap = ZSTD_compressBound(slice);
    uint8_t *scratch = malloc(slice), *out = malloc(cap);
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    int decision = -1;
    if (scratch && out && cc) {
        size_t plain = 0, shuffled = 0;
        for (int k = 0; k < slices; k++) {
            size_t off = slices == 1 ? 0 : (size_t)k * (total - slice) / (size_t)(slices - 1);
            off -= off % (size_t)tp->esize;
            size_t a = compressed_size(cc, out, cap, src + off, slice, job->level);
            ckpt_shuffle(scratch, src + off, (int64_t)(slice / (size_t)tp->esize), tp->esize);
            size_t b = compressed_size(cc, out, cap, scratch, slice, job->level);
            if (a == (size_t)-1 || b == (size_t)-1) break;
            plain += a, shuffled += b;
            if (k == slices - 1) decision = shuffled < plain;
        }
    }
    free(scratch);
    free(out);
    ZSTD_freeCCtx(cc);
    return decision;
}

static int prepare_tensor(void *ctx, int64_t i) {
    write_job *job = ctx;
    tensor_plan *tp = &job->tp[i];
    tp->raw_hash = ckpt_xxh64(tp->t->data, (size_t)tp->t->bytes, 0);
    tp->shuffle = decide_shuffle(job, tp);
    if (tp->shuffle < 0) {
        char msg[CKPT_MAX_NAME + 64];
        snprintf(msg, sizeof msg, "checkpoint: compressing tensor '%s' failed", tp->t->name);
        job_fail(job, msg);
        return 1;
    }
    return 0;
}

/* ---- step 2: compress blocks ---- */

static void *compress_worker(void *arg) {
    write_job *job = arg;
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    uint8_t *scratch = malloc((size_t)job->block_bytes);
    if (!cc || !scratch ||
        ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, job->level)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, 0)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_contentSizeFlag, 1))) {
        job_fail(job, "checkpoint: out of memory (zstd compression context)");
        goto done;
    }
    for (;;) {
        pthread_mutex_lock(&job->mu);
        while (!job->abort && job->next < job->nblocks && job->next >= job->consumed + job->window)
            pthread_cond_wait(&job->cv, &job->mu);
        int64_t b = job->abort || job->next >= job->nblocks ? -1 : job->next++;
        pthread_mutex_unlock(&job->mu);
        if (b < 0) break;

        tensor_plan *tp = &job->tp[job->block_tensor[b]];
        int64_t off = (b - tp->first_block) * job->block_bytes;
        int64_t len = tp->t->bytes - off < job->block_bytes ? tp->t->bytes - off : job->block_bytes;
        const uint8_t *src = (const uint8_t *)tp->t->data + off;
        if (tp->shuffle) {
            ckpt_shuffle(scratch, src, len / tp->esize, tp->esize);
            src = scratch;
        }
        size_t cap = ZSTD_compressBound((size_t)len);
        uint8_t *out = malloc(cap);
        size_t r = out ? ZSTD_compress2(cc, out, cap, src, (size_t)len) : 0;
        if (!out || ZSTD_isError(r)) {
            char msg[CKPT_MAX_NAME + 96];
            snprintf(msg, sizeof msg, "checkpoint: compressing tensor '%s' failed: %s", tp->t->name,
                     out ? ZSTD_getErrorName(r) : "out of memory");
            free(out);
            job_fail(job, msg);
            break;
        }
        pthread_mutex_lock(&job->mu);
        job->slots[b].data = out;
        job->slots[b].size = r;
        job->slots[b].done = 1;
        pthread_cond_broadcast(&job->cv);
        pthread_mutex_unlock(&job->mu);
    }
done:
    ZSTD_freeCCtx(cc);
    free(scratch);
    return NULL;
}

/* ---- validation ---- */

static int cmp_names(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int check_desc(const ckpt_tensor_desc *t, int i) {
    if (!t->name || !t->name[0]) return sg_set_error("checkpoint: tensor %d has no name", i);
    size_t len = strlen(t->name);
    if (len > CKPT_MAX_NAME)
        return sg_set_error("checkpoint: tensor %d: name longer than %d bytes", i, CKPT_MAX_NAME);
    for (size_t k = 0; k < len; k++)
        if ((unsigned char)t->name[k] < 0x20 || (unsigned char)t->name[k] > 0x7e)
            return sg_set_error("checkpoint: tensor %d: name has a non-printable byte", i);
    if (ckpt_role_to_code(t->role) < 0)
        return sg_set_error("checkpoint: tensor '%s': bad role %d", t->name, t->role);
    if (ckpt_dtype_to_code(t->dtype) < 0)
        return sg_set_error("checkpoint: tensor '%s': bad dtype %d", t->name, t->dtype);
    if (t->ndim < 0 || t->ndim > CKPT_MAX_DIMS)
        return sg_set_error("checkpoint: tensor '%s': ndim %d not in 0..%d", t->name, t->ndim,
                            CKPT_MAX_DIMS);
    int64_t numel = 1;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] < 0 || (t->shape[d] > 0 && numel > INT64_MAX / 8 / t->shape[d]))
            return sg_set_error("checkpoint: tensor '%s': bad shape", t->name);
        numel *= t->shape[d];
    }
    if (t->bytes != numel * sg_dtype_size(t->dtype))
        return sg_set_error("checkpoint: tensor '%s': %lld bytes but shape and dtype make %lld",
                            t->name, (long long)t->bytes,
                            (long long)(numel * sg_dtype_size(t->dtype)));
    if (t->bytes > 0 && !t->data) return sg_set_error("checkpoint: tensor '%s': no data", t->name);
    return SG_OK;
}

static int check_inputs(const char *meta, const ckpt_tensor_desc *t, int n) {
    if (n < 0 || n > CKPT_MAX_TENSORS || (n > 0 && !t))
        return sg_set_error("checkpoint: bad tensor count %d", n);
    size_t mlen = strlen(meta);
    if (mlen > CKPT_MAX_META) return sg_set_error("checkpoint: metadata larger than 64 MiB");
    ckpt_json *j = ckpt_json_parse(meta, mlen);
    if (!j) return sg_set_error("checkpoint: metadata is not valid JSON: %s", sg_last_error());
    int type = ckpt_json_type(j, 0);
    ckpt_json_free(j);
    if (type != CKPT_JSON_OBJECT) return sg_set_error("checkpoint: metadata is not a JSON object");
    for (int i = 0; i < n; i++)
        if (check_desc(&t[i], i)) return SG_ERR;
    if (n < 2) return SG_OK;
    const char **names = malloc((size_t)n * sizeof *names);
    if (!names) return sg_set_error("checkpoint: out of memory");
    for (int i = 0; i < n; i++) names[i] = t[i].name;
    qsort(names, (size_t)n, sizeof *names, cmp_names);
    int rc = SG_OK;
    for (int i = 1; i < n && rc == SG_OK; i++)
        if (strcmp(names[i - 1], names[i]) == 0)
            rc = sg_set_error("checkpoint: two tensors are named '%s'", names[i]);
    free(names);
    return rc;
}

/* ---- step 3: the file ---- */

static int write_header(ckpt_atomic *a, const char *meta, size_t mlen, int64_t block_bytes) {
    uint8_t h[CKPT_HEADER_SIZE] = {0};
    memcpy(h + HDR_MAGIC, CKPT_MAGIC, 8);
    put32(h + HDR_VERSION, CKPT_FORMAT_VERSION);
    put32(h + HDR_HEADER_SIZE, CKPT_HEADER_SIZE);
    put32(h + HDR_BLOCK_BYTES, (uint32_t)block_bytes);
    put32(h + HDR_FLAGS, 0);
    put64(h + HDR_META_OFFSET, CKPT_HEADER_SIZE);
    put64(h + HDR_META_SIZE, mlen);
    put64(h + HDR_META_HASH, ckpt_xxh64(meta, mlen, 0));
    put64(h + HDR_HASH, ckpt_xxh64(h, HDR_HASH, 0));
    if (ckpt_atomic_write(a, h, sizeof h) || ckpt_atomic_write(a, meta, mlen)) return SG_ERR;
    return SG_OK;
}

static int pad_to(ckpt_atomic *a, int64_t align) {
    int64_t pad = SG_ALIGN_UP(a->pos, align) - a->pos;
    return ckpt_atomic_zeros(a, (size_t)pad);
}

static size_t entry_size(const char *name) {
    return (size_t)SG_ALIGN_UP(CKPT_ENTRY_FIXED + strlen(name), 8);
}

static void put_entry(uint8_t *e, const tensor_plan *tp, int64_t foff, int64_t stored, int codec,
                      uint64_t stored_hash) {
    const ckpt_tensor_desc *t = tp->t;
    size_t len = strlen(t->name);
    memset(e, 0, entry_size(t->name));
    put16(e + ENT_NAME_LEN, (uint16_t)len);
    e[ENT_ROLE] = (uint8_t)tp->role_code;
    e[ENT_DTYPE] = (uint8_t)tp->dtype_code;
    e[ENT_NDIM] = (uint8_t)t->ndim;
    e[ENT_CODEC] = (uint8_t)codec;
    e[ENT_FILTER] = codec == CKPT_CODEC_ZSTD && tp->shuffle ? CKPT_FILTER_SHUFFLE : 0;
    for (int d = 0; d < CKPT_MAX_DIMS; d++)
        put64(e + ENT_SHAPE + 8 * d, d < t->ndim ? (uint64_t)t->shape[d] : 1);
    put64(e + ENT_ARENA, (uint64_t)t->offset);
    put64(e + ENT_FOFF, (uint64_t)foff);
    put64(e + ENT_STORED, (uint64_t)stored);
    put64(e + ENT_RAW, (uint64_t)t->bytes);
    put64(e + ENT_RAW_HASH, tp->raw_hash);
    put64(e + ENT_STORED_HASH, stored_hash);
    memcpy(e + CKPT_ENTRY_FIXED, t->name, len);
}

/* Write the payloads as the workers finish blocks; fills the index. */
static int write_payloads(ckpt_atomic *a, write_job *job, uint8_t *index, int64_t *raw_total) {
    size_t ipos = 0;
    int64_t b = 0;
    for (int i = 0; i < job->n; i++) {
        tensor_plan *tp = &job->tp[i];
        if (pad_to(a, CKPT_PAYLOAD_ALIGN)) return SG_ERR;
        int64_t foff = a->pos, stored = 0;
        int codec = tp->nblocks ? CKPT_CODEC_ZSTD : CKPT_CODEC_RAW;
        ckpt_xxh64_state sh;
        ckpt_xxh64_init(&sh, 0);
        for (int64_t k = 0; k < tp->nblocks; k++, b++) {
            pthread_mutex_lock(&job->mu);
            while (!job->slots[b].done && !job->abort) pthread_cond_wait(&job->cv, &job->mu);
            int ok = job->slots[b].done;
            pthread_mutex_unlock(&job->mu);
            if (!ok) return sg_set_error("%s", job->err);
            block_slot *s = &job->slots[b];
            const void *p = s->data;
            size_t size = s->size;
            /* a single block that zstd cannot shrink is stored raw */
            if (tp->nblocks == 1 && size >= (size_t)tp->t->bytes) {
                codec = CKPT_CODEC_RAW;
                p = tp->t->data;
                size = (size_t)tp->t->bytes;
            }
            ckpt_xxh64_update(&sh, p, size);
            int rc = ckpt_atomic_write(a, p, size);
            stored += (int64_t)size;
            free(s->data);
            s->data = NULL;
            pthread_mutex_lock(&job->mu);
            job->consumed = b + 1;
            pthread_cond_broadcast(&job->cv);
            pthread_mutex_unlock(&job->mu);
            if (rc) return SG_ERR;
        }
        put_entry(index + ipos, tp, foff, stored, codec, ckpt_xxh64_digest(&sh));
        ipos += entry_size(tp->t->name);
        *raw_total += tp->t->bytes;
    }
    return SG_OK;
}

static int write_index_and_trailer(ckpt_atomic *a, const uint8_t *index, size_t isize, int n,
                                   int64_t raw_total) {
    if (pad_to(a, 8)) return SG_ERR;
    int64_t ioff = a->pos;
    if (ckpt_atomic_write(a, index, isize)) return SG_ERR;
    uint8_t t[CKPT_TRAILER_SIZE] = {0};
    memcpy(t + TRL_MAGIC, CKPT_END_MAGIC, 8);
    put64(t + TRL_INDEX_OFFSET, (uint64_t)ioff);
    put64(t + TRL_INDEX_SIZE, isize);
    put64(t + TRL_COUNT, (uint64_t)n);
    put64(t + TRL_INDEX_HASH, ckpt_xxh64(index, isize, 0));
    put64(t + TRL_FILE_SIZE, (uint64_t)(a->pos + CKPT_TRAILER_SIZE));
    put64(t + TRL_RAW_TOTAL, (uint64_t)raw_total);
    if (ckpt_atomic_write(a, t, TRL_FILE_HASH)) return SG_ERR;
    put64(t + TRL_FILE_HASH, ckpt_xxh64_digest(&a->hash));
    return ckpt_atomic_write(a, t + TRL_FILE_HASH, 8);
}

int ckpt_write(const char *path, const char *meta_json, const ckpt_tensor_desc *t, int n,
               const ckpt_write_opts *opts) {
    ckpt_write_opts o = opts ? *opts : (ckpt_write_opts){0};
    const char *meta = meta_json ? meta_json : "{}";
    if (!path) return sg_set_error("checkpoint: no path");
    if (o.level == 0) o.level = CKPT_DEFAULT_LEVEL;
    if (o.level < ZSTD_minCLevel() || o.level > ZSTD_maxCLevel())
        return sg_set_error("checkpoint: zstd level %d not in %d..%d", o.level, ZSTD_minCLevel(),
                            ZSTD_maxCLevel());
    if (o.threads <= 0) o.threads = ckpt_default_threads();
    if (o.threads > 32) o.threads = 32;
    if (o.block_bytes == 0) o.block_bytes = CKPT_DEFAULT_BLOCK;
    if (o.block_bytes < CKPT_MIN_BLOCK || o.block_bytes > CKPT_MAX_BLOCK ||
        o.block_bytes % CKPT_MIN_BLOCK)
        return sg_set_error("checkpoint: block size %lld is not a multiple of 64 in 64..1 GiB",
                            (long long)o.block_bytes);
    if (o.shuffle < CKPT_SHUFFLE_AUTO || o.shuffle > CKPT_SHUFFLE_OFF)
        return sg_set_error("checkpoint: bad shuffle mode %d", o.shuffle);
    if (check_inputs(meta, t, n)) return SG_ERR;

    write_job job = {
        .n = n, .level = o.level, .shuffle_mode = o.shuffle, .block_bytes = o.block_bytes};
    size_t isize = 0;
    job.tp = calloc((size_t)n + 1, sizeof *job.tp);
    if (!job.tp) return sg_set_error("checkpoint: out of memory");
    for (int i = 0; i < n; i++) {
        tensor_plan *tp = &job.tp[i];
        tp->t = &t[i];
        tp->esize = sg_dtype_size(t[i].dtype);
        tp->role_code = ckpt_role_to_code(t[i].role);
        tp->dtype_code = ckpt_dtype_to_code(t[i].dtype);
        tp->first_block = job.nblocks;
        tp->nblocks = (t[i].bytes + o.block_bytes - 1) / o.block_bytes;
        job.nblocks += tp->nblocks;
        isize += entry_size(t[i].name);
    }
    job.block_tensor = malloc((size_t)job.nblocks * sizeof *job.block_tensor + 1);
    job.slots = calloc((size_t)job.nblocks + 1, sizeof *job.slots);
    uint8_t *index = malloc(isize + 1);
    pthread_mutex_init(&job.mu, NULL);
    pthread_cond_init(&job.cv, NULL);
    job.window = 2 * (int64_t)o.threads + 2;
    int rc = SG_ERR;
    ckpt_atomic a;
    int began = 0;
    pthread_t tid[32];
    int started = 0;
    if (!job.block_tensor || !job.slots || !index) {
        sg_set_error("checkpoint: out of memory");
        goto out;
    }
    for (int i = 0; i < n; i++)
        for (int64_t k = 0; k < job.tp[i].nblocks; k++)
            job.block_tensor[job.tp[i].first_block + k] = i;

    if (ckpt_parallel_for(n, o.threads, prepare_tensor, &job)) {
        sg_set_error("%s", job.err);
        goto out;
    }
    if (ckpt_atomic_begin(&a, path, &o)) goto out;
    began = 1;
    a.hashing = 1;
    ckpt_xxh64_init(&a.hash, 0);
    for (int k = 0; k < o.threads && job.nblocks > 0; k++) {
        if (pthread_create(&tid[started], NULL, compress_worker, &job) != 0) break;
        started++;
    }
    if (job.nblocks > 0 && started == 0) {
        sg_set_error("checkpoint: cannot start compression threads");
        goto out;
    }
    int64_t raw_total = 0;
    if (write_header(&a, meta, strlen(meta), o.block_bytes) || pad_to(&a, CKPT_PAYLOAD_ALIGN) ||
        write_payloads(&a, &job, index, &raw_total) ||
        write_index_and_trailer(&a, index, isize, n, raw_total))
        goto out;
    rc = SG_OK;
out:
    if (started) {
        pthread_mutex_lock(&job.mu);
        if (rc != SG_OK) job.abort = 1;
        pthread_cond_broadcast(&job.cv);
        pthread_mutex_unlock(&job.mu);
        for (int k = 0; k < started; k++) pthread_join(tid[k], NULL);
    }
    if (began) {
        if (rc == SG_OK)
            rc = ckpt_atomic_commit(&a);
        else
            ckpt_atomic_abort(&a);
    }
    for (int64_t b = 0; job.slots && b < job.nblocks; b++) free(job.slots[b].data);
    pthread_mutex_destroy(&job.mu);
    pthread_cond_destroy(&job.cv);
    free(job.slots);
    free(job.block_tensor);
    free(job.tp);
    free(index);
    return rc;
}
