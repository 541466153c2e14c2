"""``python -m sbert.cli``: the ``sbert`` command."""

from sbert.cli import run

run()
