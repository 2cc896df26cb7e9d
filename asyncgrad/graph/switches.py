"""Context-variable switches that end where their scope ends, whatever happened inside."""

# Note [A switch restored where its scope ends]: grad mode, inference mode, anomaly mode, the
# profiler's recorder and the distributed autograd context are context variables, so each asyncio
# task has its own. A context manager that switches one keeps a ``ContextVar`` token per
# ``__enter__``; ``ContextVar.reset`` refuses a token made in another context. ``leave`` ends a scope
# under every misuse:
#
# * it resets the newest of the manager's tokens that belongs to the context exiting, skipping
#   those of other contexts, so a manager object shared by interleaved tasks, or entered by a hook
#   that runs in the engine's context and never exits, cannot make another context's exit fail;
# * an exit in a context that holds none of the manager's tokens (the scope was entered in another
#   task, as an async generator fixture's setup and teardown are) changes nothing here, since this
#   context never saw the switch, and drops the newest foreign token, which this exit ends;
# * it never raises, so the exception that ends a ``with`` block (an error, a ``BaseException``, a
#   cancellation) is the one that propagates, and the value is back in the context that entered,
#   which is the one that exits in every ordinary use.
#
# ``saved_tensors_hooks`` is a stack per context instead (Note [Saved-tensor hooks are a stack per
# context] in graph/node.py), as torch's is per thread: its extra exits and re-entries must pop and push,
# not restore a value recorded at some earlier enter.

from __future__ import annotations

import contextvars


def leave(var: contextvars.ContextVar, tokens: list) -> bool:
    """End the newest scope of ``tokens`` in this context (Note [A switch restored where its scope
    ends]); False when there was none to end."""
    for i in range(len(tokens) - 1, -1, -1):
        try:
            var.reset(tokens[i])
        except ValueError:  # made in another context: that context's scope is still open
            continue
        except RuntimeError:  # already used: a scope that ended already
            del tokens[i]
            continue
        del tokens[i]
        return True
    if tokens:
        tokens.pop()
        return True
    return False


def restore(var: contextvars.ContextVar, token: contextvars.Token) -> None:
    """``var.reset(token)`` for a scope with one token: nothing when it was made in another context
    or was used already (Note [A switch restored where its scope ends])."""
    try:
        var.reset(token)
    except (ValueError, RuntimeError):
        pass
