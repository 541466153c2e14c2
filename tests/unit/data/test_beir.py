"""The BEIR-layout reader: a tiny collection written in tmp_path, every kind of bad input, the real folders."""

from __future__ import annotations

import gzip
import json
import warnings

import pytest

from sbert.data.beir import Document, read_beir, splits
from sbert.data.paths import data_dir
from sbert.errors import InputFileError

CORPUS = [
    {"_id": "d1", "title": "Cats", "text": "Cats purr."},
    {"_id": "d2", "title": "", "text": "Dogs bark."},
    {"_id": 3, "text": "Birds sing."},  # an integer id, no title
]
QUERIES = [{"_id": "q1", "text": "what purrs"}, {"_id": "q2", "text": "what barks"}, {"_id": "q9", "text": "unjudged"}]
QRELS = "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t2\nq2\t3\t0\n"


def _jsonl(rows: list) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def write_beir(folder, corpus=CORPUS, queries=QUERIES, qrels=QRELS, split="test", gz=False):
    """A BEIR folder with the given contents (str and bytes are written as they are); returns the folder."""
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    files = {
        "corpus.jsonl": corpus if isinstance(corpus, (str, bytes)) else _jsonl(corpus),
        "queries.jsonl": queries if isinstance(queries, (str, bytes)) else _jsonl(queries),
        f"qrels/{split}.tsv": qrels,
    }
    for name, text in files.items():
        data = text.encode() if isinstance(text, str) else text
        if gz:
            (folder / f"{name}.gz").write_bytes(gzip.compress(data))
        else:
            (folder / name).write_bytes(data)
    return folder


@pytest.mark.parametrize("gz", [False, True])
def test_reads_a_small_collection(tmp_path, gz):
    c = read_beir(write_beir(tmp_path / "tiny", gz=gz))
    assert (c.name, c.split, c.skipped_documents) == ("tiny", "test", 0)
    assert list(c.corpus) == ["d1", "d2", "3"]
    assert c.corpus["d1"] == Document("d1", "Cats", "Cats purr.")
    assert c.document_texts() == {"d1": "Cats Cats purr.", "d2": "Dogs bark.", "3": "Birds sing."}
    assert c.corpus["d1"].joined(". ") == "Cats. Cats purr."
    assert c.queries == {"q1": "what purrs", "q2": "what barks"}  # q9 has no judgment in this split
    assert c.qrels == {"q1": {"d1": 1}, "q2": {"d2": 2, "3": 0}}
    assert c.relevant("q2") == {"d2"} and c.relevant("q9") == set()


def test_splits_and_a_missing_split_lists_the_ones_present(tmp_path):
    folder = write_beir(tmp_path / "c")
    write_beir(folder, split="train", qrels="q1\td2\t1\n")  # no header: allowed
    assert splits(folder) == ["test", "train"]
    assert read_beir(folder, "train").qrels == {"q1": {"d2": 1}}
    with pytest.raises(InputFileError, match=r"qrels/dev.tsv: no such file .*splits with judgments here: test, train"):
        read_beir(folder, "dev")


@pytest.mark.parametrize("missing", ["corpus.jsonl", "queries.jsonl"])
def test_a_missing_file_is_named(tmp_path, missing):
    folder = write_beir(tmp_path / "c")
    (folder / missing).unlink()
    with pytest.raises(InputFileError, match=rf"{missing}: no such file \(nor .gz\); expected a BEIR folder"):
        read_beir(folder)


def test_a_missing_folder_is_named(tmp_path):
    with pytest.raises(InputFileError, match="nowhere: no such folder"):
        read_beir(tmp_path / "nowhere")


BAD_CORPUS = [
    ('{"_id": "d1", "text": "a"}\nnot json\n', r"corpus.jsonl: line 2 is not valid JSON"),
    ('{"_id": "d1", "text": "a"}\n{"text": "b"}\n', r'corpus.jsonl: line 2 lacks a string "_id"'),
    ("[1, 2]\n", r'corpus.jsonl: line 1 lacks a string "_id"'),
    (
        '{"_id": "d1", "text": "a"}\n{"_id": "d1", "text": "b"}\n',
        r"line 2: duplicate document id 'd1' \(first on line 1\)",
    ),
    ('{"_id": "d1", "text": 5}\n', r'corpus.jsonl: line 1: "text" is int, not a string'),
    ('{"_id": "d1"}\n', r'corpus.jsonl: line 1: "text" is NoneType, not a string'),
    ('{"_id": "d1", "text": "a"}\n{"_id": "d2", "title": " ", "text": ""}\n', r"line 2: document 'd2' is empty"),
]


