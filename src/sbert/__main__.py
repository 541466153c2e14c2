"""``python -m sbert`` (and ``torchrun -m sbert``): the ``sbert`` command."""

from sbert.cli import run

run()
