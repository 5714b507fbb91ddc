#!/usr/bin/env bash
# test_gpu_build_deps.sh — the GPU machine's build, proved without a GPU (issue 10 item 5).
#
# The lent GPU machine has nvcc and CMake but no registry and maybe no -dev packages and no
# pkg-config: it builds against the Debian packages tools/fetch_gpu_deps.sh downloaded into
# .deps/ (CI fetches them first). This test copies the sources into a clean temporary tree
# (what the device tool sends: tracked and untracked-not-ignored files) plus the .deb files,
# and there runs `tools/gpu_check.sh --build-only` — the same environment script, configure
# and build as the GPU check — with SG_GPU_DEPS=1, i.e. as if the system had no -dev package.
# Then it proves the build used .deps/root and nothing of the system's -dev packages:
#   - every compiler depfile that names zstd.h, png.h, zlib.h or cblas.h names the copy
#     under .deps/root, none the system's /usr/include one;
#   - every library pkg-config resolved (CMake's pkgcfg_lib_* cache entries) lies under
#     .deps/root;
#   - the binaries carry an RPATH into .deps/root, and with LD_LIBRARY_PATH unset the loader
#     resolves libzstd, libpng16, libz, libopenblas and libgfortran there (ldd), and `plan
#     --model unet_tiny` runs;
#   - a second call in the same tree works (the unpacked root is reused), and so does the
#     environment of a tree moved elsewhere (a fresh machine's copy).
# Exit 0 pass, 1 fail, 77 skip (no .deps outside CI; inside CI a missing .deps fails).
set -u
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
deps=${SG_DEPS_DIR:-$root/.deps}
source "$(dirname "${BASH_SOURCE[0]}")/ok.sh" # pass, fail, ok NAME CONDITION

