/* backend_cuda.c — the CUDA backend: one cudaMalloc for the arena, the plan's schedule run with
 * kernels/cuda, and the whole training step captured once into a CUDA graph and replayed.
 *
 * Life of a training run: prepare() checks the free GPU memory against the plan (and says how
 * much it needs and how much is free before allocating anything), allocates the arena and zeroes
 * it, creates one stream and the GEMM context (sg_blas: cuBLASLt on that stream, its workspace
 * inside the arena; a plain cuBLAS handle is kept only to measure the matmul peak). The first
 * run_step() runs the schedule eagerly (a real step: warm-up and validation, during which each
 * distinct GEMM's algorithm is chosen and pinned), freezes the GEMM table, then captures the
 * same launches into a graph, instantiates and uploads it; every later run_step() is one
 * cudaGraphLaunch. A GEMM the warm-up did not pin is an error from then on. Nothing in the step
 * depends on a host value: step counter, seed, timesteps, noise, dropout masks and batch indices
 * are read or computed on the device.
 *
 * Data parallel (docs/data-parallel.md): with a communicator (be->dist) the random draws start
 * at this rank's global offsets, and the plan's OP_ALLREDUCE is one grouped NCCL launch on the
 * step's stream (gradients summed, the loss averaged), captured into the graph like any
 * kernel. The NCCL communicator is made in prepare() from rank 0's unique id, broadcast over
 * the dist communicator (MPI). Built without NCCL (SG_HAVE_NCCL unset), a plan for more than
 * one rank is refused and a one-rank plan's all-reduce is the identity (the loss x 1/1).
 *
 * The backend is four files around one context (graph/backend_cuda_ctx.h): this one (the life of
 * a run above: prepare, the eager step, the capture, the replays, describe), the conv engines'
 * choice (backend_cuda_engines.c, whose file comment has the rules), the launchers, one per op
 * (backend_cuda_run.c), and the timing hooks bench and the engine tuning call
 * (backend_cuda_time.c).
 */
#ifdef SG_HAVE_CUDA

#include "graph/backend_cuda_ctx.h"

int sg_cuda_available(void) {
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

int sg_cuda_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) cudaGetLastError(), n = 0;
    return n;
}

/* The NCCL communicator of a plan with an all-reduce: rank 0 makes the unique id, the dist
 * communicator (MPI) carries it to every rank, every rank joins. Collective: every rank of the
 * plan calls it. */
static int prepare_allreduce(sg_backend *be, const sg_plan *p) {
    cuda_ctx *c = be->ctx;
    c->rank = be->dist ? be->dist->rank : 0;
    int ranks = 0;
    for (int i = 0; i < p->g.nn; i++)
        if (p->g.n[i].op == OP_ALLREDUCE) ranks = p->g.n[i].a.allreduce.ranks;
    if (!ranks) return SG_OK;
    const int size = be->dist ? be->dist->size : 1;
    if (size != ranks)
        return sg_set_error("the plan is for %d ranks but this process is one of %d", ranks, size);
#ifdef SG_HAVE_NCCL
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (c->rank == 0) NC(ncclGetUniqueId(&id));
    if (be->dist && be->dist->bcast(be->dist, &id, (int64_t)sizeof id)) return SG_ERR;
    NC(ncclCommInitRank(&c->nccl, size, id, c->rank));
    return SG_OK;
#else
    if (size > 1)
        return sg_set_error("this build has no NCCL: the CUDA backend cannot all-reduce over %d "
                            "ranks (rebuild with NCCL found, -DSG_NCCL_ROOT=DIR)",
                            size);
    return SG_OK;
#endif
}

/* The accumulate bits the launchers can honour. The CPU backend honours every bit of every
 * output; the CUDA launchers take one flag per backward output, shared by the two halves of a
 * concatenated output, by dw and db, and by dgamma and dbeta, and none for forward or optimizer
 * ops but the loss (mse: gradient accumulation adds the micro-batches' shares of the mean). A
 * plan asking for anything else is refused here, not computed differently. */
static int check_accum(const sg_graph *g) {
    for (int i = 0; i < g->nn; i++) {
        const sg_node *nd = &g->n[i];
        const char *why = NULL;
        for (int k = 0; k < nd->nout && !why; k++) {
            unsigned b = sg_accum_bits(nd, k);
            if (g->t[nd->out[k]].nparts && (b == 1u || b == 2u))
                why = "the two halves of a concatenated output differ in accumulation";
        }
        /* the loss is the one forward output that accumulates: over the micro-batches */
        if (!why && nd->accum && !sg_op_is_loss(nd->op) &&
            (sg_op_is_forward(nd->op) || sg_op_is_optimizer(nd->op)))
            why = "a forward or optimizer op accumulates";
        if (!why &&
            (nd->op == OP_LINEAR_BWD_WEIGHT || nd->op == OP_CONV2D_BWD_WEIGHT ||
             nd->op == OP_UPCONV2D_BWD_WEIGHT) &&
            sg_accum_bits(nd, 1) != sg_accum_bits(nd, 0))
            why = "dw and db differ in accumulation";
        if (!why && nd->op == OP_GROUP_NORM_BWD && sg_accum_bits(nd, 2) != sg_accum_bits(nd, 1))
            why = "dgamma and dbeta differ in accumulation";
        if (!why && (nd->op == OP_NORM_ACT_BWD || nd->op == OP_NORM_ACT_TEMB_BWD)) {
            const int k = nd->op == OP_NORM_ACT_TEMB_BWD ? 2 : 1; /* dgamma's slot */
            if (sg_accum_bits(nd, k + 1) != sg_accum_bits(nd, k))
                why = "dgamma and dbeta differ in accumulation";
        }
        if (why)
            return sg_set_error("node %d (%s -> %s): %s, which the CUDA kernels do not support", i,
                                sg_ops[nd->op].name, g->t[nd->out[0]].name, why);
    }
    return SG_OK;
}

