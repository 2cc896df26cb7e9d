"""dropout: zero each element (or channel) with probability ``p`` while training, scaling the rest by
1/(1-p); alpha dropout, which keeps SELU's mean and variance."""

from __future__ import annotations

import math
import warnings

import numpy as np

from asyncgrad.ops._node import plain
from asyncgrad.random import numpy_generator
from asyncgrad.tensor import Tensor

__all__ = ["alpha_dropout", "check_p", "dropout", "dropout1d", "dropout2d", "dropout3d", "feature_alpha_dropout"]


def check_p(p: float) -> None:
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _keep(shape: tuple[int, ...], p: float) -> np.ndarray:
    """Bernoulli(1 - p) draws, as bools of ``shape``, from asyncgrad's generator (``ag.manual_seed``
    repeats them; the stream is not torch's): one 32-bit half of the generator's raw 64-bit words
    per element, kept where it is at least ``p * 2**32``, so P(keep) is ``1 - p`` to within
    ``2**-32`` (float32 uniforms would round ``p`` to 24 bits and cost a conversion per element)."""
    n = math.prod(shape)
    words = numpy_generator(None, "dropout").bit_generator.random_raw((n + 1) // 2).view(np.uint32)[:n]
    return (words >= np.uint32(min(round(p * 2.0 ** 32), 2 ** 32 - 1))).reshape(shape)


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """The mask (``_keep``) is drawn on the host and sent to the device as the scale
    ``keep / (1 - p)``. As in torch the result is ``input * scale`` (MulBackward0);
    outside training, or with ``p == 0``, ``input`` itself."""
    check_p(p)
    if not training or p == 0.0:
        return input
    dev = input.device
    if p == 1.0:
        scale = dev.backend.zeros(input.shape, input.dtype)
    else:
        keep = _keep(tuple(input.shape), p)
        scale = dev.asarray(keep, dtype=input.dtype)
        scale *= 1.0 / (1 - p)  # in place: the asarray's new array
    mask = plain(scale, dev)
    return input.mul_(mask) if inplace else input * mask


_SELU_ALPHA = 1.7580993408473766
"""alpha_dropout's alpha: SELU's negative saturation, -lambda * alpha (ATen's constant)."""


def _dropout_impl(input: Tensor, p: float, train: bool, feature: bool, alpha: bool, inplace: bool) -> Tensor:
    """ATen's ``_dropout_impl``: a Bernoulli(1 - p) noise, per element or (``feature``) per
    (sample, channel), scaled by 1 / (1 - p); alpha dropout instead maps dropped elements to SELU's
    saturation and rescales so that mean and variance are kept. The result is ``input * noise``
    (plus ``b`` for alpha dropout), so the gradient is ``noise`` (MulBackward0, as torch's)."""
    check_p(p)
    if not train or p == 0.0 or input.numel() == 0:
        return input
    dev = input.device
    if p == 1.0:
        zero = plain(dev.backend.zeros((), input.dtype), dev)
        return input.mul_(zero) if inplace else input * zero
    shape = input.shape[:2] + (1,) * (input.ndim - 2) if feature else input.shape
    keep = _keep(tuple(shape), p).astype(np.float64)
    if alpha:
        a = 1.0 / math.sqrt((_SELU_ALPHA * _SELU_ALPHA * p + 1) * (1 - p))
        b = plain(dev.asarray((keep - 1) * (_SELU_ALPHA * a) + _SELU_ALPHA * a * p, dtype=input.dtype), dev)
        noise = plain(dev.asarray(keep * a, dtype=input.dtype), dev)
        return input.mul_(noise).add_(b) if inplace else input * noise + b
    noise = plain(dev.asarray(keep / (1 - p), dtype=input.dtype), dev)
    return input.mul_(noise) if inplace else input * noise


def _feature(input: Tensor, p: float, training: bool, inplace: bool, batched: int, name: str) -> Tensor:
    """dropout1d/2d/3d: whole channels, the input ``(N, C, *spatial)`` or, one dim short, unbatched."""
    check_p(p)
    if input.ndim == batched - 1:
        out = _dropout_impl(input.unsqueeze(0), p, training, True, False, inplace)
        return out.squeeze(0)
    return _dropout_impl(input, p, training, True, False, inplace)


def dropout1d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """torch.nn.functional.dropout1d: channels of ``(N, C, L)`` or ``(C, L)`` zeroed whole."""
    check_p(p)
    if input.ndim not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D input. Note that "
                           "dropout1d exists to provide channel-wise dropout on inputs with 1 spatial dimension, a "
                           "channel dimension, and an optional batch dimension (i.e. 2D or 3D inputs).")
    return _feature(input, p, training, inplace, 3, "dropout1d")


def dropout2d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """torch.nn.functional.dropout2d: channels zeroed whole; a 3-D input is read as ``(N, C, L)``, as
    torch does today (with its warning)."""
    check_p(p)
    if input.ndim not in (3, 4):
        warnings.warn(f"dropout2d: Received a {input.ndim}-D input to dropout2d, which is deprecated and will result "
                      "in an error in a future release. To retain the behavior and silence this warning, please use "
                      "dropout instead. Note that dropout2d exists to provide channel-wise dropout on inputs with 2 "
                      "spatial dimensions, a channel dimension, and an optional batch dimension (i.e. 3D or 4D "
                      "inputs).", stacklevel=2)
    if input.ndim == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout behavior "
                      "is desired - input is interpreted as shape (N, C, L), where C is the channel dim. This behavior "
                      "will change in a future release to interpret the input as one without a batch dimension, i.e. "
                      "shape (C, H, W). To maintain the 1D channel-wise dropout behavior, please switch to using "
                      "dropout1d instead.", stacklevel=2)
    return _dropout_impl(input, p, training, True, False, inplace)


def dropout3d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """torch.nn.functional.dropout3d: channels of ``(N, C, D, H, W)`` or ``(C, D, H, W)`` zeroed whole."""
    check_p(p)
    if input.ndim not in (4, 5):
        warnings.warn(f"dropout3d: Received a {input.ndim}-D input to dropout3d, which is deprecated and will result "
                      "in an error in a future release. To retain the behavior and silence this warning, please use "
                      "dropout instead. Note that dropout3d exists to provide channel-wise dropout on inputs with 3 "
                      "spatial dimensions, a channel dimension, and an optional batch dimension (i.e. 4D or 5D "
                      "inputs).", stacklevel=2)
    return _feature(input, p, training, inplace, 5, "dropout3d")


def alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False) -> Tensor:
    """torch.nn.functional.alpha_dropout (for SELU networks): keeps the input's mean and variance."""
    return _dropout_impl(input, p, training, False, True, inplace)


def feature_alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False) -> Tensor:
    """torch.nn.functional.feature_alpha_dropout: alpha dropout of whole channels."""
    return _dropout_impl(input, p, training, True, True, inplace)
