/* cudnn_conv.c — the cuDNN convolution engine (cudnn_conv.h says what and why): operation graphs
 * of cuDNN's backend API built per distinct convolution, heuristics mode A filtered to
 * deterministic engine configurations, one execution plan pinned per descriptor, executed with a
 * variant pack of the call's pointers.
 *
 * cuDNN's tensors are described in NCHW dimension order with strides that say where each
 * element lies; NHWC x[N,H,W,C] is dims {N, C, H, W}, strides {H W C, 1, W C, C}, and the
 * weights [Co][K][K][Ci] are dims {Co, Ci, K, K}, strides {K K Ci, 1, K Ci, Ci}.
 *
 * The timed choice (sg_cudnn_set_timing, a tuning run's) executes each candidate on the call's
 * own operands: it writes the call's output, which the step then writes again.
 *
 * Plain C11 (the cuDNN API is C); compiled only with SG_HAVE_CUDNN.
 */
#include "kernels/cuda/cudnn_conv.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cudnn.h>

#include "common/sg_base.h"
#include "common/sg_workspace.h"
#include "kernels/cuda/cuda_kernels.h"

#define DNN_MAX_KNOBS 32

/* Every field int64: no padding, so keys compare and hash as bytes. */
typedef struct {
    int64_t pass, N, H, W, Ci, Co, K, S, pad, dt, accum, bias;
    int64_t align_out, align_in, align_x, align_w, align_b;
} dnn_key;

typedef struct {
    dnn_key key;
    int ok;         /* cuDNN runs this descriptor */
    int bias_fused; /* forward with bias: added inside the conv call */
    int dw_bf16;    /* backward-filter, bf16: cuDNN writes a bf16 dw, widened (accumulated) by
                       cuda_conv2d_bwd_widen: no deterministic engine writes fp32 dw from bf16 */
    cudnnBackendDescriptor_t plan;
    int64_t engine; /* CUDNN_ATTR_ENGINE_GLOBAL_INDEX */
    int64_t ws_bytes;
    int64_t nknobs, knob_type[DNN_MAX_KNOBS], knob_value[DNN_MAX_KNOBS];
    int64_t tried, refused_notes; /* configurations seen, and refused for their notes */
    float timed_ms;               /* a timed choice: its ms per call (dnn_pick) */
    char why[672];                /* when !ok: the reason, for the fallback's warning */
} dnn_entry;

/* An engine asked for on a descriptor (a resume: the checkpoint's record), tried before the
 * heuristics. */
typedef struct {
    dnn_key key;
    int variant; /* 1: +bias (forward) or +dw_bf16 (backward-filter) */
    int64_t engine, nknobs, knob_type[DNN_MAX_KNOBS], knob_value[DNN_MAX_KNOBS];
} dnn_wish;

struct sg_cudnn {
    cudnnHandle_t h;
    cudaStream_t st;
    void *ws;
    int64_t ws_bytes;
    dnn_entry *e;
    int n, cap, frozen;
    int tf32; /* fp32 convolutions may use TF32 tensor-core engines (asked for) */
    dnn_wish *wish;
    int nwish, capwish, wishes_met, wishes_missed;
    /* the timed choice (sg_cudnn_set_timing): reps per candidate, 0 off; its events; where a
     * line per timed descriptor goes */
    int time_reps;
    cudaEvent_t ev[2];
    sg_cuda_window *win;
    FILE *log;
};

/* At most this many distinct deterministic configurations are timed per descriptor. */
#define DNN_TIMED_MAX 12

/* uids of the graph's tensors */
enum { UID_X = 1, UID_W = 2, UID_Y = 3, UID_B = 4, UID_CONV_OUT = 5 };

static int dnn_fail(const char *file, int line, const char *call, cudnnStatus_t s) {
    char last[256] = "";
    cudnnGetLastErrorString(last, sizeof last);
    return sg_set_error("%s:%d: %s: %s%s%s", file, line, call, cudnnGetErrorString(s),
                        last[0] ? ": " : "", last);
}
#define DNN(call)                                                                                  \
    do {                                                                                           \
        cudnnStatus_t s_ = (call);                                                                 \
        if (s_ != CUDNN_STATUS_SUCCESS) return dnn_fail(__FILE__, __LINE__, #call, s_);            \
    } while (0)

/* the largest power of two <= 256 that divides the address */
static int64_t dnn_align(const void *p) {
    const uintptr_t a = (uintptr_t)p;
    int64_t al = 256;
    while (al > 1 && a % (uintptr_t)al) al >>= 1;
    return al;
}

static cudnnDataType_t dnn_type(int64_t dt) {
    return dt == DT_BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
}

/* a pass by name, for messages */
static const char *dnn_pass_name(int64_t pass) {
    return pass == SG_CUDNN_FWD        ? "forward"
           : pass == SG_CUDNN_BWD_DATA ? "data gradient"
                                       : "weight gradient";
}

static int dnn_out_size(int64_t H, int64_t K, int64_t S) {
    return sg_ws_conv_out((int)H, (int)K, (int)S);
}

/* The bf16 weight buffer at the front of the workspace: the bf16 dw of the dw_bf16 variant of
 * backward-filter (forward and backward-data read the plan's bf16 weight copy directly). */
static int64_t dnn_wcopy_bytes(const dnn_key *k, int dw_bf16) {
    if (k->dt != DT_BF16 || k->pass != SG_CUDNN_BWD_FILTER || !dw_bf16) return 0;
    return sg_ws_align(k->Co * k->K * k->K * k->Ci * 2);
}

static void dnn_destroy(cudnnBackendDescriptor_t *d) {
    if (*d) cudnnBackendDestroyDescriptor(*d);
    *d = NULL;
}

/* A finalized tensor descriptor: NCHW dims, strides as given, bytes alignment. */
static int dnn_tensor(cudnnBackendDescriptor_t *t, int64_t uid, int64_t dt, const int64_t dims[4],
                      const int64_t strides[4], int64_t align, bool is_virtual) {
    const cudnnDataType_t type = dnn_type(dt);
    DNN(cudnnBackendCreateDescriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR, t));
    DNN(cudnnBackendSetAttribute(*t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type));
    DNN(cudnnBackendSetAttribute(*t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims));
    DNN(cudnnBackendSetAttribute(*t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides));
    DNN(cudnnBackendSetAttribute(*t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid));
    DNN(cudnnBackendSetAttribute(*t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1,
                                 &align));
    DNN(cudnnBackendSetAttribute(*t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1,
                                 &is_virtual));
    DNN(cudnnBackendFinalize(*t));
    return SG_OK;
}

/* NHWC activation [n, h, w, c] as cuDNN dims/strides */
static void dnn_nhwc(int64_t dims[4], int64_t strides[4], int64_t n, int64_t h, int64_t w,
                     int64_t c) {
    dims[0] = n, dims[1] = c, dims[2] = h, dims[3] = w;
    strides[0] = h * w * c, strides[1] = 1, strides[2] = w * c, strides[3] = c;
}

/* The descriptors of one graph: tensors, the convolution, the operations, the graph. */
typedef struct {
    cudnnBackendDescriptor_t tx, tw, ty, tb, tv, conv, op_conv, pw, op_pw, graph;
} dnn_graph;

