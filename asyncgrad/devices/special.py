"""erf, erfc and erfinv in Array API terms, to double precision, on every backend's namespace.

Design: docs/design/special-functions.md.
"""

from __future__ import annotations

import math
from typing import Any

# Note [erf to double precision]: piecewise approximations, each accurate to an ulp or two:
#
# * ``|x| < 0.5``: ``erf(x) = x * P(x²)``, ``P`` a Chebyshev series of degree 12 in ``u = x²`` on
#   [0, 0.25] (its coefficients fall to 6e-25: the truncation is far below double precision).
# * ``0.5 <= |x| < 8``: ``erfc(|x|) = exp(-x²) * erfcx(|x|)``, ``erfcx(x) = exp(x²) erfc(x)`` a
#   Chebyshev series on each of [0.5, 2] (degree 22), [2, 4] (20) and [4, 8] (22). ``erfcx`` is
#   entire, so the series converge geometrically; each was checked to 2.3e-16 relative on 3001
#   points against 40-digit values.
# * ``|x| >= 8``: ``erfcx`` from its asymptotic series ``1/(x√π) Σ (-1)^n (2n-1)!!/(2x²)^n``, 17
#   terms: the next is below 4e-17 at x = 8 and smaller beyond.
# * each piece computes only on its own elements (boolean masks: data-dependent shapes, which
#   numpy and array_api_strict have), so erf costs about one series per element.
# * ``exp(-x²)`` with ``x² = z² + (x - z)(x + z)``, ``z`` being ``x`` rounded to 1/4096 so ``z²``
#   is exact: a rounded ``x²`` (absolute error up to 1e-14 at x = 8) would cost ``exp`` that much
#   relative accuracy.
#
# erf is then ``1 - erfc`` past 0.5 (erfc < 0.48 there: no digit is lost), erfc is ``1 - erf``
# below 0.5 and ``2 - erfc(-x)`` below -0.5.
#
# The Chebyshev coefficients are ``c_j = (2/N) Σ_k f(x_k) cos(j θ_k)`` at the N = degree + 8
# Chebyshev points ``θ_k = π (k + 1/2) / N`` (``c_0`` halved), ``f`` evaluated with mpmath at 40
# digits, rounded to doubles, and are summed by Clenshaw's recurrence.
#
# erfinv starts from Winitzki's closed form (a few 1e-3 relative error) and takes three Halley
# steps on ``erf(x) = y`` (each cubes the error), written as ``erfc(x) = 1 - y`` where
# ``|y| > 0.5`` (``1 - y`` is exact there, and erfc keeps the tail's digits).


_TWO_OVER_SQRT_PI = 2 / math.sqrt(math.pi)

_ERF_SMALL = (
    1.083882205490613, -0.04367779108737525, 0.0008071118294133213, -1.191317951927046e-05,
    1.440278733630302e-07, -1.467715582316901e-09, 1.2902439604484931e-11, -9.963857180158892e-14,
    6.857505850501839e-16, -4.255370438044438e-18, 2.4037410518501235e-20, -1.2458813175735645e-22,
    5.965285166517359e-25,
)
"""erf(x)/x in u = x² on [0, 0.25]."""

_ERFCX = (
    (0.5, 2.0, (
        0.4006822530639845, -0.17395587897748596, 0.03383702540740585, -0.006032263577025819,
        0.001000274118215681, -0.0001558965252433288, 2.3014442396758424e-05, -3.2375421924541957e-06,
        4.360702485858127e-07, -5.645684833789816e-08, 7.048623263203286e-09, -8.509612327566787e-10,
        9.957554366871612e-11, -1.1316613855047257e-11, 1.2513369992930791e-12, -1.3483678086194079e-13,
        1.4178345509581745e-14, -1.4566964654246537e-15, 1.4639564848603663e-16, -1.4406081509350508e-17,
        1.3893934243911832e-18, -1.314421430456738e-19, 1.2207086091918848e-20)),
    (2.0, 4.0, (
        0.1874295690262241, -0.05794652883669097, 0.008595247387396534, -0.0012284613640242594,
        0.00016974366686180488, -2.2738329337044562e-05, 2.959844378804878e-06, -3.7513575581379714e-07,
        4.6372828761738244e-08, -5.599455392564088e-09, 6.613160896679916e-10, -7.648271522199816e-11,
        8.670904325876594e-12, -9.645456274382108e-13, 1.0536827959360625e-13, -1.1312630906760667e-14,
        1.1945180669174577e-15, -1.241310752580407e-16, 1.270246323185436e-17, -1.280725873663855e-18,
        1.2729426443953689e-19)),
    (4.0, 8.0, (
        0.09799557556862198, -0.03261716242283879, 0.005354444513048941, -0.0008675085617618387,
        0.0001387834577332989, -2.1933248302183236e-05, 3.425716824410705e-06, -5.289955530513349e-07,
        8.079076527537946e-08, -1.2207511691612988e-08, 1.8255151508559988e-09, -2.7024969193563974e-10,
        3.961752303537055e-11, -5.752619043200236e-12, 8.275752891382595e-13, -1.1798167744445412e-13,
        1.6671816868045593e-14, -2.335628745546585e-15, 3.244620004495789e-16, -4.470390173206754e-17,
        6.10980111227626e-18, -8.284830681274415e-19, 1.1147734317571069e-19)),
)
"""erfcx(x) = exp(x²) erfc(x) on each interval: (low, high, Chebyshev coefficients in x)."""

