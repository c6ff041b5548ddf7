"""Running shards in lockstep: the shard contract, epochs, shard plans, wire format, the local and
Ray backends, and one ``simulate`` for every model.

One concern, as SST keeps its sync contract and every strategy in ``sync/``: a model
(cluster/jobs) never knows whether its shards run in this process or in Ray actors, and
nothing here knows a model: how a simulation is cut (grid rectangles, groups of chips)
comes with it, as a Decomposition (model.py).
"""
