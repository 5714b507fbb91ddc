#!/usr/bin/env python3
"""oracle.py DIR — one stepgraph training step in PyTorch, the oracle for the C backends.

DIR holds:
  config.json        model fields of docs/model.md (img, in_ch, ch, ch_mult, nrb, attn_res,
                     heads | head_ch, groups, dropout, resample_conv, down_pad ("same" |
                     "symmetric", absent: symmetric); or "model": a named
                     config, whose fields the file's own fields override) and training fields
                     T, beta1, betaT, beta_schedule ("linear" | "cosine"), prediction ("eps" |
                     "v"), snr_gamma (0: off), lr, b1, b2, eps, wd, warmup, clip, ema_decay, step
                     (0-based number of this update). Missing training fields take the
                     defaults of docs/model.md (a note goes to stderr).
  params/<name>.npy  parameters in stepgraph layouts (conv [Co][K][K][Ci], linear [out][in])
  x0.npy             [N,H,W,C] float32, t.npy [N] int32, eps.npy [N,H,W,C] float32
  class_labels.npy   [N] int32: a class-conditional model's labels (config "classes" > 0), as
                     the step gathered them (after its label dropout: the null class is
                     "classes")
  optional: adam_m/<name>.npy, adam_v/<name>.npy (default 0), ema/<name>.npy (default params)
  optional: dropout_masks/<resnet>.npy, e.g. dropout_masks/down_blocks.0.resnets.0.npy:
            [N,H,W,C] float32 multipliers (0 or 1/(1-p)) applied where the resblock's dropout
            is (after silu(norm2(h)), before conv2), to replay the C backend's masks. Without
            the folder dropout is off (identity); with it, every resblock needs its mask.

`oracle.py DIR --make-case unet_tiny [--batch N --seed S --step K --with-state]` first
writes such a folder with random contents. `--grads-from GDIR` runs the clip/AdamW/EMA part on
external gradients (e.g. the C backend's), so the optimizer can be checked to float rounding.

It computes (dropout off, i.e. identity):
  x_t = sqrt(abar_t) x0 + sqrt(1 - abar_t) eps   (abar in float64; linear betas, or cosine:
        improved-diffusion's betas_for_alpha_bar, capped at 0.999)
  pred = model(x_t, t[, class_labels]); loss = mean((pred - target)^2), target = eps, or with prediction "v"
  v = sqrt(abar_t) eps - sqrt(1 - abar_t) x0 (Salimans & Ho 2022); with snr_gamma > 0 each
  sample's mean squared error times min(SNR, gamma) / SNR (eps) or / (SNR + 1) (v), SNR =
  abar / (1 - abar) (min-SNR-gamma, as diffusers' training scripts); backward
  norm = sqrt(sum g^2) over all gradients (accumulated in float64);
  scale = min(1, clip / (norm + 1e-6))
  AdamW by hand (cpu_kernels.h): lr_t = lr min(1, (step+1)/warmup); g = grad*scale;
    m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; mhat = m/(1-b1^(step+1)), vhat likewise;
    p -= lr_t (mhat / (sqrt(vhat) + eps) + wd p)
  EMA: ema = decay ema + (1-decay) p_new

and writes DIR/out/ (or --out): pred.npy, xt.npy (NHWC), loss.npy [1], grad_norm.npy [1],
clip_scale.npy [1], lr.npy [1], grads/<name>.npy (raw, unclipped gradients of the loss),
params_after/, m_after/, v_after/, ema_after/ — all in stepgraph layouts, float32 (float64
with --keep-dtype and --dtype float64).
"""

import argparse
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model as M  # noqa: E402

TRAIN_FIELDS = ("T", "beta1", "betaT", "beta_schedule", "zero_snr", "prediction", "snr_gamma",
                "p2_gamma", "p2_k", "input_perturbation", "lr", "b1", "b2", "eps", "wd", "warmup", "clip",
                "ema_decay", "step")
