"""``sbert make-collection``: a tracker export's duplicate links made into a BEIR folder (``sbert.data.duplicates``)."""

from __future__ import annotations

from pathlib import Path

import click

from sbert.cli.common import column_options, friendly_errors


@click.command("make-collection")
@click.argument("export", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--out", "-o", required=True, type=click.Path(path_type=Path), help="The BEIR folder to write (new).")
@click.option(
    "--duplicate-column",
    required=True,
    metavar="NAME",
    help="The column or field holding, on each duplicate, the id of the report it duplicates (several: separated "
    "by commas, semicolons or line breaks, and by spaces where no id holds one); empty on the other reports. Two "
    "reports naming each other (or a longer loop): the oldest is the master.",
)
@click.option(
    "--created-column",
    metavar="NAME",
    help="The column or field of each report's creation time (2000-10-25 10:37:00 +0000, ISO 8601): the newest "
    "duplicates are the test split. Without it, their order in the file is taken as time order.",
)
@click.option(
    "--test-fraction",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=0.2,
    show_default=True,
    help="The newest duplicates kept for testing (qrels/test.tsv); the rest are qrels/train.tsv.",
)
@column_options
@friendly_errors
def make_collection(export, out, duplicate_column, created_column, test_fraction, columns) -> None:
    """Make a retrieval collection from EXPORT, a tracker's reports (JSON lines, or CSV/TSV with a header row):
    each duplicate becomes a query whose relevant documents are the reports it duplicates, every other report a
    document. Writes a BEIR folder that `sbert eval --retrieval OUT --split test` scores and `sbert train
    --format beir` / `sbert mine-negatives` train from (split in time: train on the past, test on the future)."""
    from sbert.data.duplicates import collection_from_links

    info = collection_from_links(
        export, out, duplicate=duplicate_column, columns=columns, created=created_column, test_fraction=test_fraction
    )
    click.echo(
        f"wrote {out}: {info.documents:,} documents, {info.queries:,} duplicates as queries "
        f"({info.train_queries:,} train, {info.test_queries:,} test: from {info.cutoff} on, by {info.order})"
    )
    if info.unknown_links:
        click.echo(f"left out: {info.unknown_links:,} links to reports not in {export}")
    if info.loops:
        click.echo(
            f"loops: {info.looped_reports:,} reports whose links lead only round {info.loops:,} "
            f"loop{'s' if info.loops > 1 else ''}; the oldest report of each taken as the master"
        )
    click.echo(f"next: sbert eval MODEL --retrieval {out} --split test   (how well MODEL finds the masters)")
    click.echo(f"      sbert eval MODEL --triage {out} --split train   (--lead, --threshold: 'already reported?')")
