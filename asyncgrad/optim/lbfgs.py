"""L-BFGS with an ``async def`` closure, a line-by-line port of torch.optim.LBFGS.

torch's ``step(closure)`` calls the closure synchronously, and the closure runs the backward.
Here a backward is a coroutine, so the closure is ``async def`` and ``step`` is too:
``loss = await opt.step(closure)``. Everything else (two-loop recursion, the first step
scaled by ``1 / |g|_1``, the strong-Wolfe line search with cubic interpolation, the stopping
tests and the state kept between calls) is torch's, so float64 runs agree with torch step by
step. Scalars that torch keeps as 0-d tensors (``t``, ``ys``, ``ro``, ``H_diag``) are Python
floats here: the same float64 arithmetic, without a tensor per scalar.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable

from asyncgrad.factories import zeros
from asyncgrad.graph.grad_mode import enable_grad, no_grad
from asyncgrad.ops.linalg import matmul
from asyncgrad.ops.shape import cat
from asyncgrad.optim.optimizer import Optimizer, ParamsT
from asyncgrad.tensor import Tensor

Closure = Callable[[], Awaitable[Any]]


def _dot(a: Tensor, b: Tensor) -> float:
    return matmul(a, b).item()


def _cubic_interpolate(x1: float, f1: float, g1: float, x2: float, f2: float, g2: float,
                       bounds: tuple[float, float] | None = None) -> float:
    """Minimiser of the cubic through two points with their slopes, clamped to ``bounds``."""
    if bounds is not None:
        xmin_bound, xmax_bound = bounds
    else:
        xmin_bound, xmax_bound = (x1, x2) if x1 <= x2 else (x2, x1)
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1**2 - g1 * g2
    if d2_square >= 0:
        d2 = d2_square**0.5
        if x1 <= x2:
            min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
        return min(max(min_pos, xmin_bound), xmax_bound)
    return (xmin_bound + xmax_bound) / 2.0


async def _strong_wolfe(obj_func: Callable[[list[Tensor], float, Tensor], Awaitable[tuple[float, Tensor]]],
                        x: list[Tensor], t: float, d: Tensor, f: float, g: Tensor, gtd: float,
                        c1: float = 1e-4, c2: float = 0.9, tolerance_change: float = 1e-9,
                        max_ls: int = 25) -> tuple[float, Tensor, float, int]:
    """torch's strong-Wolfe line search (from minFunc): bracket, then zoom by cubic interpolation."""
    d_norm = d.abs().max().item()
    g = g.clone()
    f_new, g_new = await obj_func(x, t, d)
    ls_func_evals = 1
    gtd_new = _dot(g_new, d)

    t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g, gtd
    done = False
    ls_iter = 0
    while ls_iter < max_ls:
        if f_new > (f + c1 * t * gtd) or (ls_iter > 1 and f_new >= f_prev):
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.clone()], [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, bracket_f, bracket_g = [t], [f_new], [g_new]
            done = True
            break
        if gtd_new >= 0:
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.clone()], [gtd_prev, gtd_new]
            break
        # interpolate, extrapolating at most tenfold
        min_step = t + 0.01 * (t - t_prev)
        max_step = t * 10
        tmp = t
        t = _cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds=(min_step, max_step))
        t_prev, f_prev, g_prev, gtd_prev = tmp, f_new, g_new.clone(), gtd_new
        f_new, g_new = await obj_func(x, t, d)
        ls_func_evals += 1
        gtd_new = _dot(g_new, d)
        ls_iter += 1

    if ls_iter == max_ls:  # reached the maximum number of evaluations
        bracket, bracket_f, bracket_g = [0.0, t], [f, f_new], [g, g_new]

    # zoom: shrink the bracket until a point satisfies the strong Wolfe conditions
    insuf_progress = False
    low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_interpolate(bracket[0], bracket_f[0], bracket_gtd[0], bracket[1], bracket_f[1], bracket_gtd[1])
        # Too close to a bracket end, or outside it: move away, unless the last try made progress.
        eps = 0.1 * (max(bracket) - min(bracket))
        if min(max(bracket) - t, t - min(bracket)) < eps:
            if insuf_progress or t >= max(bracket) or t <= min(bracket):
                t = max(bracket) - eps if abs(t - max(bracket)) < abs(t - min(bracket)) else min(bracket) + eps
                insuf_progress = False
            else:
                insuf_progress = True
        else:
            insuf_progress = False
        f_new, g_new = await obj_func(x, t, d)
        ls_func_evals += 1
        gtd_new = _dot(g_new, d)
        ls_iter += 1
        if f_new > (f + c1 * t * gtd) or f_new >= bracket_f[low_pos]:
            bracket[high_pos], bracket_f[high_pos] = t, f_new
            bracket_g[high_pos], bracket_gtd[high_pos] = g_new.clone(), gtd_new
            low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high_pos] - bracket[low_pos]) >= 0:
                bracket[high_pos], bracket_f[high_pos] = bracket[low_pos], bracket_f[low_pos]
                bracket_g[high_pos], bracket_gtd[high_pos] = bracket_g[low_pos], bracket_gtd[low_pos]
            bracket[low_pos], bracket_f[low_pos] = t, f_new
            bracket_g[low_pos], bracket_gtd[low_pos] = g_new.clone(), gtd_new

    return bracket_f[low_pos], bracket_g[low_pos], bracket[low_pos], ls_func_evals


