"""Simulated time: an integer count of cycles, and the one cycle that never comes.

``NEVER`` stands for infinity wherever a cycle is stored as an int64 (the compiled NoC
kernels' queues and arbiters, the wire format of an epoch): later than any cycle a run
reaches, with room to add delays to it without overflowing.
"""

from __future__ import annotations

NEVER = 1 << 62
