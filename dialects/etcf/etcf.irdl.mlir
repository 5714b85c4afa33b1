// The `etcf` dialect: the one op etmlir adds to MLIR's `scf` to run a tensor program's control flow.
//
// Hand-written (not generated). Loaded at run time with irdl.load_dialects by
// python/etmlir/dialects/control_flow.py, which attaches the Python verifier
// (the operand must be a one-element boolean tensor) and declares the op free
// of side effects.
//
// Control flow itself is upstream `scf` at the ATen and Edge levels (`scf.if`
// for torch.cond, `scf.while` for while_loop): its ops take operands and
// results of any mix of types, which an IRDL op cannot (IRDL gives every value
// of a variadic group the same type). `scf.if` and `scf.condition` take an
// `i1`; a PyTorch predicate is a 0-d boolean tensor, at the ATen level
// (`!torch.vtensor<[],i1>`) as at the Edge level (`tensor<i1>`), so
//
//   %c = "etcf.predicate"(%p) : (tensor<i1>) -> i1
//
// stands for "the truth of %p". et-to-out-variants turns it back into the
// tensor the runtime's JumpFalse reads.
irdl.dialect @etcf {
  // The truth of a one-element boolean tensor, as the i1 `scf.if` / `scf.condition` take.
  irdl.operation @predicate {
    %tensor = irdl.any
    %i1 = irdl.is i1
    irdl.operands(tensor: %tensor)
    irdl.results(result: %i1)
  }
}
