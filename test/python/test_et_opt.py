"""et-opt under misuse: every failure is one clear message and exit status 1, never a traceback.

Covers what used to print a Python traceback or crash the process: input that
is not UTF-8, `-o` into a missing directory, a `--load` file that raises, deep
nesting (5,000 nested modules overflowed the parser's stack), options no pass
could use, passes run on a module of the wrong level, a tensor too big for a
memory plan, and static shapes that cannot work together (the edge verifier
names the op, the shapes and the source line). A bug in a pass is exit status
2 ("internal error"), with the traceback only under `--debug`.

Runs et-opt in-process (`et_opt.main`) and, for the real entry point's exit
statuses and stderr, a few subprocesses.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from torch_mlir import ir

from etmlir.dialects import new_context
from etmlir.passes import all_passes, run_pipeline
from etmlir.tools import et_opt

TRACEBACK = "Traceback (most recent call last)"
ET_OPT = Path(sys.executable).parent / "et-opt"

TORCH_ADD = """
func.func @main(%x: !torch.vtensor<[2,3],f32>, %y: !torch.vtensor<[2,3],f32>) -> !torch.vtensor<[2,3],f32> {
  %int1 = torch.constant.int 1
  %0 = torch.aten.add.Tensor %x, %y, %int1 : !torch.vtensor<[2,3],f32>, !torch.vtensor<[2,3],f32>, !torch.int -> !torch.vtensor<[2,3],f32>
  return %0 : !torch.vtensor<[2,3],f32>
}
"""
EDGE_ADD = """
func.func @main(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %one = "edge.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %0 = "edge.add_tensor"(%x, %x, %one) : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<i64>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}
"""
ETX_RELU = """
func.func @main() attributes {etx.method = "forward"} {
  %0 = "etx.input"() {index = 0 : i64, type = tensor<2x4xf32>} : () -> !etx.value
  %1 = "etx.alloc"() {type = %TYPE%} : () -> !etx.value
  "etx.kernel_call"(%0, %1) {kernel = "aten::relu.out", operandSegmentSizes = array<i32: 1, 1>} : (!etx.value, !etx.value) -> ()
  "etx.output"(%1) : (!etx.value) -> ()
  return
}
"""
LEVEL_INPUTS = {"torch": TORCH_ADD, "edge": EDGE_ADD, "etx": ETX_RELU.replace("%TYPE%", "tensor<2x4xf32>")}


def et_opt_run(capsys, argv: list[str]) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of `et-opt argv`, in-process."""
    code = et_opt.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert TRACEBACK not in err, err
    return code, out, err


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


# --- input and output files -------------------------------------------------------------------------


def test_input_that_is_not_utf8_is_an_error_at_the_byte(tmp_path, capsys):
    path = tmp_path / "bad.mlir"
    path.write_bytes(b"module {}\n  \xff\xfe")
    code, _, err = et_opt_run(capsys, [path])
    assert code == 1
    assert f"et-opt: error: {path}:2:3: not UTF-8 text (byte 0xff)" in err


def test_output_into_a_missing_directory_is_an_error(tmp_path, capsys):
    path = write(tmp_path, "ok.mlir", "module {}")
    code, _, err = et_opt_run(capsys, [path, "-o", tmp_path / "missing" / "out.mlir"])
    assert code == 1
    assert f"et-opt: error: cannot write '{tmp_path / 'missing' / 'out.mlir'}': No such file or directory" in err


def test_missing_input_and_directory_input_are_errors(tmp_path, capsys):
    code, _, err = et_opt_run(capsys, [tmp_path / "nope.mlir"])
    assert code == 1 and "cannot read" in err and "No such file or directory" in err
    code, _, err = et_opt_run(capsys, [tmp_path])
    assert code == 1 and "Is a directory" in err


def test_load_file_that_raises_when_run(tmp_path, capsys):
    path = write(tmp_path, "ok.mlir", "module {}")
    boom = write(tmp_path, "boom.py", "x = 1\nraise RuntimeError('boom')\n")
    code, _, err = et_opt_run(capsys, [path, "--load", boom])
    assert code == 1
    assert f"et-opt: error: --load {boom} raised RuntimeError: boom (at {boom}:2)" in err
    leaves = write(tmp_path, "leaves.py", "import sys\nsys.exit(3)\n")
    code, _, err = et_opt_run(capsys, [path, "--load", leaves])
    assert code == 1 and "raised SystemExit: 3" in err
    binary = tmp_path / "binary.py"
    binary.write_bytes(b"\x00\xff")
    code, _, err = et_opt_run(capsys, [path, "--load", binary])
    assert code == 1 and f"cannot load '{binary}'" in err
    with pytest.raises(RuntimeError, match="boom"):  # --debug: the user's own traceback
        et_opt.main([str(path), "--load", str(boom), "--debug"])


def test_usage_errors_exit_1_and_debug_is_not_a_pass(tmp_path, capsys):
    path = write(tmp_path, "ok.mlir", "module {}")
    code, _, err = et_opt_run(capsys, [path, "--list"])  # no abbreviation of --list-passes
    assert code == 1 and "unknown option or pass '--list'" in err
    code, _, err = et_opt_run(capsys, [path, "--mlir-elide-elementsattrs-if-larger=x"])
    assert code == 1 and "invalid int value: 'x'" in err
    code, out, err = et_opt_run(capsys, [path, "--debug", "--canonicalize"])
    assert code == 0 and "module" in out and err == ""


# --- nesting ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [5_000, 100_000])
def test_deep_nesting_is_refused_before_the_parser_recurses(tmp_path, capsys, depth):
    path = write(tmp_path, "deep.mlir", "module {" * depth + "}" * depth)
    code, _, err = et_opt_run(capsys, [path])
    assert code == 1
    assert (f"deep.mlir:1:{8 * et_opt.MAX_NESTING + 8}: error: input nests more than {et_opt.MAX_NESTING} levels "
            "deep (brackets, braces and regions); et-opt accepts at most") in err


@pytest.mark.parametrize("text", [
    "module attributes {t.x = " + "[" * 20_000 + "]" * 20_000 + "} {}",
    "func.func private @f() -> " + "tuple<" * 30_000 + "i32" + ">" * 30_000,
])
def test_deep_attributes_and_types_are_refused_too(tmp_path, capsys, text):
    code, _, err = et_opt_run(capsys, [write(tmp_path, "deep.mlir", text)])
    assert code == 1 and "levels deep" in err


def test_nesting_up_to_the_limit_works(tmp_path, capsys):
    depth = et_opt.MAX_NESTING - 1
    code, out, _ = et_opt_run(capsys, [write(tmp_path, "deep.mlir", "module {" * depth + "}" * depth), "--cse"])
    assert code == 0 and out.count("module {") == depth
    # Strings, comments and arrows do not count as nesting.
    text = 'module attributes {t.s = "' + "{" * 5000 + '"} {}\n// ' + "(" * 5000 + "\n"
    text += "".join(f"func.func private @g{i}(i32) -> i32\n" for i in range(3 * et_opt.MAX_NESTING))
    code, _, err = et_opt_run(capsys, [write(tmp_path, "flat.mlir", text)])
    assert code == 0, err


# --- levels -----------------------------------------------------------------------------------------


def _level_flags() -> list[tuple[str, str]]:
    return [(p.flag, p.level) for p in all_passes() if p.level is not None]


@pytest.mark.parametrize("given", ["torch", "edge", "etx"])
def test_a_pass_given_another_level_says_which_and_what_to_run(tmp_path, capsys, given):
    path = write(tmp_path, f"{given}.mlir", LEVEL_INPUTS[given])
    checked = 0
    for flag, level in _level_flags():
        if level == given:
            continue
        code, _, err = et_opt_run(capsys, [path, f"--{flag}"])
        assert code == 1, (flag, err)
        assert f"error: {flag} expects {'an' if level in ('edge', 'etx') else 'a'} " in err, (flag, err)
        assert "internal error" not in err, err
        checked += 1
    assert checked >= 5  # six passes take torch or etx, ten take edge


def test_to_out_variants_on_a_torch_module(tmp_path, capsys):
    code, _, err = et_opt_run(capsys, [write(tmp_path, "t.mlir", TORCH_ADD), "--et-to-out-variants"])
    assert code == 1
    assert ("t.mlir:3:11: error: et-to-out-variants expects an edge-dialect module; found 'torch.constant.int' "
            "(a torch-dialect op): run --et-to-edge first (after --et-decompose-to-core-aten)") in err


def test_every_pass_on_every_level_is_a_result_or_a_diagnostic(tmp_path, capsys):
    """No pass, with a declared level or not, crashes on a module of another level (cheap passes only:
    the cpu backend's compile passes on a torch module would run torch-mlir's whole pipeline)."""
    slow = {"et-preprocess-delegates", "et-torch-to-linalg", "et-decompose-to-core-aten"}
    for given, text in LEVEL_INPUTS.items():
        path = write(tmp_path, f"{given}.mlir", text)
        for info in all_passes():
            if info.flag in slow:
                continue
            argv = [path, f"--{info.flag}"] + ([f"--et-emit={tmp_path / 'x.pte'}"] if info.flag == "et-emit" else [])
            if info.flag == "et-partition":
                argv[1] = "--et-partition=backend=nested"
            code, _, err = et_opt_run(capsys, argv)
            assert code in (0, 1) and "internal error" not in err, (given, info.flag, err)


# --- options ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("flag, message", [
    ("--et-decompose-to-core-aten=keep=aten.nonexistent.op",
     "option keep=aten.nonexistent.op: unknown op 'aten.nonexistent.op' (ops are named like aten.linear.default"),
    ("--et-verify-core-aten=keep=aten.linear.default,aten.bogus.default", "unknown op 'aten.bogus.default'"),
    ("--et-partition=backend=nested ops=edge.bogus", "option ops=edge.bogus: unknown op 'edge.bogus'"),
    ("--et-partition=backend=nested skip-ops=edge.relu,edge.nope", "unknown op 'edge.nope'"),
    ("--et-partition=backend=nowhere", "option backend=nowhere: unknown value 'nowhere' (one of: "),
    ("--et-partition=min-group-size=0", "option min-group-size=0: must be >= 1"),
    ("--et-fold-constants=max-bytes=-1", "et-fold-constants: option max-bytes=-1: must be >= 0"),
    ("--et-fold-constants=max-bytes=ten", "et-fold-constants: option 'max-bytes' expects an integer, got 'ten'"),
    ("--et-fold-constants=max-bytes=1_000", "expects an integer, got '1_000'"),
    ("--et-plan-memory=alignment=1180591620717411303424", "option alignment=1180591620717411303424: must be <= "),
    ("--et-plan-memory=alignment=24", "option alignment=24: must be a power of two"),
    ("--et-plan-memory=policy=random", "unknown value 'random' (one of: largest-first, smallest-first)"),
    ("--et-plan-memory=arenas=fast:1k,fast", "arena 'fast' is declared twice"),
    ("--et-plan-memory=foo=1", "et-plan-memory: unknown option 'foo' (options: algorithm=<auto | best-fit"),
    ("--et-emit=segment-alignment=0", "option segment-alignment=0: must be >= 1"),
    ("--et-to-edge=x=1", "et-to-edge: unknown option 'x' (et-to-edge takes no options)"),
    ("--et-cpu-externalize-weights=min-bytes=-5", "option min-bytes=-5: must be >= 0"),
])
def test_pass_options_are_checked_before_anything_runs(tmp_path, capsys, flag, message):
    code, _, err = et_opt_run(capsys, [write(tmp_path, "e.mlir", EDGE_ADD), flag])
    assert code == 1
    assert err.startswith("et-opt: error: ") and message in err, err
    assert len(err.strip().splitlines()) == 1


