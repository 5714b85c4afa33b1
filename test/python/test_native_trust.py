"""Native code runs only when the loader says so: a "cpu" delegate's payload is a shared object the runtime
loads and runs, so a `.pte` from elsewhere is refused unless loaded with `allow_native_code=True` /
`et-run --allow-native`, or its payloads are signed (`et-sign`, `etmlir.devtools.signing`) by a key the
loader trusts (`trusted_keys=` / `--trusted-key`). Bytes this process compiled are its own and load as
they are. The measured attack (a signed payload's code changed, its CRC recomputed: `et-verify-pte` says
ok) is refused with a message, not run; a "cpu" delegate inside a "nested" payload follows the same rule.
`et-inspect` shows per delegate whether it carries native code and who signed it.

One tiny model is compiled for the "cpu" backend and one for "nested" (module fixtures); outputs are
compared with PyTorch eager at atol 1e-5, rtol 1e-5 (float32, one linear layer).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import etmlir
import etmlir.backends as backends
import etmlir.runtime as rt
from etmlir import _runtime
from etmlir.backends.payload_header import read_payload, write_payload
from etmlir.devtools import signing
from etmlir.executable import pte
from etmlir.tools import et_inspect, et_sign

BIN = Path(sys.executable).parent
ATOL = RTOL = 1e-5

pytestmark = pytest.mark.skipif(not signing.signatures_supported(),
                                reason="the runtime was built without libsodium (no signatures)")


class Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x))


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The model, its input, eager output, and in a directory: model.pte (cpu, unsigned, compiled here),
    signed.pte (signed with release.key), nested.pte (a nested delegate around model.pte), keys."""
    torch.manual_seed(0)
    model, x = Tiny().eval(), torch.randn(2, 8)
    edge = etmlir.to_edge(etmlir.export(model, (x,)))
    cpu = edge.to_backend(backends.partitioner("cpu")).to_executorch()
    nested = edge.to_backend(backends.partitioner("nested")).to_executorch()
    root = tmp_path_factory.mktemp("trust")
    (root / "model.pte").write_bytes(cpu.buffer)
    keys = signing.generate_keypair(root / "release.key")
    other = signing.generate_keypair(root / "other.key")
    assert signing.sign(root / "model.pte", root / "release.key", root / "signed.pte") == 1
    # The nested program's one delegate runs the cpu program as its inner program (same signature x -> y).
    (root / "nested.pte").write_bytes(_with_payload(nested.buffer, "nested",
                                                    lambda blob: write_payload(read_payload(blob)[0], cpu.buffer)))
    return {"model": model, "x": x, "expected": model(x).detach().numpy(), "dir": root, "cpu": cpu,
            "keys": keys, "other": other}


def _with_payload(data: bytes, backend: str, edit) -> bytes:
    """`data` with the payload of every `backend` delegate replaced by edit(payload); signatures kept."""
    f = pte.read(data)
    segments = [f.segment(i) for i in range(len(f.program.segments))]
    for method in f.program.methods:
        for delegate in method.delegates or ():
            if delegate.backend.decode() == backend:
                segments[delegate.payload.segment] = edit(segments[delegate.payload.segment])
                delegate.payload.size = len(segments[delegate.payload.segment])
    return pte.pack(f.program, segments, f.header.segment_alignment)


def _tampered_code(blob: bytes) -> bytes:
    """A cpu payload whose shared object has bytes of code changed, written with a fresh CRC."""
    header, so = read_payload(blob, backend_id="cpu")
    so = bytearray(so)
    for i in range(len(so) // 3, len(so) // 3 + 64):
        so[i] ^= 0x5A
    return write_payload(header, bytes(so))


def _run(method: rt.Method, files) -> None:
    (y,) = method(files["x"])
    np.testing.assert_allclose(y.numpy(), files["expected"], atol=ATOL, rtol=RTOL)


def et(tool: str, *args: object) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / tool), *map(str, args)], capture_output=True, text=True, timeout=120)


def test_a_file_from_elsewhere_runs_only_when_allowed(files):
    path = files["dir"] / "model.pte"
    with pytest.raises(rt.Error, match=r"^method 'forward' delegate 0 \(backend 'cpu'\): init failed: cpu delegate "
                                       r"0: unsigned native code: to run it, allow native code "
                                       r"\(--allow-native, allow_native_code=True\) or sign it \(et-sign\) and trust "
                                       r"the key \(--trusted-key, trusted_keys=\)$"):
        rt.load(path, loader="mmap").method("forward")  # mapped: never the bytes this process compiled
    _run(rt.load(path, loader="mmap", allow_native_code=True).method("forward"), files)
    signed = (files["dir"] / "signed.pte").read_bytes()
    with pytest.raises(rt.Error, match=f"native code signed by {files['keys'].fingerprint}, not a trusted key"):
        rt.load(signed).method("forward")
    _run(rt.load(signed, allow_native_code=True).method("forward"), files)


