#!/usr/bin/env python3
"""What one captured CUDA graph launches, counted without a GPU.

The host emulation of the CUDA runtime (tests/cuda_host) appends every completed stream
capture to the file named by SG_SIM_GRAPH_LIST: "capture K: N commands", then one line per
command, "KIND<TAB>NAME<TAB>NVTX range" (the backend names each schedule node's range "node I
OP -> TENSOR"). A training step's graph is the first capture of a bench or train run:

    SG_SIM_GRAPH_LIST=/tmp/g.txt build/tests/bench_cuda_host --model unet_cifar --batch 2 \\
        --precision bf16 --warmup 2 --iters 1 --no-breakdown --data synthetic:8
    tools/graph_launches.py /tmp/g.txt

prints the graph's commands per op (with its schedule nodes) and per kernel. The file is appended
to, so one that several runs wrote holds several runs' captures (each run numbers its own from
0): the last run's are read, with a note on stderr, unless --run picks another. The counts are
the emulation's: a cuBLAS GEMM is one command here (the library may launch two kernels on a
GPU: a split-K reduction), and cuDNN is not emulated (the host runs those convolutions on the
GEMM and own engines). The backend's own kernels, copies and memsets are counted as a GPU
issues them. --json prints the same as one object.
"""
import argparse
import collections
import json
import re
import signal
import sys


def read_captures(path):
    """[(run, header count, [(kind, name, range), ...]), ...] in file order; a run starts at
    every "capture 0" header"""
    caps = []
    run = -1
    try:
        f = open(path)
    except OSError as e:
        sys.exit(f"graph_launches: {path}: {e.strerror}")
    with f:
        for ln, line in enumerate(f, 1):
            line = line.rstrip("\n")
            m = re.match(r"capture (\d+): (\d+) commands$", line)
            if m:
                run += int(m.group(1)) == 0
                caps.append((max(run, 0), int(m.group(2)), []))
                continue
            parts = line.split("\t")
            if not caps or len(parts) != 3:
                sys.exit(f"graph_launches: {path}:{ln}: not a capture listing line: {line!r}")
            caps[-1][2].append(tuple(parts))
    for k, (_, n, cmds) in enumerate(caps):
        if n != len(cmds):
            sys.exit(f"graph_launches: {path}: capture {k} says {n} commands and lists {len(cmds)}"
                     " (a truncated file?)")
    return caps


def summarise(cmds):
    by_op, nodes_of, by_kernel, kinds = (collections.Counter(), collections.defaultdict(set),
                                         collections.Counter(), collections.Counter())
    for kind, name, rng in cmds:
        m = re.match(r"node (\d+) (\S+)", rng)
        op = m.group(2) if m else "(outside a node)"
        by_op[op] += 1
        if m:
            nodes_of[op].add(int(m.group(1)))
        by_kernel[(op, name)] += 1
        kinds[kind] += 1
    return {
        "commands": len(cmds),
        "kinds": dict(kinds),
        "ops": [{"op": op, "nodes": len(nodes_of[op]), "commands": c}
                for op, c in by_op.most_common()],
        "kernels": [{"op": op, "name": name, "commands": c}
                    for (op, name), c in by_kernel.most_common()],
    }


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # a reader that stops early (head) is no error
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("list", help="the SG_SIM_GRAPH_LIST file")
    ap.add_argument("--capture", type=int, default=0,
                    help="which capture of the run (default 0: a bench or train run's step)")
    ap.add_argument("--run", type=int, default=-1,
                    help="which run, when several appended to the file (0 the first; default "
                         "the last)")
    ap.add_argument("--json", action="store_true", help="one JSON object instead of tables")
    a = ap.parse_args()
    caps = read_captures(a.list)
    runs = caps[-1][0] + 1 if caps else 0
    run = runs - 1 if a.run < 0 else a.run
    if not 0 <= run < runs:
        sys.exit(f"graph_launches: {a.list} holds {runs} run(s); no run {a.run}")
    mine = [c for c in caps if c[0] == run]
    if not 0 <= a.capture < len(mine):
        sys.exit(f"graph_launches: run {run} of {a.list} holds {len(mine)} captures; no capture "
                 f"{a.capture}")
    if runs > 1:
        print(f"graph_launches: {a.list} holds {runs} runs' captures (appended); reading run {run}"
              f"{' (the last)' if a.run < 0 else ''}", file=sys.stderr)
    s = summarise(mine[a.capture][2])
    s["capture"] = a.capture
    s["run"] = run
    if a.json:
        print(json.dumps(s))
        return
    kinds = ", ".join(f"{v} {k}" for k, v in sorted(s["kinds"].items()))
    print(f"capture {a.capture}{f' of run {run}' if runs > 1 else ''}: {s['commands']} commands "
          f"({kinds})")
    print(f"\n{'commands':>8}  {'nodes':>5}  op")
    for o in s["ops"]:
        print(f"{o['commands']:8d}  {o['nodes']:5d}  {o['op']}")
    print(f"\n{'commands':>8}  op: kernel")
    for k in s["kernels"]:
        print(f"{k['commands']:8d}  {k['op']}: {k['name']}")


if __name__ == "__main__":
    main()
