"""A forgotten ``await`` never silently skips a backward (Note [Await or not] in graph/awaitable.py).

Every path a torch habit can take: a plain script (no loop: the call runs at once), an
``async def`` (the call starts in the background after two loop iterations; until it has
finished, the next use of what it produces raises and says to ``await``), a loop that stops
under it, and a notebook cell that ends with the call.
"""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
import textwrap

import anyio
import numpy as np
import pytest
from helpers import Boom

import asyncgrad as ag
from asyncgrad.graph import awaitable

AWAIT_IT = "Write 'await loss.backward()'"


@pytest.fixture(autouse=True)
def _nothing_left_pending():
    """Each test settles what it started: a leftover pending call would fail the next test's ``.grad``."""
    yield
    left = set(awaitable.pending)
    awaitable.pending.clear()
    assert not left, f"left pending: {left}"


def _cube_sum(seed: int = 0) -> tuple[ag.Tensor, ag.Tensor, np.ndarray]:
    """A leaf, ``sum(x**3)`` and its exact gradient ``3 x**2`` (float64)."""
    data = np.random.default_rng(seed).standard_normal((3, 2))
    x = ag.tensor(data, requires_grad=True)
    return x, (x * x * x).sum(), 3 * data**2


class Held(ag.Function):
    """Identity whose ``async def`` backward waits for ``gate``: keeps a backward running at will."""

    gate: asyncio.Event

    @staticmethod
    def forward(ctx, x):
        return x * 1

    @staticmethod
    async def backward(ctx, g):
        await Held.gate.wait()
        return g


def _line_of(fragment: str) -> int:
    """Line number in this file of the first line containing ``fragment`` (for the 'at file:line' part)."""
    with open(__file__) as f:
        return next(i for i, line in enumerate(f, 1) if fragment in line)


async def _iterations(n: int = 2) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


async def _settled(call: awaitable.EngineCall) -> None:
    """Let the loop run until an un-awaited call has finished or failed in the background."""
    for _ in range(2000):
        if call._state not in (awaitable.FRESH, awaitable.BACKGROUND):
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"still {call!r} after 10 s")


# ============================================================================ a plain script (no loop)
SCRIPT = textwrap.dedent("""
    import asyncio, json
    import numpy as np
    import asyncgrad as ag

    async def await_it(call):
        return await call

    data = np.arange(6.0).reshape(3, 2) / 5
    x = ag.tensor(data, requires_grad=True)
    call = (x * x * x).sum().backward()            # no await: a torch habit
    out = {"repr": repr(call), "grad_ok": bool(np.allclose(x.grad.numpy(), 3 * data**2))}

    y = ag.tensor(data, requires_grad=True)
    g = ag.grad((y * y).sum(), y)
    out["grad_repr"] = repr(g)
    try:
        g[0]
    except TypeError as e:
        out["index"] = str(e)
    out["y_grad_untouched"] = y.grad is None
    out["awaited_later_ok"] = bool(np.allclose(asyncio.run(await_it(g))[0].numpy(), 2 * data))
    print(json.dumps(out))
""")


def _run_script(source: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, timeout=60)


def test_plain_script_backward_runs_at_once_and_grad_result_says_await():
    done = _run_script(SCRIPT)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["repr"] == "<asyncgrad backward: finished>"
    assert out["grad_ok"]
    assert out["grad_repr"] == "<asyncgrad grad: finished>"
    assert out["index"] == ("'grad()' returns an awaitable, not its result: write 'await ag.grad(...)' (in code that "
                            "cannot await, such as a plain script or a plain-def backward, use ag.grad_sync(...))")
    assert out["y_grad_untouched"]
    assert out["awaited_later_ok"]  # the finished call still gives its result to an await
    assert "never awaited" not in done.stderr


def test_no_loop_in_this_thread_runs_at_once():
    """The same without a subprocess: a sync test has no running loop; errors come from the call itself."""
    x, loss, expected = _cube_sum()
    call = loss.backward()
    assert repr(call) == "<asyncgrad backward: finished>"
    np.testing.assert_allclose(x.grad.numpy(), expected)
    x2, loss2, _ = _cube_sum()
    loss2.backward()
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        loss2.backward()


