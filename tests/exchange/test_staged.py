import numpy as np
import pytest
import scipy.sparse as sp
import torch
from mpi4py import MPI

from hpcgnn.errors import ConfigError
from hpcgnn.exchange import StagedExchange
from hpcgnn.exchange import staged as staged_mod
from hpcgnn.exchange.halo import HaloExchange, HaloSets, halo_sets
from hpcgnn.exchange.staged import owned_groups, substage_selections
from hpcgnn.planning import counts_cost, parse_topology, uniform_topology
from hpcgnn.planning.plan import occurrences
from tests.devices import device_world
from tests.mpi import assert_all

N = 60
F = 3


# -- serial ----------------------------------------------------------------------------------
# (the plans are host arrays; the sub-stage adds run on the suite's device)
def test_occurrences_and_substages_with_duplicates():
    idx = np.array([5, 2, 5, 7, 2, 5, 0])
    np.testing.assert_array_equal(occurrences(idx), [0, 0, 1, 0, 1, 2, 0])
    subs = substage_selections(idx)
    assert [s.tolist() for s in subs] == [[0, 1, 3, 6], [2, 4], [5]]
    for s in subs:
        assert len(np.unique(idx[s])) == len(s)
    assert substage_selections(np.zeros(0, dtype=np.int64)) == []


def test_substage_adds_accumulate_duplicates_like_add_at(device):
    rng = np.random.default_rng(0)
    idx = rng.integers(0, 6, 40)
    rows = rng.standard_normal((40, 3))
    want = np.zeros((6, 3))
    np.add.at(want, idx, rows)
    buf = device.zeros((6, 3), torch.float64)
    for sel in substage_selections(idx):  # what StagedExchange.scatter_add does per stage
        buf[device.from_numpy(idx[sel])] += device.from_numpy(rows[sel])
    np.testing.assert_allclose(device.to_host(buf), want, rtol=1e-12, atol=1e-12)
    # one plain indexed += loses the duplicates: the sub-stages are what makes it exact
    naive = device.zeros((6, 3), torch.float64)
    naive[device.from_numpy(idx)] += device.from_numpy(rows)
    assert not np.allclose(device.to_host(naive), want)


def test_owned_groups_by_destination_set():
    # rows 0, 2 go to ranks 1 and 3; row 1 to rank 1 only; row 4 to rank 3 only
    sets = HaloSets(
        halo=np.zeros(0, np.int64), recv_counts=np.zeros(4, np.int64),
        send_rows=np.array([0, 1, 2, 0, 2, 4]), send_counts=np.array([0, 3, 0, 3]),
    )
    groups = {d: rows.tolist() for d, rows in owned_groups(sets, 4)}
    assert groups == {(1,): [1], (3,): [4], (1, 3): [0, 2]}
    assert owned_groups(HaloSets(*(np.zeros(0, np.int64),) * 4), 4) == []


# -- MPI -------------------------------------------------------------------------------------
def _rows(world, seed: int = 3) -> tuple[sp.csr_matrix, np.ndarray]:
    """This rank's row block of a random 60 x 60 matrix (same on every rank)."""
    a = sp.random(N, N, density=0.06, format="lil", random_state=seed)
    a[N - 1, 0] = 1.0  # the last rank needs vertex 0 of rank 0 (forwarded on a line)
    a[0, N - 1] = 1.0
    offsets = np.linspace(0, N, world.size + 1).astype(np.int64)
    r = world.rank
    return a.tocsr()[offsets[r] : offsets[r + 1]], offsets


def _line(p: int):
    return parse_topology(
        {"ranks": p, "links": [{"a": r, "b": r + 1, "bandwidth_gbps": 10.0} for r in range(p - 1)]}
    )


def _slow_direct(p: int):
    """Complete topology whose link 0 -- p-1 is 200x slower than the others."""
    links = [
        {"a": a, "b": b, "bandwidth_gbps": 0.1 if (a, b) == (0, p - 1) else 20.0}
        for a in range(p)
        for b in range(a + 1, p)
    ]
    return parse_topology({"ranks": p, "links": links})


def _slow_latent(p: int):
    """:func:`_slow_direct` whose stages cost 1 ms each: forwarding never pays."""
    doc = {"ranks": p, "stage_alpha_us": 1000.0, "links": [
        {"a": ln.src, "b": ln.dst, "bandwidth_gbps": ln.bandwidth_gbps}
        for ln in _slow_direct(p).links if ln.src < ln.dst]}
    return parse_topology(doc)


