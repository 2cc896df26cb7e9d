"""Argument checks shared by every public entry point, worded as PyTorch words them.

Why one module: torch's Python argument parser gives every function the same sentences
("zeros(): argument 'size' (position 1) must be tuple of ints, not float"), which users
search for; writing them once keeps them identical everywhere and keeps the ops' hot paths
to a single cheap ``__class__`` or ``type`` test before they call in here.

Note [Complex numbers are refused]: asyncgrad has no complex autograd (torch's conjugate
Wirtinger conventions are not implemented), and numpy would silently drop an imaginary part
on many paths (``np.exp`` of a complex array cast to float32, ``np.full`` with a complex fill
and a float dtype). So every entry point that could let a complex value in (tensor
construction, dtypes, fill values, Python and numpy scalars or arrays mixed into ops) raises
``TypeError`` through ``complex_error``; no tensor of asyncgrad ever holds complex data.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from asyncgrad.dtypes import numpy_dtype

_INT_TYPES = (int, np.integer)


def is_tensor(value: Any) -> bool:
    """``isinstance(value, Tensor)``, asked of the class's lineage by name: this module sits below
    ``tensor.py`` (``grad_mode`` and ``tensor`` itself import it), so it must not import it. A
    Tensor itself is answered from its class before any lineage is walked (every op's argument check)."""
    cls = value.__class__
    if cls.__name__ == "Tensor" and cls.__module__ == "asyncgrad.tensor":
        return True
    return any(c.__name__ == "Tensor" and c.__module__ == "asyncgrad.tensor" for c in type(value).__mro__)


def type_label(value: Any) -> str:
    """A value's type as torch's messages name it: ``float``, ``NoneType``, ``numpy.ndarray``."""
    cls = type(value)
    if is_tensor(value):
        return "Tensor"
    module = cls.__module__
    return f"numpy.{cls.__name__}" if module == "numpy" else cls.__name__


def complex_error(what: Any) -> TypeError:
    """The one refusal of complex data (Note [Complex numbers are refused])."""
    return TypeError(
        f"asyncgrad does not support complex tensors (got {what}): keep the real and imaginary parts in two "
        "real tensors (for a numpy array a: ag.tensor(a.real), ag.tensor(a.imag)) and write the complex "
        "arithmetic on them"
    )


def is_complex_error(exc: BaseException) -> bool:
    """Whether ``exc`` is ``complex_error``'s refusal (which callers rewording errors must keep)."""
    return isinstance(exc, TypeError) and str(exc).startswith("asyncgrad does not support complex tensors")


def is_complex(value: Any) -> bool:
    """Whether a scalar, array or dtype-like value is complex."""
    if isinstance(value, (complex, np.complexfloating)):
        return True
    dtype = getattr(value, "dtype", None)
    return isinstance(dtype, np.dtype) and dtype.kind == "c"


def refuse_complex(value: Any) -> None:
    if is_complex(value):
        raise complex_error(value.dtype if hasattr(value, "dtype") else "complex128")


_SUPPORTED = ("float64, float32, float16, int64, int32, int16, int8, uint64, uint32, uint16, uint8, and bool "
              "(asyncgrad has no complex tensors)")


def check_array_dtype(array: Any) -> None:
    """An array's dtype must be one asyncgrad computes in: torch's sentence for object and string
    arrays, ``complex_error`` for complex ones (Note [Complex numbers are refused])."""
    kind = array.dtype.kind
    if kind in "biuf":
        return
    if kind == "c":
        raise complex_error(array.dtype)
    raise TypeError(f"can't convert np.ndarray of type numpy.{array.dtype.type.__name__}. The only supported types "
                    f"are: {_SUPPORTED}.")


def tensor_arg(value: Any, fn: str, name: str = "input", pos: int = 1) -> Any:
    """``value`` if it is a Tensor, else torch's "must be Tensor, not list"."""
    if is_tensor(value):
        return value
    raise TypeError(f"{fn}(): argument '{name}' (position {pos}) must be Tensor, not {type_label(value)}")


def _is_int(value: Any) -> bool:
    if isinstance(value, bool) or isinstance(value, np.bool_):
        return False
    if isinstance(value, _INT_TYPES):
        return True
    return is_tensor(value) and value.dtype.kind in "iu" and value.numel() == 1


def int_arg(value: Any, fn: str, name: str = "dim", pos: int | None = 1) -> int:
    """An int argument (a dim, a count), as torch's parser takes it: numpy ints and one-element
    integer tensors pass, bools and floats do not."""
    if type(value) is int:
        return value
    if _is_int(value):
        return operator.index(value)
    where = f" (position {pos})" if pos is not None else ""
    raise TypeError(f"{fn}(): argument '{name}'{where} must be int, not {type_label(value)}")


def bool_arg(value: Any, fn: str, name: str, pos: int | None = None) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    where = f" (position {pos})" if pos is not None else ""
    raise TypeError(f"{fn}(): argument '{name}'{where} must be bool, not {type_label(value)}")


def int_list(args: tuple, fn: str, name: str = "size") -> tuple[int, ...]:
    """Sizes given as ``f(2, 3)`` or ``f((2, 3))``, checked as torch's IntArrayRef parser does.

    torch looks at the first element to decide that a sequence is a size, then unpacks the
    rest; its two messages (and 1-based ``pos`` in the second) are kept as they are.
    """
    if len(args) == 1:
        value = args[0]
        if isinstance(value, (tuple, list)):
            items = tuple(value)
        elif _is_int(value):
            return (operator.index(value),)
        else:
            raise TypeError(f"{fn}(): argument '{name}' (position 1) must be tuple of ints, not {type_label(value)}")
    else:
        items = args
        if items and not _is_int(items[0]):
            raise TypeError(f"{fn}() takes 1 positional argument but {len(items)} were given")
    out = []
    for i, value in enumerate(items):
        if type(value) is int:
            out.append(value)
        elif _is_int(value) or (i > 0 and isinstance(value, (bool, np.bool_))):  # torch unpacks later bools
            out.append(operator.index(value))
        elif i == 0:
            raise TypeError(f"{fn}(): argument '{name}' (position 1) must be tuple of ints, but found element of type "
                            f"{type_label(value)} at pos 0")
        else:
            raise TypeError(f"{fn}(): argument '{name}' failed to unpack the object at pos {i + 1} with error "
                            f"\"type must be tuple of ints,but got {type_label(value)}\"")
    return tuple(out)


def new_shape(args: tuple, fn: str) -> tuple[int, ...]:
    """A factory's size: ints, none negative (torch's "Trying to create tensor with negative
    dimension", which its ``zeros`` words differently)."""
    shape = int_list(args, fn)
    for n in shape:
        if n < 0:
            if fn == "zeros":
                raise RuntimeError("zeros: Dimension size must be non-negative.")
            raise RuntimeError(f"Trying to create tensor with negative dimension {n}: {list(shape)}")
    return shape


_SUPPORTED_KINDS = "biuf"


def dtype_arg(dtype: Any, fn: str) -> np.dtype | None:
    """None, or a numpy dtype asyncgrad computes in (bool, integers, floats).

    Anything numpy reads as a dtype is taken (``ag.float32``, ``np.float64``, ``float``,
    ``"float32"``), as the API's "numpy dtypes underneath" promises; complex dtypes are
    refused (Note [Complex numbers are refused]); everything else gets torch's sentence.
    """
    if dtype is None:
        return None
    dtype = numpy_dtype(dtype)  # Note [Dtypes are numpy dtypes underneath] in dtypes.py
    if isinstance(dtype, np.dtype):
        return dtype if dtype.kind in _SUPPORTED_KINDS else _unsupported_dtype(dtype, fn)
    if isinstance(dtype, bool) or not isinstance(dtype, (str, type, np.dtype)):
        raise TypeError(f"{fn}(): argument 'dtype' must be asyncgrad.dtype, not {type_label(dtype)}")
    try:
        result = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{fn}(): argument 'dtype' must be asyncgrad.dtype, not {type_label(dtype)} "
                        f"({dtype!r} names no dtype)") from None
    if result.kind not in _SUPPORTED_KINDS:
        return _unsupported_dtype(result, fn)
    return result


