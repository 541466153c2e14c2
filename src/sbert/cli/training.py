"""``sbert train`` and ``sbert eval``: thin shells over ``sbert.training`` and ``sbert.evaluation``."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from sbert.cli.adapters import lora_options
from sbert.cli.common import MODEL_HELP, auto_kind_option, device_options, friendly_errors, load_model, one_model
from sbert.data.formats import FORMATS
from sbert.evaluation.tasks import GROUPS, TASKS
from sbert.progress import HELP as PROGRESS_HELP


class _TableChoice(click.Choice):
    """A choice among the names of a table in a module that loads torch, read when a command parses or
    shows its help: importing the CLI stays fast."""

    def __init__(self, module: str, table: str) -> None:  # no super().__init__: ``choices`` is read lazily
        self.module, self.table, self.case_sensitive = module, table, True

    @property
    def choices(self) -> tuple[str, ...]:
        import importlib

        return tuple(getattr(importlib.import_module(self.module), self.table))


class _WithObjectiveSettings(click.Command):
    """``sbert train``: its own options, and one per objective setting (``--<setting-name>``, read from
    ``sbert.losses.objectives.OBJECTIVES``' settings when the command's options are first looked at, so
    importing the CLI stays fast): a setting added to an objective is an option with no change here."""

    @property
    def params(self) -> list[click.Parameter]:
        if not self._settings_added:
            self._settings_added = True
            self._params.extend(_setting_options({p.name for p in self._params}))
        return self._params

    @params.setter
    def params(self, value: list[click.Parameter]) -> None:
        self._params, self._settings_added = value, False


def _setting_options(taken: set[str | None]) -> list[click.Option]:
    """One option per objective setting not already an option: its type from its default (or its choices),
    its help from ``SETTING_HELP`` plus the objectives that use it and their defaults."""
    from sbert.losses.objectives import SETTING_CHOICES, SETTING_HELP, setting_defaults

    options = []
    for name, defaults in setting_defaults().items():
        if name in taken:
            continue
        first = next(iter(defaults.values()))
        kind: click.ParamType | type = str
        if name in SETTING_CHOICES:
            kind = click.Choice(SETTING_CHOICES[name])
        elif isinstance(first, bool):
            kind = bool
        elif isinstance(first, int):
            kind = click.IntRange(min=1)
        elif isinstance(first, float):
            kind = float
        shown = ", ".join(f"{objective} {default!r}" for objective, default in defaults.items())
        text = f"{SETTING_HELP.get(name, '')} [objectives and defaults: {shown}]".strip()
        options.append(click.Option([f"--{name.replace('_', '-')}", name], type=kind, default=None, help=text))
    return options


@click.command(cls=_WithObjectiveSettings)
@click.option(
    "--config",
    "run_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="A TOML/YAML run file (several objectives); the other options override its settings.",
)
@click.option("--model", "-m", default=None, help=MODEL_HELP + " [default: default]")
@click.option("--objective", type=_TableChoice("sbert.losses.objectives", "OBJECTIVES"))
@click.option(
    "--train",
    "train",
    multiple=True,
    help="Training data: a file (a folder for --format "
    + " or ".join(f.name for f in FORMATS.values() if "folder" in f.reads)
    + ").",
)
@click.option("--format", "fmt", type=click.Choice(list(FORMATS)))
@click.option("--dev", help="Dev data, evaluated every --eval-every steps and at the end; the best model is kept.")
@click.option("--dev-format", type=click.Choice(list(FORMATS)))
@click.option("--out", "-o", help="Output folder: a sentence-transformers model (checkpoints in OUT.train/).")
@click.option("--epochs", type=click.IntRange(min=1), help="[default: 1]")
@click.option("--batch-size", type=click.IntRange(min=1), help="[default: 16]")
@click.option("--lr", type=float, help="Peak learning rate of AdamW [default: 2e-5].")
@click.option("--warmup", type=click.FloatRange(0, 1), help="Warm-up as a fraction of the steps [default: 0.1].")
@click.option("--max-steps", type=click.IntRange(min=1), help="Stop after this many steps.")
@click.option("--seed", type=int, help="[default: 42]")
@click.option("--eval-every", type=click.IntRange(min=1), help="Steps between dev evaluations.")
@click.option(
    "--no-duplicates/--allow-duplicates",
    default=None,
    help="In-batch objectives: keep a text out of a batch that already holds it [default: on].",
)
@click.option("--checkpoint-every", type=click.IntRange(min=1), help="Steps between checkpoints [default: 500].")
@click.option("--pooling", type=_TableChoice("sbert.modules.pooling", "MODES"), help="Change the pooling.")
@click.option(
    "--normalize/--no-normalize",
    default=None,
    help="Add or remove a final Normalize layer (default: keep the model's). The paper has none.",
)
@click.option(
    "--matryoshka",
    metavar="DIMS",
    help="Train the loss at these widths too, e.g. 384,256,128,64 (Matryoshka; use them with --truncate-dim).",
)
@click.option(
    "--init",
    type=_TableChoice("sbert.training.spec", "INITS"),
    help="'random': same architecture, random weights (the no-pre-training control).",
)
@click.option(
    "--cross-encoder",
    is_flag=True,
    default=None,
    help="Train a cross-encoder (both sentences through the transformer, a new head) instead: "
    "regression (1 score, BCE on scores scaled to [0,1]) or classification.",
)
@lora_options
@click.option("--resume", is_flag=True, help="Go on from OUT.train/checkpoint.pt if there is one.")
@click.option("--overwrite", is_flag=True, help="Replace a model already at --out (refused otherwise).")
@click.option(
    "--keep-checkpoint",
    is_flag=True,
    default=None,
    help="Keep OUT.train/checkpoint.pt (the final state) after a finished run; by default it is removed.",
)
@click.option("--device", default=None, help="cpu, cuda, cuda:1 ... (default: cuda if present).")
@click.option("--allow-pickle", is_flag=True, default=None, help="Allow pytorch_model.bin weights (can run code).")
@click.option("--progress/--no-progress", default=None, help=f"{PROGRESS_HELP} [default: on].")
@click.option(
    "--nproc",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Train data-parallel on this many local processes (torchrun --standalone: gloo on CPU, "
    "NCCL and one GPU each on CUDA); --batch-size stays the global batch.",
)
@friendly_errors
def train(run_file, train, fmt, resume, overwrite, nproc, **options) -> None:
    """Fine-tune a model with the paper's objectives (or in-batch negatives)."""
    if nproc > 1:
        _relaunch_under_torchrun(nproc)
    from sbert.training import TrainingInterrupted
    from sbert.training.recipe import finished_message, run
    from sbert.training.spec import load_run_file, run_spec, values_from_options
    from sbert.training.trainer import check_out

    values = values_from_options({**options, "format": fmt}, train)
    if run_file is not None:
        if "objectives" in values:
            raise click.UsageError(
                "--objective, --format and --train describe one objective; with --config, "
                "the run file's [[objectives]] tables do"
            )
        spec = load_run_file(run_file, values)
    else:
        wanted = (("objective", options["objective"]), ("train", train), ("format", fmt), ("out", options["out"]))
        missing = [f"--{name}" for name, value in wanted if not value]
        if missing:
            raise click.UsageError(f"missing {', '.join(missing)} (or give a --config run file)")
        spec = run_spec(values)
    check_out(spec.out, overwrite=overwrite, resume=resume)  # before any model or data is read
    try:
        summary = run(spec, resume=resume)
    except TrainingInterrupted as stop:  # SIGINT/SIGTERM: a checkpoint was saved at the step reached
        click.echo(stop.explain(sys.argv), err=True)
        sys.exit(stop.exit_code)
    click.echo(finished_message(summary), err=True)


