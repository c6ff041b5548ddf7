"""Running rdasim: configs, shards, epoch coordination, backends, sweeps, results, CLI.

Only this package imports Ray; ``sim``, ``mapping`` and ``allocators`` never do.
"""
