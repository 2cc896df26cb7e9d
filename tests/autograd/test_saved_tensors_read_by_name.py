"""A node's ``_saved_<name>`` properties (Note [Saved tensors read by name] in ops/_node.py), against
torch's generated ones: the same names where asyncgrad has them, the same values (None where the op
did not need the entry), a saved result tied to its node, and torch's errors once freed or changed."""

from __future__ import annotations

import numpy as np
import pytest

import asyncgrad as ag

A = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75], [0.3, 0.8, -1.2]])
B = np.array([[1.0, 2.0, -0.5], [0.4, -0.6, 1.1], [2.0, 0.7, 0.9]])

CASES = {
    "exp": (lambda lib, a, b: a.exp(), ("result",)),
    "tanh": (lambda lib, a, b: a.tanh(), ("result",)),
    "sigmoid": (lambda lib, a, b: a.sigmoid(), ("result",)),
    "sqrt": (lambda lib, a, b: a.abs().sqrt(), ("result",)),
    "sin": (lambda lib, a, b: a.sin(), ("self",)),
    "log": (lambda lib, a, b: a.abs().log(), ("self",)),
    "mul": (lambda lib, a, b: a * b, ("self", "other")),
    "div": (lambda lib, a, b: a / b, ("self", "other")),
    "maximum": (lambda lib, a, b: lib.maximum(a, b), ("self", "other")),
    "minimum": (lambda lib, a, b: lib.minimum(a, b), ("self", "other")),
    "hypot": (lambda lib, a, b: lib.hypot(a, b), ("self", "other", "result")),
    "atan2": (lambda lib, a, b: lib.atan2(a, b), ("self", "other")),
    "pow_number": (lambda lib, a, b: a ** 3, ("self",)),
    "pow_tensor": (lambda lib, a, b: a.abs() ** b, ("self", "exponent")),
    "mm": (lambda lib, a, b: a @ b, ("self", "mat2")),
    "mv": (lambda lib, a, b: a @ b[0], ("self", "vec")),
    "dot": (lambda lib, a, b: a[0] @ b[0], ("self", "tensor")),
    "bmm": (lambda lib, a, b: lib.bmm(a.unsqueeze(0), b.unsqueeze(0)), ("self", "mat2")),
    "addmm": (lambda lib, a, b: lib.addmm(b[0], a, b), ("mat1", "mat2")),
    "baddbmm": (lambda lib, a, b: lib.baddbmm(b, a.unsqueeze(0), b.unsqueeze(0)), ("batch1", "batch2")),
}


def _saved(node):
    return {name[len("_saved_"):] for name in dir(node) if name.startswith("_saved_")}


@pytest.mark.parametrize("grads", [(True, True), (True, False), (False, True)])
@pytest.mark.parametrize("case", CASES)
def test_saved_tensors_read_by_name_as_torch(torch, case, grads):
    fn, names = CASES[case]
    if case in ("exp", "tanh", "sigmoid", "sqrt", "sin", "log", "pow_number") and not grads[0]:
        pytest.skip("one input")
    outs = []
    for lib in (ag, torch):
        a = lib.tensor(A, requires_grad=grads[0])
        b = lib.tensor(B, requires_grad=grads[1])
        outs.append(fn(lib, a, b))
    ours, theirs = (out.grad_fn for out in outs)
    assert ours.name() == theirs.name()
    assert set(names) <= _saved(ours) <= _saved(theirs)  # torch's also names numbers and sizes
    for name in names:
        mine, expected = getattr(ours, "_saved_" + name), getattr(theirs, "_saved_" + name)
        assert (mine is None) == (expected is None), name
        if expected is not None:
            np.testing.assert_allclose(mine.detach().numpy(), expected.detach().numpy(), rtol=1e-12)
            assert mine.requires_grad == expected.requires_grad
    if "result" in names:
        assert ours._saved_result.grad_fn is ours and theirs._saved_result.grad_fn is theirs


def test_a_node_without_names_has_no_properties():
    x = ag.randn(3, requires_grad=True)
    node = (x + 1).grad_fn
    assert not _saved(node)
    with pytest.raises(AttributeError):
        node._saved_self  # noqa: B018


