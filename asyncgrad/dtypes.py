"""asyncgrad's dtypes: torch's dtype objects over numpy dtypes; the names and the default float dtype."""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np

# Note [Dtypes are numpy dtypes underneath]: ``ag.float32`` is a ``dtype`` object with torch's
# attributes (``is_floating_point``, ``is_complex``, ``is_signed``, ``itemsize``, ``to_real()``,
# ``to_complex()``, repr ``asyncgrad.float32``) that stands for one numpy dtype, its ``.dtype``:
#
# * it equals that numpy dtype both ways (``ag.float32 == np.float32``, ``np.dtype('f4') ==
#   ag.float32``) and hashes as it, so a dict keyed by either finds the other;
# * numpy takes it anywhere a dtype goes (numpy reads a ``.dtype`` attribute: ``np.zeros(2,
#   dtype=ag.float32)``, ``a.astype(ag.int64)``, ``np.dtype(ag.bool)``);
# * numpy's own attributes (``kind``, ``char``, ``name``, ``type``, ``str``) read through;
# * there is one object per dtype (``intern``), so ``t.dtype is ag.float32`` holds on every device:
#   ``Tensor.dtype`` maps its array's dtype (numpy's, or a backend's own, which the backend
#   converts to numpy's) to the interned object; it pickles to that object.
#
# Arrays keep numpy's dtypes: internal hot paths (the engine's ``grad.dtype is not meta[1]``, the
# nodes' input metadata) read and store the array's numpy dtype, never this object
# (``numpy_dtype`` turns one into the other where a tensor's dtype meets them).


_BY_NUMPY: dict[Any, dtype] = {}
"""numpy dtype -> the interned asyncgrad dtype (``Tensor.dtype``'s lookup)."""


class dtype:  # noqa: N801  (torch's name: ``torch.dtype``)
    """One numpy dtype as torch's ``torch.dtype`` (Note [Dtypes are numpy dtypes underneath])."""

    __slots__ = ("dtype", "kind", "char", "name", "type", "str", "itemsize", "is_floating_point", "is_complex",
                 "is_signed", "_hash")

    def __init__(self, np_dtype: np.dtype) -> None:
        self.dtype = np_dtype
        self.kind, self.char, self.name, self.type = np_dtype.kind, np_dtype.char, np_dtype.name, np_dtype.type
        self.str, self.itemsize = np_dtype.str, np_dtype.itemsize
        self.is_floating_point = np_dtype.kind == "f"
        self.is_complex = np_dtype.kind == "c"
        self.is_signed = np_dtype.kind in "fci"
        self._hash = hash(np_dtype)

    def __getattr__(self, name: str) -> Any:
        """The rest of numpy's dtype attributes (``byteorder``, ``num``, ``descr`` ...)."""
        return getattr(self.dtype, name)

    def __eq__(self, other: object) -> builtins.bool:
        if other.__class__ is dtype:
            return self is other
        return builtins.bool(self.dtype == other)  # numpy's equality: dtypes, scalar types, names

    def __hash__(self) -> builtins.int:
        return self._hash

    def __repr__(self) -> builtins.str:
        return f"asyncgrad.{self.name}"

    __str__ = __repr__

    def __reduce__(self) -> Any:
        """Pickles by name, so unpickling gives the interned object."""
        return (intern, (self.dtype,))

    def to_real(self) -> dtype:
        """The real dtype of a complex one; a real dtype itself (asyncgrad holds no complex data)."""
        return self

    def to_complex(self) -> dtype:
        """torch's refusal for a non-float dtype; asyncgrad has no complex tensors
        (Note [Complex numbers are refused] in _validate.py)."""
        if not self.is_floating_point:
            raise RuntimeError(f"Unknown Complex ScalarType for {_C_NAMES.get(self.name, self.name)}")
        raise TypeError(f"asyncgrad does not support complex tensors (got {self.name}.to_complex())")


_C_NAMES = {"bool": "Bool", "uint8": "Byte", "int8": "Char", "int16": "Short", "int32": "Int", "int64": "Long",
            "float16": "Half", "float32": "Float", "float64": "Double"}


def intern(np_dtype: Any) -> dtype:
    """The one asyncgrad dtype of a numpy dtype (or anything numpy reads as one)."""
    found = _BY_NUMPY.get(np_dtype)
    if found is None:
        np_dtype = np.dtype(np_dtype)
        found = _BY_NUMPY.get(np_dtype)
        if found is None:
            found = _BY_NUMPY[np_dtype] = dtype(np_dtype)
    return found


def numpy_dtype(value: Any) -> Any:
    """The numpy dtype of an asyncgrad dtype; anything else as it is."""
    return value.dtype if value.__class__ is dtype else value


float16 = half = intern(np.float16)
float32 = float = intern(np.float32)
float64 = double = intern(np.float64)
int8 = intern(np.int8)
int16 = short = intern(np.int16)
int32 = int = intern(np.int32)
int64 = long = intern(np.int64)
uint8 = intern(np.uint8)
bool = intern(np.bool_)

_default_float = [float32]

NUMPY_DTYPE_CLASSES = frozenset(type(np.dtype(code)) for code in "?bhilqpBHILQPefdgFDGSUVOMm")
"""The classes of numpy's built-in dtypes.

Note [Is it a numpy dtype]: ``dtype.__class__ in NUMPY_DTYPE_CLASSES`` answers "is this array's
dtype numpy's?" (cpu, cuda) on the hot path, where ``isinstance(dtype, np.dtype)`` takes the slow
``__instancecheck__`` path of numpy's dtype metaclass. Other dtypes (a strict array's, a
user-defined numpy dtype) then ask ``isinstance``."""


def get_default_dtype() -> dtype:
    """The default floating dtype (``float32`` unless ``set_default_dtype`` changed it), as torch's."""
    return _default_float[0]


def set_default_dtype(d: Any) -> None:
    """As torch: only float32 and float64 may be the default."""
    d = intern(d)
    if d is not float32 and d is not float64:
        raise TypeError(f"only floating-point types are supported as the default type, got {d.name}")
    _default_float[0] = d


def is_floating_point(d: Any) -> builtins.bool:
    """Whether a dtype (asyncgrad's or numpy's) is a floating-point one."""
    return intern(d).is_floating_point


def to_dtype(d: Any) -> dtype | None:
    return None if d is None else intern(d)


def finfo(d: Any = None) -> np.finfo:
    """numpy's ``finfo`` of a float dtype (the default one without an argument), as ``torch.finfo``."""
    d = get_default_dtype() if d is None else intern(d)
    if not d.is_floating_point:
        raise TypeError("torch.finfo() requires a floating point input type. Use torch.iinfo to handle 'torch.finfo'")
    return np.finfo(d.dtype)


def iinfo(d: Any) -> np.iinfo:
    """numpy's ``iinfo`` of an integer dtype, as ``torch.iinfo``."""
    d = intern(d)
    if d.kind == "b":
        raise TypeError(f"{d} is not supported by torch.iinfo")
    if d.kind not in "iu":  # torch's words, its odd last clause too
        raise TypeError("torch.iinfo() requires an integer input type. Use torch.finfo to handle 'torch.iinfo'")
    return np.iinfo(d.dtype)
