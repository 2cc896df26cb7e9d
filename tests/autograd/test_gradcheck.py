"""gradcheck / gradgradcheck against torch's: the same verdicts, the same errors word for word
(``asyncgrad`` for ``torch`` in printed names), the same warnings (Note [gradcheck as torch])."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import asyncgrad as ag


@pytest.fixture(autouse=True)
def _float64():
    ag.set_default_dtype(ag.float64)  # as the torch fixture sets torch's; conftest restores it


async def _check(lib, which: str, fn, inputs, **kwargs):
    """lib.autograd.gradcheck (torch) or ag.gradcheck (awaited): the verdict, or the error."""
    checker = getattr(ag, which) if lib is ag else getattr(lib.autograd, which)
    result = checker(fn, inputs, **kwargs)
    return await result if lib is ag else result


async def _same_outcome(torch, which: str, make, **kwargs):
    """``make(lib) -> (fn, inputs)``; both libraries agree: the same result, or the same error and
    message, and the same warnings."""
    outcomes = []
    for lib in (torch, ag):
        fn, inputs = make(lib)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                outcome = ("returned", await _check(lib, which, fn, inputs, **kwargs))
            except Exception as exc:  # noqa: BLE001 - compared below, type and words
                outcome = ("raised", type(exc).__name__, str(exc).replace("torch.", "asyncgrad."))
        relevant = [(w.category.__name__, str(w.message)) for w in caught
                    if "gradient" in str(w.message) or "Backwards compatibility" in str(w.message)]
        outcomes.append((outcome, relevant))
    assert outcomes[1] == outcomes[0]
    return outcomes[0]


def _x(lib, requires_grad=True, values=(0.3, -1.2, 2.0)):
    return lib.tensor(list(values), dtype=lib.float64, requires_grad=requires_grad)


# --------------------------------------------------------------------------- passing functions
def _with_hook(lib):
    seen = []

    def fn(x):
        y = x * 2  # a hook needs a tensor that requires grad: grad mode is on while differencing
        y.register_hook(seen.append)  # returns None: the gradient is unchanged
        return y * x

    return fn, (_x(lib),)


PASSING = {
    "hook on an intermediate": _with_hook,
    "output is a slice of the input": lambda lib: ((lambda t: t[:]), (_x(lib),)),
    "output is the input": lambda lib: ((lambda t: t), (_x(lib),)),
    "output is a view of the input": lambda lib: ((lambda t: t.reshape(3, 1)), (_x(lib),)),
    "two outputs, one aliasing": lambda lib: ((lambda t, u: (t, t * u)), (_x(lib), _x(lib, values=(1.0, 2.0, 3.0)))),
    "single tensor input": lambda lib: ((lambda t: t ** 2), _x(lib)),
    "list of inputs": lambda lib: ((lambda t, u: t * u), [_x(lib), _x(lib, values=(1.0, 2.0, 3.0))]),
    "an input not requiring grad first": lambda lib: ((lambda c, t: c * t.sin()), (_x(lib, False), _x(lib))),
    "no differentiable output, zero numerically": lambda lib: ((lambda t: (t > 0).to(lib.float64)), (_x(lib),)),
    "list output": lambda lib: ((lambda t: [t.exp(), t * 3]), (_x(lib),)),
}


@pytest.mark.parametrize("name", list(PASSING))
async def test_gradcheck_passes_as_torch(torch, name):
    outcome, _ = await _same_outcome(torch, "gradcheck", PASSING[name])
    assert outcome == ("returned", True)


@pytest.mark.parametrize("name", ["hook on an intermediate", "output is a slice of the input", "single tensor input",
                                  "an input not requiring grad first", "two outputs, one aliasing"])
async def test_gradgradcheck_passes_as_torch(torch, name):
    outcome, _ = await _same_outcome(torch, "gradgradcheck", PASSING[name])
    assert outcome == ("returned", True)


# --------------------------------------------------------------------------- failing functions
def _function(lib, forward, backward, materialize=True):
    """A custom Function in either library."""

    class Custom(lib.autograd.Function if lib is not ag else ag.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(materialize)
            ctx.save_for_backward(x)
            return forward(x)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return backward(x, g)

    return Custom.apply


def _wrong(lib):
    return _function(lib, lambda x: x * x, lambda x, g: g * 3 * x), (_x(lib),)


_calls = [0]


def _nondeterministic(lib):
    def backward(x, g):
        _calls[0] += 1
        return g * (2 * x + 1e-8 * _calls[0])  # within atol of the truth, but never twice the same

    return _function(lib, lambda x: x * x, backward), (_x(lib),)


def _not_multiplied(lib):
    return _function(lib, lambda x: x * x, lambda x, g: g * 2 * x + (1 - g.abs().sum())), (_x(lib),)


def _no_undefined_support(lib):
    return _function(lib, lambda x: x * x, lambda x, g: g * 2 * x, materialize=False), (_x(lib),)


def _refuses_undefined(lib):
    def backward(x, g):
        if g is None:
            raise RuntimeError("this backward needs a gradient")
        return g * 2 * x

    return _function(lib, lambda x: x * x, backward, materialize=False), (_x(lib),)


def _nonzero_for_undefined(lib):
    return _function(lib, lambda x: x * x, lambda x, g: 2 * x if g is None else g * 2 * x, materialize=False), \
        (_x(lib),)


FAILING = {
    "undefined output gradient refused": (_refuses_undefined, {}),
    "undefined output gradient, nonzero input gradient": (_nonzero_for_undefined, {}),
    "wrong gradient": (_wrong, {}),
    "wrong gradient, second input": (lambda lib: ((lambda c, t: _wrong(lib)[0](t) * c),
                                                  (_x(lib, False), _x(lib))), {}),
    "detached output": (lambda lib: ((lambda t: t.detach() * 2), (_x(lib),)), {}),
    "not reentrant": (_nondeterministic, {}),
    "not multiplied by grad_output": (_not_multiplied, {}),
    "undefined output gradient": (_no_undefined_support, {}),
    "wrong gradient, no raise": (_wrong, {"raise_exception": False}),
    "detached, no raise": (lambda lib: ((lambda t: t.detach() * 2), (_x(lib),)), {"raise_exception": False}),
    "float32 input": (lambda lib: ((lambda t: t * 2), (lib.tensor([1.0, 2.0], dtype=lib.float32,
                                                                  requires_grad=True),)), {"atol": 1e-2}),
}


@pytest.mark.parametrize("name", list(FAILING))
async def test_gradcheck_fails_as_torch(torch, name):
    make, kwargs = FAILING[name]
    outcome, warned = await _same_outcome(torch, "gradcheck", make, **kwargs)
    assert outcome != ("returned", True) or warned


async def test_nondet_tol_allows_a_small_nondeterminism(torch):
    outcome, _ = await _same_outcome(torch, "gradcheck", _nondeterministic, nondet_tol=1e-6)
    assert outcome == ("returned", True)


async def test_check_undefined_grad_false_skips_the_check(torch):
    outcome, _ = await _same_outcome(torch, "gradcheck", _no_undefined_support, check_undefined_grad=False)
    assert outcome == ("returned", True)


async def test_gradgradcheck_catches_a_wrong_double_backward(torch):
    def make(lib):
        class Cube(lib.autograd.Function if lib is not ag else ag.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x ** 3

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return g * 3 * x.detach() ** 2  # right first derivative, no second

        return Cube.apply, (_x(lib),)

    outcome, _ = await _same_outcome(torch, "gradcheck", make)
    assert outcome == ("returned", True)
    for grad_outputs in (None, "given"):
        if grad_outputs is None:  # random on both sides: the verdicts agree, the numbers differ
            with pytest.raises(ag.GradcheckError, match="^Jacobian mismatch for output 0 with respect to input 0,"):
                await ag.gradgradcheck(*make(ag))
            continue
        outcomes = []
        for lib in (torch, ag):
            fn, inputs = make(lib)
            go = lib.tensor([0.5, -1.0, 0.25], dtype=lib.float64, requires_grad=True)
            with pytest.raises(Exception) as raised:
                await _check(lib, "gradgradcheck", fn, inputs, grad_outputs=go)
            outcomes.append(str(raised.value).replace("torch.", "asyncgrad."))
            assert await _check(lib, "gradgradcheck", fn, inputs, grad_outputs=go, raise_exception=False) is False
        assert outcomes[0] == outcomes[1]


async def test_messages_in_words():
    with pytest.raises(ag.GradcheckError) as mismatch:
        await ag.gradcheck(*_wrong(ag))
    text = str(mismatch.value)
    assert text.startswith("Jacobian mismatch for output 0 with respect to input 0,\nnumerical:tensor([[")
    assert "\nanalytical:tensor([[" in text
    numerical = 2 * np.array([0.3, -1.2, 2.0])
    assert f"{numerical[0]:.4f}" in text.split("analytical")[0]
    with pytest.raises(ag.GradcheckError, match="^Numerical gradient for function expected to be zero$"):
        await ag.gradcheck(lambda t: t.detach() * 2, (_x(ag),))
    with pytest.raises(ag.GradcheckError, match="^Backward is not reentrant, i.e., running backward"):
        await ag.gradcheck(*_nondeterministic(ag))
    assert await ag.gradcheck(*_wrong(ag), raise_exception=False) is False
    with pytest.raises(ValueError, match="at least one input tensor to require gradient"):
        await ag.gradcheck(lambda t: t, (_x(ag, False),), raise_exception=False)  # not a GradcheckError: raised


async def test_warnings_point_at_the_callers_line():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        await ag.gradcheck(lambda t: t * 2, (ag.tensor([1.0], dtype=ag.float32, requires_grad=True),), atol=0.1)
        await ag.gradgradcheck(lambda t: t * t, (ag.tensor([1.0], dtype=ag.float32, requires_grad=True),), atol=1e-1,
                               rtol=1e-1)
    assert len(caught) >= 2 and all(w.filename == __file__ for w in caught), [(w.filename, w.message) for w in caught]


async def test_check_batched_grad_is_computed(torch):
    """torch runs it under vmap; asyncgrad runs the batch through the engine: both pass."""
    assert torch.autograd.gradcheck(lambda t: t * 2, (_x(torch),), check_batched_grad=True)
    assert await ag.gradcheck(lambda t: t * 2, (_x(ag),), check_batched_grad=True)
    assert await ag.gradgradcheck(lambda t: t * t, (_x(ag),), check_batched_grad=True)


async def test_gradcheck_on_the_sim_device():
    x = ag.tensor([0.3, -1.2, 2.0], dtype=ag.float64, device="sim:0", requires_grad=True)
    assert await ag.gradcheck(lambda t: t[:] * t.exp(), (x,))
    assert await ag.gradgradcheck(lambda t: (t * t).sin(), (x,))
    assert await ag.gradcheck(*_wrong(ag)[:1], (x,), raise_exception=False) is False
