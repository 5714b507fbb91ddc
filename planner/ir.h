/* ir.h — the graph IR: tensors with static shapes, dtypes and roles; nodes; the op table.
 *
 * A graph is built once per configuration (planner/unet.c, train_step.c), differentiated
 * (planner/autodiff.c), completed with the optimizer step, scheduled and laid out in one arena
 * (planner/plan_build.c, plan_layout.c). Nothing here runs a kernel: graph/ executes a plan on a
 * backend.
 *
 * Conventions: activations are NHWC, stored as 4-D shapes {N, H, W, C}; conv weights
 * {Co, K, K, Ci}; linear weights {M, K}; vectors {n}. The schedule is the node order: forward
 * nodes as built, backward nodes in reverse, then the optimizer.
 */
#ifndef SG_IR_H
#define SG_IR_H

#include <stdint.h>

#include "common/sg_base.h"
#include "planner/op_list.h"

#define SG_MAX_DIMS 4
#define SG_MAX_IN 10
#define SG_MAX_OUT 6
#define SG_NAME_MAX 96
#define SG_ALIGN 256

/* The ops, generated from planner/op_list.h (which documents each op's operands and args). */
typedef enum {
#define SG_OP_ENUM(op, ...) op,
    SG_OP_LIST(SG_OP_ENUM)
#undef SG_OP_ENUM
        OP_COUNT
} sg_op;

/* ---- op arguments: one struct per op family, named fields, filled by whoever builds the
 * node (planner/unet.c and train_step.c, the backward rules in planner/ops.c) and read by name
 * everywhere else. A dtype is always stored as an sg_dtype, never offset or defaulted. Sizes that
 * follow from the operands' shapes are not arguments: planner/op_dims.h derives them. */
typedef struct {
    int N;     /* images this node gathers: one micro-batch of one rank */
    int img;   /* output height = width (data images are padded into it) */
    int flip;  /* random horizontal flips */
    int batch; /* the global batch: N x ranks x micro-batches; sample i of the node's slice s
                  (sg_node_slice) is sample step*batch + s*N + i of the run
                  (docs/data-parallel.md) */
} sg_gather_args;
typedef struct {
    int N, T; /* N timesteps drawn from [0, T), at the node's slice x N */
} sg_sample_t_args;
/* gather_labels: the class labels of the images gather_batch takes (the same items), each
 * replaced by the null class `classes` with probability p (classifier-free guidance's label
 * dropout, drawn at the sample's global index) */
typedef struct {
    int N, batch; /* as sg_gather_args */
    int classes;  /* the dataset's labels lie in [0, classes); `classes` is the null class */
    float p;      /* drop probability in [0, 1] */
} sg_labels_args;
/* class_emb and its backward: rows of a [rows, dim] fp32 table picked by each sample's label */
typedef struct {
    int rows;        /* the table's rows: the classes and the null class */
    sg_dtype out_dt; /* the embedding's dtype (the activations') */
} sg_class_emb_args;
typedef struct {
    int T;              /* diffusion steps */
    int schedule;       /* the betas: SG_BETA_LINEAR / SG_BETA_COSINE (common/sg_schedule.h) */
    float beta1, betaT; /* linear: the first and last beta */
    sg_dtype out_dt;    /* x_t's dtype */
    /* 1: the v target instead of x_t, from inputs (eps, x0, t, table): sqrt(abar) eps -
     * sqrt(1 - abar) x0, the table's rows {sqrt(abar), -sqrt(1 - abar)} (the plan's v_table) */
    int v_target;
    int zero_snr; /* the betas rescaled to zero terminal SNR (common/sg_schedule.h) */
} sg_ddpm_args;
typedef struct {
    int dim;         /* embedding width (even) */
    sg_dtype out_dt; /* the embedding's dtype */
} sg_temb_args;
typedef struct {
    int K, S;        /* square kernel (1 or 3) and stride (1 or 2) */
    int pad;         /* zero padding at the top/left, 0..K/2; the bottom/right padding is what
                        the output size Ho = (H + 2 (K/2) - K) / S + 1 needs: K/2 is the
                        symmetric rule, 0 with K = 3, S = 2 TensorFlow's SAME (DDPM's
                        downsampling; model.h's down_pad) */
    sg_dtype out_dt; /* forward: y's dtype */
    int H, W;        /* backward data: the forward input's height and width (S = 2 cannot
                        recover them from dy); 0 in the other conv ops */
} sg_conv_args;
/* group_norm and the norm_act ops. group_norm takes act = SG_ACT_NONE and p = 0 (its shape
 * rule refuses anything else); norm_act applies `act` after the affine transform; norm_act_temb
 * also drops out after it with probability p from the stream of a dropout op of the same
 * purpose (sg_dropout_args). */
