"""Readers: one-text-per-line input and STSb, on fixtures made here."""

from __future__ import annotations

import gzip
import io

import pytest

from sbert.data.lines import read_lines
from sbert.data.paths import data_dir
from sbert.data.sts import read_stsb
from sbert.errors import InputFileError


def test_read_lines_strips_line_ends_and_bom(tmp_path):
    path = tmp_path / "t.txt"
    path.write_bytes(b"\xef\xbb\xbfone\r\ntwo\nthree")
    assert read_lines(path) == ["one", "two", "three"]
    assert read_lines(io.BytesIO(b"a\nb\n")) == ["a", "b"]


def test_read_lines_errors_name_file_and_line(tmp_path):
    with pytest.raises(InputFileError, match=r"missing.txt: no such file"):
        read_lines(tmp_path / "missing.txt")
    path = tmp_path / "bad.txt"
    path.write_bytes(b"ok\nok\nb\xc3(d\n")
    with pytest.raises(InputFileError, match=r"bad.txt: line 3 is not valid UTF-8 \(byte 1"):
        read_lines(path)


def _write_gz(path, text):
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.write(text)


def test_stsb_reader_handles_extra_columns_and_quotes(tmp_path):
    path = tmp_path / "sts-test.csv.gz"
    _write_gz(
        path, 'g\tf\t2012\t1\t2.5\tHe said "hi.\tShe said hi.\ng\tf\t2012\t2\t5.000\tA\tB\tsrc1\tsrc2\n'
    )
    pairs = list(read_stsb(tmp_path / "sts-test.csv"))  # the .gz is found by itself
    assert [(p.sentence1, p.score) for p in pairs] == [('He said "hi.', 2.5), ("A", 5.0)]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("g\tf\t2012\t1\t2.5\tonly one sentence", "line 1 has 6 tab-separated columns; expected 7"),
        ("g\tf\t2012\t1\tfive\tA\tB", "line 1: score 'five' is not a number"),
        ("g\tf\t2012\t1\t7.5\tA\tB", "line 1: score 7.5 is outside 0-5"),
    ],
)
def test_stsb_reader_errors(tmp_path, line, message):
    path = tmp_path / "bad.csv"
    path.write_text(line + "\n")
    with pytest.raises(InputFileError, match=message):
        list(read_stsb(path))


def test_data_dir_option_and_env(tmp_path, monkeypatch):
    assert data_dir(tmp_path) == tmp_path
    monkeypatch.setenv("SBERT_DATA", str(tmp_path))
    assert data_dir() == tmp_path
    monkeypatch.setenv("SBERT_DATA", str(tmp_path / "nope"))
    with pytest.raises(InputFileError, match=r"nope: data folder not found \(from \$SBERT_DATA\)"):
        data_dir()
