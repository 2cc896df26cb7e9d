"""Matrix products; ``work`` counts multiply-adds so large products go to the executor."""

from __future__ import annotations

import numpy as np

from asyncgrad._validate import type_label
from asyncgrad.autograd.saved import SavedTensor
from asyncgrad.ops._node import OpNode, record_node, same_device
from asyncgrad.ops.elementwise import UnsupportedOperand, _binary_node, broadcast_error
from asyncgrad.tensor import Tensor, scalar_type_name

MATMUL_WORK_PER_MAC = 1 / 16
"""Element-operations per multiply-add: BLAS does ~16 of them in the time numpy does one
elementwise op, which keeps ``work`` comparable across ops for the inline threshold."""


class MmBackward0(OpNode):
    """a @ b for matrices; DotBackward0, MvBackward0 and BmmBackward0 are its other ranks.

    1-D operands are promoted to matrices (a row for ``a``, a column for ``b``) so one
    formula covers every rank; batch dims are summed back by ``sum_to``.
    """

    __slots__ = ("a_shape", "b_shape")

    def backward(self, F, g):
        saved = iter(F.unpack(self))
        a = next(saved) if self.needs(1) else None
        b = next(saved) if self.needs(0) else None
        a2_shape = (1,) + self.a_shape if len(self.a_shape) == 1 else self.a_shape
        b2_shape = self.b_shape + (1,) if len(self.b_shape) == 1 else self.b_shape
        shape = g.shape + (1,) if len(self.b_shape) == 1 else g.shape
        if len(self.a_shape) == 1:
            shape = shape[:-1] + (1,) + shape[-1:]
        g2 = F.reshape(g, shape)
        ga = gb = None
        if b is not None:
            ga = F.reshape(F.sum_to(g2 @ F.mT(F.reshape(b, b2_shape)), a2_shape), self.a_shape)
        if a is not None:
            gb = F.reshape(F.sum_to(F.mT(F.reshape(a, a2_shape)) @ g2, b2_shape), self.b_shape)
        return ga, gb


class DotBackward0(MmBackward0):
    __slots__ = ()


class MvBackward0(MmBackward0):
    __slots__ = ()


class BmmBackward0(MmBackward0):
    __slots__ = ()


def _check(a: Tensor, b: Tensor) -> None:
    if a.ndim == 0 or b.ndim == 0:
        raise RuntimeError(
            f"both arguments to matmul need to be at least 1D, but they are {a.ndim}D and {b.ndim}D")
    batch = ()
    if b.ndim >= 3:
        try:
            batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        except ValueError:
            raise broadcast_error(a.shape[:-2], b.shape[:-2]) from None
    k_a = a.shape[-1]
    k_b = b.shape[0] if b.ndim == 1 else b.shape[-2]
    if k_a == k_b:
        return
    # torch's message names the kernel its matmul dispatches to: dot, mv, mm (batch folded into
    # the rows) or bmm (batch dims folded into one)
    rows = int(np.prod(a.shape[:-1]))
    if a.ndim == 1 and b.ndim == 1:
        raise RuntimeError(
            f"inconsistent tensor size, expected tensor [{k_a}] and src [{k_b}] to have the same number of "
            f"elements, but got {k_a} and {k_b} elements respectively")
    if b.ndim == 1:
        raise RuntimeError(f"size mismatch, got input ({rows}), mat ({rows}x{k_a}), vec ({k_b})")
    if b.ndim == 2:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({rows}x{k_a} and {k_b}x{b.shape[-1]})")
    n = int(np.prod(batch))
    raise RuntimeError(
        f"Expected size for first two dimensions of batch2 tensor to be: [{n}, {k_a}] but got: [{n}, {k_b}].")


def matmul(a: Tensor, b: Tensor) -> Tensor:
    if not isinstance(a, Tensor):
        raise UnsupportedOperand(f"matmul(): argument 'input' (position 1) must be Tensor, not {type_label(a)}")
    if not isinstance(b, Tensor):
        raise UnsupportedOperand(f"matmul(): argument 'other' (position 2) must be Tensor, not {type_label(b)}")
    dev = same_device(a, b)
    _check(a, b)
    da, db = a.data, b.data
    if da.dtype != db.dtype:
        ta, tb = scalar_type_name(da.dtype), scalar_type_name(db.dtype)
        if a.ndim == b.ndim == 1:
            raise RuntimeError(f"dot : expected both vectors to have same dtype, but found {ta} and {tb}")
        if b.ndim == 1:
            raise RuntimeError(f"addmv input tensors must have the same dtype, but got {tb}, {ta}, and {tb}")
        if a.ndim > 2 or b.ndim > 2:
            raise RuntimeError(f"expected scalar type {ta} but found {tb}")
        raise RuntimeError(
            f"expected m1 and m2 to have the same dtype, but got: {scalar_type_name(da.dtype).lower()} != "
            f"{scalar_type_name(db.dtype).lower()}")
    out = da @ db
    out = out if not np.isscalar(out) else np.asarray(out)
    cls = DotBackward0 if a.ndim == b.ndim == 1 else MvBackward0 if b.ndim == 1 else \
        MmBackward0 if a.ndim == b.ndim == 2 else BmmBackward0
    node = object.__new__(cls)
    if not _binary_node(node, a, b):
        return Tensor._make(out, dev, False, None, 0, [0])
    node.a_shape = da.shape
    node.b_shape = db.shape
    saved = []
    if node.needs(1):
        saved.append(SavedTensor(a))
    if node.needs(0):
        saved.append(SavedTensor(b))
    node.saved = tuple(saved)
    macs = out.size * da.shape[-1]
    return record_node(node, out, dev, int(macs * MATMUL_WORK_PER_MAC) + out.size)
