"""Matrix products, einsum, distances, norms and the linear-algebra functions of ``ag.linalg``;
``work`` counts multiply-adds so large products go to the executor."""

from __future__ import annotations

import math
import operator
import string
import warnings
from typing import Any

import numpy as np

from asyncgrad._validate import int_arg, normalize_dim, number_arg, tensor_arg, type_label
from asyncgrad.devices import cpu
from asyncgrad.devices.backend import backend_of
from asyncgrad.dtypes import get_default_dtype
from asyncgrad.ops import reduction
from asyncgrad.ops import shape as shape_ops
from asyncgrad.ops._node import ArrayMath, OpNode, input_meta, plain, record, same_device
from asyncgrad.ops.elementwise import UnsupportedOperand, broadcast_error, mul, result_dtype, where
from asyncgrad.ops.reduction import _kept_shape, normalize_dims
from asyncgrad.ops.views import narrow
from asyncgrad.tensor import (  # noqa: F401  (the return types, at their import path beside the ops that make them)
    EighResult,
    EigResult,
    LegacySvdResult,
    QrResult,
    SlogdetResult,
    SvdResult,
    Tensor,
    TriangularSolveResult,
    scalar_type_name,
)
from asyncgrad.variable.saved import SavedTensor

MATMUL_WORK_PER_MAC = 1 / 16
"""Element-operations per multiply-add: BLAS does ~16 of them in the time numpy does one
elementwise op, which keeps ``work`` comparable across ops for the inline threshold."""


class _Matmul(OpNode):
    """a @ b of every rank: MmBackward0 for matrices, DotBackward0, MvBackward0 and BmmBackward0
    for the others. Each saves ``a`` only if ``b`` needs a gradient and ``b`` only if ``a`` does.

    1-D operands are promoted to matrices (a row for ``a``, a column for ``b``) so one
    formula covers every rank; batch dims are summed back by ``sum_to``.

    Note [mm's backward in two products]: two matrices need none of that (no promotion, no batch
    dims, every reshape and ``sum_to`` a no-op), so mm's backward is the two products alone: six
    formula calls fewer per node, same bits (W3's backward: ``python -m benchmarks --only W3``).
    """

    __slots__ = ()

    def backward(self, F, g):
        a, b = F.unpack(self)
        if len(self.a_shape) == len(self.b_shape) == 2:  # Note [mm's backward in two products]
            return (None if b is None else F.mm(g, F.mT(b)), None if a is None else F.mm(F.mT(a), g))
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
    saved_names = ("self", "mat2")  # Note [Saved tensors read by name] in _node.py


class DotBackward0(_Matmul):
    __slots__ = ("a_shape", "b_shape")
    saved_names = ("self", "tensor")  # Note [Saved tensors read by name] in _node.py


class MvBackward0(_Matmul):
    __slots__ = ("a_shape", "b_shape")
    saved_names = ("self", "vec")  # Note [Saved tensors read by name] in _node.py


class BmmBackward0(_Matmul):
    __slots__ = ("a_shape", "b_shape")
    saved_names = ("self", "mat2")  # Note [Saved tensors read by name] in _node.py


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
    """Matrix product with torch's rules for 1-D, 2-D and batched operands (broadcast batch dimensions)."""
    if a.__class__ is Tensor and b.__class__ is Tensor:
        # Note [Two matrices first]: two matrices of one dtype object on one device, whose inner sizes
        # agree, pass every check below and are MmBackward0 (mm's shape of the product, a layer's
        # ``x @ w``); they are recognised from their arrays alone and recorded at once. Anything
        # else, an error included, takes the general path. What it buys: W3's forward (``python -m
        # benchmarks.interleaved --only W3``).
        da, db = a._data, b._data
        dev = a.device
        if (da.ndim == 2 and db.ndim == 2 and b.device is dev and da.dtype is db.dtype
                and da.shape[1] == db.shape[0]):
            out = dev.xp.matmul(da, db)
            rows, inner = da.shape
            size = rows * db.shape[1]
            return record(MmBackward0, (a, b), out, dev, da.shape, db.shape,
                          saved=(a if b._requires_grad else None, b if a._requires_grad else None),
                          work=int(size * inner * MATMUL_WORK_PER_MAC) + size)
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


# --------------------------------------------------------------------------- the matmul family
def mm(a: Tensor, b: Tensor) -> Tensor:
    """torch's ``mm``: two matrices (``matmul``'s MmBackward0)."""
    tensor_arg(a, "mm", "input", 1)
    tensor_arg(b, "mm", "mat2", 2)
    if a.ndim != 2:
        raise RuntimeError("self must be a matrix")
    if b.ndim != 2:
        raise RuntimeError("mat2 must be a matrix")
    return matmul(a, b)


def bmm(a: Tensor, b: Tensor) -> Tensor:
    """torch's ``bmm``: two batches of matrices of one batch size (no broadcasting)."""
    tensor_arg(a, "bmm", "input", 1)
    tensor_arg(b, "bmm", "mat2", 2)
    if a.ndim != 3:
        raise RuntimeError("batch1 must be a 3D tensor")
    if b.ndim != 3:
        raise RuntimeError("batch2 must be a 3D tensor")
    if a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: [{a.shape[0]}, "
                           f"{a.shape[2]}] but got: [{b.shape[0]}, {b.shape[1]}].")
    return matmul(a, b)


def dot(a: Tensor, b: Tensor) -> Tensor:
    """Inner product of two 1-D tensors, as torch's."""
    tensor_arg(a, "dot", "input", 1)
    tensor_arg(b, "dot", "tensor", 2)
    if a.ndim != 1 or b.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {a.ndim}D and {b.ndim}D tensors")
    return matmul(a, b)


def mv(a: Tensor, b: Tensor) -> Tensor:
    """Matrix-vector product of an (n, m) matrix and an (m,) vector, as torch's."""
    tensor_arg(a, "mv", "input", 1)
    tensor_arg(b, "mv", "vec", 2)
    if a.ndim != 2 or b.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got 1, {a.ndim}, {b.ndim}")
    return matmul(a, b)


def outer(a: Tensor, b: Tensor) -> Tensor:
    """torch's ``outer``: ``a.reshape(-1, 1) * b``, so its node is MulBackward0, as torch's."""
    tensor_arg(a, "outer", "input", 1)
    tensor_arg(b, "outer", "vec2", 2)
    if a.ndim != 1:
        raise RuntimeError(f"outer: Expected 1-D argument self, but got {a.ndim}-D")
    if b.ndim != 1:
        raise RuntimeError(f"outer: Expected 1-D argument vec2, but got {b.ndim}-D")
    return mul(shape_ops.reshape(a, (a.shape[0], 1)), b)


class AddmmBackward0(OpNode):
    """beta * input + alpha * (mat1 @ mat2): input's gradient summed back to its (broadcast) shape;
    each matrix saved only if the other needs its gradient."""

    __slots__ = ("input_shape", "beta", "alpha")
    saved_names = ("mat1", "mat2")  # Note [Saved tensors read by name] in _node.py

    def backward(self, F, g):
        m1, m2 = F.unpack(self)
        alpha, beta = self.alpha, self.beta
        scaled = g if alpha == 1 else g * alpha
        return (
            F.sum_to(g if beta == 1 else g * beta, self.input_shape) if self.needs(0) else None,
            F.mm(scaled, F.mT(m2)) if self.needs(1) else None,
            F.mm(F.mT(m1), scaled) if self.needs(2) else None,
        )


class BaddbmmBackward0(OpNode):
    """addmm's formula over a batch; torch names its saved tensors batch1 and batch2."""

    __slots__ = AddmmBackward0.__slots__
    saved_names = ("batch1", "batch2")  # Note [Saved tensors read by name] in _node.py
    backward = AddmmBackward0.backward


def _addmm(name: str, x: Tensor, m1: Tensor, m2: Tensor, beta: Any, alpha: Any) -> Tensor:
    batched = name == "baddbmm"
    tensor_arg(x, name, "input", 1)
    tensor_arg(m1, name, "batch1" if batched else "mat1", 2)
    tensor_arg(m2, name, "batch2" if batched else "mat2", 3)
    beta = number_arg(beta, name, "beta", 4)
    alpha = number_arg(alpha, name, "alpha", 5)
    if batched:
        if m1.ndim != 3:
            raise RuntimeError("batch1 must be a 3D tensor")
        if m2.ndim != 3:
            raise RuntimeError("batch2 must be a 3D tensor")
    else:
        for t, arg in ((m1, "mat1"), (m2, "mat2")):
            if t.ndim != 2:
                raise RuntimeError(f"{arg} must be a matrix, got {t.ndim}-D tensor")
    if m1.dtype != m2.dtype:
        raise RuntimeError(f"{'batch1 and batch2' if batched else 'mat1 and mat2'} must have the same dtype, but "
                           f"got {scalar_type_name(m1.dtype)} and {scalar_type_name(m2.dtype)}")
    if x.dtype != m2.dtype:
        raise RuntimeError(f"self and {'batch2' if batched else 'mat2'} must have the same dtype, but got "
                           f"{scalar_type_name(x.dtype)} and {scalar_type_name(m2.dtype)}")
    if batched:
        bmm(m1, m2)  # its checks, on shapes only: words the mismatch as torch
    else:
        _check(m1, m2)
    dev = same_device(m1, m2)
    same_device(x, m1)
    product = dev.xp.matmul(m1.data, m2.data)
    target = product.shape
    try:
        if np.broadcast_shapes(x.shape, target) != target:
            raise ValueError
    except ValueError:
        raise RuntimeError(_expand_error(x.shape, target)) from None
    out = product if alpha == 1 else product * alpha
    if beta != 0:  # beta == 0 ignores the input, its NaNs included (torch)
        out = out + (x.data if beta == 1 else x.data * beta)
    size = math.prod(target)
    return record(BaddbmmBackward0 if batched else AddmmBackward0, (x, m1, m2), out, dev, x.shape, beta, alpha,
                  saved=(m1 if m2._requires_grad else None, m2 if m1._requires_grad else None),
                  work=int(size * m1.shape[-1] * MATMUL_WORK_PER_MAC) + 2 * size)


def _expand_error(shape: tuple[int, ...], target: tuple[int, ...]) -> str:
    """torch's expand refusal (addmm expands its input to the product's shape)."""
    lead = len(target) - len(shape)
    if lead < 0:
        return (f"The expanded size of the tensor ({len(target)}) must be greater or equal to the number of "
                f"dimensions in the tensor ({len(shape)})")
    for i in range(len(shape) - 1, -1, -1):
        n, m = shape[i], target[i + lead]
        if n != m and n != 1:
            return (f"The expanded size of the tensor ({m}) must match the existing size ({n}) at non-singleton "
                    f"dimension {i + lead}.  Target sizes: {list(target)}.  Tensor sizes: {list(shape)}")
    return f"cannot expand {list(shape)} to {list(target)}"


