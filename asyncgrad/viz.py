"""Draw the backward graph with graphviz, for notebooks and for debugging (torchviz's ``make_dot``).

``draw`` walks ``next_functions`` with an explicit stack, so a graph of any depth draws
without ``RecursionError``. graphviz is optional (the ``notebooks`` extra): it is imported
only when a graph is drawn; the DOT text (``.source``) needs no Graphviz program, rendering does.

Colours follow torchviz: the roots (the outputs' ``grad_fn``) are green, leaves (``AccumulateGrad``,
named through ``params=`` as torchviz's are) light blue, saved tensors orange, other nodes white.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from asyncgrad.graph.node import RELEASED, Node
from asyncgrad.tensor import Tensor
from asyncgrad.variable.accumulate import AccumulateGrad, grad_accumulator
from asyncgrad.variable.saved import keep_result_as_saved

if TYPE_CHECKING:
    import graphviz

__all__ = ["draw"]

_ROOT_COLOR = "darkolivegreen1"
_LEAF_COLOR = "lightblue"
_SAVED_COLOR = "orange"


def draw(t_or_node: Any, params: Mapping[str, Tensor] | None = None, show_saved: bool = False) -> graphviz.Digraph:
    """The backward graph reachable from a tensor's ``grad_fn`` (or from a node, or from a tuple or
    list of them, each a root), top to bottom, gradients flowing down.

    Each box is a node named as ``Node.name()`` says; an ``AccumulateGrad`` box also shows its
    leaf's shape, after the leaf's name when ``params`` (name -> tensor, e.g.
    ``dict(model.named_parameters())``) holds that leaf. An edge is labelled with the ``input_nr``
    it feeds only where that tells something: when the node it feeds has several inputs (a
    backward of a forward with several outputs) or the number is not 0. With ``show_saved``, each
    node's saved tensors hang from it as orange boxes (a dashed, undirected edge), shared when two
    nodes saved the same array, and named from ``params`` too; after a backward without
    ``retain_graph`` the saved tensors are freed and none are shown. The ``Digraph`` renders inline
    in Jupyter when the Graphviz ``dot`` program is installed; its ``.source`` is the DOT text.
    """
    try:
        import graphviz
    except ImportError as exc:
        raise ImportError(
            "asyncgrad.viz.draw needs the 'graphviz' Python package: pip install 'asyncgrad[notebooks]' "
            "(rendering also needs the Graphviz 'dot' program on PATH)"
        ) from exc
    roots = [_root_node(t) for t in (t_or_node if isinstance(t_or_node, (tuple, list)) else (t_or_node,))]
    if not roots:
        raise ValueError("draw() got an empty sequence: give it a tensor, a node, or several of them")
    param_names = _param_names(params)
    dot = graphviz.Digraph(
        "backward",
        graph_attr={"rankdir": "TB"},
        node_attr={"shape": "box", "style": "filled", "fillcolor": "white", "fontsize": "11", "height": "0.2"},
        edge_attr={"fontsize": "9"},
    )
    names: dict[int, str] = {}
    saved_names: dict[int, str] = {}
    stack: list[Node] = []

    def visit(node: Node, fill: str) -> str:
        name = names.get(id(node))
        if name is None:
            name = names[id(node)] = f"n{len(names)}"
            dot.node(name, _label(node, param_names), fillcolor=fill)
            if show_saved:
                _draw_saved(dot, node, name, param_names, saved_names)
            stack.append(node)
        return name

    for root in roots:
        visit(root, _LEAF_COLOR if isinstance(root, AccumulateGrad) else _ROOT_COLOR)
    while stack:
        node = stack.pop()
        for next_node, input_nr in node.next_functions:
            if next_node is None:
                continue
            name = visit(next_node, _LEAF_COLOR if isinstance(next_node, AccumulateGrad) else "white")
            if input_nr or next_node.num_inputs > 1:
                dot.edge(names[id(node)], name, label=str(input_nr))
            else:
                dot.edge(names[id(node)], name)
    return dot


def _root_node(t_or_node: Any) -> Node:
    if isinstance(t_or_node, Node):
        return t_or_node
    if not isinstance(t_or_node, Tensor):
        raise TypeError(f"draw() expects a Tensor or a Node, got {type(t_or_node).__name__}")
    if t_or_node.grad_fn is not None:
        return t_or_node.grad_fn
    if t_or_node.requires_grad:
        return grad_accumulator(t_or_node)
    raise ValueError("draw() got a tensor that does not require grad: it has no backward graph to draw")


def _param_names(params: Mapping[str, Tensor] | None) -> dict[int, str]:
    """id(tensor) -> name, as torchviz's ``param_map``; a Parameter is a Tensor, so
    ``dict(model.named_parameters())`` works as it is."""
    if params is None:
        return {}
    if not isinstance(params, Mapping):
        raise TypeError(f"draw(params=...) expects a mapping of names to tensors, got {type(params).__name__}")
    for name, t in params.items():
        if not isinstance(t, Tensor):
            raise TypeError(f"draw(params=...) expects a mapping of names to tensors; {name!r} maps to "
                            f"{type(t).__name__}")
    return {id(t): str(name) for name, t in params.items()}


def _shape(shape: Any) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ")"


def _label(node: Node, param_names: dict[int, str]) -> str:
    if isinstance(node, AccumulateGrad):
        name = param_names.get(id(node.variable))
        shape = _shape(node.variable.shape)
        return f"AccumulateGrad\\n{name} {shape}" if name is not None else f"AccumulateGrad\\n{shape}"
    return node.name()


def _draw_saved(dot: graphviz.Digraph, node: Node, node_name: str, param_names: dict[int, str],
                saved_names: dict[int, str]) -> None:
    """Orange boxes for what ``node`` saved for its backward, one per saved array."""
    keep_result_as_saved(node)  # Note [A saved result kept in its node] in ops/_node.py
    saved = node.saved
    if saved is RELEASED:
        return
    for i, s in enumerate(saved):
        data = getattr(s, "data", None)
        if data is None:
            continue
        name = saved_names.get(id(data))
        if name is None:
            name = saved_names[id(data)] = f"s{len(saved_names)}"
            tensor = getattr(s, "tensor", None)
            if tensor is not None and id(tensor) in param_names:
                title = param_names[id(tensor)]
            elif tensor is None:
                title = "result"  # an output of the node itself, saved without its grad_fn
            else:
                title = f"saved[{i}]"
            dot.node(name, f"{title}\\n{_shape(data.shape)}", fillcolor=_SAVED_COLOR)
        dot.edge(node_name, name, style="dashed", dir="none")
