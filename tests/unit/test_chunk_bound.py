"""Windows per document bounded (``Chunking.max_windows``, ``--max-windows``): a document keeps its first windows,
the bound is recorded in the index and used by every later add, and what will be embedded is said before it is."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from sbert.evaluation.retrievers import RetrievalSettings
from sbert.windows import MAX_WINDOWS, Chunker, Chunking, plan_windows

WORDS = [f"w{n}" for n in range(40)]


def _chunker(max_seq_length: int = 12) -> Chunker:
    """A chunker over a word-level tokenizer built here: one token a word, [CLS] and [SEP] around."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    vocab = {"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, **{w: n + 3 for n, w in enumerate(WORDS)}}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 1), ("[SEP]", 2)]
    )
    return Chunker(tokenizer, max_seq_length)


def _document(words: int, seed: int = 0) -> str:
    rng = np.random.default_rng(seed)
    return " ".join(WORDS[i] + ("." if i % 7 == 0 else "") for i in rng.integers(0, len(WORDS), words))


def test_a_bound_keeps_each_documents_first_windows_and_names_the_cut_ones():
    chunker = _chunker()
    documents = [_document(n, seed=n) for n in (3, 25, 400, 60, 5000)]
    every = chunker.split(documents, 10, 3)
    per_document = np.bincount(every.doc)
    for bound in (1, 2, per_document[1], 5):
        kept = chunker.split(documents, 10, 3, max_windows=int(bound))
        for d in range(len(documents)):
            first = np.flatnonzero(every.doc == d)[:bound]
            mine = np.flatnonzero(kept.doc == d)
            assert [every.ids[i] for i in first] == [kept.ids[i] for i in mine]
            np.testing.assert_array_equal(every.spans[first], kept.spans[mine])
        assert kept.cut.tolist() == np.flatnonzero(per_document > bound).tolist()  # exactly N windows: not cut
    assert every.cut.tolist() == []


def test_plan_windows_stops_at_the_bound():
    from sbert.windows import layout

    text = " ".join(["word"] * 50)
    offsets = [(5 * i, 5 * i + 4) for i in range(50)]
    tokens = layout(text, offsets, list(range(50)))
    assert len(plan_windows(tokens, 10, 2)) > 3 and plan_windows(tokens, 10, 2, 3) == plan_windows(tokens, 10, 2)[:3]
    with pytest.raises(ValueError, match="max_windows must be at least 1"):
        plan_windows(tokens, 10, 2, 0)


def test_the_bound_is_a_setting_recorded_and_read_back():
    assert Chunking().max_windows == MAX_WINDOWS and Chunking(max_windows=None).max_windows is None
    recorded = Chunking(16, 4, max_windows=3).settings()
    assert recorded["max_windows"] == 3 and Chunking.of(recorded) == Chunking(16, 4, max_windows=3)
    older = {"window": 16, "overlap": 4, "mode": "maxp", "prompt": ""}  # an index built before the bound
    assert Chunking.of(older).max_windows is None  # kept every window: so do the documents added to it
    with pytest.raises(ValueError, match="max_windows must be a whole number of at least 1"):
        Chunking(max_windows=0)
    assert RetrievalSettings(chunk=True, max_windows=2).chunking().max_windows == 2
    assert RetrievalSettings(chunk=True).chunking().max_windows == MAX_WINDOWS
    with pytest.raises(ValueError, match="max_windows applies to documents in windows"):
        RetrievalSettings(max_windows=2)


LONG = " ".join(f"cat{n % 5} sat on the mat." for n in range(60))
TEXTS = ["a dog barks", LONG, "birds sing in the morning"]


def test_an_index_records_the_bound_and_adds_with_it(tiny_encoder, tmp_path):
    from sbert.search.retrieve import add_texts, build_index, open_index

    built = build_index(tmp_path / "ix", tiny_encoder, TEXTS, ["a", "b", "c"], model="tiny",
                        chunking=Chunking(window=8, max_windows=2))  # fmt: skip
    assert built.documents["max_windows"] == 2
    windows = [row.split("#")[0] for row in built.ids]
    assert windows.count("b") == 2 and windows.count("a") == windows.count("c") == 1
    again = open_index(tmp_path / "ix")
    add_texts(again, tiny_encoder, [LONG], ["d"])
    assert [row.split("#")[0] for row in again.ids].count("d") == 2
    unbounded = build_index(None, tiny_encoder, TEXTS, ["a", "b", "c"], model="tiny",
                            chunking=Chunking(window=8, max_windows=None))  # fmt: skip
    assert "max_windows" not in unbounded.documents
    assert [row.split("#")[0] for row in unbounded.ids].count("b") > 10


