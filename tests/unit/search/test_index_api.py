"""``sbert.Index`` gives exactly the hits ``sbert index build`` + ``sbert search --json`` give, in memory and in a
folder: whole and chunked texts, dense and hybrid search, ``--auto``; and its own contract (one query -> a list,
several -> lists, save -> open, add, clear errors on bad input)."""

from __future__ import annotations

import json
import random

import pytest
from click.testing import CliRunner

import sbert
from sbert.cli import main
from sbert.errors import IndexExistsError
from sbert.search.api import corpus_of
from sbert.windows import Chunking

TOPICS = {
    "bread": "dough flour yeast oven knead rise crust loaf bake",
    "cats": "cat kitten purr whiskers sleep nap fur paw",
    "markets": "stock shares market price trader fell rose index",
    "printing": "printer page paper toner jam print queue driver",
    "football": "goal match player referee team score pitch league",
    "rain": "rain cloud storm umbrella wet weather forecast flood",
}
FILLER = ["the", "a", "of", "and", "with", "when", "after", "before", "because", "while", "then", "still"]
QUERIES = ["how long does dough rise", "printer paper jam", "the market fell", "kitten asleep on the sofa"]
K = 5
WINDOW = Chunking(window=24, overlap=6)  # `--chunk --window 24 --overlap 6`: several windows for longer texts


def _records(n: int = 30) -> list[dict]:
    """``n`` texts of 12-60 words on six topics, each with an id and a title (a few without one)."""
    rng = random.Random(0)
    names = list(TOPICS)
    records = []
    for i in range(n):
        topic = names[i % len(names)]
        own = TOPICS[topic].split()
        words = [rng.choice(own if rng.random() < 0.6 else FILLER) for _ in range(rng.randint(12, 60))]
        record = {"id": f"d{i}", "text": " ".join(words) + "."}
        if i % 5:
            record["title"] = f"{topic} {rng.choice(TOPICS[topic].split())} {i}"
        records.append(record)
    return records


def _cli(*args: str) -> str:
    ran = CliRunner().invoke(main, list(args))
    assert ran.exit_code == 0, ran.output
    return ran.stdout


def _cli_hits(folder, *flags: str) -> list[list[dict]]:
    found = json.loads(_cli("search", str(folder), *QUERIES, "-k", str(K), "--json", *flags))
    assert [q["query"] for q in found] == QUERIES
    return [q["hits"] for q in found]


def _same(python: list[list[sbert.Hit]], cli: list[list[dict]]) -> None:
    """The same hits, in the same order: every field equal, scores and cosines to 1e-6."""
    assert len(python) == len(cli)
    for ours, theirs in zip(python, cli, strict=True):
        assert [h.id for h in ours] == [h["id"] for h in theirs]
        for hit, other in zip(ours, theirs, strict=True):
            mine = hit.as_json()
            assert {k: v for k, v in mine.items() if k not in ("score", "cosine")} == {
                k: v for k, v in other.items() if k not in ("score", "cosine")
            }
            assert mine["score"] == pytest.approx(other["score"], abs=1e-6)
            assert mine["cosine"] == pytest.approx(other["cosine"], abs=1e-6)


BUILDS = {  # name: (`sbert index build` flags, Index.build keywords)
    "whole": ((), {}),
    "no-bm25": (("--no-bm25",), {"bm25": False}),
    "chunked": (("--chunk", "--window", "24", "--overlap", "6"), {"chunk": WINDOW}),
    "auto": (("--auto",), {"auto": True}),
}
SEARCHES = {"whole": ("--dense", "--hybrid"), "no-bm25": ((),), "chunked": ("--dense", "--hybrid"), "auto": ((),)}


