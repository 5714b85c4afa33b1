"""The package's layers, checked by walking every import in its source (no module is imported).

Layers, lowest first; a module may import its own layer and the ones below:

    dialects, schema, payload_schema, trace_schema, vulkan_schema,    IR names, generated code, the native extension
    lazy, _runtime, compile_progress                   (compile_progress: the progress bars every stage draws)
    delegation                                         the Backend interface, registry, partitioner
    frontend, executable, passes, program, runtime     the compiler core: op tables, the passes,
                                                       serialization, the Program classes, the
                                                       runtime's Python API
    backends                                           lowering, the backends (they run the passes)
    edge_program, executorch_program, etmlir           the Python lowering API
    models, devtools                                   what users and developers run
    tools                                              the command-line tools

Every import counts, including one inside a function: an import moved into a
function to dodge a cycle is still a cycle. Backends are found by name at run
time (`etmlir.delegation.backend.get_backend`), which is not an import.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "etmlir"

# Top-level package or module of etmlir -> layer rank.
LAYERS: dict[str, int] = {
    "dialects": 0, "schema": 0, "payload_schema": 0, "trace_schema": 0, "vulkan_schema": 0, "lazy": 0, "_runtime": 0,
    "compile_progress": 0,
    "delegation": 1,
    "frontend": 3, "executable": 3, "passes": 3, "program": 3, "runtime": 3,
    "backends": 4,
    "edge_program": 5, "executorch_program": 5, "__init__": 5,
    "models": 6, "devtools": 6,
    "tools": 7,
}


def _unit(module: str) -> str:
    """`etmlir.passes.plan_memory` -> `passes`; `etmlir` -> `__init__`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[str, int]]:
    """(imported etmlir module, line) for every import statement in the file, anywhere in it."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names if alias.name.split(".")[0] == "etmlir"]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            if base.split(".")[0] != "etmlir" or _is_type_checking_only(tree, node):
                continue
            if base == "etmlir":  # from etmlir import runtime: the submodule (or a name of the API layer)
                found += [(f"etmlir.{alias.name}", node.lineno) for alias in node.names]
            else:
                found.append((base, node.lineno))
    return found


def _is_type_checking_only(tree: ast.Module, target: ast.AST) -> bool:
    """An import under `if TYPE_CHECKING:` runs only for type checkers."""
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            if any(child is target for stmt in node.body for child in ast.walk(stmt)):
                return True
    return False


def _all_imports() -> list[tuple[str, str, int]]:
    edges = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if "schema" in path.parts[len(PACKAGE.parts):][:1] or {"payload_schema", "trace_schema", "vulkan_schema"} & set(path.parts):
            continue
        source = _module_name(path)
        edges += [(source, target, line) for target, line in _imports(path)]
    return edges


def test_every_import_goes_down_the_layers() -> None:
    problems = []
    for source, target, line in _all_imports():
        a, b = _unit(source), _unit(target)
        if a == b:
            continue
        if a not in LAYERS or b not in LAYERS:
            problems.append(f"{source}:{line} imports {target}: add '{a if a not in LAYERS else b}' to LAYERS")
        elif LAYERS[b] > LAYERS[a]:
            problems.append(f"{source}:{line} imports {target}, a higher layer ({b} above {a})")
    assert not problems, "layering violations:\n  " + "\n  ".join(problems)


def test_no_production_module_imports_devtools_or_tools() -> None:
    offenders = [f"{source}:{line} imports {target}" for source, target, line in _all_imports()
                 if _unit(target) in ("devtools", "tools") and _unit(source) not in ("devtools", "tools")]
    assert not offenders, "\n".join(offenders)


def test_no_cycle_between_passes_backends_delegation_and_devtools() -> None:
    """Package-level: no two of these import each other (in any direction, through any module)."""
    units = ("passes", "backends", "delegation", "devtools")
    graph: dict[str, set[str]] = {u: set() for u in units}
    for source, target, _ in _all_imports():
        a, b = _unit(source), _unit(target)
        if a in units and b in units and a != b:
            graph[a].add(b)

    def reaches(start: str, goal: str, seen: frozenset[str] = frozenset()) -> bool:
        return any(n == goal or (n not in seen and reaches(n, goal, seen | {n})) for n in graph[start])

    cycles = [u for u in units if reaches(u, u)]
    assert not cycles, f"import cycle through {cycles}: {graph}"


def test_the_walk_sees_function_level_imports() -> None:
    """The checker itself: an import inside a function is an edge too."""
    edges = {(s, t) for s, t, _ in _all_imports()}
    # etmlir.backends.cpu imports its compiler (pipeline.py) only inside preprocess().
    assert ("etmlir.backends.cpu", "etmlir.backends.cpu") in edges


@pytest.mark.parametrize("statement", ["import etmlir.passes", "import etmlir.backends",
                                       "import etmlir.passes; etmlir.passes.all_passes()"])
def test_start_up_imports_neither_torch_nor_a_backend_compiler(statement: str) -> None:
    """What `et-opt --list-passes` and a lit RUN line pay for: no torch, no MLIR JIT of a backend."""
    code = (f"import sys; {statement}; "
            "heavy = [m for m in ('torch', 'etmlir.backends.cpu.pipeline', 'torch_mlir.execution_engine') "
            "if m in sys.modules]; print(','.join(heavy))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "", f"{statement} imported {result.stdout.strip()}"
