#!/usr/bin/env bash
# The full GPU check, one command for a lent GPU machine (H100/H200): build for sm_90 with the
# machine's own nvcc and CMake, run every GPU test, compute-sanitizer (memcheck, racecheck,
# initcheck) over the op tests, a short `train` of unet_cifar on the replayed graph, and
# `verify` on the CUDA backend; then write a dated report.
#
#   tools/gpu_check.sh [OUTDIR]        (OUTDIR defaults to $OUT, else ./gpu_check_out)
#
# The report goes to OUTDIR/<date>-<gpu>-gpu-check.md with the logs beside it; commit it under
# bench/results/. Where the machine lacks the -dev packages (no registry there), run
# tools/fetch_gpu_deps.sh here first and carry .deps. Each stage has its own time limit and a
# failure is recorded and the script goes on; the exit status is non-zero if anything failed.
# Environment: GPU_CHECK_JOBS (parallel build jobs, default nproc), SG_COMMIT (the commit, when
# the tree is not a git checkout), GPU_CHECK_SKIP (regex of stages to skip).
set -u
cd "$(dirname "$0")/.."
root=$PWD
out=${1:-${OUT:-$root/gpu_check_out}}
mkdir -p "$out"
jobs=${GPU_CHECK_JOBS:-$(nproc)}
skip=${GPU_CHECK_SKIP:-^$}
commit=${SG_COMMIT:-$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)}
day=$(date -u +%F)
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | tr ' ' '-' | tr -cd 'A-Za-z0-9._-')
gpu=${gpu:-no-gpu}
report="$out/$day-$gpu-gpu-check.md"
results=()
failed=0

stage() { # name limit_s command...
  local name=$1 limit=$2
  shift 2
  if [[ $name =~ $skip ]]; then results+=("| $name | SKIP | GPU_CHECK_SKIP |"); return; fi
  local log="$out/$name.log" t0=$SECONDS rc
  echo "== $name (limit ${limit}s)"
  timeout -k 10 "$limit" "$@" >"$log" 2>&1
  rc=$?
  local dt=$((SECONDS - t0)) res=PASS
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then res="FAIL (timed out)"; failed=1
  elif [ $rc -eq 77 ]; then res=SKIP
  elif [ $rc -ne 0 ]; then res="FAIL (exit $rc)"; failed=1; fi
  echo "   $res in ${dt}s"
  results+=("| $name | $res | ${dt}s, log \`$name.log\` |")
}

# libraries: use the carried Debian packages when the machine has no -dev packages
if ! pkg-config --exists libzstd openblas libpng zlib 2>/dev/null && [ -d .deps ]; then
  mkdir -p .deps/root
  for f in .deps/*.deb; do dpkg -x "$f" .deps/root; done
  r=$root/.deps/root
  export PKG_CONFIG_SYSROOT_DIR=$r
  export PKG_CONFIG_LIBDIR=$r/usr/lib/x86_64-linux-gnu/pkgconfig:$r/usr/share/pkgconfig
  export LD_LIBRARY_PATH=$r/usr/lib/x86_64-linux-gnu:$r/usr/lib/x86_64-linux-gnu/openblas-pthread:${LD_LIBRARY_PATH:-}
  export LIBRARY_PATH=$r/usr/lib/x86_64-linux-gnu:$r/usr/lib/x86_64-linux-gnu/openblas-pthread:${LIBRARY_PATH:-}
fi

{
  echo "date: $(date -u '+%F %T') UTC"
  echo "commit: $commit"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1
  nvcc --version 2>&1 | tail -2
  cmake --version | head -1
  python3 -c 'import torch; print("torch", torch.__version__)' 2>&1
} >"$out/environment.txt"

stage configure 240 cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90
stage build 420 cmake --build build-gpu -j"$jobs"
stage gpu_tests 420 ctest --test-dir build-gpu -L gpu --output-on-failure
stage cpu_tests 420 ctest --test-dir build-gpu -LE gpu -E 'torch_parity_cifar|torch_ref_selftest' --output-on-failure -j"$jobs"
for tool in memcheck racecheck initcheck; do
  stage "sanitizer_$tool" 420 compute-sanitizer --tool "$tool" --error-exitcode 1 \
    build-gpu/tests/test_cuda_ops
done
tmp=$(mktemp -d)
stage train_cifar 300 build-gpu/train --model unet_cifar --data synthetic:2048:32x32x3 \
  --backend cuda --precision bf16 --steps 60 --log-every 10 --ckpt-every 0 --warmup 10 \
  --samples 4 --ddim-steps 10 --out "$tmp/cifar"
stage verify_cuda 300 build-gpu/verify --backend cuda --model unet_tiny --steps 8
stage verify_cuda_cifar 300 build-gpu/verify --backend cuda --model unet_cifar --batch 8 \
  --precision bf16 --steps 4 --data synthetic:256:32x32x3
rm -rf "$tmp"

{
  echo "# GPU check, $day, $gpu"
  echo
  echo "Command: \`tools/gpu_check.sh\` (commit $commit)."
  echo
  echo '```'
  cat "$out/environment.txt"
  echo '```'
  echo
  echo "| stage | result | detail |"
  echo "|---|---|---|"
  printf '%s\n' "${results[@]}"
  echo
  for f in "$out"/*.log; do
    echo "## $(basename "$f")"
    echo
    echo '```'
    tail -n 60 "$f"
    echo '```'
    echo
  done
} >"$report"
echo "report: $report"
exit $failed
