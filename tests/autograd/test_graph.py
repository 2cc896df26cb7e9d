"""The recorded graph: nodes, edges, sequence and topological numbers, saved tensors, grad mode."""

import asyncio

import numpy as np
import pytest

import asyncgrad as ag
from asyncgrad.variable.accumulate import grad_accumulator


def seed_example():
    x = ag.ones(2, 2, requires_grad=True)
    y = x + 2
    z = y * y * 3
    out = z.mean()
    return x, y, z, out


def test_seed_example_records_the_documented_graph():
    x, y, z, out = seed_example()
    mean = out.grad_fn
    assert mean.name() == "MeanBackward0"
    ((mul3, nr),) = mean.next_functions
    assert mul3.name() == "MulBackward0" and nr == 0
    (mul_yy, _), (none, _) = mul3.next_functions
    assert mul_yy.name() == "MulBackward0" and none is None
    (add_a, _), (add_b, _) = mul_yy.next_functions
    assert add_a is add_b and add_a.name() == "AddBackward0"
    (acc, _), (nothing, _) = add_a.next_functions
    assert acc.name() == "AccumulateGrad" and acc.variable is x and nothing is None
    assert add_a.sequence_nr < mul_yy.sequence_nr < mul3.sequence_nr < mean.sequence_nr
    assert [n.topological_nr for n in (acc, add_a, mul_yy, mul3, mean)] == [0, 1, 2, 3, 4]
    assert type(mean.next_edges[0]) is tuple and mean.next_edges[0] == (mul3, 0)  # Note [Edges are plain pairs]


def test_edges_are_kept_as_two_parallel_tuples():
    """Note [A node's edges are two parallel tuples]: functions and input numbers apart, the numbers
    of inputs that are first outputs shared by every node; ``next_edges`` and the constructor speak pairs."""
    x = ag.randn(3, requires_grad=True)
    a, b = (x * 2.0).tanh(), (x + 1.0).exp()
    assert a.grad_fn.edge_fns == (a.grad_fn.edge_fns[0],) and a.grad_fn.edge_nrs == (0,)
    assert a.grad_fn.edge_nrs is b.grad_fn.edge_nrs, "one shared (0,), not a tuple per node"
    s = a * b
    assert s.grad_fn.edge_nrs is (x * x).grad_fn.edge_nrs == (0, 0)
    first, second = ag.split(x * 1.0, [1, 2])
    z = second * first  # the second output of a node: its input number is 1
    assert z.grad_fn.edge_nrs == (1, 0) and z.grad_fn.edge_fns == (second.grad_fn, first.grad_fn)
    assert z.grad_fn.next_edges == ((second.grad_fn, 1), (first.grad_fn, 0)) == z.grad_fn.next_functions
    node = ag.autograd.graph.Node(((a.grad_fn, 0), (None, 0)))
    assert node.edge_fns == (a.grad_fn, None) and node.edge_nrs == (0, 0) and node.num_outputs == 2
    assert node.topological_nr == a.grad_fn.topological_nr + 1


def test_next_edges_and_input_metadata():
    x = ag.randn(3, requires_grad=True)
    w = ag.randn(3)
    y = x * w
    assert y.grad_fn.next_edges[1] == (None, 0)
    assert y.grad_fn.num_inputs == 1
    assert y.output_nr == 0 and not y.is_leaf and x.is_leaf


def test_accumulate_grad_is_shared_while_the_leaf_lives():
    x = ag.randn(3, requires_grad=True)
    a, b = x * 2, x.exp()
    assert a.grad_fn.next_functions[0][0] is b.grad_fn.next_functions[0][0]
    assert grad_accumulator(x) is a.grad_fn.next_functions[0][0]


def test_metadata_and_node_hook_handles():
    x = ag.randn(3, requires_grad=True)
    y = x.exp()
    y.grad_fn.metadata["tag"] = 1
    assert y.grad_fn.metadata == {"tag": 1}
    handle = y.grad_fn.register_hook(lambda gi, go: None)
    pre = y.grad_fn.register_prehook(lambda go: None)
    assert len(y.grad_fn._hooks.post) == 1 and len(y.grad_fn._hooks.pre) == 1
    handle.remove()
    pre.remove()
    assert not y.grad_fn._hooks.post and not y.grad_fn._hooks.pre


