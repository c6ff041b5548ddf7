"""Config of ``rdasim run``: the TOML schema and its translation to a ChipConfig.

Sections: [chip] (a preset plus overrides), [noc] (fidelity, router timing, message
sizing), [memory] (policy, reclamation protocol, out-of-memory behaviour, placement),
[workload] (kind plus one table per kind) and [run] (the shared RUN_SECTION plus
run length and sampling). Cross-checks that need the resolved chip (a race unit on
the wrong kind of tile, a batch larger than the CUs) are reported with their key path
like any other config error.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, cast

from cluster.config import Field, Table
from cluster.config.footprint import chip_issues as footprint_issues
from cluster.config.footprint import workload_issues as workload_footprint
from cluster.config.loader import ConfigError
from cluster.config.noc import RUN_SECTION
from cluster.config.schema import Issue, spell_units
from mapping.systems import CHIPS, SYSTEMS
from sim.chip.config import BULK, OOM_BEHAVIOURS, PLACEMENTS, PREEMPT_MODES, ChipConfig, noc_params_for
from sim.chip.messages import Sizing
from sim.chip.reclaim import RECLAMATIONS
from sim.chip.spec import PRESETS, unit_layout
from sim.energy.table import EnergyTableError, load_table
from sim.keys import merge_fields
from sim.memory.policies import POLICIES, MuGeometry, holding
from sim.network import NETWORKS
from sim.noc.params import TIMING_KEYS
from sim.noc.routing import ROUTINGS
from sim.workloads import WORKLOADS, ChipContext, Workload


def _i(doc, default, lo=0, unit=""):
    return Field("int", default, doc, min=lo, unit=unit)


CHIP = Table({
    "preset": Field("choice", "plasticine", "chip to start from", choices=tuple(PRESETS)),
    "rows": _i("tile rows (preset if unset)", None, 1),
    "cols": _i("tile columns (preset if unset)", None, 2),
    "clock": Field("frequency", None, "clock frequency, e.g. \"1GHz\" (preset if unset)", min=1),
    "flit_bits": _i("bits per flit", None, 64, "bits"),
    "vcs": Field("int", None, "virtual channels per port", min=1, max=16),
    "vc_buffers": _i("flit buffers per virtual channel", None, 1),
    "cu_lanes": _i("SIMD lanes per CU", None, 1),
    "cu_stages": _i("pipeline stages per CU", None, 1),
    "mu_bytes": Field("size", None, "scratchpad per MU, e.g. \"256KiB\"", min=64),
    "mu_banks": _i("SRAM banks per MU (one word each per cycle)", None, 1),
    "mu_word_bytes": _i("bytes per bank word", None, 1, "bytes"),
    "mu_access_latency": _i("cycles from service start to first word", None, 0, "cycles"),
    "translation_latency": _i("block-table lookup per access (virtual policy)", None, 0, "cycles"),
    "dram_bytes_per_cycle": _i("bandwidth of each DRAM interface unit", None, 1, "bytes/cycle"),
    "dram_latency": _i("DRAM access latency", None, 0, "cycles"),
    "dram_bytes": Field("size", None, "DRAM capacity of the chip", min=1),
    **{tier: Table({
        "capacity": Field("size", None, f"{tier.upper()} capacity (preset if unset)", min=1),
        "bandwidth": Field("bandwidth", None, f"{tier.upper()} bandwidth, every channel together", min=1),
        "latency": Field("time", None, f"{tier.upper()} latency to the first byte", min=0.0),
        "page": Field("size", None, f"{tier.upper()} page: the granule regions take", min=64),
    }, doc=f"the chip's {tier.upper()} tier (presets with memory tiers: sn40l)") for tier in ("hbm", "ddr")},
}, doc="the grid of tiles: a preset and any overrides")

NOC = Table({
    "model": Field("choice", "packet", "cycle: VC routers, flit by flit; packet: link reservations (fast)",
                   choices=NETWORKS),
    "routing": Field("choice", "xy", "routing function (sim/noc/routing.py)", choices=ROUTINGS),
    "routing_delay": _i("route computation delay", 0, 0, "cycles"),
    "vc_alloc_delay": _i("VC allocation delay", 1, 1, "cycles"),
    "sw_alloc_delay": _i("switch allocation delay", 1, 1, "cycles"),
    "st_delay": _i("switch traversal delay", 1, 1, "cycles"),
    "link_latency": _i("link latency", 1, 1, "cycles"),
    "credit_delay": _i("credit processing delay", 1, 0, "cycles"),
    "header_bits": _i("header bits per packet", 64, 1, "bits"),
    "max_packet_bytes": Field("size", 2048, "largest data payload of one packet; longer messages are cut", min=1),
    "jitter": _i("extra random 0..jitter cycles before each message enters the network", 0, 0, "cycles"),
    "bulk": Field("choice", "", "how data moves to and from DRAM: packets, or flows sharing the memory's "
                  "bandwidth max-min fairly (sim/flows); empty: flows on a chip with memory tiers (sn40l), "
                  "packets otherwise", choices=("",) + BULK),
}, doc="network fidelity, router timing and message sizing")


def _policy_keys() -> dict:
    """[memory] keys every registered memory policy and reclamation protocol declares."""
    return merge_fields([(n, c.KEYS) for n, c in POLICIES.items()] + [(n, c.KEYS) for n, c in RECLAMATIONS.items()])


def _policy_checks(mem: dict) -> list[tuple[str, str]]:
    return [issue for _, c in POLICIES.items() for check in c.CHECKS for issue in check(mem)]


def _preempt_checks(mem: dict) -> list[tuple[str, str]]:
    """A watermark is a share of an MU kept free, so below 1; a preempt mode needs on_oom = "preempt"."""
    out = []
    w = mem.get("admit_watermark")
    if w is not None and not 0.0 <= w < 1.0:
        out.append(("admit_watermark", f"{w:g} is outside [0, 1): the share of every MU kept free when admitting"))
    if mem.get("preempt_mode") and mem.get("on_oom") != "preempt":
        out.append(("preempt_mode", f"{mem['preempt_mode']!r} needs on_oom = \"preempt\" (on_oom is "
                                    f"{mem.get('on_oom')!r})"))
    return out


MEMORY = Table({
    "policy": Field("choice", "virtual", "how an MU holds buffers", choices=POLICIES),
    "reclaim": Field("choice", "refcount-gated", "how shared references are reclaimed", choices=RECLAMATIONS),
    "on_oom": Field("choice", "stall", "when memory runs out: stall and retry, evict to DRAM, fail, or preempt "
                    "a sequence (decode workloads; docs/run.md, \"Preemption and admission\")",
                    choices=OOM_BEHAVIOURS),
    "preempt_mode": Field("choice", "", "on_oom = \"preempt\": recompute (free the preempted sequence's KV, "
                          "prefill it again) or swap (its KV to DRAM and back); empty: recompute",
                          choices=("",) + PREEMPT_MODES),
    "admit_watermark": Field("float", 0.0, "decode: a waiting request starts only when its prompt's blocks fit "
                             "with this share of every MU left free, in [0, 1) (always checked under on_oom = "
                             "\"preempt\"; elsewhere only when above 0)", min=0.0),
    "placement": Field("choice", "spread", "which MU a new buffer goes to", choices=PLACEMENTS),
    "prefix_sharing": Field("bool", True, "decode with a trace giving prompt blocks (Mooncake, Qwen-Bailian "
                            "hash_ids): running sequences share their common leading blocks' KV, each reference "
                            "counted by the reclamation protocol (docs/traces.md); false: every sequence writes its "
                            "own"),
    "prefix_cache_bytes": Field("size", 0, "prefix sharing: KV bytes of blocks no running sequence holds that the "
                                "scheduler keeps for later requests, least recently used dropped first (a prefix "
                                "cache; given back when a request needs the room under on_oom = \"preempt\"); 0: a "
                                "block is freed when its last sequence drops it", min=0),
    "buffer_id_bits": _i("bits of a buffer id (ids wrap and are reused)", 16, 1, "bits"),
    "offset_bits": _i("bits of a virtual block + offset in a reference", 16, 1, "bits"),
}, doc="MU memory policy, reclamation protocol, out-of-memory behaviour", checks=[_policy_checks, _preempt_checks],
    extend=_policy_keys)


def _graph_keys() -> Table:
    """`rdasim map`'s workload and mapping keys, for a workload that maps its graph itself
    (every key optional here: the chosen generator's required keys are checked when mapping)."""
    from cluster.config.map import SCHEMA as MAP

    def optional(table: Table) -> Table:
        def loose(f):
            if isinstance(f, Table):
                return optional(f)
            return dataclasses.replace(f, default=None) if isinstance(f, Field) and f.required else f

        return Table({k: loose(f) for k, f in table.fields.items()}, table.doc)

    graph = optional(MAP.fields["workload"])
    kind = graph.fields["kind"]
    graph = Table({**graph.fields, "kind": Field("choice", "", "graph generator to map (empty: use plan)",
                                                 choices=("",) + tuple(kind.choices))}, graph.doc)
    return Table({"graph": graph, "mapping": MAP.fields["mapping"]})


def _section_keys(cls: type[Workload]) -> Table:
    """The keys a workload reads in its section: its own, and `rdasim map`'s graph and mapping
    keys when it maps a graph."""
    return Table({**cls.KEYS.fields, **_graph_keys().fields}, cls.KEYS.doc) if cls.CAPABILITIES.maps_graph else cls.KEYS


def _workload_sections() -> dict:
    """One table per registered workload's section ([workload.decode], [workload.moe], ...): the
    keys of every workload reading it (kv-decode's and serve's [workload.decode] share theirs)."""
    readers: dict[str, list] = {}
    for name, cls in WORKLOADS.items():
        readers.setdefault(cls.SECTION, []).append((name, cls))
    out: dict = {}
    for section, classes in readers.items():
        tables = [_section_keys(cls) for _, cls in classes]
        if len(tables) == 1:
            out[section] = tables[0]
            continue
        merged = merge_fields((name, t.fields) for (name, _), t in zip(classes, tables))
        out[section] = Table(merged, max((t.doc for t in tables), key=len))
    return out


def workload_reads(kind: object, section: str, key: str) -> bool:
    """Whether the workload ``kind`` reads ``key`` of its [workload.<section>] table."""
    cls = WORKLOADS.get(kind) if isinstance(kind, str) and kind in WORKLOADS else None
    return cls is not None and cls.SECTION == section and key in _section_keys(cls).fields


def _leaves(given: dict, prefix: str) -> list[str]:
    """The dotted paths of every value in ``given`` (a key holding a table: its own keys)."""
    out: list[str] = []
    for key, value in given.items():
        out += _leaves(value, f"{prefix}{key}.") if isinstance(value, dict) and value else [f"{prefix}{key}"]
    return out


def _unread_keys(given: dict, values: dict) -> list[tuple[str, str]]:
    """Every key the config gives (in the file or with --set; not a default) that the chosen
    workload does not read, named with the workloads that do: a decode trace set on the race
    workload would otherwise be ignored without a word. Keys no workload reads are the
    schema's unknown keys."""
    kind = values.get("kind")
    if not isinstance(kind, str) or kind not in WORKLOADS:  # a bad kind is reported on its own
        return []
    chosen = WORKLOADS.get(kind)
    out = []
    for section, keys in given.items():
        if not isinstance(keys, dict):
            continue
        for key, value in keys.items():
            readers = [n for n, c in WORKLOADS.items() if c.SECTION == section and key in _section_keys(c).fields]
            if not readers or kind in readers:
                continue
            what = f"[workload.{section}]" if section != chosen.SECTION else "this key"
            why = f"the {kind} workload does not read {what} (read by {', '.join(readers)})"
            out += [(path, why) for path in _leaves({key: value}, f"{section}.")]
    return out


def _kinds(where: Callable[[type[Workload]], bool]) -> str:
    """The registered workloads ``where(cls)`` holds for, for messages."""
    return ", ".join(n for n, c in WORKLOADS.items() if where(c))


def _system_table() -> Table:
    from cluster.config.map import SCHEMA as MAP
    from sim.system.config import FIDELITIES

    net = MAP.fields["system"].fields["network"]
    return Table({
        "preset": Field("choice", "", "a node to start from (mapping/systems.py: its chips, chip and network; any "
                        "key given here still wins)", choices=("",) + tuple(SYSTEMS)),
        "chips": Field("int", 0, "chips in the system (0: a single chip, the [chip] above)", min=0),
        "chip": Field("choice", "SN30", "the chip of every node (box fidelity: any of the mapper's chips)",
                      choices=tuple(CHIPS)),
        "fidelity": Field("choice", "box", "box: a chip is its mapped partitions' times behind its network "
                          "interface (system.chip); grid: every chip is the [chip] above, its whole CU/MU grid and "
                          "NoC running a dataflow plan mapped over the system", choices=FIDELITIES),
        "packet_bytes": Field("size", 4096, "bytes of a packet on an inter-chip link", min=64),
        "max_seconds": Field("float", 86400.0, "simulated seconds after which the run is cut off", min=1e-9),
        "network": net,
    }, doc="a system of chips joined by inter-chip links (rdasim run simulates it when chips > 0)",
        fill=_fill_system)


def _fill_system(given: dict) -> dict:
    """A [system] naming a preset: the preset's chips, chip and network under the keys given (a
    [[system.network]] table given key by key over the preset's table of that index)."""
    from cluster.config.map import SCHEMA as MAP
    from mapping.systems import network_keys

    name = given.get("preset")
    if not isinstance(name, str) or name not in SYSTEMS:  # none, or an unknown name: the preset key's error
        return dict(given)
    preset = spell_units(network_keys(SYSTEMS[name]), MAP.fields["system"])
    out = {**preset, **given}
    mine = given.get("network")
    if isinstance(mine, list):
        theirs = preset["network"]
        out["network"] = [{**(theirs[i] if i < len(theirs) else {}), **m} if isinstance(m, dict) else m
                          for i, m in enumerate(mine)]
    return out


WORKLOAD = Table({
    "kind": Field("choice", "kv-decode", "what the CUs run", choices=WORKLOADS),
}, doc="the workload", extend=_workload_sections, given_checks=[_unread_keys])

RUN = Table({
    **RUN_SECTION.fields,
    "max_cycles": _i("simulated cycles after which the run is cut off", 20_000_000, 1, "cycles"),
    "sample_cycles": _i("period of the per-MU time series (doubled until at most 2,000 samples fit the run)", 1000, 1,
                        "cycles"),
    "trace_limit": _i("trace events kept per shard (--trace)", 200_000, 1),
}, doc=RUN_SECTION.doc, checks=RUN_SECTION.checks)

ENERGY = Table({
    "table": Field("str", "", "per-action energy table (TOML; empty: the default 45 nm table, "
                   "sim/energy/default_45nm.toml)"),
}, doc="energy: what each counted action costs")

RUN_SCHEMA = Table({"chip": CHIP, "noc": NOC, "memory": MEMORY, "workload": WORKLOAD, "run": RUN, "energy": ENERGY},
                   extend=lambda: {"system": _system_table()})

_CHIP_KEYS = {"clock": "clock_hz"}


def _workload_issues(params: type[Workload], cfg: dict) -> list[Issue]:
    """What the workload ``params`` (its class) finds wrong with the run config, and, for one that
    maps its graph from the graph keys, the chosen generator's required `rdasim map` keys
    (mapping needs every key it reads, so these are checked before ``from_config``)."""
    from cluster.config.map import SCHEMA as MAP

    out = list(params.config_issues(cfg))
    d = cfg["workload"][params.SECTION]
    kind = (d.get("graph") or {}).get("kind") if params.CAPABILITIES.maps_graph else None
    if kind and not d.get("plan"):
        table = MAP.fields["workload"].fields.get(kind)
        given = d["graph"].get(kind) or {}
        for key, f in (table.fields.items() if table is not None else ()):
            if isinstance(f, Field) and f.required and given.get(key) is None:
                out.append(Issue(f"workload.{params.SECTION}.graph.{kind}.{key}", "is required"))
    return out


def system_config(cfg: dict):
    """The SystemConfig a resolved ``rdasim run`` config with a [system] describes (raises ConfigError)."""
    from sim.system.config import FIDELITY, SystemConfig

    sysd, wl, run = cfg["system"], cfg["workload"], cfg["run"]
    issues: list[Issue] = []
    params = WORKLOADS.get(wl["kind"])
    if FIDELITY[sysd["fidelity"]].grid:
        return _grid_system_config(cfg)
    if not params.CAPABILITIES.system:
        raise ConfigError("config", [Issue("workload.kind", f"{wl['kind']} runs on one chip; a [system] runs "
                                           f"{_kinds(lambda c: c.CAPABILITIES.system)}")])
    system = system_of(sysd)
    issues += _workload_issues(params, cfg)
    if issues:
        raise ConfigError("config", issues)
    # the grid its sockets' steps are priced on
    sock = chip_config(cfg, socket=True) if params.CAPABILITIES.socket else None
    workload = params.from_config(wl["kind"], wl[params.SECTION],
                                  ChipContext(sock.spec if sock else None, None, None, system), issues)
    if issues:
        raise ConfigError("config", issues)
    try:
        return SystemConfig(system, system.chip.frequency, sysd["packet_bytes"], sysd["fidelity"], workload,
                            run["seed"], int(sysd["max_seconds"] * system.chip.frequency), chip=sock)
    except ValueError as exc:
        raise ConfigError("config", [Issue("system", str(exc))]) from None


def system_of(sysd: dict, chip=None):
    """The mapper's System a [system] table describes (``chip``: every node's chip instead of system.chip)."""
    from dataclasses import replace

    from mapping.specs import build_system

    if not 1 <= len(sysd["network"]) <= 3:
        raise ConfigError("config", [Issue("system.network", f"needs 1 to 3 [[system.network]] dimensions, got "
                                           f"{len(sysd['network'])}")])
    try:
        system = build_system({"chips": sysd["chips"], "chip": sysd["chip"], "network": sysd["network"]})
    except (ValueError, KeyError) as exc:
        raise ConfigError("config", [Issue("system", str(exc))]) from None
    if any(d.size < 1 for d in system.network):
        raise ConfigError("config", [Issue("system.network", "every dimension needs its size (0 = enumerate is "
                                           "for rdasim map)")])
    return replace(system, chip=chip) if chip is not None else system


def _grid_chip_workload(cls: type[Workload]) -> bool:
    """A workload a grid-fidelity chip of a system runs: a chip workload mapping its plan over the system."""
    return not cls.CAPABILITIES.system and cls.CAPABILITIES.maps_graph


def _grid_system_config(cfg: dict):
    """A system of grid-fidelity chips: every chip is the [chip] above, running a plan mapped over the system."""
    from sim.system.config import SystemConfig

    sysd, wl, run = cfg["system"], cfg["workload"], cfg["run"]
    if not _grid_chip_workload(WORKLOADS.get(wl["kind"])):
        raise ConfigError("config", [Issue("workload.kind", f"{wl['kind']}: grid-fidelity chips run a plan mapped "
                                           f"over the system ({_kinds(_grid_chip_workload)}); box chips run "
                                           f"{_kinds(lambda c: c.CAPABILITIES.system)}")])
    pp = [i for i, d in enumerate(sysd["network"]) if d.get("parallelism") == "PP"]
    if pp:
        raise ConfigError("config", [Issue(f"system.network[{pp[0]}].parallelism", "PP: grid-fidelity chips run TP "
                                           "and DP plans; simulate pipelines with the pipeline workload on box chips")])
    spec, tier_issues = chip_spec(cfg["chip"])
    if tier_issues:
        raise ConfigError("config", tier_issues)
    system = system_of(sysd, spec.dfmodel())
    chip = chip_config(cfg, system=system)
    max_cycles = min(run["max_cycles"], int(sysd["max_seconds"] * spec.clock_hz))
    try:
        return SystemConfig(system, spec.clock_hz, sysd["packet_bytes"], sysd["fidelity"], chip.workload, run["seed"],
                            max_cycles, chip=chip)
    except ValueError as exc:
        raise ConfigError("config", [Issue("system", str(exc))]) from None


def _preempt_issues(kind: str, mem: dict) -> list[Issue]:
    """Preemption and memory-aware admission need a workload that serves requests it can preempt."""
    if WORKLOADS.get(kind).CAPABILITIES.preempts:
        return []
    can = _kinds(lambda c: c.CAPABILITIES.preempts)
    if mem["on_oom"] == "preempt":
        return [Issue("memory.on_oom", f"preempt: {kind} cannot preempt; the workloads that can are {can}")]
    if mem["admit_watermark"]:
        return [Issue("memory.admit_watermark", f"{kind} admits no requests; the workloads that do are {can}")]
    return []


_TIER_KEYS = {"capacity": "capacity", "bandwidth": "bandwidth", "latency": "latency", "page": "page_bytes"}


def chip_spec(chip: dict):
    """The ChipSpec a resolved [chip] table describes (its preset and overrides, its tiers'
    overrides) and the issues of a tier override on a preset without that tier."""
    from dataclasses import replace

    over = {_CHIP_KEYS.get(k, k): v for k, v in chip.items()
            if k not in ("preset", "hbm", "ddr") and v is not None}
    spec = PRESETS[chip["preset"]].with_(**over)
    issues, tiers = [], list(spec.tiers)
    for name in ("hbm", "ddr"):
        given = {_TIER_KEYS[k]: v for k, v in (chip.get(name) or {}).items() if v is not None}
        if not given:
            continue
        at = [i for i, t in enumerate(tiers) if t.name == name]
        if not at:
            issues.append(Issue(f"chip.{name}", f"preset {chip['preset']!r} has no {name.upper()} tier "
                                f"(presets with tiers: {', '.join(n for n, s in PRESETS.items() if s.tiers)})"))
            continue
        if "page_bytes" in given:
            given["page_bytes"] = int(given["page_bytes"])
        tiers[at[0]] = replace(tiers[at[0]], **given)
    return spec.with_(tiers=tuple(tiers)), issues


def _size_text(n: int) -> str:
    """Bytes as a config writes them: "1MiB", "512KiB", or plain bytes."""
    for unit, k in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << k and n % (1 << k) == 0:
            return f"{n >> k}{unit}"
    return str(n)


def _room_for(policy, mu: MuGeometry) -> Callable[[int], str]:
    """The --set lines (chip.mu_bytes, memory.offset_bits) of the least MU on which ``policy``
    holds a buffer of n bytes (sim/memory/policies.holding); "" when none does."""
    def room(nbytes: int) -> str:
        g = holding(policy, mu, nbytes)
        if g is None:
            return ""
        sets = [f"chip.mu_bytes={_size_text(g.capacity)}"] if g.capacity != mu.capacity else []
        sets += [f"memory.offset_bits={g.virtual_bits}"] if g.virtual_bits != mu.virtual_bits else []
        return " ".join(f"--set {x}" for x in sets)
    return room


def chip_config(cfg: dict, trace: bool = False, memory_map: int = -1, system=None, socket: bool = False) -> ChipConfig:
    """The ChipConfig a resolved ``rdasim run`` config describes (raises ConfigError); ``system``: the
    mapper's System its chip is a grid chip of; ``socket``: the [chip], [noc] and [memory] of a
    system workload's sockets, whose grid it simulates for itself (no workload of its own)."""
    chip, noc, mem, wl, run = cfg["chip"], cfg["noc"], cfg["memory"], cfg["workload"], cfg["run"]
    issues: list[Issue] = []
    params = WORKLOADS.get(wl["kind"])
    if params.CAPABILITIES.system and not socket:
        raise ConfigError("config", [Issue("workload.kind", f"{wl['kind']} runs on a system of chips: give a "
                                           "[system] with chips > 0 and its [[system.network]]")])
    spec, tier_issues = chip_spec(chip)
    issues += tier_issues
    issues += [Issue("chip", p) for p in spec.problems()]
    later = []  # reported with the workload's own issues: it does not stop the workload being read
    if spec.tiers and noc["bulk"] == "packets":
        later.append(Issue("noc.bulk", f"packets: chip {spec.name!r} has memory tiers "
                           f"({', '.join(t.name for t in spec.tiers)}), whose data moves as flows"))
    issues += footprint_issues(spec, mem, noc, run)  # before unit_layout allocates anything
    if issues:
        raise ConfigError("config", issues)
    lay = unit_layout(spec)
    reclaim = RECLAMATIONS.get(mem["reclaim"]).from_config(mem["reclaim"], mem)
    issues += reclaim.problems()
    sizing = Sizing(flit_bits=spec.flit_bits, header_bits=noc["header_bits"], max_packet_bytes=noc["max_packet_bytes"],
                    mu_id_bits=max(1, math.ceil(math.log2(max(2, len(lay.mus))))),
                    buffer_id_bits=mem["buffer_id_bits"], offset_bits=mem["offset_bits"],
                    weight_bits=reclaim.ref_weight_bits)
    mu = MuGeometry(capacity=spec.mu_bytes, word_bytes=spec.mu_word_bytes, mu_id_bits=sizing.mu_id_bits,
                    buffer_id_bits=mem["buffer_id_bits"], virtual_bits=mem["offset_bits"])
    policy = POLICIES.get(mem["policy"]).from_config(mem["policy"], mem)
    issues += policy.problems(mu)
    if not socket:
        issues += workload_footprint(params.SECTION, wl[params.SECTION])  # before the workload sizes anything
        issues += _workload_issues(params, cfg)
        issues += _preempt_issues(wl["kind"], mem)
    issues += later
    if issues and params.CAPABILITIES.maps_graph:  # mapping needs every key it reads
        raise ConfigError("config", issues)
    workload = None if socket else params.from_config(
        wl["kind"], wl[params.SECTION], ChipContext(spec, lay, policy.room(mu), system, _room_for(policy, mu)), issues)
    try:
        energy = load_table(cfg["energy"]["table"])
    except EnergyTableError as exc:
        energy = None
        issues += [Issue("energy.table", f"{exc.source}: {p}") for p in exc.problems]
    if issues:
        raise ConfigError("config", issues)
    return ChipConfig(
        spec=spec, noc=noc_params_for(spec, run["seed"], routing=noc["routing"], **{k: noc[k] for k in TIMING_KEYS}),
        network=noc["model"],
        # a socket's configuration has no workload of its own: the steps it prices put theirs in
        sizing=sizing, mu=mu, policy=policy, reclaim=reclaim, workload=cast(Workload, workload), on_oom=mem["on_oom"],
        preempt_mode=mem["preempt_mode"] or PREEMPT_MODES[0], admit_watermark=mem["admit_watermark"],
        prefix_sharing=mem["prefix_sharing"], prefix_cache_bytes=mem["prefix_cache_bytes"],
        placement=mem["placement"], jitter=noc["jitter"], seed=run["seed"], max_cycles=run["max_cycles"],
        sample_cycles=run["sample_cycles"], trace=trace, trace_limit=run["trace_limit"], memory_map_cycle=memory_map,
        energy=energy, bulk=noc["bulk"] or ("flows" if spec.tiers else "packets"),
    )
