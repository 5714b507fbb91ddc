/* test_ckpt_faults.c — a failing or crashing write never destroys the previous checkpoint.
 *
 *   - injected errors (ENOSPC, EIO) at every I/O step of a write (create, each write(2),
 *     fsync, rename): SG_ERR with the errno text, the old file byte-identical, no temp left;
 *     a failing directory fsync reports an error with the new file in place;
 *   - a crash (the process exits) at every I/O step: the file at the path is either the old
 *     one or the new one, complete;
 *   - a real full disk: a 256 KiB tmpfs (when we may mount one) and RLIMIT_FSIZE (always).
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "checkpoints/ckpt.h"
#include "tests/sg_test.h"

typedef struct {
    int at;    /* fail or crash at this hook call (1-based); 0: never */
    int calls; /* hook calls so far */
    int err;   /* errno to inject */
    int crash; /* exit the process instead */
    int stage; /* stage of the failing call */
} fault_plan;

static int hook(ckpt_io_stage stage, int64_t written, void *ctx) {
    (void)written;
    fault_plan *p = ctx;
    if (++p->calls != p->at) return 0;
    p->stage = (int)stage;
    if (p->crash) _exit(0);
    return p->err;
}

static int same_file(const char *path, const uint8_t *b, size_t n) {
    size_t m = 0;
    uint8_t *x = sg_test_slurp(path, &m);
    int same = x && m == n && memcmp(x, b, n) == 0;
    free(x);
    return same;
}

static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) n++;
    closedir(d);
    return n;
}

/* one tensor of `bytes` random bytes (incompressible, so the file is about that big) */
static ckpt_tensor_desc blob(const char *name, void *data, int64_t bytes, uint64_t seed) {
    uint8_t *p = data;
    for (int64_t i = 0; i < bytes; i++) p[i] = (uint8_t)sg_test_next(&seed);
    return (ckpt_tensor_desc){.name = name,
                              .role = ROLE_PARAM,
                              .dtype = DT_U8,
                              .ndim = 1,
                              .shape = {bytes},
                              .data = data,
                              .bytes = bytes};
}

