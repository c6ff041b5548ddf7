"""Chrome trace event format (JSON) of a chip run: opens in ui.perfetto.dev and chrome://tracing.

One process per unit kind (compute units, memory units, DRAM interfaces), one thread
(track) per unit, named by its tile. Spans ("X" events) are compute phases, waits
(for data, acknowledgements, weight grants, the scheduler), stalls and copies;
instants ("i") are buffer allocate, extend, truncate, free, evict and out-of-memory
events, reference +1/-1, weight returns and requests (at the MU), reference copies and
drops (at the holder), and every violation the oracle found; counters ("C") are each MU's bytes in
use. Timestamps are microseconds of simulated time at the chip clock.
"""

from __future__ import annotations

import numpy as np

from sim.chip.spec import KIND_NAMES, unit_layout, unit_name


def chrome_trace(cfg, results, violations: list, limit: int = 1_000_000) -> dict:
    spec = cfg.spec
    lay = unit_layout(spec)
    us = 1e6 / spec.clock_hz
    raw = sorted((ev for r in results for ev in r.trace), key=lambda e: (e[4], e[1], e[2]))
    events = []
    used_units = set()
    for ph, uid, name, cat, start, dur, args in raw[:limit]:
        e = {"name": name, "cat": cat, "ph": ph, "ts": start * us, "pid": int(lay.kind[uid]) + 1, "tid": uid}
        if ph == "X":
            e["dur"] = dur * us
        else:
            e["s"] = "t"
        if args:
            e["args"] = args
        events.append(e)
        used_units.add(uid)
    for cycle, unit, what, alloc in violations:
        events.append({"name": f"oracle: {what}", "cat": "oracle", "ph": "i", "s": "t", "ts": cycle * us,
                       "pid": int(lay.kind[unit]) + 1, "tid": unit, "args": {"allocation": alloc}})
        used_units.add(unit)
    mem = np.concatenate([r.mem_log for r in results]) if results else np.zeros((0, 4), dtype=np.int64)
    if len(mem):
        order = np.lexsort((mem[:, 0], mem[:, 1]))
        mem = mem[order]
        used = np.zeros(len(mem), dtype=np.int64)
        for uid in np.unique(mem[:, 1]).tolist():
            sel = mem[:, 1] == uid
            used[sel] = np.cumsum(mem[sel, 2])
        for (cycle, uid, _, _), u in list(zip(mem.tolist(), used.tolist()))[:limit]:
            events.append({"name": "used bytes", "ph": "C", "ts": cycle * us, "pid": 2, "tid": uid,
                           "args": {"used": u}})
            used_units.add(uid)
    meta = [{"name": "process_name", "ph": "M", "pid": k + 1, "args": {"name": f"{n} units"}}
            for k, n in enumerate(("compute", "memory", "DRAM interface"))]
    for uid in sorted(used_units):
        pid = int(lay.kind[uid]) + 1
        meta.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": uid,
                     "args": {"name": unit_name(spec, lay, uid)}})
        meta.append({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": uid, "args": {"sort_index": uid}})
    dropped = sum(r.trace_dropped for r in results) + max(0, len(raw) - limit)
    return {"traceEvents": meta + events, "displayTimeUnit": "ns",
            "otherData": {"chip": spec.name, "clock_hz": spec.clock_hz, "unit_kinds": list(KIND_NAMES),
                          "events_dropped": dropped}}
