"""Texts as torch prints them: tensor reprs character for character (``asyncgrad`` for
``torch`` in names) and ``asyncgrad.Size``."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest
from conftest import TORCH_NEEDED

import asyncgrad as ag

# Each case builds a tensor with either library (``L`` is asyncgrad or torch).
REPRS = {
    "leaf requiring grad": lambda L: L.tensor([1.0], requires_grad=True),
    "4 decimals": lambda L: L.tensor([1.0, 2.5]),
    "integers": lambda L: L.tensor([1, 2, 3]),
    "bools": lambda L: L.tensor([True, False]),
    "0-d float": lambda L: L.tensor(3.0),
    "0-d int": lambda L: L.tensor(3),
    "matrix": lambda L: L.tensor([[1.0, 2.0], [3.0, 4.0]]),
    "large ratio": lambda L: L.tensor([1e10, 1.0]),
    "small value": lambda L: L.tensor([1e-5, 1.0]),
    "float64": lambda L: L.tensor([1.0, 2.0], dtype=L.float64),
    "int32": lambda L: L.tensor([1, 2], dtype=L.int32),
    "grad_fn": lambda L: L.tensor([1.0, 2.0], requires_grad=True) * 2,
    "empty": lambda L: L.tensor([]),
    "empty 2-d": lambda L: L.zeros(0, 3),
    "empty int": lambda L: L.zeros(0, dtype=L.int64),
    "empty float64 2-d": lambda L: L.zeros(2, 0, dtype=L.float64),
    "nan and inf": lambda L: L.tensor([float("nan"), float("inf"), -float("inf"), 1.5]),
    "float16": lambda L: L.tensor([1.0, 2.0], dtype=L.float16),
    "uint8": lambda L: L.tensor([1, 2], dtype=L.uint8),
    "summarized": lambda L: L.arange(2000.0),
    "summarized int matrix": lambda L: L.arange(3000).reshape(3, 1000),
    "aligned": lambda L: L.tensor([0.1, 100.0]),
    "big": lambda L: L.tensor([123456.0, 1.0]),
    "negative": lambda L: L.tensor([-1.0, 2.0]),
    "float64 requiring grad": lambda L: L.tensor([1.0, 2.0], dtype=L.float64, requires_grad=True),
    "0-d float64": lambda L: L.tensor(2.5, dtype=L.float64),
    "tiny": lambda L: L.tensor([1e-10]),
    "negative zero": lambda L: L.tensor([1.0, -0.0]),
    "rounded": lambda L: L.tensor([1.123456789]),
    "wrapped lines": lambda L: L.arange(30.0).reshape(3, 10) * 1.5,
    "million": lambda L: L.tensor([1000000.0]),
    "nested bool": lambda L: L.tensor([[True]]),
    "3-d": lambda L: L.arange(8).reshape(2, 2, 2),
    "sum": lambda L: L.tensor([1.5, 2.0], requires_grad=True).sum(),
}


@pytest.fixture
def torch32():
    torch = pytest.importorskip("torch", reason=TORCH_NEEDED)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float32)  # asyncgrad's default too
    yield torch
    torch.set_default_dtype(previous)


@pytest.mark.parametrize("name", list(REPRS))
def test_repr_is_torchs(torch32, name):
    expected = repr(REPRS[name](torch32)).replace("torch.", "asyncgrad.")
    assert repr(REPRS[name](ag)) == expected


def test_repr_with_float64_default(torch32):
    ag.set_default_dtype(ag.float64)  # conftest restores it
    torch32.set_default_dtype(torch32.float64)
    for make in (lambda L: L.tensor([1.0, 2.0]), lambda L: L.tensor([1.0], dtype=L.float32),
                 lambda L: L.zeros(0, dtype=L.float32)):
        assert repr(make(ag)) == repr(make(torch32)).replace("torch.", "asyncgrad.")


def test_repr_on_another_device():
    assert repr(ag.tensor([1.0, 2.0], device="sim:0")) == "tensor([1., 2.], device='sim:0')"


def test_size_is_torchs(torch32):
    size = ag.Size([2, 3])
    assert repr(size) == str(size) == repr(torch32.Size([2, 3])).replace("torch.", "asyncgrad.")
    assert size == (2, 3) and (2, 3) == size and size != [2, 3]
    assert hash(size) == hash((2, 3))
    assert size.numel() == 6 and ag.Size().numel() == 1 and ag.Size([0, 4]).numel() == 0
    assert isinstance(size[0:1], ag.Size) and repr(size[0:1]) == "asyncgrad.Size([2])"
    assert isinstance(size + (4,), ag.Size) and size + (4,) == (2, 3, 4)
    assert isinstance((1,) + size, ag.Size) and (1,) + size == (1, 2, 3)
    assert size[-1] == 3 and isinstance(size[0], int)
    assert ag.Size(np.array([2, 3])) == (2, 3) and type(ag.Size(np.array([2]))[0]) is int
    assert repr(ag.Size([])) == "asyncgrad.Size([])"
    assert pickle.loads(pickle.dumps(size)) == size


def test_size_refuses_what_torch_refuses(torch32):
    with pytest.raises(TypeError) as theirs:
        torch32.Size([1.5])
    with pytest.raises(TypeError) as mine:
        ag.Size([1.5])
    assert str(mine.value) == str(theirs.value).replace("torch.", "asyncgrad.")


def test_shape_and_size_are_sizes():
    x = ag.zeros(2, 3)
    assert type(x.shape) is ag.Size and type(x.size()) is ag.Size
    assert x.shape == (2, 3) and x.size() == x.shape and x.size(1) == 3
    assert repr(x.shape) == "asyncgrad.Size([2, 3])" and repr(ag.tensor(1.0).shape) == "asyncgrad.Size([])"
    assert x.reshape(x.shape[::-1]).shape == (3, 2)  # a Size is a shape argument like a tuple
    assert ag.zeros(x.shape).shape == (2, 3)


def test_repr_of_random_arrays_is_torchs(torch32):
    """Widths, signs, wrapping at 80 columns, summarizing above 1000 elements, all-zero tensors
    (whose formatter keeps width 1 for the line length, as torch's)."""
    rng = np.random.default_rng(0)
    arrays = [np.zeros((3, 30), np.float32), rng.standard_normal((4, 13)).astype(np.float32),
              rng.standard_normal((2, 3, 4)), (rng.standard_normal(2000) * 1e5).astype(np.float32),
              np.arange(-5, 100, dtype=np.int64).reshape(3, 35), rng.standard_normal((40, 40)).astype(np.float32),
              np.array([[1e-3, 1e3]], np.float32), np.array([True, False] * 30)]
    for array in arrays:
        assert repr(ag.tensor(array)) == repr(torch32.from_numpy(array)).replace("torch.", "asyncgrad.")


def test_parameter_repr_is_torchs(torch32):
    mine = repr(ag.nn.Parameter(ag.zeros(2, 3)))
    assert mine == repr(torch32.nn.Parameter(torch32.zeros(2, 3)))
    assert mine.startswith("Parameter containing:\ntensor([[0., 0., 0.],")


@pytest.mark.parametrize("anomaly", [False, True])
def test_modified_saved_tensor_message_as_torch(anomaly):
    """The version error names the node by its forward op ("output 0 of Exp", torch 2.13's
    ``forward_op_name``) and gives torch's hint for either anomaly mode."""
    torch = pytest.importorskip("torch", reason=TORCH_NEEDED)

    def run(L, backward):
        a = L.tensor([1.0, 2.0, 3.0], dtype=L.float32, requires_grad=True)
        with L.autograd.set_detect_anomaly(anomaly):
            c = (a * 2).exp()
            c.add_(1)
            with pytest.raises(RuntimeError) as info:
                backward(c.sum())
        return str(info.value)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # anomaly mode's warnings, and its forward traceback printed
        theirs = run(torch, lambda t: t.backward())
        ours = run(ag, ag.backward_sync)
    assert "which is output 0 of Exp, is at version 1; expected version 0 instead." in ours
    assert ours == theirs.replace("torch.autograd.", "ag.autograd.").replace("torch.", "asyncgrad.")
