/* test_backend_ops.c — every op of the IR through two backends, in the manner of ggml's
 * test-backend-ops: each op as a one-node plan (two nodes when an operand is a channel
 * concatenation: the virtual OP_CONCAT node, then the op), laid out by the planner exactly as a
 * training step is (sg_plan_layout: arena offsets, workspace, in-place reuse), run through
 * run_node on the CPU reference backend and on a second backend, and the two arenas compared.
 *
 * The second backend is CUDA (sg_backend_cuda_create(0, 0)): in CI the real graph/backend_cuda*.c
 * and kernels/cuda executed on the host (tests/cuda_host; ctest `backend_ops`), on a GPU the
 * real thing (`backend_ops_gpu`, skipped without one). `--second cpu` runs the CPU backend
 * against itself (ctest `backend_ops_selftest`): it must pass exactly, and exercises the whole
 * harness on any machine. Under SG_CONV_TC=wgmma (ctest `backend_ops_wgmma`) the bf16 convs run
 * on the Hopper wgmma kernels and the fp32 ones must be refused (g_wgmma).
 *
 * Per case:
 *   - inputs: fresh values from Philox (the test's own purpose, keyed by case and tensor), never
 *     zeros; bf16 tensors hold bf16 values; integer inputs valid (timesteps in [0, T), the
 *     seed and step state, dataset bytes); the saved statistics a backward op reads (GroupNorm
 *     mean/rstd, attention P) are computed here from its inputs, so they are consistent;
 *   - every other byte of the arena (outputs, alignment padding, workspaces) starts as 0xFF:
 *     NaN in fp32 and bf16, -1 in integers, so an output element that is never written shows;
 *     accumulating outputs start from random values instead (the result is old + contribution);
 *   - after the run, per output: every element finite; floats within the op's tolerance of the
 *     CPU's (normalised error max|b - a| / max|a|), integers equal; every byte outside the
 *     outputs and the workspace unchanged (inputs intact, nothing written into a neighbour or
 *     the padding after a tensor); and the second backend, run again from the same image,
 *     gives the same bits;
 *   - on failure: op, dtype, variant, tensor, the worst element's index (NHWC coordinates for
 *     4-D tensors) and both values.
 * Variants: fp32 and bf16 activations (parameters, statistics and gradients of parameters stay
 * fp32, as in the model), accumulating outputs, concatenated inputs and outputs, in-place
 * execution (the planner merges output 0 into a dying input 0), shapes at and across the
 * kernels' tile edges and odd sizes, and unet_adm64's ops (average pool, several heads of 32
 * channels), and fused convolutions (planner/fuse.c): a conv or weight gradient whose input is
 * a virtual normalised tensor, made by a norm_act / norm_act_temb node that then runs its
 * statistics pass alone (two nodes; the CPU materialises the operand, the CUDA kernels compute
 * it in their tile loads; fp32 is refused by the CUDA backend). Coverage: every op of the enum
 * must have run in fp32, and in bf16 where it has an activation dtype; where the CUDA backend
 * accumulates, reads or writes concatenations, runs in place, or reads or makes a fused operand,
 * such a case must have run. A missing one fails the test, named.
 *
 * Tolerances, the categories of tests/test_cuda_ops.c (normalised error):
 *   exact   0     the same arithmetic in the same order: copies, resampling, adds, masks,
 *                 batches, timesteps, EMA, clip scale, the MSE gradient, the step counter,
 *                 noising (the CPU's coefficients from the table, its double expression)
 *   tight   1e-6  double on both sides, blocked differently, or a libm difference in double:
 *                 loss, sum of squares, time embedding
 *   normal  1e-5  Gaussian draws (noise; the sampler's x_T and DDPM noise): device logf/cosf
 *                 within a few ulp of libm's
 *   adamw   1e-5  the fp32 update on the GPU against the reference's double
 *   f32     1e-4  GEMMs, reductions and expf in another order (~1e-6 typical; a wrong index
 *                 gives O(1))
 * and any non-exact op's bf16 output 2e-2: one bf16 ulp is 2^-8 relative, plus the bf16 copies
 * of weights / P / dS on the cuBLAS paths. Exact ops stay exact in bf16: both backends round
 * the same fp32 value once.
 *
 * Usage: test_backend_ops [--second cpu|cuda] [--skip-without-gpu] [--big] [--only OP] [-v]
 *   --skip-without-gpu: exit 77 (ctest SKIP) when no CUDA device exists; without it that fails
 *   --big: also the large cases (more than one capped reduction grid), for a real GPU
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/philox.h"
#include "graph/backend.h"
#include "graph/sampler.h"
#include "kernels/cpu/cpu_kernels.h"
#include "tests/sg_test.h"

#define BO_PURPOSE 0x7e57u /* the test's own Philox stream, apart from the step's purposes */
#define BO_MAX_T 48
#define BO_MAX_STEPS 1000 /* the sampler cases' T */
#define BO_MICROS 3       /* micro-batches of the cases that place a node in one (bo_args.micro) */
#define POISON 0xFF

/* ---- tolerances */

/* TOL_BF16_OUT: an fp32 output the engine computed through a bf16 rounding (cuDNN's bf16 dw;
 * a fused bf16 weight gradient's dw, its operand recomputed with CUDA's approximate SiLU) */
enum { TOL_EXACT, TOL_TIGHT, TOL_NORMAL, TOL_ADAMW, TOL_F32, TOL_BF16_OUT };
static const double tol_value[] = {0.0, 1e-6, 1e-5, 1e-5, 1e-4, 2e-2};
#define TOL_BF16 2e-2

/* What the coverage check demands of each op, and its tolerance category.
 *   act:    has an activation dtype (must run in fp32 and bf16)
 *   accum:  the CUDA backend honours accumulate bits on its outputs (an accumulating case)
 *   concat: reads or writes a channel concatenation in the real graph (a concatenated case)
 *   fused:  reads a virtual normalised tensor, or (norm_act) makes one (planner/fuse.c)
 * In-place cases are demanded where the op table says the planner may merge (sg_ops.inplace). */
typedef struct {
    int act, accum, concat, tol, fused;
} bo_props;

static const bo_props props[OP_COUNT] = {
    [OP_GATHER_BATCH] = {0, 0, 0, TOL_EXACT},
    [OP_SAMPLE_T] = {0, 0, 0, TOL_EXACT},
    [OP_NOISE] = {0, 0, 0, TOL_NORMAL},
    [OP_DDPM_NOISE] = {1, 0, 0, TOL_EXACT}, /* the CPU's double expression, bit for bit */
    [OP_TIMESTEP_EMB] = {1, 0, 0, TOL_TIGHT},
    [OP_LINEAR] = {1, 0, 0, TOL_F32},
    [OP_CONV2D] = {1, 0, 1, TOL_F32, 1},
    [OP_GROUP_NORM] = {1, 0, 1, TOL_F32},
    [OP_SILU] = {1, 0, 0, TOL_F32},
    [OP_ADD] = {1, 0, 0, TOL_EXACT},
    [OP_ADD_NC] = {1, 0, 0, TOL_EXACT},
    [OP_CONCAT] = {1, 0, 1, TOL_EXACT},
    [OP_UPSAMPLE2X] = {1, 0, 0, TOL_EXACT},
    [OP_UPSAMPLE2X_APPLY] = {1, 0, 0, TOL_EXACT},
    [OP_AVGPOOL2X] = {1, 0, 0, TOL_EXACT},
    [OP_ATTENTION] = {1, 0, 0, TOL_F32},
    [OP_DROPOUT] = {1, 0, 0, TOL_EXACT},
    [OP_MSE] = {1, 1, 0, TOL_TIGHT},
    [OP_MSE_BWD] = {1, 1, 0, TOL_EXACT},
    [OP_MSE_W] = {1, 1, 0, TOL_TIGHT},
    [OP_MSE_W_BWD] = {1, 1, 0, TOL_EXACT},
    [OP_LINEAR_BWD_DATA] = {1, 1, 0, TOL_F32},
    [OP_LINEAR_BWD_WEIGHT] = {1, 1, 0, TOL_F32},
    [OP_CONV2D_BWD_DATA] = {1, 1, 1, TOL_F32},
    [OP_CONV2D_BWD_WEIGHT] = {1, 1, 1, TOL_F32, 1},
    [OP_GROUP_NORM_BWD] = {1, 1, 1, TOL_F32},
    [OP_SILU_BWD] = {1, 1, 0, TOL_F32},
    [OP_ADD_NC_BWD] = {1, 1, 0, TOL_F32},
    [OP_UPSAMPLE2X_BWD] = {1, 1, 0, TOL_EXACT},
    [OP_AVGPOOL2X_BWD] = {1, 1, 0, TOL_EXACT},
    [OP_ATTENTION_BWD] = {1, 1, 0, TOL_F32},
    [OP_DROPOUT_BWD] = {1, 1, 0, TOL_EXACT},
    [OP_ACCUM] = {1, 1, 0, TOL_EXACT},
    [OP_GRAD_SUMSQ] = {0, 0, 0, TOL_TIGHT},
    [OP_CLIP_SCALE] = {0, 0, 0, TOL_EXACT},
    [OP_ADAMW] = {0, 0, 0, TOL_ADAMW},
    [OP_EMA] = {0, 0, 0, TOL_EXACT},
    [OP_STEP_INC] = {0, 0, 0, TOL_EXACT},
    [OP_SILU_MUL] = {1, 0, 0, TOL_F32},
    [OP_SILU_MUL_BWD] = {1, 1, 0, TOL_F32},
    [OP_LOSS_WATCH] = {0, 0, 0, TOL_EXACT},
    [OP_ALLREDUCE] = {0, 0, 0, TOL_EXACT},
    /* its double math is the CPU's operation for operation; x_T and the DDPM noise are normals */
    [OP_SAMPLE_STEP] = {1, 0, 0, TOL_NORMAL},
    /* norm_act_temb's x is a conv output in the UNet, never a concatenation */
    [OP_NORM_ACT] = {1, 0, 1, TOL_F32, 1},
    [OP_NORM_ACT_TEMB] = {1, 0, 0, TOL_F32, 1},
    [OP_NORM_ACT_APPLY] = {1, 0, 1, TOL_F32},
    [OP_NORM_ACT_TEMB_APPLY] = {1, 0, 0, TOL_F32},
    [OP_NORM_ACT_BWD] = {1, 1, 1, TOL_F32},
    [OP_NORM_ACT_TEMB_BWD] = {1, 1, 0, TOL_F32},
    [OP_ADAMW_EMA] = {0, 0, 0, TOL_ADAMW},      /* the EMA is exact given p, p has AdamW's */
    [OP_ADAMW_EMA_BF16] = {0, 0, 0, TOL_ADAMW}, /* and the copy of p: round(p), bf16's 2e-2 */
    [OP_GELU] = {1, 0, 0, TOL_F32},
    [OP_GELU_BWD] = {1, 1, 0, TOL_F32},
    /* the residual add in the conv's store: its x is a conv's input (a concatenation, or a
     * fused normalisation) */
    [OP_CONV2D_ADD] = {1, 0, 1, TOL_F32, 1},
    /* nearest-upsample + 3x3 conv from the low-res input: w is the fp32 master weights */
    [OP_UPCONV2D] = {1, 0, 0, TOL_F32},
    [OP_UPCONV2D_BWD_DATA] = {1, 1, 0, TOL_F32},
    [OP_UPCONV2D_BWD_WEIGHT] = {1, 1, 0, TOL_F32},
    /* conv2 with the 1x1 shortcut folded in: h a fused normalisation, x the skip concatenation
     * (bf16 only on CUDA: its fp32 case is a refusal, which counts as fp32 coverage) */
    [OP_CONV2D_SC] = {1, 0, 1, TOL_F32, 1},
    [OP_ATTENTION_P] = {1, 0, 0, TOL_F32},
    /* class conditioning: integer draws; a row copy; sums in sample order on both sides */
    [OP_GATHER_LABELS] = {0, 0, 0, TOL_EXACT},
    [OP_CLASS_EMB] = {1, 0, 0, TOL_EXACT},
    [OP_CLASS_EMB_BWD] = {1, 1, 0, TOL_EXACT},
};

/* ---- a case: the plan, and how each tensor starts */

typedef enum {
    FILL_POISON = 0, /* 0xFF bytes: outputs that must be written */
    FILL_UNIFORM,    /* floats uniform in [lo, hi), rounded to the tensor's dtype */
    FILL_INT,        /* integers uniform in [lo, hi] */
    FILL_CONST,      /* every element lo (integer or float) */
    FILL_BYTES,      /* uint8 uniform in [0, 255] */
    FILL_DATA,       /* the floats in data[] (computed by the builder) */
    FILL_RAW         /* the tensor's bytes in raw[] (a struct table, a mixed key) */
} fill_kind;

typedef struct {
    fill_kind kind;
    double lo, hi;
    float *data;
    uint8_t *raw;
} fill_spec;

typedef struct {
    sg_plan p;
    uint64_t seed; /* the case's Philox key: fresh values for every case */
    fill_spec fill[BO_MAX_T];
    int err;
    /* the arena without cuBLAS's 32 MiB workspace (its contents are cuBLAS's business): the
     * byte ranges [seg[k][0], seg[k][1]) the harness fills, copies and compares */
    int64_t seg[2][2];
    int nseg;
} bo_case;

/* The arguments of a case; each op's builder (below) says which fields it reads. */
typedef struct {
    int N, H, W, C; /* the main activation [N,H,W,C] (linear: [N,C]; flat ops: N values) */
    int C2;         /* > 0: that activation is the concatenation of C and C2 channels */
    int Co;         /* output channels / features / embedding dim */
    int K, S, G, heads, T;
    int acc;       /* accumulate into output 0 (every part of it); weight gradients: dw and db */
    int acc_param; /* group norm backward: accumulate into dgamma and dbeta */
    int acc_split; /* only the first of two outputs sharing the CUDA launchers' one flag
                      accumulates: part a of a concatenation, dw (not db), dgamma (not dbeta) */
    int inplace;   /* input 0 dies at the node: the planner gives output 0 its memory */
    int mixed;     /* MSE: target in fp32 under bf16 predictions; accum: fp32 sum of a bf16 x */
    int ndata, flip, warmup;
    int same; /* conv: DDPM's TensorFlow SAME padding (0 at the top/left), else K/2 all round */
    int act;  /* norm_act: SG_ACT_NONE or SG_ACT_SILU */
    float f;  /* dropout p; noise offset; clip max_norm; EMA decay; mse's loss scale (0: 1);
                 allreduce's loss factor; the DDIM sampler's eta */
    double v; /* clip: the sum of squares fed in */
    int64_t step;
    int micro;   /* gather, timesteps, noise, dropout: the node is micro-batch `micro` of
                    BO_MICROS (gradient accumulation), so its samples and random draws start at
                    that slice of the batch (sg_node_slice) */
    int cosine;  /* ddpm noise, sample step: the cosine betas (common/sg_schedule.h), else linear */
    int vpred;   /* ddpm noise: the v target (inputs as eps, x0 -> v, fp32); sample step: v
                    prediction */
    float guide; /* sample step: > 0, classifier-free guidance with that scale (pred twice) */
    int zsnr;    /* ddpm noise, sample step: the betas rescaled to zero terminal SNR */
    float grescale; /* sample step, guided: the guidance rescale phi */
    float perturb;  /* noise: > 0, input perturbation with that scale (after any offset f) */
    int dpm;        /* sample step: DPM-Solver++(2M)'s table over the K steps (x0 history read) */
    int fused;      /* conv, conv weight gradient: the input x is the virtual normalised output of a
                       norm_act node (1; act: its activation) or of a norm_act_temb node (2, with
                       dropout p = f) on [N,H,W,C+C2] values, G groups (planner/fuse.c) */
} bo_args;

typedef int (*bo_builder)(bo_case *c, const bo_args *a, sg_dtype dt);

static float bo_round(float v, sg_dtype dt) {
    return dt == DT_BF16 ? sg_bf16_to_f32(sg_f32_to_bf16(v)) : v;
}

/* element i of stored tensor t as the case fills it (floats only) */
static float fill_value(const bo_case *c, int t, int64_t i) {
    const fill_spec *f = &c->fill[t];
    const sg_tensor *x = &c->p.g.t[t];
    double u = sg_rng_uniform(c->seed, t, BO_PURPOSE, (uint64_t)i);
    switch (f->kind) {
    case FILL_UNIFORM:
        return bo_round((float)(f->lo + (f->hi - f->lo) * u), x->dtype);
    case FILL_CONST:
        return bo_round((float)f->lo, x->dtype);
    case FILL_DATA:
        return bo_round(f->data[i], x->dtype);
    default:
        return NAN;
    }
}

/* element i of a (possibly virtual, NHWC-concatenated) activation */
static float act_value(const bo_case *c, int t, int64_t i) {
    const sg_tensor *x = &c->p.g.t[t];
    if (!x->nparts) return fill_value(c, t, i);
    int64_t ca = c->p.g.t[x->parts[0]].shape[3], cb = c->p.g.t[x->parts[1]].shape[3];
    int64_t pix = i / (ca + cb), ch = i % (ca + cb);
    return ch < ca ? fill_value(c, x->parts[0], pix * ca + ch)
                   : fill_value(c, x->parts[1], pix * cb + ch - ca);
}

/* ---- building: tensors, nodes */

static int tensor(bo_case *c, const char *name, sg_dtype dt, sg_role role, int ndim, int64_t d0,
                  int64_t d1, int64_t d2, int64_t d3, fill_kind fk, double lo, double hi) {
    int64_t shape[4] = {d0, d1, d2, d3};
    int t = sg_tensor_new(&c->p.g, name, dt, role, ndim, shape);
    if (t < 0 || t >= BO_MAX_T) {
        c->err = 1;
        return -1;
    }
    c->fill[t] = (fill_spec){fk, lo, hi, NULL, NULL};
    return t;
}

/* an activation [N,H,W,C] of dtype dt, uniform in [lo, hi); ROLE_TEMP when it may die into an
 * in-place output, else an input */
static int act4(bo_case *c, const char *name, sg_dtype dt, int N, int H, int W, int C, float lo,
                float hi, int temp) {
    return tensor(c, name, dt, temp ? ROLE_TEMP : ROLE_INPUT, 4, N, H, W, C, FILL_UNIFORM, lo, hi);
}

/* an output created up front: poisoned, or random old values when it accumulates */
static int out_t(bo_case *c, const char *name, sg_dtype dt, sg_role role, int ndim, int64_t d0,
                 int64_t d1, int64_t d2, int64_t d3, int acc) {
    return tensor(c, name, dt, role, ndim, d0, d1, d2, d3, acc ? FILL_UNIFORM : FILL_POISON, -1, 1);
}

static int node(bo_case *c, sg_op op, const int *in, int nin, int *outs, const sg_op_args *args,
                unsigned accum) {
    if (c->err) return -1;
    int n = sg_node_add(&c->p.g, op, in, nin, outs, args, sg_ops[op].name);
    if (n < 0) {
        c->err = 1;
        return -1;
    }
    /* the bits as autodiff sets them (contrib_bits): part 1's bit only where output k is a
     * concatenation; a plain output accumulates with bit 0 alone */
    for (int k = 0; k < c->p.g.n[n].nout; k++)
        if (!c->p.g.t[c->p.g.n[n].out[k]].nparts) accum &= ~sg_accum_bit(k, 1);
    c->p.g.n[n].accum = accum;
    return n;
}

