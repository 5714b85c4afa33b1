"""The Inspector: where a `.pte`'s time goes, per op, with source lines, from a runtime trace.

    forward = etmlir.runtime.load("model.pte").method("forward")
    trace = forward.trace(x, runs=20)                  # or etmlir.runtime.load_trace("out.ettrace")
    inspector = etmlir.devtools.Inspector(pte="model.pte", trace=trace)
    print(inspector.table(sort_by="total", top=15))    # et-inspect --trace out.ettrace model.pte
    inspector.total_ms                                 # the method's time per run (median)
    inspector.to_perfetto("trace.json")                # open in ui.perfetto.dev or chrome://tracing

It joins the trace's events (include/etmlir/runtime/event_tracer.h) with what
the one `.pte` file says about them (`pte_debug`): an event's debug handle
names the edge op, its source line and its nn.Module path (Method.debug_info);
a delegate_op event's payload id names the region of a `cpu` payload, whose
header's debug_handle_map lists every edge op the region covers; a `nested`
delegate's inner steps carry the outer program's handles.

One row per op instance (an instruction, or a region inside a delegate), over
all traced runs:

    | op                       | source      | module        | backend  | calls | median ms | p90 ms | share |
    | edge.addmm + edge.gelu   | model.py:41 | layers.3.mlp  | cpu      |    20 |     0.412 |  0.430 | 31.2% |
    | edge.embedding           | model.py:30 | tok_emb       | portable |    20 |     0.020 |  0.021 |  1.5% |
    | (delegate 0: cpu, own)   | model.py:41 |               | cpu      |    20 |     0.008 |  0.009 |  0.6% |
    | (runtime, between steps) |             |               | runtime  |    20 |     0.002 |  0.002 |  0.2% |

Times are self times: a delegate call's row is only the part of its time
that none of its ops covers (the backend's own overhead), and the runtime
row is the part of a run between its steps, so the shares add up to 100% of
the runs' time. A run's time is the span from its first step's start to its
last step's end.

Errors (`InspectorError`) are clear and early: a trace of another `.pte`
(program_sha256 differs, or its events name instructions or delegates the
file does not have), a damaged trace file, a method the file does not have.
An incomplete trace (the tracer's buffer was full: `dropped_events`; or an
event that never ended, because its run failed) still makes a table, whose
footer says what is missing; a run cut short by the full buffer is left out
of the totals when complete runs remain.
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from tabulate import tabulate

from etmlir.devtools.pte_debug import DelegateInfo, MethodDebugInfo, OpInfo, read_debug_info, sha256_hex
from etmlir.executable import pte as pte_format

if TYPE_CHECKING:
    from etmlir.devtools.program_graph import ProgramGraph
    from etmlir.runtime.trace import Trace, TraceEvent

SORT_KEYS = ("total", "median", "p90", "calls", "op", "source")
# A fused region's row names at most this many ops, then "+N more".
_MAX_OPS_NAMED = 3


class InspectorError(ValueError):
    """A trace that does not belong to the `.pte`, a damaged trace, or a bad argument: says which and why."""


@dataclasses.dataclass(frozen=True)
class Row:
    """One op instance (or overhead) of the table, over every traced run."""

    op: str                     # "edge.addmm", "edge.addmm + edge.gelu", "(delegate 0: cpu, own)", ...
    location: str               # "model.py:41" as debug_info has it (may be a full path); "" for overheads
    module_path: str            # "layers.3.attn"; "" for the root module or when the file has none
    backend: str                # "portable", a delegate's backend id, or "runtime"
    kind: str                   # "op", "control", "delegate_overhead", "runtime_overhead"
    durations_ns: tuple[int, ...]   # one per call (self time)
    handles: tuple[int, ...] = ()   # the edge ops it covers
    instruction: int | None = None  # the method's instruction (a delegate's ops: the delegate call's)
    delegate: int | None = None     # the top-level delegate it ran in
    payload_id: int | None = None   # a delegate_op's region id
    share: float = 0.0

    @property
    def calls(self) -> int:
        return len(self.durations_ns)

    @property
    def total_ns(self) -> int:
        return sum(self.durations_ns)

    @property
    def median_ms(self) -> float:
        return statistics.median(self.durations_ns) / 1e6 if self.durations_ns else 0.0

    @property
    def p90_ms(self) -> float:
        return float(np.percentile(self.durations_ns, 90)) / 1e6 if self.durations_ns else 0.0

    @property
    def source(self) -> str:
        """The short source line (`model.py:41`)."""
        return self.location.rsplit("/", 1)[-1]


@dataclasses.dataclass
class _Resolved:
    """What one event is, once joined with the program."""

    key: tuple
    context: MethodDebugInfo | None     # the method its instruction/delegate indices refer to
    delegate: DelegateInfo | None       # the delegate it runs inside (None at the top)
    top_delegate: int | None            # the top-level delegate it runs inside (or is)


@dataclasses.dataclass(frozen=True)
class LatencyCheck:
    """The Inspector's time per run against the end-to-end latency measured without a tracer."""

    inspector_ms: float     # Inspector.total_ms of a traced run set
    measured_ms: float      # the median of Method.benchmark's runs
    runs: int

    @property
    def ratio(self) -> float:
        return self.inspector_ms / self.measured_ms if self.measured_ms else float("inf")

    def within(self, fraction: float) -> bool:
        """True when the two agree to `fraction` (0.1: within 10%) of the measured latency."""
        return abs(self.inspector_ms - self.measured_ms) <= fraction * self.measured_ms


