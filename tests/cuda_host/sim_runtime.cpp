/* sim_runtime.cpp — the CUDA runtime on the host: one emulated device, guarded allocations,
 * synchronous streams, events on the wall clock, stream capture into graphs that replay the
 * recorded closures, NVTX ranges, and the checks that make a misuse fail loudly.
 *
 * Device memory: every cudaMalloc is its own mapping with PROT_NONE guard pages before and
 * after, the allocation right-aligned against the trailing guard (keeping 256-byte alignment),
 * so that a kernel reading one byte past the end of a buffer whose size is a multiple of 256
 * faults at once; the SIGSEGV handler names the kernel, block, thread, address, the nearest
 * allocation and the plan node, then exits. A new allocation (device or pinned host) holds 0xFF
 * bytes, not zeros: a GPU promises nothing of memory cudaMalloc returns, so a read before the
 * first write gets NaN (fp32 and bf16) or -1, never a zero that happens to be right.
 * cudaMemGetInfo reports a total of SG_SIM_MEM_BYTES (default 80 GiB) minus what is allocated,
 * and cudaMalloc refuses beyond it. The device is compute capability 9.0 unless SG_SIM_CC=M.m
 * says otherwise.
 *
 * Checks (each one line on stderr naming the current NVTX range, plus the error the call or the
 * next cudaGetLastError returns): launch configurations; every kernel pointer argument; every
 * copy's and memset's range; no synchronisation, allocation or free during a capture (the
 * capture is invalidated and cudaStreamEndCapture fails, as on a GPU); and at
 * cudaStreamEndCapture the captured sequence must equal the eager one: the commands (kernel
 * name, grid, block, dynamic smem, argument bytes; GEMM descriptors; copies) issued on that
 * stream between its last two synchronisations, skipping intervals that only copied (uploads
 * and downloads between the eager step and the capture).
 */
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#include "cuda_profiler_api.h"
#include "nvtx3/nvToolsExt.h"
#include "sim_internal.hpp"

struct CUstream_st {
    int id = 0;
    unsigned flags = 0;
    bool capturing = false, invalid = false;
    std::vector<sg_sim::cmd> captured;
    std::vector<sg_sim::cmd> seg; /* issued since the last synchronisation (no closures) */
    std::vector<sg_sim::cmd> ref; /* the last synchronised interval that did work */
    bool last_idle = false;       /* the last synchronised interval did no work */
};
struct CUevent_st {
    double t = 0;
    bool recorded = false;
    unsigned flags = 0;
};
/* A graph: a DAG of commands. A capture makes a straight line (each node depends on the one
 * before); graph editing (cudaGraphAdd*Node, cudaGraphAddDependencies, cudaGraphDestroyNode)
 * may make any DAG. An instantiated graph runs its nodes in a topological order, ties broken by
 * creation order: the emulation runs one command at a time, and any such order is one a GPU may
 * run. */
struct CUgraphNode_st {
    sg_sim::cmd c;
    std::vector<CUgraphNode_st *> deps; /* the nodes it depends on */
    CUgraph_st *g = nullptr;
    size_t order = 0; /* creation order in its graph */
};
struct CUgraph_st {
    std::vector<std::unique_ptr<CUgraphNode_st>> nodes; /* creation order */
    std::vector<std::unique_ptr<CUgraphNode_st>> dead;  /* destroyed: their handles stay readable */
    size_t created = 0;
    CUgraphNode_st *add(sg_sim::cmd c) {
        nodes.emplace_back(new CUgraphNode_st);
        CUgraphNode_st *n = nodes.back().get();
        n->c = std::move(c);
        n->g = this;
        n->order = created++;
        return n;
    }
    bool has(const CUgraphNode_st *n) const {
        for (const auto &x : nodes)
            if (x.get() == n) return true;
        return false;
    }
};
struct CUgraphExec_st {
    std::vector<sg_sim::cmd> nodes;
    bool device = false; /* instantiated for device launch */
};

