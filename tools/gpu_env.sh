# shellcheck shell=bash
# gpu_env.sh — the build environment of a lent GPU machine, shared by tools/gpu_check.sh,
# tools/bench.sh and the gpu_build_deps test. Source it from bash (it sets variables and
# defines functions; it never exits the caller):
#
#   source tools/gpu_env.sh || exit 1
#   sg_gpu_configure SRC BUILD [more cmake args]    # configure exactly the way the check does
#
# The GPU machine has nvcc, CMake and a driver but no package registry and, possibly, neither
# the -dev packages stepgraph links against nor pkg-config. tools/fetch_gpu_deps.sh (run on a
# machine with the registry) downloads them as Debian packages into .deps/; carry that folder.
# This script then
#   - puts nvcc on PATH (/usr/local/cuda*/bin) and names it to CMake (CUDACXX);
#   - when the system lacks the libraries (or SG_GPU_DEPS=1), unpacks .deps/*.deb into
#     .deps/root, repairs what the packages' install scripts would have done and `dpkg -x`
#     does not (absolute symlinks such as libz.so -> /lib/..., OpenBLAS's openblas.pc, which
#     lives under usr/lib/x86_64-linux-gnu/openblas-pthread/pkgconfig), and points pkg-config
#     (the carried pkgconf, so a machine without pkg-config works too) and CMake at that root
#     alone: the system's own .pc files are not searched;
#   - gives the binaries an RPATH into .deps/root (-Wl,--disable-new-dtags makes it DT_RPATH,
#     which also serves OpenBLAS's own dependency libgfortran), so they run after the build
#     without LD_LIBRARY_PATH. LD_LIBRARY_PATH is deliberately NOT set: the Debian 12 zlib and
#     libgfortran would then shadow the newer system ones under Python/PyTorch.
# Idempotent: a second call (same shell, a new shell, or a fresh machine with a carried tree)
# reuses .deps/root when its stamp matches the .deb files, and re-unpacks it otherwise.
#
# Environment: SG_GPU_DEPS (1: always use .deps, 0: never; default: when pkg-config cannot
# find the libraries), SG_DEPS_DIR (default <repo>/.deps), SG_CUDA_ARCH (default 90).
# Sets: SG_GPU_ROOT (the repo), SG_GPU_DEPS_ROOT (the unpacked root, empty when unused),
# SG_GPU_CMAKE_ARGS (array), SG_GPU_ENV_LOG (what was decided, one line per decision).

SG_GPU_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SG_GPU_ENV_LOG=""
SG_GPU_DEPS_ROOT=""
SG_GPU_CMAKE_ARGS=()

sg_gpu_note() {
    SG_GPU_ENV_LOG+="gpu_env: $*"$'\n'
    echo "gpu_env: $*" >&2
}

# ---- nvcc: PATH, then the usual install folders (newest version first)
sg_gpu_find_nvcc() {
    local n d
    n=$(command -v nvcc 2>/dev/null)
    if [ -z "$n" ]; then
        for d in /usr/local/cuda/bin $(ls -d /usr/local/cuda-*/bin 2>/dev/null | sort -rV) \
            /opt/cuda/bin; do
            if [ -x "$d/nvcc" ]; then
                n=$d/nvcc
                break
            fi
        done
    fi
    if [ -z "$n" ]; then
        sg_gpu_note "no nvcc on PATH or under /usr/local/cuda*: the build will have no CUDA"
        return 0
    fi
    case ":$PATH:" in *":$(dirname "$n"):"*) ;; *) export PATH="$(dirname "$n"):$PATH" ;; esac
    export CUDACXX=$n
    sg_gpu_note "nvcc: $n"
}

# ---- unpack one .deb into a root, with dpkg-deb where it exists, else ar + tar
sg_gpu_unpack_deb() {
    local deb=$1 dest=$2 member tmp
    if command -v dpkg-deb >/dev/null 2>&1; then
        dpkg-deb -x "$deb" "$dest"
        return
    fi
    tmp=$(mktemp -d) || return 1
    (cd "$tmp" && ar x "$deb") || { rm -rf "$tmp"; return 1; }
    member=$(ls "$tmp"/data.tar.* 2>/dev/null | head -n 1)
    [ -n "$member" ] && tar -xf "$member" -C "$dest"
    local rc=$?
    rm -rf "$tmp"
    return $rc
}

