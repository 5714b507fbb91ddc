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
    int st;      /* silu(temb), shared by every res block */
    int proj_at; /* where the next block's projection of st goes in the schedule */
    int err;
    int64_t n_params;
} builder;

/* Add one node; returns its output k (-1 and b->err set on failure). */
int sg_builder_node(builder *b, sg_op op, const int *in, int nin, const sg_op_args *args,
                    const char *name, int k);
/* The UNet on x_t {N, img, img, in_ch}, t (i32[N]) and, in a class-conditional model, the
 * labels y (i32[N]; -1 in an unconditional one): the prediction {N, img, img, in_ch} in the
 * activation dtype, or -1 with b->err set. */
int sg_unet(builder *b, int x, int t, int y);

/* planner/fuse.c: the fusion decisions (sg_model_fuse). A convolution of Co output channels
 * and K x K taps on input x is one the fused kernels take: every part of x and Co multiples of
 * 8, K 1 or 3 (the tensor-core rule of kernels/cuda/conv.cu, without its dtype: the plan is
 * the same on both backends). */
int sg_conv_fusable(const sg_graph *g, int x, int Co, int K);
/* A ResBlock's conv2 (3x3 on h) and its 1x1 shortcut (on x), both to Co channels, folded into
 * one conv2d_sc node: both fusable, and bf16 activations (the tensor-core path is the only
 * CUDA one for the fold). The caller checks the fusion switch. */
int sg_conv_sc_foldable(const sg_graph *g, int h, int x, int Co, sg_dtype act_dt);
/* Turn the output of every norm_act / norm_act_temb node whose readers are all fusable
 * convolutions (their input 0) that the engine table (NULL: none) does not send to cuDNN into a
 * virtual normalised tensor (sg_tensor.vnorm); returns how many. Run on the forward graph, before
 * autodiff; in a training graph (train) each one is marked for recomputation, which its weight
 * gradients read (also where the config keeps stored normalisations, --store-norm). */
int sg_fuse_norm_prologues(sg_graph *g, const struct sg_engine_table *engines, int train);

#endif
