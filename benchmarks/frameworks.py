"""One adapter per framework, so that every workload is written once.

A workload describes its computation as a `Graph`: the arrays, a `build`
function written against a small op namespace (`tanh, relu, sum, affine,
cross_entropy`, plus the operators `* + @` that every framework overloads),
and a hand-written numpy forward/backward.
An adapter turns the arrays into its leaves, records `build`, and runs the
backward. Adapters import their framework lazily: a missing peer is reported
as `NotImportable` and skipped.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np

NumpyBackward = Callable[[], list[np.ndarray]]


@dataclass
class Graph:
    """One workload instance, identical for every framework."""

    params: list[np.ndarray]  # leaves that require grad; their gradients are compared
    data: list[np.ndarray]  # constants (inputs, integer targets)
    build: Callable[..., Any]  # build(ops, *params, *data) -> scalar loss
    numpy: Callable[..., tuple[float, NumpyBackward]]  # numpy(*params, *data) -> (loss, backward)


@dataclass
class Recording:
    """A recorded forward pass: what a backward needs and where its gradients land."""

    loss: Any
    leaves: Any
    state: Any = None
    grads: list[np.ndarray] = field(default_factory=list)


class NotImportable(Exception):
    """The framework is not installed (or does not import) here."""


def _ops(**kw: Callable) -> SimpleNamespace:
    """The op namespace `Graph.build` sees; `affine` defaults to `x @ w + b`."""
    kw.setdefault("affine", lambda x, w, b: x @ w + b)
    return SimpleNamespace(**kw)


class Framework:
    """Adapter interface; `backward` may return an awaitable (asyncgrad)."""

    name = ""
    module = ""  # the import that decides whether this peer is available
    ops: SimpleNamespace
    notes = ""

    def leaves(self, graph: Graph) -> Any:
        raise NotImplementedError

    def forward(self, graph: Graph, leaves: Any) -> Recording:
        raise NotImplementedError

    def backward(self, rec: Recording) -> Awaitable[Any] | None:
        raise NotImplementedError

    def grads(self, rec: Recording) -> list[np.ndarray]:
        return rec.grads

    def value(self, rec: Recording) -> float:
        return float(rec.loss)

    @property
    def version(self) -> str:
        version = getattr(importlib.import_module(self.module), "__version__", None)
        if version is None:
            try:
                version = importlib.metadata.version(self.module)
            except importlib.metadata.PackageNotFoundError:
                version = "?"
        return str(version)


class Numpy(Framework):
    """The floor: the workload's own hand-written backward, no graph at all."""

    name = "numpy"
    module = "numpy"
    ops = _ops()

    def leaves(self, graph: Graph) -> list[np.ndarray]:
        return list(graph.params)

    def forward(self, graph: Graph, leaves: list[np.ndarray]) -> Recording:
        loss, backward = graph.numpy(*leaves, *graph.data)
        return Recording(loss, leaves, backward)

    def backward(self, rec: Recording) -> None:
        rec.grads = rec.state()


class Torch(Framework):
    name = "torch"
    module = "torch"

    def __init__(self) -> None:
        import torch
        import torch.nn.functional as F

        torch.set_num_threads(1)
        torch.set_default_dtype(torch.float64)
        self.torch = torch
        self.ops = _ops(tanh=torch.tanh, relu=torch.relu, sum=torch.sum, cross_entropy=F.cross_entropy)

    def leaves(self, graph: Graph) -> list[Any]:
        return [self.torch.tensor(a, requires_grad=True) for a in graph.params]

    def forward(self, graph: Graph, leaves: list[Any]) -> Recording:
        data = [self.torch.from_numpy(a) for a in graph.data]
        return Recording(graph.build(self.ops, *leaves, *data), leaves)

    def backward(self, rec: Recording) -> None:
        rec.loss.backward()

    def grads(self, rec: Recording) -> list[np.ndarray]:
        return [leaf.grad.numpy() for leaf in rec.leaves]

    def value(self, rec: Recording) -> float:
        return rec.loss.item()


class Hips(Framework):
    """HIPS autograd is functional: the forward is `make_vjp`, the backward is the vjp."""

    name = "autograd"
    module = "autograd"

    def __init__(self) -> None:
        import autograd.numpy as anp
        from autograd.core import make_vjp

        def cross_entropy(logits: Any, target: np.ndarray) -> Any:
            m = anp.max(logits, axis=1, keepdims=True)
            lse = m[:, 0] + anp.log(anp.sum(anp.exp(logits - m), axis=1))
            return anp.mean(lse - logits[np.arange(len(target)), target])

        self.make_vjp = make_vjp
        self.ops = _ops(tanh=anp.tanh, relu=lambda x: anp.maximum(x, 0.0), sum=anp.sum, cross_entropy=cross_entropy)

    def leaves(self, graph: Graph) -> tuple[np.ndarray, ...]:
        return tuple(graph.params)

    def forward(self, graph: Graph, leaves: tuple[np.ndarray, ...]) -> Recording:
        vjp, loss = self.make_vjp(lambda ps: graph.build(self.ops, *ps, *graph.data), leaves)
        return Recording(loss, leaves, vjp)

    def backward(self, rec: Recording) -> None:
        rec.grads = list(rec.state(np.ones_like(rec.loss)))