TOPOLOGIES = {
    "uniform": uniform_topology, "line": _line, "slow": _slow_direct, "latent": _slow_latent,
}


def _compare(comm, ex: StagedExchange, ref: HaloExchange, seed: int) -> None:
    """Gather and scatter-add of ``ex`` equal ``ref``'s, on ``comm``'s device."""
    dev = comm.device
    rng = np.random.default_rng(seed + 17 * comm.rank)
    owned = ex.sets.send_rows.max(initial=-1) + 1 + int(rng.integers(0, 3))
    x = dev.from_numpy(rng.standard_normal((owned, F)))
    got, want = ex.gather(x), ref.gather(x)
    ok = got.shape == want.shape and got.dtype == want.dtype and got.device == x.device
    assert_all(comm, ok and torch.allclose(got, want, rtol=0, atol=1e-12), "gather differs")
    halo = dev.from_numpy(rng.standard_normal((len(ex.sets.halo), F)))
    out0 = dev.from_numpy(rng.standard_normal((owned, F)))
    got = ex.scatter_add(halo, out0.clone())
    want = ref.scatter_add(halo, out0.clone())
    assert_all(comm, torch.allclose(got, want, rtol=1e-12, atol=1e-12), "scatter_add differs")


# The exchanges run on a communicator of the suite's device (``device_world``): their
# buffers and index tensors live there, the sets and plans are host arrays.
@pytest.mark.mpi
@pytest.mark.parametrize("kind", sorted(TOPOLOGIES))
@pytest.mark.parametrize("chunks", [64, 2, None])
def test_staged_matches_p2p_exchange(world, device, kind, chunks):
    with device_world(device) as comm:
        rows, offsets = _rows(comm)
        sets = halo_sets(comm, rows, offsets)
        ref = HaloExchange(comm, sets)
        p = comm.size
        topo = TOPOLOGIES[kind](p)
        for fallback in (True, False):
            ex = StagedExchange(comm, sets, topo, seed=1, chunks=chunks, fallback=fallback)
            _compare(comm, ex, ref, seed=5)
            ok = ex.num_stages <= max(p - 1, 0) and len(ex.stage_counts) == ex.num_stages
            assert_all(comm, ok)
            if p == 1:
                empty = ex.gather(device.zeros((0, F), torch.float32))
                assert_all(comm, ex.num_stages == 0 and empty.shape == (0, F))
            if p >= 3 and kind == "line" and not fallback:
                assert_all(comm, ex.num_stages >= 2, "a line must forward")
            if p >= 3 and kind == "slow":
                ok = ex.num_stages >= 2 and not ex.is_direct
                assert_all(comm, ok, f"slow link: {ex.num_stages} stages, direct {ex.is_direct}")
            if p >= 2 and kind == "latent":
                assert_all(comm, ex.num_stages == 1, f"latency: {ex.num_stages} stages")
            if kind == "uniform" and p >= 2:
                # direct on a uniform topology is never modelled slower, SPST may only tie it
                assert_all(comm, ex.num_stages >= 1)


@pytest.mark.mpi
def test_an_all_direct_plan_runs_as_one_alltoallv(world, device, monkeypatch):
    """Every transfer from its owner to its destination in stage 1: p2p's path, p2p's rows."""
    with device_world(device) as comm:
        rows, offsets = _rows(comm, seed=9)
        sets = halo_sets(comm, rows, offsets)
        ref = HaloExchange(comm, sets)
        ex = StagedExchange(comm, sets, _slow_latent(comm.size), seed=1, chunks=4)
        direct = comm.size == 1 or all(k == 1 and s != d for k, s, d in ex.counts)
        assert_all(comm, direct and ex.is_p2p == (comm.size > 1), f"plan {sorted(ex.counts)}")
        dev = comm.device
        rng = np.random.default_rng(comm.rank)
        owned = int(offsets[comm.rank + 1] - offsets[comm.rank])
        x = dev.from_numpy(rng.standard_normal((owned, F)))
        halo = dev.from_numpy(rng.standard_normal((len(sets.halo), F)))
        want = ref.gather(x), ref.scatter_add(halo, torch.zeros_like(x))
        calls: list[str] = []
        alltoallv, isend = type(comm).alltoallv, type(comm).isend

        def spy_collective(self, *args, **kwargs):
            calls.append("alltoallv")
            return alltoallv(self, *args, **kwargs)

        def spy_send(self, *args, **kwargs):
            calls.append("isend")
            return isend(self, *args, **kwargs)

        monkeypatch.setattr(type(comm), "alltoallv", spy_collective)
        monkeypatch.setattr(type(comm), "isend", spy_send)
        before = comm.stats.categories["halo"].bytes if "halo" in comm.stats.categories else 0
        try:
            ex.reset_timers()
            got = ex.gather(x), ex.scatter_add(halo, torch.zeros_like(x))
        finally:
            monkeypatch.undo()
        moved = comm.stats.categories["halo"].bytes - before if comm.size > 1 else 0
        same = torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
        assert_all(comm, same, "the direct plan's rows differ from p2p's")
        path = calls == (["alltoallv", "alltoallv"] if comm.size > 1 else [])
        assert_all(comm, path, f"calls {calls}: not one all-to-allv each way")
        want_bytes = (len(sets.halo) + int(sets.send_counts.sum())) * F * 8
        assert_all(comm, comm.size == 1 or moved == want_bytes, f"halo bytes {moved}")
        timed = ex.fwd_stage_seconds, ex.bwd_stage_seconds
        ok = all(len(t) == ex.num_stages and bool(np.all(t > 0)) for t in timed)
        assert_all(comm, ok, f"stage seconds {timed} for {ex.num_stages} stages")


