"""Differential fuzzing against PyTorch, and the fuzzer's findings pinned as regression tests.

The fuzzer itself lives in ``benchmarks/fuzz.py`` (``python -m benchmarks.fuzz --graphs 10000``);
here a few hundred seeded graphs run in CI and thousands behind ``-m slow``.
"""

import asyncio
import contextlib
import io
import re

import numpy as np
import pytest

import asyncgrad as ag


# --------------------------------------------------------------------------- flatten (issue 10, item 16)
@pytest.mark.parametrize("shape, start, end", [((3,), 0, -1), ((2, 3), 1, 1), ((2, 3, 4), -2, 1), ((2, 3), 0, 0)])
def test_flatten_with_nothing_to_merge_returns_the_input_itself(shape, start, end, torch):
    x = ag.ones(*shape) * 2
    assert x.flatten(start, end) is x
    assert ag.flatten(x, start, end) is x
    tx = torch.ones(*shape) * 2
    assert tx.flatten(start, end) is tx  # the behaviour followed


def test_flatten_of_0d_is_a_one_element_view(torch):
    s = ag.tensor(2.0, requires_grad=True)
    f = s.flatten()
    assert f is not s and f.shape == (1,) and f.grad_fn.name() == "ViewBackward0"
    assert torch.tensor(2.0).flatten().shape == (1,)
    for start, end in [(0, 0), (-1, -1), (0, -1)]:
        assert s.flatten(start, end).shape == (1,)
    # the dims are checked before the 0-d special case, as torch does
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of \[-1, 0\], but got 1\)"):
        s.flatten(1, 1)
    with pytest.raises(IndexError, match=r"expected to be in range of \[-1, 0\], but got 1"):
        torch.tensor(2.0).flatten(1, 1)


def test_flatten_still_merges_and_checks_its_dims():
    x = ag.ones(2, 3, 4)
    assert x.flatten(1).shape == (2, 12) and x.flatten().shape == (24,)
    with pytest.raises(RuntimeError, match="flatten\\(\\) has invalid args: start_dim cannot come after end_dim"):
        x.flatten(2, 1)


async def test_hooks_and_retain_grad_on_a_trivial_flatten_land_on_the_input(torch):
    """torch returns the input itself, so a hook registered on the result scales the input's
    gradient and retain_grad on the result fills the input's .grad."""
    data = np.array([0.5, -1.0, 2.0])
    results = {}
    for lib in ("ag", "torch"):
        if lib == "ag":
            x = ag.tensor(data, requires_grad=True)
        else:
            x = torch.tensor(data, requires_grad=True)
        y = x * 3
        f = y.flatten()
        f.register_hook(lambda g: g * 10)
        f.retain_grad()
        loss = (y.sin() * 2).sum()
        if lib == "ag":
            await loss.backward()
        else:
            loss.backward()
        results[lib] = (np.asarray(x.grad.tolist()), np.asarray(y.grad.tolist()), y.retains_grad)
    np.testing.assert_allclose(results["ag"][0], results["torch"][0], rtol=1e-12)
    np.testing.assert_allclose(results["ag"][1], results["torch"][1], rtol=1e-12)
    assert results["ag"][2] is results["torch"][2] is True
    np.testing.assert_allclose(results["ag"][0], 10 * 3 * 2 * np.cos(3 * data), rtol=1e-12)


# --------------------------------------------------------------------------- findings of benchmarks/fuzz.py
async def _both(fn, torch):
    """``fn(lib)`` in asyncgrad and in torch; ``fn`` returns tensors, or awaitables first."""
    out = {}
    for name, lib in (("ag", ag), ("torch", torch)):
        result = fn(lib)
        out[name] = result
    return out["ag"], out["torch"]


def test_an_integer_index_of_a_vector_is_a_view_that_writes_through(torch):
    """seed 6: ``m = x.min(0)[0]; m[0].mul_(y)`` raised an IndexError (numpy gave a scalar copy)."""
    results = []
    for lib in (ag, torch):
        x = lib.tensor([[1.88]], dtype=lib.float64, requires_grad=True)
        m = x.min(0, False)[0]
        m[0].mul_(x.view(()))
        results.append((m.tolist(), m.grad_fn.name().removeprefix("torch::autograd::")))
    assert results[0] == results[1] == ([1.88 * 1.88], "CopySlices")


