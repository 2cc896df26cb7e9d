"""``ag.autograd.graph``: torch.autograd.graph's namespace, in the front door.

The graph record itself is ``asyncgrad/graph/`` (Note [The graph record is the lowest layer] in
graph/__init__.py); this module gathers its public names and ``get_gradient_edge``, which returns
a leaf's ``AccumulateGrad`` and so lives with it in variable/accumulate.py. The record's other
names are here too, so that ``from asyncgrad.autograd.graph import Node`` keeps working (Note [The
public graph module] in graph/node.py).
"""

from __future__ import annotations

from asyncgrad.graph.node import (  # noqa: F401  (the record's other names, at their old import path)
    NO_EDGE,
    RELEASED,
    SECOND_BACKWARD,
    Edge,
    GradientEdge,
    GraphRoot,
    Node,
    NodeHooks,
    Placement,
    RemovableHandle,
    add_hook,
    allow_mutation_on_saved_tensors,
    current_graph_task,
    disable_saved_tensors_hooks,
    hook_name,
    hooks_in_use,
    increment_version,
    portal_needed,
    register_multi_grad_hook,
    save_on_cpu,
    saved_hooks,
    saved_hooks_disabled,
    saved_tensors_hooks,
    split_edges,
)
from asyncgrad.variable.accumulate import get_gradient_edge

__all__ = [  # the public graph module: torch.autograd.graph's names, and asyncgrad's Edge, GraphRoot, handles
    "Edge", "GradientEdge", "GraphRoot", "Node", "RemovableHandle", "allow_mutation_on_saved_tensors",
    "disable_saved_tensors_hooks", "get_gradient_edge", "increment_version", "register_multi_grad_hook",
    "save_on_cpu", "saved_tensors_hooks",
]