/* node n as micro-batch a->micro of BO_MICROS (a->micro 0: the plain step, left as it is) */
static int micro_node(bo_case *c, int n, const bo_args *a) {
    if (n < 0 || !a->micro) return n;
    c->p.g.micro_batches = BO_MICROS;
    c->p.g.n[n].micro = a->micro;
    return n;
}

/* the activation the op reads: plain, or (C2 > 0) the virtual concatenation of two inputs of C
 * and C2 channels made by an OP_CONCAT node, as the UNet's skip connections are */
static int act_in(bo_case *c, const char *name, sg_dtype dt, const bo_args *a, int H, int W, int C,
                  int C2, float lo, float hi) {
    if (C2 <= 0) return act4(c, name, dt, a->N, H, W, C, lo, hi, a->inplace);
    char nm[SG_NAME_MAX];
    int pa = act4(c, sg_name(nm, "%s.a", name), dt, a->N, H, W, C, lo, hi, 0);
    int pb = act4(c, sg_name(nm, "%s.b", name), dt, a->N, H, W, C2, lo, hi, 0);
    int in[2] = {pa, pb}, out[SG_MAX_OUT] = {-1, -1, -1, -1};
    if (node(c, OP_CONCAT, in, 2, out, NULL, 0) < 0) return -1;
    return out[0];
}

/* an output activation [N,H,W,C] the op writes: plain, or (C2 > 0) a virtual concatenation of
 * two stored parts (as autodiff makes the gradient of a concatenation) */
static int act_out(bo_case *c, const char *name, sg_dtype dt, int N, int H, int W, int C, int C2,
                   int acc, int acc_b) {
    if (C2 <= 0) return out_t(c, name, dt, ROLE_TEMP, 4, N, H, W, C, acc);
    char nm[SG_NAME_MAX];
    int pa = out_t(c, sg_name(nm, "%s.a", name), dt, ROLE_TEMP, 4, N, H, W, C, acc);
    int pb = out_t(c, sg_name(nm, "%s.b", name), dt, ROLE_TEMP, 4, N, H, W, C2, acc_b);
    int v = tensor(c, name, dt, ROLE_TEMP, 4, N, H, W, C + C2, FILL_POISON, 0, 0);
    if (v < 0 || pa < 0 || pb < 0) return -1;
    sg_tensor *x = &c->p.g.t[v];
    x->nparts = 2, x->parts[0] = pa, x->parts[1] = pb, x->bytes = 0;
    return v;
}

/* accum bits: output slot k (every part of it) accumulates; node() drops part 1's bit where
 * output k is a plain tensor */
static unsigned acc_bits(int k, int on) {
    return on ? sg_accum_bit(k, 0) | sg_accum_bit(k, 1) : 0u;
}
/* the second of two things that share one CUDA flag accumulates unless the case splits them */
static int acc_second(const bo_args *a, int acc) {
    return acc && !a->acc_split;
}

/* The weights a conv / linear multiplies come in its activations' dtype: the fp32 parameters,
 * or in bf16 runs their bf16 copy (a ROLE_PARAM_BF16 tensor, planner/train_step.c). */
static sg_role weight_role(sg_dtype dt) {
    return dt == DT_BF16 ? ROLE_PARAM_BF16 : ROLE_PARAM;
}

static int seed_t(bo_case *c) {
    return tensor(c, "rng_seed", DT_U64, ROLE_STATE, 1, 1, 0, 0, 0, FILL_CONST,
                  (double)(c->seed & 0xffffff), 0);
}
static int step_t(bo_case *c, int64_t step) {
    return tensor(c, "step", DT_I64, ROLE_STATE, 1, 1, 0, 0, 0, FILL_CONST, (double)step, 0);
}

static int conv_out(int h, int K, int S) {
    return (h + 2 * (K / 2) - K) / S + 1;
}
/* the top/left zero padding: K/2 (symmetric), or 0 for DDPM's SAME (sg_conv_args) */
static int conv_pad(const bo_args *a) {
    return a->same ? 0 : a->K / 2;
}

/* ---- builders: one per op. Each makes its inputs, its node (accumulate bits, concatenated or
 * in-place operands where asked), and returns SG_OK. */

static int b_gather(bo_case *c, const bo_args *a, sg_dtype dt) {
    (void)dt; /* H: image side; W: the dataset's side (centred, padded with -1) */
    int in[3] = {
        tensor(c, "dataset", DT_U8, ROLE_INPUT, 4, a->ndata, a->W, a->W, a->C, FILL_BYTES, 0, 0),
        seed_t(c), step_t(c, a->step)};
    int out[SG_MAX_OUT] = {-1, -1, -1, -1};
    /* one process: the global batch is this node's N, or its micro-batches' */
    const int batch = a->micro ? BO_MICROS * a->N : a->N;
    sg_op_args args = {.gather = {.N = a->N, .img = a->H, .flip = a->flip, .batch = batch}};
    return micro_node(c, node(c, OP_GATHER_BATCH, in, 3, out, &args, 0), a) < 0;
}

static int b_gather_labels(bo_case *c, const bo_args *a, sg_dtype dt) {
    (void)dt; /* ndata labels in [0, K); the node drops each to K with probability f */
    int in[3] = {
        tensor(c, "labels", DT_I32, ROLE_INPUT, 1, a->ndata, 0, 0, 0, FILL_INT, 0, a->K - 1),
        seed_t(c), step_t(c, a->step)};
    int out[SG_MAX_OUT] = {-1, -1, -1, -1};
    const int batch = a->micro ? BO_MICROS * a->N : a->N;
    sg_op_args args = {.labels = {.N = a->N, .batch = batch, .classes = a->K, .p = a->f}};
    return micro_node(c, node(c, OP_GATHER_LABELS, in, 3, out, &args, 0), a) < 0;
}

static int b_sample_t(bo_case *c, const bo_args *a, sg_dtype dt) {
    (void)dt;
    int in[2] = {seed_t(c), step_t(c, a->step)}, out[SG_MAX_OUT] = {-1, -1, -1, -1};
    sg_op_args args = {.sample_t = {.N = a->N, .T = a->T}};
    return micro_node(c, node(c, OP_SAMPLE_T, in, 2, out, &args, 0), a) < 0;
}

static int b_noise(bo_case *c, const bo_args *a, sg_dtype dt) {
    (void)dt; /* x0 gives the shape; the step's x0 is fp32 */
    int in[3] = {act4(c, "x0", DT_F32, a->N, a->H, a->W, a->C, -1, 1, 0), seed_t(c),
                 step_t(c, a->step)};
    int out[SG_MAX_OUT] = {-1, -1, -1, -1};
    /* f > 0: offset noise; perturb > 0: input perturbation */
    sg_op_args args = {.noise = {.C = a->C, .offset = a->f, .perturb = a->perturb}};
    const int plain = !(a->f > 0) && !(a->perturb > 0);
    return micro_node(c, node(c, OP_NOISE, in, 3, out, plain ? NULL : &args, 0), a) < 0;
}

static int raw_t(bo_case *c, const char *name, sg_dtype dt, sg_role role, int ndim, int64_t d0,
                 int64_t d1, const void *src, size_t bytes);

static int b_ddpm_noise(bo_case *c, const bo_args *a, sg_dtype dt) {
    /* x0 and eps fp32 (as the step makes them); x_t in the activation dtype; the table of every
     * timestep's coefficients as the executor writes it (the CPU recomputes them, the CUDA
     * kernel reads them) */
    sg_ddpm_row *rows = malloc(sizeof(sg_ddpm_row) * (size_t)a->T);
    if (!rows) return SG_ERR;
    const sg_betas betas = {.T = a->T,
                            .schedule = a->cosine ? SG_BETA_COSINE : SG_BETA_LINEAR,
                            .beta1 = 1e-4f,
                            .betaT = 0.02f,
                            .zero_snr = a->zsnr};
    cpu_ddpm_table(rows, &betas);
    if (a->vpred) /* the v target's rows, as the executor writes them */
        for (int k = 0; k < a->T; k++) rows[k].sqrt_1m_abar = -rows[k].sqrt_1m_abar;
    int in[4] = {act4(c, "x0", DT_F32, a->N, a->H, a->W, a->C, -1, 1, 0),
                 act4(c, "eps", DT_F32, a->N, a->H, a->W, a->C, -3, 3, 0),
                 tensor(c, "t", DT_I32, ROLE_INPUT, 1, a->N, 0, 0, 0, FILL_INT, 0, a->T - 1),
                 raw_t(c, "ddpm_table", DT_U8, ROLE_INPUT, 2, a->T, SG_DDPM_ROW_BYTES, rows,
                       sizeof(sg_ddpm_row) * (size_t)a->T)};
    free(rows);
    int out[SG_MAX_OUT] = {-1, -1, -1, -1};
    sg_op_args args = {.ddpm = {.T = a->T,
                                .schedule = betas.schedule,
                                .beta1 = 1e-4f,
                                .betaT = 0.02f,
                                .out_dt = a->vpred ? DT_F32 : dt,
                                .v_target = a->vpred,
                                .zero_snr = a->zsnr}};
    return node(c, OP_DDPM_NOISE, in, 4, out, &args, 0) < 0;
}

static int b_temb(bo_case *c, const bo_args *a, sg_dtype dt) {
    int in[1] = {tensor(c, "t", DT_I32, ROLE_INPUT, 1, a->N, 0, 0, 0, FILL_INT, 0, a->T - 1)};
    int out[SG_MAX_OUT] = {-1, -1, -1, -1};
    sg_op_args args = {.temb = {.dim = a->Co, .out_dt = dt}};
    return node(c, OP_TIMESTEP_EMB, in, 1, out, &args, 0) < 0;
}

/* the class embedding: labels in [0, K) of N samples pick rows of a [K, Co] table */
static int b_class_emb(bo_case *c, const bo_args *a, sg_dtype dt) {
    int in[2] = {tensor(c, "labels", DT_I32, ROLE_INPUT, 1, a->N, 0, 0, 0, FILL_INT, 0, a->K - 1),
                 tensor(c, "table", DT_F32, ROLE_PARAM, 2, a->K, a->Co, 0, 0, FILL_UNIFORM, -2, 2)};
    int out[SG_MAX_OUT] = {-1, -1, -1, -1};
    sg_op_args args = {.cemb = {.rows = a->K, .out_dt = dt}};
    return node(c, OP_CLASS_EMB, in, 2, out, &args, 0) < 0;
}
static int b_class_emb_bwd(bo_case *c, const bo_args *a, sg_dtype dt) {
    int in[2] = {tensor(c, "de", dt, ROLE_INPUT, 2, a->N, a->Co, 0, 0, FILL_UNIFORM, -1, 1),
                 tensor(c, "labels", DT_I32, ROLE_INPUT, 1, a->N, 0, 0, 0, FILL_INT, 0, a->K - 1)};
    int out[SG_MAX_OUT] = {out_t(c, "dtable", DT_F32, ROLE_GRAD, 2, a->K, a->Co, 0, 0, a->acc), -1,
                           -1, -1};
    sg_op_args args = {.cemb = {.rows = a->K, .out_dt = dt}};
    return node(c, OP_CLASS_EMB_BWD, in, 2, out, &args, acc_bits(0, a->acc)) < 0;
}

static int b_linear(bo_case *c, const bo_args *a, sg_dtype dt) {
    /* x [N, C] -> y [N, Co]; weights fp32 parameters */
    float bound = 1.0f / sqrtf((float)a->C);
    int in[3] = {
        tensor(c, "x", dt, ROLE_INPUT, 2, a->N, a->C, 0, 0, FILL_UNIFORM, -1, 1),
        tensor(c, "w", dt, weight_role(dt), 2, a->Co, a->C, 0, 0, FILL_UNIFORM, -bound, bound),
        tensor(c, "b", DT_F32, ROLE_PARAM, 1, a->Co, 0, 0, 0, FILL_UNIFORM, -bound, bound)};
    int out[SG_MAX_OUT] = {-1, -1, -1, -1};
    return node(c, OP_LINEAR, in, 3, out, NULL, 0) < 0;
}

/* A conv's input x: plain or a concatenation (act_in), or (a->fused) the virtual normalised
 * output y of a norm_act / norm_act_temb node on such an x, which then runs its statistics
 * pass alone: the fused plan (planner/fuse.c), made by hand here because the fusion pass sees
 * forward readers only. */
static int conv_x(bo_case *c, const bo_args *a, sg_dtype dt) {
    if (!a->fused) return act_in(c, "x", dt, a, a->H, a->W, a->C, a->C2, -1, 1);
    const int C = a->C + a->C2, temb = a->fused == 2;
    int in[SG_MAX_IN], n = 0;
    in[n++] = act_in(c, "x", dt, a, a->H, a->W, a->C, a->C2, -2, 3);
    if (temb) in[n++] = tensor(c, "v", dt, ROLE_INPUT, 2, a->N, C, 0, 0, FILL_UNIFORM, -1, 1);
    in[n++] = tensor(c, "gamma", DT_F32, ROLE_PARAM, 1, C, 0, 0, 0, FILL_UNIFORM, 0.5, 1.5);
    in[n++] = tensor(c, "beta", DT_F32, ROLE_PARAM, 1, C, 0, 0, 0, FILL_UNIFORM, -0.5, 0.5);
    if (temb) in[n++] = seed_t(c), in[n++] = step_t(c, a->step);
    int out[SG_MAX_OUT] = {-1, -1, -1, -1};
    sg_op_args args = {
        .gn = {.groups = a->G, .eps = 1e-6f, .act = a->act, .p = temb ? a->f : 0, .purpose = 3}};
    const int nd = node(c, temb ? OP_NORM_ACT_TEMB : OP_NORM_ACT, in, n, out, &args, 0);
    if (nd < 0) return -1;
    sg_tensor *y = &c->p.g.t[out[0]];
    y->vnorm = nd, y->bytes = 0;
    return out[0];
}

static int b_conv(bo_case *c, const bo_args *a, sg_dtype dt) {
    int Ci = a->C + a->C2;
    float bound = 1.0f / sqrtf((float)(Ci * a->K * a->K));
    int in[3] = {
        conv_x(c, a, dt),
        tensor(c, "w", dt, weight_role(dt), 4, a->Co, a->K, a->K, Ci, FILL_UNIFORM, -bound, bound),
        tensor(c, "b", DT_F32, ROLE_PARAM, 1, a->Co, 0, 0, 0, FILL_UNIFORM, -bound, bound)};
    int out[SG_MAX_OUT] = {-1, -1, -1, -1};
    sg_op_args args = {.conv = {.K = a->K, .S = a->S, .pad = conv_pad(a), .out_dt = dt}};
    return node(c, OP_CONV2D, in, 3, out, &args, 0) < 0;
}

/* conv2d_add: b_conv's operands and the residual r [N,Ho,Wo,Co] */
static int b_conv_add(bo_case *c, const bo_args *a, sg_dtype dt) {
    int Ci = a->C + a->C2, Ho = conv_out(a->H, a->K, a->S), Wo = conv_out(a->W, a->K, a->S);
    float bound = 1.0f / sqrtf((float)(Ci * a->K * a->K));
    int in[4] = {
        conv_x(c, a, dt),
        tensor(c, "w", dt, weight_role(dt), 4, a->Co, a->K, a->K, Ci, FILL_UNIFORM, -bound, bound),
        tensor(c, "b", DT_F32, ROLE_PARAM, 1, a->Co, 0, 0, 0, FILL_UNIFORM, -bound, bound),
        act4(c, "r", dt, a->N, Ho, Wo, a->Co, -2, 2, 0)};
    int out[SG_MAX_OUT] = {-1, -1, -1, -1};
    sg_op_args args = {.conv = {.K = a->K, .S = a->S, .pad = conv_pad(a), .out_dt = dt}};
    return node(c, OP_CONV2D_ADD, in, 4, out, &args, 0) < 0;
}

static int b_group_norm(bo_case *c, const bo_args *a, sg_dtype dt) {
    int C = a->C + a->C2;
    int in[3] = {act_in(c, "x", dt, a, a->H, a->W, a->C, a->C2, -2, 3),
                 tensor(c, "gamma", DT_F32, ROLE_PARAM, 1, C, 0, 0, 0, FILL_UNIFORM, 0.5, 1.5),
                 tensor(c, "beta", DT_F32, ROLE_PARAM, 1, C, 0, 0, 0, FILL_UNIFORM, -0.5, 0.5)};
    int out[SG_MAX_OUT] = {-1, -1, -1, -1};
    sg_op_args args = {.gn = {.groups = a->G, .eps = 1e-6f}};
    return node(c, OP_GROUP_NORM, in, 3, out, &args, 0) < 0;
}

static int b_silu(bo_case *c, const bo_args *a, sg_dtype dt) {
    /* acc: a forward op asked to accumulate, which only the CPU backend does */
    int in[1] = {act4(c, "x", dt, a->N, a->H, a->W, a->C, -4, 4, a->inplace)};
    int out[SG_MAX_OUT] = {a->acc ? act_out(c, "y", dt, a->N, a->H, a->W, a->C, 0, 1, 1) : -1};
    return node(c, OP_SILU, in, 1, out, NULL, acc_bits(0, a->acc)) < 0;
}

static int b_add(bo_case *c, const bo_args *a, sg_dtype dt) {
    int in[2] = {act4(c, "a", dt, a->N, a->H, a->W, a->C, -1, 1, a->inplace),
                 act4(c, "b", dt, a->N, a->H, a->W, a->C, -1, 1, 0)};
    int out[SG_MAX_OUT] = {-1, -1, -1, -1};
    return node(c, OP_ADD, in, 2, out, NULL, 0) < 0;
}

static int b_add_nc(bo_case *c, const bo_args *a, sg_dtype dt) {
    int in[2] = {act4(c, "x", dt, a->N, a->H, a->W, a->C, -1, 1, a->inplace),
                 tensor(c, "v", dt, ROLE_INPUT, 2, a->N, a->C, 0, 0, FILL_UNIFORM, -1, 1)};
    int out[SG_MAX_OUT] = {-1, -1, -1, -1};
    return node(c, OP_ADD_NC, in, 2, out, NULL, 0) < 0;
}

static int b_upsample_op(bo_case *c, const bo_args *a, sg_dtype dt, sg_op op) {
    int in[1] = {act4(c, "x", dt, a->N, a->H, a->W, a->C, -1, 1, 0)};
    int out[SG_MAX_OUT] = {-1, -1, -1, -1};
    return node(c, op, in, 1, out, NULL, 0) < 0;
}
static int b_upsample(bo_case *c, const bo_args *a, sg_dtype dt) {
    return b_upsample_op(c, a, dt, OP_UPSAMPLE2X);
}
/* the backward pass's recomputation of an upsample: the same values */
static int b_upsample_apply(bo_case *c, const bo_args *a, sg_dtype dt) {
    return b_upsample_op(c, a, dt, OP_UPSAMPLE2X_APPLY);
}

static int b_avgpool(bo_case *c, const bo_args *a, sg_dtype dt) {
    int in[1] = {act4(c, "x", dt, a->N, a->H, a->W, a->C, -1, 1, 0)};
    int out[SG_MAX_OUT] = {-1, -1, -1, -1};
    return node(c, OP_AVGPOOL2X, in, 1, out, NULL, 0) < 0;
}

