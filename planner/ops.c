/* ops.c — the op table: one row per op (name, arity, in-place, shape rule, FLOPs, backward).
 *
 * The rows themselves are planner/op_list.h; this file holds the rules they name (shape,
 * FLOPs, CUDA workspace, backward) and expands the list into sg_ops[]. Adding an op:
 * docs/architecture.md has the checklist. Argument fields are read by name (ir.h's
 * sg_op_args); sizes derived from the operands come from planner/op_dims.h, shared with the
 * backends.
 *
 * FLOPs: a multiply-add counts 2 (conv, linear, attention matmuls: the `matmul` column);
 * elementwise and normalisation work counts 1 per output element. The `matmul` part is what
 * MFU is measured against.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/sg_sample_step.h"
#include "common/sg_schedule.h"
#include "common/sg_workspace.h"
#include "planner/autodiff.h"
#include "planner/ir.h"
#include "planner/op_dims.h"

#define T(i) (&g->t[nd->in[i]])
#define DIM(i, d) (g->t[nd->in[i]].shape[d])

static void set4(sg_tensor *o, sg_dtype dt, int64_t a, int64_t b, int64_t c, int64_t d) {
    o->dtype = dt;
    o->ndim = 4;
    o->shape[0] = a, o->shape[1] = b, o->shape[2] = c, o->shape[3] = d;
}
static void set2(sg_tensor *o, sg_dtype dt, int64_t a, int64_t b) {
    o->dtype = dt;
    o->ndim = 2;
    o->shape[0] = a, o->shape[1] = b;
}
static void set1(sg_tensor *o, sg_dtype dt, int64_t a) {
    o->dtype = dt;
    o->ndim = 1;
    o->shape[0] = a;
}
static void same(sg_tensor *o, const sg_tensor *t) {
    o->dtype = t->dtype;
    o->ndim = t->ndim;
    memcpy(o->shape, t->shape, sizeof o->shape);
}
static int need_ndim(const sg_graph *g, const sg_node *nd, int i, int ndim) {
    if (T(i)->ndim != ndim)
        return sg_set_error("input %d '%s' must be %d-D, is %d-D", i, T(i)->name, ndim, T(i)->ndim);
    return SG_OK;
}
/* The output size does not depend on the padding split: Ho = (H + 2 (K/2) - K) / S + 1 (so
 * the plan's shapes are the same under either rule); the top/left padding `pad` is explicit
 * and the bottom/right padding is what the last output row needs, (Ho-1) S + K - H - pad,
 * which must lie in [.., K/2] (negative: the last rows are never read, as in PyTorch). */
static int conv_out_size(int64_t h, int K, int S) {
    return (int)((h + 2 * (K / 2) - K) / S + 1);
}
static int conv_pad_check(int64_t H, int K, int S, int pad) {
    int64_t bottom = (int64_t)(conv_out_size(H, K, S) - 1) * S + K - H - pad;
    if (pad < 0 || pad > K / 2 || bottom > K / 2)
        return sg_set_error("top/left padding %d does not fit K=%d S=%d on size %lld (it leaves "
                            "%lld at the bottom/right; each side takes 0..%d)",
                            pad, K, S, (long long)H, (long long)bottom, K / 2);
    return SG_OK;
}
/* an activation dtype argument: fp32 or bf16 */
static int need_act_dt(sg_dtype dt) {
    if (dt != DT_F32 && dt != DT_BF16)
        return sg_set_error("output dtype %d is not an activation dtype (f32 or bf16)", (int)dt);
    return SG_OK;
}
/* Input 1 of a conv / linear (forward or backward-data) is its weights: fp32 master weights, or
 * their copy in the activations' dtype (bf16 runs: planner/train_step.c gives every bf16 one
 * the copy, and sg_plan_verify holds plans to that; the CUDA kernels take no other). */
static int need_weights(const sg_graph *g, const sg_node *nd, sg_dtype act) {
    if (T(1)->dtype != DT_F32 && T(1)->dtype != act)
        return sg_set_error("weights '%s' are %s under %s activations", T(1)->name,
                            sg_dtype_names[T(1)->dtype], sg_dtype_names[act]);
    return SG_OK;
}
static double numel_out0(const sg_graph *g, const sg_node *nd) {
    (void)g;
    int64_t n = 1;
    const sg_tensor *t = &g->t[nd->out[0]];
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return (double)n;
}
static double no_flops(const sg_graph *g, const sg_node *nd) {
    (void)g, (void)nd;
    return 0;
}

/* ---- step inputs */
static int shape_gather(const sg_graph *g, const sg_node *nd, sg_tensor *o) {
    if (need_ndim(g, nd, 0, 4)) return SG_ERR;
    int64_t N = nd->a.gather.N, img = nd->a.gather.img;
    if (N < 1 || img < DIM(0, 1) || img < DIM(0, 2))
        return sg_set_error("batch %lld / image %lld do not fit data %lldx%lld", (long long)N,
                            (long long)img, (long long)DIM(0, 1), (long long)DIM(0, 2));
    if (nd->a.gather.batch < N || nd->a.gather.batch % N)
        return sg_set_error("gather_batch: the global batch %d must be a multiple of the batch "
                            "%lld",
                            nd->a.gather.batch, (long long)N);
    set4(o, DT_F32, N, img, img, DIM(0, 3));
    return SG_OK;
}
static int shape_sample_t(const sg_graph *g, const sg_node *nd, sg_tensor *o) {
    (void)g;
    const sg_sample_t_args *a = &nd->a.sample_t;
    if (a->N < 1 || a->T < 1) return sg_set_error("need N >= 1 and T >= 1");
    set1(o, DT_I32, a->N);
    return SG_OK;
}
static int shape_labels(const sg_graph *g, const sg_node *nd, sg_tensor *o) {
    const sg_labels_args *a = &nd->a.labels;
    if (T(0)->dtype != DT_I32 || T(0)->ndim != 1 || DIM(0, 0) < 1)
        return sg_set_error("gather_labels reads the dataset's labels, i32[ndata]");
    if (a->N < 1 || a->batch < a->N || a->batch % a->N)
        return sg_set_error("gather_labels: the global batch %d must be a multiple of the batch %d",
                            a->batch, a->N);
    if (a->classes < 1 || !(a->p >= 0.0f && a->p <= 1.0f))
        return sg_set_error("gather_labels needs classes >= 1 and a drop probability in [0, 1]");
    set1(o, DT_I32, a->N);
    return SG_OK;
}
static int shape_like0(const sg_graph *g, const sg_node *nd, sg_tensor *o) {
    same(o, T(0));
    return SG_OK;
}
static int shape_ddpm(const sg_graph *g, const sg_node *nd, sg_tensor *o) {
    if (sg_numel(T(0)) != sg_numel(T(1)) || T(2)->shape[0] != DIM(0, 0))
        return sg_set_error("x0, eps and t disagree on shape");
    if (nd->a.ddpm.T < 1) return sg_set_error("need T >= 1");
    if (T(3)->dtype != DT_U8 || T(3)->ndim != 2 || DIM(3, 0) != nd->a.ddpm.T ||
        DIM(3, 1) != SG_DDPM_ROW_BYTES)
        return sg_set_error("ddpm_noise: the table must be u8 [%d][%d]", nd->a.ddpm.T,
                            SG_DDPM_ROW_BYTES);
    if (need_act_dt(nd->a.ddpm.out_dt)) return SG_ERR;
    same(o, T(0));
    o->dtype = nd->a.ddpm.out_dt;
    return SG_OK;
}
static int shape_temb(const sg_graph *g, const sg_node *nd, sg_tensor *o) {
    const sg_temb_args *a = &nd->a.temb;
    if (a->dim < 4 || a->dim % 2) return sg_set_error("embedding dim must be even >= 4");
    if (need_act_dt(a->out_dt)) return SG_ERR;
    set2(o, a->out_dt, DIM(0, 0), a->dim);
    return SG_OK;
}

