/* sim_tensor_core.cpp — the sm_80 tensor-core fragment operations and asynchronous copies of the
 * host emulation (mma.sync m16n8k16 bf16, ldmatrix m8n8 b16, cp.async with its groups), written
 * from the PTX ISA (version 9.x; section titles quoted, their numbers move between versions), not
 * from the kernels that use them. The semantics and the checks, per instruction:
 *
 * mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 ("Multiply-and-Accumulate Instruction:
 * mma"; layouts from "Matrix Fragments for mma.m16n8k16 with floating point type"):
 *   D (16x8) = A (16x16) * B (16x8) + C (16x8). A warp rendezvous over all 32 lanes (".sync
 *   .aligned": every thread of the warp executes the same mma; undefined "if any thread in the
 *   warp has exited"; both reported). The lane that completes the rendezvous reassembles A, B, C
 *   from all 32 lanes' fragments and computes every lane's four D elements. With
 *   groupID = lane >> 2 and threadID_in_group = lane % 4, elements "low to high" in each
 *   register (the low 16 bits hold the first):
 *     A: a0..a7 in 4 registers; row groupID for a0,a1,a4,a5, else groupID + 8;
 *        column threadID_in_group * 2 + (i & 1), + 8 for i >= 4;
 *     B: b0..b3 in 2 registers; row threadID_in_group * 2 + (i & 1), + 8 for i >= 2;
 *        column groupID;
 *     C, D: c0..c3; row groupID for i < 2, else groupID + 8; column threadID_in_group * 2 + (i &
 * 1). Arithmetic. The ISA: "Element-wise multiplication of matrix A and B is performed with
 *   specified precision. Accumulation of the intermediate values is performed with at least
 *   single precision. The accumulation order, rounding, and handling of subnormal inputs are
 *   unspecified." This emulation's choice, deterministic: each product of two bf16 values is
 *   exact (in double); the 16 products are summed in double in k order, C is added, and the sum
 *   is rounded once to fp32 (round to nearest even). bf16 subnormals are honoured; NaN and Inf
 *   propagate as IEEE arithmetic says, a NaN result is returned as the canonical 0x7fffffff.
 *   A GPU rounds differently inside the MMA (its accumulator is neither double nor ordered
 *   like this), so its results may differ from these in the last bits of fp32: the kernel tests
 *   compare tensor-core results with a tolerance, never bitwise against this emulation.
 *
 * mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 (the same section; layouts from "Matrix
 * Fragments for mma.m16n8k8", the .tf32 figures):
 *   D (16x8) = A (16x8) * B (8x8) + C (16x8), the same rendezvous and checks as above. One tf32
 *   element per 32-bit register:
 *     A: a0..a3; row groupID for a0 and a2, else groupID + 8; column threadID_in_group, + 4
 *        for a2 and a3;
 *     B: b0, b1; row threadID_in_group, + 4 for b1; column groupID;
 *     C, D: as for m16n8k16.
 *   A tf32 operand is the register's upper 19 bits (sign, 8 exponent, 10 fraction bits): this
 *   emulation clears the low 13 bits of every A and B register before it multiplies (a kernel
 *   that wants the value it gave must give one whose low 13 bits are zero: cvt.rna.tf32.f32's,
 *   masked). Arithmetic as for bf16: the 8 products exact in double (10 + 10 fraction bits),
 *   summed in k order, C added, rounded once to fp32.
 *
 * cvt.rna.tf32.f32 d, a ("Data Movement and Conversion Instructions: cvt"): per thread, a
 *   rounded to the nearest tf32 value, ties away from zero (.rna), returned as an fp32 bit
 *   pattern whose low 13 bits are zero; a NaN stays a NaN, an Inf an Inf, and a finite value
 *   whose rounding carries past the largest exponent becomes an Inf of its sign (no .satfinite).
 *
 * ldmatrix.sync.aligned.m8n8.x{1,2,4}{.trans}.shared.b16 ("Warp-level matrix load instruction:
 * ldmatrix"):
 *   A warp rendezvous over all 32 lanes (the same rules as mma; the variants are distinct
 *   operations, so lanes at different qualifiers are reported). Lanes 8i..8i+7 give the row
 *   addresses of matrix i (rows 0..7 in lane order); the lanes above 8 * num give none: their
 *   operand is ignored and not checked (the ISA requires valid addresses in all threads only
 *   for sm_75 and below). Every used address must point into shared memory ("If the generic
 *   address doesn't fall in .shared state space, then the behavior is undefined"), be 16-byte
 *   aligned ("a group of four consecutive threads loads 16 bytes. The matrix addresses must be
 *   naturally aligned accordingly"), and its 16-byte row must lie inside shared memory; each
 *   lane checks its own address before it arrives, so the report names the offending thread.
 *   Lane l receives in r[i] row l / 4, elements 2 (l % 4) (low half) and 2 (l % 4) + 1 (high
 *   half) of matrix i ("A group of four threads loads an entire row"); with .trans ("the matrix
 *   is loaded in column-major format") column l / 4, rows 2 (l % 4) and 2 (l % 4) + 1.
 *
 * cp.async.{ca,cg}.shared.global [dst], [src], cp-size, src-size; cp.async.commit_group;
 * cp.async.wait_group N; cp.async.wait_all ("Data Movement and Conversion Instructions:
 * cp.async" and the two that follow it):
 *   Per thread. cp-size is 4, 8 or 16 (cg: 16 only, which the wrappers always pass); src-size
 *   in [0, cp-size] (larger "results in undefined behavior"), the remaining cp-size - src-size
 *   bytes of dst are zero-filled; with src-size 0 nothing is read and src is not checked. dst
 *   must lie in shared memory and src (src-size bytes) inside a live allocation, both aligned to
 *   cp-size ("Addresses as Operands": "The address must be naturally aligned to a multiple of
 *   the access size"). The copy is queued, never performed at issue: its destination is
 *   poisoned (0xFF bytes) at issue, and the data lands only when a wait of the issuing thread
 *   forces it. So a read of the destination before the wait — by the thread itself, or by
 *   another one after a barrier the issuing thread reached before its wait — reads poison,
 *   and so does a thread still reading the previous contents of a buffer a copy was just issued
 *   into (the classic missing barrier before a pipeline stage is refilled). The ISA leaves all
 *   three undefined ("Writes performed by cp.async operations are made visible to the executing
 *   thread only after" the wait).
 *   commit_group closes the thread's uncommitted copies into a new group (possibly empty).
 *   wait_group N performs, in issue order, the copies of every committed group but the N most
 *   recent; uncommitted copies stay pending (they belong to no group; wait_all commits first).
 *   A copy whose destination overlaps a pending copy of the same thread is reported: two
 *   cp.async not ordered by a wait have no ordering, and the same group "copying data to the
 *   same location results in undefined behavior". Copies pending at a __syncthreads are legal
 *   (a multistage pipeline waits only for its older groups); copies pending when the thread
 *   exits are dropped, never performed (legal, dead work; whoever reads them races).
 */
