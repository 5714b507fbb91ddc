#!/usr/bin/env bash
# gpu_profile.sh — where one training step's GPU time goes, kernel by kernel (issue 17): Nsight
# Compute over the first step of unet_cifar batch 128 bf16 (that eager step launches every
# replay's kernels, in the same order), per configuration, each summarised by
# tools/ncu_summary.py: per kernel family the time, DRAM bytes, achieved GB/s and % of the
# DRAM and SM peaks, and the longest kernels. Meant for a second device call while the machine
# is still warm after tools/gpu_call.sh (it reuses build-gpu/; on a fresh machine it builds
# bench first).
#
#   tools/gpu_profile.sh [OUTDIR]     # OUTDIR defaults to $OUT; device tool: carry [".deps"]
#
# Configurations (GPU_PROFILE_CONFIGS: a regex of their names; default all, in this order):
#   default       the default step (unfused; cuDNN, 1x1 convs on cuBLASLt)
#   norm_onepass  the same with its normalisations in one pass, forward and backward
#                 (SG_NORM_ONEPASS=1: the same bits)
#   wgmma_unfused own convolutions on the wgmma kernels, unfused, prologue-free halo forward
#                 (SG_CONV_TC=wgmma SG_TC_HALO=all --conv-engine own --fuse 0)
#   wgmma_fused   the same fused (GroupNorm + SiLU in the conv's operand loads)
#   tuned         with an engine table, where GPU_PROFILE_TABLE names one (gpu_call.sh leaves
#                 none behind: it is in its tarball)
# Each configuration writes OUTDIR/ncu-NAME.csv (raw) and ncu-NAME.md (the summary), and a line
# in OUTDIR/profile.log; without ncu the script says SKIP and exits 0; a configuration whose
# ncu run or summary fails makes the exit status 1 (the others still run). ncu runs with
# --cache-control none and --clock-control none: each kernel alone (serialised) but with the
# caches and clocks as a replay has them. Environment: GPU_PROFILE_S (the whole script's
# deadline, default 540 s), GPU_PROFILE_CONFIGS, GPU_PROFILE_TABLE, GPU_PROFILE_ARGS (extra
# bench flags for every configuration), GPU_PROFILE_KERNELS (ncu's --kernel-name: only the
# kernels it names, e.g. regex:^norm_), GPU_PROFILE_LAUNCHES (ncu's --launch-count: at most
# that many kernels a configuration), GPU_PROFILE_FILTER (ncu's --filter-mode: per-launch-config
# counts the launches per kernel and launch configuration, so GPU_PROFILE_LAUNCHES=1 samples
# each distinct launch once; gpu_call.sh's short profile sets all three), GPU_PROFILE_BIN
# (the bench binary; default build-gpu/bench, built here when missing), NCU (the ncu binary;
# default: PATH, then /usr/local/cuda*/bin and /opt/nvidia).
set -u
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 1
case ${1:-} in -h | --help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//' && exit 0 ;; esac
out=${1:-${OUT:-$root/gpu_profile_out}}
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
total=${GPU_PROFILE_S:-540}
exec > >(tee "$out/profile.log") 2>&1
# tee runs beside the script (a process substitution) and may still be writing the log's last
# lines when the script exits: the EXIT trap closes the script's output and waits for it, so
# whoever reads profile.log at once (the device tool collecting $OUT, a test) reads all of it
sg_tee=$!
trap 'exec >&- 2>&-; wait "$sg_tee"' EXIT

bdir=$root/build-gpu
bin=${GPU_PROFILE_BIN:-$bdir/bench}
if [ ! -x "$bin" ]; then
    echo "gpu_profile: no $bin: building it ($((total - SECONDS))s left)"
    # shellcheck source=tools/gpu_env.sh
    source tools/gpu_env.sh || exit 1
    bin=$bdir/bench
    sg_gpu_configure "$root" "$bdir" >"$out/build.log" 2>&1 &&
        timeout -k 5 $((total - SECONDS - 60)) cmake --build "$bdir" -j"$(nproc)" --target bench \
            >>"$out/build.log" 2>&1
    [ -x "$bin" ] || { echo "gpu_profile: FAIL: bench did not build (build.log)" && exit 1; }
