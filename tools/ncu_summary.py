#!/usr/bin/env python3
"""ncu_summary.py -- one training step's kernels, from Nsight Compute's raw CSV page, as markdown.

    python3 tools/ncu_summary.py RAW.csv [--title TEXT] [--top N]

RAW.csv is what `ncu --csv --page raw --log-file RAW.csv` wrote for one step
(tools/gpu_profile.sh: the first step alone, SG_PROFILE_FIRST_STEP=1). Read: the header row
(the one naming "Kernel Name"), the units row under it when there is one, then one row per
kernel. Used: gpu__time_duration.sum (any time unit), dram__bytes_read.sum and
dram__bytes_write.sum (any byte unit), the SpeedOfLight percentages
(dram__throughput..., sm__throughput...), Grid Size and Block Size; a column that is missing
prints as '-'.

Printed: the step's kernel count and summed kernel time, then per kernel family (the name up
to its template or parameter list) the count, time, share, DRAM bytes, achieved GB/s and the
time-weighted mean % of DRAM and SM peak; then the N longest kernels. The durations are ncu's
(each kernel alone, serialised): their sum is not the replayed step's time, but it ranks where
the time goes and says which kernels run far from the memory or compute roofline.
"""
import argparse
import csv
import re
import sys

TIME = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3,
        "second": 1e6, "s": 1e6}
BYTES = {"byte": 1.0, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "tbyte": 1e12,
         "kibyte": 1024.0, "mibyte": 1024.0**2, "gibyte": 1024.0**3}


def read_rows(path):
    with open(path, newline="", errors="replace") as f:
        rows = list(csv.reader(f))
    head = next((i for i, r in enumerate(rows) if "Kernel Name" in r), None)
    if head is None:
        sys.exit(f"ncu_summary: {path}: no header row naming 'Kernel Name' (not ncu --csv "
                 f"--page raw output, or no kernel was profiled)")
    cols = rows[head]
    units = {}
    body = rows[head + 1:]
    # the units row: empty where a column has no unit, and no kernel name
    if body and body[0][cols.index("Kernel Name")] == "":
        units = dict(zip(cols, body[0]))
        body = body[1:]
    return cols, units, [r for r in body if len(r) == len(cols)]


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def column(cols, *keys):
    for k in keys:
        for c in cols:
            if c == k or c.startswith(k):
                return c
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--title", default="ncu: one training step")
    ap.add_argument("--top", type=int, default=30)
    a = ap.parse_args()
    cols, units, rows = read_rows(a.csv)
    c_name = "Kernel Name"
    c_time = column(cols, "gpu__time_duration.sum")
    c_rd, c_wr = column(cols, "dram__bytes_read.sum"), column(cols, "dram__bytes_write.sum")
    c_dram = column(cols, "dram__throughput.avg.pct_of_peak_sustained_elapsed",
                    "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed")
    c_sm = column(cols, "sm__throughput.avg.pct_of_peak_sustained_elapsed")
    c_grid, c_block = column(cols, "Grid Size"), column(cols, "Block Size")
    if not c_time:
        sys.exit(f"ncu_summary: {a.csv}: no gpu__time_duration.sum column")

    def scaled(r, c, table, default):
        if not c:
            return None
        v = number(r[cols.index(c)])
        u = units.get(c, "").strip().lower()
        return None if v is None else v * table.get(u, default)

    kernels = []
    for r in rows:
        name = r[cols.index(c_name)]
        us = scaled(r, c_time, TIME, 1e-3)  # no unit row: ncu's base unit, nanoseconds
        if us is None:
            continue
        rd, wr = scaled(r, c_rd, BYTES, 1.0), scaled(r, c_wr, BYTES, 1.0)
        kernels.append({
            "name": name,
            "family": re.split(r"[<(]", name, maxsplit=1)[0].strip() or name,
            "us": us,
            "bytes": None if rd is None or wr is None else rd + wr,
            "dram": scaled(r, c_dram, {}, 1.0),
            "sm": scaled(r, c_sm, {}, 1.0),
            "grid": r[cols.index(c_grid)] if c_grid else "-",
            "block": r[cols.index(c_block)] if c_block else "-",
        })
    if not kernels:
        sys.exit(f"ncu_summary: {a.csv}: no kernel rows with a duration")
    total = sum(k["us"] for k in kernels)

    def fmt(v, f="{:.1f}"):
        return "-" if v is None else f.format(v)

    def wmean(ks, key):
        w = [(k[key], k["us"]) for k in ks if k[key] is not None]
        t = sum(u for _, u in w)
        return sum(v * u for v, u in w) / t if t > 0 else None

    print(f"# {a.title}\n")
    print(f"{len(kernels)} kernels, {total / 1e3:.3f} ms summed (ncu's per-kernel durations: "
          f"each kernel alone; not the replayed step's time).\n")
    fams = {}
    for k in kernels:
        fams.setdefault(k["family"], []).append(k)
    print("| kernel family | kernels | ms | % | DRAM MB | GB/s | DRAM % peak | SM % peak |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for fam, ks in sorted(fams.items(), key=lambda kv: -sum(k["us"] for k in kv[1])):
        us = sum(k["us"] for k in ks)
        b = None if any(k["bytes"] is None for k in ks) else sum(k["bytes"] for k in ks)
        print(f"| `{fam}` | {len(ks)} | {us / 1e3:.3f} | {100 * us / total:.1f} | "
              f"{fmt(None if b is None else b / 1e6)} | "
              f"{fmt(None if b is None or us <= 0 else b / us / 1e3, '{:.0f}')} | "
              f"{fmt(wmean(ks, 'dram'))} | {fmt(wmean(ks, 'sm'))} |")
    print(f"\nThe {min(a.top, len(kernels))} longest kernels (launch order # in the step):\n")
    print("| # | kernel | µs | grid | block | DRAM MB | GB/s | DRAM % | SM % |")
    print("|---:|---|---:|---|---|---:|---:|---:|---:|")
    order = sorted(range(len(kernels)), key=lambda i: -kernels[i]["us"])[:a.top]
    for i in order:
        k = kernels[i]
        name = k["name"] if len(k["name"]) <= 80 else k["name"][:77] + "..."
        print(f"| {i} | `{name}` | {k['us']:.1f} | {k['grid']} | {k['block']} | "
              f"{fmt(None if k['bytes'] is None else k['bytes'] / 1e6, '{:.2f}')} | "
              f"{fmt(None if k['bytes'] is None or k['us'] <= 0 else k['bytes'] / k['us'] / 1e3, '{:.0f}')} | "
              f"{fmt(k['dram'])} | {fmt(k['sm'])} |")


if __name__ == "__main__":
    main()
