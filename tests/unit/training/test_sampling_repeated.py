"""The no-duplicates sampler on repeated texts: linear, not a scan of every waiting row per batch; the same
batches as the plain rule it implements; and sbert adapt refusing, before training, a corpus whose pairs
give every batch one row (nothing for in-batch negatives to learn)."""

from __future__ import annotations

import json
import random

import pytest
from click.testing import CliRunner
from conftest import make_tiny_encoder

from sbert.cli import main
from sbert.data.examples import RetrievalExample
from sbert.training.sampling import any_fit_together, no_duplicate_batches


def _by_the_rule(order, texts, batch_size):
    """The rule, as written: fill each batch in turn from the rows not placed yet, in order, taking each that
    shares no text with the batch so far (a row offered to a batch and refused counts as moved)."""
    left, batches, moved = list(order), [], set()
    while left:
        batch, seen, rest = [], set(), []
        for row in left:
            own = set(texts(row))
            if len(batch) < batch_size and seen.isdisjoint(own):
                batch.append(row)
                seen |= own
            else:
                if len(batch) < batch_size:
                    moved.add(row)
                rest.append(row)
        batches.append(batch)
        left = rest
    return batches, len(moved)


def test_the_batches_are_those_of_the_rule_on_random_rows_sharing_texts():
    rng = random.Random(0)
    for _ in range(300):
        rows = [tuple(f"t{rng.randrange(12)}" for _ in range(rng.randint(0, 3))) for _ in range(rng.randint(0, 40))]
        order, size = rng.sample(range(len(rows)), len(rows)), rng.randint(1, 6)
        cut = no_duplicate_batches(order, rows.__getitem__, size)
        assert ([b.tolist() for b in cut.batches], cut.moved) == _by_the_rule(order, rows.__getitem__, size)


def test_ten_thousand_copies_of_one_text_ask_each_row_its_texts_once():
    asked = []

    def texts(row: int) -> tuple[str, str]:
        asked.append(row)
        if len(asked) > 10_000:  # a scan of the waiting rows per batch asks them again: ~50 million times
            raise AssertionError(f"row {row}'s texts asked again after {len(asked):,} calls")
        return ("the same title", "the same text")

    cut = no_duplicate_batches(range(10_000), texts, 32)
    assert sorted(asked) == list(range(10_000))
    assert len(cut.batches) == 10_000 and all(len(b) == 1 for b in cut.batches) and cut.moved == 9_999


def test_200_000_copies_are_cut_where_a_quadratic_sampler_could_not_be():
    # 2 x 10^10 row offers for a scan per batch; each row goes straight to its batch here
    cut = no_duplicate_batches(range(200_000), lambda r: ("one text",), 32)
    assert len(cut.batches) == 200_000 and cut.batches[-1].tolist() == [199_999]


def test_whether_any_two_rows_can_share_a_batch():
    assert not any_fit_together([RetrievalExample("same title", "same text")] * 3)
    assert not any_fit_together([RetrievalExample("one title", "text a"), RetrievalExample("one title", "text b")])
    assert any_fit_together([RetrievalExample("a", "x"), RetrievalExample("a", "y"), RetrievalExample("b", "z")])
    assert not any_fit_together([]) and not any_fit_together([RetrievalExample("a", "b")])


def _corpus(tmp_path, documents) -> str:
    path = tmp_path / "docs.jsonl"
    path.write_text(
        "".join(json.dumps({"id": str(i), "title": t, "text": x}) + "\n" for i, (t, x) in enumerate(documents))
    )
    return str(path)


@pytest.mark.slow
def test_adapt_refuses_a_corpus_that_gives_nothing_to_learn_before_training(tmp_path):
    make_tiny_encoder().save(tmp_path / "base")
    runner = CliRunner()

    def adapt(corpus: str, out: str):
        command = ["adapt", str(tmp_path / "base"), "--corpus", corpus, "--out", str(tmp_path / out)]
        return runner.invoke(main, [*command, "--steps", "2", "--device", "cpu", "--no-progress"])

    copies = adapt(_corpus(tmp_path, [("printer crashes", "the printer crashes when i print a page")] * 10_000), "c")
    assert copies.exit_code != 0, copies.output
    assert "10,000 documents (1 distinct); adapt needs at least 2 distinct documents" in copies.output
    assert not (tmp_path / "c").exists() and not (tmp_path / "c.train").exists()  # refused before any work
    # two distinct documents, one title: every two title pairs share it, so every batch would hold one pair
    one_title = [("printer crashes", f"report number {i} of a crash when printing a page") for i in range(50)]
    refused = adapt(_corpus(tmp_path, one_title), "t")
    assert refused.exit_code != 0, refused.output
    assert "nothing to learn: every two of the 45 pseudo-queries of method 'title' share a text" in refused.output
    assert not (tmp_path / "t").exists() and not (tmp_path / "t.train").exists()
