/* data_fuzz_target.c — the fuzz target of the training data a user points `train --data` at:
 * each input is written as a file and read by every loader that takes a single file's bytes:
 *   - as IDX images (data_load_idx: raw or gzip, the Fashion-MNIST format, `--data idx:FILE`);
 *   - as a PNG and as a JPEG alone in a folder (data_load_folder, `--data folder:DIR`), decoded
 *     to 8 x 8 in grey or RGB (the input's last byte chooses).
 * Properties, beyond no crash, overflow or leak (built with ASan/UBSan): a refusal sets an
 * error message that names the file, and leaves no pixels; an acceptance has the shape asked
 * for (the folder) or one within the loader's bounds (IDX).
 *
 * Built two ways: with -DSG_LIBFUZZER as a libFuzzer target (tests/fuzz/build.sh), and into
 * test_data_corpus, which replays tests/fuzz/data_corpus/ under ctest.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/dataset.h"

int data_fuzz_one(const uint8_t *data, size_t size);

static char dir[64];
static char paths[3][96]; /* dir/x-idx3-ubyte, dir/png/x.png, dir/jpg/x.jpg */

static void require(int cond, const char *what) {
    if (cond) return;
    fprintf(stderr, "data fuzz: property violated: %s (last error: %s)\n", what, sg_last_error());
    abort();
}

static void cleanup(void) {
    for (int k = 0; k < 3; k++) unlink(paths[k]);
    char sub[96];
    snprintf(sub, sizeof sub, "%s/png", dir), rmdir(sub);
    snprintf(sub, sizeof sub, "%s/jpg", dir), rmdir(sub);
    rmdir(dir);
}

static void setup(void) {
    if (*dir) return;
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%.40s/sg_dfuzz_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("data fuzz: mkdtemp");
        abort();
    }
    char sub[96];
    snprintf(sub, sizeof sub, "%s/png", dir), mkdir(sub, 0700);
    snprintf(sub, sizeof sub, "%s/jpg", dir), mkdir(sub, 0700);
    snprintf(paths[0], sizeof paths[0], "%s/x-idx3-ubyte", dir);
    snprintf(paths[1], sizeof paths[1], "%s/png/x.png", dir);
    snprintf(paths[2], sizeof paths[2], "%s/jpg/x.jpg", dir);
    atexit(cleanup);
}

static void put_file(const char *path, const uint8_t *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(p, 1, n, f) != n) || fclose(f)) {
        perror("data fuzz: writing the input");
        abort();
    }
}

static void refused(const sg_dataset *ds, const char *name) {
    require(ds->pixels == NULL, "pixels left after a refusal");
    require(strstr(sg_last_error(), name) != NULL, "a refusal that does not name the file");
}

int data_fuzz_one(const uint8_t *data, size_t size) {
    setup();
    sg_dataset ds;
    put_file(paths[0], data, size);
    sg_set_error("%s", "");
    if (data_load_idx(&ds, paths[0]) == SG_OK) {
        require(ds.n >= 1 && ds.h >= 1 && ds.w >= 1 && ds.c >= 1 && ds.c <= 4 && ds.pixels,
                "an accepted IDX file's shape");
        /* every pixel is readable (ASan checks the buffer's length) */
        uint64_t sum = 0;
        for (int64_t i = 0; i < ds.n * ds.h * ds.w * ds.c; i++) sum += ds.pixels[i];
        (void)sum;
    } else {
        refused(&ds, "x-idx3-ubyte");
    }
    data_free(&ds);
    const int c = size && data[size - 1] & 1 ? 3 : 1;
    for (int k = 1; k <= 2; k++) {
        put_file(paths[k], data, size);
        char folder[96];
        snprintf(folder, sizeof folder, "%s/%s", dir, k == 1 ? "png" : "jpg");
        sg_set_error("%s", "");
        if (data_load_folder(&ds, folder, 8, c) == SG_OK)
            require(ds.n == 1 && ds.h == 8 && ds.w == 8 && ds.c == c && ds.pixels,
                    "an accepted image's shape");
        else
            refused(&ds, k == 1 ? "x.png" : "x.jpg");
        data_free(&ds);
        unlink(paths[k]);
    }
    return 0;
}

#ifdef SG_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    return data_fuzz_one(data, size);
}
#endif
