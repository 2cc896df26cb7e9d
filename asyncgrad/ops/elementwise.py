"""Elementwise ops: each forward beside its backward formula, broadcasting summed back.

Every op computes with its device's array namespace (``x.device.xp``; Note [One array backend
per device] in devices/backend.py) and returns through ``record`` (Note [One way to record an
op] in _node.py). The one-input ops are rows of one table, ``_UNARY``, from which their nodes
and forward functions are generated.

Operands follow torch's promotion, which is not the Array API's: a Python number beside a tensor
is weak (``float32_tensor * 2.0`` is float32, ``int_tensor * 2.5`` the default float dtype), two
tensors of different dtypes meet in torch's result type (``result_dtype``). ``operands`` makes
them computable together before the op runs, so the op itself is one line of array code on every
device (array_api_strict refuses what numpy would silently promote).
"""

from __future__ import annotations

import builtins
import math
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from asyncgrad import dtypes
from asyncgrad._convert import to_array
from asyncgrad._validate import (
    check_array_dtype,
    complex_error,
    int_arg,
    is_complex_error,
    number_arg,
    refuse_complex,
    tensor_arg,
    type_label,
)
from asyncgrad.devices import Device
from asyncgrad.devices.backend import backend_of
from asyncgrad.graph.node import RELEASED, SECOND_BACKWARD
from asyncgrad.ops._node import ArrayMath, OpNode, SavesResult, SavesVariables, plain, record, recording, same_device
from asyncgrad.tensor import Tensor, scalar_type_name

_SCALARS = (int, float, bool, np.number, np.bool_)
_PLAIN_NUMBERS = (int, float, bool)
_NUMBERS = (float, int)
"""The Python numbers of the fast ``tensor op number`` path (a bool takes the general one)."""
_FLOAT_DTYPES = frozenset(type(np.dtype(name)) for name in ("float16", "float32", "float64", "longdouble"))
"""The classes of numpy's float dtypes: ``data.dtype.__class__ in _FLOAT_DTYPES`` asks "a float
array of cpu or cuda?" without the ``Tensor.dtype`` property, on the hot path. A strict array's
dtype is not a numpy dtype, so it is asked through ``Tensor.dtype`` after this test fails."""


class UnsupportedOperand(TypeError):
    """An operand no op takes (None, a string, a dict): the operator forms turn it into
    ``NotImplemented`` so Python words the error (and ``t == None`` is False), as with torch."""


# --------------------------------------------------------------------------- operands and promotion
def operands(a: Any, b: Any, name: str = "add") -> tuple[Tensor | None, Tensor | None, Any, Any, Device]:
    """Split a binary op's arguments into (tensor or None, tensor or None, value, value, device).

    The values compute together on the device: two arrays of one dtype (torch's result type, see
    ``result_dtype``), or an array and a Python number of its category (see ``_weak``). Constants
    (numpy arrays, nested lists) come onto the tensor's device. ``name`` words the error for an
    operand that is neither a tensor nor a number.
    """
    ta = a if type(a) is Tensor or isinstance(a, Tensor) else None
    tb = b if type(b) is Tensor or isinstance(b, Tensor) else None
    if ta is not None:
        if tb is not None:
            dev = ta.device
            if tb.device is not dev:
                same_device(ta, tb)
            da, db = ta.data, tb.data
            if da.dtype != db.dtype:
                da, db = _promote(da, db, result_dtype(da, db), dev)
            return ta, tb, da, db, dev
        da, db = _with_constant(ta, b, name, "other", 2)
        return ta, None, da, db, ta.device
    if tb is None:
        raise UnsupportedOperand(f"{name}(): argument 'input' (position 1) must be Tensor, not {type_label(a)}")
    db, da = _with_constant(tb, a, name, "input", 1)
    return None, tb, da, db, tb.device


_CATEGORY = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}


def _dtype_of(array: Any) -> np.dtype:
    """asyncgrad's (numpy) dtype of an array of any backend."""
    dtype = array.dtype
    return dtype if isinstance(dtype, np.dtype) else backend_of(array).dtype(array)


def result_dtype(*arrays: Any) -> np.dtype:
    """torch's result type of several tensors' arrays (of any backend), where it differs from numpy's.

    torch ranks a higher category (bool < int < float) above a wider type (int64 with float32
    gives float32, numpy says float64), and a 0-d tensor decides the dtype only when its
    category is higher than the other operand's (float32 with a 0-d float64 gives float32).
    """
    dtype, zero = _dtype_of(arrays[0]), arrays[0].ndim == 0
    for b in arrays[1:]:
        b_dtype = _dtype_of(b)
        ka, kb = _CATEGORY.get(dtype.kind, 3), _CATEGORY.get(b_dtype.kind, 3)
        zero_b = b.ndim == 0
        if zero == zero_b:
            dtype = np.promote_types(dtype, b_dtype) if ka == kb else dtype if ka > kb else b_dtype
        elif zero:
            dtype = dtype if ka > kb else b_dtype
            zero = False
        else:
            dtype = b_dtype if kb > ka else dtype
    return dtype


def _promote(da: Any, db: Any, dtype: np.dtype, dev: Device) -> tuple[Any, Any]:
    backend = dev.backend
    return backend.astype(da, dtype), backend.astype(db, dtype)


def _weak(t: Tensor, data: Any, number: Any) -> tuple[Any, Any]:
    """torch's promotion of a Python number beside a tensor: the tensor's dtype wins within its
    category, a higher category wins with its default type (a float beside an integer or bool
    tensor: the default float dtype; an int beside a bool tensor: int64). A bool beside a number
    tensor becomes 0 or 1: the Array API mixes no bool scalar with numbers."""
    kind = t.dtype.kind
    cls = number.__class__
    if cls is float:
        if kind != "f":
            return t.device.backend.astype(data, dtypes.get_default_dtype()), number
    elif cls is int:
        if kind == "b":
            return t.device.backend.astype(data, dtypes.int64), number
    elif kind != "b":
        return data, int(number)
    return data, number


def _with_constant(t: Tensor, value: Any, name: str, arg: str, pos: int) -> tuple[Any, Any]:
    """``t``'s array and a non-tensor operand, ready to compute together on ``t``'s device.

    Numbers stay Python numbers (numpy scalars become ones, which torch treats alike); numpy
    arrays come onto the device and promote as numpy promotes them (as torch does, which reads
    them as tensors of their dtype); nested lists are read as ``ag.tensor`` reads them (Python
    floats in the default dtype, so ``int_tensor + [1.5]`` promotes instead of truncating) and
    promote as tensors. Complex values are refused (Note [Complex numbers are refused]).
    """
    cls = value.__class__
    if cls is float or cls is int or cls is bool:
        return _weak(t, t.data, value)
    if isinstance(value, (np.number, np.bool_)):
        if isinstance(value, np.complexfloating):
            raise complex_error(value.dtype)
        return _weak(t, t.data, value.item())
    if isinstance(value, (int, float)):  # a subclass (an IntEnum): as the plain number it is
        return _weak(t, t.data, int(value) if isinstance(value, int) else float(value))
    data = t.data
    dev = t.device
    if isinstance(value, np.ndarray):
        check_array_dtype(value)
        const = dev.asarray(value)
        dtype = np.promote_types(t.dtype, value.dtype)
    elif isinstance(value, (list, tuple)):
        try:
            const = to_array(value, None, dev)
        except (TypeError, ValueError, RuntimeError) as exc:
            if is_complex_error(exc):
                raise
            # torch takes no lists here at all; one that is not a nest of numbers gets its words
            raise UnsupportedOperand(f"{name}(): argument '{arg}' (position {pos}) must be Tensor, not "
                                     f"{type_label(value)}") from None
        dtype = result_dtype(data, const)
    elif isinstance(value, complex):
        raise complex_error("complex128")
    else:
        raise UnsupportedOperand(f"{name}(): argument '{arg}' (position {pos}) must be Tensor, not "
                                 f"{type_label(value)}")
    return _promote(data, const, dtype, dev)


def _shape_of(value: Any) -> tuple[int, ...]:
    return () if value.__class__ in _PLAIN_NUMBERS else value.shape


def _is_bool(value: Any) -> bool:
    return value.__class__ is bool or (value.__class__ not in _PLAIN_NUMBERS and _dtype_of(value) == np.bool_)


def _on_bools(fn: Callable, da: Any, db: Any, exc: TypeError) -> Any:
    """``fn(da, db)`` for two bool operands, where the Array API refuses an op on bools (array_api_strict
    raised the TypeError ``exc``) and torch and numpy compute it: ``+``/``*``/maximum/minimum of bools
    are or/and, and comparisons order False < True. ``exc`` again for other operands."""
    if not (_is_bool(da) and _is_bool(db)):
        raise exc
    return fn(da, db)


def broadcast_error(*shapes: tuple[int, ...]) -> RuntimeError:
    """torch's error for shapes that do not broadcast (numpy's ValueError says it otherwise).

    Built only once the array library has refused, so the forward pays nothing for it.
    """
    a = tuple(shapes[0])
    for b in shapes[1:]:
        ndim = max(len(a), len(b))
        pa, pb = (1,) * (ndim - len(a)) + a, (1,) * (ndim - len(b)) + tuple(b)
        for i in range(ndim - 1, -1, -1):
            if pa[i] != pb[i] and pa[i] != 1 and pb[i] != 1:
                return RuntimeError(f"The size of tensor a ({pa[i]}) must match the size of tensor b ({pb[i]}) at "
                                    f"non-singleton dimension {i}")
        a = tuple(np.broadcast_shapes(pa, pb))
    return RuntimeError(f"shapes {', '.join(str(list(s)) for s in shapes)} cannot be broadcast together")


def _keep(t: Tensor | None, value: Any, dev: Device) -> tuple[Tensor | None, Any]:
    """What a node keeps of one operand to compute the other's gradient: (tensor to save, number).
    A tensor is saved (version-checked on unpack), an array constant is saved as a constant
    tensor (a recorded backward then meets a Tensor, as it meets a saved input), a number is
    kept as it is."""
    if t is not None:
        return t, None
    if value.__class__ in _PLAIN_NUMBERS:
        return None, value
    return plain(value, dev), None


# --------------------------------------------------------------------------- tensor with a Python number
# Note [The number path]: ``t * 2.0``, ``t + 1.0``, ``t - 1.0``, ``t / 2.0`` with ``t`` a float Tensor
# (not a subclass) and the number a Python float or int (not a bool) record a node that keeps the
# number and needs no broadcasting bookkeeping. The path must give exactly what the general one gives:
# a Python number beside a float tensor is weak (``_weak`` hands both on unchanged), so the result is
# ``forward(t._data, number)`` in ``t``'s dtype and shape, and the node has one edge, the tensor's.
# Torch names these nodes as the general ones (``MulBackward0``), and so does asyncgrad. The path is
# the rows of ``_BINARY`` that name a number node, taken first by their function and operator forms
# (``_number_first``): written once, so every such op tests the same condition.
#
# Note [Number ops apply their formula]: ``OpNode.apply`` calls ``backward(F, g)``, one more Python
# frame per node. The nodes of the commonest chains (``t * 2.0``, ``t + 1.0``, ``t - 1.0``, and every
# row of ``_UNARY``) have an ``apply`` of their own that evaluates the same formula without it: the
# number ops write their array formula out (one operator, the same expression as ``backward``'s), the
# unary rows call their derivative directly. ``backward`` stays the one formula for every other caller
# and for ``create_graph``; W1's backward shows the frame saved.
class AddNumberBackward(OpNode):
    __slots__ = ()
    work_per_element = 0
    same_meta = True  # a float tensor and a Python number: the tensor's shape and dtype (NEP 50)

    def name(self) -> str:
        return "AddBackward0"

    def apply(self, grads: list, create_graph: bool) -> Any:
        # Note [Number ops apply their formula]
        if create_graph:
            return self.backward(self.graph_math, grads[0])
        return grads[0], None

    def backward(self, F, g):
        return g, None


class SubNumberBackward(AddNumberBackward):
    __slots__ = ()

    def name(self) -> str:
        return "SubBackward0"


class MulNumberBackward(SavesVariables):  # torch saves the number, as a tensor
    __slots__ = ("number",)
    work_per_element = 1
    same_meta = True

    def name(self) -> str:
        return "MulBackward0"

    def apply(self, grads: list, create_graph: bool) -> Any:
        # Note [Number ops apply their formula]
        if self.saved is RELEASED:
            raise RuntimeError(SECOND_BACKWARD)
        if create_graph:
            return self.backward(self.graph_math, grads[0])
        return grads[0] * self.number, None

    def backward(self, F, g):
        return g * self.number, None


class DivNumberBackward(SavesVariables):
    __slots__ = ("number",)
    work_per_element = 1
    same_meta = True

    def name(self) -> str:
        return "DivBackward0"

    def backward(self, F, g):
        return g / self.number, None


def _number_first(general: Callable, node: type[OpNode] | None, forward: Callable | None,
                  as_operator: bool) -> Callable:
    """A row of ``_BINARY`` as a function of two operands (Note [The binary table]).

    With a number ``node``, the number path first (Note [The number path]), then ``general``.
    ``as_operator``: the operator form (``__add__``), which hands an operand no op takes back to
    Python as ``NotImplemented``, so Python words the error and ``t == None`` is False, as with torch;
    the function form raises ``general``'s TypeError, which names the argument.
    Both forms call ``general`` inside the same ``try`` (free until it raises), so they run one path.
    """
    if node is None:
        if not as_operator:
            return general

        def op(input: Any, other: Any) -> Any:
            try:
                return general(input, other)
            except UnsupportedOperand:
                return NotImplemented
    else:
        keeps = bool(node.fields)

        def op(input: Any, other: Any) -> Any:
            if type(other) in _NUMBERS and type(input) is Tensor and (
                    input._data.dtype.__class__ in _FLOAT_DTYPES or input.dtype.kind == "f"):
                if keeps:
                    return record(node, (input, None), forward(input._data, other), input.device, other)
                return record(node, (input, None), forward(input._data, other), input.device)
            try:
                return general(input, other)
            except UnsupportedOperand:
                if as_operator:
                    return NotImplemented
                raise

    op.__name__ = op.__qualname__ = getattr(general, "__name__", "op").lstrip("_")
    op.__doc__ = general.__doc__
    return op


