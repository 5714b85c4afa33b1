#!/usr/bin/env python3
"""Run PyTorch's OpInfo samples through the user path and write the op coverage table.

    .venv/bin/python scripts/op_coverage.py                 # sweep, write docs/op_coverage.md
    .venv/bin/python scripts/op_coverage.py --check         # sweep, fail if docs/op_coverage.md is stale
    .venv/bin/python scripts/op_coverage.py --ops abs,sort  # only the OpInfo entries of these edge ops, print

For every edge op, the OpInfo entries that describe it (by name, by the edge
generator's `OPINFO_ALIASES`, and a view's entries for its `*_copy` op) are
swept: for each dtype the entry supports on the CPU, every sample input is
compiled the way users compile a model (a module calling the op ->
`etmlir.export` -> `to_edge` -> `to_executorch`) and run on `etmlir.runtime`,
then compared with eager PyTorch on the same inputs.

All samples of one (entry, dtype) go into ONE module (its forward takes every
sample's tensors and returns every output), so a few hundred compiles cover
tens of thousands of samples; when that module does not compile, each sample
is compiled on its own so that only the culprits are charged.

Each sample ends in one of:
  passed    - every output matches eager (tolerances below; same shape and dtype)
  failed    - the runtime refused it (no kernel, a kernel error) or a value differs: these count against us
  compiler  - our compiler refused it (export to edge to .pte); counted apart with the reason
  export    - torch.export (or eager itself) cannot take it; counted apart with the reason
  dtype     - the edge dialect rejects this dtype for the op at compile time (the kernel table leaves it out)

Tolerances (per output dtype; integers and bool exact): float32 rtol 1e-5 atol 1e-5; float64 rtol 1e-7 atol 1e-7;
float16 rtol 1e-3 atol 1e-3; bfloat16 rtol 1.6e-2 atol 1e-2. NaN positions must match. Ops whose values are
random (or uninitialized) are checked on shape and dtype only (`VALUE_FREE`; also
attention samples with dropout).
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import contextlib
import io
import json
import multiprocessing
import re
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.utils._pytree as pytree

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "scripts"))

DOC = ROOT / "docs" / "op_coverage.md"
EDGE_JSON = ROOT / "dialects" / "edge" / "edge_ops.json"
TABLE_JSON = ROOT / "python" / "etmlir" / "runtime" / "kernel_table.json"

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16,
          torch.int8, torch.uint8, torch.bool]
ELEMENT = {torch.float32: "f32", torch.float64: "f64", torch.float16: "f16", torch.bfloat16: "bf16",
           torch.int64: "i64", torch.int32: "i32", torch.int16: "i16", torch.int8: "i8", torch.uint8: "ui8",
           torch.bool: "i1"}
TOLERANCES = {torch.float32: (1e-5, 1e-5), torch.float64: (1e-7, 1e-7), torch.float16: (1e-3, 1e-3),
              torch.bfloat16: (1.6e-2, 1e-2)}
# OpInfo entries whose outputs are random or uninitialized: shape and dtype only.
VALUE_FREE = {"rand", "randn", "randperm", "nn.functional.dropout", "empty", "empty_strided", "new_empty",
              "empty_like", "bernoulli", "normal", "uniform"}


def _random_sample(sample: Any) -> bool:
    """A sample whose outputs are random although its entry's are not: attention with dropout."""
    return float(getattr(sample, "kwargs", {}).get("dropout_p", 0.0) or 0.0) > 0.0


# Entries whose index output may order equal values either way (torch's sort is not stable unless asked,
# topk's tie order is unspecified): their indices pass when they pick the same values (_check_tie_indices).
TIE_ORDER = {"sort", "topk"}
BATCH = 48  # samples per compiled module
# Samples per (entry, dtype): a few entries have hundreds (max_pool2d's backward: 1,440 per dtype), which would
# make the sweep too slow for CI. Above the cap an evenly spaced subset runs; the table reports how many did not.
MAX_SAMPLES = 64


