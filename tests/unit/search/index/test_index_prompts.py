"""An index records the document prompt its rows were embedded with: ``index add`` uses it, and refuses a
``--prompt``/``--prompt-name`` that would embed new texts otherwise; ``search`` refuses the document prompt
for queries where the model has another query prompt. A tiny model with prompts, in memory and a folder."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import make_tiny_encoder

from sbert.search.retrieve import add_texts, build_index, document_prompt, search_texts

PROMPTS = {"query": "query: ", "document": "passage: ", "other": "other: "}
TEXTS = ["the cat sat on the mat", "dogs bark at night", "stocks fell sharply"]


@pytest.fixture(scope="module")
def prompted():
    model = make_tiny_encoder(dropout=0.0)
    model.prompts = PROMPTS
    return model.eval()


@pytest.mark.parametrize("where", ["memory", "folder"])
def test_add_uses_the_recorded_document_prompt_and_refuses_another(prompted, tmp_path, where):
    location = None if where == "memory" else tmp_path / "ix"
    index = build_index(location, prompted, TEXTS[:2], model="tiny", prompt_name="other")
    assert document_prompt(index) == "other: "
    add_texts(index, prompted, TEXTS[2:])  # no prompt given: the index's
    expected = prompted.encode(TEXTS[2], prompt="other: ")
    np.testing.assert_allclose(index.vectors[2], expected / np.linalg.norm(expected), atol=1e-5)
    for options in ({"prompt_name": "document"}, {"prompt": "x: "}, {"prompt": ""}):
        with pytest.raises(ValueError, match=r"built with the document prompt 'other: '.*leave out prompt_name"):
            add_texts(index, prompted, ["more"], **options)
    add_texts(index, prompted, ["same again"], prompt="other: ")  # the same prompt is no conflict
    assert len(index) == 4


def test_search_refuses_the_document_prompt_for_queries(prompted):
    index = build_index(None, prompted, TEXTS, model="tiny")
    assert document_prompt(index) == "passage: "
    with pytest.raises(ValueError, match=r"document prompt index .* queries take the query prompt \('query: '\)"):
        search_texts(index, prompted, ["cat"], prompt_name="document")
    assert search_texts(index, prompted, ["cat"], prompt="x: ")[0]  # another prompt is the user's choice


def test_chunked_index_add_refuses_another_prompt(prompted):
    from sbert.windows import Chunking

    index = build_index(None, prompted, TEXTS, model="tiny", chunking=Chunking(overlap=2))
    assert document_prompt(index) == "passage: "
    with pytest.raises(ValueError, match="built with the document prompt 'passage: '"):
        add_texts(index, prompted, ["more"], prompt_name="other")


def test_cli_index_add_refuses_a_conflicting_prompt(prompted, tmp_path):
    from click.testing import CliRunner

    from sbert.cli import main

    folder = prompted.save(tmp_path / "model")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    run = CliRunner().invoke
    built = run(main, ["index", "build", str(corpus), "--out", str(tmp_path / "ix"), "--model", str(folder)])
    assert built.exit_code == 0, built.output
    assert json.loads((tmp_path / "ix" / "manifest.json").read_text())["document_prompt"] == "passage: "
    refused = run(main, ["index", "add", str(tmp_path / "ix"), str(corpus), "--prompt", "x: "])
    assert refused.exit_code == 1
    assert "built with the document prompt 'passage: '" in refused.output and "--prompt" in refused.output
