"""``asyncgrad.autograd.switches``: the same module as ``asyncgrad.graph.switches``. The switches that
end where their scope ends belong to the graph record (Note [The graph record is the lowest layer]
in graph/__init__.py); this path, where they used to live, stays importable and names that very
module, so its state and a patch of it are one.
"""

import sys

from asyncgrad.graph import switches as _module
from asyncgrad.graph.switches import *  # noqa: F403  (the public names, for readers and type checkers)

sys.modules[__name__] = _module
