/* backend_cpu.c — the CPU reference backend: runs a plan's schedule with kernels/cpu.
 *
 * The CPU kernels are fp32-in, fp32-out, overwrite-only. This file adapts every node to that
 * contract: a bf16 operand or a virtual (two-part channel concatenation) operand is converted
 * into preallocated fp32 scratch before the call, and an output that is bf16, virtual, or
 * accumulating (gradient += contribution) is computed into scratch and then written back —
 * added to what is there when its accum bit is set, rounded to bf16 (nearest even) when
 * stored as bf16. fp32 operands are used in place in the arena. The scratch is sized once in
 * prepare() from the plan, so a step allocates nothing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/philox.h"
#include "graph/backend.h"
#include "kernels/cpu/cpu_kernels.h"
#include "planner/op_dims.h"

typedef struct {
    unsigned char *arena;
    int64_t arena_bytes;
    float *scratch;
    int64_t scratch_floats;
    float *dp_buf, *dp_tmp; /* OP_ALLREDUCE: gradients + loss packed, and the receive scratch */
    int64_t dp_n;
} cpu_ctx;

static int is_float(sg_dtype dt) {
    return dt == DT_F32 || dt == DT_BF16;
}

/* fp32 values of tensor t (or the channel concatenation of its parts) into dst */
static void gather_f32(const cpu_ctx *c, const sg_graph *g, int t, float *dst) {
    const sg_tensor *x = &g->t[t];
    if (!x->nparts) {
        int64_t n = sg_numel(x);
        const void *src = c->arena + x->offset;
        if (x->dtype == DT_F32)
            memcpy(dst, src, (size_t)n * 4);
        else
            for (int64_t i = 0; i < n; i++) dst[i] = sg_bf16_to_f32(((const sg_bf16 *)src)[i]);
        return;
    }
    const sg_tensor *a = &g->t[x->parts[0]], *b = &g->t[x->parts[1]];
    int64_t ca = a->shape[3], cb = b->shape[3], pix = sg_numel(a) / ca;
    for (int64_t p = 0; p < pix; p++)
        for (int part = 0; part < 2; part++) {
            const sg_tensor *s = part ? b : a;
            int64_t cs = part ? cb : ca;
            float *d = dst + p * (ca + cb) + (part ? ca : 0);
            const void *src = c->arena + s->offset;
            for (int64_t k = 0; k < cs; k++)
                d[k] = s->dtype == DT_F32 ? ((const float *)src)[p * cs + k]
                                          : sg_bf16_to_f32(((const sg_bf16 *)src)[p * cs + k]);
        }
}

/* store n fp32 values of one stored tensor; add to the existing values when accum */
static void store_part(cpu_ctx *c, const sg_tensor *s, int64_t i0, int64_t stride, int64_t cs,
                       int64_t ccat, int64_t coff, const float *src, int64_t pix, int accum) {
    (void)i0;
    void *base = c->arena + s->offset;
    for (int64_t p = 0; p < pix; p++)
        for (int64_t k = 0; k < cs; k++) {
            float v = src[p * ccat + coff + k];
            int64_t j = p * stride + k;
            if (s->dtype == DT_F32) {
                float *d = (float *)base + j;
                *d = accum ? *d + v : v;
            } else {
                sg_bf16 *d = (sg_bf16 *)base + j;
                *d = sg_f32_to_bf16(accum ? sg_bf16_to_f32(*d) + v : v);
            }
        }
}

static void scatter_f32(cpu_ctx *c, const sg_graph *g, int t, const float *src, unsigned bits) {
    const sg_tensor *x = &g->t[t];
    if (!x->nparts) {
        int64_t n = sg_numel(x);
        store_part(c, x, 0, 1, 1, 1, 0, src, n, bits & 1u);
        return;
    }
    const sg_tensor *a = &g->t[x->parts[0]], *b = &g->t[x->parts[1]];
    int64_t ca = a->shape[3], cb = b->shape[3], pix = sg_numel(a) / ca;
    store_part(c, a, 0, ca, ca, ca + cb, 0, src, pix, bits & 1u);
    store_part(c, b, 0, cb, cb, ca + cb, ca, src, pix, (bits >> 1) & 1u);
}

