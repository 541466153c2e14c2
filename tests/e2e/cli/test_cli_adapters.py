"""sbert adapt --lora and sbert train --lora on the command line: the options reach the adapter folder, and a
shape given without --lora is refused."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from test_adapters import WORDS, _corpus, _tiny_base

from sbert.cli import main

pytest.importorskip("peft")
pytestmark = pytest.mark.slow  # trains


def test_the_cli_trains_adapters_with_adapt_and_train(tmp_path):
    base, corpus = _tiny_base(tmp_path), _corpus(tmp_path)
    runner = CliRunner()
    common = ["--steps", "2", "--batch-size", "4", "--no-progress"]
    adapted = runner.invoke(
        main, ["adapt", str(base), "--corpus", str(corpus), "--out", str(tmp_path / "a"), *common, "--lora"]
    )
    assert adapted.exit_code == 0, adapted.output
    assert json.loads((tmp_path / "a" / "adapter_config.json").read_text())["r"] == 16

    pairs = tmp_path / "pairs.tsv"  # query, positive, no hard negatives
    pairs.write_text("".join(f"{w} crash\t{w} crashes on a page\n" for w in WORDS))
    args = ["train", "--model", str(base), "--objective", "mnrl", "--format", "ntuples", "--train", str(pairs)]
    args += ["--max-steps", "2", "--batch-size", "4", "--no-progress"]
    trained = runner.invoke(
        main, [*args, "--out", str(tmp_path / "t"), "--lora", "--lora-rank", "4", "--lora-targets", "query,value"]
    )
    assert trained.exit_code == 0, trained.output
    config = json.loads((tmp_path / "t" / "adapter_config.json").read_text())
    assert (config["r"], sorted(config["target_modules"])) == (4, ["query", "value"])

    refused = runner.invoke(main, [*args, "--out", str(tmp_path / "u"), "--lora-rank", "4"])
    assert refused.exit_code != 0 and "--lora" in refused.output
