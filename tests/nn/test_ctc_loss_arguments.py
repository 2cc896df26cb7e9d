"""Review fix: ctc_loss checks its arguments as torch's ctc_loss_allocate_outputs does (a length
past the targets or a blank out of range used to be read silently or fail inside asyncgrad)."""

from __future__ import annotations

import pytest
from helpers import check_raises

WHERE = r"\(while checking arguments for ctc_loss_allocate_outputs\)"


def _ctc(lib, targets, input_lengths, target_lengths, blank=0, dtype="float32"):
    log_probs = lib.zeros(3, 2, 4, dtype=getattr(lib, dtype))
    if dtype == "float32":
        log_probs = log_probs.log_softmax(2)
    return lib.nn.functional.ctc_loss(log_probs, lib.tensor(targets), input_lengths, target_lengths, blank=blank)


@pytest.mark.parametrize("args, exc, words", [
    (([[1, 2], [1, 1]], (3, 3), (2, 2), 4), RuntimeError, "blank must be in label range"),
    (([[1, 2], [1, 1]], (3, 3), (2, 2), -1), RuntimeError, "blank must be in label range"),
    (([[1, 2], [1, 1]], (3, 3), (3, 2)), RuntimeError,
     "Expected tensor to have size at least 3 at dimension 1, but got size 2 for argument #2 'targets' " + WHERE),
    (([1, 2, 3], (3, 3), (2, 2)), RuntimeError,
     "Expected tensor to have size 4 at dimension 0, but got size 3 for argument #2 'targets' " + WHERE),
    (([[1, 2], [1, 1]], (3, 3), (-1, 2)), RuntimeError,
     "Expected target_lengths to have value at least 0, but got value -1 " + WHERE),
    (([[1, 2], [1, 1]], (-1, 3), (1, 2)), RuntimeError,
     "Expected input_lengths to have value at least 0, but got value -1 " + WHERE),
    (([[1, 2], [1, 1]], (5, 3), (1, 2)), RuntimeError,
     "Expected input_lengths to have value at most 3, but got value 5 " + WHERE),
])
def test_ctc_loss_argument_errors_are_torchs(args, exc, words):
    check_raises(lambda lib: _ctc(lib, *args), exc, words)


def test_ctc_loss_refuses_integer_log_probs():
    check_raises(lambda lib: _ctc(lib, [[1, 2], [1, 1]], (3, 3), (2, 2), blank=9, dtype="int64"),
                 NotImplementedError, "\"ctc_loss_cpu\" not implemented for 'Long'")