def addmm(input: Tensor, mat1: Tensor, mat2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
    """torch's ``addmm``: ``beta * input + alpha * (mat1 @ mat2)``, ``input`` broadcast to the product."""
    return _addmm("addmm", input, mat1, mat2, beta, alpha)


def baddbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
    """torch's ``baddbmm``: ``addmm`` over a batch of matrices."""
    return _addmm("baddbmm", input, batch1, batch2, beta, alpha)


# --------------------------------------------------------------------------- einsum
# Note [einsum differentiates through einsum]: the equation is first made explicit (each ellipsis
# becomes letters of its own, the implicit output torch's: the ellipsis' letters, then the letters
# seen once, sorted) and each operand is broadcast to its letters' sizes, so one numpy-style
# einsum computes it on every backend. Operand i's gradient is itself an einsum, of the output's
# gradient with the other operands, onto i's letters; a letter only i has (summed in the forward)
# comes back by broadcasting, a repeated letter (a diagonal, ``ii->i``) by multiplying with
# identity matrices (``i,ij->ij``), and a broadcast size-1 dim by a sum. Written against ``F``,
# the backward is recorded from einsums too (``einsum_explicit``): every order comes for free.
# torch decomposes einsum into permutes and bmm, so its output's grad_fn is one of those
# (ViewBackward0, PermuteBackward0, ...); asyncgrad's is EinsumBackward0, a name torch has not.
_LETTERS = string.ascii_uppercase + string.ascii_lowercase


def _parse_einsum(equation: str, shapes: list[tuple[int, ...]]) -> tuple[list[str], str]:
    """The explicit subscripts of each operand and of the output, ellipses spelled out."""
    if not isinstance(equation, str):
        raise TypeError(f"einsum(): argument 'equation' (position 1) must be str, not {type_label(equation)}")
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    for i, c in enumerate(eq):
        if c not in _LETTERS and c not in ".,->":
            raise RuntimeError(f"einsum(): invalid subscript given at index {i} in the equation string, subscripts "
                               f"must be in [a-zA-Z]")
    terms = lhs.split(",")
    if len(terms) > len(shapes):
        raise RuntimeError("einsum(): fewer operands were provided than specified in the equation")
    if len(terms) < len(shapes):
        raise RuntimeError("einsum(): more operands were provided than specified in the equation")
    used = set(eq)
    fresh = [c for c in _LETTERS if c not in used]
    ranks = [len(shape) - (len(term) - 3) for term, shape in zip(terms, shapes) if "..." in term]
    ell = fresh[:max(ranks, default=0)]
    subs = []
    for i, (term, shape) in enumerate(zip(terms, shapes)):
        if "..." in term:
            k = len(shape) - (len(term) - 3)
            if k < 0:
                raise RuntimeError(f"einsum(): the number of subscripts in the equation ({len(term) - 3}) is more "
                                   f"than the number of dimensions ({len(shape)}) for operand {i}")
            term = term.replace("...", "".join(ell[len(ell) - k:]))
        elif len(term) != len(shape):
            raise RuntimeError(f"einsum(): the number of subscripts in the equation ({len(term)}) does not match the "
                               f"number of dimensions ({len(shape)}) for operand {i} and no ellipsis was given")
        subs.append(term)
    if arrow:
        out = rhs.replace("...", "".join(ell))
        seen = "".join(subs)
        for c in out:
            if c not in seen:
                raise RuntimeError(f"einsum(): output subscript {c} does not appear in the equation for any input "
                                   f"operand")
            if out.count(c) > 1:
                raise RuntimeError(f"einsum(): output subscript {c} appears more than once in the output")
    else:
        counts = "".join(t.replace("...", "") for t in terms)
        out = "".join(ell) + "".join(sorted(c for c in set(counts) if counts.count(c) == 1))
    return subs, out


def _letter_sizes(subs: list[str], shapes: list[tuple[int, ...]]) -> dict[str, int]:
    """Each letter's size: size-1 dims broadcast, as torch's einsum."""
    sizes: dict[str, int] = {}
    for i, (term, shape) in enumerate(zip(subs, shapes)):
        for c, n in zip(term, shape):
            seen = sizes.get(c)
            if seen is None or seen == 1:
                sizes[c] = n
            elif n != 1 and n != seen:
                raise RuntimeError(f"einsum(): subscript {c} has size {n} for operand {i} which does not broadcast "
                                   f"with previously seen size {seen}")
    return sizes


class EinsumBackward0(OpNode):
    """Note [einsum differentiates through einsum]."""

    __slots__ = ("subs", "out", "sizes", "shapes")
    work_per_element = 2

    def backward(self, F, g):
        operands = F.unpack(self)
        grads = []
        for i, term in enumerate(self.subs):
            if not self.needs(i):
                grads.append(None)
                continue
            grads.append(self._grad(F, g, operands, i, term))
        return tuple(grads)

    def _grad(self, F, g, operands, i, term):
        sizes = self.sizes
        others = [(s, op) for j, (s, op) in enumerate(zip(self.subs, operands)) if j != i]
        letters = "".join(dict.fromkeys(term))
        available = set(self.out).union(*(s for s, _ in others))
        kept = "".join(c for c in letters if c in available)
        grad = F.einsum(",".join([self.out] + [s for s, _ in others]) + "->" + kept, g, *(op for _, op in others))
        if kept != letters:  # letters only this operand has: constant along them
            grad = F.reshape(grad, tuple(sizes[c] if c in kept else 1 for c in letters))
            grad = F.expand(grad, tuple(sizes[c] for c in letters))
        if letters != term:  # a repeated letter: onto the diagonal, through identities
            renamed, eyes, free = [], [], [c for c in _LETTERS if c not in "".join(self.subs) + self.out]
            for c in term:
                if c in renamed:
                    other = free.pop()
                    eyes.append((c + other, _const(F, g, sizes[c], sizes[c], operator.eq)))
                    renamed.append(other)
                else:
                    renamed.append(c)
            grad = F.einsum(",".join([letters] + [s for s, _ in eyes]) + "->" + "".join(renamed), grad,
                            *(e for _, e in eyes))
        shape = self.shapes[i]
        full = tuple(sizes[c] for c in term)
        if full != shape:  # dims of size 1 that broadcast
            axes = tuple(k for k, (n, m) in enumerate(zip(shape, full)) if n != m)
            grad = F.sum(grad, axes, True)
        return grad


def einsum(equation: str, *operands: Any) -> Tensor:
    """torch's ``einsum``: operands as arguments or one list; ``...`` broadcasts; size-1 dims
    broadcast (Note [einsum differentiates through einsum])."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    for i, op in enumerate(operands):
        tensor_arg(op, "einsum", "tensors", i + 2)
    if not operands:
        raise RuntimeError("einsum(): must provide at least one operand")
    dtype = operands[0].dtype
    for op in operands[1:]:
        same_device(operands[0], op)
        if op.dtype != dtype:
            raise RuntimeError(f"expected scalar type {scalar_type_name(dtype)} but found {scalar_type_name(op.dtype)}")
    subs, out = _parse_einsum(equation, [op.shape for op in operands])
    return einsum_explicit(",".join(subs) + "->" + out, *operands)


def einsum_explicit(equation: str, *operands: Tensor) -> Tensor:
    """einsum of an explicit equation (no ellipsis, an output): the recorded op behind ``einsum``
    and its backward (TensorMath's ``einsum``)."""
    lhs, out = equation.split("->")
    subs = lhs.split(",")
    shapes = [op.shape for op in operands]
    sizes = _letter_sizes(subs, shapes)
    dev = operands[0].device
    backend = dev.backend
    arrays = []
    for term, op in zip(subs, operands):
        full = tuple(sizes[c] for c in term)
        arrays.append(op.data if full == op.shape else backend.broadcast_view(op.data, full))
    result = backend.einsum(equation, *arrays)
    work = math.prod(sizes.values()) * len(operands)
    return record(EinsumBackward0, tuple(operands), result, dev, tuple(subs), out, sizes, tuple(shapes),
                  saved=tuple(operands), work=int(work * MATMUL_WORK_PER_MAC) + 1)


# --------------------------------------------------------------------------- cdist
class CdistBackward0(OpNode):
    """torch's _cdist_backward, per p: 0 for p = 0; ``sign(diff)`` for 1; ``diff / dist`` for 2;
    ``sign(diff) |diff|^(p-1) / dist^(p-1)`` otherwise; for inf, ``sign(diff)`` where
    ``|diff|`` is the distance. Zero where the distance is zero (and where ``diff`` is, for p < 1).
    Unlike torch (whose _cdist_backward has no derivative), written against ``F``: second order works."""

    __slots__ = ("p", "x1_shape", "x2_shape")
    saves_result = True

    def backward(self, F, g):
        x1, x2, dist = F.unpack(self)
        p = self.p
        m = self.x1_shape[-1]
        a = F.reshape(x1, self.x1_shape[:-1] + (1, m))
        b = F.reshape(x2, self.x2_shape[:-2] + (1,) + self.x2_shape[-2:])
        diff = a - b
        gd = F.reshape(g, g.shape + (1,))
        d = F.reshape(dist, dist.shape + (1,))
        zero = d == 0
        if p == 0:
            term = F.zeros_like(diff)  # Note [Zero derivatives are constants] in elementwise.py
        elif p == 1:
            term = gd * F.sign(diff)
        elif p == 2:
            term = F.where(zero, 0.0, gd / F.where(zero, 1.0, d)) * diff
        elif p == math.inf:
            term = F.where(diff * F.sign(diff) == d, gd * F.sign(diff), 0.0)
        else:
            magnitude = diff * F.sign(diff)
            tiny = zero if p >= 1 else (magnitude == 0)
            safe = F.where(tiny, 1.0, magnitude)
            scale = F.where(zero, 0.0, gd / F.where(zero, 1.0, d) ** (p - 1))
            term = F.where(tiny, 0.0, F.sign(diff) * safe ** (p - 1) * scale)
        return (
            F.sum_to(F.sum(term, -2), self.x1_shape) if self.needs(0) else None,
            F.sum_to(-F.sum(term, -3), self.x2_shape) if self.needs(1) else None,
        )


_CDIST_MODES = (None, "use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist")


def cdist(x1: Tensor, x2: Tensor, p: float = 2.0, compute_mode: str | None = None) -> Tensor:
    """torch's ``cdist``: the p-norm distance between each row of ``x1`` and each row of ``x2``,
    batch dims broadcast. Computed from the differences for every p (torch's matrix-product path
    for large p = 2 inputs trades accuracy for speed; ``compute_mode`` is checked, then not needed)."""
    if compute_mode not in _CDIST_MODES:
        raise ValueError(f"{compute_mode} is not a valid value for compute_mode")
    tensor_arg(x1, "cdist", "x1", 1)
    tensor_arg(x2, "cdist", "x2", 2)
    for t, name in ((x1, "X1"), (x2, "X2")):
        if t.ndim < 2:
            raise RuntimeError(f"cdist only supports at least 2D tensors, {name} got: {t.ndim}D")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} X2: {x2.shape[-1]}")
    for t, name in ((x1, "X1"), (x2, "X2")):
        if t.dtype.kind != "f":
            raise RuntimeError(f"cdist only supports floating-point dtypes, {name} got: {scalar_type_name(t.dtype)}")
    p = float(number_arg(p, "cdist", "p", 3))
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    if x1.dtype != x2.dtype:
        raise RuntimeError(f"expected scalar type {scalar_type_name(x1.dtype)} but found "
                           f"{scalar_type_name(x2.dtype)}")
    dev = same_device(x1, x2)
    xp = dev.xp
    m = x1.shape[-1]
    try:
        batch = tuple(np.broadcast_shapes(x1.shape[:-2], x2.shape[:-2]))
    except ValueError:
        raise broadcast_error(x1.shape[:-2], x2.shape[:-2]) from None
    diff = xp.reshape(x1.data, x1.shape[:-1] + (1, m)) - xp.reshape(x2.data, x2.shape[:-2] + (1,) + x2.shape[-2:])
    if m == 0:
        out = dev.backend.zeros(batch + (x1.shape[-2], x2.shape[-2]), x1.dtype)
    elif p == 0:
        out = xp.sum(dev.backend.astype(diff != 0, x1.dtype), axis=-1)
    elif p == 1:
        out = xp.sum(xp.abs(diff), axis=-1)
    elif p == 2:
        out = xp.sqrt(xp.sum(diff * diff, axis=-1))
    elif p == math.inf:
        out = xp.max(xp.abs(diff), axis=-1)
    else:
        out = xp.sum(xp.abs(diff) ** p, axis=-1) ** (1 / p)
    out = dev.backend.array(out)
    return record(CdistBackward0, (x1, x2), out, dev, p, x1.shape, x2.shape, saved=(x1, x2),
                  work=math.prod(diff.shape) * 4)


# --------------------------------------------------------------------------- norms
def _float_input(x: Tensor, fn: str) -> None:
    if x.dtype.kind != "f":
        raise RuntimeError(f"{fn}: Expected a floating point or complex tensor as input. Got "
                           f"{scalar_type_name(x.dtype)}")


class LinalgVectorNormBackward0(OpNode):
    """torch's norm_backward, per ord (Note [Norm gradients at zero])."""

    __slots__ = ("ord", "axes", "keepdim", "in_shape")
    saves_result = True
    work_per_element = 4

    def backward(self, F, g):
        x, norm = F.unpack(self)
        kept = _kept_shape(self.in_shape, self.axes)
        if not self.keepdim:
            g, norm = F.reshape(g, kept), F.reshape(norm, kept)
        return (norm_backward(F, g, x, norm, self.ord, self.axes),)


def norm_backward(F: Any, g: Any, x: Any, norm: Any, p: float, axes: Any) -> Any:
    """torch's ``norm_backward``: the gradient of ``‖x‖_p`` over ``axes`` (``g`` and ``norm`` with
    those dims kept), or None for the 0-norm, which torch leaves undefined (Note [Norm gradients at zero])."""
    if p == 0:
        return None
    sign = F.sign(x)
    if p == 1:
        return g * sign
    zero = norm == 0
    if p == 2:
        return x * F.where(zero, 0.0, g / F.where(zero, 1.0, norm))
    if p == math.inf or p == -math.inf:
        hit = x * sign == norm
        count = F.sum(F.cast(hit, x.dtype), axes, True)
        return sign * F.where(hit, g / count, 0.0)
    magnitude = x * sign
    if p < 1:  # sgn(x) |x|^(p-1) (0 at x == 0) * g * norm^(1-p)
        tiny = magnitude == 0
        scaled = F.where(tiny, 0.0, sign * F.where(tiny, 1.0, magnitude) ** (p - 1))
        return scaled * (g * norm ** (1 - p))
    scale = F.where(zero, 0.0, g / F.where(zero, 1.0, norm) ** (p - 1))
    if p < 2:
        return sign * F.where(magnitude == 0, 0.0, F.where(magnitude == 0, 1.0, magnitude) ** (p - 1)) * scale
    return x * magnitude ** (p - 2) * scale


# Note [Norm gradients at zero]: as torch, the 2-norm and p-norms give 0 where the norm is 0 (not
# NaN), p < 1 gives 0 where an element is 0, and the inf-norms share the gradient evenly among
# the elements that reach the maximum (or minimum).
def vector_norm(x: Tensor, ord: Any = 2, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    """torch's ``linalg.vector_norm``: ord a number (inf, -inf and 0 included), over ``dim`` (all by default)."""
    tensor_arg(x, "linalg_vector_norm", "input", 1)
    if isinstance(ord, str) or not isinstance(ord, (int, float, np.number)):
        raise TypeError(f"linalg_vector_norm(): argument 'ord' (position 2) must be Number, not {type_label(ord)}")
    _float_input(x, "linalg.vector_norm")
    if dtype is not None:
        x = shape_ops.to_dtype(x, np.dtype(dtype))
    ord = float(ord)
    axes = normalize_dims(dim, x.ndim, "linalg.vector_norm")
    if x.ndim == 0:
        axes = None
    dev = x.device
    xp = dev.xp
    data = x.data
    if ord in (math.inf, -math.inf) and data.size == 0:
        sizes = [x.shape[a] for a in (axes if axes is not None else range(x.ndim))]
        if 0 in sizes or not sizes:
            raise RuntimeError("linalg.vector_norm cannot compute the inf norm on an empty tensor because the "
                               "operation does not have an identity")
    magnitude = xp.abs(data)
    if ord == math.inf:
        out = xp.max(magnitude, axis=axes, keepdims=keepdim)
    elif ord == -math.inf:
        out = xp.min(magnitude, axis=axes, keepdims=keepdim)
    elif ord == 0:
        out = xp.sum(dev.backend.astype(data != 0, x.dtype), axis=axes, keepdims=keepdim)
    elif ord == 1:
        out = xp.sum(magnitude, axis=axes, keepdims=keepdim)
    elif ord == 2:
        out = xp.sqrt(xp.sum(data * data, axis=axes, keepdims=keepdim))
    else:
        out = xp.sum(magnitude ** ord, axis=axes, keepdims=keepdim) ** (1 / ord)
    out = dev.backend.array(out)
    return record(LinalgVectorNormBackward0, (x,), out, dev, ord, axes, keepdim, x.shape, saved=(x,),
                  work=data.size * 4)


def _matrix_dims(dim: Any, ndim: int, fn: str) -> tuple[int, int]:
    if not isinstance(dim, (tuple, list)) or len(dim) != 2:
        shown = " ".join(str(d) for d in dim) if isinstance(dim, (tuple, list)) else str(dim)
        raise RuntimeError(f"{fn}: dim must be a 2-tuple. Got {shown}")
    d0, d1 = (normalize_dims(d, ndim, fn)[0] for d in dim)
    if d0 == d1:
        raise RuntimeError(f"{fn}: dims must be different. Got ({dim[0]}, {dim[1]})")
    return d0, d1


def matrix_norm(A: Tensor, ord: Any = "fro", dim: Any = (-2, -1), keepdim: bool = False, *,
                dtype: Any = None) -> Tensor:
    """torch's ``linalg.matrix_norm``: 'fro', 'nuc', 1, -1, 2, -2, inf, -inf ('nuc', 2 and -2 through
    ``svdvals``, every order)."""
    tensor_arg(A, "linalg_matrix_norm", "input", 1)
    if A.ndim < 2:
        raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 dimensions.")
    _float_input(A, "linalg.matrix_norm")
    d0, d1 = _matrix_dims(dim, A.ndim, "linalg.matrix_norm")
    if dtype is not None:
        A = shape_ops.to_dtype(A, np.dtype(dtype))
    if isinstance(ord, str):
        if ord == "fro":
            return vector_norm(A, 2, (d0, d1), keepdim)
        if ord == "nuc":
            return _singular_value_norm(A, ord, d0, d1, keepdim)
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    if ord in (2, -2):
        return _singular_value_norm(A, ord, d0, d1, keepdim)
    if ord not in (1, -1, math.inf, -math.inf):
        raise RuntimeError(f"linalg.matrix_norm: Order {_order_text(ord)} not supported.")
    if abs(ord) == math.inf:
        d0, d1 = d1, d0
    if not keepdim and d0 < d1:
        d1 -= 1
    reduced = vector_norm(A, 1, d0, keepdim)
    return reduction.amax(reduced, d1, keepdim) if ord > 0 else reduction.amin(reduced, d1, keepdim)


def _singular_value_norm(A: Tensor, ord: Any, d0: int, d1: int, keepdim: bool) -> Tensor:
    """'nuc', 2 and -2, as torch composes them: the matrix dims moved last, the singular values
    summed (or their max, min), the dims put back with keepdim."""
    rest = [i for i in range(A.ndim) if i not in (d0, d1)]
    order = rest + [d0, d1]
    values = svdvals(A if order == list(range(A.ndim)) else shape_ops.permute(A, order))
    last = values.ndim - 1
    out = reduction.sum(values, last) if ord == "nuc" else (reduction.amax if ord > 0 else reduction.amin)(values, last)
    if not keepdim:
        return out
    out = shape_ops.unsqueeze(shape_ops.unsqueeze(out, -1), -1)
    return shape_ops.permute(out, [order.index(i) for i in range(A.ndim)])


def _order_text(ord: Any) -> str:
    return str(int(ord)) if float(ord).is_integer() else str(ord)


def linalg_norm(A: Tensor, ord: Any = None, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    """torch's ``linalg.norm``: a vector norm over one dim (or the whole flattened tensor), a matrix
    norm over two; with ``ord`` and no ``dim``, the input must be 1-D or 2-D."""
    tensor_arg(A, "linalg_norm", "input", 1)
    if dim is not None:
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        if len(dims) == 1:
            if isinstance(ord, str):
                raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {dims[0]}")
            return vector_norm(A, 2 if ord is None else ord, dims, keepdim, dtype=dtype)
        return matrix_norm(A, "fro" if ord is None else ord, dims, keepdim, dtype=dtype)
    if ord is None:
        return vector_norm(A, 2, None, keepdim, dtype=dtype)
    if A.ndim not in (1, 2):
        raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got "
                           f"{A.ndim}D.")
    if A.ndim == 1:
        if isinstance(ord, str):
            raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 dimensions.")
        return vector_norm(A, ord, None, keepdim, dtype=dtype)
    return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype)


def norm(x: Tensor, p: Any = "fro", dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Tensor:
    """torch's ``Tensor.norm`` / ``torch.norm``: ``p`` a number (a vector norm over ``dim``, every
    element by default), 'fro' (the 2-norm over ``dim``), or 'nuc'."""
    tensor_arg(x, "norm", "input", 1)
    if p is None:
        p = 2
    if isinstance(p, str):
        if p == "fro":
            return vector_norm(x, 2, dim, keepdim, dtype=dtype)
        if p == "nuc":
            return matrix_norm(x, "nuc", (-2, -1) if dim is None else dim, keepdim, dtype=dtype)
        raise RuntimeError(f"norm(): unknown norm type {p!r}")
    return vector_norm(x, p, dim, keepdim, dtype=dtype)


# --------------------------------------------------------------------------- inverse, det, solve
class LinAlgError(RuntimeError):
    """torch's ``torch.linalg.LinAlgError``: a matrix the factorisation finds singular."""


def _square(A: Tensor, fn: str) -> None:
    if A.ndim < 2:
        raise RuntimeError(f"{fn}: The input tensor A must have at least 2 dimensions.")
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"{fn}: A must be batches of square matrices, but they are {A.shape[-2]} by "
                           f"{A.shape[-1]} matrices")
    _float_input(A, fn)


def _singular(A: Any, backend: Any, fn: str) -> LinAlgError:
    """torch's words for a matrix LU finds singular: which batch element, which pivot."""
    found = backend.singular_pivot(A)
    element, pivot = found if found is not None else (0, A.shape[-1])
    batch = f"(Batch element {element}): " if A.ndim > 2 else ""
    return LinAlgError(f"{fn}: {batch}The diagonal element {pivot} is zero, the inversion could not be completed "
                       f"because the input matrix is singular.")


class LinalgInvExBackward0(OpNode):
    """d(A⁻¹) = -A⁻¹ dA A⁻¹: the gradient is ``-A⁻ᵀ g A⁻ᵀ`` (from the saved inverse)."""

    __slots__ = ()
    saves_result = True
    work_per_element = 2

    def backward(self, F, g):
        (inverse,) = F.unpack(self)
        inverse_t = F.mT(inverse)
        return (-(inverse_t @ g @ inverse_t),)


def inv(A: Tensor) -> Tensor:
    """torch's ``linalg.inv``: a singular matrix raises torch's LinAlgError, naming its zero pivot."""
    tensor_arg(A, "linalg_inv", "A", 1)
    _square(A, "linalg.inv")
    dev = A.device
    try:
        out = dev.xp.linalg.inv(A.data)
    except Exception as exc:
        if "singular" not in str(exc).lower():
            raise
        raise _singular(A.data, dev.backend, "linalg.inv") from None
    return record(LinalgInvExBackward0, (A,), out, dev, work=A.data.size * A.shape[-1])


class LinalgDetBackward0(OpNode):
    """The gradient of det is the cofactor matrix: ``g det A⁻ᵀ`` where A is invertible; where it is
    singular, torch's SVD form ``U diag(Π_{j≠i} s_j) Vᴴ det(U) det(Vᴴ)``, which is the same matrix
    and stays right at rank n - 1 (and gives 0 below it)."""

    __slots__ = ()
    saves_result = True
    work_per_element = 2

    def backward(self, F, g):
        A, det = F.unpack(self)
        scale = F.reshape(g * det, g.shape + (1, 1))
        if isinstance(A, Tensor):
            if bool(A.device.xp.any(det.data == 0)):
                raise NotImplementedError("the second derivative of det at a singular matrix is not implemented in "
                                          "asyncgrad")
            return (scale * F.mT(F.inv(A)),)
        backend = backend_of(A)
        xp = backend.xp
        singular = det == 0
        if not bool(xp.any(singular)):
            return (scale * F.mT(F.inv(A)),)
        u, s, vh = xp.linalg.svd(A, full_matrices=False)
        n = s.shape[-1]
        positions = backend.arange(n, np.dtype(np.int64))
        others = xp.where(xp.reshape(positions, (n, 1)) == xp.reshape(positions, (1, n)), 1.0,
                          xp.reshape(s, s.shape[:-1] + (1, n)))
        products = xp.prod(others, axis=-1)  # Π_{j≠i} s_j
        alpha = xp.linalg.det(u) * xp.linalg.det(vh) * g
        cofactor = (u * xp.reshape(products * xp.reshape(alpha, alpha.shape + (1,)), s.shape[:-1] + (1, n))) @ vh
        safe = xp.where(xp.reshape(singular, singular.shape + (1, 1)), xp.eye(n, dtype=A.dtype, device=A.device), A)
        regular = scale * xp.matrix_transpose(xp.linalg.inv(safe))
        return (xp.where(xp.reshape(singular, singular.shape + (1, 1)), cofactor, regular),)


def det(A: Tensor) -> Tensor:
    """torch's ``linalg.det``; its gradient is right at singular matrices too (LinalgDetBackward0)."""
    tensor_arg(A, "linalg_det", "A", 1)
    _square(A, "linalg.det")
    dev = A.device
    out = dev.backend.array(dev.xp.linalg.det(A.data))
    return record(LinalgDetBackward0, (A,), out, dev, saved=(A,), work=A.data.size * A.shape[-1])


class LinalgSolveExBackward0(OpNode):
    """X = A⁻¹ B: ``gB = A⁻ᵀ g`` and ``gA = -gB Xᵀ``, summed back over broadcast batch dims."""

    __slots__ = ("a_shape", "b_shape", "vector")
    saves_result = True

    def backward(self, F, g):
        A, X = F.unpack(self)
        if self.vector:
            g = F.reshape(g, g.shape + (1,))
            X = F.reshape(X, X.shape + (1,))
        gb = F.solve(F.mT(A), g)
        ga = F.sum_to(-(gb @ F.mT(X)), self.a_shape) if self.needs(0) else None
        if not self.needs(1):
            return ga, None
        if self.vector:
            gb = F.reshape(gb, gb.shape[:-1])
        return ga, F.sum_to(gb, self.b_shape)


def solve(A: Tensor, B: Tensor, *, left: bool = True) -> Tensor:
    """torch's ``linalg.solve``: ``B`` is a vector (or a batch of them) when it is 1-D or when its
    shape is A's without the last dim; batch dims broadcast."""
    tensor_arg(A, "linalg_solve", "A", 1)
    tensor_arg(B, "linalg_solve", "B", 2)
    if not left:  # X A = B is Aᵀ Xᵀ = Bᵀ (B a matrix here, as torch requires)
        flipped = _solve(shape_ops.transpose(A, -2, -1), shape_ops.transpose(B, -2, -1), False)
        return shape_ops.transpose(flipped, -2, -1)
    return _solve(A, B, B.ndim == 1 or (B.ndim == A.ndim - 1 and B.shape == A.shape[:-1]))


def solve_matrix(A: Tensor, B: Tensor) -> Tensor:
    """``linalg.solve`` with ``B`` a (batch of) matrices, never read as vectors: TensorMath's ``solve``."""
    return _solve(A, B, False)


def _solve(A: Tensor, B: Tensor, vector: bool) -> Tensor:
    _square(A, "linalg.solve")
    if A.dtype != B.dtype:
        raise RuntimeError(f"linalg.solve: Expected A and B to have the same dtype, but found A of type "
                           f"{scalar_type_name(A.dtype)} and B of type {scalar_type_name(B.dtype)} instead")
    dev = same_device(A, B)
    xp = dev.xp
    b = xp.reshape(B.data, B.shape + (1,)) if vector else B.data
    if b.ndim < 2 or b.shape[-2] != A.shape[-1]:
        rows = b.shape[-2] if b.ndim >= 2 else b.shape[0]
        cols = b.shape[-1] if b.ndim >= 2 else 1
        raise RuntimeError(f"linalg.solve: Incompatible shapes of A and B for the equation AX = B "
                           f"({A.shape[-2]}x{A.shape[-1]} and {rows}x{cols})")
    try:
        np.broadcast_shapes(A.shape[:-2], b.shape[:-2])
    except ValueError:
        raise broadcast_error(A.shape[:-2], b.shape[:-2]) from None
    try:
        out = dev.backend.solve(A.data, b)
    except Exception as exc:
        if "singular" not in str(exc).lower():
            raise
        raise LinAlgError("torch.linalg.solve: The solver failed because the input matrix is singular.") from None
    if vector:
        out = xp.reshape(out, out.shape[:-1])
    return record(LinalgSolveExBackward0, (A, B), out, dev, A.shape, B.shape, vector, saved=(A,),
                  work=A.data.size * A.shape[-1] + math.prod(out.shape) * A.shape[-1])


# --------------------------------------------------------------------------- decompositions
# Note [Decompositions are multi-output nodes]: eigh, eig and svd return several tensors from one
# node, as torch: ``_record_outputs`` records the first through ``record`` and hangs the others on
# the same node (output 1, 2, ...), and saves the outputs the formula needs as outputs, so a
# recorded (create_graph) backward unpacks them connected to this very node and their own
# dependence on the input is differentiated too: second order for free, as torch's gradgradcheck
# asks. The node's ``apply`` hands every output's gradient (None where none came) to
# ``backward(F, grads)``. A decomposition's formula is linear in those gradients.
class _MultiOutput(OpNode):
    """A node with several outputs (Note [Decompositions are multi-output nodes])."""

    __slots__ = ()

    def apply(self, grads: list, create_graph: bool) -> Any:
        return self.backward(self.graph_math if create_graph else ArrayMath, grads)


def _record_outputs(cls: type[OpNode], A: Tensor, outs: tuple[Any, ...], saved_outputs: tuple[int, ...],
                    *fields: Any, work: int, save_input: bool = False) -> tuple[Tensor, ...]:
    """``outs`` as outputs of one ``cls`` node on ``A``, the outputs ``saved_outputs`` saved (after
    ``A`` itself, with ``save_input``)."""
    dev = A.device
    first = record(cls, (A,), outs[0], dev, *fields, saved=(A,) if save_input else (), work=work)
    node = first.grad_fn
    if node is None:
        return (first,) + tuple(plain(o, dev) for o in outs[1:])
    results = [first]
    for i, o in enumerate(outs[1:], 1):
        node._input_meta = node._input_meta + input_meta(tuple(o.shape), dev.backend.dtype(o), dev)
        results.append(Tensor._make(o, dev, True, node, i, [0]))
    node.saved = node.saved + tuple(SavedTensor(results[i], True) for i in saved_outputs)
    return tuple(results)


def _decomposition_work(A: Tensor) -> int:
    """The cost class of an O(n³) factorisation (Note [Cost classes]): like a product of two
    matrices of A's size, several times over, so large ones go to the executor."""
    return int(A.data.size * min(A.shape[-2:]) * MATMUL_WORK_PER_MAC * 8) + A.data.size


class LinalgSlogdetBackward0(_MultiOutput):
    """d log|det A| = tr(A⁻¹ dA): A's gradient is ``g A⁻ᵀ`` from logabsdet's; the sign of a real
    matrix is piecewise constant, so its gradient adds nothing (torch's slogdet_backward)."""

    __slots__ = ()
    work_per_element = 2

    def backward(self, F, grads):
        g = grads[1] if len(grads) > 1 else None
        if g is None:
            return (None,)
        (A,) = F.unpack(self)
        return (F.reshape(g, tuple(g.shape) + (1, 1)) * F.mT(F.inv(A)),)


def slogdet(A: Tensor) -> SlogdetResult:
    """torch's ``linalg.slogdet``: (sign, log|det|), both outputs of one node as torch's (sign's
    gradient is zero); a 0x0 matrix has sign 1 and log|det| 0."""
    tensor_arg(A, "linalg_slogdet", "A", 1)
    _square(A, "linalg.slogdet")
    dev = A.device
    sign, logabs = dev.xp.linalg.slogdet(A.data)
    backend = dev.backend
    return SlogdetResult(*_record_outputs(LinalgSlogdetBackward0, A, (backend.array(sign), backend.array(logabs)), (),
                                          work=A.data.size * A.shape[-1], save_input=True))


def _mask(like: Any, rows: int, cols: int, fn: Any) -> Any:
    """A (rows, cols) 0/1 matrix of ``like``'s dtype, ``fn(i, j)`` true where it is 1 (a triangle,
    the diagonal), on ``like``'s device: a constant of the formula namespace."""
    if isinstance(like, Tensor):
        backend, dtype = like.device.backend, like.dtype
    else:
        backend = backend_of(like)
        dtype = backend.dtype(like)
    xp = backend.xp
    i = xp.reshape(backend.arange(rows, np.dtype(np.int64)), (rows, 1))
    j = xp.reshape(backend.arange(cols, np.dtype(np.int64)), (1, cols))
    return backend.astype(fn(i, j), dtype)


def _const(F: Any, like: Any, rows: int, cols: int, fn: Any) -> Any:
    return F.constant(_mask(like, rows, cols, fn), like)


def _diag_embed(F: Any, v: Any, eye: Any) -> Any:
    """A batch of diagonal matrices from a batch of vectors (``eye`` the identity of their size)."""
    shape = tuple(v.shape)
    return F.reshape(v, shape[:-1] + (1, shape[-1])) * eye


def _diagonal(F: Any, M: Any, eye: Any) -> Any:
    """The diagonals of a batch of square matrices."""
    return F.sum(M * eye, -1)


def _right_solve(F: Any, A: Any, B: Any) -> Any:
    """``B A⁻¹``."""
    return F.mT(F.solve(F.mT(A), F.mT(B)))



class LinalgEighBackward0(_MultiOutput):
    """A = V diag(L) Vᵀ (symmetric): ``gA = V (diag(gL) + F ∘ ½(VᵀgV - gVᵀV)) Vᵀ`` with
    F_ij = 1 / (L_j - L_i) off the diagonal (torch's linalg_eig_backward, hermitian case). The
    skew part keeps the gradient symmetric, as torch's."""

    __slots__ = ()

    def backward(self, F, grads):
        gL, gV = grads[0], grads[1] if len(grads) > 1 else None
        L, V = F.unpack(self)
        n = tuple(L.shape)[-1]
        eye = _const(F, L, n, n, lambda i, j: i == j)
        middle = None
        if gV is not None:
            shape = tuple(L.shape)
            diff = F.reshape(L, shape[:-1] + (1, n)) - F.reshape(L, shape + (1,))  # L_j - L_i
            inner = F.mT(V) @ gV
            middle = (inner - F.mT(inner)) * 0.5 / (diff + eye)
        if gL is not None:
            diagonal = _diag_embed(F, gL, eye)
            middle = diagonal if middle is None else middle + diagonal
        if middle is None:
            return (None,)
        return (V @ middle @ F.mT(V),)


class _EigenvectorsNotComputed(_MultiOutput):
    """A legacy eigendecomposition asked for no eigenvectors: torch computed none, so it refuses
    the backward (its words); ``message`` says which function."""

    __slots__ = ("message",)

    def backward(self, F, grads):
        raise RuntimeError(self.message)


class SymeigBackward0(_EigenvectorsNotComputed):
    __slots__ = ()


class EigBackward0(_EigenvectorsNotComputed):
    __slots__ = ()


def _symmetric_from(A: Any, backend: Any, upper: bool) -> Any:
    """The symmetric matrix that one triangle of ``A`` describes (LAPACK reads only that one)."""
    n = A.shape[-1]
    xp = backend.xp
    i = xp.reshape(backend.arange(n, np.dtype(np.int64)), (n, 1))
    j = xp.reshape(backend.arange(n, np.dtype(np.int64)), (1, n))
    keep = (i <= j) if upper else (i >= j)
    return xp.where(keep, A, xp.matrix_transpose(A))


def _eigh_arrays(A: Tensor, upper: bool) -> tuple[Any, Any]:
    xp = A.device.xp
    L, V = xp.linalg.eigh(_symmetric_from(A.data, A.device.backend, upper))
    return L, V


def _check_uplo(UPLO: Any) -> bool:
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    return UPLO == "U"


def eigh(A: Tensor, UPLO: str = "L") -> EighResult:
    """torch's ``linalg.eigh``: eigenvalues ascending, orthonormal eigenvectors, from the ``UPLO``
    triangle; its gradient is symmetric (LinalgEighBackward0)."""
    tensor_arg(A, "linalg_eigh", "A", 1)
    upper = _check_uplo(UPLO)
    _square(A, "linalg.eigh")
    L, V = _eigh_arrays(A, upper)
    values, vectors = _record_outputs(LinalgEighBackward0, A, (L, V), (0, 1), work=_decomposition_work(A))
    return EighResult(values, vectors)


def eigvalsh(A: Tensor, UPLO: str = "L") -> Tensor:
    """torch's ``linalg.eigvalsh``: eigh's eigenvalues; the node keeps the eigenvectors (its output
    1, never returned) so that every order of its gradient is right."""
    tensor_arg(A, "linalg_eigvalsh", "A", 1)
    upper = _check_uplo(UPLO)
    _square(A, "linalg.eigh")
    L, V = _eigh_arrays(A, upper)
    return _record_outputs(LinalgEighBackward0, A, (L, V), (0, 1), work=_decomposition_work(A))[0]


def symeig(A: Tensor, eigenvectors: bool = False, upper: bool = True) -> EighResult:
    """torch's legacy ``symeig`` (removed from torch 2): ``linalg.eigh`` of the ``upper`` triangle;
    without eigenvectors the second output is empty and the backward refuses, as torch refused."""
    tensor_arg(A, "symeig", "input", 1)
    _square(A, "symeig")
    L, V = _eigh_arrays(A, bool(upper))
    if eigenvectors:
        values, vectors = _record_outputs(LinalgEighBackward0, A, (L, V), (0, 1), work=_decomposition_work(A))
        return EighResult(values, vectors)
    empty = A.device.backend.zeros((0,), A.dtype)
    values, vectors = _record_outputs(
        SymeigBackward0, A, (L, empty), (), "symeig_backward: Setting eigenvectors to false in torch.symeig doesn't "
        "compute eigenvectors and hence we cannot compute backward. Please use torch.symeig(eigenvectors=True)",
        work=_decomposition_work(A))
    return EighResult(values, vectors)



class LegacyEigBackward0(_MultiOutput):
    """torch's 2020 ``eig_backward`` for real eigenvalues: with A = V Λ V⁻¹ (unit-norm columns),
    ``gA = V⁻ᵀ (diag(gλ) + F ∘ (VᵀgV - VᵀV diag(VᵀgV))) Vᵀ``, F_ij = 1 / (λ_j - λ_i) off the
    diagonal (the diagonal term keeps the columns' norms). Complex eigenvalues refuse, as torch's:
    their gradient would be complex, and asyncgrad has no complex dtype."""

    __slots__ = ()

    def backward(self, F, grads):
        ge, gv = grads[0], grads[1] if len(grads) > 1 else None
        e, v = F.unpack(self)
        imag = e.data[..., 1] if isinstance(e, Tensor) else F.index(e, (..., 1))
        if bool(backend_of(imag).xp.any(imag != 0)):
            raise RuntimeError("eig_backward: Backward calculation does not support complex eigenvalues at the "
                               "moment.")
        lam = F.index(e, (..., 0))
        n = tuple(lam.shape)[-1]
        eye = _const(F, lam, n, n, lambda i, j: i == j)
        vt = F.mT(v)
        middle = None
        if gv is not None:
            shape = tuple(lam.shape)
            diff = F.reshape(lam, shape[:-1] + (1, n)) - F.reshape(lam, shape + (1,))  # λ_j - λ_i
            inner = vt @ gv
            inner = inner - (vt @ v) * F.reshape(_diagonal(F, inner, eye), shape[:-1] + (1, n))
            middle = inner / (diff + eye) * (1.0 - eye)
        if ge is not None:
            diagonal = _diag_embed(F, F.index(ge, (..., 0)), eye)
            middle = diagonal if middle is None else middle + diagonal
        if middle is None:
            return (None,)
        return (F.solve(vt, middle @ vt),)


def eig(A: Tensor, eigenvectors: bool = False) -> EigResult:
    """torch's legacy ``eig`` (removed from torch 2): real tensors in LAPACK's packing, eigenvalues
    as (n, 2) rows of (real, imaginary) parts, a complex pair's eigenvectors as the (real,
    imaginary) columns; without eigenvectors the second output is empty and the backward refuses.
    ``linalg.eig``'s complex results are refused (Note [Complex numbers are refused])."""
    tensor_arg(A, "eig", "input", 1)
    if A.ndim != 2:
        raise RuntimeError("input should be 2 dimensional")
    _square(A, "eig")
    values, vectors = A.device.backend.eig(A.data)
    if eigenvectors:
        return EigResult(*_record_outputs(LegacyEigBackward0, A, (values, vectors), (0, 1),
                                          work=_decomposition_work(A)))
    empty = A.device.backend.zeros((0,), A.dtype)
    return EigResult(*_record_outputs(
        EigBackward0, A, (values, empty), (), "eig_backward: Setting eigenvectors to false in torch.eig doesn't "
        "compute eigenvectors and hence we cannot compute backward. Please use torch.eig(eigenvectors=True)",
        work=_decomposition_work(A)))


def linalg_eig(A: Tensor) -> Any:
    """torch's ``linalg.eig`` returns complex tensors, which asyncgrad has not (Note [Complex numbers
    are refused]): refused; ``ag.eig`` gives the same decomposition in real packing."""
    tensor_arg(A, "linalg_eig", "A", 1)
    raise NotImplementedError("linalg.eig returns complex tensors, and asyncgrad has no complex dtype: use "
                              "ag.eig(A, eigenvectors=True) (real packing) or, for symmetric A, ag.linalg.eigh")


def eigvals(A: Tensor) -> Any:
    """torch's ``linalg.eigvals``: complex, refused as ``linalg.eig``."""
    tensor_arg(A, "linalg_eigvals", "A", 1)
    raise NotImplementedError("linalg.eigvals returns complex tensors, and asyncgrad has no complex dtype: use "
                              "ag.eig(A)[0] (real packing) or, for symmetric A, ag.linalg.eigvalsh")


# --------------------------------------------------------------------------- cholesky and triangles
class LinalgCholeskyExBackward0(OpNode):
    """A = L Lᵀ: torch's cholesky_backward, ``gA = L⁻ᵀ Φ L⁻¹`` with Φ = ½(P + tril(P, -1)ᵀ),
    P = tril(Lᵀ gL): symmetric, as torch's. ``upper`` factors are transposed first."""

    __slots__ = ("upper",)
    saves_result = True

    def backward(self, F, g):
        (L,) = F.unpack(self)
        if self.upper:
            L, g = F.mT(L), F.mT(g)
        n = tuple(L.shape)[-1]
        lower = _const(F, L, n, n, lambda i, j: i >= j)
        strict = _const(F, L, n, n, lambda i, j: i > j)
        P = (F.mT(L) @ g) * lower
        phi = (P + F.mT(P * strict)) * 0.5
        return (_right_solve(F, L, F.solve(F.mT(L), phi)),)


def _cholesky(A: Tensor, upper: bool, fn: str) -> Tensor:
    _square(A, fn)
    dev = A.device
    xp = dev.xp
    try:
        L = xp.linalg.cholesky(_symmetric_from(A.data, dev.backend, False))
        # CuPy returns NaNs where LAPACK raises: the same refusal, never a NaN factor
        failed = dev.backend.any_nan(L) and not dev.backend.any_nan(A.data)
    except Exception as exc:
        if "definite" not in str(exc).lower():
            raise
        failed = True
    if failed:
        found = dev.backend.not_positive_definite(A.data)
        element, order = found if found is not None else (0, A.shape[-1])
        batch = f"(Batch element {element}): " if A.ndim > 2 else ""
        raise LinAlgError(f"{fn}: {batch}The factorization could not be completed because the input is not "
                          f"positive-definite (the leading minor of order {order} is not positive-definite).") from None
    if upper:
        L = xp.matrix_transpose(L)
    return record(LinalgCholeskyExBackward0, (A,), L, dev, bool(upper), work=_decomposition_work(A))


def cholesky(A: Tensor, *, upper: bool = False) -> Tensor:
    """torch's ``linalg.cholesky``: the lower factor of the lower triangle (``upper``: its transpose);
    a matrix that is not positive-definite raises torch's LinAlgError, naming the leading minor."""
    tensor_arg(A, "linalg_cholesky", "A", 1)
    return _cholesky(A, upper, "linalg.cholesky")


def cholesky_legacy(A: Tensor, upper: bool = False) -> Tensor:
    """torch's ``cholesky`` (and ``Tensor.cholesky``): ``upper`` positional."""
    tensor_arg(A, "cholesky", "input", 1)
    return _cholesky(A, bool(upper), "cholesky")


def _triangle(A: Tensor, upper: bool, unitriangular: bool) -> Tensor:
    """The triangular matrix a triangular solver reads from ``A`` (its diagonal ones if
    ``unitriangular``): composed of tril/triu, so the gradient lands on that triangle only."""
    if not unitriangular:
        return shape_ops.triu(A) if upper else shape_ops.tril(A)
    part = shape_ops.triu(A, 1) if upper else shape_ops.tril(A, -1)
    eye = Tensor._make(_mask(A, A.shape[-1], A.shape[-1], lambda i, j: i == j), A.device, False, None, 0, [0])
    return part + eye


def _solve_with(T: Tensor, B: Tensor, left: bool) -> Tensor:
    if left:
        return solve_matrix(T, B)
    return shape_ops.transpose(solve_matrix(shape_ops.transpose(T, -1, -2), shape_ops.transpose(B, -1, -2)), -1, -2)


def _triangular_checks(A: Tensor, B: Tensor, fn: str, left: bool = True) -> None:
    _square(A, fn)  # torch checks A (dimensions, square, dtype) before B
    if B.ndim < 2:
        raise RuntimeError(f"{fn}: The input tensor B must have at least 2 dimensions.")
    if A.dtype != B.dtype:
        raise RuntimeError(f"{fn}: Expected A and B to have the same dtype, but found A of type "
                           f"{scalar_type_name(A.dtype)} and B of type {scalar_type_name(B.dtype)} instead")
    k = B.shape[-2] if left else B.shape[-1]
    if k != A.shape[-1]:
        raise RuntimeError(f"{fn}: Incompatible shapes of A and B for the equation "
                           f"{'AX = B' if left else 'XA = B'} ({A.shape[-2]}x{A.shape[-1]} and "
                           f"{B.shape[-2]}x{B.shape[-1]})")
    same_device(A, B)


def solve_triangular(A: Tensor, B: Tensor, *, upper: bool, left: bool = True, unitriangular: bool = False) -> Tensor:
    """torch's ``linalg.solve_triangular``: AX = B (``left``) or XA = B with A's ``upper`` or lower
    triangle (ones on its diagonal if ``unitriangular``). Composed of the triangle and ``solve``:
    the gradient is torch's (``-A⁻ᵀ g Xᵀ`` on the triangle), every order."""
    tensor_arg(A, "linalg_solve_triangular", "A", 1)
    tensor_arg(B, "linalg_solve_triangular", "B", 2)
    _triangular_checks(A, B, "linalg.solve_triangular", left)
    return _solve_with(_triangle(A, bool(upper), bool(unitriangular)), B, left)



def triangular_solve(input: Tensor, A: Tensor, upper: bool = True, transpose: bool = False,
                     unitriangular: bool = False) -> TriangularSolveResult:
    """torch's legacy ``triangular_solve(b, A)``: (A's triangle, transposed if ``transpose``)⁻¹ b,
    and a copy of A (differentiable, as torch's)."""
    b = input
    tensor_arg(b, "triangular_solve", "input", 1)
    tensor_arg(A, "triangular_solve", "A", 2)
    _legacy_solve_checks(b, A, "triangular_solve",
                         "torch.triangular_solve: Expected b to have at least 2 dimensions, but it has {} dimensions "
                         "instead", "torch.triangular_solve: Expected A to have at least 2 dimensions, but it has {} "
                         "dimensions instead")
    T = _triangle(A, bool(upper), bool(unitriangular))
    if transpose:
        T = shape_ops.transpose(T, -1, -2)
    return TriangularSolveResult(solve_matrix(T, b), shape_ops.clone(A))


def _legacy_solve_checks(b: Tensor, A: Tensor, fn: str, b_rank: str, A_rank: str) -> None:
    """The checks of torch's legacy ``triangular_solve(b, A)`` and ``cholesky_solve(b, A)``, in
    torch's order and words (not linalg.solve_triangular's): b's and A's dimensions (``*_rank``
    formatted with the count), the same dtype, A square, the sizes, a floating dtype."""
    if b.ndim < 2:
        raise RuntimeError(b_rank.format(b.ndim))
    if A.ndim < 2:
        raise RuntimeError(A_rank.format(A.ndim))
    if A.dtype != b.dtype:
        raise RuntimeError(f"Expected b and A to have the same dtype, but found b of type {scalar_type_name(b.dtype)} "
                           f"and A of type {scalar_type_name(A.dtype)} instead.")
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"A must be batches of square matrices, but they are {A.shape[-2]} by {A.shape[-1]} "
                           "matrices")
    if b.shape[-2] != A.shape[-1]:
        raise RuntimeError(f"Incompatible matrix sizes for {fn}: each A matrix is {A.shape[-1]} by {A.shape[-1]} "
                           f"but each b matrix is {b.shape[-2]} by {b.shape[-1]}")
    if A.dtype.kind != "f":
        raise NotImplementedError(f'"{fn}_{A.device.type}" not implemented for \'{scalar_type_name(A.dtype)}\'')
    same_device(A, b)


