"""--auto: the way of searching chosen on pseudo-queries held out from the corpus, never on judged queries."""

from __future__ import annotations

import random

import pytest
from conftest import count_forward_rows, make_tiny_encoder

import sbert
from sbert.data.beir import Document
from sbert.search.auto import CHOICES, SPAN_WORDS, choose_search, held_out_queries


def test_held_out_queries_take_titles_or_spans_out_of_their_documents():
    words = [f"w{i}" for i in range(40)]
    docs = [Document("a", "printer crash", "the printer crashes"), Document("b", "", " ".join(words))]
    held = held_out_queries(docs, queries=5, seed=1, kind="title")
    assert held.relevant == {"auto-0": "a", "auto-1": "b"}
    assert held.queries["auto-0"] == "printer crash"
    span = held.queries["auto-1"].split()
    assert len(span) == SPAN_WORDS and " ".join(span) in " ".join(words)
    by_id = {d.id: d for d in held.documents}
    assert by_id["a"].joined() == "the printer crashes"  # indexed without its title
    assert by_id["b"].text.split() == [w for w in words if w not in span]  # and without the span
    assert held_out_queries(docs, queries=5, seed=1, kind="title") == held


def test_span_queries_are_cut_from_titled_documents_too_and_mixed_draws_both():
    words = [f"w{i}" for i in range(40)]
    docs = [Document(str(i), f"title {i}", " ".join(words)) for i in range(40)]
    held = held_out_queries(docs, queries=40, seed=3, kind="span")
    for query, doc_id in held.relevant.items():
        span, document = held.queries[query].split(), next(d for d in held.documents if d.id == doc_id)
        assert len(span) == SPAN_WORDS and document.title == f"title {doc_id}"  # the title stays; the span goes
        assert document.text.split() == [w for w in words if w not in span]
    mixed = held_out_queries(docs, queries=40, seed=3, kind="mixed")
    titles = [q for q, d in mixed.relevant.items() if mixed.queries[q] == f"title {d}"]
    assert 10 < len(titles) < 30  # a fair coin over 40 documents
    assert held_out_queries(docs, queries=40, seed=3, kind="mixed") == mixed  # the seed decides the coin
    with pytest.raises(ValueError, match="unknown kind of pseudo-query 'claims': expected one of mixed, title"):
        held_out_queries(docs, kind="claims")


def test_a_corpus_that_gives_no_pseudo_query_is_refused():
    with pytest.raises(ValueError, match="a span needs a text of at least 24 words, which 0 of them have"):
        held_out_queries([Document("a", "", "too short")])


def _rare_word_corpus() -> list[Document]:
    """Each title is a made-up word found only in its own body: BM25 finds every one, a random model none."""
    rng = random.Random(0)
    common = ["the", "a", "printer", "crash", "calc", "sheet", "font", "page", "save", "load", "when", "with"]
    docs = []
    for i in range(30):
        code = f"zx{i}q{rng.randrange(10**6)}"
        body = " ".join([*rng.choices(common, k=12), code, *rng.choices(common, k=12)])
        docs.append(Document(str(i), code, body))
    return docs


@pytest.mark.slow
def test_bm25_wins_where_only_exact_words_find_the_documents():
    whole = tuple(c for c in CHOICES if not c.chunk)  # the tiny model's 32 tokens leave no room for windows
    result = choose_search(make_tiny_encoder(), _rare_word_corpus(), queries=30, choices=whole, kind="title")
    assert result.scores["bm25"] == pytest.approx(100.0)
    assert result.scores["dense"] < 60
    assert result.choice.name == "bm25"  # the first choice at the best score
    record = result.record()
    assert record["choice"]["alpha"] == 0.0 and record["choice"]["hybrid"] is True
    assert set(record["ndcg@10"]) == {c.name for c in whole} and record["kinds"] == {"title": 30, "span": 0}
    assert record["drawn"] == "title"
    assert "chose bm25" in result.summary()
    # the runner-up, hybrid at dense weight 0.3, finds every document too: a tie, said to be one
    assert record["runner_up"] == {"name": "hybrid weighted 0.3", "gap": 0.0, "standard_error": 0.0}
    assert "the next, hybrid weighted 0.3 (100.00), ties with it" in result.summary()
    # and it is ahead of the default way of searching (weighted 0.7) beyond noise: the default does not stay
    assert record["over_default"]["name"] == "hybrid weighted 0.7" and record["over_default"]["gap"] > 0
    assert record["best"] == "bm25" and record["stayed_with_default"] is False
    assert "the default, hybrid weighted 0.7 (86.35), is behind by 13.65" in result.summary()


@pytest.mark.slow
def test_dense_wins_where_titles_share_no_word_with_their_documents():
    pairs = [
        ("automobile", "my car will not start in the morning and the engine makes noise"),
        ("feline", "the cat sleeps on the sofa all day long"),
        ("physician", "the doctor examined the patient at the hospital"),
        ("canine", "our dog barks at the mailman every afternoon"),
        ("beverage", "i drink hot coffee and tea every morning"),
        ("currency", "dollars and euros are exchanged at the bank"),
    ]
    docs = [Document(str(i), title, body) for i, (title, body) in enumerate(pairs)]
    result = choose_search(sbert.load("default", device="cpu"), docs, queries=6, choices=CHOICES[:2], kind="title")
    assert result.scores["dense"] == pytest.approx(100.0) and result.scores["bm25"] < 100
    assert result.choice.name == "dense"


