"""Macro- and micro-F1 of single-label classification from counts that add over ranks.

Each rank counts, per class, its rows under a mask that are predicted as the class and
labelled it (true positives), predicted as it, and labelled it (:func:`class_counts`); the
sums over ranks give the global scores (:func:`f1_scores`), as scikit-learn's
``f1_score(average="macro" | "micro")`` computes them on the whole set: a class with
neither predictions nor labels counts 0 in the macro mean (scikit-learn's
``zero_division=0``; its default warns and counts 0 too). In single-label
classification micro-F1 equals the accuracy.
"""

from __future__ import annotations

import numpy as np
import torch


def class_counts(logits: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> np.ndarray:
    """``(3, C)`` int64: per class the true positives, the predictions and the labels."""
    classes = logits.shape[1]
    out = np.zeros((3, classes), dtype=np.int64)
    if not bool(mask.any()):
        return out
    pred, true = logits[mask].argmax(dim=1), labels[mask]
    hit = pred == true
    for row, values in enumerate((pred[hit], pred, true)):
        out[row] = torch.bincount(values.long().cpu(), minlength=classes).numpy()
    return out


def f1_scores(counts: np.ndarray) -> tuple[float, float]:
    """``(macro, micro)`` F1 of :func:`class_counts` summed over ranks (NaN on no rows)."""
    tp, predicted, actual = (counts[i].astype(np.float64) for i in range(3))
    if actual.sum() == 0:
        return float("nan"), float("nan")
    denom = predicted + actual
    per_class = np.divide(2 * tp, denom, out=np.zeros_like(tp), where=denom > 0)
    micro = 2 * tp.sum() / (predicted.sum() + actual.sum())
    return float(per_class.mean()), float(micro)
