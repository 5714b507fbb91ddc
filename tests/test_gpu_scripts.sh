#!/usr/bin/env bash
# test_gpu_scripts.sh BENCH — the device scripts, checked without a GPU, against the tools they
# drive. A GPU call is 15 minutes a session at most, and a script that does not parse, a bench
# flag renamed since the script was written, or a knob the code no longer reads would waste it
# silently (a variant that fails prints its exit status and the call goes on). So:
# 1. every shell script (tools/, tests/, .ci/) parses (bash -n);
# 2. shellcheck finds no error in the device scripts (tools/*.sh; SKIP where it is missing);
# 3. every flag tools/gpu_call.sh, tools/gpu_profile.sh and tools/bench.sh pass to the bench
#    binary is one that `bench --help` names, and every SG_* variable a gpu_call.sh variant sets
#    is one the code reads (getenv) and the help or docs name.
# With --rehearse, instead: 4. every gpu_call.sh variant run with its environment and flags by
#    bench on the host emulation of CUDA (tests/cuda_host: the real backend over a stand-in
#    runtime), on unet_tiny at batch 2, one warmup step and one replay; the engine-table ones with
#    a table the emulation tunes first. A knob value bench refuses, a flag combination it rejects
#    or a variant that fails to plan or run fails here, not in the call.
# With --launch-audit, instead: 5. the same calls at the shapes the GPU runs them, on the emulation
#    with SG_SIM_LAUNCH_ONLY=1 (every kernel launch and GEMM checked as a GPU would refuse it:
#    grid and block limits, the registers and shared memory ptxas gave the kernel, the opt-in
#    attribute, pointers in live allocations, GEMM operand extents; recorded and replayed, never
#    executed): gpu_call.sh's engine tuning at unet_cifar batch 128 bf16 (every candidate engine
#    of every layer launched), bench.sh's stepgraph rows (unet_cifar 128 and 8 bf16 with the
#    per-layer table, the tuned table's row, unet_adm64 32 fp32 with the table and as Winograd),
#    every gpu_call.sh variant at its own model and batch, and every model at its preset batch
#    in both precisions on the default and the own engines. The other tests run these kernels
#    at small shapes; a launch configuration that only the production shapes reach (a grid past
#    65535 in y, a staging buffer past the shared-memory limit at 256 channels) fails here. The
#    results are not computed: the losses are NaN, and nothing here checks a value.
# Usage: tests/test_gpu_scripts.sh build/bench
#        tests/test_gpu_scripts.sh --rehearse build/tests/bench_cuda_host
#        tests/test_gpu_scripts.sh --launch-audit build/tests/bench_cuda_host
set -u
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
rehearse=0 audit=0
[ "${1:-}" = --rehearse ] && rehearse=1 && shift
[ "${1:-}" = --launch-audit ] && audit=1 && shift
bench=${1:?usage: test_gpu_scripts.sh [--rehearse|--launch-audit] BENCH}
source "$(dirname "${BASH_SOURCE[0]}")/ok.sh" # pass, fail, ok NAME CONDITION
joined() { sed -e 's/[[:space:]]#.*$//' -e '/^[[:space:]]*#/d' "$1" | sed -e ':a' -e '/\\$/N; s/\\\n//; ta'; }
# one of gpu_call.sh's "variant NAME [VAR=VALUE...] -- [flags]" lines (joined) into vname,
# venvs and vflags; "$table" in it is the caller's
parse_variant() {
    eval "set -- $1"
    vname=$2 venvs=() vflags=()
    shift 2
    while [ $# -gt 0 ] && [ "$1" != -- ]; do venvs+=("$1") && shift; done
    shift
    vflags=("$@")
}

if [ $audit = 1 ]; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    export SG_SIM_ORDER=forward SG_SIM_LAUNCH_ONLY=1
    # audit NAME [VAR=VALUE...] -- BENCH FLAGS: one bench run, its launches checked
    audit() {
        local name=$1 envs=()
        shift
        while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1") && shift; done
        shift
        env "${envs[@]}" "$bench" --backend cuda --warmup 1 --iters 1 --json "$@" \
            >"$tmp/$name.json" 2>"$tmp/$name.log"
        rc=$?
        ok "launch audit: $name (${envs[*]} $*)" \
            '[ $rc -eq 0 ] && grep -q "\"ms_per_step\"" "$tmp/$name.json" || { echo "exit $rc"; grep -m3 "sg_cuda_sim\|error\|refused" "$tmp/$name.log"; tail -n 2 "$tmp/$name.log"; false; }'
        n=$((n + 1))
    }
    n=0
    table=$tmp/engine-table.json
    "$bench" --backend cuda --model unet_cifar --batch 128 --precision bf16 --warmup 1 --iters 1 \
        --knob-time 1 --gemm-time 1 --cudnn-time 1 --tune-engines "$table" >"$tmp/tune.txt" \
        2>"$tmp/tune.log"
    rc=$?
    ok "launch audit: the engine tuning at unet_cifar 128 bf16 writes a table" \
        '[ $rc -eq 0 ] && [ -s "$table" ] || { echo "exit $rc"; grep -m3 "sg_cuda_sim" "$tmp/tune.log"; tail -n 3 "$tmp/tune.log"; false; }'
    # bench.sh's stepgraph rows: sg (with the per-layer table), sg_table, sg_env (a switch)
    while read -r kind name _ model batch prec _ var; do
        case $model in '$C') model=unet_cifar ;; '$A') model=unet_adm64 ;; esac
        set -- --model "$model" --batch "$batch" --precision "$prec"
        case $kind in
        sg) audit "$name" -- "$@" ;;
        sg_table) audit "$name" -- "$@" --engine-table "$table" --no-breakdown ;;
        sg_env) audit "$name" "$var" -- "$@" --no-breakdown ;;
        esac
    done < <(grep -E '^sg(_table|_env)? sg_' "$root/tools/bench.sh")
    ok "launch audit: bench.sh's stepgraph rows found" '[ $n -ge 6 ]'
    rows=$n
    # gpu_call.sh's variants: unet_cifar 128 bf16 unless they say otherwise, the per-layer table
    # where gpu_call.sh's default GPU_CALL_BREAKDOWN (gpu_call_targets.sh's) asks for it
    # shellcheck source=tools/gpu_call_targets.sh
    source "$root/tools/gpu_call_targets.sh"
    ok "launch audit: gpu_call_targets.sh names the variants with a breakdown" \
        '[ -n "${SG_GPU_CALL_BREAKDOWN:-}" ]'
    while read -r line; do
        parse_variant "$line"
        bd=--no-breakdown
        [[ $vname =~ $SG_GPU_CALL_BREAKDOWN ]] && bd=
        audit "variant_$vname" "${venvs[@]}" -- --model unet_cifar --batch 128 --precision bf16 \
            $bd "${vflags[@]}"
    done < <(joined "$root/tools/gpu_call.sh" | grep -E '^[[:space:]]*variant [a-z]')
    ok "launch audit: gpu_call.sh's variants found ($((n - rows)))" '[ $((n - rows)) -ge 10 ]'
    # what a user trains first: every model at its preset batch, both precisions, the default
    # engines and every conv on own (bf16: on the mma.sync and the wgmma kernels, attention fused)
    for m in unet_fmnist unet_tiny unet_cifar unet_adm64; do
        audit "${m}_fp32" -- --model $m --precision fp32 --no-breakdown
        audit "${m}_fp32_own" SG_ATTN=fused -- --model $m --precision fp32 --no-breakdown \
            --conv-engine own
        audit "${m}_bf16" -- --model $m --precision bf16 --no-breakdown
        audit "${m}_bf16_own" SG_ATTN=fused -- --model $m --precision bf16 --no-breakdown \
            --conv-engine own --fuse 1
        audit "${m}_bf16_wgmma" SG_CONV_TC=wgmma -- --model $m --precision bf16 --no-breakdown \
            --conv-engine own --fuse 1
    done
    echo "gpu_call launch audit: $pass passed, $fail failed"
    [ "$fail" -eq 0 ]
    exit
