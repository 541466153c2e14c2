"""Readers for the SentEval transfer tasks (MR, CR, SUBJ, MPQA, SST-2, TREC, MRPC), in SentEval's layout.

Each returns a ``TransferTask``: texts (or text pairs) and integer labels, split as the task is
evaluated: one pool for 10-fold cross-validation (MR, CR, SUBJ, MPQA), or train/dev/test files.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from sbert.data.paths import open_text
from sbert.errors import InputFileError

# The binary tasks as SentEval lays them out: folder, (negative file, positive file).
BINARY = {
    "MR": ("MR", ("rt-polarity.neg", "rt-polarity.pos")),
    "CR": ("CR", ("custrev.neg", "custrev.pos")),
    "SUBJ": ("SUBJ", ("subj.objective", "subj.subjective")),
    "MPQA": ("MPQA", ("mpqa.neg", "mpqa.pos")),
}
TASKS = (*BINARY, "SST2", "TREC", "MRPC")
TREC_CLASSES = ("ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM")


@dataclass
class Split:
    texts: list = field(default_factory=list)  # str, or (str, str) for MRPC
    labels: list[int] = field(default_factory=list)

    def add(self, text, label: int) -> None:
        self.texts.append(text)
        self.labels.append(label)


@dataclass
class TransferTask:
    name: str
    splits: dict[str, Split]  # "all" (cross-validated) or "train"/"dev"/"test"
    num_classes: int
    skipped_empty: int = 0


def _task_folder(root: Path, name: str) -> Path:
    folder = root / name
    if not folder.is_dir():
        raise InputFileError(f"{folder}: {name} folder not found (expected SentEval's data/downstream layout)")
    return folder


def read_binary(root: str | Path, name: str) -> TransferTask:
    """MR, CR, SUBJ or MPQA: one sentence per line, label from the file. Empty lines are skipped."""
    sub, files = BINARY[name]
    folder = _task_folder(Path(root), sub)
    pool, skipped = Split(), 0
    for label, filename in enumerate(files):
        with open_text(folder / filename, encoding="latin-1") as handle:  # as SentEval reads them
            for line in handle.read().splitlines():
                if line.strip():
                    pool.add(line.strip(), label)
                else:
                    skipped += 1
    return TransferTask(name, {"all": pool}, 2, skipped)


def read_sst2(root: str | Path) -> TransferTask:
    """SST-2: ``sentence<TAB>0|1`` per line in ``sentiment-{train,dev,test}``."""
    folder = _task_folder(Path(root), "SST") / "binary"
    splits = {}
    for split in ("train", "dev", "test"):
        part = Split()
        with open_text(folder / f"sentiment-{split}") as handle:
            for number, line in enumerate(handle.read().splitlines(), start=1):
                text, sep, label = line.rpartition("\t")
                if not sep or label.strip() not in ("0", "1"):
                    raise InputFileError(
                        f"{folder / f'sentiment-{split}'}: line {number}: expected sentence<TAB>0 or 1"
                    )
                part.add(text.strip(), int(label))
        splits[split] = part
    return TransferTask("SST2", splits, 2)


def read_trec(root: str | Path) -> TransferTask:
    """TREC: ``COARSE:fine question`` per line (latin-1); the label is the coarse class (6)."""
    folder = _task_folder(Path(root), "TREC")
    splits = {}
    for split, filename in (("train", "train_5500.label"), ("test", "TREC_10.label")):
        part = Split()
        with open_text(folder / filename, encoding="latin-1") as handle:
            for number, line in enumerate(handle.read().splitlines(), start=1):
                if not line.strip():
                    continue
                tag, _, question = line.partition(" ")
                coarse = tag.split(":", 1)[0]
                if coarse not in TREC_CLASSES:
                    raise InputFileError(
                        f"{folder / filename}: line {number}: class {coarse!r} is not one of {', '.join(TREC_CLASSES)}"
                    )
                part.add(question.strip(), TREC_CLASSES.index(coarse))
        splits[split] = part
    return TransferTask("TREC", splits, len(TREC_CLASSES))


def read_mrpc(root: str | Path) -> TransferTask:
    """MRPC: header, then Quality, #1 ID, #2 ID, #1 String, #2 String (tab-separated, UTF-8 with BOM)."""
    folder = _task_folder(Path(root), "MRPC")
    splits = {}
    for split in ("train", "test"):
        path = folder / f"msr_paraphrase_{split}.txt"
        part = Split()
        with open_text(path, encoding="utf-8-sig") as handle:
            lines = handle.read().splitlines()
        for number, line in enumerate(lines[1:], start=2):
            cols = line.split("\t")
            if len(cols) != 5 or cols[0] not in ("0", "1"):
                raise InputFileError(
                    f"{path}: line {number}: expected Quality (0/1), two IDs and two "
                    f"sentences, tab-separated; found {len(cols)} columns"
                )
            part.add((cols[3], cols[4]), int(cols[0]))
        splits[split] = part
    return TransferTask("MRPC", splits, 2)


def read_transfer_task(root: str | Path, name: str) -> TransferTask:
    """Read task ``name`` (one of ``TASKS``) from SentEval's ``data/downstream`` folder ``root``."""
    if name in BINARY:
        return read_binary(root, name)
    readers = {"SST2": read_sst2, "TREC": read_trec, "MRPC": read_mrpc}
    if name not in readers:
        raise ValueError(f"unknown transfer task {name!r}; expected one of {', '.join(TASKS)}")
    return readers[name](root)