@pytest.fixture(scope="module", autouse=True)
def one_model_load(model):
    """``sbert.load`` of the default model, by the CLI as by ``Index.open``, gives the session's model: loaded
    once (the code under test is everything after loading)."""
    from sbert.model_names import resolve

    load = sbert.load

    def loaded(name="default", **options):
        same = resolve(name).resolve() == model.path.resolve() and options.get("backend", "torch") == "torch"
        return model if same and options.get("precision", "fp32") == "fp32" else load(name, **options)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sbert, "load", loaded)
        yield


@pytest.fixture(scope="module")
def cli_built(tmp_path_factory):
    """Each of ``BUILDS`` built by ``sbert index build`` from one JSON-lines corpus: name -> folder."""
    root = tmp_path_factory.mktemp("cli")
    corpus = root / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in _records()), encoding="utf-8")
    out = {}
    for name, (flags, _) in BUILDS.items():
        _cli("index", "build", str(corpus), "--out", str(root / name), *flags)
        out[name] = root / name
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", list(BUILDS))
def test_index_gives_the_hits_the_cli_gives(name, cli_built, model, tmp_path):
    """In memory and in a folder, each search as `sbert search --json` (--dense, --hybrid, or as --auto recorded)."""
    options = BUILDS[name][1]
    in_memory = sbert.Index.build(_records(), model=model, **options)
    in_folder = sbert.Index.build(_records(), model=model, path=tmp_path / "ix", **options)
    assert in_memory.path is None and in_folder.path == tmp_path / "ix"
    assert len(in_memory) == len(in_folder) == 30 and in_memory.ids == [f"d{i}" for i in range(30)]
    for flags in SEARCHES[name]:
        flags = (flags,) if isinstance(flags, str) else flags
        cli = _cli_hits(cli_built[name], *flags)
        search = {"hybrid": flags[0] == "--hybrid"} if flags else {}
        _same(in_memory.search(QUERIES, k=K, **search), cli)
        _same(in_folder.search(QUERIES, k=K, **search), cli)
        _same(sbert.Index.open(cli_built[name]).search(QUERIES, k=K, **search), cli)
    if name == "auto":  # what --auto chose, recorded the same
        recorded = json.loads((cli_built[name] / "manifest.json").read_text())["search"]
        ours = json.loads((tmp_path / "ix" / "manifest.json").read_text())["search"]
        assert ours == recorded


@pytest.mark.slow
def test_one_query_gives_a_list_several_give_lists_and_save_open_round_trips(model, tmp_path):
    index = sbert.Index.build(_records(), model=model)
    one = index.search(QUERIES[0], k=3)
    several = index.search(QUERIES[:2], k=3)
    assert isinstance(one, list) and all(isinstance(h, sbert.Hit) for h in one) and len(one) == 3
    assert len(several) == 2 and several[0] == one
    top = _records()[int(one[0].id[1:])]
    assert int(one[0].id[1:]) % len(TOPICS) == 0 and one[0].title == top.get("title")  # a text on bread, titled
    saved = index.save(tmp_path / "saved")
    assert saved.path == tmp_path / "saved" and index.path is None
    opened = sbert.Index.open(tmp_path / "saved")
    assert opened.ids == index.ids and opened.dim == index.dim == 384
    for flags in ((), ("--dense",)):  # and `sbert search` reads the saved folder alike
        search = {"hybrid": False} if flags else {}
        _same(opened.search(QUERIES, k=K, **search), _cli_hits(tmp_path / "saved", *flags))
        _same(index.search(QUERIES, k=K, **search), _cli_hits(tmp_path / "saved", *flags))
    with pytest.raises(IndexExistsError):
        index.save(tmp_path / "saved")
    with pytest.raises(ValueError, match="save is for an index in memory"):
        opened.save(tmp_path / "again")


