#!/usr/bin/env bash
# Run HERE (a Debian 12 machine with the package registry), not on the GPU machine: download
# the Debian packages stepgraph builds against into .deps/ (git-ignored), for a GPU machine
# that has nvcc and CMake but no registry, possibly no -dev packages and no pkg-config. Carry
# .deps to it (device tool: carry [".deps"]); tools/gpu_env.sh (sourced by gpu_check.sh and
# bench.sh) unpacks them into .deps/root there when the system cannot provide the libraries.
# OpenBLAS's runtime needs libgfortran5 (and its libquadmath0); pkgconf + libpkgconf3 stand
# in for a missing pkg-config. A re-run replaces the files (and drops an unpacked .deps/root, which must not
# travel: it is rebuilt on the GPU machine and would only eat the 64 MiB carry limit).
set -euo pipefail
cd "$(dirname "$0")/.."
pkgs="libzstd-dev libzstd1 libopenblas-dev libopenblas-pthread-dev libopenblas0-pthread
      libgfortran5 libquadmath0 libpng-dev libpng16-16 zlib1g-dev zlib1g pkgconf pkgconf-bin libpkgconf3
      libjansson-dev libjansson4 libjpeg62-turbo-dev libjpeg62-turbo"
tmp=$(mktemp -d) # .deps itself is git-ignored (.gitignore)
trap 'rm -rf "$tmp"' EXIT
# shellcheck disable=SC2086 # a list of package names
if ! (cd "$tmp" && apt-get download $pkgs); then
  echo "fetch_gpu_deps: apt-get download failed; updating the package lists once" >&2
  apt-get update -q
  (cd "$tmp" && apt-get download $pkgs)
fi
rm -rf .deps
mv "$tmp" .deps
trap - EXIT
chmod 755 .deps
ls -la .deps
echo "fetch_gpu_deps: $(ls .deps/*.deb | wc -l) packages, $(du -sh .deps | cut -f1) in .deps"