static int b_attention_op(bo_case *c, const bo_args *a, sg_dtype dt, sg_op op) {
    /* qkv [N,H,W,3C], `heads` heads of C/heads channels */
    int in[1] = {act4(c, "qkv", dt, a->N, a->H, a->W, 3 * a->C, -2, 2, 0)};
    int out[SG_MAX_OUT] = {-1, -1, -1, -1};
    sg_op_args args = {.attn = {.heads = a->heads}};
    return node(c, op, in, 1, out, &args, 0) < 0;
}
static int b_attention(bo_case *c, const bo_args *a, sg_dtype dt) {
    return b_attention_op(c, a, dt, OP_ATTENTION);
}
/* the backward pass's recomputation of P: the forward's P alone */
static int b_attention_p(bo_case *c, const bo_args *a, sg_dtype dt) {
    return b_attention_op(c, a, dt, OP_ATTENTION_P);
}

static int b_dropout(bo_case *c, const bo_args *a, sg_dtype dt) {
    int in[3] = {act4(c, "x", dt, a->N, a->H, a->W, a->C, -1, 1, a->inplace), seed_t(c),
                 step_t(c, a->step)};
    int out[SG_MAX_OUT] = {-1, -1, -1, -1};
    sg_op_args args = {.dropout = {.purpose = a->K, .p = a->f}}; /* K: the dropout purpose */
    return micro_node(c, node(c, OP_DROPOUT, in, 3, out, &args, 0), a) < 0;
}

/* pred in dt; target in dt, or fp32 (the step's eps) when mixed. T > 0: weighted (mse_w), the
 * samples' timesteps and the min-SNR table (gamma 5) of T linear or cosine betas for an eps or a v
 * model (vpred), as the executor writes it. Returns the input count. */
static int mse_inputs(bo_case *c, const bo_args *a, sg_dtype dt, int *in) {
    in[0] = act4(c, "pred", dt, a->N, a->H, a->W, a->C, -2, 2, 0);
    in[1] = act4(c, "target", a->mixed ? DT_F32 : dt, a->N, a->H, a->W, a->C, -2, 2, 0);
    if (!a->T) return 2;
    float *w = malloc(sizeof(float) * (size_t)a->T);
    if (!w) return -1;
    const sg_betas betas = {.T = a->T,
                            .schedule = a->cosine ? SG_BETA_COSINE : SG_BETA_LINEAR,
                            .beta1 = 1e-4f,
                            .betaT = 0.02f};
    cpu_loss_weight_table(w, &betas, 5.0, a->vpred);
    in[2] = tensor(c, "t", DT_I32, ROLE_INPUT, 1, a->N, 0, 0, 0, FILL_INT, 0, a->T - 1);
    in[3] =
        raw_t(c, "loss_weight", DT_F32, ROLE_INPUT, 1, a->T, 0, w, sizeof(float) * (size_t)a->T);
    free(w);
    return 4;
}

static int b_mse(bo_case *c, const bo_args *a, sg_dtype dt) {
    /* acc: the loss as one of BO_MICROS micro-batches' share of their mean, added to the loss
     * there (accumulation) */
    int in[4], nin = mse_inputs(c, a, dt, in);
    int out[SG_MAX_OUT] = {a->acc ? out_t(c, "loss", DT_F32, ROLE_STATE, 1, 1, 0, 0, 0, 1) : -1};
    sg_op_args args = {
        .mse = {.loss_scale = a->f > 0 ? a->f : 1.0f, .micro_batches = a->acc ? BO_MICROS : 1}};
    if (nin < 0) return SG_ERR;
    return node(c, nin == 4 ? OP_MSE_W : OP_MSE, in, nin, out, &args, acc_bits(0, a->acc)) < 0;
}

static int b_mse_bwd(bo_case *c, const bo_args *a, sg_dtype dt) {
    int in[4], nin = mse_inputs(c, a, dt, in);
    int out[SG_MAX_OUT] = {act_out(c, "dpred", dt, a->N, a->H, a->W, a->C, 0, a->acc, a->acc)};
    sg_op_args args = {.mse = {.loss_scale = a->f > 0 ? a->f : 1.0f, .micro_batches = 1}};
    if (nin < 0) return SG_ERR;
    return node(c, nin == 4 ? OP_MSE_W_BWD : OP_MSE_BWD, in, nin, out, &args, acc_bits(0, a->acc)) <
           0;
}

static int b_linear_bwd_data(bo_case *c, const bo_args *a, sg_dtype dt) {
    /* dy [N, Co], w [Co, C] -> dx [N, C] */
    float bound = 1.0f / sqrtf((float)a->C);
    int in[2] = {
        tensor(c, "dy", dt, ROLE_INPUT, 2, a->N, a->Co, 0, 0, FILL_UNIFORM, -1, 1),
        tensor(c, "w", dt, weight_role(dt), 2, a->Co, a->C, 0, 0, FILL_UNIFORM, -bound, bound)};
    int out[SG_MAX_OUT] = {out_t(c, "dx", dt, ROLE_TEMP, 2, a->N, a->C, 0, 0, a->acc)};
    return node(c, OP_LINEAR_BWD_DATA, in, 2, out, NULL, acc_bits(0, a->acc)) < 0;
}

static int b_linear_bwd_weight(bo_case *c, const bo_args *a, sg_dtype dt) {
    /* dy [N, Co], x [N, C] -> dw [Co, C], db [Co] (fp32 gradients; one accumulate flag) */
    int in[2] = {tensor(c, "dy", dt, ROLE_INPUT, 2, a->N, a->Co, 0, 0, FILL_UNIFORM, -1, 1),
                 tensor(c, "x", dt, ROLE_INPUT, 2, a->N, a->C, 0, 0, FILL_UNIFORM, -1, 1)};
    int out[SG_MAX_OUT] = {
        out_t(c, "dw", DT_F32, ROLE_GRAD, 2, a->Co, a->C, 0, 0, a->acc),
        out_t(c, "db", DT_F32, ROLE_GRAD, 1, a->Co, 0, 0, 0, acc_second(a, a->acc))};
    return node(c, OP_LINEAR_BWD_WEIGHT, in, 2, out, NULL,
                acc_bits(0, a->acc) | acc_bits(1, acc_second(a, a->acc))) < 0;
}

static int b_conv_bwd_data(bo_case *c, const bo_args *a, sg_dtype dt) {
    /* dy [N,Ho,Wo,Co], w [Co,K,K,C+C2] -> dx [N,H,W,C+C2], a concatenation when C2 > 0 */
    int Ci = a->C + a->C2, Ho = conv_out(a->H, a->K, a->S), Wo = conv_out(a->W, a->K, a->S);
    float bound = 1.0f / sqrtf((float)(Ci * a->K * a->K));
    int in[2] = {
        act4(c, "dy", dt, a->N, Ho, Wo, a->Co, -1, 1, 0),
        tensor(c, "w", dt, weight_role(dt), 4, a->Co, a->K, a->K, Ci, FILL_UNIFORM, -bound, bound)};
    int acc_b = acc_second(a, a->acc);
    int out[SG_MAX_OUT] = {act_out(c, "dx", dt, a->N, a->H, a->W, a->C, a->C2, a->acc, acc_b)};
    sg_op_args args = {
        .conv = {.K = a->K, .S = a->S, .pad = conv_pad(a), .out_dt = dt, .H = a->H, .W = a->W}};
    unsigned acc = (a->acc ? sg_accum_bit(0, 0) : 0u) | (acc_b ? sg_accum_bit(0, 1) : 0u);
    return node(c, OP_CONV2D_BWD_DATA, in, 2, out, &args, acc) < 0;
}

static int b_conv_bwd_weight(bo_case *c, const bo_args *a, sg_dtype dt) {
    /* dy [N,Ho,Wo,Co], x [N,H,W,C+C2] (a concatenation when C2 > 0) -> dw, db (fp32) */
    int Ci = a->C + a->C2, Ho = conv_out(a->H, a->K, a->S), Wo = conv_out(a->W, a->K, a->S);
    int dy = act4(c, "dy", dt, a->N, Ho, Wo, a->Co, -1, 1, 0);
    int in[2] = {dy, conv_x(c, a, dt)};
    int out[SG_MAX_OUT] = {
        out_t(c, "dw", DT_F32, ROLE_GRAD, 4, a->Co, a->K, a->K, Ci, a->acc),
        out_t(c, "db", DT_F32, ROLE_GRAD, 1, a->Co, 0, 0, 0, acc_second(a, a->acc))};
    sg_op_args args = {.conv = {.K = a->K, .S = a->S, .pad = conv_pad(a), .out_dt = dt}};
    return node(c, OP_CONV2D_BWD_WEIGHT, in, 2, out, &args,
                acc_bits(0, a->acc) | acc_bits(1, acc_second(a, a->acc))) < 0;
}

/* upconv2d: x [N,H,W,C] (low-res), w [Co,3,3,C] fp32 (the master weights in every dtype: the
 * launchers fold them), b -> y [N,2H,2W,Co]; and its two backward passes */
static int upconv_w(bo_case *c, const bo_args *a) {
    float bound = 1.0f / sqrtf((float)(a->C * 9));
    return tensor(c, "w", DT_F32, ROLE_PARAM, 4, a->Co, 3, 3, a->C, FILL_UNIFORM, -bound, bound);
}
static int b_upconv(bo_case *c, const bo_args *a, sg_dtype dt) {
    int in[3] = {act4(c, "x", dt, a->N, a->H, a->W, a->C, -1, 1, 0), upconv_w(c, a),
                 tensor(c, "b", DT_F32, ROLE_PARAM, 1, a->Co, 0, 0, 0, FILL_UNIFORM, -0.5, 0.5)};
    int out[SG_MAX_OUT] = {-1, -1, -1, -1};
    sg_op_args args = {.conv = {.K = 3, .S = 1, .pad = 1, .out_dt = dt}};
    return node(c, OP_UPCONV2D, in, 3, out, &args, 0) < 0;
}
static int b_upconv_bwd_data(bo_case *c, const bo_args *a, sg_dtype dt) {
    int in[2] = {act4(c, "dy", dt, a->N, 2 * a->H, 2 * a->W, a->Co, -1, 1, 0), upconv_w(c, a)};
    int out[SG_MAX_OUT] = {out_t(c, "dx", dt, ROLE_TEMP, 4, a->N, a->H, a->W, a->C, a->acc)};
    sg_op_args args = {.conv = {.K = 3, .S = 1, .pad = 1, .out_dt = dt, .H = a->H, .W = a->W}};
    return node(c, OP_UPCONV2D_BWD_DATA, in, 2, out, &args, acc_bits(0, a->acc)) < 0;
}
static int b_upconv_bwd_weight(bo_case *c, const bo_args *a, sg_dtype dt) {
    int in[2] = {act4(c, "dy", dt, a->N, 2 * a->H, 2 * a->W, a->Co, -1, 1, 0),
                 act4(c, "x", dt, a->N, a->H, a->W, a->C, -1, 1, 0)};
    int out[SG_MAX_OUT] = {
        out_t(c, "dw", DT_F32, ROLE_GRAD, 4, a->Co, 3, 3, a->C, a->acc),
        out_t(c, "db", DT_F32, ROLE_GRAD, 1, a->Co, 0, 0, 0, acc_second(a, a->acc))};
    sg_op_args args = {.conv = {.K = 3, .S = 1, .pad = 1, .out_dt = dt}};
    return node(c, OP_UPCONV2D_BWD_WEIGHT, in, 2, out, &args,
                acc_bits(0, a->acc) | acc_bits(1, acc_second(a, a->acc))) < 0;
}

/* mean and rstd [N, G] of activation x (as the forward saved them), from the case's values */
static void gn_stats(bo_case *c, int x, int mean, int rstd, int N, int HW, int C, int G,
                     double eps) {
    float *m = malloc(sizeof(float) * (size_t)(N * G)),
          *r = malloc(sizeof(float) * (size_t)(N * G));
    int cg = C / G;
    for (int n = 0; n < N; n++)
        for (int g = 0; g < G; g++) {
            double s = 0, s2 = 0;
            for (int p = 0; p < HW; p++)
                for (int k = 0; k < cg; k++) {
                    double v = act_value(c, x, ((int64_t)n * HW + p) * C + g * cg + k);
                    s += v, s2 += v * v;
                }
            double cnt = (double)HW * cg, mu = s / cnt, var = s2 / cnt - mu * mu;
            m[n * G + g] = (float)mu;
            r[n * G + g] = (float)(1.0 / sqrt(var > 0 ? var + eps : eps));
        }
    c->fill[mean] = (fill_spec){FILL_DATA, 0, 0, m, NULL};
    c->fill[rstd] = (fill_spec){FILL_DATA, 0, 0, r, NULL};
}

static int b_group_norm_bwd(bo_case *c, const bo_args *a, sg_dtype dt) {
    /* dy, x (a concatenation when C2 > 0), mean, rstd, gamma -> dx (likewise), dgamma, dbeta */
    int C = a->C + a->C2;
    int dy = act4(c, "dy", dt, a->N, a->H, a->W, C, -1, 1, 0);
    int x = act_in(c, "x", dt, a, a->H, a->W, a->C, a->C2, -2, 3);
    int mean = tensor(c, "mean", DT_F32, ROLE_INPUT, 2, a->N, a->G, 0, 0, FILL_DATA, 0, 0);
    int rstd = tensor(c, "rstd", DT_F32, ROLE_INPUT, 2, a->N, a->G, 0, 0, FILL_DATA, 0, 0);
    int gamma = tensor(c, "gamma", DT_F32, ROLE_PARAM, 1, C, 0, 0, 0, FILL_UNIFORM, 0.5, 1.5);
    if (c->err) return SG_ERR;
    gn_stats(c, x, mean, rstd, a->N, a->H * a->W, C, a->G, 1e-6);
    int in[5] = {dy, x, mean, rstd, gamma};
    int out[SG_MAX_OUT] = {
        act_out(c, "dx", dt, a->N, a->H, a->W, a->C, a->C2, a->acc, a->acc),
        out_t(c, "dgamma", DT_F32, ROLE_GRAD, 1, C, 0, 0, 0, a->acc_param),
        out_t(c, "dbeta", DT_F32, ROLE_GRAD, 1, C, 0, 0, 0, acc_second(a, a->acc_param))};
    sg_op_args args = {.gn = {.groups = a->G, .eps = 1e-6f}};
    unsigned acc =
        acc_bits(0, a->acc) | acc_bits(1, a->acc_param) | acc_bits(2, acc_second(a, a->acc_param));
    return node(c, OP_GROUP_NORM_BWD, in, 5, out, &args, acc) < 0;
}

/* mean and rstd [N, G] of x + v (v [N, C] or -1) as a norm_act forward saved them */
static void na_stats(bo_case *c, int x, int v, int mean, int rstd, int N, int HW, int C, int G) {
    float *m = malloc(sizeof(float) * (size_t)(N * G)),
          *r = malloc(sizeof(float) * (size_t)(N * G));
    int cg = C / G;
    for (int n = 0; n < N; n++)
        for (int g = 0; g < G; g++) {
            double s = 0, s2 = 0;
            for (int p = 0; p < HW; p++)
                for (int k = 0; k < cg; k++) {
                    int ch = g * cg + k;
                    double u = act_value(c, x, ((int64_t)n * HW + p) * C + ch) +
                               (v >= 0 ? fill_value(c, v, (int64_t)n * C + ch) : 0.0);
                    s += u, s2 += u * u;
                }
            double cnt = (double)HW * cg, mu = s / cnt, var = s2 / cnt - mu * mu;
            m[n * G + g] = (float)mu;
            r[n * G + g] = (float)(1.0 / sqrt(var > 0 ? var + 1e-6 : 1e-6));
        }
    c->fill[mean] = (fill_spec){FILL_DATA, 0, 0, m, NULL};
    c->fill[rstd] = (fill_spec){FILL_DATA, 0, 0, r, NULL};
}

/* The norm_act family's operands (op_dims.h's order): x (a concatenation when C2 > 0), [v,]
 * gamma, beta, [seed, step,] then for the apply and backward ops mean and rstd computed here
 * from x (+ v), and for the backward ops dy first. */
static int b_norm_family(bo_case *c, const bo_args *a, sg_dtype dt, sg_op op) {
    const int temb =
        op == OP_NORM_ACT_TEMB || op == OP_NORM_ACT_TEMB_APPLY || op == OP_NORM_ACT_TEMB_BWD;
    const int bwd = op == OP_NORM_ACT_BWD || op == OP_NORM_ACT_TEMB_BWD;
    const int stats = bwd || op == OP_NORM_ACT_APPLY || op == OP_NORM_ACT_TEMB_APPLY;
    const int C = a->C + a->C2;
    int in[SG_MAX_IN], n = 0;
    if (bwd) in[n++] = act4(c, "dy", dt, a->N, a->H, a->W, C, -1, 1, 0);
    int x = act_in(c, "x", dt, a, a->H, a->W, a->C, a->C2, -2, 3), v = -1;
    in[n++] = x;
    if (temb) in[n++] = v = tensor(c, "v", dt, ROLE_INPUT, 2, a->N, C, 0, 0, FILL_UNIFORM, -1, 1);
    in[n++] = tensor(c, "gamma", DT_F32, ROLE_PARAM, 1, C, 0, 0, 0, FILL_UNIFORM, 0.5, 1.5);
    in[n++] = tensor(c, "beta", DT_F32, ROLE_PARAM, 1, C, 0, 0, 0, FILL_UNIFORM, -0.5, 0.5);
    if (temb) in[n++] = seed_t(c), in[n++] = step_t(c, a->step);
    if (stats) {
        int mean = tensor(c, "mean", DT_F32, ROLE_INPUT, 2, a->N, a->G, 0, 0, FILL_DATA, 0, 0);
        int rstd = tensor(c, "rstd", DT_F32, ROLE_INPUT, 2, a->N, a->G, 0, 0, FILL_DATA, 0, 0);
        if (c->err) return SG_ERR;
        na_stats(c, x, v, mean, rstd, a->N, a->H * a->W, C, a->G);
        in[n++] = mean, in[n++] = rstd;
    }
    int out[SG_MAX_OUT] = {-1, -1, -1, -1}, k = 0;
    unsigned acc = 0;
    if (bwd) {
        out[k] = act_out(c, "dx", dt, a->N, a->H, a->W, a->C, a->C2, a->acc, a->acc);
        acc |= acc_bits(k++, a->acc);
        if (temb) {
            out[k] = out_t(c, "dv", dt, ROLE_TEMP, 2, a->N, C, 0, 0, a->acc);
            acc |= acc_bits(k++, a->acc);
        }
        out[k] = out_t(c, "dgamma", DT_F32, ROLE_GRAD, 1, C, 0, 0, 0, a->acc_param);
        acc |= acc_bits(k++, a->acc_param);
        out[k] = out_t(c, "dbeta", DT_F32, ROLE_GRAD, 1, C, 0, 0, 0, acc_second(a, a->acc_param));
        acc |= acc_bits(k++, acc_second(a, a->acc_param));
    }
    /* K: the dropout purpose, f: its p (norm_act_temb only) */
    sg_op_args args = {
        .gn = {.groups = a->G, .eps = 1e-6f, .act = a->act, .p = temb ? a->f : 0, .purpose = a->K}};
    return node(c, op, in, n, out, &args, acc) < 0;
}
static int b_norm_act(bo_case *c, const bo_args *a, sg_dtype dt) {
    return b_norm_family(c, a, dt, OP_NORM_ACT);
}
static int b_norm_act_temb(bo_case *c, const bo_args *a, sg_dtype dt) {
    return b_norm_family(c, a, dt, OP_NORM_ACT_TEMB);
}
static int b_norm_act_apply(bo_case *c, const bo_args *a, sg_dtype dt) {
    return b_norm_family(c, a, dt, OP_NORM_ACT_APPLY);
}
static int b_norm_act_temb_apply(bo_case *c, const bo_args *a, sg_dtype dt) {
    return b_norm_family(c, a, dt, OP_NORM_ACT_TEMB_APPLY);
}
/* conv2d_sc: conv2 (3x3, stride 1) on h [N,H,W,Co] (fused as conv_x's with C = Co), and the
 * 1x1 shortcut on x [N,H,W,C+C2] (plain or concatenated) to Co channels */
