/* ckpt_read.c — opening, validating and reading a checkpoint (layout:
 * docs/checkpoint-format.md).
 *
 * ckpt_open checks, in order: size and magic, the header (checksum, version, fields), the
 * trailer (end magic, sizes), the index (checksum, then every entry: codes, shape, sizes,
 * payload ranges in order and inside the payload region, unique names), the metadata
 * (checksum, valid JSON object), and finally the whole-file checksum. When that last one fails
 * each payload checksum is checked so the error can name the damaged tensor. Every offset and
 * size read from the file is range-checked before use; nothing is trusted.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "checkpoints/ckpt_internal.h"
#include "checkpoints/ckpt_json.h"

struct ckpt_file {
    char *path;
    const uint8_t *base;
    size_t size;
    int mapped;
    void *map; /* the mapping base, for munmap (mapped files only) */
    unsigned flags;
    int version;
    int64_t block_bytes;
    char *meta;
    int n;
    ckpt_entry *e;
    char *names;
};

#define FAIL(f, ...) ckpt_fail(f, __VA_ARGS__)

static int ckpt_fail(const ckpt_file *f, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int ckpt_fail(const ckpt_file *f, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return sg_set_error("%s: %s", f->path, msg);
}

static int check_header(ckpt_file *f) {
    const uint8_t *h = f->base;
    if (f->size == 0) return FAIL(f, "empty file, not a checkpoint");
    if (f->size < 8 || memcmp(h, CKPT_MAGIC, 8) != 0) {
        if (f->size < 8 && f->size > 0 && memcmp(h, CKPT_MAGIC, f->size) == 0)
            return FAIL(f, "truncated checkpoint (%zu bytes)", f->size);
        return FAIL(f, "not a stepgraph checkpoint (bad magic)");
    }
    if (f->size < CKPT_HEADER_SIZE + CKPT_TRAILER_SIZE)
        return FAIL(f, "truncated checkpoint (%zu bytes, a valid one has at least %d)", f->size,
                    CKPT_HEADER_SIZE + CKPT_TRAILER_SIZE);
    uint32_t version = get32(h + HDR_VERSION);
    int hash_ok = get64(h + HDR_HASH) == ckpt_xxh64(h, HDR_HASH, 0);
    if (!(f->flags & CKPT_OPEN_NO_CHECKSUMS) && !hash_ok) {
        if (version != CKPT_FORMAT_VERSION)
            return FAIL(f,
                        "unsupported format version %u or a damaged header (this build reads "
                        "version %d)",
                        version, CKPT_FORMAT_VERSION);
        return FAIL(f, "header checksum mismatch (damaged header)");
    }
    if (version != CKPT_FORMAT_VERSION)
        return FAIL(f, "unsupported format version %u (this build reads version %d)", version,
                    CKPT_FORMAT_VERSION);
    f->version = (int)version;
    uint32_t block = get32(h + HDR_BLOCK_BYTES);
    if (get32(h + HDR_HEADER_SIZE) != CKPT_HEADER_SIZE || get32(h + HDR_FLAGS) != 0 ||
        get64(h + HDR_META_OFFSET) != CKPT_HEADER_SIZE || block < CKPT_MIN_BLOCK ||
        block > CKPT_MAX_BLOCK || block % CKPT_MIN_BLOCK)
        return FAIL(f, "bad header fields");
    f->block_bytes = block;
    return SG_OK;
}

/* Validate one index entry at e (avail bytes left in the index). Returns its size or 0. */
static size_t parse_entry(ckpt_file *f, int i, const uint8_t *e, size_t avail, char **names,
                          int64_t payload_lo, int64_t *payload_next, int64_t payload_hi) {
    if (avail < CKPT_ENTRY_FIXED) return FAIL(f, "index entry %d is truncated", i), 0;
    size_t len = get16(e + ENT_NAME_LEN);
    size_t size = (size_t)SG_ALIGN_UP(CKPT_ENTRY_FIXED + len, 8);
    if (len == 0 || len > CKPT_MAX_NAME || size > avail)
        return FAIL(f, "index entry %d has a bad name length %zu", i, len), 0;
    ckpt_entry *t = &f->e[i];
    memcpy(*names, e + CKPT_ENTRY_FIXED, len);
    (*names)[len] = 0;
    t->name = *names;
    *names += len + 1;
    for (size_t k = 0; k < len; k++)
        if ((unsigned char)t->name[k] < 0x20 || (unsigned char)t->name[k] > 0x7e)
            return FAIL(f, "index entry %d: name has a non-printable byte", i), 0;
    for (size_t k = CKPT_ENTRY_FIXED + len; k < size; k++)
        if (e[k]) return FAIL(f, "index entry %d ('%s'): non-zero padding", i, t->name), 0;
    t->role = ckpt_role_from_code(e[ENT_ROLE]);
    t->dtype = ckpt_dtype_from_code(e[ENT_DTYPE]);
    t->ndim = e[ENT_NDIM];
    t->codec = e[ENT_CODEC];
    int filter = e[ENT_FILTER];
    if (t->role < 0) return FAIL(f, "tensor '%s': unknown role code %d", t->name, e[ENT_ROLE]), 0;
    if (t->dtype < 0)
        return FAIL(f, "tensor '%s': unknown dtype code %d", t->name, e[ENT_DTYPE]), 0;
    if (t->ndim > CKPT_MAX_DIMS)
        return FAIL(f, "tensor '%s': %d dimensions (at most %d)", t->name, t->ndim, CKPT_MAX_DIMS),
               0;
    if (t->codec != CKPT_CODEC_RAW && t->codec != CKPT_CODEC_ZSTD)
        return FAIL(f, "tensor '%s': unknown codec %d", t->name, t->codec), 0;
    int esize = sg_dtype_size(t->dtype);
    if (filter > CKPT_FILTER_SHUFFLE || (filter && (t->codec != CKPT_CODEC_ZSTD || esize == 1)))
        return FAIL(f, "tensor '%s': bad filter %d", t->name, filter), 0;
    if (e[ENT_PAD] || get64(e + ENT_RESERVED))
        return FAIL(f, "tensor '%s': non-zero reserved field", t->name), 0;
    t->shuffled = filter == CKPT_FILTER_SHUFFLE;
    int64_t numel = 1;
    for (int d = 0; d < CKPT_MAX_DIMS; d++) {
        uint64_t v = get64(e + ENT_SHAPE + 8 * d);
        if (d >= t->ndim && v != 1)
            return FAIL(f, "tensor '%s': unused dimension %d is not 1", t->name, d), 0;
        if (v > (uint64_t)INT64_MAX / 8 || (v > 0 && numel > INT64_MAX / 8 / (int64_t)v))
            return FAIL(f, "tensor '%s': shape too large", t->name), 0;
        t->shape[d] = (int64_t)v;
        numel *= (int64_t)v;
    }
    t->numel = numel;
    t->offset = (int64_t)get64(e + ENT_ARENA);
    uint64_t foff = get64(e + ENT_FOFF), stored = get64(e + ENT_STORED), raw = get64(e + ENT_RAW);
    if (raw != (uint64_t)numel * (uint64_t)esize)
        return FAIL(f, "tensor '%s': raw size %llu does not match its shape", t->name,
                    (unsigned long long)raw),
               0;
    if (foff < (uint64_t)*payload_next || foff > (uint64_t)payload_hi ||
        stored > (uint64_t)payload_hi - foff || foff % CKPT_PAYLOAD_ALIGN ||
        foff < (uint64_t)payload_lo)
        return FAIL(f,
                    "tensor '%s': payload range [%llu, +%llu) is outside the payload region "
                    "or overlaps another",
                    t->name, (unsigned long long)foff, (unsigned long long)stored),
               0;
    if (t->codec == CKPT_CODEC_RAW && stored != raw)
        return FAIL(f, "tensor '%s': stored raw but sizes differ", t->name), 0;
    if (t->codec == CKPT_CODEC_ZSTD && (raw == 0 || stored == 0))
        return FAIL(f, "tensor '%s': empty zstd payload", t->name), 0;
    t->file_offset = (int64_t)foff;
    t->stored_bytes = (int64_t)stored;
    t->raw_bytes = (int64_t)raw;
    t->raw_checksum = get64(e + ENT_RAW_HASH);
    t->stored_checksum = get64(e + ENT_STORED_HASH);
    for (int d = t->ndim; d < CKPT_MAX_DIMS; d++) t->shape[d] = 1;
    *payload_next = (int64_t)(foff + stored);
    return size;
}

static int cmp_entry_names(const void *a, const void *b) {
    return strcmp((*(const ckpt_entry *const *)a)->name, (*(const ckpt_entry *const *)b)->name);
}

static int check_unique(ckpt_file *f) {
    if (f->n < 2) return SG_OK;
    const ckpt_entry **v = malloc((size_t)f->n * sizeof *v);
    if (!v) return FAIL(f, "out of memory");
    for (int i = 0; i < f->n; i++) v[i] = &f->e[i];
    qsort(v, (size_t)f->n, sizeof *v, cmp_entry_names);
    int rc = SG_OK;
    for (int i = 1; i < f->n && rc == SG_OK; i++)
        if (strcmp(v[i - 1]->name, v[i]->name) == 0)
            rc = FAIL(f, "two tensors are named '%s'", v[i]->name);
    free(v);
    return rc;
}

static int check_body(ckpt_file *f) {
    const uint8_t *b = f->base;
    int checks = !(f->flags & CKPT_OPEN_NO_CHECKSUMS);
    const uint8_t *tr = b + f->size - CKPT_TRAILER_SIZE;
    if (memcmp(tr + TRL_MAGIC, CKPT_END_MAGIC, 8) != 0)
        return FAIL(f,
                    "truncated or incomplete checkpoint (no trailer at the end of its %zu "
                    "bytes)",
                    f->size);
    uint64_t fsize = get64(tr + TRL_FILE_SIZE);
    if (fsize != f->size)
        return FAIL(f, "file is %zu bytes but its trailer says %llu (truncated or damaged)",
                    f->size, (unsigned long long)fsize);
    /* metadata */
    uint64_t msize = get64(b + HDR_META_SIZE);
    uint64_t body_end = f->size - CKPT_TRAILER_SIZE;
    if (msize > CKPT_MAX_META || CKPT_HEADER_SIZE + msize > body_end)
        return FAIL(f, "metadata size %llu does not fit in the file", (unsigned long long)msize);
    int64_t payload_lo = SG_ALIGN_UP(CKPT_HEADER_SIZE + (int64_t)msize, CKPT_PAYLOAD_ALIGN);
    /* index */
    uint64_t ioff = get64(tr + TRL_INDEX_OFFSET), isize = get64(tr + TRL_INDEX_SIZE);
    uint64_t count = get64(tr + TRL_COUNT);
    if (ioff < (uint64_t)payload_lo || ioff > body_end || isize > body_end - ioff ||
        ioff + isize != body_end || ioff % 8)
        return FAIL(f, "index range [%llu, +%llu) is not where it must be",
                    (unsigned long long)ioff, (unsigned long long)isize);
    if (count > CKPT_MAX_TENSORS || count * CKPT_ENTRY_FIXED > isize)
        return FAIL(f, "tensor count %llu does not fit in the index", (unsigned long long)count);
    if (checks && get64(tr + TRL_INDEX_HASH) != ckpt_xxh64(b + ioff, isize, 0))
        return FAIL(f, "index checksum mismatch (damaged tensor index)");
    if (checks && get64(b + HDR_META_HASH) != ckpt_xxh64(b + CKPT_HEADER_SIZE, msize, 0))
        return FAIL(f, "metadata checksum mismatch (damaged metadata)");
    f->n = (int)count;
    f->e = calloc(count + 1, sizeof *f->e);
    f->names = malloc(isize + 1);
    f->meta = malloc(msize + 1);
    if (!f->e || !f->names || !f->meta) return FAIL(f, "out of memory");
    memcpy(f->meta, b + CKPT_HEADER_SIZE, msize);
    f->meta[msize] = 0;
    if (memchr(f->meta, 0, msize)) return FAIL(f, "metadata contains a NUL byte");
    ckpt_json *j = ckpt_json_parse(f->meta, msize);
    if (!j) return FAIL(f, "metadata is not valid JSON: %s", sg_last_error());
    int type = ckpt_json_type(j, 0);
    ckpt_json_free(j);
    if (type != CKPT_JSON_OBJECT) return FAIL(f, "metadata is not a JSON object");
    char *names = f->names;
    size_t pos = 0;
    int64_t next = payload_lo;
    for (int i = 0; i < f->n; i++) {
        size_t sz = parse_entry(f, i, b + ioff + pos, isize - pos, &names, payload_lo, &next,
                                (int64_t)ioff);
        if (!sz) return SG_ERR;
        pos += sz;
    }
    if (pos != isize)
        return FAIL(f, "index has %llu trailing bytes", (unsigned long long)(isize - pos));
    uint64_t raw_total = 0;
    for (int i = 0; i < f->n; i++) raw_total += (uint64_t)f->e[i].raw_bytes;
    if (raw_total != get64(tr + TRL_RAW_TOTAL))
        return FAIL(f, "trailer's raw byte total does not match the index");
    if (check_unique(f)) return SG_ERR;
    if (!checks || (f->flags & CKPT_OPEN_LAZY)) return SG_OK;
    if (get64(tr + TRL_FILE_HASH) != ckpt_xxh64(b, f->size - 8, 0)) {
        for (int i = 0; i < f->n; i++) {
            const ckpt_entry *t = &f->e[i];
            if (ckpt_xxh64(b + t->file_offset, (size_t)t->stored_bytes, 0) != t->stored_checksum)
                return FAIL(f,
                            "tensor '%s' is damaged (payload checksum mismatch at bytes "
                            "%lld..%lld)",
                            t->name, (long long)t->file_offset,
                            (long long)(t->file_offset + t->stored_bytes));
        }
        return FAIL(f, "whole-file checksum mismatch (damage outside the tensor payloads)");
    }
    return SG_OK;
}

static ckpt_file *open_common(ckpt_file *f) {
    if (check_header(f) || check_body(f)) {
        ckpt_close(f);
        return NULL;
    }
    return f;
}

ckpt_file *ckpt_open_mem(const void *data, size_t size, unsigned flags) {
    ckpt_file *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup("<memory>"))) {
        free(f);
        sg_set_error("checkpoint: out of memory");
        return NULL;
    }
    f->base = data;
    f->size = data ? size : 0;
    f->flags = flags;
    return open_common(f);
}

