/* plan.h — the static memory plan: schedule, lifetimes, and one arena with a fixed offset for
 * every tensor of a training step (or of a forward pass, for sampling).
 *
 * Arena layout, bottom to top: parameters, gradients, AdamW m, AdamW v, EMA (each role
 * contiguous, tensors in the same order so that element j of one region matches element j of
 * the others), in bf16 runs the parameters' bf16 copy (ROLE_PARAM_BF16: the same elements at
 * half the bytes), step state, the dataset, the workspace; then the dynamic region where
 * activations and activation gradients reuse memory according to their lifetimes.
 */
#ifndef SG_PLAN_H
#define SG_PLAN_H

#include "planner/ir.h"
#include "planner/model.h"

typedef struct {
    sg_graph g;
    sg_model_cfg cfg;
    sg_step_io io;
    int train;                 /* 1: the training step; 0: forward only */
    int *buffer_of;            /* tensor -> buffer root (in-place reuse merges tensors) */
    int64_t arena_bytes;       /* what one cudaMalloc takes */
    int64_t lower_bound_bytes; /* persistent + the most dynamic bytes live at once */
    int64_t persistent_bytes;  /* the bottom regions */
    int64_t no_reuse_bytes;    /* every tensor in its own memory */
    int64_t role_bytes[ROLE_COUNT];
    int role_tensors[ROLE_COUNT]; /* stored tensors per role (regions and virtual ones aside):
                                     e.g. how many activations are saved for the backward pass
                                     (ROLE_SAVED) and how many recomputed there instead
                                     (ROLE_RECOMPUTED, one recompute node each) */
    int64_t peak_dynamic_bytes;   /* live dynamic bytes at the peak */
    int peak_node;                /* the schedule index where that happens */
    int inplace_merges;           /* tensors that took over their input's memory */
    int copies_shared;            /* ... of them plain copies whose source lives on (no bytes
                                     move: plan_layout.c's merge_copies) */
    const char *placement;        /* the ordering that won */
    double flops, matmul_flops;   /* per step */
    /* the fusions (planner/fuse.c): virtual normalised tensors and the bytes no tensor holds
     * any more (each one's size: the forward's y; the backward recomputes y as unfused); the
     * residual adds done in
     * a convolution's store (conv2d_add nodes) and the conv outputs they never write (also
     * counted in unmaterialised_bytes); the 1x1 shortcuts folded into conv2 (conv2d_sc nodes,
     * also counted as residuals) and their outputs and gradients never written (also counted
     * in unmaterialised_bytes); the nearest upsamples done inside the 3x3 conv after them
     * (upconv2d nodes) and the upsampled tensors and their gradients they never write (also
     * counted in unmaterialised_bytes) */
    int fused_norms, fused_residuals, fused_shortcuts, fused_upconvs;
    int64_t unmaterialised_bytes, fused_residual_bytes, fused_shortcut_bytes, fused_upconv_bytes;
    uint64_t hash; /* of the config, schedule and layout: checkpoints carry it */
} sg_plan;

/* Build the graph for cfg, schedule it, and lay it out. */
int sg_plan_build(sg_plan *p, const sg_model_cfg *cfg, int train);
/* Schedule and lay out a graph already in p->g (sg_plan_build calls it; tests call it on
 * graphs of their own). */
int sg_plan_layout(sg_plan *p);
void sg_plan_free(sg_plan *p);
/* No two tensors live at the same time overlap; every offset aligned; everything inside the
 * arena; every conv / linear reads weights of its activations' dtype. Returns SG_ERR naming
 * the first violation. */
int sg_plan_verify(const sg_plan *p);
/* The plan's bf16 copy of the parameters (bf16 runs): the parameter region's offset and
 * element count, and the copy's offset (element j of the copy is round(element j of the
 * region), 2 bytes each). 0 when the plan has none (fp32 runs, plans without parameters). */
static inline int sg_plan_bf16_copy(const sg_plan *p, int64_t *param_off, int64_t *n,
                                    int64_t *copy_off) {
    int params = -1, copy = -1;
    for (int t = 0; t < p->g.nt; t++) {
        const sg_tensor *x = &p->g.t[t];
        if (x->region && x->role == ROLE_PARAM) params = t;
        if (x->region && x->role == ROLE_PARAM_BF16) copy = t;
    }
    if (params < 0 || copy < 0) return 0;
    *param_off = p->g.t[params].offset;
    *n = sg_numel(&p->g.t[params]);
    *copy_off = p->g.t[copy].offset;
    return 1;
}
/* Is tensor t stored in the arena (not virtual)? */
static inline int sg_plan_stored(const sg_plan *p, int t) {
    return !sg_tensor_virtual(&p->g.t[t]);
}

#endif