static void dnn_graph_release(dnn_graph *g) {
    dnn_destroy(&g->graph), dnn_destroy(&g->op_pw), dnn_destroy(&g->pw);
    dnn_destroy(&g->op_conv), dnn_destroy(&g->conv), dnn_destroy(&g->tv);
    dnn_destroy(&g->tb), dnn_destroy(&g->ty), dnn_destroy(&g->tw), dnn_destroy(&g->tx);
}

/* The convolution descriptor of key k: cross-correlation (no flip), fp32 compute, pre/post
 * paddings (DDPM's SAME padding of the stride-2 conv: pre 0, post 1). */
static int dnn_conv_desc(const dnn_key *k, cudnnBackendDescriptor_t *conv) {
    const int64_t Ho = dnn_out_size(k->H, k->K, k->S), Wo = dnn_out_size(k->W, k->K, k->S);
    const int64_t H_need = (Ho - 1) * k->S + k->K, W_need = (Wo - 1) * k->S + k->K;
    int64_t post_h = H_need - k->H - k->pad, post_w = W_need - k->W - k->pad;
    if (post_h < 0) post_h = 0;
    if (post_w < 0) post_w = 0;
    const int64_t nsp = 2, pre[2] = {k->pad, k->pad}, post[2] = {post_h, post_w};
    const int64_t stride[2] = {k->S, k->S}, dil[2] = {1, 1};
    const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    if ((k->H + k->pad + post_h - k->K) / k->S + 1 != Ho ||
        (k->W + k->pad + post_w - k->K) / k->S + 1 != Wo)
        return sg_set_error("cudnn_conv: paddings %lld/%lld,%lld do not give %lldx%lld",
                            (long long)k->pad, (long long)post_h, (long long)post_w, (long long)Ho,
                            (long long)Wo);
    DNN(cudnnBackendCreateDescriptor(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, conv));
    DNN(cudnnBackendSetAttribute(*conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1,
                                 &nsp));
    DNN(cudnnBackendSetAttribute(*conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1,
                                 &comp));
    DNN(cudnnBackendSetAttribute(*conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE,
                                 CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode));
    DNN(cudnnBackendSetAttribute(*conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2,
                                 dil));
    DNN(cudnnBackendSetAttribute(*conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2,
                                 stride));
    DNN(cudnnBackendSetAttribute(*conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2,
                                 pre));
    DNN(cudnnBackendSetAttribute(*conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2,
                                 post));
    DNN(cudnnBackendFinalize(*conv));
    return SG_OK;
}

/* The attribute names of one pass's operation: the three tensors, the convolution, the
 * scalars. X is x (forward, backward-filter) or dx (backward-data), W is w or dw, Y is y or dy. */
typedef struct {
    cudnnBackendDescriptorType_t type;
    cudnnBackendAttributeName_t x, w, y, conv, alpha, beta;
} dnn_op_attrs;

static const dnn_op_attrs dnn_pass_attrs[3] = {
    [SG_CUDNN_FWD] = {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
                      CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
                      CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
                      CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
                      CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
                      CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
                      CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA},
    [SG_CUDNN_BWD_DATA] = {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
                           CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
                           CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
                           CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,
                           CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
                           CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
                           CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA},
    [SG_CUDNN_BWD_FILTER] = {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
                             CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
                             CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
                             CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,
                             CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
                             CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
                             CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA},
};

/* The convolution operation of k's pass; with the fused bias its output is the virtual fp32
 * tensor tv. beta 1 accumulates into the output (not for the bf16 dw, widened afterwards). */
static int dnn_conv_op(const dnn_key *k, dnn_graph *g, int dw_bf16, int fuse_bias) {
    const dnn_op_attrs *a = &dnn_pass_attrs[k->pass];
    const float alpha = 1.0f, beta = k->accum && !dw_bf16 ? 1.0f : 0.0f;
    const cudnnBackendAttributeType_t D = CUDNN_TYPE_BACKEND_DESCRIPTOR;
    DNN(cudnnBackendCreateDescriptor(a->type, &g->op_conv));
    DNN(cudnnBackendSetAttribute(g->op_conv, a->x, D, 1, &g->tx));
    DNN(cudnnBackendSetAttribute(g->op_conv, a->w, D, 1, &g->tw));
    DNN(cudnnBackendSetAttribute(g->op_conv, a->y, D, 1, fuse_bias ? &g->tv : &g->ty));
    DNN(cudnnBackendSetAttribute(g->op_conv, a->conv, D, 1, &g->conv));
    DNN(cudnnBackendSetAttribute(g->op_conv, a->alpha, CUDNN_TYPE_FLOAT, 1, &alpha));
    DNN(cudnnBackendSetAttribute(g->op_conv, a->beta, CUDNN_TYPE_FLOAT, 1, &beta));
    DNN(cudnnBackendFinalize(g->op_conv));
    return SG_OK;
}

/* The fused forward bias: y = tv + b, a pointwise add in fp32. */
static int dnn_bias_op(dnn_graph *g) {
    const cudnnPointwiseMode_t add = CUDNN_POINTWISE_ADD;
    const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    DNN(cudnnBackendCreateDescriptor(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, &g->pw));
    DNN(cudnnBackendSetAttribute(g->pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1,
                                 &add));
    DNN(cudnnBackendSetAttribute(g->pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1,
                                 &comp));
    DNN(cudnnBackendFinalize(g->pw));
    DNN(cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, &g->op_pw));
    DNN(cudnnBackendSetAttribute(g->op_pw, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g->pw));
    DNN(cudnnBackendSetAttribute(g->op_pw, CUDNN_ATTR_OPERATION_POINTWISE_XDESC,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g->tv));
    DNN(cudnnBackendSetAttribute(g->op_pw, CUDNN_ATTR_OPERATION_POINTWISE_BDESC,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g->tb));
    DNN(cudnnBackendSetAttribute(g->op_pw, CUDNN_ATTR_OPERATION_POINTWISE_YDESC,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g->ty));
    DNN(cudnnBackendFinalize(g->op_pw));
    return SG_OK;
}

/* The operation graph of key k. variant 1: forward with bias, conv -> virtual fp32 -> + b ->
 * y; backward-filter in bf16, dw in bf16 at the workspace's front (beta 0: the widening copy
 * accumulates). variant 0: the plain convolution. */
