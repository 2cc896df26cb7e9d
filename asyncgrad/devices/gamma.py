"""lgamma, digamma and polygamma in Array API terms, in float64, on every backend's namespace.

As for erf (devices/special.py): the standard and numpy have none of these, scipy is no dependency,
and a Python loop over ``math.lgamma`` costs microseconds an element. Each function is written once
against ``xp``; the backends (devices/backend.py) call it in float64 and cast back, and CuPy's
backend uses cupyx's kernels instead."""

# Note [Gamma functions to double precision]
# * ``lgamma(x) = log|Γ(x)|``: Lanczos' sum (g = 7, nine terms; relative error of Γ below 2e-15) for
#   ``x >= 0.5``, taken in logarithms so nothing overflows; below 0.5 the reflection
#   ``lgamma(x) = log(π / |sin(πx)|) - lgamma(1 - x)``, with ``sin(πx)`` computed on ``x - round(x)``
#   so a large negative ``x`` loses no digits. Poles (0, -1, -2, ...) give +inf, and 1 and 2 exactly
#   0, as torch.
# * ``digamma``: the recurrence ``ψ(x) = ψ(x + 1) - 1/x`` lifts every ``x`` to at least 10, where the
#   asymptotic series ``log x - 1/(2 x) - Σ B_2k / (2k x^2k)`` (seven terms) is exact to rounding;
#   ``x < 0`` reflects, ``ψ(x) = ψ(1 - x) - π / tan(πx)``. torch's values at the poles: ``ψ(±0) = ∓inf``,
#   NaN at the negative integers.
# * ``polygamma(n, x) = (-1)^(n+1) n! ζ(n + 1, x)`` for ``n >= 1``, with Hurwitz's zeta summed directly
#   until ``x + k >= 10`` and finished by Euler-Maclaurin (the integral, half the last term and eight
#   Bernoulli corrections), which is also how torch's kernel (Cephes' ``zeta``) computes it, negative
#   ``x`` included; at the poles ``ζ`` is +inf.

from __future__ import annotations

import math
from typing import Any

_LANCZOS_G = 7.0
_LANCZOS = (
    0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059,
    12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7,
)
_HALF_LOG_TWO_PI = 0.5 * math.log(2 * math.pi)

# B_2k / (2k) for the digamma series, k = 1..7
_DIGAMMA_SERIES = (1 / 12, -1 / 120, 1 / 252, -1 / 240, 1 / 132, -691 / 32760, 1 / 12)
# B_2k / (2k)! for Euler-Maclaurin, k = 1..8
_ZETA_BERNOULLI = (
    1 / 12, -1 / 720, 1 / 30240, -1 / 1209600, 1 / 47900160, -691 / 1307674368000, 1 / 74724249600,
    -3617 / 10670622842880000,
)
_LIFT = 10.0


def _lgamma_right(xp: Any, x: Any) -> Any:
    """lgamma for ``x >= 0.5`` (Lanczos)."""
    z = x - 1.0
    total = xp.full_like(z, _LANCZOS[0])
    for i, c in enumerate(_LANCZOS[1:], start=1):
        total = total + c / (z + float(i))
    t = z + (_LANCZOS_G + 0.5)
    return _HALF_LOG_TWO_PI + (z + 0.5) * xp.log(t) - t + xp.log(total)


def _sin_pi(xp: Any, x: Any) -> Any:
    """sin(πx) with the argument reduced first (exact for large |x|)."""
    m = xp.round(x)
    return xp.sin(math.pi * (x - m)) * (1.0 - 2.0 * xp.remainder(m, 2.0))


def lgamma(xp: Any, x: Any) -> Any:
    """log|Γ(x)| of a float64 array (Note [Gamma functions to double precision])."""
    right = _lgamma_right(xp, xp.where(x >= 0.5, x, 1.0 - x))
    sine = xp.abs(_sin_pi(xp, x))
    left = math.log(math.pi) - xp.log(sine) - right
    out = xp.where(x >= 0.5, right, left)
    out = xp.where((x == 1.0) | (x == 2.0), 0.0, out)  # Γ(1) = Γ(2) = 1 exactly, as torch's
    return xp.where(xp.isinf(x), math.inf, out)


def _digamma_right(xp: Any, x: Any) -> Any:
    """digamma for ``x > 0``: lifted to 10, then the asymptotic series."""
    shift = xp.zeros_like(x)
    for _ in range(int(_LIFT)):
        low = x < _LIFT
        shift = shift - xp.where(low, 1.0 / x, 0.0)
        x = xp.where(low, x + 1.0, x)
    inv2 = 1.0 / (x * x)
    series = xp.zeros_like(x)
    for c in _DIGAMMA_SERIES[::-1]:
        series = (series + c) * inv2
    return shift + xp.log(x) - 0.5 / x - series


def digamma(xp: Any, x: Any) -> Any:
    """ψ(x) = Γ'(x)/Γ(x) of a float64 array (Note [Gamma functions to double precision])."""
    positive = x > 0
    right = _digamma_right(xp, xp.where(positive, x, 1.0 - x))
    reduced = x - xp.round(x)
    left = right - math.pi / xp.tan(math.pi * reduced)
    out = xp.where(positive, right, left)
    out = xp.where((x < 0) & (reduced == 0), math.nan, out)
    out = xp.where(x == 0, xp.copysign(xp.full_like(x, math.inf), -x), out)
    return xp.where(x == -math.inf, math.nan, out)


def _hurwitz_zeta(xp: Any, s: float, q: Any) -> Any:
    """ζ(s, q) = Σ_k (q + k)^-s for an integer ``s >= 2``: direct terms until ``q + k >= 10``, then
    Euler-Maclaurin. Nonpositive integer ``q`` is a pole (+inf)."""
    pole = (q <= 0) & (q == xp.floor(q))
    a = xp.where(pole | xp.isnan(q), 1.0, q)
    total = xp.zeros_like(a)
    while True:
        low = a < _LIFT
        if not bool(xp.any(low)):
            break
        total = total + xp.where(low, a ** -s, 0.0)
        a = xp.where(low, a + 1.0, a)
    total = total + a ** (1.0 - s) / (s - 1.0) + 0.5 * a ** -s
    factor = s * a ** (-s - 1.0)  # s (s+1) ... (s+2k-2) a^(-s-2k+1), k = 1
    for k, b in enumerate(_ZETA_BERNOULLI, start=1):
        total = total + b * factor
        factor = factor * ((s + 2 * k - 1) * (s + 2 * k)) / (a * a)
    out = xp.where(pole, math.inf, total)
    return xp.where(xp.isnan(q), math.nan, out)


def polygamma(xp: Any, n: int, x: Any) -> Any:
    """ψ^(n)(x) of a float64 array, ``n >= 0`` (Note [Gamma functions to double precision])."""
    if n == 0:
        return digamma(xp, x)
    sign = 1.0 if n % 2 == 1 else -1.0
    return sign * math.factorial(n) * _hurwitz_zeta(xp, float(n + 1), x)
