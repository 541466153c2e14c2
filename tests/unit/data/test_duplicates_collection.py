"""sbert.data.duplicates / `sbert make-collection`: a tracker export's duplicate links made into a BEIR folder,
checked by hand on a small export (chains, several masters, loops, links outside, a time split)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from sbert.atomic import FolderNotReplaceableError
from sbert.cli import main
from sbert.data.beir import read_beir
from sbert.data.corpus import Columns
from sbert.data.duplicates import collection_from_links
from sbert.errors import InputFileError

HEADER = "Issue key,Summary,Description,Duplicate of,Created\n"
ROWS = [
    "P-1,Printer crashes,Printing a page crashes Writer every time,,2024-01-01 10:00:00",
    "P-2,Calc hangs,Calc hangs on large sheets,,2024-01-02",
    "P-3,Writer crash when printing,Writer crashes on print,P-1,2024-01-03",
    "P-4,Print crash again,Printing crashes,P-3,2024-01-05",  # a duplicate of a duplicate: P-1 is its master
    "P-5,Sheets freeze,Large sheets freeze calc,P-2,2024-01-06",
    "P-6,Loop a,first of a loop,P-7,2024-01-07",  # P-6 and P-7 name each other: the older, P-6, is the master
    "P-7,Loop b,second of a loop,P-6,2024-01-08",
    "P-8,Outside,links outside,X-99,2024-01-09",  # its master is not in the export: a document
    "P-9,Fonts,fonts look wrong,P-1; P-2,2024-01-10",  # two masters
    "P-10,Old dup,an older duplicate,P-8,2024-01-08 12:00:00",  # its master was created after it
]
COLUMNS = Columns(text="Description", id="Issue key", title="Summary")


@pytest.fixture
def export(tmp_path):
    path = tmp_path / "export.csv"
    path.write_text(HEADER + "\n".join(ROWS) + "\n", encoding="utf-8")
    return path


def _lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_duplicates_become_queries_of_their_masters_split_in_time(export, tmp_path):
    out = tmp_path / "coll"
    info = collection_from_links(export, out, duplicate="Duplicate of", columns=COLUMNS, created="Created")
    assert [d["_id"] for d in _lines(out / "corpus.jsonl")] == ["P-1", "P-2", "P-6", "P-8"]
    assert _lines(out / "corpus.jsonl")[0] == {
        "_id": "P-1",
        "title": "Printer crashes",
        "text": "Printing a page crashes Writer every time",
    }
    queries = _lines(out / "queries.jsonl")
    assert [q["_id"] for q in queries] == ["P-3", "P-4", "P-5", "P-7", "P-9", "P-10"]
    assert queries[0] == {
        "_id": "P-3",
        "text": "Writer crash when printing Writer crashes on print",
        "created": "2024-01-03",
    }
    train, test = read_beir(out, "train"), read_beir(out, "test")
    assert train.qrels == {"P-3": {"P-1": 1}, "P-4": {"P-1": 1}, "P-5": {"P-2": 1}, "P-7": {"P-6": 1}}
    assert test.qrels == {"P-10": {"P-8": 1}, "P-9": {"P-1": 1, "P-2": 1}}  # the newest fifth: 2 of 6
    assert (out / "qrels" / "test.tsv").read_text() == (
        "query-id\tcorpus-id\tscore\nP-10\tP-8\t1\nP-9\tP-1\t1\nP-9\tP-2\t1\n"
    )
    expected = {
        "source": str(export),
        "duplicate_field": "Duplicate of",
        "order": "Created",
        "reports": 10,
        "documents": 4,
        "queries": 6,
        "train_queries": 4,
        "test_queries": 2,
        "cutoff": "2024-01-08 12:00:00+00:00",
        "unknown_links": 1,
        "looped_reports": 2,
        "loops": 1,
        "later_masters": 1,
    }
    assert json.loads((out / "collection.json").read_text()) == expected and info.queries == 6


def test_without_a_time_the_file_order_splits_them(export, tmp_path):
    out = tmp_path / "coll"
    info = collection_from_links(export, out, duplicate="Duplicate of", columns=COLUMNS, test_fraction=0.4)
    assert (info.order, info.cutoff, info.train_queries, info.test_queries) == ("file order", "P-7", 3, 3)
    assert set(read_beir(out, "test").qrels) == {"P-7", "P-9", "P-10"}
    assert "created" not in _lines(out / "queries.jsonl")[0]
    assert info.later_masters == 0  # unknown without times


def test_a_jira_export_repeating_its_link_column_keeps_every_link(tmp_path):
    """JIRA writes one "Outward issue link (Duplicate)" column per link: each filled one counts, wherever it is."""
    export = tmp_path / "jira.csv"
    link = "Outward issue link (Duplicate)"
    export.write_text(
        f"Issue key,Summary,Description,{link},{link}\n"
        "P-1,a,first,,\nP-2,b,second,,\nP-3,c,third,P-1,\nP-4,d,fourth,,P-2\nP-5,e,fifth,P-1,P-2\n"
    )
    columns = Columns(text="Description", id="Issue key", title="Summary")
    collection_from_links(export, tmp_path / "c", duplicate=link, columns=columns, test_fraction=0.4)
    qrels = {**read_beir(tmp_path / "c", "train").qrels, **read_beir(tmp_path / "c", "test").qrels}
    assert qrels == {"P-3": {"P-1": 1}, "P-4": {"P-2": 1}, "P-5": {"P-1": 1, "P-2": 1}}


def test_json_lines_with_a_list_of_masters(tmp_path):
    export = tmp_path / "reports.jsonl"
    records = [
        {"id": 1, "title": "a", "text": "first report"},
        {"id": 2, "title": "b", "text": "second report"},
        {"id": 3, "title": "c", "text": "third report", "dups": [1, 2]},
        {"id": 4, "title": "d", "text": "fourth report", "dups": "1"},
    ]
    export.write_text("".join(json.dumps(r) + "\n" for r in records))
    collection_from_links(export, tmp_path / "c", duplicate="dups", test_fraction=0.5)
    assert read_beir(tmp_path / "c", "train").qrels == {"3": {"1": 1, "2": 1}}
    assert read_beir(tmp_path / "c", "test").qrels == {"4": {"1": 1}}


@pytest.mark.parametrize(
    ("change", "options", "error", "message"),
    [
        (None, {"duplicate": "Dup"}, InputFileError, r"export\.csv: no report has a 'Dup' field"),
        (None, {"columns": Columns(text="Description")}, InputFileError, r"no report has an 'id' field"),
        (("2024-01-05", "soon"), {}, InputFileError, r"line 5: 'Created' is 'soon'; expected a time"),
        (("2024-01-05", ""), {}, InputFileError, r"line 5: duplicate 'P-4' has no 'Created'"),
        (None, {"test_fraction": 1.0}, ValueError, "test_fraction must be between 0 and 1"),
    ],
)
def test_bad_exports_are_refused_naming_the_file_and_line(export, tmp_path, change, options, error, message):
    if change:
        export.write_text(export.read_text().replace(*change, 1))
    settings = {"duplicate": "Duplicate of", "columns": COLUMNS, "created": "Created"} | options
    with pytest.raises(error, match=message):
        collection_from_links(export, tmp_path / "c", **settings)
    assert not (tmp_path / "c").exists()


def test_an_export_without_links_or_too_few_and_a_folder_in_use_are_refused(export, tmp_path):
    plain = tmp_path / "plain.csv"
    plain.write_text(HEADER + "P-1,a,b,X-1,2024-01-01\nP-2,c,d,,2024-01-02\n")
    with pytest.raises(ValueError, match=r"no report's 'Duplicate of' names another report of the export \(1 links"):
        collection_from_links(plain, tmp_path / "c", duplicate="Duplicate of", columns=COLUMNS)
    plain.write_text(HEADER + "P-1,a,b,,2024-01-01\nP-2,c,d,P-1,2024-01-02\n")
    with pytest.raises(ValueError, match="1 duplicates: 0 train and 1 test; both must be non-empty"):
        collection_from_links(plain, tmp_path / "c", duplicate="Duplicate of", columns=COLUMNS)
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "notes.txt").write_text("mine")
    with pytest.raises(FolderNotReplaceableError, match="already exists"):
        collection_from_links(export, tmp_path / "used", duplicate="Duplicate of", columns=COLUMNS)
    assert (tmp_path / "used" / "notes.txt").read_text() == "mine"


def test_the_command_writes_it_and_eval_scores_it(export, tmp_path):
    out = tmp_path / "coll"
    args = ["make-collection", str(export), "--out", str(out), "--duplicate-column", "Duplicate of"]
    args += ["--created-column", "Created", "--id-column", "Issue key", "--title-column", "Summary"]
    result = CliRunner().invoke(main, [*args, "--text-column", "Description"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        f"wrote {out}: 4 documents, 6 duplicates as queries (4 train, 2 test: from 2024-01-08 12:00:00+00:00 on, "
        "by Created)",
        "left out: 1 links to reports not in " + str(export),
        "loops: 2 reports whose links lead only round 1 loop; the oldest report of each taken as the master",
        f"next: sbert eval MODEL --retrieval {out} --split test   (how well MODEL finds the masters)",
        f"      sbert eval MODEL --triage {out} --split train   (--lead, --threshold: 'already reported?')",
    ]
    scores = tmp_path / "scores.json"
    evaluated = CliRunner().invoke(
        main, ["eval", "--retrieval", str(out), "--split", "train", "--bm25", "--json", str(scores)]
    )
    assert evaluated.exit_code == 0, evaluated.output
    assert json.loads(scores.read_text())["tasks"]["coll"]["queries"] == 4
    again = CliRunner().invoke(main, [*args, "--text-column", "Description"])
    assert again.exit_code == 1 and "already exists" in again.output
    no_ids = ["make-collection", str(export), "--out", str(tmp_path / "other"), "--duplicate-column", "Duplicate of"]
    bad = CliRunner().invoke(main, [*no_ids, "--text-column", "Description"])  # ids in 'Issue key', not 'id'
    assert bad.exit_code == 1 and "use --id-column NAME for another" in bad.output


def test_openoffice_dups_as_a_tracker_export_gives_back_its_time_split(tmp_path):
    """The collection of the benchmarks, written back as one export (masters, then duplicates naming them, with
    their times): make-collection gives the same documents and the same train/test judgments as
    ``split_by_time`` cut it (the newest 20%: 1,983 train, 496 test queries)."""
    from sbert.data.beir import beir_file
    from sbert.data.paths import data_dir
    from sbert.data.time_split import split_by_time

    try:
        folder = data_dir() / "retrieval" / "openoffice-dups"
        reference = split_by_time(folder, tmp_path / "by-time", train_fraction=0.8)
    except (InputFileError, FileNotFoundError) as err:
        pytest.skip(str(err))
    masters = {q: next(iter(d)) for q, d in read_beir(folder, "test").qrels.items()}
    export = tmp_path / "export.jsonl"
    with export.open("w", encoding="utf-8") as handle:
        for document in _lines_gz(beir_file(folder, "corpus.jsonl")):
            handle.write(
                json.dumps({"id": document["_id"], "title": document["title"], "text": document["text"]}) + "\n"
            )
        for query in _lines_gz(beir_file(folder, "queries.jsonl")):
            row = {
                "id": query["_id"],
                "text": query["text"],
                "master": masters[query["_id"]],
                "created": query["created"],
            }
            handle.write(json.dumps(row) + "\n")
    info = collection_from_links(export, tmp_path / "made", duplicate="master", created="created")
    assert (
        (info.documents, info.train_queries, info.test_queries)
        == (2069, 1983, 496)
        == (
            2069,
            reference.train_queries,
            reference.test_queries,
        )
    )
    assert (info.unknown_links, info.looped_reports, info.loops, info.later_masters) == (0, 0, 0, 0)
    for split in ("train", "test"):
        made, cut = read_beir(tmp_path / "made", split), read_beir(tmp_path / "by-time", split)
        assert made.qrels == cut.qrels and made.corpus == cut.corpus
        assert {q: t.strip() for q, t in made.queries.items()} == {q: t.strip() for q, t in cut.queries.items()}


def _lines_gz(path) -> list[dict]:
    import gzip

    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]
