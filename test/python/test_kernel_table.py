"""The kernel table, the runtime's registry and the edge dialect's dtype tables agree.

The invariant: whatever `et-edge-verify` accepts, the runtime has a kernel
for. The kernel table (`runtime/kernels/portable/*.yaml`, generated into
`python/etmlir/runtime/kernel_table.json`) is the one list of kernels; the
edge generator narrows each op's dtypes to its kernel's, and these tests
check the three artifacts against each other (that each kernel really runs
every dtype it claims is the OpInfo sweep's job, test_opinfo.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from etmlir.executable.out_variants import out_variant
from etmlir.runtime import kernels
from etmlir.runtime.signatures import expected_signature

ROOT = Path(__file__).resolve().parents[2]
TABLE = json.loads((ROOT / "python/etmlir/runtime/kernel_table.json").read_text())["kernels"]
EDGE_OPS = json.loads((ROOT / "dialects/edge/edge_ops.json").read_text())["ops"]
BY_OP = {k["op"]: k for k in TABLE}
WITH_KERNEL = [k for k in TABLE if "fn" in k]
# Kernels the runtime registers outside the portable table: its own size queries and declared ops.
NOT_PORTABLE_PREFIXES = ("etmlir_prim::",)


def _kernel_of(mnemonic: str) -> str | None:
    variant = out_variant(EDGE_OPS[mnemonic]["aten"])
    return variant.kernel.removesuffix(".default") if variant else None


@pytest.mark.parametrize("entry", WITH_KERNEL, ids=lambda k: k["op"])
def test_every_table_kernel_is_registered_with_its_schema_signature(entry):
    assert entry["op"] in set(kernels.registered()), f"{entry['op']} is in the kernel table but not registered"
    assert kernels.signature(entry["op"]) == entry["signature"] == expected_signature(entry["op"])


def test_every_registered_portable_kernel_is_in_the_table():
    extra = [n for n in kernels.registered() if n not in BY_OP and not n.startswith(NOT_PORTABLE_PREFIXES)
             and n != "etmlir::_to_dim_order_copy.out"]
    assert not extra, f"registered but not in runtime/kernels/portable/*.yaml: {extra}"


def test_missing_kernels_say_why():
    for entry in TABLE:
        if "fn" not in entry:
            assert len(entry.get("missing", "")) > 20, f"{entry['op']}: 'missing' needs a reason a user can act on"


# Scalar, index, mask and index-result positions: fixed by the dialect, taken by every kernel.
FIXED_POSITIONS = (["f64", "i1", "i64"], ["i32", "i64"], ["i32", "i64", "i1", "ui8"], ["i1"], ["i64"])
NO_OUT_VARIANT = {"sym_is_contiguous", "local_scalar_dense"}  # see docs/op_coverage.md
# Ops outside Core ATen that a backend runs whole (EdgeCompileConfig(keep=...)): no portable kernel by
# design; to_executorch names such an op when no backend took it (test_cpu_attention.py).
KEPT_FOR_BACKENDS = {"scaled_dot_product_attention"}


@pytest.mark.parametrize("mnemonic", [m for m in EDGE_OPS if EDGE_OPS[m].get("aten")])
def test_edge_accepts_no_dtype_its_kernel_lacks(mnemonic):
    op = EDGE_OPS[mnemonic]
    kernel = _kernel_of(mnemonic)
    if kernel is None:
        assert mnemonic in NO_OUT_VARIANT | KEPT_FOR_BACKENDS, \
            f"edge.{mnemonic} ({op['aten']}) has no out-variant kernel at all"
        return
    if kernel.startswith(NOT_PORTABLE_PREFIXES):
        return  # the runtime's own size queries take any tensor
    entry = BY_OP.get(kernel)
    assert entry is not None, f"edge.{mnemonic}: its kernel {kernel} is not in the kernel table (add it, or 'missing')"
    if "fn" not in entry:
        return  # no kernel, with its reason: the coverage table lists it
    results = {r["name"] for r in op["results"]}
    for name, allowed in op["dtypes"]["allowed"].items():
        if sorted(allowed) in [sorted(f) for f in FIXED_POSITIONS]:
            continue
        supported = set(entry["out_dtypes"] if name in results else entry["dtypes"])
        gap = set(allowed) - supported
        assert not gap, (f"edge.{mnemonic} accepts {sorted(gap)} for '{name}', but {kernel} does not take them: "
                         "regenerate the edge dialect (make generate) or extend the kernel")
