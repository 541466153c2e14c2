"""``encode_to_shards``: encode a stream of texts with N worker processes into a resumable shard folder."""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import sys
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sbert.errors import InputFileError, SbertError
from sbert.parallel.guard import check_main_guard
from sbert.parallel.inputs import Chunk, chunks, input_fingerprint, iter_texts
from sbert.parallel.shards import ShardFolder
from sbert.parallel.worker import EncodeSpec, init_worker, run_chunk


class WorkerDiedError(SbertError, RuntimeError):
    """A worker process died (killed, out of memory, ...): finished shards are kept; resume redoes the rest."""


class EncodeStoppedError(SbertError, RuntimeError):
    """The run was stopped by SIGTERM or SIGINT: finished shards are kept, workers ended; resume redoes the rest."""


class _Stop(BaseException):
    """Raised in the main thread by the SIGTERM/SIGINT handler of a run (a BaseException, like KeyboardInterrupt,
    so that no ``except Exception`` on the way swallows it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@dataclass
class ShardRun:
    """What a run did: the folder, its rows and shards, and which shards it wrote or found finished."""

    folder: Path
    rows: int = 0
    shards: int = 0
    written: list[int] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)


def cpu_count() -> int:
    """Cores this process may run on (its affinity mask where the platform has one)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def encode_to_shards(
    model_name_or_path: str | Path,
    texts: str | Path | Iterable[str],
    out_dir: str | Path,
    *,
    processes: int = 1,
    shard_size: int = 10_000,
    resume: bool = True,
    skip_empty: bool = False,
    show_progress: bool | None = None,
    columns: Any = None,
    **options: Any,
) -> ShardRun:
    """Embed ``texts`` (a corpus file, '-' = stdin, or an iterable of str; streamed, never held whole: see
    ``sbert.parallel.inputs.iter_texts``; ``columns``: a ``sbert.data.corpus.Columns``) into ``out_dir``: one
    shard of ``shard_size`` rows at a time, by ``processes`` worker processes ("spawn" start method; each loads
    the model once and runs cores // processes threads).

    ``options`` are ``EncodeSpec``'s: backend, precision, device, batch_size, max_tokens, normalize,
    max_seq_length, prompt_name, prompt, allow_pickle. With ``resume``, shards that a previous run with the
    same settings and input finished, and whose files match their checksums, are kept (not recomputed); the
    rest are encoded. ``processes=1`` encodes in this process. The run holds ``out_dir``'s lock (another run
    there: ``ShardFolderLockedError``); workers die with this process; SIGTERM/SIGINT stop it with
    ``EncodeStoppedError``, and a worker that dies raises ``WorkerDiedError``, both keeping finished shards.
    Vectors are identical to ``Encoder.encode``'s; ``sbert.parallel.load_vectors(out_dir)`` gives them in
    input order.
    """
    from sbert.model_names import canonical_name, resolve

    if processes < 1:
        raise ValueError(f"processes must be at least 1, got {processes}")
    spec = EncodeSpec(str(model_name_or_path), **options)
    resolve(spec.model)  # a missing model fails here, not in every worker
    if processes > 1:
        check_main_guard()
    stream = non_empty(iter_texts(texts, skip_empty=skip_empty, columns=columns), texts)
    source = input_fingerprint(texts)
    settings = shard_settings(spec, canonical_name(spec.model), shard_size)
    with ShardFolder.open(out_dir, settings, resume, source) as folder, progress_bar(show_progress) as bar:
        run = ShardRun(folder.path)
        try:
            with stop_on_signals():
                todo = shards_to_do(folder, chunks(stream, shard_size), run, bar)
                if processes == 1:
                    _run_here(folder, spec, todo, run, bar)
                else:
                    _run_pool(folder, spec, todo, run, bar, processes)
        except _Stop as stop:
            raise EncodeStoppedError(
                f"{folder.path}: stopped by {stop}{'; the worker processes were ended' if processes > 1 else ''}; "
                f"the {len(run.written) + len(run.skipped)} finished shards are kept: run the same command again "
                "(resume is the default; --resume) to encode the rest"
            ) from None
        folder.finish(run.rows, run.shards)
    return run


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """While inside, SIGTERM and SIGINT raise ``_Stop`` in the main thread (once; a second signal while the run
    winds down is ignored), so the run ends its workers and keeps what it finished. Elsewhere than the main
    thread (where Python allows no handlers) nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    signums = (signal.SIGTERM, signal.SIGINT)
    before = {signum: signal.getsignal(signum) for signum in signums}

    def stop(signum: int, frame: Any) -> None:
        for other in signums:
            signal.signal(other, signal.SIG_IGN)
        raise _Stop(signum)

    for signum in signums:
        signal.signal(signum, stop)
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)


def shard_settings(spec: EncodeSpec, model: str, shard_size: int) -> dict[str, Any]:
    """What the vectors depend on: a resumed run must match it (``dim`` is filled in by the first shard)."""
    return {
        "model": model,
        "backend": spec.backend,
        "precision": spec.precision,
        "normalized": spec.normalize,
        "max_seq_length": spec.max_seq_length,
        "prompt_name": spec.prompt_name,
        "prompt": spec.prompt,
        "shard_size": shard_size,
        "dim": None,
    }


def non_empty(stream: Iterator[Any], source: Any) -> Iterator[Any]:
    """``stream`` as it was, after checking (by reading its first text) that it has one."""
    first = next(stream, None)
    if first is None:
        name = source if isinstance(source, (str, Path)) else "the input"
        raise InputFileError(f"{name}: holds no texts; expected at least one")
    return itertools.chain([first], stream)


def progress_bar(show_progress: bool | None) -> Any:
    from tqdm.auto import tqdm

    disable = not sys.stderr.isatty() if show_progress is None else not show_progress
    return tqdm(desc="encode", unit="text", disable=disable, dynamic_ncols=True)


def shards_to_do(folder: ShardFolder, stream: Iterator[Chunk], run: ShardRun, bar: Any) -> Iterator[tuple[Chunk, str]]:
    """The chunks still to encode (with their texts' digest); finished ones are counted and passed over."""
    for chunk in stream:
        run.rows, run.shards = run.rows + len(chunk.texts), chunk.index + 1
        digest = chunk.digest
        if folder.is_done(chunk.index, digest):
            run.skipped.append(chunk.index)
            bar.update(len(chunk.texts))
            continue
        yield chunk, digest


def mark_done(folder: ShardFolder, chunk: Chunk, digest: str, record: dict[str, Any], run: ShardRun, bar: Any) -> None:
    folder.record(chunk.index, record, digest)
    run.written.append(chunk.index)
    bar.update(len(chunk.texts))


def _run_here(folder: ShardFolder, spec: EncodeSpec, todo: Iterator, run: ShardRun, bar: Any) -> None:
    encoder = None
    for chunk, digest in todo:
        encoder = encoder or spec.load()
        mark_done(folder, chunk, digest, spec.encode(encoder, folder.path, chunk), run, bar)


def _run_pool(folder: ShardFolder, spec: EncodeSpec, todo: Iterator, run: ShardRun, bar: Any, processes: int) -> None:
    """Keep at most 2 chunks per worker in flight (bounded memory); record shards as they finish."""
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    threads = max(1, cpu_count() // processes)
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(
        processes, mp_context=context, initializer=init_worker, initargs=(spec, threads, os.getpid())
    )
    pending: dict[Any, tuple[Chunk, str]] = {}

    def collect(block_until: int) -> None:
        while len(pending) > block_until:
            wait(pending, return_when=FIRST_COMPLETED)
            record_finished()

    def record_finished() -> None:
        """Record every shard that finished well, then raise the first failure (if any)."""
        finished = [f for f in pending if f.done() and not f.cancelled()]
        for future in sorted(finished, key=lambda f: f.exception() is not None):
            if future.exception() is not None:
                raise future.exception()  # the shard stays pending: reported as lost
            chunk, digest = pending.pop(future)
            mark_done(folder, chunk, digest, future.result(), run, bar)

    try:
        for chunk, digest in todo:
            collect(2 * processes - 1)
            pending[pool.submit(run_chunk, str(folder.path), chunk)] = (chunk, digest)
        collect(0)
    except BrokenProcessPool as err:
        with contextlib.suppress(BrokenProcessPool):
            record_finished()  # shards that other workers finished before the pool broke are kept
        lost = sorted(chunk.index for chunk, _ in pending.values())
        raise WorkerDiedError(
            f"{folder.path}: a worker process died (killed by a signal such as SIGKILL, or out of memory) while "
            f"shards {', '.join(map(str, lost))} were being encoded; the {len(run.written) + len(run.skipped)} "
            "finished shards are kept: run again with resume (the default; --resume) to redo the rest"
        ) from err
    except BaseException:  # stopped (SIGTERM, SIGINT) or failed here: keep what finished, end the workers now
        with contextlib.suppress(Exception):
            record_finished()
        _kill_workers(pool)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _kill_workers(pool: Any) -> None:
    """SIGKILL the pool's worker processes (their shards in flight are lost; resume redoes them).
    ``ProcessPoolExecutor`` has no public way before Python 3.14 (``kill_workers``)."""
    for process in list(getattr(pool, "_processes", {}).values()):
        with contextlib.suppress(OSError, ValueError):
            process.kill()