# only in config.json when not the default
OPTIONAL_FIELDS = ("beta_schedule", "zero_snr", "prediction", "snr_gamma", "p2_gamma", "p2_k",
                   "input_perturbation")


def read_config(d, quiet=False):
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    train = {}
    missing = []
    for k in TRAIN_FIELDS:
        if k in cfg and cfg[k] is not None:
            train[k] = cfg[k]
        else:
            train[k] = M.TRAIN_DEFAULTS[k]
            if k not in OPTIONAL_FIELDS:
                missing.append(k)
    if missing and not quiet:
        print("oracle: config.json lacks %s; using docs/model.md defaults" % ",".join(missing),
              file=sys.stderr)
    train["T"] = int(train["T"])
    train["warmup"] = int(train["warmup"])
    train["step"] = int(train["step"])
    train["zero_snr"] = int(train["zero_snr"])
    for k in ("beta1", "betaT", "snr_gamma", "p2_gamma", "p2_k", "input_perturbation", "lr", "b1", "b2", "eps", "wd",
              "clip", "ema_decay"):
        train[k] = float(train[k])
    model_cfg = {k: v for k, v in cfg.items() if k not in TRAIN_FIELDS}
    return M.normalize_config(model_cfg), train


def cosine_betas(T, max_beta=0.999):
    """Nichol & Dhariwal 2021 (improved-diffusion's get_named_beta_schedule("cosine")):
    beta_i = min(1 - f((i+1)/T) / f(i/T), 0.999), f(u) = cos((u + 0.008) / 1.008 * pi / 2)^2."""
    def f(u):
        return math.cos((u + 0.008) / 1.008 * math.pi / 2) ** 2
    return np.array([min(1 - f((i + 1) / T) / f(i / T), max_beta) for i in range(T)],
                    dtype=np.float64)


def rescale_zero_terminal_snr(betas):
    """Lin et al. 2024, Algorithm 1 (as diffusers' rescale_zero_terminal_snr), float64:
    sqrt(abar) shifted to end at 0 and scaled to keep its start; the betas of that abar."""
    s = np.sqrt(np.cumprod(1.0 - betas))
    s0, sT = s[0], s[-1]
    s = (s - sT) * (s0 / (s0 - sT))
    a = s * s
    return 1.0 - np.concatenate([a[:1], a[1:] / a[:-1]])


def ddpm_abar(T, beta1, betaT, schedule="linear", zero_snr=0):
    """abar[t] = prod_{i<=t} (1 - beta_i), float64, multiplied in increasing i; linear betas
    beta_i = beta1 + (betaT-beta1) i/(T-1), or cosine (cosine_betas); with zero_snr rescaled
    (rescale_zero_terminal_snr)."""
    if schedule == "cosine":
        betas = cosine_betas(T)
    elif schedule == "linear":
        i = np.arange(T, dtype=np.float64)
        betas = beta1 + (betaT - beta1) * i / (T - 1)
    else:
        raise ValueError("unknown beta_schedule %r (linear or cosine)" % schedule)
    if zero_snr:
        betas = rescale_zero_terminal_snr(betas)
    return np.cumprod(1.0 - betas)


def ddpm_coeffs(t, T, beta1, betaT, schedule="linear", zero_snr=0):
    abar = ddpm_abar(T, beta1, betaT, schedule, zero_snr)
    t = np.asarray(t, dtype=np.int64)
    if t.min() < 0 or t.max() >= T:
        raise ValueError("timestep out of [0, %d)" % T)
    return np.sqrt(abar[t]), np.sqrt(1.0 - abar[t])


def nhwc_to_nchw(a):
    return a.permute(0, 3, 1, 2).contiguous()


def nchw_to_nhwc_np(t):
    return t.detach().permute(0, 2, 3, 1).contiguous().cpu().numpy()


