"""Every code example in README.md runs as written.

The fenced ```python blocks, and the ```sh blocks that call etmlir's tools
(et-opt, et-run, et-inspect, et-verify-pte), run in README order in one
temporary directory, so a block finds the files earlier ones wrote
(`model.pte`, `inputs.npz`). The python blocks of one section (`## ...`)
share a namespace; no name crosses a section boundary, so each section's
examples stand on their own. Shell blocks run under `bash -e` with this
environment's tools first on PATH. Blocks with no etmlir tool in them
(`make demo`) are not run here.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
TOOLS = ("et-opt", "et-run", "et-inspect", "et-verify-pte")
SHELL_LANGUAGES = ("sh", "shell", "bash")
FENCE = re.compile(r"^```(\w*)\s*$")


@dataclasses.dataclass(frozen=True)
class Block:
    language: str
    code: str
    line: int      # README line of the block's first code line
    section: str   # the `## ` heading above it

    @property
    def where(self) -> str:
        return f"README.md:{self.line} ({self.section})"

    @property
    def calls_tools(self) -> bool:
        commands = (line.split("#", 1)[0].split() for line in self.code.splitlines())
        return any(words and words[0] in TOOLS for words in commands)


def readme_blocks(text: str) -> list[Block]:
    """The fenced code blocks of `text`, in order."""
    blocks: list[Block] = []
    section, language, start, body = "", None, 0, []
    for number, line in enumerate(text.splitlines(), start=1):
        fence = FENCE.match(line)
        if language is None:
            if fence:
                language, start, body = fence.group(1), number + 1, []
            elif line.startswith("## "):
                section = line[3:].strip()
        elif line.startswith("```"):
            blocks.append(Block(language, "\n".join(body) + "\n", start, section))
            language = None
        else:
            body.append(line)
    assert language is None, f"README.md:{start}: unterminated code block"
    return blocks


def runnable(blocks: list[Block]) -> list[Block]:
    return [b for b in blocks if b.language == "python" or (b.language in SHELL_LANGUAGES and b.calls_tools)]


def run_python(block: Block, namespace: dict) -> None:
    # Padded so tracebacks name the README line.
    code = compile("\n" * (block.line - 1) + block.code, str(README), "exec")
    exec(code, namespace)


def run_shell(block: Block, cwd: Path) -> None:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    result = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block.code], cwd=cwd, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, (f"{block.where}: exit code {result.returncode}\n{block.code}"
                                    f"--- stdout (tail) ---\n{result.stdout[-3000:]}"
                                    f"--- stderr (tail) ---\n{result.stderr[-3000:]}")


def test_readme_blocks_are_found():
    blocks = readme_blocks(README.read_text())
    languages = {b.language for b in blocks}
    assert languages <= {"python", *SHELL_LANGUAGES}, f"code blocks in languages this test cannot run: {languages}"
    skipped = [b for b in blocks if b not in runnable(blocks)]
    # Only setup commands (make ...) are left out; every etmlir tool and python example runs.
    assert all(line.split()[0] == "make" for b in skipped for line in b.code.splitlines() if line.strip()), \
        [b.where for b in skipped]
    assert sum(b.language == "python" for b in blocks) >= 3


def test_readme_examples_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespaces: dict[str, dict] = {}
    for block in runnable(readme_blocks(README.read_text())):
        if block.language == "python":
            namespace = namespaces.setdefault(block.section, {"__name__": "__readme__"})
            try:
                run_python(block, namespace)
            except Exception as exc:
                pytest.fail(f"{block.where}: {type(exc).__name__}: {exc}"[:6000])
        else:
            run_shell(block, tmp_path)
