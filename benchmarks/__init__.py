"""asyncgrad against its peers: the workloads of DESIGN.md's "What fast means".

Run `python -m benchmarks --help`. Each framework runs in a subprocess of its
own (`python -m benchmarks.worker`), so imports, allocators and thread pools
never leak from one framework's numbers into another's.
"""
