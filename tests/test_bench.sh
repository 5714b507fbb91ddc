#!/usr/bin/env bash
# bench on the CPU (JSON fields, the text report, bad flags), and tools/bench.sh +
# tools/bench_report.py end to end with fake stepgraph / PyTorch programs: a failing job, a
# job that times out and a job the budget no longer fits are all recorded and the report
# still renders with the side-by-side table, the ratios, the targets and the breakdown.
#
# The per-conv-layer table of a unet_tiny bf16 plan (every conv-like node, conv2d_sc and the
# upconvs included; FLOPs, TFLOP/s, the same-size GEMM, the fusion savings) is checked on the
# CPU here, and with --cuda-host BIN [DNN_BIN] on bench built over the host emulation of the
# CUDA backend (tests/cuda_host_bench.cmake: the real time_gemm hook; only that part runs);
# DNN_BIN, that bench built over the emulated cuDNN too: its table with the passes on cuDNN.
set -u
mode=cpu
if [ "${1:-}" = --cuda-host ]; then mode=cuda_host; shift; fi
bench=$1
dnn_bench=${2:-} # --cuda-host: the bench built over the emulated cuDNN too, where there is one
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
shown=() # cuda_host: the runs' output files, shown at the end where a check failed
source "$(dirname "${BASH_SOURCE[0]}")/ok.sh" # pass, fail, ok NAME CONDITION
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# check_layers JSON GEMM [DNN]: the per-layer rows and the fusion savings of a unet_tiny bf16
# run; GEMM=1: the backend has time_gemm (numbers in the GEMM columns), 0: '-' (null) there;
# DNN=1: built with cuDNN (the emulated one on the host), the step's engine auto
check_layers() {
    python3 - "$1" "$2" "${3:-0}" <<'PY'
import json, math, re, sys
d = json.load(open(sys.argv[1]))
gemm = sys.argv[2] == "1"
dnn = sys.argv[3] == "1"
assert not dnn or gemm, "cuDNN only on the CUDA backend"
epi = d["env"].get("gemm_epilogue", False)
assert not gemm or epi, "the host emulation offers the bias epilogue"
rows = d["conv_layers"]
ops = {r["op"] for r in rows}
want = {"conv2d", "conv2d_add", "conv2d_bwd_data", "conv2d_bwd_weight", "conv2d_sc",
        "upconv2d", "upconv2d_bwd_data", "upconv2d_bwd_weight"}
assert want <= ops, ("missing layer ops", want - ops)
# every conv-like node of the breakdown has its row
n_bd = sum(o["nodes"] for o in d["breakdown"] if o["op"] in want)
assert len(rows) == n_bd, (len(rows), n_bd)
assert len({r["node"] for r in rows}) == len(rows)
def close(a, b):
    return abs(a - b) <= 1e-6 * max(abs(a), abs(b)) + 1e-12
for r in rows:
    m, n, k = r["gemm_mnk"]
    assert r["flops"] > 0 and close(2.0 * m * n * k, r["flops"]), ("2MNK != FLOPs", r)
    assert r["own_ms"] > 0 and close(r["tflops"], r["flops"] / (r["own_ms"] * 1e-3) / 1e12), r
    # the CUDA backend's library side of a 1x1 conv is its gemm engine (cuBLASLt), the step's
    # engine where the plan leaves its input stored, except a bf16 forward's whose GEMM would
    # need the fp32 tile (a concatenated input: the decoder's shortcuts; every one without the
    # bias epilogue, describe()'s gemm_epilogue), which runs on own and is timed on gemm beside it
    fwd_1x1 = (r["op"] in ("conv2d", "conv2d_add") and " K1 S1 " in r["shape"]
               and "norm" not in r["fusions"])
    fwd_tile = fwd_1x1 and (not epi or ("up_blocks" in r["tensor"]
                                        and "conv_shortcut" in r["tensor"]))
    # a 3x3 pass with nothing fused into it (no upsample either): cuDNN's where it is built in
    # (auto; the emulation has a deterministic engine for every such pass), else own
    plain_3x3 = " K3 " in r["shape"] and r["fusions"] == "-" and not r["op"].startswith("up")
    if r["engine"] == "gemm" or (gemm and fwd_1x1):
        assert gemm and " K1 S1 " in r["shape"] and r["cudnn_ms"] > 0, r
        assert r["engine"] == ("own" if fwd_tile else "gemm"), r
    elif dnn and plain_3x3:
        # its pinned plan by name: the engine's global index, its knobs, the variant (the
        # fused bias of a forward, the bf16 dw of a weight gradient) and its workspace; a
        # deterministic engine of full precision (the emulation's 0 direct or 1 split, never
        # 2 atomic, 3 tf32 or 4 half-accumulate)
        m = re.fullmatch(r"cudnn e(\d+)((?:k\d+=-?\d+)*)(\+bias|\+dw_bf16)? ws(\d+)", r["engine"])
        assert m and m.group(1) in ("0", "1") and r["cudnn_ms"] > 0, r
        assert (m.group(3) or "") == {"conv2d": "+bias", "conv2d_bwd_weight": "+dw_bf16"}.get(r["op"], ""), r
        assert (m.group(1) == "1") == bool(m.group(2)), r  # the split engine's knobs, none else
    else:
        assert r["cudnn_ms"] is None and not r["engine"].startswith("cudnn"), r
    if gemm:
        assert r["gemm_ms"] > 0, r
        assert close(r["gemm_tflops"], r["flops"] / (r["gemm_ms"] * 1e-3) / 1e12), r
        assert close(r["pct_of_gemm"], 100 * r["tflops"] / r["gemm_tflops"]), r
    else:
        assert r["gemm_ms"] is None and r["gemm_tflops"] is None and r["pct_of_gemm"] is None, r
    # own on its Hopper (wgmma) kernels: on the CUDA backend where they take the node (the host
    # emulation reports compute capability 9.0), never on the CPU
    if r["wgmma_ms"] is not None:
        assert gemm and r["wgmma_ms"] > 0, r
        assert close(r["wgmma_tflops"], r["flops"] / (r["wgmma_ms"] * 1e-3) / 1e12), r
        assert close(r["wgmma_pct_of_gemm"], 100 * r["wgmma_tflops"] / r["gemm_tflops"]), r
    else:
        assert r["wgmma_tflops"] is None and r["wgmma_pct_of_gemm"] is None, r
    # ... on the resident-halo kernels and per tap, as a pair, where a halo kernel takes the
    # node: a forward, a stride-1 3x3 data gradient (never an upconv's pass or a weight gradient)
    h, t = r["wgmma_halo_ms"], r["wgmma_per_tap_ms"]
    assert (h is None) == (t is None), r
    if h is not None:
        assert r["wgmma_ms"] is not None and h > 0 and t > 0, r
        assert r["op"] in ("conv2d", "conv2d_add", "conv2d_sc", "conv2d_bwd_data"), r
        assert r["op"] != "conv2d_bwd_data" or " K3 S1 " in r["shape"], r
    f = r["fusions"]
    assert (r["op"] == "conv2d_sc") == ("shortcut" in f), r
    assert (r["op"] == "conv2d_add") == ("residual" in f), r
    assert r["op"].startswith("upconv2d") == ("upsample" in f), r
assert not gemm or any(r["engine"] == "gemm" for r in rows), "no 1x1 conv on the gemm engine"
# cuDNN: every pass of a plain 3x3 conv, as many as the step says it put there (describe());
# none without it
on_dnn = [r for r in rows if r["engine"].startswith("cudnn")]
assert len(on_dnn) == d["env"].get("convs_cudnn", 0), (len(on_dnn), d["env"].get("convs_cudnn"))
assert {r["op"] for r in on_dnn} == ({"conv2d", "conv2d_bwd_data", "conv2d_bwd_weight"} if dnn else set()), on_dnn
assert not dnn or 0 < d["env"]["cudnn_plans"] <= len(on_dnn), d["env"]["cudnn_plans"]
# the wgmma column: most rows on the CUDA backend (every op of the table among them), none on
# the CPU
wg = [r for r in rows if r["wgmma_ms"] is not None]
assert (2 * len(wg) > len(rows) and {r["op"] for r in wg} == ops) if gemm else not wg, \
    (len(wg), len(rows), ops - {r["op"] for r in wg})
# the halo columns: forwards and data gradients among them on the CUDA backend, none on the CPU
halo = {r["op"] for r in rows if r["wgmma_halo_ms"] is not None}
assert {"conv2d", "conv2d_sc", "conv2d_bwd_data"} <= halo if gemm else not halo, halo
# a forward conv's same-size GEMM: M = N*Ho*Wo, N = Co, K = 9*Ci (+ Cin for the fold)
sc = [r for r in rows if r["op"] == "conv2d_sc"]
up = [r for r in rows if r["op"] == "upconv2d"]
assert sc and up and any("norm" in r["fusions"] for r in rows)
for r in sc:
    nb, hw, chans = r["shape"].split()[:3]
    h, w = map(int, hw.split("x")); ci, co = map(int, chans.split("->"))
    m, n, k = r["gemm_mnk"]
    assert m == int(nb) * h * w and n == co and k > 9 * ci, r
# one GEMM timing per distinct size, the same ms for every row of that size
sizes = {tuple(r["gemm_mnk"]) for r in rows}
assert d["gemm_sizes_timed"] == (len(sizes) if gemm else 0), (d["gemm_sizes_timed"], len(sizes))
for s in sizes:
    assert len({r["gemm_ms"] for r in rows if tuple(r["gemm_mnk"]) == s}) == 1, s
# the fusion savings: the plan's four kinds, each with its nodes' time
fu = d["fusions"]
kinds = {f["kind"]: f for f in fu["kinds"]}
assert set(kinds) == {"norm", "residual", "shortcut", "upsample"}, kinds
for f in fu["kinds"]:
    assert f["count"] > 0 and f["bytes_removed"] > 0 and f["fused_nodes"] > 0, f
    tag = f["kind"]
    mine = [r for r in rows if tag in r["fusions"] or (tag == "residual" and "shortcut" in r["fusions"])]
    assert f["fused_nodes"] == len(mine), (f, len(mine))
    assert close(f["fused_nodes_ms"], sum(r["own_ms"] for r in mine)), f
assert kinds["upsample"]["flops_removed"] > 0 and kinds["norm"]["flops_removed"] == 0
assert "--fuse 0" in fu["unfused_command"] and "--model unet_tiny" in fu["unfused_command"]
PY
}

