"""NKI-style direct tile allocation in SBUF and PSUM (after AWS NKI's ncc.sbuf/psum alloc APIs).

A tensor has block dimensions B (its logical tiles), one partition dimension P and free
bytes F per partition. An allocation function maps each logical block index to a
physical tile; ``mod_alloc`` is the modulo scheme: block index i goes to physical tile
``i mod num_tiles`` (linearised row-major), stepping partitions by the tile's partition
count and bytes by its free size. Every physical tile is checked against the ISA and
memory rules here, so an illegal mapping fails at allocation time with the tile named.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from allocators.errors import InputError


def legal_start_partitions(partitions: int) -> tuple[int, ...]:
    """ISA rule: <= 32 partitions start at 0/32/64/96, <= 64 at 0/64, more than 64 at 0."""
    if 0 < partitions <= 32:
        return (0, 32, 64, 96)
    if 32 < partitions <= 64:
        return (0, 64)
    if 64 < partitions <= 128:
        return (0,)
    raise InputError(f"a tile spans 1 to 128 partitions, got {partitions}")


@dataclass(frozen=True)
class SbufSpec:
    """SBUF: partitions x bytes per partition, a tail reserved for the compiler, an alignment."""

    partitions: int = 128
    bytes_per_partition: int = 192 * 1024
    reserved_tail: int = 16 * 1024
    min_alignment: int = 32

    @property
    def usable_bytes(self) -> int:
        return self.bytes_per_partition - self.reserved_tail


@dataclass(frozen=True)
class PsumSpec:
    """PSUM: partitions x banks of ``bank_bytes`` each; a tile never crosses a bank."""

    partitions: int = 128
    banks: int = 8
    bank_bytes: int = 2048
    min_alignment: int = 4


@dataclass(frozen=True)
class PhysicalTile:
    """Where one logical tile lives: partitions [start, start + count), bytes [addr, addr + size).

    For PSUM ``bank`` is set and ``byte_addr`` is the global byte address (bank x bank bytes
    + offset within the bank), so tiles of both memories compare the same way.
    """

    memory: str
    tensor: str
    index: tuple[int, ...]
    start_partition: int
    partitions: int
    byte_addr: int
    size: int
    bank: int | None = None

    @property
    def partition_range(self) -> tuple[int, int]:
        return self.start_partition, self.start_partition + self.partitions

    @property
    def byte_range(self) -> tuple[int, int]:
        return self.byte_addr, self.byte_addr + self.size


AllocFunc = Callable[[tuple[int, ...], int, int], tuple]


def _linear(shape: Sequence[int], index: Sequence[int]) -> int:
    """Row-major position of ``index`` in ``shape``."""
    pos = 0
    for dim, i in zip(shape, index):
        pos = pos * dim + i
    return pos


def _modulo(num_tiles: Sequence[int], index: tuple[int, ...]) -> int:
    """Physical tile number of a logical block under modulo allocation (empty shape: all ones)."""
    shape = tuple(num_tiles) or (1,) * len(index)
    if len(shape) != len(index):
        raise InputError(f"tile counts {tuple(num_tiles)} do not match the {len(index)} block dimension(s)")
    if any(s <= 0 for s in shape):
        raise InputError(f"tile counts must be positive, got {tuple(num_tiles)}")
    return _linear(shape, tuple(i % s for i, s in zip(index, shape)))


def mod_alloc(base_addr: int, base_partition: int = 0, num_par_tiles: Sequence[int] = (),
              num_free_tiles: Sequence[int] = ()) -> AllocFunc:
    """SBUF modulo allocation: (base_partition + p x pdim, base_addr + f x fdim) for tile numbers p, f."""
    def func(index: tuple[int, ...], pdim: int, fdim: int) -> tuple[int, int]:
        return (base_partition + _modulo(num_par_tiles, index) * pdim,
                base_addr + _modulo(num_free_tiles, index) * fdim)
    return func


def psum_mod_alloc(base_bank: int, base_addr: int = 0, base_partition: int = 0,
                   num_bank_tiles: Sequence[int] = (), num_par_tiles: Sequence[int] = (),
                   num_free_tiles: Sequence[int] = ()) -> AllocFunc:
    """PSUM modulo allocation: (bank, start partition, byte offset within the bank)."""
    def func(index: tuple[int, ...], pdim: int, fdim: int) -> tuple[int, int, int]:
        return (base_bank + _modulo(num_bank_tiles, index),
                base_partition + _modulo(num_par_tiles, index) * pdim,
                base_addr + _modulo(num_free_tiles, index) * fdim)
    return func


def _blocks(name: str, block_shape: Sequence[int], fdim: int):
    """Every logical block index of a tensor (row-major), after checking its shape."""
    if fdim <= 0:
        raise InputError(f"{name}: free size must be positive, got {fdim}")
    if any(d <= 0 for d in block_shape):
        raise InputError(f"{name}: block dimensions must be positive, got {tuple(block_shape)}")
    return itertools.product(*(range(d) for d in block_shape))


def _check_tile(where: str, start: int, pdim: int, partitions: int,
                addr: int, fdim: int, alignment: int, limit: int, beyond: str) -> None:
    """ISA start-partition rule, partition range, byte alignment and byte range of one tile."""
    allowed = legal_start_partitions(pdim)
    if start not in allowed:
        raise InputError(f"{where}: start partition {start} is illegal for a {pdim}-partition tile "
                         f"(allowed: {', '.join(map(str, allowed))})")
    if start + pdim > partitions:
        raise InputError(f"{where}: partitions [{start}, {start + pdim}) exceed the {partitions} partitions")
    if addr % alignment:
        raise InputError(f"{where}: byte address {addr} is not a multiple of {alignment}")
    if addr < 0 or addr + fdim > limit:
        raise InputError(f"{where}: bytes [{addr}, {addr + fdim}) {beyond}")


def sbuf_alloc(name: str, block_shape: Sequence[int], pdim: int, fdim: int, func: AllocFunc,
               spec: SbufSpec = SbufSpec()) -> list[PhysicalTile]:
    """Physical SBUF tile of every logical block of tensor ``name`` (``fdim`` bytes per partition)."""
    tiles = []
    for index in _blocks(name, block_shape, fdim):
        start, addr = func(index, pdim, fdim)
        _check_tile(f"SBUF tensor {name!r} tile {index}", start, pdim, spec.partitions, addr, fdim,
                    spec.min_alignment, spec.usable_bytes,
                    f"outside the usable [0, {spec.usable_bytes}) of each partition "
                    f"(reserved tail {spec.reserved_tail} B)")
        tiles.append(PhysicalTile("SBUF", name, index, start, pdim, addr, fdim))
    return tiles


def psum_alloc(name: str, block_shape: Sequence[int], pdim: int, fdim: int, func: AllocFunc,
               spec: PsumSpec = PsumSpec()) -> list[PhysicalTile]:
    """Physical PSUM tile of every logical block; ``func`` returns (bank, start partition, offset)."""
    tiles = []
    for index in _blocks(name, block_shape, fdim):
        bank, start, offset = func(index, pdim, fdim)
        where = f"PSUM tensor {name!r} tile {index}"
        if not 0 <= bank < spec.banks:
            raise InputError(f"{where}: bank {bank} outside [0, {spec.banks})")
        _check_tile(where, start, pdim, spec.partitions, offset, fdim, spec.min_alignment, spec.bank_bytes,
                    f"cross the {spec.bank_bytes}-byte bank")
        tiles.append(PhysicalTile("PSUM", name, index, start, pdim, bank * spec.bank_bytes + offset, fdim, bank))
    return tiles
