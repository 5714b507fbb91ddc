#!/usr/bin/env python3
"""ckpt_export_check.py — checks `ckpt export --safetensors` against the checkpoint itself.

An independent reader: the safetensors file is parsed here with struct/json only, and the
expected tensors are built from `ckpt ls --json` and `ckpt dump --json` by applying the
diffusers layout rules in Python (docs/model.md):
  4-D "*.weight"       [Co][K][K][Ci] -> [Co][Ci][K][K]
  "*.to_qkv.weight"    [3C][1][1][C]  -> to_q/to_k/to_v.weight [C][C], rows in that order
  "*.to_qkv.bias"      [3C]           -> to_q/to_k/to_v.bias [C]
  "*.to_out.0.weight"  [C][1][1][C]   -> [C][C]
Every exported tensor must match bit for bit; names, shapes, dtypes, offsets and the header
format (8-byte length, JSON, 8-byte alignment, contiguous data) are checked too.

usage: ckpt_export_check.py CKPT_BINARY FIXTURE_DIR
"""
import json
import os
import struct
import subprocess
import sys


def run(*args):
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"FAIL: {' '.join(args)} exited {p.returncode}: {p.stderr.strip()}")
    return p.stdout


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (hlen,) = struct.unpack_from("<Q", blob, 0)
    assert (8 + hlen) % 8 == 0, "header not padded to 8 bytes"
    header = json.loads(blob[8:8 + hlen].decode("utf-8"))
    data = blob[8 + hlen:]
    meta = header.pop("__metadata__", None)
    assert meta is not None and meta.get("format") == "pt", f"bad __metadata__ {meta}"
    assert all(isinstance(v, str) for v in meta.values()), "metadata values must be strings"
    spans = sorted((v["data_offsets"][0], v["data_offsets"][1], k) for k, v in header.items())
    pos = 0
    for b, e, k in spans:
        assert b == pos, f"{k}: data does not start where the previous tensor ended"
        pos = e
    assert pos == len(data), f"data is {len(data)} bytes, tensors cover {pos}"
    tensors = {}
    for k, v in header.items():
        b, e = v["data_offsets"]
        assert v["dtype"] == "F32", f"{k}: dtype {v['dtype']}"
        n = 1
        for s in v["shape"]:
            n *= s
        assert e - b == 4 * n, f"{k}: {e - b} bytes for shape {v['shape']}"
        tensors[k] = (tuple(v["shape"]), data[b:e])
    return meta, tensors


def f32_bytes(values):
    out = bytearray()
    for v in values:
        if isinstance(v, str):  # "NaN", "Infinity", "-Infinity"
            v = float(v.replace("Infinity", "inf"))
        out += struct.pack("<f", v)
    return bytes(out)


def expected_tensors(binary, path, ema):
    role = "ema" if ema else "param"
    listing = json.loads(run(binary, "ls", "--json", path))
    expect = {}
    for t in listing:
        if t["role"] != role:
            continue
        name = t["name"][4:] if ema and t["name"].startswith("ema:") else t["name"]
        shape = t["shape"]
        dump = json.loads(run(binary, "dump", "--json", path, t["name"]))
        assert dump["shape"] == shape and len(dump["values"]) == t.get("numel", len(dump["values"]))
        raw = f32_bytes(dump["values"])
        n = len(raw) // 4
        if name.endswith(".to_qkv.weight") or name.endswith(".to_qkv.bias"):
            stem, kind = name.rsplit(".to_qkv.", 1)
            part = n // 3
            for k, q in enumerate(("to_q", "to_k", "to_v")):
                out_shape = (shape[0] // 3, shape[-1]) if kind == "weight" else (shape[0] // 3,)
                expect[f"{stem}.{q}.{kind}"] = (out_shape, raw[4 * k * part:4 * (k + 1) * part])
        elif name.endswith(".to_out.0.weight") and len(shape) == 4:
            expect[name] = ((shape[0], shape[3]), raw)
        elif len(shape) == 4 and name.endswith(".weight"):
            co, kh, kw, ci = shape
            out = bytearray(len(raw))
            for o in range(co):
                for y in range(kh):
                    for x in range(kw):
                        for i in range(ci):
                            src = 4 * (((o * kh + y) * kw + x) * ci + i)
                            dst = 4 * (((o * ci + i) * kh + y) * kw + x)
                            out[dst:dst + 4] = raw[src:src + 4]
            expect[name] = ((co, ci, kh, kw), bytes(out))
        else:
            expect[name] = (tuple(shape), raw)
    return expect


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    binary, fixture = sys.argv[1], sys.argv[2]
    ckpt = os.path.join(fixture, "a.sgck")
    failures = 0
    for ema in (False, True):
        out = os.path.join(fixture, "export_ema.safetensors" if ema else "export.safetensors")
        run(binary, "export", ckpt, "--safetensors", out, *(["--ema"] if ema else []))
        meta, got = read_safetensors(out)
        want = expected_tensors(binary, ckpt, ema)
        assert meta["weights"] == ("ema" if ema else "param"), meta
        if set(got) != set(want):
            print(f"FAIL names: missing {sorted(set(want) - set(got))[:5]}, "
                  f"extra {sorted(set(got) - set(want))[:5]}")
            failures += 1
        for name in sorted(set(got) & set(want)):
            if got[name][0] != want[name][0]:
                print(f"FAIL {name}: shape {got[name][0]} != {want[name][0]}")
                failures += 1
            elif got[name][1] != want[name][1]:
                print(f"FAIL {name}: values differ")
                failures += 1
        # the diffusers names and layouts we rely on
        checks = {
            "conv_out.weight": (3, 32, 3, 3),
            "down_blocks.1.attentions.0.to_q.weight": (64, 64),
            "down_blocks.1.attentions.0.to_v.bias": (64,),
            "mid_block.attentions.0.to_out.0.weight": (64, 64),
            "down_blocks.1.resnets.0.conv_shortcut.weight": (64, 32, 1, 1),
            "time_embedding.linear_1.weight": (128, 32),
            "up_blocks.0.upsamplers.0.conv.weight": (64, 64, 3, 3),
        }
        for name, shape in checks.items():
            if name not in got or got[name][0] != shape:
                print(f"FAIL {name}: expected shape {shape}, got {got.get(name, (None,))[0]}")
                failures += 1
        assert not any("to_qkv" in n or n.startswith("ema:") for n in got), "unconverted names"
        print(f"{'ema' if ema else 'param'}: {len(got)} tensors checked")
    if failures:
        sys.exit(f"{failures} failures")
    print("OK")


if __name__ == "__main__":
    main()
