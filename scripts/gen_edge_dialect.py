"""Generate the `edge` dialect from PyTorch's own operator schemas.

    python scripts/gen_edge_dialect.py          # rewrite dialects/edge/*
    python scripts/gen_edge_dialect.py --check  # exit 1 if the files on disk are stale

Inputs, all read from the installed PyTorch (pinned to 2.13.0):
  * every overload tagged `torch.Tag.core`; out variants (`atan2.out`) are
    left out when their functional overload is core too, and core view ops
    are represented by their `*_copy` variant (the Edge level has value
    semantics: no op returns an alias);
  * the `*_copy` variants of the common view ops, whether or not the view is
    tagged core (`transpose_copy.int`, `t_copy`, `unbind_copy.int`, ...);
  * the ops outside Core ATen that a backend may ask to keep whole (`KEEPABLE`:
    `scaled_dot_product_attention`, which the cpu backend runs as one kernel);
  * etmlir's own layout op `_to_dim_order_copy` (a declared schema below) and
    its scalar arithmetic on sizes (`sym_add`, `sym_floordiv`, `sym_max`, ...:
    the schemas in `etmlir.dialects.sym_ops`, whose results are 0-d tensors
    of the schema's return type: i64 for int, f64 for float, i1 for bool);
  * the dtype table of each op: the CPU dtypes PyTorch's OpInfo database says
    the op supports (`torch.testing._internal.common_methods_invocations`),
    shaped per operand by its role (index, mask, scalar, data), then narrowed
    to what the op's portable kernel takes (the kernel table,
    `runtime/kernels/portable/*.yaml`: `dtypes` for data operands,
    `out_dtypes` for data results), so that a dtype the runtime cannot run is
    refused at compile time, at the op's source line. Complex dtypes are
    dropped everywhere (the runtime has none).

Outputs:
  * `dialects/edge/edge.irdl.mlir`: the IRDL declaration MLIR loads at run time
    (operands, results and required attributes of every op);
  * `dialects/edge/edge_ops.json`: per op, the ATen name and overload it comes
    from, its schema, how each schema argument is represented (operand or
    attribute, and which kind), its dtype table, and `broadcast` for the ops
    PyTorch tags pointwise (their tensor operands broadcast together, which the
    verifier checks on static shapes). The Python side (`etmlir.dialects.edge`)
    reads it for conversion and verification.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import torch
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.opinfo.core import BinaryUfuncInfo

from etmlir.dialects.edge import EDGE_ELEMENT_TYPES
from etmlir.dialects.sym_ops import SYM_OPS
from etmlir.executable.out_variants import out_variant
from gen_kernels import load_table
from etmlir.frontend.aten_ops import lookup_overload, schema_argument_types
from etmlir.frontend.core_aten import core_aten_overloads

ROOT = Path(__file__).resolve().parents[1]
OUT_DIR = ROOT / "dialects" / "edge"
IRDL_PATH = OUT_DIR / "edge.irdl.mlir"
JSON_PATH = OUT_DIR / "edge_ops.json"

# torch dtype -> the element type an edge tensor uses (one table, shared with the dialect loader).
DTYPES = {getattr(torch, name): element for name, element in EDGE_ELEMENT_TYPES.items()}
ALL_DTYPES = sorted(set(DTYPES.values()))
# 0-d tensors that stand for a Python scalar: bool, int and float scalars.
SCALAR_DTYPES = ["f64", "i1", "i64"]
INDEX_DTYPES = ["i32", "i64"]

# View ops whose `*_copy` variant the Edge level uses even when the view itself is not core.
EXTRA_COPY_VARIANTS = [
    "aten.transpose_copy.int", "aten.t_copy.default", "aten.unbind_copy.int", "aten.split_copy.Tensor",
    "aten.squeeze_copy.default", "aten.detach_copy.default", "aten.unfold_copy.default",
    "aten.alias_copy.default", "aten.narrow_copy.default",
]

# Ops outside Core ATen that a backend runs as one kernel, so `EdgeCompileConfig(keep=...)` may keep
# them from decomposition (the op then has to be delegated: no portable kernel runs it).
KEEPABLE = ["aten.scaled_dot_product_attention.default"]

# etmlir's own ops, declared as PyTorch schemas so they go through the same generator.
DECLARED_SCHEMAS = {
    # `_to_copy` with the memory layout spelled as a dim order (ExecuTorch's convention):
    # dim_order = [0, 2, 3, 1] is channels-last for a 4-d tensor; None keeps the input's.
    "etmlir._to_dim_order_copy.default":
        "etmlir::_to_dim_order_copy(Tensor self, *, ScalarType? dtype=None, bool non_blocking=False, "
        "int[]? dim_order=None) -> Tensor",
    # Scalar arithmetic on sizes computed at run time (etmlir.dialects.sym_ops).
    **{f"etmlir.{op.name}.default": op.schema for op in SYM_OPS.values()},
}

# Packets with no OpInfo of their own: the OpInfo whose dtypes describe the same kernels.
OPINFO_ALIASES = {
    "_adaptive_avg_pool2d": "nn.functional.adaptive_avg_pool2d",
    "_adaptive_avg_pool2d_backward": "nn.functional.adaptive_avg_pool2d",
    "_adaptive_avg_pool3d": "nn.functional.adaptive_avg_pool3d",
    "_cdist_forward": "cdist", "_embedding_bag": "nn.functional.embedding_bag",
    "_fft_c2r": "fft.irfft", "_fft_r2c": "fft.rfft", "_local_scalar_dense": "item",
    "_log_softmax": "log_softmax", "_softmax": "softmax",
    "_native_batch_norm_legit_no_training": "nn.functional.batch_norm",
    "_pdist_forward": "nn.functional.pdist", "_to_copy": "to", "_to_dim_order_copy": "to",
    "adaptive_avg_pool1d": "nn.functional.adaptive_avg_pool1d",
    "avg_pool2d_backward": "nn.functional.avg_pool2d",
    "convolution": "nn.functional.conv2d", "convolution_backward": "nn.functional.conv2d",
    "copy": "clone", "alias": "clone", "detach": "clone", "elu": "nn.functional.elu", "embedding": "nn.functional.embedding",
    "embedding_dense_backward": "nn.functional.embedding", "index": "__getitem__",
    "max_pool2d_with_indices": "nn.functional.max_pool2d", "max_pool3d_with_indices": "nn.functional.max_pool3d",
    "native_dropout": "nn.functional.dropout", "native_group_norm_backward": "nn.functional.group_norm",
    "native_layer_norm_backward": "nn.functional.layer_norm",
    "reflection_pad1d": "nn.functional.pad:reflect", "reflection_pad2d": "nn.functional.pad:reflect",
    "reflection_pad3d": "nn.functional.pad:reflect", "replication_pad2d": "nn.functional.pad:replicate",
    "replication_pad3d": "nn.functional.pad:replicate",
    "upsample_bilinear2d": "nn.functional.interpolate:bilinear",
    "upsample_nearest2d": "nn.functional.interpolate:nearest",
    "col2im": "nn.functional.unfold",
    "scaled_dot_product_attention": "nn.functional.scaled_dot_product_attention",
}
# Packets PyTorch's OpInfo database does not describe at all, with the dtypes their kernels take.
DECLARED_DTYPES = {
    "rand": ["bf16", "f16", "f32", "f64"],
    "randperm": ["bf16", "f16", "f32", "f64", "i16", "i32", "i64", "i8", "ui8"],
    "sym_size": ALL_DTYPES, "sym_numel": ALL_DTYPES, "sym_stride": ALL_DTYPES, "sym_storage_offset": ALL_DTYPES,
    "sym_is_contiguous": ALL_DTYPES,
    **{name: ALL_DTYPES for name in SYM_OPS},
}
# The 0-d tensor a size op's scalar result is, by the schema's return type.
SIZE_RESULT_DTYPES = {"int": ["i64"], "bool": ["i1"], "float": ["f64"], "number": SCALAR_DTYPES}
# Elementwise ops whose operands may have different dtypes (PyTorch type promotion),
# beyond the binary ufuncs OpInfo marks as such.
PROMOTING = {"where", "clamp", "lerp", "addcmul", "addcdiv"}
# Ops whose tensor results are booleans whatever their inputs.
BOOL_RESULT = {"eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "logical_not",
               "isinf", "isnan", "any", "all", "isposinf", "isneginf", "bitwise_not_bool"}
# Results that are boolean masks whatever the input (op -> result names).
MASK_RESULTS = {"native_dropout": {"result1"}}
# Ops whose tensor results are int64 indices.
INDEX_RESULT = {"argmax", "argmin", "randperm", "nonzero"}
INDEX_ARG_NAMES = {"index", "indices", "offsets", "per_sample_weights_indices"}
MASK_ARG_NAMES = {"condition", "mask"}
# Masks that are either boolean (True: attend) or additive in the data dtype (not tied to it).
BOOL_OR_DATA_MASKS = {"attn_mask"}
# Ops whose result dtype is chosen by an attribute, not by their inputs.
CASTS = {"_to_copy", "_to_dim_order_copy"}

# Schema argument type (as the schema declares it) -> (kind, representation).
_ATTR_KINDS = {
    "int": "int", "int?": "int?", "SymInt": "symint", "SymInt?": "symint?", "int[]": "int[]",
    "int[]?": "int[]?", "SymInt[]": "symint[]", "SymInt[]?": "symint[]?", "bool": "bool", "bool?": "bool?",
    "bool[]": "bool[]", "float": "float", "float?": "float?", "float[]": "float[]", "float[]?": "float[]?",
    "str": "str", "str?": "str?", "ScalarType": "dtype", "ScalarType?": "dtype?", "Layout?": "layout?",
    "Device?": "device?", "MemoryFormat": "memory_format", "MemoryFormat?": "memory_format?", "Generator?": "generator?",
}
_OPERAND_KINDS = {"Tensor": "tensor", "Tensor?": "tensor?", "Tensor[]": "tensor[]", "Tensor?[]": "tensor?[]",
                  "Scalar": "scalar", "Scalar?": "scalar?"}
# Attribute kind -> the IRDL base constraint of its attribute.
_IRDL_ATTR_BASE = {
    "int": "#builtin.integer", "symint": "#builtin.integer", "bool": "#builtin.integer",
    "float": "#builtin.float", "str": "#builtin.string", "dtype": "#builtin.type",
    "layout": "#builtin.string", "device": "#builtin.string", "memory_format": "#builtin.string",
    "int[]": "#builtin.dense_array", "symint[]": "#builtin.dense_array", "bool[]": "#builtin.dense_array",
    "float[]": "#builtin.dense_array",
}


class GeneratorError(Exception):
    pass


def _normalize_declared(declared: str) -> str:
    # `int[2]` / `SymInt[3]` are fixed-length lists: the same representation as `int[]`.
    for base in ("SymInt", "int", "bool", "float"):
        for n in "123456":
            declared = declared.replace(f"{base}[{n}]", f"{base}[]")
    # Argument types carrying alias annotations (`Tensor(a)`) are plain tensors at the Edge level.
    if declared.startswith("Tensor("):
        declared = "Tensor" + declared[declared.index(")") + 1:]
    return declared


def op_mnemonic(packet: str, overload: str) -> str:
    """`add.Tensor` -> `add_tensor`; `relu.default` -> `relu`; `_softmax` -> `softmax`.

    MLIR op names are lower case, with no leading or double underscores; the
    exact ATen name is kept in the op table (a collision fails generation).
    """
    name = packet.lstrip("_") if overload == "default" else f"{packet.lstrip('_')}_{overload.lower()}"
    while "__" in name:
        name = name.replace("__", "_")
    return name


def describe(qualified: str, schema: torch.FunctionSchema, declared: tuple[str, ...],
             dtype_info: tuple[list[str], str, bool], stands_for: str | None) -> dict[str, Any]:
    namespace, packet, overload = qualified.split(".")
    args = []
    for argument, declared_type in zip(schema.arguments, declared):
        declared_type = _normalize_declared(declared_type)
        if argument.alias_info is not None and argument.alias_info.is_write:
            raise GeneratorError(f"{qualified}: mutates argument '{argument.name}'")
        if declared_type in _OPERAND_KINDS:
            args.append({"name": argument.name, "kind": _OPERAND_KINDS[declared_type]})
        elif declared_type in _ATTR_KINDS:
            args.append({"name": argument.name, "kind": _ATTR_KINDS[declared_type]})
        else:
            raise GeneratorError(f"{qualified}: argument '{argument.name}' has unsupported type '{declared_type}'")
    results = []
    for index, ret in enumerate(schema.returns):
        name = ret.name or ("result" if len(schema.returns) == 1 else f"result{index}")
        text = str(ret.type)
        if text == "Tensor":
            results.append({"name": name, "kind": "tensor"})
        elif text == "List[Tensor]":
            results.append({"name": name, "kind": "tensor[]"})
        elif text in ("int", "number", "float", "bool"):
            results.append({"name": name, "kind": "scalar"})  # a 0-d tensor
        else:
            raise GeneratorError(f"{qualified}: result '{name}' has unsupported type '{text}'")
    dtypes, source, promoting = dtype_info
    dtypes = [d for d in dtypes if not d.startswith("complex")]
    entry = {
        "aten": f"{namespace}::{packet}" + ("" if overload == "default" else f".{overload}"),
        "schema": str(schema),
        "args": args,
        "results": results,
        "dtypes": narrow_to_kernel(qualified, dtype_table(packet, args, results, dtypes, promoting,
                                                          [str(r.type) for r in schema.returns]), args, results),
        "dtype_source": source,
    }
    if stands_for:
        entry["stands_for"] = stands_for
    return entry


def dtype_table(packet: str, args: list[dict], results: list[dict], data: list[str],
                promoting: bool, returns: list[str]) -> dict[str, Any]:
    """Allowed dtypes per tensor position, plus the groups of positions that must agree.

    `returns` are the schema's return types (`int`, `Tensor`, ...), one per result.
    """
    allowed: dict[str, list[str]] = {}
    same: list[str] = []
    has_dtype_attr = any(a["kind"].startswith("dtype") for a in args)
    for arg in args:
        kind, name = arg["kind"], arg["name"]
        if kind.startswith("scalar"):
            allowed[name] = SCALAR_DTYPES
        elif not kind.startswith("tensor"):
            continue
        elif name in INDEX_ARG_NAMES:
            allowed[name] = INDEX_DTYPES + (["i1", "ui8"] if packet in ("index", "_unsafe_index") else [])
        elif name in MASK_ARG_NAMES:
            allowed[name] = ["i1"]
        elif name in BOOL_OR_DATA_MASKS:
            allowed[name] = ["i1"] + data
        else:
            allowed[name] = data
            if not promoting:
                same.append(name)
    for res, returned in zip(results, returns):
        kind, name = res["kind"], res["name"]
        if kind == "scalar":
            if packet.startswith("sym_"):  # size queries and size arithmetic: one kind of value
                allowed[name] = SIZE_RESULT_DTYPES[returned]
            else:
                allowed[name] = SCALAR_DTYPES
        elif packet in BOOL_RESULT or name in MASK_RESULTS.get(packet, ()):
            allowed[name] = ["i1"]
        elif (packet in INDEX_RESULT or name == "indices"
              or (packet.endswith("_with_indices") or packet in ("sort", "topk", "max", "min"))
              and res is results[-1] and len(results) == 2):
            allowed[name] = ["i64"]
        elif packet in CASTS:
            allowed[name] = ALL_DTYPES
        else:
            allowed[name] = data
            if not promoting and not has_dtype_attr:
                same.append(name)
    return {"allowed": allowed, "same": [same] if len(same) > 1 else []}


_KERNELS: dict[str, Any] | None = None


def narrow_to_kernel(qualified: str, table: dict[str, Any], args: list[dict], results: list[dict]) -> dict[str, Any]:
    """`table` with each data position limited to the dtypes the op's portable kernel takes.

    Index, mask and scalar positions keep their fixed lists (kernels take those); an op with no
    portable kernel (or one the kernel table marks missing) keeps the OpInfo dtypes.
    """
    global _KERNELS
    if _KERNELS is None:
        _KERNELS = {k.op: k for family in load_table() for k in family.kernels}
    namespace, packet, overload = qualified.split(".")
    variant = out_variant(f"{namespace}::{packet}" + ("" if overload == "default" else f".{overload}"))
    kernel = _KERNELS.get(variant.kernel) if variant else None
    if kernel is None or not kernel.fn:
        return table
    fixed = SCALAR_DTYPES, INDEX_DTYPES, ["i1"], ["i64"], ALL_DTYPES
    allowed = dict(table["allowed"])
    names = {a["name"]: kernel.dtypes for a in args} | {r["name"]: kernel.out_dtypes for r in results}
    for name, dtypes in allowed.items():
        is_data = not any(dtypes == f for f in fixed[:4]) and not (name in INDEX_ARG_NAMES or name in MASK_ARG_NAMES)
        if is_data or (dtypes == ALL_DTYPES and name in {r["name"] for r in results}):
            allowed[name] = [d for d in dtypes if d in names[name]]
    return {"allowed": allowed, "same": table["same"]}


def _opinfo_dtypes() -> dict[str, tuple[list[str], bool]]:
    """OpInfo name (and `name:variant`) -> (CPU dtypes as edge element types, promotes operand types).

    A plain name takes its default variant only (`softmax`, not `softmax:with_dtype`, whose
    extra dtypes come from casting first).
    """
    entries: dict[str, list[Any]] = {}
    for info in op_db:
        keys = {f"{info.name}:{info.variant_test_name}"}
        if not info.variant_test_name:
            keys |= {info.name, info.aten_name}
        for key in keys:
            if key:
                entries.setdefault(key, []).append(info)
    for info in op_db:  # names that only exist as variants: union of them
        if info.name not in entries:
            entries.setdefault(info.name, []).extend(i for i in op_db if i.name == info.name)
    table = {}
    for key, infos in entries.items():
        dtypes = sorted({DTYPES[d] for info in infos for d in info.dtypes if d in DTYPES})
        table[key] = (dtypes, any(isinstance(info, BinaryUfuncInfo) for info in infos))
    return table


def dtype_source(packet: str, opinfo: dict[str, tuple[list[str], bool]]) -> tuple[list[str], str, bool]:
    candidates = [OPINFO_ALIASES.get(packet), packet]
    if packet.endswith("_copy"):  # a view's copy variant takes the view's dtypes
        view = packet[: -len("_copy")]
        candidates += [OPINFO_ALIASES.get(view), view]
    for name in candidates:
        if name and name in opinfo:
            dtypes, promoting = opinfo[name]
            return dtypes, f"OpInfo {name}", promoting or packet in PROMOTING
    if packet in DECLARED_DTYPES:
        return DECLARED_DTYPES[packet], "declared", False
    raise GeneratorError(f"no dtype source for '{packet}': add it to OPINFO_ALIASES or DECLARED_DTYPES")


def collect_ops() -> tuple[dict[str, dict[str, Any]], dict[str, int]]:
    opinfo = _opinfo_dtypes()
    ops: dict[str, dict[str, Any]] = {}
    stats = {"core": 0, "core_as_copy_variant": 0, "core_out_variants_skipped": 0, "extra_copy_variants": 0,
             "keepable": 0, "declared": 0}
    core = sorted(core_aten_overloads())

    def add(qualified: str, schema: torch.FunctionSchema, declared: tuple[str, ...],
            stands_for: str | None = None) -> None:
        _, packet, overload = qualified.split(".")
        mnemonic = op_mnemonic(packet, overload)
        if mnemonic in ops:
            if ops[mnemonic]["schema"] == str(schema):
                return
            raise GeneratorError(f"op name collision: edge.{mnemonic} for {qualified} and {ops[mnemonic]['aten']}")
        entry = describe(qualified, schema, declared, dtype_source(packet, opinfo), stands_for)
        found = lookup_overload(qualified)
        if found is not None and torch.Tag.pointwise in found.tags:
            entry["broadcast"] = True  # its tensor operands broadcast together (etmlir.dialects.edge_shapes)
        ops[mnemonic] = entry

    for name in core:
        overload = lookup_overload(name)
        schema = overload._schema
        if any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments):
            functional = name.rsplit(".", 1)[0] + ".default"
            if functional in core:
                stats["core_out_variants_skipped"] += 1
                continue
            raise GeneratorError(f"{name} mutates its arguments and has no core functional overload")
        stats["core"] += 1
        if any(r.alias_info is not None for r in schema.returns):  # a view: use its copy variant
            _, packet, over = name.split(".")
            copy_name = f"aten.{packet}_copy.{over}"
            copy = lookup_overload(copy_name)
            if copy is None:
                raise GeneratorError(f"view op {name} has no copy variant {copy_name}")
            add(copy_name, copy._schema, schema_argument_types(copy._schema), stands_for=f"aten::{packet}"
                + ("" if over == "default" else f".{over}"))
            stats["core_as_copy_variant"] += 1
            continue
        add(name, schema, schema_argument_types(schema))
    def add_overload(name: str) -> int:
        """Add PyTorch's overload `name`; how many ops that added (0: an op already declared the same)."""
        overload = lookup_overload(name)
        if overload is None:
            raise GeneratorError(f"PyTorch has no {name}")
        before = len(ops)
        add(name, overload._schema, schema_argument_types(overload._schema))
        return len(ops) - before

    for name in EXTRA_COPY_VARIANTS:
        stats["extra_copy_variants"] += add_overload(name)
    for name in KEEPABLE:
        stats["keepable"] += add_overload(name)
    for name, text in DECLARED_SCHEMAS.items():
        schema = torch._C.parse_schema(text)
        add(name, schema, schema_argument_types(schema))
        stats["declared"] += 1
    return dict(sorted(ops.items())), stats


