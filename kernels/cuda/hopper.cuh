/* hopper.cuh — the Hopper (sm_90a) operations of the second-generation tensor-core kernels:
 * mbarrier, the tensor copy engine (TMA, cp.async.bulk.tensor), warpgroup MMA (wgmma) and the
 * few instructions around them, one small function (or a macro where PTX needs an immediate) per
 * instruction, so the same kernel source serves nvcc and the host emulation (tests/cuda_host,
 * SG_CUDA_HOST), exactly as tensor_core.cuh does for the sm_80 operations.
 *
 * nvcc: inline PTX, one instruction per function; the file needs the sm_90a target
 * (-gencode=arch=compute_90a,code=sm_90a) for wgmma and setmaxnreg (tests/hopper_build.cmake
 * assembles every function of it in every CI build; tests/hopper_probes.cuh exercises them, on
 * the emulation in CI and on a GPU as the test hopper_gpu). Host emulation: the sg_sim:: functions
 * of tests/cuda_host/include/cuda_sim.hpp (tests/cuda_host/sim_hopper.cpp), written from the PTX
 * ISA and the driver API's documentation, not from any kernel. The emulation is STRICT where
 * the documents leave something open: it refuses what it cannot place exactly, with a message
 * that says so (docs/gpu-status.md lists those readings, to confirm on the first GPU).
 *
 * ------------------------------------------------------------------------------------------
 * Shared-memory addresses. sg_smem_u32(p) is the 32-bit shared-state-space address of a
 * generic pointer into shared memory (cvta.to.shared). Swizzling (TMA and wgmma alike) is a
 * function of these ADDRESS BITS, so a swizzled buffer must be aligned in shared-address terms:
 * dynamic shared memory (SG_DYNAMIC_SMEM) is only guaranteed 16-byte aligned (the emulation
 * places it at 16 mod 1024 on purpose); round it up with sg_smem_align(p, 1024) and ask for the
 * slack in the launch's dynamic size. Under the host emulation a TEMPLATE kernel's __shared__
 * variables are not shared memory (g++ ignores the section attribute of template statics; the
 * emulation's checks say so): keep the mbarriers and tiles of template kernels in dynamic
 * shared memory (carved from SG_DYNAMIC_SMEM), as tests/hopper_probes.cuh does.
 *
 * ------------------------------------------------------------------------------------------
 * mbarrier (PTX ISA "Parallel Synchronization and Communication Instructions: mbarrier"). An
 * mbarrier is a 64-bit object in shared memory (8-byte aligned; `uint64_t`), opaque: touch it
 * only through these functions. It holds the current phase, the expected and the pending
 * arrival counts, and a transaction count (tx-count, bytes). A phase completes when the pending
 * arrivals reach 0 AND the tx-count is 0; then the phase number advances by one (its parity
 * flips), the pending count is reset to the expected count and waiting threads are released.
 * - sg_mbar_init(bar, count): mbarrier.init; count in [1, 2^20 - 1]; phase 0, tx-count 0.
 *   Re-initialising a live mbarrier is undefined: sg_mbar_inval first. Make the initialisation
 *   visible before any other thread or the copy engine uses it: sg_fence_mbar_init() (or
 *   sg_fence_proxy_async()) in the initialising thread, then __syncthreads().
 * - sg_mbar_arrive(bar): one arrival (release semantics at CTA scope; a thread's prior writes
 *   are visible to a thread that observes the phase complete). More arrivals in a phase than
 *   expected are undefined.
 * - sg_mbar_expect_tx(bar, bytes): tx-count += bytes (no arrival).
 *   sg_mbar_arrive_expect_tx(bar, bytes): expect-tx then one arrival (the producer's usual call,
 *   made once per stage BEFORE or after issuing the stage's copies: the tx-count may go
 *   transiently negative; range +-(2^20 - 1)).
 * - Copies (below) perform complete-tx: tx-count -= the bytes they wrote.
 * - sg_mbar_test_wait(bar, parity) -> bool: mbarrier.test_wait.parity, non-blocking.
 *   sg_mbar_try_wait(bar, parity) -> bool: mbarrier.try_wait.parity, may suspend the thread
 *   for a while. Both are true iff the phase of that parity has completed, asked of the
 *   CURRENT phase or the IMMEDIATELY PRECEDING one: waiting on parity p returns once the phase
 *   count's parity differs from p. A fresh barrier is in phase 0: sg_mbar_wait(bar, 0) waits for
 *   the first completion, and the k-th use of a barrier waits with parity k & 1. A waiter must
 *   never let the barrier run two phases ahead of it (the parity would be ambiguous; the
 *   emulation reports it). Acquire semantics: after the wait, data the phase's arrivals and
 *   copies wrote is visible to the waiting thread.
 * - sg_mbar_wait(bar, parity): try_wait in a loop until true.
 * - sg_mbar_inval(bar): mbarrier.inval, before the 8 bytes are used for anything else.
 * - sg_fence_mbar_init(): fence.mbarrier_init.release.cluster (orders this thread's prior inits).
 * - sg_fence_proxy_async(): fence.proxy.async.shared::cta. Shared memory written by ordinary
 *   stores (st.shared, stmatrix, cp.async) that the ASYNC PROXY reads next (wgmma's
 *   shared-memory operands, a TMA store) needs this fence in EVERY writing thread after its
 *   writes and before the barrier that orders them with the reader. TMA loads completing on an
 *   mbarrier need no fence for their readers.
 *
 * ------------------------------------------------------------------------------------------
 * The tensor copy engine (PTX ISA "Data Movement: cp.async.bulk.tensor", "Tensor Access
 * Modes", "Tensor-map"; CUDA driver API cuTensorMapEncodeTiled).
 * - The host encodes a CUtensorMap with cuTensorMapEncodeTiled (driver API, <cuda.h>;
 *   sg_tensor_map_encode_tiled at the end of this file calls it without linking libcuda):
 *   rank 1..5,
 *   dims innermost first (a row-major R x C bf16 matrix: globalDim {C, R}, globalStrides
 *   {C * 2} bytes), the box (boxDim: elements per dimension, each <= 256; boxDim[0] * elemsize a
 *   multiple of 16 and, with a swizzle, <= the swizzle span), elementStrides (1..8; dimension
 *   0's is ignored), swizzle, the out-of-bounds fill.
 * - The kernel takes the map as `const __grid_constant__ CUtensorMap map` and passes &map.
 * - sg_tma_load_{2,3,4,5}d(dst, &map, bar, c0, c1, ...): cp.async.bulk.tensor.Nd.shared::cluster
 *   .global.tile.mbarrier::complete_tx::bytes. One thread issues it. Copies the box whose first
 *   element is at coordinates (c0, c1, ...) (elements, signed: a box may start before 0) into
 *   shared memory at dst, densely, dimension 0 innermost: element (j0, j1, ...) of the box at
 *   byte ((... (j_{N-1} * B_{N-2} + ...) * B1 + j1) * B0 + j0) * elemsize, where
 *   B_i = ceil(boxDim[i] / elementStrides[i]) (B0 = boxDim[0]) and element j_i of dimension i
 *   >= 1 is tensor coordinate c_i + j_i * elementStrides[i]. Elements outside the tensor (a
 *   coordinate < 0 or >= globalDim) are written as zero. Then complete-tx on bar with the WHOLE
 *   box's bytes (filled ones included: prod B_i * elemsize), which the producer expects with
 *   sg_mbar_arrive_expect_tx. dst: shared memory, 128-byte aligned; with a swizzle, aligned to
 *   the swizzle pattern's repeat (256, 512, 1024 bytes for 32B, 64B, 128B).
 * - Swizzle (CU_TENSOR_MAP_SWIZZLE_{32,64,128}B: 16-byte chunks permuted within 32/64/128-byte
 *   spans): the byte at shared address a is stored at
 *       a ^ (((a >> 7) & M) << 4),   M = 1, 3, 7 for 32B, 64B, 128B,
 *   i.e. the 16-byte chunk index (address bits 4..) is XORed with the 128-byte line index
 *   (address bits 7..) modulo the span's chunk count. With 128B and 128-byte box rows (64
 *   bf16), row r's chunk c lands at chunk c ^ (r % 8): the layout wgmma's 128B-swizzle
 *   descriptors read. The emulation requires boxDim[0] * elemsize == the span when swizzling.
 * - Data read before the mbarrier phase completes is undefined (the emulation: poison, 0xFF
 *   bytes, NaN in bf16/fp32).
 * - Not provided: the im2col load mode (the emulation could not place its traversal of the
 *   bounding box faithfully from the documents). An implicit-GEMM convolution loads, per filter
 *   tap, a tile-mode box of the NHWC tensor (dims {C, W, H, N}) at the tap's shifted
 *   coordinates: the out-of-bounds zeros are the padding; a stride-2 conv sets
 *   elementStrides {1, 2, 2, 1}.
 *
 * ------------------------------------------------------------------------------------------
 * wgmma (PTX ISA "Asynchronous Warpgroup Level Matrix Multiply-Accumulate", "Matrix Descriptor
 * Format", "Shared Memory Matrix Layout").
 * A warpgroup is 4 consecutive warps whose first warp index is a multiple of 4 (threads
 * 128g .. 128g + 127). Every wgmma function here is warpgroup-collective: all 128 threads
 * execute the same call with the same operands (".sync.aligned"; the descriptors must be equal
 * across the warpgroup).
 * - sg_wgmma_ss<N, TRANS_A, TRANS_B>(d, desc_a, desc_b, scale_d) and
 *   sg_wgmma_rs<N, TRANS_B>(d, a, desc_b, scale_d): wgmma.mma_async.sync.aligned.m64nNk16
 *   .f32.bf16.bf16. D (64 x N, f32) = A (64 x 16, bf16) * B (16 x N, bf16) + (scale_d ? D : 0).
 *   N in {32, 64, 96, 128, 192, 256}. A from shared memory (desc_a) or registers (a, 4 x b32);
 *   B from shared memory (desc_b). TRANS = 0: the operand is K-major (A row-major M x K, B
 *   "column-major": for each n its 16 k contiguous); TRANS = 1: MN-major. (imm-scale-a/b fixed
 *   at 1.)
 * - The accumulator (d: N / 2 floats per thread). Thread t of the warpgroup, w = t / 32 (its
 *   warp in the warpgroup), g = (t % 32) / 4, q = t % 4:
 *       d[4j + 0] = D[16w + g    ][8j + 2q    ]    d[4j + 1] = D[16w + g    ][8j + 2q + 1]
 *       d[4j + 2] = D[16w + g + 8][8j + 2q    ]    d[4j + 3] = D[16w + g + 8][8j + 2q + 1]
 *   for j in [0, N / 8): each warp owns 16 rows, in the mma.m16n8 C layout repeated along N.
 * - A from registers (a[4], each b32 = two bf16, the lower k in the low half):
 *       a[0] = A[16w + g][2q, 2q + 1]        a[1] = A[16w + g + 8][2q, 2q + 1]
 *       a[2] = A[16w + g][2q + 8, 2q + 9]    a[3] = A[16w + g + 8][2q + 8, 2q + 9]
 * - Asynchrony: mma_async only issues. Its accumulator registers, its A registers and its
 *   shared-memory operands are IN FLIGHT until a sg_wgmma_wait(N) retires its group: reading or
 *   writing d, writing a, or writing the operands' shared memory before then is undefined
 *   (the emulation: d holds NaN poison until the wait; a write to d, to a or to an operand in
 *   flight is reported). sg_wgmma_commit() closes the warpgroup's uncommitted mma_asyncs into a
 *   group; sg_wgmma_wait(N) (N an immediate) waits until at most N groups are pending. Several
 *   mma_asyncs on the same d registers (same shape) are ordered among themselves: a K loop
 *   issues them back to back and waits once.
 * - sg_wgmma_fence(): wgmma.fence, required before the first mma_async and between any
 *   register access (to d or a) and an mma_async that uses those registers. (The emulation
 *   requires one since the warpgroup's last sg_wgmma_wait, which is what every K loop does.)
 *   sg_wgmma_fence_operand(d): a compiler-only fence on d's registers, so the compiler keeps
 *   accesses to them on their side of the wgmma calls (call it after the wait and before the
 *   fence).
 * - Shared-memory operands: a 64-bit matrix descriptor, sg_wgmma_desc(p, lbo, sbo, swizzle):
 *     bits  0-13: start address >> 4 (the operand's first byte; 16-byte aligned)
 *     bits 16-29: leading-dimension byte offset (LBO) >> 4
 *     bits 32-45: stride-dimension byte offset (SBO) >> 4
 *     bits 49-51: base offset (0; the emulation refuses others)
 *     bits 62-63: swizzle: SG_SWIZZLE_NONE 0, SG_SWIZZLE_128B 1, SG_SWIZZLE_64B 2,
 *                 SG_SWIZZLE_32B 3
 *   Adding (bytes >> 4) to a descriptor moves its start address (the K loop's step).
 *   The operand is made of core matrices: 8 rows of 16 bytes (8 bf16). Element (r, k) of an
 *   R x 16 operand (r the M index of A or the N index of B) is at byte offset, before the
 *   swizzle, with S the swizzle span (32, 64, 128) and E = S / 2 elements:
 *     K-major,  none:    (r / 8) * SBO + (k / 8) * LBO + (r % 8) * 16 + (k % 8) * 2
 *     K-major,  swizzle: (r / 8) * SBO + (r % 8) * S + (k / 8) * 16 + (k % 8) * 2  (no LBO)
 *     MN-major, none:    (r / 8) * SBO + (k / 8) * LBO + (k % 8) * 16 + (r % 8) * 2
 *     MN-major, swizzle: (r / E) * LBO + (k / 8) * SBO + (k % 8) * S + (r % E) * 2
 *   and the swizzle applies to the resulting shared address exactly as TMA's does (above). So
 *   a tile TMA wrote with SWIZZLE_128B as rows of 64 bf16 (128 bytes) is, for wgmma:
 *     K-major (rows = M or N, 64 k each): desc(tile + 32 * kstep, LBO 0 (unused), SBO 1024,
 *       SG_SWIZZLE_128B), kstep = 0..3 the 16-wide K slice;
 *     MN-major (rows = k, 64 m/n each): desc(tile + 2048 * kstep, LBO = bytes between 64-wide
 *       column blocks, SBO 1024, SG_SWIZZLE_128B).
 *   The emulation requires, with a swizzle: base offset 0, a start address inside the first
 *   line of a pattern repeat (K-major: start % (8 S) in {0, 32, ..., S - 32}; MN-major:
 *   start % (8 S) == 0) and strides that are multiples of 8 S.
 *
 * ------------------------------------------------------------------------------------------
 * Others.
 * - sg_elect_one() -> bool: elect.sync _|p, 0xffffffff: true in exactly one lane of the warp,
 *   the same one every time, WHICH one unspecified (the emulation elects lane 31; never
 *   assume lane 0). All 32 lanes call it.
 * - sg_setmaxnreg_inc(N), sg_setmaxnreg_dec(N): setmaxnreg.{inc,dec}.sync.aligned.u32 N, N in
 *   [24, 256] a multiple of 8, warpgroup-collective; effective only with a register cap at
 *   entry (__launch_bounds__(threads, 1)) and each warpgroup role one branch of an if/else.
 * - sg_stmatrix_x{1,2,4}[_trans](p, r): stmatrix.sync.aligned.m8n8.x{1,2,4}{.trans}.shared.b16,
 *   ldmatrix's mirror (tensor_core.cuh): lanes 8i..8i+7 give the 16-byte-aligned row addresses
 *   of matrix i; lane l's r[i] holds row l / 4, elements 2 (l % 4) and 2 (l % 4) + 1 of matrix i
 *   (.trans: column l / 4, rows 2 (l % 4), 2 (l % 4) + 1). Warp-collective.
 * - sg_named_barrier_sync(id, nthreads): bar.sync id, nthreads: id in [1, 15] (0 is
 *   __syncthreads'), nthreads a multiple of 32; waits until nthreads threads reached it (e.g.
 *   the consumer warpgroups among themselves while the producer runs on).
 */
