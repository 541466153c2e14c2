"""--auto after sbert adapt: adapt holds out by default the documents --auto draws from and records their ids
in the model folder's adapt.json; --auto with that model draws from exactly those; --hold-out 0 records none
and --auto says the model may have trained on its pseudo-queries. And --auto's words: what the rule did, in
words that agree with the numbers; why no pseudo-query could be drawn."""

from __future__ import annotations

import gzip
import json
import math
import random

import pytest
from click.testing import CliRunner
from conftest import make_tiny_encoder

from sbert.cli import main
from sbert.data.beir import Document
from sbert.search.auto import (
    CHOICES,
    MIN_WORDS,
    AutoResult,
    adapt_hold_out,
    decide,
    default_choice,
    held_out_ids,
    held_out_queries,
)

WORDS = ["printer", "calc", "writer", "crash", "hang", "slow", "font", "table", "chart", "save", "load"]
WORDS += ["print", "page", "cell", "sheet", "macro", "export"]


def _documents(n: int = 60) -> list[Document]:
    rng = random.Random(0)
    return [
        Document(f"d{i}", " ".join(rng.sample(WORDS, 3)) + f" z{i}", " ".join(rng.choices(WORDS, k=30)))
        for i in range(n)
    ]


def _beir(folder, documents, queries: dict[str, str] | None = None):
    folder.mkdir(parents=True, exist_ok=True)
    with gzip.open(folder / "corpus.jsonl.gz", "wt", encoding="utf-8") as handle:
        handle.writelines(json.dumps({"_id": d.id, "title": d.title, "text": d.text}) + "\n" for d in documents)
    if queries:
        (folder / "qrels").mkdir()
        (folder / "queries.jsonl").write_text(
            "".join(json.dumps({"_id": q, "text": queries[q]}) + "\n" for q in queries)
        )
        rows = "".join(f"{q}\td{q[1:]}\t1\n" for q in queries)  # query qN finds document dN
        (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + rows)
    return folder


def _adapt(tmp_path, corpus, out: str, *extra: str):
    base = tmp_path / "base"
    if not base.exists():
        make_tiny_encoder().save(base)
    command = ["adapt", str(base), "--corpus", str(corpus), "--out", str(tmp_path / out), "--steps", "2"]
    result = CliRunner().invoke(main, [*command, "--batch-size", "4", "--device", "cpu", "--no-progress", *extra])
    assert result.exit_code == 0, result.output
    return tmp_path / out, result.output


def test_a_draw_restricted_to_its_own_documents_gives_that_draw_back():
    documents = _documents()
    drawn = held_out_queries(documents, 12)
    again = held_out_queries(documents, 12, only=set(drawn.relevant.values()))
    assert again == drawn  # the same documents, the same titles and spans, the same coins
    shuffled = list(reversed(documents))  # another order (another reader): still those documents alone
    assert set(held_out_queries(shuffled, 12, only=set(drawn.relevant.values())).relevant.values()) == set(
        drawn.relevant.values()
    )
    assert adapt_hold_out(documents) == sorted(held_out_ids(documents, 6))  # a tenth of 60: 6
    assert adapt_hold_out(documents, 0) == [] and len(adapt_hold_out(_documents(3000))) == 200


