"""Readers for scored sentence pairs: STS benchmark, SICK, and the SemEval STS 2012-2016 files."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from sbert.data.examples import LabeledPair, ScoredPair
from sbert.data.paths import open_text
from sbert.errors import InputFileError

SICK_LABELS = ("CONTRADICTION", "ENTAILMENT", "NEUTRAL")  # same order as sbert.data.nli.LABELS


def _score(text: str, name: str, number: int, low: float, high: float) -> float:
    try:
        score = float(text)
    except ValueError:
        raise InputFileError(f"{name}: line {number}: score {text!r} is not a number") from None
    if not low <= score <= high:
        raise InputFileError(f"{name}: line {number}: score {score} is outside {low:g}-{high:g}")
    return score


def read_stsb(path: str | Path) -> Iterator[ScoredPair]:
    """Yield the pairs of an STSb file (``sts-train.csv``, ``-dev``, ``-test``; ``.gz`` or not).

    Columns: genre, file, year, id, score, sentence1, sentence2, and on some lines two extra source
    columns. Quote characters are text, not quoting. Any other shape raises ``InputFileError``.
    """
    with open_text(path) as handle:
        name = getattr(handle, "name", str(path))
        for number, line in enumerate(handle, start=1):
            line = line.rstrip("\r\n")
            if not line:
                continue
            cols = line.split("\t")
            if len(cols) not in (7, 9):
                raise InputFileError(
                    f"{name}: line {number} has {len(cols)} tab-separated columns; expected 7 "
                    "(genre, file, year, id, score, sentence1, sentence2) or 9"
                )
            yield ScoredPair(cols[5], cols[6], _score(cols[4], name, number, 0.0, 5.0))


def read_sick(
    path: str | Path, target: str = "relatedness", split: str | None = None
) -> Iterator[ScoredPair | LabeledPair]:
    """Yield SICK pairs: ``ScoredPair`` (relatedness 1-5) or ``LabeledPair`` (entailment label).

    Reads the SemEval-2014 split files without a header (pair_ID, sentence_A, sentence_B,
    relatedness_score, entailment_judgment) and the full ``SICK.txt`` with its header, CRLF line ends
    and ``SemEval_set`` column; ``split`` (TRAIN, TRIAL, TEST) keeps only that part of ``SICK.txt``.
    """
    if target not in ("relatedness", "entailment"):
        raise ValueError(f"target must be 'relatedness' or 'entailment', got {target!r}")
    with open_text(path) as handle:
        name = getattr(handle, "name", str(path))
        columns = {"pair_ID": 0, "sentence_A": 1, "sentence_B": 2, "relatedness_score": 3, "entailment": 4}
        for number, line in enumerate(handle, start=1):
            cols = line.rstrip("\r\n").split("\t")
            if number == 1 and cols[0] == "pair_ID":  # SICK.txt, or a split file that kept its header
                header = {c: i for i, c in enumerate(cols)}
                label_col = "entailment_label" if "entailment_label" in header else "entailment_judgment"
                wanted = ("sentence_A", "sentence_B", "relatedness_score", label_col)
                missing = [c for c in wanted if c not in header]
                if missing:
                    raise InputFileError(f"{name}: header lacks {', '.join(missing)}")
                columns = {**header, "entailment": header[label_col]}
                continue
            if cols == [""]:
                continue
            if len(cols) <= max(columns["sentence_B"], columns["relatedness_score"], columns["entailment"]):
                raise InputFileError(
                    f"{name}: line {number} has {len(cols)} tab-separated columns; expected pair_ID, "
                    "sentence_A, sentence_B, relatedness_score, entailment_judgment"
                )
            if split is not None and "SemEval_set" in columns and cols[columns["SemEval_set"]] != split.upper():
                continue
            s1, s2 = cols[columns["sentence_A"]], cols[columns["sentence_B"]]
            if target == "relatedness":
                yield ScoredPair(s1, s2, _score(cols[columns["relatedness_score"]], name, number, 1.0, 5.0))
            else:
                label = cols[columns["entailment"]].upper()
                if label not in SICK_LABELS:
                    raise InputFileError(f"{name}: line {number}: label {label!r} is not one of {SICK_LABELS}")
                yield LabeledPair(s1, s2, SICK_LABELS.index(label))


_INPUT = re.compile(r"^(STS|STS2016)\.input\.(.+)\.txt(\.gz)?$")


def read_semeval_sts(folder: str | Path) -> dict[str, list[ScoredPair]]:
    """Read one SemEval STS year (2012-2016): ``{subset: scored pairs}``, in file order.

    Handles ``STS.input.X.txt`` + ``STS.gs.X.txt`` (raw or after SentEval's tokeniser) and STS16's
    ``STS2016.input.X.txt`` with 4 columns. An empty gold line means an unscored pair, skipped.
    Subsets with a gold file but no input (STS13 SMT, withheld) are left out.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise InputFileError(f"{folder}: STS folder not found (expected STS.input.*.txt and STS.gs.*.txt)")
    subsets: dict[str, list[ScoredPair]] = {}
    for input_path in sorted(folder.iterdir()):
        match = _INPUT.match(input_path.name)
        if not match:
            continue
        prefix, subset = match.group(1), match.group(2)
        gold_path = folder / f"{prefix}.gs.{subset}.txt"
        with open_text(input_path) as inputs, open_text(gold_path) as golds:
            input_lines = inputs.read().splitlines()
            gold_lines = golds.read().splitlines()
        if len(input_lines) != len(gold_lines):
            raise InputFileError(
                f"{input_path}: {len(input_lines)} lines, but {gold_path.name} has {len(gold_lines)}; "
                "expected one gold line (possibly empty) per pair"
            )
        pairs = []
        for number, (line, gold) in enumerate(zip(input_lines, gold_lines, strict=True), start=1):
            if not gold.strip():
                continue
            cols = line.split("\t")
            if len(cols) < 2:
                raise InputFileError(f"{input_path}: line {number} has no tab; expected sentence1<TAB>sentence2")
            pairs.append(ScoredPair(cols[0], cols[1], _score(gold.strip(), str(gold_path), number, 0.0, 5.0)))
        subsets[subset] = pairs
    if not subsets:
        raise InputFileError(f"{folder}: no STS.input.*.txt files found")
    return subsets
