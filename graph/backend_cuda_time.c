/* backend_cuda_time.c — the CUDA backend's timing hooks (graph/backend.h): whole steps and
 * captured launches, every node eagerly and a set of nodes as one replayed graph, the matmul and
 * memory peaks, one node on each engine or schedule (bench's per-layer table, the engine
 * tuning), plain GEMMs of a size and the step's GEMMs on each candidate algorithm. All of it
 * device time in windows that hold the host's issue out (kernels/cuda/timing.cu), outside the
 * captured step: nothing here changes what a step computes. */
#ifdef SG_HAVE_CUDA

#include "graph/backend_cuda_ctx.h"

int cuda_time_steps(sg_backend *be, const sg_plan *p, int n, float *ms) {
    cuda_ctx *c = be->ctx;
    for (int i = 0; i < n; i++) {
        CU(cudaEventRecord(c->ev[0], c->st));
        if (cuda_run_step(be, p)) return SG_ERR;
        CU(cudaEventRecord(c->ev[1], c->st));
        CU(cudaEventSynchronize(c->ev[1]));
        CU(cudaEventElapsedTime(&ms[i], c->ev[0], c->ev[1]));
    }
    return SG_OK;
}

/* bench: the host time of n launches of the step's graph as the libraries captured it (memset
 * nodes and all), each on an idle stream as run_step's are timed; us[0] = -1 where no memset node
 * was replaced (the launched graph is the captured one). Each launch runs a step. */
int cuda_time_launch_captured(sg_backend *be, const sg_plan *p, int n, float *us) {
    cuda_ctx *c = be->ctx;
    (void)p;
    if (n > 0) us[0] = -1;
    if (!c->graph_captured || n <= 0) return SG_OK;
    cudaGraphExec_t x = NULL;
    CU(cudaGraphInstantiate(&x, c->graph_captured, 0));
    cudaError_t e = cudaGraphUpload(x, c->st);
    if (e == cudaSuccess) e = cudaGraphLaunch(x, c->st); /* warm */
    for (int i = 0; i < n && e == cudaSuccess; i++) {
        struct timespec t0, t1;
        e = cudaStreamSynchronize(c->st);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        if (e == cudaSuccess) e = cudaGraphLaunch(x, c->st);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        us[i] = (float)((double)(t1.tv_sec - t0.tv_sec) * 1e6 +
                        (double)(t1.tv_nsec - t0.tv_nsec) * 1e-3);
    }
    if (e == cudaSuccess) e = cudaStreamSynchronize(c->st);
    cudaGraphExecDestroy(x);
    if (e != cudaSuccess)
        return sg_set_error("launching the step's graph as captured: %s", cudaGetErrorString(e));
    return SG_OK;
}

int cuda_time_nodes(sg_backend *be, const sg_plan *p, float *ms) {
    cuda_ctx *c = be->ctx;
    for (int i = 0; i < p->g.nn; i++) {
        if (sg_cuda_window_begin(&c->win, c->st, c->ev[0])) return SG_ERR;
        if (cuda_run_node(be, p, i)) {
            sg_cuda_window_cancel(&c->win);
            return SG_ERR;
        }
        if (sg_cuda_window_end(&c->win, c->st, c->ev[0], c->ev[1], &ms[i])) return SG_ERR;
    }
    return SG_OK;
}

void cuda_last_replay_types(sg_backend *be, int types[4]) {
    const cuda_ctx *c = be->ctx;
    memcpy(types, c->replay_types, sizeof c->replay_types);
}