# check_memory JSON: the memory columns (sg_node_bytes per row, summed per step; GB/s over the
# replay or eager ms; the floors: a row's bytes at the measured copy bandwidth where it does no
# matmul work, none where the matmul peak is not measured, as on both backends here)
check_memory() {
    python3 - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
def close(a, b):
    return abs(a - b) <= 1e-6 * max(abs(a), abs(b)) + 1e-12
bd, bw = d["breakdown"], d["mem_peak_gb_per_s"]
assert d["bytes_per_step"] > 0 and close(d["gb_per_s"], d["bytes_per_step"] / (d["ms_per_step"] * 1e6)), d
assert bw > 0 and d["matmul_peak_tflops"] is None and d["floor_ms"] is None, d
assert close(sum(o["gbytes"] for o in bd) * 1e9, d["bytes_per_step"])
for o in bd:
    t = o["replay_ms"] if o["replay_ms"] else o["ms"]
    assert o["gbytes"] >= 0 and (o["gb_per_s"] is None if t <= 0 else close(o["gb_per_s"], o["gbytes"] * 1e3 / t)), o
    if o["matmul"]:
        assert o["floor_ms"] is None, o
    else:
        assert close(o["floor_ms"], o["gbytes"] * 1e3 / bw), (o, bw)
    assert o["op"] != "concat" or o["gbytes"] == 0, o
moving = {o["op"] for o in bd if o["gbytes"] > 0}
assert {"conv2d", "norm_act"} <= moving and moving & {"adamw_ema", "adamw_ema_bf16"}, moving
PY
}

# check_windows JSON: every timing in a window of device time (kernels/cuda/timing.cu),
# counted exactly: one a node (the breakdown), one a replay of each row that launches anything
# (one replay: --iters 1), one a distinct same-size GEMM, and one a layer's timing on each
# engine it has a time for (own where the step's engine choice covers the node; lib; wgmma). On
# the emulation launches run as they are issued, so windows are host-bound until the hold
# covers them.
check_windows() {
    python3 - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
e, cl = d["env"], d["conv_layers"]
launching = sum(1 for o in d["breakdown"] if o["replay_ms"] > 0)
own = sum(1 for c in cl if c["engine"])
lib = sum(1 for c in cl if c.get("cudnn_ms") is not None)
wg = sum(1 for c in cl if c.get("wgmma_ms") is not None)
# each wgmma row tried on the halo (a window whether a halo kernel took it or not), and per tap
# where one did
halo = sum(1 for c in cl if c.get("wgmma_halo_ms") is not None)
# each attention node once on each engine that takes it
attn = sum((a["gemm_ms"] is not None) + (a["fused_ms"] is not None) for a in d["attn_layers"])
want = d["nodes"] + launching + d["gemm_sizes_timed"] + own + lib + 2 * wg + halo + attn
assert d["iters"] == 1 and e["timing_windows"] == want, (e["timing_windows"], want, d["nodes"],
                                                         launching, own, lib, wg, halo, attn)
assert 1 <= e["timing_host_bound"] <= e["timing_windows"], e
assert 0.2 <= e["timing_hold_ms"] <= 20.0 and e["timing_issue_max_ms"] > 0, e
PY
}

# report_of NAME JSON BATCH PRECISION CMD: bench_report.py's report over one stepgraph result
# (unet_tiny, row "tiny"), in $tmp/NAME.md
report_of() {
    mkdir -p "$tmp/$1/jobs"
    python3 "$root/tools/bench_report.py" record --out "$tmp/$1/jobs/sg_tiny.json" --job sg_tiny \
        --row tiny --impl stepgraph --model unet_tiny --batch "$3" --precision "$4" --status ok \
        --stdout "$2" --cmd "$5"
    python3 "$root/tools/bench_report.py" report --out "$tmp/$1.md" "$tmp/$1" >/dev/null
}

# tiny_json BENCH NAME [VAR=VALUE...]: BENCH's unet_tiny bf16 fused step, one replay, as JSON
# in $tmp/NAME.json (its stderr shown), run in that environment; its exit status checked
tiny_json() {
    local b=$1 name=$2
    shift 2
    env "$@" "$b" --backend cuda --model unet_tiny --precision bf16 --fuse 1 --batch 2 --iters 1 \
        --warmup 0 --json >"$tmp/$name.json" 2>"$tmp/$name.err"
    local rc=$?
    shown+=("$tmp/$name.err")
    ok "cuda_host ($name): json run exits 0" "[ $rc -eq 0 ]"
}

if [ $mode = cuda_host ]; then
    # (SG_WG_DGRAD_HALO=1: the default, set to see it in the record)
    tiny_json "$bench" h SG_SIM_GRAPH_LIST="$tmp/graphs.txt" SG_WG_DGRAD_HALO=1
    ok "cuda_host: env records the knobs set (env_knobs) and the data gradient halo" \
        'python3 -c "import json,sys; e=json.load(open(sys.argv[1]))[\"env\"]; assert e[\"env_knobs\"] == \"SG_WG_DGRAD_HALO=1\" and e[\"wg_dgrad_halo\"] is True, e" "$tmp/h.json"'
    # the step's graph is the run's first capture: env's count is the emulation's listing's, and
    # tools/graph_launches.py's tables add up to it (every node's commands named by its op)
    ok "cuda_host: graph_nodes in env, the listing and its summary agree" 'python3 - "$tmp/h.json" "$tmp/graphs.txt" "$root/tools/graph_launches.py" <<PY
import json, subprocess, sys
d = json.load(open(sys.argv[1]))
n = d["env"]["graph_nodes"]
s = json.loads(subprocess.check_output([sys.executable, sys.argv[3], sys.argv[2], "--json"]))
assert n > 0 and s["commands"] == n, (n, s["commands"])
assert sum(o["commands"] for o in s["ops"]) == n and sum(k["commands"] for k in s["kernels"]) == n
ops = {o["op"]: o for o in s["ops"]}
assert "(outside a node)" not in ops, ops
# one launch a column sum (col_sum_kernel: every bias gradient) and a statistics pass
# (norm_stats_kernel), not two
names = {k["name"] for k in s["kernels"]}
assert "col_sum_kernel" in names and not any(x.startswith("col_sum_partial") for x in names), names
assert any("norm_stats_kernel" in x for x in names), names
# a file two runs appended to: the step of the last run by default, with a note; --run 0 the first
two = sys.argv[2] + ".twice"
open(two, "w").write(open(sys.argv[2]).read() * 2)
r = subprocess.run([sys.executable, sys.argv[3], two, "--json"], capture_output=True, text=True)
assert r.returncode == 0 and json.loads(r.stdout)["run"] == 1, r
assert "holds 2 runs" in r.stderr and json.loads(r.stdout)["commands"] == n, r.stderr
r = subprocess.run([sys.executable, sys.argv[3], two, "--run", "0", "--json"],
                   capture_output=True, text=True)
assert r.returncode == 0 and json.loads(r.stdout)["run"] == 0, r
r = subprocess.run([sys.executable, sys.argv[3], two, "--run", "2"], capture_output=True, text=True)
assert r.returncode != 0 and "no run 2" in r.stderr, r
PY'
    ok "cuda_host: the per-layer table with the same-size GEMM (time_gemm)" 'check_layers "$tmp/h.json" 1'
    ok "cuda_host: every breakdown row replayed as one graph, the sum given" 'python3 - "$tmp/h.json" <<PY
import json, sys
d = json.load(open(sys.argv[1]))
rows = d["breakdown"]
assert rows and all(isinstance(o["replay_ms"], float) and o["replay_ms"] >= 0 for o in rows)
assert abs(sum(o["replay_ms"] for o in rows) - d["replay_total_ms"]) < 1e-6 * d["replay_total_ms"] + 1e-9
assert all(o["replay_ms"] > 0 for o in rows if o["op"].startswith("conv2d")), rows
# nodes that launch nothing cost nothing (concat: the decoder skips are virtual)
assert all(o["replay_ms"] == 0 for o in rows if o["op"] == "concat"), rows
# each row replayed graph by command type (last_replay_types): the rows add up to the step
# graph as captured, type by type (the step graph as launched has its memset nodes made
# kernel nodes; the libraries of the emulation add none unless SG_SIM_LIB_MEMSETS=1)
c = [o["graph_commands"] for o in rows]
t = dict(d["env"]["graph_node_types"])
rep = d["env"]["graph_memsets_replaced"]
t["kernel"] -= rep
t["memset"] += rep
for k in ("kernel", "memset", "memcpy", "other"):
    assert sum(x[k] for x in c) == t[k], (k, sum(x[k] for x in c), t)
assert all((x["kernel"] > 0) == (o["replay_ms"] > 0) for x, o in zip(c, rows)), rows
PY'
    ok "cuda_host: the memory columns" 'check_memory "$tmp/h.json"'
    # the libraries' memset nodes (SG_SIM_LIB_MEMSETS=1: the emulated cuBLASLt clears its
    # workspace before each GEMM, as a GPU's libraries do): made kernel nodes, and the launch of
    # the graph as captured timed beside the launched one; SG_GRAPH_MEMSETS=keep launches that
    for gm in kernel keep; do
        SG_SIM_LIB_MEMSETS=1 SG_GRAPH_MEMSETS=$gm $bench --backend cuda --model unet_tiny \
            --precision bf16 --batch 2 --iters 2 --warmup 1 --no-breakdown --json \
            >"$tmp/gm_$gm.json" 2>"$tmp/gm_err.txt" || cat "$tmp/gm_err.txt"
    done
    ok "cuda_host: memset nodes made kernel nodes, both launches timed (SG_GRAPH_MEMSETS)" 'python3 - "$tmp/gm_kernel.json" "$tmp/gm_keep.json" <<PY
import json, math, sys
k, p = (json.load(open(f)) for f in sys.argv[1:3])
ek, ep = k["env"], p["env"]
cap = ek["graph_memsets_captured"]
assert cap > 0 and ek["graph_memsets"] == "kernel" and ek["graph_memsets_replaced"] == cap, ek
assert ek["graph_memsets_kept"] == 0 and ek["graph_node_types"]["memset"] == 0, ek
assert ep["graph_memsets"] == "keep" and ep["graph_memsets_replaced"] == 0, ep
assert ep["graph_node_types"]["memset"] == cap == ep["graph_memsets_captured"], ep
assert ep["graph_nodes"] == ek["graph_nodes"] and "SG_GRAPH_MEMSETS=keep" in ep["env_knobs"], ep
hk, hp = k["host_us_captured"], p["host_us_captured"]
assert hk is not None and math.isfinite(hk) and hk > 0 and hp is None, (hk, hp)
PY'
    # the attention table: every attention node of the breakdown on both engines (unet_tiny's
    # 8x8 attention, bf16: the fused kernels take it), the step's engine the default gemm
    ok "cuda_host: every attention node timed on the gemm and fused engines" 'python3 - "$tmp/h.json" <<PY
import json, sys
d = json.load(open(sys.argv[1]))
at = d["attn_layers"]
ops = ("attention", "attention_bwd", "attention_p")  # attention_p: the backward pass recomputes P
n_bd = sum(o["nodes"] for o in d["breakdown"] if o["op"] in ops)
assert n_bd >= 3 and len(at) == n_bd, (len(at), n_bd)
assert {a["op"] for a in at} == set(ops), at
for a in at:
    assert a["engine"] == "gemm" and a["gemm_ms"] > 0 and a["fused_ms"] > 0, a
    assert a["shape"] == "2 L64 C64 heads1", a
