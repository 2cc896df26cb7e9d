"""View ops (narrow, select, unbind, split, chunk, diagonal, movedim, unflatten, view_as, as_strided),
shape ops (repeat, tile, flip, roll, tril, triu, diag), in-place ops through views and torch's
refusals (multi-output views, views made in no_grad mode, expanded tensors, detached saved
tensors), in-place unary ops, ``Tensor.new`` and ``data_ptr``: values and gradients against finite
differences and torch, first and second order, errors word for word, on ``cpu`` and ``sim:0``."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest
from helpers import AG, call, check_gradgrad, check_op, has_torch, run_torch, wait

import asyncgrad as ag

# --------------------------------------------------------------------------- values and gradients
VIEWS: dict[str, tuple[Callable, list, str | None]] = {
    "narrow": (lambda x: x.narrow(1, 1, 2), [(3, 4)], "SliceBackward0"),
    "narrow negative start": (lambda x: x.narrow(0, -2, 2), [(3, 4)], "SliceBackward0"),
    "narrow whole": (lambda x: x.narrow(0, 0, 3), [(3, 4)], "SliceBackward0"),
    "narrow function": (lambda lib, x: lib.narrow(x, -1, 0, 3), [(2, 4)], "SliceBackward0"),
    "select": (lambda x: x.select(1, -1), [(3, 4)], "SelectBackward0"),
    "select function": (lambda lib, x: lib.select(x, 0, 2), [(3, 4)], "SelectBackward0"),
    "unbind": (lambda x: x.unbind(1)[2], [(3, 4)], "UnbindBackward0"),
    "unbind combined": (lambda x: x.unbind()[0] * 2 + x.unbind()[2] * x.unbind()[1], [(3, 4)], None),
    "unbind function": (lambda lib, x: lib.unbind(x, -1)[0], [(3, 2)], "UnbindBackward0"),
    "split": (lambda x: x.split(2, 1)[1], [(3, 5)], "SplitBackward0"),
    "split combined": (lambda x: (x.split(2)[0] ** 2).sum() + x.split(2)[1].sum() * 3, [(5, 2)], None),
    "split list": (lambda x: x.split([1, 3], 1)[1], [(2, 4)], "SplitWithSizesBackward0"),
    "split_with_sizes": (lambda x: x.split_with_sizes([2, 0, 1])[0], [(3, 2)], "SplitWithSizesBackward0"),
    "split function": (lambda lib, x: lib.split(x, 1)[2], [(3, 2)], "SplitBackward0"),
    "chunk": (lambda x: x.chunk(3, 1)[2], [(2, 5)], "SplitBackward0"),
    "chunk combined": (lambda x: x.chunk(2)[0] * x.chunk(2)[1], [(4, 3)], None),
    "chunk function": (lambda lib, x: lib.chunk(x, 2, 0)[1], [(3, 3)], "SplitBackward0"),
    "diagonal": (lambda x: x.diagonal(), [(3, 4)], "DiagonalBackward0"),
    "diagonal offset": (lambda x: x.diagonal(1), [(3, 4)], "DiagonalBackward0"),
    "diagonal negative offset": (lambda x: x.diagonal(-1), [(4, 3)], "DiagonalBackward0"),
    "diagonal dims": (lambda x: x.diagonal(1, 2, 0), [(3, 2, 4)], "DiagonalBackward0"),
    "diagonal empty": (lambda x: x.diagonal(5).sum() + x.sum(), [(3, 4)], None),
    "diagonal function": (lambda lib, x: lib.diagonal(x, 0, -1, -2), [(2, 3, 3)], "DiagonalBackward0"),
    "movedim": (lambda x: x.movedim(0, 2), [(2, 3, 4)], "PermuteBackward0"),
    "movedim lists": (lambda x: x.movedim((0, 1), (2, 0)), [(2, 3, 4)], "PermuteBackward0"),
    "moveaxis": (lambda lib, x: lib.moveaxis(x, -1, 0), [(2, 3, 4)], "PermuteBackward0"),
    "unflatten": (lambda x: x.unflatten(1, (2, -1)), [(3, 6)], "ViewBackward0"),
    "unflatten function": (lambda lib, x: lib.unflatten(x, 0, (2, 2)), [(4, 3)], "ViewBackward0"),
    "view_as": (lambda x, y: x.view_as(y) * y, [(2, 6), (3, 4)], None),
    "view_as name": (lambda x: x.view_as(x.detach().reshape(3, 4)), [(2, 6)], "ViewBackward0"),
    "as_strided": (lambda x: x.as_strided((2, 2), (1, 2), 1), [(3, 4)], "AsStridedBackward0"),
    "as_strided overlapping": (lambda x: x.as_strided((3, 3), (1, 1)), [(3, 4)], "AsStridedBackward0"),
    "as_strided function": (lambda lib, x: lib.as_strided(x, (3,), (4,)), [(3, 4)], "AsStridedBackward0"),
    "as_strided of a view": (lambda x: x[1:].as_strided((2, 3), (4, 1)), [(3, 4)], "AsStridedBackward0"),
    "repeat": (lambda x: x.repeat(2, 1, 3), [(2, 3)], "RepeatBackward0"),
    "repeat tuple": (lambda x: x.repeat((2, 2)), [(3,)], "RepeatBackward0"),
    "tile": (lambda x: x.tile((2,)), [(2, 3)], "RepeatBackward0"),
    "tile function": (lambda lib, x: lib.tile(x, (2, 1, 2)), [(2, 3)], "RepeatBackward0"),
    "flip": (lambda x: x.flip(0), [(3, 4)], "FlipBackward0"),
    "flip dims": (lambda lib, x: lib.flip(x, (0, 2)), [(2, 3, 4)], "FlipBackward0"),
    "roll": (lambda x: x.roll(1, 1), [(3, 4)], "RollBackward0"),
    "roll dims": (lambda lib, x: lib.roll(x, (-1, 5), (0, 1)), [(3, 4)], "RollBackward0"),
    "roll flattened": (lambda x: x.roll(5), [(3, 4)], "RollBackward0"),
    "tril": (lambda x: x.tril(), [(3, 4)], "TrilBackward0"),
    "tril offset": (lambda lib, x: lib.tril(x, -1), [(2, 4, 3)], "TrilBackward0"),
    "triu": (lambda x: x.triu(1), [(4, 3)], "TriuBackward0"),
    "triu function": (lambda lib, x: lib.triu(x, -2), [(3, 3)], "TriuBackward0"),
    "diag vector": (lambda x: x.diag(), [(3,)], "DiagEmbedBackward0"),
    "diag vector offset": (lambda x: x.diag(2), [(3,)], "DiagEmbedBackward0"),
    "diag vector negative": (lambda lib, x: lib.diag(x, -1), [(2,)], "DiagEmbedBackward0"),
    "diag matrix": (lambda x: x.diag(), [(3, 4)], "DiagonalBackward0_copy"),
    "diag matrix offset": (lambda x: x.diag(-1), [(3, 4)], "DiagonalBackward0_copy"),
    "diag matrix function": (lambda lib, x: lib.diag(x, 2), [(3, 4)], "DiagonalBackward0_copy"),
}


@pytest.mark.parametrize("case", list(VIEWS))
async def test_values_and_gradients(case):
    fn, shapes, name = VIEWS[case]
    await check_op(fn, *shapes, name=name)


@pytest.mark.parametrize("case", [
    "narrow", "select", "unbind combined", "split combined", "chunk combined", "diagonal dims", "movedim lists",
    "unflatten", "view_as", "as_strided overlapping", "as_strided of a view", "repeat", "tile function", "flip dims",
    "roll dims", "roll flattened", "tril offset", "triu", "diag vector offset", "diag matrix offset",
])
async def test_second_order(case):
    fn, shapes, _ = VIEWS[case]
    await check_gradgrad(_squared(fn), *shapes)


def _squared(fn: Callable) -> Callable:
    """``fn`` followed by a square, so that the second derivative is not zero everywhere."""
    if fn.__code__.co_varnames[:1] == ("lib",):
        return lambda lib, *xs: fn(lib, *xs) ** 2
    return lambda *xs: fn(*xs) ** 2


# --------------------------------------------------------------------------- views share memory
VIEW_OPS: dict[str, Callable] = {
    "narrow": lambda t: t.narrow(1, 1, 2),
    "select": lambda t: t.select(0, 1),
    "unbind": lambda t: t.unbind(1)[1],
    "split": lambda t: t.split(2, 1)[1],
    "split_with_sizes": lambda t: t.split_with_sizes([1, 2])[1],
    "chunk": lambda t: t.chunk(2, 1)[1],
    "diagonal": lambda t: t.diagonal(1),
    "movedim": lambda t: t.movedim(0, 1),
    "moveaxis": lambda t: t.moveaxis(1, 0),
    "unflatten": lambda t: t.unflatten(1, (2, 2)),
    "view_as": lambda t: t.view_as(ag.zeros(4, 3)),
    "as_strided": lambda t: t.as_strided((2, 2), (4, 1), 5),
}


@pytest.mark.parametrize("op", list(VIEW_OPS))
def test_views_share_memory_version_and_base(op, op_device):
    base = ag.tensor(np.arange(12.0).reshape(3, 4), device=op_device)
    v = VIEW_OPS[op](base)
    assert v._base is base and base._base is None
    with ag.no_grad():
        v.sub_(1000.0)
    assert base._version == v._version == 1
    changed = (np.array(base.tolist()) < 0).sum()
    assert changed == v.numel(), "an in-place write through the view must land in the base"
    base.add_(2000.0)
    assert v._version == 2 and (np.array(v.tolist()) >= 500).all(), "the view must see the base's change"
    vv = v.unsqueeze(0)
    assert vv._base is base


def test_views_of_views_keep_the_first_base():
    root = ag.zeros(24)
    base = root.view(2, 3, 4)
    v = base.select(0, 1).diagonal().narrow(0, 1, 2).unflatten(0, (2, 1)).movedim(0, 1)
    assert base._base is root and v._base is root and root._base is None
    for a, b in zip(v.unbind(1), v.split(1, 1)):
        assert a._base is root and b._base is root
    v.fill_(1.0)
    assert root.tolist().count(1.0) == 2 and root._version == 1


def test_data_ptr_is_the_first_elements_address(op_device):
    x = ag.tensor(np.arange(12.0).reshape(3, 4), device=op_device)
    item = x.dtype.itemsize
    assert x.data_ptr() != 0
    assert x[1].data_ptr() - x.data_ptr() == 4 * item
    assert x[:, 1].data_ptr() - x.data_ptr() == item
    assert x.t().data_ptr() == x.data_ptr()
    assert x.diagonal(2).data_ptr() - x.data_ptr() == 2 * item
    assert x.as_strided((2,), (1,), 7).data_ptr() - x.data_ptr() == 7 * item
    assert x.flip(0).data_ptr() != x.data_ptr()  # a copy, as torch's flip
    assert ag.empty(0).data_ptr() == 0 and x[3:].data_ptr() == 0
    e = ag.ones(1).expand(3)
    assert e[2].data_ptr() == e.data_ptr()


def test_data_ptr_offsets_match_torch(torch):
    fns = [lambda t: t[1], lambda t: t[:, 2], lambda t: t.narrow(1, 1, 2), lambda t: t.diagonal(-1),
           lambda t: t.unbind(1)[3], lambda t: t.split(2)[1], lambda t: t.as_strided((2,), (3,), 4)]
    a, t = ag.arange(12.0, dtype=ag.float64).reshape(3, 4), torch.arange(12.0, dtype=torch.float64).reshape(3, 4)
    for fn in fns:
        assert fn(a).data_ptr() - a.data_ptr() == fn(t).data_ptr() - t.data_ptr()


# --------------------------------------------------------------------------- in place through views
def _through(view: Callable) -> Callable:
    def fn(x, w):
        y = x * 2
        v = view(y)
        v.mul_(w)
        v.add_(1.0)
        return (y * y).sum() + (v * v).sum()

    return fn


THROUGH = {
    "narrow": (lambda y: y.narrow(1, 1, 2), (2,)),
    "select": (lambda y: y.select(1, 2), (3,)),
    "diagonal": (lambda y: y.diagonal(1), (3,)),
    "movedim": (lambda y: y.movedim(0, 1), (3,)),
    "unflatten": (lambda y: y.unflatten(1, (2, 2)), (2,)),
    "view_as": (lambda y: y.view_as(y.detach().reshape(12)), (12,)),
    "as_strided": (lambda y: y.as_strided((2, 2), (4, 1), 1), (2,)),
    "as_strided of a view": (lambda y: y[1].as_strided((2,), (2,)), (2,)),
    "view of a view": (lambda y: y.diagonal().narrow(0, 1, 2), (2,)),
}


@pytest.mark.parametrize("case", list(THROUGH))
async def test_inplace_through_views_matches_torch(case):
    view, w_shape = THROUGH[case]
    await check_op(_through(view), (3, 4), w_shape)


async def test_inplace_through_views_second_order():
    await check_gradgrad(_through(THROUGH["diagonal"][0]), (3, 4), (3,))
    await check_gradgrad(_through(THROUGH["as_strided"][0]), (3, 4), (2,))


def test_inplace_through_a_view_rebases_the_base_with_copyslices():
    x = ag.ones(3, 4, requires_grad=True)
    y = x * 1
    d = y.diagonal()
    n = y.narrow(0, 0, 1)
    d.mul_(2.0)
    assert y.grad_fn.name() == "CopySlices"  # the views read the new base again, as torch's
    assert d.grad_fn.name() == n.grad_fn.name() == "AsStridedBackward0"
    (g,) = wait(ag.grad(n.sum(), x))
    assert g.tolist() == [[2.0, 1.0, 1.0, 1.0]] + [[0.0] * 4] * 2


# --------------------------------------------------------------------------- torch's refusals
def _message(fn: Callable, lib: Any) -> tuple[type, str]:
    try:
        call(fn, lib, [])
    except Exception as exc:  # noqa: BLE001 - the exception itself is what is compared
        return type(exc), str(exc)
    return type(None), ""


def same_error(fn: Callable, exc_type: type, start: str) -> None:
    """``fn`` raises ``exc_type`` in asyncgrad, beginning with ``start``, and (with torch) the very
    message torch raises, word for word (asyncgrad's names in place of torch's)."""
    kind, text = _message(fn, AG)
    assert kind is exc_type and text.startswith(start), (kind, text)
    if has_torch():
        tkind, ttext = run_torch_message(fn)
        assert tkind is exc_type, (tkind, ttext)
        assert text == ttext.replace("torch.", "asyncgrad."), (text, ttext)


def run_torch_message(fn: Callable) -> tuple[type, str]:
    try:
        run_torch(fn)
    except Exception as exc:  # noqa: BLE001
        return type(exc), str(exc)
    return type(None), ""


MULTI = ("is a view and is being modified inplace. This view is the output of a function that returns multiple "
         "views. Such functions do not allow the output views to be modified inplace. You should replace the "
         "inplace operation by an out-of-place one.")
NO_GRAD = ("no_grad mode and is being modified inplace with grad mode enabled. Given that this use case is "
           "ambiguous and error-prone, it is forbidden. You can clarify your code by moving both the view and the "
           "inplace either both inside the no_grad block (if you don't want the inplace to be tracked) or both "
           "outside (if you want the inplace to be tracked).")


def _grad_input(lib: Any, *shape: int) -> Any:
    return lib.tensor(np.arange(float(np.prod(shape))).reshape(shape)).requires_grad_() * 1


MULTI_CASES = {
    "unbind": (lambda lib: _grad_input(lib, 3, 4).unbind(0)[1].mul_(2), "Output 1 of Unbind " + MULTI),
    "split": (lambda lib: _grad_input(lib, 3, 4).split(2)[0].mul_(2), "Output 0 of Split " + MULTI),
    "split list": (lambda lib: _grad_input(lib, 3, 4).split([1, 2])[1].add_(1),
                   "Output 1 of SplitWithSizes " + MULTI),
    "split_with_sizes": (lambda lib: _grad_input(lib, 3, 4).split_with_sizes([3, 1], 1)[0].zero_(),
                         "Output 0 of SplitWithSizes " + MULTI),
    "chunk": (lambda lib: _grad_input(lib, 3, 4).chunk(2, 1)[1].exp_(), "Output 1 of Split " + MULTI),
    "view of an output": (lambda lib: _grad_input(lib, 3, 4).unbind(0)[2][0:2].mul_(2), "Output 0 of Slice " + MULTI),
    "view of an output, view": (lambda lib: _grad_input(lib, 3, 4).unbind(0)[2].view(2, 2).sin_(),
                                "Output 0 of View " + MULTI),
    "setitem": (lambda lib: _grad_input(lib, 3, 4).unbind(1)[0].__setitem__(0, 5.0), "Output 0 of Select " + MULTI),
    "no grad needed by the base": (lambda lib: lib.tensor(np.ones((2, 2))).unbind()[0].mul_(
        lib.tensor(np.ones(2)).requires_grad_()), "A view was created in no_grad mode and is being modified inplace "
        "with grad mode enabled. This view is the output of a function that returns multiple views. Such functions "
        "do not allow the output views to be modified inplace. You should replace the inplace operation by an "
        "out-of-place one."),
}


@pytest.mark.parametrize("case", list(MULTI_CASES))
def test_inplace_on_multi_output_views_is_refused_as_torch(case):
    fn, message = MULTI_CASES[case]
    kind, text = _message(fn, AG)
    assert kind is RuntimeError and text == message
    if has_torch():
        assert run_torch_message(fn) == (RuntimeError, message)


def test_multi_output_views_may_change_where_nothing_records(op_device):
    x = ag.tensor(np.ones((2, 3)), device=op_device)
    a, b = x.unbind()
    a.mul_(3.0)  # nothing requires grad: no refusal, as torch
    y = x.detach().requires_grad_() * 1
    with ag.no_grad():
        y.unbind()[1].fill_(7.0)
    y.unbind()[0].detach().mul_(2.0)
    assert x.tolist() == [[3.0] * 3, [1.0] * 3] and y.tolist() == [[6.0] * 3, [7.0] * 3]


def _no_grad_view(lib: Any, base: Any, then: Callable) -> Any:
    with lib.no_grad():
        v = base[0]
    return then(v)


NO_GRAD_CASES = {
    "view of a non-leaf": (lambda lib: _no_grad_view(lib, _grad_input(lib, 3, 4), lambda v: v.mul_(2)),
                           "A view was created in " + NO_GRAD),
    "view of a leaf": (lambda lib: _no_grad_view(lib, lib.tensor(np.ones((3, 4))).requires_grad_(),
                                                 lambda v: v.mul_(2)),
                       "A view was created in " + NO_GRAD),
    "view of a view": (lambda lib: _no_grad_view(lib, _grad_input(lib, 3, 4), lambda v: v[0:2].mul_(2)),
                       "Output 0 of Slice is a view of a view which was created in " + NO_GRAD),
    "view of a view, narrow": (lambda lib: _no_grad_view(lib, _grad_input(lib, 3, 4),
                                                         lambda v: v.narrow(0, 1, 2).exp_()),
                               "Output 0 of Slice is a view of a view which was created in " + NO_GRAD),
    "view of a view of a leaf": (lambda lib: _no_grad_view(lib, lib.tensor(np.ones((3, 4))).requires_grad_(),
                                                           lambda v: v.unflatten(0, (2, 2)).mul_(2)),
                                 "Output 0 of View is a view of a view which was created in " + NO_GRAD),
    "a grad-requiring operand": (lambda lib: _no_grad_view(lib, lib.tensor(np.ones((3, 4))),
                                                           lambda v: v.mul_(lib.tensor(np.ones(4)).requires_grad_())),
                                 "A view was created in " + NO_GRAD),
    "both views in no_grad": (lambda lib: _no_grad_view(lib, _grad_input(lib, 3, 4),
                                                        lambda v: (lambda w: _enable(lib, w))(v)),
                              "A view was created in " + NO_GRAD),
}


def _enable(lib: Any, v: Any) -> Any:
    with lib.no_grad():
        w = v[0:2]
    return w.mul_(2)


@pytest.mark.parametrize("case", list(NO_GRAD_CASES))
def test_inplace_on_views_made_in_no_grad_mode_is_refused_as_torch(case):
    fn, message = NO_GRAD_CASES[case]
    kind, text = _message(fn, AG)
    assert kind is RuntimeError and text == message, text
    if has_torch():
        assert run_torch_message(fn) == (RuntimeError, message)


def test_views_made_in_no_grad_mode_change_in_no_grad_mode(op_device):
    x = ag.tensor(np.ones(3), device=op_device, requires_grad=True)
    y = x * 1
    with ag.no_grad():
        v = y[0:2]
        v.mul_(3.0)
    z = ag.tensor(np.ones(3), device=op_device)
    with ag.no_grad():
        w = z[0:2]
    w.mul_(2.0)  # nothing would record: allowed
    assert y.tolist() == [3.0, 3.0, 1.0] and z.tolist() == [2.0, 2.0, 1.0]


DETACHED = ("Trying to use a saved tensor that has been detached in-place, i.e. with .detach_().This is not "
            "supported, please use out-of-place `.detach()` instead")


def _detached_saved_input(lib: Any, saved_op: Callable) -> Any:
    x = lib.tensor(np.array([0.5, 1.0, 2.0])).requires_grad_()
    b = x * 1
    out = saved_op(b)
    b.detach_()
    if lib is AG:
        return wait(ag.grad(out.sum(), x))
    return lib.autograd.grad(out.sum(), x)


@pytest.mark.parametrize("saved_op", [lambda b: b.sin(), lambda b: b * b, lambda b: b.log(), lambda b: b ** 3])
def test_saved_input_detached_in_place_is_refused_as_torch(saved_op):
    fn = lambda lib: _detached_saved_input(lib, saved_op)  # noqa: E731
    assert _message(fn, AG) == (RuntimeError, DETACHED)
    if has_torch():
        assert run_torch_message(fn) == (RuntimeError, DETACHED)


async def test_saved_output_or_leaf_detached_in_place_still_differentiates():
    """torch checks saved inputs that were not leaves only: a saved result (exp's) is fine."""
    x = ag.tensor([0.5, 1.0], requires_grad=True)
    b = x * 1
    e = b.exp()
    f = e * 1
    e.detach_()
    (g,) = await ag.grad(f.sum(), x)
    np.testing.assert_allclose(g.tolist(), np.exp([0.5, 1.0]))


# --------------------------------------------------------------------------- writes into expanded tensors
OVERLAP = ("unsupported operation: more than one element of the written-to tensor refers to a single memory "
           "location. Please clone() the tensor before performing the operation.")

EXPANDED_WRITES = {
    "g[0] = 0": (lambda g, lib: g.__setitem__(0, 0.0), (3,)),
    "g[-1] = tensor": (lambda g, lib: g.__setitem__(-1, lib.tensor(5.0)), (3,)),
    "g[0, ...] = 0": (lambda g, lib: g.__setitem__((0, Ellipsis), 2.0), (3,)),
    "g[0:2] = 0": (lambda g, lib: g.__setitem__(slice(0, 2), 0.0), (3,)),
    "g[:] = tensor": (lambda g, lib: g.__setitem__(slice(None), lib.tensor(5.0)), (3,)),
    "g[...] = 0": (lambda g, lib: g.__setitem__(Ellipsis, 0.0), (3,)),
    "2-d g[0] = 0": (lambda g, lib: g.__setitem__(0, 0.0), (2, 3)),
    "2-d g[0, 1] = 0": (lambda g, lib: g.__setitem__((0, 1), 4.0), (2, 3)),
    "2-d g[:, 0] = 0": (lambda g, lib: g.__setitem__((slice(None), 0), 0.0), (2, 3)),
    "fill_": (lambda g, lib: g.fill_(2.0), (3,)),
    "zero_": (lambda g, lib: g.zero_(), (2, 3)),
    "mul_": (lambda g, lib: g.mul_(2.0), (3,)),
    "exp_": (lambda g, lib: g.exp_(), (3,)),
    "copy_": (lambda g, lib: g.copy_(lib.tensor(np.array([1.0, 2.0, 3.0]))), (3,)),
    "g[0].mul_": (lambda g, lib: g[0].mul_(3.0), (3,)),
    "g[0:2].mul_": (lambda g, lib: g[0:2].mul_(3.0), (3,)),
    "empty copy_": (lambda g, lib: g.copy_(lib.zeros(2, 0, 3)), (2, 0, 3)),  # no element: no overlap
    "empty mul_": (lambda g, lib: g.mul_(2.0), (0, 3)),
}


@pytest.mark.parametrize("case", list(EXPANDED_WRITES))
def test_writes_into_an_expanded_tensor_follow_torch(case, op_device):
    write, shape = EXPANDED_WRITES[case]

    def fn(lib):
        g = lib.ones(*(1,) * len(shape)).expand(*shape)
        if lib is AG:
            g = ag.ones(*(1,) * len(shape), device=op_device).expand(*shape)
        write(g, lib)
        return g.tolist()

    kind, text = _message(fn, AG)
    result = None if kind is not type(None) else call(fn, AG, [])
    if has_torch():
        tkind, ttext = run_torch_message(fn)
        assert (kind, text) == (tkind, ttext)
        if kind is type(None):
            assert result == run_torch(fn)
    else:
        assert kind is type(None) or text == OVERLAP


# --------------------------------------------------------------------------- in-place unary ops
UNARY_INPLACE = {
    "neg_": "NegBackward0", "exp_": "ExpBackward0", "log_": "LogBackward0", "log1p_": "Log1PBackward0",
    "sqrt_": "SqrtBackward0", "sin_": "SinBackward0", "cos_": "CosBackward0", "tanh_": "TanhBackward0",
    "sigmoid_": "SigmoidBackward0", "reciprocal_": "ReciprocalBackward0", "abs_": "AbsBackward0",
    "sign_": "SignBackward0", "relu_": "ReluBackward0",
}


@pytest.mark.parametrize("name", list(UNARY_INPLACE))
async def test_inplace_unary_values_versions_and_gradients(name, op_device):
    t = ag.tensor(np.array([0.5, 1.5, 2.0]), device=op_device)
    expected = getattr(ag.ops.elementwise, name[:-1])(t).tolist()
    data = t.data
    assert getattr(t, name)() is t and t.data is data and t._version == 1
    np.testing.assert_allclose(t.tolist(), expected)

    def fn(x):
        y = x * 1
        getattr(y, name)()
        return y

    await check_op(fn, (2, 3), name=UNARY_INPLACE[name], low=0.5, high=2.0)
    await check_gradgrad(lambda x: getattr(x * 1, name)() * x, (2, 3), low=0.5, high=2.0)


@pytest.mark.parametrize("name", ["exp_", "tanh_", "abs_", "sqrt_"])
@pytest.mark.parametrize("view", [lambda y: y.diagonal(), lambda y: y[1:, 0], lambda y: y.unflatten(0, (1, 3))[0, 1:]])
async def test_inplace_unary_through_a_view(name, view):
    def fn(x):
        y = x * 1
        getattr(view(y), name)()
        return y

    # torch's name is "torch::autograd::CopySlices"
    await check_op(fn, (3, 3), name="CopySlices", torch_name=False, low=0.5, high=2.0)


def test_two_inplace_ops_through_views_of_one_base_invalidate_a_saved_result():
    """As torch: exp_ saved its result; the second write bumps the version the base and its views share."""
    def fn(lib):
        x = lib.tensor(np.ones((3, 3))).requires_grad_()
        y = x * 1
        y.diagonal().exp_()
        y[1:, 0].exp_()
        if lib is AG:
            return wait(y.sum().backward())
        return y.sum().backward()

    kind, text = _message(fn, AG)
    assert kind is RuntimeError and "is at version 2; expected version 1 instead" in text
    if has_torch():
        assert run_torch_message(fn)[0] is RuntimeError


@pytest.mark.parametrize("name", ["exp_", "sqrt_", "sigmoid_", "neg_", "abs_", "log_"])
def test_inplace_unary_on_integers_and_bools_refused_as_torch(name):
    for dtype in ("int64", "bool"):
        fn = lambda lib, dtype=dtype: getattr(lib.tensor(np.array([1, 2, 1]).astype(dtype)), name)().tolist()  # noqa: E731
        got = _message(fn, AG)
        if has_torch():
            assert got == run_torch_message(fn)
            if got[0] is type(None):
                assert call(fn, AG, []) == run_torch(fn)


def test_inplace_unary_on_a_leaf_is_refused():
    x = ag.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        x.exp_()
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
        x[0:1].sin_()


# --------------------------------------------------------------------------- flatten, new
def test_flatten_with_nothing_to_flatten_returns_the_input():
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    assert y.flatten() is y and y.flatten(0, -1) is y
    z = (x * 1).reshape(2, 1)
    assert z.flatten(1) is z and z.flatten(-1, 1) is z and z.flatten(0, 0) is z
    assert z.flatten() is not z
    y.flatten().retain_grad()
    wait((y * y).sum().backward())
    assert y.grad.tolist() == [4.0, 8.0]
    s = ag.tensor(3.0)
    assert s.flatten().shape == (1,) and s.flatten()._base is s


def test_new_is_torchs_legacy_constructor(op_device, torch):
    x = ag.tensor(np.ones((2, 2), dtype=np.float32), device=op_device, requires_grad=True)
    tx = torch.ones(2, 2, dtype=torch.float32, requires_grad=True)
    for args, kwargs in [((2, 3), {}), (((2, 3),), {}), (([1, 2],), {}), (([[1.5], [2.5]],), {}), ((), {}),
                         ((0,), {}), ((np.array([1, 2]),), {}), ((), {"size": (2,)}), ((1,), {})]:
        a, t = x.new(*args, **kwargs), tx.new(*args, **kwargs)
        assert a.shape == tuple(t.shape) and a.dtype == ag.float32 and a.device is x.device
        assert not a.requires_grad and a.is_leaf and a._base is None
        if args and not (len(args) >= 1 and isinstance(args[0], int)) and "size" not in kwargs:
            assert a.tolist() == t.tolist()
    assert ag.tensor([1, 2]).new([1.7]).tolist() == torch.tensor([1, 2]).new([1.7]).tolist()
    alias = x.new(x)
    assert alias._base is x and alias.grad_fn.name() == tx.new(tx).grad_fn.name() == "AliasBackward0"
    got = _message(lambda: x.new(ag.tensor([1, 2], device=op_device)), AG)
    want = run_torch_message(lambda: tx.new(torch.tensor([1, 2])))
    assert got == (want[0], want[1].replace("device=cpu", f"device={op_device}"))
    for bad in [("a",), (2.5,), (None,), (True,), (2, "a"), (-1,)]:
        got = _message(lambda lib, bad=bad: (x if lib is AG else tx).new(*bad), AG)
        want = run_torch_message(lambda bad=bad: tx.new(*bad))
        assert got == want, (bad, got, want)


# --------------------------------------------------------------------------- bad arguments, torch's words
BAD = {
    "narrow length": (lambda lib: lib.ones(3, 4).narrow(1, 3, 2), RuntimeError),
    "narrow negative length": (lambda lib: lib.ones(3, 4).narrow(1, 0, -1), RuntimeError),
    "narrow start": (lambda lib: lib.ones(3, 4).narrow(1, 5, 0), IndexError),
    "narrow dim": (lambda lib: lib.ones(3, 4).narrow(2, 0, 1), IndexError),
    "select index": (lambda lib: lib.ones(3, 4).select(1, 4), IndexError),
    "select 0-d": (lambda lib: lib.tensor(1.0).select(0, 0), IndexError),
    "unbind 0-d": (lambda lib: lib.tensor(1.0).unbind(), IndexError),
    "split 0": (lambda lib: lib.ones(3, 4).split(0), RuntimeError),
    "split negative": (lambda lib: lib.ones(3, 4).split(-1), RuntimeError),
    "split sizes sum": (lambda lib: lib.ones(3, 4).split([1, 1]), RuntimeError),
    "split sizes negative": (lambda lib: lib.ones(3, 4).split([4, -1]), RuntimeError),
    "chunk 0": (lambda lib: lib.ones(3, 4).chunk(0), RuntimeError),
    "diagonal same dims": (lambda lib: lib.ones(3, 4).diagonal(0, 1, 1), RuntimeError),
    "diagonal 0-d": (lambda lib: lib.tensor(1.0).diagonal(), IndexError),
    "movedim repeated": (lambda lib: lib.ones(3, 4).movedim((0, 1), (0, 0)), RuntimeError),
    "movedim lengths": (lambda lib: lib.ones(3, 4).movedim((0, 1), (0,)), RuntimeError),
    "movedim dim": (lambda lib: lib.ones(3, 4).movedim(2, 0), IndexError),
    "unflatten sizes": (lambda lib: lib.ones(3, 4).unflatten(1, (3, 2)), RuntimeError),
    "unflatten empty": (lambda lib: lib.ones(3, 4).unflatten(1, ()), RuntimeError),
    "as_strided negative": (lambda lib: lib.ones(3, 4).as_strided((2, 2), (-1, 1)), RuntimeError),
    "as_strided lengths": (lambda lib: lib.ones(3, 4).as_strided((2, 2), (1,)), RuntimeError),
    "as_strided bounds": (lambda lib: lib.ones(3, 4, dtype=lib.float32).as_strided((20, 2), (1, 1)), RuntimeError),
    "repeat short": (lambda lib: lib.ones(3, 4).repeat(2), RuntimeError),
    "repeat negative": (lambda lib: lib.ones(3, 4).repeat(2, -1), RuntimeError),
    "tile negative": (lambda lib: lib.ones(3, 4).tile((-1,)), RuntimeError),
    "flip repeated": (lambda lib: lib.ones(3, 4).flip(0, 0), RuntimeError),
    "flip dim": (lambda lib: lib.ones(3, 4).flip(2), IndexError),
    "roll mismatch": (lambda lib: lib.ones(3, 4).roll((1, 2), (0,)), RuntimeError),
    "roll empty": (lambda lib: lib.ones(3, 4).roll(()), RuntimeError),
    "tril 1-d": (lambda lib: lib.ones(3).tril(), RuntimeError),
    "triu 1-d": (lambda lib: lib.ones(3).triu(), RuntimeError),
    "diag 3-d": (lambda lib: lib.ones(2, 2, 2).diag(), RuntimeError),
    "diag 0-d": (lambda lib: lib.tensor(1.0).diag(), RuntimeError),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_arguments_are_refused_in_torchs_words(case, torch):
    fn, exc_type = BAD[case]
    got = _message(fn, AG)
    assert got[0] is exc_type, got
    assert got == run_torch_message(fn)


# --------------------------------------------------------------------------- shape ops' values
@pytest.mark.parametrize("fn", [
    lambda t: t.repeat(2, 0), lambda t: t.tile(()), lambda t: t.flip(()), lambda t: t.roll((1, 1), (0, 0)),
    lambda t: t.diag(7), lambda t: t.tril(-5), lambda t: t.triu(5), lambda t: t.chunk(5, 1),
    lambda t: t.split(4), lambda t: t.diagonal(-7),
])
def test_edge_cases_match_torch(fn, torch, op_device):
    a = ag.tensor(np.arange(12.0).reshape(3, 4), device=op_device)
    t = torch.arange(12.0, dtype=torch.float64).reshape(3, 4)
    got, want = fn(a), fn(t)
    if isinstance(got, tuple):
        assert [g.tolist() for g in got] == [w.tolist() for w in want]
    else:
        assert got.shape == tuple(want.shape) and got.tolist() == want.tolist()


def test_shape_op_results_are_new_tensors(op_device):
    x = ag.tensor(np.arange(6.0).reshape(2, 3), device=op_device)
    for out in (x.repeat(1, 1), x.tile((1,)), x.flip(0), x.roll(1), x.tril(), x.triu(), x[0].diag(), x.diag()):
        assert out._base is None
        with ag.no_grad():
            out.mul_(0.0)
    assert x.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]


def test_tril_triu_in_place(op_device):
    x = ag.tensor(np.ones((3, 3)), device=op_device)
    x.tril_()
    assert x._version == 1 and x.tolist() == [[1, 0, 0], [1, 1, 0], [1, 1, 1]]
    x.triu_(1)
    assert x.tolist() == [[0, 0, 0]] * 3


def _use_after_base_changed(lib: Any, make_view: Callable) -> Any:
    x = lib.tensor(np.ones((3, 4))).requires_grad_()
    y = x * 1
    v = make_view(lib, y)
    y.mul_(2.0)
    out = (v * 2).sum()
    return wait(ag.grad(out, x)) if lib is AG else lib.autograd.grad(out, x)


def _no_grad_row(lib: Any, y: Any) -> Any:
    with lib.no_grad():
        return y[0]


@pytest.mark.parametrize("make_view, message", [
    (lambda lib, y: y.unbind()[1], "Output 1 of Unbind is a view and its base or another view of its base has been "
     "modified inplace. This view is the output of a function that returns multiple views. Such functions do not "
     "allow the output views to be modified inplace. You should replace the inplace operation by an out-of-place "
     "one."),
    (lambda lib, y: y.chunk(2, 1)[0][1:], "Output 0 of Slice is a view and its base or another view of its base has "
     "been modified inplace. This view is the output of a function that returns multiple views. Such functions do "
     "not allow the output views to be modified inplace. You should replace the inplace operation by an "
     "out-of-place one."),
    (_no_grad_row, "A view was created in no_grad mode and its base or another view of its base has been modified "
     "inplace with grad mode enabled. Given that this use case is ambiguous and error-prone, it is forbidden. You "
     "can clarify your code by moving both the view and the inplace either both inside the no_grad block (if you "
     "don't want the inplace to be tracked) or both outside (if you want the inplace to be tracked)."),
])
def test_such_views_refuse_to_differentiate_after_their_base_changed(make_view, message):
    """torch raises when the view is next used; asyncgrad when the backward reaches it, in the same words."""
    fn = lambda lib: _use_after_base_changed(lib, make_view)  # noqa: E731
    assert _message(fn, AG) == (RuntimeError, message)
    if has_torch():
        assert run_torch_message(fn) == (RuntimeError, message)


def test_iteration_gives_unbinds_views_as_torch(op_device):
    x = ag.tensor(np.ones((3, 2)), device=op_device, requires_grad=True)
    y = x * 1
    rows = list(y)
    assert [r.output_nr for r in rows] == [0, 1, 2] and rows[0].grad_fn.name() == "UnbindBackward0"
    assert all(r._base is y for r in rows)
    (g,) = wait(ag.grad(rows[1].sum() * 2, x))
    assert g.tolist() == [[0.0, 0.0], [2.0, 2.0], [0.0, 0.0]]
    same_error(lambda lib: list(_grad_input(lib, 3, 2))[0].mul_(2), RuntimeError, "Output 0 of Unbind " + MULTI)
    same_error(lambda lib: iter(lib.tensor(1.0)), TypeError, "iteration over a 0-d tensor")


def test_hooks_and_retain_grad_on_multi_output_views(op_device, torch):
    results = []
    for lib in (ag, torch):
        x = (ag.ones(3, 2, device=op_device) if lib is ag else torch.ones(3, 2)).requires_grad_()
        u = (x * 1).unbind()
        u[1].retain_grad()
        seen: list = []
        u[2].register_hook(lambda g, seen=seen: seen.append(g.tolist()))
        z = (u[1] * 3).sum() + (u[2] * 5).sum()
        wait(z.backward())
        results.append((u[1].grad.tolist(), seen, x.grad.tolist()))
    assert results[0] == results[1]
    assert results[0][2] == [[0.0, 0.0], [3.0, 3.0], [5.0, 5.0]]
