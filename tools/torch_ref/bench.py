#!/usr/bin/env python3
"""bench.py — the PyTorch speed reference for stepgraph: the same DDPM training step, done the
way a PyTorch user would do it with PyTorch's best settings.

  bench.py --model unet_cifar --batch 128 --precision bf16 --mode compile [--tf32 on|off]
           [--steps 50] [--warmup 10] [--params DIR] [--device cuda|cpu] [--profile N]
  bench.py --parity DIR [--precision fp32|bf16] [--out OUT]

One step: gather a batch of uint8 images from a dataset held on the device (random indices,
random flips, [-1,1]), t ~ U[0,T), eps ~ N(0,1), x_t, forward (bf16 autocast for bf16), MSE
in fp32, backward, clip_grad_norm_(1.0), AdamW (fused=True on CUDA) with the linear warmup of
docs/model.md, EMA (torch._foreach_lerp_). channels_last, cudnn.benchmark, TF32 per --tf32,
dropout on (train mode), attention via F.scaled_dot_product_attention when available.

Modes: eager | compile | max-autotune | max-autotune-no-cudagraphs | reduce-overhead (a comma
list runs several, one JSON line each). torch.compile wraps the model; the optimizer and EMA
stay eager unless --compile-optimizer.

Timing: CUDA events around every step; warm-up steps (compilation included) first, then the
median and spread of --steps steps. Prints one JSON line per mode on stdout.

Memory: max_memory_allocated over the timed steps, and step_memory_bytes, the figure to compare
across modes: the same, except in the modes that replay CUDA graphs (reduce-overhead,
max-autotune), where the replays bypass the allocator and the step's activations are counted only
while the graphs are recorded in the warm-up (CUDAGRAPH_MODES): there it is the peak of the
warm-up after its first step (max_memory_allocated_warmup_after_first) and of the timed steps.

--parity DIR: load DIR (the oracle.py input folder), run the oracle's single step (dropout
off, hand AdamW, EMA) on the device, and write outputs in oracle.py's format to --out
(default DIR/out_torch_<device>_<precision>).
"""

import argparse
import json
import math
import os
import re
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model as M  # noqa: E402
import oracle as O  # noqa: E402

COMPILE_MODES = {"compile": None, "max-autotune": "max-autotune",
                 "max-autotune-no-cudagraphs": "max-autotune-no-cudagraphs",
                 "reduce-overhead": "reduce-overhead"}

# The modes whose step replays CUDA graphs (CUDA graph trees). A graph's replays do not go
# through the caching allocator: once recorded, its intermediates (the activations) sit in the
# graph's private pool (the backward's gradients too), and max_memory_allocated over the timed
# steps counts little more than what the eager code keeps between steps (parameters, AdamW
# moments, EMA, the dataset). The step's memory is then the peak with the recording, which
# happens in the warm-up (step_memory_bytes).
CUDAGRAPH_MODES = {"reduce-overhead", "max-autotune"}


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def graph_pool_bytes():
    """Bytes reserved in CUDA graph private pools (memory_snapshot's segments whose pool id is
    not the default (0, 0)) on the current device; None where the snapshot cannot say."""
    try:
        segs = torch.cuda.memory_snapshot()
        dev = torch.cuda.current_device()
    except Exception:
        return None
    total = 0
    for sg in segs:
        pid = sg.get("segment_pool_id")
        if pid is None:
            return None
        if sg.get("device", dev) == dev and tuple(pid) != (0, 0):
            total += int(sg.get("total_size", 0))
    return total


def step_memory(mode, timed, recording):
    """(bytes, basis): the memory a mode's step needs, comparable across modes (the plain
    modes: max_memory_allocated over the timed steps; the CUDA graph modes: the peak with the
    warm-up after its first step, where the graphs were recorded, CUDAGRAPH_MODES says why; the
    first step is left out: it runs eagerly, cudnn.benchmark's trial workspaces among it)"""
    if mode in CUDAGRAPH_MODES and recording is not None:
        return (max(timed, recording),
                "with the recording (CUDA graph replays bypass the allocator)")
    return timed, "timed steps"


def torch_major_minor():
    v = torch.__version__.split("+")[0].split(".")
    try:
        return int(v[0]), int(v[1])
    except (ValueError, IndexError):
        return 0, 0


