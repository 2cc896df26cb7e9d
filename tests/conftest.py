import gc
import importlib.metadata
import importlib.util
import sys

import numpy as np
import pytest

import asyncgrad as ag

TORCH_NEEDED = "needs torch: compares with PyTorch, which the test extra does not install (pip install torch)"


def pytest_report_header(config):
    """Say up front whether the PyTorch oracle is there: without it, comparisons with torch are left out."""
    if importlib.util.find_spec("torch") is None:  # found, not imported: importing it takes seconds
        return ("torch: not installed; tests that compare with PyTorch skip, and op tests check finite "
                "differences only (pip install torch)")
    return f"torch: {importlib.metadata.version('torch')} (the oracle)"


_modules_frozen = [0]


def _freeze_new_imports() -> None:
    """Move what imports made into the collector's permanent generation (``gc.freeze``).

    Each test ends with a full ``gc.collect()`` (below). Without this, every one of them walks
    every object that torch, hypothesis, matplotlib and the test modules made at import, which
    took most of the suite's time: 36.8 s of gc.collect() in a 47 s run of ten test files with
    torch, 9.2 s of 14 s without. Frozen, a collection walks only what tests made since. Called
    right after a collection, so no garbage is frozen; again whenever a test imported something
    new. tests/engine/test_stalls.py empties the permanent generation around each of its tests.
    """
    if len(sys.modules) != _modules_frozen[0]:
        _modules_frozen[0] = len(sys.modules)
        gc.freeze()


def pytest_collection_finish(session):
    gc.collect()
    _freeze_new_imports()


@pytest.fixture
def torch():
    """PyTorch as an oracle; tests that use it skip, saying that they need torch, where it is not installed."""
    torch = pytest.importorskip("torch", reason=TORCH_NEEDED)
    torch.set_default_dtype(torch.float64)
    return torch


@pytest.fixture(autouse=True)
def _isolated_settings():
    """Device settings and the default dtype are global: restore them after each test."""
    devices = [ag.device(d) for d in ("cpu", "sim:0", "sim:1")]
    saved = [(d.inline_threshold, d.num_workers) for d in devices]
    dtype = ag.get_default_dtype()
    ag.manual_seed(0)
    yield
    for d, (threshold, workers) in zip(devices, saved):
        d.inline_threshold, d.num_workers = threshold, workers
    ag.set_default_dtype(dtype)
    ag.set_detect_anomaly(False)
    gc.collect()
    _freeze_new_imports()


@pytest.fixture
def collector_off():
    """The cyclic collector off for the test: what it frees, reference counting alone freed."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


OP_MODULES = ("test_ops", "test_ops_hypothesis", "test_ops_inplace", "test_views", "test_ops_linalg",
              "test_gamma_and_pointwise_functions", "test_composite_ops",
              "test_products_and_norms",
              "test_running_and_selecting_reductions", "test_scatters_and_windows", "test_two_operand_math",
              "test_lu_family", "test_cholesky_factor_gradients", "test_slogdet_matrix_power_and_hermitian_pinv",
              "test_batch_norm_of_an_empty_input")
"""Op test modules that run whole on ``cpu``, on ``sim:0`` and, with CuPy and a GPU, on ``cuda:0`` (helpers.DEVICE)."""


def _cuda_available() -> bool:
    """CuPy imports and sees a GPU: then the op modules run on ``cuda:0`` too (a GPU session runs
    the whole op suite there; elsewhere no cuda item is generated, rather than thousands of skips)."""
    try:
        import cupy
    except ImportError:
        return False
    try:
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # noqa: BLE001 - any CUDA runtime failure means no usable GPU
        return False


OP_DEVICES = ["cpu", "sim:0"] + (["cuda:0"] if _cuda_available() else [])


def pytest_generate_tests(metafunc):
    if metafunc.module.__name__ in OP_MODULES and "op_device" in metafunc.fixturenames:
        metafunc.parametrize("op_device", OP_DEVICES, indirect=True)


@pytest.fixture(autouse=True)
def op_device(request):
    """The device ``helpers.check_op`` and ``lib.tensor`` put tensors on (cpu outside the op modules)."""
    import helpers

    helpers.DEVICE[0] = getattr(request, "param", "cpu")
    yield helpers.DEVICE[0]
    helpers.DEVICE[0] = "cpu"


@pytest.fixture
def into_calls(monkeypatch):
    """The names of the ufuncs ``ArrayBackend.into`` ran (Note [In place without a temporary] in
    ops/inplace.py): which in-place ops wrote straight into the tensor."""
    from asyncgrad.devices.backend import ArrayBackend

    calls = []
    original = ArrayBackend.into

    def counted(self, name, out, a, b):
        calls.append(name)
        return original(self, name, out, a, b)

    monkeypatch.setattr(ArrayBackend, "into", counted)
    return calls
