/* tensor_core.cuh — the warp-level tensor-core and asynchronous-copy operations of the mma.sync
 * kernels (sm_80 and later), one function each, so the same kernel source serves nvcc and the
 * host emulation (tests/cuda_host, SG_CUDA_HOST), exactly as SG_LAUNCH does for launches.
 *
 * nvcc: inline PTX, one instruction per function. Host emulation: the sg_sim:: functions of
 * tests/cuda_host/include/cuda_sim.hpp, written from the PTX ISA's fragment layouts, not from
 * the kernels that use them.
 *
 * The operations (PTX ISA, "Warp Level Matrix Multiply-Accumulate Instructions" and "Data
 * Movement and Conversion Instructions"):
 *
 * - sg_mma_bf16_16816(d, a, b, c): mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32.
 *   D[16x8] = A[16x16] * B[16x8] + C[16x8], fp32 accumulation. Every lane of the warp calls it
 *   (warp-collective, all 32 lanes, converged). Per lane, with g = lane >> 2 and q = lane & 3:
 *     a[0]: A[g][2q, 2q+1]        a[1]: A[g+8][2q, 2q+1]
 *     a[2]: A[g][2q+8, 2q+9]      a[3]: A[g+8][2q+8, 2q+9]   (each b32 = two bf16, low half first)
 *     b[0]: B[2q, 2q+1][g]        b[1]: B[2q+8, 2q+9][g]
 *     c[0], c[1]: C[g][2q, 2q+1]  c[2], c[3]: C[g+8][2q, 2q+1]  (d likewise)
 *   d and c may be the same array.
 * - sg_mma_tf32_1688(d, a, b, c): mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32.
 *   D[16x8] = A[16x8] * B[8x8] + C[16x8], fp32 accumulation, warp-collective. One tf32 per
 *   32-bit register (the hardware reads its upper 19 bits). Per lane, with g and q as above:
 *     a[0]: A[g][q]   a[1]: A[g+8][q]   a[2]: A[g][q+4]   a[3]: A[g+8][q+4]
 *     b[0]: B[q][g]   b[1]: B[q+4][g]   c, d: as for m16n8k16.
 * - sg_tf32_rna(x): cvt.rna.tf32.f32, x rounded to tf32 (to nearest, ties away from zero),
 *   returned with its low 13 bits cleared, so that it is the fp32 value of the tf32 operand
 *   whatever the instruction leaves there (x - that value is then exact in fp32).
 * - sg_ldmatrix_x{1,2,4}(r, p): ldmatrix.sync.aligned.m8n8.x{1,2,4}.shared.b16: loads 1, 2 or 4
 *   8x8 matrices of 16-bit elements from shared memory. Lanes 8i..8i+7 give the row addresses
 *   (16-byte aligned, 16 bytes per row) of matrix i (for .x1 lanes 0..7, for .x2 lanes 0..15;
 *   the other lanes' p is ignored but must be a shared address). Lane l receives, in r[i], row
 *   l / 4, elements 2 (l % 4) and 2 (l % 4) + 1 of matrix i. The _trans forms deliver the
 *   transposed matrices (lane l: column l / 4, rows 2 (l % 4) and 2 (l % 4) + 1).
 * - sg_cp_async_16(dst, src, valid): cp.async.cg.shared.global, 16 bytes from global src to
 *   shared dst (both 16-byte aligned); with valid = 0 it reads nothing and zero-fills dst
 *   (src-size 0), so a tile edge or a padding position needs no branch around the copy.
 *   sg_cp_async_commit() closes the caller's group of copies; sg_cp_async_wait(N) waits until
 *   at most the N most recent groups are pending (N a compile-time constant: 0..7). The copies
 *   are the calling thread's: data another thread copied is visible after its wait AND a
 *   barrier (__syncthreads), never before.
 */
#ifndef SG_TENSOR_CORE_CUH
#define SG_TENSOR_CORE_CUH