namespace sg_sim {

namespace {

constexpr size_t PAGE = 4096;
constexpr size_t ALIGN = 256;

struct rt_state {
    cudaError_t last = cudaSuccess, sticky = cudaSuccess;
    std::map<uintptr_t, alloc> allocs; /* by base */
    struct mapping {
        uintptr_t map_base;
        size_t map_len;
    };
    std::map<uintptr_t, mapping> maps; /* by allocation base */
    size_t device_bytes = 0;
    size_t total_bytes = 0;
    int cc_major = 9, cc_minor = 0; /* the compute capability reported (SG_SIM_CC) */
    int next_id = 1;
    std::vector<std::string> ranges;
    CUstream_st legacy;
    int next_stream = 1;
    std::vector<CUstream_st *> streams;
    std::map<const void *, int> max_dyn_smem;
    bool init = false;
    bool launch_only = false; /* SG_SIM_LAUNCH_ONLY=1 */
    double discount = 0;      /* seconds taken off the events' clock (clock_discount) */
    /* SG_SIM_KERNEL_MS: a kernel whose name holds .first counts .second ms more on the events'
     * clock each time it runs (kernel_delay) */
    std::vector<std::pair<std::string, double>> kernel_ms;
    bool any_image = false; /* SG_SIM_IMAGES=any: every kernel has code for the device */
    int device = 0;
};
rt_state R;

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

void on_segv(int sig, siginfo_t *si, void *) {
    char ex[300], msg[1200];
    const void *a = si->si_addr;
    if (!describe_execution(ex, sizeof ex)) snprintf(ex, sizeof ex, "host code");
    std::string near = in_stack_guard(a) ? std::string("a fiber stack guard page: the thread's "
                                                       "stack (64 KiB) overflowed")
                                         : describe_address(a);
    std::string rg = current_range();
    int n = snprintf(msg, sizeof msg, "sg_cuda_sim: %s at address %p in %s: %s [node: %s]\n",
                     sig == SIGBUS ? "SIGBUS" : "invalid memory access", a, ex, near.c_str(),
                     rg.c_str());
    if (n > 0) {
        ssize_t w = write(2, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
        (void)w;
    }
    _exit(1);
}

void init() {
    if (R.init) return;
    R.init = true;
    const char *m = getenv("SG_SIM_MEM_BYTES");
    R.total_bytes = m && *m ? (size_t)strtoull(m, nullptr, 10) : ((size_t)80 << 30);
    /* SG_SIM_CC=M.m: report compute capability M.m instead of 9.0 (the refusals of code that
     * needs a particular GPU; the emulation itself still executes Hopper instructions) */
    const char *cc = getenv("SG_SIM_CC");
    if (cc && *cc && sscanf(cc, "%d.%d", &R.cc_major, &R.cc_minor) != 2) {
        fprintf(stderr, "sg_cuda_sim: SG_SIM_CC=%s: expected MAJOR.MINOR\n", cc);
        _exit(1);
    }
    /* SG_SIM_LAUNCH_ONLY=1: every launch and GEMM is checked (configuration, what ptxas
     * assembled, pointers, operand extents) and recorded, but not executed: the production
     * shapes' launches in seconds, their results never computed (launch_only()) */
    const char *lo = getenv("SG_SIM_LAUNCH_ONLY");
    if (lo && *lo && strcmp(lo, "0") && strcmp(lo, "1")) {
        fprintf(stderr, "sg_cuda_sim: SG_SIM_LAUNCH_ONLY=%s is not 0|1\n", lo);
        _exit(1);
    }
    R.launch_only = lo && !strcmp(lo, "1");
    /* SG_SIM_IMAGES=built (the default): a kernel runs where an architecture ptxas assembled
     * it for can (image_for_device); any: on every device, as a build for its architecture too
     * would (a test posing as another GPU with SG_SIM_CC, of a build that covers it), but
     * arch-specific code (sm_90a) still on its own architecture only */
    const char *im = getenv("SG_SIM_IMAGES");
    if (im && *im && strcmp(im, "built") && strcmp(im, "any")) {
        fprintf(stderr, "sg_cuda_sim: SG_SIM_IMAGES=%s is not built|any\n", im);
        _exit(1);
    }
    R.any_image = im && !strcmp(im, "any");
    /* SG_SIM_KERNEL_MS=PATTERN=MS[,PATTERN=MS...]: each execution of a kernel whose name holds
     * PATTERN (the first that matches) counts MS more on the events' clock, so that a test can
     * tell which kernels a timing covered (bench's paired per-layer columns) */
    const char *km = getenv("SG_SIM_KERNEL_MS");
    for (const char *p = km; p && *p;) {
        const char *eq = strchr(p, '='), *end = strchr(p, ',');
        if (!end) end = p + strlen(p);
        char *num_end = nullptr;
        const double ms = eq && eq < end ? strtod(eq + 1, &num_end) : -1;
        if (!eq || eq == p || eq > end || num_end == eq + 1 || num_end != end ||
            !(ms >= 0 && ms <= 1e6)) {
            fprintf(stderr,
                    "sg_cuda_sim: SG_SIM_KERNEL_MS=%s: expected PATTERN=MS[,PATTERN=MS...] "
                    "(MS in [0, 1e6])\n",
                    km);
            _exit(1);
        }
        R.kernel_ms.emplace_back(std::string(p, eq), ms);
        p = *end ? end + 1 : end;
    }
    R.legacy.id = 0;
    /* the handler runs on its own stack: a fiber's overflowing stack cannot host it */
    static char altstack[64 << 10];
    stack_t ss;
    memset(&ss, 0, sizeof ss);
    ss.ss_sp = altstack;
    ss.ss_size = sizeof altstack;
    sigaltstack(&ss, nullptr);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigaction(SIGSEGV, &sa, nullptr);
    sigaction(SIGBUS, &sa, nullptr);
}

CUstream_st *stream_of(cudaStream_t s) {
    return s ? s : &R.legacy;
}

bool valid_stream(cudaStream_t s) {
    if (!s) return true;
    for (CUstream_st *x : R.streams)
        if (x == s) return true;
    return false;
}

bool has_work(const std::vector<cmd> &v) {
    for (const cmd &c : v)
        if (c.kind == CMD_KERNEL || c.kind == CMD_GEMM) return true;
    return false;
}

/* A synchronisation of stream s: the interval since the last one becomes the reference for a
 * later capture, if it did work. */
void close_segment(CUstream_st *s) {
    s->last_idle = !has_work(s->seg);
    if (!s->last_idle) s->ref = std::move(s->seg);
    s->seg.clear();
}

std::string describe_cmd(const cmd &c) {
    char b[300];
    if (c.kind == CMD_KERNEL)
        snprintf(b, sizeof b, "kernel %s grid (%u,%u,%u) block (%u,%u,%u) smem %zu", c.name.c_str(),
                 c.grid.x, c.grid.y, c.grid.z, c.block.x, c.block.y, c.block.z, c.smem);
    else
        snprintf(b, sizeof b, "%s", c.name.c_str());
    return std::string(b) + " [node: " + c.range + "]";
}

/* Sticky errors make every later call fail, as a faulted CUDA context does. */
#define SIM_ENTER()                                                                                \
    do {                                                                                           \
        init();                                                                                    \
        if (R.sticky != cudaSuccess) return R.sticky;                                              \
    } while (0)

void *map_guarded(size_t size, uintptr_t *map_base, size_t *map_len) {
    size_t body = (size + ALIGN - 1) / ALIGN * ALIGN;
    size_t body_pages = (body + PAGE - 1) / PAGE * PAGE;
    size_t len = PAGE + body_pages + PAGE;
    void *m = mmap(nullptr, len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) return nullptr;
    char *b = (char *)m;
    mprotect(b, PAGE, PROT_NONE);
    mprotect(b + PAGE + body_pages, PAGE, PROT_NONE);
    *map_base = (uintptr_t)m;
    *map_len = len;
    return b + PAGE + body_pages - body;
}

cudaError_t do_alloc(void **p, size_t size, bool host) {
    if (!p) return set_error(cudaErrorInvalidValue);
    *p = nullptr;
    if (capturing_any()) return capture_violation(host ? "cudaMallocHost" : "cudaMalloc");
    if (size == 0) return cudaSuccess;
    if (!host && (size > R.total_bytes || R.device_bytes > R.total_bytes - size)) {
        report("cudaMalloc of %zu bytes: out of memory (%zu of %zu bytes in use; SG_SIM_MEM_BYTES)",
               size, R.device_bytes, R.total_bytes);
        return set_error(cudaErrorMemoryAllocation);
    }
    uintptr_t mb = 0;
    size_t ml = 0;
    void *q = map_guarded(size, &mb, &ml);
    if (!q) {
        report("%s of %zu bytes: the host cannot map it", host ? "cudaMallocHost" : "cudaMalloc",
               size);
        return set_error(cudaErrorMemoryAllocation);
    }
    alloc a;
    a.base = (uintptr_t)q;
    a.size = size;
    a.id = R.next_id++;
    a.host = host;
    R.allocs[a.base] = a;
    R.maps[a.base] = {mb, ml};
    memset(q, 0xFF, size); /* poison: cudaMalloc's memory is whatever was there */
    if (!host) R.device_bytes += size;
    *p = q;
    return cudaSuccess;
}

cudaError_t do_free(void *p, bool host) {
    if (capturing_any()) return capture_violation(host ? "cudaFreeHost" : "cudaFree");
    if (!p) return cudaSuccess;
    auto it = R.allocs.find((uintptr_t)p);
    if (it == R.allocs.end() || it->second.host != host) {
        report("%s(%p): not the start of a live %s allocation (%s)",
               host ? "cudaFreeHost" : "cudaFree", p, host ? "host" : "device",
               describe_address(p).c_str());
        return set_error(cudaErrorInvalidValue);
    }
    if (!host) R.device_bytes -= it->second.size;
    auto m = R.maps[(uintptr_t)p];
    munmap((void *)m.map_base, m.map_len);
    R.maps.erase((uintptr_t)p);
    R.allocs.erase(it);
    return cudaSuccess;
}

/* The device-side ranges of a copy must lie in allocations. */
cudaError_t check_copy(const char *fn, void *dst, const void *src, size_t n, cudaMemcpyKind kind) {
    bool dd = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    bool sd = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    if (kind == cudaMemcpyDefault) {
        dd = find_range(dst, 0) != nullptr;
        sd = find_range(src, 0) != nullptr;
    }
    if ((int)kind < 0 || (int)kind > 4) {
        report("%s: bad copy kind %d", fn, (int)kind);
        return cudaErrorInvalidValue;
    }
    if (n == 0) return cudaSuccess;
    if (dd && !find_range(dst, n)) {
        report("%s: destination [%p, +%zu) is not inside one allocation: %s", fn, dst, n,
               describe_address(dst).c_str());
        return cudaErrorInvalidValue;
    }
    if (sd && !find_range(src, n)) {
        report("%s: source [%p, +%zu) is not inside one allocation: %s", fn, src, n,
               describe_address(src).c_str());
        return cudaErrorInvalidValue;
    }
    return cudaSuccess;
}

cudaError_t sync_point(const char *what, CUstream_st *s) {
    if (capturing_any()) return capture_violation(what);
    if (s) {
        close_segment(s);
    } else {
        close_segment(&R.legacy);
        for (CUstream_st *x : R.streams) close_segment(x);
    }
    return cudaSuccess;
}

} // namespace

bool launch_only() {
    init();
    return R.launch_only;
}

/* Whether the device can run the kernel ptxas assembled as res: code for sm_XY (with its PTX,
 * as CMake's "XY" embeds: the driver compiles it for a newer device) runs on compute capability
 * X.Y and above (SG_SIM_IMAGES=any: on every device); arch-specific code (sm_90a) on X.Y only. A
 * kernel without a report (a test's own, a build without nvcc) runs anywhere. Else false, with
 * its architectures in *archs. */
bool image_for_device(const kernel_resources *res, std::string *archs) {
    init();
    if (!res || res->archs.empty()) return true;
    const int cc = R.cc_major * 10 + R.cc_minor;
    archs->clear();
    for (const std::string &a : res->archs) {
        int v = 0;
        char sfx = 0;
        const int got = sscanf(a.c_str(), "sm_%d%c", &v, &sfx);
        if (got >= 1 && (got == 2 && sfx == 'a' ? cc == v : R.any_image || cc >= v)) return true;
        *archs += (archs->empty() ? "" : ", ") + a;
    }
    return false;
}

void clock_discount(double s) {
    if (s > 0) R.discount += s;
}

/* SG_SIM_KERNEL_MS: kernel `name` ran once; the events' clock moves on by its pattern's ms */
static void kernel_delay(const std::string &name) {
    for (const auto &k : R.kernel_ms)
        if (name.find(k.first) != std::string::npos) {
            R.discount -= k.second * 1e-3;
            return;
        }
}

void report(const char *fmt, ...) {
    char msg[1500];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "sg_cuda_sim: %s [node: %s]\n", msg, current_range().c_str());
    fflush(stderr);
}

std::string current_range() {
    return R.ranges.empty() ? std::string("(no NVTX range)") : R.ranges.back();
}

cudaError_t set_error(cudaError_t e) {
    if (e != cudaSuccess) R.last = e;
    return e;
}

const alloc *find_range(const void *p, size_t bytes) {
    uintptr_t a = (uintptr_t)p;
    auto it = R.allocs.upper_bound(a);
    if (it == R.allocs.begin()) return nullptr;
    --it;
    const alloc &x = it->second;
    if (a < x.base || a >= x.base + x.size) return nullptr;
    if (bytes > x.base + x.size - a) return nullptr;
    return &x;
}

void each_alloc(const std::function<void(const alloc &)> &fn) {
    for (const auto &kv : R.allocs) fn(kv.second);
}

std::string describe_address(const void *p) {
    uintptr_t a = (uintptr_t)p;
    const alloc *best = nullptr;
    uintptr_t bestd = ~(uintptr_t)0;
    for (auto &kv : R.allocs) {
        const alloc &x = kv.second;
        uintptr_t d = a < x.base             ? x.base - a
                      : a >= x.base + x.size ? a - (x.base + x.size) + 1
                                             : 0;
        if (d < bestd) bestd = d, best = &x;
    }
    if (!best) return "no allocation is live";
    char b[300];
    const char *kind = best->host ? "host" : "device";
    if (bestd == 0)
        snprintf(b, sizeof b, "offset %zu inside allocation #%d (%s, %zu bytes at %p)",
                 (size_t)(a - best->base), best->id, kind, best->size, (void *)best->base);
    else if (a < best->base)
        snprintf(b, sizeof b, "%zu bytes before allocation #%d (%s, %zu bytes at %p)",
                 (size_t)bestd, best->id, kind, best->size, (void *)best->base);
    else
        snprintf(b, sizeof b, "%zu bytes past the end of allocation #%d (%s, %zu bytes at %p)",
                 (size_t)bestd - 1, best->id, kind, best->size, (void *)best->base);
    return b;
}

bool capturing_any() {
    if (R.legacy.capturing) return true;
    for (CUstream_st *s : R.streams)
        if (s->capturing) return true;
    return false;
}

cudaError_t capture_violation(const char *what) {
    report("%s during stream capture: nothing may synchronise, allocate or free between "
           "cudaStreamBeginCapture and cudaStreamEndCapture (the capture is invalidated)",
           what);
    R.legacy.invalid = R.legacy.capturing || R.legacy.invalid;
    for (CUstream_st *s : R.streams) s->invalid = s->capturing || s->invalid;
    return set_error(cudaErrorStreamCaptureUnsupported);
}

cudaError_t issue(cudaStream_t st, cmd c) {
    init();
    if (R.sticky != cudaSuccess) return R.sticky;
    if (!valid_stream(st)) {
        report("%s on a stream that does not exist", c.name.c_str());
        return set_error(cudaErrorInvalidResourceHandle);
    }
    CUstream_st *s = stream_of(st);
    if (c.range.empty()) c.range = current_range(); /* a graph node keeps its capture's */
    if (s->capturing) {
        if (s->invalid) return set_error(cudaErrorStreamCaptureInvalidated);
        s->captured.push_back(std::move(c));
        return cudaSuccess;
    }
    R.ranges.push_back(c.range); /* messages from inside the command name its node */
    cudaError_t e = c.run();
    R.ranges.pop_back();
    c.run = nullptr;
    s->seg.push_back(std::move(c));
    if (e != cudaSuccess) {
        if (e == cudaErrorLaunchFailure) R.sticky = e;
        return set_error(e);
    }
    return cudaSuccess;
}

namespace {
struct node_func_entry {
    std::string name;
    node_call_maker make;
};
std::map<const void *, node_func_entry> &node_funcs() {
    static std::map<const void *, node_func_entry> m;
    return m;
}
} // namespace
void register_node_func(const void *fn, const char *name, node_call_maker make) {
    node_funcs()[fn] = node_func_entry{name, make};
}
std::shared_ptr<call_base> node_call(const void *fn, void *const *args, launch_info &li) {
    auto it = node_funcs().find(fn);
    if (it == node_funcs().end()) return nullptr;
    li.name = it->second.name.c_str();
    return it->second.make(fn, args, li);
}

/* A kernel's limit of dynamic shared memory a block: its attribute where set, else the default
 * 48 KiB less its static bytes st (ptxas's). *set says which. */
static int dyn_smem_limit(const void *func, int st, bool *set) {
    auto it = R.max_dyn_smem.find(func);
    *set = it != R.max_dyn_smem.end();
    return *set ? it->second : (48 << 10) - st;
}

bool kernel_cmd(launch_info &li, std::shared_ptr<call_base> call, cmd &c) {
    const dim3 g = li.grid, b = li.block;
    const unsigned long long threads = (unsigned long long)b.x * b.y * b.z;
    if (g.x == 0 || g.y == 0 || g.z == 0 || b.x == 0 || b.y == 0 || b.z == 0 || threads > 1024 ||
        b.x > 1024 || b.y > 1024 || b.z > 64 || g.x > 2147483647u || g.y > 65535 || g.z > 65535) {
        report("kernel %s: invalid launch configuration grid (%u,%u,%u) block (%u,%u,%u) (%llu "
               "threads; limits: 1024 threads, block (1024,1024,64), grid (2^31-1,65535,65535))",
               li.name, g.x, g.y, g.z, b.x, b.y, b.z, threads);
        set_error(cudaErrorInvalidConfiguration);
        return false;
    }
    /* what ptxas assembled (sim_resources.cpp): the registers of the block's warps (allocated
     * per warp in units of 256) must fit the SM's 65536, and without the opt-in attribute the
     * static and dynamic shared memory together must fit the default 48 KiB */
    const kernel_resources *res = resources_of(li.func);
    const int st = res ? res->smem_static : 0;
    std::string archs;
    if (!image_for_device(res, &archs)) {
        report("kernel %s (%s): no kernel image for this device (compute capability %d.%d): "
               "ptxas assembled it for %s",
               li.name, res->name.c_str(), R.cc_major, R.cc_minor, archs.c_str());
        set_error(cudaErrorNoKernelImageForDevice);
        return false;
    }
    if (res && res->maxntid && threads > (unsigned long long)res->maxntid) {
        report("kernel %s (%s): %llu threads a block, above its __launch_bounds__ of %d (the "
               "PTX's .maxntid): a GPU refuses the launch (too many resources requested)",
               li.name, res->name.c_str(), threads, res->maxntid);
        set_error(cudaErrorLaunchOutOfResources);
        return false;
    }
    if (res) {
        const long warps = (long)((threads + 31) / 32);
        const long per_warp = ((long)res->regs * 32 + 255) / 256 * 256;
        if (warps * per_warp > 65536) {
            report("kernel %s (%s): %llu threads of %d registers (ptxas) need %ld registers, "
                   "above the SM's 65536: too many resources requested for launch (a smaller "
                   "block, or __launch_bounds__ to cap the registers)",
                   li.name, res->name.c_str(), threads, res->regs, warps * per_warp);
            set_error(cudaErrorLaunchOutOfResources);
            return false;
        }
    }
    bool attr_set = false;
    const int lim = dyn_smem_limit(li.func, st, &attr_set);
    if (li.smem > (size_t)lim) {
        report("kernel %s: %zu bytes of dynamic shared memory, above its limit of %d (%s; raise "
               "it with cudaFuncSetAttribute(MaxDynamicSharedMemorySize): static plus dynamic at "
               "most 227 KiB)",
               li.name, li.smem, lim,
               attr_set ? "the attribute's value"
                        : (std::string("48 KiB less the kernel's ") + std::to_string(st) +
                           " bytes of static shared memory (ptxas)")
                              .c_str());
        set_error(cudaErrorInvalidValue);
        return false;
    }
    for (auto &pa : li.ptrs) {
        if (!pa.second || find_range(pa.second, 0)) continue;
        report("kernel %s: argument %d is the pointer %p, which lies in no live allocation (%s)",
               li.name, pa.first, pa.second, describe_address(pa.second).c_str());
        set_error(cudaErrorInvalidDevicePointer);
        return false;
    }
    c.kind = CMD_KERNEL;
    c.name = li.name;
    c.grid = g;
    c.block = b;
    c.smem = li.smem;
    c.sig = li.sig;
    std::string name = li.name;
    size_t smem = li.smem;
    const std::vector<shared_var> *poison = res ? res->statics : nullptr;
    c.run = [name, g, b, smem, call, poison]() -> cudaError_t {
        if (R.launch_only) return cudaSuccess;
        std::string err;
        if (run_grid(name.c_str(), g, b, smem, call.get(), poison, err)) {
            kernel_delay(name);
            return cudaSuccess;
        }
        report("%s (scheduling order %s)", err.c_str(), order_name());
        return cudaErrorLaunchFailure;
    };
    return true;
}

void submit(launch_info &li, cudaStream_t st, std::shared_ptr<call_base> call) {
    init();
    if (R.sticky != cudaSuccess) {
        R.last = R.sticky;
        return;
    }
    cmd c;
    if (kernel_cmd(li, std::move(call), c)) issue(st, std::move(c));
}

/* what a memset sets: height rows of width elements of elementSize bytes, pitch bytes apart,
 * each element the low elementSize bytes of value (little-endian) */
bool memset_cmd(const char *name, const cudaMemsetParams &p, cmd &c) {
    const size_t es = p.elementSize, row = p.width * es;
    if ((es != 1 && es != 2 && es != 4) || (p.height > 1 && p.pitch < row) ||
        (uintptr_t)p.dst % es || (p.height > 1 && p.pitch % es)) {
        report(
            "%s: invalid parameters (element size %zu, width %zu, height %zu, pitch %zu, dst %p)",
            name, es, p.width, p.height, p.pitch, p.dst);
        set_error(cudaErrorInvalidValue);
        return false;
    }
    const size_t span = p.height && row ? (p.height - 1) * p.pitch + row : 0;
    if (span && !find_range(p.dst, span)) {
        report("%s: [%p, +%zu) is not inside one allocation: %s", name, p.dst, span,
               describe_address(p.dst).c_str());
        set_error(cudaErrorInvalidValue);
        return false;
    }
    c.kind = CMD_SET;
    c.name = name;
    c.set = p;
    struct {
        void *p;
        size_t pitch, width, height;
        unsigned v, es;
    } sig = {p.dst, p.pitch, p.width, p.height, p.value, p.elementSize};
    c.sig.assign((const unsigned char *)&sig, (const unsigned char *)&sig + sizeof sig);
    c.run = [p]() {
        unsigned char v[4];
        for (int k = 0; k < 4; k++) v[k] = (unsigned char)(p.value >> (8 * k));
        for (size_t r = 0; r < p.height; r++) {
            unsigned char *d = (unsigned char *)p.dst + r * p.pitch;
            for (size_t i = 0; i < p.width * p.elementSize; i++) d[i] = v[i % p.elementSize];
        }
        return cudaSuccess;
    };
    return true;
}

} // namespace sg_sim

