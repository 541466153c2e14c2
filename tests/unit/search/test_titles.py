"""Titles: read from a corpus beside their texts (one parse), embedded before them, kept beside the text in an
index, returned in ``Hit.title`` and shown by ``sbert search`` and ``/search``; an index without titles (built
before they were kept) opens as before. Passages of documents start at a sentence or word boundary."""

from __future__ import annotations

import json

import numpy as np
import pytest
from fastapi.testclient import TestClient

from sbert.data.corpus import Columns, Corpus, read_corpus
from sbert.errors import IndexFormatError
from sbert.search.grouping import readable_passage, readable_start
from sbert.search.index.folder import VectorIndex
from sbert.search.index.memory import MemoryIndex

DIM = 8
RECORDS = [
    {"id": "b1", "title": "Crash when saving <b>large</b> files", "text": "The editor crashes on big files."},
    {"id": "b2", "title": "Slow start-up", "text": "Starting takes thirty seconds."},
    {"id": "b3", "text": "The printer prints blank pages."},
]


def _vectors(n: int = 3) -> np.ndarray:
    x = np.eye(DIM, dtype=np.float32)[:n]
    x[:, DIM - 1] = 0.1
    return x


def _titles() -> list[str | None]:
    return [r.get("title") for r in RECORDS]


def _texts() -> list[str]:
    return [f"{r['title']} {r['text']}" if "title" in r else r["text"] for r in RECORDS]


def test_titles_are_read_beside_their_texts_and_joined_as_eval_joins_them(tmp_path):
    from sbert.data.beir import Document

    jsonl = tmp_path / "bugs.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in RECORDS), encoding="utf-8")
    corpus = read_corpus(jsonl)
    assert corpus == Corpus([r["text"] for r in RECORDS], ["b1", "b2", "b3"], _titles())  # apart, as the file has them
    assert corpus.joined() == _texts()  # what is embedded: the title before its text, as BEIR's Document.joined
    assert corpus.joined() == [Document("", r.get("title", ""), r["text"]).joined() for r in RECORDS]
    assert corpus.documents()[0] == Document("b1", RECORDS[0]["title"], RECORDS[0]["text"])
    tsv = tmp_path / "bugs.tsv"
    tsv.write_text("key\tsummary\tbody\nb1\t  Crash  \tIt crashes.\nb2\t\tNo summary.\nb3\tOnly a title\t\n")
    read = read_corpus(tsv, columns=Columns("body", "key", "summary"))
    assert (read.titles, read.texts) == (["Crash", None, "Only a title"], ["It crashes.", "No summary.", ""])
    assert read.joined() == ["Crash It crashes.", "No summary.", "Only a title"]  # a title alone is a text
    lines = tmp_path / "plain.txt"
    lines.write_text("one\n  two \n", encoding="utf-8")
    assert read_corpus(lines) == Corpus(["one", "  two "])  # no ids, no titles; a line as it is
    assert read_corpus(lines).documents()[1] == Document("1", "", "  two ")
    untitled = tmp_path / "untitled.jsonl"
    untitled.write_text(json.dumps({"text": "no title"}) + "\n", encoding="utf-8")
    assert read_corpus(untitled).titles is None


def test_a_beir_corpus_gives_its_underscore_ids_unless_another_id_column_is_named(tmp_path):
    beir = tmp_path / "corpus.jsonl"
    records = [{"_id": "d7", "title": "t", "text": "x"}, {"_id": "d9", "text": "y", "id": "own"}]
    beir.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    assert read_corpus(beir) == Corpus(["x", "y"], ["d7", "own"], ["t", None])  # an "id" still wins where given
    assert read_corpus(beir, columns=Columns(id="key")).ids is None  # a named column is that column only