fi

if [ $rehearse = 1 ]; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    export SG_SIM_ORDER=forward
    base=(--backend cuda --model unet_tiny --batch 2 --precision bf16)
    # the table the variants that name "$table" get (gpu_call.sh: bench --tune-engines)
    table=$tmp/engine-table.json
    "$bench" "${base[@]}" --warmup 0 --iters 1 --knob-time 1 --gemm-time 1 --cudnn-time 1 \
        --tune-engines "$table" >"$tmp/tune.txt" 2>"$tmp/tune.log"
    ok "rehearsal: the tuning writes a table" '[ -s "$table" ] || tail -n 5 "$tmp/tune.log"'
    n=0
    while read -r line; do
        parse_variant "$line"
        name=$vname envs=("${venvs[@]}")
        set -- "${vflags[@]}"
        # a variant's model and batch stay unet_tiny's 2 here (the emulation runs every thread
        # on the CPU: unet_adm64 at batch 32 would take hours); its other flags are its own
        flags=()
        while [ $# -gt 0 ]; do
            case $1 in --model | --batch) shift 2 ;; *) flags+=("$1") && shift ;; esac
        done
        set -- "${flags[@]}"
        env "${envs[@]}" "$bench" "${base[@]}" --warmup 1 --iters 1 --no-breakdown --json "$@" \
            >"$tmp/$name.json" 2>"$tmp/$name.log"
        rc=$?
        ok "rehearsal: variant $name (${envs[*]} $*)" \
            '[ $rc -eq 0 ] && grep -q "\"ms_per_step\"" "$tmp/$name.json" || { echo "exit $rc"; tail -n 3 "$tmp/$name.log"; false; }'
        n=$((n + 1))
    done < <(joined "$root/tools/gpu_call.sh" | grep -E '^[[:space:]]*variant [a-z]')
    ok "rehearsal: variants found ($n)" '[ $n -ge 10 ]'
    # a table that puts layers on cuDNN, and the step it tunes getting the engines it timed (on
    # a GPU cuDNN wins layers; the emulated engines, naive loops, lose every one unless
    # SG_SIM_CUDNN_SPEED makes their executions count faster on the events' clock)
    SG_SIM_CUDNN_SPEED=50 "$bench" "${base[@]}" --warmup 0 --iters 1 --knob-time 0 \
        --gemm-time 0 --cudnn-time 1 --tune-engines "$tmp/dnn-table.json" >"$tmp/dnn-tune.txt" \
        2>"$tmp/dnn-tune.log"
    rc=$?
    "$bench" "${base[@]}" --warmup 1 --iters 1 --no-breakdown --json \
        --engine-table "$tmp/dnn-table.json" >"$tmp/dnn.json" 2>"$tmp/dnn.log"
    rc=$((rc + $?))
    ok "rehearsal: a tuned table's cuDNN engines, each one the step's (cudnn_prefs_met)" \
        '[ $rc -eq 0 ] && python3 - "$tmp/dnn-table.json" "$tmp/dnn.json" <<PY || { tail -n 3 "$tmp/dnn-tune.log" "$tmp/dnn.log"; false; }
