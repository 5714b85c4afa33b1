"""Ahead-of-time memory planning: place tensors with known lifetimes in a few arenas.

Pure Python over plain numbers, so it can be property-tested without MLIR;
`et-plan-memory` extracts the buffers from an etx function and writes the
placements back.

A buffer is live over the closed interval [start, end] of instruction
indices. Two buffers may share bytes only if their intervals are disjoint.
The algorithm is greedy by size with best fit on offsets: take the buffers
largest first; for each, look at the already-placed buffers in an arena whose
lifetimes overlap its own, and put it in the smallest gap between them that
holds it (or at the end). This never needs more than the sum of the sizes,
and is usually much less. ExecuTorch's greedy instead assigns buffers to
"shared objects" and lays the objects end to end; `algorithm="auto"` runs
both and keeps the smaller arena, so we are never worse than that baseline.

Several arenas model a memory hierarchy (seed 001: a small fast memory and a
large slow one): `arenas=[Arena("fast", 65536), Arena("slow")]`. The
placement policy decides who gets fast memory: `largest-first` takes the
buffers largest first and puts each in the first arena where it still fits
under that arena's capacity; `smallest-first` does the same smallest first
(many small, hot tensors in fast memory). An arena without a capacity takes
whatever is left; if every arena is bounded and a buffer fits in none,
planning fails and says which buffer and how much space there was.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

POLICIES = ("largest-first", "smallest-first")
ALGORITHMS = ("auto", "best-fit", "shared-objects")


class PlanningError(ValueError):
    """The buffers cannot be placed in the given arenas."""


@dataclasses.dataclass(frozen=True)
class Arena:
    """A planned memory: `capacity` bytes at most (None: as large as needed)."""

    name: str
    capacity: int | None = None


@dataclasses.dataclass(frozen=True)
class Buffer:
    """`size` bytes live from instruction `start` to instruction `end` (inclusive)."""

    size: int
    start: int
    end: int
    label: str = ""

    def overlaps(self, other: "Buffer") -> bool:
        return self.start <= other.end and other.start <= self.end


@dataclasses.dataclass(frozen=True)
class Placement:
    mem_id: int
    offset: int
    size: int  # bytes reserved (the buffer's size rounded up to the alignment)


@dataclasses.dataclass
class Plan:
    arenas: list[Arena]
    placements: list[Placement]     # one per buffer, in input order
    arena_sizes: list[int]          # bytes each arena must provide
    tensor_bytes: list[int]         # per arena: sum of its buffers' reserved sizes (the naive plan)
    tensor_counts: list[int]
    alignment: int
    policy: str
    algorithm: str

    @property
    def total_bytes(self) -> int:
        return sum(self.arena_sizes)

    @property
    def naive_bytes(self) -> int:
        return sum(self.tensor_bytes)

    def __str__(self) -> str:
        return self.summary()

    def summary(self) -> str:
        """A table: per arena, its size against the sum of the sizes of the tensors in it."""
        rows = [("arena", "mem_id", "planned bytes", "capacity", "tensors", "sum of tensor bytes", "ratio")]
        for mem_id, arena in enumerate(self.arenas):
            naive = self.tensor_bytes[mem_id]
            rows.append((arena.name, str(mem_id), f"{self.arena_sizes[mem_id]:,}",
                         "-" if arena.capacity is None else f"{arena.capacity:,}",
                         str(self.tensor_counts[mem_id]), f"{naive:,}",
                         f"{self.arena_sizes[mem_id] / naive:.3f}" if naive else "-"))
        rows.append(("total", "", f"{self.total_bytes:,}", "", str(sum(self.tensor_counts)),
                     f"{self.naive_bytes:,}", f"{self.total_bytes / self.naive_bytes:.3f}"
                     if self.naive_bytes else "-"))
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        lines = [f"memory plan: {self.policy}, {self.algorithm}, alignment {self.alignment}"]
        for row in rows:
            lines.append("  " + "  ".join(cell.rjust(w) if i > 1 else cell.ljust(w)
                                          for i, (cell, w) in enumerate(zip(row, widths))).rstrip())
        return "\n".join(lines)


_SIZE = re.compile(r"^(\d+)([kKmMgG]?)$")
_UNITS = {"": 1, "k": 1024, "m": 1024 ** 2, "g": 1024 ** 3}


def parse_arenas(specs: Sequence[str]) -> list[Arena]:
    """`["fast:64k", "slow"]` -> [Arena("fast", 65536), Arena("slow")]."""
    arenas = []
    for spec in specs:
        name, _, size = spec.partition(":")
        name = name.strip()
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", name):
            raise PlanningError(f"arena '{spec}': the name must be an identifier (e.g. fast:65536)")
        capacity = None
        if size:
            match = _SIZE.match(size.strip())
            if not match:
                raise PlanningError(f"arena '{spec}': size '{size}' is not a byte count (65536, 64k, 2M)")
            capacity = int(match.group(1)) * _UNITS[match.group(2).lower()]
        if name in (a.name for a in arenas):
            raise PlanningError(f"arena '{name}' is declared twice")
        arenas.append(Arena(name, capacity))
    return arenas or [Arena("planned")]


def align_up(value: int, alignment: int) -> int:
    return (value + alignment - 1) // alignment * alignment


def _best_fit(buffer: Buffer, size: int, placed: list[tuple[int, int, Buffer]]) -> int:
    """Lowest-waste offset for `buffer` among `placed` (offset, size, buffer) sharing its arena."""
    busy = sorted((offset, offset + reserved) for offset, reserved, other in placed if other.overlaps(buffer))
    best, best_gap, cursor = None, None, 0
    for begin, end in busy:
        gap = begin - cursor
        if gap >= size and (best_gap is None or gap < best_gap):
            best, best_gap = cursor, gap
        cursor = max(cursor, end)
    return cursor if best is None else best


def _shared_objects(order: list[int], buffers: Sequence[Buffer], sizes: list[int]) -> tuple[dict[int, int], int]:
    """ExecuTorch-style greedy: each buffer joins the best-sized object none of whose members it overlaps."""
    objects: list[tuple[int, list[int]]] = []  # (size, members)
    owner: dict[int, int] = {}
    for index in order:
        best = None
        for obj, (obj_size, members) in enumerate(objects):
            if any(buffers[index].overlaps(buffers[m]) for m in members):
                continue
            waste = abs(obj_size - sizes[index])
            if best is None or waste < best[0]:
                best = (waste, obj)
        if best is None:
            objects.append((sizes[index], [index]))
            owner[index] = len(objects) - 1
        else:
            obj = best[1]
            objects[obj] = (max(objects[obj][0], sizes[index]), objects[obj][1] + [index])
            owner[index] = obj
    offsets, cursor = [], 0
    for obj_size, _ in objects:
        offsets.append(cursor)
        cursor += obj_size
    return {index: offsets[obj] for index, obj in owner.items()}, cursor


def _pack(members: list[int], buffers: Sequence[Buffer], sizes: list[int]) -> tuple[dict[int, int], int]:
    """Best-fit offsets for `members`, largest first; returns (offsets, arena size)."""
    order = sorted(members, key=lambda i: (-sizes[i], buffers[i].start, i))
    placed: list[tuple[int, int, Buffer]] = []
    offsets: dict[int, int] = {}
    for index in order:
        offset = _best_fit(buffers[index], sizes[index], placed)
        offsets[index] = offset
        placed.append((offset, sizes[index], buffers[index]))
    return offsets, max((offsets[i] + sizes[i] for i in members), default=0)


def plan_memory(buffers: Sequence[Buffer], arenas: Sequence[Arena] | None = None, alignment: int = 16,
                policy: str = "largest-first", algorithm: str = "auto") -> Plan:
    """Place every buffer in one of `arenas` so that no two live buffers share a byte."""
    arenas = list(arenas or [Arena("planned")])
    if alignment < 1 or alignment & (alignment - 1):
        raise PlanningError(f"alignment must be a power of two, got {alignment}")
    if policy not in POLICIES:
        raise PlanningError(f"unknown placement policy '{policy}' (one of {', '.join(POLICIES)})")
    if algorithm not in ALGORITHMS:
        raise PlanningError(f"unknown algorithm '{algorithm}' (one of {', '.join(ALGORITHMS)})")
    for b in buffers:
        if b.size < 0 or b.start > b.end:
            raise PlanningError(f"buffer {b.label or b}: bad size or lifetime")
    sizes = [align_up(max(b.size, 1), alignment) for b in buffers]

    # 1. Choose an arena for each buffer, in policy order, by incremental best fit.
    order = sorted(range(len(buffers)), key=lambda i: (-sizes[i] if policy == "largest-first" else sizes[i],
                                                       buffers[i].start, i))
    members: list[list[int]] = [[] for _ in arenas]
    placed: list[list[tuple[int, int, Buffer]]] = [[] for _ in arenas]
    first_fit: dict[int, int] = {}
    for index in order:
        for mem_id, arena in enumerate(arenas):
            offset = _best_fit(buffers[index], sizes[index], placed[mem_id])
            if arena.capacity is None or offset + sizes[index] <= arena.capacity:
                members[mem_id].append(index)
                placed[mem_id].append((offset, sizes[index], buffers[index]))
                first_fit[index] = offset
                break
        else:
            room = ", ".join(f"{a.name} ({a.capacity:,} bytes)" for a in arenas if a.capacity is not None)
            raise PlanningError(f"{buffers[index].label or f'buffer {index}'} ({sizes[index]:,} bytes, live "
                                f"{buffers[index].start}..{buffers[index].end}) fits in no arena: {room}; "
                                "add an arena without a size limit (e.g. arenas=fast:65536,slow)")

    # 2. Re-pack each arena's buffers with the best layout that respects its capacity.
    offsets: dict[int, int] = {}
    arena_sizes = []
    for mem_id, arena in enumerate(arenas):
        candidates = [({i: first_fit[i] for i in members[mem_id]},
                       max((first_fit[i] + sizes[i] for i in members[mem_id]), default=0))]
        if algorithm in ("auto", "best-fit"):
            candidates.append(_pack(members[mem_id], buffers, sizes))
        if algorithm in ("auto", "shared-objects"):
            shared_order = sorted(members[mem_id], key=lambda i: (-sizes[i], buffers[i].start, i))
            candidates.append(_shared_objects(shared_order, buffers, sizes))
        if algorithm == "shared-objects" or algorithm == "best-fit":
            candidates = candidates[1:]
        fitting = [c for c in candidates if arena.capacity is None or c[1] <= arena.capacity] or candidates[:1]
        layout, size = min(fitting, key=lambda c: c[1])
        offsets.update(layout)
        arena_sizes.append(size)

    arena_of = {i: mem_id for mem_id, ms in enumerate(members) for i in ms}
    placements = [Placement(arena_of[i], offsets[i], sizes[i]) for i in range(len(buffers))]
    tensor_bytes = [sum(sizes[i] for i in ms) for ms in members]
    plan = Plan(arenas, placements, arena_sizes, tensor_bytes, [len(ms) for ms in members], alignment, policy,
                algorithm)
    problems = verify_plan(buffers, plan)
    if problems:  # a planner bug, not a user error: say so loudly
        raise AssertionError("memory planner produced an invalid plan: " + "; ".join(problems[:5]))
    return plan


def verify_plan(buffers: Sequence[Buffer], plan: Plan) -> list[str]:
    """Every way `plan` is wrong for `buffers`: overlaps between live buffers, overflow, misalignment."""
    problems = []
    by_arena: dict[int, list[int]] = {}
    for index, (buffer, placement) in enumerate(zip(buffers, plan.placements)):
        label = buffer.label or f"buffer {index}"
        if not 0 <= placement.mem_id < len(plan.arenas):
            problems.append(f"{label}: mem_id {placement.mem_id} is not an arena")
            continue
        if placement.size < buffer.size:
            problems.append(f"{label}: reserved {placement.size} bytes for {buffer.size}")
        if placement.offset % plan.alignment:
            problems.append(f"{label}: offset {placement.offset} is not {plan.alignment}-byte aligned")
        if placement.offset + placement.size > plan.arena_sizes[placement.mem_id]:
            problems.append(f"{label}: ends at {placement.offset + placement.size}, past the end of arena "
                            f"'{plan.arenas[placement.mem_id].name}' ({plan.arena_sizes[placement.mem_id]} bytes)")
        by_arena.setdefault(placement.mem_id, []).append(index)
    for mem_id, members in by_arena.items():
        capacity = plan.arenas[mem_id].capacity
        if capacity is not None and plan.arena_sizes[mem_id] > capacity:
            problems.append(f"arena '{plan.arenas[mem_id].name}' needs {plan.arena_sizes[mem_id]} bytes "
                            f"but holds {capacity}")
        problems += overlaps([(buffers[i], plan.placements[i]) for i in members])
    return problems


def overlaps(items: Sequence[tuple[Buffer, Placement]]) -> list[str]:
    """Pairs of simultaneously live buffers whose bytes intersect (same arena assumed)."""
    problems = []
    # Sweep by offset so only neighbours in memory are compared.
    ordered = sorted(items, key=lambda item: item[1].offset)
    for i, (a, pa) in enumerate(ordered):
        for b, pb in ordered[i + 1:]:
            if pb.offset >= pa.offset + pa.size:
                break
            if a.overlaps(b) and pa.size and pb.size:
                problems.append(f"{a.label or 'a buffer'} [{pa.offset}, {pa.offset + pa.size}) and "
                                f"{b.label or 'a buffer'} [{pb.offset}, {pb.offset + pb.size}) overlap while both "
                                f"are live (instructions {max(a.start, b.start)}..{min(a.end, b.end)})")
    return problems
