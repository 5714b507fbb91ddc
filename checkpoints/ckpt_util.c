/* ckpt_util.c — format codes, byte-plane shuffle, parallel-for and the crash-safe writer
 * shared by the checkpoint sources (see ckpt_internal.h). */
#include "checkpoints/ckpt_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- format codes. Append only: the file stores the index into these tables. ---- */

const char *const ckpt_format_roles[] = {"param", "grad",  "adam_m", "adam_v", "ema",
                                         "state", "input", "saved",  "temp",   "workspace"};
const int ckpt_format_role_count = SG_ARRAY_LEN(ckpt_format_roles);
const char *const ckpt_format_dtypes[] = {"f32", "bf16", "i32", "u8", "u32", "i64", "u64"};
const int ckpt_format_dtype_count = SG_ARRAY_LEN(ckpt_format_dtypes);

static int lookup(const char *const *table, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (strcmp(table[i], name) == 0) return i;
    return -1;
}

int ckpt_role_to_code(int role) {
    if (role < 0 || role >= ROLE_COUNT) return -1;
    return lookup(ckpt_format_roles, ckpt_format_role_count, sg_role_names[role]);
}
int ckpt_role_from_code(int code) {
    if (code < 0 || code >= ckpt_format_role_count) return -1;
    return lookup(sg_role_names, ROLE_COUNT, ckpt_format_roles[code]);
}
int ckpt_dtype_to_code(int dtype) {
    if (dtype < 0 || dtype >= DT_COUNT) return -1;
    return lookup(ckpt_format_dtypes, ckpt_format_dtype_count, sg_dtype_names[dtype]);
}
int ckpt_dtype_from_code(int code) {
    if (code < 0 || code >= ckpt_format_dtype_count) return -1;
    return lookup(sg_dtype_names, DT_COUNT, ckpt_format_dtypes[code]);
}

const char *ckpt_role_name(int role) {
    return role >= 0 && role < ROLE_COUNT ? sg_role_names[role] : "?";
}
const char *ckpt_dtype_name(int dtype) {
    return dtype >= 0 && dtype < DT_COUNT ? sg_dtype_names[dtype] : "?";
}
int ckpt_role_from_name(const char *name) {
    return lookup(sg_role_names, ROLE_COUNT, name);
}
int ckpt_dtype_from_name(const char *name) {
    return lookup(sg_dtype_names, DT_COUNT, name);
}

/* ---- byte-plane shuffle ---- */

void ckpt_shuffle(uint8_t *dst, const uint8_t *src, int64_t n, int esize) {
    if (esize == 4) {
        uint8_t *p0 = dst, *p1 = dst + n, *p2 = dst + 2 * n, *p3 = dst + 3 * n;
        for (int64_t i = 0; i < n; i++) {
            const uint8_t *s = src + 4 * i;
            p0[i] = s[0], p1[i] = s[1], p2[i] = s[2], p3[i] = s[3];
        }
    } else if (esize == 2) {
        uint8_t *p0 = dst, *p1 = dst + n;
        for (int64_t i = 0; i < n; i++) p0[i] = src[2 * i], p1[i] = src[2 * i + 1];
    } else {
        for (int b = 0; b < esize; b++)
            for (int64_t i = 0; i < n; i++) dst[b * n + i] = src[i * esize + b];
    }
}

void ckpt_unshuffle(uint8_t *dst, const uint8_t *src, int64_t n, int esize) {
    if (esize == 4) {
        const uint8_t *p0 = src, *p1 = src + n, *p2 = src + 2 * n, *p3 = src + 3 * n;
        for (int64_t i = 0; i < n; i++) {
            uint8_t *d = dst + 4 * i;
            d[0] = p0[i], d[1] = p1[i], d[2] = p2[i], d[3] = p3[i];
        }
    } else if (esize == 2) {
        const uint8_t *p0 = src, *p1 = src + n;
        for (int64_t i = 0; i < n; i++) dst[2 * i] = p0[i], dst[2 * i + 1] = p1[i];
    } else {
        for (int b = 0; b < esize; b++)
            for (int64_t i = 0; i < n; i++) dst[i * esize + b] = src[b * n + i];
    }
}

