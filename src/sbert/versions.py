"""Installed versions of the packages a saved model or an export depends on."""

from __future__ import annotations

from importlib import metadata


def package_version(package: str) -> str:
    """The installed version of ``package``, or ``"unknown"`` where it is not installed."""
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "unknown"


def saved_versions() -> dict[str, str]:
    """The ``__version__`` entry of config_sentence_transformers.json: sbert, transformers and torch."""
    return {
        "sbert": package_version("sbert"),
        "transformers": package_version("transformers"),
        "pytorch": package_version("torch"),
    }
