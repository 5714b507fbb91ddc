/* ckpt.c — the checkpoint inspection CLI (build/ckpt), a thin program over checkpoints/ckpt.h.
 *
 *   ckpt info    FILE [--json]              metadata; totals by role and dtype; compression
 *   ckpt ls      FILE [--json]              every tensor: name, role, dtype, shape, sizes
 *   ckpt stats   FILE [--json] [--role R]   min, max, mean, std, NaN/Inf counts per tensor
 *   ckpt diff    A B [--json] [--ignore-meta]  bitwise comparison, per-tensor differences
 *   ckpt verify  FILE [--json]              format and every checksum
 *   ckpt dump    FILE NAME [--json] [--limit N]  the values of one tensor
 *   ckpt export  FILE --safetensors OUT [--ema]  weights for diffusers' UNet2DModel
 *   ckpt export  FILE --diffusers DIR [--raw]    a folder diffusers loads as it is
 *
 * Exit status: 0 success (diff: bitwise equal; verify: intact), 1 failure (an unreadable or
 * damaged file; diff: different; verify: damaged), 2 usage error.
 */
#include <dirent.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoints/ckpt.h"
#include "checkpoints/ckpt_json.h"
#include "tools/cli.h"

static const char *usage_text =
    "usage: ckpt <command> [options]\n"
    "  info    FILE [--json]                   metadata, totals by role and dtype, ratio\n"
    "  ls      FILE [--json]                   every tensor with its shape and sizes\n"
    "  stats   FILE [--json] [--role ROLE]     min/max/mean/std/NaN/Inf per tensor\n"
    "  diff    A B [--json] [--ignore-meta]    bitwise comparison (exit 1 when different)\n"
    "  verify  FILE [--json]                   check format and every checksum\n"
    "  dump    FILE NAME [--json] [--limit N]  values of one tensor\n"
    "  export  FILE --safetensors OUT [--ema]  weights as safetensors (diffusers names)\n"
    "  export  FILE --diffusers DIR [--raw]    a diffusers UNet2DModel / DDPMPipeline folder\n"
    "                                          (EMA weights; --raw: the raw parameters)\n";

static int usage(const char *msg) {
    if (msg) fprintf(stderr, "ckpt: %s\n", msg);
    fputs(usage_text, stderr);
    return 2;
}

static int fail(void) {
    fprintf(stderr, "ckpt: error: %s\n", sg_last_error());
    return 1;
}

/* ---- output helpers ---- */

/* a string as JSON, escaped by the one JSON library */
static void json_str(const char *s) {
    cli_json_print_inline(stdout, cli_json_text(s));
}

/* a double as JSON: non-finite values become strings */
static void json_number(double v) {
    if (isnan(v))
        printf("\"NaN\"");
    else if (isinf(v))
        printf(v > 0 ? "\"Infinity\"" : "\"-Infinity\"");
    else
        printf("%.9g", v);
}

static void human_bytes(int64_t b, char *buf, size_t cap) {
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int u = 0;
    while (v >= 1024 && u < 4) v /= 1024, u++;
    if (u == 0)
        snprintf(buf, cap, "%lld B", (long long)b);
    else
        snprintf(buf, cap, "%.2f %s", v, unit[u]);
}

static void shape_text(const ckpt_entry *e, char *buf, size_t cap) {
    size_t p = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < e->ndim && p < cap; d++)
        p += (size_t)snprintf(buf + p, cap - p, "%s%lld", d ? "," : "", (long long)e->shape[d]);
    if (p < cap) snprintf(buf + p, cap - p, "]");
}

static void json_shape(const ckpt_entry *e) {
    putchar('[');
    for (int d = 0; d < e->ndim; d++) printf("%s%lld", d ? "," : "", (long long)e->shape[d]);
    putchar(']');
}

static double ratio(int64_t raw, int64_t stored) {
    return stored > 0 ? (double)raw / (double)stored : 1.0;
}

/* ---- argument parsing: positional args and known flags ---- */

