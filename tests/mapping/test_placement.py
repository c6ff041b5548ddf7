"""Grid placement and address plans: invariants, the bound, determinism; plans survive JSON."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mapping.chips import RDA_PRESETS
from mapping.graph import Kernel
from mapping.placement import GridPlacement, MuRoom, PlacementError, _fewer_cus, cu_counts, place_on_grid
from mapping.plan import MappingPlan
from sim.workloads.dataflow import plan_addresses
from tests.sim.workloads.dataflow.harness import EW, GG, GW, chain, plan_of

SPEC = RDA_PRESETS["plasticine"]


def _gpt_like():
    ks = [Kernel("ln", EW, 768, 1, 512), Kernel("q", GW, 768, 768, 512), Kernel("attn", GG, 512, 64, 512, 12),
          Kernel("proj", GW, 768, 768, 512), Kernel("ffn0", GW, 3072, 768, 512), Kernel("gelu", EW, 3072, 1, 512),
          Kernel("ffn1", GW, 768, 3072, 512)]
    return plan_of(chain(ks), 512, 32, partitions=2)


@pytest.fixture(scope="module")
def gpt():
    return _gpt_like()


def test_plan_json_round_trip_is_identity(gpt):
    again = MappingPlan.from_dict(json.loads(json.dumps(gpt.to_dict())))
    assert again == MappingPlan.from_dict(json.loads(json.dumps(again.to_dict())))
    assert again.kernels == gpt.kernels and again.tensors == gpt.tensors and again.partitions == gpt.partitions
    placement = plan_addresses(place_on_grid(gpt, SPEC, seed=3), SPEC.mu_bytes)
    assert GridPlacement.from_dict(json.loads(json.dumps(placement.to_dict()))) == placement


def test_no_cu_holds_two_kernels_and_no_mu_holds_more_than_its_bytes(gpt):
    placement = plan_addresses(place_on_grid(gpt, SPEC, seed=1), SPEC.mu_bytes)
    cus, mus = set(SPEC.cu_tiles().tolist()), set(SPEC.mu_tiles().tolist())
    for part in placement.partitions:
        used = [c for k in part.kernels for c in k.cus]
        assert len(used) == len(set(used)) and set(used) <= cus
        held: dict[int, list[tuple[int, int]]] = {}
        for b in part.buffers:
            for s in b.stripes:
                assert s.mu in mus
                held.setdefault(s.mu, []).append((s.address, s.address + s.bytes))
        for spans in held.values():  # addresses: inside the MU and never overlapping
            spans.sort()
            assert spans[0][0] >= 0 and spans[-1][1] <= SPEC.mu_bytes
            assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
        assert part.traffic >= part.traffic_bound > 0


def test_every_byte_of_every_buffer_has_one_stripe(gpt):
    placement = place_on_grid(gpt, SPEC)
    for part in placement.partitions:
        for b in part.buffers:
            if b.kind == "weight":
                ranges = sorted((s.lo, s.hi) for s in b.stripes)
                assert ranges[0][0] == 0 and ranges[-1][1] == b.tile_bytes
                assert all(x[1] == y[0] for x, y in zip(ranges, ranges[1:]))
            else:  # each writer's share of a tile, cut into contiguous stripes
                covered = np.zeros(b.tile_bytes, dtype=int)
                for s in b.stripes:
                    covered[s.lo:s.hi] += 1
                    assert s.bytes == (s.hi - s.lo) * b.depth
                assert (covered == 1).all()


def test_placement_is_deterministic_for_a_seed(gpt):
    assert place_on_grid(gpt, SPEC, seed=5) == place_on_grid(gpt, SPEC, seed=5)


@settings(max_examples=40)
@given(st.lists(st.floats(0.0, 1e12), min_size=1, max_size=20), st.integers(20, 64), st.integers(0, 8))
def test_cu_counts_give_each_kernel_a_cu_and_stay_within_the_chip(flops, cores, most):
    counts = cu_counts(flops, cores, most)
    assert all(c >= 1 for c in counts) and sum(counts) <= cores
    if most:
        assert max(counts) <= max(1, most)
    if not most and sum(flops) > 0:  # proportional: nobody gets two CUs more than its share
        total = sum(flops)
        assert all(c <= max(1, cores * f / total) + 1 for c, f in zip(counts, flops))


def _brute_force(F, D):
    """The optimum of a tiny bipartite assignment by trying every CU and MU permutation."""
    import itertools

    slots, bins = F.shape
    best = np.inf
    for cu in itertools.permutations(range(D.shape[0]), slots):
        for mu in itertools.permutations(range(D.shape[1]), bins):
            best = min(best, float((F * D[np.ix_(cu, mu)]).sum()))
    return best


@settings(max_examples=25)
@given(st.integers(0, 10_000))
def test_local_search_and_bound_bracket_the_optimum_on_small_grids(seed):
    from mapping.chips import ChipSpec
    from mapping.placement import _assign, _bound, _distances

    spec = ChipSpec(rows=2, cols=4)
    D = _distances(spec, spec.cu_tiles(), spec.mu_tiles())
    F = np.random.default_rng(seed).integers(0, 5, size=(3, 3)).astype(float)
    opt = _brute_force(F, D)
    _, _, found = _assign(F, D, seed, restarts=4)
    assert _bound(F, D) <= opt + 1e-9 <= found + 1e-9


def test_by_bytes_gives_a_kernel_cus_for_its_share_of_the_streamed_bytes():
    """A weight GEMM streaming 8 MiB and an attention reading 8 MiB of cache with an eighth of
    its FLOPs: by FLOPs attention gets 1/9 of the 64 CUs; by the larger of its FLOP share (1/9)
    and byte share (1/2) it gets (1/2) / (8/9 + 1/2) = 9/25 of them, the GEMM 16/25."""
    from sim.workloads.dataflow.planning import weights_streamed

    mib8 = 8 * 1024 * 1024
    ks = [Kernel("w", GW, 2048, 2048, 64), Kernel("attn", GG, 512, 128, 64, 8, extra_dram_bytes=mib8)]
    plan = weights_streamed(plan_of(chain(ks), 64, 64, partitions=1))
    w, attn = plan.kernels
    assert w.streamed and w.weight_bytes == mib8 and attn.flop * 8 == w.flop
    for by_bytes, share in ((False, 1 / 9), (True, 9 / 25)):
        placed = place_on_grid(plan, SPEC, 0, by_bytes=by_bytes)
        cus = {k.name: len(k.cus) for k in placed.partitions[0].kernels}
        assert sum(cus.values()) == SPEC.cu_count
        assert abs(cus["attn"] - share * SPEC.cu_count) <= 1


def test_by_io_gives_an_elementwise_kernel_cus_for_the_bytes_through_its_links():
    """An elementwise kernel after a GEMM reads the GEMM's 2 MiB output a pass (512 tokens x
    2,048 x 2 B; its own output leaves the graph) with 2,048 x 512 FLOPs: by FLOPs it gets 2 of
    the 64 CUs; counting what one CU computes while its link (one flit a cycle) moves those
    2 MiB, that work's share of them (10)."""
    ks = [Kernel("g", GW, 2048, 16, 512), Kernel("e", EW, 2048, 1, 512)]
    plan = plan_of(chain(ks), 512, 64, partitions=1)
    g, e = plan.kernels
    io = 2048 * 512 * plan.word
    work = io * SPEC.cu_flops_per_cycle / (SPEC.flit_bits / 8)
    assert work > 5 * e.flop
    for by_io, w in ((False, e.flop), (True, work)):
        placed = place_on_grid(plan, SPEC, 0, by_io=by_io)
        cus = {k.name: len(k.cus) for k in placed.partitions[0].kernels}
        assert abs(cus["e"] - w / (w + g.flop) * SPEC.cu_count) <= 1