PY'
    ok "cuda_host: the timing windows counted in env" 'check_windows "$tmp/h.json"'
    report_of hrep "$tmp/h.json" 2 bf16 "bench --backend cuda --model unet_tiny --json"
    ok "cuda_host: the report's breakdown gives each row's kernels and memsets" \
        'grep -q "^| op | nodes | ms | % | GFLOP | GFLOP/s | replay ms | kernels | memsets |" "$tmp/hrep.md" && grep -Eq "^Commands: .* as captured \(memsets come from the libraries. calls; the whole step.s graph as launched: [0-9]+ kernels, 0 memsets\)" "$tmp/hrep.md"'
    ok "cuda_host: the report says the times are device time, and how many were host-bound" \
        'grep -Eq "are device time: before each timing a hold kernel kept the device busy while the host issued the work \([0-9]+ windows; the longest issue [0-9.]+ ms\)\. \*\*[0-9]+ host-bound\*\*" "$tmp/hrep.md"'
    ok "cuda_host: the report's attention table, both engines and their sums" \
        'grep -q "^| node | op | tensor | shape | gemm ms | fused ms | fused/gemm | engine |" "$tmp/hrep.md" &&
         grep -Eq "^\| [0-9]+ \| attention_bwd \| .* \| 2 L64 C64 heads1 \| [0-9.]+ \| [0-9.]+ \| [0-9.]+× \| gemm \|$" "$tmp/hrep.md" &&
         grep -Eq "^\| \| all on both \([0-9]+\) \| \| \| [0-9.]+ \| [0-9.]+ \| [0-9.]+× \| \|$" "$tmp/hrep.md"'
    $bench --backend cuda --model unet_tiny --precision bf16 --fuse 1 --batch 2 --iters 1 --warmup 0 \
        >"$tmp/h.txt" 2>&1
    rc=$?
    shown+=("$tmp/h.txt")
    ok "cuda_host: text run exits 0" '[ $rc -eq 0 ]'
    ok "cuda_host: text rows for conv2d_sc and upconv2d with GEMM columns" \
        'grep -Eq "^ +[0-9]+ conv2d_sc +.* norm\+shortcut +[0-9.]+ +- +- +[0-9.]+ +[0-9.]+ +[0-9]+x[0-9]+x[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9.]+%" "$tmp/h.txt" &&
         grep -Eq "^ +[0-9]+ upconv2d +.* up2 +upsample +[0-9.]+ +- +- +[0-9.]+ +[0-9.]+ +[0-9]+x[0-9]+x[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9.]+%" "$tmp/h.txt"'
    ok "cuda_host: text wgmma columns and their sum" \
        'grep -Eq "^ +[0-9]+ conv2d_bwd_data +.* [0-9.]+% +[0-9.]+ +[0-9.]+ +[0-9.]+%  " "$tmp/h.txt" &&
         grep -Eq "^  the wgmma kernels take [0-9]+ of these nodes: [0-9.]+ ms on them, [0-9.]+ ms on own" "$tmp/h.txt"'
    ok "cuda_host: text attention table and its sums" \
        'grep -Eq "^ +[0-9]+ attention_bwd +.* 2 L64 C64 heads1 +[0-9.]+ +[0-9.]+  gemm$" "$tmp/h.txt" &&
         grep -Eq "^  all attention nodes: gemm [0-9.]+ ms \(([0-9]+) nodes\), fused [0-9.]+ ms \(\1 nodes\)$" "$tmp/h.txt"'
    ok "cuda_host: fusion savings and the --fuse 0 command" \
        'grep -q "^fusion savings" "$tmp/h.txt" && grep -Eq "^  upsample +1 " "$tmp/h.txt" && grep -q "bench --backend cuda --model unet_tiny --batch 2 --precision bf16 --fuse 0" "$tmp/h.txt"'
    # the wgmma halo and per-tap columns time the forms they name: each launch of a wgmma
    # resident-halo kernel counts $slow ms (100 s) more on the emulation's events' clock
    # (SG_SIM_KERNEL_MS). The checks leave half of it to the host: a column's real time can
    # hold a stall of the host (a loaded CI machine), and a margin of 100 ms was once not enough
    slow=100000 half=50000
    SG_SIM_KERNEL_MS="conv_wg_fwd_halo=$slow,conv_wg_dgrad_halo=$slow" $bench --backend cuda \
        --model unet_tiny --precision bf16 --fuse 1 --batch 2 --iters 1 --warmup 0 --json \
        >"$tmp/hp.json" 2>"$tmp/hp_err.txt" || cat "$tmp/hp_err.txt"
    ok "cuda_host: the wgmma halo and per-tap columns timed the forms they name" 'python3 - "$tmp/hp.json" $half <<PY
import json, sys
cl = json.load(open(sys.argv[1]))["conv_layers"]
half = float(sys.argv[2])
h = [c for c in cl if c.get("wgmma_halo_ms") is not None]
bad = [c for c in h if not (c["wgmma_halo_ms"] - c["wgmma_per_tap_ms"] > half and c["wgmma_per_tap_ms"] < half)]
assert h and not bad, (len(h), bad[:3])
PY'
    # the fp32 3x3 passes as Winograd F(2x2, 3x3) and on the direct tiles (wino_ms, direct_ms),
    # where Winograd takes them (stride-1 passes off the thin kernels),
    # whatever SG_CONV_WINO chooses; the step with it on records it. Each launch of a Winograd
    # kernel counts $slow ms more on the emulation's events' clock, each of a tile kernel with
    # its products on the tensor cores twice that (SG_SIM_KERNEL_MS): a column that timed
    # another form than it names shows it, with half of $slow left to the host's stalls
    SG_SIM_KERNEL_MS="conv_wino=$slow,conv_fwd_kernel<true>=$((2 * slow)),conv_bwd_data_kernel<true>=$((2 * slow)),conv_bwd_weight_kernel<true>=$((2 * slow))" \
        SG_CONV_WINO=1 $bench --backend cuda --model unet_tiny --precision fp32 --conv-engine own \
        --batch 2 --iters 1 --warmup 0 --json >"$tmp/w.json" 2>"$tmp/w_err.txt" || cat "$tmp/w_err.txt"
    ok "cuda_host: fp32 3x3 passes timed as Winograd and on the direct tiles" 'python3 - "$tmp/w.json" <<PY
import json, sys
d = json.load(open(sys.argv[1]))
e, cl = d["env"], d["conv_layers"]
assert e["conv_wino"] == "on" and "SG_CONV_WINO=1" in e["env_knobs"], e
def takes(c):
    k, s, pad = (c["shape"].split(" K")[1].replace(" S", " ").replace(" pad", " ").split())
    ci, co = (int(v) for v in c["shape"].split()[2].split("->"))
    return (c["op"] in ("conv2d", "conv2d_bwd_data", "conv2d_bwd_weight")
            and (k, s, pad) == ("3", "1", "1") and min(ci, co) > 4)
w = [c for c in cl if c.get("wino_ms") is not None]
assert w and all(takes(c) and c["direct_ms"] > 0 and c["wino_ms"] > 0 for c in w), w
assert all(c.get("wino_ms") is None and c.get("direct_ms") is None for c in cl if not takes(c))
assert len(w) == sum(1 for c in cl if takes(c)), (len(w), [c["shape"] for c in cl])
assert {c["op"] for c in w} == {"conv2d", "conv2d_bwd_data", "conv2d_bwd_weight"}, w
assert e["wino_nodes"] == len(w), (e["wino_nodes"], len(w))
PY'
    ok "cuda_host: the direct tiles' passes timed on the tensor cores (3xTF32) and the CUDA cores" 'python3 - "$tmp/w.json" <<PY
import json, sys
cl = json.load(open(sys.argv[1]))["conv_layers"]
def tiles(c):  # a 3x3 pass off the thin kernels (stride 1 or 2): the tiles take it
    k = c["shape"].split(" K")[1].split()[0]
    ci, co = (int(v) for v in c["shape"].split()[2].split("->"))
    return (c["op"] in ("conv2d", "conv2d_bwd_data", "conv2d_bwd_weight") and k == "3"
            and min(ci, co) > 4)
t = [c for c in cl if c.get("f32tc_ms") is not None]
assert t and all(tiles(c) and c["fma_ms"] > 0 and c["f32tc_ms"] > 0 for c in t), t
assert all(c.get("f32tc_ms") is None and c.get("fma_ms") is None for c in cl if not tiles(c))
assert len(t) == sum(1 for c in cl if tiles(c)), (len(t), [c["shape"] for c in cl])
assert {c["op"] for c in t} == {"conv2d", "conv2d_bwd_data", "conv2d_bwd_weight"}, t
assert any(" S2 " in c["shape"] for c in t), t
PY'
    ok "cuda_host: each paired column timed the form it names" 'python3 - "$tmp/w.json" $half <<PY
import json, sys
cl = json.load(open(sys.argv[1]))["conv_layers"]
half = float(sys.argv[2])
bad = [c for c in cl if c.get("wino_ms") is not None
       and not (c["wino_ms"] - c["direct_ms"] > half and c["direct_ms"] < half)]
bad += [c for c in cl if c.get("f32tc_ms") is not None
        and not (c["f32tc_ms"] - c["fma_ms"] > 3 * half and c["fma_ms"] < half)]
assert not bad, bad[:3]
PY'
    report_of wrep "$tmp/w.json" 2 fp32 "bench --backend cuda --model unet_tiny --precision fp32 --json"
    ok "cuda_host: the report's Winograd and tiles columns and sums" \
        'grep -q "| Winograd ms | direct ms | tiles 3xTF32 ms | tiles FMA ms | engine |$" "$tmp/wrep.md" && grep -Eq "^As Winograd F\(2x2, 3x3\), conv2d_bwd_data \([0-9]+ fp32 3x3 nodes it takes\): [0-9.]+ ms, against [0-9.]+ ms on the direct tiles" "$tmp/wrep.md" &&
         grep -Eq "^On the direct tiles, conv2d_bwd_weight \([0-9]+ nodes a tile launch takes\): [0-9.]+ ms with the products on the tensor cores \(3xTF32\), against [0-9.]+ ms" "$tmp/wrep.md"'
    # ... whose per-pass sums are the JSON's: nodes, both times, per op
    ok "cuda_host: the report's Winograd and tiles sums are the nodes' sums" 'python3 - "$tmp/w.json" "$tmp/wrep.md" <<PY
