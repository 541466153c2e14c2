"""Training data for retrieval: the ntuples and beir formats, the time-respecting split, and end-to-end
`sbert mine-negatives` + `sbert train` on tiny collections written here."""

from __future__ import annotations

import gzip
import json

import pytest
from click.testing import CliRunner

from sbert.data.examples import RetrievalExample
from sbert.data.formats import read_examples
from sbert.data.ntuples import read_ntuples, write_ntuples
from sbert.data.paths import data_dir
from sbert.data.time_split import split_by_time
from sbert.errors import InputFileError
from sbert.training.spec import run_spec


def write_beir(folder, queries, corpus, qrels: dict[str, str]):
    """A BEIR folder: ``queries`` and ``corpus`` are lists of objects, ``qrels`` split -> TSV body."""
    (folder / "qrels").mkdir(parents=True)
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in corpus))
    for split, body in qrels.items():
        (folder / "qrels" / f"{split}.tsv").write_text("query-id\tcorpus-id\tscore\n" + body)
    return folder


CORPUS = [
    {"_id": "d1", "title": "Cats", "text": "Cats purr when content."},
    {"_id": "d2", "title": "", "text": "Dogs bark at strangers."},
    {"_id": "d3", "title": "Birds", "text": "Birds sing at dawn."},
]
QUERIES = [
    {"_id": "1", "text": "why do cats purr", "created": "2001-05-01 10:00:00 +0000"},
    {"_id": "2", "text": "when do birds sing", "created": "2001-03-01 09:00:00 +0000"},
    {"_id": "3", "text": "what barks", "created": "2003-01-01 00:00:00 +0000"},
    {"_id": "4", "text": "loud dogs", "created": "2002-07-01 12:00:00 +0200"},
]


# -- the ntuples format ------------------------------------------------------------------------------------
def test_ntuples_tsv_rows_may_carry_different_numbers_of_negatives(tmp_path):
    path = tmp_path / "rows.tsv"
    path.write_text("query\tpositive\tnegative_1\tnegative_2\nq1\tp1\tn1\tn2\nq2\tp2\n\nq3\tp3\tn3\n")
    assert list(read_ntuples(path)) == [
        RetrievalExample("q1", "p1", ("n1", "n2")),
        RetrievalExample("q2", "p2"),
        RetrievalExample("q3", "p3", ("n3",)),
    ]


def test_ntuples_jsonl_ignores_ids_and_scores(tmp_path):
    path = tmp_path / "rows.jsonl.gz"
    rows = [
        {"query": "q", "positive": "p", "negatives": ["a", "b"], "scores": [0.9, 0.5, 0.4]},
        {"query": "r", "positive": "s"},
    ]
    path.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in rows).encode()))
    assert list(read_ntuples(path)) == [RetrievalExample("q", "p", ("a", "b")), RetrievalExample("r", "s")]


@pytest.mark.parametrize(
    ("name", "body", "message"),
    [
        ("bad.tsv", "q1\tp1\nq2\n", r"bad.tsv: line 2: found 1 column; expected tab-separated query, positive"),
        ("bad.tsv", "q1\tp1\t\tn2\n", r"bad.tsv: line 1: column 3 is empty"),
        ("bad.jsonl", '{"query": "q", "positive": "p"}\n{"query": "q"\n', r"bad.jsonl: line 2 is not valid JSON"),
        ("bad.jsonl", '{"query": "q", "positive": ""}\n', r'bad.jsonl: line 1: "positive" holds \'\''),
        ("bad.jsonl", '{"query": "q", "positive": "p", "negatives": "n"}\n', r'line 1: "negatives" is not a list'),
        ("bad.jsonl", '{"query": "q", "positive": "p", "negatives": [3]}\n', r'line 1: "negatives" holds 3'),
        ("bad.jsonl", "[1, 2]\n", r"bad.jsonl: line 1: expected an object"),
    ],
)
def test_ntuples_errors_name_the_file_and_line(tmp_path, name, body, message):
    (tmp_path / name).write_text(body)
    with pytest.raises(InputFileError, match=message):
        list(read_ntuples(tmp_path / name))


