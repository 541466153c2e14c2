"""``adapt``: fit a model to a corpus from its documents alone, through the ordinary trainer."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sbert.adapt.methods import METHODS, Method, default_method, method
from sbert.adapt.pseudo_queries import PseudoQuery, pseudo_queries
from sbert.adapters import LORA_LR, LoraSettings
from sbert.atomic import check_replaceable
from sbert.data.beir import Document
from sbert.data.corpus import Columns, read_corpus_documents
from sbert.errors import InputFileError
from sbert.progress import report
from sbert.search.auto import ADAPT_RECORD, adapt_hold_out

if TYPE_CHECKING:
    from torch import nn

    from sbert.training.trainer import TrainConfig


@dataclass(frozen=True)
class AdaptSettings:
    """How ``adapt`` trains: the method (None: ``default_method`` of the documents), at most ``steps`` steps of
    ``batch_size`` rows, AdamW at ``lr`` with 10% warm-up; in-batch negatives at ``scale``; teacher methods:
    ``teacher`` (a local bi- or cross-encoder) scores ``negatives`` candidates a query (half the student's, half
    BM25's) for the ``steps * batch_size`` pseudo-queries that train (``trained_queries``), a bi-encoder reading
    texts cut to ``max_seq_length`` as the student does, and the KL objective divides scores by ``temperature``.
    ``steps`` bounds the time (see docs/adapt.md); ``max_seq_length`` cuts each training text to that many
    tokens (the saved model keeps its own limit): on two CPU cores a step over 256-token texts takes about three
    times as long as over 128. ``hold_out``: leave out of training the documents ``--auto`` draws that many
    pseudo-queries from (``sbert.search.auto.adapt_hold_out``; None: as many as it draws by default, at most a
    share of the corpus), their ids recorded in the model folder's ``adapt.json``, so that ``--auto`` with the
    model draws from exactly those and scores its choice of search on documents the model never trained on; 0
    trains on every document (``--auto`` then says it may have). ``guide`` (in-batch methods: a
    local bi-encoder): GISTEmbed's guided masking, dropping the in-batch candidates it scores above the row's
    own document less ``guide_margin`` (``sbert.losses.in_batch.Guide``; pseudo-queries miss positives: a
    title's duplicate report elsewhere in the batch is a negative to the plain loss). ``lora``: train a LoRA
    adapter of that shape instead of every weight, and save only it (``sbert.adapters``); ``lr`` None: ``LR``,
    or with ``lora`` ``LORA_LR`` (the low-rank updates start at zero: at the whole model's rate, 100 steps
    barely move them; benchmarks/results/adapters.md)."""

    method: str | None = None
    steps: int = 100
    batch_size: int = 32
    lr: float | None = None
    scale: float = 20.0
    seed: int = 42
    checkpoint_every: int = 25
    teacher: str | None = None
    negatives: int = 4
    temperature: float = 1.0  # distill-kl; 0.05 made the teacher's target nearly one-hot (docs/adapt.md)
    max_seq_length: int | None = 128
    hold_out: int | None = None
    guide: str | None = None
    guide_margin: float = 0.0
    lora: LoraSettings | None = None

    @property
    def learning_rate(self) -> float:
        """``lr``, or where it is None the default for what trains: every weight (``LR``) or an adapter."""
        return self.lr if self.lr is not None else LORA_LR if self.lora is not None else LR


def adapt(
    model: str | Path,
    corpus: str | Path,
    out: str | Path,
    settings: AdaptSettings = AdaptSettings(),
    *,
    resume: bool = False,
    device: str | None = None,
    progress: bool | None = None,
    on_step: Callable[[int, float], None] | None = None,
    columns: Columns | None = None,
) -> dict:
    """Train ``model`` on pseudo-queries from ``corpus``'s documents and save it to ``out`` (a
    sentence-transformers folder); returns the trainer's summary plus what was read and made. ``corpus``: a
    BEIR folder or a corpus file, read as ``sbert index build`` reads it (``columns``: a CSV/TSV's or JSON
    lines' text, title and id; ``read_corpus_documents``).

    Ctrl-C or SIGTERM saves a checkpoint in ``<out>.train`` and raises ``TrainingInterrupted``; the same
    call with ``resume=True`` goes on from it (the rows made again from the seed; a teacher's scores read
    back from ``<out>.train/teacher-scores.jsonl``, where Ctrl-C while it scores, ``ScoringInterrupted``,
    keeps its chunks so far). ``on_step(step, loss)`` is called after each step. A two-stage method
    (``Method.first``) trains its first stage into ``<out>.train/first-<method>`` (a resumed run that
    finished it goes straight on), then itself from that model.
    """
    from sbert.training.trainer import Objective, Trainer

    check_replaceable(out)  # a folder of other files is refused now, not after a teacher's hour of scoring
    documents, source = read_corpus_documents(corpus, columns)
    name = settings.method or default_method(documents)
    settings = replace(settings, method=name)
    chosen = method(name)
    if chosen.needs_teacher:
        check_teacher(settings)
    if settings.guide:
        check_guide(settings, chosen)
    if chosen.first:
        first = Path(out).with_name(Path(out).name + ".train") / f"first-{chosen.first}"
        if not (resume and (first / "modules.json").is_file()):
            stage = replace(settings, method=chosen.first, guide=None)
            adapt(model, corpus, first, stage, resume=resume, device=device, progress=progress, on_step=on_step,
                  columns=columns)  # fmt: skip
        model = first
    held, settings, documents, queries = _held_out_and_queries(documents, source, chosen, settings)
    report(plan(documents, held, source, queries, chosen, settings), progress)
    encoder = student(model, settings, device)
    run_dir = Path(out).with_name(Path(out).name + ".train")
    kept = TeacherScores(run_dir / SCORED, {"model": str(model), "corpus": str(source)}, resume, progress)
    rows, loss = training_rows(chosen, settings, encoder, documents, queries, kept)
    config = _train_config(settings, len(rows), progress)
    trainer = Trainer(encoder, [Objective(rows, loss, f"adapt:{settings.method}")], config, out, device=device)
    trainer.run_dir.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {"base_model": str(model), "corpus": str(source), "columns": asdict(columns or Columns())}
    record |= {"method": settings.method, "documents": len(documents)}
    record |= {"pairs": len(rows), "pseudo_queries": len(queries), "held_out": sorted(held)}
    text = json.dumps({**record, **asdict(settings), "lr": settings.learning_rate}, indent=2) + "\n"
    (trainer.run_dir / ADAPT_RECORD).write_text(text)
    summary = trainer.train(resume=resume, on_step=on_step)
    write_record(Path(out), text)
    return {**summary, **record}


def student(model: str | Path, settings: AdaptSettings, device: str | None):
    """The model ``adapt`` trains: ``model`` loaded, with a fresh LoRA adapter where ``settings.lora`` says
    (``sbert.adapters.for_training``)."""
    from sbert.adapters import for_training
    from sbert.training.recipe import build_encoder

    encoder = build_encoder(str(model), seed=settings.seed, device=device)
    return for_training(encoder, settings.lora, str(model), settings.seed)


def _held_out_and_queries(
    documents: list[Document], source: Path, chosen: Method, settings: AdaptSettings
) -> tuple[set[str], AdaptSettings, list[Document], list[PseudoQuery]]:
    """The documents held out for ``--auto`` (their ids), the settings with the hold-out settled, the documents
    that train and their pseudo-queries; each refusal (nothing left, nothing to learn) before any work."""
    held = set(adapt_hold_out(documents, settings.hold_out))
    hold_out = len(held) if settings.hold_out is None else settings.hold_out
    settings = replace(settings, hold_out=hold_out)
    check_trainable(documents, held, source, hold_out)
    total, documents = len(documents), [d for d in documents if d.id not in held]
    try:
        queries = drawn_queries(documents, source, chosen, settings)
    except ValueError as err:  # the documents the hold-out left could give none: say so
        if not held:
            raise
        raise type(err)(f"{err}; {held_out_words(held, total, len(documents), hold_out)}") from err
    if chosen.in_batch:
        check_learnable(queries, documents, source, settings)
    return held, settings, documents, queries


def write_record(out: Path, kept: str) -> None:
    """``adapt.json`` into the saved model's folder: what ``--auto`` reads to draw its pseudo-queries from the
    documents the model was not trained on (``sbert.search.auto.AdaptRecord``)."""
    from sbert.atomic import atomic_file

    with atomic_file(out / ADAPT_RECORD, "w", encoding="utf-8") as file:
        file.write(kept)


def check_learnable(queries: Sequence[PseudoQuery], documents: Sequence[Document], source: Path, settings) -> None:
    """Refuse, before any training, pseudo-queries no two of which can share a batch: the no-duplicates sampler
    would give every batch a single pair, from which in-batch negatives learn nothing (loss 0 at every step)."""
    from sbert.training.sampling import any_fit_together

    rows = [q.example() for q in queries]
    if not any_fit_together(rows):
        raise InputFileError(
            f"{source}: nothing to learn: every two of the {len(rows):,} pseudo-queries of method "
            f"{settings.method!r} share a text (a title or a document's text), so every batch would hold one pair "
            "and in-batch negatives none (loss 0 at every step); adapt needs documents whose titles and texts differ"
        )


LR = 2e-5  # the paper's, for every weight
MIN_DOCUMENTS = 2  # adapt learns what tells a collection's documents apart: one text alone teaches nothing


def held_out_words(held: set[str], total: int, kept: int, hold_out: int) -> str:
    """What the hold-out left to train on, and what to do about it, for a refusal."""
    return (
        f"with hold_out={hold_out} (--hold-out), {len(held):,} of the {total:,} documents are held out and "
        f"{kept:,} left to train on: hold out fewer (0 trains on every document)"
    )


def check_trainable(documents: Sequence[Document], held: set[str], source: Path, hold_out: int) -> None:
    """Refuse, before any training, a corpus that leaves fewer than ``MIN_DOCUMENTS`` distinct texts to train
    on, once the ``held`` documents (``hold_out``) are left out; the message gives the counts."""
    kept = [d for d in documents if d.id not in held]
    distinct = len({d.joined() for d in kept})
    if distinct >= MIN_DOCUMENTS:
        return
    everywhere = len({d.joined() for d in documents})
    if held and everywhere >= MIN_DOCUMENTS:  # the hold-out is what leaves too few
        raise ValueError(
            f"{source}: adapt needs at least {MIN_DOCUMENTS} distinct documents to train on and the hold-out "
            f"leaves {distinct:,}; {held_out_words(held, len(documents), len(kept), hold_out)}"
        )
    raise ValueError(
        f"{source}: {len(documents):,} document{'' if len(documents) == 1 else 's'} ({everywhere:,} distinct); "
        f"adapt needs at least {MIN_DOCUMENTS} distinct documents: it trains each pseudo-query to find its own "
        "document among the others"
    )


def plan(
    documents: Sequence[Document],
    held: set[str],
    source: Path,
    queries: Sequence[PseudoQuery],
    chosen: Method,
    settings: AdaptSettings,
) -> str:
    """What ``adapt`` says before its long work: documents, pseudo-queries, method, steps x batch."""
    left_out = f" ({len(held):,} more held out)" if held else ""
    line = (
        f"adapt: {len(documents):,} documents of {source}{left_out}, {len(queries):,} pseudo-queries "
        f"(method {settings.method}); {settings.steps:,} step{'' if settings.steps == 1 else 's'} x batch "
        f"{settings.batch_size}"
    )
    if chosen.needs_teacher:
        line += f"; the teacher scores {len(trained_queries(queries, settings)):,} of them first"
    return line


def _train_config(settings: AdaptSettings, rows: int, progress: bool | None) -> TrainConfig:
    """The trainer's settings: ``settings.steps`` steps over ``rows`` rows (as many epochs as that takes)."""
    from sbert.training.trainer import TrainConfig

    return TrainConfig(
        batch_size=settings.batch_size,
        lr=settings.learning_rate,
        seed=settings.seed,
        max_steps=settings.steps,
        epochs=max(1, -(-settings.steps * settings.batch_size // rows)),
        checkpoint_every=settings.checkpoint_every,
        progress=progress,
        max_seq_length=settings.max_seq_length,  # the saved model keeps its own limit
    )


def check_teacher(settings: AdaptSettings) -> None:
    """Refuse a teacher method without a teacher, or with one that is not a local model, before any work (the
    teacher is loaded only once the student has found the candidates)."""
    from sbert.losses.teachers import teacher_folder

    if not settings.teacher:
        raise ValueError(f"adapt method {settings.method!r} needs a teacher model (--teacher)")
    teacher_folder(settings.teacher)


def check_guide(settings: AdaptSettings, chosen: Method) -> None:
    """Refuse a guide for a method without in-batch negatives, or one that is not a local model, before any
    work (a two-stage method's guide masks its in-batch stage only)."""
    from sbert.losses.teachers import is_cross_encoder_folder, teacher_folder

    if not settings.guide:
        return
    if not chosen.in_batch:
        raise ValueError(
            f"--guide masks in-batch negatives; adapt method {settings.method!r} trains {chosen.objective}, "
            f"which has none (in-batch methods: {', '.join(n for n, m in METHODS.items() if m.in_batch)})"
        )
    if is_cross_encoder_folder(teacher_folder(settings.guide)):
        raise ValueError(
            f"--guide {settings.guide}: a cross-encoder; a guide must be a bi-encoder (it scores every "
            "pseudo-query against every text of its batch)"
        )


def drawn_queries(
    documents: Sequence[Document], source: Path, chosen: Method, settings: AdaptSettings
) -> list[PseudoQuery]:
    """The method's pseudo-queries over ``documents``; none, or a generator's refusal, is an error naming
    ``source``."""
    try:
        queries = pseudo_queries(documents, chosen.generators, settings.seed)
    except InputFileError as err:  # the generator knows the documents, not the file they came from
        raise InputFileError(f"{source}: {err}") from err
    if not queries:
        raise ValueError(f"{source}: no document gave a pseudo-query for method {settings.method!r}")
    return queries


@dataclass(frozen=True)
class TeacherScores:
    """Where a teacher method keeps its scored candidates (``path``), the inputs besides the settings that
    decide them (``inputs``: model and corpus), whether a kept file may be read back (``resume``), and
    whether the student's and teacher's encodes show bars (``progress``)."""

    path: Path | None = None
    inputs: dict | None = None
    resume: bool = False
    progress: bool | None = False


SCORED = "teacher-scores.jsonl"  # in <out>.train: a teacher method's candidates and scores (sbert.adapt.teacher)
# The settings a teacher's kept scores were made with (a resumed run with others scores afresh).
SCORES_DEPEND_ON = ("method", "teacher", "negatives", "seed", "hold_out", "max_seq_length")


def training_rows(
    chosen: Method,
    settings: AdaptSettings,
    student,
    documents: Sequence[Document],
    queries: Sequence[PseudoQuery],
    kept: TeacherScores = TeacherScores(),
) -> tuple[list, nn.Module]:
    """The rows the method trains on and its loss: (query, positive) pairs for in-batch negatives, or
    teacher-scored candidates for the distillation objectives, of the ``trained_queries`` only
    (``sbert.adapt.teacher.scored_rows``: written to ``kept.path`` as they are scored, read back by a resumed
    run with the same inputs), or each document's text for TSDAE."""
    if chosen.kind.texts_alone:  # each document's text once (TSDAE)
        from sbert.data.examples import Text

        return [Text(q.positive) for q in queries], objective_loss(chosen, settings, student)
    if not chosen.needs_teacher:
        return [q.example() for q in queries], objective_loss(chosen, settings, student)
    from sbert.adapt.teacher import scored_key, scored_rows

    teacher = settings.teacher
    if not teacher:  # refused by adapt first (check_teacher), and so here for a direct call
        raise ValueError(f"adapt method {settings.method!r} needs a teacher model (--teacher)")
    queries = trained_queries(queries, settings)
    decided = {k: getattr(settings, k) for k in SCORES_DEPEND_ON}
    key = scored_key(queries, **(kept.inputs or {}), **decided)
    dense = settings.negatives - settings.negatives // 2
    rows = scored_rows(
        student,
        teacher,
        documents,
        queries,
        dense,
        settings.negatives // 2,
        path=kept.path,
        key=key,
        resume=kept.resume,
        show_progress=kept.progress,
        max_seq_length=settings.max_seq_length,  # the teacher scores the text the student reads
    )
    return rows, objective_loss(chosen, settings, student)


def objective_loss(chosen: Method, settings: AdaptSettings, student) -> nn.Module:
    """The method's loss, as its ``OBJECTIVES`` entry builds it from these settings: no teacher (the rows carry
    its scores), a guide reading the text the student reads, TSDAE's deletions drawn from ``settings.seed``."""
    from sbert.losses.objectives import LossInputs

    kind = chosen.kind
    given = {"scale": settings.scale, "temperature": settings.temperature, "teacher": ""}
    given |= {"guide": settings.guide or "", "guide_margin": settings.guide_margin}
    own = {**kind.settings, **{key: value for key, value in given.items() if key in kind.settings}}
    dim = getattr(student, "model_dim", 0)  # only a classification head reads the width: no adapt method has one
    inputs = LossInputs(own, dim, model=student, text_length=settings.max_seq_length, seed=settings.seed)
    return kind.bi_encoder(inputs)


def trained_queries(queries: Sequence[PseudoQuery], settings: AdaptSettings) -> list[PseudoQuery]:
    """The pseudo-queries a teacher method scores: no more than its ``steps`` batches can train on.

    ``pseudo_queries`` gives them in a seeded shuffled order, so the first ``steps * batch_size`` are a seeded
    draw of them all, as the trainer's own shuffle would take. Scoring the rest would cost the teacher's time
    (the long part of a teacher method, growing with the corpus) for rows no step reads: SciFact's 10,366
    title and crop pseudo-queries at 100 steps of 32 train on 3,200."""
    return list(queries[: settings.steps * settings.batch_size])
