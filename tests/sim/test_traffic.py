"""Traffic declared as columns (sim/traffic.py): what a declaration derives, worked by hand, and
a round trip through the wire's sections for every declared shape."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.traffic import Columnar, Columns, Matrix, Part, Traffic, column, matrix, part


def a(*xs):
    return np.array(xs, dtype=np.int64)


class Hops(Columnar):
    """Two sections: hops (due, 2 flits each in a column) and acks (due, a flit each)."""

    hop_cycle: np.ndarray = column("hops", due=True)
    hop_dst: np.ndarray = column("hops")
    hop_flits: np.ndarray = column("hops", flits="value")
    ack_cycle: np.ndarray = column("acks", due=True, flits="row")


class Carried(Columnar):
    """A part, a record per row and a section of columns without a due cycle."""

    inner: Hops = part()
    rec: np.ndarray = matrix(("x", "y", "z"))
    tag: np.ndarray = column("tags")


def test_the_declaration_is_the_sections():
    assert Hops.SECTIONS == (Columns("hops", ("hop_cycle", "hop_dst", "hop_flits"), "hop_cycle", "hop_flits"),
                             Columns("acks", ("ack_cycle",), "ack_cycle", None, True))
    assert Carried.SECTIONS == (Part("inner"), Matrix("rec", 3), Columns("tags", ("tag",)))
    assert Hops().widths() == (3, 1) and Carried(Hops()).widths() == (3, 1, 3, 1)
    assert Hops.columns("hops") == ("hop_cycle", "hop_dst", "hop_flits")
    assert isinstance(Hops(), Traffic) and isinstance(Carried(Hops()), Traffic)


def test_what_a_declaration_derives_by_hand():
    h = Hops(a(9, 7), a(1, 2), a(4, 3), a(8))
    assert len(h) == 3 and h.earliest() == 7.0 and h.flit_count() == 4 + 3 + 1
    empty = Hops()
    assert len(empty) == 0 and empty.earliest() == float("inf") and empty.flit_count() == 0
    c = Carried(h, np.arange(6, dtype=np.int64).reshape(2, 3), a(5))
    assert len(c) == 3 + 2 + 1 and c.earliest() == 7.0 and c.flit_count() == 8  # the part's flits only
    nothing = c.nothing()
    assert type(nothing.inner) is Hops and len(nothing) == 0 and nothing.rec.shape == (0, 3)


def test_join_keeps_order_and_skips_what_is_empty():
    x, y = Hops(a(1), a(10), a(2), a()), Hops(a(3, 4), a(11, 12), a(1, 1), a(5))
    j = Hops().join([x, Hops(), y])
    assert j.hop_cycle.tolist() == [1, 3, 4] and j.hop_dst.tolist() == [10, 11, 12] and j.ack_cycle.tolist() == [5]
    assert Hops().join([Hops(), x]) is x and Hops().join([]).hop_cycle.size == 0  # nothing to copy
    cx = Carried(x, a(1, 2, 3).reshape(1, 3), a(7))
    cy = Carried(y, a(4, 5, 6).reshape(1, 3), a())
    cj = cx.join([cy])
    assert cj.inner.hop_cycle.tolist() == [1, 3, 4] and cj.rec.tolist() == [[1, 2, 3], [4, 5, 6]]
    assert cj.tag.tolist() == [7]


def test_select_takes_a_mask_per_section_and_leaves_an_empty_section_empty():
    h = Hops(a(1, 2, 3), a(10, 11, 12), a(1, 1, 1), a())
    s = h.select((np.array([True, False, True]), np.array([True, False, True])))
    assert s.hop_dst.tolist() == [10, 12] and s.ack_cycle.size == 0
    with pytest.raises(TypeError, match="part 'inner'"):
        Carried(h).select((np.ones(3, bool),) * 3)


def test_a_field_not_declared_or_a_section_with_two_due_columns_is_refused():
    with pytest.raises(TypeError, match="declare it with column"):
        class Loose(Columnar):  # noqa: F841 - the class statement is the test
            when: np.ndarray = None  # type: ignore[assignment]
    with pytest.raises(TypeError, match="more than one due"):
        class Twice(Columnar):  # noqa: F841
            t0: np.ndarray = column("s", due=True)
            t1: np.ndarray = column("s", due=True)


ROWS = st.integers(0, 4)


@st.composite
def carried(draw):
    n, m, k = draw(ROWS), draw(ROWS), draw(ROWS)
    ints = st.integers(-(1 << 62), 1 << 62)

    def col(size):
        return np.array(draw(st.lists(ints, min_size=size, max_size=size)), dtype=np.int64)

    inner = Hops(col(n), col(n), col(n), col(m))
    return Carried(inner, col(3 * k).reshape(k, 3), col(draw(ROWS)))


@settings(max_examples=40, deadline=None)
@given(c=carried())
def test_encode_then_decode_gives_back_every_column(c):
    sections = c.encode()
    assert [len(sec) for sec in sections] == list(c.widths())
    assert all(len({len(col) for col in sec}) == 1 for sec in sections)  # equal-length columns
    back = Carried(Hops()).decode(sections)
    def lists(secs):
        return [[col.tolist() for col in sec] for sec in secs]

    assert lists(back.encode()) == lists(sections)
    assert back.rec.shape == c.rec.shape and len(back) == len(c) and back.flit_count() == c.flit_count()