if ! ls "$deps"/*.deb >/dev/null 2>&1; then
    if [ -n "${CI:-}" ]; then
        echo "FAIL: no .deb files in $deps: .ci/run must run tools/fetch_gpu_deps.sh first"
        exit 1
    fi
    echo "SKIP: no .deb files in $deps (run tools/fetch_gpu_deps.sh)"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
src=$tmp/src
mkdir -p "$src/.deps" "$tmp/out1" "$tmp/out2"
(cd "$root" && git ls-files -z -co --exclude-standard | tar --null -T - -cf -) | tar -C "$src" -xf -
cp "$deps"/*.deb "$src/.deps/"
ok "clean tree copied" '[ -f "$src/tools/gpu_check.sh" ] && [ ! -e "$src/build-gpu" ]'
r=$src/.deps/root

# as on the GPU machine: no library path, no user pkg-config or CMake search paths
run_check() {
    (cd "$src" && env -u LD_LIBRARY_PATH -u PKG_CONFIG_PATH -u PKG_CONFIG_LIBDIR \
        -u CMAKE_PREFIX_PATH SG_GPU_DEPS=1 GPU_CHECK_JOBS=2 GPU_CHECK_DEADLINE_S=1500 \
        bash tools/gpu_check.sh --build-only "$1")
}
run_check "$tmp/out1" >"$tmp/check1.txt" 2>&1
rc=$?
cat "$tmp/check1.txt"
md=$(ls "$tmp"/out1/*-gpu-check-build.md 2>/dev/null | head -n 1)
ok "gpu_check.sh --build-only exits 0" '[ $rc -eq 0 ]'
ok "its report says PASS" '[ -n "$md" ] && grep -q "^\*\*Overall: PASS\*\*" "$md"'
for s in environment configure cuda_backend build; do
    ok "stage $s PASS" 'grep -Eq "^\| $s \| PASS \|" "$md"'
done
ok "libraries came from .deps/root" 'grep -q "libraries from .deps/root" "$md"'
ok "logs archived" '[ -s "$tmp/out1/gpu-check-build-logs.tar.gz" ]'

b=$src/build-gpu
# headers: the depfiles of every C object
deps_files=$(find "$b" -name '*.o.d')
ok "depfiles exist" '[ -n "$deps_files" ]'
bad=$(cat $deps_files | tr ' \\' '\n\n' |
    grep -E '^/usr/include/(zstd|zdict|zstd_errors|png|pngconf|pnglibconf|zlib|zconf|cblas|jansson|jansson_config|jpeglib|jconfig|jmorecfg)\.h$|^/usr/include/(libpng16|x86_64-linux-gnu/openblas[^/]*|x86_64-linux-gnu/cblas)' |
    sort -u)
ok "no system -dev header was compiled against (found: $bad)" '[ -z "$bad" ]'
for h in 'usr/include/zstd\.h' 'usr/include/(libpng16/)?png\.h' 'usr/include/zlib\.h' \
    'usr/include/x86_64-linux-gnu/openblas-pthread/cblas\.h' 'usr/include/jansson\.h' \
    'usr/include/jpeglib\.h'; do
    ok "$h came from .deps/root" 'cat $deps_files | tr " \\\\" "\n\n" | grep -Eqx "$r/$h"'
done
# libraries: what pkg-config resolved
libs=$(grep -E '^pkgcfg_lib_[A-Z]+_[a-z0-9]+:FILEPATH=' "$b/CMakeCache.txt")
echo "$libs"
ok "pkg-config resolved six libraries" '[ $(echo "$libs" | grep -c .) -ge 6 ]'
ok "every resolved library lies under .deps/root" '! echo "$libs" | grep -v "=$r/"'
# run time: RPATH, the loader's choices without LD_LIBRARY_PATH, a run (train links them all)
rpath=$(readelf -d "$b/train" | grep -E '\((RPATH|RUNPATH)\)')
echo "$rpath"
ok "train has an RPATH (DT_RPATH) into .deps/root" 'echo "$rpath" | grep -q "(RPATH).*$r/usr/lib/x86_64-linux-gnu"'
ldd_out=$(env -u LD_LIBRARY_PATH ldd "$b/train")
echo "$ldd_out"
for l in libzstd.so.1 libpng16.so.16 libz.so.1 libopenblas.so.0 libgfortran.so.5 libquadmath.so.0 \
    libjansson.so.4 libjpeg.so.62; do
    ok "the loader takes $l from .deps/root" 'echo "$ldd_out" | grep -Eq "^\s*$l => $r/"'
done
ok "no library is missing" '! echo "$ldd_out" | grep -q "not found"'
env -u LD_LIBRARY_PATH "$b/plan" --model unet_tiny >"$tmp/plan.txt" 2>&1
rc=$?
ok "plan --model unet_tiny runs (exit $rc)" '[ $rc -eq 0 ] && grep -q "arena" "$tmp/plan.txt"'
env -u LD_LIBRARY_PATH "$b/train" --help >"$tmp/train.txt" 2>&1
rc=$?
ok "train (OpenBLAS, zstd, libpng, jansson, libjpeg) starts (exit $rc)" '[ $rc -eq 0 ]'

# a second call in the same tree
run_check "$tmp/out2" >"$tmp/check2.txt" 2>&1
rc=$?
ok "a second call exits 0" '[ $rc -eq 0 ]'
md2=$(ls "$tmp"/out2/*-gpu-check-build.md 2>/dev/null | head -n 1)
ok "the second call reused .deps/root" '[ -n "$md2" ] && grep -q "reusing $r" "$md2"'
# the prebuilt pack (tools/gpu_prebuild.sh) from this build folder, then a check that takes it
# instead of compiling: its binaries unpacked into another build folder run
(cd "$src" && env -u LD_LIBRARY_PATH GPU_PREBUILD_DIR=build-gpu GPU_PREBUILD_TARGETS="plan train" \
    GPU_PREBUILD_JOBS=2 bash tools/gpu_prebuild.sh) >"$tmp/prebuild.txt" 2>&1
rc=$?
tail -n 3 "$tmp/prebuild.txt"
ok "gpu_prebuild.sh exits 0 ($rc)" '[ $rc -eq 0 ]'
ok "the pack holds bin.tar.xz, the manifest (plan, train) and the stamp" \
    '[ -s "$src/.prebuilt/bin.tar.xz" ] && [ "$(cat "$src/.prebuilt/manifest")" = "$(printf "./plan\n./train")" ]'
ok "the unpacked libraries were not left to be carried" '[ ! -e "$src/.deps/root" ]'
tree_stamp=$(cd "$src" && SG_GPU_DEPS=0 bash -c 'source tools/gpu_env.sh >/dev/null 2>&1; sg_gpu_source_stamp')
ok "its stamp is the tree's ($tree_stamp)" '[ "$(cat "$src/.prebuilt/stamp")" = "$tree_stamp" ]'
(cd "$src" && env -u LD_LIBRARY_PATH -u PKG_CONFIG_PATH -u PKG_CONFIG_LIBDIR -u CMAKE_PREFIX_PATH \
    SG_GPU_DEPS=1 GPU_CHECK_BUILD_DIR=build-pb GPU_CHECK_TARGETS="plan train" \
    GPU_CHECK_SKIP='gpu_tests|verify_cuda|verify_cuda_own|train_short|verify_cuda_cifar|cpu_tests' \
    bash tools/gpu_check.sh "$tmp/out3") >"$tmp/check3.txt" 2>&1
md3=$(ls "$tmp"/out3/*-gpu-check.md 2>/dev/null | head -n 1)
md3=${md3:-/nonexistent}
grep -E '^\| (prebuilt|build) \|' "$md3"
ok "the check took the pack" 'grep -Eq "^\| prebuilt \| PASS \| 2 binaries from .prebuilt, stamp matched" "$md3" &&
    grep -Eq "^\| build \| PASS \| the prebuilt binaries" "$md3"'
env -u LD_LIBRARY_PATH "$src/build-pb/plan" --model unet_tiny >"$tmp/plan_pb.txt" 2>&1
rc=$?
ok "the unpacked plan --model unet_tiny runs (exit $rc)" '[ $rc -eq 0 ] && grep -q "arena" "$tmp/plan_pb.txt"'
ok "the unpacked train names the GPU machine's cuDNN folder in its RPATH" \
    'readelf -d "$src/build-pb/train" | grep "(RPATH)" | grep -q "/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib"'

# the tree moved (a fresh machine's copy, the unpacked root carried along)
mv "$src" "$tmp/moved"
m=$tmp/moved/.deps/root
cf=$(cd "$tmp/moved" && env -u PKG_CONFIG_PATH SG_GPU_DEPS=1 bash -c \
    'source tools/gpu_env.sh 2>/dev/null && "$PKG_CONFIG" --cflags --libs libzstd openblas libpng zlib')
echo "$cf"
ok "a moved tree's environment points into the moved root" \
    'echo "$cf" | grep -q -- "-I$m/usr/include" && ! echo "$cf" | grep -q "$tmp/src/"'
ok "the moved root's libz.so link still resolves" '[ -e "$m/usr/lib/x86_64-linux-gnu/libz.so" ]'

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
