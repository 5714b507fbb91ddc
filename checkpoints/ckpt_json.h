/* ckpt_json.h — a small strict JSON reader for checkpoint metadata (and for tests that check
 * the `--json` output of the tools).
 *
 * ckpt_json_parse builds a read-only tree of nodes addressed by int ids (the root is 0).
 * Strict RFC 8259: no comments, no trailing commas, no NaN; duplicate object keys and the
 * escape \u0000 are rejected; nesting deeper than 64 is rejected. Errors give line:column.
 *
 * Paths address nodes from a starting node: keys separated by '.', array elements as [i] or
 * as a numeric segment: "config.ch", "config.ch_mult[1]", "env.gpu". "" is the node itself.
 */
#ifndef CKPT_JSON_H
#define CKPT_JSON_H

#include <stddef.h>
#include <stdint.h>

typedef struct ckpt_json ckpt_json;

typedef enum {
    CKPT_JSON_NULL = 0,
    CKPT_JSON_BOOL,
    CKPT_JSON_NUMBER,
    CKPT_JSON_STRING,
    CKPT_JSON_ARRAY,
    CKPT_JSON_OBJECT,
} ckpt_json_kind;

/* Parse len bytes of text. NULL + sg_set_error("json: line L col C: ...") on failure. */
ckpt_json *ckpt_json_parse(const char *text, size_t len);
void ckpt_json_free(ckpt_json *j);

/* ---- the tree ---- */
int ckpt_json_find(const ckpt_json *j, int node, const char *path); /* -1 if absent */
int ckpt_json_type(const ckpt_json *j, int node);
int ckpt_json_count(const ckpt_json *j, int node);          /* children of an array/object */
int ckpt_json_child(const ckpt_json *j, int node, int k);   /* k-th child, -1 if none */
const char *ckpt_json_key(const ckpt_json *j, int node);    /* key of an object member */
const char *ckpt_json_string(const ckpt_json *j, int node); /* NULL unless a string */
double ckpt_json_number(const ckpt_json *j, int node);
int ckpt_json_is_integer(const ckpt_json *j, int node); /* an integer literal within int64 */
int64_t ckpt_json_integer(const ckpt_json *j, int node);
int ckpt_json_bool(const ckpt_json *j, int node);

/* ---- typed getters from the root; SG_ERR (with a message naming the path) when the value
 * is absent or of another type ---- */
int ckpt_json_get_int(const ckpt_json *j, const char *path, int64_t *out);
int ckpt_json_get_double(const ckpt_json *j, const char *path, double *out);
int ckpt_json_get_bool(const ckpt_json *j, const char *path, int *out);
/* copies the string (NUL-terminated); SG_ERR when it does not fit in cap */
int ckpt_json_get_string(const ckpt_json *j, const char *path, char *buf, size_t cap);

/* Compare two subtrees. Returns 0 when equal (objects compare as unordered key sets,
 * numbers by value), 1 when not, and then writes to where (may be NULL) the path of the first
 * difference and the two values: "config.ch: 128 vs 64". */
int ckpt_json_diff(const ckpt_json *a, int na, const ckpt_json *b, int nb, char *where, size_t cap);

/* Write a node back as compact JSON text into buf (NUL-terminated, truncated to cap).
 * Returns the length the full text needs. */
size_t ckpt_json_render(const ckpt_json *j, int node, char *buf, size_t cap);

/* The same strict parse as a jansson tree (for callers that build JSON with jansson): NULL,
 * and the reason in err, on failure. A document with an integer past int64 (a uint64 seed) is
 * read with every number as a double. */
typedef struct json_t json_t;
json_t *ckpt_meta_load(const char *text, char *err, size_t cap);

/* Is the checkpoint metadata ckpt_meta from the same model as expected_meta? Compares, for
 * each of "model", "config" and "plan_hash" present in expected_meta, the same key in
 * ckpt_meta. SG_OK when they agree; otherwise SG_ERR with a message naming the first
 * differing field, e.g. "checkpoint is from another model config: config.ch is 64 in the
 * checkpoint, 128 expected". */
int ckpt_meta_check_config(const char *expected_meta, const char *ckpt_meta);

#endif