/* an operand needs scratch unless it is a plain fp32 tensor (and, for outputs, overwritten) */
static int in_direct(const sg_tensor *x) {
    return !x->nparts && (x->dtype == DT_F32 || !is_float(x->dtype));
}
static int out_direct(const sg_tensor *x, unsigned bits) {
    return in_direct(x) && !(bits & 3u);
}

/* A plan for N ranks needs a communicator of N ranks; its all-reduce packs the gradient
 * region and the loss into one buffer (one collective per step), sized here once. */
static int prepare_allreduce(sg_backend *be, const sg_plan *p) {
    cpu_ctx *c = be->ctx;
    free(c->dp_buf);
    c->dp_buf = c->dp_tmp = NULL;
    for (int i = 0; i < p->g.nn; i++) {
        const sg_node *nd = &p->g.n[i];
        if (nd->op != OP_ALLREDUCE) continue;
        const int size = be->dist ? be->dist->size : 1;
        if (size != nd->a.allreduce.ranks)
            return sg_set_error("the plan is for %d ranks but this process is one of %d (the "
                                "global batch is split by the launcher's rank count)",
                                nd->a.allreduce.ranks, size);
        c->dp_n = sg_numel(&p->g.t[nd->in[0]]) + 1;
        c->dp_buf = malloc(sizeof(float) * (size_t)c->dp_n * 2);
        if (!c->dp_buf) return sg_set_error("cpu backend: cannot allocate the all-reduce buffers");
        c->dp_tmp = c->dp_buf + c->dp_n;
    }
    return SG_OK;
}

/* OP_ALLREDUCE: gradients summed over the ranks, the loss averaged; the fixed-order sum of
 * graph/dist.c gives every rank the same bits. One rank: the sum is the identity and the
 * mean multiplies by 1/1. Both operands are fp32 and updated in place. */
static int cpu_allreduce(sg_backend *be, const sg_graph *g, const sg_node *nd, float *grads,
                         float *loss) {
    cpu_ctx *c = be->ctx;
    const int64_t n = sg_numel(&g->t[nd->in[0]]);
    if (!c->dp_buf || n + 1 != c->dp_n) return sg_set_error("allreduce: backend not prepared");
    if (be->dist && be->dist->size > 1) {
        memcpy(c->dp_buf, grads, sizeof(float) * (size_t)n);
        c->dp_buf[n] = loss[0];
        if (be->dist->allreduce_sum(be->dist, c->dp_buf, c->dp_tmp, c->dp_n)) return SG_ERR;
        memcpy(grads, c->dp_buf, sizeof(float) * (size_t)n);
        loss[0] = c->dp_buf[n];
    }
    loss[0] *= nd->a.allreduce.loss_factor;
    return SG_OK;
}

static int cpu_prepare(sg_backend *be, const sg_plan *p) {
    cpu_ctx *c = be->ctx;
    free(c->arena);
    free(c->scratch);
    c->arena = calloc(1, (size_t)p->arena_bytes + 64);
    if (!c->arena)
        return sg_set_error("cpu backend: cannot allocate the %lld-byte arena",
                            (long long)p->arena_bytes);
    c->arena_bytes = p->arena_bytes;
    int64_t need = 0;
    for (int i = 0; i < p->g.nn; i++) {
        const sg_node *nd = &p->g.n[i];
        int64_t s = 0;
        for (int k = 0; k < nd->nin; k++)
            if (!in_direct(&p->g.t[nd->in[k]])) s += sg_numel(&p->g.t[nd->in[k]]);
        for (int k = 0; k < nd->nout; k++)
            if (!out_direct(&p->g.t[nd->out[k]], sg_accum_bits(nd, k)))
                s += sg_numel(&p->g.t[nd->out[k]]);
        if (s > need) need = s;
    }
    c->scratch_floats = need;
    c->scratch = malloc((size_t)(need ? need : 1) * sizeof(float));
    if (!c->scratch)
        return sg_set_error("cpu backend: cannot allocate %lld floats of scratch", (long long)need);
    return prepare_allreduce(be, p);
}

