/* nvtx3/nvToolsExt.h — the host stand-in for NVTX ranges (tests/cuda_host only).
 *
 * The real NVTX3 is header-only and names ranges in nsys/ncu profiles; here the emulated
 * runtime keeps the stack of open ranges so that every message it prints names the plan node
 * that was running (graph/backend_cuda_run.c pushes one range per node).
 */
#ifndef SG_SIM_NVTOOLSEXT_H
#define SG_SIM_NVTOOLSEXT_H

#ifdef __cplusplus
extern "C" {
#endif

int nvtxRangePushA(const char *message);
int nvtxRangePop(void);
void nvtxMarkA(const char *message);

#ifdef __cplusplus
}
#endif

#endif