/* class_emb: labels i32[N], the table f32[rows, dim] -> [N, dim] */
static int shape_class_emb(const sg_graph *g, const sg_node *nd, sg_tensor *o) {
    const sg_class_emb_args *a = &nd->a.cemb;
    if (T(0)->dtype != DT_I32 || T(0)->ndim != 1 || T(1)->dtype != DT_F32 || T(1)->ndim != 2 ||
        DIM(1, 0) != a->rows)
        return sg_set_error("class_emb takes labels i32[N] and a table f32[%d, dim]", a->rows);
    if (need_act_dt(a->out_dt)) return SG_ERR;
    set2(o, a->out_dt, DIM(0, 0), DIM(1, 1));
    return SG_OK;
}
/* class_emb_bwd: de [N, dim], labels i32[N] -> the table's gradient f32[rows, dim] */
static int shape_class_emb_bwd(const sg_graph *g, const sg_node *nd, sg_tensor *o) {
    if (need_ndim(g, nd, 0, 2) || T(1)->dtype != DT_I32 || T(1)->ndim != 1 ||
        DIM(1, 0) != DIM(0, 0) || nd->a.cemb.rows < 1)
        return sg_set_error("class_emb_bwd takes de [N, dim] and labels i32[N]");
    set2(o, DT_F32, nd->a.cemb.rows, DIM(0, 1));
    return SG_OK;
}

/* ---- model ops */
static int shape_linear(const sg_graph *g, const sg_node *nd, sg_tensor *o) {
    if (need_ndim(g, nd, 0, 2) || need_ndim(g, nd, 1, 2) || need_weights(g, nd, T(0)->dtype))
        return SG_ERR;
    if (DIM(0, 1) != DIM(1, 1) || DIM(2, 0) != DIM(1, 0))
        return sg_set_error("x [%lld,%lld] does not match w [%lld,%lld] / b", (long long)DIM(0, 0),
                            (long long)DIM(0, 1), (long long)DIM(1, 0), (long long)DIM(1, 1));
    set2(o, T(0)->dtype, DIM(0, 0), DIM(1, 0));
    return SG_OK;
}
/* linear and both its backward passes: N*M*K multiply-adds each */
static double flops_linear(const sg_graph *g, const sg_node *nd) {
    sg_linear_dims d = sg_linear_dims_of(g, nd);
    return 2.0 * d.N * d.M * d.K;
}
static int shape_conv(const sg_graph *g, const sg_node *nd, sg_tensor *o) {
    if (need_ndim(g, nd, 0, 4) || need_ndim(g, nd, 1, 4) || need_weights(g, nd, T(0)->dtype))
        return SG_ERR;
    int K = nd->a.conv.K, S = nd->a.conv.S;
    if ((K != 1 && K != 3) || (S != 1 && S != 2)) return sg_set_error("K must be 1 or 3, S 1 or 2");
    if (need_act_dt(nd->a.conv.out_dt)) return SG_ERR;
    if (DIM(1, 1) != K || DIM(1, 2) != K || DIM(1, 3) != DIM(0, 3) || DIM(2, 0) != DIM(1, 0))
        return sg_set_error("weight %lldx%lldx%lldx%lld does not fit x with %lld channels, K=%d",
                            (long long)DIM(1, 0), (long long)DIM(1, 1), (long long)DIM(1, 2),
                            (long long)DIM(1, 3), (long long)DIM(0, 3), K);
    if (conv_pad_check(DIM(0, 1), K, S, nd->a.conv.pad) ||
        conv_pad_check(DIM(0, 2), K, S, nd->a.conv.pad))
        return SG_ERR;
    set4(o, nd->a.conv.out_dt, DIM(0, 0), conv_out_size(DIM(0, 1), K, S),
         conv_out_size(DIM(0, 2), K, S), DIM(1, 0));
    return SG_OK;
}
/* conv2d_add: conv2d's rule, and the residual shaped and typed like y */
static int shape_conv_add(const sg_graph *g, const sg_node *nd, sg_tensor *o) {
    if (shape_conv(g, nd, o)) return SG_ERR;
    const sg_tensor *r = T(3);
    if (r->ndim != 4 || sg_numel(r) != sg_numel(o) || r->shape[3] != o->shape[3] ||
        r->dtype != o->dtype)
        return sg_set_error("residual '%s' must be shaped and typed like the conv's output",
                            r->name);
    return SG_OK;
}
/* conv2d_sc: conv2d's rule on (h, w, b), stride 1, and the shortcut's operands: x at h's
 * pixels in y's dtype, ws [Co, 1, 1, Cin], bs [Co] */
static int shape_conv_sc(const sg_graph *g, const sg_node *nd, sg_tensor *o) {
    if (shape_conv(g, nd, o)) return SG_ERR;
    if (nd->a.conv.S != 1) return sg_set_error("conv2d_sc: stride %d (1 only)", nd->a.conv.S);
    const sg_tensor *x = T(3), *ws = T(4), *bs = T(5);
    if (x->ndim != 4 || x->shape[0] != o->shape[0] || x->shape[1] != o->shape[1] ||
        x->shape[2] != o->shape[2] || x->dtype != o->dtype)
        return sg_set_error("conv2d_sc: shortcut input '%s' must be typed like y and have its "
                            "pixels",
                            x->name);
    if (ws->ndim != 4 || ws->shape[0] != o->shape[3] || ws->shape[1] != 1 || ws->shape[2] != 1 ||
        ws->shape[3] != x->shape[3] || bs->ndim != 1 || bs->shape[0] != o->shape[3])
        return sg_set_error("conv2d_sc: shortcut weight '%s' / bias '%s' do not fit %lld -> %lld "
                            "channels",
                            ws->name, bs->name, (long long)x->shape[3], (long long)o->shape[3]);
    return SG_OK;
}
/* conv (conv2d_add's residual add not counted: its FLOPs are the matmul's) and both its
 * backward passes: N*Ho*Wo*Co*K*K*Ci multiply-adds each */