class CholeskySolveBackward0(OpNode):
    """X = (L Lᵀ)⁻¹ B (Uᵀ U with ``upper``): torch's cholesky_solve_backward, ``gB =
    cholesky_solve(g, L)`` and ``gL = -C L`` (``-L C`` for ``upper``) with C = gB Xᵀ + X gBᵀ,
    summed back over broadcast batch dims. As torch's, gL is that of the whole ``input2`` taken as
    the factor: its entries off the triangle get a gradient too, though the value never reads them."""

    __slots__ = ("upper", "b_shape", "l_shape")
    saves_result = True

    def backward(self, F, g):
        L, X = F.unpack(self)
        gB = F.cholesky_solve(g, L, self.upper)
        gL = None
        if self.needs(1):
            C = gB @ F.mT(X)
            C = C + F.mT(C)
            gL = F.sum_to(-(L @ C) if self.upper else -(C @ L), self.l_shape)
        return (F.sum_to(gB, self.b_shape) if self.needs(0) else None, gL)


def cholesky_solve(input: Tensor, input2: Tensor, upper: bool = False) -> Tensor:
    """torch's ``cholesky_solve(B, L)``: (L Lᵀ)⁻¹ B from the factor's triangle (Uᵀ U with ``upper``),
    batch dims broadcast; its gradient is torch's (CholeskySolveBackward0)."""
    tensor_arg(input, "cholesky_solve", "input", 1)
    tensor_arg(input2, "cholesky_solve", "input2", 2)
    B, L = input, input2
    _legacy_solve_checks(B, L, "cholesky_solve", "b should have at least 2 dimensions, but has {} dimensions instead",
                         "u should have at least 2 dimensions, but has {} dimensions instead")
    try:
        batch = np.broadcast_shapes(B.shape[:-2], L.shape[:-2])
    except ValueError:
        raise broadcast_error(B.shape[:-2], L.shape[:-2]) from None
    dev = L.device
    out = ArrayMath.cholesky_solve(B.data, L.data, bool(upper))
    n = L.shape[-1]
    return record(CholeskySolveBackward0, (B, L), out, dev, bool(upper), B.shape, L.shape, saved=(L,),
                  work=(math.prod(batch) * n * n * (n + 2 * B.shape[-1])))


