#!/usr/bin/env bash
# verify as a user meets it: a clean run passes and exits 0; bad flags exit 2 with one line;
# and verify can fail: with --inject-divergence (one ulp added to one parameter in the second
# run of check (a)) it exits 1 and names the step, the tensor and the index that was touched.
#
# With --cuda-host VERIFY (a verify built on the host emulation with the emulated cuDNN,
# tests/cuda_host_bench.cmake), instead: the CUDA backend on the default engines, fp32 and bf16
# (and a class-conditional fp32 model),
# every check passing, and the stop/resume asking for every cuDNN engine the checkpoint
# recorded and getting each one (sg_cudnn_prefer: the engine by index, its knobs).
set -u
cuda_host=0
[ "${1:-}" = --cuda-host ] && cuda_host=1 && shift
verify=$1
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$(dirname "${BASH_SOURCE[0]}")/ok.sh" # pass, fail, ok NAME CONDITION
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ $cuda_host = 1 ]; then
    # fp32, bf16, and a class-conditional model (its labels gathered and embedded in the step)
    for run in fp32 bf16 "fp32 --classes 6"; do
        prec=${run%% *} extra=${run#"$prec"}
        # shellcheck disable=SC2086 # extra: flags, split on purpose
        $verify --backend cuda --model unet_tiny --batch 2 --precision $prec --steps 3 \
            --resume-at 1 $extra >"$tmp/out.txt" 2>"$tmp/err.txt"
        rc=$?
        cat "$tmp/out.txt"
        grep "conv engines from the checkpoint" "$tmp/err.txt"
        ok "cuda host $run: every check passes" '[ $rc -eq 0 ] && grep -q "^overall: PASS (4 passed" "$tmp/out.txt"'
        ok "cuda host $run: the resume gets every recorded cuDNN engine" \
            'grep -Eq "conv engines from the checkpoint: .* [1-9][0-9]* node\(s\) asked for their cuDNN engine \(([0-9]+) descriptors: \1 had, 0 not" "$tmp/err.txt"'
    done
    echo "verify on the host's CUDA backend with cuDNN: $pass passed, $fail failed"
    [ "$fail" -eq 0 ]
    exit
fi

# a clean run
$verify --model unet_tiny --steps 4 >"$tmp/out.txt" 2>"$tmp/err.txt"; rc=$?
cat "$tmp/out.txt"
ok "clean run exits 0" '[ $rc -eq 0 ]'
ok "(a) passes" 'grep -Eq "^\(a\) same seed twice +PASS" "$tmp/out.txt"'
ok "(b) passes" 'grep -Eq "^\(b\) stop/resume vs straight +PASS" "$tmp/out.txt"'
ok "(c) ran or was skipped with a reason" 'grep -Eq "^\(c\) .* (PASS|SKIP) +[a-z-]" "$tmp/out.txt"'
ok "overall PASS" 'grep -q "^overall: PASS" "$tmp/out.txt"'

# gradient accumulation: 2 micro-batches in the step, the same checks
$verify --model unet_tiny --steps 3 --grad-accum 2 >"$tmp/out.txt" 2>"$tmp/err.txt"; rc=$?
ok "--grad-accum 2: clean run exits 0" '[ $rc -eq 0 ] && grep -q "^overall: PASS" "$tmp/out.txt"'
ok "--grad-accum 2: says so" 'grep -q "batch 4 as 2 micro-batches" "$tmp/err.txt"'

# bf16: the stop/resume check runs on the weight copy remade from the loaded parameters
$verify --model unet_tiny --steps 3 --precision bf16 >"$tmp/out.txt" 2>"$tmp/err.txt"; rc=$?
ok "--precision bf16: clean run exits 0, (b) passes" \
    '[ $rc -eq 0 ] && grep -Eq "^\(b\) stop/resume vs straight +PASS" "$tmp/out.txt" && grep -q "^overall: PASS" "$tmp/out.txt"'

# machine-readable
$verify --model unet_tiny --steps 2 --resume-at 1 --seed 3 --json >"$tmp/out.json" 2>/dev/null; rc=$?
ok "json run exits 0" '[ $rc -eq 0 ]'
ok "json fields" 'python3 - "$tmp/out.json" <<PY
import json, sys
d = json.load(open(sys.argv[1]))
assert d["result"] == "PASS", d["result"]
assert d["steps"] == 2 and d["resume_at"] == 1 and d["seed"] == 3
assert len(d["losses"]) == 2 and all(x["bits"].startswith("0x") for x in d["losses"])
assert len(d["state_hash"]) == 16
r = {c["id"]: c["result"] for c in d["checks"]}
assert r["a"] == "PASS" and r["b"] == "PASS", r
assert r["c"] in ("PASS", "SKIP") and r["d"] in ("PASS", "SKIP"), r
PY'

# verify can fail, and says where
$verify --model unet_tiny --steps 4 --inject-divergence 2 >"$tmp/out.txt" 2>"$tmp/err.txt"; rc=$?
cat "$tmp/out.txt"
ok "injected divergence exits 1" '[ $rc -eq 1 ]'
ok "(a) fails" 'grep -Eq "^\(a\) same seed twice +FAIL" "$tmp/out.txt"'
ok "(b) still passes" 'grep -Eq "^\(b\) stop/resume vs straight +PASS" "$tmp/out.txt"'
ok "overall FAIL" 'grep -q "^overall: FAIL" "$tmp/out.txt"'
# the note on stderr says which element was touched; the report must find that very element
touched=$(sed -n "s/.*adds one ulp to \([^ ]*\) index \([0-9]*\) after step 2.*/\1 index \2/p" "$tmp/err.txt")
ok "stderr names the injected element" '[ -n "$touched" ]'
ok "report names step 2 and the tensor" 'grep -q "state after step 2: tensor $touched:" "$tmp/out.txt"'

# --data takes train's specs (see train --help), folder:DIR included: PNGs decoded to the model
python3 "$root/tests/make_pngs.py" "$tmp/imgs" 3 24 8 20
$verify --model unet_tiny --steps 2 --data "folder:$tmp/imgs" >"$tmp/out.txt" 2>"$tmp/err.txt"; rc=$?
ok "--data folder:DIR runs and passes" '[ $rc -eq 0 ] && grep -q "^overall: PASS" "$tmp/out.txt" && grep -q "on folder:$tmp/imgs" "$tmp/err.txt"'
$verify --model unet_tiny --steps 2 --data nope >/dev/null 2>"$tmp/err.txt"; rc=$?
ok "an unknown --data spec lists folder:DIR" '[ $rc -ne 0 ] && grep -q "folder:DIR" "$tmp/err.txt"'

# bad flags: one line on stderr, exit 2
for bad in "--frobnicate 3" "--steps 0" "--steps x" "--model nope" "--backend tpu" \
    "--steps 4 --resume-at 5" "--inject-divergence 9" "--steps"; do
    $verify $bad >/dev/null 2>"$tmp/err.txt"; rc=$?
    ok "'$bad' exits 2 with one line" '[ $rc -eq 2 ] && [ $(wc -l <"$tmp/err.txt") -eq 1 ]'
done
ok "help documents the testing aid" '$verify --help | grep -q -- "--inject-divergence"'
# the help's --model entry names one default model, and it is the one verify uses without --model
help_default=$($verify --help | awk '/^  --model NAME/ { on = 1; next } /^  --/ { on = 0 } on' |
    grep -i "default" | grep -o "unet_[a-z0-9]*" | sort -u)
used=$($verify --steps 1 --json 2>/dev/null | python3 -c "import json, sys; print(json.load(sys.stdin)['model']['model'])")
ok "help names one default model, the one used ($used)" '[ "$help_default" = "$used" ]'

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