int cuda_time_nodes_replay(sg_backend *be, const sg_plan *p, const int *nodes, int n, int reps,
                           float *ms) {
    cuda_ctx *c = be->ctx;
    for (int r = 0; r < reps; r++) ms[r] = 0;
    for (int k = 0; k < 4; k++) c->replay_types[k] = n > 0 && reps > 0 ? -1 : 0;
    if (n <= 0 || reps <= 0) return SG_OK;
    /* the nodes once eagerly, between two synchronisations, then captured: as the step is
     * (the host execution checks that a capture replays the eager commands before it) */
    CU(cudaStreamSynchronize(c->st));
    for (int k = 0; k < n; k++)
        if (cuda_run_node(be, p, nodes[k])) return SG_ERR;
    CU(cudaStreamSynchronize(c->st));
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    cudaError_t e = cudaStreamBeginCapture(c->st, cudaStreamCaptureModeThreadLocal);
    int rc = e == cudaSuccess ? SG_OK : sg_set_error("capture: %s", cudaGetErrorString(e));
    for (int k = 0; k < n && !rc; k++) rc = cuda_run_node(be, p, nodes[k]);
    if (e == cudaSuccess) {
        e = cudaStreamEndCapture(c->st, &graph);
        if (!rc && e != cudaSuccess)
            rc = sg_set_error("capturing %d nodes: %s", n, cudaGetErrorString(e));
    }
    size_t launches = 0;
    if (!rc) {
        e = cudaGraphGetNodes(graph, NULL, &launches);
        if (e != cudaSuccess) rc = sg_set_error("cudaGraphGetNodes: %s", cudaGetErrorString(e));
    }
    if (!rc) graph_types(graph, launches, c->replay_types);
    /* nodes that launch nothing (an accum whose input is its output) cost nothing */
    if (!rc && launches > 0) {
        e = cudaGraphInstantiate(&exec, graph, 0);
        if (e != cudaSuccess) rc = sg_set_error("instantiate: %s", cudaGetErrorString(e));
        if (!rc && cudaGraphLaunch(exec, c->st) != cudaSuccess) /* warm: uploaded, caches */
            rc = sg_set_error("replay: %s", cudaGetErrorString(cudaGetLastError()));
        for (int r = 0; r < reps && !rc; r++) {
            rc = sg_cuda_window_begin(&c->win, c->st, c->ev[0]);
            if (!rc && cudaGraphLaunch(exec, c->st) != cudaSuccess) {
                sg_cuda_window_cancel(&c->win);
                rc = sg_set_error("replay: %s", cudaGetErrorString(cudaGetLastError()));
            }
            if (!rc) rc = sg_cuda_window_end(&c->win, c->st, c->ev[0], c->ev[1], &ms[r]);
        }
    }
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    if (!rc) CU(cudaStreamSynchronize(c->st));
    return rc;
}

/* dense GEMM peak with cuBLAS on square matrices (n = 8192 bf16 / 4096 fp32), for MFU. This
 * is a measurement utility outside the step, so it allocates its own buffers. */
