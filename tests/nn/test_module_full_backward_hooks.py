"""Module.register_full_backward_hook and register_full_backward_pre_hook against torch: what the
hooks see (grad_input, grad_output, None for non-Tensors), what replacing them does to the gradients,
the nodes they hang on, the warning when no input requires grad, and no call in a double backward."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import asyncgrad as ag

torch = pytest.importorskip("torch", reason="the hooks are checked against torch")

X = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])
W = np.array([[0.3, -0.2, 0.1], [0.7, 0.4, -0.6]])


def _np(t):
    if t is None:
        return None
    return t.detach().numpy() if isinstance(t, torch.Tensor) else t.detach().cpu().numpy()


def _run(lib, scale_input=None, scale_output=None):
    """A two-input module (one non-Tensor argument) under both hooks; what they saw and the grads."""
    seen = []

    class Mod(lib.nn.Module):
        def forward(self, x, factor, w):
            return (x * w).sum(1) * factor, (x - w).exp()

    mod = Mod()

    def pre_hook(module, grad_output):
        seen.append(("pre", [_np(g) for g in grad_output]))
        if scale_output is not None:
            return tuple(None if g is None else g * scale_output for g in grad_output)
        return None

    def hook(module, grad_input, grad_output):
        seen.append(("full", [_np(g) for g in grad_input], [_np(g) for g in grad_output]))
        if scale_input is not None:
            return tuple(None if g is None else g * scale_input for g in grad_input)
        return None

    mod.register_full_backward_pre_hook(pre_hook)
    handle = mod.register_full_backward_hook(hook)
    x = lib.tensor(X, requires_grad=True)
    w = lib.tensor(W, requires_grad=True)
    a, b = mod(x, 3.0, w)
    names = (a.grad_fn.name(), b.grad_fn.name())
    loss = (a * lib.tensor([1.0, 2.0])).sum() + b.sum()
    if lib is torch:
        loss.backward()
    else:
        loss.backward_sync()
    handle.remove()
    return seen, _np(x.grad), _np(w.grad), names


@pytest.mark.parametrize("scale_input,scale_output", [(None, None), (2.0, None), (None, 3.0), (2.0, 3.0)])
def test_full_backward_hooks_against_torch(scale_input, scale_output):
    ours = _run(ag, scale_input, scale_output)
    theirs = _run(torch, scale_input, scale_output)
    assert ours[3] == theirs[3] == ("BackwardHookFunctionBackward", "BackwardHookFunctionBackward")
    assert [s[0] for s in ours[0]] == [s[0] for s in theirs[0]] == ["pre", "full"]
    for mine, torchs in zip(ours[0], theirs[0]):
        for a, b in zip(mine[1:], torchs[1:]):
            assert len(a) == len(b)
            for u, v in zip(a, b):
                assert (u is None) == (v is None)
                if u is not None:
                    np.testing.assert_allclose(u, v, rtol=1e-12)
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-12)
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-12)


def test_no_input_requiring_grad_calls_the_hook_at_the_outputs():
    for lib in (ag, torch):
        calls = []
        lin = lib.nn.Linear(3, 2).double()
        lin.register_full_backward_hook(lambda m, gi, go, calls=calls: calls.append((gi, len(go))))
        out = lin(lib.tensor(X))
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            if lib is torch:
                out.sum().backward()
            else:
                out.sum().backward_sync()
        assert any("Full backward hook is firing when gradients are computed with respect to module outputs"
                   in str(x.message) for x in w)
        assert calls == [((None,), 1)]


async def test_no_call_in_a_double_backward_and_none_without_grad_mode():
    calls = []
    mod = ag.nn.MSELoss()
    mod.register_full_backward_hook(lambda m, gi, go: calls.append(1))
    x = ag.tensor([0.3, 0.9], requires_grad=True)
    (gx,) = await ag.autograd.grad(mod(x, ag.tensor([0.0, 1.0])), x, create_graph=True)
    await ag.autograd.grad(gx.sum(), x)
    assert calls == [1]
    with ag.no_grad():
        assert mod(x, ag.tensor([0.0, 1.0])).grad_fn is None


def test_hooks_returning_the_wrong_number_are_refused_in_torchs_words():
    for lib in (ag, torch):
        lin = lib.nn.Linear(3, 2).double()
        lin.register_full_backward_hook(lambda m, gi, go: (None, None))
        out = lin(lib.tensor(X, requires_grad=True)).sum()
        with pytest.raises(RuntimeError, match="Backward hook returned an invalid number of grad_input, got 2, but "
                                               "expected 1"):
            out.backward() if lib is torch else out.backward_sync()
        lin = lib.nn.Linear(3, 2).double()
        lin.register_full_backward_pre_hook(lambda m, go: (None, None))
        out = lin(lib.tensor(X, requires_grad=True)).sum()
        with pytest.raises(RuntimeError, match="Backward pre hook returned an invalid number of grad_output, got 2, "
                                               "but expected 1"):
            out.backward() if lib is torch else out.backward_sync()