@pytest.mark.mpi
@pytest.mark.parametrize("kind", ["line", "slow"])
def test_stages_in_sequence_give_the_same_rows_and_time_each_stage(world, device, kind):
    """``sequential`` (the report's probes: DGCL's model of a plan) changes no row."""
    with device_world(device) as comm:
        rows, offsets = _rows(comm)
        sets = halo_sets(comm, rows, offsets)
        ex = StagedExchange(comm, sets, TOPOLOGIES[kind](comm.size), seed=1, chunks=4,
                            fallback=False)
        ex.sequential = True
        ex.reset_timers()
        _compare(comm, ex, HaloExchange(comm, sets), seed=7)
        timed = ex.fwd_stage_seconds
        ok = len(timed) == ex.num_stages and bool(np.all(timed >= 0))
        assert_all(comm, ok, f"{timed} for {ex.num_stages} stages")
        if comm.size >= 3:
            assert_all(comm, ex.num_stages >= 2, "no forwarding to sequence")


@pytest.mark.mpi
def test_staged_float32_and_one_dimensional_rows(world, device):
    with device_world(device) as comm:
        rows, offsets = _rows(comm, seed=8)
        sets = halo_sets(comm, rows, offsets)
        ref = HaloExchange(comm, sets)
        ex = StagedExchange(comm, sets, _line(comm.size), chunks=4, fallback=False)
        owned = int(offsets[comm.rank + 1] - offsets[comm.rank])
        x = device.from_numpy(np.arange(owned, dtype=np.float32) + 1000 * comm.rank)
        got = ex.gather(x)
        assert_all(comm, got.dtype == torch.float32 and torch.equal(got, ref.gather(x)))
        x2 = x.reshape(-1, 1).expand(-1, 4)  # not contiguous
        assert_all(comm, torch.equal(ex.gather(x2), ref.gather(x2.contiguous())))


def _odd_trees(topo, items, **kwargs):
    """Trees in which sources also send at stage 2 and one rank feeds several peers."""
    trees = []
    for s, dests, _ in items:
        d = list(dests)
        tree = [(1, s, d[0])]
        if len(d) > 1:
            tree.append((2, s, d[1]))
        tree += [(2, d[0], e) for e in d[2:]]
        trees.append(tuple(tree))
    return trees, False


@pytest.mark.mpi
def test_staged_mixed_owned_and_forwarded_sends(world, device, monkeypatch):
    monkeypatch.setattr(staged_mod, "plan_items", _odd_trees)
    with device_world(device) as comm:
        rows, offsets = _rows(comm, seed=11)
        sets = halo_sets(comm, rows, offsets)
        ex = StagedExchange(comm, sets, uniform_topology(comm.size), chunks=None)
        _compare(comm, ex, HaloExchange(comm, sets), seed=2)
        assert_all(comm, ex.num_stages == min(comm.size - 1, 2))


@pytest.mark.mpi
def test_staged_bytes_and_reporting(world, device):
    with device_world(device) as comm:
        _check_bytes_and_reporting(comm)


