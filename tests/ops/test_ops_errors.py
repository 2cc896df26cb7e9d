"""Errors of the ops: torch's exception types and wording, checked against torch itself."""

from __future__ import annotations

import re

import numpy as np
import pytest
from helpers import AG, check_raises

import asyncgrad as ag

BROADCAST = "The size of tensor a \\({}\\) must match the size of tensor b \\({}\\) at non-singleton dimension {}"


# --------------------------------------------------------------------------- shapes
@pytest.mark.parametrize("op", ["+", "-", "*", "/", "**", "<", "==", "maximum", "minimum"])
def test_broadcast_error(op):
    def fn(lib):
        a, b = lib.ones(2, 3), lib.ones(4)
        if op in ("maximum", "minimum"):
            return getattr(lib, op)(a, b)
        return eval(f"a {op} b")

    check_raises(fn, RuntimeError, BROADCAST.format(3, 4, 1))


@pytest.mark.parametrize("a,b,msg", [
    ((5, 2, 3), (4, 1, 1), (5, 4, 0)),
    ((2, 3, 4), (2, 1), (3, 2, 1)),
    ((1, 3), (2, 2), (3, 2, 1)),
])
def test_broadcast_error_reports_the_last_mismatching_dim(a, b, msg):
    check_raises(lambda lib: lib.ones(*a) + lib.ones(*b), RuntimeError, BROADCAST.format(*msg))


def test_broadcast_error_of_where_and_losses():
    check_raises(lambda lib: lib.where(lib.ones(2) > 0, lib.ones(3), lib.ones(3)), RuntimeError,
                 BROADCAST.format(2, 3, 0))
    with pytest.warns(UserWarning, match="Using a target size"):
        check_raises(lambda lib: lib.F.mse_loss(lib.ones(2, 3), lib.ones(4)), RuntimeError,
                     BROADCAST.format(3, 4, 1))


def test_broadcast_error_of_inplace_ops():
    check_raises(lambda lib: lib.ones(3).add_(lib.ones(2)), RuntimeError, BROADCAST.format(3, 2, 0))
    check_raises(lambda lib: lib.ones(3).copy_(lib.ones(2)), RuntimeError, BROADCAST.format(3, 2, 0))
    check_raises(lambda lib: lib.ones(3).__setitem__([0, 1], lib.ones(3)), RuntimeError,
                 re.escape("shape mismatch: value tensor of shape [3] cannot be broadcast to indexing result of "
                           "shape [2]"))


MATMUL_ERRORS = {
    "mm": ((2, 3), (4, 5), "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"),
    "1D@2D": ((3,), (4, 5), "mat1 and mat2 shapes cannot be multiplied (1x3 and 4x5)"),
    "3D@2D": ((2, 2, 3), (4, 5), "mat1 and mat2 shapes cannot be multiplied (4x3 and 4x5)"),
    "mv": ((2, 3), (4,), "size mismatch, got input (2), mat (2x3), vec (4)"),
    "3D@1D": ((2, 2, 3), (4,), "size mismatch, got input (4), mat (4x3), vec (4)"),
    "dot": ((3,), (4,), "inconsistent tensor size, expected tensor [3] and src [4] to have the same number of "
                        "elements, but got 3 and 4 elements respectively"),
    "bmm": ((2, 2, 3), (2, 4, 5), "Expected size for first two dimensions of batch2 tensor to be: [2, 3] but got: "
                                  "[2, 4]."),
    "bmm broadcast": ((2, 1, 2, 3), (3, 4, 5), "Expected size for first two dimensions of batch2 tensor to be: "
                                               "[6, 3] but got: [6, 4]."),
    "batch dims": ((2, 2, 3), (3, 3, 5), "The size of tensor a (2) must match the size of tensor b (3) at "
                                         "non-singleton dimension 0"),
}


@pytest.mark.parametrize("case", list(MATMUL_ERRORS))
def test_matmul_shape_errors(case):
    a, b, message = MATMUL_ERRORS[case]
    check_raises(lambda lib: lib.ones(*a) @ lib.ones(*b), RuntimeError, re.escape(message))


def test_matmul_other_errors():
    check_raises(lambda lib: lib.ones(()) @ lib.ones(3), RuntimeError,
                 "both arguments to matmul need to be at least 1D, but they are 0D and 1D")
    check_raises(lambda lib: lib.ones(2, 2, dtype=lib.float32) @ lib.ones(2, 2, dtype=lib.float64), RuntimeError,
                 "expected m1 and m2 to have the same dtype, but got: float != double")


def test_linear_shape_error():
    check_raises(lambda lib: lib.F.linear(lib.ones(2, 3), lib.ones(4, 5)), RuntimeError,
                 re.escape("mat1 and mat2 shapes cannot be multiplied (2x3 and 5x4)"))


