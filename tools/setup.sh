#!/usr/bin/env bash
# Install what stepgraph needs on Debian (as root) and build it into build/.
# Usage: bash tools/setup.sh            (then: build/train, build/plan, ctest --test-dir build)
set -euo pipefail
cd "$(dirname "$0")/.."
pkgs="cmake gcc g++ make pkg-config libzstd-dev libopenblas-dev libpng-dev zlib1g-dev libjansson-dev libjpeg62-turbo-dev
      python3 python3-numpy python3-torch python3-venv dataset-fashion-mnist clang-format
      libopenmpi-dev openmpi-bin shellcheck"
missing=$(for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || echo "$p"; done)
if [ -n "$missing" ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing packages: $missing (run as root, or: sudo apt-get install $missing)" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  # shellcheck disable=SC2086
  apt-get install -y -q --no-install-recommends $missing
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
# the design card's commands from the repository root: ./plan, ./train, ./sample, tools/verify
# (links to the built programs; git ignores them)
for t in plan train sample; do ln -sfn "build/$t" "$t"; done
ln -sfn ../build/verify tools/verify
echo "setup: built into build/ ($(ls build | grep -cE '^(plan|train|sample|verify|ckpt|bench)$') tools)"
