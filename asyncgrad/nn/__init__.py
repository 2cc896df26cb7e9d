"""``asyncgrad.nn``: enough of torch.nn to train real models on the async engine."""

from asyncgrad.nn import functional, init, utils
from asyncgrad.nn.module import Module
from asyncgrad.nn.modules import CrossEntropyLoss, Linear, MSELoss, ReLU, Sequential, Sigmoid, Tanh
from asyncgrad.nn.parameter import Parameter

__all__ = [
    "CrossEntropyLoss", "Linear", "MSELoss", "Module", "Parameter", "ReLU", "Sequential", "Sigmoid", "Tanh",
    "functional", "init", "utils",
]
