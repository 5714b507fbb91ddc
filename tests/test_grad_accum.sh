#!/usr/bin/env bash
# test_grad_accum.sh — gradient accumulation end to end (train --grad-accum K), unet_tiny on the
# CPU (docs/data-parallel.md, "Gradient accumulation", argues the tolerance):
#   (a) K = 2 micro-batches of 2 against K = 1 at batch 4 after 5 steps: every parameter, AdamW
#       moment and EMA within 1e-5 normwise (dp_compare), the logged loss and gradient norm
#       within 2e-5 at every step, and the two not bit-identical (the sum order differs);
#       K = 4 micro-batches of 1 likewise; and K = 2 with min-SNR loss weighting, and with a
#       class-conditional model (labels and their dropout keyed by global index);
#   (b) the K = 2 run twice: bit-identical checkpoints;
#   (c) stop after 2 steps and resume to 5 with K = 2: bit-identical to the straight run; the
#       resume keeps K (config.json and the checkpoint record it) and refuses another;
#   (e) bad K (0, past 64, not dividing the batch) are clear usage errors, in train and plan;
#   and the plan says it: micro-batches, K and the global batch, an arena of one micro-batch.
# Usage: test_grad_accum.sh TRAIN DP_COMPARE CKPT PLAN
set -u
train=$1 compare=$2 ckpt=$3 plan=$4
source "$(dirname "${BASH_SOURCE[0]}")/ok.sh" # pass, fail, ok NAME CONDITION
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# as dp_mpi: lr without warm-up so that 5 steps move the weights, AdamW's epsilon 1e-5 (why:
# test_dp_mpi.sh); samples as small as possible
args="--model unet_tiny --data synthetic:64:16x16x3 --batch 4 --lr 1e-3 --warmup 0 --backend cpu
      --adam-eps 1e-5 --log-every 1 --samples 2 --ddim-steps 1 --seed 7"
ck=ckpt_00000005.sgck

$train $args --steps 5 --out "$tmp/one" >"$tmp/one.log" 2>&1; rc=$?
ok "K=1 at batch 4 runs" '[ $rc -eq 0 ]'
$train $args --steps 5 --out "$tmp/k2" --grad-accum 2 >"$tmp/k2.log" 2>&1; rc=$?
ok "K=2 at micro-batch 2 runs" '[ $rc -eq 0 ]'
ok "train says it accumulates" 'grep -q "batch 4 (2 micro-batches of 2, --grad-accum)" "$tmp/k2.log"'

# (a) within tolerance of the plain step, and the metrics too (a loss that is not the mean over
# the global batch, or a gradient not scaled by 1/K, shows in the logged numbers)
metrics_close() {
    python3 - "$1" "$2" <<'PY'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
assert len(a) == len(b) == 5, (len(a), len(b))
for x, y in zip(a, b):
    for k in ("loss", "grad_norm"):
        assert abs(x[k] - y[k]) <= 2e-5 * abs(y[k]), (x["step"], k, x[k], y[k])
PY
}
for K in 2 4; do
    if [ $K -eq 4 ]; then
        $train $args --steps 5 --out "$tmp/k4" --grad-accum 4 >"$tmp/k4.log" 2>&1
        ok "K=4 at micro-batch 1 runs" '[ $? -eq 0 ]'
    fi
    $compare "$tmp/k$K/$ck" "$tmp/one/$ck" 1e-5 >"$tmp/cmp$K.txt" 2>&1; rc=$?
    cat "$tmp/cmp$K.txt"
    ok "K=$K vs K=1: params, m, v, EMA within 1e-5 normwise" '[ $rc -eq 0 ]'
    ok "K=$K vs K=1: loss and grad norm per step within 2e-5" \
        'metrics_close "$tmp/k$K/metrics.jsonl" "$tmp/one/metrics.jsonl"'
    ok "K=$K vs K=1: not the same bits (another summation order, so the compare saw something)" \
        '! $ckpt diff "$tmp/k$K/$ck" "$tmp/one/$ck" --ignore-meta >/dev/null 2>&1'
done

# K = 2 against K = 1 with the model flags given (name, flags...): every parameter, moment and
# EMA within 1e-5 normwise, the logged loss and gradient norm within 2e-5
accum_pair() {
    local name=$1; shift
    $train $args --steps 5 --out "$tmp/${name}1" "$@" >/dev/null 2>&1; local rc1=$?
    $train $args --steps 5 --out "$tmp/${name}2" --grad-accum 2 "$@" >/dev/null 2>&1; local rc2=$?
    $compare "$tmp/${name}2/$ck" "$tmp/${name}1/$ck" 1e-5 >"$tmp/cmp_$name.txt" 2>&1; local rc=$?
    cat "$tmp/cmp_$name.txt"
    ok "$name, K=2 vs K=1: params, m, v, EMA within 1e-5 normwise" \
        '[ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && [ $rc -eq 0 ]'
    ok "$name, K=2 vs K=1: loss and grad norm per step within 2e-5" \
        'metrics_close "$tmp/${name}2/metrics.jsonl" "$tmp/${name}1/metrics.jsonl"'
}
# min-SNR weighting (each micro-batch weighs its own samples by their timesteps; v: no weight
# is 1)
accum_pair snr --snr-gamma 1 --prediction v
# a class-conditional model (each micro-batch gathers its samples' labels and draws their
# dropout at their global indices, as one pass over the batch)
accum_pair classes --classes 6 --class-dropout 0.5
# offset noise (each micro-batch draws its samples' offsets at their global indices)
accum_pair offset --noise-offset 0.5
# input perturbation (each micro-batch draws its values' perturbation at their global indices)
accum_pair perturb --input-perturbation 0.3

