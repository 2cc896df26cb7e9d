"""Recurrent layers: RNN, LSTM and GRU, with torch's parameter names (``weight_ih_l0``,
``weight_hh_l0_reverse``, ...), gate order and initialisation, so torch's weights load and give
the same outputs and gradients.

Each layer and direction projects the whole input sequence at once (one linear for every time
step), then steps through time with the hidden-to-hidden linear and the gates, composed from
differentiable ops: the graph has one small node chain per step, as torch's reference cells do.
"""

from __future__ import annotations

import math
import numbers
import warnings
from typing import Any

from asyncgrad.factories import empty, zeros
from asyncgrad.nn import init
from asyncgrad.nn.module import Module
from asyncgrad.nn.parameter import Parameter
from asyncgrad.ops.dropout import dropout
from asyncgrad.ops.elementwise import relu, sigmoid, tanh
from asyncgrad.ops.nn import linear
from asyncgrad.ops.shape import cat, stack
from asyncgrad.tensor import Tensor

__all__ = ["GRU", "LSTM", "RNN"]

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


class RNNBase(Module):
    """The stack of layers and directions shared by RNN, LSTM and GRU (torch's RNNBase; ``proj_size``
    for LSTM only, as in torch)."""

    mode = "RNN_TANH"

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 proj_size: int = 0, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if (not isinstance(dropout, numbers.Number) or isinstance(dropout, bool) or not 0 <= dropout <= 1):
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an element "
                             "being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so non-zero dropout "
                          f"expects num_layers greater than 1, but got dropout={dropout} and num_layers={num_layers}",
                          UserWarning, stacklevel=3)
        if not isinstance(hidden_size, int) or isinstance(hidden_size, bool):
            raise TypeError(f"hidden_size should be of type int, got: {type(hidden_size).__name__}")
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        num_directions = 2 if bidirectional else 1
        gate_size = _GATES[self.mode] * hidden_size
        real_hidden = proj_size if proj_size > 0 else hidden_size
        self._flat_weights_names: list[str] = []
        for layer in range(num_layers):
            for direction in range(num_directions):
                layer_input = input_size if layer == 0 else real_hidden * num_directions
                suffix = "_reverse" if direction == 1 else ""
                shapes = [("weight_ih", (gate_size, layer_input)), ("weight_hh", (gate_size, real_hidden))]
                if bias:
                    shapes += [("bias_ih", (gate_size,)), ("bias_hh", (gate_size,))]
                if proj_size > 0:
                    shapes.append(("weight_hr", (proj_size, hidden_size)))
                for name, shape in shapes:
                    full = f"{name}_l{layer}{suffix}"
                    setattr(self, full, Parameter(empty(*shape, dtype=dtype, device=device)))
                    self._flat_weights_names.append(full)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Every weight and bias from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)), as torch."""
        stdv = 1.0 / math.sqrt(self.hidden_size)
        for name in self._flat_weights_names:
            init.uniform_(getattr(self, name), -stdv, stdv)

    def _weights(self, layer: int, direction: int) -> tuple[Any, ...]:
        """weight_ih, weight_hh, bias_ih, bias_hh, weight_hr of a layer and direction (None where absent)."""
        suffix = "_reverse" if direction == 1 else ""
        return tuple(getattr(self, f"{name}_l{layer}{suffix}", None)
                     for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr"))

    def _cell(self, gi: Tensor, h: Tensor, c: Tensor | None, w_hh: Tensor, b_hh: Tensor | None,
              w_hr: Tensor | None) -> tuple[Tensor, Tensor | None]:
        gh = linear(h, w_hh, b_hh)
        if self.mode == "RNN_TANH":
            return tanh(gi + gh), None
        return relu(gi + gh), None

    def _check(self, input: Tensor, hx: Any, batched: bool) -> None:
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                               f"got {input.shape[-1]}")
        for h in (hx if isinstance(hx, tuple) else (hx,)):
            if h is None:
                continue
            if batched and h.ndim != 3:
                raise RuntimeError(f"For batched 3-D input, hx should also be 3-D but got {h.ndim}-D tensor")
            if not batched and h.ndim != 2:
                raise RuntimeError(f"For unbatched 2-D input, hx should also be 2-D but got {h.ndim}-D tensor")

    def _hidden_shape(self, batch: int, cell: bool = False) -> tuple[int, int, int]:
        size = self.proj_size if self.proj_size > 0 and not cell else self.hidden_size
        return (self.num_layers * (2 if self.bidirectional else 1), batch, size)

    def forward(self, input: Tensor, hx: Any = None) -> tuple[Tensor, Any]:
        if input.ndim not in (2, 3):
            raise ValueError(f"{type(self).__name__}: Expected input to be 2D or 3D, got {input.ndim}D instead")
        batched = input.ndim == 3
        self._check(input, hx, batched)
        lstm = self.mode == "LSTM"
        if not batched:
            input = input.unsqueeze(1)
            if hx is not None:
                hx = tuple(h.unsqueeze(1) for h in hx) if lstm else hx.unsqueeze(1)
        elif self.batch_first:
            input = input.transpose(0, 1)
        batch = input.shape[1]
        expected = self._hidden_shape(batch)
        cell_shape = self._hidden_shape(batch, cell=True)
        if hx is None:
            h0 = zeros(*expected, dtype=input.dtype, device=input.device)
            hx = (h0, zeros(*cell_shape, dtype=input.dtype, device=input.device)) if lstm else h0
        if lstm:  # torch names the two states
            for i, (h, shape) in enumerate(zip(hx, (expected, cell_shape))):
                if tuple(h.shape) != shape:
                    raise RuntimeError(f"Expected hidden[{i}] size {shape}, got {list(h.shape)}")
        elif tuple(hx.shape) != expected:
            raise RuntimeError(f"Expected hidden size {expected}, got {list(hx.shape)}")
        h_all, c_all = (hx[0], hx[1]) if lstm else (hx, None)
        num_directions = 2 if self.bidirectional else 1
        layer_input = input
        h_n: list[Tensor] = []
        c_n: list[Tensor] = []
        steps = input.shape[0]
        for layer in range(self.num_layers):
            outputs = []
            for direction in range(num_directions):
                w_ih, w_hh, b_ih, b_hh, w_hr = self._weights(layer, direction)
                index = layer * num_directions + direction
                h = h_all[index]
                c = c_all[index] if c_all is not None else None
                gi_all = linear(layer_input, w_ih, b_ih)
                out_steps: list[Tensor] = [None] * steps  # type: ignore[list-item]
                order = range(steps - 1, -1, -1) if direction == 1 else range(steps)
                for t in order:
                    h, c = self._cell(gi_all[t], h, c, w_hh, b_hh, w_hr)
                    out_steps[t] = h
                outputs.append(stack(out_steps, 0))
                h_n.append(h)
                if c is not None:
                    c_n.append(c)
            layer_input = outputs[0] if num_directions == 1 else cat(outputs, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                layer_input = dropout(layer_input, self.dropout, True)
        output = layer_input
        hidden_h = stack(h_n, 0)
        hidden: Any = (hidden_h, stack(c_n, 0)) if lstm else hidden_h
        if not batched:
            output = output.squeeze(1)
            hidden = tuple(h.squeeze(1) for h in hidden) if lstm else hidden.squeeze(1)
        elif self.batch_first:
            output = output.transpose(0, 1)
        return output, hidden

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s


class RNN(RNNBase):
    """h' = tanh(W_ih x + b_ih + W_hh h + b_hh) (``nonlinearity='relu'``: relu)."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, nonlinearity: str = "tanh",
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 device: Any = None, dtype: Any = None) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        self.nonlinearity = nonlinearity
        self.mode = "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU"
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, 0, device,
                         dtype)


