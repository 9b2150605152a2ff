import math

import pytest

from hpcgnn.errors import GridError
from hpcgnn.layout.shapes import (
    MAX_PROCS,
    admissible_shapes,
    choose_shape,
    divisors,
    factorizations,
    parse_grid,
)


@pytest.mark.parametrize("p", range(1, 9))
def test_automatic_shapes_cover_every_p(p):
    assert choose_shape("1d", p).dims == (p,)
    assert math.prod(choose_shape("2d", p).dims) == p
    c = choose_shape("1.5d", p).replication
    assert p % c == 0 and c * c <= p
    if p in (1, 8):
        assert choose_shape("3d", p).dims == ((1, 1, 1) if p == 1 else (2, 2, 2))
    else:
        with pytest.raises(GridError, match="no 3d grid"):
            choose_shape("3d", p)


@pytest.mark.parametrize("p", range(1, 9))
def test_every_factorization_is_admissible(p):
    for kind, nd in [("2d", 2), ("3d", 3), ("1.5d", 2)]:
        shapes = admissible_shapes(kind, p)
        assert {s.dims for s in shapes} == set(factorizations(p, nd))
        for s in shapes:
            assert choose_shape(kind, p, s.dims).dims == s.dims


def test_two_dimensional_auto_is_most_square():
    assert choose_shape("2d", 6).dims == (3, 2)
    assert choose_shape("2d", 4).dims == (2, 2)
    assert choose_shape("2d", 7).dims == (7, 1)
    assert choose_shape("3d", 12).dims == (3, 2, 2)


@pytest.mark.parametrize(
    "kind, p, grid, rep, match",
    [
        ("3d", 6, None, None, "no 3d grid"),
        ("1.5d", 4, None, 3, "replication 3 does not divide 4"),
        ("2d", 4, "3x2", None, "has 6 processes but 4"),
        ("2d", 4, "2x2x1", None, "needs a grid with 2 dimensions"),
        ("1.5d", 4, "2x2", 1, "disagrees"),
        ("2d", 4, None, 2, "--replication applies to the 1.5d"),
        ("4d", 4, None, None, "unknown grid kind"),
        ("2d", 4, "2xa", None, "cannot parse"),
        ("2d", 4, "0x4", None, "positive"),
    ],
)
def test_bad_shapes_raise_clear_errors(kind, p, grid, rep, match):
    with pytest.raises(GridError, match=match):
        choose_shape(kind, p, grid, rep)


def test_parse_grid():
    assert parse_grid("2x3X4") == (2, 3, 4)
    assert parse_grid("5") == (5,)


@pytest.mark.parametrize("p", [*range(1, 50), 720720, 2**20, 2**20 - 3, 999983 * 2])
def test_divisors_in_order(p):
    brute = [d for d in range(1, p + 1) if p % d == 0] if p < 50 else None
    got = divisors(p)
    assert got == sorted(set(got)) and all(p % d == 0 for d in got)
    assert brute is None or got == brute
    assert len(factorizations(p, 2)) == len(got)


def test_large_p_is_enumerated_from_its_divisors():
    # 2^20: 21 divisors, C(22, 2) = 231 ordered triples; a large prime: only the trivial ones
    assert len(factorizations(MAX_PROCS, 3)) == 231
    assert len(factorizations(1048573, 3)) == 3
    assert choose_shape("2d", MAX_PROCS).dims == (1024, 1024)
    assert choose_shape("1.5d", MAX_PROCS).replication == 1024
    assert choose_shape("3d", 2**18).dims == (64, 64, 64)
