/* test_ckpt_cli.c — smoke tests of build/ckpt over the fixture checkpoints
 * (test_ckpt_fixture): every command runs, exit codes are right, every --json output parses
 * (with the strict reader) and says what it should, and a damaged file is reported with the
 * name of its damaged tensor.
 * usage: test_ckpt_cli CKPT_BINARY FIXTURE_DIR
 */
#include <sys/wait.h>

#include "checkpoints/ckpt.h"
#include "checkpoints/ckpt_json.h"
#include "tests/sg_test.h"

static const char *bin, *dir;
static char out[1 << 22], err[1 << 16];

/* run "ckpt ARGS"; stdout in out, stderr in err; returns the exit status */
static int run(const char *fmt, ...) {
    char args[2048], cmd[4096], errpath[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(errpath, sizeof errpath, "%s/cli_stderr.txt", dir);
    snprintf(cmd, sizeof cmd, "%s %s 2>%s", bin, args, errpath);
    FILE *p = popen(cmd, "r");
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    int st = pclose(p);
    FILE *e = fopen(errpath, "r");
    n = e ? fread(err, 1, sizeof err - 1, e) : 0;
    err[n] = 0;
    if (e) fclose(e);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static ckpt_json *parse_out(const char *what) {
    ckpt_json *j = ckpt_json_parse(out, strlen(out));
    CHECK(j != NULL, "%s: --json output does not parse: %s", what, sg_last_error());
    return j;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: test_ckpt_cli CKPT_BINARY FIXTURE_DIR\n");
        return 2;
    }
    bin = argv[1], dir = argv[2];
    char a[512], b[512], a2[512], bad[512], damaged[256] = "";
    snprintf(a, sizeof a, "%s/a.sgck", dir);
    snprintf(a2, sizeof a2, "%s/a_copy.sgck", dir);
    snprintf(b, sizeof b, "%s/b.sgck", dir);
    snprintf(bad, sizeof bad, "%s/corrupt.sgck", dir);
    {
        char p[512];
        snprintf(p, sizeof p, "%s/corrupt_tensor.txt", dir);
        FILE *f = fopen(p, "r");
        if (!f || !fgets(damaged, sizeof damaged, f)) return 1;
        fclose(f);
        damaged[strcspn(damaged, "\n")] = 0;
    }
    ckpt_file *f = ckpt_open(a);
    if (!f) {
        fprintf(stderr, "%s\n", sg_last_error());
        return 1;
    }
    int count = ckpt_count(f), nparam = 0;
    for (int i = 0; i < count; i++) {
        ckpt_entry e;
        ckpt_tensor_info(f, i, &e);
        nparam += e.role == ROLE_PARAM;
    }
    ckpt_close(f);
    ckpt_json *j;
    int64_t v;

    /* info */
    CHECK(run("info %s", a) == 0 && strstr(out, "by role") && strstr(out, "adam_v") &&
              strstr(out, "ratio"),
          "info: %s", err);
    CHECK(run("info %s --json", a) == 0, "info --json: %s", err);
    if ((j = parse_out("info"))) {
        CHECK(ckpt_json_get_int(j, "tensors", &v) == SG_OK && v == count, "info: tensors");
        CHECK(ckpt_json_get_int(j, "meta.step", &v) == SG_OK && v == 1000, "info: meta.step");
        CHECK(ckpt_json_get_int(j, "by_role.param.count", &v) == SG_OK && v == nparam,
              "info: by_role.param.count");
        double r;
        CHECK(ckpt_json_get_double(j, "ratio", &r) == SG_OK && r > 1.0, "info: ratio");
        CHECK(ckpt_json_get_int(j, "by_dtype.f32.count", &v) == SG_OK && v == count - 2,
              "info: by_dtype.f32");
        /* the fixture's config predates down_pad: such checkpoints padded symmetrically */
        char pad[32];
        int rec = 1;
        CHECK(ckpt_json_get_string(j, "down_pad", pad, sizeof pad) == SG_OK &&
                  !strcmp(pad, "symmetric") &&
                  ckpt_json_get_bool(j, "down_pad_recorded", &rec) == SG_OK && !rec,
              "info --json: down_pad symmetric, not recorded");
        ckpt_json_free(j);
    }
    CHECK(run("info %s", a) == 0 &&
              strstr(out, "downsample padding symmetric (no config.down_pad: written before"),
          "info names the padding of a checkpoint from before down_pad: %s", out);

    /* ls */
    CHECK(run("ls %s", a) == 0 && strstr(out, "conv_in.weight") && strstr(out, "[32,3,3,3]"),
          "ls: %s", err);
    CHECK(run("ls --json %s", a) == 0, "ls --json");
    if ((j = parse_out("ls"))) {
        CHECK(ckpt_json_count(j, 0) == count, "ls: %d entries", ckpt_json_count(j, 0));
        char name[128];
        CHECK(ckpt_json_get_string(j, "[0].name", name, sizeof name) == SG_OK, "ls: [0].name");
        CHECK(ckpt_json_find(j, 0, "[0].shape[0]") >= 0, "ls: shape");
        ckpt_json_free(j);
    }

    /* stats */
    CHECK(run("stats %s", a) == 0 && strstr(out, "mean"), "stats: %s", err);
    CHECK(run("stats %s --json --role ema", a) == 0, "stats --json");
    if ((j = parse_out("stats"))) {
        CHECK(ckpt_json_count(j, 0) == nparam, "stats --role ema: %d entries",
              ckpt_json_count(j, 0));
        int ok = 1;
        for (int i = 0; i < ckpt_json_count(j, 0); i++) {
            int c = ckpt_json_child(j, 0, i);
            double mn = ckpt_json_number(j, ckpt_json_find(j, c, "min"));
            double mx = ckpt_json_number(j, ckpt_json_find(j, c, "max"));
            double sd = ckpt_json_number(j, ckpt_json_find(j, c, "std"));
            const char *nm = ckpt_json_string(j, ckpt_json_find(j, c, "name"));
            ok &= mn <= mx && sd >= 0 && mn >= -0.2 && mx <= 0.2 && nm && !strncmp(nm, "ema:", 4);
        }
        CHECK(ok, "stats: values out of the generated range");
        ckpt_json_free(j);
    }
    CHECK(run("stats %s --role nosuch", a) == 2, "stats: unknown role is a usage error");

    /* diff */
    CHECK(run("diff %s %s", a, a2) == 0 && strstr(out, "EQUAL"), "diff equal: %s %s", out, err);
    CHECK(run("diff %s %s", a, b) == 1 && strstr(out, "down_blocks.1.attentions.0.to_qkv.weight") &&
              strstr(out, "first at 5 [0,0,0,5]") && strstr(out, "metadata differs: step"),
          "diff different: %s", out);
    CHECK(run("diff --ignore-meta %s %s", a, b) == 1, "diff --ignore-meta still sees the tensor");
    CHECK(run("diff --json %s %s", a, b) == 1, "diff --json");
    if ((j = parse_out("diff"))) {
        int eq = 1;
        CHECK(ckpt_json_get_bool(j, "equal", &eq) == SG_OK && !eq, "diff: equal false");
        CHECK(ckpt_json_get_int(j, "differing_tensors", &v) == SG_OK && v == 1, "diff: 1 tensor");
        int found = 0;
        for (int i = 0; i < ckpt_json_count(j, ckpt_json_find(j, 0, "tensors")); i++) {
            char p[64], st[32];
            snprintf(p, sizeof p, "tensors[%d].status", i);
            ckpt_json_get_string(j, p, st, sizeof st);
            if (strcmp(st, "differs") == 0) {
                double d;
                snprintf(p, sizeof p, "tensors[%d].max_abs", i);
                found = ckpt_json_get_double(j, p, &d) == SG_OK && fabs(d - 0.25) < 1e-6;
                snprintf(p, sizeof p, "tensors[%d].first", i);
                found &= ckpt_json_get_int(j, p, &v) == SG_OK && v == 5;
            }
        }
        CHECK(found, "diff --json: the differing tensor with max_abs 0.25 at 5");
        ckpt_json_free(j);
    }

    /* verify */
    CHECK(run("verify %s", a) == 0 && strstr(out, "OK"), "verify good: %s %s", out, err);
    CHECK(run("verify %s", bad) == 1 && strstr(out, damaged) && strstr(err, damaged),
          "verify must fail naming '%s': out=%s err=%s", damaged, out, err);
    CHECK(run("verify --json %s", bad) == 1, "verify --json bad");
    if ((j = parse_out("verify"))) {
        char name[256];
        int ok = 1;
        CHECK(ckpt_json_get_bool(j, "ok", &ok) == SG_OK && !ok, "verify --json: ok false");
        CHECK(ckpt_json_get_string(j, "bad_tensors[0]", name, sizeof name) == SG_OK &&
                  !strcmp(name, damaged),
              "verify --json: bad_tensors[0]");
        ckpt_json_free(j);
    }
    CHECK(run("verify --json %s", a) == 0, "verify --json good");
    if ((j = parse_out("verify good"))) ckpt_json_free(j);

    /* dump */
    CHECK(run("dump %s state.step", a) == 0 && strstr(out, "\n1000\n"), "dump step: %s", out);
    CHECK(run("dump --json %s conv_in.bias", a) == 0, "dump --json");
    if ((j = parse_out("dump"))) {
        CHECK(ckpt_json_count(j, ckpt_json_find(j, 0, "values")) == 32, "dump: 32 values");
        ckpt_json_free(j);
    }
    CHECK(run("dump --limit 3 %s conv_in.weight", a) == 0, "dump --limit");
    int lines = 0;
    for (char *p = out; *p; p++) lines += *p == '\n';
    CHECK(lines == 4, "dump --limit 3 printed %d lines", lines);
    CHECK(run("dump %s no.such.tensor", a) == 1 && strstr(err, "no tensor named"),
          "dump of a missing tensor: %s", err);

    /* export */
    char st[512];
    snprintf(st, sizeof st, "%s/cli_export.safetensors", dir);
    CHECK(run("export %s --safetensors %s --ema", a, st) == 0, "export: %s", err);
    FILE *sf = fopen(st, "rb");
    uint8_t len8[8] = {0};
    CHECK(sf && fread(len8, 1, 8, sf) == 8 && len8[0] % 8 == 0, "export: safetensors header");
    if (sf) fclose(sf);
    CHECK(run("export %s", a) == 2, "export without --safetensors is a usage error");
    CHECK(run("export %s --safetensors %s --diffusers %s/d", a, st, dir) == 2,
          "--safetensors and --diffusers together are a usage error");
    CHECK(run("export %s --safetensors %s --raw", a, st) == 2, "--raw goes with --diffusers");

    /* errors and usage */
    CHECK(run("") == 2, "no command");
    CHECK(run("frobnicate %s", a) == 2, "unknown command");
    CHECK(run("info") == 2, "info without a file");
    CHECK(run("info %s --bogus", a) == 2, "unknown option");
    CHECK(run("info %s/missing.sgck", dir) == 1 && strstr(err, "cannot open"), "missing file: %s",
          err);
    CHECK(run("info %s/corrupt_tensor.txt", dir) == 1 && strstr(err, "bad magic"),
          "not a checkpoint: %s", err);
    CHECK(run("info %s", bad) == 1 && strstr(err, damaged), "info on a damaged file: %s", err);
    CHECK(run("--help") == 0 && strstr(out, "usage"), "--help");
    return sg_test_end();
}
