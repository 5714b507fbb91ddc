#!/usr/bin/env bash
# gpu_check.sh — the GPU check, for one call of a lent GPU machine (H100/H200; a call is at
# most 10 minutes, the machine goes back 30 s after it and the next call starts bare).
#
#   tools/gpu_check.sh [OUTDIR]                 first call: the decisive stages
#   tools/gpu_check.sh --sanitizers [OUTDIR]    second call: compute-sanitizer over the op tests
#   tools/gpu_check.sh --build-only [OUTDIR]    configure + build only (the gpu_build_deps test)
#
# OUTDIR defaults to $OUT, else ./gpu_check_out. Stages, fast and decisive first:
#   check:      environment, gpu, configure, cuda_backend, cudnn (which cuDNN is built in;
#               SKIP without one), [prebuilt,] build, gpu_tests, verify_cuda (unet_tiny, the default conv
#               engine: cuDNN where built), verify_cuda_own (the own conv kernels),
#               verify_cuda_features (unet_tiny with every optional training feature on),
#               train_short (unet_cifar bf16 on the replayed graph), verify_cuda_cifar, cpu_tests
#   sanitizers: environment, gpu, compute_sanitizer, configure, cuda_backend, build,
#               memcheck / racecheck / initcheck / synccheck over test_cuda_ops, memcheck over
#               test_cuda_step (each a SKIP, with the reason, where compute-sanitizer is missing)
#   build-only: environment, configure, cuda_backend, build
# The build goes through tools/gpu_env.sh (nvcc, the carried .deps libraries, RPATH), the same
# for every mode and for tools/bench.sh. Where a carried .prebuilt (tools/gpu_prebuild.sh, run
# on a machine with nvcc before the call) matches this tree (its source stamp), holds every
# target, and its binaries' libraries resolve here (ldd) and `plan --help` runs, the check and
# sanitizer modes use its binaries instead of compiling (stage `prebuilt` says so, or why
# not, then builds; --build-only never uses them). A failed environment, configure or build, or a build
# without the CUDA backend, fails the check and the stages that need it are NOT RUN (a
# failure too); a GPU test that skips (no GPU seen) fails; ctest runs with --no-tests=error.
# An overall deadline (GPU_CHECK_DEADLINE_S, default 540 s) caps every stage, so the call
# always ends with a report; a stage the deadline no longer fits is NOT RUN. The report is
# rewritten before and after every stage: a run killed in the middle still leaves it, naming
# the stage it died in. Exit status 0 only when no stage failed or did not run.
#
# OUTDIR receives two files per mode (the device tool returns at most 8): the report
# <date>-<gpu>-gpu-check[-sanitizers|-build].md, which holds the tail of every stage's log,
# and the full logs as gpu-check-<mode>-logs.tar.gz. Commit the report under bench/results/.
# Environment: GPU_CHECK_DEADLINE_S, GPU_CHECK_JOBS (build jobs, default nproc),
# GPU_CHECK_BUILD_DIR (default build-gpu), GPU_CHECK_CMAKE_ARGS (more configure arguments),
# GPU_CHECK_SKIP (regex of stages to skip), GPU_CHECK_TARGETS (build only these targets, e.g.
# with GPU_CHECK_SKIP=cpu_tests only the GPU tests' and the tools' binaries; tools/gpu_call.sh),
# GPU_CHECK_TEST_JOBS (GPU tests run at once, default 1), GPU_CHECK_SANITIZER (the
# compute-sanitizer to use; default: PATH, then the CUDA folders), GPU_CHECK_PREBUILT (the
# prebuilt pack, default <repo>/.prebuilt), GPU_CHECK_LDD (default ldd), SG_COMMIT (the commit,
# outside a git checkout),
# and tools/gpu_env.sh's SG_GPU_DEPS, SG_DEPS_DIR, SG_CUDA_ARCH.
set -u
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 1