#ifndef SG_HOPPER_CUH
#define SG_HOPPER_CUH

#include <stdint.h>

#include <cuda.h> /* CUtensorMap (the stand-in's under SG_CUDA_HOST) */

/* the descriptor's swizzle field (bits 62-63), as the hardware encodes it */
enum { SG_SWIZZLE_NONE = 0, SG_SWIZZLE_128B = 1, SG_SWIZZLE_64B = 2, SG_SWIZZLE_32B = 3 };

#ifdef SG_CUDA_HOST

__device__ __forceinline__ uint32_t sg_smem_u32(const void *p) {
    return sg_sim::smem_addr(p);
}
__device__ __forceinline__ void sg_mbar_init(uint64_t *bar, unsigned count) {
    sg_sim::mbar_init(bar, count);
}
__device__ __forceinline__ void sg_mbar_inval(uint64_t *bar) {
    sg_sim::mbar_inval(bar);
}
__device__ __forceinline__ void sg_fence_mbar_init(void) {
    sg_sim::fence_mbar_init();
}
__device__ __forceinline__ void sg_fence_proxy_async(void) {
    sg_sim::fence_proxy_async();
}
__device__ __forceinline__ void sg_mbar_arrive(uint64_t *bar) {
    sg_sim::mbar_arrive(bar, 0, 0);
}
__device__ __forceinline__ void sg_mbar_arrive_expect_tx(uint64_t *bar, unsigned bytes) {
    sg_sim::mbar_arrive(bar, 1, bytes);
}
__device__ __forceinline__ void sg_mbar_expect_tx(uint64_t *bar, unsigned bytes) {
    sg_sim::mbar_expect_tx(bar, bytes);
}
__device__ __forceinline__ bool sg_mbar_test_wait(uint64_t *bar, unsigned parity) {
    return sg_sim::mbar_wait(bar, parity, 0);
}
__device__ __forceinline__ bool sg_mbar_try_wait(uint64_t *bar, unsigned parity) {
    return sg_sim::mbar_wait(bar, parity, 1);
}
__device__ __forceinline__ void sg_tma_load_2d(void *dst, const CUtensorMap *map, uint64_t *bar,
                                               int c0, int c1) {
    const int c[2] = {c0, c1};
    sg_sim::tma_load(2, dst, map, bar, c);
}
__device__ __forceinline__ void sg_tma_load_3d(void *dst, const CUtensorMap *map, uint64_t *bar,
                                               int c0, int c1, int c2) {
    const int c[3] = {c0, c1, c2};
    sg_sim::tma_load(3, dst, map, bar, c);
}
__device__ __forceinline__ void sg_tma_load_4d(void *dst, const CUtensorMap *map, uint64_t *bar,
                                               int c0, int c1, int c2, int c3) {
    const int c[4] = {c0, c1, c2, c3};
    sg_sim::tma_load(4, dst, map, bar, c);
}
__device__ __forceinline__ void sg_tma_load_5d(void *dst, const CUtensorMap *map, uint64_t *bar,
                                               int c0, int c1, int c2, int c3, int c4) {
    const int c[5] = {c0, c1, c2, c3, c4};
    sg_sim::tma_load(5, dst, map, bar, c);
}
__device__ __forceinline__ void sg_wgmma_fence(void) {
    sg_sim::wgmma_fence();
}
__device__ __forceinline__ void sg_wgmma_commit(void) {
    sg_sim::wgmma_commit();
}
#define sg_wgmma_wait(N) sg_sim::wgmma_wait(N)
template <int M> __device__ __forceinline__ void sg_wgmma_fence_operand(float (&d)[M]) {
    (void)d;
    SG_SIM_COMPILER_BARRIER();
}
template <int N, int TRANS_A, int TRANS_B>
__device__ __forceinline__ void sg_wgmma_ss(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b,
                                            int scale_d) {
    static_assert(N == 32 || N == 64 || N == 96 || N == 128 || N == 192 || N == 256,
                  "sg_wgmma_ss: N must be 32, 64, 96, 128, 192 or 256");
    static_assert((TRANS_A == 0 || TRANS_A == 1) && (TRANS_B == 0 || TRANS_B == 1),
                  "sg_wgmma_ss: the transpose immediates are 0 or 1");
    sg_sim::wgmma_bf16(N, TRANS_A, TRANS_B, d, nullptr, desc_a, desc_b, scale_d);
}
template <int N, int TRANS_B>
__device__ __forceinline__ void sg_wgmma_rs(float (&d)[N / 2], const uint32_t (&a)[4],
                                            uint64_t desc_b, int scale_d) {
    static_assert(N == 32 || N == 64 || N == 96 || N == 128 || N == 192 || N == 256,
                  "sg_wgmma_rs: N must be 32, 64, 96, 128, 192 or 256");
    static_assert(TRANS_B == 0 || TRANS_B == 1, "sg_wgmma_rs: the transpose immediate is 0 or 1");
    sg_sim::wgmma_bf16(N, 0, TRANS_B, d, a, 0, desc_b, scale_d);
}
__device__ __forceinline__ bool sg_elect_one(void) {
    return sg_sim::elect_one(0xffffffffu);
}
#define sg_setmaxnreg_inc(N) sg_sim::setmaxnreg(1, N)
#define sg_setmaxnreg_dec(N) sg_sim::setmaxnreg(0, N)
__device__ __forceinline__ void sg_stmatrix_x1(void *p, const uint32_t r[1]) {
    sg_sim::stmatrix_b16(1, 0, p, r);
}
__device__ __forceinline__ void sg_stmatrix_x2(void *p, const uint32_t r[2]) {
    sg_sim::stmatrix_b16(2, 0, p, r);
}
__device__ __forceinline__ void sg_stmatrix_x4(void *p, const uint32_t r[4]) {
    sg_sim::stmatrix_b16(4, 0, p, r);
}
__device__ __forceinline__ void sg_stmatrix_x2_trans(void *p, const uint32_t r[2]) {
    sg_sim::stmatrix_b16(2, 1, p, r);
}
__device__ __forceinline__ void sg_stmatrix_x4_trans(void *p, const uint32_t r[4]) {
    sg_sim::stmatrix_b16(4, 1, p, r);
}
__device__ __forceinline__ void sg_named_barrier_sync(int id, int nthreads) {
    sg_sim::named_barrier_sync(id, nthreads);
}

