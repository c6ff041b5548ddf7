"""The shadow oracle's verdicts on hand-written event logs."""

import numpy as np

from sim.memory.oracle import ACCESS, ALLOC, COPY, DROP, FREE, check_log, entry, merge_logs

MU, P, C = 5, 1, 2


def verdict(events):
    return check_log(merge_logs([np.array([entry(*e) for e in events], dtype=np.int64)]))


def test_clean_life_has_no_violation():
    v = verdict([(0, MU, 1, ALLOC, 7), (5, P, 1, COPY, 7), (9, C, 1, DROP, 7), (12, P, 2, DROP, 7),
                 (20, MU, 2, FREE, 7)])
    assert (v.use_after_free, v.double_free, v.premature_free, v.leaks) == (0, 0, 0, 0)


def test_the_race_premature_free_then_use_after_free_and_double_free():
    # P copies to C; C's -1 reaches M first: M frees while P still holds its reference;
    # then P's +1, P's read and P's -1 all reach a freed buffer
    v = verdict([(0, MU, 1, ALLOC, 7), (5, P, 1, COPY, 7), (9, C, 1, DROP, 7), (20, MU, 2, FREE, 7),
                 (30, MU, 3, ACCESS, 7), (40, MU, 4, ACCESS, 7), (50, P, 2, DROP, 7), (60, MU, 5, ACCESS, 7),
                 (60, MU, 6, FREE, 7)])
    assert v.premature_free == 1 and v.use_after_free == 3 and v.double_free == 1 and v.leaks == 0
    assert v.first[0][2] == "free while referenced"


def test_leak_and_order_across_shards():
    a = np.array([entry(0, MU, 1, ALLOC, 7), entry(0, MU, 2, ALLOC, 8)], dtype=np.int64)
    b = np.array([entry(30, MU, 3, FREE, 8), entry(10, P, 1, DROP, 8)], dtype=np.int64)
    v = check_log(merge_logs([b, a]))  # logs arrive in any order; merging sorts them
    assert v.leaks == 1 and v.premature_free == 0 and v.live_references_at_end == 1


def test_a_run_that_stopped_short_has_live_allocations_not_leaks():
    """The same log: allocation 7 never freed. At the end of a completed run no one can reach
    it (a leak); when the run stopped short it was still live (issue 20 item 5)."""
    log = merge_logs([np.array([entry(0, MU, 1, ALLOC, 7), entry(0, MU, 2, ALLOC, 8), entry(10, P, 1, DROP, 8),
                                entry(30, MU, 3, FREE, 8)], dtype=np.int64)])
    done, stopped = check_log(log, completed=True), check_log(log, completed=False)
    assert (done.leaks, done.live_at_end) == (1, 0)
    assert (stopped.leaks, stopped.live_at_end) == (0, 1)
