"""Engine, graph and custom-Function behaviours checked against torch 2.13 beyond what the port of
torch's own tests (tests/torch_parity/) asserts: awaited nested backwards beside torch's reentrant
priority, hooks on undefined gradients, the create_graph copy of a constant gradient, dirty views
refused, pickle keeping the device, inference tensors, multi-grad hooks."""

from __future__ import annotations

import asyncio
import pickle

import pytest

import asyncgrad as ag
from asyncgrad.autograd import Function


# --------------------------------------------------------------------------- reentrant priority
def _reentrant_classes(order: list):
    """torch's test_reentrant_priority Functions (its port: test_TestAutograd_gradcheck_versions_checkpoint.py),
    Reentrant's backward awaiting its nested backward."""
    class MyFunction(Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, x):
            order.append("MyFunction")
            return x

    class Reentrant(Function):
        @staticmethod
        def forward(ctx, x):
            with ag.enable_grad():
                ctx.x = x.detach().requires_grad_(True) - 1
            return ctx.x.detach()

        @staticmethod
        async def backward(ctx, x):
            order.append("Reentrant")
            if ctx.x < 0:
                return x
            with ag.enable_grad():
                await Reentrant.apply(ctx.x).backward()
            return x

    return MyFunction, Reentrant


async def test_two_awaited_reentrant_backwards_of_one_graph_both_finish_before_the_rest():
    order: list = []
    MyFunction, Reentrant = _reentrant_classes(order)
    a = MyFunction.apply(ag.tensor(6.0, requires_grad=True))
    b = Reentrant.apply(ag.tensor(2.0, requires_grad=True))
    c = Reentrant.apply(ag.tensor(3.0, requires_grad=True))
    await (a * b * c).backward()
    assert order[-1] == "MyFunction" and order.count("Reentrant") == 3 + 4


