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
    if spec.tiers:  # a controller per tier; DFModel's DRAM is the first tier (HBM)
        assert n_dram == len(spec.tiers)
        assert (view.dram_bandwidth, view.dram_bytes) == (spec.tiers[0].bandwidth, spec.tiers[0].capacity)
    else:
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


def test_sn40l_from_its_published_figures():
    """Prabhakar et al., MICRO 2024 and Hot Chips 2024: 1,040 PCUs and 1,040 PMUs, 520 MB (MiB)
    of SRAM, 638 BF16 TFLOPS; 64 GB of HBM at 1.6 TB/s, 1.5 TB of DDR at 100 GB/s per socket."""
    spec = PRESETS["sn40l"]
    lay = unit_layout(spec)
    assert (int((lay.kind == CU).sum()), int((lay.kind == MU).sum())) == (1040, 1040)
    assert spec.mu_count * spec.mu_bytes == 520 * 2**20
    assert chip("sn40l").peak_flops / 1e12 == pytest.approx(638, abs=1.0)
    hbm, ddr = spec.tiers
    assert (hbm.name, hbm.capacity, hbm.bandwidth) == ("hbm", 64e9, 1.6e12)
    assert (ddr.name, ddr.capacity, ddr.bandwidth) == ("ddr", 1.5e12, 100e9)
    # the 16-socket node: 1 TB of HBM at 25.6 TB/s, 24 TB of DDR at 1.6 TB/s
    assert 16 * hbm.capacity == pytest.approx(1.024e12) and 16 * hbm.bandwidth == pytest.approx(25.6e12)
    assert 16 * ddr.capacity == pytest.approx(24e12) and 16 * ddr.bandwidth == pytest.approx(1.6e12)
    # every MU evicts to the HBM controller; the DDR controller sits on the other edge
    assert spec.dram_tiles().tolist() == [20 * 52, 20 * 52 + 51]


def test_sn40l_systems():
    from mapping.systems import SYSTEMS

    assert [SYSTEMS[f"sn40l-{n}"].chips for n in (1, 8, 16)] == [1, 8, 16]
    assert all(s.chip.name == "sn40l" for s in SYSTEMS.values())
