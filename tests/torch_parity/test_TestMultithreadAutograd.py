"""Port of torch's current ``test/test_autograd.py``, class TestMultithreadAutograd.

Source: the same copy as the TestAutograd ports (cyyever/pytorch at 0f3f4a53, test/test_autograd.py),
torch's order kept; each test names the torch test it ports in its docstring. Each thread calls the
blocking forms (``t.backward_sync()``, ``ag.autograd.grad_sync()``), as a torch user's threads call
``backward()``: the tests are plain ``def`` so that no event loop runs in the main thread meanwhile.

Left out (not ported), one line per family:
- ``test_dataparallel_saved_tensors_hooks``: nn.DataParallel;
- ``test_cat_stack_r_to_c``: complex inputs and forward-mode AD;
- ``test_custom_function_propagates_errors_from_device_thread``: CUDA;
- ``test_remove_obj_from_tls``: torch._C's thread-local stash.
"""

import sys
import threading
import traceback

import pytest
from autograd_port import assert_equal, double_default  # noqa: F401

import asyncgrad as ag
from asyncgrad import Function


class PropagatingThread(threading.Thread):
    """A thread whose exception is raised again by ``join`` (torch's helper)."""

    def run(self):
        self.exception = None
        self.ret = None
        try:
            self.ret = super().run()
        except Exception as e:
            self.exception = e

    def join(self, timeout=None):
        super().join(timeout)
        if self.exception:
            raise self.exception from self.exception
        return self.ret


def _run_py_multithread_fn(fn, args=(), num_threads=10, kwargs=None, pass_idx=False):
    threads = []
    for idx in range(num_threads):
        p = PropagatingThread(target=fn, args=((idx, *args) if pass_idx else args))
        p.start()
        threads.append(p)
    for p in threads:
        p.join()


def test_multithreaded_exception_propagation():
    """Port of TestMultithreadAutograd.test_multithreaded_exception_propagation."""
    def fn():
        raise AssertionError("from a child thread")

    with pytest.raises(AssertionError):
        _run_py_multithread_fn(fn)


def test_simple_backward():
    """Port of TestMultithreadAutograd.test_simple_backward."""
    def train_fn():
        x = ag.ones(5, 5, requires_grad=True)
        y = (x + 3) * (x + 4) * 0.5
        y.sum().backward_sync()
        assert_equal(x.grad, x + 3.5)

    _run_py_multithread_fn(train_fn)


def test_simple_backward_same_input():
    """Port of TestMultithreadAutograd.test_simple_backward_same_input."""
    def train_fn_backward(x):
        y = (x + 3) * (x + 4) * 0.5
        y.sum().backward_sync()

    x = ag.ones(5, 5, requires_grad=True)
    _run_py_multithread_fn(train_fn_backward, (x,))
    assert_equal(x.grad, 10 * (x + 3.5))  # every thread accumulates into the shared leaf

    def train_fn_grad(x):
        y = (x + 3) * (x + 4) * 0.5
        grads = ag.autograd.grad_sync(y.sum(), x)
        assert len(grads) == 1
        assert_equal(grads[0], x + 3.5)

    _run_py_multithread_fn(train_fn_grad, (x,))


def test_multi_grad_all_hooks():
    """Port of TestMultithreadAutograd.test_multi_grad_all_hooks."""
    t1 = ag.rand(2, requires_grad=True)
    t2 = ag.rand(2, requires_grad=True)
    t3 = ag.rand(2, requires_grad=True)
    t4 = ag.rand(2, requires_grad=True)
    state = {"res": None}
    count = [0]
    hook_lock = threading.Lock()

    def hook(grads):
        with hook_lock:
            count[0] += 1
            grad_is_none = [g is not None for g in grads]
            if state["res"] is None:
                state["res"] = grad_is_none
            else:
                assert state["res"] == grad_is_none

    handle = ag.autograd.graph.register_multi_grad_hook((t1, t2, t3, t4), hook)
    out = (t2 * t3).sum()

    def backward_retain_graph(out, t2, t3):
        out.backward_sync(inputs=(t2, t3), retain_graph=True)

    _run_py_multithread_fn(backward_retain_graph, (out, t2, t3), num_threads=5)
    assert count[0] == 5
    assert state["res"] == [False, True, True, False]

    # one hook left partially applied: the backward that raises never completes it
    state["res"] = None
    count = [0]
    err_count = [0]
    bw_count = [0]
    bw_count_lock = threading.Lock()
    err_count_lock = threading.Lock()

    class Func(Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, gO):
            with bw_count_lock:
                bw_count[0] += 1
                if bw_count[0] == 1:
                    raise RuntimeError("error message")
                return gO

    out = (Func.apply(t2) * t3).sum()

    def backward_retain_graph2(out, t2, t3):
        try:
            out.backward_sync(inputs=(t2, t3), retain_graph=True)
        except RuntimeError:
            with err_count_lock:
                err_count[0] += 1

    _run_py_multithread_fn(backward_retain_graph2, (out, t2, t3), num_threads=5)
    assert count[0] == 4
    assert err_count[0] == 1
    assert state["res"] == [False, True, True, False]
    handle.remove()