static int dnn_graph_make(sg_cudnn *c, const dnn_key *k, int variant, dnn_graph *g) {
    const int fuse_bias = variant && k->pass == SG_CUDNN_FWD;
    const int dw_bf16 = variant && k->pass == SG_CUDNN_BWD_FILTER;
    memset(g, 0, sizeof *g);
    const int64_t Ho = dnn_out_size(k->H, k->K, k->S), Wo = dnn_out_size(k->W, k->K, k->S);
    int64_t xd[4], xs[4], yd[4], ys[4];
    dnn_nhwc(xd, xs, k->N, k->H, k->W, k->Ci);
    dnn_nhwc(yd, ys, k->N, Ho, Wo, k->Co);
    const int64_t wd[4] = {k->Co, k->Ci, k->K, k->K};
    const int64_t ws[4] = {k->K * k->K * k->Ci, 1, k->K * k->Ci, k->Ci};
    /* which activation each pointer is: the forward reads x and writes y; backward-data reads
     * dy (y's shape) and writes dx (x's shape); backward-filter reads x and dy, writes dw */
    int64_t ax = k->align_in, ay = k->align_out, aw = k->align_w;
    if (k->pass == SG_CUDNN_BWD_DATA) ax = k->align_out, ay = k->align_in;
    if (k->pass == SG_CUDNN_BWD_FILTER) ax = k->align_x, ay = k->align_in, aw = k->align_out;
    if (dw_bf16) aw = dnn_align(c->ws);
    const int64_t wdt = k->pass == SG_CUDNN_BWD_FILTER && !dw_bf16 ? DT_F32 : k->dt;
    if (dnn_tensor(&g->tx, UID_X, k->dt, xd, xs, ax, false) ||
        dnn_tensor(&g->tw, UID_W, wdt, wd, ws, aw, false) ||
        dnn_tensor(&g->ty, UID_Y, k->dt, yd, ys, ay, false))
        return SG_ERR;
    if (fuse_bias) {
        const int64_t bd[4] = {1, k->Co, 1, 1}, bs[4] = {k->Co, 1, k->Co, k->Co};
        if (dnn_tensor(&g->tb, UID_B, DT_F32, bd, bs, k->align_b, false) ||
            dnn_tensor(&g->tv, UID_CONV_OUT, DT_F32, yd, ys, 16, true))
            return SG_ERR;
    }

    if (dnn_conv_desc(k, &g->conv) || dnn_conv_op(k, g, dw_bf16, fuse_bias)) return SG_ERR;
    cudnnBackendDescriptor_t ops[2] = {g->op_conv, NULL};
    int64_t nops = 1;
    if (fuse_bias) {
        if (dnn_bias_op(g)) return SG_ERR;
        ops[1] = g->op_pw;
        nops = 2;
    }
    DNN(cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &g->graph));
    DNN(cudnnBackendSetAttribute(g->graph, CUDNN_ATTR_OPERATIONGRAPH_OPS,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, nops, ops));
    DNN(cudnnBackendSetAttribute(g->graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1,
                                 &c->h));
    DNN(cudnnBackendFinalize(g->graph));
    return SG_OK;
}

/* Does this configuration's engine carry a note we refuse? *bad = 1 when so. */
static int dnn_notes_refused(cudnnBackendDescriptor_t engine, int64_t dt, int tf32, int *bad) {
    cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
    int64_t n = 0;
    *bad = 0;
    DNN(cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
                                 CUDNN_TYPE_NUMERICAL_NOTE, CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n,
                                 notes));
    for (int64_t i = 0; i < n; i++) {
        const cudnnBackendNumericalNote_t x = notes[i];
        if (x == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC ||
            x == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION)
            *bad = 1;
        /* fp32 without TF32: a tensor-core engine on fp32 data down-converts its inputs */
        if (dt == DT_F32 && !tf32 &&
            (x == CUDNN_NUMERICAL_NOTE_TENSOR_CORE ||
             x == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS))
            *bad = 1;
    }
    return SG_OK;
}

/* The engine's index and knob choices of configuration cfg, into e. */
static int dnn_cfg_describe(cudnnBackendDescriptor_t cfg, cudnnBackendDescriptor_t engine,
                            dnn_entry *e) {
    int64_t n = 0;
    DNN(cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n,
                                 &e->engine));
    cudnnBackendDescriptor_t knobs[DNN_MAX_KNOBS];
    memset(knobs, 0, sizeof knobs);
    int rc = SG_OK;
    for (int i = 0; i < DNN_MAX_KNOBS && rc == SG_OK; i++) {
        cudnnStatus_t s =
            cudnnBackendCreateDescriptor(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, &knobs[i]);
        if (s != CUDNN_STATUS_SUCCESS)
            rc = dnn_fail(__FILE__, __LINE__, "cudnnBackendCreateDescriptor(KNOB_CHOICE)", s);
    }
    int64_t nk = 0;
    if (rc == SG_OK) {
        cudnnStatus_t s =
            cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, DNN_MAX_KNOBS, &nk, knobs);
        if (s != CUDNN_STATUS_SUCCESS)
            rc =
                dnn_fail(__FILE__, __LINE__, "cudnnBackendGetAttribute(ENGINECFG_KNOB_CHOICES)", s);
    }
    e->nknobs = 0;
    for (int64_t i = 0; rc == SG_OK && i < nk && i < DNN_MAX_KNOBS; i++) {
        cudnnBackendKnobType_t type;
        int64_t value = 0, got = 0;
        cudnnStatus_t s = cudnnBackendGetAttribute(knobs[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE,
                                                   CUDNN_TYPE_KNOB_TYPE, 1, &got, &type);
        if (s == CUDNN_STATUS_SUCCESS)
            s = cudnnBackendGetAttribute(knobs[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE,
                                         CUDNN_TYPE_INT64, 1, &got, &value);
        if (s != CUDNN_STATUS_SUCCESS) {
            rc = dnn_fail(__FILE__, __LINE__, "cudnnBackendGetAttribute(KNOB_CHOICE)", s);
            break;
        }
        e->knob_type[e->nknobs] = (int64_t)type;
        e->knob_value[e->nknobs] = value;
        e->nknobs++;
    }
    for (int i = 0; i < DNN_MAX_KNOBS; i++) dnn_destroy(&knobs[i]);
    return rc;
}

/* Execute plan on cv's operands (the variant's: the fused bias; the bf16 dw at the workspace's
 * front). SG_ERR with the status. */
static int dnn_exec(sg_cudnn *c, cudnnBackendDescriptor_t plan, const dnn_key *k, int bias_fused,
                    int dw_bf16, const sg_cudnn_conv *cv) {
    const int64_t wcopy = dnn_wcopy_bytes(k, dw_bf16);
    const void *w = cv->w; /* in the activations' dtype: bf16, the plan's weight copy */
    /* the pointer of each uid: which activation is x and which y depends on the pass */
    int64_t uids[4] = {UID_X, UID_W, UID_Y, UID_B};
    void *ptrs[4] = {NULL, NULL, NULL, NULL};
    if (cv->pass == SG_CUDNN_FWD) {
        ptrs[0] = sg_cat_ptr(cv->in), ptrs[1] = sg_cat_ptr(w), ptrs[2] = cv->out;
    } else if (cv->pass == SG_CUDNN_BWD_DATA) {
        ptrs[0] = cv->out, ptrs[1] = sg_cat_ptr(w), ptrs[2] = sg_cat_ptr(cv->in);
    } else {
        ptrs[0] = sg_cat_ptr(cv->x), ptrs[1] = dw_bf16 ? c->ws : cv->out;
        ptrs[2] = sg_cat_ptr(cv->in);
    }
    int64_t nptr = 3;
    if (bias_fused) ptrs[3] = sg_cat_ptr(cv->b), nptr = 4;
    void *engine_ws = (char *)c->ws + wcopy;
    cudnnBackendDescriptor_t vp = NULL;
    cudnnStatus_t s = cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, nptr,
                                     uids);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
                                     nptr, ptrs);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1,
                                     &engine_ws);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendFinalize(vp);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendExecute(c->h, plan, vp);
    dnn_destroy(&vp);
    if (s != CUDNN_STATUS_SUCCESS)
        return dnn_fail(__FILE__, __LINE__, "variant pack / cudnnBackendExecute", s);
    cudaError_t ce = cudaGetLastError();
    if (ce != cudaSuccess)
        return sg_set_error("cudnn_conv: after cudnnBackendExecute: %s", cudaGetErrorString(ce));
    return SG_OK;
}