def _read_pte(pte: Any) -> tuple[bytes, str]:
    if isinstance(pte, (bytes, bytearray, memoryview)):
        return bytes(pte), "<bytes>"
    if isinstance(getattr(pte, "buffer", None), (bytes, bytearray)):   # an ExecutorchProgram
        return bytes(pte.buffer), "<program>"
    if isinstance(pte, (str, os.PathLike)):
        path = os.fsdecode(os.fspath(pte))
        try:
            with open(path, "rb") as f:
                return f.read(), path
        except OSError as error:
            raise InspectorError(f"cannot read the .pte '{path}': {error.strerror or error}") from None
    raise InspectorError(f"Inspector: pte= takes a path, the file's bytes or an ExecutorchProgram, "
                         f"got {type(pte).__name__}")


def _read_trace(trace: Any, method: str | None) -> tuple[Trace, str]:
    from etmlir import runtime
    if isinstance(trace, runtime.Trace):
        return trace, "<trace>"
    if isinstance(trace, (str, os.PathLike)):
        path = os.fsdecode(os.fspath(trace))
        try:
            return runtime.load_trace(path, method), path
        except runtime.Error as error:
            text = str(error)
            raise InspectorError(text if path in text else f"{path}: {text}") from None
    raise InspectorError(f"Inspector: trace= takes a trace file's path or an etmlir.runtime.Trace, "
                         f"got {type(trace).__name__}")