ckpt_file *ckpt_open_ex(const char *path, unsigned flags) {
    if (!path) {
        sg_set_error("checkpoint: no path given");
        return NULL;
    }
    ckpt_file *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path))) {
        free(f);
        sg_set_error("checkpoint: out of memory");
        return NULL;
    }
    f->flags = flags;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0) {
        FAIL(f, "cannot open: %s", strerror(errno));
        goto fail;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        FAIL(f, "not a regular file");
        close(fd);
        goto fail;
    }
    f->size = (size_t)st.st_size;
    if (f->size > 0) {
        void *p = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            FAIL(f, "cannot map: %s", strerror(errno));
            close(fd);
            goto fail;
        }
        f->base = p;
        f->map = p;
        f->mapped = 1;
        madvise(p, f->size, MADV_SEQUENTIAL);
    } else {
        f->base = (const uint8_t *)"";
    }
    close(fd);
    return open_common(f);
fail:
    ckpt_close(f);
    return NULL;
}

ckpt_file *ckpt_open(const char *path) {
    return ckpt_open_ex(path, 0);
}

void ckpt_close(ckpt_file *f) {
    if (!f) return;
    if (f->mapped) munmap(f->map, f->size);
    free(f->path);
    free(f->meta);
    free(f->e);
    free(f->names);
    free(f);
}

