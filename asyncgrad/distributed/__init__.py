"""Beyond one machine: model-parallel and pipelined training across workers (issue 13).

``async with dist.cluster(backend="local" | "ray", workers=2) as cluster``; ``await
cluster.remote(i, Stage, *args)`` builds a module on worker ``i``; awaiting it runs its forward
there and gives local, differentiable tensors whose backward crosses back to the worker
(Note [Backward across workers] in remote.py). This package sits above nn and optim; nothing
below imports it.
"""

from asyncgrad.distributed import autograd
from asyncgrad.distributed._backends import WorkerDied, WorkerError
from asyncgrad.distributed.optim import DistributedOptimizer
from asyncgrad.distributed.parallel import DataParallel
from asyncgrad.distributed.remote import Cluster, RemoteCallBackward, RemoteModule, cluster

__all__ = ["Cluster", "DataParallel", "DistributedOptimizer", "RemoteCallBackward", "RemoteModule", "WorkerDied",
           "WorkerError", "autograd", "cluster"]
