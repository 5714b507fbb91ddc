/* sg_pointwise.h — the pointwise op family, one row each: ops whose every output element is a
 * function of the same element of their inputs, with no arguments and no size but the element
 * count (silu, add, their backward ops, ...).
 *
 * A row generates everything about the op that is not its math:
 * - kernels/cpu/cpu_kernels.h: the declaration of cpu_<fn>, and kernels/cpu/elementwise.c its
 *   loop around the element function sg_pw_<fn> (common/sg_pointwise_math.h);
 * - kernels/cuda/cuda_kernels.h: the declaration of cuda_<fn>, and kernels/cuda/elementwise.cu
 *   its launcher of the one shared vectorised kernel around the same element function;
 * - graph/backend_cpu.c, graph/backend_cuda_run.c: cpu_run_<op> and cuda_run_<op>;
 * - tests/test_cuda_ops.c: the launcher's place in the coverage check.
 * So a new pointwise op is its planner/op_list.h row(s), a row here, and its math once: the
 * element function sg_pw_<fn> in common/sg_pointwise_math.h, which both backends' kernels run.
 *
 * Columns:
 *   op    the op's id in planner/op_list.h; its node's inputs are in0.. and outputs out0.., in
 *         the node's order
 *   fn    the kernels' name: cpu_<fn>, cuda_<fn>, the element function sg_pw_<fn>
 *   nin   inputs, 1..3;  nout  outputs, 1..2
 *   acc   1: the outputs are gradients, so the CUDA launcher takes one accumulate flag per
 *         output (after dt; 0 overwrites, 1 adds, as every launcher); 0: it overwrites and
 *         takes none (the CPU kernels always overwrite: cpu_kernels.h's contract)
 *
 * The generated signatures (n values; every input of an element is read before any of its
 * outputs is written, so any output may alias any input):
 *   void cpu_<fn>(float *out0[, float *out1], const float *in0[, ...], int64_t n);
 *   int cuda_<fn>(cudaStream_t st, void *out0[, void *out1], const void *in0[, ...], int64_t n,
 *                 int dt[, int accum0[, int accum1]]);
 *
 * Plain C preprocessor, no types: kernels/ (C and CUDA), graph/ and tests/ include it.
 */
#ifndef SG_POINTWISE_H
#define SG_POINTWISE_H

/* clang-format off */
#define SG_POINTWISE_LIST(X) \
    /* op           fn            nin nout acc */ \
    X(silu,         silu_fwd,     1,  1,   0) \
    X(silu_bwd,     silu_bwd,     2,  1,   1) \
    X(add,          add_fwd,      2,  1,   0) \
    X(silu_mul,     silu_mul_fwd, 2,  1,   0) \
    X(silu_mul_bwd, silu_mul_bwd, 3,  2,   1) \
    X(gelu,         gelu_fwd,     1,  1,   0) \
    X(gelu_bwd,     gelu_bwd,     2,  1,   1)
/* clang-format on */

#define SG_PW_MAX_IN 3
#define SG_PW_MAX_OUT 2

/* f(0), f(1), ..., f(k-1): one item per operand, for parameter and argument lists */
#define SG_PW_EACH_1(f) f(0)
#define SG_PW_EACH_2(f) f(0), f(1)
#define SG_PW_EACH_3(f) f(0), f(1), f(2)
/* the accumulate flags of a row with acc = 1, as a list continuing another (leading comma) */
#define SG_PW_IF_ACC_0(f, nout)
#define SG_PW_IF_ACC_1(f, nout) , SG_PW_EACH_##nout(f)

#define SG_PW_CPU_OUT(i) float *out##i
#define SG_PW_CPU_IN(i) const float *in##i
#define SG_PW_CUDA_OUT(i) void *out##i
#define SG_PW_CUDA_IN(i) const void *in##i
#define SG_PW_CUDA_ACC(i) int accum##i

/* the parameter lists of cpu_<fn> and cuda_<fn> */
#define SG_PW_CPU_PARAMS(nin, nout)                                                                \
    SG_PW_EACH_##nout(SG_PW_CPU_OUT), SG_PW_EACH_##nin(SG_PW_CPU_IN), int64_t n
#define SG_PW_CUDA_PARAMS(nin, nout, acc)                                                          \
    cudaStream_t st, SG_PW_EACH_##nout(SG_PW_CUDA_OUT), SG_PW_EACH_##nin(SG_PW_CUDA_IN),           \
        int64_t n, int dt SG_PW_IF_ACC_##acc(SG_PW_CUDA_ACC, nout)

#endif
