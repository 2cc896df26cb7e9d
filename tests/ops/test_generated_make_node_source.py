"""A node class's generated ``make_node`` shows its source (Note [A generated make_node shows its
source] in ops/_node.py): a failure while a node is made points at a named file and a line that
tracebacks print, and ``make_node_source`` returns the whole function."""

import linecache
import traceback

import pytest

import asyncgrad as ag
from asyncgrad.ops._node import make_node_source
from asyncgrad.ops.elementwise import HypotBackward0


def test_the_source_of_a_class_s_make_node():
    source = make_node_source(HypotBackward0)
    assert source.startswith("def make_node(")
    assert "node.a_shape, node.b_shape, = fields" in source  # the class's own fields, one assignment
    compile(source, "<check>", "exec")


def test_a_failure_while_a_node_is_made_shows_the_generated_line():
    class Refused(Exception):
        pass

    def pack(t):
        raise Refused("no packing")

    a = ag.randn(3, requires_grad=True)
    b = ag.randn(3, requires_grad=True)
    with pytest.raises(Refused) as info, ag.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        ag.hypot(a, b)
    frames = [(tb.tb_frame.f_code, tb.tb_lineno) for tb in _walk(info.value.__traceback__)]
    made = [(code, line) for code, line in frames if code.co_name == "make_node"]
    assert made, [code.co_name for code, _ in frames]
    code, line = made[0]
    assert code.co_filename == "<asyncgrad.ops._node make_node of asyncgrad.ops.elementwise.HypotBackward0>"
    assert "_save_inputs(cls, node, result, saved)" in linecache.getline(code.co_filename, line)
    printed = "".join(traceback.format_exception(info.value))
    assert "_save_inputs(cls, node, result, saved)" in printed


def _walk(tb):
    while tb is not None:
        yield tb
        tb = tb.tb_next
