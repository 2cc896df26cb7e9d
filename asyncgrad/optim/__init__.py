"""``asyncgrad.optim``: torch.optim's SGD and Adam, updating parameters in place under no_grad."""

from asyncgrad.optim.adam import Adam
from asyncgrad.optim.optimizer import Optimizer
from asyncgrad.optim.sgd import SGD

__all__ = ["SGD", "Adam", "Optimizer"]