def _slotted():
    """A weight GEMM, three elementwise kernels and a weight GEMM over 512 tokens in 2 tiles of
    256: each elementwise kernel's output tile is 256 x 4,096 x 2 B = 2 MiB."""
    from sim.workloads.dataflow.planning import weights_streamed

    ks = [Kernel("up", GW, 4096, 1024, 512), Kernel("a1", EW, 4096, 1, 512), Kernel("a2", EW, 4096, 1, 512),
          Kernel("a3", EW, 4096, 1, 512), Kernel("down", GW, 1024, 4096, 512)]
    return weights_streamed(plan_of(chain(ks), 512, 256, partitions=1, weights_off_chip=True))


def test_fit_slots_gives_a_static_partition_fewer_cus_until_every_stripe_has_a_slot():
    """static-single on plasticine: 64 MUs of one 256 KiB slot each. A buffer 2 deep holds at
    most 128 KiB of each tile in a slot, so each elementwise kernel's one CU writes its 2 MiB
    tile in 16 stripes: 48 slots for the three, which leaves 64 - 48 = 16 for ``up``'s output,
    one stripe a CU while its share of a tile, 2 MiB / CUs, fits 128 KiB: 16 CUs at most. With
    ``up`` on its FLOP share of the 64 CUs (30 or 31: ``down`` has as many FLOPs) the stripes
    outnumber the slots; fit_slots gives ``up`` exactly 16 and leaves ``down`` its share: its
    output leaves the partition, so its CUs write no stripe."""
    plan = _slotted()
    slot = SPEC.mu_bytes
    room = MuRoom(SPEC.mu_bytes, slot, slot, slot, 1)
    with pytest.raises(PlacementError):
        place_on_grid(plan, SPEC, 0, room)
    [part] = place_on_grid(plan, SPEC, 0, room, fit_slots=True).partitions
    cus = {k.name: len(k.cus) for k in part.kernels}
    stripes = {b.name: b.stripes for b in part.buffers}
    assert cus["up"] == 16 and (cus["a1"], cus["a2"], cus["a3"]) == (1, 1, 1) and cus["down"] in (30, 31)
    assert [len(stripes[n]) for n in ("up->a1", "a1->a2", "a2->a3", "a3->down")] == [16, 16, 16, 16]
    mus = [s.mu for ss in stripes.values() for s in ss]
    assert len(mus) == len(set(mus)) == len(SPEC.mu_tiles())  # one stripe a slot, every slot used
    assert all(s.bytes == slot for ss in stripes.values() for s in ss)  # each fills its slot exactly


