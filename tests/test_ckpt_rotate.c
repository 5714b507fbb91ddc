/* test_ckpt_rotate.c — ckpt_save_rotating / ckpt_latest:
 *   - saving steps 0..9 with keep_last 3 keeps exactly the three newest, latest names the
 *     newest, every kept file opens and holds its own step;
 *   - ckpt_latest falls back to the highest step when latest is missing, damaged or names a
 *     deleted file (ckpt_latest_named says which of the three), and fails clearly on an empty
 *     or missing directory;
 *   - a crash at every I/O step of a save (the writes of the checkpoint and of latest) leaves
 *     latest naming a complete checkpoint (the previous or the new one); the next save removes
 *     the crashed writer's temp files;
 *   - steps with more than 8 digits, keep_last <= 0 keeps everything.
 */
#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "checkpoints/ckpt.h"
#include "checkpoints/ckpt_json.h"
#include "tests/sg_test.h"

static float weights[1000];

static int save(const char *dir, int64_t step, int keep, const ckpt_write_opts *o) {
    char meta[64];
    snprintf(meta, sizeof meta, "{\"step\":%lld}", (long long)step);
    for (int i = 0; i < 1000; i++) weights[i] = (float)step + 0.001f * (float)i;
    ckpt_tensor_desc t = {.name = "w",
                          .role = ROLE_PARAM,
                          .dtype = DT_F32,
                          .ndim = 1,
                          .shape = {1000},
                          .data = weights,
                          .bytes = sizeof weights};
    return ckpt_save_rotating(dir, step, meta, &t, 1, o, keep, NULL, 0);
}

/* the step stored in the checkpoint at path (metadata and tensor must agree), or -1 */
static int64_t step_of(const char *path) {
    ckpt_file *f = ckpt_open(path);
    if (!f) return -1;
    ckpt_json *j = ckpt_json_parse(ckpt_meta(f), strlen(ckpt_meta(f)));
    int64_t step = -1;
    float w[1000];
    if (j && ckpt_json_get_int(j, "step", &step) == SG_OK &&
        ckpt_read(f, 0, w, sizeof w) == SG_OK && w[0] != (float)step)
        step = -1;
    ckpt_json_free(j);
    ckpt_close(f);
    return step;
}

static int count_matching(const char *dir, const char *prefix) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) n += strncmp(de->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return n;
}

typedef struct {
    int at, calls;
} crash_plan;

static int crash_hook(ckpt_io_stage stage, int64_t written, void *ctx) {
    (void)stage, (void)written;
    crash_plan *p = ctx;
    if (++p->calls == p->at) _exit(0);
    return 0;
}

