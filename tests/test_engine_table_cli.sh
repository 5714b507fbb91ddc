#!/usr/bin/env bash
# The per-layer conv engine table as a user meets it (issue 17, item 3): bench --tune-engines
# writes one on the CPU (own measured, cuDNN unavailable: null), plan --engine-table prints each
# layer's choice and plans memory for it, train with a table gives the bits of train without
# one (CPU), a resume plans with the checkpoint's table (the straight run's bits) and one given
# on a resume replaces it with a warning naming the layers; bad tables exit non-zero with one
# line and leave no run directory. Usage: test_engine_table_cli.sh build/bench build/plan
# build/train build/ckpt
set -u
bench=$(realpath "$1") plan=$(realpath "$2") train=$(realpath "$3") ckpt=$(realpath "$4")
source "$(dirname "${BASH_SOURCE[0]}")/ok.sh" # pass, fail, ok NAME CONDITION
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
M0=(--model unet_tiny --precision bf16 --batch 2)
M=("${M0[@]}" --fuse 1) # the table is for fused plans

# ---- the tuning run (CPU: cuDNN unavailable)
"$bench" --backend cpu "${M[@]}" --iters 1 --warmup 0 --tune-engines tab.json >tune.txt 2>&1
rc=$?
cat tune.txt
ok "tune exits 0" '[ $rc -eq 0 ]'
ok "tune: summary line" 'grep -q "engine table tab.json: unet_tiny, batch 2 per pass, bf16, on cpu; 33 conv layers, 0 on cudnn (0 of their passes on own), 33 on own.*cudnn_ms null" tune.txt'
ok "tune: the file" 'python3 - tab.json <<PY
import json, sys
d = json.load(open(sys.argv[1]))
assert d["format"] == "stepgraph_engine_table" and d["version"] == 1
assert d["model"] == "unet_tiny" and d["precision"] == "bf16" and d["batch"] == 2
assert d["backend"] == "cpu" and d["device"] == "cpu"
L = d["layers"]
# every conv layer of the unfused plan; a shortcut the fused plan folds into the conv2 of its block
# (conv2d_sc) has its own time charged to that conv2
assert len(L) == 33 and len({l["layer"] for l in L}) == 33
folded = [l for l in L if l["own_ms"] == 0]
assert len(folded) == 5 and all(l["layer"].endswith(".conv_shortcut") for l in folded)
assert all(l["engine"] == "own" and l["own_ms"] >= 0 and l["cudnn_ms"] is None for l in L)
assert L[0]["layer"] == "conv_in" and L[-1]["layer"] == "conv_out"
# a table with every ResBlock conv1 on cudnn, for the runs below
for l in L:
    if l["layer"].endswith(".conv1"): l["engine"] = "cudnn"
json.dump(d, open("c1.json", "w"), indent=1)
PY'
"$bench" --backend cpu "${M[@]}" --tune-engines t.json --engine-table tab.json >/dev/null 2>err.txt
rc=$?
ok "--tune-engines with --engine-table: exit 2, one line" '[ $rc -eq 2 ] && [ $(wc -l <err.txt) -eq 1 ] && [ ! -e t.json ]'
# an unwritable table file is found before the tuning (minutes on a GPU), not after it:
# exit 1 with one line and no tuning output; the check leaves no PATH.tmp behind
for bad in /proc/sg_tab.json "" "$tmp" nodir/t.json; do
    "$bench" --backend cpu "${M[@]}" --iters 1 --warmup 0 --tune-engines "$bad" >out.txt 2>&1
    rc=$?
    ok "--tune-engines '$bad': exit 1, one line, before tuning" \
        '[ $rc -eq 1 ] && [ $(wc -l <out.txt) -eq 1 ] && ! grep -q "engine tuning" out.txt'
done
"$bench" --backend cpu "${M[@]}" --tune-engines t2.json --data idx:missing.gz >/dev/null 2>&1
rc=$?
ok "a run failing after the check leaves no file" '[ $rc -ne 0 ] && [ ! -e t2.json ] && [ ! -e t2.json.tmp ]'
"$bench" --backend cpu "${M[@]}" --gemm-time 3 >/dev/null 2>err.txt
rc=$?
ok "--gemm-time without --tune-engines: exit 2, one line" '[ $rc -eq 2 ] && [ $(wc -l <err.txt) -eq 1 ] && grep -q "gemm-time" err.txt'
"$bench" --backend cpu "${M[@]}" --knob-time 3 >/dev/null 2>err.txt
rc=$?
ok "--knob-time without --tune-engines: exit 2, one line" '[ $rc -eq 2 ] && [ $(wc -l <err.txt) -eq 1 ] && grep -q "knob-time" err.txt'

