/* blas.cu — every GEMM of kernels/cuda, through cuBLASLt, each distinct GEMM with one
 * algorithm chosen once and pinned.
 *
 * A GEMM here is column-major D = alpha op(A) op(B) + beta C with C == D (in place), fp32
 * compute (CUBLAS_COMPUTE_32F, fp32 scale, alpha/beta on the host), operands fp32 or bf16,
 * optionally strided-batched. op(A) is m x k, op(B) k x n, C m x n. Its descriptor — m, n, k,
 * the transposes, the three types, the leading dimensions, the batch count and strides, and
 * the alignment of the three pointers (see below) — is the key of a table. The first time a
 * key is seen, cublasLtMatmulAlgoGetHeuristic picks the algorithm (its first result, with a
 * workspace no larger than the arena's cuBLAS workspace, unless a preference names another
 * of its results: below) and the entry keeps it with the
 * descriptors; every later call with that key runs exactly that algorithm. The CUDA backend
 * freezes the table after its eager warm-up step, before capturing the step into a graph;
 * after that a GEMM not in the table is an error.
 *
 * Why pin at all, when cuBLASLt's heuristic is already deterministic for a given descriptor,
 * library and GPU: the legacy cublasGemmEx with CUBLAS_GEMM_DEFAULT makes that choice
 * inside every call, invisibly, so "the captured step runs the algorithms the eager step ran"
 * was an assumption. With a table it is checked (a new GEMM during or after capture fails
 * loudly instead of being chosen afresh), the choice is made once, outside capture, and it is
 * recorded: the backend's describe() carries the number of pinned GEMMs and a hash of the
 * table (keys and opaque algorithm bytes), so two runs — or a run and its resume — can show
 * they multiplied with the same algorithms. It also keeps the heuristic's host-side work and
 * any dependence on the environment (library version, heuristics cache settings) out of
 * every step after the first.
 *
 * Preferences: the workspace limit; the minimum alignment of A, B and C/D, measured on the
 * pointers (capped at 256 bytes, the default cuBLASLt assumes — an algorithm chosen for 256
 * would refuse or misread the offset operands used here: attention heads, concatenation
 * parts); and split-K reductions only in the compute type (fp32), so a bf16 output is rounded
 * once, never summed in bf16 (CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE; no split-K at all is
 * always allowed). The alignment is part of the key, so an operand at another alignment is
 * another GEMM.
 *
 * The choice by measurement (sg_blas_time_algos, sg_blas_prefer): the heuristic's first is not
 * always the fastest. The first GPU runs measured the 1x1 convs' backward passes on cuBLASLt
 * at 2-4x the time of a same-size GEMM whose operands are both K-contiguous (e.g. the data
 * gradient of a 256 -> 768 1x1 conv at 16x16, batch 128: 0.087-0.092 ms against 0.025;
 * bench/results/2026-11-28-nvidia-h200-bench-3.md): those GEMMs read an operand M- or
 * N-contiguous, and nobody had asked whether another candidate does better. So the engine
 * tuning (bench --tune-engines) times every pinned GEMM of the tuned step on each of the
 * heuristic's candidates (up to 16, each on scratch operands of the key's shape and
 * alignment), and the engine table records the algorithm per GEMM key. A run given the table
 * prefers those before anything is pinned; an algorithm is named by a hash of cuBLASLt's
 * opaque algorithm struct, which the same library, GPU and descriptors reproduce, and one the
 * heuristic does not offer (another GPU or library) is said on stderr and replaced by the
 * first. Another algorithm may sum in another order, so, as with cuDNN's engines, a timing
 * reaches the bits only through the table file (part of its hash).
 *
 * The bias epilogue (cu_blas_gemm_bias: linear.cu's bf16 forward of a one-part input): D =
 * op(A) op(B) + bias with an fp32 bias vector along D's rows, added in fp32 before D's one
 * rounding (CUBLASLT_EPILOGUE_BIAS, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE = CUDA_R_32F), so bf16
 * products need no fp32 tile and second pass: round(sum + b), the tile path's arithmetic. The
 * bias's alignment is part of the key (" bias256" at the end of its text); the pointer is set on
 * the descriptor at each call. A library that refuses the combination (an attribute, or no
 * algorithm within the workspace) leaves a refused entry: the caller takes its other way, at
 * every call of that key alike. sg_blas_bias_epilogue asks the heuristic once, outside any
 * table, so that the CUDA backend can choose engines knowing the answer.
 */
