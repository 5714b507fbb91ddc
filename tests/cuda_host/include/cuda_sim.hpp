/* cuda_sim.hpp — the CUDA execution model on the host, for the .cu files compiled as C++ with
 * SG_CUDA_HOST (included by the stand-in cuda_runtime.h). Written from the CUDA C++ Programming
 * Guide's semantics, not from stepgraph's kernels, so that it is a second opinion on them.
 *
 * The model:
 * - A launch runs its blocks one after another: blockIdx.x fastest, then y, then z in the
 *   forward order (SG_SIM_ORDER below), the last block first in the reverse order, a fresh
 *   permutation a launch in random:SEED. SG_SIM_BLOCK_CHECK=1 runs every launch twice from the
 *   same memory, its blocks and their threads forward, then both in reverse, and fails the
 *   launch where any byte of any live allocation differs between the two: a GPU runs blocks in
 *   any order and at once, so a block that reads what another block of the launch writes (but
 *   for the tickets' last-block election below), or two blocks (or threads) that write
 *   different values to the same bytes, show. The
 *   threads of a block are cooperative fibers on their own stacks (64 KiB each, a guard page
 *   below), each running until it reaches a barrier, a warp operation or its end; nothing is
 *   preempted, so every interleaving the model produces is one a GPU may produce, and a missing
 *   __syncthreads shows up as a wrong value rather than being papered over by lockstep execution.
 *   The order in which runnable fibers are resumed is chosen by env SG_SIM_ORDER: forward (the
 *   default) always resumes the lowest-numbered runnable thread, reverse the highest, so when
 *   the lanes of a warp meet at a warp operation they run on at once and the warp runs ahead
 *   to its next barrier before the next warp starts (the interleaving in which a warp
 *   overwrites shared memory that a later warp has yet to read); random:SEED resumes every
 *   runnable thread once per scheduling pass in a fresh permutation (the warps move in step).
 * - __syncthreads() is a real barrier over all threads of the block. A block in which some
 *   threads wait at a barrier that others have exited is reported ("barrier divergence"); a
 *   block where nothing can run and not everything has finished is reported as a deadlock with
 *   every thread's state. Neither hangs.
 * - A warp is 32 consecutive linear thread ids (x fastest, then y, then z). Every warp-level
 *   operation is built on one primitive, the warp rendezvous (sg_sim::warp_rendezvous): each
 *   lane named in the mask deposits a payload (up to SG_SIM_WARP_PAYLOAD bytes) and waits;
 *   when all of them have arrived at the same operation with the same mask, every lane gets a
 *   copy of all payloads and computes its own result. The guide's rules are checked: the mask
 *   must include the caller and name only lanes that exist; all lanes of the mask must reach
 *   the same operation with the same mask (a lane that exited, or waits elsewhere, is an
 *   error); a shuffle must not read a lane outside the mask; width is a power of two <= 32.
 * - __shared__ variables are function-scope statics in one linker section (sg_sim_shared),
 *   filled with 0xFF (NaN as fp32 and bf16) at the start of every block, so a read of shared
 *   memory nobody wrote in this block shows. Dynamic shared memory (SG_DYNAMIC_SMEM in
 *   kernels/cuda/cuda_common.cuh) is a per-launch buffer, poisoned the same way, placed at an
 *   address 16 mod 1024 on purpose: a GPU guarantees it 16-byte alignment and no more. g++
 *   ignores the section attribute of a TEMPLATE (or inline) function's statics, so a template
 *   kernel's __shared__ variables are ordinary statics here. Where the nvcc build's reports
 *   exist (sim_resources.cpp: tools/nvcc_resources.sh lists every __shared__ variable of the
 *   PTX) they are found by name and poisoned at the start of every block of their file's
 *   kernels too; they are still not shared memory to the address checks (ldmatrix, cp.async,
 *   TMA, wgmma, mbarrier), which say so: such kernels keep those data in dynamic shared memory.
 *   Shared-state-space addresses (cvta.to.shared): dynamic shared memory at [16, 16 + size),
 *   the static section above it, each keeping the host address's low 12 bits.
 * - Kernel arguments are copied at the launch (as CUDA does) and every thread gets its own
 *   copy of them (kernel parameters are per-thread variables). Pointer arguments, and the
 *   pointers inside an argument type for which cuda_sim_arg_ptrs<T> is specialised, must be
 *   NULL or lie in a live allocation: the runtime checks them before anything runs.
 * - Alignment and array bounds are the compiler's, not this model's: tests/cuda_host.cmake
 *   builds the kernels with -fsanitize=alignment,bounds (unrecoverable), so a load or store off
 *   its size's alignment (a GPU's "misaligned address") or an index past a fixed-size array (a
 *   thread's registers, a __shared__ array) stops the test at the kernel's line.
 * - Uninitialised values: cudaMalloc and cudaMallocHost return memory filled with 0xFF (NaN in
 *   fp32 and bf16, -1 as an integer; sim_runtime.cpp), not the zeros a fresh mapping holds, and
 *   the kernels are built with -ftrivial-auto-var-init=pattern, so a thread's local that is read
 *   before it is written holds 0xFE bytes (-1.7e38 in fp32), not the stack's last value.
 * - Math: the host's libm and plain float arithmetic, compiled with -ffp-contract=off so that
 *   a*b+c is never silently fused (fmaf is the explicit, correctly rounded fused op, as on the
 *   GPU). The intrinsics with a rounding mode (_rn) are the plain operations. The device's own
 *   approximations (__expf, rsqrtf, libdevice expf's last ulp) are NOT reproduced.
 * - No float atomics: stepgraph has none by design. The one integer atomic, atomicInc,
 *   elects the last block of a group to finish a reduction (dev_last_block, cuda_common.cuh);
 *   it is one rendezvous-free read-modify-write (fibers never run concurrently). Blocks run one
 *   after another here, so the block that runs last always sees every partial, and a block
 *   elected too early would go unseen by the results alone (the last one redoes the work
 *   right). So each launch is audited: every ticket it incremented must have wrapped to 0
 *   exactly once, at its last increment (one election a group, by its last arrival, and the
 *   ticket ready for the next launch); anything else fails the launch.
 * - The sm_80 tensor-core fragment operations and asynchronous copies (sim_tensor_core.cpp,
 *   called by kernels/cuda/tensor_core.cuh; written from the PTX ISA, whose rules that file
 *   quotes):
 *   - mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 and ldmatrix.sync.aligned.m8n8
 *     .x{1,2,4}{.trans}.shared.b16 are warp operations over all 32 lanes, built on a variant of
 *     the rendezvous (warp_collective in sim_internal.hpp) in which the last lane to arrive
 *     computes every lane's result once: no allocation, no per-lane copy of the whole warp's
 *     payloads. A lane that exited, a warp with fewer than 32 threads, lanes at different
 *     operations or qualifiers are reported as for the other warp operations. mma reassembles
 *     A, B and C from the lanes' fragments by the PTX layouts, sums the 16 exact bf16 products
 *     in double in k order, adds C and rounds once to fp32; NaN and Inf propagate (NaN as
 *     0x7fffffff). The GPU's accumulation order and rounding inside the MMA are unspecified
 *     by the ISA and differ from these in the last bits: tests of tensor-core kernels compare
 *     with a tolerance. ldmatrix checks every used row address (in shared memory, 16-byte
 *     aligned, the 16-byte row inside) and delivers the PTX layout, transposed for .trans.
 *   - cp.async.ca/cg.shared.global (with src-size zero-fill), commit_group, wait_group N and
 *     wait_all: a per-thread queue of pending copies grouped by commit_group. A copy is never
 *     performed at issue: its shared destination is poisoned then, and the data lands only
 *     when a wait of the issuing thread forces it; wait_group N performs every committed group
 *     but the newest N, uncommitted copies stay pending. So a read of the destination before
 *     the wait, by the thread or by another one across a barrier, and a refill of a pipeline
 *     stage that a warp has yet to read (a missing barrier; in the forward and reverse orders),
 *     read poison. Reported: cp-size not 4/8/16, src-size above cp-size, a destination
 *     outside shared memory, a source (when src-size > 0) outside every live allocation,
 *     either misaligned to cp-size, a copy to a destination that overlaps one of the thread's
 *     pending copies (unordered writes). Legal and silent: copies pending at a __syncthreads
 *     (a multistage pipeline) or at the thread's exit (dropped, never performed).
 * - The Hopper (sm_90a) operations (sim_hopper.cpp, called by kernels/cuda/hopper.cuh; written
 *   from the PTX ISA and the driver API's documentation, the details at the top of that file):
 *   - mbarrier: init/arrive/expect_tx/test_wait/try_wait/inval on a per-block table (phase,
 *     arrivals, tx-count); try_wait blocks the thread until the phase completes, so a deadlock
 *     is reported with every waiter and barrier state. Reported: bad counts, a use before the
 *     __syncthreads after init, more arrivals than expected, a tx-count out of range, an
 *     ordinary store over a live barrier, a waiter the barrier ran two phases ahead of.
 *   - cp.async.bulk.tensor (tile mode, 2-5 dimensions) with tensor maps from the stand-in
 *     driver API (include/cuda.h: cuTensorMapEncodeTiled/Im2col validate as documented):
 *     validated and queued at issue, destination poisoned; the box lands (out-of-bounds
 *     elements zero, the 32/64/128B swizzle applied to shared-address bits) when a thread waits
 *     on its mbarrier, or when no thread can run; copies in flight at the block's end reported.
 *   - wgmma.mma_async m64nNk16 bf16 -> f32 (N 32..256, A from shared memory or registers, both
 *     transposes) with fence/commit_group/wait_group: a warpgroup rendezvous (128 threads, 4
 *     whole warps from a warp index divisible by 4); operands gathered at issue through the
 *     matrix descriptors, the accumulators poisoned (NaN 0x7fc0dead) until the wait_group that
 *     retires the group computes the MMA (arithmetic as mma.sync's: exact products summed in
 *     double, rounded once). Reported: a missing wgmma.fence, descriptors or scale-d differing
 *     in the warpgroup, an operand, accumulator or A register written in flight, an operand
 *     read under a copy in flight, a thread leaving with accumulators in flight, descriptor
 *     forms whose placement the documents leave open.
 *   - the async proxy: a shadow of shared memory as the copy engine and wgmma last saw it;
 *     wgmma reading bytes that ordinary stores changed with no fence.proxy.async since is
 *     reported (coarsely: any thread's fence counts for all).
 *   - elect.sync (elects lane 31 of the mask: deterministic, never assume lane 0), setmaxnreg
 *     (range, warpgroup-uniform, .inc/.dec direction, the 64K register file), stmatrix m8n8
 *     x1/x2/x4 (.trans), bar.sync id, nthreads (named barriers; deadlocks reported).
 * - SG_SIM_LAUNCH_ONLY=1 (sim_runtime.cpp): every kernel launch and GEMM is checked as above
 *   (its configuration against the limits and what ptxas assembled, its pointers, the GEMM's
 *   operand extents) and recorded or captured as usual, but never executed: a step at the
 *   shapes a GPU runs (unet_cifar at batch 128) in seconds, its results left as the poison.
 *   Copies and memsets still run. For the launch audit (tests/test_gpu_scripts.sh
 *   --launch-audit), never for a test that reads a value.
 */
