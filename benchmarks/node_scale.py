"""A node as SN40L's papers measure it: decode over 1, 8 and 16 sockets, and the node's collectives.

    python benchmarks/node_scale.py            # every case on the whole sn40l socket (minutes: the anchors)
    python benchmarks/node_scale.py --smoke    # the collectives, and 8B and 7B on an 8 x 16 socket (seconds)
    python benchmarks/node_scale.py --figure decode.png   # also draw decode speed against sockets

One JSON line a case, each figure beside its reference and target:

- ``collective``: an all-reduce or all-gather over the sn40l-8 / sn40l-16 preset's network, its
  algorithm chosen by size (sim/system/algorithms.py), simulated as messages, against the
  algorithm's alpha-beta closed form (Thakur, Rabenseifner & Gropp 2005); within 5 %. The sizes
  are a decode step's all-reduce (one token's hidden state: 8 KiB for 8B, 16 KiB for 70B) and a
  prefill's (4,096 tokens: 32 and 64 MiB);
- ``decode``: Llama-3.1-8B and 70B at batch 1 on the sn40l-1 / -8 / -16 presets (serve-system:
  each socket's slice priced on its grid, the all-reduces simulated on the links), ms a token
  beside the HBM roofline (the model's weights and the context's K/V over the sockets' HBM
  bandwidth) and its % of peak; target at least 75 % on 8 and 16 sockets (SambaNova, DAC 2025
  talk, "over 75 %"), the paper's figure over 90 % ("Kernel Looping", Koeplinger et al. 2024,
  arXiv 2410.23668, abstract);
- ``looping``: Llama-3.1-8B decode unlooped (``looping = false``: a kernel call a layer, each layer
  simulated alone, its pipeline filled and drained with no next layer's weights streaming under it,
  plus a synchronisation, sim/workloads/serve/anchors.py and costs.py) against looped, beside the
  paper's "up to 2.2x" on one socket and "up to 2.5x" over sockets (abstract); with a layer looped
  and alone in microseconds, and the synchronisation a call that would give the published ratio
  (chosen 5 us: no SN40L figure in the sources read), and the speedup at 0, 5 and 20 us;
- ``coe``: Composition of Experts (MICRO 2024): a Llama-2-7B expert switched from DDR into HBM
  on sn40l-8 (a socket's eighth simulated as a copy, the sockets at once) against a DGX H100 and
  A100 moving it over PCIe host links (64 and 32 GB/s each way), one link and all eight, beside
  the published 15-31x; then end to end (mapping/coe.py: a request switches once and decodes n
  tokens, T = switch + n x decode; sn40l-8's decode from serve-system, the DGX's at 21 % of its
  HBM roofline), the ratio over n beside the published 3.7x / 6.6x and the n that gives each;
- ``sensitivity``: the same decode with each chosen (unpublished) network figure moved: the
  topology (ring against fully connected), a hop's latency and a socket's link bandwidth
  (mapping/systems.py says which figures are chosen).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

HBM = 1.6e12  # bytes/s of a socket's HBM (Prabhakar et al., MICRO 2024; mapping/chips.py)
KL = "Kernel Looping (Koeplinger et al. 2024, arXiv 2410.23668), abstract"
SMOKE_KEYS = (
    ("bench", "case", "preset", "op", "nbytes", "algorithm", "simulated_seconds", "closed_form_seconds", "ratio",
     "target", "meets_target"),
    ("bench", "case", "model", "preset", "sockets", "context_tokens", "ms_per_token", "roofline_ms",
     "fraction_of_peak", "target", "meets_target", "published", "source", "wall_seconds"),
    ("bench", "case", "model", "preset", "tokens", "kv_read", "cus", "tiles", "efficiency", "reference", "target",
     "meets_target", "wall_seconds"),
    ("bench", "case", "model", "preset", "sockets", "looped_ms", "unlooped_ms", "call_sync_seconds", "speedup",
     "published", "source", "call_sync_chosen", "layer_roofline_us", "loop_layer_us", "call_us", "fill_drain_us",
     "call_sync_for_published_us", "speedup_by_call_sync_us", "why"),
    ("bench", "case", "expert_bytes", "sn40l_seconds", "sn40l_reference_seconds", "dgx",
     "dgx_host_link_bytes_per_second", "dgx_one_link_seconds", "dgx_eight_links_seconds", "speedup_one_link",
     "speedup_eight_links", "published", "source", "wall_seconds"),
    ("bench", "case", "dgx", "sn40l_switch_seconds", "sn40l_decode_seconds", "dgx_switch_seconds",
     "dgx_decode_seconds", "dgx_decode_fraction", "reading", "ratio_by_tokens", "switch_ratio", "decode_ratio",
     "tokens_for_published", "tokens_for_published_eight_links", "published", "source"),
)


def emit(row: dict) -> None:
    print(json.dumps({"bench": "node_scale", **row}), flush=True)


def collectives(presets: tuple[str, ...]) -> None:
    """Each size's chosen algorithm simulated against its alpha-beta form (in seconds, unrounded)."""
    from cluster.config import load
    from cluster.config.run import RUN_SCHEMA, system_config
    from cluster.jobs.system import simulate_system
    from sim.system.algorithms import closed_form

    for preset in presets:
        for op, nbytes in (("all_reduce", 8 << 10), ("all_reduce", 16 << 10), ("all_reduce", 32 << 20),
                           ("all_gather", 16 << 10), ("all_gather", 64 << 20)):
            raw = {"system": {"preset": preset},
                   "workload": {"kind": "collective", "collective": {"op": op, "nbytes": nbytes}}}
            cfg = system_config(load(RUN_SCHEMA, raw=raw))
            s = simulate_system(cfg).summary
            dim = cfg.system.network[0]
            ideal = closed_form(op, s["algorithm"], dim.size, nbytes, dim.link_latency,
                                lambda b, bw=dim.link_bandwidth: b / bw)
            sim = s["collective_seconds"][0]
            emit({"case": f"{op} {nbytes} B on {preset}", "preset": preset, "op": op, "nbytes": nbytes,
                  "algorithm": s["algorithm"], "simulated_seconds": sim, "closed_form_seconds": ideal,
                  "ratio": round(sim / ideal, 4), "target": "within 5%", "meets_target": abs(sim / ideal - 1) <= 0.05})