@dataclass
class Sample:
    """The outcome of one OpInfo sample at one dtype."""

    entry: str          # "nn.functional.pad:reflect"
    dtype: str          # "f32"
    index: int
    status: str         # passed / failed / compiler / export / dtype
    reason: str = ""
    edge_ops: list[str] = field(default_factory=list)  # the edge ops its program contained


def _entry_name(info: Any) -> str:
    return f"{info.name}:{info.variant_test_name}" if info.variant_test_name else info.name


def opinfo_entries(edge_ops: dict[str, dict]) -> dict[str, list[Any]]:
    """Edge op mnemonic -> the OpInfo entries that describe it."""
    from gen_edge_dialect import OPINFO_ALIASES
    from torch.testing._internal.common_methods_invocations import op_db

    by_name: dict[str, list[Any]] = collections.defaultdict(list)
    for info in op_db:
        by_name[info.name].append(info)
        if info.aten_name and info.aten_name != info.name:
            by_name[info.aten_name].append(info)
    result = {}
    for mnemonic, op in edge_ops.items():
        aten = op.get("aten")
        if not aten:
            continue
        packet = aten.split("::")[1].split(".")[0]
        candidates = [OPINFO_ALIASES.get(packet), packet]
        if packet.endswith("_copy"):
            candidates += [OPINFO_ALIASES.get(packet[:-5]), packet[:-5]]
        infos: list[Any] = []
        for candidate in filter(None, candidates):
            name, _, variant = candidate.partition(":")
            for info in by_name.get(name, []):
                if (not variant or info.variant_test_name == variant) and info not in infos:
                    infos.append(info)
        result[mnemonic] = infos
    return result


class _Call(torch.nn.Module):
    """forward(*tensors) runs `op` on each sample (non-tensor arguments baked in) and returns every output tensor."""

    def __init__(self, op: Any, specs: list[tuple[Any, int]]):
        super().__init__()
        self.op, self.specs = op, specs  # (pytree spec of (input, args, kwargs) with tensor holes, tensor count)

    def forward(self, *tensors: torch.Tensor) -> tuple:
        outputs: list[torch.Tensor] = []
        at = 0
        for (spec, leaves), count in self.specs:
            it = iter(tensors[at:at + count])
            at += count
            filled = [next(it) if leaf is _HOLE else leaf for leaf in leaves]
            inp, args, kwargs = pytree.tree_unflatten(filled, spec)
            outputs += [o for o in pytree.tree_leaves(self.op(inp, *args, **kwargs)) if isinstance(o, torch.Tensor)]
        return tuple(outputs)


_HOLE = object()


def _split(sample: Any) -> tuple[tuple[Any, list[Any]], list[torch.Tensor]]:
    leaves, spec = pytree.tree_flatten((sample.input, tuple(sample.args), dict(sample.kwargs)))
    tensors = [leaf.detach().clone().contiguous() for leaf in leaves if isinstance(leaf, torch.Tensor)]
    holes = [_HOLE if isinstance(leaf, torch.Tensor) else leaf for leaf in leaves]
    return (spec, holes), tensors