typedef struct {
    const char *pos[4];
    int npos;
    int json, ema, raw, ignore_meta;
    const char *role, *safetensors, *diffusers;
    int64_t limit;
} args;

/* Options (--flag value or --flag=value) and up to 4 positional arguments after the command. */
static int parse_args(int argc, char **argv, args *a) {
    memset(a, 0, sizeof *a);
    a->limit = -1;
    for (int i = 2; i < argc; i++) {
        const char *s = argv[i], *eq = strchr(s, '=');
        char flag[32];
        snprintf(flag, sizeof flag, "%.*s", eq && !strncmp(s, "--", 2) ? (int)(eq - s) : 31, s);
        int takes = !strcmp(flag, "--role") || !strcmp(flag, "--safetensors") ||
                    !strcmp(flag, "--limit") || !strcmp(flag, "--diffusers");
        const char *v = takes ? (eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL) : NULL;
        if (takes && !v) {
            char msg[64];
            snprintf(msg, sizeof msg, "%s needs a value", flag);
            return usage(msg);
        }
        if (!takes && eq && !strncmp(s, "--", 2)) {
            char msg[96];
            snprintf(msg, sizeof msg, "%.40s takes no value", flag);
            return usage(msg);
        }
        if (strcmp(flag, "--json") == 0)
            a->json = 1;
        else if (strcmp(flag, "--ema") == 0)
            a->ema = 1;
        else if (strcmp(flag, "--raw") == 0)
            a->raw = 1;
        else if (strcmp(flag, "--diffusers") == 0)
            a->diffusers = v;
        else if (strcmp(flag, "--ignore-meta") == 0)
            a->ignore_meta = 1;
        else if (strcmp(flag, "--role") == 0)
            a->role = v;
        else if (strcmp(flag, "--safetensors") == 0)
            a->safetensors = v;
        else if (strcmp(flag, "--limit") == 0) {
            int64_t limit;
            if (cli_parse_i64("--limit", v, 0, INT64_MAX, &limit)) return usage(sg_last_error());
            a->limit = limit;
        } else if (s[0] == '-' && s[1]) {
            char msg[256];
            snprintf(msg, sizeof msg, "unknown or incomplete option '%s'", s);
            return usage(msg);
        } else if (a->npos < 4) {
            a->pos[a->npos++] = s;
        } else {
            return usage("too many arguments");
        }
    }
    return 0;
}

/* ---- info ---- */

typedef struct {
    int count;
    int64_t raw, stored;
} totals;

/* The model config's reals are floats, stored with 9 digits (planner/model_cfg.c: its text is
 * part of the plan hash, so it stays as written): shown as the shortest decimal that reads
 * back to the same float, as the run's config.json has them (0.1, not 0.100000001). NULL
 * where the text is not an object. */
static char *config_text(const char *text) {
    json_t *o = json_loads(text, 0, NULL);
    char *out = NULL;
    if (json_is_object(o)) {
        const char *key;
        json_t *v;
        json_object_foreach(o, key, v) {
            if (!json_is_real(v)) continue;
            json_t *f = cli_json_float((float)json_real_value(v));
            json_real_set(v, json_real_value(f));
            json_decref(f);
        }
        out = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(9));
    }
    json_decref(o);
    return out;
}

static void print_meta_text(const char *meta) {
    ckpt_json *j = ckpt_json_parse(meta, strlen(meta));
    if (!j) return;
    for (int k = 0; k < ckpt_json_count(j, 0); k++) {
        int c = ckpt_json_child(j, 0, k);
        size_t need = ckpt_json_render(j, c, NULL, 0) + 1;
        char *v = malloc(need);
        ckpt_json_render(j, c, v, need);
        char *shown = !strcmp(ckpt_json_key(j, c), "config") ? config_text(v) : NULL;
        printf("  %-12s %s\n", ckpt_json_key(j, c), shown ? shown : v);
        free(shown);
        free(v);
    }
    ckpt_json_free(j);
}

