"""The machine a payload is built for: architecture, CPU features, compiler flags.

A payload is native code for the compiling machine (MLIR's JIT compiles for
the host CPU), so its header records what that code needs: the architecture
and the CPU features it may use. The runtime refuses a payload whose needs
the running CPU does not meet, instead of dying on an illegal instruction.
The microkernels are compiled with the `-march` level those features allow,
so their AVX-512 or AVX2 paths match the rest of the payload.
"""

from __future__ import annotations

import dataclasses
import functools
import platform

from etmlir.backends.payload_header import CPU_FEATURES, cpu_feature_name

# Bit i of the payload header's cpu_features: (GCC's name, the /proc/cpuinfo flag), e.g. ("sse4.2", "sse4_2").
# Derived from the CpuFeature enum of runtime/schema/payload.fbs, the one list of these names.
FEATURE_BITS: tuple[tuple[str, str], ...] = tuple((cpu_feature_name(flag), flag) for flag in CPU_FEATURES)
_V4 = {"avx512f", "avx512dq", "avx512bw", "avx512vl"}
_V3 = {"avx", "avx2", "fma", "f16c", "bmi2"}


@dataclasses.dataclass(frozen=True)
class Target:
    arch: str                  # uname -m: "x86_64", "aarch64"
    features: frozenset[str]   # names from FEATURE_BITS the code may use

    @property
    def feature_mask(self) -> int:
        return sum(1 << i for i, (name, _) in enumerate(FEATURE_BITS) if name in self.features)

    @property
    def march_levels(self) -> list[str]:
        """The x86-64-v2/v3/v4 levels these features cover, lowest first (empty off x86-64)."""
        if self.arch != "x86_64" or "sse4.2" not in self.features:
            return []
        levels = ["x86-64-v2"]
        if _V3 <= self.features:
            levels.append("x86-64-v3")
            if _V4 <= self.features:
                levels.append("x86-64-v4")
        return levels

    @property
    def march(self) -> str:
        """gcc's -march for the microkernels: the highest x86-64 level these features make up."""
        if self.arch != "x86_64":
            return "native"
        return (self.march_levels or ["x86-64"])[-1]


def features_of(mask: int) -> list[str]:
    return [name for i, (name, _) in enumerate(FEATURE_BITS) if mask & (1 << i)]


@functools.cache
def host() -> Target:
    """This machine (the JIT compiles for it, so payloads need what it has)."""
    arch = platform.machine()
    flags: set[str] = set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        pass
    features = frozenset(name for name, flag in FEATURE_BITS if flag in flags) if arch == "x86_64" else frozenset()
    # The microkernels are built for an x86-64 level; the payload needs every feature of that level.
    return Target(arch, features)