# --------------------------------------------------------------------------- add / sub
class AddBackward0(OpNode):
    __slots__ = ("a_shape", "b_shape", "alpha")

    def backward(self, F, g):
        return (
            F.sum_to(g, self.a_shape) if self.needs(0) else None,
            F.sum_to(g if self.alpha == 1 else g * self.alpha, self.b_shape) if self.needs(1) else None,
        )


def _add(a: Any, b: Any, alpha: Any = 1) -> Tensor:
    """torch's ``add``: ``a + alpha * b``, broadcast, promoted as torch promotes (bools: or)."""
    ta, tb, da, db, dev = operands(a, b, "add")
    try:
        out = da + db if alpha == 1 else da + db * alpha
    except ValueError:
        raise broadcast_error(_shape_of(da), _shape_of(db)) from None
    except TypeError as exc:
        out = _on_bools(dev.xp.logical_or, da, db, exc)
    a_shape = da.shape if ta is not None else _shape_of(da)
    b_shape = db.shape if tb is not None else _shape_of(db)
    return record(AddBackward0, (ta, tb), out, dev, a_shape, b_shape, alpha,
                  work=0 if a_shape == b_shape == out.shape else None)


class SubBackward0(OpNode):
    __slots__ = ("a_shape", "b_shape", "alpha")

    def backward(self, F, g):
        return (
            F.sum_to(g, self.a_shape) if self.needs(0) else None,
            F.sum_to(-g if self.alpha == 1 else g * -self.alpha, self.b_shape) if self.needs(1) else None,
        )


def _sub(a: Any, b: Any, alpha: Any = 1) -> Tensor:
    """torch's ``sub``: ``a - alpha * b``, broadcast, promoted as torch promotes (two bools refused)."""
    ta, tb, da, db, dev = operands(a, b, "sub")
    try:
        out = da - db if alpha == 1 else da - db * alpha
    except ValueError:
        raise broadcast_error(_shape_of(da), _shape_of(db)) from None
    except TypeError:
        if _is_bool(da) and _is_bool(db):
            raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or "
                               "`logical_xor()` operator instead.") from None
        raise
    a_shape = da.shape if ta is not None else _shape_of(da)
    b_shape = db.shape if tb is not None else _shape_of(db)
    return record(SubBackward0, (ta, tb), out, dev, a_shape, b_shape, alpha,
                  work=0 if a_shape == b_shape == out.shape else None)


# --------------------------------------------------------------------------- mul / div
class MulBackward0(OpNode):
    """Each side is saved only if the other side needs its gradient (as torch); a number side is
    kept as a field."""

    __slots__ = ("a_shape", "b_shape", "a_const", "b_const")
    saved_names = ("self", "other")  # Note [Saved tensors read by name] in _node.py
    work_per_element = 4

    def backward(self, F, g):
        a, b = F.unpack(self)
        return (
            F.sum_to(g * (self.b_const if b is None else b), self.a_shape) if self.needs(0) else None,
            F.sum_to(g * (self.a_const if a is None else a), self.b_shape) if self.needs(1) else None,
        )


def _mul(a: Any, b: Any) -> Tensor:
    """torch's ``mul``: broadcast, promoted as torch promotes (bools: and)."""
    ta, tb, da, db, dev = operands(a, b, "mul")
    try:
        out = da * db
    except ValueError:
        raise broadcast_error(_shape_of(da), _shape_of(db)) from None
    except TypeError as exc:
        out = _on_bools(dev.xp.logical_and, da, db, exc)
    if ta is not None and tb is not None:  # each side saved if the other needs its gradient, as torch
        return record(MulBackward0, (ta, tb), out, dev, da.shape, db.shape, None, None,
                      saved=(ta if tb._requires_grad else None, tb if ta._requires_grad else None))
    if not recording(ta, tb):
        return plain(out, dev)
    (sa, ca), (sb, cb) = _keep(ta, da, dev), _keep(tb, db, dev)
    return record(MulBackward0, (ta, tb), out, dev, _shape_of(da), _shape_of(db), ca, cb,
                  saved=(sa if tb is not None and tb._requires_grad else None,
                         sb if ta is not None and ta._requires_grad else None))


class DivBackward0(OpNode):
    __slots__ = ("a_shape", "b_shape", "a_const", "b_const")
    saved_names = ("self", "other")  # Note [Saved tensors read by name] in _node.py
    work_per_element = 9

    def backward(self, F, g):
        a, b = F.unpack(self)
        if b is None:
            b = self.b_const
        ga = gb = None
        if self.needs(0):
            ga = F.sum_to(g / b, self.a_shape)
        if self.needs(1):
            gb = F.sum_to(-g * (self.a_const if a is None else a) / (b * b), self.b_shape)
        return ga, gb


def _div(a: Any, b: Any) -> Tensor:
    """torch's ``div``: true division, broadcast; integers and bools divide in the default float dtype."""
    ta, tb, da, db, dev = operands(a, b, "div")
    if not (_is_floating(da) or _is_floating(db)):
        # true division of integers (or bools) computes in the default float dtype, as torch's
        default = dtypes.get_default_dtype()
        da, db = (v if v.__class__ in _PLAIN_NUMBERS else dev.backend.astype(v, default) for v in (da, db))
    try:
        out = da / db
    except ValueError:
        raise broadcast_error(_shape_of(da), _shape_of(db)) from None
    if ta is not None and tb is not None:
        return record(DivBackward0, (ta, tb), out, dev, da.shape, db.shape, None, None,
                      saved=(ta if tb._requires_grad else None, tb))
    if not recording(ta, tb):
        return plain(out, dev)
    (sa, ca), (sb, cb) = _keep(ta, da, dev), _keep(tb, db, dev)
    return record(DivBackward0, (ta, tb), out, dev, _shape_of(da), _shape_of(db), ca, cb,
                  saved=(sa if tb is not None and tb._requires_grad else None, sb))


def _is_floating(value: Any) -> bool:
    """Whether a true division's operand already decides its float dtype (ints give the default)."""
    cls = value.__class__
    if cls in _PLAIN_NUMBERS:
        return cls is float
    return value.dtype.__class__ in _FLOAT_DTYPES or _dtype_of(value).kind == "f"


def rdiv(a: Tensor, b: Any) -> Tensor:
    """``b / a`` for a ``b`` that is not a tensor: torch computes ``a.reciprocal() * b``, so the
    result's node is MulBackward0 with a ReciprocalBackward0 behind it; so does asyncgrad."""
    return mul(_FORWARDS["reciprocal"](a), b)


# --------------------------------------------------------------------------- pow
class PowBackward0(OpNode):
    """tensor ** number"""

    __slots__ = ("exponent",)
    saved_names = ("self",)  # Note [Saved tensors read by name] in _node.py
    work_per_element = 4

    def backward(self, F, g):
        (x,) = F.unpack(self)
        p = self.exponent
        if p == 0:  # Note [Zero derivatives are constants]
            return (F.zeros_like(g),)
        return (g * (p * x ** (p - 1)),)


class PowBackward1(OpNode):
    """tensor ** tensor: d/da is 0 where b == 0 (not 0 * a ** -1, nan at a == 0); d/db is
    torch's ``where(a == 0 & b >= 0, 0, out * log(a))``: 0 at a == 0 for b >= 0 (by continuity
    from a > 0), and ``inf * log(0) = -inf`` for b < 0 (the limit as a -> +0), never nan there."""

    __slots__ = ("a_shape", "b_shape", "a_const")
    saved_names = ("self", "exponent")  # Note [Saved tensors read by name] in _node.py
    work_per_element = 20  # a ** (b - 1) and log(a): two transcendentals
    saves_result = True

    def backward(self, F, g):
        a, b, out = F.unpack(self)
        ga = gb = None
        if self.needs(0):
            ga = F.sum_to(g * (b * a ** F.where(b == 0, 1.0, b - 1)), self.a_shape)
        if self.needs(1):
            if a is None:  # a number base (PowBackward2): torch masks only a zero base
                a = self.a_const
                log_a = math.log(a) if a > 0 else -math.inf if a == 0 else math.nan
                gb = g * (F.where(b >= 0, 0.0, out * log_a) if a == 0 else out * log_a)
            else:
                out_log_a = out * F.log(a)  # where(a == 0 & b >= 0, ...) as two wheres: Tensor has no &
                gb = g * F.where(b >= 0, F.where(a == 0, 0.0, out_log_a), out_log_a)
            gb = F.sum_to(gb, self.b_shape)
        return ga, gb


class PowBackward2(OpNode):
    """number ** tensor: torch's name for the number-base form."""

    __slots__ = PowBackward1.__slots__
    work_per_element = PowBackward1.work_per_element
    saves_result = True
    backward = PowBackward1.backward


def pow(a: Any, b: Any) -> Tensor:
    """``a ** b`` with a tensor or a number on either side, as torch's."""
    ta, tb, da, db, dev = operands(a, b, "pow")
    try:
        out = da ** db
    except ValueError as exc:
        if "negative integer powers" in str(exc):
            raise RuntimeError("Integers to negative integer powers are not allowed.") from None
        raise broadcast_error(_shape_of(da), _shape_of(db)) from None
    if tb is None and db.__class__ in _PLAIN_NUMBERS:
        return record(PowBackward0, (ta,), out, dev, db, saved=(ta,))
    if not recording(ta, tb):
        return plain(out, dev)
    sa, ca = _keep(ta, da, dev)
    sb = _keep(tb, db, dev)[0]
    return record(PowBackward1 if ta is not None else PowBackward2, (ta, tb), out, dev,
                  _shape_of(da), _shape_of(db), ca, saved=(sa, sb))


def rpow(a: Tensor, b: Any) -> Tensor:
    return pow(b, a)


# --------------------------------------------------------------------------- unary
# Note [The unary table]: a one-input op is one row of ``_UNARY``:
#
#   name        the function (and Tensor method) name, as in torch's messages
#   node        torch's name of its backward node
#   forward     ``(xp, array) -> array`` on the device's Array API namespace, or the name of the
#               namespace's function when it is all there is (``"tanh"``: ``xp.tanh(x)``, called
#               without a frame of ours: Note [A unary forward called by name])
#   to_float    True: integer and bool inputs compute in the default float dtype (torch's float
#               functions); False: the input's dtype is kept
#   saves       "input", "result" or None: what ``derivative`` gets as ``saved``
#   work        the backward's cost class (Note [Cost classes] in _node.py)
#   derivative  ``(F, grad, saved) -> grad_input``, written once against ``F`` (Note [Two
#               namespaces for one formula])
#   on_bool     None: a bool input computes as the others; else ``(xp, array) -> array`` computed
#               instead for one (a refusal raises torch's error)
#
# ``_generate`` makes the node class (a module attribute named ``node``) and the forward function
# (a module attribute named ``name``); adding an op is one row, plus its method line in
# ops/__init__.py and its export in asyncgrad/__init__.py.
def _refuse(exc_type: type[Exception], message: str) -> Callable:
    def refuse(xp: Any, x: Any) -> Any:
        raise exc_type(message)

    return refuse


_NEG_BOOL = _refuse(RuntimeError, "Negation, the `-` operator, on a bool tensor is not supported. If you are trying "
                                  "to invert a mask, use the `~` or `logical_not()` operator instead.")
_ABS_BOOL = _refuse(NotImplementedError, '"abs_cpu" not implemented for \'Bool\'')
_RELU_BOOL = _refuse(RuntimeError, "Boolean inputs not supported for relu")


def _refuse_bool(kernel: str) -> Callable:
    return _refuse(NotImplementedError, f'"{kernel}" not implemented for \'Bool\'')


_TWO_OVER_SQRT_PI = 2 / math.sqrt(math.pi)
_SQRT_PI_OVER_TWO = math.sqrt(math.pi) / 2
_LN2 = math.log(2.0)
_LN10 = math.log(10.0)


def _bool_sign(xp: Any, x: Any) -> Any:
    return xp.asarray(x, copy=True)  # a bool is its own sign (numpy's and the standard's sign take none)


_DEG_TO_RAD = math.pi / 180.0
_RAD_TO_DEG = 180.0 / math.pi


def _frac(xp: Any, x: Any) -> Any:
    """torch's ``frac``: ``x - trunc(x)``, for floating tensors only."""
    dtype = backend_of(x).dtype(x)
    if dtype.kind != "f":
        raise NotImplementedError(f'"frac_cpu" not implemented for \'{scalar_type_name(dtype)}\'')
    return x - xp.trunc(x)


def _sinc(xp: Any, x: Any) -> Any:
    """sin(πx) / (πx), 1 at 0."""
    pix = x * math.pi
    zero = x == 0
    return xp.where(zero, 1.0, xp.sin(pix) / xp.where(zero, 1.0, pix))


def _sinc_backward(F: Any, g: Any, x: Any) -> Any:
    """torch's ``sinc_backward``: ``g (πx cos(πx) - sin(πx)) / (π x²)``, 0 where ``π x² == 0``."""
    pix = x * math.pi
    pix2 = x * x * math.pi
    zero = pix2 == 0.0
    out = g * (pix * F.cos(pix) - F.sin(pix)) / F.where(zero, 1.0, pix2)
    return F.where(zero, 0.0, out)


