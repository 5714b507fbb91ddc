/* sim_resources.cpp — what ptxas assembled for each kernel (registers a thread, static shared
 * memory a block), so that the emulation refuses the launches a GPU refuses for resources.
 *
 * The build compiles every kernels/cuda .cu file with nvcc through tools/nvcc_resources.sh, which
 * writes ptxas's report beside each object (OBJECT.ptxas): "Compiling entry function
 * '<mangled>' for 'sm_90'" then "Used R registers, ..., S bytes smem, ...", and its own lines
 * "sg maxntid <mangled> T" for the entries with __launch_bounds__. The emulated kernels
 * are the same functions compiled by g++ (tests/cuda_host.cmake, exported from the executables:
 * -rdynamic), so a launched function pointer's symbol (dladdr) names its ptxas entry. The two
 * compilers spell some parameter types apart (CUtensorMap is the driver's struct there, the
 * emulation's here), so the key is the demangled name without its parameter list:
 * "norm_bwd_apply_kernel<float, 4, false>". Where ptxas assembled a key more than once (several
 * architectures, overloads) the largest figures count (the smallest bound).
 *
 * Without the files (a build without nvcc) nothing is known and nothing is checked; tests that
 * rely on the check ask sg_sim_resources_known() first.
 */
#include <cxxabi.h>
#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "sim_internal.hpp"

#ifndef SG_SIM_PTXAS_DIR
#define SG_SIM_PTXAS_DIR ""
#endif

namespace sg_sim {

namespace {

std::string demangle(const char *m) {
    int st = 0;
    char *d = abi::__cxa_demangle(m, nullptr, nullptr, &st);
    std::string r = st == 0 && d ? d : m;
    free(d);
    return r;
}

/* "void f<int, 4>(float*, int)" -> "f<int, 4>"; "f(float*)" -> "f" */
std::string key_of(const std::string &dem) {
    std::string s = dem;
    if (!s.empty() && s.back() == ')') {
        int depth = 0;
        for (size_t i = s.size(); i-- > 0;) {
            if (s[i] == ')') depth++;
            if (s[i] == '(' && --depth == 0) {
                s.resize(i);
                break;
            }
        }
    }
    if (s.rfind("void ", 0) == 0) s = s.substr(5);
    return s;
}

struct table {
    std::map<std::string, kernel_resources> by_key;
    /* by .ptxas file: while the reports are read, every "sg shared" variable; after, only those
     * found outside the section (the ones a block's start poisons) */
    std::map<std::string, std::vector<shared_var>> file_statics;
    std::map<std::string, std::set<std::string>> statics_seen; /* names, by file (reading) */
    int statics_declared = 0, statics_found = 0; /* "sg shared" names; those dlsym found */
    std::string statics_mismatch;                /* names whose host size differs from the PTX's */
    std::map<const void *, const kernel_resources *> by_func;
    std::map<std::string, int> unmatched; /* launched kernels no report names: their symbols */
    std::string dir;
    int files = 0;
    std::mutex mu;
};

table &T() {
    static table t;
    static std::once_flag once;
    std::call_once(once, [] {
        t.dir = SG_SIM_PTXAS_DIR;
        if (t.dir.empty()) return;
        std::error_code ec;
        for (auto it = std::filesystem::recursive_directory_iterator(t.dir, ec);
             !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
            const std::string p = it->path().string();
            if (p.size() < 6 || p.compare(p.size() - 6, 6, ".ptxas") != 0) continue;
            std::ifstream in(p);
            std::string line, cur;
            t.files++;
            while (std::getline(in, line)) {
                const char *e = strstr(line.c_str(), "Compiling entry function '");
                if (e) {
                    e += strlen("Compiling entry function '");
                    const char *q = strchr(e, '\'');
                    cur = q ? key_of(demangle(std::string(e, q).c_str())) : "";
                    /* "... for 'sm_90'": an architecture it has code for */
                    const char *f = q ? strstr(q, " for '") : nullptr;
                    const char *fe = f ? strchr(f + 6, '\'') : nullptr;
                    if (!cur.empty() && fe) {
                        std::vector<std::string> &a = t.by_key[cur].archs;
                        const std::string arch(f + 6, fe);
                        if (std::find(a.begin(), a.end(), arch) == a.end()) a.push_back(arch);
                    }
                    continue;
                }
                if (line.rfind("sg shared ", 0) == 0) { /* tools/nvcc_resources.sh's line */
                    char name[4096], split[8] = "";
                    unsigned long bytes = 0;
                    if (sscanf(line.c_str() + 10, "%4095s %lu %7s", name, &bytes, split) >= 2) {
                        if (t.statics_seen[p].insert(name).second)
                            t.file_statics[p].push_back(
                                shared_var{name, (size_t)bytes, !strcmp(split, "split"), nullptr});
                    }
                    continue;
                }
                if (line.rfind("sg maxntid ", 0) == 0) { /* tools/nvcc_resources.sh's line */
                    char name[4096];
                    int th = 0;
                    if (sscanf(line.c_str() + 11, "%4095s %d", name, &th) == 2) {
                        kernel_resources &k = t.by_key[key_of(demangle(name))];
                        k.maxntid = k.maxntid ? std::min(k.maxntid, th) : th;
                    }
                    continue;
                }
                const char *u = strstr(line.c_str(), "Used ");
                if (!u || cur.empty()) continue;
                int regs = 0;
                long smem = 0;
                sscanf(u, "Used %d registers", &regs);
                const char *s = strstr(u, " bytes smem");
                if (s) {
                    const char *b = s;
                    while (b > u && (b[-1] >= '0' && b[-1] <= '9')) b--;
                    smem = strtol(b, nullptr, 10);
                }
                kernel_resources &k = t.by_key[cur];
                k.statics = &t.file_statics[p];
                k.name = cur;
                k.regs = std::max(k.regs, regs);
                k.smem_static = std::max(k.smem_static, (int)smem);
                k.known = true;
                cur.clear();
            }
        }
        /* the variables g++ left out of the shared section: a template or inline function's
         * statics are comdat symbols, exported (-rdynamic); a plain kernel's are local ones in
         * the section, which dlsym does not see (and which need nothing more) */
        for (auto &f : t.file_statics)
            for (shared_var &v : f.second) {
                t.statics_declared++;
                void *a = dlsym(RTLD_DEFAULT, v.name.c_str());
                if (!a) continue;
                Dl_info di;
                const ElfW(Sym) *sym = nullptr;
                /* a split array's scalars may not all be in the PTX: at least their sum */
                if (!dladdr1(a, &di, (void **)&sym, RTLD_DL_SYMENT) || !sym ||
                    (v.split ? sym->st_size < v.bytes : sym->st_size != v.bytes)) {
                    t.statics_mismatch += (t.statics_mismatch.empty() ? "" : "; ") +
                                          demangle(v.name.c_str()) + " (PTX " +
                                          std::to_string(v.bytes) + " bytes, host " +
                                          std::to_string(sym ? (size_t)sym->st_size : 0) + ")";
                    continue;
                }
                v.addr = a;
                v.bytes = sym->st_size;
                t.statics_found++;
            }
        /* the rest are in the section (poisoned with it) or disagree on the size (counted
         * above): a block's start walks only the found ones */
        for (auto &f : t.file_statics)
            f.second.erase(std::remove_if(f.second.begin(), f.second.end(),
                                          [](const shared_var &v) { return !v.addr; }),
                           f.second.end());
        t.statics_seen.clear();
    });
    return t;
}

} // namespace

const kernel_resources *resources_of(const void *func) {
    table &t = T();
    if (t.by_key.empty() || !func) return nullptr;
    std::lock_guard<std::mutex> lk(t.mu);
    auto it = t.by_func.find(func);
    if (it != t.by_func.end()) return it->second;
    const kernel_resources *r = nullptr;
    Dl_info di;
    const bool sym = dladdr(func, &di) && di.dli_sname && di.dli_saddr == func;
    const std::string key = sym ? key_of(demangle(di.dli_sname)) : "";
    if (sym) {
        auto k = t.by_key.find(key);
        if (k != t.by_key.end()) r = &k->second;
    }
    if (!r) t.unmatched[sym ? key : "(a function without an exported symbol)"]++;
    t.by_func[func] = r;
    return r;
}

} // namespace sg_sim