@pytest.mark.parametrize("index", [0, -1, slice(1, 2), slice(None), Ellipsis, None, (0, None), (None, 0),
                                   (slice(None), 0), (0, slice(None)), (Ellipsis, 0), (slice(0, 3), slice(0, 4)),
                                   (slice(-3, None), slice(None)), (slice(None, None, 2),), (), (0, Ellipsis, None),
                                   (None, Ellipsis, slice(0, 4)), (slice(0, 10), slice(0, 1))])
def test_basic_index_nodes_are_named_as_torch_names_them(index, torch):
    got = (ag.ones(3, 4, 5, requires_grad=True) * 1)[index]
    want = (torch.ones(3, 4, 5, requires_grad=True) * 1)[index]
    assert got.grad_fn.name() == want.grad_fn.name() and got.shape == tuple(want.shape)


async def test_a_number_divided_by_a_tensor_is_a_reciprocal_times_the_number(torch):
    data = np.array([0.5, -2.0, 3.0])
    x, tx = ag.tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)
    y, ty = 2.5 / x, 2.5 / tx
    assert y.grad_fn.name() == ty.grad_fn.name() == "MulBackward0"
    assert y.grad_fn.next_functions[0][0].name() == ty.grad_fn.next_functions[0][0].name() == "ReciprocalBackward0"
    (g,) = await ag.grad(y.sum(), x, create_graph=True)
    (gg,) = await ag.grad(g.sum(), x)
    (tg,) = torch.autograd.grad(ty.sum(), tx, create_graph=True)
    (tgg,) = torch.autograd.grad(tg.sum(), tx)
    np.testing.assert_allclose(g.tolist(), tg.tolist(), rtol=1e-12)
    np.testing.assert_allclose(gg.tolist(), tgg.tolist(), rtol=1e-12)
    np.testing.assert_allclose(g.tolist(), -2.5 / data**2, rtol=1e-12)


def _raises_like_torch(fn, torch, match):
    for lib in (ag, torch):
        with pytest.raises(RuntimeError, match=match):
            fn(lib)


def test_inplace_ops_refuse_overlapping_memory_as_torch_does(torch):
    """seeds 17, 229: an input that shares memory with the written-to tensor, but not exactly."""
    partial = "some elements of the input tensor and the written-to tensor refer to a single memory location"
    _raises_like_torch(lambda lib: (v := lib.ones(3) * 1).unsqueeze(0).mul_(v), torch, partial)
    _raises_like_torch(lambda lib: (v := lib.arange(4.0))[1:].copy_(v[:3]), torch, partial)
    internal = "more than one element of the written-to tensor refers to a single memory location"
    _raises_like_torch(lambda lib: lib.ones(1).expand(3).add_(1.0), torch, internal)
    for lib in (ag, torch):  # the same memory with the same strides is fine, as is an expand that repeats nothing
        v = lib.arange(3.0)
        assert v[:].mul_(v).tolist() == [0.0, 1.0, 4.0]
        s = lib.tensor(2.0, requires_grad=True) * 1
        assert s.expand(()).mul_(0.5).tolist() == 1.0  # seed 165


async def test_fill_zero_and_self_copy_may_write_an_expanded_tensor(torch):
    """seeds 4867, 8121, 8657: torch's fill_/zero_ skip the internal-overlap check and copy_ from
    the same memory returns at once; the backward through an expanded view changed in place
    then fails in torch (it writes the gradient back through the view), so it does here too."""
    for lib in (ag, torch):
        e = lib.ones(1).expand(3)
        assert e.fill_(2.0).tolist() == [2.0] * 3 and e.zero_().tolist() == [0.0] * 3
        assert e.expand(3).copy_(e).tolist() == [0.0] * 3
        with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
            lib.ones(1).expand(3).copy_(lib.ones(3))
    for lib in (ag, torch):
        x = lib.tensor([0.5], dtype=lib.float64, requires_grad=True)
        v = x.cos().expand(2)
        v.fill_(0.7)
        with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
            result = (v * 1).sum().backward()
            if lib is ag:
                await result


