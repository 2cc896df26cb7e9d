"""dropout: zero each element with probability ``p`` while training, scaling the rest by 1/(1-p)."""

from __future__ import annotations

from asyncgrad.autograd.grad_mode import no_grad
from asyncgrad.factories import rand
from asyncgrad.tensor import Tensor

__all__ = ["check_p", "dropout"]


def check_p(p: float) -> None:
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """The mask comes from asyncgrad's generator (``ag.manual_seed`` repeats it; the stream is not
    torch's). As in torch the result is ``input * mask`` (MulBackward0); outside training, or with
    ``p == 0``, ``input`` itself."""
    check_p(p)
    if not training or p == 0.0:
        return input
    with no_grad():
        if p == 1.0:
            scale = input * 0.0
        else:
            scale = (rand(*input.shape, dtype=input.dtype, device=input.device) >= p).to(input.dtype) * (1.0 / (1 - p))
    return input.mul_(scale) if inplace else input * scale
