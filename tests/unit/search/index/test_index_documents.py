"""The index with windows of documents (searches return documents with their best passage; deletes by
document) and with a BM25 file for hybrid search, on hand-made vectors: no model is loaded."""

from __future__ import annotations

import json

import numpy as np
import pytest

from sbert.errors import IndexFormatError
from sbert.search.exact import TopK
from sbert.search.fusion import fuse
from sbert.search.index.folder import Documents, Hybrid, VectorIndex

pytest.importorskip("bm25s")
from sbert.search.lexical import BM25

DIM = 8


def _vectors(rows) -> np.ndarray:
    """2-d directions padded to DIM coordinates."""
    x = np.zeros((len(rows), DIM), dtype=np.float32)
    x[:, :2] = rows
    return x


# document A: windows (1, 0) and (0, 1); B: (0.8, 0.6); C: (0, -1)
WINDOWS = _vectors([[1, 0], [0, 1], [0.8, 0.6], [0, -1]])
PASSAGES = ["the cat sat", "on the mat", "dogs bark at cats", "an empty kitchen"]
DOCS = ["A", "A", "B", "C"]
SPANS = np.array([[0, 11], [8, 18], [0, 17], [0, 16]])


def _build(path, mode="maxp", **options) -> VectorIndex:
    documents = Documents(DOCS, SPANS, window=4, overlap=1, mode=mode)
    return VectorIndex.build(path, WINDOWS, model="default", texts=PASSAGES, documents=documents, **options)


def _query(x, y) -> np.ndarray:
    return _vectors([[x, y]])


def test_search_returns_documents_by_their_best_window_with_the_passage(tmp_path):
    index = _build(tmp_path / "ix")
    hits = index.search(_query(1, 0), k=3)[0]
    assert [h.id for h in hits] == ["A", "B", "C"]
    assert [h.score for h in hits] == pytest.approx([1.0, 0.8, 0.0], abs=1e-6)
    assert hits[0].text == "the cat sat" and hits[0].span == (0, 11) and hits[0].row == 0
    assert [h.id for h in index.search(_query(0, 1), k=2)[0]] == ["A", "B"]  # A's second window
    assert index.search(_query(0, 1), k=1)[0][0].text == "on the mat"
    assert index.ids == ["A#0", "A#1", "B#0", "C#0"] and index.document_ids == ["A", "B", "C"]


def test_mean_mode_scores_a_document_by_its_mean_window_vector(tmp_path):
    index = _build(tmp_path / "ix", mode="mean")
    hits = index.search(_query(1, 0), k=3)[0]
    assert [h.id for h in hits] == ["B", "A", "C"]
    # A's mean of (1, 0) and (0, 1), at unit length; C's (0, -1)
    assert [h.score for h in hits] == pytest.approx([0.8, 2**-0.5, 0.0], abs=1e-6)
    assert hits[1].text == "the cat sat"  # the passage: A's window closest to the query
    maxp = index.search(_query(1, 0), k=1, mode="maxp")[0]  # the mode may be chosen per search
    assert maxp[0].id == "A"
    with pytest.raises(ValueError, match="maxp, mean"):
        index.search(_query(1, 0), k=1, mode="best")


def test_maxp_fetches_more_windows_until_it_has_k_documents(tmp_path):
    many = _vectors([[1, 0.01 * i] for i in range(60)] + [[0.5, 0.5]])
    docs = ["long"] * 60 + ["short"]
    spans = np.array([[i, i + 1] for i in range(61)])
    index = VectorIndex.build(
        tmp_path / "ix", many, model="default", texts=[f"w{i}" for i in range(61)], ann=True,
        documents=Documents(docs, spans, window=4, overlap=0),
    )  # fmt: skip
    for method in ("exact", "hnsw"):
        hits = index.search(_query(1, 0), k=2, method=method)[0]
        assert [h.id for h in hits] == ["long", "short"] and hits[0].text == "w0"


