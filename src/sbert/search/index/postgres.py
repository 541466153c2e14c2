"""A vector index in PostgreSQL with the pgvector extension: the database as a second home for an index.

``PgVectorIndex`` answers as ``VectorIndex`` does (``build``, ``open``, ``add``, ``delete``, ``search``,
``ids``, ``texts``, ``len``, ``check_model``, ``check_backend``) but keeps its rows in a table
(``pos bigserial, id text unique, text text, embedding vector(dim)``) searched through an HNSW index
(``vector_cosine_ops`` for cosine, ``vector_ip_ops`` for dot). The model, its width, backend, metric and
HNSW settings lie in the table ``sbert_indexes`` (one row per index) and are checked on open.

Every write is one transaction that first locks the index's row in ``sbert_indexes``: writers queue, and
a writer that dies leaves the table as it was before its write (PostgreSQL rolls the transaction back).
``build`` writes a new table under a temporary name and swaps it in at the end (drop the old, rename the
new, in the build's last moments): searches read the old index until then, and a build that fails or is
killed leaves the old one as it was and no table behind.

A database that cannot be reached within ``CONNECT_TIMEOUT`` (opening) or ``POOL_TIMEOUT`` (a call on an
open index), each the URL's ``connect_timeout`` where it sets one, raises ``DatabaseUnavailableError``, an
``IndexUnavailableError`` (the service answers 503).

Locations: ``postgresql://user@host:port/database`` with a table (default ``sbert_index``), or the same
URL with the table as its fragment: ``postgresql://host/db#my_table`` (``open_index``).
"""

from __future__ import annotations

import re
import uuid
import warnings
import weakref
from collections.abc import Iterable, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from sbert.arrays import Array
from sbert.errors import (
    IndexExistsError,
    IndexFormatError,
    IndexUnavailableError,
    SbertError,
)
from sbert.search.base import Hit
from sbert.search.index.base import BaseIndex, backend_after_add, check_k, check_rows, model_manifest, prepare

__all__ = ["DEFAULT_TABLE", "DatabaseError", "DatabaseUnavailableError", "PgVectorIndex", "split_location"]

DEFAULT_TABLE = "sbert_index"  # the table of an index at a postgresql:// URL without one
_REFUSES = ("chunking", "bm25", "quantization")  # build settings of a folder index that a table cannot keep
_NOT_KEPT = ("ann", "lock_timeout", "titles", "document_prompt", "search")  # what a table does not record

POOL_SIZE = 4  # connections a PgVectorIndex opens at most (searches from several threads)
CONNECT_TIMEOUT = 5  # seconds a connection attempt may take (unless the URL sets connect_timeout)
POOL_TIMEOUT = 5.0  # seconds a call on an open index waits for a connection before DatabaseUnavailableError
BUILDING = "sbert_build_"  # prefix of the table a build writes before it is renamed into place
META = "sbert_indexes"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
_OPS = {"cosine": ("vector_cosine_ops", "<=>"), "dot": ("vector_ip_ops", "<#>")}
EF_SEARCH_MAX = 1000  # pgvector's largest hnsw.ef_search: a search for more rows than this may find fewer
_INSTALL = (
    "install pgvector on the server (Debian/Ubuntu: apt install postgresql-<version>-pgvector; "
    "or build it from https://github.com/pgvector/pgvector), or use the `pgserver` package, which bundles it"
)


class DatabaseError(SbertError, RuntimeError):
    """A database that cannot be reached, lacks the pgvector extension, or refuses a statement."""


class DatabaseUnavailableError(DatabaseError, IndexUnavailableError):
    """A database that cannot be reached now (down, unreachable, or no connection free in time); names
    host:port/database, never the password."""


def split_location(location: str, table: str | None = None) -> tuple[str, str]:
    """(URL, table) from ``postgresql://...[#table]``; ``table`` wins over the fragment."""
    url, _, fragment = location.partition("#")
    return url, table or fragment or DEFAULT_TABLE


