"""One worker's side of the cluster: its modules, their forward graphs, optimizers and contexts.

Design: docs/design/distributed.md.
"""

from __future__ import annotations

import asyncio
import inspect
import traceback
from dataclasses import dataclass, field
from typing import Any

from asyncgrad.autograd.api import backward, grad
from asyncgrad.distributed._wire import WireTensor, host_array, pack, to_tensor, unpack
from asyncgrad.graph.grad_mode import enable_grad, no_grad
from asyncgrad.graph.node import SECOND_BACKWARD
from asyncgrad.nn.module import Module
from asyncgrad.optim.optimizer import Optimizer
from asyncgrad.tensor import Tensor

# Note [Forward graphs on the worker]: a forward run with grad mode on keeps its graph, keyed by
# the call id the caller chose, for as long as the caller's ``RemoteCallBackward`` node may still
# run: its inputs (fresh leaves, requiring grad where the caller's tensors did) and its outputs.
# A backward without ``retain_graph`` frees it, as the engine frees saved tensors; so does the
# caller's node being collected without a backward (``release``). A backward runs asyncgrad's own
# engine on the outputs with the gradients the caller sent: parameters accumulate into their
# ``.grad`` here (or, in a distributed autograd context, into the context's store) and the input
# leaves' gradients go back. Backwards through different calls run concurrently on this loop and
# meet only at the parameters' AccumulateGrad, which is exact (Note [One writer per leaf]);
# backwards through the same call (``retain_graph``) take turns, since they share its leaves.


@dataclass
class _Graph:
    """The forward graph of one remote call (Note [Forward graphs on the worker])."""

    module_id: int
    leaves: list[Tensor]
    outputs: list[Tensor]
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


def _wire(t: Tensor | None) -> WireTensor | None:
    return None if t is None else WireTensor(host_array(t.detach()), False, str(t.device))


