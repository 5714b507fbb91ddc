#!/usr/bin/env python3
"""diffusers_interop.py BUILD REPO — stepgraph against the real diffusers (run by
tests/diffusers_interop.sh in a venv with the pinned diffusers and safetensors).

1. stepgraph -> diffusers, for unet_tiny and unet_cifar (batch 2): train 2 CPU steps, `ckpt
   export --diffusers`, UNet2DModel.from_pretrained (no missing, unexpected or misshapen
   weights), and diffusers' forward on fresh random x_t and t (0, 999 and between) equals
   stepgraph's CPU forward on the same inputs from the same checkpoint (tests/sg_forward_dump).
2. diffusers -> stepgraph, for unet_tiny: a UNet2DModel with the exported config and other
   random weights (GroupNorm affines too), saved with save_pretrained: stepgraph's forward
   from the folder equals diffusers'; the same weights under diffusers' deprecated attention
   names (query/key/value/proj_attn) give the same bits; `train --init-from` (lr 0, EMA decay
   1) keeps the weights bit for bit through a checkpoint and `ckpt export --diffusers --raw`;
   a model of another architecture is refused, naming the difference; a corrupt safetensors
   file is a clear error, not a crash. `train --init-from` a stepgraph checkpoint takes its
   parameters and its EMA bit for bit.
3. DDPMPipeline.from_pretrained on an exported folder draws images (3 inference steps), and
   `sample --weights` on it draws what `sample --ckpt` draws from the checkpoint, bit for bit.
4. The cosine noise schedule (train --beta-schedule cosine --timesteps 400): the export's
   scheduler says squaredcos_cap_v2 over 400 steps; DDPMScheduler.from_pretrained's
   alphas_cumprod (diffusers computes them in fp32) equals stepgraph's abar (float64, from the
   checkpoint and from the exported folder alike, bit for bit) to 2e-6, and the float64 formula
   of improved-diffusion written out here to 1e-13 relative; DDPMPipeline draws images with it;
   a scheduler stepgraph does not train (scaled_linear) is refused, naming beta_schedule.
5. v prediction (train --prediction v): the export's scheduler says v_prediction, and
   `sample --weights` on the folder draws what `sample --ckpt` draws, bit for bit (the folder's
   prediction type read back); DDPMPipeline draws images with it.
6. DDIM (eps and v models): DDIMScheduler.from_config of the exported scheduler config visits
   the timesteps `sample --ddim-steps S` visits (trailing spacing), and its loop (float64, eta 0,
   clip_sample as exported and off) from a given x_T ends where stepgraph's sampler does from
   the same x_T (tests/sg_forward_dump --ddim: the sampler's table and update, fp32), for S
   dividing T; and with eta 1, diffusers handed the noise stepgraph's steps draw (for other S, diffusers' last step goes to t = 0 instead of x_0: T // S steps
   back from the last timestep, not to the next one in its list).
   Spacings (sample --spacing): leading (S 4, 7, 10; steps_offset 0 and 1) visits
   DDIMScheduler's leading timesteps and its loop ends where stepgraph's does; linspace (S 10)
   visits DDIMScheduler's linspace timesteps, and DDIM with eta 1 on them ends where
   DDPMScheduler given those timesteps as a list does, handed the same noise (diffusers' own
   linspace loops step to t - T // S, not to the next visited timestep: graph/sampler.h); and
   DDPMScheduler over 10 of its T steps at its default leading spacing (DDPMPipeline's
   num_inference_steps) ends where `sample --ddim-steps 10 --eta 1 --spacing leading` does.
   `sample --weights` notes a folder whose scheduler says another spacing (absent: leading) or
   fixed_large, or is DPMSolverMultistepScheduler (absent spacing: linspace), naming the flags,
   or use_karras_sigmas (--karras), and says nothing where the run follows it or a flag chose.
   DPM-Solver++(2M) (sample --solver dpm++2m; eps and v models): DPMSolverMultistepScheduler
   with its defaults, from the exported config at each spacing (trailing 1, 2, 4 clipped and 10
   steps; linspace 10 and 20; leading 7 with steps_offset 1), visits stepgraph's timesteps, and
   its loop (float32 steps) from a given x_T ends where stepgraph's sampler does; clipped is
   diffusers' thresholding at ratio 1 and maximum 1 (a clamp of x0) against CLIP 1. DDIM over
   the same timesteps ends elsewhere (the check can tell). use_karras_sigmas (10 steps, and 50
   clipped; sample --karras): the same timesteps (each Karras sigma's, rounded) and loop.
7. DDPM (T = 50): DDPMScheduler.from_config of the exported config, its loop in float64 with
   the noise stepgraph's sampler draws (sg_forward_dump --ddpm writes it; diffusers'
   randn_tensor hands it over), from the same x_T, clip_sample on and off, variance_type
   fixed_small and fixed_large (sample --variance large): the same timesteps,
   noise at every step but the last, and the same images (tolerance TOL_DDIM).

8. Class conditioning (train --classes 6 on the synthetic shapes): the export says
   num_class_embeds 7 (the classes and the null class), UNet2DModel.from_pretrained loads the
   class_embedding, and its forward with class_labels equals stepgraph's (tests/sg_forward_dump
   --labels); other labels give another prediction (the check can tell); classifier-free
   guidance: diffusers' DDIM loop mixing its conditional and null-class predictions
   (eps_null + w (eps_class - eps_null), w 3) from a given x_T ends where stepgraph's guided
   sampler does (sg_forward_dump --labels --guidance --ddim); `sample --weights` on the folder
   draws what `sample --ckpt` draws with --class and --guidance, bit for bit. Guidance rescale
   (Lin et al. 2024; sample --guidance-rescale 0.7): diffusers' own rescale_noise_cfg (taken
   from its source) on the mix in the same loop ends where stepgraph's sampler does.
9. Zero terminal SNR (train --zero-snr 1 --prediction v, T = 40): the export says
   rescale_betas_zero_snr; stepgraph's abar (from the checkpoint and the folder alike, bit for
   bit, ending at 0 exactly) equals diffusers' alphas_cumprod (fp32) to 2e-6 and its
   rescale_zero_terminal_snr in float64 to 1e-12 relative; `sample --weights` == `sample
   --ckpt`; diffusers' DDIM loops (section 6) and DDPM loops (section 7) on the folder, whose
   first step is at abar = 0, end where stepgraph's sampler does.

Tolerance: max|stepgraph - diffusers| <= 1e-4 max|diffusers|, with diffusers run in float64
as the truth and stepgraph in fp32 (as tests/test_torch_parity.c: fp32 rounding through ~40
layers of O(1e2..1e3)-term dot products stays near 1e-6 relative; 1e-4 leaves room). diffusers
evaluates the timestep sinusoid in fp32 even for a float64 model (sin of t*f with t up to 999:
an argument error of ~1e-4 rad), so for the float64 truth its time_proj is replaced by the
same formula (its own flip_sin_to_cos / downscale_freq_shift) in float64; stepgraph computes
it in float64 and rounds once. diffusers' unmodified fp32 forward is compared too, under the
same bound (measured: ~1e-6 for both models; the padding's effect is ~1e-1).

Exit status: 0 all passed, 1 any failure.
"""

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch

# With huggingface_hub 0.26 on this torch, nothing imports safetensors.torch before diffusers
# calls safetensors.torch.load_file; import it first.
import safetensors.torch  # noqa: F401,E402
from diffusers import DDIMScheduler, DDPMPipeline, DDPMScheduler, UNet2DModel  # noqa: E402