def _where(url: str) -> str:
    """host:port/database of a connection URL (never its password)."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        info = conninfo_to_dict(url)
    except Exception:  # a malformed URL: connect reports it
        return url.split("@")[-1]
    host = info.get("host") or info.get("hostaddr") or "localhost"
    return f"{host}:{info.get('port') or 5432}/{info.get('dbname') or info.get('user') or '(default database)'}"


def _url_timeout(url: str) -> str | None:
    """The URL's own ``connect_timeout`` as written, or None (not given; a malformed URL: connect reports it)."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        return conninfo_to_dict(url).get("connect_timeout") or None
    except Exception:
        return None


def _connect_options(url: str) -> dict:
    """``connect_timeout``: the URL's own, else ``CONNECT_TIMEOUT``."""
    return {} if _url_timeout(url) else {"connect_timeout": CONNECT_TIMEOUT}


def _pool_timeout(url: str) -> float:
    """How long a call waits for a connection: the URL's ``connect_timeout`` where it sets one (libpq's floor of
    2 s applied; a pool that gave up sooner would cut the attempts it allows short), else ``POOL_TIMEOUT``
    (also for 0, libpq's "for ever", and a value that is not a number)."""
    try:
        given = float(_url_timeout(url) or 0)
    except ValueError:
        return POOL_TIMEOUT
    return max(given, 2.0) if given > 0 else POOL_TIMEOUT


def _connect(url: str):
    """A connection with pgvector's types registered; DatabaseError says what is wrong
    (DatabaseUnavailableError: no connection)."""
    import psycopg

    try:
        conn = psycopg.connect(url, **_connect_options(url))
    except psycopg.Error as err:
        raise DatabaseUnavailableError(f"cannot connect to PostgreSQL at {_where(url)}: {str(err).strip()}") from err
    try:
        _ensure_extension(conn, url)
        from pgvector.psycopg import register_vector

        register_vector(conn)
        conn.commit()
    except BaseException:
        conn.close()
        raise
    return conn


def _pool(url: str, size: int, name: str):
    """Up to ``size`` connections with pgvector's types registered, opened as searches need them."""
    from pgvector.psycopg import register_vector
    from psycopg_pool import ConnectionPool

    def configure(conn) -> None:
        register_vector(conn)
        conn.commit()

    return ConnectionPool(
        url,
        min_size=1,
        max_size=size,
        kwargs=_connect_options(url),
        timeout=_pool_timeout(url),
        configure=configure,
        check=ConnectionPool.check_connection,  # a connection broken by a server restart is replaced
        name=name,
        open=True,
    )


def _ensure_extension(conn, url: str) -> None:
    """Create the ``vector`` extension if the server has it and the database does not yet use it."""
    import psycopg

    if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone():
        conn.commit()
        return
    if not conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone():
        raise DatabaseError(f"PostgreSQL at {_where(url)} has no pgvector extension ('vector'): {_INSTALL}")
    try:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('sbert: create extension vector'))")
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except psycopg.Error as err:
        raise DatabaseError(
            f"PostgreSQL at {_where(url)}: cannot create the pgvector extension ({str(err).strip()}); "
            "ask the database's owner to run CREATE EXTENSION vector"
        ) from err


def _check_table_name(table: str) -> str:
    if not _NAME.fullmatch(table):
        raise ValueError(
            f"table name {table!r}: expected letters, digits and _ (at most 63, not starting with a digit)"
        )
    return table


