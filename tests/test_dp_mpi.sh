#!/usr/bin/env bash
# test_dp_mpi.sh — data parallel end to end (docs/data-parallel.md), unet_tiny on the CPU:
#   (1) 2 ranks x batch 2 against 1 process x batch 4 after 5 steps: every parameter, AdamW
#       moment and EMA within the fp32 tolerance argued in docs/data-parallel.md (dp_compare);
#       and likewise for a class-conditional model (labels and their dropout by global index);
#   (2) the ranks bit-identical to each other: train compares the XXH64 of every rank's state
#       after every step (--check-every 1) and fails naming the rank; and the check can fail:
#       one ulp injected on rank 1 stops the run with exit 4 naming rank 1;
#   (3) the same 2-rank run twice: bit-identical checkpoints (ckpt diff);
#   (4) stop after 2 steps and resume on 2 ranks: bit-identical to the straight run; and the
#       same after a SIGTERM to mpirun (the ranks stop after the same step);
#   (5) --ranks 1 in one process (the data-parallel step on one rank) gives the plain step's
#       bits; a global batch that does not divide over the ranks and a --ranks the launcher
#       does not match are clear errors; resuming a 2-rank checkpoint in one process is
#       allowed, with the warning that the bits will differ;
#   (6) ranks x gradient accumulation compose: 2 ranks x 2 micro-batches of 1 (global batch 4)
#       within the same tolerance of 1 process x batch 4, the ranks identical after every step,
#       stop/resume bit-exact; a global batch that ranks x micro-batches do not divide is a
#       clear error.
# Usage: test_dp_mpi.sh TRAIN DP_COMPARE CKPT MPIRUN
set -u
train=$1 compare=$2 ckpt=$3 mpirun=${4:-mpirun}
command -v "$mpirun" >/dev/null 2>&1 || { echo "SKIP: no mpirun"; exit 77; }
# CI runs as root; Open MPI refuses that unless told
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# containers often forbid the cross-process memory copy (ptrace) of Open MPI's shared-memory
# transport; plain copies work everywhere and the messages here are small
export OMPI_MCA_btl_vader_single_copy_mechanism=none
mpi() { "$mpirun" --oversubscribe -np "$@"; }
source "$(dirname "${BASH_SOURCE[0]}")/ok.sh" # pass, fail, ok NAME CONDITION
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# lr without warm-up so that 5 steps move the weights (warm-up would scale the first
# updates by 1/5000 and hide any difference); AdamW's epsilon 1e-5, not 1e-8: its update
# lr g / (|g| + eps) turns a gradient element's rounding difference dg into up to lr dg / eps,
# and at 1e-8 the elements whose batch contributions cancel to ~1e-8 (a few in 700k) move by
# up to 1.6e-4 on the first step (docs/data-parallel.md); samples as small as possible
args="--model unet_tiny --data synthetic:64:16x16x3 --batch 4 --lr 1e-3 --warmup 0 --backend cpu
      --adam-eps 1e-5 --log-every 1 --samples 2 --ddim-steps 1 --seed 7"
ck=ckpt_00000005.sgck

$train $args --steps 5 --out "$tmp/one" >"$tmp/one.log" 2>&1; rc=$?
ok "1 process x batch 4 runs" '[ $rc -eq 0 ]'
mpi 2 $train $args --steps 5 --out "$tmp/two" --check-every 1 >"$tmp/two.log" 2>&1; rc=$?
ok "2 ranks x batch 2 run, ranks identical after every step" '[ $rc -eq 0 ]'
ok "2-rank run says it is data parallel" 'grep -q "2 rank(s) (mpi) x 2 samples = global batch 4" "$tmp/two.log"'
# each rank uses the CPUs it is bound to, or its share of an unbound machine's: never more
# than the machine's CPUs between the two
cpus=$(getconf _NPROCESSORS_ONLN)
per=$(sed -n 's/.*cpu backend (\([0-9]*\) threads\{0,1\} per rank).*/\1/p' "$tmp/two.log")
ok "2-rank run prints its threads per rank, 2 x them within the machine ($cpus CPUs)" \
    '[ -n "$per" ] && { [ $((2 * per)) -le "$cpus" ] || [ "$per" -eq 1 ]; }'
SG_CPU_THREADS=3 mpi 2 $train $args --steps 1 --out "$tmp/two_t3" >"$tmp/two_t3.log" 2>&1
ok "SG_CPU_THREADS sets the threads per rank" 'grep -q "cpu backend (3 threads per rank)" "$tmp/two_t3.log"'

