/* sim_cudnn.cpp — cuDNN's backend API on the host, for the convolutions stepgraph builds
 * (kernels/cuda/cudnn_conv.c): descriptors, operation graphs, heuristics, engines with their
 * notes and knobs, execution plans with workspaces, variant packs, and an execution that
 * computes the convolution on the host on the handle's stream (recorded when it captures).
 * Compiled against cuDNN's own headers (its types, enums and attribute names); not the library.
 *
 * What is emulated, from cuDNN's documentation of the backend API:
 * - descriptors: an attribute set after finalization, of a type the attribute does not take, or
 *   unknown to the descriptor's type is refused (CUDNN_STATUS_BAD_PARAM...); a descriptor named
 *   by another must be finalized when that one finalizes, and of the right type; a finalized
 *   descriptor keeps what it needs by value (the tensors, the graph), so a plan outlives the
 *   graph it came from, as stepgraph's pinned plans do. Getting a descriptor-valued attribute
 *   fills descriptors the caller created (heuristics results, a configuration's engine, its
 *   knob choices).
 * - tensors: data type (fp32, bf16), 4 dims in NCHW order with any strides, uid, byte alignment,
 *   virtual or not. A convolution operation checks that x, w and y agree with its paddings,
 *   strides and dilations (y = (H + pre + post - d (K - 1) - 1) / s + 1) and in N, C and K; the
 *   fused pointwise add takes the convolution's virtual output and a broadcast bias.
 * - engines, by global index, each with its numerical notes and the graphs it supports:
 *     0  direct: deterministic, no workspace, every graph but a bf16 backward-filter into an
 *        fp32 dw (on the GPU no deterministic engine wrote one: cudnn_conv.c's bf16-dw variant);
 *     1  split: deterministic, knobs SPLIT_K_SLC (1, 2, 4) and STAGES (2, 3): the reduction in
 *        SPLIT_K_SLC contiguous chunks, each chunk's fp32 partials written into the workspace
 *        (splits x outputs x 4 bytes) and summed in chunk order: other bits than engine 0's.
 *        Tensor-core note in bf16;
 *     2  atomic: NONDETERMINISTIC; backward passes only (data, filter, the fp32 dw from bf16
 *        too); its chunks are summed in an order that turns with every execution, so two runs
 *        differ in their last bits, as atomics do;
 *     3  tf32: TENSOR_CORE and DOWN_CONVERT_INPUTS; fp32 graphs without the fused bias; the
 *        inputs rounded to TF32 (10-bit mantissa) first: errors near 1e-3;
 *     4  half-accumulate: REDUCED_PRECISION_REDUCTION; the bf16 forward without the fused bias;
 *        the running sum rounded to bf16 every 8 terms.
 *   Heuristics mode A lists the refused kinds first (tf32 for fp32; half-accumulate for bf16;
 *   atomic for a backward pass), then split (2 chunks, 3 stages), then direct; mode B split (4
 *   chunks, 2 stages), direct, atomic; FALLBACK direct, or atomic where direct cannot. A filter
 *   that lets a refused engine through gives wrong or run-to-run different bits.
 * - execution: every non-virtual tensor's uid has a pointer; each pointer meets its tensor's
 *   declared byte alignment and its whole strided extent lies in one live allocation; the output
 *   overlaps no input; a plan with a workspace gets one inside an allocation, of its size. The
 *   convolution is then y = alpha conv + beta y (y read only where beta != 0), in fp32 (compiled
 *   with -ffp-contract=off), rounded once to y's type; the fused bias is added in fp32 before the
 *   rounding. An engine with a workspace writes its partials there: a workspace that overlaps
 *   live data corrupts it, as on the GPU. SG_SIM_LAUNCH_ONLY=1 checks and records, computes
 *   nothing. SG_SIM_CUDNN_SPEED=F (F >= 1) makes an execution F times faster on the events'
 *   clock than on the host's (the emulated engines are naive loops, slower than the emulated
 *   own kernels), so a tuning that times them can choose cuDNN, as on a GPU.
 *   SG_SIM_CUDNN_PLANS=I,J,... lets only those engines' execution plans finalize (plan_engines).
 * Every refusal prints an "sg_cuda_sim: cudnn..." line naming the plan node and leaves the
 * reason for cudnnGetLastErrorString.
 */
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>
#include <unistd.h>

#include <cudnn.h>

#include "sim_internal.hpp"

struct cudnnContext {
    uint64_t magic = 0x5347534d444e4e48ull; /* "SGSMDNNH" */
    cudaStream_t st = nullptr;
};