@pytest.mark.slow
def test_adapt_holds_out_by_default_what_auto_draws_and_auto_draws_from_exactly_those(tmp_path):
    documents = _documents()
    corpus = _beir(tmp_path / "corpus", documents)
    model, said = _adapt(tmp_path, corpus, "m")
    record = json.loads((model / "adapt.json").read_text())  # in the model's own folder
    held = adapt_hold_out(documents)
    assert record["held_out"] == held and record["hold_out"] == len(held) == 6
    assert record["documents"] == 54 and "6 documents held out" in said
    docs_file = tmp_path / "docs.jsonl"
    docs_file.write_text("".join(json.dumps({"id": d.id, "title": d.title, "text": d.text}) + "\n" for d in documents))
    built = CliRunner().invoke(
        main, ["index", "build", str(docs_file), "--model", str(model), "--out", str(tmp_path / "ix"), "--auto"]
    )
    assert built.exit_code == 0, built.output
    assert f"from the 6 documents adapt left out of the model's training ({model / 'adapt.json'})" in built.output
    auto = json.loads((tmp_path / "ix" / "manifest.json").read_text())["search"]["auto"]
    assert auto["pseudo_queries"] == 6 and auto["adapt_record"]["present"] == 6
    import sbert
    from sbert.search.auto import choose_search

    whole = tuple(c for c in CHOICES if not c.chunk)
    result = choose_search(sbert.load(str(model), device="cpu"), documents, choices=whole)
    assert result.source.only == frozenset(held) and result.queries == 6
    assert set(held_out_queries(documents, only=result.source.only).relevant.values()) == set(held)
    # a corpus that lacks some of them: those it has, and it says how many are missing
    fewer = choose_search(
        sbert.load(str(model), device="cpu"), [d for d in documents if d.id != held[0]], choices=whole
    )
    assert fewer.queries == 5 and "(1 of them not in this corpus)" in fewer.summary()
    # sbert eval --auto reads the same record
    queries = {f"q{d.id[1:]}": d.title for d in documents[:10]}
    evaluated = CliRunner().invoke(
        main, ["eval", str(model), "--retrieval", str(_beir(tmp_path / "b", documents, queries)), "--auto"]
    )
    assert evaluated.exit_code == 0, evaluated.output
    assert "from the 6 documents adapt left out of the model's training" in evaluated.output


@pytest.mark.slow
def test_hold_out_0_records_no_documents_and_auto_says_the_model_may_have_trained_on_them(tmp_path):
    import sbert
    from sbert.search.auto import choose_search

    documents = _documents()
    model, _ = _adapt(tmp_path, _beir(tmp_path / "corpus", documents), "m0", "--hold-out", "0")
    record = json.loads((model / "adapt.json").read_text())
    assert record["held_out"] == [] and record["hold_out"] == 0 and record["documents"] == 60
    whole = tuple(c for c in CHOICES if not c.chunk)
    result = choose_search(sbert.load(str(model), device="cpu"), documents, choices=whole)
    assert result.queries == 60 and result.record()["adapt_record"]["all"] is True  # drawn as for any model
    assert "adapted with --hold-out 0" in result.summary() and "may have trained on the documents" in result.summary()
    (model / "adapt.json").unlink()  # a model that was not adapted: as before, nothing said
    plain = choose_search(sbert.load(str(model), device="cpu"), documents, choices=whole)
    assert plain.source is None and "adapt" not in plain.summary() and plain.queries == 60


def _result(per_query: dict[str, list[float]], keep_default: bool = True) -> AutoResult:
    scores = {name: 100 * sum(v) / len(v) for name, v in per_query.items()}
    n = len(next(iter(per_query.values())))
    return AutoResult(scores=scores, queries=n, seed=0, **decide(CHOICES, per_query, keep_default))


def _base(n: int) -> dict[str, list[float]]:
    return {c.name: [0.0] * n for c in CHOICES}


