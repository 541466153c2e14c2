"""Is this already reported? Check new bug reports against a tracker's export (CSV in, answers out).

Shows: indexing a CSV export in memory with titles and ids, then the `--lead` rule of `sbert search`: a
new report's top hit is called its duplicate only where it stands out from the next hits by at least
LEAD. Choose LEAD on reports you have already triaged (`sbert eval --triage`); 0.11 is only a start.
Run: `python examples/triage_tracker.py export.csv "Calc crashes when saving" [--lead 0.11]`
(columns id, title, text; JIRA's are --id-column "Issue key" --title-column Summary --text-column
Description). About 1 minute for 2,000 reports on 2 CPU cores, most of it embedding them.
"""

import argparse
import csv
from pathlib import Path

import sbert
from sbert.search.retrieve import SearchOptions, build_index, search_texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("export", type=Path, help="the tracker's CSV export, with a header row")
    parser.add_argument("reports", nargs="+", help="new reports to check (title and text)")
    parser.add_argument("--lead", type=float, default=0.11, help="how far the top hit must stand out")
    parser.add_argument("--id-column", default="id")
    parser.add_argument("--title-column", default="title")
    parser.add_argument("--text-column", default="text")
    args = parser.parse_args()
    with args.export.open(newline="", encoding="utf-8") as file:
        rows = [row for row in csv.DictReader(file) if row.get(args.text_column, "").strip()]
    ids = [row[args.id_column] for row in rows]
    titles = [row.get(args.title_column) or None for row in rows]
    texts = [f"{row[args.title_column]} {row[args.text_column]}".strip() for row in rows]

    model = sbert.load()
    index = build_index(None, model, texts, ids, model="default", bm25=True, titles=titles)
    answers = search_texts(index, model, args.reports, SearchOptions(k=1, lead=args.lead))
    closest = search_texts(index, model, args.reports, SearchOptions(k=3))
    for report, answer, near in zip(args.reports, answers, closest, strict=True):
        print(f"\n{report}")
        if answer:
            hit = answer[0]
            print(f"  already reported: [{hit.id}] {hit.title or hit.text[:80]} (stands out by {hit.lead:.3f})")
        else:
            print("  no report stands out; the closest are:")
            for hit in near:
                print(f"    [{hit.id}] {hit.title or hit.text[:80]}")


if __name__ == "__main__":
    main()