def test_script_whose_loop_stops_under_it_warns_at_exit():
    """``asyncio.run(main())`` whose main ends right after an un-awaited backward: a warning names the line."""
    done = _run_script(textwrap.dedent("""
        import asyncio
        import asyncgrad as ag
        x = ag.ones(3, requires_grad=True)
        async def main():
            (x * x).sum().backward()
        asyncio.run(main())
        print("script went on")
    """))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "script went on\n"
    assert "<string>:6: RuntimeWarning: backward() called without 'await' never finished: its event loop stopped" \
        in done.stderr


# ============================================================================ async def
async def test_fresh_call_then_grad_read_raises_and_closes_it():
    x, loss, expected = _cube_sum()
    call = loss.backward(retain_graph=True)  # forgotten await
    assert repr(call) == "<asyncgrad backward: not started yet: await it (left alone, it starts in the background)>"
    with pytest.raises(RuntimeError) as info:
        _ = x.grad
    line = _line_of("call = loss.backward(retain_graph=True)  # forgotten await")
    assert str(info.value).startswith(
        f"reading .grad: backward() was called without 'await' at {__file__}:{line} and has not run "
        f"(it never will: it is closed now). {AWAIT_IT}")
    assert repr(call) == "<asyncgrad backward: closed without running>"
    assert x.grad is None  # reported once; it never ran, and never will
    await _iterations(3)
    assert x.grad is None
    with pytest.raises(RuntimeError, match="was never awaited and was closed without running"):
        await call
    await loss.backward()
    np.testing.assert_allclose(x.grad.numpy(), expected)


@pytest.mark.parametrize("use", ["step", "zero_grad"])
async def test_fresh_call_then_optimizer_raises(use):
    x, loss, _ = _cube_sum()
    before = x.detach().numpy().copy()
    opt = ag.optim.SGD([x], lr=0.1)
    loss.backward()
    with pytest.raises(RuntimeError, match=rf"^optimizer\.{use}\(\): backward\(\) was called without 'await' .* "
                                           r"and has not run"):
        getattr(opt, use)()
    np.testing.assert_array_equal(x.detach().numpy(), before)


async def test_forgotten_ag_grad_indexed_or_unpacked_says_await_and_closes_the_call():
    """Nothing could read a fresh call's result once its tuple was asked for: it is closed, never run."""
    for attempt in (lambda call: call[0], lambda call: len(call), lambda call: [*call]):
        x, loss, expected = _cube_sum()
        call = ag.grad(loss, x)
        with pytest.raises(TypeError) as info:
            attempt(call)
        assert str(info.value) == (
            "'grad()' returns an awaitable, not its result: write 'await ag.grad(...)' (in code that cannot await, "
            "such as a plain script or a plain-def backward, use ag.grad_sync(...)); this call was closed without "
            "running")
        assert repr(call) == "<asyncgrad grad: closed without running>"
        assert not awaitable.pending
        with pytest.raises(RuntimeError, match=r"^this grad\(\) was never awaited and was closed without running"):
            await call
        (g,) = await ag.grad(loss, x)  # the graph is intact: the closed call never ran
        np.testing.assert_allclose(g.numpy(), expected)


async def test_a_call_awaited_later_gives_its_result():
    x, loss, expected = _cube_sum()
    call = ag.grad(loss, x)
    await _iterations(3)
    assert "running in the background" in repr(call) or "finished" in repr(call)
    (g,) = await call
    np.testing.assert_allclose(g.numpy(), expected)
    assert repr(call) == "<asyncgrad grad: finished>"


