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

The C++ tests find OUTDIR through the environment variable ETMLIR_TEST_PTE_DIR.
"""

from __future__ import annotations

import sys
from pathlib import Path

import etmlir
import torch
from etmlir import models
from etmlir.dialects import new_context
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


def write_delegate_fixture(out: Path) -> None:
    with new_context() as ctx, ir.Location.unknown(ctx):
        module = ir.Module.parse(DELEGATE_MODULE)
        data = etmlir.serialize(module)
    (out / "delegate.pte").write_bytes(data)


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
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
