#!/usr/bin/env bash
# nvcc_resources.sh — the CUDA compiler launcher (CMAKE_CUDA_COMPILER_LAUNCHER, CMakeLists.txt):
# runs the compile it is given with ptxas's resource report added (-Xptxas=-v) and writes that
# report, every kernel's registers and static shared memory as ptxas assembled it, beside the
# object as OBJECT.ptxas. The host emulation (tests/cuda_host/sim_resources.cpp) reads those
# files and holds every launch to what the GPU would refuse: a block whose registers exceed the
# SM's file, static plus dynamic shared memory above 48 KiB without the opt-in attribute, an
# attribute whose sum with the static bytes exceeds the device's opt-in limit.
# Everything else the compiler prints passes through to stderr unchanged; its exit status is
# the compile's. Usage (as CMake calls it): nvcc_resources.sh NVCC ARGS... -o OBJECT ...
out="" prev=""
for a in "$@"; do
    [ "$prev" = "-o" ] && out="$a"
    prev="$a"
done
if [ -z "$out" ]; then exec "$@"; fi
log="$out.ptxas.tmp"
"$@" -Xptxas=-v 2>"$log"
rc=$?
# ptxas's report: "ptxas info : ..." lines and the indented "N bytes stack frame, ..." lines
grep -v -E '^ptxas info|^ +[0-9]+ bytes stack frame' "$log" >&2
if [ "$rc" -eq 0 ]; then
    grep -E '^ptxas info' "$log" >"$out.ptxas" || : >"$out.ptxas"
fi
rm -f "$log"
exit "$rc"