/* For the tests (C): how many kernels the ptxas reports name (0: no check), from how many files,
 * and a kernel's figures by its key ("norm_bwd_apply_kernel<float, 4, false>"), -1 if unknown
 * (maxntid 0: no __launch_bounds__). */
extern "C" int sg_sim_resources_known(int *files) {
    sg_sim::table &t = sg_sim::T();
    if (files) *files = t.files;
    return (int)t.by_key.size();
}
/* The kernels launched (or asked about) so far that no report names, joined by "; " into buf:
 * how many. Where the reports were read, every kernel of kernels/cuda should be named. */
extern "C" int sg_sim_resources_unmatched(char *buf, int n) {
    sg_sim::table &t = sg_sim::T();
    std::lock_guard<std::mutex> lk(t.mu);
    std::string all;
    for (auto &u : t.unmatched) all += (all.empty() ? "" : "; ") + u.first;
    if (buf && n > 0) snprintf(buf, (size_t)n, "%s", all.c_str());
    return (int)t.unmatched.size();
}
extern "C" int sg_sim_resources_of(const char *key, int *regs, int *smem_static, int *maxntid) {
    sg_sim::table &t = sg_sim::T();
    auto it = t.by_key.find(key);
    if (it == t.by_key.end()) return -1;
    if (regs) *regs = it->second.regs;
    if (smem_static) *smem_static = it->second.smem_static;
    if (maxntid) *maxntid = it->second.maxntid;
    return 0;
}
/* The __shared__ variables the PTX declares (files' names, counted once a file), how many of
 * them the emulation poisons outside its section (template and inline functions' statics,
 * found with dlsym), and in buf the ones whose host size differs from the PTX's (not poisoned:
 * the two compilers disagree on the variable). */
extern "C" int sg_sim_shared_statics(int *found, char *buf, int n) {
    sg_sim::table &t = sg_sim::T();
    if (found) *found = t.statics_found;
    if (buf && n > 0) snprintf(buf, (size_t)n, "%s", t.statics_mismatch.c_str());
    return t.statics_declared;
}
