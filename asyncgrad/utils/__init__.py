"""``asyncgrad.utils``: torch.utils's data loading (``asyncgrad.utils.data``) and checkpointing
(``asyncgrad.utils.checkpoint``)."""

from asyncgrad.utils import checkpoint, data

__all__ = ["checkpoint", "data"]