# ---- plan with it
"$plan" "${M[@]}" --no-table >p0.txt && "$plan" "${M[@]}" --no-table --engine-table c1.json >p1.txt
rc=$?
ok "plan --engine-table exits 0" '[ $rc -eq 0 ]'
ok "plan: the table line" 'grep -Eq "^  engine table +c1.json .*33 conv layers, 8 on cudnn, 25 on own" p1.txt'
ok "plan: per-layer rows" 'grep -Eq "^    down_blocks.0.resnets.0.conv1 +cudnn .*stored normalisation" p1.txt && grep -Eq "^    down_blocks.0.resnets.0.conv2 +own .*fused normalisation" p1.txt && grep -Eq "^    down_blocks.1.resnets.0.conv_shortcut +own .*in conv2d_sc with its block.s shortcut" p1.txt'
ok "plan: fewer fusions" 'grep -q "^  fused           20 normalisations" p0.txt && grep -q "^  fused           12 normalisations" p1.txt'
ok "plan: no schedule or GEMM lines for a table without them" '! grep -q "^    schedule:\|^    GEMMs:" p1.txt'
# the table's schedule, step knobs and GEMM algorithms, as plan shows them
python3 -c '
import json
d = json.load(open("c1.json"))
d["wg_sched"] = {"persist": True, "fill": False, "ms": [2.0, 1.5, None, None], "step_ms": [2.5, 2.25, None, None], "layers_step_ms": 21.75}
for l in d["layers"]:
    if l["layer"] == "down_blocks.0.resnets.0.conv2": l["wg_sched"] = {"persist": False, "fill": True, "ms": [1.0, 2.0, 0.5, 3.0]}
d["knobs"] = {"pdl": True, "tc_halo": "all", "dgrad_stats": None, "fuse_stats": "fwd", "norm_onepass": "1", "base_ms": 24.5, "step_ms": 22.25}
d["attention"] = {"engine": "fused", "gemm_ms": 3.5, "fused_ms": 1.25}
d["gemms"] = [{"gemm": "m16 n6 k24 opTN f32,f32>f32 ld24,24,16 b1 s0,0,0 al256,256,256", "algo": "0123456789abcdef", "ms": 0.5, "first_ms": 1.0},
              {"gemm": "m8 n6 k24 opTN f32,f32>f32 ld24,24,8 b1 s0,0,0 al256,256,256", "algo": "fedcba9876543210", "ms": 1.0, "first_ms": 1.0}]
json.dump(d, open("c1k.json", "w"), indent=1)
'
"$plan" "${M[@]}" --no-table --engine-table c1k.json >p1k.txt
rc=$?
ok "plan: the table's schedule and step knobs" '[ $rc -eq 0 ] && grep -q "^    schedule: wgmma persistent grid on, N tile that fills the SMs off (the step under each: 2.500 2.250 - - ms), 1 layer(s) on their own (the step with theirs: 21.750 ms); step knobs pdl on, tc_halo all, dgrad_stats default, fuse_stats fwd, norm_onepass 1 (its step 22.250 ms against 24.500 with the defaults)" p1k.txt'
ok "plan: the table's attention engine" 'grep -q "^    attention: fused (the attention nodes: gemm 3.500 ms, fused 1.250) (SG_ATTN overrides it)" p1k.txt && ! grep -q "^    attention:" p1.txt'
ok "plan: a layer's own wgmma schedule" 'grep -Eq "^    down_blocks.0.resnets.0.conv2 +own .*wgmma schedule persistent off, fill on; fused normalisation" p1k.txt && [ "$(grep -c "wgmma schedule persistent" p1k.txt)" -eq 1 ]'
"$plan" "${M[@]}" --json --engine-table c1k.json >p1k.json
ok "plan --json: a layer's own wgmma schedule" 'python3 - p1k.json <<PY
import json, sys
L = json.load(open(sys.argv[1]))["engine_table"]["layers"]
own = [l for l in L if l["wg_sched"] is not None]
assert [l["layer"] for l in own] == ["down_blocks.0.resnets.0.conv2"], own
assert own[0]["wg_sched"] == {"persist": False, "fill": True}, own
PY'
ok "plan: the table's GEMM algorithms" 'grep -q "^    GEMMs: 2 with their cuBLASLt algorithm, 1 not the heuristic.s first" p1k.txt'
# the default (no --fuse): unfused, but a table's own layers fuse (sg_model_fuse)
"$plan" "${M0[@]}" --no-table >pu.txt && "$plan" "${M0[@]}" --no-table --engine-table c1.json >pa.txt
ok "plan: the default fuses nothing, but what a table puts on own" \
    '! grep -q "^  fused .* normalisations" pu.txt && grep -q "^  fused           12 normalisations" pa.txt'
