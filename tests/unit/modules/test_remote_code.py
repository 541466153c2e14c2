"""Code named in a model folder (``auto_map`` in config.json or tokenizer_config.json) is never run.

Each load runs in a child process with ``y`` on standard input, the answer transformers' "Do you wish
to run the custom code? [y/N]" prompt would take: the planted module writes a marker file when
imported, so the marker must never appear, and the load must fail with an error naming the folder.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import make_tiny_encoder

pytestmark = pytest.mark.slow  # loads models in child processes

EVIL = """
import pathlib
pathlib.Path({marker!r}).write_text("the folder's code ran")
from transformers import BertConfig, BertForSequenceClassification, BertModel, BertTokenizerFast

class EvilConfig(BertConfig):
    model_type = "evil_bert"

class EvilModel(BertModel):
    config_class = EvilConfig

class EvilForSequenceClassification(BertForSequenceClassification):
    config_class = EvilConfig

class EvilTokenizer(BertTokenizerFast):
    pass
"""

MODEL_MAP = {
    "AutoConfig": "evil.EvilConfig",
    "AutoModel": "evil.EvilModel",
    "AutoModelForSequenceClassification": "evil.EvilForSequenceClassification",
}

# Child process: try each load, report what happened as JSON on the last line of stdout.
CHILD = """
import json, sys
import sbert
from sbert.cross_encoder import CrossEncoder
from sbert.encoder import Encoder
results = {}
for name, path in json.loads(sys.argv[1]).items():
    loader = {"sbert.load": sbert.load, "Encoder.load": Encoder.load, "CrossEncoder.load": CrossEncoder.load}
    try:
        loader[name.split(":")[0]](path, device="cpu")
        results[name] = ["loaded", ""]
    except Exception as err:
        results[name] = [type(err).__name__, str(err)]
print("RESULTS", json.dumps(results))
"""


def _plant(folder: Path, marker: Path, where: str) -> Path:
    (folder / "evil.py").write_text(EVIL.format(marker=str(marker)), encoding="utf-8")
    name = "tokenizer_config.json" if where == "tokenizer" else "config.json"
    config = json.loads((folder / name).read_text(encoding="utf-8"))
    if where == "tokenizer":
        config["auto_map"] = {"AutoTokenizer": ["evil.EvilTokenizer", "evil.EvilTokenizer"]}
        config["tokenizer_class"] = "EvilTokenizer"
    else:
        config["model_type"] = "evil_bert"
        config["auto_map"] = MODEL_MAP
    (folder / name).write_text(json.dumps(config), encoding="utf-8")
    return folder


def tiny_cross_encoder_folder(path: Path, num_labels: int = 1) -> Path:
    """A tiny BERT sequence-classification folder (seeded head) with the default model's tokenizer."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    encoder = make_tiny_encoder(dropout=0.0)
    settings = encoder.transformer.model.config.to_dict()
    settings = {k: v for k, v in settings.items() if k not in ("id2label", "label2id")}
    torch.manual_seed(1)
    BertForSequenceClassification(BertConfig(**settings, num_labels=num_labels)).save_pretrained(path)
    encoder.transformer.tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def outcome(tmp_path_factory):
    """Plant code in bi-encoder and cross-encoder folders, load each in a child with 'y' piped in."""
    root = tmp_path_factory.mktemp("remote")
    marker = root / "MARKER"
    folders = {}
    for where in ("config", "tokenizer"):
        bi = _plant(make_tiny_encoder().save(root / f"bi-{where}"), marker, where)
        cross = _plant(tiny_cross_encoder_folder(root / f"cross-{where}"), marker, where)
        folders |= {f"sbert.load:{where}": str(bi), f"Encoder.load:{where}": str(bi)}
        folders[f"CrossEncoder.load:{where}"] = str(cross)
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(folders)],
        input="y\n" * 50,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout.rsplit("RESULTS ", 1)[1])
    return results, folders, marker, proc.stdout + proc.stderr


@pytest.mark.parametrize("loader", ["sbert.load", "Encoder.load", "CrossEncoder.load"])
@pytest.mark.parametrize("where", ["config", "tokenizer"])
def test_auto_map_is_refused_without_running_or_prompting(outcome, loader, where):
    results, folders, marker, output = outcome
    assert not marker.exists(), "the model folder's code ran"
    assert "Do you wish to run the custom code" not in output
    error, message = results[f"{loader}:{where}"]
    assert error == "ModelFormatError", (error, message)
    assert folders[f"{loader}:{where}"] in message and "auto_map" in message


def test_every_transformers_loader_passes_trust_remote_code_false():
    """Source check: each from_pretrained / from_config call in sbert says trust_remote_code=False."""
    import re

    root = Path(__file__).resolve().parents[3] / "src" / "sbert"
    calls = []
    for source in root.rglob("*.py"):
        text = source.read_text(encoding="utf-8")
        for match in re.finditer(r"\.(from_pretrained|from_config)\(", text):
            depth, end = 0, match.end() - 1
            for end in range(match.end() - 1, len(text)):
                depth += {"(": 1, ")": -1}.get(text[end], 0)
                if depth == 0:
                    break
            calls.append((f"{source.name}:{text[: match.start()].count(chr(10)) + 1}", text[match.start() : end]))
    assert len(calls) >= 4
    missing = [where for where, call in calls if "trust_remote_code=False" not in call]
    assert not missing, f"calls without trust_remote_code=False: {missing}"