@pytest.mark.slow
@pytest.mark.parametrize("chunk", [None, True])
def test_added_texts_are_found_as_built_ones(model, tmp_path, chunk):
    records = _records()
    whole = sbert.Index.build(records, model=model, chunk=chunk)
    part = sbert.Index.build(records[:24], model=model, chunk=chunk, path=tmp_path / "ix")
    part.add(records[24:])
    assert len(part) == 30 and part.ids == whole.ids
    reopened = sbert.Index.open(tmp_path / "ix")
    reopened.add(["Umbrellas stay wet after the storm."], ids=["new"])
    assert sbert.Index.open(tmp_path / "ix").search("wet umbrella after a storm", k=1)[0].id == "new"
    dense = {"k": K, "hybrid": False}
    for added, built in zip(part.search(QUERIES, **dense), whole.search(QUERIES, **dense), strict=True):
        assert [h.id for h in added] == [h.id for h in built]  # embedded in other batches: cosines to float noise
        assert [h.cosine for h in added] == pytest.approx([h.cosine for h in built], abs=1e-4)


def test_records_are_read_as_a_corpus_file_is():
    ids, titles, texts = corpus_of([{"id": 1, "title": " Bread ", "text": "Dough rises. "}, {"_id": "2", "text": "x"}])
    assert (ids, titles, texts) == (["1", "2"], ["Bread", None], ["Dough rises. ", "x"])
    assert corpus_of(["a", "b"], titles=["T", ""]) == (None, ["T", None], ["a", "b"])
    assert corpus_of(["a", "b"], ids=["x", "y"]) == (["x", "y"], None, ["a", "b"])


@pytest.mark.parametrize(
    ("given", "keywords", "error", "message"),
    [
        ([], {}, ValueError, "no texts to index"),
        ("one text", {}, TypeError, "give a list of texts"),
        (["a", "b"], {"ids": ["1"]}, ValueError, "1 ids for 2 texts"),
        (["a", "b"], {"titles": ["t", "u", "v"]}, ValueError, "3 titles for 2 texts"),
        (["a", "  "], {}, ValueError, "text 1 is empty"),
        ([{"id": "1", "body": "a"}], {}, ValueError, "text 0: expected a string, or a record with a string 'text'"),
        ([{"text": "a", "id": "1"}, {"text": "b", "id": "1"}], {}, ValueError, "id '1' was already given"),
        ([{"text": "a", "id": "1"}, {"text": "b"}], {}, ValueError, "1 of 2 records have no id"),
        ([{"text": "a", "id": "1"}], {"ids": ["2"]}, ValueError, "ids given both in the records"),
        ([3], {}, ValueError, "text 0: expected a string"),
    ],
)
def test_bad_input_is_refused_before_a_model_loads(given, keywords, error, message):
    with pytest.raises(error, match=message):
        sbert.Index.build(given, model="no-such-model", **keywords)


def test_bad_options_are_refused_before_a_model_loads():
    with pytest.raises(ValueError, match="auto chooses the chunking and BM25 itself"):
        sbert.Index.build(["a"], model="no-such-model", auto=True, chunk=True)
    with pytest.raises(TypeError, match="chunk must be"):
        sbert.Index.build(["a"], model=object(), chunk="yes")


def test_import_sbert_loads_nothing_heavy():
    import subprocess
    import sys

    code = "import sys, sbert; sbert.Index; sbert.Hit; print(sorted({'torch', 'transformers'} & set(sys.modules)))"
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert ran.stdout.strip() == "[]"


def test_bm25_is_the_library_default_where_an_index_keeps_it(tiny_encoder, tmp_path):
    """``build_index`` keeps BM25 unless told not to (memory, a folder), as `sbert index build` does."""
    from sbert.search.retrieve import build_index

    texts = ["Dough rises.", "Cats sleep."]
    assert build_index(None, tiny_encoder, texts, model="tiny").lexical
    assert build_index(tmp_path / "ix", tiny_encoder, texts, model="tiny").lexical
    assert not build_index(None, tiny_encoder, texts, model="tiny", bm25=False).lexical
    assert json.loads((tmp_path / "ix" / "manifest.json").read_text())["truncate_dim"] is None
