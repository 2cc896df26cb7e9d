"""The binary table (Note [The binary table] in ops/elementwise.py): every row's forms are the ones
Tensor has, and the number path gives exactly what the row's general path gives."""

from __future__ import annotations

import numpy as np
import pytest

import asyncgrad as ag
from asyncgrad.ops import elementwise

ROWS = {row[0]: row for row in elementwise._BINARY}
NUMBER_ROWS = [name for name, row in ROWS.items() if row[5] is not None]


@pytest.mark.parametrize("name", sorted(ROWS))
def test_each_row_is_tensors_method_and_operators(name: str) -> None:
    _, general, dunder, reflected, rgeneral, number, _, in_place = ROWS[name]
    assert elementwise.FUNCTIONS[name] is getattr(elementwise, name)
    if name in elementwise.NOT_METHODS:  # torch.rsub: no Tensor method
        assert not hasattr(ag.Tensor, name)
    else:
        assert getattr(ag.Tensor, name) is elementwise.FUNCTIONS[name]
    if number is None and name not in ("add", "sub"):
        assert elementwise.FUNCTIONS[name] is general
    for method in (dunder, reflected):
        if method is not None:
            assert getattr(ag.Tensor, method) is elementwise.OPERATORS[method]
            assert getattr(ag.Tensor, method)(ag.tensor([1.0]), None) is NotImplemented
    if reflected is not None and rgeneral is None:  # a commuting op: one form serves both sides
        assert elementwise.OPERATORS[reflected] is elementwise.OPERATORS[dunder]
    assert hasattr(ag.Tensor, name + "_") == in_place
    if dunder is not None:  # true_divide_ has no augmented operator
        assert hasattr(ag.Tensor, "__i" + dunder[2:]) == in_place


@pytest.mark.parametrize("name", NUMBER_ROWS)
@pytest.mark.parametrize("dtype", [ag.float32, ag.float64])
@pytest.mark.parametrize("number", [1.0001, -3, 0.1, 2])
async def test_the_number_path_is_the_general_paths_result(name: str, dtype, number) -> None:
    general, dunder = ROWS[name][1], ROWS[name][2]
    x = ag.tensor([0.5, -1.25, 2.0, 1e-3], dtype=dtype, requires_grad=True)
    fast = elementwise.FUNCTIONS[name](x, number)
    by_operator = getattr(ag.Tensor, dunder)(x, number) if dunder is not None else fast
    slow = general(x, number)
    assert type(fast.grad_fn) is ROWS[name][5] is type(by_operator.grad_fn)
    assert type(slow.grad_fn) is not type(fast.grad_fn)  # the general path did run
    assert fast.grad_fn.name() == slow.grad_fn.name()
    assert fast.dtype == slow.dtype == dtype and fast.shape == slow.shape
    for result in (fast, by_operator):
        assert np.array_equal(result.detach().numpy(), slow.detach().numpy())
    (g_fast,) = await ag.autograd.grad(fast.sum(), [x])
    (g_slow,) = await ag.autograd.grad(slow.sum(), [x])
    assert np.array_equal(g_fast.numpy(), g_slow.numpy())


@pytest.mark.parametrize("name", NUMBER_ROWS)
def test_the_number_path_leaves_other_operands_to_the_general_path(name: str) -> None:
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    number = ROWS[name][5]
    for other in (True, np.float64(2.0), ag.tensor(2.0)):  # a bool, a numpy scalar, a tensor: not the path
        assert type(elementwise.FUNCTIONS[name](x, other).grad_fn) is not number
    assert type(elementwise.FUNCTIONS[name](ag.tensor([1, 2]).requires_grad_(False), 2).grad_fn) is not number