def irdl_text(ops: dict[str, dict[str, Any]], header: str) -> str:
    lines = [header, "irdl.dialect @edge {"]
    for mnemonic, info in ops.items():
        lines.append(f"  // {info['schema']}")
        lines.append(f"  irdl.operation @{mnemonic} {{")
        body, operands, attributes, results = [], [], [], []
        counter = 0

        def constraint(base: str) -> str:
            nonlocal counter
            counter += 1
            body.append(f"    %c{counter} = irdl.base \"{base}\"")
            return f"%c{counter}"

        has_sym = False
        for arg in info["args"]:
            kind = arg["kind"]
            if kind in ("tensor", "scalar"):
                operands.append(f"{arg['name']}: {constraint('!builtin.tensor')}")
            elif kind in ("tensor?", "scalar?"):
                operands.append(f"{arg['name']}: optional {constraint('!builtin.tensor')}")
            elif kind in ("tensor[]", "tensor?[]"):
                # IRDL gives every value of a variadic group the same type; et-to-edge casts a
                # list of different shapes to one joined type (see passes/to_edge.py).
                operands.append(f"{arg['name']}: variadic {constraint('!builtin.tensor')}")
            else:
                has_sym = has_sym or kind.startswith("symint")
                if not kind.endswith("?"):  # optional attributes are checked by the Python verifier
                    attributes.append(f"\"{arg['name']}\" = {constraint(_IRDL_ATTR_BASE[kind])}")
        for arg in info["args"]:
            if arg["kind"] == "tensor?[]":
                attributes.append(f"\"{arg['name']}_present\" = {constraint('#builtin.dense_array')}")
        if has_sym:
            operands.append(f"sym_values: variadic {constraint('!builtin.tensor')}")
        for res in info["results"]:
            prefix = "variadic " if res["kind"] == "tensor[]" else ""
            results.append(f"{res['name']}: {prefix}{constraint('!builtin.tensor')}")
        lines += body
        if operands:
            lines.append(f"    irdl.operands({', '.join(operands)})")
        if attributes:
            lines.append(f"    irdl.attributes {{ {', '.join(attributes)} }}")
        lines.append(f"    irdl.results({', '.join(results)})")
        lines.append("  }")
    lines += STRUCTURAL_IRDL.splitlines()
    lines.append("}")
    return "\n".join(lines) + "\n"