#include "kernels/cuda/cuda_common.cuh"

#include <cublasLt.h>
#include <stdlib.h>
#include <string.h>

/* Every field int64: no padding, so keys compare and hash as bytes. */
typedef struct {
    int64_t m, n, k, ta, tb, adt, bdt, cdt, lda, ldb, ldc, sa, sb, sc, batch;
    int64_t align_a, align_b, align_c;
    int64_t align_bias; /* the fp32 bias epilogue's vector: its alignment; 0: no epilogue */
} blas_key;
/* the bytes of a key its hash and comparisons read: a key without the epilogue hashes as it
 * did before the field existed (a run's gemm_table_hash across the change) */
static size_t blas_key_bytes(const blas_key *k) {
    return k->align_bias ? sizeof *k : offsetof(blas_key, align_bias);
}

typedef struct {
    blas_key key;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
    size_t ws_bytes; /* what the algorithm needs */
    int refused;     /* a bias epilogue the library offered no algorithm for (cu_blas_gemm_bias) */
} blas_entry;

/* a preference (sg_blas_prefer): the algorithm of this id for the GEMM of this key text */
typedef struct {
    char key[SG_BLAS_KEY_MAX];
    uint64_t algo;
} blas_pref;

struct sg_blas {
    cublasLtHandle_t lt;
    cudaStream_t st;
    void *ws;
    size_t ws_bytes;
    blas_entry *e;
    int n, cap, frozen;
    blas_pref *pref;
    int npref, pref_cap, pref_met, pref_missed;
    int epi_off; /* SG_GEMM_EPILOGUE=0: every bias epilogue refused, unasked */
};

#define LT_CHECK(call)                                                                             \
    do {                                                                                           \
        cublasStatus_t s_ = (call);                                                                \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                           \
            return sg_set_error("%s:%d: %s: %s", __FILE__, __LINE__, #call,                        \
                                cublasLtGetStatusString(s_));                                      \
    } while (0)

static cudaDataType blas_type(int dt) {
    return dt == DT_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

/* the largest power of two <= 256 that divides the address */
static int64_t blas_align(const void *p) {
    const uintptr_t a = (uintptr_t)p;
    int64_t al = 256;
    while (al > 1 && a % (uintptr_t)al) al >>= 1;
    return al;
}

static void blas_entry_release(blas_entry *e) {
    if (e->op) cublasLtMatmulDescDestroy(e->op);
    if (e->la) cublasLtMatrixLayoutDestroy(e->la);
    if (e->lb) cublasLtMatrixLayoutDestroy(e->lb);
    if (e->lc) cublasLtMatrixLayoutDestroy(e->lc);
    memset(e, 0, sizeof *e);
}

/* a column-major rows x cols layout, strided-batched when batch > 1 */
static int blas_layout(cublasLtMatrixLayout_t *l, int dt, int64_t rows, int64_t cols, int64_t ld,
                       int64_t batch, int64_t stride) {
    LT_CHECK(cublasLtMatrixLayoutCreate(l, blas_type(dt), (uint64_t)rows, (uint64_t)cols, ld));
    if (batch > 1) {
        const int32_t b = (int32_t)batch;
        LT_CHECK(
            cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &b, sizeof b));
        LT_CHECK(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                  &stride, sizeof stride));
    }
    return SG_OK;
}

/* FNV-1a, for the table's hash and the algorithms' ids */
static uint64_t blas_fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *c = (const unsigned char *)p;
    for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 1099511628211ull;
    return h;
}
/* an algorithm's id: the hash of its opaque bytes (the same library, GPU and descriptors give
 * the same bytes) */
static uint64_t blas_algo_id(const cublasLtMatmulAlgo_t *a) {
    return blas_fnv(14695981039346656037ull, a, sizeof *a);
}