def set_tf32(on, api="legacy"):
    """TF32 for matmuls and cuDNN convs. api=legacy: torch.backends.cuda.matmul.allow_tf32 and
    torch.backends.cudnn.allow_tf32 (works from 1.x to 2.11; newer torch may warn). api=new:
    the fp32_precision attributes of torch >= 2.9 (mixing the two APIs makes some torch
    versions raise inside inductor, so only one is ever used). Returns what was set."""
    if api == "new":
        names = []
        for mod, attr in ((torch.backends, "fp32_precision"),
                          (torch.backends.cuda.matmul, "fp32_precision"),
                          (getattr(torch.backends.cudnn, "conv", None), "fp32_precision"),
                          (getattr(torch.backends.cudnn, "rnn", None), "fp32_precision")):
            if mod is not None and hasattr(mod, attr):
                setattr(mod, attr, "tf32" if on else "ieee")
                names.append(attr)
        if names:
            return "new"
        log("bench: the fp32_precision API is not in torch %s; using the legacy flags" %
            torch.__version__)
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on
    return "legacy"


def env_info(device):
    info = {"torch": torch.__version__, "device": str(device)}
    if device.type == "cuda":
        p = torch.cuda.get_device_properties(device)
        info.update(gpu=p.name, sm_count=p.multi_processor_count,
                    gpu_mem_bytes=p.total_memory, cuda=torch.version.cuda,
                    cudnn=torch.backends.cudnn.version())
    return info


def percentile(xs, q):
    s = sorted(xs)
    if not s:
        return float("nan")
    k = (len(s) - 1) * q
    lo, hi = math.floor(k), math.ceil(k)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


