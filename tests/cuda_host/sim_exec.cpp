/* sim_exec.cpp — the execution model of cuda_sim.hpp: blocks in order, the threads of a block as
 * cooperative fibers, __syncthreads as a real barrier, the warp rendezvous, poisoned shared
 * memory, and the reports of barrier divergence, deadlock and warp-rule violations.
 *
 * Fibers switch with a hand-written x86-64 routine (the six callee-saved registers and the stack
 * pointer: a few ns, where swapcontext makes a signal-mask syscall per switch); other
 * architectures fall back to ucontext. MXCSR and the x87 control word are not switched: no
 * kernel changes them. Stacks are 64 KiB with a PROT_NONE guard page below, pooled and reused
 * across blocks and launches.
 */
#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#if !defined(__x86_64__)
#include <ucontext.h>
#endif
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

#include "sim_internal.hpp"

uint3 sg_sim_threadIdx, sg_sim_blockIdx;
dim3 sg_sim_blockDim, sg_sim_gridDim;

/* the shared-memory section: GNU ld defines these for a section named like an identifier */
extern "C" {
extern char __start_sg_sim_shared[] __attribute__((weak));
extern char __stop_sg_sim_shared[] __attribute__((weak));
extern char __bss_start[] __attribute__((weak)); /* GNU ld: the program's zeroed statics */
extern char _end[] __attribute__((weak));
}

#if defined(__x86_64__)
/* sg_sim_ctx_switch(save, load): push the callee-saved registers, store rsp in *save, load rsp
 * from `load`, pop, return into the other context. sg_sim_ctx_start: a new fiber's first
 * return lands here with r12 = argument and r13 = function. */
extern "C" void sg_sim_ctx_switch(void **save, void *load);
extern "C" void sg_sim_ctx_start(void);
__asm__(".text\n"
        ".globl sg_sim_ctx_switch\n"
        ".type sg_sim_ctx_switch,@function\n"
        "sg_sim_ctx_switch:\n"
        "  pushq %rbp\n"
        "  pushq %rbx\n"
        "  pushq %r12\n"
        "  pushq %r13\n"
        "  pushq %r14\n"
        "  pushq %r15\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  popq %r15\n"
        "  popq %r14\n"
        "  popq %r13\n"
        "  popq %r12\n"
        "  popq %rbx\n"
        "  popq %rbp\n"
        "  ret\n"
        ".size sg_sim_ctx_switch, .-sg_sim_ctx_switch\n"
        ".globl sg_sim_ctx_start\n"
        ".type sg_sim_ctx_start,@function\n"
        "sg_sim_ctx_start:\n"
        "  movq %r12, %rdi\n"
        "  callq *%r13\n"
        "  ud2\n"
        ".size sg_sim_ctx_start, .-sg_sim_ctx_start\n");
#endif

