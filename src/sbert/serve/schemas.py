"""Request bodies of the service, as pydantic models, and the safe reading of a body into one.

``parse(raw, Model, context)`` reads JSON (refusing, before it parses, a body of more JSON values than
``Limits.max_body_values``; while it parses, integers over ``MAX_INT_DIGITS`` digits and bodies nested
too deeply) and validates it with a ``Context``: the limits, the model's width and names. A large body
takes a while of CPU: the routes run it on a worker thread, off the event loop. Every refusal is an
``ApiError`` in OpenAI's shape naming the field (``'input[3]' is empty``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, NoReturn, TypeVar

from pydantic import (
    BaseModel,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
    ValidationInfo,
    WrapValidator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from sbert.encoder import check_texts
from sbert.serve.errors import ApiError, from_validation
from sbert.serve.settings import FIELD_VALUES, Limits

MAX_INT_DIGITS = 100  # longer integers in a request body are refused (Python's own limit, 4300, raises ValueError)
RequestModel = TypeVar("RequestModel", bound=BaseModel)


@dataclass(frozen=True)
class Context:
    """What validating a request needs to know about the server."""

    limits: Limits
    dim: int
    model_name: str = "default"
    served: frozenset[str] = frozenset()
    # the indexes /search serves, by name ("": one given without a name), each with whether it keeps BM25 (a
    # search that leaves out 'hybrid' then fuses, and counts candidates)
    indexes: Mapping[str, bool] = dataclasses.field(default_factory=dict)

    def index_name(self, name: str | None) -> str:
        """The index a search names (``index``), or the only one where it names none; refused (400) where
        several are served and none is named, 404 where the name is not served."""
        names = ", ".join(repr(n) for n in self.indexes)
        if name is None:
            if len(self.indexes) > 1:
                message = f"this server serves several indexes ({names}): name one with 'index'"
                refuse(message, "index_required", "index")
            return next(iter(self.indexes), "")
        if name not in self.indexes or name == "":
            served = f"it serves {names}" if any(self.indexes) else "it serves one index, unnamed: leave out 'index'"
            refuse(f"the index {name!r} is not served here: {served}", "index_not_found", "index", status=404)
        return name


def refuse(message: str, code: str | None = None, param: str | None = None, status: int = 400, **more: Any) -> NoReturn:
    """Refuse a request from inside a validator with this exact message (``errors.from_validation``
    turns it into an ApiError with ``status``, ``param`` and ``code``)."""
    ctx = {"message": message, "code": code, "param": param, "status": status, **more}
    raise PydanticCustomError("refused", "{message}", ctx)


def _context(info: ValidationInfo) -> Context:
    return info.context if isinstance(info.context, Context) else Context(Limits(), dim=2**31)


def phrased(message: str) -> WrapValidator:
    """Refuse anything the wrapped type refuses with "'field' ``message``"."""

    def check(value: Any, handler: Callable[[Any], Any], info: ValidationInfo) -> Any:
        try:
            return handler(value)
        except ValidationError:
            refuse(f"'{info.field_name}' {message}", param=info.field_name)

    return WrapValidator(check)


Count = Annotated[StrictInt, Field(ge=1, le=1000), phrased("must be an integer from 1 to 1000")]  # not true/false
Flag = Annotated[StrictBool, phrased("must be true or false")]


def _texts(value: Any, handler: Callable[[Any], Any], info: ValidationInfo) -> list[str]:
    """A string or a list of strings within the limits, each one the model can encode."""
    param, limits = info.field_name or "input", _context(info).limits
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items:
        refuse(f"'{param}' must be a non-empty string or a non-empty list of strings", param=param)
    if len(items) > limits.max_inputs:
        refuse(f"'{param}' has {len(items)} items; the limit is {limits.max_inputs}", "too_many_inputs", param)
    for i, text in enumerate(items):
        if not isinstance(text, str):
            kind = "token arrays are not supported; send text" if isinstance(text, (int, list)) else type(text).__name__
            refuse(f"'{param}[{i}]' must be a string ({kind})", param=param)
        if not text.strip():
            refuse(f"'{param}[{i}]' is empty; empty strings cannot be embedded", "empty_input", param)
        if len(text) > limits.max_chars:
            refuse(
                f"'{param}[{i}]' has {len(text)} characters; the limit is {limits.max_chars}", "input_too_long", param
            )
    try:
        check_texts(items)  # what the model cannot encode (lone surrogates), refused before it joins a batch
    except (TypeError, ValueError) as err:
        refuse(re.sub(r"^texts\[(\d+)\]", lambda m: f"'{param}[{m.group(1)}]'", str(err)), "invalid_input", param)
    return items


def _optional_texts(value: Any, handler: Callable[[Any], Any], info: ValidationInfo) -> list[str] | None:
    return None if value is None else _texts(value, handler, info)


def _served_index(value: Any, handler: Callable[[Any], Any], info: ValidationInfo) -> str | None:
    """The index a search names, or the only one (``Context.index_name``); None where none is served."""
    if value is not None and not isinstance(value, str):
        refuse("'index' must be a string", param="index")
    context = _context(info)
    return context.index_name(value) if context.indexes else value


Texts = Annotated[list[str], WrapValidator(_texts)]
OptionalTexts = Annotated[list[str] | None, WrapValidator(_optional_texts)]
REQUIRED = Field(None, validate_default=True)  # absent: refused by the validator, with its message


def _served_model(value: Any, handler: Callable[[Any], Any], info: ValidationInfo) -> str | None:
    """A model this server serves (absent: the served one); any other name gets OpenAI's 404."""
    if value is not None and not isinstance(value, str):
        refuse("'model' must be a string", param="model")
    context = _context(info)
    if value is None or value in context.served or not context.served:
        return value
    others = ", ".join(repr(n) for n in sorted(context.served - {context.model_name}) if not os.path.isabs(n))
    message = f"the model {value!r} does not exist here: this server serves {context.model_name!r}"
    if others:  # its other names; its folder's absolute path is accepted too, but not told
        message += f" (also accepted: {others})"
    refuse(message, "model_not_found", "model", status=404, kind="invalid_request_error")