#else /* nvcc */

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ < 900 || !defined(__CUDA_ARCH_FEAT_SM90_ALL))
#error "hopper.cuh needs the sm_90a target: -gencode=arch=compute_90a,code=sm_90a"
#endif

__device__ __forceinline__ uint32_t sg_smem_u32(const void *p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void sg_mbar_init(uint64_t *bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(sg_smem_u32(bar)), "r"(count)
                 : "memory");
}
__device__ __forceinline__ void sg_mbar_inval(uint64_t *bar) {
    asm volatile("mbarrier.inval.shared::cta.b64 [%0];\n" ::"r"(sg_smem_u32(bar)) : "memory");
}
__device__ __forceinline__ void sg_fence_mbar_init(void) {
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void sg_fence_proxy_async(void) {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
__device__ __forceinline__ void sg_mbar_arrive(uint64_t *bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(sg_smem_u32(bar)) : "memory");
}
__device__ __forceinline__ void sg_mbar_arrive_expect_tx(uint64_t *bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(sg_smem_u32(bar)),
                 "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void sg_mbar_expect_tx(uint64_t *bar, unsigned bytes) {
    asm volatile(
        "mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(sg_smem_u32(bar)),
        "r"(bytes)
        : "memory");
}
__device__ __forceinline__ bool sg_mbar_test_wait(uint64_t *bar, unsigned parity) {
    uint32_t done;
    asm volatile("{\n.reg .pred p;\n"
                 "mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 "selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"(sg_smem_u32(bar)), "r"(parity)
                 : "memory");
    return done != 0;
}
__device__ __forceinline__ bool sg_mbar_try_wait(uint64_t *bar, unsigned parity) {
    uint32_t done;
    asm volatile("{\n.reg .pred p;\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 "selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"(sg_smem_u32(bar)), "r"(parity)
                 : "memory");
    return done != 0;
}
__device__ __forceinline__ void sg_tma_load_2d(void *dst, const CUtensorMap *map, uint64_t *bar,
                                               int c0, int c1) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4}], [%2];\n" ::"r"(sg_smem_u32(dst)),
                 "l"((uint64_t)map), "r"(sg_smem_u32(bar)), "r"(c0), "r"(c1)
                 : "memory");
}
__device__ __forceinline__ void sg_tma_load_3d(void *dst, const CUtensorMap *map, uint64_t *bar,
                                               int c0, int c1, int c2) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4, %5}], [%2];\n" ::"r"(sg_smem_u32(dst)),
                 "l"((uint64_t)map), "r"(sg_smem_u32(bar)), "r"(c0), "r"(c1), "r"(c2)
                 : "memory");
}
__device__ __forceinline__ void sg_tma_load_4d(void *dst, const CUtensorMap *map, uint64_t *bar,
                                               int c0, int c1, int c2, int c3) {
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4, %5, %6}], [%2];\n" ::"r"(sg_smem_u32(dst)),
                 "l"((uint64_t)map), "r"(sg_smem_u32(bar)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
                 : "memory");
}
__device__ __forceinline__ void sg_tma_load_5d(void *dst, const CUtensorMap *map, uint64_t *bar,
                                               int c0, int c1, int c2, int c3, int c4) {
    asm volatile("cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4, %5, %6, %7}], [%2];\n" ::"r"(sg_smem_u32(dst)),
                 "l"((uint64_t)map), "r"(sg_smem_u32(bar)), "r"(c0), "r"(c1), "r"(c2), "r"(c3),
                 "r"(c4)
                 : "memory");
}
__device__ __forceinline__ void sg_wgmma_fence(void) {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void sg_wgmma_commit(void) {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
#define sg_wgmma_wait(N) asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory")
template <int M> __device__ __forceinline__ void sg_wgmma_fence_operand(float (&d)[M]) {
#pragma unroll
    for (int i = 0; i < M; i++) asm volatile("" : "+f"(d[i])::"memory");
}

/* The accumulator operands of one wgmma: N / 2 "+f" registers, listed 8 at a time, and the
 * matching "%i" lists (PTX operand numbers are literal, so each N has its own strings). */
#define SG_WG_F8(d, i)                                                                             \
    "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]),    \
        "+f"(d[i + 6]), "+f"(d[i + 7])
#define SG_WG_F16(d, i) SG_WG_F8(d, i), SG_WG_F8(d, i + 8)
#define SG_WG_F32(d, i) SG_WG_F16(d, i), SG_WG_F16(d, i + 16)
#define SG_WG_F48(d, i) SG_WG_F32(d, i), SG_WG_F16(d, i + 32)
#define SG_WG_F64(d, i) SG_WG_F32(d, i), SG_WG_F32(d, i + 32)
#define SG_WG_F96(d, i) SG_WG_F64(d, i), SG_WG_F32(d, i + 64)
#define SG_WG_F128(d, i) SG_WG_F64(d, i), SG_WG_F64(d, i + 64)
#define SG_WG_R0 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
#define SG_WG_R1 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define SG_WG_R2 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47"
#define SG_WG_R3 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define SG_WG_R4 "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79"
#define SG_WG_R5 "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define SG_WG_R6                                                                                   \
    "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111"
#define SG_WG_R7                                                                                   \
    "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, "   \
    "%127"
#define SG_WG_REGS32 SG_WG_R0
#define SG_WG_REGS64 SG_WG_R0 ", " SG_WG_R1
#define SG_WG_REGS96 SG_WG_REGS64 ", " SG_WG_R2
#define SG_WG_REGS128 SG_WG_REGS64 ", " SG_WG_R2 ", " SG_WG_R3
#define SG_WG_REGS192 SG_WG_REGS128 ", " SG_WG_R4 ", " SG_WG_R5
#define SG_WG_REGS256 SG_WG_REGS128 ", " SG_WG_R4 ", " SG_WG_R5 ", " SG_WG_R6 ", " SG_WG_R7

/* descriptors: operands NR (desc a), NR+1 (desc b), NR+2 (scale-d), NR+3, NR+4 (transposes) */
#define SG_WGMMA_SS_ASM(NS, REGS, DA, DB, SD, TA, TB, OUTS)                                        \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " SD ", 0;\n"                                   \
                 "wgmma.mma_async.sync.aligned.m64n" NS "k16.f32.bf16.bf16 {" REGS "}, " DA        \
                 ", " DB ", p, 1, 1, " TA ", " TB ";\n}\n"                                         \
                 : OUTS                                                                            \
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TRANS_A), "n"(TRANS_B))
/* A in registers: operands NR..NR+3 (a), NR+4 (desc b), NR+5 (scale-d), NR+6 (transpose b) */
#define SG_WGMMA_RS_ASM(NS, REGS, A0, A1, A2, A3, DB, SD, TB, OUTS)                                \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " SD ", 0;\n"                                   \
                 "wgmma.mma_async.sync.aligned.m64n" NS "k16.f32.bf16.bf16 {" REGS "}, {" A0       \
                 ", " A1 ", " A2 ", " A3 "}, " DB ", p, 1, 1, " TB ";\n}\n"                        \
                 : OUTS                                                                            \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d),          \
                   "n"(TRANS_B))