using namespace sg_sim;

extern "C" {

/* ---- NVTX ---- */
int nvtxRangePushA(const char *message) {
    init();
    R.ranges.emplace_back(message ? message : "");
    return (int)R.ranges.size() - 1;
}
int nvtxRangePop(void) {
    if (R.ranges.empty()) return -1;
    R.ranges.pop_back();
    return (int)R.ranges.size();
}
void nvtxMarkA(const char *) {}

/* ---- errors ---- */
const char *cudaGetErrorName(cudaError_t e) {
    switch (e) {
#define SIM_E(x)                                                                                   \
    case x:                                                                                        \
        return #x;
        SIM_E(cudaSuccess)
        SIM_E(cudaErrorInvalidValue)
        SIM_E(cudaErrorMemoryAllocation)
        SIM_E(cudaErrorInitializationError)
        SIM_E(cudaErrorInvalidConfiguration)
        SIM_E(cudaErrorInvalidPitchValue)
        SIM_E(cudaErrorInvalidDevicePointer)
        SIM_E(cudaErrorInvalidDeviceFunction)
        SIM_E(cudaErrorNoDevice)
        SIM_E(cudaErrorInvalidDevice)
        SIM_E(cudaErrorNoKernelImageForDevice)
        SIM_E(cudaErrorInvalidResourceHandle)
        SIM_E(cudaErrorIllegalState)
        SIM_E(cudaErrorLossyQuery)
        SIM_E(cudaErrorNotReady)
        SIM_E(cudaErrorIllegalAddress)
        SIM_E(cudaErrorLaunchOutOfResources)
        SIM_E(cudaErrorAssert)
        SIM_E(cudaErrorLaunchFailure)
        SIM_E(cudaErrorNotPermitted)
        SIM_E(cudaErrorNotSupported)
        SIM_E(cudaErrorStreamCaptureUnsupported)
        SIM_E(cudaErrorStreamCaptureInvalidated)
        SIM_E(cudaErrorStreamCaptureUnmatched)
        SIM_E(cudaErrorStreamCaptureImplicit)
        SIM_E(cudaErrorStreamCaptureWrongThread)
        SIM_E(cudaErrorUnknown)
#undef SIM_E
    }
    return "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess:
        return "no error";
    case cudaErrorInvalidValue:
        return "invalid argument";
    case cudaErrorMemoryAllocation:
        return "out of memory";
    case cudaErrorInvalidConfiguration:
        return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer:
        return "invalid device pointer";
    case cudaErrorInvalidResourceHandle:
        return "invalid resource handle";
    case cudaErrorLaunchFailure:
        return "unspecified launch failure";
    case cudaErrorStreamCaptureUnsupported:
        return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated:
        return "operation failed due to a previous error during capture";
    case cudaErrorIllegalState:
        return "the resource is not in a valid state to perform the request";
    case cudaErrorNoDevice:
        return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice:
        return "invalid device ordinal";
    case cudaErrorNoKernelImageForDevice:
        return "no kernel image is available for execution on the device";
    case cudaErrorNotSupported:
        return "operation not supported";
    default:
        return cudaGetErrorName(e);
    }
}