def test_an_index_of_documents_persists_documents_and_spans(tmp_path):
    _build(tmp_path / "ix")
    again = VectorIndex.open(tmp_path / "ix")
    assert again.documents == {"window": 4, "overlap": 1, "mode": "maxp"}
    records = [json.loads(line) for line in next((tmp_path / "ix").glob("seg-*.jsonl")).read_text().splitlines()]
    assert records[1] == {"id": "A#1", "text": "on the mat", "doc": "A", "span": [8, 18]}
    assert again.search(_query(0, -1), k=1)[0][0].span == (0, 16)


def test_delete_takes_documents_with_all_their_windows(tmp_path):
    index = _build(tmp_path / "ix")
    with pytest.raises(KeyError, match=r"no live documents with ids \['Z'\]"):
        index.delete(["Z"])
    with pytest.raises(KeyError, match="A#0"):  # window ids are not documents
        index.delete(["A#0"])
    assert index.delete(["A"]) == 2  # over a quarter of the rows: rewritten without them
    assert len(index) == 2 and index.document_ids == ["B", "C"]
    assert [h.id for h in index.search(_query(1, 0), k=5)[0]] == ["B", "C"]


def test_add_takes_windows_of_new_documents_only(tmp_path):
    index = _build(tmp_path / "ix")
    new = Documents(["D", "D"], np.array([[0, 3], [2, 6]]), window=4, overlap=1)
    index.add(_vectors([[0.9, -0.1], [-1, 0]]), texts=["xyz", "zyx"], documents=new)
    assert index.document_ids == ["A", "B", "C", "D"] and index.ids[-2:] == ["D#0", "D#1"]
    assert index.search(_query(-1, 0), k=1)[0][0][:2] == ("D", pytest.approx(1.0))
    with pytest.raises(ValueError, match=r"already holds documents \['B'\]"):
        index.add(_vectors([[1, 1]]), texts=["b"], documents=Documents(["B"], np.array([[0, 1]]), 4, 1))
    with pytest.raises(ValueError, match="holds documents: add windows of documents"):
        index.add(_vectors([[1, 1]]), texts=["b"])


def test_an_index_of_texts_is_unchanged_and_refuses_documents(tmp_path):
    index = VectorIndex.build(tmp_path / "ix", WINDOWS, model="default", texts=PASSAGES)
    assert "documents" not in index.manifest and index.documents is None and not index.lexical
    hit = index.search(_query(1, 0), k=1)[0][0]
    # no span, title, lead; its cosine
    assert hit == ("0", pytest.approx(1.0), "the cat sat", 0, None, None, None, pytest.approx(1.0))
    with pytest.raises(ValueError, match="holds texts"):
        index.add(_vectors([[1, 1]]), texts=["b"], documents=Documents(["Z"], np.array([[0, 1]]), 4, 1))
    with pytest.raises(ValueError, match="'mode' does not apply"):
        index.search(_query(1, 0), mode="mean")
    with pytest.raises(ValueError, match="no BM25 index"):
        index.search(_query(1, 0), hybrid=Hybrid(["cat"]))


def test_a_damaged_window_record_names_the_file_and_line(tmp_path):
    _build(tmp_path / "ix")
    records = next((tmp_path / "ix").glob("seg-*.jsonl"))
    lines = records.read_text().splitlines()
    lines[2] = json.dumps({"id": "B#0", "text": "x", "doc": "B", "span": [5, 2]})
    records.write_text("\n".join(lines) + "\n")
    with pytest.raises(IndexFormatError, match=rf"{records.name}, line 3: .*'span'"):
        VectorIndex.open(tmp_path / "ix")
    lines[2] = json.dumps({"id": "B#0", "text": "x"})
    records.write_text("\n".join(lines) + "\n")
    with pytest.raises(IndexFormatError, match="a row without 'doc'"):
        VectorIndex.open(tmp_path / "ix")


# -- BM25 and hybrid search ------------------------------------------------------------------------------
def _texts_index(path) -> VectorIndex:
    return VectorIndex.build(path, WINDOWS, model="default", texts=PASSAGES, bm25=True)