mode=check
case ${1:-} in
--sanitizers) mode=sanitizers && shift ;;
--build-only) mode=build && shift ;;
-h | --help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//' && exit 0 ;;
-*) echo "gpu_check: unknown option '$1' (--sanitizers, --build-only, --help)" >&2 && exit 2 ;;
esac
out=${1:-${OUT:-$root/gpu_check_out}}
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
deadline=${GPU_CHECK_DEADLINE_S:-540}
jobs=${GPU_CHECK_JOBS:-$(nproc)}
skip=${GPU_CHECK_SKIP:-^$}
bdir=${GPU_CHECK_BUILD_DIR:-build-gpu}
read -r -a extra_cmake <<<"${GPU_CHECK_CMAKE_ARGS:-}"
commit=${SG_COMMIT:-$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)}
day=$(date -u +%F)
gpu=$(timeout 20 nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1 |
    tr ' ' '-' | tr -cd 'A-Za-z0-9._-')
gpu=${gpu:-no-gpu}
suffix=("" "-sanitizers" "-build")
case $mode in check) sfx=${suffix[0]} ;; sanitizers) sfx=${suffix[1]} ;; build) sfx=${suffix[2]} ;; esac
report="$out/$day-$gpu-gpu-check$sfx.md"
logdir=$(mktemp -d "${TMPDIR:-/tmp}/gpu_check_logs.XXXXXX") || exit 1
tarball="$out/gpu-check-$mode-logs.tar.gz"

rows=()    # one markdown table row per stage
failed=0   # any FAIL or NOT RUN
blocked="" # why the later stages cannot run (configure failed, ...)
running="" # the stage in progress (for a report written before a kill)

left() { echo $((deadline - SECONDS)); }

