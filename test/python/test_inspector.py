"""The Inspector, its Perfetto export, `et-inspect --trace/--html` and the HTML graph view, on real traces.

One small model is compiled once (module fixture): a `cpu` delegate, a `nested` one and an op
left on the portable kernels, each op traced by the real runtime (`Method.trace`). The page is
rendered by headless Chromium (Debian `chromium`, installed by scripts/setup.sh): the test
skips without it locally and fails without it under CI=true.
"""

from __future__ import annotations

import dataclasses
import inspect
import io
import json
import os
import re
import shutil
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout

import numpy as np
import pytest
import torch
from torch import nn

import etmlir
import etmlir.runtime as rt
from etmlir import backends
from etmlir.backends.payload_header import read_payload
from etmlir.devtools import Inspector, InspectorError, delegation_info, latency_check
from etmlir.executable import pte
from etmlir.tools import et_inspect

RUNS = 4


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(32, 32)

    def forward(self, h):
        return torch.exp(torch.relu(self.fc(h)) * 0.1)   # relu -> nested, exp -> portable, the rest -> cpu


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.block = Block()
        self.head = nn.Linear(32, 8)

    def forward(self, x):
        h = torch.tanh(self.fc1(x))
        h = self.block(h)
        return torch.sigmoid(self.head(h))


def _block_lines() -> set[str]:
    """Where Block's ops may say they come from: their own line or the line that called the block
    (which user frame a location keeps is export's choice; the Inspector passes on debug_info's)."""
    here = os.path.basename(__file__)
    return {f"{here}:{_line('return torch.exp(torch.relu')}", f"{here}:{_line('h = self.block(h)')}"}


def _debug_location(data: bytes, op: str) -> str:
    """debug_info's location of the one `op` of the program."""
    (entry,) = [e for e in pte.read(data).program.methods[0].debugInfo if e.op.decode() == op]
    return entry.location.decode()


def _line(text: str) -> int:
    """The line of this file that holds `text` (the source line debug_info must name)."""
    lines, start = inspect.getsourcelines(sys.modules[__name__])
    return next((start or 1) + i for i, line in enumerate(lines) if text in line and "_line(" not in line)


@dataclasses.dataclass
class Compiled:
    edge: etmlir.EdgeProgram        # delegated
    plain: etmlir.EdgeProgram       # the same before partitioning
    data: bytes
    x: torch.Tensor
    trace: rt.Trace
    path: str
    trace_path: str


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> Compiled:
    torch.manual_seed(0)
    model, x = Net().eval(), torch.randn(4, 16)
    plain = etmlir.to_edge(etmlir.export(model, (x,)))
    edge = plain.to_backend(backends.partitioner("cpu", skip_ops=["edge.exp", "edge.relu"]))
    edge = edge.to_backend(backends.partitioner("nested", skip_ops=["edge.exp"]))
    data = edge.to_executorch().buffer
    folder = tmp_path_factory.mktemp("inspector")
    path, trace_path = str(folder / "net.pte"), str(folder / "net.ettrace")
    with open(path, "wb") as f:
        f.write(data)
    trace = rt.load(data).method("forward").trace(x, runs=RUNS)
    (actual,) = trace.outputs
    with torch.no_grad():
        np.testing.assert_allclose(np.asarray(actual), model(x).numpy(), atol=1e-5, rtol=1e-5)  # a real run
    trace.save(trace_path)
    return Compiled(edge, plain, data, x, trace, path, trace_path)


@pytest.fixture(scope="module")
def inspector(compiled) -> Inspector:
    return Inspector(pte=compiled.data, trace=compiled.trace)


def _row(inspector: Inspector, op: str):
    rows = [r for r in inspector.rows if r.op == op]
    assert len(rows) == 1, [r.op for r in inspector.rows]
    return rows[0]


# ----------------------------------------------------------------------------- the table


