"""The dataflow workload's parameters: its config keys, and the compiled partitions and caches
a run executes, built from the planning step's result (planning.py) by compile.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from mapping.chips import ChipSpec
from mapping.placement import GridPlacement, PlacementError
from mapping.plan import MappingPlan
from sim.keys import Field, Issue, Table
from sim.workloads import WORKLOADS, ChipContext, Workload
from sim.workloads.capabilities import Capabilities
from sim.workloads.dataflow.compile import IN_MUS, CacheSpec, Homes, PartitionProgram, build_caches, build_partitions
from sim.workloads.dataflow.figures import summarise
from sim.workloads.dataflow.planning import plan_for
from sim.workloads.dataflow.program import Dataflow


@WORKLOADS.register("dataflow")
@dataclass(frozen=True)
class DataflowParams(Workload):
    kind: str = "dataflow"
    partitions: tuple[PartitionProgram, ...] = ()
    passes: int = 1  # graph passes the run makes
    controller: int = 0  # unit id of the controlling CU
    plan_name: str = ""
    seconds_per_batch: float = 0.0  # DFModel's figure
    pass_seconds: float = 0.0  # DFModel's time of one graph pass (sum of partition times)
    caches: tuple[CacheSpec, ...] = ()  # kept in MUs through the run (a decode step's KV cache)
    skew: float = 0.0  # Zipf exponent of expert popularity for kernels over routed experts
    word: int = 2  # bytes per element (the reduction of a collective adds elements)
    tp: int = 1  # chips of a TP group (grid-fidelity systems)
    token_unit: str = "graph passes"  # what a graph pass processes (the plan says): the run's tokens ...
    tokens_per_pass: int = 1  # ... and how many of them
    homes: Homes = IN_MUS  # where weights and caches live (MUs, or memory tiers)
    weight_bytes: int = 0  # the model's weights on this chip (every layer's): homed in homes.weights
    kv_bytes: int = 0  # the caches at the start (every layer's): homed in homes.kv
    kv_growth: int = 0  # bytes they grow each pass

    # what the workload seam asks of the class (sim/workloads/__init__.py), kept together
    SECTION: ClassVar[str] = "dataflow"
    CAPABILITIES: ClassVar[Capabilities] = Capabilities(system=False, maps_graph=True)  # else a plan file
    TABLES: ClassVar[tuple[str, ...]] = ("run_partitions", "run_kernels")
    KEYS: ClassVar[Table] = Table({
        "plan": Field("str", "", "plan.json written by `rdasim map --out DIR` (else the graph keys are mapped here)"),
        "passes": Field("int", 1, "graph passes to simulate", min=1),
        "placement_seed": Field("int", 0, "seed of the placement's local search restarts", min=0),
        "address_method": Field("choice", "exact", "static planner giving buffers their MU addresses",
                                choices=("exact", "layergroup", "greedy")),
        "address_budget": Field("time", 5.0, "seconds the exact address planner may take per MU", min=0.01),
        "skew": Field("float", 0.0, "Zipf exponent of expert popularity when tokens are routed to experts "
                      "(0: uniform); each tile's routes are drawn from the run's seed", min=0.0),
        "weights": Field("str", "mu", "where the weights live: mu (the plan's choice: resident in MUs, or streamed "
                         "from DRAM when alone in a partition) or a memory tier of the chip (\"hbm\": every weight "
                         "streamed from it a slice per tile; a later tier, \"ddr\": copied into the first at the "
                         "start, the model switch, then streamed from there)"),
        "kv": Field("str", "mu", "where the KV caches live: mu (in MUs when they fit, else read from DRAM) or a "
                    "memory tier of the chip (read from it every pass, new entries written to it)"),
        "batched_reads": Field("choice", "whole", "what a CU of a GEMM batched over heads (outer > 1) reads of each "
                               "input tile: whole (every GEMM's CUs read all of it, the first model of it) or share "
                               "(its heads' rows only, as attention needs)", choices=("whole", "share")),
    }, doc="a DFModel plan run on the grid")

    @classmethod
    def config_issues(cls, run: dict) -> list[Issue]:
        if run["noc"]["jitter"]:
            return [Issue("noc.jitter", "must be 0 for a dataflow run: its tile writes from one CU to one MU "
                          "are assumed to arrive in order")]
        return []

    @classmethod
    def from_config(cls, kind: str, d: dict, chip: ChipContext, issues: list[Issue]) -> "DataflowParams":
        """The planning step (map or read the plan, place it, give its buffers addresses), then
        the compilation of its result; a plan that does not fit is one issue."""
        spec = chip.spec
        assert spec is not None, "dataflow runs on one chip: only system workloads are built without a chip spec"
        homes = _homes(d, spec, issues)
        if homes is None:
            return cls()
        try:
            planned = plan_for({**d, "weights": homes.weights, "kv": homes.kv}, spec, chip.room, chip.system)
        except (PlacementError, ValueError, KeyError, OSError) as exc:
            issues.append(Issue("workload.dataflow", str(exc)))
            return cls()
        return cls.from_plan(planned.plan, planned.placement, spec, d["passes"], d["skew"], homes,
                             d["batched_reads"] == "share")

    @classmethod
    def from_plan(cls, plan: MappingPlan, placement: GridPlacement, spec: ChipSpec,
                  passes: int = 1, skew: float = 0.0, homes: Homes = IN_MUS,
                  batched_share: bool = False, multicast: bool = False) -> "DataflowParams":
        """Compile a plan and its addressed placement into the partitions every CU runs
        (``multicast``: build_partitions')."""
        parts = build_partitions(plan, placement, spec, homes, batched_share, multicast)
        layers = max(1, plan.layers_per_stage)
        weights = sum(int(round(k.weight_bytes)) for k in plan.kernels) * layers if homes.weights != "mu" else 0
        kv = growth = 0
        if homes.kv != "mu":
            kv = sum(int(round(k.extra_dram_bytes)) for k in plan.kernels if k.role.startswith("read:")) * layers
            growth = sum(int(round(k.extra_dram_bytes)) for k in plan.kernels if k.role.startswith("append:")) * layers
        return cls("dataflow", parts, passes, int(spec.cu_tiles()[0]), plan.workload, plan.seconds_per_batch,
                   sum(p.analytic_seconds for p in parts), build_caches(placement), skew, plan.word, max(1, plan.tp),
                   plan.pass_unit, plan.units_per_pass, homes, weights, kv, growth)

    @property
    def work_items(self) -> int:
        return self.passes

    def program(self, cfg) -> Dataflow:
        return Dataflow(self, cfg)

    def figures(self, logged: list, clock_hz: float) -> tuple[dict, dict]:
        """Per-partition simulated and analytic seconds, per-kernel activity: summary and tables."""
        return summarise(self, logged, clock_hz)


def _homes(d: dict, spec: ChipSpec, issues: list[Issue]) -> Homes | None:
    """Where weights and caches live: "mu" or a tier of the chip (an issue naming the chip's tiers
    otherwise)."""
    tiers = [t.name for t in spec.tiers]
    ok = True
    for key in ("weights", "kv"):
        if d[key] != "mu" and d[key] not in tiers:
            known = ", ".join(["mu", *tiers])
            issues.append(Issue(f"workload.dataflow.{key}", f"{d[key]!r}: chip {spec.name!r} has no such memory "
                                f"(mu or one of its tiers: {known})"))
            ok = False
    if not ok:
        return None
    return Homes(d["weights"], d["kv"], tiers[0] if tiers else "")