def _dimensions(value: Any, handler: Callable[[Any], Any], info: ValidationInfo) -> int | None:
    dim = _context(info).dim
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= dim):
        refuse(f"'dimensions' must be an integer from 1 to {dim}", param="dimensions")
    return value


def _prompt_text(value: Any, handler: Callable[[Any], Any], info: ValidationInfo) -> str | None:
    """A prompt, or a prompt's name: a string within the limit on a text's length."""
    param, limit = info.field_name, _context(info).limits.max_chars
    if value is not None and not isinstance(value, str):
        refuse(f"'{param}' must be a string", param=param)
    if value is not None and len(value) > limit:
        refuse(f"'{param}' has {len(value)} characters; the limit is {limit}", "input_too_long", param)
    return value


PromptText = Annotated[str | None, WrapValidator(_prompt_text)]


class EmbeddingRequest(BaseModel):
    """OpenAI's embeddings request, plus ``truncate`` (false: texts over the model's length are refused) and
    ``prompt_name`` or ``prompt``: put before each text (neither: the model's default prompt, if any)."""

    model: Annotated[str | None, WrapValidator(_served_model)] = None  # first: an unknown model is a 404 first
    input: Texts = REQUIRED
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: Annotated[int | None, WrapValidator(_dimensions)] = None
    truncate: Flag = True
    prompt_name: PromptText = None
    prompt: PromptText = None

    @model_validator(mode="after")
    def _one_prompt(self) -> EmbeddingRequest:
        if self.prompt is not None and self.prompt_name is not None:
            refuse("give 'prompt' or 'prompt_name', not both", param="prompt")
        return self


class SimilarityRequest(BaseModel):
    """Scores between ``a`` and ``b`` (absent: ``a`` with itself): a matrix, or pair by pair."""

    a: Texts = REQUIRED
    b: OptionalTexts = None
    mode: Literal["matrix", "pairwise"] = "matrix"

    @model_validator(mode="after")
    def _pairs(self, info: ValidationInfo) -> SimilarityRequest:
        if self.mode == "pairwise" and (self.b is None or len(self.a) != len(self.b)):
            refuse("'pairwise' needs 'a' and 'b' of the same length", param="b")
        limit = _context(info).limits.max_similarity_cells
        rows, columns = len(self.a), len(self.a if self.b is None else self.b)
        cells = rows if self.mode == "pairwise" else rows * columns
        if cells > limit:
            refuse(
                f"{rows} × {columns} texts ask for {cells} similarity scores; the limit is {limit} a request "
                "(--max-similarity-cells): send fewer texts",
                "too_many_cells",
                "b" if self.b is not None else "a",
                status=422,
            )
        return self


