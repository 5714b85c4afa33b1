"""Signing `.pte` files whose delegates carry native code, so that a runtime that trusts the key runs them.

A "cpu" delegate's payload is a shared object the runtime loads and runs: a `.pte` from someone
else is refused unless the loader allows native code outright or the payload is signed by a key
it trusts (runtime/README.md, "Trust and native code"). This module makes keys and signatures:

    keys = signing.generate_keypair("release.key")      # writes release.key (secret) and release.key.pub
    signing.sign("model.pte", "release.key", "model.signed.pte")
    etmlir.runtime.load("model.signed.pte", trusted_keys=["release.key.pub"])
    et-run model.signed.pte --trusted-key release.key.pub

    et-sign keygen release.key                           # the same from the shell (etmlir.tools.et_sign)
    et-sign sign model.pte --key release.key -o model.signed.pte
    et-sign verify model.signed.pte --trusted-key release.key.pub

A signature is Ed25519 (libsodium, through the runtime extension) over the domain string
"etmlir delegate payload signature v1" and NUL, then SHA-512 of the payload bytes exactly as the
file stores them: the payload header (backend id, arch, CPU features, entry points, scratch, body
offset, size and CRC) and the body, so changing any of what gets executed, or what chooses it,
breaks it. It is stored in the program, per delegate (program.fbs `Delegate.signatures`: public
key + signature), so signing rewrites the FlatBuffer and leaves every payload byte as it was. A
"cpu" delegate inside a "nested" payload (an inner program) is signed inside it, and the nested
payload rewritten around the signed inner program.

Key files are one line of text: `etmlir-ed25519-secret-key <64 hex digits>` (the 32-byte seed,
written with mode 0600) and `etmlir-ed25519-public-key <64 hex digits>` (what `--trusted-key`
and `trusted_keys` read). A key is named by its fingerprint, "sha256:" and the first 16 hex
digits of SHA-256 of the public key (et-inspect and the runtime's messages show it).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import secrets
import struct
import zlib
from typing import Any

from etmlir.executable import pte
from etmlir.payload_schema.PayloadHeader import PayloadHeader as _PayloadHeaderTable
from etmlir.schema.PayloadSignature import PayloadSignatureT

try:
    from etmlir import _runtime
except ImportError:  # a source tree without the extension: keys and signatures cannot be made or checked
    _runtime = None

# Backends whose payload the runtime runs as machine code (the ones that check trust at init).
NATIVE_CODE_BACKENDS = frozenset({"cpu"})
# Backends whose payload is a whole program of its own, signed inside.
PROGRAM_BACKENDS = frozenset({"nested"})
SECRET_KEY_TAG = "etmlir-ed25519-secret-key"
PUBLIC_KEY_TAG = "etmlir-ed25519-public-key"
MAX_SIGNATURES = 8  # per delegate (kMaxPayloadSignatures: Program::load refuses more)


class SigningError(ValueError):
    """A key or a file that cannot be signed or checked, with what is wrong."""


@dataclasses.dataclass(frozen=True)
class KeyPair:
    """An Ed25519 key: `seed` is the secret (32 bytes), `public_key` what runtimes trust."""

    seed: bytes = dataclasses.field(repr=False)
    public_key: bytes

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.public_key)

    @classmethod
    def from_seed(cls, seed: bytes) -> "KeyPair":
        _require_signatures()
        return cls(bytes(seed), _runtime.ed25519_public_key(bytes(seed)))


@dataclasses.dataclass(frozen=True)
class Signer:
    """One signature of a delegate's payload: whose (fingerprint) and whether it verifies."""

    fingerprint: str
    public_key: bytes
    valid: bool | None  # None: this runtime has no libsodium to check it
    trusted: bool = False


@dataclasses.dataclass(frozen=True)
class DelegateTrust:
    """What a delegate needs to run: `where` is "forward delegate 0" (inner ones: "... > forward delegate 0")."""

    where: str
    backend: str
    native_code: bool
    signers: tuple[Signer, ...]

    def runs_with(self, allow_native_code: bool) -> bool:
        """Whether a runtime with these trusted keys (and the opt-in or not) loads it."""
        if not self.native_code:
            return True
        if any(s.trusted and s.valid is False for s in self.signers):
            return False  # a trusted key's signature that does not match: refused even when allowed
        return allow_native_code or any(s.trusted and s.valid for s in self.signers)


