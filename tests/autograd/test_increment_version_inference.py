"""``increment_version`` as torch's current test_increment_version: bumps a normal tensor's version
(float or integer), and leaves an inference tensor alone, in inference mode or out of it."""

from __future__ import annotations

import pytest

import asyncgrad as ag


def test_increment_version():
    a = ag.rand(5, requires_grad=True)
    v = a._version
    ag.autograd.graph.increment_version(a)
    assert a._version == v + 1
    b = ag.zeros(5, dtype=ag.int32)
    v = b._version
    ag.autograd.graph.increment_version([b, b])
    assert b._version == v + 2
    with ag.inference_mode():
        c = ag.rand(5, requires_grad=True)
    ag.autograd.graph.increment_version(c)  # does not raise
    with ag.inference_mode():
        ag.autograd.graph.increment_version(c)
    with pytest.raises(RuntimeError, match="Inference tensors do not track version counter"):
        _ = c._version


async def test_a_bump_still_refuses_the_backward():
    a = ag.rand(3, requires_grad=True)
    b = a * 1
    out = b * b
    ag.autograd.graph.increment_version(b)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        await out.sum().backward()
