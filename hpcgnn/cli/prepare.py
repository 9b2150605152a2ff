"""``hpcgnn prepare SOURCE ... --out G.h5``: generate or convert a graph into the HDF5 format.

Sources: ``synthetic`` (SBM or RMAT), ``planetoid`` (Cora, CiteSeer, PubMed), ``ogb``
(OGB node-property raw layout), ``edgelist`` (SNAP-style text), ``pyg`` (a PyG graph saved
with ``torch.save``) and ``npz`` (the benchmark ``.npz`` layout). The work runs on one
process (rank 0 under ``mpiexec``); an error there becomes the same one-line message and
exit status 1 on every rank. A summary is printed when the file is complete.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from hpcgnn.cli.common import run_on_root
from hpcgnn.errors import ConfigError
from hpcgnn.prepare import (
    PrepareSummary,
    SyntheticSpec,
    convert_benchmark_npz,
    convert_edgelist,
    convert_ogb,
    convert_planetoid,
    convert_pyg,
    generate_synthetic,
)
from hpcgnn.prepare.splits import SPLITS, SplitSpec
from hpcgnn.prepare.synthetic import GENERATORS
from hpcgnn.utils.files import check_output


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``prepare`` sub-command and its sources to ``subparsers``."""
    parser = subparsers.add_parser(
        "prepare",
        help="generate or convert a graph into the hpcgnn HDF5 format",
        description=(
            "Write a graph file (CSR adjacency, features, labels, train/val/test masks) "
            "from a generator or a public dataset format. See inputs/README.md for recipes."
        ),
    )
    sources = parser.add_subparsers(dest="source", required=True, metavar="SOURCE")
    _add_synthetic(sources)
    _add_planetoid(sources)
    _add_ogb(sources)
    _add_edgelist(sources)
    _add_pyg(sources)
    _add_npz(sources)


def _output_options() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--out", type=Path, required=True, metavar="G.h5",
                        help="graph file to write (replaced if it exists)")
    common.add_argument("--tmpdir", type=Path, metavar="DIR",
                        help="directory for temporary edge files (default: system temp dir)")
    common.add_argument("--quiet", action="store_true", help="no progress bars")
    return common


def _split_options() -> argparse.ArgumentParser:
    split = argparse.ArgumentParser(add_help=False)
    split.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    split.add_argument("--train-frac", type=float, default=0.6,
                       help="fraction of labelled vertices for training (default: 0.6)")
    split.add_argument("--val-frac", type=float, default=0.2,
                       help="fraction of labelled vertices for validation (default: 0.2); "
                            "the rest is the test set")
    return split


def _normalize_option() -> argparse.ArgumentParser:
    norm = argparse.ArgumentParser(add_help=False)
    norm.add_argument("--row-normalize", action="store_true",
                      help="divide every feature row by the sum of its absolute values (for"
                           " non-negative features, as Kipf & Welling's preprocessing: rows"
                           " summing to 1); recorded in the file (default: values as given)")
    return norm


def _per_class_options() -> argparse.ArgumentParser:
    sizes = argparse.ArgumentParser(add_help=False)
    sizes.add_argument("--train-per-class", type=int, default=20, metavar="K",
                       help="--split per-class: training vertices per class (default: 20)")
    sizes.add_argument("--val-size", type=int, default=500, metavar="V",
                       help="--split per-class: validation vertices (default: 500)")
    sizes.add_argument("--test-size", type=int, default=1000, metavar="T",
                       help="--split per-class: test vertices (default: 1000)")
    return sizes


def _split_spec(args: argparse.Namespace) -> SplitSpec:
    return SplitSpec(args.split, args.seed, args.train_frac, args.val_frac,
                     args.train_per_class, args.val_size, args.test_size)


