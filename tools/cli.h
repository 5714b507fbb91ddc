/* cli.h — what every tool's main shares: the clock, strict number parsing, the argument
 * walker (`--flag value` and `--flag=value`), the model-flag prelude, the backend choice and
 * JSON output through the project's one JSON library (jansson).
 *
 * A tool's main reads:
 *   sg_model_cfg cfg;
 *   if (cli_model_prelude("train", argc, argv, "unet_fmnist", &cfg)) return 2;
 *   cli_args a;
 *   cli_args_init(&a, "train", argc, argv);
 *   while (cli_next(&a)) {
 *       if (cli_is(&a, "--help")) ...                         // a flag without a value
 *       int r = cli_model_flag(&a, &cfg);                     // 1 taken, 0 not a model flag
 *       if (r) { if (r < 0) return 2; continue; }
 *       if (cli_is(&a, "--steps")) { if (cli_i64(&a, 0, INT64_MAX, &steps)) return 2; }
 *       else return cli_unknown(&a);
 *   }
 * Every parse error is printed as "<tool>: <message>" once, and the caller returns 2.
 */
#ifndef SG_CLI_H
#define SG_CLI_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

#include "planner/engine_table.h"
#include "planner/model.h"
#include "planner/plan.h"

/* ---- clock and durations */
double cli_now_ms(void);                           /* CLOCK_MONOTONIC in milliseconds */
const char *cli_fmt_duration(double s, char *buf); /* "1h02m", "3m05s", "7s"; buf >= 16 */

/* ---- strict parsing (the whole string; no blanks, no silent wrap or truncation, no NaN).
 * SG_ERR with sg_set_error("<flag> expects ..., got '<v>'") on anything else. */
int cli_parse_i64(const char *flag, const char *v, int64_t lo, int64_t hi, int64_t *out);
int cli_parse_int(const char *flag, const char *v, int lo, int hi, int *out);
int cli_parse_u64(const char *flag, const char *v, uint64_t *out);
int cli_parse_float(const char *flag, const char *v, double lo, double hi, float *out);

/* ---- the argument walker */
typedef struct {
    const char *tool;
    int argc;
    char **argv;
    int i;               /* index of the current flag */
    char flag[64];       /* "--name" (the part before '=' of "--name=value") */
    const char *inline_; /* the value after '=', or NULL */
    int value_taken;
    int heads_given; /* cli_model_flag: 1 --heads, 2 --head-ch (the two contradict each other) */
    /* a tool that takes one bare argument as a flag's value (sample PATH = sample --ckpt PATH)
     * names that flag here; a second bare argument is refused as before */
    const char *positional;
} cli_args;

void cli_args_init(cli_args *a, const char *tool, int argc, char **argv);
/* Advance to the next argument; 0 at the end. A bare argument (not starting with '-') where
 * a->positional names a flag is that flag's inline value, once. A stray value (not starting with
 * "--") or a value given to a flag that was not asked for its value (--help=X included) is reported
 * by cli_next itself: it prints the error and a->flag becomes "" so that the tool's cli_unknown
 * returns 2. */
int cli_next(cli_args *a);
int cli_is(const cli_args *a, const char *flag);
/* The current flag's value (inline or the next argument); NULL, printed error, when absent. */
const char *cli_value(cli_args *a);
/* The value parsed strictly; SG_ERR (printed) on a bad or missing value. */
int cli_i64(cli_args *a, int64_t lo, int64_t hi, int64_t *out);
int cli_int(cli_args *a, int lo, int hi, int *out);
int cli_u64(cli_args *a, uint64_t *out);
int cli_float(cli_args *a, double lo, double hi, float *out);
/* Prints "<tool>: unknown flag '<f>' (see <tool> --help)" and returns 2. */
int cli_unknown(const cli_args *a);
/* Print "<tool>: <sg_last_error()>" and return code. */
int cli_fail(const char *tool, int code);

/* ---- the model */
/* Find --model NAME (or --model=NAME) anywhere in argv and fill cfg with that preset (or
 * default_model). SG_ERR, printed, for an unknown model or a --model without a value. */
int cli_model_prelude(const char *tool, int argc, char **argv, const char *default_model,
                      sg_model_cfg *cfg);
/* The presets, one per line with its description, for a tool's --help: default_model (the
 * one that tool uses without --model) is marked "(default)", and only it. */
void cli_print_models(FILE *f, const char *default_model);
/* The current flag as a model flag (sg_model_flag, plus --model which the prelude took):
 * 1 applied, 0 not a model flag, -1 bad value (printed), or --heads and --head-ch both given. */
int cli_model_flag(cli_args *a, sg_model_cfg *cfg);
/* cfg from a checkpoint's "config" object (the fields sg_model_json writes), read by
 * graph/weights.h's sg_model_cfg_from_config (a preset name required), then validated.
 * SG_ERR naming the field that is out of range. */
int cli_model_from_json(const json_t *config, sg_model_cfg *cfg);

/* ---- the backend: "cpu" | "cuda" | NULL (cuda where a GPU is usable, else cpu) */
int cli_check_backend(const char *tool, const char *name); /* SG_OK, or prints and SG_ERR */
const char *cli_backend_name(const char *name);
/* --conv-engine auto|own|cudnn into *out (sg_conv_engine_parse); SG_ERR, printed, when bad */
int cli_conv_engine(cli_args *a, int *out);

/* --engine-table FILE (graph/engine_table_io.h) into t (freed first: a repeated flag replaces
 * it), its path into *path (may be NULL); SG_ERR, printed, for a missing, unreadable or
 * malformed file. */
int cli_engine_table(cli_args *a, sg_engine_table *t, const char **path);
/* The plan's engine table, per conv layer in forward order: its choice, the measured ms and
 * what its input is in this plan (a fused normalisation, a stored one, ...); nothing without
 * one. path: the file (NULL: a checkpoint's). */
void cli_print_engine_table(const sg_plan *p, const char *path);

/* ---- JSON output: the one JSON library. Both take ownership of (decref) j. */
/* Print j compactly on one line to f. */
int cli_json_print(FILE *f, json_t *j);
/* A JSON string of s; bytes that are not UTF-8 (which JSON cannot carry) become '?'. */
json_t *cli_json_text(const char *s);
/* Print any JSON value (a string, a number) with no newline: for output assembled piecewise. */
int cli_json_print_inline(FILE *f, json_t *j);
/* A malloc'ed compact string (NULL + sg_set_error on failure). */
char *cli_json_string(json_t *j);
/* A float as the shortest decimal that reads back to it (0.1f is 0.1, not 0.100000001). */
json_t *cli_json_float(float f);
/* A model config as a JSON object (parsed from sg_model_json's text). */
json_t *cli_model_json(const sg_model_cfg *cfg);

/* ---- a training run's folder (train --out): what train writes there, so every tool knows it */
/* A file name train writes into its run folder (metrics.jsonl, latest, config.json, loss.png,
 * ckpt_*.sgck, samples_*.png). */
int cli_is_run_file(const char *name);
/* dir/config.json is a run's (train's: an object with "model" and a "resumes" array), not
 * another tool's file of that name (a diffusers export's); 0 when it is absent. */
int cli_is_run_config(const char *dir);
/* mkdir -p path (mode 0755); SG_ERR naming the part that could not be made */
int cli_make_dirs(const char *path);

#endif
