#!/usr/bin/env bash
# The plan CLI as a user meets it: the headline numbers, --json's required fields, and the
# exit codes for bad input.
set -u
plan=$1
source "$(dirname "${BASH_SOURCE[0]}")/ok.sh" # pass, fail, ok NAME CONDITION

out=$($plan --model unet_cifar --no-table)
ok "cifar params" 'grep -q "parameters      35,746,307" <<<"$out"'
ok "cifar TFLOP" 'grep -q "FLOPs / step    4.807 TFLOP  (matmul 4.777" <<<"$out"'
ok "chart printed" 'grep -q "memory over the schedule" <<<"$out"'
# the README's excerpt of this output ("What it looks like") is the output, line for line
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readme_out=$(mktemp)
printf '%s\n' "$out" >"$readme_out"
ok "README's plan excerpt is true" 'python3 - "$root/README.md" "$readme_out" <<PY
import sys
md = open(sys.argv[1]).read()
block = md.split("\`./plan --model unet_cifar\` prints", 1)[1].split("\`\`\`\n", 2)[1]
lines = [l for l in block.splitlines() if l.strip()]
out = set(open(sys.argv[2]).read().splitlines())
missing = [l for l in lines if l not in out]
assert len(lines) >= 8 and not missing, missing
PY'
rm -f "$readme_out"
# the bytes the step moves at least (sg_node_bytes summed; tests/test_planner.c checks the rule)
ok "cifar traffic" 'grep -Eq "^  traffic / step  [0-9]+\.[0-9]{2} GB at least" <<<"$out"'
ok "cifar arena at its bound" 'grep -q "arena / bound = 1.0000" <<<"$out"'
out=$($plan --model unet_fmnist --no-table)
ok "fmnist arena at its bound" 'grep -q "arena / bound = 1.0000" <<<"$out"'
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
$plan --model unet_cifar --batch 128 --precision bf16 --fuse 1 --json >"$tmp/plan.json"
ok "json fields" 'python3 - "$tmp/plan.json" <<PY
import json, sys
d = json.load(open(sys.argv[1]))
assert d["params"] == 35746307
assert 4.4e12 < d["flops_per_step"] < 4.5e12  # bf16 fuses the upsample convs (upconv2d): 4/9 of their FLOPs
assert d["arena_bytes"] >= d["lower_bound_bytes"] > 0
assert d["arena_bytes"] == d["lower_bound_bytes"]  # the search at the bound reaches it
# fused, unet_cifar b128 bf16 moves about 17.0 GB a step (19.5 unfused): at least its arena
assert d["arena_bytes"] < d["bytes_moved_per_step"] < 40e9, d["bytes_moved_per_step"]
t = d["tensors"]
assert len(t) > 100
for k in ("name", "role", "dtype", "shape", "bytes", "offset", "first", "last"):
    assert all(k in x for x in t), k
assert any(x["dtype"] == "bf16" for x in t)
# conv engines: every conv pass counted; a forward conv reading a concat output and its two
# backward passes are the ones cuDNN cannot take, and so are the two backward passes of the
# decoder blocks 1x1 shortcuts folded into conv2 (conv2d_sc, itself no engine-chosen conv)
s = d["schedule"]
convs = [n for n in s if n["op"] in ("conv2d", "conv2d_add", "conv2d_bwd_data", "conv2d_bwd_weight")]
cat_out = {n["out"][0] for n in s if n["op"] == "concat"}
cat_fwd = [n for n in s if n["op"] in ("conv2d", "conv2d_add") and n["in"][0] in cat_out]
sc = [n for n in s if n["op"] == "conv2d_sc"]
sc_cat = [n for n in sc if n["in"][3] in cat_out]
assert d["conv_nodes"] == len(convs) > 0, (d["conv_nodes"], len(convs))
# a fused normalisation (--fuse 1): its forward conv reads a virtual operand, which cuDNN
# cannot take; the weight gradient reads the recomputed copy of the backward pass (stored)
fused = {x["id"] for x in t if "normalised_by" in x}
fused_fwd = [n for n in s if n["op"] in ("conv2d", "conv2d_add", "conv2d_sc") and n["in"][0] in fused]
fused_bw = [n for n in s if n["op"] == "conv2d_bwd_weight" and n["in"][1] in fused]
fused_fwd_conv = [n for n in fused_fwd if n["op"] != "conv2d_sc"]
assert [n for n in s if set(n["in"]) & fused] == fused_fwd and not fused_bw
assert len(sc_cat) > 0 and d["conv_cudnn_eligible"] == len(convs) - 3 * len(cat_fwd) - 2 * len(sc_cat) - len(fused_fwd_conv), d["conv_cudnn_eligible"]
# the gemm engine passes (under auto): every 1x1 conv pass whose x operand is stored (the
# data gradient has none), the rule of sg_conv_gemm_node
byid = {x["id"]: x for x in t}
def ksize(n):
    return byid[n["out"][0] if n["op"] == "conv2d_bwd_weight" else n["in"][1]]["shape"][1]
