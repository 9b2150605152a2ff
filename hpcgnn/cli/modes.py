"""``--mode`` and its flags: the mode objects of :mod:`hpcgnn.training.modes` from argparse.

Each mode is made from the flags it reads, with the same checks as from Python (the mode's
own, :mod:`hpcgnn.training.modes`); what is left here is the command line's own rule: a
flag of another mode is refused in one line, never ignored.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable

from hpcgnn.errors import ConfigError
from hpcgnn.training.modes import FullBatchMode, GistMode, MinibatchMode, Mode, OffloadMode

#: The flags of ``hpcgnn train`` that belong to some modes only (argparse names, each left
#: ``None`` or ``False`` by the parser when not given) and where they apply.
MODE_FLAGS: dict[str, str] = {
    "algo": "--mode fullbatch and gist",
    "exchange": "--algo halo and --mode offload",
    "topology": "--algo halo and --mode offload",
    "chunks": "--mode offload", "dedup": "--mode offload", "reorganize": "--mode offload",
    "device_memory": "--mode offload", "no_in_place": "--mode offload",
    "interleave": "--mode offload", "zero_copy": "--mode offload",
    "merged_buffer": "--mode offload",
    "subnets": "--mode gist", "local_iters": "--mode gist", "rounds": "--mode gist",
    "gist_rescale": "--mode gist",
    "sampler": "--mode minibatch or gist",
    "fanout": "--mode minibatch or gist", "layer_size": "--mode minibatch or gist",
    "batch_size": "--mode minibatch or gist", "global_batch": "--mode minibatch or gist",
    "bulk": "--mode minibatch or gist", "graph_layout": "--mode minibatch or gist",
    "sample_memory": "--mode minibatch or gist",
    "ladies_reduction": "--mode minibatch or gist",
    "clusters": "--sampler cluster", "clusters_per_batch": "--sampler cluster",
}
#: The flags of the full-batch mode (``exchange`` and ``topology``: ``--algo halo`` only).
FULLBATCH_FLAGS = ("algo", "exchange", "topology")
#: The flags of the minibatch mode: the sampler's.
SAMPLING_FLAGS = (
    "sampler", "fanout", "layer_size", "batch_size", "global_batch", "bulk", "graph_layout",
    "sample_memory", "clusters", "clusters_per_batch", "ladies_reduction",
)
#: The flags of the offload mode (``--algo``: only ``1d`` or ``halo``, which change nothing).
OFFLOAD_FLAGS = ("algo", "exchange", "topology", "chunks", "dedup", "reorganize",
                 "device_memory", "no_in_place", "interleave", "zero_copy", "merged_buffer")
#: GIST's own flags.
GIST_FLAGS = ("subnets", "local_iters", "rounds", "gist_rescale")


def flag(name: str) -> str:
    """The command-line spelling of the argparse name ``name``."""
    return "--" + name.replace("_", "-")


def given(args: argparse.Namespace, name: str) -> bool:
    """Whether the flag ``name`` was given (its parser default is ``None`` or ``False``)."""
    return getattr(args, name, None) not in (None, False)


def refuse_others(args: argparse.Namespace, owned: Iterable[str]) -> None:
    """Refuse, with one line, a mode-specific flag the chosen mode does not read."""
    owned = set(owned)
    for name, where in MODE_FLAGS.items():
        if name not in owned and given(args, name):
            raise ConfigError(f"{flag(name)} applies to {where} only")


def mode_from_args(args: argparse.Namespace) -> Mode:
    """The mode ``--mode`` names, with its options from the other flags."""
    return READERS[args.mode](args)


def _full_batch(args: argparse.Namespace) -> FullBatchMode:
    return FullBatchMode(
        algo=args.algo or "1d", grid=args.grid, replication=args.replication,
        exchange=args.exchange or "p2p", topology=args.topology,
    )


def _sampled(args: argparse.Namespace) -> MinibatchMode:
    return MinibatchMode(
        sampler=args.sampler or MinibatchMode.sampler, fanout=args.fanout,
        layer_size=args.layer_size, batch_size=args.batch_size,
        global_batch=args.global_batch, bulk=args.bulk, clusters=args.clusters,
        clusters_per_batch=args.clusters_per_batch,
        graph_layout=args.graph_layout or MinibatchMode.graph_layout, grid=args.grid,
        replication=args.replication, sample_memory=args.sample_memory,
        ladies_reduction=args.ladies_reduction or MinibatchMode.ladies_reduction,
    )


def full_batch_from_args(args: argparse.Namespace) -> FullBatchMode:
    """``--algo``, ``--grid``, ``--replication``; ``--exchange``, ``--topology`` (halo)."""
    mode = _full_batch(args)  # refuses --exchange and --topology without halo first
    refuse_others(args, FULLBATCH_FLAGS)
    return mode


def minibatch_from_args(args: argparse.Namespace) -> MinibatchMode:
    """The sampling flags; a full-batch ``--algo`` is refused."""
    if args.algo is not None:
        raise ConfigError(
            f"--algo {args.algo} names a full-batch algorithm: --mode minibatch samples on a"
            " (P/c) x c grid (--replication, --grid; drop --algo)"
        )
    refuse_others(args, SAMPLING_FLAGS)
    return _sampled(args)


def offload_from_args(args: argparse.Namespace) -> OffloadMode:
    """The offload flags; ``--algo`` other than ``1d`` / ``halo`` is refused."""
    if args.algo not in (None, "1d", "halo"):
        raise ConfigError(
            f"--mode offload partitions the vertices itself; it cannot run --algo {args.algo}"
        )
    refuse_others(args, OFFLOAD_FLAGS)
    return OffloadMode(
        chunks=OffloadMode.chunks if args.chunks is None else args.chunks,
        dedup=args.dedup or OffloadMode.dedup, reorganize=bool(args.reorganize),
        device_memory=args.device_memory, exchange=args.exchange or OffloadMode.exchange,
        topology=args.topology, grid=args.grid, replication=args.replication,
        in_place=not args.no_in_place, interleave=bool(args.interleave),
        zero_copy=bool(args.zero_copy), merged=bool(args.merged_buffer),
    )


def gist_from_args(args: argparse.Namespace) -> GistMode:
    """GIST's flags and its groups' (``--algo``, or ``--sampler`` and its flags)."""
    group: FullBatchMode | MinibatchMode
    if args.sampler is not None:
        if args.algo is not None:
            raise ConfigError(
                f"--algo {args.algo} names a full-batch algorithm: with --mode gist --sampler"
                " the groups train sampled minibatches (drop --algo, or drop --sampler)"
            )
        refuse_others(args, (*GIST_FLAGS, *SAMPLING_FLAGS))
        group = _sampled(args)
    else:
        for name in SAMPLING_FLAGS:
            if given(args, name):
                raise ConfigError(f"{flag(name)} needs --sampler in --mode gist")
        refuse_others(args, (*GIST_FLAGS, "algo"))
        group = _full_batch(args)
    return GistMode(
        group=group, subnets=GistMode.subnets if args.subnets is None else args.subnets,
        local_iters=GistMode.local_iters if args.local_iters is None else args.local_iters,
        rounds=args.rounds, rescale=bool(args.gist_rescale),
    )


#: How each mode reads its flags, by its ``--mode`` name (the names of
#: :data:`hpcgnn.training.modes.MODES`).
READERS: dict[str, Callable[[argparse.Namespace], Mode]] = {
    FullBatchMode.name: full_batch_from_args, MinibatchMode.name: minibatch_from_args,
    OffloadMode.name: offload_from_args, GistMode.name: gist_from_args,
}