BUILD, REPO = sys.argv[1], sys.argv[2]
TRAIN, CKPT = os.path.join(BUILD, "train"), os.path.join(BUILD, "ckpt")
SAMPLE = os.path.join(BUILD, "sample")
FWD = os.path.join(BUILD, "tests", "sg_forward_dump")
TOL, TOL_FP32 = 1e-4, 1e-4
TOL_DDIM = 1e-3
failures = 0


def check(ok, what):
    global failures
    print("%s %s" % ("PASS" if ok else "FAIL", what), flush=True)
    if not ok:
        failures += 1


def run(cmd, expect_ok=True):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if expect_ok and r.returncode != 0:
        print(r.stdout)
        raise SystemExit("FAIL command %s exited %d" % (" ".join(cmd), r.returncode))
    return r


class ExactTimesteps(torch.nn.Module):
    """diffusers' get_timestep_embedding (with the module's own settings), in float64."""

    def __init__(self, tp):
        super().__init__()
        self.n, self.flip, self.shift = tp.num_channels, tp.flip_sin_to_cos, tp.downscale_freq_shift

    def forward(self, t):
        half = self.n // 2
        i = torch.arange(half, dtype=torch.float64)
        a = t.double()[:, None] * torch.exp(-math.log(10000.0) * i / (half - self.shift))[None]
        emb = torch.cat([torch.sin(a), torch.cos(a)], dim=-1)
        return torch.cat([emb[:, half:], emb[:, :half]], dim=-1) if self.flip else emb


def diffusers_fwd(model, x, t, exact, y=None):
    m = model.double() if exact else model.float()
    if exact:
        saved, m.time_proj = m.time_proj, ExactTimesteps(m.time_proj)
    with torch.no_grad():
        y = m(x.double() if exact else x.float(), t, class_labels=y).sample
    if exact:
        m.time_proj = saved
    return y.double()


def labels_file(tmp, labels):
    """--labels Y.i32 for sg_forward_dump (a class-conditional model), or nothing."""
    if labels is None:
        return []
    lp = os.path.join(tmp, "labels.i32")
    np.asarray(labels, dtype="<i4").tofile(lp)
    return ["--labels", lp]


def stepgraph_fwd(weights, x, t, tmp, model=None, labels=None):
    """x [N,C,H,W] -> stepgraph's prediction [N,C,H,W] (float64 of the fp32 values)."""
    xp, tp, yp = (os.path.join(tmp, n) for n in ("x.f32", "t.i32", "y.f32"))
    x.permute(0, 2, 3, 1).contiguous().numpy().astype("<f4").tofile(xp)
    t.numpy().astype("<i4").tofile(tp)
    run([FWD] + labels_file(tmp, labels) + [weights, xp, tp, yp] + ([model] if model else []))
    y = np.fromfile(yp, dtype="<f4").reshape(x.shape[0], x.shape[2], x.shape[3], x.shape[1])
    return torch.from_numpy(y.astype(np.float64)).permute(0, 3, 1, 2)


def rel_err(a, ref):
    return float((a - ref).abs().max() / ref.abs().max())


def inputs(cfg, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2, cfg["in_channels"], cfg["sample_size"], cfg["sample_size"], generator=g)
    return x, torch.tensor([999, int(torch.randint(0, 999, (1,), generator=g))], dtype=torch.int32)


def trained_export(tmp, name, data, extra=(), tag=""):
    run_dir = os.path.join(tmp, name + tag + "_run")
    exp = os.path.join(tmp, name + tag + "_diffusers")
    run([TRAIN, "--model", name, "--data", data, "--steps", "2", "--batch", "2", "--backend",
         "cpu", "--out", run_dir, "--samples", "1", "--ddim-steps", "1", "--log-every", "1",
         "--lr", "1e-3", "--warmup", "1", "--ema-decay", "0.5"] + list(extra))
    ckpt = os.path.join(run_dir, "ckpt_00000002.sgck")
    run([CKPT, "export", ckpt, "--diffusers", exp])
    return ckpt, exp


def export_to_diffusers(tmp, name, data, seed):
    ckpt, exp = trained_export(tmp, name, data)
    with open(os.path.join(exp, "config.json")) as f:
        cfg = json.load(f)
    model, info = UNet2DModel.from_pretrained(exp, output_loading_info=True)
    check(not any(info.get(k) for k in ("missing_keys", "unexpected_keys", "mismatched_keys",
                                         "error_msgs")),
          "%s: from_pretrained loads every weight, nothing left over (%s)" % (name, info))
    model.eval()
    with safetensors.safe_open(os.path.join(exp, "diffusion_pytorch_model.safetensors"), "pt") as f:
        meta = f.metadata()
    check(meta.get("model") == name and meta.get("weights") == "ema",
          "%s: the safetensors metadata names the model and the EMA weights: %s" % (name, meta))
    x, t = inputs(cfg, seed)
    y_sg = stepgraph_fwd(ckpt, x, t, tmp)
    y64 = diffusers_fwd(model, x, t, exact=True)
    y32 = diffusers_fwd(model, x, t, exact=False)
    e64, e32 = rel_err(y_sg, y64), rel_err(y_sg, y32)
    check(e64 <= TOL, "%s: export -> diffusers forward (float64) vs stepgraph CPU forward: "
          "max|d|/max|ref| %.3e (tol %.0e), t = %s" % (name, e64, TOL, t.tolist()))
    check(e32 <= TOL_FP32, "%s: diffusers' own fp32 forward vs stepgraph: %.3e (tol %.0e)"
          % (name, e32, TOL_FP32))
    # the same function with the other padding would be far off: the comparison can tell
    cfg_sym = dict(cfg, downsample_padding=1)
    sym = UNet2DModel.from_config(cfg_sym)
    sym.load_state_dict(model.state_dict())
    e_sym = rel_err(y_sg, diffusers_fwd(sym, x, t, exact=True))
    check(e_sym > 100 * TOL, "%s: with downsample_padding 1 diffusers computes another function "
          "(%.3e apart): the comparison sees the padding" % (name, e_sym))
    return ckpt, exp, cfg


