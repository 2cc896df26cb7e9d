"""Strides and memory formats as torch has them (asyncgrad/_layout.py): ``stride()``,
``is_contiguous(memory_format=)``, ``contiguous``/``clone``/``to(memory_format=)``, the ``*_like``
factories, ``empty_strided``, and AccumulateGrad's gradient layout contract (Note [The gradient
layout contract]), on ``cpu`` and ``sim:0`` (whose strides are its simulated memory's: Note
[Strides are the device memory's]), against torch and finite differences."""

from __future__ import annotations

import pickle

import helpers
import numpy as np
import pytest
from helpers import check_op, check_raises

import asyncgrad as ag

DEVICES = ["cpu", "sim:0"]


@pytest.fixture(params=DEVICES)
def dev(request, op_device):
    helpers.DEVICE[0] = request.param
    return request.param


def _rand(lib, dev, *shape):
    """Seeded values, the same in both libraries (torch on cpu, asyncgrad on ``dev``)."""
    host = np.random.default_rng(sum(shape)).standard_normal(shape)
    if lib is ag:
        return ag.tensor(host, device=dev)
    return lib.tensor(host)


# Each builds a tensor from the same ops in either library; its strides must be torch's.
LAYOUTS = {
    "fresh": lambda lib, d: _rand(lib, d, 2, 3, 4),
    "transposed": lambda lib, d: _rand(lib, d, 4, 6).t(),
    "permuted": lambda lib, d: _rand(lib, d, 2, 3, 4, 5).permute(0, 2, 3, 1),
    "expanded": lambda lib, d: _rand(lib, d, 3).expand(2, 3),
    "sliced": lambda lib, d: _rand(lib, d, 4, 6)[:, ::2],
    "channels_last": lambda lib, d: _rand(lib, d, 2, 3, 4, 5).to(memory_format=lib.channels_last),
    "channels_last_c1": lambda lib, d: _rand(lib, d, 2, 1, 4, 5).contiguous(memory_format=lib.channels_last),
    "channels_last_3d": lambda lib, d: _rand(lib, d, 2, 3, 4, 5, 6).contiguous(memory_format=lib.channels_last_3d),
    "clone_cl": lambda lib, d: _rand(lib, d, 2, 3, 4, 5).clone(memory_format=lib.channels_last),
    "clone_transposed": lambda lib, d: _rand(lib, d, 4, 6).t().clone(),
    "clone_sliced": lambda lib, d: _rand(lib, d, 4, 6).t()[::2].clone(),
    "clone_expanded": lambda lib, d: _rand(lib, d, 2, 1).expand(2, 3).clone(),
    "contiguous_sliced": lambda lib, d: _rand(lib, d, 4, 6).t()[::2].contiguous(),
    "clone_cl_to_contiguous": lambda lib, d: _rand(lib, d, 2, 3, 4, 5).to(memory_format=lib.channels_last)
    .clone(memory_format=lib.contiguous_format),
    "cl_contiguous": lambda lib, d: _rand(lib, d, 2, 3, 4, 5).to(memory_format=lib.channels_last).contiguous(),
    "to_dtype_transposed": lambda lib, d: _rand(lib, d, 4, 6).t().to(lib.float32),
    "to_dtype_cl": lambda lib, d: _rand(lib, d, 2, 3, 4, 5).to(lib.float32, memory_format=lib.channels_last),
    "to_contiguous_keeps_transposed": lambda lib, d: _rand(lib, d, 4, 6).t().to(memory_format=lib.contiguous_format),
    "to_contiguous_of_cl": lambda lib, d: _rand(lib, d, 2, 3, 4, 5).to(memory_format=lib.channels_last)
    .to(memory_format=lib.contiguous_format),
    "zeros_like_transposed": lambda lib, d: lib.zeros_like(_rand(lib, d, 4, 6).t()),
    "ones_like_sliced": lambda lib, d: lib.ones_like(_rand(lib, d, 4, 6).t()[::2]),
    "empty_like_cl": lambda lib, d: lib.empty_like(_rand(lib, d, 2, 3, 4, 5), memory_format=lib.channels_last),
    "full_like_permuted": lambda lib, d: lib.full_like(_rand(lib, d, 2, 3, 4).permute(2, 0, 1), 2.0),
    "rand_like_cl": lambda lib, d: lib.rand_like(_rand(lib, d, 2, 3, 4, 5).to(memory_format=lib.channels_last)),
    "randn_like_contiguous": lambda lib, d: lib.randn_like(_rand(lib, d, 4, 6).t(),
                                                           memory_format=lib.contiguous_format),
    "empty_strided": lambda lib, d: lib.empty_strided((2, 2), (4, 2), device=d if lib is ag else "cpu"),
    "empty_strided_overlap": lambda lib, d: lib.empty_strided((2, 3), (0, 1), device=d if lib is ag else "cpu"),
}


