"""The data formats training and dev evaluation read, each with its readers: ``FORMATS[name]``.

A format gives one or more kinds of example (``sbert.data.examples``): SICK gives scored pairs
(relatedness) or labelled pairs (entailment); NLI gives labelled pairs, or (premise, entailment,
contradiction) triplets built from them. Whoever reads a format asks for the kinds it can use, most
wanted first (``FORMATS[name].kind_for``), and reads that kind (``read_examples``).

Adding a format: a reader module here and one entry in ``FORMATS``; ``sbert train --format`` lists it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from sbert.data.beir_training_pairs import read_beir_pairs
from sbert.data.examples import DistillationExample, LabeledPair, RetrievalExample, ScoredPair, Text, Triplet
from sbert.data.label_free import read_distillation, read_texts
from sbert.data.nli import nli_to_triplets, read_nli
from sbert.data.ntuples import read_ntuples
from sbert.data.sts import read_semeval_sts, read_sick, read_stsb
from sbert.data.triplets import read_triplets
from sbert.errors import InputFileError

Reader = Callable[[Path, int], list]  # (path, seed) -> examples; the seed is for formats that draw (NLI triplets)


@dataclass(frozen=True)
class DataFormat:
    """A data format: what it reads (a file, a folder or either) and a reader per kind of example it gives."""

    name: str
    reads: str  # "file", "folder" or "file or folder"
    readers: dict[type, Reader]  # kind of example -> reader
    score_range: tuple[float, float] | None = None  # the gold scores' scale, for formats of scored pairs
    help: str = ""

    @property
    def kinds(self) -> tuple[type, ...]:
        return tuple(self.readers)

    def kind_for(self, wanted: Sequence[type]) -> type | None:
        """The first of ``wanted`` (kinds of example, most wanted first) this format gives; None if none."""
        return next((kind for kind in wanted if kind in self.readers), None)


def _stsb(path: Path, seed: int) -> list[ScoredPair]:
    return list(read_stsb(path))


def _sick_relatedness(path: Path, seed: int) -> list[ScoredPair]:
    return list(read_sick(path, target="relatedness"))


def _sick_entailment(path: Path, seed: int) -> list[LabeledPair]:
    return list(read_sick(path, target="entailment"))


def _semeval_sts(path: Path, seed: int) -> list[ScoredPair]:
    return [pair for pairs in read_semeval_sts(path).values() for pair in pairs]


def _nli_pairs(path: Path, seed: int) -> list[LabeledPair]:
    return list(read_nli(path))


def _nli_triplets(path: Path, seed: int) -> list[Triplet]:
    triplets = nli_to_triplets(_nli_pairs(path, seed), seed=seed)
    if not triplets:
        raise InputFileError(f"{path}: no premise has both an entailment and a contradiction: no triplets to build")
    return triplets


def _triplets(path: Path, seed: int) -> list[Triplet]:
    return list(read_triplets(path))


def _ntuples(path: Path, seed: int) -> list[RetrievalExample]:
    return list(read_ntuples(path))


def _beir(path: Path, seed: int) -> list[RetrievalExample]:
    return read_beir_pairs(path)


def _texts(path: Path, seed: int) -> list[Text]:
    return read_texts(path)


def _distillation(path: Path, seed: int) -> list[DistillationExample]:
    return read_distillation(path)


FORMATS: dict[str, DataFormat] = {
    f.name: f
    for f in (
        DataFormat("stsb", "file", {ScoredPair: _stsb}, (0.0, 5.0), "STS benchmark file (sts-train.csv)"),
        DataFormat(
            "sick",
            "file",
            {ScoredPair: _sick_relatedness, LabeledPair: _sick_entailment},
            (1.0, 5.0),
            "SICK split file or SICK.txt: relatedness scores, or entailment labels",
        ),
        DataFormat("sts", "folder", {ScoredPair: _semeval_sts}, (0.0, 5.0), "SemEval STS year folder"),
        DataFormat(
            "nli",
            "file or folder",
            {LabeledPair: _nli_pairs, Triplet: _nli_triplets},
            None,
            "SentEval NLI folder, .jsonl or .tsv: labelled pairs, or (premise, entailment, contradiction)",
        ),
        DataFormat("triplets", "file", {Triplet: _triplets}, None, ".tsv or .csv of anchor, positive, negative"),
        DataFormat(
            "ntuples",
            "file",
            {RetrievalExample: _ntuples},
            None,
            ".tsv or .jsonl of query, positive and 0..n hard negatives (sbert mine-negatives writes them)",
        ),
        DataFormat(
            "beir",
            "folder",
            {RetrievalExample: _beir},
            None,
            "BEIR folder: (query, relevant document) pairs of its train qrels; or FOLDER/qrels/SPLIT.tsv",
        ),
        DataFormat(
            "texts",
            "file or folder",
            {Text: _texts},
            None,
            "texts alone (label-free objectives): one per line, .jsonl of {text}, or a BEIR folder's documents",
        ),
        DataFormat(
            "distill",
            "file",
            {DistillationExample: _distillation},
            None,
            ".tsv of query, positive, negative, teacher margin; or .jsonl with negatives and teacher scores",
        ),
    )
}


def data_format(name: str) -> DataFormat:
    """``FORMATS[name]``, or a ValueError naming the formats there are."""
    if name not in FORMATS:
        raise ValueError(f"format {name!r}: expected one of {', '.join(FORMATS)}")
    return FORMATS[name]


def formats_giving(kinds: Sequence[type]) -> list[str]:
    """Names of the formats that give examples of one of ``kinds``."""
    return [name for name, f in FORMATS.items() if f.kind_for(kinds) is not None]


def read_examples(fmt: str, path: str | Path, kind: type, seed: int = 0) -> list:
    """The examples of ``kind`` that file or folder ``path`` holds in format ``fmt``; none is an error."""
    form = data_format(fmt)
    if kind not in form.readers:
        given = " or ".join(k.__name__ for k in form.kinds)
        raise ValueError(f"format {fmt!r} gives {given} examples, not {kind.__name__} ({path})")
    examples = form.readers[kind](Path(path), seed)
    if not examples:
        raise InputFileError(f"{path}: no {fmt} examples found")
    return examples