def _first_line(error: BaseException) -> str:
    """The line of an error that says what went wrong (MLIR's pass-pipeline wrapper line skipped)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    lines = [line for line in lines if not line.startswith("Failure while executing pass pipeline")] or lines
    line = f"{type(error).__name__}: {lines[0] if lines else ''}"
    line = re.sub(r'error: "[^"]*":\d+:\d+: ', "", line)
    line = re.sub(r"0x[0-9a-f]+", "0x..", line)
    return line[:200]


def _compare(got: Any, want: torch.Tensor, value_free: bool) -> str:
    """'' if `got` (numpy or torch) matches eager's `want`, else why not."""
    got_t = got if isinstance(got, torch.Tensor) else torch.from_numpy(got)
    if tuple(got_t.shape) != tuple(want.shape):
        return f"shape {tuple(got_t.shape)} != eager {tuple(want.shape)}"
    if got_t.dtype != want.dtype:
        return f"dtype {got_t.dtype} != eager {want.dtype}"
    if value_free:
        return ""
    if want.dtype in TOLERANCES:
        rtol, atol = TOLERANCES[want.dtype]
        try:
            torch.testing.assert_close(got_t, want, rtol=rtol, atol=atol, equal_nan=True)
        except AssertionError as error:
            lines = [line.strip() for line in str(error).splitlines() if "Greatest absolute" in line]
            return "values differ: " + (lines[0] if lines else str(error).splitlines()[0])
        return ""
    if not torch.equal(got_t, want):
        return f"values differ ({int((got_t != want).sum())} of {want.numel()} elements)"
    return ""


class _ExportError(Exception):
    """torch.export (not our compiler) refused the module."""


def _check_tie_indices(entry: str, sample: Any, got_indices: Any, want_values: torch.Tensor) -> str:
    """'' if `got_indices` (sort's or topk's) pick eager's values out of the input along the op's dim."""
    indices = got_indices if isinstance(got_indices, torch.Tensor) else torch.from_numpy(got_indices)
    x, args = sample.input, list(sample.args)
    position = 0 if entry == "sort" else 1  # sort(x, dim, ...), topk(x, k, dim, ...)
    dim = sample.kwargs.get("dim", args[position] if len(args) > position else -1)
    try:
        picked = torch.gather(x, dim, indices) if x.dim() else x.reshape(indices.shape)
        torch.testing.assert_close(picked, want_values, rtol=0, atol=0, equal_nan=True)
    except Exception as error:  # noqa: BLE001
        return f"indices do not pick eager's values: {_first_line(error)}"
    return ""


def _compile(module: torch.nn.Module, tensors: tuple) -> tuple[bytes, list[str]]:
    """`etmlir.export` -> `to_edge` -> `to_executorch`, with torch.export's own failures told apart."""
    import etmlir
    from etmlir.frontend.export import import_exported_program, prepare_for_import

    with contextlib.redirect_stderr(io.StringIO()):
        try:
            exported = torch.export.export(module, tensors)
        except Exception as error:  # noqa: BLE001
            raise _ExportError(_first_line(error)) from error
        prepare_for_import(exported)  # what etmlir.export does after torch.export
        program = import_exported_program(exported, tensors, (__file__, 0))
        edge = etmlir.to_edge(program)
        ops = sorted(edge.op_histogram())
        return edge.to_executorch().buffer, ops


def _is_dtype_error(text: str) -> bool:
    """et-edge-verify's refusal of a dtype combination (the edge table, narrowed to the kernel table)."""
    return "does not accept dtypes" in text


