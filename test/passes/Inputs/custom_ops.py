"""Custom ops for lit tests, registered with torch.library (loaded with `et-opt --load`)."""

import torch

if not hasattr(torch.ops, "etmlir_test") or not hasattr(torch.ops.etmlir_test, "scale_by"):
    torch.library.define("etmlir_test::scale_by", "(Tensor x, float factor, int[] dims) -> Tensor")

    @torch.library.impl("etmlir_test::scale_by", "CompositeExplicitAutograd")
    def _scale_by(x: torch.Tensor, factor: float, dims: list[int]) -> torch.Tensor:
        return x * factor