# (1) within tolerance of the one-process run
$compare "$tmp/two/$ck" "$tmp/one/$ck" 1e-5 >"$tmp/cmp.txt" 2>&1; rc=$?
cat "$tmp/cmp.txt"
ok "2 ranks vs 1 process within 1e-5 normwise" '[ $rc -eq 0 ]'
# a class-conditional model: each rank gathers its samples' labels and draws their dropout at
# their global indices, what the one process draws
$train $args --steps 5 --classes 6 --class-dropout 0.5 --out "$tmp/cls_one" >/dev/null 2>&1; rc1=$?
mpi 2 $train $args --steps 5 --classes 6 --class-dropout 0.5 --out "$tmp/cls_two" \
    --check-every 1 >/dev/null 2>&1; rc2=$?
$compare "$tmp/cls_two/$ck" "$tmp/cls_one/$ck" 1e-5 >"$tmp/cmp_cls.txt" 2>&1; rc=$?
cat "$tmp/cmp_cls.txt"
ok "class-conditional: 2 ranks vs 1 process within 1e-5 normwise, ranks identical" \
    '[ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && [ $rc -eq 0 ]'
# the logged loss and gradient norm (before the clip) agree step by step: a missing 1/N in the
# loss scale doubles the norm, which the clip and Adam's scale invariance would hide from the
# weights
ok "metrics: loss and grad norm per step within 2e-5" 'python3 - "$tmp/two/metrics.jsonl" "$tmp/one/metrics.jsonl" <<PY
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
assert len(a) == len(b) == 5, (len(a), len(b))
for x, y in zip(a, b):
    for k in ("loss", "grad_norm"):
        assert abs(x[k] - y[k]) <= 2e-5 * abs(y[k]), (x["step"], k, x[k], y[k])
PY'
# ... and not trivially: the two runs did not just produce the same bits or skip the reduce
ok "the comparison saw differences of rounding size" '! $ckpt diff "$tmp/two/$ck" "$tmp/one/$ck" --ignore-meta >/dev/null 2>&1'

# (2) the divergence check fires
SG_DP_INJECT_DIVERGENCE=1 mpi 2 $train $args --steps 3 --out "$tmp/inj" --check-every 1 \
    >"$tmp/inj.log" 2>&1; rc=$?
ok "injected divergence stops the run (exit $rc)" '[ $rc -ne 0 ]'
ok "and names rank 1" 'grep -q "state of rank 1 .* differs from rank 0" "$tmp/inj.log"'

# (3) the same 2-rank run twice
mpi 2 $train $args --steps 5 --out "$tmp/two_b" >"$tmp/two_b.log" 2>&1; rc=$?
ok "second 2-rank run" '[ $rc -eq 0 ]'
ok "2-rank run twice: bit-identical" '$ckpt diff "$tmp/two/$ck" "$tmp/two_b/$ck" --ignore-meta'

# (4) stop at 2, resume to 5, on 2 ranks
mpi 2 $train $args --steps 2 --out "$tmp/res" >"$tmp/res1.log" 2>&1; rc1=$?
# a resume takes the model, data and run directory from the checkpoint (train --help)
mpi 2 $train --resume "$tmp/res" --steps 5 >"$tmp/res2.log" 2>&1; rc2=$?
ok "stop and resume runs" '[ $rc1 -eq 0 ] && [ $rc2 -eq 0 ]'
ok "stop/resume on 2 ranks: bit-identical to straight" '$ckpt diff "$tmp/two/$ck" "$tmp/res/$ck" --ignore-meta'
ok "same-N resume: no warning" '! grep -q "warning" "$tmp/res2.log"'

# SIGTERM to mpirun (Ctrl-C's SIGINT is ignored by a background job of a script): every rank
# finishes the same step, rank 0 writes the checkpoint, and the resumed run equals a straight one
# (mpirun itself in the background, not the mpi function: $! must be mpirun's pid)
"$mpirun" --oversubscribe -np 2 $train $args --steps 100000 --out "$tmp/sig" --log-every 1 \
    >"$tmp/sig.log" 2>&1 &
