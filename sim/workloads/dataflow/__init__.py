"""dataflow: a DFModel mapping plan executed on the CU/MU grid.

The plan (mapping/) says which kernels run together in each partition and how big every
tile and weight is; the grid placement (mapping/placement.py) puts each kernel on CUs and
each buffer in MUs; the address plan gives every buffer its offset in its MUs
(allocators' static planner). One module per step:

- planning.py: ``plan_for``, the planning step (map or read the plan, place it, address it),
  a pure function a caller may run without simulating;
- compile.py: the plan and its placement turned into what every CU does, per partition, and
  ``CompiledRun``, what program.py and figures.py read of a run (so they import no params.py);
- params.py: the registered workload (``DataflowParams``: config keys, ``from_config``
  running the planning step then the compilation);
- program.py: the CU runtime (a controller runs the partitions in order; each CU runs its
  kernel's slice as a software pipeline over the tiles);
- figures.py: each partition's simulated time beside DFModel's analytic one and which of
  its terms (compute, memory, network) bounds it, and each kernel's activity;
- sharing.py: the weight design by static analysis (how many CUs each buffer's reference is
  copied to, the partial-free weight field per split that never borrows).
"""

from sim.workloads.dataflow.compile import (
    BufferSpec,
    CacheSpec,
    CacheStripe,
    PartitionProgram,
    SlotSpec,
    StripeRead,
    StripeSpec,
    TokenExchange,
    build_caches,
    build_partitions,
    check_expert_parallel,
    expert_route,
    kernel_collectives,
    reads_whole,
    token_exchanges,
)
from sim.workloads.dataflow.figures import KERNEL_COLUMNS, PARTITION_COLUMNS
from sim.workloads.dataflow.params import DataflowParams
from sim.workloads.dataflow.planning import PlannedDataflow, plan_addresses, plan_for, resolve_plan
from sim.workloads.dataflow.program import Dataflow
from sim.workloads.dataflow.sharing import BufferSharing, WeightDesign, design_of, min_weight_bits, weight_design

__all__ = [
    "KERNEL_COLUMNS", "PARTITION_COLUMNS", "BufferSharing", "BufferSpec", "CacheSpec", "CacheStripe", "Dataflow",
    "DataflowParams", "PartitionProgram", "PlannedDataflow", "SlotSpec", "StripeRead", "StripeSpec", "TokenExchange",
    "WeightDesign", "build_caches", "build_partitions", "check_expert_parallel", "design_of", "expert_route",
    "kernel_collectives", "min_weight_bits", "plan_addresses", "plan_for", "reads_whole", "resolve_plan",
    "token_exchanges", "weight_design",
]
