"""Developer tools: reference evaluation, reports and inspectors."""
