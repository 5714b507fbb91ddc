#!/usr/bin/env python3
"""bench_report.py — the pieces of tools/bench.sh that are easier in Python (stdlib only).

  bench_report.py record --out FILE --job NAME --row ROW --impl stepgraph|torch
                         --model M --batch B --precision P [--mode M] [--tf32 on|off]
                         --status ok|failed|timeout|skipped [--reason TEXT] [--rc N]
                         [--seconds S] [--stdout FILE] [--log FILE] [--cmd TEXT]
      One job's record (JSON): what was asked, how it ended, and the tool's JSON result
      (the last line of --stdout that parses as a JSON object). A tool that printed a
      result marked failed/skipped turns an "ok" status into failed/skipped with its reason.

  bench_report.py env --out FILE [--budget S] [--python PY]
      The environment: date, GPU (nvidia-smi), driver, CUDA (nvcc), torch/CUDA/cuDNN (PY),
      the commit and whether the working tree is dirty, CPU, compilers.

  bench_report.py report --out FILE [--copy FILE ...] DIR [DIR ...]
      Assemble the markdown report from the records (DIR/jobs/*.json; a later DIR's record
      of the same job wins unless it did not finish and the earlier one did), DIR/env.json
      and DIR/build.log: the side-by-side tables (each with a bar chart of ms/step in a text
      block), ratios to the best PyTorch mode, the
      targets of docs (DESIGN: Targets) met / not met, the per-op breakdowns, the
      environment and the raw logs. Prints the targets summary on stdout.

  bench_report.py name DIR     prints <date>-<gpu>.md for DIR/env.json
"""

import argparse
import datetime
import glob
import json
import math
import os
import re
import socket
import subprocess
import sys

# The targets (DESIGN.md, "Targets"), checked against rows found by model/batch/precision.
CIFAR_BIG = ("unet_cifar", 128, "bf16")
CIFAR_SMALL = ("unet_cifar", 8, "bf16")
ADM = ("unet_adm64", 32, "fp32")
TORCH_MODES = ["eager", "compile", "max-autotune-no-cudagraphs", "reduce-overhead",
               "max-autotune"]
LOG_TAIL_LINES = 40


# ---------------------------------------------------------------------------- helpers

