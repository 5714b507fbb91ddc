/* ckpt_rotate.c — a directory of rotating checkpoints: dir/ckpt_<step>.sgck and dir/latest.
 *
 * Order of a save: (1) write the new checkpoint crash-safely, (2) replace dir/latest
 * crash-safely, (3) delete the oldest checkpoints beyond keep_last and stale temp files.
 * A crash after (1) leaves latest naming the previous (complete) checkpoint; after (2) there
 * is merely one checkpoint too many until the next save. Nothing ever deletes the checkpoint
 * that latest names.
 */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoints/ckpt_internal.h"

#define LATEST_NAME "latest"

int ckpt_rotating_path(const char *dir, int64_t step, char *buf, size_t cap) {
    if (step < 0) return sg_set_error("checkpoint: negative step %lld", (long long)step);
    int w = snprintf(buf, cap, "%s/ckpt_%08lld.sgck", dir, (long long)step);
    if (w < 0 || (size_t)w >= cap) return sg_set_error("checkpoint: path too long in %s", dir);
    return SG_OK;
}

/* "ckpt_<digits>.sgck" -> step; -1 for other names */
static int64_t parse_name(const char *name) {
    if (strncmp(name, "ckpt_", 5) != 0) return -1;
    const char *p = name + 5;
    int64_t step = 0;
    int digits = 0;
    while (*p >= '0' && *p <= '9') {
        if (step > (INT64_MAX - 9) / 10) return -1;
        step = step * 10 + (*p++ - '0');
        digits++;
    }
    if (digits < 8 || strcmp(p, ".sgck") != 0) return -1;
    return step;
}

typedef struct {
    char name[256];
    int64_t step;
} listed;

static int cmp_step_desc(const void *a, const void *b) {
    int64_t x = ((const listed *)a)->step, y = ((const listed *)b)->step;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* The checkpoints in dir, newest step first. */
static int list_checkpoints(const char *dir, listed **out, int *count) {
    *out = NULL, *count = 0;
    DIR *d = opendir(dir);
    if (!d) return sg_set_error("checkpoint: cannot read directory %s: %s", dir, strerror(errno));
    int cap = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        int64_t step = parse_name(de->d_name);
        if (step < 0 || strlen(de->d_name) >= sizeof((listed *)0)->name) continue;
        if (*count == cap) {
            cap = cap ? cap * 2 : 16;
            listed *nl = realloc(*out, (size_t)cap * sizeof *nl);
            if (!nl) {
                closedir(d);
                free(*out);
                *out = NULL;
                return sg_set_error("checkpoint: out of memory");
            }
            *out = nl;
        }
        strcpy((*out)[*count].name, de->d_name);
        (*out)[*count].step = step;
        (*count)++;
    }
    closedir(d);
    if (*count) qsort(*out, (size_t)*count, sizeof **out, cmp_step_desc);
    return SG_OK;
}

static int make_dirs(const char *dir) {
    char tmp[4096];
    size_t len = strlen(dir);
    if (len == 0 || len >= sizeof tmp) return sg_set_error("checkpoint: bad directory '%s'", dir);
    memcpy(tmp, dir, len + 1);
    for (size_t i = 1; i <= len; i++) {
        if (tmp[i] != '/' && tmp[i] != 0) continue;
        char c = tmp[i];
        tmp[i] = 0;
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
            return sg_set_error("checkpoint: cannot create directory %s: %s", tmp, strerror(errno));
        tmp[i] = c;
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return sg_set_error("checkpoint: %s is not a directory", dir);
    return SG_OK;
}

/* The checkpoint dir/latest names, when it names a checkpoint file that is there: its path in
 * buf. Else SG_ERR, the error saying which: latest absent, not a checkpoint's name, or naming a
 * file that is missing. */
int ckpt_latest_named(const char *dir, char *buf, size_t cap) {
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, LATEST_NAME) >= sizeof path)
        return sg_set_error("checkpoint: path too long in %s", dir);
    FILE *fp = fopen(path, "rb");
    if (!fp) return sg_set_error("%s: %s", path, strerror(errno));
    char name[300];
    size_t n = fread(name, 1, sizeof name - 1, fp);
    fclose(fp);
    name[n] = 0;
    while (n > 0 && (name[n - 1] == '\n' || name[n - 1] == '\r' || name[n - 1] == ' '))
        name[--n] = 0;
    if (parse_name(name) < 0 || strlen(name) != n)
        return sg_set_error("%s does not name a checkpoint (ckpt_<step>.sgck)", path);
    int w = snprintf(buf, cap, "%s/%s", dir, name);
    if (w < 0 || (size_t)w >= cap) return sg_set_error("checkpoint: path too long in %s", dir);
    struct stat st;
    if (stat(buf, &st) != 0) return sg_set_error("%s names %s, which is missing", path, name);
    if (!S_ISREG(st.st_mode))
        return sg_set_error("%s names %s, which is not a regular file", path, name);
    return SG_OK;
}