static int b_conv_sc(bo_case *c, const bo_args *a, sg_dtype dt) {
    const int Cin = a->C + a->C2;
    bo_args ah = *a;
    ah.C = a->Co, ah.C2 = 0;
    const float bound = 1.0f / sqrtf((float)(a->Co * 9)), bs = 1.0f / sqrtf((float)Cin);
    int in[6] = {
        conv_x(c, &ah, dt),
        tensor(c, "w", dt, weight_role(dt), 4, a->Co, 3, 3, a->Co, FILL_UNIFORM, -bound, bound),
        tensor(c, "b", DT_F32, ROLE_PARAM, 1, a->Co, 0, 0, 0, FILL_UNIFORM, -bound, bound),
        act_in(c, "xs", dt, a, a->H, a->W, a->C, a->C2, -1, 1),
        tensor(c, "ws", dt, weight_role(dt), 4, a->Co, 1, 1, Cin, FILL_UNIFORM, -bs, bs),
        tensor(c, "bs", DT_F32, ROLE_PARAM, 1, a->Co, 0, 0, 0, FILL_UNIFORM, -bs, bs)};
    int out[SG_MAX_OUT] = {-1, -1, -1, -1};
    sg_op_args args = {.conv = {.K = 3, .S = 1, .pad = 1, .out_dt = dt}};
    return node(c, OP_CONV2D_SC, in, 6, out, &args, 0) < 0;
}

static int b_norm_act_bwd(bo_case *c, const bo_args *a, sg_dtype dt) {
    return b_norm_family(c, a, dt, OP_NORM_ACT_BWD);
}
static int b_norm_act_temb_bwd(bo_case *c, const bo_args *a, sg_dtype dt) {
    return b_norm_family(c, a, dt, OP_NORM_ACT_TEMB_BWD);
}

static int b_silu_bwd(bo_case *c, const bo_args *a, sg_dtype dt) {
    /* dy, x -> dx; in place: dx takes dy's memory */
    int in[2] = {act4(c, "dy", dt, a->N, a->H, a->W, a->C, -1, 1, a->inplace),
                 act4(c, "x", dt, a->N, a->H, a->W, a->C, -4, 4, 0)};
    int out[SG_MAX_OUT] = {act_out(c, "dx", dt, a->N, a->H, a->W, a->C, 0, a->acc, a->acc)};
    return node(c, OP_SILU_BWD, in, 2, out, NULL, acc_bits(0, a->acc)) < 0;
}

static int b_add_nc_bwd(bo_case *c, const bo_args *a, sg_dtype dt) {
    int in[1] = {act4(c, "dy", dt, a->N, a->H, a->W, a->C, -1, 1, 0)};
    int out[SG_MAX_OUT] = {out_t(c, "dv", dt, ROLE_TEMP, 2, a->N, a->C, 0, 0, a->acc)};
    return node(c, OP_ADD_NC_BWD, in, 1, out, NULL, acc_bits(0, a->acc)) < 0;
}

static int b_upsample_bwd(bo_case *c, const bo_args *a, sg_dtype dt) {
    /* dy [N,2H,2W,C] -> dx [N,H,W,C] */
    int in[1] = {act4(c, "dy", dt, a->N, 2 * a->H, 2 * a->W, a->C, -1, 1, 0)};
    int out[SG_MAX_OUT] = {act_out(c, "dx", dt, a->N, a->H, a->W, a->C, 0, a->acc, a->acc)};
    return node(c, OP_UPSAMPLE2X_BWD, in, 1, out, NULL, acc_bits(0, a->acc)) < 0;
}

static int b_avgpool_bwd(bo_case *c, const bo_args *a, sg_dtype dt) {
    /* dy [N,H/2,W/2,C] -> dx [N,H,W,C] */
    int in[1] = {act4(c, "dy", dt, a->N, a->H / 2, a->W / 2, a->C, -1, 1, 0)};
    int out[SG_MAX_OUT] = {act_out(c, "dx", dt, a->N, a->H, a->W, a->C, 0, a->acc, a->acc)};
    return node(c, OP_AVGPOOL2X_BWD, in, 1, out, NULL, acc_bits(0, a->acc)) < 0;
}

/* P [N,heads,L,L] = softmax(q k^T / sqrt(D)) of the case's qkv, as the forward saved it */
static void attn_probs(bo_case *c, int qkv, int P, int N, int L, int C, int heads) {
    int D = C / heads;
    float *p = malloc(sizeof(float) * (size_t)N * heads * L * L);
    double *s = malloc(sizeof(double) * (size_t)L);
    for (int n = 0; n < N; n++)
        for (int h = 0; h < heads; h++)
            for (int i = 0; i < L; i++) {
                double mx = -INFINITY, sum = 0;
                for (int j = 0; j < L; j++) {
                    double d = 0;
                    for (int k = 0; k < D; k++)
                        d += (double)fill_value(c, qkv, ((int64_t)n * L + i) * 3 * C + h * D + k) *
                             fill_value(c, qkv, ((int64_t)n * L + j) * 3 * C + C + h * D + k);
                    s[j] = d / sqrt((double)D);
                    if (s[j] > mx) mx = s[j];
                }
                for (int j = 0; j < L; j++) sum += s[j] = exp(s[j] - mx);
                for (int j = 0; j < L; j++)
                    p[(((int64_t)n * heads + h) * L + i) * L + j] = (float)(s[j] / sum);
            }
    free(s);
    c->fill[P] = (fill_spec){FILL_DATA, 0, 0, p, NULL};
}

static int b_attention_bwd(bo_case *c, const bo_args *a, sg_dtype dt) {
    /* dy [N,H,W,C], qkv [N,H,W,3C], P [N,heads,L,L] -> dqkv [N,H,W,3C] */
    int L = a->H * a->W;
    int dy = act4(c, "dy", dt, a->N, a->H, a->W, a->C, -1, 1, 0);
    int qkv = act4(c, "qkv", dt, a->N, a->H, a->W, 3 * a->C, -2, 2, 0);
    int P = tensor(c, "P", DT_F32, ROLE_INPUT, 4, a->N, a->heads, L, L, FILL_DATA, 0, 0);
    if (c->err) return SG_ERR;
    attn_probs(c, qkv, P, a->N, L, a->C, a->heads);
    int in[3] = {dy, qkv, P};
    int out[SG_MAX_OUT] = {act_out(c, "dqkv", dt, a->N, a->H, a->W, 3 * a->C, 0, a->acc, a->acc)};
    sg_op_args args = {.attn = {.heads = a->heads}};
    return node(c, OP_ATTENTION_BWD, in, 3, out, &args, acc_bits(0, a->acc)) < 0;
}

static int b_dropout_bwd(bo_case *c, const bo_args *a, sg_dtype dt) {
    int in[3] = {act4(c, "dy", dt, a->N, a->H, a->W, a->C, -1, 1, a->inplace), seed_t(c),
                 step_t(c, a->step)};
    int out[SG_MAX_OUT] = {act_out(c, "dx", dt, a->N, a->H, a->W, a->C, 0, a->acc, a->acc)};
    sg_op_args args = {.dropout = {.purpose = a->K, .p = a->f}};
    return micro_node(c, node(c, OP_DROPOUT_BWD, in, 3, out, &args, acc_bits(0, a->acc)), a) < 0;
}

static int b_accum(bo_case *c, const bo_args *a, sg_dtype dt) {
    /* y = x or y += x; mixed: a bf16 x into an fp32 y */
    sg_dtype ydt = a->mixed ? DT_F32 : dt;
    int in[1] = {act4(c, "x", dt, a->N, a->H, a->W, a->C, -1, 1, a->inplace)};
    int out[SG_MAX_OUT] = {act_out(c, "y", ydt, a->N, a->H, a->W, a->C, 0, a->acc, a->acc)};
    return node(c, OP_ACCUM, in, 1, out, NULL, acc_bits(0, a->acc)) < 0;
}

static int b_grad_sumsq(bo_case *c, const bo_args *a, sg_dtype dt) {
    (void)dt;
    int in[1] = {tensor(c, "grads", DT_F32, ROLE_GRAD, 1, a->N, 0, 0, 0, FILL_UNIFORM, -1, 1)};
    int out[SG_MAX_OUT] = {out_t(c, "grad_sumsq", DT_F32, ROLE_STATE, 1, 1, 0, 0, 0, 0)};
    return node(c, OP_GRAD_SUMSQ, in, 1, out, NULL, 0) < 0;
}

static int b_clip_scale(bo_case *c, const bo_args *a, sg_dtype dt) {
    (void)dt;
    int in[1] = {tensor(c, "grad_sumsq", DT_F32, ROLE_STATE, 1, 1, 0, 0, 0, FILL_CONST, a->v, 0)};
    int out[SG_MAX_OUT] = {out_t(c, "clip_scale", DT_F32, ROLE_STATE, 1, 1, 0, 0, 0, 0)};
    sg_op_args args = {.clip = {.max_norm = a->f}};
    return node(c, OP_CLIP_SCALE, in, 1, out, &args, 0) < 0;
}

static int b_adamw(bo_case *c, const bo_args *a, sg_dtype dt) {
    (void)dt; /* N values; in place on params, m, v; writes the lr it used */
    int p = tensor(c, "params", DT_F32, ROLE_PARAM, 1, a->N, 0, 0, 0, FILL_UNIFORM, -1, 1);
    int g = tensor(c, "grads", DT_F32, ROLE_GRAD, 1, a->N, 0, 0, 0, FILL_UNIFORM, -1, 1);
    int m = tensor(c, "adam_m", DT_F32, ROLE_ADAM_M, 1, a->N, 0, 0, 0, FILL_UNIFORM, -0.1, 0.1);
    int v = tensor(c, "adam_v", DT_F32, ROLE_ADAM_V, 1, a->N, 0, 0, 0, FILL_UNIFORM, 1e-6, 1e-2);
    int s = tensor(c, "clip_scale", DT_F32, ROLE_STATE, 1, 1, 0, 0, 0, FILL_CONST, 0.75, 0);
    int lr = out_t(c, "lr", DT_F32, ROLE_STATE, 1, 1, 0, 0, 0, 0);
    int in[6] = {p, g, m, v, s, step_t(c, a->step)}, out[SG_MAX_OUT] = {p, m, v, lr};
    sg_op_args args = {.adamw = {.warmup = a->warmup,
                                 .lr = 2e-4f,
                                 .b1 = 0.9f,
                                 .b2 = 0.999f,
                                 .eps = 1e-8f,
                                 .wd = 0.01f,
                                 .schedule = a->K,
                                 .lr_min = 0.1f,
                                 .decay_steps = 60}}; /* K: the lr schedule */
    return node(c, OP_ADAMW, in, 6, out, &args, 0) < 0;
}

/* N values; in place on params, m, v, ema; writes the lr it used and, with copy
 * (adamw_ema_bf16), the bf16 copy of the updated params. K: the lr schedule; f: the EMA decay;
 * flip: diffusers' EMA warm-up (inv_gamma 1, power 3/4) */
static int adamw_ema_case(bo_case *c, const bo_args *a, int copy) {
    int p = tensor(c, "params", DT_F32, ROLE_PARAM, 1, a->N, 0, 0, 0, FILL_UNIFORM, -1, 1);
    int g = tensor(c, "grads", DT_F32, ROLE_GRAD, 1, a->N, 0, 0, 0, FILL_UNIFORM, -1, 1);
    int m = tensor(c, "adam_m", DT_F32, ROLE_ADAM_M, 1, a->N, 0, 0, 0, FILL_UNIFORM, -0.1, 0.1);
    int v = tensor(c, "adam_v", DT_F32, ROLE_ADAM_V, 1, a->N, 0, 0, 0, FILL_UNIFORM, 1e-6, 1e-2);
    int e = tensor(c, "ema", DT_F32, ROLE_EMA, 1, a->N, 0, 0, 0, FILL_UNIFORM, -1, 1);
    int s = tensor(c, "clip_scale", DT_F32, ROLE_STATE, 1, 1, 0, 0, 0, FILL_CONST, 0.75, 0);
    int lr = out_t(c, "lr", DT_F32, ROLE_STATE, 1, 1, 0, 0, 0, 0);
    int pb = copy ? out_t(c, "params_bf16", DT_BF16, ROLE_PARAM_BF16, 1, a->N, 0, 0, 0, 0) : -1;
    int in[7] = {p, g, m, v, e, s, step_t(c, a->step)}, out[SG_MAX_OUT] = {p, m, v, e, lr, pb};
    sg_op_args args = {
        .optim = {
            .adamw = {.warmup = a->warmup,
                      .lr = 2e-4f,
                      .b1 = 0.9f,
                      .b2 = 0.999f,
                      .eps = 1e-8f,
                      .wd = 0.01f,
                      .schedule = a->K,
                      .lr_min = 0.1f,
                      .decay_steps = 60},
            .ema = {.decay = a->f, .warmup = a->flip ? 1 : 0, .inv_gamma = 1.0f, .power = 0.75f}}};
    return node(c, copy ? OP_ADAMW_EMA_BF16 : OP_ADAMW_EMA, in, 7, out, &args, 0) < 0;
}
static int b_adamw_ema(bo_case *c, const bo_args *a, sg_dtype dt) {
    (void)dt;
    return adamw_ema_case(c, a, 0);
}
static int b_adamw_ema_bf16(bo_case *c, const bo_args *a, sg_dtype dt) {
    (void)dt;
    return adamw_ema_case(c, a, 1);
}
static int b_ema(bo_case *c, const bo_args *a, sg_dtype dt) {
    /* warmup: diffusers' EMA warm-up from the step (inv_gamma 1, power 3/4), f its maximum */
    (void)dt;
    int e = tensor(c, "ema", DT_F32, ROLE_EMA, 1, a->N, 0, 0, 0, FILL_UNIFORM, -1, 1);
    int in[3] = {e, tensor(c, "params", DT_F32, ROLE_PARAM, 1, a->N, 0, 0, 0, FILL_UNIFORM, -1, 1),
                 step_t(c, a->step)};
    int out[SG_MAX_OUT] = {e};
    sg_op_args args = {
        .ema = {.decay = a->f, .warmup = a->warmup ? 1 : 0, .inv_gamma = 1.0f, .power = 0.75f}};
    return node(c, OP_EMA, in, 3, out, &args, 0) < 0;
}

static int b_step_inc(bo_case *c, const bo_args *a, sg_dtype dt) {
    (void)dt;
    int s = step_t(c, a->step);
    int in[1] = {s}, out[SG_MAX_OUT] = {s};
    return node(c, OP_STEP_INC, in, 1, out, NULL, 0) < 0;
}

static int b_silu_mul(bo_case *c, const bo_args *a, sg_dtype dt) {
    /* y = silu(a) * b; in place: y takes a's memory */
    int in[2] = {act4(c, "a", dt, a->N, a->H, a->W, a->C, -4, 4, a->inplace),
                 act4(c, "b", dt, a->N, a->H, a->W, a->C, -2, 2, 0)};
    int out[SG_MAX_OUT] = {-1, -1, -1, -1};
    return node(c, OP_SILU_MUL, in, 2, out, NULL, 0) < 0;
}

static int b_silu_mul_bwd(bo_case *c, const bo_args *a, sg_dtype dt) {
    /* dy, a, b -> da, db (each may accumulate) */
    int in[3] = {act4(c, "dy", dt, a->N, a->H, a->W, a->C, -1, 1, 0),
                 act4(c, "a", dt, a->N, a->H, a->W, a->C, -4, 4, 0),
                 act4(c, "b", dt, a->N, a->H, a->W, a->C, -2, 2, 0)};
    int out[SG_MAX_OUT] = {
        act_out(c, "da", dt, a->N, a->H, a->W, a->C, 0, a->acc, a->acc),
        act_out(c, "db", dt, a->N, a->H, a->W, a->C, 0, a->acc_param, a->acc_param)};
    return node(c, OP_SILU_MUL_BWD, in, 3, out, NULL,
                acc_bits(0, a->acc) | acc_bits(1, a->acc_param)) < 0;
}

static int b_gelu(bo_case *c, const bo_args *a, sg_dtype dt) {
    int in[1] = {act4(c, "x", dt, a->N, a->H, a->W, a->C, -4, 4, a->inplace)};
    int out[SG_MAX_OUT] = {-1, -1, -1, -1};
    return node(c, OP_GELU, in, 1, out, NULL, 0) < 0;
}

static int b_gelu_bwd(bo_case *c, const bo_args *a, sg_dtype dt) {
    /* dy, x -> dx; in place: dx takes dy's memory */
    int in[2] = {act4(c, "dy", dt, a->N, a->H, a->W, a->C, -1, 1, a->inplace),
                 act4(c, "x", dt, a->N, a->H, a->W, a->C, -4, 4, 0)};
    int out[SG_MAX_OUT] = {act_out(c, "dx", dt, a->N, a->H, a->W, a->C, 0, a->acc, a->acc)};
    return node(c, OP_GELU_BWD, in, 2, out, NULL, acc_bits(0, a->acc)) < 0;
}

static int b_loss_watch(bo_case *c, const bo_args *a, sg_dtype dt) {
    /* loss, sumsq, step, watch, loss_sum -> watch, loss_sum in place. v: the sum of squares
     * fed in (Inf: a bad step), ndata: the watch's value before (a bad step already seen) */
    (void)dt;
    int loss = tensor(c, "loss", DT_F32, ROLE_STATE, 1, 1, 0, 0, 0, FILL_UNIFORM, 0.1, 2);
    int sumsq = tensor(c, "grad_sumsq", DT_F32, ROLE_STATE, 1, 1, 0, 0, 0, FILL_CONST, a->v, 0);
    int watch = tensor(c, "nonfinite_step", DT_I64, ROLE_STATE, 1, 1, 0, 0, 0, FILL_CONST,
                       (double)a->ndata, 0);
    int sum = tensor(c, "loss_sum", DT_F32, ROLE_STATE, 1, 1, 0, 0, 0, FILL_UNIFORM, 0, 100);
    int in[5] = {loss, sumsq, step_t(c, a->step), watch, sum}, out[SG_MAX_OUT] = {watch, sum};
    return node(c, OP_LOSS_WATCH, in, 5, out, NULL, 0) < 0;
}

static int b_allreduce(bo_case *c, const bo_args *a, sg_dtype dt) {
    /* one process: the gradients unchanged, the loss times the loss factor (1/ranks) */
    (void)dt;
    int g = tensor(c, "grads", DT_F32, ROLE_GRAD, 1, a->N, 0, 0, 0, FILL_UNIFORM, -1, 1);
    int loss = tensor(c, "loss", DT_F32, ROLE_STATE, 1, 1, 0, 0, 0, FILL_UNIFORM, 0.1, 2);
    int in[2] = {g, loss}, out[SG_MAX_OUT] = {g, loss};
    sg_op_args args = {.allreduce = {.ranks = 1, .loss_factor = a->f}};
    return node(c, OP_ALLREDUCE, in, 2, out, &args, 0) < 0;
}

