"""Developer tools: reference evaluation, reports and inspectors."""

from etmlir.devtools.delegation_info import (BackendCounts, DelegatedSubgraph, DelegationInfo, NotDelegatedOp,
                                             delegation_info)

__all__ = ["BackendCounts", "DelegatedSubgraph", "DelegationInfo", "NotDelegatedOp", "delegation_info"]