/* The configurations of heuristics `mode` over graph g, into *cfgs (*got of them; the caller
 * destroys them and frees the array). A mode cuDNN does not support for this graph is an error
 * unless `optional` (then *got = 0). */
static int dnn_heur(dnn_graph *g, cudnnBackendHeurMode_t mode, int optional,
                    cudnnBackendDescriptor_t **cfgs_out, int64_t *got) {
    *cfgs_out = NULL, *got = 0;
    cudnnBackendDescriptor_t heur = NULL;
    DNN(cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur));
    cudnnStatus_t s = cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH,
                                               CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g->graph);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1,
                                     &mode);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendFinalize(heur);
    int64_t count = 0;
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, NULL);
    if (s != CUDNN_STATUS_SUCCESS) {
        dnn_destroy(&heur);
        return optional ? SG_OK : dnn_fail(__FILE__, __LINE__, "engine heuristics", s);
    }
    cudnnBackendDescriptor_t *cfgs = calloc((size_t)(count > 0 ? count : 1), sizeof *cfgs);
    if (!cfgs) return dnn_destroy(&heur), sg_set_error("cudnn_conv: out of host memory");
    int rc = SG_OK;
    for (int64_t i = 0; i < count && rc == SG_OK; i++) {
        s = cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfgs[i]);
        if (s != CUDNN_STATUS_SUCCESS)
            rc = dnn_fail(__FILE__, __LINE__, "cudnnBackendCreateDescriptor(ENGINECFG)", s);
    }
    if (rc == SG_OK) {
        s = cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, count, got, cfgs);
        if (s != CUDNN_STATUS_SUCCESS)
            rc = dnn_fail(__FILE__, __LINE__, "cudnnBackendGetAttribute(ENGINEHEUR_RESULTS)", s);
    }
    dnn_destroy(&heur);
    if (rc) {
        for (int64_t i = 0; i < count; i++) dnn_destroy(&cfgs[i]);
        free(cfgs);
        *got = 0;
        return rc;
    }
    /* the descriptors past *got were made for nothing: destroyed now, NULL for the caller */
    for (int64_t i = *got; i < count; i++) dnn_destroy(&cfgs[i]);
    *cfgs_out = cfgs;
    return SG_OK;
}

/* One call as sg_cudnn_run makes it: plan on cv's operands, then a backward-filter's finish:
 * the dw_bf16 variant's widening of the bf16 dw into dw (fp32: = or +=) and db (cv->db, the
 * column sums of dy) in one launch (cuda_conv2d_bwd_widen), else db alone
 * (cuda_conv2d_bwd_bias): the bits of the widening and the column sum launched apart. */
static int dnn_call(sg_cudnn *c, cudnnBackendDescriptor_t plan, const dnn_key *k, int bias_fused,
                    int dw_bf16, const sg_cudnn_conv *cv) {
    if (dnn_exec(c, plan, k, bias_fused, dw_bf16, cv)) return SG_ERR;
    if (k->pass != SG_CUDNN_BWD_FILTER) return SG_OK;
    const int64_t nw = (int64_t)cv->Co * cv->K * cv->K * cv->Ci;
    const int64_t P =
        (int64_t)cv->N * dnn_out_size(cv->H, cv->K, cv->S) * dnn_out_size(cv->W, cv->K, cv->S);
    if (dw_bf16)
        return cuda_conv2d_bwd_widen(c->st, cv->out, c->ws, nw, cv->db, cv->in, P, cv->Co, cv->dt,
                                     cv->accum, cv->db_ws, cv->db_ws_bytes);
    return cv->db ? cuda_conv2d_bwd_bias(c->st, cv->db, cv->in, P, cv->Co, cv->dt, cv->accum,
                                         cv->db_ws, cv->db_ws_bytes)
                  : SG_OK;
}

/* ms per call (dnn_call: the finish included, a bf16 dw's widening and db, so the two
 * backward-filter variants compare whole) on cv's operands: one untimed call (a runtime-compiled
 * engine compiles, caches warm), then c->time_reps in a window of device time (c->win: cuDNN's
 * execute costs the host tens of microseconds a call, more than a small convolution's device
 * time, and without the window's hold every candidate of such a convolution would tie). */
static int dnn_time_plan(sg_cudnn *c, cudnnBackendDescriptor_t plan, const dnn_key *k,
                         int bias_fused, int dw_bf16, const sg_cudnn_conv *cv, float *ms) {
    if (dnn_call(c, plan, k, bias_fused, dw_bf16, cv)) return SG_ERR;
    if (sg_cuda_window_begin(c->win, c->st, c->ev[0])) return SG_ERR;
    for (int r = 0; r < c->time_reps; r++)
        if (dnn_call(c, plan, k, bias_fused, dw_bf16, cv)) {
            sg_cuda_window_cancel(c->win);
            return SG_ERR;
        }
    float t = 0;
    if (sg_cuda_window_end(c->win, c->st, c->ev[0], c->ev[1], &t)) return SG_ERR;
    *ms = t / (float)c->time_reps;
    return SG_OK;
}

/* e's engine and knobs as a wish (the signature two configurations are compared by) */
static void dnn_sig(const dnn_entry *e, dnn_wish *w) {
    memset(w, 0, sizeof *w);
    w->engine = e->engine, w->nknobs = e->nknobs;
    memcpy(w->knob_type, e->knob_type, sizeof w->knob_type);
    memcpy(w->knob_value, e->knob_value, sizeof w->knob_value);
}
static int dnn_sig_eq(const dnn_wish *a, const dnn_wish *b) {
    if (a->engine != b->engine || a->nknobs != b->nknobs) return 0;
    for (int64_t i = 0; i < a->nknobs; i++)
        if (a->knob_type[i] != b->knob_type[i] || a->knob_value[i] != b->knob_value[i]) return 0;
    return 1;
}

/* The engine of graph g (variant `variant` of e's key): heuristics mode A's configurations in
 * order; each that is deterministic (dnn_notes_refused), whose plan finalizes and whose
 * workspace fits the budget is a candidate. Without timing the first candidate becomes e's
 * plan. With timing (sg_cudnn_set_timing), the candidates of modes A, B and FALLBACK, each
 * distinct engine + knobs once and at most DNN_TIMED_MAX of them, are executed on cv's operands
 * and the fastest becomes e's plan (the earlier on a tie: the heuristics' order). SG_OK with
 * e->ok = 0 and e->why set when there is no candidate. */
