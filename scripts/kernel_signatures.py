#!/usr/bin/env python3
"""Check (or --fix) the signature strings of ET_REGISTER_KERNEL calls against PyTorch's schemas.

    .venv/bin/python scripts/kernel_signatures.py          # list mismatches, exit 1 if any
    .venv/bin/python scripts/kernel_signatures.py --fix    # rewrite them in place

Scans runtime/kernels/portable/*.cpp (and any files given). The expected
string comes from etmlir.runtime.signatures.expected_signature.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from etmlir.runtime.signatures import expected_signature  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
REGISTRATION = re.compile(r'(ET_REGISTER_KERNEL\(\s*\w+\s*,\s*"(?P<name>[^"]+)"\s*,\s*")(?P<sig>[^"]*)(")')


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--fix", action="store_true")
    args = parser.parse_args(argv)
    files = args.files or sorted((ROOT / "runtime/kernels/portable").glob("*.cpp"))
    bad = 0
    for path in files:
        text = path.read_text()

        def check(match: re.Match) -> str:
            nonlocal bad
            want = expected_signature(match["name"])
            if match["sig"] != want:
                bad += 1
                print(f"{path.resolve().relative_to(ROOT)}: {match['name']}: \"{match['sig']}\" -> \"{want}\"")
                return match.group(1) + want + match.group(4)
            return match.group(0)

        fixed = REGISTRATION.sub(check, text)
        if args.fix and fixed != text:
            path.write_text(fixed)
    if bad and not args.fix:
        print(f"{bad} signature(s) differ from the schemas; run with --fix", file=sys.stderr)
    return 1 if bad and not args.fix else 0


if __name__ == "__main__":
    sys.exit(main())
