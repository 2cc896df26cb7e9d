"""Elementwise ops: each forward beside its backward formula, broadcasting summed back."""

from __future__ import annotations

from typing import Any

import numpy as np

from asyncgrad import dtypes
from asyncgrad._convert import to_array
from asyncgrad._validate import check_array_dtype, complex_error, is_complex_error, number_arg, tensor_arg, type_label
from asyncgrad.autograd.accumulate import gradient_edge
from asyncgrad.autograd.grad_mode import grad_enabled
from asyncgrad.autograd.graph import NO_EDGE
from asyncgrad.autograd.saved import SavedTensor
from asyncgrad.ops._node import ArrayMath, OpNode, SavesVariables, record_node, same_device
from asyncgrad.tensor import Tensor, scalar_type_name

_SCALARS = (int, float, bool, np.number, np.bool_)


class UnsupportedOperand(TypeError):
    """An operand no op takes (None, a string, a dict): the operator forms turn it into
    ``NotImplemented`` so Python words the error (and ``t == None`` is False), as with torch."""


def operands(a: Any, b: Any, name: str = "add") -> tuple[Tensor | None, Tensor | None, Any, Any, Any]:
    """Split a binary op's arguments into (tensor or None, ...) and the values to compute with.

    Python scalars stay Python scalars so numpy's weak scalar promotion keeps the tensor's
    dtype (``float32_tensor * 2.0`` is float32, as in torch). Two tensors of different dtypes
    follow torch's promotion, not numpy's (see ``_promote``). ``name`` words the error for an
    operand that is neither a tensor nor a number.
    """
    ta = a if type(a) is Tensor or isinstance(a, Tensor) else None
    tb = b if type(b) is Tensor or isinstance(b, Tensor) else None
    if ta is not None and tb is not None:
        da, db = ta.data, tb.data
        if da.dtype != db.dtype:
            da, db = _promote(da, db)
        return ta, tb, da, db, same_device(ta, tb)
    if ta is None and tb is None:
        raise UnsupportedOperand(f"{name}(): argument 'input' (position 1) must be Tensor, not {type_label(a)}")
    if ta is None:
        ta_val = _constant(a, tb, name, "input", 1)
        if ta_val.__class__ is not a.__class__ and isinstance(ta_val, np.ndarray) and ta_val.dtype != tb.data.dtype:
            ta_val, db = _promote(ta_val, tb.data)
            return None, tb, ta_val, db, tb.device
        return None, tb, ta_val, _float_for(a, tb.data), tb.device
    b_val = _constant(b, ta, name, "other", 2)
    if b_val.__class__ is not b.__class__ and isinstance(b_val, np.ndarray) and b_val.dtype != ta.data.dtype:
        da, b_val = _promote(ta.data, b_val)
        return ta, None, da, b_val, ta.device
    return ta, None, _float_for(b, ta.data), b_val, ta.device


_CATEGORY = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}


def _promote(da: Any, db: Any) -> tuple[Any, Any]:
    """Cast two arrays to torch's result dtype, where it differs from numpy's.

    torch ranks a higher category (bool < int < float) above a wider type (int64 with float32
    gives float32, numpy says float64), and a 0-d tensor decides the dtype only when its
    category is higher than the other operand's (float32 with a 0-d float64 gives float32).
    """
    dtype = result_dtype(da, db)
    return da.astype(dtype, copy=False), db.astype(dtype, copy=False)


def result_dtype(*arrays: Any) -> np.dtype:
    """torch's result type of several tensors' arrays (``_promote`` says why it is not numpy's)."""
    dtype, zero = arrays[0].dtype, arrays[0].ndim == 0
    for b in arrays[1:]:
        ka, kb = _CATEGORY.get(dtype.kind, 3), _CATEGORY.get(b.dtype.kind, 3)
        zero_b = b.ndim == 0
        if zero == zero_b:
            dtype = np.promote_types(dtype, b.dtype) if ka == kb else dtype if ka > kb else b.dtype
        elif zero:
            dtype = dtype if ka > kb else b.dtype
            zero = False
        else:
            dtype = b.dtype if kb > ka else dtype
    return dtype


