/* sim_hopper.cpp — the Hopper (sm_90a) operations of the host emulation: mbarrier, the tensor
 * copy engine (cp.async.bulk.tensor, tile mode) with the driver's tensor-map encoding, warpgroup
 * MMA (wgmma.mma_async m64nNk16 bf16 -> f32 with fence / commit_group / wait_group), the
 * async-proxy fence, elect.sync, setmaxnreg, stmatrix and named barriers. Written from the PTX
 * ISA (9.x: "mbarrier", "cp.async.bulk.tensor", "Tensor Access Modes", "Asynchronous Warpgroup
 * Level Matrix Multiply-Accumulate", "Matrix Descriptor Format", "Shared Memory Matrix Layout",
 * "fence", "elect.sync", "setmaxnreg", "stmatrix") and the CUDA driver API's documentation of
 * cuTensorMapEncodeTiled/Im2col, not from the kernels that use them. kernels/cuda/hopper.cuh
 * states the semantics a kernel author needs; this file says how they are emulated and what is
 * checked. Where the documents leave a case open, the emulation refuses it with a message that
 * says "not emulated" (strict rather than lenient); docs/gpu-status.md lists those readings.
 *
 * mbarrier. The state lives in a table of the block (address, phase count, expected and
 * pending arrivals, tx-count); the 8 bytes themselves hold a marker, so an ordinary store over
 * a live mbarrier is reported at its next use. Reported: init outside shared memory, misaligned,
 * count outside [1, 2^20 - 1], on a live mbarrier; any use of an address that is not a live
 * mbarrier; a use by another thread before a __syncthreads followed the init; a copy completing
 * on an mbarrier whose init was not followed by fence.mbarrier_init (or fence.proxy.async) in
 * the initialising thread; more arrivals than expected in a phase; a tx-count outside
 * +-(2^20 - 1); a waiter that lets the barrier complete two phases (its parity is ambiguous).
 * try_wait blocks the thread until the phase completes (a legal outcome of a potentially
 * blocking wait), so a deadlock is reported, never hung; test_wait returns at once, and when
 * false lets the other threads run before the caller polls again.
 *
 * The copy engine. A copy is validated at issue (tensor map, box, destination, mbarrier, the
 * global extent inside a live allocation), its destination poisoned (0xFF), and it is queued.
 * It lands — bytes written through the swizzle, complete-tx on its mbarrier — only when a
 * thread waits on that mbarrier's incomplete phase, or when no thread can run (the latest
 * moment a GPU could): a read of the destination before the wait reads poison. Copies still in
 * flight when the block ends are reported. Swizzle: the 16-byte chunk at shared address a is
 * stored at a ^ (((a >> 7) & M) << 4) (M = 1, 3, 7 for 32B, 64B, 128B): CUTLASS's
 * Swizzle<B,4,3> and the programming guide's tables (16-byte granularity, repeats after 256,
 * 512, 1024 bytes). Strict: a swizzled destination aligned to the repeat, boxDim[0] * elemsize
 * equal to the span, no interleave, no NaN fill, no TF32/FTZ/packed types, nested strides.
 *
 * wgmma. Warpgroup-collective (sim_exec.cpp's warpgroup rendezvous: 128 threads, 4 whole warps
 * from a warp index divisible by 4, all at the same op with the same N and transposes, none
 * exited). At issue the thread that completes the rendezvous checks that the descriptors and
 * scale-d are the same in all 128 threads and that each thread executed wgmma.fence since its
 * warpgroup's last wait_group, gathers A and B from shared memory through the descriptors
 * (every 16-byte chunk inside shared memory, not under a copy still in flight, and visible to
 * the async proxy, below) or A from the threads' registers, captures the accumulator
 * registers (C) and overwrites them with a NaN poison (0x7fc0dead). The MMA is performed only
 * when wait_group retires its group: the shared-memory operands are gathered again and must be
 * unchanged, register A unchanged, the accumulator registers must still hold the poison (a
 * write in flight is reported), and the results are written into them. mma_asyncs on the same
 * accumulator registers (same N) form a chain computed in issue order; a partial overlap is
 * reported. Arithmetic as the mma.sync emulation (sim_tensor_core.cpp): the 16 exact bf16
 * products summed in double in k order, C added, rounded once to fp32; a NaN result is the
 * canonical 0x7fffffff. The GPU's rounding inside the MMA differs (unspecified by the ISA).
 * Descriptors: the layouts of hopper.cuh; strict: base offset 0, reserved bits 0, a swizzled
 * start inside the first line of a pattern repeat, SBO/LBO multiples of the repeat.
 *
 * The async proxy. TMA and wgmma access shared memory through the async proxy; ordinary
 * stores are only ordered with them by fence.proxy.async. The emulation keeps a shadow of
 * shared memory as the async proxy last saw it (copies landing write both) and a fence count;
 * a wgmma operand chunk that differs from the shadow is accepted only if a fence.proxy.async
 * ran since the chunk was last seen by the async proxy, else it is reported. (Coarse: one
 * thread's fence covers every thread's stores; the rule wants a fence in each writing thread.)
 */
#include <atomic>
#include <cstdarg>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "cuda.h"
#include "sim_internal.hpp"

extern "C" {
extern char __start_sg_sim_shared[] __attribute__((weak));
extern char __stop_sg_sim_shared[] __attribute__((weak));
}