def test_fit_slots_changes_nothing_where_an_mu_holds_any_number_of_buffers(gpt):
    assert place_on_grid(gpt, SPEC, 2, fit_slots=True) == place_on_grid(gpt, SPEC, 2)


@settings(max_examples=60)
@given(st.lists(st.tuples(st.integers(1, 6), st.floats(0.1, 100.0)), min_size=1, max_size=4), st.integers(0, 10))
def test_fewer_cus_keep_the_largest_work_a_cu_as_small_as_any_choice(kernels, n):
    """Against brute force over every way of taking ``n`` CUs (one each left at least): the
    largest work / CUs after ``_fewer_cus`` is the smallest any of them reaches."""
    import itertools

    counts = {f"k{i}": c for i, (c, _) in enumerate(kernels)}
    work = {f"k{i}": w for i, (_, w) in enumerate(kernels)}
    n = min(n, sum(counts.values()) - len(counts))
    got = _fewer_cus(counts, work, n)
    assert sum(got.values()) == sum(counts.values()) - n and all(1 <= got[k] <= counts[k] for k in counts)
    best = min(max(work[k] / c for k, c in zip(counts, cs))
               for cs in itertools.product(*(range(1, c + 1) for c in counts.values()))
               if sum(cs) == sum(counts.values()) - n)
    assert max(work[k] / got[k] for k in counts) == pytest.approx(best)
