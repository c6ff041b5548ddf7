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
    out = {"cycle": None, "mus": {}}
    for s in snapshots:
        if s:
            out["cycle"] = s["cycle"]
            out["mus"].update(s["mus"])
            out["ended_before"] = out.get("ended_before", False) or s.get("ended_before", False)
    return out


def _runs(block_map) -> list[tuple[int, int, int, int, int]]:
    """Consecutive physical blocks with consecutive virtual indices of one buffer:
    (first block, last block, buffer, first virtual index, last virtual index)."""
    runs = []
    for blk, buf, v in block_map:
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
    policy = cfg.policy.policy
    head = f"Memory map at cycle {requested} (policy {policy}"
    head += f", block {cfg.policy.block_bytes} B)" if policy == "virtual" else ")"
    lines = [head]
    if snap.get("ended_before"):
        lines.append(f"(the run ended before cycle {requested}: this is the state at its end)")
    for uid in sorted(snap["mus"], key=int):
        mu = snap["mus"][uid]
        regions = mu["regions"]
        if policy == "virtual":
            free_blocks = sum(1 for _, b, _ in regions if b < 0)
            largest = free_blocks * cfg.policy.block_bytes
        else:
            frees = [n for _, n, b, _ in regions if b == -1]
            largest = max(frees, default=0)
        lines.append("")
        lines.append(f"{unit_name(spec, lay, int(uid))}: used {mu['used']:,} B, reserved {mu['reserved']:,} B, "
                     f"free {cap - mu['reserved']:,} B of {cap:,} B; largest free {largest:,} B; "
                     f"{mu['buffers']} buffers" + (f"; evicted to DRAM: {mu['evicted']}" if mu["evicted"] else ""))
        if policy == "virtual":
            bb = cfg.policy.block_bytes
            for first, last, buf, v0, v1 in _runs(regions):
                addr = f"  blocks {first:>5}-{last:<5} 0x{first * bb:08x}-0x{(last + 1) * bb - 1:08x}"
                if buf < 0:
                    lines.append(f"{addr}  free")
                else:
                    lines.append(f"{addr}  buffer {buf:<6} virtual {v0}-{v1}  ({mu['sizes'].get(buf, 0):,} B in use)")
        else:
            for start, n, buf, used in regions:
                addr = f"  0x{start:08x}-0x{start + n - 1:08x} {n:>10,} B"
                if buf == -1:
                    lines.append(f"{addr}  free")
                elif buf == -2:
                    lines.append(f"{addr}  copying (old region of a growing buffer)")
                else:
                    lines.append(f"{addr}  buffer {buf:<6} {used:,} B in use")
    return "\n".join(lines) + "\n"