class CholeskyInverseBackward0(OpNode):
    """(L Lᵀ)⁻¹ (Uᵀ U with ``upper``): torch's cholesky_inverse_backward, ``gL = -C L`` (``-L C``
    for ``upper``) with C = X (g + gᵀ) X, X the result; as cholesky_solve's, on the whole input."""

    __slots__ = ("upper",)
    saves_result = True

    def backward(self, F, g):
        L, X = F.unpack(self)
        C = X @ ((g + F.mT(g)) @ X)
        return (-(L @ C) if self.upper else -(C @ L),)


def cholesky_inverse(L: Tensor, upper: bool = False) -> Tensor:
    """torch's ``cholesky_inverse(L)``: (L Lᵀ)⁻¹ from the factor's triangle (Uᵀ U with ``upper``);
    its gradient is torch's (CholeskyInverseBackward0)."""
    tensor_arg(L, "cholesky_inverse", "input", 1)
    _square(L, "cholesky_inverse")
    n = L.shape[-1]
    dev = L.device
    eye = dev.xp.broadcast_to(dev.backend.astype(_mask(L, n, n, lambda i, j: i == j), L.dtype), L.shape)
    out = ArrayMath.cholesky_solve(eye, L.data, bool(upper))
    return record(CholeskyInverseBackward0, (L,), out, dev, bool(upper), saved=(L,), work=3 * L.data.size * n)