def _add_synthetic(sources: argparse._SubParsersAction) -> None:
    p = sources.add_parser(
        "synthetic",
        parents=[_output_options(), _split_options(), _normalize_option()],
        help="seeded SBM (homophilous, for accuracy) or RMAT (power law, for scale) graph",
        description=(
            "Generate a graph in streaming fashion; the same parameters and seed give the "
            "same file. Labels are a balanced random assignment, features are a random "
            "class centre plus Gaussian noise, and the split is random."
        ),
    )
    p.add_argument("--generator", choices=GENERATORS, default="sbm",
                   help="sbm: classes are blocks; rmat: Graph500 Kronecker (default: sbm)")
    p.add_argument("--num-nodes", "--nodes", dest="nodes", type=int, default=20000, metavar="N",
                   help="number of vertices (default: 20000; --nodes is the same)")
    p.add_argument("--avg-degree", type=float, default=16.0, metavar="D",
                   help="mean degree asked for: N*D/2 undirected or N*D directed edges are "
                        "generated before duplicates are dropped (default: 16)")
    p.add_argument("--feature-dim", "--features", dest="features", type=int, default=64,
                   metavar="F", help="feature width (default: 64; --features is the same)")
    p.add_argument("--classes", type=int, default=8, metavar="C",
                   help="number of classes (default: 8)")
    p.add_argument("--directed", action="store_true", help="generate a directed graph")
    p.add_argument("--intra-fraction", type=float, default=0.8,
                   help="sbm: probability that an edge stays inside its class (default: 0.8)")
    p.add_argument("--feature-noise", type=float, default=2.0,
                   help="standard deviation of the noise around the class centres, which "
                        "have norm about 1 (default: 2.0)")
    p.add_argument("--name", help="dataset name stored in the file (default: from parameters)")
    p.set_defaults(func=_synthetic)


def _add_planetoid(sources: argparse._SubParsersAction) -> None:
    p = sources.add_parser(
        "planetoid",
        parents=[_output_options()],
        help="Cora, CiteSeer or PubMed from the public ind.NAME.* files",
        description=(
            "Convert the Planetoid files ind.NAME.{x,y,tx,ty,allx,ally,graph,test.index} "
            "with the standard split (train = range(len(y)), val = next 500, test = "
            "test.index). The feature rows are divided by their sums, as Kipf & Welling's "
            "preprocessing does (recorded in the file; --no-normalize-features keeps them)."
        ),
    )
    p.add_argument("--root", type=Path, required=True, metavar="DIR",
                   help="directory with the ind.NAME.* files (or DIR/raw, DIR/NAME/raw)")
    p.add_argument("--name", required=True, metavar="NAME",
                   help="dataset name as in the file names: cora, citeseer or pubmed")
    p.add_argument("--no-normalize-features", dest="normalize_features", action="store_false",
                   help="store the feature values as the files give them (default: each row"
                        " divided by its sum)")
    p.add_argument("--row-normalize", dest="normalize_features", action="store_true",
                   help="each feature row divided by its sum (the default here)")
    p.set_defaults(func=_planetoid)


def _add_ogb(sources: argparse._SubParsersAction) -> None:
    p = sources.add_parser(
        "ogb",
        parents=[_output_options(), _normalize_option()],
        help="OGB node-property dataset (ogbn-arxiv, ogbn-products, papers100M-bin) from its"
             " raw files",
        description=(
            "Convert DIR/raw/{edge,node-feat,node-label}.csv.gz, or the binary layout "
            "DIR/raw/data.npz and DIR/raw/node-label.npz (e.g. ogbn-papers100M's "
            "papers100M-bin: streamed from the archive in blocks, never loaded whole), with "
            "the split in DIR/split/<split>/{train,valid,test}.csv.gz. Edges are made "
            "undirected unless --directed."
        ),
    )
    p.add_argument("--root", type=Path, required=True, metavar="DIR",
                   help="dataset directory holding raw/ and split/")
    p.add_argument("--split", metavar="NAME",
                   help="sub-directory of split/ (needed only if there are several)")
    p.add_argument("--directed", action="store_true",
                   help="keep the edge directions of the edge list (default: symmetrise)")
    p.add_argument("--name", help="dataset name stored in the file (default: directory name)")
    p.set_defaults(func=_ogb)


