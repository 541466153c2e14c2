"""An index built by the real `sbert index build` from a few texts, with a small model saved beside it."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner


def cli_index(encoder, texts: list[str], folder: Path) -> Path:
    """``folder/ix``: ``texts`` (one per line) indexed by ``sbert index build`` with ``encoder`` saved as a folder."""
    from sbert.cli import main

    model = folder / "tiny"
    encoder.save(model)
    corpus = folder / "texts.txt"
    corpus.write_text("\n".join(texts) + "\n", encoding="utf-8")
    built = CliRunner().invoke(main, ["index", "build", str(corpus), "--out", str(folder / "ix"), "-m", str(model)])
    assert built.exit_code == 0, built.output
    return folder / "ix"
