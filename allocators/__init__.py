"""Allocation algorithms for on-chip memory: pure Python and numpy, no simulator, no Ray.

- free lists and banks: ``freelist`` (segregated-fit free list), ``banks`` (lockstep
  banks with reserved and circular-buffer regions), ``memory_report`` (tt-metal reports),
  ``trace`` (alloc/free traces replayed on banks);
- static planning of buffers with lifetimes: ``lifetimes`` (problem), ``sweep`` (cross
  sections, lower bound), ``greedy``, ``layergroup``, ``canonical`` + ``exact`` (search),
  ``planner`` (``plan()``), ``validate``, ``dsa_csv`` (MiniMalloc CSV), ``csv_rows``, ``placement``;
- tiles: ``tiles`` (NKI-style SBUF/PSUM allocation), ``tile_conflicts`` (checker);
- buffer-level virtualisation: ``paged`` (block pool, block tables), ``weights``
  (weighted reference counting).
"""
