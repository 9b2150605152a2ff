"""Every collective of :class:`hpcgnn.comm.Comm`: values, buffer kinds and byte accounting.

Run at 1, 2, 3 and 4 ranks (3 gives uneven splits). The bytes each call records are
checked against the accounting documented in :class:`hpcgnn.comm.stats.CommStats`; each
test uses the ``world`` fixture, whose stats start empty.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch
from mpi4py import MPI

from hpcgnn.backend import Mark, cpu
from hpcgnn.comm import Comm, CommStats, as_array
from hpcgnn.grid import ProcessGrid
from hpcgnn.layout.shapes import choose_shape
from tests.mpi import assert_all

KINDS = ["numpy", "torch"]
DTYPES = [np.float32, np.float64, np.int64]


def make(kind: str, arr: np.ndarray):
    """``arr`` as the buffer kind under test (a tensor shares the array's memory)."""
    arr = np.ascontiguousarray(arr)
    return torch.from_numpy(arr) if kind == "torch" else arr


def values(buf) -> np.ndarray:
    return buf.numpy() if isinstance(buf, torch.Tensor) else np.asarray(buf)


def same_kind(out, sendbuf) -> bool:
    """Tensor in gives tensor out (same dtype and device); NumPy in gives NumPy out."""
    if isinstance(sendbuf, torch.Tensor):
        return (
            isinstance(out, torch.Tensor)
            and out.dtype == sendbuf.dtype
            and out.device == sendbuf.device
        )
    return type(out) is np.ndarray and out.dtype == sendbuf.dtype


def recorded(comm: Comm, category: str) -> tuple[int, int]:
    """``(calls, bytes)`` recorded under ``category`` (``(0, 0)`` if never)."""
    s = comm.stats.snapshot().get(category, {"calls": 0, "bytes": 0})
    return int(s["calls"]), int(s["bytes"])


def obj_bytes(obj) -> int:
    return len(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))


# -- serial ----------------------------------------------------------------------------------
def test_as_array_is_a_view_and_refuses_what_mpi_cannot_read():
    t = torch.arange(6, dtype=torch.float64).reshape(2, 3)
    view = as_array(t)
    view[0, 0] = 42.0
    assert t[0, 0].item() == 42.0  # no copy
    assert as_array(torch.ones(3, requires_grad=True)).shape == (3,)
    with pytest.raises(ValueError, match="contiguous"):
        as_array(t.t())
    with pytest.raises(ValueError, match="contiguous"):
        as_array(np.ones((3, 2))[:, 0])
    with pytest.raises(TypeError, match="staged"):
        as_array(torch.empty(3, device="meta"))


def test_comm_carries_device_and_times_with_the_stats_clock():
    ticks = iter(range(1000))
    stats = CommStats(mark=lambda: Mark(float(next(ticks))))
    comm = Comm(MPI.COMM_SELF, stats, "self")
    assert comm.device == cpu()
    assert Comm(MPI.COMM_SELF).stats.mark == cpu().mark
    comm.barrier()
    comm.allreduce_scalar(1.0)
    comm.bcast_obj("x")
    snap = stats.snapshot()
    # each call marks the clock twice, one tick apart
    assert snap["barrier"] == {"calls": 1, "bytes": 0, "seconds": 1.0}
    assert snap["control"]["calls"] == 2 and snap["control"]["seconds"] == 2.0


# -- dense collectives -----------------------------------------------------------------------
@pytest.mark.mpi
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_bcast_in_place_from_last_rank(world, kind, dtype):
    p, me = world.size, world.rank
    root = p - 1
    want = (np.arange(12) * 3 + 1).astype(dtype).reshape(4, 3)
    buf = make(kind, want if me == root else np.zeros_like(want))
    out = world.bcast(buf, root, "dense_bcast")
    assert_all(world, out is buf, "bcast returns its buffer")
    assert_all(world, np.array_equal(values(buf), want), "bcast values")
    calls, nbytes = recorded(world, "dense_bcast")
    assert_all(world, calls == 1 and nbytes == (0 if me == root else want.nbytes), "bytes")