class SearchRequest(BaseModel):
    """The ``k`` nearest texts (documents, in an index of documents) to each query; ``rerank`` re-scores
    ``candidates`` with the cross-encoder; ``hybrid`` fuses with BM25 (``candidates`` from each side) by
    ``fusion`` (``alpha``: the dense side's weight in ``weighted``); ``mode``: how documents are scored.
    ``hybrid``, ``fusion``, ``alpha`` left out: the index's (``sbert search``'s defaults: hybrid weighted 0.7
    where the index keeps BM25, what an index built with ``--auto`` recorded). ``threshold``: only hits scoring
    at least this, as ``sbert search --threshold`` ("is this already here?": a dense search unless ``hybrid``).
    ``lead``: only the top hit, where its cosine leads hits 2-10's mean by at least this, as ``sbert search
    --lead`` ("is the top hit the duplicate?"; not with ``rerank``)."""

    # first: an unknown index is a 404 first; absent: the only one (validated too, to be refused among several)
    index: Annotated[str | None, WrapValidator(_served_index)] = Field(None, validate_default=True)
    query: Texts = REQUIRED
    k: Count = 10
    method: Annotated[StrictStr | None, phrased("must be a string")] = None
    rerank: Flag = False
    candidates: Count = 100
    hybrid: Flag | None = None
    fusion: Annotated[Literal["rrf", "weighted"] | None, phrased("must be 'rrf' or 'weighted'")] = None
    alpha: Annotated[float | None, Field(ge=0, le=1, strict=True), phrased("must be a number from 0 to 1")] = None
    mode: Annotated[Literal["maxp", "mean"] | None, phrased("must be 'maxp' or 'mean'")] = None
    threshold: Annotated[
        float | None, Field(strict=True, allow_inf_nan=False), phrased("must be a finite number (a cosine)")
    ] = None
    lead: Annotated[
        float | None, Field(strict=True, allow_inf_nan=False), phrased("must be a finite number (a cosine margin)")
    ] = None

    @model_validator(mode="after")
    def _hits(self, info: ValidationInfo) -> SearchRequest:
        """Refuse more hits than the limit: queries × k, × candidates when each query gets that many scored."""
        context = _context(info)
        limit = context.limits.max_search_hits
        fusing = context.indexes.get(self.index or "", False) if self.hybrid is None else self.hybrid
        per_query, what = (self.candidates, "candidates") if self.rerank or fusing else (self.k, "k")
        if self.k > per_query:
            per_query, what = self.k, "k"
        hits = len(self.query) * per_query
        if hits > limit:
            refuse(
                f"{len(self.query)} queries × {what} {per_query} ask for {hits} hits; the limit is {limit} a request "
                f"(--max-search-hits): send fewer queries or a smaller {what}",
                "too_many_hits",
                what,
                status=422,
            )
        return self


def parse(raw: bytes, model: type[RequestModel], context: Context) -> RequestModel:
    """The request body ``raw`` as ``model``, or an ApiError (400, or 404 for an unknown model)."""
    _check_values(raw, context.limits)
    try:
        payload = json.loads(raw, parse_int=_parse_int)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ApiError(400, f"request body is not valid JSON: {err}") from err
    except RecursionError:
        raise ApiError(400, "request body is nested too deeply (arrays or objects inside each other)") from None
    if not isinstance(payload, dict):
        raise ApiError(400, "request body must be a JSON object")
    try:
        return model.model_validate(payload, context=context)
    except ValidationError as err:
        raise from_validation(err) from None


def _check_values(raw: bytes, limits: Limits) -> None:
    """Refuse a body of more JSON values than ``limits.max_body_values`` before parsing it: a few MiB of
    ``[],`` or ``"",`` would otherwise become millions of Python objects (and seconds of CPU) only to be
    refused by the validation. Commas and brackets bound the values (one more than their number); where
    those inside strings could be what makes the count, it is made again without the strings."""
    limit = limits.max_body_values
    if _marks(raw) + 1 <= limit:
        return
    plain = raw.replace(b"\\\\", b"").replace(b'\\"', b"")  # escaped backslashes, then escaped quotes
    strings = plain.count(b'"') // 2
    if strings > limit or sum(_marks(outside) for outside in plain.split(b'"')[::2]) + 1 > limit:
        raise ApiError(
            400,
            f"request body holds more JSON values (strings, numbers, arrays, objects, nested or not) than the "
            f"limit of {limit} a request (twice --max-inputs, and {FIELD_VALUES} for the other fields)",
            code="too_many_values",
        )


def _marks(raw: bytes) -> int:
    """The commas and opening brackets in ``raw``: each value but the first follows one of them."""
    return raw.count(b",") + raw.count(b"[") + raw.count(b"{")


def _parse_int(digits: str) -> int:
    """json's integer parser, refusing numbers too long to be a sensible value (and to convert quickly)."""
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise ApiError(
            400, f"request body holds an integer of {len(digits)} digits; the limit is {MAX_INT_DIGITS} digits"
        )
    return int(digits)
