"""Max pooling's forward (Note [Max pooling on planes]): values and return_indices against torch's,
with ties and NaN, where the windows' positions are copied into planes and where they are too many
for planes (the slices read as they lie), on cpu and sim:0; and which of the two runs."""

from __future__ import annotations

import numpy as np
import pytest

import asyncgrad as ag

pytestmark = pytest.mark.parametrize("op_device", ["cpu", "sim:0"], indirect=True)

CASES = {  # max_pool2d keywords, whether the planes are taken
    "disjoint_2x2": (dict(kernel_size=2), True),
    "overlap_padding_ceil": (dict(kernel_size=3, stride=2, padding=1, ceil_mode=True), True),
    "dilation": (dict(kernel_size=2, stride=1, dilation=2), True),
    "stride_1_3x3_slices": (dict(kernel_size=3, stride=1, padding=1), False),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", CASES)
def test_values_and_indices_match_torch(op_device, case, dtype, monkeypatch):
    torch = pytest.importorskip("torch")
    kw, planes = CASES[case]
    rng = np.random.default_rng(7)
    data = rng.integers(0, 3, (2, 3, 9, 8)).astype(dtype)  # small integers: ties in most windows
    data[0, 1, 2, 3] = np.nan
    data[1, 2, 4, 4:6] = np.nan  # two NaN in one window: the last is picked
    data[1, 0, 5, 2] = -np.inf
    taken = []
    empty = ag.device(op_device).backend.empty
    backend = ag.device(op_device).backend
    monkeypatch.setattr(backend, "empty", lambda shape, dt: taken.append(shape) or empty(shape, dt))
    values, indices = ag.nn.functional.max_pool2d(ag.tensor(data, device=op_device), return_indices=True, **kw)
    assert bool(taken) == planes
    expected, expected_indices = torch.nn.functional.max_pool2d(torch.tensor(data), return_indices=True, **kw)
    np.testing.assert_array_equal(values.cpu().numpy(), expected.numpy())
    np.testing.assert_array_equal(indices.cpu().numpy(), expected_indices.numpy())

