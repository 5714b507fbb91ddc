#!/usr/bin/env bash
# nvcc_resources.sh — the CUDA compiler launcher (CMAKE_CUDA_COMPILER_LAUNCHER, CMakeLists.txt):
# runs the compile it is given with ptxas's resource report added (-Xptxas=-v) and writes that
# report, every kernel's registers and static shared memory as ptxas assembled it, beside the
# object as OBJECT.ptxas, followed by each entry's __launch_bounds__ (the PTX's .maxntid, from
# the intermediate files nvcc keeps in a temporary directory for the purpose) as lines
# "sg maxntid MANGLED_NAME THREADS", and every __shared__ variable the PTX declares, as lines
# "sg shared MANGLED_NAME BYTES" (the emulation poisons the ones g++ keeps outside its shared
# section, template and inline functions' statics, at every block's start). The host
# emulation (tests/cuda_host/sim_resources.cpp) reads those files and holds every launch to what the GPU would refuse: a block whose registers exceed the
# SM's file, more threads than its __launch_bounds__, static plus dynamic shared memory above
# 48 KiB without the opt-in attribute, an attribute whose sum with the static bytes exceeds the
# device's opt-in limit.
# Everything else the compiler prints passes through to stderr unchanged; its exit status is
# the compile's. Usage (as CMake calls it): nvcc_resources.sh NVCC ARGS... -o OBJECT ...
out="" prev=""
for a in "$@"; do
    [ "$prev" = "-o" ] && out="$a"
    prev="$a"
done
if [ -z "$out" ]; then exec "$@"; fi
log="$out.ptxas.tmp"
keep=$(mktemp -d "${TMPDIR:-/tmp}/sg_nvcc_keep.XXXXXX") || exec "$@"
"$@" -Xptxas=-v --keep --keep-dir "$keep" 2>"$log"
rc=$?
# ptxas's report: "ptxas info : ..." lines and the indented "N bytes stack frame, ..." lines
grep -v -E '^ptxas info|^ +[0-9]+ bytes stack frame' "$log" >&2
if [ "$rc" -eq 0 ]; then
    {
        grep -E '^ptxas info' "$log"
        # ".visible .entry NAME(" ... ".maxntid X, Y, Z" before the body's "{"
        cat "$keep"/*.ptx 2>/dev/null | awk '
            /^\.(visible|weak) \.entry / { n = $3; sub(/\(.*/, "", n); e = 1; next }
            e && /^\.maxntid/ { gsub(/,/, " ", $0); split($0, v, " ");
                               print "sg maxntid " n " " v[2] * v[3] * v[4]; e = 0; next }
            e && /^\{/ { e = 0 }'
        # every __shared__ variable (not the extern, dynamic one): "sg shared MANGLED BYTES",
        # with " split" where ptxas split an array into scalars ("NAME_$_0", ...: their sum)
        cat "$keep"/*.ptx 2>/dev/null | awk '
            /^[ \t]*\.shared / {
                i = $2 == ".align" ? 4 : 2; t = $i; n = $(i + 1); sub(/;.*/, "", n); sz = 4
                if (t ~ /8$/) sz = 1; else if (t ~ /16$/) sz = 2; else if (t ~ /64$/) sz = 8
                while (match(n, /\[[0-9]+\]/)) {
                    sz *= substr(n, RSTART + 1, RLENGTH - 2)
                    n = substr(n, 1, RSTART - 1) substr(n, RSTART + RLENGTH)
                }
                print n, sz }' | sort -u | awk '
            { n = $1; if (sub(/_\$_[0-9]+$/, "", n)) sp[n] = " split"; b[n] += $2 }
            END { for (n in b) print "sg shared " n " " b[n] sp[n] }' | sort
    } >"$out.ptxas"
fi
rm -rf "$log" "$keep"
exit "$rc"
