/* plan_build.c — a plan from a configuration: the graph of a training step or of a sampling
 * step (the forward pass and the sampler's update; the builder: planner/unet.c,
 * planner/train_step.c and planner/sample_graph.c), then its layout
 * (planner/plan_layout.c). The only place the two meet, so that the layout code never calls up into
 * the builder. */
#include <string.h>

#include "planner/engine_table.h"
#include "planner/plan.h"

int sg_plan_build(sg_plan *p, const sg_model_cfg *cfg, int train) {
    memset(p, 0, sizeof *p);
    p->cfg = *cfg;
    /* a forward pass (sampling) has no training step to split: its batch is the sampler's */
    if (!train) p->cfg.grad_accum = 1;
    /* fusion as it is planned (SG_FUSE_AUTO resolved: sg_model_fuse): what the config JSON
     * of the plan's checkpoints records, and reads back (SG_FUSE_BITWISE kept: it is a
     * different plan) */
    p->cfg.fuse = cfg->fuse == SG_FUSE_BITWISE ? SG_FUSE_BITWISE : sg_model_fuse(cfg);
    p->train = train;
    sg_graph_init(&p->g);
    if (train
            ? sg_build_train_step(&p->g, &p->cfg, &p->io)
            : sg_build_forward(&p->g, &p->cfg, &p->io) || sg_build_sampler(&p->g, &p->cfg, &p->io))
        return SG_ERR;
    /* the engine table fits this model (its layers, precision and, for a step, its batch) */
    if (p->cfg.engines && sg_engine_table_check(p->cfg.engines, &p->g, &p->cfg, train))
        return SG_ERR;
    return sg_plan_layout(p);
}
