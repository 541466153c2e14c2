"""Prompts as sentence-transformers stores them, and which one a call uses.

config_sentence_transformers.json holds ``prompts`` (name -> text, e.g. ``{"query": "query: "}``) and
``default_prompt_name``. A prompt is put before each text and tokenised with it, so its tokens count
towards ``max_seq_length``. The choice follows sentence-transformers 6.2:

- ``prompt`` (a string) wins over ``prompt_name``; ``""`` means no prompt (and no default);
- ``prompt_name`` must name one of the model's prompts, else a ValueError naming them;
- neither: the prompt ``default_prompt_name`` names, or none;
- every model has a "query" and a "document" prompt, empty unless its folder gives them. So
  ``encode_query`` uses "query" and ``encode_document`` "document" (then "passage", "corpus": only
  reached where "document" is absent, which in sentence-transformers 6.2 it never is), never the default.

A Pooling with ``include_prompt=False`` leaves the prompt's tokens out of the pooled vector
(``prompt_length``: the prompt's tokens with the leading special token, without a trailing one).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Task = Literal["query", "document"]
ALWAYS = ("query", "document")  # names every sentence-transformers model has: empty unless the folder gives them
TASK_NAMES: dict[str, tuple[str, ...]] = {"query": ("query",), "document": ("document", "passage", "corpus")}


@dataclass(frozen=True)
class Prompts:
    """A model's prompts as its folder stores them (``saved``, written back unchanged) and its default."""

    saved: Mapping[str, str] = field(default_factory=dict)
    default_name: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.saved, Mapping):
            raise ValueError(f"'prompts' must be an object of name -> prompt text, got {type(self.saved).__name__}")
        for name, text in self.saved.items():
            if not isinstance(name, str) or not isinstance(text, str):
                raise ValueError(f"'prompts' must map names to strings; {name!r} -> {text!r} is not")
        object.__setattr__(self, "saved", dict(self.saved))
        if self.default_name is not None and self.default_name not in self.available:
            raise ValueError(
                f"default_prompt_name {self.default_name!r} is not one of the prompts {list(self.available)!r}"
            )

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> Prompts:
        """From config_sentence_transformers.json's contents (absent or null prompts: none); ValueError if malformed."""
        saved = settings.get("prompts")
        return cls({} if saved is None else saved, settings.get("default_prompt_name"))

    @property
    def available(self) -> dict[str, str]:
        """Every name a call may use: "query" and "document" (empty unless saved), then the saved ones."""
        return {**dict.fromkeys(ALWAYS, ""), **self.saved}

    def text(self, name: str) -> str:
        """The prompt called ``name``; ValueError naming the available ones if there is none."""
        available = self.available
        if not isinstance(name, str) or name not in available:
            raise ValueError(f"prompt_name {name!r} is not one of this model's prompts: {list(available)!r}")
        return available[name]

    def task_name(self, task: Task) -> str | None:
        """The prompt name ``encode_query`` / ``encode_document`` use when given none."""
        if task not in TASK_NAMES:
            raise ValueError(f"task must be 'query' or 'document', got {task!r}")
        return next((name for name in TASK_NAMES[task] if name in self.available), None)

    def resolve(self, prompt: str | None = None, prompt_name: str | None = None) -> str | None:
        """The text to put before each input: ``prompt``, else the named one, else the default's (or None)."""
        if prompt is not None:
            if not isinstance(prompt, str):
                raise TypeError(f"prompt must be a string, got {type(prompt).__name__}")
            return prompt
        if prompt_name is not None:
            return self.text(prompt_name)
        return self.available.get(self.default_name) if self.default_name is not None else None


def prompted(texts: list[str], prompt: str | None) -> list[str]:
    """``texts`` with ``prompt`` put before each (unchanged for no prompt or an empty one)."""
    return [prompt + text for text in texts] if prompt else texts


def prompt_length(ids: list[int], special_ids: set[int]) -> int:
    """Tokens of a prompt that pooling leaves out: its ids (special tokens added) less a trailing special one."""
    return len(ids) - 1 if ids and ids[-1] in special_ids else len(ids)