static double flops_conv(const sg_graph *g, const sg_node *nd) {
    sg_conv_dims d = sg_conv_dims_of(g, nd);
    return 2.0 * d.N * d.Ho * d.Wo * d.Co * d.K * d.K * d.Ci;
}
/* upconv2d: x [N,H,W,Ci] -> y [N,2H,2W,Co], w [Co,3,3,Ci] the fp32 master weights (the fold
 * reads them: planner/fuse.c), a 3x3 stride-1 pad-1 conv of the upsampled x */
static int upconv_weights(const sg_graph *g, const sg_node *nd, int64_t Ci) {
    const sg_conv_args *a = &nd->a.conv;
    if (a->K != 3 || a->S != 1 || a->pad != 1)
        return sg_set_error("upconv2d is a 3x3 stride-1 pad-1 conv (K=%d S=%d pad=%d)", a->K, a->S,
                            a->pad);
    if (need_ndim(g, nd, 1, 4)) return SG_ERR;
    if (T(1)->dtype != DT_F32)
        return sg_set_error("upconv2d folds the fp32 master weights; '%s' is %s", T(1)->name,
                            sg_dtype_names[T(1)->dtype]);
    if (DIM(1, 1) != 3 || DIM(1, 2) != 3 || DIM(1, 3) != Ci)
        return sg_set_error("weight %lldx%lldx%lldx%lld does not fit %lld channels, K=3",
                            (long long)DIM(1, 0), (long long)DIM(1, 1), (long long)DIM(1, 2),
                            (long long)DIM(1, 3), (long long)Ci);
    return SG_OK;
}
static int shape_upconv(const sg_graph *g, const sg_node *nd, sg_tensor *o) {
    if (need_ndim(g, nd, 0, 4) || upconv_weights(g, nd, DIM(0, 3)) ||
        need_act_dt(nd->a.conv.out_dt))
        return SG_ERR;
    if (DIM(2, 0) != DIM(1, 0)) return sg_set_error("upconv2d: bias size");
    set4(o, nd->a.conv.out_dt, DIM(0, 0), 2 * DIM(0, 1), 2 * DIM(0, 2), DIM(1, 0));
    return SG_OK;
}
/* 4 taps per output pixel (the sub-pixel form): 4/9 of the 3x3 conv on the upsampled x, in
 * each of the three passes */
static double flops_upconv(const sg_graph *g, const sg_node *nd) {
    sg_conv_dims d = sg_upconv_dims_of(g, nd);
    return 2.0 * d.N * d.Ho * d.Wo * d.Co * 4 * d.Ci;
}
/* conv2d_sc: conv2's and the shortcut's multiply-adds (the sum in the accumulator is free) */
static double flops_conv_sc(const sg_graph *g, const sg_node *nd) {
    sg_conv_dims d = sg_conv_dims_of(g, nd);
    return flops_conv(g, nd) + 2.0 * d.N * d.Ho * d.Wo * d.Co * DIM(3, 3);
}
static int shape_gn(const sg_graph *g, const sg_node *nd, sg_tensor *o) {
    if (need_ndim(g, nd, 0, 4)) return SG_ERR;
    if (nd->a.gn.act != SG_ACT_NONE || nd->a.gn.p != 0.0f)
        return sg_set_error("group_norm has no activation or dropout (norm_act has)");
    int G = nd->a.gn.groups;
    if (G < 1 || DIM(0, 3) % G)
        return sg_set_error("%lld channels not divisible into %d groups", (long long)DIM(0, 3), G);
    if (DIM(1, 0) != DIM(0, 3) || DIM(2, 0) != DIM(0, 3)) return sg_set_error("gamma/beta size");
    same(&o[0], T(0));
    set2(&o[1], DT_F32, DIM(0, 0), G);
    set2(&o[2], DT_F32, DIM(0, 0), G);
    return SG_OK;
}
static double flops_5x(const sg_graph *g, const sg_node *nd) {
    return 5 * numel_out0(g, nd);
}
/* The norm_act family (op_dims.h: sg_norm_operands_of says where each operand is). Forward:
 * y like x, mean and rstd [N, G] fp32; apply: y like x; backward: dx like x, dv like v,
 * dgamma and dbeta [C] fp32. */
static int norm_check(const sg_graph *g, const sg_node *nd, sg_norm_operands o) {
    const sg_tensor *x = T(o.x);
    const sg_gn_args *a = &nd->a.gn;
    if (x->ndim != 4) return sg_set_error("x '%s' must be 4-D", x->name);
    int64_t N = x->shape[0], C = x->shape[3];
    if (a->groups < 1 || C % a->groups)
        return sg_set_error("%lld channels not divisible into %d groups", (long long)C, a->groups);
    if (!(a->eps > 0.0f)) return sg_set_error("eps must be > 0");
    if (a->act != SG_ACT_NONE && a->act != SG_ACT_SILU)
        return sg_set_error("activation %d is not none or silu", a->act);
    if (!(a->p >= 0.0f && a->p < 1.0f) || (!o.temb && a->p != 0.0f))
        return sg_set_error("drop probability %g: norm_act_temb takes 0 <= p < 1, norm_act 0",
                            (double)a->p);
    if (T(o.gamma)->dtype != DT_F32 || sg_numel(T(o.gamma)) != C || T(o.beta)->dtype != DT_F32 ||
        sg_numel(T(o.beta)) != C)
        return sg_set_error("gamma and beta must be fp32 [%lld]", (long long)C);
    if (o.temb) {
        const sg_tensor *v = T(o.v);
        if (v->ndim != 2 || v->shape[0] != N || v->shape[1] != C || v->dtype != x->dtype)
            return sg_set_error("v '%s' must be [N, C] = [%lld, %lld] of x's dtype", v->name,
                                (long long)N, (long long)C);
        if (T(o.seed)->dtype != DT_U64 || T(o.step)->dtype != DT_I64)
            return sg_set_error("seed and step must be the u64 seed and the i64 step");
    }
    if (o.mean >= 0)
        for (int k = 0; k < 2; k++) {
            const sg_tensor *s = T(k ? o.rstd : o.mean);
            if (s->dtype != DT_F32 || s->ndim != 2 || s->shape[0] != N || s->shape[1] != a->groups)
                return sg_set_error("mean and rstd must be fp32 [N, G] = [%lld, %d]", (long long)N,
                                    a->groups);
        }
    if (o.dy >= 0 && (sg_numel(T(o.dy)) != sg_numel(x) || T(o.dy)->ndim != 4))
        return sg_set_error("dy must be shaped like x");
    return SG_OK;
}
static int shape_norm_act(const sg_graph *g, const sg_node *nd, sg_tensor *o) {
    sg_norm_operands op = sg_norm_operands_of(nd);
    if (norm_check(g, nd, op)) return SG_ERR;
    same(&o[0], T(op.x));
    set2(&o[1], DT_F32, DIM(op.x, 0), nd->a.gn.groups);
    set2(&o[2], DT_F32, DIM(op.x, 0), nd->a.gn.groups);
    return SG_OK;
}
static int shape_norm_apply(const sg_graph *g, const sg_node *nd, sg_tensor *o) {
    sg_norm_operands op = sg_norm_operands_of(nd);
    if (norm_check(g, nd, op)) return SG_ERR;
    same(&o[0], T(op.x));
    return SG_OK;
}
static int shape_norm_bwd(const sg_graph *g, const sg_node *nd, sg_tensor *o) {
    sg_norm_operands op = sg_norm_operands_of(nd);
    if (norm_check(g, nd, op)) return SG_ERR;
    int k = 0;
    same(&o[k++], T(op.x));
    if (op.temb) same(&o[k++], T(op.v));
    set1(&o[k++], DT_F32, DIM(op.x, 3));
    set1(&o[k++], DT_F32, DIM(op.x, 3));
    return SG_OK;
}
/* The FLOPs of the ops a norm_act node stands for: group_norm's 5 per element (statistics and
 * the affine transform; the apply pass alone 2), and 1 each for the activation, the dropout and
 * the time-embedding add; backward likewise. */
