"""A node recorded outside anomaly mode that fails in a backward run in anomaly mode: as torch, the
warning says that no forward pass information is available (torch's test_anomaly_detect_nan and
test_nested_anomaly_detect_nan), and the error is raised as it was."""

from __future__ import annotations

import warnings

import pytest

import asyncgrad as ag

SIZE = 10


class _NanBackward(ag.autograd.Function):
    @staticmethod
    def forward(ctx, inp):
        return inp.sum(0, keepdim=True)

    @staticmethod
    def backward(ctx, g):
        out = g.clone().expand(SIZE)
        out[0] = 0
        out[0] /= 0
        return out


def test_the_words_are_torchs(torch):
    """torch's warning, for a node recorded outside anomaly mode, word for word."""
    class TorchNan(torch.autograd.Function):
        @staticmethod
        def forward(ctx, inp):
            return inp.sum(0, keepdim=True)

        @staticmethod
        def backward(ctx, g):
            out = g.clone().expand(SIZE)
            out[0] = 0
            out[0] /= 0
            return out

    messages = {}
    for lib, fn in ((torch, TorchNan), (ag, _NanBackward)):
        out = fn.apply(lib.rand(SIZE, requires_grad=True))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with pytest.raises(RuntimeError, match="returned nan values in its 0th output"):
                with lib.autograd.detect_anomaly():
                    out.backward() if lib is torch else out.backward_sync()
        messages[lib] = [str(w.message).split(" (Triggered internally at")[0] for w in caught
                         if "Error detected in" in str(w.message)]
    assert messages[ag] == [m.replace("TorchNan", "_NanBackward") for m in messages[torch]]
    assert "No forward pass information available" in messages[ag][0]


async def test_recorded_in_anomaly_mode_names_the_forward_call():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(RuntimeError, match="returned nan values in its 0th output"):
            with ag.autograd.detect_anomaly():
                out = _NanBackward.apply(ag.rand(SIZE, requires_grad=True))
                await out.backward()
    texts = [str(w.message) for w in caught]
    assert any("Traceback of forward call that caused the error" in t and "_NanBackward.apply" in t for t in texts)
    assert not any("No forward pass information" in t for t in texts)


async def test_no_warning_outside_anomaly_mode():
    out = _NanBackward.apply(ag.rand(SIZE, requires_grad=True))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        await out.backward()
    assert not [w for w in caught if "Error detected in" in str(w.message)]


async def test_a_double_backward_names_the_call_that_induced_it():
    """torch's test_nested_anomaly_detect_nan: a custom Function recorded inside another's backward
    in anomaly mode keeps it as its parent (Note [Anomaly parents]); its failure names both calls."""
    class Outer(ag.autograd.Function):
        @staticmethod
        def forward(ctx, inp):
            ctx.save_for_backward(inp)
            return inp.sum(0, keepdim=True)

        @staticmethod
        def backward(ctx, g):
            (inp,) = ctx.saved_tensors
            g = g.clone().expand(SIZE)
            return Inner.apply(g * inp, g + inp)

    class Inner(ag.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a * 2.0 + b

        @staticmethod
        def backward(ctx, g):
            g1, g2 = g.clone(), g.clone()
            g1[0] = 0
            g1[0] /= 0
            return g1, g2

    inp = ag.rand(SIZE, requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(RuntimeError, match="Function 'InnerBackward' returned nan values in its 0th output."):
            with ag.autograd.detect_anomaly():
                out = Outer.apply(inp)
                (ginp,) = await ag.autograd.grad(out, (inp,), create_graph=True)
                await ginp.sum().backward()
    texts = [str(w.message) for w in caught]
    assert any("Inner.apply" in t and "Error detected in InnerBackward" in t for t in texts)
    assert any("Previous calculation was induced by OuterBackward" in t and "Outer.apply" in t for t in texts)