# --------------------------------------------------------------------------- svd, pinv


class LinalgSvdBackward0(_MultiOutput):
    """A = U diag(S) Vᵀ (reduced, k = min(m, n)): torch's svd_backward, in Townsend's form,
    ``gA = U [skew(UᵀgU) S / E + S skew(VᵀgV) / E + diag(gS)] Vᵀ + (I - UUᵀ) gU S⁻¹ Vᵀ
    + U S⁻¹ gVᵀ (I - VVᵀ)`` with E_ij = s_j² - s_i² (1 on the diagonal, where skew is 0).
    With ``full_matrices`` the columns of U and rows of Vh past k are ignored, as torch ignores
    them. Repeated singular values make E zero: the gradient is then inf/NaN, as torch's."""

    __slots__ = ("k",)

    def backward(self, F, grads):
        gU, gS, gVh = (tuple(grads) + (None, None, None))[:3]
        U, S, Vh = F.unpack(self)
        k = self.k
        if tuple(U.shape)[-1] != k:  # full_matrices: only the first k singular vectors matter
            U = F.index(U, (..., slice(None), slice(0, k)))
            gU = None if gU is None else F.index(gU, (..., slice(None), slice(0, k)))
        if tuple(Vh.shape)[-2] != k:
            Vh = F.index(Vh, (..., slice(0, k), slice(None)))
            gVh = None if gVh is None else F.index(gVh, (..., slice(0, k), slice(None)))
        eye = _const(F, S, k, k, lambda i, j: i == j)
        shape = tuple(S.shape)
        row = F.reshape(S, shape[:-1] + (1, k))     # s_j along a row
        col = F.reshape(S, shape + (1,))            # s_i down a column
        V = F.mT(Vh)
        middle = None
        if gU is not None or gVh is not None:
            E = row * row - col * col + eye
            if gU is not None:
                UtgU = F.mT(U) @ gU
                middle = (UtgU - F.mT(UtgU)) * row / E
            if gVh is not None:
                VtgV = Vh @ F.mT(gVh)
                term = col * (VtgV - F.mT(VtgV)) / E
                middle = term if middle is None else middle + term
        if gS is not None:
            diagonal = _diag_embed(F, gS, eye)
            middle = diagonal if middle is None else middle + diagonal
        gA = None if middle is None else U @ middle @ Vh
        m, n = tuple(U.shape)[-2], tuple(Vh.shape)[-1]
        if gU is not None and m > k:
            gUSinv = gU / row
            term = (gUSinv - U @ (F.mT(U) @ gUSinv)) @ Vh
            gA = term if gA is None else gA + term
        if gVh is not None and n > k:
            gVSinv = F.mT(gVh) / row
            term = U @ F.mT(gVSinv - V @ (Vh @ gVSinv))
            gA = term if gA is None else gA + term
        return (gA,)


