"""Workload generators: the published DFModel ones (LLM, DLRM, HPL, FFT) and new ones (MoE, decode)."""

from mapping.generators.decode import decode_workload
from mapping.generators.dlrm import dlrm_workload
from mapping.generators.fft import fft_workload
from mapping.generators.hpl import hpl_workload
from mapping.generators.llm import llm_layer, llm_layers, llm_workload
from mapping.generators.moe import moe_workload

__all__ = ["decode_workload", "dlrm_workload", "fft_workload", "hpl_workload", "llm_layer", "llm_layers",
           "llm_workload", "moe_workload"]