# Ops that are not PyTorch operators: weights and other constants, and custom ops passed through.
STRUCTURAL_IRDL = """\
  // A constant tensor: weights (dense_resource, not copied) and scalars turned into 0-d tensors.
  irdl.operation @constant {
    %v = irdl.any
    %t = irdl.base "!builtin.tensor"
    irdl.attributes { "value" = %v }
    irdl.results(result: %t)
  }
  // A custom op registered with torch.library, passed through untouched.
  irdl.operation @custom_op {
    %s = irdl.base "#builtin.string"
    %s2 = irdl.base "#builtin.string"
    %d = irdl.base "#builtin.dictionary"
    %t = irdl.base "!builtin.tensor"
    %r = irdl.base "!builtin.tensor"
    irdl.operands(inputs: variadic %t)
    irdl.attributes { "op" = %s, "schema" = %s2, "args" = %d }
    irdl.results(results: variadic %r)
  }"""


def generate() -> tuple[str, str, str]:
    ops, stats = collect_ops()
    summary = (f"{len(ops) + 2} edge ops: {stats['core']} torch.Tag.core overloads "
               f"({stats['core_as_copy_variant']} views as their *_copy variant; "
               f"{stats['core_out_variants_skipped']} out-variant overloads folded into their functional op), "
               f"{stats['extra_copy_variants']} more *_copy variants, {stats['keepable']} keepable op(s) outside Core ATen, "
               f"{stats['declared']} etmlir ops "
               f"(_to_dim_order_copy and {stats['declared'] - 1} sym_* size arithmetic), constant and custom_op")
    header = (f"// GENERATED by scripts/gen_edge_dialect.py from torch {torch.__version__}: do not edit.\n"
              f"// {summary}")
    head = {
        "_generated": f"by scripts/gen_edge_dialect.py from torch {torch.__version__}: do not edit",
        "torch_version": torch.__version__,
        "summary": summary,
        "dtypes": ALL_DTYPES,
    }
    # One op per line: small diffs when PyTorch or the generator changes.
    lines = [f" {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()]
    lines.append(' "ops": {')
    lines.append(",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in ops.items()))
    lines.append(" }")
    document = "{\n" + "\n".join(lines) + "\n}\n"
    json.loads(document)  # the hand-joined text must stay valid JSON
    return irdl_text(ops, header), document, summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the generated files are stale")
    args = parser.parse_args(argv)
    try:
        irdl, document, summary = generate()
    except GeneratorError as exc:
        print(f"gen_edge_dialect: error: {exc}", file=sys.stderr)
        return 1
    outputs = {IRDL_PATH: irdl, JSON_PATH: document}
    if args.check:
        stale = [p for p, text in outputs.items() if not p.exists() or p.read_text() != text]
        if stale:
            names = ", ".join(str(p.relative_to(ROOT)) for p in stale)
            print(f"gen_edge_dialect: {names} out of date; run `python scripts/gen_edge_dialect.py`",
                  file=sys.stderr)
            return 1
        print(f"gen_edge_dialect: up to date ({summary})")
        return 0
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    for path, text in outputs.items():
        path.write_text(text)
    print(f"gen_edge_dialect: wrote {IRDL_PATH.relative_to(ROOT)} and {JSON_PATH.relative_to(ROOT)}")
    print(f"gen_edge_dialect: {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
