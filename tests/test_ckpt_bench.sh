#!/usr/bin/env bash
# ckpt_bench's JSON report (issue 15 item 5: one JSON library for every JSON the project
# writes): a --dir and a data path with a quote, a backslash and a space come out as valid JSON
# strings, read back exactly (the hand-written writer printed them raw: invalid JSON).
# Usage: test_ckpt_bench.sh CKPT_BENCH
set -u
bench=$1
source "$(dirname "${BASH_SOURCE[0]}")/ok.sh" # pass, fail, ok NAME CONDITION
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
dir="$tmp/q\"d \\ir"
mkdir -p "$dir" "$tmp/da\"ta"
python3 - "$tmp/da\"ta/images.idx" <<'PY'
import random, struct, sys
random.seed(2)
n, h, w = 8, 16, 16
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack(">IIII", 0x803, n, h, w))
    f.write(bytes(random.randrange(256) for _ in range(n * h * w)))
PY
"$bench" --model unet_tiny --data "idx:$tmp/da\"ta/images.idx" --steps 1 --reps 1 --threads 2 \
    --dir "$dir" --json "$tmp/out.json" >"$tmp/table.txt" 2>&1; rc=$?
ok "ckpt_bench runs (exit $rc)" '[ $rc -eq 0 ]'
ok "its JSON reads back, the paths exactly" 'python3 - "$tmp/out.json" "$dir" "idx:$tmp/da\"ta/images.idx" <<PY
import json, sys
d = json.load(open(sys.argv[1]))
assert d["dir"] == sys.argv[2] and d["data"] == sys.argv[3], (d["dir"], d["data"])
assert [s["state"] for s in d["states"]] == ["init", "trained"], d["states"]
for s in d["states"]:
    assert s["roundtrip_ok"] is True and s["save"]["median_s"] > 0 and "memcpy" in s["one_core"]
PY'
# a data file that is not there: one line, "data:" once (it said "data: data: ...")
"$bench" --model unet_tiny --data "idx:$tmp/missing.idx" --steps 1 --reps 1 --dir "$dir" \
    >/dev/null 2>"$tmp/err.txt"; rc=$?
ok "a missing data file: exit 1, one line naming it once as data" '[ $rc -eq 1 ] && [ $(wc -l <"$tmp/err.txt") -eq 1 ] && grep -q "^ckpt_bench: data: $tmp/missing.idx: " "$tmp/err.txt"'
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