static int cpu_upload(sg_backend *be, int64_t off, const void *src, int64_t bytes) {
    cpu_ctx *c = be->ctx;
    if (off < 0 || off + bytes > c->arena_bytes) return sg_set_error("upload outside the arena");
    memcpy(c->arena + off, src, (size_t)bytes);
    return SG_OK;
}

static int cpu_download(sg_backend *be, int64_t off, void *dst, int64_t bytes) {
    cpu_ctx *c = be->ctx;
    if (off < 0 || off + bytes > c->arena_bytes) return sg_set_error("download outside the arena");
    memcpy(dst, c->arena + off, (size_t)bytes);
    return SG_OK;
}

/* pointers to every operand of node i: fp32 views in[] / out[] (direct or scratch) and raw
 * arena pointers for integer tensors; bf16 and virtual inputs are converted into scratch */
typedef struct {
    float *in[SG_MAX_IN], *out[SG_MAX_OUT];
    void *raw_in[SG_MAX_IN], *raw_out[SG_MAX_OUT];
} cpu_operands;

static void cpu_bind(cpu_ctx *c, const sg_graph *g, const sg_node *nd, cpu_operands *o) {
    float *s = c->scratch;
    for (int k = 0; k < nd->nin; k++) {
        const sg_tensor *x = &g->t[nd->in[k]];
        o->raw_in[k] = x->nparts ? NULL : c->arena + x->offset;
        if (in_direct(x)) {
            o->in[k] = (float *)o->raw_in[k];
        } else {
            o->in[k] = s;
            gather_f32(c, g, nd->in[k], s);
            s += sg_numel(x);
        }
    }
    for (int k = 0; k < nd->nout; k++) {
        const sg_tensor *y = &g->t[nd->out[k]];
        o->raw_out[k] = y->nparts ? NULL : c->arena + y->offset;
        if (out_direct(y, sg_accum_bits(nd, k))) {
            o->out[k] = (float *)o->raw_out[k];
        } else {
            o->out[k] = s;
            s += sg_numel(y);
        }
    }
}

/* the step inputs, model and loss ops; rank: this process's data-parallel rank (0 alone): its
 * slice starts at global sample rank*N, global element rank*numel of every sample-major
 * tensor (docs/data-parallel.md) */
