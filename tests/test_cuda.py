"""cuda:N on CuPy: runs only where CuPy and a GPU are present."""

import numpy as np
import pytest

import asyncgrad as ag

cupy = pytest.importorskip("cupy", reason="CuPy is not installed: cuda devices are tested on a GPU machine only")
try:
    HAVE_GPU = cupy.cuda.runtime.getDeviceCount() > 0
except Exception:  # noqa: BLE001 - any CUDA runtime failure means no usable GPU
    HAVE_GPU = False
pytestmark = pytest.mark.skipif(not HAVE_GPU, reason="no CUDA GPU visible to CuPy")


async def test_gradients_on_cuda_match_cpu():
    x_np = np.linspace(-1, 1, 6).reshape(2, 3)
    x = ag.tensor(x_np, requires_grad=True)
    y = (x.cuda().tanh() * 3).sum()
    await y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 3 * (1 - np.tanh(x_np) ** 2), rtol=1e-10)