def test_bytes_this_process_compiled_are_its_own(files):
    _run(rt.load(files["cpu"].buffer).method("forward"), files)
    _run(rt.load(files["dir"] / "model.pte").method("forward"), files)  # read into memory: the same bytes
    # The same program laid out again (segments on 8 KiB, not 4 KiB) is other bytes: someone else's.
    f = pte.read(files["cpu"].buffer)
    repacked = pte.pack(f.program, [f.segment(i) for i in range(len(f.program.segments))], 8192)
    with pytest.raises(rt.Error, match="init failed: cpu delegate 0: unsigned native code"):
        rt.load(repacked).method("forward")


def test_a_signed_file_runs_with_its_key_in_any_form(files):
    root, keys = files["dir"], files["keys"]
    pub = root / "release.key.pub"
    for key in (pub, str(pub), pub.read_text(), pub.read_bytes(), keys.public_key):
        _run(rt.load(root / "signed.pte", trusted_keys=[root / "other.key.pub", key]).method("forward"), files)
    with pytest.raises(rt.Error, match="not a trusted key"):
        rt.load(root / "signed.pte", trusted_keys=[root / "other.key.pub"]).method("forward")


def test_a_payload_changed_after_signing_is_refused_even_with_its_crc_recomputed(files):
    """The measured attack: et-verify-pte accepts the file, the runtime refuses it (no crash)."""
    root, fingerprint = files["dir"], files["keys"].fingerprint
    attacked = root / "attacked.pte"
    attacked.write_bytes(_with_payload((root / "signed.pte").read_bytes(), "cpu", _tampered_code))
    verify = et("et-verify-pte", attacked)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    message = (f"method 'forward' delegate 0 (backend 'cpu'): init failed: cpu delegate 0: native code does not "
               f"match its signature by trusted key {fingerprint}: the payload changed after it was signed; "
               f"refused (re-sign it if you changed it yourself)")
    run = et("et-run", attacked, "--trusted-key", root / "release.key.pub", "--iterations", 1)
    assert run.returncode == 1, (run.returncode, run.stderr)
    assert run.stderr == f"et-run: error: {message}\n"
    # Allowing native code does not override the trusted key's signature that does not match.
    run = et("et-run", attacked, "--trusted-key", root / "release.key.pub", "--allow-native")
    assert run.returncode == 1 and message in run.stderr, run.stderr
    with pytest.raises(rt.Error, match="native code does not match its signature by trusted key"):
        rt.load(attacked, trusted_keys=[root / "release.key.pub"]).method("forward")
    trust = {d.where: d for d in signing.delegate_trust(attacked.read_bytes(), [root / "release.key.pub"])}
    assert not trust["forward delegate 0"].runs_with(allow_native_code=True)
    assert "(INVALID: not these bytes)" in et_inspect.describe(attacked.read_bytes())


def test_et_run_options(files):
    root = files["dir"]
    refused = et("et-run", root / "model.pte", "--iterations", 1)
    assert refused.returncode == 1 and "unsigned native code" in refused.stderr, refused.stderr
    assert et("et-run", root / "model.pte", "--iterations", 1, "--allow-native").returncode == 0
    ok = et("et-run", root / "signed.pte", "--iterations", 1, "--trusted-key", root / "other.key.pub",
            "--trusted-key", root / "release.key.pub")
    assert ok.returncode == 0, ok.stderr
    wrong = et("et-run", root / "signed.pte", "--trusted-key", root / "other.key.pub")
    assert wrong.returncode == 1 and "not a trusted key" in wrong.stderr
    secret = et("et-run", root / "signed.pte", "--trusted-key", root / "release.key")
    assert secret.stderr == (f"et-run: error: --trusted-key {root / 'release.key'}: this is a secret key "
                             "(etmlir-ed25519-secret-key): give the public key, the .pub file next to it\n")
    missing = et("et-run", root / "signed.pte", "--trusted-key", root / "none.pub")
    assert missing.returncode == 1 and "cannot open: No such file or directory" in missing.stderr
    usage = et("et-run", root / "signed.pte", "--allow-native=yes")
    assert usage.returncode == 2 and "--allow-native takes no value" in usage.stderr
    assert "--trusted-key FILE" in et("et-run", "--help").stdout


