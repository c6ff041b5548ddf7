"""The dataflow workload's CU runtime: what every CU does with the compiled partitions
(compile.py).

Partitions run one after another, started by a controller (the CU at tile (0, 0)):

1. it allocates the partition's buffers at their MUs (tile buffers: the room for
   ``depth`` tiles, reserved once), asks the DRAM interfaces to stream the weights in,
   shares every buffer's reference with the CUs that use it (under the run's reclamation
   protocol) and drops its own, then tells every CU of the partition to start;
2. each CU runs its kernel's slice as a software pipeline over the partition's tiles:
   read the operand tiles (a read of a tile buffer waits at the MU until the writer has
   written that tile: data-flow synchronisation; weights likewise until they are loaded;
   spilled tensors, streamed weights (a slice per tile) and extra DRAM traffic come from
   the DRAM interfaces, interleaved), keep asking for the operands of the tiles ahead (two
   tiles' requests in flight, like a DMA engine's queue), compute for ``FLOPs / (CUs x 2 x lanes
   x stages)`` cycles (a lane x stage unit retires a fused multiply-add per cycle), write
   its share of the output tile to its stripes (after a credit says the reader is done with
   the slot ``depth`` tiles back: flow control) or to DRAM for a spilled tensor; a tile the
   kernel's CUs all read whole may come by multicast (compile.multicast_trees: its tree's
   root reads each stripe from the MU, every CU relays it to its children on arrival);
3. a CU done with every tile (and whose last tiles have been read) drops its references
   and reports; the partition ends when every CU has, and the protocol frees the buffers.

Every message travels the run's NoC model. A graph pass is the partitions in order; the
run makes ``passes`` of them.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from mapping.placement import share
from sim.chip import messages as m
from sim.chip.collectives import collective
from sim.chip.exchange import exchange, exchange_counts, fixed_slots, is_landing, take_landing_reference, token_owners
from sim.chip.records import CarriedTile, HomeRecord, KernelRecord, PartitionRecord, buffer_label
from sim.chip.references import allocate_many, drop, received
from sim.chip.references import share as share_refs
from sim.chip.spec import dram_units, tier_unit
from sim.chip.units import Compute, ComputeUnit, Replies
from sim.workloads import Task
from sim.workloads.dataflow.compile import CompiledRun, PartitionProgram, SlotSpec, stripe_holders, stripe_needs
from sim.workloads.moe import route as moe_route

WEIGHT = buffer_label(5, "weight")
TILES = buffer_label(6, "tiles")
CACHED = buffer_label(7, "cache")
CREDIT = 1 << 62  # tag space of flow-control credits (request tags count up from 1)
CACHE = 1 << 40  # REFERENCE tags of cache stripes (partition buffers' tags stay below)
PREFETCH = 2  # tiles whose operands a CU has asked for at once (the one it waits for and the next)
PARTIALS = 4  # tiles of partial sums a CU holds while its peers reduce them (a kernel with collectives)
SIGNAL = 1 << 60  # tag space of a CU's tasks signalling each other
MULTICAST = 1 << 58  # tag space of a stripe relayed down its multicast tree (multicast_tag)
WRITTEN, FREED = 1, 2  # a tile's reduction is written: for the next tile's writer, for the compute loop
DRAM_INTERLEAVE = 2048  # bytes a transfer puts on each DRAM interface at least (a packet's data)
LOAD_CHUNK = 16384  # bytes of a weight one DRAM interface streams per load request


def credit_tag(buffer: int, tile: int, reader: int) -> int:
    """The ACK tag of reader ``reader``'s credit for ``tile`` of ``buffer`` (unique per writer CU)."""
    return CREDIT | (buffer << 40) | (tile << 12) | reader


