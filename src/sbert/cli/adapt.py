"""``sbert adapt``: fit a model to a collection from its documents alone (a thin shell over ``sbert.adapt``)."""

from __future__ import annotations

import sys

import click

from sbert.adapt.methods import DEFAULT_METHOD, METHODS, MIN_TITLED, UNTITLED_METHOD
from sbert.adapt.recipe import LR, AdaptSettings
from sbert.adapters import LORA_LR, LoraSettings
from sbert.cli.adapters import lora_options
from sbert.cli.common import CORPUS_HELP, MODEL_HELP, column_options, friendly_errors
from sbert.progress import HELP as PROGRESS_HELP
from sbert.search.auto import HOLD_OUT_SHARE
from sbert.search.auto import QUERIES as AUTO_QUERIES

_METHODS_HELP = "; ".join(f"{name}: {m.help}" for name, m in METHODS.items())


@click.command(
    help="Fit MODEL to the documents of --corpus, reading no queries and no judgments; saves a "
    "sentence-transformers folder to --out. MODEL: " + MODEL_HELP
)
@click.argument("model", metavar="MODEL")
@click.option("--corpus", required=True, help=CORPUS_HELP)
@column_options
@click.option(
    "--out",
    "-o",
    required=True,
    help="Output folder (a sentence-transformers model); checkpoints in OUT.train/.",
)
@click.option(
    "--method",
    type=click.Choice(list(METHODS)),
    default=None,
    help=f"How pseudo-queries are drawn ({_METHODS_HELP}). Default: {DEFAULT_METHOD}, whose gain over the model "
    "averaged over the two collections of benchmarks/adapt.py is the highest (bug reports and abstracts, three "
    "seeds; docs/adapt.md); where fewer than "
    f"{MIN_TITLED:.0%} of the documents have a title, {UNTITLED_METHOD}, the best method that needs none.",
)
@click.option(
    "--hold-out",
    type=click.IntRange(min=0),
    default=None,
    metavar="N",
    help="Leave out of training the N documents --auto draws its pseudo-queries from, and record their ids in "
    "OUT/adapt.json: --auto with this model then draws from exactly those, so that its choice of search is "
    "scored on documents the model never trained on. 0: train on every document (--auto then warns that the "
    f"model may have trained on its pseudo-queries). [default: {AUTO_QUERIES}, as many as --auto draws, or "
    f"{HOLD_OUT_SHARE:.0%} of the documents where that is fewer]",
)
@click.option("--steps", type=click.IntRange(min=1), default=AdaptSettings.steps, show_default=True)
@click.option("--batch-size", type=click.IntRange(min=2), default=AdaptSettings.batch_size, show_default=True)
@click.option(
    "--lr",
    type=float,
    default=None,
    help=f"The learning rate [default: {LR:g}; with --lora {LORA_LR:.0e}: an adapter starts at zero and needs larger "
    "steps].",
)
@click.option("--seed", type=int, default=AdaptSettings.seed, show_default=True)
@click.option(
    "--teacher",
    default=None,
    metavar="MODEL",
    help="Teacher methods: a local bi-encoder or cross-encoder folder or name. It scores the pseudo-queries the "
    "steps train on (--steps x --batch-size of them), a bi-encoder reading each text cut to --max-seq-length.",
)
@click.option(
    "--negatives",
    type=click.IntRange(min=1),
    default=AdaptSettings.negatives,
    show_default=True,
    help="Teacher methods: candidates scored per pseudo-query (half the student's, half BM25's).",
)
@click.option(
    "--temperature",
    type=click.FloatRange(min=0, min_open=True),
    default=AdaptSettings.temperature,
    show_default=True,
    help="distill-kl: the softmax temperature over the candidates (teacher's and student's scores alike); "
    "1, as sbert train's and sentence-transformers' KL loss, measured better than 0.05 (docs/adapt.md).",
)
@click.option(
    "--max-seq-length",
    type=click.IntRange(min=8),
    default=AdaptSettings.max_seq_length,
    show_default=True,
    help="Cut each training text to this many tokens (the saved model keeps its own limit); a bi-encoder "
    "teacher reads them cut the same.",
)
@click.option(
    "--guide",
    default=None,
    metavar="MODEL",
    help="In-batch methods: a local bi-encoder (e.g. all-mpnet-base-v2) whose scores drop the in-batch "
    "candidates it ranks above a pseudo-query's own document (GISTEmbed's guided masking), reading each text "
    "cut to --max-seq-length. Off by default (docs/adapt.md has what it measured).",
)
@click.option(
    "--guide-margin",
    type=float,
    default=AdaptSettings.guide_margin,
    show_default=True,
    help="--guide: drop a candidate the guide scores above the document's score minus this (0: GISTEmbed's).",
)
@lora_options
@click.option("--resume", is_flag=True, help="Go on from OUT.train/checkpoint.pt (after Ctrl-C).")
@click.option("--overwrite", is_flag=True, help="Replace a model already at --out (refused otherwise).")
@click.option("--device", default=None, help="cpu, cuda, ... (default: cuda if present).")
@click.option("--progress/--no-progress", default=None, help=f"{PROGRESS_HELP} [default: on].")
@friendly_errors
def adapt(
    model,
    corpus,
    columns,
    out,
    method,
    hold_out,
    steps,
    batch_size,
    lr,
    seed,
    teacher,
    negatives,
    temperature,
    max_seq_length,
    guide,
    guide_margin,
    lora,
    lora_rank,
    lora_alpha,
    lora_targets,
    resume,
    overwrite,
    device,
    progress,
) -> None:
    from sbert.adapt import adapt as run_adapt
    from sbert.adapt.teacher import ScoringInterrupted
    from sbert.training import TrainingInterrupted
    from sbert.training.trainer import check_out

    check_out(out, overwrite=overwrite, resume=resume)  # before the corpus is read and the model loaded
    adapter = LoraSettings.chosen(lora, lora_rank, lora_alpha, lora_targets)
    settings = AdaptSettings(
        method,
        steps,
        batch_size,
        lr,
        seed=seed,
        teacher=teacher,
        negatives=negatives,
        temperature=temperature,
        max_seq_length=max_seq_length,
        hold_out=hold_out,
        guide=guide,
        guide_margin=guide_margin,
        lora=adapter,
    )
    try:
        summary = run_adapt(
            model, corpus, out, settings, resume=resume, device=device, progress=progress, columns=columns
        )
    except (TrainingInterrupted, ScoringInterrupted) as stop:
        click.echo(stop.explain(sys.argv), err=True)
        sys.exit(stop.exit_code)
    click.echo(_finished(summary), err=True)


def _finished(summary: dict) -> str:
    """The last line of a finished run: what it trained on, how fast, where the model went."""
    from sbert.losses.in_batch import Dropped

    held = f", {len(summary['held_out'])} documents held out" if summary["held_out"] else ""
    drawn = summary["pseudo_queries"]
    of = f" of {drawn:,}" if summary["pairs"] < drawn else ""  # a teacher method scores only what trains
    guided = "".join(f"; the guide: {Dropped(**n)}" for n in summary.get("guide_dropped", {}).values())
    return (
        f"adapted on {summary['pairs']:,}{of} pseudo-queries from {summary['documents']:,} documents of "
        f"{summary['corpus']} (method {summary['method']}{held}); {summary['steps']} steps "
        f"({summary['steps_per_second']:.2f} steps/s); model saved to {summary['model']}{guided}"
    )
