"""Energy: what a run did, counted per component and action, times a per-action energy table.

``table.py`` reads tables (TOML with units and a source per figure; ``default_45nm.toml`` is
the default), ``counts.py`` holds the counted actions and multiplies, ``accelergy.py``
writes the counts in Accelergy's action-count format for other energy models.
"""
