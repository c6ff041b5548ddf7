"""The one writer: each form writes the bytes pyarrow's own calls for that form write, so files written
before every table went through writer.write_table and after it are the same files."""

import io as bytes_io

import pyarrow as pa
import pyarrow.parquet as pq

from cluster.results import writer
from cluster.sweep.records import SWEEP_FIELDS, point_form

TABLE = pa.table({"sweep_id": ["s", "s"], "point_error": [None, "boom"], "noc_rate": [0.1, 0.2],
                  "latency": [12.5, 30.0]}).replace_schema_metadata({b"table": b"noc_summary"})
FOOTER = {b"rdasim.point_id": b"abc", b"rdasim.point_status": b"ok"}


def _pyarrow_bytes(write) -> bytes:
    sink = bytes_io.BytesIO()
    write(sink)
    return sink.getvalue()


def test_a_run_table_is_what_pyarrow_write_table_writes(tmp_path):
    path = writer.write_table(TABLE, tmp_path / "t.parquet")
    assert path.read_bytes() == _pyarrow_bytes(lambda sink: pq.write_table(TABLE, sink))


def test_a_point_file_keeps_its_small_footer_and_the_point_it_names(tmp_path):
    fields = SWEEP_FIELDS[:1] + [pa.field("noc_rate", pa.float64())]
    path = writer.write_table(TABLE, tmp_path / "p.parquet", FOOTER, point_form(fields))

    def old(sink):
        with pq.ParquetWriter(sink, TABLE.schema, store_schema=False, use_dictionary=False,
                              write_statistics=["sweep_id", "noc_rate"]) as w:
            w.write_table(TABLE)
            w.add_key_value_metadata(FOOTER)

    assert path.read_bytes() == _pyarrow_bytes(old)
    meta = pq.read_metadata(path)
    assert meta.metadata[b"rdasim.point_id"] == b"abc" and b"ARROW:schema" not in meta.metadata
    stats = {meta.row_group(0).column(i).path_in_schema: meta.row_group(0).column(i).is_stats_set
             for i in range(meta.num_columns)}
    assert stats == {"sweep_id": True, "point_error": False, "noc_rate": True, "latency": False}


def test_a_durable_form_with_row_groups_writes_them(tmp_path):
    form = writer.TableForm(statistics=("sweep_id",), row_group=1, durable=True)
    path = writer.write_table(TABLE, tmp_path / "c.parquet", FOOTER, form)

    def old(sink):
        with pq.ParquetWriter(sink, TABLE.schema, write_statistics=["sweep_id"]) as w:
            w.write_table(TABLE, row_group_size=1)
            w.add_key_value_metadata(FOOTER)

    assert path.read_bytes() == _pyarrow_bytes(old)
    assert pq.read_metadata(path).num_row_groups == 2