def _add_edgelist(sources: argparse._SubParsersAction) -> None:
    p = sources.add_parser(
        "edgelist",
        parents=[_output_options(), _split_options(), _per_class_options(), _normalize_option()],
        help="SNAP-style edge list ('u v' or 'u v w' per line, '#' comments), optional .npy "
             "arrays",
        description=(
            "Convert a text edge list (plain or .gz). Vertex ids are relabelled 0..n-1 in "
            "increasing order unless --num-nodes is given; row k of --features and entry k "
            "of --labels belong to vertex k. Without --labels the labels are random and "
            "without --features the features are random: such files are for timing only. "
            "A third column is the edge's weight (on every line or on none); the weights of "
            "a repeated edge are summed. The split is random (--train-frac, --val-frac), "
            "per class, or your own (--split FILE)."
        ),
    )
    p.add_argument("--split", default="random", metavar="random|per-class|FILE",
                   help="random: --train-frac/--val-frac of the labelled vertices (default);"
                        " per-class: Planetoid's 20 per class / 500 / 1000; FILE: your masks,"
                        " a text file of one train, val, test or - per vertex line (line k:"
                        " vertex k, as --labels), or an .npz of boolean arrays train, val and"
                        " test")
    p.add_argument("--edges", type=Path, required=True, metavar="FILE",
                   help="edge list: 'u v' per line, or 'u v w' with a weight w (float) on "
                        "every line; whitespace or comma separated")
    p.add_argument("--features", type=Path, metavar="X.npy|X.npz",
                   help="float array of shape (n, F), one row per vertex; or a SciPy sparse"
                        " matrix (scipy.sparse.save_npz, .npz), stored sparse (CSR)")
    p.add_argument("--labels", type=Path, metavar="Y.npy",
                   help="integer array of shape (n,); negative values mean unlabelled")
    p.add_argument("--directed", action="store_true",
                   help="keep edge directions (default: symmetrise)")
    p.add_argument("--num-nodes", type=int, metavar="N",
                   help="use ids as given, all below N (isolated vertices allowed), "
                        "instead of relabelling the ids that occur")
    p.add_argument("--feature-dim", type=int, default=64, metavar="F",
                   help="width of the random features used without --features (default: 64)")
    p.add_argument("--classes", type=int, metavar="C",
                   help="number of classes (default: 8 random classes without --labels, "
                        "else the largest label + 1)")
    p.add_argument("--name", help="dataset name stored in the file (default: file name)")
    p.set_defaults(func=_edgelist)


def _add_in_memory(
    sources: argparse._SubParsersAction, name: str, metavar: str, file_help: str,
    summary: str, description: str,
) -> None:
    """A source read whole into memory (``pyg``, ``npz``): one file, a split, a direction."""
    p = sources.add_parser(
        name, parents=[_output_options(), _split_options(), _per_class_options(),
                       _normalize_option()], help=summary, description=description,
    )
    p.add_argument("--file", type=Path, required=True, metavar=metavar, help=file_help)
    p.add_argument("--split", choices=SPLITS, default="given",
                   help="given: the file's train/val/test masks (default); per-class: "
                        "Planetoid's 20 per class / 500 / 1000 (--train-per-class, --val-size,"
                        " --test-size), seeded by --seed; random: --train-frac/--val-frac")
    p.add_argument("--directed", action="store_true",
                   help="keep the edges' directions (default: made undirected; symmetric"
                        " edges, as PyG stores them, are taken as they are)")
    p.add_argument("--name", help="dataset name stored in the file (default: file name)")
    p.set_defaults(func=_in_memory, convert=name)


def _add_pyg(sources: argparse._SubParsersAction) -> None:
    _add_in_memory(
        sources, "pyg", metavar="D.pt",
        file_help="torch.save of data.to_dict() (or of a Data, or a one-graph PyG dataset"
                  " file), read with weights_only=True: keys x, edge_index, y, train_mask,"
                  " val_mask, test_mask, edge_weight",
        summary="a PyTorch Geometric graph saved with torch.save (no PyG needed)",
        description=(
            "Convert a PyG graph saved with torch.save(data.to_dict(), D.pt) (or "
            "torch.save(data, D.pt), or an InMemoryDataset file of one graph). The file is "
            "read with torch.load(weights_only=True): no code in it runs. Other forms are "
            "refused, saying how to save them. See inputs/README.md."
        ),
    )