def decode_raw(model: str, preset: str, context: int, chip: dict, cache: str, tokens: int = 4, **keys) -> dict:
    """A serve-system run of one request: ``context`` prompt tokens, then ``tokens`` decoded
    (``keys``: more [workload.decode] keys)."""
    return {"chip": chip, "noc": {"model": "packet"}, "memory": {"policy": "virtual"},
            "system": {"preset": preset, "max_seconds": 100.0},
            "workload": {"kind": "serve-system", "decode": {
                "model": model, "requests": 1, "prompt_tokens": {"dist": "fixed", "mean": context},
                "output_tokens": {"dist": "fixed", "mean": tokens}, "step_cache": cache, **keys}}}


def decode_ms(raw: dict) -> tuple[float, dict]:
    """Milliseconds between the request's tokens (the median), and the run's anchors (run_anchors)."""
    from cluster.config import load
    from cluster.config.run import RUN_SCHEMA, system_config
    from cluster.jobs.system import simulate_system

    done = simulate_system(system_config(load(RUN_SCHEMA, raw=raw)))
    return done.summary["tbt_p50_seconds"] * 1e3, done.tables.get("anchors", {})


def roofline_ms(model: str, sockets: int, context: int) -> float:
    """A decode token's HBM bytes over the sockets' bandwidth: every weight but the input embedding
    table (a token reads one row of it) and the context's K/V."""
    from mapping.models import MODELS

    m = MODELS[model]
    read = (m.params - m.embedding_params) * m.word + context * m.kv_bytes_per_token
    return read / (sockets * HBM) * 1e3


def anchor_rows(model: str, preset: str, anchors: dict) -> None:
    """Each anchor that priced the run's steps: its simulated step against its own roofline."""
    for i in range(len(anchors.get("tokens", ()))):
        if not anchors["used"][i]:
            continue
        emit({"case": f"anchor {model} on {preset}: {anchors['tokens'][i]} tokens", "model": model,
              "preset": preset, "tokens": anchors["tokens"][i], "kv_read": anchors["kv_read"][i],
              "cus": anchors["cus"][i], "tiles": anchors["tiles"][i], "efficiency": round(anchors["efficiency"][i], 4),
              "reference": "its plan's bytes / HBM and FLOPs / peak (the slice's own roofline)",
              "target": "at most 1.1 (near its roofline)", "meets_target": anchors["efficiency"][i] <= 1.1,
              "wall_seconds": round(anchors["wall_seconds"][i], 1)})


