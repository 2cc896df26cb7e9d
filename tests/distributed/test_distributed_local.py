"""Model-parallel training across workers on the local backend (issue 13): each worker a thread
with its own event loop behind the same serialization boundary as Ray (Note [The wire])."""

from __future__ import annotations

import asyncio
import gc
import time

import numpy as np
import pytest
from distributed_cases import (
    F,
    Faulty,
    Sleepy,
    SlowBackward,
    Stage0,
    Stage1,
    check_kill,
    check_microbatches_accumulate,
    check_training_matches_local,
    close,
    data,
    two_stages,
)
from helpers import has_torch

import asyncgrad as ag
from asyncgrad import distributed as dist


@pytest.fixture
async def cluster():
    async with dist.cluster(backend="local", workers=2) as c:
        yield c


def graphs_on(cluster: dist.Cluster, worker: int) -> dict:
    return cluster._backend.workers[worker].state.graphs


async def test_two_stage_training_equals_local_training(cluster):
    await check_training_matches_local(cluster)


async def test_four_microbatches_in_flight_accumulate_as_one_after_another(cluster):
    await check_microbatches_accumulate(cluster, 4)


async def test_kill_fails_the_next_step_fast_and_the_rest_keeps_working(cluster):
    await check_kill(cluster)


async def test_gradients_match_torch(cluster):
    if not has_torch():
        pytest.skip("needs torch: compares with PyTorch")
    import torch

    (s0, s1), (l0, _) = await two_stages(cluster)
    x, y = data(3)
    x.requires_grad_(True)
    loss = F.cross_entropy(await s1(await s0(x)), y)
    await loss.backward()
    t0, t1 = torch.nn.Linear(6, 16, dtype=torch.float32), torch.nn.Linear(16, 4, dtype=torch.float32)
    with torch.no_grad():
        for t, remote in ((t0, s0), (t1, s1)):
            state = await remote.state_dict()
            t.weight.copy_(torch.tensor(np.asarray(state["lin.weight"])))
            t.bias.copy_(torch.tensor(np.asarray(state["lin.bias"])))
    tx = torch.tensor(np.asarray(x.detach()), requires_grad=True)
    torch.nn.functional.cross_entropy(t1(torch.tanh(t0(tx))), torch.tensor(np.asarray(y))).backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)
    for t, remote in ((t0, s0), (t1, s1)):
        grads = await remote.gradients()
        np.testing.assert_allclose(grads["lin.weight"].numpy(), t.weight.grad.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(grads["lin.bias"].numpy(), t.bias.grad.numpy(), rtol=1e-5, atol=1e-6)


async def test_gradients_match_finite_differences_in_float64(cluster):
    """The input gradient that crosses two workers against central differences of the remote forward."""
    s0 = await cluster.remote(0, Stage0, dtype=ag.float64)
    s1 = await cluster.remote(1, Stage1, dtype=ag.float64)
    x = ag.tensor(np.random.default_rng(0).standard_normal((2, 6)), requires_grad=True)

    async def f(v):
        return (await s1(await s0(v))).pow(2).sum()

    await (await f(x)).backward()
    eps, base = 1e-6, x.detach().numpy()
    fd = np.zeros_like(base)
    with ag.no_grad():
        for idx in np.ndindex(base.shape):
            plus, minus = base.copy(), base.copy()
            plus[idx] += eps
            minus[idx] -= eps
            fd[idx] = ((await f(ag.tensor(plus))).item() - (await f(ag.tensor(minus))).item()) / (2 * eps)
    np.testing.assert_allclose(x.grad.numpy(), fd, rtol=1e-6, atol=1e-8)


async def test_the_graph_records_one_node_per_remote_call(cluster):
    s0, s1 = await cluster.remote(0, Stage0), await cluster.remote(1, Stage1)
    x = ag.ones(2, 6, requires_grad=True)
    out = await s1(await s0(x))
    assert out.requires_grad and out.grad_fn.name() == "RemoteCallBackward"
    (inner, nr), = out.grad_fn.next_functions
    assert inner.name() == "RemoteCallBackward" and nr == 0
    assert inner.next_functions[0][0].name() == "AccumulateGrad"
    with ag.no_grad():
        plain = await s1(await s0(x))
    assert not plain.requires_grad and plain.grad_fn is None
    assert len(graphs_on(cluster, 0)) == 1 and len(graphs_on(cluster, 1)) == 1  # only the recorded call's


async def test_tensors_cross_by_value_never_shared(cluster):
    class Writes(ag.nn.Module):
        def forward(self, x):
            x.data[...] = 7.0  # writes into what it received
            return x

    m = await cluster.remote(0, Writes)
    x = ag.zeros(3)
    out = await m(x)
    assert x.tolist() == [0.0, 0.0, 0.0] and out.tolist() == [7.0, 7.0, 7.0]
    s0 = await cluster.remote(0, Stage0)
    state = await s0.state_dict()
    state["lin.bias"].data[...] = 100.0
    assert float((await s0.state_dict())["lin.bias"].sum()) != 1600.0


async def test_an_unpicklable_argument_fails_as_under_ray(cluster):
    s0 = await cluster.remote(0, Stage0)
    with pytest.raises(Exception, match="pickle"):
        await s0(ag.ones(2, 6), scale=lambda v: v)


async def test_retain_graph_runs_the_workers_backward_again_and_without_it_refuses(cluster):
    (s0, s1), _ = await two_stages(cluster)
    x, y = data(1)
    loss = F.cross_entropy(await s1(await s0(x)), y)
    await loss.backward(retain_graph=True)
    once = (await s0.gradients())["lin.weight"]
    await loss.backward()
    close((await s0.gradients())["lin.weight"], once * 2)
    assert graphs_on(cluster, 0) == {} and graphs_on(cluster, 1) == {}
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        await loss.backward()


async def test_create_graph_across_workers_is_refused_clearly(cluster):
    s0 = await cluster.remote(0, Stage0)
    x = ag.ones(2, 6, requires_grad=True)
    with pytest.raises(RuntimeError, match="create_graph=True cannot cross workers"):
        await ag.grad((await s0(x)).sum(), x, create_graph=True)


async def test_a_dropped_output_frees_the_workers_graph(cluster):
    s0 = await cluster.remote(0, Stage0)
    out = await s0(ag.ones(2, 6))
    assert len(graphs_on(cluster, 0)) == 1
    del out
    gc.collect()
    for _ in range(100):
        if not graphs_on(cluster, 0):
            break
        await asyncio.sleep(0.01)
    assert graphs_on(cluster, 0) == {}


async def test_a_worker_that_raises_in_forward_or_backward_names_itself_and_stays_usable(cluster):
    m = await cluster.remote(1, Faulty)
    with pytest.raises(dist.WorkerError, match="worker 1 raised ValueError in forward: forward of stage failed") as e:
        await m(-ag.ones(3))
    assert e.value.worker == 1 and "Traceback" in e.value.remote_traceback
    out = await m(ag.ones(3))
    with pytest.raises(dist.WorkerError, match="worker 1 raised ValueError in backward: backward of stage failed"):
        await out.sum().backward()
    assert graphs_on(cluster, 1) == {}
    s1 = await cluster.remote(1, Stage1)
    assert (await s1(ag.ones(2, 16))).shape == (2, 4)


async def test_kill_mid_forward_fails_the_call_in_flight(cluster):
    m = await cluster.remote(1, Sleepy, 60.0)
    call = asyncio.ensure_future(m(ag.ones(3)))
    await asyncio.sleep(0.05)
    started = time.monotonic()
    await cluster.kill(1)
    with pytest.raises(dist.WorkerDied, match="worker 1 died"):
        await asyncio.wait_for(call, 30)
    assert time.monotonic() - started < 5


async def test_kill_mid_backward_fails_the_backward_and_the_engine_stays_usable(cluster):
    m = await cluster.remote(1, SlowBackward)
    w = ag.ones(3, requires_grad=True)
    loss = (await m(w * 2)).sum()
    backward = asyncio.ensure_future(loss.backward())
    await asyncio.sleep(0.1)
    started = time.monotonic()
    await cluster.kill(1)
    with pytest.raises(dist.WorkerDied, match="worker 1 died"):
        await asyncio.wait_for(backward, 30)
    assert time.monotonic() - started < 5
    assert w.grad is None  # nothing of the failed backward reached the local leaf
    await (w * 3).sum().backward()
    assert w.grad.tolist() == [3.0, 3.0, 3.0]
    await cluster.ping(0)


async def test_distributed_autograd_contexts_keep_concurrent_trainers_apart(cluster):
    (s0, s1), (l0, l1) = await two_stages(cluster)
    opt = dist.DistributedOptimizer(ag.optim.SGD, [s0, s1], lr=0.5)
    batches = [data(20), data(21)]

    async def trainer(x, y):
        with dist.autograd.context() as ctx_id:
            await F.cross_entropy(await s1(await s0(x)), y).backward()
            return ctx_id, await dist.autograd.get_gradients(ctx_id)

    results = await asyncio.gather(*(trainer(x, y) for x, y in batches))
    assert (await s0.gradients())["lin.weight"] is None  # contexts keep .grad untouched
    for (_, grads), (x, y) in zip(results, batches):
        l0.zero_grad()
        l1.zero_grad()
        await F.cross_entropy(l1(l0(x)), y).backward()
        assert set(grads) == {s0, s1}
        for remote, local in ((s0, l0), (s1, l1)):
            for name, p in local.named_parameters():
                close(grads[remote][name], p.grad)
    with pytest.raises(RuntimeError, match="Could not find autograd context with id"):
        await dist.autograd.get_gradients(results[0][0])
    before = (await s0.state_dict())["lin.weight"]
    with dist.autograd.context() as ctx_id:
        x, y = batches[0]
        await F.cross_entropy(await s1(await s0(x)), y).backward()
        await opt.step(ctx_id)
        expected = before - 0.5 * (await dist.autograd.get_gradients(ctx_id))[s0]["lin.weight"]
    close((await s0.state_dict())["lin.weight"], expected)
    await asyncio.sleep(0.05)
    assert all(not cluster._backend.workers[i].state.contexts for i in range(2))  # freed on exit


async def test_bad_arguments(cluster):
    with pytest.raises(IndexError, match="worker index 2 out of range for a cluster of 2 workers"):
        await cluster.remote(2, Stage0)
    with pytest.raises(dist.WorkerError, match="builds an ag.nn.Module"):
        await cluster.remote(0, dict)
    with pytest.raises(ValueError, match="backend must be 'local' or 'ray'"):
        dist.cluster(backend="mpi")
    with pytest.raises(ValueError, match="options of backend='ray'"):
        dist.cluster(address="localhost:6379")
    with pytest.raises(TypeError, match="RemoteModules"):
        dist.DistributedOptimizer(ag.optim.SGD, [Stage0()], lr=0.1)
    closed = dist.cluster()
    with pytest.raises(RuntimeError, match="the cluster is not running"):
        await closed.ping(0)


async def test_data_parallel_training_equals_local_training(cluster):
    """Two replicas, the batch split between them, gradients summed (Note [Data parallel gradients])."""
    dp = await dist.DataParallel.create(cluster, [0, 1], Stage0)
    local = Stage0()
    local.load_state_dict(await dp.state_dict())
    head = Stage1()  # a local head on top: the graph mixes local and remote nodes
    opt = dist.DistributedOptimizer(ag.optim.SGD, dp.replicas, lr=0.2)
    local_opt = ag.optim.SGD(local.parameters(), lr=0.2)
    for step in range(3):
        x, y = data(30 + step, n=7)  # 7 rows: shards of 4 and 3
        await opt.zero_grad()
        head.zero_grad()
        await F.cross_entropy(head(await dp(x)), y).backward()
        await dp.sync_gradients()
        await opt.step()
        head_grads = [p.grad for p in head.parameters()]
        local_opt.zero_grad()
        head.zero_grad()
        await F.cross_entropy(head(local(x)), y).backward()
        local_opt.step()
        for g, p in zip(head_grads, head.parameters()):
            close(g, p.grad)
    for replica in dp.replicas:
        state = await replica.state_dict()
        for name, value in local.state_dict().items():
            close(state[name], value)


class _SeesContext(ag.nn.Module):
    """Reports the context variables its worker sees: none of the caller's may cross."""

    def forward(self, x):
        from asyncgrad.distributed.autograd import current_context
        from asyncgrad.engine.graph_task import current_graph_task

        return ag.tensor([float(current_context.get() is None), float(current_graph_task.get() is None)])


async def test_the_callers_context_variables_stay_on_its_side(cluster):
    """Note [Worker contexts]: as in a Ray actor's process, a local worker sees none of the caller's
    context variables (its backward once ran as a reentrant child of the caller's graph task)."""
    m = await cluster.remote(0, _SeesContext)
    with dist.autograd.context():
        assert (await m(ag.ones(1))).tolist() == [1.0, 1.0]
