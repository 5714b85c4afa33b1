"""Writes the .pte fixtures the C++ tests load: make_fixtures.py OUTDIR

    OUTDIR/mlp.pte, seed_cnn.pte      zoo models (seeded weights), exported to .pte
    OUTDIR/<name>.input.bin           the example input, raw little-endian float32
    OUTDIR/<name>.expected.bin        PyTorch eager's output on it, raw float32
    OUTDIR/<name>.shapes.txt          "input 8 784" / "expected 8 10": one line per tensor
    OUTDIR/mlp_unplanned_io.pte       mlp with alloc_inputs/alloc_outputs off: the caller gives
                                      input and output memory
    OUTDIR/dynamic.pte                float32[1, T, 16], T in 2..32 -> linear -> relu -> reshape(1, -1, 4)
                                      * 2 (sym_size, bounded tensors); references at T = 8
                                      (dynamic.*) and T = 3 (dynamic_short.*)
    OUTDIR/delegate.pte               float32[2, 2] -> DelegateCall(backend "fake_delegate",
                                      payload "opaque bytes", compile spec level=2) -> output
    OUTDIR/lookup.pte                 int64[3] -> embedding(64 x 8 table) * 2: fails at run time on an
                                      index >= 64; lookup.where.txt holds the embedding's source line
    OUTDIR/nested_<inner>.pte         an outer program whose one DelegateCall (backend "nested") has the
                                      whole <inner>.pte as its payload (behind the shared payload header,
                                      etmlir.backends.payload_header): nested_mlp, nested_mlp_unplanned_io,
                                      nested_dynamic, nested_lookup (payload debug_info: the inner ops'
                                      source lines), nested_nested_lookup (nested_lookup.pte nested again)
    OUTDIR/nested_lookup_no_debug.pte nested lookup without the payload's debug_info; the call itself has
                                      debug handle 1000 at outer.py:7
    OUTDIR/nested_mlp_no_live_out.pte the call passes the live-in only (the backend must refuse it)
    OUTDIR/nested_junk.pte            backend "nested" with payload "opaque bytes" (init must fail)
    OUTDIR/bundled_mlp.pte            mlp.pte with two bundled test cases (etmlir.devtools.bundle): 'eager'
                                      (eager's outputs, atol/rtol 1e-4) and 'wrong' (eager's + 0.5)
    OUTDIR/counter.pte                float32[4] -> x * n after n += 1, with n (float32[4], zeros) the
                                      method's state (Method.state)
    OUTDIR/tosa_conv.pte              conv -> relu -> flatten -> linear delegated whole to `tosa`, with one
                                      bundled case (eager's outputs, atol/rtol 1e-5); only with tosa-tools
    OUTDIR/tosa_conv.tosa             its TOSA FlatBuffer (the payload's body) alone
    OUTDIR/vulkan_mlp.pte             linear -> gelu -> linear -> softmax delegated whole to `vulkan`, with one
                                      bundled case (eager's outputs, atol/rtol 1e-5); only where the
                                      vulkan backend can compile (always: it needs no device to compile)
    OUTDIR/vulkan_mlp.body            its dispatch-graph FlatBuffer (the payload's body) alone

The C++ tests find OUTDIR through the environment variable ETMLIR_TEST_PTE_DIR.
"""

from __future__ import annotations

import sys
from pathlib import Path

import etmlir
import torch
from etmlir import models
from etmlir.backends.payload_header import PayloadHeader, write_payload
from etmlir.dialects import new_context
from etmlir.executable import pte
from torch import nn
from torch_mlir import ir

ZOO_FIXTURES = ("mlp", "seed_cnn")

# One delegate call between a planned input and a planned output: enough for
# the C++ test backend to see init (payload + compile spec), execute, destroy.
DELEGATE_MODULE = r'''
module {
  "etx.payload"() {sym_name = "blob", backend = "fake_delegate", data = "opaque bytes", compile_specs = {level = "2"}} : () -> ()
  func.func @main() attributes {etx.method = "forward", etx.arenas = [{name = "planned", size = 32 : i64}]} {
    %x = "etx.input"() {index = 0 : i64, type = tensor<2x2xf32>, mem_id = 0 : i64, offset = 0 : i64, size = 16 : i64} : () -> !etx.value
    %y = "etx.alloc"() {type = tensor<2x2xf32>, mem_id = 0 : i64, offset = 16 : i64, size = 16 : i64} : () -> !etx.value
    "etx.delegate_call"(%x, %y) {backend = "fake_delegate", payload = "blob", operandSegmentSizes = array<i32: 1, 1>} : (!etx.value, !etx.value) -> ()
    "etx.output"(%y) : (!etx.value) -> ()
    return
  }
}
'''