#ifndef SG_SIM_CUDA_SIM_HPP
#define SG_SIM_CUDA_SIM_HPP

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <math.h>

#include "cuda_runtime_api.h"

/* ---- qualifiers ---- */
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __grid_constant__ /* kernel parameters are per-thread copies here anyway */
/* `used` and the section keep every shared variable addressable memory the compiler must reload
 * after a barrier (the barrier functions also carry a memory clobber). */
#define __shared__ static __attribute__((section("sg_sim_shared"), used))

/* ---- vector types, with CUDA's alignment ---- */
struct __attribute__((aligned(8))) float2 {
    float x, y;
};
struct float3 {
    float x, y, z;
};
struct __attribute__((aligned(16))) float4 {
    float x, y, z, w;
};
struct __attribute__((aligned(8))) int2 {
    int x, y;
};
struct __attribute__((aligned(16))) int4 {
    int x, y, z, w;
};
struct __attribute__((aligned(8))) uint2 {
    unsigned int x, y;
};
struct __attribute__((aligned(16))) uint4 {
    unsigned int x, y, z, w;
};
static inline float2 make_float2(float x, float y) {
    return float2{x, y};
}
static inline float3 make_float3(float x, float y, float z) {
    return float3{x, y, z};
}
static inline float4 make_float4(float x, float y, float z, float w) {
    return float4{x, y, z, w};
}
static inline int2 make_int2(int x, int y) {
    return int2{x, y};
}
static inline int4 make_int4(int x, int y, int z, int w) {
    return int4{x, y, z, w};
}
static inline uint2 make_uint2(unsigned x, unsigned y) {
    return uint2{x, y};
}
static inline uint3 make_uint3(unsigned x, unsigned y, unsigned z) {
    return uint3{x, y, z};
}
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) {
    return uint4{x, y, z, w};
}