def xop(n):
    return n["in"][1] if n["op"] == "conv2d_bwd_weight" else None if n["op"] == "conv2d_bwd_data" else n["in"][0]
gemm = [n for n in convs if ksize(n) == 1 and xop(n) not in fused]
assert d["conv_gemm"] == len(gemm) > 0, (d["conv_gemm"], len(gemm))
# every normalisation but conv_norm_out (read by the 3-channel conv_out) is fused; each one,
# and conv_norm_out, is recomputed in the backward pass for its weight gradient, as unfused;
# and every attention P (--store-attn 0, the default), by attention_p
attn = [n for n in s if n["op"] == "attention"]
assert len(attn) == 6 and len([n for n in s if n["op"] == "attention_p"]) == len(attn)
assert d["recomputed_tensors"] == 1 + len(fused) + len(attn), (d["recomputed_tensors"], len(fused))
assert all(x["bytes"] == 0 and x["offset"] == -1 for x in t if "normalised_by" in x)
elem = {"bf16": 2, "fp32": 4}
want = sum(elem[x["dtype"]] * eval("*".join(map(str, x["shape"]))) for x in t if "normalised_by" in x)
# every residual add (the 22 ResBlocks and the 6 attention blocks) is in the store of a conv: no
# add node is left, and the conv outputs they never write are counted too; the 13 blocks whose
# channel count changes (12 decoder blocks, the first block of level 1) fold their shortcut into
# conv2: its output and gradient are never written either
res = [n for n in s if n["op"] in ("conv2d_add", "conv2d_sc")]
assert d["fused_residuals"] == len(res) == 28 and not any(n["op"] == "add" for n in s)
assert d["fused_shortcuts"] == len(sc) == 13 and len(sc_cat) == 12, (len(sc), len(sc_cat))
rbytes = sum(t[n["out"][0]]["bytes"] for n in res)
sbytes = sum(2 * t[n["out"][0]]["bytes"] for n in sc)
assert d["fused_residual_bytes"] == rbytes, (d["fused_residual_bytes"], rbytes)
# the 3 decoder upsamples run inside their 3x3 conv from the low-res input: no upsample2x node,
# and the upsampled tensor (4x the input) and its gradient are never written
upc = [n for n in s if n["op"] == "upconv2d"]
assert d["fused_upconvs"] == len(upc) == 3 and not any(n["op"] == "upsample2x" for n in s)
ubytes = sum(2 * 4 * t[n["in"][0]]["bytes"] for n in upc)
assert d["fused_upconv_bytes"] == ubytes, (d["fused_upconv_bytes"], ubytes)
assert d["fused_shortcut_bytes"] == sbytes, (d["fused_shortcut_bytes"], sbytes)
assert d["unmaterialised_bytes"] == want + rbytes + sbytes + ubytes, (d["unmaterialised_bytes"], want + rbytes + sbytes + ubytes)
PY'
$plan --model unet_cifar --batch 128 --precision bf16 --fuse 0 --json >"$tmp/plan0.json"
ok "json --fuse 0" 'python3 - "$tmp/plan.json" "$tmp/plan0.json" <<PY
import json, sys
d, u = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert u["fuse"] == 0 and u["fused_norms"] == 0 and u["unmaterialised_bytes"] == 0
assert u["fused_residuals"] == 0 and sum(n["op"] == "add" for n in u["schedule"]) == 28
assert not any("normalised_by" in x for x in u["tensors"])
# unfused, the upsample before each conv that upconv2d took is recomputed too (upsample2x_apply)
assert u["recomputed_tensors"] == d["recomputed_tensors"] + d["fused_upconvs"]
assert d["lower_bound_bytes"] <= u["lower_bound_bytes"], (d["lower_bound_bytes"], u["lower_bound_bytes"])
# and each fused residual saves its add node and one of the two gradient copies of the add,
# each folded shortcut its conv node and the other copy, each upconv2d its upsample2x node,
# its recomputation and the backward node of it
assert u["fused_upconvs"] == 0 and sum(n["op"] == "upsample2x" for n in u["schedule"]) == 3
assert d["nodes"] == u["nodes"] - 2 * d["fused_residuals"] - 2 * d["fused_shortcuts"] - 3 * d["fused_upconvs"]
PY'
out=$($plan --model unet_cifar --precision bf16 --fuse 1 --no-table)
ok "fused line" 'grep -q "^  fused           [0-9]* normalisations computed inside the convolutions.* 28 residual adds in the store" <<<"$out"'
out=$($plan --model unet_cifar --no-table)
ok "fp32 fuses nothing" 'grep -q "^  fused           nothing (--fuse 0: the default; --fuse 1 fuses, on the CPU only in fp32)" <<<"$out"'
out=$($plan --model unet_cifar --precision bf16 --no-table)
ok "bf16 fuses nothing by default" 'grep -q "^  fused           nothing (--fuse 0: the default; --fuse 1 fuses)" <<<"$out"'
ok "table has tensors" '$plan --model unet_tiny | grep -q "down_blocks.0.resnets.0.conv1.weight"'
$plan --model nope >/dev/null 2>"$tmp/err.txt"; rc=$?
ok "unknown model exits 2" '[ $rc -eq 2 ] && [ $(wc -l <"$tmp/err.txt") -eq 1 ]'
$plan --frobnicate 3 >/dev/null 2>"$tmp/err.txt"; rc=$?
ok "unknown flag exits 2" '[ $rc -eq 2 ] && grep -q frobnicate "$tmp/err.txt"'
$plan --batch zero >/dev/null 2>"$tmp/err.txt"; rc=$?
ok "bad value exits 2" '[ $rc -eq 2 ]'
# issue 15's defects: each of these was accepted, printed a default plan or crashed
bad() { # name, args...: exit 2, one error line, nothing on stdout
  local name=$1; shift
  $plan "$@" >"$tmp/out.txt" 2>"$tmp/err.txt"; local rc=$?
  ok "$name exits 2 with one line" '[ $rc -eq 2 ] && [ ! -s "$tmp/out.txt" ] && [ $(wc -l <"$tmp/err.txt") -eq 1 ]'
}
bad "--dropout nan" --model unet_tiny --dropout nan
bad "--dropout inf" --model unet_tiny --dropout inf
bad "--model without a value" --model
bad "--model followed by a flag" --model --json
bad "--ch-mult 1,,2" --model unet_tiny --ch-mult 1,,2
bad "--ch-mult trailing comma" --model unet_tiny --ch-mult 1,2,
bad "--batch ' 4'" --model unet_tiny --batch " 4"
bad "--batch 4294967297" --model unet_tiny --batch 4294967297
bad "--json=1 (a switch takes no value)" --model unet_tiny --json=1
bad "--help=3 (it printed the help)" --help=3
bad "--heads with --head-ch (the last replaced the other)" --model unet_tiny --heads 2 --head-ch 16
bad "--head-ch with --heads" --model unet_tiny --head-ch=16 --heads=2
$plan --model unet_tiny --heads 2 --head-ch 16 >/dev/null 2>"$tmp/err.txt"
ok "--heads with --head-ch says to give one" 'grep -q "give one" "$tmp/err.txt"'
bad "a stray argument" --model unet_tiny stray
$plan --model unet_tiny --attn-res 3 >/dev/null 2>"$tmp/err.txt"; rc=$?
ok "--attn-res 3 is not a resolution of the model" '[ $rc -ne 0 ] && grep -q "attention resolution 3" "$tmp/err.txt"'
$plan --model unet_tiny --ch-mult 1,1,1,1 --res-blocks 16 --no-table >"$tmp/out.txt" 2>"$tmp/err.txt"; rc=$?
ok "16 res blocks x 4 levels plans (the skip stack overflowed)" '[ $rc -eq 0 ] && grep -q "parameters" "$tmp/out.txt"'
$plan --model unet_tiny --res-blocks 17 >/dev/null 2>&1; rc=$?
ok "17 res blocks is a usage error" '[ $rc -eq 2 ]'
a=$($plan --model unet_tiny --batch 2 --json)
b=$($plan --model=unet_tiny --batch=2 --json)
ok "--flag=value is --flag value" '[ -n "$a" ] && [ "$a" = "$b" ]'
ok "help lists models" '$plan --help | grep -q unet_adm64'
# F32_OWN (graph/backend_cuda_engines.c): the fp32 passes at 32 x 32 and above that auto puts on own,
# counted among the cuDNN-eligible ones and said in the text; none in bf16
f32own() { # precision: "counted expected" (the rule restated from the schedule and tensors)
    $plan --model unet_adm64 --batch 2 --precision "$1" --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
t, n_ = d["tensors"], 0
for n in d["schedule"]:
    op = n["op"]
    if op not in ("conv2d", "conv2d_add", "conv2d_bwd_data", "conv2d_bwd_weight"):
        continue
    x = n["out"][0] if op == "conv2d_bwd_data" else n["in"][1] if op == "conv2d_bwd_weight" else n["in"][0]
    y = n["in"][0] if op.startswith("conv2d_bwd") else n["out"][0]
    w = t[n["out"][0] if op == "conv2d_bwd_weight" else n["in"][1]]["shape"]
    if "parts" in t[x] or "parts" in t[y] or (w[1] == 1 and op != "conv2d_bwd_data"):
        continue  # cuDNN cannot take it, or a 1x1 on the gemm engine
    if w[1] == 1 and op == "conv2d_bwd_data":
        continue
    n_ += t[x]["dtype"] == "f32" and t[x]["shape"][1] * t[x]["shape"][2] >= 32 * 32
print(d["conv_f32_own"], n_)'
}
f32=$(f32own fp32) b16=$(f32own bf16)
ok "fp32 passes on own by F32_OWN: counted as the rule says ($f32), none in bf16 ($b16)" \
    '[ "${f32% *}" -gt 0 ] && [ "${f32% *}" = "${f32#* }" ] && [ "$b16" = "0 0" ]'