_ASYMPTOTIC_TERMS = 17
_HALLEY_STEPS = 3
"""Each step cubes the relative error; from Winitzki's start, two are not always enough near |y| = 1."""


def _clenshaw(xp: Any, coefficients: tuple[float, ...], t: Any) -> Any:
    """Σ c_j T_j(t) for ``t`` in [-1, 1]."""
    b1 = xp.zeros_like(t)
    b2 = xp.zeros_like(t)
    two_t = 2 * t
    for c in coefficients[:0:-1]:
        b1, b2 = two_t * b1 - b2 + c, b1
    return t * b1 - b2 + coefficients[0]


def _fill(xp: Any, out: Any, x: Any, mask: Any, fn: Any) -> None:
    """``out[mask] = fn(x[mask])``: each piece computes only on its own elements (1-D arrays)."""
    if bool(xp.any(mask)):
        out[mask] = fn(x[mask])


def _flat(xp: Any, fn: Any, x: Any) -> Any:
    """``fn`` of a flattened copy of ``x`` (boolean masks then index every shape alike), reshaped back."""
    return xp.reshape(fn(xp.reshape(x, (-1,))), x.shape)


def _exp_minus_square(xp: Any, x: Any) -> Any:
    """exp(-x²) to full relative precision (Note [erf to double precision])."""
    z = xp.round(x * 4096.0) / 4096.0
    return xp.exp(-(z * z)) * xp.exp(-((x - z) * (x + z)))


def _erfcx(xp: Any, a: Any) -> Any:
    """exp(a²) erfc(a) for a 1-D float64 ``a`` of values in [0.5, 30]."""
    out = xp.empty_like(a)
    for low, high, coefficients in _ERFCX:
        _fill(xp, out, a, (a >= low) & (a < high),
              lambda v, low=low, high=high, c=coefficients: _clenshaw(xp, c, (2 * v - (low + high)) / (high - low)))

    def asymptotic(v: Any) -> Any:
        inv = 1 / (2 * v * v)
        term = xp.ones_like(v)
        total = xp.ones_like(v)
        for n in range(1, _ASYMPTOTIC_TERMS):
            term = term * (-(2 * n - 1) * inv)
            total = total + term
        return total / (v * math.sqrt(math.pi))

    _fill(xp, out, a, a >= 8.0, asymptotic)
    return out


def _erf_small(xp: Any, x: Any) -> Any:
    """erf(x) for float64 ``|x| < 0.5``."""
    return x * _clenshaw(xp, _ERF_SMALL, 8 * (x * x) - 1)


def _erfc_abs(xp: Any, a: Any) -> Any:
    """erfc(a) for a 1-D float64 ``a >= 0.5`` (erfc(30) is below the smallest double: so is everything past it)."""
    a = xp.clip(a, None, 30.0)
    return _exp_minus_square(xp, a) * _erfcx(xp, a)


def _erf_1d(xp: Any, x: Any) -> Any:
    a = xp.abs(x)
    out = xp.full_like(x, math.nan)
    _fill(xp, out, x, a < 0.5, lambda v: _erf_small(xp, v))

    def tail(v: Any) -> Any:
        t = 1 - _erfc_abs(xp, xp.abs(v))
        return xp.where(v < 0, -t, t)

    _fill(xp, out, x, a >= 0.5, tail)
    return out


