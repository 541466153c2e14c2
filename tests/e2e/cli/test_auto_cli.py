"""--auto on the command line: index build records the choice and search applies it; eval --auto scores it."""

from __future__ import annotations

import gzip
import json
import random

import pytest
from click.testing import CliRunner

from sbert.cli import main


def _rare_word_documents(n: int = 30) -> list[dict]:
    """Each title is a made-up code found only in its own body: exact words find them."""
    rng = random.Random(0)
    common = ["the", "a", "printer", "crash", "calc", "sheet", "font", "page", "save", "load", "when", "with"]
    docs = []
    for i in range(n):
        code = f"zx{i}q{rng.randrange(10**6)}"
        docs.append(
            {
                "id": str(i),
                "title": code,
                "text": " ".join([*rng.choices(common, k=12), code, *rng.choices(common, k=12)]),
            }
        )
    return docs


@pytest.mark.slow
def test_index_build_auto_records_its_choice_and_search_applies_it(tmp_path):
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in _rare_word_documents()))
    runner = CliRunner()
    built = runner.invoke(
        main, ["index", "build", str(corpus), "--out", str(tmp_path / "ix"), "--auto", "--auto-query-kind", "title"]
    )
    assert built.exit_code == 0, built.output
    assert "auto: chose" in built.output and "pseudo-queries held out from the corpus" in built.output
    manifest = json.loads((tmp_path / "ix" / "manifest.json").read_text())
    recorded = manifest["search"]
    assert recorded["hybrid"] is True and manifest.get("lexical")  # BM25 was built because it was chosen
    assert recorded["auto"]["pseudo_queries"] == 30 and recorded["auto"]["kinds"] == {"title": 30, "span": 0}
    assert recorded["auto"]["drawn"] == "title"
    found = runner.invoke(
        main, ["search", str(tmp_path / "ix"), _rare_word_documents()[7]["title"], "-k", "1", "--json"]
    )
    assert found.exit_code == 0, found.output
    assert json.loads(found.stdout)[0]["hits"][0]["id"] == "7"  # the recorded hybrid search finds the code
    mixed = runner.invoke(main, ["index", "build", str(corpus), "--out", str(tmp_path / "mixed"), "--auto"])
    assert mixed.exit_code == 0, mixed.output  # the default draws titles and spans, one or the other a document
    drawn = json.loads((tmp_path / "mixed" / "manifest.json").read_text())["search"]["auto"]
    assert drawn["drawn"] == "mixed" and drawn["kinds"]["title"] > 0 and drawn["kinds"]["span"] > 0
    assert drawn["kinds"]["title"] + drawn["kinds"]["span"] == 30
    for flag in ("--bm25", "--no-bm25"):
        both = runner.invoke(main, ["index", "build", str(corpus), "--out", str(tmp_path / "b"), "--auto", flag])
        assert both.exit_code == 2 and "--auto chooses --chunk and --bm25/--no-bm25 itself" in both.output


@pytest.mark.slow
def test_eval_auto_chooses_on_the_corpus_and_scores_the_choice(tmp_path):
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    docs = _rare_word_documents()
    with gzip.open(folder / "corpus.jsonl.gz", "wt") as handle:
        handle.writelines(json.dumps({"_id": d["id"], "title": d["title"], "text": d["text"]}) + "\n" for d in docs)
    queries = {f"q{i}": docs[i]["title"] for i in range(0, 30, 3)}
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in queries.items()))
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{int(q[1:])}\t1\n" for q in queries)
    )
    result = CliRunner().invoke(
        main, ["eval", "default", "--retrieval", str(folder), "--auto", "--json", str(tmp_path / "s.json")]
    )
    assert result.exit_code == 0, result.output
    assert "auto: chose" in result.output
    scores = json.loads((tmp_path / "s.json").read_text())
    assert json.dumps(scores).count("ndcg@10") >= 1
    bad = CliRunner().invoke(main, ["eval", "default", "--retrieval", str(folder), "--auto", "--hybrid"])
    assert bad.exit_code != 0 and "auto chooses" in bad.output
