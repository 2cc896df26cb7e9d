"""asyncgrad.viz.draw: the DOT source of the backward graph (rendering only where `dot` exists)."""

import re
import shutil
import sys

import numpy as np
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
    """(tail, head, label or None) for every graph edge (not the dashed saved-tensor ones)."""
    edges = []
    for tail, head, attrs in re.findall(r"^\t(n\d+) -> (n\d+)(?: \[(.*)\])?$", source, re.M):
        label = re.search(r"label=(\d+)", attrs or "")
        edges.append((tail, head, label.group(1) if label else None))
    return edges


def _nodes(source):
    """node id -> (label, fillcolor)."""
    return {name: (label.strip('"'), colour)
            for name, label, colour in re.findall(r'^\t([ns]\d+) \[label=("[^"]*"|\S+) fillcolor=(\S+)\]$',
                                                  source, re.M)}


def test_draw_names_every_node_once_and_leaves_single_input_edges_unlabelled():
    _, out = _seed_graph()
    source = viz.draw(out).source
    for name in ("MeanBackward0", "MulBackward0", "AddBackward0"):
        assert f"label={name}" in source
    assert source.count("label=MulBackward0") == 2
    assert source.count("AccumulateGrad") == 1
    assert '"AccumulateGrad\\n(2, 2)"' in source
    edges = _edges(source)
    assert len(edges) == 5
    assert edges.count(("n2", "n3", None)) == 2, "y * y feeds the same AddBackward0 twice, both at input 0"
    assert all(label is None for _, _, label in edges), "every node here has one input"
    nodes = _nodes(source)
    assert nodes["n0"] == ("MeanBackward0", "darkolivegreen1")
    assert nodes["n4"] == ("AccumulateGrad\\n(2, 2)", "lightblue")
    assert "orange" not in source and "dashed" not in source, "saved tensors are off by default"


class TwoOutputs(ag.Function):
    """A backward node with two inputs (one per forward output)."""

    @staticmethod
    def forward(ctx, x):
        return x * 2, x * 3

    @staticmethod
    def backward(ctx, ga, gb):
        return ga * 2 + gb * 3


async def test_edges_into_a_node_with_several_inputs_carry_their_input_nr():
    x = ag.ones(3, requires_grad=True)
    a, b = TwoOutputs.apply(x)
    out = a.sin().sum() + b.exp().sum()
    source = viz.draw(out).source
    nodes = _nodes(source)
    (two,) = [n for n, (label, _) in nodes.items() if label == "TwoOutputsBackward"]
    sin = next(n for n, (label, _) in nodes.items() if label == "SinBackward0")
    exp = next(n for n, (label, _) in nodes.items() if label == "ExpBackward0")
    edges = _edges(source)
    assert (sin, two, "0") in edges and (exp, two, "1") in edges
    assert [e for e in edges if e[2] is not None] == [e for e in edges if e[1] == two]
    await out.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.cos(2.0) + 3 * np.exp(3.0))


def test_a_nonzero_input_nr_is_labelled_even_into_a_node_without_input_metadata():
    class Producer(ag.Node):
        __slots__ = ()

    producer = Producer()
    consumer = ag.Node(((producer, 1), (None, 0), (producer, 0)))
    source = viz.draw(consumer).source
    assert "label=Producer" in source
    assert sorted(_edges(source), key=str) == [("n0", "n1", "1"), ("n0", "n1", None)]


def test_params_name_the_leaves_as_torchviz_does():
    model = ag.nn.Sequential(ag.nn.Linear(3, 4), ag.nn.ReLU(), ag.nn.Linear(4, 1))
    x = ag.ones(2, 3, requires_grad=True)
    out = model(x).mean()
    source = viz.draw(out, params={**dict(model.named_parameters()), "x": x}).source
    labels = {label for label, colour in _nodes(source).values() if colour == "lightblue"}
    assert labels == {"AccumulateGrad\\n0.weight (4, 3)", "AccumulateGrad\\n0.bias (4)",
                      "AccumulateGrad\\n2.weight (1, 4)", "AccumulateGrad\\n2.bias (1)",
                      "AccumulateGrad\\nx (2, 3)"}
    unnamed = viz.draw(out, params={"x": x}).source
    assert "AccumulateGrad\\n(4, 3)" in unnamed and "AccumulateGrad\\nx (2, 3)" in unnamed


def test_params_must_map_names_to_tensors():
    _, out = _seed_graph()
    with pytest.raises(TypeError, match="mapping of names to tensors; 'w' maps to list"):
        viz.draw(out, params={"w": [1.0]})
    with pytest.raises(TypeError, match="expects a mapping"):
        viz.draw(out, params=[("w", out)])


async def test_show_saved_hangs_saved_tensors_from_their_nodes():
    x = ag.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    w = ag.tensor([[1.0], [0.5]], requires_grad=True)
    out = (x @ w).tanh().sum() + (x * x).sum()
    source = viz.draw(out, params={"x": x, "w": w}, show_saved=True).source
    nodes = _nodes(source)
    saved = {n: label for n, (label, colour) in nodes.items() if colour == "orange"}
    assert sorted(saved.values()) == ["result\\n(2, 1)", "w\\n(2, 1)", "x\\n(2, 2)"], \
        "x saved by mm and twice by x * x is one box; tanh saves its own output"
    hangs = re.findall(r"^\t(n\d+) -> (s\d+) \[dir=none style=dashed\]$", source, re.M)
    by_node = {}
    for node, box in hangs:
        by_node.setdefault(nodes[node][0], []).append(saved[box])
    assert sorted(by_node["MmBackward0"]) == ["w\\n(2, 1)", "x\\n(2, 2)"]
    assert by_node["TanhBackward0"] == ["result\\n(2, 1)"]
    assert by_node["MulBackward0"] == ["x\\n(2, 2)", "x\\n(2, 2)"]
    assert len(_edges(source)) == 9, "saved-tensor edges are not graph edges"
    await out.backward()
    assert "orange" not in viz.draw(out, show_saved=True).source, "freed by the backward: nothing to show"


def test_several_roots_draw_one_graph():
    x = ag.ones(2, requires_grad=True)
    a, b = x.sin().sum(), x.cos().sum()
    source = viz.draw((a, b)).source
    nodes = _nodes(source)
    roots = sorted(label for label, colour in nodes.values() if colour == "darkolivegreen1")
    assert roots == ["SumBackward0", "SumBackward0"]
    assert sum(label.startswith("AccumulateGrad") for label, _ in nodes.values()) == 1
    with pytest.raises(ValueError, match="empty sequence"):
        viz.draw([])


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
