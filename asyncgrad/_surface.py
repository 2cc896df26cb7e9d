"""Tensor's surface: every method, property and attribute a ``Tensor`` has after ``import asyncgrad``,
where it comes from, and how a type checker sees it; ``install()`` puts them on the class.

Note [One declaration of Tensor's surface]: ``Tensor`` (tensor.py) sits below the ops and the
engine, so its operators, math methods and ``backward`` cannot be written in its class body. They
are declared here, in ``SURFACE``, and installed by ``install()`` when ``import asyncgrad`` imports
this module, its first import: no other module sets an attribute on ``Tensor``. The class body's own
members are declared here too (as ``CLASS``), so that ``SURFACE`` names the whole surface and
``asyncgrad/tensor.pyi`` is generated from it (``python -m tools.gen_tensor_stub``;
``tests/docs_and_examples/test_typing.py`` fails when the committed stub is stale or ``SURFACE``
misses a member). Each installed value is the op's own function set as a plain class attribute, with
nothing between the method lookup and the op (workload W1, ``python -m benchmarks --only W1``, is
made of such calls)."""

# A row is ``(name, value)`` or ``(name, value, types)``. ``types`` is how the stub declares it:
#
# * a method, by default: the runtime's parameters (``inspect.signature``; the first is ``self``),
#   each ``Any``, returning ``Tensor``; ``"dim: int, keepdim: bool -> ReductionResult"`` annotates
#   the named parameters and the return (a name the runtime lacks is skipped: a table's rows share one
#   string);
# * ``"(other: _Operand, /) -> Tensor"`` (starting with ``(``): the whole signature after ``self``,
#   for a method whose runtime takes ``(*args, **kwargs)``; a tuple of them: the ``@overload``s;
# * a property, a slot or a class constant: its type.
#
# Annotations name the aliases of the stub's ``HEADER`` (tools/gen_tensor_stub.py) and the builtins
# by their plain names (``int``: the generator writes ``builtins.int`` where a method of the same
# name would shadow it). A trailing ``# ...`` is copied to the stub's line (``# type: ignore[misc]``).

from __future__ import annotations

from typing import Any, NamedTuple

from asyncgrad import constructors, dtypes, factories
from asyncgrad.autograd import api
from asyncgrad.ops import (
    UNARY_INPLACE,
    composites,
    dtype_method,
    elementwise,
    indexing,
    inplace,
    inplace_method,
    inplace_views,
    linalg,
    linalg_composed,
    lu,
    misc,
    operator_form,
    reduction,
    setitem,
    shape,
    sorting,
    views,
)
from asyncgrad.tensor import Tensor, _data_property


class _Class:
    def __repr__(self) -> str:
        return "CLASS"


CLASS: Any = _Class()
"""The value of a row that ``Tensor``'s class body (tensor.py) defines itself: declared, not installed."""


class Member(NamedTuple):
    name: str
    value: Any
    types: str | tuple[str, ...] = ""


class Group(NamedTuple):
    title: str
    """Where the members come from (a section of the stub)."""
    members: tuple[Member, ...]


def _group(title: str, *rows: tuple) -> Group:
    return Group(title, tuple(Member(*row) for row in rows))


_OPERAND = "other: _Operand, b: _Operand, alpha: _Scalar"
"""The binary table's rows: one of these names is each row's other operand."""


def _binary_types(name: str) -> str:
    if name in ("__eq__", "__ne__"):  # ``t == None`` is False: object, and torch's override of object's
        return "other: object  # type: ignore[override]"
    if name in ("__lt__", "__le__", "__gt__", "__ge__"):
        # ``array < t`` runs ``t.__gt__`` (numpy defers to ``__array_priority__``), while numpy's stubs
        # claim it for ndarray (``t`` has ``__array__``): mypy calls that overlap unsafe
        return "other: _Operand  # type: ignore[misc]"
    return _OPERAND


_NEW_UNARY = ("acosh", "asinh", "atanh", "deg2rad", "rad2deg", "frac", "sinc", "sgn", "lgamma", "digamma", "i0")
_COMPOSITES = ("broadcast_to", "sum_to_size", "ravel", "reshape_as", "fliplr", "flipud", "tensor_split", "hsplit",
               "vsplit", "dsplit", "msort", "take_along_dim", "repeat_interleave", "inner", "cov", "corrcoef",
               "nanmean", "diff", "diagflat", "float_power")
