"""``asyncgrad.nn``: enough of torch.nn to train real models on the async engine."""

from asyncgrad.nn import functional, init, utils
from asyncgrad.nn.module import Module
from asyncgrad.nn.modules import CrossEntropyLoss, Linear, MSELoss, ReLU, Sigmoid, Tanh
from asyncgrad.nn.parameter import Parameter

__all__ = [
    "CrossEntropyLoss", "Linear", "MSELoss", "Module", "Parameter", "ReLU", "Sequential", "Sigmoid", "Tanh",
    "functional", "init", "utils",
]

# nn-conv: convolution, pooling, shape layers, embedding, containers
from asyncgrad.nn.container import ModuleDict, ModuleList, ParameterList, Sequential  # noqa: E402
from asyncgrad.nn.conv import Conv1d, Conv2d  # noqa: E402
from asyncgrad.nn.flatten import Embedding, Flatten, Identity, Unflatten  # noqa: E402
from asyncgrad.nn.pooling import AdaptiveAvgPool2d, AvgPool1d, AvgPool2d, MaxPool1d, MaxPool2d  # noqa: E402

__all__ += ["AdaptiveAvgPool2d", "AvgPool1d", "AvgPool2d", "Conv1d", "Conv2d", "Embedding", "Flatten", "Identity",
           "MaxPool1d", "MaxPool2d", "ModuleDict", "ModuleList", "ParameterList", "Unflatten"]
# end nn-conv