def test_hybrid_search_fuses_the_index_dense_and_bm25_results(tmp_path):
    index = _texts_index(tmp_path / "ix")
    query, text = _query(0, 1), "cats and dogs"
    hits = index.search(query, k=4, hybrid=Hybrid([text], fusion="rrf", candidates=4))[0]
    dense = TopK(*[np.array([a]) for a in ([1.0, 0.6, 0.0, -1.0], [1, 2, 0, 3])])
    lexical = BM25.build(PASSAGES).search([text], 4)
    expected = fuse(dense, lexical, 4, "rrf")
    assert [h.row for h in hits] == expected.indices[0].tolist()
    assert [h.score for h in hits] == pytest.approx(expected.scores[0].tolist())
    assert hits[0].id == "2" and hits[0].text == "dogs bark at cats"  # first in BM25, second in dense
    weighted = index.search(query, k=1, hybrid=Hybrid([text], fusion="weighted", alpha=0.0))[0]
    assert weighted[0].id == "2"  # BM25 alone
    with pytest.raises(ValueError, match="fusion must be one of"):
        index.search(query, k=1, hybrid=Hybrid([text], fusion="max"))
    with pytest.raises(ValueError, match="2 query texts for 1 query vectors"):
        index.search(query, k=1, hybrid=Hybrid([text, text]))


def test_the_bm25_file_follows_adds_and_deletes(tmp_path):
    index = _texts_index(tmp_path / "ix")
    first = index.manifest["lexical"]["file"]
    assert (tmp_path / "ix" / first).is_file() and first.endswith(".bm25")
    index.add(_vectors([[0.5, 0.5]]), texts=["zebras graze"])
    lexical_only = Hybrid(["zebras"], fusion="weighted", alpha=0.0)
    assert index.search(_query(-1, 0), k=1, hybrid=lexical_only)[0][0].id == "4"
    assert not (tmp_path / "ix" / first).exists()  # the old version's file is collected
    index.delete(["4"])
    hits = index.search(_query(-1, 0), k=5, hybrid=lexical_only)[0]
    assert "4" not in [h.id for h in hits]  # deleted rows never come back
    reopened = VectorIndex.open(tmp_path / "ix")
    assert reopened.lexical and BM25.load(tmp_path / "ix" / reopened.manifest["lexical"]["file"]).rows == len(
        reopened.ids
    )


def test_hybrid_search_over_documents_fuses_at_the_document_level(tmp_path):
    index = _build(tmp_path / "ix", bm25=True)
    assert index.manifest["lexical"]["over"] == "documents"
    hits = index.search(_query(0, -1), k=3, hybrid=Hybrid(["mat"], fusion="weighted", alpha=0.0))[0]
    assert [h.id for h in hits] == ["A", "B", "C"] and hits[0].text == "the cat sat"  # passage: closest to the vector
    assert [h.score for h in hits] == [1.0, 0.0, 0.0]  # only BM25 counts; B and C: found by the dense side only
    rrf = index.search(_query(0, -1), k=3, hybrid=Hybrid(["mat"], fusion="rrf"))[0]
    assert [h.id for h in rrf] == ["A", "C", "B"]  # dense (maxp): C 1, A 0, B -0.6; BM25: A
    assert [h.score for h in rrf] == pytest.approx([1 / 62 + 1 / 61, 1 / 61, 1 / 63])


# A's words "cat" and "mat" lie in different windows; D holds both in one longer window; Z neither.
SPLIT_PASSAGES = ["cat sat", "mat rug", "cat mat dog dog dog", "zebra"]
SPLIT_DOCS, SPLIT_SPANS = ["A", "A", "D", "Z"], np.array([[0, 7], [8, 15], [0, 19], [0, 5]])


def _split_index(kind, path, **options):
    from sbert.search.index.memory import MemoryIndex

    documents = Documents(SPLIT_DOCS, SPLIT_SPANS, window=4, overlap=0)
    x = _vectors([[1, 0], [0, 1], [0.6, 0.8], [-1, 0]])
    if kind == "memory":
        return MemoryIndex.build(x, model="default", texts=SPLIT_PASSAGES, documents=documents, **options)
    return VectorIndex.build(path, x, model="default", texts=SPLIT_PASSAGES, documents=documents, **options)


