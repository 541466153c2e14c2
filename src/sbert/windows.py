"""Long documents: split into token windows, embed every window, rank documents by their windows.

A document longer than the model's window is cut into windows of at most ``window`` tokens (by
default ``max_seq_length`` minus the special tokens), each starting ``overlap`` tokens before the
previous one ended (by default 32, or a quarter of a shorter window: ``default_overlap``). Windows are
cut on the model's own tokens (offsets map each window back to a character span of the document: its
passage) and embedded from those tokens, so a window that holds a whole document gives exactly the
document's own vector.

Boundaries, a cheap heuristic: a window's end moves back to the last sentence end (a token ending in
``.``, ``!`` or ``?`` followed by white space, or a line break) that lies in its last quarter
(``BOUNDARY_SHARE``), else back to the start of the word it would cut, if that start is in that quarter
too. The next window starts at the earliest sentence start within the ``overlap`` tokens before that
end, else ``overlap`` tokens before it, moved back to the start of a word.

A document is scored by its best window (``maxp``) or by the mean of its windows' unit vectors
(``mean``); ``maxp`` is the default: it scored higher on both full collections of
benchmarks/retrieval.py (SciFact and openoffice-dups); either way its best passage is the
window closest to the query.

A ``Chunking`` keeps at most ``max_windows`` windows of a document (``MAX_WINDOWS`` by default): the
first ones, its start; the rest of a longer document (a pasted log, a data dump) is left out, so one
such document cannot cost more than the others together. ``Chunking.plan`` says, before anything is
embedded, how many windows a corpus makes, how many documents the bound cuts, and roughly how long
embedding them takes here (benchmarks/chunk_bound.py measures what the bound costs).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from sbert.search import ranking
from sbert.search.base import Hit
from sbert.search.grouping import DEFAULT_MODE, Groups, check_mode, unit
from sbert.search.grouping import MODES as MODES

if TYPE_CHECKING:
    from tokenizers import Tokenizer

    from sbert.encoder import Encoder

DEFAULT_OVERLAP = 32  # tokens shared by consecutive windows (at most a quarter of the window: default_overlap)
BOUNDARY_SHARE = 0.25  # the last share of a window in which its end may move back to a sentence or word boundary
SENTENCE_ENDS = (".", "!", "?")
# Windows kept per document: 32 windows of the default model's 256 tokens hold some 6,000 words (a long
# article, a paper, a report with its discussion) whole; what lies past them is mostly pasted logs and dumps.
MAX_WINDOWS = 32
PLAN_SAMPLE = 32  # windows embedded to time the embedding of a plan (``Chunking.plan``)
_QUERY_CHUNK = 256  # queries scored at once by rank_documents


# -- splitting ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TokenLayout:
    """What splitting needs to know of one document's tokens (special tokens excluded).

    ``offsets``: (n, 2) character span of each token; ``word_start[i]``: token i begins a word;
    ``sentence_end[i]``: a window may end after token i (a sentence or line ends there).
    """

    offsets: np.ndarray
    word_start: np.ndarray
    sentence_end: np.ndarray

    def __len__(self) -> int:
        return len(self.offsets)


def layout(text: str, offsets: Sequence[tuple[int, int]], word_ids: Sequence[int | None]) -> TokenLayout:
    """The ``TokenLayout`` of ``text`` from its tokens' character ``offsets`` and ``word_ids``."""
    n = len(offsets)
    spans = np.asarray(offsets, dtype=np.int64).reshape(n, 2)
    word_start = np.ones(n, dtype=bool)
    for i in range(1, n):
        word_start[i] = word_ids[i] is None or word_ids[i] != word_ids[i - 1]
    sentence_end = np.zeros(n, dtype=bool)
    for i in range(n):
        gap = text[spans[i, 1] : spans[i + 1, 0]] if i + 1 < n else " "
        token = text[spans[i, 0] : spans[i, 1]]
        sentence_end[i] = "\n" in gap or (token.endswith(SENTENCE_ENDS) and gap.isspace())
    return TokenLayout(spans, word_start, sentence_end)


