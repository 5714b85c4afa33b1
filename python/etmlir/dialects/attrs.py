"""The names of etmlir's discardable IR attributes, in one place.

Every layer reads and writes these (the importer, the passes, the backends,
the serializer, the developer tools); spelling one of them in two places is
how a rename silently breaks a producer/consumer pair. Import the constant:

    from etmlir.dialects import attrs
    if attrs.PARAM in op.attributes: ...
"""

from __future__ import annotations

# On a weight's constant op: the fully qualified parameter or buffer name (`layers.0.attn.weight`).
PARAM = "etmlir.param"
# On func.func: {arg index: {dim: {min, max}}} the export's dynamic dimensions and their bounds.
DYNAMIC_DIMS = "etmlir.dynamic_dims"
# On an op with dynamically sized results: one array<i64> of upper bounds per result (et-to-edge).
UPPER_BOUNDS = "etmlir.upper_bounds"
# On an op: its debug handle (et-assign-debug-handles), the key of the .pte's debug table.
DEBUG_HANDLE = "etmlir.debug_handle"
# On an out-variant kernel call: the edge op it came from (for messages and profiles).
EDGE_OP = "etmlir.edge_op"
# On func.func (kept by et-to-out-variants): the model's call structure as JSON, how its flat
# inputs and outputs nest in the user's call (etmlir/executable/io_structure.py).
IO_STRUCTURE = "etmlir.io_structure"
# Program state (a buffer forward mutates; see etmlir/frontend/state.py): on a func.func argument
# and result, the buffer's fully qualified name (the argument reads it, the result writes it back);
# on the argument also its initial value (a dense_resource).
STATE = "etmlir.state"
STATE_INITIAL = "etmlir.state_initial"

# Delegation (et-partition -> et-outline-delegates -> et-preprocess-delegates).
DELEGATION_TAG = "etmlir.delegation_tag"   # on an edge op: the delegate group it joins
NOT_DELEGATED = "etmlir.not_delegated"     # on an edge op: why the partitioner refused it
BACKEND = "etmlir.backend"                 # on a delegate module and its call: the backend id
PAYLOAD = "etmlir.payload"                 # on a delegate module: the compiled payload
COMPILE_SPECS = "etmlir.compile_specs"     # on a delegate module: the backend's compile specs
DEBUG_HANDLE_MAP = "etmlir.debug_handle_map"  # on a delegate module: payload id -> edge debug handles
PAYLOAD_SUMMARY = "etmlir.payload_summary"  # on a delegate module: the backend's one line on its payload
LOWERED_FROM = "etmlir.lowered_from"       # on a linked delegate: the lowered module it came from

# The cpu backend (etmlir/backends/cpu): on its module, symbol -> initial value of each weight
# et-cpu-externalize-weights moved out of the IR (linked into the payload from raw bytes).
CPU_EXTERNAL_WEIGHTS = "etmlir.cpu.external_weights"
