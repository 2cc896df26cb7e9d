"""Normalisation layers: BatchNorm1d/2d/3d (running statistics in buffers), LayerNorm, GroupNorm, RMSNorm,
LocalResponseNorm."""

from __future__ import annotations

from typing import Any, Sequence

from asyncgrad import dtypes
from asyncgrad._validate import tensor_arg
from asyncgrad.factories import ones, tensor, zeros
from asyncgrad.nn.module import Module
from asyncgrad.nn.parameter import Parameter
from asyncgrad.nn.spatial import pad
from asyncgrad.ops.norm import batch_norm, group_norm, instance_norm, layer_norm
from asyncgrad.tensor import Tensor

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "GroupNorm", "LayerNorm"]


class _BatchNorm(Module):
    """torch's _BatchNorm: ``weight``/``bias`` when ``affine``; the buffers ``running_mean``,
    ``running_var`` and ``num_batches_tracked`` when ``track_running_stats``. ``momentum=None``
    averages every batch so far equally (1 / num_batches_tracked)."""

    _dims: tuple[int, ...] = ()

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device: Any = None, dtype: Any = None, *,
                 bias: bool = True) -> None:
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        self.weight = Parameter(ones(num_features, dtype=dtype, device=device)) if affine else None
        self.bias = Parameter(zeros(num_features, dtype=dtype, device=device)) if affine and bias else None
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, dtype=dtype, device=device))
            self.register_buffer("running_var", ones(num_features, dtype=dtype, device=device))
            self.register_buffer("num_batches_tracked", tensor(0, dtype=dtypes.int64, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def _check_input_dim(self, input: Tensor) -> None:
        if input.ndim not in self._dims:
            wanted = " or ".join(f"{d}D" for d in self._dims)
            raise ValueError(f"expected {wanted} input (got {input.ndim}D input)")

    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            factor = 1.0 / float(self.num_batches_tracked.item()) if self.momentum is None else self.momentum
        bn_training = self.training or (self.running_mean is None and self.running_var is None)
        use_running = not self.training or self.track_running_stats
        return batch_norm(input, self.running_mean if use_running else None,
                          self.running_var if use_running else None, self.weight, self.bias, bn_training, factor,
                          self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    _dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    _dims = (4,)


class BatchNorm3d(_BatchNorm):
    _dims = (5,)


class LayerNorm(Module):
    def __init__(self, normalized_shape: int | Sequence[int], eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.normalized_shape = shape
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        self.weight = Parameter(ones(*shape, dtype=dtype, device=device)) if elementwise_affine else None
        self.bias = Parameter(zeros(*shape, dtype=dtype, device=device)) if elementwise_affine and bias else None

    def forward(self, input: Tensor) -> Tensor:
        return layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}, "
                f"bias={self.bias is not None}")


class GroupNorm(Module):
    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True, device: Any = None,
                 dtype: Any = None, *, bias: bool = True) -> None:
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError(f"num_channels ({num_channels}) must be divisible by num_groups ({num_groups})")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        self.weight = Parameter(ones(num_channels, dtype=dtype, device=device)) if affine else None
        self.bias = Parameter(zeros(num_channels, dtype=dtype, device=device)) if affine and bias else None

    def forward(self, input: Tensor) -> Tensor:
        return group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")


# ops-misc: InstanceNorm1d/2d/3d
class _InstanceNorm(_BatchNorm):
    """torch's _InstanceNorm: batch norm per sample and channel (``instance_norm``); ``affine`` and
    ``track_running_stats`` are off by default; an input without its batch dim is taken as one sample."""

    _dims: tuple[int, ...] = ()

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = False,
                 track_running_stats: bool = False, device: Any = None, dtype: Any = None) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)

    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        feature_dim = 0 if input.ndim == self._dims[0] else 1
        if input.shape[feature_dim] != self.num_features and self.affine:
            raise ValueError(f"expected input's size at dim={feature_dim} to match num_features "
                             f"({self.num_features}), but got: {input.shape[feature_dim]}.")
        unbatched = input.ndim == self._dims[0]
        x = input.unsqueeze(0) if unbatched else input
        out = instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                            self.training or not self.track_running_stats,
                            0.0 if self.momentum is None else self.momentum, self.eps)
        return out.squeeze(0) if unbatched else out


class InstanceNorm1d(_InstanceNorm):
    _dims = (2, 3)


class InstanceNorm2d(_InstanceNorm):
    _dims = (3, 4)


class InstanceNorm3d(_InstanceNorm):
    _dims = (4, 5)


__all__ += ["InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"]


# --------------------------------------------------------------------------- RMS and local response normalisation
def rms_norm(input: Tensor, normalized_shape: Sequence[int], weight: Tensor | None = None,
             eps: float | None = None) -> Tensor:
    """``input * rsqrt(mean(input^2 over the normalized dims) + eps) * weight``; ``eps`` defaults to
    the input dtype's machine epsilon (torch's rule). A composition, as torch's math kernel is."""
    tensor_arg(input, "rms_norm", "input", 1)
    if isinstance(normalized_shape, int):
        raise TypeError("rms_norm(): argument 'normalized_shape' (position 2) must be tuple of ints, not int")
    shape = tuple(normalized_shape)
    n = len(shape)
    if n == 0 or input.ndim < n or tuple(input.shape[input.ndim - n:]) != shape:
        raise RuntimeError(f"Given normalized_shape={list(shape)}, expected input with shape [*"
                           f"{', '.join(map(str, shape))}], but got input of size{list(input.shape)}")
    if weight is not None and tuple(weight.shape) != shape:
        raise RuntimeError(f"Expected weight to be of same shape as normalized_shape, but got weight of shape "
                           f"{list(weight.shape)} and normalized_shape = {list(shape)}")
    if eps is None:
        eps = float(dtypes.finfo(input.dtype).eps)
    dims = tuple(range(input.ndim - n, input.ndim))
    out = input * ((input * input).mean(dims, keepdim=True) + eps).rsqrt()
    return out if weight is None else out * weight


def local_response_norm(input: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0) -> Tensor:
    """``input / (k + alpha * mean of input^2 over a window of ``size`` channels)^beta``, the window
    running from ``size // 2`` channels before to ``(size - 1) // 2`` after, zero-padded (torch's
    average over the padded channels, written as a sum of shifted slices)."""
    tensor_arg(input, "local_response_norm", "input", 1)
    if input.ndim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality                          input (got {input.ndim} "
                         "dimensions)")
    if input.numel() == 0:
        return input
    c = input.shape[1]
    squared = input * input
    padded = pad(squared.movedim(1, -1), (size // 2, (size - 1) // 2)).movedim(-1, 1)
    window = padded.narrow(1, 0, c)
    for offset in range(1, size):
        window = window + padded.narrow(1, offset, c)
    return input / (window * (alpha / size) + k) ** beta


class RMSNorm(Module):
    def __init__(self, normalized_shape: int | Sequence[int], eps: float | None = None,
                 elementwise_affine: bool = True, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.normalized_shape = shape
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        self.weight = Parameter(ones(*shape, dtype=dtype, device=device)) if elementwise_affine else None

    def forward(self, input: Tensor) -> Tensor:
        return rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class LocalResponseNorm(Module):
    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0) -> None:
        super().__init__()
        self.size = size
        self.alpha = alpha
        self.beta = beta
        self.k = k

    def forward(self, input: Tensor) -> Tensor:
        return local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


__all__ += ["LocalResponseNorm", "RMSNorm", "local_response_norm", "rms_norm"]