def test_ntuples_tsv_writer_keeps_each_row_on_one_line(tmp_path):
    rows = [RetrievalExample("a\tquery", "two\nlines", ("x",)), RetrievalExample("b", "c", ())]
    write_ntuples(tmp_path / "out.tsv", rows)
    assert list(read_ntuples(tmp_path / "out.tsv")) == [
        RetrievalExample("a query", "two lines", ("x",)),
        RetrievalExample("b", "c"),
    ]
    write_ntuples(tmp_path / "out.jsonl", rows)  # the exact texts
    assert list(read_ntuples(tmp_path / "out.jsonl")) == rows
    with pytest.raises(ValueError, match=r"expected a \.jsonl or \.tsv"):
        write_ntuples(tmp_path / "out.csv", rows)


# -- the beir format ---------------------------------------------------------------------------------------
def test_beir_format_gives_query_document_pairs_of_the_train_judgments(tmp_path):
    folder = write_beir(
        tmp_path / "c", QUERIES, CORPUS, {"train": "1\td1\t1\n2\td3\t2\n2\td1\t0\n", "test": "3\td2\t1\n"}
    )
    assert read_examples("beir", folder, RetrievalExample) == [
        RetrievalExample("why do cats purr", "Cats Cats purr when content."),  # title + " " + text
        RetrievalExample("when do birds sing", "Birds Birds sing at dawn."),  # relevance 0 left out
    ]
    assert read_examples("beir", folder / "qrels" / "test.tsv", RetrievalExample) == [
        RetrievalExample("what barks", "Dogs bark at strangers.")  # no title: the text alone
    ]
    with pytest.raises(InputFileError, match="expected a BEIR folder or the qrels file"):
        read_examples("beir", folder / "corpus.jsonl", RetrievalExample)


def test_objectives_read_the_retrieval_formats_and_others_refuse_them(tmp_path):
    spec = run_spec(
        {
            "out": str(tmp_path / "m"),
            "objectives": [{"objective": "cached-mnrl", "format": "beir", "train": "x", "mini_batch_size": 8}],
        }
    )
    assert spec.objectives[0].kind is RetrievalExample and spec.objectives[0].settings["mini_batch_size"] == 8
    assert run_spec({"out": "m", "objectives": [{"objective": "mnrl", "format": "ntuples", "train": "x"}]})
    with pytest.raises(ValueError, match="objective 'triplet' needs Triplet examples, but format 'beir' gives"):
        run_spec({"out": "m", "objectives": [{"objective": "triplet", "format": "beir", "train": "x"}]})


# -- the time-respecting split ------------------------------------------------------------------------------
def test_time_split_trains_on_the_past_and_tests_on_the_future(tmp_path):
    from sbert.data.beir import read_beir

    source = write_beir(tmp_path / "dups", QUERIES, CORPUS, {"test": "1\td1\t1\n2\td3\t1\n3\td2\t1\n4\td2\t1\n"})
    info = split_by_time(source, tmp_path / "split", cutoff="2002-01-01")
    # times: 2 (2001-03), 1 (2001-05), 4 (2002-07 +0200), 3 (2003-01)
    assert (info.train_queries, info.test_queries, info.order) == (2, 2, "created")
    assert set(read_beir(tmp_path / "split", "train").queries) == {"1", "2"}
    test = read_beir(tmp_path / "split", "test")
    assert set(test.queries) == {"3", "4"} and len(test.corpus) == 3  # the corpus stays whole
    assert json.loads((tmp_path / "split" / "split.json").read_text())["cutoff"] == "2002-01-01 00:00:00+00:00"
    # without a cut-off: after the oldest half of the queries, i.e. at query 4's time
    half = split_by_time(source, tmp_path / "half", train_fraction=0.5)
    assert (half.train_queries, half.cutoff) == (2, "2002-07-01 12:00:00+02:00")
    # ids as the order when no field dates the queries
    by_id = split_by_time(source, tmp_path / "by-id", time_field=None, cutoff="3")
    assert set(read_beir(tmp_path / "by-id", "train").queries) == {"1", "2"} and by_id.order == "id"


def test_time_split_errors(tmp_path):
    undated = [{"_id": q["_id"], "text": q["text"]} for q in QUERIES]
    source = write_beir(tmp_path / "undated", undated, CORPUS, {"test": "1\td1\t1\n2\td3\t1\n"})
    with pytest.raises(InputFileError, match=r'queries.jsonl: line 1: expected a query object with a "created"'):
        split_by_time(source, tmp_path / "out")
    dated = write_beir(tmp_path / "dated", QUERIES, CORPUS, {"test": "1\td1\t1\n2\td3\t1\n"})
    with pytest.raises(ValueError, match="0 train and 2 test queries"):
        split_by_time(dated, tmp_path / "out", cutoff="1999-01-01")
    with pytest.raises(ValueError, match="cutoff 'soon': expected a timestamp"):
        split_by_time(dated, tmp_path / "out", cutoff="soon")
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="already exists"):
        split_by_time(dated, tmp_path / "taken", cutoff="2001-04-01")


