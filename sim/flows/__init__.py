"""Bulk transfers as flows: max-min fair sharing of bandwidth, re-rated at each flow's start and end.

A weight or KV stream of megabytes to gigabytes is not millions of packets but one flow: a
number of bytes crossing a set of resources (a memory tier's bandwidth, an interface link, a
unit's ingress), each of a capacity in bytes per cycle. ``maxmin.max_min_rates`` gives every
flow its max-min fair rate by progressive filling (Bertsekas and Gallager, "Data Networks",
2nd ed., 1992, section 6.5.2); ``flowset.FlowSet`` keeps a set of flows in continuous time,
advancing their remaining bytes at their rates and re-rating whenever one starts or ends.
Both are pure: no simulator, no clock of their own (the unit that owns the resources calls
them in cycle order).
"""

from sim.flows.flowset import Finished, FlowSet
from sim.flows.maxmin import max_min_rates

__all__ = ["Finished", "FlowSet", "max_min_rates"]