class Inspector:
    """A trace joined with the `.pte` it was taken from (see the module docstring)."""

    def __init__(self, pte: Any, trace: Any, method: str | None = None) -> None:
        data, self.pte_name = _read_pte(pte)
        self.trace, self.trace_name = _read_trace(trace, method)
        try:
            methods = read_debug_info(data)
        except pte_format.PteError as error:
            raise InspectorError(f"{self.pte_name}: {error}") from None
        name = method or self.trace.method
        if self.trace.method != name:
            raise InspectorError(f"{self.trace_name} is a trace of method '{self.trace.method}', not '{name}'")
        self.sha256 = sha256_hex(data)
        if self.trace.program_sha256 and self.trace.program_sha256.lower() != self.sha256:
            path = self.trace.program_path
            taken = f" ({path})" if path and not path.startswith("<") else ""
            raise InspectorError(
                f"{self.trace_name} was taken from another .pte{taken}: its program_sha256 is "
                f"{self.trace.program_sha256[:16]}..., {self.pte_name}'s is {self.sha256[:16]}...; trace this "
                f"file again (et-run --trace, Method.trace)")
        if name not in methods:
            raise InspectorError(f"{self.trace_name} traces method '{name}', which {self.pte_name} does not have "
                                 f"(it has: {', '.join(methods) or 'none'})")
        self.method = methods[name]
        self.warnings: list[str] = []
        self._fields: dict[tuple, dict[str, Any]] = {}
        self._resolved = self._resolve()
        self._build()

    # ------------------------------------------------------------------ joining events with the program

    def _fail(self, index: int, event: TraceEvent, why: str) -> InspectorError:
        return InspectorError(f"{self.trace_name}: event {index} ({event.kind}, run {event.run}, instruction "
                              f"{event.instruction}): {why}; the trace is damaged or was taken from another "
                              f"program than {self.pte_name}")

    def _resolve(self) -> list[_Resolved]:
        events = self.trace.events
        resolved: list[_Resolved] = []
        for i, e in enumerate(events):
            if e.end_ns and e.end_ns < e.start_ns:
                raise self._fail(i, e, f"it ends ({e.end_ns} ns) before it starts ({e.start_ns} ns)")
            if e.parent is None:
                context, inside, top = self.method, None, None
                parent_key: tuple = ()
            else:
                if not 0 <= e.parent < i:
                    raise self._fail(i, e, f"its parent {e.parent} is not an earlier event")
                p, up = events[e.parent], resolved[e.parent]
                if p.run != e.run or p.kind == "instruction":
                    raise self._fail(i, e, f"its parent (event {e.parent}) is a {p.kind} of run {p.run}, not a "
                                           f"delegate call or delegate op of run {e.run}")
                if p.kind == "delegate_op":     # a backend's region inside a region (a microkernel call)
                    inside, context = up.delegate, None
                else:
                    if up.context is None or p.delegate is None or p.delegate >= len(up.context.delegates):
                        raise self._fail(i, e, "its parent's delegate is unknown")
                    inside = up.context.delegates[p.delegate]
                    inner = list((inside.inner or {}).values())
                    context = inner[0] if inner else None
                top = up.top_delegate
                parent_key = up.key
            if e.kind == "delegate_op":
                if inside is None:
                    raise self._fail(i, e, "an op inside a delegate without an enclosing delegate call")
                resolved.append(_Resolved(parent_key + (("op", e.payload_id, e.debug_handle),), None, inside, top))
                continue
            if context is None:
                raise self._fail(i, e, f"a step inside a '{inside.backend if inside else '?'}' delegate, whose "
                                       f"payload is not a program")
            if e.instruction >= len(context.instructions):
                raise self._fail(i, e, f"method '{context.name}' has {len(context.instructions)} instructions")
            step = context.instructions[e.instruction]
            if (e.kind == "delegate") != (step.kind == "delegate"):
                raise self._fail(i, e, f"instruction {e.instruction} of method '{context.name}' is a {step.kind} "
                                       f"step")
            if e.kind == "delegate":
                if e.delegate != step.delegate or step.delegate is None or step.delegate >= len(context.delegates):
                    raise self._fail(i, e, f"instruction {e.instruction} calls delegate {step.delegate}, the event "
                                           f"names delegate {e.delegate}")
                if top is None:
                    top = step.delegate
            resolved.append(_Resolved(parent_key + ((e.kind, e.instruction),), context, inside, top))
        return resolved

    def _op(self, handle: int, context: MethodDebugInfo | None) -> OpInfo | None:
        if not handle:
            return None
        return (context.op(handle) if context is not None else None) or self.method.op(handle)

    def _describe(self, index: int) -> dict[str, Any]:
        """The row fields of event `index` (op, location, module path, backend, kind, handles, ...)."""
        key = self._resolved[index].key
        if key not in self._fields:         # every run's event of one op instance reads the same
            self._fields[key] = self._describe_event(index)
        return self._fields[key]

    def _describe_event(self, index: int) -> dict[str, Any]:
        e, r = self.trace.events[index], self._resolved[index]
        backend_inside = r.delegate.backend if r.delegate is not None else "portable"
        if e.kind == "delegate_op":
            handles = tuple(r.delegate.regions.get(e.payload_id, ())) or ((e.debug_handle,) if e.debug_handle
                                                                            else ())
            ops = [self._op(h, None) or OpInfo(h, f"<handle {h}>", "unknown") for h in handles]
            names = list(dict.fromkeys(o.op for o in ops))
            label = " + ".join(names[:_MAX_OPS_NAMED]) + (f" +{len(names) - _MAX_OPS_NAMED} more"
                                                           if len(names) > _MAX_OPS_NAMED else "")
            first = ops[0] if ops else None
            return dict(op=label or f"<region {e.payload_id}>", location=first.location if first else "",
                        module_path=first.module_path if first else "", backend=backend_inside, kind="op",
                        handles=handles, payload_id=e.payload_id)
        step = r.context.instructions[e.instruction]
        info = self._op(e.debug_handle or step.handle, r.context)
        where = dict(location=info.location if info else "", module_path=info.module_path if info else "",
                     handles=(info.handle,) if info else ())
        if e.kind == "delegate":
            delegate = r.context.delegates[step.delegate]
            return dict(op=f"(delegate {step.delegate}: {delegate.backend}, own time)", backend=delegate.backend,
                        kind="delegate_overhead", **where)
        if step.kind == "kernel":
            return dict(op=info.op if info else step.name, backend=backend_inside, kind="op", **where)
        return dict(op=f"({step.name})", backend=backend_inside if r.delegate else "runtime", kind="control",
                    **where)

    def _build(self) -> None:
        events, trace = self.trace.events, self.trace
        if not events:
            self.warnings.append(f"the trace of method '{trace.method}' holds no events")
        open_events = sum(1 for e in events if not e.end_ns)
        runs_seen = sorted({e.run for e in events})
        excluded: set[int] = set()
        if trace.dropped_events:
            self.warnings.append(
                f"incomplete trace: {trace.dropped_events:,} events were dropped (the tracer's buffer was full "
                f"after {len(events):,}); trace again with a larger buffer (Method.trace(max_events=...), "
                f"et-run --trace-events N)")
            if len(runs_seen) > 1:          # the buffer filled during the last run recorded: leave it out
                excluded.add(runs_seen[-1])
                self.warnings.append(f"run {runs_seen[-1]} was cut short by the full buffer and is left out; "
                                     f"{len(runs_seen) - 1} complete run(s) remain")
        if open_events:
            failed = sorted({e.run for e in events if not e.end_ns})
            self.warnings.append(f"{open_events} events never ended (run {', '.join(map(str, failed))} failed "
                                 f"inside them); those runs are left out")
            excluded.update(failed)
        self.runs = [r for r in runs_seen if r not in excluded]
        children_ns = [0] * len(events)
        for e in events:
            if e.parent is not None and e.end_ns:
                children_ns[e.parent] += e.end_ns - e.start_ns
        grouped: dict[tuple, list[int]] = {}
        self._self_ns = [0] * len(events)
        for i, e in enumerate(events):
            if e.run in excluded:
                continue
            self._self_ns[i] = max(0, e.end_ns - e.start_ns - children_ns[i])
            grouped.setdefault(self._resolved[i].key, []).append(i)
        spans: dict[int, list[int]] = {r: [] for r in self.runs}
        covered: dict[int, int] = {r: 0 for r in self.runs}
        for e in events:
            if e.parent is None and e.run in spans:
                spans[e.run].extend((e.start_ns, e.end_ns))
                covered[e.run] += e.end_ns - e.start_ns
        self.run_totals_ns = [max(spans[r]) - min(spans[r]) if spans[r] else 0 for r in self.runs]
        grand = sum(self.run_totals_ns)
        rows = []
        for key, members in grouped.items():
            first = members[0]
            fields = self._describe(first)
            e, r = events[first], self._resolved[first]
            rows.append(Row(durations_ns=tuple(self._self_ns[i] for i in members), instruction=e.instruction
                            if e.parent is None else events[self._top(first)].instruction,
                            delegate=r.top_delegate, **fields))
        between = tuple(max(0, total - covered[r]) for r, total in zip(self.runs, self.run_totals_ns))
        if self.runs:
            rows.append(Row("(runtime, between steps)", "", "", "runtime", "runtime_overhead", between))
        self.rows = [dataclasses.replace(row, share=row.total_ns / grand if grand else 0.0) for row in rows]

    def _top(self, index: int) -> int:
        events = self.trace.events
        while events[index].parent is not None:
            index = events[index].parent
        return index

    # ------------------------------------------------------------------ results

    @property
    def total_ms(self) -> float:
        """The method's time per run: the median over the runs of first step start to last step end."""
        return statistics.median(self.run_totals_ns) / 1e6 if self.run_totals_ns else 0.0

    @property
    def run_totals_ms(self) -> list[float]:
        return [t / 1e6 for t in self.run_totals_ns]

    @property
    def complete(self) -> bool:
        return not self.warnings

    def sorted_rows(self, sort_by: str = "total") -> list[Row]:
        if sort_by not in SORT_KEYS:
            raise InspectorError(f"sort_by is one of {', '.join(SORT_KEYS)}, not {sort_by!r}")
        if sort_by == "op":
            return sorted(self.rows, key=lambda r: (r.op, -r.total_ns))
        if sort_by == "source":
            return sorted(self.rows, key=lambda r: (*_location_key(r.location), r.op))
        metric = {"total": lambda r: r.total_ns, "median": lambda r: r.median_ms, "p90": lambda r: r.p90_ms,
                  "calls": lambda r: r.calls}[sort_by]
        return sorted(self.rows, key=lambda r: (-metric(r), r.op))

    def summary_line(self, warnings: bool = True) -> str:
        """`77.791 ms per run (median of 5 runs of method 'forward'), 545 events` (+ what the trace lacks)."""
        runs = len(self.run_totals_ns)
        line = (f"{self.total_ms:.3f} ms per run (median of {runs} run{'s' if runs != 1 else ''} of method "
                f"'{self.method.name}'), {len(self.trace.events):,} events")
        return line + ("; " + "; ".join(self.warnings) if self.warnings and warnings else "")

    def table(self, sort_by: str = "total", top: int | None = None, tablefmt: str = "github") -> str:
        """The table (see the module docstring), `top` rows of it, then a footer with the totals and
        what the trace lacks."""
        if top is not None and (isinstance(top, bool) or not isinstance(top, int) or top < 1):
            raise InspectorError(f"top is None or an int >= 1, not {top!r}")
        rows = self.sorted_rows(sort_by)
        shown, rest = (rows[:top], rows[top:]) if top is not None else (rows, [])
        body = [[r.op, r.source, r.module_path, r.backend, r.calls, r.median_ms, r.p90_ms, f"{100 * r.share:.1f}%"]
                for r in shown]
        text = tabulate(body, headers=["op", "source", "module", "backend", "calls", "median ms", "p90 ms",
                                       "share"], tablefmt=tablefmt, floatfmt=".4f")
        footer = []
        if rest:
            footer.append(f"... {len(rest)} more rows ({100 * sum(r.share for r in rest):.1f}% of the time)")
        footer.append(f"total: {self.summary_line(warnings=False)}")
        footer.extend(f"warning: {w}" for w in self.warnings)
        return text + "\n" + "\n".join(footer)

    def __str__(self) -> str:
        return self.table()

    def op_shares(self) -> tuple[dict[int, tuple[float, float]], dict[int, tuple[float, float]]]:
        """(steps, inner): share of the time and ms per run by debug handle; `steps` for the method's own
        steps (a delegate call: its whole time), `inner` for the ops inside delegates (a region's time
        split evenly among the ops it covers)."""
        events = self.trace.events
        grand = sum(self.run_totals_ns)
        runs = max(1, len(self.run_totals_ns))
        included = set(self.runs)
        steps: dict[int, float] = {}
        inner: dict[int, float] = {}
        for i, e in enumerate(events):
            if e.run not in included or not e.end_ns:
                continue
            fields = None
            if e.parent is None:
                handle = e.debug_handle or self.method.instructions[e.instruction].handle
                if handle:
                    steps[handle] = steps.get(handle, 0) + (e.end_ns - e.start_ns)
                continue
            if e.kind == "delegate":
                continue            # its ops are counted; its own time stays with the call's box
            fields = self._describe(i)
            handles = fields["handles"]
            for h in handles:
                inner[h] = inner.get(h, 0) + self._self_ns[i] / len(handles)

        def scale(d: dict[int, float]) -> dict[int, tuple[float, float]]:
            return {h: (ns / grand if grand else 0.0, ns / runs / 1e6) for h, ns in d.items()}
        return scale(steps), scale(inner)

    def annotate(self, graph: ProgramGraph) -> None:
        """Fill the shares and times of `graph`'s nodes of this method (the HTML view colours by them)."""
        steps, inner = self.op_shares()
        # A graph of the IR names its function (`main`), not the method it became: one is that one.
        methods = [m for m in graph.methods if m.name == self.method.name] or \
            (graph.methods if len(graph.methods) == 1 else [])
        for method in methods:
            for node in method.nodes:
                if node.handle in steps:
                    node.share, node.ms = steps[node.handle]
                for cell in node.cells:
                    if cell.op.handle in inner:
                        cell.share, cell.ms = inner[cell.op.handle]
                    elif node.kind == "op" and cell.op.handle in steps:
                        cell.share, cell.ms = steps[cell.op.handle]

    def to_perfetto(self, path: str | os.PathLike | None = None) -> dict[str, Any]:
        """The trace as Chrome trace-event JSON (ui.perfetto.dev, chrome://tracing): one complete ("X")
        event per traced event, on one thread so that a delegate's ops nest under its call by time, each
        run a slice around its steps; args carry the debug handle, op, source line, module path. Writes
        it to `path` when given; returns the document."""
        events = self.trace.events
        t0 = min((e.start_ns for e in events), default=0)
        pid, tid = 1, 1
        out: list[dict[str, Any]] = [
            {"name": "process_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": self.pte_name}},
            {"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
             "args": {"name": f"method {self.method.name}"}}]

        # Microseconds, as the format wants, for whole nanoseconds plus a quarter: a reader that turns
        # them back into ns by truncating (value * 1000) or by rounding gets the exact ns either way,
        # so a child never ends a nanosecond after its parent and nesting survives the round trip.
        def us(ns: int) -> float:
            return (ns - t0 + 0.25) / 1000

        def dur(ns: int) -> float:
            return (ns + 0.25) / 1000

        for run, total in zip(self.runs, self.run_totals_ns):
            starts = [e.start_ns for e in events if e.parent is None and e.run == run]
            if starts:
                start = min(starts)
                out.append({"name": f"run {run}", "cat": "run", "ph": "X", "ts": us(start),
                            "dur": dur(total), "pid": pid, "tid": tid, "args": {"run": run}})
        for i, e in enumerate(events):
            if not e.end_ns:
                continue
            fields = self._describe(i)
            name = fields["op"]
            if e.kind == "delegate":
                step = self._resolved[i].context.instructions[e.instruction]
                name = f"delegate {step.delegate} [{fields['backend']}]"
            args = {"kind": e.kind, "run": e.run, "instruction": e.instruction, "debug_handle": e.debug_handle,
                    "op": fields["op"], "source": fields["location"], "module_path": fields["module_path"],
                    "backend": fields["backend"], "depth": e.depth}
            if e.kind == "delegate_op":
                args["payload_id"] = e.payload_id
                args["handles"] = list(fields["handles"])
            out.append({"name": name, "cat": fields["backend"], "ph": "X", "ts": us(e.start_ns),
                        "dur": dur(e.end_ns - e.start_ns), "pid": pid, "tid": tid, "args": args})
        document = {"traceEvents": out, "displayTimeUnit": "ms",
                    "metadata": {"pte": self.pte_name, "program_sha256": self.sha256, "method": self.method.name,
                                 "runs": len(self.runs), "dropped_events": self.trace.dropped_events,
                                 "writer": self.trace.writer, "cpu": self.trace.cpu}}
        if path is not None:
            with open(path, "w") as f:
                json.dump(document, f)
        return document

    def to_html(self, path: str | os.PathLike | None = None, title: str | None = None) -> str:
        """The HTML graph view (`graph_html`) of the traced method with its ops coloured by their share of
        this trace's time; written to `path` when given; returns the page."""
        from etmlir.devtools.graph_html import render_html
        from etmlir.devtools.program_graph import ProgramGraph, pte_method_graph
        graph = ProgramGraph(title or os.path.basename(self.pte_name), [pte_method_graph(self.method)])
        page = render_html(graph, inspector=self)
        if path is not None:
            with open(path, "w", encoding="utf-8") as f:
                f.write(page)
        return page


