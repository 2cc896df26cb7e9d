"""Matrix products; ``work`` counts multiply-adds so large products go to the executor."""

from __future__ import annotations

import math

import numpy as np

from asyncgrad._validate import type_label
from asyncgrad.ops._node import OpNode, record, same_device
from asyncgrad.ops.elementwise import UnsupportedOperand, broadcast_error
from asyncgrad.tensor import Tensor, scalar_type_name

MATMUL_WORK_PER_MAC = 1 / 16
"""Element-operations per multiply-add: BLAS does ~16 of them in the time numpy does one
elementwise op, which keeps ``work`` comparable across ops for the inline threshold."""


class _Matmul(OpNode):
    """a @ b of every rank: MmBackward0 for matrices, DotBackward0, MvBackward0 and BmmBackward0
    for the others. Each saves ``a`` only if ``b`` needs a gradient and ``b`` only if ``a`` does.

    1-D operands are promoted to matrices (a row for ``a``, a column for ``b``) so one
    formula covers every rank; batch dims are summed back by ``sum_to``.
    """

    __slots__ = ()

    def backward(self, F, g):
        a, b = F.unpack(self)
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


class MmBackward0(_Matmul):
    __slots__ = ("a_shape", "b_shape")


class DotBackward0(_Matmul):
    __slots__ = ("a_shape", "b_shape")


class MvBackward0(_Matmul):
    __slots__ = ("a_shape", "b_shape")


class BmmBackward0(_Matmul):
    __slots__ = ("a_shape", "b_shape")


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
    rows = math.prod(a.shape[:-1])
    if a.ndim == 1 and b.ndim == 1:
        raise RuntimeError(
            f"inconsistent tensor size, expected tensor [{k_a}] and src [{k_b}] to have the same number of "
            f"elements, but got {k_a} and {k_b} elements respectively")
    if b.ndim == 1:
        raise RuntimeError(f"size mismatch, got input ({rows}), mat ({rows}x{k_a}), vec ({k_b})")
    if b.ndim == 2:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({rows}x{k_a} and {k_b}x{b.shape[-1]})")
    n = math.prod(batch)
    raise RuntimeError(
        f"Expected size for first two dimensions of batch2 tensor to be: [{n}, {k_a}] but got: [{n}, {k_b}].")


def matmul(a: Tensor, b: Tensor) -> Tensor:
    if not isinstance(a, Tensor):
        raise UnsupportedOperand(f"matmul(): argument 'input' (position 1) must be Tensor, not {type_label(a)}")
    if not isinstance(b, Tensor):
        raise UnsupportedOperand(f"matmul(): argument 'other' (position 2) must be Tensor, not {type_label(b)}")
    dev = same_device(a, b)
    _check(a, b)
    ta, tb = a.dtype, b.dtype
    if ta != tb:
        na, nb = scalar_type_name(ta), scalar_type_name(tb)
        if a.ndim == b.ndim == 1:
            raise RuntimeError(f"dot : expected both vectors to have same dtype, but found {na} and {nb}")
        if b.ndim == 1:
            raise RuntimeError(f"addmv input tensors must have the same dtype, but got {nb}, {na}, and {nb}")
        if a.ndim > 2 or b.ndim > 2:
            raise RuntimeError(f"expected scalar type {na} but found {nb}")
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: {na.lower()} != {nb.lower()}")
    da, db = a.data, b.data
    out = dev.xp.matmul(da, db)
    cls = DotBackward0 if a.ndim == b.ndim == 1 else MvBackward0 if b.ndim == 1 else \
        MmBackward0 if a.ndim == b.ndim == 2 else BmmBackward0
    size = math.prod(out.shape)
    return record(cls, (a, b), out, dev, da.shape, db.shape,
                  saved=(a if b._requires_grad else None, b if a._requires_grad else None),
                  work=int(size * da.shape[-1] * MATMUL_WORK_PER_MAC) + size)