class Step:
    """The training step and its state."""

    def __init__(self, a, cfg, device, mode):
        self.a, self.cfg, self.device, self.mode = a, cfg, device, mode
        T = a.T
        self.T = T
        abar = O.ddpm_abar(T, 1e-4, 0.02)
        self.sa = torch.tensor(np.sqrt(abar), dtype=torch.float32, device=device)
        self.sb = torch.tensor(np.sqrt(1.0 - abar), dtype=torch.float32, device=device)
        g = torch.Generator(device="cpu").manual_seed(a.seed)
        n = a.ndata
        data = torch.randint(0, 256, (n, cfg["img"], cfg["img"], cfg["in_ch"]), generator=g,
                             dtype=torch.uint8)
        self.data = data.to(device)
        model = M.UNet(cfg, use_sdpa=(a.attn == "sdpa"))
        model.reset_parameters(generator=g)
        if a.params:
            M.load_stepgraph_params(model, a.params)
        model = model.to(device)
        if a.channels_last:
            model = model.to(memory_format=torch.channels_last)
        model.train()
        self.model = model
        self.params = [p for p in model.parameters()]
        self.ema = [p.detach().clone() for p in self.params]
        kw = dict(lr=a.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
        self.opt = None
        self.opt_kind = "foreach"
        if device.type == "cuda" and not a.compile_optimizer:
            try:
                self.opt = torch.optim.AdamW(self.params, fused=True, **kw)
                self.opt_kind = "fused"
            except (TypeError, RuntimeError, ValueError):
                self.opt = None
        self.lr_tensor = False
        if self.opt is None and a.compile_optimizer and hasattr(torch, "compile"):
            # a tensor lr, so that the warmup's changing lr does not recompile the step
            try:
                kw2 = dict(kw, lr=torch.tensor(a.lr, device=device))
                self.opt = torch.optim.AdamW(self.params, foreach=True,
                                             capturable=(device.type == "cuda"), **kw2)
                self.lr_tensor = True
            except (TypeError, ValueError, RuntimeError) as e:
                log("bench: tensor-lr AdamW unavailable (%s); lr warmup may recompile" % e)
                self.opt = None
        if self.opt is None:
            try:
                self.opt = torch.optim.AdamW(self.params, foreach=True, **kw)
            except TypeError:
                self.opt = torch.optim.AdamW(self.params, **kw)
                self.opt_kind = "default"
        self.fwd = model
        if mode != "eager":
            self.fwd = torch.compile(model, mode=COMPILE_MODES[mode])
        self.opt_update = self._opt_update
        if a.compile_optimizer and hasattr(torch, "compile"):
            self.opt_update = torch.compile(self._opt_update, fullgraph=False)
            self.opt_kind += "+compiled"
        self.amp = a.precision == "bf16"
        self.step_no = 0
        self.mark_step = None
        if mode == "reduce-overhead":
            comp = getattr(torch, "compiler", None)
            self.mark_step = getattr(comp, "cudagraph_mark_step_begin", None)

    def batch(self):
        d = self.device
        B = self.a.batch
        idx = torch.randint(0, self.data.shape[0], (B,), device=d)
        x0 = self.data[idx].permute(0, 3, 1, 2).float() * (1.0 / 127.5) - 1.0   # NHWC storage
        flip = torch.rand(B, device=d) < 0.5
        x0 = torch.where(flip[:, None, None, None], x0.flip(3), x0)
        if self.a.channels_last:
            x0 = x0.contiguous(memory_format=torch.channels_last)
        t = torch.randint(0, self.T, (B,), device=d)
        eps = torch.randn_like(x0)
        xt = self.sa[t].view(-1, 1, 1, 1) * x0 + self.sb[t].view(-1, 1, 1, 1) * eps
        return xt, t, eps

    @torch.no_grad()
    def _opt_update(self):
        self.opt.step()
        decay = self.a.ema_decay
        if hasattr(torch, "_foreach_lerp_"):
            torch._foreach_lerp_(self.ema, self.params, 1.0 - decay)
        else:
            torch._foreach_mul_(self.ema, decay)
            torch._foreach_add_(self.ema, self.params, alpha=1.0 - decay)

    def __call__(self):
        a = self.a
        if self.mark_step is not None:
            self.mark_step()
        xt, t, eps = self.batch()
        if self.amp:
            with torch.autocast(device_type=self.device.type, dtype=torch.bfloat16):
                pred = self.fwd(xt, t)
        else:
            pred = self.fwd(xt, t)
        loss = F.mse_loss(pred.float(), eps)
        loss.backward()
        try:
            torch.nn.utils.clip_grad_norm_(self.params, a.clip, foreach=True)
        except TypeError:
            torch.nn.utils.clip_grad_norm_(self.params, a.clip)
        lr_t = a.lr * min(1.0, (self.step_no + 1) / a.lr_warmup) if a.lr_warmup > 0 else a.lr
        for gr in self.opt.param_groups:
            if self.lr_tensor:
                gr["lr"].fill_(lr_t)
            else:
                gr["lr"] = lr_t
        self.opt_update()
        self.opt.zero_grad(set_to_none=True)
        self.step_no += 1
        return loss


def bench_mode(a, cfg, device, mode):
    base = dict(tool="torch_ref_bench", model=a.model, batch=a.batch, precision=a.precision,
                mode=mode, tf32=a.tf32 if device.type == "cuda" else "n/a",
                tf32_api=a.tf32_api, channels_last=a.channels_last, attn=a.attn,
                dropout=cfg["dropout"],
                compile_optimizer=a.compile_optimizer, steps=a.steps, warmup=a.warmup)
    base.update(env_info(device))
    if mode != "eager" and not hasattr(torch, "compile"):
        msg = "torch.compile unavailable in torch %s" % torch.__version__
        log(msg)
        base.update(skipped=True, reason=msg)
        return base
    if mode != "eager":
        try:
            torch._dynamo.reset()
        except Exception:
            pass
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    torch.manual_seed(a.seed)
    st = Step(a, cfg, device, mode)
    t0 = time.perf_counter()
    loss = None
    peak_first = None  # the first step's peak: cudnn.benchmark's trial workspaces among it
    for i in range(a.warmup):
        loss = st()
        if cuda and i == 0 and a.warmup > 1:
            torch.cuda.synchronize()
            peak_first = torch.cuda.max_memory_allocated(device)
            torch.cuda.reset_peak_memory_stats(device)
    if cuda:
        torch.cuda.synchronize()
    warm_s = time.perf_counter() - t0
    # the rest of the warm-up: a CUDA graph mode records its graphs there (CUDAGRAPH_MODES)
    peak_rest = torch.cuda.max_memory_allocated(device) if cuda else None
    peak_incl_warmup = max(peak_first or 0, peak_rest) if cuda else None
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    times = []
    if cuda:
        ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(a.steps)]
        w0 = time.perf_counter()
        for s, e in ev:
            s.record()
            loss = st()
            e.record()
        torch.cuda.synchronize()
        wall = time.perf_counter() - w0
        times = [s.elapsed_time(e) for s, e in ev]
    else:
        w0 = time.perf_counter()
        for _ in range(a.steps):
            s = time.perf_counter()
            loss = st()
            times.append((time.perf_counter() - s) * 1e3)
        wall = time.perf_counter() - w0
    fwd_flops, conv_flops = M.forward_flops(cfg)
    step_flops = 3.0 * fwd_flops * a.batch
    med = statistics.median(times)
    base.update(
        skipped=False,
        params=sum(p.numel() for p in st.params),
        optimizer=st.opt_kind,
        ms_per_step=med, ms_min=min(times), ms_p10=percentile(times, 0.10),
        ms_p90=percentile(times, 0.90), ms_max=max(times), ms_mean=statistics.fmean(times),
        wall_ms_per_step=wall * 1e3 / a.steps,
        img_per_s=a.batch / (med / 1e3),
        fwd_gflop_per_img=fwd_flops / 1e9, tflop_per_step=step_flops / 1e12,
        achieved_tflops=step_flops / (med / 1e3) / 1e12,
        warmup_s=warm_s,
        loss_last=float(loss.detach()) if loss is not None else None,
    )
    if cuda:
        timed = torch.cuda.max_memory_allocated(device)
        need, basis = step_memory(mode, timed, peak_rest)
        base.update(max_memory_allocated=timed,
                    max_memory_allocated_incl_warmup=peak_incl_warmup,
                    max_memory_allocated_warmup_after_first=peak_rest,
                    max_memory_reserved=torch.cuda.max_memory_reserved(device),
                    step_memory_bytes=need, step_memory_basis=basis)
        if mode in CUDAGRAPH_MODES:
            base.update(graph_pool_bytes=graph_pool_bytes())
    if a.profile > 0:
        base["profile"] = profile_steps(st, a.profile, cuda)
    del st
    return base


