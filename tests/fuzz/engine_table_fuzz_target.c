/* engine_table_fuzz_target.c — the fuzz target of engine tables, the JSON file `--engine-table
 * FILE` reads (train, bench, plan; bench --tune-engines writes them):
 * sg_engine_table_parse -> its JSON form (sg_engine_table_json) parsed again -> checked against
 * the plan of the model, precision and batch the table names (sg_engine_table_check, the check
 * every run makes before it plans with a table; the plan built once per model and kept).
 * Properties, beyond no crash, overflow or leak (built with ASan/UBSan):
 *   - a refused table sets an error message;
 *   - an accepted table survives its own JSON form: it parses back with the same hash and
 *     renders to the same text (a tuned table is written and read back this way).
 *
 * Built two ways: with -DSG_LIBFUZZER as a libFuzzer target (tests/fuzz/build.sh), and into
 * test_engine_table_corpus, which replays tests/fuzz/engine_table_corpus/ under ctest.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/engine_table_io.h"
#include "planner/plan.h"

int engine_table_fuzz_one(const uint8_t *data, size_t size);

static void require(int cond, const char *what) {
    if (cond) return;
    fprintf(stderr, "engine table fuzz: property violated: %s (last error: %s)\n", what,
            sg_last_error());
    abort();
}

/* the last plan built, for the table's model, precision and batch */
static struct {
    int built, planned, ok; /* planned: sg_plan_build ran (its plan is freed either way) */
    char model[32], precision[8];
    int batch;
    sg_plan p;
} cache;

static void free_cache(void) {
    if (cache.planned) sg_plan_free(&cache.p);
    cache.planned = 0;
}

static const sg_plan *plan_for(const sg_engine_table *t) {
    if (cache.built && !strcmp(cache.model, t->model) && !strcmp(cache.precision, t->precision) &&
        cache.batch == t->batch)
        return cache.ok ? &cache.p : NULL;
    if (!cache.built) atexit(free_cache);
    free_cache();
    cache.built = 1, cache.ok = 0, cache.planned = 0;
    snprintf(cache.model, sizeof cache.model, "%s", t->model);
    snprintf(cache.precision, sizeof cache.precision, "%s", t->precision);
    cache.batch = t->batch;
    sg_model_cfg cfg;
    /* a preset at a plausible batch (a plan at batch 65536 is slow and says nothing more) */
    if (sg_model_preset(&cfg, t->model) || t->batch < 1 || t->batch > 256) return NULL;
    cfg.batch = t->batch;
    cfg.act_dt = strcmp(t->precision, "bf16") ? DT_F32 : DT_BF16;
    cache.planned = 1;
    if (sg_plan_build(&cache.p, &cfg, 1) != SG_OK) return NULL;
    cache.ok = 1;
    return &cache.p;
}

int engine_table_fuzz_one(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    require(text != NULL, "out of memory");
    memcpy(text, data, size);
    text[size] = 0;
    sg_engine_table t, back;
    sg_set_error("%s", "");
    int rc = sg_engine_table_parse(text, "fuzz.json", &t);
    free(text);
    if (rc) {
        require(*sg_last_error(), "a refused table without a message");
        sg_engine_table_free(&t);
        return 0;
    }
    char *json = sg_engine_table_json(&t);
    require(json != NULL, "an accepted table has no JSON form");
    require(sg_engine_table_parse(json, "fuzz.json (rendered)", &back) == SG_OK,
            "an accepted table's JSON form does not parse");
    char *again = sg_engine_table_json(&back);
    require(again && !strcmp(again, json), "an accepted table's JSON form renders differently");
    require(sg_engine_table_hash(&t) == sg_engine_table_hash(&back),
            "an accepted table's JSON form has another hash");
    free(again);
    free(json);
    sg_engine_table_free(&back);
    const sg_plan *p = plan_for(&t);
    if (p) {
        sg_set_error("%s", "");
        if (sg_engine_table_check(&t, &p->g, &p->cfg, 1))
            require(*sg_last_error(), "a table refused for the plan without a message");
    }
    sg_engine_table_free(&t);
    return 0;
}

#ifdef SG_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    return engine_table_fuzz_one(data, size);
}
#endif