def _svd_arrays(A: Tensor, full_matrices: bool) -> tuple[Any, Any, Any]:
    if A.ndim < 2:
        raise RuntimeError("linalg.svd: The input tensor A must have at least 2 dimensions.")
    _float_input(A, "linalg.svd")
    return A.device.xp.linalg.svd(A.data, full_matrices=full_matrices)


def svd(A: Tensor, full_matrices: bool = True, *, driver: Any = None) -> SvdResult:
    """torch's ``linalg.svd``: (U, S, Vh), S descending; one LinalgSvdBackward0 node for the three."""
    tensor_arg(A, "linalg_svd", "A", 1)
    u, s, vh = _svd_arrays(A, bool(full_matrices))
    return SvdResult(*_record_outputs(LinalgSvdBackward0, A, (u, s, vh), (0, 1, 2), min(A.shape[-2:]),
                                      work=_decomposition_work(A)))


def svd_legacy(A: Tensor, some: bool = True, compute_uv: bool = True) -> LegacySvdResult:
    """torch's ``svd``: (U, S, V), reduced unless ``some=False``; without ``compute_uv``, U and V
    are zeros that need no gradient (torch 2's behaviour)."""
    tensor_arg(A, "svd", "input", 1)
    if not compute_uv:
        values = svdvals(A)
        m, n = A.shape[-2:]
        backend = A.device.backend
        batch = tuple(A.shape[:-2])
        return LegacySvdResult(plain(backend.zeros(batch + (m, m), A.dtype), A.device), values,
                               plain(backend.zeros(batch + (n, n), A.dtype), A.device))
    U, S, Vh = svd(A, full_matrices=not some)
    return LegacySvdResult(U, S, shape_ops.transpose(Vh, -1, -2))


def svdvals(A: Tensor) -> Tensor:
    """torch's ``linalg.svdvals``: the singular values, descending. Its node keeps U and Vh as
    outputs never returned (torch's LinalgSvdBackward0), so every order of its gradient is right."""
    tensor_arg(A, "linalg_svdvals", "A", 1)
    u, s, vh = _svd_arrays(A, False)
    return _record_outputs(LinalgSvdBackward0, A, (u, s, vh), (0, 1, 2), min(A.shape[-2:]),
                           work=_decomposition_work(A))[1]


class LinalgPinvBackward0(OpNode):
    """torch's pinv_backward: the derivative of the pseudo-inverse where the rank is constant,
    all products (of A and A⁺), so every order of it is recorded from matmuls."""

    __slots__ = ()
    saves_result = True
    work_per_element = 8

    def backward(self, F, g):
        A, P = F.unpack(self)
        m, n = tuple(A.shape)[-2:]
        Ph, gh = F.mT(P), F.mT(g)
        if m <= n:
            K = gh @ P
            KPh = K @ Ph
            return (-F.mT(P @ K) + KPh - (A @ P) @ KPh + (Ph @ P) @ (gh - K @ A),)
        K = P @ gh
        PhK = Ph @ K
        return (-F.mT(K @ P) + (gh - A @ K) @ P @ Ph + PhK - PhK @ P @ A,)


def pinv(A: Tensor, *, atol: Any = None, rtol: Any = None, hermitian: bool = False) -> Tensor:
    """torch's ``linalg.pinv``: singular values below max(atol, rtol·σ₁) dropped (rtol defaults to
    ε·max(m, n) when atol is not given, 0 when it is). ``hermitian``: from the eigendecomposition of
    A's lower triangle, as torch's (the gradient is still that of the whole A, torch's pinv_backward)."""
    tensor_arg(A, "linalg_pinv", "A", 1)
    if A.ndim < 2 or A.dtype.kind != "f":
        shape = ", ".join(str(n) for n in A.shape)
        raise RuntimeError(f"linalg.pinv({scalar_type_name(A.dtype)}{{[{shape}]}}): expected a tensor with 2 or more "
                           f"dimensions of float, double, cfloat or cdouble types")
    dev = A.device
    xp = dev.xp
    if hermitian:  # A = U diag(s) Uᵀ from its lower triangle: its singular values are |s|
        _square(A, "linalg.eigh")
        s, u = _eigh_arrays(A, False)
        magnitude = xp.abs(s)
    else:
        u, s, vh = xp.linalg.svd(A.data, full_matrices=False)
        magnitude = s
    eps = float(np.finfo(A.dtype).eps)
    if rtol is None:
        rtol = eps * max(A.shape[-2:]) if atol is None or atol <= 0 else 0.0
    top = xp.max(magnitude, axis=-1, keepdims=True) if s.shape[-1] else magnitude
    keep = (magnitude > top * float(rtol)) & (magnitude > float(atol or 0.0))
    inv_s = xp.where(keep, 1.0 / xp.where(keep, s, xp.ones_like(s)), xp.zeros_like(s))
    if hermitian:
        out = (u * xp.reshape(inv_s, inv_s.shape[:-1] + (1, inv_s.shape[-1]))) @ xp.matrix_transpose(u)
    else:
        out = xp.matrix_transpose(vh) @ (xp.reshape(inv_s, inv_s.shape + (1,)) * xp.matrix_transpose(u))
    return record(LinalgPinvBackward0, (A,), out, dev, saved=(A,), work=_decomposition_work(A))


def pinverse(A: Tensor, rcond: float = 1e-15) -> Tensor:
    """torch's ``pinverse``: ``linalg.pinv`` with relative cutoff ``rcond``."""
    tensor_arg(A, "pinverse", "input", 1)
    return pinv(A, rtol=rcond)


# --------------------------------------------------------------------------- composed of recorded ops
# These are torch's functions that torch itself composes (or whose gradients are those of such a
# composition): built of asyncgrad's recorded ops, their gradients of every order come from them.
def logdet(A: Tensor) -> Tensor:
    """torch's ``logdet``: log|det A| where det A > 0, NaN where it is negative, -inf where 0
    (torch's WhereBackward0 over slogdet)."""
    tensor_arg(A, "logdet", "input", 1)
    sign, logabs = slogdet(A)
    nan = plain(A.device.backend.full((), math.nan, A.dtype), A.device)
    return where(sign < 0, nan, logabs)


def _matrix_product(tensors: list[Tensor]) -> Tensor:
    out = tensors[0]
    for t in tensors[1:]:
        out = matmul(out, t)
    return out


def matrix_power(A: Tensor, n: int) -> Tensor:
    """torch's ``linalg.matrix_power``: products of A (of A⁻¹ for n < 0), by repeated squaring;
    n = 0 gives identities copied into a clone of A, as torch's (CopyBackwards: A's gradient is zero)."""
    tensor_arg(A, "linalg_matrix_power", "A", 1)
    n = int_arg(n, "linalg_matrix_power", "n", 2)
    if A.ndim < 2:
        raise RuntimeError("linalg.matrix_power: The input tensor A must have at least 2 dimensions.")
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"linalg.matrix_power: A must be batches of square matrices, but they are {A.shape[-2]} "
                           f"by {A.shape[-1]} matrices")
    n = int(n)
    if n == 0:
        eye = A.device.backend.astype(_mask(A, A.shape[-1], A.shape[-1], lambda i, j: i == j), A.dtype)
        return shape_ops.clone(A).copy_(plain(A.device.xp.broadcast_to(eye, A.shape), A.device))
    if n < 0:
        A, n = inv(A), -n
    out = None
    square = A
    while n:
        if n & 1:
            out = square if out is None else matmul(out, square)
        n >>= 1
        if n:
            square = matmul(square, square)
    assert out is not None
    return out


def multi_dot(tensors: Any) -> Tensor:
    """torch's ``linalg.multi_dot``: the product of two or more matrices, the first and last may be
    vectors (a row, a column), multiplied left to right."""
    tensors = list(tensors)
    if len(tensors) < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {len(tensors)}")
    for i, t in enumerate(tensors):
        tensor_arg(t, "multi_dot", "tensors", 1)
        first_or_last = i in (0, len(tensors) - 1)
        if t.ndim != 2 and not (first_or_last and t.ndim == 1):
            which = "first" if i == 0 else "last" if i == len(tensors) - 1 else None
            if which is not None:
                raise RuntimeError(f"multi_dot(): the {which} tensor must be 1D or 2D but got {t.ndim}D")
            raise RuntimeError(f"multi_dot(): tensor {i} must be 2D but got {t.ndim}D")
    return _matrix_product(tensors)


def chain_matmul(*matrices: Tensor) -> Tensor:
    """torch's deprecated ``chain_matmul``: the product of matrices (one matrix: a copy)."""
    if len(matrices) == 1 and isinstance(matrices[0], (list, tuple)):
        matrices = tuple(matrices[0])
    if not matrices:
        raise RuntimeError("chain_matmul(): Expected one or more matrices")
    for t in matrices:
        tensor_arg(t, "chain_matmul", "matrices", 1)
        if t.ndim != 2:
            raise RuntimeError(f"Tensor dimension is {t.ndim}, expected 2 instead.")
    if len(matrices) == 1:
        return shape_ops.clone(matrices[0])
    return _matrix_product(list(matrices))


def trapezoid(y: Tensor, x: Any = None, *, dx: Any = None, dim: int = -1) -> Tensor:
    """torch's ``trapezoid``/``trapz``: the trapezoidal rule along ``dim``, with sample points ``x``
    (1-D, one per sample, or broadcasting with ``y``) or a constant spacing ``dx`` (1)."""
    tensor_arg(y, "trapezoid", "y", 1)
    axis = normalize_dim(dim, y.ndim, "trapezoid")
    n = y.shape[axis]
    if x is not None and dx is not None:
        raise TypeError("trapezoid() received an invalid combination of arguments - got (Tensor, Tensor, dx=...)")
    if n == 0:
        return reduction.sum(y, axis) * 0.0
    if x is None:
        spacing = 1.0 if dx is None else float(dx)
        ends = narrow(y, axis, 0, 1) + narrow(y, axis, n - 1, 1)
        inner = reduction.sum(y, axis) - reduction.sum(ends, axis) * 0.5
        return inner * spacing
    tensor_arg(x, "trapezoid", "x", 2)
    if x.ndim == 1:
        if x.shape[0] != n:
            raise RuntimeError("trapezoid: There must be one `x` value for each sample point")
        x = shape_ops.reshape(x, (n,) + (1,) * (y.ndim - 1 - axis))
        x_axis = 0
    else:
        x_axis = axis - (y.ndim - x.ndim) if x.ndim <= y.ndim else axis + (x.ndim - y.ndim)
    m = x.shape[x_axis]
    steps = narrow(x, x_axis, 1, m - 1) - narrow(x, x_axis, 0, m - 1)
    pairs = narrow(y, axis, 1, n - 1) + narrow(y, axis, 0, n - 1)
    total = steps * pairs
    return reduction.sum(total, total.ndim - (y.ndim - axis)) * 0.5


