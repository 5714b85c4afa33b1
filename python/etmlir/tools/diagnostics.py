"""Collect MLIR diagnostics, print them like mlir-opt, and check `expected-*` annotations.

Diagnostics carry MLIR locations. Input parsed from text has locations
`"-":line:col` (the Python bindings cannot name the buffer); the driver pads
each split chunk so line numbers are those of the original file, and prints
them with the real file name.
"""

from __future__ import annotations

import dataclasses
import re

from torch_mlir import ir

from etmlir.frontend.locations import file_locations, is_library_file

_SEVERITY = {
    "DiagnosticSeverity.ERROR": "error", "DiagnosticSeverity.WARNING": "warning",
    "DiagnosticSeverity.NOTE": "note", "DiagnosticSeverity.REMARK": "remark",
}
_EXPECTED_RE = re.compile(
    r"expected-(error|warning|note|remark)\s*(?:@([+-]\d+|above|below|unknown))?\s*\{\{(.*?)\}\}")


@dataclasses.dataclass(frozen=True)
class Diagnostic:
    severity: str  # error, warning, note, remark
    message: str
    file: str | None  # None for locations with no file
    line: int = 0
    col: int = 0

    def render(self, input_name: str) -> str:
        if self.file is None:
            where = "<unknown>"
        else:
            where = f"{input_name if self.file == '-' else self.file}:{self.line}:{self.col}"
        # Messages that name a source line of the parsed buffer ("at -:12") name the input too.
        message = re.sub(r"(?<![\w./-])-:(?=\d)", f"{input_name}:", self.message)
        return f"{where}: {self.severity}: {message}"


def from_mlir(severity: object, location: ir.Location | str, message: str) -> Diagnostic:
    files = file_locations(location)
    kind = _SEVERITY.get(str(severity), "error")
    if not files:
        return Diagnostic(kind, message, None)
    # A callsite location lists the callee first; the innermost user frame is the most useful.
    user = [f for f in files if not is_library_file(f[0])]
    file, line, col = user[0] if user else files[0]
    return Diagnostic(kind, message, file, line, col)


class Collector:
    """A context diagnostic handler that records everything (notes flattened after their parent)."""

    def __init__(self, context: ir.Context) -> None:
        self.diagnostics: list[Diagnostic] = []
        self._handle = context.attach_diagnostic_handler(self._on_diagnostic)

    def _on_diagnostic(self, diagnostic: ir.Diagnostic) -> bool:
        self.add(diagnostic)
        return True

    def add(self, diagnostic: ir.Diagnostic | ir.DiagnosticInfo) -> None:
        self.diagnostics.append(from_mlir(diagnostic.severity, diagnostic.location, diagnostic.message))
        for note in diagnostic.notes:
            self.add(note)

    def add_error(self, error: ir.MLIRError) -> None:
        """Diagnostics carried by an exception (parser and pass-manager errors), without duplicates."""
        seen = set(self.diagnostics)
        for info in error.error_diagnostics:
            before = len(self.diagnostics)
            self.add(info)
            self.diagnostics[before:] = [d for d in self.diagnostics[before:] if d not in seen]
        if not error.error_diagnostics and not self.diagnostics:
            self.diagnostics.append(Diagnostic("error", str(error), None))

    def detach(self) -> None:
        self._handle.detach()


@dataclasses.dataclass
class Expectation:
    severity: str
    line: int | None  # None: @unknown
    text: str
    found: bool = False


def parse_expectations(chunk: str, first_line: int) -> list[Expectation]:
    """`// expected-error @+1 {{...}}` annotations in `chunk`, whose first line is `first_line`."""
    lines = chunk.splitlines()
    expectations = []
    for index, text in enumerate(lines):
        for match in _EXPECTED_RE.finditer(text):
            severity, offset, message = match.groups()
            line: int | None = first_line + index
            if offset == "unknown":
                line = None
            elif offset == "above":
                line -= 1
            elif offset == "below":
                line += 1
            elif offset:
                line += int(offset)
            expectations.append(Expectation(severity, line, message))
    return expectations


def verify(diagnostics: list[Diagnostic], expectations: list[Expectation], input_name: str) -> list[str]:
    """Errors (as printable lines) for unexpected diagnostics and unmet expectations."""
    problems = []
    for diagnostic in diagnostics:
        line = None if diagnostic.file is None else diagnostic.line if diagnostic.file == "-" else -1
        match = next((e for e in expectations if not e.found and e.severity == diagnostic.severity
                      and e.line == line and e.text in diagnostic.message), None)
        if match is None:
            match = next((e for e in expectations if e.severity == diagnostic.severity
                          and e.line == line and e.text in diagnostic.message), None)
        if match is None:
            problems.append(f"{diagnostic.render(input_name)}  [unexpected {diagnostic.severity}]")
        else:
            match.found = True
    for expectation in expectations:
        if not expectation.found:
            where = f"{input_name}:{expectation.line}" if expectation.line is not None else input_name
            problems.append(f"{where}: error: expected {expectation.severity} "
                            f"\"{expectation.text}\" was not produced")
    return problems
