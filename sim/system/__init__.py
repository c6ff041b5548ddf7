"""Systems of chips: inter-chip links and switches, chips as nodes, collectives as messages.

A system (mapping/systems.py, expanded into nodes and links by mapping/topology.py) is
simulated node by node: chips run programs, every byte between chips crosses the links of
its route. A shard of the simulation owns some nodes; the links that leave them are its
cut, and their latency is its lookahead (docs/design.md, "Systems of chips").
"""