class LSTM(RNNBase):
    """Gates i, f, g, o (torch's order in the weights): c' = f c + i g, h' = o tanh(c'), projected
    by ``weight_hr`` to ``proj_size`` features when that is not 0."""

    mode = "LSTM"

    def _cell(self, gi: Tensor, h: Tensor, c: Tensor | None, w_hh: Tensor, b_hh: Tensor | None,
              w_hr: Tensor | None) -> tuple[Tensor, Tensor | None]:
        gates = gi + linear(h, w_hh, b_hh)
        n = self.hidden_size
        i = sigmoid(gates[..., :n])
        f = sigmoid(gates[..., n:2 * n])
        g = tanh(gates[..., 2 * n:3 * n])
        o = sigmoid(gates[..., 3 * n:])
        c = f * c + i * g
        h = o * tanh(c)
        return (h if w_hr is None else linear(h, w_hr)), c


class GRU(RNNBase):
    """Gates r, z, n (torch's order): n = tanh(W_in x + b_in + r (W_hn h + b_hn)), h' = (1 - z) n + z h."""

    mode = "GRU"

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, 0, device,
                         dtype)

    def _cell(self, gi: Tensor, h: Tensor, c: Tensor | None, w_hh: Tensor, b_hh: Tensor | None,
              w_hr: Tensor | None) -> tuple[Tensor, Tensor | None]:
        gh = linear(h, w_hh, b_hh)
        n = self.hidden_size
        r = sigmoid(gi[..., :n] + gh[..., :n])
        z = sigmoid(gi[..., n:2 * n] + gh[..., n:2 * n])
        new = tanh(gi[..., 2 * n:] + r * gh[..., 2 * n:])
        return (1 - z) * new + z * h, None



