"""An independent PyTorch implementation of the stepgraph DDPM UNet (docs/model.md).

Written from docs/model.md alone, as a plain DDPM UNet: NCHW tensors, OIHW conv weights,
nn.Conv2d / nn.GroupNorm(eps=1e-6) / nn.Linear, SiLU, dropout, nearest upsampling,
2x2 average pooling and softmax self-attention. Module names are chosen so that
``state_dict()`` keys equal stepgraph's parameter names (diffusers UNet2DModel names, with a
fused ``to_qkv`` 1x1 conv).

stepgraph stores tensors in its own layouts: conv weights [C_out][K][K][C_in] (also for the
1x1 convs: [C_out][1][1][C_in]), linear weights [out][in], GroupNorm gamma/beta and biases 1-D.
``load_stepgraph_params`` / ``save_params`` convert at the boundary (dir/params/<name>.npy).

Works with PyTorch 1.13 and 2.x.
"""

import math
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

GN_EPS = 1e-6

# The named configurations of docs/model.md.
CONFIGS = {
    "unet_cifar": dict(img=32, in_ch=3, ch=128, ch_mult=[1, 2, 2, 2], nrb=2, attn_res=[16],
                       heads=1, head_ch=None, groups=32, dropout=0.1, resample_conv=True,
                       down_pad="same", batch=128),
    "unet_adm64": dict(img=64, in_ch=3, ch=64, ch_mult=[1, 2, 3, 4], nrb=2, attn_res=[16, 8],
                       heads=None, head_ch=32, groups=32, dropout=0.1, resample_conv=False,
                       down_pad="symmetric", batch=32),
    "unet_tiny": dict(img=16, in_ch=3, ch=32, ch_mult=[1, 2], nrb=1, attn_res=[8],
                      heads=1, head_ch=None, groups=8, dropout=0.1, resample_conv=True,
                      down_pad="same", batch=4),
    "unet_fmnist": dict(img=32, in_ch=1, ch=32, ch_mult=[1, 2, 2], nrb=1, attn_res=[8],
                        heads=1, head_ch=None, groups=8, dropout=0.1, resample_conv=True,
                        down_pad="same", batch=32),
}

# Training defaults of docs/model.md ("Training objective").
TRAIN_DEFAULTS = dict(T=1000, beta1=1e-4, betaT=0.02, beta_schedule="linear", prediction="eps",
                      snr_gamma=0.0, p2_gamma=0.0, p2_k=1.0, zero_snr=0,
                      input_perturbation=0.0,
                      lr=2e-4, b1=0.9, b2=0.999, eps=1e-8, wd=0.0, warmup=5000, clip=1.0,
                      ema_decay=0.9999, step=0)


def _int_list(v):
    if v is None:
        return []
    if isinstance(v, str):
        return [int(s) for s in v.replace(" ", "").split(",") if s != ""]
    if isinstance(v, (int, np.integer)):
        return [int(v)]
    return [int(s) for s in v]


def _bool(v):
    if isinstance(v, str):
        return v.strip().lower() in ("1", "yes", "true", "on", "y")
    return bool(v)


def normalize_config(cfg):
    """Return a clean copy of a model config. Accepts a name of CONFIGS, or a dict (fields
    of docs/model.md; ch_mult / attn_res as lists or "1,2,2" strings; a dict with a "model"
    name is completed from CONFIGS and then overridden by its own fields)."""
    if isinstance(cfg, str):
        if cfg not in CONFIGS:
            raise ValueError("unknown model %r (known: %s)" % (cfg, ", ".join(CONFIGS)))
        cfg = dict(CONFIGS[cfg])
    base = {}
    name = cfg.get("model") or cfg.get("name")
    if isinstance(name, str) and name in CONFIGS:
        base = dict(CONFIGS[name])
    user = dict(cfg)
    # A user's heads overrides a named config's head_ch and vice versa.
    if user.get("heads") not in (None, 0, "") and "head_ch" not in user:
        user["head_ch"] = None
    if user.get("head_ch") not in (None, 0, "") and "heads" not in user:
        user["heads"] = None
    base.update(user)
    c = base
    out = dict(c)
    for k in ("img", "in_ch", "ch", "nrb", "groups"):
        if k not in c:
            raise ValueError("model config lacks field %r" % k)
        out[k] = int(c[k])
    out["ch_mult"] = _int_list(c["ch_mult"])
    out["attn_res"] = _int_list(c.get("attn_res", []))
    heads = c.get("heads")
    head_ch = c.get("head_ch")
    heads = int(heads) if heads not in (None, 0, "") else None
    head_ch = int(head_ch) if head_ch not in (None, 0, "") else None
    if heads is None and head_ch is None:
        heads = 1
    if heads is not None and head_ch is not None:
        raise ValueError("config gives both heads and head_ch; give one")
    out["heads"], out["head_ch"] = heads, head_ch
    out["dropout"] = float(c.get("dropout", 0.0))
    out["resample_conv"] = _bool(c.get("resample_conv", True))
    # The stride-2 downsampling conv's padding: "same" (TensorFlow SAME, DDPM: 0 rows/columns
    # at the top/left, 1 at the bottom/right) or "symmetric" (1 on every side). A config
    # without the field predates it and means "symmetric".
    out["down_pad"] = c.get("down_pad", "symmetric")
    # class-conditional models (docs/model.md): a table of classes + 1 rows (the last the null
    # class), its row for each sample's label added to the time embedding; 0: unconditional
    out["classes"] = int(c.get("classes", 0) or 0)
    if out["down_pad"] not in ("same", "symmetric"):
        raise ValueError("down_pad must be 'same' or 'symmetric', got %r" % (out["down_pad"],))
    return out