int ckpt_latest(const char *dir, char *buf, size_t cap) {
    if (ckpt_latest_named(dir, buf, cap) == SG_OK) return SG_OK;
    listed *l;
    int count;
    if (list_checkpoints(dir, &l, &count)) return SG_ERR;
    if (count == 0) {
        free(l);
        return sg_set_error("checkpoint: no checkpoint (ckpt_*.sgck) in %s", dir);
    }
    int w = snprintf(buf, cap, "%s/%s", dir, l[0].name);
    free(l);
    if (w < 0 || (size_t)w >= cap) return sg_set_error("checkpoint: path too long in %s", dir);
    return SG_OK;
}

/* Remove temp files of crashed writers: ".ckpt_*.tmp.*" and ".latest.tmp.*". */
static void remove_stale_temps(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        const char *nm = de->d_name;
        if (!ckpt_is_temp_name(nm)) continue;
        if (strncmp(nm, ".ckpt_", 6) != 0 && strncmp(nm, "." LATEST_NAME ".tmp.", 12) != 0)
            continue;
        char path[4096];
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, nm) < sizeof path) unlink(path);
    }
    closedir(d);
}

int ckpt_save_rotating(const char *dir, int64_t step, const char *meta_json,
                       const ckpt_tensor_desc *t, int n, const ckpt_write_opts *opts, int keep_last,
                       char *path_out, size_t path_cap) {
    char path[4096], latest[4096], line[64];
    if (!dir) return sg_set_error("checkpoint: no directory");
    if (ckpt_rotating_path(dir, step, path, sizeof path)) return SG_ERR;
    if (make_dirs(dir)) return SG_ERR;
    if (ckpt_write(path, meta_json, t, n, opts)) return SG_ERR;
    if (path_out && path_cap) snprintf(path_out, path_cap, "%s", path);
    const char *base = strrchr(path, '/') + 1;
    int len = snprintf(line, sizeof line, "%s\n", base);
    if ((size_t)snprintf(latest, sizeof latest, "%s/%s", dir, LATEST_NAME) >= sizeof latest)
        return sg_set_error("checkpoint: path too long in %s", dir);
    if (ckpt_write_file_atomic(latest, line, len, opts))
        return sg_set_error("checkpoint %s was written but updating %s failed: %s", path, latest,
                            sg_last_error());
    remove_stale_temps(dir);
    if (keep_last <= 0) return SG_OK;
    listed *l;
    int count;
    if (list_checkpoints(dir, &l, &count)) return SG_ERR;
    int kept = 1; /* the one just written */
    for (int i = 0; i < count; i++) {
        if (strcmp(l[i].name, base) == 0) continue;
        if (kept < keep_last) {
            kept++;
            continue;
        }
        char old[4096];
        if ((size_t)snprintf(old, sizeof old, "%s/%s", dir, l[i].name) < sizeof old) unlink(old);
    }
    free(l);
    return SG_OK;
}