def trapz(y: Tensor, x: Any = None, *, dx: Any = None, dim: int = -1) -> Tensor:
    """torch's ``trapz``: ``trapezoid``."""
    return trapezoid(y, x, dx=dx, dim=dim)


def block_diag(*tensors: Tensor) -> Tensor:
    """torch's ``block_diag``: the tensors (0-, 1- or 2-D, as 1x1, 1xn, mxn) on the diagonal of a
    zero matrix of their promoted dtype; composed of cat, so each block's gradient is its slice."""
    for i, t in enumerate(tensors):
        tensor_arg(t, "block_diag", "tensors", 1)
        if t.ndim > 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer dimensions. Input {i} has "
                               f"{t.ndim} dimensions")
    if not tensors:
        return plain(cpu.backend.zeros((1, 0), get_default_dtype()), cpu)
    dev = tensors[0].device
    for t in tensors[1:]:
        same_device(tensors[0], t)
    dtype = result_dtype(*(t.data for t in tensors))
    blocks = []
    for t in tensors:
        t = t if t.dtype == dtype else shape_ops.to_dtype(t, dtype)
        blocks.append(shape_ops.reshape(t, (1, 1) if t.ndim == 0 else (1, t.shape[0]) if t.ndim == 1 else t.shape))
    cols = sum(b.shape[1] for b in blocks)
    rows, left = [], 0
    for b in blocks:
        r, c = b.shape
        parts = []
        if left:
            parts.append(plain(dev.backend.zeros((r, left), dtype), dev))
        parts.append(b)
        if cols - left - c:
            parts.append(plain(dev.backend.zeros((r, cols - left - c), dtype), dev))
        rows.append(parts[0] if len(parts) == 1 else shape_ops.cat(parts, 1))
        left += c
    return rows[0] if len(rows) == 1 else shape_ops.cat(rows, 0)


def kron(input: Tensor, other: Tensor) -> Tensor:
    """torch's ``kron``: every product a[i] b[j] at index i * b.shape + j (the shorter shape padded
    with leading ones); a product of broadcast reshapes."""
    a, b = input, other
    tensor_arg(a, "kron", "input", 1)
    tensor_arg(b, "kron", "other", 2)
    nd = max(a.ndim, b.ndim)
    sa = (1,) * (nd - a.ndim) + tuple(a.shape)
    sb = (1,) * (nd - b.ndim) + tuple(b.shape)
    a2 = shape_ops.reshape(a, tuple(x for n in sa for x in (n, 1)))
    b2 = shape_ops.reshape(b, tuple(x for n in sb for x in (1, n)))
    return shape_ops.reshape(mul(a2, b2), tuple(p * q for p, q in zip(sa, sb)))


def linalg_cross(a: Tensor, b: Tensor, *, dim: int = -1) -> Tensor:
    """torch's ``linalg.cross``: the cross product of 3-vectors along ``dim`` (broadcast), as
    ``a[i+1] b[i+2] - a[i+2] b[i+1]`` from rolls of the two."""
    tensor_arg(a, "linalg_cross", "input", 1)
    tensor_arg(b, "linalg_cross", "other", 2)
    if a.ndim != b.ndim:
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    axis = normalize_dim(dim, a.ndim, "linalg.cross")
    if a.shape[axis] != 3 or b.shape[axis] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got {a.shape[axis]} and "
                           f"{b.shape[axis]}")
    a1, a2 = shape_ops.roll(a, -1, axis), shape_ops.roll(a, -2, axis)
    b1, b2 = shape_ops.roll(b, -1, axis), shape_ops.roll(b, -2, axis)
    return mul(a1, b2) - mul(a2, b1)


def cross(input: Tensor, other: Tensor, dim: Any = None) -> Tensor:
    """torch's ``cross``: ``linalg.cross`` along ``dim``, by default the first dim of size 3 (torch's
    deprecated default, with its warning)."""
    a, b = input, other
    tensor_arg(a, "cross", "input", 1)
    tensor_arg(b, "cross", "other", 2)
    if dim is None:
        warnings.warn("Using torch.cross without specifying the dim arg is deprecated.\nPlease either pass the dim "
                      "explicitly or simply use torch.linalg.cross.\nThe default value of dim will change to agree "
                      "with that of linalg.cross in a future release.", UserWarning, stacklevel=2)
        sizes = [i for i, n in enumerate(np.broadcast_shapes(a.shape, b.shape)) if n == 3]
        if not sizes:
            raise RuntimeError("no dimension of size 3 in input")
        dim = sizes[0]
    return linalg_cross(a, b, dim=dim)


# --------------------------------------------------------------------------- qr

class LinalgQrBackward0(_MultiOutput):
    """A = QR (torch's linalg_qr_backward). m ≥ n (reduced, or square): ``gA = (gQ + Q copyltu(M)) R⁻ᵀ``
    with M = R gRᵀ - gQᵀ Q, copyltu(M) the symmetric matrix of M's lower triangle. m < n: with
    A = [X | Y] and R = [U | V] (X = QU square, Y = QV), ``gY = Q gV`` and ``gX`` is the square
    formula of (gQ + Y gVᵀ, gU) with U for R."""

    __slots__ = ("mode",)

    def backward(self, F, grads):
        gQ, gR = (tuple(grads) + (None, None))[:2]
        Q, R = F.unpack(self)
        if self.mode == "r":
            raise RuntimeError("The derivative of linalg.qr depends on Q, which is not computed when mode='r'. "
                               "Please use linalg.qr(A, mode='reduced') if you are going to differentiate through "
                               "linalg.qr.")
        m, n = tuple(Q.shape)[-2], tuple(R.shape)[-1]
        if m >= n:
            if self.mode == "complete" and m > n:
                raise RuntimeError("The QR decomposition is not differentiable when mode='complete' and nrows > "
                                   "ncols.")
            return (_qr_backward_tall(F, gQ, gR, Q, R),)
        U = F.index(R, (Ellipsis, slice(None), slice(0, m)))
        V = F.index(R, (Ellipsis, slice(None), slice(m, n)))
        gU = gV = None
        if gR is not None:
            gU = F.index(gR, (Ellipsis, slice(None), slice(0, m)))
            gV = F.index(gR, (Ellipsis, slice(None), slice(m, n)))
        if gV is not None:
            extra = (Q @ V) @ F.mT(gV)
            gQ = extra if gQ is None else gQ + extra
        gX = _qr_backward_tall(F, gQ, gU, Q, U)
        gY = None if gV is None else Q @ gV
        if gX is None and gY is None:
            return (None,)
        if gX is None:
            gX = F.zeros_like(U)
        if gY is None:
            gY = F.zeros_like(V)
        return (F.cat([gX, gY], -1),)


def _qr_backward_tall(F: Any, gQ: Any, gR: Any, Q: Any, R: Any) -> Any:
    """linalg_qr_backward for m ≥ n: ``(gQ + Q copyltu(R gRᵀ - gQᵀ Q)) R⁻ᵀ`` (None without gradients)."""
    k = tuple(R.shape)[-2]
    lower = _const(F, R, k, k, lambda i, j: i >= j)
    strict = _const(F, R, k, k, lambda i, j: i > j)
    M = None
    if gR is not None:
        M = R @ F.mT(gR)
    if gQ is not None:
        term = F.mT(gQ) @ Q
        M = -term if M is None else M - term
    if M is None:
        return None
    copy = M * lower + F.mT(M * strict)
    left = Q @ copy if gQ is None else gQ + Q @ copy
    return F.mT(F.solve(R, F.mT(left)))


def qr(A: Tensor, mode: str = "reduced") -> QrResult:
    """torch's ``linalg.qr``: 'reduced', 'complete' or 'r' (Q empty)."""
    tensor_arg(A, "linalg_qr", "A", 1)
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), "
                           f"'r', or 'complete'")
    if A.ndim < 2:
        raise RuntimeError("linalg.qr: The input tensor A must have at least 2 dimensions.")
    _float_input(A, "linalg.qr")
    xp = A.device.xp
    q, r = xp.linalg.qr(A.data, mode="complete" if mode == "complete" else "reduced")
    if mode == "r":
        q = A.device.backend.zeros((0,), A.dtype)
    return QrResult(*_record_outputs(LinalgQrBackward0, A, (q, r), (0, 1), mode, work=_decomposition_work(A)))


# --------------------------------------------------------------------------- matrix_exp
def _expm(A: Any, backend: Any) -> Any:
    """exp(A) of a batch of square matrices by scaling and squaring: A / 2ˢ with 1-norm ≤ ½, a
    Taylor series to degree 18 (remainder below 1e-22 of the result), then s squarings. Uses the
    Array API only, so it runs on every backend."""
    xp = backend.xp
    n = A.shape[-1]
    if A.size == 0:
        return xp.asarray(A, copy=True)
    norm = float(xp.max(xp.sum(xp.abs(A), axis=-2)))
    s = max(0, math.ceil(math.log2(norm)) + 1) if norm > 0.5 else 0
    X = A / (2.0 ** s)
    eye = backend.astype(_mask(A, n, n, lambda i, j: i == j), backend.dtype(A))
    term = xp.broadcast_to(eye, A.shape)
    out = term
    for k in range(1, 19):
        term = xp.matmul(term, X) / k
        out = out + term
    for _ in range(s):
        out = xp.matmul(out, out)
    return out


class LinalgMatrixExpBackward0(OpNode):
    """torch's matrix_exp backward: the upper-right block of exp([[Aᵀ, g], [0, Aᵀ]]) (the Fréchet
    derivative's adjoint); recorded through ``matrix_exp`` itself, so every order is right."""

    __slots__ = ()
    work_per_element = 64

    def backward(self, F, g):
        (A,) = F.unpack(self)
        n = tuple(A.shape)[-1]
        At = F.mT(A)
        block = F.cat([F.cat([At, g], -1), F.cat([F.zeros_like(g), At], -1)], -2)
        full = matrix_exp(block) if isinstance(block, Tensor) else _expm(block, backend_of(block))
        return (F.index(full, (..., slice(0, n), slice(n, 2 * n))),)


def matrix_exp(A: Tensor) -> Tensor:
    """torch's ``linalg.matrix_exp`` (and ``matrix_exp``): the exponential of square matrices."""
    tensor_arg(A, "linalg_matrix_exp", "A", 1)
    if A.ndim < 2:
        raise RuntimeError("linalg.matrix_exp: The input tensor A must have at least 2 dimensions.")
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"linalg.matrix_exp: A must be batches of square matrices, but they are {A.shape[-2]} "
                           f"by {A.shape[-1]} matrices")
    _float_input(A, "linalg.matrix_exp")
    out = _expm(A.data, A.device.backend)
    return record(LinalgMatrixExpBackward0, (A,), out, A.device, saved=(A,), work=_decomposition_work(A) * 4)


def qr_legacy(A: Tensor, some: bool = True) -> QrResult:
    """torch's ``qr`` (and ``Tensor.qr``): ``linalg.qr``, reduced unless ``some=False``."""
    tensor_arg(A, "qr", "input", 1)
    return qr(A, "reduced" if some else "complete")


# --------------------------------------------------------------------------- vdot, trace, addmv, addr, addbmm, dist
def _same_dtype(fn: str, a: Tensor, b: Tensor) -> None:
    if a.dtype != b.dtype:
        raise RuntimeError(f"{fn} : expected both vectors to have same dtype, but found {scalar_type_name(a.dtype)} "
                           f"and {scalar_type_name(b.dtype)}")


class VdotBackward0(OpNode):
    """``vdot(a, b)`` of real vectors: ``g * b`` and ``g * a``; each saved only if the other needs it."""

    work_per_element = 2

    def backward(self, F, g):
        a, b = F.unpack(self)
        return (None if b is None else g * b, None if a is None else g * a)


def vdot(input: Tensor, other: Tensor) -> Tensor:
    """torch's ``vdot``: the dot product of two 1-d tensors (the first conjugated, which real numbers ignore)."""
    tensor_arg(input, "vdot", "input", 1)
    tensor_arg(other, "vdot", "other", 2)
    if input.ndim != 1 or other.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.ndim}D and {other.ndim}D tensors")
    _same_dtype("vdot", input, other)
    if input.shape[0] != other.shape[0]:
        raise RuntimeError(f"inconsistent tensor size, expected tensor [{input.shape[0]}] and src [{other.shape[0]}] "
                           f"to have the same number of elements, but got {input.shape[0]} and {other.shape[0]} "
                           "elements respectively")
    dev = same_device(input, other)
    out = dev.backend.array(dev.xp.vecdot(input.data, other.data))
    return record(VdotBackward0, (input, other), out, dev,
                  saved=(input if other._requires_grad else None, other if input._requires_grad else None))


