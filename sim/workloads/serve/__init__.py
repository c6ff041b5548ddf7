"""serve: real models served at real scale, requests at their recorded times.

One module per job:

- shapes.py: a step's shape (tokens, query-key pairs, cached tokens read, logits), its
  roofline, and the anchor shape that prices it;
- anchors.py: an anchor's step mapped by DFModel, kernel-looped over layers and simulated
  cycle by cycle on the chip (a nested dataflow run), extrapolated to the model's layers;
- costs.py: a step's price (its roofline times its anchor's efficiency), anchors simulated
  as steps need them;
- scheduler.py: the serve program, the batcher's backend on the scheduler CU (KV regions at
  the memory tier's controller) and the planning pass that replays the run;
- params.py: the registered workload (``workload.kind = "serve"``, keys in [workload.decode]);
- batcher.py: the scheduler (admission, chunked prefill, preemption; sim/serving/scheduling's
  interface), whatever backend carries it out (scheduler.py: one chip; system.py:
  ``serve-system``, a tensor-parallel group of sockets);
- sim/serving/prefix_pool.py: prefix sharing, the shared prompt blocks' regions and the prefix cache;
- figures.py: run_steps and run_anchors.
"""

from sim.workloads.serve.params import ServeParams
from sim.workloads.serve.system import ServeSystemParams

__all__ = ["ServeParams", "ServeSystemParams"]
