"""``asyncgrad.autograd.grad_mode``: the same module as ``asyncgrad.graph.grad_mode``. Grad and
inference modes belong to the graph record (Note [The graph record is the lowest layer] in
graph/__init__.py); this path, where they used to live, stays importable and names that very module,
so its state and a patch of it are one.
"""

import sys

from asyncgrad.graph import grad_mode as _module
from asyncgrad.graph.grad_mode import *  # noqa: F403  (the public names, for readers and type checkers)

sys.modules[__name__] = _module
