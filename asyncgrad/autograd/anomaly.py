"""``asyncgrad.autograd.anomaly``: the same module as ``asyncgrad.graph.anomaly``. Anomaly mode belong
to the graph record (Note [The graph record is the lowest layer] in graph/__init__.py); this path,
where they used to live, stays importable and names that very module, so its state and a patch of it
are one.
"""

import sys

from asyncgrad.graph import anomaly as _module
from asyncgrad.graph.anomaly import *  # noqa: F403  (the public names, for readers and type checkers)

sys.modules[__name__] = _module
