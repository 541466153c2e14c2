"""What the benchmarks share: where results go, the machine a run names, tables, records and timing.

Every name here is light to import (the standard library only). ``benchmarks.lib.reference`` (the
sentence-transformers side of side-by-side rows, and the paper's recipe) and ``benchmarks.lib.sentences``
(sentences of the shared data) import numpy and sbert, so scripts import them by module.
"""

from benchmarks.lib.environment import command_line, cpu_name, device_name, environment_lines, source_env, versions
from benchmarks.lib.paths import RECORDS, RESULTS, ROOT, WORK
from benchmarks.lib.records import load_record, write_record
from benchmarks.lib.tables import markdown_table, row_names, rows_lost, write_between_markers, write_result
from benchmarks.lib.timing import latency_ms, throughput, timings

__all__ = [
    "RECORDS",
    "RESULTS",
    "ROOT",
    "WORK",
    "command_line",
    "cpu_name",
    "device_name",
    "environment_lines",
    "latency_ms",
    "load_record",
    "markdown_table",
    "row_names",
    "rows_lost",
    "source_env",
    "throughput",
    "timings",
    "versions",
    "write_between_markers",
    "write_record",
    "write_result",
]
