"""``sbert mine-negatives``: hard negatives for retrieval training, as a thin shell over ``sbert.search.negatives``."""

from __future__ import annotations

from pathlib import Path

import click

from sbert.cli.common import column_options, friendly_errors, load_model, model_options


def _collection(source: Path, split: str, corpus: str | None, columns):
    """(queries, corpus, qrels) from a BEIR folder's split, or from a pairs file (plus an optional corpus file)."""
    if source.is_dir():
        if corpus is not None:
            raise click.UsageError("--corpus goes with a pairs file; a BEIR folder brings its own corpus")
        from sbert.data.beir import read_beir

        collection = read_beir(source, split)
        return collection.queries, collection.document_texts(), collection.qrels
    from sbert.data.corpus import read_corpus
    from sbert.data.ntuples import read_ntuples
    from sbert.search.negatives import pairs_collection

    pairs = [(row.query, row.positive) for row in read_ntuples(source)]
    extra = read_corpus(corpus, columns=columns).joined() if corpus is not None else []
    return pairs_collection(pairs, extra)


def _report(mined, examples: int, out: Path) -> str:
    rows = mined.rows
    lines = [f"wrote {examples:,} examples ({len(rows):,} query-positive rows) to {out}"]
    if rows:
        negatives = [s for r in rows for s in r.negative_scores]
        mean_neg = sum(negatives) / len(negatives) if negatives else float("nan")
        mean_pos = sum(r.positive_score for r in rows) / len(rows)
        lines.append(f"mean cosine: positives {mean_pos:.4f}, negatives {mean_neg:.4f}")
    for name, count in sorted(mined.skipped.items()):
        lines.append(f"skipped {count:,} candidates by {name}")
    if mined.short_queries:
        what = f"dropped their {mined.dropped_rows:,} rows" if mined.dropped_rows else "kept with fewer"
        lines.append(f"{mined.short_queries:,} queries had too few negatives left ({what})")
    return "\n".join(lines)


@click.command("mine-negatives")
@click.argument("source", type=click.Path(exists=True, path_type=Path))
@click.option("--out", "-o", required=True, type=click.Path(dir_okay=False, path_type=Path), help=".jsonl or .tsv")
@click.option("--split", default="train", show_default=True, help="The judgments of a BEIR folder to mine for.")
@click.option(
    "--corpus",
    help="With a pairs file: more candidate texts (a file as `sbert index build` reads it: one per line, JSON lines, "
    "CSV/TSV with a header row; --text-column names the field).",
)
@column_options
@model_options
@click.option("--num-negatives", default=3, show_default=True, type=click.IntRange(min=1))
@click.option("--range-min", default=0, show_default=True, type=click.IntRange(min=0), help="Skip the top ranks.")
@click.option(
    "--range-max",
    type=click.IntRange(min=1),
    help="Deepest rank [default: range-min + num-negatives, x10 with a score filter].",
)
@click.option("--absolute-margin", type=float, help="Keep negatives scoring at least this far below the positive.")
@click.option("--relative-margin", type=float, help="Keep negatives <= positive - |positive| x this (0.05: 5% below).")
@click.option("--max-score", type=float, help="Keep negatives scoring at most this (cosine).")
@click.option("--min-score", type=float, help="Keep negatives scoring at least this (cosine).")
@click.option("--sampling", type=click.Choice(["top", "random"]), default="top", show_default=True)
@click.option("--seed", default=0, show_default=True, type=int, help="For --sampling random.")
@click.option("--triplets", is_flag=True, help="One (query, positive, negative) row per negative, not n-tuples.")
@click.option("--keep-incomplete", is_flag=True, help="Keep queries that found fewer than --num-negatives.")
@click.option("--batch-size", default=32, show_default=True, type=click.IntRange(min=1))
@click.option("--progress/--no-progress", default=None, help="Progress bars (default: on a terminal).")
@friendly_errors
def mine_negatives(
    source, out, split, corpus, columns, model, runtime, allow_pickle, triplets, keep_incomplete, **settings
):
    """Mine hard negatives for the queries of SOURCE: a BEIR folder (its --split judgments) or a pairs file
    (.tsv or .jsonl of query, positive; see the ntuples format). Writes (query, positive, negative_1..n)
    rows to --out for `sbert train --format ntuples`."""
    from sbert.data.ntuples import write_ntuples
    from sbert.search.negatives import NegativeFilters, mine_hard_negatives

    batch_size, progress = settings.pop("batch_size"), settings.pop("progress")
    filters = NegativeFilters(**settings)  # settings checked before the model loads
    if not str(out).endswith((".jsonl", ".tsv")):
        raise click.UsageError(f"--out {out}: expected a .jsonl or .tsv file name")
    queries, texts, qrels = _collection(source, split, corpus, columns)
    encoder = load_model(model, runtime, allow_pickle)
    mined = mine_hard_negatives(
        encoder,
        queries,
        texts,
        qrels,
        filters,
        keep_incomplete=keep_incomplete,
        batch_size=batch_size,
        show_progress=progress,
    )
    examples = mined.examples(triplets)
    extras = mined.extras(triplets) if str(out).endswith(".jsonl") else None
    write_ntuples(out, examples, extras)
    click.echo(_report(mined, len(examples), out), err=True)