@pytest.mark.parametrize("name", LAYOUTS)
def test_strides_as_torch(dev, torch, name):
    build = LAYOUTS[name]
    ours, theirs = build(ag, dev), build(torch, "cpu")
    assert ours.device == ag.device(dev)
    assert ours.stride() == theirs.stride(), name
    assert [ours.stride(d) for d in range(-ours.ndim, ours.ndim)] == [
        theirs.stride(d) for d in range(-theirs.ndim, theirs.ndim)]
    for fmt in ("contiguous_format", "channels_last", "channels_last_3d", "preserve_format"):
        assert ours.is_contiguous(memory_format=getattr(ag, fmt)) == theirs.is_contiguous(
            memory_format=getattr(torch, fmt)), (name, fmt)
    assert ours.is_contiguous() == theirs.is_contiguous()
    if "empty" not in name and "rand" not in name:  # uninitialised or random values
        np.testing.assert_array_equal(ours.cpu().numpy(), theirs.numpy().astype(ours.dtype))


def test_contiguous_returns_itself_when_it_is(dev):
    x = ag.randn(2, 3, 4, 5, device=dev)
    assert x.contiguous() is x
    cl = x.contiguous(memory_format=ag.channels_last)
    assert cl is not x and cl.contiguous(memory_format=ag.channels_last) is cl
    assert cl.to(memory_format=ag.channels_last) is cl
    assert x.to(memory_format=ag.preserve_format) is x


def test_formats_print_and_pickle_as_torch(torch):
    for name in ("contiguous_format", "channels_last", "channels_last_3d", "preserve_format"):
        fmt = getattr(ag, name)
        assert repr(fmt) == str(fmt) == repr(getattr(torch, name)).replace("torch", "asyncgrad")
        assert pickle.loads(pickle.dumps(fmt)) is fmt
        assert isinstance(fmt, ag.memory_format)


def test_bad_input_as_torch(dev):
    def x(lib):
        return lib.ones(2, 3) if lib.name == "torch" else ag.ones(2, 3, device=dev)

    check_raises(lambda lib: x(lib).stride(2), IndexError,
                 r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)")
    check_raises(lambda lib: lib.tensor(1.0).stride(0), IndexError,
                 "Dimension specified as 0 but tensor has no dimensions")
    check_raises(lambda lib: x(lib).stride("a"), TypeError,
                 "stride\\(\\): argument 'dim' \\(position 1\\) must be int, not str")
    assert ag.ones(2, 3, device=dev).contiguous(memory_format=ag.preserve_format).stride() == (3, 1)
    check_raises(lambda lib: x(lib).t().contiguous(memory_format=lib.preserve_format), RuntimeError,
                 "preserve memory format is unsupported by the contiguous operator")
    for call in (lambda lib: x(lib).contiguous(memory_format=lib.channels_last),
                 lambda lib: x(lib).to(memory_format=lib.channels_last),
                 lambda lib: x(lib).clone(memory_format=lib.channels_last),
                 lambda lib: lib.empty_like(x(lib), memory_format=lib.channels_last)):
        check_raises(call, RuntimeError, "required rank 4 tensor to use channels_last format")
    check_raises(lambda lib: x(lib).clone(memory_format=lib.channels_last_3d), RuntimeError,
                 "required rank 5 tensor to use channels_last_3d format")
    check_raises(lambda lib: x(lib).contiguous(memory_format=1), TypeError,
                 "contiguous\\(\\): argument 'memory_format' must be torch.memory_format, not int", torch_same=False)
    check_raises(lambda lib: lib.empty_strided((2, 2), (1,)), RuntimeError,
                 "dimensionality of sizes \\(2\\) must match dimensionality of strides \\(1\\)")
    check_raises(lambda lib: lib.empty_strided((2, -1), (1, 1)), RuntimeError,
                 "Trying to create tensor with negative dimension -1: \\[2, -1\\]")
    check_raises(lambda lib: lib.empty_strided((2, 2), (-1, 1)), RuntimeError,
                 "Storage size calculation overflowed with sizes=\\[2, 2\\] and strides=\\[-1, 1\\]")


# --------------------------------------------------------------------------- gradients
async def test_layout_copies_differentiate(dev):
    await check_op(lambda lib, x: x.clone(memory_format=lib.channels_last) * 2, (2, 3, 2, 2), name="MulBackward0")
    await check_op(lambda lib, x: x.contiguous(memory_format=lib.channels_last_3d), (1, 2, 2, 2, 3),
                   name="CloneBackward0")
    await check_op(lambda lib, x: x.to(memory_format=lib.channels_last), (2, 2, 3, 2), name="ToCopyBackward0")
    await check_op(lambda x: x.permute(0, 2, 3, 1).contiguous().sum(1), (2, 3, 2, 2))
    await check_op(lambda x: x.t().clone().expand(2, 3, 2) * 3, (2, 3))


