"""Benchmark: what the event tracer costs Method::execute on MobileNetV2 (portable kernels, one thread).

Three ways to run the same .pte with et-run:
  OFF            a runtime built with -DETMLIR_EVENT_TRACER=OFF: no tracer checks in execute() at all
  ON             the default build (checks compiled in), no tracer attached: one pointer test per step
  ON + --trace   the default build recording every instruction's event into a trace file
The goal (issue 21): ON / OFF < 1.01, i.e. a runtime that can trace costs under 1% when it does not.

    OMP_NUM_THREADS=1 .venv/bin/python bench/tracer_overhead.py [--rounds 15] [--iterations 10]
        [--warmup 2] [--build-dir build/bench-tracer] [--cpu 1]
        [--et-run-on PATH --et-run-off PATH] [--pte PATH]

Unless given prebuilt binaries (--et-run-on/--et-run-off), both et-run variants are configured and
built here (Release, the root CMakeLists.txt, only the target et-run) in BUILD_DIR/on and
BUILD_DIR/off: the first build takes minutes on a small machine, later ones are incremental.
The test suite never builds the OFF variant; this script is the only place that does.
MobileNetV2 (etmlir.models zoo, torchvision's ImageNet weights) is compiled once to
BUILD_DIR/mobilenet_v2.pte with the default pipeline (no delegates: every op a portable kernel).

Timing: each measurement is one et-run process (--warmup runs, then --iterations timed runs of
execute(); its median), the three variants interleaved round after round (the order rotates each
round) so that drift of the machine hits all of them alike; with --cpu N every process is pinned
to that core (taskset). Reported per variant: the median and the spread (min..max) of the per-round
medians, the ratios of the medians of medians and of the fastest rounds (least disturbed by other
load), and the per-round ON/OFF ratios. Prints numbers; never asserts.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

ROOT = Path(__file__).resolve().parent.parent
LATENCY = re.compile(r"latency \(ms\): min ([0-9.]+)\s+median ([0-9.]+)\s+max ([0-9.]+)")


def log(message: str) -> None:
    print(f"[tracer-overhead] {message}", file=sys.stderr, flush=True)


def build_et_run(build_dir: Path, tracer: bool, jobs: int) -> Path:
    """Configures (once) and builds et-run with ETMLIR_EVENT_TRACER=ON/OFF; returns its path."""
    flag = "ON" if tracer else "OFF"
    out = build_dir / flag.lower()
    if not (out / "CMakeCache.txt").exists():
        log(f"configuring {out} (ETMLIR_EVENT_TRACER={flag})")
        subprocess.run(["cmake", "-S", str(ROOT), "-B", str(out), "-DCMAKE_BUILD_TYPE=Release",
                        f"-DETMLIR_EVENT_TRACER={flag}"], check=True, stdout=subprocess.DEVNULL)
    log(f"building {out}/et-run")
    start = time.perf_counter()
    subprocess.run(["cmake", "--build", str(out), "--target", "et-run", "-j", str(jobs)], check=True,
                   stdout=subprocess.DEVNULL)
    log(f"built in {time.perf_counter() - start:.0f} s")
    return out / "et-run"


def build_pte(path: Path) -> None:
    """MobileNetV2 with the default pipeline (portable kernels), written to `path`."""
    import etmlir
    from etmlir import models

    log("compiling MobileNetV2 (portable kernels)")
    model, args, dynamic = models.build("mobilenet_v2")
    program = etmlir.to_edge(etmlir.export(model, args, dynamic)).to_executorch()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(program.buffer)


def measure(command: list[str], cpu: int | None) -> float:
    """One et-run process: its median execute() latency in ms."""
    if cpu is not None:
        command = ["taskset", "-c", str(cpu), *command]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({result.returncode}):\n{result.stderr}")
    match = LATENCY.search(result.stdout)
    if match is None:
        raise SystemExit(f"no latency line in the output of {' '.join(command)}:\n{result.stdout}")
    return float(match.group(2))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--iterations", type=int, default=10, help="timed runs per et-run process")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--build-dir", type=Path, default=ROOT / "build" / "bench-tracer")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--cpu", type=int, default=None, help="pin every et-run to this core (taskset)")
    parser.add_argument("--et-run-on", type=Path, help="a prebuilt et-run with ETMLIR_EVENT_TRACER=ON")
    parser.add_argument("--et-run-off", type=Path, help="a prebuilt et-run with ETMLIR_EVENT_TRACER=OFF")
    parser.add_argument("--pte", type=Path, help="the MobileNetV2 .pte (default: BUILD_DIR/mobilenet_v2.pte, "
                        "compiled when missing)")
    args = parser.parse_args(argv)
    if args.cpu is not None and shutil.which("taskset") is None:
        parser.error("--cpu needs taskset (util-linux)")

    on = args.et_run_on or build_et_run(args.build_dir, True, args.jobs)
    off = args.et_run_off or build_et_run(args.build_dir, False, args.jobs)
    pte = args.pte or args.build_dir / "mobilenet_v2.pte"
    if not pte.exists():
        build_pte(pte)
    trace_file = args.build_dir / "mobilenet_v2.ettrace"
    trace_file.parent.mkdir(parents=True, exist_ok=True)
    common = [str(pte), "--iterations", str(args.iterations), "--warmup", str(args.warmup)]
    variants = {
        "OFF": [str(off), *common],
        "ON, no tracer": [str(on), *common],
        "ON, --trace": [str(on), *common, "--trace", str(trace_file)],
    }
    names = list(variants)
    medians: dict[str, list[float]] = {name: [] for name in names}
    log(f"{args.rounds} rounds x {len(names)} variants x ({args.warmup} warmup + {args.iterations} timed runs)")
    for r in range(args.rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            medians[name].append(measure(variants[name], args.cpu))
        log(f"round {r + 1}/{args.rounds}: " + ", ".join(f"{n} {medians[n][-1]:.3f} ms" for n in names))

    mid = {name: statistics.median(values) for name, values in medians.items()}
    print(f"MobileNetV2 224x224, portable kernels, 1 thread; {args.rounds} rounds, each the median of "
          f"{args.iterations} runs after {args.warmup} warmup" + (f"; pinned to cpu {args.cpu}" if args.cpu is not None
                                                                  else ""))
    print(f"{'variant':<16} {'median ms':>10} {'min..max of round medians':>28}")
    for name in names:
        values = medians[name]
        print(f"{name:<16} {mid[name]:>10.3f} {min(values):>13.3f} .. {max(values):<12.3f}")
    base = mid["OFF"]
    print(f"ratio ON without tracer / OFF: {mid['ON, no tracer'] / base:.4f}")
    print(f"ratio ON with tracer / OFF:    {mid['ON, --trace'] / base:.4f}")
    # The fastest round of each: the least disturbed by the rest of the machine.
    fastest = {name: min(values) for name, values in medians.items()}
    print(f"ratio of the fastest rounds: ON without tracer / OFF {fastest['ON, no tracer'] / fastest['OFF']:.4f}, "
          f"ON with tracer / OFF {fastest['ON, --trace'] / fastest['OFF']:.4f}")
    # Paired per round (the same round's conditions), less sensitive to drift between rounds.
    paired = [a / b for a, b in zip(medians["ON, no tracer"], medians["OFF"])]
    print(f"paired per-round ON/OFF: median {statistics.median(paired):.4f} (min {min(paired):.4f}, "
          f"max {max(paired):.4f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