@pytest.mark.parametrize("kind", ["folder", "memory"])
def test_the_bm25_side_of_a_chunked_hybrid_search_scores_whole_documents(tmp_path, kind):
    index = _split_index(kind, tmp_path / "ix", bm25=True)
    lexical_only = Hybrid(["cat mat"], fusion="weighted", alpha=0.0)  # the BM25 side alone
    whole = BM25.build(["cat sat mat rug", SPLIT_PASSAGES[2], "zebra"]).scores("cat mat")
    windows = BM25.build(SPLIT_PASSAGES).scores("cat mat")
    assert whole[0] > whole[1] and max(windows[:2]) < windows[2]  # whole documents: A first; per window: D
    dense_tie = _query(0, 0)
    hits = index.search(dense_tie, k=2, hybrid=lexical_only)[0]
    assert [h.id for h in hits] == ["A", "D"] and hits[0].score == 1.0
    index.delete(["A"])
    assert index.search(dense_tie, k=2, hybrid=lexical_only)[0][0].id == "D"
    index.add(_vectors([[1, 1]]), texts=["mat cat"], documents=Documents(["E"], np.array([[0, 7]]), 4, 0))
    assert [h.id for h in index.search(dense_tie, k=2, hybrid=lexical_only)[0]] == ["E", "D"]  # E: shortest


def test_an_older_index_of_documents_keeps_bm25_per_window(tmp_path):
    """Indexes written before BM25 over whole documents: BM25 per window, a document scored by its best."""
    _split_index("folder", tmp_path / "ix", bm25=True)
    manifest = json.loads((tmp_path / "ix" / "manifest.json").read_text())
    BM25.build(SPLIT_PASSAGES).save(tmp_path / "ix" / manifest["lexical"]["file"])
    manifest["lexical"] = {"file": manifest["lexical"]["file"]}
    (tmp_path / "ix" / "manifest.json").write_text(json.dumps(manifest))
    old = VectorIndex.open(tmp_path / "ix")
    lexical_only = Hybrid(["cat mat"], fusion="weighted", alpha=0.0)
    assert [h.id for h in old.search(_query(0, 0), k=2, hybrid=lexical_only)[0]] == ["D", "A"]
    old.add(_vectors([[1, 1]]), texts=["zebra"], documents=Documents(["E"], np.array([[0, 5]]), 4, 0))
    assert "over" not in old.manifest["lexical"]  # stays per window until rebuilt
    assert [h.id for h in old.search(_query(0, 0), k=2, hybrid=lexical_only)[0]] == ["D", "A"]


def test_a_damaged_bm25_file_names_itself(tmp_path):
    index = _texts_index(tmp_path / "ix")
    file = tmp_path / "ix" / index.manifest["lexical"]["file"]
    file.write_bytes(b"not a zip")
    reopened = VectorIndex.open(tmp_path / "ix")
    assert reopened.search(_query(1, 0), k=1)[0][0].id == "0"  # dense search does not read it
    with pytest.raises(IndexFormatError, match=rf"{file.name}: not a readable BM25 index"):
        reopened.search(_query(1, 0), k=1, hybrid=Hybrid(["cat"]))
    manifest = json.loads((tmp_path / "ix" / "manifest.json").read_text())
    manifest["lexical"] = {"file": "../elsewhere.bm25"}
    (tmp_path / "ix" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(IndexFormatError, match=r"'lexical\.file' must be a file name in the index folder"):
        VectorIndex.open(tmp_path / "ix")


def test_bm25_needs_texts(tmp_path):
    with pytest.raises(ValueError, match="BM25 index needs the rows' texts"):
        VectorIndex.build(tmp_path / "ix", WINDOWS, model="default", bm25=True)


def test_repeated_document_ids_are_named():
    from sbert.windows import EncodedDocuments

    encoded = EncodedDocuments(WINDOWS, np.array([0, 0, 1, 2]), SPANS, PASSAGES)
    with pytest.raises(ValueError, match=r"document ids must be unique; repeated: \['B'\]"):
        Documents.of(encoded, ["A", "B", "B"], window=4, overlap=1)