def test_multi_grad_any_hooks():
    """Port of TestMultithreadAutograd.test_multi_grad_any_hooks."""
    t1 = ag.rand(2, requires_grad=True)
    t2 = ag.rand(2, requires_grad=True)
    t3 = ag.rand(2, requires_grad=True)
    t4 = ag.rand(2, requires_grad=True)
    state = {"res": None}
    count = [0]
    hook_lock = threading.Lock()

    def hook(grad):
        with hook_lock:
            count[0] += 1
            if state["res"] is None:
                state["res"] = "foo"
            else:
                assert state["res"] == "foo"

    ag.autograd.graph.register_multi_grad_hook((t1, t2, t3, t4), hook, mode="any")
    out = (t2 * t3).sum()

    def backward_retain_graph(out, t2, t3):
        out.backward_sync(inputs=(t2, t3), retain_graph=True)

    _run_py_multithread_fn(backward_retain_graph, (out, t2, t3), num_threads=5)
    assert count[0] == 5
    assert state["res"] == "foo"

    state["res"] = None
    count[0] = 0
    err_count = [0]
    bw_count = [0]
    bw_count_lock = threading.Lock()
    err_count_lock = threading.Lock()

    class Func(Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, gO):
            with bw_count_lock:
                bw_count[0] += 1
                if bw_count[0] == 1:
                    raise RuntimeError("error message")
                return gO

    out = (Func.apply(t2) * t3).sum()

    def backward_retain_graph2(out, t2, t3):
        try:
            out.backward_sync(inputs=(t2, t3), retain_graph=True)
        except RuntimeError:
            with err_count_lock:
                err_count[0] += 1

    _run_py_multithread_fn(backward_retain_graph2, (out, t2, t3), num_threads=5)
    # the hook runs before the custom backward: all 5 threads count
    assert count[0] == 5
    assert err_count[0] == 1
    assert state["res"] == "foo"


def test_python_thread_in_middle():
    """Port of TestMultithreadAutograd.test_python_thread_in_middle."""
    success_vs_raises = [0, 0]
    lock = threading.Lock()

    def train_fn_no_retain_graph(x):
        y = x + x**2
        try:
            y.sum().backward_sync()
            with lock:
                success_vs_raises[0] += 1
        except RuntimeError as error:
            with lock:
                success_vs_raises[1] += 1
            assert "Specify retain_graph=True" in str(error)

    x_no_retain = ag.ones(5, 5, requires_grad=True)
    y_no_retain = x_no_retain + x_no_retain**2
    _run_py_multithread_fn(train_fn_no_retain_graph, (y_no_retain,), num_threads=5)
    assert success_vs_raises[0] >= 1

    def train_fn_retain_graph(x):
        y = x + x**2
        y.sum().backward_sync(retain_graph=True)

    x_retain = ag.ones(5, 5, requires_grad=True)
    y_retain = x_retain + x_retain**2
    _run_py_multithread_fn(train_fn_retain_graph, (y_retain,), num_threads=5)
    assert_equal(x_retain.grad, 5 * (4 * x_retain**3 + 6 * (x_retain**2) + 4 * x_retain + 1))


def test_preserve_backtrace():
    """Port of TestMultithreadAutograd.test_preserve_backtrace."""
    class Foo(Function):
        @staticmethod
        def forward(ctx, input):
            return input

        @staticmethod
        def backward(ctx, *grad):
            raise ValueError("something")

    t = ag.rand(10, requires_grad=True)
    try:
        Foo.apply(t).sum().backward_sync()
    except Exception:
        tb = sys.exc_info()[2]
        tb_str = "\n".join(traceback.format_tb(tb))
        assert 'raise ValueError("something")' in tb_str
    else:
        pytest.fail("the backward did not raise")


def test_set_multithreading_enabled_as_context_manager_and_function():
    """Port of TestMultithreadAutograd.test_set_multithreading_enabled_as_context_manager_and_function."""
    autograd = ag.autograd
    with autograd.set_multithreading_enabled(False):
        assert not autograd.is_multithreading_enabled()
    assert autograd.is_multithreading_enabled()
    with autograd.set_multithreading_enabled(True):
        assert autograd.is_multithreading_enabled()
    assert autograd.is_multithreading_enabled()
    with autograd.set_multithreading_enabled(False):
        autograd.set_multithreading_enabled(True)
        assert autograd.is_multithreading_enabled()
    assert autograd.is_multithreading_enabled()
    autograd.set_multithreading_enabled(False)
    assert not autograd.is_multithreading_enabled()
    autograd.set_multithreading_enabled(True)
    assert autograd.is_multithreading_enabled()
