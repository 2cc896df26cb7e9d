"""``grid_sample`` (2-D and 3-D; bilinear, nearest, bicubic in 2-D; zeros, border, reflection
padding), written with differentiable ops.

Each output point reads the input at the grid's coordinate (x along the last dim, y, z before it;
-1 and 1 the corner pixels' centres with ``align_corners``, their outer edges without). The
coordinate is unnormalised, then (bilinear, nearest) clipped or reflected into the input as
``padding_mode`` says, as torch's ``compute_coordinates``; the taps around it are gathered from
the flattened input (out-of-range taps read zero) and weighted. Weights are functions of the
grid, so the gradient reaches both the input (the gathers') and the grid (the weights'); nearest
sampling's is zero for the grid, as torch's. Bicubic reads 4 x 4 taps with Keys' weights and pads
each tap's integer position instead (torch's ``get_value_bounded``).
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from asyncgrad._validate import tensor_arg
from asyncgrad.ops._node import plain
from asyncgrad.ops.elementwise import where
from asyncgrad.ops.indexing import gather
from asyncgrad.tensor import Tensor

__all__ = ["grid_sample"]

_A = -0.75


def _unnormalize(coord: Tensor, size: int, align_corners: bool) -> Tensor:
    if align_corners:
        return (coord + 1) / 2 * (size - 1)
    return ((coord + 1) * size - 1) / 2


def _reflect(x: Tensor, twice_low: int, twice_high: int) -> Tensor:
    """torch's ``reflect_coordinates``: ``x`` folded into [low, high] by reflections at both ends."""
    if twice_low == twice_high:
        return x * 0
    low = twice_low / 2
    span = (twice_high - twice_low) / 2
    x = (x - low).abs()
    extra = x.fmod(span)
    flips = (x.detach() / span).floor()
    even = flips.fmod(2) == 0
    return where(even, extra + low, span - extra + low)


def _pad(x: Tensor, size: int, padding_mode: str, align_corners: bool) -> Tensor:
    """torch's ``compute_coordinates``: border clips into [0, size - 1]; reflection reflects first."""
    if padding_mode == "border":
        return x.clamp(0, size - 1)
    if padding_mode == "reflection":
        x = _reflect(x, 0, 2 * (size - 1)) if align_corners else _reflect(x, -1, 2 * size - 1)
        return x.clamp(0, size - 1)
    return x


def _bounded(index: Any, size: int, padding_mode: str, align_corners: bool) -> Any:
    """A bicubic tap's integer position after the padding (numpy, on the host): torch's
    ``get_value_bounded`` without the value."""
    x = index.astype(np.float64)
    if padding_mode == "border":
        x = np.clip(x, 0, size - 1)
    elif padding_mode == "reflection":
        lo, hi = (0, 2 * (size - 1)) if align_corners else (-1, 2 * size - 1)
        if lo == hi:
            x = np.zeros_like(x)
        else:
            low, span = lo / 2, (hi - lo) / 2
            a = np.abs(x - low)
            extra = np.fmod(a, span)
            flips = np.floor(a / span)
            x = np.where(flips % 2 == 0, extra + low, span - extra + low)
        x = np.clip(x, 0, size - 1)
    return x.astype(np.int64)


