"""The workloads, one module each, every framework's version side by side:
a generic `build` written once against `frameworks.Graph`'s ops, and the
hand-written numpy forward/backward beside it."""

from . import w1_chain, w2_fanin, w3_mlp, w4_branches, w5_scale, w6_memory, w7_heartbeat, w8_lenet
from .common import Outcome, Workload

WORKLOADS: dict[str, Workload] = {
    m.WORKLOAD.key: m.WORKLOAD for m in (w1_chain, w2_fanin, w3_mlp, w4_branches, w5_scale, w6_memory, w7_heartbeat,
                                  w8_lenet)
}

__all__ = ["WORKLOADS", "Outcome", "Workload"]