def test_options_in_a_pipeline_string_are_checked_the_same_way(tmp_path, capsys):
    code, _, err = et_opt_run(capsys, [write(tmp_path, "e.mlir", EDGE_ADD),
                                       "--pass-pipeline=builtin.module(et-fold-constants{max-bytes=-1})"])
    assert code == 1 and "option max-bytes=-1: must be >= 0" in err


def test_a_tensor_too_big_to_plan_is_an_error_at_the_op(tmp_path, capsys):
    text = ETX_RELU.replace("%TYPE%", "tensor<1000000000000x1000000000000x100000000xf32>")
    path = write(tmp_path, "big.mlir", text)
    code, _, err = et_opt_run(capsys, [path, "--et-plan-memory"])
    assert code == 1
    assert f"{path}:4:8: error: et-plan-memory: etx.alloc (written by aten::relu.out at {path}:4) needs " in err
    assert "more than a plan can address (9223372036854775807)" in err


# --- shapes -----------------------------------------------------------------------------------------


def _edge_binary(op: str, lhs: str, rhs: str, result: str, extra: str = "") -> str:
    return f"""
func.func @main(%x: tensor<{lhs}>, %y: tensor<{rhs}>) -> tensor<{result}> {{
  %one = "edge.constant"() {{value = dense<1> : tensor<i64>}} : () -> tensor<i64>
  %0 = "edge.{op}"(%x, %y{extra}) : (tensor<{lhs}>, tensor<{rhs}>{', tensor<i64>' if extra else ''}) -> tensor<{result}>
  return %0 : tensor<{result}>
}}
"""


