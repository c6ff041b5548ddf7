"""How a sharded run spent its time: the figures every distributed run reports, and
the line the commands print about them. Light on purpose: the commands import it at start."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cluster.parallel.model import RunOutcome
    from cluster.parallel.shard_plan import Plan

# what distribution_figures may report, in the order the commands print it
DISTRIBUTION_KEYS = ("window_mean", "window_median", "chaining", "simulate_seconds_per_shard",
                     "exchange_seconds_per_shard", "waiting_seconds_per_shard", "peak_rss_mb_per_shard",
                     "shards_reason", "plan_seconds", "predicted_speedup", "predicted_one_process_seconds",
                     "speedup_vs_predicted_one_process")


def distributed(row: dict) -> dict:
    """A run's distribution figures, when it was cut into shards or a pilot chose its count."""
    if row.get("shards", 1) <= 1 and row.get("shards_reason") is None:
        return {}
    return {k: row[k] for k in DISTRIBUTION_KEYS if row.get(k) is not None}


def describe_distribution(row: dict) -> str | None:
    """One line on how a sharded run spent its time (None for a run in one piece)."""
    d = distributed(row)
    if row.get("shards", 1) <= 1:
        return d.get("shards_reason")  # a pilot kept the run whole: say why

    def each(key: str) -> str:
        return "/".join(f"{x:.1f}" for x in d.get(key, []))

    # shards beyond the cores share actors (cluster/parallel/groups.py): the figures are the actors'
    per = "per shard" if len(d.get("simulate_seconds_per_shard", [])) in (0, row["shards"]) else "per actor"
    line = (f"{row['shards']} shards ({d.get('chaining')}): {row.get('epochs', 0):,} epochs, windows mean "
            f"{d.get('window_mean', 0):.1f} / median {d.get('window_median', 0):g} cycles; {per} simulating "
            f"{each('simulate_seconds_per_shard')} s, the rest {each('exchange_seconds_per_shard')} s")
    if d.get("waiting_seconds_per_shard"):
        line += f" (waiting for peers {each('waiting_seconds_per_shard')} s)"
    if d.get("peak_rss_mb_per_shard"):
        line += f"; peak {each('peak_rss_mb_per_shard')} MB"
    if d.get("speedup_vs_predicted_one_process") is not None:
        line += f"; {d['speedup_vs_predicted_one_process']:.2f}x the pilot's one-process prediction"
    return line


def distribution_figures(plan: "Plan | None", outcome: "RunOutcome") -> dict:
    """Per-run figures of a distributed run: windows, simulation against exchange
    time per shard, peak memory per shard, and the speed-up against the pilot's prediction
    of one process (only when a pilot ran)."""
    x = outcome.figures
    out = {"epochs": outcome.epochs, "window_mean": x.window_mean, "window_median": x.window_median,
           "chaining": x.chaining, "simulate_seconds_per_shard": [round(b, 3) for b in x.busy_seconds],
           "exchange_seconds_per_shard": [round(b, 3) for b in x.exchange_seconds]}
    if x.actors:  # Ray actors: of the exchange, waiting for the peers' epochs
        out["waiting_seconds_per_shard"] = [round(b, 3) for b in x.waiting_seconds]
    out["peak_rss_mb_per_shard"] = [round(b / 2**20, 1) for b in x.peak_rss_bytes]
    one = plan.prediction(1) if plan is not None else None
    if plan is not None and (plan.chosen or one is not None):  # "auto" says why on every backend
        out.update(shards_reason=plan.reason, plan_seconds=round(plan.seconds, 3))
    if plan is not None and one is not None:  # a pilot ran: its predictions start with one process
        mine = plan.prediction(plan.shards)
        predicted_one = one.seconds_per_kcycle * outcome.end_cycle / 1e3
        out.update(predicted_speedup=round(mine.speedup, 3) if mine else None,
                   predicted_one_process_seconds=round(predicted_one, 3),
                   speedup_vs_predicted_one_process=round(predicted_one / max(outcome.wall_seconds, 1e-9), 3))
    return out


def lost_to_one_process(plan: "Plan | None", outcome: "RunOutcome", backend: str) -> str | None:
    """A warning when a count the user gave (no pilot predicted it) ran slower than its shards'
    simulation adds up to, which one process takes or less (it runs fewer epochs, so less
    bookkeeping): the epochs' exchanges and waits cost more than splitting the work saved.
    None when it paid, or when a pilot had its say."""
    shards = len(outcome.reports)
    if backend != "ray" or shards <= 1 or (plan is not None and (plan.chosen or plan.predictions)):
        return None
    work = sum(outcome.figures.busy_seconds)
    if not work or outcome.wall_seconds <= work:
        return None
    return (f"rdasim: warning: {shards} shards on ray took {outcome.wall_seconds:.1f} s, longer than their "
            f"simulation adds up to ({work:.1f} s over {outcome.epochs:,} epochs; 1 process, in far fewer "
            f"epochs, takes about that or less): "
            f"run.shards = \"auto\" predicts the fastest count")