static void cpu_forward_op(const sg_graph *g, const sg_node *nd, const cpu_operands *o,
                           uint64_t rank) {
    float *const *in = o->in, *const *out = o->out;
    void *const *raw_in = o->raw_in, *const *raw_out = o->raw_out;
    const uint64_t seed =
        nd->nin > 1 && g->t[nd->in[1]].dtype == DT_U64 ? *(uint64_t *)raw_in[1] : 0;
    const int64_t step = nd->nin > 2 && g->t[nd->in[2]].dtype == DT_I64 ? *(int64_t *)raw_in[2] : 0;
    const int64_t n0 = sg_out_numel(g, nd, 0);
    const sg_op_args *a = &nd->a;
    switch (nd->op) {
    case OP_GATHER_BATCH: {
        const sg_tensor *ds = &g->t[nd->in[0]];
        cpu_gather_batch(out[0], (const uint8_t *)raw_in[0], ds->shape[0], (int)ds->shape[1],
                         (int)ds->shape[2], (int)ds->shape[3], a->gather.N, a->gather.img,
                         a->gather.img, seed, step, a->gather.flip, a->gather.batch,
                         (int64_t)rank * a->gather.N);
        break;
    }
    case OP_SAMPLE_T:
        cpu_sample_timesteps((int32_t *)raw_out[0], a->sample_t.N, a->sample_t.T,
                             *(uint64_t *)raw_in[0], *(int64_t *)raw_in[1],
                             rank * (uint64_t)a->sample_t.N);
        break;
    case OP_NOISE:
        cpu_gaussian(out[0], n0, seed, step, SG_RNG_NOISE, rank * (uint64_t)n0);
        break;
    case OP_DDPM_NOISE: {
        int N = (int)g->t[nd->in[0]].shape[0];
        cpu_ddpm_noise(out[0], in[0], in[1], (const int32_t *)raw_in[2], N, (int)(n0 / N),
                       a->ddpm.T, a->ddpm.beta1, a->ddpm.betaT);
        break;
    }
    case OP_TIMESTEP_EMB:
        cpu_timestep_emb(out[0], (const int32_t *)raw_in[0], (int)g->t[nd->in[0]].shape[0],
                         a->temb.dim);
        break;
    case OP_LINEAR: {
        sg_linear_dims d = sg_linear_dims_of(g, nd);
        cpu_linear_fwd(out[0], in[0], in[1], in[2], d.N, d.K, d.M);
        break;
    }
    case OP_CONV2D: {
        sg_conv_dims d = sg_conv_dims_of(g, nd);
        cpu_conv2d_fwd(out[0], in[0], in[1], in[2], d.N, d.H, d.W, d.Ci, d.Co, d.K, d.S, d.pad);
        break;
    }
    case OP_GROUP_NORM: {
        sg_gn_dims d = sg_gn_dims_of(g, nd);
        cpu_group_norm_fwd(out[0], out[1], out[2], in[0], in[1], in[2], d.N, d.HW, d.C, d.G,
                           a->gn.eps);
        break;
    }
    case OP_SILU:
        cpu_silu_fwd(out[0], in[0], n0);
        break;
    case OP_ADD:
        cpu_add_fwd(out[0], in[0], in[1], n0);
        break;
    case OP_ADD_NC: {
        sg_nhwc_dims d = sg_nhwc_dims_of(g, nd);
        cpu_add_nc_fwd(out[0], in[0], in[1], d.N, d.HW, d.C);
        break;
    }
    case OP_UPSAMPLE2X: {
        sg_nhwc_dims d = sg_nhwc_dims_of(g, nd);
        cpu_upsample2x_fwd(out[0], in[0], d.N, d.H, d.W, d.C);
        break;
    }
    case OP_AVGPOOL2X: {
        sg_nhwc_dims d = sg_nhwc_dims_of(g, nd);
        cpu_avgpool2x_fwd(out[0], in[0], d.N, d.H, d.W, d.C);
        break;
    }
    case OP_ATTENTION: {
        sg_attn_dims d = sg_attn_dims_of(g, nd);
        cpu_attention_fwd(out[0], out[1], in[0], d.N, d.L, d.C, d.heads);
        break;
    }
    case OP_DROPOUT:
        cpu_dropout_fwd(out[0], in[0], n0, a->dropout.p, seed, step,
                        SG_RNG_DROPOUT_BASE + (uint32_t)a->dropout.purpose, rank * (uint64_t)n0);
        break;
    case OP_MSE:
        cpu_mse_fwd(out[0], in[0], in[1], sg_in_numel(g, nd, 0));
        break;
    default:
        SG_UNREACHABLE("cpu_forward_op: not a forward op");
    }
}

/* the backward and optimizer ops (OP_ALLREDUCE, which talks to the other ranks, is
 * cpu_allreduce) */
