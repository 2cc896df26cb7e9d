"""``asyncgrad.utils``: torch.utils's data loading (``asyncgrad.utils.data``)."""

from asyncgrad.utils import data

__all__ = ["data"]
