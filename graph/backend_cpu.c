/* backend_cpu.c — the CPU reference backend: runs a plan's schedule with kernels/cpu.
 *
 * The CPU kernels are fp32-in, fp32-out, overwrite-only. This file adapts every node to that
 * contract: a bf16 operand or a virtual (two-part channel concatenation) operand is converted
 * into preallocated fp32 scratch before the call, and an output that is bf16, virtual, or
 * accumulating (gradient += contribution) is computed into scratch and then written back —
 * added to what is there when its accum bit is set, rounded to bf16 (nearest even) when
 * stored as bf16. fp32 operands are used in place in the arena. The scratch is sized once in
 * prepare() from the plan, so a step allocates nothing. In bf16 runs a conv's or linear's
 * weights are the plan's bf16 copy of the parameters (a bf16 operand like any other), so it
 * multiplies exactly the bf16 weights the CUDA kernels do.
 *
 * A virtual normalised tensor (planner/fuse.c: a norm_act output computed inside the
 * convolutions that read it) is materialised into scratch for each reader by the apply kernel
 * on its node's operands, rounded to its dtype: exactly what the unfused plan stores and reads
 * (this backend is the reference of the fused kernels by construction). Its norm_act node runs
 * only the statistics pass.
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
    /* the plan's bf16 copy of the parameters (sg_plan_bf16_copy; copy_n 0: none), refreshed by
     * every upload into the parameter region */
    int64_t copy_param_off, copy_n, copy_off;
} cpu_ctx;

static int is_float(sg_dtype dt) {
    return dt == DT_F32 || dt == DT_BF16;
}

static void gather_f32(const cpu_ctx *c, const sg_graph *g, int t, float *dst, float *tmp,
                       int rank);

/* an operand needs scratch unless it is a plain fp32 tensor (and, for outputs, overwritten) */
static int in_direct(const sg_tensor *x) {
    return !sg_tensor_virtual(x) && (x->dtype == DT_F32 || !is_float(x->dtype));
}
static int out_direct(const sg_tensor *x, unsigned bits) {
    return in_direct(x) && !(bits & 3u);
}

/* Scratch floats gather_f32 takes beyond dst for tensor t: a virtual normalised tensor's x and
 * v converted to fp32 (x may be a concatenation), while its apply pass runs. */
static int64_t gather_tmp(const sg_graph *g, int t) {
    const sg_tensor *x = &g->t[t];
    if (x->vnorm < 0) return 0;
    const sg_node *nd = &g->n[x->vnorm];
    const sg_norm_operands o = sg_norm_operands_of(nd);
    int64_t n = in_direct(&g->t[nd->in[o.x]]) ? 0 : sg_in_numel(g, nd, o.x);
    if (o.temb && !in_direct(&g->t[nd->in[o.v]])) n += sg_in_numel(g, nd, o.v);
    return n;
}

/* The dropout key of a norm_act node as its kernels take it; raw_in: its inputs' arena
 * addresses. The elements start at the node's slice of the global batch. */
static cpu_norm_tail node_norm_tail(const sg_graph *g, const sg_node *nd, void *const *raw_in,
                                    uint64_t slice) {
    const sg_gn_args *a = &nd->a.gn;
    sg_norm_operands o = sg_norm_operands_of(nd);
    cpu_norm_tail t = {.act = a->act, .p = a->p};
    if (o.temb && a->p > 0.0f) {
        t.purpose = SG_RNG_DROPOUT_BASE + (uint32_t)a->purpose;
        t.seed = *(const uint64_t *)raw_in[o.seed];
        t.step = *(const int64_t *)raw_in[o.step];
        t.i0 = slice * (uint64_t)sg_in_numel(g, nd, o.x);
    }
    return t;
}

/* Virtual normalised tensor t into dst: its node's apply pass (norm_act_apply's kernel, on the
 * node's inputs and saved statistics), each value rounded to t's dtype as the unfused plan
 * stores it. tmp: gather_tmp(g, t) floats. */
static void gather_vnorm(const cpu_ctx *c, const sg_graph *g, int t, float *dst, float *tmp,
                         int rank) {
    const sg_tensor *y = &g->t[t];
    const sg_node *nd = &g->n[y->vnorm];
    const sg_norm_operands o = sg_norm_operands_of(nd);
    void *raw[SG_MAX_IN];
    float *in[SG_MAX_IN];
    for (int k = 0; k < nd->nin; k++) {
        const sg_tensor *x = &g->t[nd->in[k]];
        raw[k] = sg_tensor_virtual(x) ? NULL : c->arena + x->offset;
        in[k] = (float *)raw[k];
        if (is_float(x->dtype) && !in_direct(x)) {
            in[k] = tmp;
            gather_f32(c, g, nd->in[k], tmp, NULL, rank);
            tmp += sg_numel(x);
        }
    }
    const sg_tensor *mean = &g->t[nd->out[1]], *rstd = &g->t[nd->out[2]];
    SG_ASSERT(in_direct(mean) && in_direct(rstd));
    sg_gn_dims d = sg_gn_dims_of(g, nd);
    const cpu_norm_tail tail = node_norm_tail(g, nd, raw, sg_node_slice(g, nd, rank));
    cpu_norm_act_apply(dst, in[o.x], o.temb ? in[o.v] : NULL,
                       (const float *)(c->arena + mean->offset),
                       (const float *)(c->arena + rstd->offset), in[o.gamma], in[o.beta], d.N, d.HW,
                       d.C, d.G, &tail);
    if (y->dtype == DT_BF16)
        for (int64_t i = 0; i < sg_numel(y); i++) dst[i] = sg_bf16_to_f32(sg_f32_to_bf16(dst[i]));
}

