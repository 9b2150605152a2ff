import gzip

import numpy as np
import pytest

from hpcgnn.errors import InputError
from hpcgnn.prepare.textfile import NumericTable, OptionalColumn, read_column


def numbered_lines(count):
    return "".join(f"{i},{2 * i}\n" for i in range(count))


@pytest.mark.parametrize("compressed", [False, True])
def test_small_blocks_split_lines_correctly(tmp_path, compressed):
    text = "# header\n" + numbered_lines(500)
    path = tmp_path / ("t.csv.gz" if compressed else "t.csv")
    if compressed:
        with gzip.open(path, "wt") as f:
            f.write(text)
    else:
        path.write_text(text)
    table = NumericTable(path, dtype=np.int64, block_bytes=64)
    blocks = list(table.blocks())
    assert len(blocks) > 10
    data = np.concatenate(blocks)
    np.testing.assert_array_equal(data[:, 0], np.arange(500))
    np.testing.assert_array_equal(data[:, 1], 2 * np.arange(500))
    assert table.columns == 2


def test_error_line_number_counts_across_blocks(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("# c\n" + numbered_lines(300) + "7,oops\n" + numbered_lines(3))
    with pytest.raises(InputError, match=r"t\.csv, line 302: 'oops' is not an integer"):
        list(NumericTable(path, dtype=np.int64, block_bytes=100).blocks())


def test_column_count_is_fixed_by_the_first_line(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("1.5,2,3\n4,5,6\n7,8\n")
    with pytest.raises(InputError, match="line 3: expected 3 values, got 2"):
        NumericTable(path, dtype=np.float32, what="features").read()


def test_windows_line_ends_missing_final_newline_and_mixed_separators(tmp_path):
    path = tmp_path / "t.txt"
    path.write_bytes(b"1 2\r\n3,4\r\n5\t6")
    np.testing.assert_array_equal(
        NumericTable(path, dtype=np.int64).read(), [[1, 2], [3, 4], [5, 6]]
    )


def test_read_column_and_nan(tmp_path):
    path = tmp_path / "labels.csv"
    path.write_text("1\nnan\n3\n")
    values = read_column(path, np.float64, "labels")
    assert values[0] == 1 and np.isnan(values[1]) and values[2] == 3


def test_missing_and_corrupt_files(tmp_path):
    with pytest.raises(InputError, match=r"nope\.csv: no such file \(edge list\)"):
        NumericTable(tmp_path / "nope.csv", dtype=np.int64, what="edge list")
    bad = tmp_path / "bad.csv.gz"
    bad.write_bytes(gzip.compress(b"1,2\n" * 1000)[:-20])
    with pytest.raises(InputError, match="corrupt or truncated"):
        NumericTable(bad, dtype=np.int64).read()


WEIGHT = OptionalColumn("weight", np.dtype(np.float32))


def _weighted_table(path, text, block_bytes=64):
    path.write_text(text)
    return NumericTable(path, dtype=np.int64, first_columns=2, optional=WEIGHT,
                        block_bytes=block_bytes)


@pytest.mark.parametrize("with_weights", [False, True])
def test_an_optional_column_is_on_every_line_or_none(tmp_path, with_weights):
    lines = [f"{i} {2 * i}" + (f" {i / 4}" if with_weights else "") for i in range(300)]
    table = _weighted_table(tmp_path / "e.txt", "# header\n" + "\n".join(lines) + "\n")
    blocks = list(table.blocks_with_optional())
    assert len(blocks) > 10 and table.has_optional is with_weights
    ids = np.concatenate([b for b, _ in blocks])
    assert ids.dtype == np.int64
    np.testing.assert_array_equal(ids, np.c_[np.arange(300), 2 * np.arange(300)])
    if with_weights:
        w = np.concatenate([v for _, v in blocks])
        assert w.dtype == np.float32
        np.testing.assert_array_equal(w, np.arange(300) / 4)
    else:
        assert all(v is None for _, v in blocks)
    np.testing.assert_array_equal(np.concatenate(list(table.blocks())), ids)


@pytest.mark.parametrize(
    "lines, bad, words",
    [
        (["1 2"] * 200 + ["3 4 0.5"] + ["1 2"] * 5, 202, "a weight, but the first line has none"),
        (["1 2 1"] * 200 + ["3 4"] + ["1 2 1"] * 5, 202, "no weight, but the first line has one"),
        (["1 2 1"] * 200 + ["3 4"] * 50, 202, "no weight, but the first line has one"),
        (["1 2"] * 200 + ["3 4 1"] * 50, 202, "a weight, but the first line has none"),
        (["1 2 1"] * 200 + ["3 4 inf"], 202, "weight inf is not a finite float32"),
    ],
    ids=["weight-in-a-later-block", "no-weight-in-a-later-block", "a-block-without",
         "a-block-with", "inf-in-a-later-block"],
)
def test_the_first_line_that_differs_is_named(tmp_path, lines, bad, words):
    table = _weighted_table(tmp_path / "e.txt", "# c\n" + "\n".join(lines) + "\n")
    with pytest.raises(InputError, match=rf"e\.txt, line {bad}: {words}"):
        list(table.blocks_with_optional())


def test_an_optional_column_needs_first_columns(tmp_path):
    (tmp_path / "e.txt").write_text("1 2\n")
    with pytest.raises(ValueError, match="follows first_columns"):
        NumericTable(tmp_path / "e.txt", dtype=np.int64, optional=WEIGHT)
