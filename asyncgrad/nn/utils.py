"""``asyncgrad.nn.utils``: gradient clipping and flat parameter vectors, as torch.nn.utils.

The clipping functions run on whatever device the gradients live on (tensor ops under
no_grad) and scale ``.grad`` in place, so an optimizer that holds the parameters sees the
clipped values.
"""

from __future__ import annotations

import math
from typing import Iterable

from asyncgrad.factories import tensor as new_tensor
from asyncgrad.graph.grad_mode import no_grad
from asyncgrad.ops.shape import cat, stack
from asyncgrad.tensor import Tensor

__all__ = ["clip_grad_norm_", "clip_grad_value_", "parameters_to_vector", "vector_to_parameters"]

Params = Tensor | Iterable[Tensor]


def _as_list(parameters: Params) -> list[Tensor]:
    return [parameters] if isinstance(parameters, Tensor) else list(parameters)


def _vector_norm(x: Tensor, norm_type: float) -> Tensor:
    """``||x||_p`` over all elements: max |x| for inf, min |x| for -inf, the nonzero count for 0."""
    if norm_type == math.inf:
        return x.abs().max()
    if norm_type == -math.inf:
        return x.abs().min()
    if norm_type == 0:
        return (x != 0).to(x.dtype).sum()
    if norm_type == 2:
        return (x * x).sum().sqrt()
    if norm_type == 1:
        return x.abs().sum()
    return (x.abs() ** norm_type).sum() ** (1.0 / norm_type)


@no_grad()
def clip_grad_norm_(parameters: Params, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                    foreach: bool | None = None) -> Tensor:
    """Scale all gradients together so that their joint ``norm_type`` norm is at most ``max_norm``.

    Returns the total norm before clipping (a 0-d tensor), the norm of the per-gradient norms,
    as torch computes it. As in torch the gradients are multiplied by
    ``min(1, max_norm / (total + 1e-6))`` even when that is 1. ``foreach`` is accepted and
    ignored: there is one code path.
    """
    max_norm, norm_type = float(max_norm), float(norm_type)
    grads = [p.grad for p in _as_list(parameters) if p.grad is not None]
    if not grads:
        return new_tensor(0.0)
    total_norm = _vector_norm(stack([_vector_norm(g, norm_type).to(grads[0].device) for g in grads]), norm_type)
    if error_if_nonfinite and not math.isfinite(total_norm.item()):
        raise RuntimeError(
            f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, so it cannot be "
            "clipped. To disable this error and scale the gradients by the non-finite norm anyway, set "
            "`error_if_nonfinite=False`"
        )
    clip_coef = (max_norm / (total_norm + 1e-6)).clamp(max=1.0)
    for g in grads:
        g.mul_(clip_coef.to(g.device))
    return total_norm


@no_grad()
def clip_grad_value_(parameters: Params, clip_value: float, foreach: bool | None = None) -> None:
    """Clamp every gradient element into ``[-clip_value, clip_value]``, in place."""
    clip_value = float(clip_value)
    for p in _as_list(parameters):
        if p.grad is not None:
            p.grad.clamp_(min=-clip_value, max=clip_value)


def _check_same_device(parameters: list[Tensor]) -> None:
    if any(p.device is not parameters[0].device for p in parameters):
        raise TypeError("Found two parameters on different devices, this is currently not supported.")


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """All parameters flattened and concatenated, differentiably (as torch's ``cat`` of views)."""
    params = _as_list(parameters)
    _check_same_device(params)
    return cat([p.reshape(-1) for p in params])


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Copy consecutive slices of ``vec`` into the parameters.

    torch rebinds each parameter's ``.data`` to a view of ``vec``; here the values are copied
    into the parameters' own memory (under no_grad), so anything already viewing a parameter
    (a state dict, an optimizer's buffers keyed by it) keeps seeing it.
    """
    if not isinstance(vec, Tensor):
        module = type(vec).__module__
        raise TypeError("expected torch.Tensor, but got: "
                        + (type(vec).__qualname__ if module == "builtins" else f"{module}.{type(vec).__qualname__}"))
    params = _as_list(parameters)
    _check_same_device(params)
    pointer = 0
    with no_grad():
        for p in params:
            n = p.numel()
            p.copy_(vec[pointer:pointer + n].reshape(p.shape))
            pointer += n
