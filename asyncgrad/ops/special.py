"""``torch.special``'s functions that are not plain elementwise rows elsewhere: the scaled
complementary error function, the normal distribution's functions, the entropy term, the
modified Bessel functions of order 0 and 1, and ``xlog1py``.

Note [Special functions by name]: the kernels are the backend's (``erfcx`` in devices/special.py,
``i0e``, ``i1``, ``i1e`` in devices/bessel.py: only arithmetic, so every backend runs them) and a formula that
needs one asks ``F.special(name, x)``: the backend's kernel under ``ArrayMath``, this module's
recorded op under ``TensorMath``, so second and higher orders come from the same formulas.
Each formula is torch's (derivatives.yaml). An integer input computes in the default float dtype.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from asyncgrad import dtypes
from asyncgrad._validate import tensor_arg
from asyncgrad.ops._node import OpNode, plain, record
from asyncgrad.ops.elementwise import erf, operands, special_i1
from asyncgrad.tensor import Tensor

__all__ = ["entr", "erfcx", "i0e", "i1", "i1e", "log_ndtr", "ndtr", "ndtri", "special_op", "xlog1py"]

_SQRT_2PI = math.sqrt(2 * math.pi)


def _floating(x: Tensor) -> Any:
    """``x``'s array, integers and bools in the default float dtype (torch's promotion for these)."""
    if x.dtype.kind == "f":
        return x.data
    return x.device.backend.astype(x.data, np.dtype(dtypes.get_default_dtype()))


class _Special(OpNode):
    """A one-input special function; ``saved`` is (input, result) as its formula needs."""

    __slots__ = ()
    work_per_element = 20
    saves_result = True


class SpecialErfcxBackward0(_Special):
    """d/dx erfcx(x) = 2 x erfcx(x) - 2 / sqrt(pi)."""

    __slots__ = ()

    def backward(self, F, g):
        x, out = F.unpack(self)
        return ((2.0 * x * out - 2.0 / math.sqrt(math.pi)) * g,)


class SpecialI0EBackward0(_Special):
    """d/dx i0e(x) = i1e(x) - sgn(x) i0e(x)."""

    __slots__ = ()

    def backward(self, F, g):
        x, out = F.unpack(self)
        return (g * (F.special("i1e", x) - F.sign(x) * out),)


def _at_zero(F: Any, x: Any, value: Any, limit: float) -> Any:
    """``value`` with its 0 / 0 at x = 0 replaced by the limit there (torch's i1/i1e backward)."""
    zero = x == 0
    return F.where(zero, limit, value)


class SpecialI1EBackward0(_Special):
    """d/dx i1e(x) = i0e(x) - i1e(x) (sgn(x) + 1 / x), 1/2 at 0."""

    __slots__ = ()

    def backward(self, F, g):
        x, out = F.unpack(self)
        safe = F.where(x == 0, 1.0, x)
        return (g * _at_zero(F, x, F.special("i0e", x) - out * (F.sign(x) + 1 / safe), 0.5),)


class SpecialNdtriBackward0(_Special):
    """d/dp ndtri(p) = sqrt(2 pi) exp(ndtri(p)² / 2)."""

    __slots__ = ()

    def backward(self, F, g):
        _, out = F.unpack(self)
        return (g * _SQRT_2PI * F.exp(out * out / 2),)


class SpecialLogNdtrBackward0(_Special):
    """d/dx log_ndtr(x) = exp(-(log_ndtr(x) + x² / 2)) / sqrt(2 pi)."""

    __slots__ = ()

    def backward(self, F, g):
        x, out = F.unpack(self)
        return (g / _SQRT_2PI * F.exp(-(out + x * x / 2)),)


class SpecialEntrBackward0(_Special):
    """d/dx entr(x) = -(1 + log x)."""

    __slots__ = ()
    saves_result = False

    def backward(self, F, g):
        (x,) = F.unpack(self)
        return (g * -(1 + F.log(x)),)


def _record(cls: type, x: Tensor, out: Any) -> Tensor:
    """The op's node over ``x``, saving ``x`` (and, by the class's ``saves_result``, the result)."""
    return record(cls, (x,), out, x.device, saved=(x,))


def erfcx(input: Tensor) -> Tensor:
    """torch.special.erfcx: exp(x²) erfc(x), finite where erfc underflows."""
    tensor_arg(input, "special_erfcx", "input", 1)
    return _record(SpecialErfcxBackward0, input, input.device.backend.erfcx(_floating(input)))


def i0e(input: Tensor) -> Tensor:
    """torch.special.i0e: exp(-|x|) I0(x)."""
    tensor_arg(input, "special_i0e", "input", 1)
    return _record(SpecialI0EBackward0, input, input.device.backend.i0e(_floating(input)))


i1 = special_i1
"""torch.special.i1: the modified Bessel function of the first kind, order 1 (ops/elementwise.py's
op, whose formula i0's derivative asks for)."""


def i1e(input: Tensor) -> Tensor:
    """torch.special.i1e: exp(-|x|) I1(x)."""
    tensor_arg(input, "special_i1e", "input", 1)
    return _record(SpecialI1EBackward0, input, input.device.backend.i1e(_floating(input)))


def ndtri(input: Tensor) -> Tensor:
    """torch.special.ndtri: the standard normal's quantile, sqrt(2) erfinv(2p - 1); -inf at 0, inf
    at 1, NaN outside [0, 1]."""
    tensor_arg(input, "special_ndtri", "input", 1)
    return _record(SpecialNdtriBackward0, input, _ndtri(_floating(input), input.device.backend))


def _ndtri(p: Any, backend: Any) -> Any:
    """ndtri on raw arrays: with ``q = min(p, 1 - p)`` (exact in floating point) and ``t`` solving
    ``erfc(t) = 2 q``, ndtri is ``-+sqrt(2) t``. ``sqrt(2) erfinv(2p - 1)`` alone loses the digits
    of a small ``p`` in ``2p - 1``; so ``t`` starts there where ``q >= 0.01`` and from the tail's
    asymptote ``erfc(t) ~ exp(-t²) / (t sqrt(pi))`` below, then takes Newton steps on
    ``erfcx(t) - 2 q exp(t²)`` (both exact in the tail), which double its digits each time."""
    xp = backend.xp
    with backend.quiet():
        q = xp.where(p > 0.5, 1 - p, p)
        inside = (q > 0) & (q <= 0.5)
        safe = xp.where(inside, q, xp.full_like(q, 0.25))
        near = backend.erfinv(1 - 2 * safe)
        log_q = -xp.log(2 * safe)
        far = xp.sqrt(log_q - xp.log(math.sqrt(math.pi) * xp.sqrt(log_q)))
        t = xp.where(safe >= 0.01, near, far)
        for _ in range(6):
            t = t + (backend.erfcx(t) - 2 * safe * xp.exp(t * t)) * (math.sqrt(math.pi) / 2)
        x = math.sqrt(2.0) * xp.where(p > 0.5, t, -t)
        x = xp.where(p == 0, xp.full_like(p, -math.inf), xp.where(p == 1, xp.full_like(p, math.inf), x))
        return xp.where(inside | (p == 0) | (p == 1), x, xp.full_like(p, math.nan))


def log_ndtr(input: Tensor) -> Tensor:
    """torch.special.log_ndtr: log of the standard normal's CDF, accurate in the lower tail
    (log(erfcx(-t) / 2) - t² there, t = x / sqrt(2); log1p(-erfc(t) / 2) elsewhere)."""
    tensor_arg(input, "special_log_ndtr", "input", 1)
    x = _floating(input)
    backend = input.device.backend
    xp = input.device.xp
    t = x / math.sqrt(2.0)
    with backend.quiet():
        low = xp.log(backend.erfcx(-t) / 2) - t * t
        high = xp.log1p(-backend.erfc(t) / 2)
        out = xp.where(x < -1.0, low, high)
    return _record(SpecialLogNdtrBackward0, input, out)


def entr(input: Tensor) -> Tensor:
    """torch.special.entr: -x log x for x > 0, 0 at 0, -inf below (NaN stays NaN)."""
    tensor_arg(input, "special_entr", "input", 1)
    x = _floating(input)
    xp = input.device.xp
    with input.device.backend.quiet():
        positive = -x * xp.log(xp.where(x > 0, x, xp.ones_like(x)))
        out = xp.where(x > 0, positive, xp.where(x == 0, xp.zeros_like(x), xp.full_like(x, -math.inf)))
        out = xp.where(xp.isnan(x), x, out)
    return record(SpecialEntrBackward0, (input,), out, input.device, saved=(input,))


def ndtr(input: Tensor) -> Tensor:
    """torch.special.ndtr: the standard normal's CDF, (1 + erf(x / sqrt(2))) / 2 (torch's
    composition: its node is the multiplication's)."""
    tensor_arg(input, "special_ndtr", "input", 1)
    x = input if input.dtype.kind == "f" else input.to(dtypes.get_default_dtype())
    return (1 + erf(x * (1 / math.sqrt(2.0)))) * 0.5


class _Xlog1py(OpNode):
    """xlog1py(x, y) = x log1p(y), 0 where x is 0 (unless y is NaN): d/dx = log1p(y) (0 where x is
    0 and y <= -1), d/dy = x / (1 + y) (torch's formulas). Either side may be a number."""

    __slots__ = ("x_shape", "y_shape")
    work_per_element = 6

    def backward(self, F, g):
        x, y = F.unpack(self)
        gx = gy = None
        if self.needs(0):
            # log1p below -1 is NaN: given as NaN (numpy would warn making it)
            log1p = F.log1p(F.where(y < -1, math.nan, y))
            gx = F.sum_to(F.where((x == 0) & (y <= -1), 0.0, g * log1p), self.x_shape)
        if self.needs(1):
            gy = F.sum_to(g * x / (y + 1), self.y_shape)
        return gx, gy


class SpecialXlog1PyBackward0(_Xlog1py):
    __slots__ = ()


def xlog1py(input: Any, other: Any) -> Tensor:
    """torch.special.xlog1py(input, other): tensors or one number, broadcast, promoted as torch's."""
    tx, ty, dx, dy, dev = operands(input, other, "special_xlog1py")
    xp = dev.xp
    backend = dev.backend
    if not hasattr(dx, "shape"):
        dx = backend.full((), dx, backend.dtype(dy))
    if not hasattr(dy, "shape"):
        dy = backend.full((), dy, backend.dtype(dx))
    if backend.dtype(dx).kind != "f":
        f = np.dtype(dtypes.get_default_dtype())
        dx, dy = backend.astype(dx, f), backend.astype(dy, f)
    with backend.quiet():
        out = xp.where((dx == 0) & ~xp.isnan(dy), xp.zeros_like(dx * dy), dx * xp.log1p(dy))
    x_t = tx if tx is not None else plain(dx, dev)
    y_t = ty if ty is not None else plain(dy, dev)
    return record(SpecialXlog1PyBackward0, (x_t, y_t), out, dev, tuple(dx.shape), tuple(dy.shape),
                  saved=(x_t, y_t))


_OPS = {"erfcx": erfcx, "i0e": i0e, "i1": i1, "i1e": i1e}


def special_op(name: str, x: Tensor) -> Tensor:
    """``TensorMath.special``: one of the kernels of Note [Special functions by name] as a recorded op."""
    return _OPS[name](x)