async def test_a_mean_gradient_made_with_create_graph_can_change_in_place(torch):
    """seed 1726: torch's mean backward expands, then divides, so the gradient is a new tensor."""
    out = []
    for lib in (ag, torch):
        x = lib.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=lib.float64, requires_grad=True)
        w = lib.tensor(3.0, dtype=lib.float64, requires_grad=True)
        if lib is ag:
            (g,) = await ag.grad(x.mean() * w, x, create_graph=True)
        else:
            (g,) = torch.autograd.grad(x.mean() * w, x, create_graph=True)
        g.mul_(x)
        out.append(g.tolist())
    assert out[0] == out[1] == [[0.75, 1.5], [2.25, 3.0]]


async def test_setitem_with_a_basic_index_writes_through_a_view(torch):
    """seeds 41, 178, 682, 975: ``y[i] = v`` is ``y[i].copy_(v)`` (or ``fill_``) as in torch."""
    leaf_view = "a view of a leaf Variable that requires grad is being used in an in-place operation."
    _raises_like_torch(lambda lib: lib.ones(3, requires_grad=True).__setitem__(0, 2.0), torch, re.escape(leaf_view))
    grads = []
    for lib in (ag, torch):
        x = lib.tensor([0.5, -1.0, 2.0], dtype=lib.float64, requires_grad=True)
        w = lib.tensor(3.0, dtype=lib.float64, requires_grad=True)
        y = x * 2
        e = (x.sum() * 1).expand(2)
        e[1] = 1.5  # one element of an expanded tensor: no overlap in what is written
        m = x.mean() * w
        u = m.unsqueeze(0)
        u[0] = m  # the same memory, fully
        y[1] = w
        y[2] = 7.0
        assert y.grad_fn.name().endswith("CopySlices")
        loss = (y * y).sum() + u.sum() * 3 + e.sum()
        if lib is ag:
            await loss.backward()
        else:
            loss.backward()
        grads.append((x.grad.tolist(), w.grad.tolist(), e.tolist()))
    np.testing.assert_allclose(np.array(grads[0][0]), np.array(grads[1][0]), rtol=1e-12)
    np.testing.assert_allclose(grads[0][1], grads[1][1], rtol=1e-12)
    assert grads[0][2] == grads[1][2]


def test_fill_nodes_are_named_as_torch_names_them(torch):
    for lib in (ag, torch):
        y = lib.ones(2, requires_grad=True) * 1
        assert y.fill_(2.0).grad_fn.name() == "FillBackward2"
        assert y.fill_(lib.tensor(2.0)).grad_fn.name() == "FillBackward3"
        assert y.zero_().grad_fn.name() == "ZeroBackward0"


# --------------------------------------------------------------------------- the fuzzer itself
from benchmarks import fuzz  # noqa: E402  (after the regression tests it feeds)


async def _unknown(seeds: range) -> list[tuple[int, fuzz.Failure]]:
    out = []
    for seed in seeds:
        prog, failure = await fuzz.check_seed(seed)
        if failure is not None and fuzz.known(prog, failure) is None:
            out.append((seed, failure))
    return out


async def test_random_graphs_agree_with_torch(torch):
    """200 random programs (seeds 0..199): no difference outside Note [known differences]."""
    assert await _unknown(range(200)) == []


@pytest.mark.slow
async def test_thousands_of_random_graphs_agree_with_torch(torch):
    assert await _unknown(range(200, 3200)) == []


