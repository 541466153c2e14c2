"""The service's web page in a real browser: ``sbert serve`` as a process on loopback, driven through
headless Chromium (Debian's ``chromium`` and ``chromium-driver``, with Selenium) as a person would use it.

Skips only where Chromium or its driver is not installed (``apt-get install chromium chromium-driver``).
"""

from __future__ import annotations

import http.client
import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

import sbert

pytestmark = pytest.mark.slow  # starts servers and a browser

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
KEY = "page-key"
WAIT = 60  # seconds: every wait is bounded
TEXTS = {
    "bread": "Bread is baked in a hot oven for about forty minutes.",
    "stocks": "The stock market fell sharply after the announcement.",
    "cats": "Cats sleep for most of the day.",
    "pasta": "Boil the pasta in salted water until it is al dente.",
    "rain": "Heavy rain is expected across the north tomorrow.",
    "guitar": "He plays the guitar in a small jazz band.",
    "python": "Python is a popular programming language.",
    "football": "The football match ended in a draw.",
    "moon": "The astronauts landed on the moon in 1969.",
    "garden": "Tomatoes grow best in a sunny garden.",
    "train": "The night train to Vienna was delayed.",
    "violin": "She has practised the violin since she was six.",
}
DOCUMENTS = {
    "kitchen": "Our kitchen is small but bright. The oven heats up quickly. "
    "To bake bread, knead the dough for ten minutes, let it rise for an hour and bake it at 220 degrees.",
    "travel": "We took the train across the Alps. The views were wonderful. The hotel in Vienna was near the station.",
    "space": "Rockets need enormous thrust to leave the Earth. Astronauts train for years before a flight.",
    "music": "The orchestra rehearsed all week. The violins opened the concert with a quiet theme.",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def build_index(folder: Path, items: dict[str, str], *extra: str) -> Path:
    """An index at ``folder/ix`` built by ``sbert index build`` from ``items`` (id: text) as .jsonl."""
    from click.testing import CliRunner

    from sbert.cli import main

    corpus = folder / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in items.items()), encoding="utf-8")
    result = CliRunner().invoke(main, ["index", "build", str(corpus), "--out", str(folder / "ix"), *extra])
    assert result.exit_code == 0, result.output
    return folder / "ix"


class Served:
    """``sbert serve`` as a child process on a free loopback port; ``stop`` ends it (and may be called again)."""

    def __init__(self, log: Path, *options: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        command = [sys.executable, "-m", "sbert", "serve", "--host", "127.0.0.1", "--port", str(self.port), *options]
        self.log = log
        with log.open("wb") as out:
            self.process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)

    def wait_ready(self) -> None:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"sbert serve exited with {self.process.returncode}:\n{self.log.read_text()}")
            try:
                with urllib.request.urlopen(self.url + "health", timeout=5) as response:
                    if response.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"sbert serve did not answer /health within 180 s:\n{self.log.read_text()}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)


@contextmanager
def serving(log: Path, *options: str) -> Iterator[Served]:
    served = Served(log, *options)
    try:
        served.wait_ready()
        yield served
    finally:
        served.stop()


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium from Debian's packages (never a downloaded one), closed at the end."""
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not (p.exists() or shutil.which(p.name))]
    if missing:
        pytest.skip(f"no Chromium installed ({', '.join(missing)} missing): apt-get install chromium chromium-driver")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM if CHROMIUM.exists() else shutil.which("chromium"))
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1100,900"):
        options.add_argument(flag)
    driver_path = str(CHROMEDRIVER if CHROMEDRIVER.exists() else shutil.which("chromedriver"))
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    driver.set_page_load_timeout(WAIT)
    try:
        yield driver
    finally:
        driver.quit()


def wait_for(driver, condition, what: str):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, WAIT, poll_frequency=0.1).until(lambda d: condition(d), message=what)


