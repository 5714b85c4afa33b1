"""Benchmark: import time of a GPT-2-small-shaped model (~160M parameters, random weights).

Compares etmlir's numpy-buffer weight import with torch-mlir's default
(`tensor.tolist()`) path, side by side in one run, at 1 thread. Prints
seconds and the ratio; never asserts.

    .venv/bin/python bench/import_weights.py [--skip-baseline]
"""

from __future__ import annotations

import argparse
import resource
import time

import torch
from torch_mlir.extras.fx_importer import FxImporter

from etmlir.dialects import new_context
from etmlir.frontend.export import import_exported_program
from etmlir.models.nanogpt import GPTConfig, NanoGPT, dynamic_shapes, example_inputs

GPT2_SMALL = GPTConfig(vocab_size=50257, block_size=1024, n_layer=12, n_head=12, n_embd=768)


def _export() -> torch.export.ExportedProgram:
    torch.manual_seed(0)
    model = NanoGPT(GPT2_SMALL).eval()
    return torch.export.export(model, example_inputs(GPT2_SMALL, 16), dynamic_shapes=dynamic_shapes(GPT2_SMALL))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-baseline", action="store_true", help="skip the slow tolist() import")
    args = parser.parse_args()
    torch.set_num_threads(1)
    params = sum(p.numel() for p in NanoGPT(GPT2_SMALL).parameters())
    print(f"model: GPT-2-small shape, {params / 1e6:.1f}M parameters; threads: 1")

    exported = _export()
    start = time.perf_counter()
    program = import_exported_program(exported, (), ("bench", 0))
    ours = time.perf_counter() - start
    print(f"etmlir import (numpy buffers):     {ours:6.2f} s  ({len(program.param_names)} named weights)")

    if not args.skip_baseline:
        exported = _export()
        importer = FxImporter(context=new_context())
        start = time.perf_counter()
        importer.import_frozen_program(exported, func_name="main")
        baseline = time.perf_counter() - start
        print(f"torch-mlir default import (tolist): {baseline:6.2f} s")
        print(f"ratio etmlir / default: {ours / baseline:.3f}")
    print(f"max RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6:.2f} GB")


if __name__ == "__main__":
    main()