async def test_saved_tensor_modified_in_place_raises_torchs_error():
    x = ag.randn(3, requires_grad=True)
    a = x * 1
    b = a * a
    a.add_(1)
    with pytest.raises(RuntimeError, match=r"modified by an inplace operation: \[asyncgrad.FloatTensor \[3\]\], "
                                           r"which is output 0 of Add, is at version 1; expected version 0"):
        await b.sum().backward()


async def test_released_saved_tensors_raise_second_backward_error():
    x, _, _, out = seed_example()
    await out.backward()
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        await out.backward()


async def test_release_variables_by_hand():
    x = ag.randn(3, requires_grad=True)
    y = x.tanh()
    y.grad_fn.release_variables()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        await y.sum().backward()


async def test_retain_graph_allows_a_second_backward_and_accumulates():
    x, _, _, out = seed_example()
    await out.backward(retain_graph=True)
    await out.backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full((2, 2), 9.0))


def test_integer_tensors_cannot_require_grad():
    with pytest.raises(RuntimeError, match="Only Tensors of floating point and complex dtype can require gradients"):
        ag.tensor([1, 2, 3], requires_grad=True)
    t = ag.arange(3)
    with pytest.raises(RuntimeError, match="floating point"):
        t.requires_grad_()


def test_in_place_on_leaf_that_requires_grad():
    x = ag.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place operation"):
        x.add_(1)
    with ag.no_grad():
        x.add_(1)
    assert x._version == 1


def test_detach_shares_memory_and_version_counter():
    x = ag.randn(3, requires_grad=True)
    d = x.detach()
    assert not d.requires_grad and d.grad_fn is None
    d.add_(1)
    assert x._version == 1
    np.testing.assert_array_equal(x.detach().numpy(), d.numpy())


def test_requires_grad_of_non_leaf_cannot_be_turned_off():
    y = ag.randn(2, requires_grad=True) * 2
    with pytest.raises(RuntimeError, match="you can only change requires_grad flags of leaf variables"):
        y.requires_grad_(False)


def test_no_grad_records_nothing():
    x = ag.randn(3, requires_grad=True)
    with ag.no_grad():
        y = x * 2
        with ag.enable_grad():
            z = x * 2
    assert y.grad_fn is None and not y.requires_grad
    assert z.grad_fn is not None


def test_grad_mode_decorators_on_def_and_async_def():
    @ag.no_grad()
    def f(t):
        return t * 2

    @ag.no_grad()
    async def g(t):
        return t * 2

    x = ag.randn(2, requires_grad=True)
    assert f(x).grad_fn is None
    assert asyncio.run(g(x)).grad_fn is None
    assert ag.is_grad_enabled()


def test_set_grad_enabled_as_function_and_context():
    ag.set_grad_enabled(False)
    assert not ag.is_grad_enabled()
    ag.set_grad_enabled(True)
    with ag.set_grad_enabled(False):
        assert not ag.is_grad_enabled()
    assert ag.is_grad_enabled()


async def test_grad_mode_is_per_task():
    seen = {}
    started = asyncio.Event()

    async def without():
        with ag.no_grad():
            started.set()
            await asyncio.sleep(0.01)
            seen["without"] = ag.is_grad_enabled()

    async def with_grad():
        await started.wait()
        seen["with"] = ag.is_grad_enabled()
        x = ag.randn(2, requires_grad=True)
        seen["recorded"] = (x * 2).grad_fn is not None

    await asyncio.gather(without(), with_grad())
    assert seen == {"without": False, "with": True, "recorded": True}


def test_repr_like_torch():
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    assert repr(x) == "tensor([1., 2.], requires_grad=True)"  # torch's text
    assert "grad_fn=<MulBackward0>" in repr(x * 2)
    assert "device='sim:0'" in repr(x.detach().to("sim:0"))


def test_devices_are_interned_and_checked():
    assert ag.device("sim:0") is ag.device("sim:0")
    assert str(ag.device("cpu")) == "cpu"
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device, but found at least two "
                                           "devices, sim:0 and cpu!"):
        ag.ones(2, device="sim:0") + ag.ones(2)
    with pytest.raises(RuntimeError, match="Expected one of cpu, sim, cuda"):
        ag.device("tpu:0")


def test_deep_graph_is_freed_without_recursion_error():
    x = ag.randn(2, requires_grad=True)
    y = x
    for _ in range(100_000):
        y = y * 1.0
    del y