@pytest.mark.parametrize("text, message", [
    (_edge_binary("add_tensor", "2x3xf32", "4x5xf32", "2x3xf32", ", %one"),
     "4:8: error: 'edge.add_tensor' (aten::add.Tensor): shapes do not broadcast: self [2, 3], other [4, 5] "
     "(sizes 2 and 4 at dim 0 of the broadcast shape)"),
    (_edge_binary("mul_tensor", "2x3xf32", "2xf32", "2x3xf32"), "shapes do not broadcast: self [2, 3], other [2]"),
    (_edge_binary("maximum", "2x1xf32", "1x3xf32", "2x1xf32"),
     "'edge.maximum' (aten::maximum): result shape [2, 1] should be [2, 3]"),
    (_edge_binary("mm", "2x3xf32", "4x5xf32", "2x5xf32"),
     "'edge.mm' (aten::mm): inner dims differ: self [2, 3], mat2 [4, 5] (self has 3 columns, mat2 4 rows)"),
    (_edge_binary("mm", "2x3xf32", "3x5xf32", "2x4xf32"), "'edge.mm' (aten::mm): result shape [2, 4] should be [2, 5]"),
    (_edge_binary("bmm", "2x3x4xf32", "3x4x5xf32", "2x3x5xf32"), "'edge.bmm' (aten::bmm): batch sizes differ"),
    (_edge_binary("bmm", "3x4xf32", "4x5xf32", "3x5xf32"), "'edge.bmm' (aten::bmm): self must be 3-D, got [3, 4]"),
])
def test_static_shapes_that_cannot_work_are_verifier_errors(tmp_path, capsys, text, message):
    code, _, err = et_opt_run(capsys, [write(tmp_path, "s.mlir", text), "--et-edge-verify"])
    assert code == 1 and message in err, err


