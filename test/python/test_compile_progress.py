"""Progress bars of a compile: on a terminal's stderr only, never on stdout, off when asked.

The terminal is a pseudo-terminal (pty): a child process compiles a small model with its stderr
on the pty and its stdout on a pipe, so the test sees exactly what each stream received.
"""

from __future__ import annotations

import fcntl
import io
import os
import pty
import re
import struct
import subprocess
import sys
import termios
import textwrap
from pathlib import Path

import pytest
import torch

import etmlir
from etmlir import backends, compile_progress

# Compiles the same model three times: bars allowed, inside etmlir.progress(False), and with
# ETMLIR_PROGRESS=0. Markers on stderr separate the phases; stdout gets the delegates' op counts.
CHILD = textwrap.dedent('''
    import os, sys
    import torch
    import etmlir
    from etmlir import backends
    from etmlir.passes.assign_debug_handles import debug_handles
    from etmlir.passes.preprocess_delegates import delegate_modules

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 8), torch.nn.Tanh(),
                                torch.nn.Linear(8, 4)).eval()
    x = torch.randn(2, 8)

    def compile_once():
        edge = etmlir.to_edge(etmlir.export(model, (x,)))
        edge = edge.to_backend(backends.partitioner("nested", skip_ops=["edge.tanh"]))
        edge.to_executorch()
        return edge

    for phase in ("allowed", "progress(False)", "ETMLIR_PROGRESS=0"):
        print(f"<<{phase}>>", file=sys.stderr, flush=True)
        if phase == "progress(False)":
            with etmlir.progress(False):
                edge = compile_once()
        else:
            if phase == "ETMLIR_PROGRESS=0":
                os.environ["ETMLIR_PROGRESS"] = "0"
            edge = compile_once()
    print("<<end>>", file=sys.stderr, flush=True)
    for nested in delegate_modules(edge.module.operation):
        print(f"delegate {nested.attributes['sym_name'].value} {len(debug_handles(nested))}")
''')


def _run_on_a_terminal(script: Path) -> tuple[str, str]:
    """(what stderr showed on a 120x40 pseudo-terminal, what stdout wrote to a pipe)."""
    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    env = {k: v for k, v in os.environ.items() if k != compile_progress.ENVIRONMENT_VARIABLE}
    child = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=terminal,
                             stdin=subprocess.DEVNULL, env={**env, "OMP_NUM_THREADS": "1"})
    os.close(terminal)
    shown = bytearray()
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not chunk:
            break
        shown += chunk
    stdout = child.stdout.read().decode()
    assert child.wait(timeout=300) == 0, shown.decode(errors="replace")[-3000:]
    os.close(controller)
    return shown.decode(errors="replace"), stdout


@pytest.fixture(scope="module")
def terminal_run(tmp_path_factory) -> tuple[dict[str, str], str]:
    """({phase: what the terminal showed during it}, stdout)."""
    script = tmp_path_factory.mktemp("progress") / "compile.py"
    script.write_text(CHILD)
    shown, stdout = _run_on_a_terminal(script)
    parts = re.split(r"<<([^>]+)>>", shown)
    return dict(zip(parts[1::2], parts[2::2])), stdout


def test_a_terminal_shows_a_bar_per_stage_and_per_delegate(terminal_run):
    phases, stdout = terminal_run
    shown = phases["allowed"]
    for stage, steps in (("export", 2), ("to_edge", 7), ("to_backend", 3), ("to_executorch", 5)):
        assert re.search(rf"etmlir {stage} +{steps}/{steps} \|█+\|", shown), stage
    delegates = re.findall(r"^delegate (\S+) (\d+)$", stdout, re.M)
    assert len(delegates) == 2  # the tanh splits the chain in two
    assert re.search(rf"preprocess +{len(delegates)}/{len(delegates)} \|", shown)
    for name, ops in delegates:
        assert f"{name} (nested, {ops} ops)" in shown
    assert re.search(r"to_backend .*2 delegates \(nested, \d+ ops\)", shown)
    assert "et-to-edge" in shown and "serialize" in shown  # the step running is named


def test_bars_never_reach_stdout(terminal_run):
    _, stdout = terminal_run
    assert "\r" not in stdout and "etmlir" not in stdout and "█" not in stdout
    assert stdout.splitlines()[0].startswith("delegate ")


@pytest.mark.parametrize("phase", ["progress(False)", "ETMLIR_PROGRESS=0"])
def test_bars_are_off_when_asked_even_on_a_terminal(terminal_run, phase):
    phases, _ = terminal_run
    shown = phases[phase]  # a terminal turns "\n" into "\r\n"; a bar redraws with a lone "\r"
    assert "etmlir" not in shown and "█" not in shown and not re.search(r"\r(?!\n)", shown), shown[:500]


def test_no_bars_when_stderr_is_not_a_terminal(capfd):
    """Under pytest stderr is a pipe: a compile writes nothing to either stream."""
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()).eval()
    x = torch.randn(1, 4)
    capfd.readouterr()
    etmlir.to_edge(etmlir.export(model, (x,))).to_backend(backends.partitioner("nested")).to_executorch()
    out, err = capfd.readouterr()
    assert out == "" and "etmlir" not in err and "\r" not in err, err


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_context_and_environment_decide_with_the_terminal(monkeypatch):
    monkeypatch.delenv(compile_progress.ENVIRONMENT_VARIABLE, raising=False)
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert not compile_progress.enabled()  # not a terminal: progress(True) does not force bars
    with etmlir.progress(True):
        assert not compile_progress.enabled()
    monkeypatch.setattr(sys, "stderr", _Terminal())
    assert compile_progress.enabled()
    with etmlir.progress(False):
        assert not compile_progress.enabled()
        with etmlir.progress(True):
            assert compile_progress.enabled()
        assert not compile_progress.enabled()
    assert compile_progress.enabled()
    monkeypatch.setenv(compile_progress.ENVIRONMENT_VARIABLE, "0")
    assert not compile_progress.enabled()
