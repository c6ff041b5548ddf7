"""Serving: requests and their traces, prefix blocks and sharing, serving metrics, the capacity search
and the one scheduler interface (scheduling/).

What the decode workloads (sim/workloads/kv_decode.py, serve/) build on and nothing of the chip's
kinds: a workload kind lives in sim/workloads/, the serving vocabulary it schedules with lives here.
"""