import json, re, sys
cl = json.load(open(sys.argv[1]))["conv_layers"]
md = open(sys.argv[2]).read()
for a, b, line in (("wino_ms", "direct_ms", r"As Winograd F\(2x2, 3x3\), (\w+) \((\d+) fp32 3x3 nodes it takes\): ([0-9.]+) ms, against ([0-9.]+) ms"),
                   ("f32tc_ms", "fma_ms", r"On the direct tiles, (\w+) \((\d+) nodes a tile launch takes\): ([0-9.]+) ms with the products on the tensor cores \(3xTF32\), against ([0-9.]+) ms")):
    got = {m[0]: (int(m[1]), float(m[2]), float(m[3])) for m in re.findall(line, md)}
    want = {}
    for c in cl:
        if c.get(a) is not None and c.get(b) is not None:
            n, x, y = want.get(c["op"], (0, 0.0, 0.0))
            want[c["op"]] = (n + 1, x + c[a], y + c[b])
    assert want and set(got) == set(want), (a, got, want)
    for op, (n, x, y) in want.items():
        g = got[op]
        assert g[0] == n and abs(g[1] - x) < 1e-3 and abs(g[2] - y) < 1e-3, (a, op, g, (n, x, y))
PY'
    # a plan the GPU has no room for (SG_SIM_MEM_BYTES: the emulated device's memory): refused
    # before anything is allocated, saying both sizes; bf16 is not offered to a bf16 run. At
    # 100 MB the arena (about 51 MB) fits but not with the libraries' margin: the total said
    for pr in bf16 fp32 bf16_100; do
        SG_SIM_MEM_BYTES=$([ $pr = bf16_100 ] && echo 100000000 || echo 10000000) \
            $bench --backend cuda --model unet_tiny --precision ${pr%_100} --batch 2 --iters 1 \
            --warmup 0 --no-breakdown >/dev/null 2>"$tmp/mem_$pr.err"
        echo "exit $?" >>"$tmp/mem_$pr.err"
    done
    ok "cuda_host: a plan larger than the GPU's free memory refused, with the sizes and a way out" \
        'grep -Eq "^bench: the plan needs 0\.11 GiB on the GPU \(arena [0-9]+ bytes, and 64 MiB for the CUDA libraries. own\) but only 0\.01 GiB of 0\.01 GiB are free: try a smaller --batch$" "$tmp/mem_bf16.err" &&
         grep -q "are free: try a smaller --batch, or --precision bf16$" "$tmp/mem_fp32.err" &&
         grep -q "^bench: the plan needs 0\.11 GiB .* but only 0\.09 GiB of 0\.09 GiB are free" "$tmp/mem_bf16_100.err" &&
         [ "$(cat "$tmp"/mem_*.err | grep -c "^exit 1$")" = 3 ]'
    # a GPU this build has no code for (SG_SIM_CC: the emulated device's compute capability;
    # the build is for sm_90, whose PTX a newer GPU compiles): refused at the backend's start,
    # naming the build's architectures and the one to build for; a 10.0 device runs it
    for cc in 8.0 10.0; do
        SG_SIM_CC=$cc $bench --backend cuda --model unet_tiny --precision bf16 --batch 2 \
            --iters 1 --warmup 0 --no-breakdown >/dev/null 2>"$tmp/cc_$cc.err"
        echo "exit $?" >>"$tmp/cc_$cc.err"
    done
    ok "cuda_host: a GPU the build has no kernels for refused, saying what to build" \
        'grep -q "^bench: this GPU (compute capability 8\.0) cannot run this build.s kernels, built for CUDA architectures 90 (no kernel image is available for execution on the device): rebuild for it, cmake -B build -DCMAKE_CUDA_ARCHITECTURES=80 && cmake --build build$" "$tmp/cc_8.0.err" &&
         grep -q "^exit 1$" "$tmp/cc_8.0.err" && grep -q "^exit 0$" "$tmp/cc_10.0.err"'
    # built with cuDNN (the emulated one): the step's engine auto puts every plain 3x3 pass on
    # a pinned cuDNN plan, as on a GPU; its table names each plan and times it beside own
    if [ -n "$dnn_bench" ]; then
        tiny_json "$dnn_bench" d
        ok "cuda_host cuDNN: the per-layer table, cuDNN's plans by name" \
            'check_layers "$tmp/d.json" 1 1'
        ok "cuda_host cuDNN: the timing windows counted in env" 'check_windows "$tmp/d.json"'
        report_of drep "$tmp/d.json" 2 bf16 "bench --backend cuda --model unet_tiny --json"
        ok "cuda_host cuDNN: the report's rows on cuDNN, own against it" \
            'grep -Eq "^\| [0-9]+ \| conv2d_bwd_weight \| - \| .* \| [0-9.]+ \| [0-9.]+ \| [0-9.]+× \| .* \| cudnn e[0-9]+(k[0-9]+=-?[0-9]+)*\+dw_bf16 ws[0-9]+ \|$" "$tmp/drep.md"'
        # plans a device cannot build (SG_SIM_CUDNN_PLANS: the engines whose plans finalize):
        # only the direct engine's: the split configurations the heuristics list first are
        # passed over, every pass still on cuDNN; some pass must have had another engine in
        # the run with every plan (d.json), or nothing was passed over
        tiny_json "$dnn_bench" d0 SG_SIM_CUDNN_PLANS=0
        ok "cuda_host cuDNN: a configuration with no plan passed over for the next" \
            'check_layers "$tmp/d0.json" 1 1 && python3 - "$tmp/d0.json" "$tmp/d.json" <<PY
import json, sys
d, full = (json.load(open(f)) for f in sys.argv[1:3])
on = [r["engine"] for r in d["conv_layers"] if r["engine"].startswith("cudnn")]
assert on and all(e.startswith("cudnn e0") for e in on), on
assert d["env"]["convs_cudnn"] == len(on), d["env"]
was = {r["node"]: r["engine"] for r in full["conv_layers"]}
moved = [r["node"] for r in d["conv_layers"]
         if r["engine"].startswith("cudnn e0") and was.get(r["node"], "").startswith("cudnn e")
         and not was[r["node"]].startswith("cudnn e0")]
assert moved, "no pass had another engine than e0 with every plan: nothing was passed over"
PY'
        # none: under auto each such pass falls back to own, said with its whole reason; with
        # --conv-engine cudnn the run stops at the first, saying why
        SG_SIM_CUDNN_PLANS= $dnn_bench --backend cuda --model unet_tiny --precision bf16 --fuse 1 \
            --batch 2 --iters 1 --warmup 0 --no-breakdown --json >"$tmp/dn.json" 2>"$tmp/dn.err"
        rc=$?
        ok "cuda_host cuDNN: no plan at all: auto falls back to own, each node said" \
            '[ $rc -eq 0 ] && python3 - "$tmp/dn.json" "$tmp/dn.err" <<PY
import json, re, sys
e = json.load(open(sys.argv[1]))["env"]
err = open(sys.argv[2]).read()
warn = re.findall(r"stepgraph: warning: node \d+ .* runs on the own conv engine: (.*)", err)
m = re.search(r"on own \(.*; (\d+) for lack of a deterministic cuDNN engine\)", err)
assert e["convs_cudnn"] == 0 and m and int(m.group(1)) == len(warn) > 0, (e["convs_cudnn"], m, len(warn))
# each reason whole: its counts to the end, both variants where the pass has two
for w in warn:
    assert w.startswith("no deterministic cuDNN engine: ") and "with no plan" in w, w
    assert w.endswith("workspace budget"), w
assert any("; and without the fused bias: " in w for w in warn), warn
assert any("; and with a bf16 dw: " in w for w in warn), warn
PY'
        SG_SIM_CUDNN_PLANS= $dnn_bench --backend cuda --model unet_tiny --precision bf16 --fuse 1 \
            --batch 2 --iters 1 --warmup 0 --no-breakdown --conv-engine cudnn >/dev/null \
            2>"$tmp/dc.err"
        rc=$?
        ok "cuda_host cuDNN: no plan at all: --conv-engine cudnn refused, saying why" \
            '[ $rc -ne 0 ] && grep -Eq "^bench: node [0-9]+ \(conv2d -> conv_in\): --conv-engine cudnn, but no deterministic cuDNN engine: .* with no plan, .*; and without the fused bias: .* workspace budget$" "$tmp/dc.err"'
    fi
    echo "$pass passed, $fail failed"
    # the runs' own output only where a check failed, after the FAIL lines: a CI log that shows
    # only the head of a test's output shows what failed
    if [ $fail -ne 0 ]; then
        for f in "${shown[@]}"; do
            echo "---- $f"
            cat "$f"
        done
    fi
    [ $fail -eq 0 ]
    exit
fi

# ---- build/bench on the CPU backend
$bench --backend cpu --model unet_tiny --iters 2 --warmup 1 --json >"$tmp/b.json" 2>"$tmp/err.txt"
rc=$?
ok "json run exits 0" '[ $rc -eq 0 ]'
ok "json fields" 'python3 - "$tmp/b.json" <<PY
import json, math, sys
d = json.load(open(sys.argv[1]))
assert d["tool"] == "stepgraph_bench" and d["model"] == "unet_tiny" and d["backend"] == "cpu"
assert d["precision"] == "fp32" and d["batch"] == 4 and d["iters"] == 2 and d["warmup"] == 1
assert d["timing"] == "host-clock"
assert len(d["steps_ms"]) == 2 and all(x > 0 for x in d["steps_ms"])
s = sorted(d["steps_ms"])
assert d["ms_min"] <= d["ms_p10"] <= d["ms_per_step"] <= d["ms_p90"] <= d["ms_max"], d
assert abs(d["ms_per_step"] - (s[0] + s[1]) / 2) <= 1e-3 * d["ms_per_step"]
assert abs(d["img_per_s"] - 4 / (d["ms_per_step"] / 1e3)) < 1e-3 * d["img_per_s"]
assert d["flops_per_step"] >= d["matmul_flops_per_step"] > 0
assert d["mfu"] is None and d["matmul_peak_tflops"] is None  # no peak on the CPU
assert d["host_us_per_step"] is None                          # n/a on the CPU
assert d["arena_bytes"] >= d["lower_bound_bytes"] > 0 and d["arena_ratio"] >= 1
assert d["params"] == 702499 and d["nodes"] > 0 and len(d["plan_hash"]) == 16
assert math.isfinite(d["loss"]) and d["data_n"] == 1024
bd = d["breakdown"]
assert bd and sum(o["nodes"] for o in bd) == d["nodes"]
assert [o["ms"] for o in bd] == sorted((o["ms"] for o in bd), reverse=True)
assert abs(sum(o["ms"] for o in bd) - d["eager_total_ms"]) < 1e-2 * d["eager_total_ms"] + 1e-3
assert abs(sum(o["pct"] for o in bd) - 100) < 0.5
conv = [o for o in bd if o["op"] == "conv2d"][0]
assert conv["matmul"] and conv["gflop"] > 0 and conv["gflops_per_s"] > 0
assert d["env"]["backend"] == "cpu"
PY'
ok "json: the memory columns" 'check_memory "$tmp/b.json"'
ok "json: no attention table on the CPU (one engine)" \
    'python3 -c "import json,sys; assert json.load(open(sys.argv[1]))[\"attn_layers\"] is None" "$tmp/b.json"'