def test_a_folder_index_keeps_titles_through_add_delete_and_compaction(tmp_path):
    index = VectorIndex.build(tmp_path / "ix", _vectors(), model="default", ids=["b1", "b2", "b3"],
                              texts=_texts(), titles=_titles())  # fmt: skip
    more = np.zeros((1, DIM), dtype=np.float32)
    more[0, 3] = 1
    index.add(more, ids=["new"], texts=["Untitled text."])
    index.delete(["b2"])
    index.compact()
    reopened = VectorIndex.open(tmp_path / "ix")
    hits = reopened.search(_vectors(1), k=4)[0]
    assert (hits[0].id, hits[0].title) == ("b1", "Crash when saving <b>large</b> files")
    assert {h.id: h.title for h in hits} == {"b1": "Crash when saving <b>large</b> files", "b3": None, "new": None}
    records = "".join(p.read_text() for p in (tmp_path / "ix").glob("seg-*.jsonl"))
    assert '"title": "Crash when saving <b>large</b> files"' in records and records.count('"title"') == 1


def test_an_index_without_titles_opens_and_answers_with_none(tmp_path):
    VectorIndex.build(tmp_path / "old", _vectors(), model="default", texts=_texts())
    records = "".join(p.read_text() for p in (tmp_path / "old").glob("seg-*.jsonl"))
    assert '"title"' not in records  # the layout of indexes built before titles were kept
    hits = VectorIndex.open(tmp_path / "old").search(_vectors(1), k=2)[0]
    assert hits[0].title is None and hits[0].text == _texts()[0]
    segment = next((tmp_path / "old").glob("seg-*.jsonl"))
    segment.write_text(segment.read_text().replace('"id": "0"', '"id": "0", "title": 7', 1))
    with pytest.raises(IndexFormatError, match="optional string 'text' and 'title'"):
        VectorIndex.open(tmp_path / "old").search(_vectors(1), k=1)


def test_a_memory_index_keeps_titles():
    index = MemoryIndex.build(_vectors(), model="default", ids=["b1", "b2", "b3"], texts=_texts(), titles=_titles())
    assert [h.title for h in index.search(_vectors(2)[1:], k=1)[0]] == ["Slow start-up"]


class _Stub:
    """A model without weights for the service: every text's vector is row 0 of ``_vectors``."""

    similarity_fn_name, max_seq_length, dim = "cosine", 16, DIM
    runtime, backend_name, can_pack = "stub/fp32", "torch", False

    def tokenize(self, texts):
        from sbert.pipeline import Tokenized

        return Tokenized([[0, 1] for _ in texts], [])

    def resolve_prompt(self, prompt_name=None, prompt=None, task=None):
        return prompt

    def encode_tokenized(self, tokens, **options):
        return np.repeat(_vectors(1), len(tokens), axis=0)

    def encode(self, texts, **options):
        return self.encode_tokenized(self.tokenize(texts))


def test_search_endpoint_returns_the_title(tmp_path):
    from sbert.serve.app import create_app
    from sbert.serve.settings import EngineSettings

    index = VectorIndex.build(tmp_path / "ix", _vectors(), model="default", ids=["b1", "b2", "b3"],
                              texts=_texts(), titles=_titles())  # fmt: skip
    app = create_app(_Stub(), index=index, engine=EngineSettings(workers=1, max_wait_ms=1))
    with TestClient(app) as http:
        hits = http.post("/search", json={"query": "crash", "k": 3}).json()["results"][0]["hits"]
    assert hits[0] == {
        "id": "b1", "score": pytest.approx(1.0), "cosine": pytest.approx(1.0), "text": _texts()[0],
        "title": RECORDS[0]["title"],
    }  # fmt: skip
    assert "title" not in next(h for h in hits if h["id"] == "b3")


