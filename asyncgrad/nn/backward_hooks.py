"""A module's full backward hooks: torch's ``BackwardHook`` and ``BackwardHookFunction``.

Note [Full backward hooks]: ``register_full_backward_hook`` and ``register_full_backward_pre_hook``
make ``Module.__call__`` pass the forward's Tensor arguments, and then its Tensor outputs, through
``BackwardHookFunction``, an identity custom Function whose node (``BackwardHookFunctionBackward``)
stands for the module in the graph, as torch's does. The outputs' node runs first in a backward: a
post-hook there records the gradients of the outputs (``grad_output``) and runs the pre-hooks,
which may replace them. The inputs' node runs once the module's whole backward is done: a post-hook
there calls the hooks with the inputs' gradients (``grad_input``) and the recorded ``grad_output``,
and each may replace ``grad_input``. Non-Tensor arguments and outputs show as None. A backward that
reaches the inputs without passing through the outputs (a double backward) calls no hook.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable

from asyncgrad.autograd.function import Function
from asyncgrad.graph.grad_mode import grad_enabled
from asyncgrad.tensor import Tensor


class BackwardHookFunction(Function):
    """Identity on a module's Tensor arguments or outputs, whose node the backward hooks hang on."""

    @staticmethod
    def forward(ctx: Any, *args: Tensor) -> tuple:
        ctx.mark_non_differentiable(*[arg for arg in args if not arg.requires_grad])
        return args

    @staticmethod
    def backward(ctx: Any, *args: Any) -> tuple:
        return args


class BackwardHook:
    """One call's backward hooks (Note [Full backward hooks]): made by ``Module.__call__`` for each
    forward while the module has full backward hooks or backward pre-hooks."""

    def __init__(self, module: Any, user_hooks: list[Callable], user_pre_hooks: list[Callable]) -> None:
        self.user_hooks = user_hooks
        self.user_pre_hooks = user_pre_hooks
        self.module = module
        self.grad_outputs: tuple | None = None
        self.n_outputs = -1
        self.output_tensors_index: list[int] | None = None
        self.n_inputs = -1
        self.input_tensors_index: list[int] | None = None

    @staticmethod
    def _pack_with_none(indices: list[int], values: Any, size: int) -> tuple:
        res: list[Any] = [None] * size
        for idx, val in zip(indices, values):
            res[idx] = val
        return tuple(res)

    @staticmethod
    def _unpack_none(indices: list[int], values: Any) -> tuple:
        return tuple(values[idx] for idx in indices)

    def _set_user_hook(self, grad_fn: Any) -> None:
        def hook(grad_input: tuple, _: Any) -> tuple | None:
            if self.grad_outputs is None:  # reached without passing through the outputs: a double backward
                return None
            assert self.input_tensors_index is not None
            res = self._pack_with_none(self.input_tensors_index, grad_input, self.n_inputs)
            for user_hook in self.user_hooks:
                out = user_hook(self.module, res, self.grad_outputs)
                if out is None:
                    continue
                if len(out) != len(res):
                    raise RuntimeError("Backward hook returned an invalid number of grad_input, "
                                       f"got {len(out)}, but expected {len(res)}")
                res = out
            self.grad_outputs = None
            return self._unpack_none(self.input_tensors_index, res)

        grad_fn.register_hook(hook)

    def _apply_on_tensors(self, fn: Callable[[Any], None], args: tuple) -> tuple[tuple, list[int] | None]:
        tensors_idx = [i for i, arg in enumerate(args) if isinstance(arg, Tensor)]
        tensors = [args[i] for i in tensors_idx]
        if not (any(t.requires_grad for t in tensors) and grad_enabled.get()):
            return args, None
        new_tensors = BackwardHookFunction.apply(*tensors)
        if len(new_tensors) == 0:
            raise RuntimeError("Cannot set Module backward hook for a Module with no input Tensors.")
        grad_fns = [t.grad_fn for t in new_tensors
                    if t.grad_fn is not None and t.grad_fn.name() == "BackwardHookFunctionBackward"]
        if not grad_fns:
            raise RuntimeError("Error while setting up backward hooks. Please open an issue with a code sample to "
                               "reproduce this.")
        fn(grad_fns[0])
        arg_list = list(args)
        for idx, val in zip(tensors_idx, new_tensors):
            arg_list[idx] = val
        return (tuple(arg_list) if type(args) is tuple else type(args)(*arg_list)), tensors_idx

    def setup_input_hook(self, args: tuple) -> tuple:
        """The forward's arguments, their Tensors through a ``BackwardHookFunction`` whose node calls
        the hooks."""
        res, input_idx = self._apply_on_tensors(self._set_user_hook, args)
        self.n_inputs = len(args)
        self.input_tensors_index = input_idx
        return res

    def setup_output_hook(self, args: Any) -> Any:
        """The forward's output (a Tensor or a tuple), its Tensors through a ``BackwardHookFunction``
        whose node records ``grad_output`` and runs the pre-hooks."""
        def fn(grad_fn: Any) -> None:
            def hook(_: Any, grad_output: tuple) -> tuple | None:
                assert self.output_tensors_index is not None
                self.grad_outputs = self._pack_with_none(self.output_tensors_index, grad_output, self.n_outputs)
                if self.user_pre_hooks:
                    expected_len = len(self.grad_outputs)
                    for user_pre_hook in self.user_pre_hooks:
                        hook_grad_outputs = user_pre_hook(self.module, self.grad_outputs)
                        if hook_grad_outputs is None:
                            continue
                        if len(hook_grad_outputs) != expected_len:
                            raise RuntimeError("Backward pre hook returned an invalid number of grad_output, "
                                               f"got {len(hook_grad_outputs)}, but expected {expected_len}")
                        self.grad_outputs = hook_grad_outputs
                local_grad_outputs = self.grad_outputs
                if self.input_tensors_index is None:  # no input requires grad: the hooks run here
                    warnings.warn("Full backward hook is firing when gradients are computed with respect to module "
                                  "outputs since no inputs require gradients. See https://docs.pytorch.org/docs/main/"
                                  "generated/torch.nn.Module.html#torch.nn.Module.register_full_backward_hook for "
                                  "more details.", stacklevel=5)
                    grad_inputs = self._pack_with_none([], [], self.n_inputs)
                    for user_hook in self.user_hooks:
                        res = user_hook(self.module, grad_inputs, self.grad_outputs)
                        if res is not None and not (isinstance(res, tuple) and all(el is None for el in res)):
                            raise RuntimeError("Backward hook for Modules where no input requires gradient should "
                                               "always return None or None for all gradients.")
                    self.grad_outputs = None
                if local_grad_outputs is not None:
                    return tuple(local_grad_outputs[i] for i in self.output_tensors_index)
                return None

            grad_fn.register_hook(hook)

        is_tuple = isinstance(args, tuple)
        if not is_tuple:
            args = (args,)
        res, output_idx = self._apply_on_tensors(fn, args)
        self.n_outputs = len(args)
        self.output_tensors_index = output_idx
        return res if is_tuple else res[0]
