"""``encode_with_ray``: the sharded encode of ``encode_to_shards`` run on a Ray cluster through Ray Data.

Ray Data's ``map_batches`` with a callable class runs a pool of actors, each loading the model once; the calling
process (the driver) streams the input, hands chunks to the pool and writes each returned shard into the same
resumable folder (manifest, ``.npy`` and Parquet shards) as ``encode_to_shards``. ``ray`` is imported only here.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sbert.errors import SbertError
from sbert.parallel import ray_watch
from sbert.parallel.inputs import Chunk, chunks, input_fingerprint, iter_texts
from sbert.parallel.processes import ShardRun, mark_done, non_empty, progress_bar, shard_settings, shards_to_do
from sbert.parallel.shards import ShardFolder, write_shard_files
from sbert.parallel.worker import EncodeSpec


class RayMissingError(SbertError, ImportError):
    """Ray Data is not installed here (the optional extra ``sbert[ray]``)."""


LOOPBACK = "127.0.0.1"
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
    columns: Any = None,
    **options: Any,
) -> ShardRun:
    """Embed ``texts`` (a corpus file, its ``columns``, '-' = stdin, or an iterable of str; streamed) into the
    shard folder ``out_dir`` on a Ray cluster: Ray Data ``map_batches`` over a pool of ``num_actors`` actors
    (``cpus_per_actor`` CPUs and threads, ``gpus_per_actor`` GPUs each), one chunk of ``shard_size`` texts.

    ``address``: None joins a running Ray in this process or starts a local one; "auto" a cluster started with
    ``ray start`` on this node; "ray://HEAD:10001" a remote cluster through Ray Client. The model reaches the
    actors as a name or folder that each node resolves from its own disk: a shipped model package ("default")
    installed on every node, or a folder on storage every node mounts. Nothing is downloaded. Shard files and
    the manifest are written by this (driver) process only, so ``out_dir`` need not be shared.

    The input is sent to the cluster ``window`` chunks at a time (default ``4 * num_actors``), so memory stays
    bounded; each window starts its actor pool afresh (one model load per actor per window). ``options``,
    folder layout and resume rules are ``encode_to_shards``'s: finished shards are kept, not recomputed.
    """
    from sbert.model_names import canonical_name, resolve

    if num_actors < 1:
        raise ValueError(f"num_actors must be at least 1, got {num_actors}")
    _require_ray()
    spec = EncodeSpec(str(model_name_or_path), **options)
    resolve(spec.model)  # a model missing on this node fails here, before the cluster is asked
    stream = non_empty(iter_texts(texts, skip_empty=skip_empty, columns=columns), texts)
    settings = shard_settings(spec, canonical_name(spec.model), shard_size)
    with ShardFolder.open(out_dir, settings, resume, input_fingerprint(texts)) as folder:
        run = ShardRun(folder.path)
        started, session = _connect(address)
        try:
            with progress_bar(show_progress) as bar:
                todo = shards_to_do(folder, chunks(stream, shard_size), run, bar)
                for part in _windows(todo, window or 4 * num_actors):
                    pool = (num_actors, cpus_per_actor, gpus_per_actor)
                    for index, vectors in _encode_window(spec, [chunk for chunk, _ in part], pool):
                        chunk, digest = part[index]
                        shard = (chunk.index, chunk.start, chunk.texts, vectors, chunk.ids)
                        mark_done(folder, chunk, digest, write_shard_files(folder.path, *shard), run, bar)
        finally:
            if started:
                stop_ray(session)
        folder.finish(run.rows, run.shards)
    run.written.sort()
    return run


def _require_ray() -> None:
    try:
        import ray.data  # noqa: F401
    except ImportError as err:
        raise RayMissingError("encoding on Ray needs Ray Data: pip install 'sbert[ray]' (or 'ray[data]')") from err


def _connect(address: str | None) -> tuple[bool, RaySession | None]:
    """Join ``address`` (or the Ray this process already runs, or a new local one): (started here, what
    ``stop_ray`` needs)."""
    import ray

    if ray.is_initialized():
        return False, None
    return True, start_ray(address=address, include_dashboard=False, log_to_driver=False)


@dataclass
class RaySession:
    """What ``start_ray`` changed: the signal handlers it replaced and, for a local cluster, its watcher."""

    handlers: dict[signal.Signals, Any]
    watcher: subprocess.Popen | None = None


def start_ray(address: str | None = None, **init_kwargs: Any) -> RaySession:
    """Join the Ray cluster at ``address`` ("auto", "HOST:PORT", "ray://HEAD:10001"; None: ``$RAY_ADDRESS``
    if set) or, with none, start a local one (``ray.init(**init_kwargs)``) that listens on 127.0.0.1 only and
    whose processes die with this one. Pass the result to ``stop_ray``.

    The local cluster's node address is 127.0.0.1, so its GCS, raylet, workers, agents and this driver bind
    their ports on loopback only (Ray binds all interfaces for any other node address); a node address that
    comes out otherwise stops the cluster and raises. A watcher process (``sbert.parallel.ray_watch``) kills
    what is left of the cluster once this process ends, even by SIGKILL."""
    import ray

    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    if address is not None or os.environ.get("RAY_ADDRESS"):
        ray.init(address=address, **init_kwargs)
        return RaySession(handlers)
    token = uuid.uuid4().hex
    watcher = subprocess.Popen(
        [sys.executable, "-I", str(Path(ray_watch.__file__)), str(os.getpid()), token],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # a signal to the driver's process group leaves it to clean up after
    )
    session = RaySession(handlers, watcher)
    try:
        with _loopback_cluster(token):
            ray.init(address="local", **init_kwargs)
        node = ray.util.get_node_ip_address()
        if node != LOOPBACK:
            raise SbertError(
                f"the local Ray cluster came up on {node}, not {LOOPBACK}, so it would listen on every network "
                f"interface (Ray {ray.__version__}); start a cluster yourself and pass its address (docs/scale.md)"
            )
    except BaseException:
        stop_ray(session)
        raise
    return session


@contextlib.contextmanager
def _loopback_cluster(token: str) -> Iterator[None]:
    """While ``ray.init`` starts a local cluster: its node address is loopback (Ray's own local-only mode, the
    default on macOS and Windows: ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, read by this process through
    ``ray_constants`` and by the processes it starts through the environment) and its processes carry the
    watcher's token."""
    from ray._private import ray_constants

    saved = {name: os.environ.get(name) for name in (ray_watch.JOB_ENV, ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR)}
    enabled = ray_constants.ENABLE_RAY_CLUSTER
    os.environ[ray_watch.JOB_ENV], os.environ[ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR] = token, "0"
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = enabled
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def stop_ray(session: RaySession | None) -> None:
    """``ray.shutdown()``, the signal handlers that were there before ``start_ray``, and, for a local
    cluster, the watcher told to kill whatever of it is left (waiting for it, ``ray_watch.SWEEP_S`` at most)."""
    import ray

    if session is None:
        return
    try:
        ray.shutdown()
    finally:
        for signum, handler in session.handlers.items():
            if handler is not None:
                signal.signal(signum, handler)
        if session.watcher is not None:
            if session.watcher.stdin is not None:  # opened as a pipe
                session.watcher.stdin.close()  # end of file: it sweeps, then exits
            with contextlib.suppress(subprocess.TimeoutExpired):
                session.watcher.wait(timeout=ray_watch.SWEEP_S + 5)


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