def test_rows_name_op_source_line_module_and_backend(compiled, inspector):
    exp, relu = _row(inspector, "edge.exp"), _row(inspector, "edge.relu")
    here = os.path.basename(__file__)
    assert (exp.backend, relu.backend) == ("portable", "nested")
    assert exp.location == _debug_location(compiled.data, "edge.exp")
    assert relu.location == _debug_location(compiled.data, "edge.relu")
    assert exp.source in _block_lines() and relu.source in _block_lines()
    assert exp.module_path == relu.module_path == "block"
    assert exp.calls == relu.calls == RUNS
    overheads = [r for r in inspector.rows if r.kind == "delegate_overhead"]
    assert sorted(r.backend for r in overheads) == ["cpu", "cpu", "cpu", "nested"]
    assert f"{here}:{_line('h = torch.tanh(self.fc1(x))')}" in {r.source for r in overheads if r.backend == "cpu"}
    assert [r.kind for r in inspector.rows].count("runtime_overhead") == 1


def test_cpu_regions_list_the_ops_their_payload_header_maps(compiled, inspector):
    regions = [e for e in compiled.trace.events if e.kind == "delegate_op"]
    if not regions:
        pytest.skip("this runtime's cpu backend reports no per-region events (delegate_op) yet")
    f = pte.read(compiled.data)
    method = f.program.methods[0]
    maps = {}
    for index, d in enumerate(method.delegates):
        blob = f.segment(d.payload.segment)[d.payload.offset:d.payload.offset + d.payload.size]
        maps[index] = dict(read_payload(blob)[0].debug_handle_map)
    ops = {e.handle: e.op.decode() for e in method.debugInfo}
    rows = [r for r in inspector.rows if r.payload_id is not None]
    assert rows and all(r.backend == "cpu" for r in rows)
    for row in rows:
        handles = maps[row.delegate][row.payload_id]
        assert row.handles == tuple(handles)
        assert row.op.split(" + ")[0] == ops[handles[0]]
    addmm = [r for r in rows if "edge.addmm" in r.op]
    assert {r.module_path for r in addmm} >= {"fc1", "head"}
    # the HTML view colours the cpu delegates' ops one by one
    page = inspector.to_html()
    assert re.search(r'class="cell op backend-cpu"[^>]*data-share="', page)


def test_self_times_add_up_to_the_runs_span(compiled, inspector):
    spans = []
    for run in range(RUNS):
        top = [e for e in compiled.trace.events if e.parent is None and e.run == run]
        spans.append(max(e.end_ns for e in top) - min(e.start_ns for e in top))
    assert inspector.run_totals_ns == spans
    assert inspector.total_ms == pytest.approx(float(np.median(spans)) / 1e6)
    assert sum(r.total_ns for r in inspector.rows) == sum(spans)
    assert sum(r.share for r in inspector.rows) == pytest.approx(1.0)
    # a delegate's own row is its time minus its children's
    events = compiled.trace.events
    nested_call = next(i for i, e in enumerate(events) if e.kind == "delegate" and e.run == 0 and e.delegate == 1)
    assert any(c.parent == nested_call for c in events)
    children = sum(e.end_ns - e.start_ns for e in events if e.parent == nested_call)
    own = _row(inspector, "(delegate 1: nested, own time)").durations_ns[0]
    assert own == events[nested_call].end_ns - events[nested_call].start_ns - children
    assert inspector.complete


def test_table_sorts_and_cuts(inspector):
    text = inspector.table(sort_by="op", top=3)
    body = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| op ")]
    assert len(body) == 3
    ops = sorted(r.op for r in inspector.rows)
    assert [line.split("|")[1].strip() for line in body] == ops[:3]
    assert f"... {len(inspector.rows) - 3} more rows" in text
    assert "ms per run (median of 4 runs of method 'forward')" in text
    by_calls = inspector.sorted_rows("calls")
    assert [r.calls for r in by_calls] == sorted((r.calls for r in by_calls), reverse=True)
    by_total = inspector.sorted_rows("total")
    assert [r.total_ns for r in by_total] == sorted((r.total_ns for r in by_total), reverse=True)
    by_source = [r.source for r in inspector.sorted_rows("source") if r.source]
    assert by_source == sorted(by_source, key=lambda s: int(s.rsplit(":", 1)[1]))
    with pytest.raises(InspectorError, match="sort_by is one of"):
        inspector.table(sort_by="speed")


