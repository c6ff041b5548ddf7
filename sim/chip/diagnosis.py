"""Who waits on what when a chip run ends: the diagnosis of a run that stopped without finishing.

A run that ends with no event pending anywhere while work remains is deadlocked: every
unit still busy waits for something no other unit will ever send. ``waits_of`` reads a
finished ChipShard (requests parked out of memory at each MU by message kind, reads
waiting for data that will never be appended, compute-unit tasks waiting by reason);
``merge`` adds shards up in a canonical order; ``describe`` says it in one line, e.g.
"4 append requests stalled out of memory at 4 MUs; 16 tasks on 16 CUs wait for memory,
1 for control; no event is pending, so nothing can free memory".
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sim.chip import messages as m

STATUSES = ("completed", "deadlocked", "cut_off", "failed")


@dataclass
class Waits:
    """What a shard's units are waiting for at the end of its run (plain counts: cheap to ship)."""

    stalled: dict[str, int] = field(default_factory=dict)  # message kind -> requests parked out of memory
    stalled_mus: list[int] = field(default_factory=list)  # MUs with parked requests
    reads: int = 0  # reads parked at their MU waiting for data
    read_mus: list[int] = field(default_factory=list)
    tasks: dict[str, int] = field(default_factory=dict)  # wait reason -> CU tasks waiting on replies
    task_cus: list[int] = field(default_factory=list)  # CUs with a waiting task

    @property
    def anything(self) -> bool:
        return bool(self.stalled or self.reads or self.tasks)


def waits_of(shard) -> Waits:
    """The waits of a finished ChipShard (its MUs' parked requests and reads, its CUs' tasks)."""
    w = Waits()
    for mu in shard.mus():
        for msg, _since in mu.stalled:
            kind = m.KINDS[msg.kind]
            w.stalled[kind] = w.stalled.get(kind, 0) + 1
        if mu.stalled:
            w.stalled_mus.append(mu.uid)
        reads = sum(len(rec.reads) for rec in mu.table.values())
        if reads:
            w.reads += reads
            w.read_mus.append(mu.uid)
    for cu in shard.cus():
        tasks = {id(rep): rep.reason for _task, rep in cu.waiting.values()}  # one Replies per waiting task
        for reason in tasks.values():
            w.tasks[reason] = w.tasks.get(reason, 0) + 1
        if tasks:
            w.task_cus.append(cu.uid)
    return w


def merge(parts: list[Waits]) -> Waits:
    out = Waits()
    for p in parts:
        for k, v in p.stalled.items():
            out.stalled[k] = out.stalled.get(k, 0) + v
        for k, v in p.tasks.items():
            out.tasks[k] = out.tasks.get(k, 0) + v
        out.reads += p.reads
        out.stalled_mus += p.stalled_mus
        out.read_mus += p.read_mus
        out.task_cus += p.task_cus
    out.stalled = dict(sorted(out.stalled.items()))
    out.tasks = dict(sorted(out.tasks.items(), key=lambda kv: (-kv[1], kv[0])))
    for name in ("stalled_mus", "read_mus", "task_cus"):
        setattr(out, name, sorted(getattr(out, name)))
    return out


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def describe(w: Waits, unit: str = "work items", finished: int = 0, started: int = 0, expected: int = 0) -> str:
    """One line: how far the work got (in the workload's ``unit``: "sequences", "steps"...), what is
    parked where, and who waits for what."""
    parts = [f"{finished} of {expected} {unit} finished ({started} started)"] if expected else []
    if w.stalled:
        kinds = " and ".join(f"{n} {k.replace('_', ' ')}" for k, n in w.stalled.items())
        total = sum(w.stalled.values())
        parts.append(f"{kinds} request{'' if total == 1 else 's'} stalled out of memory at "
                     f"{_plural(len(w.stalled_mus), 'MU')}")
    if w.reads:
        parts.append(f"{_plural(w.reads, 'read')} waiting for data at {_plural(len(w.read_mus), 'MU')}")
    if w.tasks:
        reasons = ", ".join(f"{n} for {r}" for r, n in w.tasks.items())
        parts.append(f"{_plural(sum(w.tasks.values()), 'task')} on {_plural(len(w.task_cus), 'CU')} wait: {reasons}")
    if not w.anything:
        return "; ".join(parts + ["no unit is waiting, yet the workload did not finish"])
    tail = "nothing can free memory" if w.stalled else "nothing can wake them"
    return "; ".join(parts) + f"; no event is pending anywhere, so {tail}"


def status_of(completed: bool, requests_failed: int, cut_off: bool) -> str:
    """How a run ended: every request served (completed), some refused for lack of memory
    (failed), stopped at run.max_cycles (cut_off), or stopped with work left and nothing
    pending (deadlocked)."""
    if completed:
        return "failed" if requests_failed else "completed"
    return "cut_off" if cut_off else "deadlocked"


def detail(status: str, w: Waits, unit: str, finished: int, started: int, expected: int, refused: int,
           oversize: str = "", on_oom: str = "fail") -> str:
    """The status line's explanation: empty when completed, who refused or waits otherwise;
    ``oversize`` names a buffer refused for being larger than any MU (first, as the cause).
    Under an ``on_oom`` other than fail only what cannot fit even alone is refused."""
    if status == "completed":
        return ""
    if status == "failed":
        why = f": {oversize}" if oversize else " (memory.on_oom = fail)" if on_oom == "fail" else \
            f" (each more than the memory holds alone; memory.on_oom = {on_oom})"
        return f"{refused} of {expected} {unit} refused for lack of memory{why}"
    return "; ".join(x for x in (oversize, describe(w, unit, finished, started, expected)) if x)
