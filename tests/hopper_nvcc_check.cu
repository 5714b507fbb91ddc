/* hopper_nvcc_check.cu — every function of kernels/cuda/hopper.cuh assembled for sm_90a by nvcc
 * and ptxas (tests/hopper_build.cmake), so a PTX typo or a wrong operand list fails every CI
 * build, GPU or not. Compiled, never linked or run: a warp-specialised TMA + wgmma kernel that
 * uses the pipeline instructions, and one kernel per wgmma N with every form (both transposes,
 * both A sources). Written so that ptxas neither spills nor serialises the wgmmas (C7512). */
#include <cuda.h>
#include <stdint.h>

#include "kernels/cuda/hopper.cuh"

template <int N>
__device__ void all_forms(float *out, uint64_t da, uint64_t db, const uint32_t (&a)[4]) {
    float d[N / 2];
#pragma unroll
    for (int i = 0; i < N / 2; i++) d[i] = 0.0f;
    sg_wgmma_fence_operand(d);
    sg_wgmma_fence();
    sg_wgmma_ss<N, 0, 0>(d, da, db, 0);
    sg_wgmma_ss<N, 1, 0>(d, da, db, 1);
    sg_wgmma_ss<N, 0, 1>(d, da, db, 1);
    sg_wgmma_ss<N, 1, 1>(d, da, db, 1);
    sg_wgmma_rs<N, 0>(d, a, db, 1);
    sg_wgmma_rs<N, 1>(d, a, db, 1);
    sg_wgmma_commit();
    sg_wgmma_wait(0);
    sg_wgmma_fence_operand(d);
#pragma unroll
    for (int i = 0; i < N / 2; i++) out[i * 256 + threadIdx.x] = d[i];
}

__global__ void __launch_bounds__(384, 1)
    hopper_check_kernel(const __grid_constant__ CUtensorMap map, float *out, int k_tiles) {
    extern __shared__ __align__(16) uint8_t smem_raw[];
    uint8_t *smem = sg_smem_align(smem_raw, 1024);
    __shared__ uint64_t full[2], empty[2];
    if (threadIdx.x == 0) {
        for (int s = 0; s < 2; s++) {
            sg_mbar_init(&full[s], 1);
            sg_mbar_init(&empty[s], 2);
        }
        sg_fence_mbar_init();
    }
    __syncthreads();
    const int wg = threadIdx.x / 128;
    if (wg == 0) {
        sg_setmaxnreg_dec(40);
        if (threadIdx.x < 32 && sg_elect_one()) {
            for (int k = 0; k < k_tiles; k++) {
                const int s = k & 1;
                sg_mbar_wait(&empty[s], ((k >> 1) & 1) ^ 1);
                sg_mbar_arrive_expect_tx(&full[s], 8192);
                sg_tma_load_2d(smem + s * 8192, &map, &full[s], 0, k * 64);
                sg_tma_load_3d(smem + s * 8192, &map, &full[s], 0, k, 0);
                sg_tma_load_4d(smem + s * 8192, &map, &full[s], 0, k, 0, 0);
                sg_tma_load_5d(smem + s * 8192, &map, &full[s], 0, k, 0, 0, 0);
                sg_mbar_expect_tx(&full[s], 0);
            }
        }
    } else {
        sg_setmaxnreg_inc(232);
        float d[64];
#pragma unroll
        for (int i = 0; i < 64; i++) d[i] = 0.0f;
        for (int k = 0; k < k_tiles; k++) {
            const int s = k & 1;
            sg_mbar_wait(&full[s], (k >> 1) & 1);
            const uint64_t da = sg_wgmma_desc(smem + s * 8192, 0, 1024, SG_SWIZZLE_128B);
            const uint64_t db = sg_wgmma_desc(smem + s * 8192 + 4096, 8192, 1024, SG_SWIZZLE_64B);
            sg_wgmma_fence_operand(d);
            sg_wgmma_fence();
            sg_wgmma_ss<128, 0, 1>(d, da, db, 1);
            sg_wgmma_commit();
            sg_wgmma_wait(0);
            sg_wgmma_fence_operand(d);
            if (sg_mbar_test_wait(&full[s], 0)) out[0] = 1.0f;
            if ((threadIdx.x & 127) == 0) sg_mbar_arrive(&empty[s]);
        }
#pragma unroll
        for (int i = 0; i < 64; i++) out[i * 256 + threadIdx.x] = d[i];
        sg_named_barrier_sync(1, 256);
        uint32_t r[4] = {1u, 2u, 3u, 4u};
        uint8_t *row = smem + (threadIdx.x % 32) * 16;
        sg_stmatrix_x1(row, r);
        sg_stmatrix_x2(row, r);
        sg_stmatrix_x4(row, r);
        sg_stmatrix_x2_trans(row, r);
        sg_stmatrix_x4_trans(row, r);
        sg_fence_proxy_async();
    }
    __syncthreads();
    if (threadIdx.x == 0) sg_mbar_inval(&full[0]);
}

/* every wgmma N and form, one warpgroup (the whole register file at its disposal) */
template <int N> __global__ void __launch_bounds__(128, 1) hopper_wgmma_forms_kernel(float *out) {
    extern __shared__ __align__(16) uint8_t smem_raw[];
    uint8_t *smem = sg_smem_align(smem_raw, 1024);
    const uint64_t da = sg_wgmma_desc(smem, 0, 1024, SG_SWIZZLE_128B);
    const uint64_t db = sg_wgmma_desc(smem + 8192, 128, 256, SG_SWIZZLE_NONE);
    const uint32_t a[4] = {threadIdx.x, 1u, 2u, 3u};
    all_forms<N>(out, da, db, a);
}
template __global__ void hopper_wgmma_forms_kernel<32>(float *);
template __global__ void hopper_wgmma_forms_kernel<64>(float *);
template __global__ void hopper_wgmma_forms_kernel<96>(float *);
template __global__ void hopper_wgmma_forms_kernel<128>(float *);
template __global__ void hopper_wgmma_forms_kernel<192>(float *);
template __global__ void hopper_wgmma_forms_kernel<256>(float *);
