"""The HTML graph view: one static, self-contained page of a program graph.

    html = render_html(graph_from_pte(data, "model.pte"))                 # et-inspect --html out.html model.pte
    html = render_html(graph, inspector=Inspector(pte=data, trace=t))     # ops coloured by their share of the time
    delegation_info(edge).to_html("graph.html")                           # the same view of the IR

Everything is inline (SVG, CSS, a little JavaScript for the tooltip, search
and zoom): the page opens from disk with no network, and prints. Delegates
are boxes in their backend's colour (the legend names each backend), holding
a cell per edge op they cover; with a trace, every op and cell is filled by
its share of the traced time (white to dark red) and says its median time.
Hovering a node shows its op, source line, module path and time; each node
also carries an SVG <title>, so a browser without JavaScript shows the same.

Element ids and classes, for tests and scripts: the svg of method `forward`
is `#graph-forward`; a step is `g.node` with id `forward-n<instruction>`
(`forward-n<op index>` from the IR), classes `op`, `delegate`, `control`,
`input` or `output`, and `backend-<id>`; a delegate's op is
`g.cell` with id `<delegate id>-h<debug handle>`; `data-share` holds the
share of the time (0..1) when traced, `data-source` and `data-module` the
source line and module path. Once the script has run, `<body>` carries
`data-script="ran"`.
"""

from __future__ import annotations

import copy
import html
import json
from typing import TYPE_CHECKING

from etmlir.devtools.program_graph import CELL_HEIGHT, CELL_WIDTH, DELEGATE_HEADER, MAX_LABEL, Cell, MethodGraph, \
    Node, ProgramGraph, delegate_header, layout

if TYPE_CHECKING:
    from etmlir.devtools.inspector import Inspector

# Backend colours (stroke, light fill): "portable" is grey; others take the palette in order.
_PORTABLE = ("#5f6368", "#f1f3f4")
_PALETTE = [("#1a73e8", "#e8f0fe"), ("#188038", "#e6f4ea"), ("#a142f4", "#f3e8fd"), ("#e37400", "#fef7e0"),
            ("#12b5cb", "#e4f7fb"), ("#d01884", "#fde7f3"), ("#795548", "#efebe9")]
_KNOWN = {"cpu": 0, "nested": 1}
_MARGIN = 20.0
_CELL_CHARS = 15


def backend_colours(backends: list[str]) -> dict[str, tuple[str, str]]:
    """A (stroke, fill) pair per backend: stable for the known ones, the palette in order for others."""
    colours: dict[str, tuple[str, str]] = {"portable": _PORTABLE}
    used = set()
    for name in backends:
        if name in _KNOWN:
            colours[name] = _PALETTE[_KNOWN[name]]
            used.add(_KNOWN[name])
    free = [i for i in range(len(_PALETTE)) if i not in used]
    for k, name in enumerate(b for b in backends if b not in colours):
        colours[name] = _PALETTE[free[k % len(free)]] if free else _PALETTE[k % len(_PALETTE)]
    return colours


def share_colour(share: float, top: float) -> str:
    """White (no time) to dark red (the largest share in the graph), on a square-root scale."""
    t = 0.0 if top <= 0 else min(1.0, max(0.0, share / top)) ** 0.5
    low, high = (255, 245, 240), (165, 15, 21)
    r, g, b = (round(lo + (hi - lo) * t) for lo, hi in zip(low, high))
    return f"#{r:02x}{g:02x}{b:02x}"


def _cells_timed(node: Node) -> bool:
    """True when the trace timed a delegate's ops one by one (its backend reported them)."""
    return any(c.share is not None for c in node.cells)


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _on_dark(colour: str) -> bool:
    """True when black text would be hard to read on `colour` (#rrggbb)."""
    r, g, b = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
    return 0.299 * r + 0.587 * g + 0.114 * b < 140


def _esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def _cut(label: str, limit: int) -> str:
    return label if len(label) <= limit else label[:limit - 1] + "\u2026"


def _css_class(backend: str) -> str:
    return "backend-" + "".join(c if c.isalnum() or c in "-_" else "_" for c in backend)


def _tooltip(kind: str, label: str, op: str, backend: str, handle: int, location: str, module_path: str,
             detail: str, share: float | None, ms: float | None) -> str:
    lines = [label if kind != "cell" else op]
    if backend and backend != "portable":
        lines.append(f"backend: {backend}")
    if location:
        lines.append(f"source: {location}")
    if module_path:
        lines.append(f"module: {module_path}")
    if handle:
        lines.append(f"debug handle: {handle}")
    if detail:
        lines.append(detail)
    if share is not None:
        timing = f"{100 * share:.1f}% of the time"
        if ms is not None:
            timing += f", {ms:.3f} ms per run"
        lines.append(timing)
    return "\n".join(lines)


