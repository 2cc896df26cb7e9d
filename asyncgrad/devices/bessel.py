"""The modified Bessel functions I0 and I1, and their scaled forms, in Array API terms, in float64.

As erf (devices/special.py) and the gamma functions (devices/gamma.py): written once against
``xp``, called by the backends in float64 and cast back; CuPy's backend uses cupyx's kernels.

Note [Bessel functions to double precision]
The scaled functions ``i0e(x) = exp(-|x|) I0(x)`` and ``i1e(x) = exp(-|x|) I1(x)`` are smooth and
bounded, so each is one Chebyshev series per interval: on ``|x| <= 8`` in ``t = |x|/4 - 1``
(``i1e(x)/x`` there, which is even), and beyond in ``t = 16/|x| - 1`` of ``sqrt(|x|) i0e(x)``
(resp. ``i1e``), which tends to ``1/sqrt(2π)``. The coefficients ``c_j = (2/N) Σ_k f(x_k) cos(j θ_k)``
were computed at the ``N = 48`` Chebyshev points ``θ_k = π (k + 1/2) / N`` (``c_0`` halved), ``f``
evaluated with mpmath at 40 digits, and cut where they fall below 1e-18; they are summed by
Clenshaw's recurrence. I0 and I1 are the scaled values times ``exp(|x|)``: they overflow to inf past
|x| = 713, as torch's do; I1 is odd, I0 even.
"""

from __future__ import annotations

from typing import Any

from asyncgrad.devices.special import _clenshaw

_I0E_SMALL = (
    0.33839763720473803, -0.3046826723431984, 0.17162090152220877, -0.09490109704804764, 0.04930528423967071,
    -0.02373741480589947, 0.010546460394594998, -0.004324309995050576, 0.0016394756169413357,
    -0.0005763755745385824, 0.00018850288509584165, -5.754195010082104e-05, 1.6448448070728896e-05,
    -4.4167383584587505e-06, 1.1173875391201037e-06, -2.670793853940612e-07, 6.046995022541919e-08,
    -1.300025009986248e-08, 2.6598237246823866e-09, -5.189795601635263e-10, 9.675809035373237e-11,
    -1.726826291441556e-11, 2.95505266312964e-12, -4.856446783111929e-13, 7.676185498604936e-14,
    -1.1685332877993451e-14, 1.715391285555133e-15, -2.431279846547955e-16, 3.3307945188222384e-17,
    -4.4153416464793395e-18,
)
_I1E_SMALL = (
    0.12629359322181682, -0.17641651835783406, 0.1026436586898471, -0.05294598120809499, 0.024726449030626516,
    -0.010564084894626197, 0.004156422944312888, -0.0015135724506312532, 0.0005122859561685758,
    -0.00016176081582589674, 4.781565107550054e-05, -1.3273163656039436e-05, 3.4702513081376785e-06,
    -8.568720264695455e-07, 2.0032947535521353e-07, -4.445059128796328e-08, 9.381537386495773e-09,
    -1.8872497517228294e-09, 3.625590281552117e-10, -6.663489723502027e-11, 1.1736186298890901e-11,
    -1.9839743977649436e-12, 3.223793365945575e-13, -5.042185504727912e-14, 7.600684294735408e-15,
    -1.1055969477353862e-15, 1.5536319577362005e-16, -2.111421214358166e-17, 2.7779141127610464e-18,
)
_I0E_LARGE = (
    0.4022452055070544, 0.0033691164782556943, 6.889758346916825e-05, 2.8913705208347567e-06,
    2.0489185894690638e-07, 2.266668990498178e-08, 3.3962320257083865e-09, 4.94060238822497e-10,
    1.1889147107846439e-11, -3.1499165279632416e-11, -1.3215811840447713e-11, -1.7941785315068062e-12,
    7.180124451383666e-13, 3.8527783827421426e-13, 1.54008621752141e-14, -4.150569347287222e-14,
    -9.554846698828307e-15, 3.8116806693526224e-15, 1.7725601330565263e-15, -3.425485619677219e-16,
    -2.8276239805165836e-16, 3.461222867697461e-17, 4.46562142029676e-17, -4.830504485944178e-18,
    -7.23318048787476e-18, 9.921475412173676e-19, 1.1936508908460063e-18,
)
_I1E_LARGE = (
    0.38928811750914005, -0.009761097491361469, -0.00011058893876262371, -3.882564808877691e-06,
    -2.512236237870209e-07, -2.6314688468895196e-08, -3.835380385964237e-09, -5.589743462196584e-10,
    -1.8974958123505413e-11, 3.2526035830154884e-11, 1.4125807436613782e-11, 2.0356285441470896e-12,
    -7.198551776245908e-13, -4.0835511110921974e-13, -2.1015418427726643e-14, 4.272440016711951e-14,
    1.0420276984128802e-14, -3.8144030724370075e-15, -1.8803547755107825e-15, 3.3082023109209285e-16,
    2.96262899764595e-16, -3.209525921993424e-17, -4.650305368489358e-17, 4.414348323071704e-18,
    7.517296310842111e-18, -9.314178867326863e-19, -1.2421932751949152e-18,
)


def _scaled(xp: Any, x: Any, small: tuple[float, ...], large: tuple[float, ...], odd: bool) -> Any:
    a = xp.abs(x)
    near = _clenshaw(xp, small, xp.clip(a, None, 8.0) / 4.0 - 1.0)
    if odd:
        near = near * a
    big = xp.where(a > 8.0, a, 8.0)
    far = _clenshaw(xp, large, 16.0 / big - 1.0) / xp.sqrt(big)
    out = xp.where(a > 8.0, far, near)  # NaN (which compares False) takes the series near 0, giving NaN
    return xp.where(x < 0, -out, out) if odd else out


def i0e(xp: Any, x: Any) -> Any:
    """exp(-|x|) I0(x) of a float64 array (Note [Bessel functions to double precision])."""
    return _scaled(xp, x, _I0E_SMALL, _I0E_LARGE, False)


def i1e(xp: Any, x: Any) -> Any:
    """exp(-|x|) I1(x) of a float64 array (Note [Bessel functions to double precision])."""
    return _scaled(xp, x, _I1E_SMALL, _I1E_LARGE, True)


def i0(xp: Any, x: Any) -> Any:
    """The modified Bessel function of the first kind, order 0, of a float64 array."""
    return i0e(xp, x) * xp.exp(xp.abs(x))


def i1(xp: Any, x: Any) -> Any:
    """The modified Bessel function of the first kind, order 1, of a float64 array."""
    return i1e(xp, x) * xp.exp(xp.abs(x))