ok "plan without a table prints none" '! grep -q "engine table" p0.txt'
"$plan" "${M[@]}" --json --engine-table c1.json >p1.json
ok "plan --json: engine_table" 'python3 - p1.json <<PY
import json, sys
d = json.load(open(sys.argv[1]))
L = d["engine_table"]["layers"]
assert len(L) == 33 and len(d["engine_table"]["hash"]) == 16 and d["fused_norms"] == 12
for l in L:
    assert l["engine"] == ("cudnn" if l["layer"].endswith(".conv1") else "own"), l
    if l["layer"].endswith(".conv1"): assert not l["input_fused"], l
assert d["model"]["engine_table"] == d["engine_table"]["hash"]
PY'
# an fp32 table whose conv2 layers say Winograd (the fp32 3x3 passes as F(2x2, 3x3)) and their
# other tile passes on the tensor cores (3xTF32): plan shows them; the same layers in a bf16
# table are refused with one line, either form
python3 -c '
import json
d = json.load(open("tab.json"))
for l in d["layers"]:
    if l["layer"].endswith(".conv2"): l.update(wino=True, direct_ms=2.0, wino_ms=1.0)
json.dump(d, open("w16.json", "w"), indent=1)
t16 = json.loads(json.dumps(d))
for l in t16["layers"]:
    if l["layer"].endswith(".conv2"): del l["wino"]; l.update(f32tc=True, fma_ms=3.0, f32tc_ms=2.0)
json.dump(t16, open("t16.json", "w"), indent=1)
for l in d["layers"]:
    if l["layer"].endswith(".conv2"): l.update(f32tc=True, fma_ms=3.0, f32tc_ms=2.0)
json.dump(dict(d, precision="fp32"), open("w32.json", "w"), indent=1)
'
F32=(--model unet_tiny --precision fp32 --batch 2)
"$plan" "${F32[@]}" --no-table --engine-table w32.json >pw.txt
rc=$?
ok "plan: an fp32 table's forms line" 'n=$(grep -c "^    .*\.conv2 " pw.txt); grep -q "^    fp32 forms: $n own layer(s) with their 3x3 stride-1 passes as Winograd, $n with their tiles on the tensor cores" pw.txt'
ok "plan: an fp32 table's Winograd and 3xTF32 layers" '[ $rc -eq 0 ] && grep -Eq "^    down_blocks.0.resnets.0.conv2 +own wino tf32x3 " pw.txt && [ "$(grep -c " own wino tf32x3 " pw.txt)" -eq "$(grep -c "^    .*\.conv2 " pw.txt)" ]'
"$plan" "${F32[@]}" --json --engine-table w32.json >pw.json
ok "plan --json: the Winograd layers" 'python3 - pw.json <<PY
import json, sys
L = json.load(open(sys.argv[1]))["engine_table"]["layers"]
assert L and all(l["wino"] == l["f32tc"] == l["layer"].endswith(".conv2") for l in L), L
PY'
"$plan" "${M[@]}" --no-table --engine-table w16.json >/dev/null 2>err.txt
rc=$?
ok "plan: Winograd in a bf16 table refused, one line" '[ $rc -ne 0 ] && [ $(wc -l <err.txt) -eq 1 ] && grep -q "fp32 tables" err.txt'
"$plan" "${M[@]}" --no-table --engine-table t16.json >/dev/null 2>err.txt
rc=$?
ok "plan: 3xTF32 tiles in a bf16 table refused, one line" '[ $rc -ne 0 ] && [ $(wc -l <err.txt) -eq 1 ] && grep -q "\"f32tc\" is for fp32 tables" err.txt'