/* The downsampling padding a stepgraph checkpoint was trained with: config.down_pad, or
 * "symmetric" for checkpoints written before the field existed. Returns 0 when the metadata
 * has no model config (not a training checkpoint); *recorded says whether the field exists. */
static int ckpt_down_pad(const char *meta, char *buf, size_t cap, int *recorded) {
    ckpt_json *j = ckpt_json_parse(meta, strlen(meta));
    if (!j) return 0;
    int has_cfg = ckpt_json_find(j, 0, "config") >= 0;
    *recorded = ckpt_json_get_string(j, "config.down_pad", buf, cap) == SG_OK;
    if (!*recorded) snprintf(buf, cap, "symmetric");
    ckpt_json_free(j);
    return has_cfg;
}

static void print_totals_text(const char *title, const char *const *names, const totals *t, int n) {
    printf("%-10s %6s %14s %14s %7s\n", title, "count", "raw", "stored", "ratio");
    for (int i = 0; i < n; i++) {
        if (!t[i].count) continue;
        char r[32], s[32];
        human_bytes(t[i].raw, r, sizeof r);
        human_bytes(t[i].stored, s, sizeof s);
        printf("  %-8s %6d %14s %14s %7.3f\n", names[i], t[i].count, r, s,
               ratio(t[i].raw, t[i].stored));
    }
}

static void print_totals_json(const char *const *names, const totals *t, int n) {
    putchar('{');
    int first = 1;
    for (int i = 0; i < n; i++) {
        if (!t[i].count) continue;
        printf("%s", first ? "" : ",");
        first = 0;
        json_str(names[i]);
        printf(":{\"count\":%d,\"raw_bytes\":%lld,\"stored_bytes\":%lld,\"ratio\":%.6f}",
               t[i].count, (long long)t[i].raw, (long long)t[i].stored,
               ratio(t[i].raw, t[i].stored));
    }
    putchar('}');
}

static int cmd_info(const args *a) {
    if (a->npos != 1) return usage("info needs one FILE");
    ckpt_file *f = ckpt_open(a->pos[0]);
    if (!f) return fail();
    totals role[ROLE_COUNT] = {{0}}, dtype[DT_COUNT] = {{0}}, all = {0};
    int shuffled = 0, raw_codec = 0;
    for (int i = 0; i < ckpt_count(f); i++) {
        ckpt_entry e;
        ckpt_tensor_info(f, i, &e);
        totals *t[3] = {&role[e.role], &dtype[e.dtype], &all};
        for (int k = 0; k < 3; k++)
            t[k]->count++, t[k]->raw += e.raw_bytes, t[k]->stored += e.stored_bytes;
        shuffled += e.shuffled;
        raw_codec += e.codec == CKPT_CODEC_RAW;
    }
    if (a->json) {
        printf("{\"file\":");
        json_str(ckpt_path(f));
        printf(",\"version\":%d,\"file_bytes\":%lld,\"block_bytes\":%lld,\"meta\":%s,",
               ckpt_version(f), (long long)ckpt_file_size(f), (long long)ckpt_block_bytes(f),
               ckpt_meta(f));
        printf("\"tensors\":%d,\"raw_bytes\":%lld,\"stored_bytes\":%lld,\"ratio\":%.6f,"
               "\"shuffled\":%d,\"stored_raw\":%d,\"by_role\":",
               all.count, (long long)all.raw, (long long)all.stored, ratio(all.raw, all.stored),
               shuffled, raw_codec);
        print_totals_json(sg_role_names, role, ROLE_COUNT);
        printf(",\"by_dtype\":");
        print_totals_json(sg_dtype_names, dtype, DT_COUNT);
        char pad[32];
        int recorded;
        if (ckpt_down_pad(ckpt_meta(f), pad, sizeof pad, &recorded)) {
            printf(",\"down_pad\":");
            json_str(pad);
            printf(",\"down_pad_recorded\":%s", recorded ? "true" : "false");
        }
        printf("}\n");
    } else {
        char fb[32], rb[32], sb[32], bb[32];
        human_bytes(ckpt_file_size(f), fb, sizeof fb);
        human_bytes(all.raw, rb, sizeof rb);
        human_bytes(all.stored, sb, sizeof sb);
        human_bytes(ckpt_block_bytes(f), bb, sizeof bb);
        printf("file       %s\n", ckpt_path(f));
        printf("format     stepgraph checkpoint v%d, %s (%lld bytes), zstd blocks of %s\n",
               ckpt_version(f), fb, (long long)ckpt_file_size(f), bb);
        printf("metadata\n");
        print_meta_text(ckpt_meta(f));
        char pad[32];
        int recorded;
        if (ckpt_down_pad(ckpt_meta(f), pad, sizeof pad, &recorded))
            printf("downsample padding %s%s\n", pad,
                   recorded ? "" : " (no config.down_pad: written before the field existed)");
        printf("tensors    %d, raw %s, stored %s, ratio %.3f (%d byte-shuffled, %d stored raw)\n",
               all.count, rb, sb, ratio(all.raw, all.stored), shuffled, raw_codec);
        print_totals_text("by role", sg_role_names, role, ROLE_COUNT);
        print_totals_text("by dtype", sg_dtype_names, dtype, DT_COUNT);
    }
    ckpt_close(f);
    return 0;
}

