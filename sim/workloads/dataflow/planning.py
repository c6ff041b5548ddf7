"""The planning step of a dataflow run: the DFModel plan (read from a plan file, or mapped
here with the MILP from the graph keys), its grid placement (the placement search) and
every buffer's address in its MUs (allocators' static planner).

``plan_for`` is the whole step, a pure function of the [workload.dataflow] table and the
chip: the workload's ``from_config`` calls it and compiles the result, and a caller that
wants the plan without simulating it calls it alone.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from mapping.chips import ChipSpec
from mapping.placement import GridPlacement, MuRoom, PlacementError, place_on_grid
from mapping.plan import MappingPlan
from mapping.systems import System
from sim.workloads.dataflow.compile import check_expert_parallel


@dataclass(frozen=True)
class PlannedDataflow:
    """A plan and its grid placement: what the CUs' programs are compiled from."""

    plan: MappingPlan
    placement: GridPlacement  # with every stripe's MU address once ``plan_for`` has planned them


def plan_for(d: dict, spec: ChipSpec, room: MuRoom | None = None, system: System | None = None) -> PlannedDataflow:
    """Map (or read), place and address the plan of a resolved [workload.dataflow] table ``d`` on
    ``spec``'s grid (``room``: how an MU gives out room under the run's policy; ``system``: the
    grid chips of a system it runs over). Raises PlacementError, ValueError, KeyError or OSError
    saying what does not fit or is missing."""
    planned = resolve_plan(d, spec, room, system)
    check_expert_parallel(planned.plan)
    placement = planned.placement
    if d.get("kv", "mu") != "mu":  # the caches are homed in a memory tier: none takes MU room
        placement = replace(placement, caches=())
    placement = plan_addresses(placement, spec.mu_bytes, d["address_method"], d["address_budget"])
    return replace(planned, placement=placement)


def weights_streamed(plan: MappingPlan) -> MappingPlan:
    """The plan with every weight kernel streaming its weight a slice per tile (weights homed off
    chip): no weight takes MU room."""
    return replace(plan, kernels=tuple(replace(k, streamed=True) if k.weight_bytes > 0 else k for k in plan.kernels))


def map_placement(plan: MappingPlan) -> GridPlacement | None:
    """The addressed placement `rdasim map` writes beside a plan: a feasible single-chip plan on
    an RDA grid preset, placed for the default memory policy (virtual, 4 KiB blocks; a run with
    another policy places it again); None for any other plan. Raises PlacementError if it does
    not fit."""
    from mapping.chips import RDA_PRESETS
    from sim.memory.policies import MuGeometry, policy_params

    spec = RDA_PRESETS.get(plan.chip)
    if spec is None or not plan.feasible or plan.chips != 1:
        return None
    room = policy_params("virtual").room(MuGeometry(spec.mu_bytes, spec.mu_word_bytes))
    return plan_addresses(place_on_grid(plan, spec, 0, room), spec.mu_bytes)


