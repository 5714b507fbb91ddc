#!/usr/bin/env bash
# gpu_call.sh — the most one device call can learn when a session's whole GPU time is about
# 15 minutes (one call of at most 10, after a start of one or two): the GPU check's decisive
# stages on a lean build, then the side-by-side bench's most important rows in the time left.
#
#   tools/gpu_call.sh [OUTDIR]      # OUTDIR defaults to $OUT; device tool: carry [".deps",
#                                   # ".prebuilt"]
#
# Before the call, here: tools/fetch_gpu_deps.sh (the libraries, .deps) and
# tools/gpu_prebuild.sh (the binaries, .prebuilt: about 8 MB; the check then skips its build,
# about 100 s of the call, where the pack matches the tree; else it builds as before).
# 1. tools/gpu_check.sh (GPU_CALL_CHECK_S, default 330 s): configure, build only the binaries
#    the GPU stages run, the GPU tests five at a time, verify (unet_tiny, default engine and
#    own), a 30-step unet_cifar train, verify of unet_cifar; the CPU tests are left to CI.
# 2. tools/bench.sh on the same build: stepgraph unet_cifar batch 128 and 8 bf16 and unet_adm64
#    batch 32 fp32, unet_cifar batch 128 again with the engine table bench/tables holds for
#    this GPU (sg_cifar_b128_bf16_table: the tuned step, no breakdown), unet_adm64 again with
#    Winograd and with the tiles on the tensor cores (no breakdown), PyTorch eager for each
#    (unet_adm64 with TF32 off; each with a 3-step profile: device time per kernel family;
#    about 160 s in all, the fourth session, and, not measured, some 45 s more for the three
#    added rows), within the time left but GPU_CALL_COMPILE_S (default 200 s; the rows that
#    do not fit are skipped, the PyTorch eager ones first); then its torch.compile and
#    reduce-overhead rows at batch 128 (GPU_CALL_COMPILE_JOBS: bench.sh's job regex instead),
#    100 and 86 s in the fourth session: the side-by-side table comes before everything below.
# 3. the engine table (GPU_CALL_TUNE=0: not): bench --tune-engines at unet_cifar batch 128 bf16
#    (own fused on mma.sync and on wgmma against the library side per layer, each cuDNN engine
#    chosen by timing; per layer the fastest, timed by replaying its nodes as one graph, an own
#    layer with its generation; last, each GEMM's cuBLASLt algorithm by timing), then
#    the step planned and run with that table (variant `tuned`: the table's fusions where it
#    says own; `tuned_unfused`: --fuse 0 with its engines; `tuned_store_norm`: the table's plan
#    with its stored normalisations kept for the backward pass; `tuned_persist_fill`: the table's
#    plan with the wgmma kernels on persistent grids and the N tile that fills the SMs, the
#    same bits). Before the variants: the second
#    GPU session's tuning and step took 50 s, and its variants left no time for them.
#    GPU_CALL_TUNE=adm64: the same at unet_adm64 batch 32 fp32 instead (the fp32 forms per
#    layer: the tiles' products on the FMAs or the tensor cores, Winograd), with `tuned` and
#    `tuned_store_norm` only (an fp32 table fuses nothing and runs no wgmma kernel).
# 3b. a short Nsight Compute profile of the default step's normalisation kernels, each distinct
#    launch once, then the same with them in one pass (SG_NORM_ONEPASS=1) where time is left
#    (tools/gpu_profile.sh; 120 s at most, only with 330 s left so that the compile rows still
#    run; GPU_CALL_PROFILE=0: not): the summaries go into call.log, the raw CSVs into the
#    tarball.
# 4. stepgraph's variants at unet_cifar batch 128 bf16 (20 replays each; a breakdown only for
#    GPU_CALL_BREAKDOWN's): first the default plan with its normalisations in two passes both
#    ways (SG_NORM_ONEPASS=0; the default runs the forward in one pass), at batch 128 and 8;
#    then the default plan keeping its normalisations for the backward pass
#    (--store-norm 1: the same bits, no recomputation, +0.74 GiB), the default plan with
#    programmatic dependent launch (SG_PDL=1: the same bits), the default plan with its
#    normalisations in one pass, forward and backward (SG_NORM_ONEPASS=1: the same bits every
#    way), the fused attention on the
#    default plan, the fused plan under auto (the fused forwards on own, what cuDNN can take on
#    cuDNN), and the own kernels fused (mma.sync with the
#    prologue's forward on the resident halo, then per tap as on the first run; wgmma likewise;
#    the weight gradients read y recomputed; wgmma also with SG_WG_PERSIST=1 SG_WG_FILL=1),
#    whose speed issue 17 must raise; then the own
#    kernels unfused: mma.sync per tap (and with its data gradients' backward partials in the
#    epilogue, SG_TC_DGRAD_STATS=1), mma.sync on the halo (SG_TC_HALO=all), wgmma per tap
#    (on a block per tile, then on the persistent grid, SG_WG_PERSIST=1, then with the N tile
#    that fills the SMs, SG_WG_FILL=1, then with the stride-1 data gradients per tap too,
#    SG_WG_DGRAD_HALO=0: the same bits) and on
#    the halo (the kernels' own speed, without any prologue) (GPU_CALL_VARIANTS=0: none; a
#    regex other than 0 or 1: the variants whose names match).
# Every step stops where the call has run GPU_CALL_S (default 560 s).
# OUTDIR receives at most 7 files (the device returns 8): the check's report and logs, the
# two bench reports and side-by-side.md (both runs in one table), a tarball of the raw output of
# every job, and call.log.
# Environment: GPU_CALL_S, GPU_CALL_CHECK_S, GPU_CALL_BENCH_JOBS (step 2's BENCH_JOBS),
# GPU_CALL_COMPILE_S (the seconds the main rows leave to the compile rows),
# GPU_CALL_VARIANTS, GPU_CALL_TUNE, GPU_CALL_PROFILE, GPU_CALL_COMPILE_JOBS, GPU_CALL_BREAKDOWN
# (a regex of the variants that keep bench's per-op and per-layer breakdown; default
# gpu_call_targets.sh's: the tuned steps, auto_fused and wgmma_unfused_halo: the engine choice,
# the own kernels' per-layer times, and the fused forwards per node on mma.sync, cuDNN's unfused
# nodes and the wgmma column),
# SG_COMMIT (the commit, where the tree is not a git checkout).
set -u
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 1
case ${1:-} in -h | --help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//' && exit 0 ;; esac
out=${1:-${OUT:-$root/gpu_call_out}}
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
total=${GPU_CALL_S:-560}
exec > >(tee "$out/call.log") 2>&1
# tee runs beside the script (a process substitution) and may still be writing the log's last
# lines when the script exits: the EXIT trap closes the script's output and waits for it, so
# whoever reads call.log at once (the device tool collecting $OUT, a test) reads all of it
sg_tee=$!
trap 'exec >&- 2>&-; wait "$sg_tee"' EXIT

