"""Macro- and micro-F1 from counts that add over ranks."""

import math

import numpy as np
import torch

from hpcgnn.training.scores import class_counts, f1_scores


def _f1_by_definition(pred, true, classes):
    per_class = []
    for c in range(classes):
        tp = np.sum((pred == c) & (true == c))
        fp = np.sum((pred == c) & (true != c))
        fn = np.sum((pred != c) & (true == c))
        per_class.append(0.0 if tp + fp + fn == 0 else 2 * tp / (2 * tp + fp + fn))
    return float(np.mean(per_class)), float(np.mean(pred == true))


def test_counts_of_row_blocks_add_up_to_the_scores_of_the_whole():
    rng = np.random.default_rng(3)
    logits = torch.tensor(rng.normal(size=(90, 5)))
    labels = torch.tensor(rng.integers(0, 4, 90))  # class 4 is never a label
    mask = torch.tensor(rng.random(90) < 0.7)
    blocks = [slice(0, 31), slice(31, 60), slice(60, 90)]  # three ranks' rows
    counts = sum(class_counts(logits[b], labels[b], mask[b]) for b in blocks)
    macro, micro = f1_scores(counts)
    want = _f1_by_definition(logits[mask].argmax(1).numpy(), labels[mask].numpy(), 5)
    assert math.isclose(macro, want[0]) and math.isclose(micro, want[1])


def test_no_rows_is_nan():
    counts = class_counts(torch.zeros(4, 3), torch.zeros(4, dtype=torch.long),
                          torch.zeros(4, dtype=torch.bool))
    assert all(math.isnan(v) for v in f1_scores(counts))