def num_heads(cfg, C):
    if cfg["heads"] is not None:
        h = cfg["heads"]
    else:
        if C % cfg["head_ch"] != 0:
            raise ValueError("C=%d not divisible by head_ch=%d" % (C, cfg["head_ch"]))
        h = C // cfg["head_ch"]
    if C % h != 0:
        raise ValueError("C=%d not divisible by heads=%d" % (C, h))
    return h


def timestep_embedding(t, dim, dtype=torch.float32):
    """[sin(t f_0..f_{half-1}), cos(t f_0..)] with f_i = exp(-ln(10000) i / (half-1)).
    Computed in float64 and rounded once to `dtype`."""
    half = dim // 2
    i = torch.arange(half, dtype=torch.float64, device=t.device)
    f = torch.exp(-math.log(10000.0) * i / (half - 1))
    arg = t.to(torch.float64)[:, None] * f[None, :]
    emb = torch.cat([torch.sin(arg), torch.cos(arg)], dim=1)
    if dim % 2 == 1:  # not used by the named configs
        emb = F.pad(emb, (0, 1))
    return emb.to(dtype)


class TimestepEmbedding(nn.Module):
    def __init__(self, ch, temb_ch):
        super().__init__()
        self.linear_1 = nn.Linear(ch, temb_ch)
        self.linear_2 = nn.Linear(temb_ch, temb_ch)

    def forward(self, e):
        return self.linear_2(F.silu(self.linear_1(e)))


class ResnetBlock(nn.Module):
    def __init__(self, cin, cout, temb_ch, groups, dropout):
        super().__init__()
        self.norm1 = nn.GroupNorm(groups, cin, eps=GN_EPS)
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.time_emb_proj = nn.Linear(temb_ch, cout)
        self.norm2 = nn.GroupNorm(groups, cout, eps=GN_EPS)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.conv_shortcut = nn.Conv2d(cin, cout, 1) if cin != cout else None
        self.dropout = dropout
        # An externally given dropout mask (NCHW, values 0 or 1/(1-p)) replaces F.dropout when
        # set: the oracle uses it to replay the C backend's Philox masks.
        self.dropout_mask = None

    def forward(self, x, st):
        # st = silu(temb), computed once by the UNet.
        h = self.conv1(F.silu(self.norm1(x)))
        h = h + self.time_emb_proj(st)[:, :, None, None]
        h = F.silu(self.norm2(h))
        if self.dropout_mask is not None:
            h = h * self.dropout_mask
        else:
            h = F.dropout(h, p=self.dropout, training=self.training)
        h = self.conv2(h)
        sc = self.conv_shortcut(x) if self.conv_shortcut is not None else x
        return sc + h


