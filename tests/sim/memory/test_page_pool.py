"""A tier's pages: regions grow page by page, a full tier refuses whole, frees give pages back."""

from mapping.chips import MiB, TierSpec
from sim.memory.page_pool import TierMemory


def _tier(pages: int) -> TierMemory:
    return TierMemory(TierSpec("hbm", pages * 2 * MiB, 1.6e12, 100e-9, page_bytes=2 * MiB))


def test_regions_take_whole_pages():
    t = _tier(10)
    assert t.grow("weights", 3 * MiB)  # 2 pages
    assert t.used_bytes == 4 * MiB
    assert t.grow("weights", MiB)  # fills its second page
    assert t.used_bytes == 4 * MiB and t.sizes["weights"] == 4 * MiB
    assert t.grow("kv", 1)
    assert t.used_bytes == 6 * MiB


def test_a_full_tier_refuses_and_changes_nothing():
    t = _tier(4)
    assert t.grow("a", 6 * MiB)
    assert not t.grow("b", 4 * MiB)  # 2 pages asked, 1 free
    assert not t.grow("a", 3 * MiB)
    assert (t.sizes, t.used_bytes, t.refused) == ({"a": 6 * MiB}, 6 * MiB, 2)
    assert t.grow("b", 2 * MiB)


def test_freeing_gives_the_pages_back():
    t = _tier(4)
    t.grow("a", 8 * MiB)
    assert t.release("a") == 8 * MiB
    assert t.used_bytes == 0 and t.peak_bytes == 8 * MiB
    assert t.release("a") == 0
    assert t.grow("b", 8 * MiB)


def test_a_tier_of_published_size_costs_nothing_until_used():
    t = TierMemory(TierSpec("ddr", 1.5e12, 100e9, 150e-9))
    assert t._pool is None and t.pages == 715_255