cudaError_t cudaGetLastError(void) {
    init();
    cudaError_t e = R.last;
    R.last = R.sticky;
    return e;
}
cudaError_t cudaPeekAtLastError(void) {
    init();
    return R.last;
}

/* ---- the device ---- */
cudaError_t cudaGetDeviceCount(int *count) {
    init();
    if (!count) return set_error(cudaErrorInvalidValue);
    *count = 1;
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
    init();
    if (device != 0) return set_error(cudaErrorInvalidDevice);
    R.device = device;
    return cudaSuccess;
}
cudaError_t cudaGetDevice(int *device) {
    init();
    if (!device) return set_error(cudaErrorInvalidValue);
    *device = R.device;
    return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int device) {
    init();
    if (!p) return set_error(cudaErrorInvalidValue);
    if (device != 0) return set_error(cudaErrorInvalidDevice);
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "stepgraph host emulation");
    p->totalGlobalMem = R.total_bytes;
    p->sharedMemPerBlock = 48 << 10;
    p->sharedMemPerBlockOptin = 227 << 10;
    p->sharedMemPerMultiprocessor = 228 << 10;
    p->regsPerBlock = 65536;
    p->warpSize = 32;
    p->maxThreadsPerBlock = 1024;
    p->maxThreadsDim[0] = 1024, p->maxThreadsDim[1] = 1024, p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 2147483647, p->maxGridSize[1] = 65535, p->maxGridSize[2] = 65535;
    p->totalConstMem = 65536;
    p->major = R.cc_major;
    p->minor = R.cc_minor;
    p->multiProcessorCount = 132;
    p->l2CacheSize = 50 << 20;
    p->maxThreadsPerMultiProcessor = 2048;
    p->memoryBusWidth = 5120;
    return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device) {
    init();
    if (!value) return set_error(cudaErrorInvalidValue);
    if (device != 0) return set_error(cudaErrorInvalidDevice);
    switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock:
        *value = 1024;
        break;
    case cudaDevAttrMaxSharedMemoryPerBlock:
        *value = 48 << 10;
        break;
    case cudaDevAttrWarpSize:
        *value = 32;
        break;
    case cudaDevAttrMultiProcessorCount:
        *value = 132;
        break;
    case cudaDevAttrL2CacheSize:
        *value = 50 << 20;
        break;
    case cudaDevAttrComputeCapabilityMajor:
        *value = R.cc_major;
        break;
    case cudaDevAttrComputeCapabilityMinor:
        *value = R.cc_minor;
        break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin:
        *value = 227 << 10;
        break;
    default:
        report("cudaDeviceGetAttribute(%d) is not emulated", (int)attr);
        return set_error(cudaErrorInvalidValue);
    }
    return cudaSuccess;
}
cudaError_t cudaRuntimeGetVersion(int *v) {
    if (!v) return set_error(cudaErrorInvalidValue);
    *v = CUDART_VERSION;
    return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int *v) {
    if (!v) return set_error(cudaErrorInvalidValue);
    *v = CUDART_VERSION;
    return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize(void) {
    SIM_ENTER();
    return sync_point("cudaDeviceSynchronize", nullptr);
}
/* the profiler's collection range (cuda_profiler_api.h): no profiler here; a start inside a
 * range or a stop outside one is reported, as a caller's bookkeeping error */
static int profiler_on;
cudaError_t cudaProfilerStart(void) {
    SIM_ENTER();
    if (profiler_on) report("cudaProfilerStart inside a profiler range");
    profiler_on = 1;
    return cudaSuccess;
}
cudaError_t cudaProfilerStop(void) {
    SIM_ENTER();
    if (!profiler_on) report("cudaProfilerStop outside a profiler range");
    profiler_on = 0;
    return cudaSuccess;
}
cudaError_t cudaDeviceReset(void) {
    init();
    R.sticky = R.last = cudaSuccess;
    return cudaSuccess;
}
cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total_b) {
    SIM_ENTER();
    if (!free_b || !total_b) return set_error(cudaErrorInvalidValue);
    *total_b = R.total_bytes;
    *free_b = R.total_bytes - R.device_bytes;
    return cudaSuccess;
}

