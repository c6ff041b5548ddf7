"""The wire format: one epoch's output packed into one int64 array and read back unchanged, any section shape."""

from dataclasses import dataclass, field

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.parallel.epochs import EpochMeta
from cluster.parallel.wire import NEVER, meta_of, pack, part_of, pauses

INT64 = st.integers(-(1 << 63), (1 << 63) - 1)
CYCLE = st.integers(0, NEVER - 1)  # a finite cycle; NEVER and above mean "never"
FLOAT_CYCLE = st.integers(0, 1 << 53)  # a finite cycle held as a float (exact up to 2**53)


@dataclass(frozen=True)
class Sections:
    """Traffic that already is its sections of equal-length int64 columns: the wire's contract and nothing more."""

    shape: tuple[int, ...]  # columns per section
    sections: list = field(default_factory=list)

    def widths(self) -> tuple[int, ...]:
        return self.shape

    def encode(self) -> list[list[np.ndarray]]:
        return self.sections

    def decode(self, sections: list[list[np.ndarray]]) -> "Sections":
        return Sections(self.shape, sections)


@st.composite
def outputs(draw):
    """(codec, parts): a random number of destination shards, each with random row counts (0 included)."""
    widths = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=4)))
    parts = []
    for _ in range(draw(st.integers(0, 5))):
        part = []
        for w in widths:
            n = draw(st.integers(0, 6))
            part.append([np.array(draw(st.lists(INT64, min_size=n, max_size=n)), dtype=np.int64) for _ in range(w)])
        parts.append(Sections(widths, part))
    return Sections(widths), parts


OR_NEVER = st.one_of(FLOAT_CYCLE.map(float), st.just(float("inf")))
metas = st.builds(EpochMeta, t0=CYCLE, t1=CYCLE, next_event=OR_NEVER, earliest_out=OR_NEVER,
                  created=st.integers(0, 1 << 40), finished=st.integers(0, 1 << 40), active=st.booleans(),
                  safe_until=OR_NEVER)


@settings(max_examples=60, deadline=None)
@given(out=outputs(), meta=metas, pause=st.booleans())
def test_pack_then_unpack_gives_back_every_part_the_meta_and_the_pause_flag(out, meta, pause):
    codec, parts = out
    arr = pack(meta, parts, pause=pause)
    assert arr.dtype == np.int64 and arr.ndim == 1
    assert meta_of(arr) == meta
    assert pauses(arr) is pause
    for i, part in enumerate(parts):
        got = part_of(arr, i, codec).sections
        assert [[len(c) for c in sec] for sec in got] == [[len(c) for c in sec] for sec in part.sections]
        for got_sec, sec in zip(got, part.sections):
            for got_col, col in zip(got_sec, sec):
                np.testing.assert_array_equal(got_col, col)


def test_an_output_to_no_shard_is_the_header_alone():
    meta = EpochMeta(0, 8, float("inf"), float("inf"), 0, 0)
    arr = pack(meta, [])
    assert arr.tolist() == [0, 8, NEVER, NEVER, 0, 0, 1, NEVER, 0, 0]


def test_the_size_on_the_wire_is_the_header_row_counts_and_columns():
    # widths (5, 2): 3 flits and 1 credit to shard 0, nothing to shard 1
    codec = Sections((5, 2))
    flits = [np.arange(3, dtype=np.int64) + 10 * j for j in range(5)]
    credits = [np.array([7], dtype=np.int64), np.array([1], dtype=np.int64)]
    empty = [[np.zeros(0, np.int64)] * 5, [np.zeros(0, np.int64)] * 2]
    arr = pack(EpochMeta(0, 4, 9.0, 5.0, 1, 1), [Sections((5, 2), [flits, credits]), Sections((5, 2), empty)])
    assert len(arr) == 10 + (2 + 3 * 5 + 1 * 2) + (2 + 0)
    assert [len(c) for sec in part_of(arr, 1, codec).sections for c in sec] == [0] * 7
