#!/usr/bin/env python3
"""compare.py REF TEST — compare two step-output folders in oracle.py's format.

REF is normally the oracle's output (DIR/out, ideally from --dtype float64), TEST the
C backend's (or bench.py --parity's). Both hold pred.npy, xt.npy, loss.npy, grad_norm.npy,
grads/, params_after/, and optionally m_after/, v_after/, ema_after/ (compared when both have
them). REF must hold meta.json (written by oracle.py) for the optimizer-aware bounds.

Tolerances (fp32 defaults; --scale multiplies all but the ulp terms, e.g. --scale 30 for bf16):
  xt                  max|d| / max|ref| <= 1e-6
  pred                max|d| / max|ref| <= 1e-4
  loss                |d| / |ref|       <= 1e-5
  grad_norm           |d| / |ref|       <= 1e-4
  grads/<name>        max|d| / max|ref| <= 2e-4 per tensor
  m_after/<name>      max|d| / max|ref| <= 2e-4 per tensor
  v_after/<name>      max|d| / max|ref| <= 5e-4 per tensor
  params_after/<name> per element |d| <= lr_t (1e-3 + 2 (1-b1)/(1-b1^(s+1)) |dg| scale /
                      (sqrt(vhat)+eps)) + 2 ulp(p): Adam's update amplifies gradient error
                      where sqrt(vhat) is tiny (at step 0 the update is ~ lr_t sign(g)), so
                      the bound uses the measured gradient difference dg.
  ema_after/<name>    per element |d| <= (1-decay) |dp| + 3 ulp(ema) + 1e-3 (1-decay) lr_t
--bf16 (a step with bf16 activations against the float64 truth): xt 4e-3 (its own bf16
rounding), pred 3e-2, loss 3e-3, grad_norm 1e-2, grads and m_after 2e-1, v_after 4e-1, and the
params_after / ema_after bounds as with --scale 30. The CPU backend's bf16 step of unet_cifar
(batch 2) measured, on 2026-11-28: xt 2.3e-3, pred 8.9e-3, loss 2.8e-4, grad_norm 7.8e-4,
grads 7.5e-2 and m 7.5e-2 (a GroupNorm weight: many terms of both signs), v 1.1e-1. Loose:
these catch a wrong kernel (errors of order 1), not bf16's rounding; the GPU test prints
PyTorch's own bf16 step beside ours, the yardstick to tighten them by.
Prints one line per item and "N passed, N failed"; exit status 1 on any failure.
"""

import argparse
import json
import os
import sys

import numpy as np

FP32_TOL = {"xt": 1e-6, "pred": 1e-4, "loss": 1e-5, "grad_norm": 1e-4, "grads": 2e-4,
            "m_after": 2e-4, "v_after": 5e-4}
BF16_TOL = {"xt": 4e-3, "pred": 3e-2, "loss": 3e-3, "grad_norm": 1e-2, "grads": 2e-1,
            "m_after": 2e-1, "v_after": 4e-1}


def load(d, name):
    f = os.path.join(d, name + ".npy")
    return np.load(f).astype(np.float64) if os.path.exists(f) else None


def load_dir(d, sub):
    p = os.path.join(d, sub)
    if not os.path.isdir(p):
        return None
    return {f[:-4]: np.load(os.path.join(p, f)).astype(np.float64)
            for f in sorted(os.listdir(p)) if f.endswith(".npy")}


