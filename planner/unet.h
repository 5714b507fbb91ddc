/* unet.h — the UNet builder's interface inside planner/ (not a public header): train_step.c
 * assembles the training step and the forward pass around sg_unet.
 */
#ifndef SG_UNET_H
#define SG_UNET_H

#include "planner/model.h"

/* What every builder helper needs; the first error latches in err (every later call is a
 * no-op returning -1), so a builder can be written without a check after each call. */
typedef struct {
    sg_graph *g;
    const sg_model_cfg *c;
    int train; /* creates grad/m/v/ema companions of each parameter */
    int seed_t, step_t;
    int st; /* silu(temb), shared by every res block */
    int err;
    int64_t n_params;
} builder;

/* Add one node; returns its output k (-1 and b->err set on failure). */
int sg_builder_node(builder *b, sg_op op, const int *in, int nin, const sg_op_args *args,
                    const char *name, int k);
/* The UNet on x_t {N, img, img, in_ch} and t (i32[N]): the prediction {N, img, img, in_ch}
 * in the activation dtype, or -1 with b->err set. */
int sg_unet(builder *b, int x, int t);

#endif