# (b) twice
$train $args --steps 5 --out "$tmp/k2b" --grad-accum 2 >/dev/null 2>&1
ok "K=2 twice: bit-identical" '$ckpt diff "$tmp/k2/$ck" "$tmp/k2b/$ck" --ignore-meta >/dev/null'

# (c) stop at 2, resume to 5: K comes from the checkpoint
$train $args --steps 2 --out "$tmp/res" --grad-accum 2 >/dev/null 2>&1; rc1=$?
$train --resume "$tmp/res" --steps 5 >"$tmp/res2.log" 2>&1; rc2=$?
ok "K=2 stop and resume run" '[ $rc1 -eq 0 ] && [ $rc2 -eq 0 ]'
ok "the resume keeps K=2" 'grep -q "2 micro-batches of 2" "$tmp/res2.log"'
ok "K=2 stop/resume: bit-identical to straight" \
    '$ckpt diff "$tmp/k2/$ck" "$tmp/res/$ck" --ignore-meta >/dev/null'
ok "the checkpoint records grad_accum 2" \
    '$ckpt info "$tmp/res/$ck" | grep -q "\"grad_accum\":2"'
ok "config.json records grad_accum 2" \
    'python3 -c "import json,sys; assert json.load(open(sys.argv[1]))[\"model\"][\"grad_accum\"] == 2" "$tmp/res/config.json"'
$train --resume "$tmp/res" --steps 6 --grad-accum 4 >"$tmp/res3.log" 2>&1; rc=$?
ok "a resume refuses another K (exit $rc)" \
    '[ $rc -eq 2 ] && grep -q "\-\-grad-accum cannot change on --resume" "$tmp/res3.log"'

# (e) bad K: clear one-line errors (train: usage, exit 2; plan: a plan it cannot build, exit 1)
bad() { # exit status, expected message, then the command
    local want_rc=$1 want=$2
    shift 2
    "$@" >"$tmp/bad.log" 2>&1
    local rc=$?
    [ $rc -eq "$want_rc" ] && grep -q -- "$want" "$tmp/bad.log" && [ "$(wc -l <"$tmp/bad.log")" -eq 1 ]
}
ok "train --grad-accum 0" 'bad 2 "--grad-accum expects an integer in \[1, 64\], got .0." $train $args --grad-accum 0 --out "$tmp/b0"'
ok "train --grad-accum 65" 'bad 2 "--grad-accum expects an integer in \[1, 64\]" $train $args --grad-accum 65 --out "$tmp/b1"'
ok "train --grad-accum x" 'bad 2 "--grad-accum expects an integer" $train $args --grad-accum=x --out "$tmp/b2"'
ok "train: K=3 does not divide batch 4" \
    'bad 2 "batch 4 does not split into 3 micro-batches (--grad-accum 3): the global batch must be a multiple of 3 (try --batch 6)" $train $args --grad-accum 3 --out "$tmp/b3"'
ok "plan: K=3 does not divide batch 4" 'bad 1 "does not split into 3 micro-batches" $plan --model unet_tiny --grad-accum 3'
ok "plan: K=2 x 4 ranks does not divide batch 4" \
    'bad 1 "over 4 rank(s) is 1 samples per rank, which does not split into 2 micro-batches" $plan --model unet_tiny --ranks 4 --grad-accum 2'

# the plan: the micro-batches, and an arena that is one micro-batch's (unet_cifar bs128 bf16 as
# 4 x 32 has exactly the arena of a batch-32 plan: the same buffers at the same offsets)
$plan --model unet_cifar --precision bf16 --grad-accum 4 --no-table >"$tmp/p4.txt" 2>&1
$plan --model unet_cifar --precision bf16 --batch 32 --no-table >"$tmp/p32.txt" 2>&1
ok "plan shows micro-batches, K and global batch" \
    'grep -q "4 micro-batches of 32 samples = global batch 128 (--grad-accum 4)" "$tmp/p4.txt"'
# (209 forward and 379 backward nodes, unfused, the default (3 of them the upsamples recomputed
# for the conv after them, 6 the attentions' P); with --fuse 1, 165 and 332: 50
# of the 51 normalisations fused into their convolutions, which leaves their 50
# recomputations out of the backward pass, the 28 residual adds into the convolutions before
# them, which leaves the 28 add nodes and one of the two gradient copies of each, the 13 1x1
# shortcuts into conv2, which leaves their conv nodes and the other copy, and the 3 upsamples
# into the 3x3 convs after them (upconv2d), which leaves the 3 upsample nodes and their 3
# backward nodes)
ok "plan: 4 micro-batches x (forward, backward), one optimizer" \
    'grep -q "4 micro-batches x (209 forward, 379 backward), 5 optimizer" "$tmp/p4.txt"'
arena() { sed -n 's/^  arena .*(\([0-9,]*\) bytes.*/\1/p' "$1"; }
ok "arena of bs128 K=4 = arena of bs32 ($(arena "$tmp/p4.txt") vs $(arena "$tmp/p32.txt"))" \
    '[ -n "$(arena "$tmp/p4.txt")" ] && [ "$(arena "$tmp/p4.txt")" = "$(arena "$tmp/p32.txt")" ]'
ok "plan --json carries grad_accum and micro_batch" \
    '$plan --model unet_tiny --grad-accum 2 --json | python3 -c "import json,sys; j=json.load(sys.stdin); assert (j[\"grad_accum\"], j[\"micro_batch\"], j[\"model\"][\"grad_accum\"]) == (2, 2, 2)"'

echo "grad_accum: $pass passed, $fail failed"
[ $fail -eq 0 ]