int ckpt_count(const ckpt_file *f) {
    return f ? f->n : 0;
}
const char *ckpt_meta(const ckpt_file *f) {
    return f->meta;
}
const char *ckpt_path(const ckpt_file *f) {
    return f->path;
}
int64_t ckpt_file_size(const ckpt_file *f) {
    return (int64_t)f->size;
}
int ckpt_version(const ckpt_file *f) {
    return f->version;
}
int64_t ckpt_block_bytes(const ckpt_file *f) {
    return f->block_bytes;
}

int ckpt_tensor_info(const ckpt_file *f, int i, ckpt_entry *out) {
    if (!f || i < 0 || i >= f->n) return sg_set_error("checkpoint: no tensor %d", i);
    *out = f->e[i];
    return SG_OK;
}

int ckpt_find(const ckpt_file *f, const char *name) {
    for (int i = 0; f && name && i < f->n; i++)
        if (strcmp(f->e[i].name, name) == 0) return i;
    return -1;
}

/* ---- reading payloads ---- */

static int decode_zstd(const ckpt_file *f, const ckpt_entry *t, uint8_t *dst) {
    const uint8_t *src = f->base + t->file_offset;
    size_t remaining = (size_t)t->stored_bytes;
    int esize = sg_dtype_size(t->dtype);
    int64_t block = f->block_bytes;
    uint8_t *scratch = NULL;
    ZSTD_DCtx *dc = ZSTD_createDCtx();
    int rc = SG_ERR;
    if (!dc) {
        FAIL(f, "tensor '%s': out of memory", t->name);
        goto out;
    }
    if (t->shuffled) {
        scratch = malloc((size_t)(t->raw_bytes < block ? t->raw_bytes : block));
        if (!scratch) {
            FAIL(f, "tensor '%s': out of memory", t->name);
            goto out;
        }
    }
    for (int64_t off = 0; off < t->raw_bytes; off += block) {
        int64_t len = t->raw_bytes - off < block ? t->raw_bytes - off : block;
        size_t fsize = ZSTD_findFrameCompressedSize(src, remaining);
        if (ZSTD_isError(fsize) ||
            ZSTD_getFrameContentSize(src, fsize) != (unsigned long long)len) {
            FAIL(f, "tensor '%s' is damaged (bad zstd frame at raw offset %lld)", t->name,
                 (long long)off);
            goto out;
        }
        uint8_t *out = t->shuffled ? scratch : dst + off;
        size_t r = ZSTD_decompressDCtx(dc, out, (size_t)len, src, fsize);
        if (ZSTD_isError(r) || r != (size_t)len) {
            FAIL(f, "tensor '%s' is damaged (zstd: %s)", t->name,
                 ZSTD_isError(r) ? ZSTD_getErrorName(r) : "short frame");
            goto out;
        }
        if (t->shuffled) ckpt_unshuffle(dst + off, scratch, len / esize, esize);
        src += fsize, remaining -= fsize;
    }
    if (remaining) {
        FAIL(f, "tensor '%s' is damaged (%zu stray bytes after its frames)", t->name, remaining);
        goto out;
    }
    rc = SG_OK;
out:
    ZSTD_freeDCtx(dc);
    free(scratch);
    return rc;
}

