"""The cpu worker's chain step computes what ``call_function`` and ``route`` compute (Note [One evaluate
path] in docs/design/engine-worker.md): the fuzzer's random programs, run with the chain step on and
off, give the same values, gradients and errors, and run the same nodes in the same order."""

import asyncio
import warnings

import numpy as np
import pytest
from conftest import TORCH_NEEDED

import asyncgrad as ag
from asyncgrad.engine import worker
from benchmarks import fuzz

pytest.importorskip("torch", reason=TORCH_NEEDED)  # the fuzzer builds its programs by running them in torch

SEEDS = range(0, 200, 2)


def _snapshot(value):
    """What a statement's variable holds, comparable with ``==``: arrays as bytes, errors as text."""
    if isinstance(value, ag.Tensor):
        grad = value.grad
        return ("tensor", value.dtype, tuple(value.shape), np.asarray(value.detach().numpy()).tobytes(),
                None if grad is None else np.asarray(grad.detach().numpy()).tobytes(),
                None if value.grad_fn is None else value.grad_fn.name())
    if isinstance(value, (tuple, list)):
        return tuple(_snapshot(v) for v in value)
    if isinstance(value, (int, float, bool, str)) or value is None:
        return value
    return type(value).__name__


async def _run(prog, chain_step, monkeypatch):
    """The program's asyncgrad side: each statement's error, every variable after each statement, and
    the backward nodes run, by name, in order."""
    monkeypatch.setattr(worker, "CHAIN_STEP", chain_step)
    ns = fuzz.namespace("asyncgrad", prog.consts)
    seen = []
    with warnings.catch_warnings(), ag.profiler.trace() as trace:
        warnings.simplefilter("ignore")
        for stmt in prog.stmts:
            error = await fuzz.run_asyncgrad(stmt, ns)
            seen.append(None if error is None else f"{type(error).__name__}: {error}")
            seen.append({name: _snapshot(ns[name]) for name in stmt.defines + stmt.uses if name in ns})
    assert not ag.get_engine().live
    return seen, [(e.name, e.inline) for e in trace.events]


@pytest.mark.parametrize("seed", SEEDS)
async def test_the_chain_step_and_route_agree_on_random_programs(seed, monkeypatch):
    prog = fuzz.generate(seed)
    with_step, nodes_with = await _run(prog, True, monkeypatch)
    without, nodes_without = await _run(prog, False, monkeypatch)
    assert with_step == without
    assert nodes_with == nodes_without


async def test_the_switch_takes_the_other_path(monkeypatch):
    """The test above can fail: with the switch off, the chain step is not taken (a chain of
    ``x * 2.0`` goes through ``call_function``)."""
    calls = []
    real = worker.call_function

    def counting(graph_task, node, inputs):
        calls.append(node.name())
        return real(graph_task, node, inputs)

    monkeypatch.setattr(worker, "call_function", counting)
    x = ag.ones(3, requires_grad=True)
    for chain_step in (True, False):
        monkeypatch.setattr(worker, "CHAIN_STEP", chain_step)
        calls.clear()
        await (x * 2.0 * 3.0).sum().backward()
        assert ("MulBackward0" in calls) is (not chain_step), calls
    assert x.grad.tolist() == [12.0, 12.0, 12.0]
    await asyncio.sleep(0)