def _float_for(scalar: Any, data: Any) -> Any:
    """An integer or bool tensor meeting a Python float computes in the default float dtype
    (torch), not numpy's float64 for int64."""
    if data.dtype.kind in "biu" and isinstance(scalar, (float, np.floating)):
        return data.astype(dtypes.get_default_dtype())
    return data


_PLAIN_NUMBERS = (int, float, bool)


def _constant(value: Any, like: Tensor, name: str, arg: str, pos: int) -> Any:
    """A non-tensor operand as a value to compute with: numbers as they are, numpy arrays and
    nested lists as arrays (read as ``ag.tensor`` reads them: Python floats in the default
    dtype, so ``int_tensor + [1.5]`` promotes instead of truncating the list to int).
    Complex values are refused (Note [Complex numbers are refused])."""
    if isinstance(value, _PLAIN_NUMBERS):
        return value
    if isinstance(value, (np.number, np.bool_)):
        if isinstance(value, np.complexfloating):
            raise complex_error(value.dtype)
        return value
    if isinstance(value, np.ndarray):
        check_array_dtype(value)
        return like.device.asarray(value) if like.device.type == "cuda" else value
    if isinstance(value, (list, tuple)):
        try:
            return to_array(value, None, like.device)
        except (TypeError, ValueError, RuntimeError) as exc:
            if is_complex_error(exc):
                raise
            # torch takes no lists here at all; one that is not a nest of numbers gets its words
            raise UnsupportedOperand(f"{name}(): argument '{arg}' (position {pos}) must be Tensor, not "
                                     f"{type_label(value)}") from None
    if isinstance(value, complex):
        raise complex_error("complex128")
    raise UnsupportedOperand(f"{name}(): argument '{arg}' (position {pos}) must be Tensor, not {type_label(value)}")


def broadcast_error(*shapes: tuple[int, ...]) -> RuntimeError:
    """torch's error for shapes that do not broadcast (numpy's ValueError says it otherwise).

    Built only once numpy has refused, so the forward pays nothing for it.
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


def _shape(t: Tensor | None, value: Any) -> tuple[int, ...]:
    return t.data.shape if t is not None else np.shape(value)


def _binary_node(node: OpNode, ta: Tensor | None, tb: Tensor | None) -> bool:
    """Fill the node's edges; False when nothing needs recording."""
    if not grad_enabled.get():
        return False
    ra = ta is not None and ta._requires_grad
    rb = tb is not None and tb._requires_grad
    if not (ra or rb):
        return False
    OpNode.__init__(node, (gradient_edge(ta) if ra else NO_EDGE, gradient_edge(tb) if rb else NO_EDGE))
    return True


def _plain(out: Any, device: Any) -> Tensor:
    return Tensor._make(out, device, False, None, 0, [0])


# --------------------------------------------------------------------------- tensor with a Python number
# The most common binary op, ``t * 2.0``, gets a node that keeps the number and needs no
# broadcasting bookkeeping. Torch names these nodes as the general ones, and so do we.
_NUMBERS = (int, float)


def _number_operand(a: Any, b: Any) -> bool:
    """``a`` a float tensor and ``b`` a Python int/float: no promotion, no broadcasting."""
    return type(b) in _NUMBERS and type(a) is Tensor and a.data.dtype.kind == "f"


def _with_number(cls: type, a: Tensor, out: Any, number: Any) -> Tensor:
    if not (a._requires_grad and grad_enabled.get()):
        return Tensor._make(out, a.device, False, None, 0, [0])
    node = cls((gradient_edge(a), NO_EDGE))
    node.number = number
    return record_node(node, out, a.device, cls.work_per_element * out.size)