static void cpu_backward_op(const sg_graph *g, const sg_node *nd, const cpu_operands *o,
                            uint64_t rank) {
    float *const *in = o->in, *const *out = o->out;
    void *const *raw_in = o->raw_in, *const *raw_out = o->raw_out;
    const uint64_t seed =
        nd->nin > 1 && g->t[nd->in[1]].dtype == DT_U64 ? *(uint64_t *)raw_in[1] : 0;
    const int64_t step = nd->nin > 2 && g->t[nd->in[2]].dtype == DT_I64 ? *(int64_t *)raw_in[2] : 0;
    const int64_t n0 = sg_out_numel(g, nd, 0);
    const sg_op_args *a = &nd->a;
    switch (nd->op) {
    case OP_MSE_BWD:
        cpu_mse_bwd(out[0], in[0], in[1], n0, a->mse.loss_scale);
        break;
    case OP_LINEAR_BWD_DATA: {
        sg_linear_dims d = sg_linear_dims_of(g, nd);
        cpu_linear_bwd_data(out[0], in[0], in[1], d.N, d.K, d.M);
        break;
    }
    case OP_LINEAR_BWD_WEIGHT: {
        sg_linear_dims d = sg_linear_dims_of(g, nd);
        cpu_linear_bwd_weight(out[0], out[1], in[0], in[1], d.N, d.K, d.M);
        break;
    }
    case OP_CONV2D_BWD_DATA: {
        sg_conv_dims d = sg_conv_dims_of(g, nd);
        cpu_conv2d_bwd_data(out[0], in[0], in[1], d.N, d.H, d.W, d.Ci, d.Co, d.K, d.S, d.pad);
        break;
    }
    case OP_CONV2D_BWD_WEIGHT: {
        sg_conv_dims d = sg_conv_dims_of(g, nd);
        cpu_conv2d_bwd_weight(out[0], out[1], in[0], in[1], d.N, d.H, d.W, d.Ci, d.Co, d.K, d.S,
                              d.pad);
        break;
    }
    case OP_GROUP_NORM_BWD: {
        sg_gn_dims d = sg_gn_dims_of(g, nd);
        cpu_group_norm_bwd(out[0], out[1], out[2], in[0], in[1], in[2], in[3], in[4], d.N, d.HW,
                           d.C, d.G);
        break;
    }
    case OP_SILU_BWD:
        cpu_silu_bwd(out[0], in[0], in[1], n0);
        break;
    case OP_ADD_NC_BWD: {
        sg_nhwc_dims d = sg_nhwc_dims_of(g, nd);
        cpu_add_nc_bwd(out[0], in[0], d.N, d.HW, d.C);
        break;
    }
    case OP_UPSAMPLE2X_BWD: {
        sg_nhwc_dims d = sg_nhwc_dims_of(g, nd);
        cpu_upsample2x_bwd(out[0], in[0], d.N, d.H, d.W, d.C);
        break;
    }
    case OP_AVGPOOL2X_BWD: {
        sg_nhwc_dims d = sg_nhwc_dims_of(g, nd);
        cpu_avgpool2x_bwd(out[0], in[0], d.N, d.H, d.W, d.C);
        break;
    }
    case OP_ATTENTION_BWD: {
        sg_attn_dims d = sg_attn_dims_of(g, nd);
        cpu_attention_bwd(out[0], in[0], in[1], in[2], d.N, d.L, d.C, d.heads);
        break;
    }
    case OP_DROPOUT_BWD:
        cpu_dropout_bwd(out[0], in[0], n0, a->dropout.p, seed, step,
                        SG_RNG_DROPOUT_BASE + (uint32_t)a->dropout.purpose, rank * (uint64_t)n0);
        break;
    case OP_ACCUM:
        if (out[0] != in[0]) cpu_copy(out[0], in[0], n0); /* in place: nothing to move */
        break;
    case OP_GRAD_SUMSQ:
        cpu_sumsq(out[0], in[0], sg_in_numel(g, nd, 0));
        break;
    case OP_CLIP_SCALE:
        cpu_clip_scale(out[0], in[0], a->clip.max_norm);
        break;
    case OP_ADAMW:
        cpu_adamw(out[0], out[1], out[2], in[1], sg_in_numel(g, nd, 0), in[4],
                  *(int64_t *)raw_in[5], a->adamw.lr, a->adamw.b1, a->adamw.b2, a->adamw.eps,
                  a->adamw.wd, a->adamw.warmup, out[3]);
        break;
    case OP_EMA:
        cpu_ema(out[0], in[1], n0, a->ema.decay);
        break;
    case OP_STEP_INC:
        *(int64_t *)raw_out[0] += 1;
        break;
    case OP_LOSS_WATCH:
        cpu_loss_watch(in[0], in[1], raw_in[2], raw_out[0], out[1]);
        break;
    default:
        SG_UNREACHABLE("cpu_backward_op: not a backward or optimizer op");
    }
}