class WorkerState:
    """Everything one worker holds; its methods run on the worker's own event loop."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.modules: dict[int, Module] = {}
        self.optimizers: dict[int, Optimizer] = {}
        self.graphs: dict[int, _Graph] = {}
        self.contexts: dict[int, dict[tuple[int, str], Tensor]] = {}

    async def dispatch(self, method: str, args: tuple) -> tuple[bool, Any]:
        try:
            return True, await getattr(self, "do_" + method)(*args)
        except Exception as exc:  # sent to the caller, which raises WorkerError (never lost here)
            return False, (type(exc).__name__, str(exc), traceback.format_exc())

    def _module(self, module_id: int) -> Module:
        module = self.modules.get(module_id)
        if module is None:
            raise RuntimeError(f"no module {module_id} on worker {self.index} (was the worker restarted?)")
        return module

    # ------------------------------------------------------------------ modules
    async def do_build(self, module_id: int, cls: Any, args: tuple, kwargs: dict) -> str:
        module = cls(*unpack(args), **unpack(kwargs))
        if inspect.isawaitable(module):
            module = await module
        if not isinstance(module, Module):
            raise TypeError(f"cluster.remote() builds an ag.nn.Module, but {cls!r} made a {type(module).__name__}")
        self.modules[module_id] = module
        return type(module).__name__

    async def do_forward(self, module_id: int, call_id: int, args: Any, kwargs: Any, record: bool) -> Any:
        module = self._module(module_id)
        leaves: list[Tensor] = []

        def leaf(w: WireTensor) -> Tensor:
            t = to_tensor(w, requires_grad=record and w.requires_grad)
            leaves.append(t)
            return t

        args, kwargs = unpack(args, leaf), unpack(kwargs, leaf)
        outputs: list[Tensor] = []

        def out(t: Tensor) -> WireTensor:
            outputs.append(t)
            return WireTensor(host_array(t.detach()), record and t.requires_grad, str(t.device))

        with enable_grad() if record else no_grad():
            result = module(*args, **kwargs)
            if inspect.isawaitable(result):
                result = await result
        packed = pack(result, out)
        if record and any(t.requires_grad for t in outputs):
            self.graphs[call_id] = _Graph(module_id, leaves, outputs)
        return packed

    async def do_backward(self, call_id: int, grads: list, retain_graph: bool, ctx_id: int | None) -> list:
        graph = self.graphs.get(call_id)
        if graph is None:
            raise RuntimeError(SECOND_BACKWARD)
        async with graph.lock:
            try:
                roots, root_grads = [], []
                for t, g in zip(graph.outputs, grads):
                    if g is not None and t.requires_grad:
                        roots.append(t)
                        root_grads.append(to_tensor(g))
                if not roots:
                    return [None] * len(graph.leaves)
                wanted = [t for t in graph.leaves if t.requires_grad]
                if ctx_id is None:
                    for t in wanted:
                        t.grad = None
                    await backward(roots, root_grads, retain_graph=retain_graph)
                    return [_wire(t.grad) if t.requires_grad else None for t in graph.leaves]
                named = [(n, p) for n, p in self._module(graph.module_id).named_parameters() if p.requires_grad]
                got = await grad(roots, wanted + [p for _, p in named], root_grads, retain_graph=retain_graph,
                                 allow_unused=True)
                store = self.contexts.setdefault(ctx_id, {})
                for (name, _), g in zip(named, got[len(wanted):]):
                    if g is not None:
                        key = (graph.module_id, name)
                        store[key] = g if key not in store else store[key] + g
                leaf_grads = iter(got[:len(wanted)])
                return [_wire(next(leaf_grads)) if t.requires_grad else None for t in graph.leaves]
            finally:
                if not retain_graph:
                    self.graphs.pop(call_id, None)

    async def do_release(self, call_ids: list[int]) -> None:
        for call_id in call_ids:
            self.graphs.pop(call_id, None)

    async def do_state_dict(self, module_id: int) -> Any:
        return pack(dict(self._module(module_id).state_dict()))

    async def do_load_state_dict(self, module_id: int, state: dict, strict: bool) -> Any:
        result = self._module(module_id).load_state_dict(unpack(state), strict=strict)
        return (list(result.missing_keys), list(result.unexpected_keys))

    async def do_grads(self, module_id: int, ctx_id: int | None) -> dict:
        module = self._module(module_id)
        if ctx_id is None:
            return {n: _wire(p.grad) for n, p in module.named_parameters()}
        store = self.contexts.get(ctx_id, {})
        return {n: _wire(store.get((module_id, n))) for n, _ in module.named_parameters()}

    async def do_set_grads(self, module_id: int, grads: dict) -> None:
        """The data-parallel all-reduce's write-back (Note [Data parallel gradients] in parallel.py)."""
        for name, p in self._module(module_id).named_parameters():
            if name in grads:
                p.grad = to_tensor(grads[name])

    async def do_call_method(self, module_id: int, name: str, args: tuple, kwargs: dict) -> Any:
        module = self._module(module_id)
        with no_grad():
            result = getattr(module, name)(*unpack(args), **unpack(kwargs))
            if inspect.isawaitable(result):
                result = await result
        return None if result is module else pack(result)

    # ------------------------------------------------------------------ optimizers and contexts
    async def do_make_optimizer(self, opt_id: int, optim_cls: type, module_ids: list[int], kwargs: dict) -> None:
        params = [p for m in module_ids for p in self._module(m).parameters()]
        self.optimizers[opt_id] = optim_cls(params, **unpack(kwargs))

    async def do_zero_grad(self, opt_id: int, set_to_none: bool) -> None:
        self.optimizers[opt_id].zero_grad(set_to_none)

    async def do_step(self, opt_id: int, module_ids: list[int], ctx_id: int | None) -> None:
        optimizer = self.optimizers[opt_id]
        if ctx_id is None:
            result = optimizer.step()
            if inspect.isawaitable(result):
                await result
            return
        # torch's DistributedOptimizer.step(context_id): the step uses the context's gradients.
        store = self.contexts.get(ctx_id, {})
        swapped = []
        for m in module_ids:
            for name, p in self._module(m).named_parameters():
                swapped.append((p, p.grad))
                p.grad = store.get((m, name))
        try:
            result = optimizer.step()
            if inspect.isawaitable(result):
                await result
        finally:
            for p, old in swapped:
                p.grad = old

    async def do_release_context(self, ctx_id: int) -> None:
        self.contexts.pop(ctx_id, None)

    async def do_ping(self) -> int:
        return self.index