class TraceBackward0(OpNode):
    """``trace``: the gradient on the diagonal of zeros (torch's ``trace_backward``)."""

    __slots__ = ("shape", "index")

    def backward(self, F, g):
        return (F.index_add(self.shape, (self.index, False), F.expand(g, (self.index[0].shape[0],))),)


def trace(input: Tensor) -> Tensor:
    """torch's ``trace``: the sum of a matrix's main diagonal."""
    tensor_arg(input, "trace", "input", 1)
    if input.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {input.ndim}")
    dev = input.device
    backend = dev.backend
    index = shape_ops._diagonal_positions(backend, *input.shape, 0)
    data = input.data
    if input.dtype.kind in "biu":  # torch sums integers (bools included) into int64
        data = backend.astype(data, np.dtype(np.int64))
    out = backend.array(dev.xp.sum(backend.getitem(data, index)))
    return record(TraceBackward0, (input,), out, dev, input.shape, index)


class AddmvBackward0(OpNode):
    """``beta * input + alpha * (mat @ vec)``: input's gradient summed to its shape, mat's the outer
    product ``g vec^T``, vec's ``mat^T g``, each times alpha; each operand saved only if the other needs it."""

    __slots__ = ("input_shape", "beta", "alpha")

    def backward(self, F, g):
        mat, vec = F.unpack(self)
        scaled = g if self.alpha == 1 else g * self.alpha
        n = g.shape[0]
        return (
            F.sum_to(g if self.beta == 1 else g * self.beta, self.input_shape) if self.needs(0) else None,
            F.mm(F.reshape(scaled, (n, 1)), F.reshape(vec, (1, vec.shape[0]))) if self.needs(1) else None,
            F.reshape(F.mm(F.mT(mat), F.reshape(scaled, (n, 1))), (mat.shape[1],)) if self.needs(2) else None,
        )


def _broadcastable(shape: tuple[int, ...], target: tuple[int, ...]) -> None:
    try:
        if np.broadcast_shapes(shape, target) == target:
            return
    except ValueError:
        pass
    raise RuntimeError(_expand_error(shape, target))


def _combine(dev: Any, x: Tensor, product: Any, beta: Any, alpha: Any) -> Any:
    """``beta * x + alpha * product`` on arrays; beta == 0 ignores ``x``, its NaNs included (torch)."""
    out = product if alpha == 1 else product * alpha
    if beta != 0:
        out = out + (x.data if beta == 1 else x.data * beta)
    elif out.shape != product.shape:
        out = dev.xp.broadcast_to(out, product.shape)
    return out


def addmv(input: Tensor, mat: Tensor, vec: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
    """torch's ``addmv``: ``beta * input + alpha * (mat @ vec)``, ``input`` broadcast to the product."""
    tensor_arg(input, "addmv", "input", 1)
    tensor_arg(mat, "addmv", "mat", 2)
    tensor_arg(vec, "addmv", "vec", 3)
    beta = number_arg(beta, "addmv", "beta", 4)
    alpha = number_arg(alpha, "addmv", "alpha", 5)
    if mat.ndim != 2 or vec.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got {input.ndim}, {mat.ndim}, {vec.ndim}")
    if mat.shape[1] != vec.shape[0] or (input.ndim == 1 and input.shape[0] not in (1, mat.shape[0])):
        raise RuntimeError(f"size mismatch, got input ({input.shape[0] if input.ndim else 1}), mat "
                           f"({mat.shape[0]}x{mat.shape[1]}), vec ({vec.shape[0]})")
    if not (input.dtype == mat.dtype == vec.dtype):
        raise RuntimeError(f"expected scalar type {scalar_type_name(mat.dtype)} but found "
                           f"{scalar_type_name(vec.dtype if vec.dtype != mat.dtype else input.dtype)}")
    dev = same_device(mat, vec)
    same_device(input, mat)
    _broadcastable(input.shape, (mat.shape[0],))
    out = _combine(dev, input, dev.xp.matmul(mat.data, vec.data), beta, alpha)
    return record(AddmvBackward0, (input, mat, vec), out, dev, input.shape, beta, alpha,
                  saved=(mat if vec._requires_grad else None, vec if mat._requires_grad else None))


class AddrBackward0(OpNode):
    """``beta * input + alpha * outer(vec1, vec2)``: vec1's gradient ``g vec2``, vec2's ``g^T vec1``."""

    __slots__ = ("input_shape", "beta", "alpha")

    def backward(self, F, g):
        v1, v2 = F.unpack(self)
        scaled = g if self.alpha == 1 else g * self.alpha
        n, m = g.shape
        return (
            F.sum_to(g if self.beta == 1 else g * self.beta, self.input_shape) if self.needs(0) else None,
            F.reshape(F.mm(scaled, F.reshape(v2, (m, 1))), (n,)) if self.needs(1) else None,
            F.reshape(F.mm(F.mT(scaled), F.reshape(v1, (n, 1))), (m,)) if self.needs(2) else None,
        )


def addr(input: Tensor, vec1: Tensor, vec2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
    """torch's ``addr``: ``beta * input + alpha * outer(vec1, vec2)``, ``input`` broadcast to the product."""
    tensor_arg(input, "addr", "input", 1)
    tensor_arg(vec1, "addr", "vec1", 2)
    tensor_arg(vec2, "addr", "vec2", 3)
    beta = number_arg(beta, "addr", "beta", 4)
    alpha = number_arg(alpha, "addr", "alpha", 5)
    for t, name in ((vec1, "vec1"), (vec2, "vec2")):
        if t.ndim != 1:
            raise RuntimeError(f"addr: Expected 1-D argument {name}, but got {t.ndim}-D")
    dev = same_device(vec1, vec2)
    same_device(input, vec1)
    target = (vec1.shape[0], vec2.shape[0])
    _broadcastable(input.shape, target)
    xp = dev.xp
    product = xp.reshape(vec1.data, (target[0], 1)) * xp.reshape(vec2.data, (1, target[1]))
    out = _combine(dev, input, product, beta, alpha)
    return record(AddrBackward0, (input, vec1, vec2), out, dev, input.shape, beta, alpha,
                  saved=(vec1 if vec2._requires_grad else None, vec2 if vec1._requires_grad else None))


class AddbmmBackward0(OpNode):
    """``beta * input + alpha * Σ_b batch1[b] @ batch2[b]``: each batch's gradient is the broadcast
    output gradient's product with the other batch, as torch's derivatives.yaml writes it."""

    __slots__ = ("input_shape", "beta", "alpha")

    def backward(self, F, g):
        b1, b2 = F.unpack(self)
        scaled = g if self.alpha == 1 else g * self.alpha
        batch = (b1 if b1 is not None else b2).shape[0]
        n, p = g.shape
        big = F.expand(F.reshape(scaled, (1, n, p)), (batch, n, p))
        return (
            F.sum_to(g if self.beta == 1 else g * self.beta, self.input_shape) if self.needs(0) else None,
            F.mm(big, F.mT(b2)) if self.needs(1) else None,
            F.mm(F.mT(b1), big) if self.needs(2) else None,
        )


def addbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
    """torch's ``addbmm``: ``beta * input + alpha * (batch1 @ batch2).sum(0)``."""
    tensor_arg(input, "addbmm", "input", 1)
    tensor_arg(batch1, "addbmm", "batch1", 2)
    tensor_arg(batch2, "addbmm", "batch2", 3)
    beta = number_arg(beta, "addbmm", "beta", 4)
    alpha = number_arg(alpha, "addbmm", "alpha", 5)
    if batch1.ndim != 3:
        raise RuntimeError("batch1 must be a 3D tensor")
    if batch2.ndim != 3:
        raise RuntimeError("batch2 must be a 3D tensor")
    if batch1.shape[0] != batch2.shape[0]:
        raise RuntimeError(f"batch1 and batch2 must have same number of batches, got {batch1.shape[0]} and "
                           f"{batch2.shape[0]}")
    if batch1.shape[2] != batch2.shape[1]:
        raise RuntimeError(f"Incompatible matrix sizes for bmm ({batch1.shape[1]}x{batch1.shape[2]} and "
                           f"{batch2.shape[1]}x{batch2.shape[2]})")
    dev = same_device(batch1, batch2)
    same_device(input, batch1)
    target = (batch1.shape[1], batch2.shape[2])
    _broadcastable(input.shape, target)
    xp = dev.xp
    product = xp.sum(xp.matmul(batch1.data, batch2.data), axis=0) if batch1.shape[0] else xp.zeros(
        target, dtype=batch1.data.dtype)
    out = _combine(dev, input, dev.backend.array(product), beta, alpha)
    return record(AddbmmBackward0, (input, batch1, batch2), out, dev, input.shape, beta, alpha,
                  saved=(batch1 if batch2._requires_grad else None, batch2 if batch1._requires_grad else None))


class DistBackward0(OpNode):
    """``dist(a, b, p) = ‖a - b‖_p``: torch's ``norm_backward`` of the difference, summed back to each
    operand's shape, negated for ``b``."""

    __slots__ = ("p", "a_shape", "b_shape")
    saves_result = True
    work_per_element = 4

    def backward(self, F, g):
        a, b, norm = F.unpack(self)
        gx = norm_backward(F, g, a - b, norm, self.p, None)
        if gx is None:
            return (None, None)
        return (F.sum_to(gx, self.a_shape) if self.needs(0) else None,
                F.sum_to(-gx, self.b_shape) if self.needs(1) else None)


def dist(input: Tensor, other: Tensor, p: Any = 2) -> Tensor:
    """torch's ``dist``: the ``p``-norm of ``input - other`` (broadcast), one number."""
    tensor_arg(input, "dist", "input", 1)
    tensor_arg(other, "dist", "other", 2)
    p = float(number_arg(p, "dist", "p", 3))
    dev = same_device(input, other)
    if input.dtype != other.dtype:
        raise RuntimeError(f"expected both inputs to have same dtype, but found {scalar_type_name(input.dtype)} "
                           f"and {scalar_type_name(other.dtype)}")
    _float_input(input, "dist")
    try:
        difference = input.data - other.data
    except ValueError:
        raise RuntimeError(_expand_error(other.shape, input.shape)) from None
    xp = dev.xp
    magnitude = xp.abs(difference)
    if difference.size == 0:
        out = xp.zeros((), dtype=difference.dtype)
    elif p == math.inf:
        out = xp.max(magnitude)
    elif p == -math.inf:
        out = xp.min(magnitude)
    elif p == 0:
        out = xp.sum(dev.backend.astype(difference != 0, input.dtype))
    elif p == 1:
        out = xp.sum(magnitude)
    elif p == 2:
        out = xp.sqrt(xp.sum(difference * difference))
    else:
        out = xp.sum(magnitude ** p) ** (1 / p)
    return record(DistBackward0, (input, other), dev.backend.array(out), dev, p, input.shape, other.shape,
                  saved=(input, other))


class RenormBackward0(OpNode):
    """``renorm``: torch's ``renorm_backward``: with ``f = maxnorm / (norm + 1e-7)`` where a slice's
    norm exceeds ``maxnorm``, ``f g - f / (norm + 1e-7) * norm_backward(Σ x g)``; ``g`` elsewhere."""

    __slots__ = ("p", "axes", "maxnorm")
    work_per_element = 6

    def backward(self, F, g):
        (x,) = F.unpack(self)
        norm = F.vector_norm(x, self.p, self.axes, True)
        inv = 1.0 / (norm + 1e-7)
        factor = inv * self.maxnorm
        projected = F.sum(x * g, self.axes, True)
        nb = norm_backward(F, projected, x, norm, self.p, self.axes)
        scaled = factor * g if nb is None else factor * g - factor * inv * nb
        return (F.where(norm > self.maxnorm, scaled, g),)


def renorm(input: Tensor, p: Any, dim: int, maxnorm: Any) -> Tensor:
    """torch's ``renorm``: each slice along ``dim`` whose ``p``-norm exceeds ``maxnorm`` scaled down to
    it (by ``maxnorm / (norm + 1e-7)``, torch's factor)."""
    tensor_arg(input, "renorm", "input", 1)
    p = float(number_arg(p, "renorm", "p", 2))
    maxnorm = float(number_arg(maxnorm, "renorm", "maxnorm", 4))
    if p < 0:
        raise RuntimeError("renorm: non-positive-norm not supported")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    if input.ndim <= 1:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {input.ndim} dimensions")
    _float_input(input, "renorm")
    axis = normalize_dim(int_arg(dim, "renorm", "dim", 3), input.ndim, "renorm")
    axes = tuple(i for i in range(input.ndim) if i != axis)
    dev = input.device
    xp = dev.xp
    norm = vector_norm(Tensor._make(input.data, dev, False, None, 0, [0]), p, axes, True).data
    factor = xp.where(norm > maxnorm, maxnorm / (norm + 1e-7), 1.0)
    return record(RenormBackward0, (input,), input.data * factor, dev, p, axes, maxnorm,
                  saved=(input,))