# Note [Float literals in formulas]: the derivatives write their constants as floats (``1.0 - y * y``):
# numpy converts a Python int operand by a slower path than a float, and both are the same weak
# scalar to every float or complex operand (NEP 50; torch's wrapped numbers), so the result is the
# same, bit for bit. The rows below follow it; W1's forward shows the cost (``python -m benchmarks --only W1``).
_UNARY = (
    # name        node                   forward                                       to_float saves    work
    #     derivative                                            on_bool
    ("neg",        "NegBackward0",        lambda xp, x: -x,                              False, None,     1,
        lambda F, g, _: -g,                                     _NEG_BOOL),
    ("exp",        "ExpBackward0",        "exp",                                         True,  "result", 1,
        lambda F, g, y: g * y,                                  None),
    ("log",        "LogBackward0",        "log",                                         True,  "input",  1,
        lambda F, g, x: g / x,                                  None),
    ("log1p",      "Log1PBackward0",      "log1p",                                       True,  "input",  3,
        lambda F, g, x: g / (x + 1.0),                          None),
    ("sqrt",       "SqrtBackward0",       "sqrt",                                        True,  "result", 3,
        lambda F, g, y: g / (2.0 * y),                          None),
    ("sin",        "SinBackward0",        "sin",                                         True,  "input",  9,
        lambda F, g, x: g * F.cos(x),                           None),
    ("cos",        "CosBackward0",        "cos",                                         True,  "input",  9,
        lambda F, g, x: g * -F.sin(x),                          None),
    ("tanh",       "TanhBackward0",       "tanh",                                        True,  "result", 4,
        lambda F, g, y: g * (1.0 - y * y),                      None),  # Note [Float literals in formulas]
    ("sigmoid",    "SigmoidBackward0",    lambda xp, x: xp.tanh(x * 0.5) * 0.5 + 0.5,    True,  "result", 4,
        lambda F, g, y: g * (y * (1.0 - y)),                    None),
    ("reciprocal", "ReciprocalBackward0", lambda xp, x: 1 / x,                           True,  "result", 3,
        lambda F, g, y: -g * y * y,                             None),
    # torch's threshold_backward: 0 where the result is <= 0, so a NaN passes the gradient
    ("relu",       "ReluBackward0",       lambda xp, x: backend_of(x).relu(x),           False, "result", 2,
        lambda F, g, y: F.threshold_backward(g, y),             _RELU_BOOL),
    ("abs",        "AbsBackward0",        "abs",                                         False, "input",  7,
        lambda F, g, x: g * F.sign(x),                          _ABS_BOOL),
    ("sign",       "SignBackward0",       "sign",                                        False, None,     1,
        lambda F, g, _: F.zeros_like(g),                        _bool_sign),
    # the rest of torch's pointwise math (derivatives as torch's derivatives.yaml)
    ("expm1",      "Expm1Backward0",      "expm1",                                       True,  "result", 1,
        lambda F, g, y: g * (y + 1.0),                          None),
    ("rsqrt",      "RsqrtBackward0",      lambda xp, x: 1 / xp.sqrt(x),                  True,  "result", 3,
        lambda F, g, y: g * (y * y * y) * -0.5,                 None),
    ("floor",      "FloorBackward0",      "floor",                                       False, None,     1,
        lambda F, g, _: F.zeros_like(g),                        _refuse_bool("floor_vml_cpu")),
    ("ceil",       "CeilBackward0",       "ceil",                                        False, None,     1,
        lambda F, g, _: F.zeros_like(g),                        _refuse_bool("ceil_vml_cpu")),
    ("trunc",      "TruncBackward0",      "trunc",                                       False, None,     1,
        lambda F, g, _: F.zeros_like(g),                        _refuse_bool("trunc_vml_cpu")),
    ("tan",        "TanBackward0",        "tan",                                         True,  "result", 4,
        lambda F, g, y: g * (y * y + 1.0),                      None),
    ("atan",       "AtanBackward0",       "atan",                                        True,  "input",  4,
        lambda F, g, x: g / (x * x + 1.0),                      None),
    ("asin",       "AsinBackward0",       "asin",                                        True,  "input",  5,
        lambda F, g, x: g * (1.0 - x * x) ** -0.5,              None),
    ("acos",       "AcosBackward0",       "acos",                                        True,  "input",  5,
        lambda F, g, x: -g * (1.0 - x * x) ** -0.5,             None),
    ("sinh",       "SinhBackward0",       "sinh",                                        True,  "input",  9,
        lambda F, g, x: g * F.cosh(x),                          None),
    ("cosh",       "CoshBackward0",       "cosh",                                        True,  "input",  9,
        lambda F, g, x: g * F.sinh(x),                          None),
    # erf, erfc, erfinv: the backend's primitives (Note [erf to double precision] in devices/special.py)
    ("erf",        "ErfBackward0",        lambda xp, x: backend_of(x).erf(x),            True,  "input",  3,
        lambda F, g, x: g * (_TWO_OVER_SQRT_PI * F.exp(-(x * x))),  None),
    ("erfc",       "ErfcBackward0",       lambda xp, x: backend_of(x).erfc(x),           True,  "input",  3,
        lambda F, g, x: g * (-_TWO_OVER_SQRT_PI * F.exp(-(x * x))),  None),
    ("erfinv",     "ErfinvBackward0",     lambda xp, x: backend_of(x).erfinv(x),         True,  "result", 3,
        lambda F, g, y: g * (_SQRT_PI_OVER_TWO * F.exp(y * y)),  None),
    ("log2",       "Log2Backward0",       "log2",                                        True,  "input",  1,
        lambda F, g, x: g / (x * _LN2),                         None),
    ("log10",      "Log10Backward0",      "log10",                                       True,  "input",  1,
        lambda F, g, x: g / (x * _LN10),                        None),
    ("exp2",       "Exp2Backward0",       lambda xp, x: 2.0 ** x,                        True,  "result", 1,
        lambda F, g, y: g * (y * _LN2),                         None),
    # inverse hyperbolic functions, angle conversions, frac, sinc, sgn (torch's derivatives.yaml)
    ("acosh",      "AcoshBackward0",      "acosh",                                       True,  "input",  5,
        lambda F, g, x: g * (x * x - 1.0) ** -0.5,              None),
    ("asinh",      "AsinhBackward0",      "asinh",                                       True,  "input",  5,
        lambda F, g, x: g * (x * x + 1.0) ** -0.5,              None),
    ("atanh",      "AtanhBackward0",      "atanh",                                       True,  "input",  4,
        lambda F, g, x: g / (1.0 - x * x),                      None),
    ("deg2rad",    "Deg2RadBackward0",    lambda xp, x: x * _DEG_TO_RAD,                 True,  None,     1,
        lambda F, g, _: g * _DEG_TO_RAD,                        None),
    ("rad2deg",    "Rad2DegBackward0",    lambda xp, x: x * _RAD_TO_DEG,                 True,  None,     1,
        lambda F, g, _: g * _RAD_TO_DEG,                        None),
    ("frac",       "FracBackward0",       _frac,                                         False, None,     1,
        lambda F, g, _: g,                                      _refuse_bool("frac_cpu")),
    ("sinc",       "SincBackward0",       _sinc,                                         True,  "input",  9,
        _sinc_backward,                                         None),
    # sgn is sign on real tensors; its formula, (g - sgn² g) / (2 |x|) masked at 0, is zero there
    ("sgn",        "SgnBackward0",        "sign",                                        False, None,     1,
        lambda F, g, _: F.zeros_like(g),                        _bool_sign),
    # the gamma and Bessel functions: the backend's primitives (Note [Gamma functions to double
    # precision] in devices/gamma.py, Note [Bessel functions to double precision] in devices/bessel.py)
    ("lgamma",     "LgammaBackward0",     lambda xp, x: backend_of(x).lgamma(x),         True,  "input",  20,
        lambda F, g, x: g * F.digamma(x),                       None),
    ("digamma",    "DigammaBackward0",    lambda xp, x: backend_of(x).digamma(x),        True,  "input",  20,
        lambda F, g, x: g * F.polygamma(1, x),                  None),
    ("i0",         "I0Backward0",         lambda xp, x: backend_of(x).i0(x),             True,  "input",  20,
        lambda F, g, x: g * F.special_i1(x),                    None),
)


def _generate(name: str, node_name: str, forward: Callable | str, to_float: bool, saves: str | None, work: int,
              derivative: Callable, on_bool: Callable | None) -> tuple[type[OpNode], Callable[[Tensor], Tensor]]:
    """One row of ``_UNARY`` (Note [The unary table]) as its node class and forward function."""
    if saves is None:
        def backward(self: OpNode, F: Any, g: Any) -> tuple:
            return (derivative(F, g, None),)

        def apply(self: OpNode, grads: list, create_graph: bool) -> tuple:  # Note [Number ops apply their formula]
            if create_graph:
                return (derivative(self.graph_math, grads[0], None),)
            return (derivative(ArrayMath, grads[0], None),)
    else:
        def backward(self: OpNode, F: Any, g: Any) -> tuple:
            (saved,) = F.unpack(self)
            return (derivative(F, g, saved),)

        def apply(self: OpNode, grads: list, create_graph: bool) -> tuple:  # Note [Number ops apply their formula]
            F = self.graph_math if create_graph else ArrayMath
            (saved,) = F.unpack(self)
            return (derivative(F, grads[0], saved),)

    node = type(node_name, (SavesResult if saves == "result" else OpNode,), {
        "__slots__": (), "__module__": __name__, "__qualname__": node_name,
        "__doc__": f"The backward of ``{name}`` (generated from its row in ``_UNARY``).",
        "backward": backward, "apply": apply, "work_per_element": work,
        "same_meta": True,  # elementwise: the input's shape; record checks the dtype
        "saved_names": ("self",) if saves == "input" else (),  # Note [Saved tensors read by name] in _node.py
    })
    save_input = saves == "input"
    default_float = dtypes.get_default_dtype
    # Note [A unary forward called by name]: a row whose forward is ``xp.tanh(x)`` names the
    # function instead of wrapping it in a lambda, and the float path calls it as
    # ``getattr(dev.xp, "tanh")(data)``: no Python frame between the op and the array library
    # (W1's forward, a third of whose nodes are tanh, shows it: ``python -m benchmarks --only W1``).
    by_name = forward if isinstance(forward, str) else None
    if by_name is not None:
        forward = lambda xp, x: getattr(xp, by_name)(x)  # noqa: E731 - the other paths' form of the row

    def op(x: Tensor) -> Tensor:
        if x.__class__ is not Tensor:
            tensor_arg(x, name)
        data = x._data  # the slot (Note [The data slot] in tensor.py)
        dev = x.device
        if data.dtype.__class__ in _FLOAT_DTYPES:  # a numpy float (cpu, cuda), without Tensor.dtype
            out = getattr(dev.xp, by_name)(data) if by_name is not None else forward(dev.xp, data)
        else:
            kind = x.dtype.kind
            if kind == "b" and on_bool is not None:
                out = on_bool(dev.xp, data)
            else:
                out = forward(dev.xp, dev.backend.astype(data, default_float()) if to_float and kind != "f" else data)
        if save_input:
            return record(node, (x,), out, dev, saved=(x,))
        return record(node, (x,), out, dev)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"torch's ``{name}``: recorded as ``{node_name}`` (generated from its row in ``_UNARY``)."
    return node, op


_FORWARDS: dict[str, Callable[[Tensor], Tensor]] = {}
for _row in _UNARY:
    _node_cls, _FORWARDS[_row[0]] = _generate(*_row)
    globals()[_row[1]] = _node_cls
del _row, _node_cls

# the forwards by name, as plain assignments that type checkers and readers can follow
neg, exp, log, log1p, sqrt = (_FORWARDS[n] for n in ("neg", "exp", "log", "log1p", "sqrt"))
sin, cos, tanh, sigmoid = (_FORWARDS[n] for n in ("sin", "cos", "tanh", "sigmoid"))
reciprocal, relu, abs, sign = (_FORWARDS[n] for n in ("reciprocal", "relu", "abs", "sign"))
expm1, rsqrt, floor, ceil, trunc, tan, atan, asin, acos, sinh, cosh = (_FORWARDS[n] for n in (
    "expm1", "rsqrt", "floor", "ceil", "trunc", "tan", "atan", "asin", "acos", "sinh", "cosh"))
erf, erfc, erfinv, log2, log10, exp2 = (_FORWARDS[n] for n in ("erf", "erfc", "erfinv", "log2", "log10", "exp2"))
acosh, asinh, atanh, deg2rad, rad2deg, frac, sinc, sgn = (_FORWARDS[n] for n in (
    "acosh", "asinh", "atanh", "deg2rad", "rad2deg", "frac", "sinc", "sgn"))
lgamma, digamma, i0 = (_FORWARDS[n] for n in ("lgamma", "digamma", "i0"))
assert set(_FORWARDS) == {"neg", "exp", "log", "log1p", "sqrt", "sin", "cos", "tanh", "sigmoid", "reciprocal", "relu",
                          "abs", "sign",
                          "expm1", "rsqrt", "floor", "ceil", "trunc", "tan", "atan", "asin", "acos", "sinh", "cosh",
                          "erf", "erfc", "erfinv", "log2", "log10", "exp2",
                          "acosh", "asinh", "atanh", "deg2rad", "rad2deg", "frac", "sinc", "sgn",
                          "lgamma", "digamma", "i0",
                          }, "a row of _UNARY needs its name assigned above"


# Note [In-place forms of the unary table]: every row of ``_UNARY`` has torch's in-place form,
# ``x.exp_()`` and ``ag.exp_(x)`` (``relu_`` is declared with the activations): the row's op
# computed and written back (``inplace.apply_inplace``), recorded as the row's node. torch records
# three of them without a derivative, ``INPLACE_WITHOUT_DERIVATIVE``: their in-place form computes
# the row's values but records ``<Name>Backward1``, whose backward raises torch's NotImplementedError
# ("the derivative for 'inplace version of acosh' is not implemented.").
INPLACE_WITHOUT_DERIVATIVE = ("acosh", "asinh", "atanh")


class _InplaceWithoutDerivative(OpNode):
    """The node of an in-place unary op torch gives no derivative (Note [In-place forms of the unary table])."""

    __slots__ = ()
    work_per_element = 0
    op_name = ""

    def backward(self, F: Any, g: Any) -> tuple:
        raise NotImplementedError(f"the derivative for 'inplace version of {self.op_name}' is not implemented.")


def _without_derivative(name: str) -> Callable[[Tensor], Tensor]:
    """What ``name_`` computes for a row of ``INPLACE_WITHOUT_DERIVATIVE``: the row's values, recorded
    under ``<Name>Backward1``."""
    node_name = _UNARY[[row[0] for row in _UNARY].index(name)][1].replace("Backward0", "Backward1")
    node = type(node_name, (_InplaceWithoutDerivative,), {
        "__slots__": (), "__module__": __name__, "__qualname__": node_name, "op_name": name,
        "__doc__": f"``{name}_``: torch records no derivative for it (generated from ``_UNARY``'s row)."})
    globals()[node_name] = node
    op = _FORWARDS[name]

    def compute(x: Tensor) -> Tensor:
        if x.__class__ is not Tensor:
            tensor_arg(x, name + "_")
        return record(node, (x,), op(x.detach())._data, x.device)

    compute.__name__ = compute.__qualname__ = name
    return compute