def test_openoffice_dups_split_by_report_date(tmp_path):
    try:
        source = data_dir() / "retrieval" / "openoffice-dups"
    except InputFileError as err:
        pytest.skip(str(err))
    if not source.is_dir():
        pytest.skip(f"{source}: not present")
    from sbert.data.beir import read_beir

    info = split_by_time(source, tmp_path / "oo", train_fraction=0.8)
    assert (info.train_queries, info.test_queries) == (1983, 496)
    times = {}
    with gzip.open(source / "queries.jsonl.gz", "rt") as handle:
        for line in handle:
            record = json.loads(line)
            times[record["_id"]] = record["created"]
    train, test = read_beir(tmp_path / "oo", "train"), read_beir(tmp_path / "oo", "test")
    # every training report was filed before every test report (the timestamps all read +0000)
    assert max(times[q] for q in train.queries) < min(times[q] for q in test.queries)


# -- end to end: mine, then train (loads models) --------------------------------------------------------------
@pytest.mark.slow
def test_mine_negatives_then_train_cached_mnrl_from_the_command_line(tmp_path):
    from conftest import make_tiny_encoder

    import sbert
    from sbert.cli import main

    folder = write_beir(tmp_path / "c", QUERIES, CORPUS, {"train": "1\td1\t1\n2\td3\t1\n3\td2\t1\n4\td2\t1\n"})
    mined = tmp_path / "mined.jsonl"
    result = CliRunner().invoke(
        main, ["mine-negatives", str(folder), "--out", str(mined), "--num-negatives", "1", "--device", "cpu"]
    )
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in mined.read_text().splitlines()]
    assert len(rows) == 4 and all(r["negative_ids"][0] != r["positive_id"] for r in rows)
    model = tmp_path / "tiny"
    make_tiny_encoder().save(model)
    args = ["train", "--model", str(model), "--objective", "cached-mnrl", "--format", "ntuples", "--train"]
    args += [str(mined), "--mini-batch-size", "2", "--batch-size", "4", "--out", str(tmp_path / "m"), "--device", "cpu"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    log = [json.loads(line) for line in (tmp_path / "m.train" / "log.jsonl").read_text().splitlines()]
    # queries 3 and 4 share their positive: the no-duplicates sampler puts them in different batches
    assert {r["objective"] for r in log if "loss" in r} == {"0:cached-mnrl:ntuples"}
    assert sbert.load(tmp_path / "m", device="cpu").encode("x").shape == (16,)
    bad = CliRunner().invoke(main, ["mine-negatives", str(folder), "--out", str(tmp_path / "x.csv")])
    assert bad.exit_code != 0 and "expected a .jsonl or .tsv" in bad.output


@pytest.mark.slow
def test_mine_negatives_takes_more_candidates_from_a_csv_by_its_column(tmp_path):
    from sbert.cli import main

    pairs, more = tmp_path / "pairs.tsv", tmp_path / "more.csv"
    pairs.write_text(
        "how to bake bread\tKnead the dough and bake it in a hot oven.\n"
        "who won the match\tThe match ended in a draw after extra time.\n"
    )
    more.write_text(
        "id,body\n1,Sourdough bread needs a starter and a hot oven.\n2,The football final went to penalties.\n"
    )
    args = ["mine-negatives", str(pairs), "--out", str(tmp_path / "m.jsonl"), "--corpus", str(more)]
    result = CliRunner().invoke(main, [*args, "--text-column", "body", "--num-negatives", "1", "--device", "cpu"])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (tmp_path / "m.jsonl").read_text().splitlines()]
    assert [r["negatives"] for r in rows] == [
        ["Sourdough bread needs a starter and a hot oven."],
        ["The football final went to penalties."],
    ]
    refused = CliRunner().invoke(main, [*args, "--num-negatives", "1", "--device", "cpu"])  # no 'text' column
    assert (
        refused.exit_code != 0 and "has no 'text' column" in refused.output and "--text-column NAME" in refused.output
    )
