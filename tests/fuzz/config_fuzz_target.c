/* config_fuzz_target.c — the fuzz target of model configurations: command-line model flags
 * -> the tools' parser (tools/cli.h) -> the UNet builder -> the plan -> its verifier.
 *
 * The input is a command line, one argument per line ("--model\nunet_tiny\n--ch-mult=1,2\n"),
 * so every flag and value the CLI accepts can be reached, over its full range: what the
 * parser accepts must either plan (and then pass sg_plan_verify, and its config must survive
 * the JSON round trip a resume relies on) or fail with a clean error. Nothing may crash,
 * overflow or leak (built with ASan/UBSan). A too-large config is a clean error from
 * sg_model_validate (its 2^40-element bound), so every accepted input plans quickly.
 *
 * Built two ways: with -DSG_LIBFUZZER as a libFuzzer target (tests/fuzz/build.sh), and into
 * test_config_corpus, which replays tests/fuzz/config_corpus/ under ctest.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/plan.h"
#include "tools/cli.h"

int config_fuzz_one(const uint8_t *data, size_t size);

enum { MAX_ARGS = 40, MAX_TEXT = 2048 };

/* a failed property is a finding: abort so that the fuzzer keeps the input */
static void require(int cond, const char *what) {
    if (cond) return;
    fprintf(stderr, "config fuzz: property violated: %s\n", what);
    abort();
}

static void check_plan(const sg_plan *p, const sg_model_cfg *cfg) {
    require(p->arena_bytes >= p->lower_bound_bytes, "arena below its lower bound");
    for (int t = 0; t < p->g.nt; t++) {
        const sg_tensor *x = &p->g.t[t];
        /* a concatenation of its parts, or a normalisation computed inside the convolutions
         * that read it: not placed itself */
        if (sg_tensor_virtual(x)) continue;
        require(x->bytes >= 0 && x->offset >= 0 && x->offset + x->bytes <= p->arena_bytes,
                "tensor outside the arena");
    }
    /* the resume path rebuilds the config from its JSON: it must come back field for field */
    sg_model_cfg back;
    json_t *j = cli_model_json(cfg);
    require(j && cli_model_from_json(j, &back) == SG_OK, "config JSON does not read back");
    json_decref(j);
    back.data_n = cfg->data_n, back.data_h = cfg->data_h, back.data_w = cfg->data_w;
    require(!memcmp(&back, cfg, sizeof back), "config JSON round trip changed a field");
}

int config_fuzz_one(const uint8_t *data, size_t size) {
    char text[MAX_TEXT + 1];
    size_t n = size < MAX_TEXT ? size : MAX_TEXT;
    memcpy(text, data, n);
    text[n] = 0;
    char *argv[MAX_ARGS + 1] = {"config_fuzz"};
    int argc = 1;
    for (char *line = text; line && argc < MAX_ARGS;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        if (*line || nl) argv[argc++] = line;
        line = nl ? nl + 1 : NULL;
    }
    argv[argc] = NULL;
    sg_model_cfg cfg;
    if (cli_model_prelude("config_fuzz", argc, argv, "unet_tiny", &cfg)) return 0;
    cli_args a;
    cli_args_init(&a, "config_fuzz", argc, argv);
    int train = 1;
    while (cli_next(&a)) {
        if (cli_is(&a, "--forward")) {
            train = 0;
            continue;
        }
        if (cli_model_flag(&a, &cfg) <= 0) return 0;
    }
#ifdef SG_LIBFUZZER
    /* fuzzing speed: the deepest models (up to 8 levels x 16 res blocks, seconds to plan
     * under the fuzzer's instrumentation), and the longest unrolled gradient-accumulation
     * steps (K copies of the model's nodes), are planned by the corpus replay, not here */
    if (cfg.nlevels * cfg.nrb > 24 || cfg.nlevels * cfg.nrb * cfg.grad_accum > 96) return 0;
#endif
    sg_plan p;
    /* the plan's config: what a checkpoint records (a forward plan's has no micro-batches) */
    if (sg_plan_build(&p, &cfg, train) == SG_OK) check_plan(&p, &p.cfg);
    sg_plan_free(&p);
    return 0;
}

#ifdef SG_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    return config_fuzz_one(data, size);
}
#endif