double cuda_matmul_peak(sg_backend *be, int dtype) {
    cuda_ctx *c = be->ctx;
    int n = dtype == DT_BF16 ? 8192 : 4096, es = dtype == DT_BF16 ? 2 : 4, reps = 10;
    void *a = NULL, *b = NULL, *d = NULL;
    double tflops = 0;
    size_t bytes = (size_t)n * n * (size_t)es;
    unsigned char *host = malloc(bytes);
    if (!host || cudaMalloc(&a, bytes) || cudaMalloc(&b, bytes) || cudaMalloc(&d, bytes)) {
        free(host);
        goto out;
    }
    /* random operands: all-zero matrices can run at clocks real data does not */
    for (size_t i = 0; i < (size_t)n * n; i++) {
        float v = sg_rng_uniform(1, 0, SG_RNG_INIT, i) - 0.5f;
        if (dtype == DT_BF16)
            ((sg_bf16 *)host)[i] = sg_f32_to_bf16(v);
        else
            ((float *)host)[i] = v;
    }
    /* on the GEMMs' stream (see cuda_upload), then wait: host is freed right after */
    cudaMemcpyAsync(a, host, bytes, cudaMemcpyHostToDevice, c->st);
    cudaMemcpyAsync(b, host, bytes, cudaMemcpyHostToDevice, c->st);
    cudaStreamSynchronize(c->st);
    free(host);
    cudaDataType t = dtype == DT_BF16 ? CUDA_R_16BF : CUDA_R_32F;
    float one = 1, zero = 0;
    for (int k = 0; k < reps + 2; k++) {
        if (k == 2) cudaEventRecord(c->ev[0], c->st);
        if (cublasGemmEx(c->cb, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, t, n, b, t, n, &zero, d,
                         t, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS)
            goto out;
    }
    cudaEventRecord(c->ev[1], c->st);
    cudaEventSynchronize(c->ev[1]);
    float ms = 0;
    cudaEventElapsedTime(&ms, c->ev[0], c->ev[1]);
    if (ms > 0) tflops = 2.0 * n * (double)n * n * reps / (ms * 1e-3) / 1e12;
out:
    cudaFree(a), cudaFree(b), cudaFree(d);
    cudaGetLastError();
    return tflops;
}

/* memory bandwidth: device-to-device copies of `bytes` (beyond the L2 cache at the size bench
 * asks for, 256 MiB), each timed alone with events after two untimed ones, the median; read plus
 * written bytes over its time. Its own buffers, as the matmul peak. */
double cuda_mem_peak(sg_backend *be, int64_t bytes) {
    cuda_ctx *c = be->ctx;
    enum { REPS = 9 };
    void *a = NULL, *b = NULL;
    float ms[REPS];
    double gbs = 0;
    int ok = bytes > 0 && cudaMalloc(&a, (size_t)bytes) == cudaSuccess &&
             cudaMalloc(&b, (size_t)bytes) == cudaSuccess &&
             cudaMemsetAsync(a, 1, (size_t)bytes, c->st) == cudaSuccess;
    for (int r = -2; r < REPS && ok; r++) {
        ok = cudaEventRecord(c->ev[0], c->st) == cudaSuccess &&
             cudaMemcpyAsync(b, a, (size_t)bytes, cudaMemcpyDeviceToDevice, c->st) == cudaSuccess &&
             cudaEventRecord(c->ev[1], c->st) == cudaSuccess &&
             cudaEventSynchronize(c->ev[1]) == cudaSuccess;
        if (ok && r >= 0) ok = cudaEventElapsedTime(&ms[r], c->ev[0], c->ev[1]) == cudaSuccess;
    }
    if (ok) {
        sg_sort_f32(ms, REPS);
        const double med = sg_quantile_sorted(ms, REPS, 0.5);
        if (med > 0) gbs = 2.0 * (double)bytes / (med * 1e-3) / 1e9;
    }
    cudaStreamSynchronize(c->st);
    cudaFree(a), cudaFree(b);
    cudaGetLastError();
    return gbs;
}
/* the GEMM table for work outside the step (c->blas_off), made when first needed on the plan's
 * library workspace: the step's pinned table stays what the step ran */
static int blas_outside_step(cuda_ctx *c, const sg_plan *p) {
    if (c->blas_off) return SG_OK;
    const sg_graph *g = &p->g;
    const int cw = sg_find_tensor(g, SG_CUBLAS_WS_NAME);
    if (cw < 0) return sg_set_error("the plan has no library workspace");
    return sg_blas_create(&c->blas_off, c->st, c->arena + g->t[cw].offset, g->t[cw].bytes);
}

/* One plain cuBLASLt GEMM of the given size (backend.h: time_gemm), on the outside-the-step
 * table. Its operands are one temporary cudaMalloc made and freed here, not the arena: the
 * largest same-size GEMM of unet_cifar b128 (a 3x3 conv's weight gradient, K = N*Ho*Wo)
 * needs A and B as large as an im2col of the layer, which no arena tensor is, and arena
 * memory belongs to the step's state (parameters, moments) that a measurement must not
 * overwrite. The operands are filled with a fixed random pattern (all-zero matrices can run
 * at clocks real data does not), one untimed run picks the algorithm, then `reps` runs are
 * timed between two events and averaged. */
int cuda_time_gemm(sg_backend *be, const sg_plan *p, int64_t m, int64_t n, int64_t k, int dtype,
                   float *ms) {
    cuda_ctx *c = be->ctx;
    *ms = -1;
    if (m <= 0 || n <= 0 || k <= 0 || m > INT32_MAX || n > INT32_MAX || k > INT32_MAX)
        return sg_set_error("time_gemm: GEMM m=%lld n=%lld k=%lld out of range", (long long)m,
                            (long long)n, (long long)k);
    if (dtype != DT_BF16 && dtype != DT_F32)
        return sg_set_error("time_gemm: dtype %d is not bf16 or fp32", dtype);
    if (blas_outside_step(c, p)) return SG_ERR;
    const size_t es = dtype == DT_BF16 ? 2 : 4, na = (size_t)(m * k), nb = (size_t)(n * k);
    const size_t total = (na + nb + (size_t)(m * n)) * es;
    unsigned char *buf = NULL;
    if (cudaMalloc((void **)&buf, total) != cudaSuccess) {
        cudaGetLastError();
        return sg_set_error("time_gemm: no %.1f MiB of device memory for a GEMM m=%lld n=%lld "
                            "k=%lld",
                            total / 1048576.0, (long long)m, (long long)n, (long long)k);
    }
    /* a 1 MiB random pattern copied over A and B */
    enum { PAT = 1 << 20 };
    unsigned char *pat = malloc(PAT);
    int rc = pat ? SG_OK : sg_set_error("out of host memory");
    for (size_t i = 0; !rc && i < PAT / es; i++) {
        const float v = sg_rng_uniform(1, 0, SG_RNG_INIT, i) - 0.5f;
        if (dtype == DT_BF16)
            ((sg_bf16 *)pat)[i] = sg_f32_to_bf16(v);
        else
            ((float *)pat)[i] = v;
    }
    const size_t ab = (na + nb) * es;
    for (size_t off = 0; !rc && off < ab; off += PAT)
        if (cudaMemcpyAsync(buf + off, pat, ab - off < PAT ? ab - off : PAT, cudaMemcpyHostToDevice,
                            c->st) != cudaSuccess)
            rc = sg_set_error("time_gemm: %s", cudaGetErrorString(cudaGetLastError()));
    if (!rc && cudaStreamSynchronize(c->st) != cudaSuccess)
        rc = sg_set_error("time_gemm: %s", cudaGetErrorString(cudaGetLastError()));
    free(pat);
    const void *A = buf, *B = buf + na * es;
    void *C = buf + (na + nb) * es;
    const int reps = 3;
    if (!rc)
        rc = sg_blas_gemm_rowmajor_nt(c->blas_off, c->st, (int)m, (int)n, (int)k, dtype, A, B, C);
    const int timed = !rc && !(rc = sg_cuda_window_begin(&c->win, c->st, c->ev[0]));
    for (int r = 0; r < reps && !rc; r++)
        rc = sg_blas_gemm_rowmajor_nt(c->blas_off, c->st, (int)m, (int)n, (int)k, dtype, A, B, C);
    float t = 0;
    if (!rc)
        rc = sg_cuda_window_end(&c->win, c->st, c->ev[0], c->ev[1], &t);
    else if (timed)
        sg_cuda_window_cancel(&c->win);
    cudaStreamSynchronize(c->st); /* nothing may still read buf when it is freed */
    cudaFree(buf);
    if (!rc) *ms = t / reps;
    return rc;
}

/* backend.h: tune_gemms. The step's own GEMM table is frozen; its entries are timed through it
 * (sg_blas_time_algos: scratch operands, the table's workspace), the pinned algorithms stay. */
int cuda_tune_gemms(sg_backend *be, const sg_plan *p, int reps, double min_gain, sg_engine_table *t,
                    int *timed) {
    cuda_ctx *c = be->ctx;
    (void)p;
    *timed = 0;
    enum { MOST = 16 };
    float ms[MOST];
    uint64_t ids[MOST];
    for (int i = 0; i < sg_blas_count(c->blas); i++) {
        char key[SG_BLAS_KEY_MAX];
        int n = 0;
        if (sg_blas_key_text(c->blas, i, key, sizeof key) ||
            sg_blas_time_algos(c->blas, i, MOST, reps, &c->win, ms, ids, &n))
            return SG_ERR;
        if (n < 1 || ms[0] < 0) continue; /* the first unmeasured: nothing to compare with */
        int best = 0;
        for (int k = 1; k < n; k++)
            if (ms[k] >= 0 && ms[k] < ms[best]) best = k;
        if (ms[best] > (1.0 - min_gain) * ms[0]) best = 0;
        if (sg_engine_table_set_gemm(t, key, ids[best], ms[best], ms[0])) return SG_ERR;
        ++*timed;
    }
    return SG_OK;
}

/* Would the wgmma kernels run conv-like node i (a conv pass, the residual-add or shortcut-fold
 * forward, an upsample conv's pass)? The operands its launcher would give conv_on_wgmma or
 * upconv_on_wgmma (the CUDA_RUN functions above), checked without a launch: time_node_engine's
 * wgmma side times nothing that would silently run on mma.sync. */
static int node_on_wgmma(cuda_ctx *c, const sg_plan *p, int i) {
    const sg_graph *g = &p->g;
    const sg_node *nd = &g->n[i];
    if (!c->wgmma_ok || g->t[nd->in[0]].dtype != DT_BF16) return 0;
    const cuda_call k = {.c = c,
                         .g = g,
                         .nd = nd,
                         .engine = CONV_ENGINE_WGMMA,
                         .ws = c->ws,
                         .wsb = c->ws_bytes,
                         .dt = DT_BF16,
                         .dy_dt = DT_BF16};
    sg_conv_fuse f;
    switch (nd->op) {
    case OP_UPCONV2D:
        return upconv_on_wgmma(&k, kin(&k, 0), kout(&k, 0), k.ws);
    case OP_UPCONV2D_BWD_DATA:
        return upconv_on_wgmma(&k, kout(&k, 0), kin(&k, 0), k.ws);
    case OP_UPCONV2D_BWD_WEIGHT:
        return upconv_on_wgmma(&k, kin(&k, 1), kin(&k, 0), NULL);
    default:
        break;
    }
    const sg_conv_dims d = sg_conv_dims_of(g, nd);
    switch (nd->op) {
    case OP_CONV2D:
    case OP_CONV2D_ADD:
        return conv_on_wgmma(&k, d, conv_input(c, g, nd->in[0], &f), kout(&k, 0), kin(&k, 1),
                             DT_BF16);
    case OP_CONV2D_SC:
        return conv_on_wgmma(&k, d, conv_input(c, g, nd->in[0], &f), kout(&k, 0), kin(&k, 1),
                             DT_BF16) &&
               cuda_conv2d_wgmma_refusal(CAT(c, g, nd->in[3]), kout(&k, 0), kin(&k, 4), d.N, d.H,
                                         d.W, d.Co, 1, 1, DT_BF16) == NULL;
    case OP_CONV2D_BWD_DATA:
        return conv_on_wgmma(&k, d, kout_cat(&k, 0), kin(&k, 0), kin(&k, 1), DT_BF16);
    case OP_CONV2D_BWD_WEIGHT:
        return conv_on_wgmma(&k, d, conv_input(c, g, nd->in[1], &f), kin(&k, 0), NULL, DT_BF16);
    default:
        return 0;
    }
}

/* An attention node on the GEMM path or the fused kernels (SG_TIME_ATTN_*): -1 where it is no
 * attention node or the fused kernels do not take its shape. Off the step's engine, the GEMM
 * path's algorithms come from the outside-the-step table, and one untimed run picks them. */
static int time_attention_engine(sg_backend *be, const sg_plan *p, int node, int fused, float *ms) {
    cuda_ctx *c = be->ctx;
    if (node < 0 || node >= p->g.nn) return SG_OK;
    const sg_node *nd = &p->g.n[node];
    if (!sg_op_is_attention(nd->op)) return SG_OK;
    if (fused && !attn_node_fusable(&p->g, node)) return SG_OK;
    const int step = c->attn_fused;
    sg_blas *blas = NULL;
    int rc = SG_OK;
    c->attn_fused = fused;
    if (fused != step) {
        rc = blas_outside_step(c, p);
        blas = c->blas_off;
        if (!rc) rc = cuda_run_node_on(be, p, node, 0, blas);
    }
    if (!rc && !(rc = sg_cuda_window_begin(&c->win, c->st, c->ev[0]))) {
        rc = cuda_run_node_on(be, p, node, 0, blas);
        if (!rc)
            rc = sg_cuda_window_end(&c->win, c->st, c->ev[0], c->ev[1], ms);
        else
            sg_cuda_window_cancel(&c->win);
    }
    c->attn_fused = step;
    if (rc) *ms = -1;
    return rc;
}

int cuda_time_node_engine(sg_backend *be, const sg_plan *p, int node, int engine, float *ms) {
    cuda_ctx *c = be->ctx;
    *ms = -1;
    if (engine == SG_TIME_ATTN_GEMM || engine == SG_TIME_ATTN_FUSED)
        return time_attention_engine(be, p, node, engine == SG_TIME_ATTN_FUSED, ms);
    if (node < 0 || node >= p->g.nn || !c->node_eng) return SG_OK;
    /* node_eng 0: no conv node, or an own-only one (a shortcut fold, an upsample conv's pass) on
     * mma.sync, which only its wgmma side times (on the halo or per tap too) */
    const int wg_side = engine == SG_TIME_OWN_WGMMA || engine == SG_TIME_WGMMA_HALO ||
                        engine == SG_TIME_WGMMA_PER_TAP;
    if (!c->node_eng[node] && !(wg_side && node_on_wgmma(c, p, node))) return SG_OK;
    /* a wgmma node under another schedule: one untimed run, then the timed one, then the
     * step's schedule again (the same bits every way) */
    if (engine >= SG_TIME_WGMMA_SCHED && engine < SG_TIME_WGMMA_SCHED + SG_WG_SCHEDS) {
        if (c->node_eng[node] != CONV_ENGINE_WGMMA) return SG_OK;
        const int force = c->wg_force;
        c->wg_force = engine - SG_TIME_WGMMA_SCHED;
        wg_sched_apply(c, -1);
        int rc = cuda_run_node_on(be, p, node, CONV_ENGINE_WGMMA, NULL);
        if (!rc && !(rc = sg_cuda_window_begin(&c->win, c->st, c->ev[0]))) {
            rc = cuda_run_node_on(be, p, node, CONV_ENGINE_WGMMA, NULL);
            if (!rc)
                rc = sg_cuda_window_end(&c->win, c->st, c->ev[0], c->ev[1], ms);
            else
                sg_cuda_window_cancel(&c->win);
        }
        c->wg_force = force;
        wg_sched_apply(c, -1);
        if (rc) *ms = -1;
        return rc;
    }
    /* own with the Winograd form switched on, or off, where it takes the node (the kernels
     * count its launches); the step's switch again after */
    if (engine == SG_TIME_OWN_WINO || engine == SG_TIME_OWN_DIRECT) {
        if (!wino_node(p, node)) return SG_OK;
        const long w0 = cuda_conv_wino_launches();
        c->wino_force = engine == SG_TIME_OWN_WINO;
        const int rc = cuda_time_node_engine(be, p, node, SG_CONV_ENGINE_OWN, ms);
        c->wino_force = -1;
        if (engine == SG_TIME_OWN_WINO && cuda_conv_wino_launches() == w0) *ms = -1;
        return rc;
    }
    /* own on the direct tiles, their products on the tensor cores or the CUDA cores (the kernels
     * count the tensor-core launches); the step's switches again after */
    _Static_assert(SG_TIME_WGMMA_SCHED + SG_WG_SCHEDS <= SG_TIME_OWN_TILES_TC,
                   "the timing codes overlap");
    if (engine == SG_TIME_OWN_TILES_TC || engine == SG_TIME_OWN_TILES_FMA) {
        if (!tiles_node(p, node)) return SG_OK;
        const int tc = engine == SG_TIME_OWN_TILES_TC;
        const long t0 = cuda_conv_f32_tc_launches();
        c->wino_force = 0, c->f32tc_force = tc;
        const int rc = cuda_time_node_engine(be, p, node, SG_CONV_ENGINE_OWN, ms);
        c->wino_force = c->f32tc_force = -1;
        if (tc && cuda_conv_f32_tc_launches() == t0) *ms = -1;
        return rc;
    }
    /* own on the wgmma kernels with every forward and stride-1 3x3 data gradient on its
     * resident-halo kernel, or every one per tap; the halo's time only where a call took one
     * (the kernels count them) */
    if (engine == SG_TIME_WGMMA_HALO || engine == SG_TIME_WGMMA_PER_TAP) {
        const int halo = engine == SG_TIME_WGMMA_HALO, mode = c->tc_halo;
        const long h0 = cuda_conv_wgmma_halo_forwards() + cuda_conv_wgmma_halo_dgrads();
        c->tc_halo = halo ? SG_TC_HALO_ALL : SG_TC_HALO_NONE;
        cuda_conv_wgmma_dgrad_halo(halo);
        const int rc = cuda_time_node_engine(be, p, node, SG_TIME_OWN_WGMMA, ms);
        c->tc_halo = mode;
        cuda_conv_wgmma_dgrad_halo(c->wg_dgrad_halo);
        if (halo && cuda_conv_wgmma_halo_forwards() + cuda_conv_wgmma_halo_dgrads() == h0) *ms = -1;
        return rc;
    }
    if (engine != SG_CONV_ENGINE_OWN && engine != SG_CONV_ENGINE_CUDNN &&
        engine != SG_TIME_OWN_WGMMA)
        return sg_set_error("time_node_engine: engine %d is not own, cudnn, own on wgmma (on the "
                            "halo or per tap) or a wgmma schedule",
                            engine);
    /* own on the wgmma kernels: where they take the node as its launcher would call them */
    if (engine == SG_TIME_OWN_WGMMA) {
        if (!node_on_wgmma(c, p, node)) return SG_OK;
        engine = CONV_ENGINE_WGMMA;
    }
    /* the library side: cuDNN only where prepare pinned it (after the warm-up nothing new may
     * be chosen); a 1x1 node on the GEMM engine is its library side, and so is the GEMM for a
     * 1x1 forward auto put on own (FWD_1X1_OWN, backend_cuda_engines.c's file comment: the
     * per-layer table keeps showing both) */
    if (engine == SG_CONV_ENGINE_CUDNN &&
        (c->node_eng[node] == CONV_ENGINE_GEMM ||
         (c->conv_engine == SG_CONV_ENGINE_AUTO && on_own(c->node_eng[node]) &&
          fwd_1x1_own(c, &p->g, node))))
        engine = CONV_ENGINE_GEMM;
    /* the own side of a node on the wgmma kernels is those kernels */
    if (engine == SG_CONV_ENGINE_OWN && c->node_eng[node] == CONV_ENGINE_WGMMA)
        engine = CONV_ENGINE_WGMMA;
    if (engine == SG_CONV_ENGINE_CUDNN && c->node_eng[node] != SG_CONV_ENGINE_CUDNN) return SG_OK;
    /* a node run off its engine may need GEMMs the frozen step table never saw: they go to a
     * second table, outside the step's, and one untimed run first picks their algorithms (host
     * work that would otherwise sit between the two events) */
    sg_blas *blas = NULL;
    if (engine != c->node_eng[node]) {
        if (blas_outside_step(c, p)) return SG_ERR;
        blas = c->blas_off;
        if (cuda_run_node_on(be, p, node, engine, blas)) return SG_ERR;
    }
    if (sg_cuda_window_begin(&c->win, c->st, c->ev[0])) return SG_ERR;
    if (cuda_run_node_on(be, p, node, engine, blas)) {
        sg_cuda_window_cancel(&c->win);
        return SG_ERR;
    }
    return sg_cuda_window_end(&c->win, c->st, c->ev[0], c->ev[1], ms);
}

#else
typedef int sg_backend_cuda_time_unused; /* ISO C forbids an empty translation unit */
#endif