# Kernel families, first match wins: Triton's pointwise and reduction kernels first (their
# names list the ops they fused, "convolution" among them: a bias add or a cast around a cuDNN
# call, not a convolution), attention before convolution (cuDNN's fused attention carries
# "cudnn" in its name), convolution before GEMM (implicit GEMMs carry "gemm").
KERNEL_FAMILIES = (
    ("triton", re.compile(r"^triton_(poi|red|per)")),
    ("attention", re.compile(r"sdpa|flash|fmha|attention|attn", re.I)),
    ("convolution", re.compile(r"conv|fprop|dgrad|wgrad|implicit_gemm|cudnn|nhwc|nchw", re.I)),
    ("gemm", re.compile(r"gemm|cutlass|nvjet|cublas|matmul|_mm_|addmm|bmm", re.I)),
    ("norm", re.compile(r"norm|welford", re.I)),
    ("optimizer", re.compile(r"adam|foreach|lerp|multi_tensor", re.I)),
)


def kernel_family(name):
    for fam, rx in KERNEL_FAMILIES:
        if rx.search(name):
            return fam
    return "other"


def profile_steps(st, n, cuda):
    """Profile n more steps (after the timed ones) with torch.profiler: the device time per
    kernel family (convolution vs everything else decides where stepgraph's next speed work
    goes), and the 15 costliest kernels. On the CPU, the self CPU time per operator."""
    try:
        from torch.profiler import ProfilerActivity, profile
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        with profile(activities=acts) as prof:
            for _ in range(n):
                st()
            if cuda:
                torch.cuda.synchronize()
        fams, kernels = {}, []
        for ev in prof.key_averages():
            if cuda:
                dt = getattr(ev, "device_type", None)
                if dt is None or "CUDA" not in str(dt):
                    continue
                us = getattr(ev, "self_device_time_total", None)
                if us is None:
                    us = getattr(ev, "self_cuda_time_total", 0)
            else:
                us = ev.self_cpu_time_total
            if not us:
                continue
            fam = kernel_family(ev.key)
            fams[fam] = fams.get(fam, 0.0) + us / 1e3 / n
            kernels.append((us / 1e3 / n, ev.count // n, fam, ev.key[:160]))
        kernels.sort(reverse=True)
        total = sum(fams.values())
        return dict(steps=n, timer="device" if cuda else "cpu", ms_per_step_total=total,
                    ms_per_step_by_family=dict(sorted(fams.items(), key=lambda kv: -kv[1])),
                    share_by_family={k: (v / total if total else 0.0) for k, v in fams.items()},
                    top=[dict(ms_per_step=k[0], calls_per_step=k[1], family=k[2], name=k[3])
                         for k in kernels[:15]])
    except Exception as e:  # the profile is extra: never lose the timing over it
        log("bench: profile failed: %s: %s" % (type(e).__name__, e))
        return dict(error="%s: %s" % (type(e).__name__, e))


def parity(a, device):
    cfg, train = O.read_config(a.parity)
    model = M.UNet(cfg, use_sdpa=(a.attn == "sdpa")).to(device=device, dtype=torch.float32)
    M.load_stepgraph_params(model, a.parity)
    if a.channels_last:
        model = model.to(memory_format=torch.channels_last)
    x0, t, eps = O.load_inputs(a.parity)
    state = O.load_state(model, a.parity)
    O.load_dropout_masks(model, a.parity, device, torch.float32)
    state = {k: {n: v.to(device) for n, v in d.items()} for k, d in state.items()}
    res = O.train_step(model, train, x0, t, eps, state, device=device, dtype=torch.float32,
                       autocast_dtype=torch.bfloat16 if a.precision == "bf16" else None,
                       labels=O.load_labels(a.parity))
    out = a.out or os.path.join(a.parity, "out_torch_%s_%s" % (device.type, a.precision))
    O.write_outputs(out, res, train=train)
    r = dict(tool="torch_ref_parity", dir=a.parity, out=out, precision=a.precision, tf32=a.tf32,
             loss=res["loss"], grad_norm=res["grad_norm"], clip_scale=res["clip_scale"],
             lr=res["lr"])
    r.update(env_info(device))
    return r


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="unet_cifar", choices=sorted(M.CONFIGS))
    ap.add_argument("--batch", type=int, default=0, help="default: the config's batch")
    ap.add_argument("--precision", choices=["bf16", "fp32"], default=None,
                    help="default: bf16 on CUDA, fp32 on CPU")
    ap.add_argument("--mode", default="eager",
                    help="eager|compile|max-autotune|max-autotune-no-cudagraphs|"
                         "reduce-overhead, or a comma list")
    ap.add_argument("--tf32", choices=["on", "off"], default="off",
                    help="TF32 for fp32 matmuls and cuDNN convs (CUDA)")
    ap.add_argument("--tf32-api", choices=["legacy", "new"], default="legacy",
                    help="which torch API sets TF32 (see set_tf32)")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--params", default=None, help="stepgraph params folder to start from")
    ap.add_argument("--device", default=None, help="cuda (default when available) or cpu")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--attn", choices=["sdpa", "math"], default="sdpa")
    ap.add_argument("--no-channels-last", dest="channels_last", action="store_false")
    ap.add_argument("--compile-optimizer", action="store_true",
                    help="torch.compile the AdamW(foreach)+EMA update instead of fused AdamW")
    ap.add_argument("--dropout", type=float, default=None, help="override the config's dropout")
    ap.add_argument("--ndata", type=int, default=4096, help="synthetic dataset size on device")
    ap.add_argument("--lr", type=float, default=2e-4)
    ap.add_argument("--lr-warmup", type=int, default=5000)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--ema-decay", type=float, default=0.9999)
    ap.add_argument("--T", type=int, default=1000)
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="after timing, profile N steps: device time per kernel family")
    ap.add_argument("--parity", default=None, metavar="DIR")
    ap.add_argument("--out", default=None, help="--parity output folder")
    a = ap.parse_args(argv)

    if a.device:
        device = torch.device(a.device)
    else:
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if a.precision is None:
        a.precision = "bf16" if device.type == "cuda" else "fp32"
    if device.type == "cuda":
        if not torch.cuda.is_available():
            log("bench: error: CUDA is not available in this torch %s" % torch.__version__)
            return 2
        torch.backends.cudnn.benchmark = True
        a.tf32_api = set_tf32(a.tf32 == "on", a.tf32_api)
    if a.attn == "sdpa" and not hasattr(F, "scaled_dot_product_attention"):
        a.attn = "math"

    if a.parity:
        try:
            r = parity(a, device)
        except (OSError, ValueError, KeyError) as e:
            log("bench: error: %s" % e)
            return 2
        print(json.dumps(r), flush=True)
        return 0

    cfg = M.normalize_config(a.model)
    if a.dropout is not None:
        cfg["dropout"] = a.dropout
    if a.batch <= 0:
        a.batch = int(M.CONFIGS[a.model].get("batch", 32))
    modes = [m.strip() for m in a.mode.split(",") if m.strip()]
    for m in modes:
        if m != "eager" and m not in COMPILE_MODES:
            log("bench: error: unknown mode %r" % m)
            return 2
    rc = 0
    for m in modes:
        try:
            r = bench_mode(a, cfg, device, m)
        except RuntimeError as e:   # OOM (torch.cuda.OutOfMemoryError), unsupported op, ...
            msg = (str(e).strip().splitlines() or [type(e).__name__])[0]
            log("bench: %s failed: %s" % (m, msg))
            r = dict(tool="torch_ref_bench", model=a.model, batch=a.batch, mode=m,
                     precision=a.precision, skipped=True, failed=True,
                     reason="%s: %s" % (type(e).__name__, msg))
            rc = 3
            if device.type == "cuda":
                torch.cuda.empty_cache()
        print(json.dumps(r), flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