/* ---- built-in variables: the running fiber's, read-only to kernels ---- */
extern uint3 sg_sim_threadIdx, sg_sim_blockIdx;
extern dim3 sg_sim_blockDim, sg_sim_gridDim;
#define threadIdx (static_cast<const uint3 &>(sg_sim_threadIdx))
#define blockIdx (static_cast<const uint3 &>(sg_sim_blockIdx))
#define blockDim (static_cast<const dim3 &>(sg_sim_blockDim))
#define gridDim (static_cast<const dim3 &>(sg_sim_gridDim))
static constexpr int warpSize = 32;

/* ---- math ---- */
static inline float rsqrtf(float x) {
    return 1.0f / sqrtf(x);
}
/* glibc declares __expf/__logf itself: the fast-math intrinsics are macros here */
#define __expf expf
#define __logf logf
static inline float __fdividef(float a, float b) {
    return a / b;
}
static inline float __fadd_rn(float a, float b) {
    return a + b;
}
static inline float __fsub_rn(float a, float b) {
    return a - b;
}
static inline float __fmul_rn(float a, float b) {
    return a * b;
}
static inline float __fdiv_rn(float a, float b) {
    return a / b;
}
static inline float __fmaf_rn(float a, float b, float c) {
    return fmaf(a, b, c);
}
static inline double __dadd_rn(double a, double b) {
    return a + b;
}
static inline double __dsub_rn(double a, double b) {
    return a - b;
}
static inline double __dmul_rn(double a, double b) {
    return a * b;
}
static inline double __ddiv_rn(double a, double b) {
    return a / b;
}
static inline double __fma_rn(double a, double b, double c) {
    return fma(a, b, c);
}
static inline unsigned __float_as_uint(float f) {
    unsigned u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float __uint_as_float(unsigned u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline int __float_as_int(float f) {
    int u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float __int_as_float(int u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
/* the high 32 bits of the 64-bit product (PTX mul.hi.u32) */
static inline unsigned __umulhi(unsigned a, unsigned b) {
    return (unsigned)(((unsigned long long)a * b) >> 32);
}
template <class T> static inline T __ldg(const T *p) {
    return *p;
}
/* a load that bypasses L1 (ld.global.cg): what another block wrote, after its fence */
template <class T> static inline T __ldcg(const T *p) {
    return *p;
}
/* atomicInc (the old value; *p becomes old >= val ? 0 : old + 1): one read-modify-write
 * (fibers never run concurrently, and none switches inside it), audited per launch
 * (sim_exec.cpp) as a last-block ticket: every address it touched must wrap to 0 exactly once,
 * at its last increment of the launch. */
namespace sg_sim {
unsigned atomic_inc(unsigned *p, unsigned val);
}
static inline unsigned atomicInc(unsigned *p, unsigned val) {
    return sg_sim::atomic_inc(p, val);
}
static inline int min(int a, int b) {
    return a < b ? a : b;
}
static inline int max(int a, int b) {
    return a > b ? a : b;
}
static inline unsigned min(unsigned a, unsigned b) {
    return a < b ? a : b;
}
static inline unsigned max(unsigned a, unsigned b) {
    return a > b ? a : b;
}
static inline long long min(long long a, long long b) {
    return a < b ? a : b;
}
static inline long long max(long long a, long long b) {
    return a > b ? a : b;
}

/* ---- the execution model's entry points (sim_exec.cpp) ---- */
#define SG_SIM_WARP_PAYLOAD 64 /* bytes one lane deposits at a rendezvous */

namespace sg_sim {
enum warp_op {
    WOP_SYNCWARP = 1,
    WOP_SHFL,
    WOP_SHFL_UP,
    WOP_SHFL_DOWN,
    WOP_SHFL_XOR,
    WOP_BALLOT,
    WOP_ANY,
    WOP_ALL,
    WOP_MMA_M16N8K16_BF16,
    WOP_LDMATRIX_X1,
    WOP_LDMATRIX_X2,
    WOP_LDMATRIX_X4,
    WOP_LDMATRIX_X1_TRANS,
    WOP_LDMATRIX_X2_TRANS,
    WOP_LDMATRIX_X4_TRANS,
    WOP_ELECT,
    WOP_STMATRIX_X1,
    WOP_STMATRIX_X2,
    WOP_STMATRIX_X4,
    WOP_STMATRIX_X1_TRANS,
    WOP_STMATRIX_X2_TRANS,
    WOP_STMATRIX_X4_TRANS,
    WOP_MMA_M16N8K8_TF32,
    /* warpgroup operations (sim_hopper.cpp) from here: an op code carries its qualifiers */
    WGOP_FIRST = 0x1000
};
void syncthreads_impl();
/* Every lane of `mask` deposits `bytes` of `mine` and waits for the others; then out[l * bytes]
 * holds lane l's payload for every lane l of the mask. Returns the caller's lane. */
int warp_rendezvous(int op, unsigned mask, const void *mine, size_t bytes, void *out);
/* A model violation inside a kernel: reports it with the kernel, block and thread, stops the
 * launch (the stream gets a sticky cudaErrorLaunchFailure). Does not return. */
[[noreturn]] void device_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
unsigned active_lanes(); /* lanes of the caller's warp that have not exited */
void *dynamic_smem();

/* ---- the tensor-core fragment operations and asynchronous copies (sim_tensor_core.cpp) ----
 * One function per PTX instruction, called by kernels/cuda/tensor_core.cuh under SG_CUDA_HOST;
 * their semantics and checks: the top of this file, in detail in sim_tensor_core.cpp. */

/* mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 d, a, b, c: warp-collective (all 32
 * lanes). a: 4 x (2 bf16), b: 2 x (2 bf16), c and d: 4 x f32, in the PTX fragment layouts. d may
 * alias c. */
void mma_m16n8k16_bf16_f32(float d[4], const unsigned a[4], const unsigned b[2], const float c[4]);
/* mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 d, a, b, c: warp-collective (all 32
 * lanes). a: 4 tf32, b: 2 tf32 (each in a 32-bit register; the low 13 bits are not read), c and
 * d: 4 x f32, in the PTX fragment layouts. d may alias c. */
void mma_m16n8k8_tf32_f32(float d[4], const unsigned a[4], const unsigned b[2], const float c[4]);
/* cvt.rna.tf32.f32 d, a: a rounded to tf32 (10 fraction bits), to nearest, ties away from zero;
 * per thread */
unsigned cvt_rna_tf32(float a);
/* ldmatrix.sync.aligned.m8n8.x{num}{.trans if trans}.shared.b16 r, [row_addr]: warp-collective;
 * num is 1, 2 or 4; r receives num registers. */
void ldmatrix_b16(int num, int trans, unsigned *r, const void *row_addr);
/* cp.async.{ca,cg}.shared.global [dst], [src], cp_size, src_size (cp_size 4, 8 or 16; the cg
 * form is 16 only; src_size in [0, cp_size], the rest zero-filled). Per thread. */
void cp_async(void *dst_smem, const void *src_gmem, int cp_size, int src_size);
void cp_async_commit_group();    /* cp.async.commit_group */
void cp_async_wait_group(int n); /* cp.async.wait_group n */
void cp_async_wait_all();        /* cp.async.wait_all: commit_group; wait_group 0 */

/* ---- the Hopper operations (sim_hopper.cpp) ----
 * One function per PTX instruction, called by kernels/cuda/hopper.cuh under SG_CUDA_HOST;
 * their semantics and checks: the top of this file, in detail in sim_hopper.cpp. */

uint32_t smem_addr(const void *p); /* cvta.to.shared */
void mbar_init(void *bar, unsigned count);
void mbar_inval(void *bar);
void fence_mbar_init();   /* fence.mbarrier_init.release.cluster */
void fence_proxy_async(); /* fence.proxy.async.shared::cta */
/* mbarrier.arrive (expect_tx = 0) or mbarrier.arrive.expect_tx bytes (expect_tx = 1) */
void mbar_arrive(void *bar, int expect_tx, unsigned bytes);
void mbar_expect_tx(void *bar, unsigned bytes);
/* mbarrier.test_wait.parity (blocking = 0) or mbarrier.try_wait.parity (blocking = 1) */
bool mbar_wait(void *bar, unsigned parity, int blocking);
/* cp.async.bulk.tensor.{dims}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes */
void tma_load(int dims, void *dst, const void *tensor_map, void *bar, const int *coords);
void wgmma_fence();     /* wgmma.fence.sync.aligned */
void wgmma_commit();    /* wgmma.commit_group.sync.aligned */
void wgmma_wait(int n); /* wgmma.wait_group.sync.aligned n */
/* wgmma.mma_async.sync.aligned.m64n{n}k16.f32.bf16.bf16: d (n / 2 floats), A from registers a
 * (4 x b32) when a is not null, else from the descriptor desc_a */
void wgmma_bf16(int n, int trans_a, int trans_b, float *d, const uint32_t *a, uint64_t desc_a,
                uint64_t desc_b, int scale_d);
bool elect_one(unsigned mask);       /* elect.sync _|p, mask */
void setmaxnreg(int inc, int count); /* setmaxnreg.{inc,dec}.sync.aligned.u32 count */
/* stmatrix.sync.aligned.m8n8.x{num}{.trans}.shared.b16 [row_addr], r */
void stmatrix_b16(int num, int trans, void *row_addr, const uint32_t *r);
void named_barrier_sync(int id, int nthreads); /* bar.sync id, nthreads */
} // namespace sg_sim

#define SG_SIM_COMPILER_BARRIER() __asm__ __volatile__("" ::: "memory")

static inline void __syncthreads() {
    SG_SIM_COMPILER_BARRIER();
    sg_sim::syncthreads_impl();
    SG_SIM_COMPILER_BARRIER();
}
static inline void __threadfence_block() {
    SG_SIM_COMPILER_BARRIER();
}
static inline void __threadfence() {
    SG_SIM_COMPILER_BARRIER();
}
static inline void __syncwarp(unsigned mask = 0xffffffffu) {
    SG_SIM_COMPILER_BARRIER();
    sg_sim::warp_rendezvous(sg_sim::WOP_SYNCWARP, mask, nullptr, 0, nullptr);
    SG_SIM_COMPILER_BARRIER();
}
/* No lockstep exists to observe: the lanes that have not exited. */
static inline unsigned __activemask() {
    return sg_sim::active_lanes();
}

namespace sg_sim {
static inline void check_width(int width, const char *fn) {
    if (width <= 0 || width > 32 || (width & (width - 1)))
        device_fail("%s: width %d is not a power of two in [1, 32]", fn, width);
}
/* The shuffle's common tail: the caller's value when src says "own", else lane src's value,
 * which must be a lane of the mask. */
template <class T>
static inline T shfl_common(int op, unsigned mask, T var, int src_of_lane(int, int, int), int arg,
                            int width, const char *fn) {
    static_assert(sizeof(T) <= SG_SIM_WARP_PAYLOAD && std::is_trivially_copyable<T>::value,
                  "shuffle of an unsupported type");
    check_width(width, fn);
    unsigned char all[32 * sizeof(T)];
    SG_SIM_COMPILER_BARRIER();
    const int lane = warp_rendezvous(op, mask, &var, sizeof(T), all);
    SG_SIM_COMPILER_BARRIER();
    const int src = src_of_lane(lane, arg, width);
    if (src < 0) return var;
    if (!((mask >> src) & 1u))
        device_fail("%s: lane %d reads lane %d, which is not in the mask 0x%08x", fn, lane, src,
                    mask);
    T r;
    memcpy(&r, all + (size_t)src * sizeof(T), sizeof(T));
    return r;
}
/* Source lanes per the guide; -1 = the caller keeps its own value. */
static inline int src_idx(int lane, int src, int width) {
    return (lane & ~(width - 1)) | (src & (width - 1));
}
static inline int src_up(int lane, int delta, int width) {
    return (lane & (width - 1)) < delta ? -1 : lane - delta;
}
static inline int src_down(int lane, int delta, int width) {
    return (lane & (width - 1)) + delta >= width ? -1 : lane + delta;
}
static inline int src_xor(int lane, int m, int width) {
    const int s = lane ^ m;
    return s >= (lane & ~(width - 1)) + width ? -1 : s;
}
} // namespace sg_sim

template <class T> static inline T __shfl_sync(unsigned mask, T var, int srcLane, int width = 32) {
    return sg_sim::shfl_common(sg_sim::WOP_SHFL, mask, var, sg_sim::src_idx, srcLane, width,
                               "__shfl_sync");
}
template <class T>
static inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = 32) {
    return sg_sim::shfl_common(sg_sim::WOP_SHFL_UP, mask, var, sg_sim::src_up, (int)delta, width,
                               "__shfl_up_sync");
}
template <class T>
static inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32) {
    return sg_sim::shfl_common(sg_sim::WOP_SHFL_DOWN, mask, var, sg_sim::src_down, (int)delta,
                               width, "__shfl_down_sync");
}
template <class T>
static inline T __shfl_xor_sync(unsigned mask, T var, int laneMask, int width = 32) {
    return sg_sim::shfl_common(sg_sim::WOP_SHFL_XOR, mask, var, sg_sim::src_xor, laneMask, width,
                               "__shfl_xor_sync");
}

namespace sg_sim {
/* ballot over the mask: bit l set when lane l of the mask passed a non-zero predicate */
static inline unsigned vote(int op, unsigned mask, int pred) {
    int all[32];
    SG_SIM_COMPILER_BARRIER();
    warp_rendezvous(op, mask, &pred, sizeof pred, all);
    SG_SIM_COMPILER_BARRIER();
    unsigned b = 0;
    for (int l = 0; l < 32; l++)
        if (((mask >> l) & 1u) && all[l]) b |= 1u << l;
    return b;
}
} // namespace sg_sim
static inline unsigned __ballot_sync(unsigned mask, int predicate) {
    return sg_sim::vote(sg_sim::WOP_BALLOT, mask, predicate);
}
static inline int __any_sync(unsigned mask, int predicate) {
    return sg_sim::vote(sg_sim::WOP_ANY, mask, predicate) != 0;
}
static inline int __all_sync(unsigned mask, int predicate) {
    return sg_sim::vote(sg_sim::WOP_ALL, mask, predicate) == mask;
}

/* ---- launches: SG_LAUNCH (kernels/cuda/cuda_common.cuh) calls sg_sim::launch ---- */

/* The pointers inside a by-value kernel argument of type T, so the runtime can check them (a
 * plain pointer argument needs no trait). Specialise for argument structs that carry device
 * pointers: get() writes at most SG_SIM_ARG_PTRS_MAX and returns how many. */
#define SG_SIM_ARG_PTRS_MAX 256
template <class T> struct cuda_sim_arg_ptrs {
    static int get(const T &, const void **) {
        return 0;
    }
};

namespace sg_sim {
struct call_base {
    virtual ~call_base() = default;
    virtual void invoke() = 0; /* one thread's call of the kernel */
    /* launched by SG_LAUNCH (launch_as): every thread must execute SG_PDL_ENTER (pdl_enter) */
    bool pdl_required = false;
};

/* SG_PDL_ENTER() in a kernel (kernels/cuda/cuda_common.cuh): the running thread executed
 * griddepcontrol.launch_dependents and griddepcontrol.wait. The emulator runs launches one at
 * a time, so both are no-ops here; it records the call to check launch_as's rule. */
void pdl_enter();

struct launch_info {
    const char *name = nullptr;
    const void *func = nullptr;
    dim3 grid, block;
    size_t smem = 0;
    std::vector<unsigned char> sig;                 /* every argument's bytes, in order */
    std::vector<std::pair<int, const void *>> ptrs; /* (argument index, pointer) */
    int nargs = 0;

    template <class T> void add_arg(const T &v) {
        const unsigned char *b = reinterpret_cast<const unsigned char *>(&v);
        sig.insert(sig.end(), b, b + sizeof(T));
        if constexpr (std::is_pointer<T>::value) {
            ptrs.emplace_back(nargs, (const void *)v);
        } else {
            const void *p[SG_SIM_ARG_PTRS_MAX];
            int n = cuda_sim_arg_ptrs<T>::get(v, p);
            for (int i = 0; i < n; i++) ptrs.emplace_back(nargs, p[i]);
        }
        nargs++;
    }
};

/* Checks the configuration and every pointer, then runs the launch or records it into the
 * stream's capture. The error, if any, is what the next cudaGetLastError returns. */
void submit(launch_info &li, cudaStream_t st, std::shared_ptr<call_base> call);

template <class... P> struct kernel_call final : call_base {
    void (*fn)(P...);
    std::tuple<P...> args;
    kernel_call(void (*f)(P...), std::tuple<P...> a) : fn(f), args(std::move(a)) {}
    void invoke() override {
        std::apply(fn, args); /* copies: each thread's parameters are its own */
    }
};

/* implicit conversion to the parameter type, as a <<<>>> call does */
template <class T> static inline T pass(T v) {
    return v;
}

/* A launch; pdl_required (SG_LAUNCH's launches): every thread must execute SG_PDL_ENTER before
 * it exits, whether programmatic dependent launch is on or off (on a GPU a kernel launched with
 * the attribute that never waits races with the kernel before it) */
template <class... P, class... A>
void launch_as(bool pdl_required, const char *name, void (*fn)(P...), dim3 grid, dim3 block,
               size_t smem, cudaStream_t st, A &&...a) {
    static_assert(sizeof...(P) == sizeof...(A), "SG_LAUNCH: wrong number of kernel arguments");
    auto call =
        std::make_shared<kernel_call<P...>>(fn, std::tuple<P...>(pass<P>(std::forward<A>(a))...));
    call->pdl_required = pdl_required;
    launch_info li;
    li.name = name;
    li.func = (const void *)fn;
    li.grid = grid;
    li.block = block;
    li.smem = smem;
    std::apply([&li](const P &...v) { (li.add_arg(v), ...); }, call->args);
    submit(li, st, std::move(call));
}

template <class... P, class... A>
void launch(const char *name, void (*fn)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t st,
            A &&...a) {
    launch_as(false, name, fn, grid, block, smem, st, std::forward<A>(a)...);
}

/* Kernel nodes built from a cudaKernelNodeParams (cudaGraphAddKernelNode): the emulation calls a
 * kernel with typed arguments, so the function must be named first (SG_KERNEL_NODE_FUNC, whose
 * node_func records how to read its arguments from kernelParams). node_call builds the call and
 * fills li's name, function and arguments; nullptr for a function never named. Such a node's
 * threads must execute SG_PDL_ENTER, as an SG_LAUNCH's do. */
typedef std::shared_ptr<call_base> (*node_call_maker)(const void *fn, void *const *args,
                                                      launch_info &li);
void register_node_func(const void *fn, const char *name, node_call_maker make);
std::shared_ptr<call_base> node_call(const void *fn, void *const *args, launch_info &li);

template <class... P, size_t... K>
std::tuple<P...> node_args(void *const *args, std::index_sequence<K...>) {
    return std::tuple<P...>{*static_cast<const std::remove_cv_t<P> *>(args[K])...};
}
template <class... P>
std::shared_ptr<call_base> make_node_call(const void *f, void *const *args, launch_info &li) {
    auto fn = reinterpret_cast<void (*)(P...)>(const_cast<void *>(f));
    auto call = std::make_shared<kernel_call<P...>>(
        fn, node_args<P...>(args, std::index_sequence_for<P...>{}));
    call->pdl_required = true;
    li.func = f;
    std::apply([&li](const P &...v) { (li.add_arg(v), ...); }, call->args);
    return call;
}
template <class... P> void *node_func(const char *name, void (*fn)(P...)) {
    register_node_func(reinterpret_cast<const void *>(fn), name, &make_node_call<P...>);
    return reinterpret_cast<void *>(fn);
}

} // namespace sg_sim

#endif
