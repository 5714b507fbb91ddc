/* image_folder.c — your own images: every PNG and JPEG in a folder and its subfolders
 * (dataset.h, data_load_folder): flat folders, class folders (torchvision's ImageFolder), FFHQ's
 * numbered ones.
 *
 * Files are taken in byte order of their paths relative to the folder (the same order on every
 * machine; in a flat folder, of their names), decoded
 * (libpng's simplified API; libjpeg-turbo), converted to RGB or grey as the model asks,
 * centre-cropped to a square (the shorter side) and resized to size x size with a box filter
 * (each output pixel the mean of the source pixels its footprint covers; a footprint smaller
 * than one pixel takes the pixel under its centre). The result is NHWC uint8 like every
 * other source, so the rest of the pipeline (uint8 in the arena, flips from the RNG) is
 * unchanged. An unreadable image is an error naming the file; so is a truncated one (libjpeg
 * would fill the missing rows with grey and only warn; libpng refuses it itself), and one of
 * more than DATA_MAX_IMAGE_PIXELS pixels, refused from its header before anything is
 * allocated (a small file can declare a huge image: a decompression bomb). The images are
 * decoded on as many threads as the process may use CPUs (at most DATA_MAX_THREADS), each into
 * its own slot: the pixels and the error reported are those of one thread.
 */
#include <dirent.h>
#include <png.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
/* jpeglib.h needs FILE and size_t declared first */
#include <jpeglib.h>
/* after jpeglib.h: the message codes */
#include <jerror.h>
#include <setjmp.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "data/dataset.h"

typedef struct {
    uint8_t *px; /* h x w x c */
    int h, w;
} decoded;

/* an image's size from its header, before anything is allocated */
static int check_size(const char *path, uint64_t w, uint64_t h) {
    if (w * h > DATA_MAX_IMAGE_PIXELS)
        return sg_set_error("data: %s: %llux%llu pixels, more than the %lld an image may have "
                            "(a damaged header, or a decompression bomb?)",
                            path, (unsigned long long)w, (unsigned long long)h,
                            (long long)DATA_MAX_IMAGE_PIXELS);
    return SG_OK;
}

static int decode_png(const char *path, int c, decoded *d) {
    png_image im;
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_file(&im, path))
        return sg_set_error("data: %s: not a readable PNG (%s)", path, im.message);
    if (check_size(path, im.width, im.height)) return png_image_free(&im), SG_ERR;
    im.format = c == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
    d->h = (int)im.height, d->w = (int)im.width;
    d->px = malloc(PNG_IMAGE_SIZE(im));
    if (!d->px) return png_image_free(&im), sg_set_error("data: %s: out of memory", path);
    if (!png_image_finish_read(&im, NULL, d->px, 0, NULL)) {
        free(d->px), d->px = NULL;
        return sg_set_error("data: %s: damaged PNG (%s)", path, im.message);
    }
    return SG_OK;
}

typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
    char msg[JMSG_LENGTH_MAX];
    int truncated; /* libjpeg warned that the data ended early (it fills in grey) */
} jpeg_err;

static void jpeg_fail(j_common_ptr cinfo) {
    jpeg_err *e = (jpeg_err *)cinfo->err;
    (*cinfo->err->format_message)(cinfo, e->msg);
    longjmp(e->jump, 1);
}

/* libjpeg's warnings and trace messages: nothing printed; the end of the data before the
 * end of the image is remembered (its message kept), other warnings (extraneous bytes and
 * the like, in an image decoded whole) are let pass as other decoders do */
static void jpeg_note(j_common_ptr cinfo, int level) {
    jpeg_err *e = (jpeg_err *)cinfo->err;
    if (level >= 0) return;
    e->pub.num_warnings++;
    int code = e->pub.msg_code;
    if ((code == JWRN_JPEG_EOF || code == JWRN_HIT_MARKER) && !e->truncated) {
        e->truncated = 1;
        (*cinfo->err->format_message)(cinfo, e->msg);
    }
}