static int dnn_pick(sg_cudnn *c, dnn_graph *g, int64_t budget, dnn_entry *e,
                    const sg_cudnn_conv *cv, int variant) {
    const int timing = c->time_reps > 0;
    const cudnnBackendHeurMode_t modes[3] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_B,
                                             CUDNN_HEUR_MODE_FALLBACK};
    const int nmodes = timing ? 3 : 1;
    const int bias_fused = variant && e->key.pass == SG_CUDNN_FWD;
    const int dw_bf16 = variant && e->key.pass == SG_CUDNN_BWD_FILTER;
    dnn_wish seen[DNN_TIMED_MAX];
    int nseen = 0, done = 0;
    float best = 0, first_ms = -1;
    char first[160] = "";
    int64_t got_all = 0, too_big = 0, no_plan = 0, failed = 0;
    int rc = SG_OK;
    for (int m = 0; m < nmodes && rc == SG_OK && !done; m++) {
        cudnnBackendDescriptor_t *cfgs = NULL;
        int64_t got = 0;
        rc = dnn_heur(g, modes[m], m > 0, &cfgs, &got);
        got_all += got;
        for (int64_t i = 0; rc == SG_OK && i < got && !done; i++) {
            e->tried++;
            cudnnBackendDescriptor_t engine = NULL, plan = NULL;
            int64_t n = 0, ws = 0;
            int bad = 0;
            cudnnStatus_t s =
                cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &engine);
            if (s == CUDNN_STATUS_SUCCESS)
                s = cudnnBackendGetAttribute(cfgs[i], CUDNN_ATTR_ENGINECFG_ENGINE,
                                             CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &engine);
            if (s != CUDNN_STATUS_SUCCESS) {
                rc = dnn_fail(__FILE__, __LINE__, "cudnnBackendGetAttribute(ENGINECFG_ENGINE)", s);
            } else if (dnn_notes_refused(engine, e->key.dt, c->tf32, &bad)) {
                rc = SG_ERR;
            } else if (bad) {
                e->refused_notes++;
            } else {
                /* a configuration the engine cannot build for this device is skipped, not fatal */
                s = cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan);
                if (s == CUDNN_STATUS_SUCCESS)
                    s = cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE,
                                                 CUDNN_TYPE_HANDLE, 1, &c->h);
                if (s == CUDNN_STATUS_SUCCESS)
                    s = cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfgs[i]);
                if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendFinalize(plan);
                if (s == CUDNN_STATUS_SUCCESS)
                    s = cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                                 CUDNN_TYPE_INT64, 1, &n, &ws);
                dnn_entry cand;
                memset(&cand, 0, sizeof cand);
                dnn_wish sig;
                float ms = 0;
                if (s != CUDNN_STATUS_SUCCESS) {
                    no_plan++;
                } else if (ws > budget) {
                    too_big++;
                } else if (dnn_cfg_describe(cfgs[i], engine, &cand)) {
                    rc = SG_ERR;
                } else if (!timing) {
                    e->plan = plan, plan = NULL, e->ws_bytes = ws, e->ok = 1, done = 1;
                    e->engine = cand.engine, e->nknobs = cand.nknobs;
                    memcpy(e->knob_type, cand.knob_type, sizeof e->knob_type);
                    memcpy(e->knob_value, cand.knob_value, sizeof e->knob_value);
                } else {
                    dnn_sig(&cand, &sig);
                    int dup = 0;
                    for (int j = 0; j < nseen && !dup; j++) dup = dnn_sig_eq(&seen[j], &sig);
                    if (dup) {
                        /* listed by an earlier mode: timed already */
                    } else if (dnn_time_plan(c, plan, &e->key, bias_fused, dw_bf16, cv, &ms)) {
                        /* a candidate that fails to run is skipped, saying why */
                        failed++;
                        if (c->log)
                            fprintf(c->log, "stepgraph: cuDNN timing: e%lld skipped: %s\n",
                                    (long long)cand.engine, sg_last_error());
                        cudaGetLastError();
                    } else {
                        seen[nseen++] = sig;
                        if (first_ms < 0) {
                            first_ms = ms;
                            snprintf(first, sizeof first, "e%lld", (long long)cand.engine);
                        }
                        if (!e->ok || ms < best) {
                            dnn_destroy(&e->plan);
                            e->plan = plan, plan = NULL, e->ws_bytes = ws, e->ok = 1, best = ms;
                            e->timed_ms = ms;
                            e->engine = cand.engine, e->nknobs = cand.nknobs;
                            memcpy(e->knob_type, cand.knob_type, sizeof e->knob_type);
                            memcpy(e->knob_value, cand.knob_value, sizeof e->knob_value);
                        }
                        done = nseen == DNN_TIMED_MAX;
                    }
                }
                dnn_destroy(&plan);
            }
            dnn_destroy(&engine);
        }
        for (int64_t i = 0; i < got; i++) dnn_destroy(&cfgs[i]);
        free(cfgs);
    }
    if (rc == SG_OK && timing && e->ok && c->log)
        fprintf(c->log,
                "stepgraph: cuDNN timed (%s, %lldx%lldx%lldx%lld -> %lld, K=%lld S=%lld%s): "
                "%d candidates, fastest e%lld %.4f ms; heuristics' first %s %.4f ms\n",
                dnn_pass_name(e->key.pass), (long long)e->key.N, (long long)e->key.H,
                (long long)e->key.W, (long long)e->key.Ci, (long long)e->key.Co,
                (long long)e->key.K, (long long)e->key.S,
                variant ? (e->key.pass == SG_CUDNN_FWD ? ", +bias" : ", +dw_bf16") : "", nseen,
                (long long)e->engine, (double)best, first, (double)first_ms);
    if (rc == SG_OK && !e->ok)
        snprintf(e->why, sizeof e->why,
                 "no deterministic cuDNN engine: %lld configurations from heuristics mode A%s, "
                 "%lld refused for their numerical notes (non-deterministic, reduced-precision "
                 "reduction%s), %lld with no plan, %lld over the %lld-byte workspace budget%s",
                 (long long)got_all, timing ? ", B and fallback" : "", (long long)e->refused_notes,
                 e->key.dt == DT_F32 && !c->tf32 ? ", TF32 / down-converting" : "",
                 (long long)no_plan, (long long)too_big, (long long)budget,
                 failed ? ", some failing to run" : "");
    return rc;
}

/* The engine configuration a wish names, on graph g: engine by global index, its knob
 * choices; kept as e's plan when it passes the same filters as a heuristic's choice. SG_OK
 * with e->ok = 0 and e->why set when it cannot be had. */
