"""The `cpu` backend's passes, one per file, each named after its flag (`et-cpu-<name>` in `<name>.py`).

`etmlir.backends.cpu.pipeline` runs them in order; `et-opt --pass-pipeline=
'builtin.module(et-cpu-microkernels)'` runs any one of them on its own
(test/backends/cpu/ has a lit test per pass).
"""
