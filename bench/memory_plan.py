"""Benchmark: etmlir's planned arena size vs ExecuTorch 1.5.1's, per zoo model, side by side.

Both compilers run in this one process on the same model instances. Memory is
a size, not a time, so the numbers are exact and repeatable (no threads, no
medians). Printed, never asserted. Run with `make bench-memory` (it builds a
separate environment with the `bench` extra: executorch==1.5.1).

Columns: planned bytes with inputs and outputs planned (both compilers'
default), the same with inputs/outputs left to the caller, each with
ours/theirs; "naive" is the sum of the planned tensors' sizes (ours).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import etmlir  # noqa: E402
from etmlir import models  # noqa: E402
from executorch_plan import executorch_plan  # noqa: E402


def main() -> None:
    rows = []
    for name in models.ZOO:
        model, args, dynamic = models.build(name)
        edge = etmlir.to_edge(etmlir.export(model, args, dynamic))
        row = [name]
        for io in (True, False):
            start = time.perf_counter()
            ours = edge.to_executorch(etmlir.ExecutorchConfig(alloc_inputs=io, alloc_outputs=io)).memory_plan()
            ours_s = time.perf_counter() - start
            theirs = executorch_plan(model, args, dynamic, alloc_io=io)["total_bytes"]
            row += [ours.total_bytes, theirs, ours.total_bytes / theirs]
            if io:
                row.append(ours.naive_bytes)
                row.append(ours_s)
        rows.append(row)
        print(f"[bench] {name} done", file=sys.stderr)
    header = ("model", "ours (I/O)", "ExecuTorch (I/O)", "ratio", "naive", "ours s", "ours (no I/O)",
              "ExecuTorch (no I/O)", "ratio")
    print(" | ".join(header))
    print(" | ".join("---" for _ in header))
    for name, o1, t1, r1, naive, secs, o2, t2, r2 in rows:
        print(f"{name} | {o1:,} | {t1:,} | {r1:.3f} | {naive:,} | {secs:.2f} | {o2:,} | {t2:,} | {r2:.3f}")


if __name__ == "__main__":
    main()
