"""F.batch_norm of an input with no elements, as torch's: the input's clone (times ``weight[0]``,
plus ``bias[0]`` where given), no statistic read, checked or moved, torch's errors where weight[0]
does not exist or a training batch has one value per channel; on cpu and sim:0 (an op module)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import ag_tensor, check_op, check_raises

import asyncgrad as ag


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("shape", [(0,), (0, 3), (0, 2, 4), (2, 0, 3)])
async def test_an_empty_input_is_cloned(shape, training):
    await check_op(lambda lib, x: lib.nn.functional.batch_norm(x, None, None, training=training), shape,
                   name="CloneBackward0")


async def test_weight_and_bias_scale_and_shift_by_their_first_entry():
    fn = lambda lib, x, w, b: lib.nn.functional.batch_norm(x, None, None, w, b, training=True)  # noqa: E731
    await check_op(fn, (0, 2, 4), (2,), (2,), name="AddBackward0")
    await check_op(lambda lib, x, w: lib.nn.functional.batch_norm(x, None, None, w, training=False), (0, 3), (3,),
                   name="MulBackward0")


def test_the_running_statistics_are_neither_checked_nor_moved():
    mean, var = ag_tensor(np.zeros(5)), ag_tensor(np.ones(5))  # five entries for three channels: not read
    out = ag.nn.functional.batch_norm(ag_tensor(np.zeros((0, 3))), mean, var, training=True, momentum=0.5)
    assert out.shape == (0, 3) and mean.cpu().numpy().tolist() == [0.0] * 5 and var.cpu().numpy().tolist() == [1.0] * 5


def test_refusals_are_torchs():
    check_raises(lambda lib: lib.nn.functional.batch_norm(lib.ones(0, dtype=lib.float64), None, None,
                                                          lib.ones(0, dtype=lib.float64), training=True),
                 IndexError, r"select\(\): index 0 out of range for tensor of size \[0\] at dimension 0")
    check_raises(lambda lib: lib.nn.functional.batch_norm(lib.ones(1), None, None, training=True), ValueError,
                 "Expected more than 1 value per channel when training")
    check_raises(lambda lib: lib.nn.functional.batch_norm(lib.ones(3), None, None, training=True), IndexError,
                 r"Dimension out of range \(expected to be in range of \[-1, 0\], but got 1\)")