class AttnBlock(nn.Module):
    def __init__(self, C, heads, groups, use_sdpa=False):
        super().__init__()
        self.group_norm = nn.GroupNorm(groups, C, eps=GN_EPS)
        self.to_qkv = nn.Conv2d(C, 3 * C, 1)
        self.to_out = nn.ModuleList([nn.Conv2d(C, C, 1)])
        self.heads = heads
        self.use_sdpa = use_sdpa

    def forward(self, x):
        N, C, H, W = x.shape
        L = H * W
        nh = self.heads
        D = C // nh
        qkv = self.to_qkv(self.group_norm(x))            # [N, 3C, H, W]: q | k | v
        qkv = qkv.reshape(N, 3, nh, D, L)
        q, k, v = qkv[:, 0], qkv[:, 1], qkv[:, 2]        # [N, nh, D, L]
        if self.use_sdpa and hasattr(F, "scaled_dot_product_attention"):
            a = F.scaled_dot_product_attention(q.transpose(-1, -2), k.transpose(-1, -2),
                                               v.transpose(-1, -2))      # [N, nh, L, D]
            a = a.transpose(-1, -2)
        else:
            s = torch.matmul(q.transpose(-1, -2), k) * (1.0 / math.sqrt(D))   # [N, nh, L, L]
            p = torch.softmax(s, dim=-1)
            a = torch.matmul(v, p.transpose(-1, -2))                       # [N, nh, D, L]
        a = a.reshape(N, C, H, W)
        return x + self.to_out[0](a)


class Downsample(nn.Module):
    """3x3 stride-2 conv, or 2x2 average pooling. With down_pad "same" the conv sees the input
    zero-padded by 0 at the top/left and 1 at the bottom/right and convolves unpadded, as
    TensorFlow's SAME does for even sizes (DDPM's diffusion_tf; diffusers' Downsample2D with
    downsample_padding=0); "symmetric" is nn.Conv2d's padding=1."""

    def __init__(self, C, use_conv, down_pad="symmetric"):
        super().__init__()
        self.same = down_pad == "same"
        self.conv = (nn.Conv2d(C, C, 3, stride=2, padding=0 if self.same else 1)
                     if use_conv else None)

    def forward(self, x):
        if self.conv is not None:
            if self.same:
                x = F.pad(x, (0, 1, 0, 1))
            return self.conv(x)
        return F.avg_pool2d(x, 2)


class Upsample(nn.Module):
    def __init__(self, C, use_conv):
        super().__init__()
        self.conv = nn.Conv2d(C, C, 3, padding=1) if use_conv else None

    def forward(self, x):
        x = F.interpolate(x, scale_factor=2.0, mode="nearest")
        if self.conv is not None:
            x = self.conv(x)
        return x


class DownBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.resnets = nn.ModuleList()
        self.attentions = nn.ModuleList()
        self.downsamplers = nn.ModuleList()


class UpBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.resnets = nn.ModuleList()
        self.attentions = nn.ModuleList()
        self.upsamplers = nn.ModuleList()


class MidBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.resnets = nn.ModuleList()
        self.attentions = nn.ModuleList()