def plan_windows(
    tokens: TokenLayout, window: int, overlap: int, max_windows: int | None = None
) -> list[tuple[int, int]]:
    """Token ranges ``[start, end)`` of the windows covering ``tokens``: at most ``window`` long, consecutive
    ones sharing up to about ``overlap`` tokens, boundaries moved as the module says. One window (maybe
    empty) for a document that fits; the first ``max_windows`` alone for one that needs more (None: all)."""
    if window < 1 or not 0 <= overlap < window:
        raise ValueError(f"need window >= 1 and 0 <= overlap < window, got window={window}, overlap={overlap}")
    if max_windows is not None and max_windows < 1:
        raise ValueError(f"max_windows must be at least 1 (or None: no bound), got {max_windows}")
    n, start, out = len(tokens), 0, []
    while True:
        end = min(start + window, n)
        if end < n:
            end = _cut(tokens, start, end, window)
        out.append((start, end))
        if end >= n or len(out) == max_windows:
            return out
        start = _next_start(tokens, start, end, overlap)


def tokens_needed(window: int, max_windows: int | None) -> int | None:
    """How many of a document's first tokens ``max_windows`` windows of ``window`` tokens can reach, plus
    the one after (a window's end looks at the gap before the next token): the rest never changes them."""
    return None if max_windows is None else max_windows * window + 1


def _cut(tokens: TokenLayout, start: int, end: int, window: int) -> int:
    """Where a full window ``[start, end)`` ends: a sentence end, else a word start, in its last part."""
    earliest = start + max(1, int(window * (1 - BOUNDARY_SHARE)))
    ends = np.flatnonzero(tokens.sentence_end[earliest - 1 : end])  # a window may end after token i: at i + 1
    if len(ends):
        return earliest + int(ends[-1])
    cut = end
    while cut > earliest and not tokens.word_start[cut]:
        cut -= 1
    return cut if tokens.word_start[cut] else end


def _next_start(tokens: TokenLayout, start: int, end: int, overlap: int) -> int:
    """The start of the window after ``[start, end)``: the earliest sentence start among its last
    ``overlap`` tokens, else ``overlap`` tokens back, moved back to a word start; always after ``start``."""
    if overlap == 0:
        return end
    first = max(start + 1, end - overlap)
    starts = np.flatnonzero(tokens.sentence_end[first - 1 : end - 1])
    if len(starts):
        return first + int(starts[0])
    begin = first
    while begin > start + 1 and not tokens.word_start[begin]:
        begin -= 1
    return begin