def diffusers_to_stepgraph(tmp, exp, cfg):
    torch.manual_seed(7)
    m = UNet2DModel.from_config({k: v for k, v in cfg.items() if not k.startswith("_")})
    with torch.no_grad():
        for n, p in m.named_parameters():
            if "norm" in n:  # GroupNorm affines: not the 1 / 0 of a fresh init
                p.add_(0.1 * torch.randn_like(p))
    m.eval()
    dm = os.path.join(tmp, "from_diffusers")
    m.save_pretrained(dm)
    DDPMScheduler(num_train_timesteps=1000, beta_start=1e-4, beta_end=0.02,
                  beta_schedule="linear").save_pretrained(dm)
    check(os.path.exists(os.path.join(dm, "diffusion_pytorch_model.safetensors")),
          "save_pretrained wrote safetensors")
    x, t = inputs(cfg, 11)
    y64 = diffusers_fwd(m, x, t, exact=True)
    y_dir = stepgraph_fwd(dm, x, t, tmp)
    e = rel_err(y_dir, y64)
    check(e <= TOL, "diffusers weights -> stepgraph (folder) forward vs diffusers float64: "
          "%.3e (tol %.0e)" % (e, TOL))

    # diffusers' deprecated attention names, as in google/ddpm-cifar10-32's files
    sd = safetensors.torch.load_file(os.path.join(dm, "diffusion_pytorch_model.safetensors"))
    ren = {".to_q.": ".query.", ".to_k.": ".key.", ".to_v.": ".value.", ".to_out.0.": ".proj_attn."}
    legacy = {}
    for k, v in sd.items():
        for a, b in ren.items():
            k = k.replace(a, b)
        legacy[k] = v
    check(any(".query." in k for k in legacy), "the model has attention weights to rename")
    lp = os.path.join(tmp, "legacy.safetensors")
    safetensors.torch.save_file(legacy, lp)
    y_leg = stepgraph_fwd(lp, x, t, tmp, model="unet_tiny")
    check(torch.equal(y_leg, y_dir), "deprecated attention names: the same bits")

    # train --init-from keeps the weights bit for bit (lr 0, EMA decay 1: nothing moves)
    run_dir, back = os.path.join(tmp, "init_run"), os.path.join(tmp, "init_back")
    r = run([TRAIN, "--model", "unet_tiny", "--data", "synthetic:16:16x16x3", "--steps", "1",
             "--batch", "2", "--backend", "cpu", "--out", run_dir, "--samples", "1",
             "--ddim-steps", "1", "--lr", "0", "--ema-decay", "1", "--init-from", dm])
    check("fresh run" in r.stdout, "train --init-from says it starts a fresh run")
    ck = os.path.join(run_dir, "ckpt_00000001.sgck")
    for flag, what in (([], "EMA"), (["--raw"], "parameters")):
        shutil.rmtree(back, ignore_errors=True)
        run([CKPT, "export", ck, "--diffusers", back] + flag)
        got = safetensors.torch.load_file(os.path.join(back, "diffusion_pytorch_model.safetensors"))
        same = set(got) == set(sd) and all(torch.equal(got[k], sd[k]) for k in sd)
        check(same, "--init-from -> checkpoint -> export --diffusers %s: every tensor bit-equal "
              "to the diffusers weights (%s)" % (" ".join(flag), what))
    info = json.loads(run([CKPT, "info", ck, "--json"]).stdout)
    check(info["meta"]["step"] == 1, "the --init-from run counted from step 0")

    # another architecture is refused, naming the difference; nothing is written
    bad_dir = os.path.join(tmp, "refused")
    r = run([TRAIN, "--model", "unet_tiny", "--ch", "64", "--data", "synthetic:16:16x16x3",
             "--steps", "1", "--out", bad_dir, "--backend", "cpu", "--init-from", dm],
            expect_ok=False)
    check(r.returncode != 0 and "another architecture: ch is 32 there, 64 here" in r.stdout,
          "another architecture is refused naming ch: %r" % r.stdout.strip()[-200:])
    r = run([TRAIN, "--model", "unet_tiny", "--down-pad", "symmetric", "--data",
             "synthetic:16:16x16x3", "--steps", "1", "--out", bad_dir, "--backend", "cpu",
             "--init-from", dm], expect_ok=False)
    check(r.returncode != 0 and "down_pad" in r.stdout,
          "the other padding is refused naming down_pad: %r" % r.stdout.strip()[-200:])
    # a corrupt safetensors file: a clear error, not a crash
    raw = open(lp, "rb").read()
    for what, data in (("truncated", raw[: len(raw) // 2]), ("header length", b"\xff" * 8 + raw[8:]),
                       ("header", raw[:8] + b"[" + raw[9:])):
        cp = os.path.join(tmp, "corrupt.safetensors")
        with open(cp, "wb") as f:
            f.write(data)
        r = run([FWD, cp, os.path.join(tmp, "x.f32"), os.path.join(tmp, "t.i32"),
                 os.path.join(tmp, "y.f32"), "unet_tiny"], expect_ok=False)
        check(r.returncode == 1 and "corrupt.safetensors" in r.stdout,
              "corrupt safetensors (%s): exit 1 with %r" % (what, r.stdout.strip()[-160:]))


def init_from_checkpoint(tmp, ckpt):
    """train --init-from a stepgraph checkpoint: its parameters and its EMA, bit for bit."""
    run_dir = os.path.join(tmp, "init_ckpt_run")
    run([TRAIN, "--model", "unet_tiny", "--data", "synthetic:16:16x16x3", "--steps", "1",
         "--batch", "2", "--backend", "cpu", "--out", run_dir, "--samples", "1",
         "--ddim-steps", "1", "--lr", "0", "--ema-decay", "1", "--init-from", ckpt])
    new = os.path.join(run_dir, "ckpt_00000001.sgck")
    for flag, what in (([], "parameters"), (["--ema"], "EMA")):
        a, b = os.path.join(tmp, "src.safetensors"), os.path.join(tmp, "new.safetensors")
        run([CKPT, "export", ckpt, "--safetensors", a] + flag)
        run([CKPT, "export", new, "--safetensors", b] + flag)
        x, y = safetensors.torch.load_file(a), safetensors.torch.load_file(b)
        check(set(x) == set(y) and all(torch.equal(x[k], y[k]) for k in x),
              "train --init-from CHECKPOINT: the %s are the checkpoint's, bit for bit" % what)
    src = safetensors.torch.load_file(os.path.join(tmp, "src.safetensors"))
    raw = os.path.join(tmp, "src_raw.safetensors")
    run([CKPT, "export", ckpt, "--safetensors", raw])
    check(any(not torch.equal(v, safetensors.torch.load_file(raw)[k]) for k, v in src.items()),
          "(the source checkpoint's EMA and parameters differ, so the two checks are distinct)")


def pipeline(exp, cfg):
    pipe = DDPMPipeline.from_pretrained(exp)
    check(pipe.scheduler.config.beta_schedule == "linear" and
          pipe.scheduler.config.num_train_timesteps == 1000 and pipe.scheduler.config.clip_sample,
          "DDPMPipeline: the scheduler is DDPM, linear betas, T = 1000, clip_sample")
    pipe.set_progress_bar_config(disable=True)
    out = pipe(batch_size=2, num_inference_steps=3, generator=torch.manual_seed(0),
               output_type="np").images
    s, c = cfg["sample_size"], cfg["in_channels"]
    check(out.shape == (2, s, s, c) and np.isfinite(out).all() and out.min() >= 0 and
          out.max() <= 1 and out.std() > 0,
          "DDPMPipeline draws images: shape %s, range [%.3f, %.3f]" % (out.shape, out.min(),
                                                                      out.max()))


def scheduler_config(exp, sc=None):
    """The folder's scheduler_config.json: read it, or (sc given) replace it."""
    path = os.path.join(exp, "scheduler_config.json")
    if sc is None:
        with open(path) as f:
            return json.load(f)
    with open(path, "w") as f:
        json.dump(sc, f)


def pipeline_draws(exp, what):
    pipe = DDPMPipeline.from_pretrained(exp)
    pipe.set_progress_bar_config(disable=True)
    out = pipe(batch_size=1, num_inference_steps=3, generator=torch.manual_seed(0),
               output_type="np").images
    check(out.shape == (1, 16, 16, 3) and np.isfinite(out).all(),
          "%s: DDPMPipeline draws images: shape %s" % (what, out.shape))


def sample_png(src, png):
    run([SAMPLE] + src + ["--n", "2", "--ddim-steps", "3", "--backend", "cpu", "--out", png])
    with open(png, "rb") as f:
        return f.read()


def stepgraph_abar(weights, tmp):
    out = os.path.join(tmp, "abar.f64")
    run([FWD, "--abar", weights, out])
    return np.fromfile(out, dtype="<f8")


def cosine_schedule(tmp):
    T = 400
    ckpt, exp = trained_export(tmp, "unet_tiny", "synthetic:16:16x16x3",
                               ["--beta-schedule", "cosine", "--timesteps", str(T)], "_cosine")
    sc = scheduler_config(exp)
    check(sc["beta_schedule"] == "squaredcos_cap_v2" and sc["num_train_timesteps"] == T,
          "cosine: the exported scheduler is squaredcos_cap_v2 over %d steps: %s, %s"
          % (T, sc["beta_schedule"], sc["num_train_timesteps"]))
    ours = stepgraph_abar(ckpt, tmp)
    back = stepgraph_abar(exp, tmp)
    check(ours.shape == (T,) and np.array_equal(ours, back),
          "cosine: the schedule read back from the exported folder is the checkpoint's, bit for "
          "bit")
    sched = DDPMScheduler.from_pretrained(exp)
    theirs = sched.alphas_cumprod.double().numpy()
    d = float(np.abs(ours - theirs).max())
    check(d <= 2e-6, "cosine: diffusers' alphas_cumprod (fp32) vs stepgraph's abar (float64): "
          "max|d| %.2e (tol 2e-6)" % d)

    def f(u):  # improved-diffusion's alpha_bar, in float64
        return math.cos((u + 0.008) / 1.008 * math.pi / 2) ** 2
    betas = np.array([min(1 - f((i + 1) / T) / f(i / T), 0.999) for i in range(T)])
    ref = np.cumprod(1 - betas)
    r = float((np.abs(ours - ref) / ref).max())
    check(r <= 1e-13, "cosine: stepgraph's abar vs improved-diffusion's float64 formula: max "
          "relative %.2e (tol 1e-13)" % r)
    lin = stepgraph_abar(os.path.join(tmp, "unet_tiny_run", "ckpt_00000002.sgck"), tmp)
    check(lin.shape == (1000,) and abs(lin[399] - ours[200]) > 0.1,
          "(the linear run's schedule is another: the comparison can tell)")
    pipeline_draws(exp, "cosine")
    # a schedule stepgraph does not train: refused by sample --weights, naming it
    scheduler_config(exp, dict(sc, beta_schedule="scaled_linear"))
    r = run([SAMPLE, "--weights", exp, "--n", "1", "--ddim-steps", "1", "--backend", "cpu",
             "--out", os.path.join(tmp, "refused.png")], expect_ok=False)
    check(r.returncode == 1 and "beta_schedule" in r.stdout and "scaled_linear" in r.stdout,
          "scaled_linear is refused naming beta_schedule: %r" % r.stdout.strip()[-200:])


def ddim(tmp, exp, what):
    """diffusers' DDIM from the exported scheduler config against stepgraph's DDIM sampler."""
    model = UNet2DModel.from_pretrained(exp)
    model.eval()
    sc = scheduler_config(exp)
    x_T = torch.randn(2, model.config.in_channels, model.config.sample_size,
                      model.config.sample_size, generator=torch.Generator().manual_seed(5))
    xp, yp = os.path.join(tmp, "xT.f32"), os.path.join(tmp, "x0.f32")
    ts_by_s = {}
    x_T.permute(0, 2, 3, 1).contiguous().numpy().astype("<f4").tofile(xp)
    for S in (4, 10):
        for clip in (True, False):
            sched = DDIMScheduler.from_config(dict(sc, clip_sample=clip))
            sched.set_timesteps(S)
            r = run([FWD, "--ddim", exp, xp, str(S), "1" if clip else "0", yp])
            line = [ln for ln in r.stdout.splitlines() if ln.startswith("timesteps ")][0]
            ours_ts = [int(v) for v in line.split()[1:]]
            ts_by_s[S] = ours_ts
            check(sched.timesteps.tolist() == ours_ts,
                  "%s DDIM %d: diffusers' timesteps (the exported trailing spacing) are "
                  "stepgraph's: %s vs %s" % (what, S, sched.timesteps.tolist(), ours_ts))
            x = x_T.double()
            for t in sched.timesteps:
                eps = diffusers_fwd(model, x, t.reshape(1).repeat(x.shape[0]), exact=True)
                x = sched.step(eps, t, x, eta=0.0).prev_sample
            ours = torch.from_numpy(np.fromfile(yp, dtype="<f4").reshape(
                x.shape[0], x.shape[2], x.shape[3], x.shape[1])).permute(0, 3, 1, 2).double()
            e = rel_err(ours, x)
            check(e <= TOL_DDIM, "%s DDIM %d steps, clip_sample %s: stepgraph's sampler vs "
                  "diffusers' DDIMScheduler loop (float64) from the same x_T: max|d|/max|ref| "
                  "%.3e (tol %.0e)" % (what, S, clip, e, TOL_DDIM))
    # the spacing diffusers defaults to (leading) visits other timesteps: the check can tell
    lead = DDIMScheduler.from_config(dict(sc, timestep_spacing="leading"))
    lead.set_timesteps(4)
    check(lead.timesteps.tolist() != ts_by_s[4],
          "(leading spacing visits %s, not %s: the check can tell)" % (lead.timesteps.tolist(),
                                                                        ts_by_s[4]))
    # eta 1 (sample --eta 1): diffusers' loop with the noise stepgraph's steps draw (none at the
    # last step, where both multiply it by sigma = 0)
    import diffusers.schedulers.scheduling_ddim as scheduling_ddim
    S, zp = 10, os.path.join(tmp, "z.f32")
    run([FWD, "--ddim", exp, xp, str(S), "0", yp, "1", zp])
    z = torch.from_numpy(np.fromfile(zp, dtype="<f4").reshape(
        S - 1, x_T.shape[0], x_T.shape[2], x_T.shape[3], x_T.shape[1]))
    noise = iter(z.permute(0, 1, 4, 2, 3).double())
    sched = DDIMScheduler.from_config(dict(sc, clip_sample=False))
    sched.set_timesteps(S)
    saved = scheduling_ddim.randn_tensor
    scheduling_ddim.randn_tensor = lambda shape, **kw: next(noise, torch.zeros(shape).double())
    try:
        x = x_T.double()
        for t in sched.timesteps:
            eps = diffusers_fwd(model, x, t.reshape(1).repeat(x.shape[0]), exact=True)
            x = sched.step(eps, t, x, eta=1.0).prev_sample
    finally:
        scheduling_ddim.randn_tensor = saved
    ours = torch.from_numpy(np.fromfile(yp, dtype="<f4").reshape(
        x.shape[0], x.shape[2], x.shape[3], x.shape[1])).permute(0, 3, 1, 2).double()
    e = rel_err(ours, x)
    check(e <= TOL_DDIM, "%s DDIM %d steps, eta 1: stepgraph's sampler vs diffusers' loop "
          "(float64) from the same x_T and noise: max|d|/max|ref| %.3e (tol %.0e)"
          % (what, S, e, TOL_DDIM))


def spacings(tmp, exp):
    """sample --spacing leading / linspace (--steps-offset) against diffusers' timestep_spacing:
    the timesteps DDIMScheduler.set_timesteps makes, and the loops."""
    import diffusers.schedulers.scheduling_ddpm as scheduling_ddpm
    model = UNet2DModel.from_pretrained(exp)
    model.eval()
    sc = dict(scheduler_config(exp), clip_sample=False)
    N, C, R = 2, model.config.in_channels, model.config.sample_size
    x_T = torch.randn(N, C, R, R, generator=torch.Generator().manual_seed(7))
    xp, yp, zp = (os.path.join(tmp, n) for n in ("xT.f32", "x0.f32", "z.f32"))
    x_T.permute(0, 2, 3, 1).contiguous().numpy().astype("<f4").tofile(xp)

    def ours(S, spacing, offset=0, z=False):
        r = run([FWD, "--spacing", spacing, "--steps-offset", str(offset), "--ddim", exp, xp,
                 str(S), "0", yp] + (["1", zp] if z else []))
        line = [ln for ln in r.stdout.splitlines() if ln.startswith("timesteps ")][0]
        y = torch.from_numpy(np.fromfile(yp, dtype="<f4").reshape(N, R, R, C))
        return [int(v) for v in line.split()[1:]], y.permute(0, 3, 1, 2).double()

    def loop(sched, **kw):
        x = x_T.double()
        for t in sched.timesteps:
            eps = diffusers_fwd(model, x, t.reshape(1).repeat(N), exact=True)
            x = sched.step(eps, t, x, **kw).prev_sample
        return x
    # leading, with and without diffusers' steps_offset (S = 7 does not divide T): DDIMScheduler
    # steps to t - T // S, the next timestep visited, so its loop is stepgraph's
    for S, off in ((4, 0), (7, 0), (10, 1)):
        sched = DDIMScheduler.from_config(dict(sc, timestep_spacing="leading", steps_offset=off))
        sched.set_timesteps(S)
        ts, y = ours(S, "leading", off)
        check(sched.timesteps.tolist() == ts, "leading %d, steps_offset %d: diffusers' timesteps "
              "are stepgraph's: %s vs %s" % (S, off, sched.timesteps.tolist(), ts))
        e = rel_err(y, loop(sched, eta=0.0))
        check(e <= TOL_DDIM, "leading %d, steps_offset %d: stepgraph's DDIM vs diffusers' "
              "DDIMScheduler loop (float64) from the same x_T: max|d|/max|ref| %.3e (tol %.0e)"
              % (S, off, e, TOL_DDIM))
    ts_lead = ts
    def ddpm_loop(S, spacing, listed):
        """stepgraph's DDIM with eta 1 over S steps at a spacing, and diffusers' DDPMScheduler
        handed the noise it drew: given stepgraph's timesteps as a list (listed), else its own
        set_timesteps(S) at that spacing (what DDPMPipeline's num_inference_steps does). Returns
        (stepgraph's timesteps, its image, diffusers' timesteps, image, whether every noise draw
        was used)."""
        ts, y = ours(S, spacing, z=True)
        z = torch.from_numpy(np.fromfile(zp, dtype="<f4").reshape(S - 1, N, R, R, C))
        noise = iter(z.permute(0, 1, 4, 2, 3).double())
        ddpm_s = DDPMScheduler.from_config(dict(sc, timestep_spacing=spacing))
        if listed:
            ddpm_s.set_timesteps(timesteps=ts)
        else:
            ddpm_s.set_timesteps(S)
        saved = scheduling_ddpm.randn_tensor
        scheduling_ddpm.randn_tensor = lambda shape, **kw: next(noise)
        try:
            x = loop(ddpm_s)
        finally:
            scheduling_ddpm.randn_tensor = saved
        return ts, y, ddpm_s.timesteps.tolist(), x, next(noise, None) is None
    # linspace: diffusers' timesteps; its schedulers step to t - T // S, not the next visited
    # timestep, so the loop is checked against DDPMScheduler given the timesteps as a list (it
    # then steps between them, as DDIM's definition), which is DDIM with eta 1: the same noise
    S = 10
    sched = DDIMScheduler.from_config(dict(sc, timestep_spacing="linspace"))
    sched.set_timesteps(S)
    ts, y, _, x, used = ddpm_loop(S, "linspace", True)
    check(sched.timesteps.tolist() == ts and ts != ts_lead,
          "linspace %d: diffusers' timesteps are stepgraph's: %s vs %s" % (S, sched.timesteps
                                                                           .tolist(), ts))
    e = rel_err(y, x)
    check(used and e <= TOL_DDIM,
          "linspace %d, eta 1: stepgraph's DDIM vs diffusers' DDPMScheduler loop on the same "
          "timesteps (float64), the same x_T and noise: max|d|/max|ref| %.3e (tol %.0e)"
          % (S, e, TOL_DDIM))
    # diffusers' DDPM over fewer steps (DDPMPipeline's num_inference_steps; leading, its
    # default): each step to t - T // S, the next visited, with the posterior variance of that
    # gap, which is DDIM with eta 1 at leading spacing
    ts, y, theirs, x, used = ddpm_loop(S, "leading", False)
    e = rel_err(y, x)
    check(theirs == ts and used and e <= TOL_DDIM,
          "DDPMScheduler over %d of %d steps (leading) = sample --ddim-steps %d --eta 1 "
          "--spacing leading: timesteps %s vs %s, max|d|/max|ref| %.3e (tol %.0e)"
          % (S, sc["num_train_timesteps"], S, theirs, ts, e, TOL_DDIM))
    # the folder through sample: leading with an offset that puts the first step past T - 1 is
    # refused, naming the offsets that fit
    r = run([SAMPLE, "--weights", exp, "--n", "1", "--ddim-steps", "4", "--spacing", "leading",
             "--steps-offset", "250", "--backend", "cpu", "--out", os.path.join(tmp, "no.png")],
            expect_ok=False)
    check(r.returncode == 2 and "an offset in [0, 249]" in r.stdout,
          "leading 4 with steps_offset 250 is refused: %r" % r.stdout.strip()[-200:])
    # sample reads no scheduler options, but says where the folder's differ from the run's
    png, saved_sc = os.path.join(tmp, "note.png"), scheduler_config(exp)

    def note(flags, sc):
        scheduler_config(exp, sc)
        r = run([SAMPLE, "--weights", exp, "--n", "1", "--backend", "cpu", "--out", png] + flags)
        return [ln for ln in r.stdout.splitlines() if "sample: note:" in ln]
    try:
        n = note(["--ddim-steps", "2"], saved_sc)
        check(n == [], "the exported folder (trailing) samples as its scheduler says: no note %r"
              % n)
        lead = dict(saved_sc, timestep_spacing="leading", steps_offset=1)
        n = note(["--ddim-steps", "2"], lead)
        check(len(n) == 1 and 'timestep_spacing "leading", steps_offset 1' in n[0] and
              "add --spacing leading --steps-offset 1 to sample as diffusers would" in n[0],
              "a leading folder: the note names its spacing and offset and the flags: %r" % n)
        n = note(["--ddim-steps", "2", "--spacing", "trailing"], lead)
        check(n == [], "... and says nothing when --spacing chose: %r" % n)
        default = {k: v for k, v in saved_sc.items() if k != "timestep_spacing"}
        n = note(["--ddim-steps", "2"], dict(default, variance_type="fixed_large"))
        check(len(n) == 1 and "--spacing leading to sample" in n[0],
              "no timestep_spacing is diffusers' default, leading: %r" % n)
        n = note([], dict(saved_sc, variance_type="fixed_large", num_train_timesteps=20))
        check(len(n) == 1 and 'variance_type "fixed_large"' in n[0] and "--variance large" in n[0],
              "DDPM on a fixed_large folder: the note names --variance large: %r" % n)
        # a DPMSolverMultistepScheduler folder: its solver, and its default spacing (linspace)
        dpm = dict(default, _class_name="DPMSolverMultistepScheduler")
        n = note(["--ddim-steps", "2"], dpm)
        check(len(n) == 1 and '_class_name "DPMSolverMultistepScheduler", timestep_spacing '
              '"linspace"' in n[0] and "add --solver dpm++2m --spacing linspace to" in n[0],
              "a DPMSolverMultistepScheduler folder: the note names the solver and its default "
              "spacing, linspace: %r" % n)
        n = note([], dict(dpm, num_train_timesteps=20))
        check(len(n) == 1 and "add --solver dpm++2m --steps N --spacing linspace to" in n[0],
              "... and on a DDPM run, the steps too: %r" % n)
        n = note(["--solver", "dpm++2m", "--steps", "2", "--spacing", "linspace"], dpm)
        check(n == [], "... and nothing when the run follows it: %r" % n)
        n = note(["--solver", "ddim", "--steps", "2"], dpm)
        check(n == [], "... or when --solver chose: %r" % n)
        kar = dict(dpm, use_karras_sigmas=True)
        n = note(["--solver", "dpm++2m", "--steps", "2"], kar)
        check(len(n) == 1 and "says use_karras_sigmas true" in n[0] and "add --karras to" in n[0],
              "a Karras DPMSolverMultistepScheduler folder: the note names --karras (not the "
              "spacing it replaces): %r" % n)
        n = note(["--solver", "dpm++2m", "--steps", "2", "--karras"], kar)
        check(n == [], "... and nothing with --karras: %r" % n)
    finally:
        scheduler_config(exp, saved_sc)


def dpm_solver(tmp, exp, what, cases):
    """sample --solver dpm++2m against diffusers' DPMSolverMultistepScheduler with its defaults
    (dpmsolver++, order 2, midpoint, lower_order_final, final sigma zero) from the exported
    scheduler config: the timesteps its set_timesteps makes at a spacing (S + 1 points, the
    last dropped, where DDIMScheduler's differ), and its loop from the same x_T (diffusers steps
    in float32: it upcasts the sample to float32, not float64). cases: (spacing, S,
    steps_offset, clipped), clipped being thresholding at ratio 1 and maximum 1 (a clamp of x0
    to [-1, 1]) against sample --clip, and the spacing "karras" its use_karras_sigmas against
    sample --karras. Returns stepgraph's images by case."""
    from diffusers import DPMSolverMultistepScheduler
    model = UNet2DModel.from_pretrained(exp)
    model.eval()
    sc = scheduler_config(exp)
    N, C, R = 2, model.config.in_channels, model.config.sample_size
    x_T = torch.randn(N, C, R, R, generator=torch.Generator().manual_seed(11))
    xp, yp = os.path.join(tmp, "xT.f32"), os.path.join(tmp, "x0.f32")
    x_T.permute(0, 2, 3, 1).contiguous().numpy().astype("<f4").tofile(xp)
    images = {}
    for spacing, S, off, clipped in cases:
        karras = spacing == "karras"
        cfg = dict(sc, timestep_spacing="trailing" if karras else spacing, steps_offset=off,
                   use_karras_sigmas=karras)
        if clipped:
            cfg.update(thresholding=True, dynamic_thresholding_ratio=1.0, sample_max_value=1.0)
        sched = DPMSolverMultistepScheduler.from_config(cfg)
        c = sched.config
        check(c.algorithm_type == "dpmsolver++" and c.solver_order == 2 and
              c.solver_type == "midpoint" and c.lower_order_final and
              c.final_sigmas_type == "zero" and c.use_karras_sigmas == karras,
              "%s: DPMSolverMultistepScheduler's defaults are the solver stepgraph runs" % what)
        sched.set_timesteps(S)
        flags = ["--karras"] if karras else ["--spacing", spacing, "--steps-offset", str(off)]
        r = run([FWD, "--solver", "dpm++2m"] + flags + ["--ddim", exp, xp, str(S),
                                                         "1" if clipped else "0", yp])
        line = [ln for ln in r.stdout.splitlines() if ln.startswith("timesteps ")][0]
        ts = [int(v) for v in line.split()[1:]]
        check(sched.timesteps.tolist() == ts, "%s DPM-Solver++(2M) %s %d, steps_offset %d: "
              "diffusers' timesteps are stepgraph's: %s vs %s"
              % (what, spacing, S, off, sched.timesteps.tolist(), ts))
        x = x_T.double()
        for t in sched.timesteps:
            eps = diffusers_fwd(model, x, t.reshape(1).repeat(N), exact=True)
            x = sched.step(eps, t, x).prev_sample
        y = torch.from_numpy(np.fromfile(yp, dtype="<f4").reshape(N, R, R, C))
        y = y.permute(0, 3, 1, 2).double()
        e = rel_err(y, x)
        check(e <= TOL_DDIM, "%s DPM-Solver++(2M) %s %d%s: stepgraph's sampler vs diffusers' "
              "DPMSolverMultistepScheduler loop from the same x_T: max|d|/max|ref| %.3e (tol "
              "%.0e)" % (what, spacing, S, ", clipped" if clipped else "", e, TOL_DDIM))
        images[(spacing, S, off, clipped)] = (y, x)
    return images


def dpm_solvers(tmp, exp):
    """Section 6's DPM-Solver++(2M) part on the eps model: every spacing (linspace is
    diffusers' default), clipped, and 1, 2 and 20 steps; the check can tell it from DDIM."""
    cases = (("trailing", 10, 0, False), ("linspace", 10, 0, False), ("leading", 7, 1, False),
             ("trailing", 4, 0, True), ("linspace", 20, 0, False), ("trailing", 2, 0, False),
             ("trailing", 1, 0, False), ("karras", 10, 0, False), ("karras", 50, 0, True))
    images = dpm_solver(tmp, exp, "eps", cases)
    # DDIM from the same x_T over the same 10 timesteps ends elsewhere: the check can tell
    xp, yp = os.path.join(tmp, "xT.f32"), os.path.join(tmp, "x0.f32")
    run([FWD, "--ddim", exp, xp, "10", "0", yp])
    dpm, theirs = images[("trailing", 10, 0, False)]
    ddim_y = torch.from_numpy(np.fromfile(yp, dtype="<f4").reshape(
        dpm.shape[0], dpm.shape[2], dpm.shape[3], dpm.shape[1])).permute(0, 3, 1, 2).double()
    e = rel_err(ddim_y, theirs)
    check(e > 10 * TOL_DDIM, "(DDIM 10 ends %.3e from diffusers' DPM-Solver++(2M) 10: the check "
          "can tell)" % e)


def ddpm(tmp, exp=None, what="eps"):
    """diffusers' DDPMScheduler loop against stepgraph's DDPM sampler, the same x_T and noise
    (an exported folder, or a T = 50 eps model trained here)."""
    import diffusers.schedulers.scheduling_ddpm as scheduling_ddpm
    N = 2
    if exp is None:
        _, exp = trained_export(tmp, "unet_tiny", "synthetic:16:16x16x3", ["--timesteps", "50"],
                                "_t50")
    model = UNet2DModel.from_pretrained(exp)
    model.eval()
    sc = scheduler_config(exp)
    T = sc["num_train_timesteps"]
    C, S = model.config.in_channels, model.config.sample_size
    x_T = torch.randn(N, C, S, S, generator=torch.Generator().manual_seed(6))
    xp, yp, zp = (os.path.join(tmp, n) for n in ("xT.f32", "x0.f32", "z.f32"))
    x_T.permute(0, 2, 3, 1).contiguous().numpy().astype("<f4").tofile(xp)
    for clip, large in ((True, False), (False, False), (True, True)):
        run([FWD, "--ddpm", exp, xp, "1" if clip else "0", yp, zp] + (["large"] if large else []))
        z = torch.from_numpy(np.fromfile(zp, dtype="<f4").reshape(T - 1, N, S, S, C))
        noise = iter(z.permute(0, 1, 4, 2, 3).double())  # stepgraph's z of steps T-1 .. 1
        sched = DDPMScheduler.from_config(dict(sc, clip_sample=clip, variance_type="fixed_large"
                                               if large else "fixed_small"))
        sched.set_timesteps(T)
        saved = scheduling_ddpm.randn_tensor
        # diffusers draws each step's noise with randn_tensor: hand it stepgraph's instead
        scheduling_ddpm.randn_tensor = lambda shape, **kw: next(noise)
        try:
            x = x_T.double()
            for t in sched.timesteps:
                eps = diffusers_fwd(model, x, t.reshape(1).repeat(N), exact=True)
                x = sched.step(eps, t, x).prev_sample
        finally:
            scheduling_ddpm.randn_tensor = saved
        check(next(noise, None) is None and sched.timesteps.tolist() == list(range(T - 1, -1, -1)),
              "%s DDPM: diffusers' loop visits t = %d .. 0 and draws noise at every step but the "
              "last, as stepgraph's" % (what, T - 1))
        ours = torch.from_numpy(np.fromfile(yp, dtype="<f4").reshape(N, S, S, C)).permute(
            0, 3, 1, 2).double()
        e = rel_err(ours, x)
        check(e <= TOL_DDIM, "%s DDPM %d steps, clip_sample %s, %s: stepgraph's sampler vs "
              "diffusers' DDPMScheduler loop (float64) from the same x_T and noise: max|d|/max|ref| "
              "%.3e (tol %.0e)" % (what, T, clip, "fixed_large (--variance large)" if large else
                                   "fixed_small", e, TOL_DDIM))


def v_prediction(tmp):
    ckpt, exp = trained_export(tmp, "unet_tiny", "synthetic:16:16x16x3",
                               ["--prediction", "v"], "_v")
    sc = scheduler_config(exp)
    check(sc["prediction_type"] == "v_prediction",
          "v: the exported scheduler predicts v: %s" % sc["prediction_type"])
    folder = sample_png(["--weights", exp], os.path.join(tmp, "v_folder.png"))
    from_ckpt = sample_png(["--ckpt", ckpt], os.path.join(tmp, "v_ckpt.png"))
    check(folder == from_ckpt, "v: sample --weights (exported folder) == sample --ckpt, bit for bit")
    # the same weights read as an eps model: other images
    scheduler_config(exp, dict(sc, prediction_type="epsilon"))
    check(sample_png(["--weights", exp], os.path.join(tmp, "v_as_eps.png")) != from_ckpt,
          "(read as epsilon, the folder draws other images: the comparison can tell)")
    scheduler_config(exp, sc)
    pipeline_draws(exp, "v")
    ddim(tmp, exp, "v")
    dpm_solver(tmp, exp, "v", (("linspace", 10, 0, False), ("trailing", 5, 0, True),
                               ("karras", 10, 0, False)))


def zero_snr(tmp):
    """Zero terminal SNR (train --zero-snr 1 --prediction v): the schedule, DDIM and DDPM."""
    from diffusers.schedulers.scheduling_ddpm import rescale_zero_terminal_snr
    T = 40  # divisible by DDIM's 4 and 10 steps; DDPM's 40 steps are quick
    ckpt, exp = trained_export(tmp, "unet_tiny", "synthetic:16:16x16x3",
                               ["--prediction", "v", "--zero-snr", "1", "--timesteps", str(T)],
                               "_zsnr")
    sc = scheduler_config(exp)
    check(sc["rescale_betas_zero_snr"] is True and sc["prediction_type"] == "v_prediction",
          "zero-SNR: the exported scheduler rescales its betas to zero terminal SNR and predicts "
          "v: %s, %s" % (sc["rescale_betas_zero_snr"], sc["prediction_type"]))
    ours = stepgraph_abar(ckpt, tmp)
    back = stepgraph_abar(exp, tmp)
    check(ours.shape == (T,) and np.array_equal(ours, back) and ours[-1] == 0 and ours[-2] > 0,
          "zero-SNR: the folder's schedule is the checkpoint's, bit for bit, and ends at abar = 0 "
          "exactly (%r, %r)" % (ours[-2:].tolist(), back[-2:].tolist()))
    theirs = DDPMScheduler.from_pretrained(exp).alphas_cumprod.double().numpy()
    d = float(np.abs(ours - theirs).max())
    check(d <= 2e-6 and theirs[-1] == 0, "zero-SNR: diffusers' alphas_cumprod (fp32, rescaled) "
          "vs stepgraph's abar (float64): max|d| %.2e (tol 2e-6), its last %r" % (d, theirs[-1]))
    # diffusers' own rescaling in float64 on DDPM's betas (their ends as stepgraph's config
    # holds them: fp32): the same schedule to rounding
    b1, bT = float(np.float32(1e-4)), float(np.float32(0.02))
    betas = rescale_zero_terminal_snr(torch.linspace(b1, bT, T, dtype=torch.float64))
    ref = torch.cumprod(1 - betas, 0).numpy()
    r = float((np.abs(ours[:-1] - ref[:-1]) / ref[:-1]).max())
    check(r <= 1e-12 and ref[-1] == 0, "zero-SNR: stepgraph's abar vs diffusers' "
          "rescale_zero_terminal_snr in float64: max relative %.2e (tol 1e-12)" % r)
    plain = np.cumprod(1 - np.linspace(1e-4, 0.02, T))
    check(plain[-1] > 0.5, "(without the rescaling abar ends at %.3f: the check can tell)"
          % plain[-1])
    folder = sample_png(["--weights", exp], os.path.join(tmp, "zsnr_folder.png"))
    check(folder == sample_png(["--ckpt", ckpt], os.path.join(tmp, "zsnr_ckpt.png")),
          "zero-SNR: sample --weights (exported folder) == sample --ckpt, bit for bit")
    ddim(tmp, exp, "v zero-SNR")
    ddpm(tmp, exp, "v zero-SNR")


def diffusers_function(module_file, name):
    """A function of diffusers' source, taken from its file alone (its module imports what the
    test environment lacks, e.g. transformers): the definition compiled with torch at hand."""
    import ast
    import diffusers
    path = os.path.join(os.path.dirname(diffusers.__file__), module_file)
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    fn = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
    ns = {"torch": torch}
    exec(compile(ast.Module(body=fn, type_ignores=[]), path, "exec"), ns)
    return ns[name]


def classes(tmp):
    """A class-conditional model: the export, the forward with class labels, guided DDIM."""
    K, w = 6, 3.0
    ckpt, exp = trained_export(tmp, "unet_tiny", "synthetic:16:16x16x3", ["--classes", str(K)],
                               "_classes")
    with open(os.path.join(exp, "config.json")) as f:
        cfg = json.load(f)
    check(cfg["num_class_embeds"] == K + 1 and cfg["class_embed_type"] is None,
          "classes: the export says num_class_embeds %d (the classes and the null class): %s"
          % (K + 1, cfg["num_class_embeds"]))
    model, info = UNet2DModel.from_pretrained(exp, output_loading_info=True)
    check(not any(info.get(k) for k in ("missing_keys", "unexpected_keys", "mismatched_keys",
                                         "error_msgs")) and model.class_embedding is not None,
          "classes: from_pretrained loads the class embedding and every weight (%s)" % info)
    model.eval()
    x, t = inputs(cfg, 21)
    for labels in ([1, 4], [K, 0]):
        y = torch.tensor(labels)
        e = rel_err(stepgraph_fwd(ckpt, x, t, tmp, labels=labels),
                    diffusers_fwd(model, x, t, exact=True, y=y))
        check(e <= TOL, "classes: diffusers' forward with class_labels %s (float64) vs "
              "stepgraph's: max|d|/max|ref| %.3e (tol %.0e)" % (labels, e, TOL))
    other = rel_err(stepgraph_fwd(ckpt, x, t, tmp, labels=[2, 5]),
                    diffusers_fwd(model, x, t, exact=True, y=torch.tensor([1, 4])))
    check(other > 100 * TOL, "(other labels, another prediction: %.3e apart; the check can tell)"
          % other)
    # classifier-free guidance in diffusers' loop against stepgraph's guided sampler
    sc = scheduler_config(exp)
    x_T = torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(8))
    xp, yp = os.path.join(tmp, "xT.f32"), os.path.join(tmp, "x0.f32")
    x_T.permute(0, 2, 3, 1).contiguous().numpy().astype("<f4").tofile(xp)
    labels, S = [3, 0], 4
    run([FWD] + labels_file(tmp, labels) + ["--guidance", str(w), "--ddim", exp, xp, str(S), "0",
                                            yp])
    ours = torch.from_numpy(np.fromfile(yp, dtype="<f4").reshape(2, 16, 16, 3)).permute(
        0, 3, 1, 2).double()
    sched = DDIMScheduler.from_config(dict(sc, clip_sample=False))
    sched.set_timesteps(S)
    xd = x_T.double()
    yc, yu = torch.tensor(labels), torch.full((2,), K)
    for tt in sched.timesteps:
        tv = tt.reshape(1).repeat(2)
        ec = diffusers_fwd(model, xd, tv, exact=True, y=yc)
        eu = diffusers_fwd(model, xd, tv, exact=True, y=yu)
        xd = sched.step(eu + w * (ec - eu), tt, xd, eta=0.0).prev_sample
    e = rel_err(ours, xd)
    check(e <= TOL_DDIM, "classes: guided DDIM %d steps (w %g): stepgraph's sampler vs "
          "diffusers' loop mixing its two predictions (float64) from the same x_T: "
          "max|d|/max|ref| %.3e (tol %.0e)" % (S, w, e, TOL_DDIM))
    run([FWD] + labels_file(tmp, labels) + ["--ddim", exp, xp, str(S), "0", yp])
    plain = torch.from_numpy(np.fromfile(yp, dtype="<f4").reshape(2, 16, 16, 3)).permute(
        0, 3, 1, 2).double()
    check(rel_err(plain, xd) > 10 * TOL_DDIM, "(unguided, stepgraph ends elsewhere: %.3e apart; "
          "the check can tell)" % rel_err(plain, xd))
    # guidance rescale (Lin et al. 2024): diffusers' own rescale_noise_cfg on the mix
    phi, rescale_noise_cfg = 0.7, diffusers_function(
        "pipelines/stable_diffusion/pipeline_stable_diffusion.py", "rescale_noise_cfg")
    run([FWD] + labels_file(tmp, labels) + ["--guidance", str(w), "--guidance-rescale", str(phi),
                                            "--ddim", exp, xp, str(S), "0", yp])
    ours_r = torch.from_numpy(np.fromfile(yp, dtype="<f4").reshape(2, 16, 16, 3)).permute(
        0, 3, 1, 2).double()
    sched.set_timesteps(S)
    xr = x_T.double()
    for tt in sched.timesteps:
        tv = tt.reshape(1).repeat(2)
        ec = diffusers_fwd(model, xr, tv, exact=True, y=yc)
        eu = diffusers_fwd(model, xr, tv, exact=True, y=yu)
        g = rescale_noise_cfg(eu + w * (ec - eu), ec, guidance_rescale=phi)
        xr = sched.step(g, tt, xr, eta=0.0).prev_sample
    e = rel_err(ours_r, xr)
    check(e <= TOL_DDIM, "classes: guided DDIM %d steps (w %g) with guidance rescale %g: "
          "stepgraph's sampler vs diffusers' loop with its rescale_noise_cfg (float64): "
          "max|d|/max|ref| %.3e (tol %.0e)" % (S, w, phi, e, TOL_DDIM))
    check(rel_err(ours, xr) > 10 * TOL_DDIM, "(without the rescale stepgraph ends elsewhere: "
          "%.3e apart; the check can tell)" % rel_err(ours, xr))
    # the folder samples as the checkpoint does, classes and guidance included
    flags = ["--class", "2", "--guidance", "2.5"]
    a = sample_png(["--weights", exp] + flags, os.path.join(tmp, "cls_folder.png"))
    b = sample_png(["--ckpt", ckpt] + flags, os.path.join(tmp, "cls_ckpt.png"))
    check(a == b, "classes: sample --weights (exported folder) == sample --ckpt with --class 2 "
          "--guidance 2.5, bit for bit")


def main():
    print("torch %s, diffusers %s" % (torch.__version__, __import__("diffusers").__version__))
    tmp = tempfile.mkdtemp(prefix="sg_diffusers_")
    try:
        ckpt, exp, cfg = export_to_diffusers(tmp, "unet_tiny", "synthetic:16:16x16x3", 1)
        # sample --weights on the exported folder draws what sample --ckpt draws, bit for bit
        pngs = [os.path.join(tmp, n) for n in ("from_folder.png", "from_ckpt.png")]
        for src, png in zip((["--weights", exp], ["--ckpt", ckpt]), pngs):
            run([SAMPLE] + src + ["--n", "2", "--ddim-steps", "3", "--backend", "cpu", "--out",
                                  png])
        check(open(pngs[0], "rb").read() == open(pngs[1], "rb").read(),
              "sample --weights (exported folder) == sample --ckpt, bit for bit")
        check(cfg["downsample_padding"] == 0 and not cfg["flip_sin_to_cos"] and
              cfg["freq_shift"] == 1 and cfg["norm_eps"] == 1e-6,
              "unet_tiny's config: downsample_padding 0 (SAME), [sin, cos], shift 1, eps 1e-6")
        pipeline(exp, cfg)
        ddim(tmp, exp, "eps")
        spacings(tmp, exp)
        dpm_solvers(tmp, exp)
        ddpm(tmp)
        cosine_schedule(tmp)
        v_prediction(tmp)
        zero_snr(tmp)
        classes(tmp)
        init_from_checkpoint(tmp, ckpt)
        diffusers_to_stepgraph(tmp, exp, cfg)
        _, _, ccfg = export_to_diffusers(tmp, "unet_cifar", "synthetic:8:32x32x3", 2)
        check(ccfg["block_out_channels"] == [128, 256, 256, 256] and
              ccfg["down_block_types"][1] == "AttnDownBlock2D" and
              ccfg["up_block_types"][2] == "AttnUpBlock2D" and ccfg["downsample_padding"] == 0,
              "unet_cifar's config is google/ddpm-cifar10-32's architecture")
        # a model diffusers cannot express is refused before anything is written
        run_dir = os.path.join(tmp, "adm_run")
        run([TRAIN, "--model", "unet_adm64", "--ch", "32", "--img", "16", "--attn-res", "",
             "--data", "synthetic:4:16x16x3", "--steps", "1", "--batch", "1", "--backend", "cpu",
             "--out", run_dir, "--samples", "1", "--ddim-steps", "1"])
        r = run([CKPT, "export", os.path.join(run_dir, "ckpt_00000001.sgck"), "--diffusers",
                 os.path.join(tmp, "adm_diffusers")], expect_ok=False)
        check(r.returncode == 1 and "resample_conv" in r.stdout and
              not os.path.exists(os.path.join(tmp, "adm_diffusers")),
              "unet_adm64 (pooling) is refused naming resample_conv: %r" % r.stdout.strip())
    finally:
        if failures == 0:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print("case kept in", tmp)
    print("%d failure(s)" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
