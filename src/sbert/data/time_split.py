"""A time-respecting split of a BEIR collection's judgments: train on the past, test on the future.

Duplicate-bug retrieval (openoffice-dups) asks, for a new report, which earlier report it duplicates.
Training on pairs drawn at random from all reports would let the model see later reports, so the
judgments are split at a cut-off in time: queries created before it become the ``train`` split, the
rest the ``test`` split. The time comes from a field of each query (``created`` in openoffice-dups:
``2000-10-25 10:37:00 +0000``); where a collection has none, ``time_field=None`` orders queries by
numeric id instead (a proxy: bug trackers number reports as they arrive). The corpus stays whole:
masters carry no date, so a test query may find a master that a train query also pointed at, as it
would have at the time.

``split_by_time`` writes a BEIR folder (corpus and queries copied, ``qrels/train.tsv``,
``qrels/test.tsv`` and ``split.json`` saying how it was cut) that ``--format beir`` trains on and the
retrieval evaluation reads.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from sbert.atomic import atomic_dir
from sbert.data.paths import open_text
from sbert.errors import InputFileError

_FORMATS = ("%Y-%m-%d %H:%M:%S %z", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d")


@dataclass(frozen=True)
class TimeSplit:
    """How a collection was cut: the cut-off (queries at or after it are test), what ordered the queries,
    and the number of queries and judgments on each side."""

    cutoff: str
    order: str  # "created" (a field) or "id"
    train_queries: int
    test_queries: int
    train_judgments: int
    test_judgments: int
    source: str


def parse_time(text: str) -> datetime:
    """A timestamp as ``2000-10-25 10:37:00 +0000``, ``2000-10-25 10:37:00``, ``2000-10-25`` or ISO 8601;
    without a zone it is taken as UTC."""
    for form in _FORMATS:
        try:
            stamp = datetime.strptime(text.strip(), form)
            break
        except ValueError:
            continue
    else:
        stamp = datetime.fromisoformat(text.strip())  # ValueError names the text
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)


def query_times(path: Path, wanted: set[str], field: str | None) -> dict[str, tuple]:
    """Query id -> a sort key in time order, for the ``wanted`` ids of a BEIR ``queries.jsonl[.gz]``:
    ``(datetime, id)`` from ``field``, or ``(int(id),)`` when ``field`` is None."""
    keys: dict[str, tuple] = {}
    what = f'a "{field}" timestamp (e.g. 2000-10-25 10:37:00 +0000)' if field else "a numeric id"
    with open_text(path) as handle:
        for number, line in enumerate(handle, start=1):
            try:
                record = json.loads(line) if line.strip() else {}
                query_id = str(record.get("_id"))
                if query_id in wanted:
                    keys[query_id] = (parse_time(record[field]), query_id) if field else (int(query_id),)
            except (KeyError, TypeError, ValueError, AttributeError):
                raise InputFileError(f"{path}: line {number}: expected a query object with {what}") from None
    return keys


def cutoff_key(keys: dict[str, tuple], cutoff: str | None, train_fraction: float, field: str | None) -> tuple:
    """The sort key of the cut-off: given, or the first key past ``train_fraction`` of the queries."""
    if cutoff is not None:
        try:
            return (parse_time(cutoff), "") if field else (int(cutoff),)
        except ValueError:
            raise ValueError(f"cutoff {cutoff!r}: expected {'a timestamp' if field else 'a numeric id'}") from None
    if not 0 < train_fraction < 1:
        raise ValueError(f"train_fraction must be between 0 and 1, got {train_fraction}")
    ordered = sorted(keys.values())
    first_test = ordered[min(len(ordered) - 1, int(train_fraction * len(ordered)))]
    return (first_test[0], "") if field else first_test  # queries at the cut-off's very time are all test


def write_qrels(path: Path, qrels: dict[str, dict[str, int]], ids: list[str]) -> None:
    """A BEIR qrels file (header row) of the judgments of the queries ``ids``, in that order."""
    rows = [f"{q}\t{d}\t{s}\n" for q in ids for d, s in qrels[q].items()]
    path.write_text("query-id\tcorpus-id\tscore\n" + "".join(rows), encoding="utf-8")


def split_by_time(
    folder: str | Path,
    out: str | Path,
    *,
    split: str = "test",
    cutoff: str | None = None,
    train_fraction: float = 0.8,
    time_field: str | None = "created",
) -> TimeSplit:
    """Cut the judgments of ``split`` of the BEIR folder ``folder`` in time and write a BEIR folder at
    ``out`` whose ``train`` split holds the queries before ``cutoff`` (a timestamp, or an id when
    ``time_field`` is None) and whose ``test`` split holds the rest. Without ``cutoff``, the cut falls
    after the oldest ``train_fraction`` of the queries. Returns the ``TimeSplit`` (also in ``split.json``)."""
    from sbert.data.beir import beir_file, read_beir

    folder, out = Path(folder), Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise FileExistsError(f"{out}: already exists; choose a new (or empty) folder for the split collection")
    qrels = read_beir(folder, split).qrels  # checks every file and every judgment
    queries_path = beir_file(folder, "queries.jsonl")
    keys = query_times(queries_path, set(qrels), time_field)
    cut = cutoff_key(keys, cutoff, train_fraction, time_field)
    ordered = sorted(qrels, key=keys.__getitem__)
    train = [q for q in ordered if keys[q] < cut]
    test = [q for q in ordered if keys[q] >= cut]
    if not train or not test:
        raise ValueError(f"cut-off {cut[0]}: {len(train)} train and {len(test)} test queries; both must be non-empty")
    shown = cut[0].isoformat(sep=" ") if time_field else str(cut[0])
    info = TimeSplit(
        shown,
        time_field or "id",
        len(train),
        len(test),
        sum(len(qrels[q]) for q in train),
        sum(len(qrels[q]) for q in test),
        str(folder),
    )
    with atomic_dir(out) as tmp:
        corpus = beir_file(folder, "corpus.jsonl")
        shutil.copyfile(corpus, tmp / corpus.name)
        shutil.copyfile(queries_path, tmp / queries_path.name)
        (tmp / "qrels").mkdir()
        write_qrels(tmp / "qrels" / "train.tsv", qrels, train)
        write_qrels(tmp / "qrels" / "test.tsv", qrels, test)
        (tmp / "split.json").write_text(json.dumps(asdict(info), indent=2) + "\n", encoding="utf-8")
    return info
