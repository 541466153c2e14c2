"""Dynamic batching of requests: concurrent requests' texts merged into batches, run on worker threads.

Not to be confused with ``sbert.batching`` (smart batching: one call's texts grouped by length).

Requests call ``await batcher.embed(texts)``; ``encode_fn(texts)`` returns an array, or a tuple of arrays
(say embeddings and token counts), with one row per text. A worker thread (never the event loop) takes
queued requests until the batch holds ``max_batch_texts`` texts or ``max_batch_chars`` characters, or
``max_wait_ms`` has passed since the first one, embeds them with ``encode_fn`` and hands each request its
rows. A request may name a ``key`` (the service's adapter): a batch holds the requests of one key only,
the oldest request's, and those of other keys wait, in order, for the next batch, so each key's batches
are as full as its own load makes them.

A merged batch that fails is retried request by request, so only the request that makes ``encode_fn``
fail gets the error. A merged batch runs in model calls of a batch's size at most and answers each request
once its rows are done: a long request that joins a batch last holds up none of the short ones before it.
A request cancelled (its client went away) leaves the queue, and its texts are dropped before the next
model call. With ``workers`` > 1, that many threads do this side by side: one collects the next batch
while another runs the model (give each fewer torch threads, as ``EmbeddingEngine`` does).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

import numpy as np


@dataclass
class _Job:
    texts: list[str]
    future: asyncio.Future
    loop: asyncio.AbstractEventLoop
    key: Hashable = None  # a batch holds jobs of one key
    enqueued: float = field(default_factory=time.perf_counter)
    abandoned: bool = False  # its request was cancelled: nothing will read its rows
    settled: bool = False  # its rows (or its error) are handed over


@dataclass
class BatchStats:
    """What the worker did, for /metrics: batches run, texts per batch, seconds per batch."""

    batches: int = 0
    texts: int = 0
    on_batch: Callable[[int, float], None] | None = None


class DynamicBatcher:
    """Merges concurrent ``embed`` calls into batches run by ``encode_fn(texts) -> (n, dim) array``."""

    def __init__(
        self,
        encode_fn: Callable[[list[str]], np.ndarray | tuple[np.ndarray, ...]],
        max_batch_texts: int = 256,
        max_wait_ms: float = 5.0,
        max_batch_chars: int = 64_000,
        workers: int = 1,
    ) -> None:
        if max_batch_texts < 1 or max_wait_ms < 0 or max_batch_chars < 1 or workers < 1:
            raise ValueError("max_batch_texts, max_batch_chars and workers must be >= 1 and max_wait_ms >= 0")
        self.encode_fn = encode_fn
        self.max_batch_texts, self.max_wait, self.max_batch_chars = max_batch_texts, max_wait_ms / 1000, max_batch_chars
        self.stats = BatchStats()
        self._queue: deque[_Job] = deque()  # guarded by _lock; _arrived tells the workers of a new job
        self._pending = 0
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._arrived = threading.Condition(self._lock)
        self._threads = [
            threading.Thread(target=self._work, name=f"sbert-batcher-{i}", daemon=True) for i in range(workers)
        ]
        self._closed = False
        for thread in self._threads:
            thread.start()

    async def embed(self, texts: list[str], key: Hashable = None) -> np.ndarray | tuple[np.ndarray, ...]:
        """``encode_fn``'s rows for ``texts``, computed in a batch shared with other requests of the same
        ``key``."""
        loop = asyncio.get_running_loop()
        job = _Job(list(texts), loop.create_future(), loop, key)
        with self._lock:
            if self._closed:
                raise RuntimeError("the batcher is shut down")
            self._pending += 1
            self._queue.append(job)
            self._arrived.notify_all()  # an idle worker, or one collecting this job's key
        try:
            return await job.future
        except asyncio.CancelledError:
            job.abandoned = True  # the worker skips it, or stops it at its next model call
            raise

    def close(self, timeout: float = 30.0) -> None:
        """Finish every queued job, then stop the worker (graceful shutdown)."""
        with self._idle:
            self._idle.wait_for(lambda: self._pending == 0, timeout=timeout)
        with self._lock:
            self._closed = True
            self._arrived.notify_all()
        for thread in self._threads:
            thread.join(timeout=timeout)

    # -- worker thread -----------------------------------------------------------------------------------
    def _collect(self, first: _Job) -> list[_Job]:
        """``first`` and the queued jobs of its key, in order, until the batch is full or ``max_wait`` has
        passed; jobs of other keys stay queued, in order. Called holding ``_lock``."""
        jobs, count, chars = [first], len(first.texts), sum(len(t) for t in first.texts)
        deadline = time.perf_counter() + self.max_wait
        seen = 0  # queued jobs already looked at (of other keys)
        while count < self.max_batch_texts and chars < self.max_batch_chars:
            if seen < len(self._queue):
                job = self._queue[seen]
                if job.key != first.key:
                    seen += 1
                    continue
                del self._queue[seen]
                jobs.append(job)
                count += len(job.texts)
                chars += sum(len(t) for t in job.texts)
                continue
            remaining = deadline - time.perf_counter()
            if remaining <= 0 or self._closed:
                break
            self._arrived.wait(remaining)
            seen = 0  # other workers may have taken jobs meanwhile: look again from the oldest
        return jobs

    def _run(self, jobs: list[_Job]) -> None:
        """Embed ``jobs`` and settle each. A merged batch that fails is retried job by job (those not yet
        answered), so that only the request that makes the model fail gets its error, not those merged with it."""
        try:
            self._encode(jobs)
        except Exception as err:
            waiting = [job for job in jobs if not job.settled]
            if len(jobs) == 1:
                for job in waiting:
                    self._answer(job, None, err)
                return
            for job in waiting:
                self._run([job])

    def _encode(self, jobs: list[_Job]) -> None:
        """``encode_fn`` over the jobs' texts, in order, in model calls of at most ``max_batch_texts`` texts
        or ``max_batch_chars`` characters (one request may hold more); each job is answered once its rows are
        done. Before each call, the texts of cancelled jobs are dropped."""
        # (a batch stops collecting at its size: only its last job can be longer than a call)
        queue_ = [(job, i) for job in jobs for i in range(len(job.texts))]
        rows: dict[int, list] = {id(job): [] for job in jobs}
        done: dict[int, int] = dict.fromkeys(rows, 0)
        for job in jobs:
            if not job.texts:
                self._answer(job, self.encode_fn([]), None)
        start = 0
        while start < len(queue_):
            chunk, chars = [], 0
            while start < len(queue_) and len(chunk) < self.max_batch_texts and chars < self.max_batch_chars:
                job, i = queue_[start]
                start += 1
                if not job.abandoned:
                    chunk.append((job, i))
                    chars += len(job.texts[i])
            if not chunk:
                break
            began = time.perf_counter()
            try:
                out = self.encode_fn([job.texts[i] for job, i in chunk])
            finally:
                self._count(len(chunk), time.perf_counter() - began)
            at = 0
            while at < len(chunk):
                job = chunk[at][0]
                end = at
                while end < len(chunk) and chunk[end][0] is job:
                    end += 1
                rows[id(job)].append(tuple(part[at:end] for part in out) if isinstance(out, tuple) else out[at:end])
                done[id(job)] += end - at
                if done[id(job)] == len(job.texts):
                    self._answer(job, _joined_rows(rows.pop(id(job))), None)
                at = end

    def _answer(self, job: _Job, rows, error: Exception | None) -> None:
        job.settled = True
        job.loop.call_soon_threadsafe(_settle, job.future, rows, error)

    def _count(self, texts: int, seconds: float) -> None:
        with self._lock:
            self.stats.batches += 1
            self.stats.texts += texts
            if self.stats.on_batch is not None:
                self.stats.on_batch(texts, seconds)

    def _work(self) -> None:
        while True:
            with self._lock:
                self._arrived.wait_for(lambda: self._queue or self._closed)
                if not self._queue:  # closed, and nothing left to run
                    return
                jobs = self._collect(self._queue.popleft())
                if self._queue:  # jobs of other keys are waiting: another worker may take them
                    self._arrived.notify_all()
            live = [job for job in jobs if not job.abandoned]  # cancelled while queued: not run
            try:
                self._run(live)
            except Exception as err:  # a fault outside encode_fn (say in on_batch): fail these, keep working
                for job in live:
                    if not job.settled:
                        self._answer(job, None, err)
            with self._idle:
                self._pending -= len(jobs)
                self._idle.notify_all()


def _joined_rows(parts: list):
    """One job's rows from the model calls that made them (arrays, or tuples of arrays)."""
    if len(parts) == 1:
        return parts[0]
    if isinstance(parts[0], tuple):
        return tuple(np.concatenate(columns) for columns in zip(*parts, strict=True))
    return np.concatenate(parts)


def _settle(future: asyncio.Future, rows, error) -> None:
    if future.done():  # the client went away
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(rows)
