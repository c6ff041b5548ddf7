"""Counter-based random numbers: a pure function of (seed, stream, component, counter).

Every random draw in rdasim is keyed by the global seed, a stream id (what the number
is for), the component that draws it (a node, a unit) and a counter (usually the
cycle). No generator state is carried, so results cannot depend on how the grid is
cut into shards, on the order shards run, or on which process runs them (docs/design.md,
"Determinism"). The mixer is SplitMix64's finaliser (Steele, Lea, Flood, OOPSLA 2014),
applied to a combination of the four keys with distinct odd multipliers.
"""

from __future__ import annotations

import numpy as np

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_K_SEED = np.uint64(0x9E3779B97F4A7C15)
_K_STREAM = np.uint64(0xD1B54A32D192ED03)
_K_COMP = np.uint64(0x8CB92BA72F3D8DD7)
K_CTR = np.uint64(0xABC98388FB8FAC03)  # hash64 = mix64(component_keys(...) + counter * K_CTR)
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)
UNIT_SHIFT = np.uint64(11)  # uniform = float(hash >> UNIT_SHIFT) * UNIT: 53 random bits
UNIT = 1.0 / (1 << 53)

# stream ids: one per purpose, so two kinds of draw never share numbers
STREAM_INJECT = 1
STREAM_DEST = 2
STREAM_HOTSPOT = 3


def mix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser: a bijective avalanche mix of uint64 values."""
    x = x ^ (x >> _S30)
    x = x * _M1
    x = x ^ (x >> _S27)
    x = x * _M2
    return x ^ (x >> _S31)


def component_keys(seed: int, stream: int, component) -> np.ndarray:
    """``hash64``'s first stage: a uint64 key per component, to which the counter is added
    (a compiled loop over counters keeps the keys: sim/noc/traffic.py)."""
    comp = np.asarray(component, dtype=np.uint64)
    with np.errstate(over="ignore"):  # uint64 arithmetic is meant to wrap
        keys = np.array([seed & 0xFFFFFFFFFFFFFFFF, stream], dtype=np.uint64)
        base = mix64(keys[:1] * _K_SEED + keys[1:] * _K_STREAM)[0]
        return mix64(base + comp * _K_COMP)


def hash64(seed: int, stream: int, component, counter) -> np.ndarray:
    """uint64 hash of the keys; component and counter broadcast as numpy arrays."""
    ctr = np.asarray(counter, dtype=np.uint64)
    with np.errstate(over="ignore"):
        return mix64(component_keys(seed, stream, component) + ctr * K_CTR)


def uniform(seed: int, stream: int, component, counter) -> np.ndarray:
    """Floats in [0, 1) with 53 random bits, one per (component, counter) pair."""
    return (hash64(seed, stream, component, counter) >> UNIT_SHIFT).astype(np.float64) * UNIT


def below(seed: int, stream: int, component, counter, n) -> np.ndarray:
    """Integers uniform in [0, n) (n may be an array); bias below 2**-40 for n < 2**13."""
    u = uniform(seed, stream, component, counter)
    return np.minimum((u * n).astype(np.int64), np.asarray(n, dtype=np.int64) - 1)