/* ---- ls ---- */

static int cmd_ls(const args *a) {
    if (a->npos != 1) return usage("ls needs one FILE");
    ckpt_file *f = ckpt_open(a->pos[0]);
    if (!f) return fail();
    if (a->json)
        printf("[");
    else
        printf("%-48s %-9s %-5s %-18s %12s %12s %7s %s\n", "name", "role", "dtype", "shape", "raw",
               "stored", "ratio", "codec");
    for (int i = 0; i < ckpt_count(f); i++) {
        ckpt_entry e;
        ckpt_tensor_info(f, i, &e);
        const char *codec = e.codec == CKPT_CODEC_RAW ? "raw"
                            : e.shuffled              ? "zstd+shuffle"
                                                      : "zstd";
        if (a->json) {
            printf("%s{\"name\":", i ? "," : "");
            json_str(e.name);
            printf(",\"role\":\"%s\",\"dtype\":\"%s\",\"shape\":", ckpt_role_name(e.role),
                   ckpt_dtype_name(e.dtype));
            json_shape(&e);
            printf(",\"offset\":%lld,\"raw_bytes\":%lld,\"stored_bytes\":%lld,\"codec\":\"%s\","
                   "\"shuffled\":%s,\"file_offset\":%lld,\"checksum\":\"%016" PRIx64 "\"}",
                   (long long)e.offset, (long long)e.raw_bytes, (long long)e.stored_bytes,
                   e.codec == CKPT_CODEC_RAW ? "raw" : "zstd", e.shuffled ? "true" : "false",
                   (long long)e.file_offset, e.raw_checksum);
        } else {
            char shape[96];
            shape_text(&e, shape, sizeof shape);
            printf("%-48s %-9s %-5s %-18s %12lld %12lld %7.3f %s\n", e.name, ckpt_role_name(e.role),
                   ckpt_dtype_name(e.dtype), shape, (long long)e.raw_bytes,
                   (long long)e.stored_bytes, ratio(e.raw_bytes, e.stored_bytes), codec);
        }
    }
    if (a->json) printf("]\n");
    ckpt_close(f);
    return 0;
}

/* ---- stats ---- */

