#!/usr/bin/env python3
"""Self-test of tools/torch_ref (the PyTorch oracle of stepgraph).

Checks: parameter counts of the named configs (unet_cifar = 35,746,307 exactly); parameter
names; stepgraph layout save/load round trip; attention and timestep embedding against
loop-level references; DDPM abar; the oracle in float32 vs float64; finite differences of the
loss (float64, through the stepgraph-layout files) vs the oracle's gradients; the hand AdamW
vs torch.optim.AdamW; the oracle CLI; bench.py's CPU smoke run.

Run: /usr/bin/python3 tests/torch_ref_selftest.py [--skip-bench]. The last line is
"N passed, N failed"; the exit status is non-zero on any failure.
"""

import json
import math
import os
import re
import subprocess
import sys
import tempfile
import traceback

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REF = os.path.join(os.path.dirname(HERE), "tools", "torch_ref")
sys.path.insert(0, REF)
import model as M  # noqa: E402
import oracle as O  # noqa: E402

PASSED = 0
FAILED = 0


def check(name, cond, detail=""):
    global PASSED, FAILED
    detail = " ".join(str(detail).split())
    if cond:
        PASSED += 1
        print("PASS %s %s" % (name, detail))
    else:
        FAILED += 1
        print("FAIL %s %s" % (name, detail))


def test(fn):
    def wrapper():
        global FAILED
        try:
            fn()
        except Exception:
            FAILED += 1
            print("FAIL %s raised:" % fn.__name__)
            traceback.print_exc(file=sys.stdout)
    wrapper.__name__ = fn.__name__
    return wrapper


