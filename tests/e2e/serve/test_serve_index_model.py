"""``sbert serve --index`` serves the index's own model, as ``sbert search`` searches with it; answers name a
model folder by its name, never by where it lies on the server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

from click.testing import CliRunner  # noqa: E402
from conftest import make_tiny_encoder  # noqa: E402
from test_serve import free_port  # noqa: E402

from sbert.cli import main  # noqa: E402

CORPUS = ["Calc crashes when saving a file.", "Writer loses the formatting.", "Impress will not start."]


@pytest.fixture(scope="module")
def adapted_index(tmp_path_factory) -> tuple[Path, Path]:
    """(the index folder, its model's folder): an index built with a model of its own, as `sbert adapt` makes."""
    root = tmp_path_factory.mktemp("adapted")
    folder = root / "models" / "reports"
    make_tiny_encoder().save(folder)
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    built = CliRunner().invoke(main, ["index", "build", str(corpus), "--out", str(root / "ix"), "--model", str(folder)])
    assert built.exit_code == 0, built.output
    return root / "ix", folder


def serve(*args: str) -> tuple[subprocess.Popen, str]:
    """``sbert serve ARGS`` on a free port, once it answers /health (or has exited): (process, URL)."""
    port = free_port()
    sbert_cli = Path(sys.executable).with_name("sbert")
    env = {k: v for k, v in os.environ.items() if k != "SBERT_API_KEY"}
    command = [str(sbert_cli), "serve", "--port", str(port), *args]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    url, deadline = f"http://127.0.0.1:{port}", time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return process, url
        except httpx.HTTPError:
            time.sleep(0.2)
    process.kill()
    raise AssertionError(f"sbert serve did not start: {process.communicate(timeout=30)[1]}")


@pytest.mark.slow
def test_serve_index_uses_the_indexs_model_and_names_it_without_its_path(adapted_index):
    ix, folder = adapted_index
    process, url = serve("--index", str(ix))
    try:
        health = httpx.get(url + "/health", timeout=30).json()
        assert health == {"status": "ok", "model": "reports", "dim": 16, "index": True}
        hits = httpx.post(url + "/search", json={"query": "Calc crashes on save", "k": 1}, timeout=30).json()
        assert hits["results"][0]["hits"][0]["text"] in CORPUS  # the index's vectors, queried with its model
        embedded = httpx.post(url + "/v1/embeddings", json={"input": "hello"}, timeout=30)
        assert embedded.status_code == 200 and len(embedded.json()["data"][0]["embedding"]) == 16
        for name in ("reports", str(folder)):
            assert httpx.post(url + "/v1/embeddings", json={"input": "x", "model": name}, timeout=30).status_code == 200
        other = httpx.post(url + "/v1/embeddings", json={"input": "x", "model": "default"}, timeout=30)
        assert other.status_code == 404
        error = other.json()["error"]
        assert error["code"] == "model_not_found" and "this server serves 'reports'" in error["message"]
        answers = json.dumps([health, error, httpx.get(url + "/info", timeout=30).json()])
        assert str(folder.parent) not in answers  # no answer tells where the model lies
    finally:
        process.terminate()
        process.wait(timeout=60)


def test_serve_index_with_another_model_is_refused_before_loading_it(adapted_index, monkeypatch):
    import sbert

    ix, _ = adapted_index
    loaded = []
    monkeypatch.setattr(sbert, "load", lambda *a, **k: loaded.append(a))
    result = CliRunner().invoke(main, ["serve", "--port", str(free_port()), "--index", str(ix), "--model", "default"])
    assert result.exit_code == 1, result.output
    assert "was built with model" in result.output and "refusing to use it with 'default'" in result.output
    assert loaded == []


def test_an_unknown_model_is_named_without_the_served_folders_path(tmp_path, model):
    """A server of a folder given by its absolute path: the 404 names the folder, never its path."""
    from sbert.serve.app import create_app
    from sbert.serve.errors import ApiError
    from sbert.serve.schemas import EmbeddingRequest, parse

    app = create_app(model, model_name=str(Path(model.path).resolve()))
    context = app.state.service.context
    assert context.model_name == Path(model.path).resolve().name
    with pytest.raises(ApiError) as caught:
        parse(b'{"input": "x", "model": "text-embedding-3-small"}', EmbeddingRequest, context)
    assert caught.value.status == 404 and f"serves {context.model_name!r}" in caught.value.message
    assert str(Path(model.path).resolve().parent) not in caught.value.message
