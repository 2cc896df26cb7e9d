"""In-place view ops (Note [In-place view ops] in asyncgrad/ops/inplace_views.py): ``t_``, ``transpose_``,
``swapdims_``/``swapaxes_``, ``squeeze_``, ``unsqueeze_``, ``as_strided_`` change a tensor's own shape and
strides, set its history (torch's in-place node names), bump its version and keep its base, as torch's."""

from __future__ import annotations

import numpy as np
import pytest

import asyncgrad as ag

OPS = {
    "t_": (lambda v: v.t_(), "TBackward1"),
    "transpose_": (lambda v: v.transpose_(0, 1), "TransposeBackward1"),
    "swapdims_": (lambda v: v.swapdims_(1, 0), "TransposeBackward1"),
    "swapaxes_": (lambda v: v.swapaxes_(0, -1), "TransposeBackward1"),
    "unsqueeze_": (lambda v: v.unsqueeze_(1), "UnsqueezeBackward1"),
    "squeeze_()": (lambda v: v.unsqueeze_(0).squeeze_(), "SqueezeBackward3"),
    "squeeze_(dim)": (lambda v: v.unsqueeze_(0).squeeze_(0), "SqueezeBackward4"),
    "squeeze_(dims)": (lambda v: v.unsqueeze_(0).squeeze_((0,)), "SqueezeBackward5"),
    "as_strided_": (lambda v: v.as_strided_((2, 2), (1, 2)), "AsStridedBackward1"),
}

VALUES = np.arange(1.0, 7.0).reshape(2, 3)


def _run(lib, op, through_view: bool, then_inplace: bool):
    """A non-leaf (or a view of one) changed in place by ``op``, optionally then added into in place,
    and the leaf's gradient of a weighted sum."""
    x = lib.tensor(VALUES.copy(), dtype=lib.float64, requires_grad=True)
    y = x * 2
    v = y[:, :] if through_view else y
    op(v)
    name, version, shape = type(v.grad_fn).__name__, v._version, tuple(v.shape)
    if then_inplace:
        v.mul_(3)
    w = lib.tensor(np.arange(float(v.numel())).reshape(shape), dtype=lib.float64)
    out = (v * w).sum() + (y * y).sum()
    return name, version, shape, out, x


@pytest.mark.parametrize("then_inplace", [False, True], ids=["", "then-mul_"])
@pytest.mark.parametrize("through_view", [False, True], ids=["tensor", "view"])
@pytest.mark.parametrize("op", OPS, ids=list(OPS))
async def test_matches_torch(torch, op, through_view, then_inplace):
    fn, node = OPS[op]
    a_name, a_version, a_shape, a_out, a_x = _run(ag, fn, through_view, then_inplace)
    t_name, t_version, t_shape, t_out, t_x = _run(torch, fn, through_view, then_inplace)
    assert a_name == t_name == node
    assert (a_version, a_shape) == (t_version, t_shape)
    await a_out.backward()
    t_out.backward()
    np.testing.assert_allclose(a_x.grad.numpy(), t_x.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize("op", OPS, ids=list(OPS))
async def test_gradient_is_the_finite_difference_one(op):
    fn, _ = OPS[op]

    def f(x):
        v = (x * 2)[:, :]
        fn(v)
        return v * v

    assert await ag.gradcheck(f, (ag.randn(2, 3, dtype=ag.float64, requires_grad=True),))


async def test_a_view_keeps_its_base_and_the_base_its_history():
    y = ag.randn(2, 3, requires_grad=True) * 1
    v = y[0:2]
    v.unsqueeze_(0)
    assert v._base is y and v.shape == (1, 2, 3) and y.grad_fn.name() == "MulBackward0"
    assert v.grad_fn.next_functions[0][0].name() == "SliceBackward0"


def test_refusals_in_torchs_words():
    leaf = ag.randn(2, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        leaf.t_()
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad is being used"):
        leaf[0:1].t_()
    base = leaf * 1
    with ag.no_grad():
        view = base[0:1]
    with pytest.raises(RuntimeError, match="A view was created in no_grad mode"):
        view.unsqueeze_(0)
    with ag.no_grad():
        leaf.t_()  # outside grad mode a leaf may change its own shape, as torch's
    assert leaf.shape == (3, 2) and leaf._version == 1
    with pytest.raises(RuntimeError, match=r"t\(\) expects a tensor with <= 2 dimensions"):
        ag.randn(2, 3, 4).t_()


async def test_without_grad_mode_a_view_reads_its_base_again():
    x = ag.tensor(VALUES.copy(), dtype=ag.float64, requires_grad=True)
    y = x * 2
    v = y[:, 1:]
    with ag.no_grad():
        v.t_()
    assert v.grad_fn.name() == "AsStridedBackward0" and v.shape == (2, 2)
    await v.sum().backward()
    assert x.grad.tolist() == [[0.0, 2.0, 2.0], [0.0, 2.0, 2.0]]


def test_plain_tensors_and_the_top_level_aliases():
    a = ag.arange(6.0).reshape(2, 3)
    assert a.t_().shape == (3, 2) and a.unsqueeze_(0).shape == (1, 3, 2) and a.squeeze_().shape == (3, 2)
    assert a.tolist() == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
    b = ag.arange(6.0).reshape(2, 3)
    assert ag.swapdims(b, 0, 1).tolist() == ag.swapaxes(b, 0, 1).tolist() == b.t().tolist()