static int cmd_stats(const args *a) {
    if (a->npos != 1) return usage("stats needs one FILE");
    int role = -1;
    if (a->role && (role = ckpt_role_from_name(a->role)) < 0) return usage("unknown --role");
    ckpt_file *f = ckpt_open(a->pos[0]);
    if (!f) return fail();
    if (a->json)
        printf("[");
    else
        printf("%-48s %-5s %10s %13s %13s %13s %13s %6s %6s\n", "name", "dtype", "numel", "min",
               "max", "mean", "std", "nan", "inf");
    int first = 1, rc = 0;
    for (int i = 0; i < ckpt_count(f) && !rc; i++) {
        ckpt_entry e;
        ckpt_tensor_info(f, i, &e);
        if (role >= 0 && e.role != role) continue;
        void *buf = malloc((size_t)e.raw_bytes + 1);
        ckpt_value_stats s;
        if (!buf || ckpt_read(f, i, buf, e.raw_bytes) || ckpt_stats(buf, e.dtype, e.numel, &s)) {
            free(buf);
            rc = 1;
            break;
        }
        free(buf);
        if (a->json) {
            printf("%s{\"name\":", first ? "" : ",");
            json_str(e.name);
            printf(",\"role\":\"%s\",\"dtype\":\"%s\",\"numel\":%lld,\"min\":",
                   ckpt_role_name(e.role), ckpt_dtype_name(e.dtype), (long long)e.numel);
            json_number(s.min);
            printf(",\"max\":");
            json_number(s.max);
            printf(",\"mean\":");
            json_number(s.mean);
            printf(",\"std\":");
            json_number(s.std);
            printf(",\"nan\":%lld,\"inf\":%lld}", (long long)s.nan, (long long)s.inf);
        } else {
            printf("%-48s %-5s %10lld %13.6g %13.6g %13.6g %13.6g %6lld %6lld\n", e.name,
                   ckpt_dtype_name(e.dtype), (long long)e.numel, s.min, s.max, s.mean, s.std,
                   (long long)s.nan, (long long)s.inf);
        }
        first = 0;
    }
    if (a->json && !rc) printf("]\n");
    ckpt_close(f);
    return rc ? fail() : 0;
}

/* ---- diff ---- */

static void multi_index(const ckpt_entry *e, int64_t flat, char *buf, size_t cap) {
    int64_t idx[CKPT_MAX_DIMS] = {0};
    for (int d = e->ndim - 1; d >= 0; d--) {
        idx[d] = e->shape[d] ? flat % e->shape[d] : 0;
        flat = e->shape[d] ? flat / e->shape[d] : 0;
    }
    size_t p = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < e->ndim && p < cap; d++)
        p += (size_t)snprintf(buf + p, cap - p, "%s%lld", d ? "," : "", (long long)idx[d]);
    if (p < cap) snprintf(buf + p, cap - p, "]");
}