namespace sg_sim {

namespace {

constexpr size_t STACK_BYTES = 64 << 10;
constexpr size_t GUARD_BYTES = 4096;
constexpr int MAX_THREADS = 1024;

/* F_MBAR: blocked in an mbarrier wait; F_NBAR: at a named barrier (bar.sync id, n) */
enum fiber_state { F_RUN, F_BAR, F_WARP, F_DONE, F_DEAD, F_MBAR, F_NBAR };

struct fiber {
    int linear = 0, lane = 0, warp = 0;
    uint3 tid{0, 0, 0};
    int state = F_RUN;
#if defined(__x86_64__)
    void *sp = nullptr;
#else
    ucontext_t uc;
#endif
    char *stack_lo = nullptr; /* usable stack [stack_lo, stack_lo + STACK_BYTES) */
    /* the warp rendezvous */
    int wop = 0;
    unsigned wmask = 0;
    size_t wbytes = 0;
    unsigned char payload[SG_SIM_WARP_PAYLOAD];
    unsigned char xfer[32 * SG_SIM_WARP_PAYLOAD];
    cp_async_queue cpq;         /* the thread's cp.async copies not yet performed */
    const void *mbar = nullptr; /* F_MBAR: the mbarrier waited on, and the parity */
    unsigned mbar_parity = 0;
    int nbar = 0;             /* F_NBAR: the barrier id */
    bool pdl_entered = false; /* executed SG_PDL_ENTER (pdl_enter) */
};

struct sim_state {
    char *pool = nullptr; /* MAX_THREADS stacks, each above a guard page */
    fiber *f = nullptr;   /* MAX_THREADS fibers */
    int n = 0;            /* threads of the running block */
    int bar_count = 0;
    int rel_lo = 0, rel_hi = 0; /* lowest and highest thread released during the last resume */
    /* per warp of the running block, so that an arrival at a warp operation costs O(1): the
     * lanes that exist, that have exited, and that wait at a warp operation */
    unsigned warp_exists[MAX_THREADS / 32], warp_exited[MAX_THREADS / 32];
    unsigned warp_waiting[MAX_THREADS / 32];
    int wg_arrived[MAX_THREADS / 128]; /* threads waiting at a warpgroup operation */
    uint64_t bar_gen = 0;              /* __syncthreads completed in this block */
    int nbar_count[16], nbar_want[16]; /* named barriers: arrived, expected */
    fiber *cur = nullptr;
#if defined(__x86_64__)
    void *sched_sp = nullptr;
#else
    ucontext_t sched_uc;
#endif
    call_base *call = nullptr;
    const std::vector<shared_var> *poison = nullptr; /* run_grid's */
    const char *kernel = nullptr;
    bool running = false, abort = false;
    std::string err;
    /* Dynamic shared memory of the launch: dyn = dyn_alloc + 16, so its address is 16 mod 4096:
     * the alignment a GPU guarantees (16 bytes) and no more, on purpose (a kernel that needs a
     * 1024-byte aligned buffer must round up, as it must on a GPU). */
    unsigned char *dyn_alloc = nullptr, *dyn = nullptr;
    size_t dyn_size = 0, dyn_cap = 0;
    uintptr_t static_sa = 0; /* the shared address of floor4096(the static section) */
    int order = 0;           /* 0 forward, 1 reverse, 2 random */
    uint64_t seed = 0;
    std::mt19937_64 rng;
    std::vector<int> perm;
    std::vector<uint64_t> bperm; /* the blocks' order under random:SEED */
    std::mt19937_64 brng;        /* its generator (seeded as rng, drawn apart from it) */
    bool block_check = false;    /* SG_SIM_BLOCK_CHECK=1 */
    char order_str[64] = "forward";
};
sim_state S;

void init_once() {
    if (S.pool) return;
    const char *o = getenv("SG_SIM_ORDER");
    if (o && !strcmp(o, "reverse")) {
        S.order = 1;
    } else if (o && !strncmp(o, "random:", 7)) {
        S.order = 2;
        S.seed = strtoull(o + 7, nullptr, 10);
        S.rng.seed(S.seed);
        S.brng.seed(S.seed ^ 0x9e3779b97f4a7c15ull);
    } else if (o && *o && strcmp(o, "forward")) {
        fprintf(stderr, "sg_cuda_sim: SG_SIM_ORDER=%s is not forward|reverse|random:SEED\n", o);
        _exit(2);
    }
    snprintf(S.order_str, sizeof S.order_str, "%s", o && *o ? o : "forward");
    const char *bc = getenv("SG_SIM_BLOCK_CHECK");
    if (bc && *bc && strcmp(bc, "0") && strcmp(bc, "1")) {
        fprintf(stderr, "sg_cuda_sim: SG_SIM_BLOCK_CHECK=%s is not 0|1\n", bc);
        _exit(2);
    }
    S.block_check = bc && !strcmp(bc, "1");
    size_t per = STACK_BYTES + GUARD_BYTES;
    void *m = mmap(nullptr, per * MAX_THREADS, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) {
        fprintf(stderr, "sg_cuda_sim: cannot map the fiber stacks\n");
        _exit(2);
    }
    S.pool = (char *)m;
    S.f = new fiber[MAX_THREADS];
    for (int i = 0; i < MAX_THREADS; i++) {
        char *g = S.pool + (size_t)i * per;
        mprotect(g, GUARD_BYTES, PROT_NONE);
        S.f[i].stack_lo = g + GUARD_BYTES;
        S.f[i].cpq.pending.reserve(
            64); /* grows (rarely) but is never freed: no allocation per copy */
    }
}

void switch_to_scheduler(fiber *f) {
#if defined(__x86_64__)
    sg_sim_ctx_switch(&f->sp, S.sched_sp);
#else
    swapcontext(&f->uc, &S.sched_uc);
#endif
}

void resume(fiber *f) {
    S.cur = f;
    sg_sim_threadIdx = f->tid;
#if defined(__x86_64__)
    sg_sim_ctx_switch(&S.sched_sp, f->sp);
#else
    swapcontext(&S.sched_uc, &f->uc);
#endif
    S.cur = nullptr;
}

void fiber_main(void *) {
    S.call->invoke();
    fiber *f = S.cur;
    if (S.call->pdl_required && !f->pdl_entered)
        device_fail("the thread exits without SG_PDL_ENTER(): every kernel SG_LAUNCH launches "
                    "begins with it (programmatic dependent launch: cuda_kernels.h)");
    hopper_thread_exit(f->linear); /* may report: registers of an in-flight wgmma */
    S.warp_exited[f->warp] |= 1u << f->lane;
    /* cp.async copies still pending when the thread exits are dropped, never performed: the PTX
     * ISA makes exiting with pending copies legal (nothing guarantees their completion without
     * a wait), so any later read of their destinations is a race and reads the poison. */
    f->cpq.pending.clear();
    f->state = F_DONE;
    switch_to_scheduler(f);
    abort(); /* never resumed */
}

#if !defined(__x86_64__)
void fiber_main_uc() {
    fiber_main(nullptr);
}
#endif

void fiber_init(fiber *f) {
#if defined(__SANITIZE_ADDRESS__)
    /* a fiber stopped by device_fail never unwound: its frames' redzones are still poisoned */
    ASAN_UNPOISON_MEMORY_REGION(f->stack_lo, STACK_BYTES);
#endif
    f->state = F_RUN;
    f->wop = 0;
    f->pdl_entered = false;
    f->cpq.pending.clear();
    f->cpq.committed = 0;
#if defined(__x86_64__)
    uintptr_t top = ((uintptr_t)(f->stack_lo + STACK_BYTES)) & ~(uintptr_t)15;
    void **sp = (void **)top;
    *--sp = (void *)sg_sim_ctx_start; /* return address of the first switch */
    *--sp = nullptr;                  /* rbp */
    *--sp = nullptr;                  /* rbx */
    *--sp = nullptr;                  /* r12: argument */
    *--sp = (void *)fiber_main;       /* r13: function */
    *--sp = nullptr;                  /* r14 */
    *--sp = nullptr;                  /* r15 */
    f->sp = sp;
#else
    getcontext(&f->uc);
    f->uc.uc_stack.ss_sp = f->stack_lo;
    f->uc.uc_stack.ss_size = STACK_BYTES;
    f->uc.uc_link = nullptr;
    makecontext(&f->uc, fiber_main_uc, 0);
#endif
}

std::string where(const fiber *f) {
    char b[200];
    snprintf(b, sizeof b, "kernel %s block (%u,%u,%u) thread (%u,%u,%u)", S.kernel,
             sg_sim_blockIdx.x, sg_sim_blockIdx.y, sg_sim_blockIdx.z, f ? f->tid.x : 0,
             f ? f->tid.y : 0, f ? f->tid.z : 0);
    return b;
}

std::string block_where() {
    char b[200];
    snprintf(b, sizeof b, "kernel %s block (%u,%u,%u)", S.kernel, sg_sim_blockIdx.x,
             sg_sim_blockIdx.y, sg_sim_blockIdx.z);
    return b;
}

const char *op_name(int op) {
    switch (op) {
    case WOP_SYNCWARP:
        return "__syncwarp";
    case WOP_SHFL:
        return "__shfl_sync";
    case WOP_SHFL_UP:
        return "__shfl_up_sync";
    case WOP_SHFL_DOWN:
        return "__shfl_down_sync";
    case WOP_SHFL_XOR:
        return "__shfl_xor_sync";
    case WOP_BALLOT:
        return "__ballot_sync";
    case WOP_ANY:
        return "__any_sync";
    case WOP_ALL:
        return "__all_sync";
    case WOP_MMA_M16N8K16_BF16:
        return "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32";
    case WOP_LDMATRIX_X1:
        return "ldmatrix.sync.aligned.m8n8.x1.shared.b16";
    case WOP_LDMATRIX_X2:
        return "ldmatrix.sync.aligned.m8n8.x2.shared.b16";
    case WOP_LDMATRIX_X4:
        return "ldmatrix.sync.aligned.m8n8.x4.shared.b16";
    case WOP_LDMATRIX_X1_TRANS:
        return "ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16";
    case WOP_LDMATRIX_X2_TRANS:
        return "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16";
    case WOP_LDMATRIX_X4_TRANS:
        return "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16";
    case WOP_ELECT:
        return "elect.sync";
    case WOP_STMATRIX_X1:
        return "stmatrix.sync.aligned.m8n8.x1.shared.b16";
    case WOP_STMATRIX_X2:
        return "stmatrix.sync.aligned.m8n8.x2.shared.b16";
    case WOP_STMATRIX_X4:
        return "stmatrix.sync.aligned.m8n8.x4.shared.b16";
    case WOP_STMATRIX_X1_TRANS:
        return "stmatrix.sync.aligned.m8n8.x1.trans.shared.b16";
    case WOP_STMATRIX_X2_TRANS:
        return "stmatrix.sync.aligned.m8n8.x2.trans.shared.b16";
    case WOP_STMATRIX_X4_TRANS:
        return "stmatrix.sync.aligned.m8n8.x4.trans.shared.b16";
    case WOP_MMA_M16N8K8_TF32:
        return "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32";
    }
    if (op >= WGOP_FIRST) return warpgroup_op_name(op);
    return "?";
}

/* The scheduler's diagnosis when no fiber can run but not all have finished. */
std::string diagnose() {
    int nbar = 0, ndone = 0, nwarp = 0, first_done = -1, first_bar = -1;
    for (int i = 0; i < S.n; i++) {
        const fiber &f = S.f[i];
        if (f.state == F_BAR) nbar++, first_bar = first_bar < 0 ? i : first_bar;
        if (f.state == F_DONE) ndone++, first_done = first_done < 0 ? i : first_done;
        if (f.state == F_WARP) nwarp++;
    }
    char b[512];
    if (nbar > 0 && nbar + ndone == S.n) {
        const fiber &d = S.f[first_done], &w = S.f[first_bar];
        snprintf(b, sizeof b,
                 "barrier divergence: %d threads wait at __syncthreads (first: thread "
                 "(%u,%u,%u)) while %d have exited (first: thread (%u,%u,%u))",
                 nbar, w.tid.x, w.tid.y, w.tid.z, ndone, d.tid.x, d.tid.y, d.tid.z);
        return b;
    }
    std::string s = "deadlock: no thread can run;";
    int shown = 0, nmbar = 0, nnbar = 0;
    for (int i = 0; i < S.n; i++) {
        const fiber &f = S.f[i];
        if (f.state == F_MBAR && nmbar++ < 4) {
            snprintf(b, sizeof b,
                     " thread (%u,%u,%u) waits on the mbarrier at %p for the phase of "
                     "parity %u (%s);",
                     f.tid.x, f.tid.y, f.tid.z, f.mbar, f.mbar_parity,
                     mbar_describe(f.mbar).c_str());
            s += b;
        }
        if (f.state == F_NBAR && nnbar++ < 2) {
            snprintf(b, sizeof b, " thread (%u,%u,%u) waits at bar.sync %d (%d of %d arrived);",
                     f.tid.x, f.tid.y, f.tid.z, f.nbar, S.nbar_count[f.nbar], S.nbar_want[f.nbar]);
            s += b;
        }
    }
    for (int i = 0; i < S.n && shown < 6; i++) {
        const fiber &f = S.f[i];
        if (f.state != F_WARP) continue;
        snprintf(b, sizeof b, " thread (%u,%u,%u) waits at %s mask 0x%08x", f.tid.x, f.tid.y,
                 f.tid.z, op_name(f.wop), f.wmask);
        s += b;
        /* the usual cause: a lane of the mask left (returned early) after this one arrived */
        for (int l = 0; l < 32; l++)
            if (((f.wmask >> l) & 1u) && f.warp * 32 + l < S.n &&
                S.f[f.warp * 32 + l].state == F_DONE) {
                snprintf(b, sizeof b, " (lane %d of the mask has exited)", l);
                s += b;
                break;
            }
        if (f.wop >= WGOP_FIRST) /* warpgroup operations: any thread of the warpgroup */
            for (int t = (f.warp / 4) * 128; t < (f.warp / 4) * 128 + 128 && t < S.n; t++)
                if (S.f[t].state == F_DONE) {
                    snprintf(b, sizeof b, " (thread %d of its warpgroup has exited)", t % 128);
                    s += b;
                    break;
                }
        s += ";";
        shown++;
    }
    snprintf(b, sizeof b,
             " %d at __syncthreads, %d at warp operations, %d at mbarrier waits, %d at named "
             "barriers, %d exited, of %d",
             nbar, nwarp, nmbar, nnbar, ndone, S.n);
    return s + b;
}

/* Runs the fibers of one block to completion. false: S.err says why. */
bool run_block() {
    for (int i = 0; i < S.n; i++) fiber_init(&S.f[i]);
    for (int w = 0; w < (S.n + 31) / 32; w++) {
        const int lanes = S.n - 32 * w < 32 ? S.n - 32 * w : 32;
        S.warp_exists[w] = lanes == 32 ? ~0u : (1u << lanes) - 1;
        S.warp_exited[w] = S.warp_waiting[w] = 0;
    }
    S.bar_count = 0;
    S.bar_gen = 0;
    for (int g = 0; g < MAX_THREADS / 128; g++) S.wg_arrived[g] = 0;
    for (int b = 0; b < 16; b++) S.nbar_count[b] = S.nbar_want[b] = 0;
    hopper_block_begin();
    if (S.order == 2) {
        S.perm.resize(S.n);
        for (int i = 0; i < S.n; i++) S.perm[i] = i;
    }
    for (;;) {
        bool ran = false;
        if (S.order == 2) std::shuffle(S.perm.begin(), S.perm.end(), S.rng);
        for (int k = 0; k < S.n; k++) {
            int i = S.order == 0 ? k : S.order == 1 ? S.n - 1 - k : S.perm[k];
            fiber *f = &S.f[i];
            if (f->state != F_RUN) continue;
            S.rel_lo = S.n;
            S.rel_hi = -1;
            resume(f);
            ran = true;
            if (S.abort) return false;
            /* forward and reverse: the first runnable thread in that order runs next, so when
             * f completed a warp operation its warp's earlier lanes run on at once: a warp runs
             * ahead to its next barrier before the next warp starts */
            if (S.order == 0 && S.rel_lo < i) k = S.rel_lo - 1;
            if (S.order == 1 && S.rel_hi > i) k = S.n - 1 - S.rel_hi - 1;
        }
        if (!ran) {
            bool all_done = true;
            for (int i = 0; i < S.n && all_done; i++) all_done = S.f[i].state == F_DONE;
            /* nothing can run: the copy engine's copies still in flight land now (a GPU lands
             * them some time after issue; the emulation as late as it can) */
            std::string aerr;
            const int progress = all_done ? 0 : hopper_idle(aerr);
            if (progress < 0) {
                S.err = block_where() + ": " + aerr;
                return false;
            }
            if (progress > 0) continue;
            for (int i = 0; i < S.n; i++)
                if (S.f[i].state != F_DONE) {
                    S.err = "kernel " + std::string(S.kernel) + " block (" +
                            std::to_string(sg_sim_blockIdx.x) + "," +
                            std::to_string(sg_sim_blockIdx.y) + "," +
                            std::to_string(sg_sim_blockIdx.z) + "): " + diagnose();
                    return false;
                }
            std::string berr;
            if (!hopper_block_end(berr)) {
                S.err = block_where() + ": " + berr;
                return false;
            }
            return true;
        }
    }
}

} // namespace

const char *order_name() {
    init_once();
    return S.order_str;
}

void syncthreads_impl() {
    fiber *f = S.cur;
    if (!f) return; /* host code: nothing to wait for */
    f->state = F_BAR;
    if (++S.bar_count == S.n) { /* the last one in releases everyone */
        S.bar_count = 0;
        S.bar_gen++;
        S.rel_lo = 0;
        S.rel_hi = S.n - 1;
        for (int i = 0; i < S.n; i++) S.f[i].state = F_RUN;
        return;
    }
    switch_to_scheduler(f);
}

namespace {
/* Every warp operation's arrival: checks the mask, deposits the caller's payload and marks it
 * waiting. true: the caller is the last lane of the mask to arrive and must complete the
 * operation for all (they are all still marked waiting; warp_release lets them go). false: the
 * caller waited and has been released by the lane that completed it. */
bool warp_arrive(fiber *f, int op, unsigned mask, const void *mine, size_t bytes) {
    const int lane = f->lane;
    if (!((mask >> lane) & 1u))
        device_fail("%s: mask 0x%08x does not include the calling lane %d", op_name(op), mask,
                    lane);
    const int base = f->warp * 32;
    if (const unsigned missing = mask & ~S.warp_exists[f->warp])
        device_fail("%s: mask 0x%08x names lane %d, which does not exist (block of %d threads)",
                    op_name(op), mask, __builtin_ctz(missing), S.n);
    if (const unsigned gone = mask & S.warp_exited[f->warp])
        device_fail("%s: mask 0x%08x names lane %d, which has exited", op_name(op), mask,
                    __builtin_ctz(gone));
    f->state = F_WARP;
    f->wop = op;
    f->wmask = mask;
    f->wbytes = bytes;
    if (bytes) memcpy(f->payload, mine, bytes);
    S.warp_waiting[f->warp] |= 1u << lane;
    if ((S.warp_waiting[f->warp] & mask) != mask) {
        switch_to_scheduler(f);
        return false;
    }
    for (int l = 0; l < 32; l++) {
        if (!((mask >> l) & 1u)) continue;
        const fiber &o = S.f[base + l];
        if (o.wop != op || o.wmask != mask || o.wbytes != bytes)
            device_fail("lanes of one mask reach different warp operations: lane %d at %s "
                        "mask 0x%08x, lane %d at %s mask 0x%08x",
                        lane, op_name(op), mask, l, op_name(o.wop), o.wmask);
    }
    return true;
}

void warp_release(int base, unsigned mask) {
    S.rel_lo = std::min(S.rel_lo, base + __builtin_ctz(mask));
    S.rel_hi = std::max(S.rel_hi, base + 31 - __builtin_clz(mask));
    S.warp_waiting[base / 32] &= ~mask;
    for (int l = 0; l < 32; l++) {
        if (!((mask >> l) & 1u)) continue;
        S.f[base + l].state = F_RUN;
        S.f[base + l].wop = 0;
    }
}
} // namespace

int warp_rendezvous(int op, unsigned mask, const void *mine, size_t bytes, void *out) {
    fiber *f = S.cur;
    if (!f) device_fail("%s called outside a kernel", op_name(op));
    if (warp_arrive(f, op, mask, mine, bytes)) {
        const int base = f->warp * 32;
        for (int l = 0; l < 32 && bytes; l++) {
            if (!((mask >> l) & 1u)) continue;
            fiber &d = S.f[base + l];
            for (int s = 0; s < 32; s++)
                if ((mask >> s) & 1u) memcpy(d.xfer + s * bytes, S.f[base + s].payload, bytes);
        }
        warp_release(base, mask);
    }
    if (bytes) memcpy(out, f->xfer, 32 * bytes);
    return f->lane;
}

int warp_collective(int op, unsigned mask, const void *mine, size_t bytes, warp_collective_fn fn,
                    const void *ctx, void *result, size_t rbytes) {
    fiber *f = S.cur;
    if (!f) device_fail("%s called outside a kernel", op_name(op));
    if (warp_arrive(f, op, mask, mine, bytes)) {
        const int base = f->warp * 32;
        const void *in[32];
        void *out[32];
        for (int l = 0; l < 32; l++) {
            const bool m = (mask >> l) & 1u;
            in[l] = m ? S.f[base + l].payload : nullptr;
            out[l] = m ? S.f[base + l].xfer : nullptr;
        }
        fn(in, out, ctx);
        warp_release(base, mask);
    }
    if (rbytes) memcpy(result, f->xfer, rbytes);
    return f->lane;
}

void device_fail(const char *fmt, ...) {
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fiber *f = S.cur;
    if (!f) {
        report("%s (outside any kernel)", msg);
        _exit(1);
    }
    S.err = where(f) + ": " + msg;
    S.abort = true;
    f->state = F_DEAD;
    switch_to_scheduler(f);
    abort(); /* never resumed */
}

unsigned active_lanes() {
    fiber *f = S.cur;
    if (!f) return 0;
    unsigned m = 0;
    for (int l = 0; l < 32; l++) {
        int i = f->warp * 32 + l;
        if (i < S.n && S.f[i].state != F_DONE) m |= 1u << l;
    }
    return m;
}

void *dynamic_smem() {
    return S.dyn_size ? S.dyn : nullptr;
}

bool in_shared(const void *p, size_t n) {
    const uintptr_t a = (uintptr_t)p;
    const uintptr_t s0 = (uintptr_t)__start_sg_sim_shared, s1 = (uintptr_t)__stop_sg_sim_shared;
    if (s0 && a >= s0 && a <= s1 && n <= s1 - a) return true;
    const uintptr_t d0 = (uintptr_t)S.dyn, d1 = d0 + S.dyn_size;
    return S.dyn_size && a >= d0 && a <= d1 && n <= d1 - a;
}

std::string shared_hint(const void *p) {
    const uintptr_t a = (uintptr_t)p, b0 = (uintptr_t)__bss_start, b1 = (uintptr_t)_end;
    if (!b0 || a < b0 || a >= b1 || in_shared(p, 1)) return "";
    return "; it is a static variable outside the shared-memory section: a __shared__ variable "
           "of a template kernel? g++ ignores the section attribute of template statics, so the "
           "emulation cannot see it as shared memory (use dynamic shared memory there)";
}

std::string describe_shared() {
    char b[200];
    snprintf(b, sizeof b, "static __shared__ [%p, %p), dynamic [%p, +%zu)",
             (void *)__start_sg_sim_shared, (void *)__stop_sg_sim_shared,
             S.dyn_size ? (void *)S.dyn : nullptr, S.dyn_size);
    return b;
}

void pdl_enter() {
    if (!S.cur) device_fail("SG_PDL_ENTER called outside a kernel");
    S.cur->pdl_entered = true;
}

int current_lane() {
    if (!S.cur) device_fail("a warp operation called outside a kernel");
    return S.cur->lane;
}

cp_async_queue &current_cp_async(const char *fn) {
    if (!S.cur) device_fail("%s called outside a kernel", fn);
    return S.cur->cpq;
}

/* The launch's atomicInc tickets: per address, its increments, its wraps, and whether the
 * last increment wrapped (cuda_sim.hpp: the audit at the grid's end). */
struct ticket_use {
    unsigned incs = 0, wraps = 0;
    bool last_wrapped = false;
};
static std::map<unsigned *, ticket_use> launch_tickets;

unsigned atomic_inc(unsigned *p, unsigned val) {
    if (!S.cur) device_fail("atomicInc called outside a kernel");
    const unsigned old = *p;
    const bool wrap = old >= val;
    *p = wrap ? 0u : old + 1;
    ticket_use &u = launch_tickets[p];
    u.incs++;
    u.wraps += wrap;
    u.last_wrapped = wrap;
    return old;
}

/* every ticket back at 0 by one wrap, on its last increment; else the message */
static bool audit_tickets(std::string &err) {
    for (const auto &kv : launch_tickets) {
        const ticket_use &u = kv.second;
        if (u.wraps == 1 && u.last_wrapped && *kv.first == 0) continue;
        char b[300];
        snprintf(b, sizeof b,
                 "atomicInc ticket %p: %u increments, %u wraps, the last one %s, now %u: a "
                 "last-block election must wrap it exactly once, at the group's last arrival",
                 (void *)kv.first, u.incs, u.wraps, u.last_wrapped ? "a wrap" : "not a wrap",
                 *kv.first);
        err = std::string(S.kernel ? S.kernel : "?") + ": " + b;
        return false;
    }
    return true;
}

/* The blocks of the launch set up by run_grid, in the order `order` (0: forward, blockIdx.x
 * fastest; 1: reverse; 2: a fresh random permutation), their threads in the scheduling order
 * `threads` (S.order's values), then the tickets' audit. */
static bool run_blocks(int order, int threads, size_t smem, std::string &err) {
    const int saved = S.order;
    S.order = threads;
    const dim3 grid = sg_sim_gridDim;
    const uint64_t nb = (uint64_t)grid.x * grid.y * grid.z;
    if (order == 2) {
        S.bperm.resize(nb);
        for (uint64_t i = 0; i < nb; i++) S.bperm[i] = i;
        for (uint64_t i = nb; i > 1; i--) std::swap(S.bperm[i - 1], S.bperm[S.brng() % i]);
    }
    hopper_launch_begin(smem);
    char *sh0 = __start_sg_sim_shared, *sh1 = __stop_sg_sim_shared;
    bool ok = true;
    for (uint64_t i = 0; i < nb && ok; i++) {
        const uint64_t b = order == 0 ? i : order == 1 ? nb - 1 - i : S.bperm[i];
        sg_sim_blockIdx = uint3{(unsigned)(b % grid.x), (unsigned)(b / grid.x % grid.y),
                                (unsigned)(b / ((uint64_t)grid.x * grid.y))};
        /* poison: a read of shared memory this block did not write is NaN / -1 */
        if (sh0 && sh1 > sh0) memset(sh0, 0xFF, (size_t)(sh1 - sh0));
        if (smem) memset(S.dyn, 0xFF, smem);
        if (S.poison)
            for (const shared_var &v : *S.poison) memset(v.addr, 0xFF, v.bytes);
        ok = run_block();
    }
    S.order = saved;
    if (!ok) err = S.err;
    if (ok) ok = audit_tickets(err);
    launch_tickets.clear();
    return ok;
}

/* SG_SIM_BLOCK_CHECK: every live allocation's bytes before the launch (pre), and after its
 * forward run (fwd); the buffers are kept from launch to launch (no allocation a launch) */
struct block_snap {
    uintptr_t base;
    size_t size;
    int id;
    bool host;
    std::vector<unsigned char> pre, fwd;
};
static std::vector<block_snap> block_snaps;
static size_t block_nsnaps;

static void block_check_snapshot() {
    block_nsnaps = 0;
    each_alloc([](const alloc &a) {
        if (block_nsnaps == block_snaps.size()) block_snaps.emplace_back();
        block_snap &s = block_snaps[block_nsnaps++];
        s.base = a.base, s.size = a.size, s.id = a.id, s.host = a.host;
        s.pre.resize(a.size);
        s.fwd.resize(a.size);
        memcpy(s.pre.data(), (const void *)a.base, a.size);
    });
}

/* keeps the forward run's bytes and puts the memory back as it was before the launch */
static void block_check_swap() {
    for (size_t i = 0; i < block_nsnaps; i++) {
        block_snap &s = block_snaps[i];
        memcpy(s.fwd.data(), (const void *)s.base, s.size);
        memcpy((void *)s.base, s.pre.data(), s.size);
    }
}

/* the reverse run's bytes against the forward run's; the first difference in err */
static bool block_check_compare(std::string &err) {
    for (size_t i = 0; i < block_nsnaps; i++) {
        const block_snap &s = block_snaps[i];
        const unsigned char *m = (const unsigned char *)s.base;
        if (!memcmp(m, s.fwd.data(), s.size)) continue;
        size_t o = 0, n = 0;
        while (m[o] == s.fwd[o]) o++;
        for (size_t k = o; k < s.size; k++) n += m[k] != s.fwd[k];
        const size_t w = o & ~(size_t)3;
        uint32_t f = 0, r = 0, p = 0;
        if (w + 4 <= s.size) {
            memcpy(&f, &s.fwd[w], 4);
            memcpy(&r, m + w, 4);
            memcpy(&p, &s.pre[w], 4);
        }
        char b[600];
        snprintf(b, sizeof b,
                 "%s: its result depends on the order of its blocks or threads "
                 "(SG_SIM_BLOCK_CHECK): allocation #%d (%s, %zu bytes at %p) differs at byte "
                 "%zu (%zu bytes in all) between the blocks and their threads run forward and "
                 "in reverse from the same memory; the 4 bytes at %zu: 0x%08x forward, 0x%08x "
                 "reverse, 0x%08x before the launch. A GPU runs blocks in any order and at "
                 "once: a block reads what another block of the same launch writes, or two "
                 "blocks (or two threads) write the same bytes",
                 S.kernel ? S.kernel : "?", s.id, s.host ? "host" : "device", s.size,
                 (void *)s.base, o, n, w, f, r, p);
        err = b;
        return false;
    }
    return true;
}

bool run_grid(const char *name, dim3 grid, dim3 block, size_t smem, call_base *call,
              const std::vector<shared_var> *poison, std::string &err) {
    init_once();
    if (S.running) {
        err = "a launch from inside a kernel (dynamic parallelism) is not emulated";
        return false;
    }
    S.running = true;
    S.abort = false;
    S.kernel = name;
    S.call = call;
    S.poison = poison;
    S.n = (int)(block.x * block.y * block.z);
    if (smem + 16 > S.dyn_cap) {
        free(S.dyn_alloc);
        S.dyn_cap = smem + 16;
        if (posix_memalign((void **)&S.dyn_alloc, 4096, S.dyn_cap)) {
            fprintf(stderr, "sg_cuda_sim: cannot allocate %zu bytes of dynamic shared memory\n",
                    smem);
            _exit(2);
        }
    }
    S.dyn = S.dyn_alloc + 16;
    S.dyn_size = smem;
    /* shared addresses: dynamic at [16, 16 + smem), the static section above it, both with
     * the host address's low 12 bits (so swizzling, a function of address bits, agrees) */
    S.static_sa = ((16 + smem + 4095) / 4096) * 4096;
    sg_sim_blockDim = block;
    sg_sim_gridDim = grid;
    for (int i = 0; i < S.n; i++) {
        fiber &f = S.f[i];
        f.linear = i;
        f.lane = i % 32;
        f.warp = i / 32;
        f.tid = uint3{(unsigned)i % block.x, (unsigned)(i / block.x) % block.y,
                      (unsigned)(i / (block.x * block.y))};
    }
    bool ok;
    if (S.block_check && (uint64_t)grid.x * grid.y * grid.z * S.n > 1) {
        /* the launch twice from the same memory, its blocks and their threads forward, then
         * both in reverse: a GPU runs blocks in any order and at once, and the threads of a
         * block in any interleaving, so the bytes it leaves must not depend on either */
        block_check_snapshot();
        ok = run_blocks(0, 0, smem, err);
        if (ok) {
            block_check_swap();
            ok = run_blocks(1, 1, smem, err);
            if (ok) ok = block_check_compare(err);
        }
    } else {
        ok = run_blocks(S.order, S.order, smem, err);
    }
    S.running = false;
    S.call = nullptr;
    S.poison = nullptr;
    sg_sim_threadIdx = uint3{0, 0, 0};
    sg_sim_blockIdx = uint3{0, 0, 0};
    return ok;
}

/* for the emulation's self-test: SG_SIM_BLOCK_CHECK switched at run time; the previous value */
extern "C" int sg_sim_set_block_check(int on) {
    init_once();
    const int was = S.block_check;
    S.block_check = on != 0;
    return was;
}

bool describe_execution(char *buf, size_t n) {
    if (!S.running) return false;
    snprintf(buf, n, "%s", where(S.cur).c_str());
    return true;
}

bool in_stack_guard(const void *addr) {
    if (!S.pool) return false;
    uintptr_t a = (uintptr_t)addr, p = (uintptr_t)S.pool;
    size_t per = STACK_BYTES + GUARD_BYTES;
    if (a < p || a >= p + per * MAX_THREADS) return false;
    return (a - p) % per < GUARD_BYTES;
}

/* ---- what the Hopper operations (sim_hopper.cpp) need of the execution model ---- */

int warpgroup_collective(int op, const void *mine, size_t bytes, warpgroup_collective_fn fn,
                         const void *ctx) {
    fiber *f = S.cur;
    if (!f) device_fail("%s called outside a kernel", op_name(op));
    const int wg = f->warp / 4, w0 = 4 * wg;
    for (int w = w0; w < w0 + 4; w++) {
        if (w * 32 >= S.n || S.warp_exists[w] != ~0u)
            device_fail("%s: the warpgroup of this thread (threads %d..%d, warps %d..%d) is "
                        "incomplete: the block has %d threads, and a warpgroup is 4 whole warps "
                        "whose first warp index is a multiple of 4",
                        op_name(op), 128 * wg, 128 * wg + 127, w0, w0 + 3, S.n);
        if (S.warp_exited[w])
            device_fail("%s: thread %d of this thread's warpgroup has exited (all 128 threads "
                        "of a warpgroup execute it)",
                        op_name(op), 32 * w + __builtin_ctz(S.warp_exited[w]));
    }
    if (bytes > SG_SIM_WARP_PAYLOAD) device_fail("%s: payload too large", op_name(op));
    f->state = F_WARP;
    f->wop = op;
    f->wmask = ~0u;
    f->wbytes = bytes;
    if (bytes) memcpy(f->payload, mine, bytes);
    S.warp_waiting[f->warp] |= 1u << f->lane;
    if (++S.wg_arrived[wg] < 128) {
        switch_to_scheduler(f);
        return f->linear % 128;
    }
    S.wg_arrived[wg] = 0;
    const void *in[128];
    for (int t = 0; t < 128; t++) {
        const fiber &o = S.f[128 * wg + t];
        if (o.wop != op || o.wbytes != bytes) {
            const std::string mine_name = op_name(op); /* op_name may reuse one buffer */
            device_fail("threads of one warpgroup reach different operations: thread %d at %s, "
                        "thread %d at %s",
                        f->linear % 128, mine_name.c_str(), t, op_name(o.wop));
        }
        in[t] = o.payload;
    }
    fn(in, ctx);
    S.rel_lo = std::min(S.rel_lo, 128 * wg);
    S.rel_hi = std::max(S.rel_hi, 128 * wg + 127);
    for (int w = w0; w < w0 + 4; w++) S.warp_waiting[w] = 0;
    for (int t = 0; t < 128; t++) {
        S.f[128 * wg + t].state = F_RUN;
        S.f[128 * wg + t].wop = 0;
    }
    return f->linear % 128;
}

void mbar_block(const void *bar, unsigned parity) {
    fiber *f = S.cur;
    f->state = F_MBAR;
    f->mbar = bar;
    f->mbar_parity = parity;
    switch_to_scheduler(f);
}

void mbar_wake(const void *bar) {
    for (int i = 0; i < S.n; i++) {
        fiber &o = S.f[i];
        if (o.state != F_MBAR || o.mbar != bar) continue;
        o.state = F_RUN;
        S.rel_lo = std::min(S.rel_lo, i);
        S.rel_hi = std::max(S.rel_hi, i);
    }
}

void yield_thread() {
    fiber *f = S.cur;
    if (!f) return;
    f->state = F_RUN; /* the scheduler moves on to the next thread, then comes back */
    switch_to_scheduler(f);
}

void named_barrier_sync(int id, int nthreads) {
    fiber *f = S.cur;
    if (!f) device_fail("bar.sync called outside a kernel");
    if (id < 1 || id > 15)
        device_fail("bar.sync %d: the barrier id must be in [1, 15] (0 is __syncthreads')", id);
    const int warps = (S.n + 31) / 32;
    if (nthreads <= 0 || nthreads % 32 || nthreads > 32 * warps)
        device_fail("bar.sync %d, %d: the thread count must be a positive multiple of 32, at most "
                    "the block's %d warps",
                    id, nthreads, warps);
    if (S.nbar_want[id] && S.nbar_want[id] != nthreads)
        device_fail("bar.sync %d, %d: threads already waiting there gave the count %d", id,
                    nthreads, S.nbar_want[id]);
    S.nbar_want[id] = nthreads;
    f->state = F_NBAR;
    f->nbar = id;
    if (++S.nbar_count[id] == nthreads) {
        S.nbar_count[id] = S.nbar_want[id] = 0;
        for (int i = 0; i < S.n; i++) {
            fiber &o = S.f[i];
            if (o.state != F_NBAR || o.nbar != id) continue;
            o.state = F_RUN;
            S.rel_lo = std::min(S.rel_lo, i);
            S.rel_hi = std::max(S.rel_hi, i);
        }
        return;
    }
    switch_to_scheduler(f);
}

uint64_t syncthreads_generation() {
    return S.bar_gen;
}

int current_thread() {
    if (!S.cur) device_fail("a device operation called outside a kernel");
    return S.cur->linear;
}

int block_threads() {
    return S.n;
}

uint32_t smem_addr(const void *p) {
    const uintptr_t a = (uintptr_t)p;
    const uintptr_t d0 = (uintptr_t)S.dyn, d1 = d0 + S.dyn_size;
    if (S.dyn_size && a >= d0 && a <= d1) return (uint32_t)(16 + (a - d0));
    const uintptr_t s0 = (uintptr_t)__start_sg_sim_shared, s1 = (uintptr_t)__stop_sg_sim_shared;
    if (s0 && a >= s0 && a <= s1) {
        const uintptr_t sa = S.static_sa + (a - (s0 & ~(uintptr_t)4095));
        /* a GPU's shared window (at most 228 KiB) always fits the descriptors' 18 bits; the
         * emulation's static section holds every kernel's statics, placed above the dynamic
         * shared memory, and may not */
        if (sa >= (1u << 18))
            device_fail("cvta.to.shared of the static __shared__ address %p: the emulation "
                        "places it at shared address 0x%zx, beyond the 256 KiB a matrix "
                        "descriptor can address (%zu bytes of dynamic shared memory below it, "
                        "and the static section of all kernels): keep this data in dynamic "
                        "shared memory",
                        p, (size_t)sa, S.dyn_size);
        return (uint32_t)sa;
    }
    device_fail("cvta.to.shared of %p, which is not in shared memory (%s%s)", p,
                describe_shared().c_str(), shared_hint(p).c_str());
}

void *smem_ptr(uint64_t sa, size_t n) {
    if (S.dyn_size && sa >= 16 && sa - 16 <= S.dyn_size && n <= S.dyn_size - (sa - 16))
        return S.dyn + (sa - 16);
    const uintptr_t s0 = (uintptr_t)__start_sg_sim_shared, s1 = (uintptr_t)__stop_sg_sim_shared;
    if (!s0) return nullptr;
    const uintptr_t floor = s0 & ~(uintptr_t)4095;
    if (sa < S.static_sa) return nullptr;
    const uintptr_t a = floor + (uintptr_t)(sa - S.static_sa);
    if (a < s0 || a > s1 || n > s1 - a) return nullptr;
    return (void *)a;
}

std::string describe_smem_window() {
    char b[200];
    const uintptr_t s0 = (uintptr_t)__start_sg_sim_shared, s1 = (uintptr_t)__stop_sg_sim_shared;
    snprintf(b, sizeof b, "dynamic at shared addresses [0x%x, 0x%zx), static [0x%zx, 0x%zx)", 16u,
             16 + S.dyn_size, (size_t)(S.static_sa + (s0 - (s0 & ~(uintptr_t)4095))),
             (size_t)(S.static_sa + (s1 - (s0 & ~(uintptr_t)4095))));
    return b;
}

} // namespace sg_sim