int main(void) {
    char dir[] = "/tmp/test_ckpt_faults.XXXXXX";
    if (!mkdtemp(dir)) return 1;
    char path[256];
    snprintf(path, sizeof path, "%s/run.sgck", dir);
    /* old: small; new: 3.5 MiB, so the 1 MiB write buffer makes several write(2) calls */
    enum { OLD = 5000, NEW = 3500000 };
    uint8_t *old_data = malloc(OLD), *new_data = malloc(NEW);
    ckpt_tensor_desc told = blob("w", old_data, OLD, 1), tnew = blob("w", new_data, NEW, 2);
    CHECK(ckpt_write(path, "{\"step\":1}", &told, 1, NULL) == SG_OK, "old: %s", sg_last_error());
    size_t old_n = 0, new_n = 0;
    uint8_t *old_bytes = sg_test_slurp(path, &old_n);
    /* the new file's bytes, written elsewhere, and how many hook calls a full write makes */
    char ref[256];
    snprintf(ref, sizeof ref, "%s/ref.sgck", dir);
    fault_plan count = {0};
    ckpt_write_opts o = {.fault = hook, .fault_ctx = &count, .block_bytes = 256 << 10};
    CHECK(ckpt_write(ref, "{\"step\":2}", &tnew, 1, &o) == SG_OK, "ref: %s", sg_last_error());
    uint8_t *new_bytes = sg_test_slurp(ref, &new_n);
    unlink(ref);
    int total = count.calls;
    printf("a full write makes %d I/O steps\n", total);
    CHECK(total >= 7, "expected create + several writes + fsync + rename + dirsync, got %d", total);

    /* injected errors at every step */
    int errs[2] = {ENOSPC, EIO};
    for (int k = 0; k < 2; k++)
        for (int at = 1; at <= total; at++) {
            fault_plan p = {.at = at, .err = errs[k]};
            o.fault_ctx = &p;
            int rc = ckpt_write(path, "{\"step\":2}", &tnew, 1, &o);
            CHECK(rc == SG_ERR && strstr(sg_last_error(), strerror(errs[k])),
                  "error at step %d must fail with '%s': %s", at, strerror(errs[k]),
                  sg_last_error());
            if (p.stage == CKPT_IO_DIRSYNC) {
                /* the rename happened: the new file is there and complete */
                CHECK(same_file(path, new_bytes, new_n), "dirsync failure: new file in place");
                CHECK(ckpt_write(path, "{\"step\":1}", &told, 1, NULL) == SG_OK, "restore old");
            } else {
                CHECK(same_file(path, old_bytes, old_n),
                      "error at step %d (stage %d) changed "
                      "the old checkpoint",
                      at, p.stage);
            }
            CHECK(count_entries(dir) == 1, "error at step %d left %d files", at,
                  count_entries(dir));
        }

    /* a crash at every step */
    for (int at = 1; at <= total; at++) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            fault_plan p = {.at = at, .crash = 1};
            ckpt_write_opts oc = {.fault = hook, .fault_ctx = &p, .block_bytes = 256 << 10};
            ckpt_write(path, "{\"step\":2}", &tnew, 1, &oc);
            _exit(3); /* not reached when the crash happens */
        }
        int st = 0;
        waitpid(pid, &st, 0);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child for step %d", at);
        int is_old = same_file(path, old_bytes, old_n), is_new = same_file(path, new_bytes, new_n);
        CHECK(is_old || is_new, "crash at step %d: the file is neither old nor new", at);
        ckpt_file *f = ckpt_open(path);
        CHECK(f != NULL, "crash at step %d: %s", at, sg_last_error());
        ckpt_close(f);
        /* a crash before the rename leaves the temp behind; clean up for the next round */
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -f %s/.run.sgck.tmp.*", dir);
        if (system(cmd) != 0) return 1;
        if (is_new) CHECK(ckpt_write(path, "{\"step\":1}", &told, 1, NULL) == SG_OK, "restore");
    }

    /* RLIMIT_FSIZE: the kernel refuses to grow a file past the limit (EFBIG) */
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {.rlim_cur = 1 << 20, .rlim_max = RLIM_INFINITY};
        setrlimit(RLIMIT_FSIZE, &rl);
        ckpt_write_opts ol = {.block_bytes = 256 << 10};
        int rc = ckpt_write(path, "{\"step\":2}", &tnew, 1, &ol);
        _exit(rc == SG_ERR && strstr(sg_last_error(), strerror(EFBIG)) ? 0 : 1);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "RLIMIT_FSIZE write must fail with EFBIG");
    CHECK(same_file(path, old_bytes, old_n), "RLIMIT_FSIZE: old checkpoint intact");
    CHECK(count_entries(dir) == 1, "RLIMIT_FSIZE: temp removed");

    /* a real full disk: a 256 KiB tmpfs */
    char mnt[300];
    snprintf(mnt, sizeof mnt, "%s/small", dir);
    mkdir(mnt, 0755);
    if (mount("tmpfs", mnt, "tmpfs", 0, "size=256k") == 0) {
        char p2[400];
        snprintf(p2, sizeof p2, "%s/run.sgck", mnt);
        CHECK(ckpt_write(p2, "{\"step\":1}", &told, 1, NULL) == SG_OK, "tmpfs old: %s",
              sg_last_error());
        int rc = ckpt_write(p2, "{\"step\":2}", &tnew, 1, NULL);
        CHECK(rc == SG_ERR && strstr(sg_last_error(), strerror(ENOSPC)),
              "full tmpfs must fail with ENOSPC: %s", sg_last_error());
        CHECK(same_file(p2, old_bytes, old_n), "full tmpfs: old checkpoint intact");
        CHECK(count_entries(mnt) == 1, "full tmpfs: temp removed");
        /* rotation on a full disk: the save fails, latest still names a good checkpoint */
        CHECK(ckpt_save_rotating(mnt, 1, "{}", &told, 1, NULL, 2, NULL, 0) == SG_OK,
              "tmpfs rotating 1: %s", sg_last_error());
        CHECK(ckpt_save_rotating(mnt, 2, "{}", &tnew, 1, NULL, 2, NULL, 0) == SG_ERR,
              "tmpfs rotating 2 must fail");
        char latest[512];
        CHECK(ckpt_latest(mnt, latest, sizeof latest) == SG_OK && strstr(latest, "ckpt_00000001"),
              "tmpfs: latest after a failed save: %s", latest);
        ckpt_file *f = ckpt_open(latest);
        CHECK(f != NULL, "tmpfs: latest opens: %s", sg_last_error());
        ckpt_close(f);
        umount2(mnt, MNT_DETACH);
    } else {
        printf("tmpfs part skipped: cannot mount (%s)\n", strerror(errno));
    }

    free(old_data);
    free(new_data);
    free(old_bytes);
    free(new_bytes);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) return 1;
    return sg_test_end();
}
