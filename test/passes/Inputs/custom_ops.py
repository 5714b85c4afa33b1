"""Custom ops for lit tests, registered with torch.library (loaded with `et-opt --load`)."""

import torch

if not hasattr(torch.ops, "etmlir_test") or not hasattr(torch.ops.etmlir_test, "scale_by"):
    torch.library.define("etmlir_test::scale_by", "(Tensor x, float factor, int[] dims) -> Tensor")

    @torch.library.impl("etmlir_test::scale_by", "CompositeExplicitAutograd")
    def _scale_by(x: torch.Tensor, factor: float, dims: list[int]) -> torch.Tensor:
        return x * factor

if not hasattr(torch.ops.etmlir_test, "scale_by_no_out"):
    # Its out variant, so et-to-out-variants has a kernel to call.
    torch.library.define("etmlir_test::scale_by.out",
                         "(Tensor x, float factor, int[] dims, *, Tensor(a!) out) -> Tensor(a!)")
    # A custom op with no out variant: et-to-out-variants must reject it.
    torch.library.define("etmlir_test::scale_by_no_out", "(Tensor x, float factor) -> Tensor")
