"""In-place ops: compute out of place, write into the tensor's memory, rebase its grad_fn.

An in-place op bumps the version counter (shared with views and ``detach()``), so any
node that saved the old value refuses to unpack it. A node of the in-place op itself that
saved the tensor's old value gets a snapshot of it first, with the old grad_fn attached,
so ``x.mul_(y)`` still differentiates correctly with respect to ``y``.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from asyncgrad.autograd.grad_mode import grad_enabled, no_grad
from asyncgrad.ops._node import OpNode, gradient_edge, record
from asyncgrad.ops.elementwise import broadcast_error
from asyncgrad.tensor import Tensor, scalar_type_name


def _recording(x: Tensor, args: tuple) -> bool:
    if not grad_enabled.get():
        return False
    return x._requires_grad or any(isinstance(a, Tensor) and a._requires_grad for a in args)


def apply_inplace(x: Tensor, compute: Callable[..., Tensor], *args: Any) -> Tensor:
    grad_mode = grad_enabled.get()
    base = x._extra.base if x._extra is not None else None
    if grad_mode and x._requires_grad and x.grad_fn is None:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    if grad_mode and base is not None and base._requires_grad and base.grad_fn is None:
        raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place operation.")
    recording = _recording(x, args)
    if recording and base is not None:
        raise RuntimeError(
            "asyncgrad does not rebase a view's base after an in-place operation (torch's CopySlices), so this "
            "would give a wrong gradient: apply the in-place operation to the base tensor, or clone() the view first."
        )
    if not recording:
        with no_grad():
            result = compute(x, *args)
        _write(x, result.data)
        x._vc[0] += 1
        return x
    result = compute(x, *args)
    node = result.grad_fn
    old_grad_fn, old_output_nr = x.grad_fn, x.output_nr
    for saved in node.saved:
        if saved.vc is x._vc:
            saved.data = saved.data.copy()
            saved.vc = [saved.version]
            saved.tensor = Tensor._make(saved.data, x.device, x._requires_grad, old_grad_fn, old_output_nr, saved.vc)
    _write(x, result.data)
    x._vc[0] += 1
    for saved in node.saved:
        if saved.tensor is None:
            saved.data, saved.vc, saved.version = x.data, x._vc, x._vc[0]
    node._input_meta = ((x.shape, x.dtype, x.device),)
    if x._extra is not None and x._extra.retains_grad:
        _move_retain_grad(old_grad_fn, old_output_nr, node)
    x.grad_fn = node
    x.output_nr = 0
    x._requires_grad = True
    return x


def _move_retain_grad(old: Any, output_nr: int, node: OpNode) -> None:
    """``retain_grad()`` follows the tensor to its new version (torch): ``.grad`` is the gradient
    of the value after the in-place op. Tensor hooks stay where they were, on the old value."""
    hooks = old._hooks if old is not None else None
    retain = hooks.retains_grad.pop(output_nr, None) if hooks is not None else None
    if retain is not None:
        node._hook_store().retains_grad[0] = retain


def _write(x: Tensor, value: Any) -> None:
    if value.dtype != x.data.dtype and not np.can_cast(value.dtype, x.data.dtype, "same_kind"):
        raise RuntimeError(f"result type {scalar_type_name(value.dtype)} can't be cast to the desired output type "
                           f"{scalar_type_name(x.data.dtype)}")
    if value.shape != x.data.shape:
        raise RuntimeError(
            f"output with shape {list(x.data.shape)} doesn't match the broadcast shape {list(value.shape)}")
    try:
        x.data[...] = value
    except ValueError as exc:
        raise RuntimeError(
            "unsupported operation: more than one element of the written-to tensor refers to a single memory "
            "location. Please clone() the tensor before performing the operation."
        ) from exc


class FillBackward0(OpNode):
    """fill_/zero_: the old value no longer matters, so its gradient is zero."""

    __slots__ = ()

    def backward(self, F, g):
        return (g * 0,)


class ZeroBackward0(FillBackward0):
    __slots__ = ()


def filled(x: Tensor, value: Any, cls: type = FillBackward0) -> Tensor:
    out = x.device.xp.full(x.shape, value, dtype=x.dtype)
    if not (grad_enabled.get() and x._requires_grad):
        return Tensor._make(out, x.device, False, None, 0, [0])
    return record(cls((gradient_edge(x),)), out, x.device)


def zeroed(x: Tensor) -> Tensor:
    return filled(x, 0, ZeroBackward0)


class CopyBackwards(OpNode):
    """copy_(src): the destination's old value gets no gradient, src gets it summed to its shape."""

    __slots__ = ("src_shape", "src_dtype", "src_device")

    def backward(self, F, g):
        gsrc = None
        if self.needs(1):
            gsrc = F.to_device(F.cast(F.sum_to(g, self.src_shape), self.src_dtype), self.src_device)
        return (g * 0 if self.needs(0) else None, gsrc)


def copied(x: Tensor, src: Tensor) -> Tensor:
    data = x.device.asarray(src.data) if src.device is not x.device else src.data
    try:
        out = x.device.xp.broadcast_to(data, x.shape).astype(x.dtype)
    except ValueError:
        raise broadcast_error(x.shape, src.shape) from None
    if not (grad_enabled.get() and (x._requires_grad or src._requires_grad)):
        return Tensor._make(out, x.device, False, None, 0, [0])
    edges = (gradient_edge(x), gradient_edge(src))
    node = CopyBackwards(edges)
    node.src_shape, node.src_dtype, node.src_device = src.shape, src.dtype, src.device
    return record(node, out, x.device)
