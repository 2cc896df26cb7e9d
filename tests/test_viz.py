"""asyncgrad.viz.draw: the DOT source of the backward graph (rendering only where `dot` exists)."""

import re
import shutil
import sys

import pytest

import asyncgrad as ag
from asyncgrad import viz

pytest.importorskip("graphviz")


def _seed_graph():
    x = ag.ones(2, 2, requires_grad=True)
    y = x + 2
    z = y * y * 3
    return x, z.mean()


def _edges(source):
    return re.findall(r"(n\d+) -> (n\d+) \[label=(\d+)\]", source)


def test_draw_names_every_node_once_and_labels_edges_with_input_nr():
    _, out = _seed_graph()
    source = viz.draw(out).source
    for name in ("MeanBackward0", "MulBackward0", "AddBackward0"):
        assert f"label={name}" in source
    assert source.count("label=MulBackward0") == 2
    assert source.count("AccumulateGrad") == 1
    assert '"AccumulateGrad\\n(2, 2)"' in source
    edges = _edges(source)
    assert len(edges) == 5
    assert edges.count(("n2", "n3", "0")) == 2, "y * y feeds the same AddBackward0 twice"


def test_edge_labels_are_the_input_nr_of_the_next_node():
    class TwoOutputs(ag.Node):
        __slots__ = ()

    producer = TwoOutputs()
    consumer = ag.Node((ag.Edge(producer, 1), ag.Edge(None, 0), ag.Edge(producer, 0)))
    source = viz.draw(consumer).source
    assert "label=TwoOutputs" in source
    assert sorted(_edges(source)) == [("n0", "n1", "0"), ("n0", "n1", "1")]


def test_draw_accepts_a_node_and_a_leaf():
    x, out = _seed_graph()
    assert "MulBackward0" in viz.draw(out.grad_fn.next_functions[0][0]).source
    leaf_source = viz.draw(x).source
    assert "AccumulateGrad" in leaf_source and "->" not in leaf_source


def test_draw_rejects_what_has_no_graph():
    with pytest.raises(ValueError, match="does not require grad"):
        viz.draw(ag.ones(2))
    with pytest.raises(TypeError, match="expects a Tensor or a Node"):
        viz.draw([1, 2])


def test_a_deep_graph_draws_without_recursion():
    x = ag.ones(1, requires_grad=True)
    y = x
    for _ in range(3 * sys.getrecursionlimit()):
        y = y * 1.0
    source = viz.draw(y).source
    assert len(_edges(source)) == 3 * sys.getrecursionlimit()


def test_missing_graphviz_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "graphviz", None)
    _, out = _seed_graph()
    with pytest.raises(ImportError, match=r"asyncgrad\[notebooks\]"):
        viz.draw(out)


@pytest.mark.skipif(shutil.which("dot") is None, reason="the Graphviz 'dot' program is not installed")
def test_renders_svg_for_jupyter():
    _, out = _seed_graph()
    svg = viz.draw(out).pipe(format="svg").decode()
    assert "<svg" in svg and "MeanBackward0" in svg