def test_where_addmm_and_cat_shapes(tmp_path, capsys):
    where = """
    func.func @main(%c: tensor<3xi1>, %x: tensor<2x3xf32>, %y: tensor<4x1xf32>) -> tensor<2x3xf32> {
      %0 = "edge.where_self"(%c, %x, %y) : (tensor<3xi1>, tensor<2x3xf32>, tensor<4x1xf32>) -> tensor<2x3xf32>
      return %0 : tensor<2x3xf32>
    }
    """
    addmm = """
    func.func @main(%b: tensor<3xf32>, %x: tensor<2x4xf32>, %w: tensor<4x5xf32>) -> tensor<2x5xf32> {
      %one = "edge.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
      %0 = "edge.addmm"(%b, %x, %w, %one, %one) : (tensor<3xf32>, tensor<2x4xf32>, tensor<4x5xf32>, tensor<i64>, tensor<i64>) -> tensor<2x5xf32>
      return %0 : tensor<2x5xf32>
    }
    """
    cat = """
    func.func @main(%x: tensor<2x3xf32>, %y: tensor<4x5xf32>) -> tensor<6x3xf32> {
      %0 = "edge.cat"(%x, %y) {dim = 0 : i64} : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<6x3xf32>
      return %0 : tensor<6x3xf32>
    }
    """
    for text, message in [
        (where, "'edge.where_self' (aten::where.self): shapes do not broadcast: condition [3], self [2, 3], other [4, 1]"),
        (addmm, "'edge.addmm' (aten::addmm): self [3] does not broadcast to the product's shape [2, 5]"),
        (cat, "'edge.cat' (aten::cat): input 1 [4, 5] differs from input 0 [2, 3] in dim 1 (only the cat dim 0 may differ)"),
    ]:
        code, _, err = et_opt_run(capsys, [write(tmp_path, "s.mlir", text), "--et-edge-verify"])
        assert code == 1 and message in err, err


