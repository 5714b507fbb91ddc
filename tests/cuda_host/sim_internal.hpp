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

/* ---- streams and their commands ---- */
enum cmd_kind { CMD_KERNEL = 1, CMD_GEMM, CMD_COPY, CMD_SET };
struct cmd {
    int kind = 0;
    std::string name; /* kernel name, "cublasGemmEx", "cudaMemcpyAsync", ... */
    dim3 grid, block;
    size_t smem = 0;
    std::vector<unsigned char> sig; /* arguments / descriptor bytes: what must replay equal */
    std::function<cudaError_t()> run;
    std::string range; /* the NVTX range when issued */
};
/* Runs c now, or records it when the stream is capturing. Returns the error to report. */
cudaError_t issue(cudaStream_t st, cmd c);
/* Whether some stream is capturing (then allocation and synchronisation are forbidden). */
bool capturing_any();
/* A forbidden call during capture: reports it, invalidates every capture. */
cudaError_t capture_violation(const char *what);

/* ---- the grid runner (sim_exec.cpp) ---- */
/* Runs every block of the launch; on a model violation returns false with the message in err. */
bool run_grid(const char *name, dim3 grid, dim3 block, size_t smem, call_base *call,
              std::string &err);
/* For the fault handler: where execution is ("kernel k block (x,y,z) thread (x,y,z)") and
 * whether addr lies in a fiber stack's guard page. */
bool describe_execution(char *buf, size_t n);
bool in_stack_guard(const void *addr);
/* Scheduling order name, for messages. */
const char *order_name();

} // namespace sg_sim

#endif
