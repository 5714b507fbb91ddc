#!/usr/bin/env bash
# test_gpu_check.sh — tools/gpu_check.sh's logic, without a GPU: fake nvidia-smi, cmake, ctest
# and tools on PATH / in the build folder drive each path, and the report and exit status are
# checked. A configure failure must not read as tests passed; a build without CUDA fails; a
# skipped GPU test fails; the deadline ends the run with a report; a killed run leaves a
# report naming the stage it died in; compute-sanitizer missing gives SKIPs; and an all-green
# run (every tool faked to succeed) passes with exit 0.
set -u
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$(dirname "${BASH_SOURCE[0]}")/ok.sh" # pass, fail, ok NAME CONDITION
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fk=$tmp/fake
mkdir -p "$fk/gpu" "$fk/nogpu" "$fk/cmake_fail" "$fk/cmake_slow" "$fk/cmake_ok" "$fk/ctest_skip" \
    "$fk/ctest_ok"
fake() { # fake DIR NAME BODY
    printf '#!/usr/bin/env bash\n%s\n' "$3" >"$fk/$1/$2"
    chmod +x "$fk/$1/$2"
}
fake gpu nvidia-smi 'case "$*" in *--query-gpu=name*--format=csv,noheader*) echo "Fake GPU 80GB" ;;
-L) echo "GPU 0: Fake GPU 80GB (UUID: GPU-0)" ;; *) echo "name, driver"; echo "Fake GPU 80GB, 1" ;; esac'
fake nogpu nvidia-smi 'echo "NVIDIA-SMI has failed: no devices were found" >&2; exit 9'
fake cmake_fail cmake '[ "${1:-}" = --version ] && { echo "cmake version 0"; exit 0; }
echo "CMake Error: fake configure failure" >&2; exit 1'
fake cmake_slow cmake '[ "${1:-}" = --version ] && { echo "cmake version 0"; exit 0; }
sleep 60'
# configure writes a cache with the CUDA backend ON unless -DSG_NO_CUDA=ON; build succeeds
fake cmake_ok cmake 'case "${1:-}" in --version) echo "cmake version 0" ;; --build) echo built ;;
*) b=; cuda=ON; while [ $# -gt 0 ]; do case $1 in -B) b=$2; shift ;; -DSG_NO_CUDA=ON) cuda=OFF ;; esac; shift; done
   mkdir -p "$b"; echo "SG_CUDA_BACKEND:INTERNAL=$cuda" >"$b/CMakeCache.txt"
   printf "#!/bin/sh\nexit 0\n" >"$b/verify"; cp "$b/verify" "$b/train"; chmod +x "$b/verify" "$b/train" ;; esac'
fake ctest_skip ctest 'echo "1/1 Test #1: cuda_ops .........***Skipped   0.01 sec"
echo "100% tests passed, 0 tests failed out of 1"'
fake ctest_ok ctest 'echo "1/1 Test #1: cuda_ops .........   Passed   0.01 sec"
echo "100% tests passed, 0 tests failed out of 1"'

# run NAME PATHDIRS... [-- VAR=VALUE...]: tools/gpu_check.sh with fakes first on PATH
run() {
    local name=$1 p="" envs=()
    shift
    while [ $# -gt 0 ] && [ "$1" != -- ]; do p="$p$fk/$1:" && shift; done
    [ "${1:-}" = -- ] && shift && envs=("$@")
    mkdir -p "$tmp/$name"
    (cd "$tmp" && env PATH="$p$PATH" SG_GPU_DEPS=0 GPU_CHECK_BUILD_DIR="$tmp/$name/build" \
        GPU_CHECK_JOBS=2 SG_COMMIT=abc GPU_CHECK_PREBUILT="$tmp/no-prebuilt" "${envs[@]}" bash "$root/tools/gpu_check.sh" \
        "${mode[@]}" "$tmp/$name/out") >"$tmp/$name/stdout" 2>&1
    rc=$?
    md=$(ls "$tmp/$name"/out/*.md 2>/dev/null | head -n 1)
    md=${md:-/nonexistent}
}
has() { grep -Eq -- "$1" "$md"; }
mode=()

# 1. configure fails: FAIL, the rest NOT RUN, never "tests passed"
run cfgfail gpu cmake_fail
ok "configure failure: exit non-zero" '[ $rc -ne 0 ]'
ok "configure failure: report named after the GPU" '[ "$(basename "$md")" = "$(date -u +%F)-Fake-GPU-80GB-gpu-check.md" ]'
ok "configure failure: overall FAIL" 'has "^\*\*Overall: FAIL\*\*"'
ok "configure failure: configure FAIL with the error" 'has "^\| configure \| FAIL \| exit 1.*CMake Error: fake configure failure"'
ok "configure failure: gpu stage passed (fake GPU)" 'has "^\| gpu \| PASS \|"'
for s in cuda_backend build gpu_tests verify_cuda verify_cuda_own verify_cuda_features train_short verify_cuda_cifar cpu_tests; do
    ok "configure failure: $s NOT RUN" 'has "^\| $s \| NOT RUN \| configure failed \|"'
done
ok "configure failure: nothing reads as passed after it" '! grep -Eq "^\| (build|gpu_tests|cpu_tests|verify_cuda) \| PASS" "$md"'
ok "configure failure: the configure log tail is in the report" 'has "^## configure" && has "fake configure failure"'
ok "configure failure: logs archived" '[ -s "$tmp/cfgfail/out/gpu-check-check-logs.tar.gz" ]'
ok "configure failure: two files in OUTDIR" '[ $(ls "$tmp/cfgfail/out" | wc -l) -eq 2 ]'

# 2. no GPU: the gpu stage fails
run nogpu nogpu cmake_fail
ok "no GPU: exit non-zero, gpu FAIL, named no-gpu" '[ $rc -ne 0 ] && has "^\| gpu \| FAIL \| exit 9" && [[ $md == *-no-gpu-gpu-check.md ]]'

# 3. the CUDA backend OFF fails the check, and blocks the build
run nocuda gpu cmake_ok ctest_ok -- GPU_CHECK_CMAKE_ARGS=-DSG_NO_CUDA=ON
ok "CUDA off: exit non-zero" '[ $rc -ne 0 ]'
ok "CUDA off: cuda_backend FAIL, says OFF" 'has "^\| cuda_backend \| FAIL \| the CUDA backend is OFF"'
ok "CUDA off: build NOT RUN" 'has "^\| build \| NOT RUN \| cuda_backend failed \|"'

# 4. a skipped GPU test is a failure
run skipped gpu cmake_ok ctest_skip
ok "skipped GPU test: gpu_tests FAIL" '[ $rc -ne 0 ] && has "^\| gpu_tests \| FAIL \| a test was skipped or did not run"'

# 5. all green (every tool faked): PASS, exit 0, the stages in order
run green gpu cmake_ok ctest_ok
ok "all green: exit 0, overall PASS" '[ $rc -eq 0 ] && has "^\*\*Overall: PASS\*\*"'
order=$(grep -oE "^\| [a-z_]+ \| PASS" "$md" | awk '{print $2}' | tr '\n' ' ')
ok "all green: stage order ($order)" '[ "$order" = "environment gpu configure cuda_backend build gpu_tests verify_cuda verify_cuda_own verify_cuda_features train_short verify_cuda_cifar cpu_tests " ]'

# 6. the deadline: a hanging configure is cut, the run still reports, quickly
t0=$SECONDS
run deadline gpu cmake_slow -- GPU_CHECK_DEADLINE_S=25
dt=$((SECONDS - t0))
ok "deadline: ended within the deadline (${dt}s)" '[ $dt -lt 40 ]'
ok "deadline: configure FAIL timed out, exit non-zero" '[ $rc -ne 0 ] && has "^\| configure \| FAIL \| timed out after [0-9]+s"'
ok "deadline: later stages NOT RUN" 'has "^\| build \| NOT RUN \|"'

# 7. killed in the middle: the report already names the stage it died in
mkdir -p "$tmp/killed"
(cd "$tmp" && exec setsid env PATH="$fk/gpu:$fk/cmake_slow:$PATH" SG_GPU_DEPS=0 \
    GPU_CHECK_BUILD_DIR="$tmp/killed/build" bash "$root/tools/gpu_check.sh" "$tmp/killed/out") \
    >"$tmp/killed/stdout" 2>&1 &
pid=$!
for _ in $(seq 1 100); do
    grep -qs "configure | RUNNING" "$tmp"/killed/out/*.md && break
    sleep 0.2
done
kill -KILL -- -"$pid" 2>/dev/null
wait "$pid" 2>/dev/null
md=$(ls "$tmp"/killed/out/*.md 2>/dev/null | head -n 1)
md=${md:-/nonexistent}
ok "killed: a report exists" '[ -f "$md" ]'
ok "killed: it says INCOMPLETE and which stage ran" 'has "^\*\*Overall: INCOMPLETE: stage .configure. was running" && has "^\| configure \| RUNNING \|"'
ok "killed: finished stages are in it" 'has "^\| environment \| PASS \|" && has "^\| gpu \| PASS \|"'

# 8. --sanitizers without compute-sanitizer: clear SKIPs, no build, exit 0
mode=(--sanitizers)
run nosan gpu cmake_fail -- GPU_CHECK_SANITIZER=/nonexistent/compute-sanitizer
ok "no sanitizer: report name" '[[ $md == *-gpu-check-sanitizers.md ]]'
for t in memcheck racecheck initcheck synccheck step_memcheck; do
    ok "no sanitizer: sanitizer_$t SKIP" 'has "^\| sanitizer_$t \| SKIP \| compute-sanitizer not found"'
done
ok "no sanitizer: nothing was configured, exit 0" '! has "^\| configure" && [ $rc -eq 0 ]'
# with a (fake) sanitizer: configure, build and the sanitizer stages run
fake gpu compute-sanitizer 'echo "========= ERROR SUMMARY: 0 errors"'
run san gpu cmake_ok
ok "fake sanitizer: the sanitizer stages PASS" '[ $rc -eq 0 ] && has "^\| sanitizer_racecheck \| PASS" && has "^\| sanitizer_step_memcheck \| PASS"'
fake gpu compute-sanitizer 'echo "========= Invalid __global__ write of size 4"; exit 1'
run san_err gpu cmake_ok
ok "sanitizer error: FAIL" '[ $rc -ne 0 ] && has "^\| sanitizer_memcheck \| FAIL \| exit 1"'

# 10. prebuilt binaries (tools/gpu_prebuild.sh's .prebuilt): used where the stamp matches, every
# target is there, the libraries resolve and plan --help runs; else the build runs, and the
# report says why
mode=()
mkdir -p "$fk/cmake_count" "$fk/ldd_ok" "$fk/ldd_miss"
fake cmake_count cmake 'case "${1:-}" in --version) echo "cmake version 0" ;;
--build) echo "$2" >>'"$tmp"'/builds.log; printf "#!/bin/sh\nexit 0\n" >"$2/verify"; cp "$2/verify" "$2/train"; chmod +x "$2/verify" "$2/train" ;;
*) b=; while [ $# -gt 0 ]; do case $1 in -B) b=$2; shift ;; esac; shift; done
   mkdir -p "$b"; echo "SG_CUDA_BACKEND:INTERNAL=ON" >"$b/CMakeCache.txt"
   printf "#!/bin/sh\nexit 0\n" >"$b/verify"; cp "$b/verify" "$b/train"; chmod +x "$b/verify" "$b/train" ;; esac'
fake ldd_ok ldd 'echo "	libfake.so.1 => /lib/libfake.so.1 (0x0)"'
fake ldd_miss ldd 'echo "	libcudnn.so.9 => not found"'
stamp=$(SG_GPU_DEPS=0 bash -c 'source "$0/tools/gpu_env.sh" >/dev/null 2>&1; sg_gpu_source_stamp "$0"' "$root")
# mkpb NAME [STAMP]: a prebuilt pack whose binaries are scripts that succeed
mkpb() {
    local d=$tmp/pb_$1 f
    mkdir -p "$d/bin/tests"
    for f in plan verify train tests/test_cuda_ops tests/test_cuda_step; do
        printf '#!/bin/sh\necho "prebuilt %s"\nexit 0\n' "$f" >"$d/bin/$f" && chmod +x "$d/bin/$f"
        echo "./$f" >>"$d/manifest"
    done
    echo "${2:-$stamp}" >"$d/stamp"
    pbd=$d
}
# pack: bin/ into bin.tar.xz, as tools/gpu_prebuild.sh leaves it
pack() { tar -C "$pbd/bin" -cf - . | xz -1 >"$pbd/bin.tar.xz" && rm -rf "$pbd/bin"; }
targets="test_cuda_ops plan verify train"
built() { grep -qsx "$tmp/$1/build" "$tmp/builds.log"; }
mkpb good && pack
run pb_good gpu cmake_count ctest_ok -- GPU_CHECK_PREBUILT="$pbd" \
    GPU_CHECK_TARGETS="$targets" GPU_CHECK_LDD="$fk/ldd_ok/ldd"
ok "prebuilt: used, exit 0" '[ $rc -eq 0 ] && has "^\| prebuilt \| PASS \| 5 binaries from .prebuilt, stamp matched"'
ok "prebuilt: build PASS without compiling" 'has "^\| build \| PASS \| the prebuilt binaries" && ! built pb_good'
ok "prebuilt: its binaries are in the build folder" 'grep -q "prebuilt tests/test_cuda_step" "$tmp/pb_good/build/tests/test_cuda_step"'
ok "prebuilt: its stamp beside them, for bench.sh" '[ "$(cat "$tmp/pb_good/build/prebuilt.stamp")" = "$stamp" ]'
order=$(grep -oE "^\| [a-z_]+ \| PASS" "$md" | awk '{print $2}' | tr '\n' ' ')
ok "prebuilt: stage order ($order)" '[ "$order" = "environment gpu configure cuda_backend prebuilt build gpu_tests verify_cuda verify_cuda_own verify_cuda_features train_short verify_cuda_cifar cpu_tests " ]'
mkpb stale "sources 0000; other" && pack
run pb_stale gpu cmake_count ctest_ok -- GPU_CHECK_PREBUILT="$pbd" GPU_CHECK_TARGETS="$targets" \
    GPU_CHECK_LDD="$fk/ldd_ok/ldd"
ok "prebuilt, stamp differs: NOT USED, built, exit 0" '[ $rc -eq 0 ] && has "^\| prebuilt \| NOT USED \| its stamp is .sources 0000; other., this tree.s .sources" && built pb_stale && has "^\| build \| PASS \| [0-9]+s \|"'
mkpb miss && pack
run pb_miss gpu cmake_count ctest_ok -- GPU_CHECK_PREBUILT="$pbd" GPU_CHECK_TARGETS="$targets" \
    GPU_CHECK_LDD="$fk/ldd_miss/ldd"
ok "prebuilt, a library not found: NOT USED, names it, built" '[ $rc -eq 0 ] && has "^\| prebuilt \| NOT USED \| ./plan: libcudnn.so.9 => not found: building here" && built pb_miss'
ok "prebuilt, a library not found: its copies removed" '[ ! -e "$tmp/pb_miss/build/tests/test_cuda_ops" ] && ! grep -qs prebuilt "$tmp/pb_miss/build/verify" && [ ! -e "$tmp/pb_miss/build/prebuilt.stamp" ]'
mkpb notarget && pack
run pb_notarget gpu cmake_count ctest_ok -- GPU_CHECK_PREBUILT="$pbd" \
    GPU_CHECK_TARGETS="$targets bench" GPU_CHECK_LDD="$fk/ldd_ok/ldd"
ok "prebuilt without a target's binary: NOT USED, built" 'has "^\| prebuilt \| NOT USED \| it has no bench" && built pb_notarget'
mkpb noplan
printf '#!/bin/sh\necho "error while loading shared libraries: libz.so.1" >&2\nexit 127\n' >"$pbd/bin/plan"
pack
run pb_noplan gpu cmake_count ctest_ok -- GPU_CHECK_PREBUILT="$pbd" GPU_CHECK_TARGETS="$targets" \
    GPU_CHECK_LDD="$fk/ldd_ok/ldd"
ok "prebuilt whose plan does not run: NOT USED, says why, built" 'has "^\| prebuilt \| NOT USED \| plan --help failed: error while loading shared libraries" && built pb_noplan'
# no xz on the machine (a fake that fails): Python's tarfile unpacks it
mkdir -p "$fk/noxz"
fake noxz xz 'exit 1'
mkpb noxz && pack
run pb_noxz gpu cmake_count ctest_ok noxz -- GPU_CHECK_PREBUILT="$pbd" GPU_CHECK_TARGETS="$targets" \
    GPU_CHECK_LDD="$fk/ldd_ok/ldd"
ok "prebuilt without xz: unpacked by Python, used" '[ $rc -eq 0 ] && has "^\| prebuilt \| PASS \|" && ! built pb_noxz'
mkpb all && pack
run pb_all gpu cmake_count ctest_ok -- GPU_CHECK_PREBUILT="$pbd" GPU_CHECK_LDD="$fk/ldd_ok/ldd"
ok "prebuilt, every target wanted: NOT USED, built" 'has "^\| prebuilt \| NOT USED \| this check builds every target" && built pb_all'
mode=(--build-only)
run pb_buildonly gpu cmake_count ctest_ok -- GPU_CHECK_PREBUILT="$pbd" GPU_CHECK_TARGETS="$targets" \
    GPU_CHECK_LDD="$fk/ldd_ok/ldd"
ok "prebuilt, --build-only: ignored, built" '! has "^\| prebuilt" && built pb_buildonly'
mode=()

# 11. the stamp's file set (sg_gpu_source_stamp): every tracked file is hashed, or is of a kind
# no binary is built from; a new kind of source would otherwise let a stale pack pass as current
if git -C "$root" rev-parse --git-dir >/dev/null 2>&1; then
    hashed=$(SG_GPU_DEPS=0 bash -c 'source "$0/tools/gpu_env.sh" >/dev/null 2>&1; sg_gpu_source_files "$0"' \
        "$root" | sed 's|^\./||')
    unhashed=$(comm -23 <(git -C "$root" ls-files | LC_ALL=C sort) <(echo "$hashed") |
        grep -vE '\.(md|sh|py|json|jsonl|log|png|sgck|dict)$|^tests/fuzz/([a-z_]+_)?corpus/' |
        grep -vxE '\.gitignore|\.clang-format|\.ci/run' | tr '\n' ' ')
    ok "every tracked file is in the stamp or builds nothing (${unhashed:-none left})" '[ -z "$unhashed" ]'
    ok "the stamp hashes the kernels and the CMake files" \
        'echo "$hashed" | grep -qx "kernels/cuda/conv_wgmma.cu" && echo "$hashed" | grep -qx "CMakeLists.txt"'
fi

# 9. bad option
bash "$root/tools/gpu_check.sh" --frobnicate >/dev/null 2>&1
ok "unknown option: exit 2" '[ $? -eq 2 ]'

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