def last_json_object(path):
    """The last line of path that parses as a JSON object, or None."""
    try:
        with open(path, errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        line = line.strip()
        if line.startswith("{"):
            try:
                v = json.loads(line)
            except ValueError:
                continue
            if isinstance(v, dict):
                return v
    return None


def tail(path, n):
    try:
        with open(path, errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    # carriage-return progress lines: keep what a terminal would show last
    lines = [ln.split("\r")[-1] for ln in lines]
    return lines[-n:]


def run_cmd(cmd, timeout=30):
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return r.stdout.strip() if r.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def fnum(x, fmt="%.3f", na="n/a"):
    return fmt % x if num(x) else na


# The PyTorch modes that replay CUDA graphs: tools/torch_ref/bench.py's CUDAGRAPH_MODES
CUDAGRAPH_MODES = {"reduce-overhead", "max-autotune"}


def step_memory(r):
    """(bytes, recording) of a PyTorch record: the memory its step needs, comparable across
    modes. bench.py records it (step_memory_bytes: in a CUDA graph mode, whose replays bypass the
    allocator so that its timed max_memory_allocated misses the activations, the peak of the
    warm-up after its first step, where the graphs are recorded). A record from before has only
    the whole warm-up's peak, the first step's cudnn.benchmark trials included: taken as an upper
    bound. recording: whether the figure is one with the recording."""
    timed = res(r, "max_memory_allocated")
    warm = res(r, "max_memory_allocated_incl_warmup")
    graph = r.get("mode") in CUDAGRAPH_MODES
    need = res(r, "step_memory_bytes")
    if need is None:
        need = max(timed, warm) if (graph and num(timed) and num(warm)) else timed
    return need, graph and num(need) and num(timed) and need != timed


def mib(b):
    return "%.1f MiB" % (b / 1048576.0) if num(b) else "n/a"


def slug(s):
    s = re.sub(r"[^a-z0-9]+", "-", (s or "").lower()).strip("-")
    return s or "unknown-gpu"


def md_escape(s):
    return str(s).replace("|", "\\|").replace("\n", " ")


# ---------------------------------------------------------------------------- record

def cmd_record(a):
    rec = dict(job=a.job, row=a.row, impl=a.impl, model=a.model, batch=a.batch,
               precision=a.precision, mode=a.mode or ("graph" if a.impl == "stepgraph" else ""),
               tf32=a.tf32, status=a.status, reason=a.reason or "", rc=a.rc,
               seconds=a.seconds, cmd=a.command_line or "", log=os.path.basename(a.log or ""),
               stdout=os.path.basename(a.stdout or ""), result=None)
    if a.note:
        rec["note"] = a.note
    if a.stdout:
        res = last_json_object(a.stdout)
        rec["result"] = res
        if res is not None and rec["status"] in ("ok", "failed"):
            if res.get("failed"):
                rec["status"] = "failed"
                rec["reason"] = res.get("reason") or rec["reason"]
            elif res.get("skipped"):
                rec["status"] = "skipped"
                rec["reason"] = res.get("reason") or rec["reason"]
        if rec["status"] == "ok" and res is None:
            rec["status"] = "failed"
            rec["reason"] = "no JSON result on stdout"
        if rec["status"] == "ok" and not num(res.get("ms_per_step")):
            rec["status"] = "failed"
            rec["reason"] = "the JSON result has no ms_per_step"
    if rec["status"] in ("failed", "timeout") and not rec["reason"] and a.log:
        t = [ln for ln in tail(a.log, 20) if ln.strip()]
        rec["reason"] = t[-1].strip()[:300] if t else "no output"
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(rec, f)
        f.write("\n")
    return 0


# ---------------------------------------------------------------------------- env

def cmd_env(a):
    env = dict(date=datetime.date.today().isoformat(),
               time_utc=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ"),
               host=socket.gethostname(), budget_s=a.budget)
    q = run_cmd(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm,"
                 "power.limit", "--format=csv,noheader"])
    if q:
        first = [x.strip() for x in q.splitlines()[0].split(",")]
        keys = ["gpu", "driver", "gpu_memory", "max_sm_clock", "power_limit"]
        env.update({k: v for k, v in zip(keys, first)})
        env["gpu_count"] = len(q.splitlines())
    if a.gpu_name:
        env["gpu"] = a.gpu_name
    smi = run_cmd(["nvidia-smi"])
    if smi:
        m = re.search(r"CUDA Version:\s*([0-9.]+)", smi)
        if m:
            env["driver_cuda"] = m.group(1)
    nv = run_cmd(["nvcc", "--version"])
    if nv:
        m = re.search(r"release ([0-9.]+), V([0-9.]+)", nv)
        env["nvcc"] = m.group(2) if m else nv.splitlines()[-1]
    py = a.python or "python3"
    tv = run_cmd([py, "-c", "import json, torch; print(json.dumps(dict(torch=torch.__version__,"
                  " cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version(),"
                  " triton=__import__('importlib').util.find_spec('triton') is not None)))"],
                 timeout=120)
    if tv:
        try:
            t = json.loads(tv.splitlines()[-1])
            env.update(torch=t.get("torch"), torch_cuda=t.get("cuda"), cudnn=t.get("cudnn"),
                       triton=t.get("triton"))
        except ValueError:
            pass
    pyv = run_cmd([py, "--version"])
    if pyv:
        env["python"] = pyv
    root = a.repo or os.getcwd()
    c = run_cmd(["git", "-C", root, "rev-parse", "HEAD"])
    if a.commit:
        env["commit"] = a.commit
        env["commit_source"] = "BENCH_COMMIT" + ("" if not c or c.startswith(a.commit) or
                                                 a.commit.startswith(c) else
                                                 " (git here says %s)" % c)
    elif not c:
        env["commit"] = "unknown (no git checkout here; pass BENCH_COMMIT)"
    if c:
        if not a.commit:
            env["commit"] = c
        st = run_cmd(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"])
        env["dirty_files"] = len(st.splitlines()) if st else 0
    cm = run_cmd(["cmake", "--version"])
    if cm:
        env["cmake"] = cm.splitlines()[0]
    cc = run_cmd(["cc", "--version"])
    if cc:
        env["cc"] = cc.splitlines()[0]
    lc = run_cmd(["lscpu"])
    if lc:
        m = re.search(r"Model name:\s*(.+)", lc)
        if m:
            env["cpu"] = m.group(1).strip()
    env["cpu_count"] = os.cpu_count()
    with open(a.out, "w") as f:
        json.dump(env, f, indent=1)
        f.write("\n")
    return 0


# ---------------------------------------------------------------------------- report

def load_dirs(dirs):
    recs, env, build_logs = {}, {}, []
    for d in dirs:
        for p in sorted(glob.glob(os.path.join(d, "jobs", "*.json"))):
            try:
                with open(p) as f:
                    r = json.load(f)
            except (OSError, ValueError):
                continue
            if not isinstance(r, dict) or "job" not in r:
                continue
            r["_dir"] = d
            old = recs.get(r["job"])
            if old and old["status"] == "ok" and r["status"] != "ok":
                continue
            recs[r["job"]] = r
        e = os.path.join(d, "env.json")
        if os.path.exists(e):
            try:
                with open(e) as f:
                    env.update(json.load(f))
            except (OSError, ValueError):
                pass
        b = os.path.join(d, "build.log")
        if os.path.exists(b):
            build_logs.append(b)
    return recs, env, build_logs


def res(r, key):
    v = (r.get("result") or {}).get(key) if r else None
    return v if num(v) else None


def peak_given(r):
    """the stepgraph run's matmul peak came from --peak-tflops, not a measurement"""
    return bool(r) and (r.get("result") or {}).get("matmul_peak_given") is True


def ok(r):
    return r is not None and r["status"] == "ok" and res(r, "ms_per_step") is not None


def label(r):
    if r["impl"] == "stepgraph":
        be = (r.get("result") or {}).get("backend", "cuda")
        s = "stepgraph (CUDA graph replay)" if be == "cuda" else "stepgraph (%s backend)" % be
        how = SG_MODES.get(r.get("mode"))
        if how and r.get("note"):  # e.g. a table measured on another GPU of the same chip
            how += " " + r["note"]
        return s[:-1] + ", %s)" % how if how else s
    s = "PyTorch " + r["mode"]
    if r.get("tf32") and r["precision"] == "fp32":
        s += ", TF32 " + r["tf32"]
    return s


# the stepgraph rows beside the default one (mode "graph"): planned with the engine table measured
# on this GPU model; with the fp32 3x3 convolutions as Winograd (SG_CONV_WINO=1); with the own
# engine's fp32 tiles on the tensor cores (SG_CONV_F32_TC=1, 3xTF32)
SG_MODES = {"table": "engine table", "wino": "Winograd fp32 3x3",
            "f32tc": "fp32 tiles on tensor cores"}
# the unet_adm64 target's alternative steps: mode, their words in the target line
ADM_FORMS = (("wino", "Winograd"), ("f32tc", "the fp32 tiles on tensor cores"))


def row_key(r):
    return (r["model"], int(r["batch"]), r["precision"])


def group_rows(recs):
    rows = {}
    for r in recs.values():
        rows.setdefault(row_key(r), []).append(r)

    def order(r):
        m = TORCH_MODES.index(r["mode"]) if r["mode"] in TORCH_MODES else len(TORCH_MODES)
        if r["impl"] == "stepgraph":  # the default step, then the others (SG_MODES' order)
            return (0, "", list(SG_MODES).index(r["mode"]) + 1 if r.get("mode") in SG_MODES
                    else 0)
        return (1, r.get("tf32") or "", m)

    for k in rows:
        rows[k].sort(key=order)
    return rows


def best_torch(rs, tf32=None):
    c = [r for r in rs if r["impl"] == "torch" and ok(r) and (tf32 is None or r.get("tf32") == tf32)]
    return min(c, key=lambda r: res(r, "ms_per_step")) if c else None


def sg_of(rs):
    """the row's default stepgraph run (the one with the breakdown)"""
    c = [r for r in rs if r["impl"] == "stepgraph" and r.get("mode") not in SG_MODES]
    return c[0] if c else None


def sg_mode_of(rs, mode):
    """the row's stepgraph run in one of SG_MODES"""
    c = [r for r in rs if r["impl"] == "stepgraph" and r.get("mode") == mode]
    return c[0] if c else None


def sg_table_of(rs):
    """the row's stepgraph run planned with the engine table measured on this GPU model"""
    return sg_mode_of(rs, "table")


def torch_mode(rs, mode, tf32=None):
    for r in rs:
        if r["impl"] == "torch" and r["mode"] == mode and (tf32 is None or r.get("tf32") == tf32):
            return r
    return None


def verdict(value, limit, higher_is_better=False):
    if value is None:
        return "n/a"
    good = value >= limit if higher_is_better else value <= limit
    return "**met**" if good else "**not met**"


def status_text(r):
    if r is None:
        return "not run"
    if r["status"] == "ok":
        return "ok"
    return "%s: %s" % (r["status"], r.get("reason") or "?")


def modes_note(rs, tf32=None):
    ran = [r["mode"] for r in rs if r["impl"] == "torch" and ok(r)
           and (tf32 is None or r.get("tf32") == tf32)]
    missing = [r["mode"] + (" (TF32 %s)" % r["tf32"] if tf32 is None and r.get("tf32") and
                            r["precision"] == "fp32" else "")
               for r in rs if r["impl"] == "torch" and not ok(r)
               and (tf32 is None or r.get("tf32") == tf32)]
    s = "best of " + (", ".join(sorted(set(ran))) or "none")
    if missing:
        s += "; did not finish: " + ", ".join(missing)
    return s


BAR_CELLS = 40
BAR_EIGHTHS = " ▏▎▍▌▋▊▉"


def bar(v, vmax, cells=BAR_CELLS):
    """v as a bar of full blocks and one partial block, vmax filling `cells` cells"""
    eighths = int(round(8 * cells * v / vmax)) if vmax > 0 else 0
    full, part = divmod(max(eighths, 1), 8)
    return "█" * full + (BAR_EIGHTHS[part] if part else "")


def bar_chart(out, rs):
    """the finished implementations' ms/step as bars in a text block, fastest first: the table's
    first column at a glance (nothing where fewer than two finished)"""
    done = sorted(((res(r, "ms_per_step"), label(r)) for r in rs if ok(r)), key=lambda t: t[0])
    if len(done) < 2:
        return
    w = max(len(name) for _, name in done)
    top = done[-1][0]
    out.append("```text")
    out.append("ms/step, shorter is faster")
    for ms, name in done:
        out.append("%-*s  %-*s  %9.3f" % (w, name, BAR_CELLS, bar(ms, top), ms))
    out.append("```\n")


def side_by_side(out, key, rs):
    model, batch, prec = key
    sg = sg_of(rs)
    best = best_torch(rs)
    peak = res(sg, "matmul_peak_tflops")
    mm_flops = res(sg, "matmul_flops_per_step")
    out.append("### %s, batch %d, %s\n" % (model, batch, prec))
    if best:
        out.append("Best PyTorch mode: %s, %.3f ms/step (%s).\n" %
                   (label(best), res(best, "ms_per_step"), modes_note(rs)))
    else:
        out.append("No PyTorch mode finished for this row.\n")
    if prec == "fp32":
        lines = ["- best with TF32 %s: %s, %.3f ms/step" % (tf, b["mode"], res(b, "ms_per_step"))
                 for tf, b in (("off", best_torch(rs, "off")), ("on", best_torch(rs, "on"))) if b]
        if lines:
            out.append("\n".join(lines) + "\n")
    out.append("| implementation | status | ms/step (median) | p10–p90 ms | img/s | "
               "÷ best PyTorch | stepgraph speed-up | MFU* | peak memory | host µs/step |")
    out.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    sg_ms = res(sg, "ms_per_step") if ok(sg) else None
    for r in rs:
        ms = res(r, "ms_per_step") if ok(r) else None
        if ms is None:
            out.append("| %s | %s | – | – | – | – | – | – | – | – |" %
                       (label(r), md_escape(status_text(r))))
            continue
        spread = "%s–%s" % (fnum(res(r, "ms_p10")), fnum(res(r, "ms_p90")))
        ratio = fnum(ms / res(best, "ms_per_step"), "%.3f×") if best else "n/a"
        speed = fnum(ms / sg_ms, "%.2f×") if (sg_ms and r["impl"] == "torch") else "–"
        mfu = (fnum(100 * mm_flops / (ms / 1e3) / (peak * 1e12), "%.1f%%")
               if peak and mm_flops else "n/a")
        if r["impl"] == "stepgraph":
            mem = "arena %s" % mib(res(r, "arena_bytes"))
            host = fnum(res(r, "host_us_per_step"), "%.2f")
            if res(r, "host_us_captured") is not None:  # the libraries' memset nodes kept
                host += " (as captured: %s)" % fnum(res(r, "host_us_captured"), "%.2f")
        else:
            need, rec = step_memory(r)
            mem = "max_alloc %s" % mib(need)
            if rec:  # a CUDA graph mode: the timed steps' figure beside it
                mem += " (with the recording; timed steps: %s)" % mib(
                    res(r, "max_memory_allocated"))
            host = "–"
        out.append("| %s | ok | %.3f | %s | %s | %s | %s | %s | %s | %s |" %
                   (label(r), ms, spread, fnum(res(r, "img_per_s"), "%.1f"), ratio, speed, mfu,
                    mem, host))
    out.append("")
    bar_chart(out, rs)
    notes = []
    if peak:
        notes.append("\\*MFU: the plan's matmul FLOPs per step (%.4g TFLOP) ÷ step time ÷ the "
                     "%s matmul peak %s (%.1f TFLOP/s); the same FLOP count for every "
                     "implementation." %
                     (mm_flops / 1e12, prec, "given to the stepgraph run (--peak-tflops)"
                      if peak_given(sg) else
                      "measured with cuBLAS in the stepgraph run", peak))
    else:
        notes.append("\\*MFU: n/a (no measured matmul peak).")
    notes.append("stepgraph speed-up = PyTorch ms ÷ stepgraph ms.")
    if any(r["impl"] == "torch" and ok(r) and step_memory(r)[1] for r in rs):
        notes.append("PyTorch's CUDA graph modes replay their graphs outside the caching "
                     "allocator, so max_memory_allocated over the timed steps misses the "
                     "activations in the graphs' pool; their peak memory is the one with the "
                     "warm-up, where the graphs were recorded.")
    tfs = sorted({r.get("tf32") for r in rs if r["impl"] == "torch" and r.get("tf32")})
    if prec != "fp32" and tfs:
        notes.append("PyTorch ran with TF32 %s." % "/".join(tfs))
    if ok(sg):
        notes.append("stepgraph: arena %s, lower bound %s (ratio %s); %s timing, %d replays "
                     "after %d warm-up." %
                     (mib(res(sg, "arena_bytes")), mib(res(sg, "lower_bound_bytes")),
                      fnum(res(sg, "arena_ratio"), "%.4f"), sg["result"].get("timing", "?"),
                      sg["result"].get("iters", 0), sg["result"].get("warmup", 0)))
    out.append(" ".join(notes) + "\n")


def targets(rows):
    """[(what, target, measured, verdict)]"""
    t = []
    big = rows.get(CIFAR_BIG, [])
    small = rows.get(CIFAR_SMALL, [])
    adm = rows.get(ADM, [])

    sg = sg_of(big)
    sg_ms = res(sg, "ms_per_step") if ok(sg) else None
    b = best_torch(big)
    v = sg_ms / res(b, "ms_per_step") if (sg_ms and b) else None
    # with the engine table measured on this GPU model (the tuned way to train), where it ran
    st = sg_table_of(big)
    st_ms = res(st, "ms_per_step") if ok(st) else None
    vt = st_ms / res(b, "ms_per_step") if (st_ms and b) else None
    tuned = ""
    if st is not None:
        which = " (%s)" % st["note"] if st.get("note") else ""
        tuned = ("; with the engine table%s %s (%s ms)" % (which, fnum(vt, "%.3f"), fnum(st_ms))
                 if vt else "; with the engine table%s: %s" % (which, status_text(st)))
    best_v = min(x for x in (v, vt) if x) if (v or vt) else None
    t.append(("unet_cifar b128 bf16 step time ÷ best PyTorch", "≤ 0.75",
              "%s (stepgraph %s ms; %s %s ms; %s)%s" %
              (fnum(v, "%.3f"), fnum(sg_ms), b["mode"] if b else "PyTorch",
               fnum(res(b, "ms_per_step")), modes_note(big), tuned) if best_v else
              "n/a (stepgraph: %s; PyTorch: %s)%s" % (status_text(sg), modes_note(big), tuned),
              verdict(best_v, 0.75)))

    # the target is against a measured peak: a given one (--peak-tflops) does not count
    given = ok(sg) and peak_given(sg)
    mfu = res(sg, "mfu") if ok(sg) and not given else None
    peak, allf = res(sg, "matmul_peak_tflops"), res(sg, "flops_per_step")
    mfu_all = allf / (sg_ms / 1e3) / (peak * 1e12) if (mfu is not None and peak and allf) else None
    t.append(("unet_cifar b128 bf16 MFU (matmul FLOPs ÷ step ÷ measured bf16 peak)", "≥ 50%",
              "%s (%s TFLOP matmul per step, peak %s TFLOP/s; with all %s TFLOP of the step: %s)" %
              (fnum(100 * mfu, "%.1f%%"), fnum((res(sg, "matmul_flops_per_step") or 0) / 1e12,
                                               "%.3f"), fnum(peak, "%.1f"),
               fnum((allf or 0) / 1e12, "%.3f"), fnum(100 * mfu_all if mfu_all else None, "%.1f%%"))
              if mfu is not None else "n/a (%s)" % (status_text(sg) if not ok(sg)
                                                    else "the peak was given, not measured"
                                                    if given else "no measured peak"),
              verdict(mfu, 0.5, True)))

    sga = sg_of(adm)
    sga_ms = res(sga, "ms_per_step") if ok(sga) else None
    # the alternative steps (ADM_FORMS: Winograd, SG_CONV_WINO=1; the fp32 tiles on the tensor
    # cores, SG_CONV_F32_TC=1), where they ran
    forms = [(words, sg_mode_of(adm, mode)) for mode, words in ADM_FORMS]
    forms = [(words, r, res(r, "ms_per_step") if ok(r) else None) for words, r in forms
             if r is not None]
    for tf in ("off", "on"):
        c = torch_mode(adm, "compile", tf)
        cm = res(c, "ms_per_step") if ok(c) else None
        v = sga_ms / cm if (sga_ms and cm) else None
        wino, vs = "", [v]
        for words, r, ms in forms:
            vf = ms / cm if (ms and cm) else None
            vs.append(vf)
            wino += ("; with %s %s (%s ms)" % (words, fnum(vf, "%.3f"), fnum(ms)) if vf
                     else "; with %s: %s" % (words, status_text(r)))
        best_v = min(x for x in vs if x) if any(vs) else None
        t.append(("unet_adm64 b32 fp32 step time ÷ torch.compile (TF32 %s)" % tf, "≤ 0.8",
                  "%s (stepgraph %s ms; compile %s ms)%s" % (fnum(v, "%.3f"), fnum(sga_ms),
                                                             fnum(cm), wino)
                  if best_v else "n/a (stepgraph: %s; compile: %s)%s" % (status_text(sga),
                                                                       status_text(c), wino),
                  verdict(best_v, 0.8)))

    sgs = sg_of(small)
    sgs_ms = res(sgs, "ms_per_step") if ok(sgs) else None
    e = torch_mode(small, "eager")
    em = res(e, "ms_per_step") if ok(e) else None
    v = em / sgs_ms if (sgs_ms and em) else None
    t.append(("unet_cifar b8 bf16 speed-up over PyTorch eager", "≥ 2×",
              "%s (eager %s ms; stepgraph %s ms)" % (fnum(v, "%.2f×"), fnum(em), fnum(sgs_ms))
              if v else "n/a (stepgraph: %s; eager: %s)" % (status_text(sgs), status_text(e)),
              verdict(v, 2.0, True)))

    ratios = [(k, res(sg_of(rs), "arena_ratio")) for k, rs in rows.items()
              if ok(sg_of(rs)) and res(sg_of(rs), "arena_ratio")]
    worst = max((r for _, r in ratios), default=None)
    t.append(("arena ÷ lower bound (worst row)", "≤ 1.02",
              ", ".join("%s b%d %s: %.4f" % (k[0], k[1], k[2], r) for k, r in sorted(ratios))
              or "n/a", verdict(worst, 1.02)))

    arena = res(sg, "arena_bytes") if ok(sg) else None
    e = torch_mode(big, "eager")
    em = res(e, "max_memory_allocated") if ok(e) else None
    mems = [(r["mode"], step_memory(r)[0]) for r in big
            if r["impl"] == "torch" and ok(r) and step_memory(r)[0]]
    v = arena / em if (arena and em) else None
    t.append(("unet_cifar b128 bf16 arena ÷ PyTorch eager max_memory_allocated", "≤ 0.7",
              "%s (arena %s; eager %s)" % (fnum(v, "%.3f"), mib(arena), mib(em)) if v else
              "n/a (stepgraph: %s; eager: %s)" % (status_text(sg), status_text(e)),
              verdict(v, 0.7)))
    if mems:
        mode, m = min(mems, key=lambda x: x[1])
        v = arena / m if arena else None
        t.append(("… ÷ the smallest PyTorch mode's max_memory_allocated (CUDA graph modes: "
                  "with the recording)", "≤ 0.7",
                  "%s (%s: %s)" % (fnum(v, "%.3f"), mode, mib(m)) if v else "n/a",
                  verdict(v, 0.7)))

    hosts = [(k, res(sg_of(rs), "host_us_per_step")) for k, rs in rows.items()
             if ok(sg_of(rs)) and res(sg_of(rs), "host_us_per_step") is not None]
    worst = max((h for _, h in hosts), default=None)
    def captured(k):  # the same graph with the libraries' memset nodes as captured
        c = res(sg_of(rows[k]), "host_us_captured")
        return " (as captured: %.2f µs)" % c if c is not None else ""
    t.append(("host time per replayed step (worst row)", "≤ 20 µs",
              ", ".join("%s b%d %s: %.2f µs%s" % (k[0], k[1], k[2], h, captured(k))
                        for k, h in sorted(hosts)) or "n/a", verdict(worst, 20.0)))
    return t


def breakdown(out, key, sg):
    r = sg.get("result") or {}
    bd = r.get("breakdown")
    out.append("### %s, batch %d, %s\n" % key)
    if not bd:
        out.append("No breakdown (%s).\n" % ("--no-breakdown or not available"
                                             if ok(sg) else status_text(sg)))
        return
    out.append("Every schedule node run once eagerly and timed; the sum is %s ms against "
               "%s ms for the replayed step.\n" % (fnum(r.get("eager_total_ms")),
                                                  fnum(r.get("ms_per_step"))))
    # the windows of device time (kernels/cuda/timing.cu, bench since 2026-12-02): reports of
    # older runs do not have them, and their eager times hold the host's issue
    env = r.get("env") if isinstance(r.get("env"), dict) else {}
    if env.get("timing_windows"):
        hb = env.get("timing_host_bound") or 0
        out.append("The eager times here (nodes, per-layer engines, same-size GEMMs, replays) are "
                   "device time: before each timing a hold kernel kept the device busy while the "
                   "host issued the work (%d windows; the longest issue %s ms). %s\n" %
                   (env["timing_windows"], fnum(env.get("timing_issue_max_ms"), "%.3f"),
                    "None was host-bound." if not hb else
                    "**%d host-bound**: their issue outlasted the hold, and their times may hold "
                    "host time (the last hold: %s ms)." %
                    (hb, fnum(env.get("timing_hold_ms"), "%.3f"))))
    replay = r.get("replay_total_ms") is not None
    if replay:
        out.append("Replay ms: each row's nodes captured in schedule order as one CUDA graph and "
                   "replayed (median): the family's cost inside a replay, without the eager "
                   "launch gaps; the sum is %s ms.\n" % fnum(r.get("replay_total_ms")))
    # the memory columns (bench since 2026-12-02): bytes moved at least, GB/s, the floor
    mem = all("gbytes" in o for o in bd)
    if mem:
        bw, floor = r.get("mem_peak_gb_per_s"), r.get("floor_ms")
        how = {k: "given" if r.get(k) is True else "measured"
               for k in ("matmul_peak_given", "mem_peak_given")}
        out.append("GB: the bytes a row's nodes move at least (inputs read and outputs written "
                   "once); GB/s over its replay ms (else its eager ms); floor ms: each node at "
                   "the longer of its matmul FLOPs at the %s matmul peak and its bytes at "
                   "the %s copy bandwidth (%s GB/s). The step moves %s GB at least; its "
                   "floor: %s.\n" %
                   (how["matmul_peak_given"], how["mem_peak_given"], fnum(bw, "%.0f"),
                    fnum((r.get("bytes_per_step") or 0) / 1e9, "%.2f"),
                    "%.3f ms (the step is %.2fx it)" % (floor, r["ms_per_step"] / floor)
                    if num(floor) and floor > 0 and num(r.get("ms_per_step"))
                    else "n/a (a peak not measured)"))
    # the replayed graph's commands (bench since 2026-12-04): which rows' library calls add memsets
    cmds = replay and all("graph_commands" in o for o in bd)
    if cmds:
        gt = env.get("graph_node_types") or {}
        rep = env.get("graph_memsets_replaced")
        out.append("Commands: the row's replayed graph's kernel and memset nodes as captured "
                   "(memsets come from the libraries' calls; the whole step's graph as launched: "
                   "%s kernels, %s memsets%s).\n" %
                   (gt.get("kernel", "n/a"), gt.get("memset", "n/a"),
                    "; %s of the %s memsets captured made kernel nodes" %
                    (rep, env.get("graph_memsets_captured")) if rep else ""))
    out.append("| op | nodes | ms | % | GFLOP | GFLOP/s |" + (" replay ms |" if replay else "") +
               (" kernels | memsets |" if cmds else "") + (" GB | GB/s | floor ms |" if mem else ""))
    out.append("|---|---:|---:|---:|---:|---:|" + ("---:|" if replay else "") +
               ("---:|---:|" if cmds else "") + ("---:|---:|---:|" if mem else ""))
    for o in bd:
        gfs = fnum(o.get("gflops_per_s"), "%.1f") if o.get("matmul") else "–"
        op = o.get("op") + ("/" + o["engine"] if o.get("engine") else "")
        out.append("| %s | %d | %s | %s | %s | %s |" %
                   (op, o.get("nodes", 0), fnum(o.get("ms"), "%.4f"),
                    fnum(o.get("pct"), "%.2f"), fnum(o.get("gflop"), "%.3f"), gfs) +
                   (" %s |" % fnum(o.get("replay_ms"), "%.4f") if replay else "") +
                   (" %d | %d |" % (o["graph_commands"]["kernel"], o["graph_commands"]["memset"])
                    if cmds else "") +
                   (" %s | %s | %s |" % (fnum(o.get("gbytes"), "%.4f"),
                                         fnum(o.get("gb_per_s"), "%.1f"),
                                         fnum(o.get("floor_ms"), "%.4f", "–")) if mem else ""))
    out.append("")
    conv_layers(out, r)
    attn_layers(out, r)


def attn_layers(out, r):
    """bench's attention table: each attention node on both engines (SG_ATTN=gemm | fused)"""
    at = r.get("attn_layers")
    if not at:
        return
    out.append("Per attention node: each run once eagerly on both engines (SG_ATTN=gemm: cuBLASLt "
               "GEMMs and softmax kernels; fused: the scores and softmax in registers; – where it "
               "does not take the node); the step's engine last.\n")
    out.append("| node | op | tensor | shape | gemm ms | fused ms | fused/gemm | engine |")
    out.append("|---:|---|---|---|---:|---:|---:|---|")
    tot = [0.0, 0.0]
    both = 0
    for a in at:
        g, f = a.get("gemm_ms"), a.get("fused_ms")
        if g is not None and f is not None:
            tot[0] += g
            tot[1] += f
            both += 1
        out.append("| %s | %s | %s | %s | %s | %s | %s | %s |" %
                   (a.get("node"), a.get("op"), md_escape(str(a.get("tensor"))),
                    md_escape(str(a.get("shape"))), fnum(g, "%.4f", "–"), fnum(f, "%.4f", "–"),
                    "%.2f×" % (f / g) if g and f is not None else "–",
                    md_escape(str(a.get("engine") or "-"))))
    out.append("| | all on both (%d) | | | %.3f | %.3f | %s | |" %
               (both, tot[0], tot[1], "%.2f×" % (tot[1] / tot[0]) if tot[0] else "–"))
    out.append("")


def pair_cols(acc, op, a, b, *more):
    """A per-layer row's two timing columns a and b; where both were measured, the node is
    counted in acc[op] = [nodes, sum a, sum b, sums of `more`...]."""
    if a is not None and b is not None:
        s_ = acc.setdefault(op, [0] + [0.0] * (2 + len(more)))
        for k, v in enumerate((1, a, b) + more):
            s_[k] += v
    return " %s | %s |" % (fnum(a, "%.4f"), fnum(b, "%.4f"))


def pair_total(acc):
    """The "all" row's two columns: pair_cols' sums over every op."""
    return " %.3f | %.3f |" % (sum(v[1] for v in acc.values()), sum(v[2] for v in acc.values()))


def conv_layers(out, r):
    """bench's per-conv-layer table: each convolution-like node on the own engine and on cuDNN,
    its TFLOP/s and the same-size cuBLASLt GEMM's; then what each fusion kind removed"""
    cl = r.get("conv_layers")
    if not cl:
        return
    out.append("Per conv layer (--conv-engine %s): each convolution-like node run once eagerly "
               "on each engine (lib: the library side, cuDNN, or cuBLASLt for a 1x1 conv on the gemm "
               "engine); its implicit GEMM (M×N×K) timed as a plain cuBLASLt GEMM of the "
               "same size; wgmma: own on its Hopper kernels (bf16, compute capability 9.0), where "
               "they take the node; the step's engine last.\n" % r.get("conv_engine", "?"))
    # the wgmma columns where any row ran there (reports of older runs: none)
    wg = any(c.get("wgmma_ms") is not None for c in cl)
    # ... and on the resident-halo kernels against per tap, where a halo kernel takes the node
    halo = any(c.get("wgmma_halo_ms") is not None for c in cl)
    # ... and the fp32 3x3 passes as Winograd against the direct tiles, where Winograd takes them
    wino = any(c.get("wino_ms") is not None for c in cl)
    # ... and the direct tiles' products on the tensor cores (3xTF32) against the CUDA cores
    f32tc = any(c.get("f32tc_ms") is not None for c in cl)
    head = ("| node | op | fused | tensor | shape | own ms | lib ms | own/lib | TFLOP/s "
            "| GEMM M×N×K | GEMM TFLOP/s | % of GEMM |")
    rule = "|---:|---|---|---|---|---:|---:|---:|---:|---|---:|---:|"
    if wg:
        head += " wgmma ms | wgmma TFLOP/s | wgmma % of GEMM |"
        rule += "---:|---:|---:|"
    if halo:
        head += " wgmma halo ms | wgmma per-tap ms |"
        rule += "---:|---:|"
    if wino:
        head += " Winograd ms | direct ms |"
        rule += "---:|---:|"
    if f32tc:
        head += " tiles 3xTF32 ms | tiles FMA ms |"
        rule += "---:|---:|"
    out.append(head + " engine |")
    out.append(rule + "---|")
    own = dnn = wg_ms = wg_own = 0.0
    wg_n = 0
    sums = {}  # op -> [nodes, halo ms, per-tap ms]
    wsums = {}  # op -> [nodes, Winograd ms, direct ms, library ms (direct where none)]
    tsums = {}  # op -> [nodes, tiles on the tensor cores ms, on the CUDA cores ms]
    for c in cl:
        o, d = c.get("own_ms"), c.get("cudnn_ms")
        ratio = "%.2f×" % (o / d) if o is not None and d else "–"
        mnk = c.get("gemm_mnk")
        mnk = "×".join(str(v) for v in mnk) if mnk else "–"
        pct = c.get("pct_of_gemm")
        row = ("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" %
               (c.get("node"), c.get("op"), md_escape(str(c.get("fusions", "-"))),
                md_escape(str(c.get("tensor"))), md_escape(str(c.get("shape"))),
                fnum(o, "%.4f"), fnum(d, "%.4f"), ratio, fnum(c.get("tflops"), "%.1f"), mnk,
                fnum(c.get("gemm_tflops"), "%.1f"),
                fnum(pct, "%.0f%%") if pct is not None else "–"))
        if wg:
            w, wp = c.get("wgmma_ms"), c.get("wgmma_pct_of_gemm")
            row += " %s | %s | %s |" % (fnum(w, "%.4f"), fnum(c.get("wgmma_tflops"), "%.1f"),
                                        fnum(wp, "%.0f%%") if wp is not None else "–")
            if w is not None:
                wg_ms += w
                wg_own += o or 0.0
                wg_n += 1
        op = c.get("op")
        if halo:
            row += pair_cols(sums, op, c.get("wgmma_halo_ms"), c.get("wgmma_per_tap_ms"))
        if wino:
            t = c.get("direct_ms")
            row += pair_cols(wsums, op, c.get("wino_ms"), t, d if d is not None else t)
        if f32tc:
            row += pair_cols(tsums, op, c.get("f32tc_ms"), c.get("fma_ms"))
        out.append(row + " %s |" % md_escape(str(c.get("engine") or "-")))
        own += o or 0.0
        dnn += d if d is not None else (o or 0.0)
    out.append("| | all | | | | %.3f | %.3f | %s | | | | |%s%s%s%s |" %
               (own, dnn, "%.2f×" % (own / dnn) if dnn else "–",
                " %.3f | | |" % wg_ms if wg else "",
                pair_total(sums) if halo else "", pair_total(wsums) if wino else "",
                pair_total(tsums) if f32tc else ""))
    if wg:
        out.append("\nThe wgmma kernels take %d of these nodes: %.3f ms on them against %.3f ms "
                   "on own as the step runs them." % (wg_n, wg_ms, wg_own))
    for op in sorted(sums):
        n, h, t = sums[op]
        out.append("On the wgmma kernels' resident halo, %s (%d nodes a halo kernel takes): "
                   "%.3f ms on the halo, %.3f ms per tap." % (op, n, h, t))
    for op in sorted(wsums):
        n, v, t, lib = wsums[op]
        out.append("As Winograd F(2x2, 3x3), %s (%d fp32 3x3 nodes it takes): %.3f ms, against "
                   "%.3f ms on the direct tiles and %.3f ms on the library (the direct tiles where "
                   "it has none)." % (op, n, v, t, lib))
    for op in sorted(tsums):
        n, v, t = tsums[op]
        out.append("On the direct tiles, %s (%d nodes a tile launch takes): %.3f ms with the "
                   "products on the tensor cores (3xTF32), against %.3f ms on the CUDA cores' "
                   "FMAs." % (op, n, v, t))
    out.append("")
    fu = r.get("fusions")
    if fu and fu.get("kinds"):
        out.append("Fusions of this plan: what each kind removes, and the measured time of the "
                   "nodes that carry it (the unfused plan, for comparison: `%s`).\n" %
                   fu.get("unfused_command", "--fuse 0"))
        out.append("| fusion | count | bytes removed | GFLOP removed | fused nodes | their ms |")
        out.append("|---|---:|---:|---:|---:|---:|")
        for k in fu["kinds"]:
            out.append("| %s | %s | %s | %.3f | %s | %s |" %
                       (k.get("kind"), k.get("count"), k.get("bytes_removed"),
                        (k.get("flops_removed") or 0) / 1e9, k.get("fused_nodes"),
                        fnum(k.get("fused_nodes_ms"), "%.3f")))
        out.append("")


def env_section(out, env, recs):
    out.append("| | |")
    out.append("|---|---|")
    keys = [("date", "date"), ("time_utc", "time (UTC)"), ("gpu", "GPU"),
            ("gpu_memory", "GPU memory"), ("max_sm_clock", "max SM clock"),
            ("power_limit", "power limit"), ("driver", "driver"),
            ("driver_cuda", "driver CUDA version"), ("nvcc", "nvcc"), ("torch", "torch"),
            ("torch_cuda", "torch CUDA"), ("cudnn", "cuDNN"), ("triton", "triton present"),
            ("python", "python"), ("commit", "commit"), ("commit_source", "commit from"),
            ("dirty_files", "modified tracked files"),
            ("cmake", "cmake"), ("cc", "C compiler"), ("cpu", "CPU"), ("cpu_count", "CPU cores"),
            ("host", "host"), ("budget_s", "time budget (s)")]
    for k, name in keys:
        if env.get(k) is not None:
            out.append("| %s | %s |" % (name, md_escape(env[k])))
    for r in recs.values():
        if r["impl"] == "stepgraph" and ok(r):
            e = r["result"].get("env")
            out.append("| stepgraph backend | `%s` |" %
                       md_escape(json.dumps(e) if not isinstance(e, str) else e))
            out.append("| stepgraph build | %s |" % md_escape(r["result"].get("build", "?")))
            break
    out.append("")


def raw_logs(out, recs, build_logs):
    for b in build_logs:
        out.append("<details><summary>build log (last %d lines)</summary>\n" % LOG_TAIL_LINES)
        out.append("```")
        out.extend(tail(b, LOG_TAIL_LINES))
        out.append("```\n</details>\n")
    for name in sorted(recs, key=lambda n: (recs[n]["row"], n)):
        r = recs[name]
        out.append("<details><summary>%s — %s (%s s)</summary>\n" %
                   (name, md_escape(status_text(r)), fnum(r.get("seconds"), "%.0f", "?")))
        out.append("```")
        if r.get("cmd"):
            out.append("$ " + r["cmd"])
        if r.get("result") is not None:
            out.append(json.dumps(r["result"]))
        if r.get("log"):
            lg = tail(os.path.join(r["_dir"], "jobs", r["log"]), LOG_TAIL_LINES)
            if lg:
                out.append("--- stderr (last %d lines) ---" % LOG_TAIL_LINES)
                out.extend(lg)
        out.append("```\n</details>\n")


def cmd_report(a):
    recs, env, build_logs = load_dirs(a.dirs)
    rows = group_rows(recs)
    out = []
    gpu = env.get("gpu") or "unknown GPU"
    out.append("# stepgraph vs PyTorch — %s, %s\n" % (gpu, env.get("date", "?")))
    out.append("Generated by `tools/bench.sh` (issue 7). stepgraph: `build/bench --json` "
               "(the whole training step replayed as one CUDA graph, CUDA events around each "
               "replay). PyTorch: `tools/torch_ref/bench.py` (bf16 autocast, channels_last, "
               "fused AdamW, cudnn.benchmark; one process per mode). Every number below was "
               "measured in this run; anything that did not run says so.\n")
    n_ok = sum(1 for r in recs.values() if ok(r))
    out.append("Jobs: %d recorded, %d finished, %d failed/timed out/skipped.\n" %
               (len(recs), n_ok, len(recs) - n_ok))
    out.append("## Targets\n")
    out.append("| what | target | measured | verdict |")
    out.append("|---|---|---|---|")
    tg = targets(rows)
    for what, target, measured, v in tg:
        out.append("| %s | %s | %s | %s |" % (md_escape(what), target, md_escape(measured), v))
    out.append("")
    out.append("## Side by side\n")
    order = [CIFAR_BIG, CIFAR_SMALL, ADM]
    keys = [k for k in order if k in rows] + sorted(k for k in rows if k not in order)
    for k in keys:
        side_by_side(out, k, rows[k])
    out.append("## Per-op breakdown (stepgraph)\n")
    for k in keys:
        sg = sg_of(rows[k])
        if sg:
            breakdown(out, k, sg)
    out.append("## Environment\n")
    env_section(out, env, recs)
    out.append("## Raw logs\n")
    raw_logs(out, recs, build_logs)
    text = "\n".join(out) + "\n"
    for p in [a.out] + (a.copy or []):
        d = os.path.dirname(os.path.abspath(p))
        os.makedirs(d, exist_ok=True)
        with open(p, "w") as f:
            f.write(text)
    print("targets:")
    for what, target, measured, v in tg:
        print("  %-62s %-9s %-10s %s" % (what, target, v.replace("*", ""), measured))
    return 0


def cmd_name(a):
    env = {}
    try:
        with open(os.path.join(a.dir, "env.json")) as f:
            env = json.load(f)
    except (OSError, ValueError):
        pass
    date = env.get("date") or datetime.date.today().isoformat()
    print("%s-%s.md" % (date, slug(env.get("gpu"))))
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="sub", required=True)
    r = sub.add_parser("record")
    r.add_argument("--out", required=True)
    r.add_argument("--job", required=True)
    r.add_argument("--row", required=True)
    r.add_argument("--impl", choices=["stepgraph", "torch"], required=True)
    r.add_argument("--model", required=True)
    r.add_argument("--batch", type=int, required=True)
    r.add_argument("--precision", required=True)
    r.add_argument("--mode", default="")
    r.add_argument("--tf32", default="")
    r.add_argument("--status", choices=["ok", "failed", "timeout", "skipped"], required=True)
    r.add_argument("--reason", default="")
    r.add_argument("--rc", type=int, default=None)
    r.add_argument("--seconds", type=float, default=None)
    r.add_argument("--stdout", default=None)
    r.add_argument("--log", default=None)
    r.add_argument("--cmd", dest="command_line", default="")
    r.add_argument("--note", default="", help="a few words the table shows after the mode")
    e = sub.add_parser("env")
    e.add_argument("--out", required=True)
    e.add_argument("--budget", type=float, default=None)
    e.add_argument("--python", default=None)
    e.add_argument("--repo", default=None)
    e.add_argument("--commit", default=None, help="the commit, where there is no git checkout")
    e.add_argument("--gpu-name", default=None, help="override nvidia-smi's name")
    p = sub.add_parser("report")
    p.add_argument("--out", required=True)
    p.add_argument("--copy", action="append")
    p.add_argument("dirs", nargs="+")
    n = sub.add_parser("name")
    n.add_argument("dir")
    a = ap.parse_args(argv)
    return {"record": cmd_record, "env": cmd_env, "report": cmd_report, "name": cmd_name}[a.sub](a)


if __name__ == "__main__":
    sys.exit(main())
