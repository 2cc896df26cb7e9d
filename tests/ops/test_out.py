"""``out=`` on the top-level functions (Note [out= arguments] in asyncgrad/ops/out.py), against torch:
who may use it, dtypes, resizing, and torch's refusal of an out that partly overlaps an input."""

import warnings

import numpy as np
import pytest
from helpers import check_raises

import asyncgrad as ag

try:
    import torch
except ImportError:  # pragma: no cover - torch is a test extra
    torch = None

REFUSED = ("{}(): functions with out=... arguments don't support automatic differentiation, but one of "
           "the arguments requires grad.")


def _same_error(ours, theirs):
    """Run both; they raise the same type with the same text (theirs only where torch is installed)."""
    with pytest.raises(Exception) as got:
        ours()
    if torch is not None:
        with pytest.raises(Exception) as want:
            theirs()
        assert type(got.value).__name__ == type(want.value).__name__
        assert str(got.value) == str(want.value)
    return got.value


@pytest.mark.parametrize("which", ["input", "out"])
def test_refused_when_something_requires_grad(which):
    a = ag.randn(2, 2, requires_grad=which == "input")
    x = ag.zeros(2, 2, requires_grad=which == "out")
    err = _same_error(
        lambda: ag.mul(a, a, out=x),
        lambda: torch.mul(torch.tensor(a.detach().numpy(), requires_grad=which == "input"), 2.0,
                          out=torch.zeros(2, 2, requires_grad=which == "out")))
    assert str(err) == REFUSED.format("mul")
    with pytest.raises(RuntimeError, match=r"^sum\(\): functions with out="):
        ag.sum(a if which == "input" else a.detach().requires_grad_(), 0, out=ag.zeros(2))
    with pytest.raises(RuntimeError, match=r"^cat\(\): functions with out="):  # a list of inputs is looked into
        ag.cat([a.detach(), ag.ones(2, 2, requires_grad=True)], out=ag.zeros(4, 2))


def test_no_grad_writes_in_place_and_records_nothing():
    a = ag.randn(3, 4, requires_grad=True)
    b = ag.randn(3, 4)
    x = ag.zeros(3, 4)
    before = x._version
    with ag.no_grad():
        r = ag.add(a, b, out=x)
    assert r is x
    assert x.grad_fn is None and not x.requires_grad
    assert x._version > before
    np.testing.assert_allclose(x.numpy(), a.detach().numpy() + b.numpy())


def test_inputs_without_grad_need_no_no_grad():
    a, b = ag.randn(4, 3), ag.randn(3, 2)
    x = ag.empty(4, 2)
    assert ag.matmul(a, b, out=x) is x
    np.testing.assert_allclose(x.numpy(), a.numpy() @ b.numpy(), rtol=1e-6)
    s = ag.zeros(4, dtype=ag.int64)
    assert ag.argmax(a, 1, out=s) is s
    np.testing.assert_array_equal(s.numpy(), a.numpy().argmax(1))


def test_dtype_rules_as_torch():
    a = ag.randn(2, 2)
    err = _same_error(lambda: ag.mul(a, 2.0, out=ag.zeros(2, 2, dtype=ag.int64)),
                      lambda: torch.mul(torch.randn(2, 2, dtype=torch.float32), 2.0,
                                        out=torch.zeros(2, 2, dtype=torch.int64)))
    assert str(err) == "result type Float can't be cast to the desired output type Long"
    x = ag.zeros(2, 2, dtype=ag.float64)  # a wider float, and an integer result into a float: both allowed
    ag.add(a, 1, out=x)
    np.testing.assert_allclose(x.numpy(), a.numpy().astype(np.float64) + 1, rtol=1e-6)
    y = ag.zeros(2)
    ag.mul(ag.tensor([1, 2]), 3, out=y)
    assert y.dtype == ag.float32 and y.tolist() == [3.0, 6.0]


def test_not_a_tensor():
    with pytest.raises(TypeError, match=r"mul\(\): argument 'out' must be Tensor, not list"):
        ag.mul(ag.ones(2), 2, out=[0, 0])


def test_without_out_the_function_is_unchanged():
    a = ag.randn(3, requires_grad=True)
    assert ag.mul(a, 2).grad_fn.name() == "MulBackward0"
    assert ag.mul.__name__ == "mul" and ag.mul.__doc__ == ag.Tensor.mul.__doc__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ag.exp(a, out=None)


def test_resized_as_torch():
    """An ``out`` of another shape is resized; torch warns unless it was empty."""
    a = ag.randn(2, 2)
    x = ag.zeros(3)
    with pytest.warns(UserWarning, match=r"An output with one or more elements was resized since it had shape "
                                         r"\[3\], which does not match the required output shape \[2, 2\]"):
        assert ag.mul(a, 2.0, out=x) is x
    assert x.shape == (2, 2)
    np.testing.assert_allclose(x.numpy(), a.numpy() * 2)
    e = ag.empty(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ag.cat([a, a], out=e)
    assert e.shape == (4, 2)
    if torch is not None:
        t = torch.zeros(3)
        with pytest.warns(UserWarning, match="An output with one or more elements was resized"):
            torch.mul(torch.tensor(a.numpy()), 2.0, out=t)
        np.testing.assert_allclose(x.numpy(), t.numpy())


@pytest.mark.parametrize("fn", [
    lambda lib, x: lib.add(x[1:], x[:-1], out=x[:-1]),
    lambda lib, x: lib.mul(x[:4], 2, out=x[2:]),
])
def test_out_partially_overlapping_an_input_is_refused(fn):
    """torch refuses an out= that shares some, not all, memory with an input; asyncgrad used to
    write the out-of-place result, which no torch code could rely on."""
    def run(lib):
        x = lib.arange(6.0)
        try:
            fn(lib, x)
        finally:
            assert x.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    check_raises(run, RuntimeError, "some elements of the input tensor and the written-to tensor refer to a single "
                                    "memory location")


def test_out_fully_overlapping_an_input_is_allowed():
    x = ag.arange(4.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ag.exp(x, out=x)
    np.testing.assert_allclose(x.tolist(), np.exp(np.arange(4.0)), rtol=1e-6)
