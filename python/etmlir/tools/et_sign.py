"""et-sign: make a signing key, sign the native code in a `.pte`, check who signed it.

    et-sign keygen release.key                         # release.key (secret, 0600) + release.key.pub
    et-sign sign model.pte --key release.key -o model.signed.pte
    et-sign verify model.signed.pte --trusted-key release.key.pub

A "cpu" delegate's payload is a shared object the runtime loads and runs in its own process, so
`et-run` and `etmlir.runtime.load` refuse a `.pte` that carries one unless told `--allow-native`
/ `allow_native_code=True`, or the payload is signed by a key given with `--trusted-key` /
`trusted_keys=`. `sign` adds an Ed25519 signature to every such delegate (those inside "nested"
payloads too); `verify` lists every delegate, whether it carries native code, who signed it and
whether it would load with the keys given (exit status 1 when one would not).
`etmlir.devtools.signing` is the Python API and says what exactly is signed.

Exit status: 0 done, 1 an error (a missing or bad key or file, nothing to sign, a delegate that
would be refused), 2 a bug in et-sign (`etmlir.tools.cli`; `--debug` shows the traceback).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from etmlir.devtools import signing
from etmlir.tools.cli import ToolError, run_tool


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="et-sign", description="Sign the native code (\"cpu\" delegates) in a .pte so that a runtime that "
        "trusts the key runs it (et-run --trusted-key, etmlir.runtime.load(trusted_keys=...)).")
    parser.add_argument("--debug", action="store_true", help="show a traceback on failure")
    commands = parser.add_subparsers(dest="command", required=True)
    keygen = commands.add_parser("keygen", help="make a key pair: KEY (secret, mode 0600) and KEY.pub")
    keygen.add_argument("key", help="where to write the secret key; the public key goes to KEY.pub")
    keygen.add_argument("--force", action="store_true", help="overwrite existing key files")
    sign = commands.add_parser("sign", help="sign every native delegate of a .pte")
    sign.add_argument("pte", help="the .pte to sign")
    sign.add_argument("--key", required=True, help="the secret key (et-sign keygen writes one)")
    sign.add_argument("-o", "--output", help="where to write the signed .pte (default: in place)")
    verify = commands.add_parser("verify", help="list who signed each delegate and whether it would load")
    verify.add_argument("pte", help="the .pte to check")
    verify.add_argument("--trusted-key", action="append", default=[], metavar="KEY.pub",
                        help="a public key the runtime would trust (repeatable)")
    verify.add_argument("--allow-native", action="store_true",
                        help="check as a runtime that allows native code would")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run_tool("et-sign", _main, argv)


def _main(argv: Sequence[str] | None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "keygen":
            keys = signing.generate_keypair(args.key, overwrite=args.force)
            print(f"wrote {args.key} (secret: keep it private) and {args.key}.pub (public: give it to runtimes "
                  f"with --trusted-key), key {keys.fingerprint}")
            return 0
        if args.command == "sign":
            keys = signing.read_secret_key(args.key)
            count = signing.sign(args.pte, keys, args.output)
            if count == 0:
                raise ToolError(f"{args.pte}: no delegate carries native code: nothing to sign")
            print(f"{args.output or args.pte}: signed {count} native delegate{'s' if count != 1 else ''} with key "
                  f"{keys.fingerprint}")
            return 0
        return _verify(args)
    except signing.SigningError as error:
        raise ToolError(str(error)) from None


def _verify(args: argparse.Namespace) -> int:
    try:
        with open(args.pte, "rb") as f:
            data = f.read()
    except OSError as error:
        raise ToolError(f"cannot read {args.pte}: {error.strerror or error}") from None
    delegates = signing.delegate_trust(data, args.trusted_key)
    refused = 0
    for d in delegates:
        signers = ", ".join(
            f"{s.fingerprint} ({'trusted, ' if s.trusted else ''}"
            f"{'valid' if s.valid else 'INVALID' if s.valid is False else 'unchecked: no libsodium'})"
            for s in d.signers) or "unsigned"
        runs = d.runs_with(args.allow_native)
        refused += not runs
        kind = "native code" if d.native_code else "data"
        print(f"{d.where} ({d.backend}, {kind}): {signers}: {'loads' if runs else 'REFUSED'}")
    if not delegates:
        print(f"{args.pte}: no delegates")
    if refused:
        print(f"et-sign: {refused} delegate{'s' if refused != 1 else ''} would be refused", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