int main(void) {
    char dir[] = "/tmp/test_ckpt_rotate.XXXXXX";
    if (!mkdtemp(dir)) return 1;
    char sub[300], path[512], latest[512];
    snprintf(sub, sizeof sub, "%s/run/ckpts", dir); /* created by the first save */

    for (int step = 0; step < 10; step++) {
        CHECK(save(sub, step * 100, 3, NULL) == SG_OK, "save %d: %s", step, sg_last_error());
        CHECK(ckpt_latest(sub, latest, sizeof latest) == SG_OK, "latest: %s", sg_last_error());
        CHECK(step_of(latest) == step * 100, "latest after step %d is %s", step * 100, latest);
        CHECK(ckpt_latest_named(sub, latest, sizeof latest) == SG_OK &&
                  step_of(latest) == step * 100,
              "latest names step %d: %s", step * 100, latest);
        CHECK(count_matching(sub, "ckpt_") == (step < 3 ? step + 1 : 3), "after step %d: %d files",
              step * 100, count_matching(sub, "ckpt_"));
    }
    for (int step = 7; step < 10; step++) {
        ckpt_rotating_path(sub, step * 100, path, sizeof path);
        CHECK(step_of(path) == step * 100, "kept %s", path);
    }
    ckpt_rotating_path(sub, 600, path, sizeof path);
    CHECK(access(path, F_OK) != 0, "step 600 must be deleted");
    snprintf(path, sizeof path, "%s/latest", sub);
    FILE *fp = fopen(path, "r");
    char line[64] = "";
    CHECK(fp && fgets(line, sizeof line, fp) && !strcmp(line, "ckpt_00000900.sgck\n"),
          "latest contains '%s'", line);
    if (fp) fclose(fp);

    /* fallbacks */
    unlink(path);
    CHECK(ckpt_latest(sub, latest, sizeof latest) == SG_OK && step_of(latest) == 900,
          "no latest file: highest step (%s)", latest);
    CHECK(ckpt_latest_named(sub, latest, sizeof latest) == SG_ERR &&
              strstr(sg_last_error(), "No such file"),
          "no latest file, named: %s", sg_last_error());
    fp = fopen(path, "w");
    fputs("../../etc/passwd\n", fp);
    fclose(fp);
    CHECK(ckpt_latest(sub, latest, sizeof latest) == SG_OK && step_of(latest) == 900,
          "latest with a bad name is ignored (%s)", latest);
    CHECK(ckpt_latest_named(sub, latest, sizeof latest) == SG_ERR &&
              strstr(sg_last_error(), "does not name a checkpoint"),
          "latest with a bad name, named: %s", sg_last_error());
    fp = fopen(path, "w");
    fputs("ckpt_00000100.sgck\n", fp); /* deleted long ago */
    fclose(fp);
    CHECK(ckpt_latest(sub, latest, sizeof latest) == SG_OK && step_of(latest) == 900,
          "latest naming a missing file is ignored (%s)", latest);
    CHECK(ckpt_latest_named(sub, latest, sizeof latest) == SG_ERR &&
              strstr(sg_last_error(), "names ckpt_00000100.sgck, which is missing"),
          "latest naming a missing file, named: %s", sg_last_error());
    { /* a directory where the checkpoint should be */
        char sub_ck[4200];
        snprintf(sub_ck, sizeof sub_ck, "%s/ckpt_00000100.sgck", sub);
        CHECK(mkdir(sub_ck, 0755) == 0, "mkdir %s", sub_ck);
        CHECK(ckpt_latest(sub, latest, sizeof latest) == SG_OK && step_of(latest) == 900,
              "latest naming a directory is ignored (%s)", latest);
        CHECK(ckpt_latest_named(sub, latest, sizeof latest) == SG_ERR &&
                  strstr(sg_last_error(), "which is not a regular file"),
              "latest naming a directory, named: %s", sg_last_error());
        rmdir(sub_ck);
    }
    snprintf(path, sizeof path, "%s/empty", dir);
    mkdir(path, 0755);
    CHECK(ckpt_latest(path, latest, sizeof latest) == SG_ERR &&
              strstr(sg_last_error(), "no checkpoint"),
          "empty directory: %s", sg_last_error());
    snprintf(path, sizeof path, "%s/absent", dir);
    CHECK(ckpt_latest(path, latest, sizeof latest) == SG_ERR &&
              strstr(sg_last_error(), "cannot read directory"),
          "missing directory: %s", sg_last_error());

    /* a crash at every I/O step of a save */
    CHECK(save(sub, 1000, 3, NULL) == SG_OK, "save 1000");
    crash_plan count = {0};
    ckpt_write_opts o = {.fault = crash_hook, .fault_ctx = &count};
    count.at = -1;
    CHECK(save(sub, 1100, 3, &o) == SG_OK, "counting save");
    int total = count.calls;
    CHECK(total >= 8, "a rotating save makes %d I/O steps", total);
    int64_t prev = 1100;
    for (int at = 1; at <= total; at++) {
        int64_t step = 1200 + 100 * at;
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            crash_plan p = {.at = at};
            ckpt_write_opts oc = {.fault = crash_hook, .fault_ctx = &p};
            save(sub, step, 3, &oc);
            _exit(3);
        }
        int st = 0;
        waitpid(pid, &st, 0);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "crash child %d", at);
        CHECK(ckpt_latest(sub, latest, sizeof latest) == SG_OK, "latest after crash %d", at);
        int64_t got = step_of(latest);
        CHECK(got == prev || got == step, "crash at step %d: latest holds step %lld", at,
              (long long)got);
        prev = got;
    }
    CHECK(save(sub, 9000, 3, NULL) == SG_OK, "save after the crashes");
    CHECK(count_matching(sub, ".") == 2, "temp files of crashed writers remain (%d entries)",
          count_matching(sub, ".") - 2);
    CHECK(count_matching(sub, "ckpt_") == 3, "keep_last after crashes: %d",
          count_matching(sub, "ckpt_"));

    /* big steps, keep all */
    snprintf(path, sizeof path, "%s/all", dir);
    CHECK(save(path, 123456789012ll, 0, NULL) == SG_OK, "big step");
    CHECK(save(path, 5, 0, NULL) == SG_OK && save(path, 6, -1, NULL) == SG_OK, "keep all");
    CHECK(count_matching(path, "ckpt_") == 3, "keep_last 0 keeps all");
    CHECK(ckpt_latest(path, latest, sizeof latest) == SG_OK && step_of(latest) == 6,
          "latest is the last saved, not the highest step (%s)", latest);
    ckpt_rotating_path(path, 123456789012ll, latest, sizeof latest);
    CHECK(strstr(latest, "ckpt_123456789012.sgck") && step_of(latest) == 123456789012ll,
          "big step name %s", latest);
    CHECK(save(path, -1, 0, NULL) == SG_ERR, "negative step");

    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) return 1;
    return sg_test_end();
}