def test_a_plan_says_what_will_be_embedded_and_roughly_how_long(tiny_encoder):
    plan = Chunking(window=8, max_windows=2).plan(tiny_encoder, TEXTS)
    assert (plan.documents, plan.windows, plan.cut, plan.max_windows) == (3, 4, 1, 2)
    assert plan.split_documents == 1 and plan.split_windows == 2 and plan.tokens_per_second > 0
    assert plan.seconds() > 0 and plan.seconds(whole_too=True) > plan.seconds()
    said = plan.summary()
    assert said.startswith("embedding 4 windows of 3 documents: 1 document cut after their first 2 windows")
    assert "roughly" in said and "here" in said
    assert "3 documents whole and the 2 windows of the 1 longer" in plan.summary(whole_too=True)
    untimed = Chunking(window=8, max_windows=None).plan(tiny_encoder, TEXTS, time_it=False)
    assert untimed.cut == 0 and untimed.windows > 10 and untimed.seconds() is None
    assert "every window of every document kept" in untimed.summary()


def test_sbert_index_build_chunk_says_what_it_embeds_and_cuts(tiny_encoder, tmp_path):
    from sbert.cli import main

    model = tmp_path / "tiny"
    tiny_encoder.save(model)
    corpus = tmp_path / "docs.jsonl"
    records = [{"id": i, "text": t} for i, t in zip("abc", TEXTS, strict=True)]
    corpus.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    runner = CliRunner()
    args = ["index", "build", str(corpus), "-m", str(model), "--chunk", "--window", "8", "--no-progress"]
    built = runner.invoke(main, [*args, "--out", str(tmp_path / "ix"), "--max-windows", "2"])
    assert built.exit_code == 0, built.output
    first, *_, last = built.stderr.splitlines()
    assert first.startswith("embedding 4 windows of 3 documents: 1 document cut after their first 2 windows")
    assert "(4 windows; 1 document cut at 2 windows)" in last
    info = json.loads(runner.invoke(main, ["index", "info", str(tmp_path / "ix"), "--json"]).stdout)
    assert info["documents"]["max_windows"] == 2 and info["rows"] == 4
    more = tmp_path / "more.jsonl"
    more.write_text(json.dumps({"id": "d", "text": LONG}) + "\n", encoding="utf-8")
    added = runner.invoke(main, ["index", "add", str(tmp_path / "ix"), str(more), "--no-progress"])
    assert added.exit_code == 0, added.output
    assert added.stderr.startswith("embedding 2 windows of 1 document: 1 document cut after their first 2 windows")
    every = runner.invoke(main, [*args, "--out", str(tmp_path / "all"), "--max-windows", "0"])
    assert every.exit_code == 0 and "every window of every document kept" in every.stderr
    refused = runner.invoke(main, ["index", "build", str(corpus), "-m", str(model), "--out", str(tmp_path / "x"),
                                   "--max-windows", "2"])  # fmt: skip
    assert refused.exit_code == 2 and "--max-windows applies to --chunk" in refused.output


def test_eval_auto_says_what_choosing_embeds_before_it_starts(tiny_encoder, capsys):
    from sbert.data.beir import Document
    from sbert.evaluation.retrievers import RetrievalSettings

    documents = [Document(f"d{n}", f"title {n}", f"{LONG} number {n} " * (1 + n % 3)) for n in range(12)]
    retriever = RetrievalSettings(auto=True, auto_queries=5).retriever()
    retriever.index(tiny_encoder, documents, show_progress=False)
    said = capsys.readouterr().err.splitlines()
    assert said[0].startswith("auto: to choose, embedding 12 documents whole and the ")
    assert "roughly" in said[0] and said[1].startswith("auto: chose")


def test_eval_takes_the_window_bound_index_build_takes(tmp_path):
    from sbert.cli import main
    from sbert.cli.training import _retrieval_settings

    common = {"chunk": True, "hybrid": False, "lexical": False, "auto": False}
    assert _retrieval_settings(32, **common, max_windows=None).max_windows == MAX_WINDOWS
    assert _retrieval_settings(32, **common, max_windows=0).max_windows is None  # every window
    assert _retrieval_settings(32, **common, max_windows=3).chunking().max_windows == 3
    done = CliRunner().invoke(main, ["eval", "default", "--retrieval", str(tmp_path), "--max-windows", "3"])
    assert done.exit_code == 2 and "--max-windows applies to documents in windows" in done.output