static int decode_jpeg(const char *path, int c, decoded *d) {
    FILE *f = fopen(path, "rb");
    if (!f) return sg_set_error("data: %s: cannot open", path);
    struct jpeg_decompress_struct ci;
    jpeg_err err;
    ci.err = jpeg_std_error(&err.pub);
    err.pub.error_exit = jpeg_fail;
    err.pub.emit_message = jpeg_note;
    err.truncated = 0;
    d->px = NULL;
    if (setjmp(err.jump)) {
        jpeg_destroy_decompress(&ci);
        fclose(f);
        free(d->px), d->px = NULL;
        return sg_set_error("data: %s: not a readable JPEG (%s)", path, err.msg);
    }
    jpeg_create_decompress(&ci);
    jpeg_stdio_src(&ci, f);
    jpeg_read_header(&ci, TRUE);
    if (check_size(path, ci.image_width, ci.image_height)) {
        jpeg_destroy_decompress(&ci);
        fclose(f);
        return SG_ERR;
    }
    ci.out_color_space = c == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_start_decompress(&ci);
    d->h = (int)ci.output_height, d->w = (int)ci.output_width;
    size_t row = (size_t)d->w * (size_t)c;
    d->px = malloc(row * (size_t)d->h);
    if (!d->px) longjmp(err.jump, 1);
    while (ci.output_scanline < ci.output_height) {
        JSAMPROW r = d->px + row * ci.output_scanline;
        jpeg_read_scanlines(&ci, &r, 1);
        if (err.truncated) break;
    }
    if (!err.truncated) jpeg_finish_decompress(&ci);
    jpeg_destroy_decompress(&ci);
    fclose(f);
    if (err.truncated) {
        free(d->px), d->px = NULL;
        return sg_set_error("data: %s: truncated or damaged JPEG (%s)", path, err.msg);
    }
    return SG_OK;
}

/* centre-crop d to a square and box-filter it into out[size][size][c] */
static void crop_resize(const decoded *d, int c, int size, uint8_t *out) {
    int side = d->h < d->w ? d->h : d->w;
    int y0 = (d->h - side) / 2, x0 = (d->w - side) / 2;
    for (int oy = 0; oy < size; oy++)
        for (int ox = 0; ox < size; ox++) {
            /* the footprint [a, b) of output pixel (ox, oy) in crop coordinates */
            int ya = (int)((int64_t)oy * side / size), yb = (int)((int64_t)(oy + 1) * side / size);
            int xa = (int)((int64_t)ox * side / size), xb = (int)((int64_t)(ox + 1) * side / size);
            if (yb <= ya) ya = (int)(((int64_t)2 * oy + 1) * side / (2 * size)), yb = ya + 1;
            if (xb <= xa) xa = (int)(((int64_t)2 * ox + 1) * side / (2 * size)), xb = xa + 1;
            for (int ch = 0; ch < c; ch++) {
                uint64_t sum = 0;
                for (int y = ya; y < yb; y++)
                    for (int x = xa; x < xb; x++)
                        sum += d->px[((size_t)(y0 + y) * d->w + (x0 + x)) * c + ch];
                uint64_t cnt = (uint64_t)(yb - ya) * (uint64_t)(xb - xa);
                out[((size_t)oy * size + ox) * c + ch] = (uint8_t)((sum + cnt / 2) / cnt);
            }
        }
}