def text_of(driver, css: str) -> str:
    from selenium.webdriver.common.by import By

    found = driver.find_elements(By.CSS_SELECTOR, css)
    return found[0].text if found else ""


def shown_error(driver) -> str:
    """The page's error message once it is visible."""
    return wait_for(driver, lambda d: text_of(d, "#error"), "an error message on the page")


def submit(driver, field: str, text: str) -> None:
    """Type ``text`` into the field with id ``field`` (after clearing it) and submit its form."""
    from selenium.webdriver.common.by import By

    box = driver.find_element(By.ID, field)
    box.clear()
    box.send_keys(text)
    box.find_element(By.XPATH, "./ancestor::form").submit()


def shown_hits(driver) -> list[dict]:
    """The listed results, once there are some: id, score as shown, text, span line."""
    from selenium.webdriver.common.by import By

    wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#results li.hit"), "search results")
    return [
        {
            "id": item.find_element(By.CLASS_NAME, "hit-id").text,
            "score": float(item.find_element(By.CLASS_NAME, "score").text),
            "text": item.find_element(By.CLASS_NAME, "hit-text").text,
            "span": " ".join(e.text for e in item.find_elements(By.CLASS_NAME, "span")),
        }
        for item in driver.find_elements(By.CSS_SELECTOR, "#results li.hit")
    ]


def library_hits(model, index_dir: Path, query: str, k: int = 10, threshold: float | None = None, **options):
    """The library's hits, searched as it searches by default (an index keeping BM25: hybrid, weighted 0.7; with
    a ``threshold`` or a ``lead``, dense: ``sbert search --threshold``, ``--lead``)."""
    from sbert.search.index.folder import VectorIndex
    from sbert.search.retrieve import SearchOptions, search_texts

    settings = SearchOptions(k=k, threshold=threshold, **options)
    return search_texts(VectorIndex.open(index_dir), model, [query], settings)[0]


@pytest.fixture(scope="module")
def texts_server(tmp_path_factory) -> Iterator[tuple[Served, Path]]:
    folder = tmp_path_factory.mktemp("texts")
    index_dir = build_index(folder, TEXTS)
    with serving(folder / "serve.log", "--index", str(index_dir)) as served:
        yield served, index_dir


