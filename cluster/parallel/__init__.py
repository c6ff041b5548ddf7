"""Running shards in lockstep: the shard contract, epochs, cuts, wire format, and the local and Ray backends.

One concern, as SST keeps its sync contract and every strategy in ``sync/``: a model
(cluster/jobs) never knows whether its shards run in this process or in Ray actors.
"""