def _check_bytes_and_reporting(comm) -> None:
    rows, offsets = _rows(comm, seed=4)
    sets = halo_sets(comm, rows, offsets)
    stats, dev = comm.stats, comm.device

    def halo_bytes_calls() -> tuple[int, int]:
        c = stats.categories.get("halo")
        return (0, 0) if c is None else (c.bytes, c.calls)

    def ones(rows: int):
        return dev.from_numpy(np.ones((rows, F), dtype=np.float64))

    b0, _ = halo_bytes_calls()
    ex = StagedExchange(comm, sets, _line(comm.size), chunks=8, fallback=False)
    b1, c1 = halo_bytes_calls()
    assert_all(comm, b1 == b0, "setup traffic counted as halo")
    owned = int(offsets[comm.rank + 1] - offsets[comm.rank])
    ex.gather(ones(owned))
    b2, c2 = halo_bytes_calls()
    mine = b2 - b1
    assert_all(comm, mine == int(ex.recv_rows_per_stage.sum()) * F * 8, f"bytes {mine}")
    assert_all(comm, c2 - c1 == ex.num_stages, "one all-to-allv per stage")
    total = comm.mpi.allreduce(mine, op=MPI.SUM)
    assert_all(comm, total == sum(ex.counts.values()) * F * 8, "bytes over ranks")
    # backward: each rank gets back what it sent
    ex.scatter_add(ones(len(sets.halo)), dev.zeros((owned, F), torch.float64))
    b3, _ = halo_bytes_calls()
    assert_all(comm, comm.mpi.allreduce(b3 - b2, op=MPI.SUM) == total)
    # stage counts and modelled times agree with the global plan
    per = np.zeros(ex.num_stages, dtype=np.int64)
    for (k, _, _), c in ex.counts.items():
        per[k - 1] += c
    ok = np.array_equal(per, ex.stage_counts)
    rows_sum = comm.mpi.allreduce(ex.recv_rows_per_stage, op=MPI.SUM)
    ok = ok and np.array_equal(rows_sum, ex.stage_counts)
    t = ex.modelled_stage_times(4.0 * F)
    ok = ok and len(t) == ex.num_stages
    if ex.num_stages:
        ok = ok and np.isclose(t.sum(), counts_cost(ex.topo, ex.counts, 4.0 * F).time_s)
    assert_all(comm, ok, "stage counts / modelled times")
    ok = len(ex.fwd_stage_seconds) == len(ex.bwd_stage_seconds) == ex.num_stages
    ok = ok and bool(np.all(ex.fwd_stage_seconds > 0)) and bool(np.all(ex.bwd_stage_seconds > 0))
    ex.reset_timers()
    ok = ok and not ex.fwd_stage_seconds.any() and not ex.bwd_stage_seconds.any()
    assert_all(comm, ok, "stage timers")


@pytest.mark.mpi
def test_staged_rejects_wrong_rank_count_and_stage_bound(world, device):
    with device_world(device) as comm:
        rows, offsets = _rows(comm)
        sets = halo_sets(comm, rows, offsets)
        p = comm.size
        with pytest.raises(ConfigError, match=rf"has {p + 1} ranks but the communicator has {p}$"):
            StagedExchange(comm, sets, uniform_topology(p + 1))
        with pytest.raises(ConfigError, match="chunks must be >= 1"):
            StagedExchange(comm, sets, uniform_topology(p), chunks=0)
        if p >= 3:  # vertex 0 must travel p - 1 hops on a line
            with pytest.raises(ConfigError, match="no route within 1 stages"):
                StagedExchange(comm, sets, _line(p), max_stages=1, fallback=False)
        comm.mpi.Barrier()


@pytest.mark.mpi
@pytest.mark.parametrize("kind", ["line", "slow"])
def test_staged_point_to_point_only_on_plan_links(world, device, monkeypatch, kind):
    with device_world(device) as comm:
        _check_plan_links(comm, monkeypatch, kind)


