"""Every differentiable op, grouped by family; this module installs them as Tensor methods.

One op lives in one place: its forward function and its backward node side by side in the
family module (``elementwise``, ``reduction``, ``shape``, ``indexing``, ``linalg``, ``nn``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from asyncgrad import dtypes
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
           "tensor_math", "views", "_node"]


def _inplace_method(compute, name: str):
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
    return method


def _operator(fn):
    """The operator form of an op outside the binary table (``@``): Note [The binary table]."""
    return elementwise._number_first(fn, None, None, True)


_FILL_VALUES = (bool, int, float, np.bool_, np.integer, np.floating)


def _broadcasts_to(shape: tuple, target: tuple) -> bool:
    try:
        return np.broadcast_shapes(shape, target) == target
    except ValueError:  # index_put words the mismatch as torch does
        return False


def _setitem(self: Tensor, index: Any, value: Any) -> None:
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


def _to(dtype):
    def convert(self: Tensor, memory_format: Any = shape.preserve_format) -> Tensor:
        return self.to(dtype, memory_format=memory_format)

    return convert


_METHODS = {
    **elementwise.FUNCTIONS, **elementwise.OPERATORS,  # the binary table (Note [The binary table])
    "__matmul__": _operator(linalg.matmul), "__rmatmul__": _operator(lambda a, b: linalg.matmul(b, a)),
    "matmul": linalg.matmul,
    "__neg__": elementwise.neg, "neg": elementwise.neg, "__abs__": elementwise.abs, "abs": elementwise.abs,
    "__invert__": elementwise.logical_not,
    "exp": elementwise.exp, "log": elementwise.log, "sqrt": elementwise.sqrt, "sin": elementwise.sin,
    "cos": elementwise.cos, "log1p": elementwise.log1p,
    "tanh": elementwise.tanh, "sigmoid": elementwise.sigmoid, "relu": elementwise.relu,
    "sign": elementwise.sign, "clamp": elementwise.clamp, "clip": elementwise.clamp,
    "sum": reduction.sum, "mean": reduction.mean, "max": reduction.max, "min": reduction.min,
    "argmax": reduction.argmax, "argmin": reduction.argmin,
    "softmax": reduction.softmax, "log_softmax": reduction.log_softmax,
    "reshape": shape.reshape, "view": shape.view, "flatten": shape.flatten, "unsqueeze": shape.unsqueeze,
    "squeeze": shape.squeeze, "expand": shape.expand, "expand_as": shape.expand_as,
    "permute": shape.permute, "transpose": shape.transpose, "t": shape.t,
    "T": property(shape.numpy_T), "mT": property(shape.mT),
    "clone": shape.clone, "contiguous": shape.contiguous, "to": shape.to, "cpu": shape.to_cpu, "cuda": shape.to_cuda,
    "__getitem__": indexing.getitem, "__setitem__": _setitem,
    "float": _to(dtypes.float32), "double": _to(dtypes.float64), "long": _to(dtypes.int64),
    "int": _to(dtypes.int32), "bool": _to(dtypes.bool), "half": _to(dtypes.float16),
    **{name + "_": _inplace_method(elementwise.FUNCTIONS[name], name + "_") for name, _ in elementwise.IN_PLACE},
    **{"__i" + dunder[2:]: _operator(_inplace_method(elementwise.FUNCTIONS[name], name + "_"))
       for name, dunder in elementwise.IN_PLACE},  # __iadd__ ... __itruediv__
    "clamp_": _inplace_method(elementwise.clamp, "clamp_"), "relu_": _inplace_method(elementwise.relu, "relu_"),
    "fill_": _inplace_method(inplace.filled, "fill_"), "zero_": _inplace_method(inplace.zeroed, "zero_"),
    "copy_": _inplace_method(inplace.copied, "copy_"),
    # pointwise math, the matmul family, norms
    "reciprocal": elementwise.reciprocal, "expm1": elementwise.expm1, "rsqrt": elementwise.rsqrt,
    "square": elementwise.square, "floor": elementwise.floor, "ceil": elementwise.ceil, "round": elementwise.round,
    "trunc": elementwise.trunc, "tan": elementwise.tan, "atan": elementwise.atan, "asin": elementwise.asin,
    "acos": elementwise.acos, "sinh": elementwise.sinh, "cosh": elementwise.cosh, "erf": elementwise.erf,
    "erfc": elementwise.erfc, "erfinv": elementwise.erfinv, "log2": elementwise.log2, "log10": elementwise.log10,
    "exp2": elementwise.exp2, "logit": elementwise.logit, "isnan": elementwise.isnan, "isinf": elementwise.isinf,
    "isfinite": elementwise.isfinite, "arctan2": elementwise.atan2, "signbit": elementwise.signbit,
    "count_nonzero": reduction.count_nonzero,
    "clamp_min": elementwise.clamp_min, "clamp_max": elementwise.clamp_max, "lerp": elementwise.lerp,
    "greater": elementwise.gt, "less": elementwise.lt, "greater_equal": elementwise.ge,
    "less_equal": elementwise.le, "not_equal": elementwise.ne,
    "isclose": elementwise.isclose, "allclose": elementwise.allclose, "equal": elementwise.equal,
    "mm": linalg.mm, "bmm": linalg.bmm, "dot": linalg.dot, "mv": linalg.mv, "outer": linalg.outer,
    "addmm": linalg.addmm, "baddbmm": linalg.baddbmm, "norm": linalg.norm,
    "inverse": linalg.inv, "det": linalg.det, "slogdet": linalg.slogdet,
    # linear algebra: decompositions, triangular solves, torch's legacy methods
    "cholesky": linalg.cholesky_legacy, "cholesky_solve": linalg.cholesky_solve,
    "cholesky_inverse": linalg.cholesky_inverse, "triangular_solve": linalg.triangular_solve,
    "eig": linalg.eig, "symeig": linalg.symeig, "svd": linalg.svd_legacy, "pinverse": linalg.pinverse,
    "logdet": linalg.logdet, "matrix_power": linalg.matrix_power, "matrix_exp": linalg.matrix_exp,
    "kron": linalg.kron, "cross": linalg.cross, "qr": linalg.qr_legacy,
    # indexing: gather/scatter, index_select/index_add, masks, sorting, scans and reductions
    "gather": indexing.gather, "scatter": indexing.scatter, "scatter_add": indexing.scatter_add,
    "scatter_": _inplace_method(indexing.scatter, "scatter_"),
    "scatter_add_": _inplace_method(indexing.scatter_add, "scatter_add_"),
    "index_select": indexing.index_select, "index_add": indexing.index_add,
    "index_add_": _inplace_method(indexing.index_add, "index_add_"),
    "masked_fill": indexing.masked_fill, "masked_fill_": _inplace_method(indexing.masked_fill, "masked_fill_"),
    "masked_select": indexing.masked_select, "nonzero": indexing.nonzero,
    "sort": sorting.sort, "argsort": sorting.argsort, "topk": sorting.topk, "kthvalue": sorting.kthvalue,
    "median": sorting.median, "nanmedian": sorting.nanmedian, "unique": sorting.unique,
    "cumsum": reduction.cumsum, "cumprod": reduction.cumprod, "prod": reduction.prod,
    "var": reduction.var, "std": reduction.std, "logsumexp": reduction.logsumexp,
    "amax": reduction.amax, "amin": reduction.amin, "any": reduction.any, "all": reduction.all,
}

# views, shape ops, in-place unary ops, new and data_ptr (ops/views.py, ops/shape.py, ops/inplace.py)
_UNARY_INPLACE = ("neg", "exp", "log", "log1p", "sqrt", "sin", "cos", "tanh", "sigmoid", "reciprocal", "abs", "sign")
"""The rows of elementwise's unary table with torch's in-place method (``relu_`` is above)."""

_METHODS.update({
    "narrow": views.narrow, "select": views.select, "unbind": views.unbind, "split": views.split,
    "split_with_sizes": views.split_with_sizes, "chunk": views.chunk, "diagonal": views.diagonal,
    "movedim": views.movedim, "moveaxis": views.movedim, "unflatten": views.unflatten, "view_as": views.view_as,
    "as_strided": views.as_strided, "_base": property(views.base_of), "new": views.new, "__iter__": views.iterate,
    "data_ptr": views.data_ptr,
    "repeat": shape.repeat, "tile": shape.tile, "flip": shape.flip, "roll": shape.roll, "tril": shape.tril,
    "triu": shape.triu, "diag": shape.diag,
    "tril_": _inplace_method(shape.tril, "tril_"), "triu_": _inplace_method(shape.triu, "triu_"),
    **{name + "_": _inplace_method(getattr(elementwise, name), name + "_") for name in _UNARY_INPLACE},
})

# ops-misc: storage and type methods, the unsafe_ splits, logcumsumexp, nansum, put (ops/misc.py, ops/views.py)
_METHODS.update({
    "set_": misc.set_, "resize_": misc.resize_, "resize_as_": misc.resize_as_, "resize": misc.resize,
    "type": misc.type, "type_as": misc.type_as, "element_size": misc.element_size,
    "nbytes": property(misc.nbytes), "itemsize": property(misc.itemsize),
    "unsafe_split": views.unsafe_split, "unsafe_split_with_sizes": views.unsafe_split_with_sizes,
    "unsafe_chunk": views.unsafe_chunk, "logcumsumexp": misc.logcumsumexp, "nansum": misc.nansum,
    "put": misc.put, "put_": _inplace_method(misc.put, "put_"),
    "index_fill": misc.index_fill, "index_fill_": _inplace_method(misc.index_fill, "index_fill_"),
    "index_copy": misc.index_copy, "index_copy_": _inplace_method(misc.index_copy, "index_copy_"),
    "masked_scatter": misc.masked_scatter, "masked_scatter_": _inplace_method(misc.masked_scatter, "masked_scatter_"),
    "index_put": misc.index_put, "index_put_": _inplace_method(misc.index_put, "index_put_"),
})

# torch port, items 121-180 (tests/torch_parity/test_torch_internals.py): view queries (ops/views.py)
_METHODS.update({"_is_view": views.is_view, "storage_offset": views.storage_offset})

# strides and memory formats (asyncgrad/_layout.py; clone/contiguous/to take memory_format= in ops/shape.py)
_METHODS.update({"stride": shape.stride, "is_contiguous": shape.is_contiguous})

# opt: addcmul/addcdiv and the in-place forms optimizers step with (ops/elementwise.py; Note [In place
# without a temporary] in ops/inplace.py)
_METHODS.update({
    "addcmul": elementwise.addcmul, "addcdiv": elementwise.addcdiv,
    "addcmul_": _inplace_method(elementwise.addcmul, "addcmul_"),
    "addcdiv_": _inplace_method(elementwise.addcdiv, "addcdiv_"),
    "lerp_": _inplace_method(elementwise.lerp, "lerp_"),
})

# the rest of torch's pointwise math: inverse hyperbolics, angle conversions, gamma and Bessel functions
_NEW_UNARY = ("acosh", "asinh", "atanh", "deg2rad", "rad2deg", "frac", "sinc", "sgn", "lgamma", "digamma", "i0")
_METHODS.update({
    **{name: getattr(elementwise, name) for name in _NEW_UNARY},
    **{name + "_": _inplace_method(getattr(elementwise, name), name + "_") for name in _NEW_UNARY},
    "arccosh": elementwise.acosh, "arcsinh": elementwise.asinh, "arctanh": elementwise.atanh,
    "polygamma": lambda self, n: elementwise.polygamma(n, self),
    "polygamma_": _inplace_method(lambda self, n: elementwise.polygamma(n, self), "polygamma_"),
    "mvlgamma": elementwise.mvlgamma, "mvlgamma_": _inplace_method(elementwise.mvlgamma, "mvlgamma_"),
    "nan_to_num": elementwise.nan_to_num, "nan_to_num_": _inplace_method(elementwise.nan_to_num, "nan_to_num_"),
    "positive": elementwise.positive,
})

# torch's composite ops (ops/composites.py) and the rest of torch.*'s differentiable ops that Tensor has
_METHODS.update({
    **{name: getattr(composites, name) for name in (
        "broadcast_to", "sum_to_size", "ravel", "reshape_as", "fliplr", "flipud", "tensor_split", "hsplit",
        "vsplit", "dsplit", "msort", "take_along_dim", "repeat_interleave", "inner", "cov", "corrcoef", "nanmean",
        "diff", "diagflat", "float_power")},
    "H": property(composites.H), "mH": property(composites.mH),
    "float_power_": _inplace_method(composites.float_power, "float_power_"),
    "rot90": shape.rot90, "diag_embed": shape.diag_embed,
    "vdot": linalg.vdot, "trace": linalg.trace, "addmv": linalg.addmv, "addr": linalg.addr, "addbmm": linalg.addbmm,
    "addmv_": _inplace_method(linalg.addmv, "addmv_"), "addr_": _inplace_method(linalg.addr, "addr_"),
    "addbmm_": _inplace_method(linalg.addbmm, "addbmm_"), "dist": linalg.dist, "renorm": linalg.renorm,
    "renorm_": _inplace_method(linalg.renorm, "renorm_"),
    "nanmedian": sorting.nanmedian, "mode": sorting.mode, "cummax": sorting.cummax, "cummin": sorting.cummin,
    "aminmax": sorting.aminmax,
    "select_scatter": views.select_scatter, "slice_scatter": views.slice_scatter,
    "diagonal_scatter": views.diagonal_scatter, "as_strided_scatter": views.as_strided_scatter,
    "unfold": views.unfold, "frexp": elementwise.frexp, "take": indexing.take,
    "scatter_reduce": indexing.scatter_reduce, "index_reduce": indexing.index_reduce,
    "scatter_reduce_": _inplace_method(indexing.scatter_reduce, "scatter_reduce_"),
    "index_reduce_": _inplace_method(indexing.index_reduce, "index_reduce_"),
    "quantile": composites.quantile, "nanquantile": composites.nanquantile,
    "__rdiv__": _operator(elementwise.rdiv),
    "__rmod__": _operator(lambda self, other: elementwise.remainder(other, self)),
})

for _name, _fn in _METHODS.items():
    setattr(Tensor, _name, _fn)
