/* weights.h — model weights from outside a training run into an executor: a stepgraph
 * checkpoint, a diffusers UNet2DModel folder, or a safetensors file with diffusers names
 * (what `train --init-from` and `sample --weights` read).
 *
 * The architecture is checked before any tensor is read (a checkpoint's or a folder's config
 * against the executor's: ckpt_config_check_arch names the first difference); a bare
 * safetensors file has no config, so its tensors are checked one by one (a missing or
 * misshapen tensor is named, and so is a tensor this model has no place for).
 */
#ifndef SG_WEIGHTS_H
#define SG_WEIGHTS_H

#include <stddef.h>

#include <jansson.h>

#include "graph/exec.h"

/* The weights a path stands for: a stepgraph run folder (train --out) stands for the
 * checkpoint its `latest` names, else its newest (written into buf); any other path (a
 * checkpoint, a safetensors file, a diffusers folder, which holds neither) for itself. */
const char *sg_weights_path(const char *path, char *buf, size_t cap);
/* path (after sg_weights_path) is a stepgraph checkpoint: it holds EMA weights apart from the
 * parameters, and SG_WEIGHTS_FROM_EMA chooses; a safetensors file or a diffusers folder holds
 * one set of weights. */
int sg_weights_has_ema(const char *path);

/* The stepgraph model config object of a weights source: a checkpoint's metadata "config", or
 * a diffusers folder's config.json (+ scheduler) translated (ckpt_diffusers_to_config); a run
 * folder's is its checkpoint's (sg_weights_path). SG_ERR for a bare safetensors file (it
 * carries no config). */
int sg_weights_config(const char *path, char *cfg_json, size_t cap);

/* A model config from a config object (sg_model_json's fields): the preset its "model" names,
 * then every field the object carries, each checked for type and range (the error names the
 * field); a missing down_pad means symmetric, as in checkpoints from before it existed.
 * any_name: a "model" that is no preset is allowed (weights from diffusers), with unet_tiny's
 * values under the fields the object lacks. Not validated as a whole (sg_model_validate). */
int sg_model_cfg_from_config(const json_t *config, int any_name, sg_model_cfg *cfg);
/* The same from JSON text with any model name, for a forward plan: the dataset fields are set
 * for no dataset. */
int sg_model_cfg_from_json(const char *cfg_json, sg_model_cfg *cfg);

enum {
    /* also set the EMA copies (a training executor): from a checkpoint its EMA, from diffusers
     * weights the same weights */
    SG_WEIGHTS_SET_EMA = 1,
    /* from a checkpoint, take its EMA weights as the parameters (what sampling wants) */
    SG_WEIGHTS_FROM_EMA = 2,
};
/* Overwrite the executor's parameters (and with SG_WEIGHTS_SET_EMA its EMA) from path (a
 * run folder: its checkpoint, sg_weights_path; another directory: a diffusers folder;
 * "*.safetensors"; else a stepgraph checkpoint). Nothing else changes: a training executor
 * keeps its step and AdamW state (sg_exec_init_state first for a fresh run). */
int sg_exec_load_weights(sg_exec *e, const char *path, unsigned flags);

#endif
