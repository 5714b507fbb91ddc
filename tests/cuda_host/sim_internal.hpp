/* sim_internal.hpp — what the parts of the CUDA host emulation share: the error and message
 * plumbing, the allocation table, the stream command queue (sim_runtime.cpp), and the grid
 * runner (sim_exec.cpp). Not seen by the code under test.
 */
#ifndef SG_SIM_INTERNAL_HPP
#define SG_SIM_INTERNAL_HPP

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cuda_runtime_api.h"
#include "cuda_sim.hpp"

namespace sg_sim {

/* One line on stderr: "sg_cuda_sim: <message> [node: <current NVTX range>]". */
void report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
std::string current_range();
/* Set the error the next cudaGetLastError returns (sticky errors stay). Returns e. */
cudaError_t set_error(cudaError_t e);
/* SG_SIM_LAUNCH_ONLY=1: launches and GEMMs are checked and recorded but not executed. */
bool launch_only();
/* Take s seconds of wall time off the clock events read (cudaEventRecord): work the emulation
 * runs faster on the device's clock than on the host's (SG_SIM_CUDNN_SPEED, sim_cudnn.cpp). */
void clock_discount(double s);

/* bf16 and fp32 (sim_cublas.cpp; the libraries' conversions): the widening is exact; the
 * narrowing rounds to nearest even and keeps a NaN a quiet NaN. */
float bf16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float v);

/* ---- allocations ---- */
struct alloc {
    uintptr_t base = 0;
    size_t size = 0;
    int id = 0;
    bool host = false; /* cudaMallocHost */
};
/* The live allocation holding [p, p + bytes), or nullptr. bytes 0 asks for p itself. */
const alloc *find_range(const void *p, size_t bytes);
/* "allocation #3 (device, 4096 bytes at 0x...): 12 bytes past its end" or "no allocation". */
std::string describe_address(const void *p);
/* fn(a) for every live allocation, device and host, in address order. */
void each_alloc(const std::function<void(const alloc &)> &fn);

/* ---- what ptxas assembled for a kernel (sim_resources.cpp) ---- */
/* A __shared__ variable the PTX of a kernel's file declares (tools/nvcc_resources.sh's "sg
 * shared" lines) that g++ gave no place in the emulation's shared section: a template or inline
 * function's static (a comdat symbol, found with dlsym). Poisoned at the start of every block of
 * that file's kernels, as the section is. */
struct shared_var {
    std::string name;   /* mangled */
    size_t bytes = 0;   /* the PTX's (the host's once found) */
    bool split = false; /* ptxas split the array into scalars: bytes is their sum */
    void *addr = nullptr;
};
struct kernel_resources {
    std::string name;    /* the key: "norm_bwd_apply_kernel<float, 4, false>" */
    int regs = 0;        /* registers a thread */
    int smem_static = 0; /* static shared memory a block, bytes */
    int maxntid = 0;     /* __launch_bounds__'s threads a block (the PTX's .maxntid); 0: none */
    /* the architectures ptxas assembled it for ("sm_90", "sm_90a"): a device it cannot run on
     * refuses the launch (image_for_device, sim_runtime.cpp) */
    std::vector<std::string> archs;
    bool known = false;
    /* the __shared__ variables its file's PTX declares that g++ left outside the section,
     * each found with its address (nullptr: no report) */
    const std::vector<shared_var> *statics = nullptr;
};
/* The figures of the kernel at func, or nullptr: no ptxas report names it (a test's own kernel,
 * a build without nvcc). */
const kernel_resources *resources_of(const void *func);
/* Whether the device (SG_SIM_CC) can run that kernel; if not, its architectures in *archs
 * (sim_runtime.cpp). */
bool image_for_device(const kernel_resources *res, std::string *archs);

/* ---- streams and their commands ---- */
enum cmd_kind { CMD_KERNEL = 1, CMD_GEMM, CMD_COPY, CMD_SET };
struct cmd {
    int kind = 0;
    std::string name; /* kernel name, "cublasGemmEx", "cudaMemcpyAsync", ... */
    dim3 grid, block;
    size_t smem = 0;
    std::vector<unsigned char> sig; /* arguments / descriptor bytes: what must replay equal */
    std::function<cudaError_t()> run;
    std::string range;      /* the NVTX range when issued */
    cudaMemsetParams set{}; /* CMD_SET: what it sets (cudaGraphMemsetNodeGetParams) */
};
/* A kernel command from a launch (checks the configuration and every pointer as a launch does);
 * false with the error set and reported. */
bool kernel_cmd(launch_info &li, std::shared_ptr<call_base> call, cmd &out);
/* A memset command for p (cudaMemsetAsync, cudaMemset2DAsync, a graph's memset node); false with
 * the error set and reported where the range is not inside one allocation or the parameters are
 * invalid. */
bool memset_cmd(const char *name, const cudaMemsetParams &p, cmd &out);
/* Runs c now, or records it when the stream is capturing. Returns the error to report. */
cudaError_t issue(cudaStream_t st, cmd c);
/* Whether some stream is capturing (then allocation and synchronisation are forbidden). */
bool capturing_any();
/* A forbidden call during capture: reports it, invalidates every capture. */
cudaError_t capture_violation(const char *what);

