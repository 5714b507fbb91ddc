/* engine_table_io.h — the engine table's JSON form (planner/engine_table.h has the table):
 *
 *   {"format":"stepgraph_engine_table","version":1,
 *    "model":"unet_cifar","precision":"bf16","batch":128,
 *    "device":"NVIDIA H100 80GB HBM3","driver":"12080","cudnn":"91000","backend":"cuda",
 *    "layers":[{"layer":"conv_in","engine":"own","own_ms":0.041,"cudnn_ms":0.052}, ...]}
 *
 * "own_ms" / "cudnn_ms": the measured ms of the layer's whole alternative per step, null when
 * not measured (cudnn_ms null: cuDNN was not available where it was tuned). An own layer may
 * say "tc":"wgmma" (its bf16 convolutions on the Hopper wgmma kernels; absent or "mma": mma.sync)
 * with "wgmma_ms", the own alternative's time on them (own_ms is then mma.sync's); a cudnn
 * layer may carry "cudnn_engines", the timed cuDNN engine per pass, and every layer "passes",
 * per pass {"own_ms", "lib_ms"}: its nodes' times on own and on the library side in the plan
 * where its input is stored; a cudnn layer's with "engine": "own" (those nodes run on own all
 * the same, measured faster there) or "cudnn". Only "model", "precision", "batch" and
 * each layer's "layer", "engine", "tc", "cudnn_engines" and the passes' "engine" decide
 * anything; the rest records where the choice came from. Written by bench --tune-engines, read by
 * --engine-table.
 */
#ifndef SG_ENGINE_TABLE_IO_H
#define SG_ENGINE_TABLE_IO_H

#include "planner/engine_table.h"

/* Parse JSON text into t (initialised here; freed by the caller on success and on failure).
 * `what` names the source in errors (a path). SG_ERR with a one-line message. */
int sg_engine_table_parse(const char *text, const char *what, sg_engine_table *t);
/* Read a table file (sg_engine_table_parse on its contents). */
int sg_engine_table_read(const char *path, sg_engine_table *t);
/* The table as compact JSON text (malloc'ed; NULL with sg_last_error on failure). */
char *sg_engine_table_json(const sg_engine_table *t);
/* Write the table to path, one layer per line: a temporary file renamed over path, so a
 * failed write leaves any earlier file whole. */
int sg_engine_table_write(const char *path, const sg_engine_table *t);
/* Could sg_engine_table_write write path? path is not empty nor a directory, and its
 * temporary file (PATH.tmp, beside it) can be opened for writing: created and removed again
 * when it was not there. For a check before a tuning run, which takes minutes. SG_ERR naming
 * the file and why. */
int sg_engine_table_check_writable(const char *path);
/* Layers whose choice differs between a (e.g. a checkpoint's table) and b (the one given),
 * GEMMs whose algorithm does, and the attention engine where it does, each named on stderr
 * after `prefix` (at most 8 lines); returns the count, layers and GEMM picks missing from
 * either side included. */
int sg_engine_table_diff(const sg_engine_table *a, const sg_engine_table *b, const char *prefix);

#endif
