"""Where workers live: threads of this process (``local``) or Ray actors (``ray``).

Design: docs/design/distributed.md.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import os
import pickle
import threading
from typing import Any

from asyncgrad.distributed._worker import WorkerState

# Note [Dying workers]: ``kill`` ends a worker abruptly. A local worker is marked dead (new calls
# are refused at once), its loop is stopped and what was running on it is cancelled, as a process
# that dies does not finish its work either; once its thread has wound down (bounded: 10 s), every
# call that was in flight is failed, so that the caller sees ``WorkerDied`` only once nothing of
# the worker runs any more. A Ray worker is
# ``ray.kill``ed and the calls in flight to it are failed at once here: Ray fails their object refs
# with ``RayActorError`` too (turned into ``WorkerDied``), but on a loaded machine that took longer
# than 30 s in one run, and a worker that crashes on its own is only known through it.
# A worker that raises is not dead: its exception comes back through ``dispatch``.
# ``restart`` starts a fresh, empty worker in the same slot: modules built on the old one are
# gone, and their handles say so.

# Note [Worker contexts]: a local worker runs each request in a fresh, empty ``contextvars``
# context, as a Ray actor does in its own process. ``call_soon_threadsafe`` would otherwise run it
# in a copy of the *caller's* context, and the caller's context variables would cross the
# boundary: the calling backward's graph task (the worker's backward then registered itself as
# a reentrant child of a graph task of another loop, whose abort waited on that other loop's
# task: a killed worker's caller sat until its next timer, 2 runs in 10, measured), the
# profiler's recorder, grad mode and the distributed autograd context.


class WorkerError(RuntimeError):
    """A worker raised while running a request; ``worker`` is its index."""

    def __init__(self, message: str, worker: int, remote_type: str = "", remote_traceback: str = "") -> None:
        super().__init__(message)
        self.worker = worker
        self.remote_type = remote_type
        self.remote_traceback = remote_traceback


class WorkerDied(WorkerError):
    """The worker is gone (killed, crashed, or its process ended)."""


def died(index: int, why: str) -> WorkerDied:
    return WorkerDied(f"worker {index} died: {why}; calls to it fail until `await cluster.restart({index})`", index)


# ---------------------------------------------------------------------------- local: threads
class _LocalWorker:
    """A thread running an event loop of its own, with one WorkerState on it."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.state = WorkerState(index)
        self.lock = threading.RLock()  # a finalizer (post) may run in this thread while it holds the lock
        self.pending: set[concurrent.futures.Future] = set()
        self.dead: str | None = None
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._main, name=f"asyncgrad distributed worker {index}", daemon=True)
        self.thread.start()

    def _main(self) -> None:
        loop = self.loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
        finally:
            # Stopped by kill() or close(): what was running is cancelled and wound down, briefly.
            tasks = asyncio.all_tasks(loop)
            for task in tasks:
                task.cancel()
            if tasks:
                loop.run_until_complete(asyncio.wait(tasks, timeout=5.0))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _serve(self, blob: bytes) -> bytes:
        try:
            method, args = pickle.loads(blob)
            result = await self.state.dispatch(method, args)
            return pickle.dumps(result, protocol=5)
        except Exception as exc:  # an unpicklable argument or result: reported like any worker error
            return pickle.dumps((False, (type(exc).__name__, str(exc), "")), protocol=5)

    def submit(self, coro_factory: Any) -> concurrent.futures.Future:
        """Run ``coro_factory()`` on the worker's loop; the future is this side's, so that ``stop``
        can fail it while the worker's task is still running (or never runs again)."""
        future: concurrent.futures.Future = concurrent.futures.Future()

        def settle(task: asyncio.Task) -> None:
            with self.lock:
                if self.dead is not None:  # left to end(), which fails it once the thread is gone
                    return
                self.pending.discard(future)
                if future.done():  # cancelled by the caller
                    return
                try:
                    if task.cancelled():
                        future.set_exception(died(self.index, "its loop cancelled the call"))
                    elif task.exception() is not None:
                        future.set_exception(task.exception())
                    else:
                        future.set_result(task.result())
                except concurrent.futures.InvalidStateError:  # the caller cancelled it meanwhile
                    pass

        def start() -> None:
            self.loop.create_task(coro_factory()).add_done_callback(settle)

        with self.lock:
            if self.dead is not None:
                raise died(self.index, self.dead)
            self.pending.add(future)
            # An empty context: the caller's context variables stay on this side (Note [Worker contexts]).
            self.loop.call_soon_threadsafe(start, context=contextvars.Context())
        return future

    def stop(self, why: str) -> None:
        """Mark the worker dead and stop its loop; ``end`` then fails the calls in flight."""
        with self.lock:
            if self.dead is not None:
                return
            self.dead = why
        self.loop.call_soon_threadsafe(self.loop.stop)

    async def end(self, why: str) -> None:
        """Stop the worker, wait (bounded) until its thread has wound down, and fail what was in
        flight: the caller sees ``WorkerDied`` only once nothing of the worker runs any more."""
        self.stop(why)
        await asyncio.to_thread(self.thread.join, 10.0)
        with self.lock:
            pending, self.pending = list(self.pending), set()
            for future in pending:
                try:
                    future.set_exception(died(self.index, self.dead or why))
                except concurrent.futures.InvalidStateError:  # the caller cancelled it
                    pass


