/* test_ckpt_json.c — the metadata JSON reader (checkpoints/ckpt_json.h): valid documents parse
 * and read back through paths, invalid ones are refused with line:col, comparison names the
 * first differing path, rendering round-trips. */
#include "checkpoints/ckpt_json.h"
#include "common/sg_base.h"
#include "tests/sg_test.h"

static ckpt_json *parse(const char *s) {
    return ckpt_json_parse(s, strlen(s));
}

int main(void) {
    const char *doc =
        " {\"model\": \"unet_cifar\", \"config\": {\"ch\": 128, \"ch_mult\": [1, 2, 2, 2],\n"
        "  \"dropout\": 0.1, \"resample_conv\": true, \"attn_res\": [16], \"none\": null},\n"
        "  \"step\": 9007199254740993, \"neg\": -9223372036854775808, \"big\": 1e300,\n"
        "  \"esc\": \"a\\\"b\\\\c\\/d\\n\\u00e9\\ud83d\\ude00\", \"empty\": {}, \"arr\": [] } ";
    ckpt_json *j = parse(doc);
    CHECK(j != NULL, "parse: %s", sg_last_error());
    int64_t v = 0;
    double d = 0;
    int b = 0;
    char s[64];
    CHECK(ckpt_json_get_int(j, "config.ch", &v) == SG_OK && v == 128, "config.ch");
    CHECK(ckpt_json_get_int(j, "config.ch_mult[3]", &v) == SG_OK && v == 2, "ch_mult[3]");
    CHECK(ckpt_json_get_int(j, "config.ch_mult.1", &v) == SG_OK && v == 2, "ch_mult.1");
    CHECK(ckpt_json_get_int(j, "step", &v) == SG_OK && v == 9007199254740993ll,
          "int64 beyond double precision");
    CHECK(ckpt_json_get_int(j, "neg", &v) == SG_OK && v == INT64_MIN, "INT64_MIN");
    CHECK(ckpt_json_get_double(j, "config.dropout", &d) == SG_OK && d == 0.1, "dropout");
    CHECK(ckpt_json_get_double(j, "big", &d) == SG_OK && d == 1e300, "1e300");
    CHECK(ckpt_json_get_int(j, "config.dropout", &v) == SG_ERR &&
              strstr(sg_last_error(), "not an integer"),
          "0.1 is not an integer");
    CHECK(ckpt_json_get_bool(j, "config.resample_conv", &b) == SG_OK && b == 1, "bool");
    CHECK(ckpt_json_get_string(j, "model", s, sizeof s) == SG_OK && !strcmp(s, "unet_cifar"),
          "string");
    CHECK(ckpt_json_get_string(j, "esc", s, sizeof s) == SG_OK &&
              !strcmp(s, "a\"b\\c/d\n\xc3\xa9\xf0\x9f\x98\x80"),
          "escapes and surrogate pairs");
    CHECK(ckpt_json_get_string(j, "model", s, 4) == SG_ERR, "string too long for buffer");
    CHECK(ckpt_json_get_int(j, "config.nope", &v) == SG_ERR &&
              strstr(sg_last_error(), "config.nope"),
          "missing field named");
    CHECK(ckpt_json_get_int(j, "config.ch_mult[4]", &v) == SG_ERR, "index past the end");
    CHECK(ckpt_json_get_string(j, "config.ch", s, sizeof s) == SG_ERR, "wrong type");
    CHECK(ckpt_json_type(j, ckpt_json_find(j, 0, "config.none")) == CKPT_JSON_NULL, "null");
    CHECK(ckpt_json_count(j, ckpt_json_find(j, 0, "empty")) == 0, "empty object");
    CHECK(ckpt_json_type(j, ckpt_json_find(j, 0, "arr")) == CKPT_JSON_ARRAY, "empty array");
    CHECK(ckpt_json_find(j, 0, "") == 0, "empty path is the node itself");

    ckpt_json *x0;
    /* render round trip */
    char out[1024];
    size_t n = ckpt_json_render(j, 0, out, sizeof out);
    CHECK(n < sizeof out, "render fits");
    ckpt_json *k = ckpt_json_parse(out, n);
    CHECK(k && ckpt_json_diff(j, 0, k, 0, NULL, 0) == 0, "render round trip: %s", out);
    ckpt_json_render(j, ckpt_json_find(j, 0, "config.dropout"), out, sizeof out);
    CHECK(!strcmp(out, "0.1"), "shortest double rendering: %s", out);
    ckpt_json_free(k);

    /* comparison */
    ckpt_json *a = parse("{\"x\":1,\"c\":{\"ch\":128,\"m\":[1,2]},\"s\":\"a\"}");
    ckpt_json *c = parse("{\"s\":\"a\",\"c\":{\"m\":[1,2],\"ch\":128},\"x\":1.0}");
    char where[256];
    CHECK(a && c && ckpt_json_diff(a, 0, c, 0, where, sizeof where) == 0,
          "key order and 1 vs 1.0 do not matter: %s", where);
    ckpt_json_free(c);
    c = parse("{\"s\":\"a\",\"c\":{\"m\":[1,3],\"ch\":128},\"x\":1}");
    CHECK(ckpt_json_diff(a, 0, c, 0, where, sizeof where) == 1 && !strcmp(where, "c.m[1]: 2 vs 3"),
          "array element: %s", where);
    ckpt_json_free(c);
    c = parse("{\"s\":\"a\",\"c\":{\"m\":[1,2]},\"x\":1}");
    CHECK(ckpt_json_diff(a, 0, c, 0, where, sizeof where) == 1 &&
              !strcmp(where, "c.ch: 128 vs (absent)"),
          "missing key: %s", where);
    ckpt_json_free(c);
    c = parse("{\"s\":\"a\",\"c\":{\"m\":[1,2],\"ch\":128,\"new\":true},\"x\":1}");
    CHECK(ckpt_json_diff(a, 0, c, 0, where, sizeof where) == 1 &&
              !strcmp(where, "c.new: (absent) vs true"),
          "extra key: %s", where);
    ckpt_json_free(c);
    c = parse("[1]");
    CHECK(ckpt_json_diff(a, 0, c, 0, where, sizeof where) == 1 && strstr(where, "(root)"),
          "different root types: %s", where);
    ckpt_json_free(c);
    ckpt_json_free(a);
    ckpt_json_free(j);

    /* an integer past int64 (a uint64 seed, as sg_exec_meta_json writes it) still parses;
     * the other integers stay exact integers */
    x0 = parse("{\"seed\":18446744073709551615,\"step\":9007199254740992,\"c\":{\"ch\":-3}}");
    CHECK(x0 != NULL, "uint64 seed parses: %s", sg_last_error());
    CHECK(ckpt_json_get_int(x0, "step", &v) == SG_OK && v == 9007199254740992ll, "step exact");
    CHECK(ckpt_json_get_int(x0, "c.ch", &v) == SG_OK && v == -3, "nested int exact");
    CHECK(ckpt_json_get_double(x0, "seed", &d) == SG_OK && d == 18446744073709551615.0, "seed");
    ckpt_json_free(x0);

    /* invalid documents, each refused with a position */
    const char *bad[] = {
        "",
        " ",
        "{",
        "}",
        "{\"a\":1,}",
        "[1,]",
        "{\"a\" 1}",
        "{a:1}",
        "[1 2]",
        "01",
        "1.",
        ".5",
        "-",
        "1e",
        "+1",
        "NaN",
        "Infinity",
        "tru",
        "nul",
        "\"abc",
        "\"a\\x\"",
        "\"\\u12\"",
        "\"\\ud800\"",
        "\"\\udc00\"",
        "\"\\u0000\"",
        "\"a\nb\"",
        "{\"a\":1}x",
        "{\"a\":1,\"a\":2}",
        "1e999",
        "[[[[",
        "{\"a\":[1,{\"b\":}]}",
    };
    for (int i = 0; i < SG_ARRAY_LEN(bad); i++) {
        ckpt_json *x = parse(bad[i]);
        CHECK(x == NULL && strstr(sg_last_error(), "json: line"), "'%s' must be refused (%s)",
              bad[i], x ? "accepted" : sg_last_error());
        ckpt_json_free(x);
    }
    ckpt_json *x = parse("{\n  \"a\": 1,\n  \"b\": ]\n}");
    CHECK(!x && strstr(sg_last_error(), "line 3 col 8"), "position: %s", sg_last_error());
    /* nesting: 64 levels fine, 65 refused */
    char deep[200];
    for (int depth = 64; depth <= 65; depth++) {
        memset(deep, '[', (size_t)depth);
        memset(deep + depth, ']', (size_t)depth);
        deep[2 * depth] = 0;
        x = parse(deep);
        CHECK((x != NULL) == (depth == 64), "depth %d", depth);
        ckpt_json_free(x);
    }
    CHECK(ckpt_json_parse(NULL, 0) == NULL, "NULL text");
    /* text with an embedded NUL is refused, not cut */
    x = ckpt_json_parse("{}\0{}", 5);
    CHECK(!x, "embedded NUL");
    return sg_test_end();
}