def _erfc_by_parts(xp: Any, x: Any, cut: float, near: Any, far: Any) -> Any:
    """erfc from ``1 - near(x)`` where ``|x| < cut`` and ``far(|x|)`` (reflected for negative x) beyond."""
    a = xp.abs(x)
    out = xp.full_like(x, math.nan)
    _fill(xp, out, x, a < cut, lambda v: 1 - near(xp, v))

    def tail(v: Any) -> Any:
        t = far(xp, xp.abs(v))
        return xp.where(v < 0, 2 - t, t)

    _fill(xp, out, x, a >= cut, tail)
    return out


def _erfc_1d(xp: Any, x: Any) -> Any:
    return _erfc_by_parts(xp, x, 0.5, _erf_small, _erfc_abs)


def erf(xp: Any, x: Any) -> Any:
    """The error function of a float64 array (Note [erf to double precision])."""
    return _flat(xp, lambda v: _erf_1d(xp, v), x)


def erfc(xp: Any, x: Any) -> Any:
    """The complementary error function of a float64 array (Note [erf to double precision])."""
    return _flat(xp, lambda v: _erfc_1d(xp, v), x)


def erfinv(xp: Any, y: Any) -> Any:
    """The inverse error function of a float64 array: ±inf at ±1, NaN outside [-1, 1]."""
    return _flat(xp, lambda v: _erfinv_1d(xp, v), y)


def _erfinv_1d(xp: Any, y: Any) -> Any:
    out = xp.where(y == 1, math.inf, xp.where(y == -1, -math.inf, xp.full_like(y, math.nan)))
    _fill(xp, out, y, xp.abs(y) <= 0.5, lambda v: _halley(xp, v, False))
    _fill(xp, out, y, (xp.abs(y) > 0.5) & (xp.abs(y) < 1), lambda v: _halley(xp, v, True))
    return out


def _halley(xp: Any, y: Any, tail: bool) -> Any:
    """erfinv of 1-D ``y`` inside (-1, 1): Winitzki's start, then Halley steps on ``erf(x) = y``, written
    as ``erfc(|x|) = 1 - |y|`` in the ``tail`` (|y| > 0.5)."""
    a = 0.147
    log_term = xp.log1p(-(y * y))  # log(1 - y²), exact near 0
    first = 2 / (math.pi * a) + log_term / 2
    x = xp.sqrt(xp.sqrt(first * first - log_term / a) - first)
    x = xp.where(y < 0, -x, x)
    sign = xp.sign(y)
    target = 1 - xp.abs(y)
    for _ in range(_HALLEY_STEPS):
        # f = erf(x) - y = sign(y) (1 - |y| - erfc(|x|)); f' = 2/√π exp(-x²); f''/f' = -2x
        f = sign * (target - _erfc_1d(xp, xp.abs(x))) if tail else _erf_1d(xp, x) - y
        ratio = f / (_TWO_OVER_SQRT_PI * _exp_minus_square(xp, x))
        x = x - ratio / (1 + x * ratio)
    return x


# Note [erf to single precision]: a float32 (or narrower) result needs ~1e-8 relative, not the
# double-precision pieces above; Cephes' rational approximations (Moshier, ``ndtr.c``), evaluated
# in float64 with a plain ``exp(-x²)`` (relative error ~1e-14 at |x| = 8, far below float32's
# rounding), cost about a third of the Chebyshev series: ``x T(x²) / U(x²)`` below 1, then
# ``exp(-x²) P(x) / Q(x)`` to 8 and ``exp(-x²) R(x) / S(x)`` past it. gelu on float32 activations
# is where this is paid once per element per step.
_ERF_T = (9.60497373987051638749E0, 9.00260197203842689217E1, 2.23200534594684319226E3, 7.00332514112805075473E3,
          5.55923013010394962768E4)
_ERF_U = (1.0, 3.35617141647503099647E1, 5.21357949780152679795E2, 4.59432382970980127987E3,
          2.26290000613890934246E4, 4.92673942608635921086E4)
_ERFC_P = (2.46196981473530512524E-10, 5.64189564831068821977E-1, 7.46321056442269912687E0, 4.86371970985681366614E1,
           1.96520832956077098242E2, 5.26445194995477358631E2, 9.34528527171957607540E2, 1.02755188689515710272E3,
           5.57535335369399327526E2)
