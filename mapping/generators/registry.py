"""The workload generators of `rdasim map`, by ``workload.kind``.

A generator registers itself where it is defined (``@GENERATORS.register("llm")``) and is
called with its [workload.KIND] table as keyword arguments, plus ``word`` (bytes per element)
and ``name`` (the label in results); mapping/specs.py builds a workload from a spec this way.
"""

from __future__ import annotations

from typing import Callable

from mapping.registry import Registry
from mapping.workload import Workload

WorkloadGenerator = Callable[..., Workload]

GENERATORS: Registry[WorkloadGenerator] = Registry("workload generator", packages=("mapping.generators",))