def default_overlap(window: int) -> int:
    """The overlap of ``window``-token windows when none is given: ``DEFAULT_OVERLAP``, or a quarter of a
    window shorter than 128 tokens (a window of 20 shares 5: not an error, nor windows a token apart)."""
    return min(DEFAULT_OVERLAP, window // 4)


# -- the settings ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Chunking:
    """How documents are split and scored, decided once and recorded in an index's manifest so that
    building, adding, searching, evaluating and serving split and prompt documents alike.

    ``window``: tokens per window beside the special ones and the prompt's (None: the model's limit);
    ``overlap``: tokens consecutive windows share (None: ``default_overlap`` of the window); ``mode``:
    ``maxp`` or ``mean``; ``prompt``: the text put before every window (None: the model's document prompt,
    as ``encode_document``; "": none); ``max_windows``: windows kept per document, its first ones (None:
    every window; default ``MAX_WINDOWS``).
    """

    window: int | None = None
    overlap: int | None = None
    mode: str = DEFAULT_MODE
    prompt: str | None = None
    max_windows: int | None = MAX_WINDOWS

    def __post_init__(self) -> None:
        check_mode(self.mode)
        if self.max_windows is not None and (type(self.max_windows) is not int or self.max_windows < 1):
            raise ValueError(
                f"max_windows must be a whole number of at least 1 (or None: no bound), got {self.max_windows!r}"
            )
        if self.window is not None and self.window < 1:
            raise ValueError(f"window must be at least 1 token, got {self.window}")
        if self.overlap is not None and self.overlap < 0:
            raise ValueError(f"overlap must be at least 0, got {self.overlap}")
        if self.window is not None and self.overlap is None:
            object.__setattr__(self, "overlap", default_overlap(self.window))
        if self.window is not None and self.overlap is not None and self.overlap >= self.window:
            raise ValueError(f"overlap ({self.overlap} tokens) must be smaller than the window ({self.window})")

    @classmethod
    def of(cls, settings: dict) -> Chunking:
        """The chunking an index's manifest records (``documents``); older indexes record no prompt, and no
        ``max_windows``: they kept every window, and so do the documents added to them."""
        return cls(
            settings.get("window"),
            settings["overlap"],
            settings.get("mode", DEFAULT_MODE),
            settings.get("prompt"),
            settings.get("max_windows"),
        )

    def settings(self) -> dict:
        """What an index's manifest records (``documents``)."""
        out = {"window": self.window, "overlap": self.overlap, "mode": self.mode, "prompt": self.prompt}
        return {**out, "max_windows": self.max_windows}

    def resolved(self, encoder: Encoder, prompt_name: str | None = None, prompt: str | None = None) -> Chunking:
        """These settings for ``encoder``: the prompt as text (``prompt_name``/``prompt`` choose another than
        ``self.prompt``, else the model's document prompt) and the window in tokens (default: what the
        model takes beside the prompt)."""
        if prompt is None and prompt_name is None and self.prompt is not None:
            prompt = self.prompt
        text = encoder.resolve_prompt(prompt_name, prompt, task="document") or ""
        chunker = Chunker.for_encoder(encoder)
        window = self.window or chunker.max_window - len(chunker.prompt_ids(text))
        return Chunking(window, self.overlap, self.mode, text, self.max_windows)  # the overlap settled with the window

    def embed(
        self, encoder: Encoder, documents: Sequence[str], batch_size: int = 32, show_progress: bool | None = None
    ) -> EncodedDocuments:
        """``encode_documents`` with these settings (the prompt as ``resolved`` gives it)."""
        return encode_documents(
            encoder,
            documents,
            window=self.window,
            overlap=self.overlap,
            batch_size=batch_size,
            show_progress=show_progress,
            prompt=self.prompt,
            max_windows=self.max_windows,
        )

    def plan(
        self, encoder: Encoder, documents: Sequence[str], *, time_it: bool = True, batch_size: int = 32
    ) -> WindowPlan:
        """What embedding ``documents`` with these settings (resolved for ``encoder``: ``resolved``) will do,
        before it is done: windows, documents cut at ``max_windows``, tokens, and with ``time_it`` the
        speed of embedding ``PLAN_SAMPLE`` of the windows here (a second or two), for ``WindowPlan.seconds``."""
        from sbert.encoder import check_texts

        resolved = self.resolved(encoder)
        chunker = Chunker.for_encoder(encoder)
        windows = chunker.split(check_texts(documents), resolved.window, resolved.overlap, resolved.prompt,
                                resolved.max_windows)  # fmt: skip
        lengths = np.array([len(ids) for ids in windows.ids], dtype=np.int64)
        per_document = np.bincount(windows.doc, minlength=len(documents))
        starts = np.searchsorted(windows.doc, np.arange(len(documents)))  # each document's first window
        several = per_document > 1
        rate = _tokens_per_second(encoder, chunker, windows, resolved.prompt, lengths, batch_size) if time_it else None
        return WindowPlan(
            documents=len(documents),
            windows=len(windows.ids),
            tokens=int(lengths.sum()),
            cut=len(windows.cut),
            max_windows=resolved.max_windows,
            split_documents=int(several.sum()),
            split_windows=int(per_document[several].sum()),
            split_tokens=int(lengths[starts[several]].sum()) if several.any() else 0,
            tokens_per_second=rate,
        )


# -- tokens -> windows ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Windows:
    """Windows of several documents: ``ids`` (token ids per window, special tokens included), ``doc``
    (n_windows,) int64 document of each window, ``spans`` (n_windows, 2) int64 character span of each;
    ``cut``: the documents (positions) whose windows stop at a ``max_windows`` bound before their end."""

    ids: list[list[int]]
    doc: np.ndarray
    spans: np.ndarray
    cut: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def passages(self, documents: Sequence[str]) -> list[str]:
        """The text of each window: its span of its document."""
        return [documents[d][a:b] for d, (a, b) in zip(self.doc.tolist(), self.spans.tolist(), strict=True)]


class Chunker:
    """Splits documents into windows with a model's own (fast, Rust) tokenizer."""

    def __init__(self, tokenizer: Tokenizer, max_seq_length: int, do_lower_case: bool = False) -> None:
        from tokenizers import Tokenizer

        self._tokenizer = Tokenizer.from_str(tokenizer.to_str())  # a private copy: no truncation, no padding
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()
        self.do_lower_case = do_lower_case
        probe = self._tokenizer.encode("a", add_special_tokens=True)
        content = [i for i, special in enumerate(probe.special_tokens_mask) if not special]
        self.prefix, self.suffix = probe.ids[: content[0]], probe.ids[content[-1] + 1 :]
        self.max_window = max_seq_length - len(self.prefix) - len(self.suffix)
        if self.max_window < 1:
            raise ValueError(f"max_seq_length {max_seq_length} leaves no room for tokens beside the special ones")

    @classmethod
    def for_encoder(cls, encoder: Encoder) -> Chunker:
        """The chunker of ``encoder``'s transformer (its tokenizer must be a fast one: offsets are needed)."""
        transformer = encoder.transformer
        backend = getattr(transformer.tokenizer, "backend_tokenizer", None)
        if backend is None:
            raise ValueError("splitting documents needs a fast (Rust) tokenizer, for the tokens' character offsets")
        return cls(backend, transformer.max_seq_length, transformer.do_lower_case)

    def prompt_ids(self, prompt: str | None) -> list[int]:
        """The tokens of ``prompt`` (none for no prompt), as they stand before a text tokenised with it."""
        if not prompt:
            return []
        return self._tokenizer.encode(prompt.lower() if self.do_lower_case else prompt, add_special_tokens=False).ids

    def split(
        self,
        documents: Sequence[str],
        window: int | None = None,
        overlap: int | None = None,
        prompt: str | None = None,
        max_windows: int | None = None,
    ) -> Windows:
        """Every document's windows, in document order (see ``plan_windows``), each with ``prompt``'s tokens
        before its own; ``window`` defaults to the most tokens the model takes beside its special tokens
        and the prompt's, and may not exceed it; ``overlap`` to ``default_overlap(window)``; at most
        ``max_windows`` per document, its first ones (None: all)."""
        prompt_ids = self.prompt_ids(prompt)
        limit = self.max_window - len(prompt_ids)
        if limit < 1:
            raise ValueError(f"the prompt {prompt!r} takes {len(prompt_ids)} of the model's {self.max_window} tokens")
        window = limit if window is None else window
        if not 1 <= window <= limit:
            beside = " beside the prompt" if prompt_ids else ""
            raise ValueError(f"window must be from 1 to {limit} tokens (the model's limit{beside}), got {window}")
        overlap = default_overlap(window) if overlap is None else overlap
        texts = [d.lower() for d in documents] if self.do_lower_case else list(documents)
        ids, doc, spans, cut = [], [], [], []
        needed = tokens_needed(window, max_windows)
        for number, encoding in enumerate(self._tokenizer.encode_batch(texts, add_special_tokens=False)):
            token_ids = encoding.ids  # a new list at every access: read once per document
            # past the tokens the kept windows can reach, nothing is laid out (a dump of millions of characters)
            tokens = layout(texts[number], encoding.offsets[:needed], encoding.word_ids[:needed])
            planned = plan_windows(tokens, window, overlap, max_windows)
            if planned[-1][1] < len(token_ids):
                cut.append(number)
            for start, end in planned:
                ids.append([*self.prefix, *prompt_ids, *token_ids[start:end], *self.suffix])
                doc.append(number)
                spans.append(tokens.offsets[[start, end - 1], [0, 1]] if end > start else (0, 0))
        return Windows(
            ids,
            np.asarray(doc, dtype=np.int64),
            np.asarray(spans, dtype=np.int64).reshape(-1, 2),
            np.asarray(cut, dtype=np.int64),
        )


# -- embedding -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class EncodedDocuments:
    """Documents embedded window by window: ``vectors`` (n_windows, dim) float32, ``doc`` (n_windows,)
    int64 the document (position in the input) of each window, ``spans`` (n_windows, 2) int64 its
    character span, ``passages`` its text; ``cut``: the documents whose windows stop at ``max_windows``."""

    vectors: np.ndarray
    doc: np.ndarray
    spans: np.ndarray
    passages: list[str]
    cut: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


def encode_documents(
    encoder: Encoder,
    documents: Sequence[str],
    *,
    window: int | None = None,
    overlap: int | None = None,
    batch_size: int = 32,
    show_progress: bool | None = None,
    packing: bool = False,
    prompt_name: str | None = None,
    prompt: str | None = None,
    max_windows: int | None = None,
) -> EncodedDocuments:
    """Embed each document window by window (see the module): every window's vector, document and passage.

    ``window``: tokens per window beside the special ones and the prompt's (default and maximum: the
    model's limit); ``overlap``: tokens consecutive windows share (default: ``default_overlap``);
    ``max_windows``: windows kept per document, its first ones (None, here: all; a ``Chunking`` bounds them
    by default).
    Documents must be non-empty strings.
    Each window gets the prompt ``encode_document`` would give (``prompt_name``/``prompt`` choose
    another; ``prompt=""`` none), so that a document in one window is embedded as ``encode_document``
    embeds it.
    """
    from sbert.encoder import check_texts

    documents = check_texts(documents)
    chunker = Chunker.for_encoder(encoder)
    chosen = encoder.resolve_prompt(prompt_name, prompt, task="document")
    windows = chunker.split(documents, window, overlap, prompt=chosen, max_windows=max_windows)
    vectors = encoder.encode_tokenized(
        _tokenized(encoder, chunker, windows.ids, chosen), batch_size=batch_size, show_progress=show_progress,
        packing=packing,
    )  # fmt: skip
    return EncodedDocuments(vectors, windows.doc, windows.spans, windows.passages(documents), windows.cut)


def _tokenized(encoder: Encoder, chunker: Chunker, ids: list[list[int]], prompt: str | None):
    """Windows' token ids as ``encode_tokenized`` takes them (the prompt's length where pooling leaves it out)."""
    from sbert.pipeline import Tokenized

    lengths = None
    if prompt and any(not getattr(module, "include_prompt", True) for module in encoder):
        lengths = [len(chunker.prefix) + len(chunker.prompt_ids(prompt))] * len(ids)  # left out by pooling
    return Tokenized(ids, [], lengths)


# -- what embedding will cost ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class WindowPlan:
    """What embedding a corpus window by window will do (``Chunking.plan``): ``windows`` of ``documents``,
    ``tokens`` in all (special tokens included), ``cut`` documents cut at ``max_windows``;
    ``split_documents``: those that need more than one window, ``split_windows`` their windows and
    ``split_tokens`` their first windows' tokens (what embedding them whole as well costs);
    ``tokens_per_second``: measured here, or None."""

    documents: int
    windows: int
    tokens: int
    cut: int
    max_windows: int | None
    split_documents: int = 0
    split_windows: int = 0
    split_tokens: int = 0
    tokens_per_second: float | None = None

    def seconds(self, whole_too: bool = False) -> float | None:
        """Roughly how long embedding the windows takes here; ``whole_too``: and every document whole as
        well, the windows equal to a whole document embedded once (what ``--auto`` embeds)."""
        if not self.tokens_per_second:
            return None
        tokens = self.tokens + (self.split_tokens if whole_too else 0)
        return tokens / self.tokens_per_second

    def summary(self, whole_too: bool = False) -> str:
        """One line a person reads before a long embedding: what will be embedded, what the bound cut, how long."""
        what = f"{count(self.windows, 'window')} of {count(self.documents, 'document')}"
        if whole_too:
            what = f"{count(self.documents, 'document')} whole and the {count(self.split_windows, 'window')} of the "
            what += f"{self.split_documents:,} longer than one window"
        if self.max_windows is None:
            bound = "every window of every document kept (no --max-windows)"
        elif self.cut:
            bound = f"{count(self.cut, 'document')} cut after their first {self.max_windows} windows (--max-windows)"
        else:
            bound = f"no document needs more than --max-windows {self.max_windows}"
        seconds = self.seconds(whole_too)
        took = f"; roughly {_duration(seconds)} here" if seconds is not None else ""
        return f"embedding {what}: {bound}{took}"


def count(n: int, noun: str) -> str:
    """``n`` ``noun``s, as a person writes it: "1 document", "4,522 documents"."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    if seconds < 90 * 60:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


def _tokens_per_second(
    encoder: Encoder, chunker: Chunker, windows: Windows, prompt: str | None, lengths: np.ndarray, batch_size: int
) -> float | None:
    """Tokens embedded per second here: ``PLAN_SAMPLE`` windows spread over the plan's lengths, timed after a
    one-window warm-up (padding counted as run); None without windows or an encoder that embeds token ids."""
    if not len(windows.ids) or not hasattr(encoder, "encode_tokenized"):
        return None
    order = np.argsort(lengths, kind="stable")
    picked = order[np.unique(np.linspace(0, len(order) - 1, min(PLAN_SAMPLE, len(order))).astype(np.int64))]
    sample = [windows.ids[i] for i in picked.tolist()]
    encoder.encode_tokenized(_tokenized(encoder, chunker, sample[:1], prompt), batch_size=1, show_progress=False)
    began = time.perf_counter()
    encoder.encode_tokenized(_tokenized(encoder, chunker, sample, prompt), batch_size=batch_size, show_progress=False)
    elapsed = time.perf_counter() - began
    # the sample's windows are of every length, so its batches run padded to their longest: those tokens are
    # what ran (a corpus's batches, sorted by length, run nearly none)
    ordered = np.sort(lengths[picked])
    padded = sum(int(part.max()) * len(part) for part in np.array_split(ordered, -(-len(ordered) // batch_size)))
    return float(padded) / max(elapsed, 1e-6)


# -- ranking ---------------------------------------------------------------------------------------------------
def rank_documents(
    query_vectors: np.ndarray,
    documents: EncodedDocuments,
    k: int = 10,
    mode: str = DEFAULT_MODE,
    ids: Sequence[str] | None = None,
) -> list[list[Hit]]:
    """Each query's best ``k`` documents by cosine similarity, best first (``sbert.search.ranking``: score
    descending, then document ascending), as ``Hit``s: ``id`` the document's (``ids``, one per document;
    default its position as text), ``score`` and ``cosine`` its cosine, its best window's ``row``, ``span``
    and passage (``text``). ``mode``: ``maxp`` scores a document by its best window, ``mean`` by the mean of
    its windows' unit vectors; the passage is the window closest to the query. The grouping is the
    indexes' own (``sbert.search.grouping``); ``sbert.Index.build(texts, chunk=True)`` does all of this,
    embedding included."""
    check_mode(mode)
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    queries = unit(np.atleast_2d(np.asarray(query_vectors, dtype=np.float32)))
    windows = unit(np.asarray(documents.vectors, dtype=np.float32))
    groups = Groups.of(np.asarray(documents.doc).tolist())
    means = groups.means(windows) if mode == "mean" else None
    number = {name: g for g, name in enumerate(groups.names)}
    out = []
    for begin in range(0, len(queries), _QUERY_CHUNK):
        q = queries[begin : begin + _QUERY_CHUNK]
        window_scores = q @ windows.T
        doc_scores = groups.best(window_scores) if means is None else q @ means.T
        names = np.broadcast_to(np.asarray(groups.names, dtype=np.int64), doc_scores.shape)
        scores, picked = ranking.top(doc_scores, names, k)
        for row in range(len(q)):
            found = zip(scores[row].tolist(), picked[row].tolist(), strict=True)
            best = [(groups.best_row(number[d], window_scores[row][groups.rows[number[d]]]), d, s) for s, d in found]
            out.append([_hit(documents, ids, *chosen) for chosen in best])
    return out


def _hit(documents: EncodedDocuments, ids: Sequence[str] | None, best: int, document: int, score: float) -> Hit:
    span = (int(documents.spans[best, 0]), int(documents.spans[best, 1]))
    name = str(ids[document]) if ids is not None else str(document)
    return Hit(name, float(score), documents.passages[best], best, span, cosine=float(score))
