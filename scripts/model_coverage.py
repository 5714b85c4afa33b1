#!/usr/bin/env python3
"""Run every architecture of `etmlir.models.architectures` through each path and write the table.

    .venv/bin/python scripts/model_coverage.py                      # all, write docs/model_coverage.md
    .venv/bin/python scripts/model_coverage.py llama swin --print   # some, print the table only
    .venv/bin/python scripts/model_coverage.py --paths portable,nested

Each architecture (a `transformers` model definition or a `torch.nn` module,
small config, seeded random weights) is exported and lowered to edge once,
then finished on the portable kernels, through the `nested` backend and
through the `cpu` backend, run by the C++ runtime and compared with eager
(tolerances in `etmlir.devtools.model_coverage`). Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import datetime
import pathlib
import sys
import time
import warnings

ROOT = pathlib.Path(__file__).resolve().parent.parent
TABLE = ROOT / "docs" / "model_coverage.md"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="architectures (default: all)")
    parser.add_argument("--paths", default="portable,nested,cpu", help="comma-separated paths")
    parser.add_argument("--print", action="store_true", help="print the table instead of writing the doc")
    options = parser.parse_args()

    warnings.filterwarnings("ignore")
    import torch
    from etmlir.devtools import model_coverage
    from etmlir.models import architectures

    torch.set_num_threads(1)
    names = options.names or list(architectures.ARCHITECTURES)
    unknown = [n for n in names if n not in architectures.ARCHITECTURES]
    if unknown:
        parser.error(f"unknown architectures {unknown}; available: {', '.join(architectures.ARCHITECTURES)}")
    paths = tuple(p for p in options.paths.split(",") if p)
    bad_paths = [p for p in paths if p not in model_coverage.PATHS]
    if bad_paths:
        parser.error(f"unknown paths {bad_paths}; available: {', '.join(model_coverage.PATHS)}")

    results = []
    start = time.perf_counter()
    for i, name in enumerate(names, 1):
        result = model_coverage.check(name, paths)
        results.append(result)
        summary = ", ".join(f"{p} {'ok' if r.passed else 'FAIL: ' + r.error[:120]}" for p, r in result.paths.items())
        print(f"[{i}/{len(names)}] {name}: {summary} ({time.perf_counter() - start:.0f} s)", file=sys.stderr,
              flush=True)
    table = model_coverage.markdown_table(results, paths)
    passed = {p: sum(r.paths[p].passed for r in results) for p in paths}
    totals = ", ".join(f"{p} {passed[p]}/{len(results)}" for p in paths)
    if options.print:
        print(table)
        print(f"passed: {totals}")
        return 0
    TABLE.write_text(
        "# Model coverage: real architectures through each path\n\n"
        "Written by `scripts/model_coverage.py` (do not edit by hand). Each architecture is built from its\n"
        "library's own model definition (`transformers` or `torch.nn`) with a small config and seeded random\n"
        "weights (`python/etmlir/models/architectures.py`), exported and lowered to edge once, then finished on\n"
        "the portable kernels, through the `nested` backend and through the `cpu` backend; each `.pte` is run by\n"
        "the C++ runtime and compared with eager on the same inputs (rtol 1e-4, atol 1e-4; a cell shows the\n"
        "max absolute error, the `max abs(eager)` column what it is relative to). A failing cell names the\n"
        "stage it failed at; its note gives the error, which names the op and the model's source line.\n\n"
        f"Passed: {totals}. Generated {datetime.date.today().isoformat()} with torch {torch.__version__}"
        f" and transformers {_transformers_version()}.\n\n" + table)
    print(f"wrote {TABLE.relative_to(ROOT)} (passed: {totals})", file=sys.stderr)
    return 0


def _transformers_version() -> str:
    import transformers
    return transformers.__version__


if __name__ == "__main__":
    sys.exit(main())