async def test_the_fuzzer_finds_and_shrinks_an_injected_wrong_gradient(monkeypatch, torch):
    """sin's backward off by half: the fuzzer must see it and cut the program to a few statements."""
    from asyncgrad.ops import elementwise

    def wrong(self, F, g):
        (x,) = F.unpack(self)
        return (g * F.cos(x) * 1.5,)

    monkeypatch.setattr(elementwise.SinBackward0, "backward", wrong)
    # the row's own apply evaluates its derivative without ``backward`` (Note [Number ops apply
    # their formula]): without it, OpNode.apply runs the patched formula
    monkeypatch.delattr(elementwise.SinBackward0, "apply")
    for seed in range(200):
        prog, failure = await fuzz.check_seed(seed)
        if failure is not None and failure.what in ("grad", "retained grad", "value") and "sin(" in \
                "".join(s.code for s in prog.stmts[: failure.index + 1]):
            break
    else:
        pytest.fail("200 programs did not catch a wrong sin gradient")
    small, small_failure = await fuzz.shrink(prog, failure)
    assert small_failure.key == failure.key
    assert len(small.stmts) <= 5, fuzz.as_script(small)
    assert any("sin(" in s.code for s in small.stmts)
    script = fuzz.as_script(small)  # the reproducer is the code that ran, with await for AWAIT
    for stmt in small.stmts:
        assert stmt.code.replace("AWAIT ", "await ").split("\n")[0] in script
    # run in both libraries, the two scripts print different gradients; with the real formula, the same
    wrong_ag = await asyncio.to_thread(_run_script, script)
    right_torch = await asyncio.to_thread(_run_script, fuzz.as_script(small, "torch"))
    assert wrong_ag != right_torch and "sin(" in script
    monkeypatch.undo()
    assert await fuzz.run_program(small) is None
    assert await asyncio.to_thread(_run_script, script) == right_torch


def _run_script(text: str) -> list[str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(text, "<reproducer>", "exec"), {"__name__": "reproducer"})
    return out.getvalue().splitlines()


def test_cat_stack_and_array_indexing_give_contiguous_results(torch):
    """seeds 5693, 8123: numpy kept its inputs' layout, so contiguous() copied and a later view
    (flatten, view) was a copy: in-place writes through it did not reach the tensor."""
    for lib in (ag, torch):
        a = lib.arange(24.0).reshape(4, 6).T
        x = lib.arange(24.0).reshape(2, 3, 4)
        for out in (lib.stack([a, a], 2), lib.cat([a, a], 1), x[:, lib.tensor([0, 2])]):
            assert out.contiguous() is out
            flat = out.flatten()
            flat[0] = -1.0
            assert out.reshape(-1)[0].item() == -1.0


async def test_materialized_gradients_require_grad_under_create_graph(torch):
    """63 of the first 1,000 programs: torch returns zeros_like(input, requires_grad=create_graph)."""
    for create_graph in (False, True):
        x, y = ag.ones(2, requires_grad=True), ag.ones(2, requires_grad=True)
        (g,) = await ag.grad((x * 2).sum(), y, create_graph=create_graph, materialize_grads=True)
        tx, ty = torch.ones(2, requires_grad=True), torch.ones(2, requires_grad=True)
        (tg,) = torch.autograd.grad((tx * 2).sum(), ty, create_graph=create_graph, materialize_grads=True)
        assert g.requires_grad is tg.requires_grad is create_graph and g.tolist() == tg.tolist() == [0.0, 0.0]


@pytest.mark.parametrize("case", ["max result", "min input", "maximum operand"])
async def test_changing_what_torch_saves_refuses_the_backward(case, torch):
    """seeds 214, 219, 759: torch's max()/min() save input and result, maximum/minimum both
    operands (even one that needs no gradient); changing one in place refuses the backward."""
    for lib in (ag, torch):
        x = lib.tensor([0.5, -1.0, 2.0], dtype=lib.float64, requires_grad=True)
        c = lib.tensor([1.0, 0.0, 3.0], dtype=lib.float64)
        if case == "max result":
            out = x.max()
            out.mul_(2.0)
        elif case == "min input":
            y = x * 1
            out = lib.min(y)
            y.add_(1.0)
        else:
            out = lib.maximum(c, x).sum()
            c.sub_(1.0)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            result = out.backward()
            if lib is ag:
                await result