namespace sg_sim {

namespace {

constexpr uint32_t ACC_POISON = 0x7fc0deadu; /* a quiet NaN: accumulators in flight */
constexpr int64_t TX_LIMIT = (1 << 20) - 1;
constexpr int MAX_WG = 8;

/* ---- the tensor map's encoding in the opaque 128 bytes ---- */

enum { TM_TILED = 1, TM_IM2COL = 2 };
constexpr uint32_t TM_MAGIC = 0x4d544753u; /* "SGTM" */

struct tmap_enc {
    uint32_t magic;
    uint8_t mode, rank, dtype, esize;
    uint8_t interleave, swizzle, l2, oob;
    uint64_t addr;
    uint32_t dim_m1[5]; /* globalDim - 1 (globalDim may be 2^32) */
    uint64_t stride[5]; /* bytes; stride[0] = esize */
    uint16_t box[5];    /* tiled: boxDim */
    uint8_t estride[5]; /* elementStrides */
    int16_t lower[3];   /* im2col: pixelBoxLowerCorner, pixelBoxUpperCorner */
    int16_t upper[3];
    uint16_t channels; /* im2col: channelsPerPixel (<= 256), pixelsPerColumn (<= 1024) */
    uint16_t pixels;
    uint32_t checksum;
};
static_assert(sizeof(tmap_enc) <= sizeof(CUtensorMap), "tensor map encoding too large");

uint32_t tm_checksum(const tmap_enc &m) {
    const unsigned char *b = reinterpret_cast<const unsigned char *>(&m);
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < offsetof(tmap_enc, checksum); i++) h = (h ^ b[i]) * 16777619u;
    return h;
}

uint64_t tm_dim(const tmap_enc &m, int i) {
    return (uint64_t)m.dim_m1[i] + 1;
}

/* bytes from the first to one past the last element of the tensor */
uint64_t tm_extent(const tmap_enc &m) {
    uint64_t e = m.esize;
    for (int i = 0; i < m.rank; i++) e += (tm_dim(m, i) - 1) * m.stride[i];
    return e;
}

int swizzle_span(int sw) { /* CUtensorMapSwizzle -> bytes (0: none) */
    return sw == CU_TENSOR_MAP_SWIZZLE_32B    ? 32
           : sw == CU_TENSOR_MAP_SWIZZLE_64B  ? 64
           : sw == CU_TENSOR_MAP_SWIZZLE_128B ? 128
                                              : 0;
}

/* the 16-byte chunk at shared address sa, swizzled over a span of `span` bytes */
inline uint64_t swizzle_sa(uint64_t sa, int span) {
    const uint64_t m = span == 128 ? 7 : span == 64 ? 3 : span == 32 ? 1 : 0;
    return sa ^ (((sa >> 7) & m) << 4);
}

/* ---- per-block state ---- */

struct mbar {
    uintptr_t addr = 0;
    uint64_t phase = 0; /* phases completed */
    uint32_t expected = 0;
    int64_t pending = 0, tx = 0;
    int init_thread = 0;
    uint64_t init_gen = 0;
    bool fenced = false, valid = false;
    uint64_t marker = 0;
};

struct tma_copy {
    unsigned char *dst = nullptr;
    uint32_t dst_sa = 0, bytes = 0;
    uintptr_t bar = 0;
    tmap_enc m;
    int64_t coord[5];
    int issuer = 0;
};

struct wg_chain {
    float *d[128];
    int n = 0, pending = 0;
    bool live = false;
    std::vector<float> acc; /* 64 x n, row-major: the registers' values after the ops so far */
};

struct wg_op {
    int chain = 0, n = 0, ta = 0, tb = 0, scale_d = 0, issuer = 0;
    bool rs = false;
    uint64_t group = 0, da = 0, db = 0;
    uint16_t A[64 * 16];  /* [m][k] */
    uint16_t B[256 * 16]; /* [n][k] */
    const uint32_t *ap[128];
    uint32_t av[128][4];
};

struct wg_state {
    uint64_t committed = 0;
    std::vector<wg_op> ops; /* [0, nops): in flight, in issue order */
    size_t nops = 0;
    std::vector<wg_chain> chains;
    bool fenced[128];
    int regs = -1; /* setmaxnreg's count, -1 before any */
};

struct hblock {
    bool used = false;
    size_t dyn_bytes = 0;
    std::vector<mbar> bars;
    std::vector<tma_copy> inflight;
    wg_state wg[MAX_WG];
    /* the async proxy's view of shared memory, and per 16-byte chunk the fence count when the
     * async proxy last saw it */
    bool shadow_ready = false;
    std::vector<unsigned char> shadow_dyn, shadow_static;
    std::vector<uint64_t> seen_dyn, seen_static;
    uint64_t fence_gen = 0;
    std::vector<uint32_t> spins; /* consecutive failed test_waits per thread */
};
hblock H;

void touch() {
    if (H.used) return;
    H.used = true;
    for (int g = 0; g < MAX_WG; g++) {
        wg_state &w = H.wg[g];
        w.committed = 0;
        w.nops = 0;
        for (wg_chain &c : w.chains) c.live = false;
        for (int t = 0; t < 128; t++) w.fenced[t] = false;
        w.regs = -1;
    }
    H.bars.clear();
    H.inflight.clear();
    H.shadow_ready = false;
    H.fence_gen = 0;
    H.spins.assign((size_t)block_threads(), 0);
}

/* ---- the async proxy's view ---- */

void ensure_shadow() {
    if (H.shadow_ready) return;
    const size_t st = (size_t)(__stop_sg_sim_shared - __start_sg_sim_shared);
    /* at the start of the block both views hold the poison run_grid wrote */
    H.shadow_dyn.assign(H.dyn_bytes, 0xFF);
    H.shadow_static.assign(st, 0xFF);
    H.seen_dyn.assign(H.dyn_bytes / 16 + 1, 0);
    H.seen_static.assign(st / 16 + 1, 0);
    H.shadow_ready = true;
}

/* the shadow of the 16 bytes at p (16-byte aligned, inside shared memory) */
unsigned char *shadow_of(const void *p, uint64_t **seen) {
    ensure_shadow();
    const uintptr_t a = (uintptr_t)p, d0 = (uintptr_t)dynamic_smem();
    if (d0 && a >= d0 && a < d0 + H.dyn_bytes) {
        *seen = &H.seen_dyn[(a - d0) / 16];
        return &H.shadow_dyn[a - d0];
    }
    const uintptr_t s0 = (uintptr_t)__start_sg_sim_shared;
    *seen = &H.seen_static[(a - s0) / 16];
    return &H.shadow_static[a - s0];
}

/* the async proxy writes 16 bytes (a copy landing) */
void async_write16(unsigned char *p, const unsigned char *src) {
    memcpy(p, src, 16);
    uint64_t *seen;
    unsigned char *sh = shadow_of(p, &seen);
    memcpy(sh, src, 16);
    *seen = H.fence_gen;
}

/* the async proxy reads 16 bytes: the generic proxy's stores since it last saw them must have
 * been followed by a fence.proxy.async. false: they were not. */
bool async_read16_visible(const unsigned char *p) {
    uint64_t *seen;
    unsigned char *sh = shadow_of(p, &seen);
    if (memcmp(p, sh, 16) && H.fence_gen <= *seen) return false;
    memcpy(sh, p, 16);
    *seen = H.fence_gen;
    return true;
}

/* ---- mbarrier ---- */

mbar *find_bar(const void *p) {
    for (mbar &b : H.bars)
        if (b.valid && b.addr == (uintptr_t)p) return &b;
    return nullptr;
}

std::string bar_state(const mbar &b) {
    char s[200];
    int copies = 0;
    for (const tma_copy &c : H.inflight) copies += c.bar == b.addr;
    snprintf(
        s, sizeof s, "phase %llu, %lld of %u arrivals pending, tx-count %lld, %d copies in flight",
        (unsigned long long)b.phase, (long long)b.pending, b.expected, (long long)b.tx, copies);
    return s;
}

/* A use of the mbarrier at p by the running thread (what: the instruction). */
mbar *use_bar(const void *p, const char *what) {
    touch();
    const int me = current_thread();
    if ((uintptr_t)p % 8 || !in_shared(p, 8))
        device_fail("%s: %p is not an 8-byte aligned address in shared memory (%s%s)", what, p,
                    describe_shared().c_str(), shared_hint(p).c_str());
    mbar *b = find_bar(p);
    if (!b)
        device_fail("%s: %p is not an initialised mbarrier (mbarrier.init first; after "
                    "mbarrier.inval it must be initialised again)",
                    what, p);
    uint64_t v;
    memcpy(&v, p, 8);
    if (v != b->marker)
        device_fail("%s: the mbarrier at %p was overwritten by an ordinary store (its 8 bytes "
                    "are opaque; mbarrier.inval before reusing them)",
                    what, p);
    if (me != b->init_thread && syncthreads_generation() == b->init_gen)
        device_fail("%s: thread %d uses the mbarrier at %p, which thread %d initialised, before a "
                    "__syncthreads made the initialisation visible to it",
                    what, me, p, b->init_thread);
    return b;
}

/* Phase completion when both counts reached 0. Returns an error message or "". */
std::string settle(mbar &b) {
    if (b.tx > TX_LIMIT || b.tx < -TX_LIMIT) {
        char s[200];
        snprintf(s, sizeof s,
                 "the tx-count of the mbarrier at %p reached %lld, outside +-(2^20 - 1)",
                 (void *)b.addr, (long long)b.tx);
        return s;
    }
    if (b.pending == 0 && b.tx == 0) {
        b.phase++;
        b.pending = b.expected;
        mbar_wake((const void *)b.addr);
    }
    return "";
}

/* ---- the copy engine ---- */

std::string land(const tma_copy &c) {
    const tmap_enc &m = c.m;
    const int span = swizzle_span(m.swizzle);
    int64_t B[5] = {1, 1, 1, 1, 1};
    for (int i = 0; i < m.rank; i++)
        B[i] = i == 0 ? m.box[0] : (m.box[i] + m.estride[i] - 1) / m.estride[i];
    const uint32_t row_bytes = (uint32_t)(B[0] * m.esize);
    int64_t rows = 1;
    for (int i = 1; i < m.rank; i++) rows *= B[i];
    const unsigned char *g = (const unsigned char *)(uintptr_t)m.addr;
    for (int64_t r = 0; r < rows; r++) {
        int64_t rest = r, off = 0;
        bool oob = false;
        for (int i = 1; i < m.rank; i++) {
            const int64_t j = rest % B[i], x = c.coord[i] + j * m.estride[i];
            rest /= B[i];
            if (x < 0 || (uint64_t)x >= tm_dim(m, i)) oob = true;
            off += x * (int64_t)m.stride[i];
        }
        for (uint32_t ch = 0; ch < row_bytes / 16; ch++) {
            unsigned char buf[16];
            const int per = 16 / m.esize;
            for (int e = 0; e < per; e++) {
                const int64_t x0 = c.coord[0] + (int64_t)ch * per + e;
                if (oob || x0 < 0 || (uint64_t)x0 >= tm_dim(m, 0))
                    memset(buf + e * m.esize, 0, m.esize);
                else
                    memcpy(buf + e * m.esize, g + off + x0 * m.esize, m.esize);
            }
            const uint64_t sa = (uint64_t)c.dst_sa + (uint64_t)r * row_bytes + 16u * ch;
            async_write16(c.dst + (swizzle_sa(sa, span) - c.dst_sa), buf);
        }
    }
    mbar *b = find_bar((const void *)c.bar);
    if (!b) {
        char s[200];
        snprintf(s, sizeof s,
                 "a cp.async.bulk.tensor issued by thread %d completes on the mbarrier at %p, "
                 "which was invalidated while the copy was in flight",
                 c.issuer, (void *)c.bar);
        return s;
    }
    b->tx -= c.bytes;
    return settle(*b);
}

/* Lands the copies in flight (all, or those completing on bar) in issue order. */
std::string land_copies(uintptr_t bar, bool all, int *landed) {
    std::vector<tma_copy> keep;
    std::vector<tma_copy> now;
    for (tma_copy &c : H.inflight) (all || c.bar == bar ? now : keep).push_back(c);
    H.inflight.swap(keep);
    for (const tma_copy &c : now) {
        std::string e = land(c);
        if (!e.empty()) return e;
    }
    if (landed) *landed = (int)now.size();
    return "";
}

/* ---- wgmma ---- */

float bf16f(uint16_t h) {
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Thread t's accumulator register i of an m64nN wgmma holds D[row][col]. */
inline void acc_pos(int t, int i, int *row, int *col) {
    *row = 16 * (t / 32) + (t % 32) / 4 + 8 * ((i / 2) % 2);
    *col = 8 * (i / 4) + 2 * (t % 4) + (i % 2);
}

struct desc_fields {
    uint64_t start, lbo, sbo;
    int base, span;
};

/* Gathers the R x 16 operand (r: M of A or N of B; out[r * 16 + k]) the descriptor describes,
 * K-major (trans 0) or MN-major (trans 1). issue: validate everything and check the async
 * proxy may read each chunk; else (retirement) only read. */
void gather(uint64_t desc, int R, int trans, uint16_t *out, bool issue, const char *which) {
    desc_fields f;
    f.start = (desc & 0x3FFFu) << 4;
    f.lbo = ((desc >> 16) & 0x3FFFu) << 4;
    f.sbo = ((desc >> 32) & 0x3FFFu) << 4;
    f.base = (int)((desc >> 49) & 7);
    const int layout = (int)(desc >> 62);
    f.span = layout == 1 ? 128 : layout == 2 ? 64 : layout == 3 ? 32 : 0;
    const char *major = trans ? "MN-major" : "K-major";
    if (issue) {
        const uint64_t reserved = (3ull << 14) | (3ull << 30) | (7ull << 46) | (0x3FFull << 52);
        if (desc & reserved)
            device_fail("wgmma: the %s descriptor 0x%016llx sets reserved bits (0x%016llx)", which,
                        (unsigned long long)desc, (unsigned long long)(desc & reserved));
        if (f.base)
            device_fail("wgmma: the %s descriptor 0x%016llx has base offset %d: not emulated (the "
                        "PTX ISA's rule for it is not confirmed; align the operand to its "
                        "swizzle pattern and use base offset 0)",
                        which, (unsigned long long)desc, f.base);
        if (f.span && trans && R % (f.span / 2))
            device_fail("wgmma: the %s operand is MN-major with a %dB swizzle, so its %d rows (M "
                        "or N) must be a multiple of the %d elements of a swizzled line",
                        which, f.span, R, f.span / 2);
        if (f.span) {
            const uint64_t rep = 8u * (uint64_t)f.span, s = f.start % rep;
            const bool start_ok = trans ? s == 0 : (s < (uint64_t)f.span && s % 32 == 0);
            if (!start_ok)
                device_fail(
                    "wgmma: the %s operand's start address 0x%llx (%s, %dB swizzle) is not "
                    "emulated: %s (a start elsewhere shifts the swizzle pattern in a way the PTX "
                    "ISA leaves to the base offset, unconfirmed)",
                    which, (unsigned long long)f.start, major, f.span,
                    trans ? "an MN-major swizzled operand must start at a multiple of the pattern "
                            "repeat (8 x the span)"
                          : "a K-major swizzled operand must start in the first line of a pattern "
                            "repeat, at a multiple of 32 bytes (the K step)");
            if (f.sbo % rep || (trans && R > f.span / 2 && f.lbo % rep))
                device_fail("wgmma: the %s descriptor's %s (%llu bytes) is not a multiple of the "
                            "%dB swizzle pattern repeat (%llu bytes): not emulated",
                            which, f.sbo % rep ? "stride byte offset" : "leading byte offset",
                            (unsigned long long)(f.sbo % rep ? f.sbo : f.lbo), f.span,
                            (unsigned long long)rep);
        }
    }
    /* one 16-byte chunk at a time: 8 consecutive k (K-major) or 8 consecutive r (MN-major) */
    const int E = f.span / 2; /* elements per swizzled line */
    const int nchunks = trans ? (R / 8) * 16 : R * 2;
    for (int c = 0; c < nchunks; c++) {
        uint64_t off;
        int r0, k0;
        if (!trans) {
            r0 = c / 2, k0 = 8 * (c % 2);
            off = f.span ? (uint64_t)(r0 / 8) * f.sbo + (uint64_t)(r0 % 8) * f.span + 16u * (c % 2)
                         : (uint64_t)(r0 / 8) * f.sbo + (uint64_t)(c % 2) * f.lbo + 16u * (r0 % 8);
        } else {
            r0 = 8 * (c / 16), k0 = c % 16;
            off = f.span ? (uint64_t)(r0 / E) * f.lbo + (uint64_t)(k0 / 8) * f.sbo +
                               (uint64_t)(k0 % 8) * f.span + 2u * (r0 % E)
                         : (uint64_t)(r0 / 8) * f.sbo + (uint64_t)(k0 / 8) * f.lbo + 16u * (k0 % 8);
        }
        const uint64_t sa = swizzle_sa(f.start + off, f.span);
        const unsigned char *p = (const unsigned char *)smem_ptr(sa, 16);
        if (!issue && !p) device_fail("wgmma: an operand left shared memory while in flight");
        if (issue) {
            if (!p)
                device_fail("wgmma: the %s operand (descriptor 0x%016llx, %s) reaches shared "
                            "address 0x%llx (rows %d.., k %d..), outside shared memory (%s)",
                            which, (unsigned long long)desc, major, (unsigned long long)sa, r0, k0,
                            describe_smem_window().c_str());
            for (const tma_copy &t : H.inflight)
                if (p < t.dst + t.bytes && t.dst < p + 16)
                    device_fail("wgmma: the %s operand reads shared memory [%p, +16) that a "
                                "cp.async.bulk.tensor issued by thread %d still writes (wait on "
                                "its mbarrier, %p, first)",
                                which, (const void *)p, t.issuer, (void *)t.bar);
            if (!async_read16_visible(p))
                device_fail("wgmma: the %s operand reads shared memory [%p, +16) that ordinary "
                            "stores changed with no fence.proxy.async since: wgmma reads through "
                            "the async proxy, which may not see them (each writing thread: "
                            "fence.proxy.async.shared::cta, then the barrier)",
                            which, (const void *)p);
        }
        uint16_t v[8];
        memcpy(v, p, 16);
        for (int e = 0; e < 8; e++) {
            if (!trans)
                out[r0 * 16 + k0 + e] = v[e];
            else
                out[(r0 + e) * 16 + k0] = v[e];
        }
    }
}

struct mma_payload {
    float *d;
    const uint32_t *a;
    uint64_t da, db;
    int32_t scale_d;
};
static_assert(sizeof(mma_payload) <= SG_SIM_WARP_PAYLOAD, "wgmma payload too large");
struct mma_ctx {
    int n, ta, tb, rs;
};

wg_state &my_wg() {
    const int g = current_thread() / 128;
    return H.wg[g];
}

void mma_issue(const void *const in[128], const void *ctxp) {
    const mma_ctx &x = *static_cast<const mma_ctx *>(ctxp);
    const mma_payload *p[128];
    for (int t = 0; t < 128; t++) p[t] = static_cast<const mma_payload *>(in[t]);
    wg_state &w = my_wg();
    for (int t = 1; t < 128; t++) {
        if ((!x.rs && p[t]->da != p[0]->da) || p[t]->db != p[0]->db)
            device_fail("wgmma.mma_async: the matrix descriptors differ across the warpgroup "
                        "(thread %d: A 0x%016llx B 0x%016llx; thread 0: A 0x%016llx B 0x%016llx); "
                        "they must be the same in all its warps",
                        t, (unsigned long long)p[t]->da, (unsigned long long)p[t]->db,
                        (unsigned long long)p[0]->da, (unsigned long long)p[0]->db);
        if ((p[t]->scale_d != 0) != (p[0]->scale_d != 0))
            device_fail("wgmma.mma_async: scale-d differs across the warpgroup (thread %d: %d, "
                        "thread 0: %d)",
                        t, p[t]->scale_d, p[0]->scale_d);
    }
    for (int t = 0; t < 128; t++)
        if (!w.fenced[t])
            device_fail("wgmma.mma_async: thread %d of the warpgroup executed no wgmma.fence since "
                        "the warpgroup's last wgmma.wait_group (or the kernel's start): the "
                        "register accesses before it are not ordered with the wgmma",
                        t);
    if (w.nops == w.ops.size()) w.ops.emplace_back();
    wg_op &op = w.ops[w.nops];
    op.n = x.n, op.ta = x.ta, op.tb = x.tb, op.rs = x.rs != 0;
    op.scale_d = p[0]->scale_d != 0;
    op.da = p[0]->da, op.db = p[0]->db;
    op.group = w.committed;
    op.issuer = current_thread();
    if (op.rs) {
        for (int t = 0; t < 128; t++) {
            op.ap[t] = p[t]->a;
            memcpy(op.av[t], p[t]->a, 16);
            const int wq = t / 32, g = (t % 32) / 4, q = t % 4;
            for (int j = 0; j < 4; j++) {
                const int m = 16 * wq + g + 8 * (j % 2), k = 2 * q + 8 * (j / 2);
                op.A[m * 16 + k] = (uint16_t)(op.av[t][j] & 0xffffu);
                op.A[m * 16 + k + 1] = (uint16_t)(op.av[t][j] >> 16);
            }
        }
    } else {
        gather(op.da, 64, op.ta, op.A, true, "A");
    }
    gather(op.db, x.n, op.tb, op.B, true, "B");
    /* the accumulator chain */
    const int nr = x.n / 2;
    int ci = -1;
    for (size_t c = 0; c < w.chains.size(); c++)
        if (w.chains[c].live && w.chains[c].d[0] == p[0]->d) ci = (int)c;
    if (ci >= 0) {
        wg_chain &ch = w.chains[ci];
        for (int t = 0; t < 128; t++)
            if (ch.d[t] != p[t]->d)
                device_fail("wgmma.mma_async: thread 0 accumulates into the registers of an "
                            "in-flight wgmma, thread %d into others",
                            t);
        if (ch.n != x.n)
            device_fail("wgmma.mma_async: an m64n%dk16 accumulates into the registers of an "
                        "in-flight m64n%dk16 (only mma_asyncs of the same shape are ordered on "
                        "the same accumulator; wgmma.wait_group first)",
                        x.n, ch.n);
    } else {
        for (int t = 0; t < 128; t++)
            for (const wg_chain &ch : w.chains)
                if (ch.live && p[t]->d < ch.d[t] + ch.n / 2 && ch.d[t] < p[t]->d + nr)
                    device_fail("wgmma.mma_async: thread %d's accumulator registers overlap those "
                                "of an in-flight wgmma without being the same registers",
                                t);
        for (size_t c = 0; c < w.chains.size() && ci < 0; c++)
            if (!w.chains[c].live) ci = (int)c;
        if (ci < 0) {
            w.chains.emplace_back();
            ci = (int)w.chains.size() - 1;
        }
        wg_chain &ch = w.chains[ci];
        ch.live = true;
        ch.n = x.n;
        ch.pending = 0;
        ch.acc.resize(64 * 256);
        for (int t = 0; t < 128; t++) {
            ch.d[t] = p[t]->d;
            for (int i = 0; i < nr; i++) {
                int row, col;
                acc_pos(t, i, &row, &col);
                ch.acc[row * x.n + col] = p[t]->d[i]; /* C: the registers at issue */
                memcpy(&p[t]->d[i], &ACC_POISON, 4);
            }
        }
    }
    op.chain = ci;
    w.chains[ci].pending++;
    w.nops++;
}

/* D = A * B + (scale_d ? acc : 0) into acc (64 x n) */
void mma_compute(const wg_op &op, float *acc) {
    const int n = op.n;
    double Bd[16][256];
    for (int j = 0; j < n; j++)
        for (int k = 0; k < 16; k++) Bd[k][j] = bf16f(op.B[j * 16 + k]);
    double s[256];
    for (int m = 0; m < 64; m++) {
        for (int j = 0; j < n; j++) s[j] = 0.0;
        for (int k = 0; k < 16; k++) { /* k order, exact products, one sum per column */
            const double a = bf16f(op.A[m * 16 + k]);
            for (int j = 0; j < n; j++) s[j] += a * Bd[k][j];
        }
        for (int j = 0; j < n; j++) {
            float r = (float)(s[j] + (op.scale_d ? (double)acc[m * n + j] : 0.0));
            if (r != r) r = __uint_as_float(0x7fffffffu);
            acc[m * n + j] = r;
        }
    }
}

void retire(wg_state &w, wg_op &op) {
    static uint16_t again[256 * 16];
    if (!op.rs) {
        gather(op.da, 64, op.ta, again, false, "A");
        if (memcmp(again, op.A, 64 * 16 * 2))
            device_fail("wgmma: the shared-memory operand A (descriptor 0x%016llx) of a "
                        "wgmma.mma_async issued by thread %d was written while it was in flight "
                        "(before the wgmma.wait_group that retires it)",
                        (unsigned long long)op.da, op.issuer);
    } else {
        for (int t = 0; t < 128; t++)
            if (memcmp(op.ap[t], op.av[t], 16))
                device_fail("wgmma: thread %d wrote the A-fragment registers of a "
                            "wgmma.mma_async while it was in flight (before the "
                            "wgmma.wait_group that retires it)",
                            t);
    }
    gather(op.db, op.n, op.tb, again, false, "B");
    if (memcmp(again, op.B, (size_t)op.n * 16 * 2))
        device_fail("wgmma: the shared-memory operand B (descriptor 0x%016llx) of a "
                    "wgmma.mma_async issued by thread %d was written while it was in flight "
                    "(before the wgmma.wait_group that retires it)",
                    (unsigned long long)op.db, op.issuer);
    wg_chain &ch = w.chains[op.chain];
    mma_compute(op, ch.acc.data());
    if (--ch.pending) return;
    for (int t = 0; t < 128; t++)
        for (int i = 0; i < ch.n / 2; i++) {
            uint32_t v;
            memcpy(&v, &ch.d[t][i], 4);
            if (v != ACC_POISON)
                device_fail("wgmma: thread %d wrote accumulator register %d of a wgmma.mma_async "
                            "while it was in flight (before the wgmma.wait_group that retires "
                            "it)",
                            t, i);
        }
    for (int t = 0; t < 128; t++)
        for (int i = 0; i < ch.n / 2; i++) {
            int row, col;
            acc_pos(t, i, &row, &col);
            ch.d[t][i] = ch.acc[row * ch.n + col];
        }
    ch.live = false;
}

void wg_fence_fn(const void *const[128], const void *) {
    wg_state &w = my_wg();
    for (int t = 0; t < 128; t++) w.fenced[t] = true;
}

void wg_commit_fn(const void *const[128], const void *) {
    my_wg().committed++;
}

void wg_wait_fn(const void *const[128], const void *ctxp) {
    const int n = *static_cast<const int *>(ctxp);
    wg_state &w = my_wg();
    for (int t = 0; t < 128; t++) w.fenced[t] = false;
    if (w.committed <= (uint64_t)n) return;
    const uint64_t done = w.committed - (uint64_t)n; /* groups [0, done) complete */
    size_t k = 0;
    for (size_t i = 0; i < w.nops; i++) {
        if (w.ops[i].group < done) {
            retire(w, w.ops[i]);
        } else {
            if (k != i) std::swap(w.ops[k], w.ops[i]);
            k++;
        }
    }
    w.nops = k;
}

/* ---- setmaxnreg ---- */

void setmaxnreg_fn(const void *const in[128], const void *) {
    int v[2];
    memcpy(v, in[0], sizeof v);
    const int inc = v[0], count = v[1];
    wg_state &w = my_wg();
    if (w.regs >= 0 && inc && w.regs > count)
        device_fail("setmaxnreg.inc %d: the warpgroup already owns %d registers per thread (.inc "
                    "must not lower the count)",
                    count, w.regs);
    if (w.regs >= 0 && !inc && w.regs < count)
        device_fail("setmaxnreg.dec %d: the warpgroup owns only %d registers per thread (.dec "
                    "must not raise the count)",
                    count, w.regs);
    w.regs = count;
    const int groups = block_threads() / 128;
    int total = 0;
    for (int g = 0; g < groups; g++) {
        if (H.wg[g].regs < 0) return;
        total += H.wg[g].regs * 128;
    }
    if (block_threads() % 128 == 0 && total > 65536)
        device_fail("setmaxnreg: the block's warpgroups ask for %d registers in all, more than "
                    "the 65536 of an SM's register file (setmaxnreg.inc would wait forever)",
                    total);
}

/* ---- stmatrix ---- */

struct stm_payload {
    void *row;
    uint32_t r[4];
};
struct stm_ctx {
    int num, trans;
};

void stmatrix_fn(const void *const in[32], void *const[32], const void *ctxp) {
    const stm_ctx &c = *static_cast<const stm_ctx *>(ctxp);
    uint16_t M[4][8][8];
    for (int l = 0; l < 32; l++) {
        const stm_payload &p = *static_cast<const stm_payload *>(in[l]);
        const int a = l / 4, e = 2 * (l % 4);
        for (int i = 0; i < c.num; i++) {
            const uint16_t lo = (uint16_t)(p.r[i] & 0xffffu), hi = (uint16_t)(p.r[i] >> 16);
            if (!c.trans) {
                M[i][a][e] = lo;
                M[i][a][e + 1] = hi;
            } else { /* lane l holds column l / 4, rows 2 (l % 4) and 2 (l % 4) + 1 */
                M[i][e][a] = lo;
                M[i][e + 1][a] = hi;
            }
        }
    }
    for (int i = 0; i < c.num; i++)
        for (int r = 0; r < 8; r++) {
            const stm_payload &p = *static_cast<const stm_payload *>(in[8 * i + r]);
            memcpy(p.row, M[i][r], 16);
        }
}

} // namespace

/* ---- the block's life (sim_exec.cpp) ---- */

void hopper_launch_begin(size_t dyn_bytes) {
    H.dyn_bytes = dyn_bytes;
    H.used = false;
    H.shadow_ready = false;
}

void hopper_block_begin() {
    H.used = false; /* the state is reset at the block's first Hopper operation (touch) */
}

void hopper_thread_exit(int linear) {
    if (!H.used) return;
    const wg_state &w = H.wg[linear / 128];
    for (const wg_chain &c : w.chains)
        if (c.live)
            device_fail("the thread exits while a wgmma.mma_async of its warpgroup accumulating "
                        "into its registers is in flight (wgmma.wait_group first)");
}

int hopper_idle(std::string &err) {
    if (!H.used || H.inflight.empty()) return 0;
    int landed = 0;
    err = land_copies(0, true, &landed);
    if (!err.empty()) return -1;
    return landed > 0;
}

bool hopper_block_end(std::string &err) {
    if (!H.used) return true;
    char s[400];
    if (!H.inflight.empty()) {
        const tma_copy &c = H.inflight[0];
        snprintf(s, sizeof s,
                 "%zu cp.async.bulk.tensor copies were still in flight when every thread had "
                 "exited (the first issued by thread %d into shared memory [%p, +%u), completing "
                 "on the mbarrier at %p): nothing waited for them",
                 H.inflight.size(), c.issuer, (void *)c.dst, c.bytes, (void *)c.bar);
        err = s;
        return false;
    }
    for (int g = 0; g < MAX_WG; g++)
        if (H.wg[g].nops) {
            snprintf(s, sizeof s,
                     "%zu wgmma.mma_async of warpgroup %d were never retired by a "
                     "wgmma.wait_group",
                     H.wg[g].nops, g);
            err = s;
            return false;
        }
    return true;
}

std::string mbar_describe(const void *bar) {
    const mbar *b = find_bar(bar);
    return b ? bar_state(*b) : std::string("not a live mbarrier");
}

const char *warpgroup_op_name(int op) {
    static char b[120];
    if (op == 0x1001) return "wgmma.fence.sync.aligned";
    if (op == 0x1002) return "wgmma.commit_group.sync.aligned";
    if (op >= 0x2000 && op < 0x3000) {
        snprintf(b, sizeof b, "wgmma.wait_group.sync.aligned %d", op - 0x2000);
        return b;
    }
    if (op >= 0x4000 && op < 0x5000) {
        snprintf(b, sizeof b, "setmaxnreg.%s.sync.aligned.u32 %d", op & 0x400 ? "inc" : "dec",
                 op & 0x3ff);
        return b;
    }
    if (op >= 0x10000) {
        const int v = op - 0x10000;
        snprintf(b, sizeof b,
                 "wgmma.mma_async.sync.aligned.m64n%dk16.f32.bf16.bf16 (A %s, "
                 "trans-a %d, trans-b %d)",
                 v >> 3, v & 4 ? "registers" : "shared", (v >> 1) & 1, v & 1);
        return b;
    }
    return "?";
}

/* ---- the instructions ---- */

void mbar_init(void *bar, unsigned count) {
    touch();
    if ((uintptr_t)bar % 8 || !in_shared(bar, 8))
        device_fail("mbarrier.init: %p is not an 8-byte aligned address in shared memory (%s%s)",
                    bar, describe_shared().c_str(), shared_hint(bar).c_str());
    if (count < 1 || count > (1u << 20) - 1)
        device_fail("mbarrier.init: count %u is outside [1, 2^20 - 1]", count);
    if (find_bar(bar))
        device_fail("mbarrier.init on the live mbarrier at %p (undefined: mbarrier.inval first)",
                    bar);
    mbar b;
    b.addr = (uintptr_t)bar;
    b.expected = count;
    b.pending = count;
    b.init_thread = current_thread();
    b.init_gen = syncthreads_generation();
    b.valid = true;
    b.marker = 0x5347424152000000ull ^ (uint64_t)b.addr; /* never a plausible stored value */
    memcpy(bar, &b.marker, 8);
    for (mbar &o : H.bars) /* an invalidated slot first: a persistent kernel re-initialises */
        if (!o.valid) {
            o = b;
            return;
        }
    H.bars.push_back(b);
}

void mbar_inval(void *bar) {
    mbar *b = use_bar(bar, "mbarrier.inval");
    for (const tma_copy &c : H.inflight)
        if (c.bar == b->addr)
            device_fail("mbarrier.inval of the mbarrier at %p while a cp.async.bulk.tensor that "
                        "completes on it is in flight",
                        bar);
    b->valid = false;
}

void fence_mbar_init() {
    touch();
    const int me = current_thread();
    for (mbar &b : H.bars)
        if (b.valid && b.init_thread == me) b.fenced = true;
}

void fence_proxy_async() {
    fence_mbar_init(); /* it orders the thread's prior inits with the async proxy too */
    ensure_shadow();
    H.fence_gen++;
}

void mbar_arrive(void *bar, int expect_tx, unsigned bytes) {
    mbar *b = use_bar(bar, expect_tx ? "mbarrier.arrive.expect_tx" : "mbarrier.arrive");
    if (expect_tx) b->tx += bytes;
    if (b->pending == 0)
        device_fail("%s: more arrivals on the mbarrier at %p than its expected count %u in "
                    "phase %llu (%s)",
                    expect_tx ? "mbarrier.arrive.expect_tx" : "mbarrier.arrive", bar, b->expected,
                    (unsigned long long)b->phase, bar_state(*b).c_str());
    b->pending--;
    std::string e = settle(*b);
    if (!e.empty()) device_fail("%s", e.c_str());
}

void mbar_expect_tx(void *bar, unsigned bytes) {
    mbar *b = use_bar(bar, "mbarrier.expect_tx");
    b->tx += bytes;
    std::string e = settle(*b);
    if (!e.empty()) device_fail("%s", e.c_str());
}

bool mbar_wait(void *bar, unsigned parity, int blocking) {
    const char *what = blocking ? "mbarrier.try_wait.parity" : "mbarrier.test_wait.parity";
    mbar *b = use_bar(bar, what);
    if (parity > 1) device_fail("%s: parity %u is not 0 or 1", what, parity);
    const int me = current_thread();
    if ((b->phase & 1) == parity) { /* the phase of that parity is the current one */
        std::string e = land_copies(b->addr, false, nullptr);
        if (!e.empty()) device_fail("%s", e.c_str());
        b = find_bar(bar);
    }
    if ((b->phase & 1) != parity) {
        H.spins[me] = 0;
        return true;
    }
    if (!blocking) {
        if (++H.spins[me] > (1u << 20))
            device_fail("%s: polled the mbarrier at %p 2^20 times without its phase of parity %u "
                        "completing (%s): a deadlock",
                        what, bar, parity, bar_state(*b).c_str());
        yield_thread();
        return false;
    }
    const uint64_t target = b->phase + 1;
    for (;;) {
        mbar_block(bar, parity);
        b = find_bar(bar);
        if (!b)
            device_fail("%s: the mbarrier at %p was invalidated while this thread waited", what,
                        bar);
        if (b->phase > target)
            device_fail("%s: the mbarrier at %p completed two phases while this thread waited for "
                        "the phase of parity %u: the parity no longer names the phase it waits for "
                        "(a producer ran more than one phase ahead of this waiter)",
                        what, bar, parity);
        if (b->phase == target) return true;
    }
}

void tma_load(int dims, void *dst, const void *tensor_map, void *bar, const int *coords) {
    touch();
    char what[64];
    snprintf(what, sizeof what, "cp.async.bulk.tensor.%dd", dims);
    if ((uintptr_t)tensor_map % 64)
        device_fail("%s: the tensor map at %p is not 64-byte aligned", what, tensor_map);
    if (in_shared(tensor_map, sizeof(CUtensorMap)))
        device_fail("%s: the tensor map at %p is in shared memory; pass it as a const "
                    "__grid_constant__ kernel parameter (or in constant or global memory)",
                    what, tensor_map);
    tma_copy c;
    memcpy(&c.m, tensor_map, sizeof c.m);
    const tmap_enc &m = c.m;
    if (m.magic != TM_MAGIC || m.checksum != tm_checksum(m))
        device_fail("%s: %p is not a tensor map encoded by cuTensorMapEncodeTiled (or it was "
                    "modified since)",
                    what, tensor_map);
    if (m.mode != TM_TILED)
        device_fail("%s: the tensor map was encoded by cuTensorMapEncodeIm2col; a .tile copy needs "
                    "one from cuTensorMapEncodeTiled (the emulation has no .im2col copy)",
                    what);
    if (m.rank != dims) device_fail("%s: the tensor map has rank %d", what, m.rank);
    uint64_t bytes = m.esize;
    for (int i = 0; i < m.rank; i++)
        bytes *= i == 0 ? m.box[0] : (uint64_t)(m.box[i] + m.estride[i] - 1) / m.estride[i];
    c.bytes = (uint32_t)bytes;
    if ((uintptr_t)dst % 128 || !in_shared(dst, bytes))
        device_fail("%s: the destination [%p, +%llu) is not 128-byte aligned inside shared memory "
                    "(%s%s)",
                    what, dst, (unsigned long long)bytes, describe_shared().c_str(),
                    shared_hint(dst).c_str());
    c.dst = (unsigned char *)dst;
    c.dst_sa = smem_addr(dst);
    const int span = swizzle_span(m.swizzle);
    if (span && c.dst_sa % (8u * span))
        device_fail("%s: the destination's shared address 0x%x is not a multiple of the %dB "
                    "swizzle pattern's repeat, %d bytes: not emulated (the pattern is a function "
                    "of the address bits; round the buffer up with sg_smem_align)",
                    what, c.dst_sa, span, 8 * span);
    mbar *b = use_bar(bar, what);
    if (!b->fenced)
        device_fail("%s: its mbarrier (%p) was initialised without a fence.mbarrier_init (or "
                    "fence.proxy.async) after it in the initialising thread: the copy engine may "
                    "not see the initialisation",
                    what, bar);
    c.bar = (uintptr_t)bar;
    if (!find_range((const void *)(uintptr_t)m.addr, tm_extent(m)))
        device_fail("%s: the tensor map's memory [%p, +%llu) is no longer inside a live "
                    "allocation (%s)",
                    what, (void *)(uintptr_t)m.addr, (unsigned long long)tm_extent(m),
                    describe_address((const void *)(uintptr_t)m.addr).c_str());
    for (const tma_copy &o : H.inflight)
        if (c.dst < o.dst + o.bytes && o.dst < c.dst + c.bytes)
            device_fail("%s: the destination [%p, +%u) overlaps [%p, +%u) of a copy still in "
                        "flight (issued by thread %d): two unordered writes",
                        what, dst, c.bytes, (void *)o.dst, o.bytes, o.issuer);
    for (const mbar &o : H.bars)
        if (o.valid && o.addr < (uintptr_t)c.dst + c.bytes && (uintptr_t)c.dst < o.addr + 8)
            device_fail("%s: the destination [%p, +%u) covers the live mbarrier at %p", what, dst,
                        c.bytes, (void *)o.addr);
    /* Measured on an H200 (2026-11-28, bench/results/2026-11-28-nvidia-h200-run-3.md): a
     * tile-mode box whose innermost coordinate is not at a multiple of 16 bytes faults with
     * "an illegal instruction" (inside or outside the tensor, any swizzle; at 0, 8, 16, 24, 32,
     * 40, 56, 80, 88 and -8, -16 bf16 elements it copies, at 1, 2, 4, 36, 60, 90, -3 and -4 it
     * faults); the other coordinates take any value. */
    if (((int64_t)coords[0] * (int64_t)m.esize) % 16)
        device_fail("%s: the box's innermost coordinate %d (x %u bytes) is not a multiple of 16 "
                    "bytes: the GPU faults with an illegal instruction",
                    what, coords[0], (unsigned)m.esize);
    for (int i = 0; i < 5; i++) c.coord[i] = i < dims ? coords[i] : 0;
    c.issuer = current_thread();
    memset(dst, 0xFF, bytes); /* in flight: a read before the mbarrier wait reads poison */
    H.inflight.push_back(c);
}

void wgmma_fence() {
    touch();
    warpgroup_collective(0x1001, nullptr, 0, wg_fence_fn, nullptr);
}

void wgmma_commit() {
    touch();
    warpgroup_collective(0x1002, nullptr, 0, wg_commit_fn, nullptr);
}

void wgmma_wait(int n) {
    touch();
    if (n < 0 || n >= 0x1000)
        device_fail("wgmma.wait_group %d: N must be a small non-negative "
                    "constant",
                    n);
    warpgroup_collective(0x2000 + n, nullptr, 0, wg_wait_fn, &n);
}

/* wgmma.mma_async instructions issued (per thread), since the process started: a test asks
 * (sg_sim_wgmma_count) whether a step ran the wgmma kernels at all */
static std::atomic<uint64_t> wgmma_issued{0};

void wgmma_bf16(int n, int trans_a, int trans_b, float *d, const uint32_t *a, uint64_t desc_a,
                uint64_t desc_b, int scale_d) {
    touch();
    wgmma_issued.fetch_add(1, std::memory_order_relaxed);
    if (n < 8 || n > 256 || n % 8 || trans_a < 0 || trans_a > 1 || trans_b < 0 || trans_b > 1 ||
        (a && trans_a))
        device_fail("wgmma.mma_async: m64n%dk16 with trans-a %d trans-b %d (A %s) is not a bf16 "
                    "form",
                    n, trans_a, trans_b, a ? "in registers" : "in shared memory");
    const mma_ctx ctx = {n, trans_a, trans_b, a != nullptr};
    const mma_payload p = {d, a, desc_a, desc_b, scale_d};
    const int op = 0x10000 + (n << 3) + (a ? 4 : 0) + (trans_a << 1) + trans_b;
    warpgroup_collective(op, &p, sizeof p, mma_issue, &ctx);
}

bool elect_one(unsigned mask) {
    const int lane = warp_rendezvous(WOP_ELECT, mask, nullptr, 0, nullptr);
    /* deterministic, as the ISA requires, and not lane 0: which lane is unspecified */
    return lane == 31 - __builtin_clz(mask);
}

void setmaxnreg(int inc, int count) {
    touch();
    if (count < 24 || count > 256 || count % 8)
        device_fail("setmaxnreg.%s %d: the count must be a multiple of 8 in [24, 256]",
                    inc ? "inc" : "dec", count);
    const int v[2] = {inc, count};
    warpgroup_collective(0x4000 + (inc ? 0x400 : 0) + count, v, sizeof v, setmaxnreg_fn, nullptr);
}

void stmatrix_b16(int num, int trans, void *row_addr, const uint32_t *r) {
    if ((num != 1 && num != 2 && num != 4) || (trans != 0 && trans != 1))
        device_fail("stmatrix: .x%d%s is not an m8n8 b16 form", num, trans ? ".trans" : "");
    const int op = (num == 1   ? WOP_STMATRIX_X1
                    : num == 2 ? WOP_STMATRIX_X2
                               : WOP_STMATRIX_X4) +
                   (trans ? WOP_STMATRIX_X1_TRANS - WOP_STMATRIX_X1 : 0);
    const unsigned lane = (unsigned)current_lane();
    if (lane < 8u * (unsigned)num) {
        if ((uintptr_t)row_addr % 16)
            device_fail("stmatrix.x%d%s: lane %u's row address %p is not 16-byte aligned", num,
                        trans ? ".trans" : "", lane, row_addr);
        if (!in_shared(row_addr, 16))
            device_fail("stmatrix.x%d%s: lane %u's row address %p: its 16 bytes are not inside "
                        "shared memory (%s)",
                        num, trans ? ".trans" : "", lane, row_addr, describe_shared().c_str());
    }
    stm_payload p;
    p.row = row_addr;
    for (int i = 0; i < 4; i++) p.r[i] = i < num ? r[i] : 0;
    const stm_ctx ctx = {num, trans};
    warp_collective(op, 0xffffffffu, &p, sizeof p, stmatrix_fn, &ctx, nullptr, 0);
}

} // namespace sg_sim

