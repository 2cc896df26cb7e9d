"""Saved tensors: what a node keeps from its forward, checked for in-place changes on unpack."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from asyncgrad.tensor import Tensor, type_name

if TYPE_CHECKING:
    from asyncgrad.autograd.graph import Node

DETACHED_IN_PLACE = ("Trying to use a saved tensor that has been detached in-place, i.e. with .detach_().This is not "
                     "supported, please use out-of-place `.detach()` instead")
"""torch's refusal to unpack a saved input that was not a leaf when saved and has been detached in place
since (its grad_fn is gone); a saved output or leaf is not checked, as in torch's SavedVariable."""


class SavedTensor:
    """A tensor saved for backward, with the version it had when saved.

    An output of the saving node is kept without its ``grad_fn`` (that would be a reference
    cycle); ``unpack`` rebuilds it from the node that asks.
    """

    __slots__ = ("data", "vc", "version", "tensor", "output_nr", "device", "grad_fn")

    def __init__(self, tensor: Tensor, is_output: bool = False) -> None:
        self.data = tensor.data
        self.vc = tensor._vc
        self.version = tensor._vc[0]
        self.device = tensor.device
        self.output_nr = tensor.output_nr
        if is_output:
            self.tensor = None
            self.grad_fn = None
        else:
            self.tensor = tensor
            self.grad_fn = tensor.grad_fn

    def check_version(self, node: Node) -> None:
        if self.grad_fn is not None and self.tensor.grad_fn is None:
            raise RuntimeError(DETACHED_IN_PLACE)
        if self.vc[0] != self.version:
            raise RuntimeError(self._modified_message(node))

    def unpack_tensor(self, node: Node) -> Tensor:
        """The saved value as a Tensor connected to the graph (for recording a backward)."""
        self.check_version(node)
        if self.tensor is not None:
            return self.tensor
        return Tensor._make(self.data, self.device, True, node, self.output_nr, self.vc)

    def _modified_message(self, node: Node) -> str:
        data = self.data
        shape = ", ".join(str(d) for d in data.shape)
        if self.tensor is None:
            origin = f", which is output {self.output_nr} of {node.name()},"
        elif self.grad_fn is not None:
            origin = f", which is output {self.output_nr} of {self.grad_fn.name()},"
        else:
            origin = ""
        return (
            "one of the variables needed for gradient computation has been modified by an inplace "
            f"operation: [{type_name(self.device.backend.dtype(data))} [{shape}]]{origin} is at version {self.vc[0]}; "
            f"expected version {self.version} instead. Hint: enable anomaly detection to find the "
            "operation that failed to compute its gradient, with ag.set_detect_anomaly(True)."
        )


def unpack_arrays(node: Node) -> list[Any]:
    """A node's saved tensors as raw arrays: the fast path when no backward graph is recorded.
    A None entry (a tensor the op did not need to save) unpacks as None."""
    out = []
    for saved in node.saved:
        if saved is None:
            out.append(None)
        elif saved.grad_fn is not None and saved.tensor.grad_fn is None:
            raise RuntimeError(DETACHED_IN_PLACE)
        elif saved.vc[0] != saved.version:
            raise RuntimeError(saved._modified_message(node))
        else:
            out.append(saved.data)
    return out


def unpack_tensors(node: Node) -> list[Tensor | None]:
    return [saved.unpack_tensor(node) if saved is not None else None for saved in node.saved]
