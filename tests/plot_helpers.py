"""Reading back what a picture file holds: the traces of a plotly HTML file."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import numpy as np


def _decode(value):
    """plotly writes numeric arrays as {"dtype": ..., "bdata": base64}; lists stay lists."""
    if isinstance(value, dict) and "bdata" in value:
        array = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
        shape = value.get("shape")
        return array.reshape([int(n) for n in str(shape).split(",")]) if shape else array
    return value


def html_traces(path: Path) -> tuple[list[dict], dict]:
    """The traces (numeric arrays decoded) and the layout of the one plotly figure in an HTML file."""
    text = path.read_text(encoding="utf-8")
    start = re.search(r"Plotly\.newPlot\(\s*\"[^\"]+\",\s*", text)
    assert start, f"{path}: no Plotly.newPlot call"
    decoder = json.JSONDecoder()
    traces, end = decoder.raw_decode(text, start.end())
    layout, _ = decoder.raw_decode(text, text.index("{", end))
    for trace in traces:
        for key in ("x", "y", "z", "customdata", "text"):
            if key in trace:
                trace[key] = _decode(trace[key])
    return traces, layout