def sweep_entry(info: Any, dtype: torch.dtype, progress: bool = False) -> list[Sample]:
    """Every sample of one OpInfo entry at one dtype."""
    import etmlir.runtime as rt

    name, element = _entry_name(info), ELEMENT[dtype]
    torch.manual_seed(0)
    try:
        samples = list(info.sample_inputs("cpu", dtype, requires_grad=False))
    except Exception as error:  # noqa: BLE001 - OpInfo's own generator failing is an export-class skip
        return [Sample(name, element, 0, "export", f"sample generation: {_first_line(error)}")]
    skipped = 0
    if len(samples) > MAX_SAMPLES:
        step = len(samples) / MAX_SAMPLES
        keep = {int(k * step) for k in range(MAX_SAMPLES)}
        skipped = len(samples) - len(keep)
        samples = [s if i in keep else None for i, s in enumerate(samples)]
    results: list[Sample | None] = [None] * len(samples)
    prepared = []  # (index, spec, tensors, eager outputs)
    for i, sample in enumerate(samples):
        if sample is None:
            continue
        spec, tensors = _split(sample)
        try:
            module = _Call(info.op, [(spec, len(tensors))])
            with torch.no_grad():
                want = list(module(*tensors))
        except Exception as error:  # noqa: BLE001
            results[i] = Sample(name, element, i, "export", f"eager: {_first_line(error)}")
            continue
        if not want:
            results[i] = Sample(name, element, i, "export", "no tensor output")
            continue
        prepared.append((i, spec, tensors, want))

    def run(group: list) -> None:
        module = _Call(info.op, [(spec, len(tensors)) for _, spec, tensors, _ in group])
        inputs = tuple(t for _, _, tensors, _ in group for t in tensors)
        def split() -> None:  # bisect: only the failing samples end up compiled on their own
            half = len(group) // 2
            run(group[:half])
            run(group[half:])

        try:
            buffer, ops = _compile(module, inputs)
        except Exception as error:  # noqa: BLE001
            if len(group) > 1:
                return split()
            if isinstance(error, _ExportError):
                text, status = f"torch.export: {error}", "export"
            else:
                text = _first_line(error)
                status = "dtype" if _is_dtype_error(text) else "compiler"
            results[group[0][0]] = Sample(name, element, group[0][0], status, text)
            return
        try:
            method = rt.load(buffer).method("forward")
        except Exception as error:  # noqa: BLE001
            text = _first_line(error)
            if len(group) > 1 and not text.startswith("Error: no kernel for"):
                return split()
            for i, *_ in group:  # a kernel the runtime lacks fails every sample alike
                results[i] = Sample(name, element, i, "failed", text, ops)
            return
        try:
            outputs = method(*inputs)
        except Exception as error:  # noqa: BLE001
            if len(group) > 1:
                return split()
            results[group[0][0]] = Sample(name, element, group[0][0], "failed", _first_line(error), ops)
            return
        at = 0
        for i, _, _, want in group:
            got = outputs[at:at + len(want)]
            at += len(want)
            value_free = info.name in VALUE_FREE or _random_sample(samples[i])
            why = next((w for g, e in zip(got, want) if (w := _compare(g, e, value_free))), "")
            if why and info.name in TIE_ORDER and not _compare(got[0], want[0], False):
                why = _check_tie_indices(info.name, samples[i], got[1], want[0])
            results[i] = Sample(name, element, i, "failed" if why else "passed", why, ops)

    for start in range(0, len(prepared), BATCH):
        run(prepared[start:start + BATCH])
    done = [r for r in results if r is not None]
    if skipped:
        done.append(Sample(name, element, -1, "capped", str(skipped)))
    if progress:
        counts = collections.Counter(r.status for r in done)
        print(f"  {name} {element}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())), file=sys.stderr,
              flush=True)
    return done


def _entries_by_name(edge_filter: set[str] | None) -> tuple[dict[str, list[Any]], dict[str, Any]]:
    """(edge op -> its OpInfo entries, entry name -> entry) for every edge op or those in `edge_filter`."""
    entries = opinfo_entries(json.loads(EDGE_JSON.read_text())["ops"])
    if edge_filter:
        entries = {k: v for k, v in entries.items() if k in edge_filter}
    unique: dict[str, Any] = {}
    for infos in entries.values():
        for info in infos:
            unique.setdefault(_entry_name(info), info)
    return entries, unique


def _sweep_names(names: list[str], edge_filter: set[str] | None, progress: bool) -> list[dict]:
    """Every sample of the named OpInfo entries at every dtype they support (one worker's share)."""
    torch.set_num_threads(1)
    _, unique = _entries_by_name(edge_filter)
    samples: list[Sample] = []
    for name in names:
        info = unique[name]
        if progress:
            print(f"  {name}", file=sys.stderr, flush=True)
        supported = set(info.supported_dtypes("cpu"))
        for dtype in DTYPES:
            if dtype in supported:
                samples += sweep_entry(info, dtype, progress=False)
    return [asdict(s) for s in samples]