# shellcheck source=tools/gpu_call_targets.sh
source "$root/tools/gpu_call_targets.sh"
echo "gpu_call: check (${GPU_CALL_CHECK_S:-330}s), then bench until ${total}s"
GPU_CHECK_DEADLINE_S=${GPU_CALL_CHECK_S:-330} GPU_CHECK_SKIP=${GPU_CHECK_SKIP:-cpu_tests} \
    GPU_CHECK_TEST_JOBS=${GPU_CHECK_TEST_JOBS:-5} \
    GPU_CHECK_TARGETS=${GPU_CHECK_TARGETS:-$SG_GPU_CALL_TARGETS} \
    tools/gpu_check.sh "$out"
check_rc=$?

bin=$root/build-gpu/bench
runs=$(mktemp -d)
mkdir -p "$runs/results" "$runs/variants"
# bench NAME JOBS [KEEP]: one tools/bench.sh run of the jobs matching JOBS, in the time left
# but KEEP seconds (bench.sh skips the jobs that no longer fit, the later ones first)
bench() {
    local rest=$((total - SECONDS - ${3:-0}))
    if [ ! -x "$bin" ] || [ $rest -lt 40 ]; then
        echo "gpu_call: bench $1 does not run (${rest}s left, $bin)" && return 1
    fi
    BENCH_BIN=$bin BENCH_BUDGET_S=$rest BENCH_SG_ITERS=30 BENCH_TORCH_STEPS=30 BENCH_JOBS=$2 \
        BENCH_TORCH="${PYTHON:-python3} $root/tools/torch_ref/bench.py --profile 3" \
        BENCH_RESULTS_DIR="$runs/results/$1" tools/bench.sh "$runs/$1"
}
# variant NAME [VAR=VALUE...] -- [bench flags]: stepgraph's unet_cifar b128 bf16 step, 20 replays
variant() {
    local name=$1 envs=()
    shift
    while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1") && shift; done
    shift
    case ${GPU_CALL_VARIANTS:-1} in 0 | 1) ;; *) [[ $name =~ $GPU_CALL_VARIANTS ]] || return 0 ;; esac
    [ $((total - SECONDS)) -lt 100 ] && echo "gpu_call: variant $name: no time left" && return
    local bd=--no-breakdown
    [[ $name =~ ${GPU_CALL_BREAKDOWN:-$SG_GPU_CALL_BREAKDOWN} ]] && bd=
    env "${envs[@]}" timeout -k 5 90 "$bin" --backend cuda --model unet_cifar --batch 128 \
        --precision bf16 --warmup 5 --iters 20 $bd --json "$@" \
        >"$runs/variants/$name.json" 2>"$runs/variants/$name.log"
    echo "gpu_call: variant $name (${envs[*]} $*): exit $?, $(grep -o '"ms_per_step": *[0-9.]*' \
        "$runs/variants/$name.json")"
    # a variant on the tuned table: did cuDNN give every engine the table names?
    if [[ " $* " == *" --engine-table "* ]]; then
        echo "gpu_call: variant $name: $(grep -oE '"cudnn_prefs_(met|missed)": *[0-9]+' \
            "$runs/variants/$name.json" | tr '\n' ' ')"
    fi
}
main_jobs=${GPU_CALL_BENCH_JOBS:-'^(sg_cifar_b(128|8)_bf16|sg_cifar_b128_bf16_table|sg_adm64_b32_fp32(_wino|_f32tc)?|torch_cifar_b(128|8)_bf16_eager|torch_adm64_b32_fp32_tf32off_eager)$'}
compile_jobs=${GPU_CALL_COMPILE_JOBS:-'^torch_cifar_b128_bf16_(compile|reduce-overhead)$'}
# the main rows leave the compile rows GPU_CALL_COMPILE_S (default 200 s: the fourth session's
# compile and reduce-overhead rows took 100 and 86 s): with the table's and the fp32 forms'
# rows since, the main run alone could spend the time reduce-overhead needs, the best PyTorch
# mode at batch 128 and the one the target is measured against
bench main "$main_jobs" "${GPU_CALL_COMPILE_S:-200}"
bench_rc=$?
# the torch.compile rows next: the side-by-side table is the first thing a GPU session owes
# (issue 11), and the third session's call, with the tuning before them, left them 88 s
bench compile "$compile_jobs"
if [ -x "$bin" ] && [ "${GPU_CALL_TUNE:-1}" != 0 ] && [ $((total - SECONDS)) -gt 120 ]; then
    table=$runs/variants/engine-table.json
    # the layers (three plans), the GEMMs' algorithms, then eight step-knob trials, three of the
    # wgmma schedule and one to four of the layers' own schedules (all at once, then each group
    # of one schedule where that loses) where the table runs anything on wgmma (a fresh plan
    # each): up to 240 s; the table is written once the layers are chosen, so a cut leaves it
    tune_model=(--model unet_cifar --batch 128 --precision bf16)
    [ "${GPU_CALL_TUNE:-1}" = adm64 ] && tune_model=(--model unet_adm64 --batch 32 --precision fp32)
    tune_s=$((total - SECONDS - 60))
    [ "$tune_s" -gt 240 ] && tune_s=240
    [ "$tune_s" -lt 60 ] && tune_s=60
    timeout -k 5 "$tune_s" "$bin" --backend cuda "${tune_model[@]}" \
        --warmup 3 --iters 5 --knob-time 10 --tune-engines "$table" >"$runs/variants/tune.txt" \
        2>"$runs/variants/tune.log"
    echo "gpu_call: tune: exit $?, $(tail -n 1 "$runs/variants/tune.txt")"
    if [ -s "$table" ]; then
        variant tuned -- "${tune_model[@]}" --engine-table "$table"
        # fp32 (adm64): a table plans no fusion there (sg_model_fuse) and runs no wgmma kernel,
        # so --fuse 0 and the persistent wgmma grids would replay `tuned` again: not run
        if [ "${GPU_CALL_TUNE:-1}" != adm64 ]; then
            variant tuned_unfused -- "${tune_model[@]}" --engine-table "$table" --fuse 0
        fi
        variant tuned_store_norm -- "${tune_model[@]}" --engine-table "$table" --store-norm 1
        if [ "${GPU_CALL_TUNE:-1}" != adm64 ]; then
            variant tuned_persist_fill SG_WG_PERSIST=1 SG_WG_FILL=1 -- "${tune_model[@]}" \
                --engine-table "$table"
        fi
    fi
