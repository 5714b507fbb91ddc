#!/usr/bin/env bash
# gpu_prebuild.sh — run HERE, before a device call: build the GPU check's binaries on this
# machine and pack them into .prebuilt/ (git-ignored) to carry with .deps, so that the call
# spends its minutes on the GPU, not on the compiler (the second GPU session's build took 103
# of its 493 seconds).
#
#   tools/gpu_prebuild.sh            # then: device tool carry [".deps", ".prebuilt"]
#
# The build is the GPU machine's: tools/gpu_env.sh with SG_GPU_DEPS=1 (the carried Debian
# libraries in .deps/root, which is what that machine uses: it has no -dev packages), the
# same configure arguments, sm_90 + sm_90a, the targets tools/gpu_call.sh builds. One
# addition: the binaries' RPATH also names where that machine keeps cuDNN and cuBLAS
# (SG_PREBUILD_RPATH, default the PyTorch environment's nvidia packages as the GPU sessions
# found them), since here cuDNN comes from the CUDA toolkit. The binaries are stripped of
# their symbols (the CUDA code stays) and packed with xz to fit the device tool's 64 MiB carry
# limit.
#
# .prebuilt/ holds bin.tar.xz (the binaries, paths as in the build folder), manifest (those
# paths) and stamp (tools/gpu_env.sh's sg_gpu_source_stamp: a hash of the sources, nvcc's
# version, the repo root, the .deb files).
# tools/gpu_check.sh uses them only where the stamp matches its own tree and every binary's
# libraries resolve there (ldd) and `plan --help` runs; otherwise it builds as before and
# says why in its report (stage `prebuilt`). Rebuild after any source change.
#
# Environment: GPU_PREBUILD_TARGETS (default tools/gpu_call_targets.sh's list: gpu_call's),
# GPU_PREBUILD_DIR (the build folder, default build-gpu-prebuild), GPU_PREBUILD_JOBS (default
# nproc), SG_PREBUILD_RPATH (;-separated folders added to the RPATH), GPU_PREBUILD_MAX_MIB (default
# 48: fail when the pack is larger; .deps and the tree need the rest of the 64).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
case ${1:-} in -h | --help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//' && exit 0 ;; esac

# shellcheck source=tools/gpu_call_targets.sh
source tools/gpu_call_targets.sh
targets=${GPU_PREBUILD_TARGETS:-$SG_GPU_CALL_TARGETS}
bdir=${GPU_PREBUILD_DIR:-build-gpu-prebuild}
jobs=${GPU_PREBUILD_JOBS:-$(nproc)}
venv=/opt/torch/.venv/lib/python3.12/site-packages/nvidia
extra=${SG_PREBUILD_RPATH:-"$venv/cudnn/lib;$venv/cublas/lib;$venv/cu13/lib"}
max_mib=${GPU_PREBUILD_MAX_MIB:-48}

ls .deps/*.deb >/dev/null 2>&1 || tools/fetch_gpu_deps.sh
command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ] || {
    echo "gpu_prebuild: no nvcc here: nothing to prebuild" >&2
    exit 1
}
export SG_GPU_DEPS=1
# (gpu_env.sh is written for the check's shell, without errexit)
set +e
# shellcheck source=tools/gpu_env.sh
source tools/gpu_env.sh
env_rc=$?
set -e
[ $env_rc -eq 0 ] || {
    echo "gpu_prebuild: tools/gpu_env.sh failed" >&2
    exit 1
}
args=()
for a in "${SG_GPU_CMAKE_ARGS[@]}"; do
    case $a in
    -DCMAKE_BUILD_RPATH=* | -DCMAKE_INSTALL_RPATH=*) a="$a;$extra" ;;
    esac
    args+=("$a")
done
cmake -S "$root" -B "$bdir" "${args[@]}" >/dev/null
grep -q '^SG_CUDA_BACKEND:INTERNAL=ON' "$bdir/CMakeCache.txt" || {
    echo "gpu_prebuild: the CUDA backend is off in $bdir (nvcc not found?)" >&2
    exit 1
}
read -r -a tl <<<"$targets"
echo "gpu_prebuild: building ${#tl[@]} targets in $bdir ($jobs jobs)"
cmake --build "$bdir" -j"$jobs" --target "${tl[@]}"

rm -rf .prebuilt.tmp
mkdir -p .prebuilt.tmp/bin
for t in "${tl[@]}"; do
    f=$(cd "$bdir" && find . -path ./CMakeFiles -prune -o -type f -name "$t" -perm -u+x -print | head -n 1)
    [ -n "$f" ] || {
        echo "gpu_prebuild: no binary for target $t in $bdir" >&2
        exit 1
    }
    mkdir -p ".prebuilt.tmp/bin/$(dirname "$f")"
    strip --strip-unneeded -o ".prebuilt.tmp/bin/$f" "$bdir/$f"
    echo "$f" >>.prebuilt.tmp/manifest
done
# every binary holds the same kernels (about 20 MB of sm_90 and sm_90a code): xz's 64 MiB
# window at -9 stores them about once (12 binaries: 214 MB -> 8 MB)
echo "gpu_prebuild: packing $(du -sm .prebuilt.tmp/bin | cut -f1) MiB of binaries (xz -9)"
tar -C .prebuilt.tmp/bin -cf - . | xz -9 -T1 >.prebuilt.tmp/bin.tar.xz
rm -rf .prebuilt.tmp/bin
sg_gpu_source_stamp >.prebuilt.tmp/stamp
mib=$(du -sm .prebuilt.tmp | cut -f1)
if [ "$mib" -gt "$max_mib" ]; then
    echo "gpu_prebuild: the pack is ${mib} MiB, over GPU_PREBUILD_MAX_MIB=$max_mib" >&2
    exit 1
fi
rm -rf .prebuilt
mv .prebuilt.tmp .prebuilt
# the unpacked libraries stay here: the GPU machine unpacks its own (the carry limit)
rm -rf .deps/root .deps/bin
echo "gpu_prebuild: $(wc -l <.prebuilt/manifest) binaries, ${mib} MiB in .prebuilt," \
    "$(du -sm .deps | cut -f1) MiB in .deps; stamp: $(cat .prebuilt/stamp)"