# ---- bad tables: one line, non-zero, nothing made
echo '{nope' >bad.json
python3 - <<'PY'
import json
d = json.load(open("tab.json"))
e = dict(d, layers=d["layers"] + [{"layer": "down_blocks.7.resnets.0.conv1", "engine": "own"}])
json.dump(e, open("extra.json", "w"))
json.dump(dict(d, layers=d["layers"][1:]), open("missing.json", "w"))
json.dump(dict(d, batch=8), open("batch.json", "w"))
json.dump(dict(d, precision="fp32"), open("fp32.json", "w"))
json.dump(dict(d, model="unet_fmnist"), open("model.json", "w"))
PY
bad() { # name, file, expected text
  local file=$2 want=$3
  "$plan" "${M[@]}" --engine-table "$file" >/dev/null 2>err.txt; local rc=$?
  ok "plan, $1: non-zero, one line naming it" '[ $rc -ne 0 ] && [ $(wc -l <err.txt) -eq 1 ] && grep -q "$want" err.txt'
  "$train" "${M[@]}" --data synthetic:64 --backend cpu --steps 2 --out r_bad --engine-table "$file" >/dev/null 2>err.txt
  rc=$?
  ok "train, $1: non-zero, one line, no run directory" '[ $rc -ne 0 ] && [ $(wc -l <err.txt) -eq 1 ] && grep -q "$want" err.txt && [ ! -e r_bad ]'
}
bad "malformed" bad.json "not JSON"
bad "missing file" nofile.json "cannot open the engine table: No such file or directory"
mkdir -p adir
bad "a directory" adir "adir: a directory, not an engine table file"
bad "unknown layer" extra.json "down_blocks.7.resnets.0.conv1, which model unet_tiny does not have"
bad "missing layer" missing.json "no entry for conv layer conv_in"
bad "another batch" batch.json "batch 8 per pass"
bad "another precision" fp32.json "precision fp32"
bad "another model" model.json "model unet_fmnist"

# ---- train: the same bits with and without; resume with the checkpoint's table
R=("$train" "${M[@]}" --data synthetic:64 --backend cpu --steps 4 --ckpt-every 2 --keep 0 --samples 1 --ddim-steps 2)
"${R[@]}" --out r0 >/dev/null 2>&1 && "${R[@]}" --out r1 --engine-table c1.json >/dev/null 2>&1
rc=$?
ok "train with and without a table" '[ $rc -eq 0 ]'
ok "the same tensors (ckpt diff --ignore-meta)" '"$ckpt" diff --ignore-meta r0/ckpt_00000004.sgck r1/ckpt_00000004.sgck >/dev/null'
ok "the table in the checkpoint (ckpt info)" '"$ckpt" info r1/ckpt_00000004.sgck | grep -q "engine_table {\"format\":\"stepgraph_engine_table\""'
cp -r r1 r2 && rm r2/ckpt_00000004.sgck
"$train" --resume r2/ckpt_00000002.sgck >/dev/null 2>err.txt
rc=$?
ok "resume with the checkpoint's table: no warning, the straight run's bits" '[ $rc -eq 0 ] && ! grep -q "engine" err.txt && "$ckpt" diff r1/ckpt_00000004.sgck r2/ckpt_00000004.sgck >/dev/null'
cp -r r1 r3 && rm r3/ckpt_00000004.sgck
"$train" --resume r3/ckpt_00000002.sgck --engine-table tab.json >/dev/null 2>err.txt
rc=$?
ok "resume with another table: goes on, warns naming layers" '[ $rc -eq 0 ] && grep -q "layer down_blocks.0.resnets.0.conv1: cudnn -> own" err.txt && grep -q "8 conv layer(s) change engine (or GEMM(s) algorithm)" err.txt'
ok "resume with another table: recorded in config.json" 'grep -q "\"engine_table\": *\"tab.json\"" r3/config.json'
"$train" --resume r3/ckpt_00000002.sgck --steps 6 --engine-table batch.json >/dev/null 2>err.txt
rc=$?
ok "resume with a table that does not fit: non-zero, and no warning of changes it will not make" '[ $rc -ne 0 ] && grep -q "batch 8 per pass" err.txt && ! grep -q "replaces\|change engine" err.txt'

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
