"""Short names of config keys: a command-line flag's (``--shards 2``) and the Python API's keyword
(``rdasim.run(cfg, shards=2)``), so that a flag, a keyword, ``--set`` and a file key all say the
same thing, and the command line and the API cannot disagree on what a name means."""

from __future__ import annotations

RUN = {"seed": "run.seed", "shards": "run.shards", "cut": "run.cut", "epoch": "run.epoch", "backend": "run.backend",
       "address": "run.address"}  # the [run] section every simulation command has
NOC = {"k": "noc.k", "rows": "noc.rows", "cols": "noc.cols", "topology": "noc.topology", "traffic": "noc.traffic",
       "rate": "noc.rate", "rates": "noc.rates", "packet_flits": "noc.packet_flits", "vcs": "noc.vcs",
       "vc_buffers": "noc.vc_buffers", "link_latency": "noc.link_latency", **RUN}  # rdasim noc
CHIP = {**RUN, "network": "noc.model"}  # rdasim run
MAP = {"time_limit": "mapping.time_limit"}  # rdasim map
