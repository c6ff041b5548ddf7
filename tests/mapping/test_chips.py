"""One chip description: the mapper's view of every RDA preset is derived from the simulator's grid."""

import pytest

from mapping.chips import RDA_PRESETS
from mapping.systems import CHIPS, chip
from sim.chip.spec import CU, DRAM, MU, PRESETS, unit_layout


@pytest.mark.parametrize("name", sorted(RDA_PRESETS))
def test_mapper_and_simulator_see_the_same_chip(name):
    spec = PRESETS[name]
    lay = unit_layout(spec)  # the grid the simulator builds, unit by unit
    view = chip(name)  # what DFModel's mapper reads
    n_cu = int((lay.kind == CU).sum())
    n_mu = int((lay.kind == MU).sum())
    n_dram = int((lay.kind == DRAM).sum())
    assert view.cores == n_cu
    assert (view.width, view.height) == (spec.cu_lanes, spec.cu_stages)
    assert view.frequency == spec.clock_hz
    assert view.sram_bytes == n_mu * spec.mu_bytes
    assert view.dram_bandwidth == n_dram * spec.dram_bytes_per_cycle * spec.clock_hz
    assert view.dram_bytes == spec.dram_bytes
    # a CU of lanes x stages functional units retires 2 FLOP per unit per cycle
    assert view.peak_flops == n_cu * spec.cu_flops_per_cycle * spec.clock_hz


def test_every_rda_preset_is_a_mapping_chip():
    assert set(RDA_PRESETS) <= set(CHIPS)


def test_published_rda_figures():
    # Plasticine (ISCA 2017): 64 PCUs, 64 PMUs of 256 KiB (16 MiB); 12.3 TFLOPS at 1 GHz (16 x 6 x 2 x 64)
    p = chip("plasticine")
    assert (p.cores, p.sram_bytes) == (64, 16 * 2**20)
    assert p.peak_flops == pytest.approx(12.288e12)
    # SN40L (IEEE Micro 2024): 1,040 PCUs, 638 BF16 TFLOPS at 1.6 GHz
    s = chip("sn40l-like")
    assert s.cores == 1040
    assert s.peak_flops == pytest.approx(638.976e12)
