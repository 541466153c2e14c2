"""Readers for natural language inference pairs, and (premise, entailment, contradiction) triplets."""

from __future__ import annotations

import json
import random
from collections import defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path

from sbert.data.examples import LabeledPair, Triplet
from sbert.data.paths import open_text
from sbert.errors import InputFileError

LABELS = ("contradiction", "entailment", "neutral")  # class index = position, as sentence-transformers'
SPLITS = ("train", "dev", "test")


def _label(text: str, name: str, number: int) -> int | None:
    label = text.strip().lower()
    if label == "-":  # no annotator majority: dropped, as everyone does
        return None
    if label not in LABELS:
        raise InputFileError(f"{name}: line {number}: label {text!r} is not one of {', '.join(LABELS)} or '-'")
    return LABELS.index(label)


def read_nli(path: str | Path) -> Iterator[LabeledPair]:
    """Yield NLI pairs from any of these forms, dropping '-' labels:

    - SentEval: a folder with ``s1.SPLIT``, ``s2.SPLIT``, ``labels.SPLIT`` (``.gz`` or not): all its
      splits; or ``FOLDER/SPLIT`` (e.g. ``snli_senteval/dev``) for one split;
    - ``.jsonl``: objects with ``sentence1``, ``sentence2``, ``gold_label`` (SNLI/MultiNLI releases);
    - ``.tsv``/``.txt``: a header row naming ``sentence1``, ``sentence2`` and ``gold_label`` (or ``label``).
    """
    path = Path(path)
    if path.is_dir():
        found = [s for s in SPLITS if open_text_exists(path / f"labels.{s}")]
        if not found:
            raise InputFileError(f"{path}: no SentEval NLI files (expected s1.SPLIT, s2.SPLIT, labels.SPLIT)")
        for split in found:
            yield from _read_senteval(path, split)
    elif path.name in SPLITS and open_text_exists(path.parent / f"labels.{path.name}"):
        yield from _read_senteval(path.parent, path.name)
    elif path.name.endswith((".jsonl", ".jsonl.gz")):
        yield from _read_jsonl(path)
    else:
        yield from _read_tsv(path)


def open_text_exists(path: Path) -> bool:
    return path.is_file() or path.with_name(path.name + ".gz").is_file()


def _read_senteval(folder: Path, split: str) -> Iterator[LabeledPair]:
    with (
        open_text(folder / f"s1.{split}") as s1,
        open_text(folder / f"s2.{split}") as s2,
        open_text(folder / f"labels.{split}") as labels,
    ):
        rows = [f.read().splitlines() for f in (s1, s2, labels)]
    if not len(rows[0]) == len(rows[1]) == len(rows[2]):
        raise InputFileError(
            f"{folder}: split {split!r} has {len(rows[0])} / {len(rows[1])} / {len(rows[2])} lines in "
            "s1 / s2 / labels; expected the same number"
        )
    name = str(folder / f"labels.{split}")
    for number, (a, b, text) in enumerate(zip(*rows, strict=True), start=1):
        label = _label(text, name, number)
        if label is not None:
            yield LabeledPair(a.strip(), b.strip(), label)


def _read_jsonl(path: Path) -> Iterator[LabeledPair]:
    with open_text(path) as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                a, b, text = row["sentence1"], row["sentence2"], row["gold_label"]
            except (json.JSONDecodeError, KeyError, TypeError) as err:
                raise InputFileError(
                    f"{path}: line {number}: expected a JSON object with sentence1, sentence2, gold_label ({err})"
                ) from None
            label = _label(str(text), str(path), number)
            if label is not None:
                yield LabeledPair(a, b, label)


def _read_tsv(path: Path) -> Iterator[LabeledPair]:
    with open_text(path) as handle:
        header = handle.readline().rstrip("\r\n").split("\t")
        label_col = "gold_label" if "gold_label" in header else "label"
        missing = [c for c in ("sentence1", "sentence2", label_col) if c not in header]
        if missing:
            raise InputFileError(
                f"{path}: line 1: header lacks {', '.join(missing)}; expected tab-separated columns "
                "sentence1, sentence2, gold_label (or a .jsonl file, or a SentEval folder)"
            )
        i1, i2, il = header.index("sentence1"), header.index("sentence2"), header.index(label_col)
        for number, line in enumerate(handle, start=2):
            cols = line.rstrip("\r\n").split("\t")
            if cols == [""]:
                continue
            if len(cols) <= max(i1, i2, il):
                raise InputFileError(f"{path}: line {number} has {len(cols)} columns; the header has {len(header)}")
            label = _label(cols[il], str(path), number)
            if label is not None:
                yield LabeledPair(cols[i1], cols[i2], label)


def nli_to_triplets(pairs: Iterable[LabeledPair], seed: int = 0) -> list[Triplet]:
    """(premise, entailed hypothesis, contradicting hypothesis) triplets, as for SBERT's NLI training.

    Each entailed hypothesis of a premise is paired with one of that premise's contradictions,
    drawn with ``seed``; premises lacking either kind give no triplet.
    """
    entail: dict[str, list[str]] = defaultdict(list)
    contra: dict[str, list[str]] = defaultdict(list)
    for pair in pairs:
        if pair.label == LABELS.index("entailment"):
            entail[pair.sentence1].append(pair.sentence2)
        elif pair.label == LABELS.index("contradiction"):
            contra[pair.sentence1].append(pair.sentence2)
    rng = random.Random(seed)
    return [
        Triplet(premise, positive, rng.choice(contra[premise]))
        for premise, positives in entail.items()
        if contra.get(premise)
        for positive in positives
    ]