static double flops_norm(const sg_graph *g, const sg_node *nd) {
    sg_norm_operands o = sg_norm_operands_of(nd);
    double per = o.apply ? 2 : 5;
    per += (nd->a.gn.act != SG_ACT_NONE) + (nd->a.gn.p > 0.0f) + o.temb;
    return per * (double)sg_numel(T(o.x));
}

static int shape_add(const sg_graph *g, const sg_node *nd, sg_tensor *o) {
    if (sg_numel(T(0)) != sg_numel(T(1)) || T(0)->ndim != T(1)->ndim)
        return sg_set_error("'%s' and '%s' differ in shape", T(0)->name, T(1)->name);
    same(o, T(0));
    return SG_OK;
}
static int shape_add_nc(const sg_graph *g, const sg_node *nd, sg_tensor *o) {
    if (need_ndim(g, nd, 0, 4) || need_ndim(g, nd, 1, 2)) return SG_ERR;
    if (DIM(1, 0) != DIM(0, 0) || DIM(1, 1) != DIM(0, 3))
        return sg_set_error("v must be [N, C] of x");
    same(o, T(0));
    return SG_OK;
}
static int shape_concat(const sg_graph *g, const sg_node *nd, sg_tensor *o) {
    if (need_ndim(g, nd, 0, 4) || need_ndim(g, nd, 1, 4)) return SG_ERR;
    if (DIM(0, 0) != DIM(1, 0) || DIM(0, 1) != DIM(1, 1) || DIM(0, 2) != DIM(1, 2) ||
        T(0)->dtype != T(1)->dtype)
        return sg_set_error("concat of mismatched tensors");
    if (T(0)->nparts || T(1)->nparts) return sg_set_error("concat of a concat is not supported");
    set4(o, T(0)->dtype, DIM(0, 0), DIM(0, 1), DIM(0, 2), DIM(0, 3) + DIM(1, 3));
    return SG_OK;
}
static int shape_up(const sg_graph *g, const sg_node *nd, sg_tensor *o) {
    if (need_ndim(g, nd, 0, 4)) return SG_ERR;
    set4(o, T(0)->dtype, DIM(0, 0), DIM(0, 1) * 2, DIM(0, 2) * 2, DIM(0, 3));
    return SG_OK;
}
static int shape_pool(const sg_graph *g, const sg_node *nd, sg_tensor *o) {
    if (need_ndim(g, nd, 0, 4)) return SG_ERR;
    if (DIM(0, 1) % 2 || DIM(0, 2) % 2) return sg_set_error("avgpool 2x2 needs even H and W");
    set4(o, T(0)->dtype, DIM(0, 0), DIM(0, 1) / 2, DIM(0, 2) / 2, DIM(0, 3));
    return SG_OK;
}
static int shape_attn(const sg_graph *g, const sg_node *nd, sg_tensor *o) {
    if (need_ndim(g, nd, 0, 4)) return SG_ERR;
    int heads = nd->a.attn.heads;
    int64_t C3 = DIM(0, 3), L = DIM(0, 1) * DIM(0, 2);
    if (C3 % 3 || heads < 1 || (C3 / 3) % heads)
        return sg_set_error("qkv has %lld channels: need 3*C with C divisible by %d heads",
                            (long long)C3, heads);
    set4(&o[0], T(0)->dtype, DIM(0, 0), DIM(0, 1), DIM(0, 2), C3 / 3);
    set4(&o[1], DT_F32, DIM(0, 0), heads, L, L);
    return SG_OK;
}
/* attention_p (the recompute of P): the forward's P alone */
static int shape_attn_p(const sg_graph *g, const sg_node *nd, sg_tensor *o) {
    sg_tensor two[2];
    memset(two, 0, sizeof two);
    if (shape_attn(g, nd, two)) return SG_ERR;
    same(o, &two[1]);
    return SG_OK;
}
static double flops_attn(const sg_graph *g, const sg_node *nd) {
    sg_attn_dims d = sg_attn_dims_of(g, nd);
    double L = d.L;
    /* forward: q k^T and P v; backward: dP, dV, dQ, dK; P's recompute: q k^T */
    const double f = nd->op == OP_ATTENTION ? 4.0 : nd->op == OP_ATTENTION_P ? 2.0 : 8.0;
    return f * d.N * L * L * d.C;
}
static int shape_mse(const sg_graph *g, const sg_node *nd, sg_tensor *o) {
    if (sg_numel(T(0)) != sg_numel(T(1))) return sg_set_error("pred and target differ in size");
    /* no default: a forgotten 0 would silently zero every gradient */
    if (!(nd->a.mse.loss_scale > 0.0f)) return sg_set_error("mse needs a loss scale > 0");
    if (nd->a.mse.micro_batches < 1) return sg_set_error("mse needs micro_batches >= 1");
    /* mse_w: t i32[N] with N dividing pred's size, the weights f32[T] */
    if (nd->nin == 4 && (T(2)->dtype != DT_I32 || T(2)->ndim != 1 || T(2)->shape[0] < 1 ||
                         sg_numel(T(0)) % T(2)->shape[0] || T(3)->dtype != DT_F32 ||
                         T(3)->ndim != 1 || T(3)->shape[0] < 1))
        return sg_set_error("mse_w needs t i32[N] (N dividing the prediction's size) and a "
                            "weight per timestep f32[T]");
    set1(o, DT_F32, 1);
    return SG_OK;
}
static double flops_mse(const sg_graph *g, const sg_node *nd) {
    return 3.0 * sg_numel(T(0));
}

/* the all-reduce works in place on the gradient region and the fp32 loss scalar */
static int shape_allreduce(const sg_graph *g, const sg_node *nd, sg_tensor *o) {
    if (T(0)->dtype != DT_F32 || T(1)->dtype != DT_F32 || sg_numel(T(1)) != 1)
        return sg_set_error("allreduce takes the fp32 gradient region and the fp32 loss");
    if (nd->a.allreduce.ranks < 1) return sg_set_error("allreduce needs ranks >= 1");
    same(&o[0], T(0));
    same(&o[1], T(1));
    return SG_OK;
}