static int dnn_pick_wished(sg_cudnn *c, dnn_graph *g, int64_t budget, const dnn_wish *w,
                           dnn_entry *e) {
    cudnnBackendDescriptor_t engine = NULL, cfg = NULL, plan = NULL;
    cudnnBackendDescriptor_t knobs[DNN_MAX_KNOBS];
    memset(knobs, 0, sizeof knobs);
    const char *step = "engine";
    cudnnStatus_t s = cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &engine);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(engine, CUDNN_ATTR_ENGINE_OPERATION_GRAPH,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g->graph);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1,
                                     &w->engine);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendFinalize(engine);
    for (int64_t i = 0; s == CUDNN_STATUS_SUCCESS && i < w->nknobs; i++) {
        const cudnnBackendKnobType_t type = (cudnnBackendKnobType_t)w->knob_type[i];
        step = "knob choice";
        s = cudnnBackendCreateDescriptor(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, &knobs[i]);
        if (s == CUDNN_STATUS_SUCCESS)
            s = cudnnBackendSetAttribute(knobs[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE,
                                         CUDNN_TYPE_KNOB_TYPE, 1, &type);
        if (s == CUDNN_STATUS_SUCCESS)
            s = cudnnBackendSetAttribute(knobs[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE,
                                         CUDNN_TYPE_INT64, 1, &w->knob_value[i]);
        if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendFinalize(knobs[i]);
    }
    if (s == CUDNN_STATUS_SUCCESS) {
        step = "engine configuration";
        s = cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfg);
    }
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &engine);
    if (s == CUDNN_STATUS_SUCCESS && w->nknobs)
        s = cudnnBackendSetAttribute(cfg, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, w->nknobs, knobs);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendFinalize(cfg);
    int bad = 0, rc = SG_OK;
    int64_t n = 0, ws = 0;
    if (s == CUDNN_STATUS_SUCCESS) {
        step = "numerical notes";
        rc = dnn_notes_refused(engine, e->key.dt, c->tf32, &bad);
    }
    if (s == CUDNN_STATUS_SUCCESS && rc == SG_OK && !bad) {
        step = "execution plan";
        s = cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan);
        if (s == CUDNN_STATUS_SUCCESS)
            s = cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE,
                                         1, &c->h);
        if (s == CUDNN_STATUS_SUCCESS)
            s = cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                         CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg);
        if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendFinalize(plan);
        if (s == CUDNN_STATUS_SUCCESS)
            s = cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                         CUDNN_TYPE_INT64, 1, &n, &ws);
    }
    if (s != CUDNN_STATUS_SUCCESS) {
        char last[200] = "";
        cudnnGetLastErrorString(last, sizeof last);
        snprintf(e->why, sizeof e->why, "the recorded engine e%lld: %s: %s%s%s",
                 (long long)w->engine, step, cudnnGetErrorString(s), last[0] ? ": " : "", last);
    } else if (rc) {
        snprintf(e->why, sizeof e->why, "the recorded engine e%lld: %s", (long long)w->engine,
                 sg_last_error());
        rc = SG_OK;
    } else if (bad) {
        snprintf(e->why, sizeof e->why,
                 "the recorded engine e%lld has numerical notes this run refuses",
                 (long long)w->engine);
    } else if (ws > budget) {
        snprintf(e->why, sizeof e->why,
                 "the recorded engine e%lld needs %lld workspace bytes, over the %lld budget",
                 (long long)w->engine, (long long)ws, (long long)budget);
    } else {
        e->ok = 1, e->plan = plan, plan = NULL, e->ws_bytes = ws, e->engine = w->engine;
        e->nknobs = w->nknobs;
        memcpy(e->knob_type, w->knob_type, sizeof e->knob_type);
        memcpy(e->knob_value, w->knob_value, sizeof e->knob_value);
    }
    dnn_destroy(&plan);
    dnn_destroy(&cfg);
    for (int i = 0; i < DNN_MAX_KNOBS; i++) dnn_destroy(&knobs[i]);
    dnn_destroy(&engine);
    return rc;
}

static int dnn_key_of(const sg_cudnn_conv *cv, dnn_key *k) {
    memset(k, 0, sizeof *k);
    k->pass = cv->pass, k->N = cv->N, k->H = cv->H, k->W = cv->W, k->Ci = cv->Ci, k->Co = cv->Co;
    k->K = cv->K, k->S = cv->S, k->pad = cv->pad, k->dt = cv->dt;
    k->accum = cv->pass == SG_CUDNN_FWD ? 0 : !!cv->accum;
    k->bias = cv->pass == SG_CUDNN_FWD && cv->b != NULL;
    k->align_out = dnn_align(cv->out), k->align_in = dnn_align(cv->in);
    k->align_x = cv->pass == SG_CUDNN_BWD_FILTER ? dnn_align(cv->x) : 0;
    if (cv->pass != SG_CUDNN_BWD_FILTER) k->align_w = dnn_align(cv->w);
    k->align_b = k->bias ? dnn_align(cv->b) : 0;
    SG_ASSERT(k->pass >= SG_CUDNN_FWD && k->pass <= SG_CUDNN_BWD_FILTER);
    return SG_OK;
}

static int dnn_check(const sg_cudnn *c, const sg_cudnn_conv *cv) {
    if (!c) return sg_set_error("cudnn_conv: no cuDNN context");
    if (cv->dt != DT_F32 && cv->dt != DT_BF16)
        return sg_set_error("cudnn_conv: activation dtype %d is not f32/bf16", cv->dt);
    if (!((cv->K == 1 || cv->K == 3) && (cv->S == 1 || cv->S == 2) && cv->pad >= 0 &&
          cv->pad <= cv->K / 2 && cv->N > 0 && cv->H > 0 && cv->W > 0 && cv->Ci > 0 && cv->Co > 0 &&
          cv->out && cv->in && cv->pass >= SG_CUDNN_FWD && cv->pass <= SG_CUDNN_BWD_FILTER &&
          (cv->pass == SG_CUDNN_BWD_FILTER ? cv->x != NULL : cv->w != NULL)))
        return sg_set_error("cudnn_conv: bad call (pass %d, K=%d S=%d pad %d, %dx%dx%dx%d -> %d)",
                            cv->pass, cv->K, cv->S, cv->pad, cv->N, cv->H, cv->W, cv->Ci, cv->Co);
    return SG_OK;
}

int64_t sg_cudnn_budget(const sg_cudnn *c, const sg_cudnn_conv *cv) {
    dnn_key k;
    dnn_key_of(cv, &k);
    return c ? c->ws_bytes - dnn_wcopy_bytes(&k, 0) : 0;
}

/* the entry of cv's descriptor, made (heuristics, plan) when new; NULL with an error when the
 * table is frozen or cuDNN failed */
