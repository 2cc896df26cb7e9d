"""dropout: zero each element with probability ``p`` while training, scaling the rest by 1/(1-p)."""

from __future__ import annotations

import numpy as np

from asyncgrad.ops._node import plain
from asyncgrad.random import numpy_generator
from asyncgrad.tensor import Tensor

__all__ = ["check_p", "dropout"]


def check_p(p: float) -> None:
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """The mask comes from asyncgrad's generator (``ag.manual_seed`` repeats it; the stream is not
    torch's), drawn on the host in float32 (half the time of float64 draws) and sent to the device
    as the scale ``keep / (1 - p)``. As in torch the result is ``input * scale`` (MulBackward0);
    outside training, or with ``p == 0``, ``input`` itself."""
    check_p(p)
    if not training or p == 0.0:
        return input
    dev = input.device
    if p == 1.0:
        scale = dev.backend.zeros(input.shape, input.dtype)
    else:
        keep = numpy_generator(None, "dropout").random(input.shape, dtype=np.float32) >= p
        scale = dev.asarray(keep, dtype=input.dtype)
        scale *= 1.0 / (1 - p)  # in place: the asarray's new array
    mask = plain(scale, dev)
    return input.mul_(mask) if inplace else input * mask