class PgVectorIndex(BaseIndex):
    """Vectors with ids and texts in a PostgreSQL table with an HNSW index. ``build`` makes one, ``open``
    reads one, then ``add``/``delete``/``search``. Searches from several threads run side by side on a pool
    of up to ``pool_size`` connections (psycopg_pool; each call takes one, broken ones are replaced);
    writes from several threads or processes queue on a row lock."""

    def __init__(self, url: str, table: str, manifest: dict, pool_size: int = POOL_SIZE) -> None:
        """The index in ``table`` at ``url``: use ``open`` or ``build``."""
        if pool_size < 1:
            raise ValueError(f"pool_size must be at least 1, got {pool_size}")
        self.url, self.table, self._manifest = url, table, manifest
        self.path = f"{_where(url)}#{table}"  # how errors and messages name it
        self._pool = _pool(url, pool_size, self.path)
        # an index dropped without close() closes its pool from the dropping thread (psycopg_pool's own
        # __del__ may run in one of the pool's workers, which cannot join itself)
        self._close = weakref.finalize(self, self._pool.close)

    # -- opening ---------------------------------------------------------------------------------------
    @classmethod
    def open(cls, url: str, table: str = DEFAULT_TABLE, pool_size: int = POOL_SIZE) -> PgVectorIndex:
        """Open the index in ``table``; IndexFormatError where the database holds no such index.
        ``pool_size``: the most connections that searches from several threads use at once."""
        _check_table_name(table)
        conn = _connect(url)  # first a plain connection: clear errors, and the extension checked
        try:
            manifest = _read_manifest(conn, table)
            conn.commit()
        finally:
            conn.close()
        if manifest is None:
            raise IndexFormatError(f"{_where(url)}: no sbert index in table {table!r} (build it first)")
        return cls(url, table, manifest, pool_size)

    @classmethod
    def build(
        cls,
        url: str,
        embeddings: Array,
        *,
        model: str | Path,
        table: str = DEFAULT_TABLE,
        ids: Sequence[str] | None = None,
        texts: Sequence[str | None] | None = None,
        metric: str = "cosine",
        hnsw_m: int = 16,
        ef_construction: int = 64,
        ef_search: int = 100,
        overwrite: bool = False,
        backend: str | None = None,
        build_memory: str = "256MB",
    ) -> PgVectorIndex:
        """Write a new index in ``table`` from (n, dim) embeddings made by ``model``, in one transaction.

        The rows and the HNSW index go to a new table, swapped in at the end (the old table dropped, the new
        renamed, the ``sbert_indexes`` row replaced): searches read the old index until that commit and wait
        only for the swap's drop and rename; a build that fails or is killed leaves the old index and no table.

        ``ids`` default to "0", "1", ...; ``texts`` are stored when given. The HNSW index has ``hnsw_m``
        links per node and ``ef_construction``; ``ef_search`` is the default search breadth. A table that
        holds an index is replaced only with ``overwrite``; a table that is not an sbert index never.
        ``build_memory`` is PostgreSQL's ``maintenance_work_mem`` for building the HNSW graph (pgvector builds
        far faster while the graph fits: about (4 * dim + 8 * hnsw_m + 100) bytes a row)."""
        _check_table_name(table)
        if metric not in _OPS:
            raise ValueError(f"metric must be one of {sorted(_OPS)}, got {metric!r}")
        dim = int(np.asarray(embeddings).shape[-1])
        manifest = model_manifest(model, backend, dim, metric)
        manifest.update(hnsw_m=int(hnsw_m), ef_construction=int(ef_construction), ef_search=int(ef_search))
        x = prepare(embeddings, manifest, table)
        ids = [str(i) for i in range(len(x))] if ids is None else [str(i) for i in ids]
        check_rows(x, ids, texts)
        conn = _connect(url)
        try:
            with conn.transaction():
                _claim(conn, table, overwrite, _where(url))
                building = f"{BUILDING}{uuid.uuid4().hex[:16]}"  # seen by no one: created in this transaction
                _create_table(conn, building, int(manifest["dim"]))
                _copy_rows(conn, building, ids, texts, x)
                _create_hnsw(conn, building, manifest, build_memory)
                _swap_in(conn, building, table, manifest)
            return cls.open(url, table)
        finally:
            conn.close()

    @staticmethod
    def check_target(url: str, table: str = DEFAULT_TABLE, overwrite: bool = False) -> None:
        """Raise unless ``build`` may write to ``table`` (call it before costly encoding): IndexExistsError
        for an index without ``overwrite``, or for a table that is not an sbert index."""
        conn = _connect(url)
        try:
            existing = _read_manifest(conn, _check_table_name(table))
            there = _exists(conn, table)
        finally:
            conn.close()
        if there and existing is None:
            raise IndexExistsError(f"{_where(url)}: table {table!r} exists and is not an sbert index; choose another")
        if existing is not None and not overwrite:
            raise IndexExistsError(
                f"{_where(url)}: table {table!r} already holds an index (overwrite=True, --overwrite)"
            )

    # -- where it lives (homes.py: postgresql:// URLs) -------------------------------------------------
    @classmethod
    def open_at(cls, location: str | Path, *, table: str | None = None, **options: Any) -> PgVectorIndex:
        """The index at ``postgresql://...[#table]`` (``table`` wins over the fragment)."""
        return cls.open(*split_location(str(location), table))

    @classmethod
    def check_location(
        cls, location: str | Path | None, *, table: str | None = None, overwrite: bool = False, **settings: Any
    ) -> tuple[str, str]:
        """(URL, table), once ``build`` may write there (``check_target``); settings a table cannot keep
        (windows of documents, BM25, quantisation) are refused."""
        for name in _REFUSES:
            if settings.get(name):
                raise ValueError(
                    f"{name} applies to a folder index; an index in PostgreSQL holds texts, searched by HNSW"
                )
        url, table = split_location(str(location), table)
        cls.check_target(url, table, overwrite)
        return url, table

    @classmethod
    def build_at(
        cls, target: tuple[str, str], embeddings: Array, *, encoder: Any = None, **options: Any
    ) -> PgVectorIndex:
        """``build`` in ``target`` (URL, table), without the options a table does not record (``_NOT_KEPT``:
        titles live in the texts) nor those of building elsewhere (``documents``, ``bm25``, ``show_progress``)."""
        skipped = (*_NOT_KEPT, "documents", "bm25", "show_progress")
        kept = {key: value for key, value in options.items() if key not in skipped}
        return cls.build(target[0], embeddings, table=target[1], **kept)

    def close(self) -> None:
        """Close the pool's connections."""
        self._close()

    def __enter__(self) -> PgVectorIndex:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- what it holds ---------------------------------------------------------------------------------
    @property
    def manifest(self) -> dict:
        return self._manifest

    @property
    def structures(self) -> list[str]:
        return ["hnsw"]

    @property
    def deleted(self) -> np.ndarray:
        """Deleted rows leave the table at once: none are kept."""
        return np.empty(0, dtype=np.int64)

    def default_method(self) -> str:
        return "hnsw"

    @property
    def ids(self) -> list[str]:
        return [row[0] for row in self._select("SELECT id FROM {} ORDER BY pos")]

    @property
    def texts(self) -> list[str | None]:
        return [row[0] for row in self._select("SELECT text FROM {} ORDER BY pos")]

    def __len__(self) -> int:
        return int(self._select("SELECT count(*) FROM {}")[0][0])

    def refresh(self) -> bool:
        """Read the index's settings anew; True if another process wrote since. A new model, width or
        metric (the table rebuilt by someone else) is refused with a warning and the old settings kept."""
        with self._session() as conn:
            new = _read_manifest(conn, self.table)
        if new is None or new["updated"] == self._manifest["updated"]:
            return False
        changed = [key for key in ("model", "dim", "metric") if new[key] != self._manifest[key]]
        if changed:
            warnings.warn(f"{self.path}: its {changed[0]} changed; keeping the settings already loaded", stacklevel=2)
            return False
        self._manifest = new
        return True

    # -- searching -------------------------------------------------------------------------------------
    def search(
        self,
        queries: Array,
        k: int = 10,
        *,
        method: str | None = None,
        ef_search: int | None = None,
        backend: str | None = None,
        allow_mixed_backend: bool = False,
        mode: str | None = None,
        hybrid=None,
        rescore: int | None = None,
    ) -> list:
        """The best ``k`` rows for each (n, dim) query embedding, best first, as ``Hit``s (score: cosine
        similarity or dot product; ``cosine``: the cosine either way; ``row``: the row's position in the
        table). ``method`` hnsw (default; ``ef_search`` candidates, at least ``k`` up to pgvector's largest,
        ``EF_SEARCH_MAX``) or exact (a full scan)."""
        check_k(k)
        if mode is not None or hybrid is not None or rescore is not None:
            raise ValueError(
                f"index {self.path} (PostgreSQL) holds texts without BM25: mode, hybrid, rescore do not apply"
            )
        if method not in (None, "hnsw", "exact"):
            raise ValueError(f"index {self.path} (PostgreSQL) searches by hnsw or exact, not {method!r}")
        self.check_backend(backend, allow_mixed_backend)
        q = prepare(queries, self._manifest, self.path)
        breadth = min(max(k, ef_search or self._manifest["ef_search"]), EF_SEARCH_MAX)
        op = _OPS[self.metric][1]
        sign = -1.0 if self.metric == "dot" else None  # <#> is the negative dot product; <=> is 1 - cosine
        statement = _sql(
            f"SELECT id, text, pos, embedding {op} %s, embedding <=> %s FROM {{}} ORDER BY embedding {op} %s LIMIT %s",
            self.table,
        )
        out = []
        with self._session() as conn, conn.transaction():
            conn.execute("SELECT set_config('hnsw.ef_search', %s, true)", (str(breadth),))
            if method == "exact":
                conn.execute("SELECT set_config('enable_indexscan', 'off', true)")
            for vector in q:
                rows = conn.execute(statement, (vector, vector, vector, k)).fetchall()
                out.append([Hit(i, sign * d if sign else 1.0 - d, t, int(p), cosine=1.0 - c) for i, t, p, d, c in rows])
        return out

    # -- writing ---------------------------------------------------------------------------------------
    def add(
        self,
        embeddings: Array,
        ids: Sequence[str] | None = None,
        texts: Sequence[str | None] | None = None,
        show_progress: bool | None = None,
        *,
        backend: str | None = None,
        allow_mixed_backend: bool = False,
        documents=None,
    ) -> None:
        """Append rows in one transaction, after any other writer's (ids default to consecutive numbers
        after the largest numeric id). ``backend``: see ``check_backend``; mixing precisions records ``mixed``."""
        if documents is not None:
            raise ValueError(f"index {self.path} (PostgreSQL) holds texts, not windows of documents")
        with self._writing() as (conn, manifest):
            recorded = backend_after_add(self.path, manifest, backend, allow_mixed_backend)
            x = prepare(embeddings, manifest, self.path)
            if ids is None:
                ids = _next_ids(conn, self.table, len(x))
            ids = [str(i) for i in ids]
            check_rows(x, ids, texts)
            clash = conn.execute(_sql("SELECT id FROM {} WHERE id = ANY(%s) LIMIT 5", self.table), (ids,)).fetchall()
            if clash:
                raise ValueError(f"ids must be unique in the index; already there: {[c[0] for c in clash]}")
            _copy_rows(conn, self.table, ids, texts, x)
            _touch(conn, self.table, recorded if recorded else backend)

    def delete(self, ids: Iterable[str]) -> int:
        """Delete rows by id in one transaction; returns how many. Unknown ids raise KeyError naming them
        (and nothing is deleted)."""
        ids = list(dict.fromkeys(str(i) for i in ids))
        with self._writing() as (conn, manifest):
            gone = conn.execute(_sql("DELETE FROM {} WHERE id = ANY(%s) RETURNING id", self.table), (ids,)).fetchall()
            missing = sorted(set(ids) - {row[0] for row in gone})
            if missing:
                more = " ..." if len(missing) > 5 else ""
                raise KeyError(f"index {self.path} has no rows with ids {missing[:5]}{more}")
            _touch(conn, self.table, manifest.get("backend"))
        return len(gone)

    # -- the connection --------------------------------------------------------------------------------
    @contextmanager
    def _session(self):
        """A connection of the pool, for this call alone: committed after, rolled back on an error (no
        snapshot held between calls, and a failed statement does not poison the next one).
        DatabaseUnavailableError when none comes within the pool's timeout (``_pool_timeout``) or the server goes
        away mid-call."""
        import psycopg
        from psycopg_pool import PoolTimeout

        try:
            with self._pool.connection() as conn:
                try:
                    yield conn
                except psycopg.OperationalError as err:
                    if not conn.broken:
                        raise
                    raise DatabaseUnavailableError(
                        f"{self.path}: the connection to PostgreSQL was lost ({str(err).strip()}); try again"
                    ) from err
        except PoolTimeout as err:
            raise DatabaseUnavailableError(
                f"{self.path}: no connection to PostgreSQL within {self._pool.timeout:g} s: the database is "
                f"down or unreachable, or all {self._pool.max_size} connections stayed busy ({err})"
            ) from err

    @contextmanager
    def _writing(self):
        """A transaction holding the index's row lock, with its settings read under the lock."""
        with self._session() as conn:
            with conn.transaction():
                manifest = _read_manifest(conn, self.table, lock=True)
                if manifest is None:
                    raise IndexFormatError(f"{self.path}: the index was dropped")
                yield conn, manifest
            self._manifest = _read_manifest(conn, self.table) or manifest

    def _select(self, statement: str) -> list[tuple]:
        with self._session() as conn:
            return conn.execute(_sql(statement, self.table)).fetchall()


