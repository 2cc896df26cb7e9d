"""``out=``: torch's top-level functions write their result into a tensor the caller gives.

Note [out= arguments]
~~~~~~~~~~~~~~~~~~~~~
torch records no graph for an ``out=`` call: when grad mode is on and an input or ``out`` requires
grad, it refuses ("mul(): functions with out=... arguments don't support automatic
differentiation, but one of the arguments requires grad."). Otherwise the result is computed as
usual (grad mode off, so nothing is recorded), checked castable to ``out``'s dtype (numpy's
``same_kind`` rule is torch's ``canCast``: no float into an integer, no integer into a bool), and
written in place, which bumps ``out``'s version. An ``out`` that shares only part of its memory
with an input is refused as torch's TensorIterator refuses it (Note [Memory overlap] in
inplace.py); sharing all of it (``exp(x, out=x)``) is fine. An ``out`` of another shape is
resized, with torch's deprecation warning unless it was empty. Only the top-level functions take ``out=``, as
in torch; the methods and operators never pay for the keyword.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any, Callable

import numpy as np

from asyncgrad.graph.grad_mode import is_grad_enabled, no_grad
from asyncgrad.ops.inplace import check_overlap
from asyncgrad.ops.misc import resize_output
from asyncgrad.tensor import Tensor, scalar_type_name


def accepts_out(fn: Callable[..., Tensor]) -> Callable[..., Tensor]:
    """``fn`` with torch's keyword ``out=`` (Note [out= arguments]); without it, ``fn`` itself runs."""
    name = fn.__name__.rstrip("_")

    @functools.wraps(fn)
    def with_out(*args: Any, out: Tensor | None = None, **kwargs: Any) -> Tensor:
        if out is None:
            return fn(*args, **kwargs)
        return _write_out(name, fn, args, kwargs, out)

    return with_out


def _tensors(args: Any) -> list[Tensor]:
    """The tensors among ``args``, those in lists and tuples (cat's) included."""
    found = []
    for arg in args:
        if isinstance(arg, Tensor):
            found.append(arg)
        elif isinstance(arg, (list, tuple)):
            found.extend(_tensors(arg))
    return found


def _write_out(name: str, fn: Callable[..., Tensor], args: tuple, kwargs: dict, out: Tensor) -> Tensor:
    if not isinstance(out, Tensor):
        raise TypeError(f"{name}(): argument 'out' must be Tensor, not {type(out).__name__}")
    inputs = _tensors(args) + _tensors(kwargs.values())
    if is_grad_enabled() and (out._requires_grad or any(t._requires_grad for t in inputs)):
        raise RuntimeError(f"{name}(): functions with out=... arguments don't support automatic "
                           "differentiation, but one of the arguments requires grad.")
    with no_grad():
        result = fn(*args, **kwargs)
        if not np.can_cast(result.dtype, out.dtype, "same_kind"):
            raise RuntimeError(f"result type {scalar_type_name(result.dtype)} can't be cast to the desired "
                               f"output type {scalar_type_name(out.dtype)}")
        if result.device != out.device:
            raise RuntimeError(f"Expected out tensor to have device {result.device}, but got {out.device} instead")
        if tuple(out.shape) != tuple(result.shape):
            if out.numel():
                warnings.warn(
                    f"An output with one or more elements was resized since it had shape {list(out.shape)}, "
                    f"which does not match the required output shape {list(result.shape)}. This behavior "
                    "is deprecated, and in a future PyTorch release outputs will not be resized unless "
                    "they have zero elements. You can explicitly reuse an out tensor t by resizing it, "
                    "inplace, to zero elements with t.resize_(0).", UserWarning, stacklevel=3)
            resize_output(out, tuple(result.shape))
        else:
            check_overlap(out, tuple(inputs), False)
        out.copy_(result)
    return out