static int cmd_diff(const args *a) {
    if (a->npos != 2) return usage("diff needs two FILEs");
    ckpt_file *fa = ckpt_open(a->pos[0]);
    if (!fa) return fail();
    ckpt_file *fb = ckpt_open(a->pos[1]);
    if (!fb) {
        ckpt_close(fa);
        return fail();
    }
    char meta_where[512] = "";
    int meta_diff = 0;
    {
        ckpt_json *ja = ckpt_json_parse(ckpt_meta(fa), strlen(ckpt_meta(fa)));
        ckpt_json *jb = ckpt_json_parse(ckpt_meta(fb), strlen(ckpt_meta(fb)));
        meta_diff = ckpt_json_diff(ja, 0, jb, 0, meta_where, sizeof meta_where);
        ckpt_json_free(ja);
        ckpt_json_free(jb);
    }
    int ndiffer = 0, rc = 0, first = 1;
    if (a->json) printf("{\"tensors\":[");
    for (int pass = 0; pass < 2 && !rc; pass++) {
        /* pass 0: tensors of A (compared with B); pass 1: tensors only in B */
        ckpt_file *f = pass ? fb : fa, *g = pass ? fa : fb;
        for (int i = 0; i < ckpt_count(f) && !rc; i++) {
            ckpt_entry ea, eb;
            ckpt_tensor_info(f, i, &ea);
            int j = ckpt_find(g, ea.name);
            if (pass == 1 && j >= 0) continue;
            const char *status = "equal";
            ckpt_value_diff d = {.first = -1, .max_abs_index = -1};
            if (j < 0) {
                status = pass ? "only_b" : "only_a";
            } else {
                ckpt_tensor_info(g, j, &eb);
                int same_shape = ea.dtype == eb.dtype && ea.ndim == eb.ndim;
                for (int k = 0; k < CKPT_MAX_DIMS; k++) same_shape &= ea.shape[k] == eb.shape[k];
                if (!same_shape) {
                    status = "mismatch";
                } else {
                    void *x = malloc((size_t)ea.raw_bytes + 1),
                         *y = malloc((size_t)eb.raw_bytes + 1);
                    if (!x || !y || ckpt_read(fa, i, x, ea.raw_bytes) ||
                        ckpt_read(fb, j, y, eb.raw_bytes) ||
                        ckpt_compare(x, y, ea.dtype, ea.numel, &d))
                        rc = 1;
                    free(x);
                    free(y);
                    if (d.ndiff) status = "differs";
                }
            }
            if (rc) break;
            int differs = strcmp(status, "equal") != 0;
            ndiffer += differs;
            char at[96] = "", mx[96] = "";
            if (d.first >= 0) multi_index(&ea, d.first, at, sizeof at);
            if (d.max_abs_index >= 0) multi_index(&ea, d.max_abs_index, mx, sizeof mx);
            if (a->json) {
                printf("%s{\"name\":", first ? "" : ",");
                json_str(ea.name);
                printf(",\"status\":\"%s\"", status);
                if (!strcmp(status, "differs") || !strcmp(status, "equal"))
                    printf(",\"ndiff\":%lld,\"numel\":%lld,\"first\":%lld,\"max_abs\":",
                           (long long)d.ndiff, (long long)ea.numel, (long long)d.first);
                if (!strcmp(status, "differs") || !strcmp(status, "equal")) {
                    json_number(d.max_abs);
                    printf(",\"max_abs_index\":%lld,\"nonfinite_diff\":%lld",
                           (long long)d.max_abs_index, (long long)d.nonfinite_diff);
                }
                printf("}");
                first = 0;
            } else if (differs) {
                if (!strcmp(status, "differs"))
                    printf("%-48s differs: %lld of %lld elements, first at %lld %s, max |a-b| "
                           "%.6g at %s%s\n",
                           ea.name, (long long)d.ndiff, (long long)ea.numel, (long long)d.first, at,
                           d.max_abs, d.max_abs_index >= 0 ? mx : "-",
                           d.nonfinite_diff ? " (some differences involve NaN/Inf)" : "");
                else if (!strcmp(status, "mismatch"))
                    printf("%-48s dtype or shape differs\n", ea.name);
                else
                    printf("%-48s only in %s\n", ea.name, pass ? "B" : "A");
            }
        }
    }
    int equal = ndiffer == 0 && (a->ignore_meta || !meta_diff);
    if (!rc) {
        if (a->json) {
            printf("],\"differing_tensors\":%d,\"meta_equal\":%s,\"meta_diff\":", ndiffer,
                   meta_diff ? "false" : "true");
            json_str(meta_where);
            printf(",\"equal\":%s}\n", equal ? "true" : "false");
        } else {
            if (meta_diff) printf("metadata differs: %s\n", meta_where);
            if (ndiffer == 0)
                printf("tensors: bitwise equal (%d tensors)\n", ckpt_count(fa));
            else
                printf("tensors: %d differ\n", ndiffer);
            printf("%s\n", equal ? "EQUAL" : "DIFFERENT");
        }
    }
    ckpt_close(fa);
    ckpt_close(fb);
    if (rc) return fail();
    return equal ? 0 : 1;
}

/* ---- verify ---- */

