"""The forward recording path's shortcuts, second round: the operator forms that take the number
path themselves (Note [The number path] in ops/elementwise.py). Each must
give what the function form gives: the same node, the same values and gradients, the same errors."""

from __future__ import annotations

import operator
import re

import numpy as np
import pytest
from helpers import check_op, has_torch, torch_defaults

import asyncgrad as ag
from asyncgrad.ops import elementwise
from asyncgrad.ops._node import OpNode, record

_OPS = [("add", operator.add, "AddBackward0"), ("sub", operator.sub, "SubBackward0"),
        ("mul", operator.mul, "MulBackward0"), ("div", operator.truediv, "DivBackward0")]


@pytest.mark.parametrize("name, op, node", _OPS)
@pytest.mark.parametrize("device", ["cpu", "sim:0"])
def test_operator_with_a_number_is_the_function_forms_result(name: str, op, node: str, device: str) -> None:
    x = ag.tensor([0.5, -1.25, 2.0], device=device, requires_grad=True)
    for number in (1.5, 3, -0.25):
        by_operator, by_function = op(x, number), getattr(ag, name)(x, number)
        assert by_operator.grad_fn.name() == by_function.grad_fn.name() == node
        assert by_operator.dtype == by_function.dtype == ag.float32
        assert np.array_equal(by_operator.detach().cpu().numpy(), by_function.detach().cpu().numpy())


@pytest.mark.parametrize("name, op, node", _OPS)
async def test_operator_with_a_number_differentiates(name: str, op, node: str, op_device: str) -> None:
    await check_op(lambda t: op(op(t, 1.75), 3), np.linspace(0.5, 1.5, 5), name=node)


@pytest.mark.parametrize("dtype", [ag.int64, ag.bool, ag.float32])
def test_operator_with_a_number_on_other_dtypes_promotes_as_torch(dtype) -> None:
    x = ag.tensor([1, 0, 1], dtype=dtype)
    for number in (2, 2.5):
        for op, name in ((operator.add, "add"), (operator.mul, "mul"), (operator.sub, "sub"),
                         (operator.truediv, "div")):
            if dtype is ag.bool and name == "sub":
                with pytest.raises(RuntimeError, match="Subtraction, the `-` operator, with two bool"):
                    op(x, True)
                continue
            assert op(x, number).dtype == getattr(ag, name)(x, number).dtype
            if has_torch():
                import torch

                tx = torch.tensor([1, 0, 1], dtype=getattr(torch, str(dtype).split(".")[-1]))
                with torch_defaults():  # the torch fixture of other tests leaves torch's default float64
                    theirs = str(op(tx, number).dtype).split(".")[-1]
                assert str(op(x, number).dtype).split(".")[-1] == theirs


@pytest.mark.parametrize("symbol, op", [("+", operator.add), ("-", operator.sub), ("*", operator.mul),
                                        ("/", operator.truediv)])
def test_operator_with_an_unsupported_operand_is_pythons_error(symbol: str, op) -> None:
    x = ag.tensor([1.0, 2.0])
    for other in (None, {}, object()):
        with pytest.raises(TypeError, match=re.escape(f"unsupported operand type(s) for {symbol}: 'Tensor' and")):
            op(x, other)
        left = re.escape(f"unsupported operand type(s) for {symbol}: '") + ".*' and 'Tensor'"
        with pytest.raises(TypeError, match=left):
            op(other, x)


def test_operator_methods_answer_not_implemented_and_functions_raise_torchs_words() -> None:
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    for method in ("__add__", "__radd__", "__sub__", "__mul__", "__rmul__", "__truediv__"):
        assert getattr(x, method)(None) is NotImplemented, method
    for name in ("add", "sub", "mul", "div"):
        with pytest.raises(TypeError, match=f"{name}\\(\\): argument 'other' \\(position 2\\) must be Tensor, not "
                                            "NoneType"):
            getattr(ag, name)(x, None)
    assert (x == None) is False  # noqa: E711 - the comparison itself is what is tested
    if has_torch():
        import torch

        with pytest.raises(TypeError, match="mul\\(\\): argument 'other' \\(position 2\\) must be Tensor, not "
                                            "NoneType"):
            torch.mul(torch.tensor([1.0]), None)