def _unsupported_dtype(dtype: np.dtype, fn: str) -> np.dtype:
    if dtype.kind == "c":
        raise complex_error(dtype)
    raise TypeError(f"{fn}(): dtype {dtype} is not supported: asyncgrad tensors hold bool, integer or floating "
                    "point numbers")


def number_arg(value: Any, fn: str, name: str, pos: int) -> Any:
    """A Python or numpy number (a fill value, a bound): torch's "must be Number"."""
    if isinstance(value, (bool, int, float, np.number, np.bool_)):
        refuse_complex(value)
        return value
    if isinstance(value, complex):
        raise complex_error("complex128")
    raise TypeError(f"{fn}(): argument '{name}' (position {pos}) must be Number, not {type_label(value)}")


def tensor_list(tensors: Any, fn: str, empty_error: BaseException) -> list:
    """A non-empty sequence of Tensors (cat, stack), with torch's messages for the rest."""
    if is_tensor(tensors) or not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{fn}(): argument 'tensors' (position 1) must be tuple of Tensors, not {type_label(tensors)}")
    for i, t in enumerate(tensors):
        if not is_tensor(t):
            raise TypeError(f"expected Tensor as element {i} in argument 0, but got {type_label(t)}")
    if not tensors:
        raise empty_error
    return list(tensors)


def normalize_dim(dim: int, ndim: int, fn: str = "dim", name: str = "dim", pos: int | None = 1) -> int:
    """``dim`` in ``[0, ndim)``, with torch's "Dimension out of range" (a 0-d tensor takes -1 and 0)."""
    if dim.__class__ is not int:
        dim = int_arg(dim, fn, name, pos)
    low, high = (-ndim, ndim - 1) if ndim > 0 else (-1, 0)
    if not low <= dim <= high:
        raise IndexError(f"Dimension out of range (expected to be in range of [{low}, {high}], but got {dim})")
    return dim % ndim if ndim > 0 else 0