def sweep(edge_filter: set[str] | None = None, progress: bool = True, workers: int = 2) -> dict[str, Any]:
    """Runs the OpInfo entries of every edge op (or those in `edge_filter`); returns the results document.

    `workers` processes (spawned, one thread each) take the entries in turn; the results do not
    depend on how many there are.
    """
    entries, unique = _entries_by_name(edge_filter)
    names = sorted(unique)
    start = time.monotonic()
    if workers <= 1 or len(names) < 2:
        samples = _sweep_names(names, edge_filter, progress)
    else:
        shares = [names[k::workers] for k in range(workers)]
        context = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context) as pool:
            parts = list(pool.map(_sweep_names, shares, [edge_filter] * workers, [progress] * workers))
        by_entry: dict[str, list[dict]] = collections.defaultdict(list)
        for part in parts:
            for sample in part:
                by_entry[sample["entry"]].append(sample)
        samples = [s for name in names for s in by_entry[name]]
    if progress:
        print(f"swept {len(names)} OpInfo entries in {time.monotonic() - start:.0f} s", file=sys.stderr)
    return {"entries": {k: [_entry_name(i) for i in v] for k, v in entries.items()}, "samples": samples}


# ---------------------------------------------------------------------------
# The coverage table
# ---------------------------------------------------------------------------

def _kernel_rows() -> dict[str, dict]:
    from etmlir.executable.out_variants import out_variant

    table = {k["op"]: k for k in json.loads(TABLE_JSON.read_text())["kernels"]}
    rows = {}
    for mnemonic, op in json.loads(EDGE_JSON.read_text())["ops"].items():
        aten = op.get("aten")
        if not aten:
            continue
        variant = out_variant(aten if "." in aten.split("::")[1] else aten)
        kernel = variant.kernel.removesuffix(".default") if variant else None
        rows[mnemonic] = {"aten": aten, "kernel": kernel, "entry": table.get(kernel) if kernel else None}
    return rows