# The MLIR element type of each schema ScalarType code the nested fixtures pass.
ELEMENT_TYPES = {0: "ui8", 3: "i32", 4: "i64", 6: "f32", 11: "i1"}
ELEMENT_BYTES = {"ui8": 1, "i32": 4, "i64": 8, "f32": 4, "i1": 1}


class Lookup(nn.Module):
    """An embedding lookup: an index >= 64 fails in the kernel at run time."""

    def __init__(self) -> None:
        super().__init__()
        self.table = nn.Parameter(torch.randn(64, 8))

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return nn.functional.embedding(idx, self.table) * 2.0


class Counter(nn.Module):
    """A buffer forward mutates: program state the method keeps across calls."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("n", torch.zeros(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.n.add_(1)
        return x * self.n


class DynamicSeq(nn.Module):
    """A sequence model with a dynamic length: sizes flow through sym_size into view_copy."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.fc(x))
        return y.reshape(y.shape[0], -1, 4) * 2.0


def write_reference(name: str, model: nn.Module, x: torch.Tensor, out: Path) -> None:
    with torch.no_grad():
        expected = model(x)
    x_np = x.detach().numpy().astype("<f4")
    y_np = expected.detach().numpy().astype("<f4")
    (out / f"{name}.input.bin").write_bytes(x_np.tobytes())
    (out / f"{name}.expected.bin").write_bytes(y_np.tobytes())
    (out / f"{name}.shapes.txt").write_text(
        f"input {' '.join(map(str, x_np.shape))}\nexpected {' '.join(map(str, y_np.shape))}\n")


def write_dynamic_fixture(out: Path) -> None:
    torch.manual_seed(0)
    model = DynamicSeq().eval()
    x = torch.randn(1, 8, 16)
    dynamic = {"x": {1: torch.export.Dim("T", min=2, max=32)}}
    etmlir.to_edge(etmlir.export(model, (x,), dynamic)).to_executorch().save(out / "dynamic.pte")
    write_reference("dynamic", model, x, out)
    write_reference("dynamic_short", model, torch.randn(1, 3, 16), out)


def write_zoo_fixture(name: str, out: Path) -> None:
    model, args, dynamic = models.build(name)
    edge = etmlir.to_edge(etmlir.export(model, args, dynamic))
    edge.to_executorch().save(out / f"{name}.pte")
    if name == "mlp":
        unplanned = etmlir.ExecutorchConfig(alloc_inputs=False, alloc_outputs=False)
        edge.to_executorch(unplanned).save(out / f"{name}_unplanned_io.pte")
        print(f"[make_fixtures] {out / (name + '_unplanned_io.pte')}")
    (x,) = args
    write_reference(name, model, x, out)
    if name == "mlp":  # bundled test cases: eager's outputs, and a case whose expected outputs are wrong
        from etmlir import devtools
        with torch.no_grad():
            y = model(x)
        data = devtools.bundle(out / "mlp.pte", (x,), y, atol=1e-4, rtol=1e-4, name="eager")
        data = devtools.bundle(data, (x,), y + 0.5, atol=1e-4, rtol=1e-4, name="wrong")
        (out / "bundled_mlp.pte").write_bytes(data)
        print(f"[make_fixtures] {out / 'bundled_mlp.pte'}")