def _relaunch_under_torchrun(nproc: int) -> None:
    """Replace this process by ``torchrun --standalone --nproc_per_node N -m sbert train ...`` with the same
    options but ``--nproc`` (torchrun forwards signals to the ranks and returns the run's exit status)."""
    import os

    if "LOCAL_RANK" in os.environ:
        raise click.UsageError("--nproc starts torchrun itself: leave it out when running under torchrun")
    args, rest = [], iter(sys.argv[1:])
    for arg in rest:
        if arg == "--nproc":
            next(rest, None)
        elif not arg.startswith("--nproc="):
            args.append(arg)
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}"]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [*command, "-m", "sbert", *args])


@click.command(name="eval")
@click.argument("model_arg", metavar="[MODEL]", required=False)
@click.option("--model", "-m", default=None, help=MODEL_HELP + " Same as MODEL. [default: default]")
@click.option(
    "--tasks",
    "-t",
    default=None,
    help=f"Comma-separated: {', '.join(TASKS)}; or the groups {', '.join(GROUPS)} "
    "[default: stsb,sick-r, or none with --retrieval].",
)
@click.option(
    "--retrieval",
    "retrieval_dirs",
    multiple=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="A BEIR-layout folder (corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv; .gz or not) to evaluate "
    "retrieval on: NDCG@10, MRR@10, MAP@100, recall@k x 100 and query latency. Repeatable.",
)
@click.option(
    "--triage",
    "triage_dirs",
    multiple=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="A BEIR-layout folder whose judged duplicates choose what `sbert search --threshold` and `--lead` need: "
    "each query against its relevant documents and its best-ranked other one (the cosine threshold), and whether "
    "each query's top hit is a duplicate (the lead over hits 2-10); the best F1's cut-off, precision and recall "
    "(x 100). Repeatable.",
)
@click.option(
    "--split", default="test", show_default=True, help="--retrieval and --triage folders: the qrels split to read."
)
@click.option(
    "--skip-empty-documents",
    is_flag=True,
    help="--retrieval folders: drop documents with neither title nor text (refused otherwise).",
)
@click.option("--chunk", is_flag=True, help="Retrieval: embed documents in token windows, not cut at the limit.")
@click.option("--mode", type=click.Choice(["maxp", "mean"]), help="--chunk: score by the best window or the mean.")
@click.option("--window", type=click.IntRange(min=1), help="--chunk: tokens per window [default: the model's limit].")
@click.option(
    "--overlap", type=click.IntRange(min=0), help="--chunk: tokens shared [default: 32, a quarter of a shorter window]."
)
@click.option(
    "--max-windows",
    type=click.IntRange(min=0),
    help="--chunk: windows kept per document, its first ones; 0 keeps every window [default: 32, as index build].",
)
@click.option(
    "--hybrid/--dense",
    default=None,
    help="Retrieval: fuse the dense ranking with BM25 (weighted 0.7), as a default index is searched, or the "
    "embeddings alone (the model's own figure) [default: hybrid, unless --bm25 or --auto].",
)
@click.option("--fusion", type=click.Choice(["rrf", "weighted"]), help="--hybrid: how [default: weighted].")
@click.option("--alpha", type=click.FloatRange(0, 1), help="--fusion weighted: the dense side's weight [0.7].")
@click.option("--bm25", "lexical", is_flag=True, help="Retrieval: BM25 alone (the model is not used for it).")
@click.option(
    "--auto",
    is_flag=True,
    help="Retrieval: choose --chunk/--hybrid/--fusion/--alpha on pseudo-queries from the corpus, never the "
    "judged queries (what sbert index build --auto chooses), then score that choice.",
)
@auto_kind_option
@click.option(
    "--rerank",
    metavar="CROSS_ENCODER",
    help="Retrieval: a cross-encoder folder re-scores each query's --candidates best documents.",
)
@click.option("--candidates", type=click.IntRange(min=1), help="--rerank: documents re-scored per query [100].")
@click.option(
    "--data",
    type=click.Path(file_okay=False, path_type=Path),
    help="Data folder (default: $SBERT_DATA, else ../shared/data).",
)
@click.option("--tokenized", is_flag=True, help="STS12-16: read SentEval's tokenised copies, not the release.")
@click.option(
    "--inner-folds",
    default=5,
    show_default=True,
    type=click.IntRange(min=2),
    help="SentEval tasks: folds of the inner cross-validation choosing the regularisation.",
)
@click.option("--batch-size", default=32, show_default=True, type=click.IntRange(min=1))
@click.option(
    "--json",
    "json_out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write every metric to this JSON file.",
)
@click.option(
    "--run",
    "run_out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Retrieval: also write each query's ranking as a TREC run file (qid Q0 docid rank score tag); "
    "with several collections, one file each (FILE's stem + '.<collection>').",
)
@click.option("--cross-encoder", is_flag=True, help="MODEL is a cross-encoder: STS tasks score its pair outputs.")
@click.option(
    "--progress/--no-progress", default=None, help=f"{PROGRESS_HELP} [default: for long steps, large corpora]."
)
@device_options
@friendly_errors
def evaluate(
    model_arg,
    model,
    tasks,
    retrieval_dirs,
    triage_dirs,
    split,
    skip_empty_documents,
    data,
    tokenized,
    inner_folds,
    batch_size,
    json_out,
    run_out,
    cross_encoder,
    progress,
    runtime,
    allow_pickle,
    **retrieval_options,
) -> None:
    """Score MODEL on STS (Spearman x 100 of cosine), SentEval transfer tasks (accuracy x 100) and
    retrieval (NDCG@10 x 100); --triage chooses `sbert search --threshold` and `--lead` (F1 x 100)."""
    from sbert.evaluation import suite

    model = one_model(model_arg, model)
    folders = suite.task_folders(tasks, (*retrieval_dirs, *triage_dirs), data)
    if cross_encoder and suite.needs_embeddings(folders, retrieval_dirs, triage_dirs):
        raise click.UsageError("retrieval needs an embedding model; a cross-encoder only scores pairs")
    how = _retrieval_settings(batch_size, **retrieval_options)
    found = suite.evaluators(
        folders,
        retrieval_dirs,
        split=split,
        skip_empty_documents=skip_empty_documents,
        tokenized=tokenized,
        inner_folds=inner_folds,
        retrieval=how,
        triage_dirs=triage_dirs,
    )
    if not found:
        raise click.UsageError("nothing to evaluate: give --tasks, --retrieval or --triage")
    if run_out is not None and not suite.has_rankings(found):
        raise click.UsageError("--run writes retrieval rankings: give --retrieval or a retrieval task")
    if cross_encoder:
        from sbert.cross_encoder import CrossEncoder

        encoder = CrossEncoder.load(model, device=runtime.device, allow_pickle=allow_pickle)
    else:
        encoder = load_model(model, runtime, allow_pickle)
    results, rows = suite.run_evaluators(
        found, encoder, progress, starting=lambda name: click.echo(f"evaluating {name} ...", err=True)
    )
    _print_scores(rows, results)
    if json_out is not None:
        suite.save_results(json_out, model, results)
    if run_out is not None:
        for written in suite.write_rankings(run_out, found):
            click.echo(f"wrote {written}", err=True)


