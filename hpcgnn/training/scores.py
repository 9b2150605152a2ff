"""Macro- and micro-F1 and the accuracy from counts that add over ranks.

Each rank counts, per class, its rows under a mask that are predicted as the class and
labelled it (true positives), predicted as it, and labelled it (:func:`class_counts`); the
sums over ranks give the global scores (:func:`f1_scores`), as scikit-learn's
``f1_score(average="macro" | "micro")`` computes them on the whole set: a class with
neither predictions nor labels counts 0 in the macro mean (scikit-learn's
``zero_division=0``; its default warns and counts 0 too). In single-label
classification (the argmax of a row predicts its class) micro-F1 equals the accuracy.

Multi-label targets (a 0/1 label matrix): each (row, class) entry is predicted positive
where its logit is above 0 (a probability above 1/2), and the same three counts per class
give the F1 scores (micro-F1 is PPI's metric). A fourth count per class, the rows scored,
gives the accuracy, the fraction of correct (row, class) entries (:func:`accuracy_terms`).
"""

from __future__ import annotations

import numpy as np
import torch


def class_counts(logits: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> np.ndarray:
    """``(3, C)`` int64: per class the true positives, the predictions and the labels.

    Multi-label ``labels`` (a 0/1 matrix): ``(4, C)``, the same with each entry predicted
    positive where its logit is above 0, and the rows scored (every class's the same).
    """
    classes = logits.shape[1]
    out = np.zeros((4 if labels.ndim == 2 else 3, classes), dtype=np.int64)
    if not bool(mask.any()):
        return out
    if labels.ndim == 2:
        pred, true = logits[mask] > 0, labels[mask].bool()
        for row, values in enumerate((pred & true, pred, true)):
            out[row] = values.sum(dim=0).cpu().numpy()
        out[3] = int(pred.shape[0])
        return out
    pred, true = logits[mask].argmax(dim=1), labels[mask]
    hit = pred == true
    for row, values in enumerate((pred[hit], pred, true)):
        out[row] = torch.bincount(values.long().cpu(), minlength=classes).numpy()
    return out


def accuracy_terms(counts: np.ndarray) -> tuple[int, int]:
    """``(correct, total)`` of :func:`class_counts` summed over ranks.

    Single-label: the rows whose argmax is their class, and the rows. Multi-label: the
    correct (row, class) entries, true positives and true negatives (the rows, less the
    predictions and the labels, plus twice the true positives), and the entries.
    """
    tp, predicted, actual = (int(counts[i].sum()) for i in range(3))
    if len(counts) == 3:
        return tp, actual
    entries = int(counts[3].sum())
    return entries - predicted - actual + 2 * tp, entries


def f1_scores(counts: np.ndarray) -> tuple[float, float]:
    """``(macro, micro)`` F1 of :func:`class_counts` summed over ranks (NaN on no rows).

    A split with rows but neither predictions nor labels (multi-label) scores 0, as
    scikit-learn's ``zero_division=0``.
    """
    tp, predicted, actual = (counts[i].astype(np.float64) for i in range(3))
    if accuracy_terms(counts)[1] == 0:
        return float("nan"), float("nan")
    denom = predicted + actual
    per_class = np.divide(2 * tp, denom, out=np.zeros_like(tp), where=denom > 0)
    both = predicted.sum() + actual.sum()
    micro = 2 * tp.sum() / both if both else 0.0
    return float(per_class.mean()), float(micro)
