"""Workload generators: the published DFModel ones (LLM, DLRM, HPL, FFT), new ones (MoE, decode)
and a graph file; each registers in ``GENERATORS`` (mapping/generators/registry.py) by kind."""

from mapping.generators.decode import decode_workload
from mapping.generators.dlrm import dlrm_workload
from mapping.generators.fft import fft_workload
from mapping.generators.graph import graph_workload
from mapping.generators.hpl import hpl_workload
from mapping.generators.llm import llm_layer, llm_layers, llm_workload
from mapping.generators.moe import moe_workload
from mapping.generators.registry import GENERATORS

__all__ = ["GENERATORS", "decode_workload", "dlrm_workload", "fft_workload", "graph_workload", "hpl_workload",
           "llm_layer", "llm_layers", "llm_workload", "moe_workload"]