class LocalBackend:
    """Workers as threads of this process, behind the same serialization boundary as Ray's."""

    name = "local"

    def __init__(self, workers: int) -> None:
        self.workers = [_LocalWorker(i) for i in range(workers)]

    async def call(self, index: int, method: str, args: tuple) -> tuple[bool, Any]:
        worker = self.workers[index]
        if method == "build":
            # The class goes by reference (Ray would cloudpickle it); its arguments are pickled.
            module_id, cls, cargs, ckwargs = args
            blob = pickle.dumps((module_id, cargs, ckwargs), protocol=5)

            def make() -> Any:
                async def build() -> bytes:
                    mid, a, k = pickle.loads(blob)
                    return pickle.dumps(await worker.state.dispatch("build", (mid, cls, a, k)), protocol=5)
                return build()
        else:
            blob = pickle.dumps((method, args), protocol=5)

            def make() -> Any:
                return worker._serve(blob)
        future = worker.submit(make)
        return pickle.loads(await asyncio.wrap_future(future))

    def post(self, index: int, method: str, args: tuple) -> None:
        """Fire and forget, from any thread (a collected node releasing its worker's graph)."""
        worker = self.workers[index]
        blob = pickle.dumps((method, args), protocol=5)
        try:
            worker.submit(lambda: worker._serve(blob))
        except (WorkerDied, RuntimeError):  # a dead or closed worker holds nothing to release
            pass

    async def kill(self, index: int) -> None:
        await self.workers[index].end("killed by cluster.kill()")

    async def restart(self, index: int) -> None:
        await self.workers[index].end("restarted by cluster.restart()")
        self.workers[index] = _LocalWorker(index)

    async def close(self) -> None:
        for worker in self.workers:
            worker.stop("the cluster was closed")
        for worker in self.workers:
            await worker.end("the cluster was closed")


# ---------------------------------------------------------------------------- ray: actors
def _fail(waiter: asyncio.Future, exc: BaseException) -> None:
    if not waiter.done():
        waiter.set_exception(exc)


class RayWorkerActor:
    """The body of a Ray async actor: one WorkerState on the actor's event loop."""

    def __init__(self, index: int) -> None:
        self.state = WorkerState(index)

    async def call(self, method: str, args: tuple) -> tuple[bool, Any]:
        return await self.state.dispatch(method, args)


class RayBackend:
    """Workers as Ray async actors; arrays travel through Ray's object store."""

    name = "ray"

    def __init__(self, workers: int, address: str | None, namespace: str | None, worker_options: dict,
                 init_options: dict) -> None:
        import ray  # the optional extra: pip install 'asyncgrad[ray]'

        self.ray = ray
        self.started_ray = False
        if not ray.is_initialized():
            options = dict(init_options)
            if namespace is not None:
                options.setdefault("namespace", namespace)
            if address is None:
                # Workers must import the asyncgrad this process runs, wherever it was imported from.
                root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
                env = dict(options.get("runtime_env") or {})
                env_vars = dict(env.get("env_vars") or {})
                path = env_vars.get("PYTHONPATH") or os.environ.get("PYTHONPATH")
                env_vars["PYTHONPATH"] = root if not path else root + os.pathsep + path
                env["env_vars"] = env_vars
                options["runtime_env"] = env
                options.setdefault("include_dashboard", False)
                options.setdefault("logging_level", "ERROR")
            ray.init(address=address, **options)
            self.started_ray = True
        self.actor_class = ray.remote(RayWorkerActor)
        self.worker_options = {"num_cpus": 0, "max_restarts": 0, **worker_options}
        self.actors = [self._start(i) for i in range(workers)]
        self.dead: dict[int, str] = {}
        self.inflight: list[set[asyncio.Future]] = [set() for _ in range(workers)]
        """Per worker, the callers' waiters: ``kill`` fails them at once (Note [Dying workers])."""

    def _start(self, index: int) -> Any:
        return self.actor_class.options(**self.worker_options).remote(index)

    async def call(self, index: int, method: str, args: tuple) -> tuple[bool, Any]:
        if index in self.dead:
            raise died(index, self.dead[index])
        ray = self.ray
        ref = self.actors[index].call.remote(method, args)
        waiter = asyncio.get_running_loop().create_future()
        self.inflight[index].add(waiter)

        async def transfer() -> None:
            try:
                result = await ref
            except ray.exceptions.RayActorError as exc:
                outcome: Any = died(index, self.dead.get(index) or f"its Ray actor ended ({type(exc).__name__})")
                outcome.__cause__ = exc
            except Exception as exc:  # Ray's own failure (object lost, ...): the caller's to see
                outcome = exc
            else:
                if not waiter.done():
                    waiter.set_result(result)
                return
            if not waiter.done():
                waiter.set_exception(outcome)

        helper = asyncio.ensure_future(transfer())
        try:
            return await waiter
        finally:
            self.inflight[index].discard(waiter)
            helper.cancel()

    def post(self, index: int, method: str, args: tuple) -> None:
        if index not in self.dead:
            self.actors[index].call.remote(method, args)

    async def kill(self, index: int) -> None:
        self.dead[index] = "killed by cluster.kill()"
        self.ray.kill(self.actors[index], no_restart=True)
        self._fail_inflight(index)

    def _fail_inflight(self, index: int) -> None:
        for waiter in list(self.inflight[index]):
            if not waiter.done():
                waiter.get_loop().call_soon_threadsafe(_fail, waiter, died(index, self.dead[index]))

    async def restart(self, index: int) -> None:
        if index not in self.dead:
            self.dead[index] = "restarted by cluster.restart()"
            self.ray.kill(self.actors[index], no_restart=True)
            self._fail_inflight(index)
        self.actors[index] = self._start(index)
        self.dead.pop(index, None)
        await self.actors[index].call.remote("ping", ())

    async def close(self) -> None:
        for index, actor in enumerate(self.actors):
            if index not in self.dead:
                self.ray.kill(actor, no_restart=True)
        self.dead = {i: "the cluster was closed" for i in range(len(self.actors))}
        if self.started_ray:
            self.ray.shutdown()
