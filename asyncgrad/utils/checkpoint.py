"""``ag.utils.checkpoint``: torch.utils.checkpoint's names (the implementation is ``asyncgrad/checkpoint.py``)."""

from asyncgrad.checkpoint import CheckpointError, checkpoint

__all__ = ["CheckpointError", "checkpoint"]