# ops-misc: RNNCell, LSTMCell, GRUCell: one time step, the layers' own step formulas
class RNNCellBase(Module):
    """torch's RNNCellBase: ``weight_ih`` (gates * hidden, input), ``weight_hh``, ``bias_ih``,
    ``bias_hh``, all from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)); one step of the matching
    layer's recurrence (its ``_cell``), on a (batch, input) or an unbatched (input,) tensor."""

    mode = "RNN_TANH"
    _step: Any = None

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        gate_size = _GATES[self.mode] * hidden_size
        self.weight_ih = Parameter(empty(gate_size, input_size, dtype=dtype, device=device))
        self.weight_hh = Parameter(empty(gate_size, hidden_size, dtype=dtype, device=device))
        if bias:
            self.bias_ih = Parameter(empty(gate_size, dtype=dtype, device=device))
            self.bias_hh = Parameter(empty(gate_size, dtype=dtype, device=device))
        else:
            self.bias_ih = self.bias_hh = None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def _prepare(self, input: Tensor, hx: Any) -> tuple[bool, Any]:
        name = type(self).__name__
        if input.ndim not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.ndim}D instead")
        states = hx if isinstance(hx, tuple) else (hx,)
        for h in states:
            if h is not None and h.ndim not in (1, 2):
                raise ValueError(f"{name}: Expected hidden to be 1D or 2D, got {h.ndim}D instead")
        return input.ndim == 2, states

    def _run(self, input: Tensor, h: Tensor | None, c: Tensor | None) -> tuple[Tensor, Tensor | None]:
        batched = input.ndim == 2
        x = input if batched else input.unsqueeze(0)
        shape = (x.shape[0], self.hidden_size)
        h = zeros(*shape, dtype=x.dtype, device=x.device) if h is None else (h if batched else h.unsqueeze(0))
        if self.mode == "LSTM":
            c = zeros(*shape, dtype=x.dtype, device=x.device) if c is None else (c if batched else c.unsqueeze(0))
        gi = linear(x, self.weight_ih, self.bias_ih)
        h, c = type(self)._step(self, gi, h, c, self.weight_hh, self.bias_hh, None)
        if not batched:
            h = h.squeeze(0)
            c = c.squeeze(0) if c is not None else None
        return h, c

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s


class RNNCell(RNNCellBase):
    """h' = tanh(W_ih x + b_ih + W_hh h + b_hh) (``nonlinearity='relu'``: relu)."""

    _step = RNNBase._cell

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, nonlinearity: str = "tanh",
                 device: Any = None, dtype: Any = None) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}")
        self.nonlinearity = nonlinearity
        self.mode = "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU"
        super().__init__(input_size, hidden_size, bias, device, dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        self._prepare(input, hx)
        return self._run(input, hx, None)[0]


class LSTMCell(RNNCellBase):
    mode = "LSTM"
    _step = LSTM._cell

    def forward(self, input: Tensor, hx: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
        self._prepare(input, hx)
        h, c = (None, None) if hx is None else hx
        h, c = self._run(input, h, c)
        assert c is not None
        return h, c


class GRUCell(RNNCellBase):
    mode = "GRU"
    _step = GRU._cell

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        self._prepare(input, hx)
        return self._run(input, hx, None)[0]


__all__ += ["GRUCell", "LSTMCell", "RNNCell"]