static const char *blas_dt_name(int64_t dt) {
    return dt == DT_BF16 ? "bf16" : "f32";
}
/* a key as text (sg_blas_key_text) */
static void blas_key_text(const blas_key *k, char *buf, size_t cap) {
    snprintf(buf, cap,
             "m%lld n%lld k%lld op%c%c %s,%s>%s ld%lld,%lld,%lld b%lld s%lld,%lld,%lld "
             "al%lld,%lld,%lld",
             (long long)k->m, (long long)k->n, (long long)k->k, k->ta == CUBLAS_OP_N ? 'N' : 'T',
             k->tb == CUBLAS_OP_N ? 'N' : 'T', blas_dt_name(k->adt), blas_dt_name(k->bdt),
             blas_dt_name(k->cdt), (long long)k->lda, (long long)k->ldb, (long long)k->ldc,
             (long long)k->batch, (long long)k->sa, (long long)k->sb, (long long)k->sc,
             (long long)k->align_a, (long long)k->align_b, (long long)k->align_c);
    const size_t used = strlen(buf);
    if (k->align_bias && used < cap)
        snprintf(buf + used, cap - used, " bias%lld", (long long)k->align_bias);
}

/* cuBLASLt's heuristic for entry e's descriptors under the table's preferences (the workspace,
 * fp32-only split-K reductions, the key's alignments): up to `most` results, *nr of them */
static cublasStatus_t blas_heuristic_status(const sg_blas *b, const blas_entry *e, int most,
                                            cublasLtMatmulHeuristicResult_t *r, int *nr) {
    const blas_key *k = &e->key;
    cublasLtMatmulPreference_t pref = NULL;
    *nr = 0;
    cublasStatus_t s0 = cublasLtMatmulPreferenceCreate(&pref);
    if (s0 != CUBLAS_STATUS_SUCCESS) return s0;
    const uint64_t max_ws = (uint64_t)b->ws_bytes;
    const uint32_t al[3] = {(uint32_t)k->align_a, (uint32_t)k->align_b, (uint32_t)k->align_c};
    const uint32_t reduction = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    cublasStatus_t s = cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_ws, sizeof max_ws);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                                 &reduction, sizeof reduction);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                 &al[0], sizeof al[0]);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                 &al[1], sizeof al[1]);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                                 &al[2], sizeof al[2]);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                                 &al[2], sizeof al[2]);
    memset(r, 0, (size_t)most * sizeof *r);
    *nr = 0;
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulAlgoGetHeuristic(b->lt, e->op, e->la, e->lb, e->lc, e->lc, pref, most, r,
                                           nr);
    cublasLtMatmulPreferenceDestroy(pref);
    return s;
}
static int blas_heuristic(const sg_blas *b, const blas_entry *e, int most,
                          cublasLtMatmulHeuristicResult_t *r, int *nr) {
    const cublasStatus_t s = blas_heuristic_status(b, e, most, r, nr);
    if (s != CUBLAS_STATUS_SUCCESS)
        return sg_set_error("cuBLASLt preferences / heuristic: %s", cublasLtGetStatusString(s));
    return SG_OK;
}

/* can the table run heuristic result r (it succeeded, its workspace fits)? */
static int blas_usable(const sg_blas *b, const cublasLtMatmulHeuristicResult_t *r) {
    return r->state == CUBLAS_STATUS_SUCCESS && r->workspaceSize <= b->ws_bytes;
}

/* the most candidates asked of the heuristic where an algorithm is preferred or timed */
enum { BLAS_MOST = 16 };

/* the bias epilogue on descriptor op: D = op(A) op(B) + bias (fp32, added before D's one
 * rounding), the vector at `bias` (cuBLASLt reads its alignment from the pointer) */
static cublasStatus_t blas_bias_epilogue(cublasLtMatmulDesc_t op, const float *bias) {
    const uint32_t epi = CUBLASLT_EPILOGUE_BIAS;
    const int32_t bias_type = CUDA_R_32F;
    cublasStatus_t s =
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                           sizeof bias_type);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                           sizeof bias);
    return s;
}

/* descriptors and the algorithm for key k, into e: the heuristic's first, or the one a
 * preference names (sg_blas_prefer) when the heuristic offers it. A key with the bias
 * epilogue (bias: its vector) that the library refuses (an attribute, or no algorithm within
 * the workspace) is an entry too, marked refused, without descriptors: every later call of
 * that key gets the same answer, before and after the freeze. */
