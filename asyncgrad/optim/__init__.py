"""``asyncgrad.optim``: torch.optim's optimizers, updating parameters in place under no_grad."""

from asyncgrad.optim import lr_scheduler
from asyncgrad.optim.adagrad import Adagrad
from asyncgrad.optim.adam import Adam
from asyncgrad.optim.adamw import AdamW
from asyncgrad.optim.lbfgs import LBFGS
from asyncgrad.optim.optimizer import Optimizer
from asyncgrad.optim.rmsprop import RMSprop
from asyncgrad.optim.sgd import SGD

__all__ = ["SGD", "Adam", "AdamW", "Adagrad", "LBFGS", "Optimizer", "RMSprop", "lr_scheduler"]