class LBFGS(Optimizer):
    """torch.optim.LBFGS: ``loss = await opt.step(closure)``, where ``closure`` is an
    ``async def`` that zeroes the gradients, runs the forward, awaits ``loss.backward()`` and
    returns the loss. It is called several times per step, in grad mode.

    One parameter group only, all parameters on one device (torch's limits too).
    ``line_search_fn`` is ``None`` (fixed step ``lr``) or ``"strong_wolfe"``.
    """

    def __init__(self, params: ParamsT, lr: float = 1, max_iter: int = 20, max_eval: int | None = None,
                 tolerance_grad: float = 1e-7, tolerance_change: float = 1e-9, history_size: int = 100,
                 line_search_fn: str | None = None) -> None:
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        defaults = dict(lr=lr, max_iter=max_iter, max_eval=max_eval, tolerance_grad=tolerance_grad,
                        tolerance_change=tolerance_change, history_size=history_size, line_search_fn=line_search_fn)
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params: list[Tensor] = self.param_groups[0]["params"]

    def _gather_flat_grad(self) -> Tensor:
        views = []
        for p in self._params:
            grad = p.grad
            views.append(zeros(p.numel(), dtype=p.dtype, device=p.device) if grad is None else grad.reshape(-1))
        return cat(views, 0)

    def _add_grad(self, step_size: float, update: Tensor) -> None:
        offset = 0
        for p in self._params:
            numel = p.numel()
            p.add_(update[offset:offset + numel].reshape(p.shape) * step_size)
            offset += numel

    def _set_param(self, params_data: list[Tensor]) -> None:
        for p, pdata in zip(self._params, params_data):
            p.copy_(pdata)

    @staticmethod
    async def _evaluate(closure: Closure) -> Any:
        with enable_grad():
            return await closure()

    async def _directional_evaluate(self, closure: Closure, x: list[Tensor], t: float,
                                    d: Tensor) -> tuple[float, Tensor]:
        """Loss and flat gradient at ``x + t * d``; the parameters are put back to ``x`` after."""
        self._add_grad(t, d)
        loss = float(await self._evaluate(closure))
        flat_grad = self._gather_flat_grad()
        self._set_param(x)
        return loss, flat_grad

    @no_grad()
    async def step(self, closure: Closure) -> Any:
        """Up to ``max_iter`` L-BFGS iterations; returns the closure's first loss, as torch does."""
        if not callable(closure):
            raise TypeError("LBFGS.step() needs a closure: an async def that runs the forward, awaits "
                            "loss.backward() and returns the loss")
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        line_search_fn, history_size = group["line_search_fn"], group["history_size"]

        # the state lives under the first parameter, as in torch (state_dict() shows it there)
        state = self.state.setdefault(self._params[0], {})
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        orig_loss = await self._evaluate(closure)
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1

        flat_grad = self._gather_flat_grad()
        opt_cond = flat_grad.abs().max().item() <= tolerance_grad
        if opt_cond:  # already optimal
            return orig_loss

        d, t = state.get("d"), state.get("t")
        old_dirs, old_stps, ro = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
        H_diag, prev_flat_grad, prev_loss = state.get("H_diag"), state.get("prev_flat_grad"), state.get("prev_loss")

        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1

            # the direction: steepest descent first, then the two-loop recursion over the history
            if state["n_iter"] == 1:
                d = flat_grad.neg()
                old_dirs, old_stps, ro = [], [], []
                H_diag = 1.0
            else:
                y = flat_grad - prev_flat_grad
                s = d * t
                ys = _dot(y, s)
                if ys > 1e-10:  # keep the pair only if the curvature condition holds
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    H_diag = ys / _dot(y, y)
                num_old = len(old_dirs)
                if "al" not in state:
                    state["al"] = [None] * history_size
                al = state["al"]
                q = flat_grad.neg()
                for i in range(num_old - 1, -1, -1):
                    al[i] = _dot(old_stps[i], q) * ro[i]
                    q.add_(old_dirs[i] * -al[i])
                d = r = q * H_diag
                for i in range(num_old):
                    be_i = _dot(old_dirs[i], r) * ro[i]
                    r.add_(old_stps[i] * (al[i] - be_i))

            if prev_flat_grad is None:
                prev_flat_grad = flat_grad.clone()
            else:
                prev_flat_grad.copy_(flat_grad)
            prev_loss = loss

            # the step length: scaled on the very first iteration only
            if state["n_iter"] == 1:
                t = min(1.0, 1.0 / flat_grad.abs().sum().item()) * lr
            else:
                t = lr

            gtd = _dot(flat_grad, d)
            if gtd > -tolerance_change:  # not a descent direction
                break

            ls_func_evals = 0
            if line_search_fn is not None:
                if line_search_fn != "strong_wolfe":
                    raise RuntimeError("only 'strong_wolfe' is supported")
                x_init = [p.clone() for p in self._params]

                async def obj_func(x: list[Tensor], t: float, d: Tensor) -> tuple[float, Tensor]:
                    return await self._directional_evaluate(closure, x, t, d)

                loss, flat_grad, t, ls_func_evals = await _strong_wolfe(
                    obj_func, x_init, t, d, loss, flat_grad, gtd, max_ls=max_eval - current_evals)
                self._add_grad(t, d)
                opt_cond = flat_grad.abs().max().item() <= tolerance_grad
            else:
                self._add_grad(t, d)
                if n_iter != max_iter:
                    # re-evaluate unless this is the last iteration (no use for the value then)
                    loss = float(await self._evaluate(closure))
                    flat_grad = self._gather_flat_grad()
                    opt_cond = flat_grad.abs().max().item() <= tolerance_grad
                    ls_func_evals = 1

            current_evals += ls_func_evals
            state["func_evals"] += ls_func_evals

            if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                break
            if (d * t).abs().max().item() <= tolerance_change:  # the step would not move anything
                break
            if abs(loss - prev_loss) < tolerance_change:  # the loss no longer changes
                break

        state.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=H_diag,
                     prev_flat_grad=prev_flat_grad, prev_loss=prev_loss)
        return orig_loss
