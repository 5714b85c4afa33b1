"""Developer tools: reference evaluation, reports and inspectors."""

from etmlir.devtools.bundled import BundledCase, BundleError, bundle, bundled_cases
from etmlir.devtools.compare import CompareError, Comparison, Divergence, OpComparison, compare
from etmlir.devtools.delegation_info import (BackendCounts, DelegatedSubgraph, DelegationInfo, NotDelegatedOp,
                                             delegation_info)
from etmlir.devtools.inspector import Inspector, InspectorError, LatencyCheck, latency_check
from etmlir.devtools.manifest import (LoadabilityReport, ManifestError, NotLoadableError, Problem, check_loadable,
                                      load_manifest)

__all__ = ["BackendCounts", "DelegatedSubgraph", "DelegationInfo", "NotDelegatedOp", "delegation_info"]
__all__ += ["LoadabilityReport", "ManifestError", "NotLoadableError", "Problem", "check_loadable", "load_manifest"]
__all__ += ["CompareError", "Comparison", "Divergence", "OpComparison", "compare"]
__all__ += ["Inspector", "InspectorError", "LatencyCheck", "latency_check"]
__all__ += ["BundledCase", "BundleError", "bundle", "bundled_cases"]
