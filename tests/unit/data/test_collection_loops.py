"""`sbert make-collection` on links that only loop (two reports naming each other, or a longer ring) and on ids
that hold spaces: a loop is one problem reported several times, its oldest report the master; an id is never
split into other ids."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from sbert.cli import main
from sbert.data.beir import read_beir
from sbert.data.corpus import Columns
from sbert.data.duplicates import collection_from_links

HEADER = "id,title,text,dup,created\n"
COLUMNS = Columns(text="text", id="id", title="title")


def _export(tmp_path: Path, rows: list[str]) -> Path:
    path = tmp_path / "export.csv"
    path.write_text(HEADER + "\n".join(rows) + "\n", encoding="utf-8")
    return path


def _judgments(folder: Path) -> dict[str, dict[str, int]]:
    return {**read_beir(folder, "train").qrels, **read_beir(folder, "test").qrels}


def _corpus(folder: Path) -> list[str]:
    return [json.loads(line)["_id"] for line in (folder / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]


def test_mutual_pairs_alone_make_a_collection_with_the_older_report_as_master(tmp_path):
    export = _export(
        tmp_path,
        [
            "R0,a,printer jams,R1,2024-01-01",
            "R1,b,the printer jams,R0,2024-01-02",
            "R2,c,calc hangs,R3,2024-01-04",  # R3 is the older of this pair: its master
            "R3,d,calc freezes,R2,2024-01-03",
            "R4,e,fonts look wrong,,2024-01-05",
        ],
    )
    out = tmp_path / "coll"
    args = ["make-collection", str(export), "--out", str(out), "--duplicate-column", "dup", "--id-column", "id"]
    result = CliRunner().invoke(main, [*args, "--created-column", "created", "--test-fraction", "0.5"])
    assert result.exit_code == 0, result.output
    assert _judgments(out) == {"R1": {"R0": 1}, "R2": {"R3": 1}}
    assert _corpus(out) == ["R0", "R3", "R4"]
    assert (
        "loops: 4 reports whose links lead only round 2 loops; the oldest report of each taken as the master"
        in result.output
    )
    info = json.loads((out / "collection.json").read_text(encoding="utf-8"))
    assert (info["documents"], info["queries"], info["looped_reports"], info["loops"]) == (3, 2, 4, 2)


def test_without_times_the_first_report_of_a_loop_in_the_file_is_the_master(tmp_path):
    export = _export(tmp_path, ["R0,a,one,R1,", "R1,b,two,R0,", "R2,c,three,R3,", "R3,d,four,R2,"])
    collection_from_links(export, tmp_path / "c", duplicate="dup", columns=COLUMNS, test_fraction=0.5)
    assert _judgments(tmp_path / "c") == {"R1": {"R0": 1}, "R3": {"R2": 1}}


def test_a_longer_ring_and_the_reports_that_lead_into_it_share_its_oldest_report(tmp_path):
    export = _export(
        tmp_path,
        [
            "R0,a,one,R1,2024-01-02",
            "R1,b,two,R2,2024-01-01",  # the oldest of the ring R0 -> R1 -> R2 -> R0
            "R2,c,three,R0,2024-01-03",
            "R3,d,four,R0,2024-01-04",  # leads into the ring
            "R4,e,five,R5,2024-01-05",  # a pair that leads out, to a master: not a loop
            "R5,f,six,R4; M,2024-01-06",
            "M,g,seven,,2024-01-07",
        ],
    )
    info = collection_from_links(export, tmp_path / "c", duplicate="dup", columns=COLUMNS, created="created")
    assert _judgments(tmp_path / "c") == {
        "R0": {"R1": 1},
        "R2": {"R1": 1},
        "R3": {"R1": 1},
        "R4": {"M": 1},
        "R5": {"M": 1},
    }
    assert _corpus(tmp_path / "c") == ["R1", "M"]
    assert (info.looped_reports, info.loops, info.later_masters) == (4, 1, 2)


def test_an_id_holding_spaces_is_not_split_into_other_ids(tmp_path):
    export = _export(
        tmp_path,
        [
            "Bug 12,a,printer jams,,2024-01-01",
            "12,b,an unrelated report,,2024-01-02",
            "Bug 13,c,calc hangs,,2024-01-03",
            "X1,d,the printer jams again,Bug 12,2024-01-04",
            'X2,e,both at once,"Bug 12; Bug 13",2024-01-05',
        ],
    )
    info = collection_from_links(export, tmp_path / "c", duplicate="dup", columns=COLUMNS, test_fraction=0.5)
    assert _judgments(tmp_path / "c") == {"X1": {"Bug 12": 1}, "X2": {"Bug 12": 1, "Bug 13": 1}}
    assert info.unknown_links == 0


def test_ids_without_spaces_are_still_separated_by_spaces(tmp_path):
    export = _export(tmp_path, ["P-1,a,one,,", "P-2,b,two,,", "P-3,c,three,P-1 P-2,", "P-4,d,four,P-1,"])
    collection_from_links(export, tmp_path / "c", duplicate="dup", columns=COLUMNS, test_fraction=0.5)
    assert _judgments(tmp_path / "c") == {"P-3": {"P-1": 1, "P-2": 1}, "P-4": {"P-1": 1}}