def test_numbers_and_numpy_scalars_on_the_left() -> None:
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    for left in (2.0, 2, np.float64(2.0), np.float32(2.0), np.int64(2)):
        assert np.array_equal((left * x).detach().numpy(), [2.0, 4.0]), type(left)
        assert np.array_equal((left + x).detach().numpy(), [3.0, 4.0]), type(left)
        assert (left * x).grad_fn.name() == "MulBackward0"
    assert np.array_equal((2.0 - x).detach().numpy(), [1.0, 0.0])
    assert (2.0 - x).grad_fn.name() == "RsubBackward1"
    assert np.array_equal((2.0 / x).detach().numpy(), [2.0, 1.0])


# Note [A node made by its class's own code] (ops/_node.py): each op class makes its nodes itself
class _ThreeFields(OpNode):
    __slots__ = ("first", "second", "third")
    work_per_element = 3


class _Free(OpNode):
    __slots__ = ()
    work_per_element = 0


def test_a_class_makes_its_node_with_its_fields_and_work() -> None:
    x = ag.tensor(np.ones((2, 3)), requires_grad=True)
    y = x * 1.0
    out = record(_ThreeFields, (y,), y.data * 2.0, y.device, "a", 2, None)
    node = out.grad_fn
    assert type(node) is _ThreeFields and (node.first, node.second, node.third) == ("a", 2, None)
    assert node.work == 18 and node.next_functions == ((y.grad_fn, 0),)
    assert node.topological_nr == y.grad_fn.topological_nr + 1 and node.sequence_nr > y.grad_fn.sequence_nr
    assert record(_ThreeFields, (y,), y.data, y.device, 1, 2, 3, work=5).grad_fn.work == 5
    assert record(_Free, (y,), y.data, y.device).grad_fn.work == 0
    assert record(_Free, (y,), y.data, y.device, work=7).grad_fn.work == 7


def test_fewer_fields_fill_the_first_slots_and_more_are_refused() -> None:
    x = ag.tensor(np.ones(3), requires_grad=True)
    node = record(_ThreeFields, (x,), x.data + 1.0, x.device, "a").grad_fn
    assert node.first == "a"
    with pytest.raises(AttributeError):
        assert node.second is None  # unset: raises
    with pytest.raises(TypeError, match="_ThreeFields keeps 3 fields, got 4"):
        record(_ThreeFields, (x,), x.data, x.device, 1, 2, 3, 4)
    with pytest.raises(TypeError, match="_Free keeps 0 fields, got 1"):
        record(_Free, (x,), x.data, x.device, 1)


def test_a_number_ops_node_takes_its_inputs_meta_and_sequence() -> None:
    x = ag.tensor(np.ones(4), dtype=ag.float64, requires_grad=True)
    y = x.tanh()
    for z in (y * 2.0, y + 1.0, y - 1.0, y / 2.0, 2.0 * y, 1.0 + y):
        assert z.grad_fn._input_meta is y.grad_fn._input_meta
        assert z.grad_fn.sequence_nr > y.grad_fn.sequence_nr
    w = y.to(ag.float32) * 2.0  # another dtype: its own meta
    assert w.grad_fn._input_meta[0][1] == np.dtype("float32")


# Note [A unary forward called by name] (ops/elementwise.py)
_BY_NAME = [row for row in elementwise._UNARY if isinstance(row[2], str)]


@pytest.mark.parametrize("row", _BY_NAME, ids=[row[0] for row in _BY_NAME])
@pytest.mark.parametrize("device", ["cpu", "sim:0"])
def test_a_unary_row_named_by_its_function_computes_it(row: tuple, device: str) -> None:
    name, node, function = row[0], row[1], row[2]
    values = np.array([0.25, 0.5, 0.75])
    x = ag.tensor(values, dtype=ag.float64, device=device, requires_grad=True)
    y = getattr(ag, name)(x)
    assert y.grad_fn.name() == node
    numpy_names = {"atan": "arctan", "asin": "arcsin", "acos": "arccos"}
    numpy_function = getattr(np, numpy_names.get(function, function), None)
    assert numpy_function is not None
    np.testing.assert_allclose(y.detach().cpu().numpy(), numpy_function(values), rtol=1e-15)
    ints = ag.tensor([1, 1], device=device)  # the other path: the row's forward with the function's name
    if row[3]:  # to_float: computes in the default float dtype
        expected = numpy_function(np.array([1.0, 1.0]))
        np.testing.assert_allclose(getattr(ag, name)(ints).cpu().numpy(), expected, rtol=1e-6)
    else:
        assert np.array_equal(getattr(ag, name)(ints).cpu().numpy(), numpy_function(np.array([1, 1])))
