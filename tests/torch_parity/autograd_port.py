"""What the ports of torch's current autograd tests share (tests/torch_parity/test_*_Test*.py).

torch's test helpers rewritten against asyncgrad: ``assertEqual`` for tensors, the struct checks of
``TestAutogradFunctional``, ``graph_desc``, ``set_warn_always_context``, and the float64 default that
torch's files set at import.
"""

import contextlib

import numpy as np
import pytest

import asyncgrad as ag


@contextlib.contextmanager
def set_warn_always_context(new_val):
    """torch's ``common_utils.set_warn_always_context``."""
    old_val = ag.is_warn_always_enabled()
    ag.set_warn_always(new_val)
    try:
        yield
    finally:
        ag.set_warn_always(old_val)


@pytest.fixture(autouse=True)
def double_default():
    """torch's test files run ``torch.set_default_dtype(torch.double)`` at import; restored after."""
    before = ag.get_default_dtype()
    ag.set_default_dtype(ag.float64)
    yield
    ag.set_default_dtype(before)


def _np(t):
    if isinstance(t, ag.Tensor):
        return np.asarray(t.detach().numpy())
    return np.asarray(t)


def assert_equal(actual, expected, atol=None, rtol=None):
    """torch's ``assertEqual`` for tensors, numbers and (nested) tuples of them: same structure,
    same shapes, values within torch's default tolerances for the dtype."""
    if isinstance(expected, (tuple, list)) and not isinstance(actual, ag.Tensor):
        assert isinstance(actual, (tuple, list)) and len(actual) == len(expected), (actual, expected)
        for a, e in zip(actual, expected):
            assert_equal(a, e, atol=atol, rtol=rtol)
        return
    a, e = _np(actual), _np(expected)
    if isinstance(actual, ag.Tensor) and isinstance(expected, ag.Tensor):
        assert a.shape == e.shape, (a.shape, e.shape)
    else:
        a, e = np.broadcast_arrays(a, e)
    if atol is None:
        low = np.float32 in (a.dtype, e.dtype)
        rtol, atol = (1.3e-6, 1e-5) if low else (1e-7, 1e-7)
    np.testing.assert_allclose(a, e, rtol=rtol, atol=atol, equal_nan=True)


def assert_not_equal(actual, expected):
    """torch's ``assertNotEqual``: shapes or some value differ."""
    a, e = _np(actual), _np(expected)
    assert a.shape != e.shape or not np.allclose(a, e, rtol=1e-7, atol=1e-7, equal_nan=True)


def assert_same_struct(res, base):
    """TestAutogradFunctional._assert_same_struct."""
    if isinstance(base, ag.Tensor):
        assert isinstance(res, ag.Tensor)
        assert tuple(base.shape) == tuple(res.shape)
    elif isinstance(base, tuple):
        assert isinstance(res, tuple)
        assert len(base) == len(res)
        for el_base, el_res in zip(base, res):
            assert isinstance(el_base, ag.Tensor) and isinstance(el_res, ag.Tensor)
            assert tuple(el_base.shape) == tuple(el_res.shape)
    else:
        raise RuntimeError("The base given to `_assert_same_struct` doesn't have the right structure.")


def assert_interleaved_struct(res, base1, base2):
    """TestAutogradFunctional._assert_interleaved_struct."""
    if isinstance(base1, ag.Tensor) and isinstance(base2, ag.Tensor):
        assert isinstance(res, ag.Tensor)
        assert tuple(res.shape) == tuple(base1.shape) + tuple(base2.shape)
    elif isinstance(base1, tuple) and isinstance(base2, ag.Tensor):
        assert isinstance(res, tuple) and len(res) == len(base1)
        for el_res, el_base1 in zip(res, base1):
            assert isinstance(el_res, ag.Tensor)
            assert tuple(el_res.shape) == tuple(el_base1.shape) + tuple(base2.shape)
    elif isinstance(base1, ag.Tensor) and isinstance(base2, tuple):
        assert isinstance(res, tuple) and len(res) == len(base2)
        for el_res, el_base2 in zip(res, base2):
            assert isinstance(el_res, ag.Tensor)
            assert tuple(el_res.shape) == tuple(base1.shape) + tuple(el_base2.shape)
    elif isinstance(base1, tuple) and isinstance(base2, tuple):
        assert isinstance(res, tuple) and len(res) == len(base1)
        for el_res, el_base1 in zip(res, base1):
            assert isinstance(el_res, tuple) and len(el_res) == len(base2)
            for el_el_res, el_base2 in zip(el_res, base2):
                assert isinstance(el_el_res, ag.Tensor)
                assert tuple(el_el_res.shape) == tuple(el_base1.shape) + tuple(el_base2.shape)
    else:
        raise RuntimeError("The bases given to `_assert_interleaved_struct` don't have the right structure.")


def graph_desc(fn):
    """test_autograd.graph_desc, with ``name()`` for torch's ``type(fn).__name__``."""
    if fn is None:
        return "None"
    result = fn.name() + "("
    next_functions = fn.next_functions
    for next_fn, _ in next_functions:
        result += graph_desc(next_fn)
        result += ", "
    if next_functions:
        result = result[:-2]
    return result + ")"