namespace sg_sim {
namespace {

thread_local std::string last_error;

/* records the reason (cudnnGetLastErrorString), reports it, returns s */
cudnnStatus_t fail(cudnnStatus_t s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
cudnnStatus_t fail(cudnnStatus_t s, const char *fmt, ...) {
    char buf[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    last_error = buf;
    report("cudnn: %s", buf);
    return s;
}

enum { E_DIRECT = 0, E_SPLIT = 1, E_ATOMIC = 2, E_TF32 = 3, E_HALF = 4, E_COUNT = 5 };

struct tensor_v {
    int64_t uid = 0, dt = -1, dims[4] = {0, 0, 0, 0}, strides[4] = {0, 0, 0, 0};
    int64_t align = 0;
    bool virt = false;
    size_t esize() const {
        return dt == CUDNN_DATA_BFLOAT16 ? 2 : 4;
    }
    int64_t elems() const {
        return dims[0] * dims[1] * dims[2] * dims[3];
    }
    /* the element at NCHW index (n, c, h, w) */
    int64_t at(int64_t n, int64_t c, int64_t h, int64_t w) const {
        return n * strides[0] + c * strides[1] + h * strides[2] + w * strides[3];
    }
    /* bytes from the first element to one past the last */
    int64_t span() const {
        int64_t last = 0;
        for (int i = 0; i < 4; i++) last += (dims[i] - 1) * strides[i];
        return (last + 1) * (int64_t)esize();
    }
};
struct conv_v {
    int64_t pre[2] = {0, 0}, post[2] = {0, 0}, stride[2] = {1, 1}, dil[2] = {1, 1};
};
/* a convolution pass: x/w/y are X or DX, W or DW, Y or DY by pass */
enum { P_FWD = 0, P_BWD_DATA = 1, P_BWD_FILTER = 2 };
struct op_v {
    int pass = -1;
    tensor_v x, w, y;
    conv_v conv;
    float alpha = 1, beta = 0;
};
struct graph_v {
    op_v conv;
    bool bias = false; /* the fused pointwise add: y_out = conv's virtual output + b */
    tensor_v b, out;   /* its bias and its output (the graph's y) */
    const tensor_v &y() const {
        return bias ? out : conv.y;
    }
    bool bf16() const {
        return conv.x.dt == CUDNN_DATA_BFLOAT16;
    }
};
struct knobs_v {
    int64_t split = 1, stages = 2;
};
struct engine_v {
    std::shared_ptr<const graph_v> g;
    int64_t index = -1;
};
struct cfg_v {
    engine_v eng;
    knobs_v k;
};
struct plan_v {
    cfg_v cfg;
    int64_t ws = 0;
};
struct vpack_v {
    std::vector<int64_t> uids;
    std::vector<void *> ptrs;
    void *ws = nullptr;
};

struct attr {
    cudnnBackendAttributeType_t type;
    int64_t count = 0;
    std::vector<unsigned char> bytes;
};

constexpr uint64_t MAGIC = 0x5347534d444e4e44ull; /* "SGSMDNND" */
struct desc {
    uint64_t magic = MAGIC;
    cudnnBackendDescriptorType_t type;
    bool final = false;
    std::map<int, attr> a;
    /* what a finalized descriptor keeps, by its type */
    tensor_v tensor;
    conv_v conv;
    op_v op;
    int64_t pw_mode = -1;
    std::shared_ptr<const graph_v> graph;
    std::vector<cfg_v> results; /* heuristics */
    engine_v engine;
    int64_t knob_type = -1, knob_value = 0;
    cfg_v cfg;
    plan_v plan;
    vpack_v vpack;
    cudnnHandle_t handle = nullptr;
    /* an operation pointwise: its tensors; an operation graph: its operations */
    tensor_v px, pb, py;
};
std::set<desc *> &live() {
    static std::set<desc *> s;
    return s;
}

desc *desc_of(cudnnBackendDescriptor_t d) {
    desc *p = (desc *)d;
    return p && live().count(p) && p->magic == MAGIC ? p : nullptr;
}

size_t type_size(cudnnBackendAttributeType_t t) {
    switch (t) {
    case CUDNN_TYPE_INT64:
        return 8;
    case CUDNN_TYPE_DOUBLE:
        return 8;
    case CUDNN_TYPE_FLOAT:
        return 4;
    case CUDNN_TYPE_BOOLEAN:
        return sizeof(bool);
    case CUDNN_TYPE_HANDLE:
        return sizeof(cudnnHandle_t);
    case CUDNN_TYPE_VOID_PTR:
        return sizeof(void *);
    case CUDNN_TYPE_BACKEND_DESCRIPTOR:
        return sizeof(cudnnBackendDescriptor_t);
    default:
        return 4; /* the enumerations */
    }
}

/* the attributes each descriptor type takes, with their types */
struct attr_rule {
    cudnnBackendDescriptorType_t dt;
    cudnnBackendAttributeName_t name;
    cudnnBackendAttributeType_t type;
};
#define R(d, n, t)                                                                                 \
    { CUDNN_BACKEND_##d##_DESCRIPTOR, CUDNN_ATTR_##n, CUDNN_TYPE_##t }
const attr_rule rules[] = {
    R(TENSOR, TENSOR_DATA_TYPE, DATA_TYPE),
    R(TENSOR, TENSOR_DIMENSIONS, INT64),
    R(TENSOR, TENSOR_STRIDES, INT64),
    R(TENSOR, TENSOR_UNIQUE_ID, INT64),
    R(TENSOR, TENSOR_BYTE_ALIGNMENT, INT64),
    R(TENSOR, TENSOR_IS_VIRTUAL, BOOLEAN),
    R(CONVOLUTION, CONVOLUTION_SPATIAL_DIMS, INT64),
    R(CONVOLUTION, CONVOLUTION_COMP_TYPE, DATA_TYPE),
    R(CONVOLUTION, CONVOLUTION_CONV_MODE, CONVOLUTION_MODE),
    R(CONVOLUTION, CONVOLUTION_DILATIONS, INT64),
    R(CONVOLUTION, CONVOLUTION_FILTER_STRIDES, INT64),
    R(CONVOLUTION, CONVOLUTION_PRE_PADDINGS, INT64),
    R(CONVOLUTION, CONVOLUTION_POST_PADDINGS, INT64),
    R(OPERATION_CONVOLUTION_FORWARD, OPERATION_CONVOLUTION_FORWARD_X, BACKEND_DESCRIPTOR),
    R(OPERATION_CONVOLUTION_FORWARD, OPERATION_CONVOLUTION_FORWARD_W, BACKEND_DESCRIPTOR),
    R(OPERATION_CONVOLUTION_FORWARD, OPERATION_CONVOLUTION_FORWARD_Y, BACKEND_DESCRIPTOR),
    R(OPERATION_CONVOLUTION_FORWARD, OPERATION_CONVOLUTION_FORWARD_CONV_DESC, BACKEND_DESCRIPTOR),
    R(OPERATION_CONVOLUTION_FORWARD, OPERATION_CONVOLUTION_FORWARD_ALPHA, FLOAT),
    R(OPERATION_CONVOLUTION_FORWARD, OPERATION_CONVOLUTION_FORWARD_BETA, FLOAT),
    R(OPERATION_CONVOLUTION_BACKWARD_DATA, OPERATION_CONVOLUTION_BWD_DATA_DX, BACKEND_DESCRIPTOR),
    R(OPERATION_CONVOLUTION_BACKWARD_DATA, OPERATION_CONVOLUTION_BWD_DATA_W, BACKEND_DESCRIPTOR),
    R(OPERATION_CONVOLUTION_BACKWARD_DATA, OPERATION_CONVOLUTION_BWD_DATA_DY, BACKEND_DESCRIPTOR),
    R(OPERATION_CONVOLUTION_BACKWARD_DATA, OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
      BACKEND_DESCRIPTOR),
    R(OPERATION_CONVOLUTION_BACKWARD_DATA, OPERATION_CONVOLUTION_BWD_DATA_ALPHA, FLOAT),
    R(OPERATION_CONVOLUTION_BACKWARD_DATA, OPERATION_CONVOLUTION_BWD_DATA_BETA, FLOAT),
    R(OPERATION_CONVOLUTION_BACKWARD_FILTER, OPERATION_CONVOLUTION_BWD_FILTER_X,
      BACKEND_DESCRIPTOR),
    R(OPERATION_CONVOLUTION_BACKWARD_FILTER, OPERATION_CONVOLUTION_BWD_FILTER_DW,
      BACKEND_DESCRIPTOR),
    R(OPERATION_CONVOLUTION_BACKWARD_FILTER, OPERATION_CONVOLUTION_BWD_FILTER_DY,
      BACKEND_DESCRIPTOR),
    R(OPERATION_CONVOLUTION_BACKWARD_FILTER, OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
      BACKEND_DESCRIPTOR),
    R(OPERATION_CONVOLUTION_BACKWARD_FILTER, OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, FLOAT),
    R(OPERATION_CONVOLUTION_BACKWARD_FILTER, OPERATION_CONVOLUTION_BWD_FILTER_BETA, FLOAT),
    R(POINTWISE, POINTWISE_MODE, POINTWISE_MODE),
    R(POINTWISE, POINTWISE_MATH_PREC, DATA_TYPE),
    R(OPERATION_POINTWISE, OPERATION_POINTWISE_PW_DESCRIPTOR, BACKEND_DESCRIPTOR),
    R(OPERATION_POINTWISE, OPERATION_POINTWISE_XDESC, BACKEND_DESCRIPTOR),
    R(OPERATION_POINTWISE, OPERATION_POINTWISE_BDESC, BACKEND_DESCRIPTOR),
    R(OPERATION_POINTWISE, OPERATION_POINTWISE_YDESC, BACKEND_DESCRIPTOR),
    R(OPERATIONGRAPH, OPERATIONGRAPH_OPS, BACKEND_DESCRIPTOR),
    R(OPERATIONGRAPH, OPERATIONGRAPH_HANDLE, HANDLE),
    R(ENGINEHEUR, ENGINEHEUR_OPERATION_GRAPH, BACKEND_DESCRIPTOR),
    R(ENGINEHEUR, ENGINEHEUR_MODE, HEUR_MODE),
    R(ENGINE, ENGINE_OPERATION_GRAPH, BACKEND_DESCRIPTOR),
    R(ENGINE, ENGINE_GLOBAL_INDEX, INT64),
    R(KNOB_CHOICE, KNOB_CHOICE_KNOB_TYPE, KNOB_TYPE),
    R(KNOB_CHOICE, KNOB_CHOICE_KNOB_VALUE, INT64),
    R(ENGINECFG, ENGINECFG_ENGINE, BACKEND_DESCRIPTOR),
    R(ENGINECFG, ENGINECFG_KNOB_CHOICES, BACKEND_DESCRIPTOR),
    R(EXECUTION_PLAN, EXECUTION_PLAN_HANDLE, HANDLE),
    R(EXECUTION_PLAN, EXECUTION_PLAN_ENGINE_CONFIG, BACKEND_DESCRIPTOR),
    R(VARIANT_PACK, VARIANT_PACK_UNIQUE_IDS, INT64),
    R(VARIANT_PACK, VARIANT_PACK_DATA_POINTERS, VOID_PTR),
    R(VARIANT_PACK, VARIANT_PACK_WORKSPACE, VOID_PTR),
};
#undef R

const attr_rule *rule_of(cudnnBackendDescriptorType_t dt, cudnnBackendAttributeName_t name) {
    for (const attr_rule &r : rules)
        if (r.dt == dt && r.name == name) return &r;
    return nullptr;
}

/* ---- reading a descriptor's attributes at finalization ---- */
const attr *get(const desc *d, cudnnBackendAttributeName_t n) {
    auto it = d->a.find((int)n);
    return it == d->a.end() ? nullptr : &it->second;
}
template <class T> bool get1(const desc *d, cudnnBackendAttributeName_t n, T *out) {
    const attr *a = get(d, n);
    if (!a || a->count != 1) return false;
    memcpy(out, a->bytes.data(), sizeof(T));
    return true;
}
bool get_i64s(const desc *d, cudnnBackendAttributeName_t n, int64_t *out, int64_t want) {
    const attr *a = get(d, n);
    if (!a || a->count != want) return false;
    memcpy(out, a->bytes.data(), (size_t)want * 8);
    return true;
}
/* the finalized descriptor of type t that attribute n names, or nullptr */
const desc *child(const desc *d, cudnnBackendAttributeName_t n, cudnnBackendDescriptorType_t t,
                  int64_t i = 0) {
    const attr *a = get(d, n);
    if (!a || i >= a->count) return nullptr;
    cudnnBackendDescriptor_t p;
    memcpy(&p, a->bytes.data() + (size_t)i * sizeof p, sizeof p);
    const desc *c = desc_of(p);
    return c && c->type == t && c->final ? c : nullptr;
}

const char *pass_name(int p) {
    return p == P_FWD ? "forward" : p == P_BWD_DATA ? "backward-data" : "backward-filter";
}

cudnnStatus_t finalize_tensor(desc *d) {
    tensor_v &t = d->tensor;
    bool virt = false;
    cudnnDataType_t dt;
    if (!get1(d, CUDNN_ATTR_TENSOR_DATA_TYPE, &dt) ||
        !get1(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, &t.uid) ||
        !get1(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, &t.align))
        return fail(CUDNN_STATUS_BAD_PARAM, "tensor: data type, uid or byte alignment not set");
    t.dt = dt;
    const attr *dims = get(d, CUDNN_ATTR_TENSOR_DIMENSIONS),
               *strides = get(d, CUDNN_ATTR_TENSOR_STRIDES);
    if (!dims || !strides || dims->count != strides->count)
        return fail(CUDNN_STATUS_BAD_PARAM,
                    "tensor uid %lld: dimensions and strides not set or "
                    "of different lengths",
                    (long long)t.uid);
    if (dims->count != 4)
        return fail(CUDNN_STATUS_NOT_SUPPORTED,
                    "tensor uid %lld: %lld dimensions (the emulation has 4: NCHW)",
                    (long long)t.uid, (long long)dims->count);
    memcpy(t.dims, dims->bytes.data(), 32);
    memcpy(t.strides, strides->bytes.data(), 32);
    get1(d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, &virt);
    t.virt = virt;
    if (t.dt != CUDNN_DATA_FLOAT && t.dt != CUDNN_DATA_BFLOAT16)
        return fail(CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE,
                    "tensor uid %lld: data type %lld (the emulation has fp32 and bf16)",
                    (long long)t.uid, (long long)t.dt);
    for (int i = 0; i < 4; i++)
        if (t.dims[i] <= 0 || t.strides[i] <= 0)
            return fail(CUDNN_STATUS_BAD_PARAM,
                        "tensor uid %lld: dimension %d is %lld, stride %lld", (long long)t.uid, i,
                        (long long)t.dims[i], (long long)t.strides[i]);
    if (t.align <= 0 || (t.align & (t.align - 1)) || t.align < (int64_t)t.esize())
        return fail(CUDNN_STATUS_BAD_PARAM,
                    "tensor uid %lld: byte alignment %lld (a power of two, at least the element)",
                    (long long)t.uid, (long long)t.align);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t finalize_conv(desc *d) {
    int64_t nsp = 0;
    cudnnDataType_t comp;
    cudnnConvolutionMode_t mode;
    conv_v &c = d->conv;
    if (!get1(d, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, &nsp) || nsp != 2)
        return fail(CUDNN_STATUS_NOT_SUPPORTED, "convolution: spatial dims not 2");
    if (!get1(d, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, &comp) ||
        !get1(d, CUDNN_ATTR_CONVOLUTION_CONV_MODE, &mode) ||
        !get_i64s(d, CUDNN_ATTR_CONVOLUTION_DILATIONS, c.dil, 2) ||
        !get_i64s(d, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, c.stride, 2) ||
        !get_i64s(d, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, c.pre, 2) ||
        !get_i64s(d, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, c.post, 2))
        return fail(CUDNN_STATUS_BAD_PARAM,
                    "convolution: compute type, mode, dilations, strides or paddings not set (2 "
                    "values each)");
    if (comp != CUDNN_DATA_FLOAT)
        return fail(CUDNN_STATUS_NOT_SUPPORTED,
                    "convolution: compute type %d (the emulation has "
                    "fp32)",
                    (int)comp);
    if (mode != CUDNN_CROSS_CORRELATION)
        return fail(CUDNN_STATUS_NOT_SUPPORTED,
                    "convolution: mode %d (the emulation has "
                    "cross-correlation)",
                    (int)mode);
    for (int i = 0; i < 2; i++)
        if (c.dil[i] < 1 || c.stride[i] < 1 || c.pre[i] < 0 || c.post[i] < 0)
            return fail(CUDNN_STATUS_BAD_PARAM,
                        "convolution: dilation %lld, stride %lld, "
                        "paddings %lld/%lld",
                        (long long)c.dil[i], (long long)c.stride[i], (long long)c.pre[i],
                        (long long)c.post[i]);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t finalize_conv_op(desc *d) {
    static const cudnnBackendAttributeName_t names[3][6] = {
        {CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA},
        {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA},
        {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA},
    };
    op_v &o = d->op;
    o.pass = d->type == CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR ? P_FWD
             : d->type == CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR
                 ? P_BWD_DATA
                 : P_BWD_FILTER;
    const cudnnBackendAttributeName_t *n = names[o.pass];
    const desc *x = child(d, n[0], CUDNN_BACKEND_TENSOR_DESCRIPTOR),
               *w = child(d, n[1], CUDNN_BACKEND_TENSOR_DESCRIPTOR),
               *y = child(d, n[2], CUDNN_BACKEND_TENSOR_DESCRIPTOR),
               *c = child(d, n[3], CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
    if (!x || !w || !y || !c)
        return fail(CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED,
                    "%s operation: a tensor or the convolution is not set, not finalized, or "
                    "not of its type",
                    pass_name(o.pass));
    if (!get1(d, n[4], &o.alpha) || !get1(d, n[5], &o.beta))
        return fail(CUDNN_STATUS_BAD_PARAM, "%s operation: alpha or beta not set (one float)",
                    pass_name(o.pass));
    o.x = x->tensor, o.w = w->tensor, o.y = y->tensor, o.conv = c->conv;
    /* x [N, C, H, W], w [K, C, R, S], y [N, K, P, Q] */
    const tensor_v &X = o.x, &Wt = o.w, &Y = o.y;
    bool ok = X.dims[0] == Y.dims[0] && X.dims[1] == Wt.dims[1] && Y.dims[1] == Wt.dims[0];
    for (int i = 0; i < 2 && ok; i++) {
        const int64_t in = X.dims[2 + i], k = Wt.dims[2 + i], out = Y.dims[2 + i];
        const int64_t span = in + o.conv.pre[i] + o.conv.post[i] - o.conv.dil[i] * (k - 1) - 1;
        ok = span >= 0 && span / o.conv.stride[i] + 1 == out;
    }
    if (!ok)
        return fail(CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH,
                    "%s operation: x [%lld,%lld,%lld,%lld], w [%lld,%lld,%lld,%lld] and y "
                    "[%lld,%lld,%lld,%lld] (NCHW) do not agree with paddings %lld/%lld x "
                    "%lld/%lld, strides %lld x %lld",
                    pass_name(o.pass), (long long)X.dims[0], (long long)X.dims[1],
                    (long long)X.dims[2], (long long)X.dims[3], (long long)Wt.dims[0],
                    (long long)Wt.dims[1], (long long)Wt.dims[2], (long long)Wt.dims[3],
                    (long long)Y.dims[0], (long long)Y.dims[1], (long long)Y.dims[2],
                    (long long)Y.dims[3], (long long)o.conv.pre[0], (long long)o.conv.post[0],
                    (long long)o.conv.pre[1], (long long)o.conv.post[1],
                    (long long)o.conv.stride[0], (long long)o.conv.stride[1]);
    if (X.dt != Y.dt && !(o.pass == P_FWD && Y.virt && Y.dt == CUDNN_DATA_FLOAT))
        return fail(CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE,
                    "%s operation: x and y of different data types", pass_name(o.pass));
    if (o.pass != P_BWD_FILTER && Wt.dt != X.dt)
        return fail(CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE,
                    "%s operation: w and x of different data types", pass_name(o.pass));
    if (X.virt || Wt.virt || (Y.virt && o.pass != P_FWD))
        return fail(CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN,
                    "%s operation: a virtual tensor where the emulation has none",
                    pass_name(o.pass));
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t finalize_pointwise_op(desc *d) {
    const desc *pw =
        child(d, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    const desc *x = child(d, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_BACKEND_TENSOR_DESCRIPTOR),
               *b = child(d, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_BACKEND_TENSOR_DESCRIPTOR),
               *y = child(d, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    if (!pw || !x || !b || !y)
        return fail(CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED,
                    "pointwise operation: its descriptor or a tensor is not set or not finalized");
    if (pw->pw_mode != CUDNN_POINTWISE_ADD)
        return fail(CUDNN_STATUS_NOT_SUPPORTED,
                    "pointwise operation: mode %lld (the emulation "
                    "has ADD)",
                    (long long)pw->pw_mode);
    d->px = x->tensor, d->pb = b->tensor, d->py = y->tensor;
    for (int i = 0; i < 4; i++)
        if (d->px.dims[i] != d->py.dims[i] ||
            (d->pb.dims[i] != 1 && d->pb.dims[i] != d->py.dims[i]))
            return fail(CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH,
                        "pointwise add: x, b and y do not broadcast in dimension %d (%lld, %lld, "
                        "%lld)",
                        i, (long long)d->px.dims[i], (long long)d->pb.dims[i],
                        (long long)d->py.dims[i]);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t finalize_graph(desc *d) {
    const attr *ops = get(d, CUDNN_ATTR_OPERATIONGRAPH_OPS);
    if (!get1(d, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, &d->handle) || !d->handle)
        return fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "operation graph: no handle");
    if (!ops || ops->count < 1 || ops->count > 2)
        return fail(CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN,
                    "operation graph: %lld operations (the emulation has a convolution, and a "
                    "pointwise add after a forward)",
                    (long long)(ops ? ops->count : 0));
    auto g = std::make_shared<graph_v>();
    const desc *conv = nullptr, *pw = nullptr;
    for (int64_t i = 0; i < ops->count; i++) {
        cudnnBackendDescriptor_t p;
        memcpy(&p, ops->bytes.data() + (size_t)i * sizeof p, sizeof p);
        const desc *o = desc_of(p);
        if (!o || !o->final)
            return fail(CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED,
                        "operation graph: operation %lld is not a finalized descriptor",
                        (long long)i);
        if (o->type == CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR)
            pw = o;
        else if (!conv && o->op.pass >= 0)
            conv = o;
        else
            return fail(CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN,
                        "operation graph: operation %lld is not a convolution or a pointwise add",
                        (long long)i);
    }
    if (!conv)
        return fail(CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN, "operation graph: no convolution");
    g->conv = conv->op;
    if (pw) {
        if (g->conv.pass != P_FWD || !g->conv.y.virt || pw->px.uid != g->conv.y.uid ||
            pw->py.virt || pw->pb.virt)
            return fail(CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN,
                        "operation graph: the pointwise add must take the forward convolution's "
                        "virtual output and write a real tensor");
        g->bias = true, g->b = pw->pb, g->out = pw->py;
    } else if (g->conv.y.virt) {
        return fail(CUDNN_STATUS_BAD_PARAM, "operation graph: the convolution's output is "
                                            "virtual and nothing consumes it");
    }
    d->graph = g;
    return CUDNN_STATUS_SUCCESS;
}

/* ---- the engines ---- */
/* SG_SIM_CUDNN_PLANS=I,J,...: the engines whose execution plans finalize on this device (unset:
 * all; empty: none). cuDNN's heuristics list configurations that a device or a shape cannot
 * build, and their plans are refused at finalize (NOT_SUPPORTED): with this the emulation
 * refuses them too, down to no deterministic engine at all. A value it cannot read ends the
 * process. */
unsigned plan_engines() {
    static const unsigned m = [] {
        const char *v = getenv("SG_SIM_CUDNN_PLANS");
        if (!v) return (1u << E_COUNT) - 1;
        unsigned r = 0;
        for (const char *q = v; *q; q += q[1] ? 2 : 1) {
            if (*q < '0' || *q >= '0' + E_COUNT || (q[1] && q[1] != ',')) {
                fprintf(stderr,
                        "sg_cuda_sim: SG_SIM_CUDNN_PLANS=%s: not a comma-separated list of "
                        "engines 0 to %d\n",
                        v, E_COUNT - 1);
                _exit(1);
            }
            r |= 1u << (*q - '0');
        }
        return r;
    }();
    return m;
}
bool supports(int e, const graph_v &g) {
    const bool bf16 = g.bf16(), f32dw_from_bf16 = g.conv.pass == P_BWD_FILTER && bf16 &&
                                                  g.conv.w.dt == CUDNN_DATA_FLOAT;
    switch (e) {
    case E_DIRECT:
    case E_SPLIT:
        return !f32dw_from_bf16;
    case E_ATOMIC:
        return g.conv.pass != P_FWD;
    case E_TF32:
        return !bf16 && !g.bias;
    case E_HALF:
        return bf16 && g.conv.pass == P_FWD && !g.bias;
    default:
        return false;
    }
}
std::vector<cudnnBackendNumericalNote_t> notes_of(int e, const graph_v &g) {
    switch (e) {
    case E_SPLIT:
        if (g.bf16()) return {CUDNN_NUMERICAL_NOTE_TENSOR_CORE};
        return {};
    case E_ATOMIC:
        return {CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC};
    case E_TF32:
        return {CUDNN_NUMERICAL_NOTE_TENSOR_CORE, CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS};
    case E_HALF:
        return {CUDNN_NUMERICAL_NOTE_TENSOR_CORE, CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION};
    default:
        return {};
    }
}
int64_t workspace_of(const cfg_v &c) {
    const graph_v &g = *c.eng.g;
    if (c.eng.index != E_SPLIT || c.k.split < 2) return 0;
    const tensor_v &out = g.conv.pass == P_FWD        ? g.y()
                          : g.conv.pass == P_BWD_DATA ? g.conv.x
                                                      : g.conv.w;
    return c.k.split * out.elems() * 4;
}
cfg_v make_cfg(const std::shared_ptr<const graph_v> &g, int e, int64_t split, int64_t stages) {
    cfg_v c;
    c.eng.g = g, c.eng.index = e;
    if (e == E_SPLIT) c.k.split = split, c.k.stages = stages;
    return c;
}
std::vector<cfg_v> heuristics(const std::shared_ptr<const graph_v> &g, cudnnBackendHeurMode_t m) {
    std::vector<cfg_v> r;
    auto add = [&](int e, int64_t split, int64_t stages) {
        if (supports(e, *g)) r.push_back(make_cfg(g, e, split, stages));
    };
    if (m == CUDNN_HEUR_MODE_A) {
        add(E_TF32, 1, 2), add(E_HALF, 1, 2), add(E_ATOMIC, 1, 2), add(E_SPLIT, 2, 3);
        add(E_DIRECT, 1, 2);
    } else if (m == CUDNN_HEUR_MODE_B) {
        add(E_SPLIT, 4, 2), add(E_DIRECT, 1, 2), add(E_ATOMIC, 1, 2);
    } else if (m == CUDNN_HEUR_MODE_FALLBACK) {
        add(E_DIRECT, 1, 2);
        if (r.empty()) add(E_ATOMIC, 1, 2);
    }
    return r;
}

/* ---- execution ---- */
float ld(const void *p, int64_t dt, int64_t i) {
    return dt == CUDNN_DATA_BFLOAT16 ? bf16_to_f32(((const uint16_t *)p)[i])
                                     : ((const float *)p)[i];
}
void st(void *p, int64_t dt, int64_t i, float v) {
    if (dt == CUDNN_DATA_BFLOAT16)
        ((uint16_t *)p)[i] = f32_to_bf16(v);
    else
        ((float *)p)[i] = v;
}
float tf32(float v) { /* round to a 10-bit mantissa, nearest even */
    uint32_t u;
    memcpy(&u, &v, 4);
    if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0xfffu + ((u >> 13) & 1u)) & ~0x1fffu;
    memcpy(&v, &u, 4);
    return v;
}

struct exec_args {
    plan_v plan;
    const void *x, *w, *y, *b; /* by role: the pass's x/dx, w/dw, y/dy, bias */
    void *ws;
};

uint64_t atomic_runs; /* executions of the atomic engine: its summation order turns with them */

/* SG_SIM_CUDNN_SPEED: how many times faster an execution counts on the events' clock (1: as it
 * runs; as the emulation's other knobs, a value it cannot read ends the process) */
double speed() {
    static const double f = [] {
        const char *v = getenv("SG_SIM_CUDNN_SPEED");
        if (!v || !*v) return 1.0;
        char *end = nullptr;
        const double x = strtod(v, &end);
        if (end == v || *end || !(x >= 1 && x <= 1e6)) {
            fprintf(stderr, "sg_cuda_sim: SG_SIM_CUDNN_SPEED=%s: not a factor in [1, 1e6]\n", v);
            _exit(1);
        }
        return x;
    }();
    return f;
}

/* One output's reduction terms (products) in the pass's natural order, summed by the engine. */
void run_exec(const exec_args &a) {
    const graph_v &g = *a.plan.cfg.eng.g;
    const op_v &o = g.conv;
    const tensor_v &X = o.x, &Wt = o.w, &Y = o.y;
    const int e = (int)a.plan.cfg.eng.index;
    const int64_t N = X.dims[0], C = X.dims[1], H = X.dims[2], W = X.dims[3];
    const int64_t K = Wt.dims[0], R = Wt.dims[2], S = Wt.dims[3], P = Y.dims[2], Q = Y.dims[3];
    const int64_t sh = o.conv.stride[0], sw = o.conv.stride[1], ph = o.conv.pre[0],
                  pw = o.conv.pre[1], dh = o.conv.dil[0], dw = o.conv.dil[1];
    const uint64_t run = e == E_ATOMIC ? atomic_runs++ : 0;
    auto in = [&](const void *p, const tensor_v &t, int64_t i) {
        const float v = ld(p, t.dt, i);
        return e == E_TF32 ? tf32(v) : v;
    };
    std::vector<float> terms;
    /* the engine's sum of terms[0..n) */
    auto reduce = [&](int64_t out_i, int64_t outs) {
        const int64_t n = (int64_t)terms.size();
        if (e == E_SPLIT && a.plan.cfg.k.split > 1) {
            const int64_t sp = a.plan.cfg.k.split, chunk = (n + sp - 1) / sp;
            float *part = (float *)a.ws;
            for (int64_t s = 0; s < sp; s++) {
                float t = 0;
                for (int64_t i = s * chunk; i < n && i < (s + 1) * chunk; i++)
                    t += terms[(size_t)i];
                part[s * outs + out_i] = t;
            }
            float t = 0;
            for (int64_t s = 0; s < sp; s++) t += part[s * outs + out_i];
            return t;
        }
        if (e == E_ATOMIC) {
            const int64_t nch = 4, chunk = (n + nch - 1) / nch;
            float part[4] = {0, 0, 0, 0}, t = 0;
            for (int64_t i = 0; i < n; i++) part[i / (chunk ? chunk : 1)] += terms[(size_t)i];
            for (int64_t s = 0; s < nch; s++) t += part[(s + (int64_t)run) % nch];
            return t;
        }
        float t = 0;
        for (int64_t i = 0; i < n; i++) {
            t += terms[(size_t)i];
            if (e == E_HALF && i % 8 == 7) t = bf16_to_f32(f32_to_bf16(t));
        }
        return t;
    };
    auto finish = [&](void *out, const tensor_v &t, int64_t idx, float sum, float bias) {
        float v = o.alpha * sum;
        if (o.beta != 0.0f) v = v + o.beta * ld(out, t.dt, idx);
        if (g.bias) v = v + bias;
        st(out, t.dt, idx, v);
    };
    /* fn(i, j, k, l) over the box [0, a) x [0, b) x [0, c) x [0, d), l fastest */
    auto each = [](int64_t a0, int64_t b0, int64_t c0, int64_t d0, auto fn) {
        for (int64_t i = 0; i < a0; i++)
            for (int64_t j = 0; j < b0; j++)
                for (int64_t k = 0; k < c0; k++)
                    for (int64_t l = 0; l < d0; l++) fn(i, j, k, l);
    };
    /* x's element that output (n, p, q)'s tap (r, s) reads in channel c, or -1 in the padding */
    auto x_at = [&](int64_t n, int64_t c, int64_t p, int64_t q, int64_t r, int64_t s) {
        const int64_t h = p * sh - ph + r * dh, w = q * sw - pw + s * dw;
        return h >= 0 && h < H && w >= 0 && w < W ? X.at(n, c, h, w) : -1;
    };
    if (o.pass == P_FWD) {
        const tensor_v &T = g.y();
        each(N, K, P, Q, [&](int64_t n, int64_t k, int64_t p, int64_t q) {
            terms.clear();
            each(R, S, C, 1, [&](int64_t r, int64_t s, int64_t c, int64_t) {
                const int64_t i = x_at(n, c, p, q, r, s);
                if (i >= 0) terms.push_back(in(a.x, X, i) * in(a.w, Wt, Wt.at(k, c, r, s)));
            });
            const float bias =
                g.bias ? ld(a.b, g.b.dt, g.b.at(0, g.b.dims[1] > 1 ? k : 0, 0, 0)) : 0.0f;
            finish((void *)a.y, T, T.at(n, k, p, q),
                   reduce(((n * K + k) * P + p) * Q + q, N * K * P * Q), bias);
        });
    } else if (o.pass == P_BWD_DATA) {
        each(N, C, H, W, [&](int64_t n, int64_t c, int64_t h, int64_t w) {
            terms.clear();
            each(R, S, K, 1, [&](int64_t r, int64_t s, int64_t k, int64_t) {
                const int64_t hh = h + ph - r * dh, ww = w + pw - s * dw;
                if (hh < 0 || ww < 0 || hh % sh || ww % sw || hh / sh >= P || ww / sw >= Q) return;
                terms.push_back(in(a.y, Y, Y.at(n, k, hh / sh, ww / sw)) *
                                in(a.w, Wt, Wt.at(k, c, r, s)));
            });
            finish((void *)a.x, X, X.at(n, c, h, w),
                   reduce(((n * C + c) * H + h) * W + w, N * C * H * W), 0.0f);
        });
    } else {
        each(K, C, R, S, [&](int64_t k, int64_t c, int64_t r, int64_t s) {
            terms.clear();
            each(N, P, Q, 1, [&](int64_t n, int64_t p, int64_t q, int64_t) {
                const int64_t i = x_at(n, c, p, q, r, s);
                if (i >= 0) terms.push_back(in(a.x, X, i) * in(a.y, Y, Y.at(n, k, p, q)));
            });
            finish((void *)a.w, Wt, Wt.at(k, c, r, s),
                   reduce(((k * C + c) * R + r) * S + s, K * C * R * S), 0.0f);
        });
    }
}

bool overlaps(const void *a, int64_t an, const void *b, int64_t bn) {
    const char *pa = (const char *)a, *pb = (const char *)b;
    return pa < pb + bn && pb < pa + an;
}

cudnnStatus_t execute(cudnnHandle_t h, const desc *pd, const desc *vd) {
    const plan_v &plan = pd->plan;
    const graph_v &g = *plan.cfg.eng.g;
    const vpack_v &vp = vd->vpack;
    auto ptr_of = [&](const tensor_v &t, const char *role, const void **out) -> cudnnStatus_t {
        for (size_t i = 0; i < vp.uids.size(); i++)
            if (vp.uids[i] == t.uid) {
                const void *p = vp.ptrs[i];
                if (!p)
                    return fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "execute: %s (uid %lld): NULL",
                                role, (long long)t.uid);
                if ((uintptr_t)p % (uintptr_t)t.align)
                    return fail(CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER,
                                "execute: %s (uid %lld) at %p is not aligned to the %lld bytes "
                                "its tensor declares",
                                role, (long long)t.uid, p, (long long)t.align);
                if (!find_range(p, (size_t)t.span()))
                    return fail(CUDNN_STATUS_BAD_PARAM,
                                "execute: %s (uid %lld, [%lld,%lld,%lld,%lld] NCHW, %lld bytes) at "
                                "%p is not inside one allocation: %s",
                                role, (long long)t.uid, (long long)t.dims[0], (long long)t.dims[1],
                                (long long)t.dims[2], (long long)t.dims[3], (long long)t.span(), p,
                                describe_address(p).c_str());
                *out = p;
                return CUDNN_STATUS_SUCCESS;
            }
        return fail(CUDNN_STATUS_BAD_PARAM,
                    "execute: the variant pack has no pointer for %s "
                    "(uid %lld)",
                    role, (long long)t.uid);
    };
    static const char *roles[3][3] = {{"x", "w", "y"}, {"dx", "w", "dy"}, {"x", "dw", "dy"}};
    const op_v &o = g.conv;
    const char *const *rn = roles[o.pass];
    exec_args a{plan, nullptr, nullptr, nullptr, nullptr, vp.ws};
    cudnnStatus_t s = ptr_of(o.x, rn[0], &a.x);
    if (!s) s = ptr_of(o.w, rn[1], &a.w);
    if (!s) s = ptr_of(g.y(), rn[2], &a.y);
    if (!s && g.bias) s = ptr_of(g.b, "bias", &a.b);
    if (s) return s;
    /* the output against every input */
    const void *out = o.pass == P_FWD ? a.y : o.pass == P_BWD_DATA ? a.x : a.w;
    const tensor_v &T = o.pass == P_FWD ? g.y() : o.pass == P_BWD_DATA ? o.x : o.w;
    const struct {
        const void *p;
        const tensor_v *t;
        const char *role;
    } ins[3] = {{o.pass == P_FWD ? a.x : a.y, o.pass == P_FWD ? &o.x : &o.y,
                 o.pass == P_FWD ? rn[0] : rn[2]},
                {o.pass == P_BWD_FILTER ? a.x : a.w, o.pass == P_BWD_FILTER ? &o.x : &o.w,
                 o.pass == P_BWD_FILTER ? rn[0] : rn[1]},
                {a.b, &g.b, "bias"}};
    for (const auto &i : ins)
        if (i.p && overlaps(out, T.span(), i.p, i.t->span()))
            return fail(CUDNN_STATUS_BAD_PARAM, "execute: the output overlaps input %s", i.role);
    if (plan.ws > 0 && (!vp.ws || !find_range(vp.ws, (size_t)plan.ws)))
        return fail(CUDNN_STATUS_BAD_PARAM,
                    "execute: the plan needs a %lld-byte workspace; the variant pack's at %p is "
                    "%s",
                    (long long)plan.ws, vp.ws, vp.ws ? describe_address(vp.ws).c_str() : "not set");
    if (plan.ws > 0 && (overlaps(vp.ws, plan.ws, out, T.span()) ||
                        overlaps(vp.ws, plan.ws, ins[0].p, ins[0].t->span()) ||
                        overlaps(vp.ws, plan.ws, ins[1].p, ins[1].t->span())))
        return fail(CUDNN_STATUS_BAD_PARAM, "execute: the workspace overlaps an operand");
    cmd c;
    c.kind = CMD_GEMM; /* a library's kernels, as cuBLAS's */
    c.name = "cudnnBackendExecute";
    std::vector<int64_t> f = {o.pass,
                              plan.cfg.eng.index,
                              plan.cfg.k.split,
                              plan.ws,
                              (int64_t)(uintptr_t)a.x,
                              (int64_t)(uintptr_t)a.w,
                              (int64_t)(uintptr_t)a.y,
                              (int64_t)(uintptr_t)a.b,
                              (int64_t)(uintptr_t)a.ws};
    for (const tensor_v *t : {&o.x, &o.w, &o.y})
        f.insert(f.end(), {t->dims[0], t->dims[1], t->dims[2], t->dims[3], t->dt});
    c.sig.assign((const unsigned char *)f.data(), (const unsigned char *)(f.data() + f.size()));
    c.run = [a]() {
        if (launch_only()) return cudaSuccess;
        const auto t0 = std::chrono::steady_clock::now();
        run_exec(a);
        const double f = speed();
        if (f > 1)
            clock_discount(
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() *
                (1 - 1 / f));
        return cudaSuccess;
    };
    if (issue(h->st, std::move(c)) != cudaSuccess)
        return fail(CUDNN_STATUS_EXECUTION_FAILED, "execute: the stream refused the call");
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t finalize(desc *d) {
    switch (d->type) {
    case CUDNN_BACKEND_TENSOR_DESCRIPTOR:
        return finalize_tensor(d);
    case CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR:
        return finalize_conv(d);
    case CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR:
        return finalize_conv_op(d);
    case CUDNN_BACKEND_POINTWISE_DESCRIPTOR: {
        cudnnPointwiseMode_t m;
        cudnnDataType_t prec;
        if (!get1(d, CUDNN_ATTR_POINTWISE_MODE, &m) ||
            !get1(d, CUDNN_ATTR_POINTWISE_MATH_PREC, &prec) || prec != CUDNN_DATA_FLOAT)
            return fail(CUDNN_STATUS_BAD_PARAM, "pointwise: mode or fp32 math precision not set");
        d->pw_mode = m;
        return CUDNN_STATUS_SUCCESS;
    }
    case CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR:
        return finalize_pointwise_op(d);
    case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR:
        return finalize_graph(d);
    case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR: {
        const desc *g = child(d, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH,
                              CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
        cudnnBackendHeurMode_t m;
        if (!g || !get1(d, CUDNN_ATTR_ENGINEHEUR_MODE, &m))
            return fail(CUDNN_STATUS_BAD_PARAM, "heuristics: no finalized graph or no mode");
        if (m != CUDNN_HEUR_MODE_A && m != CUDNN_HEUR_MODE_B && m != CUDNN_HEUR_MODE_FALLBACK)
            return fail(CUDNN_STATUS_NOT_SUPPORTED, "heuristics: mode %d", (int)m);
        d->results = heuristics(g->graph, m);
        return CUDNN_STATUS_SUCCESS;
    }
    case CUDNN_BACKEND_ENGINE_DESCRIPTOR: {
        const desc *g =
            child(d, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
        int64_t idx = -1;
        if (!g || !get1(d, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, &idx))
            return fail(CUDNN_STATUS_BAD_PARAM, "engine: no finalized graph or no global index");
        if (idx < 0 || idx >= E_COUNT || !supports((int)idx, *g->graph))
            return fail(CUDNN_STATUS_NOT_SUPPORTED, "engine %lld does not support this graph",
                        (long long)idx);
        d->engine.g = g->graph, d->engine.index = idx;
        return CUDNN_STATUS_SUCCESS;
    }
    case CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR: {
        cudnnBackendKnobType_t t;
        if (!get1(d, CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, &t) ||
            !get1(d, CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, &d->knob_value))
            return fail(CUDNN_STATUS_BAD_PARAM, "knob choice: type or value not set");
        d->knob_type = t;
        return CUDNN_STATUS_SUCCESS;
    }
    case CUDNN_BACKEND_ENGINECFG_DESCRIPTOR: {
        const desc *e = child(d, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_BACKEND_ENGINE_DESCRIPTOR);
        if (!e) return fail(CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED, "engine config: no engine");
        cfg_v c = make_cfg(e->engine.g, (int)e->engine.index, 1, 2);
        const attr *kn = get(d, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES);
        for (int64_t i = 0; kn && i < kn->count; i++) {
            const desc *k = child(d, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES,
                                  CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, i);
            if (!k)
                return fail(CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED, "engine config: knob %lld",
                            (long long)i);
            const bool split = k->knob_type == CUDNN_KNOB_TYPE_SPLIT_K_SLC,
                       stages = k->knob_type == CUDNN_KNOB_TYPE_STAGES;
            const int64_t v = k->knob_value;
            if (c.eng.index != E_SPLIT || !(split || stages) ||
                (split && v != 1 && v != 2 && v != 4) || (stages && v != 2 && v != 3))
                return fail(CUDNN_STATUS_NOT_SUPPORTED,
                            "engine config: engine %lld has no knob %lld = %lld",
                            (long long)c.eng.index, (long long)k->knob_type, (long long)v);
            (split ? c.k.split : c.k.stages) = v;
        }
        d->cfg = c;
        return CUDNN_STATUS_SUCCESS;
    }
    case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR: {
        const desc *c =
            child(d, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
        if (!c || !get1(d, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, &d->handle) || !d->handle)
            return fail(CUDNN_STATUS_BAD_PARAM, "execution plan: no handle or no finalized "
                                                "engine config");
        if (!(plan_engines() >> c->cfg.eng.index & 1u))
            return fail(CUDNN_STATUS_NOT_SUPPORTED,
                        "engine %lld builds no plan here (SG_SIM_CUDNN_PLANS)",
                        (long long)c->cfg.eng.index);
        d->plan.cfg = c->cfg, d->plan.ws = workspace_of(c->cfg);
        return CUDNN_STATUS_SUCCESS;
    }
    case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR: {
        const attr *u = get(d, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS),
                   *p = get(d, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS);
        if (!u || !p || u->count != p->count)
            return fail(CUDNN_STATUS_BAD_PARAM, "variant pack: uids and pointers not set or of "
                                                "different counts");
        d->vpack.uids.resize((size_t)u->count), d->vpack.ptrs.resize((size_t)p->count);
        memcpy(d->vpack.uids.data(), u->bytes.data(), u->bytes.size());
        memcpy(d->vpack.ptrs.data(), p->bytes.data(), p->bytes.size());
        get1(d, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, &d->vpack.ws);
        return CUDNN_STATUS_SUCCESS;
    }
    default:
        return fail(CUDNN_STATUS_NOT_SUPPORTED, "descriptor type %d", (int)d->type);
    }
}

/* fills dst (a descriptor the caller created, of type t) with a finalized value */
template <class F> cudnnStatus_t fill(void *dst, cudnnBackendDescriptorType_t t, F set) {
    desc *o = desc_of(dst);
    if (!o || o->type != t)
        return fail(CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE,
                    "get attribute: the array holds a descriptor of another type (or none)");
    set(o);
    o->final = true;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t get_attr(const desc *d, cudnnBackendAttributeName_t name,
                       cudnnBackendAttributeType_t type, int64_t req, int64_t *count, void *arr) {
    if (!d->final)
        return fail(CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED,
                    "get attribute %d: the descriptor is not finalized", (int)name);
    auto want = [&](cudnnBackendAttributeType_t t) {
        return type == t ? CUDNN_STATUS_SUCCESS
                         : fail(CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE,
                                "get attribute %d: type %d asked for, it is %d", (int)name,
                                (int)type, (int)t);
    };
    cudnnStatus_t s;
    if (d->type == CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR && name == CUDNN_ATTR_ENGINEHEUR_RESULTS) {
        if ((s = want(CUDNN_TYPE_BACKEND_DESCRIPTOR))) return s;
        const int64_t n = (int64_t)d->results.size();
        if (count) *count = arr ? (req < n ? req : n) : n;
        for (int64_t i = 0; arr && i < req && i < n; i++)
            if ((s = fill(((void **)arr)[i], CUDNN_BACKEND_ENGINECFG_DESCRIPTOR,
                          [&](desc *o) { o->cfg = d->results[(size_t)i]; })))
                return s;
        return CUDNN_STATUS_SUCCESS;
    }
    if (d->type == CUDNN_BACKEND_ENGINECFG_DESCRIPTOR && name == CUDNN_ATTR_ENGINECFG_ENGINE) {
        if ((s = want(CUDNN_TYPE_BACKEND_DESCRIPTOR))) return s;
        if (count) *count = 1;
        return req < 1 || !arr ? CUDNN_STATUS_SUCCESS
                               : fill(((void **)arr)[0], CUDNN_BACKEND_ENGINE_DESCRIPTOR,
                                      [&](desc *o) { o->engine = d->cfg.eng; });
    }
    if (d->type == CUDNN_BACKEND_ENGINECFG_DESCRIPTOR &&
        name == CUDNN_ATTR_ENGINECFG_KNOB_CHOICES) {
        if ((s = want(CUDNN_TYPE_BACKEND_DESCRIPTOR))) return s;
        const int64_t n = d->cfg.eng.index == E_SPLIT ? 2 : 0;
        const int64_t kt[2] = {CUDNN_KNOB_TYPE_SPLIT_K_SLC, CUDNN_KNOB_TYPE_STAGES};
        const int64_t kv[2] = {d->cfg.k.split, d->cfg.k.stages};
        if (count) *count = arr ? (req < n ? req : n) : n;
        for (int64_t i = 0; arr && i < req && i < n; i++)
            if ((s = fill(((void **)arr)[i], CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR,
                          [&](desc *o) { o->knob_type = kt[i], o->knob_value = kv[i]; })))
                return s;
        return CUDNN_STATUS_SUCCESS;
    }
    if (d->type == CUDNN_BACKEND_ENGINE_DESCRIPTOR && name == CUDNN_ATTR_ENGINE_GLOBAL_INDEX) {
        if ((s = want(CUDNN_TYPE_INT64))) return s;
        if (count) *count = 1;
        if (arr && req >= 1) *(int64_t *)arr = d->engine.index;
        return CUDNN_STATUS_SUCCESS;
    }
    if (d->type == CUDNN_BACKEND_ENGINE_DESCRIPTOR && name == CUDNN_ATTR_ENGINE_NUMERICAL_NOTE) {
        if ((s = want(CUDNN_TYPE_NUMERICAL_NOTE))) return s;
        const auto notes = notes_of((int)d->engine.index, *d->engine.g);
        const int64_t n = (int64_t)notes.size();
        if (count) *count = arr ? (req < n ? req : n) : n;
        for (int64_t i = 0; arr && i < req && i < n; i++)
            ((cudnnBackendNumericalNote_t *)arr)[i] = notes[(size_t)i];
        return CUDNN_STATUS_SUCCESS;
    }
    if (d->type == CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR &&
        (name == CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE || name == CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE)) {
        const bool t = name == CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE;
        if ((s = want(t ? CUDNN_TYPE_KNOB_TYPE : CUDNN_TYPE_INT64))) return s;
        if (count) *count = 1;
        if (arr && req >= 1) {
            if (t)
                *(cudnnBackendKnobType_t *)arr = (cudnnBackendKnobType_t)d->knob_type;
            else
                *(int64_t *)arr = d->knob_value;
        }
        return CUDNN_STATUS_SUCCESS;
    }
    if (d->type == CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR &&
        name == CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE) {
        if ((s = want(CUDNN_TYPE_INT64))) return s;
        if (count) *count = 1;
        if (arr && req >= 1) *(int64_t *)arr = d->plan.ws;
        return CUDNN_STATUS_SUCCESS;
    }
    return fail(CUDNN_STATUS_NOT_SUPPORTED, "get attribute %d of descriptor type %d: not emulated",
                (int)name, (int)d->type);
}

} // namespace
} // namespace sg_sim

using namespace sg_sim;

extern "C" {

size_t cudnnGetVersion(void) {
    return CUDNN_VERSION;
}

const char *cudnnGetErrorString(cudnnStatus_t s) {
    switch (CUDNN_STATUS_CATEGORY(s)) {
    case 0:
        return "CUDNN_STATUS_SUCCESS";
    case 1000:
        return "CUDNN_STATUS_NOT_INITIALIZED";
    case 2000:
        return "CUDNN_STATUS_BAD_PARAM";
    case 3000:
        return "CUDNN_STATUS_NOT_SUPPORTED";
    case 4000:
        return "CUDNN_STATUS_INTERNAL_ERROR";
    case 5000:
        return "CUDNN_STATUS_EXECUTION_FAILED";
    default:
        return "CUDNN_STATUS_UNKNOWN";
    }
}

void cudnnGetLastErrorString(char *message, size_t max_size) {
    if (!message || !max_size) return;
    snprintf(message, max_size, "%s", last_error.c_str());
    last_error.clear();
}

cudnnStatus_t cudnnCreate(cudnnHandle_t *handle) {
    if (!handle) return fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "cudnnCreate: NULL");
    *handle = new cudnnContext;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroy(cudnnHandle_t handle) {
    if (!handle) return fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "cudnnDestroy: NULL");
    delete handle;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t st) {
    if (!handle) return fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "cudnnSetStream: NULL handle");
    handle->st = st;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendCreateDescriptor(cudnnBackendDescriptorType_t type,
                                           cudnnBackendDescriptor_t *out) {
    if (!out) return fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "create descriptor: NULL");
    desc *d = new desc;
    d->type = type;
    live().insert(d);
    *out = d;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t p) {
    desc *d = desc_of(p);
    if (!d) return fail(CUDNN_STATUS_BAD_PARAM, "destroy descriptor: %p is not one", p);
    live().erase(d);
    d->magic = 0;
    delete d;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendSetAttribute(cudnnBackendDescriptor_t p, cudnnBackendAttributeName_t name,
                                       cudnnBackendAttributeType_t type, int64_t count,
                                       const void *array) {
    desc *d = desc_of(p);
    if (!d)
        return fail(CUDNN_STATUS_BAD_PARAM, "set attribute %d: %p is not a descriptor", (int)name,
                    p);
    if (d->final)
        return fail(CUDNN_STATUS_BAD_PARAM, "set attribute %d: the descriptor is finalized",
                    (int)name);
    const attr_rule *r = rule_of(d->type, name);
    if (!r)
        return fail(CUDNN_STATUS_BAD_PARAM, "set attribute %d: not one of descriptor type %d's",
                    (int)name, (int)d->type);
    if (r->type != type)
        return fail(CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE,
                    "set attribute %d: given as type %d, it takes type %d", (int)name, (int)type,
                    (int)r->type);
    if (count < 0 || (count > 0 && !array))
        return fail(CUDNN_STATUS_BAD_PARAM, "set attribute %d: %lld elements at %p", (int)name,
                    (long long)count, array);
    attr a;
    a.type = type, a.count = count;
    a.bytes.assign((const unsigned char *)array,
                   (const unsigned char *)array + (size_t)count * type_size(type));
    d->a[(int)name] = std::move(a);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendGetAttribute(cudnnBackendDescriptor_t const p,
                                       cudnnBackendAttributeName_t name,
                                       cudnnBackendAttributeType_t type, int64_t requested,
                                       int64_t *count, void *array) {
    const desc *d = desc_of(p);
    if (!d)
        return fail(CUDNN_STATUS_BAD_PARAM, "get attribute %d: %p is not a descriptor", (int)name,
                    p);
    return get_attr(d, name, type, requested, count, array);
}

cudnnStatus_t cudnnBackendFinalize(cudnnBackendDescriptor_t p) {
    desc *d = desc_of(p);
    if (!d) return fail(CUDNN_STATUS_BAD_PARAM, "finalize: %p is not a descriptor", p);
    if (d->final) return fail(CUDNN_STATUS_BAD_PARAM, "finalize: finalized already");
    const cudnnStatus_t s = finalize(d);
    d->final = s == CUDNN_STATUS_SUCCESS;
    return s;
}

cudnnStatus_t cudnnBackendExecute(cudnnHandle_t h, cudnnBackendDescriptor_t plan,
                                  cudnnBackendDescriptor_t vpack) {
    const desc *pd = desc_of(plan), *vd = desc_of(vpack);
    if (!h || h->magic != cudnnContext().magic)
        return fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "execute: not a handle");
    if (!pd || pd->type != CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR || !pd->final || !vd ||
        vd->type != CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR || !vd->final)
        return fail(CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED,
                    "execute: the plan or the variant pack is not a finalized descriptor of its "
                    "type");
    if (pd->handle != h)
        return fail(CUDNN_STATUS_BAD_PARAM, "execute: the plan was made on another handle");
    return execute(h, pd, vd);
}

} /* extern "C" */