LEAVES = {
    "contiguous": lambda lib, d: _rand(lib, d, 2, 3, 4, 5),
    "channels_last": lambda lib, d: _rand(lib, d, 2, 3, 4, 5).to(memory_format=lib.channels_last),
    "transposed": lambda lib, d: _rand(lib, d, 2, 3, 4, 5).transpose(1, 3),
    "permuted_c1": lambda lib, d: _rand(lib, d, 2, 1, 4, 5).permute(0, 2, 3, 1),
    "gaps": lambda lib, d: _rand(lib, d, 2, 3, 4, 10)[..., ::2],
    "expanded": lambda lib, d: _rand(lib, d, 1, 3, 4, 5).expand(2, 3, 4, 5),
}

LOSSES = {
    "sum": lambda lib, x, o: x.sum(),
    "mul": lambda lib, x, o: (x * o).sum(),
    "mul_other_first": lambda lib, x, o: (o * x).sum(),
    "permute": lambda lib, x, o: (x.permute(3, 2, 1, 0) * o.permute(3, 2, 1, 0)).sum(),
    "transpose_contiguous": lambda lib, x, o: (x.transpose(0, 2).contiguous() ** 2).sum(),
    "expand": lambda lib, x, o: (x.unsqueeze(0).expand(3, *x.shape) * 2).sum(),
    "channels_last_copy": lambda lib, x, o: (x.contiguous(memory_format=lib.channels_last) * o).sum(),
}


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("leaf", LEAVES)
async def test_leaf_grad_layout_as_torch(dev, torch, leaf, loss):
    """A new .grad has the leaf's strides when the leaf is dense, else row-major; a second
    backward adds in place (same layout), as torch's AccumulateGrad."""
    results = []
    for lib in (ag, torch):
        x = LEAVES[leaf](lib, dev).detach().requires_grad_()
        other = _rand(lib, dev, *x.shape)
        out = LOSSES[loss](lib, x, other)
        await out.backward() if lib is ag else out.backward()
        first = x.grad.stride()
        again = LOSSES[loss](lib, x, other)
        await again.backward() if lib is ag else again.backward()
        results.append((first, x.grad.stride(), x.grad.cpu().numpy().copy()))
    (ours, ours2, ours_value), (theirs, theirs2, theirs_value) = results
    if leaf == "permuted_c1":
        # a size-1 dim's stride says nothing about memory: torch steals a permuted view of its
        # gradient (it counts references to the tensor, asyncgrad to the memory) and keeps that
        # view's stride there, asyncgrad copies it with the leaf's; every other stride agrees
        shape = ours_value.shape
        ours, ours2, theirs, theirs2 = ([s for s, n in zip(st, shape) if n != 1]
                                        for st in (ours, ours2, theirs, theirs2))
    assert ours == theirs and ours2 == theirs2, (leaf, loss)
    np.testing.assert_allclose(ours_value, theirs_value, rtol=1e-12)


async def test_create_graph_grad_obeys_the_contract(dev, torch):
    for lib in (ag, torch):
        x = _rand(lib, dev, 2, 3, 4, 5).to(memory_format=lib.channels_last).requires_grad_()
        out = (x.sum(), )[0]
        await out.backward(create_graph=True) if lib is ag else out.backward(create_graph=True)
        assert x.grad.stride() == x.stride()


async def test_stolen_grad_keeps_buffer_when_it_obeys(dev):
    """The common case costs nothing: a row-major gradient nobody else sees is stolen (no copy)."""
    x = ag.randn(3, 4, device=dev, requires_grad=True)
    y = x * 2
    await (y * y).sum().backward()
    assert x.grad.stride() == (4, 1)
    np.testing.assert_allclose(x.grad.cpu().numpy(), 8 * x.detach().cpu().numpy())


async def test_empty_strided_leaf_grad(dev):
    """The tail of torch's test_strided_leaf_grad_layout: a leaf with gaps gets a row-major grad."""
    c = ag.empty_strided((2, 2), (4, 2), device=dev).copy_(ag.rand(2, 2, device=dev))
    assert c.stride() == (4, 2)
    c.requires_grad_()
    d = ag.rand(2, 2, device=dev)
    await c.sum().backward()
    assert c.grad.stride() == (2, 1)
    c.grad = None
    await (c * d).sum().backward()
    assert c.grad.stride() == (2, 1)
    np.testing.assert_array_equal(c.grad.cpu().numpy(), d.cpu().numpy())