class AddNumberBackward(OpNode):
    __slots__ = ("number",)
    work_per_element = 0

    def name(self) -> str:
        return "AddBackward0"

    def backward(self, F, g):
        return g, None


class SubNumberBackward(AddNumberBackward):
    __slots__ = ()

    def name(self) -> str:
        return "SubBackward0"


class MulNumberBackward(SavesVariables):  # torch saves the number, as a tensor
    __slots__ = ("number",)
    work_per_element = 1

    def name(self) -> str:
        return "MulBackward0"

    def backward(self, F, g):
        return g * self.number, None


class DivNumberBackward(MulNumberBackward):
    __slots__ = ()

    def name(self) -> str:
        return "DivBackward0"

    def backward(self, F, g):
        return g / self.number, None


# --------------------------------------------------------------------------- add / sub
class AddBackward0(OpNode):
    __slots__ = ("a_shape", "b_shape", "alpha")

    def backward(self, F, g):
        return (
            F.sum_to(g, self.a_shape) if self.needs(0) else None,
            F.sum_to(g if self.alpha == 1 else g * self.alpha, self.b_shape) if self.needs(1) else None,
        )


def add(a: Any, b: Any, alpha: Any = 1) -> Tensor:
    if alpha == 1 and _number_operand(a, b):
        return _with_number(AddNumberBackward, a, a.data + b, b)
    ta, tb, da, db, dev = operands(a, b, "add")
    try:
        out = da + db if alpha == 1 else da + db * alpha
    except ValueError:
        raise broadcast_error(np.shape(da), np.shape(db)) from None
    node = _new(AddBackward0)
    if not _binary_node(node, ta, tb):
        return _plain(out, dev)
    node.a_shape = _shape(ta, da)
    node.b_shape = _shape(tb, db)
    node.alpha = alpha
    return record_node(node, out, dev, 0 if node.a_shape == node.b_shape == out.shape else None)


class SubBackward0(OpNode):
    __slots__ = ("a_shape", "b_shape", "alpha")

    def backward(self, F, g):
        return (
            F.sum_to(g, self.a_shape) if self.needs(0) else None,
            F.sum_to(-g if self.alpha == 1 else g * -self.alpha, self.b_shape) if self.needs(1) else None,
        )


class RsubBackward1(SubBackward0):
    """scalar - tensor: torch's name for the reflected form."""

    __slots__ = ()


def sub(a: Any, b: Any, alpha: Any = 1) -> Tensor:
    if alpha == 1 and _number_operand(a, b):
        return _with_number(SubNumberBackward, a, a.data - b, b)
    ta, tb, da, db, dev = operands(a, b, "sub")
    try:
        out = da - db if alpha == 1 else da - db * alpha
    except ValueError:
        raise broadcast_error(np.shape(da), np.shape(db)) from None
    except TypeError:
        if np.result_type(da, db) == np.bool_:
            raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or "
                               "`logical_xor()` operator instead.") from None
        raise
    node = _new(SubBackward0 if ta is not None else RsubBackward1)
    if not _binary_node(node, ta, tb):
        return _plain(out, dev)
    node.a_shape = _shape(ta, da)
    node.b_shape = _shape(tb, db)
    node.alpha = alpha
    return record_node(node, out, dev, 0 if node.a_shape == node.b_shape == out.shape else None)


def rsub(a: Tensor, b: Any) -> Tensor:
    return sub(b, a)


# --------------------------------------------------------------------------- mul / div
class MulBackward0(OpNode):
    """Saves each side only if the other side needs its gradient; scalars are kept as is."""

    __slots__ = ("a_shape", "b_shape", "a_const", "b_const")
    work_per_element = 4

    def backward(self, F, g):
        saved = F.unpack(self)
        a = saved[0] if self.a_const is None else self.a_const
        b = saved[-1] if self.b_const is None else self.b_const
        return (
            F.sum_to(g * b, self.a_shape) if self.needs(0) else None,
            F.sum_to(g * a, self.b_shape) if self.needs(1) else None,
        )