def _add_npz(sources: argparse._SubParsersAction) -> None:
    _add_in_memory(
        sources, "npz", metavar="F.npz",
        file_help="archive with adj_data/adj_indices/adj_indptr/adj_shape, attr_data/"
                  "attr_indices/attr_indptr/attr_shape or attr_matrix, and labels",
        summary="the benchmark .npz layout (Shchur et al.'s citation and co-purchase graphs)",
        description=(
            "Convert a graph in the .npz layout of Shchur et al.'s 'Pitfalls of GNN "
            "evaluation' and nettack (cora.npz, amazon_electronics_computers.npz, ...): the "
            "adjacency and features as CSR arrays (or attr_matrix dense), labels. These "
            "files hold no split: give --split per-class or --split random."
        ),
    )


def _report(args: argparse.Namespace, task: Callable[[], PrepareSummary]) -> int:
    """Run ``task`` on rank 0 after checking the shared options; print its summary."""

    def checked() -> PrepareSummary:
        if args.tmpdir is not None and not args.tmpdir.is_dir():
            raise ConfigError(f"--tmpdir {args.tmpdir}: no such directory")
        if args.out.is_dir():
            raise ConfigError(f"--out {args.out} is a directory; give a file name such as G.h5")
        check_output(args.out, "--out")  # a symlink there fails now, not after the work
        return task()

    summary = run_on_root(checked)
    if summary is not None:
        print(summary.describe(), flush=True)
    return 0


def _synthetic(args: argparse.Namespace) -> int:
    spec = SyntheticSpec(
        generator=args.generator, nodes=args.nodes, avg_degree=args.avg_degree,
        features=args.features, classes=args.classes, directed=args.directed, seed=args.seed,
        intra_fraction=args.intra_fraction, feature_noise=args.feature_noise,
        train_frac=args.train_frac, val_frac=args.val_frac,
    )
    return _report(args, lambda: generate_synthetic(
        spec, args.out, name=args.name, tmpdir=args.tmpdir, show_progress=not args.quiet,
        row_normalize=args.row_normalize,
    ))


def _planetoid(args: argparse.Namespace) -> int:
    return _report(args, lambda: convert_planetoid(
        args.root, args.name, args.out, tmpdir=args.tmpdir, show_progress=not args.quiet,
        normalize_features=args.normalize_features,
    ))


def _ogb(args: argparse.Namespace) -> int:
    return _report(args, lambda: convert_ogb(
        args.root, args.out, split=args.split, directed=args.directed, name=args.name,
        tmpdir=args.tmpdir, show_progress=not args.quiet, row_normalize=args.row_normalize,
    ))


def _edgelist(args: argparse.Namespace) -> int:
    return _report(args, lambda: convert_edgelist(
        args.edges, args.out, features=args.features, labels=args.labels,
        directed=args.directed, num_nodes=args.num_nodes, feature_dim=args.feature_dim,
        classes=args.classes, seed=args.seed, train_frac=args.train_frac,
        val_frac=args.val_frac, name=args.name, tmpdir=args.tmpdir,
        show_progress=not args.quiet, split=args.split, train_per_class=args.train_per_class,
        val_size=args.val_size, test_size=args.test_size, row_normalize=args.row_normalize,
    ))


def _in_memory(args: argparse.Namespace) -> int:
    convert = convert_pyg if args.convert == "pyg" else convert_benchmark_npz
    return _report(args, lambda: convert(
        args.file, args.out, split=_split_spec(args), directed=args.directed,
        row_normalize=args.row_normalize, name=args.name, tmpdir=args.tmpdir,
        show_progress=not args.quiet,
    ))
