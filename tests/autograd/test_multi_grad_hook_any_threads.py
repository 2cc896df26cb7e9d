"""register_multi_grad_hook(mode="any") with backwards from several threads, as torch's
TestMultithreadAutograd.test_multi_grad_any_hooks: the hook runs once per backward, also in the
backward whose custom Function fails, since a leaf's AccumulateGrad runs before any other ready
node (Note [AccumulateGrad runs first] in asyncgrad/autograd/accumulate.py)."""

from __future__ import annotations

import threading

import asyncgrad as ag
from asyncgrad.autograd.accumulate import ACCUMULATE_SEQUENCE_NR


def _in_threads(fn, args, n=5):
    threads = [threading.Thread(target=fn, args=args) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def test_any_hook_counts_every_backward_even_a_failing_one():
    t1, t2, t3, t4 = (ag.rand(2, requires_grad=True) for _ in range(4))
    count, errors, calls = [0], [0], [0]
    lock = threading.Lock()

    def hook(grad):
        with lock:
            count[0] += 1

    ag.autograd.graph.register_multi_grad_hook((t1, t2, t3, t4), hook, mode="any")
    out = (t2 * t3).sum()
    _in_threads(lambda o: o.backward_sync(inputs=(t2, t3), retain_graph=True), (out,))
    assert count[0] == 5

    class Func(ag.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            with lock:
                calls[0] += 1
                if calls[0] == 1:
                    raise RuntimeError("error message")
            return g

    count[0] = 0
    out = (Func.apply(t2) * t3).sum()

    def backward(o):
        try:
            o.backward_sync(inputs=(t2, t3), retain_graph=True)
        except RuntimeError:
            with lock:
                errors[0] += 1

    _in_threads(backward, (out,))
    assert (count[0], errors[0]) == (5, 1)


def test_accumulate_grad_sequence_number_is_torchs(torch):
    x = ag.rand(2, requires_grad=True)
    node = x.clone().grad_fn.next_functions[0][0]
    expected = torch.rand(2, requires_grad=True).clone().grad_fn.next_functions[0][0]._sequence_nr()
    assert node.sequence_nr == ACCUMULATE_SEQUENCE_NR == expected


async def test_leaf_gradient_lands_before_a_failing_node():
    x, y = ag.rand(2, requires_grad=True), ag.rand(2, requires_grad=True)

    class Fails(ag.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 1

        @staticmethod
        def backward(ctx, g):
            raise RuntimeError("fails")

    out = (Fails.apply(x) * y).sum()
    try:
        await out.backward()
    except RuntimeError:
        pass
    assert y.grad is not None and x.grad is None
