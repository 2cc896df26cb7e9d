"""torch.autograd behaviours at the engine's front door (issue 10, items 4 and 7): ``grad()``'s
``materialize_grads``, ``is_grads_batched`` and dict ``inputs``, ``set_multithreading_enabled``,
``inference_mode``; each against the torch in the venv."""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np
import pytest

import asyncgrad as ag

X = [0.5, -1.0, 2.0]


def _leaf(lib, values=X):
    return lib.tensor(values, dtype=lib.float64, requires_grad=True)


def _grad(lib):
    return ag.grad if lib is ag else lib.autograd.grad


def _backward(lib):
    return ag.backward if lib is ag else lib.autograd.backward


def _np(t):
    return None if t is None else t.detach().numpy()


async def _error(fn, *args):
    try:
        result = fn(*args)
        if hasattr(result, "__await__"):
            await result
    except Exception as exc:  # noqa: BLE001 - the test compares types and texts
        return type(exc), str(exc).replace("torch.Size", "asyncgrad.Size")
    return None


# --------------------------------------------------------------------------- materialize_grads
@pytest.mark.parametrize("create_graph", [False, True])
async def test_materialized_zeros_require_grad_as_torch(create_graph, torch):
    x, z = _leaf(ag), _leaf(ag, [1.0, 2.0])
    got = await ag.grad((x * x).sum(), [x, z], create_graph=create_graph, materialize_grads=True)
    tx, tz = _leaf(torch), _leaf(torch, [1.0, 2.0])
    want = torch.autograd.grad((tx * tx).sum(), [tx, tz], create_graph=create_graph, materialize_grads=True)
    assert [g.requires_grad for g in got] == [g.requires_grad for g in want] == [create_graph, create_graph]
    for g, w in zip(got, want):
        np.testing.assert_allclose(_np(g), _np(w))
    if create_graph:  # the first gradient is differentiable again, as torch's
        (gg,) = await ag.grad(got[0].sum(), x)
        (tgg,) = torch.autograd.grad(want[0].sum(), tx)
        np.testing.assert_allclose(_np(gg), _np(tgg))


# --------------------------------------------------------------------------- is_grads_batched
@pytest.mark.parametrize("create_graph", [False, True])
async def test_is_grads_batched_matches_torch(create_graph, torch):
    rng = np.random.default_rng(0)
    v = rng.standard_normal((4, 3))
    w = rng.standard_normal((4, 2))

    def outputs(lib, x):
        return (x.sin() * x, (x[:2] * 3).exp())

    x = _leaf(ag)
    got = await ag.grad(outputs(ag, x), x, [ag.tensor(v), ag.tensor(w)], create_graph=create_graph,
                        is_grads_batched=True)
    tx = _leaf(torch)
    want = torch.autograd.grad(outputs(torch, tx), tx, [torch.tensor(v), torch.tensor(w)],
                               create_graph=create_graph, is_grads_batched=True)
    assert got[0].shape == tuple(want[0].shape) == (4, 3)
    np.testing.assert_allclose(_np(got[0]), _np(want[0]), rtol=1e-12)
    assert got[0].requires_grad == want[0].requires_grad == create_graph
    if create_graph:
        (gg,) = await ag.grad(got[0].sum(), x)
        (tgg,) = torch.autograd.grad(want[0].sum(), tx)
        np.testing.assert_allclose(_np(gg), _np(tgg), rtol=1e-12)
    # the graph is freed after the last sample unless retained, as torch's after its one backward
    x2 = _leaf(ag)
    out = x2.exp() * x2
    await ag.grad(out, x2, ag.tensor(v), is_grads_batched=True)
    err = await _error(lambda: ag.grad(out, x2, ag.tensor(v[0])))
    assert err is not None and "second time" in err[1]


async def test_is_grads_batched_unused_inputs_and_materialize_as_torch(torch):
    v = np.eye(3)
    x, z = _leaf(ag), _leaf(ag, [1.0, 2.0])
    tx, tz = _leaf(torch), _leaf(torch, [1.0, 2.0])
    got = await ag.grad(x * 2, [x, z], ag.tensor(v), is_grads_batched=True, allow_unused=True, retain_graph=True)
    want = torch.autograd.grad(tx * 2, [tx, tz], torch.tensor(v), is_grads_batched=True, allow_unused=True)
    assert got[1] is None and want[1] is None
    np.testing.assert_allclose(_np(got[0]), _np(want[0]))
    got = await ag.grad(x * 2, [x, z], ag.tensor(v), is_grads_batched=True, materialize_grads=True)
    want = torch.autograd.grad(tx * 2, [tx, tz], torch.tensor(v), is_grads_batched=True, materialize_grads=True)
    assert got[1].shape == tuple(want[1].shape) == (2,), "torch materializes an unbatched zero"
    np.testing.assert_allclose(_np(got[1]), _np(want[1]))