typedef struct {
    int groups;
    float eps;
    int act;     /* SG_ACT_NONE or SG_ACT_SILU (common/sg_base.h) */
    float p;     /* norm_act_temb: drop probability after the activation, 0 for none */
    int purpose; /* its random stream: SG_RNG_DROPOUT_BASE + purpose */
} sg_gn_args;
typedef struct {
    int heads;
} sg_attn_args;
typedef struct {
    int purpose; /* which dropout of the step: its random stream (SG_RNG_DROPOUT_BASE + it) */
    float p;     /* drop probability */
} sg_dropout_args;
typedef struct {
    float loss_scale;  /* the dloss the backward starts from: 1/(ranks x micro_batches), 1 in
                          the classic step (the all-reduce and the micro-batches' accumulating
                          gradient writes then sum); > 0, never defaulted */
    int micro_batches; /* K >= 1: the forward writes this micro-batch's squared-error sum over
                          (its elements x K), the first micro-batch overwriting the loss and the
                          later ones adding (accum bit): the loss is the mean over the K
                          micro-batches, i.e. over the rank's batch (1: the batch's mean) */
} sg_mse_args;
typedef struct {
    int ranks;         /* the ranks the gradients are summed over */
    float loss_factor; /* 1/ranks: the summed loss becomes the mean */
} sg_allreduce_args;
typedef struct {
    float max_norm;
} sg_clip_args;
typedef struct {
    int warmup;                /* linear learning-rate warm-up steps */
    float lr, b1, b2, eps, wd; /* peak lr, betas, epsilon, decoupled weight decay */
    int schedule;              /* SG_LR_* (common/sg_schedule.h) after the warm-up */
    float lr_min;              /* the schedule's end, a fraction of lr */
    int64_t decay_steps;       /* the step where the schedule ends */
} sg_adamw_args;
typedef struct {
    int T;          /* the schedule's T: x_T is drawn at Philox step T (graph/sampler.h) */
    sg_dtype xt_dt; /* the model input x_t's dtype */
    /* 1: classifier-free guidance with scale `guidance` (cpu_sample_step): the forward pass
     * holds each image twice (conditional, then unconditional); 0: none */
    int guided;
    float guidance;
    float rescale; /* guided: the guidance rescale phi in [0, 1] (0: none) */
} sg_sampler_args;
typedef struct {
    float decay;            /* fixed decay, or the warm-up's maximum */
    int warmup;             /* 1: diffusers' EMA warm-up from the step input */
    float inv_gamma, power; /* the warm-up's shape */
} sg_ema_args;

/* The fused optimizer pass (OP_ADAMW_EMA): AdamW's arguments and the EMA's. */
typedef struct {
    sg_adamw_args adamw;
    sg_ema_args ema;
} sg_optim_args;

/* The arguments of one node: the member named after its op family (the ir.h enum says which);
 * ops without arguments leave it zeroed. */
/* noise: offset noise where offset > 0 (cpu_noise_offset), one normal per (sample, channel) of
 * C channels times offset added to every value; 0: plain N(0, 1). perturb > 0: the same noise
 * plus perturb times a second normal per element (cpu_noise_perturb: input perturbation, the
 * noise x_t is made with) */