def mul(a: Any, b: Any) -> Tensor:
    if _number_operand(a, b):
        return _with_number(MulNumberBackward, a, a.data * b, b)
    ta, tb, da, db, dev = operands(a, b, "mul")
    try:
        out = da * db
    except ValueError:
        raise broadcast_error(np.shape(da), np.shape(db)) from None
    node = _new(MulBackward0)
    if not _binary_node(node, ta, tb):
        return _plain(out, dev)
    node.a_shape = _shape(ta, da)
    node.b_shape = _shape(tb, db)
    saved = []
    node.a_const = node.b_const = None
    if ta is None:
        node.a_const = da
    elif node.needs(1):
        saved.append(SavedTensor(ta))
    if tb is None:
        node.b_const = db
    elif node.needs(0):
        saved.append(SavedTensor(tb))
    node.saved = tuple(saved)
    if node.a_const is None and not node.needs(1):
        node.a_const = 0
    if node.b_const is None and not node.needs(0):
        node.b_const = 0
    return record_node(node, out, dev)


class DivBackward0(OpNode):
    __slots__ = ("a_shape", "b_shape", "b_const")
    work_per_element = 9

    def backward(self, F, g):
        saved = F.unpack(self)
        b = saved[0] if self.b_const is None else self.b_const
        ga = gb = None
        if self.needs(0):
            ga = F.sum_to(g / b, self.a_shape)
        if self.needs(1):
            a = saved[1]
            gb = F.sum_to(-g * a / (b * b), self.b_shape)
        return ga, gb


def div(a: Any, b: Any) -> Tensor:
    if _number_operand(a, b):
        return _with_number(DivNumberBackward, a, a.data / b, b)
    ta, tb, da, db, dev = operands(a, b, "div")
    try:
        out = da / db
    except ValueError:
        raise broadcast_error(np.shape(da), np.shape(db)) from None
    if not (_is_float(da) or _is_float(db)):
        out = out.astype(dtypes.get_default_dtype())
    node = _new(DivBackward0)
    if not _binary_node(node, ta, tb):
        return _plain(out, dev)
    node.a_shape = _shape(ta, da)
    node.b_shape = _shape(tb, db)
    node.b_const = None if tb is not None else db
    saved = [SavedTensor(tb)] if tb is not None else []
    if node.needs(1):
        saved.append(SavedTensor(ta) if ta is not None else SavedTensor(_plain(np.asarray(da), dev)))
    node.saved = tuple(saved)
    return record_node(node, out, dev)


def _is_float(value: Any) -> bool:
    """Whether a true division's operand already decides its float dtype (ints give the default)."""
    return isinstance(value, float) or getattr(value, "dtype", np.dtype(int)).kind == "f"


class ReciprocalBackward0(OpNode):
    __slots__ = ()
    work_per_element = 3

    def backward(self, F, g):
        (y,) = F.unpack(self)
        return (-g * y * y,)


def reciprocal(x: Tensor) -> Tensor:
    if x.__class__ is not Tensor:
        tensor_arg(x, "reciprocal")
    return _unary(ReciprocalBackward0, x, 1 / _float_input(x), "output")


def rdiv(a: Tensor, b: Any) -> Tensor:
    """``b / a`` for a ``b`` that is not a tensor: torch computes ``a.reciprocal() * b``, so the
    result's node is MulBackward0 with a ReciprocalBackward0 behind it; so does asyncgrad."""
    return mul(reciprocal(a), b)


# --------------------------------------------------------------------------- pow
class PowBackward0(OpNode):
    """tensor ** scalar"""

    __slots__ = ("exponent",)
    work_per_element = 4

    def backward(self, F, g):
        (x,) = F.unpack(self)
        p = self.exponent
        if p == 0:
            return (g * 0,)
        return (g * (p * x ** (p - 1)),)


