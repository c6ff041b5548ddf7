"""Unit strings ("256KiB", "1GHz", "450GB/s", "20ns", "638TFLOPS") to plain numbers.

Sizes become integer bytes, frequencies Hz, bandwidths bytes/s, times seconds,
compute rates FLOP/s. Binary prefixes (KiB, MiB, ...) are powers of 1024; decimal
ones (KB, MB, ...) powers of 1000. A lowercase ``b`` means bits ("100Gb/s"). A bare number
is taken in the base unit here; a config value of a kind that needs a unit (a bandwidth, a
time, a frequency, a compute rate) is refused bare before it gets here (schema.NEEDS_UNIT).
"""

from __future__ import annotations

import math
import re
from decimal import Decimal

_DEC = {"": 1, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_BIN = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50}
_TIME = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9, "ps": 1e-12}

_NUM = r"(?P<num>[+-]?(?:\d+(?:_\d+)*(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)"
_RE = re.compile(_NUM + r"\s*(?P<unit>[A-Za-zµ/]*)\s*$")


# the units a value of each kind is spelled in, largest first (each one the parser below reads)
SPELLINGS = {
    "frequency": (("GHz", 1e9), ("MHz", 1e6), ("kHz", 1e3), ("Hz", 1.0)),
    "bandwidth": (("TB/s", 1e12), ("GB/s", 1e9), ("MB/s", 1e6), ("KB/s", 1e3), ("B/s", 1.0)),
    "time": (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9), ("ps", 1e-12)),
    "flops": (("PFLOPS", 1e15), ("TFLOPS", 1e12), ("GFLOPS", 1e9), ("MFLOPS", 1e6), ("FLOPS", 1.0)),
}


def plain(x: float) -> str:
    """A number as a person writes it: 12 significant digits, never an exponent (1e9 -> "1000000000")."""
    text = f"{x:.12g}"
    return format(Decimal(text), "f") if "e" in text else text


def spell(value: float, kind: str) -> str:
    """``value`` (in the kind's base unit: Hz, B/s, s, FLOP/s) in the largest unit it is at least
    one of: 1e9 Hz -> "1GHz", 2e-8 s -> "20ns"; a string the parser reads back to ``value``."""
    units = SPELLINGS[kind]
    unit, scale = next(((u, k) for u, k in units if abs(value) >= k), units[-1])
    return f"{plain(value / scale)}{unit}"


class UnitError(ValueError):
    """A value that cannot be read in the expected unit kind."""


def _split(text: str) -> tuple[float, str]:
    m = _RE.match(text.strip())
    if not m:
        raise UnitError(f"cannot read {text!r} as a number with a unit")
    return float(m.group("num").replace("_", "")), m.group("unit")


def _prefix(p: str, what: str, text: str) -> float:
    if p in _BIN:
        return float(_BIN[p])
    if p in _DEC:
        return float(_DEC[p])
    raise UnitError(f"unknown prefix {p!r} in {what} {text!r}")


def parse_size(value) -> int:
    """Bytes from 256, "256B", "256KiB", "1.5MB", "4Kib" (bits)."""
    if isinstance(value, bool):
        raise UnitError(f"expected a size, got {value!r}")
    if isinstance(value, (int, float)):
        return _whole(value, value)
    num, unit = _split(str(value))
    if unit == "":
        return _whole(num, value)
    if unit.endswith("B"):
        return _whole(num * _prefix(unit[:-1], "size", value), value)
    if unit.endswith("b"):
        return _whole(num * _prefix(unit[:-1], "size", value) / 8, value)
    raise UnitError(f"cannot read {value!r} as a size (examples: 4096, \"256KiB\", \"2MB\")")


def parse_frequency(value) -> float:
    """Hz from 1e9, "1GHz", "800 MHz"."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    num, unit = _split(str(value))
    if unit.endswith("Hz"):
        return num * _prefix(unit[:-2], "frequency", value)
    raise UnitError(f"cannot read {value!r} as a frequency (examples: \"1GHz\", \"800MHz\")")


def parse_bandwidth(value) -> float:
    """Bytes/s from 4.5e11, "450GB/s", "100Gb/s", "1.6TB/s"."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    num, unit = _split(str(value))
    if unit.endswith("/s"):
        base = unit[:-2]
        if base.endswith("B"):
            return num * _prefix(base[:-1], "bandwidth", value)
        if base.endswith("b"):
            return num * _prefix(base[:-1], "bandwidth", value) / 8
    if unit.endswith("Bps"):
        return num * _prefix(unit[:-3], "bandwidth", value)
    raise UnitError(f"cannot read {value!r} as a bandwidth (examples: \"450GB/s\", \"100Gb/s\")")


def parse_time(value) -> float:
    """Seconds from 2e-8, "20ns", "1.5us", "3ms"."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    num, unit = _split(str(value))
    if unit in _TIME:
        return num * _TIME[unit]
    raise UnitError(f"cannot read {value!r} as a time (examples: \"20ns\", \"1.5us\")")


def parse_duration(value) -> float:
    """Seconds from a time that names its unit ("200ms", "1.5s"): a bare number is refused, since
    a latency objective read in the wrong unit would be off by a factor of a thousand or more."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        raise UnitError(f"{value!r} has no unit; give a time with its unit (examples: \"200ms\", \"50us\", \"1s\")")
    return parse_time(value)


def parse_flops(value) -> float:
    """FLOP/s from 3.12e14, "312TFLOPS", "638 TFLOP/s"."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    num, unit = _split(str(value))
    for suffix in ("FLOPS", "FLOP/s", "flops", "FLOPs"):
        if unit.endswith(suffix):
            return num * _prefix(unit[: -len(suffix)], "compute rate", value)
    raise UnitError(f"cannot read {value!r} as a compute rate (examples: \"312TFLOPS\")")


def time_to_cycles(seconds: float, clock_hz: float) -> int:
    """Whole cycles for a time at a clock, rounding up (a 1.2-cycle delay costs 2)."""
    cycles = seconds * clock_hz
    return int(math.ceil(cycles - 1e-9))


def _whole(num: float, original) -> int:
    if num < 0:
        raise UnitError(f"size {original!r} is negative")
    rounded = round(num)
    if abs(num - rounded) > 1e-6 * max(1.0, abs(num)):
        raise UnitError(f"size {original!r} is not a whole number of bytes")
    return int(rounded)
