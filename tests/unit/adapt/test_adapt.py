"""sbert adapt: pseudo-queries from documents alone, the corpus readers, and the run end to end."""

from __future__ import annotations

import gzip
import json
import os
import random
import signal
from dataclasses import replace as replace_settings

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from conftest import make_tiny_encoder

from sbert.adapt import AdaptSettings, adapt
from sbert.adapt.pseudo_queries import (
    MAX_QUERY_WORDS,
    cloze_pairs,
    crop_pairs,
    pseudo_queries,
    same_text_pairs,
    sentences,
    title_pairs,
)
from sbert.cli import main
from sbert.data.beir import Document
from sbert.data.corpus import read_corpus_documents
from sbert.errors import InputFileError
from sbert.training import TrainingInterrupted

DOCS = [
    Document("a", "printer crashes", "the printer crashes when i print a page. it happens every time. please fix it."),
    Document("b", "", "calc hangs on large sheets with many formulas and charts in them today"),
    Document("c", "tiny", "too short"),
]


def test_title_pairs_take_the_title_as_the_query_of_the_body():
    assert [(p.query, p.positive) for p in title_pairs(DOCS, random.Random(0))] == [
        ("printer crashes", DOCS[0].text),
        ("tiny", "too short"),
    ]


def test_the_title_method_refuses_a_corpus_without_titles():
    with pytest.raises(InputFileError, match="title method needs titles"):
        title_pairs([Document("x", "", "some text here")], random.Random(0))


def test_crops_are_spans_of_their_document_and_short_documents_give_none():
    pairs = crop_pairs(DOCS, random.Random(3))
    assert len(pairs) == 2  # "too short" (with its title: 3 words) gives none
    for pair, doc in zip(pairs, DOCS[:2], strict=True):
        joined = f" {doc.joined()} "
        assert f" {pair.query} " in joined and f" {pair.positive} " in joined
        assert 2 <= len(pair.query.split()) <= MAX_QUERY_WORDS
    assert crop_pairs(DOCS, random.Random(3)) == pairs  # the seed decides


def test_cloze_takes_one_sentence_against_the_rest():
    assert sentences("one two. three four! five") == ["one two.", "three four!", "five"]
    assert sentences(" ".join(str(i) for i in range(20))) == [" ".join(str(i) for i in range(16)), "16 17 18 19"]
    rng = random.Random(1)
    pair = cloze_pairs([DOCS[0]], rng)[0]
    parts = sentences(DOCS[0].joined())
    assert pair.query in parts
    rest = [p for p in parts if p != pair.query]
    assert pair.positive in (" ".join(rest), " ".join(parts))


def test_simcse_pairs_are_the_same_text_twice_and_the_mix_is_seeded():
    assert all(p.query == p.positive for p in same_text_pairs(DOCS, random.Random(0)))
    mixed = pseudo_queries(DOCS, ("title", "crop"), seed=5)
    assert len(mixed) == 2 + 2 and mixed == pseudo_queries(DOCS, ("title", "crop"), seed=5)
    assert mixed != pseudo_queries(DOCS, ("title", "crop"), seed=6)


def _beir_corpus(folder, docs):
    folder.mkdir(parents=True, exist_ok=True)
    with gzip.open(folder / "corpus.jsonl.gz", "wt", encoding="utf-8") as handle:
        for doc in docs:
            handle.write(json.dumps({"_id": doc.id, "title": doc.title, "text": doc.text}) + "\n")
    return folder


def test_corpus_readers_take_a_beir_folder_jsonl_and_text(tmp_path):
    docs, path = read_corpus_documents(_beir_corpus(tmp_path / "beir", DOCS))
    assert docs == DOCS and path.name == "corpus.jsonl.gz"
    plain = tmp_path / "docs.jsonl"
    plain.write_text('{"id": 7, "title": "t", "text": "x y"}\n\n{"id": "3", "text": "z"}\n{"id": 9, "text": " "}\n')
    assert read_corpus_documents(plain)[0] == [Document("7", "t", "x y"), Document("3", "", "z")]  # empty: skipped
    text = tmp_path / "docs.txt"
    text.write_text("first doc\n\nsecond doc\n")
    assert read_corpus_documents(text)[0] == [Document("0", "", "first doc"), Document("1", "", "second doc")]