class PowBackward1(OpNode):
    """tensor ** tensor: d/da is 0 where b == 0 (not 0 * a ** -1, nan at a == 0), and d/db is
    masked to 0 where a == 0, as torch."""

    __slots__ = ("a_shape", "b_shape", "a_const")
    work_per_element = 20  # a ** (b - 1) and log(a): two transcendentals

    def backward(self, F, g):
        saved = F.unpack(self)
        if self.a_const is None:
            a, b, out = saved
        else:
            a, (b, out) = self.a_const, saved
        ga = gb = None
        if self.needs(0):
            b_zero = _zero(b)
            b_minus_1 = F.where(F.constant(b_zero, g), 1.0, b - 1) if b_zero.any() else b - 1
            ga = F.sum_to(g * (b * a ** b_minus_1), self.a_shape)
        if self.needs(1):
            if self.a_const is None:
                log_a = F.log(F.where(F.constant(_nonzero(a), g), a, 1.0))
            else:
                log_a = np.log(np.where(a != 0, a, 1.0))
            gb = F.sum_to(g * out * log_a, self.b_shape)
        return ga, gb


class PowBackward2(PowBackward1):
    """scalar ** tensor: torch's name for the scalar-base form."""

    __slots__ = ()


def _nonzero(a: Any) -> Any:
    data = a.data if isinstance(a, Tensor) else a
    return data != 0


def _zero(a: Any) -> Any:
    data = a.data if isinstance(a, Tensor) else a
    return data == 0


def pow(a: Any, b: Any) -> Tensor:
    ta, tb, da, db, dev = operands(a, b, "pow")
    try:
        out = da ** db
    except ValueError as exc:
        if "negative integer powers" in str(exc):
            raise RuntimeError("Integers to negative integer powers are not allowed.") from None
        raise broadcast_error(np.shape(da), np.shape(db)) from None
    if tb is None:
        if not (grad_enabled.get() and ta._requires_grad):
            return _plain(out, dev)
        node = PowBackward0((gradient_edge(ta),))
        node.exponent = db
        node.saved = (SavedTensor(ta),)
        return record_node(node, out, dev)
    node = _new(PowBackward1 if ta is not None else PowBackward2)
    if not _binary_node(node, ta, tb):
        return _plain(out, dev)
    node.a_shape = _shape(ta, da)
    node.b_shape = _shape(tb, db)
    node.a_const = None if ta is not None else da
    result = record_node(node, out, dev)
    saved = [SavedTensor(ta)] if ta is not None else []
    node.saved = tuple(saved + [SavedTensor(tb), SavedTensor(result, is_output=True)])
    return result


def rpow(a: Tensor, b: Any) -> Tensor:
    return pow(b, a)


# --------------------------------------------------------------------------- unary
def _unary(node_cls: type, x: Tensor, out: Any, save: str | None) -> Tensor:
    """Record a one-input op; ``save`` is "input", "output" or None."""
    if not (x._requires_grad and grad_enabled.get()):
        return Tensor._make(out, x.device, False, None, 0, [0])
    node = node_cls((gradient_edge(x),))
    result = record_node(node, out, x.device)
    if save == "input":
        node.saved = (SavedTensor(x),)
    elif save == "output":
        node.saved = (SavedTensor(result, is_output=True),)
    return result


def _float_input(x: Tensor) -> Any:
    """Integer inputs of float functions compute in the default float dtype, as torch."""
    data = x.data
    if data.dtype.kind != "f":
        return data.astype(dtypes.get_default_dtype())
    return data


class NegBackward0(OpNode):
    __slots__ = ()

    def backward(self, F, g):
        return (-g,)


def neg(x: Tensor) -> Tensor:
    if x.__class__ is not Tensor:
        tensor_arg(x, "neg")
    if x.data.dtype.kind == "b":
        raise RuntimeError("Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert "
                           "a mask, use the `~` or `logical_not()` operator instead.")
    return _unary(NegBackward0, x, -x.data, None)


