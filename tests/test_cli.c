/* test_cli.c — tools/cli.h's strict parsing and sg_set_error fed its own message.
 *
 * Every value a user can type wrong is tried: blanks, signs, overflow, trailing junk, NaN,
 * infinities, ranges; each must be refused with a message naming the flag, and each good
 * value must parse exactly. */
#include <math.h>
#include <string.h>

#include "graph/weights.h"
#include "tests/sg_test.h"
#include "tools/cli.h"

static void test_integers(void) {
    int64_t v = 7;
    static const char *const bad[] = {"",
                                      " 1",
                                      "1 ",
                                      "-1",
                                      "+1",
                                      "1e3",
                                      "0x10",
                                      "1.0",
                                      "a",
                                      "4294967297",
                                      "99999999999999999999",
                                      "--1"};
    for (int i = 0; i < SG_ARRAY_LEN(bad); i++) {
        CHECK(cli_parse_i64("--keep", bad[i], 0, 1 << 20, &v) == SG_ERR, "'%s' refused", bad[i]);
        CHECK(strstr(sg_last_error(), "--keep") != NULL, "message names the flag");
    }
    CHECK(v == 7, "a refused value leaves the output alone");
    CHECK(cli_parse_i64("--n", "1048576", 0, 1 << 20, &v) == SG_OK && v == 1 << 20, "upper bound");
    CHECK(cli_parse_i64("--n", "-5", -10, 10, &v) == SG_OK && v == -5, "negative in range");
    CHECK(cli_parse_i64("--n", "9223372036854775807", 0, INT64_MAX, &v) == SG_OK && v == INT64_MAX,
          "INT64_MAX");
    int x = 0;
    CHECK(cli_parse_int("--n", "2147483648", 0, 1 << 30, &x) == SG_ERR, "int overflow refused");
    uint64_t u = 0;
    CHECK(cli_parse_u64("--seed", "18446744073709551615", &u) == SG_OK && u == UINT64_MAX,
          "UINT64_MAX");
    CHECK(cli_parse_u64("--seed", "18446744073709551616", &u) == SG_ERR, "u64 overflow");
    CHECK(cli_parse_u64("--seed", " -1", &u) == SG_ERR, "' -1' as u64");
}

static void test_floats(void) {
    float f = 3;
    static const char *const bad[] = {"",     "nan",  "NaN",  "-nan", "inf", "-inf",
                                      " 0.5", "0.5 ", "1e39", "0.5x", "2",   "-0.1"};
    for (int i = 0; i < SG_ARRAY_LEN(bad); i++)
        CHECK(cli_parse_float("--dropout", bad[i], 0, 1, &f) == SG_ERR, "'%s' refused", bad[i]);
    CHECK(f == 3, "a refused value leaves the output alone");
    CHECK(cli_parse_float("--lr", "2e-4", 0, 10, &f) == SG_OK && f == 2e-4f, "2e-4");
    CHECK(cli_parse_float("--lr", "1e-300", 0, 10, &f) == SG_OK, "underflow to 0 is in range");
    CHECK(cli_parse_float("--x", "3.5e38", 0, 1e39, &f) == SG_ERR, "beyond float range");
}

static void test_error_into_itself(void) {
    sg_set_error("inner %d", 42);
    sg_set_error("outer: %s", sg_last_error());
    CHECK(!strcmp(sg_last_error(), "outer: inner 42"), "got '%s'", sg_last_error());
    sg_set_error("%s and %s", sg_last_error(), sg_last_error());
    CHECK(!strcmp(sg_last_error(), "outer: inner 42 and outer: inner 42"), "got '%s'",
          sg_last_error());
}

/* a value given to --help is refused by the walker, which prints why: a tool answers --help at
 * once (--help=3 printed the help); -h=3 likewise */
static void test_help_value(void) {
    static char given[][16] = {"--help=3", "--help=", "-h=x"};
    for (int i = 0; i < SG_ARRAY_LEN(given); i++) {
        char *argv[] = {"test_cli", given[i], NULL};
        cli_args a;
        cli_args_init(&a, "test_cli", 2, argv);
        CHECK(cli_next(&a) == 1 && !cli_is(&a, "--help") && cli_unknown(&a) == SG_ERR_USAGE &&
                  !cli_next(&a),
              "%s was taken as --help", given[i]);
    }
    char *argv[] = {"test_cli", "--help", NULL};
    cli_args a;
    cli_args_init(&a, "test_cli", 2, argv);
    CHECK(cli_next(&a) == 1 && cli_is(&a, "--help"), "--help alone");
}

static void test_model_json_roundtrip(void) {
    /* a config survives cli_model_json -> cli_model_from_json field for field */
    static const char *const models[] = {"unet_cifar", "unet_adm64", "unet_tiny", "unet_fmnist"};
    for (int m = 0; m < 4; m++) {
        sg_model_cfg a, b;
        CHECK(sg_model_preset(&a, models[m]) == SG_OK, "preset");
        a.lr = 1.2345e-4f, a.dropout = 0.3f, a.batch = 3, a.act_dt = DT_BF16, a.warmup = 7;
        if (m == 2) a.grad_accum = 3; /* gradient accumulation: recorded when K > 1 */
        a.store_norm = m == 1;        /* kept normalisations: recorded when on */
        a.store_attn = m == 2;        /* kept attention P: recorded when off */
        /* fusion: recorded resolved (as a plan's config holds it), on for bf16 unless off */
        a.fuse = m == 3 ? 0 : 1;
        a.data_n = a.data_h = a.data_w = 0;
        json_t *j = cli_model_json(&a);
        CHECK(j && cli_model_from_json(j, &b) == SG_OK, "%s: %s", models[m], sg_last_error());
        json_decref(j);
        b.data_n = b.data_h = b.data_w = 0;
        CHECK(!memcmp(&a, &b, sizeof a), "%s: config round trip", models[m]);
    }
}

/* a weights source's config may name no preset, but its name must stay a plain word: it is
 * written into sg_model_json's JSON text unescaped */
static void test_config_model_name(void) {
    sg_model_cfg c;
    static const char *const bad[] = {"{\"model\":\"a\\\"b\"}", "{\"model\":\"\"}",
                                      "{\"model\":\"x y\"}",
                                      "{\"model\":\"0123456789012345678901234567890123\"}"};
    for (int i = 0; i < SG_ARRAY_LEN(bad); i++) {
        json_t *j = json_loads(bad[i], 0, NULL);
        CHECK(j && sg_model_cfg_from_config(j, 1, &c) == SG_ERR &&
                  strstr(sg_last_error(), "is not a word"),
              "%s accepted: %s", bad[i], sg_last_error());
        json_decref(j);
    }
    json_t *j = json_loads("{\"model\":\"diffusers\"}", 0, NULL);
    CHECK(j && sg_model_cfg_from_config(j, 1, &c) == SG_OK && !strcmp(c.name, "diffusers"),
          "diffusers: %s", sg_last_error());
    json_decref(j);
}

int main(void) {
    test_integers();
    test_floats();
    test_error_into_itself();
    test_help_value();
    test_model_json_roundtrip();
    test_config_model_name();
    return sg_test_end();
}