def test_view_errors():
    check_raises(lambda lib: lib.ones(2, 3).view(4), RuntimeError, re.escape("shape '[4]' is invalid for input of "
                                                                             "size 6"))
    check_raises(lambda lib: lib.ones(2, 3).reshape(5, -1), RuntimeError,
                 re.escape("shape '[5, -1]' is invalid for input of size 6"))
    check_raises(lambda lib: lib.ones(2, 3).view(-1, -1), RuntimeError, "only one dimension can be inferred")
    check_raises(lambda lib: lib.ones(2, 3).T.view(6), RuntimeError,
                 re.escape("view size is not compatible with input tensor's size and stride (at least one dimension "
                           "spans across two contiguous subspaces). Use .reshape(...) instead."))
    # the same transpose reshapes fine (a copy)
    assert AG.ones(2, 3).T.reshape(6).shape == (6,)


def test_expand_cat_stack_errors():
    check_raises(lambda lib: lib.ones(2, 3).expand(2, 4), RuntimeError,
                 re.escape("The expanded size of the tensor (4) must match the existing size (3) at non-singleton "
                           "dimension 1.  Target sizes: [2, 4].  Tensor sizes: [2, 3]"))
    check_raises(lambda lib: lib.ones(2, 3).expand(3), RuntimeError,
                 "the number of sizes provided \\(1\\) must be greater or equal to the number of dimensions in the "
                 "tensor \\(2\\)")
    check_raises(lambda lib: lib.cat([lib.ones(2, 3), lib.ones(2, 4)]), RuntimeError,
                 "Sizes of tensors must match except in dimension 0. Expected size 3 but got size 4 for tensor "
                 "number 1 in the list.")
    check_raises(lambda lib: lib.stack([lib.ones(2, 3), lib.ones(2, 4)]), RuntimeError,
                 re.escape("stack expects each tensor to be equal size, but got [2, 3] at entry 0 and [2, 4] at "
                           "entry 1"))
    check_raises(lambda lib: lib.ones(3).expand(-1, 3), RuntimeError,
                 re.escape("The expanded size of the tensor (-1) isn't allowed in a leading, non-existing dimension 0"))
    check_raises(lambda lib: lib.cat([lib.ones(2), lib.tensor(1.0)]), RuntimeError,
                 re.escape("zero-dimensional tensor (at position 1) cannot be concatenated"))
    check_raises(lambda lib: lib.ones(3).mT, RuntimeError,
                 "tensor.mT is only supported on matrices or batches of matrices. Got 1-D tensor.")
    check_raises(lambda lib: lib.ones(2, 3).permute(0, 1, 2), RuntimeError,
                 "number of dimensions in the tensor input does not match the length of the desired ordering")


# --------------------------------------------------------------------------- dims and indices
DIM_ERRORS = {
    "sum": (lambda lib: lib.ones(2, 3).sum(2), "[-2, 1], but got 2"),
    "sum tuple": (lambda lib: lib.ones(2, 3).sum((0, -3)), "[-2, 1], but got -3"),
    "mean": (lambda lib: lib.ones(2, 3).mean(-3), "[-2, 1], but got -3"),
    "max": (lambda lib: lib.ones(2, 3).max(5), "[-2, 1], but got 5"),
    "min": (lambda lib: lib.ones(2, 3).min(-4), "[-2, 1], but got -4"),
    "softmax": (lambda lib: lib.ones(2, 3).softmax(2), "[-2, 1], but got 2"),
    "log_softmax": (lambda lib: lib.ones(2, 3).log_softmax(-3), "[-2, 1], but got -3"),
    "unsqueeze": (lambda lib: lib.ones(2, 3).unsqueeze(3), "[-3, 2], but got 3"),
    "squeeze": (lambda lib: lib.ones(2, 3).squeeze(2), "[-2, 1], but got 2"),
    "transpose": (lambda lib: lib.ones(2, 3).transpose(0, 2), "[-2, 1], but got 2"),
    "permute": (lambda lib: lib.ones(2, 3).permute(0, 2), "[-2, 1], but got 2"),
    "flatten": (lambda lib: lib.ones(2, 3).flatten(3), "[-2, 1], but got 3"),
    "cat": (lambda lib: lib.cat([lib.ones(2), lib.ones(2)], 1), "[-1, 0], but got 1"),
    "stack": (lambda lib: lib.stack([lib.ones(2), lib.ones(2)], 2), "[-2, 1], but got 2"),
}


@pytest.mark.parametrize("case", list(DIM_ERRORS))
def test_dimension_out_of_range(case):
    fn, detail = DIM_ERRORS[case]
    check_raises(fn, IndexError, re.escape(f"Dimension out of range (expected to be in range of {detail})"))


def test_index_errors():
    check_raises(lambda lib: lib.ones(2, 3)[5], IndexError, "index 5 is out of bounds for dimension 0 with size 2")
    check_raises(lambda lib: lib.ones(2, 3)[0, 7], IndexError, "index 7 is out of bounds for dimension 1 with size 3")
    check_raises(lambda lib: lib.ones(2, 3)[[0, 5]], IndexError, "index 5 is out of bounds for dimension 0 with "
                                                                 "size 2")
    check_raises(lambda lib: lib.ones(2, 3)[0, 0, 0], IndexError, "too many indices for tensor of dimension 2")
    check_raises(lambda lib: lib.ones(2, 3)[lib.tensor(np.array([0.5]))], IndexError,
                 "tensors used as indices must be long, int, byte or bool tensors")
    check_raises(lambda lib: lib.ones(())[0], IndexError, "invalid index of a 0-dim tensor")