fi
ncu=${NCU-$(command -v ncu 2>/dev/null)}
if [ -z "${NCU+set}" ] && [ -z "$ncu" ]; then
    for c in /usr/local/cuda/bin/ncu /usr/local/cuda-*/bin/ncu /opt/nvidia/nsight-compute/*/ncu; do
        [ -x "$c" ] && ncu=$c && break
    done
fi
if [ -z "$ncu" ] || [ ! -x "$ncu" ]; then
    echo "gpu_profile: SKIP: no ncu (${ncu:-not on PATH, under /usr/local/cuda*/bin or /opt/nvidia})"
    exit 0
fi
failed=0
echo "gpu_profile: $("$ncu" --version 2>&1 | tail -n 1); commit ${SG_COMMIT:-$(git rev-parse HEAD 2>/dev/null)}"

# profile NAME [VAR=VALUE...] -- [bench flags]
profile() {
    local name=$1 envs=()
    shift
    while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1") && shift; done
    shift
    [[ $name =~ ${GPU_PROFILE_CONFIGS:-.} ]] || return 0
    local rest=$((total - SECONDS - 10))
    if [ $rest -lt 60 ]; then
        echo "gpu_profile: $name: SKIP (${rest}s left)"
        return 0
    fi
    local only=()
    [ -n "${GPU_PROFILE_KERNELS:-}" ] && only+=(--kernel-name "$GPU_PROFILE_KERNELS")
    [ -n "${GPU_PROFILE_LAUNCHES:-}" ] && only+=(--launch-count "$GPU_PROFILE_LAUNCHES")
    [ -n "${GPU_PROFILE_FILTER:-}" ] && only+=(--filter-mode "$GPU_PROFILE_FILTER")
    # shellcheck disable=SC2086 # GPU_PROFILE_ARGS: flags, split on purpose
    env "${envs[@]}" SG_PROFILE_FIRST_STEP=1 timeout -k 5 "$rest" "$ncu" --profile-from-start off \
        --target-processes all --cache-control none --clock-control none "${only[@]}" \
        --section SpeedOfLight --section LaunchStats \
        --metrics dram__bytes_read.sum,dram__bytes_write.sum --csv --page raw \
        --log-file "$out/ncu-$name.csv" "$bin" --backend cuda --model unet_cifar --batch 128 \
        --precision bf16 --warmup 1 --iters 1 --no-breakdown ${GPU_PROFILE_ARGS:-} "$@" \
        >"$out/ncu-$name.log" 2>&1
    local rc=$?
    if "${PYTHON:-python3}" tools/ncu_summary.py "$out/ncu-$name.csv" \
        --title "ncu: unet_cifar b128 bf16, $name (${envs[*]} $*)${only[*]:+; a sample: ${only[*]}}" \
        >"$out/ncu-$name.md" \
        2>"$out/ncu-$name.err" && [ $rc -eq 0 ]; then
        echo "gpu_profile: $name: $(sed -n 3p "$out/ncu-$name.md") (${SECONDS}s)"
    else
        failed=$((failed + 1))
        echo "gpu_profile: $name: FAIL: ncu exit $rc; $(cat "$out/ncu-$name.err") (ncu-$name.log)"
    fi
}
profile default --
profile norm_onepass SG_NORM_ONEPASS=1 --
profile wgmma_unfused SG_CONV_TC=wgmma SG_TC_HALO=all -- --conv-engine own --fuse 0
profile wgmma_fused SG_CONV_TC=wgmma -- --conv-engine own --fuse 1
if [ -n "${GPU_PROFILE_TABLE:-}" ]; then
    profile tuned -- --engine-table "$GPU_PROFILE_TABLE"
fi
echo "gpu_profile: done in ${SECONDS}s, $failed configuration(s) failed"
[ $failed -eq 0 ]
