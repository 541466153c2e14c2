"""Prompts as sentence-transformers stores them: read from the folder, applied as sentence-transformers 6.2 applies
them (encode, encode_query, encode_document, the default prompt, pooling with include_prompt=false), written back."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

import sbert
from sbert.errors import ModelFormatError
from sbert.prompts import Prompts, prompt_length

st = pytest.importorskip("sentence_transformers")

PROMPTS = {"query": "query: ", "passage": "passage: ", "classify": "classify this: "}
TEXTS = ["A man is playing a flute.", "Two dogs run through a field of tall grass.", "Stocks fell sharply."]
CONFIG = "config_sentence_transformers.json"


def _config(folder: Path) -> dict:
    return json.loads((folder / CONFIG).read_text(encoding="utf-8"))


def _with_config(source: Path, target: Path, **changes) -> Path:
    """A copy of the model folder ``source`` whose config_sentence_transformers.json has ``changes``."""
    folder = Path(shutil.copytree(source, target))
    (folder / CONFIG).write_text(json.dumps(_config(folder) | changes), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def prompted(model, tmp_path_factory) -> Path:
    """The default model saved by sbert, then given three prompts and a default one."""
    base = model.save(tmp_path_factory.mktemp("prompts") / "base")
    return _with_config(base, base.parent / "prompted", prompts=PROMPTS, default_prompt_name="classify")


@pytest.fixture(scope="module")
def pair(prompted):
    """(sbert, sentence-transformers) on the prompted folder."""
    return sbert.load(prompted, device="cpu"), st.SentenceTransformer(str(prompted), device="cpu")


# -- choosing the prompt (no model) --------------------------------------------------------------------------
def test_the_prompt_is_chosen_as_sentence_transformers_chooses_it():
    prompts = Prompts(PROMPTS, "classify")
    assert prompts.resolve() == "classify this: "  # the default
    assert prompts.resolve(prompt_name="query") == "query: "
    assert prompts.resolve(prompt="") == "" and prompts.resolve(prompt="x ", prompt_name="query") == "x "
    assert prompts.resolve(prompt_name="document") == ""  # every model has "query" and "document"
    assert list(prompts.available) == ["query", "document", "passage", "classify"]
    assert prompts.task_name("query") == "query" and prompts.task_name("document") == "document"
    assert Prompts().resolve() is None and Prompts({"p": "p: "}).resolve() is None
    with pytest.raises(ValueError, match=r"prompt_name 'nope' is not one of .*'query', 'document', 'passage'"):
        prompts.resolve(prompt_name="nope")


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"prompts": ["query: "]}, r"'prompts' must be an object of name -> prompt text, got list"),
        ({"prompts": {"query": 3}}, r"'prompts' must map names to strings; 'query' -> 3 is not"),
        ({"prompts": {"q": "q: "}, "default_prompt_name": "p"}, r"default_prompt_name 'p' is not one of .*'q'"),
    ],
)
def test_malformed_prompts_are_refused(settings, message):
    with pytest.raises(ValueError, match=message):
        Prompts.from_settings(settings)


def test_the_prompt_length_leaves_out_a_trailing_special_token():
    assert prompt_length([101, 23032, 1024, 102], {101, 102}) == 3  # [CLS] query : -- not [SEP]
    assert prompt_length([5, 6], {101, 102}) == 2


# -- equal to sentence-transformers --------------------------------------------------------------------------
def test_encode_with_prompts_equals_sentence_transformers(pair):
    ours, theirs = pair
    assert ours.prompts == PROMPTS and ours.default_prompt_name == "classify"
    cases = [
        (ours.encode(TEXTS), theirs.encode(TEXTS)),  # the default prompt
        (ours.encode(TEXTS, prompt_name="passage"), theirs.encode(TEXTS, prompt_name="passage")),
        (ours.encode(TEXTS, prompt="search: "), theirs.encode(TEXTS, prompt="search: ")),
        (ours.encode(TEXTS, prompt=""), theirs.encode(TEXTS, prompt="")),
        (ours.encode_query(TEXTS), theirs.encode_query(TEXTS)),
        (ours.encode_document(TEXTS), theirs.encode_document(TEXTS)),
        (ours.encode_document(TEXTS, prompt_name="passage"), theirs.encode_document(TEXTS, prompt_name="passage")),
    ]
    for k, (a, b) in enumerate(cases):
        np.testing.assert_allclose(a, b, atol=1e-5, err_msg=f"case {k}")
    plain, query = ours.encode(TEXTS, prompt=""), ours.encode_query(TEXTS)
    assert np.abs(plain - query).max() > 1e-2 and np.abs(plain - cases[0][0]).max() > 1e-2  # prompts matter
    np.testing.assert_allclose(ours.encode_document(TEXTS), plain, atol=1e-6)  # no "document" prompt: none


def test_pooling_without_the_prompt_equals_sentence_transformers(prompted, tmp_path):
    folder = Path(shutil.copytree(prompted, tmp_path / "excluded"))
    pooling = next(folder.glob("*_Pooling")) / "config.json"
    pooling.write_text(json.dumps(json.loads(pooling.read_text()) | {"include_prompt": False}))
    ours, theirs = sbert.load(folder, device="cpu"), st.SentenceTransformer(str(folder), device="cpu")
    assert theirs[1].include_prompt is False
    expected = theirs.encode_query(TEXTS)
    np.testing.assert_allclose(ours.encode_query(TEXTS), expected, atol=1e-5)
    np.testing.assert_allclose(ours.encode_query(TEXTS, packing=True), expected, atol=1e-5)
    np.testing.assert_allclose(ours.encode_tokenized(ours.tokenize(TEXTS, "query")), expected, atol=1e-5)
    included = sbert.load(prompted, device="cpu").encode_query(TEXTS)
    assert np.abs(included - expected).max() > 1e-3  # leaving the prompt out changes the vectors


def test_tokenize_applies_the_prompt_as_encode_does(pair):
    ours, _ = pair
    tokens = ours.tokenize(TEXTS, prompt_name="query")
    assert tokens.ids == ours.transformer.tokenize(["query: " + t for t in TEXTS])[0]
    assert tokens.prompt_lengths is None  # mean pooling over every token: nothing to leave out
    np.testing.assert_allclose(ours.encode_tokenized(tokens), ours.encode_query(TEXTS), atol=1e-6)
    assert ours.tokenize(TEXTS).ids == ours.transformer.tokenize(["classify this: " + t for t in TEXTS])[0]


def test_the_prompt_counts_towards_the_maximum_length(pair):
    ours, theirs = pair
    text = " ".join(["word"] * 10)  # 12 tokens with [CLS] and [SEP]; 15 with "query: "
    ours.max_seq_length = theirs.max_seq_length = 13
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            ours.encode([text], prompt="")
        with pytest.warns(UserWarning, match=r"1 of 1 texts .* max_seq_length=13 tokens \(prompt 'query: ' included"):
            ours.encode_query([text])
        with pytest.raises(ValueError, match=r"texts\[0\] is longer .* \(prompt 'query: ' included\)"):
            ours.encode_query([text], on_truncation="error")
        np.testing.assert_allclose(
            ours.encode_query([text], on_truncation="ignore"), theirs.encode_query([text]), atol=1e-5
        )
    finally:
        ours.max_seq_length = theirs.max_seq_length = 256


# -- errors --------------------------------------------------------------------------------------------------
def test_an_unknown_prompt_name_is_an_error_naming_the_prompts(pair):
    ours, _ = pair
    with pytest.raises(ValueError, match=r"prompt_name 'qeury' is not one of .*\['query', 'document', 'passage'"):
        ours.encode(TEXTS, prompt_name="qeury")
    with pytest.raises(ValueError, match=r"prompt_name 'x'"):
        ours.tokenize(TEXTS, prompt_name="x")
    with pytest.warns(UserWarning, match=r"both prompt and prompt_name='query' were given") as caught:
        both = ours.encode(TEXTS[:1], prompt="search: ", prompt_name="query")
    assert caught[0].filename == __file__
    np.testing.assert_allclose(both, ours.encode(TEXTS[:1], prompt="search: "), atol=1e-6)
    with pytest.raises(ValueError, match=r"default_prompt_name 'gone' is not one of"):
        ours.default_prompt_name = "gone"
    assert ours.default_prompt_name == "classify"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"prompts": {"query": None}}, r"'query' -> None is not"),
        ({"prompts": {"query": "q: "}, "default_prompt_name": "passage"}, r"default_prompt_name 'passage'"),
    ],
)
def test_a_bad_prompt_config_names_the_file(prompted, tmp_path, changes, message):
    folder = _with_config(prompted, tmp_path / "bad", **changes)
    with pytest.raises(ModelFormatError, match=rf"{CONFIG}: .*{message}"):
        sbert.load(folder, device="cpu")


# -- written back ----------------------------------------------------------------------------------------------
def test_prompts_survive_save_load_save_and_sentence_transformers_reads_them(pair, tmp_path):
    ours, theirs = pair
    first = ours.save(tmp_path / "first")
    second = sbert.load(first, device="cpu").save(tmp_path / "second")
    for folder in (first, second):
        assert _config(folder)["prompts"] == PROMPTS and _config(folder)["default_prompt_name"] == "classify"
    reread = st.SentenceTransformer(str(second), device="cpu")
    assert reread.prompts == theirs.prompts and reread.default_prompt_name == "classify"
    np.testing.assert_allclose(reread.encode(TEXTS), ours.encode(TEXTS), atol=1e-5)


def test_prompts_saved_by_sentence_transformers_are_read(model, tmp_path):
    theirs = st.SentenceTransformer(str(model.path), device="cpu", prompts={"document": "doc: "})
    theirs.save(str(tmp_path / "st"))
    ours = sbert.load(tmp_path / "st", device="cpu")
    assert ours.prompts == {"query": "", "document": "doc: "} and ours.default_prompt_name is None
    np.testing.assert_allclose(ours.encode_document(TEXTS), theirs.encode_document(TEXTS), atol=1e-5)
    np.testing.assert_allclose(ours.encode(TEXTS), theirs.encode(TEXTS), atol=1e-5)
    ours.save(tmp_path / "back")
    assert _config(tmp_path / "back")["prompts"] == _config(tmp_path / "st")["prompts"]


def test_a_model_without_prompts_saves_empty_ones(model, tmp_path):
    config = _config(model.save(tmp_path / "plain"))
    assert config["prompts"] == {} and config["default_prompt_name"] is None
    assert model.prompts == {} and model.encode_query(TEXTS[:1]).shape == (1, 384)


# -- the command line ------------------------------------------------------------------------------------------
def _cli(*args: object):
    from click.testing import CliRunner

    from sbert.cli import main

    return CliRunner().invoke(main, [str(a) for a in args])


def test_cli_encode_takes_a_prompt_and_records_it(pair, prompted, tmp_path):
    ours, _ = pair
    source = tmp_path / "in.txt"
    source.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    for args, expected, recorded in [
        ((), ours.encode(TEXTS), "classify this: "),  # the default prompt
        (("--prompt-name", "query"), ours.encode_query(TEXTS), "query: "),
        (("--prompt", ""), ours.encode(TEXTS, prompt=""), None),
    ]:
        out = tmp_path / "emb.npy"
        result = _cli("encode", source, "--model", prompted, "--out", out, *args)
        assert result.exit_code == 0, result.output
        np.testing.assert_allclose(np.load(out), expected, atol=1e-6)
        assert json.loads((tmp_path / "emb.npy.meta.json").read_text())["prompt"] == recorded
    result = _cli("encode", source, "--model", prompted, "--prompt-name", "qeury")
    assert result.exit_code == 1 and "prompt_name 'qeury' is not one of" in result.output
    assert "'passage'" in result.output


def test_cli_info_shows_the_prompts(prompted):
    result = _cli("info", prompted)
    assert result.exit_code == 0, result.output
    assert "prompts:\n  query: 'query: '\n  passage: 'passage: '" in result.output
    assert "default_prompt_name: classify" in result.output
    assert json.loads(_cli("info", prompted, "--json").output)["prompts"] == PROMPTS


def test_cli_index_embeds_documents_and_search_queries_with_their_prompts(pair, prompted, tmp_path):
    ours, _ = pair
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    folder = tmp_path / "index"
    result = _cli("index", "build", corpus, "--out", folder, "--model", prompted, "--prompt-name", "passage")
    assert result.exit_code == 0, result.output
    query = "someone plays music"
    for args, vector in [((), ours.encode_query(query)), (("--prompt", "x: "), ours.encode(query, prompt="x: "))]:
        result = _cli("search", folder, query, "--json", "-k", "3", "--dense", *args)  # cosines, not fused
        assert result.exit_code == 0, result.output
        hits = {h["text"]: h["score"] for h in json.loads(result.output)[0]["hits"]}
        documents = ours.encode(TEXTS, prompt_name="passage")
        expected = documents @ vector / np.linalg.norm(documents, axis=1) / np.linalg.norm(vector)
        assert [hits[t] for t in TEXTS] == pytest.approx(expected.tolist(), abs=1e-5)


@pytest.mark.parametrize("include_prompt", [True, False])
def test_a_document_in_one_window_is_embedded_as_encode_document_embeds_it(prompted, tmp_path, include_prompt):
    """Chunked documents get the document prompt before every window (left out by a pooling that excludes it)."""
    from sbert.windows import Chunker, encode_documents

    folder = Path(shutil.copytree(prompted, tmp_path / "model"))
    pooling = next(folder.glob("*_Pooling")) / "config.json"
    pooling.write_text(json.dumps(json.loads(pooling.read_text()) | {"include_prompt": include_prompt}))
    model = sbert.load(folder, device="cpu")
    for options in ({}, {"prompt_name": "passage"}, {"prompt": ""}):
        windowed = encode_documents(model, TEXTS, overlap=0, **options)
        assert windowed.doc.tolist() == [0, 1, 2]  # short texts: one window each
        np.testing.assert_allclose(windowed.vectors, model.encode_document(TEXTS, **options), atol=1e-5)
    chunker = Chunker.for_encoder(model)
    with_prompt = chunker.split(TEXTS, prompt="passage: ")
    assert with_prompt.ids[0][1 : 1 + len(chunker.prompt_ids("passage: "))] == chunker.prompt_ids("passage: ")
    limit = chunker.max_window - len(chunker.prompt_ids("passage: "))
    with pytest.raises(ValueError, match=f"window must be from 1 to {limit} tokens"):
        chunker.split(TEXTS, window=limit + 1, prompt="passage: ")