def test_passages_start_at_a_sentence_or_word_boundary():
    cut = "ing the bread. Then the oven is hot and we bake it for an hour or so until it is golden."
    assert cut[readable_start(cut, "k") :].startswith("Then the oven")
    words = "ing the bread and then the oven is hot and we bake it for an hour or so until golden."
    assert words[readable_start(words, "k") :].startswith("the bread")  # mid-word: the next whole word
    assert readable_start(words, " ") == 0  # a word starts there
    assert readable_start(words, "") == 0  # the document's start: shown whole
    document = "Knead the dough well. Let it rise for an hour in a warm place, then bake it at 220 degrees."
    spans = [(0, 40), (30, len(document))]
    texts = [document[a:b] for a, b in spans]
    text, span = readable_passage(texts, spans, ["d", "d"], 1)
    assert document[30:].startswith("ise for an hour")  # the window itself begins mid-word
    assert text == document[span[0] : span[1]] and text.startswith("for an hour in a warm place")
    assert readable_passage(texts, spans, ["d", "d"], 0) == (texts[0], spans[0])  # a document's start: as it is


@pytest.mark.slow
def test_cli_build_and_search_show_titles(model, tmp_path):
    from click.testing import CliRunner

    from sbert.cli import main

    corpus = tmp_path / "bugs.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in RECORDS), encoding="utf-8")
    runner = CliRunner()
    built = runner.invoke(main, ["index", "build", str(corpus), "--out", str(tmp_path / "ix"), "--no-progress"])
    assert built.exit_code == 0, built.output
    shown = runner.invoke(main, ["search", str(tmp_path / "ix"), "the editor crashes on big files", "-k", "3"])
    lines = shown.stdout.splitlines()
    assert lines[1].endswith("[b1] Crash when saving <b>large</b> files"), shown.stdout
    assert lines[2].strip() == "The editor crashes on big files."  # the text under its title, not repeated
    assert any(line.endswith("[b3] The printer prints blank pages.") for line in lines)
    as_json = runner.invoke(main, ["search", str(tmp_path / "ix"), "editor crash", "-k", "3", "--json"])
    hits = {h["id"]: h for h in json.loads(as_json.stdout)[0]["hits"]}
    assert hits["b1"]["title"] == RECORDS[0]["title"] and "title" not in hits["b3"]


@pytest.mark.slow
def test_every_window_of_a_document_keeps_its_documents_title(tmp_path):
    from conftest import make_tiny_encoder

    from sbert.search.retrieve import SearchOptions, add_texts, build_index, search_texts
    from sbert.windows import Chunking

    encoder = make_tiny_encoder(dropout=0.0).eval()
    encoder.save(tmp_path / "model")
    long = "The oven heats up quickly. Knead the dough for ten minutes, then let it rise for an hour. " * 3
    model = str(tmp_path / "model")
    index = build_index(tmp_path / "ix", encoder, [long, "Cats sleep."], ["bread", "cats"], model=model,
                        chunking=Chunking(window=12, overlap=3), titles=["Baking bread", None])  # fmt: skip
    add_texts(index, encoder, ["Trains run late."], ["train"], titles=["Rail news"])
    assert len(index) > 4  # the long document is several windows
    hits = {h.id: h for h in search_texts(index, encoder, ["dough"], SearchOptions(k=3))[0]}
    assert (hits["bread"].title, hits["cats"].title, hits["train"].title) == ("Baking bread", None, "Rail news")


def test_a_title_is_embedded_before_its_text_and_kept_beside_the_row():
    from sbert.search.retrieve import embed_corpus

    class Recording:
        """Records what it is given to embed; every vector is row 0 of ``_vectors``."""

        def __init__(self) -> None:
            self.seen: list[str] = []

        def encode_document(self, texts, **options):
            self.seen.extend(texts)
            return np.repeat(_vectors(1), len(texts), axis=0)

    encoder = Recording()
    rows = embed_corpus(encoder, [r["text"] for r in RECORDS], ["b1", "b2", "b3"], titles=_titles())
    assert encoder.seen == _texts() == rows.texts  # embedded (and searched): the title before its text
    assert rows.titles == _titles() and rows.ids == ["b1", "b2", "b3"]
    with pytest.raises(ValueError, match="2 titles for 3 texts"):
        embed_corpus(encoder, _texts(), titles=_titles()[:2])
