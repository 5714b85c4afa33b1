// The `etx` dialect: etmlir's executable level, one step above the `.pte`.
//
// Hand-written (not generated). Loaded at run time with irdl.load_dialects by
// python/etmlir/dialects/etx.py, which also attaches the Python verifier that
// checks what IRDL cannot declare (optional attributes such as the planned
// `mem_id`/`offset`/`size`, kernel-name syntax, list kinds).
//
// Every SSA value at this level has type !etx.value: it is one entry of the
// method's value table (an EValue: a tensor, an int, a list, ...). Tensor
// types live in the `type` attribute of the op that defines the value. This
// is deliberate: an out-variant kernel takes a heterogeneous argument list,
// and an IRDL variadic operand group unifies its types, so only one value
// type lets `etx.kernel_call` take `(tensor, int, int[], tensor)` in schema
// order. (For the same reason every attribute below has its own constraint
// value: two attributes sharing one would have to be equal.)
//
// A function at this level has no arguments and no results: `etx.input` ops
// stand for the inputs and `etx.output` names the outputs. Ops run in order;
// `etx.kernel_call` writes into its `outs` (destination-passing style).
irdl.dialect @etx {
  // An entry of the method's value table.
  irdl.type @value {
  }

  // Method input `index`; a planned input carries mem_id/offset/size.
  // Optional: upper_bounds (dynamic dims), mem_id, offset, size.
  irdl.operation @input {
    %index = irdl.base "#builtin.integer"
    %type = irdl.base "#builtin.type"
    %v = irdl.base @etx::@value
    irdl.attributes {"index" = %index, "type" = %type}
    irdl.results(result: %v)
  }

  // Memory a kernel writes: a tensor (planned by et-plan-memory into
  // mem_id/offset/size) or a scalar (`type = i64`: an Int a kernel sets).
  // Optional: upper_bounds, mem_id, offset, size.
  irdl.operation @alloc {
    %type = irdl.base "#builtin.type"
    %v = irdl.base @etx::@value
    irdl.attributes {"type" = %type}
    irdl.results(result: %v)
  }

  // Program state (a buffer forward mutates: a KV cache, a step counter): a
  // tensor the method keeps across calls, named `name` (the buffer's fully
  // qualified name). Planned like an alloc (mem_id/offset/size) but live for
  // the whole method, so no other value shares its bytes; the runtime fills it
  // from `value` when the method loads and on reset_state(), and kernels
  // write its new value into it. Optional: mem_id, offset, size.
  irdl.operation @state {
    %name = irdl.base "#builtin.string"
    %type = irdl.base "#builtin.type"
    %value = irdl.any
    %v = irdl.base @etx::@value
    irdl.attributes {"name" = %name, "type" = %type, "value" = %value}
    irdl.results(result: %v)
  }

  // A constant tensor. `value` holds the data until et-emit places it in the
  // constant segment; optional: segment, offset, size, etmlir.param.
  irdl.operation @constant {
    %type = irdl.base "#builtin.type"
    %value = irdl.any
    %v = irdl.base @etx::@value
    irdl.attributes {"type" = %type, "value" = %value}
    irdl.results(result: %v)
  }

  // A non-tensor argument value: i64 (Int), f64 (Double), bool (Bool),
  // string (String), array<i64> (IntList), array<f64>, array<i1>.
  irdl.operation @const {
    %value = irdl.any
    %v = irdl.base @etx::@value
    irdl.attributes {"value" = %value}
    irdl.results(result: %v)
  }

  // None (an absent optional argument).
  irdl.operation @none {
    %v = irdl.base @etx::@value
    irdl.results(result: %v)
  }

  // A list whose items are values: kind "int" (items may be Ints computed at
  // run time), "tensor", or "optional_tensor" (items may be etx.none).
  irdl.operation @list {
    %kind = irdl.base "#builtin.string"
    %v = irdl.base @etx::@value
    irdl.attributes {"kind" = %kind}
    irdl.operands(items: variadic %v)
    irdl.results(result: %v)
  }

  // Call the out-variant kernel `kernel` ("aten::convolution.out"): `args` in
  // schema order, then `outs`, which it writes. Optional: debug_handle.
  irdl.operation @kernel_call {
    %kernel = irdl.base "#builtin.string"
    %v = irdl.base @etx::@value
    irdl.attributes {"kernel" = %kernel}
    irdl.operands(args: variadic %v, outs: variadic %v)
  }

  // Call a delegate: the payload `payload` (an etx.payload symbol) run by
  // backend `backend`, with its live-ins `args` and live-outs `outs`.
  // Optional: debug_handle.
  irdl.operation @delegate_call {
    %backend = irdl.base "#builtin.string"
    %payload = irdl.base "#builtin.string"
    %v = irdl.base @etx::@value
    irdl.attributes {"backend" = %backend, "payload" = %payload}
    irdl.operands(args: variadic %v, outs: variadic %v)
  }

  // A delegate payload (module level): opaque bytes for backend `backend`
  // with its compile specs (a dictionary of string values).
  irdl.operation @payload {
    %name = irdl.base "#builtin.string"
    %backend = irdl.base "#builtin.string"
    %data = irdl.any
    %specs = irdl.base "#builtin.dictionary"
    irdl.attributes {"sym_name" = %name, "backend" = %backend, "data" = %data, "compile_specs" = %specs}
  }

  // The method's outputs, in order.
  irdl.operation @output {
    %v = irdl.base @etx::@value
    irdl.operands(values: variadic %v)
  }

  // Control flow for programs with `cond`/loops: if `cond` (a Bool) is false,
  // continue at instruction `target` (an index into the method's
  // instructions).
  irdl.operation @jump_false {
    %target = irdl.base "#builtin.integer"
    %v = irdl.base @etx::@value
    irdl.attributes {"target" = %target}
    irdl.operands(cond: %v)
  }

  // Copy value `from` into value `to`.
  irdl.operation @move {
    %v = irdl.base @etx::@value
    irdl.operands(from: %v, to: %v)
  }

  // `value` is dead from here on.
  irdl.operation @free {
    %v = irdl.base @etx::@value
    irdl.operands(value: %v)
  }
}