def test_a_csv_corpus_is_read_by_its_columns_as_index_build_reads_it(tmp_path):
    """A tracker's export: adapt reads its columns (not its lines, header and commas included), into the
    documents `index build --auto` draws from: the same ids, titles and texts in the same order."""
    from sbert.data.corpus import Columns, read_corpus

    export = tmp_path / "reports.csv"
    export.write_text(
        "Issue key,Summary,Description\n"
        'OO-1,Printer crashes,"Printing a page crashes Writer, every time."\n'
        "OO-2,,Calc hangs on large sheets\n"
        "OO-3,Only a title,\n"
        "OO-4,Same,Same\n"
    )
    columns = Columns(text="Description", id="Issue key", title="Summary")
    docs, path = read_corpus_documents(export, columns)
    assert path == export and docs == [
        Document("OO-1", "Printer crashes", "Printing a page crashes Writer, every time."),
        Document("OO-2", "", "Calc hangs on large sheets"),
        Document("OO-3", "Only a title", ""),
        Document("OO-4", "Same", "Same"),
    ]
    assert read_corpus(export, columns=columns, unique_ids=True).documents() == docs  # index build's reading
    with pytest.raises(InputFileError, match=r"reports\.csv: the header row \(line 1\) has no 'text' column"):
        read_corpus_documents(export)  # without the columns: the missing one named, not lines read as documents
    export.write_text("Issue key,Description\nOO-1,a\nOO-1,b\n")
    with pytest.raises(InputFileError, match=r"line 3: id 'OO-1' was already given at line 2"):
        read_corpus_documents(export, Columns(text="Description", id="Issue key"))


