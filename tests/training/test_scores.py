"""Macro- and micro-F1 from counts that add over ranks."""

import math

import numpy as np
import torch

from hpcgnn.training.scores import accuracy_terms, class_counts, f1_scores


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


def _multi_label_by_definition(pred, true):
    """Macro-F1, micro-F1 and entry accuracy of 0/1 rows, in plain Python (no NumPy)."""
    classes, rows = len(true[0]), list(zip(pred, true, strict=True))
    tp = [sum(p[c] and t[c] for p, t in rows) for c in range(classes)]
    fp = [sum(p[c] and not t[c] for p, t in rows) for c in range(classes)]
    fn = [sum(t[c] and not p[c] for p, t in rows) for c in range(classes)]
    per_class = [0.0 if tp[c] + fp[c] + fn[c] == 0
                 else 2 * tp[c] / (2 * tp[c] + fp[c] + fn[c]) for c in range(classes)]
    micro = 2 * sum(tp) / (2 * sum(tp) + sum(fp) + sum(fn))
    correct = sum(p[c] == t[c] for p, t in rows for c in range(classes))
    return sum(per_class) / classes, micro, correct / (len(true) * classes)


def test_multi_label_scores_of_known_predictions():
    """Logits above 0 predict a class; class 3 is never predicted nor labelled (0 in the
    macro mean); the rows outside the mask do not count; three ranks' blocks add up."""
    logits = torch.tensor([[2.0, -1.0, 0.5, -3.0], [-0.1, 1.0, 1.0, -1.0],
                           [0.3, 0.2, -0.2, -0.5], [-2.0, -2.0, -2.0, -2.0],
                           [1.0, 1.0, 1.0, -1.0], [5.0, 5.0, 5.0, 5.0]], dtype=torch.float64)
    labels = torch.tensor([[1, 0, 0, 0], [1, 1, 1, 0], [0, 1, 0, 0], [0, 0, 1, 0],
                           [1, 0, 1, 0], [0, 0, 0, 0]], dtype=torch.uint8)
    mask = torch.tensor([True, True, True, True, True, False])
    counts = sum(class_counts(logits[b], labels[b], mask[b])
                 for b in (slice(0, 2), slice(2, 3), slice(3, 6)))
    assert counts.shape == (4, 4) and counts[3].tolist() == [5, 5, 5, 5]
    pred = [[v > 0 for v in row] for row in logits[:5].tolist()]
    true = [[bool(v) for v in row] for row in labels[:5].tolist()]
    macro, micro, acc = _multi_label_by_definition(pred, true)
    got = f1_scores(counts)
    assert math.isclose(got[0], macro) and math.isclose(got[1], micro)
    correct, total = accuracy_terms(counts)
    assert total == 20 and correct / total == acc
    # by hand: tp 2,2,2,0; predicted 3,3,3,0; labelled 3,2,3,0
    assert math.isclose(micro, 12 / 17) and math.isclose(macro, (4 / 6 + 4 / 5 + 4 / 6) / 4)
    assert acc == 15 / 20


def test_multi_label_rows_without_any_class_score_0_and_no_rows_nan():
    logits = -torch.ones(3, 2)
    labels = torch.zeros(3, 2, dtype=torch.uint8)
    counts = class_counts(logits, labels, torch.ones(3, dtype=torch.bool))
    assert f1_scores(counts) == (0.0, 0.0) and accuracy_terms(counts) == (6, 6)
    empty = class_counts(logits, labels, torch.zeros(3, dtype=torch.bool))
    assert all(math.isnan(v) for v in f1_scores(empty))