def test_the_summary_says_what_the_rule_did_in_words_that_agree_with_its_numbers():
    default = default_choice(CHOICES).name
    # the best leads the next by 1.4 standard errors: more than one, not more than two; said as such, not
    # called "within noise (standard error 0.23)" with a gap above it
    per_query = _base(8)
    per_query["dense"], per_query["bm25"] = [1.0] * 8, [1.0] * 6 + [0.0] * 2
    per_query[default] = [1.0] * 4 + [0.0] * 4
    near = _result(per_query)
    gap, error = near.margin.gap, near.margin.standard_error
    assert error < gap <= 2 * error
    assert near.choice.name == "dense" and not near.stayed_with_default
    assert (
        f"the next, bm25 (75.00), is behind by {gap:.2f}, {gap / error:.1f} standard errors (each {error:.2f}), "
        "not more than two, within noise" in near.summary()
    )
    over = near.over_default
    assert over.gap > error and f"the default, {default} (50.00), is behind by {over.gap:.2f}" in near.summary()
    assert "more than the one standard error the best must lead it by to replace it" in near.summary()
    # the best leads by more than two standard errors: no word of noise
    per_query = _base(8)
    per_query["dense"] = [1.0] * 8
    per_query["bm25"] = [1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0]
    clear = _result(per_query)
    assert clear.margin.gap > 2 * clear.margin.standard_error and "noise" not in clear.summary()
    assert f"is behind by {clear.margin.gap:.2f}, " in clear.summary()
    # the default stays: the best leads it by no more than one standard error, and the line says both
    per_query = _base(4)
    per_query["hybrid weighted 0.5"], per_query[default] = [1.0, 1.0, 1.0, 0.5], [1.0, 1.0, 0.5, 0.5]
    kept = _result(per_query)
    assert kept.stayed_with_default and kept.over_default.gap == pytest.approx(kept.over_default.standard_error)
    assert (
        "kept because the best on these pseudo-queries, hybrid weighted 0.5 (87.50), is ahead of it by 12.50, "
        "1.0 standard errors (each 12.50), not more than the one standard error it must lead by to replace the "
        "default" in kept.summary()
    )
    # the rule off (keep_default=False): the best taken though it is within a standard error of the default
    taken = _result(per_query, keep_default=False)
    assert taken.choice.name == "hybrid weighted 0.5"
    assert "not more than one standard error, yet the best was taken: the rule that keeps the default was off" in (
        taken.summary()
    )
    # the default is the best: no word of replacing it
    per_query = _base(4)
    per_query[default], per_query["dense"] = [1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 0.0]
    itself = _result(per_query)
    assert itself.choice.name == default and itself.over_default is None and "replace" not in itself.summary()
    # a tie, and a single pseudo-query
    tie = _result(_base(3))  # every choice alike: the first (dense) is the best, and the default stays
    assert tie.stayed_with_default and tie.summary().endswith(
        "the best on these pseudo-queries, dense (0.00), ties with it"
    )
    per_query = _base(3)
    per_query["dense"], per_query["bm25"] = [1.0] * 3, [1.0] * 3
    level = _result(per_query)
    assert level.choice.name == "dense" and "the next, bm25 (100.00), ties with it: either would do as well" in (
        level.summary()
    )
    per_query = _base(1)
    per_query["dense"] = [1.0]
    one = _result(per_query)
    assert math.isinf(one.margin.standard_error) and "on one pseudo-query: no standard error" in one.summary()
    assert one.stayed_with_default  # one query is never a lead beyond a standard error


def test_no_pseudo_query_is_said_with_what_each_kind_needs_and_how_many_documents_have_it():
    one = [Document("a", "A title", "a short text")]  # the mixed coin takes a span: the text is too short
    with pytest.raises(ValueError) as mixed:
        held_out_queries(one, kind="mixed")
    said = str(mixed.value)
    assert "none of the 1 documents gave a pseudo-query (--auto-query-kind mixed)" in said
    assert "a title needs a document with both a title and a text, which 1 of them have" in said
    assert f"a span needs a text of at least {MIN_WORDS} words, which 0 of them have" in said
    assert "--auto-query-kind title takes their titles" in said and "needs titles or" not in said
    assert held_out_queries(one, kind="title").queries == {"auto-0": "A title"}  # which it does
    with pytest.raises(ValueError, match="a title needs a document with both a title and a text, which 0 of them"):
        held_out_queries([Document("a", "A title only", "")], kind="title")
    with pytest.raises(ValueError, match=f"a span needs a text of at least {MIN_WORDS} words, which 0 of them"):
        held_out_queries(one, kind="span")


def test_a_record_read_from_a_model_folder_and_what_it_says_where_the_corpus_lacks_its_documents(tmp_path):
    from sbert.search.auto import AdaptRecord

    assert AdaptRecord.of(tmp_path) is None  # no adapt.json: not an adapted model
    (tmp_path / "adapt.json").write_text(json.dumps({"held_out": ["x1", "x2", "x3"], "hold_out": 3}))
    record = AdaptRecord.of(tmp_path)
    assert record.held_out == {"x1", "x2", "x3"} and record.hold_out == 3
    elsewhere = record.draw_from(_documents(20))  # another corpus: drawn from all of it, and said
    assert not elsewhere.restricts and elsewhere.only == frozenset()
    assert f"none of the 3 documents {tmp_path / 'adapt.json'} names as held out of training is here" in (
        elsewhere.words()
    )
    short = [Document("x1", "", "too short to give a span"), *_documents(5)]
    with pytest.raises(ValueError, match=r"none of the 1 documents the model.s adapt\.json held out gave a pseudo"):
        held_out_queries(short, kind="span", only=record.draw_from(short).only)