# --------------------------------------------------------------------------- devices
DEVICE_OPS = {
    "add": lambda a, b: a + b,
    "mul": lambda a, b: a * b,
    "matmul": lambda a, b: a @ b,
    "pow": lambda a, b: a ** b,
    "maximum": lambda a, b: ag.maximum(a, b),
    "where": lambda a, b: ag.where(ag.tensor([True, False], device=a.device), a, b),
    "cat": lambda a, b: ag.cat([a, b]),
    "stack": lambda a, b: ag.stack([a, b]),
    "linear": lambda a, b: AG.F.linear(a.view(1, 2), b.view(1, 2)),
    "mse_loss": lambda a, b: AG.F.mse_loss(a, b),
}


@pytest.mark.parametrize("case", list(DEVICE_OPS))
def test_mixed_devices(case):
    a = ag.ones(2, device="sim:0", requires_grad=True)
    b = ag.ones(2)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device, but found at least two "
                                           "devices, sim:0 and cpu!"):
        DEVICE_OPS[case](a, b)


def test_mixed_devices_exact_example():
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        ag.ones(2, device="sim:0") + ag.ones(2)
    # a scalar or a python number is fine on any device
    assert (ag.ones(2, device="sim:0") + 1).device == ag.device("sim:0")


def test_bad_device_string():
    with pytest.raises(RuntimeError, match="Expected one of cpu, sim, cuda device type at start of device string: "
                                           "tpu"):
        ag.ones(2).to("tpu")


# --------------------------------------------------------------------------- dtypes and grad
INT_REQUIRES_GRAD = {
    "tensor": lambda: ag.tensor([1, 2], requires_grad=True),
    "requires_grad_": lambda: ag.ones(2, dtype=ag.int64).requires_grad_(),
    "setter": lambda: setattr(ag.ones(2, dtype=ag.int32), "requires_grad", True),
    "arange": lambda: ag.arange(3, requires_grad=True),
    "zeros": lambda: ag.zeros(2, dtype=ag.int64, requires_grad=True),
    "bool": lambda: ag.tensor([True], requires_grad=True),
}


@pytest.mark.parametrize("case", list(INT_REQUIRES_GRAD))
def test_requires_grad_on_int_tensor(case):
    """torch 2.13 words the factories' refusal ("Only ... and complex dtype") apart from
    requires_grad_()'s ("only Tensors of floating point dtype"); both are kept."""
    with pytest.raises(RuntimeError, match="(?i)only Tensors of floating point (and complex )?dtype can require "
                                           "gradients"):
        INT_REQUIRES_GRAD[case]()


def test_requires_grad_on_int_tensor_torch_wording():
    """torch words it the same (its first letter has changed case across releases)."""
    torch = pytest.importorskip("torch", reason="needs torch: compares with PyTorch (pip install torch)")
    with pytest.raises(RuntimeError, match="(?i)only Tensors of floating point and complex dtype can require "
                                           "gradients"):
        torch.tensor([1, 2], requires_grad=True)


def test_loss_target_shape_errors():
    check_raises(lambda lib: lib.F.nll_loss(lib.ones(2, 3, 4), lib.tensor(np.zeros((2, 5), dtype=np.int64))),
                 RuntimeError, re.escape("Expected target size [2, 4], got [2, 5]"))


def test_misc_torch_errors():
    check_raises(lambda lib: lib.tensor(np.array([1, 2])).mean(), RuntimeError,
                 "mean\\(\\): could not infer output dtype. Input dtype must be either a floating point or complex "
                 "dtype. Got: Long")
    check_raises(lambda lib: lib.ones(2).item(), RuntimeError, "a Tensor with 2 elements cannot be converted to Scalar")
    check_raises(lambda lib: bool(lib.ones(2)), RuntimeError, "Boolean value of Tensor with more than one value is "
                                                              "ambiguous")
    check_raises(lambda lib: lib.ones(2, requires_grad=True).numpy(), RuntimeError,
                 re.escape("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead."))
    check_raises(lambda lib: (lib.ones(2, requires_grad=True) * 2).requires_grad_(False), RuntimeError,
                 "you can only change requires_grad flags of leaf variables.")
    check_raises(lambda lib: lib.F.nll_loss(lib.ones(2, 3), lib.ones(2, dtype=lib.float64)), RuntimeError,
                 "expected target dtype to be Long or Byte, but got Double")
    check_raises(lambda lib: lib.clamp(lib.ones(2)), RuntimeError,
                 "torch.clamp: At least one of 'min' or 'max' must not be None")


async def test_backward_errors_keep_torch_wording():
    x = ag.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
        await (x * 2).backward()
    with pytest.raises(RuntimeError, match="element 0 of tensors does not require grad and does not have a "
                                           "grad_fn"):
        await ag.ones(2).sum().backward()
    y = (x * x).sum()
    await y.backward()
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        await y.backward()
