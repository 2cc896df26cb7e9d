"""torch's own OpInfo samples on the ops that agree with torch today: a regression fails here.

``opinfo_agree.txt`` (beside this file) pins the OpInfos (``name`` or ``name.variant``) on which
``python -m benchmarks.opinfo_parity`` found asyncgrad agreeing with torch on every sample, forward
and gradient. This test runs the harness on them again, on the first ``SAMPLES`` samples of each
(all of them: ``python -m benchmarks.opinfo_parity --ops ...``; a few ops have hundreds); an op
that stops agreeing fails it, with the harness's reason and sample. An op that starts agreeing is
added to the file by hand (the harness's ``--json`` lists them).
"""

from __future__ import annotations

from pathlib import Path

import pytest

PINNED = Path(__file__).with_name("opinfo_agree.txt")
SAMPLES = 16


def pinned_ops() -> list[str]:
    lines = (line.split("#")[0].strip() for line in PINNED.read_text().splitlines())
    return [line for line in lines if line]


def test_pinned_list_is_sorted_and_unique():
    ops = pinned_ops()
    assert ops == sorted(set(ops)), "keep opinfo_agree.txt sorted, one op a line"


def test_pinned_ops_agree_with_torch():
    pytest.importorskip("torch", reason="needs torch: runs torch's OpInfo database (pip install torch)")
    pytest.importorskip("expecttest", reason="needs expecttest: torch's OpInfo database imports it")
    from benchmarks import opinfo_parity

    results = opinfo_parity.run(pinned_ops(), max_samples=SAMPLES)
    assert len(results) >= len(pinned_ops()), "an OpInfo of the pinned list is gone from torch's op_db"
    regressed = [f"{r.name}: {r.status}, {r.reason} [{r.sample}]" for r in results if r.status != "agree"]
    assert not regressed, "these ops no longer agree with torch:\n" + "\n".join(regressed)


def test_harness_tells_apart_agreeing_missing_and_out_of_scope_ops():
    """The classification itself: one op per class the harness can see without a broken op."""
    pytest.importorskip("torch", reason="needs torch: runs torch's OpInfo database (pip install torch)")
    pytest.importorskip("expecttest", reason="needs expecttest: torch's OpInfo database imports it")
    from benchmarks import opinfo_parity

    results = {r.name: r for r in opinfo_parity.run(["mul", "fft.fft", "polar", "native_layer_norm"])}
    assert results["mul"].status == "agree" and results["mul"].samples > 0
    assert results["fft.fft"].status == "out-of-scope"
    assert results["polar"].status == "out-of-scope"
    assert results["native_layer_norm"].status == "out-of-scope"
    summary = opinfo_parity.summary(list(results.values()))
    assert summary["in_scope"] == 1 and summary["agree"] == 1
    assert opinfo_parity.report(list(results.values())).startswith("agree 1 of 1 in scope (100.0%)")


def test_harness_finds_a_silent_difference(monkeypatch):
    """A wrong gradient is reported as ``wrong``, with the sample, not as agreement."""
    pytest.importorskip("torch", reason="needs torch: runs torch's OpInfo database (pip install torch)")
    pytest.importorskip("expecttest", reason="needs expecttest: torch's OpInfo database imports it")
    import asyncgrad as ag
    from benchmarks import opinfo_parity

    monkeypatch.setitem(opinfo_parity.AG_CALLS, "mul", ("mul", lambda f, a, b: f(a, b) * 1.5))
    (result,) = opinfo_parity.run(["mul"])
    assert result.status == "wrong" and "values differ" in result.reason and result.sample
    monkeypatch.setitem(opinfo_parity.AG_CALLS, "mul", ("mul", lambda f, a, b: f(a, b.detach() if isinstance(
        b, ag.Tensor) else b)))
    (result,) = opinfo_parity.run(["mul"])
    assert result.status == "wrong" and "gradient" in result.reason


def test_harness_reports_an_error_and_a_hang(monkeypatch):
    pytest.importorskip("torch", reason="needs torch: runs torch's OpInfo database (pip install torch)")
    pytest.importorskip("expecttest", reason="needs expecttest: torch's OpInfo database imports it")
    import time

    from benchmarks import opinfo_parity

    def boom(f, *args, **kwargs):
        raise IndexError("list index out of range")

    monkeypatch.setitem(opinfo_parity.AG_CALLS, "mul", ("mul", boom))
    (result,) = opinfo_parity.run(["mul"], max_samples=2)
    assert result.status == "raises" and result.reason == "IndexError: list index out of range"

    monkeypatch.setitem(opinfo_parity.AG_CALLS, "mul", ("mul", lambda f, *a, **k: time.sleep(30)))
    started = time.perf_counter()
    (result,) = opinfo_parity.run(["mul"], timeout=0.2, max_samples=2)
    assert result.status == "raises" and "no result after" in result.reason
    assert time.perf_counter() - started < 20


def test_harness_says_where_torch_is_the_one_that_is_wrong():
    """as_strided_scatter differs from torch on purpose, only in ``input``'s gradient (torch's is not
    the derivative: benchmarks/opinfo_parity.py's TORCH_IS_WRONG): classified apart, never agreement."""
    pytest.importorskip("torch", reason="needs torch: runs torch's OpInfo database (pip install torch)")
    pytest.importorskip("expecttest", reason="needs expecttest: torch's OpInfo database imports it")
    from benchmarks import opinfo_parity

    (result,) = opinfo_parity.run(["as_strided_scatter"], max_samples=SAMPLES)
    assert result.status == "torch-wrong", (result.status, result.reason, result.sample)
    assert result.reason.startswith("gradient 0:")
