"""Progress bars for long compiles, on the terminal only.

Compiling a large model takes a while (nanoGPT delegated to the `cpu` backend:
about 35 s, most of it in the backend's preprocess), so each stage of the flow
shows a bar on stderr while it runs:

    etmlir export          2/2 |██████████| 00:02 import
    etmlir to_edge         7/7 |██████████| 00:03 et-assign-debug-handles
    etmlir to_backend      3/3 |██████████| 00:31 preprocess 12 delegates
    etmlir to_executorch   5/5 |██████████| 00:01 serialize

and a nested bar counts the delegates during preprocess, naming the one being
compiled with its backend and op count (`cpu_3 (cpu, 48 ops)`).

Bars go to stderr, never stdout, and only when stderr is a terminal. They are
off when `ETMLIR_PROGRESS=0` is set, and inside `etmlir.progress(False)`:

    with etmlir.progress(False):       # a script or tool that compiles many programs quietly
        et = etmlir.to_edge(etmlir.export(model, args)).to_executorch()

One context manager rather than a `progress=` keyword on each of export,
to_edge, to_backend and to_executorch: it covers a whole compile (and tools
that compile many programs, such as `etmlir.devtools.compare`) in one place.

Code that runs a stage opens it with `stage(name, total)`; when bars are off
it gets a stage that does nothing, so the compile paths are the same.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import sys
import threading
from collections.abc import Iterator

# Set by `progress(...)`: False silences bars in this context (thread or task), True allows them again.
_ALLOWED: contextvars.ContextVar[bool] = contextvars.ContextVar("etmlir_progress_allowed", default=True)
# The bars open in this context, outermost first (a nested stage draws below its parent), and the
# thread that redraws them.
_OPEN: contextvars.ContextVar[tuple[tuple["_Bar", ...], "_Redrawer | None"]] = contextvars.ContextVar(
    "etmlir_progress_open", default=((), None))

ENVIRONMENT_VARIABLE = "ETMLIR_PROGRESS"
_DESCRIPTION_WIDTH = 22  # "etmlir to_executorch" and a margin: the bars of a compile line up
# How often an open bar redraws on its own, so that its clock moves during a long step (seconds).
_REFRESH_S = 1.0


@contextlib.contextmanager
def progress(enabled: bool = True) -> Iterator[None]:
    """`with etmlir.progress(False):` compiles without progress bars (`True` allows them again inside).

    Bars are shown only when stderr is a terminal and `ETMLIR_PROGRESS` is not `0`; this
    context manager can turn them off, never force them onto a file or pipe.
    """
    token = _ALLOWED.set(bool(enabled))
    try:
        yield
    finally:
        _ALLOWED.reset(token)


def enabled() -> bool:
    """Whether a stage opened now shows a bar: allowed here, not `ETMLIR_PROGRESS=0`, stderr a terminal."""
    if not _ALLOWED.get() or os.environ.get(ENVIRONMENT_VARIABLE, "").strip() == "0":
        return False
    isatty = getattr(sys.stderr, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False


class Stage:
    """A stage with no bar (progress off): the interface every stage has, doing nothing."""

    def status(self, text: str) -> None:
        """Say what the stage is doing now (shown after the bar)."""

    def advance(self, steps: int = 1) -> None:
        """Count `steps` of the stage's total as done."""

    def done(self, summary: str) -> None:
        """What the finished bar says (else it shows none of the statuses: they named steps)."""


class _Bar(Stage):
    """A stage drawn as a tqdm bar on stderr (nested stages below their parent, removed when done)."""

    def __init__(self, name: str, total: int | None, depth: int) -> None:
        from tqdm import tqdm  # only when a bar is drawn: quiet compiles do not import it

        label = ("  " * depth + ("etmlir " if depth == 0 else "") + name).ljust(_DESCRIPTION_WIDTH)
        self._tqdm = tqdm(total=total, desc=label, file=sys.stderr, leave=depth == 0, position=depth,
                          dynamic_ncols=True, mininterval=0.1,
                          bar_format="{desc} {n_fmt}/{total_fmt} |{bar:24}| {elapsed}{postfix}")
        self.summary = ""

    def status(self, text: str) -> None:
        self._tqdm.set_postfix_str(text, refresh=True)

    def advance(self, steps: int = 1) -> None:
        self._tqdm.update(steps)

    def done(self, summary: str) -> None:
        self.summary = summary

    def refresh(self) -> None:
        self._tqdm.refresh()

    def close(self) -> None:
        self._tqdm.close()


class _Redrawer:
    """A thread that redraws the open bars every `_REFRESH_S`, so that their clocks move during a
    long step (one backend preprocess can take many seconds); one per outermost bar."""

    def __init__(self) -> None:
        self.bars: list[_Bar] = []
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="etmlir-progress", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopped.wait(_REFRESH_S):
            for bar in list(self.bars):
                bar.refresh()

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join()


@contextlib.contextmanager
def stage(name: str, total: int | None = None) -> Iterator[Stage]:
    """Open a stage of `total` steps: a bar on a terminal, else a stage that does nothing.

        with stage("to_edge", total=len(passes)) as bar:
            for element in passes:
                bar.status(element.name)
                ...
                bar.advance()
    """
    if not enabled():
        yield Stage()
        return
    open_bars, redrawer = _OPEN.get()
    owner = redrawer is None
    if owner:
        redrawer = _Redrawer()
    bar = _Bar(name, total, len(open_bars))
    redrawer.bars.append(bar)
    token = _OPEN.set((open_bars + (bar,), redrawer))
    try:
        yield bar
        bar.status(bar.summary)  # finished: the last step's name would read as still running
    finally:
        _OPEN.reset(token)
        redrawer.bars.remove(bar)
        if owner:
            redrawer.stop()
        bar.close()


def status(text: str) -> None:
    """Say what is running now on the innermost open bar (nothing when no bar is open)."""
    open_bars, _ = _OPEN.get()
    if open_bars:
        open_bars[-1].status(text)
