"""A serving program's requests: when each arrives, how long its prompt and output are, which prompt
blocks it may share; read from a trace or drawn from the run's seed.

Shared by kv-decode and spec-decode (sim/workloads/kv_decode.py, spec_decode.py) and the serve
workloads (sim/workloads/serve/): every one of them is a ``Requests`` over its parameters.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

import numpy as np

from sim import rng
from sim.keys import Issue
from sim.serving.lengths import STREAM_ARRIVAL, STREAM_OUTPUT, STREAM_PROMPT, STREAM_TRACE_JITTER
from sim.serving.prefix_sharing import shareable_ids
from sim.serving.trace import RequestTrace, TraceError, take
from sim.serving.trace_window import read_window


class Requests:
    """A serving program's requests, pure facts of its parameters (``p``: a trace, or lengths and an
    arrival interval drawn from the run's seed): shared by kv-decode and the serve workload."""

    p: Any  # its parameters: requests, prompt, output, arrival_interval, trace, trace_jitter, prefix_block_tokens
    cfg: Any  # the run's chip config (its seed)
    blocks: Any = None  # share_prefixes: the trace's prompt blocks, when shared
    block_tokens: int = 0

    def lengths(self, seq: int) -> tuple[int, int]:
        if self.p.trace is not None:
            i = self.trace_row(seq)
            return self.p.trace.prompt[i], self.p.trace.output[i]
        s = self.cfg.seed
        return max(1, self.p.prompt.draw(s, STREAM_PROMPT, seq)), max(1, self.p.output.draw(s, STREAM_OUTPUT, seq))

    def trace_row(self, seq: int) -> int:
        """The trace request that sequence ``seq`` is: itself, unless a jitter reordered them."""
        return int(self._trace_order[1][seq]) if self.p.trace_jitter else seq

    @cached_property
    def _trace_order(self) -> tuple[list[int], np.ndarray]:
        """The trace's arrival cycles in time order, and which trace request each one is. With
        ``trace_jitter`` (a replica of a short trace) every arrival moves later by its own draw in
        [0, jitter) and the requests are put in time order again, each keeping its lengths."""
        assert self.p.trace is not None  # only a trace's requests are ordered here
        t = np.asarray(self.p.trace.arrivals, dtype=np.int64)
        if self.p.trace_jitter:
            t = t + np.floor(rng.uniform(self.cfg.seed, STREAM_TRACE_JITTER, 0, np.arange(len(t)))
                             * self.p.trace_jitter).astype(np.int64)
        order = np.argsort(t, kind="stable")
        t = t[order]
        return [int(x) for x in t - t[0]], order

    def share_prefixes(self, sharing: bool) -> None:
        """The trace's prompt blocks when they are shared (``memory.prefix_sharing``; ``blocks``, None
        otherwise) and the tokens of a shared block (``prefix_block_tokens``, or the trace's block)."""
        blocks = self.p.trace.blocks if self.p.trace is not None and sharing else None
        self.blocks = blocks
        self.block_tokens = (self.p.prefix_block_tokens or blocks.block_tokens) if blocks is not None else 0

    def prefix_ids(self, seq: int):
        """Prefix ids of the blocks ``seq`` may share (sim/serving/prefix_sharing.py; none without sharing)."""
        if self.blocks is None:
            return ()
        return shareable_ids(self.blocks, self.trace_row(seq), self.lengths(seq)[0], self.block_tokens)

    def arrivals(self) -> list[int]:
        if self.p.trace is not None:
            return list(self._trace_order[0])
        if self.p.arrival_interval <= 0:
            return [0] * self.p.requests
        u = rng.uniform(self.cfg.seed, STREAM_ARRIVAL, 0, np.arange(self.p.requests))
        gaps = -self.p.arrival_interval * np.log1p(-u)
        return [int(x) for x in gaps.cumsum()]


def prefix_block_issues(d: dict, trace: RequestTrace | None, issues: list[Issue]) -> None:
    """``prefix_block_tokens`` must be a whole number of the trace's prompt blocks."""
    if trace is not None and trace.blocks is not None and d["prefix_block_tokens"] % trace.blocks.block_tokens:
        issues.append(Issue("workload.decode.prefix_block_tokens", f"{d['prefix_block_tokens']} is not a "
                            f"multiple of the trace's {trace.blocks.block_tokens}-token blocks ({trace.format})"))


def trace_of(d: dict, clock_hz: float, issues: list[Issue]) -> RequestTrace | None:
    """The run's requests from ``workload.decode.trace``, if it names a file."""
    if not d["trace"]:
        return None
    try:
        window = read_window(d["trace"], d["trace_start"], d["trace_duration"], d["requests"], d["trace_format"],
                             d["trace_model"])
        return take(window, clock_hz, d["trace_speedup"], d["max_prompt_tokens"], d["max_output_tokens"])
    except TraceError as exc:
        issues.append(Issue("workload.decode.trace", str(exc)))
        return None