def test_the_margin_over_the_runner_up_is_the_mean_paired_difference_and_its_standard_error():
    from sbert.search.auto import AutoResult, paired_margin

    margin = paired_margin("b", [1.0, 1.0, 0.5], [0.5, 1.0, 0.5])  # differences 50, 0, 0 (x 100)
    assert margin.gap == pytest.approx(50 / 3)
    assert margin.standard_error == pytest.approx(((2 * (50 / 3) ** 2 + (100 / 3) ** 2) / 2 / 3) ** 0.5)  # 16.67
    assert margin.within_noise  # 16.67 < 2 x 16.67
    clear = paired_margin("b", [1.0] * 4, [0.0] * 4)
    assert (clear.gap, clear.standard_error, clear.within_noise) == (100.0, 0.0, False)
    assert paired_margin("b", [1.0, 0.5], [1.0, 0.5]).within_noise  # a tie
    assert paired_margin("b", [1.0], [0.0]).within_noise  # one query: no evidence of a gap
    result = AutoResult(CHOICES[0], {"dense": 96.46, "bm25": 96.44}, 200, 0, margin=margin)
    assert "16.67, 1.0 standard errors (each 16.67), not more than two, within noise" in result.summary()
    assert result.record()["runner_up"]["name"] == "b"


def test_the_default_way_of_searching_stays_unless_the_best_is_ahead_of_it_beyond_noise():
    from sbert.search.auto import AutoResult, decide, default_choice

    default = default_choice(CHOICES)
    assert default.name == "hybrid weighted 0.7" and not default.chunk  # what a user who passes no option gets
    per_query = {c.name: [0.5, 0.5, 0.5, 0.5] for c in CHOICES}
    per_query["hybrid weighted 0.5"] = [1.0, 1.0, 1.0, 0.5]
    per_query[default.name] = [1.0, 1.0, 0.5, 0.5]
    # best over the default: differences 0, 0, 50, 0 (x 100): gap 12.5, standard deviation 25, error 12.5:
    kept = decide(CHOICES, per_query)  # not more than one standard error ahead (KEEP_DEFAULT_WITHIN)
    assert kept["best"].name == "hybrid weighted 0.5" and kept["choice"] == default
    assert kept["over_default"].gap == pytest.approx(12.5) and kept["over_default"].standard_error == pytest.approx(
        12.5
    )
    assert decide(CHOICES, per_query, keep_default=False)["choice"].name == "hybrid weighted 0.5"
    result = AutoResult(scores={c: 100 * sum(v) / 4 for c, v in per_query.items()}, queries=4, seed=0, **kept)
    assert result.stayed_with_default and result.record()["stayed_with_default"] is True
    assert result.record()["best"] == "hybrid weighted 0.5" and result.record()["choice"]["alpha"] == 0.7
    assert "kept because the best on these pseudo-queries, hybrid weighted 0.5 (87.50)" in result.summary()
    assert "ahead of it by 12.50, 1.0 standard errors (each 12.50), not more than the one standard error" in (
        result.summary()
    )
    per_query["hybrid weighted 0.5"] = [1.0, 1.0, 1.0, 1.0]
    per_query[default.name] = [1.0, 1.0, 0.0, 0.5]  # differences 0, 0, 100, 50: gap 37.5, error 23.9
    assert decide(CHOICES, per_query)["choice"].name == "hybrid weighted 0.5"  # more than one error ahead
    without = tuple(c for c in CHOICES if c != default)  # choices without the default: the best, no guard
    leaves = decide(without, per_query)
    assert leaves["choice"].name == "hybrid weighted 0.5" and leaves["over_default"] is None
    per_query = {c.name: [0.0, 1.0] for c in CHOICES}  # a tie everywhere: the first choice is the best,
    tie = decide(CHOICES, per_query)  # the default stays
    assert tie["best"].name == "dense" and tie["choice"] == default


def test_auto_embeds_each_document_it_did_not_change_once_and_indexes_as_without_reuse():
    from sbert.evaluation.retrievers import IndexRetriever, RetrievalSettings

    model = sbert.load("default", device="cpu")
    docs = _rare_word_corpus()  # 30 short documents: each is one window
    run = model._runner.sentences
    rows = count_forward_rows(model)
    auto = RetrievalSettings(auto=True, auto_queries=10).retriever()
    auto.index(model, docs)
    # choosing: the 30 documents (10 without their titles), their windows (looked up), the 10 titles (looked
    # up when searched again); the index: only the 10 documents held out, now with their titles
    assert sum(rows) == 30 + 10 + 10
    assert model._memo is None
    model._runner.sentences = run
    plain = IndexRetriever(auto.chosen.settings)
    plain.index(model, docs)
    queries = [d.title for d in docs[:5]] + ["printer crash when saving"]
    for got, expected in zip(auto.search(model, queries, 5), plain.search(model, queries, 5), strict=True):
        assert [hit[0] for hit in got] == [hit[0] for hit in expected]
        assert [hit[1] for hit in got] == pytest.approx([hit[1] for hit in expected], abs=1e-5)
