"""set_ resets a tensor's grad accumulator in any grad mode, as torch's generated code does: a graph
recorded before the set_ no longer counts as using the leaf, yet still accumulates into it."""

from __future__ import annotations

import pytest
from helpers import torch

import asyncgrad as ag

NOT_USED = "appears to not have been used in the graph"


def _sources(lib):
    return [
        lambda x: lib.rand(2),        # new memory, same shape
        lambda x: lib.rand(3),        # new memory, a new shape
        lambda x: None,               # set_(): empty
        lambda x: x,                  # its own memory
    ]


def _libs():
    return (ag, torch) if torch is not None else (ag,)


@pytest.mark.parametrize("which", range(4))
async def test_a_graph_recorded_before_set_does_not_use_the_leaf(which):
    for lib in _libs():
        x = lib.rand(2, requires_grad=True)
        old = lib.autograd.graph.get_gradient_edge(x)
        out = x.clone()
        with lib.no_grad():
            source = _sources(lib)[which](x)
            x.set_() if source is None else x.set_(source)
        assert lib.autograd.graph.get_gradient_edge(x).node is not old.node
        assert x.is_leaf and x.grad_fn is None
        with pytest.raises(RuntimeError, match=NOT_USED):
            grads = lib.autograd.grad(out.sum(), x)
            if lib is ag:
                await grads
        grads = lib.autograd.grad(out.sum(), old)
        if lib is ag:
            grads = await grads
        assert grads[0].tolist() == [1.0, 1.0]


async def test_the_old_graph_still_accumulates_into_the_leaf_and_its_hooks_run():
    results = {}
    for lib in _libs():
        seen = []
        x = lib.rand(2, requires_grad=True)
        x.register_hook(lambda g, seen=seen: seen.append(g.tolist()))
        out = x.clone() * 3
        with lib.no_grad():
            x.set_(lib.zeros(2))
        done = out.sum().backward()
        if lib is ag:
            await done
        after = (x * 2).sum().backward()
        if lib is ag:
            await after
        results[lib.__name__] = (x.grad.tolist(), seen)
    assert results["asyncgrad"] == ([5.0, 5.0], [[3.0, 3.0], [2.0, 2.0]])
    if torch is not None:
        assert results["torch"] == results["asyncgrad"]
