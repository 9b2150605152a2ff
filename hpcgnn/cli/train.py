"""``hpcgnn train``: distributed full-batch GCN training."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from hpcgnn.cli.common import add_device_argument, add_head_arguments
from hpcgnn.cli.sample import add_sampling_arguments
from hpcgnn.errors import ConfigError

if TYPE_CHECKING:
    from mpi4py import MPI

    from hpcgnn.training.loop import TrainResult


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``train`` sub-command."""
    p = sub.add_parser(
        "train",
        help="train a GNN (GCN, GraphSAGE, GIN, GAT) on a graph file (run under mpiexec/srun,"
             " one rank per GPU or core)",
        description="Full-batch training with a distributed SpMM algorithm (CAGNET: --algo "
                    "1d, 1.5d, 2d, 3d; halo: a neighbour exchange), minibatch training with "
                    "matrix-based bulk sampling (--mode minibatch: GraphSAGE node-wise, LADIES "
                    "layer-wise or Cluster-GCN batches), HongTu's partition x chunk training "
                    "with host-resident vertex data (--mode offload), or GIST's independent "
                    "sub-models (--mode gist). --model gcn, sage, gin or gat.",
    )
    add_run_arguments(p)
    p.set_defaults(func=run)


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    """Every flag of ``hpcgnn train`` (``hpcgnn predict`` takes the same command line)."""
    from hpcgnn.cli.layers import model_name
    from hpcgnn.config import (
        ALGORITHMS,
        LOSSES,
        MODE_NAMES,
        MODELS,
        SELECT_MODEL,
        SPARSE_FEATURES,
        WEIGHT_DECAY_LAYERS,
    )
    from hpcgnn.kinds import PRODUCT_ORDERS

    p.add_argument("graph", help="graph file written by `hpcgnn prepare` / `hpcgnn partition`")
    p.add_argument("--config", metavar="RUN.toml",
                   help="flags from a TOML file (key = flag name without dashes); flags on the"
                        " command line win (hpcgnn/cli/config_file.py)")
    p.add_argument("--mode", choices=MODE_NAMES, default=MODE_NAMES[0],
                   help="fullbatch: the whole graph every step, with a distributed SpMM "
                        "(--algo); minibatch: bulk-sampled minibatches (--sampler) on a (P/c) x c "
                        "grid; offload: HongTu partition x chunk training with host-resident "
                        "vertex data; gist: independent sub-models on rank groups (default: "
                        "fullbatch). Every --model trains in every mode")
    p.add_argument("--algo", choices=ALGORITHMS, default=None,
                   help="distributed SpMM algorithm (fullbatch mode, and each group of --mode "
                        "gist without --sampler; default: 1d)")
    p.add_argument("--grid", default=None,
                   help="process grid, e.g. 4, 2x2 or 2x2x2 (default: chosen for the rank count)")
    p.add_argument("--replication", type=int, default=None,
                   help="1.5d replication factor c (fullbatch --algo 1.5d, and minibatch mode)")
    m = p.add_argument_group("model and optimiser")
    m.add_argument("--layers", type=int, default=None,
                   help="GCN/GNN layers (default: 2; minibatch: from --fanout / --layer-size)")
    m.add_argument("--model", type=model_name, default=None,
                   metavar=f"{{{','.join(MODELS)}}}|MODULE:CLASS",
                   help="layers: gcn (default), sage (GraphSAGE: mean over in-neighbours plus "
                        "a self term), gin (GIN: sum over in-neighbours plus (1 + eps) times the "
                        "self, then a two-layer MLP) or gat (GAT: attention over the "
                        "in-neighbours and the self, --heads heads); each with every --algo and "
                        "--mode. Sampled (--sampler): sage's node-wise blocks provide the mean, "
                        "sum, pattern and weighted operators (sage, its default; gin, gat), "
                        "ladies' the normalized, sum and pattern ones (gcn, its default; gin, "
                        "gat), cluster's all five (gcn, its default; sage: the mean over the "
                        "in-neighbours inside the batch; gin, gat); a layer on another "
                        "operator, or that reads more than one "
                        "hop per layer, is refused. MODULE:CLASS: your own layer (a subclass "
                        "of hpcgnn.nn.Layer), imported from the Python path, which runs that "
                        "module's code (docs/layers.md); it trains on every --algo (1d, 1.5d, "
                        "2d, 3d, halo) and --mode (offload, minibatch and gist where the "
                        "sampler's blocks provide its operator)")
    m.add_argument("--hidden", type=int, default=16,
                   help="width of the hidden layers (default: 16)")
    m.add_argument("--gin-eps", type=float, default=0.0,
                   help="GIN's fixed eps: the self term (1 + eps) h_i (--model gin; default: 0)")
    add_head_arguments(m)
    m.add_argument("--attention-dropout", type=float, default=None,
                   help="GAT's drop probability of the attention coefficients (--model gat; "
                        "default: --dropout's, as the paper)")
    m.add_argument("--bias", action="store_true",
                   help="a bias per layer, zeros at first, as PyG's layers (every --algo, one"
                        " process, --mode offload and gist; --mode minibatch always has them)")
    m.add_argument("--product-order", choices=PRODUCT_ORDERS, default=PRODUCT_ORDERS[0],
                   help="how each layer evaluates A^T H W: auto (default) in the order whose "
                        "SpMM is narrower, (A^T H) W or A^T (H W), with no backward SpMM of the"
                        " input features; paper: CAGNET's (A^T H) W in every layer and the "
                        "first layer's backward SpMM, so the bytes follow the paper's closed "
                        "forms (hpcgnn model --formulas paper). Full-batch --algo only "
                        "(1d, 1.5d, 2d, 3d, halo)")
    m.add_argument("--loss", choices=LOSSES, default="ce",
                   help="ce: the cross-entropy of one class id per vertex (default); bce: the"
                        " binary cross-entropy with logits of every (vertex, class) entry, for"
                        " multi-label targets (a graph file with a 0/1 label matrix, as PPI,"
                        " Yelp, ogbn-proteins; every --mode: fullbatch with any --algo, offload,"
                        " minibatch with any --sampler and --graph-layout, and gist with"
                        " full-batch or sampled groups)")
    m.add_argument("--epochs", type=int, default=100,
                   help="training epochs (default: 100). gist: the budget E of a baseline"
                        " trained alone, split across the M sub-GCNs as in the paper: each"
                        " trains E/M epochs of work, in R = ceil(E S / (M K)) rounds (S: a"
                        " group's optimizer steps per epoch, 1 without --sampler)")
    m.add_argument("--lr", type=float, default=0.01, help="Adam's learning rate (default: 0.01)")
    m.add_argument("--weight-decay", type=float, default=5e-4,
                   help="L2 weight decay (default: 5e-4), on the layers of --weight-decay-layers")
    m.add_argument("--weight-decay-layers", choices=WEIGHT_DECAY_LAYERS, default="first",
                   help="the parameters the weight decay applies to: first (the first layer's,"
                        " as Kipf & Welling's GCN and PyG's example; default) or all")
    m.add_argument("--dropout", type=float, default=0.5,
                   help="drop probability of every layer's input (default: 0.5)")
    m.add_argument("--seed", type=int, default=0,
                   help="seed of the weights, dropout masks and samples (default: 0)")
    m.add_argument("--dtype", choices=["float32", "float64"], default="float32",
                   help="values of features, weights and activations (default: float32)")
    m.add_argument("--early-stopping", type=int, default=0, metavar="PATIENCE",
                   help="stop when the validation loss has not fallen for PATIENCE"
                        " evaluations (default 0: train every epoch); the best-validation"
                        " epoch is reported either way (metrics: best)")
    m.add_argument("--select-model", choices=SELECT_MODEL, default="last",
                   help="the model the run ends with: last (the last epoch's weights;"
                        " default) or best (the weights of the evaluated epoch with the"
                        " lowest validation loss, kept on the model's device and restored"
                        " when training ends: the final metrics, params_sha256, the last"
                        " checkpoint and hpcgnn predict are that model's; metrics:"
                        " best.selected). Not --mode gist, whose model is sharded")
    m.add_argument("--sparse-features", choices=SPARSE_FEATURES, nargs="?", const="on",
                   default="auto",
                   help="input features as CSR on each rank: the first layer's X W an SpMM, "
                        "dropout on the nonzeros only (Kipf's sparse dropout, the dense "
                        "mask's decisions). auto (default): when under 10%% of the entries "
                        "are nonzero; on (the bare flag); off. Every mode (minibatch fetches"
                        " the nonzeros; offload multiplies X W first)")
    o = p.add_argument_group("output")
    o.add_argument("--eval-every", type=int, default=1,
                   help="evaluate every K epochs (0: only at the end; default: 1)")
    o.add_argument("--metrics", default=None, help="write the metrics JSON here (rank 0)")
    o.add_argument("--trace", default=None, help="write a Chrome/Perfetto trace here (rank 0)")
    o.add_argument("--sync-comm", action="store_true",
                   help="diagnostic: every collective first waits for its communicator's "
                        "ranks, timed apart as 'wait' (skew: load imbalance, shared cores), "
                        "so each category's seconds are its transfers' alone, what the cost "
                        "model predicts (slower; results unchanged)")
    o.add_argument("--log-csv", default=None, metavar="LOG.csv",
                   help="write one CSV row per epoch as training runs (rank 0; the metrics'"
                        " epochs fields)")
    o.add_argument("--trace-epochs", default=None, metavar="A:B",
                   help="with --trace: record epochs A to B only (1-based, inclusive; A: or :B"
                        " open-ended, A one epoch; default: every epoch)")
    o.add_argument("--quiet", action="store_true", help="no per-epoch lines")
    c = p.add_argument_group("checkpoint/restart")
    c.add_argument("--checkpoint-dir", default=None,
                   help="directory for checkpoints (rank 0; gist: every rank writes its rows)")
    c.add_argument("--checkpoint-every", type=int, default=0,
                   help="checkpoint every K epochs and after the last (default 0: with "
                        "--checkpoint-dir, after the last epoch only)")
    c.add_argument("--resume", default=None, help="resume from the checkpoint in this directory")
    c.add_argument("--finetune", default=None, metavar="DIR",
                   help="start from the weights of the checkpoint in DIR (other settings,"
                        " epochs, learning rate or graph allowed; the weights' shapes must"
                        " match) with a new optimiser, from epoch 1")
    x = p.add_argument_group("partitioned exchange (--algo halo, --mode offload)")
    x.add_argument("--exchange", choices=["p2p", "planned"], default=None,
                   help="halo: p2p all-to-allv, or a DGCL SPST plan on --topology run in stages; "
                        "offload (--dedup inter/full): the device-to-device fetches of the "
                        "deduplicated rows and their gradient pushes planned so (default: p2p)")
    x.add_argument("--topology", default=None,
                   help="halo, planned offload: topology JSON (configs/topologies/*.json; default: "
                        "all ranks on one node with equal links)")
    x.add_argument("--chunks", type=int, default=None, help="offload: chunks per part (default: 4)")
    x.add_argument("--dedup", choices=["none", "inter", "full"], default=None,
                   help="offload: neighbour-load deduplication: none, inter (across ranks of a "
                        "batch) or full (plus reuse across consecutive batches; default)")
    x.add_argument("--reorganize", action="store_true",
                   help="offload: HongTu's greedy 2-phase chunk reorganisation (kept only if it "
                        "does not raise V_ru)")
    x.add_argument("--device-memory", default=None, metavar="BYTES",
                   help="offload: bytes per rank for the aggregates cached from the forward to "
                        "the backward (HongTu's recomputation-caching hybrid); layers that do not "
                        "fit recompute theirs. Suffixes K/M/G/T are powers of 1024 (default: "
                        "$HPCGNN_DEVICE_MEMORY, else no limit)")
    x.add_argument("--no-in-place", action="store_true",
                   help="offload: a new transition and neighbour buffer per batch instead of "
                        "HongTu's in-place buffers with precomputed write positions (the same "
                        "results)")
    x.add_argument("--interleave", action="store_true",
                   help="offload (--dedup inter/full, p2p): the device-to-device rows of a batch "
                        "in P-1 sequential rounds, rank i with i+1, ..., i+P-1 mod P (HongTu's "
                        "interleaved order), instead of one all-to-allv (the same results)")
    x.add_argument("--zero-copy", action="store_true",
                   help="offload, --device cuda: the load kernel reads the host rows from the "
                        "page-locked host tier, no host-side gather (the same results)")
    x.add_argument("--merged-buffer", action="store_true",
                   help="offload (--dedup inter/full, in place): HongTu's merged transition + "
                        "neighbour buffer, the chunks' operators renumbered to read it; a "
                        "neighbour row the rank owns is not copied (the same results)")
    x.add_argument("--tier-gbps", default=None, metavar="hd=25,dd=200,ru=1500|MACHINE",
                   help="tier bandwidths (GB/s) of the modelled cost C and of the "
                        "reorganisation's choice: host-device, device-device, device reuse; "
                        "or a machine file's (perlmutter, summit, a .json) (default: "
                        "hd=25,dd=200,ru=1500, one A100 server as in HongTu)")
    g = p.add_argument_group("GIST (--mode gist)")
    g.add_argument("--subnets", type=int, default=None,
                   help="M sub-GCNs, each trained by P/M ranks running --algo (default: 1)")
    g.add_argument("--local-iters", type=int, default=None,
                   help="K local iterations (optimizer steps of each sub-GCN) per round"
                        " (default: 1)")
    g.add_argument("--rounds", type=int, default=None,
                   help="R rounds of sub-GCN training, each sub-GCN training R K / S epochs"
                        " of work (default: derived from --epochs, ceil(E S / (M K)), at least"
                        " the budget; the metrics' gist section reports both)")
    g.add_argument("--gist-rescale", action="store_true",
                   help="evaluate (and predict with) the merged model with every weight that"
                        " reads a split hidden dimension scaled by 1/M (the sub-models' logit"
                        " scale; training and the saved weights are unchanged; see"
                        " docs/gist.md)")
    add_sampling_arguments(p)
    add_device_argument(p)
    p.add_argument("--threads", type=int, default=None, help="torch intra-op threads per rank")


