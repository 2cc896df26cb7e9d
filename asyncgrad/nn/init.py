"""``asyncgrad.nn.init``: torch.nn.init's initialisers, with torch's fans, gains and errors.

Every function fills the tensor in place under no_grad (so it works on Parameters that
require grad, bumps the version counter like any in-place op) and returns it. Random draws
come from ``generator`` (an ``ag.Generator`` or a ``numpy.random.Generator``) when given, else from asyncgrad's
global generator, so ``ag.manual_seed`` makes an initialisation repeatable. The streams are
numpy's, not torch's: the same seed gives different numbers than torch, with the same
distribution.
"""

from __future__ import annotations

import math
import warnings
from typing import Literal

import numpy as np

from asyncgrad.graph.grad_mode import no_grad
from asyncgrad.random import Generator, numpy_generator
from asyncgrad.tensor import Tensor

__all__ = ["calculate_gain", "constant_", "eye_", "kaiming_normal_", "kaiming_uniform_", "normal_", "ones_",
           "orthogonal_", "trunc_normal_", "uniform_", "xavier_normal_", "xavier_uniform_", "zeros_"]

GeneratorLike = Generator | np.random.Generator | None

_LINEAR = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d")


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The factor that keeps activations' variance steady through ``nonlinearity`` (torch's table)."""
    if nonlinearity in _LINEAR or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            negative_slope = 0.01
        elif (not isinstance(param, bool) and isinstance(param, int)) or isinstance(param, float):
            negative_slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + negative_slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    """``(in_features * receptive field, out_features * receptive field)``: dim 1 is the input,
    dim 0 the output, and any further dims (a convolution's kernel) multiply both."""
    if tensor.dim() < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive_field_size = 1
    for size in tensor.shape[2:]:
        receptive_field_size *= size
    return tensor.shape[1] * receptive_field_size, tensor.shape[0] * receptive_field_size


def _calculate_correct_fan(tensor: Tensor, mode: str) -> int:
    mode = mode.lower()
    valid_modes = ["fan_in", "fan_out"]
    if mode not in valid_modes:
        raise ValueError(f"Mode {mode} not supported, please use one of {valid_modes}")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _rng(generator: GeneratorLike, fn: str) -> np.random.Generator:
    """``fn`` is the tensor method torch's initialiser calls, which names a wrong generator."""
    return numpy_generator(generator, fn)


def _fill(tensor: Tensor, host: np.ndarray | float) -> Tensor:
    """Write host values into ``tensor`` in place (any device), as an in-place op under no_grad."""
    with no_grad():
        values = np.broadcast_to(np.asarray(host, dtype=tensor.dtype), tensor.shape)
        tensor.copy_(Tensor(values, dtype=tensor.dtype, device=tensor.device))
    return tensor


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator: GeneratorLike = None) -> Tensor:
    """Fill with U(a, b)."""
    return _fill(tensor, _rng(generator, "uniform_").uniform(a, b, tensor.shape))


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0,
            generator: GeneratorLike = None) -> Tensor:
    """Fill with N(mean, std^2)."""
    return _fill(tensor, _rng(generator, "normal_").normal(mean, std, tensor.shape))


def trunc_normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0,
                  generator: GeneratorLike = None) -> Tensor:
    """Fill with N(mean, std^2) restricted to [a, b]. torch inverts the CDF; here out-of-range
    draws are drawn again, which gives the same distribution."""
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The distribution of values "
                      "may be incorrect.", stacklevel=2)
    rng = _rng(generator, "uniform_")
    values = rng.normal(mean, std, tensor.shape)
    outside = (values < a) | (values > b)
    while outside.any():
        values[outside] = rng.normal(mean, std, int(outside.sum()))
        outside = (values < a) | (values > b)
    return _fill(tensor, values)


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Fill ``tensor`` with ``val`` in place, without recording (torch's ``nn.init.constant_``)."""
    return _fill(tensor, val)


def ones_(tensor: Tensor) -> Tensor:
    """Fill ``tensor`` with ones in place, without recording (torch's ``nn.init.ones_``)."""
    return _fill(tensor, 1.0)


def zeros_(tensor: Tensor) -> Tensor:
    """Fill ``tensor`` with zeros in place, without recording (torch's ``nn.init.zeros_``)."""
    return _fill(tensor, 0.0)


def eye_(tensor: Tensor) -> Tensor:
    """The identity in a 2-d tensor (ones on the diagonal of a rectangle)."""
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    return _fill(tensor, np.eye(*tensor.shape))


def orthogonal_(tensor: Tensor, gain: float = 1, generator: GeneratorLike = None) -> Tensor:
    """A (semi-)orthogonal matrix from the QR decomposition of a Gaussian one, its signs fixed so
    that the result is uniformly distributed (Mezzadri), as torch does; dims past 1 are flattened."""
    if tensor.dim() < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    flattened = _rng(generator, "normal_").normal(0.0, 1.0, (rows, cols))
    if rows < cols:
        flattened = flattened.T
    q, r = np.linalg.qr(flattened)
    q *= np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _fill(tensor, (q * gain).reshape(tensor.shape))


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator: GeneratorLike = None) -> Tensor:
    """U(-a, a) with ``a = gain * sqrt(6 / (fan_in + fan_out))`` (Glorot & Bengio)."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    a = math.sqrt(3.0) * std
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator: GeneratorLike = None) -> Tensor:
    """N(0, std^2) with ``std = gain * sqrt(2 / (fan_in + fan_out))`` (Glorot & Bengio)."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def _kaiming_std(tensor: Tensor, a: float, mode: str, nonlinearity: str) -> float | None:
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=3)
        return None
    fan = _calculate_correct_fan(tensor, mode)
    return calculate_gain(nonlinearity, a) / math.sqrt(fan)


def kaiming_uniform_(tensor: Tensor, a: float = 0, mode: Literal["fan_in", "fan_out"] = "fan_in",
                     nonlinearity: str = "leaky_relu", generator: GeneratorLike = None) -> Tensor:
    """U(-bound, bound) with ``bound = gain * sqrt(3 / fan)`` (He et al.); ``a`` is the negative
    slope of the leaky ReLU that follows. ``Linear`` uses ``a=sqrt(5)`` for its weight."""
    std = _kaiming_std(tensor, a, mode, nonlinearity)
    if std is None:
        return tensor
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor: Tensor, a: float = 0, mode: Literal["fan_in", "fan_out"] = "fan_in",
                    nonlinearity: str = "leaky_relu", generator: GeneratorLike = None) -> Tensor:
    """N(0, std^2) with ``std = gain / sqrt(fan)`` (He et al.)."""
    std = _kaiming_std(tensor, a, mode, nonlinearity)
    if std is None:
        return tensor
    return normal_(tensor, 0.0, std, generator)