_ERFC_Q = (1.0, 1.32281951154744992508E1, 8.67072140885989742329E1, 3.54937778887819891062E2,
           9.75708501743205489753E2, 1.82390916687909736289E3, 2.24633760818710981792E3, 1.65666309194161350182E3,
           5.57535340817727675546E2)
_ERFC_R = (5.64189583547755073984E-1, 1.27536670759978104416E0, 5.01905042251180477414E0, 6.16021097993053585195E0,
           7.40974269950448939160E0, 2.97886665372100240670E0)
_ERFC_S = (1.0, 2.26052863220117276590E0, 9.39603524938001434673E0, 1.20489539808096656605E1,
           1.70814450747565897222E1, 9.60896809063285878198E0, 3.36907645100081516050E0)


def _horner(coefficients: tuple[float, ...], t: Any) -> Any:
    """Σ c_j t^(n - j), highest power first, in place in one new array (each fresh temporary of a
    large array costs page faults)."""
    out = coefficients[0] * t
    out += coefficients[1]
    for c in coefficients[2:]:
        out *= t
        out += c
    return out


def _erf_below_one(xp: Any, x: Any) -> Any:
    z = x * x
    return x * _horner(_ERF_T, z) / _horner(_ERF_U, z)


def _erfc_above_one(xp: Any, a: Any) -> Any:
    """erfc(a) for a 1-D float64 ``a >= 1`` (past 27 it is below the smallest double)."""
    a = xp.clip(a, None, 27.0)
    out = xp.empty_like(a)
    near = a < 8.0
    _fill(xp, out, a, near, lambda v: xp.exp(-(v * v)) * (_horner(_ERFC_P, v) / _horner(_ERFC_Q, v)))
    _fill(xp, out, a, xp.logical_not(near), lambda v: xp.exp(-(v * v)) * (_horner(_ERFC_R, v) / _horner(_ERFC_S, v)))
    return out


def erf_single(xp: Any, x: Any) -> Any:
    """erf of a float64 array to single precision (Note [erf to single precision]): both pieces on
    every element, in place, and one ``where``: no boolean-mask copies (each large temporary costs
    page faults). Past 8 erf is 1 to double precision, so the tail's argument is clamped to
    [1, 8] (NaN stays NaN)."""
    z = x * x
    small = _horner(_ERF_T, z)
    small *= x
    small /= _horner(_ERF_U, z)
    a = xp.minimum(xp.maximum(xp.abs(x), 1.0), 8.0)  # not ``clip``: numpy's is 10x slower
    tail = _horner(_ERFC_P, a)
    tail /= _horner(_ERFC_Q, a)
    a *= -a
    # exp(-a²) in float32 (numpy's float64 exp is scalar libm, 10x slower): its relative error
    # 6e-8 is erfc's, an absolute error in erf below 1e-8 (erfc < 0.16 here)
    tail *= xp.exp(xp.astype(a, xp.float32))
    tail -= 1.0
    tail = xp.copysign(tail, x)  # sign(x) * |erfc(|x|) - 1|
    return xp.where(z < 1.0, small, tail)


def erfc_single(xp: Any, x: Any) -> Any:
    """erfc of a float64 array to single precision (Note [erf to single precision])."""
    return _flat(xp, lambda v: _erfc_by_parts(xp, v, 1.0, _erf_below_one, _erfc_above_one), x)


# --------------------------------------------------------------------------- erfcx, modified Bessel I0, I1
def erfcx(xp: Any, x: Any) -> Any:
    """The scaled complementary error function exp(x²) erfc(x) of a float64 array: exp(x²) erfc(x)
    as it stands below |x| = 0.5, ``_erfcx`` above, and ``2 exp(x²) - erfcx(-x)`` for negative x
    (inf once exp(x²) overflows, as torch's)."""
    def one_d(v: Any) -> Any:
        a = xp.abs(v)
        out = xp.full_like(v, math.nan)
        _fill(xp, out, v, a < 0.5, lambda u: xp.exp(u * u) * (1 - _erf_small(xp, u)))
        _fill(xp, out, v, v >= 0.5, lambda u: _erfcx(xp, u))
        _fill(xp, out, v, v <= -0.5, lambda u: 2 * xp.exp(u * u) - _erfcx(xp, -u))
        return out

    return _flat(xp, one_d, x)
