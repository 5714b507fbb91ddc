#!/bin/sh
# make_weights_seeds.sh BUILD OUTDIR — seeds for the weights fuzzer (weights_fuzz_target.c):
# two tiny models (a few thousand parameters, so that the inputs stay small) trained one step and exported by `ckpt export --diffusers`, each packed as
#   config.json \0 scheduler_config.json \0 diffusion_pytorch_model.safetensors
# in the forms a downloaded folder may take: F32 as exported, F16 with the deprecated attention
# names (query, key, value, proj_attn: google/ddpm-cifar10-32's), BF16 without a scheduler
# file, and the config alone. Needs python3 (the standard library only).
set -eu
BUILD=$1
OUT=$2
mkdir -p "$OUT"
work=$(mktemp -d "${TMPDIR:-/tmp}/sg_wseeds.XXXXXX")
trap 'rm -rf "$work"' EXIT
tiny="--model unet_tiny --steps 1 --batch 2 --data synthetic --sample-every 0"
# shellcheck disable=SC2086
"$BUILD/train" $tiny --ch 4 --ch-mult 1,1 --res-blocks 1 --attn-res 2 --heads 1 --groups 2 \
    --img 4 --in-ch 1 --out "$work/r1" >"$work/log" 2>&1 || { cat "$work/log"; exit 1; }
# shellcheck disable=SC2086
"$BUILD/train" $tiny --ch 4 --ch-mult 1,1,1 --res-blocks 2 --attn-res 2 --head-ch 4 --groups 4 \
    --img 4 --in-ch 3 --down-pad same --out "$work/r2" >"$work/log" 2>&1 || { cat "$work/log"; exit 1; }
"$BUILD/ckpt" export "$work/r1/ckpt_00000001.sgck" --diffusers "$work/d1" >/dev/null
"$BUILD/ckpt" export "$work/r2/ckpt_00000001.sgck" --diffusers "$work/d2" --raw >/dev/null
python3 - "$work" "$OUT" <<'EOF'
import json, struct, sys
work, out = sys.argv[1], sys.argv[2]

def read(path):
    with open(path, "rb") as f:
        return f.read()

def st_convert(blob, dtype, legacy):
    """The safetensors file with every tensor in dtype (F32, F16, BF16), optionally renamed."""
    n = struct.unpack("<Q", blob[:8])[0]
    hdr = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    meta = hdr.pop("__metadata__", None)
    names = {"to_q.": "query.", "to_k.": "key.", "to_v.": "value.", "to_out.0.": "proj_attn."}
    new_hdr, chunks, off = {}, [], 0
    for name, e in sorted(hdr.items()):
        b, en = e["data_offsets"]
        vals = struct.unpack("<%df" % ((en - b) // 4), data[b:en])
        if dtype == "F32":
            raw = data[b:en]
        elif dtype == "F16":
            raw = struct.pack("<%de" % len(vals), *vals)
        else:  # BF16: the upper half of each float (truncation is enough for a seed)
            raw = b"".join(struct.pack("<f", v)[2:] for v in vals)
        if legacy:
            for a, z in names.items():
                name = name.replace(".attentions.0." + a, ".attentions.0." + z)
                name = name.replace(".attentions.1." + a, ".attentions.1." + z)
        new_hdr[name] = {"dtype": dtype, "shape": e["shape"],
                         "data_offsets": [off, off + len(raw)]}
        chunks.append(raw)
        off += len(raw)
    if meta is not None:
        new_hdr["__metadata__"] = meta
    text = json.dumps(new_hdr, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(chunks)

for d in ("d1", "d2"):
    cfg = read("%s/%s/config.json" % (work, d))
    sched = read("%s/%s/scheduler_config.json" % (work, d))
    st = read("%s/%s/diffusion_pytorch_model.safetensors" % (work, d))
    seeds = {
        "f32": cfg + b"\0" + sched + b"\0" + st,
        "f16-legacy": cfg + b"\0" + sched + b"\0" + st_convert(st, "F16", True),
        "config-only": cfg,
    }
    if d == "d1":
        seeds["bf16-no-scheduler"] = cfg + b"\0\0" + st_convert(st, "BF16", False)
    for k, v in seeds.items():
        with open("%s/seed-%s-%s" % (out, d, k), "wb") as f:
            f.write(v)
EOF
echo "wrote the weights seeds to $OUT"