def _location_key(location: str) -> tuple[bool, str, int]:
    """Sorts by file, then line number; rows without a source line last."""
    file, _, line = location.rpartition(":")
    return (not location, file, int(line)) if line.isdigit() else (not location, location, 0)


def latency_check(pte: Any, inputs: Sequence[Any], runs: int = 20, warmup: int = 3, method: str = "forward",
                  allow_native_code: bool = False, rounds: int = 5) -> LatencyCheck:
    """The Inspector's total per run against the end-to-end latency of untraced executes
    (Method.benchmark), both medians over `runs` runs of the same loaded method: how much of the
    time the trace sees. The two alternate in `rounds` rounds, so that a machine whose load
    changes meanwhile (another process, a CPU clock) moves both alike.

        check = latency_check("nanogpt_cpu.pte", (tokens,), allow_native_code=True)
        assert check.within(0.10), check
    """
    from etmlir import runtime
    if runs < 1 or rounds < 1:
        raise InspectorError(f"latency_check: runs and rounds are >= 1, got runs={runs}, rounds={rounds}")
    data, _ = _read_pte(pte)
    loaded = runtime.load(data, allow_native_code=allow_native_code).method(method)
    measured: list[float] = []
    spans: list[int] = []
    rounds = min(rounds, runs)
    for k in range(rounds):
        n = runs // rounds + (1 if k < runs % rounds else 0)
        measured += loaded.benchmark(*inputs, iterations=n, warmup=warmup if k == 0 else 0)
        spans += Inspector(pte=data, trace=loaded.trace(*inputs, runs=n)).run_totals_ns
    return LatencyCheck(statistics.median(spans) / 1e6, statistics.median(measured) * 1e3, runs)


__all__ = ["Inspector", "InspectorError", "LatencyCheck", "Row", "SORT_KEYS", "latency_check"]