def _data(handle: int, location: str, module_path: str, share: float | None) -> str:
    attrs = [f'data-handle="{handle}"'] if handle else []
    if location:
        attrs.append(f'data-source="{_esc(location)}"')
    if module_path:
        attrs.append(f'data-module="{_esc(module_path)}"')
    if share is not None:
        attrs.append(f'data-share="{share:.6f}"')
    return " ".join(attrs)


class _Renderer:
    def __init__(self, graph: ProgramGraph, traced: bool) -> None:
        self.graph = graph
        self.traced = traced
        self.colours = backend_colours(graph.backends)
        # The scale's top: the largest share of one op (a delegate's own share is its ops' sum).
        # A delegate whose backend reported no per-op events is coloured as a whole.
        shares = [n.share for m in graph.methods for n in m.nodes if n.share is not None
                  and (n.kind == "op" or (n.kind == "delegate" and not _cells_timed(n)))]
        shares += [c.share for m in graph.methods for n in m.nodes for c in n.cells if c.share is not None]
        self.top = max(shares, default=0.0)

    def fill(self, share: float | None, backend: str) -> str:
        if self.traced and share is not None:
            return share_colour(share, self.top)
        return self.colours.get(backend, _PORTABLE)[1]

    def method(self, method: MethodGraph) -> str:
        layout(method)
        width, height = method.width + 2 * _MARGIN, method.height + 2 * _MARGIN
        parts = [f'<svg id="graph-{_esc(method.name)}" class="graph" xmlns="http://www.w3.org/2000/svg" '
                 f'width="{width:.0f}" height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" '
                 f'data-width="{width:.0f}" data-height="{height:.0f}" role="img" '
                 f'aria-label="graph of method {_esc(method.name)}">',
                 '<defs><marker id="arrow-' + _esc(method.name) + '" viewBox="0 0 10 10" refX="10" refY="5" '
                 'markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" '
                 'fill="#9aa0a6"/></marker></defs>',
                 f'<g transform="translate({_MARGIN},{_MARGIN})">', '<g class="edges">']
        for a, b in method.edges:
            parts.append(self.edge(method, method.nodes[a], method.nodes[b]))
        parts.append('</g><g class="nodes">')
        for node in method.nodes:
            parts.append(self.node(node))
        parts.append("</g></g></svg>")
        return "\n".join(parts)

    def edge(self, method: MethodGraph, a: Node, b: Node) -> str:
        x1, y1 = a.x + a.width / 2, a.y + a.height
        x2, y2 = b.x + b.width / 2, b.y
        back = "" if b.y > a.y else " back"
        if back:                        # a loop: from a's side back up to b's side
            x1, y1, x2, y2 = a.x + a.width, a.y + a.height / 2, b.x + b.width, b.y + b.height / 2
            bend = max(a.width, b.width) / 2 + 40
            d = f"M{x1:.1f},{y1:.1f} C{x1 + bend:.1f},{y1:.1f} {x2 + bend:.1f},{y2:.1f} {x2:.1f},{y2:.1f}"
        else:
            mid = (y2 - y1) / 2
            d = f"M{x1:.1f},{y1:.1f} C{x1:.1f},{y1 + mid:.1f} {x2:.1f},{y2 - mid:.1f} {x2:.1f},{y2:.1f}"
        return (f'<path class="edge{back}" d="{d}" data-from="{_esc(a.id)}" data-to="{_esc(b.id)}" '
                f'marker-end="url(#arrow-{_esc(method.name)})"/>')

    def node(self, node: Node) -> str:
        stroke, _ = self.colours.get(node.backend, _PORTABLE)
        classes = f"node {node.kind} {_css_class(node.backend)}" if node.backend else f"node {node.kind}"
        tip = _tooltip(node.kind, node.label, node.label, node.backend, node.handle, node.location,
                       node.module_path, node.detail, node.share, node.ms)
        head = (f'<g id="{_esc(node.id)}" class="{classes}" transform="translate({node.x:.1f},{node.y:.1f})" '
                f'{_data(node.handle, node.location, node.module_path, node.share)} '
                f'data-tip="{_esc(tip)}"><title>{_esc(tip)}</title>')
        label = _esc(_cut(node.label, MAX_LABEL))
        fill = "#ffffff"
        if node.kind == "delegate":
            box = self.colours.get(node.backend, _PORTABLE)[1] if _cells_timed(node) or node.share is None \
                else self.fill(node.share, node.backend)
            body = [f'<rect class="box" width="{node.width:.1f}" height="{node.height:.1f}" rx="6" '
                    f'fill="{box}" stroke="{stroke}" stroke-width="2"/>',
                    f'<rect class="header" width="{node.width:.1f}" height="{DELEGATE_HEADER - 4:.1f}" rx="6" '
                    f'fill="{stroke}"/>',
                    f'<text class="header-label" x="8" y="{DELEGATE_HEADER - 9:.1f}">'
                    f'{_esc(delegate_header(node))}</text>']
            body.extend(self.cell(node, cell) for cell in node.cells)
            return head + "".join(body) + "</g>"
        if node.kind in ("input", "output"):
            shape = (f'<rect width="{node.width:.1f}" height="{node.height:.1f}" rx="{node.height / 2:.1f}" '
                     f'fill="#fef7e0" stroke="#b06000"/>')
        elif node.kind == "control":
            shape = (f'<rect width="{node.width:.1f}" height="{node.height:.1f}" rx="2" fill="#ffffff" '
                     f'stroke="#9aa0a6" stroke-dasharray="4 2"/>')
        else:
            fill = self.fill(node.share, node.backend)
            shape = (f'<rect width="{node.width:.1f}" height="{node.height:.1f}" rx="4" fill="{fill}" '
                     f'stroke="{stroke}" stroke-width="{1.5 if node.backend == "portable" else 2.5}"/>')
        dark = ' class="on-dark"' if node.kind == "op" and _on_dark(fill) else ""
        text = (f'<text{dark} x="{node.width / 2:.1f}" y="{node.height / 2 + 4:.1f}" text-anchor="middle">'
                f'{label}</text>')
        return head + shape + text + "</g>"

    def cell(self, node: Node, cell: Cell) -> str:
        stroke, _ = self.colours.get(node.backend, _PORTABLE)
        tip = _tooltip("cell", cell.op.op, cell.op.op, node.backend, cell.op.handle, cell.op.location,
                       cell.op.module_path, f"in {node.label}", cell.share, cell.ms)
        name = cell.op.op[5:] if cell.op.op.startswith("edge.") else cell.op.op
        fill = self.fill(cell.share, node.backend)
        dark = ' class="on-dark"' if _on_dark(fill) else ""
        return (f'<g id="{_esc(cell.id)}" class="cell op {_css_class(node.backend)}" '
                f'transform="translate({cell.x:.1f},{cell.y:.1f})" '
                f'{_data(cell.op.handle, cell.op.location, cell.op.module_path, cell.share)} '
                f'data-tip="{_esc(tip)}"><title>{_esc(tip)}</title>'
                f'<rect width="{CELL_WIDTH:.1f}" height="{CELL_HEIGHT:.1f}" rx="3" fill="{fill}" stroke="{stroke}"/>'
                f'<text{dark} x="5" y="{CELL_HEIGHT / 2 + 4:.1f}">{_esc(_cut(name, _CELL_CHARS))}</text></g>')

    def legend(self) -> str:
        items = []
        for backend in self.graph.backends:
            stroke, fill = self.colours[backend]
            what = "portable kernels" if backend == "portable" else f"delegate: {backend}"
            items.append(f'<span class="swatch {_css_class(backend)}" style="background:{fill};border-color:'
                         f'{stroke}"></span>{_esc(what)}')
        if self.traced:
            stops = ", ".join(share_colour(self.top * (k / 8) ** 2, self.top) for k in range(9))
            items.append(f'<span class="ramp" style="background:linear-gradient(to right, {stops})"></span>'
                         f'time share: 0% to {100 * self.top:.1f}%')
        return '<div id="legend">' + "".join(f'<span class="item">{i}</span>' for i in items) + "</div>"