/* ---- backward ops: outputs are gradient tensors made by autodiff; the rules check them */
/* pointwise backward ops: in = {dy, the forward inputs}; output k is input k's gradient */
static int shape_grads(const sg_graph *g, const sg_node *nd, sg_tensor *o) {
    for (int k = 0; k < nd->nout; k++) same(&o[k], T(k + 1));
    return SG_OK;
}
static int shape_linear_bd(const sg_graph *g, const sg_node *nd, sg_tensor *o) {
    if (need_weights(g, nd, T(0)->dtype)) return SG_ERR;
    set2(o, T(0)->dtype, DIM(0, 0), DIM(1, 1));
    return SG_OK;
}
static int shape_linear_bw(const sg_graph *g, const sg_node *nd, sg_tensor *o) {
    set2(&o[0], DT_F32, DIM(0, 1), DIM(1, 1));
    set1(&o[1], DT_F32, DIM(0, 1));
    return SG_OK;
}
static int shape_conv_bd(const sg_graph *g, const sg_node *nd, sg_tensor *o) {
    const sg_conv_args *a = &nd->a.conv;
    if (conv_pad_check(a->H, a->K, a->S, a->pad) || conv_pad_check(a->W, a->K, a->S, a->pad) ||
        need_weights(g, nd, T(0)->dtype))
        return SG_ERR;
    set4(o, T(0)->dtype, DIM(0, 0), nd->a.conv.H, nd->a.conv.W, DIM(1, 3));
    return SG_OK;
}
static int shape_upconv_bd(const sg_graph *g, const sg_node *nd, sg_tensor *o) {
    const sg_conv_args *a = &nd->a.conv;
    if (need_ndim(g, nd, 0, 4) || upconv_weights(g, nd, DIM(1, 3))) return SG_ERR;
    if (DIM(0, 1) != 2 * (int64_t)a->H || DIM(0, 2) != 2 * (int64_t)a->W || DIM(0, 3) != DIM(1, 0))
        return sg_set_error("upconv2d_bwd_data: dy does not fit H=%d W=%d", a->H, a->W);
    set4(o, T(0)->dtype, DIM(0, 0), a->H, a->W, DIM(1, 3));
    return SG_OK;
}
static int shape_conv_bw(const sg_graph *g, const sg_node *nd, sg_tensor *o) {
    int K = nd->a.conv.K;
    set4(&o[0], DT_F32, DIM(0, 3), K, K, DIM(1, 3));
    set1(&o[1], DT_F32, DIM(0, 3));
    return SG_OK;
}
static int shape_gn_bwd(const sg_graph *g, const sg_node *nd, sg_tensor *o) {
    same(&o[0], T(1));
    set1(&o[1], DT_F32, DIM(4, 0));
    set1(&o[2], DT_F32, DIM(4, 0));
    return SG_OK;
}
static int shape_add_nc_bwd(const sg_graph *g, const sg_node *nd, sg_tensor *o) {
    set2(o, T(0)->dtype, DIM(0, 0), DIM(0, 3));
    return SG_OK;
}
static int shape_attn_bwd(const sg_graph *g, const sg_node *nd, sg_tensor *o) {
    same(o, T(1));
    return SG_OK;
}

/* ---- optimizer ops (in place on persistent regions) */
static int shape_scalar(const sg_graph *g, const sg_node *nd, sg_tensor *o) {
    (void)g, (void)nd;
    set1(o, DT_F32, 1);
    return SG_OK;
}
static double flops_in0(const sg_graph *g, const sg_node *nd) {
    return (double)sg_numel(T(0));
}
static double flops_adamw(const sg_graph *g, const sg_node *nd) {
    return 12.0 * sg_numel(T(0));
}
static int shape_adamw(const sg_graph *g, const sg_node *nd, sg_tensor *o) {
    for (int i = 1; i < 4; i++)
        if (T(i)->bytes != T(0)->bytes) return sg_set_error("optimizer regions differ in size");
    same(&o[0], T(0));
    same(&o[1], T(2));
    same(&o[2], T(3));
    set1(&o[3], DT_F32, 1);
    return SG_OK;
}
/* params, grads, m, v, ema (fp32 regions of one size), scale, step -> params, m, v, ema, lr
 * (adamw_ema_bf16: and params_bf16, bf16 of as many elements) */
static int shape_adamw_ema(const sg_graph *g, const sg_node *nd, sg_tensor *o) {
    for (int i = 0; i < 5; i++)
        if (T(i)->dtype != DT_F32 || T(i)->bytes != T(0)->bytes)
            return sg_set_error("adamw_ema: the optimizer regions must be fp32 of one size");
    if (T(5)->dtype != DT_F32 || sg_numel(T(5)) != 1 || T(6)->dtype != DT_I64 ||
        sg_numel(T(6)) != 1)
        return sg_set_error("adamw_ema: expects an f32 clip scale and an i64 step counter");
    same(&o[0], T(0));
    same(&o[1], T(2));
    same(&o[2], T(3));
    same(&o[3], T(4));
    set1(&o[4], DT_F32, 1);
    if (nd->nout > 5) { /* adamw_ema_bf16: the bf16 copy, element for element */
        if (nd->out[5] >= 0 && g->t[nd->out[5]].dtype != DT_BF16)
            return sg_set_error("adamw_ema_bf16: the weight copy must be bf16");
        same(&o[5], T(0));
        o[5].dtype = DT_BF16;
    }
    return SG_OK;
}
/* AdamW's 12 per element and the EMA's 1 */
static double flops_adamw_ema(const sg_graph *g, const sg_node *nd) {
    return 13.0 * sg_numel(T(0));
}
static int shape_step(const sg_graph *g, const sg_node *nd, sg_tensor *o) {
    same(o, T(0));
    return SG_OK;
}
static int shape_watch(const sg_graph *g, const sg_node *nd, sg_tensor *o) {
    if (T(0)->dtype != DT_F32 || T(1)->dtype != DT_F32 || T(2)->dtype != DT_I64 ||
        T(3)->dtype != DT_I64 || T(4)->dtype != DT_F32)
        return sg_set_error(
            "loss_watch: expects f32 loss, f32 sumsq, i64 step, i64 watch, f32 sum");
    same(&o[0], T(3));
    same(&o[1], T(4));
    return SG_OK;
}

/* x [N,H,W,C] fp32, pred like x (fp32 or bf16), table u8 [rows][SG_SAMPLE_ROW_BYTES], k i64[1],
 * key u64[2], x0h fp32 like x -> x, x_t (like x, in the args' dtype), t i32[N], x0h; guided:
 * pred, x_t and t hold 2N images */
