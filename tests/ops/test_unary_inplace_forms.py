"""The unary table in place (Note [In-place forms of the unary table] in ops/elementwise.py): every
row's ``x.name_()`` (and ``ag.name_(x)`` where torch has the function) against torch, values and
gradients in float64 on ``cpu`` and ``sim:0``; the three torch records without a derivative refuse a
backward with torch's node name and words."""

from __future__ import annotations

import numpy as np
import pytest

import asyncgrad as ag
from asyncgrad.ops import elementwise

torch = pytest.importorskip("torch", reason="the in-place forms are checked against torch")

NAMES = [row[0] for row in elementwise._UNARY if row[0] != "relu"]
X = np.array([0.35, 0.6, 0.15, 0.8])


def _input(name: str) -> np.ndarray:
    return X + 1.5 if name == "acosh" else X


@pytest.mark.parametrize("device", ["cpu", "sim:0"])
@pytest.mark.parametrize("name", NAMES)
def test_in_place_form_against_torch(name, device):
    a = ag.tensor(_input(name), dtype=ag.float64, requires_grad=True, device=device)
    t = torch.tensor(_input(name), dtype=torch.float64, requires_grad=True)
    ours, theirs = a.clone(), t.clone()
    assert getattr(ours, name + "_")() is ours
    getattr(theirs, name + "_")()
    assert ours.grad_fn.name() == theirs.grad_fn.name()
    np.testing.assert_allclose(ours.detach().cpu().numpy(), theirs.detach().numpy(), rtol=1e-12, atol=1e-15)
    assert ours._version == theirs._version
    if hasattr(torch, name + "_"):
        np.testing.assert_allclose(getattr(ag, name + "_")(a.detach().clone()).cpu().numpy(),
                                   getattr(torch, name + "_")(t.detach().clone()).numpy(), rtol=1e-12, atol=1e-15)
    else:
        assert not hasattr(ag, name + "_")
    if name in elementwise.INPLACE_WITHOUT_DERIVATIVE:
        message = f"the derivative for 'inplace version of {name}' is not implemented."
        with pytest.raises(NotImplementedError, match=message):
            theirs.sum().backward()
        with pytest.raises(NotImplementedError, match=message):
            ours.sum().backward_sync()
        return
    theirs.sum().backward()
    ours.sum().backward_sync()
    np.testing.assert_allclose(a.grad.cpu().numpy(), t.grad.numpy(force=True), rtol=1e-8, atol=1e-15)
