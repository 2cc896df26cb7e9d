"""The distributed claims again on the Ray backend (issue 13): each worker a Ray async actor,
arrays through Ray's object store. One local Ray cluster for the module keeps its start-up
cost (tens of seconds on two cores) to once; without ray, or where Ray cannot start, these skip."""

from __future__ import annotations

import asyncio
import time

import pytest

ray = pytest.importorskip("ray")

import distributed_cases  # noqa: E402
from distributed_cases import (  # noqa: E402
    Faulty,
    Sleepy,
    check_kill,
    check_microbatches_accumulate,
    check_training_matches_local,
)

import asyncgrad as ag  # noqa: E402
from asyncgrad import distributed as dist  # noqa: E402

# Ray workers import this repository's asyncgrad (the cluster puts it on their PYTHONPATH) but not
# the tests directory: the stages travel by value.
ray.cloudpickle.register_pickle_by_value(distributed_cases)


@pytest.fixture(scope="module")
def cluster():
    started = time.monotonic()
    c = dist.cluster(backend="ray", workers=2, namespace="asyncgrad-tests")
    try:
        asyncio.run(asyncio.wait_for(c.start(), 120))
    except Exception as exc:  # e.g. too little memory or too few cores for Ray's processes
        asyncio.run(c.close())
        pytest.skip(f"Ray could not start a local cluster here: {type(exc).__name__}: {exc}")
    c.startup_s = time.monotonic() - started
    yield c
    asyncio.run(c.close())


async def test_two_stage_training_equals_local_training(cluster):
    await check_training_matches_local(cluster)


async def test_four_microbatches_in_flight_accumulate_as_one_after_another(cluster):
    await check_microbatches_accumulate(cluster, 4)


async def test_a_worker_that_raises_names_itself(cluster):
    m = await cluster.remote(1, Faulty)
    with pytest.raises(dist.WorkerError, match="worker 1 raised ValueError in forward: forward of stage failed"):
        await m(-ag.ones(3))
    out = await m(ag.ones(3))
    with pytest.raises(dist.WorkerError, match="worker 1 raised ValueError in backward: backward of stage failed"):
        await out.sum().backward()


async def test_an_actor_killed_mid_forward_fails_the_call_in_flight(cluster):
    m = await cluster.remote(1, Sleepy, 60.0)
    call = asyncio.ensure_future(m(ag.ones(3)))
    await asyncio.sleep(0.2)
    await cluster.kill(1)
    with pytest.raises(dist.WorkerDied, match="worker 1 died"):
        await asyncio.wait_for(call, 30)
    await cluster.restart(1)


async def test_kill_fails_the_next_step_fast_and_the_rest_keeps_working(cluster):
    await check_kill(cluster)  # ends with worker 1 restarted


async def test_startup_and_call_overhead_are_reported(cluster, capsys):
    """Not a speed claim: the numbers the issue asks for, printed with -s."""
    started = time.perf_counter()
    for _ in range(20):
        await cluster.ping(0)
    per_call_ms = (time.perf_counter() - started) / 20 * 1e3
    with capsys.disabled():
        print(f"\nRay: start-up {cluster.startup_s:.1f} s, one remote call {per_call_ms:.2f} ms")
    assert per_call_ms > 0