static int cmd_verify(const args *a) {
    if (a->npos != 1) return usage("verify needs one FILE");
    /* the full open checks the header, metadata, index and the whole-file checksum */
    char first_error[1200] = "";
    ckpt_file *f = ckpt_open(a->pos[0]);
    if (!f) {
        snprintf(first_error, sizeof first_error, "%s", sg_last_error());
        f = ckpt_open_ex(a->pos[0], CKPT_OPEN_LAZY); /* to list every damaged tensor */
    }
    int n = f ? ckpt_count(f) : 0, nbad = 0;
    char **bad = calloc((size_t)n + 1, sizeof *bad);
    char **why = calloc((size_t)n + 1, sizeof *why);
    for (int i = 0; i < n; i++) {
        if (ckpt_check_tensor(f, i) == SG_OK) continue;
        ckpt_entry e;
        ckpt_tensor_info(f, i, &e);
        bad[nbad] = strdup(e.name);
        why[nbad++] = strdup(sg_last_error());
    }
    int ok = f && !first_error[0] && nbad == 0;
    if (a->json) {
        printf("{\"file\":");
        json_str(a->pos[0]);
        printf(",\"ok\":%s,\"tensors\":%d,\"error\":", ok ? "true" : "false", n);
        json_str(first_error[0] ? first_error : nbad ? why[0] : "");
        printf(",\"bad_tensors\":[");
        for (int k = 0; k < nbad; k++) {
            printf("%s", k ? "," : "");
            json_str(bad[k]);
        }
        printf("]}\n");
    } else {
        if (ok) {
            printf("OK %s: %d tensors, header, metadata, index and every checksum verified\n",
                   a->pos[0], n);
        } else {
            if (first_error[0]) printf("BAD %s\n", first_error);
            for (int k = 0; k < nbad; k++) printf("BAD tensor '%s': %s\n", bad[k], why[k]);
        }
    }
    if (!ok && !a->json) {
        /* the one-line summary on stderr names the (first) damaged tensor */
        if (nbad)
            fprintf(stderr, "ckpt: verify failed: tensor '%s' is damaged\n", bad[0]);
        else
            fprintf(stderr, "ckpt: verify failed: %s\n", first_error);
    }
    for (int k = 0; k < nbad; k++) free(bad[k]), free(why[k]);
    free(bad);
    free(why);
    ckpt_close(f);
    return ok ? 0 : 1;
}

/* ---- dump ---- */

static int cmd_dump(const args *a) {
    if (a->npos != 2) return usage("dump needs FILE and NAME");
    ckpt_file *f = ckpt_open(a->pos[0]);
    if (!f) return fail();
    int i = ckpt_find(f, a->pos[1]);
    if (i < 0) {
        sg_set_error("%s: no tensor named '%s' (see `ckpt ls`)", a->pos[0], a->pos[1]);
        ckpt_close(f);
        return fail();
    }
    ckpt_entry e;
    ckpt_tensor_info(f, i, &e);
    uint8_t *buf = malloc((size_t)e.raw_bytes + 1);
    if (!buf || ckpt_read(f, i, buf, e.raw_bytes)) {
        free(buf);
        ckpt_close(f);
        return fail();
    }
    int64_t n = a->limit >= 0 && a->limit < e.numel ? a->limit : e.numel;
    int es = sg_dtype_size(e.dtype);
    const char *dt = ckpt_dtype_name(e.dtype);
    int is_float = !strcmp(dt, "f32") || !strcmp(dt, "bf16");
    int is_signed = !strcmp(dt, "i32") || !strcmp(dt, "i64");
    if (a->json) {
        printf("{\"name\":");
        json_str(e.name);
        printf(",\"role\":\"%s\",\"dtype\":\"%s\",\"shape\":", ckpt_role_name(e.role), dt);
        json_shape(&e);
        printf(",\"numel\":%lld,\"values\":[", (long long)e.numel);
    } else {
        char shape[96];
        shape_text(&e, shape, sizeof shape);
        printf("# %s %s %s %s\n", e.name, ckpt_role_name(e.role), dt, shape);
    }
    for (int64_t k = 0; k < n; k++) {
        const uint8_t *p = buf + k * es;
        if (a->json && k) putchar(',');
        if (is_float) {
            float v;
            if (es == 2) {
                sg_bf16 h;
                memcpy(&h, p, 2);
                v = sg_bf16_to_f32(h);
            } else {
                memcpy(&v, p, 4);
            }
            if (a->json)
                json_number(v);
            else
                printf("%.9g\n", v);
        } else {
            uint64_t u = 0;
            memcpy(&u, p, (size_t)es);
            if (is_signed && es == 4)
                printf("%d", (int32_t)(uint32_t)u);
            else if (is_signed)
                printf("%lld", (long long)(int64_t)u);
            else
                printf("%llu", (unsigned long long)u);
            if (!a->json) putchar('\n');
        }
    }
    if (a->json) printf("]}\n");
    free(buf);
    ckpt_close(f);
    return 0;
}

