"""Request-trace formats as their publishers write them: where a row keeps its arrival, its
prompt and output lengths and its prefix blocks, and in what unit.

- ``azure``: ``AzureLLMInferenceTrace_{code,conv}.csv`` (2023), ``..._{code,conv}_1week.csv``
  (2024). CSV ``TIMESTAMP`` (a UTC date and time), ``ContextTokens``, ``GeneratedTokens``.
- ``azure-multimodal``: ``AzureLMMInferenceTrace_multimodal.csv.gz`` (2025). CSV ``TIMESTAMP``
  (ISO 8601, ``2024-10-15T12:00:00.269Z``), ``NumImages`` (ignored), ``ContextTokens``,
  ``GeneratedTokens``.
- ``mooncake``: ``mooncake_trace.jsonl``, ``{conversation,toolagent,synthetic}_trace.jsonl``.
  JSON lines ``timestamp`` (ms since the first request), ``input_length``, ``output_length``,
  ``hash_ids`` (one per 512-token block).
- ``qwen-bailian``: ``qwen_{traceA,traceB,coder,thinking}_blksz_16.jsonl``. JSON lines
  ``chat_id``, ``parent_chat_id``, ``timestamp`` (s since the trace's start), ``input_length``,
  ``output_length``, ``type``, ``turn``, ``hash_ids`` (one per 16-token block).
- ``burstgpt``: ``BurstGPT_{1,2}.csv``, ``BurstGPT_without_fails_{1,2}.csv``. CSV ``Timestamp``
  (s from 0:00 of the first day), ``Model``, ``Request tokens``, ``Response tokens`` (0: a
  failed request), ``Total tokens``, ``Log Type``.

Sources (docs/traces.md cites them with their papers): Azure/AzurePublicDataset's
AzureLLMInferenceDataset2023.md, ...2024.md and AzureLMMInferenceDataset2025.md;
kvcache-ai/Mooncake's FAST25-release (block size 512: the Mooncake technical report,
arXiv 2407.00079, section 4); alibaba-edu/qwen-bailian-usagetraces-anon's README ("16
tokens per block", timestamps in seconds); HPMLL/BurstGPT's README ("Timestamp: request
submission time, seconds from 0:00:00 on the first day"; "failure that Response tokens are
0s"). A CSV's columns are matched by name (any case, any order, others ignored), a JSON
line's keys exactly as published. Parquet files with a format's columns read the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from sim.serving.trace import parse_timestamp


@dataclass(frozen=True)
class TraceFormat:
    """One publisher's layout: the columns it writes (in its order) and which of them the run reads."""

    name: str
    source: str  # the dataset, for messages
    layout: str  # "csv" or "jsonl": how the publisher ships it (Parquet of the same columns reads too)
    columns: tuple[str, ...]  # the publisher's header (or JSON keys), in its order
    required: tuple[str, ...]  # what identifies the format (lower case)
    time: str
    prompt: str
    output: str
    ns_per_unit: int = 0  # arrival unit in ns (0: a date and time as Azure writes it, or seconds)
    hash_ids: str = ""  # key of the prompt's prefix block ids ("": none)
    block_tokens: int = 0  # tokens a prefix block holds
    model: str = ""  # column naming the model (the trace_model filter)
    zero_output_fails: bool = False  # a row with no output tokens is a failed request (skipped, counted)
    ignored: str = ""  # said once in the run's summary

    def arrival_ns(self, value) -> int:
        """Nanoseconds of an arrival as the row writes it (text or a number), exactly."""
        if value is None:
            raise ValueError(f"{self.time} is empty")
        if not self.ns_per_unit:
            return parse_timestamp(str(value))
        try:
            v = Decimal(str(value).strip())
        except InvalidOperation:
            v = None
        if v is None or not v.is_finite():
            unit = {1_000_000: "milliseconds", 1_000_000_000: "seconds"}.get(self.ns_per_unit, "a number")
            raise ValueError(f"{self.time} {value!r} is not a number of {unit}")
        return int(v * self.ns_per_unit)

    @property
    def header(self) -> str:
        return ", ".join(self.columns)


AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")

FORMATS: dict[str, TraceFormat] = {f.name: f for f in (
    TraceFormat("azure-multimodal", "Azure LMM inference trace 2025", "csv",
                ("TIMESTAMP", "NumImages", "ContextTokens", "GeneratedTokens"),
                ("timestamp", "numimages", "contexttokens", "generatedtokens"), *AZURE_COLUMNS,
                ignored="NumImages ignored: the images of a request are not served, only its ContextTokens"),
    TraceFormat("azure", "Azure LLM inference trace 2023/2024", "csv", AZURE_COLUMNS,
                ("timestamp", "contexttokens", "generatedtokens"), *AZURE_COLUMNS),
    TraceFormat("burstgpt", "BurstGPT", "csv",
                ("Timestamp", "Model", "Request tokens", "Response tokens", "Total tokens", "Log Type"),
                ("timestamp", "request tokens", "response tokens"), "Timestamp", "Request tokens",
                "Response tokens", ns_per_unit=1_000_000_000, model="Model", zero_output_fails=True),
    TraceFormat("qwen-bailian", "Qwen-Bailian usage traces", "jsonl",
                ("chat_id", "parent_chat_id", "timestamp", "input_length", "output_length", "type", "turn",
                 "hash_ids"),
                ("chat_id", "parent_chat_id", "turn", "timestamp", "input_length", "output_length"), "timestamp",
                "input_length", "output_length", ns_per_unit=1_000_000_000, hash_ids="hash_ids", block_tokens=16),
    TraceFormat("mooncake", "Mooncake (FAST'25) traces", "jsonl",
                ("timestamp", "input_length", "output_length", "hash_ids"),
                ("timestamp", "input_length", "output_length"), "timestamp", "input_length", "output_length",
                ns_per_unit=1_000_000, hash_ids="hash_ids", block_tokens=512),
)}  # in detection order: a format before any whose columns are a subset of its own
NAMES = tuple(sorted(FORMATS))


def listing() -> str:
    """Every format and its columns, for an error that says what would be read."""
    return "; ".join(f"{n} ({FORMATS[n].layout}: {FORMATS[n].header})" for n in NAMES)


def detect(names: set[str], layout: str) -> TraceFormat | None:
    """The format whose identifying columns a header (lower case) has; None if none's. A CSV is
    one of the CSV formats, JSON lines one of the JSON ones; a Parquet file may be any."""
    for f in FORMATS.values():
        if (layout == "parquet" or f.layout == layout) and all(c in names for c in f.required):
            return f
    return None


def resolve(names: set[str], layout: str, asked: str) -> TraceFormat:
    """The format of a file with these columns (lower case): ``asked``, checked, or the one they
    identify (``asked`` "auto"). ValueError says what is missing and which formats exist."""
    if asked != "auto":
        f = FORMATS[asked]
        missing = [c for c in f.columns if c.lower() in f.required and c.lower() not in names]
        if missing:
            raise ValueError(f"missing column(s) {', '.join(missing)}: not the {asked} format ({f.layout}: "
                             f"{f.header}); formats: {listing()}")
        return f
    found = detect(names, layout)
    if found is None:
        near = nearest(names, layout)
        lacks = [c for c in near.columns if c.lower() in near.required and c.lower() not in names]
        raise ValueError(f"missing column(s) {', '.join(lacks)} of the {near.name} format ({near.layout}: "
                         f"{near.header}), the nearest: {', '.join(sorted(names)) or 'no columns'} are the columns "
                         f"of no request-trace format (workload.decode.trace_format); formats: {listing()}")
    return found


def nearest(names: set[str], layout: str) -> TraceFormat:
    """The format of this layout whose identifying columns a header (lower case) has the most of
    (the first in detection order on a tie): the one a file missing a column was most likely meant to be."""
    fits = [f for f in FORMATS.values() if layout == "parquet" or f.layout == layout] or list(FORMATS.values())
    return max(fits, key=lambda f: sum(c in names for c in f.required) / len(f.required))
