import gc

import numpy as np
import pytest

import asyncgrad as ag


@pytest.fixture
def torch():
    """PyTorch as an oracle; tests that use it skip cleanly where it is not installed."""
    torch = pytest.importorskip("torch")
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


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
