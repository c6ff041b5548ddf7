"""Simulating one config: the NoC, a chip and a system of chips, each as a ShardModel for cluster.parallel."""
