"""et-inspect's trace table, Perfetto export and HTML graph view (`--trace`, `--perfetto`, `--html`).

    et-inspect --trace out.ettrace model.pte                    # where the time goes, per op
    et-inspect --trace out.ettrace --sort median --top 10 model.pte
    et-inspect --trace out.ettrace --perfetto out.json model.pte   # also a Chrome trace-event file
    et-inspect --html graph.html model.pte [--trace out.ettrace]   # the program graph as one HTML page

Each raises ToolError with a one-line message for a bad file or a trace of another program
(etmlir.devtools.Inspector says which), so et-inspect exits 1, never with a traceback.
"""

from __future__ import annotations

import os

from etmlir.devtools.inspector import SORT_KEYS, Inspector, InspectorError
from etmlir.tools.cli import ToolError

__all__ = ["SORT_KEYS", "html_view", "trace_table"]


def _inspector(pte_path: str, trace_path: str) -> Inspector:
    try:
        return Inspector(pte=pte_path, trace=trace_path)
    except InspectorError as error:
        raise ToolError(" ".join(str(error).split())) from None


def _write(path: str, what: str, write) -> None:
    try:
        write(path)
    except OSError as error:
        raise ToolError(f"cannot write the {what} '{path}': {error.strerror or error}") from None


def trace_table(pte_path: str, trace_path: str, sort_by: str = "total", top: int | None = 30,
                perfetto: str | None = None) -> str:
    """The Inspector's table of `trace_path` joined with `pte_path` (`top` None or 0: every row); with
    `perfetto`, also writes the Chrome trace-event JSON there."""
    inspector = _inspector(pte_path, trace_path)
    if perfetto is not None:
        _write(perfetto, "Perfetto trace", inspector.to_perfetto)
    text = inspector.table(sort_by=sort_by, top=top or None)
    if perfetto is not None:
        text += f"\nwrote {perfetto} (Chrome trace-event JSON: open it in ui.perfetto.dev or chrome://tracing)"
    return text


def html_view(pte_path: str, out: str, trace_path: str | None = None) -> str:
    """Writes the HTML graph view of `pte_path` (coloured by `trace_path`'s time shares when given) to
    `out`; returns a line saying what was written."""
    from etmlir.devtools.graph_html import render_html
    from etmlir.devtools.program_graph import graph_from_pte
    from etmlir.executable import pte

    inspector = _inspector(pte_path, trace_path) if trace_path is not None else None
    try:
        with open(pte_path, "rb") as f:
            data = f.read()
    except OSError as error:
        raise ToolError(f"cannot read '{pte_path}': {error.strerror or error}") from None
    try:
        graph = graph_from_pte(data, os.path.basename(pte_path))
    except pte.PteError as error:
        raise ToolError(f"{pte_path}: {error}") from None
    page = render_html(graph, inspector=inspector)

    def write(path: str) -> None:
        with open(path, "w", encoding="utf-8") as f:
            f.write(page)
    _write(out, "HTML page", write)
    coloured = " coloured by the trace's time shares" if inspector is not None else ""
    return f"wrote {out}: the graph of {graph.num_nodes} nodes{coloured} ({len(page):,} bytes, no network needed)"