def render(results: dict[str, Any]) -> str:
    """docs/op_coverage.md from a sweep's results."""
    from etmlir.frontend.core_aten import is_core_overload

    rows = _kernel_rows()
    per_op: dict[str, collections.Counter] = {k: collections.Counter() for k in rows}
    for sample in results["samples"]:
        for op in sample["edge_ops"]:
            mnemonic = op.removeprefix("edge.")
            if mnemonic in per_op:
                per_op[mnemonic][sample["status"]] += 1
    lines = [
        "# Op coverage",
        "",
        "Generated by `scripts/op_coverage.py` (`make op-coverage`); `make test` checks it is current. "
        "One row per edge op: the portable kernel that runs it and the dtypes that kernel takes (the kernel table, "
        "`runtime/kernels/portable/*.yaml`), and the PyTorch OpInfo samples whose compiled program contained the op: "
        "passed / run on the runtime (run = passed + failed), and those our compiler or torch.export could not take.",
        "",
    ]
    capped = sum(int(s["reason"]) for s in results["samples"] if s["status"] == "capped")
    total = collections.Counter(s["status"] for s in results["samples"])
    with_kernel = sum(1 for r in rows.values() if r["entry"] and r["entry"].get("fn"))
    prim = sum(1 for r in rows.values() if r["kernel"] and r["kernel"].startswith("etmlir_prim::"))
    reached = total["passed"] + total["failed"]
    rate = 100.0 * total["passed"] / reached if reached else 0.0
    lines += [
        f"**{with_kernel} of {len(rows)} edge ops have a portable kernel, {prim} more run on the runtime's own "
        f"`etmlir_prim::` kernels, {len(rows) - with_kernel - prim} have none (the reason is in their row).** "
        "OpInfo samples: "
        f"{total['passed']} of {reached} that reached the runtime passed ({rate:.2f}%); "
        f"{total['compiler']} not taken by our compiler, {total['export']} not by torch.export or eager, "
        f"{total['dtype']} refused at compile time for a dtype the kernel table leaves out; "
        f"{capped} more not run, above the cap of {MAX_SAMPLES} samples per OpInfo entry and dtype "
        "(an evenly spaced subset runs).",
        "",
        "| edge op | kernel | dtypes | OpInfo passed / run | compiler | export | dtype refused |",
        "|---|---|---|---|---|---|---|",
    ]
    for mnemonic in sorted(rows):
        row, counts = rows[mnemonic], per_op[mnemonic]
        entry = row["entry"]
        if row["kernel"] and row["kernel"].startswith("etmlir_prim::"):
            kernel, dtypes = f"`{row['kernel']}` (runtime)", "any"
        elif entry and entry.get("fn"):
            kernel, dtypes = f"`{row['kernel']}`", " ".join(entry["dtypes"])
            if entry.get("out_dtypes") and entry["out_dtypes"] != entry["dtypes"]:
                dtypes += " → " + " ".join(entry["out_dtypes"])
        elif entry:
            kernel, dtypes = f"no: {entry['missing']}", ""
        elif not is_core_overload(row["aten"]):
            kernel, dtypes = ("no: outside Core ATen, kept whole only for a backend that runs it "
                              "(`EdgeCompileConfig(keep=...)`), decomposed otherwise"), ""
        else:
            kernel, dtypes = "no kernel", ""
        run = counts["passed"] + counts["failed"]
        lines.append(f"| `edge.{mnemonic}` | {kernel} | {dtypes} | {counts['passed']} / {run} | "
                     f"{counts['compiler']} | {counts['export']} | {counts['dtype']} |")
    failures = [s for s in results["samples"] if s["status"] == "failed"]
    if failures:
        lines += ["", "## Samples that failed on the runtime", "", "| OpInfo entry | dtype | sample | why |",
                  "|---|---|---|---|"]
        for s in sorted(failures, key=lambda s: (s["entry"], s["dtype"], s["index"])):
            lines.append(f"| {s['entry']} | {s['dtype']} | {s['index']} | {s['reason'].replace('|', '/')} |")
    reasons = collections.Counter((s["status"], s["reason"]) for s in results["samples"]
                                  if s["status"] in ("compiler", "export"))
    if reasons:
        lines += ["", "## Samples not taken by the compiler or by torch.export (most common reasons)", "",
                  "| stage | samples | reason |", "|---|---|---|"]
        for (status, reason), n in reasons.most_common(40):
            lines.append(f"| {status} | {n} | {reason.replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def summary(results: dict[str, Any]) -> dict[str, int]:
    return dict(collections.Counter(s["status"] for s in results["samples"] if s["status"] != "capped"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if docs/op_coverage.md is stale")
    parser.add_argument("--ops", help="comma-separated edge ops (mnemonics) to sweep; prints instead of writing")
    parser.add_argument("--results", type=Path, help="also write the raw results (JSON) here")
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--workers", type=int, default=2, help="processes (default 2, this machine's cores)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    results = sweep(set(args.ops.split(",")) if args.ops else None, progress=not args.quiet, workers=args.workers)
    if args.results:
        args.results.parent.mkdir(parents=True, exist_ok=True)
        args.results.write_text(json.dumps(results))
    print(summary(results), file=sys.stderr)
    if args.ops:
        for s in results["samples"]:
            if s["status"] != "passed":
                print(f"{s['entry']} {s['dtype']} #{s['index']}: {s['status']}: {s['reason']}")
        return 0
    text = render(results)
    if args.check:
        if not DOC.exists() or DOC.read_text() != text:
            print(f"stale: {DOC.relative_to(ROOT)} (run: make op-coverage)", file=sys.stderr)
            return 1
        return 0
    DOC.parent.mkdir(exist_ok=True)
    DOC.write_text(text)
    print(f"wrote {DOC.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