def write_tosa_fixture(out: Path) -> None:
    """tosa_conv.pte (a small CNN delegated whole to `tosa`, with one bundled case from eager) and
    tosa_conv.tosa, its TOSA FlatBuffer alone, for tosa_backend_test (skipped without tosa-tools)."""
    from etmlir import backends, devtools
    from etmlir.backends.tosa import tools
    from etmlir.tools.et_inspect import extract_payload

    if tools.tools_dir() is None:
        print("[make_fixtures] tosa-tools not installed: no tosa fixtures")
        return
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(2, 3, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(3 * 4 * 4, 5)).eval()
    x = torch.randn(1, 2, 4, 4)
    edge = etmlir.to_edge(etmlir.export(model, (x,)))
    program = edge.to_backend(backends.partitioner("tosa")).to_executorch()
    with torch.no_grad():
        y = model(x)
    (out / "tosa_conv.pte").write_bytes(devtools.bundle(program.buffer, (x,), y, atol=1e-5, rtol=1e-5, name="eager"))
    (out / "tosa_conv.tosa").write_bytes(extract_payload(program.buffer, "forward", 0))
    print(f"[make_fixtures] {out / 'tosa_conv.pte'}, {out / 'tosa_conv.tosa'}")


def write_vulkan_fixture(out: Path) -> None:
    """vulkan_mlp.pte (a small MLP delegated whole to `vulkan`, with one bundled case from eager) and
    vulkan_mlp.body, its dispatch-graph FlatBuffer alone, for vulkan_backend_test."""
    from etmlir import devtools
    from etmlir.tools.et_inspect import extract_payload

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 20), nn.GELU(), nn.Linear(20, 3), nn.Softmax(-1)).eval()
    x = torch.randn(4, 6)
    edge = etmlir.to_edge(etmlir.export(model, (x,)))
    program = etmlir.to_backend("vulkan", edge).to_executorch()
    with torch.no_grad():
        y = model(x)
    (out / "vulkan_mlp.pte").write_bytes(devtools.bundle(program.buffer, (x,), y, atol=1e-5, rtol=1e-5, name="eager"))
    (out / "vulkan_mlp.body").write_bytes(extract_payload(program.buffer, "forward", 0))
    print(f"[make_fixtures] {out / 'vulkan_mlp.pte'}, {out / 'vulkan_mlp.body'}")


def write_delegate_fixture(out: Path) -> None:
    with new_context() as ctx, ir.Location.unknown(ctx):
        module = ir.Module.parse(DELEGATE_MODULE)
        data = etmlir.serialize(module)
    (out / "delegate.pte").write_bytes(data)


def _tensor_decl(t) -> tuple[str, str, int]:
    """(MLIR type, extra attributes, planned bytes) of a schema TensorT: dynamic dims as '?',
    planned at their bound."""
    element = ELEMENT_TYPES[t.dtype]
    sizes = list(t.sizes)
    dynamic = list(t.dynamicDims) if t.dynamicDims is not None else [t.dynamism != 0] * len(sizes)
    dims = "".join(("?" if d else str(s)) + "x" for s, d in zip(sizes, dynamic))
    extra = f", upper_bounds = array<i64: {', '.join(map(str, sizes))}>" if any(dynamic) else ""
    nbytes = ELEMENT_BYTES[element]
    for s in sizes:
        nbytes *= s
    return f"tensor<{dims}{element}>", extra, nbytes