# ---- .deps/root: unpack (when the stamp differs), then repair
sg_gpu_unpack_deps() {
    local deps=$1 root=$1/root stamp f l t
    stamp=$(cd "$deps" && ls -l --time-style=+ ./*.deb 2>/dev/null | awk '{print $5, $NF}')
    if [ -f "$root/.sg_stamp" ] && [ "$(cat "$root/.sg_stamp")" = "$stamp" ]; then
        sg_gpu_note "reusing $root"
    else
        rm -rf "$root"
        mkdir -p "$root" || return 1
        for f in "$deps"/*.deb; do
            sg_gpu_unpack_deb "$f" "$root" || {
                sg_gpu_note "could not unpack $f"
                return 1
            }
        done
        # absolute symlinks (zlib1g-dev: libz.so -> /lib/x86_64-linux-gnu/libz.so.1.2.13)
        # point into the system: re-point them into the root, relative, so the tree can move
        while IFS= read -r -d '' l; do
            t=$(readlink "$l")
            case $t in
            /*) [ -e "$root$t" ] && ln -sfn "$(realpath -m --relative-to="$(dirname "$l")" "$root$t")" "$l" ;;
            esac
        done < <(find "$root" -type l -print0)
        printf '%s' "$stamp" >"$root/.sg_stamp"
        sg_gpu_note "unpacked $(ls "$deps"/*.deb | wc -l) packages into $root"
    fi
    # the carried pkgconf runs with its own library; this wrapper is what CMake calls
    mkdir -p "$deps/bin"
    if [ -x "$root/usr/bin/pkgconf" ]; then
        cat >"$deps/bin/pkg-config" <<EOF
#!/bin/sh
LD_LIBRARY_PATH="$root/usr/lib/x86_64-linux-gnu\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "$root/usr/bin/pkgconf" "\$@"
EOF
        chmod +x "$deps/bin/pkg-config"
        export PKG_CONFIG=$deps/bin/pkg-config
    elif command -v pkg-config >/dev/null 2>&1; then
        export PKG_CONFIG=$(command -v pkg-config)
        sg_gpu_note "no pkgconf in .deps (re-run tools/fetch_gpu_deps.sh); using $PKG_CONFIG"
    else
        sg_gpu_note "neither pkg-config nor a carried pkgconf: re-run tools/fetch_gpu_deps.sh"
        return 1
    fi
    return 0
}

sg_gpu_system_has_libs() {
    command -v pkg-config >/dev/null 2>&1 && pkg-config --exists libzstd openblas libpng zlib jansson libjpeg
}

sg_gpu_env_main() {
    sg_gpu_find_nvcc
    sg_gpu_find_cudnn
    local deps=${SG_DEPS_DIR:-$SG_GPU_ROOT/.deps} use=${SG_GPU_DEPS:-auto}
    if [ "$use" = auto ]; then
        if sg_gpu_system_has_libs; then
            use=0
            sg_gpu_note "the system's pkg-config finds libzstd, openblas, libpng, zlib, jansson and libjpeg"
        else
            use=1
        fi
    fi
    SG_GPU_CMAKE_ARGS=(-DCMAKE_BUILD_TYPE=Release "-DCMAKE_CUDA_ARCHITECTURES=${SG_CUDA_ARCH:-90}")
    [ "$use" = 1 ] || return 0
    if ! ls "$deps"/*.deb >/dev/null 2>&1; then
        sg_gpu_note "the system lacks the -dev packages and $deps has no .deb files: run" \
            "tools/fetch_gpu_deps.sh on a machine with Debian's registry and carry .deps"
        return 1
    fi
    sg_gpu_unpack_deps "$deps" || return 1
    local r=$deps/root a=x86_64-linux-gnu
    SG_GPU_DEPS_ROOT=$r
    # only the root's .pc files (OpenBLAS's under openblas-pthread/), paths under the root
    export PKG_CONFIG_LIBDIR="$r/usr/lib/$a/openblas-pthread/pkgconfig:$r/usr/lib/$a/pkgconfig:$r/usr/share/pkgconfig"
    export PKG_CONFIG_PATH=""
    export PKG_CONFIG_SYSROOT_DIR=$r
    # keep -I<root>/usr/include: pkgconf drops "system" directories, and the root's are not
    export PKG_CONFIG_ALLOW_SYSTEM_CFLAGS=1 PKG_CONFIG_ALLOW_SYSTEM_LIBS=1
    # libzstd.pc says libdir=/usr/lib while the library is in usr/lib/<arch>: CMake's
    # find_library looks under <prefix>/lib/<arch> of these prefixes before the system's
    export CMAKE_PREFIX_PATH="$r/usr:$r${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
    local rp="$r/usr/lib/$a;$r/usr/lib/$a/openblas-pthread;$r/lib/$a"
    SG_GPU_CMAKE_ARGS+=("-DCMAKE_BUILD_RPATH=$rp" "-DCMAKE_INSTALL_RPATH=$rp"
        "-DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags"
        "-DCMAKE_SHARED_LINKER_FLAGS=-Wl,--disable-new-dtags"
        "-DPKG_CONFIG_EXECUTABLE=$PKG_CONFIG")
    sg_gpu_note "libraries from $r (pkg-config: $PKG_CONFIG)"
    return 0
}

# ---- cuDNN: which one CMake will find (the same order as CMakeLists.txt): the PyTorch
# environment's nvidia-cudnn package, else the CUDA toolkit's; a note, never a failure
sg_gpu_find_cudnn() {
    local d
    d=$(timeout 60 python3 -c 'import nvidia.cudnn as m; print(list(m.__path__)[0])' 2>/dev/null)
    if [ -n "$d" ] && [ -f "$d/include/cudnn.h" ]; then
        sg_gpu_note "cuDNN: $d (the PyTorch environment's nvidia-cudnn package)"
        return 0
    fi
    for d in /usr/local/cuda /usr/local/cuda-*; do
        if [ -f "$d/include/cudnn.h" ]; then
            sg_gpu_note "cuDNN: $d (the CUDA toolkit's)"
            return 0
        fi
    done
    sg_gpu_note "cuDNN: not found (every conv on the own engine; -DSG_CUDNN_ROOT=DIR)"
}

# sg_gpu_configure SRC BUILD [cmake args...]: the one configure command of the GPU machine.
sg_gpu_configure() {
    local src=$1 build=$2
    shift 2
    cmake -S "$src" -B "$build" "${SG_GPU_CMAKE_ARGS[@]}" "$@"
}

# sg_gpu_source_stamp [ROOT]: one line naming what a GPU build's binaries depend on: a hash of every
# source file CMake compiles or reads (C, C++, CUDA, headers, CMakeLists.txt, *.cmake, *.in, *.inc,
# as sg_gpu_source_files lists them; build folders, .git, .deps, .prebuilt and .whl left out),
# nvcc's version, the repo root (the binaries' RPATH into .deps/root is absolute) and the carried
# .deb files. The same command here and on the GPU machine, where the tree is a copy without .git:
# the file set is what the device tool sends (tracked and untracked-not-ignored files) in both
# places. tools/gpu_prebuild.sh records it; tools/gpu_check.sh uses prebuilt binaries only where it
# matches.
sg_gpu_source_files() { # [ROOT]: the files the stamp hashes, one a line, sorted, ./-relative
    (cd "${1:-$SG_GPU_ROOT}" && find . \( -path ./.git -o -path './build*' -o -path ./.deps \
        -o -path ./.prebuilt -o -path ./.whl -o -path ./gpu_check_out -o -path ./gpu_call_out \) \
        -prune -o -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \
        -o -name '*.cpp' -o -name '*.hpp' -o -name '*.inc' -o -name CMakeLists.txt \
        -o -name '*.cmake' -o -name '*.in' \) -print | LC_ALL=C sort)
}
sg_gpu_source_stamp() {
    local r=${1:-$SG_GPU_ROOT} h deb
    h=$(sg_gpu_source_files "$r" | (cd "$r" && xargs -r -d '\n' sha256sum) | sha256sum | cut -c1-16)
    deb=$(cd "$r" && ls .deps/*.deb 2>/dev/null | LC_ALL=C sort | xargs -r -d '\n' sha256sum |
        sha256sum | cut -c1-16)
    echo "sources $h; $( (nvcc --version 2>/dev/null || echo no nvcc) | tail -n 1); root $r; deps $deb"
}

sg_gpu_env_main