/* ---- memory ---- */
cudaError_t cudaMalloc(void **p, size_t size) {
    SIM_ENTER();
    return do_alloc(p, size, false);
}
cudaError_t cudaFree(void *p) {
    SIM_ENTER();
    return do_free(p, false);
}
cudaError_t cudaMallocHost(void **p, size_t size) {
    SIM_ENTER();
    return do_alloc(p, size, true);
}
cudaError_t cudaHostAlloc(void **p, size_t size, unsigned int) {
    SIM_ENTER();
    return do_alloc(p, size, true);
}
cudaError_t cudaFreeHost(void *p) {
    SIM_ENTER();
    return do_free(p, true);
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind) {
    SIM_ENTER();
    if (capturing_any()) return capture_violation("cudaMemcpy (synchronous)");
    cudaError_t e = check_copy("cudaMemcpy", dst, src, n, kind);
    if (e) return set_error(e);
    if (n) memmove(dst, src, n);
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                            cudaStream_t st) {
    SIM_ENTER();
    cudaError_t e = check_copy("cudaMemcpyAsync", dst, src, n, kind);
    if (e) return set_error(e);
    cmd c;
    c.kind = CMD_COPY;
    c.name = "cudaMemcpyAsync";
    struct {
        void *d;
        const void *s;
        size_t n;
        int k;
    } sig = {dst, src, n, (int)kind};
    c.sig.assign((const unsigned char *)&sig, (const unsigned char *)&sig + sizeof sig);
    c.run = [dst, src, n]() {
        if (n) memmove(dst, src, n);
        return cudaSuccess;
    };
    return issue(st, std::move(c));
}
cudaError_t cudaMemset(void *p, int value, size_t n) {
    SIM_ENTER();
    if (capturing_any()) return capture_violation("cudaMemset (synchronous)");
    if (n && !find_range(p, n)) {
        report("cudaMemset: [%p, +%zu) is not inside one allocation: %s", p, n,
               describe_address(p).c_str());
        return set_error(cudaErrorInvalidValue);
    }
    if (n) memset(p, value, n);
    return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void *p, int value, size_t n, cudaStream_t st) {
    SIM_ENTER();
    cudaMemsetParams m = {p, 0, (unsigned)value & 0xffu, 1, n, 1};
    cmd c;
    if (!memset_cmd("cudaMemsetAsync", m, c)) return cudaErrorInvalidValue;
    return issue(st, std::move(c));
}
cudaError_t cudaMemset2DAsync(void *p, size_t pitch, int value, size_t width, size_t height,
                              cudaStream_t st) {
    SIM_ENTER();
    cudaMemsetParams m = {p, pitch, (unsigned)value & 0xffu, 1, width, height};
    cmd c;
    if (!memset_cmd("cudaMemset2DAsync", m, c)) return cudaErrorInvalidValue;
    return issue(st, std::move(c));
}

/* ---- streams ---- */
cudaError_t cudaStreamCreate(cudaStream_t *s) {
    return cudaStreamCreateWithFlags(s, cudaStreamDefault);
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags) {
    SIM_ENTER();
    if (!s) return set_error(cudaErrorInvalidValue);
    CUstream_st *x = new CUstream_st;
    x->id = R.next_stream++;
    x->flags = flags;
    R.streams.push_back(x);
    *s = x;
    return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
    init();
    for (size_t i = 0; i < R.streams.size(); i++)
        if (R.streams[i] == s) {
            if (s->capturing) {
                report("cudaStreamDestroy of a capturing stream");
                return set_error(cudaErrorIllegalState);
            }
            R.streams.erase(R.streams.begin() + (long)i);
            delete s;
            return cudaSuccess;
        }
    return set_error(cudaErrorInvalidResourceHandle);
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    SIM_ENTER();
    if (!valid_stream(s)) return set_error(cudaErrorInvalidResourceHandle);
    return sync_point("cudaStreamSynchronize", stream_of(s));
}
cudaError_t cudaStreamQuery(cudaStream_t s) {
    SIM_ENTER();
    if (!valid_stream(s)) return set_error(cudaErrorInvalidResourceHandle);
    return cudaSuccess; /* everything issued has run */
}
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t ev, unsigned int) {
    SIM_ENTER();
    if (!valid_stream(s) || !ev) return set_error(cudaErrorInvalidResourceHandle);
    return cudaSuccess; /* streams run synchronously: the event has completed */
}