@pytest.mark.slow
def test_sbert_adapt_trains_on_a_csv_export_named_by_its_columns(tmp_path):
    base = tmp_path / "base"
    make_tiny_encoder().save(base)
    rows = [
        (f"OO-{i}", f"crash number {i} in calc", f"calc crashes when sheet {i} holds many charts") for i in range(8)
    ]
    export = tmp_path / "reports.csv"
    export.write_text("key,summary,body\n" + "".join(f"{k},{t},{b}\n" for k, t, b in rows))
    args = ["adapt", str(base), "--corpus", str(export), "--out", str(tmp_path / "o"), "--steps", "1"]
    args += ["--text-column", "body", "--title-column", "summary", "--id-column", "key"]
    result = CliRunner().invoke(main, [*args, "--batch-size", "4", "--device", "cpu", "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "adapted on 8 pseudo-queries from 8 documents" in result.output and "(method title)" in result.output
    record = json.loads((tmp_path / "o.train" / "adapt.json").read_text())
    assert record["columns"] == {"text": "body", "id": "key", "title": "summary"} and record["documents"] == 8


def test_bad_corpora_are_refused_naming_the_file(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    with pytest.raises(InputFileError, match=r"empty\.txt: the corpus holds no documents"):
        read_corpus_documents(empty)
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"text": "ok"}\n{not json\n')
    with pytest.raises(InputFileError, match=r"broken\.jsonl: line 2 is not valid JSON"):
        read_corpus_documents(broken)
    with pytest.raises(InputFileError, match="no such file"):
        read_corpus_documents(tmp_path / "missing.jsonl")


def _tiny_corpus(tmp_path):
    rng = random.Random(0)
    words = [
        "printer",
        "calc",
        "writer",
        "crash",
        "hang",
        "slow",
        "font",
        "table",
        "chart",
        "save",
        "load",
        "print",
        "page",
        "cell",
        "sheet",
    ]
    docs = [Document(str(i), " ".join(rng.sample(words, 3)), " ".join(rng.choices(words, k=20))) for i in range(24)]
    return _beir_corpus(tmp_path / "corpus", docs)


@pytest.mark.slow
def test_adapt_saves_a_folder_sentence_transformers_loads_equally(tmp_path):
    from sentence_transformers import SentenceTransformer

    base = tmp_path / "base"
    make_tiny_encoder().save(base)
    settings = AdaptSettings(steps=3, batch_size=4)
    summary = adapt(base, _tiny_corpus(tmp_path), tmp_path / "adapted", settings, device="cpu", progress=False)
    assert summary["steps"] == 3 and summary["documents"] == 22 and summary["pairs"] == 22  # 2 held out for --auto
    texts = ["printer crash", "calc hangs on a sheet"]
    ours = __import__("sbert").load(str(tmp_path / "adapted"), device="cpu").encode(texts)
    theirs = SentenceTransformer(str(tmp_path / "adapted"), device="cpu").encode(texts)
    np.testing.assert_allclose(ours, theirs, atol=1e-5)
    base_vectors = __import__("sbert").load(str(base), device="cpu").encode(texts)
    assert not np.allclose(ours, base_vectors)  # it trained
    assert json.loads((tmp_path / "adapted.train" / "adapt.json").read_text())["method"] == "title"  # the default


def test_training_texts_are_cut_to_max_seq_length_and_the_saved_model_keeps_its_own_limit(tmp_path):
    import sbert

    base = tmp_path / "base"
    make_tiny_encoder().save(base)
    limit = sbert.load(str(base), device="cpu").max_seq_length
    corpus = _tiny_corpus(tmp_path)
    for name, cut in (("cut", 6), ("whole", None)):
        settings = AdaptSettings(steps=2, batch_size=4, max_seq_length=cut)
        adapt(base, corpus, tmp_path / name, settings, device="cpu", progress=False)
        assert sbert.load(str(tmp_path / name), device="cpu").max_seq_length == limit > 6
        assert json.loads((tmp_path / f"{name}.train" / "adapt.json").read_text())["max_seq_length"] == cut
    cut, whole = (sbert.load(str(tmp_path / n), device="cpu").state_dict() for n in ("cut", "whole"))
    assert any(not torch.equal(cut[k], whole[k]) for k in cut)  # the cut changed what was trained on


def test_a_cut_training_length_writes_the_model_once_with_its_own_limit(tmp_path, monkeypatch):
    """The trainer cuts texts while it trains (``TrainConfig.max_seq_length``) and saves once, uncut."""
    from sbert.encoder import Encoder

    base = tmp_path / "base"
    make_tiny_encoder().save(base)
    limit = Encoder.load(str(base), device="cpu").max_seq_length
    saved, save = [], Encoder.save
    monkeypatch.setattr(Encoder, "save", lambda self, *a, **k: (saved.append(self.max_seq_length), save(self, *a, **k)))
    settings = AdaptSettings(steps=2, batch_size=4, max_seq_length=6)
    adapt(base, _tiny_corpus(tmp_path), tmp_path / "out", settings, device="cpu", progress=False)
    assert saved == [limit] and limit > 6


def _stop_at_2(step: int, loss: float) -> None:
    """``on_step`` that sends this process Ctrl-C after step 2."""
    if step == 2:
        os.kill(os.getpid(), signal.SIGINT)


def _assert_same_weights(one, other) -> None:
    """The models saved in folders ``one`` and ``other`` have equal weights (to 1e-6)."""
    import sbert

    first, second = sbert.load(str(one), device="cpu"), sbert.load(str(other), device="cpu")
    for (name, a), (_, b) in zip(first.state_dict().items(), second.state_dict().items(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6, msg=name)


@pytest.mark.slow
def test_an_interrupted_adapt_resumes_to_the_same_weights(tmp_path):
    base = tmp_path / "base"
    make_tiny_encoder().save(base)
    corpus = _tiny_corpus(tmp_path)
    settings = AdaptSettings(steps=4, batch_size=4, checkpoint_every=100)
    adapt(base, corpus, tmp_path / "straight", settings, device="cpu", progress=False)

    with pytest.raises(TrainingInterrupted):
        adapt(base, corpus, tmp_path / "stopped", settings, device="cpu", progress=False, on_step=_stop_at_2)
    summary = adapt(base, corpus, tmp_path / "stopped", settings, resume=True, device="cpu", progress=False)
    assert summary["steps_run"] == 2
    _assert_same_weights(tmp_path / "straight", tmp_path / "stopped")


SCORING_DOCS = [
    Document("a", "printer crashes", "the printer crashes when a page prints"),
    Document("b", "calc hangs", "calc hangs on large sheets with charts"),
    Document("c", "font wrong", "writer shows the wrong font in tables"),
    Document("d", "save fails", "saving a file to a network share fails"),
]


def _scoring(tmp_path):
    """A tiny student and teacher, and four title pseudo-queries over SCORING_DOCS."""
    from sbert.adapt.pseudo_queries import PseudoQuery

    teacher = tmp_path / "teacher"
    if not teacher.is_dir():
        make_tiny_encoder(seed=7).save(teacher)
    queries = [PseudoQuery(d.title, d.text, d.id) for d in SCORING_DOCS]
    return make_tiny_encoder(), str(teacher), queries


def _base_teacher_corpus(tmp_path):
    """A tiny student folder, a tiny teacher folder (another seed) and ``_tiny_corpus``, for teacher methods."""
    base, teacher = tmp_path / "base", tmp_path / "teacher"
    make_tiny_encoder().save(base)
    make_tiny_encoder(seed=7).save(teacher)
    return base, teacher, _tiny_corpus(tmp_path)


def _counting(monkeypatch, fail_at: int | None = None) -> list[int]:
    """Patch ``teacher_rows`` to record how many queries each call scores (and Ctrl-C on call ``fail_at``)."""
    import sbert.adapt.teacher as distill

    calls, real = [], getattr(distill.teacher_rows, "real", distill.teacher_rows)  # never a patch of a patch

    def counted(teacher, documents, queries, negatives, show_progress=False):
        if fail_at is not None and len(calls) + 1 == fail_at:
            raise KeyboardInterrupt
        calls.append(len(queries))
        return real(teacher, documents, queries, negatives, show_progress)

    counted.real = real
    monkeypatch.setattr(distill, "teacher_rows", counted)
    return calls


@pytest.mark.slow
def test_scored_candidates_are_read_back_only_for_the_same_inputs(tmp_path, monkeypatch):
    from sbert.adapt.teacher import scored_key, scored_rows

    student, teacher, queries = _scoring(tmp_path)
    key = scored_key(queries, model=tmp_path / "m", teacher=teacher, seed=1)
    assert key["model"] == str(tmp_path / "m") and len(key["queries"]) == 64
    path = tmp_path / "run.train" / "teacher-scores.jsonl"
    run = {"path": path, "key": key, "resume": True}
    rows = scored_rows(student, teacher, SCORING_DOCS, queries, 1, 1, **run)
    assert [r.query for r in rows] == [q.query for q in queries] and all(r.negatives for r in rows)
    assert len(path.read_text().splitlines()) == 1 + len(queries)  # the candidates, then a line a query
    calls = _counting(monkeypatch)
    assert scored_rows(student, teacher, SCORING_DOCS, queries, 1, 1, **run) == rows and calls == []  # exact
    fresh = scored_rows(student, teacher, SCORING_DOCS, queries, 1, 1, **{**run, "resume": False})
    assert calls == [4]  # not resuming: scored again
    np.testing.assert_allclose([r.scores for r in fresh], [r.scores for r in rows], atol=1e-6)
    scored_rows(student, teacher, SCORING_DOCS, queries, 1, 1, **{**run, "key": {**key, "seed": 2}})
    assert calls == [4, 4]  # other inputs: scored again
    path.write_text(path.read_text()[:-12])  # the last line cut short (a kill mid-write): that query again
    again = scored_rows(student, teacher, SCORING_DOCS, queries, 1, 1, **{**run, "key": {**key, "seed": 2}})
    assert calls == [4, 4, 1]
    np.testing.assert_allclose([r.scores for r in again], [r.scores for r in rows], atol=1e-6)


@pytest.mark.slow
def test_ctrl_c_while_the_teacher_scores_keeps_the_chunks_scored(tmp_path, monkeypatch):
    import sbert.adapt.teacher as distill
    from sbert.adapt.teacher import ScoringInterrupted, scored_key, scored_rows

    student, teacher, queries = _scoring(tmp_path)
    straight = scored_rows(student, teacher, SCORING_DOCS, queries, 1, 1)
    monkeypatch.setattr(distill, "CHUNK", 1)
    path = tmp_path / "run.train" / "teacher-scores.jsonl"
    run = {"path": path, "key": scored_key(queries, seed=1), "resume": True}
    _counting(monkeypatch, fail_at=3)
    with pytest.raises(ScoringInterrupted) as stop:
        scored_rows(student, teacher, SCORING_DOCS, queries, 1, 1, **run)
    assert (stop.value.done, stop.value.total, stop.value.exit_code) == (2, 4, 130)
    assert "2 of 4 pseudo-queries scored" in str(stop.value) and "--resume" in stop.value.explain(["sbert", "x"])
    assert len(path.read_text().splitlines()) == 1 + 2
    calls = _counting(monkeypatch)
    resumed = scored_rows(student, teacher, SCORING_DOCS, queries, 1, 1, **run)
    assert calls == [1, 1]  # only the two queries not yet scored
    assert [(r.query, r.negatives) for r in resumed] == [(r.query, r.negatives) for r in straight]
    np.testing.assert_allclose([r.scores for r in resumed], [r.scores for r in straight], atol=1e-6)


@pytest.mark.slow
def test_the_cli_says_how_to_go_on_after_ctrl_c_while_the_teacher_scores(tmp_path, monkeypatch):
    base, teacher = tmp_path / "base", tmp_path / "teacher"
    make_tiny_encoder().save(base)
    make_tiny_encoder(seed=7).save(teacher)
    _counting(monkeypatch, fail_at=1)
    args = ["adapt", str(base), "--corpus", str(_tiny_corpus(tmp_path)), "--out", str(tmp_path / "o")]
    args += ["--method", "distill-kl", "--teacher", str(teacher), "--device", "cpu", "--no-progress"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 130, result.output
    assert "stopped while the teacher scored: 0 of" in result.output and "go on with:" in result.output
    assert (tmp_path / "o.train" / "teacher-scores.jsonl").is_file()  # the candidates are kept


def test_adapt_refuses_an_out_folder_of_other_files_before_reading_anything(tmp_path):
    from sbert.atomic import FolderNotReplaceableError

    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("mine")
    with pytest.raises(FolderNotReplaceableError, match=r"notes\.txt"):  # before the (missing) corpus is read
        adapt("default", tmp_path / "no-such-corpus.jsonl", tmp_path / "out", AdaptSettings(), device="cpu")
    assert (tmp_path / "out" / "notes.txt").read_text() == "mine"


def test_a_teacher_that_is_not_there_is_refused_before_the_candidates_are_found(tmp_path, monkeypatch):
    import sbert.adapt.teacher as distill
    from sbert.errors import ModelNotFoundError

    monkeypatch.setattr(distill, "candidates", lambda *a, **k: pytest.fail("candidates found before the check"))
    settings = AdaptSettings(method="distill-kl", teacher=str(tmp_path / "no-teacher"))
    with pytest.raises(ModelNotFoundError, match="no-teacher: no such model folder"):
        adapt("default", _tiny_corpus(tmp_path), tmp_path / "out", settings, device="cpu", progress=False)


@pytest.mark.slow
def test_a_resumed_teacher_method_reads_its_scores_back_and_ends_as_a_straight_run(tmp_path, monkeypatch):
    import sbert.adapt.teacher as distill

    base, teacher, corpus = _base_teacher_corpus(tmp_path)
    settings = AdaptSettings(method="distill-kl", steps=4, batch_size=4, teacher=str(teacher), checkpoint_every=100)
    adapt(base, corpus, tmp_path / "straight", settings, device="cpu", progress=False)

    with pytest.raises(TrainingInterrupted):
        adapt(base, corpus, tmp_path / "stopped", settings, device="cpu", progress=False, on_step=_stop_at_2)
    kept = (tmp_path / "stopped.train" / "teacher-scores.jsonl").read_text().splitlines()
    assert json.loads(kept[0])["key"]["teacher"] == str(teacher) and len(kept) == 1 + 4 * 4  # a line per query

    def never(*args, **kwargs):
        raise AssertionError("a resumed run scored the candidates again")

    monkeypatch.setattr(distill, "teacher_rows", never)
    monkeypatch.setattr(distill, "candidates", never)
    summary = adapt(base, corpus, tmp_path / "stopped", settings, resume=True, device="cpu", progress=False)
    assert summary["steps_run"] == 2
    _assert_same_weights(tmp_path / "straight", tmp_path / "stopped")
    other = replace_settings(settings, seed=43)  # other inputs: the kept scores are not the run's
    with pytest.raises(AssertionError, match="scored the candidates again"):
        adapt(base, corpus, tmp_path / "stopped", other, resume=True, device="cpu", progress=False)


@pytest.mark.slow
def test_a_teacher_method_scores_only_the_pseudo_queries_its_steps_train_on(tmp_path, monkeypatch):
    from sbert.adapt.teacher import scored_key

    base, teacher, corpus = _base_teacher_corpus(tmp_path)
    calls = _counting(monkeypatch)
    settings = AdaptSettings(method="distill-margin", steps=3, batch_size=4, teacher=str(teacher), seed=5)
    summary = adapt(base, corpus, tmp_path / "o", settings, device="cpu", progress=False)
    assert calls == [12] and summary["pairs"] == 12 and summary["pseudo_queries"] == 44  # 22 titles, 22 crops
    assert summary["steps"] == 3
    documents = [d for d in read_corpus_documents(corpus)[0] if d.id not in summary["held_out"]]  # 2 for --auto
    first = pseudo_queries(documents, ("title", "crop"), seed=5)[:12]  # the seeded draw's first 3 * 4
    head = json.loads((tmp_path / "o.train" / "teacher-scores.jsonl").read_text().splitlines()[0])
    assert head["key"]["queries"] == scored_key(first)["queries"]
    runner = CliRunner()
    args = ["adapt", str(base), "--corpus", str(corpus), "--out", str(tmp_path / "cli"), "--method", "distill-kl"]
    args += ["--teacher", str(teacher), "--steps", "2", "--batch-size", "4", "--device", "cpu", "--no-progress"]
    result = runner.invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "adapted on 8 of 44 pseudo-queries from 22 documents" in result.output
    everything = replace_settings(settings, steps=20)  # 20 steps of 4 would read more than there are: all 44
    calls.clear()
    assert adapt(base, corpus, tmp_path / "all", everything, device="cpu", progress=False)["pairs"] == 44
    assert calls == [44]


@pytest.mark.slow
def test_the_cli_refuses_an_untitled_corpus_for_the_title_method(tmp_path):
    text = tmp_path / "docs.txt"
    text.write_text("a document without a title\nanother one\n")
    args = ["adapt", "default", "--corpus", str(text), "--out", str(tmp_path / "o"), "--method", "title"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1 and "title method needs titles" in result.output
    assert result.output.startswith(f"Error: {text}: no document has both")  # the file named


def test_the_default_method_is_title_where_most_documents_have_one_else_crop():
    from sbert.adapt.methods import default_method

    titled, untitled = Document("t", "a title", "a body"), Document("u", "", "a body")
    assert default_method([titled, titled, untitled]) == "title"
    assert default_method([titled, untitled]) == "title"  # half is enough
    assert default_method([titled, untitled, untitled]) == "crop"
    assert default_method([Document("e", "a title", " ")]) == "crop"  # a title without a body gives no pair


@pytest.mark.slow
def test_an_untitled_corpus_gets_crop_when_no_method_is_named(tmp_path):
    base = tmp_path / "base"
    make_tiny_encoder().save(base)
    text = tmp_path / "docs.txt"
    rng = random.Random(0)
    words = ["printer", "calc", "writer", "crash", "hang", "slow", "font", "table", "chart", "save"]
    text.write_text("".join(" ".join(rng.choices(words, k=12)) + "\n" for _ in range(8)))
    args = ["adapt", str(base), "--corpus", str(text), "--out", str(tmp_path / "o"), "--steps", "1"]
    result = CliRunner().invoke(main, [*args, "--batch-size", "4", "--device", "cpu", "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "(method crop)" in result.output
    assert json.loads((tmp_path / "o.train" / "adapt.json").read_text())["method"] == "crop"


@pytest.mark.slow
def test_hold_out_leaves_out_of_training_the_documents_auto_draws_its_queries_from(tmp_path):
    from sbert.search.auto import held_out_ids, held_out_queries

    base = tmp_path / "base"
    make_tiny_encoder().save(base)
    corpus = _tiny_corpus(tmp_path)
    documents, _ = read_corpus_documents(corpus)
    held = held_out_ids(documents, 5)
    assert held == set(held_out_queries(documents, 5).relevant.values()) and len(held) == 5
    settings = AdaptSettings(steps=1, batch_size=4, hold_out=5)
    summary = adapt(base, corpus, tmp_path / "out", settings, device="cpu", progress=False)
    assert summary["held_out"] == sorted(held) and summary["documents"] == summary["pairs"] == 24 - 5
    record = json.loads((tmp_path / "out.train" / "adapt.json").read_text())
    assert record["held_out"] == sorted(held) and record["hold_out"] == 5
    assert held_out_ids([Document("x", "", "too short to hold out")], 5) == set()  # none can give a query


@pytest.mark.slow
def test_candidates_are_other_documents_from_the_student_then_bm25(tmp_path):
    from sbert.adapt.pseudo_queries import PseudoQuery
    from sbert.adapt.teacher import candidates

    docs = [
        Document("p", "", "printer crashes on print"),
        Document("q", "", "printer crashes on print"),  # a copy of p's text: never p's negative
        Document("c", "", "calc hangs with charts"),
        Document("w", "", "writer font looks wrong"),
        Document("x", "", "printer driver settings page"),
    ]
    queries = [PseudoQuery("printer crashes", "printer crashes on print", "p")]
    for dense, lexical in ((1, 1), (2, 1), (0, 2)):
        found = candidates(make_tiny_encoder(), docs, queries, dense=dense, lexical=lexical)[0]
        assert len(set(found)) == len(found) <= dense + lexical
        assert "p" not in found and "q" not in found  # never its own document, nor a copy of it
        assert "x" in found  # BM25's best other document, if the student had not taken it
    assert candidates(make_tiny_encoder(), docs, queries, dense=0, lexical=2)[0] == ["x"]  # no other shares a word


@pytest.mark.slow
def test_a_teacher_method_trains_on_the_teachers_scores(tmp_path):
    from sbert.adapt.teacher import teacher_scores
    from sbert.losses.teachers import Teacher

    teacher_folder = tmp_path / "teacher"
    make_tiny_encoder(seed=7).save(teacher_folder)
    teacher = Teacher(str(teacher_folder))
    scores = teacher_scores(teacher, [("printer", ["printer crash", "calc"])])
    vectors = teacher.model.encode(["printer", "printer crash", "calc"])
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    np.testing.assert_allclose(scores[0], [unit[0] @ unit[1], unit[0] @ unit[2]], atol=1e-6)

    base = tmp_path / "base"
    make_tiny_encoder().save(base)
    settings = AdaptSettings(method="distill-margin", steps=2, batch_size=4, teacher=str(teacher_folder))
    summary = adapt(base, _tiny_corpus(tmp_path), tmp_path / "out", settings, device="cpu", progress=False)
    assert summary["steps"] == 2 and summary["pairs"] == 2 * 4 and summary["pseudo_queries"] == 44
    with pytest.raises(ValueError, match="needs a teacher"):
        adapt(base, _tiny_corpus(tmp_path), tmp_path / "o2", AdaptSettings(method="distill-kl"), device="cpu")
    args = ["adapt", str(base), "--corpus", str(_tiny_corpus(tmp_path)), "--out", str(tmp_path / "kl")]
    args += ["--method", "distill-kl", "--teacher", str(teacher_folder), "--temperature", "0.5", "--steps", "1"]
    result = CliRunner().invoke(main, [*args, "--batch-size", "4", "--device", "cpu", "--no-progress"])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "kl.train" / "adapt.json").read_text())["temperature"] == 0.5
    bad = CliRunner().invoke(main, [*args[:-4], "--temperature", "0", "--steps", "1"])
    assert bad.exit_code == 2 and "--temperature" in bad.output


@pytest.mark.parametrize(("margin", "dropped"), [(2.0, 36), (-2.0, 0)])
def test_a_guided_adapt_masks_its_in_batch_negatives_and_says_how_many(tmp_path, margin, dropped):
    # cosines lie in [-1, 1]: margin 2 drops every candidate but a row's own document, margin -2 none;
    # 3 steps of 4 title pairs: 12 rows, 3 in-batch candidates each
    guide = tmp_path / "guide"
    make_tiny_encoder(seed=1).save(guide)
    args = ["adapt", str(guide), "--corpus", str(_tiny_corpus(tmp_path)), "--out", str(tmp_path / "o")]
    args += ["--steps", "3", "--batch-size", "4", "--guide", str(guide), "--guide-margin", f"{margin}"]
    result = CliRunner().invoke(main, [*args, "--device", "cpu", "--no-progress"])
    assert result.exit_code == 0, result.output
    share = f"{100 * dropped / 36:.2f}%"
    assert f"the guide: {dropped} of 36 in-batch candidates dropped ({share})" in result.output
    kept = json.loads((tmp_path / "o.train" / "adapt.json").read_text())
    assert (kept["guide"], kept["guide_margin"]) == (str(guide), margin)


def test_the_guide_judges_the_text_the_student_reads():
    from sbert.adapt.methods import method
    from sbert.adapt.recipe import training_rows

    settings = AdaptSettings(method="title", guide="default", guide_margin=-0.1, max_seq_length=16)
    rows, loss = training_rows(method("title"), settings, None, DOCS, pseudo_queries(DOCS, ("title",), 42))
    assert len(rows) == 2 and loss.guide.margin == -0.1 and loss.guide.margin_strategy == "absolute"
    assert loss.guide.guide.model.max_seq_length == 16
    assert training_rows(method("title"), AdaptSettings(method="title"), None, DOCS, [])[1].guide is None


def test_a_methods_facts_and_loss_come_from_its_objectives_entry(monkeypatch):
    from dataclasses import replace

    from sbert.adapt.methods import METHODS, method
    from sbert.adapt.recipe import objective_loss
    from sbert.losses.distillation import DistillKLDivLoss, MarginMSELoss
    from sbert.losses.objectives import OBJECTIVES

    assert {name for name, m in METHODS.items() if m.needs_teacher} == {"distill-margin", "distill-kl"}
    assert {name for name, m in METHODS.items() if not m.in_batch} == {"distill-margin", "distill-kl", "tsdae"}
    assert method("tsdae").kind is OBJECTIVES["tsdae"] and method("tsdae").kind.texts_alone
    settings = AdaptSettings(method="distill-kl", teacher="default", temperature=0.5)
    kl = objective_loss(method("distill-kl"), settings, None)  # the rows carry the teacher's scores: no teacher
    assert isinstance(kl, DistillKLDivLoss) and kl.teacher is None and (kl.temperature, kl.similarity) == (0.5, "dot")
    margin = objective_loss(method("distill-margin"), settings, None)
    assert type(margin) is MarginMSELoss and margin.teacher is None
    assert objective_loss(method("title"), AdaptSettings(scale=7.0), None).scale == 7.0
    monkeypatch.setitem(OBJECTIVES, "mnrl", replace(OBJECTIVES["mnrl"], in_batch=False))
    assert not method("title").in_batch  # read from the table, not from the objective's name


def test_a_guide_is_refused_before_any_work_where_it_cannot_mask(tmp_path, monkeypatch):
    from test_remote_code import tiny_cross_encoder_folder

    import sbert.adapt.recipe as recipe
    import sbert.training.recipe as training
    from sbert.errors import ModelNotFoundError

    out, corpus = tmp_path / "o", tmp_path / "corpus.jsonl"
    monkeypatch.setattr(recipe, "read_corpus_documents", lambda *a: (DOCS, corpus))
    monkeypatch.setattr(training, "build_encoder", lambda *a, **k: pytest.fail("the student loaded before the check"))
    for name in ("tsdae", "distill-kl"):  # no in-batch negatives to mask
        settings = AdaptSettings(method=name, guide="default", teacher="default")
        with pytest.raises(ValueError, match=f"--guide masks in-batch negatives; adapt method '{name}' trains"):
            adapt("default", corpus, out, settings, device="cpu")
    with pytest.raises(ModelNotFoundError, match="no-guide: no such model folder"):
        adapt("default", corpus, out, AdaptSettings(method="title", guide=str(tmp_path / "no-guide")))
    cross = tiny_cross_encoder_folder(tmp_path / "cross")
    with pytest.raises(ValueError, match="a cross-encoder; a guide must be a bi-encoder"):
        adapt("default", corpus, out, AdaptSettings(method="title", guide=str(cross)))
    assert not out.exists()