static int shape_sample_step(const sg_graph *g, const sg_node *nd, sg_tensor *o) {
    const sg_sampler_args *a = &nd->a.sampler;
    if (need_ndim(g, nd, 0, 4) || need_ndim(g, nd, 2, 2) || need_act_dt(a->xt_dt)) return SG_ERR;
    const int copies = a->guided ? 2 : 1; /* guided: pred holds each image twice */
    if (T(0)->dtype != DT_F32 || sg_numel(T(1)) != copies * sg_numel(T(0)) ||
        (T(1)->dtype != DT_F32 && T(1)->dtype != DT_BF16) || (a->guided != 0 && a->guided != 1))
        return sg_set_error("sample_step: x must be fp32 and pred (fp32 or bf16) shaped like it "
                            "(twice as many images where guided)");
    if (T(2)->dtype != DT_U8 || DIM(2, 1) != SG_SAMPLE_ROW_BYTES || DIM(2, 0) < 1)
        return sg_set_error("sample_step: the table must be u8 [rows][%d]", SG_SAMPLE_ROW_BYTES);
    if (T(3)->dtype != DT_I64 || sg_numel(T(3)) != 1 || T(4)->dtype != DT_U64 ||
        sg_numel(T(4)) != 2)
        return sg_set_error("sample_step: expects an i64 step counter and a u64[2] key");
    if (T(5)->dtype != DT_F32 || sg_numel(T(5)) != sg_numel(T(0)))
        return sg_set_error("sample_step: the x0 history must be fp32 shaped like x");
    if (a->T < 1) return sg_set_error("sample_step: need T >= 1");
    same(&o[0], T(0));
    same(&o[1], T(0));
    o[1].dtype = a->xt_dt;
    o[1].shape[0] *= copies;
    set1(&o[2], DT_I32, copies * DIM(0, 0));
    same(&o[3], T(5));
    return SG_OK;
}

/* ---- backward rules. Each appends the nodes that differentiate forward node `i`; `dy` is
 * the gradient of its output 0. Names are "<forward output name>.<what>". */
#define FN (&g->n[i])
#define FIN(k) (g->n[i].in[k])
#define NEEDS(k) (g->t[FIN(k)].needs_grad)

static const char *bname(const sg_graph *g, int i, const char *what, char *buf) {
    sg_name(buf, "%s.%s", g->t[g->n[i].out[0]].name, what);
    return buf;
}

static int bwd_linear(sg_graph *g, int i) {
    char nm[SG_NAME_MAX];
    int dy = g->t[FN->out[0]].grad;
    if (NEEDS(0)) {
        int in[2] = {dy, FIN(1)}, go[1] = {FIN(0)};
        if (ad_emit(g, OP_LINEAR_BWD_DATA, in, 2, go, NULL, bname(g, i, "dx", nm), i) < 0)
            return SG_ERR;
    }
    int in[2] = {dy, FIN(0)}, go[2] = {FIN(1), FIN(2)};
    return ad_emit(g, OP_LINEAR_BWD_WEIGHT, in, 2, go, NULL, bname(g, i, "dw", nm), i) < 0;
}
static int bwd_conv(sg_graph *g, int i) {
    char nm[SG_NAME_MAX];
    int dy = g->t[FN->out[0]].grad;
    /* weight gradient first: it reads x, which may then die before dx is written */
    int in[2] = {dy, FIN(0)}, go[2] = {FIN(1), FIN(2)};
    sg_op_args a = FN->a; /* K, S, pad (out_dt unused backward); taken before g->n grows */
    if (ad_emit(g, OP_CONV2D_BWD_WEIGHT, in, 2, go, &a, bname(g, i, "dw", nm), i) < 0)
        return SG_ERR;
    if (NEEDS(0)) {
        int in2[2] = {dy, FIN(1)}, go2[1] = {FIN(0)};
        const sg_tensor *x = &g->t[FIN(0)];
        a.conv.H = (int)x->shape[1], a.conv.W = (int)x->shape[2];
        if (ad_emit(g, OP_CONV2D_BWD_DATA, in2, 2, go2, &a, bname(g, i, "dx", nm), i) < 0)
            return SG_ERR;
    }
    return SG_OK;
}
/* upconv2d: as the conv's (weight gradient first), with its own two passes */
static int bwd_upconv(sg_graph *g, int i) {
    char nm[SG_NAME_MAX];
    int dy = g->t[FN->out[0]].grad;
    int in[2] = {dy, FIN(0)}, go[2] = {FIN(1), FIN(2)};
    sg_op_args a = FN->a;
    if (ad_emit(g, OP_UPCONV2D_BWD_WEIGHT, in, 2, go, &a, bname(g, i, "dw", nm), i) < 0)
        return SG_ERR;
    if (NEEDS(0)) {
        int in2[2] = {dy, FIN(1)}, go2[1] = {FIN(0)};
        const sg_tensor *x = &g->t[FIN(0)];
        a.conv.H = (int)x->shape[1], a.conv.W = (int)x->shape[2];
        if (ad_emit(g, OP_UPCONV2D_BWD_DATA, in2, 2, go2, &a, bname(g, i, "dx", nm), i) < 0)
            return SG_ERR;
    }
    return SG_OK;
}
/* norm_act, norm_act_temb: one backward node reading dy, the forward inputs and the saved
 * statistics (never y: it recomputes what it needs), writing dx, dv (temb), dgamma, dbeta. */
static int bwd_norm_act(sg_graph *g, int i) {
    char nm[SG_NAME_MAX];
    const sg_node f = g->n[i]; /* a copy: g->n may move while emitting */
    sg_norm_operands o = sg_norm_operands_of(&f);
    int in[SG_MAX_IN], go[SG_MAX_OUT], n = 0, k = 0;
    SG_ASSERT(f.nin + 3 <= SG_MAX_IN);
    in[n++] = g->t[f.out[0]].grad;
    for (int j = 0; j < f.nin; j++) in[n++] = f.in[j];
    in[n++] = f.out[1];
    in[n++] = f.out[2];
    go[k++] = g->t[f.in[o.x]].needs_grad ? f.in[o.x] : -1;
    if (o.temb) go[k++] = g->t[f.in[o.v]].needs_grad ? f.in[o.v] : -1;
    go[k++] = f.in[o.gamma];
    go[k++] = f.in[o.beta];
    sg_op op = o.temb ? OP_NORM_ACT_TEMB_BWD : OP_NORM_ACT_BWD;
    return ad_emit(g, op, in, n, go, &f.a, bname(g, i, "bwd", nm), i) < 0;
}
static int bwd_gn(sg_graph *g, int i) {
    char nm[SG_NAME_MAX];
    int dy = g->t[FN->out[0]].grad;
    int in[5] = {dy, FIN(0), FN->out[1], FN->out[2], FIN(1)};
    int go[3] = {NEEDS(0) ? FIN(0) : -1, FIN(1), FIN(2)};
    return ad_emit(g, OP_GROUP_NORM_BWD, in, 5, go, &FN->a, bname(g, i, "bwd", nm), i) < 0;
}
/* Pointwise ops (the row's bwd_op column names their backward op): one node reads dy and
 * the forward inputs, and writes a gradient contribution for each input (a scratch output for
 * an input that needs none). */