def fingerprint(public_key: bytes) -> str:
    """"sha256:" and the first 8 bytes of SHA-256 of the key, in hex (the runtime's key_fingerprint)."""
    return "sha256:" + hashlib.sha256(bytes(public_key)).hexdigest()[:16]


def signatures_supported() -> bool:
    """Whether this runtime was built with libsodium (without it, nothing can be signed or checked)."""
    return _runtime is not None and bool(_runtime.signatures_supported())


def _require_signatures() -> None:
    if not signatures_supported():
        raise SigningError("this etmlir runtime was built without libsodium: it cannot make or check signatures "
                           "(install libsodium-dev and rebuild; scripts/setup.sh does both)")


# ---- Keys ----------------------------------------------------------------------------------------

def generate_keypair(path: str | os.PathLike[str], overwrite: bool = False) -> KeyPair:
    """A new random key: the secret to `path` (mode 0600), the public key to `path` + ".pub"."""
    _require_signatures()
    keys = KeyPair.from_seed(secrets.token_bytes(32))
    path = os.fspath(path)
    public = path + ".pub"
    if not overwrite:
        for existing in (path, public):
            if os.path.exists(existing):
                raise SigningError(f"{existing} exists: not overwriting a key (remove it, or pass overwrite=True)")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | (0 if overwrite else os.O_EXCL)
    try:
        fd = os.open(path, flags, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(f"{SECRET_KEY_TAG} {keys.seed.hex()}\n")
        os.chmod(path, 0o600)
        with open(public, "w") as f:
            f.write(public_key_text(keys.public_key))
    except OSError as error:
        raise SigningError(f"cannot write the key {path}: {error.strerror or error}") from None
    return keys


def public_key_text(public_key: bytes) -> str:
    """The public key file's line."""
    return f"{PUBLIC_KEY_TAG} {bytes(public_key).hex()}\n"


def read_secret_key(path: str | os.PathLike[str]) -> KeyPair:
    """The key pair of a secret key file (`generate_keypair` writes them)."""
    _require_signatures()
    text = _read_text(path, "secret key")
    words = text.split()
    if len(words) == 2 and words[0] == PUBLIC_KEY_TAG:
        raise SigningError(f"{os.fspath(path)} is a public key: signing takes the secret key (the file without .pub)")
    if len(words) != 2 or words[0] != SECRET_KEY_TAG or len(words[1]) != 64:
        raise SigningError(f"{os.fspath(path)} is not an etmlir secret key: it should be one line "
                           f"'{SECRET_KEY_TAG} <64 hex digits>'")
    try:
        seed = bytes.fromhex(words[1])
    except ValueError:
        raise SigningError(f"{os.fspath(path)}: the secret key is not 64 hex digits") from None
    return KeyPair.from_seed(seed)


def read_public_key(key: Any) -> bytes:
    """A trusted key as 32 bytes: a public key file's path, its text, or the 32 bytes themselves."""
    if isinstance(key, KeyPair):
        return key.public_key
    if isinstance(key, (bytes, bytearray, memoryview)) and len(key) == 32:
        return bytes(key)
    _require_signatures()
    if isinstance(key, (bytes, bytearray, memoryview)):
        text = bytes(key)
        where = "public key"
    elif isinstance(key, str) and key.startswith("etmlir-ed25519-"):
        text, where = key.encode(), "public key"
    else:
        where = os.fspath(key)
        text = _read_text(key, "public key").encode()
    try:
        return _runtime.parse_trusted_key(text)
    except _runtime.Error as error:  # type: ignore[union-attr]
        raise SigningError(f"{where}: {error}") from None


def _read_text(path: Any, what: str) -> str:
    try:
        with open(path, "rb") as f:
            data = f.read(4097)
    except OSError as error:
        raise SigningError(f"cannot read the {what} {os.fspath(path)}: {error.strerror or error}") from None
    if len(data) > 4096:
        raise SigningError(f"{os.fspath(path)} is over 4096 bytes: not an etmlir {what} file")
    try:
        return data.decode("ascii")
    except UnicodeDecodeError:
        raise SigningError(f"{os.fspath(path)} is not text: not an etmlir {what} file") from None


def _key_pair(key: Any) -> KeyPair:
    return key if isinstance(key, KeyPair) else read_secret_key(key)


# ---- Signing ---------------------------------------------------------------------------------------

def sign_bytes(data: bytes, key: Any) -> tuple[bytes, int]:
    """`data` (a .pte) with every native delegate signed by `key` (a KeyPair or a secret key file), and
    how many were signed. A signature by the same key is replaced; others are kept."""
    keys = _key_pair(key)
    return _sign_program(bytes(data), keys, "")


def sign(pte_in: str | os.PathLike[str], key: Any, pte_out: str | os.PathLike[str] | None = None) -> int:
    """Signs every native delegate of `pte_in` with `key`, writing `pte_out` (default: in place);
    returns how many delegates were signed (0: the file carries no native code, and is left as it was)."""
    try:
        with open(pte_in, "rb") as f:
            data = f.read()
    except OSError as error:
        raise SigningError(f"cannot read {os.fspath(pte_in)}: {error.strerror or error}") from None
    signed, count = sign_bytes(data, key)
    if count:
        target = os.fspath(pte_out if pte_out is not None else pte_in)
        try:
            with open(target + ".tmp", "wb") as f:
                f.write(signed)
            os.replace(target + ".tmp", target)
        except OSError as error:
            raise SigningError(f"cannot write {target}: {error.strerror or error}") from None
    return count


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else (value or "")


def _read(data: bytes, where: str) -> pte.PteFile:
    try:
        return pte.read(data)
    except pte.PteError as error:
        raise SigningError(f"{where or 'the file'}: {error}") from None


def _payload(file: pte.PteFile, delegate: Any, where: str) -> bytes:
    location = delegate.payload
    if location is None:
        raise SigningError(f"{where}: the delegate has no payload")
    try:
        segment = file.segment(location.segment)
    except pte.PteError as error:
        raise SigningError(f"{where}: {error}") from None
    if location.offset + location.size > len(segment):
        raise SigningError(f"{where}: the payload [{location.offset}, +{location.size}) lies outside its segment")
    return segment[location.offset:location.offset + location.size]


def _delegates(file: pte.PteFile):
    for method in file.program.methods or ():
        for index, delegate in enumerate(method.delegates or ()):
            yield f"{_text(method.name)} delegate {index}", delegate


def _sign_program(data: bytes, keys: KeyPair, outer: str) -> tuple[bytes, int]:
    file = _read(data, outer)
    segments = [file.segment(i) for i in range(len(file.program.segments or []))]
    count = 0
    for place, delegate in _delegates(file):
        where = f"{outer} > {place}" if outer else place
        backend = _text(delegate.backend)
        payload = _payload(file, delegate, where)
        if backend in NATIVE_CODE_BACKENDS:
            entry = PayloadSignatureT()
            entry.publicKey = keys.public_key
            entry.signature = _runtime.sign_payload(keys.seed, payload)
            kept = [s for s in delegate.signatures or () if bytes(s.publicKey) != keys.public_key]
            if len(kept) >= MAX_SIGNATURES:
                raise SigningError(f"{where} already has {len(kept)} signatures; a runtime reads at most "
                                   f"{MAX_SIGNATURES}")
            delegate.signatures = kept + [entry]
            count += 1
        elif backend in PROGRAM_BACKENDS:
            header, body_at = _payload_body(payload, where)
            signed, inner = _sign_program(payload[body_at:], keys, where)
            if inner:
                location = delegate.payload
                if location.offset != 0 or location.size != len(segments[location.segment]):
                    raise SigningError(f"{where}: the payload shares its segment; cannot rewrite it")
                new_payload = _rewrap(payload, signed, where)
                segments[location.segment] = new_payload
                for _, other in _delegates(file):  # identical payloads share one segment
                    if other.payload is not None and other.payload.segment == location.segment:
                        other.payload.size = len(new_payload)
                count += inner
    if not count:
        return data, 0
    return pte.pack(file.program, segments, file.header.segment_alignment), count


_PREFIX = struct.Struct("<I")


def _payload_body(payload: bytes, where: str) -> tuple[Any, int]:
    """The payload header table and where the body starts (the checks the runtime makes on them)."""
    if len(payload) < 12 or payload[8:12] != b"ETPH":
        raise SigningError(f"{where}: the payload has no etmlir payload header")
    (size,) = _PREFIX.unpack_from(payload)
    if size > len(payload) - 4:
        raise SigningError(f"{where}: the payload header does not fit in the payload")
    try:
        table = _PayloadHeaderTable.GetRootAs(bytes(payload[4:4 + size]), 0)
        offset, body_size, crc = table.BodyOffset(), table.BodySize(), table.BodyCrc32()
    except Exception as error:  # noqa: BLE001 - the Python FlatBuffers reader has no verifier
        raise SigningError(f"{where}: the payload header is corrupt: {type(error).__name__}: {error}") from None
    if offset < 4 + size or offset + body_size != len(payload):
        raise SigningError(f"{where}: the payload's body [{offset}, +{body_size}) does not match its "
                           f"{len(payload)} bytes")
    if zlib.crc32(payload[offset:]) != crc:
        raise SigningError(f"{where}: the payload's body does not match its checksum: it is corrupt")
    return table, offset


def _rewrap(payload: bytes, body: bytes, where: str) -> bytes:
    """A nested payload around a new body: the same header (new size and checksum)."""
    from etmlir.backends.payload_header import read_payload, write_payload  # torch-mlir: only when needed

    try:
        header, _ = read_payload(payload)
        return write_payload(header, body)
    except ValueError as error:
        raise SigningError(f"{where}: {error}") from None


# ---- Checking ----------------------------------------------------------------------------------------

def delegate_trust(data: bytes, trusted_keys: Any = ()) -> list[DelegateTrust]:
    """Every delegate of a .pte (and of the programs inside "nested" payloads): whether it carries native
    code, who signed it, whether each signature verifies and is by one of `trusted_keys`."""
    trusted = {read_public_key(k) for k in trusted_keys}
    out: list[DelegateTrust] = []
    _collect(bytes(data), "", trusted, out)
    return out


def signers(delegate: Any, payload: bytes | None) -> tuple[Signer, ...]:
    """The signatures of one delegate (a flatc object-API Delegate) over its payload bytes (None: unknown)."""
    check = signatures_supported() and payload is not None
    out = []
    for s in delegate.signatures or ():
        if s is None:  # a damaged file: a signature table that is not there
            out.append(Signer("(missing signature)", b"", False))
            continue
        key = bytes(s.publicKey if s.publicKey is not None else b"")
        signature = bytes(s.signature if s.signature is not None else b"")
        valid = None
        if len(key) != 32 or len(signature) != 64:
            valid = False
        elif check:
            valid = bool(_runtime.verify_payload_signature(key, signature, payload))
        out.append(Signer(fingerprint(key) if len(key) == 32 else f"({len(key)}-byte key)", key, valid))
    return tuple(out)


def describe_delegate(delegate: Any, payload: bytes | None) -> str:
    """One line on what a delegate runs as and who signed it (et-inspect prints it)."""
    backend = _text(delegate.backend)
    found = signers(delegate, payload)
    if backend not in NATIVE_CODE_BACKENDS:
        note = "no (data the runtime interprets" + (", inner delegates checked at load)" if backend in
                                                   PROGRAM_BACKENDS else ")")
        return f"native code: {note}" + (f"; signed by {_signer_list(found)}" if found else "")
    if not found:
        return "native code: yes, unsigned (runs only with --allow-native / allow_native_code=True)"
    return f"native code: yes, signed by {_signer_list(found)}"


def _signer_list(found: tuple[Signer, ...]) -> str:
    state = {True: "valid", False: "INVALID: not these bytes", None: "unchecked"}
    return ", ".join(f"{s.fingerprint} ({state[s.valid]})" for s in found)


def _collect(data: bytes, outer: str, trusted: set[bytes], out: list[DelegateTrust]) -> None:
    file = _read(data, outer)
    for place, delegate in _delegates(file):
        where = f"{outer} > {place}" if outer else place
        backend = _text(delegate.backend)
        payload = _payload(file, delegate, where)
        found = tuple(dataclasses.replace(s, trusted=s.public_key in trusted) for s in signers(delegate, payload))
        out.append(DelegateTrust(where, backend, backend in NATIVE_CODE_BACKENDS, found))
        if backend in PROGRAM_BACKENDS:
            _, body_at = _payload_body(payload, where)
            _collect(payload[body_at:], where, trusted, out)
