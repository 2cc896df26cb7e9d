"""The ``*_copy`` variants of the views against PyTorch on ``cpu`` and ``sim:0``: values,
gradients, torch's node names, and that each result owns its memory (Note [A view's copy])."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import DEVICE, check_gradgrad, check_op

import asyncgrad as ag

pytestmark = pytest.mark.parametrize("op_device", ["cpu", "sim:0"], indirect=True)

CASES = {
    "expand_copy": ((3, 1), lambda lib, x: lib.expand_copy(x, (2, 3, 4)), "ExpandBackward0_copy"),
    "diagonal_copy": ((3, 4, 5), lambda lib, x: lib.diagonal_copy(x, 1, -1, 0), "DiagonalBackward0_copy"),
    "alias_copy": ((2, 3), lambda lib, x: lib.alias_copy(x), "AliasBackward0_copy"),
    "as_strided_copy": ((3, 4), lambda lib, x: lib.as_strided_copy(x, (2, 2), (1, 2), 1), "AsStridedBackward0_copy"),
    "narrow_copy": ((3, 4), lambda lib, x: lib.narrow_copy(x, -1, 1, 2), "NarrowCopyBackward0"),
    "view_copy": ((3, 4), lambda lib, x: lib.view_copy(x, (2, -1)), "ViewBackward0_copy"),
    "permute_copy": ((2, 3, 4), lambda lib, x: lib.permute_copy(x, (2, 0, 1)), "PermuteBackward0_copy"),
    "squeeze_copy": ((3, 1, 2), lambda lib, x: lib.squeeze_copy(x, 1), "SqueezeBackward1_copy"),
    "unsqueeze_copy": ((3, 2), lambda lib, x: lib.unsqueeze_copy(x, -1), "UnsqueezeBackward0_copy"),
    "transpose_copy": ((3, 2, 4), lambda lib, x: lib.transpose_copy(x, 0, 2), "TransposeBackward0_copy"),
    "t_copy": ((3, 2), lambda lib, x: lib.t_copy(x), "TBackward0_copy"),
    "unfold_copy": ((5, 7), lambda lib, x: lib.unfold_copy(x, 1, 3, 2), "UnfoldBackward0_copy"),
}


@pytest.mark.parametrize("case", CASES)
async def test_copy_variant(case):
    shape, fn, name = CASES[case]
    out, _ = await check_op(fn, shape, name=name, torch_name=case != "unfold_copy" or True)
    assert out._base is None


async def test_multi_output_copies_and_second_order():
    for lib_fn, expected in ((lambda lib, x: lib.unbind_copy(x, 1)[1] * 2, "MulBackward0"),
                             (lambda lib, x: lib.split_with_sizes_copy(x, [1, 3], -1)[1] * 2, "MulBackward0")):
        await check_op(lib_fn, (3, 4), name=expected)
    pieces = ag.unbind_copy(ag.zeros(2, 3, device=DEVICE[0], requires_grad=True))
    assert [p.grad_fn.name() for p in pieces] == ["UnbindBackward0_copy"] * 2
    await check_gradgrad(lambda lib, x: lib.expand_copy(x * x, (2, 3)), (3,))


def test_a_copy_owns_its_memory():
    x = ag.tensor(np.arange(6.0).reshape(2, 3), device=DEVICE[0])
    y = ag.t_copy(x)
    x.add_(1)
    assert y._version == 0 and float(y[0, 0].item()) == 0.0
    assert ag.unfold_copy(ag.arange(5.0, device=DEVICE[0]), 0, 2, 2).tolist() == [[0.0, 1.0], [2.0, 3.0]]