INPLACE_COMPUTE: dict[str, Callable[[Tensor], Tensor]] = {
    name: _without_derivative(name) if name in INPLACE_WITHOUT_DERIVATIVE else op
    for name, op in _FORWARDS.items() if name != "relu"}
"""What each row's in-place form computes (Note [In-place forms of the unary table]); ``relu_`` is
declared with the activations."""


# Note [Zero derivatives are constants]: where torch's formula is ``zeros_like(grad)`` (sign, the
# result side of threshold_backward, ``x ** 0``), the gradient is zeros that belong to no graph:
# under create_graph a ``g * 0`` would require grad whenever ``g`` does, and a gradient of it would
# come back as connected zeros where torch's is None (or raises "does not require grad"). The
# piecewise-linear ops (relu, abs, clamp, where, minimum/maximum, max/min) need nothing special:
# their formulas select the gradient with a constant mask, so a second derivative through them is
# connected exactly where torch's is (relu through its result, abs through sign), and
# tests/torch_parity/test_torch_behaviours.py checks that against torch.
class ThresholdBackwardBackward0(OpNode):
    """relu's gradient as a function of the gradient and relu's result, as torch's threshold_backward:
    under create_graph it requires grad when the result does (its derivative there is zero)."""

    __slots__ = ("threshold",)

    def backward(self, F, g):
        (y,) = F.unpack(self)
        return (F.threshold_backward(g, y, self.threshold) if self.needs(0) else None,
                F.zeros_like(g) if self.needs(1) else None)


def threshold_backward(g: Tensor, y: Tensor, threshold: float = 0.0) -> Tensor:
    """torch's ``threshold_backward(grad, self, threshold)``: the gradient where ``y`` (relu's result,
    threshold's input) is above ``threshold``, else 0 (a NaN passes it)."""
    return record(ThresholdBackwardBackward0, (g, y), g.device.xp.where(y.data <= threshold, 0.0, g.data), g.device,
                  float(threshold), saved=(y,))


class ClampBackward1(OpNode):
    """The gradient passes where min <= x <= max (inclusive, as torch). Like torch, the node saves x
    and builds the mask in backward (Note [Clamp saves its input])."""

    __slots__ = ("low", "high")
    work_per_element = 3

    def backward(self, F, g):
        (x,) = F.unpack(self)
        return (_clamp_grad(F, g, x, self.low, self.high),)


class ClampBackward0(OpNode):
    """clamp with a tensor bound: an edge for each bound, x and both bound tensors saved, a number
    bound (beside a tensor one) a field. x's gradient passes where ``min <= x <= max``; a bound's
    where x is beyond it (torch's ``clamp_backward_min_max``: ``min`` only where ``min < max``,
    ``max`` also where ``max < min``, since the result is ``max`` there), summed to its shape."""

    __slots__ = ("low", "high", "x_shape", "low_shape", "high_shape")
    work_per_element = 3

    def backward(self, F, g):
        x, low, high = F.unpack(self)
        lo = self.low if low is None else low
        hi = self.high if high is None else high
        gx = F.sum_to(_clamp_grad(F, g, x, lo, hi), self.x_shape) if self.needs(0) else None
        g_low = g_high = None
        if low is not None and self.needs(1):
            below = x < low if hi is None else (x < low) & (low < hi)
            g_low = F.sum_to(F.where(below, g, 0.0), self.low_shape)
        if high is not None and self.needs(2):
            above = x > high if lo is None else (x > high) | (high < lo)
            g_high = F.sum_to(F.where(above, g, 0.0), self.high_shape)
        return (gx, g_low, g_high)


# Note [Clamp saves its input]
# torch's clamp saves ``self`` (and the bound tensors of clamp.Tensor) and computes
# ``(self >= min) & (self <= max)`` in backward (clamp_backward, clamp_backward_min_max in
# derivatives.yaml), so changing x or a bound in place after the clamp makes backward raise its
# version error. A mask computed at forward would let that backward silently use the old mask.
def _clamp_grad(F: Any, g: Any, x: Any, low: Any, high: Any) -> Any:
    """``g`` where ``low <= x <= high`` (a None bound is open), else 0; a NaN x gets 0."""
    if low is not None:
        g = F.where(x >= low, g, 0.0)
    if high is not None:
        g = F.where(x <= high, g, 0.0)
    return g


def clamp(x: Tensor, min: Any = None, max: Any = None) -> Tensor:
    """torch's ``clamp``: ``min``/``max`` numbers or tensors (broadcast; differentiable, as torch's)."""
    if x.__class__ is not Tensor:
        tensor_arg(x, "clamp")
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    tensors = (min if isinstance(min, Tensor) else None, max if isinstance(max, Tensor) else None)
    bounds = (_bound(min, x, "min", 1), _bound(max, x, "max", 2))
    dev = x.device
    backend = dev.backend
    data = x.data
    # number bounds promote as one number operand of their highest category would (clamp(int, 0.5) is
    # float), tensor bounds an integer x as tensors do; a float x keeps its dtype
    numbers = {bound.__class__ for bound in bounds}
    number = 0.5 if float in numbers else 1 if int in numbers else True if bool in numbers else None
    if number is not None:
        data = _weak(x, data, number)[0]
    dtype = _dtype_of(data)
    arrays = [bound for bound, t in zip(bounds, tensors) if t is not None]
    if arrays and dtype.kind != "f":
        dtype = result_dtype(data, *arrays)
        data = backend.astype(data, dtype)
    low, high = (backend.astype(bound, dtype) if t is not None else  # a tensor bound computes in x's dtype
                 int(bound) if bound.__class__ is bool and dtype.kind != "b" else bound  # True beside numbers: 1
                 for bound, t in zip(bounds, tensors))
    try:
        out = dev.xp.clip(data, low, high)
    except ValueError:
        raise broadcast_error(data.shape, *(_shape_of(v) for v in (low, high) if v is not None)) from None
    if not recording(x):
        return plain(out, dev)
    if arrays:  # Note [Clamp saves its input]
        return record(ClampBackward0, (x, *tensors), out, dev, *(None if t is not None else bound
                                                                 for bound, t in zip((low, high), tensors)),
                      x.shape, *(None if t is None else t.shape for t in tensors), saved=(x, *tensors))
    return record(ClampBackward1, (x,), out, dev, low, high, saved=(x,))


def _bound(value: Any, x: Tensor, name: str, pos: int) -> Any:
    """A bound's array (of a tensor) or Python number."""
    if value is None:
        return None
    if isinstance(value, Tensor):
        same_device(x, value)
        return value.data
    value = number_arg(value, "clamp", name, pos)
    return value.item() if isinstance(value, np.generic) else value


# --------------------------------------------------------------------------- two-tensor selections
class MaximumBackward0(OpNode):
    """torch's formula: ties split the gradient evenly, and a side gets none only where the
    other side strictly wins, so a NaN (which compares False both ways) passes it to both."""

    __slots__ = ("a_shape", "b_shape")
    saved_names = (None, None, "self", "other")  # the shares first (Note [Saved tensors read by name] in _node.py)

    def backward(self, F, g):
        share_a, share_b = F.unpack(self)[:2]
        return (
            F.sum_to(g * share_a, self.a_shape) if self.needs(0) else None,
            F.sum_to(g * share_b, self.b_shape) if self.needs(1) else None,
        )


class MinimumBackward0(OpNode):
    __slots__ = MaximumBackward0.__slots__
    saved_names = MaximumBackward0.saved_names
    backward = MaximumBackward0.backward


def _select(node_cls: type[OpNode], a: Any, b: Any, name: str) -> Tensor:
    """maximum/minimum, which propagate NaN as torch does (a ``where(a > b, a, b)`` would
    return b where a is NaN)."""
    ta, tb, da, db, dev = operands(a, b, name)
    xp = dev.xp
    is_max = node_cls is MaximumBackward0
    try:
        out = xp.maximum(da, db) if is_max else xp.minimum(da, db)
    except ValueError:
        raise broadcast_error(_shape_of(da), _shape_of(db)) from None
    except TypeError as exc:  # of bools: or / and (the Array API orders no bools)
        out = _on_bools(xp.logical_or if is_max else xp.logical_and, da, db, exc)
    if not recording(ta, tb):
        return plain(out, dev)
    a_wins, b_wins = (da > db, da < db) if is_max else (da < db, da > db)
    half = 1.0 - 0.5 * dev.backend.astype(da == db, dev.backend.dtype(out))  # 0.5 at a tie, else 1
    ra, rb = ta is not None and ta._requires_grad, tb is not None and tb._requires_grad
    share_a = plain(xp.where(b_wins, 0.0, half), dev) if ra else None
    share_b = plain(xp.where(a_wins, 0.0, half), dev) if rb else None
    # the operands themselves too, as torch saves them: changing one in place refuses the backward
    return record(node_cls, (ta, tb), out, dev, _shape_of(da), _shape_of(db), saved=(share_a, share_b, ta, tb))


class HypotBackward0(OpNode):
    """hypot(a, b) = sqrt(a² + b²): d/da = a / out, d/db = b / out (torch's formula)."""

    __slots__ = ("a_shape", "b_shape")
    saved_names = ("self", "other")  # Note [Saved tensors read by name] in _node.py
    work_per_element = 6
    saves_result = True

    def backward(self, F, g):
        a, b, out = F.unpack(self)
        return (
            F.sum_to(g * a / out, self.a_shape) if self.needs(0) else None,
            F.sum_to(g * b / out, self.b_shape) if self.needs(1) else None,
        )


def hypot(a: Tensor, b: Tensor) -> Tensor:
    """torch's ``hypot``: two floating tensors, broadcast, promoted as torch promotes them."""
    tensor_arg(a, "hypot", "input", 1)
    tensor_arg(b, "hypot", "other", 2)
    ta, tb, da, db, dev = operands(a, b, "hypot")
    if not ta.is_floating_point() or not tb.is_floating_point():
        raise NotImplementedError(f'"hypot_cpu" not implemented for \'{scalar_type_name(ta.dtype)}\'')
    try:
        out = dev.xp.hypot(da, db)
    except ValueError:
        raise broadcast_error(_shape_of(da), _shape_of(db)) from None
    return record(HypotBackward0, (ta, tb), out, dev, _shape_of(da), _shape_of(db),
                  saved=(ta if ta._requires_grad else None, tb if tb._requires_grad else None))  # as torch


def maximum(a: Any, b: Any) -> Tensor:
    """Elementwise maximum of two tensors (NaN propagates), as torch's; the gradient is split at ties."""
    return _select(MaximumBackward0, a, b, "maximum")


def minimum(a: Any, b: Any) -> Tensor:
    """Elementwise minimum of two tensors (NaN propagates), as torch's; the gradient is split at ties."""
    return _select(MinimumBackward0, a, b, "minimum")


class WhereBackward0(OpNode):
    """The mask picks each side's gradient; ``sum_to`` undoes the broadcasting of all three."""

    __slots__ = ("a_shape", "b_shape")

    def backward(self, F, g):
        (cond,) = F.unpack(self)
        return (
            F.sum_to(F.where(cond, g, 0.0), self.a_shape) if self.needs(0) else None,
            F.sum_to(F.where(cond, 0.0, g), self.b_shape) if self.needs(1) else None,
        )


def where(condition: Any, a: Any, b: Any) -> Tensor:
    """``where(condition, a, b)``: ``a`` and ``b`` tensors or numbers (two numbers give a tensor
    of their dtype, the default float dtype for floats, as torch)."""
    if isinstance(condition, Tensor):
        cond_dtype = condition.dtype
    elif isinstance(condition, (np.ndarray, bool, np.bool_)):  # a host value, brought to the device below
        cond_dtype = condition.dtype if isinstance(condition, np.ndarray) else np.dtype(type(condition))
    else:
        raise TypeError(f"where(): argument 'condition' (position 1) must be Tensor, not {type_label(condition)}")
    if cond_dtype != np.bool_:
        raise RuntimeError("where expected condition to be a boolean tensor, but got a tensor with dtype "
                           f"{scalar_type_name(cond_dtype)}")
    if not isinstance(a, Tensor) and not isinstance(b, Tensor) and isinstance(a, _SCALARS):
        a = Tensor(a, device=condition.device if isinstance(condition, Tensor) else None)
    ta, tb, da, db, dev = operands(a, b, "where")
    if isinstance(condition, Tensor):
        if condition.device is not dev:
            same_device(condition, ta if ta is not None else tb)
        cond = condition.data
    else:  # a copy, saved below: changing the host array later does not move the gradient
        cond = dev.asarray(condition, copy=True)
    try:
        out = dev.xp.where(cond, da, db)
    except ValueError:
        raise broadcast_error(cond.shape, _shape_of(da), _shape_of(db)) from None
    if not recording(ta, tb):
        return plain(out, dev)
    # the condition tensor itself, version-checked as torch does: changing it in place after
    # the forward makes backward fail instead of routing the gradient by the new mask
    saved = condition if isinstance(condition, Tensor) else plain(cond, dev)
    return record(WhereBackward0, (ta, tb), out, dev, _shape_of(da), _shape_of(db), saved=(saved,))


# --------------------------------------------------------------------------- comparisons (no grad)
_COMPARISON_SYMBOLS = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


def _compare(op: Callable, name: str) -> Callable:
    def compare(a: Any, b: Any) -> Tensor:
        ta, tb, da, db, dev = operands(a, b, name)
        try:
            return plain(op(da, db), dev)
        except ValueError:
            raise broadcast_error(_shape_of(da), _shape_of(db)) from None
        except TypeError as exc:  # the Array API orders no bools; torch (and numpy) order False < True
            return plain(_on_bools(lambda x, y: op(_as_int(x, dev), _as_int(y, dev)), da, db, exc), dev)

    compare.__name__ = compare.__qualname__ = name
    compare.__doc__ = (f"``a {_COMPARISON_SYMBOLS[name]} b`` elementwise, broadcast as torch's: a bool tensor, never "
                       "recorded.")
    return compare