def test_a_saved_trace_file_gives_the_same_table(compiled, inspector):
    again = Inspector(pte=compiled.path, trace=compiled.trace_path)
    assert [(r.op, r.backend, r.calls, r.durations_ns) for r in again.rows] == \
        [(r.op, r.backend, r.calls, r.durations_ns) for r in inspector.rows]


# ----------------------------------------------------------------------------- clear errors


def test_a_trace_of_another_pte_is_refused(compiled, tmp_path):
    other = compiled.edge.to_executorch(etmlir.ExecutorchConfig(arenas=("fast:64k", "slow"))).buffer
    assert other != compiled.data
    with pytest.raises(InspectorError, match="taken from another .pte: its program_sha256 is"):
        Inspector(pte=other, trace=compiled.trace_path)
    # Without the hash (a hand-made trace), the events themselves do not fit a portable-only program.
    portable = compiled.plain.to_executorch().buffer
    anonymous = dataclasses.replace(compiled.trace, program_sha256="")
    with pytest.raises(InspectorError, match="damaged or was taken from another program"):
        Inspector(pte=portable, trace=anonymous)


def test_a_damaged_trace_file_is_refused(compiled, tmp_path):
    with open(compiled.trace_path, "rb") as f:
        data = f.read()
    cut = tmp_path / "cut.ettrace"
    cut.write_bytes(data[:len(data) // 2])
    with pytest.raises(InspectorError, match="cut.ettrace"):
        Inspector(pte=compiled.data, trace=str(cut))
    with pytest.raises(InspectorError, match="not a trace file"):
        Inspector(pte=compiled.data, trace=compiled.path)


def test_an_incomplete_trace_warns_in_the_footer(compiled):
    method = rt.load(compiled.data).method("forward")
    with pytest.raises(rt.Error, match="event buffer full"):
        method.trace(compiled.x, runs=3, max_events=8)
    partial = method.trace(compiled.x, runs=3, max_events=8, allow_dropped=True)
    assert partial.dropped_events > 0
    inspector = Inspector(pte=compiled.data, trace=partial)
    assert not inspector.complete
    text = inspector.table()
    assert re.search(r"warning: incomplete trace: \d+ events were dropped", text)
    assert len(inspector.run_totals_ns) == 1       # run 1 was cut short: left out of the totals


# ----------------------------------------------------------------------------- Perfetto / Chrome JSON


def test_perfetto_json_nests_delegate_ops_under_their_call(compiled, inspector, tmp_path):
    out = tmp_path / "trace.json"
    inspector.to_perfetto(out)
    document = json.loads(out.read_text())
    # The JSON Object Format of the Trace Event Format: {"traceEvents": [...]}, complete events
    # ("X": name, ts and dur in microseconds, pid, tid) and metadata ("M") naming the process/thread.
    assert isinstance(document["traceEvents"], list)
    slices = [e for e in document["traceEvents"] if e["ph"] == "X"]
    meta = [e for e in document["traceEvents"] if e["ph"] == "M"]
    assert {m["name"] for m in meta} == {"process_name", "thread_name"}
    for e in slices:
        assert isinstance(e["name"], str) and e["name"]
        assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0
        assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
    steps = [e for e in slices if e["cat"] != "run"]
    assert len(steps) == len(compiled.trace.events)

    def ns(value: float) -> int:
        assert int(value * 1000) == round(value * 1000)
        return int(value * 1000)

    t0 = min(e.start_ns for e in compiled.trace.events)
    assert sorted(ns(e["ts"]) for e in steps) == sorted(e.start_ns - t0 for e in compiled.trace.events)
    assert sorted(ns(e["dur"]) for e in steps) == sorted(e.end_ns - e.start_ns for e in compiled.trace.events)
    relu = next(e for e in steps if e["args"]["op"] == "edge.relu")
    assert relu["args"]["module_path"] == "block"
    assert relu["args"]["source"] == _debug_location(compiled.data, "edge.relu")
    assert relu["args"]["depth"] == 1 and relu["args"]["backend"] == "nested"
    # Nesting comes from time containment on one thread: every op inside a delegate lies inside a
    # delegate slice of its run, and every step inside its run's slice, in whole nanoseconds as a
    # reader gets them back from microseconds whether it truncates or rounds.
    def inside(inner, outer):
        start, end = ns(inner["ts"]), ns(inner["ts"]) + ns(inner["dur"])
        return ns(outer["ts"]) <= start and end <= ns(outer["ts"]) + ns(outer["dur"])

    calls = [e for e in steps if e["args"]["kind"] == "delegate"]
    runs = {e["args"]["run"]: e for e in slices if e["cat"] == "run"}
    for e in steps:
        assert e["tid"] == runs[e["args"]["run"]]["tid"] and inside(e, runs[e["args"]["run"]])
        if e["args"]["depth"] > 0:
            assert any(inside(e, c) and c["args"]["run"] == e["args"]["run"] for c in calls), e


# ----------------------------------------------------------------------------- et-inspect


def _et_inspect(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        status = et_inspect.main(list(argv))
    return status, out.getvalue(), err.getvalue()


def test_et_inspect_trace_prints_the_table_and_writes_perfetto(compiled, tmp_path):
    out = tmp_path / "p.json"
    status, text, err = _et_inspect("--trace", compiled.trace_path, "--sort", "calls", "--top", "2",
                                    "--perfetto", str(out), compiled.path)
    assert (status, err) == (0, "")
    assert "| op" in text and "| backend" in text and "more rows" in text
    assert json.loads(out.read_text())["traceEvents"]
    other = tmp_path / "other.pte"
    other.write_bytes(compiled.edge.to_executorch(etmlir.ExecutorchConfig(arenas=("a:64k", "b"))).buffer)
    status, text, err = _et_inspect("--trace", compiled.trace_path, str(other))
    assert status == 1 and err.startswith("et-inspect: error: ") and "another .pte" in err
    assert len(err.strip().splitlines()) == 1


def test_a_trace_from_et_run_joins_with_its_file(compiled, tmp_path):
    et_run = os.path.join(os.path.dirname(sys.executable), "et-run")
    inputs, trace = tmp_path / "inputs.npz", tmp_path / "run.ettrace"
    np.savez(inputs, compiled.x.numpy())
    subprocess.run([et_run, compiled.path, "--inputs", str(inputs), "--iterations", "3", "--allow-native",
                    "--trace", str(trace)], check=True, capture_output=True, timeout=120)
    inspector = Inspector(pte=compiled.path, trace=str(trace))
    assert inspector.trace.writer == "et-run" and len(inspector.run_totals_ns) == 3
    assert _row(inspector, "edge.exp").calls == _row(inspector, "edge.relu").calls == 3
    assert sum(r.share for r in inspector.rows) == pytest.approx(1.0)


# ----------------------------------------------------------------------------- the HTML graph view


def _self_contained(page: str) -> None:
    assert not re.search(r"<(link|img|iframe)\b|\bsrc=|@import|url\(\s*['\"]?https?:", page)
    assert set(re.findall(r"https?://[^\s\"'<>]+", page)) <= {"http://www.w3.org/2000/svg"}


def test_html_view_of_the_pte_has_every_step_and_delegate_op(compiled, inspector, tmp_path):
    page = inspector.to_html(tmp_path / "g.html")
    _self_contained(page)
    f = pte.read(compiled.data)
    method = f.program.methods[0]
    for pc, ins in enumerate(method.instructions):
        assert f'id="forward-n{pc}"' in page
    assert page.count('class="node delegate backend-cpu"') == 3
    assert page.count('class="node delegate backend-nested"') == 1
    assert 'class="node op backend-portable"' in page
    for index, d in enumerate(method.delegates):
        blob = f.segment(d.payload.segment)[d.payload.offset:d.payload.offset + d.payload.size]
        pc = next(pc for pc, ins in enumerate(method.instructions) if ins.kindType == 2 and ins.kind.delegate == index)
        for _, handles in read_payload(blob)[0].debug_handle_map:
            for handle in handles:
                assert f'id="forward-n{pc}-h{handle}"' in page
    # the source line and module path on hover; the time share when traced
    exp = re.search(r'<g id="forward-n\d+" class="node op backend-portable"[^>]*>'
                    r'<title>([^<]*)</title>', page)
    assert f"source: {_debug_location(compiled.data, 'edge.exp')}" in exp.group(1)
    assert "module: block" in exp.group(1)
    assert "% of the time" in exp.group(1)
    shares = [float(s) for s in re.findall(r'class="node op[^"]*"[^>]*data-share="([0-9.]+)"', page)]
    assert shares and all(0 <= s <= 1 for s in shares)


def test_delegation_info_to_html_draws_the_ir(compiled, inspector, tmp_path):
    info = delegation_info(compiled.edge)
    page = info.to_html(str(tmp_path / "ir.html"), inspector=inspector)
    _self_contained(page)
    assert page.count("node delegate backend-cpu") == 3 and page.count("node delegate backend-nested") == 1
    assert re.search(r'class="cell op backend-nested"[^>]*data-module="block"', page)
    assert "delegated subgraphs: 4" in page
    plain = info.to_html()
    assert "data-share" not in plain and "time share" not in plain


def test_et_inspect_html(compiled, tmp_path):
    out = tmp_path / "view.html"
    status, text, err = _et_inspect("--html", str(out), "--trace", compiled.trace_path, compiled.path)
    assert (status, err) == (0, "") and "wrote" in text and "coloured by the trace" in text
    assert "data-share" in out.read_text()


def test_layout_of_a_thousand_nodes_is_fast_and_overlap_free():
    import time

    from etmlir.devtools.program_graph import MethodGraph, Node, layout

    # A transformer-like graph: a chain with three-way branches that meet again and residual adds.
    nodes, edges = [Node("in", "input", "input 0")], []
    while len(nodes) < 1000:
        top = len(nodes) - 1
        branch = [len(nodes) + k for k in range(3)]
        nodes += [Node(f"n{i}", "op", ("view_copy", "permute_copy", "addmm")[i % 3]) for i in branch]
        edges += [(top, b) for b in branch]
        join = len(nodes)
        nodes.append(Node(f"n{join}", "op", "bmm"))
        edges += [(b, join) for b in branch] + [(top, join)]
    started = time.perf_counter()
    graph = MethodGraph("forward", nodes, edges)
    layout(graph)
    assert time.perf_counter() - started < 2.0
    assert graph.width < 2000                      # branches sit side by side, not spread out
    for a, b in edges:
        assert nodes[b].y >= nodes[a].y + nodes[a].height
    by_row: dict[float, list[Node]] = {}
    for node in nodes:
        by_row.setdefault(node.y, []).append(node)
    for row in by_row.values():
        row.sort(key=lambda n: n.x)
        assert all(left.x + left.width <= right.x for left, right in zip(row, row[1:]))


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is not installed (scripts/setup.sh installs Debian's chromium); CI needs it "
                        "to test the HTML view")
        pytest.skip("chromium is not installed (apt-get install chromium, or run scripts/setup.sh)")
    return found


def test_html_renders_in_headless_chromium(compiled, inspector, tmp_path):
    from PIL import Image

    chromium = _chromium()
    page = tmp_path / "view.html"
    inspector.to_html(page)
    flags = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1000,900"]
    shot = tmp_path / "shot.png"
    subprocess.run([*flags, f"--screenshot={shot}", page.as_uri()], check=True, capture_output=True, timeout=120)
    image = Image.open(shot).convert("RGB")
    assert image.size == (1000, 900)
    colours = image.getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 20       # text, boxes, the legend: not a blank page
    dom = subprocess.run([*flags, "--dump-dom", page.as_uri()], check=True, capture_output=True, text=True,
                         timeout=120).stdout
    assert 'data-script="ran"' in dom                     # the inline script ran without an error
    assert re.search(r'<svg id="graph-forward" class="graph"', dom)
    assert len(re.findall(r'class="node delegate backend-cpu"', dom)) == 3
    assert 'id="forward-n3"' in dom and 'class="cell op backend-nested"' in dom
    assert "delegate: nested" in dom and "time share" in dom   # the legend


def test_latency_check_compares_the_inspector_with_a_measured_run(compiled):
    check = latency_check(compiled.data, (compiled.x,), runs=5, warmup=1)
    assert check.inspector_ms > 0 and check.measured_ms > 0 and check.runs == 5
    assert check.within(abs(check.ratio - 1) + 1e-9) and not check.within(abs(check.ratio - 1) / 2 - 1e-9)