/* a tensor holding `bytes` raw bytes copied from src (the case frees them) */
static int raw_t(bo_case *c, const char *name, sg_dtype dt, sg_role role, int ndim, int64_t d0,
                 int64_t d1, const void *src, size_t bytes) {
    int t = tensor(c, name, dt, role, ndim, d0, d1, 0, 0, FILL_RAW, 0, 0);
    uint8_t *raw = t >= 0 ? malloc(bytes) : NULL;
    if (!raw || (size_t)c->p.g.t[t].bytes != bytes) {
        free(raw);
        c->err = 1;
        return -1;
    }
    memcpy(raw, src, bytes);
    c->fill[t].raw = raw;
    return t;
}

static int b_sample_step(bo_case *c, const bo_args *a, sg_dtype dt) {
    /* x fp32 (in place), pred and x_t in dt, the table of a run over T timesteps: DDPM (K = 0)
     * or DDIM (DPM-Solver++(2M) with dpm) with K steps, x0 clipped when flip; step: the counter
     * k (-1: the start, x_T); the x0 history fp32 (in place) from random values */
    int ts[BO_MAX_STEPS], n = a->K ? a->K : a->T;
    if (a->T > BO_MAX_STEPS || n > a->T) return SG_ERR;
    if (a->K)
        sg_ddim_timesteps(a->K, a->T, ts);
    else
        for (int k = 0; k < n; k++) ts[k] = a->T - 1 - k;
    sg_sample_row rows[BO_MAX_STEPS];
    const sg_betas betas = {.T = a->T,
                            .schedule = a->cosine ? SG_BETA_COSINE : SG_BETA_LINEAR,
                            .beta1 = 1e-4,
                            .betaT = 0.02,
                            .zero_snr = a->zsnr};
    const int sampler = a->dpm ? SG_TABLE_DPM2M : a->K ? SG_TABLE_DDIM : SG_TABLE_DDPM;
    if (sg_sample_table(rows, a->T, ts, n, sampler, a->flip, a->K ? a->f : 0.0, 0, &betas))
        return SG_ERR;
    for (int k = 0; k < n; k++) rows[k].v_pred = a->vpred;
    uint64_t key[2] = {c->seed & 0xffffffffffull, 1000003}; /* {seed, first} */
    int x = act4(c, "sample_x", DT_F32, a->N, a->H, a->W, a->C, -1.5f, 1.5f, 0);
    const int g = a->guide > 0 ? 2 : 1; /* guided: each image's two predictions, two x_t, t */
    int in[6] = {
        x,
        act4(c, "pred", dt, g * a->N, a->H, a->W, a->C, -2, 2, 0),
        raw_t(c, "sample_table", DT_U8, ROLE_INPUT, 2, a->T, SG_SAMPLE_ROW_BYTES, rows,
              sizeof(sg_sample_row) * (size_t)a->T),
        tensor(c, "sample_step", DT_I64, ROLE_STATE, 1, 1, 0, 0, 0, FILL_CONST, (double)a->step, 0),
        raw_t(c, "sample_key", DT_U64, ROLE_STATE, 1, 2, 0, key, sizeof key),
        act4(c, "sample_x0h", DT_F32, a->N, a->H, a->W, a->C, -1.0f, 1.0f, 0)};
    int out[SG_MAX_OUT] = {x, out_t(c, "x_t", dt, ROLE_INPUT, 4, g * a->N, a->H, a->W, a->C, 0),
                           out_t(c, "t", DT_I32, ROLE_INPUT, 1, g * a->N, 0, 0, 0, 0), in[5]};
    sg_op_args args = {.sampler = {.T = a->T,
                                   .xt_dt = dt,
                                   .guided = g == 2,
                                   .guidance = a->guide,
                                   .rescale = a->grescale}};
    return node(c, OP_SAMPLE_STEP, in, 6, out, &args, 0) < 0;
}

static const bo_builder builders[OP_COUNT] = {
    [OP_GATHER_BATCH] = b_gather,
    [OP_SAMPLE_T] = b_sample_t,
    [OP_NOISE] = b_noise,
    [OP_DDPM_NOISE] = b_ddpm_noise,
    [OP_TIMESTEP_EMB] = b_temb,
    [OP_LINEAR] = b_linear,
    [OP_CONV2D] = b_conv,
    [OP_GROUP_NORM] = b_group_norm,
    [OP_SILU] = b_silu,
    [OP_ADD] = b_add,
    [OP_ADD_NC] = b_add_nc,
    [OP_UPSAMPLE2X] = b_upsample,
    [OP_UPSAMPLE2X_APPLY] = b_upsample_apply,
    [OP_AVGPOOL2X] = b_avgpool,
    [OP_ATTENTION] = b_attention,
    [OP_DROPOUT] = b_dropout,
    [OP_MSE] = b_mse,
    [OP_MSE_BWD] = b_mse_bwd,
    [OP_MSE_W] = b_mse,
    [OP_MSE_W_BWD] = b_mse_bwd,
    [OP_LINEAR_BWD_DATA] = b_linear_bwd_data,
    [OP_LINEAR_BWD_WEIGHT] = b_linear_bwd_weight,
    [OP_CONV2D_BWD_DATA] = b_conv_bwd_data,
    [OP_CONV2D_BWD_WEIGHT] = b_conv_bwd_weight,
    [OP_GROUP_NORM_BWD] = b_group_norm_bwd,
    [OP_SILU_BWD] = b_silu_bwd,
    [OP_ADD_NC_BWD] = b_add_nc_bwd,
    [OP_UPSAMPLE2X_BWD] = b_upsample_bwd,
    [OP_AVGPOOL2X_BWD] = b_avgpool_bwd,
    [OP_ATTENTION_BWD] = b_attention_bwd,
    [OP_DROPOUT_BWD] = b_dropout_bwd,
    [OP_ACCUM] = b_accum,
    [OP_GRAD_SUMSQ] = b_grad_sumsq,
    [OP_CLIP_SCALE] = b_clip_scale,
    [OP_ADAMW] = b_adamw,
    [OP_EMA] = b_ema,
    [OP_STEP_INC] = b_step_inc,
    [OP_SILU_MUL] = b_silu_mul,
    [OP_SILU_MUL_BWD] = b_silu_mul_bwd,
    [OP_LOSS_WATCH] = b_loss_watch,
    [OP_SAMPLE_STEP] = b_sample_step,
    [OP_ALLREDUCE] = b_allreduce,
    [OP_NORM_ACT] = b_norm_act,
    [OP_NORM_ACT_TEMB] = b_norm_act_temb,
    [OP_NORM_ACT_APPLY] = b_norm_act_apply,
    [OP_NORM_ACT_TEMB_APPLY] = b_norm_act_temb_apply,
    [OP_NORM_ACT_BWD] = b_norm_act_bwd,
    [OP_NORM_ACT_TEMB_BWD] = b_norm_act_temb_bwd,
    [OP_ADAMW_EMA] = b_adamw_ema,
    [OP_ADAMW_EMA_BF16] = b_adamw_ema_bf16,
    [OP_GELU] = b_gelu,
    [OP_GELU_BWD] = b_gelu_bwd,
    [OP_CONV2D_ADD] = b_conv_add,
    [OP_UPCONV2D] = b_upconv,
    [OP_UPCONV2D_BWD_DATA] = b_upconv_bwd_data,
    [OP_UPCONV2D_BWD_WEIGHT] = b_upconv_bwd_weight,
    [OP_CONV2D_SC] = b_conv_sc,
    [OP_ATTENTION_P] = b_attention_p,
    [OP_GATHER_LABELS] = b_gather_labels,
    [OP_CLASS_EMB] = b_class_emb,
    [OP_CLASS_EMB_BWD] = b_class_emb_bwd,
    /* OP_CONCAT has no builder of its own: it is the first node of every concatenated case */
};

/* ---- the cases. dts: which activation dtypes (ops without one run once, as fp32). */

enum { F32 = 1, BF16 = 2, BOTH = 3 };

typedef struct {
    sg_op op;
    int dts;
    int big; /* only with --big */
    bo_args a;
} bo_entry;

