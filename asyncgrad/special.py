"""``ag.special``: torch.special's names (ops/special.py computes the ones of its own; the others
are the elementwise ops under torch.special's aliases)."""

from asyncgrad.ops.elementwise import erf, erfc, erfinv, exp2, expm1, log1p, polygamma, sigmoid, xlogy
from asyncgrad.ops.reduction import log_softmax, logsumexp, softmax
from asyncgrad.ops.special import entr, erfcx, i0e, i1, i1e, log_ndtr, ndtr, ndtri, xlog1py

expit = sigmoid

__all__ = ["entr", "erf", "erfc", "erfcx", "erfinv", "exp2", "expit", "expm1", "i0e", "i1", "i1e", "log1p",
           "log_ndtr", "log_softmax", "logsumexp", "ndtr", "ndtri", "polygamma", "softmax", "xlog1py", "xlogy"]
