#!/usr/bin/env bash
# Run HERE (a Debian machine with the package registry), not on the GPU machine: download the
# Debian packages stepgraph builds against into .deps/ (git-ignored), for a GPU machine that
# has nvcc and CMake but no registry and no -dev packages. Carry .deps to it (device tool:
# carry [".deps"]); tools/gpu_check.sh unpacks them into .deps/root when pkg-config cannot
# find the libraries there.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .deps
grep -qx '/.deps/' .git/info/exclude 2>/dev/null || echo '/.deps/' >>.git/info/exclude
cd .deps
apt-get download libzstd-dev libzstd1 libopenblas-dev libopenblas-pthread-dev \
  libopenblas0-pthread libgfortran5 libpng-dev libpng16-16 zlib1g-dev zlib1g \
  libjansson-dev libjansson4 libjpeg62-turbo-dev libjpeg62-turbo
ls -la
