"""Packet-level NoC: each packet reserves the links of its route for its flit count."""
