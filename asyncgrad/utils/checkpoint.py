"""``ag.utils.checkpoint``: torch.utils.checkpoint's names (the implementation is ``asyncgrad/checkpoint.py``)."""

from asyncgrad.checkpoint import (
    CheckpointError,
    GraphExecGroup,
    checkpoint,
    checkpoint_sequential,
    set_checkpoint_debug_enabled,
    set_checkpoint_early_stop,
)

__all__ = ["CheckpointError", "GraphExecGroup", "checkpoint", "checkpoint_sequential", "set_checkpoint_debug_enabled",
           "set_checkpoint_early_stop"]
