"""The graph record: ``Node``, edges, node hooks, saved-tensor hook storage, the running graph task
(``node.py``), and the modes the recording reads: grad and inference mode (``grad_mode.py``),
anomaly mode (``anomaly.py``), and the scoped switches they are made of (``switches.py``).

Note [The graph record is the lowest layer]: this package sits below ``Tensor``, the ops, the
engine and the front door, and imports none of them, not even for type checking
(``tests/structure/test_import_cycles.py`` counts those imports too). What it needs of a layer
above, it asks through an attribute or a protocol: a tensor through its attributes and methods,
the running graph task through ``RunningGraphTask``. The public ``torch.autograd.graph``
namespace is ``asyncgrad/autograd/graph.py``, in the front door, which adds the one name that
needs a tensor's ``AccumulateGrad`` (``get_gradient_edge``).
"""
