"""Real architectures (`transformers` model definitions and `torch.nn` modules) against eager, on every path.

Each architecture in `etmlir.models.architectures` is exported and lowered
to edge once, then finished on the portable kernels and through the `nested`
backend; a sample of one or two per family also goes through the `cpu`
backend (LLVM compiles dominate the time; `ETMLIR_ZOO_ALL_PATHS=1` runs
`cpu` for all, as `scripts/model_coverage.py` does for docs/model_coverage.md).
Tolerances: `etmlir.devtools.model_coverage.RTOL/ATOL` (1e-4 / 1e-4, float32
after several layers of GEMMs and reductions).
"""

from __future__ import annotations

import os
import pathlib
import re

import pytest

from etmlir.devtools import model_coverage
from etmlir.models import architectures

pytest.importorskip("transformers")

ROOT = pathlib.Path(__file__).resolve().parents[2]
ALL_PATHS = os.environ.get("ETMLIR_ZOO_ALL_PATHS") == "1"
# One or two per family through the cpu backend in the default run.
CPU_SAMPLE = ("llama", "phi3", "gpt2", "bert", "t5", "mobilenet_v2", "vit", "swin", "levit", "whisper_encoder",
              "nn_lstm")
FAMILIES = ("decoder LLM", "encoder", "encoder-decoder", "vision CNN", "vision transformer",
            "windowed-attention vision transformer", "audio encoder", "recurrent")


@pytest.mark.parametrize("name", list(architectures.ARCHITECTURES))
def test_architecture_matches_eager(name: str) -> None:
    paths = model_coverage.PATHS if ALL_PATHS or name in CPU_SAMPLE else ("portable", "nested")
    result = model_coverage.check(name, paths)
    failures = {path: f"fails at {r.stage} -> {r.error}" for path, r in result.paths.items() if not r.passed}
    assert not failures, failures
    assert result.reference_magnitude > 1e-3, "eager's output is ~0: the comparison would prove nothing"


def test_zoo_spans_the_families_the_issue_names() -> None:
    entries = architectures.ARCHITECTURES.values()
    assert len(architectures.ARCHITECTURES) >= 25
    for family in FAMILIES:
        assert any(e.family.startswith(family) for e in entries), family
    for module in ("LSTM", "GRU", "TransformerEncoder", "MultiheadAttention"):
        assert any(e.source == f"torch.nn.{module}" for e in entries), module
    assert set(CPU_SAMPLE) <= set(architectures.ARCHITECTURES)


def test_coverage_table_is_current_and_linked() -> None:
    """docs/model_coverage.md has one row per architecture, every path passing; the README links it."""
    text = (ROOT / "docs" / "model_coverage.md").read_text()
    rows = re.findall(r"^\| `([a-z0-9_]+)` \|(.*)\|$", text, re.MULTILINE)
    assert [name for name, _ in rows] == list(architectures.ARCHITECTURES)
    for name, cells in rows:
        assert "fails" not in cells, name
    total = len(architectures.ARCHITECTURES)
    assert f"portable {total}/{total}, nested {total}/{total}, cpu {total}/{total}" in text
    assert "docs/model_coverage.md" in (ROOT / "README.md").read_text()


def test_unknown_architecture_names_the_choices() -> None:
    with pytest.raises(KeyError, match="available: llama"):
        architectures.build("lama")