# both peaks given (--peak-tflops, --peak-gbs): MFU and every floor, the matmul rows' and the
# step's included (on a GPU both are measured; here nothing measures a matmul peak)
$bench --backend cpu --model unet_tiny --iters 1 --warmup 0 --peak-tflops 0.05 --peak-gbs 10 \
    --json >"$tmp/pk.json" 2>/dev/null
ok "json: given peaks, every floor" 'python3 - "$tmp/pk.json" <<PY
import json, sys
d = json.load(open(sys.argv[1]))
def close(a, b):
    return abs(a - b) <= 1e-6 * max(abs(a), abs(b)) + 1e-12
pk, bw, bd = d["matmul_peak_tflops"], d["mem_peak_gb_per_s"], d["breakdown"]
assert close(pk, 0.05) and close(bw, 10) and d["matmul_peak_given"] and d["mem_peak_given"], d
assert close(d["mfu"], d["matmul_flops_per_step"] / (d["ms_per_step"] / 1e3) / (pk * 1e12)), d
for o in bd:
    t_mm = o["gflop"] / pk if o["matmul"] else 0.0   # ms: GFLOP over TFLOP/s
    t_mem = o["gbytes"] * 1e3 / bw
    # per node the longer of the two: between the rows longer and their sum
    assert max(t_mm, t_mem) * (1 - 1e-6) <= o["floor_ms"] <= (t_mm + t_mem) * (1 + 1e-6), (o, t_mm, t_mem)
    assert o["matmul"] or close(o["floor_ms"], t_mem), o
assert any(o["matmul"] and o["floor_ms"] > 0 for o in bd)
assert close(d["floor_ms"], sum(o["floor_ms"] for o in bd)), d["floor_ms"]
PY'
$bench --backend cpu --model unet_tiny --iters 1 --warmup 0 --peak-tflops 0.05 --peak-gbs 10 \
    >"$tmp/pk.txt" 2>&1
ok "text: given peaks named, the step's floor" \
    'grep -Eq "^  MFU +[0-9.]+%  \(matmul FLOPs / step time / given \(--peak-tflops\) fp32 matmul peak 0\.1 TFLOP/s\)" "$tmp/pk.txt" &&
     grep -Eq "; given \(--peak-gbs\) copy bandwidth 10\.0 GB/s: [0-9.]+ ms at it$" "$tmp/pk.txt" &&
     grep -Eq "^  floor +[0-9.]+ ms \(each node at the longer .*; the step is [0-9.]+x it$" "$tmp/pk.txt"'
$bench --backend cpu --model unet_tiny --iters 1 --warmup 0 --peak-tflops 0 >/dev/null 2>"$tmp/pk.err"
rc=$?
ok "--peak-tflops 0: refused" '[ $rc -eq 2 ] && grep -q "peak-tflops" "$tmp/pk.err"'

$bench --backend cpu --model unet_tiny --iters 2 --warmup 0 >"$tmp/b.txt" 2>&1
rc=$?
cat "$tmp/b.txt"
ok "text run exits 0" '[ $rc -eq 0 ]'
ok "text: step line" 'grep -Eq "^  step +[0-9.]+ ms median" "$tmp/b.txt"'
ok "text: MFU n/a on cpu" 'grep -Eq "^  MFU +n/a" "$tmp/b.txt"'
ok "text: host n/a on cpu" 'grep -Eq "^  host +n/a" "$tmp/b.txt"'
ok "text: arena and ratio" 'grep -Eq "^  arena .*lower bound .*ratio 1\.[0-9]+" "$tmp/b.txt"'
ok "text: breakdown with conv2d" 'grep -q "^per-op breakdown" "$tmp/b.txt" && grep -Eq "^  conv2d +[0-9]+ " "$tmp/b.txt"'
ok "text: memory line, no floor without a matmul peak, the breakdown's memory columns" \
    'grep -Eq "^  memory +[0-9.e+-]+ GB/step at least .*; measured copy bandwidth [0-9.]+ GB/s: [0-9.]+ ms at it$" "$tmp/b.txt" &&
     grep -Eq "^  floor +n/a " "$tmp/b.txt" && grep -Eq "^  op +nodes .* GB +GB/s +floor ms$" "$tmp/b.txt" &&
     grep -Eq "^  adamw_ema +1 +([0-9.]+ +){2}[0-9.]+ +- +- +[0-9.]+ +[0-9.]+ +[0-9.]+$" "$tmp/b.txt"'

$bench --backend cpu --model unet_tiny --iters 1 --warmup 0 --no-breakdown --json \
    --data synthetic:64 --batch 2 >"$tmp/nb.json" 2>/dev/null
ok "--no-breakdown, --data synthetic:N, model flags" 'python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
assert d[\"breakdown\"] is None and d[\"data_n\"] == 64 and d[\"batch\"] == 2
assert d[\"bytes_per_step\"] > 0 and d[\"mem_peak_gb_per_s\"] is None and d[\"floor_ms\"] is None
" "$tmp/nb.json"'
# --data takes train's specs, folder:DIR included (the help says so): PNGs decoded to the model
python3 "$root/tests/make_pngs.py" "$tmp/imgs" 3 24 8 20
$bench --backend cpu --model unet_tiny --iters 1 --warmup 0 --no-breakdown --json \
    --data "folder:$tmp/imgs" >"$tmp/fold.json" 2>"$tmp/fold.err"
ok "--data folder:DIR" 'python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
assert d[\"data_n\"] == 3, d[\"data_n\"]
" "$tmp/fold.json" && $bench --help | grep -q "folder:DIR"'
$bench --backend cpu --model unet_tiny --data nope >/dev/null 2>"$tmp/err.txt"
ok "an unknown --data spec lists folder:DIR" 'grep -q "folder:DIR" "$tmp/err.txt"'
# --img below the preset's image size: the synthetic images follow the model (they were the
# preset's 16x16, "larger than the model's 8")
$bench --backend cpu --model unet_tiny --img 8 --iters 1 --warmup 0 --no-breakdown --json \
    --data synthetic:8 --batch 1 >"$tmp/img.json" 2>"$tmp/img.err"
ok "--img 8: synthetic data sized to the model" 'python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
assert d[\"config\"][\"img\"] == 8 and d[\"data_n\"] == 8
" "$tmp/img.json"'
# no GPU and no --backend: a refusal, not hours of CPU (only where no GPU is present)
if ! nvidia-smi -L >/dev/null 2>&1; then
  $bench --model unet_tiny --iters 1 --warmup 0 >/dev/null 2>"$tmp/err.txt"; rc=$?
  ok "no GPU, no --backend: refused" '[ $rc -eq 2 ] && grep -q -- "--backend cpu" "$tmp/err.txt"'
fi
$bench --backend=cpu --model=unet_tiny --iters=1 --warmup=0 --no-breakdown --json >"$tmp/eq.json" 2>/dev/null
$bench --backend cpu --model unet_tiny --iters 1 --warmup 0 --conv-engine own --json \
    >"$tmp/ce.json" 2>/dev/null
ok "--conv-engine own: recorded; the CPU's per-conv-layer table has one engine, no GEMM hook" 'python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
assert d[\"conv_engine\"] == \"own\" and d[\"conv_layers\"], d[\"conv_engine\"]
assert all(o[\"engine\"] == \"\" for o in d[\"breakdown\"])
assert all(r[\"engine\"] == \"\" and r[\"cudnn_ms\"] is None and r[\"gemm_ms\"] is None for r in d[\"conv_layers\"])
" "$tmp/ce.json"'
# the per-layer table of a fused bf16 plan on the CPU (the fused nodes: conv2d_sc, the upconvs)
$bench --backend cpu --model unet_tiny --precision bf16 --fuse 1 --iters 1 --warmup 0 --json \
    >"$tmp/bf.json" 2>/dev/null
ok "cpu bf16: the per-layer table, '-' for the GEMM (no time_gemm)" 'check_layers "$tmp/bf.json" 0'
$bench --backend cpu --model unet_tiny --precision bf16 --fuse 1 --iters 1 --warmup 0 >"$tmp/bf.txt" 2>&1
ok "cpu bf16 text: conv2d_sc / upconv2d rows with '-' GEMM columns, the fusion savings" \
    'grep -Eq "^ +[0-9]+ conv2d_sc +.* norm\+shortcut +[0-9.]+ +- +- +[0-9.]+ +[0-9.]+ +[0-9]+x[0-9]+x[0-9]+ +- +- +- +- +- +-  -$" "$tmp/bf.txt" &&
     grep -Eq "^ +[0-9]+ upconv2d_bwd_weight +.* upsample +[0-9.]+ +- +- " "$tmp/bf.txt" &&
     grep -Eq "^  shortcut +[0-9]+ +[0-9.]+ +0\.0000 +[0-9]+ " "$tmp/bf.txt" &&
     grep -q "bench --backend cpu --model unet_tiny --batch 4 --precision bf16 --fuse 0" "$tmp/bf.txt"'
ok "--flag=value" 'python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d[\"iters\"] == 1" "$tmp/eq.json"'
ok "--help" '$bench --help | grep -q -- "--no-breakdown"'

for bad in "--frobnicate 3" "--iters 0" "--iters x" "--warmup -1" "--model nope" \
    "--backend tpu" "--batch 0" "--data synthetic:0" "--data synthetic:x" "--iters" \
    "--conv-engine nope" "--conv-engine"; do
    $bench --backend cpu --model unet_tiny $bad >/dev/null 2>"$tmp/err.txt"
    rc=$?
    ok "'$bad' exits 2 with one line" '[ $rc -eq 2 ] && [ $(wc -l <"$tmp/err.txt") -eq 1 ]'
done
if ! nvidia-smi -L >/dev/null 2>&1; then
    $bench --backend cuda --model unet_tiny >/dev/null 2>"$tmp/err.txt"
    rc=$?
    ok "--backend cuda without a GPU: exit 1, one line" \
        '[ $rc -eq 1 ] && [ $(wc -l <"$tmp/err.txt") -eq 1 ]'
fi

# ---- tools/bench.sh + bench_report.py with fakes
cat >"$tmp/fake_sg" <<'SH'
#!/usr/bin/env bash
# fake build/bench: canned JSON; unet_cifar batch 8 fails like an OOM would; without
# --backend cuda it fails (bench.sh must never let stepgraph pick the CPU); with an engine table
# (which must exist) 6.0 ms instead of 6.5; unet_adm64 20.0 ms, with SG_CONV_WINO=1 15.0
model= batch= prec= backend= table=
while [ $# -gt 0 ]; do
    case $1 in --model) model=$2; shift ;; --batch) batch=$2; shift ;; --precision) prec=$2; shift ;;
    --backend) backend=$2; shift ;; --engine-table) table=$2; shift ;; esac
    shift
done
if [ "$backend" != cuda ]; then echo "fake bench: no --backend cuda" >&2; exit 5; fi
if [ "$batch" = 8 ]; then echo "bench: the plan needs 99.0 GiB, 79.1 GiB free" >&2; exit 1; fi
if [ -n "$table" ] && [ ! -f "$table" ]; then echo "bench: $table: no such file" >&2; exit 2; fi
ms=6.5; [ "$model" = unet_adm64 ] && ms=20.0; [ -n "$table" ] && ms=6.0
[ "$model" = unet_adm64 ] && [ "${SG_CONV_WINO:-}" = 1 ] && ms=15.0
[ "$model" = unet_adm64 ] && [ "${SG_CONV_F32_TC:-}" = 1 ] && ms=12.0
cat <<J
{"tool":"stepgraph_bench","model":"$model","batch":$batch,"precision":"$prec","backend":"cuda","env":{"backend":"cuda","device":"Fake GPU"},"build":"abc123","timing":"cuda-events","warmup":10,"iters":50,"ms_per_step":$ms,"ms_min":6.4,"ms_p10":6.45,"ms_p90":6.6,"ms_max":7.0,"img_per_s":19692.3,"flops_per_step":4.78e12,"matmul_flops_per_step":4.6e12,"matmul_peak_tflops":800.0,"mfu":0.8846,"host_us_per_step":3.5,"arena_bytes":2147483648,"lower_bound_bytes":2126008812,"arena_ratio":1.0101,"eager_total_ms":9.1,"bytes_per_step":12.0e9,"mem_peak_gb_per_s":4000.0,"floor_ms":5.0,"breakdown":[{"op":"conv2d_bwd_weight","nodes":40,"matmul":true,"ms":3.0,"pct":33.0,"gflop":1500.0,"gflops_per_s":500000.0,"gbytes":2.0,"gb_per_s":666.7,"floor_ms":1.9},{"op":"conv2d","engine":"cudnn","nodes":38,"matmul":true,"ms":2.0,"pct":22.0,"gflop":1500.0,"gflops_per_s":750000.0,"gbytes":1.5,"gb_per_s":750.0,"floor_ms":1.9},{"op":"group_norm","nodes":30,"matmul":false,"ms":1.0,"pct":11.0,"gflop":1.0,"gflops_per_s":1000.0,"gbytes":4.0,"gb_per_s":4000.0,"floor_ms":1.0}],"conv_engine":"auto","conv_layers":[{"node":9,"op":"conv2d","tensor":"conv_in","shape":"128 32x32 3->128 K3 S1 pad1","engine":"cudnn e12 ws0","fusions":"-","own_ms":0.5,"cudnn_ms":0.25,"flops":5.0e10,"tflops":100.0,"gemm_mnk":[131072,128,27],"gemm_ms":0.25,"gemm_tflops":200.0,"pct_of_gemm":50.0,"wgmma_ms":0.3125,"wgmma_tflops":160.0,"wgmma_pct_of_gemm":80.0},{"node":300,"op":"conv2d","tensor":"up_blocks.0.resnets.0.conv_shortcut","shape":"128 4x4 1024->512 K1 S1 pad0","engine":"own","own_ms":0.1,"cudnn_ms":null}]}
J
SH
cat >"$tmp/fake_torch" <<'SH'
#!/usr/bin/env bash
# fake tools/torch_ref/bench.py: compile ok, reduce-overhead fails, max-autotune hangs
model= batch= prec= mode= tf32=
while [ $# -gt 0 ]; do
    case $1 in --model) model=$2; shift ;; --batch) batch=$2; shift ;; --precision) prec=$2; shift ;;
    --mode) mode=$2; shift ;; --tf32) tf32=$2; shift ;; esac
    shift
done
echo "fake torch: $model $batch $prec $mode tf32=$tf32" >&2
case $mode in
reduce-overhead)
    echo "{\"tool\":\"torch_ref_bench\",\"mode\":\"$mode\",\"skipped\":true,\"failed\":true,\"reason\":\"OutOfMemoryError: CUDA out of memory\"}"
    exit 3 ;;