#include <stdint.h>

#ifdef SG_CUDA_HOST

__device__ __forceinline__ void sg_mma_bf16_16816(float d[4], const uint32_t a[4],
                                                  const uint32_t b[2], const float c[4]) {
    sg_sim::mma_m16n8k16_bf16_f32(d, a, b, c);
}
__device__ __forceinline__ void sg_mma_tf32_1688(float d[4], const uint32_t a[4],
                                                 const uint32_t b[2], const float c[4]) {
    sg_sim::mma_m16n8k8_tf32_f32(d, a, b, c);
}
__device__ __forceinline__ uint32_t sg_tf32_rna(float x) {
    return sg_sim::cvt_rna_tf32(x) & 0xffffe000u;
}
__device__ __forceinline__ void sg_ldmatrix_x1(uint32_t r[1], const void *p) {
    sg_sim::ldmatrix_b16(1, 0, r, p);
}
__device__ __forceinline__ void sg_ldmatrix_x2(uint32_t r[2], const void *p) {
    sg_sim::ldmatrix_b16(2, 0, r, p);
}
__device__ __forceinline__ void sg_ldmatrix_x4(uint32_t r[4], const void *p) {
    sg_sim::ldmatrix_b16(4, 0, r, p);
}
__device__ __forceinline__ void sg_ldmatrix_x2_trans(uint32_t r[2], const void *p) {
    sg_sim::ldmatrix_b16(2, 1, r, p);
}
__device__ __forceinline__ void sg_ldmatrix_x4_trans(uint32_t r[4], const void *p) {
    sg_sim::ldmatrix_b16(4, 1, r, p);
}
__device__ __forceinline__ void sg_cp_async_16(void *dst, const void *src, int valid) {
    sg_sim::cp_async(dst, src, 16, valid ? 16 : 0);
}
__device__ __forceinline__ void sg_cp_async_commit(void) {
    sg_sim::cp_async_commit_group();
}
#define sg_cp_async_wait(N) sg_sim::cp_async_wait_group(N)

#else /* nvcc */

__device__ __forceinline__ uint32_t sg_smem_addr(const void *p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void sg_mma_bf16_16816(float d[4], const uint32_t a[4],
                                                  const uint32_t b[2], const float c[4]) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]),
                   "f"(c[1]), "f"(c[2]), "f"(c[3]));
}
__device__ __forceinline__ void sg_mma_tf32_1688(float d[4], const uint32_t a[4],
                                                 const uint32_t b[2], const float c[4]) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]),
                   "f"(c[1]), "f"(c[2]), "f"(c[3]));
}
__device__ __forceinline__ uint32_t sg_tf32_rna(float x) {
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
    return r & 0xffffe000u;
}
__device__ __forceinline__ void sg_ldmatrix_x1(uint32_t r[1], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n"
                 : "=r"(r[0])
                 : "r"(sg_smem_addr(p)));
}
__device__ __forceinline__ void sg_ldmatrix_x2(uint32_t r[2], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(sg_smem_addr(p)));
}
__device__ __forceinline__ void sg_ldmatrix_x4(uint32_t r[4], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(sg_smem_addr(p)));
}
__device__ __forceinline__ void sg_ldmatrix_x2_trans(uint32_t r[2], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(sg_smem_addr(p)));
}
__device__ __forceinline__ void sg_ldmatrix_x4_trans(uint32_t r[4], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(sg_smem_addr(p)));
}
__device__ __forceinline__ void sg_cp_async_16(void *dst, const void *src, int valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(sg_smem_addr(dst)),
                 "l"(src), "r"(valid ? 16 : 0)
                 : "memory");
}
__device__ __forceinline__ void sg_cp_async_commit(void) {
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}
#define sg_cp_async_wait(N) asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory")

#endif /* SG_CUDA_HOST */
#endif /* SG_TENSOR_CORE_CUH */
