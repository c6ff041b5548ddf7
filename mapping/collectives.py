"""Collective communication time per topology (DFModel's formulas; bytes, bytes/s, seconds).

Per-byte ratios for a group of p chips on one dimension of link bandwidth BW:

| collective             | ring          | switch        | fully connected |
|------------------------|---------------|---------------|-----------------|
| all-reduce, all-gather | (p-1)/(p*BW)  | (p-1)/(p*BW)  | 1/(p*BW)        |
| all-to-all             | p^2/(8*BW)    | p/(4*BW)      | 1/BW            |
| point-to-point         | 1/BW          |               |                 |

A group of one chip communicates nothing (the published formulas would charge the
fully-connected and all-to-all cases even then).
"""

from __future__ import annotations

from mapping.graph import CollectiveKind
from mapping.systems import LinkKind

REDUCING = (CollectiveKind.ALL_REDUCE, CollectiveKind.ALL_GATHER, CollectiveKind.DP_ALL_REDUCE)


def seconds_per_byte(kind: CollectiveKind, link: LinkKind, p: int, bandwidth: float) -> float:
    """Time per byte of a TP or DP collective over ``p`` chips on one network dimension."""
    if p <= 1:
        return 0.0
    if kind in REDUCING:
        return (1.0 if link is LinkKind.FULLY_CONNECTED else p - 1.0) / (p * bandwidth)
    if kind is CollectiveKind.ALL_TO_ALL:
        return {LinkKind.RING: p * p / 8.0, LinkKind.SWITCH: p / 4.0, LinkKind.FULLY_CONNECTED: 1.0}[link] / bandwidth
    raise ValueError(f"{kind.value} has no per-byte group ratio")


def point_to_point_seconds_per_byte(bandwidth: float) -> float:
    return 1.0 / bandwidth


def all_to_all_factors(shape: str, sizes: list[int], chips: int) -> list[tuple[float, float]]:
    """(bandwidth factor, message factor) per dimension for a whole-system all-to-all.

    ``chips`` is the number of chips of one copy; n2 = chips*(chips-1)/2 chip pairs.
    """
    x, y, z = (list(sizes) + [1, 1])[:3]
    n2 = chips * (chips - 1) / 2.0
    pairs = lambda k: k * (k - 1) / 2.0  # noqa: E731 - tiny local helper
    table: dict[str, list[tuple[float, float]]] = {
        "sw": [(x, n2)], "fc": [(x * x / 4.0, n2)], "r": [(2.0, n2)],
        "r_r": [(2.0 * x, n2), (2.0 * y, n2)],
        "fc_fc": [(x * x / 4.0, pairs(x)), (y * y / 4.0, n2)],
        "r_fc": [(2.0, pairs(x)), (y * y / 4.0, n2)],
        "r_sw": [(2.0, pairs(x)), (float(y), n2)],
        "sw_sw": [(float(x), pairs(x)), (float(y), n2)],
        "r_r_r": [(2.0 * x * y, n2), (2.0 * x * z, n2), (2.0 * y * z, n2)],
        "r_sw_sw": [(2.0, pairs(x)), (float(y), pairs(x * y)), (float(z), n2)],
        "sw_sw_sw": [(float(x), pairs(x)), (float(y), pairs(x * y)), (float(z), n2)],
    }
    if shape not in table:
        raise ValueError(f"no all-to-all model for topology {shape!r}")
    return table[shape]


def global_all_to_all_seconds(total_bytes: float, shape: str, sizes: list[int],
                              bandwidths: list[float], chips: int) -> float:
    """All-to-all of ``total_bytes`` among all chips of a copy: the slowest dimension's time.

    Each chip pair exchanges total/chips^2 bytes; dimension j moves msg_j of those
    pair messages over bandwidth BW_j * bwf_j (DFModel's multi-dimensional formula).
    """
    if chips <= 1:
        return 0.0
    per_pair = total_bytes / (chips * chips)
    factors = all_to_all_factors(shape, sizes, chips)
    return max(per_pair * msg / (bw * bwf) for (bwf, msg), bw in zip(factors, bandwidths))


def hpl_panel_seconds(broadcast_bytes: float, p2p_bytes: float, x: int, y: int,
                      bandwidth0: float, bandwidth1: float) -> tuple[float, float]:
    """(point-to-point time along dimension 0, broadcast time along dimension 1) per chip.

    A chip sends broadcast/X bytes along dimension 1 and p2p/Y along dimension 0; a
    factor of 1 means no exchange on that dimension.
    """
    p2p = p2p_bytes / y / bandwidth0 if y > 1 else 0.0
    bcast = broadcast_bytes / x / bandwidth1 if x > 1 else 0.0
    return p2p, bcast
