/* exec.h — the executor: one plan on one backend, and the state that makes a run resumable.
 *
 * Typical use (tools/train.c):
 *   sg_exec e; sg_exec_init(&e, &cfg, 1, backend);
 *   sg_exec_upload_dataset(&e, pixels, bytes, labels);
 *   sg_exec_init_state(&e, seed)  or  sg_exec_load(&e, path, ...);
 *   for (...) sg_exec_step(&e);
 *   sg_exec_save(&e, path, ...);
 * Every tensor lives at arena base + planned offset; the host touches the arena only through
 * upload/download, never inside a step.
 */
#ifndef SG_EXEC_H
#define SG_EXEC_H

#include "graph/backend.h"
#include "planner/engine_table.h"
#include "planner/plan.h"

typedef struct {
    sg_plan plan;
    sg_backend *be;
    uint64_t seed;
    /* the rank count (cfg.ranks: 0 = one process) of the checkpoint sg_exec_load read last;
     * differs from plan.cfg.ranks when a run resumes on another number of ranks, which is
     * allowed but continues with other bits (the caller warns: docs/data-parallel.md) */
    int ckpt_ranks;
    /* conv nodes whose engine (graph/backend.h: node_engine) differs from the one the
     * checkpoint sg_exec_load read last recorded (each warned about on stderr); 0 when equal
     * or when either side has no record (a backend with one engine) */
    int ckpt_conv_engines_differ;
    /* engine choices in describe()'s record (attn_engine, conv_tc) that differ from the
     * checkpoint's env, each warned about on stderr; 0 when equal or either side records none */
    int ckpt_env_engines_differ;
} sg_exec;

/* Build the plan for cfg (train: the training step; else the forward pass) and prepare the
 * backend (allocates the arena). The executor owns the backend from here on. */
int sg_exec_init(sg_exec *e, const sg_model_cfg *cfg, int train, sg_backend *be);
void sg_exec_free(sg_exec *e);

/* Fresh training state: parameters from Philox(seed) (docs/model.md), AdamW m = v = 0,
 * EMA = parameters, step = 0, rng seed = seed. */
int sg_exec_init_state(sg_exec *e, uint64_t seed);
/* Initial parameter values on the host (every ROLE_PARAM tensor at its offset relative to
 * the parameter region); params must hold role_bytes[ROLE_PARAM] bytes. */
void sg_exec_param_init_values(const sg_plan *p, uint64_t seed, float *params);
/* Upload the dataset (uint8 NHWC, plan's data_n x data_h x data_w x in_ch) and, for a
 * class-conditional plan, its labels (data_n of them, each in [0, classes)); labels NULL: the
 * dataset has none (an error for a class-conditional plan, ignored by any other). */
int sg_exec_upload_dataset(sg_exec *e, const uint8_t *pixels, int64_t bytes, const int32_t *labels);

/* One training step (the whole schedule). */
int sg_exec_step(sg_exec *e);
/* Run schedule nodes [from, to) eagerly (tests read intermediate tensors in between). */
int sg_exec_run_nodes(sg_exec *e, int from, int to);

/* Copy a tensor out of / into the arena (its full stored bytes). */
int sg_exec_read(sg_exec *e, int tensor, void *dst);
int sg_exec_write(sg_exec *e, int tensor, const void *src);
int sg_exec_read_name(sg_exec *e, const char *name, void *dst);
/* Small state values. */
int64_t sg_exec_step_count(sg_exec *e);
float sg_exec_loss(sg_exec *e);

/* Checkpoints: every persistent tensor a resume needs (parameters, AdamW m and v, EMA, step
 * state) plus metadata: config, plan hash, step, seed, data position, environment. `extra_json`
 * is merged in (e.g. the data source); may be NULL. keep_last > 0 rotates in dir. */
int sg_exec_save(sg_exec *e, const char *path, const char *extra_json);
int sg_exec_save_rotating(sg_exec *e, const char *dir, const char *extra_json, int keep_last,
                          char *path_out, size_t cap);
/* Load a checkpoint made by the same configuration (the error names the first differing
 * config field). The rank count alone may differ: the checkpoint is then checked against the
 * plan its own rank count makes, and e->ckpt_ranks says what it was. With params_only, only
 * parameters (or, with ema, the EMA copies loaded into the parameters) are read: that is how
 * sampling loads weights. */
int sg_exec_load(sg_exec *e, const char *path, int params_only, int ema);
/* The full state to continue a run whose config changed only in the fields named in
 * may_differ (NULL-terminated config keys, e.g. "lr", "ema_decay"): those may differ from the
 * checkpoint's, the plan hash is then not compared, every tensor still must match. */
int sg_exec_resume(sg_exec *e, const char *path, const char *const *may_differ);
/* The conv-engine record of checkpoint `path` ("conv_engines": which engine ran each conv
 * node), as malloc'ed JSON text for sg_backend.conv_pins; NULL when it has none (a one-engine
 * backend wrote it) or cannot be read. */
char *sg_exec_ckpt_conv_engines(const char *path);
/* The engine table checkpoint `path` was planned with ("engine_table": planner/engine_table.h),
 * into t: 1 when it has one, 0 when not (t empty), SG_ERR when it cannot be read. The caller
 * frees t (sg_engine_table_free) and keeps it alive as long as a config points to it. */
int sg_exec_ckpt_engine_table(const char *path, sg_engine_table *t);
/* Metadata JSON for this run (what sg_exec_save writes). */
int sg_exec_meta_json(sg_exec *e, const char *extra_json, char *buf, int cap);

#endif
