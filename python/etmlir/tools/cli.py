"""One way for every Python tool to fail: a clear message and an exit status, never a traceback.

Each console script (`et-opt`, `et-inspect`, `etmlir-demo`, `et-sign`) wraps its `main` with
`run_tool`, so a failure the tool did not foresee still ends as one line:

    $ et-inspect broken.pte
    et-inspect: internal error: IndexError: list index out of range (at et_inspect.py:120 in _method)
      this is a bug in etmlir; please report it with the command line and the input file
      (run with ETMLIR_DEBUG=1 or --debug for the traceback)

Foreseen failures raise `ToolError` (bad input: exit 1, "error: ..."); anything else is a
bug (exit 2, "internal error: ..."). Ctrl-C exits 130 and a closed pipe (`| head`) exits
quietly, as command-line tools do. The traceback is printed only on request, because a
traceback shows the tool's insides where the user needs what went wrong and where.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable, Sequence

EXIT_ERROR = 1
EXIT_INTERNAL = 2
EXIT_INTERRUPTED = 130


class ToolError(Exception):
    """A failure caused by the input or the environment, with a message that says what and where."""


def debug_requested(argv: Sequence[str] | None) -> bool:
    """Whether the user asked for tracebacks (`ETMLIR_DEBUG=1` or a `--debug` argument)."""
    if os.environ.get("ETMLIR_DEBUG", "") not in ("", "0"):
        return True
    return "--debug" in (sys.argv[1:] if argv is None else argv)


def _where(exc: BaseException) -> str:
    """The innermost frame inside etmlir that raised `exc` ("file.py:12 in func"), or ""."""
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if f"{os.sep}etmlir{os.sep}" in f.filename] or frames
    if not ours:
        return ""
    frame = ours[-1]
    return f" (at {os.path.basename(frame.filename)}:{frame.lineno} in {frame.name})"


def _message(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def _quiet_stdout() -> None:
    """After a broken pipe, point stdout at /dev/null so the interpreter's final flush stays quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def run_tool(prog: str, main: Callable[[Sequence[str] | None], int],
             argv: Sequence[str] | None = None) -> int:
    """Run `main(argv)` and turn every failure into one message on stderr and an exit status."""
    debug = debug_requested(argv)
    try:
        return main(argv)
    except SystemExit:  # argparse's own usage errors (exit 2) and --help (exit 0)
        raise
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_ERROR
    except ToolError as exc:
        if debug:
            raise
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except MemoryError as exc:
        if debug:
            raise
        print(f"{prog}: error: out of memory{_where(exc)}", file=sys.stderr)
        return EXIT_ERROR
    except RecursionError as exc:
        if debug:
            raise
        print(f"{prog}: error: input nested too deeply to process{_where(exc)}", file=sys.stderr)
        return EXIT_ERROR
    except Exception as exc:  # noqa: BLE001 - the whole point: no traceback for a bug either
        if debug:
            raise
        print(f"{prog}: internal error: {_message(exc)}{_where(exc)}\n"
              f"  this is a bug in etmlir; please report it with the command line and the input file\n"
              f"  (run with ETMLIR_DEBUG=1 or --debug for the traceback)", file=sys.stderr)
        return EXIT_INTERNAL