class ExpBackward0(OpNode):
    __slots__ = ()

    def backward(self, F, g):
        (y,) = F.unpack(self)
        return (g * y,)


def exp(x: Tensor) -> Tensor:
    if x.__class__ is not Tensor:
        tensor_arg(x, "exp")
    return _unary(ExpBackward0, x, np.exp(_float_input(x)), "output")


class LogBackward0(OpNode):
    __slots__ = ()

    def backward(self, F, g):
        (x,) = F.unpack(self)
        return (g / x,)


def log(x: Tensor) -> Tensor:
    if x.__class__ is not Tensor:
        tensor_arg(x, "log")
    return _unary(LogBackward0, x, np.log(_float_input(x)), "input")


class SqrtBackward0(OpNode):
    __slots__ = ()
    work_per_element = 3

    def backward(self, F, g):
        (y,) = F.unpack(self)
        return (g / (2 * y),)


def sqrt(x: Tensor) -> Tensor:
    if x.__class__ is not Tensor:
        tensor_arg(x, "sqrt")
    return _unary(SqrtBackward0, x, np.sqrt(_float_input(x)), "output")


class SinBackward0(OpNode):
    __slots__ = ()
    work_per_element = 9

    def backward(self, F, g):
        (x,) = F.unpack(self)
        return (g * F.cos(x),)


def sin(x: Tensor) -> Tensor:
    if x.__class__ is not Tensor:
        tensor_arg(x, "sin")
    return _unary(SinBackward0, x, np.sin(_float_input(x)), "input")


class CosBackward0(OpNode):
    __slots__ = ()
    work_per_element = 9

    def backward(self, F, g):
        (x,) = F.unpack(self)
        return (g * -F.sin(x),)


def cos(x: Tensor) -> Tensor:
    if x.__class__ is not Tensor:
        tensor_arg(x, "cos")
    return _unary(CosBackward0, x, np.cos(_float_input(x)), "input")


class TanhBackward0(OpNode):
    __slots__ = ()
    work_per_element = 4

    def backward(self, F, g):
        (y,) = F.unpack(self)
        return (g * (1 - y * y),)


def tanh(x: Tensor) -> Tensor:
    if x.__class__ is not Tensor:
        tensor_arg(x, "tanh")
    return _unary(TanhBackward0, x, np.tanh(_float_input(x)), "output")


class SigmoidBackward0(OpNode):
    __slots__ = ()
    work_per_element = 4

    def backward(self, F, g):
        (y,) = F.unpack(self)
        return (g * (y * (1 - y)),)


def sigmoid(x: Tensor) -> Tensor:
    if x.__class__ is not Tensor:
        tensor_arg(x, "sigmoid")
    half = _float_input(x) * 0.5
    return _unary(SigmoidBackward0, x, np.tanh(half) * 0.5 + 0.5, "output")


class ReluBackward0(OpNode):
    __slots__ = ()
    work_per_element = 3

    def backward(self, F, g):
        (y,) = F.unpack(self)
        if F is ArrayMath:  # torch's threshold_backward: 0 where y <= 0, so a NaN passes the gradient
            return (g * ~(y <= 0),)
        return (threshold_backward(g, y),)


class ThresholdBackwardBackward0(OpNode):
    """relu's gradient as a function of the gradient and relu's result, as torch's threshold_backward:
    under create_graph it requires grad when the result does (its derivative there is zero)."""

    __slots__ = ()

    def backward(self, F, g):
        (y,) = F.unpack(self)
        gg = None
        if self.needs(0):
            gg = g * ~(y <= 0) if F is ArrayMath else threshold_backward(g, y)
        return (gg, g * 0 if self.needs(1) else None)


def threshold_backward(g: Tensor, y: Tensor) -> Tensor:
    out = g.data * ~(y.data <= 0)
    node = object.__new__(ThresholdBackwardBackward0)
    if not _binary_node(node, g, y):
        return _plain(out, g.device)
    node.saved = (SavedTensor(y),)
    return record_node(node, out, g.device)


