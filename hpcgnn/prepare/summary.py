"""What a ``prepare`` run produced: sizes, split and timing, printed when it finishes."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PrepareSummary:
    """Statistics of one written graph file.

    Attributes
    ----------
    path
        The file written.
    name
        Dataset name stored in the file.
    num_nodes, num_edges
        Vertices and stored nonzeros of ``A`` (both directions of an undirected edge).
    num_features, num_classes
        Width of the feature matrix and number of classes.
    directed
        Whether ``A`` is stored together with a separate ``A^T``.
    train, val, test
        Sizes of the three masks.
    unlabelled
        Vertices with label ``-1``.
    edges_read
        Edge records read or generated, before dropping self loops and duplicates
        (one record per input line or generated edge, not per stored direction).
    seconds
        Wall time of the whole run.
    weighted
        Whether the edges carry weights (the weights of duplicates summed).

    """

    path: str
    name: str
    num_nodes: int
    num_edges: int
    num_features: int
    num_classes: int
    directed: bool
    train: int
    val: int
    test: int
    unlabelled: int
    edges_read: int
    seconds: float
    weighted: bool = False

    def describe(self) -> str:
        """Return the multi-line report printed by ``hpcgnn prepare``."""
        if self.directed:
            edges = f"edges {self.num_edges} (directed, A and A^T stored)"
        else:
            edges = f"edges {self.num_edges} stored (= {self.num_edges // 2} undirected)"
        dropped = "self loops and duplicates dropped"
        if self.weighted:
            edges = f"weighted {edges}"
            dropped = "self loops dropped, the weights of duplicates summed"
        lines = [
            f"wrote {self.path} ({self.name}) in {self.seconds:.1f} s",
            f"  vertices {self.num_nodes}, {edges}, "
            f"{self.edges_read} edge records read ({dropped})",
            f"  features {self.num_features}, classes {self.num_classes}, "
            f"unlabelled vertices {self.unlabelled}",
            f"  split: train {self.train}, val {self.val}, test {self.test}",
        ]
        return "\n".join(lines)