/* ---- the grid runner (sim_exec.cpp) ---- */
/* Runs every block of the launch; on a model violation returns false with the message in err.
 * poison: the kernel's kernel_resources::statics (each poisoned at every block's start), or
 * nullptr. */
bool run_grid(const char *name, dim3 grid, dim3 block, size_t smem, call_base *call,
              const std::vector<shared_var> *poison, std::string &err);
/* For the fault handler: where execution is ("kernel k block (x,y,z) thread (x,y,z)") and
 * whether addr lies in a fiber stack's guard page. */
bool describe_execution(char *buf, size_t n);
bool in_stack_guard(const void *addr);
/* Scheduling order name, for messages. */
const char *order_name();

/* ---- what the tensor-core operations (sim_tensor_core.cpp) need of the execution model ---- */

/* A warp operation whose result is computed once for the whole warp: like warp_rendezvous (same
 * checks: every lane of `mask` present, at the same operation with the same mask), but instead
 * of every lane receiving every payload, the lane that completes the rendezvous calls
 * fn(in, out, ctx) once, with in[l] lane l's payload and out[l] lane l's result buffer
 * (SG_SIM_WARP_PAYLOAD * 32 bytes; both nullptr for lanes outside the mask); ctx is that lane's.
 * Then every lane copies `rbytes` of its result to `result`. No allocation. Returns the
 * caller's lane. */
typedef void (*warp_collective_fn)(const void *const in[32], void *const out[32], const void *ctx);
int warp_collective(int op, unsigned mask, const void *mine, size_t bytes, warp_collective_fn fn,
                    const void *ctx, void *result, size_t rbytes);

/* The running thread's lane in its warp; device_fail outside a kernel. */
int current_lane();

/* Whether [p, p + n) lies inside shared memory: the __shared__ section, or the running launch's
 * dynamic shared memory. */
bool in_shared(const void *p, size_t n);
/* "static __shared__ [a, b), dynamic [c, d) (N bytes)": for messages. */
std::string describe_shared();
/* "" or, for an address among the program's zeroed statics but outside the shared section
 * (a __shared__ variable of a template kernel), a sentence saying so: for messages. */
std::string shared_hint(const void *p);

/* One thread's cp.async operations not yet performed, in issue order. A copy belongs to group
 * `group`: the number of commit_groups its thread had executed when it was issued, so it is
 * committed once `committed` exceeds that. Lives in the thread's fiber; reset when the fiber
 * starts. */
struct cp_async_copy {
    void *dst;
    const void *src;
    int cp_size, src_size;
    uint64_t group;
};
struct cp_async_queue {
    std::vector<cp_async_copy> pending;
    uint64_t committed = 0;
};
/* The running thread's queue; device_fail outside a kernel. */
cp_async_queue &current_cp_async(const char *fn);

/* ---- what the Hopper operations (sim_hopper.cpp) need of the execution model ---- */

/* A warpgroup operation (threads 128g .. 128g + 127 of the block, 4 whole warps): like
 * warp_collective over the 128 threads of the caller's warpgroup, all of which must exist, not
 * have exited and arrive at the same op with payloads of the same size. The thread that
 * completes the rendezvous calls fn(in, ctx) once, in[t] thread t's payload (t = linear id %
 * 128), in that thread's context (a device_fail there names it). fn writes its results
 * through pointers the payloads carry. Returns the caller's index in its warpgroup. */
typedef void (*warpgroup_collective_fn)(const void *const in[128], const void *ctx);
int warpgroup_collective(int op, const void *mine, size_t bytes, warpgroup_collective_fn fn,
                         const void *ctx);
const char *warpgroup_op_name(int op); /* sim_hopper.cpp, for messages */

/* The running thread blocks until mbar_wake(bar) (an mbarrier phase completion); parity is
 * only for the deadlock report. */
void mbar_block(const void *bar, unsigned parity);
void mbar_wake(const void *bar);
std::string mbar_describe(const void *bar); /* sim_hopper.cpp: phase, counts, for messages */
/* The running thread lets the others run once (a polling wait that failed). */
void yield_thread();
/* bar.sync id, nthreads: a barrier among nthreads threads of the block. */
void named_barrier_sync(int id, int nthreads);
/* __syncthreads completed in the running block so far. */
uint64_t syncthreads_generation();
/* The running thread's linear id, the running block's thread count. */
int current_thread();
int block_threads();
/* Shared-state-space addresses: dynamic shared memory at [16, 16 + its size), the static
 * section above it (4096-aligned), both keeping the host address's low 12 bits. smem_addr
 * reports a pointer outside shared memory; smem_ptr returns the host pointer of [sa, sa + n)
 * or nullptr when that is not inside one region. */
uint32_t smem_addr(const void *p);
void *smem_ptr(uint64_t sa, size_t n);
std::string describe_smem_window();

/* sim_hopper.cpp's part of the block's life: a launch's start (its dynamic shared memory
 * size), a block's start, a thread's exit (may device_fail), the idle hook when no thread can
 * run (lands the copies in flight: 1 = something happened, 0 = nothing to do, -1 = err set),
 * and the block's end (false with err: operations still in flight). */
void hopper_launch_begin(size_t dyn_bytes);
void hopper_block_begin();
void hopper_thread_exit(int linear);
int hopper_idle(std::string &err);
bool hopper_block_end(std::string &err);

} // namespace sg_sim

#endif
