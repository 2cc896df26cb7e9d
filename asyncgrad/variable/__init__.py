"""A tensor's autograd side, torch's ``variable.h`` and its neighbours: saved variables and their
version checks (``saved.py``), a leaf's ``AccumulateGrad`` and a tensor's gradient edge
(``accumulate.py``), and the calls of tensor and node hooks (``hook_calls.py``).

Note [Between Tensor and the ops]: these modules need ``Tensor``, so they sit above it and above the
graph record (``asyncgrad/graph/``), and below the ops, the engine and the front door
(``asyncgrad/autograd/``), which all import them; they import none of those
(``tests/structure/test_import_cycles.py``).
"""