def relu(x: Tensor) -> Tensor:
    if x.__class__ is not Tensor:
        tensor_arg(x, "relu")
    data = x.data
    if data.dtype.kind == "b":
        raise RuntimeError("Boolean inputs not supported for relu")
    return _unary(ReluBackward0, x, np.maximum(data, 0, dtype=data.dtype), "output")


class AbsBackward0(OpNode):
    __slots__ = ()
    work_per_element = 7

    def backward(self, F, g):
        (x,) = F.unpack(self)
        return (g * F.sign(x),)


def abs(x: Tensor) -> Tensor:
    if x.__class__ is not Tensor:
        tensor_arg(x, "abs")
    if x.data.dtype.kind == "b":
        raise NotImplementedError('"abs_cpu" not implemented for \'Bool\'')
    return _unary(AbsBackward0, x, np.abs(x.data), "input")


class SignBackward0(OpNode):
    __slots__ = ()

    def backward(self, F, g):
        return (g * 0,)


def sign(x: Tensor) -> Tensor:
    if x.__class__ is not Tensor:
        tensor_arg(x, "sign")
    data = x.data
    return _unary(SignBackward0, x, data.copy() if data.dtype.kind == "b" else np.sign(data), None)


class ClampBackward1(OpNode):
    """The gradient passes where min <= x <= max (inclusive, as torch)."""

    __slots__ = ()
    work_per_element = 3

    def backward(self, F, g):
        (mask,) = F.unpack(self)
        return (g * mask,)


def clamp(x: Tensor, min: Any = None, max: Any = None) -> Tensor:
    """``min``/``max``: numbers, or tensors that do not require grad (their gradient is not
    implemented, so one that requires it is refused rather than silently left out)."""
    if x.__class__ is not Tensor:
        tensor_arg(x, "clamp")
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    min, max = _bound(min, x, "min", 1), _bound(max, x, "max", 2)
    data = _float_for(min, _float_for(max, x.data))
    try:
        out = np.clip(data, min, max)
    except ValueError:
        raise broadcast_error(data.shape, *(np.shape(v) for v in (min, max) if v is not None)) from None
    if out.dtype != data.dtype and data.dtype.kind == "f":
        out = out.astype(data.dtype)
    result = _unary(ClampBackward1, x, out, None)
    if result.grad_fn is not None:
        mask = np.ones(data.shape, dtype=bool)
        if min is not None:
            mask &= data >= min
        if max is not None:
            mask &= data <= max
        result.grad_fn.saved = (SavedTensor(_plain(mask, x.device)),)
    return result


def _bound(value: Any, x: Tensor, name: str, pos: int) -> Any:
    if value is None:
        return None
    if isinstance(value, Tensor):
        same_device(x, value)
        if value._requires_grad and grad_enabled.get():
            raise NotImplementedError(f"clamp(): the gradient with respect to a '{name}' tensor is not implemented in "
                                      f"asyncgrad; pass {name}={name}.detach() or a number")
        return value.data
    return number_arg(value, "clamp", name, pos)


# --------------------------------------------------------------------------- two-tensor selections
class MaximumBackward0(OpNode):
    """torch's formula: ties split the gradient evenly, and a side gets none only where the
    other side strictly wins, so a NaN (which compares False both ways) passes it to both."""

    __slots__ = ("a_shape", "b_shape")

    def backward(self, F, g):
        share_a, share_b = F.unpack(self)[:2]
        return (
            F.sum_to(g * share_a, self.a_shape) if self.needs(0) else None,
            F.sum_to(g * share_b, self.b_shape) if self.needs(1) else None,
        )


class MinimumBackward0(MaximumBackward0):
    __slots__ = ()


