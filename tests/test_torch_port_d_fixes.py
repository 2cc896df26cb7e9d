"""What porting items 181-239 of torch's autograd tests fixed, checked against torch 2.13.

* a view a custom Function returns refuses in-place changes that would record, in torch's words
  (Note [Views a Function returns] in autograd/function.py);
* ``del t.data`` / ``t.requires_grad`` / ``t._grad_fn`` / ``t._backward_hooks`` raise torch's errors;
* once_differentiable's node is torch's ``Error``, with torch's edges.

The torch comparisons skip cleanly without torch, as in tests/helpers.py.
"""

import pytest

import asyncgrad as ag

try:
    import torch
except ImportError:  # the comparisons with torch are left out
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="compares with torch, which is not installed")


def _custom_view_cases(lib):
    """The message each in-place change raises (or None), for views custom Functions return."""
    class Alias(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x[:]

        @staticmethod
        def backward(ctx, gx):
            return gx

    class SelectOne(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a.clone(), a.select(0, 1)

        @staticmethod
        def backward(ctx, ga, gb):
            return ga, None

    def attempt(fn):
        try:
            fn()
        except RuntimeError as e:
            return str(e)
        return None

    inp = lib.rand(2, requires_grad=True)
    results = {}
    with lib.no_grad():
        out = Alias.apply(inp)
    results["made in no_grad"] = attempt(lambda: out.zero_())
    out = Alias.apply(inp.clone())
    results["recorded"] = attempt(lambda: out.add_(1))
    out = Alias.apply(lib.rand(2))
    results["nothing requires grad"] = attempt(lambda: out.add_(1))
    out = Alias.apply(lib.rand(2))
    results["the value requires grad"] = attempt(lambda: out.add_(inp))
    out = Alias.apply(inp.clone())
    view = out[:1]
    results["a view of the output"] = attempt(lambda: view.add_(1))
    _, second = SelectOne.apply(inp.clone(), 0)
    results["second output"] = attempt(lambda: second.mul_(2))
    return results


def test_a_view_a_custom_function_returns_refuses_a_recorded_inplace_change():
    results = _custom_view_cases(ag)
    assert results["nothing requires grad"] is None
    assert results["recorded"].startswith("Output 0 of Alias is a view and is being modified inplace. This view was "
                                          "created inside a custom Function")
    assert results["second output"].startswith("Output 1 of SelectOne is a view and is being modified inplace.")
    assert results["made in no_grad"].startswith("A view was created in no_grad mode and is being modified inplace")
    if torch is not None:
        assert results == _custom_view_cases(torch)


@needs_torch
def test_deleting_autograd_attributes_raises_torchs_errors():
    def outcomes(lib):
        x = lib.randn(5, 5, requires_grad=True)
        found = []
        for statement in ["del x.grad", "del x.data", "x.data = None", "del x.requires_grad", "del x._grad_fn",
                          "del x._backward_hooks", "x._grad_fn = 1"]:
            try:
                exec(statement)
                found.append((statement, None))
            except Exception as e:  # the type and the words are compared
                found.append((statement, type(e).__name__, str(e)))
        y = x * 2
        y._grad_fn = None  # detaches in place
        found.append(("detached", y.grad_fn is None, y.requires_grad))
        return found

    assert outcomes(ag) == outcomes(torch)


def test_backward_hooks_are_the_hooks_register_hook_added():
    x = ag.randn(3, requires_grad=True)
    assert x._backward_hooks is None
    x.register_hook(lambda g: g)
    y = x * 2
    assert y._backward_hooks is None
    def triple(g):
        return g * 3

    y.register_hook(triple)
    assert list(y._backward_hooks.values()) == [triple]
    assert len(x._backward_hooks) == 1


def _once_differentiable_graph(lib, grad):
    class MyFunction(lib.autograd.Function):
        @staticmethod
        def forward(ctx, t1, scalar, t2):
            return t1 * scalar + t2, t1 - t2

        @staticmethod
        @lib.autograd.function.once_differentiable
        def backward(ctx, ga, gb):
            return ga * 2 + gb, None, ga + gb

    x = lib.randn(3, dtype=lib.float64, requires_grad=True)
    y = lib.randn(3, dtype=lib.float64, requires_grad=True)
    a, b = MyFunction.apply(x, 2.0, y)
    go = lib.ones(3, dtype=lib.float64, requires_grad=True)
    gx, gy = grad((a, b), (x, y), (go, lib.ones(3, dtype=lib.float64)), create_graph=True)
    fn = gx.grad_fn
    shape = [None if f is None else f.name().rsplit("::", 1)[-1] for f, _ in fn.next_functions]
    try:
        gx.sum().backward()
        raised = None
    except RuntimeError as e:
        raised = str(e)
    return fn.name().rsplit("::", 1)[-1], shape, gx.output_nr, gy.grad_fn is fn, gy.output_nr, raised


def test_once_differentiable_results_come_from_torchs_error_node():
    found = _once_differentiable_graph(ag, ag.grad_sync)
    assert found == ("Error", ["AccumulateGrad", None, "AccumulateGrad"], 0, True, 2,
                     "trying to differentiate twice a function that was marked with @once_differentiable")
    if torch is not None:
        assert found == _once_differentiable_graph(torch, torch.autograd.grad)