def decode(cases: list[tuple[str, str]], chip: dict, context: int, cache_dir: str, note: str) -> dict:
    """ms a token on each (model, preset) beside its roofline; the runs' (ms, anchors) by case."""
    from mapping.systems import SYSTEMS

    out = {}
    for model, preset in cases:
        sockets = SYSTEMS[preset].chips
        t = time.time()
        ms, anchors = decode_ms(decode_raw(model, preset, context, chip,
                                           os.path.join(cache_dir, f"{model}-{preset}.json")))
        anchor_rows(model, preset, anchors)
        roof = roofline_ms(model, sockets, context)
        frac = roof / ms
        out[model, preset] = ms, anchors
        emit({"case": f"decode {model} on {preset}{note}", "model": model, "preset": preset, "sockets": sockets,
              "context_tokens": context, "ms_per_token": round(ms, 4), "roofline_ms": round(roof, 4),
              "fraction_of_peak": round(frac, 4), "target": "at least 0.75" if sockets > 1 else "reported",
              "meets_target": frac >= 0.75 if sockets > 1 else None, "published": "over 0.90 on 8 and 16 sockets",
              "source": KL, "wall_seconds": round(time.time() - t, 1)})
    return out


SENSITIVITY = (  # (what, the [[system.network]] key, values): the chosen figure first
    ("topology", "kind", ("fc", "r")),
    ("hop latency", "link_latency", ("500ns", "100ns", "1us", "2us")),
    ("link bandwidth", "link_bandwidth", ("100GB/s", "50GB/s", "200GB/s")),
)


def sensitivity(model: str, preset: str, chip: dict, context: int, cache_dir: str) -> None:
    """Decode with each chosen network figure moved (the anchors cached: only the links change)."""
    from mapping.systems import SYSTEMS

    sockets = SYSTEMS[preset].chips
    roof = roofline_ms(model, sockets, context)
    cache = os.path.join(cache_dir, f"{model}-{preset}.json")
    for what, key, values in SENSITIVITY:
        for i, value in enumerate(values):
            raw = decode_raw(model, preset, context, chip, cache)
            raw["system"]["network"] = [{key: value}]
            ms, _ = decode_ms(raw)
            emit({"case": f"sensitivity {model} on {preset}: {what} {value}", "model": model, "preset": preset,
                  "sockets": sockets, "varied": what, "value": value, "ms_per_token": round(ms, 4),
                  "fraction_of_peak": round(roof / ms, 4), "chosen": i == 0})


def decode_anchor(anchors: dict) -> dict:
    """The run's anchor that priced its decode steps (one token a step), as a dict of its columns."""
    rows = [i for i, t in enumerate(anchors.get("tokens", ())) if t == 1 and anchors["used"][i]]
    if not rows:
        raise ValueError("the run priced no decode step from an anchor")
    return {k: v[rows[0]] for k, v in anchors.items()}


def looping(model: str, presets: tuple[str, ...], looped: dict, chip: dict, context: int, cache_dir: str) -> None:
    """Decode unlooped (a kernel call a layer: each layer simulated alone, its pipeline filled and
    drained, plus a synchronisation) against looped, on each preset, at 0, 5 and 20 us of
    synchronisation a call, and the synchronisation that would give the paper's ratio."""
    from mapping.chips import RDA_PRESETS
    from mapping.systems import SYSTEMS
    from sim.workloads.serve.costs import CALL_SYNC

    us = 1e6 / RDA_PRESETS["sn40l"].clock_hz  # microseconds a cycle
    for preset in presets:
        cache = os.path.join(cache_dir, f"{model}-{preset}.json")
        syncs = (0.0, CALL_SYNC, 20e-6)  # the unlooped anchors are cached: each more run only re-prices
        runs = {s: decode_ms(decode_raw(model, preset, context, chip, cache, looping=False, call_sync=f"{s!r}s"))
                for s in syncs}
        ms = {s: r[0] for s, r in runs.items()}
        looped_ms, loop_anchors = looped[model, preset]
        loop, call = decode_anchor(loop_anchors), decode_anchor(runs[CALL_SYNC][1])
        layer, alone = loop["per_iteration_cycles"] * us, call["cycles"] * us
        sockets = SYSTEMS[preset].chips
        published = 2.2 if sockets == 1 else 2.5
        # the synchronisation a call that would give the published ratio: unlooped ms is linear in it (a call
        # a layer, and the output head priced at the layers' efficiency: costs.py)
        slope = (ms[syncs[-1]] - ms[0.0]) / syncs[-1]
        need = (published * looped_ms - ms[0.0]) / slope
        row = {"case": f"looping {model} on {preset}", "model": model, "preset": preset, "sockets": sockets,
               "looped_ms": round(looped_ms, 4), "unlooped_ms": round(ms[CALL_SYNC], 4),
               "call_sync_seconds": CALL_SYNC, "speedup": round(ms[CALL_SYNC] / looped_ms, 3),
               "published": f"up to {published}x", "source": KL, "call_sync_chosen": "not published",
               "layer_roofline_us": round(loop["roofline_layer_cycles"] * us, 2), "loop_layer_us": round(layer, 2),
               "call_us": round(alone, 2), "fill_drain_us": round(alone - layer, 2),
               "call_sync_for_published_us": round(need * 1e6, 1),
               "speedup_by_call_sync_us": {round(s * 1e6, 1): round(m / looped_ms, 3) for s, m in ms.items()},
               "why": (f"a layer streams its weights in {layer:.1f} us looped; alone, as a call, it takes "
                       f"{alone:.1f} us (pipeline fill and drain, no next layer streaming under it) plus "
                       f"{CALL_SYNC * 1e6:g} us of synchronisation; " + (
                           f"up to {published}x needs {need * 1e6:.0f} us of synchronisation a call" if need > 0 else
                           f"the fill and drain alone give {ms[0.0] / looped_ms:.2f}x"))}
        emit(row)