def _cubic(t: Tensor) -> list[Tensor]:
    def near(x: Tensor) -> Tensor:
        return ((_A + 2) * x - (_A + 3)) * x * x + 1

    def far(x: Tensor) -> Tensor:
        return ((_A * x - 5 * _A) * x + 8 * _A) * x - 4 * _A

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def grid_sample(input: Tensor, grid: Tensor, mode: str = "bilinear", padding_mode: str = "zeros",
                align_corners: bool | None = None) -> Tensor:
    """torch.nn.functional.grid_sample: ``input`` ``(N, C, *spatial)``, ``grid`` ``(N, *out, d)``."""
    tensor_arg(input, "grid_sample", "input", 1)
    tensor_arg(grid, "grid_sample", "grid", 2)
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', but "
                         f"got: '{mode}'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or "
                         f"'reflection', but got: '{padding_mode}'")
    align = bool(align_corners)
    d = input.ndim - 2
    if d not in (2, 3) or grid.ndim != input.ndim:
        raise RuntimeError(f"grid_sampler(): expected 4D or 5D input and grid with same number of dimensions, but got "
                           f"input with sizes {list(input.shape)} and grid with sizes {list(grid.shape)}")
    if grid.shape[0] != input.shape[0] or grid.shape[-1] != d:
        raise RuntimeError(f"grid_sampler(): expected grid to have size {d} in last dimension, but got grid with sizes "
                           f"{list(grid.shape)}" if grid.shape[-1] != d else
                           f"grid_sampler(): expected grid and input to have same batch size, but got input with "
                           f"sizes {list(input.shape)} and grid with sizes {list(grid.shape)}")
    if mode == "bicubic" and d != 2:
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input")
    n, c = input.shape[:2]
    spatial = input.shape[2:]
    out = grid.shape[1:-1]
    points = int(np.prod(out))
    flat_input = input.reshape(n, c, -1)
    strides = [int(np.prod(spatial[j + 1:])) for j in range(d)]
    dev = input.device
    # per spatial dim j (input dim 2 + j): the grid's coordinate d - 1 - j, unnormalised
    coords = [_unnormalize(grid[..., d - 1 - j].reshape(n, points), spatial[j], align) for j in range(d)]

    def read(indices: list[Any]) -> Tensor:
        """The input at integer positions (host arrays ``(N, points)``), 0 where any is out of range."""
        valid = np.ones((n, points), dtype=bool)
        flat = np.zeros((n, points), dtype=np.int64)
        for j, index in enumerate(indices):
            valid &= (index >= 0) & (index < spatial[j])
            flat = flat + np.clip(index, 0, spatial[j] - 1) * strides[j]
        where_at = plain(dev.asarray(np.broadcast_to(flat[:, None, :], (n, c, points)).copy(),
                                     dtype=np.dtype(np.int64)), dev)
        values = gather(flat_input, 2, where_at)
        if valid.all():
            return values
        return where(plain(dev.asarray(valid[:, None, :]), dev), values, 0.0)

    if mode == "bicubic":
        xs = coords
        floors = [x.detach().floor() for x in xs]
        weights = [_cubic(x - f) for x, f in zip(xs, floors)]
        hosts = [np.asarray(f.cpu().numpy(), dtype=np.int64) for f in floors]
        total = None
        for taps in itertools.product(range(4), repeat=d):
            indices = [_bounded(h + t - 1, spatial[j], padding_mode, align) if padding_mode != "zeros" else h + t - 1
                       for j, (h, t) in enumerate(zip(hosts, taps))]
            w = weights[0][taps[0]]
            for j in range(1, d):
                w = w * weights[j][taps[j]]
            term = read(indices) * w.unsqueeze(1)
            total = term if total is None else total + term
        return total.reshape(n, c, *out)
    xs = [_pad(x, spatial[j], padding_mode, align) for j, x in enumerate(coords)]
    if mode == "nearest":
        indices = [np.asarray(x.detach().round().cpu().numpy(), dtype=np.int64) for x in xs]
        values = read(indices)
        if grid.requires_grad:  # the grid's gradient is zero, as torch's (a zero tensor, not None)
            values = where(plain(dev.backend.full((1,), True, np.dtype(np.bool_)), dev), values, xs[0].unsqueeze(1))
        return values.reshape(n, c, *out)
    floors = [x.detach().floor() for x in xs]
    fracs = [x - f for x, f in zip(xs, floors)]
    hosts = [np.asarray(f.cpu().numpy(), dtype=np.int64) for f in floors]
    total = None
    for corner in itertools.product((0, 1), repeat=d):
        w = None
        for j, bit in enumerate(corner):
            wj = fracs[j] if bit else 1 - fracs[j]
            w = wj if w is None else w * wj
        term = read([h + bit for h, bit in zip(hosts, corner)]) * w.unsqueeze(1)
        total = term if total is None else total + term
    return total.reshape(n, c, *out)
