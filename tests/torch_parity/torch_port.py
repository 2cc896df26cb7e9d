"""torch's 2020 ``test/test_autograd.py`` helpers as asyncgrad code, for the tests kept from the first
port of torch's autograd tests (test_TestAutograd_removed_since_2020.py) and test_autograd_linalg.py
in this folder. The ports of the current file share tests/torch_parity/autograd_port.py.
"""

import numpy as np
import pytest

import asyncgrad as ag

S = 5  # torch.testing._internal.common_methods_invocations.S


@pytest.fixture(autouse=True)
def double_default():
    """torch's test file runs ``torch.set_default_dtype(torch.double)`` at import."""
    before = ag.get_default_dtype()
    ag.set_default_dtype(ag.float64)
    yield
    ag.set_default_dtype(before)


def _np(t):
    if isinstance(t, ag.Tensor):
        return np.asarray(t.detach().numpy())
    return np.asarray(t)


def assert_equal(actual, expected, atol=None, rtol=None):
    """torch's ``assertEqual`` for tensors and numbers: same shape, values within its default tolerances."""
    a, e = _np(actual), _np(expected)
    assert a.shape == e.shape, (a.shape, e.shape)
    if atol is None:
        low = np.float32 in (a.dtype, e.dtype)
        rtol, atol = (1.3e-6, 1e-5) if low else (1e-7, 1e-7)
    np.testing.assert_allclose(a, e, rtol=rtol, atol=atol, equal_nan=True)


def random_symmetric_matrix(l, *batches):
    """common_utils.random_symmetric_matrix: (A + Aᵀ) / 2 of a standard normal A."""
    A = ag.randn(*(batches + (l, l)))
    return (A + A.transpose(-2, -1)) / 2


def random_symmetric_pd_matrix(matrix_size, *batch_dims):
    """common_utils.random_symmetric_pd_matrix: A Aᵀ + 1e-5 I of a standard normal A."""
    A = ag.randn(*(batch_dims + (matrix_size, matrix_size)))
    return ag.matmul(A, A.transpose(-2, -1)) + ag.eye(matrix_size) * 1e-5


def mask_not_all_zeros(shape):
    """common_methods_invocations.mask_not_all_zeros."""
    while True:
        result = ag.randn(*shape).gt(0)
        if bool(result.sum() > 0):
            return result


async def run_functional_checks(name, apply_fn, run_grad_checks, f_args_variable):
    """test_autograd.run_functional_checks (gradcheck, gradgradcheck with non-contiguous grad
    outputs left to asyncgrad's default, a backward with a random grad, the grad's type and size)."""
    output_variable = apply_fn(*f_args_variable)
    if run_grad_checks:
        assert await ag.gradcheck(apply_fn, f_args_variable, eps=1e-6, atol=1e-4)
        assert await ag.gradgradcheck(apply_fn, f_args_variable)
    self_variable = f_args_variable[0]
    if isinstance(output_variable, ag.Tensor) and output_variable.requires_grad and self_variable is not None:
        await output_variable.backward(ag.randn_like(output_variable))
        assert self_variable.grad.dtype == self_variable.dtype  # assertEqualTypeString
        assert tuple(self_variable.size()) == tuple(self_variable.grad.size())


def graph_desc(fn):
    """test_autograd.graph_desc, with ``name()`` for torch's ``type(fn).__name__``."""
    if fn is None:
        return 'None'
    result = fn.name() + '('
    next_functions = fn.next_functions
    for next_fn, _ in next_functions:
        result += graph_desc(next_fn)
        result += ', '
    if next_functions:
        result = result[:-2]
    return result + ')'