@torch.no_grad()
def adamw_by_hand(p, grad, m, v, scale, step, lr, b1, b2, eps, wd, warmup):
    """The cpu_kernels.h AdamW on tensors (in their dtype). Returns (p, m, v, lr_t), new tensors."""
    lr_t = lr * min(1.0, (step + 1) / warmup) if warmup > 0 else lr
    bc1 = 1.0 - b1 ** (step + 1)
    bc2 = 1.0 - b2 ** (step + 1)
    g = grad * scale
    m = b1 * m + (1.0 - b1) * g
    v = b2 * v + (1.0 - b2) * (g * g)
    mhat = m / bc1
    vhat = v / bc2
    p = p - lr_t * (mhat / (torch.sqrt(vhat) + eps) + wd * p)
    return p, m, v, lr_t


def load_dropout_masks(model, d, device, dtype):
    """Attach d/dropout_masks/<resnet>.npy (NHWC) to the model's resblocks; returns how many."""
    md = os.path.join(d, "dropout_masks")
    blocks = {n: m for n, m in model.named_modules() if isinstance(m, M.ResnetBlock)}
    for m in blocks.values():
        m.dropout_mask = None
    if not os.path.isdir(md):
        return 0
    for n, m in blocks.items():
        f = os.path.join(md, n + ".npy")
        if not os.path.exists(f):
            raise KeyError("missing dropout mask %s" % f)
        a = torch.from_numpy(np.ascontiguousarray(np.load(f)))
        if a.dim() != 4:
            raise ValueError("%s: want [N,H,W,C], got %s" % (f, tuple(a.shape)))
        m.dropout_mask = nhwc_to_nchw(a).to(device=device, dtype=dtype)
    extra = sorted(set(f[:-4] for f in os.listdir(md) if f.endswith(".npy")) - set(blocks))
    if extra:
        raise KeyError("dropout_masks holds unknown resblocks: %s" % extra[:4])
    return len(blocks)


def load_inputs(d):
    x0 = np.load(os.path.join(d, "x0.npy"))
    t = np.load(os.path.join(d, "t.npy")).astype(np.int64).reshape(-1)
    eps = np.load(os.path.join(d, "eps.npy"))
    if x0.ndim != 4 or eps.shape != x0.shape or t.shape[0] != x0.shape[0]:
        raise ValueError("inputs: x0 %s, eps %s, t %s do not agree (want [N,H,W,C], [N])" %
                         (x0.shape, eps.shape, t.shape))
    return x0, t, eps


def load_eps_in(d):
    """eps_in.npy, the noise x_t is made with under input perturbation (eps plus the
    perturbation's normals, drawn by stepgraph), or None where the case has none."""
    f = os.path.join(d, "eps_in.npy")
    return np.load(f) if os.path.exists(f) else None


def load_labels(d):
    """class_labels.npy as int64 [N], or None where the case has none (unconditional)."""
    f = os.path.join(d, "class_labels.npy")
    return np.load(f).astype(np.int64).reshape(-1) if os.path.exists(f) else None