/* ---- parallel for ---- */

int ckpt_default_threads(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 32 ? 32 : (int)n;
}

typedef struct {
    pthread_mutex_t mu;
    int64_t next, n;
    int status;
    ckpt_item_fn fn;
    void *ctx;
} pfor_state;

static void *pfor_worker(void *arg) {
    pfor_state *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        int64_t item = s->status ? s->n : s->next++;
        pthread_mutex_unlock(&s->mu);
        if (item >= s->n) return NULL;
        int rc = s->fn(s->ctx, item);
        if (rc) {
            pthread_mutex_lock(&s->mu);
            if (!s->status) s->status = rc;
            pthread_mutex_unlock(&s->mu);
        }
    }
}

int ckpt_parallel_for(int64_t n, int threads, ckpt_item_fn fn, void *ctx) {
    if (threads <= 0) threads = ckpt_default_threads();
    if (threads > n) threads = (int)(n > 0 ? n : 1);
    pfor_state s = {.next = 0, .n = n, .status = 0, .fn = fn, .ctx = ctx};
    pthread_mutex_init(&s.mu, NULL);
    pthread_t tid[32];
    int started = 0;
    for (int t = 1; t < threads && t < 32; t++) {
        if (pthread_create(&tid[started], NULL, pfor_worker, &s) != 0) break;
        started++;
    }
    pfor_worker(&s); /* the calling thread works too */
    for (int t = 0; t < started; t++) pthread_join(tid[t], NULL);
    pthread_mutex_destroy(&s.mu);
    return s.status;
}

/* ---- the crash-safe writer ---- */

static int inject(ckpt_atomic *a, ckpt_io_stage stage) {
    if (!a->fault) return 0;
    int e = a->fault(stage, a->written, a->fault_ctx);
    if (e) errno = e;
    return e;
}

int ckpt_is_temp_name(const char *name) {
    return name[0] == '.' && strstr(name, ".tmp.") != NULL;
}

