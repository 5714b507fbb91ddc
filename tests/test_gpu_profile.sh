#!/usr/bin/env bash
# test_gpu_profile.sh — tools/gpu_profile.sh's logic without a GPU: a fake ncu (it checks the
# flags the script must give, runs the profiled command, and writes a raw CSV in ncu's layout
# to --log-file) and a fake bench (it records its flags and SG_PROFILE_FIRST_STEP). Checks:
# without ncu, SKIP and exit 0; each configuration's command (the default, the one-pass
# normalisations' and the wgmma steps with their environment, the tuned step only with GPU_PROFILE_TABLE), its summary and log line;
# GPU_PROFILE_CONFIGS selects; a failing ncu run makes the exit status 1 and names the
# configuration while the others still run.
set -u
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { if eval "$2"; then echo "ok - $1"; else echo "FAIL - $1" && fail=1; fi; }

cat >"$tmp/bench" <<'SH'
#!/usr/bin/env bash
echo "bench $* SG_PROFILE_FIRST_STEP=${SG_PROFILE_FIRST_STEP:-} SG_CONV_TC=${SG_CONV_TC:-} SG_TC_HALO=${SG_TC_HALO:-} SG_NORM_ONEPASS=${SG_NORM_ONEPASS:-}" >>"$FAKE_CALLS"
SH
cat >"$tmp/ncu" <<'SH'
#!/usr/bin/env bash
[ "${1:-}" = --version ] && { echo "NVIDIA (R) Nsight Compute Command Line Profiler"; echo "Version fake"; exit 0; }
log=
while [ $# -gt 0 ]; do
    case $1 in
    --log-file) log=$2 && shift 2 ;;
    --profile-from-start) [ "$2" = off ] || exit 3; shift 2; saw_off=1 ;;
    --cache-control | --clock-control | --section | --metrics | --page | --target-processes) shift 2 ;;
    --kernel-name | --launch-count | --filter-mode) echo "ncu $1 $2" >>"$FAKE_CALLS" && shift 2 ;;
    --csv) shift ;;
    -*) echo "fake ncu: unknown flag $1" >&2 && exit 4 ;;
    *) break ;;
    esac
done
[ -n "${saw_off:-}" ] || { echo "fake ncu: no --profile-from-start off" >&2; exit 5; }
"$@" || exit 6
case "$*" in *--fuse\ 1*) [ -n "${FAKE_NCU_FAIL_FUSED:-}" ] && exit 7 ;; esac
cat >"$log" <<'CSV'
"ID","Kernel Name","Grid Size","Block Size","dram__bytes_read.sum","dram__bytes_write.sum","gpu__time_duration.sum"
"","","","","byte","byte","nsecond"
"0","norm_apply_kernel<unsigned short, 8, false>","(4, 128, 1)","(256, 1, 1)","1000000","1000000","2000"
CSV
SH
chmod +x "$tmp/bench" "$tmp/ncu"
export FAKE_CALLS=$tmp/calls.txt

# run NAME [VAR=VALUE...]: the script into $tmp/NAME
run() {
    local name=$1
    shift
    : >"$FAKE_CALLS"
    env GPU_PROFILE_BIN="$tmp/bench" NCU="$tmp/ncu" "$@" bash "$root/tools/gpu_profile.sh" \
        "$tmp/$name" >"$tmp/$name.out" 2>&1
    echo $? >"$tmp/$name.rc"
    cp "$FAKE_CALLS" "$tmp/$name.calls"
}

run none NCU=/nonexistent/ncu
ok "no ncu: SKIP, exit 0" '[ $(cat $tmp/none.rc) -eq 0 ] && grep -q "SKIP: no ncu (/nonexistent/ncu)" $tmp/none.out && [ ! -s $tmp/none.calls ]'