async def test_freed_or_changed_saved_tensors_raise_torchs_errors(torch):
    for lib in (ag, torch):
        a = lib.tensor(A, requires_grad=True)
        y = a.exp()
        out = (a * 2).sin()
        loss = y.sum()
        done = loss.backward()
        if lib is ag:
            await done
        with pytest.raises(RuntimeError, match=r"or directly access saved tensors after they have already been freed"):
            y.grad_fn._saved_result  # noqa: B018
        b = a * 2
        out = b.sin()
        with lib.no_grad():
            b.mul_(2)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            out.grad_fn._saved_self  # noqa: B018


async def test_a_kept_result_read_by_name_still_backpropagates():
    """Reading a result the node keeps in its own slots (Note [A saved result kept in its node])
    moves it into ``saved``; the backward is the same."""
    a = ag.tensor(A, requires_grad=True)
    y = a.exp()
    assert y.grad_fn._saved_result.tolist() == y.tolist()
    await y.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), np.exp(A))


async def test_a_saved_tensor_hook_runs_on_each_read():
    unpacked = []
    a = ag.tensor(A, requires_grad=True)
    with ag.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: unpacked.append(1) or t):
        y = a.sin()
    y.grad_fn._saved_self  # noqa: B018
    y.grad_fn._saved_self  # noqa: B018
    assert len(unpacked) == 2


UNARY_NAMED_OTHERWISE = {"erfinv": ("result", "self")}
"""Rows whose node keeps another tensor than torch's: erfinv's formula reads its result, torch's recomputes it."""


@pytest.mark.filterwarnings("ignore:invalid value encountered")  # acosh below 1: nan in both
def test_the_unary_table_names_what_torch_names(torch):
    from asyncgrad.ops.elementwise import _UNARY

    checked = 0
    for row in _UNARY:
        name = row[0]
        ours, theirs = getattr(ag, name, None), getattr(torch, name, None)
        if ours is None or theirs is None:
            continue
        values = np.linspace(0.1, 0.9, 5)
        node = ours(ag.tensor(values, requires_grad=True)).grad_fn
        twin = theirs(torch.tensor(values, requires_grad=True)).grad_fn
        assert node.name() == twin.name()
        mine, expected = _saved(node), _saved(twin)
        if name in UNARY_NAMED_OTHERWISE:
            kept, torchs = UNARY_NAMED_OTHERWISE[name]
            assert mine == {kept} and torchs in expected
        else:
            assert mine <= expected, name
            for each in mine:
                np.testing.assert_allclose(getattr(node, "_saved_" + each).detach().numpy(),
                                           getattr(twin, "_saved_" + each).detach().numpy(), rtol=1e-12)
        checked += 1
    assert checked >= 40


@pytest.mark.parametrize("case, words", [
    ("none", "Calling register_hooks on a saved tensor with value None is forbidden"),
    ("twice", "Calling register_hooks on a saved tensor whose hooks have already been set"),
    ("freed", "Calling register_hooks on a saved tensor after it has been freed"),
    ("packed", "Calling register_hooks on a saved tensor whose hooks have already been set"),
])
async def test_raw_saved_tensors_refuse_hooks_as_torch(torch, case, words):
    for lib in (ag, torch):
        a = lib.tensor(A, requires_grad=True)
        if case == "packed":
            with lib.autograd.graph.saved_tensors_hooks(lambda x: x, lambda x: x):
                y = a * a
        else:
            y = a * (lib.tensor(B) if case == "none" else a)
        raw = y.grad_fn._raw_saved_self
        if case == "twice":
            raw.register_hooks(lambda x: x, lambda x: x)
        if case == "freed":
            done = y.sum().backward()
            if lib is ag:
                await done
        with pytest.raises(RuntimeError, match=words):
            raw.register_hooks(lambda x: x, lambda x: x)


async def test_raw_saved_result_packed_by_its_hooks(torch):
    """The kept result (Note [A saved result kept in its node]) packed by register_hooks: the
    backward unpacks it through the hook, as torch's."""
    results = []
    for lib in (ag, torch):
        a = lib.tensor(A, requires_grad=True)
        y = a.exp()
        y.grad_fn._raw_saved_result.register_hooks(lambda x: x * 2, lambda x: x)
        done = y.sum().backward()
        if lib is ag:
            await done
        results.append(a.grad.tolist())
    np.testing.assert_allclose(results[0], results[1], rtol=1e-12)
    np.testing.assert_allclose(results[0], 2 * np.exp(A), rtol=1e-12)