def test_a_cpu_delegate_inside_a_nested_payload_follows_the_same_rule(files, capsys):
    root = files["dir"]
    nested = root / "nested.pte"
    with pytest.raises(rt.Error, match=r"backend 'nested'\): init failed: loading the payload: method 'forward' "
                                       r"delegate 0 \(backend 'cpu'\): init failed: cpu delegate 0: unsigned"):
        rt.load(nested).method("forward")
    _run(rt.load(nested, allow_native_code=True).method("forward"), files)
    # et-sign signs the inner delegate and rewrites the nested payload around it.
    assert signing.sign(nested, root / "release.key", root / "nested.signed.pte") == 1
    _run(rt.load(root / "nested.signed.pte", trusted_keys=[root / "release.key.pub"]).method("forward"), files)
    with pytest.raises(rt.Error, match="cpu delegate 0: native code signed by"):
        rt.load(root / "nested.signed.pte").method("forward")
    assert et_sign.main(["verify", str(root / "nested.signed.pte"), "--trusted-key",
                         str(root / "release.key.pub")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["forward delegate 0 (nested, data): unsigned: loads",
                     f"forward delegate 0 > forward delegate 0 (cpu, native code): {files['keys'].fingerprint} "
                     "(trusted, valid): loads"]


def test_et_inspect_says_which_delegates_carry_native_code_and_who_signed_them(files):
    root = files["dir"]
    text = et_inspect.describe((root / "model.pte").read_bytes())
    assert "  delegate 0: backend 'cpu', payload segment 1" in text
    assert "    native code: yes, unsigned (runs only with --allow-native / allow_native_code=True)" in text
    text = et_inspect.describe((root / "signed.pte").read_bytes())
    assert f"    native code: yes, signed by {files['keys'].fingerprint} (valid)" in text
    text = et_inspect.describe((root / "nested.pte").read_bytes())
    assert "    native code: no (data the runtime interprets, inner delegates checked at load)" in text


def test_et_sign_command_line(files, tmp_path, capsys):
    assert et_sign.main(["keygen", str(tmp_path / "k")]) == 0
    out = capsys.readouterr().out
    assert (tmp_path / "k").stat().st_mode & 0o777 == 0o600
    key = signing.read_secret_key(tmp_path / "k")
    assert key.fingerprint in out and signing.read_public_key(tmp_path / "k.pub") == key.public_key
    assert et_sign.main(["keygen", str(tmp_path / "k")]) == 1
    assert "exists: not overwriting a key" in capsys.readouterr().err
    model = str(files["dir"] / "model.pte")
    assert et_sign.main(["sign", model, "--key", str(tmp_path / "k.pub"), "-o", str(tmp_path / "x.pte")]) == 1
    assert "is a public key: signing takes the secret key" in capsys.readouterr().err
    assert et_sign.main(["sign", model, "--key", str(tmp_path / "k"), "-o", str(tmp_path / "x.pte")]) == 0
    assert capsys.readouterr().out == f"{tmp_path / 'x.pte'}: signed 1 native delegate with key {key.fingerprint}\n"
    # Signing again with the same key replaces its signature; another key adds one.
    signed, count = signing.sign_bytes((tmp_path / "x.pte").read_bytes(), key)
    assert count == 1 and signed == (tmp_path / "x.pte").read_bytes()
    both, _ = signing.sign_bytes(signed, files["keys"])
    assert [len(d.signers) for d in signing.delegate_trust(both)] == [2]
    assert et_sign.main(["verify", str(tmp_path / "x.pte")]) == 1
    captured = capsys.readouterr()
    assert captured.out == f"forward delegate 0 (cpu, native code): {key.fingerprint} (valid): REFUSED\n"
    assert captured.err == "et-sign: 1 delegate would be refused\n"
    assert et_sign.main(["verify", str(tmp_path / "x.pte"), "--allow-native"]) == 0
    portable = tmp_path / "portable.pte"
    portable.write_bytes(etmlir.to_edge(etmlir.export(files["model"], (files["x"],))).to_executorch().buffer)
    assert et_sign.main(["sign", str(portable), "--key", str(tmp_path / "k")]) == 1
    assert "no delegate carries native code: nothing to sign" in capsys.readouterr().err
    console = et("et-sign", "verify", files["dir"] / "signed.pte", "--trusted-key", files["dir"] / "release.key.pub")
    assert console.returncode == 0 and "(trusted, valid): loads" in console.stdout, console.stderr


def test_load_arguments_are_checked(files):
    root = files["dir"]
    with pytest.raises(rt.Error, match="got a single one: wrap it in a list"):
        rt.load(root / "signed.pte", trusted_keys=str(root / "release.key.pub"))
    with pytest.raises(rt.Error, match="allow_native_code takes True or False, got str"):
        rt.load(root / "signed.pte", allow_native_code="yes")
    with pytest.raises(rt.Error, match=r"trusted key .*none\.pub: cannot read it: No such file"):
        rt.load(root / "signed.pte", trusted_keys=[root / "none.pub"])
    with pytest.raises(rt.Error, match="trusted key .*release.key: this is a secret key"):
        rt.load(root / "signed.pte", trusted_keys=[root / "release.key"])
    with pytest.raises(rt.Error, match="the public key has 62 hex digits"):
        rt.load(root / "signed.pte", trusted_keys=[signing.PUBLIC_KEY_TAG + " " + "ab" * 31])
    with pytest.raises(rt.Error, match="trusted key 0 is 31 bytes; an Ed25519 public key is 32"):
        _runtime.Program.from_file(str(root / "signed.pte"), trusted_keys=[b"x" * 31])


def test_fingerprints_agree_between_python_and_the_runtime(files):
    key = files["keys"].public_key
    assert signing.fingerprint(key) == _runtime.key_fingerprint(key) == files["keys"].fingerprint
    assert len(files["keys"].fingerprint) == len("sha256:") + 16
