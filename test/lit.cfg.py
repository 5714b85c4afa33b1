# lit configuration for etmlir: one test file per pass (named after its flag) and per tool.
# Run with `make lit`, which puts the virtual environment's et-opt and filecheck on PATH.
import os
import shutil

import lit.formats

config.name = "etmlir"
# PyPI lit 23.x refuses ShTest(True) (external shell); the internal shell has `not`, pipes and redirects.
config.test_format = lit.formats.ShTest()
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)
config.environment["PATH"] = os.environ["PATH"]
config.environment["OMP_NUM_THREADS"] = "1"
for tool in ("et-opt", "filecheck"):
    if shutil.which(tool) is None:
        lit_config.fatal(f"'{tool}' is not on PATH: run the tests with `make lit` or activate .venv")
# Tests say FileCheck, as in LLVM; the PyPI package installs it as `filecheck`.
config.substitutions.append(("FileCheck", "filecheck"))