async def test_is_grads_batched_errors_match_torch(torch):
    cases = [
        lambda lib, x: _grad(lib)((x * 2), x, lib.ones(4, 2, dtype=lib.float64), is_grads_batched=True),
        lambda lib, x: _grad(lib)((x * 2), x, lib.ones(3, dtype=lib.float64), is_grads_batched=True),
        lambda lib, x: _grad(lib)((x * 2).sum(), x, None, is_grads_batched=True),
        lambda lib, x: _grad(lib)([x * 2, x * 3], x, [lib.ones(4, 3, dtype=lib.float64),
                                                             lib.ones(5, 3, dtype=lib.float64)], is_grads_batched=True),
        lambda lib, x: _grad(lib)([x * 2, x * 3], x, [lib.ones(4, 3, dtype=lib.float64), None],
                                         is_grads_batched=True),
        lambda lib, x: _grad(lib)(x * 2, x, lib.ones(0, 3, dtype=lib.float64), is_grads_batched=True),
    ]
    for case in cases:
        got = await _error(case, ag, _leaf(ag))
        want = await _error(case, torch, _leaf(torch))
        assert want is not None
        assert got == want


# --------------------------------------------------------------------------- inputs
async def test_dict_inputs_give_a_dict_and_other_mappings_are_refused(torch):
    x, z = _leaf(ag), _leaf(ag, [1.0, 2.0])
    got = await ag.grad((x * 3).sum() + (z * z).sum(), {"b": z, "a": x})
    tx, tz = _leaf(torch), _leaf(torch, [1.0, 2.0])
    want = torch.autograd.grad((tx * 3).sum() + (tz * tz).sum(), {"b": tz, "a": tx})
    assert type(got) is dict and list(got) == list(want) == ["b", "a"]
    for key in want:
        np.testing.assert_allclose(_np(got[key]), _np(want[key]))
    got_err = await _error(lambda: ag.grad((x * 3).sum(), OrderedDict(a=x)))
    want_err = await _error(lambda: torch.autograd.grad((tx * 3).sum(), OrderedDict(a=tx)))
    assert got_err == want_err and got_err[0] is TypeError


async def test_empty_inputs_have_torchs_words(torch):
    for make in (lambda lib, x: _grad(lib)((x * 2).sum(), []),
                 lambda lib, x: _grad(lib)((x * 2).sum(), ()),
                 lambda lib, x: _backward(lib)((x * 2).sum(), inputs=[])):
        got = await _error(make, ag, _leaf(ag))
        want = await _error(make, torch, _leaf(torch))
        assert got == want and got[0] is RuntimeError and "cannot be empty" in got[1]


# --------------------------------------------------------------------------- set_multithreading_enabled
def _threads_used(prof):
    return {e.thread_id for e in prof.events}


async def test_set_multithreading_enabled_keeps_every_node_on_the_loop():
    ag.set_inline_threshold("cpu", 0)  # every op node would go to a kernel thread
    loop_thread = threading.get_ident()
    x = ag.ones(3, requires_grad=True)
    with ag.profiler.trace() as prof:
        await (x.exp() * 2).sum().backward()
    assert _threads_used(prof) - {loop_thread}, "with threads, op nodes run in kernel threads"
    with ag.set_multithreading_enabled(False):
        with ag.profiler.trace() as prof:
            await (x.exp() * 2).sum().backward()
    assert _threads_used(prof) == {loop_thread} and all(e.inline for e in prof.events)
    np.testing.assert_allclose(x.grad.numpy(), 4 * np.e * np.ones(3))
    # as a function it switches at once; the previous mode comes back on __exit__ only
    switch = ag.set_multithreading_enabled(False)
    with ag.profiler.trace() as prof:
        await (x * 2).sum().backward()
    assert all(e.inline for e in prof.events)
    switch.__exit__(None, None, None)
    with ag.profiler.trace() as prof:
        await (x * 2).sum().backward()
    assert not all(e.inline for e in prof.events)


async def test_set_multithreading_enabled_as_a_decorator_and_its_type_error(torch):
    ag.set_inline_threshold("cpu", 0)

    @ag.set_multithreading_enabled(False)
    async def run(x):
        with ag.profiler.trace() as prof:
            await (x * 2).sum().backward()
        return prof

    x = ag.ones(2, requires_grad=True)
    assert all(e.inline for e in (await run(x)).events)
    with ag.profiler.trace() as prof:
        await (x * 2).sum().backward()
    assert not all(e.inline for e in prof.events), "the decorator switches only inside the function"
    with pytest.raises(TypeError) as got:
        ag.set_multithreading_enabled("no")
    with pytest.raises(TypeError) as want:
        torch.autograd.set_multithreading_enabled("no")
    assert str(got.value) == str(want.value)


# --------------------------------------------------------------------------- inference_mode
async def test_inference_mode_records_nothing_as_torch(torch):
    for lib in (ag, torch):
        x = _leaf(lib)
        with lib.inference_mode():
            y = x * 2
            assert lib.is_inference_mode_enabled()
            with lib.inference_mode(False):
                assert not lib.is_inference_mode_enabled()
                assert (x * 2).requires_grad, "mode=False switches grad mode on"
        assert not lib.is_inference_mode_enabled()
        assert y.requires_grad is False and y.grad_fn is None
        assert (x * 2).requires_grad

        @lib.inference_mode
        def bare(t):
            return t * 3

        @lib.inference_mode()
        def called(t):
            return t * 3

        assert bare(x).requires_grad is False and called(x).requires_grad is False

        @lib.inference_mode(mode=False)
        def off(t):
            return t * 3

        assert off(x).requires_grad is True


async def test_inference_mode_decorates_coroutine_functions():
    @ag.inference_mode()
    async def run(t):
        return t * 2, ag.is_inference_mode_enabled()

    x = ag.ones(2, requires_grad=True)
    y, enabled = await run(x)
    assert enabled and not y.requires_grad and not ag.is_inference_mode_enabled()
