"""The published DFModel configurations as plain specs (see mapping.specs), with their results.

Inputs are those of the configurations DFModel publishes (its Example/ and
LLM/Compare_w_existing/ folders). ``PUBLISHED`` holds the figures from the logs the
DFModel repository ships with those runs, with a note where the logged run used a
different formula or input than the preset (so the figures are not expected to match).
"""

from __future__ import annotations

import copy

from mapping.solver import MappingProblem
from mapping.specs import problem_from_spec

GB = 1e9
R, SW = "r", "sw"
SN30_PRICES = dict(chip=16_522.25023, link=2, switch=24, dram=1, chip_power=444.7061955,
                   link_power=[0.0104, 0.052], switch_power=0.052, dram_power=0.16248)
H100_PRICES = dict(chip=19_999.99997, link=2, switch=24, dram=1, chip_power=511.5771047,
                   link_power=[0.052, 0.052], switch_power=0.052, dram_power=0.16248)
H100_DDR = dict(sram=118_489_088, dram_bandwidth=300 * GB, dram_capacity=2**40)


def _net(*dims):
    return [dict(kind=k, size=s, link_bandwidth=bw, parallelism=p) for k, s, bw, p in dims]


def _gpt3(training: bool, layers: int) -> dict:
    return dict(kind="llm", word=2, llm=dict(hidden=25600, heads=160, seq=2048, layers=layers, global_batch=3072,
                                             micro_batch=1, training=training, tile_size=0))


SPECS = {
    "gpt3-1t-sn30": dict(
        workload=dict(_gpt3(True, 128), name="gpt3-1t"),
        system=dict(chips=1024, chip="SN30", network=_net((R, 8, 450 * GB, "TP"), (R, 128, 50 * GB, "PP")),
                    prices=SN30_PRICES),
        mapping=dict(execution="dataflow", partitions=6, overlap=True, utilization=0.9)),
    "gpt3-1t-4layer-2pp-sn30": dict(
        workload=dict(_gpt3(False, 4), name="gpt3-1t-4layer"),
        system=dict(chips=32, chip="SN30",
                    network=_net((R, 8, 25 * GB, "TP"), (R, 2, 25 * GB, "PP"), (R, 2, 25 * GB, "DP")),
                    prices=dict(SN30_PRICES, link_power=[0.052, 0.052, 0.052])),
        mapping=dict(execution="dataflow", partitions=3, overlap=True, utilization=0.9)),
    "megatron-145b-a100": dict(
        workload=dict(kind="llm", word=2, name="megatron-145b",
                      llm=dict(hidden=12288, heads=96, seq=2048, layers=80, global_batch=2304, micro_batch=1,
                               training=True, tile_size=0)),
        system=dict(chips=1536, chip="A100",
                    network=_net((R, 8, 600 * GB, "TP"), (R, 8, 25 * GB, "PP"), (R, 24, 25 * GB, "DP")),
                    prices=dict(chip=33_000, link=2, switch=24, dram=1, chip_power=750, link_power=[0.0104, 0.052, 0.0],
                                switch_power=0.052, dram_power=0.16248)),
        mapping=dict(execution="kernel-by-kernel", overlap=False, utilization=0.9)),
    "dlrm-0.8t-h100": dict(
        workload=dict(kind="dlrm", word=2, name="dlrm-0.8t",
                      dlrm=dict(mlp_dim=6750, bottom_mlps=5, top_mlps=15, tables=600, pooled_rows=15, emb_dim=93,
                                rows=14_211_469, micro_batch=512, global_batch=128_000_000)),
        system=dict(chips=1024, chip="H100", chip_name="H100-DDR", chip_overrides=H100_DDR,
                    network=_net((R, 32, 50 * GB, "DP"), (R, 32, 50 * GB, "DP")),
                    prices=dict(H100_PRICES, chip=16_522.25023, chip_power=444.7061955)),
        mapping=dict(execution="kernel-by-kernel", overlap=False, utilization=0.9)),
    "hpl-1m-h100": dict(
        workload=dict(kind="hpl", word=2, name="hpl-1m", hpl=dict(n=1_048_576, block=2048, iterations=64)),
        system=dict(chips=1024, chip="H100", chip_name="H100-DDR",
                    chip_overrides=dict(H100_DDR, sram=167_772_160, dram_capacity=-1),
                    network=_net((R, 32, 50 * GB, "DP"), (R, 32, 50 * GB, "DP")), prices=H100_PRICES),
        mapping=dict(execution="kernel-by-kernel", overlap=True, utilization=0.9, sram_limit=False)),
    "fft-2p40-h100": dict(
        workload=dict(kind="fft", word=2, name="fft-2^40", fft=dict(length=2**40, radix=32)),
        system=dict(chips=1024, chip="H100", chip_name="H100-DDR", chip_overrides=H100_DDR,
                    network=_net((R, 32, 50 * GB, "DP"), (R, 32, 50 * GB, "DP")), prices=H100_PRICES),
        mapping=dict(execution="kernel-by-kernel", overlap=True, utilization=0.9, sram_limit=False)),
    "fft-fp32-256-a100": dict(
        workload=dict(kind="fft", word=4, name="fft-fp32", fft=dict(length=481_589**2, radix=2)),
        system=dict(chips=256, chip="A100", chip_name="A100-FP32",
                    chip_overrides=dict(cores=6912, width=1, height=1, sram=105_119_744),
                    network=_net((SW, 8, 300 * GB, "DP"), (SW, 32, 12.5 * GB, "DP")),
                    prices=dict(chip=33_000, link=2, switch=24, dram=1, chip_power=750, link_power=[0.0104, 0.0104],
                                switch_power=0.052, dram_power=0.16248)),
        mapping=dict(execution="kernel-by-kernel", overlap=True, compute="detailed", sram_limit=False)),
}