elif [ "${GPU_CALL_TUNE:-1}" != 0 ]; then
    echo "gpu_call: tune: not run ($((total - SECONDS))s left)"
fi
# the default step's normalisation kernels under Nsight Compute, each distinct launch once: their
# DRAM and SM throughputs say whether the GroupNorm passes are bound by memory or by issue
# (docs/gpu-status.md, "What the profile should decide next")
if [ -x "$bin" ] && [ "${GPU_CALL_PROFILE:-1}" != 0 ] && [ $((total - SECONDS)) -gt 330 ]; then
    GPU_PROFILE_BIN=$bin GPU_PROFILE_S=120 GPU_PROFILE_CONFIGS='^(default|norm_onepass)$' \
        GPU_PROFILE_KERNELS='regex:^norm_' GPU_PROFILE_LAUNCHES=1 \
        GPU_PROFILE_FILTER=per-launch-config tools/gpu_profile.sh "$runs/profile" >/dev/null 2>&1
    echo "gpu_call: profile: exit $?"
    grep '^gpu_profile: ' "$runs/profile/profile.log" 2>/dev/null
    for md in "$runs/profile/ncu-default.md" "$runs/profile/ncu-norm_onepass.md"; do
        [ -s "$md" ] && sed -n '1,32p' "$md"
    done