/* clang-format off */
static const bo_entry entries[] = {
    /* step inputs */
    {OP_GATHER_BATCH, F32, 0, {.N = 5, .H = 12, .W = 9, .C = 3, .ndata = 7, .flip = 1, .step = 3}},
    {OP_GATHER_BATCH, F32, 0, {.N = 4, .H = 8, .W = 8, .C = 1, .ndata = 13, .flip = 0, .step = 100}},
    {OP_GATHER_BATCH, F32, 0, {.N = 3, .H = 8, .W = 6, .C = 3, .ndata = 11, .flip = 1, .step = 5, .micro = 2}},
    {OP_GATHER_LABELS, F32, 0, {.N = 9, .ndata = 7, .K = 10, .f = 0.3f, .step = 3}},
    {OP_GATHER_LABELS, F32, 0, {.N = 4, .ndata = 13, .K = 3, .f = 0.0f, .step = 100}},
    {OP_GATHER_LABELS, F32, 0, {.N = 3, .ndata = 11, .K = 5, .f = 1.0f, .step = 5}},
    {OP_GATHER_LABELS, F32, 0, {.N = 300, .ndata = 50000, .K = 10, .f = 0.1f, .step = 7, .micro = 2}},
    {OP_SAMPLE_T, F32, 0, {.N = 37, .T = 1000, .step = 5}},
    {OP_SAMPLE_T, F32, 0, {.N = 3, .T = 7, .step = 1 << 20}},
    {OP_SAMPLE_T, F32, 0, {.N = 5, .T = 1000, .step = 6, .micro = 1}},
    {OP_NOISE, F32, 0, {.N = 2, .H = 5, .W = 7, .C = 3, .step = 9}},
    {OP_NOISE, F32, 0, {.N = 3, .H = 33, .W = 31, .C = 1, .step = 0}},
    {OP_NOISE, F32, 0, {.N = 2, .H = 5, .W = 7, .C = 3, .step = 9, .micro = 2}},
    /* offset noise: a normal per (sample, channel), keyed by the sample's global index */
    {OP_NOISE, F32, 0, {.N = 3, .H = 5, .W = 7, .C = 3, .step = 9, .f = 0.1f}},
    {OP_NOISE, F32, 0, {.N = 4, .H = 4, .W = 4, .C = 4, .step = 2, .f = 0.5f, .micro = 2}},
    /* input perturbation: a second normal per value at its global index; with an offset */
    {OP_NOISE, F32, 0, {.N = 3, .H = 5, .W = 7, .C = 3, .step = 9, .perturb = 0.1f}},
    {OP_NOISE, F32, 0, {.N = 4, .H = 4, .W = 4, .C = 4, .step = 2, .perturb = 0.3f, .micro = 2}},
    {OP_NOISE, F32, 0, {.N = 4, .H = 4, .W = 4, .C = 4, .step = 5, .f = 0.5f, .perturb = 0.2f}},
    {OP_DDPM_NOISE, BOTH, 0, {.N = 3, .H = 5, .W = 7, .C = 3, .T = 1000}},
    {OP_DDPM_NOISE, BOTH, 0, {.N = 7, .H = 16, .W = 16, .C = 1, .T = 10}},
    {OP_DDPM_NOISE, BOTH, 0, {.N = 300, .H = 2, .W = 2, .C = 3, .T = 1000}}, /* many timesteps */
    {OP_DDPM_NOISE, BOTH, 0, {.N = 300, .H = 2, .W = 2, .C = 3, .T = 1000, .cosine = 1}},
    {OP_DDPM_NOISE, BOTH, 0, {.N = 7, .H = 3, .W = 3, .C = 3, .T = 4000, .cosine = 1}},
    {OP_DDPM_NOISE, BOTH, 0, {.N = 300, .H = 2, .W = 2, .C = 3, .T = 1000, .vpred = 1}}, /* v target */
    {OP_DDPM_NOISE, F32, 0, {.N = 5, .H = 4, .W = 4, .C = 3, .T = 400, .cosine = 1, .vpred = 1}},
    /* zero terminal SNR: t = 9 (x_t = eps, v = -x0) among the draws */
    {OP_DDPM_NOISE, BOTH, 0, {.N = 60, .H = 2, .W = 2, .C = 3, .T = 10, .zsnr = 1}},
    {OP_DDPM_NOISE, BOTH, 0, {.N = 60, .H = 2, .W = 2, .C = 3, .T = 10, .vpred = 1, .zsnr = 1}},
    /* the model */
    {OP_TIMESTEP_EMB, BOTH, 0, {.N = 5, .Co = 6, .T = 1000}},
    {OP_TIMESTEP_EMB, BOTH, 0, {.N = 33, .Co = 128, .T = 1000}},
    {OP_CLASS_EMB, BOTH, 0, {.N = 5, .K = 11, .Co = 6}},
    {OP_CLASS_EMB, BOTH, 0, {.N = 33, .K = 3, .Co = 512}},
    {OP_CLASS_EMB_BWD, BOTH, 0, {.N = 5, .K = 11, .Co = 6}},           /* rows nobody picked: 0 */
    {OP_CLASS_EMB_BWD, BOTH, 0, {.N = 40, .K = 3, .Co = 300, .acc = 1}}, /* rows picked many times */
    {OP_LINEAR, BOTH, 0, {.N = 5, .C = 37, .Co = 70}},
    {OP_LINEAR, BOTH, 0, {.N = 3, .C = 128, .Co = 64}},
    {OP_LINEAR, BOTH, 0, {.N = 600, .C = 16, .Co = 33}},
    /* conv: 3x3 s1 tiny; tiles crossed with a concatenation; 3x3 s2 (the downsample) odd and
     * concatenated; 1x1 s1 (cuBLAS) concatenated and plain; 1x1 s2 (implicit GEMM) */
    {OP_CONV2D, BOTH, 0, {.N = 2, .H = 7, .W = 9, .C = 5, .Co = 7, .K = 3, .S = 1}},
    {OP_CONV2D, BOTH, 0, {.N = 2, .H = 9, .W = 6, .C = 37, .C2 = 40, .Co = 70, .K = 3, .S = 1}},
    {OP_CONV2D, BOTH, 0, {.N = 3, .H = 9, .W = 11, .C = 16, .C2 = 9, .Co = 20, .K = 3, .S = 2}},
    {OP_CONV2D, BOTH, 0, {.N = 2, .H = 5, .W = 7, .C = 24, .C2 = 8, .Co = 40, .K = 1, .S = 1}},
    {OP_CONV2D, BOTH, 0, {.N = 1, .H = 3, .W = 5, .C = 13, .Co = 9, .K = 1, .S = 1}},
    {OP_CONV2D, BOTH, 0, {.N = 2, .H = 6, .W = 7, .C = 10, .Co = 12, .K = 1, .S = 2}},
    /* DDPM's SAME downsample (0 at the top/left, 1 at the bottom/right): even sizes */
    {OP_CONV2D, BOTH, 0, {.N = 3, .H = 10, .W = 12, .C = 16, .C2 = 9, .Co = 20, .K = 3, .S = 2, .same = 1}},
    {OP_CONV2D, BOTH, 0, {.N = 2, .H = 2, .W = 2, .C = 7, .Co = 5, .K = 3, .S = 2, .same = 1}},
    /* channels in multiples of 8: bf16 runs on the tensor cores (conv_tc.cu), with an unequal
     * concatenation, both stride-2 paddings, 1x1 stride 2 */
    {OP_CONV2D, BOTH, 0, {.N = 2, .H = 5, .W = 7, .C = 16, .C2 = 24, .Co = 40, .K = 3, .S = 1}},
    {OP_CONV2D, BOTH, 0, {.N = 2, .H = 8, .W = 6, .C = 16, .C2 = 8, .Co = 24, .K = 3, .S = 2, .same = 1}},
    {OP_CONV2D, BOTH, 0, {.N = 1, .H = 7, .W = 5, .C = 32, .Co = 16, .K = 3, .S = 2}},
    {OP_CONV2D, BOTH, 0, {.N = 2, .H = 6, .W = 7, .C = 16, .Co = 24, .K = 1, .S = 2}},
    /* group norm: odd HW; concatenation on a group boundary; a group straddling the two parts;
     * more channels per group than one block; a 32x32 map */
    {OP_GROUP_NORM, BOTH, 0, {.N = 2, .H = 7, .W = 9, .C = 24, .G = 6}},
    {OP_GROUP_NORM, BOTH, 0, {.N = 3, .H = 5, .W = 7, .C = 20, .C2 = 20, .G = 8}},
    {OP_GROUP_NORM, BOTH, 0, {.N = 2, .H = 3, .W = 5, .C = 6, .C2 = 10, .G = 4}},
    {OP_GROUP_NORM, BOTH, 0, {.N = 2, .H = 1, .W = 7, .C = 300, .G = 1}},
    {OP_GROUP_NORM, BOTH, 0, {.N = 1, .H = 32, .W = 32, .C = 64, .C2 = 32, .G = 32}},
    {OP_SILU, BOTH, 0, {.N = 2, .H = 5, .W = 7, .C = 9}},
    {OP_SILU, BOTH, 0, {.N = 1, .H = 33, .W = 32, .C = 40, .inplace = 1}},
    {OP_ADD, BOTH, 0, {.N = 2, .H = 5, .W = 7, .C = 9}},
    {OP_ADD, BOTH, 0, {.N = 3, .H = 17, .W = 16, .C = 33, .inplace = 1}},
    {OP_ADD_NC, BOTH, 0, {.N = 3, .H = 37, .W = 1, .C = 19}},
    {OP_ADD_NC, BOTH, 0, {.N = 2, .H = 20, .W = 30, .C = 37, .inplace = 1}},
    {OP_UPSAMPLE2X, BOTH, 0, {.N = 2, .H = 6, .W = 8, .C = 5}},
    {OP_UPSAMPLE2X, BOTH, 0, {.N = 1, .H = 4, .W = 2, .C = 7}},
    {OP_UPSAMPLE2X_APPLY, BOTH, 0, {.N = 2, .H = 5, .W = 3, .C = 9}},
    {OP_AVGPOOL2X, BOTH, 0, {.N = 2, .H = 6, .W = 8, .C = 5}},
    {OP_AVGPOOL2X, BOTH, 0, {.N = 3, .H = 10, .W = 4, .C = 33}},
    /* attention: odd L, two heads; unet_adm64's 32-channel heads (6 at 16x16 C=192, here on a
     * 4x4 map; 8 at C=256); one head over rows longer than a block */
    {OP_ATTENTION, BOTH, 0, {.N = 2, .H = 5, .W = 7, .C = 24, .heads = 2}},
    {OP_ATTENTION, BOTH, 0, {.N = 1, .H = 4, .W = 4, .C = 192, .heads = 6}},
    {OP_ATTENTION, BOTH, 0, {.N = 2, .H = 8, .W = 8, .C = 256, .heads = 8}},
    {OP_ATTENTION, BOTH, 0, {.N = 1, .H = 15, .W = 20, .C = 16, .heads = 1}},
    {OP_ATTENTION_P, BOTH, 0, {.N = 2, .H = 5, .W = 7, .C = 24, .heads = 2}},
    {OP_ATTENTION_P, BOTH, 0, {.N = 2, .H = 8, .W = 8, .C = 256, .heads = 8}},
    {OP_DROPOUT, BOTH, 0, {.N = 2, .H = 5, .W = 7, .C = 9, .K = 0, .f = 0.1f, .step = 4}},
    {OP_DROPOUT, BOTH, 0, {.N = 2, .H = 9, .W = 8, .C = 33, .K = 5, .f = 0.5f, .step = 77, .inplace = 1}},
    {OP_DROPOUT, BOTH, 0, {.N = 2, .H = 5, .W = 7, .C = 9, .K = 1, .f = 0.1f, .step = 4, .micro = 1}},
    {OP_MSE, BOTH, 0, {.N = 1, .H = 1, .W = 1, .C = 10007}},
    {OP_MSE, BOTH, 0, {.N = 4, .H = 16, .W = 16, .C = 3, .mixed = 1}},
    {OP_MSE, BOTH, 0, {.N = 2, .H = 8, .W = 8, .C = 3, .mixed = 1, .acc = 1}}, /* a micro-batch */
    {OP_MSE, F32, 1, {.N = 1, .H = 1, .W = 1, .C = 3000001}}, /* past the capped partial grid */
    /* backward */
    {OP_MSE_BWD, BOTH, 0, {.N = 1, .H = 1, .W = 1, .C = 10007}},
    {OP_MSE_BWD, BOTH, 0, {.N = 4, .H = 16, .W = 16, .C = 3, .mixed = 1, .acc = 1}},
    {OP_MSE_BWD, BOTH, 0, {.N = 2, .H = 5, .W = 7, .C = 3, .f = 0.5f}}, /* data parallel's 1/ranks */
    /* min-SNR: the weights of linear and cosine betas for eps and v models, a micro-batch */
    {OP_MSE_W, BOTH, 0, {.N = 9, .H = 8, .W = 8, .C = 3, .T = 1000, .mixed = 1}},
    {OP_MSE_W, BOTH, 0, {.N = 6, .H = 5, .W = 7, .C = 3, .T = 1000, .cosine = 1, .vpred = 1}},
    {OP_MSE_W, F32, 0, {.N = 4, .H = 16, .W = 16, .C = 3, .T = 50, .mixed = 1, .acc = 1}},
    {OP_MSE_W_BWD, BOTH, 0, {.N = 9, .H = 8, .W = 8, .C = 3, .T = 1000, .mixed = 1}},
    {OP_MSE_W_BWD, BOTH, 0, {.N = 6, .H = 5, .W = 7, .C = 3, .T = 4000, .cosine = 1, .vpred = 1, .acc = 1}},
    {OP_MSE_W_BWD, F32, 0, {.N = 4, .H = 4, .W = 4, .C = 3, .T = 10, .f = 0.25f}},
    {OP_LINEAR_BWD_DATA, BOTH, 0, {.N = 5, .C = 37, .Co = 70}},
    {OP_LINEAR_BWD_DATA, BOTH, 0, {.N = 3, .C = 128, .Co = 64, .acc = 1}},
    {OP_LINEAR_BWD_WEIGHT, BOTH, 0, {.N = 5, .C = 37, .Co = 70}},
    {OP_LINEAR_BWD_WEIGHT, BOTH, 0, {.N = 700, .C = 9, .Co = 5, .acc = 1}}, /* rows > one chunk */
    {OP_CONV2D_BWD_DATA, BOTH, 0, {.N = 2, .H = 7, .W = 9, .C = 5, .Co = 7, .K = 3, .S = 1}},
    {OP_CONV2D_BWD_DATA, BOTH, 0, {.N = 2, .H = 9, .W = 6, .C = 37, .C2 = 40, .Co = 70, .K = 3, .S = 1, .acc = 1}},
    {OP_CONV2D_BWD_DATA, BOTH, 0, {.N = 3, .H = 9, .W = 11, .C = 16, .C2 = 9, .Co = 20, .K = 3, .S = 2}},
    {OP_CONV2D_BWD_DATA, BOTH, 0, {.N = 2, .H = 5, .W = 7, .C = 24, .C2 = 8, .Co = 40, .K = 1, .S = 1, .acc = 1}},
    {OP_CONV2D_BWD_DATA, BOTH, 0, {.N = 2, .H = 6, .W = 7, .C = 10, .Co = 12, .K = 1, .S = 2}},
    {OP_CONV2D_BWD_DATA, BOTH, 0, {.N = 3, .H = 10, .W = 12, .C = 16, .C2 = 9, .Co = 20, .K = 3, .S = 2, .same = 1, .acc = 1}},
    {OP_CONV2D_BWD_DATA, BOTH, 0, {.N = 2, .H = 8, .W = 8, .C = 3, .Co = 66, .K = 3, .S = 2, .same = 1}},
    {OP_CONV2D_BWD_DATA, BOTH, 0, {.N = 2, .H = 5, .W = 7, .C = 16, .C2 = 24, .Co = 40, .K = 3, .S = 1, .acc = 1}},
    {OP_CONV2D_BWD_DATA, BOTH, 0, {.N = 2, .H = 8, .W = 6, .C = 16, .C2 = 8, .Co = 24, .K = 3, .S = 2, .same = 1}},
    {OP_CONV2D_BWD_DATA, BOTH, 0, {.N = 1, .H = 7, .W = 5, .C = 32, .Co = 16, .K = 3, .S = 2, .acc = 1}},
    {OP_CONV2D_BWD_DATA, BOTH, 0, {.N = 2, .H = 6, .W = 7, .C = 16, .Co = 24, .K = 1, .S = 2}},
    {OP_CONV2D_BWD_WEIGHT, BOTH, 0, {.N = 2, .H = 7, .W = 9, .C = 5, .Co = 7, .K = 3, .S = 1, .acc = 1}},
    {OP_CONV2D_BWD_WEIGHT, BOTH, 0, {.N = 2, .H = 9, .W = 6, .C = 37, .C2 = 40, .Co = 70, .K = 3, .S = 1}},
    {OP_CONV2D_BWD_WEIGHT, BOTH, 0, {.N = 3, .H = 9, .W = 11, .C = 16, .C2 = 9, .Co = 20, .K = 3, .S = 2, .acc = 1}},
    {OP_CONV2D_BWD_WEIGHT, BOTH, 0, {.N = 2, .H = 5, .W = 7, .C = 24, .C2 = 8, .Co = 40, .K = 1, .S = 1}},
    {OP_CONV2D_BWD_WEIGHT, BOTH, 0, {.N = 2, .H = 6, .W = 7, .C = 10, .Co = 12, .K = 1, .S = 2}},
    {OP_CONV2D_BWD_WEIGHT, BOTH, 0, {.N = 3, .H = 10, .W = 12, .C = 16, .C2 = 9, .Co = 20, .K = 3, .S = 2, .same = 1}},
    {OP_CONV2D_BWD_WEIGHT, BOTH, 0, {.N = 2, .H = 8, .W = 8, .C = 3, .Co = 66, .K = 3, .S = 2, .same = 1, .acc = 1}},
    {OP_CONV2D_BWD_WEIGHT, BOTH, 0, {.N = 2, .H = 5, .W = 7, .C = 16, .C2 = 24, .Co = 40, .K = 3, .S = 1}},
    {OP_CONV2D_BWD_WEIGHT, BOTH, 0, {.N = 2, .H = 8, .W = 6, .C = 16, .C2 = 8, .Co = 24, .K = 3, .S = 2, .same = 1, .acc = 1}},
    {OP_CONV2D_BWD_WEIGHT, BOTH, 0, {.N = 1, .H = 7, .W = 5, .C = 32, .Co = 16, .K = 3, .S = 2}},
    {OP_CONV2D_BWD_WEIGHT, BOTH, 0, {.N = 2, .H = 6, .W = 7, .C = 16, .Co = 24, .K = 1, .S = 2, .acc = 1}},
    /* several weight-gradient chunks (pixels > SG_WS_WGRAD_PIX) */
    {OP_CONV2D_BWD_WEIGHT, BOTH, 0, {.N = 2, .H = 48, .W = 48, .C = 8, .Co = 16, .K = 3, .S = 1, .acc = 1}},
    /* fused: the input is norm_act's virtual output (bf16 on the tensor cores; fp32 refused by
     * the CUDA backend, below): norm1 on a skip concatenation, norm2 with the time embedding
     * and dropout, the attention's norm (no activation) before a 1x1 */
    {OP_CONV2D, BF16, 0, {.N = 2, .H = 5, .W = 7, .C = 16, .C2 = 24, .Co = 40, .K = 3, .S = 1, .G = 8, .act = SG_ACT_SILU, .fused = 1}},
    {OP_CONV2D, BF16, 0, {.N = 3, .H = 4, .W = 5, .C = 32, .Co = 32, .K = 3, .S = 1, .G = 8, .act = SG_ACT_SILU, .fused = 2, .f = 0.1f, .step = 5}},
    {OP_CONV2D, BF16, 0, {.N = 2, .H = 3, .W = 5, .C = 24, .Co = 72, .K = 1, .S = 1, .G = 4, .act = SG_ACT_NONE, .fused = 1}},
    {OP_CONV2D_BWD_WEIGHT, BF16, 0, {.N = 2, .H = 5, .W = 7, .C = 16, .C2 = 24, .Co = 40, .K = 3, .S = 1, .G = 8, .act = SG_ACT_SILU, .fused = 1, .acc = 1}},
    {OP_CONV2D_BWD_WEIGHT, BF16, 0, {.N = 3, .H = 4, .W = 5, .C = 32, .Co = 32, .K = 3, .S = 1, .G = 8, .act = SG_ACT_SILU, .fused = 2, .f = 0.1f, .step = 5}},
    {OP_CONV2D_BWD_WEIGHT, BF16, 0, {.N = 2, .H = 3, .W = 5, .C = 24, .Co = 72, .K = 1, .S = 1, .G = 4, .act = SG_ACT_NONE, .fused = 1, .acc = 1}},
    {OP_GROUP_NORM_BWD, BOTH, 0, {.N = 2, .H = 7, .W = 9, .C = 24, .G = 6}},
    {OP_GROUP_NORM_BWD, BOTH, 0, {.N = 3, .H = 5, .W = 7, .C = 20, .C2 = 20, .G = 8, .acc = 1}},
    {OP_GROUP_NORM_BWD, BOTH, 0, {.N = 2, .H = 3, .W = 5, .C = 6, .C2 = 10, .G = 4, .acc_param = 1}},
    {OP_GROUP_NORM_BWD, BOTH, 0, {.N = 2, .H = 1, .W = 7, .C = 300, .G = 1, .acc = 1, .acc_param = 1}},
    {OP_GROUP_NORM_BWD, BOTH, 0, {.N = 1, .H = 32, .W = 32, .C = 64, .C2 = 32, .G = 32}},
    {OP_SILU_BWD, BOTH, 0, {.N = 2, .H = 5, .W = 7, .C = 9, .acc = 1}},
    {OP_SILU_BWD, BOTH, 0, {.N = 1, .H = 33, .W = 32, .C = 40, .inplace = 1}},
    {OP_ADD_NC_BWD, BOTH, 0, {.N = 3, .H = 37, .W = 1, .C = 19}},
    {OP_ADD_NC_BWD, BOTH, 0, {.N = 2, .H = 20, .W = 30, .C = 37, .acc = 1}}, /* two row chunks */
    {OP_UPSAMPLE2X_BWD, BOTH, 0, {.N = 2, .H = 6, .W = 8, .C = 5}},
    {OP_UPSAMPLE2X_BWD, BOTH, 0, {.N = 1, .H = 4, .W = 2, .C = 7, .acc = 1}},
    {OP_AVGPOOL2X_BWD, BOTH, 0, {.N = 2, .H = 6, .W = 8, .C = 5}},
    {OP_AVGPOOL2X_BWD, BOTH, 0, {.N = 3, .H = 10, .W = 4, .C = 33, .acc = 1}},
    {OP_ATTENTION_BWD, BOTH, 0, {.N = 2, .H = 5, .W = 7, .C = 24, .heads = 2}},
    {OP_ATTENTION_BWD, BOTH, 0, {.N = 1, .H = 4, .W = 4, .C = 192, .heads = 6, .acc = 1}},
    {OP_ATTENTION_BWD, BOTH, 0, {.N = 1, .H = 8, .W = 8, .C = 256, .heads = 8}},
    {OP_ATTENTION_BWD, BOTH, 0, {.N = 1, .H = 15, .W = 20, .C = 16, .heads = 1, .acc = 1}},
    {OP_DROPOUT_BWD, BOTH, 0, {.N = 2, .H = 5, .W = 7, .C = 9, .K = 0, .f = 0.1f, .step = 4, .acc = 1}},
    {OP_DROPOUT_BWD, BOTH, 0, {.N = 2, .H = 9, .W = 8, .C = 33, .K = 5, .f = 0.5f, .step = 77, .inplace = 1}},
    {OP_DROPOUT_BWD, BOTH, 0, {.N = 2, .H = 5, .W = 7, .C = 9, .K = 1, .f = 0.1f, .step = 4, .acc = 1, .micro = 2}},
    {OP_ACCUM, BOTH, 0, {.N = 2, .H = 5, .W = 7, .C = 9}},
    {OP_ACCUM, BOTH, 0, {.N = 2, .H = 5, .W = 7, .C = 9, .acc = 1}},
    {OP_ACCUM, BOTH, 0, {.N = 1, .H = 9, .W = 8, .C = 33, .inplace = 1}},
    {OP_ACCUM, BF16, 0, {.N = 2, .H = 5, .W = 7, .C = 9, .acc = 1, .mixed = 1}},
    /* optimizer */
    {OP_GRAD_SUMSQ, F32, 0, {.N = 10001}},
    {OP_GRAD_SUMSQ, F32, 0, {.N = 100003}},
    {OP_GRAD_SUMSQ, F32, 1, {.N = 3000001}}, /* past the capped partial grid */
    {OP_CLIP_SCALE, F32, 0, {.v = 4.0, .f = 1.0f}},   /* clipped */
    {OP_CLIP_SCALE, F32, 0, {.v = 0.25, .f = 1.0f}},  /* not clipped */
    {OP_ADAMW, F32, 0, {.N = 10001, .step = 6, .warmup = 10}},
    {OP_ADAMW, F32, 0, {.N = 4099, .step = 20, .warmup = 10}},
    {OP_ADAMW, F32, 1, {.N = 3000001, .step = 20, .warmup = 0}},
    {OP_ADAMW, F32, 0, {.N = 4099, .step = 34, .warmup = 10, .K = SG_LR_COSINE}},
    {OP_ADAMW, F32, 0, {.N = 257, .step = 45, .warmup = 10, .K = SG_LR_LINEAR}},
    {OP_EMA, F32, 0, {.N = 10001, .f = 0.999f}},
    {OP_EMA, F32, 0, {.N = 257, .f = 0.5f}},
    {OP_EMA, F32, 0, {.N = 1001, .f = 0.9999f, .warmup = 1, .step = 37}}, /* EMA warm-up */
    {OP_EMA, F32, 0, {.N = 33, .f = 0.9999f, .warmup = 1, .step = 0}},
    {OP_STEP_INC, F32, 0, {.step = 41}},
    {OP_STEP_INC, F32, 0, {.step = ((int64_t)1 << 33) - 1}},
    /* added later */
    {OP_SILU_MUL, BOTH, 0, {.N = 2, .H = 5, .W = 7, .C = 9}},
    {OP_SILU_MUL, BOTH, 0, {.N = 1, .H = 33, .W = 32, .C = 40, .inplace = 1}},
    {OP_SILU_MUL_BWD, BOTH, 0, {.N = 2, .H = 5, .W = 7, .C = 9}},
    {OP_SILU_MUL_BWD, BOTH, 0, {.N = 1, .H = 33, .W = 32, .C = 40, .acc = 1, .acc_param = 1}},
    {OP_LOSS_WATCH, F32, 0, {.v = 3.0, .step = 41}},                      /* finite: watch stays 0 */
    {OP_LOSS_WATCH, F32, 0, {.v = INFINITY, .step = 9}},                  /* the first bad step */
    {OP_LOSS_WATCH, F32, 0, {.v = INFINITY, .step = 12, .ndata = 5}},     /* the first one kept */
    {OP_ALLREDUCE, F32, 0, {.N = 10001, .f = 1.0f}},
    {OP_ALLREDUCE, F32, 0, {.N = 257, .f = 0.5f}},
    /* the sampler's step (T: the schedule; K: DDIM steps, 0 = DDPM; flip: clip; f: eta; step: k) */
    {OP_SAMPLE_STEP, BOTH, 0, {.N = 2, .H = 5, .W = 7, .C = 3, .T = 50, .step = 10}},   /* DDPM, z */
    {OP_SAMPLE_STEP, BOTH, 0, {.N = 2, .H = 5, .W = 7, .C = 3, .T = 50, .step = 20, .flip = 1}},
    {OP_SAMPLE_STEP, BOTH, 0, {.N = 3, .H = 4, .W = 4, .C = 1, .T = 50, .step = 49}},   /* t = 0 */
    {OP_SAMPLE_STEP, BOTH, 0, {.N = 2, .H = 5, .W = 7, .C = 3, .T = 50, .step = 0, .cosine = 1}},
    {OP_SAMPLE_STEP, BOTH, 0, {.N = 2, .H = 5, .W = 7, .C = 3, .T = 50, .step = 20, .flip = 1, .cosine = 1}},
    {OP_SAMPLE_STEP, BOTH, 0, {.N = 2, .H = 5, .W = 7, .C = 3, .T = 50, .K = 7, .step = 0, .cosine = 1}},
    {OP_SAMPLE_STEP, BOTH, 0, {.N = 2, .H = 5, .W = 7, .C = 3, .T = 50, .K = 7, .step = 2, .f = 1}}, /* eta */
    {OP_SAMPLE_STEP, BOTH, 0, {.N = 2, .H = 5, .W = 7, .C = 3, .T = 50, .step = 10, .vpred = 1}}, /* v */
    {OP_SAMPLE_STEP, BOTH, 0, {.N = 2, .H = 5, .W = 7, .C = 3, .T = 50, .K = 7, .step = 3, .flip = 1, .vpred = 1}},
    {OP_SAMPLE_STEP, BOTH, 0, {.N = 2, .H = 5, .W = 7, .C = 3, .T = 50, .K = 7, .step = 4, .flip = 1, .f = 0.5f}},
    {OP_SAMPLE_STEP, BOTH, 0, {.N = 2, .H = 5, .W = 7, .C = 3, .T = 50, .step = -1}},   /* x_T */
    /* zero terminal SNR, v: the first step at abar = 0 (DDPM, DDIM clipped), then one after */
    {OP_SAMPLE_STEP, BOTH, 0, {.N = 2, .H = 5, .W = 7, .C = 3, .T = 50, .step = 0, .vpred = 1, .zsnr = 1}},
    {OP_SAMPLE_STEP, BOTH, 0, {.N = 2, .H = 5, .W = 7, .C = 3, .T = 50, .K = 7, .step = 0, .flip = 1, .vpred = 1, .zsnr = 1}},
    {OP_SAMPLE_STEP, BOTH, 0, {.N = 2, .H = 5, .W = 7, .C = 3, .T = 50, .step = 1, .cosine = 1, .vpred = 1, .zsnr = 1}},
    /* classifier-free guidance: each image predicted twice */
    {OP_SAMPLE_STEP, BOTH, 0, {.N = 2, .H = 5, .W = 7, .C = 3, .T = 50, .step = 10, .guide = 3.0f}},
    {OP_SAMPLE_STEP, BOTH, 0, {.N = 3, .H = 4, .W = 4, .C = 1, .T = 50, .K = 7, .step = 2, .flip = 1, .vpred = 1, .guide = 1.5f}},
    {OP_SAMPLE_STEP, BOTH, 0, {.N = 2, .H = 5, .W = 7, .C = 3, .T = 50, .step = -1, .guide = 7.5f}},
    /* guidance rescale (a block per image): 768 values an image, three in each lane */
    {OP_SAMPLE_STEP, BOTH, 0, {.N = 3, .H = 16, .W = 16, .C = 3, .T = 50, .step = 10, .guide = 3.0f, .grescale = 0.7f}},
    {OP_SAMPLE_STEP, BOTH, 0, {.N = 2, .H = 9, .W = 9, .C = 3, .T = 50, .K = 7, .step = 2, .flip = 1, .vpred = 1, .guide = 1.5f, .grescale = 1.0f}},
    {OP_SAMPLE_STEP, BOTH, 0, {.N = 2, .H = 5, .W = 7, .C = 3, .T = 50, .step = -1, .guide = 7.5f, .grescale = 0.5f}},
    {OP_SAMPLE_STEP, F32, 0, {.N = 2, .H = 5, .W = 7, .C = 3, .T = 50, .K = 7, .step = 9, .guide = 2.0f}}, /* done */
    {OP_SAMPLE_STEP, BOTH, 0, {.N = 2, .H = 5, .W = 7, .C = 3, .T = 50, .K = 7, .step = 3}},
    {OP_SAMPLE_STEP, BOTH, 0, {.N = 2, .H = 5, .W = 7, .C = 3, .T = 50, .K = 7, .step = 6, .flip = 1}},
    /* DPM-Solver++(2M): order 1 (the first and last steps), order 2 reading the history */
    {OP_SAMPLE_STEP, BOTH, 0, {.N = 2, .H = 5, .W = 7, .C = 3, .T = 50, .K = 7, .step = 0, .dpm = 1}},
    {OP_SAMPLE_STEP, BOTH, 0, {.N = 2, .H = 5, .W = 7, .C = 3, .T = 50, .K = 7, .step = 3, .dpm = 1}},
    {OP_SAMPLE_STEP, BOTH, 0, {.N = 2, .H = 5, .W = 7, .C = 3, .T = 50, .K = 7, .step = 6, .flip = 1, .vpred = 1, .dpm = 1}},
    {OP_SAMPLE_STEP, BOTH, 0, {.N = 3, .H = 16, .W = 16, .C = 3, .T = 50, .K = 7, .step = 2, .cosine = 1, .vpred = 1, .zsnr = 1, .guide = 3.0f, .grescale = 0.7f, .dpm = 1}},
    {OP_SAMPLE_STEP, F32, 0, {.N = 2, .H = 5, .W = 7, .C = 3, .T = 50, .K = 7, .step = 9}},  /* done */
    {OP_SAMPLE_STEP, BOTH, 0, {.N = 3, .H = 16, .W = 16, .C = 3, .T = 500, .step = 250}}, /* 3 blocks */
    /* norm_act: 16-byte vectors (C a multiple of 8) and single elements (C = 20, or a part of 12
     * channels), the skip concatenation, the attention's (no activation), several row chunks
     * (C = 1040: 7 rows a chunk); the temb variant with and without dropout */
    {OP_NORM_ACT, BOTH, 0, {.N = 2, .H = 5, .W = 7, .C = 24, .G = 6, .act = SG_ACT_SILU}},
    {OP_NORM_ACT, BOTH, 0, {.N = 2, .H = 3, .W = 5, .C = 16, .C2 = 16, .G = 8, .act = SG_ACT_SILU}},
    {OP_NORM_ACT, BOTH, 0, {.N = 3, .H = 4, .W = 3, .C = 12, .C2 = 8, .G = 4, .act = SG_ACT_NONE}},
    {OP_NORM_ACT, BOTH, 0, {.N = 1, .H = 3, .W = 5, .C = 1040, .G = 8, .act = SG_ACT_SILU}},
    {OP_NORM_ACT_TEMB, BOTH, 0, {.N = 3, .H = 5, .W = 4, .C = 32, .G = 8, .act = SG_ACT_SILU, .K = 3, .f = 0.1f, .step = 7}},
    {OP_NORM_ACT_TEMB, BOTH, 0, {.N = 2, .H = 3, .W = 3, .C = 20, .G = 4, .act = SG_ACT_SILU}},
    {OP_NORM_ACT_APPLY, BOTH, 0, {.N = 2, .H = 3, .W = 5, .C = 16, .C2 = 16, .G = 8, .act = SG_ACT_SILU}},
    {OP_NORM_ACT_APPLY, BOTH, 0, {.N = 2, .H = 5, .W = 3, .C = 20, .G = 5, .act = SG_ACT_NONE}},
    {OP_NORM_ACT_TEMB_APPLY, BOTH, 0, {.N = 3, .H = 5, .W = 4, .C = 32, .G = 8, .act = SG_ACT_SILU, .K = 3, .f = 0.1f, .step = 7}},
    {OP_NORM_ACT_BWD, BOTH, 0, {.N = 2, .H = 5, .W = 7, .C = 24, .G = 6, .act = SG_ACT_SILU, .acc = 1}},
    {OP_NORM_ACT_BWD, BOTH, 0, {.N = 2, .H = 3, .W = 5, .C = 16, .C2 = 16, .G = 8, .act = SG_ACT_SILU, .acc = 1}},
    {OP_NORM_ACT_BWD, BOTH, 0, {.N = 3, .H = 4, .W = 3, .C = 12, .C2 = 8, .G = 4, .act = SG_ACT_NONE, .acc_param = 1}},
    {OP_NORM_ACT_BWD, BOTH, 0, {.N = 1, .H = 3, .W = 5, .C = 1040, .G = 8, .act = SG_ACT_SILU}},
    {OP_NORM_ACT_TEMB_BWD, BOTH, 0, {.N = 3, .H = 5, .W = 4, .C = 32, .G = 8, .act = SG_ACT_SILU, .K = 3, .f = 0.1f, .step = 7}},
    {OP_NORM_ACT_TEMB_BWD, BOTH, 0, {.N = 2, .H = 3, .W = 3, .C = 20, .G = 4, .act = SG_ACT_SILU, .acc = 1, .acc_param = 1}},
    /* the fused optimizer pass: lengths with 1 and 3 values after the last group of 4, none */
    {OP_ADAMW_EMA, F32, 0, {.N = 10001, .step = 6, .warmup = 10, .f = 0.999f}},
    {OP_ADAMW_EMA, F32, 0, {.N = 4099, .step = 34, .warmup = 10, .K = SG_LR_COSINE, .f = 0.9999f, .flip = 1}},
    {OP_ADAMW_EMA, F32, 0, {.N = 256, .step = 0, .K = SG_LR_LINEAR, .f = 0.9999f, .flip = 1}},
    {OP_ADAMW_EMA, F32, 1, {.N = 3000001, .step = 20, .f = 0.999f}},
    {OP_ADAMW_EMA_BF16, F32, 0, {.N = 10001, .step = 6, .warmup = 10, .f = 0.999f}},
    {OP_ADAMW_EMA_BF16, F32, 0, {.N = 4098, .step = 34, .warmup = 10, .K = SG_LR_COSINE, .f = 0.9999f, .flip = 1}},
    {OP_ADAMW_EMA_BF16, F32, 0, {.N = 259, .step = 0, .K = SG_LR_LINEAR, .f = 0.9999f, .flip = 1}},
    {OP_GELU, BOTH, 0, {.N = 2, .H = 5, .W = 7, .C = 9}},
    {OP_GELU, BOTH, 0, {.N = 1, .H = 33, .W = 32, .C = 40, .inplace = 1}},
    {OP_GELU_BWD, BOTH, 0, {.N = 2, .H = 5, .W = 7, .C = 9, .acc = 1}},
    {OP_GELU_BWD, BOTH, 0, {.N = 1, .H = 33, .W = 32, .C = 40, .inplace = 1}},
    /* the residual in the conv's store: the ResBlock's conv2 (3x3) on norm2's fused output,
     * the attention's to_out (1x1), a concatenated input; off the tensor cores (fp32, or 12
     * channels): the conv then the add */
    {OP_CONV2D_ADD, BF16, 0, {.N = 3, .H = 4, .W = 5, .C = 32, .Co = 32, .K = 3, .S = 1, .G = 8, .act = SG_ACT_SILU, .fused = 2, .f = 0.1f, .step = 5}},
    {OP_CONV2D_ADD, BOTH, 0, {.N = 2, .H = 5, .W = 7, .C = 24, .Co = 24, .K = 1, .S = 1}},
    {OP_CONV2D_ADD, BOTH, 0, {.N = 2, .H = 5, .W = 7, .C = 16, .C2 = 24, .Co = 40, .K = 3, .S = 1}},
    {OP_CONV2D_ADD, BOTH, 0, {.N = 2, .H = 6, .W = 5, .C = 12, .Co = 16, .K = 3, .S = 1}},
    /* upconv2d: the tensor-core path in bf16 (channels multiples of 8), the CUDA-core one in
     * fp32 and for 12 channels; a unet_tiny-sized 64 -> 64 at 8x8 */
    {OP_UPCONV2D, BOTH, 0, {.N = 2, .H = 3, .W = 5, .C = 24, .Co = 40}},
    {OP_UPCONV2D, BOTH, 0, {.N = 1, .H = 8, .W = 8, .C = 64, .Co = 64}},
    {OP_UPCONV2D, BOTH, 0, {.N = 2, .H = 4, .W = 3, .C = 12, .Co = 8}},
    {OP_UPCONV2D_BWD_DATA, BOTH, 0, {.N = 2, .H = 3, .W = 5, .C = 24, .Co = 40}},
    {OP_UPCONV2D_BWD_DATA, BOTH, 0, {.N = 1, .H = 8, .W = 8, .C = 64, .Co = 64, .acc = 1}},
    {OP_UPCONV2D_BWD_DATA, BOTH, 0, {.N = 2, .H = 4, .W = 3, .C = 12, .Co = 8, .acc = 1}},
    {OP_UPCONV2D_BWD_WEIGHT, BOTH, 0, {.N = 2, .H = 3, .W = 5, .C = 24, .Co = 40}},
    {OP_UPCONV2D_BWD_WEIGHT, BOTH, 0, {.N = 1, .H = 8, .W = 8, .C = 64, .Co = 64, .acc = 1}},
    {OP_UPCONV2D_BWD_WEIGHT, BOTH, 0, {.N = 2, .H = 4, .W = 3, .C = 12, .Co = 8, .acc = 1}},
    /* the shortcut fold: a decoder block (h norm2's fused output with temb and dropout, x the
     * skip concatenation), an encoder block widening (plain h and x), edge tiles */
    {OP_CONV2D_SC, BF16, 0, {.N = 3, .H = 4, .W = 5, .C = 24, .C2 = 16, .Co = 32, .G = 8, .act = SG_ACT_SILU, .fused = 2, .f = 0.1f, .step = 5}},
    {OP_CONV2D_SC, BF16, 0, {.N = 2, .H = 5, .W = 7, .C = 16, .Co = 24}},
    {OP_CONV2D_SC, BF16, 0, {.N = 2, .H = 9, .W = 8, .C = 40, .C2 = 8, .Co = 72, .G = 8, .act = SG_ACT_SILU, .fused = 1}},
};

