"""Reading and writing files through pyarrow.dataset: local paths, and `s3://` against the
real S3-protocol server of `conformance/s3_server.py`."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pds
import pyarrow.parquet as pq
import pytest

import reference.data as rd
from conformance import s3_server


def write_parts(folder, files: int = 3, rows: int = 10, row_group_size: int = 4) -> str:
    folder.mkdir(exist_ok=True)
    for f in range(files):
        table = pa.table({"id": list(range(f * rows, (f + 1) * rows)),
                          "x": [float(i) for i in range(rows)]})
        pq.write_table(table, folder / f"part-{f}.parquet", row_group_size=row_group_size)
    return str(folder)


def ids(ds) -> list[int]:
    return sorted(r["id"] for r in ds.iter_rows())


def test_read_parquet_folder_is_one_task_per_row_group_with_counts_from_footers(tmp_path):
    ds = rd.read_parquet(write_parts(tmp_path / "p"))
    assert ds.num_blocks() == 3 * 3  # 10 rows in row groups of 4, 4, 2
    assert ds._known_count() == 30  # known without reading a row
    assert ids(ds) == list(range(30))
    assert len(ds.input_files()) == 3


def test_read_parquet_columns_filter_and_paths_list(tmp_path):
    folder = write_parts(tmp_path / "p")
    ds = rd.read_parquet(folder, columns=["id"], filter=pc.field("id") >= 25)
    assert ds.columns() == ["id"] and ids(ds) == [25, 26, 27, 28, 29]
    two = rd.read_parquet([f"{folder}/part-0.parquet", f"{folder}/part-2.parquet"])
    assert ids(two) == list(range(10)) + list(range(20, 30))


def test_read_parquet_hive_partitions_become_columns(tmp_path):
    table = pa.table({"id": [1, 2, 3, 4], "split": ["a", "a", "b", "b"]})
    pds.write_dataset(table, tmp_path / "h", format="parquet", partitioning=["split"],
                      partitioning_flavor="hive")
    rows = sorted(rd.read_parquet(str(tmp_path / "h")).take_all(), key=lambda r: r["id"])
    assert [(r["id"], r["split"]) for r in rows] == [(1, "a"), (2, "a"), (3, "b"), (4, "b")]


def test_read_csv_and_json(tmp_path):
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "a.csv").write_text("id,name\n1,x\n2,y\n")
    (tmp_path / "c" / "b.csv").write_text("id,name\n3,z\n")
    (tmp_path / "c" / "notes.txt").write_text("not data")
    ds = rd.read_csv(str(tmp_path / "c"), file_extensions=["csv"])
    assert ds.num_blocks() == 2 and ids(ds) == [1, 2, 3]
    (tmp_path / "j.jsonl").write_text("\n".join(json.dumps({"id": i, "v": [i, i]})
                                                for i in range(4)) + "\n")
    rows = rd.read_json(str(tmp_path / "j.jsonl")).take_all()
    assert rows == [{"id": i, "v": [i, i]} for i in range(4)]


def test_write_parquet_round_trip_streams_one_file_per_task(tmp_path):
    out = tmp_path / "out"
    rd.range(100, override_num_blocks=4).map_batches(lambda b: {"id": b["id"] * 2}) \
        .write_parquet(str(out))
    assert len(list(out.glob("*.parquet"))) == 4
    assert ids(rd.read_parquet(str(out))) == [2 * i for i in range(100)]


@pytest.mark.parametrize("call, message", [
    (lambda p: rd.read_parquet(p, bogus=1), "unexpected keyword argument 'bogus'"),
    (lambda p: rd.read_parquet(p + "/missing"), "missing"),
    (lambda p: rd.read_csv(p, file_extensions=["csv"]), "no files found"),
    (lambda p: rd.read_parquet([]), "expected a path"),
])
def test_bad_read_arguments(tmp_path, call, message):
    folder = write_parts(tmp_path / "p", files=1)
    with pytest.raises((TypeError, ValueError, FileNotFoundError), match=message):
        call(folder)


def test_datasets_of_files_pickle_to_other_processes(tmp_path):
    import cloudpickle

    ds = rd.read_parquet(write_parts(tmp_path / "p")).filter(lambda r: r["id"] % 2 == 0)
    assert ids(cloudpickle.loads(cloudpickle.dumps(ds))) == list(range(0, 30, 2))


# ------------------------------------------------------------------------------ S3
@pytest.mark.slow
def test_s3_parquet_through_a_uri_and_an_explicit_filesystem(s3, s3_endpoint, tmp_path,
                                                             monkeypatch):
    fs, bucket = s3
    for name, value in s3_server.environment(s3_endpoint).items():
        monkeypatch.setenv(name, value)
    rd.range(50, override_num_blocks=2).write_parquet(f"s3://{bucket}/ds")
    by_uri = rd.read_parquet(f"s3://{bucket}/ds")
    assert by_uri.num_blocks() == 2 and by_uri._known_count() == 50
    assert ids(by_uri) == list(range(50))
    explicit = rd.read_parquet(f"{bucket}/ds", filesystem=fs)
    first, second = explicit.streaming_split(2, equal=True)
    assert ids(first) == list(range(25)) and ids(second) == list(range(25, 50))


@pytest.mark.slow
def test_s3_csv(s3):
    fs, bucket = s3
    with fs.open_output_stream(f"{bucket}/c/a.csv") as f:
        f.write(b"id,v\n1,2\n3,4\n")
    assert rd.read_csv(f"s3://{bucket}/c", filesystem=fs).take_all() == [
        {"id": 1, "v": 2}, {"id": 3, "v": 4}]