class UNet(nn.Module):
    def __init__(self, cfg, use_sdpa=False):
        super().__init__()
        cfg = normalize_config(cfg)
        self.cfg = cfg
        ch, mult, nrb, G = cfg["ch"], cfg["ch_mult"], cfg["nrb"], cfg["groups"]
        p = cfg["dropout"]
        temb_ch = 4 * ch
        levels = len(mult)
        self.levels = levels

        self.time_embedding = TimestepEmbedding(ch, temb_ch)
        if cfg["classes"] > 0:
            self.class_embedding = nn.Embedding(cfg["classes"] + 1, temb_ch)
        self.conv_in = nn.Conv2d(cfg["in_ch"], ch, 3, padding=1)

        def attn(C):
            return AttnBlock(C, num_heads(cfg, C), G, use_sdpa)

        skip_ch = [ch]
        cur = ch
        res = cfg["img"]
        self.down_blocks = nn.ModuleList()
        self._down_attn = []
        for i in range(levels):
            C = ch * mult[i]
            blk = DownBlock()
            has_attn = res in cfg["attn_res"]
            for _ in range(nrb):
                blk.resnets.append(ResnetBlock(cur, C, temb_ch, G, p))
                cur = C
                if has_attn:
                    blk.attentions.append(attn(C))
                skip_ch.append(cur)
            if i != levels - 1:
                blk.downsamplers.append(Downsample(cur, cfg["resample_conv"], cfg["down_pad"]))
                skip_ch.append(cur)
                res //= 2
            self.down_blocks.append(blk)
            self._down_attn.append(has_attn)

        self.mid_block = MidBlock()
        self.mid_block.resnets.append(ResnetBlock(cur, cur, temb_ch, G, p))
        self.mid_block.attentions.append(attn(cur))
        self.mid_block.resnets.append(ResnetBlock(cur, cur, temb_ch, G, p))

        self.up_blocks = nn.ModuleList()
        self._up_attn = []
        for k in range(levels):
            i = levels - 1 - k
            C = ch * mult[i]
            blk = UpBlock()
            has_attn = res in cfg["attn_res"]
            for _ in range(nrb + 1):
                blk.resnets.append(ResnetBlock(cur + skip_ch.pop(), C, temb_ch, G, p))
                cur = C
                if has_attn:
                    blk.attentions.append(attn(C))
            if i != 0:
                blk.upsamplers.append(Upsample(cur, cfg["resample_conv"]))
                res *= 2
            self.up_blocks.append(blk)
            self._up_attn.append(has_attn)
        assert not skip_ch and res == cfg["img"]

        self.conv_norm_out = nn.GroupNorm(G, cur, eps=GN_EPS)
        self.conv_out = nn.Conv2d(cur, cfg["in_ch"], 3, padding=1)
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self, generator=None):
        """U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for conv/linear weights and biases; GN 1/0."""
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                fan_in = m.weight[0].numel()
                b = 1.0 / math.sqrt(fan_in)
                m.weight.uniform_(-b, b, generator=generator)
                if m.bias is not None:
                    m.bias.uniform_(-b, b, generator=generator)
            elif isinstance(m, nn.GroupNorm):
                m.weight.fill_(1.0)
                m.bias.fill_(0.0)

    def forward(self, x, t, class_labels=None):
        temb = self.time_embedding(timestep_embedding(t, self.cfg["ch"], x.dtype))
        if self.cfg["classes"] > 0:
            if class_labels is None:
                raise ValueError("a class-conditional model needs class_labels")
            temb = temb + self.class_embedding(class_labels).to(temb.dtype)
        st = F.silu(temb)
        h = self.conv_in(x)
        hs = [h]
        for blk, has_attn in zip(self.down_blocks, self._down_attn):
            for j, rn in enumerate(blk.resnets):
                h = rn(h, st)
                if has_attn:
                    h = blk.attentions[j](h)
                hs.append(h)
            for ds in blk.downsamplers:
                h = ds(h)
                hs.append(h)
        h = self.mid_block.resnets[0](h, st)
        h = self.mid_block.attentions[0](h)
        h = self.mid_block.resnets[1](h, st)
        for blk, has_attn in zip(self.up_blocks, self._up_attn):
            for j, rn in enumerate(blk.resnets):
                h = rn(torch.cat([h, hs.pop()], dim=1), st)
                if has_attn:
                    h = blk.attentions[j](h)
            for us in blk.upsamplers:
                h = us(h)
        return self.conv_out(F.silu(self.conv_norm_out(h)))


# --------------------------------------------------------------------------------------------
# stepgraph layouts <-> PyTorch


def to_stepgraph(name, t):
    """A PyTorch parameter tensor -> numpy array in stepgraph layout."""
    a = t.detach().cpu()
    if a.dim() == 4:                    # OIHW -> [Co][K][K][Ci]
        a = a.permute(0, 2, 3, 1)
    return a.contiguous().numpy()


def from_stepgraph(name, arr, like):
    """A numpy array in stepgraph layout -> tensor shaped like the PyTorch parameter `like`."""
    a = torch.from_numpy(np.ascontiguousarray(arr))
    if like.dim() == 4:
        Co, Ci, K, K2 = like.shape
        if a.dim() == 2 and K == 1 and K2 == 1:   # tolerate a 1x1 conv stored as [Co][Ci]
            a = a.reshape(Co, 1, 1, Ci)
        if tuple(a.shape) != (Co, K, K2, Ci):
            raise ValueError("%s: stepgraph shape %s, expected %s" %
                             (name, tuple(a.shape), (Co, K, K2, Ci)))
        a = a.permute(0, 3, 1, 2)
    elif tuple(a.shape) != tuple(like.shape):
        if a.numel() == like.numel() and like.dim() == 1:
            a = a.reshape(like.shape)
        else:
            raise ValueError("%s: stepgraph shape %s, expected %s" %
                             (name, tuple(a.shape), tuple(like.shape)))
    return a.to(dtype=like.dtype, device=like.device)


def stepgraph_shape(p):
    return tuple(p.shape[i] for i in (0, 2, 3, 1)) if p.dim() == 4 else tuple(p.shape)


