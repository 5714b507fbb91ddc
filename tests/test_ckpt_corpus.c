/* test_ckpt_corpus.c — replays a saved fuzz corpus (tests/fuzz/corpus/ and the others: inputs
 * that found new coverage, and any input that once crashed, kept as regression tests) through
 * its fuzz target (tests/fuzz/ckpt_fuzz_target.c, or the one FUZZ_ONE names: sg_corpus_test in
 * tests/CMakeLists.txt builds one replay per target). Passing means no input crashes nor
 * breaks a property the target checks; the sanitizer build (-DSG_SANITIZE=ON) also catches
 * out-of-bounds reads and leaks.
 * usage: test_ckpt_corpus DIR...
 */
#include <dirent.h>
#include <sys/stat.h>

#include "tests/sg_test.h"

/* the fuzz target replayed: the checkpoint reader, or another (-DFUZZ_ONE=config_fuzz_one,
 * weights_fuzz_one, engine_table_fuzz_one, data_fuzz_one) */
#ifndef FUZZ_ONE
#define FUZZ_ONE ckpt_fuzz_one
#endif
int FUZZ_ONE(const uint8_t *data, size_t size);

static int replay_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "cannot open %s\n", dir);
        return -1;
    }
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.') continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        struct stat st;
        if (stat(path, &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) {
            int k = replay_dir(path);
            n += k > 0 ? k : 0;
            continue;
        }
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        uint8_t *buf = malloc((size_t)st.st_size + 1);
        size_t len = fread(buf, 1, (size_t)st.st_size, f);
        fclose(f);
        /* an exact-size copy, so reads past the end are caught by ASan */
        uint8_t *exact = malloc(len ? len : 1);
        memcpy(exact, buf, len);
        free(buf);
        FUZZ_ONE(exact, len);
        free(exact);
        n++;
    }
    closedir(d);
    return n;
}

int main(int argc, char **argv) {
    int total = 0;
    for (int i = 1; i < argc; i++) {
        int n = replay_dir(argv[i]);
        CHECK(n > 0, "no inputs replayed from %s", argv[i]);
        total += n > 0 ? n : 0;
    }
    printf("%d inputs replayed without a crash\n", total);
    return sg_test_end();
}
