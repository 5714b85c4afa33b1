"""Properties of the memory planner over random lifetimes and sizes (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from etmlir.executable.planner import (
    Arena, Buffer, Placement, Plan, PlanningError, align_up, parse_arenas, plan_memory, verify_plan)

buffers_strategy = st.lists(
    st.tuples(st.integers(0, 5000), st.integers(0, 60), st.integers(0, 20)).map(
        lambda t: Buffer(size=t[0], start=t[1], end=t[1] + t[2])),
    min_size=0, max_size=60)


@settings(max_examples=300, deadline=None)
@given(buffers=buffers_strategy, alignment=st.sampled_from([1, 8, 16, 64]),
       algorithm=st.sampled_from(["auto", "best-fit", "shared-objects"]))
def test_single_arena_never_overlaps_and_never_exceeds_the_naive_sum(buffers, alignment, algorithm):
    plan = plan_memory(buffers, alignment=alignment, algorithm=algorithm)
    assert verify_plan(buffers, plan) == []
    naive = sum(align_up(max(b.size, 1), alignment) for b in buffers)
    assert plan.total_bytes <= naive
    # Independent brute-force check: any two buffers live at the same instruction are disjoint.
    for i, (a, pa) in enumerate(zip(buffers, plan.placements)):
        assert pa.offset % alignment == 0 and pa.size >= a.size
        for b, pb in zip(buffers[i + 1:], plan.placements[i + 1:]):
            if a.overlaps(b):
                assert pa.offset + pa.size <= pb.offset or pb.offset + pb.size <= pa.offset


@settings(max_examples=200, deadline=None)
@given(buffers=buffers_strategy)
def test_auto_is_never_worse_than_the_shared_object_greedy(buffers):
    auto = plan_memory(buffers, algorithm="auto").total_bytes
    assert auto <= plan_memory(buffers, algorithm="shared-objects").total_bytes
    assert auto <= plan_memory(buffers, algorithm="best-fit").total_bytes


@settings(max_examples=200, deadline=None)
@given(buffers=buffers_strategy, capacity=st.integers(0, 20000),
       policy=st.sampled_from(["largest-first", "smallest-first"]))
def test_bounded_fast_arena_respects_its_capacity(buffers, capacity, policy):
    plan = plan_memory(buffers, [Arena("fast", capacity), Arena("slow")], policy=policy)
    assert verify_plan(buffers, plan) == []
    assert plan.arena_sizes[0] <= capacity
    assert plan.total_bytes <= plan.naive_bytes
    assert sum(plan.tensor_counts) == len(buffers)


def test_largest_first_puts_the_large_tensors_in_fast_memory():
    # All three live at once: largest first, the 1000-byte one takes fast memory, the 100-byte one
    # no longer fits, the 10-byte one still does.
    buffers = [Buffer(1000, 0, 1), Buffer(100, 0, 1), Buffer(10, 0, 1)]
    plan = plan_memory(buffers, [Arena("fast", 1024), Arena("slow")], alignment=1)
    assert [p.mem_id for p in plan.placements] == [0, 1, 0]
    plan = plan_memory(buffers, [Arena("fast", 1024), Arena("slow")], alignment=1, policy="smallest-first")
    assert [p.mem_id for p in plan.placements] == [1, 0, 0]


def test_no_arena_large_enough_is_an_error_naming_the_buffer():
    with pytest.raises(PlanningError, match=r"conv out \(2,048 bytes, live 0\.\.3\) fits in no arena: fast"):
        plan_memory([Buffer(2048, 0, 3, "conv out")], [Arena("fast", 1024)])


def test_verify_plan_reports_overlaps_and_overflow():
    buffers = [Buffer(32, 0, 2, "a"), Buffer(32, 1, 3, "b")]
    bad = Plan([Arena("x")], [Placement(0, 0, 32), Placement(0, 16, 32)], [32], [64], [2], 16, "", "")
    problems = verify_plan(buffers, bad)
    assert any("a [0, 32) and b [16, 48) overlap while both are live (instructions 1..2)" in p for p in problems)
    assert any("past the end of arena 'x'" in p for p in problems)


def test_parse_arenas():
    assert parse_arenas(["fast:64k", "slow"]) == [Arena("fast", 65536), Arena("slow")]
    assert parse_arenas(["sram:2M"]) == [Arena("sram", 2 * 1024 * 1024)]
    assert parse_arenas([]) == [Arena("planned")]
    for bad in (["fast:lots"], ["9x"], ["a", "a"]):
        with pytest.raises(PlanningError):
            parse_arenas(bad)