mpid=$!
trap 'kill -KILL $mpid 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 300); do [ -s "$tmp/sig/metrics.jsonl" ] && break; sleep 0.2; done
kill -TERM $mpid
for _ in $(seq 300); do kill -0 $mpid 2>/dev/null || break; sleep 0.2; done
kill -KILL $mpid 2>/dev/null
wait $mpid
s=$(sed -n 's/.*stopped at step \([0-9]*\) by a signal.*/\1/p' "$tmp/sig.log")
ok "SIGTERM: the ranks stop together after one step and say where" '[ -n "$s" ] && [ -f "$tmp/sig/$(printf ckpt_%08d.sgck "$s")" ]'
if [ -n "$s" ]; then
    end=$(printf ckpt_%08d.sgck $((s + 2)))
    mpi 2 $train --resume "$tmp/sig" --steps $((s + 2)) >/dev/null 2>&1
    mpi 2 $train $args --steps $((s + 2)) --out "$tmp/sig_straight" >/dev/null 2>&1
    ok "SIGTERM at step $s, resumed to $((s + 2)): bit-identical to straight" \
        '$ckpt diff "$tmp/sig/$end" "$tmp/sig_straight/$end" --ignore-meta'
fi

# one process with the data-parallel step (--ranks 1: all-reduce node, loss scale 1/1): the same
# bits as the plain step
$train $args --steps 5 --out "$tmp/r1" --ranks 1 >"$tmp/r1.log" 2>&1; rc=$?
ok "--ranks 1 in one process runs" '[ $rc -eq 0 ]'
ok "--ranks 1: bit-identical to the plain step" '$ckpt diff "$tmp/one/$ck" "$tmp/r1/$ck" --ignore-meta'

# (5) errors and warnings
$train $args --steps 1 --out "$tmp/r2" --ranks 2 >"$tmp/r2.log" 2>&1; rc=$?
ok "--ranks 2 in one process fails and says so" '[ $rc -ne 0 ] && grep -q "start it with mpirun -np 2" "$tmp/r2.log"'
mpi 2 $train $args --batch 3 --steps 1 --out "$tmp/bad" >"$tmp/bad.log" 2>&1; rc=$?
ok "batch 3 over 2 ranks fails" '[ $rc -ne 0 ]'
ok "and says why" 'grep -q "global batch and must divide evenly over the 2 ranks" "$tmp/bad.log"'
cp -r "$tmp/two" "$tmp/other"
$train --resume "$tmp/other/$ck" --steps 6 >"$tmp/other.log" 2>&1; rc=$?
ok "2-rank checkpoint resumes in one process" '[ $rc -eq 0 ]'
ok "with the warning" 'grep -q "written by a run on 2 rank(s); continuing on 1" "$tmp/other.log"'

# (6) ranks x micro-batches: rank r's micro-batch k is slice 2r + k of the global batch
mpi 2 $train $args --steps 5 --out "$tmp/ga" --grad-accum 2 --check-every 1 >"$tmp/ga.log" 2>&1; rc=$?
ok "2 ranks x 2 micro-batches of 1 run, ranks identical after every step" '[ $rc -eq 0 ]'
ok "and say so" 'grep -q "batch 4 (2 micro-batches of 1 per rank, --grad-accum)" "$tmp/ga.log"'
$compare "$tmp/ga/$ck" "$tmp/one/$ck" 1e-5 >"$tmp/cmp_ga.txt" 2>&1; rc=$?
cat "$tmp/cmp_ga.txt"
ok "2 ranks x 2 micro-batches vs 1 process within 1e-5 normwise" '[ $rc -eq 0 ]'
ok "metrics of 2 ranks x 2 micro-batches within 2e-5" 'python3 - "$tmp/ga/metrics.jsonl" "$tmp/one/metrics.jsonl" <<PY
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
assert len(a) == len(b) == 5, (len(a), len(b))
for x, y in zip(a, b):
    for k in ("loss", "grad_norm"):
        assert abs(x[k] - y[k]) <= 2e-5 * abs(y[k]), (x["step"], k, x[k], y[k])
PY'
mpi 2 $train $args --steps 2 --out "$tmp/ga_res" --grad-accum 2 >/dev/null 2>&1; rc1=$?
mpi 2 $train --resume "$tmp/ga_res" --steps 5 >/dev/null 2>&1; rc2=$?
ok "2 ranks x 2 micro-batches: stop/resume bit-identical to straight" \
    '[ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && $ckpt diff "$tmp/ga/$ck" "$tmp/ga_res/$ck" --ignore-meta'
mpi 2 $train $args --batch 6 --grad-accum 2 --steps 1 --out "$tmp/ga_bad" >"$tmp/ga_bad.log" 2>&1; rc=$?
ok "batch 6 over 2 ranks x 2 micro-batches fails (exit $rc) and says why" \
    '[ $rc -ne 0 ] && grep -q "over 2 rank(s) is 3 samples per rank, which does not split into 2 micro-batches" "$tmp/ga_bad.log"'

echo "dp_mpi: $pass passed, $fail failed"
[ $fail -eq 0 ]