def _select2(node_cls: type, a: Any, b: Any, pick: Any, name: str) -> Tensor:
    """maximum/minimum: ``pick`` is np.maximum or np.minimum, which propagate NaN as torch does
    (a ``where(a > b, a, b)`` would return b where a is NaN)."""
    ta, tb, da, db, dev = operands(a, b, name)
    if not hasattr(da, "dtype"):
        da = np.asarray(da, dtype=db.dtype)
    if not hasattr(db, "dtype"):
        db = np.asarray(db, dtype=da.dtype)
    try:
        out = pick(da, db)
    except ValueError:
        raise broadcast_error(np.shape(da), np.shape(db)) from None
    node = _new(node_cls)
    if not _binary_node(node, ta, tb):
        return _plain(out, dev)
    a_wins, b_wins = (da > db, da < db) if pick is np.maximum else (da < db, da > db)
    half = np.where(da == db, 0.5, 1.0).astype(out.dtype)
    node.a_shape = _shape(ta, da)
    node.b_shape = _shape(tb, db)
    # the operands themselves too, as torch saves them: changing one in place refuses the backward
    node.saved = (SavedTensor(_plain(half * ~b_wins, dev)), SavedTensor(_plain(half * ~a_wins, dev))) + tuple(
        SavedTensor(t) for t in (ta, tb) if t is not None)
    return record_node(node, out, dev)


def maximum(a: Any, b: Any) -> Tensor:
    return _select2(MaximumBackward0, a, b, np.maximum, "maximum")


def minimum(a: Any, b: Any) -> Tensor:
    return _select2(MinimumBackward0, a, b, np.minimum, "minimum")


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
        cond = condition.data
    elif isinstance(condition, (np.ndarray, bool, np.bool_)):
        cond = np.asarray(condition)
    else:
        raise TypeError(f"where(): argument 'condition' (position 1) must be Tensor, not {type_label(condition)}")
    if cond.dtype != np.bool_:
        raise RuntimeError("where expected condition to be a boolean tensor, but got a tensor with dtype "
                           f"{scalar_type_name(cond.dtype)}")
    if not isinstance(a, Tensor) and not isinstance(b, Tensor) and isinstance(a, _SCALARS):
        a = Tensor(a, device=condition.device if isinstance(condition, Tensor) else None)
    ta, tb, da, db, dev = operands(a, b, "where")
    if isinstance(condition, Tensor) and condition.device is not dev:
        same_device(condition, ta if ta is not None else tb)
    try:
        out = np.where(cond, da, db)
    except ValueError:
        raise broadcast_error(cond.shape, np.shape(da), np.shape(db)) from None
    node = _new(WhereBackward0)
    if not _binary_node(node, ta, tb):
        return _plain(out, dev)
    node.a_shape = _shape(ta, da)
    node.b_shape = _shape(tb, db)
    # the condition tensor itself, version-checked as torch does: changing it in place after
    # the forward makes backward fail instead of routing the gradient by the new mask
    saved = condition if isinstance(condition, Tensor) else _plain(np.array(cond), dev)
    node.saved = (SavedTensor(saved),)
    return record_node(node, out, dev)


# --------------------------------------------------------------------------- comparisons (no grad)
def _compare(op: Any, name: str) -> Any:
    def compare(a: Any, b: Any) -> Tensor:
        ta, tb, da, db, dev = operands(a, b, name)
        try:
            return _plain(op(da, db), dev)
        except ValueError:
            raise broadcast_error(np.shape(da), np.shape(db)) from None

    compare.__name__ = name
    return compare


lt = _compare(np.less, "lt")
le = _compare(np.less_equal, "le")
gt = _compare(np.greater, "gt")
ge = _compare(np.greater_equal, "ge")
eq = _compare(np.equal, "eq")
ne = _compare(np.not_equal, "ne")


def logical_not(x: Tensor) -> Tensor:
    if x.__class__ is not Tensor:
        tensor_arg(x, "logical_not")
    return _plain(np.logical_not(x.data), x.device)


_new = object.__new__
