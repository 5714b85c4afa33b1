"""The executable level: out-variant kernels, memory planning and the `.pte` file.

- `out_variants`: which out-variant kernel runs an edge op (`aten::add.out` for `edge.add_tensor`).
- `planner`: lifetime-based, multi-arena memory planning (pure Python, no MLIR).
- `pte`: the file container (header, FlatBuffer, aligned segments) and its reader.
- `serialize`: etx module -> `.pte` bytes.
- `program`: `ExecutorchConfig` and `ExecutorchProgram`, the Python API of `to_executorch`.
"""
