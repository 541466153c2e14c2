"""Response bodies of the service, as pydantic models, and the JSON writer that sends them.

Routes send plain dicts through ``json_response`` (orjson, numpy arrays written directly: no
float lists built in Python); the models below are the contract those dicts keep (the OpenAPI
schema, and the tests check served bodies against them).
"""

from __future__ import annotations

from typing import Any, Literal

import orjson
from pydantic import BaseModel
from starlette.responses import Response


def json_response(payload: Any, status: int = 200) -> Response:
    """A JSON response; numpy arrays in ``payload`` are written directly (orjson), not via lists."""
    return Response(
        orjson.dumps(payload, option=orjson.OPT_SERIALIZE_NUMPY), status_code=status, media_type="application/json"
    )


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None
    code: str | None


class ErrorResponse(BaseModel):
    """OpenAI's error shape, for every 4xx and 5xx."""

    error: ErrorDetail


class Embedding(BaseModel):
    object: Literal["embedding"] = "embedding"
    index: int
    embedding: list[float] | str  # a base64 string of little-endian float32 with encoding_format=base64


class Usage(BaseModel):
    prompt_tokens: int
    total_tokens: int


class EmbeddingResponse(BaseModel):
    """OpenAI's embeddings response."""

    object: Literal["list"] = "list"
    data: list[Embedding]
    model: str
    usage: Usage


class SimilarityResponse(BaseModel):
    mode: Literal["matrix", "pairwise"]
    similarity: str
    scores: list[list[float]] | list[float]


class SearchHit(BaseModel):
    id: str
    score: float
    cosine: float | None = None  # its cosine similarity to the query, where known (beside a fused or re-ranked score)
    text: str | None = None  # in an index of documents: the document's best passage
    span: list[int] | None = None  # that passage's [start, end) characters in its document
    title: str | None = None  # the document's title, where the corpus had one (the text begins with it too)
    lead: float | None = None  # with a lead asked: how far its cosine leads hits 2-10's mean (null: the only hit)


class QueryResult(BaseModel):
    query: str
    hits: list[SearchHit]


class SearchResponse(BaseModel):
    results: list[QueryResult]


class Health(BaseModel):
    status: Literal["ok"] = "ok"
    model: str
    dim: int
    index: bool


class IndexInfo(BaseModel):
    """The served index: ``size`` searchable items (documents in an index of documents, else texts), ``rows``
    vectors (windows of documents, or texts), and what a search may ask of it."""

    size: int
    rows: int
    documents: bool
    lexical: bool  # holds a BM25 index: hybrid search works
    methods: list[str]  # exact, and the structures it keeps (hnsw, int8, binary)
    metric: str


class Info(BaseModel):
    """What the service serves (the web page shows it): the model, its width and similarity, the index."""

    model: str
    dim: int
    similarity: str
    max_seq_length: int
    index: IndexInfo | None