/* ---- export ---- */

/* Is dir a training run's folder (a file train writes there: cli_is_run_file, its config.json
 * only when it is a run's)? Then *marker names the file that says so. A diffusers export's
 * config.json is not one: re-exporting into a folder of an earlier export overwrites it. */
static int is_run_folder(const char *dir, char *marker, size_t cap) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int found = 0;
    for (struct dirent *de; !found && (de = readdir(d));) {
        found = cli_is_run_file(de->d_name) &&
                (strcmp(de->d_name, "config.json") || cli_is_run_config(dir));
        if (found) snprintf(marker, cap, "%s", de->d_name);
    }
    closedir(d);
    return found;
}

/* export --diffusers DIR: the EMA weights unless --raw (ckpt_export_diffusers) */
static int cmd_export_diffusers(const args *a) {
    if (a->ema) return usage("--diffusers exports the EMA weights already (--raw: the parameters)");
    char marker[256];
    if (is_run_folder(a->diffusers, marker, sizeof marker)) {
        fprintf(stderr,
                "ckpt: %s is a training run's folder (it holds %s): export into another folder, "
                "e.g. --diffusers %s/diffusers, so its config.json is not overwritten\n",
                a->diffusers, marker, a->diffusers);
        return 2;
    }
    ckpt_file *f = ckpt_open(a->pos[0]);
    if (!f) return fail();
    int rc = ckpt_export_diffusers(f, a->diffusers, !a->raw);
    ckpt_close(f);
    if (rc) return fail();
    printf("wrote %s: a diffusers UNet2DModel (%s weights) with DDPMScheduler and DDPMPipeline "
           "configs\n",
           a->diffusers, a->raw ? "raw parameter" : "EMA");
    return 0;
}

static int cmd_export(const args *a) {
    if (a->npos != 1 || !!a->safetensors == !!a->diffusers)
        return usage("export needs FILE and one of --safetensors OUT, --diffusers DIR");
    if (a->diffusers) return cmd_export_diffusers(a);
    if (a->raw) return usage("--raw goes with --diffusers (--safetensors: --ema for EMA)");
    ckpt_file *f = ckpt_open(a->pos[0]);
    if (!f) return fail();
    int rc = ckpt_export_safetensors(f, a->safetensors, a->ema);
    ckpt_close(f);
    if (rc) return fail();
    printf("wrote %s (%s weights)\n", a->safetensors, a->ema ? "EMA" : "parameter");
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) return usage(NULL);
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        fputs(usage_text, stdout);
        return 0;
    }
    args a;
    int rc = parse_args(argc, argv, &a);
    if (rc) return rc;
    if (!strcmp(cmd, "info")) return cmd_info(&a);
    if (!strcmp(cmd, "ls")) return cmd_ls(&a);
    if (!strcmp(cmd, "stats")) return cmd_stats(&a);
    if (!strcmp(cmd, "diff")) return cmd_diff(&a);
    if (!strcmp(cmd, "verify")) return cmd_verify(&a);
    if (!strcmp(cmd, "dump")) return cmd_dump(&a);
    if (!strcmp(cmd, "export")) return cmd_export(&a);
    char msg[128];
    snprintf(msg, sizeof msg, "unknown command '%.60s'", cmd);
    return usage(msg);
}