def _check_plan_links(comm, monkeypatch, kind: str) -> None:
    rows, offsets = _rows(comm, seed=6)
    sets = halo_sets(comm, rows, offsets)
    ex = StagedExchange(comm, sets, TOPOLOGIES[kind](comm.size), chunks=4, fallback=False)
    sent: list[tuple[int, int, int]] = []
    isend = type(comm).isend
    me, dev = comm.rank, comm.device

    def spy(self, buf, dest, tag=0, method=None):
        sent.append((tag + 1, self.rank, dest))
        return isend(self, buf, dest, tag, method)

    def no_collective(*args, **kwargs):
        raise AssertionError("a planned stage ran a collective")

    ref = HaloExchange(comm, sets)
    rng = np.random.default_rng(comm.rank)
    x = dev.from_numpy(rng.standard_normal((int(offsets[me + 1] - offsets[me]), F)))
    halo = dev.from_numpy(rng.standard_normal((len(sets.halo), F)))
    want = ref.gather(x), ref.scatter_add(halo, torch.zeros_like(x))
    monkeypatch.setattr(type(comm), "isend", spy)
    if not ex.is_p2p:  # a one-stage plan is the direct exchange: p2p's all-to-allv
        monkeypatch.setattr(type(comm), "alltoallv", no_collective)
    comm.stats.tracing = True
    try:
        got = ex.gather(x), ex.scatter_add(halo, torch.zeros_like(x))
    finally:
        comm.stats.tracing = False
        monkeypatch.undo()
    same = torch.equal(got[0], want[0]) and torch.allclose(got[1], want[1], rtol=0, atol=1e-12)
    assert_all(comm, same, "point-to-point stages differ from the p2p exchange")
    # forward and backward: one message per (stage, src, dst) table of the plan, each way
    fwd = sorted(e for e in ex.counts if e[1] == me)
    bwd = sorted((k, d, s) for (k, s, d) in ex.counts if d == me)
    ok = sorted(sent) == ([] if ex.is_p2p else sorted(fwd + bwd))
    names = {s.name for s in comm.stats.spans} | ({"halo.stage1"} if ex.is_p2p else set())
    ok = ok and all(f"halo.stage{k}" in names for k in range(1, ex.num_stages + 1))
    assert_all(comm, ok, f"messages {sorted(sent)} vs plan {fwd + bwd}")
    comm.stats.spans.clear()


def _sockets(p: int):
    """:func:`_slow_direct` with ranks 0, 1 on one socket (node), rank 2 on the other
    socket of their host, every other rank a host of its own: all three pair methods."""
    nodes = [[0, 1][:p], [2], *([r] for r in range(3, p))][: max(p - 1, 1)]
    doc = {"ranks": p, "nodes": [
        {"name": f"s{i}", "ranks": ranks, "host": "h0" if i < 2 else f"h{i}"}
        for i, ranks in enumerate(nodes)],
        "links": [{"a": ln.src, "b": ln.dst, "bandwidth_gbps": ln.bandwidth_gbps}
                  for ln in _slow_direct(p).links if ln.src < ln.dst]}
    return parse_topology(doc)


@pytest.mark.mpi
@pytest.mark.parametrize("fallback", [True, False])
def test_the_bytes_each_pair_method_carries_are_the_plans(world, device, fallback):
    """DGCL 6.2: every pair's messages go by the plan's method for it; the bytes received
    by method equal the plan's tables by method (forward and the reverse backward), both
    when the plan forwards and when it runs as one all-to-allv."""
    from hpcgnn.planning.methods import host_method, pair_method

    with device_world(device) as comm:
        rows, offsets = _rows(comm)
        sets = halo_sets(comm, rows, offsets)
        topo = _sockets(comm.size)
        ex = StagedExchange(comm, sets, topo, seed=1, chunks=4, fallback=fallback)
        me = comm.rank
        want: dict[str, int] = {}
        for (_, s, d), c in ex.counts.items():
            if me in (s, d):  # received forward at d, backward at s
                m = pair_method(topo, s, d)
                want[m] = want.get(m, 0) + c * F * 8
        comm.stats.reset()
        _compare(comm, ex, HaloExchange(comm, sets), seed=5)
        got = comm.stats.methods.get(ex.category, {})
        assert_all(comm, got == want, f"by method {got}, planned {want}")
        methods = [pair_method(topo, 0, b) for b in range(1, comm.size)]
        assert methods == ["ipc", "host-staged", *["nic"] * (comm.size - 3)][: comm.size - 1]
        assert_all(comm, ex.methods == [pair_method(topo, me, b) if b != me else "ipc"
                                        for b in range(comm.size)])
        local = [comm.wire.method_path(m) for m in ex.methods] if device.is_cuda else [
            host_method(True)] * comm.size  # one host: every peer by shared memory
        assert_all(comm, ex.transports == local, f"{ex.transports}")
        if comm.size >= 3 and not fallback:
            assert_all(comm, not ex.is_p2p and ex.num_stages >= 2, "the slow link forwards")
