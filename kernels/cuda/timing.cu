/* timing.cu — windows of device time: two events around work enqueued on a stream, with the
 * device held busy while the host enqueues that work.
 *
 * Two events recorded around some launches on an idle stream measure from the first event to
 * the second on the device's clock. The first event completes at once, and the device then waits
 * for each launch as the host issues it: the window holds the host's time to issue the work
 * (cuDNN's execute, cuBLASLt's call, a graph's launch: from a few to some tens of
 * microseconds each) as well as the device's time to run it. The second GPU session's per-layer
 * table carried that: the cuDNN columns of its 4 x 4 and 8 x 8 layers read 25 to 50 us for
 * convolutions whose same-size GEMMs take 8 to 10 us, and the eager per-node sum was 30.8 ms
 * against a replayed step of 24.6 ms (bench/results/2026-11-28-nvidia-h200-bench-3.md). A timing
 * whose repetitions are each shorter than their issue (a small convolution timed by cuDNN's
 * candidates, a cuBLASLt algorithm) measures the host, and every candidate ties.
 *
 * So a window begins with a hold: one thread of one block spins (hold_kernel) for hold_s
 * seconds, and the first event is recorded behind it. The host issues the timed work
 * while the device spins; when the hold ends the work is already queued, and the events hold
 * the device's time alone (and the usual gaps between kernels of one stream, as a replay has).
 * Whether that held is checked, not assumed: the hold cannot start before its launch is issued
 * (t0, the host clock before it), so if the host issued the last of the work within hold_s of
 * t0 (less a margin for the doorbell), the device found it queued. A window whose issue took
 * longer is counted host-bound (its time may still hold host time): the count says whether any
 * time reported was not the device's alone.
 *
 * The next hold: twice this window's issue (with the margin), but no less than 3/4 of this hold
 * and SG_CUDA_HOLD_START_S, and no more than SG_CUDA_HOLD_MAX_S. So a run of similar windows
 * (a tuning's candidates, each issued in the same time) is host-bound at most once, and one slow
 * issue (the host descheduled) lengthens the holds after it only for a few windows: each hold
 * costs the device its length (0.2 ms at least: about a tenth of a second over a bench breakdown
 * of 587 nodes), and a hold stuck at the cap would cost 20 ms a window. On the host emulation
 * (SG_CUDA_HOST) launches run when issued, so its windows are host-bound until the hold covers
 * the slowest emulated work; its hold kernel returns at once.
 */
#include "kernels/cuda/cuda_common.cuh"

#include <time.h>

/* One thread (grid 1, block 1): spins until `ns` nanoseconds have passed on both clocks it
 * can read: the global timer, and the SM's cycle counter at `cycles_per_ns` (SG_CUDA_HOLD_GHZ), a
 * clock no SM of today exceeds (the H200's highest is 1.98 GHz). The cycle count keeps the hold at
 * least `ns` long whatever the timer's granularity; the timer keeps it so on an SM faster than
 * that. Should the timer not advance, four times the cycles end it. (The rate is a parameter,
 * not the constant inside: the emulation's launcher draws a false g++ stringop-overflow warning
 * for a kernel of one parameter.) */
#define SG_CUDA_HOLD_GHZ 2.0
__global__ void hold_kernel(uint64_t ns, double cycles_per_ns) {
    SG_PDL_ENTER();
#ifndef SG_CUDA_HOST
    const long long c0 = clock64(), cycles = (long long)((double)ns * cycles_per_ns);
    uint64_t t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    for (;;) {
        const long long c = clock64() - c0;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        if (c >= cycles && (t - t0 >= ns || c >= 4 * cycles)) break;
        __nanosleep(500);
    }
#else
    (void)ns, (void)cycles_per_ns;
#endif
}

static double host_now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

extern "C" void sg_cuda_window_init(sg_cuda_window *w) {
    memset(w, 0, sizeof *w);
    w->hold_s = SG_CUDA_HOLD_START_S;
}

extern "C" int sg_cuda_window_begin(sg_cuda_window *w, cudaStream_t st, cudaEvent_t ev0) {
    const char *fn = "sg_cuda_window_begin";
    SG_ARG_CHECK(w && ev0 && w->hold_s > 0, "%s: no window, event or hold", fn);
    SG_ARG_CHECK(!w->open, "%s: a window is open already", fn);
    w->t0 = host_now_s();
    const uint64_t ns = (uint64_t)(w->hold_s * 1e9);
    SG_LAUNCH(hold_kernel, dim3(1), dim3(1), 0, st, ns, SG_CUDA_HOLD_GHZ);
    SG_LAUNCH_CHECK("hold_kernel");
    if (cudaEventRecord(ev0, st) != cudaSuccess)
        return sg_set_error("%s: %s", fn, cudaGetErrorString(cudaGetLastError()));
    w->open = 1;
    return SG_OK;
}

extern "C" void sg_cuda_window_cancel(sg_cuda_window *w) {
    if (w) w->open = 0;
}

extern "C" int sg_cuda_window_end(sg_cuda_window *w, cudaStream_t st, cudaEvent_t ev0,
                                  cudaEvent_t ev1, float *ms) {
    const char *fn = "sg_cuda_window_end";
    SG_ARG_CHECK(w && ev0 && ev1 && ms, "%s: no window, events or result", fn);
    SG_ARG_CHECK(w->open, "%s: no window is open", fn);
    const double issue = host_now_s() - w->t0;
    w->open = 0;
    *ms = -1;
    w->windows++;
    if (issue > w->issue_max_s) w->issue_max_s = issue;
    if (issue + SG_CUDA_HOLD_MARGIN_S > w->hold_s) w->host_bound++;
    double next = 2 * (issue + SG_CUDA_HOLD_MARGIN_S);
    if (next < 0.75 * w->hold_s) next = 0.75 * w->hold_s;
    if (next < SG_CUDA_HOLD_START_S) next = SG_CUDA_HOLD_START_S;
    w->hold_s = next < SG_CUDA_HOLD_MAX_S ? next : SG_CUDA_HOLD_MAX_S;
    if (cudaEventRecord(ev1, st) != cudaSuccess || cudaEventSynchronize(ev1) != cudaSuccess ||
        cudaEventElapsedTime(ms, ev0, ev1) != cudaSuccess) {
        *ms = -1;
        return sg_set_error("%s: %s", fn, cudaGetErrorString(cudaGetLastError()));
    }
    return SG_OK;
}