elif [ "${GPU_CALL_PROFILE:-1}" != 0 ]; then
    echo "gpu_call: profile: not run ($((total - SECONDS))s left)"
fi
if [ -x "$bin" ] && [ "${GPU_CALL_VARIANTS:-1}" != 0 ]; then
    # first unet_adm64's fp32 step with its 3x3 passes as Winograd
    # F(2x2, 3x3) (kernels/cuda/conv_wino.cu), against the main rows' sg_adm64_b32_fp32 (whose
    # per-layer table times both forms: wino_ms, direct_ms)
    variant adm64_wino SG_CONV_WINO=1 -- --model unet_adm64 --batch 32 --precision fp32
    # ... and with every 3x3 pass on it (the 16 x 16 and 8 x 8 ones leave cuDNN; the 1x1 convs
    # are cuBLAS GEMMs on own too)
    variant adm64_wino_own SG_CONV_WINO=1 -- --model unet_adm64 --batch 32 --precision fp32 \
        --conv-engine own
    # ... and its attention on the fp32 fused kernels (kernels/cuda/attention_f32.cu), alone and
    # with the Winograd passes (the main row's attention table times each node both ways)
    variant adm64_attn_fused SG_ATTN=fused -- --model unet_adm64 --batch 32 --precision fp32
    variant adm64_wino_attn SG_CONV_WINO=1 SG_ATTN=fused -- --model unet_adm64 --batch 32 \
        --precision fp32
    # ... and every fp32 pass on own with the direct tiles on the tensor cores (SG_CONV_F32_TC=1,
    # 3xTF32: kernels/cuda/conv.cu's conv_tile_mma3; the main rows' sg_adm64_b32_fp32_f32tc
    # keeps auto's split, the small layers on cuDNN)
    variant adm64_f32tc_own SG_CONV_F32_TC=1 -- --model unet_adm64 --batch 32 --precision fp32 \
        --conv-engine own
    # the 1x1 forwards back on own and the GEMM's fp32 tile (the rule before the bias epilogue,
    # kernels/cuda/blas.cu): the main row's step against this one's says what the epilogue bought
    variant gemm_tile SG_GEMM_EPILOGUE=0 --
    # every attention's P kept from the forward pass (--store-attn 1, the plan before
    # 2026-12-05): the same bits; the main row's step against this one's is what recomputing P
    # (attention_p: the scores' GEMM and the softmax again) costs, its arena what it saves
    variant store_attn -- --store-attn 1
    # the step's graph launched from the device (kernels/cuda/graph_launch.cu): host_us_per_step
    # against the main rows' (DESIGN.md: 20 us), at both batches
    variant graph_device SG_GRAPH_LAUNCH=device --
    variant graph_device_b8 SG_GRAPH_LAUNCH=device -- --batch 8
    # the libraries' memset nodes kept as captured (SG_GRAPH_MEMSETS=keep: the graph before
    # 2026-12-05; by default they are kernel nodes, kernels/cuda/graph_edit.cu): the main row's
    # host_us_per_step against this one's is what the edit bought (the fourth session: 245 us a
    # replayed step at batch 128 with 69 memset nodes; the same bits either way)
    variant memsets_keep SG_GRAPH_MEMSETS=keep --
    # then the check of the newest default (the forward normalisations in one pass, 2026-12-04)
    variant norm_twopass SG_NORM_ONEPASS=0 --
    variant norm_twopass_b8 SG_NORM_ONEPASS=0 -- --batch 8
    variant store_norm -- --store-norm 1
    variant pdl SG_PDL=1 --
    variant norm_onepass SG_NORM_ONEPASS=1 --
    variant thin_own SG_CONV_THIN=own --
    variant linear_cublas SG_LINEAR_GROUPS=0 --
    variant attn_fused SG_ATTN=fused --
    variant auto_fused -- --fuse 1
    variant own_fused -- --conv-engine own --fuse 1
    variant own_fused_pertap SG_TC_HALO=0 -- --conv-engine own --fuse 1
    variant wgmma_fused SG_CONV_TC=wgmma -- --conv-engine own --fuse 1
    variant wgmma_fused_pertap SG_CONV_TC=wgmma SG_TC_HALO=0 -- --conv-engine own --fuse 1
    variant wgmma_fused_persist_fill SG_CONV_TC=wgmma SG_WG_PERSIST=1 SG_WG_FILL=1 -- \
        --conv-engine own --fuse 1
    variant own_unfused -- --conv-engine own --fuse 0
    variant own_unfused_dgradstats SG_TC_DGRAD_STATS=1 -- --conv-engine own --fuse 0
    variant own_unfused_halo SG_TC_HALO=all -- --conv-engine own --fuse 0
    variant wgmma_unfused SG_CONV_TC=wgmma -- --conv-engine own --fuse 0
    variant wgmma_unfused_persist SG_CONV_TC=wgmma SG_WG_PERSIST=1 -- --conv-engine own --fuse 0
    variant wgmma_unfused_fill SG_CONV_TC=wgmma SG_WG_FILL=1 -- --conv-engine own --fuse 0
    variant wgmma_unfused_dgrad_pertap SG_CONV_TC=wgmma SG_WG_DGRAD_HALO=0 -- \
        --conv-engine own --fuse 0
    variant wgmma_unfused_halo SG_CONV_TC=wgmma SG_TC_HALO=all -- --conv-engine own --fuse 0
fi
for f in "$runs"/results/*/*.md; do
    [ -e "$f" ] && cp "$f" "$out/$(basename "$(dirname "$f")")-$(basename "$f")"
done
# one side-by-side table over both bench runs (the same machine, the same call)
if [ -d "$runs/main" ] && [ -d "$runs/compile" ]; then
    ${PYTHON:-python3} "$root/tools/bench_report.py" report --out "$out/side-by-side.md" \
        "$runs/main" "$runs/compile" 2>&1 ||
        echo "gpu_call: the merged side-by-side report failed"
fi
tar -czf "$out/bench-runs.tar.gz" -C "$runs" .
rm -rf "$runs"
echo "gpu_call: check exit $check_rc, bench exit $bench_rc, ${SECONDS}s"
[ $check_rc -eq 0 ] && [ $bench_rc -eq 0 ]