async def test_left_alone_it_runs_in_the_background_and_every_next_use_raises_until_done():
    Held.gate = asyncio.Event()
    x, _, expected = _cube_sum()
    other, other_loss, _ = _cube_sum(1)
    opt = ag.optim.SGD([x], lr=0.1)
    loss = Held.apply(x * x * x).sum()
    call = loss.backward()  # held in the background
    await _iterations(3)
    assert repr(call) == "<asyncgrad backward: running in the background (not awaited)>"
    line = _line_of("call = loss.backward()  # held in the background")
    for what, use in [("reading .grad", lambda: x.grad), ("optimizer.step()", opt.step),
                      ("optimizer.zero_grad()", opt.zero_grad), ("backward()", other_loss.backward)]:
        with pytest.raises(RuntimeError) as info:
            use()
        assert str(info.value) == (
            f"{what}: backward() was called without 'await' at {__file__}:{line} and is still running in the "
            f"background. {AWAIT_IT} / 'await ag.backward(...)' so that its gradients are complete when the next "
            f"line runs.")
    Held.gate.set()
    await _settled(call)
    assert repr(call) == "<asyncgrad backward: finished>"
    np.testing.assert_allclose(x.grad.numpy(), expected)  # it ran: nothing skipped
    await other_loss.backward()
    assert other.grad is not None


async def test_awaiting_a_background_call_adopts_it():
    Held.gate = asyncio.Event()
    x, _, expected = _cube_sum()
    call = Held.apply(x * x * x).sum().backward()
    await _iterations(3)
    assert "running in the background" in repr(call)
    asyncio.get_running_loop().call_later(0.01, Held.gate.set)
    assert await call is None
    np.testing.assert_allclose(x.grad.numpy(), expected)


async def test_gather_create_task_and_task_groups_drive_calls_they_are_given():
    (x, a, ea), (y, b, eb) = _cube_sum(0), _cube_sum(1)
    await asyncio.gather(a.backward(retain_graph=True), b.backward(retain_graph=True))
    np.testing.assert_allclose(x.grad.numpy(), ea)
    np.testing.assert_allclose(y.grad.numpy(), eb)
    await asyncio.create_task(a.backward(retain_graph=True))
    await asyncio.wait_for(b.backward(retain_graph=True), 30)
    async with anyio.create_task_group() as tg:
        tg.start_soon(a.backward)
        tg.start_soon(b.backward)
    np.testing.assert_allclose(x.grad.numpy(), 3 * ea)
    np.testing.assert_allclose(y.grad.numpy(), 3 * eb)


async def test_fresh_call_then_awaited_backward_both_run():
    """The next backward leaves a fresh call alone (gather creates both before either starts): it then runs."""
    (x, a, ea), (y, b, eb) = _cube_sum(0), _cube_sum(1)
    a.backward()
    await b.backward()
    await _iterations(5)
    np.testing.assert_allclose(x.grad.numpy(), ea)
    np.testing.assert_allclose(y.grad.numpy(), eb)


async def test_failing_call_is_reported_through_the_handler_and_at_next_use():
    reported = []
    asyncio.get_running_loop().set_exception_handler(lambda loop, context: reported.append(context))
    x = ag.ones(3, requires_grad=True)
    call = Boom.apply(x).sum().backward()
    await _settled(call)
    assert repr(call) == "<asyncgrad backward: failed: ValueError('boom in backward')>"
    line = _line_of("call = Boom.apply(x).sum().backward()")
    assert [c["message"] for c in reported] == [
        f"backward() called without 'await' at {__file__}:{line} failed in the background; the next use of .grad, "
        f"optimizer.step() or backward() will raise it"]
    assert isinstance(reported[0]["exception"], ValueError)
    with pytest.raises(RuntimeError, match="and failed in the background") as info:
        _ = x.grad
    assert isinstance(info.value.__cause__, ValueError) and str(info.value.__cause__) == "boom in backward"
    assert x.grad is None  # reported once


async def test_inside_a_backward_the_checks_stand_aside():
    """A hook reading ``.grad`` while an un-awaited call is fresh: the engine's own code is exempt."""
    x, loss, expected = _cube_sum()
    seen = []
    y, other, _ = _cube_sum(1)
    x.register_hook(lambda g: seen.append(y.grad))
    other.backward()  # fresh while the next backward runs
    await loss.backward()
    assert seen == [None]
    await _iterations(5)
    np.testing.assert_allclose(x.grad.numpy(), expected)
    assert y.grad is not None


