"""Command-line tools: `et-opt` (pass driver) and `etmlir-demo` (the main job)."""