# -- statements ------------------------------------------------------------------------------------------
def _sql(statement: str, table: str):
    from psycopg import sql

    return sql.SQL(statement).format(sql.Identifier(table))


_COLUMNS = ("model", "model_path", "backend", "dim", "metric", "hnsw_m", "ef_construction", "ef_search", "adapter")


def _create_meta(conn) -> None:
    conn.execute("SELECT pg_advisory_xact_lock(hashtext('sbert: create sbert_indexes'))")
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {META} (name text PRIMARY KEY, model text NOT NULL, model_path text, "
        "backend text, dim integer NOT NULL, metric text NOT NULL, hnsw_m integer NOT NULL, "
        "ef_construction integer NOT NULL, ef_search integer NOT NULL, "
        "created timestamptz NOT NULL DEFAULT now(), updated timestamptz NOT NULL DEFAULT clock_timestamp())"
    )
    # a LoRA adapter's record (its name, base and weights' hash: adapter_folder.adapter_record); added to the
    # table of an older sbert, whose indexes then record none
    conn.execute(f"ALTER TABLE {META} ADD COLUMN IF NOT EXISTS adapter jsonb")


def _read_manifest(conn, table: str, lock: bool = False) -> dict | None:
    """The index's row of ``sbert_indexes`` as a dict (None: no such index); ``lock``: FOR UPDATE."""
    if not conn.execute("SELECT to_regclass(%s)", (META,)).fetchone()[0]:
        return None
    row = conn.execute(  # as JSON: a table of an older sbert lacks the newer columns
        f"SELECT to_jsonb(t) FROM {META} t WHERE name = %s{' FOR UPDATE' if lock else ''}", (table,)
    ).fetchone()
    if row is None:
        return None
    manifest = {key: row[0].get(key) for key in (*_COLUMNS, "updated")}
    if manifest["adapter"] is None:
        del manifest["adapter"]
    hnsw = {key: manifest[key] for key in ("hnsw_m", "ef_construction", "ef_search")}
    return {**manifest, "structures": {"hnsw": hnsw}, "segments": [], "store": "postgresql"}