def rel_max(a, b):
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-30))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("ref")
    ap.add_argument("test")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply the tolerances")
    ap.add_argument("--bf16", action="store_true",
                    help="bf16 activations: the bf16 tolerances (see the top)")
    ap.add_argument("--verbose", "-v", action="store_true", help="one line per tensor")
    a = ap.parse_args(argv)
    k = 30.0 if a.bf16 else a.scale  # the update and EMA bounds
    tols = BF16_TOL if a.bf16 else {n: v * a.scale for n, v in FP32_TOL.items()}
    res = {"pass": 0, "fail": 0}

    def report(name, ok, msg):
        res["pass" if ok else "fail"] += 1
        print("%s %-28s %s" % ("PASS" if ok else "FAIL", name, msg))

    try:
        with open(os.path.join(a.ref, "meta.json")) as f:
            train = json.load(f)["train"]
    except (OSError, ValueError, KeyError):
        print("compare: error: %s/meta.json missing or malformed (write REF with oracle.py)" %
              a.ref, file=sys.stderr)
        return 2

    for name in ("xt", "pred"):
        tol = tols[name]
        r, t = load(a.ref, name), load(a.test, name)
        if r is None or t is None or r.shape != t.shape:
            report(name, False, "missing or shape mismatch")
            continue
        e = rel_max(t, r)
        report(name, e <= tol, "max|d|/max|ref| %.3e (tol %.1e)" % (e, tol))
    for name in ("loss", "grad_norm"):
        tol = tols[name]
        r, t = load(a.ref, name), load(a.test, name)
        if r is None or t is None:
            report(name, False, "missing")
            continue
        e = abs(float(t.reshape(-1)[0]) - float(r.reshape(-1)[0])) / max(abs(float(r[0])), 1e-30)
        report(name, e <= tol, "ref %.9g test %.9g rel %.3e (tol %.1e)" %
               (r[0], t.reshape(-1)[0], e, tol))

    rg, tg = load_dir(a.ref, "grads"), load_dir(a.test, "grads")
    for sub in ("grads", "m_after", "v_after"):
        tol = tols[sub]
        r, t = load_dir(a.ref, sub), load_dir(a.test, sub)
        if r is None or t is None:
            if sub == "grads":
                report(sub, False, "missing")
            continue
        worst, wn, bad = 0.0, "", []
        for n, rv in r.items():
            if n not in t or t[n].shape != rv.shape:
                bad.append(n)
                continue
            e = rel_max(t[n], rv)
            if a.verbose:
                print("     %s/%s %.3e" % (sub, n, e))
            if e > worst:
                worst, wn = e, n
        extra = sorted(set(t) - set(r))
        ok = worst <= tol and not bad and not extra
        report(sub, ok, "worst %.3e at %s (tol %.1e)%s%s" %
               (worst, wn, tol, "; missing/shape: %s" % bad[:4] if bad else "",
                "; unexpected: %s" % extra[:4] if extra else ""))

    rp, tp = load_dir(a.ref, "params_after"), load_dir(a.test, "params_after")
    rv = load_dir(a.ref, "v_after")
    lr_t = float(load(a.ref, "lr")[0])
    scale = float(load(a.ref, "clip_scale")[0])
    s, b1, b2, eps = int(train["step"]), train["b1"], train["b2"], train["eps"]
    bc1, bc2 = 1 - b1 ** (s + 1), 1 - b2 ** (s + 1)
    dps = {}
    if rp is None or tp is None or rv is None or rg is None or tg is None:
        report("params_after", False, "missing params_after/v_after/grads")
    else:
        worst, wn, maxd = 0.0, "", 0.0
        for n, r in rp.items():
            if n not in tp or n not in tg or tp[n].shape != r.shape:
                worst, wn = float("inf"), n
                continue
            d = np.abs(tp[n] - r)
            dps[n] = d
            dg = np.abs(tg[n] - rg[n]) * scale
            den = np.sqrt(rv[n] / bc2) + eps
            allowed = lr_t * k * (1e-3 + 2 * ((1 - b1) / bc1) * dg / den) + \
                2 * np.spacing(np.abs(r).astype(np.float32)).astype(np.float64)
            q = float(np.max(d / allowed))
            maxd = max(maxd, float(np.max(d)) / lr_t)
            if q > worst:
                worst, wn = q, n
        report("params_after", worst <= 1.0, "worst err/bound %.3f at %s; max|d|/lr_t %.3e" %
               (worst, wn, maxd))
    re_, te = load_dir(a.ref, "ema_after"), load_dir(a.test, "ema_after")
    if re_ is not None and te is not None and dps:
        dec = train["ema_decay"]
        worst, wn = 0.0, ""
        for n, r in re_.items():
            if n not in te or n not in dps:
                worst, wn = float("inf"), n
                continue
            d = np.abs(te[n] - r)
            allowed = (1 - dec) * dps[n] + 3 * np.spacing(
                np.abs(r).astype(np.float32)).astype(np.float64) + 1e-3 * k * (1 - dec) * lr_t
            q = float(np.max(d / allowed))
            if q > worst:
                worst, wn = q, n
        report("ema_after", worst <= 1.0, "worst err/bound %.3f at %s" % (worst, wn))
    print("%d passed, %d failed" % (res["pass"], res["fail"]))
    return 1 if res["fail"] else 0


if __name__ == "__main__":
    sys.exit(main())
