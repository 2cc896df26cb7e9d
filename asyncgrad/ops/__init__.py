"""Every differentiable op, grouped by family, and the wrappers that make Tensor methods of them
(``inplace_method``, ``operator_form``, ``setitem``, ``dtype_method``), which ``asyncgrad/_surface.py``
installs (Note [One declaration of Tensor's surface]).

One op lives in one place: its forward function and its backward node side by side in the
family module (``elementwise``, ``reduction``, ``shape``, ``indexing``, ``linalg``, ``nn``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from asyncgrad.ops import (
    _node,
    composites,
    elementwise,
    indexing,
    inplace,
    linalg,
    misc,
    nn,
    reduction,
    shape,
    sorting,
    tensor_math,
    views,
)
from asyncgrad.tensor import Tensor

__all__ = ["composites", "elementwise", "indexing", "inplace", "linalg", "misc", "nn", "reduction", "shape", "sorting",
           "tensor_math", "views", "_node", "inplace_method", "operator_form", "setitem", "dtype_method"]


def inplace_method(compute, name: str):
    """``x.add_(y)``: the op computed out of place and written back; an argument error is worded
    for the in-place method, as torch words it (``add_(): argument 'other' (position 1)``)."""
    base = name.rstrip("_")

    def method(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        if inplace.write_into(self, compute, args, kwargs):  # Note [In place without a temporary]
            return self
        internal = compute not in (inplace.filled, inplace.zeroed) and not (
            compute is inplace.copied and args and inplace.same_data(self, args[0]))
        try:
            return inplace.apply_inplace(self, lambda x, *a: compute(x, *a, **kwargs), *args,
                                         internal_overlap=internal)
        except TypeError as exc:
            text = str(exc)
            if not text.startswith(f"{base}()") and not text.startswith(f"{base}(): "):
                raise
            text = name + text[len(base):].replace("'other' (position 2)", "'other' (position 1)")
            text = text.replace("'tensor1' (position 2)", "'tensor1' (position 1)").replace(
                "'tensor2' (position 3)", "'tensor2' (position 2)")  # addcmul_/addcdiv_: self is no argument
            raise type(exc)(text) from None

    method.__name__ = name
    method.__doc__ = f"torch's ``{name}``: ``{base}`` computed and written into the tensor in place."
    return method


UNARY_INPLACE = {name + "_": inplace_method(compute, name + "_")
                 for name, compute in elementwise.INPLACE_COMPUTE.items()}
"""Every row of the unary table in place (Note [In-place forms of the unary table] in ops/elementwise.py):
Tensor's methods, and asyncgrad's functions where torch has them."""


def operator_form(fn):
    """The operator form of an op outside the binary table (``@``): Note [The binary table]."""
    return elementwise._number_first(fn, None, None, True)


_FILL_VALUES = (bool, int, float, np.bool_, np.integer, np.floating)


def _broadcasts_to(shape: tuple, target: tuple) -> bool:
    try:
        return np.broadcast_shapes(shape, target) == target
    except ValueError:  # index_put words the mismatch as torch does
        return False


def setitem(self: Tensor, index: Any, value: Any) -> None:
    """``self[index] = value``. A basic index writes through a view, as torch does (``fill_`` of a
    number, ``copy_`` of a tensor), so the result is CopySlices, a leaf's view is refused, and the
    overlap checks see only the written region; anything else is ``index_put_``."""
    index = indexing.sequence_as_tuple(index)
    if indexing.normalize_index(self, index)[1]:
        view = indexing.getitem(self, index)
        if type(value) in _FILL_VALUES:  # torch copies the number in: an expanded region is refused
            inplace.apply_inplace(view, inplace.filled, value)
            return
        if isinstance(value, Tensor) and _broadcasts_to(value.shape, view.shape):
            inplace.apply_inplace(view, inplace.copied, value)
            return
    inplace.apply_inplace(self, lambda x, v: indexing.index_put(x, index, v), value)


def dtype_method(dtype):
    """``t.float()`` and its kin: ``t.to(dtype)``."""
    def convert(self: Tensor, memory_format: Any = shape.preserve_format) -> Tensor:
        return self.to(dtype, memory_format=memory_format)

    return convert