run all
cat "$tmp/all.out"
ok "all: exit 0" '[ $(cat $tmp/all.rc) -eq 0 ]'
ok "four configurations, the profiled first step each" '[ $(grep -c "SG_PROFILE_FIRST_STEP=1 " $tmp/all.calls) -eq 4 ]'
ok "default: the plain step" 'grep -q "^bench --backend cuda --model unet_cifar --batch 128 --precision bf16 --warmup 1 --iters 1 --no-breakdown SG_PROFILE_FIRST_STEP=1 SG_CONV_TC= SG_TC_HALO= SG_NORM_ONEPASS=$" $tmp/all.calls'
ok "norm_onepass: the plain step, one pass" 'grep -q "no-breakdown SG_PROFILE_FIRST_STEP=1 SG_CONV_TC= SG_TC_HALO= SG_NORM_ONEPASS=1$" $tmp/all.calls'
ok "wgmma_unfused: its environment and flags" 'grep -q "no-breakdown --conv-engine own --fuse 0 SG_PROFILE_FIRST_STEP=1 SG_CONV_TC=wgmma SG_TC_HALO=all SG_NORM_ONEPASS=$" $tmp/all.calls'
ok "wgmma_fused: its environment and flags" 'grep -q "no-breakdown --conv-engine own --fuse 1 SG_PROFILE_FIRST_STEP=1 SG_CONV_TC=wgmma SG_TC_HALO= SG_NORM_ONEPASS=$" $tmp/all.calls'
ok "no tuned step without a table" '! grep -q engine-table $tmp/all.calls && [ ! -e $tmp/all/ncu-tuned.md ]'
ok "summaries and raw files" 'for n in default norm_onepass wgmma_unfused wgmma_fused; do grep -q "^| \`norm_apply_kernel\` | 1 | 0.002 | 100.0 | 2.0 | 1000 |" $tmp/all/ncu-$n.md && [ -s $tmp/all/ncu-$n.csv ] || exit 1; done'
ok "log lines" '[ $(grep -c "^gpu_profile: [a-z_]*: 1 kernels, 0.002 ms summed" $tmp/all/profile.log) -eq 4 ] && grep -q "0 configuration(s) failed" $tmp/all/profile.log'

run sel GPU_PROFILE_CONFIGS='^(default|tuned)$' GPU_PROFILE_TABLE=/x/table.json
ok "selected: default and tuned only, the table given" '[ $(cat $tmp/sel.rc) -eq 0 ] && [ $(wc -l <$tmp/sel.calls) -eq 2 ] && grep -q "no-breakdown --engine-table /x/table.json SG_PROFILE" $tmp/sel.calls'

ok "no kernel filter unless asked" '! grep -q "^ncu --" $tmp/all.calls'

run short GPU_PROFILE_CONFIGS='^default$' GPU_PROFILE_KERNELS='regex:^norm_' GPU_PROFILE_LAUNCHES=1 \
    GPU_PROFILE_FILTER=per-launch-config
ok "short: the kernel filter, launch count and filter mode given to ncu, the default step only" '[ $(cat $tmp/short.rc) -eq 0 ] && grep -qx "ncu --kernel-name regex:^norm_" $tmp/short.calls && grep -qx "ncu --launch-count 1" $tmp/short.calls && grep -qx "ncu --filter-mode per-launch-config" $tmp/short.calls && [ $(grep -c "^bench " $tmp/short.calls) -eq 1 ] && grep -q "a sample: --kernel-name regex:^norm_ --launch-count 1 --filter-mode per-launch-config" $tmp/short/ncu-default.md'

run bad FAKE_NCU_FAIL_FUSED=1
ok "a failing configuration: exit 1, named, the others ran" '[ $(cat $tmp/bad.rc) -eq 1 ] && grep -q "wgmma_fused: FAIL: ncu exit 7" $tmp/bad.out && [ $(grep -c "0.002 ms summed" $tmp/bad.out) -eq 3 ] && grep -q "1 configuration(s) failed" $tmp/bad.out'
exit $fail
