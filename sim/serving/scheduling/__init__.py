"""Serving schedulers: one interface (interface.py), the step records they answer with
(output.py), and the registry of the implementations by name.

slot.py is the toy's (kv-decode, spec-decode: a worker CU a sequence);
sim/workloads/serve/batcher.py is the real models' (serve on a chip, serve-system on a group of
sockets: its backends say how time passes and where KV pages come from).
"""

from sim.registry import Registry

SCHEDULERS: Registry[type] = Registry("serving scheduler", packages=("sim.serving.scheduling", "sim.workloads.serve"))