/* Refusals: the CUDA launchers take one accumulate flag per backward output, shared by the
 * halves of a concatenation, by dw and db, by dgamma and dbeta, and none for forward ops; the
 * CPU honours every bit. The CUDA backend must refuse these plans in prepare, not compute
 * something else (with --second cpu they run as ordinary cases). */
static const bo_entry refusals[] = {
    {OP_CONV2D_BWD_DATA, F32, 0, {.N = 2, .H = 5, .W = 7, .C = 24, .C2 = 8, .Co = 40, .K = 1, .S = 1, .acc = 1, .acc_split = 1}},
    {OP_LINEAR_BWD_WEIGHT, F32, 0, {.N = 5, .C = 37, .Co = 70, .acc = 1, .acc_split = 1}},
    {OP_CONV2D_BWD_WEIGHT, F32, 0, {.N = 2, .H = 7, .W = 9, .C = 5, .Co = 7, .K = 3, .S = 1, .acc = 1, .acc_split = 1}},
    {OP_UPCONV2D_BWD_WEIGHT, F32, 0, {.N = 2, .H = 3, .W = 5, .C = 24, .Co = 40, .acc = 1, .acc_split = 1}},
    {OP_GROUP_NORM_BWD, F32, 0, {.N = 2, .H = 7, .W = 9, .C = 24, .G = 6, .acc_param = 1, .acc_split = 1}},
    {OP_SILU, F32, 0, {.N = 2, .H = 5, .W = 7, .C = 9, .acc = 1}},
    {OP_NORM_ACT_BWD, F32, 0, {.N = 2, .H = 5, .W = 7, .C = 24, .G = 6, .act = SG_ACT_SILU, .acc_param = 1, .acc_split = 1}},
    /* a fused operand in fp32: the CUDA-core kernels have no prologue */
    {OP_CONV2D, F32, 0, {.N = 2, .H = 5, .W = 7, .C = 16, .Co = 24, .K = 3, .S = 1, .G = 8, .act = SG_ACT_SILU, .fused = 1}},
    {OP_CONV2D_BWD_WEIGHT, F32, 0, {.N = 2, .H = 5, .W = 7, .C = 16, .Co = 24, .K = 3, .S = 1, .G = 8, .act = SG_ACT_SILU, .fused = 2, .f = 0.1f}},
    /* bf16 whose channels the tensor cores do not take */
    {OP_CONV2D, BF16, 0, {.N = 2, .H = 5, .W = 7, .C = 12, .Co = 24, .K = 3, .S = 1, .G = 4, .act = SG_ACT_SILU, .fused = 1}},
    /* the shortcut fold has no path off the tensor cores: fp32, and a 12-channel x */
    {OP_CONV2D_SC, F32, 0, {.N = 2, .H = 5, .W = 7, .C = 16, .C2 = 8, .Co = 24}},
    {OP_CONV2D_SC, BF16, 0, {.N = 2, .H = 5, .W = 7, .C = 12, .Co = 24}},
};
/* clang-format on */

/* ---- running: fill the arena image, run both backends, compare */

typedef struct {
    const char *second; /* "cuda" or "cpu" */
    int verbose, big;
    const char *only;
} bo_opts;

static int covered[OP_COUNT][2], covered_acc[OP_COUNT], covered_cat[OP_COUNT],
    covered_inplace[OP_COUNT], covered_fused[OP_COUNT];
static int n_cases;

static void put(uint8_t *img, const sg_tensor *x, int64_t i, double v) {
    uint8_t *d = img + x->offset;
    switch (x->dtype) {
    case DT_F32: {
        float f = (float)v;
        memcpy(d + 4 * i, &f, 4);
        break;
    }
    case DT_BF16: {
        sg_bf16 h = sg_f32_to_bf16((float)v);
        memcpy(d + 2 * i, &h, 2);
        break;
    }
    case DT_I32: {
        int32_t k = (int32_t)v;
        memcpy(d + 4 * i, &k, 4);
        break;
    }
    case DT_U32: {
        uint32_t k = (uint32_t)v;
        memcpy(d + 4 * i, &k, 4);
        break;
    }
    case DT_I64: {
        int64_t k = (int64_t)v;
        memcpy(d + 8 * i, &k, 8);
        break;
    }
    case DT_U64: {
        uint64_t k = (uint64_t)v;
        memcpy(d + 8 * i, &k, 8);
        break;
    }
    case DT_U8:
        d[i] = (uint8_t)v;
        break;
    default:
        break;
    }
}

/* the arena as both backends start: 0xFF, then every filled tensor's values */
static void make_image(const bo_case *c, uint8_t *img) {
    const sg_graph *g = &c->p.g;
    for (int k = 0; k < c->nseg; k++)
        memset(img + c->seg[k][0], POISON, (size_t)(c->seg[k][1] - c->seg[k][0]));
    for (int t = 0; t < g->nt; t++) {
        const sg_tensor *x = &g->t[t];
        const fill_spec *f = &c->fill[t];
        if (sg_tensor_virtual(x) || x->offset < 0 || f->kind == FILL_POISON) continue;
        int64_t n = sg_numel(x);
        for (int64_t i = 0; i < n; i++) {
            switch (f->kind) {
            case FILL_INT:
                put(img, x, i,
                    f->lo + sg_rng_index(c->seed, t, BO_PURPOSE, (uint64_t)i,
                                         (uint32_t)(f->hi - f->lo + 1)));
                break;
            case FILL_BYTES:
                put(img, x, i, sg_rng_index(c->seed, t, BO_PURPOSE, (uint64_t)i, 256));
                break;
            case FILL_CONST: /* exact for 64-bit integers too: not through a float */
                put(img, x, i, f->lo);
                break;
            case FILL_RAW:
                if (i == 0) memcpy(img + x->offset, f->raw, (size_t)x->bytes);
                break;
            default:
                put(img, x, i, fill_value(c, t, i));
                break;
            }
        }
    }
}

static double get(const uint8_t *img, const sg_tensor *x, int64_t i) {
    const uint8_t *d = img + x->offset;
    switch (x->dtype) {
    case DT_F32: {
        float f;
        memcpy(&f, d + 4 * i, 4);
        return f;
    }
    case DT_BF16: {
        sg_bf16 h;
        memcpy(&h, d + 2 * i, 2);
        return sg_bf16_to_f32(h);
    }
    case DT_I32: {
        int32_t k;
        memcpy(&k, d + 4 * i, 4);
        return k;
    }
    case DT_U32: {
        uint32_t k;
        memcpy(&k, d + 4 * i, 4);
        return k;
    }
    case DT_I64: {
        int64_t k;
        memcpy(&k, d + 8 * i, 8);
        return (double)k;
    }
    case DT_U64: {
        uint64_t k;
        memcpy(&k, d + 8 * i, 8);
        return (double)k;
    }
    case DT_U8:
        return d[i];
    default:
        return NAN;
    }
}

static const char *dt_name(int dt) {
    return dt >= 0 && dt < DT_COUNT ? sg_dtype_names[dt] : "?";
}

/* "index 123 (n 0, h 3, w 4, c 5)" */
static const char *where(const sg_tensor *x, int64_t i, char *buf, size_t cap) {
    if (x->ndim == 4) {
        int64_t c = i % x->shape[3], w = i / x->shape[3] % x->shape[2];
        int64_t h = i / x->shape[3] / x->shape[2] % x->shape[1];
        int64_t n = i / x->shape[3] / x->shape[2] / x->shape[1];
        snprintf(buf, cap, "index %lld [%lld,%lld,%lld,%lld]", (long long)i, (long long)n,
                 (long long)h, (long long)w, (long long)c);
    } else {
        snprintf(buf, cap, "index %lld", (long long)i);
    }
    return buf;
}

static int is_float(int dt) {
    return dt == DT_F32 || dt == DT_BF16;
}

/* one output tensor: ref (the CPU's arena) against got (the second backend's) */
static double compare_output(const char *cs, const char *bname, const sg_tensor *x,
                             const uint8_t *ref, const uint8_t *got, int cat) {
    char w[96];
    int64_t n = sg_numel(x);
    if (!is_float(x->dtype)) {
        for (int64_t i = 0; i < n; i++) {
            double a = get(ref, x, i), b = get(got, x, i);
            if (a != b) {
                CHECK(0, "%s: %s (%s) differs at %s: cpu %.17g, %s %.17g", cs, x->name,
                      dt_name(x->dtype), where(x, i, w, sizeof w), a, bname, b);
                return INFINITY;
            }
        }
        return 0;
    }
    double tol = cat == TOL_EXACT ? 0 : x->dtype == DT_BF16 ? TOL_BF16 : tol_value[cat];
    double worst = -1, den = 1e-30;
    int64_t wi = 0;
    for (int64_t i = 0; i < n; i++) {
        double a = get(ref, x, i), b = get(got, x, i);
        if (!isfinite(a) || !isfinite(b)) {
            CHECK(0,
                  "%s: %s (%s) not finite at %s: cpu %g, %s %g (the arena starts as 0xFF, NaN: "
                  "an element never written, or computed from bytes outside the inputs)",
                  cs, x->name, dt_name(x->dtype), where(x, i, w, sizeof w), a, bname, b);
            return INFINITY;
        }
        if (fabs(a) > den) den = fabs(a);
        if (fabs(a - b) > worst) worst = fabs(a - b), wi = i;
    }
    double err = worst / den;
    CHECK(err <= tol,
          "%s: %s (%s) normalised error %.3g > %.3g; worst at %s: cpu %.9g, %s %.9g (max |cpu| "
          "%.6g)",
          cs, x->name, dt_name(x->dtype), err, tol, where(x, wi, w, sizeof w), get(ref, x, wi),
          bname, get(got, x, wi), den);
    return err;
}