_STYLE = """
body { font: 13px/1.4 system-ui, sans-serif; margin: 0; color: #202124; background: #fff; }
header { position: sticky; top: 0; background: #fff; border-bottom: 1px solid #dadce0; padding: 8px 16px; z-index: 2; }
h1 { font-size: 16px; margin: 0 0 4px; }
h2 { font-size: 14px; margin: 12px 16px 4px; }
#summary { color: #5f6368; white-space: pre-wrap; }
#legend .item { margin-right: 16px; white-space: nowrap; display: inline-block; }
.swatch { display: inline-block; width: 14px; height: 14px; border: 2px solid; border-radius: 3px;
          vertical-align: -3px; margin-right: 4px; }
.ramp { display: inline-block; width: 120px; height: 12px; vertical-align: -2px; margin-right: 4px;
        border: 1px solid #dadce0; }
#controls { margin-top: 4px; }
#controls input { width: 260px; }
.method { overflow: auto; padding: 0 16px 16px; }
svg.graph text { font: 12px ui-monospace, monospace; fill: #202124; pointer-events: none; }
svg.graph text.header-label, svg.graph text.on-dark { fill: #fff; }
svg.graph text.header-label { font-weight: bold; }
svg.graph .edge { fill: none; stroke: #9aa0a6; stroke-width: 1.2; opacity: 0.8; }
svg.graph .edge.back { stroke-dasharray: 5 3; }
svg.graph .node, svg.graph .cell { cursor: default; }
svg.graph .node:hover > rect, svg.graph .cell:hover > rect { stroke: #000; }
svg.graph .match > rect { stroke: #fbbc04 !important; stroke-width: 4 !important; }
#tip { position: fixed; display: none; max-width: 480px; background: #202124; color: #fff; padding: 6px 8px;
       border-radius: 4px; white-space: pre-wrap; font: 12px ui-monospace, monospace; z-index: 3;
       pointer-events: none; }
"""