static dnn_entry *dnn_entry_get(sg_cudnn *c, const sg_cudnn_conv *cv) {
    dnn_key k;
    dnn_key_of(cv, &k);
    for (int i = 0; i < c->n; i++)
        if (!memcmp(&c->e[i].key, &k, sizeof k)) return &c->e[i];
    if (c->frozen) {
        sg_set_error("cudnn_conv: convolution (%s, %dx%dx%dx%d -> %d, K=%d S=%d pad %d, %s) "
                     "is not among the %d pinned after the warm-up step: a captured step would "
                     "run an engine the eager step did not",
                     dnn_pass_name(cv->pass), cv->N, cv->H, cv->W, cv->Ci, cv->Co, cv->K, cv->S,
                     cv->pad, cv->dt == DT_BF16 ? "bf16" : "fp32", c->n);
        return NULL;
    }
    if (c->n == c->cap) {
        const int cap = c->cap ? 2 * c->cap : 64;
        dnn_entry *ne = realloc(c->e, (size_t)cap * sizeof *ne);
        if (!ne) {
            sg_set_error("cudnn_conv: out of host memory");
            return NULL;
        }
        c->e = ne, c->cap = cap;
    }
    dnn_entry *e = &c->e[c->n];
    memset(e, 0, sizeof *e);
    e->key = k;
    /* an engine asked for (the checkpoint's record), on its variant, before any heuristic */
    const dnn_wish *w = NULL;
    for (int i = 0; i < c->nwish && !w; i++)
        if (!memcmp(&c->wish[i].key, &k, sizeof k)) w = &c->wish[i];
    if (w) {
        const int bf = k.pass == SG_CUDNN_BWD_FILTER && w->variant;
        const int64_t budget = c->ws_bytes - dnn_wcopy_bytes(&k, bf);
        dnn_graph g;
        int wrc = dnn_graph_make(c, &k, w->variant, &g);
        if (wrc == SG_OK && budget >= 0) wrc = dnn_pick_wished(c, &g, budget, w, e);
        dnn_graph_release(&g);
        if (wrc) snprintf(e->why, sizeof e->why, "the recorded engine: %s", sg_last_error());
        if (e->ok) {
            e->bias_fused = k.pass == SG_CUDNN_FWD && w->variant;
            e->dw_bf16 = bf;
            c->wishes_met++;
        } else {
            c->wishes_missed++;
            fprintf(stderr,
                    "stepgraph: warning: cuDNN conv (%s, %dx%dx%dx%d -> %d, K=%d S=%d): "
                    "%s; choosing afresh\n",
                    dnn_pass_name(cv->pass), cv->N, cv->H, cv->W, cv->Ci, cv->Co, cv->K, cv->S,
                    e->why);
        }
    }
    /* the variants, preferred first: forward with bias, fused (1) then not (0); backward-filter
     * in bf16, fp32 dw (0) then bf16 dw (1); everything else, the plain graph (0). A timed
     * choice of a bf16 backward-filter times both and keeps the faster whole call: timing
     * also lists the fallback heuristics, whose only fp32-dw engine ran 2 to 4 times slower
     * than the bf16-dw engine the first variant's absence leads to (bench/results/
     * 2026-11-28-nvidia-h200-run-3.md); the forward keeps its preference, since its unfused
     * variant's time would leave out the caller's separate bias pass. */
    int variants[2] = {0, -1};
    if (k.pass == SG_CUDNN_FWD && k.bias) variants[0] = 1, variants[1] = 0;
    if (k.pass == SG_CUDNN_BWD_FILTER && k.dt == DT_BF16) variants[1] = 1;
    const int time_both = c->time_reps > 0 && k.pass == SG_CUDNN_BWD_FILTER && k.dt == DT_BF16;
    dnn_entry kept; /* time_both: the first variant's choice while the second is timed */
    int have_kept = 0;
    int rc = SG_OK;
    char first_why[sizeof e->why] = "";
    for (int v = 0; v < 2 && variants[v] >= 0 && rc == SG_OK && (!e->ok || time_both); v++) {
        const int var = variants[v];
        if (e->ok) { /* time_both: set the first choice aside, choose the second afresh */
            kept = *e, have_kept = 1;
            e->plan = NULL, e->ok = 0;
        }
        const int64_t budget =
            c->ws_bytes - dnn_wcopy_bytes(&k, k.pass == SG_CUDNN_BWD_FILTER && var);
        dnn_graph g;
        e->tried = e->refused_notes = 0;
        e->why[0] = 0;
        rc = dnn_graph_make(c, &k, var, &g);
        if (rc == SG_OK && budget >= 0) rc = dnn_pick(c, &g, budget, e, cv, var);
        if (rc == SG_OK && budget < 0)
            snprintf(e->why, sizeof e->why,
                     "the bf16 dw (%lld bytes) does not fit the %lld-byte library workspace",
                     (long long)dnn_wcopy_bytes(&k, 1), (long long)c->ws_bytes);
        dnn_graph_release(&g);
        /* a variant cuDNN refuses to build is a reason to try the next, while there is one */
        if (rc && v == 0 && variants[1] >= 0) {
            snprintf(e->why, sizeof e->why, "%s", sg_last_error());
            rc = SG_OK;
        }
        if (e->ok) {
            e->bias_fused = k.pass == SG_CUDNN_FWD && var;
            e->dw_bf16 = k.pass == SG_CUDNN_BWD_FILTER && var;
        } else if (v == 0) {
            snprintf(first_why, sizeof first_why, "%s", e->why);
        }
        if (have_kept) { /* the faster of the two (the first on a tie; the first where the
                          * second cannot be built) */
            if (rc != SG_OK) cudaGetLastError(), rc = SG_OK;
            if (e->ok && e->timed_ms < kept.timed_ms) {
                dnn_destroy(&kept.plan);
            } else {
                dnn_destroy(&e->plan);
                *e = kept;
            }
            have_kept = 0;
        }
    }
    if (rc == SG_OK && !e->ok && first_why[0] && variants[1] >= 0) {
        /* both variants' counts whole (a reason cut short names no cause), the second without
         * the words the first began with */
        static const char lead[] = "no deterministic cuDNN engine: ";
        char second[sizeof e->why];
        snprintf(second, sizeof second, "%s", e->why);
        const char *rest = second + (strncmp(second, lead, sizeof lead - 1) ? 0 : sizeof lead - 1);
        snprintf(e->why, sizeof e->why, "%.320s; and %s: %.320s", first_why,
                 k.pass == SG_CUDNN_FWD ? "without the fused bias" : "with a bf16 dw", rest);
    }
    if (rc) return NULL;
    c->n++;
    return e;
}

int sg_cudnn_create(sg_cudnn **out, cudaStream_t st, void *ws, int64_t ws_bytes) {
    *out = NULL;
    if (ws_bytes < 0 || (ws_bytes > 0 && (!ws || (uintptr_t)ws % SG_WS_ALIGN)))
        return sg_set_error("sg_cudnn_create: a workspace of %lld bytes at %p", (long long)ws_bytes,
                            ws);
    sg_cudnn *c = calloc(1, sizeof *c);
    if (!c) return sg_set_error("sg_cudnn_create: out of host memory");
    cudnnStatus_t s = cudnnCreate(&c->h);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnSetStream(c->h, st);
    if (s != CUDNN_STATUS_SUCCESS) {
        if (c->h) cudnnDestroy(c->h);
        free(c);
        return dnn_fail(__FILE__, __LINE__, "cudnnCreate / cudnnSetStream", s);
    }
    c->st = st, c->ws = ws, c->ws_bytes = ws_bytes;
    *out = c;
    return SG_OK;
}

void sg_cudnn_destroy(sg_cudnn *c) {
    if (!c) return;
    for (int i = 0; i < 2; i++)
        if (c->ev[i]) cudaEventDestroy(c->ev[i]);
    for (int i = 0; i < c->n; i++) dnn_destroy(&c->e[i].plan);
    free(c->e);
    free(c->wish);
    if (c->h) cudnnDestroy(c->h);
    free(c);
}

int sg_cudnn_probe(sg_cudnn *c, const sg_cudnn_conv *cv) {
    if (dnn_check(c, cv)) return SG_ERR;
    dnn_entry *e = dnn_entry_get(c, cv);
    if (!e) return SG_ERR;
    if (!e->ok) return sg_set_error("%s", e->why);
    return SG_OK;
}

int sg_cudnn_run(sg_cudnn *c, const sg_cudnn_conv *cv, int *bias_done) {
    if (bias_done) *bias_done = 0;
    if (dnn_check(c, cv)) return SG_ERR;
    dnn_entry *e = dnn_entry_get(c, cv);
    if (!e) return SG_ERR;
    if (!e->ok) return sg_set_error("%s", e->why);
    if (dnn_call(c, e->plan, &e->key, e->bias_fused, e->dw_bf16, cv)) {
        char name[160], msg[384];
        snprintf(msg, sizeof msg, "%s", sg_last_error());
        sg_cudnn_engine_name(c, cv, name, sizeof name);
        return sg_set_error("%s (engine %s)", msg, name);
    }
    if (bias_done) *bias_done = e->bias_fused;
    return SG_OK;
}