class MyGrad(Framework):
    name = "mygrad"
    module = "mygrad"

    def __init__(self) -> None:
        import mygrad as mg
        from mygrad.nnet.activations import relu
        from mygrad.nnet.losses import softmax_crossentropy

        self.mg = mg
        self.ops = _ops(tanh=mg.tanh, relu=relu, sum=mg.sum, cross_entropy=softmax_crossentropy)

    def leaves(self, graph: Graph) -> list[Any]:
        return [self.mg.tensor(a) for a in graph.params]

    def forward(self, graph: Graph, leaves: list[Any]) -> Recording:
        return Recording(graph.build(self.ops, *leaves, *graph.data), leaves)

    def backward(self, rec: Recording) -> None:
        rec.loss.backward()

    def grads(self, rec: Recording) -> list[np.ndarray]:
        return [leaf.grad for leaf in rec.leaves]

    def value(self, rec: Recording) -> float:
        return rec.loss.item()


class Chainer(Framework):
    name = "chainer"
    module = "chainer"

    def __init__(self) -> None:
        import chainer
        import chainer.functions as F

        self.chainer = chainer

        def affine(x: Any, w: Any, b: Any) -> Any:  # chainer's `+` does not broadcast
            y = F.matmul(x, w)
            return y + F.broadcast_to(b, y.shape)

        self.ops = _ops(tanh=F.tanh, relu=F.relu, sum=F.sum, cross_entropy=F.softmax_cross_entropy, affine=affine)

    def leaves(self, graph: Graph) -> list[Any]:
        return [self.chainer.Variable(a.copy()) for a in graph.params]

    def forward(self, graph: Graph, leaves: list[Any]) -> Recording:
        data = [self.chainer.Variable(a, requires_grad=False) if a.dtype.kind == "f" else a for a in graph.data]
        return Recording(graph.build(self.ops, *leaves, *data), leaves)

    def backward(self, rec: Recording) -> None:
        rec.loss.backward()

    def grads(self, rec: Recording) -> list[np.ndarray]:
        return [leaf.grad for leaf in rec.leaves]

    def value(self, rec: Recording) -> float:
        return float(rec.loss.array)


class Asyncgrad(Framework):
    """The engine under test; its backward is a coroutine, awaited by the caller."""

    name = "asyncgrad"
    module = "asyncgrad"

    def __init__(self) -> None:
        import asyncgrad as ag

        self.ag = ag
        workers = len(os.sched_getaffinity(0))
        ag.set_num_workers("cpu", workers)
        self.notes = f"set_num_workers('cpu', {workers})"
        self.ops = _ops(tanh=ag.tanh, relu=lambda t: t.relu(), sum=lambda t: t.sum(),
                        cross_entropy=ag.nn.functional.cross_entropy)

    def leaves(self, graph: Graph) -> list[Any]:
        return [self.ag.tensor(a, requires_grad=True) for a in graph.params]

    def forward(self, graph: Graph, leaves: list[Any]) -> Recording:
        # sharing memory, as torch's adapter does with from_numpy: W3's copy of x (401 KB) was timed work
        # torch never did, and after each step's heap trim it faulted 98 pages (Note [Heap trimming and
        # page faults] in asyncgrad/devices/allocator.py)
        data = [self.ag.from_numpy(a) for a in graph.data]
        return Recording(graph.build(self.ops, *leaves, *data), leaves)

    def backward(self, rec: Recording) -> Awaitable[Any]:
        return rec.loss.backward()

    def grads(self, rec: Recording) -> list[np.ndarray]:
        return [leaf.grad.numpy() for leaf in rec.leaves]

    def value(self, rec: Recording) -> float:
        return rec.loss.item()


ADAPTERS: dict[str, type[Framework]] = {cls.name: cls for cls in (Asyncgrad, Torch, Hips, MyGrad, Chainer, Numpy)}


def load(name: str) -> Framework:
    """Instantiate an adapter; a failing import, or a framework too incomplete
    to set up, becomes `NotImportable` (asyncgrad while its core is being written)."""
    adapter = ADAPTERS[name]
    try:
        importlib.import_module(adapter.module)
    except Exception as exc:  # broken installs fail in many ways (chainer on numpy 2: AttributeError)
        raise NotImportable(f"not importable: {type(exc).__name__}: {exc}") from exc
    try:
        return adapter()
    except Exception as exc:
        raise NotImportable(f"unusable: {type(exc).__name__}: {exc}") from exc