/* ---- events ---- */
cudaError_t cudaEventCreate(cudaEvent_t *ev) {
    return cudaEventCreateWithFlags(ev, cudaEventDefault);
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *ev, unsigned int flags) {
    SIM_ENTER();
    if (!ev) return set_error(cudaErrorInvalidValue);
    *ev = new CUevent_st;
    (*ev)->flags = flags;
    return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t ev) {
    if (!ev) return set_error(cudaErrorInvalidResourceHandle);
    delete ev;
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t s) {
    SIM_ENTER();
    if (!ev || !valid_stream(s)) return set_error(cudaErrorInvalidResourceHandle);
    if (stream_of(s)->capturing) return cudaSuccess; /* an event node: nothing to emulate */
    ev->t = now_s() - R.discount;
    ev->recorded = true;
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t ev) {
    SIM_ENTER();
    if (!ev) return set_error(cudaErrorInvalidResourceHandle);
    if (capturing_any()) return capture_violation("cudaEventSynchronize");
    return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t ev) {
    SIM_ENTER();
    if (!ev) return set_error(cudaErrorInvalidResourceHandle);
    return cudaSuccess;
}
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) {
    SIM_ENTER();
    if (!ms || !a || !b) return set_error(cudaErrorInvalidValue);
    if (!a->recorded || !b->recorded) return set_error(cudaErrorInvalidResourceHandle);
    *ms = (float)((b->t - a->t) * 1e3);
    return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr, int value) {
    SIM_ENTER();
    if (!func) return set_error(cudaErrorInvalidDeviceFunction);
    if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
        /* the attribute plus the kernel's static shared memory (ptxas, sim_resources.cpp)
         * must fit the device's opt-in limit */
        const kernel_resources *res = resources_of(func);
        const int st = res ? res->smem_static : 0;
        if (value < 0 || value + st > (227 << 10)) {
            report("cudaFuncSetAttribute: %d bytes of dynamic shared memory and %d of static "
                   "exceed the device's 227 KiB opt-in limit",
                   value, st);
            return set_error(cudaErrorInvalidValue);
        }
        R.max_dyn_smem[func] = value;
        return cudaSuccess;
    }
    if (attr == cudaFuncAttributePreferredSharedMemoryCarveout) return cudaSuccess;
    return set_error(cudaErrorInvalidValue);
}

cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *attr, const void *func) {
    SIM_ENTER();
    if (!attr) return set_error(cudaErrorInvalidValue);
    if (!func) return set_error(cudaErrorInvalidDeviceFunction);
    /* what ptxas assembled where a report names the kernel (sim_resources.cpp), else zeros */
    const kernel_resources *res = resources_of(func);
    std::string archs;
    if (!image_for_device(res, &archs)) return set_error(cudaErrorNoKernelImageForDevice);
    *attr = cudaFuncAttributes{};
    attr->sharedSizeBytes = res ? (size_t)res->smem_static : 0;
    attr->numRegs = res ? res->regs : 0;
    attr->maxThreadsPerBlock = res && res->maxntid ? res->maxntid : 1024;
    bool set = false;
    attr->maxDynamicSharedSizeBytes = dyn_smem_limit(func, (int)attr->sharedSizeBytes, &set);
    attr->ptxVersion = attr->binaryVersion = 90;
    return cudaSuccess;
}

/* ---- capture and graphs ---- */

/* SG_SIM_GRAPH_LIST=FILE: every completed capture appends its commands to FILE, one line each
 * ("capture K: N commands", then "KIND<TAB>NAME<TAB>NVTX range"), so that what a replayed step
 * launches can be counted without a GPU (tools/graph_launches.py sums it per kernel and per
 * node). The names are this emulation's: one cuBLAS GEMM is one command here, where the
 * library may launch two kernels (a split-K reduction), and cuDNN is not emulated. */
static void list_graph(const std::vector<cmd> &nodes) {
    static int captures = 0;
    const char *path = getenv("SG_SIM_GRAPH_LIST");
    if (!path || !*path) return;
    FILE *f = fopen(path, "a");
    if (!f) {
        fprintf(stderr, "sg_cuda_sim: SG_SIM_GRAPH_LIST=%s: cannot open for appending\n", path);
        return;
    }
    static const char *const kinds[] = {"?", "kernel", "gemm", "copy", "set"};
    fprintf(f, "capture %d: %zu commands\n", captures++, nodes.size());
    for (const cmd &c : nodes)
        fprintf(f, "%s\t%s\t%s\n", c.kind >= 1 && c.kind <= 4 ? kinds[c.kind] : kinds[0],
                c.name.c_str(), c.range.c_str());
    fclose(f);
}
cudaError_t cudaStreamBeginCapture(cudaStream_t st, enum cudaStreamCaptureMode) {
    SIM_ENTER();
    if (!st || !valid_stream(st)) {
        report("cudaStreamBeginCapture: the legacy NULL stream cannot be captured");
        return set_error(cudaErrorStreamCaptureUnsupported);
    }
    if (st->capturing) return set_error(cudaErrorIllegalState);
    st->capturing = true;
    st->invalid = false;
    st->captured.clear();
    return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t st, cudaGraph_t *g) {
    init();
    if (!g) return set_error(cudaErrorInvalidValue);
    *g = nullptr;
    if (!st || !valid_stream(st) || !st->capturing) {
        report("cudaStreamEndCapture on a stream that is not capturing");
        return set_error(cudaErrorIllegalState);
    }
    st->capturing = false;
    std::vector<cmd> nodes = std::move(st->captured);
    st->captured.clear();
    if (st->invalid) {
        st->invalid = false;
        return set_error(cudaErrorStreamCaptureInvalidated);
    }
    /* the captured sequence must replay the eager one (a capture of no work after an interval
     * of none replays it: nodes that launch nothing, e.g. an in-place accum) */
    const std::vector<cmd> &ref = st->ref;
    if (!ref.empty() && !(st->last_idle && !has_work(nodes))) {
        size_t n = nodes.size() < ref.size() ? nodes.size() : ref.size(), k = 0;
        while (k < n && nodes[k].kind == ref[k].kind && nodes[k].name == ref[k].name &&
               nodes[k].grid.x == ref[k].grid.x && nodes[k].grid.y == ref[k].grid.y &&
               nodes[k].grid.z == ref[k].grid.z && nodes[k].block.x == ref[k].block.x &&
               nodes[k].block.y == ref[k].block.y && nodes[k].block.z == ref[k].block.z &&
               nodes[k].smem == ref[k].smem && nodes[k].sig == ref[k].sig)
            k++;
        if (k < n || nodes.size() != ref.size()) {
            std::string what;
            if (k < n) {
                size_t byte = 0;
                while (byte < nodes[k].sig.size() && byte < ref[k].sig.size() &&
                       nodes[k].sig[byte] == ref[k].sig[byte])
                    byte++;
                what = "captured " + describe_cmd(nodes[k]) + " vs eager " + describe_cmd(ref[k]);
                if (nodes[k].name == ref[k].name)
                    what += " (argument bytes first differ at byte " + std::to_string(byte) + ")";
            } else {
                what = nodes.size() > ref.size()
                           ? "the capture has more: next " + describe_cmd(nodes[k])
                           : "the eager run had more: next " + describe_cmd(ref[k]);
            }
            report("the captured sequence does not replay the eager one (the commands issued on "
                   "this stream between its last two synchronisations): %zu captured, %zu eager; "
                   "first difference at command #%zu: %s",
                   nodes.size(), ref.size(), k, what.c_str());
            return set_error(cudaErrorStreamCaptureInvalidated);
        }
    }
    list_graph(nodes);
    CUgraph_st *graph = new CUgraph_st;
    CUgraphNode_st *prev = nullptr;
    for (cmd &c : nodes) {
        CUgraphNode_st *n = graph->add(std::move(c));
        if (prev) n->deps.push_back(prev);
        prev = n;
    }
    *g = graph;
    return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t st, enum cudaStreamCaptureStatus *status) {
    SIM_ENTER();
    if (!status || !valid_stream(st)) return set_error(cudaErrorInvalidValue);
    CUstream_st *s = stream_of(st);
    *status = !s->capturing ? cudaStreamCaptureStatusNone
              : s->invalid  ? cudaStreamCaptureStatusInvalidated
                            : cudaStreamCaptureStatusActive;
    return cudaSuccess;
}