ok "plan says which fp32 passes run on own" \
    '$plan --model unet_adm64 --batch 2 --precision fp32 | grep -q "of them fp32 passes at 32 x 32 and above, which run on own unless SG_CONV_F32=cudnn"'
# the help's --model entry names one default model, and it is the one plan uses without --model
help_default=$($plan --help | awk '/^  --model NAME/ { on = 1; next } /^  --/ { on = 0 } on' |
    grep -i "default" | grep -o "unet_[a-z0-9]*" | sort -u)
used=$($plan --json --no-table | python3 -c "import json, sys; print(json.load(sys.stdin)['model']['model'])")
ok "help names one default model, the one used ($used)" '[ "$help_default" = "$used" ]'
# data parallel: one rank's plan; the all-reduce carries exactly the fp32 gradients + the loss
$plan --model unet_tiny --ranks 2 --json >"$tmp/r2.json"; rc=$?
ok "--ranks 2 runs" '[ $rc -eq 0 ]'
ok "--ranks json: per-rank batch, all-reduce bytes = the gradient region + the loss" 'python3 - "$tmp/r2.json" <<PY
import json, sys
d = json.load(open(sys.argv[1]))
assert d["ranks"] == 2 and d["rank_batch"] == 2, (d["ranks"], d["rank_batch"])
assert d["allreduce_bytes"] == d["role_bytes"]["grad"] + 4 >= 4 * d["params"] + 4, d["allreduce_bytes"]
assert sum(1 for n in d["schedule"] if n["op"] == "allreduce") == 1
PY'
bad "--ranks with --forward (an empty data-parallel section)" --model unet_tiny --forward --ranks 2
$plan --model unet_tiny --ranks 2 --forward >/dev/null 2>"$tmp/err.txt"
ok "--ranks with --forward says why" 'grep -q "no gradients to all-reduce" "$tmp/err.txt"'
ok "--ranks text" '$plan --model unet_cifar --ranks 8 --no-table | grep -q "8 ranks x 16 samples (global batch 128)"'
ok "no all-reduce without --ranks" '[ "$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[\"allreduce_bytes\"])" "$tmp/plan.json")" = 0 ]'
$plan --model unet_cifar --ranks 3 >/dev/null 2>"$tmp/err3.txt"; rc=$?
ok "--ranks 3 with batch 128 fails and says why" '[ $rc -ne 0 ] && grep -q "must divide evenly over 3 ranks" "$tmp/err3.txt"'
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
