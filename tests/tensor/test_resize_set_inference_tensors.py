"""Fixes from the review of the day's merges: each test failed before its fix."""

from __future__ import annotations

import pytest
from helpers import check_raises, torch, wait

import asyncgrad as ag

INFERENCE_INPLACE = "Inplace update to inference tensor outside InferenceMode is not allowed"


def _inference_ones(lib):
    with lib.inference_mode():
        return lib.ones(3)


def test_resize_of_an_inference_tensor_to_its_own_shape_is_no_inplace_op():
    for lib in (ag, torch) if torch is not None else (ag,):
        z = _inference_ones(lib)
        z.resize_(3)
        assert z.is_inference()


@pytest.mark.parametrize("modify", [
    lambda lib, z: z.resize_(4),
    lambda lib, z: z.resize_as_(lib.ones(2)),
    lambda lib, z: z.set_(lib.zeros(2)),
    lambda lib, z: z.set_(),
])
def test_resize_and_set_refuse_inference_tensors_before_writing(modify):
    """torch refuses resize_/set_ on an inference tensor outside inference_mode; asyncgrad also
    refuses before changing anything (torch's resize_ has already resized when it raises)."""
    check_raises(lambda lib: modify(lib, _inference_ones(lib)), RuntimeError, INFERENCE_INPLACE)
    z = _inference_ones(ag)
    with pytest.raises(RuntimeError, match=INFERENCE_INPLACE):
        modify(ag, z)
    assert tuple(z.shape) == (3,) and z.tolist() == [1.0, 1.0, 1.0]


def test_resize_inside_inference_mode_still_works():
    with ag.inference_mode():
        z = ag.ones(3)
        z.resize_(5)
    assert tuple(z.shape) == (5,)


@pytest.mark.parametrize("sizes, bumps", [((3,), 0), ((2,), 1), ((5,), 1), ((3, 1), 1)])
def test_resize_bumps_the_version_when_the_shape_changes(sizes, bumps):
    x = ag.tensor([2.0, 3.0, 4.0])
    x.resize_(*sizes)
    assert x._version == bumps
    if torch is not None:
        t = torch.tensor([2.0, 3.0, 4.0])
        t.resize_(*sizes)
        assert t._version == bumps


async def test_resize_of_a_saved_tensor_is_caught_by_backward():
    """A tensor saved for backward and then resized: torch's version check refuses the backward."""
    w = ag.ones(3, requires_grad=True)
    x = ag.tensor([2.0, 3.0, 4.0])
    y = (w * x).sum()
    x.resize_(2)
    x.resize_(3)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        await ag.grad(y, w)
def test_requires_grad_on_inference_tensor_outside_inference_mode():
    def set_flag(lib):
        _inference_ones(lib).requires_grad = True

    check_raises(lambda lib: _inference_ones(lib).requires_grad_(), RuntimeError,
                 "Setting requires_grad=True on inference tensor outside InferenceMode is not allowed.")
    check_raises(set_flag, RuntimeError,
                 "Setting requires_grad=True on inference tensor outside InferenceMode is not allowed.")
    z = _inference_ones(ag)
    assert z.requires_grad_(False).requires_grad is False
    with ag.inference_mode():
        assert z.requires_grad_().requires_grad




def test_custom_backward_gradient_for_a_non_tensor_input_is_refused():
    """torch refuses a gradient returned for an input that was not a Tensor; asyncgrad dropped it."""
    def fn(lib):
        class Scale(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x, k):
                return x * k

            @staticmethod
            def backward(ctx, g):
                return g * 2, lib.ones(1)

        a = lib.ones(3, requires_grad=True)
        Scale.apply(a, 2).sum().backward() if lib is torch else wait(Scale.apply(a, 2).sum().backward())
    check_raises(fn, RuntimeError, "function ScaleBackward returned a gradient different than None at position 2, "
                                   "but the corresponding forward input was not a Variable")


@pytest.mark.parametrize("call, exc, words", [
    (lambda lib: lib.ones(3).resize_("a"), TypeError,
     "resize_\\(\\): argument 'size' \\(position 1\\) must be tuple of ints, not str"),
    (lambda lib: lib.ones(3).resize_(2.5), TypeError, "must be tuple of ints, not float"),
    (lambda lib: lib.ones(3).resize_((2, "a")), TypeError, "failed to unpack the object at pos 2"),
    (lambda lib: lib.ones(3).resize_(), TypeError, "resize_\\(\\) missing 1 required positional arguments: \"size\""),
    (lambda lib: lib.ones(3).index_fill(0, lib.tensor([[0]]), 1.0), RuntimeError, "Index has to be a vector/scalar"),
    (lambda lib: lib.ones(3).index_copy(0, lib.tensor([[0]]), lib.ones(1)), IndexError,
     "index_copy_\\(\\): Index should have dimension 1 or 0 \\(got 2\\)"),
])
def test_bad_sizes_and_indices_get_torchs_errors(call, exc, words):
    check_raises(call, exc, words)


@pytest.mark.parametrize("call, words", [
    (lambda lib: lib.finfo(lib.int64), "finfo\\(\\) requires a floating point input type. Use torch.iinfo to handle"),
    (lambda lib: lib.iinfo(lib.float32), "iinfo\\(\\) requires an integer input type. Use torch.finfo to handle"),
    (lambda lib: lib.iinfo(lib.bool), "bool is not supported by torch.iinfo"),
])
def test_finfo_iinfo_of_the_wrong_kind(call, words):
    check_raises(call, TypeError, words)


@pytest.mark.parametrize("case", ["x_requires_grad", "source_requires_grad"])
async def test_set_records_a_node_whose_backward_refuses(case):
    """After ``y.set_(src)`` in grad mode, y's value no longer comes from its old history: torch
    makes y the output of NotImplemented, so a backward through y raises; asyncgrad used to send
    the gradient into y's old history (a silently wrong gradient)."""
    w = ag.ones(3, requires_grad=True)
    src = ag.tensor([5.0, 6.0, 7.0], requires_grad=case == "source_requires_grad")
    y = w * 2 if case == "x_requires_grad" else ag.ones(3)
    y.set_(src)
    assert y.requires_grad and y.tolist() == [5.0, 6.0, 7.0]
    with pytest.raises(RuntimeError, match="derivative for set_ is not implemented"):
        await ag.grad((y * 3).sum(), w if case == "x_requires_grad" else src)
    if torch is not None:
        tw = torch.ones(3, requires_grad=True)
        tsrc = torch.tensor([5.0, 6.0, 7.0], requires_grad=case == "source_requires_grad")
        ty = tw * 2 if case == "x_requires_grad" else torch.ones(3)
        ty.set_(tsrc)
        with pytest.raises(RuntimeError, match="derivative for set_ is not implemented"):
            torch.autograd.grad((ty * 3).sum(), tw if case == "x_requires_grad" else tsrc)


def test_set_in_no_grad_keeps_the_history():
    w = ag.ones(3, requires_grad=True)
    y = w * 2
    node = y.grad_fn
    with ag.no_grad():
        y.set_(ag.tensor([5.0, 6.0, 7.0]))
    assert y.grad_fn is node
