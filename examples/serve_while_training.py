"""An HTTP server that keeps answering while a model trains in the same process.

``python examples/serve_while_training.py --engine asyncgrad`` trains the demo's CNN (scikit-learn's
8x8 digits) with ``await loss.backward()`` on the server's own event loop, while a load generator in
another process sends ``GET /status`` at a fixed rate; it prints the requests' latency percentiles
beside the training speed, and how late a 1 ms heartbeat on the server's loop woke (the loop's own
lag, which the load generator's figures include along with the machine's scheduling).
``--engine torch`` trains the same model with torch, its blocking ``backward()`` in a worker thread
(``asyncio.to_thread``), the usual way to keep a loop free with torch; ``--engine none`` serves
with nothing training (the floor). ``--engine all`` runs the three (torch's row is skipped, with
the reason printed, where torch is not installed).

Importable: ``await table_rows(...)`` runs the same measurement on the caller's running loop (a
notebook's, notebooks/07_serving_while_training.ipynb) and returns the table's rows.

Needs aiohttp and scikit-learn (``pip install '.[examples]'``), and torch for ``--engine torch``.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import multiprocessing as mp
import os
import socket
import statistics
import sys
import time
from typing import Any, Callable, Sequence

# One BLAS thread, before numpy loads its BLAS: torch trains here with torch.set_num_threads(1), and
# the loop is the process's other user of the CPU. OpenBLAS's own threads, woken for every product of
# this small model, spin on cores the loop and the load generator need.
for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import numpy as np  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _load(port: int, rate: float, seconds: float, warmup: float, results: Any) -> None:
    """The load generator (its own process, so its delays are not the server's): an open-loop schedule
    of ``rate`` requests per second; latency counts from the scheduled send time, so a stalled server
    is charged for the requests that queued behind the stall too."""
    import aiohttp

    async def run() -> list[float]:
        latencies: list[float] = []
        async with aiohttp.ClientSession() as session:
            url = f"http://127.0.0.1:{port}/status"
            for _ in range(200):  # wait for the server
                try:
                    async with session.get(url) as r:
                        await r.read()
                    break
                except aiohttp.ClientError:
                    await asyncio.sleep(0.05)
            await asyncio.sleep(warmup)
            start, pending = time.perf_counter(), []

            async def one(due: float) -> None:
                async with session.get(url) as r:
                    await r.read()
                latencies.append(time.perf_counter() - due)

            n = int(rate * seconds)
            for k in range(n):
                due = start + k / rate
                delay = due - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                pending.append(asyncio.ensure_future(one(due)))
            await asyncio.gather(*pending)
        return latencies

    results.put(asyncio.run(run()))


def _digits() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    d = load_digits()
    return (d.images / 16.0).astype(np.float32)[:, None, :, :], d.target.astype(np.int64)


def _asyncgrad_trainer(state: dict, stop: asyncio.Event, batch: int) -> Any:
    import asyncgrad as ag
    from asyncgrad import nn, optim
    from asyncgrad.__main__ import build_model

    images, labels = _digits()
    ag.manual_seed(0)
    model, loss_fn = build_model(), nn.CrossEntropyLoss()
    opt = optim.Adam(model.parameters(), lr=0.01)
    rng = np.random.default_rng(0)

    async def forward(x: Any) -> Any:
        """The model a layer at a time, handing the loop back between layers once the engine's time
        budget for this loop is spent: the budget the backward's slices share (Note [One budget per
        loop] in asyncgrad/engine/budget.py), so a forward and a backward together hold the loop
        no longer than one slice (``ag.give_way``). Asking costs a clock reading per layer."""
        for layer in model:
            x = layer(x)
            await ag.give_way()
        return x

    async def train() -> None:
        while not stop.is_set():
            rows = rng.integers(0, len(labels), batch)
            opt.zero_grad()
            loss = loss_fn(await forward(ag.tensor(images[rows])), ag.tensor(labels[rows]))
            await loss.backward()  # the engine yields to the loop between slices of work
            opt.step()  # Adam over ~6k parameters: a fraction of a millisecond
            state["steps"] += 1
            state["loss"] = loss.item()
            await asyncio.sleep(0)  # requests that came in during the step

    return train()


def _torch_trainer(state: dict, stop: asyncio.Event, batch: int) -> Any:
    import torch
    from torch import nn

    torch.manual_seed(0)
    torch.set_num_threads(1)
    images, labels = _digits()
    images, labels = torch.from_numpy(images), torch.from_numpy(labels)
    model = nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 2 * 2, 10),
    )
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)

    def step() -> float:
        rows = torch.randint(0, len(labels), (batch,))
        opt.zero_grad()
        loss = loss_fn(model(images[rows]), labels[rows])
        loss.backward()
        opt.step()
        return loss.item()

    async def train() -> None:
        while not stop.is_set():
            state["loss"] = await asyncio.to_thread(step)
            state["steps"] += 1

    return train()


ENGINES = ("none", "asyncgrad", "torch")


def missing(engine: str) -> str | None:
    """Why ``engine`` cannot run here, or None when it can."""
    if engine == "torch" and importlib.util.find_spec("torch") is None:
        return "torch is not installed (pip install torch)"
    return None


async def serve(engine: str, rate: float, seconds: float, batch: int, warmup: float = 1.0) -> dict:
    """One row: serve ``seconds`` of load at ``rate`` requests per second (after ``warmup`` seconds
    of training unmeasured) on the running loop, with ``engine`` training beside it."""
    from aiohttp import web

    state: dict = {"steps": 0, "loss": float("nan")}

    async def status(request: web.Request) -> web.Response:
        return web.json_response({"steps": state["steps"], "loss": state["loss"]})

    app = web.Application()
    app.router.add_get("/status", status)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    port = _free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()

    results: Any = mp.get_context("spawn").Queue()
    client = mp.get_context("spawn").Process(target=_load, args=(port, rate, seconds, warmup, results))
    client.start()
    stop = asyncio.Event()
    trainer, t_start = None, time.perf_counter()
    if engine == "asyncgrad":
        trainer = asyncio.ensure_future(_asyncgrad_trainer(state, stop, batch))
    elif engine == "torch":
        trainer = asyncio.ensure_future(_torch_trainer(state, stop, batch))
    lags: list[float] = []

    async def heartbeat() -> None:
        """How much later than asked a 1 ms sleep on this loop wakes."""
        while not stop.is_set():
            before = time.perf_counter()
            await asyncio.sleep(0.001)
            lags.append(time.perf_counter() - before - 0.001)

    beat = asyncio.ensure_future(heartbeat())
    loop = asyncio.get_running_loop()
    latencies = await loop.run_in_executor(None, results.get)  # the client's whole run, warm-up included
    steps_at_end, t_end = state["steps"], time.perf_counter()
    stop.set()
    await beat
    if trainer is not None:
        await trainer
    await loop.run_in_executor(None, client.join)
    await runner.cleanup()
    ms = sorted(x * 1e3 for x in latencies)
    lag = sorted(x * 1e3 for x in lags)
    return {
        "engine": engine,
        "requests": len(ms),
        "p50_ms": statistics.median(ms),
        "p99_ms": ms[min(len(ms) - 1, int(0.99 * len(ms)))],
        "max_ms": ms[-1],
        "lag_p99_ms": lag[min(len(lag) - 1, int(0.99 * len(lag)))],
        "lag_max_ms": lag[-1],
        "steps": steps_at_end,
        "steps_per_s": steps_at_end / (t_end - t_start),
        "loss": state["loss"],
    }


HEADER = (f"{'engine':<10} {'requests':>8} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'train steps/s':>14} "
          f"{'lag p99 ms':>11} {'lag max ms':>11}")


def format_row(row: dict) -> str:
    return (f"{row['engine']:<10} {row['requests']:>8} {row['p50_ms']:>8.2f} {row['p99_ms']:>8.2f} "
            f"{row['max_ms']:>8.2f} {row['steps_per_s']:>14.1f} {row['lag_p99_ms']:>11.2f} "
            f"{row['lag_max_ms']:>11.2f}")


async def table_rows(engines: Sequence[str] = ENGINES, rate: float = 200.0, seconds: float = 10.0, batch: int = 64,
                     warmup: float = 1.0, echo: Callable[[str], Any] | None = print, header: bool = True) -> list[dict]:
    """The table's rows, one per engine, measured one after another on the running loop; ``echo``
    (when given) gets the header (unless ``header`` is false) and each row as it is measured, and
    the reason for an engine skipped because it cannot run here (``missing``)."""
    rows = []
    if echo is not None and header:
        echo(HEADER)
    for engine in engines:
        why = missing(engine)
        if why is not None:
            if echo is not None:
                echo(f"{engine:<10} skipped: {why}")
            continue
        row = await serve(engine, rate, seconds, batch, warmup)
        rows.append(row)
        if echo is not None:
            echo(format_row(row))
    return rows


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engine", choices=(*ENGINES, "all"), default="asyncgrad")
    parser.add_argument("--rate", type=float, default=200.0, help="requests per second (default 200)")
    parser.add_argument("--seconds", type=float, default=10.0, help="measured seconds of load (default 10)")
    parser.add_argument("--batch", type=int, default=64, help="training batch size (default 64)")
    parser.add_argument("--loop-budget-ms", type=float, default=None,
                        help="asyncgrad's time budget on the loop (ag.set_loop_budget; default 2 ms)")
    args = parser.parse_args(argv)
    if args.loop_budget_ms is not None:
        import asyncgrad as ag

        ag.set_loop_budget(args.loop_budget_ms / 1e3)
    engines = ENGINES if args.engine == "all" else (args.engine,)

    def echo(line: str) -> None:
        print(line)
        sys.stdout.flush()

    echo(HEADER)
    rows = []
    for engine in engines:  # each on a fresh loop, as a program would start it
        rows += asyncio.run(table_rows((engine,), args.rate, args.seconds, args.batch, echo=echo, header=False))
    return rows


if __name__ == "__main__":
    main()