def _as_int(value: Any, dev: Device) -> Any:
    return int(value) if value.__class__ is bool else dev.backend.astype(value, dtypes.int64)


lt = _compare(operator.lt, "lt")
le = _compare(operator.le, "le")
gt = _compare(operator.gt, "gt")
ge = _compare(operator.ge, "ge")
eq = _compare(operator.eq, "eq")
ne = _compare(operator.ne, "ne")


def logical_not(x: Tensor) -> Tensor:
    if x.__class__ is not Tensor:
        tensor_arg(x, "logical_not")
    data = x.data
    return plain(x.device.xp.logical_not(data) if x.dtype == np.bool_ else data == 0, x.device)



# --------------------------------------------------------------------------- more of torch's math
class RoundBackward0(OpNode):
    """round: zero gradient, as every rounding (Note [Zero derivatives are constants])."""

    __slots__ = ()

    def backward(self, F, g):
        return (F.zeros_like(g),)


class RoundBackward1(RoundBackward0):
    """round with ``decimals``."""

    __slots__ = ()


def round(x: Tensor, decimals: int = 0) -> Tensor:
    """torch's ``round``: half to even; with ``decimals``, torch's own scaling (``round(x * 10**d) /
    10**d``, or ``round(x / 10**-d) * 10**-d`` for negative ``d``), so values agree bit for bit."""
    if x.__class__ is not Tensor:
        tensor_arg(x, "round")
    dev = x.device
    kind = x.dtype.kind
    if kind == "b":
        raise NotImplementedError('"round_vml_cpu" not implemented for \'Bool\'')
    if decimals == 0:
        return record(RoundBackward0, (x,), dev.xp.round(x.data), dev)
    if kind != "f":
        raise NotImplementedError(f'"round_cpu" not implemented for \'{scalar_type_name(x.dtype)}\'')
    scale = 10.0 ** builtins.abs(int(decimals))
    data = x.data
    out = dev.xp.round(data * scale) / scale if decimals > 0 else dev.xp.round(data / scale) * scale
    return record(RoundBackward1, (x,), out, dev)


def square(x: Tensor) -> Tensor:
    """torch's ``square``: ``pow(x, 2)``, recorded as PowBackward0 (a bool squares to int64, as torch)."""
    if x.__class__ is not Tensor:
        tensor_arg(x, "square")
    if x.dtype == np.bool_:
        x = x.to(dtypes.int64)
    return pow(x, 2)


class LogitBackward0(OpNode):
    """``grad / (x (1 - x))``; with ``eps``, 0 outside [eps, 1 - eps], where the forward clamped."""

    __slots__ = ("eps",)
    work_per_element = 4

    def backward(self, F, g):
        (x,) = F.unpack(self)
        grad = g / (x * (1 - x))
        if self.eps is None:
            return (grad,)
        return (F.where(x < self.eps, 0.0, F.where(x > 1 - self.eps, 0.0, grad)),)


def logit(x: Tensor, eps: float | None = None) -> Tensor:
    """torch's ``logit``: ``log(x / (1 - x))``, ``x`` clamped to [eps, 1 - eps] when ``eps`` is given."""
    if x.__class__ is not Tensor:
        tensor_arg(x, "logit")
    dev = x.device
    data = x.data if x.dtype.kind == "f" else dev.backend.astype(x.data, dtypes.get_default_dtype())
    z = data if eps is None else dev.xp.clip(data, float(eps), 1 - float(eps))
    return record(LogitBackward0, (x,), dev.xp.log(z / (1 - z)), dev, None if eps is None else float(eps), saved=(x,))


def _predicate(name: str, test: Callable[[Any, Any], Any], integral: bool) -> Callable[[Tensor], Tensor]:
    """isnan / isinf / isfinite: bool results, never a node; ``integral`` is the answer for integers."""

    def predicate(x: Tensor) -> Tensor:
        if x.__class__ is not Tensor:
            tensor_arg(x, name)
        dev = x.device
        data = x.data
        if x.dtype.kind != "f":
            return plain(dev.backend.full(data.shape, integral, dtypes.bool), dev)
        return plain(test(dev.xp, data), dev)

    predicate.__name__ = predicate.__qualname__ = name
    predicate.__doc__ = f"torch's ``{name}``: a bool tensor, no gradient."
    return predicate


isnan = _predicate("isnan", lambda xp, d: xp.isnan(d), False)
isinf = _predicate("isinf", lambda xp, d: xp.isinf(d), False)
isfinite = _predicate("isfinite", lambda xp, d: xp.isfinite(d), True)


def signbit(x: Tensor) -> Tensor:
    """torch's ``signbit``: whether each element's sign bit is set (``-0.0`` and ``-nan`` count), a
    bool result, never a node; an integer's is whether it is negative, a bool's is False."""
    if x.__class__ is not Tensor:
        tensor_arg(x, "signbit")
    dev = x.device
    data = x.data
    if x.dtype.kind == "f":
        return plain(dev.xp.signbit(data), dev)
    if x.dtype.kind == "b":
        return plain(dev.backend.full(data.shape, False, dtypes.bool), dev)
    return plain(data < 0, dev)


# two operands, each summed back to its own shape
class _TwoSided(OpNode):
    """A binary op whose formula is ``(grad_a, grad_b) = self.grads(F, g, a, b, out)``."""

    __slots__ = ("a_shape", "b_shape")

    def backward(self, F, g):
        saved = F.unpack(self)
        ga, gb = self.grads(F, g, *saved)
        return (
            F.sum_to(ga, self.a_shape) if self.needs(0) and ga is not None else None,
            F.sum_to(gb, self.b_shape) if self.num_outputs > 1 and self.needs(1) and gb is not None else None,
        )

    def grads(self, F, g, *saved):
        raise NotImplementedError


class Atan2Backward0(_TwoSided):
    __slots__ = ()
    saved_names = ("self", "other")  # Note [Saved tensors read by name] in _node.py
    work_per_element = 6

    def grads(self, F, g, a, b):
        scale = g / (a * a + b * b)
        return scale * b, scale * -a


def _binary(name: str, a: Any, b: Any, floats: bool) -> tuple[Tensor | None, Tensor | None, Any, Any, Device]:
    """``operands`` for a function form whose first operand must be a tensor; ``floats``: integer
    operands compute in the default float dtype (torch's float functions)."""
    if a.__class__ is not Tensor:
        tensor_arg(a, name, "input", 1)
    ta, tb, da, db, dev = operands(a, b, name)
    if floats and not _is_floating(da) and not _is_floating(db):
        default = dtypes.get_default_dtype()
        da, db = (v if v.__class__ in _PLAIN_NUMBERS else dev.backend.astype(v, default) for v in (da, db))
    return ta, tb, da, db, dev


