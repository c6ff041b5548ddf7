"""Simulating one config: its job (job.py), the NoC, a chip and a system of chips, each cut into
shards as a ShardModel for cluster.parallel, and the one result record a job makes of them."""
