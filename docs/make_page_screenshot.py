"""Regenerate docs/img/search-page.png: ``sbert serve``'s web page after a search, in headless Chromium.

Builds a small index of the texts below in a temporary folder (``sbert index build``), starts ``sbert serve``
on a free loopback port, loads the page in Debian's chromium (``apt-get install chromium chromium-driver``;
nothing is downloaded), searches, and saves the screenshot as a palette PNG (a few tens of KB).

    .venv/bin/python docs/make_page_screenshot.py [--out docs/img/search-page.png] [--query "..."]
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

TEXTS = [
    "Bread is baked in a hot oven for about forty minutes.",
    "Knead the dough for ten minutes, then let it rise for an hour.",
    "A sourdough starter needs flour, water and a few days of patience.",
    "Boil the pasta in salted water until it is al dente.",
    "The stock market fell sharply after the announcement.",
    "Cats sleep for most of the day.",
    "Heavy rain is expected across the north tomorrow.",
    "He plays the guitar in a small jazz band.",
    "Python is a popular programming language.",
    "The football match ended in a draw.",
    "The astronauts landed on the moon in 1969.",
    "Tomatoes grow best in a sunny garden.",
    "The night train to Vienna was delayed.",
    "Fresh croissants are sold at the corner bakery every morning.",
    "She has practised the violin since she was six.",
    "Whole-grain flour makes a denser loaf.",
]
QUERY = "how do I make my own bread?"
WAIT = 60  # seconds, for the server and for the page


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def build_index(folder: Path) -> Path:
    corpus = folder / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"text": t}) + "\n" for t in TEXTS), encoding="utf-8")
    subprocess.run(
        [sys.executable, "-m", "sbert", "index", "build", str(corpus), "--out", str(folder / "ix"), "--no-progress"],
        check=True,
    )
    return folder / "ix"


def start_server(index: Path, log: Path) -> tuple[subprocess.Popen, str]:
    """``sbert serve --index`` on a free port, once it answers /health: (process, page URL)."""
    port = free_port()
    command = [sys.executable, "-m", "sbert", "serve", "--host", "127.0.0.1", "--port", str(port)]
    command += ["--index", str(index)]
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    url, deadline = f"http://127.0.0.1:{port}/", time.monotonic() + WAIT * 3
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with urllib.request.urlopen(url + "health", timeout=5):
                return process, url
        except OSError:
            time.sleep(0.2)
    process.terminate()
    raise SystemExit(f"sbert serve did not start:\n{log.read_text()}")


def browser(width: int, height: int):
    """Headless Chromium from /usr/bin (Debian's chromium and chromium-driver)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", f"--window-size={width},{height}"):
        options.add_argument(flag)
    options.add_argument("--hide-scrollbars")
    return webdriver.Chrome(service=Service(executable_path="/usr/bin/chromedriver"), options=options)


def screenshot(url: str, query: str, out: Path) -> None:
    """Search ``query`` on the page at ``url`` and save the window as ``out``."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver = browser(960, 840)
    try:
        driver.get(url)
        wait = WebDriverWait(driver, WAIT)
        wait.until(lambda d: d.find_element(By.ID, "index-size").text)
        driver.find_element(By.ID, "k").send_keys("5")
        box = driver.find_element(By.ID, "query")
        box.send_keys(query)
        box.submit()
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#results li.hit")) == 5)
        driver.execute_script("document.activeElement.blur()")  # no caret in the picture
        driver.save_screenshot(str(out))
    finally:
        driver.quit()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "img" / "search-page.png")
    parser.add_argument("--query", default=QUERY)
    args = parser.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        process, url = start_server(build_index(folder), folder / "serve.log")
        try:
            screenshot(url, args.query, folder / "raw.png")
        finally:
            process.terminate()
            process.wait(timeout=30)
        from PIL import Image

        Image.open(folder / "raw.png").convert("RGB").quantize(colors=64).save(args.out, optimize=True)
    print(f"wrote {args.out} ({args.out.stat().st_size / 1024:.0f} KB)")


if __name__ == "__main__":
    main()