static int cuda_prepare(sg_backend *be, const sg_plan *p) {
    cuda_ctx *c = be->ctx;
    const sg_graph *g = &p->g;
    if (check_accum(g)) return SG_ERR;
    CU(cudaSetDevice(c->dev));
    size_t free_b = 0, total_b = 0;
    CU(cudaMemGetInfo(&free_b, &total_b));
    /* the arena and a margin for what the CUDA libraries allocate themselves (handles, the
     * graph's executable), both said: the arena alone may fit where the two do not */
    const uint64_t margin = 64u << 20;
    if ((uint64_t)p->arena_bytes + margin > free_b)
        return sg_set_error("the plan needs %.2f GiB on the GPU (arena %lld bytes, and %llu MiB "
                            "for the CUDA libraries' own) but only %.2f GiB of %.2f GiB are free: "
                            "try a smaller --batch%s",
                            (p->arena_bytes + margin) / 1073741824.0, (long long)p->arena_bytes,
                            (unsigned long long)(margin >> 20), free_b / 1073741824.0,
                            total_b / 1073741824.0,
                            p->cfg.act_dt == DT_F32 ? ", or --precision bf16" : "");
    CU(cudaMalloc((void **)&c->arena, (size_t)p->arena_bytes));
    c->arena_bytes = p->arena_bytes;
    CU(cudaMemset(c->arena, 0, (size_t)p->arena_bytes));
    CU(cudaStreamCreateWithFlags(&c->st, cudaStreamNonBlocking));
    CU(cudaEventCreate(&c->ev[0]));
    CU(cudaEventCreate(&c->ev[1]));
    sg_cuda_window_init(&c->win);
    CB(cublasCreate(&c->cb));
    CB(cublasSetStream(c->cb, c->st));
    /* fp32 math only: no TF32 (CUBLAS_DEFAULT_MATH does not allow it), and split-K partial
     * sums of a bf16 output are reduced in fp32, not rounded to bf16 on the way */
    CB(cublasSetMathMode(c->cb,
                         CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
    int cw = sg_find_tensor(g, SG_CUBLAS_WS_NAME), kw = sg_find_tensor(g, SG_KERNEL_WS_NAME);
    if (cw < 0 || kw < 0) return sg_set_error("the plan has no workspace tensors");
    CB(cublasSetWorkspace(c->cb, c->arena + g->t[cw].offset, (size_t)g->t[cw].bytes));
    if (sg_blas_create(&c->blas, c->st, c->arena + g->t[cw].offset, g->t[cw].bytes)) return SG_ERR;
    c->gemm_epi = sg_blas_bias_epilogue(c->blas);
    /* the engine table's GEMM algorithms (the tuning's timed picks), asked for before any GEMM
     * is pinned */
    for (int i = 0; p->cfg.engines && i < p->cfg.engines->ngemm; i++)
        if (sg_blas_prefer(c->blas, p->cfg.engines->gemm[i].key, p->cfg.engines->gemm[i].algo))
            return SG_ERR;
    c->ws = c->arena + g->t[kw].offset;
    c->ws_bytes = g->t[kw].bytes;
    c->rank = be->dist ? be->dist->rank : 0;
    if (check_fused_operands(c, g)) return SG_ERR;
    /* SG_PDL unset: the engine table's knob (the tuning's timed choice), where it sets one */
    const char *pdl_env = getenv("SG_PDL");
    if ((!pdl_env || !*pdl_env) && p->cfg.engines && p->cfg.engines->knobs.pdl >= 0)
        c->pdl = p->cfg.engines->knobs.pdl && c->pdl_ok;
    /* SG_ATTN unset: the engine table's attention engine (the tuning's timed choice) */
    const char *attn_env = getenv("SG_ATTN");
    if ((!attn_env || !*attn_env) && p->cfg.engines)
        c->attn_fused = p->cfg.engines->attn == SG_ATTN_FUSED;
    c->attn_fused_nodes = 0;
    for (int i = 0; c->attn_fused && i < g->nn; i++) c->attn_fused_nodes += attn_node_fusable(g, i);
    /* SG_NORM_ONEPASS unset: likewise (prepare_norm_stats reads it) */
    const char *onepass_env = getenv("SG_NORM_ONEPASS");
    if ((!onepass_env || !*onepass_env) && p->cfg.engines &&
        p->cfg.engines->knobs.norm_onepass >= 0)
        c->norm_onepass = p->cfg.engines->knobs.norm_onepass;
    if (prepare_norm_stats(c, g, p->cfg.engines)) return SG_ERR;
    if (prepare_linear_groups(c, g)) return SG_ERR;
    if (!sg_plan_bf16_copy(p, &c->copy_param_off, &c->copy_n, &c->copy_off)) c->copy_n = 0;
    if (prepare_conv_engines(be, p, c->arena + g->t[cw].offset, g->t[cw].bytes)) return SG_ERR;
    unpair_stats_after(c, g);
    CU(cudaDeviceSynchronize());
    return prepare_allreduce(be, p);
}

/* Host <-> arena copies go on the step's stream, so they are ordered with the kernels before
 * and after them: a plain cudaMemcpy runs on the legacy default stream, which does not wait
 * for work on a non-blocking stream (cudaStreamNonBlocking), so an upload could overwrite
 * what a running step still reads, or a download read a half-written tensor. The host
 * buffers are pageable; waiting for the stream before returning lets the caller reuse or
 * read them at once. */
static int cuda_upload(sg_backend *be, int64_t off, const void *src, int64_t bytes) {
    cuda_ctx *c = be->ctx;
    if (off < 0 || off + bytes > c->arena_bytes) return sg_set_error("upload outside the arena");
    CU(cudaMemcpyAsync(c->arena + off, src, (size_t)bytes, cudaMemcpyHostToDevice, c->st));
    /* parameters written: their bf16 copy follows, element for element (graph/backend.h) */
    int64_t i0, n;
    if (sg_backend_param_span(c->copy_param_off, c->copy_n, off, bytes, &i0, &n) &&
        cuda_copy(c->st, c->arena + c->copy_off + 2 * i0, DT_BF16,
                  c->arena + c->copy_param_off + 4 * i0, DT_F32, n, 0))
        return SG_ERR;
    CU(cudaStreamSynchronize(c->st));
    return SG_OK;
}

static int cuda_download(sg_backend *be, int64_t off, void *dst, int64_t bytes) {
    cuda_ctx *c = be->ctx;
    if (off < 0 || off + bytes > c->arena_bytes) return sg_set_error("download outside the arena");
    CU(cudaMemcpyAsync(dst, c->arena + off, (size_t)bytes, cudaMemcpyDeviceToHost, c->st));
    CU(cudaStreamSynchronize(c->st));
    return SG_OK;
}

/* The captured graph's shape, for describe(). A straight line (one root, one edge into each
 * later node, kernels, memsets and copies alone) is what CUDA's drivers launch in constant
 * time; a fork a library made inside its call, a child graph or an event node makes a launch
 * cost per node. The third GPU session measured 270 us a launch at batch 128 against 27 us at
 * batch 8, for 849 and 725 nodes: this says which graph is not a line. The fourth found every
 * graph a line; what differs is the memset nodes the libraries capture (69 at batch 128, 6 at
 * batch 8). Diagnostics only: a query that fails leaves -1, and no error behind it for the
 * step's own checks. */
static void graph_shape_unknown(cuda_ctx *c) {
    c->graph_roots = c->graph_edges = -1;
    for (int k = 0; k < 4; k++) c->graph_types[k] = -1;
}
/* graph's n commands by type (kernel, memset, memcpy, other) into types; -1 each where a query
 * fails (diagnostics: the error is cleared) */
void graph_types(cudaGraph_t graph, size_t n, int types[4]) {
    cudaGraphNode_t *nodes = n ? malloc(sizeof *nodes * n) : NULL;
    int t4[4] = {0, 0, 0, 0},
        ok = !n || (nodes && cudaGraphGetNodes(graph, nodes, &n) == cudaSuccess);
    for (size_t i = 0; ok && i < n; i++) {
        enum cudaGraphNodeType t;
        if (!(ok = cudaGraphNodeGetType(nodes[i], &t) == cudaSuccess)) break;
        t4[t == cudaGraphNodeTypeKernel   ? 0
           : t == cudaGraphNodeTypeMemset ? 1
           : t == cudaGraphNodeTypeMemcpy ? 2
                                          : 3]++;
    }
    for (int k = 0; k < 4; k++) types[k] = ok ? t4[k] : -1;
    free(nodes);
    (void)cudaGetLastError();
}
static void graph_shape(cuda_ctx *c, cudaGraph_t graph) {
    graph_shape_unknown(c);
    size_t n = 0;
    if (cudaGraphGetRootNodes(graph, NULL, &n) == cudaSuccess) c->graph_roots = (int)n;
    if (cudaGraphGetEdges(graph, NULL, NULL, NULL, &n) == cudaSuccess) c->graph_edges = (int)n;
    graph_types(graph, (size_t)c->graph_nodes, c->graph_types);
}

/* SG_GRAPH_LAUNCH=device at the capture: the step's graph instantiated for device launch into
 * c->exec, and the launcher graph that tail-launches it (graph_launch 2). Where the driver refuses
 * the device instantiation (a node it cannot launch from the device), the host launch instead
 * (graph_launch -1, a line on stderr, c->exec left to the caller); SG_ERR where the launcher
 * cannot be built. */
static int device_launch_setup(cuda_ctx *c, cudaGraph_t graph) {
    const cudaError_t e =
        cudaGraphInstantiateWithFlags(&c->exec, graph, cudaGraphInstantiateFlagDeviceLaunch);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        c->exec = NULL;
        c->graph_launch = -1;
        fprintf(stderr,
                "stepgraph: SG_GRAPH_LAUNCH=device: the step's graph cannot be instantiated for "
                "device launch (%s): launched from the host\n",
                cudaGetErrorString(e));
        return SG_OK;
    }
    CU(cudaMalloc((void **)&c->launch_status, sizeof(int)));
    CU(cudaMemsetAsync(c->launch_status, 0, sizeof(int), c->st));
    if (sg_cuda_graph_launcher(&c->launcher, c->exec, c->launch_status)) return SG_ERR;
    CU(cudaGraphInstantiate(&c->launcher_exec, c->launcher, 0));
    c->graph_launch = 2;
    return SG_OK;
}

/* capture the schedule's launches into one graph; nothing runs while capturing */
static int capture(sg_backend *be, const sg_plan *p) {
    cuda_ctx *c = be->ctx;
    CU(cudaStreamBeginCapture(c->st, cudaStreamCaptureModeThreadLocal));
    int rc = run_eager(be, p);
    cudaGraph_t graph = NULL;
    cudaError_t e = cudaStreamEndCapture(c->st, &graph);
    if (rc) {
        if (graph) cudaGraphDestroy(graph);
        return SG_ERR;
    }
    if (e != cudaSuccess)
        return sg_set_error("capturing the step into a CUDA graph failed: %s (something in the "
                            "step synchronised or allocated)",
                            cudaGetErrorString(e));
    c->graph = graph;
    size_t nodes = 0;
    CU(cudaGraphGetNodes(graph, NULL, &nodes));
    graph_types(graph, nodes, c->graph_types_captured);
    if (c->graph_memsets && c->graph_types_captured[1] != 0) {
        CU(cudaGraphClone(&c->graph_captured, graph));
        if (sg_cuda_graph_memsets_to_kernels(graph, &c->memsets_replaced, &c->memsets_kept)) {
            /* a driver that refuses an edit: the graph as captured, which the step ran before
             * this rewrite existed, with a line saying why (describe: none replaced) */
            fprintf(stderr, "stepgraph: the step's memset nodes stay as captured: %s\n",
                    sg_last_error());
            (void)cudaGetLastError();
            cudaGraphDestroy(graph);
            graph = c->graph = c->graph_captured;
            c->graph_captured = NULL;
            c->memsets_replaced = 0;
            c->memsets_kept = c->graph_types_captured[1];
        }
        if (!c->memsets_replaced && c->graph_captured) {
            cudaGraphDestroy(c->graph_captured);
            c->graph_captured = NULL;
        }
        CU(cudaGraphGetNodes(graph, NULL, &nodes));
    }
    c->graph_nodes = (int)nodes;
    graph_shape(c, graph);
    if (c->graph_launch == 1 && device_launch_setup(c, graph)) return SG_ERR;
    if (c->graph_launch != 2) CU(cudaGraphInstantiate(&c->exec, graph, 0));
    CU(cudaGraphUpload(c->exec, c->st));
    if (c->graph_launch == 2) CU(cudaGraphUpload(c->launcher_exec, c->st));
    CU(cudaStreamSynchronize(c->st));
    return SG_OK;
}

int cuda_run_step(sg_backend *be, const sg_plan *p) {
    cuda_ctx *c = be->ctx;
    if (!c->use_graph || c->steps_run == 0) {
        /* eager: always when graphs are off; otherwise the first (warm-up) step, begun on an
         * idle stream, so that work the caller issued before it (the sampler's start: nodes
         * run one by one) is not taken for part of the step the graph will capture (the host
         * execution compares the capture with exactly this eager step) */
        if (c->use_graph && c->steps_run == 0) CU(cudaStreamSynchronize(c->st));
        /* SG_PROFILE_FIRST_STEP=1: the first step alone inside a profiler collection range
         * (ncu --profile-from-start off, nsys --capture-range=cudaProfilerApi:
         * tools/gpu_profile.sh): its kernels are every replay's, in the same order */
        const int prof = c->steps_run == 0 && c->profile_first;
        if (prof) CU(cudaProfilerStart());
        if (run_eager(be, p)) return SG_ERR;
        if (prof) {
            CU(cudaStreamSynchronize(c->st));
            CU(cudaProfilerStop());
        }
        CU(cudaGetLastError());
        /* every GEMM of the step has its algorithm now: no other may appear (see sg_blas) */
        sg_blas_freeze(c->blas);
#ifdef SG_HAVE_CUDNN
        sg_cudnn_freeze(c->dnn); /* likewise every cuDNN convolution's engine */
#endif
        if (c->use_graph) {
            CU(cudaStreamSynchronize(c->st)); /* validation: the eager step completed */
            if (capture(be, p)) return SG_ERR;
        }
    } else {
        /* SG_GRAPH_LAUNCH=device: one node, which tail-launches the step */
        CU(cudaGraphLaunch(c->graph_launch == 2 ? c->launcher_exec : c->exec, c->st));
    }
    c->steps_run++;
    return SG_OK;
}

static int cuda_sync(sg_backend *be) {
    cuda_ctx *c = be->ctx;
    CU(cudaStreamSynchronize(c->st));
    /* a device-side launch of the step that failed: its error, never a step taken as run */
    if (c->graph_launch == 2) {
        int status = 0;
        CU(cudaMemcpyAsync(&status, c->launch_status, sizeof status, cudaMemcpyDeviceToHost,
                           c->st));
        CU(cudaStreamSynchronize(c->st));
        if (status)
            return sg_set_error("the step's graph failed to launch from the device: %s "
                                "(SG_GRAPH_LAUNCH=host launches it from the host)",
                                cudaGetErrorString((cudaError_t)status));
    }
    return SG_OK;
}
/* The backend's record (bench's "env", the checkpoint's): the device and libraries, the engines
 * and their tables, and the schedule knobs that leave the bits alone but not the speed
 * (SG_TC_HALO as tc_halo, SG_TC_DGRAD_STATS as dgrad_stats; SG_WG_PERSIST and SG_WG_FILL as
 * wg_persist and wg_fill: 0 off, else the blocks of the persistent grid or the SMs the tile width
 * fills; wg_layer_nodes: the wgmma nodes under their layer's own schedule instead;
 * SG_WG_DGRAD_HALO as wg_dgrad_halo; env_knobs: every knob of backend.h's list that is set, with
 * its value), so that a measurement says what it ran. */
/* The knobs set, "NAME=value" space-separated into buf (a value's characters outside a plain set
 * shown as '?', and at most 32 of them: the record is JSON) */
static void env_knobs_set(char *buf, size_t cap) {
    buf[0] = 0;
    for (int k = 0; k < SG_N_CUDA_ENV_KNOBS; k++) {
        const char *v = getenv(sg_cuda_env_knobs[k]);
        if (!v || !*v) continue;
        char val[33];
        int n = 0;
        for (; v[n] && n < 32; n++)
            val[n] = isalnum((unsigned char)v[n]) || strchr("_.,:/+-", v[n]) ? v[n] : '?';
        val[n] = 0;
        const size_t used = strlen(buf);
        snprintf(buf + used, cap - used, "%s%s=%s", used ? " " : "", sg_cuda_env_knobs[k], val);
    }
}
static void cuda_describe(sg_backend *be, char *buf, int cap) {
    cuda_ctx *c = be->ctx;
    struct cudaDeviceProp prop;
    int rt = 0, drv = 0, cbv = 0;
    memset(&prop, 0, sizeof prop);
    cudaGetDeviceProperties(&prop, c->dev);
    cudaRuntimeGetVersion(&rt);
    cudaDriverGetVersion(&drv);
    if (c->cb) cublasGetVersion(c->cb, &cbv);
    int dnn_n = 0, dnn_frozen = 0, dnn_tf32 = 0, prefs_met = 0, prefs_missed = 0;
    int dnn_met = 0, dnn_missed = 0; /* the cuDNN engines asked for (a table, a resume) */
    sg_blas_preferences(c->blas, &prefs_met, &prefs_missed);
    size_t dnn_ver = 0;
    uint64_t dnn_hash = 0;
    char knobs[384];
    env_knobs_set(knobs, sizeof knobs);
#ifdef SG_HAVE_CUDNN
    dnn_n = sg_cudnn_count(c->dnn), dnn_frozen = sg_cudnn_frozen(c->dnn);
    dnn_ver = sg_cudnn_version(), dnn_hash = sg_cudnn_hash(c->dnn);
    dnn_tf32 = sg_cudnn_tf32(c->dnn);
    sg_cudnn_preferences(c->dnn, &dnn_met, &dnn_missed);
#endif
    snprintf(buf, (size_t)cap,
             "{\"backend\":\"cuda\",\"gpu\":\"%s\",\"sm_count\":%d,\"cc\":\"%d.%d\","
             "\"cuda_runtime\":%d,\"driver\":%d,\"cublas\":%d,\"cublaslt\":%zu,\"graph\":%s,"
             "\"graph_nodes\":%d,\"graph_roots\":%d,\"graph_edges\":%d,"
             "\"graph_node_types\":{\"kernel\":%d,\"memset\":%d,\"memcpy\":%d,\"other\":%d},"
             "\"graph_memsets\":\"%s\",\"graph_memsets_captured\":%d,\"graph_memsets_replaced\":%d,"
             "\"graph_memsets_kept\":%d,\"graph_launch\":\"%s\","
             "\"gemms_pinned\":%d,\"gemm_table_frozen\":%s,\"gemm_table_hash\":\"%016llx\","
             "\"gemm_prefs_met\":%d,\"gemm_prefs_missed\":%d,\"gemm_epilogue\":%s,"
             "\"gemm_epilogue_refused\":%d,"
             "\"conv_engine\":\"%s\",\"cudnn\":%zu,\"convs_cudnn\":%d,\"convs_gemm\":%d,"
             "\"convs_own\":%d,\"convs_wgmma\":%d,"
             "\"cudnn_plans\":%d,\"cudnn_table_frozen\":%s,\"cudnn_table_hash\":\"%016llx\","
             "\"cudnn_prefs_met\":%d,\"cudnn_prefs_missed\":%d,\"cudnn_tf32\":%s,"
             "\"attn_engine\":\"%s\",\"attn_fused_nodes\":%d,"
             "\"conv_tc\":\"%s\",\"norm_stats_fused\":%d,"
             "\"norm_stats_fused_fwd\":%d,\"pdl\":%s,\"tc_halo\":\"%s\",\"dgrad_stats\":%s,"
             "\"wg_persist\":%d,\"wg_fill\":%d,\"wg_dgrad_halo\":%s,"
             "\"norm_onepass\":%d,\"norm_bwd_onepass\":%d,"
             "\"conv_thin\":\"%s\",\"thin_own_nodes\":%d,\"f32_own_nodes\":%d,\"conv_wino\":\"%s\","
             "\"wino_nodes\":%d,\"conv_f32_tc\":\"%s\",\"f32tc_nodes\":%d,"
             "\"timing_windows\":%d,\"timing_host_bound\":%d,\"timing_hold_ms\":%.3f,"
             "\"timing_issue_max_ms\":%.3f,\"wg_layer_nodes\":%d,"
             "\"linear_groups\":%d,\"linear_group_nodes\":%d,\"env_knobs\":\"%s\"}",
             prop.name, prop.multiProcessorCount, prop.major, prop.minor, rt, drv, cbv,
             sg_blas_version(), c->use_graph ? "true" : "false", c->graph_nodes, c->graph_roots,
             c->graph_edges, c->graph_types[0], c->graph_types[1], c->graph_types[2],
             c->graph_types[3], c->graph_memsets ? "kernel" : "keep", c->graph_types_captured[1],
             c->memsets_replaced, c->memsets_kept,
             c->graph_launch == 2    ? "device"
             : c->graph_launch == -1 ? "host (device refused)"
             : c->graph_launch == 1  ? "device (not yet captured)"
                                     : "host",
             sg_blas_count(c->blas), sg_blas_frozen(c->blas) ? "true" : "false",
             (unsigned long long)sg_blas_hash(c->blas), prefs_met, prefs_missed,
             c->gemm_epi ? "true" : "false", sg_blas_refused(c->blas),
             sg_conv_engine_name(c->conv_engine), dnn_ver, c->convs_cudnn, c->convs_gemm,
             c->convs_own, c->convs_wgmma, dnn_n, dnn_frozen ? "true" : "false",
             (unsigned long long)dnn_hash, dnn_met, dnn_missed, dnn_tf32 ? "true" : "false",
             c->attn_fused ? "fused" : "gemm", c->attn_fused ? c->attn_fused_nodes : -1,
             !c->convs_wgmma                  ? "mma"
             : c->convs_wgmma == c->convs_own ? "wgmma"
                                              : "per-layer",
             c->stats_fused, c->stats_fused_fwd, c->pdl ? "true" : "false",
             c->tc_halo == SG_TC_HALO_ALL    ? "all"
             : c->tc_halo == SG_TC_HALO_NONE ? "none"
                                             : "prologue",
             c->dgrad_epilogue ? "true" : "false",
             c->wg_persist < 0 ? prop.multiProcessorCount : c->wg_persist,
             c->wg_fill < 0 ? prop.multiProcessorCount : c->wg_fill,
             c->wg_dgrad_halo ? "true" : "false",
             c->norm_onepass & SG_NORM_ONEPASS_FWD ? c->norm_onepass_nodes : -1,
             c->norm_onepass & SG_NORM_ONEPASS_BWD ? c->norm_bwd_onepass_nodes : -1,
             c->thin_own     ? "own"
             : c->thin_tiles ? "0"
                             : "1",
             c->thin_own ? c->thin_own_nodes : -1, c->f32_own ? c->f32_own_nodes : -1, wino_text(c),
             c->conv_wino > 0 || c->wino_nodes ? c->wino_nodes : -1, f32tc_text(c),
             c->f32_tc > 0 || c->f32tc_nodes ? c->f32tc_nodes : -1, c->win.windows,
             c->win.host_bound, c->win.hold_s * 1e3, c->win.issue_max_s * 1e3, c->wg_layer_nodes,
             c->lin_groups, c->lin_group_nodes, knobs);
}

static void cuda_destroy(sg_backend *be) {
    if (!be) return;
    cuda_ctx *c = be->ctx;
    if (c) {
        if (c->launcher_exec) cudaGraphExecDestroy(c->launcher_exec);
        if (c->launcher) cudaGraphDestroy(c->launcher);
        if (c->launch_status) cudaFree(c->launch_status);
        if (c->exec) cudaGraphExecDestroy(c->exec);
        if (c->graph) cudaGraphDestroy(c->graph);
        if (c->graph_captured) cudaGraphDestroy(c->graph_captured);
        if (c->cb) cublasDestroy(c->cb);
        sg_blas_destroy(c->blas);
        sg_blas_destroy(c->blas_off);
#ifdef SG_HAVE_CUDNN
        sg_cudnn_destroy(c->dnn);
#endif
        free(c->node_eng), free(c->node_sched), free(c->node_wino), free(c->node_f32tc);
        free(c->stats_to), free(c->norm_done), free(c->norm_off);
        free(c->lin_first);
        if (c->ev[0]) cudaEventDestroy(c->ev[0]);
        if (c->ev[1]) cudaEventDestroy(c->ev[1]);
        if (c->st) cudaStreamDestroy(c->st);
        if (c->arena) cudaFree(c->arena);
#ifdef SG_HAVE_NCCL
        if (c->nccl) ncclCommDestroy(c->nccl);
#endif
        free(c);
    }
    free(be);
}

/* the function table; sg_backend_cuda_create copies it and adds the context */
static const sg_backend cuda_vtable = {
    .name = "cuda",
    .prepare = cuda_prepare,
    .upload = cuda_upload,
    .download = cuda_download,
    .run_node = cuda_run_node,
    .run_step = cuda_run_step,
    .sync = cuda_sync,
    .time_steps = cuda_time_steps,
    .time_nodes = cuda_time_nodes,
    .time_launch_captured = cuda_time_launch_captured,
    .time_nodes_replay = cuda_time_nodes_replay,
    .last_replay_types = cuda_last_replay_types,
    .wg_sched = cuda_wg_sched,
    .matmul_peak_tflops = cuda_matmul_peak,
    .mem_peak_gbs = cuda_mem_peak,
    .node_engine = cuda_node_engine,
    .time_node_engine = cuda_time_node_engine,
    .time_gemm = cuda_time_gemm,
    .tune_gemms = cuda_tune_gemms,
    .describe = cuda_describe,
    .destroy = cuda_destroy,
};

/* An environment knob with a fixed set of values, v = getenv(name) (spelt out at each call: the
 * tests list the knobs by their getenv calls): its index in vals (n of them), dflt where it is
 * unset or empty, -1 (with "NAME=value: expected ...") for anything else */
static int env_choice(const char *name, const char *v, const char *const *vals, int n, int dflt,
                      const char *expect) {
    if (!v || !*v) return dflt;
    for (int k = 0; k < n; k++)
        if (!strcmp(v, vals[k])) return k;
    sg_set_error("%s=%s: expected %s", name, v, expect);
    return -1;
}

sg_backend *sg_backend_cuda_create(int dev, int use_graph) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        sg_set_error("no CUDA device: %s",
                     e != cudaSuccess ? cudaGetErrorString(e) : "no GPU is visible");
        cudaGetLastError();
        return NULL;
    }
    if (dev < 0 || dev >= n) {
        sg_set_error("CUDA device %d does not exist (%d visible)", dev, n);
        return NULL;
    }
    sg_backend *be = calloc(1, sizeof *be);
    cuda_ctx *c = calloc(1, sizeof *c);
    if (!be || !c) {
        free(be), free(c);
        sg_set_error("out of host memory");
        return NULL;
    }
    c->dev = dev;
    c->use_graph = use_graph;
    c->wg_force = -1;
    graph_shape_unknown(c); /* no graph yet */
    for (int k = 0; k < 4; k++) c->replay_types[k] = -1;
    *be = cuda_vtable;
    be->ctx = c;
    /* the conv engine's default: SG_CONV_ENGINE=auto|own|cudnn in the environment (every tool),
     * else auto; a tool's --conv-engine sets be->conv_engine after this */
    const char *env = getenv("SG_CONV_ENGINE");
    if (env && *env) {
        be->conv_engine = sg_conv_engine_parse(env);
        if (be->conv_engine < 0) {
            sg_set_error("SG_CONV_ENGINE=%s: expected auto, own or cudnn", env);
            free(c), free(be);
            return NULL;
        }
    }
    const char *prof = getenv("SG_PROFILE_FIRST_STEP");
    c->profile_first = prof && !strcmp(prof, "1");
    /* the wgmma kernels are sm_90a code (prepare_conv_tc checks again) */
    int major = 0, minor = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) == cudaSuccess)
        be->conv_wgmma = major == 9 && minor == 0;
    cudaGetLastError();
    /* a GPU the build has no code for: said now, with the way out, not at the first launch */
    cudaError_t img = cudaSetDevice(dev);
    if (img == cudaSuccess) img = (cudaError_t)sg_cuda_kernel_image();
    if (img != cudaSuccess) {
        sg_set_error("this GPU (compute capability %d.%d) cannot run this build's kernels, built "
                     "for CUDA architectures %s (%s): rebuild for it, cmake -B build "
                     "-DCMAKE_CUDA_ARCHITECTURES=%d%d && cmake --build build",
                     major, minor, sg_cuda_build_archs(), cudaGetErrorString(img), major, minor);
        cudaGetLastError();
        free(c), free(be);
        return NULL;
    }
    /* programmatic dependent launch (cuda_kernels.h): SG_PDL=1 on compute capability 9.0 and
     * above; unset or 0: off (the same bits either way) */
    static const char *const off_on[] = {"0", "1"};
    const int pdl = env_choice("SG_PDL", getenv("SG_PDL"), off_on, 2, 0, "0 (the default) or 1");
    if (pdl < 0) {
        free(c), free(be);
        return NULL;
    }
    c->pdl_ok = major >= 9;
    be->step_knobs = 1;
    c->pdl = pdl && major >= 9;
    if (pdl && !c->pdl)
        fprintf(stderr,
                "stepgraph: SG_PDL=1: this device (compute capability %d.%d) has no "
                "programmatic dependent launch: off\n",
                major, minor);
    /* the libraries' memset nodes (kernels/cuda/graph_edit.cu): SG_GRAPH_MEMSETS=kernel (the
     * default: each becomes a kernel node after the capture) or keep (the graph as captured) */
    static const char *const memsets[] = {"keep", "kernel"};
    c->graph_memsets = env_choice("SG_GRAPH_MEMSETS", getenv("SG_GRAPH_MEMSETS"), memsets, 2, 1,
                                  "kernel (the default) or keep");
    /* the step's graph launched from the host (the default) or from the device (one node a
     * replay: kernels/cuda/graph_launch.cu) */
    static const char *const launches[] = {"host", "device"};
    c->graph_launch = env_choice("SG_GRAPH_LAUNCH", getenv("SG_GRAPH_LAUNCH"), launches, 2, 0,
                                 "host (the default) or device");
    if (c->graph_memsets < 0 || c->graph_launch < 0) {
        free(c), free(be);
        return NULL;
    }
    for (int k = 0; k < 4; k++) c->graph_types_captured[k] = -1;
    /* the one-pass normalisations (cuda_kernels.h): SG_NORM_ONEPASS=1 both directions, fwd or
     * bwd one, 0 neither (the same bits every way); unset: the forward, the default since the
     * third GPU session timed it (2.8% off the unet_cifar batch-128 step; the backward one-pass
     * was slower there) */
    const char *onepass = getenv("SG_NORM_ONEPASS");
    _Static_assert(SG_KNOB_STATS_FWD == SG_NORM_ONEPASS_FWD &&
                       SG_KNOB_STATS_BWD == SG_NORM_ONEPASS_BWD,
                   "the knob's directions are the switch's bits");
    c->norm_onepass =
        onepass && *onepass ? sg_knob_stats_parse(onepass) : SG_KNOB_NORM_ONEPASS_DEFAULT;
    if (c->norm_onepass < 0) {
        sg_set_error("SG_NORM_ONEPASS=%s: expected fwd (the default), 1 (forward and backward), "
                     "bwd or 0 (neither)",
                     onepass);
        free(c), free(be);
        return NULL;
    }
    /* the thin convolutions (conv.cu, THIN_OWN in backend_cuda_engines.c's file comment):
     * SG_CONV_THIN unset or 1, the own engine's thin passes on the thin kernels; 0, on the 64 x 64
     * tiles (the same bits); own, also on own under auto */
    static const char *const thin_vals[] = {"0", "1", "own"};
    const int thin = env_choice("SG_CONV_THIN", getenv("SG_CONV_THIN"), thin_vals, 3, 1,
                                "1 (the default: the thin kernels), 0 (the 64 x 64 tiles) or own "
                                "(also the image convolutions' passes on own under auto)");
    /* F32_OWN (backend_cuda_engines.c's file comment): SG_CONV_F32 unset or own, the fp32 passes at
     * 32 x 32 and above on own under auto; cudnn, on cuDNN where it has an engine */
    static const char *const f32_vals[] = {"cudnn", "own"};
    c->f32_own = env_choice("SG_CONV_F32", getenv("SG_CONV_F32"), f32_vals, 2, 1,
                            "own (the default: fp32 convolutions at 32 x 32 and above on the own "
                            "engine under auto) or cudnn");
    /* the Winograd form of the own engine's fp32 3x3 stride-1 passes
     * (kernels/cuda/conv_wino.cu): SG_CONV_WINO 0, the direct tiles; 1, Winograd (other bits, so
     * describe records it and a resume that changes it is warned about); unset, the engine
     * table's layers that say "wino" (none: the direct tiles) */
    const char *wino_env = getenv("SG_CONV_WINO");
    const int wino = env_choice("SG_CONV_WINO", wino_env, off_on, 2, 0,
                                "0 (the own engine's fp32 3x3 convolutions on the direct tiles) or "
                                "1 (their three passes as Winograd F(2x2, 3x3)); unset, the engine "
                                "table's choice per layer");
    c->conv_wino = wino_env && *wino_env ? wino : -1;
    c->wino_force = -1;
    /* the direct tiles' products on the tensor cores (kernels/cuda/conv.cu's conv_tile_mma3,
     * 3xTF32): SG_CONV_F32_TC 0 (the default), the CUDA cores' FMAs; 1, the tensor cores (other
     * bits, so describe records it and a resume that changes it is warned about) */
    const char *tc_env = getenv("SG_CONV_F32_TC");
    const int f32_tc = env_choice("SG_CONV_F32_TC", tc_env, off_on, 2, 0,
                                  "0 (the own engine's fp32 tiles on the CUDA cores) or 1 (their "
                                  "products on the tensor cores, three TF32 products each: fp32 "
                                  "accuracy, other bits); unset, the engine table's choice per "
                                  "layer, else the CUDA cores");
    c->f32_tc = tc_env && *tc_env ? f32_tc : -1;
    c->f32tc_force = -1;
    /* the attention engine: SG_ATTN=gemm (default) | fused */
    static const char *const attn_vals[] = {"gemm", "fused"};
    c->attn_fused = env_choice("SG_ATTN", getenv("SG_ATTN"), attn_vals, 2, 0, "gemm or fused");
    /* the GEMM forward's bias epilogue (kernels/cuda/blas.cu reads it where a GEMM context is
     * made): checked here, so that a misspelt value is refused, not taken for 1 */
    const int epi = env_choice("SG_GEMM_EPILOGUE", getenv("SG_GEMM_EPILOGUE"), off_on, 2, 1,
                               "1 (the default: a bf16 GEMM forward rounds once from cuBLASLt's "
                               "bias epilogue where the library offers it) or 0 (an fp32 tile and "
                               "a second pass)");
    if (thin < 0 || c->f32_own < 0 || wino < 0 || f32_tc < 0 || c->attn_fused < 0 || epi < 0) {
        free(c), free(be);
        return NULL;
    }
    c->thin_own = thin == 2;
    c->thin_tiles = thin == 0;
    cuda_conv_thin_enable(!c->thin_tiles);
    return be;
}

#else
typedef int sg_backend_cuda_unused; /* ISO C forbids an empty translation unit */
#endif