def _exists(conn, name: str) -> bool:
    from psycopg import sql

    return conn.execute("SELECT to_regclass(%s)", (sql.Identifier(name).as_string(conn),)).fetchone()[0] is not None


def _claim(conn, table: str, overwrite: bool, where: str) -> None:
    """Take ``table`` for a build until the transaction ends: other builds of it wait, and so do writers
    (its ``sbert_indexes`` row locked); searches do not. Refuses a table that is not an sbert index, and an
    index without ``overwrite``."""
    _create_meta(conn)
    conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"sbert index {table}",))
    existing = _read_manifest(conn, table, lock=True)
    if _exists(conn, table):
        if existing is None:
            raise IndexExistsError(f"{where}: table {table!r} exists and is not an sbert index; choose another")
        if not overwrite:
            raise IndexExistsError(f"{where}: table {table!r} already holds an index (overwrite=True, --overwrite)")


def _create_table(conn, table: str, dim: int) -> None:
    conn.execute(
        _sql(
            "CREATE TABLE {} (pos bigserial PRIMARY KEY, id text NOT NULL UNIQUE, text text, "
            f"embedding vector({dim}) NOT NULL)",
            table,
        )
    )


def _swap_in(conn, building: str, table: str, manifest: dict) -> None:
    """Replace ``table`` (if any) by ``building`` and record the index: the drop waits for searches running
    on the old table, and new ones wait from then until the commit, which follows at once."""
    if _exists(conn, table):
        conn.execute(_sql("DROP TABLE {}", table))
    conn.execute(_sql("ALTER TABLE {} RENAME TO ", building) + _sql("{}", table))
    for suffix, kind in (("pkey", "INDEX"), ("id_key", "INDEX"), ("embedding_idx", "INDEX"), ("pos_seq", "SEQUENCE")):
        old, new = f"{building}_{suffix}", f"{table}_{suffix}"  # the names PostgreSQL gave, as a new table's
        if len(new) <= 63 and _exists(conn, old) and not _exists(conn, new):
            conn.execute(_sql(f"ALTER {kind} {{}} RENAME TO ", old) + _sql("{}", new))
    from psycopg.types.json import Jsonb

    values = [Jsonb(manifest[key]) if key == "adapter" and key in manifest else manifest.get(key) for key in _COLUMNS]
    update = ", ".join(f"{key} = EXCLUDED.{key}" for key in _COLUMNS)
    conn.execute(  # updated in place: a writer waiting on the row's lock then writes to the new table
        f"INSERT INTO {META} (name, {', '.join(_COLUMNS)}) VALUES (%s{', %s' * len(_COLUMNS)}) "
        f"ON CONFLICT (name) DO UPDATE SET {update}, created = now(), updated = clock_timestamp()",
        (table, *values),
    )