int ckpt_read(const ckpt_file *f, int i, void *dst, int64_t cap) {
    if (!f || i < 0 || i >= f->n) return sg_set_error("checkpoint: no tensor %d", i);
    const ckpt_entry *t = &f->e[i];
    if (cap < t->raw_bytes || (t->raw_bytes > 0 && !dst))
        return FAIL(f, "tensor '%s': needs %lld bytes, buffer has %lld", t->name,
                    (long long)t->raw_bytes, (long long)cap);
    int checks = !(f->flags & CKPT_OPEN_NO_CHECKSUMS);
    const uint8_t *src = f->base + t->file_offset;
    if (checks && (f->flags & CKPT_OPEN_LAZY) &&
        ckpt_xxh64(src, (size_t)t->stored_bytes, 0) != t->stored_checksum)
        return FAIL(f, "tensor '%s' is damaged (payload checksum mismatch)", t->name);
    if (t->raw_bytes == 0) return SG_OK;
    if (t->codec == CKPT_CODEC_RAW)
        memcpy(dst, src, (size_t)t->raw_bytes);
    else if (decode_zstd(f, t, dst))
        return SG_ERR;
    if (checks && ckpt_xxh64(dst, (size_t)t->raw_bytes, 0) != t->raw_checksum)
        return FAIL(f, "tensor '%s' is damaged (data checksum mismatch after decompression)",
                    t->name);
    return SG_OK;
}

