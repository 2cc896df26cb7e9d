"""``asyncgrad.functional``: the same module as ``asyncgrad.autograd.functional`` (torch.autograd.functional's
place, in the front door); this path stays importable and names that very module, so its state and a patch of
it are one.
"""

import sys

from asyncgrad.autograd import functional as _module
from asyncgrad.autograd.functional import *  # noqa: F403  (the public names, for readers and type checkers)

sys.modules[__name__] = _module