def _create_hnsw(conn, table: str, manifest: dict, memory: str) -> None:
    ops = _OPS[manifest["metric"]][0]
    m, ef = int(manifest["hnsw_m"]), int(manifest["ef_construction"])
    conn.execute("SELECT set_config('maintenance_work_mem', %s, true)", (memory,))
    conn.execute(
        _sql(f"CREATE INDEX ON {{}} USING hnsw (embedding {ops}) WITH (m = {m}, ef_construction = {ef})", table)
    )


def _copy_rows(conn, table: str, ids: list[str], texts, x: np.ndarray) -> None:
    """Write rows with binary COPY (fast, and within the caller's transaction)."""
    with (
        conn.cursor() as cur,
        cur.copy(_sql("COPY {} (id, text, embedding) FROM STDIN WITH (FORMAT BINARY)", table)) as copy,
    ):
        copy.set_types(["text", "text", "vector"])
        for row, name in enumerate(ids):
            copy.write_row((name, None if texts is None else texts[row], x[row]))


def _touch(conn, table: str, backend: str | None) -> None:
    conn.execute(f"UPDATE {META} SET updated = clock_timestamp(), backend = %s WHERE name = %s", (backend, table))


def _next_ids(conn, table: str, n: int) -> list[str]:
    """``n`` ids after the largest numeric id (read under the writers' lock)."""
    top = conn.execute(_sql("SELECT max(id::numeric) FROM {} WHERE id ~ '^[0-9]+$'", table)).fetchone()[0]
    start = 0 if top is None else int(top) + 1
    return [str(start + i) for i in range(n)]