int ckpt_atomic_begin(ckpt_atomic *a, const char *path, const ckpt_write_opts *opts) {
    static int seq;
    memset(a, 0, sizeof *a);
    a->fd = -1;
    size_t len = strlen(path);
    if (len == 0 || path[len - 1] == '/')
        return sg_set_error("checkpoint: '%s' is not a file path", path);
    if (len >= sizeof a->path) return sg_set_error("checkpoint: path too long: %s", path);
    memcpy(a->path, path, len + 1);
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (slash == path) {
        strcpy(a->dir, "/");
    } else if (slash) {
        memcpy(a->dir, path, (size_t)(slash - path));
        a->dir[slash - path] = 0;
    } else {
        strcpy(a->dir, ".");
    }
    int k = __atomic_fetch_add(&seq, 1, __ATOMIC_RELAXED);
    int w = snprintf(a->tmp, sizeof a->tmp, "%s/.%s.tmp.%ld.%d", a->dir, base, (long)getpid(), k);
    if (w < 0 || (size_t)w >= sizeof a->tmp)
        return sg_set_error("checkpoint: path too long: %s", path);
    if (opts) a->fault = opts->fault, a->fault_ctx = opts->fault_ctx;
    a->buf_cap = 1 << 20;
    a->buf = malloc(a->buf_cap);
    if (!a->buf) return sg_set_error("checkpoint: out of memory");
    if (inject(a, CKPT_IO_CREATE) == 0)
        a->fd = open(a->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (a->fd < 0) {
        int e = errno;
        free(a->buf);
        a->buf = NULL;
        return sg_set_error("checkpoint: cannot create %s: %s", a->tmp, strerror(e));
    }
    return SG_OK;
}

static int write_all(ckpt_atomic *a, const uint8_t *p, size_t n) {
    while (n > 0) {
        if (inject(a, CKPT_IO_WRITE)) goto fail;
        size_t chunk = n > (1u << 30) ? (1u << 30) : n;
        ssize_t w = write(a->fd, p, chunk);
        if (w < 0) {
            if (errno == EINTR) continue;
            goto fail;
        }
        if (w == 0) {
            errno = ENOSPC;
            goto fail;
        }
        p += w, n -= (size_t)w, a->written += w;
    }
    return SG_OK;
fail:
    return sg_set_error("checkpoint: writing %s failed after %lld bytes: %s", a->tmp,
                        (long long)a->written, strerror(errno));
}

static int flush(ckpt_atomic *a) {
    int rc = write_all(a, a->buf, a->buf_len);
    a->buf_len = 0;
    return rc;
}

int ckpt_atomic_write(ckpt_atomic *a, const void *data, size_t n) {
    const uint8_t *p = data;
    if (n == 0) return SG_OK;
    if (a->hashing) ckpt_xxh64_update(&a->hash, p, n);
    a->pos += (int64_t)n;
    if (a->buf_len + n <= a->buf_cap) {
        memcpy(a->buf + a->buf_len, p, n);
        a->buf_len += n;
        return SG_OK;
    }
    if (flush(a)) return SG_ERR;
    if (n >= a->buf_cap) return write_all(a, p, n);
    memcpy(a->buf, p, n);
    a->buf_len = n;
    return SG_OK;
}

int ckpt_atomic_zeros(ckpt_atomic *a, size_t n) {
    static const uint8_t zeros[256];
    while (n > 0) {
        size_t k = n < sizeof zeros ? n : sizeof zeros;
        if (ckpt_atomic_write(a, zeros, k)) return SG_ERR;
        n -= k;
    }
    return SG_OK;
}

void ckpt_atomic_abort(ckpt_atomic *a) {
    if (a->fd >= 0) close(a->fd);
    if (a->tmp[0]) unlink(a->tmp);
    a->fd = -1;
    a->tmp[0] = 0;
    free(a->buf);
    a->buf = NULL;
}

int ckpt_atomic_commit(ckpt_atomic *a) {
    if (flush(a)) goto fail;
    if (inject(a, CKPT_IO_FSYNC) || fsync(a->fd) != 0) {
        sg_set_error("checkpoint: fsync of %s failed: %s", a->tmp, strerror(errno));
        goto fail;
    }
    int fd = a->fd;
    a->fd = -1;
    if (close(fd) != 0) {
        sg_set_error("checkpoint: closing %s failed: %s", a->tmp, strerror(errno));
        goto fail;
    }
    if (inject(a, CKPT_IO_RENAME) || rename(a->tmp, a->path) != 0) {
        sg_set_error("checkpoint: renaming %s to %s failed: %s", a->tmp, a->path, strerror(errno));
        goto fail;
    }
    a->tmp[0] = 0; /* renamed: nothing left to remove */
    free(a->buf);
    a->buf = NULL;
    /* Make the rename itself durable. Some filesystems cannot fsync a directory (EINVAL). */
    int e = inject(a, CKPT_IO_DIRSYNC);
    if (!e) {
        int dfd = open(a->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0) {
            e = errno;
        } else {
            if (fsync(dfd) != 0 && errno != EINVAL) e = errno;
            close(dfd);
        }
    }
    if (e)
        return sg_set_error("checkpoint: %s was written but fsync of its directory %s failed: %s",
                            a->path, a->dir, strerror(e));
    return SG_OK;
fail:
    ckpt_atomic_abort(a);
    return SG_ERR;
}

int ckpt_write_parts_atomic(const char *path, const void *const *parts, const int64_t *sizes,
                            int n_parts, const ckpt_write_opts *opts) {
    for (int i = 0; i < n_parts; i++)
        if (sizes[i] < 0 || (sizes[i] > 0 && !parts[i]))
            return sg_set_error("checkpoint: bad buffer for %s", path);
    ckpt_atomic a;
    if (ckpt_atomic_begin(&a, path, opts)) return SG_ERR;
    for (int i = 0; i < n_parts; i++)
        if (ckpt_atomic_write(&a, parts[i], (size_t)sizes[i])) {
            ckpt_atomic_abort(&a);
            return SG_ERR;
        }
    return ckpt_atomic_commit(&a);
}

int ckpt_write_file_atomic(const char *path, const void *data, int64_t n,
                           const ckpt_write_opts *opts) {
    return ckpt_write_parts_atomic(path, &data, &n, 1, opts);
}
