"""The kernels see the arrays a shard holds: the records a shard, its traffic source and its
measurement keep for the kernels (rebuilt only when one of their arrays is replaced by a larger
one) still name their arrays after every kind of growth."""

import pytest

from sim.noc import kernel
from sim.noc.measure import MeasureTables
from sim.noc.params import NocParams
from sim.noc.shard import NocShard
from sim.noc.sources import SourceTables
from sim.noc.topology import Region
from sim.packetnoc import kernel as packet_kernel
from sim.packetnoc.shard import PacketShard


def _owners(shard, tables):
    return ((shard, tables), (shard.source, SourceTables), (shard.measure, MeasureTables))


@pytest.mark.parametrize("model,tables,queue", [(NocShard, kernel.Tables, "sq"),
                                                (PacketShard, packet_kernel.Tables, "hkey")])
def test_kernel_tables_follow_growth(model, tables, queue):
    # far beyond saturation, past the horizon, every packet recorded and none taken: the source
    # queues (or the bid heap), the record buffers and the per-cycle counts all grow
    p = NocParams(rows=4, cols=4, rate=3.0, packet_flits=4, warmup_cycles=50, measure_cycles=200,
                  drain_cycles=50)
    shard = model(p, Region(0, 4, 0, 4), record_ejections=True)
    first = {(id(owner), f): getattr(owner, f) for owner, rec in _owners(shard, tables) for f in rec._fields}
    for t in range(0, 4000, 100):
        shard.offer([t], [5], [10], [2])  # scripted packets replace the script array
        shard.advance(t, t + 100)
    grown = {f for owner, rec in _owners(shard, tables) for f in rec._fields
             if getattr(owner, f) is not first[id(owner), f]}
    assert {"cre", "scr", "cycles", "rec", queue} <= grown
    for owner, rec in _owners(shard, tables):
        assert len(owner.kernel_tables) == len(rec._fields)
        assert [f for f, a in zip(rec._fields, owner.kernel_tables) if a is not getattr(owner, f)] == []