async def test_relu_gradient_is_torchs_threshold_backward(torch):
    """seeds 121, 159: under create_graph torch's relu gradient is threshold_backward(grad, result),
    which requires grad when the result does; and it passes the gradient where the result is NaN."""
    data = np.array([0.5, -1.0, 2.0, np.nan, 0.0])
    for create_graph in (False, True):
        x, tx = ag.tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)
        (g,) = await ag.grad((x * 1).relu().sum(), x, create_graph=create_graph)
        (tg,) = torch.autograd.grad((tx * 1).relu().sum(), tx, create_graph=create_graph)
        assert g.tolist() == tg.tolist() == [1.0, 0.0, 1.0, 1.0, 0.0]
        assert g.requires_grad is tg.requires_grad is create_graph
    y, ty = (x * 1).relu(), (tx * 1).relu()
    (g,) = await ag.grad((y * y * x).sum(), x, create_graph=True)
    (tg,) = torch.autograd.grad((ty * ty * tx).sum(), tx, create_graph=True)
    (gg,) = await ag.grad(g.sum(), x)
    (tgg,) = torch.autograd.grad(tg.sum(), tx)
    np.testing.assert_allclose(gg.tolist(), tgg.tolist(), rtol=1e-12)


@pytest.mark.parametrize("make", [lambda x, y: x.reshape(12), lambda x, y: x.t().reshape(12),
                                  lambda x, y: x.t().flatten(),
                                  lambda x, y: y[:, :, 0:2].reshape(2, 6), lambda x, y: y[0:1].reshape(12),
                                  lambda x, y: y.unsqueeze(0).expand(2, 2, 3, 4).reshape(4, 12)])
def test_reshape_nodes_are_named_as_torch_names_them(make, torch):
    """A view (ViewBackward0, ReshapeAliasBackward0 for a non-contiguous input), or a clone viewed in
    the new shape (UnsafeViewBackward0 after CloneBackward0)."""
    names = []
    for lib in (ag, torch):
        out = make(lib.ones(3, 4, requires_grad=True) * 1, lib.ones(2, 3, 4, requires_grad=True) * 1)
        names.append((out.grad_fn.name(), out.grad_fn.next_functions[0][0].name()))
    assert names[0] == names[1]


def test_clone_keeps_the_layout_and_softmax_is_contiguous(torch):
    """seeds 1922, 3565: which results are contiguous decides whether a later reshape is a view
    (ViewBackward0) or a copy (UnsafeViewBackward0), and whether view() succeeds."""
    def contiguous(t):  # asyncgrad has no is_contiguous(): its array's flag
        return t.is_contiguous() if isinstance(t, torch.Tensor) else bool(t.data.flags.c_contiguous)

    for lib in (ag, torch):
        x = lib.arange(12.0).reshape(3, 4).t()
        c = x.clone()
        assert not contiguous(c) and contiguous(c.t())  # torch's preserve_format
        assert contiguous(x.contiguous()) and contiguous(lib.ones(3).expand(2, 3).clone())
        for out in (x.softmax(0), x.log_softmax(1)):
            assert contiguous(out)
            out.view(12)


async def test_fill_and_zero_gradients_are_constants_under_create_graph(torch):
    """seeds 531, 8635: torch's FillBackward/ZeroBackward give zeros_like(grad), which need no grad."""
    for lib in (ag, torch):
        x = lib.tensor([0.5, -1.0], dtype=lib.float64, requires_grad=True)
        y = x.clone()
        y.zero_()
        out = lib.sin(y) * x
        if lib is ag:
            (g,) = await ag.grad(out.sum(), x, create_graph=True)
        else:
            (g,) = torch.autograd.grad(out.sum(), x, create_graph=True)
        assert g.tolist() == [0.0, 0.0]  # d/dx of sin(0) * x
        (h,) = torch.autograd.grad((y * 3).sum(), x, create_graph=True) if lib is torch else \
            await ag.grad((y * 3).sum(), x, create_graph=True)
        assert h.tolist() == [0.0, 0.0] and h.requires_grad is False


@pytest.mark.parametrize("make", [lambda y: y[:, 0:2].reshape(2, 8),
                                  lambda y: y.transpose(1, 2)[:, :, 0:1].reshape(2, 4)])
def test_a_view_of_a_non_contiguous_input_is_a_reshape_alias(make, torch):
    names = [make(lib.ones(2, 3, 4, requires_grad=True) * 1).grad_fn.name() for lib in (ag, torch)]
    assert names[0] == names[1] == "ReshapeAliasBackward0"