async def test_an_async_backward_that_awaits_no_backward_holds_nothing():
    """Only a nested backward holds the parent: an ``async def`` backward awaiting other work lets
    the graph's other ready nodes run meanwhile, as before."""
    order: list = []
    release = asyncio.Event()

    class Slow(Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        async def backward(ctx, g):
            await asyncio.wait_for(release.wait(), 5)
            order.append("Slow")
            return g

    class Fast(Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            order.append("Fast")
            release.set()
            return g

    x = ag.tensor(2.0, requires_grad=True)
    await (Fast.apply(x) * Slow.apply(x)).backward()
    assert order == ["Fast", "Slow"]
    assert x.grad.item() == 4.0


async def test_a_failing_nested_backward_fails_its_parent_and_releases_nothing_late():
    order: list = []

    class Boom(Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            raise ValueError("boom")

    class Outer(Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        async def backward(ctx, g):
            with ag.enable_grad():
                y = ag.tensor(1.0, requires_grad=True)
                await Boom.apply(y).backward()
            return g

    class Other(Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            order.append("Other")
            return g

    x = ag.tensor(2.0, requires_grad=True)
    with pytest.raises(ValueError, match="boom"):
        await (Other.apply(x) * Outer.apply(x)).backward()
    assert order == [] and x.grad is None


# --------------------------------------------------------------------------- pickle
def test_pickle_keeps_the_device():
    s = ag.arange(4.0, device="sim:0")
    back = pickle.loads(pickle.dumps(s, protocol=0))
    assert str(back.device) == "sim:0" and back.tolist() == [0.0, 1.0, 2.0, 3.0]


# --------------------------------------------------------------------------- hooks on undefined gradients
async def test_tensor_hooks_see_none_for_an_undefined_gradient_as_torch(torch):
    """Note [Hooks on undefined gradients]: an unused unbind output's hooks are called with None;
    a retained grad stays None; a leaf a custom backward gave None gets its hooks and its
    post-accumulate hooks called all the same."""
    def run(lib, Fn):
        seen = []
        x = lib.randn(3, requires_grad=True)
        a, b, c = x.unbind()
        a.register_hook(lambda g: seen.append(("a", g is None)))
        a.register_hook(lambda g: seen.append(("a2", g is None)))
        b.retain_grad()
        c.register_hook(lambda g: seen.append(("c", g is None)))
        yield c
        yield seen + [("b.grad", b.grad is None)]

        class F(Fn):
            @staticmethod
            def forward(ctx, p, q):
                return p + q

            @staticmethod
            def backward(ctx, g):
                return g, None

        seen.clear()
        p = lib.randn(3, requires_grad=True)
        q = lib.randn(3, requires_grad=True)
        q.register_hook(lambda g: seen.append(("q", g is None)))
        q.register_post_accumulate_grad_hook(lambda t: seen.append(("q post", t.grad is None)))
        yield F.apply(p, q).sum()
        yield sorted(seen)

    theirs = run(torch, torch.autograd.Function)
    next(theirs).backward()
    mine = run(ag, Function)
    await next(mine).backward()
    assert next(mine) == next(theirs) == [("a", True), ("a2", True), ("c", False), ("b.grad", True)]
    next(theirs).backward()
    await next(mine).backward()
    assert next(mine) == next(theirs) == [("q", True), ("q post", True)]


@pytest.mark.parametrize("value", [ag.ones(()), 5])
async def test_a_hook_may_not_replace_an_undefined_gradient(value, torch):
    x = ag.randn(3, requires_grad=True)
    a, _, c = x.unbind()
    a.register_hook(lambda g: value)
    tx = torch.randn(3, requires_grad=True)
    ta, _, tc = tx.unbind()
    ta.register_hook(lambda g: torch.ones(()) if isinstance(value, ag.Tensor) else value)
    with pytest.raises(RuntimeError) as theirs:
        tc.backward()
    with pytest.raises(RuntimeError) as mine:
        await c.backward()
    assert str(theirs.value) == str(mine.value).split("\n")[0] == "can't replace a None gradient with a non-None value"


# --------------------------------------------------------------------------- create_graph leaf .grad
async def test_create_graph_grad_of_a_constant_gradient_is_a_plain_copy():
    x = ag.ones(3, requires_grad=True)
    seed = ag.full((3,), 2.0)
    await x.backward(seed, create_graph=True)
    assert x.grad.grad_fn is None and not x.grad.requires_grad
    seed.add_(1.0)
    assert x.grad.tolist() == [2.0, 2.0, 2.0]  # a copy: the caller's tensor is not aliased


# --------------------------------------------------------------------------- dirty views
def test_a_dirty_view_that_is_not_the_first_input_is_refused():
    class Second(Function):
        @staticmethod
        def forward(ctx, b, a):
            a.add_(b)
            ctx.mark_dirty(a)
            return a

        @staticmethod
        def backward(ctx, g):
            return g, g

    base = ag.ones(2, requires_grad=True) * 1
    with pytest.raises(NotImplementedError, match="first Tensor argument"):
        Second.apply(ag.ones(2, requires_grad=True), base.view_as(base))


def test_mark_dirty_of_a_non_tensor_is_refused():
    class Bad(Function):
        @staticmethod
        def forward(ctx, a):
            ctx.mark_dirty(3)
            return a * 1

        @staticmethod
        def backward(ctx, g):
            return g

    # torch 2.13's words stop after "argument " (its formatting drops the rest); the position and type follow here
    with pytest.raises(RuntimeError, match="^mark_dirty can only accept variables, but argument 0 is of type int"):
        Bad.apply(ag.ones(2, requires_grad=True))


# --------------------------------------------------------------------------- inference tensors
def _inference_facts(lib) -> dict:
    base = lib.ones(3)
    with lib.inference_mode():
        x = lib.ones(3)
        made = {"factory": x, "op": x * 2, "view": x[:2], "constructor": lib.tensor([1.0, 2.0]),
                "view of normal": base[:2], "detach of normal": base.detach()}
        with lib.inference_mode(False):
            made["inside inference_mode(False)"] = lib.ones(2)
        x.add_(1)  # in place on an inference tensor, inside: allowed
        base.add_(1)  # and on a normal one
    facts = {name: t.is_inference() for name, t in made.items()}
    facts["normal"] = base.is_inference()

    @lib.inference_mode()
    def decorated():
        return lib.ones(1)

    facts["decorated"] = decorated().is_inference()
    facts["version of normal"] = base._version
    w = lib.ones(3, requires_grad=True)
    facts["added to a leaf (nothing saved)"] = (x + w).requires_grad
    for name, attempt in (("in place outside", lambda: x.add_(1)), ("setitem outside", lambda: x.__setitem__(0, 5.0)),
                          ("saved for backward", lambda: x * w), ("version", lambda: x._version)):
        try:
            attempt()
            facts[name] = None
        except RuntimeError as exc:
            facts[name] = str(exc)
    facts["value kept"] = x.tolist()
    return facts


def test_inference_tensors_as_torch(torch):
    """Note [Inference tensors]: what is one, and torch's refusals, word for word."""
    mine, theirs = _inference_facts(ag), _inference_facts(torch)
    # torch refuses only once its kernel has written (its check sits on the version bump): there the
    # value reads [5.0, 3.0, 3.0]; asyncgrad refuses before writing anything
    assert theirs.pop("value kept") == [5.0, 3.0, 3.0]
    assert mine.pop("value kept") == [2.0, 2.0, 2.0]
    assert mine == theirs
    assert mine["factory"] and mine["op"] and mine["view"] and mine["constructor"] and mine["decorated"]
    assert not (mine["view of normal"] or mine["detach of normal"] or mine["normal"]
                or mine["inside inference_mode(False)"])
    assert mine["in place outside"].startswith("Inplace update to inference tensor outside InferenceMode")
    assert mine["saved for backward"].startswith("Inference tensors cannot be saved for backward.")


async def test_a_clone_of_an_inference_tensor_is_normal_and_differentiable():
    with ag.inference_mode():
        x = ag.tensor([1.0, 2.0, 3.0], dtype=ag.float64)
    y = x.clone().requires_grad_(True)
    assert not y.is_inference()
    await (y * y).sum().backward()
    assert y.grad.tolist() == [2.0, 4.0, 6.0]


async def test_inference_mode_in_a_task_leaves_other_tasks_normal():
    """The block's flag is global but the mode is per context: a task outside it makes normal tensors."""
    inside = asyncio.Event()
    release = asyncio.Event()

    async def infer():
        with ag.inference_mode():
            inside.set()
            await release.wait()
            return ag.ones(1)

    task = asyncio.create_task(infer())
    await inside.wait()
    outside = ag.ones(1) * 2
    release.set()
    assert (await task).is_inference() and not outside.is_inference()


# --------------------------------------------------------------------------- multi-grad hooks
def _multi_grad_order(lib, Fn):
    order: list = []

    class Log(Fn):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            order.append("log")
            return g

    class Late(Fn):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            order.append("late")
            return g

    a, b, c = (lib.ones(2, requires_grad=True) for _ in range(3))
    y, z, u = a * 2, b * 3, c * 4
    lib.autograd.graph.register_multi_grad_hook((y, z, u),
                                                lambda gs: order.append(("all", [g is not None for g in gs])))
    out = (Log.apply(y) + z).sum()
    yield out  # backward
    order.append("end")
    y2, z2 = Late.apply(a * 5), b * 6
    lib.autograd.graph.register_multi_grad_hook((y2, z2),
                                                lambda gs: order.append(("grad", [g is not None for g in gs])))
    yield (y2 * z2).sum(), (b,)  # grad() with inputs: y2's branch need not run
    yield order


async def test_multi_grad_hook_all_fires_inside_the_backward_as_torch(torch):
    """Note [Multi-grad hooks]: called as soon as the last expected gradient arrives, before the
    backward's other nodes, None for a tensor out of the graph (or whose node grad() skips)."""
    theirs = _multi_grad_order(torch, torch.autograd.Function)
    next(theirs).backward()
    out, inputs = next(theirs)
    torch.autograd.grad(out, inputs)
    mine = _multi_grad_order(ag, Function)
    await next(mine).backward()
    out, inputs = next(mine)
    await ag.grad(out, inputs)
    assert next(mine) == next(theirs) == ["log", ("all", [True, True, False]), "end", ("grad", [False, True])]


async def test_multi_grad_hook_all_fires_once_per_graph_task():
    seen = []
    x = ag.ones(2, requires_grad=True)
    y, z = x * 2, x * 3
    ag.autograd.graph.register_multi_grad_hook((y, z), lambda gs: seen.append(len(gs)))
    await asyncio.gather((y + z).sum().backward(retain_graph=True), (y * z).sum().backward(retain_graph=True))
    await y.sum().backward(retain_graph=True)
    assert seen == [2, 2, 2]
