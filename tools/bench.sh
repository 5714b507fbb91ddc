#!/usr/bin/env bash
# bench.sh — stepgraph vs PyTorch on one GPU, in one command (issue 7; DESIGN.md "Targets").
#
#   tools/bench.sh [OUTDIR]        # OUTDIR defaults to $OUT, else build-bench-runs/<time>
#
# Sources tools/gpu_env.sh (nvcc, the carried .deps libraries, RPATH: the same build environment
# as tools/gpu_check.sh), builds build-gpu/bench (sm_90), then for each row
#   unet_cifar batch 128 bf16 | unet_cifar batch 8 bf16 | unet_adm64 batch 32 fp32
# runs `bench --backend cuda --json` (the replayed CUDA graph; never the CPU; for unet_cifar b128
# also with the engine table measured on this GPU model, for unet_adm64 also with
# SG_CONV_WINO=1) and
# tools/torch_ref/bench.py in the modes
# eager, compile, max-autotune-no-cudagraphs and reduce-overhead (adm64 with TF32 off and on),
# one process per job, and assembles bench/results/<date>-<gpu>.md (copied to OUTDIR too):
# the side-by-side tables, ratios to the best PyTorch mode, the targets met / not met, the
# per-op breakdown, the environment, the commit and the raw logs.
#
# Robust by design: a job that fails or times out is recorded with its reason and the script
# goes on. Loud where it matters: no GPU visible (nvidia-smi -L fails) stops it at once, and a
# failed build, no stepgraph job that succeeded, or a stepgraph result from any backend but
# CUDA makes the exit status 1 with one line saying why (the report is still written).
# Everything fits an overall budget (BENCH_BUDGET_S, default 480 s, counted from the start,
# build included): the fast jobs (stepgraph, eager) run first, the slow torch.compile
# modes last, most important first, and a job that no longer fits is recorded as skipped.
#
# Environment:
#   BENCH_BUDGET_S      overall budget in seconds (default 480)
#   BENCH_JOBS          extended regex: run only the jobs whose name matches (e.g. 'compile')
#   BENCH_BIN           a built bench binary: skip the build
#   BENCH_BUILD_DIR     build directory (default build-gpu); where tools/gpu_check.sh unpacked
#                       the carried prebuilt binaries into it (its prebuilt.stamp equals this
#                       tree's stamp), its bench is taken as it is, without a build
#   BENCH_BUILD_CAP_S   at most this many seconds for the build (default 300)
#   BENCH_CUDA_ARCH     CMAKE_CUDA_ARCHITECTURES (default 90)
#   BENCH_SG_ITERS / BENCH_SG_WARMUP       stepgraph replays / warm-up (default 50 / 10)
#   BENCH_TORCH_STEPS / BENCH_TORCH_WARMUP PyTorch timed / warm-up steps (default 50 / 10)
#   BENCH_CAP_S         at most this many seconds for any one job (default: per job, 150-420)
#   BENCH_COMPILE_MIN_S budget that must be left to start a compile-mode job (default 90/150)
#   BENCH_TORCH         the PyTorch bench command (default "$PYTHON tools/torch_ref/bench.py")
#   BENCH_RESULTS_DIR   where the report goes (default bench/results)
#   BENCH_GPU_NAME      override the GPU name (nvidia-smi's) used in the report's file name
#   BENCH_ENGINE_TABLE  the engine table of the job sg_cifar_b128_bf16_table (default
#                       bench/tables/<gpu>-unet_cifar-b128-bf16.json, <gpu> as in the report's
#                       name: the table measured on this GPU model; none there, on an H100
#                       or H200: the other's, its row saying where it was measured; else the
#                       job is recorded as skipped)
#   BENCH_COMMIT        the commit to record where the tree is not a git checkout
#   PYTHON              python with torch (default python3)
# Several calls can fill one report: give each its own OUTDIR, then
#   python3 tools/bench_report.py report --out bench/results/X.md DIR1 DIR2 ...
set -u
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 1
start=$(date +%s)
budget=${BENCH_BUDGET_S:-480}
out=${1:-${OUT:-build-bench-runs/$(date +%Y%m%d-%H%M%S)}}
mkdir -p "$out/jobs" || exit 1
out=$(cd "$out" && pwd)
py=${PYTHON:-python3}
report="$py $root/tools/bench_report.py"
torch_cmd=${BENCH_TORCH:-"$py $root/tools/torch_ref/bench.py"}
sg_iters=${BENCH_SG_ITERS:-50}
sg_warmup=${BENCH_SG_WARMUP:-10}
t_steps=${BENCH_TORCH_STEPS:-50}
t_warmup=${BENCH_TORCH_WARMUP:-10}
results_dir=${BENCH_RESULTS_DIR:-$root/bench/results}
filter=${BENCH_JOBS:-}
cap_max=${BENCH_CAP_S:-100000}