def _shapes(da: Any, db: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    return _shape_of(da), _shape_of(db)


def atan2(a: Tensor, b: Tensor) -> Tensor:
    """torch's ``atan2``: two tensors (a number is refused, as torch), integers in the default float dtype."""
    tensor_arg(b, "atan2", "other", 2)
    ta, tb, da, db, dev = _binary("atan2", a, b, True)
    try:
        out = dev.xp.atan2(da, db)
    except ValueError:
        raise broadcast_error(*_shapes(da, db)) from None
    return record(Atan2Backward0, (ta, tb), out, dev, *_shapes(da, db), saved=(ta, tb))


class ClampMinBackward0(OpNode):
    """clamp_min(x, number): the gradient where ``x >= min`` (torch saves x)."""

    __slots__ = ("bound",)
    work_per_element = 3

    def backward(self, F, g):
        (x,) = F.unpack(self)
        return (F.where(x >= self.bound, g, 0.0),)


class ClampMaxBackward0(ClampMinBackward0):
    __slots__ = ()

    def backward(self, F, g):
        (x,) = F.unpack(self)
        return (F.where(x <= self.bound, g, 0.0),)


class ClampMinBackward1(_TwoSided):
    """clamp_min(x, tensor): x gets the gradient where ``x >= min``, the bound elsewhere."""

    __slots__ = ()
    work_per_element = 3

    def grads(self, F, g, x, bound):
        keep = x >= bound
        return F.where(keep, g, 0.0), F.where(keep, 0.0, g)


class ClampMaxBackward1(_TwoSided):
    __slots__ = ()
    work_per_element = 3

    def grads(self, F, g, x, bound):
        keep = x <= bound
        return F.where(keep, g, 0.0), F.where(keep, 0.0, g)


def _clamp_side(x: Tensor, bound: Any, is_min: bool) -> Tensor:
    name = "clamp_min" if is_min else "clamp_max"
    ta, tb, da, db, dev = _binary(name, x, bound, False)
    xp = dev.xp
    if db.__class__ in _PLAIN_NUMBERS and _dtype_of(da) == np.bool_:
        raise NotImplementedError(f'"{name}_scalar_cpu" not implemented for \'Bool\'')
    try:  # maximum/minimum propagate a NaN of either side, as torch's clamp
        out = xp.maximum(da, db) if is_min else xp.minimum(da, db)
    except ValueError:
        raise broadcast_error(*_shapes(da, db)) from None
    except TypeError as exc:  # of bools: or / and (the Array API orders no bools)
        out = _on_bools(xp.logical_or if is_min else xp.logical_and, da, db, exc)
    if tb is None and db.__class__ in _PLAIN_NUMBERS:
        return record(ClampMinBackward0 if is_min else ClampMaxBackward0, (ta,), out, dev, db, saved=(ta,))
    if not recording(ta, tb):
        return plain(out, dev)
    bound_saved = tb if tb is not None else plain(db, dev)
    return record(ClampMinBackward1 if is_min else ClampMaxBackward1, (ta, tb), out, dev, *_shapes(da, db),
                  saved=(plain(da, dev) if ta.dtype != _dtype_of(da) else ta, bound_saved))


def clamp_min(x: Tensor, min: Any) -> Tensor:
    """torch's ``clamp_min``: ``min`` a number or a tensor (which gets its gradient where it wins)."""
    return _clamp_side(x, min, True)


def clamp_max(x: Tensor, max: Any) -> Tensor:
    """``x`` clamped from above at ``max`` (a number or a tensor), as torch's."""
    return _clamp_side(x, max, False)


class LerpBackward0(OpNode):
    """lerp with a number weight: ``(1 - w) grad`` and ``w grad``."""

    __slots__ = ("a_shape", "b_shape", "weight")

    def backward(self, F, g):
        w = self.weight
        return (
            F.sum_to(g * (1 - w), self.a_shape) if self.needs(0) else None,
            F.sum_to(g * w, self.b_shape) if self.needs(1) else None,
        )


class LerpBackward1(OpNode):
    """lerp with a tensor weight: it gets ``grad (end - start)``."""

    __slots__ = ("a_shape", "b_shape", "w_shape")
    work_per_element = 4

    def backward(self, F, g):
        start, end, w = F.unpack(self)
        return (
            F.sum_to(g * (1 - w), self.a_shape) if self.needs(0) else None,
            F.sum_to(g * w, self.b_shape) if self.needs(1) else None,
            F.sum_to(g * (end - start), self.w_shape) if self.needs(2) else None,
        )


def lerp(start: Tensor, end: Tensor, weight: Any) -> Tensor:
    """torch's ``lerp``: ``start + weight (end - start)``, computed as torch does (from ``end`` when
    ``|weight| >= 0.5``, so ``lerp(a, b, 1) == b`` exactly); the three tensors share one dtype."""
    tensor_arg(start, "lerp", "input", 1)
    tensor_arg(end, "lerp", "end", 2)
    if start.dtype != end.dtype:
        raise RuntimeError(f"expected dtype {_c_type_name(start.dtype)} for `end` but got dtype "
                           f"{_c_type_name(end.dtype)}")
    if start.dtype.kind != "f":
        raise NotImplementedError(f'"lerp_kernel_scalar" not implemented for \'{scalar_type_name(start.dtype)}\'')
    dev = same_device(start, end)
    xp = dev.xp
    a, b = start.data, end.data
    if isinstance(weight, Tensor):
        if weight.dtype != start.dtype:
            raise RuntimeError(f"expected dtype {_c_type_name(start.dtype)} for `weight` but got dtype "
                               f"{_c_type_name(weight.dtype)}")
        same_device(start, weight)
        w = weight.data
        try:
            out = xp.where(xp.abs(w) < 0.5, a + w * (b - a), b - (b - a) * (1 - w))
        except ValueError:
            raise broadcast_error(a.shape, b.shape, w.shape) from None
        return record(LerpBackward1, (start, end, weight), out, dev, a.shape, b.shape, w.shape,
                      saved=(start, end, weight))
    w = number_arg(weight, "lerp", "weight", 3)
    w = w.item() if isinstance(w, np.generic) else w
    try:
        out = a + w * (b - a) if builtins.abs(w) < 0.5 else b - (b - a) * (1 - w)
    except ValueError:
        raise broadcast_error(a.shape, b.shape) from None
    return record(LerpBackward0, (start, end), out, dev, a.shape, b.shape, w)


class AddcmulBackward0(OpNode):
    """``input + value * tensor1 * tensor2``: input gets the gradient, each factor the gradient times
    the other factor times ``value`` (torch's formulas); a factor is saved only if the other needs it."""

    __slots__ = ("self_shape", "t1_shape", "t2_shape", "value")
    work_per_element = 4

    def backward(self, F, g):
        t1, t2 = F.unpack(self)
        v = self.value
        return (
            F.sum_to(g, self.self_shape) if self.needs(0) else None,
            F.sum_to(g * (t2 * v), self.t1_shape) if self.needs(1) else None,
            F.sum_to(g * (t1 * v), self.t2_shape) if self.needs(2) else None,
        )


class AddcdivBackward0(OpNode):
    """``input + value * tensor1 / tensor2``: tensor1 gets ``grad * value / tensor2``, tensor2
    ``-grad * value * tensor1 / tensor2^2`` (torch's formulas)."""

    __slots__ = AddcmulBackward0.__slots__
    work_per_element = 9

    def backward(self, F, g):
        t1, t2 = F.unpack(self)
        v = self.value
        return (
            F.sum_to(g, self.self_shape) if self.needs(0) else None,
            F.sum_to(g * (v / t2), self.t1_shape) if self.needs(1) else None,
            F.sum_to(-g * (t1 * v / (t2 * t2)), self.t2_shape) if self.needs(2) else None,
        )


ADDCDIV_INTEGERS = (
    "Integer division with addcdiv is no longer supported, and in a future  release addcdiv will perform a true "
    "division of tensor1 and tensor2. The historic addcdiv behavior can be implemented as (input + value * "
    "torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and as (input + value * tensor1 / tensor2) "
    "for float inputs. The future addcdiv behavior is just the latter implementation: (input + value * tensor1 / "
    "tensor2), for all dtypes.")


def pointwise_value(value: Any, kind: str, fn: str) -> Any:
    """addcmul/addcdiv's ``value`` as the kernel uses it: a Python number of the result's kind (torch's
    ``value.to<scalar_t>()``: truncated for an integer result; a float one rounds it to its own dtype,
    as numpy does with a Python float beside a float32 array)."""
    refuse_complex(value)  # Note [Complex numbers are refused]
    if isinstance(value, (bool, np.bool_)):
        value = int(value)
    elif not isinstance(value, (int, float, np.number)):
        raise TypeError(f"{fn}(): argument 'value' must be Number, not {type_label(value)}")
    value = value.item() if isinstance(value, np.generic) else value
    return int(value) if kind in "iu" else value


def addcmul(x: Tensor, tensor1: Tensor, tensor2: Tensor, *, value: Any = 1) -> Tensor:
    """torch's ``addcmul``: ``input + value * tensor1 * tensor2``, rounded as ``(value * tensor1) * tensor2``
    then added. torch's CPU kernel fuses the last multiply and the add (one rounding, FMA); the Array API
    has no fused multiply-add, so asyncgrad rounds twice and agrees with torch to the last bit of the
    product (Note [In place without a temporary] in ops/inplace.py)."""
    return _pointwise(AddcmulBackward0, "addcmul", x, tensor1, tensor2, value)


def addcdiv(x: Tensor, tensor1: Tensor, tensor2: Tensor, *, value: Any = 1) -> Tensor:
    """torch's ``addcdiv``: ``input + value * tensor1 / tensor2``, rounded as torch's kernel rounds it,
    ``(value * tensor1) / tensor2`` then added (bit for bit torch's on the cpu)."""
    return _pointwise(AddcdivBackward0, "addcdiv", x, tensor1, tensor2, value)


def _pointwise(cls: type[OpNode], name: str, x: Tensor, tensor1: Tensor, tensor2: Tensor, value: Any) -> Tensor:
    tensor_arg(x, name, "input", 1)
    tensor_arg(tensor1, name, "tensor1", 2)
    tensor_arg(tensor2, name, "tensor2", 3)
    same_device(x, tensor1)
    dev = same_device(x, tensor2)
    d, d1, d2 = x.data, tensor1.data, tensor2.data
    if cls is AddcdivBackward0 and tensor1.dtype.kind in "biu" and tensor2.dtype.kind in "biu":
        raise RuntimeError(ADDCDIV_INTEGERS)
    dtype = result_dtype(d, d1, d2)
    if dtype.kind == "b":
        raise NotImplementedError(f'"{name}_cpu_out" not implemented for \'Bool\'')
    backend = dev.backend
    d, d1, d2 = (a if _dtype_of(a) == dtype else backend.astype(a, dtype) for a in (d, d1, d2))
    v = pointwise_value(value, dtype.kind, name)
    try:
        scaled = d1 if v == 1 else d1 * v  # exact when value is 1: the product is tensor1 itself
        out = d + (scaled * d2 if cls is AddcmulBackward0 else scaled / d2)
    except ValueError:
        raise broadcast_error(d.shape, d1.shape, d2.shape) from None
    needs1, needs2 = tensor1._requires_grad, tensor2._requires_grad
    divides = cls is AddcdivBackward0  # tensor2's gradient needs tensor2 itself
    saved = (tensor1 if needs2 else None, tensor2 if needs1 or (divides and needs2) else None)
    return record(cls, (x, tensor1, tensor2), out, dev, d.shape, d1.shape, d2.shape, v, saved=saved)


def _c_type_name(dtype: Any) -> str:
    """torch's C type name of a dtype in its dtype-mismatch messages (``double``, ``float``, ``long int``)."""
    return {"float64": "double", "float32": "float", "float16": "c10::Half", "int64": "long int", "int32": "int",
            "int16": "short int", "int8": "signed char", "uint8": "unsigned char", "bool": "bool"}[np.dtype(dtype).name]


class FmodBackward0(OpNode):
    """fmod / remainder by a number: the gradient passes unchanged."""

    __slots__ = ()

    def backward(self, F, g):
        return (g,)


class RemainderBackward0(FmodBackward0):
    __slots__ = ()


class FmodBackward1(_TwoSided):
    """fmod(a, b) = a - b trunc(a / b): d/db = -trunc(a / b)."""

    __slots__ = ()
    work_per_element = 4

    def grads(self, F, g, a, b):
        return g, -g * F.trunc(a / b)


class RemainderBackward1(_TwoSided):
    """remainder(a, b) = a - b floor(a / b): d/db = -floor(a / b)."""

    __slots__ = ()
    work_per_element = 4

    def grads(self, F, g, a, b):
        return g, -g * F.floor(a / b)


def _modulo(name: str, a: Any, b: Any) -> Tensor:
    ta, tb, da, db, dev = _binary(name, a, b, False)
    if _dtype_of(da) == np.bool_:
        raise NotImplementedError(f'"{name}_cpu" not implemented for \'Bool\'')
    integral = _dtype_of(da if da.__class__ not in _PLAIN_NUMBERS else db).kind in "biu" and (
        db.__class__ is not float)
    if integral and (bool((db == 0) if db.__class__ in _PLAIN_NUMBERS else dev.xp.any(db == 0))):
        raise RuntimeError("ZeroDivisionError")
    try:
        out = dev.backend.fmod(da, db) if name == "fmod" else dev.xp.remainder(da, db)
    except ValueError:
        raise broadcast_error(*_shapes(da, db)) from None
    if tb is None and db.__class__ in _PLAIN_NUMBERS:
        return record(FmodBackward0 if name == "fmod" else RemainderBackward0, (ta,), out, dev)
    if not recording(ta, tb):
        return plain(out, dev)
    sa, sb = _keep(ta, da, dev)[0], _keep(tb, db, dev)[0]
    return record(FmodBackward1 if name == "fmod" else RemainderBackward1, (ta, tb), out, dev, *_shapes(da, db),
                  saved=(sa, sb))


def fmod(a: Tensor, b: Any) -> Tensor:
    """torch's ``fmod``: C's remainder, with the dividend's sign; integers by zero are refused."""
    return _modulo("fmod", a, b)


def remainder(a: Tensor, b: Any) -> Tensor:
    """torch's ``remainder``: Python's ``%``, with the divisor's sign."""
    return _modulo("remainder", a, b)


class CopysignBackward0(_TwoSided):
    """copysign(a, b): d/da = out / a (0 where a == 0), none for b, as torch."""

    __slots__ = ()
    saves_result = True
    work_per_element = 4

    def grads(self, F, g, a, out):
        return F.where(a == 0, 0.0, g * (out / F.where(a == 0, 1.0, a))), F.zeros_like(g)


class CopysignBackward1(OpNode):
    __slots__ = ()
    saves_result = True
    work_per_element = 4

    def backward(self, F, g):
        a, out = F.unpack(self)
        return (F.where(a == 0, 0.0, g * (out / F.where(a == 0, 1.0, a))),)


def copysign(a: Tensor, b: Any) -> Tensor:
    """torch's ``copysign``: ``|a|`` with ``b``'s sign, integers in the default float dtype."""
    ta, tb, da, db, dev = _binary("copysign", a, b, True)
    if db.__class__ in _PLAIN_NUMBERS:
        db = float(db)
    try:
        out = dev.xp.copysign(da, db)
    except ValueError:
        raise broadcast_error(*_shapes(da, db)) from None
    except TypeError:  # array_api_strict takes no Python number here
        out = dev.xp.copysign(da, dev.xp.full_like(da, db))
    if tb is None:
        return record(CopysignBackward1, (ta,), out, dev, saved=(ta,))
    return record(CopysignBackward0, (ta, tb), out, dev, *_shapes(da, db), saved=(ta,))


# comparisons under their other names (torch's aliases)
greater, less, greater_equal, less_equal, not_equal = gt, lt, ge, le, ne


def isclose(a: Tensor, b: Tensor, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
    """torch's ``isclose``: ``|a - b| <= atol + rtol |b|``, elementwise, a bool tensor (infinities
    are close only to themselves, NaN only with ``equal_nan``)."""
    tensor_arg(a, "isclose", "input", 1)
    tensor_arg(b, "isclose", "other", 2)
    if a.dtype != b.dtype:
        raise RuntimeError(f"{scalar_type_name(a.dtype)} did not match {scalar_type_name(b.dtype)}")
    dev = same_device(a, b)
    xp = dev.xp
    da, db = a.data, b.data
    if a.dtype.kind in "biu":
        da, db = (dev.backend.astype(v, dtypes.float64) for v in (da, db))
    try:
        close = da == db
    except ValueError:
        raise broadcast_error(da.shape, db.shape) from None
    finite = xp.isfinite(da) & xp.isfinite(db)
    fa, fb = xp.where(finite, da, 0.0), xp.where(finite, db, 0.0)  # no inf - inf to warn of
    close = close | (finite & (xp.abs(fa - fb) <= atol + rtol * xp.abs(fb)))
    if equal_nan:
        close = close | (xp.isnan(da) & xp.isnan(db))
    return plain(close, dev)


def allclose(a: Tensor, b: Tensor, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
    """torch's ``allclose``: whether ``isclose`` holds everywhere."""
    close = isclose(a, b, rtol, atol, equal_nan)
    return bool(close.device.xp.all(close.data))


def equal(a: Tensor, b: Tensor) -> bool:
    """torch's ``equal``: the same shape and the same values (NaN equals nothing)."""
    tensor_arg(a, "equal", "input", 1)
    tensor_arg(b, "equal", "other", 2)
    dev = same_device(a, b)
    if a.shape != b.shape:
        return False
    ta, tb, da, db, dev = operands(a, b, "equal")
    return bool(dev.xp.all(da == db))


# --------------------------------------------------------------------------- the gamma family, i1, nan_to_num
def _to_default_float(x: Tensor) -> Any:
    """``x``'s array, in the default float dtype unless it is floating already (torch's float functions)."""
    data = x.data
    return data if x.dtype.kind == "f" else x.device.backend.astype(data, dtypes.get_default_dtype())


class PolygammaBackward0(OpNode):
    """``polygamma(n, x)``: ``g * polygamma(n + 1, x)`` (torch's derivatives.yaml)."""

    __slots__ = ("n",)
    work_per_element = 20

    def backward(self, F, g):
        (x,) = F.unpack(self)
        return (g * F.polygamma(self.n + 1, x),)


def polygamma(n: int, input: Tensor) -> Tensor:
    """torch's ``polygamma(n, input)``: the ``n``-th derivative of digamma (``n >= 0``)."""
    n = int_arg(n, "polygamma", "n", 1)
    if input.__class__ is not Tensor:
        tensor_arg(input, "polygamma", "input", 2)
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    dev = input.device
    out = dev.backend.polygamma(n, _to_default_float(input))
    return record(PolygammaBackward0, (input,), out, dev, n, saved=(input,))


class MvlgammaBackward0(OpNode):
    """``mvlgamma(x, p)``: ``g * Σ_j digamma(x - j/2)``, j = 0..p-1 (torch's ``mvlgamma_backward``)."""

    __slots__ = ("p",)
    work_per_element = 20

    def backward(self, F, g):
        (x,) = F.unpack(self)
        total = F.digamma(x)
        for j in range(1, self.p):
            total = total + F.digamma(x - 0.5 * j)
        return (g * total,)


def mvlgamma(input: Tensor, p: int) -> Tensor:
    """torch's ``mvlgamma(input, p)``: the multivariate log-gamma, ``Σ_j lgamma(x - j/2) + p(p-1)/4 log π``."""
    if input.__class__ is not Tensor:
        tensor_arg(input, "mvlgamma", "input", 1)
    p = int_arg(p, "mvlgamma", "p", 2)
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    dev = input.device
    backend = dev.backend
    data = _to_default_float(input)
    out = backend.lgamma(data)
    for j in range(1, p):
        out = out + backend.lgamma(data - 0.5 * j)
    out = out + (p * (p - 1) / 4 * math.log(math.pi))
    return record(MvlgammaBackward0, (input,), backend.astype(out, backend.dtype(data)), dev, p, saved=(input,))


class SpecialI1Backward0(OpNode):
    """``i1(x)``: ``g * (i0(x) - i1(x) / x)``, 0.5 where ``|x|`` is at most the dtype's epsilon (torch's
    ``i1_backward``, which keeps the limit at 0)."""

    __slots__ = ("eps",)
    work_per_element = 20
    saves_result = True

    def backward(self, F, g):
        x, y = F.unpack(self)
        tiny = F.abs(x) <= self.eps
        safe = F.where(tiny, self.eps, x)
        return (g * F.where(tiny, 0.5, F.i0(safe) - y / safe),)


def special_i1(input: Tensor) -> Tensor:
    """torch's ``special.i1``: the modified Bessel function of the first kind, order 1."""
    if input.__class__ is not Tensor:
        tensor_arg(input, "special_i1", "input", 1)
    dev = input.device
    data = _to_default_float(input)
    eps = float(np.finfo(dev.backend.dtype(data)).eps)
    return record(SpecialI1Backward0, (input,), dev.backend.i1(data), dev, eps, saved=(input,))


class NanToNumBackward0(OpNode):
    """``nan_to_num``: ``g * isfinite(x)`` (torch's derivatives.yaml)."""

    work_per_element = 2

    def backward(self, F, g):
        (x,) = F.unpack(self)
        return (F.where(F.isfinite(x), g, 0.0),)


def nan_to_num(input: Tensor, nan: float | None = 0.0, posinf: float | None = None,
               neginf: float | None = None) -> Tensor:
    """torch's ``nan_to_num``: NaN -> ``nan`` (0 by default), ±inf -> ``posinf``/``neginf`` (the
    dtype's largest/lowest by default); integer and bool tensors come back as copies."""
    if input.__class__ is not Tensor:
        tensor_arg(input, "nan_to_num", "input", 1)
    dev = input.device
    data = input.data
    if input.dtype.kind != "f":
        return record(NanToNumBackward0, (input,), dev.xp.asarray(data, copy=True), dev, saved=(input,))
    info = np.finfo(input.dtype)
    xp = dev.xp
    big = float(info.max) if posinf is None else float(posinf)
    low = float(info.min) if neginf is None else float(neginf)
    out = xp.where(xp.isnan(data), 0.0 if nan is None else float(nan), data)
    out = xp.where(out == math.inf, big, out)
    out = xp.where(out == -math.inf, low, out)
    return record(NanToNumBackward0, (input,), out, dev, saved=(input,))


def positive(input: Tensor) -> Tensor:
    """torch's ``positive``: ``input`` itself (no node, as torch), refused for bool."""
    if input.__class__ is not Tensor:
        tensor_arg(input, "positive", "input", 1)
    if input.dtype == np.bool_:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return input


# --------------------------------------------------------------------------- fill, frexp
class FillBackward0(OpNode):
    """``fill(x, number)``: nothing of ``x`` reaches the result."""

    def backward(self, F, g):
        return (F.zeros_like(g),)


class FillBackward1(OpNode):
    """``fill(x, value)`` with a 0-d tensor ``value``: it receives the whole gradient's sum."""

    def backward(self, F, g):
        return (F.zeros_like(g) if self.needs(0) else None, F.sum(g) if self.needs(1) else None)


def fill(input: Tensor, value: Any) -> Tensor:
    """torch's ``fill``: a tensor like ``input`` holding ``value`` (a number or a 0-d tensor) everywhere."""
    if input.__class__ is not Tensor:
        tensor_arg(input, "fill", "input", 1)
    dev = input.device
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise RuntimeError("fill_ only supports 0-dimension value tensor but got tensor with "
                               f"{value.ndim} dimensions.")
        backend = dev.backend
        if value.device is dev:
            one = backend.astype(value.data, input.dtype)
        else:  # torch takes a 0-d value from another device
            one = backend.full((), value.item(), input.dtype)
        out = dev.xp.asarray(dev.xp.broadcast_to(one, tuple(input.shape)), copy=True)
        return record(FillBackward1, (input, value), out, dev)
    number_arg(value, "fill", "value", 2)
    return record(FillBackward0, (input,), dev.backend.full(input.shape, value, input.dtype), dev)


class FrexpBackward0(OpNode):
    """``frexp``'s mantissa ``x / 2^e``: ``g / 2^e`` (torch's derivatives.yaml; the exponent is an integer)."""

    def backward(self, F, g):
        (scale,) = F.unpack(self)  # 2^-e, kept as a constant tensor
        return (g * scale,)


class FrexpResult(tuple):
    """torch's ``frexp`` return type: ``(mantissa, exponent)``."""

    __slots__ = ()

    def __new__(cls, mantissa: Tensor, exponent: Tensor) -> FrexpResult:
        return tuple.__new__(cls, (mantissa, exponent))

    @property
    def mantissa(self) -> Tensor:
        return self[0]

    @property
    def exponent(self) -> Tensor:
        return self[1]


def frexp(input: Tensor) -> FrexpResult:
    """torch's ``frexp``: ``input = mantissa * 2 ** exponent`` with ``0.5 <= |mantissa| < 1`` (0, inf
    and NaN are their own mantissa, with exponent 0); the exponent is int32."""
    if input.__class__ is not Tensor:
        tensor_arg(input, "frexp", "input", 1)
    if input.dtype.kind != "f":
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    dev = input.device
    xp = dev.xp
    backend = dev.backend
    data = input.data
    magnitude = xp.abs(data)
    regular = (magnitude > 0) & xp.isfinite(data)
    safe = xp.where(regular, magnitude, 1.0)
    exponent = xp.floor(xp.log2(safe)) + 1.0
    mantissa = safe * 2.0 ** -exponent
    # log2 may round across a power of two: one step either way puts the mantissa in [0.5, 1)
    exponent = xp.where(mantissa >= 1.0, exponent + 1.0, xp.where(mantissa < 0.5, exponent - 1.0, exponent))
    scale = 2.0 ** -exponent
    mantissa = xp.where(regular, data * scale, data)
    exponent = xp.where(regular, exponent, 0.0)
    scale = xp.where(regular, scale, 1.0)
    exponent = backend.astype(exponent, np.dtype(np.int32))
    mantissa_tensor = record(FrexpBackward0, (input,), mantissa, dev, saved=(plain(scale, dev),))
    return FrexpResult(mantissa_tensor, plain(exponent, dev))


# --------------------------------------------------------------------------- fmax/fmin, logaddexp, ldexp, nextafter
def _two_tensors(name: str, a: Any, b: Any) -> tuple[Tensor, Tensor, Any, Any, Device]:
    """``operands`` for torch's ops that take two tensors and no number (``fmax(x, 2.0)`` is refused)."""
    tensor_arg(a, name, "input", 1)
    tensor_arg(b, name, "other", 2)
    return operands(a, b, name)  # type: ignore[return-value]


def _floats_only(name: str, da: Any) -> None:
    """torch's refusal of a float-only kernel on the promoted integer or bool operands."""
    dtype = _dtype_of(da)
    if dtype.kind != "f":
        raise NotImplementedError(f'"{name}_cpu" not implemented for \'{scalar_type_name(dtype)}\'')


class FmaxBackward0(MaximumBackward0):
    """fmax(a, b): the gradient goes to ``a`` where ``a >= b`` or ``b`` is NaN, else to ``b``
    (torch's formula: a tie goes to ``a``, and a NaN side is the one that loses)."""

    __slots__ = ()


class FminBackward0(MaximumBackward0):
    __slots__ = ()


def _nan_ignoring(name: str, a: Any, b: Any) -> Tensor:
    """fmax/fmin: the larger (smaller) of two tensors, a NaN side giving way to the other (NaN
    only where both are); the forward's own mask routes the gradient, saved as 0/1 shares."""
    ta, tb, da, db, dev = _two_tensors(name, a, b)
    xp = dev.xp
    if _dtype_of(da) == np.bool_:  # the Array API orders no bools: or / and
        try:
            out = (xp.logical_or if name == "fmax" else xp.logical_and)(da, db)
        except ValueError:
            raise broadcast_error(da.shape, db.shape) from None
        return plain(out, dev)
    try:
        a_wins = (da >= db) if name == "fmax" else (da <= db)
    except ValueError:
        raise broadcast_error(da.shape, db.shape) from None
    if _dtype_of(da).kind == "f":
        a_wins = a_wins | xp.isnan(db)
    out = xp.where(a_wins, da, db)
    if not recording(ta, tb):
        return plain(out, dev)
    share_a = dev.backend.astype(a_wins, _dtype_of(out))
    # the operands themselves too, as torch saves them: changing one in place refuses the backward
    return record(FmaxBackward0 if name == "fmax" else FminBackward0, (ta, tb), out, dev, da.shape, db.shape,
                  saved=(plain(share_a, dev), plain(1.0 - share_a, dev), ta, tb))


def fmax(input: Tensor, other: Tensor) -> Tensor:
    """torch's ``fmax``: the elementwise maximum of two tensors, ignoring NaN (numpy's ``fmax``)."""
    return _nan_ignoring("fmax", input, other)


def fmin(input: Tensor, other: Tensor) -> Tensor:
    """torch's ``fmin``: the elementwise minimum of two tensors, ignoring NaN (numpy's ``fmin``)."""
    return _nan_ignoring("fmin", input, other)


class LogaddexpBackward0(_TwoSided):
    """logaddexp(a, b) = log(e^a + e^b): d/da = 1 / (1 + e^(b - a)), d/db = 1 / (1 + e^(a - b))."""

    __slots__ = ()
    work_per_element = 20

    def grads(self, F, g, a, b):
        return g / (F.exp(b - a) + 1.0), g / (F.exp(a - b) + 1.0)


class Logaddexp2Backward0(_TwoSided):
    """logaddexp2(a, b) = log2(2^a + 2^b): d/da = 1 / (1 + 2^(b - a)), d/db = 1 / (1 + 2^(a - b))."""

    __slots__ = ()
    work_per_element = 20

    def grads(self, F, g, a, b):
        return g / (2.0 ** (b - a) + 1.0), g / (2.0 ** (a - b) + 1.0)


def _log_add_exp(name: str, a: Any, b: Any) -> Tensor:
    """torch's kernel: ``max + log1p(exp(-|a - b|))`` (base 2: ``exp2``, divided by ln 2), and
    ``a`` itself where both are the same infinity (whose difference is NaN)."""
    ta, tb, da, db, dev = _two_tensors(name, a, b)
    _floats_only(name, da)
    xp = dev.xp
    with dev.backend.quiet():
        try:
            top = xp.maximum(da, db)
        except ValueError:
            raise broadcast_error(da.shape, db.shape) from None
        gap = -xp.abs(da - db)
        out = top + (xp.log1p(xp.exp(gap)) if name == "logaddexp" else xp.log1p(2.0 ** gap) / _LN2)
        out = xp.where(xp.isinf(da) & (da == db), da, out)
    node = LogaddexpBackward0 if name == "logaddexp" else Logaddexp2Backward0
    return record(node, (ta, tb), out, dev, da.shape, db.shape, saved=(ta, tb))


def logaddexp(input: Tensor, other: Tensor) -> Tensor:
    """torch's ``logaddexp``: ``log(exp(input) + exp(other))`` without overflow, floating tensors."""
    return _log_add_exp("logaddexp", input, other)


def logaddexp2(input: Tensor, other: Tensor) -> Tensor:
    """torch's ``logaddexp2``: ``log2(2**input + 2**other)`` without overflow, floating tensors."""
    return _log_add_exp("logaddexp2", input, other)


class LdexpBackward0(OpNode):
    """ldexp(a, b) = a 2^b: d/da = 2^b, d/db = out ln 2 (torch's formula)."""

    __slots__ = ("a_shape", "b_shape")
    work_per_element = 6
    saves_result = True

    def backward(self, F, g):
        b, out = F.unpack(self)
        return (
            F.sum_to(g * 2.0 ** b, self.a_shape) if self.needs(0) else None,
            F.sum_to(g * out * _LN2, self.b_shape) if self.needs(1) else None,
        )


def ldexp(input: Tensor, other: Tensor) -> Tensor:
    """torch's ``ldexp``: ``input * 2**other``, two tensors; ``2**other`` is in ``other``'s float
    dtype (the default one for integers), then promoted with ``input`` as torch's ``mul``."""
    tensor_arg(input, "ldexp", "input", 1)
    tensor_arg(other, "ldexp", "other", 2)
    dev = input.device
    if other.device is not dev:
        same_device(input, other)
    backend = dev.backend
    exponent = other.data
    if other.dtype.kind != "f":
        exponent = backend.astype(exponent, dtypes.get_default_dtype())
    power = 2.0 ** exponent
    dtype = result_dtype(input.data, power)
    try:
        out = backend.astype(input.data, dtype) * backend.astype(power, dtype)
    except ValueError:
        raise broadcast_error(input.shape, other.shape) from None
    # an integer exponent is saved in its float dtype: it has no gradient, and ``2.0 ** b`` needs a float array
    saved = other if other.dtype.kind == "f" else plain(exponent, dev)
    return record(LdexpBackward0, (input, other), out, dev, input.shape, other.shape, saved=(saved,))


class NextafterBackward0(_TwoSided):
    """nextafter(a, b): d/da = 1 where a != b (0 where the result is b itself), d/db = 0 (torch's formula)."""

    __slots__ = ()
    work_per_element = 2

    def grads(self, F, g, a, b):
        return F.where(a != b, g, 0.0), F.zeros_like(g)


def nextafter(input: Tensor, other: Tensor) -> Tensor:
    """torch's ``nextafter``: the next floating value after ``input`` towards ``other``."""
    ta, tb, da, db, dev = _two_tensors("nextafter", input, other)
    _floats_only("nextafter", da)
    try:
        out = dev.xp.nextafter(da, db)
    except ValueError:
        raise broadcast_error(da.shape, db.shape) from None
    return record(NextafterBackward0, (ta, tb), out, dev, da.shape, db.shape, saved=(ta, tb))


# --------------------------------------------------------------------------- xlogy
class XlogyBackward0(OpNode):
    """xlogy(x, y) = x log(y), 0 where x is 0 (unless y is NaN): d/dx = xlogy(g, y), 0 where x is 0
    and y <= 0; d/dy = g x / y (torch's formulas). A number operand is saved as a constant."""

    __slots__ = ("x_shape", "y_shape")
    work_per_element = 6

    def backward(self, F, g):
        x, y = F.unpack(self)
        gx = gy = None
        if self.needs(0):
            # log(y): -inf at 0 and NaN below, given as such (numpy would warn making them)
            log_y = F.where(y == 0, -math.inf, F.log(F.where(y > 0, y, math.nan)))
            xlogy_g = F.where(g == 0, F.where(y != y, y, 0.0), g * log_y)  # xlogy(g, y): 0 at g == 0 unless y is NaN
            gx = F.sum_to(F.where(x == 0, F.where(y <= 0, 0.0, xlogy_g), xlogy_g), self.x_shape)
        if self.needs(1):
            gy = F.sum_to(g * x / y, self.y_shape)
        return gx, gy


class XlogyBackward1(XlogyBackward0):
    """xlogy(number, tensor)."""

    __slots__ = ()


class XlogyBackward2(XlogyBackward0):
    """xlogy(tensor, number)."""

    __slots__ = ()


def xlogy(input: Any, other: Any) -> Tensor:
    """torch's ``xlogy``: ``input * log(other)``, 0 where ``input`` is 0 (unless ``other`` is NaN);
    tensors or one number, broadcast, integers in the default float dtype."""
    tx, ty, dx, dy, dev = operands(input, other, "xlogy")
    xp, backend = dev.xp, dev.backend
    # a number is weak (``operands``): it takes the tensor's dtype, and integers compute in the default float dtype
    if dx.__class__ in _PLAIN_NUMBERS:
        dx = backend.full((), dx, _dtype_of(dy))
    elif dy.__class__ in _PLAIN_NUMBERS:
        dy = backend.full((), dy, _dtype_of(dx))
    if _dtype_of(dx).kind != "f":
        default = np.dtype(dtypes.get_default_dtype())
        dx, dy = backend.astype(dx, default), backend.astype(dy, default)
    with backend.quiet():
        try:
            out = xp.where((dx == 0) & ~xp.isnan(dy), xp.zeros_like(dx * dy), dx * xp.log(dy))
        except ValueError:
            raise broadcast_error(dx.shape, dy.shape) from None
    node = XlogyBackward0 if tx is not None and ty is not None else XlogyBackward1 if tx is None else XlogyBackward2
    return record(node, (tx, ty), out, dev, tuple(dx.shape), tuple(dy.shape),
                  saved=(tx if tx is not None else plain(dx, dev), ty if ty is not None else plain(dy, dev)))


# --------------------------------------------------------------------------- rsub
class RsubBackward0(OpNode):
    """rsub(input, other, alpha) = other - alpha input: d/dinput = -alpha, d/dother = 1."""

    __slots__ = ("a_shape", "b_shape", "alpha")

    def backward(self, F, g):
        return (
            F.sum_to(-g if self.alpha == 1 else g * -self.alpha, self.a_shape) if self.needs(0) else None,
            F.sum_to(g, self.b_shape) if self.needs(1) else None,
        )


class RsubBackward1(OpNode):
    """rsub(tensor, number): torch's name for the number form (``2.0 - x``); one input."""

    __slots__ = ("alpha",)

    def backward(self, F, g):
        return (-g if self.alpha == 1 else g * -self.alpha,)


def rsub(input: Tensor, other: Any, alpha: Any = 1) -> Tensor:
    """torch's ``rsub``: ``other - alpha * input`` (``other - input`` is ``input.__rsub__(other)``)."""
    if input.__class__ is not Tensor:
        tensor_arg(input, "rsub", "input", 1)
    ta, tb, da, db, dev = operands(input, other, "rsub")
    try:
        out = db - da if alpha == 1 else db - da * alpha
    except ValueError:
        raise broadcast_error(_shape_of(da), _shape_of(db)) from None
    except TypeError:
        if _is_bool(da) and _is_bool(db):
            raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or "
                               "`logical_xor()` operator instead.") from None
        raise
    if tb is None and db.__class__ in _PLAIN_NUMBERS:
        return record(RsubBackward1, (ta,), out, dev, alpha)
    return record(RsubBackward0, (ta, tb), out, dev, _shape_of(da), _shape_of(db), alpha)


# --------------------------------------------------------------------------- rounded division
class DivBackward2(OpNode):
    """div with a rounding mode: piecewise constant, so both gradients are zeros (torch's
    ``div_tensor_self_backward``/``other_backward`` with a rounding mode)."""

    __slots__ = ("a_shape", "b_shape")
    work_per_element = 0

    def backward(self, F, g):
        # Note [Zero derivatives are constants]
        return (
            F.sum_to(F.zeros_like(g), self.a_shape) if self.needs(0) else None,
            F.sum_to(F.zeros_like(g), self.b_shape) if self.num_outputs > 1 and self.needs(1) else None,
        )


class NotImplementedBackward(OpNode):
    """The node of an op torch records without a derivative (``floor_divide``): its backward raises."""

    __slots__ = ("op",)

    def name(self) -> str:
        return "torch::autograd::NotImplemented"

    def backward(self, F, g):
        raise RuntimeError(f"the derivative for '{self.op}' is not implemented.")


def _floor_divide_floats(dev: Any, a: Any, b: Any, like: Any) -> Any:
    """``a / b`` rounded down for floats as torch computes it (c10's ``div_floor_floating``: the
    truncated quotient from ``fmod``, one down where the remainder's sign differs from the divisor's,
    rounded to the nearest integer, a signed zero for a zero quotient, IEEE's ``a / b`` for a zero
    divisor), so that every device gives torch's values: CuPy's ``floor_divide`` gives inf for
    ``inf // 2``, where torch and numpy give NaN. ``like``: the array operand (a number takes its dtype)."""
    xp = dev.xp
    if a.__class__ in _PLAIN_NUMBERS:
        a = dev.asarray(a, _dtype_of(like))
    if b.__class__ in _PLAIN_NUMBERS:
        b = dev.asarray(b, _dtype_of(like))
    mod = dev.backend.fmod(a, b)
    div = (a - mod) / b
    div = xp.where((mod != 0) & ((b < 0) != (mod < 0)), div - 1, div)
    floored = xp.floor(div)
    floored = xp.where(div - floored > 0.5, floored + 1, floored)
    out = xp.where(div != 0, floored, xp.copysign(xp.zeros_like(div), a / b))
    return xp.where(b == 0, a / b, out)


def _rounded_div(a: Any, b: Any, rounding_mode: str, name: str) -> Tensor:
    """``a / b`` rounded toward zero (``"trunc"``) or down (``"floor"``, Python's ``//``), in the
    operands' promoted dtype (integers stay integers); an integer division by zero is refused."""
    if rounding_mode not in ("trunc", "floor"):
        raise RuntimeError("div expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
                           f"'{rounding_mode}'")
    ta, tb, da, db, dev = operands(a, b, name)
    xp = dev.xp
    array = da if da.__class__ not in _PLAIN_NUMBERS else db
    dtype = _dtype_of(array)
    if dtype == np.bool_:
        raise NotImplementedError(f'"div_{rounding_mode}_cpu" not implemented for \'Bool\'')
    integral = dtype.kind in "iu"
    if integral and bool((db == 0) if db.__class__ in _PLAIN_NUMBERS else xp.any(db == 0)):
        raise RuntimeError("ZeroDivisionError")
    with dev.backend.quiet():
        try:
            if rounding_mode == "floor" and not integral:
                out = _floor_divide_floats(dev, da, db, array)
            elif rounding_mode == "floor":
                out = xp.floor_divide(da, db)
            elif not integral:
                out = xp.trunc(da / db)
            else:  # the floor quotient, one up where a remainder is left and the signs differ
                floor = xp.floor_divide(da, db)
                out = xp.where((da - floor * db != 0) & ((da < 0) != (db < 0)), floor + 1, floor)
        except ValueError:
            raise broadcast_error(_shape_of(da), _shape_of(db)) from None
    if name == "floor_divide":
        return record(NotImplementedBackward, (ta, tb), out, dev, "floor_divide")
    return record(DivBackward2, (ta, tb), out, dev, _shape_of(da), _shape_of(db))


def floor_divide(input: Any, other: Any) -> Tensor:
    """torch's ``floor_divide``: ``input // other`` rounded down, as ``div(rounding_mode="floor")``;
    torch records it without a derivative, and so does asyncgrad."""
    if not isinstance(input, Tensor):
        tensor_arg(input, "floor_divide", "input", 1)
    return _rounded_div(input, other, "floor", "floor_divide")


def rfloor_divide(input: Tensor, other: Any) -> Tensor:
    """``other // input`` for an ``other`` that is not a tensor."""
    return _rounded_div(other, input, "floor", "floor_divide")


# --------------------------------------------------------------------------- the binary table
# Note [The binary table]: a two-operand elementwise op is one row of ``_BINARY``:
#
#   name       the function (and Tensor method) name, as in torch's messages
#   general    ``(a, b) -> Tensor`` on any operands: ``operands`` (torch's promotion, one device),
#              the forward on the device's arrays, ``broadcast_error``, ``record`` with the op's node;
#              it raises ``UnsupportedOperand`` for an operand no op takes
#   operator   the operator method (``"__add__"``) or None
#   reflected  the reflected operator method (``"__radd__"``) or None
#   rgeneral   ``(self, other) -> Tensor`` for ``other <op> self``, or None where the op commutes
#              (the operator form serves both sides)
#   number     the number node or None: the row takes the number path (Note [The number path])
#   nforward   ``(array, number) -> array`` of the number path: the general forward's own operator
#   in_place   True: Tensor has ``name_`` and, with an operator, the augmented operator (``__iadd__``),
#              built from the function form in ops/__init__.py
#
# ``_number_first`` makes each row's function form (a module attribute named ``name``) and its
# operator forms (``OPERATORS``, installed on Tensor by ops/__init__.py), so the number path, the
# ``NotImplemented`` of an operator, and the recording through ``general`` are written once for all
# rows. The forms add no Python frame before ``record`` on the number path: a closure's cells are
# read as fast as globals. ``add`` and ``sub`` take torch's ``alpha``: with one other than 1 they go
# to ``general`` directly.
_BINARY = (
    # name       general    operator       reflected       rgeneral  number             nforward          in_place
    ("add",       _add,      "__add__",     "__radd__",     None,     AddNumberBackward, operator.add,     True),
    ("sub",       _sub,      "__sub__",     "__rsub__",     rsub,     SubNumberBackward, operator.sub,     True),
    ("mul",       _mul,      "__mul__",     "__rmul__",     None,     MulNumberBackward, operator.mul,     True),
    ("div",       _div,      "__truediv__", "__rtruediv__", rdiv,     DivNumberBackward, operator.truediv, True),
    ("pow",       pow,       "__pow__",     "__rpow__",     rpow,     None,              None,             False),
    ("remainder", remainder, "__mod__",     None,           None,     None,              None,             False),
    ("fmod",      fmod,      None,          None,           None,     None,              None,             False),
    ("maximum",   maximum,   None,          None,           None,     None,              None,             False),
    ("minimum",   minimum,   None,          None,           None,     None,              None,             False),
    ("atan2",     atan2,     None,          None,           None,     None,              None,             False),
    ("hypot",     hypot,     None,          None,           None,     None,              None,             False),
    ("copysign",  copysign,  None,          None,           None,     None,              None,             False),
    ("true_divide", _div,    None,          None,           None,     DivNumberBackward, operator.truediv, True),
    ("floor_divide", floor_divide, "__floordiv__", "__rfloordiv__", rfloor_divide, None,   None,             True),
    ("fmax",      fmax,      None,          None,           None,     None,              None,             False),
    ("fmin",      fmin,      None,          None,           None,     None,              None,             False),
    ("ldexp",     ldexp,     None,          None,           None,     None,              None,             True),
    ("logaddexp", logaddexp, None,          None,           None,     None,              None,             False),
    ("logaddexp2", logaddexp2, None,        None,           None,     None,              None,             False),
    ("nextafter", nextafter, None,          None,           None,     None,              None,             True),
    ("xlogy",     xlogy,     None,          None,           None,     None,              None,             True),
    ("rsub",      rsub,      None,          None,           None,     None,              None,             False),
    # comparisons: a bool tensor, no node
    ("lt",        lt,        "__lt__",      None,           None,     None,              None,             False),
    ("le",        le,        "__le__",      None,           None,     None,              None,             False),
    ("gt",        gt,        "__gt__",      None,           None,     None,              None,             False),
    ("ge",        ge,        "__ge__",      None,           None,     None,              None,             False),
    ("eq",        eq,        "__eq__",      None,           None,     None,              None,             False),
    ("ne",        ne,        "__ne__",      None,           None,     None,              None,             False),
)

FUNCTIONS: dict[str, Callable] = {}
"""Each row's function form by name (Note [The binary table])."""
OPERATORS: dict[str, Callable] = {}
"""Each row's operator forms by method name (``"__add__"``, ``"__radd__"``)."""
IN_PLACE: tuple[tuple[str, str], ...] = tuple((row[0], row[2]) for row in _BINARY if row[7])
"""(name, operator or None) of the rows with an in-place method (and, with an operator, an augmented one)."""

for _name, _general, _dunder, _reflected, _rgeneral, _number, _nforward, _ in _BINARY:
    FUNCTIONS[_name] = _number_first(_general, _number, _nforward, False)
    if _dunder is not None:
        _form = OPERATORS[_dunder] = _number_first(_general, _number, _nforward, True)
        _form.__name__ = _form.__qualname__ = _dunder
    if _reflected is not None:
        if _rgeneral is None:
            OPERATORS[_reflected] = OPERATORS[_dunder]
        else:
            _form = OPERATORS[_reflected] = _number_first(_rgeneral, None, None, True)
            _form.__name__ = _form.__qualname__ = _reflected
del _name, _general, _dunder, _reflected, _rgeneral, _number, _nforward, _form

# the function forms of the number rows, as plain assignments that type checkers and readers can follow
_add_number_first, _sub_number_first, mul, _div_number_first, true_divide = (
    FUNCTIONS[n] for n in ("add", "sub", "mul", "div", "true_divide"))
true_divide.__name__ = true_divide.__qualname__ = "true_divide"
assert all(FUNCTIONS[row[0]] is globals()[row[0]] for row in _BINARY if row[5] is None), (
    "a row of _BINARY without a number path names its module function")


def add(input: Any, other: Any, alpha: Any = 1) -> Tensor:
    """torch's ``add``: ``input + alpha * other``, broadcast, promoted as torch promotes (Note [The binary
    table])."""
    return _add_number_first(input, other) if alpha == 1 else _add(input, other, alpha)


def sub(input: Any, other: Any, alpha: Any = 1) -> Tensor:
    """torch's ``sub``: ``input - alpha * other``, broadcast, promoted as torch promotes (Note [The binary
    table])."""
    return _sub_number_first(input, other) if alpha == 1 else _sub(input, other, alpha)


def div(input: Any, other: Any, *, rounding_mode: str | None = None) -> Tensor:
    """torch's ``div``: true division (integers in the default float dtype), or with ``rounding_mode``
    ``"trunc"``/``"floor"`` the quotient rounded in the operands' dtype, whose gradient is zeros
    (Note [The binary table])."""
    if rounding_mode is None:
        return _div_number_first(input, other)
    if not isinstance(input, Tensor):
        tensor_arg(input, "div", "input", 1)
    return _rounded_div(input, other, rounding_mode, "div")


FUNCTIONS["add"], FUNCTIONS["sub"], FUNCTIONS["div"] = add, sub, div

NOT_METHODS = frozenset({"rsub"})
"""The rows whose function form torch has no Tensor method for (``torch.rsub`` only)."""