static int cpu_run_node(sg_backend *be, const sg_plan *p, int i) {
    cpu_ctx *c = be->ctx;
    const sg_graph *g = &p->g;
    const sg_node *nd = &g->n[i];
    if (nd->op == OP_CONCAT) return SG_OK; /* virtual: consumers read both parts */
    cpu_operands o;
    cpu_bind(c, g, nd, &o);
    const uint64_t rank = be->dist ? (uint64_t)be->dist->rank : 0;
    if (nd->op == OP_ALLREDUCE) {
        if (cpu_allreduce(be, g, nd, o.out[0], o.out[1])) return SG_ERR;
    } else if (sg_op_is_forward(nd->op)) {
        cpu_forward_op(g, nd, &o, rank);
    } else {
        cpu_backward_op(g, nd, &o, rank);
    }
    for (int k = 0; k < nd->nout; k++) {
        const sg_tensor *y = &g->t[nd->out[k]];
        if (!out_direct(y, sg_accum_bits(nd, k)))
            scatter_f32(c, g, nd->out[k], o.out[k], sg_accum_bits(nd, k));
    }
    return SG_OK;
}

static int cpu_run_step(sg_backend *be, const sg_plan *p) {
    for (int i = 0; i < p->g.nn; i++)
        if (cpu_run_node(be, p, i)) return SG_ERR;
    return SG_OK;
}

static double cpu_now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int cpu_time_steps(sg_backend *be, const sg_plan *p, int n, float *ms) {
    for (int i = 0; i < n; i++) {
        double t0 = cpu_now_ms();
        if (cpu_run_step(be, p)) return SG_ERR;
        ms[i] = (float)(cpu_now_ms() - t0);
    }
    return SG_OK;
}

static int cpu_time_nodes(sg_backend *be, const sg_plan *p, float *ms) {
    for (int i = 0; i < p->g.nn; i++) {
        double t0 = cpu_now_ms();
        if (cpu_run_node(be, p, i)) return SG_ERR;
        ms[i] = (float)(cpu_now_ms() - t0);
    }
    return SG_OK;
}

static double cpu_matmul_peak(sg_backend *be, int dtype) {
    (void)be, (void)dtype;
    return 0;
}

static int cpu_sync(sg_backend *be) {
    (void)be;
    return SG_OK;
}

static void cpu_describe(sg_backend *be, char *buf, int cap) {
    (void)be;
    snprintf(buf, (size_t)cap, "{\"backend\":\"cpu\"}");
}

static void cpu_destroy(sg_backend *be) {
    if (!be) return;
    cpu_ctx *c = be->ctx;
    if (c) {
        free(c->arena);
        free(c->scratch);
        free(c->dp_buf);
        free(c);
    }
    free(be);
}

sg_backend *sg_backend_cpu_create(void) {
    sg_backend *be = calloc(1, sizeof *be);
    cpu_ctx *c = calloc(1, sizeof *c);
    if (!be || !c) {
        free(be);
        free(c);
        sg_set_error("out of host memory");
        return NULL;
    }
    be->name = "cpu";
    be->ctx = c;
    be->prepare = cpu_prepare;
    be->upload = cpu_upload;
    be->download = cpu_download;
    be->run_node = cpu_run_node;
    be->run_step = cpu_run_step;
    be->sync = cpu_sync;
    be->time_steps = cpu_time_steps;
    be->time_nodes = cpu_time_nodes;
    be->matmul_peak_tflops = cpu_matmul_peak;
    be->describe = cpu_describe;
    be->destroy = cpu_destroy;
    return be;
}