def train_step(model, train, x0, t, eps, state=None, device="cpu", dtype=torch.float32,
               autocast_dtype=None, grads_override=None, labels=None, eps_in=None):
    """One oracle step. `model` holds the parameters (dtype/device already set) and is
    updated in place to p_new. `state` may hold dicts "m", "v", "ema" of tensors (PyTorch
    layout); missing ones start as zeros / params. `grads_override` (name -> tensor, PyTorch
    layout) replaces the autograd gradients in the clip/AdamW/EMA part (the forward, loss and
    the written grads are still the oracle's own). `eps_in` (input perturbation, Ning et al.
    2023, as diffusers' --input_perturbation): the noise x_t is made with, while the target
    stays eps (or v from eps). Returns a dict of results (tensors)."""
    state = state or {}
    params = dict(model.named_parameters())
    x0_t = nhwc_to_nchw(torch.from_numpy(np.ascontiguousarray(x0))).to(device=device, dtype=dtype)
    eps_t = nhwc_to_nchw(torch.from_numpy(np.ascontiguousarray(eps))).to(device=device,
                                                                         dtype=dtype)
    t_t = torch.from_numpy(t).to(device=device)
    y_t = torch.from_numpy(labels).to(device=device) if labels is not None else None
    ca, cb = ddpm_coeffs(t, train["T"], train["beta1"], train["betaT"], train["beta_schedule"],
                         train["zero_snr"])
    ca = torch.from_numpy(ca).to(device=device, dtype=dtype).view(-1, 1, 1, 1)
    cb = torch.from_numpy(cb).to(device=device, dtype=dtype).view(-1, 1, 1, 1)
    if (eps_in is not None) != (train["input_perturbation"] > 0):
        raise ValueError("input_perturbation %g needs eps_in.npy (and only it)" %
                         train["input_perturbation"])
    noise_in = eps_t if eps_in is None else nhwc_to_nchw(torch.from_numpy(
        np.ascontiguousarray(eps_in))).to(device=device, dtype=dtype)
    xt = ca * x0_t + cb * noise_in

    model.eval()  # dropout = identity; nothing else in the model depends on the mode
    model.zero_grad(set_to_none=True)
    if autocast_dtype is not None:
        dev_type = torch.device(device).type
        with torch.autocast(device_type=dev_type, dtype=autocast_dtype):
            pred = model(xt, t_t, y_t)
        pred = pred.to(dtype)
    else:
        pred = model(xt, t_t, y_t)
    if train["prediction"] == "v":
        target = ca * eps_t - cb * x0_t
    elif train["prediction"] == "eps":
        target = eps_t
    else:
        raise ValueError("unknown prediction %r (eps or v)" % train["prediction"])
    weighted = train["snr_gamma"] > 0 or train["p2_gamma"] > 0
    if weighted:
        abar = torch.from_numpy(ddpm_abar(train["T"], train["beta1"], train["betaT"],
                                          train["beta_schedule"], train["zero_snr"])[t]).to(
                                              device=device, dtype=dtype)
    if train["snr_gamma"] > 0:
        # min-SNR-gamma (Hang et al. 2023), as diffusers' training scripts write it: SNR from
        # alphas_cumprod, the weights min(SNR, gamma) / SNR (epsilon) or / (SNR + 1) (v)
        snr = abar / (1 - abar)  # 0 at zero terminal SNR's last step: a v weight of 0
        w = torch.stack([snr, train["snr_gamma"] * torch.ones_like(snr)], dim=1).min(dim=1)[0]
        w = w / snr if train["prediction"] == "eps" else w / (snr + 1)
    elif train["p2_gamma"] > 0:
        # P2 (Choi et al. 2022; their gaussian_diffusion.py: p2_loss_weight = (k + alphas_cumprod
        # / (1 - alphas_cumprod)) ** -gamma on the eps loss); for v the same objective: an eps
        # error is sqrt(abar) times a v error, so times abar = SNR / (SNR + 1)
        w = (train["p2_k"] + abar / (1 - abar)) ** -train["p2_gamma"]
        if train["prediction"] == "v":
            w = w * abar
    if weighted:
        # each sample's mean squared error times its weight, then the mean over the batch
        loss = (((pred - target) ** 2).mean(dim=(1, 2, 3)) * w).mean()
    else:
        loss = torch.mean((pred - target) ** 2)
    loss.backward()

    grads = {n: p.grad.detach().clone() for n, p in params.items()}
    used = grads
    if grads_override is not None:
        used = {n: grads_override[n].to(device=device, dtype=dtype) for n in params}
    sumsq = 0.0
    for g in used.values():
        sumsq += float(torch.sum(g.double() * g.double()))
    norm = math.sqrt(sumsq)
    scale = min(1.0, train["clip"] / (norm + 1e-6))

    new_p, new_m, new_v, new_ema = {}, {}, {}, {}
    lr_t = None
    with torch.no_grad():
        for n, p in params.items():
            m0 = state.get("m", {}).get(n)
            v0 = state.get("v", {}).get(n)
            e0 = state.get("ema", {}).get(n)
            m0 = torch.zeros_like(p) if m0 is None else m0
            v0 = torch.zeros_like(p) if v0 is None else v0
            e0 = p.detach().clone() if e0 is None else e0
            pn, mn, vn, lr_t = adamw_by_hand(p.detach(), used[n], m0, v0, scale, train["step"],
                                             train["lr"], train["b1"], train["b2"], train["eps"],
                                             train["wd"], train["warmup"])
            d = train["ema_decay"]
            new_ema[n] = d * e0 + (1.0 - d) * pn
            new_p[n], new_m[n], new_v[n] = pn, mn, vn
        for n, p in params.items():
            p.copy_(new_p[n])
    return dict(xt=xt.detach(), pred=pred.detach(), loss=float(loss.detach()), grads=grads,
                grad_norm=norm, clip_scale=scale, lr=lr_t, params_after=new_p, m_after=new_m,
                v_after=new_v, ema_after=new_ema)


