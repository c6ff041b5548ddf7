"""Convert recorded expert routing into the .npz form ``workload.moe.trace`` reads.

    python examples/traces/convert_routing.py step DIR --out mixtral.npz
        the STeP artifact's routing files (DIR/008_010.npz: iteration 8, layer 10; each an
        array ``data`` of [tokens, top_k] expert ids), or one such file: Mixtral-8x7B (8
        experts, top-2) and Qwen3-30B-A3B (128 experts, top-8) routing recorded by Sohn et
        al. (2025); the published artifact has one file per model and batch
    python examples/traces/convert_routing.py topk ROUTES.npy --out trace.npz
        an array of top-k expert ids [layers, steps, tokens, top_k] or [steps, tokens,
        top_k] saved with numpy (e.g. torch.topk(router_logits, k).indices per layer and
        decode step of a Hugging Face model run with output_router_logits=True); -1 pads

Layers and steps are numbered densely in the output (the original numbers are printed).
See docs/traces.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from make_traces import write_npz  # noqa: E402

from sim.serving.trace import TraceError  # noqa: E402
from sim.workloads.routing_trace import from_step_artifact, padded, read_routing  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    ap.add_argument("form", choices=("step", "topk"))
    ap.add_argument("source", help="a STeP directory or NNN_LLL.npz file, or a .npy of top-k expert ids")
    ap.add_argument("--out", required=True, help="the .npz to write")
    args = ap.parse_args(argv)
    try:
        if args.form == "step":
            src = Path(args.source)
            if not src.exists():
                raise TraceError(f"{src} does not exist")
            steps = from_step_artifact(sorted(src.glob("*.npz")) if src.is_dir() else [src])
            experts, layers, iters = padded(steps)
            print(f"layers {layers} -> 0..{len(layers) - 1}; iterations {iters} -> steps 0..{len(iters) - 1}")
        else:
            experts = np.load(args.source, allow_pickle=False)
        write_npz(Path(args.out), experts=experts)
        steps = read_routing(args.out)  # the checks a run makes
    except (TraceError, OSError, ValueError) as exc:
        print(f"convert_routing: {exc}", file=sys.stderr)
        return 2
    routed = [len(e) for e in steps.values() if len(e)]  # the .npz pads absent pairs: they are no step
    print(f"wrote {args.out}: {len(routed)} (layer, step) pairs, {sum(routed):,} routed tokens")
    return 0


if __name__ == "__main__":
    sys.exit(main())