max-autotune-no-cudagraphs) sleep 30; exit 0 ;;
esac
ms=10.0; [ "$mode" = compile ] && ms=8.0; [ "$batch" = 8 ] && ms=2.0
echo "{\"tool\":\"torch_ref_bench\",\"model\":\"$model\",\"batch\":$batch,\"precision\":\"$prec\",\"mode\":\"$mode\",\"tf32\":\"$tf32\",\"skipped\":false,\"ms_per_step\":$ms,\"ms_p10\":$ms,\"ms_p90\":$ms,\"img_per_s\":1000.0,\"max_memory_allocated\":4294967296}"
SH
# a bench that answers from the CPU backend (what a silent fallback would look like)
sed 's/"backend":"cuda"/"backend":"cpu"/' "$tmp/fake_sg" >"$tmp/fake_sg_cpu"
mkdir -p "$tmp/gpu" "$tmp/nogpu"
printf '#!/bin/sh\necho "GPU 0: Fake GPU 80GB (UUID: GPU-0)"\n' >"$tmp/gpu/nvidia-smi"
printf '#!/bin/sh\necho "NVIDIA-SMI has failed: no devices were found" >&2\nexit 9\n' \
    >"$tmp/nogpu/nvidia-smi"
chmod +x "$tmp/fake_sg" "$tmp/fake_torch" "$tmp/fake_sg_cpu" "$tmp/gpu/nvidia-smi" \
    "$tmp/nogpu/nvidia-smi"
gpath="$tmp/gpu:$PATH"

# run A: failures, a timeout, then the report
PATH=$gpath BENCH_BIN="$tmp/fake_sg" BENCH_TORCH="$tmp/fake_torch" BENCH_RESULTS_DIR="$tmp/results" \
    BENCH_GPU_NAME="Fake GPU 80GB" BENCH_BUDGET_S=200 BENCH_CAP_S=2 BENCH_COMPILE_MIN_S=1 \
    BENCH_JOBS='^sg_|eager|cifar_b128_bf16_(compile|reduce|max)' \
    bash "$root/tools/bench.sh" "$tmp/runA" >"$tmp/runA.txt" 2>&1
rc=$?
cat "$tmp/runA.txt"
md=$(ls "$tmp"/results/*-fake-gpu-80gb.md 2>/dev/null | head -n 1)
ok "bench.sh run A exits 0" '[ $rc -eq 0 ]'
ok "report named <date>-<gpu>.md" '[ -n "$md" ] && [ "$(basename "$md")" = "$(date +%F)-fake-gpu-80gb.md" ]'
ok "report copied into the output dir" '[ -f "$tmp/runA/$(basename "$md")" ]'
ok "a record per job" '[ $(ls "$tmp"/runA/jobs/*.json | wc -l) -eq 13 ]'
ok "the engine-table job skipped where bench/tables has no table for the GPU, saying which" \
    'grep -q "stepgraph (CUDA graph replay, engine table) | skipped: no engine table for this GPU (.*/bench/tables/fake-gpu-80gb-unet_cifar-b128-bf16.json)" "$md"'
ok "failed stepgraph job recorded with its reason" \
    'grep -q "stepgraph (CUDA graph replay) | failed: exit 1: bench: the plan needs 99.0 GiB" "$md"'
ok "failing torch mode recorded with its reason" \
    'grep -q "PyTorch reduce-overhead | failed: OutOfMemoryError: CUDA out of memory" "$md"'
ok "hanging torch mode recorded as timed out" \
    'grep -q "PyTorch max-autotune-no-cudagraphs | timeout: timed out after 2s" "$md"'
ok "side-by-side row with ratios" \
    'grep -Eq "^\| stepgraph \(CUDA graph replay\) \| ok \| 6\.500 \| 6\.450–6\.600 \| 19692\.3 \| 0\.812× \| – \| 88\.5% \| arena 2048\.0 MiB \| 3\.50 \|" "$md"'
ok "best PyTorch named" 'grep -q "Best PyTorch mode: PyTorch compile, 8.000 ms/step" "$md"'
# the side-by-side's bar chart: each finished implementation's ms/step, fastest first, its bar in
# eighths of a cell proportional to it (the slowest 40 cells); the failed ones not in it
ok "side-by-side bar chart" 'python3 - "$md" "$root/tools" <<PY
import re, sys
md = open(sys.argv[1]).read()
sec = md.split("### unet_cifar, batch 128, bf16")[1].split("### ")[0]
fence = chr(96) * 3  # (no backquote in this shell heredoc)
block = sec.split(fence + "text\n")[1].split(fence)[0].splitlines()
assert block[0] == "ms/step, shorter is faster", block
rows = [re.match(r"^(.*?)  +([█▏▎▍▌▋▊▉]+) +([0-9.]+)$", l) for l in block[1:]]
assert all(rows), block
names = [m.group(1) for m in rows]
ms = [float(m.group(3)) for m in rows]
assert names[:2] == ["stepgraph (CUDA graph replay)", "PyTorch compile"], names
assert ms == [6.5, 8.0, 10.0], ms  # eager last; reduce-overhead failed, no-cudagraphs timed out
assert not any("reduce-overhead" in n or "no-cudagraphs" in n for n in names), names
frac = {"█": 8, "▏": 1, "▎": 2, "▍": 3, "▌": 4, "▋": 5, "▊": 6, "▉": 7}
for m, v in zip(rows, ms):
    assert sum(frac[c] for c in m.group(2)) == round(320 * v / ms[-1]), (m.group(0), v)
# a partial cell, and the least bar one eighth
sys.path.insert(0, sys.argv[2])
from bench_report import bar
assert bar(1.0, 3.0) == "█" * 13 + "▍" and bar(1e-3, 100.0) == "▏", (bar(1.0, 3.0), bar(1e-3, 100.0))
PY'
ok "speed-up column" 'grep -Eq "^\| PyTorch eager \| ok \| 10\.000 .* \| 1\.250× \| 1\.54× \|" "$md"'
ok "TF32 off/on stated for fp32" 'grep -q "PyTorch eager, TF32 off" "$md" && grep -q "PyTorch eager, TF32 on" "$md"'
ok "target: step time ratio not met" 'grep -Eq "^\| unet_cifar b128 bf16 step time ÷ best PyTorch \| ≤ 0\.75 \| 0\.812 .*\| \*\*not met\*\* \|" "$md"'
ok "target: MFU" 'grep -Eq "^\| unet_cifar b128 bf16 MFU .* \| 88\.5% .*\| \*\*met\*\* \|" "$md"'
ok "target: adm64 n/a without compile" 'grep -Eq "^\| unet_adm64 b32 fp32 step time ÷ torch.compile \(TF32 off\) \| ≤ 0\.8 \| n/a" "$md"'
ok "target: small batch n/a (stepgraph failed)" 'grep -Eq "^\| unet_cifar b8 bf16 speed-up over PyTorch eager \| ≥ 2× \| n/a \(stepgraph: failed" "$md"'
ok "target: arena ratio" 'grep -Eq "^\| arena ÷ lower bound \(worst row\) \| ≤ 1\.02 \| .*1\.0101 \| \*\*met\*\* \|" "$md"'
ok "target: arena vs torch memory" 'grep -Eq "^\| unet_cifar b128 bf16 arena ÷ PyTorch eager max_memory_allocated \| ≤ 0\.7 \| 0\.500 .*\*\*met\*\*" "$md"'
ok "target: host time" 'grep -Eq "^\| host time per replayed step \(worst row\) \| ≤ 20 µs \| .*3\.50 µs \| \*\*met\*\* \|" "$md"'
ok "per-op breakdown" 'grep -Eq "^\| conv2d_bwd_weight \| 40 \| 3\.0000 \| 33\.00 \| 1500\.000 \| 500000\.0 \|" "$md"'
ok "per-op breakdown names the conv engine" 'grep -Eq "^\| conv2d/cudnn \| 38 \| 2\.0000 \|" "$md"'
ok "per-op breakdown: the memory columns, the bandwidth and the step's floor" \
    'grep -Eq "^\| group_norm \| 30 \| 1\.0000 \| 11\.00 \| 1\.000 \| – \| 4\.0000 \| 4000\.0 \| 1\.0000 \|$" "$md" &&
     grep -q "copy bandwidth (4000 GB/s). The step moves 12.00 GB at least; its floor: 5.000 ms (the step is 1.30x it)." "$md"'