def write_outputs(out, res, np_dtype=np.float32, train=None):
    os.makedirs(out, exist_ok=True)
    if train is not None:
        with open(os.path.join(out, "meta.json"), "w") as f:
            json.dump(dict(train=train, torch=torch.__version__,
                           dtype=str(res["pred"].dtype).replace("torch.", "")), f, indent=1)
    np.save(os.path.join(out, "pred.npy"), nchw_to_nhwc_np(res["pred"]).astype(np_dtype))
    np.save(os.path.join(out, "xt.npy"), nchw_to_nhwc_np(res["xt"]).astype(np_dtype))
    for k in ("loss", "grad_norm", "clip_scale", "lr"):
        np.save(os.path.join(out, k + ".npy"), np.array([res[k]], dtype=np_dtype))
    for k in ("grads", "params_after", "m_after", "v_after", "ema_after"):
        M.save_tensors(res[k], os.path.join(out, k), np_dtype)


def load_state(model, d):
    state = {}
    for key, sub in (("m", "adam_m"), ("v", "adam_v"), ("ema", "ema")):
        sd = os.path.join(d, sub)
        if os.path.isdir(sd):
            state[key] = M.load_tensors_dir(model, sd, strict=True)
    return state


def make_case(d, model_cfg="unet_tiny", N=None, seed=0, train=None, with_state=False,
              t=None):
    """Write an oracle input folder: config.json (model fields + training fields), random
    params (PyTorch default init from `seed`, GroupNorm gamma/beta perturbed around 1/0 so
    their gradients are exercised), x0 ~ U(-1,1), eps ~ N(0,1), t (first two 0 and T-1, the
    rest uniform), and with_state: adam_m, adam_v (>= 0) and ema state. Returns the config."""
    cfg = M.normalize_config(model_cfg)
    tr = dict(M.TRAIN_DEFAULTS)
    tr.update(train or {})
    N = int(N or (model_cfg.get("batch") if isinstance(model_cfg, dict) else None) or
            M.CONFIGS.get(model_cfg if isinstance(model_cfg, str) else "", {}).get("batch", 2))
    g = torch.Generator().manual_seed(seed)
    m = M.UNet(cfg)
    m.reset_parameters(generator=g)
    with torch.no_grad():
        for n, p in m.named_parameters():
            if isinstance(dict(m.named_modules())[n.rsplit(".", 1)[0]], torch.nn.GroupNorm):
                r = torch.rand(p.shape, generator=g) - 0.5
                p.copy_(1.0 + 0.2 * r if n.endswith("weight") else 0.2 * r)
    os.makedirs(d, exist_ok=True)
    M.save_params(m, d)
    c = {k: v for k, v in cfg.items()}
    c["batch"] = N
    c.update(tr)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(c, f, indent=1)
    rng = np.random.default_rng(seed)
    shp = (N, cfg["img"], cfg["img"], cfg["in_ch"])
    np.save(os.path.join(d, "x0.npy"), rng.uniform(-1, 1, shp).astype(np.float32))
    np.save(os.path.join(d, "eps.npy"), rng.standard_normal(shp).astype(np.float32))
    if t is None:
        T = int(tr["T"])
        t = np.array(([0, T - 1] + list(rng.integers(0, T, max(N - 2, 0))))[:N])
    np.save(os.path.join(d, "t.npy"), np.asarray(t, dtype=np.int32))
    if with_state:
        st = {"adam_m": {}, "adam_v": {}, "ema": {}}
        for n, p in m.named_parameters():
            st["adam_m"][n] = 1e-3 * torch.randn(p.shape, generator=g)
            st["adam_v"][n] = 1e-6 * torch.rand(p.shape, generator=g)
            st["ema"][n] = p.detach() + 1e-3 * torch.randn(p.shape, generator=g)
        for sub, tens in st.items():
            M.save_tensors(tens, os.path.join(d, sub))
    return c