static int bwd_pointwise(sg_graph *g, int i) {
    char nm[SG_NAME_MAX];
    const sg_node f = g->n[i]; /* a copy: g->n may move while emitting */
    int in[SG_MAX_IN], go[SG_MAX_OUT];
    SG_ASSERT(sg_ops[f.op].bwd_op >= 0 && f.nin + 1 <= SG_MAX_IN && f.nin <= SG_MAX_OUT);
    in[0] = g->t[f.out[0]].grad;
    for (int k = 0; k < f.nin; k++) {
        in[1 + k] = f.in[k];
        go[k] = g->t[f.in[k]].needs_grad ? f.in[k] : -1;
    }
    return ad_emit(g, (sg_op)sg_ops[f.op].bwd_op, in, 1 + f.nin, go, &f.a, bname(g, i, "bwd", nm),
                   i) < 0;
}
static int bwd_accum_into(sg_graph *g, int i, int k, const char *what) {
    char nm[SG_NAME_MAX];
    if (!NEEDS(k)) return SG_OK;
    int in[1] = {g->t[FN->out[0]].grad}, go[1] = {FIN(k)};
    return ad_emit(g, OP_ACCUM, in, 1, go, NULL, bname(g, i, what, nm), i) < 0;
}
/* conv2d_add: the residual's gradient is dy itself (accumulated where the unfused add's
 * backward put it, before the conv's), then the conv's backward on the same dy */
static int bwd_conv_add(sg_graph *g, int i) {
    if (bwd_accum_into(g, i, 3, "dres")) return SG_ERR;
    return bwd_conv(g, i);
}
/* conv2d_sc: the shortcut's backward on dy (its weight gradient dws, dbs, then its data
 * gradient into x), then conv2's (dw, db, then dh: bwd_conv), so that conv2's data gradient,
 * which writes the gradient of norm2's output, runs right before norm2's backward (the CUDA
 * backend then computes that backward's statistics' partials in its epilogue:
 * graph/backend_cuda_run.c). The four write different tensors, so their order changes no bits.
 * x's two gradient contributions keep the order of the unfused plans (conv2d_add and conv +
 * add): this node stands where conv2 did, after norm1 in the forward order, so its dx is
 * emitted before norm1's backward: the shortcut's contribution first (overwriting, or onto
 * what later readers of x gave), norm1's accumulated onto it. dws and dx are the conv2d_add
 * plan's bits: that plan's shortcut reads a copy of dy (the add's gradient accum). */
static int bwd_conv_sc(sg_graph *g, int i) {
    char nm[SG_NAME_MAX];
    int dy = g->t[FN->out[0]].grad;
    sg_op_args a = {.conv = {.K = 1, .S = 1, .pad = 0, .out_dt = FN->a.conv.out_dt}};
    int in[2] = {dy, FIN(3)}, go[2] = {FIN(4), FIN(5)};
    if (ad_emit(g, OP_CONV2D_BWD_WEIGHT, in, 2, go, &a, bname(g, i, "dws", nm), i) < 0)
        return SG_ERR;
    if (NEEDS(3)) {
        const sg_tensor *x = &g->t[FIN(3)];
        a.conv.H = (int)x->shape[1], a.conv.W = (int)x->shape[2];
        int in2[2] = {dy, FIN(4)}, go2[1] = {FIN(3)};
        if (ad_emit(g, OP_CONV2D_BWD_DATA, in2, 2, go2, &a, bname(g, i, "dxs", nm), i) < 0)
            return SG_ERR;
    }
    return bwd_conv(g, i);
}
static int bwd_add(sg_graph *g, int i) {
    /* b first: in a residual block b is the main branch, whose gradient is consumed next */
    if (bwd_accum_into(g, i, 1, "db")) return SG_ERR;
    return bwd_accum_into(g, i, 0, "da");
}
/* class_emb: the table's gradient (the labels have none) */
static int bwd_class_emb(sg_graph *g, int i) {
    char nm[SG_NAME_MAX];
    if (!NEEDS(1)) return SG_OK;
    int in[2] = {g->t[FN->out[0]].grad, FIN(0)}, go[1] = {FIN(1)};
    return ad_emit(g, OP_CLASS_EMB_BWD, in, 2, go, &FN->a, bname(g, i, "bwd", nm), i) < 0;
}
static int bwd_add_nc(sg_graph *g, int i) {
    char nm[SG_NAME_MAX];
    if (NEEDS(1)) {
        int in[1] = {g->t[FN->out[0]].grad}, go[1] = {FIN(1)};
        if (ad_emit(g, OP_ADD_NC_BWD, in, 1, go, NULL, bname(g, i, "dv", nm), i) < 0) return SG_ERR;
    }
    return bwd_accum_into(g, i, 0, "dx");
}
static int bwd_concat(sg_graph *g, int i) {
    /* nothing to do: the gradient of the virtual concat IS the pair of its parts' gradients,
     * written in place by the consumers' backward nodes */
    (void)g, (void)i;
    return SG_OK;
}
static int bwd_resample(sg_graph *g, int i) {
    char nm[SG_NAME_MAX];
    int in[1] = {g->t[FN->out[0]].grad}, go[1] = {FIN(0)};
    sg_op op = FN->op == OP_UPSAMPLE2X ? OP_UPSAMPLE2X_BWD : OP_AVGPOOL2X_BWD;
    return ad_emit(g, op, in, 1, go, NULL, bname(g, i, "bwd", nm), i) < 0;
}
static int bwd_attn(sg_graph *g, int i) {
    char nm[SG_NAME_MAX];
    int in[3] = {g->t[FN->out[0]].grad, FIN(0), FN->out[1]}, go[1] = {FIN(0)};
    return ad_emit(g, OP_ATTENTION_BWD, in, 3, go, &FN->a, bname(g, i, "bwd", nm), i) < 0;
}
static int bwd_dropout(sg_graph *g, int i) {
    char nm[SG_NAME_MAX];
    int in[3] = {g->t[FN->out[0]].grad, FIN(1), FIN(2)}, go[1] = {FIN(0)};
    return ad_emit(g, OP_DROPOUT_BWD, in, 3, go, &FN->a, bname(g, i, "bwd", nm), i) < 0;
}
static int bwd_mse(sg_graph *g, int i) {
    char nm[SG_NAME_MAX];
    const int w = FN->op == OP_MSE_W; /* mse_w: t and the weights travel along */
    int in[4] = {FIN(0), FIN(1), w ? FIN(2) : -1, w ? FIN(3) : -1}, go[1] = {FIN(0)};
    /* the loss scale travels along: it is the backward's dloss */
    return ad_emit(g, w ? OP_MSE_W_BWD : OP_MSE_BWD, in, w ? 4 : 2, go, &FN->a,
                   bname(g, i, "bwd", nm), i) < 0;
}

/* ---- workspace rules: the bytes each CUDA launcher takes (common/sg_workspace.h, the rules
 * the launchers carve their scratch by), from the same sizes the CUDA backend passes them */