def load_tensors_dir(model, d, strict=True):
    """Read d/<name>.npy for every parameter into a dict name -> tensor (PyTorch layout,
    the parameter's dtype/device). Missing files: KeyError if strict, else skipped."""
    out = {}
    for name, p in model.named_parameters():
        f = os.path.join(d, name + ".npy")
        if not os.path.exists(f):
            if strict:
                raise KeyError("missing %s" % f)
            continue
        out[name] = from_stepgraph(name, np.load(f), p)
    if strict:
        known = set(out)
        extra = [fn[:-4] for fn in os.listdir(d) if fn.endswith(".npy") and fn[:-4] not in known]
        if extra:
            raise KeyError("%s holds tensors the model does not have: %s" % (d, sorted(extra)[:8]))
    return out


@torch.no_grad()
def load_stepgraph_params(model, d):
    """Load d/params/<name>.npy (stepgraph layouts) into the model. `d` may also be the
    params folder itself."""
    pd = os.path.join(d, "params")
    if not os.path.isdir(pd):
        pd = d
    tensors = load_tensors_dir(model, pd, strict=True)
    for name, p in model.named_parameters():
        p.copy_(tensors[name])
    return model


def save_tensors(tensors, d, dtype=np.float32):
    """Write {name: torch tensor in PyTorch layout} to d/<name>.npy in stepgraph layouts."""
    os.makedirs(d, exist_ok=True)
    for name, t in tensors.items():
        a = to_stepgraph(name, t)
        if dtype is not None:
            a = a.astype(dtype)
        np.save(os.path.join(d, name + ".npy"), a)


def save_params(model, d, dtype=np.float32):
    """Write the model's parameters to d/params/<name>.npy in stepgraph layouts."""
    save_tensors(dict(model.named_parameters()), os.path.join(d, "params"), dtype)


def _build_meta(cfg):
    try:
        with torch.device("meta"):  # torch >= 2.0
            return UNet(cfg)
    except Exception:
        return UNet(cfg)


def param_count(cfg):
    m = _build_meta(cfg)
    return sum(p.numel() for p in m.parameters())


def param_table(cfg):
    """[(name, stepgraph shape, numel)] in module registration order."""
    m = _build_meta(cfg)
    return [(n, stepgraph_shape(p), p.numel()) for n, p in m.named_parameters()]


def forward_flops(cfg):
    """Multiply-add FLOPs (2 per MAC) of one forward pass for one image: convs, linears and
    the two attention matmuls. Returns (total, conv_only)."""
    cfg = normalize_config(cfg)
    m = _build_meta(cfg)
    conv = 0
    other = 0
    res_of = {}
    # Follow the forward pass to know each conv's output resolution.
    img = cfg["img"]
    levels = len(cfg["ch_mult"])

    def conv_fl(c, r):   # c: nn.Conv2d, r: output resolution
        return 2 * r * r * c.out_channels * c.in_channels * c.kernel_size[0] * c.kernel_size[1]

    def res_fl(rn, r):
        f = conv_fl(rn.conv1, r) + conv_fl(rn.conv2, r)
        if rn.conv_shortcut is not None:
            f += conv_fl(rn.conv_shortcut, r)
        return f

    def attn_fl(a, r):
        C = a.to_out[0].out_channels
        L = r * r
        return conv_fl(a.to_qkv, r) + conv_fl(a.to_out[0], r), 4 * L * L * C

    r = img
    conv += conv_fl(m.conv_in, r)
    for i, blk in enumerate(m.down_blocks):
        for rn in blk.resnets:
            conv += res_fl(rn, r)
        for a in blk.attentions:
            c, o = attn_fl(a, r)
            conv += c
            other += o
        for ds in blk.downsamplers:
            r //= 2
            if ds.conv is not None:
                conv += conv_fl(ds.conv, r)
    for rn in m.mid_block.resnets:
        conv += res_fl(rn, r)
    c, o = attn_fl(m.mid_block.attentions[0], r)
    conv += c
    other += o
    for blk in m.up_blocks:
        for rn in blk.resnets:
            conv += res_fl(rn, r)
        for a in blk.attentions:
            c, o = attn_fl(a, r)
            conv += c
            other += o
        for us in blk.upsamplers:
            r *= 2
            if us.conv is not None:
                conv += conv_fl(us.conv, r)
    conv += conv_fl(m.conv_out, r)
    for mod in m.modules():
        if isinstance(mod, nn.Linear):
            other += 2 * mod.in_features * mod.out_features
    return conv + other, conv


if __name__ == "__main__":
    for n in CONFIGS:
        tot, cv = forward_flops(n)
        print("%-12s params %12d  fwd GFLOP/img %.3f (conv %.3f)" %
              (n, param_count(n), tot / 1e9, cv / 1e9))
