"""Every MU's block map at one cycle, as text in the style of a detailed memory report.

For the contiguous policies each MU lists its regions by address (buffer, bytes
reserved, bytes in use, or free; ``copying`` marks a realloc-copy source region still
live); for the virtual policy it lists runs of physical blocks with the buffer and
virtual block range mapped onto them. Each MU's header gives used, reserved and free
bytes, the largest free region and the buffer count.
"""

from __future__ import annotations

from sim.chip.spec import unit_layout, unit_name


def merge_snapshots(snapshots: list[dict | None]) -> dict:
    """One map of every MU from the shards' snapshots."""
    mus: dict = {}
    out: dict = {"cycle": None, "mus": mus}
    for s in snapshots:
        if s:
            out["cycle"] = s["cycle"]
            mus.update(s["mus"])
            out["ended_before"] = bool(out.get("ended_before")) or bool(s.get("ended_before"))
    return out


def _runs(extents) -> list[tuple[int, int, int, int, int]]:
    """Consecutive physical blocks with consecutive virtual indices of one buffer:
    (first block, last block, buffer, first virtual index, last virtual index)."""
    runs: list[tuple[int, int, int, int, int]] = []
    for start, size, buf, _, v in extents:
        blk = start // size
        if runs and runs[-1][2] == buf and runs[-1][1] == blk - 1 and (buf < 0 or runs[-1][4] == v - 1):
            r = runs[-1]
            runs[-1] = (r[0], blk, buf, r[3], v)
        else:
            runs.append((blk, blk, buf, v, v))
    return runs


def render(cfg, snap: dict, requested: int) -> str:
    spec = cfg.spec
    lay = unit_layout(spec)
    cap = spec.mu_bytes
    mus = snap["mus"]
    paged = any(mu["paged"] for mu in mus.values())
    head = f"Memory map at cycle {requested} (policy {cfg.policy.name}"
    if paged:
        head += f", block {next(mu['extents'][0][1] for mu in mus.values() if mu['extents'])} B"
    lines = [head + ")"]
    if snap.get("ended_before"):
        lines.append(f"(the run ended before cycle {requested}: this is the state at its end)")
    for uid in sorted(mus, key=int):
        mu = mus[uid]
        extents = mu["extents"]
        if mu["paged"]:
            largest = sum(size for _, size, b, _, _ in extents if b < 0)  # blocks need not be contiguous
        else:
            largest = max((size for _, size, b, _, _ in extents if b == -1), default=0)
        lines.append("")
        lines.append(f"{unit_name(spec, lay, int(uid))}: used {mu['used']:,} B, reserved {mu['reserved']:,} B, "
                     f"free {cap - mu['reserved']:,} B of {cap:,} B; largest free {largest:,} B; "
                     f"{mu['buffers']} buffers" + (f"; evicted to DRAM: {mu['evicted']}" if mu["evicted"] else ""))
        if mu["paged"]:
            bb = extents[0][1] if extents else 1
            for first, last, buf, v0, v1 in _runs(extents):
                addr = f"  blocks {first:>5}-{last:<5} 0x{first * bb:08x}-0x{(last + 1) * bb - 1:08x}"
                if buf < 0:
                    lines.append(f"{addr}  free")
                else:
                    lines.append(f"{addr}  buffer {buf:<6} virtual {v0}-{v1}  ({mu['sizes'].get(buf, 0):,} B in use)")
        else:
            for start, n, buf, used, _ in extents:
                addr = f"  0x{start:08x}-0x{start + n - 1:08x} {n:>10,} B"
                if buf == -1:
                    lines.append(f"{addr}  free")
                elif buf == -2:
                    lines.append(f"{addr}  copying (old region of a growing buffer)")
                else:
                    lines.append(f"{addr}  buffer {buf:<6} {used:,} B in use")
    return "\n".join(lines) + "\n"