def _print_scores(rows: list, results: dict[str, dict]) -> None:
    """The table of headline scores, then for each --triage folder the threshold and the lead it chose for search."""
    width = max(len(r.name) for r in rows)
    click.echo(f"{'task':<{width}}  {'score':>7}  {'seconds':>7}  metric")
    for row in rows:
        click.echo(f"{row.name:<{width}}  {row.value:7.2f}  {row.seconds:7.1f}  {row.metric}")
    for name, metrics in results.items():
        if name.endswith(":triage"):
            click.echo(
                f"{name}: a duplicate at cosine >= {metrics['f1_threshold']:.4f} (F1 {metrics['f1']:.1f}, precision "
                f"{metrics['precision']:.1f}, recall {metrics['recall']:.1f} on {metrics['pairs']:,.0f} pairs of this "
                f"split): sbert search INDEX QUERY --threshold {metrics['f1_threshold']:.4f}"
            )
            lead, f1, precision, recall, right = (
                metrics[key] for key in ("lead_threshold", "lead_f1", "lead_precision", "lead_recall", "top_hit_right")
            )
            click.echo(
                f"{name}: the top hit is the duplicate when its cosine leads hits 2-10's mean by >= {lead:.4f} (F1 "
                f"{f1:.1f}, precision {precision:.1f}, recall {recall:.1f}; the top hit is a duplicate for "
                f"{right:.1f}% of the queries): sbert search INDEX QUERY --lead {lead:.4f}"
            )


def _retrieval_settings(batch_size: int, **options):
    """How retrieval tasks retrieve (--chunk, --hybrid, --bm25 and their settings)."""
    from sbert.evaluation.retrievers import RetrievalSettings

    if options["hybrid"] is None:  # what sbert index build + sbert search do when given no option
        options["hybrid"] = not (options["lexical"] or options["auto"])
    if options.get("max_windows") is None:
        options.pop("max_windows", None)  # the library's default bound
    elif options["max_windows"] == 0:
        options["max_windows"] = None  # every window
    try:
        return RetrievalSettings(batch_size=batch_size, **options)
    except ValueError as err:
        raise click.UsageError(str(err).replace("lexical", "--bm25").replace("max_windows", "--max-windows")) from None