/* ---- the driver API's tensor maps ---- */

using namespace sg_sim;

namespace {

int esize_of(int dt) {
    switch (dt) {
    case CU_TENSOR_MAP_DATA_TYPE_UINT8:
        return 1;
    case CU_TENSOR_MAP_DATA_TYPE_UINT16:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16:
        return 2;
    case CU_TENSOR_MAP_DATA_TYPE_UINT32:
    case CU_TENSOR_MAP_DATA_TYPE_INT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ:
        return 4;
    case CU_TENSOR_MAP_DATA_TYPE_UINT64:
    case CU_TENSOR_MAP_DATA_TYPE_INT64:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT64:
        return 8;
    }
    return 0;
}

bool is_float(int dt) {
    return dt >= CU_TENSOR_MAP_DATA_TYPE_FLOAT16 && dt <= CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ;
}

CUresult refuse(const char *fn, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
CUresult refuse(const char *fn, const char *fmt, ...) {
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    report("%s: %s (CUDA_ERROR_INVALID_VALUE)", fn, msg);
    return CUDA_ERROR_INVALID_VALUE;
}

/* The checks the two encoders share (the driver API documents them for both), and those the
 * emulation adds. Fills m's common fields. */
CUresult common_checks(const char *fn, tmap_enc &m, CUtensorMap *tensorMap, CUtensorMapDataType dt,
                       cuuint32_t rank, void *addr, const cuuint64_t *dim,
                       const cuuint64_t *strides, const cuuint32_t *estrides,
                       CUtensorMapInterleave il, CUtensorMapSwizzle sw, CUtensorMapL2promotion l2,
                       CUtensorMapFloatOOBfill oob) {
    if (!tensorMap || (uintptr_t)tensorMap % 64)
        return refuse(fn, "tensorMap %p is not 64-byte aligned", (void *)tensorMap);
    if ((int)dt < 0 || dt > CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B)
        return refuse(fn, "tensorDataType %d is not a CUtensorMapDataType", (int)dt);
    const int es = esize_of(dt);
    if (!es)
        return refuse(fn, "tensorDataType %d (a packed 4/6-bit type) is not emulated", (int)dt);
    if (dt == CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ || dt == CU_TENSOR_MAP_DATA_TYPE_TFLOAT32 ||
        dt == CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ)
        return refuse(fn,
                      "tensorDataType %d (FTZ or TF32: a conversion the copy engine applies) "
                      "is not emulated",
                      (int)dt);
    if ((int)il < 0 || il > CU_TENSOR_MAP_INTERLEAVE_32B)
        return refuse(fn, "interleave %d is not a CUtensorMapInterleave", (int)il);
    if (il != CU_TENSOR_MAP_INTERLEAVE_NONE && rank < 3)
        return refuse(fn, "tensorRank %u: an interleaved layout needs rank >= 3", rank);
    if (!addr || (uintptr_t)addr % (il == CU_TENSOR_MAP_INTERLEAVE_32B ? 32 : 16))
        return refuse(fn, "globalAddress %p is not %d-byte aligned", addr,
                      il == CU_TENSOR_MAP_INTERLEAVE_32B ? 32 : 16);
    if ((int)sw < 0 || sw > CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B)
        return refuse(fn, "swizzle %d is not a CUtensorMapSwizzle", (int)sw);
    if (il == CU_TENSOR_MAP_INTERLEAVE_32B && sw != CU_TENSOR_MAP_SWIZZLE_32B)
        return refuse(fn, "interleave 32B requires swizzle 32B");
    if ((int)l2 < 0 || l2 > CU_TENSOR_MAP_L2_PROMOTION_L2_256B)
        return refuse(fn, "l2Promotion %d is not a CUtensorMapL2promotion", (int)l2);
    if ((int)oob < 0 || oob > CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA)
        return refuse(fn, "oobFill %d is not a CUtensorMapFloatOOBfill", (int)oob);
    if (oob == CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA && !is_float(dt))
        return refuse(fn, "oobFill NAN_REQUEST_ZERO_FMA needs a floating-point tensorDataType");
    for (cuuint32_t i = 0; i < rank; i++)
        if (dim[i] == 0 || dim[i] > (1ull << 32))
            return refuse(fn, "globalDim[%u] = %llu is outside [1, 2^32]", i,
                          (unsigned long long)dim[i]);
    const unsigned smul = il == CU_TENSOR_MAP_INTERLEAVE_32B ? 32 : 16;
    for (cuuint32_t i = 0; i + 1 < rank; i++) {
        if (strides[i] % smul || strides[i] >= (1ull << 40))
            return refuse(fn, "globalStrides[%u] = %llu is not a multiple of %u below 2^40", i,
                          (unsigned long long)strides[i], smul);
        /* the documented construction: each stride includes the previous dimension's; the
         * emulation holds every map to it (overlapping views: not emulated) */
        const uint64_t inner = i == 0 ? dim[0] * (uint64_t)es : strides[i - 1] * dim[i];
        if (strides[i] < inner)
            return refuse(fn,
                          "globalStrides[%u] = %llu is below %llu, the extent of the "
                          "dimensions inside it (overlapping strides are not emulated)",
                          i, (unsigned long long)strides[i], (unsigned long long)inner);
    }
    for (cuuint32_t i = 0; i < rank; i++)
        if (estrides[i] < 1 || estrides[i] > 8)
            return refuse(fn, "elementStrides[%u] = %u is outside [1, 8]", i, estrides[i]);
    /* emulation limits: what the emulated copy engine cannot place exactly */
    if (il != CU_TENSOR_MAP_INTERLEAVE_NONE)
        return refuse(fn, "interleave %d: interleaved layouts are not emulated", (int)il);
    if (sw > CU_TENSOR_MAP_SWIZZLE_128B)
        return refuse(fn, "swizzle %d (the 128B atom variants) is not emulated", (int)sw);
    if (oob != CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
        return refuse(fn, "oobFill NAN_REQUEST_ZERO_FMA is not emulated (its NaN's bits are not "
                          "documented)");
    if (sw != CU_TENSOR_MAP_SWIZZLE_NONE && (uintptr_t)addr % 128)
        return refuse(fn,
                      "globalAddress %p: a swizzled map's global memory must be 128-byte "
                      "aligned (the programming guide's TMA swizzle table)",
                      addr);
    memset(&m, 0, sizeof m);
    m.magic = TM_MAGIC;
    m.rank = (uint8_t)rank;
    m.dtype = (uint8_t)dt;
    m.esize = (uint8_t)es;
    m.interleave = (uint8_t)il;
    m.swizzle = (uint8_t)sw;
    m.l2 = (uint8_t)l2;
    m.oob = (uint8_t)oob;
    m.addr = (uint64_t)(uintptr_t)addr;
    for (cuuint32_t i = 0; i < rank; i++) {
        m.dim_m1[i] = (uint32_t)(dim[i] - 1);
        m.stride[i] = i == 0 ? (uint64_t)es : strides[i - 1];
        m.estride[i] = (uint8_t)estrides[i];
    }
    if (!find_range(addr, tm_extent(m)))
        return refuse(fn,
                      "the tensor [%p, +%llu) (its dims and strides) is not inside one live "
                      "allocation (%s)",
                      addr, (unsigned long long)tm_extent(m), describe_address(addr).c_str());
    return CUDA_SUCCESS;
}

} // namespace

extern "C" {

/* the emulation's own query (no CUDA call has it): wgmma.mma_async instructions issued so far */
uint64_t sg_sim_wgmma_count(void) {
    return wgmma_issued.load(std::memory_order_relaxed);
}

CUresult cuTensorMapEncodeTiled(CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType,
                                cuuint32_t tensorRank, void *globalAddress,
                                const cuuint64_t *globalDim, const cuuint64_t *globalStrides,
                                const cuuint32_t *boxDim, const cuuint32_t *elementStrides,
                                CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                                CUtensorMapL2promotion l2Promotion,
                                CUtensorMapFloatOOBfill oobFill) {
    const char *fn = "cuTensorMapEncodeTiled";
    if (tensorRank < 1 || tensorRank > 5)
        return refuse(fn, "tensorRank %u is outside [1, 5]", tensorRank);
    tmap_enc m;
    CUresult r =
        common_checks(fn, m, tensorMap, tensorDataType, tensorRank, globalAddress, globalDim,
                      globalStrides, elementStrides, interleave, swizzle, l2Promotion, oobFill);
    if (r != CUDA_SUCCESS) return r;
    for (cuuint32_t i = 0; i < tensorRank; i++)
        if (boxDim[i] < 1 || boxDim[i] > 256)
            return refuse(fn, "boxDim[%u] = %u is outside [1, 256]", i, boxDim[i]);
    const unsigned inner = boxDim[0] * m.esize;
    if (inner % 16)
        return refuse(fn, "boxDim[0] * elementSize = %u bytes is not a multiple of 16", inner);
    const int span = swizzle_span(swizzle);
    if (span && inner > (unsigned)span)
        return refuse(fn, "the box's inner dimension, %u bytes, exceeds the %dB swizzle", inner,
                      span);
    if (span && inner != (unsigned)span)
        return refuse(fn,
                      "the box's inner dimension, %u bytes, is narrower than the %dB swizzle: "
                      "not emulated (where such rows land is not documented)",
                      inner, span);
    m.mode = TM_TILED;
    for (cuuint32_t i = 0; i < tensorRank; i++) m.box[i] = (uint16_t)boxDim[i];
    m.checksum = tm_checksum(m);
    memset(tensorMap, 0, sizeof *tensorMap);
    memcpy(tensorMap, &m, sizeof m);
    return CUDA_SUCCESS;
}

CUresult cuTensorMapEncodeIm2col(CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType,
                                 cuuint32_t tensorRank, void *globalAddress,
                                 const cuuint64_t *globalDim, const cuuint64_t *globalStrides,
                                 const int *pixelBoxLowerCorner, const int *pixelBoxUpperCorner,
                                 cuuint32_t channelsPerPixel, cuuint32_t pixelsPerColumn,
                                 const cuuint32_t *elementStrides, CUtensorMapInterleave interleave,
                                 CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion,
                                 CUtensorMapFloatOOBfill oobFill) {
    const char *fn = "cuTensorMapEncodeIm2col";
    if (tensorRank < 3 || tensorRank > 5)
        return refuse(fn, "tensorRank %u is not 3, 4 or 5", tensorRank);
    tmap_enc m;
    CUresult r =
        common_checks(fn, m, tensorMap, tensorDataType, tensorRank, globalAddress, globalDim,
                      globalStrides, elementStrides, interleave, swizzle, l2Promotion, oobFill);
    if (r != CUDA_SUCCESS) return r;
    const int spatial = (int)tensorRank - 2;
    const int lim = tensorRank == 3 ? 32768 : tensorRank == 4 ? 128 : 16;
    for (int i = 0; i < spatial; i++) {
        const int lo = pixelBoxLowerCorner[i], up = pixelBoxUpperCorner[i];
        if (lo < -lim || lo > lim - 1 || up < -lim || up > lim - 1)
            return refuse(fn, "pixelBox corner %d (%d, %d) is outside [%d, %d] for rank %u", i, lo,
                          up, -lim, lim - 1, tensorRank);
        /* the corners are given {D, H, W}; globalDim is innermost first (C, W, H, D, N) */
        const int64_t extent = (int64_t)globalDim[spatial - i] + up - lo;
        if (extent <= 0)
            return refuse(fn,
                          "the bounding box along spatial dimension %d has no area "
                          "(dim %llu, corners %d, %d)",
                          i, (unsigned long long)globalDim[spatial - i], lo, up);
        m.lower[i] = (int16_t)lo;
        m.upper[i] = (int16_t)up;
    }
    if (channelsPerPixel < 1 || channelsPerPixel > 256)
        return refuse(fn, "channelsPerPixel %u is outside [1, 256]", channelsPerPixel);
    if (pixelsPerColumn < 1 || pixelsPerColumn > 1024)
        return refuse(fn, "pixelsPerColumn %u is outside [1, 1024]", pixelsPerColumn);
    const int span = swizzle_span(swizzle);
    if (span && channelsPerPixel * m.esize > (unsigned)span)
        return refuse(fn, "channelsPerPixel * elementSize = %u bytes exceeds the %dB swizzle",
                      channelsPerPixel * m.esize, span);
    m.mode = TM_IM2COL;
    m.channels = (uint16_t)channelsPerPixel;
    m.pixels = (uint16_t)pixelsPerColumn;
    m.checksum = tm_checksum(m);
    memset(tensorMap, 0, sizeof *tensorMap);
    memcpy(tensorMap, &m, sizeof m);
    return CUDA_SUCCESS;
}

} /* extern "C" */