_SCRIPT = """
(function () {
  var tip = document.getElementById('tip');
  document.addEventListener('mousemove', function (e) {
    var g = e.target.closest ? e.target.closest('[data-tip]') : null;
    if (!g) { tip.style.display = 'none'; return; }
    tip.textContent = g.getAttribute('data-tip');
    tip.style.display = 'block';
    tip.style.left = Math.min(e.clientX + 14, window.innerWidth - tip.offsetWidth - 8) + 'px';
    tip.style.top = Math.min(e.clientY + 14, window.innerHeight - tip.offsetHeight - 8) + 'px';
  });
  var search = document.getElementById('search');
  var count = document.getElementById('matches');
  search.addEventListener('input', function () {
    var q = search.value.trim().toLowerCase(), n = 0, first = null;
    document.querySelectorAll('[data-tip]').forEach(function (g) {
      var hit = q !== '' && g.getAttribute('data-tip').toLowerCase().indexOf(q) >= 0;
      g.classList.toggle('match', hit);
      if (hit) { n += 1; if (!first) first = g; }
    });
    count.textContent = q === '' ? '' : n + ' found';
    if (first) first.scrollIntoView({block: 'center', inline: 'center'});
  });
  var scale = 1;
  function zoom(factor) {
    scale = factor === 0 ? 1 : Math.max(0.05, Math.min(4, scale * factor));
    document.querySelectorAll('svg.graph').forEach(function (svg) {
      svg.setAttribute('width', svg.getAttribute('data-width') * scale);
      svg.setAttribute('height', svg.getAttribute('data-height') * scale);
    });
  }
  document.getElementById('zoom-in').onclick = function () { zoom(1.25); };
  document.getElementById('zoom-out').onclick = function () { zoom(0.8); };
  document.getElementById('zoom-reset').onclick = function () { zoom(0); };
  document.body.setAttribute('data-script', 'ran');
})();
"""


def render_html(graph: ProgramGraph, inspector: Inspector | None = None, summary: str = "") -> str:
    """The page for `graph`; with `inspector` (a trace joined with the same program), ops are
    coloured by their share of the traced time. `summary` is shown under the title."""
    graph = copy.deepcopy(graph)        # the caller's graph (a DelegationInfo's) keeps no shares or positions
    if inspector is not None:
        inspector.annotate(graph)
    renderer = _Renderer(graph, traced=inspector is not None)
    lines = [summary] if summary else []
    ops = sum(1 for m in graph.methods for n in m.nodes if n.kind == "op")
    delegates = [n for m in graph.methods for n in m.nodes if n.kind == "delegate"]
    cells = sum(len(n.cells) for n in delegates)
    lines.append(f"{_plural(len(graph.methods), 'method')}: {_plural(ops, 'op')} on the portable kernels, "
                 f"{_plural(len(delegates), 'delegate call')} covering {_plural(cells, 'op')}")
    if inspector is not None:
        lines.append(inspector.summary_line())
    sections = []
    for method in graph.methods:
        sections.append(f'<section class="method-section"><h2>method {_esc(method.name)}</h2>'
                        f'<div class="method">{renderer.method(method)}</div></section>')
    title = _esc(graph.title)
    meta = json.dumps({"nodes": graph.num_nodes, "backends": graph.backends, "traced": inspector is not None})
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{title}</title>", f"<style>{_STYLE}</style></head>",
        f"<body data-graph='{_esc(meta)}'><header><h1>{title}</h1>",
        f'<div id="summary">{_esc(chr(10).join(lines))}</div>', renderer.legend(),
        '<div id="controls"><input id="search" type="search" placeholder="find an op, source line or module">'
        ' <span id="matches"></span> <button id="zoom-out" type="button">\u2212</button>'
        '<button id="zoom-reset" type="button">100%</button><button id="zoom-in" type="button">+</button></div>',
        "</header>", *sections, '<div id="tip"></div>', f"<script>{_SCRIPT}</script>", "</body></html>", ""])
