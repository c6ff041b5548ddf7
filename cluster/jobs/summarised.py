"""What a job makes of a simulation: its figures and its tables' columns beside the record."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cluster.parallel.simulate import Simulation


@dataclass
class Summarised:
    """One simulated config: what the commands print and the tables hold, and the run behind them."""

    summary: dict[str, Any]  # JSON-ready figures
    tables: dict[str, dict]  # columns of each table by name
    simulation: Simulation