# The DGX side (mapping/coe.py: HBM, PCIe host links and decode fraction, each cited there). MICRO 2024
# (abstract): the 8-socket node switches models 15x to 31x faster than the DGXs and serves Samba-CoE 3.7x
# faster than a DGX H100 and 6.6x than a DGX A100.
SWITCH_PUBLISHED = {"DGX H100": "15x (the low end of 15-31x)", "DGX A100": "31x (the high end of 15-31x)"}
END_TO_END_PUBLISHED = {"DGX H100": 3.7, "DGX A100": 6.6}
COE_SOURCE = "Prabhakar et al., MICRO 2024 (arXiv 2405.07518), abstract"
COE_TOKENS = (1, 10, 20, 100, 1000)  # tokens a request decodes after its switch: the unknown of the request mix
COE_READING = ("a request switches to its expert once, then decodes n tokens: T = switch + n x decode "
               "(prefill left out); the abstract gives no n, so n is swept and solved for")


def switch_seconds(smoke: bool) -> float:
    """A Llama-2-7B expert switched from DDR into HBM on sn40l-8: one socket's eighth simulated as a
    stream copy (the sockets copy at once)."""
    from cluster.config import load
    from cluster.config.run import RUN_SCHEMA, chip_config
    from cluster.jobs.chip import simulate_chip
    from mapping.models import MODELS
    from mapping.systems import SYSTEMS

    expert = MODELS["llama-2-7b"].weight_bytes
    part = 4096 if smoke else 1  # the smoke copies 1/4096 of a socket's share and scales (bandwidth-bound)
    share = expert // SYSTEMS["sn40l-8"].chips // part
    chip = {"preset": "sn40l", "rows": 8, "cols": 16} if smoke else {"preset": "sn40l"}
    run = {"chip": chip, "workload": {"kind": "stream", "stream": {
        "chunk": 64 * 2**20 if not smoke else 65536, "source": "ddr", "copy_to": "hbm",
        "matrices": [[share // 2, 1]], "cus": [[0, 0]]}}, "run": {"max_cycles": 10**10}}
    return simulate_chip(chip_config(load(RUN_SCHEMA, raw=run))).summary["sim_seconds"] * part


def coe(smoke: bool, decode_ms_7b: float) -> None:
    """Model switching (the expert DDR to HBM on sn40l-8 against a DGX's host links), then end to end:
    the switch and ``decode_ms_7b`` (serve-system's Llama-2-7B on sn40l-8) a token against the DGX's."""
    from mapping.chips import RDA_PRESETS
    from mapping.coe import DGX, ExpertServing, ratio, tokens_for_ratio
    from mapping.models import MODELS
    from mapping.systems import SYSTEMS

    node = SYSTEMS["sn40l-8"]
    expert = MODELS["llama-2-7b"].weight_bytes
    t = time.time()
    sn40l = ExpertServing("sn40l-8", switch_seconds(smoke), decode_ms_7b * 1e-3)
    ddr = RDA_PRESETS[node.chip.name].tiers[1].bandwidth
    for name, dgx in DGX.items():
        one, eight = dgx.serving(expert), dgx.serving(expert, links=dgx.gpus)
        emit({"case": f"CoE model switch: Llama-2-7B on sn40l-8 against {name}", "expert_bytes": expert,
              "sn40l_seconds": sn40l.switch_seconds, "sn40l_reference_seconds": expert / (node.chips * ddr),
              "dgx": name, "dgx_host_link_bytes_per_second": dgx.host_link, "dgx_one_link_seconds": one.switch_seconds,
              "dgx_eight_links_seconds": eight.switch_seconds,
              "speedup_one_link": round(one.switch_seconds / sn40l.switch_seconds, 2),
              "speedup_eight_links": round(eight.switch_seconds / sn40l.switch_seconds, 2),
              "published": SWITCH_PUBLISHED[name], "source": COE_SOURCE, "wall_seconds": round(time.time() - t, 1)})
        target = END_TO_END_PUBLISHED[name]
        n_one, n_eight = tokens_for_ratio(sn40l, one, target), tokens_for_ratio(sn40l, eight, target)
        emit({"case": f"CoE end to end: Llama-2-7B on sn40l-8 against {name}", "dgx": name,
              "sn40l_switch_seconds": sn40l.switch_seconds, "sn40l_decode_seconds": sn40l.decode_seconds,
              "dgx_switch_seconds": one.switch_seconds, "dgx_decode_seconds": one.decode_seconds,
              "dgx_decode_fraction": dgx.decode_fraction, "reading": COE_READING,
              "ratio_by_tokens": {n: round(ratio(sn40l, one, n), 2) for n in COE_TOKENS},
              "switch_ratio": round(ratio(sn40l, one, 0), 2), "decode_ratio": round(one.decode_seconds /
                                                                                    sn40l.decode_seconds, 2),
              "tokens_for_published": None if n_one is None else round(n_one, 1),
              "tokens_for_published_eight_links": None if n_eight is None else round(n_eight, 1),
              "published": f"{target}x", "source": COE_SOURCE})


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--smoke", action="store_true", help="the collectives, and 8B and 7B on an 8 x 16 socket")
    ap.add_argument("--figure", default="", help="draw decode speed against sockets to this PNG")
    args = ap.parse_args(argv)
    collectives(("sn40l-8",) if args.smoke else ("sn40l-8", "sn40l-16"))
    chip = {"preset": "sn40l", "rows": 8, "cols": 16} if args.smoke else {"preset": "sn40l"}
    context = 16  # prompt tokens: a 16-token prefill anchor is cheap, and 16 cached tokens are 0.01 % of the bytes
    note = " (8 x 16 socket)" if args.smoke else ""
    models = ("llama-3.1-8b",) if args.smoke else ("llama-3.1-8b", "llama-3.1-70b")
    cases = [(m, p) for m in models for p in ("sn40l-1", "sn40l-8", "sn40l-16")
             if not (m == "llama-3.1-70b" and p == "sn40l-1")]  # 141 GB of weights: not one socket's 64 GB
    if args.smoke:
        cases = [("llama-3.1-8b", "sn40l-8")]
    cases.append(("llama-2-7b", "sn40l-8"))  # a Samba-CoE expert on the MICRO 2024 node
    with tempfile.TemporaryDirectory() as cache_dir:
        times = decode(cases, chip, context, cache_dir, note)
        presets = tuple(p for m, p in cases if m == "llama-3.1-8b")
        looping("llama-3.1-8b", presets, times, chip, context, cache_dir)
        coe(args.smoke, times["llama-2-7b", "sn40l-8"][0])
        if not args.smoke:
            sensitivity("llama-3.1-8b", "sn40l-16", chip, context, cache_dir)
    if args.figure:
        draw({k: ms for k, (ms, _) in times.items() if k[0] != "llama-2-7b"}, context, args.figure)


def draw(times: dict, context: int, path: str) -> None:
    """Decode tokens a second against sockets, each model beside its roofline."""
    from cluster.report.render import pyplot  # matplotlib, the report extra's ('.[report]')
    from mapping.systems import SYSTEMS

    plt = pyplot()

    fig, ax = plt.subplots(figsize=(6, 4))
    for model in sorted({m for m, _ in times}):
        pts = sorted((SYSTEMS[p].chips, ms) for (m, p), ms in times.items() if m == model)
        xs = [n for n, _ in pts]
        ax.plot(xs, [1e3 / ms for _, ms in pts], "o-", label=f"{model} simulated")
        ax.plot(xs, [1e3 / roofline_ms(model, n, context) for n in xs], "--", label=f"{model} HBM roofline")
    ax.set_xlabel("sockets")
    ax.set_ylabel("decode tokens / s (batch 1)")
    ax.set_xscale("log", base=2)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
