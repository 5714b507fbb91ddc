/* test_cudnn_graphs.c — the cuDNN engine's operation graphs, built on the host, no GPU needed.
 *
 * kernels/cuda/cudnn_conv.c describes every convolution to cuDNN's backend API: NHWC tensors
 * as NCHW dims with strides, the conv descriptor (pre/post paddings, strides, fp32 compute),
 * the forward / backward-data / backward-filter operation (cuDNN checks at finalization that
 * x, w and y agree with the paddings and strides), the fused bias (a pointwise add on a
 * virtual fp32 tensor) and the bf16 dw variant. All of that finalizes without a device; only
 * the operation graph needs a cuDNN handle, which needs a GPU. So for every shape class the
 * engine meets (K 1/3, S 1/2, symmetric and SAME padding, odd and even sizes, fp32 and bf16,
 * overwrite and accumulate, every variant), this test builds the graph with no handle and
 * demands that the ONLY failure is the missing handle: any error before it (a wrong attribute
 * type, a stride or padding cuDNN rejects) fails the test with cuDNN's message. A variant
 * pack with the engine's uids and pointers must finalize too.
 *
 * The engine's static functions are reached by including the .c file (tests may include
 * anything); the two kernels it launches (a backward-filter's finish: the widening of a bf16 dw
 * with db, or db alone), and the timing windows of its timed choice (timing.cu) are stubs that
 * are never called here.
 * Exits 77 (SKIP) only when cuDNN itself cannot create a descriptor on this machine.
 */
#include "kernels/cuda/cudnn_conv.c"

#include <stdio.h>

#include "tests/sg_test.h"

int cuda_conv2d_bwd_widen(cudaStream_t st, float *dw, const void *dwb, int64_t nw, float *db,
                          const void *dy, int64_t P, int Co, int dt, int accum, void *ws,
                          int64_t ws_bytes) {
    (void)st, (void)dw, (void)dwb, (void)nw, (void)db, (void)dy, (void)P, (void)Co, (void)dt;
    (void)accum, (void)ws, (void)ws_bytes;
    return sg_set_error("cuda_conv2d_bwd_widen: not available in test_cudnn_graphs");
}
int cuda_conv2d_bwd_bias(cudaStream_t st, float *db, const void *dy, int64_t P, int Co, int dt,
                         int accum, void *ws, int64_t ws_bytes) {
    (void)st, (void)db, (void)dy, (void)P, (void)Co, (void)dt, (void)accum, (void)ws;
    (void)ws_bytes;
    return sg_set_error("cuda_conv2d_bwd_bias: not available in test_cudnn_graphs");
}

int sg_cuda_window_begin(sg_cuda_window *w, cudaStream_t st, cudaEvent_t ev0) {
    (void)w, (void)st, (void)ev0;
    return sg_set_error("sg_cuda_window_begin: not available in test_cudnn_graphs");
}
int sg_cuda_window_end(sg_cuda_window *w, cudaStream_t st, cudaEvent_t ev0, cudaEvent_t ev1,
                       float *ms) {
    (void)w, (void)st, (void)ev0, (void)ev1, (void)ms;
    return sg_set_error("sg_cuda_window_end: not available in test_cudnn_graphs");
}

void sg_cuda_window_cancel(sg_cuda_window *w) {
    (void)w;
}

/* graph of one call and variant: must stop exactly at the handle */
static void check_graph(sg_cudnn *c, const sg_cudnn_conv *cv, int variant) {
    char ctx[200];
    snprintf(ctx, sizeof ctx, "pass %d %s K%d S%d pad%d N%d %dx%d %d->%d%s variant %d", cv->pass,
             cv->dt == DT_BF16 ? "bf16" : "f32", cv->K, cv->S, cv->pad, cv->N, cv->H, cv->W, cv->Ci,
             cv->Co, cv->accum ? " accum" : "", variant);
    dnn_key k;
    dnn_key_of(cv, &k);
    dnn_graph g;
    int rc = dnn_graph_make(c, &k, variant, &g);
    const char *err = rc ? sg_last_error() : "";
    CHECK(rc == SG_ERR && strstr(err, "CUDNN_ATTR_OPERATIONGRAPH_HANDLE"),
          "%s: every descriptor before the graph's handle must finalize; got: %s", ctx,
          rc ? err : "success without a handle");
    CHECK(g.op_conv != NULL && (variant == 0 || cv->pass != SG_CUDNN_FWD || g.op_pw != NULL),
          "%s: the operations were not all built", ctx);
    dnn_graph_release(&g);
}