typedef struct {
    int C;
    float offset, perturb;
} sg_noise_args;

typedef union {
    sg_gather_args gather;
    sg_noise_args noise;
    sg_sample_t_args sample_t;
    sg_labels_args labels;
    sg_class_emb_args cemb;
    sg_ddpm_args ddpm;
    sg_temb_args temb;
    sg_conv_args conv;
    sg_gn_args gn;
    sg_attn_args attn;
    sg_dropout_args dropout;
    sg_mse_args mse;
    sg_allreduce_args allreduce;
    sg_clip_args clip;
    sg_adamw_args adamw;
    sg_ema_args ema;
    sg_sampler_args sampler;
    sg_optim_args optim;
} sg_op_args;

enum { SG_INIT_NONE = 0, SG_INIT_UNIFORM, SG_INIT_ONES, SG_INIT_ZEROS };

typedef struct {
    char name[SG_NAME_MAX];
    sg_dtype dtype;
    sg_role role;
    int ndim;
    int64_t shape[SG_MAX_DIMS];
    int64_t bytes;   /* unpadded size; 0 for virtual tensors (sg_tensor_virtual) */
    int64_t offset;  /* arena offset, -1 until planned */
    int first, last; /* schedule indices of first and last use (inclusive), -1 if unused */
    int producer;    /* node that first writes it, -1 for persistent / inputs */
    int nparts;      /* > 0: virtual channel concatenation of parts[] (NHWC), no storage */
    int parts[2];
    int grad;         /* gradient tensor (autodiff), -1 if none yet */
    int needs_grad;   /* a parameter, or computed from one */
    int has_contrib;  /* autodiff: some node already wrote this gradient */
    int region;       /* 1: a view over a whole persistent role region (the optimizer's) */
    int twin;         /* gradient accumulation: micro-batch 0's tensor that this micro-batch's
                         tensor copies (its lifetime moved by whole micro-batches: the layout
                         gives it the twin's offset), -1 for every other tensor */
    int copy_of;      /* ROLE_PARAM_BF16: the parameter this tensor is the bf16 copy of (laid
                         out at half its offset in the parameter region), -1 otherwise */
    int init;         /* parameters: SG_INIT_* */
    float init_bound; /* SG_INIT_UNIFORM: U(-bound, bound) */
    /* The builder's mark on a forward output 0 whose op has a recompute op: do not keep it for
     * the backward pass; autodiff emits the recompute op just before its first backward reader
     * and every backward reader reads that copy (`recomputed`, -1 until made). */
    int recompute;
    int recomputed;
    /* >= 0: a virtual normalised tensor (planner/fuse.c): output 0 of the norm_act or
     * norm_act_temb node `vnorm`, never stored. That node runs only its statistics pass; every
     * reader (a convolution the fused kernels take) computes the values from the node's inputs
     * and its outputs mean and rstd, with the apply pass's arithmetic. -1 for every other
     * tensor. */
    int vnorm;
} sg_tensor;

/* Has no storage of its own: a channel concatenation (nparts) or a virtual normalised tensor
 * (vnorm). */
static inline int sg_tensor_virtual(const sg_tensor *t) {
    return t->nparts > 0 || t->vnorm >= 0;
}

typedef struct {
    sg_op op;
    int nin, nout;
    int in[SG_MAX_IN];
    int out[SG_MAX_OUT];
    /* bit (2*slot + part): that output (or part of a virtual output) accumulates (+=) into
     * what is already there instead of overwriting it. Read it with sg_accum_bits. */
    unsigned accum;
    sg_op_args a;
    int fwd;   /* backward nodes: the forward node they differentiate; else -1 */
    int micro; /* the micro-batch of the step this node computes (0 .. micro_batches-1): its
                  random draws and gathered samples start at sg_node_slice (below) */
} sg_node;