def run(args: argparse.Namespace, predict_out: str | None = None) -> int:
    """Run training (or with ``predict_out`` the prediction of ``--resume``'s model)."""
    from hpcgnn.utils.memory import keep_freed_memory

    keep_freed_memory()  # epochs reuse freed memory: no new pages after the first
    train_from_args(args, predict_out=predict_out)
    return 0


def train_from_args(
    args: argparse.Namespace, comm: MPI.Comm | None = None, *, predict_out: str | None = None,
) -> TrainResult:
    """The run of parsed ``train`` arguments on ``comm`` (default: ``COMM_WORLD``; collective).

    The flags become the objects :func:`hpcgnn.api.train` takes from Python: a mode
    (:func:`hpcgnn.cli.modes.mode_from_args`), a :class:`~hpcgnn.config.TrainConfig` and
    run options; a ``MODULE:CLASS`` of ``--model`` is imported here.
    """
    from mpi4py import MPI

    from hpcgnn.cli.layers import is_user_layer, load_layer
    from hpcgnn.cli.modes import mode_from_args
    from hpcgnn.cost.machine import tiers_from_flag
    from hpcgnn.training.run import configure, train

    comm = MPI.COMM_WORLD if comm is None else comm
    settings = vars(args) | {
        "trace_epochs": parse_epoch_range(args.trace_epochs),
        "tier_gbps": tiers_from_flag(args.tier_gbps), "predict_out": predict_out,
    }
    layer = load_layer(args.model) if is_user_layer(args.model) else None
    cfg, opts = configure(args.graph, mode_from_args(args), settings, layer)
    return train(opts, cfg, comm)


def parse_epoch_range(text: str | None) -> tuple[int, int] | None:
    """``"A:B"`` -> ``(A, B)`` (1-based, inclusive); ``"A:"``, ``":B"``, ``"A"`` too.

    The epochs themselves are checked by :class:`~hpcgnn.training.run.RunOptions`.
    """
    if text is None:
        return None
    first, sep, last = text.partition(":")
    try:
        if not (first.strip() or last.strip()):
            raise ValueError(text)
        a = int(first) if first.strip() else 1
        b = (int(last) if last.strip() else 2**63 - 1) if sep else a
    except ValueError:
        raise ConfigError(f"--trace-epochs: expected A:B with 1 <= A <= B, got {text!r}"
                          ) from None
    return a, b