@pytest.mark.parametrize(("corpus", "message"), BAD_CORPUS)
def test_bad_corpus_lines_are_named(tmp_path, corpus, message):
    folder = write_beir(tmp_path / "c", corpus=corpus, qrels="q1\td1\t1\n")
    with pytest.raises(InputFileError, match=message):
        read_beir(folder)


BAD_QUERIES = [
    (
        '{"_id": "q1", "text": "a"}\n{"_id": "q1", "text": "b"}\n',
        r"line 2: duplicate query id 'q1' \(first on line 1\)",
    ),
    ('{"_id": "q1", "text": "a"}\n{"_id": "q2"\n', r"queries.jsonl: line 2 is not valid JSON"),
    ('{"_id": "q1", "text": "  "}\n', r"queries.jsonl: line 1: query 'q1' is empty"),
    ('{"_id": "q1", "text": "a"}\n', r"qrels/test.tsv: line 3: query 'q2' is not in queries.jsonl"),
]


@pytest.mark.parametrize(("queries", "message"), BAD_QUERIES)
def test_bad_query_lines_are_named(tmp_path, queries, message):
    with pytest.raises(InputFileError, match=message):
        read_beir(write_beir(tmp_path / "c", queries=queries))


BAD_QRELS = [
    ("query-id\tcorpus-id\tscore\nq1\td1\n", r"qrels/test.tsv: line 2 has 2 tab-separated columns"),
    ("q1 d1 1\n", r"qrels/test.tsv: line 1 has 1 tab-separated columns"),
    ("q1\td1\thigh\n", r"qrels/test.tsv: line 1: score 'high' is not an integer"),
    ("q1\td1\t1\nq2\td7\t1\n", r"qrels/test.tsv: line 2: document 'd7' \(judged for query 'q2'\) is not in the corpus"),
    ("q1\td1\t1\nq1\td1\t0\n", r"line 2: query 'q1' and document 'd1' are judged twice \(first on line 1\)"),
    ("q1\td1\t1\nq5\td1\t1\n", r"qrels/test.tsv: line 2: query 'q5' is not in queries.jsonl"),
]


@pytest.mark.parametrize(("qrels", "message"), BAD_QRELS)
def test_bad_qrels_lines_are_named(tmp_path, qrels, message):
    with pytest.raises(InputFileError, match=message):
        read_beir(write_beir(tmp_path / "c", qrels=qrels))


@pytest.mark.parametrize("gz", [False, True])
def test_a_line_that_is_not_utf8_names_file_line_and_byte(tmp_path, gz):
    corpus = _jsonl(CORPUS).encode() + b'{"_id": "d4", "text": "caf\xe9"}\n'
    folder = write_beir(tmp_path / "c", corpus=corpus, gz=gz)
    with pytest.raises(InputFileError, match=r"corpus.jsonl(.gz)?: line 4 is not valid UTF-8 \(byte 26 of the line"):
        read_beir(folder)


def test_empty_documents_are_skipped_on_request_with_their_judgments(tmp_path):
    corpus = [*CORPUS, {"_id": "d4", "title": "", "text": " "}, {"_id": "d5", "text": ""}]
    folder = write_beir(tmp_path / "c", corpus=corpus, qrels=QRELS + "q1\td4\t1\n")
    with pytest.raises(InputFileError, match=r"line 4: document 'd4' is empty .*skip_empty_documents=True"):
        read_beir(folder)
    with pytest.warns(UserWarning, match="skipped 2 empty documents and 1 judgments pointing at them"):
        c = read_beir(folder, skip_empty_documents=True)
    assert list(c.corpus) == ["d1", "d2", "3"] and (c.skipped_documents, c.skipped_judgments) == (2, 1)
    assert c.qrels["q1"] == {"d1": 1}


def test_a_byte_order_mark_and_blank_lines_are_accepted(tmp_path):
    folder = write_beir(tmp_path / "c", corpus="\ufeff" + _jsonl(CORPUS) + "\n\n", qrels="\ufeff" + QRELS)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(read_beir(folder).corpus) == 3


@pytest.mark.parametrize(
    ("name", "split", "documents", "queries", "judgments"),
    [
        ("scifact", "test", 5183, 300, 339),
        ("scifact", "train", 5183, 809, 919),
        ("openoffice-dups", "test", 2069, 2479, 2479),
    ],
)
def test_the_shared_collections_match_their_stats(name, split, documents, queries, judgments):
    try:
        folder = data_dir() / "retrieval" / name
    except InputFileError as err:
        pytest.skip(str(err))
    if not folder.is_dir():
        pytest.skip(f"{folder} is absent")
    c = read_beir(folder, split)
    assert (len(c.corpus), len(c.queries), sum(len(j) for j in c.qrels.values())) == (documents, queries, judgments)
    assert all(c.relevant(q) for q in c.queries)