typedef struct {
    sg_tensor *t;
    int nt, cap_t;
    sg_node *n;
    int nn, cap_n;
    int n_forward;  /* nodes [0, n_forward) are the forward pass */
    int n_backward; /* nodes [n_forward, n_forward+n_backward) are the backward pass */
    int n_dropout;  /* dropout purposes handed out */
    /* gradient accumulation: the forward and backward nodes [0, n_forward + n_backward) are
     * micro-batch 0's; micro-batches 1 .. micro_batches-1 follow them, each a copy of the same
     * span (node i + k span is node i's copy for micro-batch k, span = n_forward + n_backward)
     * on fresh activations and the same parameters and gradients. 0 or 1: no copies. */
    int micro_batches;
} sg_graph;

/* The tensors a read of virtual tensor t reads (none for a stored one): a concatenation's two
 * parts; a virtual normalised tensor's node's inputs and its other outputs (mean, rstd), the
 * operands of the apply pass that computes it (the node's x may itself be a concatenation: the
 * caller recurses). Returns how many, into deps (at most SG_MAX_IN + SG_MAX_OUT). */
static inline int sg_virtual_deps(const sg_graph *g, int t, int *deps) {
    const sg_tensor *x = &g->t[t];
    int n = 0;
    for (int p = 0; p < x->nparts; p++) deps[n++] = x->parts[p];
    if (x->vnorm >= 0) {
        const sg_node *nd = &g->n[x->vnorm];
        for (int k = 0; k < nd->nin; k++) deps[n++] = nd->in[k];
        for (int k = 1; k < nd->nout; k++) deps[n++] = nd->out[k];
    }
    return n;
}

/* Shape rule: fill the descriptions (dtype, ndim, shape) of a node's new outputs from its
 * inputs and args; return SG_ERR with a message for inconsistent inputs. */
typedef int (*sg_shape_fn)(const sg_graph *g, const sg_node *node, sg_tensor *outs);
/* FLOPs: multiply-adds count 2; elementwise work counts 1 per output element. */
typedef double (*sg_flops_fn)(const sg_graph *g, const sg_node *node);
/* Workspace: bytes of scratch the node's CUDA launcher takes (common/sg_workspace.h). */
typedef int64_t (*sg_ws_fn)(const sg_graph *g, const sg_node *node);
/* Backward rule: append the nodes that turn the gradient of the node's output 0 into
 * gradient contributions for its inputs (planner/autodiff.c). */
typedef int (*sg_backward_fn)(sg_graph *g, int node);

/* What an op is (the op list's kind column). */
typedef enum { SG_OPK_FWD, SG_OPK_BWD, SG_OPK_OPT } sg_op_kind;

typedef struct {
    const char *name;
    sg_op_kind kind;
    int nin, nout; /* inputs and outputs a node of this op has */
    int inplace;   /* output 0 may share input 0's memory */
    int matmul;    /* FLOPs are matrix work (counted in the tensor-core figure) */
    sg_shape_fn shape;
    sg_flops_fn flops;
    sg_ws_fn workspace;      /* NULL: the launcher takes no workspace */
    sg_backward_fn backward; /* NULL: nothing to differentiate */
    int bwd_op;              /* pointwise ops: the op their generic backward rule emits; -1 */
    int recompute;           /* the op that recomputes output 0 from the node's inputs and its
                                other outputs (sg_tensor.recompute); -1 */
} sg_op_info;

extern const sg_op_info sg_ops[OP_COUNT];

/* The bytes node `node` moves at least: every tensor it reads once (a channel concatenation as
 * its parts; a virtual normalised tensor as what the reader computes it from, its norm node's
 * inputs and statistics; the dataset as the pixels gather_batch takes from it) and every output
 * written once, twice where it accumulates (read, then written). A virtual output (a
 * concatenation's parts aside), a concat node and a plain copy laid out in its input's memory
 * (an elided accum) move nothing. Small tables read by index (the
 * schedule's rows) count whole. Not counted: what a kernel writes and reads back of its own
 * (workspace, split partials), and re-reads a cache would serve. tools/bench's memory columns. */