template <int N, int TRANS_A, int TRANS_B>
__device__ __forceinline__ void sg_wgmma_ss(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b,
                                            int scale_d) {
    static_assert((TRANS_A == 0 || TRANS_A == 1) && (TRANS_B == 0 || TRANS_B == 1),
                  "sg_wgmma_ss: the transpose immediates are 0 or 1");
    if constexpr (N == 32)
        SG_WGMMA_SS_ASM("32", SG_WG_REGS32, "%16", "%17", "%18", "%19", "%20", SG_WG_F16(d, 0));
    else if constexpr (N == 64)
        SG_WGMMA_SS_ASM("64", SG_WG_REGS64, "%32", "%33", "%34", "%35", "%36", SG_WG_F32(d, 0));
    else if constexpr (N == 96)
        SG_WGMMA_SS_ASM("96", SG_WG_REGS96, "%48", "%49", "%50", "%51", "%52", SG_WG_F48(d, 0));
    else if constexpr (N == 128)
        SG_WGMMA_SS_ASM("128", SG_WG_REGS128, "%64", "%65", "%66", "%67", "%68", SG_WG_F64(d, 0));
    else if constexpr (N == 192)
        SG_WGMMA_SS_ASM("192", SG_WG_REGS192, "%96", "%97", "%98", "%99", "%100", SG_WG_F96(d, 0));
    else if constexpr (N == 256)
        SG_WGMMA_SS_ASM("256", SG_WG_REGS256, "%128", "%129", "%130", "%131", "%132",
                        SG_WG_F128(d, 0));
    else
        static_assert(N == 32, "sg_wgmma_ss: N must be 32, 64, 96, 128, 192 or 256");
}
template <int N, int TRANS_B>
__device__ __forceinline__ void sg_wgmma_rs(float (&d)[N / 2], const uint32_t (&a)[4],
                                            uint64_t desc_b, int scale_d) {
    static_assert(TRANS_B == 0 || TRANS_B == 1, "sg_wgmma_rs: the transpose immediate is 0 or 1");
    if constexpr (N == 32)
        SG_WGMMA_RS_ASM("32", SG_WG_REGS32, "%16", "%17", "%18", "%19", "%20", "%21", "%22",
                        SG_WG_F16(d, 0));
    else if constexpr (N == 64)
        SG_WGMMA_RS_ASM("64", SG_WG_REGS64, "%32", "%33", "%34", "%35", "%36", "%37", "%38",
                        SG_WG_F32(d, 0));
    else if constexpr (N == 96)
        SG_WGMMA_RS_ASM("96", SG_WG_REGS96, "%48", "%49", "%50", "%51", "%52", "%53", "%54",
                        SG_WG_F48(d, 0));
    else if constexpr (N == 128)
        SG_WGMMA_RS_ASM("128", SG_WG_REGS128, "%64", "%65", "%66", "%67", "%68", "%69", "%70",
                        SG_WG_F64(d, 0));
    else if constexpr (N == 192)
        SG_WGMMA_RS_ASM("192", SG_WG_REGS192, "%96", "%97", "%98", "%99", "%100", "%101", "%102",
                        SG_WG_F96(d, 0));
    else if constexpr (N == 256)
        SG_WGMMA_RS_ASM("256", SG_WG_REGS256, "%128", "%129", "%130", "%131", "%132", "%133",
                        "%134", SG_WG_F128(d, 0));
    else
        static_assert(N == 32, "sg_wgmma_rs: N must be 32, 64, 96, 128, 192 or 256");
}
__device__ __forceinline__ bool sg_elect_one(void) {
    uint32_t elected;
    asm volatile("{\n.reg .pred p;\nelect.sync _|p, %1;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(elected)
                 : "r"(0xffffffffu));
    return elected != 0;
}
#define sg_setmaxnreg_inc(N) asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N))
#define sg_setmaxnreg_dec(N) asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N))
__device__ __forceinline__ void sg_stmatrix_x1(void *p, const uint32_t r[1]) {
    asm volatile("stmatrix.sync.aligned.m8n8.x1.shared.b16 [%0], {%1};\n" ::"r"(sg_smem_u32(p)),
                 "r"(r[0])
                 : "memory");
}
__device__ __forceinline__ void sg_stmatrix_x2(void *p, const uint32_t r[2]) {
    asm volatile("stmatrix.sync.aligned.m8n8.x2.shared.b16 [%0], {%1, %2};\n" ::"r"(sg_smem_u32(p)),
                 "r"(r[0]), "r"(r[1])
                 : "memory");
}
__device__ __forceinline__ void sg_stmatrix_x4(void *p, const uint32_t r[4]) {
    asm volatile(
        "stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(sg_smem_u32(p)),
        "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
        : "memory");
}
__device__ __forceinline__ void sg_stmatrix_x2_trans(void *p, const uint32_t r[2]) {
    asm volatile(
        "stmatrix.sync.aligned.m8n8.x2.trans.shared.b16 [%0], {%1, %2};\n" ::"r"(sg_smem_u32(p)),
        "r"(r[0]), "r"(r[1])
        : "memory");
}
__device__ __forceinline__ void sg_stmatrix_x4_trans(void *p, const uint32_t r[4]) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(
                     sg_smem_u32(p)),
                 "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
                 : "memory");
}
__device__ __forceinline__ void sg_named_barrier_sync(int id, int nthreads) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(nthreads) : "memory");
}

