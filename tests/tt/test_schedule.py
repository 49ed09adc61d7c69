"""Static schedules: every block exactly once, balanced, and the exact errors for bad ones."""

import itertools

import pytest

from tilelang_tt.errors import TTAnnotationError, TTScheduleError
from tilelang_tt.schedule import build_schedule, default_rect, make_schedule_spec, order_to_coord

GRIDS = [(1, 1), (3, 5), (8, 8), (7, 13), (16, 16), (2, 64)]
CORES = [1, 3, 8, 64, 110]


def _visits(sched):
    return [b for w in sched.cores for b in w.blocks]


@pytest.mark.parametrize("policy", ["contiguous", "strided", "rect"])
@pytest.mark.parametrize("order", ["row_major", "block_linear(2)", "block_linear(3)"])
@pytest.mark.parametrize("grid", GRIDS)
@pytest.mark.parametrize("cores", CORES)
def test_every_block_exactly_once(policy, order, grid, cores):
    spec = make_schedule_spec(policy=policy, order=order)
    sched = build_schedule(spec, grid[0], grid[1], 10, 11, cores)
    visits = _visits(sched)
    assert sorted(visits) == sorted(itertools.product(range(grid[0]), range(grid[1])))
    assert len(sched.cores) <= cores
    assert len({w.core for w in sched.cores}) == len(sched.cores)


@pytest.mark.parametrize("grid", GRIDS)
@pytest.mark.parametrize("cores", CORES)
def test_contiguous_imbalance_at_most_one(grid, cores):
    sched = build_schedule(make_schedule_spec(), grid[0], grid[1], 8, 8, cores)
    counts = [w.args["count"] for w in sched.cores]
    assert max(counts) - min(counts) <= 1
    assert len(sched.cores) == min(cores, 64, grid[0] * grid[1])
    starts = [w.args["start_id"] for w in sched.cores]
    assert starts == [sum(counts[:i]) for i in range(len(counts))]


def test_contiguous_split_matches_hand_count():
    sched = build_schedule(make_schedule_spec(), 10, 10, 8, 8, 64)   # 100 blocks on 64 cores
    assert [w.args["count"] for w in sched.cores] == [2] * 36 + [1] * 28
    assert sched.cores[36].args == {"start_id": 72, "count": 1}
    assert sched.cores[9].core == (1, 1)


@pytest.mark.parametrize("grid,k", [((7, 13), 2), ((8, 8), 4), ((5, 3), 8), ((9, 4), 3)])
def test_block_linear_is_a_bijection_grouped_in_k_by_k(grid, k):
    coords = [order_to_coord(i, grid[0], grid[1], k) for i in range(grid[0] * grid[1])]
    assert sorted(coords) == sorted(itertools.product(range(grid[0]), range(grid[1])))
    # the first k*k ids of a full group form the top-left k x k square
    if grid[0] >= k and grid[1] >= k:
        assert sorted(coords[: k * k]) == sorted(itertools.product(range(k), range(k)))


def test_strided_default_is_round_robin():
    sched = build_schedule(make_schedule_spec(policy="strided"), 4, 4, 8, 8, 3)
    assert sched.common_args == {"step": 3}
    assert [w.args["first_id"] for w in sched.cores] == [0, 1, 2]
    assert sched.cores[1].blocks == [order_to_coord(i, 4, 4, None) for i in (1, 4, 7, 10, 13)]


def test_strided_gap_is_an_error():
    # 4 cores with step 8 visit ids {0, 8}, {1, 9}, {2, 10}, {3, 11}: ids 4-7 and 12-15 are missed
    spec = make_schedule_spec(policy="strided", stride=(0, 8))
    with pytest.raises(TTScheduleError, match=r"8 of 16 blocks are never visited, e.g. \(by=1, bx=0\)"):
        build_schedule(spec, 4, 4, 8, 8, 4)


def test_strided_first_skips_blocks():
    spec = make_schedule_spec(policy="strided", stride=(2, 4))
    with pytest.raises(TTScheduleError, match=r"never visited, e.g. \(by=0, bx=0\)"):
        build_schedule(spec, 4, 4, 8, 8, 4)


def test_rect_explicit_lattice_with_offset_origin():
    spec = make_schedule_spec(policy="rect", rect=(1, 1, 2, 2))
    sched = build_schedule(spec, 4, 4, 8, 8, 64)
    rects = [(w.args["rect_y"], w.args["rect_x"], w.args["rect_h"], w.args["rect_w"]) for w in sched.cores]
    assert rects[0] == (0, 0, 1, 1)           # clipped corner before the origin
    assert (1, 1, 2, 2) in rects
    assert sum(h * w for _, _, h, w in rects) == 16


def test_rect_too_many_rectangles():
    spec = make_schedule_spec(policy="rect", rect=(0, 0, 1, 1))
    with pytest.raises(TTScheduleError, match=r"16 rectangles of 1x1 blocks are needed but only 4 cores"):
        build_schedule(spec, 4, 4, 8, 8, 4)


def test_rect_origin_outside_grid():
    spec = make_schedule_spec(policy="rect", rect=(5, 0, 2, 2))
    with pytest.raises(TTScheduleError, match=r"rect origin \(5, 0\) lies outside the 4x4 block grid"):
        build_schedule(spec, 4, 4, 8, 8, 64)


def test_default_rect_is_near_square_and_fits():
    assert default_rect(8, 8, 4) == (4, 4)
    assert default_rect(8, 8, 64) == (1, 1)
    h, w = default_rect(7, 13, 8)
    assert -(-7 // h) * -(-13 // w) <= 8


def test_non_positive_grid():
    with pytest.raises(TTScheduleError, match="non-positive extent"):
        build_schedule(make_schedule_spec(), 0, 4, 8, 8, 64)


@pytest.mark.parametrize("kwargs,message", [
    (dict(policy="diagonal"), r"policy='diagonal' is not one of \['contiguous', 'strided', 'rect'\]"),
    (dict(order="column_major"), r"order='column_major' is not 'row_major' or 'block_linear\(k\)'"),
    (dict(order="block_linear(0)"), r"block_linear\(k\) needs k >= 1"),
    (dict(policy="rect", rect=(0, 0, 0, 2)), r"rect\[2\] must be positive, got 0"),
    (dict(policy="rect", rect=(0, 0, 2)), r"rect must be a tuple of 4 integers"),
    (dict(policy="strided", stride=(0, 0)), r"stride\[1\] must be positive, got 0"),
    (dict(rect=(0, 0, 2, 2)), r"rect= is only meaningful with policy='rect'"),
    (dict(stride=(0, 2)), r"stride= is only meaningful with policy='strided'"),
    (dict(chunk_k_tiles=0), r"chunk_k_tiles must be a positive integer or None, got 0"),
    (dict(qk_chunk_tiles="4"), r"qk_chunk_tiles must be a positive integer or None"),
])
def test_invalid_schedule_arguments(kwargs, message):
    with pytest.raises(TTAnnotationError, match=message):
        make_schedule_spec(**kwargs)