def _dram_parts(nbytes: int, first: int, units: int) -> list[tuple[int, int]]:
    """(interface index, bytes) of a transfer interleaved over DRAM interfaces from ``first``."""
    if nbytes <= 0:
        return []
    n = max(1, min(units, -(-nbytes // DRAM_INTERLEAVE)))
    return [((first + i) % units, b - a) for i in range(n) for a, b in [share(nbytes, n, i)] if b > a]


class Dataflow:
    """The program every CU runs: the controller's partition loop, and kernel slices."""

    def __init__(self, p: CompiledRun, cfg):
        self.p = p
        self.cfg = cfg
        self._routes: dict[tuple, np.ndarray] = {}
        self.dram = dram_units(cfg.spec)  # every DRAM interface, or the first memory tier's controller
        self.tier = {t.name: tier_unit(cfg.spec, t.name) for t in cfg.spec.tiers}
        # what each CU of each partition needs before it starts: the stripes it touches
        self.needs = [{s.cu: stripe_needs(s) for s in part.slots} for part in p.partitions]
        self.holders = [stripe_holders(part) for part in p.partitions]
        # (CU, buffer, stripe) -> the CUs it relays that stripe's tiles to (multicast reads)
        self.relays = [{(s.cu, r.buffer, r.stripe): r.children for s in part.slots for r in s.reads if r.children}
                       for part in p.partitions]

    def start(self, cu):
        return self._control(cu) if cu.uid == self.p.controller else None

    def on_message(self, cu, msg):
        st = cu.state
        if msg.kind == m.WRITE and msg.tag & MULTICAST:  # a multicast stripe: relay it on, then take it
            run, b, s = multicast_stripe(msg.tag)
            self._relay_on(cu, self.relays[run % len(self.p.partitions)].get((cu.uid, b, s), ()), msg.tag,
                           msg.nbytes, msg.status)
            return None
        if is_landing(msg):  # a peer chip's landing buffer for this CU's tokens
            take_landing_reference(cu, msg)
            return None
        if msg.kind == m.REFERENCE and msg.tag & CACHE:
            st.setdefault("cache", {})[divmod(msg.tag & (CACHE - 1), 1 << 20)] = received(cu, msg)
        elif msg.kind == m.REFERENCE:
            st.setdefault("refs", {})[divmod(msg.tag, 1 << 20)] = received(cu, msg)
        elif msg.kind == m.CONTROL and msg.arg == m.CTRL_PARTITION:
            st["start"] = msg
        else:
            raise RuntimeError(f"dataflow CU {cu.uid} got an unexpected {m.KINDS[msg.kind]} message")
        start = st.get("start")
        if start is None:
            return None
        p = start.buf % len(self.p.partitions)
        refs = st.get("refs", {})
        if not self.needs[p][cu.uid] <= set(refs):
            return None
        slot = self.p.partitions[p].slots[start.nbytes]
        if not {*slot.cache_reads, *slot.cache_appends} <= set(st.get("cache", {})):
            return None
        st.pop("start")
        st["refs"] = {}
        return self._kernel(cu, start, p, refs, st.get("cache", {}))

    # ------------------------------------------------------------------ controller
    def _control(self, cu: ComputeUnit) -> Task:
        shard, reclaim = cu.shard, self.cfg.reclaim
        nparts = len(self.p.partitions)
        if self.p.caches:
            yield from self._caches(cu)
        kv = -1
        if self.p.homes.tiered:
            kv = yield from self._homes(cu)
            if kv is None:  # a tier refused the model's weights or caches: no pass can run
                for rep in range(self.p.passes):
                    shard.counts["admitted"] += 1
                    shard.counts["finished"] += 1
                    shard.record("request", rep, shard.now, shard.now, 0, "failed")
                return
        for rep in range(self.p.passes):
            t_pass = shard.now
            if kv >= 0 and rep and self.p.kv_growth:  # the caches' new entries of the last pass take room
                t0 = shard.now
                tag = cu.request(m.CONTROL, self.tier[self.p.homes.kv], arg=m.CTRL_TIER_GROW, buf=kv,
                                 nbytes=self.p.kv_growth)
                got = yield Replies([tag], "memory")
                full = got[tag].status != m.STATUS_OK
                shard.log(HomeRecord("kv", self.p.homes.kv, self.p.kv_growth, t0, shard.now, "full" if full else "ok"))
            shard.counts["admitted"] += 1
            ok_pass = True
            for pi, part in enumerate(self.p.partitions):
                t0 = shard.now
                order = [(b, s) for b, buf in enumerate(part.buffers) for s in range(len(buf.stripes))]
                reqs = [(part.buffers[b].stripes[s].mu, part.buffers[b].stripes[s].room,
                         WEIGHT if part.buffers[b].kind == "weight" else TILES) for b, s in order]
                refs = yield from allocate_many(cu, reqs, m.STREAM)
                if any(r is None for r in refs):  # on_oom = fail: the partition cannot run
                    shard.log(PartitionRecord(rep * nparts + pi, part.index, t0, shard.now, shard.now, "failed"))
                    ok_pass = False
                    break
                self._load_weights(cu, part, order, refs)
                receivers = [self.holders[pi][key] for key in order]
                tags = [[(b << 20) | s] * len(rc) for (b, s), rc in zip(order, receivers)]
                yield from share_refs(cu, refs, receivers, reclaim, tags)
                for r in refs:
                    drop(cu, r, reclaim)
                started = shard.now
                tags2 = [cu.request(m.CONTROL, slot.cu, arg=m.CTRL_PARTITION, buf=rep * nparts + pi, nbytes=i)
                         for i, slot in enumerate(part.slots)]
                got = yield Replies(tags2, "control")
                ok = all(r.arg == m.FINISHED for r in got.values())
                ok_pass = ok_pass and ok
                shard.trace_span(cu.uid, f"partition {part.index}", t0, shard.now - t0, "partition")
                status = "ok" if ok else "failed"
                shard.log(PartitionRecord(rep * nparts + pi, part.index, t0, started, shard.now, status))
            shard.counts["finished"] += 1
            # a pass's tokens (the plan's units: a decode step's generated tokens, ...) once it is done
            shard.record("request", rep, t_pass, shard.now, self.p.tokens_per_pass if ok_pass else 0,
                         "ok" if ok_pass else "failed")
            if not ok_pass:
                break

    def _homes(self, cu):
        """Regions for the weights and caches in their tiers (weights homed in a later tier also
        in the first, and copied there: the model switch); the caches' region, or None if a tier
        refused."""
        p, shard, h = self.p, cu.shard, self.p.homes
        asks = []
        if h.weights != "mu":
            asks.append(("weights", h.weights, p.weight_bytes))
            if h.weights != h.source:
                asks.append(("staged weights", h.source, p.weight_bytes))
        if h.kv != "mu":
            asks.append(("kv", h.kv, p.kv_bytes))
        t0 = shard.now
        tags = [cu.request(m.CONTROL, self.tier[t], arg=m.CTRL_TIER_ALLOC, nbytes=n) for _, t, n in asks]
        got = yield Replies(tags, "memory")
        ok = True
        for (what, t, n), tag in zip(asks, tags):
            full = got[tag].status != m.STATUS_OK
            ok = ok and not full
            shard.log(HomeRecord(what, t, n, t0, shard.now, "full" if full else "ok"))
        if not ok:
            return None
        if h.weights not in ("mu", h.source):
            t1 = shard.now
            tag = cu.request(m.CONTROL, self.tier[h.weights], arg=m.CTRL_COPY, buf=self.tier[h.source],
                             nbytes=p.weight_bytes)
            yield Replies([tag], "memory")
            shard.log(HomeRecord("switch", h.source, p.weight_bytes, t1, shard.now, "ok"))
        regions = {what: got[tag].buf for (what, _, _), tag in zip(asks, tags)}
        return regions.get("kv", -1)

    def _caches(self, cu):
        """Allocate every cache stripe at its MU, have DRAM stream its first contents in, and
        hand the references to the CUs that read and append to it for the whole run."""
        shard, reclaim = cu.shard, self.cfg.reclaim
        order = [(c, s) for c, cache in enumerate(self.p.caches) for s in range(len(cache.stripes))]
        stripes = [self.p.caches[c].stripes[s] for c, s in order]
        refs = yield from allocate_many(cu, [(st.mu, st.initial, CACHED) for st in stripes])
        if any(r is None for r in refs):
            shard.log(PartitionRecord(-1, -1, 0, shard.now, shard.now, "failed"))
            return
        k = 0
        for st, ref in zip(stripes, refs):
            for lo in range(0, st.initial, LOAD_CHUNK):
                n = min(LOAD_CHUNK, st.initial - lo)
                cu.send(m.CONTROL, self.dram[k % len(self.dram)], arg=m.CTRL_LOAD, nbytes=n, mu=ref.mu, buf=ref.buf,
                        alloc=ref.alloc)
                k += 1
        receivers = [list(st.holders) for st in stripes]
        tags = [[CACHE | (c << 20) | s] * len(rc) for (c, s), rc in zip(order, receivers)]
        yield from share_refs(cu, refs, receivers, reclaim, tags)
        for r in refs:
            drop(cu, r, reclaim)

    def _tile_routes(self, route: tuple[int, int, int], tile: int) -> np.ndarray:
        """[tokens, top_k] experts of the tokens of ``tile`` (drawn as the moe workload draws them,
        from the run's seed and the tile: every chip of a system draws the same)."""
        key = (route, tile)
        if key not in self._routes:
            experts, top_k, slots = route
            tokens = max(1, experts * slots // max(1, top_k))
            self._routes[key] = moe_route(self.cfg.seed, tile, tokens, experts, top_k, self.p.skew)
        return self._routes[key]

    def _expert_tiles(self, route: tuple[int, int, int], tile: int) -> list[int]:
        """Token copies each expert gets in ``tile``."""
        return np.bincount(self._tile_routes(route, tile).ravel(), minlength=route[0]).tolist()

    def _tp_index(self) -> int:
        """This chip's place in its TP group (0 on a chip of its own)."""
        place = self.cfg.system
        return place.group("TP").index(place.chip) if place is not None else 0

    def _cycles(self, slot: SlotSpec, tile: int) -> int:
        """Compute cycles of a tile: for a kernel over routed experts, the share of its padded
        work its experts really got (copies beyond an expert's slots are dropped, as a
        capacity factor does). Over a TP group, this chip's experts are the group index's block."""
        if not slot.route:
            return slot.cycles
        got = self._expert_tiles(slot.route, tile)
        cap = slot.route[2]
        base = self._tp_index() * (slot.route[0] // self.p.tp)
        used = sum(min(got[base + e], cap) for e in slot.experts)
        return -(-slot.cycles * used // (cap * len(slot.experts)))

    def _exchange(self, cu, part: PartitionProgram, slot: SlotSpec, run: int, group: tuple[int, ...], i: int):
        """Tile ``i``'s routed tokens to and from the peers on the group's chips (sim/chip/exchange.py):
        this CU's share of every count (the kernel's CUs split a tile's tokens)."""
        x = slot.exchange
        assert x is not None
        p = len(group)
        rep = run // len(self.p.partitions)
        routes = self._tile_routes(x.route, rep * part.tiles + i)
        counts = exchange_counts(routes, p, x.route[0])
        me = group.index(self.cfg.system.chip)
        to, frm = (counts[:, me], counts[me, :]) if x.combine else (counts[me, :], counts[:, me])
        j, n = slot.rank
        mine = lambda c: int(c) * (j + 1) // n - int(c) * j // n  # noqa: E731 - this CU's share of a count
        # the most a peer can send: its tokens (dispatch) or this chip's (combine) to every expert here
        owned = np.bincount(token_owners(len(routes), p), minlength=p)
        most = min(x.route[1], x.route[0] // p)
        bound = [mine(int(owned[me if x.combine else h]) * most) for h in range(p)]
        b, s = slot.writes[0] if slot.writes else (slot.reads[0].buffer, slot.reads[0].stripe)
        ok = yield from exchange(cu, group, self.cfg.system.chip, [mine(c) for c in to], [mine(c) for c in frm],
                                 bound, x.token_bytes, part.buffers[b].stripes[s].mu, fixed_slots(self.cfg), run, i,
                                 self.cfg.reclaim, self.cfg.sizing.max_packet_bytes)
        if not ok:
            cu.state["exchange_failed"] = True

    def _load_weights(self, cu, part: PartitionProgram, order, refs) -> None:
        """Ask the DRAM interfaces to stream every weight stripe in, in chunks spread over them."""
        k = 0
        for (b, s), ref in zip(order, refs):
            if part.buffers[b].kind != "weight":
                continue
            room = part.buffers[b].stripes[s].room
            for lo in range(0, room, LOAD_CHUNK):
                n = min(LOAD_CHUNK, room - lo)
                cu.send(m.CONTROL, self.dram[k % len(self.dram)], arg=m.CTRL_LOAD, nbytes=n, mu=ref.mu, buf=ref.buf,
                        alloc=ref.alloc, flags=m.STREAM)
                k += 1

    # ------------------------------------------------------------------ multicast reads
    def _relay(self, cu, tag: int, mtag: int, children: tuple[int, ...]):
        """The root of a stripe's multicast tree: its read from the MU, relayed on arrival."""
        got = yield Replies([tag], "memory")
        self._relay_on(cu, children, mtag, got[tag].nbytes, got[tag].status)

    @staticmethod
    def _relay_on(cu, children: tuple[int, ...], mtag: int, nbytes: int, status: int) -> None:
        """Send a multicast stripe to this CU's children in its tree and hand it to the kernel's
        task (now, or when it waits for it)."""
        for c in children:
            cu.send(m.WRITE, c, nbytes=nbytes, tag=mtag, status=status)
        if status != m.STATUS_OK:
            cu.state["relay_failed"] = True
        cu.signal(mtag)

    # ------------------------------------------------------------------ a kernel's slice on one CU
    def _tp_group(self, slot: SlotSpec) -> tuple[int, ...]:
        """The chips this CU's collectives run over (empty: none, or a chip on its own)."""
        place = self.cfg.system
        if not slot.collectives or place is None:
            return ()
        group = place.group("TP")
        return group if len(group) > 1 else ()

    def _write_tile(self, cu, part: PartitionProgram, slot: SlotSpec, refs: dict, i: int, first: int):
        """Write this CU's share of output tile ``i`` once its readers have freed the slot."""
        waits = [credit_tag(b, i - part.buffers[b].depth, k) for b, n in slot.readers
                 if i >= part.buffers[b].depth for k in range(n)]
        if waits:
            yield Replies(waits, "flow")
        for b, s in slot.writes:
            ref = refs[b, s]
            st = part.buffers[b].stripes[s]
            cu.send(m.WRITE, ref.mu, nbytes=st.tile_bytes, arg=(i % part.buffers[b].depth) * st.tile_bytes,
                    mu=ref.mu, buf=ref.buf, alloc=ref.alloc, flags=m.STREAM)
            if part.buffers[b].lag:  # a looped layer's output: when each layer's tiles leave (anchors time layers)
                cu.shard.log(CarriedTile(i, cu.uid, cu.shard.now))
        for u, n in _dram_parts(slot.dram_write, first + i, len(self.dram)):
            cu.send(m.WRITE, self.dram[u], nbytes=n, buf=-1)
        for tier, n in slot.tier_writes:  # a homed cache's new entries
            cu.send(m.WRITE, self.tier[tier], nbytes=n, buf=-1)

    def _reduce_and_write(self, cu, part: PartitionProgram, slot: SlotSpec, refs: dict, run: int,
                          group: tuple[int, ...], first: int, i: int):
        """Tile ``i``, just computed: the kernel's collectives over this CU's share with its peers
        on the group's chips, then its write, after the previous tile's (up to PARTIALS tiles'
        collectives are in flight at once, as a DMA engine keeps several transfers going)."""
        share_bytes = sum(part.buffers[b].stripes[s].tile_bytes for b, s in slot.writes) + slot.dram_write
        add = 2.0 / (self.p.word * self.cfg.spec.cu_flops_per_cycle)  # cycles per byte of an add (an FMA = 2 flops)
        chip = self.cfg.system.chip
        for k, kind in enumerate(slot.collectives):
            if kind == "all_to_all" and slot.exchange is not None:
                yield from self._exchange(cu, part, slot, run, group, i)
            else:
                yield from collective(cu, kind, group, chip, share_bytes, run, i * 4 + k, add)
        if i > 0:
            yield Replies([signal_tag(run, i - 1, WRITTEN)], "flow")
        yield from self._write_tile(cu, part, slot, refs, i, first)
        cu.signal(signal_tag(run, i, WRITTEN))
        cu.signal(signal_tag(run, i, FREED))

    def _issue_reads(self, cu, start, part: PartitionProgram, slot: SlotSpec, refs: dict, cache: dict, rep: int,
                     first: int, i: int) -> list[int]:
        """Request what tile ``i`` of this CU's share of a kernel reads (its stripes, by multicast
        where they come down a tree; DRAM, tiers, its caches' parts): the tags to wait for."""
        units = len(self.dram)
        tags = []
        for r in slot.reads:
            ref = refs[r.buffer, r.stripe]
            buf = part.buffers[r.buffer]
            st = buf.stripes[r.stripe]
            if i < buf.lag:  # a loop-carried tile from before the loop's first: none to read
                continue
            pos = st.tile_bytes * (i - buf.lag + 1) if buf.kind == "tiles" else st.tile_bytes
            if r.parent >= 0 or r.children:  # by multicast: its tree's root reads it, the rest are relayed it
                mtag = multicast_tag(start.buf, i, r.buffer, r.stripe)
                if r.parent < 0:
                    t = cu.request(m.READ_REQ, ref.mu, nbytes=r.nbytes, arg=pos, mu=ref.mu, buf=ref.buf,
                                   alloc=ref.alloc, flags=m.STREAM)
                    cu.spawn(self._relay(cu, t, mtag, r.children))
                tags.append(mtag)
                continue
            tags.append(cu.request(m.READ_REQ, ref.mu, nbytes=r.nbytes, arg=pos, mu=ref.mu, buf=ref.buf,
                                   alloc=ref.alloc, flags=m.STREAM))
        for u, n in _dram_parts(slot.dram_read, first + i, units):
            tags.append(cu.request(m.READ_REQ, self.dram[u], nbytes=n, arg=cu.uid, buf=-1))
        for tier, n in slot.tier_reads:  # a slice of a streamed weight, a homed cache's share: one flow each
            tags.append(cu.request(m.READ_REQ, self.tier[tier], nbytes=n, arg=cu.uid, buf=-1))
        for c, s in slot.cache_reads:  # a tile's part of the cache as it stood at this pass
            cs = self.p.caches[c].stripes[s]
            size = cs.initial + rep * cs.growth
            lo, hi = share(size, part.tiles, i)
            ref = cache[c, s]
            if hi > lo:
                tags.append(cu.request(m.READ_REQ, ref.mu, nbytes=hi - lo, arg=size, mu=ref.mu, buf=ref.buf,
                                       alloc=ref.alloc))
        return tags

    def _release(self, cu, start, part: PartitionProgram, slot: SlotSpec, refs: dict, cache: dict, rep: int,
                 group: tuple[int, ...]):
        """After a kernel's last tile: the credits no iteration sends, the last tiles' writes and
        readers waited for, the caches' new entries appended, and its buffers dropped."""
        reclaim = self.cfg.reclaim
        for b, writer, k in slot.credits_to:  # a loop-carried buffer's last tiles, which no iteration reads
            lag = part.buffers[b].lag
            for i in range(max(0, part.tiles - lag), part.tiles):
                cu.send(m.ACK, writer, tag=credit_tag(b, i, k))
        if group:
            yield Replies([signal_tag(start.buf, i, FREED) for i in range(max(0, part.tiles - PARTIALS), part.tiles)],
                          "network")
        drain = [credit_tag(b, i, k) for b, n in slot.readers
                 for i in range(max(0, part.tiles - part.buffers[b].depth), part.tiles) for k in range(n)]
        if drain:
            yield Replies(drain, "flow")
        for c, s in slot.cache_appends:  # this pass's new entries
            ref = cache[c, s]
            cu.send(m.APPEND, ref.mu, nbytes=self.p.caches[c].stripes[s].growth, mu=ref.mu, buf=ref.buf,
                    alloc=ref.alloc)
        for ref in refs.values():
            drop(cu, ref, reclaim)
        if rep == self.p.passes - 1:  # its last pass: done with the caches too
            for key in [*slot.cache_reads, *slot.cache_appends]:
                if key in cache:
                    drop(cu, cache.pop(key), reclaim)

    def _kernel(self, cu, start, pi: int, refs: dict, cache: dict):
        """One CU's share of a kernel in one graph pass: each tile's reads (``PREFETCH`` tiles
        ahead), its compute and its write (or its collectives' task), then the kernel's release."""
        shard = cu.shard
        part = self.p.partitions[pi]
        slot = part.slots[start.nbytes]
        rep = start.buf // len(self.p.partitions)  # the graph pass
        t0 = shard.now
        compute = 0
        failed = False
        first = slot.rank[0] * len(self.dram) // slot.rank[1]  # the kernel's CUs start on interfaces spread evenly

        def issue(i: int) -> list[int]:  # tile i's reads, requested
            return self._issue_reads(cu, start, part, slot, refs, cache, rep, first, i)

        group = self._tp_group(slot)
        ahead = deque(issue(j) for j in range(min(PREFETCH, part.tiles)))
        for i in range(part.tiles):
            pending = ahead.popleft()
            if pending:
                got = yield Replies(pending, "memory")
                failed = failed or any(r.status != m.STATUS_OK for r in got.values())
            for b, writer, k in slot.credits_to:
                if i >= part.buffers[b].lag:
                    cu.send(m.ACK, writer, tag=credit_tag(b, i - part.buffers[b].lag, k))
            if i + PREFETCH < part.tiles:
                ahead.append(issue(i + PREFETCH))
            if group and i >= PARTIALS:  # room for its partial sums: the tile PARTIALS back is written
                yield Replies([signal_tag(start.buf, i - PARTIALS, FREED)], "network")
            cycles = self._cycles(slot, rep * part.tiles + i)
            if cycles:
                yield Compute(cycles)
                compute += cycles
            if group:  # another task reduces the tile with the peers and writes it
                cu.spawn(self._reduce_and_write(cu, part, slot, refs, start.buf, group, first, i))
            else:
                yield from self._write_tile(cu, part, slot, refs, i, first)
        yield from self._release(cu, start, part, slot, refs, cache, rep, group)
        shard.trace_span(cu.uid, slot.kernel, t0, shard.now - t0, "kernel")
        shard.log(KernelRecord(start.buf, slot.kernel, cu.uid, t0, shard.now, compute, _bytes_in(part, slot),
                               _bytes_out(part, slot)))
        failed = failed or bool(cu.state.pop("exchange_failed", False))  # a landing buffer it could not have
        failed = failed or bool(cu.state.pop("relay_failed", False))  # a multicast stripe's read failed
        cu.send(m.ACK, start.src, tag=start.tag, arg=m.FAILED if failed else m.FINISHED)


def multicast_tag(run: int, tile: int, buffer: int, stripe: int) -> int:
    """Tag of tile ``tile``'s part of a stripe relayed down its multicast tree (each CU receives
    it once, so it is unique at every CU)."""
    if run >= 1 << 14 or tile >= 1 << 16 or buffer >= 1 << 14 or stripe >= 1 << 14:
        raise ValueError(f"multicast tag out of range: run {run}, tile {tile}, buffer {buffer}, stripe {stripe}")
    return MULTICAST | (run << 44) | (tile << 28) | (buffer << 14) | stripe


def multicast_stripe(tag: int) -> tuple[int, int, int]:
    """(run, buffer, stripe) of a multicast_tag: which relay table entry a received stripe is."""
    return tag >> 44 & 0x3FFF, tag >> 14 & 0x3FFF, tag & 0x3FFF


def signal_tag(run: int, tile: int, what: int) -> int:
    """Tag of a CU's two kernel tasks telling each other a tile is computed / reduced and written."""
    return SIGNAL | (run << 28) | (tile << 8) | what


def _bytes_in(part: PartitionProgram, slot: SlotSpec) -> int:
    return part.tiles * (sum(r.nbytes for r in slot.reads) + slot.dram_read + sum(n for _, n in slot.tier_reads))


def _bytes_out(part: PartitionProgram, slot: SlotSpec) -> int:
    per = sum(part.buffers[b].stripes[s].tile_bytes for b, s in slot.writes)
    return part.tiles * (per + slot.dram_write + sum(n for _, n in slot.tier_writes))
