"""Draw the backward graph with graphviz, for notebooks and for debugging.

``draw`` walks ``next_functions`` with an explicit stack, so a graph of any depth draws
without ``RecursionError``. graphviz is optional (the ``notebooks`` extra): it is imported
only when a graph is drawn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from asyncgrad.autograd.graph import AccumulateGrad, Node
from asyncgrad.tensor import Tensor

if TYPE_CHECKING:
    import graphviz

_ROOT_COLOR = "darkolivegreen1"
_LEAF_COLOR = "lightblue"


def draw(t_or_node: Tensor | Node) -> graphviz.Digraph:
    """The backward graph reachable from a tensor's ``grad_fn`` (or from a node), top to bottom.

    Each box is a node named as ``Node.name()`` says; an ``AccumulateGrad`` box also shows its
    leaf's shape. An edge runs the way gradients flow, labelled with the ``input_nr`` it feeds.
    The ``Digraph`` renders inline in Jupyter when the Graphviz ``dot`` program is installed;
    its ``.source`` is the DOT text either way.
    """
    try:
        import graphviz
    except ImportError as exc:
        raise ImportError(
            "asyncgrad.viz.draw needs the 'graphviz' Python package: pip install 'asyncgrad[notebooks]' "
            "(rendering also needs the Graphviz 'dot' program on PATH)"
        ) from exc
    root = _root_node(t_or_node)
    dot = graphviz.Digraph(
        "backward",
        graph_attr={"rankdir": "TB"},
        node_attr={"shape": "box", "style": "filled", "fillcolor": "white", "fontsize": "11", "height": "0.2"},
        edge_attr={"fontsize": "9"},
    )
    names = {id(root): "n0"}
    stack = [root]
    dot.node("n0", _label(root), fillcolor=_LEAF_COLOR if isinstance(root, AccumulateGrad) else _ROOT_COLOR)
    while stack:
        node = stack.pop()
        for next_node, input_nr in node.next_functions:
            if next_node is None:
                continue
            name = names.get(id(next_node))
            if name is None:
                name = names[id(next_node)] = f"n{len(names)}"
                leaf = isinstance(next_node, AccumulateGrad)
                dot.node(name, _label(next_node), fillcolor=_LEAF_COLOR if leaf else "white")
                stack.append(next_node)
            dot.edge(names[id(node)], name, label=str(input_nr))
    return dot


def _root_node(t_or_node: Tensor | Node) -> Node:
    if isinstance(t_or_node, Node):
        return t_or_node
    if not isinstance(t_or_node, Tensor):
        raise TypeError(f"draw() expects a Tensor or a Node, got {type(t_or_node).__name__}")
    if t_or_node.grad_fn is not None:
        return t_or_node.grad_fn
    if t_or_node.requires_grad:
        return t_or_node.grad_accumulator()
    raise ValueError("draw() got a tensor that does not require grad: it has no backward graph to draw")


def _label(node: Node) -> str:
    if isinstance(node, AccumulateGrad):
        return f"AccumulateGrad\\n{tuple(node.variable.shape)}"
    return node.name()
