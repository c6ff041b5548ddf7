"""The five ports of a router, and the direction each one faces.

Port 0 is the local terminal; 1 east (+col), 2 west (-col), 3 south (+row), 4 north (-row).
Output port ``o`` of a router feeds input port ``OPPOSITE[o]`` of the router across it.
"""

from __future__ import annotations

import numpy as np

PORTS = 5
LOCAL, EAST, WEST, SOUTH, NORTH = range(PORTS)
OPPOSITE = np.array([LOCAL, WEST, EAST, NORTH, SOUTH], dtype=np.int64)
DIRECTION = ("L", "E", "W", "S", "N")
DROW = np.array([0, 0, 0, 1, -1], dtype=np.int64)  # the row and column steps across each port
DCOL = np.array([0, 1, -1, 0, 0], dtype=np.int64)