static int out_dt(const sg_graph *g, const sg_node *nd) {
    return (int)g->t[nd->out[0]].dtype;
}
static int64_t ws_linear(const sg_graph *g, const sg_node *nd) {
    sg_linear_dims d = sg_linear_dims_of(g, nd);
    if (nd->op == OP_LINEAR) return sg_ws_linear_fwd(d.N, d.K, d.M, out_dt(g, nd));
    if (nd->op == OP_LINEAR_BWD_DATA) {
        /* the node's own launcher's, or a linear group's it may run in (graph/backend_cuda_run.c)
         */
        const int64_t own = sg_ws_linear_bwd_data(d.N, d.K, d.M, out_dt(g, nd)),
                      group = sg_ws_linear_group_bwd_data(d.N, d.K);
        return own > group ? own : group;
    }
    return sg_ws_linear_bwd_weight(d.N, d.K, d.M, 1);
}
static int64_t ws_conv(const sg_graph *g, const sg_node *nd) {
    sg_conv_dims d = sg_conv_dims_of(g, nd);
    if (nd->op == OP_CONV2D || nd->op == OP_CONV2D_ADD)
        return sg_ws_conv2d_fwd(d.N, d.H, d.W, d.Ci, d.Co, d.K, d.S, out_dt(g, nd));
    if (nd->op == OP_CONV2D_BWD_DATA)
        return sg_ws_conv2d_bwd_data(d.N, d.H, d.W, d.Ci, d.Co, d.K, d.S, out_dt(g, nd));
    /* dw is fp32 whatever the activations: the rule wants dy's dtype */
    return sg_ws_conv2d_bwd_weight(d.N, d.H, d.W, d.Ci, d.Co, d.K, d.S, (int)g->t[nd->in[0]].dtype,
                                   1);
}
static int64_t ws_upconv(const sg_graph *g, const sg_node *nd) {
    sg_conv_dims d = sg_upconv_dims_of(g, nd);
    if (nd->op == OP_UPCONV2D_BWD_WEIGHT)
        return sg_ws_upconv2d_bwd_weight(d.N, d.H, d.W, d.Ci, d.Co, 1);
    return sg_ws_upconv2d_fold(d.Ci, d.Co);
}
static int64_t ws_gn_bwd(const sg_graph *g, const sg_node *nd) {
    sg_gn_dims d = sg_gn_dims_of(g, nd);
    return sg_ws_group_norm_bwd(d.N, d.C);
}
static int64_t ws_norm(const sg_graph *g, const sg_node *nd) {
    sg_gn_dims d = sg_gn_dims_of(g, nd);
    sg_norm_operands o = sg_norm_operands_of(nd);
    SG_ASSERT(!o.apply);
    return o.bwd ? sg_ws_norm_act_bwd(d.N, d.HW, d.C, d.G, o.temb)
                 : sg_ws_norm_act_fwd(d.N, d.HW, d.C, d.G);
}
static int64_t ws_add_nc_bwd(const sg_graph *g, const sg_node *nd) {
    sg_nhwc_dims d = sg_nhwc_dims_of(g, nd);
    return sg_ws_add_nc_bwd(d.N, d.HW, d.C);
}
static int64_t ws_attn(const sg_graph *g, const sg_node *nd) {
    sg_attn_dims d = sg_attn_dims_of(g, nd);
    if (nd->op == OP_ATTENTION) return sg_ws_attention_fwd(d.N, d.L, d.C, d.heads, out_dt(g, nd));
    return sg_ws_attention_bwd(d.N, d.L, d.C, d.heads, out_dt(g, nd));
}
/* mse and grad_sumsq: one double partial per block of a full reduction */
static int64_t ws_reduce(const sg_graph *g, const sg_node *nd) {
    return sg_ws_sum(sg_in_numel(g, nd, 0));
}

int64_t sg_node_workspace_bytes(const sg_graph *g, const sg_node *nd) {
    sg_ws_fn ws = sg_ops[nd->op].workspace;
    return ws ? ws(g, nd) : 0;
}

/* ---- the bytes a node moves (sg_node_bytes) */
enum { BYTES_SEEN = 64 }; /* distinct tensors a node reads, at most (a norm's sources included) */
typedef struct {
    int t[BYTES_SEEN], n;
} bytes_seen;
/* tensor t's bytes read, once per node; a virtual one's are those of what it is read from
 * (sg_virtual_deps) */
static int64_t bytes_read(const sg_graph *g, int t, bytes_seen *s) {
    for (int i = 0; i < s->n; i++)
        if (s->t[i] == t) return 0;
    if (s->n < BYTES_SEEN) s->t[s->n++] = t;
    int64_t b = g->t[t].bytes; /* 0 where virtual */
    int deps[SG_MAX_IN + SG_MAX_OUT];
    const int nd = sg_virtual_deps(g, t, deps);
    for (int k = 0; k < nd; k++) b += bytes_read(g, deps[k], s);
    return b;
}
int64_t sg_node_bytes(const sg_graph *g, int node) {
    const sg_node *nd = &g->n[node];
    if (nd->op == OP_CONCAT) return 0; /* virtual: its readers read the parts */
    /* a plain copy laid out in its input's memory (plan_layout.c: the in-place merges and the
     * shared copies): both backends skip it */
    if (nd->op == OP_ACCUM && !nd->accum && T(0)->offset >= 0 &&
        T(0)->offset == g->t[nd->out[0]].offset)
        return 0;
    bytes_seen s = {.n = 0};
    int64_t b = 0;
    if (nd->op == OP_GATHER_BATCH || nd->op == OP_GATHER_LABELS) {
        /* the batch's pixels (labels) of the dataset, not all of it */
        s.t[s.n++] = nd->in[0];
        b += (int64_t)numel_out0(g, nd) * sg_dtype_size(T(0)->dtype);
    }
    for (int k = 0; k < nd->nin; k++) b += bytes_read(g, nd->in[k], &s);
    bytes_seen w = {.n = 0};
    for (int k = 0; k < nd->nout; k++) {
        const int id = nd->out[k];
        const sg_tensor *x = &g->t[id];
        int dup = 0;
        for (int i = 0; i < w.n; i++) dup |= w.t[i] == id;
        if (dup) continue;
        if (w.n < BYTES_SEEN) w.t[w.n++] = id;
        const unsigned acc = sg_accum_bits(nd, k);
        if (x->nparts)
            for (int q = 0; q < x->nparts; q++)
                b += g->t[x->parts[q]].bytes * (acc >> q & 1u ? 2 : 1);
        else if (x->vnorm < 0)
            b += x->bytes * (acc ? 2 : 1);
    }
    return b;
}

double sg_graph_bytes(const sg_graph *g) {
    double b = 0;
    for (int i = 0; i < g->nn; i++) b += (double)sg_node_bytes(g, i);
    return b;
}

/* ---- the op table, generated from planner/op_list.h: one row per op, by construction */
#define SG_OP_ROW(op, id, kind, nin, nout, inplace, matmul, shape, flops, ws, backward, bwd_op,    \
                  recomp)                                                                          \
    [op] = {#id,   SG_OPK_##kind, nin, nout,     inplace, matmul,                                  \
            shape, flops,         ws,  backward, bwd_op,  recomp},
const sg_op_info sg_ops[OP_COUNT] = {SG_OP_LIST(SG_OP_ROW)};
#undef SG_OP_ROW
