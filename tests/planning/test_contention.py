import pytest

from hpcgnn.planning.contention import SHARED_SLOWDOWN, PairTiming, SharedBus, shared_buses

MB = 1 << 20


def _timings(together: dict) -> list[PairTiming]:
    """Helper: the three pairings of ranks 0-3 of host h, each pair 1 ms alone."""
    return [PairTiming("h", pq, (1e-3, 1e-3), t) for pq, t in together.items()]


def test_pairs_that_slow_each_other_down_share_one_bus():
    """Like two GPUs per PCIe switch: 0-1 and 2-3 stay under their switches, the pairs
    across them share the uplinks and slow down 2x."""
    t = _timings({((0, 1), (2, 3)): 1.05e-3, ((0, 2), (1, 3)): 2e-3, ((0, 3), (1, 2)): 2.5e-3})
    assert [x.shared for x in t] == [False, True, True]
    assert t[1].slowdown == pytest.approx(2.0) and SHARED_SLOWDOWN < 2.0
    (bus,) = shared_buses(t, MB)
    assert bus == SharedBus("h", ((0, 2), (0, 3), (1, 2), (1, 3)), pytest.approx(4 * MB / 2e-3))


def test_no_contention_no_bus_and_separate_groups_stay_apart():
    assert shared_buses(_timings({((0, 1), (2, 3)): 1e-3}), MB) == []
    t = [PairTiming("a", ((0, 1), (2, 3)), (1e-3, 2e-3), 4e-3),
         PairTiming("b", ((4, 5), (6, 7)), (1e-3, 1e-3), 3e-3)]
    buses = shared_buses(t, MB)
    assert [(b.host, b.pairs) for b in buses] == [("a", ((0, 1), (2, 3))),
                                                  ("b", ((4, 5), (6, 7)))]
    assert t[0].as_dict() == {"host": "a", "pairs": [[0, 1], [2, 3]], "alone_us": [1000.0,
                              2000.0], "together_us": 4000.0, "slowdown": 2.0, "shared": True}


def test_hosts_whose_ranks_share_cores_infer_no_bus():
    t = _timings({((0, 2), (1, 3)): 2e-3})
    assert len(shared_buses(t, MB)) == 1 and shared_buses(t, MB, skip={"h"}) == []