_SPLITS = ("tensor_split", "hsplit", "vsplit", "dsplit")
_NEW = "size: _Size, dtype: _DType | None, device: _DeviceLike | None, requires_grad: bool"
"""The keywords of ``new_zeros`` and its kin; ``new_tensor`` has no ``size``."""


SURFACE: tuple[Group, ...] = (
    _group(
        "state (tensor.py)",
        ("__init__", CLASS, "data: Any, dtype: npt.DTypeLike | None, device: _DeviceLike | None, "
                            "requires_grad: bool -> None"),
        ("__hash__", CLASS, "-> int"),
        ("data", _data_property, "Any"),
        ("device", CLASS, "Device"),
        ("grad_fn", CLASS, "Node | None"),
        ("output_nr", CLASS, "int"),
        ("__array_priority__", CLASS, "ClassVar[int]"),
    ),
    _group(
        "metadata (tensor.py)",
        ("shape", CLASS, "Size"),
        ("ndim", CLASS, "int"),
        ("dim", CLASS, "-> int"),
        ("dtype", CLASS, "_AgDType"),
        ("size", CLASS, ("(dim: None = None) -> Size", "(dim: int) -> int")),
        ("numel", CLASS, "-> int"),
        ("__len__", CLASS, "-> int"),
        ("is_floating_point", CLASS, "-> bool"),
        ("is_complex", CLASS, "-> bool"),
        ("is_inference", CLASS, "-> bool"),
        ("is_cuda", CLASS, "bool"),
        ("_version", CLASS, "int"),
    ),
    _group(
        "autograd state (tensor.py)",
        ("requires_grad", CLASS, "bool"),
        ("requires_grad_", CLASS, "requires_grad: bool"),
        ("is_leaf", CLASS, "bool"),
        ("grad", CLASS, "Tensor | None"),
        ("retains_grad", CLASS, "bool"),
        ("retain_grad", CLASS, "-> None"),
        ("register_hook", CLASS, "hook: Callable[[Tensor], Tensor | None] -> RemovableHandle"),
        ("register_post_accumulate_grad_hook", CLASS, "hook: Callable[[Tensor], None] -> RemovableHandle"),
        ("detach", CLASS),
        ("detach_", CLASS),
        ("__deepcopy__", CLASS, "memo: dict[int, Any]"),
        ("__reduce_ex__", CLASS, "protocol: int -> tuple[Any, ...]"),
        ("_grad_fn", CLASS, "Node | None"),
        ("_backward_hooks", CLASS, "dict[Any, Callable[[Tensor], Tensor | None]] | None"),
    ),
    _group(
        "host values (tensor.py)",
        ("numpy", CLASS, "-> npt.NDArray[Any]"),
        ("__array__", CLASS, "dtype: npt.DTypeLike | None, copy: bool | None -> npt.NDArray[Any]"),
        ("item", CLASS, "-> int | float | bool"),
        ("tolist", CLASS, "-> Any"),
        ("__bool__", CLASS, "-> bool"),
        ("__float__", CLASS, "-> float"),
        ("__int__", CLASS, "-> int"),
        ("__index__", CLASS, "-> int"),
        ("__repr__", CLASS, "-> str"),
    ),
    _group(
        "package-internal (tensor.py): not for users; declared so that asyncgrad's own modules type-check",
        ("_data", CLASS, "Any"),
        ("_requires_grad", CLASS, "bool"),
        ("_grad", CLASS, "Tensor | None"),
        ("_vc", CLASS, "list[int]"),
        ("_counter", CLASS, "list[int] | None"),
        ("_extra", CLASS, "_Extra | None"),
        ("_make", CLASS, "(data: Any, device: Device, requires_grad: bool, grad_fn: Node | None, output_nr: int, "
                         "vc: list[int]) -> Tensor"),
        ("_extras", CLASS, "-> _Extra"),
        ("_host_only", CLASS, "-> None"),
    ),
    _group(
        "backward (autograd/api.py)",
        ("backward", api.tensor_backward, "gradient: Tensor | None, retain_graph: bool | None, create_graph: bool, "
                                          "inputs: Tensor | Sequence[Tensor] | None -> EngineCall[None]"),
        ("backward_sync", api.tensor_backward_sync, "gradient: Tensor | None, retain_graph: bool | None, "
                                                    "create_graph: bool, inputs: Tensor | Sequence[Tensor] | None "
                                                    "-> None"),
    ),
    _group(
        "the binary table (ops/elementwise.py, Note [The binary table])",
        *[(name, fn, _OPERAND) for name, fn in elementwise.FUNCTIONS.items() if name not in elementwise.NOT_METHODS],
        *[(name, fn, _binary_types(name)) for name, fn in elementwise.OPERATORS.items()],
        *[(name + "_", inplace_method(elementwise.FUNCTIONS[name], name + "_"),
           "(other: _Operand, /, alpha: _Scalar = 1) -> Tensor" if name in ("add", "sub") else
           "(other: _Operand, /, *, rounding_mode: str | None = None) -> Tensor" if name == "div" else
           "(other: _Operand, /) -> Tensor") for name, _ in elementwise.IN_PLACE],
        *[("__i" + dunder[2:], operator_form(inplace_method(elementwise.FUNCTIONS[name], name + "_")), _OPERAND)
          for name, dunder in elementwise.IN_PLACE if dunder is not None],  # __iadd__ ... __ifloordiv__
        ("arctan2", elementwise.atan2, _OPERAND),
        ("greater", elementwise.gt, _OPERAND),
        ("less", elementwise.lt, _OPERAND),
        ("greater_equal", elementwise.ge, _OPERAND),
        ("less_equal", elementwise.le, _OPERAND),
        ("not_equal", elementwise.ne, _OPERAND),
        ("__rdiv__", operator_form(elementwise.rdiv), _OPERAND),
        ("__rmod__", operator_form(lambda self, other: elementwise.remainder(other, self)), _OPERAND),
    ),
    _group(
        "operators, math, reductions, shape, dtype and device, linear algebra, indexing (ops/elementwise.py, "
        "ops/reduction.py, ops/shape.py, ops/linalg.py, ops/indexing.py, ops/sorting.py; in place: ops/inplace.py)",
        ("__matmul__", operator_form(linalg.matmul), "other: Tensor"),
        ("__rmatmul__", operator_form(lambda a, b: linalg.matmul(b, a)), "other: Tensor"),
        ("matmul", linalg.matmul, "b: Tensor"),
        ("__neg__", elementwise.neg),
        ("neg", elementwise.neg),
        ("__abs__", elementwise.abs),
        ("abs", elementwise.abs),
        ("__invert__", elementwise.logical_not),
        ("exp", elementwise.exp),
        ("log", elementwise.log),
        ("sqrt", elementwise.sqrt),
        ("sin", elementwise.sin),
        ("cos", elementwise.cos),
        ("log1p", elementwise.log1p),
        ("tanh", elementwise.tanh),
        ("sigmoid", elementwise.sigmoid),
        ("relu", elementwise.relu),
        ("sign", elementwise.sign),
        ("clamp", elementwise.clamp, "min: _Operand | None, max: _Operand | None"),
        ("clip", elementwise.clamp, "min: _Operand | None, max: _Operand | None"),
        ("sum", reduction.sum, "dim: _Dims | None, keepdim: bool, dtype: _DType | None"),
        ("mean", reduction.mean, "dim: _Dims | None, keepdim: bool"),
        ("max", reduction.max, (
            "(dim: None = None) -> Tensor",
            "(dim: Tensor) -> Tensor",
            "(dim: int, keepdim: bool = False) -> ReductionResult",
        )),
        ("min", reduction.min, (
            "(dim: None = None) -> Tensor",
            "(dim: Tensor) -> Tensor",
            "(dim: int, keepdim: bool = False) -> ReductionResult",
        )),
        ("argmax", reduction.argmax, "dim: int | None, keepdim: bool"),
        ("argmin", reduction.argmin, "dim: int | None, keepdim: bool"),
        ("softmax", reduction.softmax, "dim: int, dtype: _DType | None"),
        ("log_softmax", reduction.log_softmax, "dim: int, dtype: _DType | None"),
        ("reshape", shape.reshape, "shape: _Size"),
        ("view", shape.view, "shape: _Size"),
        ("flatten", shape.flatten, "start_dim: int, end_dim: int"),
        ("unsqueeze", shape.unsqueeze, "dim: int"),
        ("squeeze", shape.squeeze, "dim: _Dims | None"),
        ("expand", shape.expand, "sizes: _Size"),
        ("expand_as", shape.expand_as, "other: Tensor"),
        ("permute", shape.permute, "dims: _Size"),
        ("transpose", shape.transpose, "dim0: int, dim1: int"),
        ("t", shape.t),
        ("T", property(shape.numpy_T), "Tensor"),
        ("mT", property(shape.mT), "Tensor"),
        ("clone", shape.clone, "memory_format: memory_format"),
        ("contiguous", shape.contiguous, "memory_format: memory_format"),
        ("to", shape.to, (
            "(dtype: _DType, /, *, memory_format: memory_format = ...) -> Tensor",
            "(other: Tensor, /, *, memory_format: memory_format = ...) -> Tensor",
            "(device: _DeviceLike | None = None, dtype: _DType | None = None, *, "
            "memory_format: memory_format = ...) -> Tensor",
        )),
        ("cpu", shape.to_cpu),
        ("cuda", shape.to_cuda, "index: int"),
        ("__getitem__", indexing.getitem, "index: _Index"),
        ("__setitem__", setitem, "index: _Index, value: _Operand -> None"),
        ("float", dtype_method(dtypes.float32), "memory_format: memory_format"),
        ("double", dtype_method(dtypes.float64), "memory_format: memory_format"),
        ("long", dtype_method(dtypes.int64), "memory_format: memory_format"),
        ("int", dtype_method(dtypes.int32), "memory_format: memory_format"),
        ("bool", dtype_method(dtypes.bool), "memory_format: memory_format"),
        ("half", dtype_method(dtypes.float16), "memory_format: memory_format"),
        ("clamp_", inplace_method(elementwise.clamp, "clamp_"),
         "(min: _Operand | None = None, max: _Operand | None = None) -> Tensor"),
        ("relu_", inplace_method(elementwise.relu, "relu_"), "() -> Tensor"),
        ("fill_", inplace_method(inplace.filled, "fill_"), "(value: _Scalar | Tensor, /) -> Tensor"),
        ("zero_", inplace_method(inplace.zeroed, "zero_"), "() -> Tensor"),
        ("copy_", inplace_method(inplace.copied, "copy_"), "(src: Tensor, /) -> Tensor"),
        ("reciprocal", elementwise.reciprocal),
        ("expm1", elementwise.expm1),
        ("rsqrt", elementwise.rsqrt),
        ("square", elementwise.square),
        ("floor", elementwise.floor),
        ("ceil", elementwise.ceil),
        ("round", elementwise.round, "decimals: int"),
        ("trunc", elementwise.trunc),
        ("tan", elementwise.tan),
        ("atan", elementwise.atan),
        ("asin", elementwise.asin),
        ("acos", elementwise.acos),
        ("sinh", elementwise.sinh),
        ("cosh", elementwise.cosh),
        ("erf", elementwise.erf),
        ("erfc", elementwise.erfc),
        ("erfinv", elementwise.erfinv),
        ("log2", elementwise.log2),
        ("log10", elementwise.log10),
        ("exp2", elementwise.exp2),
        ("logit", elementwise.logit, "eps: float | None"),
        ("isnan", elementwise.isnan),
        ("isinf", elementwise.isinf),
        ("isfinite", elementwise.isfinite),
        ("signbit", elementwise.signbit),
        ("count_nonzero", reduction.count_nonzero, "dim: _Dims | None"),
        ("clamp_min", elementwise.clamp_min, "min: _Operand"),
        ("clamp_max", elementwise.clamp_max, "max: _Operand"),
        ("lerp", elementwise.lerp, "end: Tensor, weight: _Scalar | Tensor"),
        ("isclose", elementwise.isclose, "b: Tensor, rtol: float, atol: float, equal_nan: bool"),
        ("allclose", elementwise.allclose, "b: Tensor, rtol: float, atol: float, equal_nan: bool -> bool"),
        ("equal", elementwise.equal, "b: Tensor -> bool"),
        ("mm", linalg.mm, "b: Tensor"),
        ("bmm", linalg.bmm, "b: Tensor"),
        ("dot", linalg.dot, "b: Tensor"),
        ("mv", linalg.mv, "b: Tensor"),
        ("outer", linalg.outer, "b: Tensor"),
        ("addmm", linalg.addmm, "mat1: Tensor, mat2: Tensor, beta: _Scalar, alpha: _Scalar"),
        ("baddbmm", linalg.baddbmm, "batch1: Tensor, batch2: Tensor, beta: _Scalar, alpha: _Scalar"),
        ("norm", linalg.norm, "p: float | str | None, dim: _Dims | None, keepdim: bool, dtype: _DType | None"),
        ("inverse", linalg.inv),
        ("det", linalg.det),
        ("slogdet", linalg.slogdet, "-> SlogdetResult"),
        ("cholesky", linalg.cholesky_legacy, "upper: bool"),
        ("cholesky_solve", linalg.cholesky_solve, "input2: Tensor, upper: bool"),
        ("cholesky_inverse", linalg.cholesky_inverse, "upper: bool"),
        ("triangular_solve", linalg.triangular_solve,
         "A: Tensor, upper: bool, transpose: bool, unitriangular: bool -> TriangularSolveResult"),
        ("eig", linalg.eig, "eigenvectors: bool -> EigResult"),
        ("symeig", linalg.symeig, "eigenvectors: bool, upper: bool -> EighResult"),
        ("svd", linalg.svd_legacy, "some: bool, compute_uv: bool -> LegacySvdResult"),
        ("pinverse", linalg.pinverse, "rcond: float"),
        ("logdet", linalg.logdet),
        ("matrix_power", linalg.matrix_power, "n: int"),
        ("matrix_exp", linalg.matrix_exp),
        ("kron", linalg.kron, "other: Tensor"),
        ("cross", linalg.cross, "other: Tensor, dim: int | None"),
        ("qr", linalg.qr_legacy, "some: bool -> QrResult"),
        ("lu", lu.lu_legacy, "pivot: bool, get_infos: bool -> tuple[Tensor, ...]"),
        ("lu_solve", lu.lu_solve_legacy, "LU_data: Tensor, LU_pivots: Tensor"),
        ("ormqr", linalg_composed.ormqr, "input2: Tensor, input3: Tensor, left: bool, transpose: bool"),
        ("gather", indexing.gather, "dim: int, index: Tensor, sparse_grad: bool"),
        ("scatter", indexing.scatter,
         "dim: int, index: Tensor, src: Tensor | _Scalar | None, value: _Scalar | None, reduce: str | None"),
        ("scatter_add", indexing.scatter_add, "dim: int, index: Tensor, src: Tensor"),
        ("scatter_", inplace_method(indexing.scatter, "scatter_"),
         "(dim: int, index: Tensor, src: Tensor | _Scalar, /, *, reduce: str | None = None) -> Tensor"),
        ("scatter_add_", inplace_method(indexing.scatter_add, "scatter_add_"),
         "(dim: int, index: Tensor, src: Tensor, /) -> Tensor"),
        ("index_select", indexing.index_select, "dim: int, index: Tensor"),
        ("index_add", indexing.index_add, "dim: int, index: Tensor, source: Tensor, alpha: _Scalar"),
        ("index_add_", inplace_method(indexing.index_add, "index_add_"),
         "(dim: int, index: Tensor, source: Tensor, /, *, alpha: _Scalar = 1) -> Tensor"),
        ("masked_fill", indexing.masked_fill, "mask: Tensor, value: _Scalar | Tensor"),
        ("masked_fill_", inplace_method(indexing.masked_fill, "masked_fill_"),
         "(mask: Tensor, value: _Scalar | Tensor, /) -> Tensor"),
        ("masked_select", indexing.masked_select, "mask: Tensor"),
        ("nonzero", indexing.nonzero, (
            "(*, as_tuple: Literal[False] = False) -> Tensor",
            "(*, as_tuple: Literal[True]) -> tuple[Tensor, ...]",
        )),
        ("sort", sorting.sort, "dim: int, descending: bool, stable: bool -> ReductionResult"),
        ("argsort", sorting.argsort, "dim: int, descending: bool, stable: bool"),
        ("topk", sorting.topk, "k: int, dim: int, largest: bool, sorted: bool -> ReductionResult"),
        ("kthvalue", sorting.kthvalue, "k: int, dim: int, keepdim: bool -> ReductionResult"),
        ("median", sorting.median, (
            "(dim: None = None) -> Tensor",
            "(dim: int, keepdim: bool = False) -> ReductionResult",
        )),
        ("nanmedian", sorting.nanmedian, (
            "(dim: None = None) -> Tensor",
            "(dim: int, keepdim: bool = False) -> ReductionResult",
        )),
        ("unique", sorting.unique, "sorted: bool, return_inverse: bool, return_counts: bool, dim: int | None -> Any"),
        ("cumsum", reduction.cumsum, "dim: int, dtype: _DType | None"),
        ("cumprod", reduction.cumprod, "dim: int, dtype: _DType | None"),
        ("prod", reduction.prod, "dim: int | None, keepdim: bool, dtype: _DType | None"),
        ("var", reduction.var,
         "dim: _Dims | bool | None, unbiased: bool | None, keepdim: bool, correction: float | None"),
        ("std", reduction.std,
         "dim: _Dims | bool | None, unbiased: bool | None, keepdim: bool, correction: float | None"),
        ("logsumexp", reduction.logsumexp, "dim: _Dims, keepdim: bool"),
        ("amax", reduction.amax, "dim: _Dims, keepdim: bool"),
        ("amin", reduction.amin, "dim: _Dims, keepdim: bool"),
        ("any", reduction.any, "dim: _Dims | None, keepdim: bool"),
        ("all", reduction.all, "dim: _Dims | None, keepdim: bool"),
    ),
    _group(
        "views, shape ops, in-place unary ops, new and data_ptr (ops/views.py, ops/shape.py)",
        ("narrow", views.narrow, "dim: int, start: int | Tensor, length: int"),
        ("select", views.select, "dim: int, index: int | Tensor"),
        ("unbind", views.unbind, "dim: int -> tuple[Tensor, ...]"),
        ("split", views.split, "split_size_or_sections: int | Sequence[int], dim: int -> tuple[Tensor, ...]"),
        ("split_with_sizes", views.split_with_sizes, "split_sizes: Sequence[int], dim: int -> tuple[Tensor, ...]"),
        ("chunk", views.chunk, "chunks: int, dim: int -> tuple[Tensor, ...]"),
        ("diagonal", views.diagonal, "offset: int, dim1: int, dim2: int"),
        ("movedim", views.movedim, "source: _Dims, destination: _Dims"),
        ("moveaxis", views.movedim, "source: _Dims, destination: _Dims"),
        ("unflatten", views.unflatten, "dim: int, sizes: Sequence[int]"),
        ("view_as", views.view_as, "other: Tensor"),
        ("as_strided", views.as_strided, "size: Sequence[int], stride: Sequence[int], storage_offset: int | None"),
        # in place: ops/inplace_views.py (Note [In-place view ops])
        ("t_", inplace_views.t_),
        ("transpose_", inplace_views.transpose_, "dim0: int, dim1: int"),
        ("swapdims", inplace_views.swapdims, "dim0: int, dim1: int"),
        ("swapdims_", inplace_views.swapdims_, "dim0: int, dim1: int"),
        ("swapaxes", inplace_views.swapaxes, "axis0: int, axis1: int"),
        ("swapaxes_", inplace_views.swapaxes_, "axis0: int, axis1: int"),
        ("squeeze_", inplace_views.squeeze_, "dim: _Dims | None"),
        ("unsqueeze_", inplace_views.unsqueeze_, "dim: int"),
        ("as_strided_", inplace_views.as_strided_,
         "size: Sequence[int], stride: Sequence[int], storage_offset: int | None"),
        ("_base", property(views.base_of), "Tensor | None"),
        ("new", views.new, "device: _DeviceLike | None"),
        ("__iter__", views.iterate, "-> Iterator[Tensor]"),
        ("data_ptr", views.data_ptr, "-> int"),
        ("repeat", shape.repeat, "sizes: _Size"),
        ("tile", shape.tile, "dims: _Size"),
        ("flip", shape.flip, "(*dims: _Size) -> Tensor"),
        ("roll", shape.roll, "shifts: _Size, dims: _Size | None"),
        ("tril", shape.tril, "diagonal: int"),
        ("triu", shape.triu, "diagonal: int"),
        ("diag", shape.diag, "diagonal: int"),
        ("tril_", inplace_method(shape.tril, "tril_"), "(diagonal: int = 0) -> Tensor"),
        ("triu_", inplace_method(shape.triu, "triu_"), "(diagonal: int = 0) -> Tensor"),
        *[(name, method, "() -> Tensor") for name, method in UNARY_INPLACE.items()],  # relu_ is above
    ),
    _group(
        "storage and type methods, the unsafe_ splits, logcumsumexp, nansum, put (ops/misc.py, ops/views.py)",
        ("set_", misc.set_, "source: Tensor | None"),
        ("resize_", misc.resize_, "sizes: _Size"),
        ("resize_as_", misc.resize_as_, "the_template: Tensor"),
        ("resize", misc.resize, "sizes: _Size"),
        ("type", misc.type, (
            "(dtype: None = None, non_blocking: bool = False) -> str",
            "(dtype: _DType | str, non_blocking: bool = False) -> Tensor",
        )),
        ("type_as", misc.type_as, "other: Tensor"),
        ("element_size", misc.element_size, "-> int"),
        ("nbytes", property(misc.nbytes), "int"),
        ("itemsize", property(misc.itemsize), "int"),
        ("unsafe_split", views.unsafe_split, "split_size: int, dim: int -> tuple[Tensor, ...]"),
        ("unsafe_split_with_sizes", views.unsafe_split_with_sizes,
         "split_sizes: Sequence[int], dim: int -> tuple[Tensor, ...]"),
        ("unsafe_chunk", views.unsafe_chunk, "chunks: int, dim: int -> tuple[Tensor, ...]"),
        ("logcumsumexp", misc.logcumsumexp, "dim: int"),
        ("nansum", misc.nansum, "dim: _Dims | None, keepdim: bool, dtype: _DType | None"),
        ("put", misc.put, "index: Tensor, source: Tensor, accumulate: bool"),
        ("put_", inplace_method(misc.put, "put_"),
         "(index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor"),
        ("index_fill", misc.index_fill, "dim: int, index: Tensor, value: _Scalar | Tensor"),
        ("index_fill_", inplace_method(misc.index_fill, "index_fill_"),
         "(dim: int, index: Tensor, value: _Scalar | Tensor) -> Tensor"),
        ("index_copy", misc.index_copy, "dim: int, index: Tensor, source: Tensor"),
        ("index_copy_", inplace_method(misc.index_copy, "index_copy_"),
         "(dim: int, index: Tensor, source: Tensor) -> Tensor"),
        ("masked_scatter", misc.masked_scatter, "mask: Tensor, source: Tensor"),
        ("masked_scatter_", inplace_method(misc.masked_scatter, "masked_scatter_"),
         "(mask: Tensor, source: Tensor) -> Tensor"),
        ("index_put", misc.index_put, "indices: Sequence[Tensor | None], values: Tensor, accumulate: bool"),
        ("index_put_", inplace_method(misc.index_put, "index_put_"),
         "(indices: Sequence[Tensor | None], values: Tensor, accumulate: bool = False) -> Tensor"),
    ),
    _group(
        "view queries (ops/views.py)",
        ("_is_view", views.is_view, "-> bool"),
        ("storage_offset", views.storage_offset, "-> int"),
    ),
    _group(
        "strides and memory formats (ops/shape.py over asyncgrad/_layout.py)",
        ("stride", shape.stride, ("(dim: None = None) -> tuple[int, ...]", "(dim: int) -> int")),
        ("is_contiguous", shape.is_contiguous, "memory_format: memory_format -> bool"),
    ),
    _group(
        "addcmul/addcdiv and the in-place forms optimizers step with (ops/elementwise.py, ops/inplace.py)",
        ("addcmul", elementwise.addcmul, "tensor1: Tensor, tensor2: Tensor, value: _Scalar"),
        ("addcdiv", elementwise.addcdiv, "tensor1: Tensor, tensor2: Tensor, value: _Scalar"),
        ("addcmul_", inplace_method(elementwise.addcmul, "addcmul_"),
         "(tensor1: Tensor, tensor2: Tensor, /, *, value: _Scalar = 1) -> Tensor"),
        ("addcdiv_", inplace_method(elementwise.addcdiv, "addcdiv_"),
         "(tensor1: Tensor, tensor2: Tensor, /, *, value: _Scalar = 1) -> Tensor"),
        ("lerp_", inplace_method(elementwise.lerp, "lerp_"), "(end: Tensor, weight: _Scalar | Tensor, /) -> Tensor"),
    ),
    _group(
        "the rest of torch's pointwise math (ops/elementwise.py)",
        *[(name, getattr(elementwise, name)) for name in _NEW_UNARY],
        ("arccosh", elementwise.acosh),
        ("arcsinh", elementwise.asinh),
        ("arctanh", elementwise.atanh),
        ("polygamma", lambda self, n: elementwise.polygamma(n, self), "n: int"),
        ("polygamma_", inplace_method(lambda self, n: elementwise.polygamma(n, self), "polygamma_"),
         "(n: int) -> Tensor"),
        ("mvlgamma", elementwise.mvlgamma, "p: int"),
        ("mvlgamma_", inplace_method(elementwise.mvlgamma, "mvlgamma_"), "(p: int) -> Tensor"),
        ("nan_to_num", elementwise.nan_to_num, "nan: float | None, posinf: float | None, neginf: float | None"),
        ("nan_to_num_", inplace_method(elementwise.nan_to_num, "nan_to_num_"),
         "(nan: float | None = 0.0, posinf: float | None = None, neginf: float | None = None) -> Tensor"),
        ("positive", elementwise.positive),
    ),
    _group(
        "torch's composite ops (ops/composites.py) and the rest of torch.*'s differentiable ops that Tensor has",
        *[(name, getattr(composites, name), "-> tuple[Tensor, ...]" if name in _SPLITS else "")
          for name in _COMPOSITES],
        ("H", property(composites.H), "Tensor"),
        ("mH", property(composites.mH), "Tensor"),
        ("float_power_", inplace_method(composites.float_power, "float_power_")),
        ("rot90", shape.rot90),
        ("diag_embed", shape.diag_embed),
        ("vdot", linalg.vdot),
        ("trace", linalg.trace),
        ("addmv", linalg.addmv),
        ("addr", linalg.addr),
        ("addbmm", linalg.addbmm),
        ("addmv_", inplace_method(linalg.addmv, "addmv_")),
        ("addr_", inplace_method(linalg.addr, "addr_")),
        ("addbmm_", inplace_method(linalg.addbmm, "addbmm_")),
        ("dist", linalg.dist),
        ("renorm", linalg.renorm),
        ("renorm_", inplace_method(linalg.renorm, "renorm_")),
        ("mode", sorting.mode, "-> Any"),
        ("cummax", sorting.cummax, "-> Any"),
        ("cummin", sorting.cummin, "-> Any"),
        ("aminmax", sorting.aminmax, "-> Any"),
        ("select_scatter", views.select_scatter),
        ("slice_scatter", views.slice_scatter),
        ("diagonal_scatter", views.diagonal_scatter),
        ("as_strided_scatter", views.as_strided_scatter),
        ("unfold", views.unfold),
        ("frexp", elementwise.frexp, "-> Any"),
        ("take", indexing.take),
        ("scatter_reduce", indexing.scatter_reduce),
        ("index_reduce", indexing.index_reduce),
        ("scatter_reduce_", inplace_method(indexing.scatter_reduce, "scatter_reduce_")),
        ("index_reduce_", inplace_method(indexing.index_reduce, "index_reduce_")),
        ("quantile", composites.quantile),
        ("nanquantile", composites.nanquantile),
    ),
    _group(
        "random fills and samples (factories.py)",
        ("uniform_", factories.uniform_, "from_: float, to: float, generator: _Generator | None"),
        ("normal_", factories.normal_, "mean: float, std: float, generator: _Generator | None"),
        ("bernoulli_", factories.bernoulli_, "p: float | Tensor, generator: _Generator | None"),
        ("bernoulli", factories.bernoulli, "p: float | None, generator: _Generator | None"),
        ("multinomial", factories.multinomial, "num_samples: int, replacement: bool, generator: _Generator | None"),
    ),
    _group(
        "new tensors like this one (constructors.py)",
        ("new_zeros", constructors.new_zeros, _NEW),
        ("new_ones", constructors.new_ones, _NEW),
        ("new_empty", constructors.new_empty, _NEW),
        ("new_full", constructors.new_full, "fill_value: _Scalar, " + _NEW),
        ("new_tensor", constructors.new_tensor, _NEW),
    ),
)
"""Every member of ``Tensor`` after ``import asyncgrad``, grouped by where it comes from (Note [One
declaration of Tensor's surface])."""


def install() -> None:
    """Set each declared method and property on ``Tensor``; the class body's own members stay as they are."""
    for group in SURFACE:
        for member in group.members:
            if member.value is not CLASS:
                setattr(Tensor, member.name, member.value)


install()
