"""The cluster, remote modules, and the node that carries a backward across workers.

Note [Backward across workers]: a remote forward returns local tensors; when grad mode is on
and the worker's outputs require grad, they get one ``RemoteCallBackward`` node as grad_fn,
whose next edges are the gradient edges of the tensors sent (in the order they were packed,
Note [The wire]). Its ``apply`` is a coroutine (placement OWN_TASK), so the engine runs it as a
task of its own and keeps serving other nodes meanwhile: several micro-batches' backwards,
and the stages of one pipeline, overlap. It sends the output gradients to the worker, which
runs that stage's backward with its own engine (Note [Forward graphs on the worker]) and
answers the input gradients, which the engine routes on. ``retain_graph`` is the calling
graph task's; without it the node is released like any node with saved tensors, and so is
the worker's graph. A node collected without a backward releases the worker's graph too.
``create_graph=True`` cannot cross workers (the gradients would have to be differentiable
across the boundary): the node refuses it with a clear error.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import weakref
from typing import Any, Literal

from asyncgrad.distributed import autograd as dist_autograd
from asyncgrad.distributed._backends import LocalBackend, RayBackend, WorkerError
from asyncgrad.distributed._wire import WireTensor, host_array, pack, to_tensor, unpack
from asyncgrad.dtypes import numpy_dtype
from asyncgrad.engine.graph_task import current_graph_task
from asyncgrad.graph.grad_mode import grad_enabled
from asyncgrad.graph.node import RELEASED, SECOND_BACKWARD, Node, Placement
from asyncgrad.nn.module import IncompatibleKeys
from asyncgrad.tensor import Tensor
from asyncgrad.variable.accumulate import gradient_edge

CREATE_GRAPH_ACROSS_WORKERS = (
    "create_graph=True cannot cross workers: the backward of a remote call runs on its worker and sends back "
    "plain gradients, which are not differentiable here. Compute higher-order gradients inside one stage "
    "(on its worker), or run the model locally."
)


class RemoteCallBackward(Node):
    """The local node of one remote forward call (Note [Backward across workers])."""

    __slots__ = ("module", "call_id", "ctx_id", "input_devices", "_freed")
    placement = Placement.OWN_TASK
    call_on_undefined = True
    saves_variables = True

    def name(self) -> str:
        return "RemoteCallBackward"

    async def apply(self, grads: list, create_graph: bool) -> list:
        if create_graph:
            raise RuntimeError(CREATE_GRAPH_ACROSS_WORKERS)
        if self.saved is RELEASED:
            raise RuntimeError(SECOND_BACKWARD)
        graph_task = current_graph_task.get()
        retain = graph_task is not None and graph_task.keep_graph
        sent = []
        for g, (_, _, device) in zip(grads, self._input_meta):
            if g is None:
                sent.append(None)
            else:
                t = Tensor._make(g, device, False, None, 0, [0])
                sent.append(WireTensor(host_array(t), False, str(device)))
        if not retain:
            self._freed[0] = True  # the worker frees its graph with this backward
        answer = await self.module._call("backward", self.call_id, sent, retain, self.ctx_id)
        return [None if w is None else to_tensor(w).data for w in answer]


def _release(cluster_ref: weakref.ref, worker: int, epoch: int, call_id: int, freed: list) -> None:
    """A RemoteCallBackward was collected: free its graph on the worker unless a backward did."""
    cluster = cluster_ref()
    if freed[0] or cluster is None or cluster._closed or cluster._epochs[worker] != epoch:
        return
    cluster._backend.post(worker, "release", ([call_id],))


class RemoteModule:
    """A handle on an ``ag.nn.Module`` built on a worker by ``await cluster.remote(i, cls, ...)``.

    ``await m(*args)`` runs its forward there; tensors go by value (Note [The wire]) and the
    results are local tensors, differentiable back to the worker (Note [Backward across workers]).
    """

    def __init__(self, cluster: Cluster, worker: int, module_id: int, type_name: str) -> None:
        self.cluster = cluster
        self.worker = worker
        self.module_id = module_id
        self.type_name = type_name
        self._epoch = cluster._epochs[worker]

    def __repr__(self) -> str:
        return f"RemoteModule({self.type_name} on worker {self.worker})"

    async def _call(self, method: str, *args: Any) -> Any:
        if self.cluster._epochs[self.worker] != self._epoch:
            raise WorkerError(
                f"{self!r} was built on worker {self.worker} before it was restarted; build it again with "
                f"`await cluster.remote({self.worker}, ...)` (and load its state_dict)", self.worker)
        return await self.cluster._call(self.worker, method, args)

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return await self.forward(*args, **kwargs)

    async def forward(self, *args: Any, **kwargs: Any) -> Any:
        """The module's forward on its worker; recorded for backward when grad mode is on."""
        record = grad_enabled.get()
        inputs: list[Tensor] = []

        def send(t: Tensor) -> WireTensor:
            inputs.append(t)
            return WireTensor(host_array(t.detach()), record and t.requires_grad, str(t.device))

        cluster = self.cluster
        call_id = next(cluster._call_ids)
        packed = pack(args, send), pack(kwargs, send)
        answer = await self._call("forward", self.module_id, call_id, packed[0], packed[1], record)
        outputs: list[tuple[Tensor, bool]] = []

        def receive(w: WireTensor) -> Tensor:
            t = to_tensor(w)
            outputs.append((t, w.requires_grad))
            return t

        result = unpack(answer, receive)
        if record and any(rg for _, rg in outputs):
            node = RemoteCallBackward(tuple(gradient_edge(t) for t in inputs))
            node.module = self
            node.call_id = call_id
            node.ctx_id = dist_autograd.current_context.get()
            if node.ctx_id is not None:
                dist_autograd.note_cluster(node.ctx_id, cluster)
            node._freed = [False]
            node._input_meta = tuple((t.shape, numpy_dtype(t.dtype), t.device) for t, _ in outputs)
            node.work = sum(t.numel() for t, _ in outputs)
            for nr, (t, rg) in enumerate(outputs):
                if rg:
                    t.grad_fn = node
                    t.output_nr = nr
                    t._requires_grad = True
            weakref.finalize(node, _release, weakref.ref(cluster), self.worker, self._epoch, call_id, node._freed)
        return result

    async def state_dict(self) -> dict[str, Tensor]:
        """Local copies of the worker's parameters, keyed as ``Module.state_dict``."""
        return unpack(await self._call("state_dict", self.module_id))

    async def load_state_dict(self, state_dict: dict[str, Any], strict: bool = True) -> Any:
        """Copy ``state_dict`` into the worker's parameters (in place, as ``Module.load_state_dict``)."""
        missing, unexpected = await self._call("load_state_dict", self.module_id, pack(dict(state_dict)), strict)
        return IncompatibleKeys(missing, unexpected)

    async def gradients(self, ctx_id: int | None = None) -> dict[str, Tensor | None]:
        """Copies of the parameters' ``.grad`` on the worker, or of context ``ctx_id``'s gradients."""
        return unpack(await self._call("grads", self.module_id, ctx_id))

    async def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Call any method of the worker's module under no_grad (``await m.call("eval")``); its
        result comes back by value (None when it returns the module itself)."""
        return unpack(await self._call("call_method", self.module_id, method, pack(args), pack(kwargs)))


class Cluster:
    """Workers running asyncgrad's engine, each on an event loop of its own (``dist.cluster``)."""

    def __init__(self, backend: Literal["local", "ray"] = "local", workers: int | None = 2,
                 address: str | None = None, *, namespace: str | None = None,
                 num_cpus_per_worker: float | None = None, num_gpus_per_worker: float | None = None,
                 resources_per_worker: dict[str, float] | None = None,
                 init_options: dict[str, Any] | None = None) -> None:
        if backend not in ("local", "ray"):
            raise ValueError(f"backend must be 'local' or 'ray', got {backend!r}")
        if workers is None:
            workers = os.cpu_count() or 1
        if not isinstance(workers, int) or workers < 1:
            raise ValueError(f"workers must be a positive int, got {workers!r}")
        if backend == "local" and (address is not None or namespace is not None or init_options):
            raise ValueError("address, namespace and init_options are options of backend='ray'")
        self.backend_name = backend
        self.num_workers = workers
        self._options = dict(address=address, namespace=namespace, init_options=dict(init_options or {}),
                             worker_options={k: v for k, v in (("num_cpus", num_cpus_per_worker),
                                                               ("num_gpus", num_gpus_per_worker),
                                                               ("resources", resources_per_worker))
                                             if v is not None})
        self._backend: Any = None
        self._closed = False
        self._call_ids = itertools.count()
        self._ids = itertools.count()
        self._epochs = [0] * workers
        self._remote_modules: list[weakref.ref[RemoteModule]] = []

    async def start(self) -> Cluster:
        """Start the workers (a local Ray cluster sized to the machine when ``address`` is None)."""
        if self._backend is None:
            if self.backend_name == "local":
                self._backend = LocalBackend(self.num_workers)
            else:
                # In this thread, not a helper thread: Ray ties the processes of the local cluster it
                # starts to the life of the *thread* that started them (PR_SET_PDEATHSIG), so a cluster
                # started from asyncio.to_thread died with the executor's thread (measured: the GCS
                # was SIGKILLed when the first asyncio.run ended). It blocks the loop while Ray starts.
                o = self._options
                self._backend = RayBackend(self.num_workers, o["address"], o["namespace"], o["worker_options"],
                                           o["init_options"])
            await asyncio.gather(*(self._call(i, "ping", ()) for i in range(self.num_workers)))
        return self

    async def close(self) -> None:
        if self._backend is not None and not self._closed:
            self._closed = True
            await self._backend.close()

    async def __aenter__(self) -> Cluster:
        return await self.start()

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def _check_worker(self, worker: int) -> None:
        if not isinstance(worker, int) or not 0 <= worker < self.num_workers:
            raise IndexError(f"worker index {worker!r} out of range for a cluster of {self.num_workers} workers")

    async def _call(self, worker: int, method: str, args: tuple) -> Any:
        if self._backend is None or self._closed:
            raise RuntimeError("the cluster is not running: use `async with dist.cluster(...) as cluster:`")
        ok, payload = await self._backend.call(worker, method, args)
        if ok:
            return payload
        kind, message, remote_tb = payload
        raise WorkerError(f"worker {worker} raised {kind} in {method}: {message}", worker, kind, remote_tb)

    def _modules(self) -> list[RemoteModule]:
        alive = [m for m in (r() for r in self._remote_modules) if m is not None]
        self._remote_modules = [weakref.ref(m) for m in alive]
        return alive

    def _release_context(self, ctx_id: int) -> None:
        if not self._closed and self._backend is not None:
            for worker in range(self.num_workers):
                self._backend.post(worker, "release_context", (ctx_id,))

    async def remote(self, worker: int, cls: type, *args: Any, **kwargs: Any) -> RemoteModule:
        """Build ``cls(*args, **kwargs)`` (an ``ag.nn.Module``) on ``worker``; tensors among the
        arguments go by value."""
        self._check_worker(worker)
        module_id = next(self._ids)
        type_name = await self._call(worker, "build", (module_id, cls, pack(args), pack(kwargs)))
        module = RemoteModule(self, worker, module_id, type_name)
        self._remote_modules.append(weakref.ref(module))
        return module

    async def ping(self, worker: int) -> None:
        """Round trip to ``worker`` (raises ``WorkerDied`` if it is gone)."""
        self._check_worker(worker)
        await self._call(worker, "ping", ())

    async def kill(self, worker: int) -> None:
        """Fault drill: end ``worker`` abruptly; calls to it, in flight or later, raise ``WorkerDied``."""
        self._check_worker(worker)
        await self._backend.kill(worker)

    async def restart(self, worker: int) -> None:
        """Replace ``worker`` (dead or not) by a fresh, empty one; modules built on the old one are
        gone: build them again and load their state_dict."""
        self._check_worker(worker)
        await self._backend.restart(worker)
        self._epochs[worker] += 1


def cluster(backend: Literal["local", "ray"] = "local", workers: int | None = 2, address: str | None = None,
            **options: Any) -> Cluster:
    """``async with dist.cluster(backend="local", workers=2) as cluster:``; ``backend="ray"`` runs each
    worker as a Ray async actor (``address=None`` starts a local Ray cluster; "host:port" joins one).
    Ray options: ``namespace``, ``num_cpus_per_worker``, ``num_gpus_per_worker``,
    ``resources_per_worker``, ``init_options`` (more ``ray.init`` keywords)."""
    return Cluster(backend, workers, address, **options)