import json, sys
t, e = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))["env"]
named = [x for x in t["layers"] if x["engine"] == "cudnn" and x.get("cudnn_engines")]
assert named, "no layer on cuDNN in the tuned table"
# every plan the step pinned was asked for by the table and got what it asked
assert e["cudnn_plans"] > 0 and e["cudnn_prefs_met"] == e["cudnn_plans"], e
assert e["cudnn_prefs_missed"] == 0, e
PY'
    # the same table where the device cannot build the plans of the engine its first cuDNN
    # entry names (another GPU or cuDNN than the tuning's; the emulation's deterministic engines
    # are 0 and 1, the timing chooses between them): each wish for it said and chosen afresh on
    # the other, the run goes on
    gone=$(python3 -c 'import json, re, sys
t = json.load(open(sys.argv[1]))
print(re.match(r"e(\d+)", next(v for x in t["layers"] for v in x.get("cudnn_engines", {}).values()))[1])' \
        "$tmp/dnn-table.json" 2>/dev/null)
    SG_SIM_CUDNN_PLANS=$((1 - ${gone:-0})) "$bench" "${base[@]}" --warmup 1 --iters 1 \
        --no-breakdown --json --engine-table "$tmp/dnn-table.json" >"$tmp/dnn0.json" \
        2>"$tmp/dnn0.log"
    rc=$?
    ok "rehearsal: a tuned engine the device cannot build: said, chosen afresh (cudnn_prefs_missed)" \
        '[ $rc -eq 0 ] && [ -n "$gone" ] && python3 - "$tmp/dnn0.json" "$tmp/dnn0.log" "$gone" <<PY || { tail -n 3 "$tmp/dnn0.log"; false; }
import json, re, sys
e = json.load(open(sys.argv[1]))["env"]
said = re.findall(r"stepgraph: warning: cuDNN conv .*: the recorded engine e(\d+): .*; choosing afresh",
                  open(sys.argv[2]).read())
assert said and set(said) == {sys.argv[3]}, said
assert e["cudnn_prefs_missed"] == len(said), (e["cudnn_prefs_missed"], len(said))
assert e["cudnn_prefs_met"] + e["cudnn_prefs_missed"] == e["cudnn_plans"], e
PY'
    echo "gpu_call rehearsal: $pass passed, $fail failed"
    [ "$fail" -eq 0 ]
    exit
fi

# 1. syntax
for f in "$root"/tools/*.sh "$root"/tests/*.sh "$root"/.ci/run "$root"/.ci/*.sh; do
    ok "bash -n $(basename "$f")" 'bash -n "$f"'
done

# 2. shellcheck's errors (warnings are style here)
if command -v shellcheck >/dev/null 2>&1; then
    ok "shellcheck -S error tools/*.sh" 'shellcheck -S error "$root"/tools/*.sh'
else
    echo "SKIP: shellcheck is not installed (bash -n still ran)"
fi

# 3. the bench command lines: continuation lines joined, comments dropped; the flags after
# "$bin" (the bench binary in all three scripts) and after a variant's " -- "
help=$("$bench" --help 2>&1)
ok "bench --help" '[ -n "$help" ] && grep -q -- "--tune-engines" <<<"$help"'
flags=$(for f in gpu_call.sh gpu_profile.sh bench.sh; do
    joined "$root/tools/$f" | grep -E '"\$bin"|^[[:space:]]*variant ' |
        sed -E -e 's/.*"\$bin"//' -e 's/^[[:space:]]*variant [^-]* -- //' |
        grep -oE '(^|[[:space:]])--[a-z][a-z0-9-]*' | tr -d ' \t'
done | sort -u)
nflags=$(wc -w <<<"$flags")
ok "flags found in the scripts ($nflags)" '[ "$nflags" -ge 10 ]'
for fl in $flags; do
    ok "bench names $fl" 'grep -qE -- "(^|[[:space:]])$fl([[:space:]]|$)" <<<"$help"'
done
knobs=$(joined "$root/tools/gpu_call.sh" | grep -E '^[[:space:]]*variant ' |
    grep -oE '(^|[[:space:]])SG_[A-Z0-9_]+=' | tr -d ' \t=' | sort -u)
nknobs=$(wc -w <<<"$knobs")
ok "knobs found in gpu_call.sh's variants ($nknobs)" '[ "$nknobs" -ge 5 ]'
for k in $knobs; do
    ok "the code reads $k" 'grep -rqF "getenv(\"$k\")" "$root"/graph "$root"/kernels "$root"/tools "$root"/common'
    ok "the help or docs name $k" 'grep -qF "$k" <<<"$help" || grep -rqF "$k" "$root"/docs "$root"/README.md'
done

# 4. gpu_call.sh's order: the torch.compile rows (the side-by-side table) right after the main
# bench rows, before the engine tuning, the profile and the variants, each of which can take the
# rest of a call (the third GPU session's tuning did: its compile rows found 88 s left)
steps=$(joined "$root/tools/gpu_call.sh" | grep -nE '^(bench (main|compile) |if .*GPU_CALL_(TUNE|PROFILE)|if .*GPU_CALL_VARIANTS)' |
    sed -E 's/^([0-9]+):(bench (main|compile)|if .*GPU_CALL_(TUNE|PROFILE|VARIANTS)).*/\3\4/' | tr '\n' ' ')
ok "gpu_call.sh's order: main, compile, tune, profile, variants ($steps)" \
    '[ "$steps" = "main compile TUNE PROFILE VARIANTS " ]'

# 5. gpu_call.sh's schedule, run on stand-ins: a copy of tools/ whose gpu_check.sh and bench.sh
# record what they were given (the budget each bench run gets, its jobs) and take no time.
# The main rows must leave the compile rows GPU_CALL_COMPILE_S (the fourth session's compile
# and reduce-overhead took 100 and 86 s; with the rows added since, a main run given the
# whole rest could spend what reduce-overhead, the best PyTorch mode, needs). The stand-ins take
# no time, so a budget is the call's total less the reserve, less the seconds a loaded machine
# took to get there (30 s allowed: without the reserve it would read 560)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/tools" "$stage/build-gpu" "$stage/out"
cp "$root/tools/gpu_call.sh" "$root/tools/gpu_call_targets.sh" "$stage/tools/"
printf '#!/usr/bin/env bash\necho "check deadline $GPU_CHECK_DEADLINE_S" >>"%s/rec"\n' \
    "$stage" >"$stage/tools/gpu_check.sh"
printf '#!/usr/bin/env bash\necho "bench $(basename "$1") $BENCH_BUDGET_S $BENCH_JOBS" >>"%s/rec"\n' \
    "$stage" >"$stage/tools/bench.sh"
printf '#!/bin/sh\nexit 0\n' >"$stage/build-gpu/bench"
chmod +x "$stage/tools/"*.sh "$stage/build-gpu/bench"
run_call() {
    rm -f "$stage/rec"
    env "$@" GPU_CALL_TUNE=0 GPU_CALL_PROFILE=0 GPU_CALL_VARIANTS=0 PYTHON=true \
        bash "$stage/tools/gpu_call.sh" "$stage/out" >/dev/null 2>&1
}
budget_of() { awk -v r="$1" '$1 == "bench" && $2 == r { print $3 }' "$stage/rec"; }
run_call GPU_CALL_S=560
main_b=$(budget_of main) compile_b=$(budget_of compile)
ok "gpu_call.sh: the main rows leave 200 s to the compile rows (main ${main_b}s, compile ${compile_b}s of 560)" \
    '[ -n "$main_b" ] && [ "$main_b" -ge 330 ] && [ "$main_b" -le 360 ] && [ "$compile_b" -ge 530 ]'
ok "gpu_call.sh: the check, then main, then compile" \
    '[ "$(cut -d" " -f1-2 "$stage/rec" | tr "\n" ,)" = "check deadline,bench main,bench compile," ]'
run_call GPU_CALL_S=560 GPU_CALL_COMPILE_S=300
main_b=$(budget_of main)
ok "gpu_call.sh: GPU_CALL_COMPILE_S sets the share (main ${main_b}s)" \
    '[ -n "$main_b" ] && [ "$main_b" -ge 230 ] && [ "$main_b" -le 260 ]'
run_call GPU_CALL_S=230
ok "gpu_call.sh: no main run under 40 s ($(tr "\n" ";" <"$stage/rec"))" \
    '[ -z "$(budget_of main)" ] && [ -n "$(budget_of compile)" ]'

echo "gpu_scripts: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