/* which tensor (or the padding after which) byte `off` of the arena belongs to */
static const char *owner(const sg_graph *g, int64_t off, char *buf, size_t cap) {
    int best = -1;
    for (int t = 0; t < g->nt; t++) {
        const sg_tensor *x = &g->t[t];
        if (sg_tensor_virtual(x) || x->offset < 0 || x->offset > off) continue;
        if (best < 0 || x->offset > g->t[best].offset) best = t;
    }
    if (best < 0) return "nothing";
    const sg_tensor *x = &g->t[best];
    snprintf(buf, cap, "%s %s (byte %lld of %lld)",
             off < x->offset + x->bytes ? "tensor" : "padding after", x->name,
             (long long)(off - x->offset), (long long)x->bytes);
    return buf;
}

/* Bytes that may change: MASK_OUT for the stored outputs of every node, MASK_WS for the
 * workspace (whose contents are the kernels' business). */
enum { MASK_KEEP = 0, MASK_OUT = 1, MASK_WS = 2 };

static void mark_writable(const bo_case *c, uint8_t *mask) {
    const sg_graph *g = &c->p.g;
    for (int k = 0; k < c->nseg; k++)
        memset(mask + c->seg[k][0], MASK_KEEP, (size_t)(c->seg[k][1] - c->seg[k][0]));
    for (int t = 0; t < g->nt; t++)
        if (g->t[t].role == ROLE_WORKSPACE && g->t[t].offset >= 0 &&
            strcmp(g->t[t].name, "cublas_workspace")) /* that one lies outside the segments */
            memset(mask + g->t[t].offset, MASK_WS, (size_t)g->t[t].bytes);
    for (int i = 0; i < g->nn; i++)
        for (int k = 0; k < g->n[i].nout && g->n[i].op != OP_CONCAT; k++) {
            /* (a concatenation writes nothing: its virtual output is its two inputs) */
            const sg_tensor *y = &g->t[g->n[i].out[k]];
            if (y->vnorm >= 0) continue; /* virtual: nothing is written */
            for (int p = 0; p < (y->nparts ? 2 : 1); p++) {
                const sg_tensor *s = y->nparts ? &g->t[y->parts[p]] : y;
                memset(mask + s->offset, MASK_OUT, (size_t)s->bytes);
            }
        }
}

/* the first byte outside the workspace (and, with keep_only, outside the outputs) where a and
 * b differ, or -1. Scans 4 KiB blocks with memcmp first: the arena is mostly cuBLAS workspace
 * and untouched inputs. */
static int64_t first_diff(const bo_case *c, const uint8_t *a, const uint8_t *b, const uint8_t *mask,
                          int keep_only) {
    for (int k = 0; k < c->nseg; k++)
        for (int64_t blk = c->seg[k][0]; blk < c->seg[k][1]; blk += 4096) {
            int64_t len = c->seg[k][1] - blk < 4096 ? c->seg[k][1] - blk : 4096;
            if (!memcmp(a + blk, b + blk, (size_t)len)) continue;
            for (int64_t off = blk; off < blk + len; off++)
                if (a[off] != b[off] && (keep_only ? mask[off] == MASK_KEEP : mask[off] != MASK_WS))
                    return off;
        }
    return -1;
}

static void check_untouched(const char *cs, const char *bname, const bo_case *c, const uint8_t *img,
                            const uint8_t *got, const uint8_t *mask) {
    char w[SG_NAME_MAX + 64];
    int64_t off = first_diff(c, img, got, mask, 1);
    CHECK(off < 0, "%s: %s wrote outside the outputs: arena byte %lld, in %s: 0x%02x -> 0x%02x", cs,
          bname, (long long)off, owner(&c->p.g, off, w, sizeof w), img[off < 0 ? 0 : off],
          got[off < 0 ? 0 : off]);
}

static int run_backend(sg_backend *be, const bo_case *c, const uint8_t *img, uint8_t *out,
                       int reps) {
    if (be->prepare(be, &c->p)) return SG_ERR;
    for (int r = 0; r < reps; r++) {
        uint8_t *o = out + (size_t)r * (size_t)c->p.arena_bytes;
        for (int k = 0; k < c->nseg; k++)
            if (be->upload(be, c->seg[k][0], img + c->seg[k][0], c->seg[k][1] - c->seg[k][0]))
                return SG_ERR;
        for (int i = 0; i < c->p.g.nn; i++)
            if (be->run_node(be, &c->p, i)) return SG_ERR;
        if (be->sync(be)) return SG_ERR;
        for (int k = 0; k < c->nseg; k++)
            if (be->download(be, c->seg[k][0], o + c->seg[k][0], c->seg[k][1] - c->seg[k][0]))
                return SG_ERR;
    }
    return SG_OK;
}

static sg_backend *make_second(const bo_opts *o) {
    return strcmp(o->second, "cpu") ? sg_backend_cuda_create(0, 0) : sg_backend_cpu_create();
}

/* "conv2d bf16 N2 H9 W6 C37+40 Co70 K3 S1 acc" */
static void case_name(char *buf, size_t cap, sg_op op, sg_dtype dt, const bo_args *a) {
    int k = snprintf(buf, cap, "%s %s", sg_ops[op].name, props[op].act ? dt_name(dt) : "-");
#define FIELD(f, fmt)                                                                              \
    if (a->f && k < (int)cap) k += snprintf(buf + k, cap - (size_t)k, fmt, a->f)
    FIELD(N, " N%d");
    FIELD(H, " H%d");
    FIELD(W, " W%d");
    FIELD(C, " C%d");
    FIELD(C2, "+%d");
    FIELD(Co, " Co%d");
    FIELD(K, " K%d");
    FIELD(S, " S%d");
    FIELD(G, " G%d");
    FIELD(heads, " heads%d");
    FIELD(T, " T%d");
    FIELD(ndata, " data%d");
    FIELD(flip, " flip%d");
    FIELD(warmup, " warmup%d");
    if (a->step && k < (int)cap)
        k += snprintf(buf + k, cap - (size_t)k, " step%lld", (long long)a->step);
    FIELD(f, " f%g");
    FIELD(v, " v%g");
    FIELD(same, " same%d");
    FIELD(act, " act%d");
    FIELD(fused, " fused%d");
#undef FIELD
    if (a->acc && k < (int)cap) k += snprintf(buf + k, cap - (size_t)k, " accum");
    if (a->acc_param && k < (int)cap) k += snprintf(buf + k, cap - (size_t)k, " accum_param");
    if (a->inplace && k < (int)cap) k += snprintf(buf + k, cap - (size_t)k, " in-place");
    if (a->acc_split && k < (int)cap) k += snprintf(buf + k, cap - (size_t)k, " split");
    if (a->mixed && k < (int)cap) snprintf(buf + k, cap - (size_t)k, " mixed");
}

/* SG_CONV_TC=wgmma in the environment with --second cuda (ctest backend_ops_wgmma): the bf16
 * conv cases run on the Hopper wgmma kernels (graph/backend_cuda_engines.c routes them; the host
 * emulation is a compute capability 9.0 device), and the fp32 conv cases must be refused at
 * prepare with the reason (bf16 only), which counts as their fp32 coverage. */
static int g_wgmma;

static void run_case(const bo_entry *e, int refuse, sg_dtype dt, const bo_opts *o, int index) {
    char cs[256];
    case_name(cs, sizeof cs, e->op, dt, &e->a);
    bo_case c;
    memset(&c, 0, sizeof c);
    c.seed = 0x5eed0000ull + (uint64_t)index * 2654435761ull;
    sg_graph_init(&c.p.g);
    int failed_before = sg_test_failed;

    int rc = builders[e->op](&c, &e->a, dt);
    if (rc || c.err) {
        CHECK(0, "%s: building the node failed: %s", cs, sg_last_error());
        goto done;
    }
    if (sg_plan_layout(&c.p)) {
        CHECK(0, "%s: sg_plan_layout: %s", cs, sg_last_error());
        goto done;
    }
    const sg_graph *g = &c.p.g;
    const sg_node *nd = &g->n[g->nn - 1]; /* the op under test is the last node */
    const int wg_refuse = g_wgmma && dt == DT_F32 &&
                          (e->op == OP_CONV2D || e->op == OP_CONV2D_ADD ||
                           e->op == OP_CONV2D_BWD_DATA || e->op == OP_CONV2D_BWD_WEIGHT);
    if ((refuse || wg_refuse) && strcmp(o->second, "cpu")) {
        sg_backend *r = make_second(o);
        int prc = r ? r->prepare(r, &c.p) : SG_OK;
        CHECK(r && prc != SG_OK,
              "%s: the %s backend accepted a plan its kernels cannot compute as the CPU does", cs,
              r ? r->name : o->second);
        if (wg_refuse && !refuse && r && prc != SG_OK) {
            CHECK(strstr(sg_last_error(), "SG_CONV_TC=wgmma") &&
                      strstr(sg_last_error(), "bf16 only"),
                  "%s: SG_CONV_TC=wgmma must refuse an fp32 conv with the reason, said: %s", cs,
                  sg_last_error());
            if (sg_test_failed == failed_before) covered[e->op][0]++;
        }
        /* the fold's fp32 case: its refusal, with the reason, is its fp32 coverage */
        if (refuse && e->op == OP_CONV2D_SC && dt == DT_F32 && r && prc != SG_OK) {
            CHECK(strstr(sg_last_error(), "tensor-core convolutions only") != NULL,
                  "%s: the fold's refusal must say why, said: %s", cs, sg_last_error());
            if (sg_test_failed == failed_before) covered[e->op][0]++;
        }
        if (o->verbose && r && prc != SG_OK)
            printf("ok   %-70s refused: %s\n", cs, sg_last_error());
        if (r) r->destroy(r);
        n_cases++;
        goto done;
    }
    int cw = sg_find_tensor(g, "cublas_workspace");
    c.nseg = 0;
    if (cw < 0) {
        c.seg[c.nseg][0] = 0, c.seg[c.nseg++][1] = c.p.arena_bytes;
    } else {
        if (g->t[cw].offset > 0) c.seg[c.nseg][0] = 0, c.seg[c.nseg++][1] = g->t[cw].offset;
        int64_t end = g->t[cw].offset + g->t[cw].bytes;
        if (end < c.p.arena_bytes) c.seg[c.nseg][0] = end, c.seg[c.nseg++][1] = c.p.arena_bytes;
    }
    size_t ab = (size_t)c.p.arena_bytes;
    uint8_t *img = malloc(ab), *mask = malloc(ab), *ref = malloc(ab), *got = malloc(2 * ab);
    if (!img || !mask || !ref || !got) {
        CHECK(0, "%s: out of host memory for a %zu-byte arena", cs, ab);
        free(img), free(mask), free(ref), free(got);
        goto done;
    }
    make_image(&c, img);
    mark_writable(&c, mask);

    sg_backend *a = sg_backend_cpu_create(), *b = make_second(o);
    if (!a || !b) {
        CHECK(0, "%s: creating the backends: %s", cs, sg_last_error());
    } else if (run_backend(a, &c, img, ref, 1)) {
        CHECK(0, "%s: cpu: %s", cs, sg_last_error());
    } else if (run_backend(b, &c, img, got, 2)) {
        CHECK(0, "%s: %s: %s", cs, b->name, sg_last_error());
    } else {
        double worst = 0;
        /* cuDNN has no deterministic bf16 backward-filter engine that writes an fp32 dw: its
         * dw_bf16 variant rounds dw to bf16 before widening it (kernels/cuda/cudnn_conv.c), so
         * that fp32 output is held to the bf16 tolerance; the own engine's dw stays at fp32's */
        char eng[96] = "";
        if (b->node_engine) b->node_engine(b, &c.p, g->nn - 1, eng, (int)sizeof eng);
        /* ... and so is a fused bf16 op's fp32 output where the second backend recomputes the
         * normalised operand with SiLU (a weight gradient's dw): CUDA's bf16 SiLU runs on the
         * hardware's approximations (kernels/cuda/norm_apply.cuh), so the rare y value within
         * 2^-18 of a bf16 rounding boundary rounds the other way from the CPU's, and the fp32
         * sums see operands an ulp apart */
        const int silu_fused = dt == DT_BF16 && e->a.fused && e->a.act == SG_ACT_SILU;
        const int tol = strstr(eng, "+dw_bf16") || silu_fused ? TOL_BF16_OUT : props[e->op].tol;
        for (int k = 0; k < nd->nout; k++) {
            const sg_tensor *y = &g->t[nd->out[k]];
            for (int p = 0; p < (y->nparts ? 2 : 1); p++) {
                const sg_tensor *s = y->nparts ? &g->t[y->parts[p]] : y;
                double err = compare_output(cs, b->name, s, ref, got, tol);
                if (err > worst) worst = err;
            }
        }
        check_untouched(cs, "cpu", &c, img, ref, mask);
        check_untouched(cs, b->name, &c, img, got, mask);
        /* the second run from the same image: the same bits (the workspace aside) */
        int64_t off = first_diff(&c, got, got + ab, mask, 0);
        char w[SG_NAME_MAX + 64];
        CHECK(off < 0, "%s: %s is not deterministic: arena byte %lld (%s) differs between two runs",
              cs, b->name, (long long)off, owner(g, off, w, sizeof w));
        if (o->verbose)
            printf("%-4s %-70s err %.3g\n", sg_test_failed > failed_before ? "FAIL" : "ok", cs,
                   worst);
    }
    if (a) a->destroy(a);
    if (b) b->destroy(b);
    free(img), free(mask), free(ref), free(got);

    /* coverage, from what actually ran (a refusal case shows nothing about the CUDA path; with
     * --second cpu it ran as an ordinary case) */
    if (sg_test_failed == failed_before && (!refuse || !strcmp(o->second, "cpu"))) {
        for (int i = 0; i < g->nn; i++) {
            const sg_node *x = &g->n[i];
            covered[x->op][dt == DT_BF16]++;
            if (x->accum) covered_acc[x->op]++;
            for (int k = 0; k < x->nin; k++) covered_cat[x->op] += g->t[x->in[k]].nparts > 0;
            for (int k = 0; k < x->nout; k++) covered_cat[x->op] += g->t[x->out[k]].nparts > 0;
            for (int k = 0; k < x->nin; k++) covered_fused[x->op] += g->t[x->in[k]].vnorm >= 0;
            covered_fused[x->op] += g->t[x->out[0]].vnorm >= 0;
            if (x->op == OP_CONCAT) covered_cat[x->op]++;
            if (sg_ops[x->op].inplace && c.p.buffer_of[x->in[0]] == c.p.buffer_of[x->out[0]])
                covered_inplace[x->op]++;
        }
    }
    n_cases++;
done:
    for (int t = 0; t < BO_MAX_T; t++) free(c.fill[t].data), free(c.fill[t].raw);
    sg_plan_free(&c.p);
}

static int coverage(const bo_opts *o) {
    int missing = 0;
    for (int op = 0; op < OP_COUNT; op++) {
        if (o->only && strcmp(o->only, sg_ops[op].name)) continue;
        const char *nm = sg_ops[op].name ? sg_ops[op].name : "(unnamed)";
        if (!covered[op][0]) {
            CHECK(0, "coverage: %s never ran (in fp32) and passed", nm);
            missing++;
        }
        if (props[op].act && !covered[op][1]) {
            CHECK(0, "coverage: %s never ran in bf16 and passed", nm);
            missing++;
        }
        if (props[op].accum && !covered_acc[op]) {
            CHECK(0, "coverage: %s never ran accumulating", nm);
            missing++;
        }
        if (props[op].fused && !covered_fused[op]) {
            CHECK(0, "coverage: %s never ran with a fused (virtual normalised) operand", nm);
            missing++;
        }
        if (props[op].concat && !covered_cat[op]) {
            CHECK(0, "coverage: %s never ran on a concatenation", nm);
            missing++;
        }
        if (sg_ops[op].inplace && !covered_inplace[op]) {
            CHECK(0, "coverage: %s never ran in place", nm);
            missing++;
        }
    }
    return missing;
}

int main(int argc, char **argv) {
    bo_opts o = {.second = "cuda"};
    int skip_without_gpu = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--second") && i + 1 < argc) {
            o.second = argv[++i];
        } else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
            o.only = argv[++i];
        } else if (!strcmp(argv[i], "--big")) {
            o.big = 1;
        } else if (!strcmp(argv[i], "--skip-without-gpu")) {
            skip_without_gpu = 1;
        } else if (!strcmp(argv[i], "-v")) {
            o.verbose = 1;
        } else {
            fprintf(stderr,
                    "usage: %s [--second cpu|cuda] [--skip-without-gpu] [--big] [--only OP] [-v]\n",
                    argv[0]);
            return 2;
        }
    }
    if (strcmp(o.second, "cpu") && strcmp(o.second, "cuda")) {
        fprintf(stderr, "--second: cpu or cuda, not '%s'\n", o.second);
        return 2;
    }
    g_wgmma =
        !strcmp(o.second, "cuda") && getenv("SG_CONV_TC") && !strcmp(getenv("SG_CONV_TC"), "wgmma");
    if (!strcmp(o.second, "cuda")) {
        sg_backend *probe = sg_backend_cuda_create(0, 0);
        if (!probe) {
            if (skip_without_gpu) {
                printf("no CUDA device (%s): skipped\n", sg_last_error());
                return SG_TEST_SKIP;
            }
            fprintf(stderr, "FAIL: no CUDA backend: %s\n", sg_last_error());
            return 1;
        }
        probe->destroy(probe);
    }
    for (int op = 0; op < OP_COUNT; op++)
        if (op != OP_CONCAT && !builders[op])
            CHECK(0, "op %s has no builder in test_backend_ops.c", sg_ops[op].name);

    for (int pass = 0; pass < 2; pass++) {
        const bo_entry *list = pass ? refusals : entries;
        int n = pass ? SG_ARRAY_LEN(refusals) : SG_ARRAY_LEN(entries);
        for (int i = 0; i < n; i++) {
            const bo_entry *e = &list[i];
            if (e->big && !o.big) continue;
            if (o.only && strcmp(o.only, sg_ops[e->op].name) &&
                !(e->a.C2 > 0 && !strcmp(o.only, "concat")))
                continue;
            for (int d = 0; d < 2; d++) {
                if (!(e->dts & (d ? BF16 : F32))) continue;
                if (d && !props[e->op].act) continue;
                run_case(e, pass, d ? DT_BF16 : DT_F32, &o, (pass * 1000 + i) * 2 + d);
            }
        }
    }
    int missing = coverage(&o);
    printf("backend_ops: cpu vs %s: %d cases, %d coverage gaps\n", o.second, n_cases, missing);
    return sg_test_end();
}
