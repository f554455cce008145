"""load_rows (stage 3 helper): CSV and .npy feature rows, header detection, and clear messages for bad files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from monitor.errors import DataError
from monitor.model.io import load_rows, read_rows


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_load_rows_reads_a_numeric_csv(tmp_path: Path) -> None:
    rows = load_rows(_write(tmp_path / "x.csv", "1.5,2\n-3,4e-1\n"))
    np.testing.assert_array_equal(rows, [[1.5, 2.0], [-3.0, 0.4]])
    assert rows.dtype == np.float64


def test_load_rows_skips_a_header_row(tmp_path: Path) -> None:
    rows = load_rows(_write(tmp_path / "x.csv", "flavanoids,od280\n2.5,3.1\n0.5,1.2\n"))
    np.testing.assert_array_equal(rows, [[2.5, 3.1], [0.5, 1.2]])


def test_load_rows_keeps_the_first_row_of_a_csv_with_a_byte_order_mark(tmp_path: Path) -> None:
    path = tmp_path / "excel.csv"
    path.write_bytes(b"\xef\xbb\xbf1.0,2.0\n3.0,4.0\n")
    np.testing.assert_array_equal(load_rows(path), [[1.0, 2.0], [3.0, 4.0]])


def test_load_rows_skips_blank_lines_and_strips_spaces(tmp_path: Path) -> None:
    rows = load_rows(_write(tmp_path / "x.csv", "a, b\n\n 1 , 2 \n,\n3,4\n"))
    np.testing.assert_array_equal(rows, [[1.0, 2.0], [3.0, 4.0]])


def test_load_rows_keeps_nan_and_inf_values(tmp_path: Path) -> None:
    rows = load_rows(_write(tmp_path / "x.csv", "1,nan\ninf,-inf\n"))
    assert np.isnan(rows[0, 1]) and np.isposinf(rows[1, 0]) and np.isneginf(rows[1, 1])


def test_load_rows_reads_an_empty_cell_as_a_missing_value(tmp_path: Path) -> None:
    # pandas' to_csv writes NaN as an empty cell: it is a missing number, not a column of text
    rows = load_rows(_write(tmp_path / "x.csv", "a,b\n1,\n,4\n"))
    assert rows[0, 0] == 1.0 and np.isnan(rows[0, 1]) and np.isnan(rows[1, 0]) and rows[1, 1] == 4.0


def test_load_rows_takes_a_first_row_with_an_empty_cell_as_data(tmp_path: Path) -> None:
    rows = load_rows(_write(tmp_path / "x.csv", "1,\n3,4\n"))
    assert rows.shape == (2, 2) and np.isnan(rows[0, 1])


def test_load_rows_reads_a_txt_file_as_csv(tmp_path: Path) -> None:
    np.testing.assert_array_equal(load_rows(_write(tmp_path / "x.txt", "1,2\n")), [[1.0, 2.0]])


def test_load_rows_reads_a_2d_npy_array(tmp_path: Path) -> None:
    data = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)
    np.save(tmp_path / "x.npy", data)
    np.testing.assert_array_equal(load_rows(tmp_path / "x.npy"), data.astype(np.float64))


def test_load_rows_reads_a_1d_npy_array_as_one_row(tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", np.array([1, 2, 3]))
    np.testing.assert_array_equal(load_rows(tmp_path / "x.npy"), [[1.0, 2.0, 3.0]])


def test_load_rows_rejects_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"data file '.*absent\.csv' does not exist \(expected a \.csv or \.npy file"):
        load_rows(tmp_path / "absent.csv")


def test_load_rows_names_the_path_on_the_error(tmp_path: Path) -> None:
    with pytest.raises(DataError) as info:
        load_rows(tmp_path / "absent.csv")
    assert info.value.path == str(tmp_path / "absent.csv")


@pytest.mark.parametrize(
    ("name", "text", "match"),
    [
        pytest.param(
            "x.parquet", "1,2\n", r"has extension '\.parquet'; expected \.csv or \.npy", id="an_unknown_extension"
        ),
        pytest.param(
            "x.csv",
            "1,2\n3,4\n5,6,7\n",
            r"'.*x\.csv' line 3 has 3 columns; expected 2 like the rows before it",
            id="a_ragged_csv",
        ),
        pytest.param("x.csv", "a,b\n1,2,3\n", "line 2 has 3 columns; expected 2", id="data_rows_wider_than_the_header"),
        pytest.param(
            "x.csv",
            "a,b\n1,2\nabc,4\n",
            r"line 3 has a non-numeric value: could not convert string to float: 'abc'",
            id="a_non_numeric_value_after_the_first_row",
        ),
        pytest.param("x.csv", "a,b\n", r"'.*x\.csv' contains no data rows", id="a_csv_with_only_a_header"),
        pytest.param("x.csv", "", "contains no data rows", id="an_empty_csv"),
        pytest.param(
            "x.npy", "1,2\n3,4\n", r"cannot read '.*x\.npy' as a NumPy \.npy array", id="an_npy_file_that_is_not_numpy"
        ),
        pytest.param("x.npy", "", r"cannot read '.*x\.npy' as a NumPy \.npy array", id="an_empty_npy_file"),
    ],
)
def test_load_rows_rejects_a_bad_file_with_its_reason(tmp_path: Path, name: str, text: str, match: str) -> None:
    with pytest.raises(DataError, match=match):
        load_rows(_write(tmp_path / name, text))


def test_load_rows_rejects_a_csv_that_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.csv"
    path.write_bytes("café,prix\n1,2\n".encode("latin-1"))
    with pytest.raises(DataError, match=r"'.*latin1\.csv' is not UTF-8 text .*; save it as UTF-8 CSV"):
        load_rows(path)


def test_load_rows_rejects_a_3d_npy_array(tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", np.zeros((2, 3, 4)))
    with pytest.raises(DataError, match=r"holds an array of shape \(2, 3, 4\); expected 2-D \(rows × features\)"):
        load_rows(tmp_path / "x.npy")


@pytest.mark.parametrize(
    ("data", "dtype"), [(np.array([["a", "b"]]), "<U1"), (np.array([[1 + 2j, 3.0]]), "complex128")]
)
def test_load_rows_rejects_an_npy_array_that_is_not_real_numbers(tmp_path: Path, data: np.ndarray, dtype: str) -> None:
    np.save(tmp_path / "x.npy", data)
    with pytest.raises(DataError, match=f"holds dtype {dtype}; expected real numbers"):
        load_rows(tmp_path / "x.npy")


def test_load_rows_rejects_a_pickled_npy_array(tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(DataError, match="Object arrays cannot be loaded when allow_pickle=False"):
        load_rows(tmp_path / "x.npy")


def test_load_rows_refuses_an_npy_header_that_claims_more_data_than_follows(tmp_path: Path) -> None:
    """The header's shape was allocated before reading: a 40-byte file raised MemoryError for 5.85 EiB."""
    header = repr({"descr": "<c16", "fortran_order": True, "shape": (1159854, 1246, 291738411)})
    path = tmp_path / "big.npy"
    path.write_bytes(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() + b"\x00" * 8)
    with pytest.raises(DataError, match=r"is truncated: its header claims an array of shape \(1159854, 1246"):
        load_rows(path)