ok "per-conv-layer table: own vs cudnn, the ratio, TFLOP/s against the same-size GEMM, the wgmma columns, the engine, and the total" \
    'grep -q "| % of GEMM | wgmma ms | wgmma TFLOP/s | wgmma % of GEMM | engine |" "$md" &&
     grep -Eq "^\| 9 \| conv2d \| - \| conv_in \| 128 32x32 3->128 K3 S1 pad1 \| 0\.5000 \| 0\.2500 \| 2\.00× \| 100\.0 \| 131072×128×27 \| 200\.0 \| 50% \| 0\.3125 \| 160\.0 \| 80% \| cudnn e12 ws0 \|" "$md" &&
     grep -Eq "^\| 300 \| conv2d \| - \| .* \| 0\.1000 \| n/a \| – \| n/a \| – \| n/a \| – \| n/a \| n/a \| – \| own \|" "$md" &&
     grep -Eq "^\| \| all \| \| \| \| 0\.600 \| 0\.350 \| 1\.71× \| \| \| \| \| 0\.312 \| \| \| \|" "$md" &&
     grep -q "^The wgmma kernels take 1 of these nodes: 0.312 ms on them against 0.500 ms on own" "$md"'
ok "environment and raw logs" 'grep -q "^## Environment" "$md" && grep -q "| GPU | Fake GPU 80GB |" "$md" && grep -q "fake torch: unet_cifar 128 bf16 eager tf32=on" "$md"'
ok "targets summary on stdout" 'grep -q "^targets:" "$tmp/runA.txt"'

# PyTorch's CUDA graph modes: their replays bypass the caching allocator, so the timed steps'
# max_memory_allocated misses the activations (the fourth GPU session's reduce-overhead record:
# 581.6 MiB: about its parameters, AdamW moments and EMA, 4 x 136.4 MiB, and the dataset). The
# report takes the peak with the warm-up, where the graphs were recorded; a record from before
# bench.py wrote step_memory_bytes gets the same rule. The numbers are that session's
# (unet_cifar b128 bf16).
m="$tmp/cgmem"
mkdir -p "$m/jobs"
echo '{"tool":"stepgraph_bench","backend":"cuda","env":{"backend":"cuda"},"ms_per_step":20.579,"img_per_s":6219.9,"arena_bytes":2301100032,"lower_bound_bytes":2301100032,"arena_ratio":1.0}' >"$m/sg.out"
echo '{"tool":"torch_ref_bench","mode":"eager","skipped":false,"ms_per_step":54.588,"max_memory_allocated":6036062720,"max_memory_allocated_incl_warmup":6038422016}' >"$m/eager.out"
echo '{"tool":"torch_ref_bench","mode":"compile","skipped":false,"ms_per_step":50.781,"max_memory_allocated":3329381376,"max_memory_allocated_incl_warmup":3329381376}' >"$m/compile.out"
echo '{"tool":"torch_ref_bench","mode":"reduce-overhead","skipped":false,"ms_per_step":26.844,"max_memory_allocated":609859072,"max_memory_allocated_incl_warmup":3256701952}' >"$m/ro.out"
for j in "sg stepgraph graph" "eager torch eager" "compile torch compile" "ro torch reduce-overhead"; do
    read -r job impl md <<<"$j"
    python3 "$root/tools/bench_report.py" record --out "$m/jobs/$job.json" --job "$job" \
        --row cifar_b128_bf16 --impl "$impl" --model unet_cifar --batch 128 --precision bf16 \
        --mode "$md" --tf32 on --status ok --stdout "$m/$job.out"
done
python3 "$root/tools/bench_report.py" report --out "$tmp/cgmem.md" "$m" >/dev/null
ok "a CUDA graph mode's memory is its peak with the recording, the timed steps' beside it" \
    'grep -Eq "^\| PyTorch reduce-overhead \| ok \| 26\.844 .* \| max_alloc 3105\.8 MiB \(with the recording; timed steps: 581\.6 MiB\) \|" "$tmp/cgmem.md" &&
     grep -Eq "^\| PyTorch compile \| ok \| 50\.781 .* \| max_alloc 3175\.1 MiB \|" "$tmp/cgmem.md" &&
     grep -q "their peak memory is the one with the warm-up, where the graphs were recorded" "$tmp/cgmem.md"'
ok "the smallest mode's memory target reads the recording's peak (0.707, not 3.773)" \
    'grep -Eq "^\| … ÷ the smallest PyTorch mode.s max_memory_allocated \(CUDA graph modes: with the recording\) \| ≤ 0\.7 \| 0\.707 \(reduce-overhead: 3105\.8 MiB\) \| \*\*not met\*\* \|" "$tmp/cgmem.md"'
# bench.py's own rule (tools/torch_ref/bench.py's step_memory), where a python here has torch
tpy=
for p in python3 /usr/bin/python3; do
    if $p -c "import torch" 2>/dev/null; then tpy=$p; break; fi
done
if [ -n "$tpy" ]; then
    ok "bench.py: step_memory takes the recording's peak in the CUDA graph modes alone" \
        '$tpy - "$root/tools/torch_ref" <<PY
import sys
sys.path.insert(0, sys.argv[1])
import bench
assert bench.step_memory("reduce-overhead", 609859072, 3256701952)[0] == 3256701952
assert bench.step_memory("max-autotune", 5, 3)[0] == 5
assert bench.step_memory("compile", 3008844800, 4506598400) == (3008844800, "timed steps")
assert bench.step_memory("max-autotune-no-cudagraphs", 7, 9)[0] == 7
assert bench.step_memory("reduce-overhead", 7, None)[0] == 7
PY'
fi

# run B: a budget that cannot fit the compile modes: they are skipped, saying so; merged
# with run A, A's finished compile job survives B's skip
echo '{}' >"$tmp/table.json"
PATH=$gpath BENCH_BIN="$tmp/fake_sg" BENCH_TORCH="$tmp/fake_torch" BENCH_RESULTS_DIR="$tmp/resultsB" \
    BENCH_GPU_NAME="Fake GPU 80GB" BENCH_BUDGET_S=100 BENCH_COMPILE_MIN_S=1000 \
    BENCH_ENGINE_TABLE="$tmp/table.json" \
    BENCH_JOBS='sg_cifar_b128|cifar_b128_bf16_(eager|compile)' \
    bash "$root/tools/bench.sh" "$tmp/runB" >"$tmp/runB.txt" 2>&1