static int is_image(const char *name) {
    const char *dot = strrchr(name, '.');
    return dot &&
           (!strcasecmp(dot, ".png") || !strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg"));
}

static int cmp_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A growing list of malloc'ed names. */
typedef struct {
    char **names;
    int64_t n, cap;
} name_list;

static int add_name(name_list *l, const char *rel, const char *name) {
    if (l->n == l->cap) {
        int64_t cap = l->cap ? 2 * l->cap : 256;
        char **nn = realloc(l->names, sizeof(char *) * (size_t)cap);
        if (!nn) return SG_ERR;
        l->names = nn, l->cap = cap;
    }
    size_t a = strlen(rel), b = strlen(name);
    char *s = malloc(a + b + 2);
    if (!s) return SG_ERR;
    if (a) memcpy(s, rel, a), s[a] = '/';
    memcpy(s + (a ? a + 1 : 0), name, b + 1);
    l->names[l->n++] = s;
    return SG_OK;
}

/* The images under root/rel (rel "" for root itself) and, to DATA_MAX_FOLDER_DEPTH levels, in its
 * subfolders (symbolic links followed: the depth limit ends a loop), as paths relative to root;
 * names starting with '.' are skipped. */
static int walk_images(const char *root, const char *rel, int depth, name_list *l) {
    char dir[4096];
    if (snprintf(dir, sizeof dir, "%s%s%s", root, *rel ? "/" : "", rel) >= (int)sizeof dir)
        return sg_set_error("data: folder:%s: a path under it is too long: %s", root, rel);
    DIR *d = opendir(dir);
    if (!d)
        return *rel ? sg_set_error("data: folder:%s: cannot open its subfolder %s", root, rel)
                    : sg_set_error("data: folder:%s: cannot open the folder", root);
    int rc = SG_OK;
    for (struct dirent *de; !rc && (de = readdir(d));) {
        if (de->d_name[0] == '.') continue;
        if (is_image(de->d_name)) {
            if (add_name(l, rel, de->d_name))
                rc = sg_set_error("data: folder:%s: out of memory listing its files", root);
            continue;
        }
        struct stat st;
        char path[4096], sub[4096];
        if (snprintf(path, sizeof path, "%s/%s", dir, de->d_name) >= (int)sizeof path ||
            snprintf(sub, sizeof sub, "%s%s%s", rel, *rel ? "/" : "", de->d_name) >=
                (int)sizeof sub) {
            rc = sg_set_error("data: folder:%s: a path under it is too long: %s/%s", root, rel,
                              de->d_name);
            break;
        }
        if (stat(path, &st) || !S_ISDIR(st.st_mode)) continue;
        if (depth >= DATA_MAX_FOLDER_DEPTH)
            rc = sg_set_error("data: folder:%s: %s is more than %d folders deep (a symbolic link "
                              "to a folder above it?)",
                              root, sub, DATA_MAX_FOLDER_DEPTH);
        else
            rc = walk_images(root, sub, depth + 1, l);
    }
    closedir(d);
    return rc;
}

/* the image files under dir (walk_images), sorted by their relative paths' bytes: *n of them
 * (malloc'ed array of malloc'ed names) */
static int list_images(const char *dir, char ***out, int64_t *n) {
    name_list l = {0};
    int rc = walk_images(dir, "", 0, &l);
    if (l.n) qsort(l.names, (size_t)l.n, sizeof(char *), cmp_names);
    *out = l.names, *n = l.n;
    return rc;
}

/* ---- the decoding, shared out over threads: each image is decoded into its own slot, so
 * the pixels do not depend on the threads; the error reported is the first failing image's in
 * name order, as one thread would report it */
static int folder_threads = 0; /* data_set_threads; 0: the CPUs this process may run on */
static data_progress_fn progress_fn;
static void *progress_ctx;
static double progress_after, progress_every;

void data_set_threads(int n) {
    folder_threads = n > 0 ? n : 0;
}

void data_set_progress(data_progress_fn fn, void *ctx, double after_s, double every_s) {
    progress_fn = fn, progress_ctx = ctx, progress_after = after_s, progress_every = every_s;
}

typedef struct {
    const char *dir;
    char *const *names;
    int64_t n;
    int size, c;
    uint8_t *pixels;
    int64_t next, done, err_at; /* err_at: the lowest failing index so far (n: none) */
    pthread_mutex_t mu;
    char err[1024];
    double t0, last; /* progress: start and last report, seconds */
    int reported;
} folder_job;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int decode_one(const folder_job *j, int64_t i) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", j->dir, j->names[i]);
    const char *dot = strrchr(j->names[i], '.');
    decoded d = {0};
    int rc = !strcasecmp(dot, ".png") ? decode_png(path, j->c, &d) : decode_jpeg(path, j->c, &d);
    if (!rc && (d.h < 1 || d.w < 1)) rc = sg_set_error("data: %s: empty image", path);
    if (!rc) crop_resize(&d, j->c, j->size, j->pixels + (size_t)j->size * j->size * j->c * i);
    free(d.px);
    return rc;
}

/* Claim images in index order until none is left, or none below the first failure; every
 * index below a failure is still decoded, so the failure kept is the lowest. The loading
 * thread (report) also reports progress. */
