"""Runtime manifests and the loadability check: will this `.pte` load on that runtime build?

A runtime build describes itself in a manifest: the kernels it registers with the dtypes each
takes, the backends compiled in, the `.pte` schema versions and payload header format it reads,
the arch and CPU features of the machine it runs on (layout: tools/runtime_manifest.h). Get one
from

    et-manifest --output device.json             # on the device (or the build's own:
                                                 #   <build>/runtime-manifest.json)
    etmlir.runtime.manifest()                    # this process's runtime, as a dict
    etmlir.runtime.shipped_manifest_path()       # the one installed with this build

and check programs against it on the host, before anything reaches the device:

    report = etmlir.devtools.check_loadable("model.pte", "device.json")
    print(report)        # each problem with method, instruction, source line, op, module path
    report.ok, report.problems, report.missing_kernels

    et = edge.to_executorch(runtime_manifest="device.json")   # NotLoadableError if it would not load
    $ et-inspect --check-against device.json model.pte         # exit status 1 if it would not

What is checked and how (kernels and their dtypes, signatures, backends and their payloads,
nested delegates' own programs, Program.version) is in `etmlir.executable.loadability`, where
the checker lives so that `to_executorch` (a layer below the developer tools) can run it.
"""

from __future__ import annotations

from etmlir.executable.loadability import (KINDS, LoadabilityReport, ManifestError, NotLoadableError, Problem,
                                           RuntimeManifest, check_loadable, load_manifest, raise_if_not_loadable)

__all__ = ["KINDS", "LoadabilityReport", "ManifestError", "NotLoadableError", "Problem", "RuntimeManifest",
           "check_loadable", "load_manifest", "raise_if_not_loadable"]
