"""The `vulkan` backend's passes, one per file, each named after its flag (`et-vulkan-<name>` in `<name>.py`).

`etmlir.backends.vulkan.pipeline` runs them in order, between the edge -> linalg
steps it shares with the `cpu` backend and MLIR's own gpu -> SPIR-V conversion;
`et-opt --pass-pipeline='builtin.module(et-vulkan-outline-kernels)'` runs any one
of them on its own (test/backends/vulkan/ has a lit test per pass).
"""