def run_dir(d, out=None, dtype="float32", device="cpu", keep_dtype=False, autocast_dtype=None,
            use_sdpa=False, quiet=False, grads_from=None):
    cfg, train = read_config(d, quiet=quiet)
    tdtype = {"float32": torch.float32, "float64": torch.float64}[dtype]
    model = M.UNet(cfg, use_sdpa=use_sdpa).to(device=device, dtype=tdtype)
    M.load_stepgraph_params(model, d)
    x0, t, eps = load_inputs(d)
    if x0.shape[1] != cfg["img"] or x0.shape[2] != cfg["img"] or x0.shape[3] != cfg["in_ch"]:
        raise ValueError("x0 shape %s does not match img=%d in_ch=%d" %
                         (x0.shape, cfg["img"], cfg["in_ch"]))
    state = load_state(model, d)
    load_dropout_masks(model, d, device, tdtype)
    go = M.load_tensors_dir(model, grads_from, strict=True) if grads_from else None
    res = train_step(model, train, x0, t, eps, state, device=device, dtype=tdtype,
                     autocast_dtype=autocast_dtype, grads_override=go, labels=load_labels(d),
                     eps_in=load_eps_in(d))
    out = out or os.path.join(d, "out")
    np_dtype = np.float64 if (keep_dtype and tdtype == torch.float64) else np.float32
    write_outputs(out, res, np_dtype, train)
    return res, out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    ap.add_argument("--out", default=None, help="output folder (default DIR/out)")
    ap.add_argument("--keep-dtype", action="store_true",
                    help="with --dtype float64, write float64 outputs")
    ap.add_argument("--grads-from", default=None, metavar="GDIR",
                    help="run clip/AdamW/EMA on the gradients in GDIR/<name>.npy (stepgraph "
                         "layouts, e.g. the C backend's) instead of the oracle's own")
    ap.add_argument("--make-case", default=None, metavar="MODEL",
                    help="first write a random input case for MODEL (a named config) into DIR")
    ap.add_argument("--batch", type=int, default=0, help="--make-case: batch (default: 2)")
    ap.add_argument("--seed", type=int, default=0, help="--make-case: seed")
    ap.add_argument("--step", type=int, default=0, help="--make-case: step number")
    ap.add_argument("--with-state", action="store_true",
                    help="--make-case: also write adam_m/, adam_v/, ema/")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: default)")
    ap.add_argument("-q", "--quiet", action="store_true")
    a = ap.parse_args(argv)
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    try:
        if a.make_case:
            make_case(a.dir, a.make_case, N=a.batch or 2, seed=a.seed, train={"step": a.step},
                      with_state=a.with_state)
        res, out = run_dir(a.dir, a.out, a.dtype, keep_dtype=a.keep_dtype, quiet=a.quiet,
                           grads_from=a.grads_from)
    except (OSError, ValueError, KeyError) as e:
        print("oracle: error: %s" % e, file=sys.stderr)
        return 2
    if not a.quiet:
        print("oracle: loss %.9g grad_norm %.9g clip_scale %.9g lr %.9g -> %s" %
              (res["loss"], res["grad_norm"], res["clip_scale"], res["lr"], out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