#endif /* SG_CUDA_HOST */

/* ---- both: built from the functions above ---- */

__device__ __forceinline__ void sg_mbar_wait(uint64_t *bar, unsigned parity) {
    while (!sg_mbar_try_wait(bar, parity)) {
    }
}
/* p rounded up so that its shared address is a multiple of align (a power of two) */
template <class T> __device__ __forceinline__ T *sg_smem_align(T *p, uint32_t align) {
    const uint32_t a = sg_smem_u32(p);
    return (T *)((char *)p + (((a + align - 1) & ~(align - 1)) - a));
}
/* the wgmma shared-memory matrix descriptor of the operand starting at p (see above) */
__device__ __forceinline__ uint64_t sg_wgmma_desc(const void *p, uint32_t lbo_bytes,
                                                  uint32_t sbo_bytes, int swizzle) {
    return (uint64_t)((sg_smem_u32(p) & 0x3FFFFu) >> 4) |
           (uint64_t)((lbo_bytes >> 4) & 0x3FFFu) << 16 |
           (uint64_t)((sbo_bytes >> 4) & 0x3FFFu) << 32 | (uint64_t)(swizzle & 3) << 62;
}

/* ---- host: encoding a tensor map ----
 * cuTensorMapEncodeTiled with no interleave, zero out-of-bounds fill and 128-byte L2
 * promotion (the arguments and their rules: the driver API's documentation, summarised above).
 * nvcc builds reach the driver's function through the runtime
 * (cudaGetDriverEntryPointByVersion), so nothing links libcuda; the host emulation calls its
 * stand-in, which validates as the driver documents. CUDA_ERROR_NOT_SUPPORTED: no driver. */
static inline CUresult
sg_tensor_map_encode_tiled(CUtensorMap *map, CUtensorMapDataType type, cuuint32_t rank, void *addr,
                           const cuuint64_t *dims, const cuuint64_t *strides_bytes,
                           const cuuint32_t *box, const cuuint32_t *elem_strides,
                           CUtensorMapSwizzle swizzle) {
#ifdef SG_CUDA_HOST
    return cuTensorMapEncodeTiled(map, type, rank, addr, dims, strides_bytes, box, elem_strides,
                                  CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                                  CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
#else
    typedef CUresult (*encode_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *,
                                  const cuuint64_t *, const cuuint64_t *, const cuuint32_t *,
                                  const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
                                  CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
    static encode_fn encode = nullptr;
    if (!encode) {
        void *fn = nullptr;
        cudaDriverEntryPointQueryResult found;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000,
                                             cudaEnableDefault, &found) != cudaSuccess ||
            found != cudaDriverEntryPointSuccess || !fn)
            return CUDA_ERROR_NOT_SUPPORTED;
        encode = (encode_fn)fn;
    }
    return encode(map, type, rank, addr, dims, strides_bytes, box, elem_strides,
                  CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
#endif
}

#endif /* SG_HOPPER_CUH */