int64_t sg_node_bytes(const sg_graph *g, int node);
/* ... summed over every node of g: the step's traffic (plan, bench) */
double sg_graph_bytes(const sg_graph *g);

/* Step inputs, the model and its loss (the forward pass). */
static inline int sg_op_is_forward(sg_op op) {
    return sg_ops[op].kind == SG_OPK_FWD;
}
/* The training loss: mse, or mse_w (weighted per sample: min-SNR). */
static inline int sg_op_is_loss(sg_op op) {
    return op == OP_MSE || op == OP_MSE_W;
}
/* Gradient norm, clip, AdamW, EMA, step counter; the sampler's update after a forward pass. */
static inline int sg_op_is_optimizer(sg_op op) {
    return sg_ops[op].kind == SG_OPK_OPT;
}

/* ---- graph building (planner/ir.c) */
void sg_graph_init(sg_graph *g);
void sg_graph_free(sg_graph *g);
/* New tensor; returns its id. */
int sg_tensor_new(sg_graph *g, const char *name, sg_dtype dt, sg_role role, int ndim,
                  const int64_t *shape);
/* Append a node of `op`: inputs `in`, outputs either existing tensors (outs[i] >= 0, written
 * in place) or new ones (outs[i] < 0) created from the op's shape rule and named
 * `name`/`name.suffix`. Returns the node id, or -1 with sg_last_error() set. */
int sg_node_add(sg_graph *g, sg_op op, const int *in, int nin, int *outs, const sg_op_args *args,
                const char *name);
/* While building a forward graph (no node refers to another by index yet but the tensors'
 * producers): move the last node to index `to` (<= it), the nodes from `to` on one later; its
 * inputs must all be produced before `to`. */
void sg_node_move_last(sg_graph *g, int to);
/* The accumulate bits of output slot k: bit 0 for the tensor (or part 0 of a virtual one),
 * bit 1 for part 1. */
static inline unsigned sg_accum_bits(const sg_node *nd, int k) {
    return (nd->accum >> (2 * k)) & 3u;
}
/* The bit that makes output slot k (part `part`) accumulate. */
static inline unsigned sg_accum_bit(int k, int part) {
    return 1u << (2 * k + part);
}
/* A tensor's output id convenience: the id of node's output k. */
static inline int sg_out(const sg_graph *g, int node, int k) {
    return g->n[node].out[k];
}
int64_t sg_numel(const sg_tensor *t);
/* Which slice of the global batch a node works on, for the ops that gather samples or draw
 * random numbers by global index (docs/data-parallel.md): rank r's micro-batch k is slice
 * r K + k of the ranks x K equal slices (K = micro_batches), so its first sample (element) is
 * slice x its own sample (element) count, the index the one-process, one-pass step gives it. */
static inline uint64_t sg_node_slice(const sg_graph *g, const sg_node *nd, int rank) {
    const uint64_t K = g->micro_batches > 1 ? (uint64_t)g->micro_batches : 1u;
    return (uint64_t)rank * K + (uint64_t)nd->micro;
}
int sg_find_tensor(const sg_graph *g, const char *name);
/* Scratch bytes the CUDA launcher of this node takes from the workspace: its op's workspace
 * rule (planner/ops.c), 0 when it has none. */
int64_t sg_node_workspace_bytes(const sg_graph *g, const sg_node *nd);
/* cuBLAS's workspace inside the arena (32 MiB, what Hopper wants). */
#define SG_CUBLAS_WORKSPACE_BYTES (32ll << 20)
/* Format a tensor name into buf (SG_NAME_MAX bytes); names that do not fit are cut. */
char *sg_name(char *buf, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "NxHxWxC" style shape string into buf (cap bytes). */
const char *sg_shape_str(const sg_tensor *t, char *buf, int cap);

#endif