# ============================================================================ a loop that stopped
@pytest.mark.parametrize("iterations", [0, 1, 5])
def test_loop_stopped_before_it_finished(iterations, caplog):
    Held.gate = asyncio.Event()
    x = ag.ones(3, requires_grad=True)

    async def main():
        call = Held.apply(x).sum().backward()
        await _iterations(iterations)
        return call

    with caplog.at_level(logging.ERROR, logger="asyncio"):
        call = asyncio.run(main())
    with pytest.raises(RuntimeError, match=r"^reading \.grad: backward\(\) was called without 'await' at .* in an "
                                           r"event loop that stopped before it finished, so its gradients are "
                                           r"missing\."):
        _ = x.grad
    assert x.grad is None
    if "cancelled" in repr(call):  # the loop's shutdown cancelled it: said through the loop's handler too
        assert "was cancelled before it finished (its event loop is shutting down)" in caplog.text


# ============================================================================ a notebook
def test_notebook_cell_ending_with_backward():
    """What a reader sees: the call's repr as the cell's output, then the right ``.grad`` in the next cell
    (or, if the background run has not finished yet, an error saying so)."""
    for module in ("nbclient", "nbformat", "ipykernel"):
        pytest.importorskip(module, reason=f"executing a notebook needs {module} (the 'test' extra)")
    import importlib.util
    from pathlib import Path

    import nbclient
    from nbformat.v4 import new_code_cell, new_notebook

    path = Path(__file__).resolve().parents[2] / "notebooks" / "run_all.py"
    spec = importlib.util.spec_from_file_location("notebooks_run_all", path)
    run_all = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run_all)
    cells = [
        "import numpy as np\nimport asyncgrad as ag\nx = ag.ones(2, 2, requires_grad=True)\n"
        "loss = ((x + 2) * (x + 2) * 3).mean()\nloss.backward()",
        "x.grad",
        "await Out[1]  # the call the first cell showed: awaiting it waits for it\nx.grad",
        "y = ag.ones(3, requires_grad=True)\n(y * y).sum().backward()\ny.grad",
        "ag.grad((x * x).sum(), x)[0]",
        "await (y * y).sum().backward()\ny.grad",
    ]
    notebook = new_notebook(cells=[new_code_cell(c) for c in cells])
    with run_all.this_interpreter_kernel() as kernel:
        nbclient.NotebookClient(notebook, kernel_name=kernel, timeout=60, allow_errors=True).execute()
    # Each cell's result or error (a stream output, a warning on stderr say, may come before it).
    outs = [next((o for o in cell.outputs if o["output_type"] in ("execute_result", "error")), cell.outputs)
            for cell in notebook.cells]
    assert outs[0]["data"]["text/plain"] == (
        "<asyncgrad backward: not started yet: await it (left alone, it starts in the background)>"), outs[0]
    # By the next cell the background run has normally finished; on a loaded machine the kernel can
    # read the next request first, and then .grad says the call is still running (never a stale value).
    if outs[1]["output_type"] == "error":
        assert outs[1]["evalue"].startswith("reading .grad: backward() was called without 'await' at "), outs[1]
        assert "is still running in the background" in outs[1]["evalue"]
    else:
        assert outs[1]["data"]["text/plain"] == "tensor([[4.5000, 4.5000],\n        [4.5000, 4.5000]])", outs[1]
    assert outs[2]["data"]["text/plain"] == "tensor([[4.5000, 4.5000],\n        [4.5000, 4.5000]])", outs[2]
    assert outs[3]["output_type"] == "error" and outs[3]["ename"] == "RuntimeError", outs[3]
    assert outs[3]["evalue"].startswith("reading .grad: backward() was called without 'await' at ")
    assert "and has not run (it never will: it is closed now)" in outs[3]["evalue"]
    assert outs[4]["ename"] == "TypeError", outs[4]
    assert outs[4]["evalue"].startswith("'grad()' returns an awaitable, not its result: write 'await ag.grad(...)'")
    assert outs[4]["evalue"].endswith("; this call was closed without running")
    assert outs[5].get("data", {}).get("text/plain") == "tensor([2., 2., 2.])", outs[5]