static void folder_work(folder_job *j, int report) {
    for (;;) {
        const int64_t i = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED);
        if (i >= j->n || i > __atomic_load_n(&j->err_at, __ATOMIC_RELAXED)) break;
        if (decode_one(j, i)) {
            pthread_mutex_lock(&j->mu);
            if (i < j->err_at) {
                snprintf(j->err, sizeof j->err, "%s", sg_last_error());
                __atomic_store_n(&j->err_at, i, __ATOMIC_RELAXED);
            }
            pthread_mutex_unlock(&j->mu);
        }
        const int64_t done = __atomic_add_fetch(&j->done, 1, __ATOMIC_RELAXED);
        if (report && progress_fn) {
            const double t = now_s();
            if (t - j->t0 >= progress_after && (!j->reported || t - j->last >= progress_every)) {
                j->last = t, j->reported = 1;
                progress_fn(progress_ctx, done, j->n, 0);
            }
        }
    }
}

static void *folder_worker(void *arg) {
    folder_work(arg, 0);
    return NULL;
}

static int cpus_allowed(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static int decode_all(folder_job *j) {
    int nt = folder_threads ? folder_threads : cpus_allowed();
    if (nt > DATA_MAX_THREADS) nt = DATA_MAX_THREADS;
    if (nt > j->n) nt = (int)j->n;
    pthread_t tid[DATA_MAX_THREADS];
    int started = 0;
    j->err_at = j->n, j->t0 = j->last = now_s();
    pthread_mutex_init(&j->mu, NULL);
    /* a thread that cannot be started leaves its share to the others */
    while (started < nt - 1 && !pthread_create(&tid[started], NULL, folder_worker, j)) started++;
    folder_work(j, 1);
    for (int k = 0; k < started; k++) pthread_join(tid[k], NULL);
    pthread_mutex_destroy(&j->mu);
    if (progress_fn && j->reported) progress_fn(progress_ctx, j->done, j->n, 1);
    if (j->err_at < j->n) return sg_set_error("%s", j->err);
    return SG_OK;
}

/* Class folders (torchvision's ImageFolder): where every image lies in a subfolder, image i's
 * label is the index of its top-level subfolder among them in byte order (names sorted: each
 * class's images follow one another); an image directly in dir: no labels. */
static int folder_labels(sg_dataset *ds, const char *dir, char *const *names, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!strchr(names[i], '/')) return SG_OK;
    if (!(ds->labels = malloc(sizeof(int32_t) * (size_t)n)))
        return sg_set_error("data: folder:%s: out of memory for the labels", dir);
    int k = 0;
    for (int64_t i = 0; i < n; i++) {
        const size_t len = (size_t)(strchr(names[i], '/') - names[i]);
        if (i && (strncmp(names[i], names[i - 1], len) || names[i - 1][len] != '/')) k++;
        if (k >= DATA_MAX_CLASSES)
            return sg_set_error("data: folder:%s: more than %d class folders", dir,
                                DATA_MAX_CLASSES);
        ds->labels[i] = k;
    }
    ds->nclasses = k + 1;
    return SG_OK;
}

int data_load_folder(sg_dataset *ds, const char *dir, int size, int c) {
    memset(ds, 0, sizeof *ds);
    if (size < 4 || size > 4096 || (c != 1 && c != 3))
        return sg_set_error("data: folder:%s: bad target %dx%dx%d (size 4..4096, 1 or 3 "
                            "channels)",
                            dir, size, size, c);
    int64_t n = 0;
    char **names;
    int rc = list_images(dir, &names, &n);
    if (!rc && n == 0)
        rc = sg_set_error("data: folder:%s: no .png, .jpg or .jpeg files in it or its subfolders",
                          dir);
    size_t per = (size_t)size * size * (size_t)c;
    if (!rc && !(ds->pixels = malloc(per * (size_t)n)))
        rc = sg_set_error("data: folder:%s: out of memory for %lld images", dir, (long long)n);
    if (!rc) {
        folder_job j = {.dir = dir, .names = names, .n = n, .size = size, .c = c};
        j.pixels = ds->pixels;
        rc = decode_all(&j);
    }
    if (!rc) rc = folder_labels(ds, dir, names, n);
    for (int64_t i = 0; i < n; i++) free(names[i]);
    free(names);
    if (rc) return data_free(ds), SG_ERR;
    ds->n = n, ds->h = ds->w = size, ds->c = c;
    snprintf(ds->source, sizeof ds->source, "folder:%s", dir);
    return SG_OK;
}