def rel_err(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


# --------------------------------------------------------------------------------------------

@test
def test_param_counts():
    counts = {n: M.param_count(n) for n in M.CONFIGS}
    for n, c in counts.items():
        print("     %-12s %12d parameters" % (n, c))
    check("param_count unet_cifar == 35746307", counts["unet_cifar"] == 35746307,
          str(counts["unet_cifar"]))
    # independent closed-form count for unet_cifar-like configs (resample convs, 1 head)
    for n in ("unet_cifar", "unet_tiny", "unet_fmnist", "unet_adm64"):
        check("param_count %s closed form" % n, counts[n] == closed_form_count(M.CONFIGS[n]))


def closed_form_count(c):
    c = M.normalize_config(c)
    ch, mult, nrb = c["ch"], c["ch_mult"], c["nrb"]
    T = 4 * ch
    conv = lambda ci, co, k: co * ci * k * k + co  # noqa: E731
    gn = lambda C: 2 * C  # noqa: E731

    def res(ci, co):
        n = gn(ci) + conv(ci, co, 3) + T * co + co + gn(co) + conv(co, co, 3)
        return n + (conv(ci, co, 1) if ci != co else 0)

    def attn(C):
        return gn(C) + conv(C, 3 * C, 1) + conv(C, C, 1)

    n = ch * T + T + T * T + T + conv(c["in_ch"], ch, 3)
    skips = [ch]
    cur = ch
    r = c["img"]
    for i, m in enumerate(mult):
        for _ in range(nrb):
            n += res(cur, ch * m)
            cur = ch * m
            if r in c["attn_res"]:
                n += attn(cur)
            skips.append(cur)
        if i < len(mult) - 1:
            n += conv(cur, cur, 3) if c["resample_conv"] else 0
            skips.append(cur)
            r //= 2
    n += 2 * res(cur, cur) + attn(cur)
    for i in reversed(range(len(mult))):
        for _ in range(nrb + 1):
            n += res(cur + skips.pop(), ch * mult[i])
            cur = ch * mult[i]
            if r in c["attn_res"]:
                n += attn(cur)
        if i > 0:
            n += conv(cur, cur, 3) if c["resample_conv"] else 0
            r *= 2
    return n + gn(cur) + conv(cur, c["in_ch"], 3)


@test
def test_names():
    m = M.UNet("unet_cifar")
    keys = list(m.state_dict().keys())
    pat = re.compile(
        r"^(time_embedding\.linear_[12]|conv_in|conv_norm_out|conv_out|"
        r"(down_blocks|up_blocks)\.\d+\.resnets\.\d+\.(norm1|conv1|time_emb_proj|norm2|conv2|"
        r"conv_shortcut)|(down_blocks|up_blocks)\.\d+\.attentions\.\d+\.(group_norm|to_qkv|"
        r"to_out\.0)|down_blocks\.\d+\.downsamplers\.0\.conv|up_blocks\.\d+\.upsamplers\.0\.conv|"
        r"mid_block\.resnets\.[01]\.(norm1|conv1|time_emb_proj|norm2|conv2)|"
        r"mid_block\.attentions\.0\.(group_norm|to_qkv|to_out\.0))\.(weight|bias)$")
    bad = [k for k in keys if not pat.match(k)]
    check("state_dict keys follow docs/model.md", not bad, str(bad[:5]))
    sd = m.state_dict()
    expect = {
        "time_embedding.linear_1.weight": (512, 128),
        "time_embedding.linear_2.weight": (512, 512),
        "down_blocks.1.attentions.0.to_qkv.weight": (768, 256, 1, 1),
        "down_blocks.1.attentions.1.to_out.0.weight": (256, 256, 1, 1),
        "down_blocks.0.downsamplers.0.conv.weight": (128, 128, 3, 3),
        "up_blocks.0.resnets.0.conv1.weight": (256, 512, 3, 3),
        "up_blocks.2.attentions.2.to_qkv.weight": (768, 256, 1, 1),
        "up_blocks.3.resnets.2.conv_shortcut.weight": (128, 256, 1, 1),
        "up_blocks.2.upsamplers.0.conv.weight": (256, 256, 3, 3),
        "mid_block.attentions.0.group_norm.weight": (256,),
        "conv_out.weight": (3, 128, 3, 3),
    }
    for k, s in expect.items():
        check("shape %s" % k, k in sd and tuple(sd[k].shape) == s,
              str(tuple(sd[k].shape)) if k in sd else "missing")
    check("no upsampler in up_blocks.3", not any(k.startswith("up_blocks.3.upsamplers")
                                                 for k in keys))
    check("no downsampler in down_blocks.3", not any(k.startswith("down_blocks.3.downsamplers")
                                                     for k in keys))
    check("attention only at 16x16 (down_blocks.1, up_blocks.2) + mid",
          sorted({k.split(".attentions")[0] for k in keys if ".attentions." in k}) ==
          ["down_blocks.1", "mid_block", "up_blocks.2"])
    m2 = M.UNet("unet_adm64")
    heads = {n: a.heads for n, a in m2.named_modules() if isinstance(a, M.AttnBlock)}
    check("adm64 heads = C/32", heads.get("down_blocks.2.attentions.0") == 6 and
          heads.get("down_blocks.3.attentions.0") == 8 and
          heads.get("mid_block.attentions.0") == 8, str(heads))
    check("adm64 no resample convs", not any("samplers" in k for k in m2.state_dict()))


def random_model(cfg, seed, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    m = M.UNet(cfg).to(dtype)
    m.reset_parameters(generator=g)
    with torch.no_grad():
        for n, p in m.named_parameters():
            if ".norm" in n or "group_norm" in n or "conv_norm_out" in n:
                # non-trivial GN affine parameters so their gradients mean something
                if n.endswith("weight"):
                    p.copy_(1.0 + 0.2 * (torch.rand(p.shape, generator=g, dtype=dtype) - 0.5))
                else:
                    p.copy_(0.2 * (torch.rand(p.shape, generator=g, dtype=dtype) - 0.5))
    return m


@test
def test_layout_roundtrip():
    m = random_model("unet_tiny", 1, torch.float32)
    with tempfile.TemporaryDirectory() as d:
        M.save_params(m, d)
        a = np.load(os.path.join(d, "params", "down_blocks.0.resnets.0.conv1.weight.npy"))
        w = m.down_blocks[0].resnets[0].conv1.weight.detach().numpy()   # OIHW
        check("conv saved as [Co][K][K][Ci]", a.shape == (32, 3, 3, 32) and
              np.array_equal(a[5, 1, 2, 7], w[5, 7, 1, 2]) and
              np.array_equal(a, w.transpose(0, 2, 3, 1)))
        q = np.load(os.path.join(d, "params", "down_blocks.1.attentions.0.to_qkv.weight.npy"))
        check("1x1 conv saved as [Co][1][1][Ci]", q.shape == (192, 1, 1, 64))
        li = np.load(os.path.join(d, "params", "time_embedding.linear_1.weight.npy"))
        check("linear saved as [out][in]", li.shape == (128, 32))
        m2 = M.UNet("unet_tiny")
        M.load_stepgraph_params(m2, d)
        same = all(torch.equal(p, q_) for p, q_ in zip(m.parameters(), m2.parameters()))
        check("save/load round trip is exact", same)
        # a 1x1 conv given as [Co][Ci] is accepted too
        np.save(os.path.join(d, "params", "down_blocks.1.attentions.0.to_qkv.weight.npy"),
                q.reshape(192, 64))
        m3 = M.UNet("unet_tiny")
        M.load_stepgraph_params(m3, d)
        check("1x1 conv as [Co][Ci] accepted",
              torch.equal(m3.down_blocks[1].attentions[0].to_qkv.weight,
                          m.down_blocks[1].attentions[0].to_qkv.weight))
        os.remove(os.path.join(d, "params", "conv_out.bias.npy"))
        try:
            M.load_stepgraph_params(M.UNet("unet_tiny"), d)
            check("missing tensor rejected", False)
        except KeyError:
            check("missing tensor rejected", True)


@test
def test_attention_reference():
    torch.manual_seed(0)
    for heads in (1, 2, 4):
        C, H, W, N = 16, 4, 3, 2
        blk = M.AttnBlock(C, heads, 4).double()
        x = torch.randn(N, C, H, W, dtype=torch.float64)
        y = blk(x).detach().numpy()
        # loop reference in NHWC: qkv[n, l, 3C]
        gn = blk.group_norm(x).detach().numpy()
        xn = gn.transpose(0, 2, 3, 1).reshape(N, H * W, C)
        wq = blk.to_qkv.weight.detach().numpy()[:, :, 0, 0]
        bq = blk.to_qkv.bias.detach().numpy()
        qkv = xn @ wq.T + bq
        D = C // heads
        a = np.zeros((N, H * W, C))
        for n in range(N):
            for h in range(heads):
                q = qkv[n, :, h * D:(h + 1) * D]
                k = qkv[n, :, C + h * D:C + (h + 1) * D]
                v = qkv[n, :, 2 * C + h * D:2 * C + (h + 1) * D]
                s = q @ k.T / math.sqrt(D)
                s = np.exp(s - s.max(axis=1, keepdims=True))
                s /= s.sum(axis=1, keepdims=True)
                a[n, :, h * D:(h + 1) * D] = s @ v
        wo = blk.to_out[0].weight.detach().numpy()[:, :, 0, 0]
        bo = blk.to_out[0].bias.detach().numpy()
        ref = x.numpy().transpose(0, 2, 3, 1).reshape(N, H * W, C) + a @ wo.T + bo
        ref = ref.reshape(N, H, W, C).transpose(0, 3, 1, 2)
        check("attention heads=%d vs loop reference" % heads, rel_err(y, ref) < 1e-12,
              "%.2e" % rel_err(y, ref))
        if hasattr(torch.nn.functional, "scaled_dot_product_attention"):
            blk.use_sdpa = True
            y2 = blk(x).detach().numpy()
            check("attention heads=%d sdpa vs math" % heads, rel_err(y2, y) < 1e-10)


@test
def test_timestep_embedding():
    t = torch.tensor([0, 1, 17, 999])
    e = M.timestep_embedding(t, 32, torch.float64).numpy()
    half = 16
    ref = np.zeros((4, 32))
    for n, tv in enumerate([0, 1, 17, 999]):
        for i in range(half):
            f = math.exp(-math.log(10000.0) * i / (half - 1))
            ref[n, i] = math.sin(tv * f)
            ref[n, half + i] = math.cos(tv * f)
    check("timestep embedding formula", np.max(np.abs(e - ref)) < 1e-12)


@test
def test_abar():
    T, b1, bT = 1000, 1e-4, 0.02
    ab = O.ddpm_abar(T, b1, bT)
    for t in (0, 1, 500, 999):
        p = 1.0
        for i in range(t + 1):
            p *= 1.0 - (b1 + (bT - b1) * i / (T - 1))
        check("abar[%d]" % t, ab[t] == p, "%.17g vs %.17g" % (ab[t], p))
    check("abar[999] ~ 4.04e-5", abs(ab[999] - 4.0358e-5) < 1e-8, "%.6g" % ab[999])


def make_case(d, cfg_name="unet_tiny", N=3, seed=7, step=0, warmup=5, wd=0.0, clip=1.0,
              with_state=False, extra=None):
    c = dict(M.CONFIGS[cfg_name])
    c.update(extra or {})
    return O.make_case(d, c, N=N, seed=seed, with_state=with_state,
                       train=dict(step=step, warmup=warmup, wd=wd, clip=clip))


OUT_KEYS_SMALL = ("pred", "xt", "loss", "grad_norm", "clip_scale", "lr")
OUT_DIRS = ("grads", "params_after", "m_after", "v_after", "ema_after")


def load_out(out):
    r = {k: np.load(os.path.join(out, k + ".npy")) for k in OUT_KEYS_SMALL}
    for sub in OUT_DIRS:
        r[sub] = {f[:-4]: np.load(os.path.join(out, sub, f))
                  for f in os.listdir(os.path.join(out, sub))}
    return r


def compare_f32_f64(tag, d, step, lr_expect):
    O.run_dir(d, os.path.join(d, "o32"), "float32", quiet=True)
    O.run_dir(d, os.path.join(d, "o64"), "float64", keep_dtype=True, quiet=True)
    a = load_out(os.path.join(d, "o32"))
    b = load_out(os.path.join(d, "o64"))
    check("%s: output dtypes/shapes" % tag,
          a["pred"].dtype == np.float32 and b["pred"].dtype == np.float64 and
          a["loss"].shape == (1,) and a["pred"].shape == np.load(os.path.join(d, "x0.npy")).shape)
    check("%s: xt f32 vs f64" % tag, rel_err(a["xt"], b["xt"]) < 1e-6,
          "%.2e" % rel_err(a["xt"], b["xt"]))
    check("%s: pred f32 vs f64" % tag, rel_err(a["pred"], b["pred"]) < 1e-4,
          "%.2e" % rel_err(a["pred"], b["pred"]))
    check("%s: loss f32 vs f64" % tag, rel_err(a["loss"], b["loss"]) < 1e-5,
          "%.9g vs %.12g" % (a["loss"][0], b["loss"][0]))
    check("%s: grad_norm f32 vs f64" % tag, rel_err(a["grad_norm"], b["grad_norm"]) < 1e-4,
          "%.9g vs %.12g" % (a["grad_norm"][0], b["grad_norm"][0]))
    worst = max(rel_err(a["grads"][n], b["grads"][n]) for n in b["grads"])
    check("%s: grads f32 vs f64 (worst tensor, rel to its max)" % tag, worst < 1e-3,
          "%.2e" % worst)
    check("%s: lr_t" % tag, abs(b["lr"][0] - lr_expect) < 1e-15 * lr_expect + 1e-20,
          "%.9g" % b["lr"][0])
    # parameter update: compare the step p_after - p_before, in units of lr_t. Where the
    # Adam denominator sqrt(vhat)+eps is tiny, the update amplifies the float32 gradient's
    # error: d update / d g <= 2 (1-b1)/(1-b1^(step+1)) / (sqrt(vhat)+eps), so each element
    # may differ by that bound times |g32 - g64| * scale, plus 1e-3 lr_t and 2 ulp of p.
    bc1 = 1 - 0.9 ** (step + 1)
    bc2 = 1 - 0.999 ** (step + 1)
    upd_err, n_amp, worst_excess = 0.0, 0, 0.0
    for n in b["params_after"]:
        p0 = np.load(os.path.join(d, "params", n + ".npy")).astype(np.float64)
        da = a["params_after"][n].astype(np.float64) - p0
        db = b["params_after"][n] - p0
        err = np.abs(da - db)
        dg = np.abs(a["grads"][n].astype(np.float64) - b["grads"][n]) * b["clip_scale"][0]
        den = np.sqrt(b["v_after"][n] / bc2) + 1e-8
        allowed = lr_expect * (1e-3 + 2 * (0.1 / bc1) * dg / den) + 2 * np.spacing(
            np.abs(p0).astype(np.float32)).astype(np.float64)
        worst_excess = max(worst_excess, float(np.max(err / allowed)))
        n_amp += int(np.sum(err > 1e-3 * lr_expect))
        upd_err = max(upd_err, float(np.max(err)) / lr_expect)
    check("%s: params_after f32 vs f64 within the Adam error bound" % tag, worst_excess <= 1.0,
          "max |dupdate|/lr_t %.2e, %d elements above 1e-3 lr_t, worst err/bound %.2f" %
          (upd_err, n_amp, worst_excess))
    e_err = max(rel_err(a["ema_after"][n], b["ema_after"][n]) for n in b["ema_after"])
    check("%s: ema_after f32 vs f64" % tag, e_err < 1e-6, "%.2e" % e_err)
    m_err = max(rel_err(a["m_after"][n], b["m_after"][n]) for n in b["m_after"])
    check("%s: m_after f32 vs f64" % tag, m_err < 1e-3, "%.2e" % m_err)
    return a, b


@test
def test_oracle_f32_vs_f64_step0():
    with tempfile.TemporaryDirectory() as d:
        make_case(d, step=0, warmup=5)
        a, b = compare_f32_f64("step0", d, 0, 2e-4 * 1 / 5)
        # at step 0 with m = v = 0: update = -lr_t * g/(|g| + eps) (wd = 0)
        n = "conv_in.weight"
        p0 = np.load(os.path.join(d, "params", n + ".npy")).astype(np.float64)
        g = b["grads"][n] * b["clip_scale"][0]
        ref = p0 - 2e-4 / 5 * g / (np.abs(g) + 1e-8)
        check("step0: AdamW closed form", np.max(np.abs(b["params_after"][n] - ref)) < 1e-15)
        ema_ref = 0.9999 * p0 + 1e-4 * b["params_after"][n]
        check("step0: EMA from params", np.max(np.abs(b["ema_after"][n] - ema_ref)) < 1e-15)


@test
def test_oracle_f32_vs_f64_state():
    with tempfile.TemporaryDirectory() as d:
        make_case(d, step=6, warmup=10, wd=0.01, clip=0.05, with_state=True, N=2)
        a, b = compare_f32_f64("step6+state+wd+clip", d, 6, 2e-4 * 7 / 10)
        check("step6: clip active", b["clip_scale"][0] < 1.0 and
              abs(b["clip_scale"][0] - 0.05 / (b["grad_norm"][0] + 1e-6)) < 1e-15,
              "scale %.6g" % b["clip_scale"][0])
        # EMA uses the given ema state
        n = "conv_out.weight"
        e0 = np.load(os.path.join(d, "ema", n + ".npy")).astype(np.float64)
        ref = 0.9999 * e0 + 1e-4 * b["params_after"][n]
        check("step6: EMA from ema state", np.max(np.abs(b["ema_after"][n] - ref)) < 1e-15)
        # grad norm = sqrt(sum of squares of written grads)
        gn = math.sqrt(sum(float(np.sum(g.astype(np.float64) ** 2))
                           for g in b["grads"].values()))
        check("grad_norm = ||grads||", abs(gn - b["grad_norm"][0]) < 1e-12 * gn)


@test
def test_finite_differences():
    with tempfile.TemporaryDirectory() as d:
        make_case(d, N=1, seed=11)
        O.run_dir(d, os.path.join(d, "o64"), "float64", keep_dtype=True, quiet=True)
        grads = {f[:-4]: np.load(os.path.join(d, "o64", "grads", f))
                 for f in os.listdir(os.path.join(d, "o64", "grads"))}
        cfg, train = O.read_config(d, quiet=True)
        x0, t, eps = O.load_inputs(d)
        model = M.UNet(cfg).double()
        model.eval()
        params_sg = {f[:-4]: np.load(os.path.join(d, "params", f)).astype(np.float64)
                     for f in os.listdir(os.path.join(d, "params"))}

        def loss_of(psg):
            with torch.no_grad():
                for n, p in model.named_parameters():
                    p.copy_(M.from_stepgraph(n, psg[n], p))
                ca, cb = O.ddpm_coeffs(t, train["T"], train["beta1"], train["betaT"],
                                       train["beta_schedule"])
                x0t = O.nhwc_to_nchw(torch.from_numpy(x0).double())
                et = O.nhwc_to_nchw(torch.from_numpy(eps).double())
                xt = (torch.from_numpy(ca).view(-1, 1, 1, 1) * x0t +
                      torch.from_numpy(cb).view(-1, 1, 1, 1) * et)
                return float(torch.mean((model(xt, torch.from_numpy(t)) - et) ** 2))

        picks = [
            ("conv_in.weight", (3, 1, 2, 0)),
            ("time_embedding.linear_1.weight", (5, 7)),
            ("time_embedding.linear_2.bias", (11,)),
            ("down_blocks.0.resnets.0.norm1.weight", (4,)),
            ("down_blocks.0.resnets.0.conv2.weight", (1, 0, 2, 9)),
            ("down_blocks.0.downsamplers.0.conv.weight", (2, 2, 0, 31)),
            ("down_blocks.1.resnets.0.conv_shortcut.weight", (60, 0, 0, 3)),
            ("down_blocks.1.attentions.0.to_qkv.weight", (3, 0, 0, 10)),      # q
            ("down_blocks.1.attentions.0.to_qkv.weight", (64 + 5, 0, 0, 2)),  # k
            ("down_blocks.1.attentions.0.to_qkv.weight", (128 + 9, 0, 0, 7)),  # v
            ("down_blocks.1.attentions.0.to_qkv.bias", (130,)),
            ("down_blocks.1.attentions.0.to_out.0.weight", (7, 0, 0, 12)),
            ("mid_block.attentions.0.group_norm.bias", (17,)),
            ("mid_block.resnets.1.time_emb_proj.weight", (3, 100)),
            ("up_blocks.0.resnets.1.conv1.weight", (6, 1, 1, 80)),   # skip half of the concat
            ("up_blocks.0.upsamplers.0.conv.weight", (9, 0, 1, 33)),
            ("up_blocks.1.resnets.0.norm2.bias", (30,)),
            ("conv_norm_out.weight", (13,)),
            ("conv_out.bias", (1,)),
        ]
        h = 1e-5
        worst = 0.0
        for n, idx in picks:
            pp = dict(params_sg)
            a = params_sg[n].copy()
            a[idx] += h
            pp[n] = a
            lp = loss_of(pp)
            a = params_sg[n].copy()
            a[idx] -= h
            pp[n] = a
            lm = loss_of(pp)
            fd = (lp - lm) / (2 * h)
            ag = float(grads[n][idx])
            err = abs(fd - ag) / max(abs(ag), 1e-6)
            worst = max(worst, err)
            check("fd %s%s" % (n, list(idx)), err < 1e-5,
                  "fd %.10g autograd %.10g rel %.1e" % (fd, ag, err))
        print("     worst fd rel err %.2e" % worst)


@test
def test_adamw_vs_torch():
    for dtype, tol in ((torch.float64, 1e-12), (torch.float32, 1e-5)):
        for step, wd, warmup, with_state in ((0, 0.0, 5000, False), (0, 0.1, 0, False),
                                             (9, 0.05, 4, True), (123, 0.0, 5000, True)):
            g = torch.Generator().manual_seed(step)
            shape = (37, 5)
            p = torch.randn(shape, generator=g).to(dtype)
            grad = (torch.randn(shape, generator=g) * 10 ** torch.randint(-9, 1, shape,
                                                                           generator=g)).to(dtype)
            if with_state:
                m = (1e-2 * torch.randn(shape, generator=g)).to(dtype)
                v = (1e-4 * torch.rand(shape, generator=g)).to(dtype)
            else:
                m = torch.zeros(shape, dtype=dtype)
                v = torch.zeros(shape, dtype=dtype)
            lr, b1, b2, eps, scale = 2e-4, 0.9, 0.999, 1e-8, 0.37
            ph, mh, vh, lr_t = O.adamw_by_hand(p, grad, m, v, scale, step, lr, b1, b2, eps, wd,
                                               warmup)
            q = torch.nn.Parameter(p.clone())
            opt = torch.optim.AdamW([q], lr=lr_t, betas=(b1, b2), eps=eps, weight_decay=wd)
            q.grad = grad * scale
            if with_state or step > 0:
                opt.state[q] = {"step": torch.tensor(float(step)), "exp_avg": m.clone(),
                                "exp_avg_sq": v.clone()}
            opt.step()
            st = opt.state[q]
            # error in units of lr_t, after allowing 2 ulp of p (p*(1-lr wd) vs p - lr wd p)
            ulp = 2 * np.spacing(np.abs(p.numpy()))
            du = float(np.max(np.maximum(np.abs(ph.numpy() - q.detach().numpy()) - ulp, 0)))
            du /= lr_t
            tag = "adamw vs torch.optim.AdamW %s step=%d wd=%g warmup=%d" % (
                str(dtype).split(".")[-1], step, wd, warmup)
            check(tag, du < tol and rel_err(mh.numpy(), st["exp_avg"].numpy()) < tol and
                  rel_err(vh.numpy(), st["exp_avg_sq"].numpy()) < tol, "update err %.1e" % du)
            lr_expect = lr * min(1.0, (step + 1) / warmup) if warmup > 0 else lr
            check(tag + " lr_t", lr_t == lr_expect)


@test
def test_cli():
    with tempfile.TemporaryDirectory() as d:
        make_case(d, N=2, seed=3, extra={"model": "unet_tiny", "ch_mult": "1,2", "attn_res": 8})
        r = subprocess.run([sys.executable, os.path.join(REF, "oracle.py"), d],
                           capture_output=True, text=True)
        check("oracle CLI exit 0", r.returncode == 0, (r.stdout + r.stderr).strip()[-300:])
        need = ["pred.npy", "loss.npy", "xt.npy", "grad_norm.npy", "grads", "params_after",
                "ema_after"]
        out = os.path.join(d, "out")
        check("oracle CLI outputs", all(os.path.exists(os.path.join(out, k)) for k in need))
        if os.path.exists(os.path.join(out, "grads")):
            check("oracle CLI writes every grad",
                  len(os.listdir(os.path.join(out, "grads"))) ==
                  len(os.listdir(os.path.join(d, "params"))))
        os.remove(os.path.join(d, "t.npy"))
        r = subprocess.run([sys.executable, os.path.join(REF, "oracle.py"), d],
                           capture_output=True, text=True)
        check("oracle CLI missing input -> exit 2, one line", r.returncode == 2 and
              r.stderr.strip().count("\n") == 0, r.stderr.strip())


@test
def test_tools_cli():
    py = sys.executable
    with tempfile.TemporaryDirectory() as d:
        r = subprocess.run([py, os.path.join(REF, "oracle.py"), d, "--make-case", "unet_tiny",
                            "--batch", "2", "--seed", "4", "--step", "2", "--with-state", "-q"],
                           capture_output=True, text=True)
        check("oracle --make-case", r.returncode == 0 and
              os.path.isdir(os.path.join(d, "adam_m")) and
              os.path.exists(os.path.join(d, "out", "meta.json")), r.stderr[-300:])
        r = subprocess.run([py, os.path.join(REF, "oracle.py"), d, "--dtype", "float64",
                            "--out", os.path.join(d, "o64"), "-q"], capture_output=True,
                           text=True)
        r = subprocess.run([py, os.path.join(REF, "compare.py"), os.path.join(d, "o64"),
                            os.path.join(d, "out")], capture_output=True, text=True)
        check("compare.py oracle f64 vs f32 passes", r.returncode == 0,
              r.stdout.strip().splitlines()[-1] if r.stdout.strip() else r.stderr[-300:])
        # --grads-from with the oracle's own gradients reproduces the update exactly
        r = subprocess.run([py, os.path.join(REF, "oracle.py"), d, "--grads-from",
                            os.path.join(d, "out", "grads"), "--out", os.path.join(d, "og"),
                            "-q"], capture_output=True, text=True)
        a = load_out(os.path.join(d, "out"))
        b = load_out(os.path.join(d, "og"))
        same = all(np.array_equal(a["params_after"][n], b["params_after"][n]) and
                   np.array_equal(a["ema_after"][n], b["ema_after"][n]) for n in a["grads"])
        check("oracle --grads-from (own grads) identical", r.returncode == 0 and same)
        # a perturbed parameter must make compare.py fail
        n = "down_blocks.0.resnets.0.conv1.weight"
        f = os.path.join(d, "og", "params_after", n + ".npy")
        p = np.load(f)
        p[0, 0, 0, 0] += 0.5 * float(a["lr"][0])
        np.save(f, p)
        f = os.path.join(d, "og", "grads", "conv_out.bias.npy")
        g = np.load(f)
        g[0] *= 1.01
        np.save(f, g)
        r = subprocess.run([py, os.path.join(REF, "compare.py"), os.path.join(d, "o64"),
                            os.path.join(d, "og")], capture_output=True, text=True)
        fails = [ln for ln in r.stdout.splitlines() if ln.startswith("FAIL")]
        check("compare.py catches a wrong update and a wrong gradient", r.returncode == 1 and
              any("params_after" in ln for ln in fails) and any("grads" in ln for ln in fails),
              "; ".join(fails))
        # bench.py --parity on the CPU writes the oracle format and agrees with the oracle
        r = subprocess.run([py, os.path.join(REF, "bench.py"), "--device", "cpu", "--parity", d,
                            "--out", os.path.join(d, "par")], capture_output=True, text=True)
        ok = r.returncode == 0
        if ok:
            r = subprocess.run([py, os.path.join(REF, "compare.py"), os.path.join(d, "o64"),
                                os.path.join(d, "par")], capture_output=True, text=True)
        check("bench.py --parity (cpu) vs oracle", ok and r.returncode == 0,
              (r.stdout.strip().splitlines() or [""])[-1] + r.stderr[-300:])


@test
def test_dropout_masks():
    with tempfile.TemporaryDirectory() as d:
        make_case(d, N=1, seed=9)
        O.run_dir(d, os.path.join(d, "o0"), "float64", keep_dtype=True, quiet=True)
        model = M.UNet("unet_tiny")
        rng = np.random.default_rng(0)
        shapes = {}
        # record each resblock's output shape of silu(norm2(h)) = its output shape
        hooks = [m.register_forward_hook(
            lambda mod, inp, out, n=n: shapes.__setitem__(n, tuple(out.shape)))
            for n, m in model.named_modules() if isinstance(m, M.ResnetBlock)]
        model(torch.zeros(1, 3, 16, 16), torch.zeros(1, dtype=torch.long))
        for h in hooks:
            h.remove()
        os.makedirs(os.path.join(d, "dropout_masks"))
        for n, (N, C, H, W) in shapes.items():
            np.save(os.path.join(d, "dropout_masks", n + ".npy"), np.ones((N, H, W, C), np.float32))
        O.run_dir(d, os.path.join(d, "o1"), "float64", keep_dtype=True, quiet=True)
        a = np.load(os.path.join(d, "o0", "pred.npy"))
        b = np.load(os.path.join(d, "o1", "pred.npy"))
        check("dropout masks of ones == dropout off", np.array_equal(a, b))
        p = 0.1
        for n, (N, C, H, W) in shapes.items():
            m = (rng.uniform(size=(N, H, W, C)) >= p).astype(np.float32) / np.float32(1 - p)
            np.save(os.path.join(d, "dropout_masks", n + ".npy"), m)
        O.run_dir(d, os.path.join(d, "o2"), "float64", keep_dtype=True, quiet=True)
        O.run_dir(d, os.path.join(d, "o3"), "float32", quiet=True)
        c = np.load(os.path.join(d, "o2", "pred.npy"))
        e = np.load(os.path.join(d, "o3", "pred.npy"))
        check("dropout masks change pred", rel_err(c, a) > 1e-3, "%.2e" % rel_err(c, a))
        check("dropout masks: f32 vs f64", rel_err(e, c) < 1e-4, "%.2e" % rel_err(e, c))
        os.remove(os.path.join(d, "dropout_masks", "mid_block.resnets.0.npy"))
        try:
            O.run_dir(d, os.path.join(d, "o4"), "float32", quiet=True)
            check("incomplete dropout_masks rejected", False)
        except KeyError:
            check("incomplete dropout_masks rejected", True)


@test
def test_multihead_oracle():
    # a small head_ch config through the whole oracle (f32 vs f64)
    with tempfile.TemporaryDirectory() as d:
        make_case(d, N=2, seed=5, extra={"heads": None, "head_ch": 16, "resample_conv": False,
                                         "attn_res": [16, 8]})
        O.run_dir(d, os.path.join(d, "o32"), "float32", quiet=True)
        O.run_dir(d, os.path.join(d, "o64"), "float64", keep_dtype=True, quiet=True)
        a = np.load(os.path.join(d, "o32", "pred.npy"))
        b = np.load(os.path.join(d, "o64", "pred.npy"))
        check("head_ch=16 avgpool config: pred f32 vs f64", rel_err(a, b) < 1e-4,
              "%.2e" % rel_err(a, b))


@test
def test_bench_smoke():
    if "--skip-bench" in sys.argv:
        print("     (bench smoke skipped)")
        return
    cmd = [sys.executable, os.path.join(REF, "bench.py"), "--device", "cpu", "--mode", "eager",
           "--model", "unet_tiny", "--steps", "3", "--warmup", "1"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    last = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
    ok = False
    try:
        j = json.loads(last)
        ok = j.get("ms_per_step", 0) > 0 and j.get("model") == "unet_tiny"
    except Exception:
        pass
    check("bench.py cpu eager smoke", r.returncode == 0 and ok, (last or r.stderr)[-300:])
    if not hasattr(torch, "compile"):
        r = subprocess.run(cmd[:4] + ["--mode", "compile"] + cmd[6:], capture_output=True,
                           text=True)
        last = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
        ok = False
        try:
            ok = json.loads(last).get("skipped") is True
        except Exception:
            pass
        check("bench.py compile on torch<2 skips cleanly", r.returncode == 0 and ok,
              (r.stdout + r.stderr)[-300:])


def main():
    torch.set_num_threads(max(1, min(8, os.cpu_count() or 1)))
    print("torch %s, numpy %s" % (torch.__version__, np.__version__))
    for fn in (test_param_counts, test_names, test_layout_roundtrip, test_attention_reference,
               test_timestep_embedding, test_abar, test_oracle_f32_vs_f64_step0,
               test_oracle_f32_vs_f64_state, test_finite_differences, test_adamw_vs_torch,
               test_cli, test_tools_cli, test_dropout_masks, test_multihead_oracle,
               test_bench_smoke):
        fn()
    print("%d passed, %d failed" % (PASSED, FAILED))
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