@pytest.mark.mpi
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_allreduce_sum_and_max(world, kind, dtype):
    p, me = world.size, world.rank
    base = np.arange(10).astype(dtype)
    buf = make(kind, base * (me + 1))
    out = world.allreduce(buf, "allreduce")
    assert_all(world, out is buf, "allreduce returns its buffer")
    assert_all(world, np.array_equal(values(buf), base * (p * (p + 1) // 2)), "sum")
    top = make(kind, np.full(3, me, dtype=dtype))
    world.allreduce(top, "allreduce", MPI.MAX)
    assert_all(world, np.array_equal(values(top), np.full(3, p - 1, dtype=dtype)), "max")
    calls, nbytes = recorded(world, "allreduce")
    want = round(2 * base.nbytes * (p - 1) / p) + round(2 * values(top).nbytes * (p - 1) / p)
    assert_all(world, calls == 2 and nbytes == want, f"bytes {nbytes} != {want}")


@pytest.mark.mpi
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_reduce_scatter_uneven_blocks(world, kind, dtype):
    p, me = world.size, world.rank
    counts = [r + 1 for r in range(p)]  # rank r gets r + 1 rows
    total = sum(counts)
    base = np.arange(total * 3).astype(dtype).reshape(total, 3)
    send = make(kind, base * (me + 1))
    out = world.reduce_scatter(send, counts, "reduce_scatter")
    lo = sum(counts[:me])
    want = base[lo : lo + counts[me]] * (p * (p + 1) // 2)
    assert_all(world, same_kind(out, send), "tensor in, tensor out; NumPy in, NumPy out")
    assert_all(world, np.array_equal(values(out), want), "reduce-scatter values")
    calls, nbytes = recorded(world, "reduce_scatter")
    row = 3 * base.itemsize
    if p == 1:  # a copy: nothing is communicated or recorded
        assert_all(world, calls == 0 and nbytes == 0, "one rank records nothing")
    else:
        assert_all(world, calls == 1 and nbytes == (total - counts[me]) * row, "bytes")


@pytest.mark.mpi
@pytest.mark.parametrize("kind", KINDS)
def test_reduce_scatter_everything_to_one_rank(world, kind):
    """The ``ReduceToRoot`` pattern: all rows to rank 0, empty blocks elsewhere."""
    p, me = world.size, world.rank
    send = make(kind, np.full((5, 2), me + 1, dtype=np.float64))
    counts = [5] + [0] * (p - 1)
    out = world.reduce_scatter(send, counts, "reduce_scatter")
    want = np.full((5, 2), p * (p + 1) // 2, dtype=np.float64)
    ok = same_kind(out, send) and values(out).shape == (counts[me], 2)
    ok &= me != 0 or np.array_equal(values(out), want)
    assert_all(world, ok, "reduce to rank 0")
    if p > 1:
        nbytes = recorded(world, "reduce_scatter")[1]
        assert_all(world, nbytes == (5 - counts[me]) * 16, "bytes")


@pytest.mark.mpi
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("given", [True, False], ids=["counts", "no-counts"])
def test_allgatherv_concatenates_in_rank_order(world, kind, given):
    p, me = world.size, world.rank
    counts = [(r % 3) + 1 for r in range(p)]
    mine = np.full((counts[me], 2), 10 * me, dtype=np.float32)
    mine[:, 1] = np.arange(counts[me])
    send = make(kind, mine)
    out = world.allgatherv(send, "allgather", counts if given else None)
    want = np.concatenate(
        [np.stack([np.full(c, 10 * r), np.arange(c)], axis=1) for r, c in enumerate(counts)]
    ).astype(np.float32)
    assert_all(world, same_kind(out, send), "buffer kind")
    assert_all(world, np.array_equal(values(out), want), "all-gatherv values")
    calls, nbytes = recorded(world, "allgather")
    assert_all(world, calls == 1 and nbytes == (sum(counts) - counts[me]) * 8, "bytes")
    ctl_calls, ctl_bytes = recorded(world, "control")
    want_ctl = (0, 0) if given else (
        1, sum(obj_bytes(c) for r, c in enumerate(counts) if r != me)
    )
    assert_all(world, (ctl_calls, ctl_bytes) == want_ctl, "counts are control traffic")


@pytest.mark.mpi
def test_allgatherv_of_index_arrays_stays_numpy(world):
    """The sampling code gathers 1-D int64 id arrays (some empty)."""
    p, me = world.size, world.rank
    ids = np.arange(me, dtype=np.int64) + 100 * me  # rank 0 sends nothing
    out = world.allgatherv(ids, "sample_frontier")
    want = np.concatenate([np.arange(r, dtype=np.int64) + 100 * r for r in range(p)])
    assert_all(world, type(out) is np.ndarray and out.dtype == np.int64, "NumPy out")
    assert_all(world, np.array_equal(out, want), "values")


def _alltoall_pattern(p: int, me: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rank ``s`` sends ``(s + d) % 3`` rows ``[100 s + d, k]`` to rank ``d``."""
    sendcounts = np.array([(me + d) % 3 for d in range(p)], dtype=np.int64)
    rows = [[100 * me + d, k] for d in range(p) for k in range(sendcounts[d])]
    recvcounts = np.array([(s + me) % 3 for s in range(p)], dtype=np.int64)
    return np.array(rows, dtype=np.float64).reshape(-1, 2), sendcounts, recvcounts


@pytest.mark.mpi
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("given", [True, False], ids=["recvcounts", "no-recvcounts"])
def test_alltoallv_personalised_rows(world, kind, given):
    p, me = world.size, world.rank
    rows, sendcounts, recvcounts = _alltoall_pattern(p, me)
    send = make(kind, rows)
    out, got_counts = world.alltoallv(send, sendcounts, "halo", recvcounts if given else None)
    want = np.array(
        [[100 * s + me, k] for s in range(p) for k in range(recvcounts[s])], dtype=np.float64
    ).reshape(-1, 2)
    assert_all(world, same_kind(out, send), "buffer kind")
    assert_all(world, np.array_equal(values(out), want), "all-to-allv values")
    ok = type(got_counts) is np.ndarray and got_counts.dtype == np.int64
    assert_all(world, ok and np.array_equal(got_counts, recvcounts), "recvcounts")
    calls, nbytes = recorded(world, "halo")
    assert_all(world, calls == 1 and nbytes == (recvcounts.sum() - recvcounts[me]) * 16, "bytes")
    ctl = recorded(world, "control")
    assert_all(world, ctl == ((0, 0) if given else (1, 8 * (p - 1))), f"control {ctl}")


@pytest.mark.mpi
@pytest.mark.parametrize("kind", KINDS)
def test_gatherv_then_scatterv_round_trip_to_the_last_rank(world, kind):
    """The sampling stage loop: ids gathered on a stage's root, rows scattered back."""
    p, me, root = world.size, world.rank, world.size - 1
    counts = [(r % 3) + (r != root) for r in range(p)]
    mine = make(kind, np.full((counts[me], 2), float(me)))
    got, got_counts = world.gatherv(mine, root, "sample_request")
    if me == root:
        want = np.concatenate([np.full((c, 2), float(r)) for r, c in enumerate(counts)])
        ok = same_kind(got, mine) and np.array_equal(values(got), want)
        ok = ok and np.array_equal(got_counts, counts)
        back = make(kind, values(got) + 1)
    else:
        ok = got is None and got_counts is None
        back = make(kind, np.zeros((0, 2)))
    assert_all(world, ok, "gathered rows on the root only")
    out = world.scatterv(back, counts if me == root else None, counts[me], root, "sample_rows")
    ok = same_kind(out, back) and np.array_equal(values(out), np.full((counts[me], 2), me + 1.0))
    assert_all(world, ok, "scattered rows")
    others = (sum(counts) - counts[root]) * 16
    want = {"sample_request": (1, others if me == root else 0),
            "control": (1, 8 * (p - 1) if me == root else 0),
            "sample_rows": (1, 0 if me == root else counts[me] * 16)}
    assert_all(world, all(recorded(world, c) == w for c, w in want.items()), "bytes")


@pytest.mark.mpi
@pytest.mark.parametrize("kind", KINDS)
def test_nonblocking_point_to_point_ring(world, kind):
    """Two tagged messages to the next rank; one call records what was received."""
    p, me = world.size, world.rank
    nxt, prv = (me + 1) % p, (me - 1) % p
    world.stats.tracing = True
    recv = [make(kind, np.zeros((2, 3))), make(kind, np.zeros(4))]
    reqs = [world.irecv(recv[0], prv, 0), world.irecv(recv[1], prv, 1)]
    send = [make(kind, np.full((2, 3), me, dtype=np.float64)),
            make(kind, np.arange(4, dtype=np.float64) + me)]
    reqs += [world.isend(send[1], nxt, 1), world.isend(send[0], nxt, 0)]
    world.complete(reqs, recv, "halo", span="halo.stage1")
    world.stats.tracing = False
    ok = np.array_equal(values(recv[0]), np.full((2, 3), prv))
    ok = ok and np.array_equal(values(recv[1]), np.arange(4) + prv)
    assert_all(world, ok, "values")
    assert_all(world, recorded(world, "halo") == (1, 80), "one call, the bytes received")
    assert_all(world, [s.name for s in world.stats.spans] == ["halo.stage1"], "span name")
    world.complete([], [], "halo")  # nothing to wait for: a call of 0 bytes
    assert_all(world, recorded(world, "halo") == (2, 80))


@pytest.mark.mpi
def test_alltoallv_of_int64_ids_stays_numpy(world):
    """``request_rows`` and the feature fetcher send 1-D int64 id arrays."""
    p, me = world.size, world.rank
    ids = np.arange(p, dtype=np.int64) * 10 + me  # one id to every rank
    got, counts = world.alltoallv(ids, np.ones(p, dtype=np.int64), "halo_setup")
    ok = type(got) is np.ndarray and got.dtype == np.int64
    assert_all(world, ok and np.array_equal(got, np.arange(p) + 10 * me), "values")
    assert_all(world, np.array_equal(counts, np.ones(p)), "counts")


@pytest.mark.mpi
def test_alltoallv_receives_into_the_given_rows(world):
    """``out=``: the rows land in the caller's buffer (a view's tail), nothing else moves."""
    p, me = world.size, world.rank
    rows, sendcounts, recvcounts = _alltoall_pattern(p, me)
    send = torch.from_numpy(rows)
    buf = torch.full((2 + int(recvcounts.sum()), 2), -1.0, dtype=torch.float64)
    got, _ = world.alltoallv(send, sendcounts, "halo", recvcounts, out=buf[2:])
    fresh, _ = world.alltoallv(send, sendcounts, "halo", recvcounts)
    ok = got.data_ptr() == buf[2:].data_ptr() and torch.equal(buf[2:], fresh)
    assert_all(world, ok and bool((buf[:2] == -1).all()), "received in place")
    with pytest.raises(ValueError, match="out has shape"):
        world.alltoallv(send, sendcounts, "halo", recvcounts, out=buf)


@pytest.mark.mpi
def test_tensor_results_are_fresh_and_detached(world):
    """Returned tensors own their memory and do not join the sender's autograd graph."""
    p = world.size
    send = torch.ones((p, 2), dtype=torch.float64, requires_grad=True)
    out = world.allgatherv(send, "allgather", [p] * p)
    ok = not out.requires_grad and out.data_ptr() != send.data_ptr()
    recv, _ = world.alltoallv(send.detach(), np.ones(p, dtype=np.int64), "halo")
    ok &= recv.is_contiguous() and recv.shape == (p, 2)
    assert_all(world, ok, "fresh tensors")


# -- Python objects (control traffic) --------------------------------------------------------
@pytest.mark.mpi
def test_bcast_obj(world):
    me = world.rank
    root = world.size - 1
    obj = {"step": 3, "names": ["a", "b"]} if me == root else None
    out = world.bcast_obj(obj, root)
    want = {"step": 3, "names": ["a", "b"]}
    assert_all(world, out == want, "bcast_obj value")
    calls, nbytes = recorded(world, "control")
    assert_all(world, calls == 1 and nbytes == (0 if me == root else obj_bytes(want)), "bytes")


@pytest.mark.mpi
def test_allgather_obj(world):
    p, me = world.size, world.rank
    out = world.allgather_obj(("rank", me, [0] * me), "setup")
    want = [("rank", r, [0] * r) for r in range(p)]
    assert_all(world, out == want, "allgather_obj value")
    calls, nbytes = recorded(world, "setup")
    expect = sum(obj_bytes(o) for r, o in enumerate(want) if r != me)
    assert_all(world, calls == 1 and nbytes == expect, f"bytes {nbytes} != {expect}")


@pytest.mark.mpi
def test_gather_obj(world):
    p, me = world.size, world.rank
    root = p - 1
    out = world.gather_obj({"r": me}, root)
    want = [{"r": r} for r in range(p)]
    assert_all(world, out == (want if me == root else None), "gather_obj value")
    calls, nbytes = recorded(world, "control")
    expect = sum(obj_bytes(o) for r, o in enumerate(want) if r != me) if me == root else 0
    assert_all(world, calls == 1 and nbytes == expect, "bytes")


@pytest.mark.mpi
def test_allreduce_scalar_keeps_int_and_float(world):
    p, me = world.size, world.rank
    total = world.allreduce_scalar(me + 1)
    top = world.allreduce_scalar(float(me) / 2, MPI.MAX)
    low = world.allreduce_scalar(np.int64(me), MPI.MIN, category="agree")
    ok = type(total) is int and total == p * (p + 1) // 2
    ok &= type(top) is float and top == (p - 1) / 2
    ok &= type(low) is int and low == 0
    assert_all(world, ok, f"values {total!r} {top!r} {low!r}")
    one = round(2 * 8 * (p - 1) / p)
    assert_all(world, recorded(world, "control") == (2, 2 * one), "control bytes")
    assert_all(world, recorded(world, "agree") == (1, one), "category")


@pytest.mark.mpi
def test_barrier(world):
    world.barrier()
    world.barrier("sync")
    assert_all(world, recorded(world, "barrier") == (1, 0), "barrier")
    assert_all(world, recorded(world, "sync") == (1, 0), "named barrier")


# -- the grid's device -----------------------------------------------------------------------
@pytest.mark.mpi
def test_grid_hands_its_device_and_stats_to_every_comm(world):
    kind = "2d" if world.size > 1 else "1d"
    with ProcessGrid.create(world.mpi, kind) as grid:
        comms = [grid.world, grid.cart, grid.row, grid.col]
        ok = grid.device == cpu() and all(c.device is grid.device for c in comms)
        ok &= all(c.stats is grid.stats for c in comms)
        ok &= grid.stats.clock == grid.device.clock
        x = grid.row.device.zeros((2, 3), torch.float32)
        grid.row.allreduce(x, "allreduce")
        ok &= x.device == grid.device.torch_device
    assert_all(world, ok, "device on every communicator")
    stats = CommStats()
    g = ProcessGrid(world.mpi, choose_shape("1d", world.size), stats=stats, device=cpu())
    try:
        assert_all(world, g.stats is stats and g.col.stats is stats, "given stats shared")
    finally:
        g.free()


@pytest.mark.mpi
def test_idle_barrier_waits_for_the_last_rank_without_spinning(world):
    """``barrier(idle_s=)``: every rank leaves after the last one entered, and a waiting
    rank sleeps (its CPU time stays well below the wall time it waited)."""
    import time

    world.barrier()
    t0 = time.perf_counter()
    c0 = time.process_time()
    if world.rank == world.size - 1:
        time.sleep(0.2)
    world.barrier("test", idle_s=1e-3)
    waited, cpu = time.perf_counter() - t0, time.process_time() - c0
    ok = waited >= 0.19 and (world.rank == world.size - 1 or cpu < 0.5 * waited)
    assert_all(world, ok, f"rank {world.rank}: waited {waited:.3f} s, {cpu:.3f} s of CPU")
    assert world.stats.categories["test"].bytes == 0


@pytest.mark.mpi
def test_messages_and_all_to_alls_count_their_bytes_by_pair_method(world):
    """The bytes a rank receives are also counted by the pair method of each message
    (DGCL's per-pair choice), so they can be checked against a plan's methods."""
    p, me = world.size, world.rank
    nxt, prv = (me + 1) % p, (me - 1) % p
    method = ["ipc", "nic"][me % 2]  # what prv -> me is (a plan's choice, made up here)
    recv = np.zeros(3)
    reqs = [world.irecv(recv, prv, 0, method), world.isend(np.ones(3), nxt, 0, "ipc")]
    world.complete(reqs, [recv], "halo")
    want = {method: 24}  # what complete counts (at 1 rank a message to itself)
    assert_all(world, world.stats.methods.get("halo", {}) == want, str(world.stats.methods))
    world.complete([world.irecv(recv, prv, 1), world.isend(np.ones(3), nxt, 1)], [recv], "halo")
    assert_all(world, world.stats.methods.get("halo", {}) == want, "no method: not split")
    methods = ["host-staged" if r < p // 2 else "nic" for r in range(p)]
    world.alltoallv(np.ones((p, 2)), np.ones(p, dtype=np.int64), "x", methods=methods)
    split: dict[str, int] = {}
    for r in range(p):
        if r != me:
            split[methods[r]] = split.get(methods[r], 0) + 16
    got = world.stats.methods.get("x", {})
    ok = got == split and sum(split.values()) == recorded(world, "x")[1]
    assert_all(world, ok, str(world.stats.methods))
    world.stats.reset()
    assert_all(world, world.stats.methods == {})
