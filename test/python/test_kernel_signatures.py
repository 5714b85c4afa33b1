"""Every registered kernel's signature string matches its operator's PyTorch schema.

The method loader checks calls against these strings, so a wrong one would
either reject valid programs or let a kernel read an argument of the wrong
kind; the '|' also marks which arguments a kernel writes.
"""

from __future__ import annotations

import pytest

from etmlir.runtime import kernels
from etmlir.runtime.signatures import expected_signature


@pytest.mark.parametrize("name", kernels.registered())
def test_registered_signature_matches_the_schema(name):
    assert kernels.signature(name) == expected_signature(name), (
        f"{name}: registered \"{kernels.signature(name)}\", schema says \"{expected_signature(name)}\" "
        "(portable kernels get theirs from scripts/gen_kernels.py: run make generate)")


def test_examples():
    assert expected_signature("aten::add.out") == "TTs|T"
    assert expected_signature("aten::split_with_sizes_copy.out") == "TLi|X"
    assert expected_signature("aten::upsample_bilinear2d.vec_out") == "TMbG|T"
    assert expected_signature("etmlir_prim::sym_size.int") == "Ti|i"
    assert expected_signature("etmlir::_to_dim_order_copy.out") == "TIbM|T"