int main(void) {
    cudnnBackendDescriptor_t probe = NULL;
    cudnnStatus_t s = cudnnBackendCreateDescriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR, &probe);
    if (s != CUDNN_STATUS_SUCCESS) {
        printf("cuDNN cannot create a descriptor here (%s): skipped\n", cudnnGetErrorString(s));
        return SG_TEST_SKIP;
    }
    cudnnBackendDestroyDescriptor(probe);
    printf("cuDNN %zu\n", sg_cudnn_version());

    /* no handle: what a context without a GPU has; a workspace address for the alignments */
    sg_cudnn c;
    memset(&c, 0, sizeof c);
    c.ws = (void *)(uintptr_t)0x7f0000100000ull;
    c.ws_bytes = (int64_t)32 << 20;
    static const struct {
        int N, H, W, Ci, Co, K, S, pad;
    } shapes[] = {
        {2, 7, 9, 5, 7, 3, 1, 1},     /* 3x3 stride 1, odd sizes */
        {3, 9, 11, 25, 20, 3, 2, 1},  /* stride 2, symmetric */
        {3, 10, 12, 25, 20, 3, 2, 0}, /* stride 2, SAME (0 before, 1 after) */
        {2, 2, 2, 7, 5, 3, 2, 0},     /* SAME on 2x2 */
        {1, 3, 5, 13, 9, 1, 1, 0},    /* 1x1 */
        {2, 6, 7, 10, 12, 1, 2, 0},   /* 1x1 stride 2, odd */
        {128, 32, 32, 128, 128, 3, 1, 1}, {128, 32, 32, 128, 128, 3, 2, 0},
    };
    int graphs = 0;
    for (int i = 0; i < SG_ARRAY_LEN(shapes); i++)
        for (int pass = SG_CUDNN_FWD; pass <= SG_CUDNN_BWD_FILTER; pass++)
            for (int dt = DT_F32; dt <= DT_BF16; dt++)
                for (int accum = 0; accum <= (pass != SG_CUDNN_FWD); accum++) {
                    sg_cudnn_conv cv = {.pass = pass,
                                        .N = shapes[i].N,
                                        .H = shapes[i].H,
                                        .W = shapes[i].W,
                                        .Ci = shapes[i].Ci,
                                        .Co = shapes[i].Co,
                                        .K = shapes[i].K,
                                        .S = shapes[i].S,
                                        .pad = shapes[i].pad,
                                        .dt = dt,
                                        .accum = accum,
                                        .out = (void *)(uintptr_t)0x7f0010000000ull,
                                        .in = (void *)(uintptr_t)0x7f0020000000ull,
                                        .x = (void *)(uintptr_t)0x7f0030000000ull,
                                        .w = (const void *)(uintptr_t)0x7f0040000000ull,
                                        .b = (const float *)(uintptr_t)0x7f0050000000ull};
                    CHECK(dnn_check(&c, &cv) == SG_OK, "dnn_check: %s", sg_last_error());
                    check_graph(&c, &cv, 0), graphs++;
                    /* the variants: the fused bias; the bf16 dw */
                    if (pass == SG_CUDNN_FWD || (pass == SG_CUDNN_BWD_FILTER && dt == DT_BF16))
                        check_graph(&c, &cv, 1), graphs++;
                }

    /* reuse on resume: the names sg_cudnn_engine_name writes parse back (a table entry made
     * by hand, as a GPU run would have pinned it), and sg_cudnn_prefer takes them only where
     * they fit the pass */
    {
        sg_cudnn_conv fw = {.pass = SG_CUDNN_FWD,
                            .N = 2,
                            .H = 8,
                            .W = 8,
                            .Ci = 16,
                            .Co = 32,
                            .K = 3,
                            .S = 1,
                            .pad = 1,
                            .dt = DT_BF16,
                            .out = (void *)(uintptr_t)0x7f0010000000ull,
                            .in = (void *)(uintptr_t)0x7f0020000000ull,
                            .w = (const void *)(uintptr_t)0x7f0040000000ull,
                            .b = (const float *)(uintptr_t)0x7f0050000000ull};
        dnn_entry en;
        memset(&en, 0, sizeof en);
        dnn_key_of(&fw, &en.key);
        en.ok = 1, en.bias_fused = 1, en.engine = 12, en.ws_bytes = 4096, en.nknobs = 2;
        en.knob_type[0] = 3, en.knob_value[0] = 1, en.knob_type[1] = 17, en.knob_value[1] = -2;
        c.e = &en, c.n = 1;
        char name[160];
        sg_cudnn_engine_name(&c, &fw, name, sizeof name);
        c.e = NULL, c.n = 0;
        CHECK(!strcmp(name, "e12k3=1k17=-2+bias ws4096"), "engine name '%s'", name);
        dnn_wish w;
        memset(&w, 0, sizeof w);
        CHECK(dnn_parse_name(name, &w) == SG_OK && w.engine == 12 && w.nknobs == 2 &&
                  w.knob_type[1] == 17 && w.knob_value[1] == -2 && w.variant == 1,
              "'%s' parses back", name);
        CHECK(sg_cudnn_prefer(&c, &fw, name) == SG_OK, "prefer: %s", sg_last_error());
        CHECK(sg_cudnn_prefer(&c, &fw, "e7 ws0") == SG_OK, "prefer again: %s", sg_last_error());
        int met = -1, missed = -1;
        CHECK(sg_cudnn_preferences(&c, &met, &missed) == 1 && met == 0 && missed == 0,
              "one descriptor, one preference (the last)");
        CHECK(c.wish[0].engine == 7 && c.wish[0].variant == 0, "the last preference wins");
        static const char *const bad[] = {"",         "own",          "x12 ws0",    "e ws0",
                                          "e12",      "e12k3 ws0",    "e12k3= ws0", "e12 ws",
                                          "e12 ws0x", "e12+fused ws0"};
        for (int i = 0; i < SG_ARRAY_LEN(bad); i++)
            CHECK(sg_cudnn_prefer(&c, &fw, bad[i]) == SG_ERR, "'%s' must not parse", bad[i]);
        sg_cudnn_conv nb = fw;
        nb.b = NULL;
        CHECK(sg_cudnn_prefer(&c, &nb, "e1+bias ws0") == SG_ERR, "+bias on a conv without bias");
        sg_cudnn_conv bd = fw;
        bd.pass = SG_CUDNN_BWD_DATA;
        CHECK(sg_cudnn_prefer(&c, &bd, "e1+dw_bf16 ws0") == SG_ERR, "+dw_bf16 on backward-data");
        sg_cudnn_conv bf = fw;
        bf.pass = SG_CUDNN_BWD_FILTER, bf.x = (void *)(uintptr_t)0x7f0030000000ull;
        CHECK(sg_cudnn_prefer(&c, &bf, "e1+dw_bf16 ws0") == SG_OK, "+dw_bf16, bf16: %s",
              sg_last_error());
        bf.dt = DT_F32;
        CHECK(sg_cudnn_prefer(&c, &bf, "e1+dw_bf16 ws0") == SG_ERR, "+dw_bf16 on fp32");
        CHECK(sg_cudnn_preferences(&c, NULL, NULL) == 2, "two descriptors preferred");
        free(c.wish);
        c.wish = NULL, c.nwish = c.capwish = 0;
    }

    /* the engine's variant pack: uids and pointers as sg_cudnn_run passes them */
    int64_t uids[4] = {UID_X, UID_W, UID_Y, UID_B};
    void *ptrs[4] = {(void *)(uintptr_t)0x1000, (void *)(uintptr_t)0x2000,
                     (void *)(uintptr_t)0x3000, (void *)(uintptr_t)0x4000};
    void *ws = c.ws;
    cudnnBackendDescriptor_t vp = NULL;
    s = cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 4,
                                     uids);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
                                     4, ptrs);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1,
                                     &ws);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendFinalize(vp);
    CHECK(s == CUDNN_STATUS_SUCCESS, "variant pack: %s", cudnnGetErrorString(s));
    if (vp) cudnnBackendDestroyDescriptor(vp);

    /* without a GPU, a context cannot be made, and says why */
    sg_cudnn *ctx = NULL;
    int devs = 0;
    if (cudaGetDeviceCount(&devs) != cudaSuccess || devs == 0) {
        (void)cudaGetLastError();
        CHECK(sg_cudnn_create(&ctx, NULL, c.ws, c.ws_bytes) == SG_ERR && ctx == NULL &&
                  strstr(sg_last_error(), "cudnnCreate"),
              "no GPU: sg_cudnn_create must fail naming cudnnCreate (%s)", sg_last_error());
    }
    printf("%d operation graphs built up to the handle\n", graphs);
    return sg_test_end();
}