def nested_module(inner: bytes, *, payload_debug_info: bool = True, call_handle: int = 0,
                  pass_live_outs: bool = True) -> str:
    """An etx module whose method hands its inputs to one `etx.delegate_call` of backend "nested"
    (payload: the shared payload header around the `inner` .pte) and returns the live-outs, typed like the
    inner method's signature."""
    program = pte.read(inner).program
    method = next(m for m in program.methods if m.name == b"forward")
    payload = write_payload(PayloadHeader("nested", "pte", 1, entry_points=(("forward", "forward"),)), inner)
    entries = []
    offset = 0
    lines = []
    live_ins, live_outs = [], []
    for kind, indices in (("input", method.inputs), ("output", method.outputs)):
        for i, index in enumerate(indices):
            mlir_type, extra, nbytes = _tensor_decl(method.values[index].value)
            name = f"%{kind[0]}{i}"
            op = (f'"etx.input"() {{index = {i} : i64, ' if kind == "input" else '"etx.alloc"() {')
            lines.append(f"    {name} = {op}type = {mlir_type}{extra}, mem_id = 0 : i64, offset = {offset} : i64, "
                         f"size = {nbytes} : i64}} : () -> !etx.value")
            (live_ins if kind == "input" else live_outs).append(name)
            offset += (nbytes + 15) // 16 * 16
    if payload_debug_info and method.debugInfo:
        entries = [f'{{handle = {e.handle} : i64, location = "{e.location.decode()}", op = "{e.op.decode()}"}}'
                   for e in method.debugInfo]
    debug_info = f", debug_info = [{', '.join(entries)}]" if entries else ""
    args = live_ins + (live_outs if pass_live_outs else [])
    handle = f", debug_handle = {call_handle} : i64" if call_handle else ""
    call_loc = ' loc("outer.py":7:0)' if call_handle else ""
    lines.append(f'    "etx.delegate_call"({", ".join(args)}) {{backend = "nested", payload = "inner"{handle}, '
                 f'operandSegmentSizes = array<i32: {len(live_ins)}, {len(args) - len(live_ins)}>}} : '
                 f'({", ".join(["!etx.value"] * len(args))}) -> (){call_loc}')
    lines.append(f'    "etx.output"({", ".join(live_outs)}) : ({", ".join(["!etx.value"] * len(live_outs))}) -> ()')
    body = "\n".join(lines)
    return f'''
module {{
  "etx.payload"() {{sym_name = "inner", backend = "nested", data = dense_resource<inner_pte> : tensor<{len(payload)}xui8>, compile_specs = {{method = "forward"}}{debug_info}}} : () -> ()
  func.func @main() attributes {{etx.method = "forward", etx.arenas = [{{name = "planned", size = {max(offset, 16)} : i64}}]}} {{
{body}
    return
  }}
}}

{{-#
  dialect_resources: {{
    builtin: {{
      inner_pte: "0x40000000{payload.hex()}"
    }}
  }}
#-}}
'''


def write_etx(text: str, path: Path) -> bytes:
    with new_context() as ctx, ir.Location.unknown(ctx):
        data = etmlir.serialize(ir.Module.parse(text))
    path.write_bytes(data)
    print(f"[make_fixtures] {path}")
    return data


def write_lookup_fixture(out: Path) -> None:
    torch.manual_seed(0)
    model = Lookup().eval()
    et = etmlir.to_edge(etmlir.export(model, (torch.tensor([1, 2, 3]),))).to_executorch()
    et.save(out / "lookup.pte")
    method = pte.read(et.buffer).program.methods[0]
    (where,) = {e.location.decode() for e in method.debugInfo if e.op == b"edge.embedding"}
    (out / "lookup.where.txt").write_text(where + "\n")
    print(f"[make_fixtures] {out / 'lookup.pte'}")


def write_nested_fixtures(out: Path) -> None:
    for inner in ("mlp", "mlp_unplanned_io", "dynamic", "lookup"):
        write_etx(nested_module((out / f"{inner}.pte").read_bytes()), out / f"nested_{inner}.pte")
    write_etx(nested_module((out / "nested_lookup.pte").read_bytes()), out / "nested_nested_lookup.pte")
    write_etx(nested_module((out / "lookup.pte").read_bytes(), payload_debug_info=False, call_handle=1000),
              out / "nested_lookup_no_debug.pte")
    write_etx(nested_module((out / "mlp.pte").read_bytes(), pass_live_outs=False), out / "nested_mlp_no_live_out.pte")
    junk = DELEGATE_MODULE.replace("\"fake_delegate\"", "\"nested\"")
    write_etx(junk, out / "nested_junk.pte")


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: make_fixtures.py OUTDIR", file=sys.stderr)
        return 2
    out = Path(argv[1])
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    for name in ZOO_FIXTURES:
        write_zoo_fixture(name, out)
        print(f"[make_fixtures] {out / (name + '.pte')}")
    write_dynamic_fixture(out)
    print(f"[make_fixtures] {out / 'dynamic.pte'}")
    write_delegate_fixture(out)
    print(f"[make_fixtures] {out / 'delegate.pte'}")
    write_lookup_fixture(out)
    write_nested_fixtures(out)
    write_tosa_fixture(out)
    write_vulkan_fixture(out)
    etmlir.to_edge(etmlir.export(Counter(), (torch.ones(4),))).to_executorch().save(out / "counter.pte")
    print(f"[make_fixtures] {out / 'counter.pte'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