#include <cstring>

#include "sim_internal.hpp"

namespace sg_sim {

namespace {

float bf16_bits_to_float(unsigned h) {
    const uint32_t u = (h & 0xffffu) << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* ---- mma ---- */

struct mma_payload {
    unsigned a[4];
    unsigned b[2];
    float c[4];
};
static_assert(sizeof(mma_payload) <= SG_SIM_WARP_PAYLOAD, "mma payload too large");

/* Register j of A holds a_{2j} (low) and a_{2j+1} (high): a0,a1 row g cols 2t..; a2,a3 row g+8;
 * a4,a5 row g cols 2t+8..; a6,a7 row g+8 cols 2t+8.. (the PTX formulas above, tabulated). */
constexpr int A_ROW_OFF[4] = {0, 8, 0, 8};
constexpr int A_COL_OFF[4] = {0, 0, 8, 8};

/* Every lane's four D elements from the reassembled A (16 x K), B (K x 8) and C: the products
 * exact in double, summed in k order, C added, one rounding to fp32; a NaN as the canonical one;
 * into out[lane] in the C/D fragment layout (c0, c1: row g; c2, c3: row g + 8) */
template <int K>
void mma_store_d(void *const out[32], const float (&A)[16][K], const float (&B)[K][8],
                 const float (&C)[16][8]) {
    for (int lane = 0; lane < 32; lane++) {
        const int g = lane >> 2, t = lane & 3;
        float d[4];
        for (int i = 0; i < 4; i++) {
            const int m = g + 8 * (i >> 1), n = 2 * t + (i & 1);
            double s = 0.0;
            for (int k = 0; k < K; k++) s += (double)A[m][k] * (double)B[k][n];
            s += (double)C[m][n];
            float r = (float)s;
            if (r != r) r = __uint_as_float(0x7fffffffu);
            d[i] = r;
        }
        memcpy(out[lane], d, sizeof d);
    }
}

void mma_combine(const void *const in[32], void *const out[32], const void *) {
    float A[16][16], B[16][8], C[16][8];
    for (int lane = 0; lane < 32; lane++) {
        const mma_payload &p = *static_cast<const mma_payload *>(in[lane]);
        const int g = lane >> 2, t = lane & 3;
        for (int j = 0; j < 4; j++) {
            float *row = A[g + A_ROW_OFF[j]] + 2 * t + A_COL_OFF[j];
            row[0] = bf16_bits_to_float(p.a[j]);
            row[1] = bf16_bits_to_float(p.a[j] >> 16);
        }
        for (int j = 0; j < 2; j++) { /* b0,b1: rows 2t, 2t+1; b2,b3: rows 2t+8, 2t+9 */
            B[2 * t + 8 * j][g] = bf16_bits_to_float(p.b[j]);
            B[2 * t + 8 * j + 1][g] = bf16_bits_to_float(p.b[j] >> 16);
        }
        for (int i = 0; i < 4; i++) C[g + 8 * (i >> 1)][2 * t + (i & 1)] = p.c[i];
    }
    mma_store_d<16>(out, A, B, C);
}

/* ---- mma m16n8k8 tf32 ---- */

float tf32_bits_to_float(unsigned r) {
    const uint32_t u = r & 0xffffe000u; /* the tf32 operand: the register's upper 19 bits */
    float f;
    memcpy(&f, &u, 4);
    return f;
}

void mma_tf32_combine(const void *const in[32], void *const out[32], const void *) {
    float A[16][8], B[8][8], C[16][8];
    for (int lane = 0; lane < 32; lane++) {
        const mma_payload &p = *static_cast<const mma_payload *>(in[lane]);
        const int g = lane >> 2, t = lane & 3;
        for (int j = 0; j < 4; j++) /* a0: (g, t), a1: (g+8, t), a2: (g, t+4), a3: (g+8, t+4) */
            A[g + 8 * (j & 1)][t + 4 * (j >> 1)] = tf32_bits_to_float(p.a[j]);
        for (int j = 0; j < 2; j++) B[t + 4 * j][g] = tf32_bits_to_float(p.b[j]);
        for (int i = 0; i < 4; i++) C[g + 8 * (i >> 1)][2 * t + (i & 1)] = p.c[i];
    }
    mma_store_d<8>(out, A, B, C);
}

/* ---- ldmatrix ---- */

struct ldmatrix_ctx {
    int num, trans;
};

void ldmatrix_combine(const void *const in[32], void *const out[32], const void *ctx) {
    const ldmatrix_ctx &c = *static_cast<const ldmatrix_ctx *>(ctx);
    uint16_t M[4][8][8]; /* matrix, row, column */
    for (int i = 0; i < c.num; i++)
        for (int r = 0; r < 8; r++) {
            const void *row;
            memcpy(&row, in[8 * i + r], sizeof row);
            memcpy(M[i][r], row, 16);
        }
    for (int lane = 0; lane < 32; lane++) {
        const int a = lane >> 2, e = 2 * (lane & 3);
        unsigned r[4];
        for (int i = 0; i < c.num; i++) {
            const unsigned lo = c.trans ? M[i][e][a] : M[i][a][e];
            const unsigned hi = c.trans ? M[i][e + 1][a] : M[i][a][e + 1];
            r[i] = lo | hi << 16;
        }
        memcpy(out[lane], r, sizeof(unsigned) * (size_t)c.num);
    }
}

bool overlaps(const void *a, size_t na, const void *b, size_t nb) {
    const uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return x < y + nb && y < x + na;
}

/* one mma rendezvous: every lane's a, b, c in, its d out (d may alias c: c is copied first) */
void mma_collective(int op, warp_collective_fn combine, float d[4], const unsigned a[4],
                    const unsigned b[2], const float c[4]) {
    mma_payload p;
    memcpy(p.a, a, sizeof p.a);
    memcpy(p.b, b, sizeof p.b);
    memcpy(p.c, c, sizeof p.c);
    float r[4];
    warp_collective(op, 0xffffffffu, &p, sizeof p, combine, nullptr, r, sizeof r);
    memcpy(d, r, sizeof r);
}

void perform(const cp_async_copy &c) {
    if (c.src_size) memcpy(c.dst, c.src, (size_t)c.src_size);
    memset((char *)c.dst + c.src_size, 0, (size_t)(c.cp_size - c.src_size));
}

} // namespace

void mma_m16n8k16_bf16_f32(float d[4], const unsigned a[4], const unsigned b[2], const float c[4]) {
    mma_collective(WOP_MMA_M16N8K16_BF16, mma_combine, d, a, b, c);
}

void mma_m16n8k8_tf32_f32(float d[4], const unsigned a[4], const unsigned b[2], const float c[4]) {
    mma_collective(WOP_MMA_M16N8K8_TF32, mma_tf32_combine, d, a, b, c);
}

unsigned cvt_rna_tf32(float a) {
    uint32_t u;
    memcpy(&u, &a, 4);
    if ((u & 0x7f800000u) == 0x7f800000u) /* Inf stays Inf; a NaN stays a NaN (quiet) */
        return (u & 0x007fffffu) ? (u | 0x00400000u) & 0xffffe000u : u;
    /* to nearest, ties away: add half of the 13-bit unit to the magnitude, then truncate (a
     * carry into the exponent is the right rounding; past the largest one it gives Inf) */
    return (u + 0x1000u) & 0xffffe000u;
}

void ldmatrix_b16(int num, int trans, unsigned *r, const void *row_addr) {
    if ((num != 1 && num != 2 && num != 4) || (trans != 0 && trans != 1))
        device_fail("ldmatrix: .x%d%s is not an m8n8 b16 form (x1, x2 or x4, optionally .trans)",
                    num, trans ? ".trans" : "");
    const int op = (num == 1   ? WOP_LDMATRIX_X1
                    : num == 2 ? WOP_LDMATRIX_X2
                               : WOP_LDMATRIX_X4) +
                   (trans ? WOP_LDMATRIX_X1_TRANS - WOP_LDMATRIX_X1 : 0);
    const unsigned lane = (unsigned)current_lane();
    if (lane < 8u * (unsigned)num) { /* this lane gives row lane % 8 of matrix lane / 8 */
        if ((uintptr_t)row_addr % 16)
            device_fail("ldmatrix.x%d%s: lane %u's row address %p (row %u of matrix %u) is not "
                        "16-byte aligned",
                        num, trans ? ".trans" : "", lane, row_addr, lane % 8, lane / 8);
        if (!in_shared(row_addr, 16))
            device_fail("ldmatrix.x%d%s: lane %u's row address %p (row %u of matrix %u): its 16 "
                        "bytes are not inside shared memory (%s; the address: %s)",
                        num, trans ? ".trans" : "", lane, row_addr, lane % 8, lane / 8,
                        describe_shared().c_str(), describe_address(row_addr).c_str());
    }
    const ldmatrix_ctx ctx = {num, trans};
    unsigned res[4];
    warp_collective(op, 0xffffffffu, &row_addr, sizeof row_addr, ldmatrix_combine, &ctx, res,
                    sizeof(unsigned) * (size_t)num);
    memcpy(r, res, sizeof(unsigned) * (size_t)num);
}

void cp_async(void *dst, const void *src, int cp_size, int src_size) {
    cp_async_queue &q = current_cp_async("cp.async");
    if (cp_size != 4 && cp_size != 8 && cp_size != 16)
        device_fail("cp.async: cp-size %d is not 4, 8 or 16", cp_size);
    if (src_size < 0 || src_size > cp_size)
        device_fail("cp.async: src-size %d is outside [0, cp-size %d] (undefined behaviour)",
                    src_size, cp_size);
    if ((uintptr_t)dst % (uintptr_t)cp_size)
        device_fail("cp.async: the shared destination %p is not aligned to cp-size %d", dst,
                    cp_size);
    if (!in_shared(dst, (size_t)cp_size))
        device_fail("cp.async: the destination [%p, +%d) is not inside shared memory (%s; the "
                    "address: %s)",
                    dst, cp_size, describe_shared().c_str(), describe_address(dst).c_str());
    if (src_size > 0) {
        if ((uintptr_t)src % (uintptr_t)cp_size)
            device_fail("cp.async: the global source %p is not aligned to cp-size %d", src,
                        cp_size);
        if (!find_range(src, (size_t)src_size))
            device_fail("cp.async: the global source [%p, +%d) is not inside a live allocation "
                        "(%s)",
                        src, src_size, describe_address(src).c_str());
    }
    for (const cp_async_copy &o : q.pending)
        if (overlaps(dst, (size_t)cp_size, o.dst, (size_t)o.cp_size))
            device_fail("cp.async: the destination [%p, +%d) overlaps [%p, +%d) of a copy this "
                        "thread issued before (%s) and has not waited for: the two writes are "
                        "unordered",
                        dst, cp_size, o.dst, o.cp_size,
                        o.group < q.committed ? "committed" : "not yet committed");
    memset(dst, 0xFF, (size_t)cp_size); /* in flight: a read before the wait is a race */
    q.pending.push_back(cp_async_copy{dst, src, cp_size, src_size, q.committed});
}

void cp_async_commit_group() {
    current_cp_async("cp.async.commit_group").committed++;
}

void cp_async_wait_group(int n) {
    cp_async_queue &q = current_cp_async("cp.async.wait_group");
    if (n < 0) device_fail("cp.async.wait_group %d: N must be a non-negative constant", n);
    if (q.committed <= (uint64_t)n) return;          /* at most N groups were ever committed */
    const uint64_t done = q.committed - (uint64_t)n; /* groups [0, done) must be complete */
    size_t k = 0;
    for (size_t i = 0; i < q.pending.size(); i++) {
        const cp_async_copy &c = q.pending[i];
        if (c.group < done)
            perform(c);
        else
            q.pending[k++] = c;
    }
    q.pending.resize(k);
}

void cp_async_wait_all() {
    cp_async_commit_group();
    cp_async_wait_group(0);
}

} // namespace sg_sim