def plan_addresses(placement: GridPlacement, capacity: int, method: str = "exact", budget: float = 5.0,
                   alignment: int = 64) -> GridPlacement:
    """Every stripe's offset in its MU from allocators' static planner: a stripe lives while its
    partition runs (lifetime [p, p + 1) for the p-th partition), so partitions share the room;
    each stripe takes the room its MU's policy gives it (``placement.room.reserve``). A stripe
    that does not fit raises PlacementError naming the MU, the buffer and the shortfall."""
    from allocators.errors import AllocatorError
    from allocators.lifetimes import Buffer, Problem
    from allocators.planner import plan as plan_buffers

    per_mu: dict[int, list[tuple[str, int, int, int]]] = {}  # mu -> (id, first, last + 1 partition, bytes)
    for p, part in enumerate(placement.partitions):
        for b, buf in enumerate(part.buffers):
            for s, st in enumerate(buf.stripes):
                per_mu.setdefault(st.mu, []).append((f"{p}/{b}/{s}", p, p + 1, placement.room.reserve(st.bytes)))
    end = len(placement.partitions)
    for c, cache in enumerate(placement.caches):  # caches live through the run (at their first size)
        for s, st in enumerate(cache.stripes):
            per_mu.setdefault(st.mu, []).append((f"cache/{c}/{s}", 0, end, placement.room.reserve(st.bytes)))
    offsets: dict[str, int] = {}
    for mu, items in sorted(per_mu.items()):
        problem = Problem(tuple(Buffer(i, a, b, n, alignment) for i, a, b, n in items))
        try:
            result = plan_buffers(problem, method, capacity=capacity, budget=budget)
        except AllocatorError as exc:
            raise PlacementError(f"MU at tile {mu}: {exc}") from None
        if result.peak > capacity:
            worst = max(items, key=lambda x: x[3])
            where = worst[0].split("/")  # the stripe's id: partition/buffer/stripe or cache/cache/stripe
            name = (placement.caches[int(where[1])].name if where[0] == "cache"
                    else placement.partitions[int(where[0])].buffers[int(where[1])].name)
            raise PlacementError(f"MU at tile {mu} needs {result.peak:,} B for its stripes (largest: {name}, "
                                 f"{worst[3]:,} B) but holds {capacity:,} B: {result.peak - capacity:,} B short")
        offsets.update(result.offsets)
    parts = []
    for p, part in enumerate(placement.partitions):
        bufs = tuple(replace(buf, stripes=tuple(replace(st, address=offsets[f"{p}/{b}/{s}"])
                                                for s, st in enumerate(buf.stripes)))
                     for b, buf in enumerate(part.buffers))
        parts.append(replace(part, buffers=bufs))
    caches = tuple(replace(c, stripes=tuple(replace(st, address=offsets[f"cache/{ci}/{s}"])
                                            for s, st in enumerate(c.stripes)))
                   for ci, c in enumerate(placement.caches))
    return replace(placement, partitions=tuple(parts), caches=caches)


def resolve_plan(d: dict, spec: ChipSpec, room: MuRoom | None = None,
                 system: System | None = None) -> PlannedDataflow:
    """The plan and its placement (no addresses yet): from a plan file, or mapped here from the
    graph keys (over ``system`` when the chips are grid chips of a system, else onto the one chip)."""
    from mapping.specs import map_graph_keys, read_plan_file

    off_chip = d.get("weights", "mu") != "mu"  # weights homed in a memory tier
    if d.get("plan"):
        plan, data = read_plan_file(d["plan"])
        if plan.chip != spec.name:
            raise ValueError(f"the plan maps onto {plan.chip!r}; this run's chip is {spec.name!r}")
        _check_chips(plan, system)
        stored = data.get("placement")
        room = room or MuRoom(spec.mu_bytes)
        if off_chip:
            plan = weights_streamed(plan)
        elif stored and MuRoom(**stored["room"]) == room and stored.get("seed") == d.get("placement_seed", 0):
            return PlannedDataflow(plan, GridPlacement.from_dict(stored))
        return PlannedDataflow(plan, place_on_grid(plan, spec, d.get("placement_seed", 0), room))  # this run's policy
    from mapping.systems import LinkKind, NetworkDim, Parallelism

    if system is None:
        system = System(1, spec.dfmodel(), (NetworkDim(LinkKind.RING, 1, 1.0, Parallelism.TP),))
    mapping = {**(d.get("mapping") or {}), "weights_off_chip": off_chip}
    plan = map_graph_keys("dataflow", d.get("graph") or {}, mapping, system)
    if off_chip:
        plan = weights_streamed(plan)  # what the mapper assumed (mapping.kernel_costs, weights_off_chip)
    _check_chips(plan, system)
    return PlannedDataflow(plan, place_on_grid(plan, spec, d.get("placement_seed", 0), room))


def _check_chips(plan: MappingPlan, system: System | None) -> None:
    """A plan fits the run's chips: one chip, or a system of grid chips it runs on whole."""
    if not plan.feasible:
        raise ValueError(f"the plan is {plan.status}: {plan.reason}")
    chips = system.chips if system is not None else 1
    if plan.chips != chips:
        raise ValueError(f"the plan is for {plan.chips} chips; this run has {chips}")
    if plan.pp > 1:
        raise ValueError(f"the plan has {plan.pp} pipeline stages; grid-fidelity chips run TP and DP plans "
                         "(simulate pipelines with the pipeline workload on box chips)")