/* fp32 values of tensor t (the channel concatenation of its parts, or a virtual normalised
 * tensor computed with gather_tmp(g, t) floats of tmp) into dst */
static void gather_f32(const cpu_ctx *c, const sg_graph *g, int t, float *dst, float *tmp,
                       int rank) {
    const sg_tensor *x = &g->t[t];
    if (x->vnorm >= 0) {
        gather_vnorm(c, g, t, dst, tmp, rank);
        return;
    }
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

/* store pix rows of cs fp32 values, read from src (rows ccat apart, from channel coff on), into
 * the stored tensor s (rows `stride` apart), rounding to bf16 if s is bf16; add to the values
 * there when accum */
static void store_part(cpu_ctx *c, const sg_tensor *s, int64_t stride, int64_t cs, int64_t ccat,
                       int64_t coff, const float *src, int64_t pix, int accum) {
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
        store_part(c, x, 1, 1, 1, 0, src, n, bits & 1u);
        return;
    }
    const sg_tensor *a = &g->t[x->parts[0]], *b = &g->t[x->parts[1]];
    int64_t ca = a->shape[3], cb = b->shape[3], pix = sg_numel(a) / ca;
    store_part(c, a, ca, ca, ca + cb, 0, src, pix, bits & 1u);
    store_part(c, b, cb, cb, ca + cb, ca, src, pix, (bits >> 1) & 1u);
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
    /* data-parallel ranks that share CPUs share them out (the same bits at any thread count) */
    if (be->dist && be->dist->cpu_sharers > 1) sg_cpu_share_threads(be->dist->cpu_sharers);
    free(c->arena);
    free(c->scratch);
    c->arena = calloc(1, (size_t)p->arena_bytes + 64);
    if (!c->arena)
        return sg_set_error("cpu backend: cannot allocate the %lld-byte arena",
                            (long long)p->arena_bytes);
    c->arena_bytes = p->arena_bytes;
    if (!sg_plan_bf16_copy(p, &c->copy_param_off, &c->copy_n, &c->copy_off)) c->copy_n = 0;
    int64_t need = 0;
    for (int i = 0; i < p->g.nn; i++) {
        const sg_node *nd = &p->g.n[i];
        int64_t s = 0, tmp = 0;
        for (int k = 0; k < nd->nin; k++) {
            if (!in_direct(&p->g.t[nd->in[k]])) s += sg_numel(&p->g.t[nd->in[k]]);
            const int64_t t = gather_tmp(&p->g, nd->in[k]);
            if (t > tmp) tmp = t;
        }
        for (int k = 0; k < nd->nout; k++)
            if (p->g.t[nd->out[k]].vnorm < 0 &&
                !out_direct(&p->g.t[nd->out[k]], sg_accum_bits(nd, k)))
                s += sg_numel(&p->g.t[nd->out[k]]);
        s += tmp; /* past the node's operands while one of them is materialised */
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
    /* parameters written: their bf16 copy follows, element for element (graph/backend.h) */
    int64_t i0, n;
    if (sg_backend_param_span(c->copy_param_off, c->copy_n, off, bytes, &i0, &n)) {
        const float *w = (const float *)(c->arena + c->copy_param_off) + i0;
        sg_bf16 *h = (sg_bf16 *)(c->arena + c->copy_off) + i0;
        for (int64_t i = 0; i < n; i++) h[i] = sg_f32_to_bf16(w[i]);
    }
    return SG_OK;
}

static int cpu_download(sg_backend *be, int64_t off, void *dst, int64_t bytes) {
    cpu_ctx *c = be->ctx;
    if (off < 0 || off + bytes > c->arena_bytes) return sg_set_error("download outside the arena");
    memcpy(dst, c->arena + off, (size_t)bytes);
    return SG_OK;
}

/* One node's call: its operands as fp32 views in[] / out[] (used in place, or converted into
 * scratch), raw arena pointers for integer tensors, and what many ops read. */
typedef struct {
    const sg_graph *g;
    const sg_node *nd;
    const sg_op_args *a;
    float *in[SG_MAX_IN], *out[SG_MAX_OUT];
    void *raw_in[SG_MAX_IN], *raw_out[SG_MAX_OUT];
    int64_t n0;    /* output 0's elements */
    uint64_t seed; /* input 1 when it is the u64 run seed (random ops), else 0 */
    int64_t step;  /* input 2 when it is the i64 step counter (random ops), else 0 */
    /* the node's slice of the global batch (sg_node_slice: the data-parallel rank, 0 alone, and
     * the node's micro-batch): its samples start at global sample slice*N, its elements at
     * global element slice*numel of every sample-major tensor (docs/data-parallel.md) */
    uint64_t slice;
    sg_backend *be; /* for the one op that talks to the other ranks (allreduce) */
    int *rc;        /* where an op that can fail (allreduce) reports SG_ERR */
} cpu_call;

/* the scratch floats the node's operands take (the same sum as cpu_prepare's) */
static int64_t bound_floats(const sg_graph *g, const sg_node *nd) {
    int64_t s = 0;
    for (int i = 0; i < nd->nin; i++)
        if (!in_direct(&g->t[nd->in[i]])) s += sg_numel(&g->t[nd->in[i]]);
    for (int i = 0; i < nd->nout; i++)
        if (g->t[nd->out[i]].vnorm < 0 && !out_direct(&g->t[nd->out[i]], sg_accum_bits(nd, i)))
            s += sg_numel(&g->t[nd->out[i]]);
    return s;
}

static void cpu_bind(cpu_ctx *c, const sg_graph *g, const sg_node *nd, cpu_call *k, int rank) {
    float *s = c->scratch;
    /* a virtual normalised input's apply pass works past every operand's scratch */
    float *tmp = c->scratch + bound_floats(g, nd);
    k->g = g, k->nd = nd, k->a = &nd->a;
    for (int i = 0; i < nd->nin; i++) {
        const sg_tensor *x = &g->t[nd->in[i]];
        k->raw_in[i] = sg_tensor_virtual(x) ? NULL : c->arena + x->offset;
        if (in_direct(x)) {
            k->in[i] = (float *)k->raw_in[i];
        } else {
            k->in[i] = s;
            gather_f32(c, g, nd->in[i], s, tmp, rank);
            s += sg_numel(x);
        }
    }
    for (int i = 0; i < nd->nout; i++) {
        const sg_tensor *y = &g->t[nd->out[i]];
        k->raw_out[i] = sg_tensor_virtual(y) ? NULL : c->arena + y->offset;
        if (y->vnorm >= 0) {
            k->out[i] = NULL; /* virtual normalised: its node computes the statistics only */
        } else if (out_direct(y, sg_accum_bits(nd, i))) {
            k->out[i] = (float *)k->raw_out[i];
        } else {
            k->out[i] = s;
            s += sg_numel(y);
        }
    }
    k->n0 = sg_out_numel(g, nd, 0);
    k->seed = nd->nin > 1 && g->t[nd->in[1]].dtype == DT_U64 ? *(uint64_t *)k->raw_in[1] : 0;
    k->step = nd->nin > 2 && g->t[nd->in[2]].dtype == DT_I64 ? *(int64_t *)k->raw_in[2] : 0;
}

/* ---- one function per op, cpu_run_<id> (planner/op_list.h), in op-family order. Each calls
 * its kernel with the sizes planner/op_dims.h derives and the args by name. */
#define CPU_RUN(id) static void cpu_run_##id(const cpu_call *k)

CPU_RUN(gather_batch) {
    const sg_tensor *ds = &k->g->t[k->nd->in[0]];
    const sg_gather_args *a = &k->a->gather;
    cpu_gather_batch(k->out[0], (const uint8_t *)k->raw_in[0], ds->shape[0], (int)ds->shape[1],
                     (int)ds->shape[2], (int)ds->shape[3], a->N, a->img, a->img, k->seed, k->step,
                     a->flip, a->batch, (int64_t)k->slice * a->N);
}
CPU_RUN(gather_labels) {
    const sg_labels_args *a = &k->a->labels;
    cpu_gather_labels((int32_t *)k->raw_out[0], (const int32_t *)k->raw_in[0],
                      k->g->t[k->nd->in[0]].shape[0], a->N, a->classes, a->p, k->seed, k->step,
                      a->batch, (int64_t)k->slice * a->N);
}
CPU_RUN(sample_t) {
    cpu_sample_timesteps((int32_t *)k->raw_out[0], k->a->sample_t.N, k->a->sample_t.T,
                         *(uint64_t *)k->raw_in[0], *(int64_t *)k->raw_in[1],
                         k->slice * (uint64_t)k->a->sample_t.N);
}
CPU_RUN(noise) {
    const sg_noise_args *a = &k->a->noise;
    const int64_t N = k->g->t[k->nd->out[0]].shape[0];
    if (a->offset > 0)
        cpu_noise_offset(k->out[0], k->n0, k->n0 / N, a->C, a->offset, k->seed, k->step,
                         k->slice * (uint64_t)k->n0, k->slice * (uint64_t)N);
    else
        cpu_gaussian(k->out[0], k->n0, k->seed, k->step, SG_RNG_NOISE, k->slice * (uint64_t)k->n0);
    if (a->perturb > 0)
        cpu_noise_perturb(k->out[0], k->n0, a->perturb, k->seed, k->step,
                          k->slice * (uint64_t)k->n0);
}
/* the reference recomputes the coefficients from the args (input 3, the table the CUDA kernel
 * reads, is not needed here: the two backends check each other) */
CPU_RUN(ddpm_noise) {
    const sg_ddpm_args *a = &k->a->ddpm;
    int N = (int)k->g->t[k->nd->in[0]].shape[0];
    const sg_betas b = {.T = a->T,
                        .schedule = a->schedule,
                        .beta1 = a->beta1,
                        .betaT = a->betaT,
                        .zero_snr = a->zero_snr};
    if (a->v_target) /* inputs (eps, x0, t, table) */
        cpu_ddpm_v(k->out[0], k->in[1], k->in[0], (const int32_t *)k->raw_in[2], N,
                   (int)(k->n0 / N), &b);
    else
        cpu_ddpm_noise(k->out[0], k->in[0], k->in[1], (const int32_t *)k->raw_in[2], N,
                       (int)(k->n0 / N), &b);
}
CPU_RUN(timestep_emb) {
    cpu_timestep_emb(k->out[0], (const int32_t *)k->raw_in[0], (int)k->g->t[k->nd->in[0]].shape[0],
                     k->a->temb.dim);
}
/* class_emb: in[0] the labels, in[1] the table */
CPU_RUN(class_emb) {
    const sg_tensor *tab = &k->g->t[k->nd->in[1]];
    cpu_class_emb_fwd(k->out[0], (const int32_t *)k->raw_in[0], k->in[1],
                      (int)k->g->t[k->nd->in[0]].shape[0], (int)tab->shape[1]);
}
CPU_RUN(class_emb_bwd) {
    const sg_tensor *dy = &k->g->t[k->nd->in[0]];
    cpu_class_emb_bwd(k->out[0], k->in[0], (const int32_t *)k->raw_in[1], (int)dy->shape[0],
                      (int)dy->shape[1], k->a->cemb.rows);
}

CPU_RUN(linear) {
    sg_linear_dims d = sg_linear_dims_of(k->g, k->nd);
    cpu_linear_fwd(k->out[0], k->in[0], k->in[1], k->in[2], d.N, d.K, d.M);
}
CPU_RUN(linear_bwd_data) {
    sg_linear_dims d = sg_linear_dims_of(k->g, k->nd);
    cpu_linear_bwd_data(k->out[0], k->in[0], k->in[1], d.N, d.K, d.M);
}
CPU_RUN(linear_bwd_weight) {
    sg_linear_dims d = sg_linear_dims_of(k->g, k->nd);
    cpu_linear_bwd_weight(k->out[0], k->out[1], k->in[0], k->in[1], d.N, d.K, d.M);
}

CPU_RUN(conv2d) {
    sg_conv_dims d = sg_conv_dims_of(k->g, k->nd);
    cpu_conv2d_fwd(k->out[0], k->in[0], k->in[1], k->in[2], d.N, d.H, d.W, d.Ci, d.Co, d.K, d.S,
                   d.pad);
}
/* the conv, its output rounded to y's dtype as the unfused plan stores it, then the residual
 * add (cpu_add_fwd: r + h), rounded once more when stored: conv2d then add, bit for bit */
CPU_RUN(conv2d_add) {
    sg_conv_dims d = sg_conv_dims_of(k->g, k->nd);
    float *y = k->out[0];
    cpu_conv2d_fwd(y, k->in[0], k->in[1], k->in[2], d.N, d.H, d.W, d.Ci, d.Co, d.K, d.S, d.pad);
    if (k->g->t[k->nd->out[0]].dtype == DT_BF16)
        for (int64_t i = 0; i < k->n0; i++) y[i] = sg_bf16_to_f32(sg_f32_to_bf16(y[i]));
    cpu_add_fwd(y, k->in[3], y, k->n0);
}
/* conv2 and its folded 1x1 shortcut (cpu_conv2d_sc_fwd), summed in fp32 and rounded once as
 * the output is stored */
CPU_RUN(conv2d_sc) {
    sg_conv_dims d = sg_conv_dims_of(k->g, k->nd);
    cpu_conv2d_sc_fwd(k->out[0], k->in[0], k->in[1], k->in[2], k->in[3], k->in[4], k->in[5], d.N,
                      d.H, d.W, d.Ci, (int)k->g->t[k->nd->in[3]].shape[3], d.Co, d.K, d.pad);
}
CPU_RUN(conv2d_bwd_data) {
    sg_conv_dims d = sg_conv_dims_of(k->g, k->nd);
    cpu_conv2d_bwd_data(k->out[0], k->in[0], k->in[1], d.N, d.H, d.W, d.Ci, d.Co, d.K, d.S, d.pad);
}
CPU_RUN(conv2d_bwd_weight) {
    sg_conv_dims d = sg_conv_dims_of(k->g, k->nd);
    cpu_conv2d_bwd_weight(k->out[0], k->out[1], k->in[0], k->in[1], d.N, d.H, d.W, d.Ci, d.Co, d.K,
                          d.S, d.pad);
}

/* upconv2d: the folded weights from the fp32 master weights (input 1), rounded to bf16 once in
 * a bf16 plan (the activations' dtype: y forward, dy backward), as the CUDA kernels fold them */
static int upconv_round(const cpu_call *k, int t) {
    return k->g->t[t].dtype == DT_BF16;
}
CPU_RUN(upconv2d) {
    sg_conv_dims d = sg_upconv_dims_of(k->g, k->nd);
    cpu_upconv2d_fwd(k->out[0], k->in[0], k->in[1], k->in[2], d.N, d.H, d.W, d.Ci, d.Co,
                     upconv_round(k, k->nd->out[0]));
}
CPU_RUN(upconv2d_bwd_data) {
    sg_conv_dims d = sg_upconv_dims_of(k->g, k->nd);
    cpu_upconv2d_bwd_data(k->out[0], k->in[0], k->in[1], d.N, d.H, d.W, d.Ci, d.Co,
                          upconv_round(k, k->nd->in[0]));
}
CPU_RUN(upconv2d_bwd_weight) {
    sg_conv_dims d = sg_upconv_dims_of(k->g, k->nd);
    cpu_upconv2d_bwd_weight(k->out[0], k->out[1], k->in[0], k->in[1], d.N, d.H, d.W, d.Ci, d.Co);
}

CPU_RUN(group_norm) {
    sg_gn_dims d = sg_gn_dims_of(k->g, k->nd);
    cpu_group_norm_fwd(k->out[0], k->out[1], k->out[2], k->in[0], k->in[1], k->in[2], d.N, d.HW,
                       d.C, d.G, k->a->gn.eps);
}
CPU_RUN(group_norm_bwd) {
    sg_gn_dims d = sg_gn_dims_of(k->g, k->nd);
    cpu_group_norm_bwd(k->out[0], k->out[1], k->out[2], k->in[0], k->in[1], k->in[2], k->in[3],
                       k->in[4], d.N, d.HW, d.C, d.G);
}

/* the norm_act family: operands by sg_norm_operands_of; the dropout's key as cpu_run_dropout.
 * A forward node whose y is virtual normalised (no out[0]) computes the statistics alone. */
static void run_norm_act(const cpu_call *k) {
    sg_gn_dims d = sg_gn_dims_of(k->g, k->nd);
    sg_norm_operands o = sg_norm_operands_of(k->nd);
    const cpu_norm_tail t = node_norm_tail(k->g, k->nd, k->raw_in, k->slice);
    const float *v = o.temb ? k->in[o.v] : NULL;
    if (!o.bwd && !o.apply && !k->out[0])
        cpu_norm_act_stats(k->out[1], k->out[2], k->in[o.x], v, d.N, d.HW, d.C, d.G, k->a->gn.eps);
    else if (o.bwd)
        cpu_norm_act_bwd(k->out[0], o.temb ? k->out[1] : NULL, k->out[o.temb + 1],
                         k->out[o.temb + 2], k->in[o.dy], k->in[o.x], v, k->in[o.mean],
                         k->in[o.rstd], k->in[o.gamma], k->in[o.beta], d.N, d.HW, d.C, d.G, &t);
    else if (o.apply)
        cpu_norm_act_apply(k->out[0], k->in[o.x], v, k->in[o.mean], k->in[o.rstd], k->in[o.gamma],
                           k->in[o.beta], d.N, d.HW, d.C, d.G, &t);
    else
        cpu_norm_act_fwd(k->out[0], k->out[1], k->out[2], k->in[o.x], v, k->in[o.gamma],
                         k->in[o.beta], d.N, d.HW, d.C, d.G, k->a->gn.eps, &t);
}
CPU_RUN(norm_act) {
    run_norm_act(k);
}
CPU_RUN(norm_act_temb) {
    run_norm_act(k);
}
CPU_RUN(norm_act_apply) {
    run_norm_act(k);
}
CPU_RUN(norm_act_temb_apply) {
    run_norm_act(k);
}
CPU_RUN(norm_act_bwd) {
    run_norm_act(k);
}
CPU_RUN(norm_act_temb_bwd) {
    run_norm_act(k);
}

/* the pointwise ops (common/sg_pointwise.h): cpu_<fn>(outputs, inputs, n), one per row; a row
 * whose arity is not its op's row's in planner/op_list.h does not compile */
#define CPU_OP_ARITY(op, id, kind, nin, nout, ...) CPU_NIN_##id = nin, CPU_NOUT_##id = nout,
enum { SG_OP_LIST(CPU_OP_ARITY) };
#define CPU_PW_OUT(i) k->out[i]
#define CPU_PW_IN(i) k->in[i]
#define CPU_RUN_POINTWISE(op, fn, nin, nout, acc)                                                  \
    _Static_assert(CPU_NIN_##op == nin && CPU_NOUT_##op == nout,                                   \
                   #op ": common/sg_pointwise.h's arity differs from planner/op_list.h's");        \
    CPU_RUN(op) {                                                                                  \
        cpu_##fn(SG_PW_EACH_##nout(CPU_PW_OUT), SG_PW_EACH_##nin(CPU_PW_IN), k->n0);               \
    }
SG_POINTWISE_LIST(CPU_RUN_POINTWISE)

CPU_RUN(add_nc) {
    sg_nhwc_dims d = sg_nhwc_dims_of(k->g, k->nd);
    cpu_add_nc_fwd(k->out[0], k->in[0], k->in[1], d.N, d.HW, d.C);
}
CPU_RUN(add_nc_bwd) {
    sg_nhwc_dims d = sg_nhwc_dims_of(k->g, k->nd);
    cpu_add_nc_bwd(k->out[0], k->in[0], d.N, d.HW, d.C);
}
CPU_RUN(concat) {
    (void)k; /* virtual: consumers read both parts (cpu_run_node never gets here) */
}

CPU_RUN(upsample2x) {
    sg_nhwc_dims d = sg_nhwc_dims_of(k->g, k->nd);
    cpu_upsample2x_fwd(k->out[0], k->in[0], d.N, d.H, d.W, d.C);
}
CPU_RUN(upsample2x_apply) { /* the recomputation: upsample2x's values */
    cpu_run_upsample2x(k);
}
CPU_RUN(upsample2x_bwd) {
    sg_nhwc_dims d = sg_nhwc_dims_of(k->g, k->nd);
    cpu_upsample2x_bwd(k->out[0], k->in[0], d.N, d.H, d.W, d.C);
}
CPU_RUN(avgpool2x) {
    sg_nhwc_dims d = sg_nhwc_dims_of(k->g, k->nd);
    cpu_avgpool2x_fwd(k->out[0], k->in[0], d.N, d.H, d.W, d.C);
}
CPU_RUN(avgpool2x_bwd) {
    sg_nhwc_dims d = sg_nhwc_dims_of(k->g, k->nd);
    cpu_avgpool2x_bwd(k->out[0], k->in[0], d.N, d.H, d.W, d.C);
}

CPU_RUN(attention) {
    sg_attn_dims d = sg_attn_dims_of(k->g, k->nd);
    cpu_attention_fwd(k->out[0], k->out[1], k->in[0], d.N, d.L, d.C, d.heads);
}
CPU_RUN(attention_p) { /* the recomputation: the forward's P, without y */
    sg_attn_dims d = sg_attn_dims_of(k->g, k->nd);
    cpu_attention_fwd(NULL, k->out[0], k->in[0], d.N, d.L, d.C, d.heads);
}
CPU_RUN(attention_bwd) {
    sg_attn_dims d = sg_attn_dims_of(k->g, k->nd);
    cpu_attention_bwd(k->out[0], k->in[0], k->in[1], k->in[2], d.N, d.L, d.C, d.heads);
}

CPU_RUN(dropout) {
    cpu_dropout_fwd(k->out[0], k->in[0], k->n0, k->a->dropout.p, k->seed, k->step,
                    SG_RNG_DROPOUT_BASE + (uint32_t)k->a->dropout.purpose,
                    k->slice * (uint64_t)k->n0);
}
CPU_RUN(dropout_bwd) {
    cpu_dropout_bwd(k->out[0], k->in[0], k->n0, k->a->dropout.p, k->seed, k->step,
                    SG_RNG_DROPOUT_BASE + (uint32_t)k->a->dropout.purpose,
                    k->slice * (uint64_t)k->n0);
}

CPU_RUN(mse) {
    cpu_mse_fwd(k->out[0], k->in[0], k->in[1], sg_in_numel(k->g, k->nd, 0),
                k->a->mse.micro_batches);
}
CPU_RUN(mse_bwd) {
    cpu_mse_bwd(k->out[0], k->in[0], k->in[1], k->n0, k->a->mse.loss_scale);
}
/* mse_w: in[2] the samples' timesteps, in[3] the weight table */
CPU_RUN(mse_w) {
    cpu_mse_w_fwd(k->out[0], k->in[0], k->in[1], sg_in_numel(k->g, k->nd, 0),
                  k->a->mse.micro_batches, (const int32_t *)k->raw_in[2], k->in[3],
                  (int)sg_in_numel(k->g, k->nd, 2));
}
CPU_RUN(mse_w_bwd) {
    cpu_mse_w_bwd(k->out[0], k->in[0], k->in[1], k->n0, k->a->mse.loss_scale,
                  (const int32_t *)k->raw_in[2], k->in[3], (int)sg_in_numel(k->g, k->nd, 2));
}
CPU_RUN(accum) {
    if (k->out[0] != k->in[0]) cpu_copy(k->out[0], k->in[0], k->n0); /* in place: nothing to do */
}

CPU_RUN(grad_sumsq) {
    cpu_sumsq(k->out[0], k->in[0], sg_in_numel(k->g, k->nd, 0));
}
CPU_RUN(clip_scale) {
    cpu_clip_scale(k->out[0], k->in[0], k->a->clip.max_norm);
}
CPU_RUN(adamw) {
    const sg_adamw_args *a = &k->a->adamw;
    const sg_lr_sched sched = {
        .decay_steps = a->decay_steps, .lr_min = a->lr_min, .schedule = a->schedule};
    cpu_adamw(k->out[0], k->out[1], k->out[2], k->in[1], sg_in_numel(k->g, k->nd, 0), k->in[4],
              *(int64_t *)k->raw_in[5], a->lr, a->b1, a->b2, a->eps, a->wd, a->warmup, &sched,
              k->out[3]);
}
CPU_RUN(ema) {
    const sg_ema_args *a = &k->a->ema;
    const sg_ema_sched warm = {a->inv_gamma, a->power};
    cpu_ema(k->out[0], k->in[1], k->n0, a->decay, a->warmup ? &warm : NULL,
            *(int64_t *)k->raw_in[2]);
}
/* params, grads, m, v, ema, scale, step -> params, m, v, ema, lr (in place on the regions), and
 * with copy (adamw_ema_bf16's output 5, bf16: its fp32 scratch, rounded once on store) the
 * updated parameters' copy */
static void run_adamw_ema(const cpu_call *k, float *copy) {
    const sg_adamw_args *a = &k->a->optim.adamw;
    const sg_ema_args *e = &k->a->optim.ema;
    const sg_lr_sched sched = {
        .decay_steps = a->decay_steps, .lr_min = a->lr_min, .schedule = a->schedule};
    const sg_ema_sched warm = {e->inv_gamma, e->power};
    cpu_adamw_ema(k->out[0], k->out[1], k->out[2], k->out[3], copy, k->in[1],
                  sg_in_numel(k->g, k->nd, 0), k->in[5], *(int64_t *)k->raw_in[6], a->lr, a->b1,
                  a->b2, a->eps, a->wd, a->warmup, &sched, k->out[4], e->decay,
                  e->warmup ? &warm : NULL);
}
CPU_RUN(adamw_ema) {
    run_adamw_ema(k, NULL);
}
CPU_RUN(adamw_ema_bf16) {
    run_adamw_ema(k, k->out[5]);
}
CPU_RUN(step_inc) {
    *(int64_t *)k->raw_out[0] += 1;
}
CPU_RUN(loss_watch) {
    cpu_loss_watch(k->in[0], k->in[1], k->raw_in[2], k->raw_out[0], k->out[1]);
}
CPU_RUN(allreduce) {
    if (cpu_allreduce(k->be, k->g, k->nd, k->out[0], k->out[1])) *k->rc = SG_ERR;
}

/* x, pred, table, k, key, x0h -> x (in place: in[0] and out[0] are the same fp32 tensor), x_t,
 * t, x0h (in place) */
CPU_RUN(sample_step) {
    const sg_tensor *x = &k->g->t[k->nd->in[0]], *table = &k->g->t[k->nd->in[2]];
    const uint64_t *key = (const uint64_t *)k->raw_in[4];
    const int N = (int)x->shape[0];
    cpu_sample_step(k->out[0], k->out[1], (int32_t *)k->raw_out[2], k->out[3], k->in[1],
                    (const sg_sample_row *)k->raw_in[2], (int)table->shape[0],
                    *(const int64_t *)k->raw_in[3], key[0], key[1], N, sg_numel(x) / N,
                    k->a->sampler.T, k->a->sampler.guided, (double)k->a->sampler.guidance,
                    (double)k->a->sampler.rescale);
}

/* every op's function, from the op list: an op without a cpu_run_<id> does not compile */
typedef void (*cpu_run_fn)(const cpu_call *k);
#define CPU_RUN_ROW(op, id, ...) [op] = cpu_run_##id,
static const cpu_run_fn cpu_run[OP_COUNT] = {SG_OP_LIST(CPU_RUN_ROW)};

static int cpu_run_node(sg_backend *be, const sg_plan *p, int i) {
    cpu_ctx *c = be->ctx;
    const sg_graph *g = &p->g;
    const sg_node *nd = &g->n[i];
    if (nd->op == OP_CONCAT) return SG_OK; /* virtual: consumers read both parts */
    cpu_call k;
    int rc = SG_OK;
    const int rank = be->dist ? be->dist->rank : 0;
    cpu_bind(c, g, nd, &k, rank);
    k.slice = sg_node_slice(g, nd, rank), k.be = be, k.rc = &rc;
    cpu_run[nd->op](&k);
    if (rc) return SG_ERR;
    for (int o = 0; o < nd->nout; o++) {
        const sg_tensor *y = &g->t[nd->out[o]];
        if (y->vnorm < 0 && !out_direct(y, sg_accum_bits(nd, o)))
            scatter_f32(c, g, nd->out[o], k.out[o], sg_accum_bits(nd, o));
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

/* memory bandwidth: memcpy of `bytes`, each of a few timed alone after one untimed, the median;
 * read plus written bytes over its time */
static double cpu_mem_peak(sg_backend *be, int64_t bytes) {
    (void)be;
    enum { REPS = 5 };
    unsigned char *a = bytes > 0 ? malloc((size_t)bytes) : NULL,
                  *b = a ? malloc((size_t)bytes) : NULL;
    float ms[REPS];
    double gbs = 0;
    if (a && b) {
        memset(a, 1, (size_t)bytes), memset(b, 0, (size_t)bytes); /* the pages touched */
        for (int r = -1; r < REPS; r++) {
            const double t0 = cpu_now_ms();
            memcpy(b, a, (size_t)bytes);
            if (r >= 0) ms[r] = (float)(cpu_now_ms() - t0);
            __asm__ volatile("" : : "r"(b) : "memory"); /* the copy stays: b may be read */
        }
        sg_sort_f32(ms, REPS);
        const double med = sg_quantile_sorted(ms, REPS, 0.5);
        if (med > 0) gbs = 2.0 * (double)bytes / (med * 1e-3) / 1e9;
    }
    free(a), free(b);
    return gbs;
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

/* the function table; sg_backend_cpu_create copies it and adds the context */
static const sg_backend cpu_vtable = {
    .name = "cpu",
    .prepare = cpu_prepare,
    .upload = cpu_upload,
    .download = cpu_download,
    .run_node = cpu_run_node,
    .run_step = cpu_run_step,
    .sync = cpu_sync,
    .time_steps = cpu_time_steps,
    .time_nodes = cpu_time_nodes,
    .matmul_peak_tflops = cpu_matmul_peak,
    .mem_peak_gbs = cpu_mem_peak,
    .time_gemm = NULL, /* no GEMM library to compare a layer with: bench prints '-' */
    .describe = cpu_describe,
    .destroy = cpu_destroy,
};

/* backend.h: the CUDA backend's knobs. The CPU backend has none of them, and says so once a
 * process where one is set, so that a CPU run does not seem to have taken it (a process that
 * also makes a CUDA backend gives it to that one). */
const char *const sg_cuda_env_knobs[SG_N_CUDA_ENV_KNOBS] = {
    "SG_ATTN",           "SG_CONV_ENGINE",   "SG_CONV_F32",      "SG_CONV_F32_TC",
    "SG_CONV_TC",        "SG_CONV_THIN",     "SG_CONV_WINO",     "SG_CUDNN_TF32",
    "SG_FUSE_STATS",     "SG_GEMM_EPILOGUE", "SG_GRAPH_LAUNCH",  "SG_GRAPH_MEMSETS",
    "SG_LINEAR_GROUPS",  "SG_NORM_ONEPASS",  "SG_PDL",           "SG_PROFILE_FIRST_STEP",
    "SG_TC_DGRAD_STATS", "SG_TC_HALO",       "SG_WG_DGRAD_HALO", "SG_WG_FILL",
    "SG_WG_PERSIST"};
static void note_cuda_env(void) {
    static int said;
    if (said) return;
    said = 1;
    char names[400] = "";
    int n = 0;
    for (int k = 0; k < SG_N_CUDA_ENV_KNOBS; k++) {
        const char *v = getenv(sg_cuda_env_knobs[k]);
        if (!v || !*v) continue;
        const size_t used = strlen(names);
        snprintf(names + used, sizeof names - used, "%s%s", n++ ? ", " : "", sg_cuda_env_knobs[k]);
    }
    if (n)
        fprintf(stderr, "stepgraph: note: %s %s the CUDA backend's; the CPU backend ignores %s\n",
                names, n > 1 ? "are" : "is", n > 1 ? "them" : "it");
}

int sg_backend_cpu_threads(void) {
    return sg_cpu_threads();
}

sg_backend *sg_backend_cpu_create(void) {
    note_cuda_env();
    sg_backend *be = calloc(1, sizeof *be);
    cpu_ctx *c = calloc(1, sizeof *c);
    if (!be || !c) {
        free(be);
        free(c);
        sg_set_error("out of host memory");
        return NULL;
    }
    *be = cpu_vtable;
    be->ctx = c;
    return be;
}