static int blas_entry_make(sg_blas *b, const blas_key *k, const float *bias, blas_entry *e) {
    memset(e, 0, sizeof *e);
    e->key = *k;
    LT_CHECK(cublasLtMatmulDescCreate(&e->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t ta = (cublasOperation_t)k->ta, tb = (cublasOperation_t)k->tb;
    LT_CHECK(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    LT_CHECK(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    if (k->align_bias && blas_bias_epilogue(e->op, bias) != CUBLAS_STATUS_SUCCESS) {
        blas_entry_release(e);
        e->key = *k, e->refused = 1;
        return SG_OK;
    }
    /* stored shapes: A is m x k, or k x m when transposed; B is k x n, or n x k */
    if (blas_layout(&e->la, (int)k->adt, ta == CUBLAS_OP_N ? k->m : k->k,
                    ta == CUBLAS_OP_N ? k->k : k->m, k->lda, k->batch, k->sa) ||
        blas_layout(&e->lb, (int)k->bdt, tb == CUBLAS_OP_N ? k->k : k->n,
                    tb == CUBLAS_OP_N ? k->n : k->k, k->ldb, k->batch, k->sb) ||
        blas_layout(&e->lc, (int)k->cdt, k->m, k->n, k->ldc, k->batch, k->sc))
        return SG_ERR;
    char text[SG_BLAS_KEY_MAX];
    blas_key_text(k, text, sizeof text);
    const blas_pref *want = NULL;
    for (int i = 0; i < b->npref && !want; i++)
        if (!strcmp(b->pref[i].key, text)) want = &b->pref[i];
    cublasLtMatmulHeuristicResult_t r[BLAS_MOST];
    int nr = 0;
    if (k->align_bias) {
        if (blas_heuristic_status(b, e, want ? BLAS_MOST : 1, r, &nr) != CUBLAS_STATUS_SUCCESS ||
            nr < 1 || !blas_usable(b, &r[0])) {
            blas_entry_release(e);
            e->key = *k, e->refused = 1;
            return SG_OK;
        }
    } else if (blas_heuristic(b, e, want ? BLAS_MOST : 1, r, &nr)) {
        return SG_ERR;
    }
    if (nr < 1 || !blas_usable(b, &r[0]))
        return sg_set_error("cuBLASLt has no algorithm for GEMM m=%lld n=%lld k=%lld batch %lld "
                            "(types %lld,%lld->%lld) within a %zu-byte workspace",
                            (long long)k->m, (long long)k->n, (long long)k->k, (long long)k->batch,
                            (long long)k->adt, (long long)k->bdt, (long long)k->cdt, b->ws_bytes);
    int pick = 0;
    if (want) {
        pick = -1;
        for (int i = 0; i < nr && pick < 0; i++)
            if (blas_usable(b, &r[i]) && blas_algo_id(&r[i].algo) == want->algo) pick = i;
        if (pick < 0)
            fprintf(stderr,
                    "stepgraph: GEMM %s: the preferred cuBLASLt algorithm %016llx is not among "
                    "the %d offered here (another GPU or library than the tuning's?); the "
                    "heuristic's first instead\n",
                    text, (unsigned long long)want->algo, nr);
        b->pref_met += pick >= 0, b->pref_missed += pick < 0;
        if (pick < 0) pick = 0;
    }
    e->algo = r[pick].algo;
    e->ws_bytes = r[pick].workspaceSize;
    return SG_OK;
}

extern "C" int sg_blas_create(sg_blas **out, cudaStream_t st, void *ws, int64_t ws_bytes) {
    *out = NULL;
    SG_ARG_CHECK(ws_bytes >= 0 && (ws_bytes == 0 || ws != NULL),
                 "sg_blas_create: a workspace of %lld bytes at %p", (long long)ws_bytes, ws);
    sg_blas *b = (sg_blas *)calloc(1, sizeof *b);
    SG_ARG_CHECK(b != NULL, "sg_blas_create: out of host memory");
    cublasStatus_t s = cublasLtCreate(&b->lt);
    if (s != CUBLAS_STATUS_SUCCESS) {
        free(b);
        return sg_set_error("cublasLtCreate: %s", cublasLtGetStatusString(s));
    }
    b->st = st;
    b->ws = ws;
    b->ws_bytes = (size_t)ws_bytes;
    const char *epi = getenv("SG_GEMM_EPILOGUE");
    b->epi_off = epi && !strcmp(epi, "0");
    *out = b;
    return SG_OK;
}

extern "C" void sg_blas_destroy(sg_blas *b) {
    if (!b) return;
    for (int i = 0; i < b->n; i++) blas_entry_release(&b->e[i]);
    free(b->e);
    free(b->pref);
    if (b->lt) cublasLtDestroy(b->lt);
    free(b);
}

extern "C" void sg_blas_freeze(sg_blas *b) {
    if (b) b->frozen = 1;
}

extern "C" int sg_blas_frozen(const sg_blas *b) {
    return b ? b->frozen : 0;
}

extern "C" int sg_blas_count(const sg_blas *b) {
    return b ? b->n : 0;
}

/* FNV-1a over every entry in insertion (= schedule) order: key, algorithm bytes, workspace (a
 * refused epilogue's: zeros) */
extern "C" uint64_t sg_blas_hash(const sg_blas *b) {
    uint64_t h = 14695981039346656037ull;
    for (int i = 0; b && i < b->n; i++) {
        const uint64_t ws = (uint64_t)b->e[i].ws_bytes;
        h = blas_fnv(h, &b->e[i].key, blas_key_bytes(&b->e[i].key));
        h = blas_fnv(h, &b->e[i].algo, sizeof b->e[i].algo);
        h = blas_fnv(h, &ws, sizeof ws);
    }
    return h;
}

extern "C" size_t sg_blas_version(void) {
    return cublasLtGetVersion();
}

int cu_blas_check(const sg_blas *b, cudaStream_t st, const char *fn) {
    SG_ARG_CHECK(b != NULL, "%s: no GEMM context (sg_blas)", fn);
    SG_ARG_CHECK(b->st == st, "%s: the GEMM context runs on another stream", fn);
    return SG_OK;
}

/* one GEMM through the table, with the bias epilogue where bias != NULL: *refused (bias only)
 * says the library refused it, and nothing ran */
static int blas_gemm_on(sg_blas *b, cudaStream_t st, cublasOperation_t ta, cublasOperation_t tb,
                        int m, int n, int k, float alpha, const void *A, int adt, int lda,
                        int64_t sa, const void *B, int bdt, int ldb, int64_t sb, float beta,
                        void *C, int cdt, int ldc, int64_t sc, int batch, const float *bias,
                        int *refused) {
    const char *fn = bias ? "cu_blas_gemm_bias" : "cu_blas_gemm";
    if (cu_blas_check(b, st, fn)) return SG_ERR;
    SG_ARG_CHECK(m > 0 && n > 0 && k > 0 && batch > 0 && A && B && C,
                 "%s: bad GEMM m=%d n=%d k=%d batch %d", fn, m, n, k, batch);
    SG_ARG_CHECK(!bias || (batch == 1 && beta == 0.0f),
                 "%s: the bias epilogue on one GEMM without beta (batch %d, beta %g)", fn, batch,
                 (double)beta);
    blas_key key;
    memset(&key, 0, sizeof key);
    key.m = m, key.n = n, key.k = k, key.ta = ta, key.tb = tb;
    key.adt = adt, key.bdt = bdt, key.cdt = cdt, key.lda = lda, key.ldb = ldb, key.ldc = ldc;
    key.batch = batch;
    if (batch > 1) key.sa = sa, key.sb = sb, key.sc = sc;
    key.align_a = blas_align(A), key.align_b = blas_align(B), key.align_c = blas_align(C);
    key.align_bias = bias ? blas_align(bias) : 0;
    blas_entry *e = NULL;
    int fresh = 0; /* the entry made by this call */
    for (int i = 0; i < b->n && !e; i++)
        if (!memcmp(&b->e[i].key, &key, sizeof key)) e = &b->e[i];
    if (!e) {
        fresh = 1;
        if (b->frozen)
            return sg_set_error("%s: GEMM m=%d n=%d k=%d (op %d,%d, lds %d,%d,%d, batch %d, types "
                                "%d,%d->%d, align %lld,%lld,%lld) is not among the %d pinned "
                                "after the warm-up step: a captured step would run an algorithm "
                                "the eager step did not",
                                fn, m, n, k, (int)ta, (int)tb, lda, ldb, ldc, batch, adt, bdt, cdt,
                                (long long)key.align_a, (long long)key.align_b,
                                (long long)key.align_c, b->n);
        if (b->n == b->cap) {
            const int cap = b->cap ? 2 * b->cap : 64;
            blas_entry *ne = (blas_entry *)realloc(b->e, (size_t)cap * sizeof *ne);
            SG_ARG_CHECK(ne != NULL, "%s: out of host memory", fn);
            b->e = ne, b->cap = cap;
        }
        if (blas_entry_make(b, &key, bias, &b->e[b->n])) {
            blas_entry_release(&b->e[b->n]);
            return SG_ERR;
        }
        e = &b->e[b->n++];
    }
    if (refused) *refused = e->refused;
    if (e->refused) return SG_OK;
    /* the vector of this call (a host-side descriptor update; cublasLtMatmul reads it at the
     * launch, so a captured node keeps this call's pointer) */
    if (bias)
        LT_CHECK(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                                sizeof bias));
    const cublasStatus_t s = cublasLtMatmul(b->lt, e->op, &alpha, A, e->la, B, e->lb, &beta, C,
                                            e->lc, C, e->lc, &e->algo, b->ws, b->ws_bytes, st);
    /* a bias epilogue the heuristic offered but the first run refuses (before the freeze: the
     * eager warm-up, where every key is first seen) is a refusal too, kept for every later call */
    if (s != CUBLAS_STATUS_SUCCESS && bias && fresh && !b->frozen) {
        const blas_key k = e->key;
        blas_entry_release(e);
        e->key = k, e->refused = 1;
        if (refused) *refused = 1;
        return SG_OK;
    }
    if (s != CUBLAS_STATUS_SUCCESS)
        return sg_set_error("%s: cublasLtMatmul (GEMM m=%d n=%d k=%d): %s", fn, m, n, k,
                            cublasLtGetStatusString(s));
    return SG_OK;
}

extern "C" int sg_blas_refused(const sg_blas *b) {
    int n = 0;
    for (int i = 0; b && i < b->n; i++) n += b->e[i].refused;
    return n;
}

int cu_blas_gemm(sg_blas *b, cudaStream_t st, cublasOperation_t ta, cublasOperation_t tb, int m,
                 int n, int k, float alpha, const void *A, int adt, int lda, int64_t sa,
                 const void *B, int bdt, int ldb, int64_t sb, float beta, void *C, int cdt, int ldc,
                 int64_t sc, int batch) {
    return blas_gemm_on(b, st, ta, tb, m, n, k, alpha, A, adt, lda, sa, B, bdt, ldb, sb, beta, C,
                        cdt, ldc, sc, batch, NULL, NULL);
}

int cu_blas_gemm_bias(sg_blas *b, cudaStream_t st, cublasOperation_t ta, cublasOperation_t tb,
                      int m, int n, int k, const void *A, int adt, int lda, const void *B, int bdt,
                      int ldb, void *C, int cdt, int ldc, const float *bias, int *refused) {
    *refused = 0;
    SG_ARG_CHECK(bias != NULL, "cu_blas_gemm_bias: no bias");
    if (b && b->epi_off) return *refused = 1, SG_OK;
    return blas_gemm_on(b, st, ta, tb, m, n, k, 1.0f, A, adt, lda, 0, B, bdt, ldb, 0, 0.0f, C, cdt,
                        ldc, 0, 1, bias, refused);
}

/* The probe (sg_blas_bias_epilogue): the library's answer for a bf16 GEMM of the 1x1 convs'
 * shape (m = Co 256, n = rows 4096, k = Ci 256, both operands K-contiguous, 256-byte aligned
 * operands and bias, as the arena aligns every tensor), asked of the heuristic alone:
 * descriptors made and released, nothing run, nothing pinned. The vector's address only tells
 * the heuristic its alignment, so a made-up one at 256 bytes serves. */
extern "C" int sg_blas_bias_epilogue(sg_blas *b) {
    if (!b || b->epi_off) return 0;
    blas_key k;
    memset(&k, 0, sizeof k);
    k.m = 256, k.n = 4096, k.k = 256, k.ta = CUBLAS_OP_T, k.tb = CUBLAS_OP_N;
    k.adt = k.bdt = k.cdt = DT_BF16, k.lda = 256, k.ldb = 256, k.ldc = 256, k.batch = 1;
    k.align_a = k.align_b = k.align_c = k.align_bias = 256;
    blas_entry e;
    if (blas_entry_make(b, &k, (const float *)(uintptr_t)4096u, &e)) {
        blas_entry_release(&e);
        return 0;
    }
    const int ok = !e.refused;
    blas_entry_release(&e);
    return ok;
}

/* row-major C[m][n] = A[m][k] B[n][k]^T is column-major C^T (n x m, ld n) = B^T A with B
 * stored k x n transposed (lda k) and A stored k x m (ldb k): cuBLAS's "TN" GEMM */
extern "C" int sg_blas_gemm_rowmajor_nt(sg_blas *b, cudaStream_t st, int m, int n, int k, int dt,
                                        const void *A, const void *B, void *C) {
    return cu_blas_gemm(b, st, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, 1.0f, B, dt, k, 0, A, dt, k, 0,
                        0.0f, C, dt, n, 0, 1);
}

/* ---- the algorithms' choice by measurement (sg_blas_time_algos, sg_blas_prefer) */

extern "C" int sg_blas_key_text(const sg_blas *b, int i, char *buf, int cap) {
    SG_ARG_CHECK(b && i >= 0 && i < b->n && buf && cap > 0, "sg_blas_key_text: no GEMM %d", i);
    blas_key_text(&b->e[i].key, buf, (size_t)cap);
    return SG_OK;
}

extern "C" uint64_t sg_blas_algo_id(const sg_blas *b, int i) {
    return b && i >= 0 && i < b->n && !b->e[i].refused ? blas_algo_id(&b->e[i].algo) : 0;
}

extern "C" int sg_blas_prefer(sg_blas *b, const char *key, uint64_t algo) {
    SG_ARG_CHECK(b && key && strlen(key) < SG_BLAS_KEY_MAX,
                 "sg_blas_prefer: a GEMM key longer than %d characters", SG_BLAS_KEY_MAX - 1);
    SG_ARG_CHECK(!b->n, "sg_blas_prefer: the table already pinned %d GEMMs", b->n);
    for (int i = 0; i < b->npref; i++)
        if (!strcmp(b->pref[i].key, key)) return b->pref[i].algo = algo, SG_OK;
    if (b->npref == b->pref_cap) {
        const int cap = b->pref_cap ? 2 * b->pref_cap : 64;
        blas_pref *np = (blas_pref *)realloc(b->pref, (size_t)cap * sizeof *np);
        SG_ARG_CHECK(np != NULL, "sg_blas_prefer: out of host memory");
        b->pref = np, b->pref_cap = cap;
    }
    blas_pref *p = &b->pref[b->npref++];
    snprintf(p->key, sizeof p->key, "%s", key);
    p->algo = algo;
    return SG_OK;
}

extern "C" void sg_blas_preferences(const sg_blas *b, int *met, int *missed) {
    *met = b ? b->pref_met : 0;
    *missed = b ? b->pref_missed : 0;
}

/* n elements of dtype dt at p: a fixed pattern of values in [-0.5, 0.5) (what time_gemm's
 * operands hold: all-zero matrices can run at clocks real data does not) */
__global__ void blas_fill_kernel(void *p, int64_t n, int dt) {
    SG_PDL_ENTER();
    SG_GRID_STRIDE(i, n) {
        const uint32_t h = (uint32_t)(i * 2654435761u) ^ (uint32_t)(i >> 13);
        const float v = (float)(h >> 8) * (1.0f / 16777216.0f) - 0.5f;
        dev_st(p, i, v, dt);
    }
}

/* the elements a stored operand spans: `batch` matrices `stride` apart, each `cols` columns of
 * leading dimension ld */
static int64_t blas_span(int64_t ld, int64_t cols, int64_t batch, int64_t stride) {
    return (batch - 1) * stride + ld * cols;
}

extern "C" int sg_blas_time_algos(sg_blas *b, int i, int most, int reps, sg_cuda_window *win,
                                  float *ms, uint64_t *ids, int *n) {
    const char *fn = "sg_blas_time_algos";
    *n = 0;
    SG_ARG_CHECK(b && i >= 0 && i < b->n && most >= 1 && reps >= 1, "%s: no GEMM %d", fn, i);
    SG_ARG_CHECK(win, "%s: no timing window", fn);
    const blas_entry *e = &b->e[i];
    if (e->refused) return SG_OK; /* nothing runs there */
    /* (a bias epilogue's descriptor keeps its last call's vector, an arena tensor of m floats:
     * read, never written, by the candidates) */
    const blas_key *k = &e->key;
    cublasLtMatmulHeuristicResult_t r[BLAS_MOST];
    int nr = 0;
    if (blas_heuristic(b, e, most < BLAS_MOST ? most : BLAS_MOST, r, &nr)) return SG_ERR;
    /* scratch operands as the key stores them, each at the key's alignment (an offset of that
     * many bytes past cudaMalloc's 256) */
    const int64_t span[3] = {blas_span(k->lda, k->ta == CUBLAS_OP_N ? k->k : k->m, k->batch, k->sa),
                             blas_span(k->ldb, k->tb == CUBLAS_OP_N ? k->n : k->k, k->batch, k->sb),
                             blas_span(k->ldc, k->n, k->batch, k->sc)};
    const int64_t dts[3] = {k->adt, k->bdt, k->cdt},
                  align[3] = {k->align_a, k->align_b, k->align_c};
    unsigned char *buf[3] = {NULL, NULL, NULL};
    void *op[3];
    int rc = SG_OK;
    for (int j = 0; j < 3 && !rc; j++) {
        const int64_t bytes = span[j] * sg_dtype_size((int)dts[j]) + 256;
        if (cudaMalloc((void **)&buf[j], (size_t)bytes) != cudaSuccess) {
            cudaGetLastError();
            buf[j] = NULL;
            rc = sg_set_error("%s: no %.1f MiB of device memory for GEMM %d's operands", fn,
                              bytes / 1048576.0, i);
            break;
        }
        op[j] = buf[j] + (align[j] < 256 ? align[j] : 0);
        SG_LAUNCH(blas_fill_kernel, sg_grid_for(span[j]), SG_THREADS, 0, b->st, op[j], span[j],
                  (int)dts[j]);
        if (cudaPeekAtLastError() != cudaSuccess)
            rc = sg_set_error("%s: %s", fn, cudaGetErrorString(cudaGetLastError()));
    }
    cudaEvent_t ev[2] = {NULL, NULL};
    if (!rc && (cudaEventCreate(&ev[0]) != cudaSuccess || cudaEventCreate(&ev[1]) != cudaSuccess))
        rc = sg_set_error("%s: %s", fn, cudaGetErrorString(cudaGetLastError()));
    const float alpha = 1.0f, beta = 0.0f;
    for (int c = 0; c < nr && !rc; c++) {
        ms[c] = -1;
        ids[c] = blas_algo_id(&r[c].algo);
        if (!blas_usable(b, &r[c])) continue;
        /* one untimed run (a refusal leaves the candidate unmeasured), then reps between events */
        if (cublasLtMatmul(b->lt, e->op, &alpha, op[0], e->la, op[1], e->lb, &beta, op[2], e->lc,
                           op[2], e->lc, &r[c].algo, b->ws, b->ws_bytes,
                           b->st) != CUBLAS_STATUS_SUCCESS)
            continue;
        cublasStatus_t s = CUBLAS_STATUS_SUCCESS;
        rc = sg_cuda_window_begin(win, b->st, ev[0]);
        for (int q = 0; q < reps && !rc && s == CUBLAS_STATUS_SUCCESS; q++)
            s = cublasLtMatmul(b->lt, e->op, &alpha, op[0], e->la, op[1], e->lb, &beta, op[2],
                               e->lc, op[2], e->lc, &r[c].algo, b->ws, b->ws_bytes, b->st);
        float t = 0;
        if (!rc) rc = sg_cuda_window_end(win, b->st, ev[0], ev[1], &t);
        if (!rc && s == CUBLAS_STATUS_SUCCESS) ms[c] = t / (float)reps;
    }
    cudaStreamSynchronize(b->st); /* nothing may still read the scratch when it is freed */
    for (int j = 0; j < 2; j++)
        if (ev[j]) cudaEventDestroy(ev[j]);
    for (int j = 0; j < 3; j++) cudaFree(buf[j]);
    if (!rc) *n = nr;
    return rc;
}