write_report() {
    local verdict
    if [ -n "$running" ]; then
        verdict="INCOMPLETE: stage \`$running\` was running when this report was written (killed?)"
    elif [ $failed -ne 0 ]; then
        verdict=FAIL
    else
        verdict=PASS
    fi
    {
        echo "# GPU check ($mode), $day, $gpu"
        echo
        echo "Command: \`tools/gpu_check.sh${sfx:+ --${mode/build/build-only}}\` at commit $commit;" \
            "deadline ${deadline}s, ${SECONDS}s used."
        echo
        echo "**Overall: $verdict**"
        echo
        echo "| stage | result | detail |"
        echo "|---|---|---|"
        printf '%s\n' "${rows[@]}"
        [ -n "$running" ] && echo "| $running | RUNNING | started, not finished |"
        echo
        echo '## Environment'
        echo
        echo '```'
        cat "$logdir/machine.txt" 2>/dev/null
        printf '%s' "${SG_GPU_ENV_LOG:-}"
        echo '```'
        local f
        for f in "$logdir"/*.log; do
            [ -e "$f" ] || continue
            echo
            echo "## $(basename "$f" .log) (last 40 lines)"
            echo
            echo '```'
            tail -n 40 "$f"
            echo '```'
        done
    } >"$report.tmp" && mv "$report.tmp" "$report"
    tar -czf "$tarball" -C "$logdir" . 2>/dev/null
}

# row NAME RESULT DETAIL: record a result; FAIL and NOT RUN fail the check
row() {
    rows+=("| $1 | $2 | $3 |")
    case $2 in FAIL* | NOT\ RUN*) failed=1 ;; esac
    echo "== $1: $2${3:+ ($3)}"
    write_report
}

# stage NAME LIMIT_S COMMAND...: run one stage under the stage limit and the deadline. With
# BLOCKS set (any value), a failure stops the stages after it. With POST set, that function
# runs on the log after a zero exit and can turn the result into a failure (it prints why).
stage() {
    local name=$1 limit=$2
    shift 2
    local log="$logdir/$name.log"
    if [[ $name =~ $skip ]]; then row "$name" SKIP "GPU_CHECK_SKIP"; return 0; fi
    if [ -n "$blocked" ]; then row "$name" "NOT RUN" "$blocked"; return 1; fi
    local rest=$(($(left) - 5))
    if [ $rest -lt 10 ]; then
        row "$name" "NOT RUN" "deadline: ${rest}s of ${deadline}s left"
        [ -n "${BLOCKS:-}" ] && blocked="$name did not run"
        return 1
    fi
    [ "$limit" -gt "$rest" ] && limit=$rest
    running=$name
    write_report
    echo "== $name (limit ${limit}s)"
    local t0=$SECONDS rc res detail why
    timeout -k 5 "$limit" "$@" >"$log" 2>&1 </dev/null
    rc=$?
    running=""
    detail="$((SECONDS - t0))s"
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        res="FAIL"
        detail="timed out after ${limit}s"
    elif [ $rc -eq 77 ]; then
        res="FAIL"
        detail="exit 77: skipped (no GPU seen), $detail"
    elif [ $rc -ne 0 ]; then
        res="FAIL"
        why=$(grep -m1 -E 'error|Error|FAIL|failed' "$log" | cut -c1-160)
        detail="exit $rc, $detail${why:+: $why}"
    elif [ -n "${POST:-}" ] && ! why=$("$POST" "$log"); then
        res="FAIL"
        detail="$why, $detail"
    else
        res="PASS"
    fi
    [ "$res" != PASS ] && [ -n "${BLOCKS:-}" ] && blocked="$name failed"
    row "$name" "$res" "$detail"
    [ "$res" = PASS ]
}

# POST checks
no_skipped_tests() { # ctest ran, and no test was skipped or not run
    if grep -qE '\*\*\*Skipped|Not Run|did not run' "$1"; then
        echo "a test was skipped or did not run"
        return 1
    fi
    grep -qE '[0-9]+% tests passed' "$1" || { echo "ctest ran no test"; return 1; }
}
cuda_in_cache() {
    if ! grep -q '^SG_CUDA_BACKEND:INTERNAL=ON' "$bdir/CMakeCache.txt" 2>/dev/null; then
        echo "the CUDA backend is OFF in $bdir/CMakeCache.txt (nvcc not found?)"
        return 1
    fi
}

# ---- environment: the machine, then tools/gpu_env.sh in this shell
{
    echo "date: $(date -u '+%F %T') UTC"
    echo "commit: $commit"
    echo "host: $(uname -srm), $(nproc) CPUs"
    timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm \
        --format=csv 2>&1 || echo "nvidia-smi: not available"
} >"$logdir/machine.txt"
write_report
if ! source "$root/tools/gpu_env.sh" 2>"$logdir/environment.log"; then
    row environment FAIL "tools/gpu_env.sh failed: $(tail -n 1 "$logdir/environment.log" | cut -c1-200)"
    blocked="the environment failed"
else
    {
        echo "nvcc: $( (nvcc --version 2>&1 || echo none) | tail -n 1)"
        echo "cmake: $(cmake --version 2>&1 | head -n 1)"
        [ $mode = build ] || echo "$(timeout 60 python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda)' 2>&1 | tail -n 1)"
    } >>"$logdir/machine.txt"
    libs="system libraries"
    [ -n "${SG_GPU_DEPS_ROOT:-}" ] && libs="libraries from .deps/root ($SG_GPU_DEPS_ROOT)"
    row environment PASS "$libs"
fi

if [ $mode != build ]; then
    stage gpu 30 nvidia-smi -L
fi

sanitizer=""
if [ $mode = sanitizers ]; then
    sanitizer=${GPU_CHECK_SANITIZER:-$(command -v compute-sanitizer 2>/dev/null)}
    if [ -z "${GPU_CHECK_SANITIZER:-}" ]; then
        for d in "$(dirname "${CUDACXX:-/none/x}")" /usr/local/cuda/bin \
            /usr/local/cuda/compute-sanitizer /opt/nvidia/compute-sanitizer; do
            [ -z "$sanitizer" ] && [ -x "$d/compute-sanitizer" ] && sanitizer=$d/compute-sanitizer
        done
    fi
    [ -x "$sanitizer" ] || sanitizer=""
    if [ -z "$sanitizer" ]; then
        for t in memcheck racecheck initcheck synccheck step_memcheck; do
            row "sanitizer_$t" SKIP "compute-sanitizer not found (PATH, the CUDA bin folder)"
        done
        echo "report: $report"
        rm -rf "$logdir"
        exit $failed
    fi
    row compute_sanitizer PASS "$sanitizer"
fi

# the configure command of sg_gpu_configure (a function, which `timeout` cannot run)
BLOCKS=1 stage configure 240 cmake -S "$root" -B "$bdir" "${SG_GPU_CMAKE_ARGS[@]}" \
    -DCMAKE_EXPORT_COMPILE_COMMANDS=ON "${extra_cmake[@]}"
BLOCKS=1 POST=cuda_in_cache stage cuda_backend 10 true
# which cuDNN the build links (CMake's SG_CUDNN_USED: "ON <library>" or "OFF ..."); without
# one every conv runs on the own engine and the cuDNN cases of the op test are not built
cudnn_used=$(grep '^SG_CUDNN_USED:INTERNAL=' "$bdir/CMakeCache.txt" 2>/dev/null | cut -d= -f2-)
case "$cudnn_used" in
ON*) row cudnn PASS "built with ${cudnn_used#ON }" ;;
*) row cudnn SKIP "no cuDNN in the build: convs on the own engine only (pass -DSG_CUDNN_ROOT=DIR in GPU_CHECK_CMAKE_ARGS)" ;;
esac
targets=()
[ $mode = sanitizers ] && targets=(--target test_cuda_ops test_cuda_step)
if [ $mode = check ] && [ -n "${GPU_CHECK_TARGETS:-}" ]; then
    read -r -a targets <<<"$GPU_CHECK_TARGETS"
    targets=(--target "${targets[@]}")
fi
# Prebuilt binaries (tools/gpu_prebuild.sh, carried as .prebuilt): copied into the build
# folder instead of compiling, where they fit this tree and this machine; else the build.
# Prints why on stdout; returns non-zero (with nothing left in the build folder) when unused.
use_prebuilt() {
    local want have t f n=0 miss files=()
    [ ${#extra_cmake[@]} -eq 0 ] || { echo "GPU_CHECK_CMAKE_ARGS asks for another configure"; return 1; }
    [ ${#targets[@]} -gt 0 ] || { echo "this check builds every target (GPU_CHECK_TARGETS unset)"; return 1; }
    [ -f "$pb/bin.tar.xz" ] && [ -f "$pb/manifest" ] || { echo "it has no bin.tar.xz or manifest"; return 1; }
    want=$(cat "$pb/stamp" 2>/dev/null)
    have=$(sg_gpu_source_stamp "$root")
    [ "$want" = "$have" ] || { echo "its stamp is '$want', this tree's '$have'"; return 1; }
    mapfile -t files <"$pb/manifest"
    for t in "${targets[@]}"; do
        [ "$t" = --target ] && continue
        printf '%s\n' "${files[@]}" | grep -q "/$t\$" || { echo "it has no $t"; return 1; }
    done
    mkdir -p "$bdir"
    # tar with xz where it works, else Python's tarfile (the GPU image's python3 is certain)
    if ! tar -xJf "$pb/bin.tar.xz" -C "$bdir" 2>/dev/null &&
        ! python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2])' \
            "$pb/bin.tar.xz" "$bdir" 2>/dev/null; then
        echo "unpacking bin.tar.xz failed"
        unuse_prebuilt "${files[@]}"
        return 1
    fi
    for f in "${files[@]}"; do
        [ -x "$bdir/$f" ] || { echo "$f is not in bin.tar.xz"; unuse_prebuilt "${files[@]}"; return 1; }
        n=$((n + 1))
    done
    if command -v "$ldd" >/dev/null 2>&1; then
        for f in "${files[@]}"; do
            miss=$("$ldd" "$bdir/$f" 2>&1 | grep 'not found' | head -n 1 |
                sed 's/^[[:space:]]*//; s/[[:space:]][[:space:]]*/ /g')
            [ -z "$miss" ] || { echo "$f: $miss"; unuse_prebuilt "${files[@]}"; return 1; }
        done
    fi
    if ! timeout 30 "$bdir/plan" --help >/dev/null 2>&1; then
        echo "plan --help failed: $(timeout 30 "$bdir/plan" --help 2>&1 | head -n 1 | cut -c1-160)"
        unuse_prebuilt "${files[@]}"
        return 1
    fi
    # the stamp stays beside them: tools/bench.sh takes the folder's bench without a build (which
    # would compile everything again, since the folder has no object files) where it matches
    echo "$want" >"$bdir/prebuilt.stamp"
    echo "$n binaries from .prebuilt, stamp matched ($want), libraries resolved, plan --help ran"
}
unuse_prebuilt() {
    local f
    for f in "$@"; do rm -f "$bdir/$f"; done
    rm -f "$bdir/prebuilt.stamp"
}
pb=${GPU_CHECK_PREBUILT:-$root/.prebuilt}
ldd=${GPU_CHECK_LDD:-ldd}
prebuilt=""
if [ $mode != build ] && [ -d "$pb" ] && [ -z "$blocked" ]; then
    if why=$(use_prebuilt); then
        prebuilt=1
        row prebuilt PASS "$why"
    else
        row prebuilt "NOT USED" "$why: building here"
    fi
fi
if [ -n "$prebuilt" ]; then
    row build PASS "the prebuilt binaries (stage prebuilt), 0s"
else
    rm -f "$bdir/prebuilt.stamp" # compiled here: bench.sh's own build is incremental
    BLOCKS=1 stage build 420 cmake --build "$bdir" -j"$jobs" "${targets[@]}"
fi

if [ $mode = check ]; then
    tmp=$(mktemp -d)
    POST=no_skipped_tests stage gpu_tests 300 ctest --test-dir "$bdir" -L gpu --no-tests=error \
        --output-on-failure -j"${GPU_CHECK_TEST_JOBS:-1}"
    # the default conv engine (auto: cuDNN where built), then the own kernels alone
    stage verify_cuda 120 "$bdir/verify" --backend cuda --model unet_tiny --steps 8
    stage verify_cuda_own 120 "$bdir/verify" --backend cuda --conv-engine own --model unet_tiny \
        --steps 8
    # every optional training feature at once: class conditioning (its label dropout's draws),
    # v prediction at zero terminal SNR, min-SNR weighting, offset noise, input perturbation,
    # two micro-batches
    stage verify_cuda_features 120 "$bdir/verify" --backend cuda --model unet_tiny --steps 8 \
        --classes 6 --prediction v --zero-snr 1 --snr-gamma 5 --noise-offset 0.1 \
        --input-perturbation 0.1 --grad-accum 2
    stage train_short 180 "$bdir/train" --model unet_cifar --data synthetic:2048:32x32x3 \
        --backend cuda --precision bf16 --steps 30 --log-every 10 --ckpt-every 0 --warmup 10 \
        --samples 4 --ddim-steps 10 --out "$tmp/cifar"
    stage verify_cuda_cifar 180 "$bdir/verify" --backend cuda --model unet_cifar --batch 8 \
        --precision bf16 --steps 4 --data synthetic:256:32x32x3
    POST=no_skipped_tests stage cpu_tests 300 ctest --test-dir "$bdir" -LE 'gpu|cuda_host|slow' \
        -E 'torch_parity_cifar|torch_ref_selftest|gpu_build_deps' --no-tests=error \
        --output-on-failure -j"$jobs"
    rm -rf "$tmp"
elif [ $mode = sanitizers ]; then
    for t in memcheck racecheck initcheck synccheck; do
        stage "sanitizer_$t" 150 "$sanitizer" --tool "$t" --error-exitcode 1 \
            "$bdir/tests/test_cuda_ops"
    done
    stage sanitizer_step_memcheck 150 "$sanitizer" --tool memcheck --error-exitcode 1 \
        "$bdir/tests/test_cuda_step"
fi

write_report
echo "report: $report (logs: $tarball)"
rm -rf "$logdir"
exit $failed