int ckpt_check_tensor(const ckpt_file *f, int i) {
    if (!f || i < 0 || i >= f->n) return sg_set_error("checkpoint: no tensor %d", i);
    const ckpt_entry *t = &f->e[i];
    if (!(f->flags & CKPT_OPEN_NO_CHECKSUMS) &&
        ckpt_xxh64(f->base + t->file_offset, (size_t)t->stored_bytes, 0) != t->stored_checksum)
        return FAIL(f, "tensor '%s' is damaged (payload checksum mismatch)", t->name);
    void *tmp = malloc((size_t)t->raw_bytes + 1);
    if (!tmp) return FAIL(f, "tensor '%s': out of memory", t->name);
    int rc = ckpt_read(f, i, tmp, t->raw_bytes);
    free(tmp);
    return rc;
}

typedef struct {
    const ckpt_file *f;
    const int *idx;
    void *const *dst;
    const int64_t *cap;
    pthread_mutex_t mu;
    char err[1200];
} read_job;

static int read_item(void *ctx, int64_t k) {
    read_job *job = ctx;
    if (ckpt_read(job->f, job->idx[k], job->dst[k], job->cap[k]) == SG_OK) return 0;
    pthread_mutex_lock(&job->mu);
    if (!job->err[0]) snprintf(job->err, sizeof job->err, "%s", sg_last_error());
    pthread_mutex_unlock(&job->mu);
    return 1;
}

int ckpt_read_many(const ckpt_file *f, const int *idx, void *const *dst, const int64_t *cap, int n,
                   int threads) {
    if (n <= 0) return SG_OK;
    read_job job = {.f = f, .idx = idx, .dst = dst, .cap = cap};
    pthread_mutex_init(&job.mu, NULL);
    int rc = ckpt_parallel_for(n, threads, read_item, &job);
    pthread_mutex_destroy(&job.mu);
    if (rc) return sg_set_error("%s", job.err);
    return SG_OK;
}