def test_shapes_that_broadcast_still_verify(tmp_path, capsys):
    ok = [
        _edge_binary("add_tensor", "2x3xf32", "3xf32", "2x3xf32", ", %one"),
        _edge_binary("mul_tensor", "2x1xf32", "1x3xf32", "2x3xf32"),
        _edge_binary("mul_tensor", "2x?xf32", "5xf32", "2x5xf32"),  # dynamic: checked at run time
        _edge_binary("mm", "2x?xf32", "3x5xf32", "2x5xf32"),
        _edge_binary("bmm", "2x3x4xf32", "2x4x5xf32", "2x3x5xf32"),
    ]
    for text in ok:
        code, _, err = et_opt_run(capsys, [write(tmp_path, "s.mlir", text), "--et-edge-verify"])
        assert code == 0, err


def test_torch_shapes_that_cannot_broadcast_stop_at_et_to_edge(tmp_path, capsys):
    text = TORCH_ADD.replace("%y: !torch.vtensor<[2,3],f32>", "%y: !torch.vtensor<[4,5],f32>").replace(
        "!torch.vtensor<[2,3],f32>, !torch.vtensor<[2,3],f32>, !torch.int",
        "!torch.vtensor<[2,3],f32>, !torch.vtensor<[4,5],f32>, !torch.int")
    code, out, err = et_opt_run(capsys, [write(tmp_path, "t.mlir", text), "--et-to-edge", "--et-edge-verify",
                                         "--et-to-out-variants", "--et-plan-memory",
                                         f"--et-emit={tmp_path / 't.pte'}"])
    assert code == 1 and not (tmp_path / "t.pte").exists()
    assert ("t.mlir:4:8: error: et-to-edge: 'edge.add_tensor' (aten::add.Tensor): shapes do not broadcast: "
            "self [2, 3], other [4, 5]") in err


# --- internal errors --------------------------------------------------------------------------------

BUGGY_PASS = """
from etmlir.passes.registry import get_pass, register_pass

if get_pass("et-test-buggy") is None:
    @register_pass("et-test-buggy")
    def buggy(module):
        '''et-test-buggy: a pass with a bug, for the tests.'''
        return {}["missing"]
"""


def test_a_bug_in_a_pass_is_an_internal_error_with_exit_status_2(tmp_path, capsys):
    path, load = write(tmp_path, "ok.mlir", "module {}"), write(tmp_path, "buggy.py", BUGGY_PASS)
    code, _, err = et_opt_run(capsys, [path, "--load", load, "--et-test-buggy"])
    assert code == 2
    assert "et-opt: internal error: KeyError: 'missing'" in err and "please report it" in err
    with pytest.raises(KeyError):
        et_opt.main([str(path), "--load", str(load), "--et-test-buggy", "--debug"])


def test_the_python_api_keeps_a_pass_bug_as_the_cause(tmp_path):
    exec(compile(BUGGY_PASS, "buggy.py", "exec"), {})
    with new_context():
        module = ir.Module.parse("module {}")
        with pytest.raises(ir.MLIRError) as error:
            run_pipeline(module, "et-test-buggy")
    assert isinstance(error.value.__cause__, KeyError)
    assert "internal error in pass 'et-test-buggy'" in str(error.value)


# --- the real entry point ---------------------------------------------------------------------------


def _entry(*argv: object, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("ETMLIR_DEBUG", None)
    return subprocess.run([str(ET_OPT), *map(str, argv)], input=stdin, capture_output=True, timeout=120, env=env)


def test_entry_point_exit_statuses_and_stderr(tmp_path):
    ok = write(tmp_path, "ok.mlir", "module {}")
    deep = write(tmp_path, "deep.mlir", "module {" * 5000 + "}" * 5000)
    load = write(tmp_path, "buggy.py", BUGGY_PASS)
    cases = [
        ((ok,), 0, b""),
        ((deep,), 1, b"levels deep"),
        (("-", "--et-plan-memory=alignment=3"), 1, b"must be a power of two"),
        ((ok, "--load", load, "--et-test-buggy"), 2, b"et-opt: internal error: KeyError"),
    ]
    for argv, status, message in cases:
        done = _entry(*argv, stdin=b"module {}\n" if argv[0] == "-" else None)
        assert done.returncode == status and message in done.stderr, (argv, done.stderr)
        assert TRACEBACK.encode() not in done.stderr
    done = _entry(ok, "--load", load, "--et-test-buggy", "--debug")
    assert done.returncode == 1 and TRACEBACK.encode() in done.stderr and b"KeyError" in done.stderr
    done = _entry("-", stdin=b"module {}\n\xff")
    assert done.returncode == 1 and b"et-opt: error: <stdin>:2:1: not UTF-8 text (byte 0xff)" in done.stderr