/* the nodes in the order an instantiated graph runs them: topological, ties by creation order;
 * false (reported) where the edges make a cycle */
static bool graph_order(const CUgraph_st *g, std::vector<const CUgraphNode_st *> &out) {
    std::map<const CUgraphNode_st *, size_t> pending;
    std::map<const CUgraphNode_st *, std::vector<const CUgraphNode_st *>> next;
    for (const auto &n : g->nodes) {
        pending[n.get()] = n->deps.size();
        for (const CUgraphNode_st *d : n->deps) next[d].push_back(n.get());
    }
    std::map<size_t, const CUgraphNode_st *> ready; /* by creation order */
    for (const auto &n : g->nodes)
        if (n->deps.empty()) ready[n->order] = n.get();
    out.clear();
    while (!ready.empty()) {
        const CUgraphNode_st *n = ready.begin()->second;
        ready.erase(ready.begin());
        out.push_back(n);
        for (const CUgraphNode_st *m : next[n])
            if (--pending[m] == 0) ready[m->order] = m;
    }
    if (out.size() == g->nodes.size()) return true;
    report("cudaGraphInstantiate: the graph's edges make a cycle");
    return false;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *e, cudaGraph_t g, unsigned long long) {
    SIM_ENTER();
    if (!e || !g) return set_error(cudaErrorInvalidValue);
    std::vector<const CUgraphNode_st *> order;
    if (!graph_order(g, order)) return set_error(cudaErrorInvalidValue);
    CUgraphExec_st *x = new CUgraphExec_st;
    for (const CUgraphNode_st *n : order) x->nodes.push_back(n->c);
    *e = x;
    return cudaSuccess;
}

namespace {
/* the device graph launches: pending tail launches of the host launch running now, how deep
 * in graph launches the emulation is, and how many tail launches ran (sg_sim_tail_launches) */
std::vector<cudaGraphExec_t> g_tails;
int g_launch_depth = 0;
long g_tail_launches = 0;
const char *device_graph_mode() {
    const char *m = getenv("SG_SIM_DEVICE_GRAPH");
    return m ? m : "";
}
} // namespace

extern "C" long sg_sim_tail_launches(void) {
    return g_tail_launches;
}

cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *e, cudaGraph_t g,
                                          unsigned long long flags) {
    SIM_ENTER();
    if (flags & ~(unsigned long long)cudaGraphInstantiateFlagDeviceLaunch)
        return set_error(cudaErrorInvalidValue);
    if (flags & cudaGraphInstantiateFlagDeviceLaunch) {
        /* a device graph: not empty, kernel (cuBLASLt: kernels on a GPU) and memset nodes only
         * (the runtime allows device memcpy and child graphs too; the step has neither) */
        if (!g || g->nodes.empty() || !strcmp(device_graph_mode(), "refuse"))
            return set_error(cudaErrorNotSupported);
        for (const auto &n : g->nodes)
            if (n->c.kind != CMD_KERNEL && n->c.kind != CMD_GEMM && n->c.kind != CMD_SET)
                return set_error(cudaErrorNotSupported);
    }
    const cudaError_t r = cudaGraphInstantiate(e, g, 0);
    if (r == cudaSuccess) (*e)->device = (flags & cudaGraphInstantiateFlagDeviceLaunch) != 0;
    return r;
}
cudaError_t cudaGraphUpload(cudaGraphExec_t e, cudaStream_t st) {
    SIM_ENTER();
    if (!e || !valid_stream(st)) return set_error(cudaErrorInvalidResourceHandle);
    return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t st) {
    SIM_ENTER();
    if (st == cudaStreamGraphTailLaunch) {
        /* the device side: from a kernel of a graph being launched, a graph instantiated for
         * device launch, run after the launching graph's nodes (below) */
        if (!e || !e->device || g_launch_depth == 0 || !strcmp(device_graph_mode(), "fail_launch"))
            return cudaErrorInvalidValue; /* the kernel's return value: no sticky host error */
        g_tails.push_back(e);
        return cudaSuccess;
    }
    if (!e || !valid_stream(st)) return set_error(cudaErrorInvalidResourceHandle);
    CUstream_st *s = stream_of(st);
    if (s->capturing) {
        report("cudaGraphLaunch into a capturing stream (a child graph) is not emulated");
        return set_error(cudaErrorNotSupported);
    }
    /* the recorded closures, in order; what ran joins the stream's interval; then each graph its
     * kernels tail-launched (and theirs), in order */
    std::vector<cudaGraphExec_t> todo{e};
    for (size_t k = 0; k < todo.size(); k++) {
        g_launch_depth++;
        for (const cmd &n : todo[k]->nodes) {
            cmd c = n;
            cudaError_t err = issue(st, std::move(c));
            if (err != cudaSuccess) {
                g_launch_depth--;
                g_tails.clear();
                return err;
            }
        }
        g_launch_depth--;
        g_tail_launches += k > 0;
        todo.insert(todo.end(), g_tails.begin(), g_tails.end());
        g_tails.clear();
    }
    return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t e) {
    delete e;
    return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t g) {
    delete g;
    return cudaSuccess;
}
cudaError_t cudaGraphCreate(cudaGraph_t *g, unsigned int flags) {
    SIM_ENTER();
    if (!g || flags) return set_error(cudaErrorInvalidValue);
    *g = new CUgraph_st;
    return cudaSuccess;
}
cudaError_t cudaGraphClone(cudaGraph_t *out, cudaGraph_t g) {
    SIM_ENTER();
    if (!out || !g) return set_error(cudaErrorInvalidValue);
    CUgraph_st *c = new CUgraph_st;
    std::map<const CUgraphNode_st *, CUgraphNode_st *> to;
    for (const auto &n : g->nodes) to[n.get()] = c->add(n->c);
    for (const auto &n : g->nodes)
        for (const CUgraphNode_st *d : n->deps) to[n.get()]->deps.push_back(to[d]);
    *out = c;
    return cudaSuccess;
}
cudaError_t cudaGraphGetNodes(cudaGraph_t g, cudaGraphNode_t *nodes, size_t *num) {
    SIM_ENTER();
    if (!g || !num) return set_error(cudaErrorInvalidValue);
    if (nodes) {
        size_t n = *num < g->nodes.size() ? *num : g->nodes.size();
        for (size_t i = 0; i < n; i++) nodes[i] = g->nodes[i].get();
    }
    *num = g->nodes.size();
    return cudaSuccess;
}
cudaError_t cudaGraphGetRootNodes(cudaGraph_t g, cudaGraphNode_t *roots, size_t *num) {
    SIM_ENTER();
    if (!g || !num) return set_error(cudaErrorInvalidValue);
    size_t k = 0;
    for (const auto &n : g->nodes) {
        if (!n->deps.empty()) continue;
        if (roots && k < *num) roots[k] = n.get();
        k++;
    }
    *num = k;
    return cudaSuccess;
}
cudaError_t cudaGraphGetEdges(cudaGraph_t g, cudaGraphNode_t *from, cudaGraphNode_t *to,
                              cudaGraphEdgeData *edge_data, size_t *num) {
    SIM_ENTER();
    if (!g || !num || edge_data || (!from != !to)) {
        report("cudaGraphGetEdges: from and to both or neither; edgeData must be NULL here");
        return set_error(cudaErrorInvalidValue);
    }
    size_t k = 0;
    for (const auto &n : g->nodes)
        for (CUgraphNode_st *d : n->deps) {
            if (from && k < *num) from[k] = d, to[k] = n.get();
            k++;
        }
    *num = k;
    return cudaSuccess;
}
static bool node_ok(const char *fn, cudaGraphNode_t node) {
    if (node && node->g && node->g->has(node)) return true;
    report("%s: not a node of a live graph (%p)", fn, (void *)node);
    return false;
}
cudaError_t cudaGraphNodeGetType(cudaGraphNode_t node, enum cudaGraphNodeType *type) {
    SIM_ENTER();
    if (!type || !node_ok("cudaGraphNodeGetType", node)) return set_error(cudaErrorInvalidValue);
    const int kind = node->c.kind;
    *type = kind == CMD_COPY  ? cudaGraphNodeTypeMemcpy
            : kind == CMD_SET ? cudaGraphNodeTypeMemset
                              : cudaGraphNodeTypeKernel;
    return cudaSuccess;
}
cudaError_t cudaGraphMemsetNodeGetParams(cudaGraphNode_t node, struct cudaMemsetParams *p) {
    SIM_ENTER();
    if (!p || !node_ok("cudaGraphMemsetNodeGetParams", node) || node->c.kind != CMD_SET)
        return set_error(cudaErrorInvalidValue);
    *p = node->c.set;
    return cudaSuccess;
}
/* the dependencies given to a new node: nodes of g, no repeats */
static bool deps_ok(const char *fn, cudaGraph_t g, const cudaGraphNode_t *deps, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (!deps || !deps[i] || deps[i]->g != g || !g->has(deps[i])) {
            report("%s: dependency %zu is not a node of this graph", fn, i);
            return false;
        }
        for (size_t j = 0; j < i; j++)
            if (deps[j] == deps[i]) {
                report("%s: dependency %zu repeats dependency %zu", fn, i, j);
                return false;
            }
    }
    return true;
}
/* a node made by hand (checked: deps_ok), after deps, named by the NVTX range it is made in */
static cudaError_t add_node(cudaGraph_t g, cmd c, const cudaGraphNode_t *deps, size_t n,
                            cudaGraphNode_t *out) {
    c.range = current_range();
    CUgraphNode_st *x = g->add(std::move(c));
    x->deps.assign(deps, deps + n);
    *out = x;
    return cudaSuccess;
}
cudaError_t cudaGraphAddMemsetNode(cudaGraphNode_t *out, cudaGraph_t g, const cudaGraphNode_t *deps,
                                   size_t n, const struct cudaMemsetParams *p) {
    SIM_ENTER();
    if (!out || !g || !p || !deps_ok("cudaGraphAddMemsetNode", g, deps, n))
        return set_error(cudaErrorInvalidValue);
    cmd c;
    if (!memset_cmd("memset node", *p, c)) return cudaErrorInvalidValue;
    return add_node(g, std::move(c), deps, n, out);
}
/* cudaKernelNodeParams' fields share the names of the kernels' built-in variables (cuda_sim.hpp) */
#pragma push_macro("gridDim")
#pragma push_macro("blockDim")
#undef gridDim
#undef blockDim
cudaError_t cudaGraphAddKernelNode(cudaGraphNode_t *out, cudaGraph_t g, const cudaGraphNode_t *deps,
                                   size_t n, const struct cudaKernelNodeParams *p) {
    SIM_ENTER();
    if (!out || !g || !p || !deps_ok("cudaGraphAddKernelNode", g, deps, n))
        return set_error(cudaErrorInvalidValue);
    if (p->extra || !p->kernelParams) {
        report("cudaGraphAddKernelNode: only kernelParams (no extra) is emulated");
        return set_error(cudaErrorInvalidValue);
    }
    /* SG_SIM_GRAPH_EDIT_FAIL=1: refuse, as a driver might (what the caller does then) */
    const char *fail = getenv("SG_SIM_GRAPH_EDIT_FAIL");
    if (fail && !strcmp(fail, "1")) return set_error(cudaErrorNotSupported);
    launch_info li;
    std::shared_ptr<call_base> call = node_call(p->func, p->kernelParams, li);
    if (!call) {
        report("cudaGraphAddKernelNode: the function %p was not named by SG_KERNEL_NODE_FUNC",
               p->func);
        return set_error(cudaErrorInvalidDeviceFunction);
    }
    li.grid = p->gridDim;
    li.block = p->blockDim;
    li.smem = p->sharedMemBytes;
    cmd c;
    if (!kernel_cmd(li, std::move(call), c)) return R.last;
    return add_node(g, std::move(c), deps, n, out);
}
#pragma pop_macro("blockDim")
#pragma pop_macro("gridDim")
cudaError_t cudaGraphNodeGetDependencies(cudaGraphNode_t node, cudaGraphNode_t *deps,
                                         cudaGraphEdgeData *edge_data, size_t *num) {
    SIM_ENTER();
    if (!num || edge_data || !node_ok("cudaGraphNodeGetDependencies", node))
        return set_error(cudaErrorInvalidValue);
    if (deps)
        for (size_t i = 0; i < *num && i < node->deps.size(); i++) deps[i] = node->deps[i];
    *num = node->deps.size();
    return cudaSuccess;
}
cudaError_t cudaGraphNodeGetDependentNodes(cudaGraphNode_t node, cudaGraphNode_t *out,
                                           cudaGraphEdgeData *edge_data, size_t *num) {
    SIM_ENTER();
    if (!num || edge_data || !node_ok("cudaGraphNodeGetDependentNodes", node))
        return set_error(cudaErrorInvalidValue);
    size_t k = 0;
    for (const auto &m : node->g->nodes)
        for (const CUgraphNode_st *d : m->deps)
            if (d == node) {
                if (out && k < *num) out[k] = m.get();
                k++;
            }
    *num = k;
    return cudaSuccess;
}
cudaError_t cudaGraphAddDependencies(cudaGraph_t g, const cudaGraphNode_t *from,
                                     const cudaGraphNode_t *to, const cudaGraphEdgeData *edge_data,
                                     size_t n) {
    SIM_ENTER();
    if (!g || (n && (!from || !to)) || edge_data) return set_error(cudaErrorInvalidValue);
    for (size_t i = 0; i < n; i++) {
        if (!from[i] || !to[i] || from[i]->g != g || to[i]->g != g || !g->has(from[i]) ||
            !g->has(to[i]) || from[i] == to[i]) {
            report("cudaGraphAddDependencies: edge %zu is not between two nodes of this graph", i);
            return set_error(cudaErrorInvalidValue);
        }
        for (const CUgraphNode_st *d : to[i]->deps)
            if (d == from[i]) {
                report("cudaGraphAddDependencies: edge %zu exists already", i);
                return set_error(cudaErrorInvalidValue);
            }
        to[i]->deps.push_back(from[i]);
    }
    return cudaSuccess;
}
cudaError_t cudaGraphDestroyNode(cudaGraphNode_t node) {
    SIM_ENTER();
    if (!node_ok("cudaGraphDestroyNode", node)) return set_error(cudaErrorInvalidValue);
    CUgraph_st *g = node->g;
    for (auto &m : g->nodes) {
        auto &d = m->deps;
        d.erase(std::remove(d.begin(), d.end(), node), d.end());
    }
    for (size_t i = 0; i < g->nodes.size(); i++)
        if (g->nodes[i].get() == node) {
            g->dead.push_back(std::move(g->nodes[i]));
            g->nodes.erase(g->nodes.begin() + (long)i);
            break;
        }
    return cudaSuccess;
}

/* ---- for the sim's self-tests: clear a sticky error after a planted failure ---- */
void sg_sim_reset_errors(void) {
    init();
    R.sticky = R.last = cudaSuccess;
}

} /* extern "C" */
