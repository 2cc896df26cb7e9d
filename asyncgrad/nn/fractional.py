"""``fractional_max_pool2d/3d`` and their layers (Graham's fractional max pooling).

Along a dim of ``n`` inputs pooled to ``o`` outputs with windows of ``k``, a sample ``u`` in
[0, 1) of each (sample, channel) places window ``i < o - 1`` at ``floor((i + u) a) - floor(u a)``,
``a = (n - k) / (o - 1)``, and the last at ``n - k`` (torch's interval rule, so that given
torch's ``_random_samples`` the windows are torch's). Each window's first largest element is
found on the host and the result gathers it from the flattened input: ``gather``'s node, whose
gradient adds back there and whose own gradient is that gather again.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from asyncgrad._validate import tensor_arg
from asyncgrad.nn.module import Module
from asyncgrad.ops._node import plain
from asyncgrad.ops.indexing import gather
from asyncgrad.random import numpy_generator
from asyncgrad.tensor import Tensor

__all__ = ["FractionalMaxPool2d", "FractionalMaxPool3d", "fractional_max_pool2d", "fractional_max_pool3d"]


def _starts(n: int, o: int, k: int, u: np.ndarray) -> np.ndarray:
    """Window starts ``(..., o)`` for samples ``u`` ``(...)``: torch's intervals."""
    if o == 1:
        return np.full(u.shape + (1,), n - k, dtype=np.int64)
    alpha = (n - k) / (o - 1)
    i = np.arange(o - 1)
    starts = np.floor((i + u[..., None]) * alpha) - np.floor(u[..., None] * alpha)
    return np.concatenate([starts.astype(np.int64), np.full(u.shape + (1,), n - k, dtype=np.int64)], axis=-1)


def _fractional(d: int, fn: str, input: Tensor, kernel_size: Any, output_size: Any, output_ratio: Any,
                return_indices: bool, random_samples: Any) -> Any:
    tensor_arg(input, fn, "input", 1)
    if input.ndim not in (d + 1, d + 2):
        raise RuntimeError(f"{fn}(): Expected {d + 1}D or {d + 2}D tensor, but got: {list(input.shape)}")
    kernel = (kernel_size,) * d if isinstance(kernel_size, int) else tuple(kernel_size)
    spatial = input.shape[-d:]
    if output_size is None and output_ratio is None:
        raise ValueError(f"{fn} requires specifying either an output_size or an output_ratio")
    if output_size is None:
        ratio = (output_ratio,) * d if isinstance(output_ratio, (int, float)) else tuple(output_ratio)
        output_size = [int(n * r) for n, r in zip(spatial, ratio)]
    sizes = (output_size,) * d if isinstance(output_size, int) else tuple(output_size)
    for n, o, k in zip(spatial, sizes, kernel):
        if o + k - 1 > n:
            raise RuntimeError(f"{fn}(): pool size {k} too large relative to input size {n} for output size {o}")
    batched = input.ndim == d + 2
    lead = input.shape[:2] if batched else (1,) + input.shape[:1]
    if input.numel() == 0:  # an empty batch or channel: an empty result, still part of the graph
        shape = input.shape[:-d] + tuple(sizes)
        result = plain(input.device.backend.zeros(shape, input.dtype), input.device) + input.sum() * 0
        if return_indices:
            return result, plain(input.device.backend.zeros(tuple(result.shape), np.dtype(np.int64)), input.device)
        return result
    if random_samples is None:
        u = numpy_generator(None, fn).random(lead + (d,))
    else:
        u = np.asarray(random_samples.detach().cpu().numpy(), dtype=np.float64).reshape(lead + (d,))
    # every (sample, channel, output, tap)'s flat position in its plane, then the first maximum's
    positions = np.zeros(lead + tuple(sizes) + (1,) * d, dtype=np.int64)
    for j in range(d):
        # torch's samples run (W, H) in 2-D and (T, H, W) in 3-D
        sample = u[..., 1 - j] if d == 2 else u[..., j]
        taps = _starts(spatial[j], sizes[j], kernel[j], sample)[..., :, None] + np.arange(kernel[j])  # (.., o, k)
        shape = lead + (1,) * j + (sizes[j],) + (1,) * (d - 1 - j) + (1,) * j + (kernel[j],) + (1,) * (d - 1 - j)
        positions = positions * spatial[j] + taps.reshape(shape)
    positions = positions.reshape(lead + tuple(sizes) + (-1,))
    host = np.asarray(input.detach().cpu().numpy()).reshape(lead + (-1,))
    flat_positions = positions.reshape(lead + (-1,))
    values = np.take_along_axis(host, flat_positions, axis=-1).reshape(positions.shape)
    first = np.argmax(np.where(np.isnan(values), np.inf, values), axis=-1)
    at = np.take_along_axis(positions, first[..., None], axis=-1)[..., 0]  # (N, C, *out)
    index = plain(input.device.asarray(at.reshape(lead + (-1,)), dtype=np.dtype(np.int64)), input.device)
    flat = input.reshape(*(input.shape[:-d] + (-1,)))
    picked = gather(flat, flat.ndim - 1, index if batched else index.squeeze(0))
    result = picked.reshape(*(input.shape[:-d] + tuple(sizes)))
    if return_indices:
        where = plain(input.device.asarray(at if batched else at[0], dtype=np.dtype(np.int64)), input.device)
        return result, where
    return result


def fractional_max_pool2d(input: Tensor, kernel_size: Any, output_size: Any = None, output_ratio: Any = None,
                          return_indices: bool = False, _random_samples: Tensor | None = None) -> Any:
    """torch.nn.functional.fractional_max_pool2d on ``(N, C, H, W)`` or ``(C, H, W)``."""
    return _fractional(2, "fractional_max_pool2d", input, kernel_size, output_size, output_ratio, return_indices,
                       _random_samples)


def fractional_max_pool3d(input: Tensor, kernel_size: Any, output_size: Any = None, output_ratio: Any = None,
                          return_indices: bool = False, _random_samples: Tensor | None = None) -> Any:
    """torch.nn.functional.fractional_max_pool3d on ``(N, C, T, H, W)`` or ``(C, T, H, W)``."""
    return _fractional(3, "fractional_max_pool3d", input, kernel_size, output_size, output_ratio, return_indices,
                       _random_samples)


class _FractionalMaxPoolNd(Module):
    _fn: Any = None

    def __init__(self, kernel_size: Any, output_size: Any = None, output_ratio: Any = None,
                 return_indices: bool = False, _random_samples: Tensor | None = None) -> None:
        super().__init__()
        if output_size is None and output_ratio is None:
            raise ValueError(f"{type(self).__name__} requires specifying either an output size, or a pooling ratio")
        if output_size is not None and output_ratio is not None:
            raise ValueError("only one of output_size and output_ratio may be specified")
        self.kernel_size = kernel_size
        self.output_size = output_size
        self.output_ratio = output_ratio
        self.return_indices = return_indices
        self._random_samples = _random_samples

    def forward(self, input: Tensor) -> Any:
        return type(self)._fn(input, self.kernel_size, self.output_size, self.output_ratio, self.return_indices,
                              self._random_samples)


class FractionalMaxPool2d(_FractionalMaxPoolNd):
    _fn = staticmethod(fractional_max_pool2d)


class FractionalMaxPool3d(_FractionalMaxPoolNd):
    _fn = staticmethod(fractional_max_pool3d)