left() { echo $((start + budget - $(date +%s))); }
say() { echo "bench.sh: $*" >&2; }

# ---- a GPU, or nothing: stepgraph's bench must not quietly time the CPU
if ! gpu_list=$(timeout 30 nvidia-smi -L 2>&1) || [ -z "$gpu_list" ]; then
    say "FAIL: no GPU visible (nvidia-smi -L: $(echo "$gpu_list" | head -n 1)); nothing was timed"
    exit 1
fi

# ---- environment (first: it is cheap and the report needs it even if all else fails)
$report env --out "$out/env.json" --budget "$budget" --python "$py" --repo "$root" \
    ${BENCH_GPU_NAME:+--gpu-name "$BENCH_GPU_NAME"} ${BENCH_COMMIT:+--commit "$BENCH_COMMIT"} ||
    say "environment probe failed"

# ---- build
bin=${BENCH_BIN:-}
build_fail=""
if [ -z "$bin" ]; then
    bdir=${BENCH_BUILD_DIR:-build-gpu}
    arch=${BENCH_CUDA_ARCH:-90}
    t=$(left)
    bcap=${BENCH_BUILD_CAP_S:-300}
    [ "$t" -gt "$bcap" ] && t=$bcap
    if [ "$t" -lt 30 ]; then
        build_fail="no time left to build (budget ${budget}s)"
    else
        # shellcheck source=tools/gpu_env.sh
        if ! SG_CUDA_ARCH=$arch source "$root/tools/gpu_env.sh" 2>"$out/build.log"; then
            say "building $bdir/bench (sm_$arch), log $out/build.log"
            rc=1
        elif [ -x "$bdir/bench" ] && [ -f "$bdir/prebuilt.stamp" ] &&
            [ "$(cat "$bdir/prebuilt.stamp")" = "$(sg_gpu_source_stamp "$root")" ]; then
            say "taking the prebuilt $bdir/bench (its stamp is this tree's: no build)"
            rc=0
        else
            say "building $bdir/bench (sm_$arch), log $out/build.log"
            timeout -k 10 "$t" bash -c 'cmake -S "$0" -B "$1" "${@:3}" && cmake --build "$1" \
                --target bench -j "$2"' "$root" "$bdir" "$(nproc)" "${SG_GPU_CMAKE_ARGS[@]}" \
                >>"$out/build.log" 2>&1
            rc=$?
        fi
        if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
            build_fail="build timed out after ${t}s (see build.log)"
        elif [ $rc -ne 0 ]; then
            msg=$(grep -m1 -E 'error:|Error [0-9]|undefined reference|CMake Error|gpu_env: .*(no |not |failed)' \
                "$out/build.log")
            [ -z "$msg" ] && msg=$(grep -v '^\s*$' "$out/build.log" | tail -n 1)
            build_fail="build failed (exit $rc): $(echo "$msg" | cut -c1-200)"
        elif [ ! -x "$bdir/bench" ]; then
            build_fail="the build produced no $bdir/bench (is sg_graph/sg_data configured?)"
        fi
    fi
    case $bdir in /*) bin=$bdir/bench ;; *) bin=$root/$bdir/bench ;; esac
    [ -n "$build_fail" ] && say "$build_fail"
fi

# ---- jobs
# job NAME ROW IMPL MODEL BATCH PREC MODE TF32 CAP_S MIN_S -- COMMAND...
# (job_skip, set for the call: record the job as skipped with that reason instead of running it)
job() {
    local name=$1 row=$2 impl=$3 model=$4 batch=$5 prec=$6 mode=$7 tf32=$8 cap=$9 min=${10}
    shift 11
    if [ -n "$filter" ] && ! echo "$name" | grep -Eq -- "$filter"; then return; fi
    local o="$out/jobs/$name.out" l="$out/jobs/$name.log" rec="$out/jobs/$name.json"
    local rest status=ok reason="" rc=0 t0 t1
    rest=$(left)
    local common=(--out "$rec" --job "$name" --row "$row" --impl "$impl" --model "$model"
        --batch "$batch" --precision "$prec" --mode "$mode" --tf32 "$tf32" --cmd "$*"
        --note "${job_note:-}")
    if [ "$impl" = stepgraph ] && [ -n "$build_fail" ]; then
        $report record "${common[@]}" --status failed --reason "$build_fail"
        say "$name: failed ($build_fail)"
        return
    fi
    if [ -n "${job_skip:-}" ]; then
        $report record "${common[@]}" --status skipped --reason "$job_skip"
        say "$name: skipped ($job_skip)"
        return
    fi
    if [ "$rest" -lt "$min" ]; then
        reason="budget spent: ${rest}s of ${budget}s left, this job needs at least ${min}s"
        $report record "${common[@]}" --status skipped --reason "$reason"
        say "$name: skipped ($reason)"
        return
    fi
    [ "$cap" -gt "$cap_max" ] && cap=$cap_max
    local t=$((rest < cap ? rest : cap))
    say "$name: running (limit ${t}s, ${rest}s of the budget left)"
    t0=$(date +%s)
    timeout -k 10 "$t" "$@" >"$o" 2>"$l" </dev/null
    rc=$?
    t1=$(date +%s)
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        status=timeout reason="timed out after ${t}s"
    elif [ $rc -ne 0 ]; then
        status=failed reason="exit $rc: $(grep -v '^\s*$' "$l" | tail -n 1 | cut -c1-300)"
    fi
    $report record "${common[@]}" --status "$status" --reason "$reason" --rc "$rc" \
        --seconds $((t1 - t0)) --stdout "$o" --log "$l"
    say "$name: $(
        $py -c 'import json,sys; r=json.load(open(sys.argv[1])); ms=(r.get("result") or {}).get("ms_per_step")
print(r["status"] + (": %.3f ms/step" % ms if r["status"] == "ok" and ms else "") + ("" if r["status"] == "ok" else ": " + r["reason"]))' "$rec" 2>/dev/null || echo "$status")"
}

sg() { # NAME ROW MODEL BATCH PREC
    job "$1" "$2" stepgraph "$3" "$4" "$5" graph "" 150 20 -- "$bin" --backend cuda --model "$3" \
        --batch "$4" --precision "$5" --warmup "$sg_warmup" --iters "$sg_iters" --json
}
# the same step planned with an engine table measured on this GPU model (bench --tune-engines:
# each layer's engine chosen by its measured time, then pinned; README "engine table"), the way a
# tuned run trains; without the per-op breakdown (the untuned row has it)
# Where bench/tables has none for this GPU, a table of another GPU of the same chip stands in,
# the row saying where it was measured: the H100 and the H200 are both GH100 (sm_90, 132 SMs in
# their SXM forms; the libraries offer both the same sm_90 engines); a table names engines, algorithms and
# knobs, all checked when a run loads it, so it plans and runs the same way on either, only
# its choices were timed on the other.
sg_table() { # NAME ROW MODEL BATCH PREC
    local gpu table skip= note= f
    gpu=$($report name "$out")  # <date>-<gpu>.md
    gpu=${gpu#????-??-??-}
    gpu=${gpu%.md}
    table=${BENCH_ENGINE_TABLE:-$root/bench/tables/$gpu-$3-b$4-$5.json}
    if [ -z "${BENCH_ENGINE_TABLE:-}" ] && [ ! -f "$table" ] && [[ $gpu =~ ^nvidia-h[12]00 ]]; then
        for f in "$root"/bench/tables/nvidia-h[12]00*-"$3-b$4-$5".json; do
            [ -f "$f" ] || continue
            note="measured on $($py -c 'import json,sys; print(json.load(open(sys.argv[1])).get("device") or "another GPU")' "$f" 2>/dev/null || echo "another GPU")"
            say "$1: no engine table for $gpu; taking $(basename "$f") ($note, the same chip)"
            table=$f
            break
        done
    fi
    [ -f "$table" ] || skip="no engine table for this GPU ($table)"
    job_skip=$skip job_note=$note job "$1" "$2" stepgraph "$3" "$4" "$5" table "" 150 20 -- "$bin" \
        --backend cuda --model "$3" --batch "$4" --precision "$5" --warmup "$sg_warmup" \
        --iters "$sg_iters" --json --engine-table "$table" --no-breakdown
}
# the same step with one environment switch set (MODE names it in the report), without the
# breakdown: wino, the fp32 3x3 convolutions as Winograd F(2x2, 3x3) (SG_CONV_WINO=1, off by
# default until a GPU times it; kernels/cuda/conv_wino.cu; the default row's per-layer table
# times every such node both ways: wino_ms, direct_ms); f32tc, the own engine's fp32 tiles on
# the tensor cores (SG_CONV_F32_TC=1: three TF32 products each, kernels/cuda/conv.cu's
# conv_tile_mma3; off by default until a GPU times it)
sg_env() { # NAME ROW MODEL BATCH PREC MODE VAR=VALUE
    job "$1" "$2" stepgraph "$3" "$4" "$5" "$6" "" 150 20 -- env "$7" "$bin" --backend cuda \
        --model "$3" --batch "$4" --precision "$5" --warmup "$sg_warmup" --iters "$sg_iters" \
        --json --no-breakdown
}
pt() { # NAME ROW MODEL BATCH PREC MODE TF32 CAP MIN (MIN "c": a compile mode)
    local min=$9
    [ "$min" = c ] && min=${BENCH_COMPILE_MIN_S:-90}
    [ "$min" = C ] && min=${BENCH_COMPILE_MIN_S:-150}
    # shellcheck disable=SC2086 # torch_cmd is a command line: split it
    job "$1" "$2" torch "$3" "$4" "$5" "$6" "$7" "$8" "$min" -- $torch_cmd --model "$3" \
        --batch "$4" --precision "$5" --mode "$6" --tf32 "$7" --steps "$t_steps" \
        --warmup "$t_warmup"
}

C=unet_cifar A=unet_adm64
# bf16 rows give PyTorch TF32 on (its most favourable setting; autocast makes the convs and
# matmuls bf16 anyway); the fp32 row runs PyTorch with TF32 off and on, both reported.
# the fast jobs first: stepgraph and PyTorch eager for every row
sg sg_cifar_b128_bf16 cifar_b128_bf16 $C 128 bf16
sg_table sg_cifar_b128_bf16_table cifar_b128_bf16 $C 128 bf16
sg sg_cifar_b8_bf16 cifar_b8_bf16 $C 8 bf16
sg sg_adm64_b32_fp32 adm64_b32_fp32 $A 32 fp32
sg_env sg_adm64_b32_fp32_wino adm64_b32_fp32 $A 32 fp32 wino SG_CONV_WINO=1
sg_env sg_adm64_b32_fp32_f32tc adm64_b32_fp32 $A 32 fp32 f32tc SG_CONV_F32_TC=1
pt torch_cifar_b128_bf16_eager cifar_b128_bf16 $C 128 bf16 eager on 180 30
pt torch_cifar_b8_bf16_eager cifar_b8_bf16 $C 8 bf16 eager on 180 30
pt torch_adm64_b32_fp32_tf32off_eager adm64_b32_fp32 $A 32 fp32 eager off 180 30
pt torch_adm64_b32_fp32_tf32on_eager adm64_b32_fp32 $A 32 fp32 eager on 180 30
# then the compile modes, the ones the targets name first; skipped once the budget is spent
pt torch_cifar_b128_bf16_compile cifar_b128_bf16 $C 128 bf16 compile on 300 c
pt torch_adm64_b32_fp32_tf32off_compile adm64_b32_fp32 $A 32 fp32 compile off 300 c
pt torch_cifar_b128_bf16_reduce-overhead cifar_b128_bf16 $C 128 bf16 reduce-overhead on 300 c
pt torch_cifar_b8_bf16_reduce-overhead cifar_b8_bf16 $C 8 bf16 reduce-overhead on 300 c
pt torch_adm64_b32_fp32_tf32on_compile adm64_b32_fp32 $A 32 fp32 compile on 300 c
pt torch_cifar_b8_bf16_compile cifar_b8_bf16 $C 8 bf16 compile on 300 c
pt torch_adm64_b32_fp32_tf32off_reduce-overhead adm64_b32_fp32 $A 32 fp32 reduce-overhead off 300 c
pt torch_adm64_b32_fp32_tf32on_reduce-overhead adm64_b32_fp32 $A 32 fp32 reduce-overhead on 300 c
pt torch_cifar_b128_bf16_max-autotune-no-cudagraphs cifar_b128_bf16 $C 128 bf16 \
    max-autotune-no-cudagraphs on 420 C
pt torch_adm64_b32_fp32_tf32off_max-autotune-no-cudagraphs adm64_b32_fp32 $A 32 fp32 \
    max-autotune-no-cudagraphs off 420 C
pt torch_cifar_b8_bf16_max-autotune-no-cudagraphs cifar_b8_bf16 $C 8 bf16 \
    max-autotune-no-cudagraphs on 420 C
pt torch_adm64_b32_fp32_tf32on_max-autotune-no-cudagraphs adm64_b32_fp32 $A 32 fp32 \
    max-autotune-no-cudagraphs on 420 C

# ---- the report
name=$($report name "$out")
md="$results_dir/$name"
if $report report --out "$md" --copy "$out/$name" "$out"; then
    say "report: $md (and $out/$name); $(($(date +%s) - start))s of ${budget}s used"
else
    say "assembling the report failed"
    exit 1
fi

# ---- loud failures: no CUDA build, no stepgraph result, or a result not from CUDA
if [ -n "$build_fail" ]; then
    say "FAIL: stepgraph was not built: $build_fail"
    exit 1
fi
verdict=$($py - "$out/jobs" <<'PY'
import glob, json, os, sys
ok, wrong = 0, []
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    r = json.load(open(f))
    if r.get("impl") != "stepgraph" or r.get("status") != "ok":
        continue
    be = (r.get("result") or {}).get("backend")
    if be == "cuda":
        ok += 1
    else:
        wrong.append("%s ran on backend %s" % (r.get("job"), be))
if wrong:
    print("a stepgraph result is not from the CUDA backend: " + "; ".join(wrong))
elif not ok and glob.glob(os.path.join(sys.argv[1], "sg_*.json")):
    print("no stepgraph job succeeded on the GPU")
PY
)
if [ -n "$verdict" ]; then
    say "FAIL: $verdict"
    exit 1
fi