@pytest.mark.parametrize(
    ("header", "match"),
    [
        ("{'descr': '<i8', 'fortran_order': False, 'shape': (), }" + " " * 20 + "[", r"cannot read .* as a NumPy"),
        ("{'descr': '|b1', 'fortran_order': False, 'shape': (0, 0), }", r"expected at least one row and column"),
    ],
)
def test_load_rows_refuses_a_malformed_or_empty_npy_array(tmp_path: Path, header: str, match: str) -> None:
    path = tmp_path / "odd.npy"
    path.write_bytes(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() + b"\n")
    with pytest.raises(DataError, match=match):
        load_rows(path)


@pytest.mark.parametrize("suffix", [".csv", ".npy"])
def test_load_rows_refuses_a_finite_value_beyond_float32(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"huge{suffix}"
    if suffix == ".npy":
        np.save(path, np.array([[1.0, 2.0], [3.0, 1e300]]))
    else:
        path.write_text("1,2\n3,1e300\n")
    with pytest.raises(DataError, match=r"row 2 column 2 holds 1e\+300, beyond float32's range"):
        load_rows(path)


def test_load_rows_refuses_a_path_with_a_nul_byte(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"does not exist"):
        load_rows(str(tmp_path / "a\x00b.csv"))


# -- the header row: judged against the rows below it -------------------------------------------------------------
def _floats_below(first: str, n_rows: int = 500) -> str:
    rows = np.random.default_rng(0).normal(size=(n_rows, 3))
    return first + "\n" + "\n".join(",".join(f"{v:.6f}" for v in row) for row in rows) + "\n"


@pytest.mark.parametrize("first", ["1,2,3", "0,1,2", "0.0,1.0,2.0"])
def test_load_rows_takes_numbered_columns_above_float_rows_for_a_header(tmp_path: Path, first: str) -> None:
    rows = load_rows(_write(tmp_path / "x.csv", _floats_below(first)))
    assert rows.shape == (500, 3)


def test_load_rows_keeps_a_numbered_first_row_when_rows_like_it_follow(tmp_path: Path) -> None:
    rows = load_rows(_write(tmp_path / "x.csv", "1,2,3\n4,5,6\n0.5,1.5,2.5\n"))
    np.testing.assert_array_equal(rows[0], [1.0, 2.0, 3.0])


def test_load_rows_keeps_a_first_row_that_is_not_in_column_order(tmp_path: Path) -> None:
    assert load_rows(_write(tmp_path / "x.csv", _floats_below("3,2,1"))).shape == (501, 3)


def test_load_rows_keeps_a_single_column_first_row_of_one(tmp_path: Path) -> None:
    np.testing.assert_array_equal(load_rows(_write(tmp_path / "x.csv", "1\n0.5\n2.5\n")), [[1.0], [0.5], [2.5]])


def test_load_rows_header_no_reads_a_numbered_first_row_as_data(tmp_path: Path) -> None:
    rows = load_rows(_write(tmp_path / "x.csv", _floats_below("1,2,3")), header="no")
    assert rows.shape == (501, 3) and rows[0].tolist() == [1.0, 2.0, 3.0]


def test_load_rows_header_yes_skips_a_first_row_of_data(tmp_path: Path) -> None:
    np.testing.assert_array_equal(load_rows(_write(tmp_path / "x.csv", "7,8\n1,2\n"), header="yes"), [[1.0, 2.0]])


def test_load_rows_header_no_refuses_a_text_first_row_suggesting_auto(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"line 1 has a non-numeric value: .*'a'.*--header auto"):
        load_rows(_write(tmp_path / "x.csv", "a,b\n1,2\n"), header="no")


def test_load_rows_refuses_an_unknown_header_mode(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"header must be 'auto', 'yes' or 'no'; got 'maybe'"):
        load_rows(_write(tmp_path / "x.csv", "1,2\n"), header="maybe")  # type: ignore[arg-type]


def test_read_rows_says_a_numbered_header_was_detected_and_how_to_keep_it(tmp_path: Path) -> None:
    table = read_rows(_write(tmp_path / "x.csv", _floats_below("1,2,3")))
    assert table.header == ("1", "2", "3")
    assert table.note == "header row detected: 1,2,3 (use --header no to read it as data)"


def test_read_rows_names_the_columns_of_a_text_header(tmp_path: Path) -> None:
    table = read_rows(_write(tmp_path / "x.csv", "age, income\n1,2\n"))
    assert (table.header, table.names, table.note) == (("age", "income"), ("age", "income"), "header row: age,income")


def test_read_rows_has_no_names_for_a_numbered_header(tmp_path: Path) -> None:
    assert read_rows(_write(tmp_path / "x.csv", _floats_below("0,1,2"))).names is None


def test_read_rows_says_when_a_numbered_first_row_was_kept_as_data(tmp_path: Path) -> None:
    table = read_rows(_write(tmp_path / "x.csv", "1,2,3\n4,5,6\n0.5,1.5,2.5\n"))
    assert table.header is None
    assert table.note == (
        "first row 1,2,3 read as data: rows of whole numbers like it follow (use --header yes if it is a header)"
    )


def test_read_rows_describes_rows_and_columns_read(tmp_path: Path) -> None:
    table = read_rows(_write(tmp_path / "x.csv", "1.5,2\n3,4\n"))
    assert table.describe() == f"read 2 rows × 2 columns from '{tmp_path / 'x.csv'}'; no header row"


def test_read_rows_of_an_npy_file_has_no_header(tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", np.ones((4, 2)))
    table = read_rows(tmp_path / "x.npy")
    assert (table.rows.shape, table.header, table.note) == ((4, 2), None, "")


def test_read_rows_names_the_callers_flag_in_its_note(tmp_path: Path) -> None:
    table = read_rows(_write(tmp_path / "x.csv", _floats_below("1,2,3")), flag="--reference-header")
    assert table.note == "header row detected: 1,2,3 (use --reference-header no to read it as data)"


def test_load_rows_names_the_text_column_by_its_header_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(
        DataError,
        match=r"line 2 has a non-numeric value: .*'eu'.*: column 3 \('segment'\) holds text; remove it from the file "
        r"\(a column naming each row's segment is taken by `reference`, `replay` and `compare` as --segment-column\)",
    ):
        load_rows(_write(tmp_path / "x.csv", "a,b,segment\n1.5,2,eu\n"))


def test_load_rows_says_a_text_value_below_the_first_row_cannot_be_scored(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"line 2 has a non-numeric value: .*'red'; expected numbers in every column"):
        load_rows(_write(tmp_path / "x.csv", "1.5,2\nred,4\n"))
