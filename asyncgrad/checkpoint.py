"""Activation checkpointing: keep no intermediates of ``fn``; recompute them during backward.

The classic use of reentrant backward (torch's ``use_reentrant=True`` variant): the forward
runs under ``no_grad``; the recorded node's backward reruns ``fn`` with grad enabled on
detached copies of the inputs and runs a nested ``ag.backward`` through the recomputed
graph, which also accumulates into any parameters ``fn`` closes over.

That nested backward is a reentrant child of the outer one: cancelling or failing the outer
call aborts it too (Note [Cancellation] in engine/engine.py). The parameters ``fn`` closes over
then keep what the nested backwards that had already finished added, and nothing more.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

from asyncgrad import factories
from asyncgrad.autograd.api import backward, call_plain
from asyncgrad.autograd.function import Function
from asyncgrad.autograd.grad_mode import enable_grad, no_grad
from asyncgrad.tensor import Tensor


async def _call(fn: Callable, args: tuple) -> Any:
    result = await call_plain(fn, *args)  # a plain fn may call backward_sync (Note [Sync bridge])
    return await result if inspect.isawaitable(result) else result


class CheckpointFunction(Function):
    @staticmethod
    def forward(ctx, fn: Callable, rng_state: dict, outputs: tuple, *args: Any) -> tuple:
        ctx.fn = fn
        ctx.rng_state = rng_state
        ctx.args = tuple(None if isinstance(a, Tensor) else a for a in args)
        ctx.save_for_backward(*(a for a in args if isinstance(a, Tensor)))
        return tuple(Tensor._make(o.data, o.device, False, None, 0, o._vc) for o in outputs)

    @staticmethod
    async def backward(ctx, *grads: Tensor) -> tuple:
        saved = iter(ctx.saved_tensors)
        inputs = []
        for arg in ctx.args:
            if arg is not None:
                inputs.append(arg)
                continue
            t = next(saved)
            inputs.append(t.detach().requires_grad_(t.requires_grad))
        generator = factories._rng[0]
        current_state = generator.bit_generator.state
        generator.bit_generator.state = ctx.rng_state
        try:
            with enable_grad():
                outputs = await _call(ctx.fn, tuple(inputs))
        finally:
            generator.bit_generator.state = current_state
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        pairs = [(o, g) for o, g in zip(outputs, grads) if isinstance(o, Tensor) and o.requires_grad]
        if not pairs:
            raise RuntimeError(
                "none of output has requires_grad=True, this checkpoint() is not necessary")
        await backward([o for o, _ in pairs], [g for _, g in pairs])
        input_grads = tuple(t.grad if isinstance(t, Tensor) else None for t in inputs)
        return (None, None, None) + input_grads


async def checkpoint(fn: Callable, *args: Any) -> Any:
    """``fn(*args)`` (a ``def`` or an ``async def``) without keeping its intermediates."""
    rng_state = factories._rng[0].bit_generator.state
    with no_grad():
        outputs = await _call(fn, args)
    single = not isinstance(outputs, tuple)
    result = CheckpointFunction.apply(fn, rng_state, (outputs,) if single else outputs, *args)
    return result[0] if single else result