/* "e<index>[k<type>=<value>]...[+bias][+dw_bf16] ws<bytes>" (sg_cudnn_engine_name) */
static int dnn_parse_name(const char *s, dnn_wish *w) {
    char *end = NULL;
    if (*s != 'e') return SG_ERR;
    w->engine = strtoll(s + 1, &end, 10);
    if (end == s + 1) return SG_ERR;
    s = end;
    w->nknobs = 0;
    while (*s == 'k') {
        if (w->nknobs == DNN_MAX_KNOBS) return SG_ERR;
        w->knob_type[w->nknobs] = strtoll(s + 1, &end, 10);
        if (end == s + 1 || *end != '=') return SG_ERR;
        s = end + 1;
        w->knob_value[w->nknobs] = strtoll(s, &end, 10);
        if (end == s) return SG_ERR;
        s = end;
        w->nknobs++;
    }
    w->variant = 0;
    if (!strncmp(s, "+bias", 5)) w->variant = 1, s += 5;
    if (!strncmp(s, "+dw_bf16", 8)) w->variant = 1, s += 8;
    if (strncmp(s, " ws", 3)) return SG_ERR;
    s += 3;
    (void)strtoll(s, &end, 10);
    return end == s || *end ? SG_ERR : SG_OK;
}

int sg_cudnn_prefer(sg_cudnn *c, const sg_cudnn_conv *cv, const char *engine_name) {
    if (dnn_check(c, cv)) return SG_ERR;
    if (c->n) return sg_set_error("sg_cudnn_prefer: only before the first convolution is pinned");
    dnn_wish w;
    memset(&w, 0, sizeof w);
    if (!engine_name || dnn_parse_name(engine_name, &w))
        return sg_set_error("sg_cudnn_prefer: '%s' is not an engine name (e<index>[k<type>=<v>]"
                            "...[+bias|+dw_bf16] ws<bytes>)",
                            engine_name ? engine_name : "(null)");
    dnn_key_of(cv, &w.key);
    if (w.variant &&
        (w.key.pass == SG_CUDNN_BWD_DATA || (w.key.pass == SG_CUDNN_FWD && !w.key.bias) ||
         (w.key.pass == SG_CUDNN_BWD_FILTER && w.key.dt != DT_BF16)))
        return sg_set_error("sg_cudnn_prefer: '%s' does not fit this pass", engine_name);
    for (int i = 0; i < c->nwish; i++)
        if (!memcmp(&c->wish[i].key, &w.key, sizeof w.key)) {
            c->wish[i] = w; /* one descriptor, one engine: the last asked for */
            return SG_OK;
        }
    if (c->nwish == c->capwish) {
        const int cap = c->capwish ? 2 * c->capwish : 64;
        dnn_wish *nw = realloc(c->wish, (size_t)cap * sizeof *nw);
        if (!nw) return sg_set_error("sg_cudnn_prefer: out of host memory");
        c->wish = nw, c->capwish = cap;
    }
    c->wish[c->nwish++] = w;
    return SG_OK;
}

int sg_cudnn_preferences(const sg_cudnn *c, int *met, int *missed) {
    if (met) *met = c ? c->wishes_met : 0;
    if (missed) *missed = c ? c->wishes_missed : 0;
    return c ? c->nwish : 0;
}

int sg_cudnn_set_timing(sg_cudnn *c, int reps, sg_cuda_window *win, FILE *log) {
    if (!c) return sg_set_error("sg_cudnn_set_timing: no cuDNN context");
    if (reps > 0 && !win) return sg_set_error("sg_cudnn_set_timing: no timing window");
    if (c->n)
        return sg_set_error("sg_cudnn_set_timing: only before the first convolution is pinned");
    if (reps < 0 || reps > 1000) return sg_set_error("sg_cudnn_set_timing: %d repetitions", reps);
    for (int i = 0; i < 2 && reps > 0; i++)
        if (!c->ev[i] && cudaEventCreate(&c->ev[i]) != cudaSuccess)
            return sg_set_error("sg_cudnn_set_timing: cudaEventCreate: %s",
                                cudaGetErrorString(cudaGetLastError()));
    c->time_reps = reps, c->win = win, c->log = log;
    return SG_OK;
}

void sg_cudnn_allow_tf32(sg_cudnn *c, int allow) {
    if (c && !c->n) c->tf32 = !!allow;
}
int sg_cudnn_tf32(const sg_cudnn *c) {
    return c ? c->tf32 : 0;
}

void sg_cudnn_freeze(sg_cudnn *c) {
    if (c) c->frozen = 1;
}
int sg_cudnn_frozen(const sg_cudnn *c) {
    return c ? c->frozen : 0;
}
int sg_cudnn_count(const sg_cudnn *c) {
    int n = 0;
    for (int i = 0; c && i < c->n; i++) n += c->e[i].ok;
    return n;
}

/* FNV-1a over every entry in insertion (= schedule) order: key, outcome, engine, knobs, ws */
static uint64_t dnn_fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 1099511628211ull;
    return h;
}
uint64_t sg_cudnn_hash(const sg_cudnn *c) {
    uint64_t h = 14695981039346656037ull;
    const int64_t tf32 = c ? c->tf32 : 0;
    h = dnn_fnv(h, &tf32, sizeof tf32);
    for (int i = 0; c && i < c->n; i++) {
        const dnn_entry *e = &c->e[i];
        const int64_t v[5] = {e->ok, e->bias_fused, e->dw_bf16, e->engine, e->ws_bytes};
        h = dnn_fnv(h, &e->key, sizeof e->key);
        h = dnn_fnv(h, v, sizeof v);
        h = dnn_fnv(h, e->knob_type, (size_t)e->nknobs * sizeof e->knob_type[0]);
        h = dnn_fnv(h, e->knob_value, (size_t)e->nknobs * sizeof e->knob_value[0]);
    }
    return h;
}

void sg_cudnn_engine_name(const sg_cudnn *c, const sg_cudnn_conv *cv, char *buf, int cap) {
    if (cap <= 0) return;
    snprintf(buf, (size_t)cap, "-");
    if (!c) return;
    dnn_key k;
    dnn_key_of(cv, &k);
    for (int i = 0; i < c->n; i++) {
        const dnn_entry *e = &c->e[i];
        if (memcmp(&e->key, &k, sizeof k)) continue;
        if (!e->ok) return;
        int n = snprintf(buf, (size_t)cap, "e%lld", (long long)e->engine);
        for (int64_t j = 0; j < e->nknobs && n > 0 && n < cap; j++)
            n += snprintf(buf + n, (size_t)(cap - n), "k%lld=%lld", (long long)e->knob_type[j],
                          (long long)e->knob_value[j]);
        if (n > 0 && n < cap)
            snprintf(buf + n, (size_t)(cap - n), "%s%s ws%lld", e->bias_fused ? "+bias" : "",
                     e->dw_bf16 ? "+dw_bf16" : "", (long long)e->ws_bytes);
        return;
    }
}

size_t sg_cudnn_version(void) {
    return cudnnGetVersion();
}