rc=$?
mdB=$(ls "$tmp"/resultsB/*.md 2>/dev/null | head -n 1)
ok "bench.sh run B exits 0" '[ $rc -eq 0 ] && [ -n "$mdB" ]'
ok "compile skipped: budget spent" \
    'grep -q "PyTorch compile | skipped: budget spent: [0-9]*s of 100s left, this job needs at least 1000s" "$mdB"'
ok "target met against eager alone" \
    'grep -Eq "^\| unet_cifar b128 bf16 step time ÷ best PyTorch \| ≤ 0\.75 \| 0\.650 .*\| \*\*met\*\* \|" "$mdB"'
ok "the step with the engine table: its own side-by-side line (--engine-table, no breakdown) and its ratio in the target" \
    'grep -Eq "^\| stepgraph \(CUDA graph replay, engine table\) \| ok \| 6\.000 \| .* \| 0\.600× \|" "$mdB" &&
     grep -q "sg_cifar_b128_bf16_table.*--engine-table $tmp/table.json --no-breakdown" "$tmp/runB/jobs/sg_cifar_b128_bf16_table.json" &&
     grep -Eq "^\| unet_cifar b128 bf16 step time ÷ best PyTorch \| ≤ 0\.75 \| 0\.650 \(stepgraph 6\.500 ms; .*\); with the engine table 0\.600 \(6\.000 ms\) \| \*\*met\*\* \|" "$mdB"'
# on an H100, where bench/tables holds only the H200's table: the H200's stands in (the same
# chip), its row and the target saying where it was measured
PATH=$gpath BENCH_BIN="$tmp/fake_sg" BENCH_TORCH="$tmp/fake_torch" BENCH_RESULTS_DIR="$tmp/resultsH" \
    BENCH_GPU_NAME="NVIDIA H100 80GB HBM3" BENCH_BUDGET_S=100 \
    BENCH_JOBS='sg_cifar_b128_bf16(_table)?$|cifar_b128_bf16_eager' \
    bash "$root/tools/bench.sh" "$tmp/runH" >"$tmp/runH.txt" 2>&1
rc=$?
mdH=$(ls "$tmp"/resultsH/*-nvidia-h100-80gb-hbm3.md 2>/dev/null | head -n 1)
ok "bench.sh on an H100: the H200's engine table stands in, the row saying so" \
    '[ $rc -eq 0 ] && [ -n "$mdH" ] &&
     grep -Eq "^\| stepgraph \(CUDA graph replay, engine table measured on NVIDIA H200\) \| ok \| 6\.000 \|" "$mdH" &&
     grep -q -- "--engine-table $root/bench/tables/nvidia-h200-unet_cifar-b128-bf16.json" "$tmp/runH/jobs/sg_cifar_b128_bf16_table.json" &&
     grep -q "with the engine table (measured on NVIDIA H200) 0\.600 (6\.000 ms)" "$mdH" &&
     grep -q "no engine table for nvidia-h100-80gb-hbm3; taking nvidia-h200-unet_cifar-b128-bf16.json" "$tmp/runH.txt"'
# the unet_adm64 row with its Winograd step (SG_CONV_WINO=1, no breakdown): its own line, and its
# ratio beside the default step's in the target
PATH=$gpath BENCH_BIN="$tmp/fake_sg" BENCH_TORCH="$tmp/fake_torch" BENCH_RESULTS_DIR="$tmp/resultsW" \
    BENCH_GPU_NAME="Fake GPU 80GB" BENCH_BUDGET_S=100 BENCH_COMPILE_MIN_S=1 \
    BENCH_JOBS='adm64_b32_fp32(_wino|_f32tc|_tf32off_compile)?$' \
    bash "$root/tools/bench.sh" "$tmp/runW" >"$tmp/runW.txt" 2>&1
rc=$?
mdW=$(ls "$tmp"/resultsW/*.md 2>/dev/null | head -n 1)
ok "the unet_adm64 step with Winograd: its line (SG_CONV_WINO=1, no breakdown) and its ratio in the target" \
    '[ $rc -eq 0 ] && grep -Eq "^\| stepgraph \(CUDA graph replay, Winograd fp32 3x3\) \| ok \| 15\.000 \|" "$mdW" &&
     grep -q "sg_adm64_b32_fp32_wino.*env SG_CONV_WINO=1 .*--no-breakdown" "$tmp/runW/jobs/sg_adm64_b32_fp32_wino.json" &&
     grep -Eq "^\| unet_adm64 b32 fp32 step time ÷ torch.compile \(TF32 off\) \| ≤ 0\.8 \| 2\.500 \(stepgraph 20\.000 ms; compile 8\.000 ms\); with Winograd 1\.875 \(15\.000 ms\); with the fp32 tiles on tensor cores 1\.500 \(12\.000 ms\) \| \*\*not met\*\* \|" "$mdW"'
ok "the unet_adm64 step with the fp32 tiles on the tensor cores: its line (SG_CONV_F32_TC=1, no breakdown)" \
    'grep -Eq "^\| stepgraph \(CUDA graph replay, fp32 tiles on tensor cores\) \| ok \| 12\.000 \|" "$mdW" &&
     grep -q "sg_adm64_b32_fp32_f32tc.*env SG_CONV_F32_TC=1 .*--no-breakdown" "$tmp/runW/jobs/sg_adm64_b32_fp32_f32tc.json"'
python3 "$root/tools/bench_report.py" report --out "$tmp/merged.md" "$tmp/runA" "$tmp/runB" >/dev/null
ok "merged report keeps the finished compile job" \
    'grep -Eq "^\| PyTorch compile \| ok \| 8\.000" "$tmp/merged.md"'

# run C: no binary and a build that cannot work is recorded, the PyTorch jobs still run, the
# report is written, and the exit status says stepgraph was not built
BENCH_BUILD_DIR="$tmp/nobuild" BENCH_TORCH="$tmp/fake_torch" BENCH_RESULTS_DIR="$tmp/resultsC" \
    BENCH_GPU_NAME="Fake GPU 80GB" BENCH_BUDGET_S=100 BENCH_JOBS='sg_cifar_b128|cifar_b128_bf16_eager' \
    PATH="$tmp/nocmake:$gpath" bash -c 'mkdir -p "$0/nocmake"; printf "#!/bin/sh\necho cmake: broken >&2; exit 1\n" >"$0/nocmake/cmake"; chmod +x "$0/nocmake/cmake"; exec bash "$1/tools/bench.sh" "$0/runC"' "$tmp" "$root" >"$tmp/runC.txt" 2>&1
rc=$?
mdC=$(ls "$tmp"/resultsC/*.md 2>/dev/null | head -n 1)
ok "bench.sh run C (build fails) exits 1 with a report" '[ $rc -eq 1 ] && [ -n "$mdC" ]'
ok "run C: one clear FAIL line" 'grep -q "^bench.sh: FAIL: stepgraph was not built: build failed (exit 1): cmake: broken" "$tmp/runC.txt"'
ok "build failure recorded" 'grep -q "stepgraph (CUDA graph replay) | failed: build failed (exit 1): cmake: broken" "$mdC"'
ok "torch eager still ran" 'grep -Eq "^\| PyTorch eager \| ok \| 10\.000" "$mdC"'

# run D: no GPU visible: exit 1 at once, one clear line, nothing run
PATH="$tmp/nogpu:$PATH" BENCH_BIN="$tmp/fake_sg" BENCH_TORCH="$tmp/fake_torch" \
    BENCH_RESULTS_DIR="$tmp/resultsD" bash "$root/tools/bench.sh" "$tmp/runD" >"$tmp/runD.txt" 2>&1
rc=$?
ok "run D (no GPU): exit 1, one FAIL line, no report" '[ $rc -eq 1 ] && [ $(wc -l <"$tmp/runD.txt") -eq 1 ] && grep -q "^bench.sh: FAIL: no GPU visible" "$tmp/runD.txt" && [ ! -d "$tmp/resultsD" ]'

# run E: a stepgraph result from the CPU backend fails loudly (no silent CPU fallback)
PATH=$gpath BENCH_BIN="$tmp/fake_sg_cpu" BENCH_TORCH="$tmp/fake_torch" BENCH_RESULTS_DIR="$tmp/resultsE" \
    BENCH_GPU_NAME="Fake GPU 80GB" BENCH_BUDGET_S=100 BENCH_JOBS='^sg_cifar_b128' \
    bash "$root/tools/bench.sh" "$tmp/runE" >"$tmp/runE.txt" 2>&1
rc=$?
ok "run E (CPU result): exit 1 with a clear line" '[ $rc -eq 1 ] && grep -q "^bench.sh: FAIL: a stepgraph result is not from the CUDA backend: sg_cifar_b128_bf16 ran on backend cpu" "$tmp/runE.txt"'

# run F: every stepgraph job failed: exit 1
PATH=$gpath BENCH_BIN="$tmp/fake_sg" BENCH_TORCH="$tmp/fake_torch" BENCH_RESULTS_DIR="$tmp/resultsF" \
    BENCH_GPU_NAME="Fake GPU 80GB" BENCH_BUDGET_S=100 BENCH_JOBS='^sg_cifar_b8' \
    bash "$root/tools/bench.sh" "$tmp/runF" >"$tmp/runF.txt" 2>&1
rc=$?
ok "run F (no stepgraph success): exit 1" '[ $rc -eq 1 ] && grep -q "^bench.sh: FAIL: no stepgraph job succeeded on the GPU" "$tmp/runF.txt"'

# runs G and H: a build folder holding tools/gpu_check.sh's prebuilt binaries (a warm machine's
# second call): its bench is taken where prebuilt.stamp is this tree's stamp (G: no build, the
# broken cmake is never run); with another stamp the build runs (H: it fails on that cmake)
tree_stamp=$(SG_GPU_DEPS=0 bash -c 'source "$0/tools/gpu_env.sh" >/dev/null 2>&1; sg_gpu_source_stamp "$0"' "$root")
mkdir -p "$tmp/pb" "$tmp/nocmake2" && cp "$tmp/fake_sg" "$tmp/pb/bench"
printf '#!/bin/sh\necho cmake: broken >&2; exit 1\n' >"$tmp/nocmake2/cmake" && chmod +x "$tmp/nocmake2/cmake"
for run in G H; do
    if [ $run = G ]; then echo "$tree_stamp" >"$tmp/pb/prebuilt.stamp"; else echo "sources 0000" >"$tmp/pb/prebuilt.stamp"; fi
    PATH="$tmp/nocmake2:$gpath" SG_GPU_DEPS=0 BENCH_BUILD_DIR="$tmp/pb" BENCH_TORCH="$tmp/fake_torch" \
        BENCH_RESULTS_DIR="$tmp/results$run" BENCH_GPU_NAME="Fake GPU 80GB" BENCH_BUDGET_S=100 \
        BENCH_JOBS='^sg_cifar_b128' bash "$root/tools/bench.sh" "$tmp/run$run" >"$tmp/run$run.txt" 2>&1
    eval "rc$run=\$?"
done
ok "run G (prebuilt, stamp matches): no build, stepgraph ran, exit 0" \
    '[ $rcG -eq 0 ] && grep -q "^bench.sh: taking the prebuilt $tmp/pb/bench (its stamp is this tree.s: no build)" "$tmp/runG.txt" &&
     ! grep -q "broken\|building" "$tmp/runG.txt" && grep -Eq "^\| stepgraph \(CUDA graph replay\) \| ok \|" "$tmp"/resultsG/*.md'
ok "run H (prebuilt, another stamp): the build runs" \
    '[ $rcH -eq 1 ] && grep -q "^bench.sh: building $tmp/pb/bench" "$tmp/runH.txt" &&
     grep -q "^bench.sh: FAIL: stepgraph was not built: build failed (exit 1): cmake: broken" "$tmp/runH.txt"'

# the report over a real (CPU) bench result
report_of real "$tmp/b.json" 4 fp32 "bench --backend cpu --model unet_tiny --json"
ok "report over a real CPU result" \
    'grep -Eq "^\| stepgraph \(cpu backend\) \| ok \| [0-9.]+ \|" "$tmp/real.md" && grep -Eq "^\| conv2d \| 33 \| [0-9.]+ \|" "$tmp/real.md"'
# a run given its peaks (--peak-tflops): the MFU note says given, not measured
report_of given "$tmp/pk.json" 4 fp32 "bench --backend cpu --model unet_tiny --peak-tflops 0.05 --json"
ok "report: a given peak is named so" \
    'grep -q "fp32 matmul peak given to the stepgraph run (--peak-tflops) (0.1 TFLOP/s)" "$tmp/given.md" &&
     ! grep -q "measured with cuBLAS" "$tmp/given.md" && grep -Eq "its floor: [0-9.]+ ms \(the step is" "$tmp/given.md" &&
     grep -q "at the given matmul peak and its bytes at the given copy bandwidth (10 GB/s)" "$tmp/given.md"'
# its memory columns: a row's GB, GB/s and floor (a memory-bound row's; a matmul row's: none
# without a matmul peak), and the step's bytes
ok "report: the breakdown's memory columns" \
    'grep -q "^| op | nodes | ms | % | GFLOP | GFLOP/s | GB | GB/s | floor ms |" "$tmp/real.md" &&
     grep -Eq "^\| conv2d \| 33 \| .* \| [0-9.]+ \| [0-9.]+ \| – \|$" "$tmp/real.md" &&
     grep -Eq "^\| adamw_ema \| 1 \| .* \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \|$" "$tmp/real.md" &&
     grep -Eq "The step moves [0-9.]+ GB at least; its floor: n/a" "$tmp/real.md"'
# its per-conv-layer table: the TFLOP/s and GEMM columns (no GEMM hook on the CPU: dashes)
ok "report: the per-conv-layer table" \
    'grep -q "^| node | op | fused | tensor | shape | own ms | lib ms | own/lib | TFLOP/s | GEMM M×N×K | GEMM TFLOP/s | % of GEMM | engine |" "$tmp/real.md" && grep -Eq "^\| [0-9]+ \| conv2d \| - \| conv_in \| .* \| [0-9.]+ \| [0-9]+×[0-9]+×[0-9]+ \| n/a \| – \|" "$tmp/real.md"'

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
