"""CoTracker3, offline variant (Karaev et al., "CoTracker3: Simpler and Better Point Tracking by
Pseudo-Labelling Real Videos", 2024), as a plain module with the released checkpoint's parameter names.

The offline model sees the whole clip at once: a CNN gives stride-4 feature maps of every frame,
each query point's feature (and a (2r+1)² support patch around it) is taken on its query frame,
and a transformer alternating attention over time (per track) and over tracks (through a set of
learned virtual tracks) refines every point's position, visibility and confidence on every frame
in ``iters`` steps, from 4-level local 4D correlations around the current estimate. Tracking runs
both forward and backward from each query frame, since attention over time is bidirectional.

Sizes are in :class:`CoTracker3Config`; the defaults are the released "scaled" offline model
(``scaled_offline.pth``: window 60, model resolution 384 × 512). Tests build tiny configurations.
:class:`CoTracker3Predictor` wraps it the way the release predicts sparse queries (resize to the
model resolution, a support grid of extra points, visibility above 0.9, query points kept).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn


@dataclass(frozen=True)
class CoTracker3Config:
    stride: int = 4
    corr_radius: int = 3
    corr_levels: int = 4
    window_len: int = 60
    latent_dim: int = 128  # feature-map channels
    hidden_size: int = 384  # transformer width
    num_heads: int = 8
    time_depth: int = 3
    space_depth: int = 3
    num_virtual_tracks: int = 64
    corr_hidden: int = 384
    corr_out: int = 256
    mlp_ratio: float = 4.0
    posenc_degrees: int = 10
    model_resolution: tuple[int, int] = (384, 512)  # (height, width)

    @property
    def input_dim(self) -> int:
        # visibility, confidence, correlations of every level, Fourier features of the 4 relative offsets
        return 2 + self.corr_levels * self.corr_out + 4 + 4 * 2 * self.posenc_degrees


def fourier_features(x: Tensor, degrees: int) -> Tensor:
    """``x`` followed by sin and cos of ``x * 2^k`` for k < ``degrees`` (scale-major order)."""
    scales = 2.0 ** torch.arange(degrees, dtype=x.dtype, device=x.device)
    scaled = (x.unsqueeze(-2) * scales[:, None]).flatten(-2)
    return torch.cat([x, torch.sin(torch.cat([scaled, scaled + 0.5 * math.pi], dim=-1))], dim=-1)


def sincos_table(dim: int, length: int) -> Tensor:
    """The (1, length, dim) sine-cosine table of positions 0..length-1 (computed in float64)."""
    omega = 1.0 / 10000 ** (torch.arange(dim // 2, dtype=torch.float64) / (dim / 2.0))
    angles = torch.arange(length, dtype=torch.float64)[:, None] * omega[None]
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)[None].float()


def sample_bilinear(fmap: Tensor, xy: Tensor) -> Tensor:
    """Features of ``fmap`` (M, C, H, W) at pixel-centre coordinates ``xy`` (M, ..., 2), border padding.

    Returns (M, C, ...): coordinate 0 is the first pixel's centre, W-1 the last one's.
    """
    m, _, h, w = fmap.shape
    shape = xy.shape[1:-1]
    scale = xy.new_tensor([2.0 / max(w - 1, 1), 2.0 / max(h - 1, 1)])
    grid = (xy.reshape(m, -1, 1, 2) * scale - 1.0)
    out = F.grid_sample(fmap, grid, mode="bilinear", padding_mode="border", align_corners=True)
    return out.reshape(m, fmap.shape[1], *shape)


class ResidualBlock(nn.Module):
    """Two 3×3 convolutions with instance norm; a strided 1×1 shortcut when the block downsamples."""

    def __init__(self, in_planes: int, planes: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, padding=1, stride=stride)
        self.conv2 = nn.Conv2d(planes, planes, 3, padding=1)
        self.norm1, self.norm2 = nn.InstanceNorm2d(planes), nn.InstanceNorm2d(planes)
        self.downsample = None
        if stride != 1:
            self.norm3 = nn.InstanceNorm2d(planes)
            self.downsample = nn.Sequential(nn.Conv2d(in_planes, planes, 1, stride=stride), self.norm3)

    def forward(self, x: Tensor) -> Tensor:
        y = F.relu(self.norm1(self.conv1(x)))
        y = F.relu(self.norm2(self.conv2(y)))
        return F.relu((x if self.downsample is None else self.downsample(x)) + y)


class BasicEncoder(nn.Module):
    """The frame CNN: four residual stages at strides 2-16, all resized to stride ``stride`` and fused."""

    def __init__(self, output_dim: int = 128, stride: int = 4):
        super().__init__()
        self.stride = stride
        half, three_q = output_dim // 2, output_dim // 4 * 3
        self.conv1 = nn.Conv2d(3, half, 7, stride=2, padding=3)
        self.norm1 = nn.InstanceNorm2d(half)
        self.layer1 = nn.Sequential(ResidualBlock(half, half), ResidualBlock(half, half))
        self.layer2 = nn.Sequential(ResidualBlock(half, three_q, 2), ResidualBlock(three_q, three_q))
        self.layer3 = nn.Sequential(ResidualBlock(three_q, output_dim, 2), ResidualBlock(output_dim, output_dim))
        self.layer4 = nn.Sequential(ResidualBlock(output_dim, output_dim, 2), ResidualBlock(output_dim, output_dim))
        self.conv2 = nn.Conv2d(half + three_q + 2 * output_dim, output_dim * 2, 3, padding=1)
        self.norm2 = nn.InstanceNorm2d(output_dim * 2)
        self.conv3 = nn.Conv2d(output_dim * 2, output_dim, 1)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: Tensor) -> Tensor:
        size = (x.shape[-2] // self.stride, x.shape[-1] // self.stride)
        a = self.layer1(F.relu(self.norm1(self.conv1(x))))
        b = self.layer2(a)
        c = self.layer3(b)
        d = self.layer4(c)
        stages = [F.interpolate(s, size, mode="bilinear", align_corners=True) for s in (a, b, c, d)]
        return self.conv3(F.relu(self.norm2(self.conv2(torch.cat(stages, dim=1)))))


class Mlp(nn.Module):
    def __init__(self, in_features: int, hidden_features: int, out_features: int | None = None,
                 approximate: str = "none"):
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden_features)
        self.fc2 = nn.Linear(hidden_features, out_features or in_features)
        self.approximate = approximate

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(F.gelu(self.fc1(x), approximate=self.approximate))


class Attention(nn.Module):
    """Multi-head attention with a fused key-value projection."""

    def __init__(self, dim: int, context_dim: int | None = None, num_heads: int = 8):
        super().__init__()
        self.heads = num_heads
        self.to_q = nn.Linear(dim, dim)
        self.to_kv = nn.Linear(context_dim or dim, 2 * dim)
        self.to_out = nn.Linear(dim, dim)

    def forward(self, x: Tensor, context: Tensor | None = None) -> Tensor:
        context = x if context is None else context
        b, n, c = x.shape
        q = self.to_q(x).view(b, n, self.heads, c // self.heads).transpose(1, 2)
        k, v = (t.view(b, context.shape[1], self.heads, c // self.heads).transpose(1, 2)
                for t in self.to_kv(context).chunk(2, dim=-1))
        out = F.scaled_dot_product_attention(q, k, v)
        return self.to_out(out.transpose(1, 2).reshape(b, n, c))


class AttnBlock(nn.Module):
    """Pre-norm self-attention block (non-affine LayerNorms, tanh-GELU MLP)."""

    def __init__(self, dim: int, num_heads: int, mlp_ratio: float):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.attn = Attention(dim, num_heads=num_heads)
        self.norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.mlp = Mlp(dim, int(dim * mlp_ratio), approximate="tanh")

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class CrossAttnBlock(nn.Module):
    """Pre-norm cross-attention block; the context has its own (affine) LayerNorm."""

    def __init__(self, dim: int, context_dim: int, num_heads: int, mlp_ratio: float):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.norm_context = nn.LayerNorm(context_dim)
        self.cross_attn = Attention(dim, context_dim, num_heads)
        self.norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.mlp = Mlp(dim, int(dim * mlp_ratio), approximate="tanh")

    def forward(self, x: Tensor, context: Tensor) -> Tensor:
        x = x + self.cross_attn(self.norm1(x), self.norm_context(context))
        return x + self.mlp(self.norm2(x))


class EfficientUpdateFormer(nn.Module):
    """Alternating time attention (per track) and space attention through virtual tracks."""

    def __init__(self, cfg: CoTracker3Config):
        super().__init__()
        h = cfg.hidden_size
        self.num_virtual_tracks = cfg.num_virtual_tracks
        self.input_transform = nn.Linear(cfg.input_dim, h)
        self.flow_head = nn.Linear(h, 2)
        self.vis_conf_head = nn.Linear(h, 2)
        self.virual_tracks = nn.Parameter(torch.randn(1, cfg.num_virtual_tracks, 1, h))  # (sic) released name
        self.time_blocks = nn.ModuleList(AttnBlock(h, cfg.num_heads, cfg.mlp_ratio) for _ in range(cfg.time_depth))
        self.space_virtual_blocks = nn.ModuleList(AttnBlock(h, cfg.num_heads, cfg.mlp_ratio)
                                                  for _ in range(cfg.space_depth))
        self.space_point2virtual_blocks = nn.ModuleList(CrossAttnBlock(h, h, cfg.num_heads, cfg.mlp_ratio)
                                                        for _ in range(cfg.space_depth))
        self.space_virtual2point_blocks = nn.ModuleList(CrossAttnBlock(h, h, cfg.num_heads, cfg.mlp_ratio)
                                                        for _ in range(cfg.space_depth))
        self.space_every = max(1, cfg.time_depth // max(1, cfg.space_depth))
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                nn.init.zeros_(m.bias)
        nn.init.trunc_normal_(self.flow_head.weight, std=0.001)
        nn.init.trunc_normal_(self.vis_conf_head.weight, std=0.001)

    def forward(self, x: Tensor) -> Tensor:
        """(B, N, T, input_dim) -> (B, N, T, 4): offsets x, y, visibility and confidence logits."""
        tokens = self.input_transform(x)
        b, n, t, c = tokens.shape
        tokens = torch.cat([tokens, self.virual_tracks.expand(b, -1, t, -1)], dim=1)
        total = tokens.shape[1]
        j = 0
        for i, block in enumerate(self.time_blocks):
            tokens = block(tokens.reshape(b * total, t, c)).view(b, total, t, c)
            if i % self.space_every == 0 and j < len(self.space_virtual_blocks):
                space = tokens.transpose(1, 2).reshape(b * t, total, c)
                points, virtual = space[:, :n], space[:, n:]
                virtual = self.space_virtual2point_blocks[j](virtual, points)
                virtual = self.space_virtual_blocks[j](virtual)
                points = self.space_point2virtual_blocks[j](points, virtual)
                tokens = torch.cat([points, virtual], dim=1).view(b, t, total, c).transpose(1, 2)
                j += 1
        points = tokens[:, :n]
        return torch.cat([self.flow_head(points), self.vis_conf_head(points)], dim=-1)


class CoTracker3Offline(nn.Module):
    """Tracks query points (frame, x, y) through a whole clip; inputs at the model resolution."""

    def __init__(self, cfg: CoTracker3Config = CoTracker3Config()):
        super().__init__()
        self.cfg = cfg
        self.stride = cfg.stride
        self.fnet = BasicEncoder(cfg.latent_dim, cfg.stride)
        self.corr_mlp = Mlp((2 * cfg.corr_radius + 1) ** 4, cfg.corr_hidden, cfg.corr_out)
        self.updateformer = EfficientUpdateFormer(cfg)
        self.register_buffer("time_emb", sincos_table(cfg.input_dim, cfg.window_len))

    def _offsets(self, device) -> Tensor:
        """(2r+1, 2r+1, 2) patch offsets; entry [i, j] is (dx_i, dy_j), the released order."""
        r = self.cfg.corr_radius
        d = torch.linspace(-r, r, 2 * r + 1, device=device)
        return torch.stack(torch.meshgrid(d, d, indexing="ij"), dim=-1)

    def _time_embedding(self, t: int, dtype) -> Tensor:
        if t == self.time_emb.shape[1]:
            return self.time_emb.to(dtype)
        return F.interpolate(self.time_emb.float().transpose(1, 2), size=t, mode="linear").transpose(1, 2).to(dtype)

    def forward(self, video: Tensor, queries: Tensor, iters: int = 4) -> tuple[Tensor, Tensor, Tensor]:
        """``video`` (B, T, 3, H, W) in 0-255, ``queries`` (B, N, 3) as (frame, x, y) in pixels.

        Returns coordinates (B, T, N, 2) in pixels, visibility and confidence (B, T, N) in [0, 1].
        """
        cfg = self.cfg
        b, t, _, h, w = video.shape
        n = queries.shape[1]
        if h % self.stride or w % self.stride:
            raise ValueError(f"CoTracker3: frame size {h}x{w} must be a multiple of the stride {self.stride}")
        video = 2 * (video / 255.0) - 1.0
        fmaps = self.fnet(video.reshape(b * t, 3, h, w))
        fmaps = fmaps / fmaps.square().sum(1, keepdim=True).clamp_min(1e-12).sqrt()
        fmaps = fmaps.to(video.dtype)
        pyramid = [fmaps]  # (B*T, C, H', W') per level
        for _ in range(cfg.corr_levels - 1):
            pyramid.append(F.avg_pool2d(pyramid[-1], 2, stride=2))
        frames = queries[..., 0].long()
        query_xy = queries[..., 1:3] / self.stride
        offsets = self._offsets(video.device)
        side = 2 * cfg.corr_radius + 1
        # support patch features of each query on its query frame: (B, N, side, side, C) per level
        flat_index = (torch.arange(b, device=video.device)[:, None] * t + frames).reshape(-1)
        supports = []
        for level, fm in enumerate(pyramid):
            query_maps = fm[flat_index]  # (B*N, C, h, w)
            xy = (query_xy.reshape(b * n, 1, 1, 2) / 2 ** level) + offsets
            feats = sample_bilinear(query_maps, xy)  # (B*N, C, side, side)
            supports.append(feats.permute(0, 2, 3, 1).reshape(b, n, side, side, -1))
        coords = query_xy[:, None].expand(b, t, n, 2).float()
        vis = torch.zeros(b, t, n, device=video.device)
        conf = torch.zeros(b, t, n, device=video.device)
        scale = coords.new_tensor([cfg.model_resolution[1], cfg.model_resolution[0]]) / self.stride
        time_emb = self._time_embedding(t, video.dtype)
        for _ in range(iters):
            coords = coords.detach()
            corr = []
            for level, fm in enumerate(pyramid):
                xy = (coords.reshape(b * t, n, 1, 1, 2) / 2 ** level) + offsets
                local = sample_bilinear(fm, xy)  # (B*T, C, N, side, side)
                local = local.view(b, t, -1, n, side, side)
                volume = torch.einsum("btcnhw,bnijc->btnhwij", local, supports[level])
                corr.append(self.corr_mlp(volume.reshape(b * t * n, side ** 4)))
            corr = torch.cat(corr, dim=-1).view(b, t, n, -1)
            forward_delta = F.pad(coords[:, :-1] - coords[:, 1:], (0, 0, 0, 0, 0, 1)) / scale
            backward_delta = F.pad(coords[:, 1:] - coords[:, :-1], (0, 0, 0, 0, 1, 0)) / scale
            motion = fourier_features(torch.cat([forward_delta, backward_delta], dim=-1), cfg.posenc_degrees)
            x = torch.cat([vis[..., None], conf[..., None], corr, motion], dim=-1)
            x = x.permute(0, 2, 1, 3).reshape(b * n, t, -1) + time_emb
            delta = self.updateformer(x.view(b, n, t, -1)).permute(0, 2, 1, 3)  # (B, T, N, 4)
            coords = coords + delta[..., :2]
            vis = vis + delta[..., 2]
            conf = conf + delta[..., 3]
        return coords * self.stride, torch.sigmoid(vis), torch.sigmoid(conf)


def support_grid(size: int, height: int, width: int, device=None) -> Tensor:
    """``size`` × ``size`` points (x, y), row-major, covering the frame with a margin of width/64."""
    if size == 1:
        return torch.tensor([[width / 2, height / 2]], device=device)
    margin = width / 64
    ys = torch.linspace(margin, height - margin, size, device=device)
    xs = torch.linspace(margin, width - margin, size, device=device)
    gy, gx = torch.meshgrid(ys, xs, indexing="ij")
    return torch.stack([gx, gy], dim=-1).reshape(-1, 2)


class CoTracker3Predictor(nn.Module):
    """Sparse-query prediction as the release does it: frames resized to the model resolution, a
    ``support_grid_size``² grid of extra points on frame 0 tracked along (dropped from the output),
    ``iters`` refinements, visible where the visibility exceeds ``visibility_threshold``, and each
    query point kept, visible, on its own frame."""

    def __init__(self, model: CoTracker3Offline, iters: int = 6, support_grid_size: int = 6,
                 visibility_threshold: float = 0.9):
        super().__init__()
        self.model, self.iters = model, int(iters)
        self.support_grid_size, self.visibility_threshold = int(support_grid_size), float(visibility_threshold)

    @torch.no_grad()
    def forward(self, video: Tensor, queries: Tensor) -> tuple[Tensor, Tensor]:
        """``video`` (B, T, 3, H, W) in 0-255, ``queries`` (B, N, 3) (frame, x, y) in pixels ->
        tracks (B, T, N, 2) in pixels and visibility (B, T, N) bool."""
        b, t, c, h, w = video.shape
        res_h, res_w = self.model.cfg.model_resolution
        frames = F.interpolate(video.reshape(b * t, c, h, w).float(), (res_h, res_w), mode="bilinear",
                               align_corners=True).reshape(b, t, c, res_h, res_w)
        to_model = queries.new_tensor([(res_w - 1) / (w - 1), (res_h - 1) / (h - 1)])
        q = torch.cat([queries[..., :1], queries[..., 1:] * to_model], dim=-1).float()
        n = q.shape[1]
        if self.support_grid_size > 0:
            grid = support_grid(self.support_grid_size, res_h, res_w, device=q.device)
            extra = torch.cat([torch.zeros_like(grid[:, :1]), grid], dim=-1).expand(b, -1, 3)
            q = torch.cat([q, extra], dim=1)
        tracks, vis, _ = self.model(frames, q, iters=self.iters)
        tracks, visible = tracks[:, :, :n], vis[:, :, :n] > self.visibility_threshold
        rows = q[:, :n, 0].long()  # (B, N)
        bi = torch.arange(b, device=q.device)[:, None].expand(b, n)
        ni = torch.arange(n, device=q.device)[None].expand(b, n)
        tracks[bi, rows, ni] = q[:, :n, 1:]
        visible[bi, rows, ni] = True
        return tracks / to_model, visible