def test_search_lists_the_expected_text_first_with_the_librarys_score(browser, texts_server, model, tmp_path):
    served, index_dir = texts_server
    browser.get(served.url)
    wait_for(browser, lambda d: text_of(d, "#index-size") == "index of 12 texts", "the index size")
    assert text_of(browser, "#model") == "all-MiniLM-L6-v2"  # the model the index records (serve --index uses it)
    assert text_of(browser, "#dim") == f"{model.dim} dimensions" == "384 dimensions"
    query = "how long to bake a loaf of bread"
    submit(browser, "query", query)
    hits, expected = shown_hits(browser), library_hits(model, index_dir, query)
    assert hits[0]["id"] == "bread" and hits[0]["text"] == TEXTS["bread"]
    assert [h["id"] for h in hits[:3]] == [h.id for h in expected[:3]]
    assert len(hits) == 10  # the default "top 10"
    for shown, want in zip(hits, expected, strict=False):
        assert shown["score"] == pytest.approx(want.score, abs=1e-3)
    assert hits[0]["span"] == ""  # an index of texts has no passages
    assert "10 results" in text_of(browser, "#search-status")
    from selenium.webdriver.common.by import By

    assert browser.find_element(By.ID, "hybrid").is_selected()  # the index keeps BM25: hybrid, as served
    # "is this already here?": a threshold keeps the dense hits at least that similar (as sbert search does)
    assert browser.find_element(By.ID, "hybrid").is_enabled()
    browser.find_element(By.ID, "threshold").send_keys("0.3")
    assert not browser.find_element(By.ID, "hybrid").is_enabled()  # a cut-off searches dense: the box says so
    submit(browser, "query", query)
    wait_for(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#results li.hit")) < 10, "fewer results")
    dense = library_hits(model, index_dir, query, threshold=0.3)
    assert [h["id"] for h in shown_hits(browser)] == [h.id for h in dense] and dense and dense[0].id == "bread"
    browser.find_element(By.ID, "threshold").clear()
    browser.find_element(By.ID, "threshold").send_keys("0.99")
    submit(browser, "query", query)
    wait_for(browser, lambda d: "no hit reaches the threshold" in text_of(d, "#search-status"), "the empty line")
    assert text_of(browser, "#results") == ""
    browser.find_element(By.ID, "threshold").clear()
    # "is the top hit the duplicate?": a lead keeps the top hit alone where it stands out (sbert search --lead)
    scores = [h.score for h in library_hits(model, index_dir, query, hybrid=False)]
    lead = scores[0] - sum(scores[1:10]) / len(scores[1:10])
    browser.find_element(By.ID, "lead").send_keys(f"{lead - 0.01:.4f}")
    submit(browser, "query", query)
    wait_for(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#results li.hit")) == 1, "the top hit alone")
    assert [h["id"] for h in shown_hits(browser)] == ["bread"]
    assert text_of(browser, "#results .lead") == f"leads by {lead:.4f}"  # its lead, beside its score
    browser.find_element(By.ID, "lead").clear()
    browser.find_element(By.ID, "lead").send_keys(f"{lead + 0.01:.4f}")
    submit(browser, "query", query)
    wait_for(browser, lambda d: "the top hit is not clearly a duplicate" in text_of(d, "#search-status"), "no lead")
    assert text_of(browser, "#results") == ""
    browser.find_element(By.ID, "lead").clear()
    assert browser.find_element(By.ID, "hybrid").is_enabled()  # no cut-off left: hybrid can be chosen again
    browser.save_screenshot(str(tmp_path / "search-page.png"))
    assert (tmp_path / "search-page.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_an_empty_query_shows_a_message_and_no_results(browser, texts_server):
    served, _ = texts_server
    browser.get(served.url)
    wait_for(browser, lambda d: text_of(d, "#index-size"), "the index size")
    submit(browser, "query", "   ")
    assert shown_error(browser) == "Type a query to search the index."
    assert text_of(browser, "#results") == ""


def test_clearing_the_query_after_a_search_leaves_no_old_result_line(browser, texts_server):
    served, _ = texts_server
    browser.get(served.url)
    wait_for(browser, lambda d: text_of(d, "#index-size"), "the index size")
    submit(browser, "query", "bread")
    wait_for(browser, lambda d: "results for" in text_of(d, "#search-status"), "the result line")
    submit(browser, "query", "")
    assert shown_error(browser) == "Type a query to search the index."
    assert text_of(browser, "#results") == "" and text_of(browser, "#search-status") == ""


def test_heatmap_cells_hold_the_librarys_cosine_similarities(browser, texts_server, model, tmp_path):
    from selenium.webdriver.common.by import By

    served, _ = texts_server
    browser.get(served.url)
    wait_for(browser, lambda d: text_of(d, "#model"), "the model's name")
    browser.find_element(By.ID, "tab-similarity").click()
    assert not browser.find_element(By.ID, "search-panel").is_displayed()
    sentences = ["A man is eating food.", "A man is eating a piece of bread.", "A man is riding a horse."]
    submit(browser, "sentences", "\n".join(sentences) + "\n\n")  # blank lines are not sentences
    cells = wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#heatmap td.cell"), "heatmap cells")
    shown = [[float(cells[3 * i + j].text) for j in range(3)] for i in range(3)]
    embeddings = model.encode(sentences)
    expected = sbert.similarity.cosine(embeddings, embeddings)
    np.testing.assert_allclose(shown, np.asarray(expected), rtol=0, atol=1e-3)
    assert shown[0][1] > shown[0][2]  # eating food is nearer eating bread than riding a horse
    rows = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#heatmap th.row")]
    assert rows == [f"{i + 1}. {s}" for i, s in enumerate(sentences)]
    assert "cosine similarity" in text_of(browser, "#heatmap caption")
    browser.save_screenshot(str(tmp_path / "heatmap.png"))
    submit(browser, "sentences", "only one sentence")
    assert shown_error(browser) == "Enter at least two sentences, one per line."


def request(url: str, key: str | None = None) -> tuple[int, bytes]:
    """GET ``url`` (with the key, if given): (status, body)."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def raw_status(port: int, path: str) -> int:
    """The status of GET ``path`` sent exactly as written (no client-side clean-up of ``..``)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("GET", path)
        return connection.getresponse().status
    finally:
        connection.close()


def test_a_keyed_server_of_documents_asks_for_the_key_and_shows_passages(browser, model, tmp_path):
    from sbert.search.index.folder import VectorIndex
    from sbert.serve.responses import Info

    index_dir = build_index(tmp_path, DOCUMENTS, "--chunk", "--window", "16", "--overlap", "4")
    with serving(tmp_path / "serve.log", "--index", str(index_dir), "--api-key", KEY) as served:
        # the page and its files are open; the JSON endpoints keep requiring the key
        assert [request(served.url + p)[0] for p in ("", "static/app.js", "static/style.css")] == [200, 200, 200]
        assert request(served.url + "info")[0] == 401
        assert raw_status(served.port, "/static/../info") == 404  # the open prefix opens no endpoint
        status, body = request(served.url + "info", KEY)
        info = Info.model_validate_json(body)
        assert status == 200 and info.index is not None and info.index.documents and info.index.size == 4
        browser.get(served.url)
        assert "This server needs an API key" in shown_error(browser)
        submit(browser, "key", "not-the-key")
        wait_for(browser, lambda d: "The API key was refused" in text_of(d, "#error"), "the refused key's message")
        assert "401" in text_of(browser, "#error")
        submit(browser, "key", KEY)
        wait_for(browser, lambda d: text_of(d, "#index-size"), "the index size")
        rows = len(VectorIndex.open(index_dir))  # windows of the documents
        assert info.index.rows == rows and info.model == "all-MiniLM-L6-v2" and info.dim == model.dim
        assert text_of(browser, "#index-size") == f"index of 4 documents ({rows} passages)"
        assert text_of(browser, "#error") == "" and rows > 4
        query = "how long should the dough rise"
        submit(browser, "query", query)
        hits, expected = shown_hits(browser), library_hits(model, index_dir, query, k=4)
        assert hits[0]["id"] == expected[0].id == "kitchen"
        assert hits[0]["score"] == pytest.approx(expected[0].score, abs=1e-3)
        start, end = expected[0].span
        assert hits[0]["text"] == expected[0].text == DOCUMENTS["kitchen"][start:end]
        assert hits[0]["span"] == f"best passage: characters {start}–{end} of the document"
        browser.save_screenshot(str(tmp_path / "documents.png"))


def test_without_an_index_and_when_refused_or_gone_the_page_says_so(browser, tmp_path):
    from selenium.webdriver.common.by import By

    with serving(tmp_path / "serve.log", "--max-chars", "40") as served:
        browser.get(served.url)
        wait_for(browser, lambda d: text_of(d, "#index-size"), "the index line")
        assert text_of(browser, "#index-size").startswith("no index loaded")
        submit(browser, "query", "anything")
        message = shown_error(browser)
        assert message.startswith("The server refused the request (404)") and "no index is loaded" in message
        browser.find_element(By.ID, "tab-similarity").click()
        long = "a sentence longer than forty characters, by far"
        submit(browser, "sentences", "short\n" + long)
        wait_for(browser, lambda d: "(400)" in text_of(d, "#error"), "the refusal of a long text")
        assert f"'a[1]' has {len(long)} characters; the limit is 40" in text_of(browser, "#error")
        served.stop()
        submit(browser, "sentences", "one\ntwo")
        wait_for(browser, lambda d: "cannot be reached" in text_of(d, "#error"), "the message for a stopped server")


TITLED = [
    {"id": "b1", "title": "Crash when saving <b>large</b> & odd files", "text": "The editor crashes on big files."},
    {"id": "b2", "title": "Slow start-up", "text": "Starting the application takes thirty seconds."},
    {"id": "b3", "text": "The printer prints blank pages."},
]


def test_the_page_shows_each_hits_title_escaped_above_its_text(browser, tmp_path):
    from click.testing import CliRunner
    from selenium.webdriver.common.by import By

    from sbert.cli import main

    corpus = tmp_path / "bugs.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in TITLED), encoding="utf-8")
    built = CliRunner().invoke(main, ["index", "build", str(corpus), "--out", str(tmp_path / "ix"), "--no-progress"])
    assert built.exit_code == 0, built.output
    with serving(tmp_path / "serve.log", "--index", str(tmp_path / "ix")) as served:
        browser.get(served.url)
        submit(browser, "query", "the editor crashes when saving big files")
        shown_hits(browser)
        items = browser.find_elements(By.CSS_SELECTOR, "#results li.hit")
        first = items[0]
        assert first.find_element(By.CLASS_NAME, "hit-id").text == "b1"
        title = first.find_element(By.CLASS_NAME, "hit-title")
        assert title.text == TITLED[0]["title"]  # the markup is shown as text, never read as HTML
        assert title.find_elements(By.TAG_NAME, "b") == []
        assert first.find_element(By.CLASS_NAME, "hit-text").text == TITLED[0]["text"]  # not repeated under it
        below = browser.execute_script(
            "const [t, p] = arguments; return !!(t.compareDocumentPosition(p) & Node.DOCUMENT_POSITION_FOLLOWING);",
            title,
            first.find_element(By.CLASS_NAME, "hit-text"),
        )
        assert below
        untitled = next(i for i in items if i.find_element(By.CLASS_NAME, "hit-id").text == "b3")
        assert untitled.find_elements(By.CLASS_NAME, "hit-title") == []
        browser.save_screenshot(str(tmp_path / "titles.png"))


def test_a_server_of_several_indexes_lets_the_page_choose_which_one_it_searches(browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.select import Select

    for name in ("bugs", "docs"):
        (tmp_path / name).mkdir()
    bugs = build_index(tmp_path / "bugs", {"b1": "the editor crashes when saving big files", "b2": "printing hangs"})
    docs = build_index(tmp_path / "docs", {"d1": "how to save a file", "d2": "setting up a printer", "d3": "fonts"})
    with serving(tmp_path / "serve.log", "--index", f"bugs={bugs}", "--index", f"docs={docs}") as served:
        browser.get(served.url)
        chooser = wait_for(browser, lambda d: d.find_element(By.ID, "index").is_displayed() and d, "the index chooser")
        choice = Select(chooser.find_element(By.ID, "index"))
        assert [o.text for o in choice.options] == ["bugs", "docs"]
        assert text_of(browser, "#index-size") == "index of 2 texts"
        submit(browser, "query", "saving")
        assert [h["id"] for h in shown_hits(browser)] == ["b1", "b2"]
        choice.select_by_visible_text("docs")
        wait_for(browser, lambda d: text_of(d, "#index-size") == "index of 3 texts", "the docs index described")
        submit(browser, "query", "saving")
        ids = lambda d: sorted(e.text for e in d.find_elements(By.CSS_SELECTOR, "#results li.hit .hit-id"))  # noqa: E731
        wait_for(browser, lambda d: ids(d) == ["d1", "d2", "d3"], "the docs index's hits")
        unnamed = urllib.request.Request(served.url + "search", data=b'{"query": "saving"}', method="POST")
        unnamed.add_header("Content-Type", "application/json")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(unnamed, timeout=30)
        assert refused.value.code == 400 and "name one with 'index'" in refused.value.read().decode()
