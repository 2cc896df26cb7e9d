"""torch's forms of three linalg functions, against torch and finite differences, on cpu and sim:0
(an op module): slogdet's two outputs on one node (0x0 and empty batches included), matrix_power
with n = 0 (identities copied into a clone: a zero gradient, empty batches included), and
pinv(hermitian=True), which reads A's lower triangle through its eigendecomposition while its
gradient is torch's pinv_backward of the whole A."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import ag_tensor, assert_close, check_gradgrad, check_op

import asyncgrad as ag


def _invertible(lib, x):
    n = x.shape[-1]
    return x + 4 * lib.eye(n, dtype=x.dtype, device=x.device)


@pytest.mark.parametrize("shape", [(3, 3), (2, 3, 3), (0, 0), (2, 0, 0), (0, 2, 2)])
async def test_slogdet_outputs_share_one_node(shape, torch):
    x = ag_tensor(np.random.default_rng(0).standard_normal(shape), requires_grad=True)
    sign, logabs = ag.linalg.slogdet(_invertible(ag, x) if shape[-1] else x)
    t_sign, t_logabs = torch.linalg.slogdet(torch.tensor(np.random.default_rng(0).standard_normal(shape)) +
                                            4 * torch.eye(shape[-1]))
    assert sign.grad_fn is logabs.grad_fn and sign.grad_fn.name() == "LinalgSlogdetBackward0"
    assert_close(sign.detach(), t_sign, 0, 0, "sign")
    assert_close(logabs.detach(), t_logabs, 1e-12, 1e-14, "logabsdet")
    await check_op(lambda lib, x: lib.linalg.slogdet(_invertible(lib, x) if x.shape[-1] else x)[1], shape,
                   name="LinalgSlogdetBackward0")
    if shape[-1]:
        await check_gradgrad(lambda lib, x: lib.linalg.slogdet(_invertible(lib, x))[1], shape)
        # the sign and logabsdet together: the sign adds nothing to the gradient
        await check_op(lambda lib, x: lib.stack(lib.linalg.slogdet(_invertible(lib, x))), shape,
                       name="StackBackward0")


@pytest.mark.parametrize("shape", [(3, 3), (2, 3, 3), (0, 2, 2), (2, 0, 0)])
async def test_matrix_power_zero_is_a_copy_into_a_clone(shape):
    out, (g,) = await check_op(lambda lib, x: lib.linalg.matrix_power(x, 0), shape, name="CopyBackwards",
                               torch_name=False)  # torch's name() is "torch::autograd::CopyBackwards"
    n = shape[-1]
    assert np.array_equal(out.detach().cpu().numpy(), np.broadcast_to(np.eye(n), shape))
    assert out.grad_fn.next_functions[0][0].name() == "CloneBackward0" and not np.any(g.cpu().numpy())


@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 3)])
async def test_hermitian_pinv_reads_the_lower_triangle(shape, torch):
    rng = np.random.default_rng(1)
    a = rng.standard_normal(shape)
    got = ag.linalg.pinv(ag_tensor(a), hermitian=True)
    lower = np.tril(a) + np.swapaxes(np.tril(a, -1), -1, -2)
    assert_close(got, np.linalg.pinv(lower), 1e-10, 1e-12, "the pseudo-inverse of the lower triangle's matrix")
    assert_close(got, torch.linalg.pinv(torch.tensor(a), hermitian=True), 1e-10, 1e-12, "value vs torch")
    fn = lambda lib, x: lib.linalg.pinv(x, hermitian=True)  # noqa: E731
    await check_op(fn, shape, name="LinalgPinvBackward0", fd=False)  # torch's gradient: of the whole A
    sym = lambda lib, x: lib.linalg.pinv(x + x.mT, hermitian=True)  # noqa: E731
    await check_op(sym, shape, name="LinalgPinvBackward0")
    await check_gradgrad(sym, shape)


async def test_hermitian_pinv_drops_small_eigenvalues_by_magnitude(torch):
    a = np.diag([4.0, -2.0, 1e-9, -1e-9])
    for kwargs in ({}, {"atol": 1.5}, {"rtol": 0.4}, {"atol": 0.1, "rtol": 0.6}):
        got = ag.linalg.pinv(ag_tensor(a), hermitian=True, **kwargs)
        assert_close(got, torch.linalg.pinv(torch.tensor(a), hermitian=True, **kwargs), 1e-12, 1e-12, str(kwargs))
