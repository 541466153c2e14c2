"""``encode_with_ray``: the sharded encode of ``encode_to_shards`` run on a Ray cluster through Ray Data.

Ray Data's ``map_batches`` with a callable class runs a pool of actors, each loading the model once; the calling
process (the driver) streams the input, hands chunks to the pool and writes each returned shard into the same
resumable folder (manifest, ``.npy`` and Parquet shards) as ``encode_to_shards``. ``ray`` is imported only here.
"""

from __future__ import annotations

import io
import itertools
import os
import signal
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from sbert.errors import SbertError
from sbert.parallel.inputs import Chunk, chunks, iter_texts
from sbert.parallel.processes import ShardRun, _bar, _non_empty, _settings, _todo
from sbert.parallel.shards import ShardFolder, write_shard_files
from sbert.parallel.worker import EncodeSpec


class RayMissingError(SbertError, ImportError):
    """Ray Data is not installed here (the optional extra ``sbert[ray]``)."""


# Tests only: an actor that finds a file at this path removes it and kills itself (SIGKILL), one death a file.
KILL_TOKEN_ENV = "SBERT_RAY_KILL_TOKEN"


def _die_if_token() -> None:
    token = os.environ.get(KILL_TOKEN_ENV)
    if not token:
        return
    try:
        os.remove(token)
    except FileNotFoundError:
        return
    os.kill(os.getpid(), signal.SIGKILL)


class _EncodeActor:
    """One Ray actor: loads the model once (from local files), then encodes one chunk per call."""

    def __init__(self, spec: EncodeSpec, threads: int) -> None:
        os.environ["OMP_NUM_THREADS"] = str(threads)
        import torch

        torch.set_num_threads(threads)
        self.spec, self.encoder = spec, spec.load()

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """``batch``: columns index, texts (one chunk a row); returns index and the vectors as .npy bytes."""
        _die_if_token()
        out = []
        for texts in batch["texts"]:
            vectors = self.encoder.encode(
                [str(t) for t in texts],
                batch_size=self.spec.batch_size,
                max_tokens=self.spec.max_tokens,
                normalize=self.spec.normalize,
                prompt_name=self.spec.prompt_name,
                prompt=self.spec.prompt,
                show_progress=False,
            )
            buffer = io.BytesIO()
            np.save(buffer, np.ascontiguousarray(vectors, dtype=np.float32))
            out.append(buffer.getvalue())
        return {"index": np.asarray(batch["index"], dtype=np.int64), "vectors": np.array(out, dtype=object)}


def encode_with_ray(
    model_name_or_path: str | Path,
    texts: str | Path | Iterable[str],
    out_dir: str | Path,
    *,
    address: str | None = None,
    num_actors: int = 2,
    cpus_per_actor: float = 1,
    gpus_per_actor: float = 0,
    shard_size: int = 10_000,
    window: int | None = None,
    resume: bool = True,
    skip_empty: bool = False,
    show_progress: bool | None = None,
    **options: Any,
) -> ShardRun:
    """Embed ``texts`` (a file, '-' = stdin, or an iterable of str; streamed) into the shard folder ``out_dir``
    on a Ray cluster: Ray Data ``map_batches`` over a pool of ``num_actors`` actors (``cpus_per_actor`` CPUs
    and threads, ``gpus_per_actor`` GPUs each), one chunk of ``shard_size`` texts per call.

    ``address``: None joins a running Ray in this process or starts a local one; "auto" a cluster started with
    ``ray start`` on this node; "ray://HEAD:10001" a remote cluster through Ray Client. The model reaches the
    actors as a name or folder that each node resolves from its own disk: a shipped model package ("default")
    installed on every node, or a folder on storage every node mounts. Nothing is downloaded. Shard files and
    the manifest are written by this (driver) process only, so ``out_dir`` need not be shared.

    The input is sent to the cluster ``window`` chunks at a time (default ``4 * num_actors``), so memory stays
    bounded; each window starts its actor pool afresh (one model load per actor per window). ``options``,
    folder layout and resume rules are ``encode_to_shards``'s: finished shards are kept, not recomputed.
    """
    from sbert.registry import canonical_name, resolve

    if num_actors < 1:
        raise ValueError(f"num_actors must be at least 1, got {num_actors}")
    _require_ray()
    spec = EncodeSpec(str(model_name_or_path), **options)
    resolve(spec.model)  # a model missing on this node fails here, before the cluster is asked
    stream = _non_empty(iter_texts(texts, skip_empty=skip_empty), texts)
    folder = ShardFolder.open(out_dir, _settings(spec, canonical_name(spec.model), shard_size), resume)
    run = ShardRun(folder.path)
    started, handlers = _connect(address)
    try:
        with _bar(show_progress) as bar:
            todo = _todo(folder, chunks(stream, shard_size), run, bar)
            for part in _windows(todo, window or 4 * num_actors):
                pool = (num_actors, cpus_per_actor, gpus_per_actor)
                for index, vectors in _encode_window(spec, [chunk for chunk, _ in part], pool):
                    chunk, digest = part[index]
                    record = write_shard_files(folder.path, chunk.index, chunk.start, chunk.texts, vectors)
                    folder.record(chunk.index, record, digest)
                    run.written.append(chunk.index)
                    bar.update(len(chunk.texts))
    finally:
        if started:
            stop_ray(handlers)
    folder.finish(run.rows, run.shards)
    run.written.sort()
    return run


def _require_ray() -> None:
    try:
        import ray.data  # noqa: F401
    except ImportError as err:
        raise RayMissingError("encoding on Ray needs Ray Data: pip install 'sbert[ray]' (or 'ray[data]')") from err


def _connect(address: str | None) -> tuple[bool, dict]:
    """Join ``address`` (or the Ray this process already runs, or a new local one): (started here, the
    signal handlers to give back when it stops)."""
    import ray

    if ray.is_initialized():
        return False, {}
    return True, start_ray(address=address, include_dashboard=False, log_to_driver=False)


def start_ray(**init_kwargs: Any) -> dict:
    """``ray.init(**init_kwargs)``, returning the SIGINT/SIGTERM handlers it replaces (Ray installs its own
    in the driver and leaves them after ``shutdown``): pass them to ``stop_ray``."""
    import ray

    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    ray.init(**init_kwargs)
    return handlers


def stop_ray(handlers: dict) -> None:
    """``ray.shutdown()``, then the signal handlers that were there before ``start_ray``."""
    import ray

    ray.shutdown()
    for signum, handler in handlers.items():
        if handler is not None:
            signal.signal(signum, handler)


def _windows(todo: Iterator[tuple[Chunk, str]], size: int) -> Iterator[list[tuple[Chunk, str]]]:
    while part := list(itertools.islice(todo, size)):
        yield part


def _encode_window(spec: EncodeSpec, part: list[Chunk], pool: tuple[int, float, float]) -> Iterator[tuple[int, Any]]:
    """(position in ``part``, (rows, dim) float32 vectors) for each chunk, as the actor pool returns them."""
    import ray

    num_actors, cpus, gpus = pool
    items = [{"index": i, "texts": chunk.texts} for i, chunk in enumerate(part)]
    dataset = ray.data.from_items(items, override_num_blocks=len(items)).map_batches(
        _EncodeActor,
        fn_constructor_args=(spec, max(1, int(cpus))),
        batch_size=1,
        batch_format="numpy",
        compute=ray.data.ActorPoolStrategy(size=min(num_actors, len(items))),
        num_cpus=cpus,
        num_gpus=gpus,
    )
    for row in dataset.iter_rows():
        yield int(row["index"]), np.load(io.BytesIO(row["vectors"]))