# Published results (DFModel's logs). seconds: time per batch; solver_seconds on 72 cores.
PUBLISHED = {
    "gpt3-1t-sn30": dict(seconds_per_batch=71.3571859590606, utilization=0.8577353977595918,
                         cost=21_033_984.0, power=518_779.73142290115, solver_seconds=3606.1,
                         note="Gurobi stopped at its 3600 s limit"),
    "gpt3-1t-4layer-2pp-sn30": dict(seconds_per_batch=30.02465352862202, utilization=0.6795180482382859,
                                    cost=634_312.0, power=16_227.20660996437, solver_seconds=2.76,
                                    note="logged run had 50 GB/s links and charged all-reduces twice: the same "
                                         "time as 25 GB/s charged once; its cost and power are for 50 GB/s"),
    "megatron-145b-a100": dict(seconds_per_batch=12.914280552921736, utilization=0.6818705537285894,
                               cost=61_653_504.0, power=1_685_099.5918540955, solver_seconds=None,
                               note="logged run charged all-reduces twice (reduce-scatter + all-gather); "
                                    "mapping.all_reduce_passes = 2 reproduces it"),
    "dlrm-0.8t-h100": dict(seconds_per_batch=1972.037496279706, utilization=0.3573062019941209,
                           cost=17_584_384.0, power=510_950.6113471985, solver_seconds=48.2,
                           note="logged run charged the DP gradient all-reduce as 2 ns per byte without "
                                "bandwidth and counted chips^2/2 all-to-all pairs"),
    "hpl-1m-h100": dict(seconds_per_batch=0.5554852653978578, utilization=0.8999999761581423,
                        cost=21_145_600.0, power=579_426.4238471985, solver_seconds=None, note=""),
    "fft-2p40-h100": dict(seconds_per_batch=0.3507556625066667, utilization=0.012624439010969627,
                          cost=21_145_600.0, power=579_426.4238471985, solver_seconds=0.01,
                          note="logged run counted chips^2/2 all-to-all pairs, the latest formula chips(chips-1)/2"),
    "fft-fp32-256-a100": dict(seconds_per_batch=1.1691682234249952, utilization=0.024011553545970194,
                              cost=10_977_184.0, power=281_629.2386726588, solver_seconds=0.95,
                              note="Gurobi stopped within its 0.1 % gap on the lanes x stages split"),
}


def preset_spec(name: str) -> dict:
    """A copy of a preset's plain spec (the shape of a resolved ``rdasim map`` config)."""
    try:
        return copy.deepcopy(SPECS[name])
    except KeyError:
        raise KeyError(f"unknown preset {name!r}; known: {', '.join(SPECS)}") from None


def preset(name: str) -> MappingProblem:
    return problem_from_spec(preset_spec(name))
