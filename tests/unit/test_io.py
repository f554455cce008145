"""load_rows (stage 3 helper): CSV and .npy feature rows, header detection, and clear messages for bad files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from monitor.errors import DataError
from monitor.model.io import load_rows


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


def test_load_rows_rejects_an_unknown_extension(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"has extension '\.parquet'; expected \.csv or \.npy"):
        load_rows(_write(tmp_path / "x.parquet", "1,2\n"))


def test_load_rows_rejects_a_ragged_csv(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"'.*x\.csv' line 3 has 3 columns; expected 2 like the rows before it"):
        load_rows(_write(tmp_path / "x.csv", "1,2\n3,4\n5,6,7\n"))


def test_load_rows_rejects_data_rows_wider_than_the_header(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="line 2 has 3 columns; expected 2"):
        load_rows(_write(tmp_path / "x.csv", "a,b\n1,2,3\n"))


def test_load_rows_rejects_a_non_numeric_value_after_the_first_row(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"line 3 has a non-numeric value: could not convert string to float: 'abc'"):
        load_rows(_write(tmp_path / "x.csv", "a,b\n1,2\nabc,4\n"))


def test_load_rows_rejects_a_csv_with_only_a_header(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"'.*x\.csv' contains no data rows"):
        load_rows(_write(tmp_path / "x.csv", "a,b\n"))


def test_load_rows_rejects_an_empty_csv(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="contains no data rows"):
        load_rows(_write(tmp_path / "x.csv", ""))


def test_load_rows_rejects_a_csv_that_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.csv"
    path.write_bytes("café,prix\n1,2\n".encode("latin-1"))
    with pytest.raises(DataError, match=r"'.*latin1\.csv' is not UTF-8 text .*; save it as UTF-8 CSV"):
        load_rows(path)


def test_load_rows_rejects_an_npy_file_that_is_not_numpy(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"cannot read '.*x\.npy' as a NumPy \.npy array"):
        load_rows(_write(tmp_path / "x.npy", "1,2\n3,4\n"))


def test_load_rows_rejects_an_empty_npy_file(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"cannot read '.*x\.npy' as a NumPy \.npy array"):
        load_rows(_write(tmp_path / "x.npy", ""))


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
