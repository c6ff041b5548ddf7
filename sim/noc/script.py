"""Scripting packets, compiled: check offered packets and merge them into the sorted pending ones.

A caller (the chip) offers a few packets at a time, thousands of times a run; done with
numpy calls the fixed cost of each (about twenty array operations) outweighed the work.
``merge`` does the checks, the sort and the merge in one pass over the packets.
"""

from __future__ import annotations

from sim.noc.jit import kernel

# why merge refused the packets (OK: it did not)
OK, BEFORE_NOW, NOT_LOCAL, OUT_OF_GRID, TWICE = range(5)


@kernel
def merge(now, cycles, src, dst, flits, local_of, nodes, old, new, out):
    """``out`` = the packets of ``old`` (rows: cycle, local node, destination, flits; sorted
    by cycle, node) and the offered ones (``cycles``, ``src`` global nodes, ``dst``,
    ``flits``; any order, put in ``new``), sorted, the old first on equal keys. Returns
    (why, where): OK, or the first check that fails and, for TWICE, the column of ``out``
    holding the second packet of a node in one cycle."""
    n = cycles.shape[0]
    for i in range(n):
        if cycles[i] < now:
            return BEFORE_NOW, i
        if src[i] < 0 or src[i] >= local_of.shape[0] or local_of[src[i]] < 0:
            return NOT_LOCAL, i
        if dst[i] < 0 or dst[i] >= nodes or flits[i] < 1:
            return OUT_OF_GRID, i
        new[0, i], new[1, i], new[2, i], new[3, i] = cycles[i], local_of[src[i]], dst[i], flits[i]
        j = i  # insertion sort (stable): offers come nearly sorted, a few at a time
        while j > 0 and (new[0, j - 1] > new[0, j] or (new[0, j - 1] == new[0, j] and new[1, j - 1] > new[1, j])):
            for r in range(4):
                new[r, j - 1], new[r, j] = new[r, j], new[r, j - 1]
            j -= 1
    a, b, no = 0, 0, old.shape[1]
    for k in range(no + n):
        if b >= n or (a < no and (old[0, a] < new[0, b] or (old[0, a] == new[0, b] and old[1, a] <= new[1, b]))):
            for r in range(4):
                out[r, k] = old[r, a]
            a += 1
        else:
            for r in range(4):
                out[r, k] = new[r, b]
            b += 1
        if k > 0 and out[0, k] == out[0, k - 1] and out[1, k] == out[1, k - 1]:
            return TWICE, k - 1
    return OK, 0
