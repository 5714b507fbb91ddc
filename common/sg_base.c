/* sg_base.c — the thread-local error message behind sg_set_error / sg_last_error, and the
 * failure path of SG_ASSERT. */
#include "sg_base.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static _Thread_local char sg_error_buf[1024];

const char *sg_last_error(void) {
    return sg_error_buf[0] ? sg_error_buf : "unknown error";
}

/* Formats into a scratch buffer first: callers may pass sg_last_error() as an argument
 * ("loading x: %s", sg_last_error()), and vsnprintf into the buffer it reads from is
 * undefined (it garbled such messages). */
int sg_set_error(const char *fmt, ...) {
    char msg[sizeof sg_error_buf];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    memcpy(sg_error_buf, msg, sizeof msg);
    return SG_ERR;
}

static int cmp_f32(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

void sg_sort_f32(float *v, int n) {
    if (n > 1) qsort(v, (size_t)n, sizeof *v, cmp_f32);
}

double sg_quantile_sorted(const float *s, int n, double q) {
    const double k = (n - 1) * q;
    const int lo = (int)k, hi = lo + (k > lo && lo + 1 < n);
    return s[lo] + (s[hi] - s[lo]) * (k - lo);
}

void sg_assert_fail(const char *cond, const char *file, int line) {
    fprintf(stderr, "stepgraph: internal invariant violated at %s:%d: %s\n", file, line, cond);
    fflush(stderr);
    abort();
}

int sg_probe_writable(const char *path) {
    struct stat st;
    const int existed = !stat(path, &st);
    if (existed && S_ISDIR(st.st_mode)) return sg_set_error("it is a directory");
    const int fd = open(path, existed ? O_WRONLY : O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0) return sg_set_error("%s", strerror(errno));
    close(fd);
    if (!existed) unlink(path);
    return SG_OK;
}
