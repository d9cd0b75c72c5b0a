"""Post-processing chosen for an ensemble (the folds of one run, or models of one split) as
``evaluate.py`` scores it: as training chooses it for one model, on validation cases, each
case predicted by the members that did not train on it. For a fold ensemble these are
its out-of-fold predictions (each case by the fold that held it out), as nnU-Net chooses
the post-processing of its cross-validation ensemble; models of one split predict their
shared validation cases together.

A choice made by one member's training was measured on that member's predictions alone;
an ensemble's predictions are smoother, and the step that helped one model may not help
them."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import lightning as L
import torch

from segnet.serving.ensemble import average_probabilities
from segnet.serving.postprocessing import Postprocessing, candidate_dice, choose
from segnet.training.module import SegmentationModule

log = logging.getLogger(__name__)


def held_out_by(members: Sequence[SegmentationModule]) -> list[set[str]] | None:
    """Each member's validation cases by name, as its checkpoint recorded them; None where
    one has no record (an exported model, a split from fixed files)."""
    held = [set((getattr(m, "recorded_splits", None) or {}).get("val") or ()) for m in members]
    return held if all(held) else None


@torch.no_grad()
def choose_for_ensemble(
    trainer: L.Trainer, members: Sequence[SegmentationModule], every_case: Any
) -> tuple[Postprocessing, dict] | None:
    """The steps that raise Dice on the members' validation cases, each predicted by the
    members holding it out (averaged, single pass, in the trainer's precision).
    ``every_case``: the members' training data read with ``split=all``, set up for testing.
    None where the members recorded no validation cases."""
    held = held_out_by(members)
    if held is None:
        return None
    device, precision = trainer.strategy.root_device, trainer.precision_plugin
    for member in members:
        member.eval().to(device)
    first = members[0]
    dataset = every_case.datasets["test"]
    loader = every_case._loader(dataset, 1, shuffle=False, shard=False)
    rows, by_how_many = [], {}
    for batch in loader:
        holders = [m for m, cases in zip(members, held, strict=True)
                   if dataset.names[int(batch["index"][0])] in cases]  # fmt: skip
        if not holders:
            continue  # a training or test case of every member
        batch = first.on_after_batch_transfer(trainer.strategy.batch_to_device(batch, device), 0)
        x, y = precision.convert_input(batch["image"]), batch["label"]
        with precision.forward_context():
            logits = [m.inference.logits(m.net, x, y.shape[1:], False) for m in holders]
        if len(logits) > 1:
            logits = [average_probabilities([v.float() for v in logits], first.inference.sigmoid)]
        pred = first.label_map(logits[0].float())
        rows.append(candidate_dice(pred, y, first.num_classes, first.ignore_index).cpu())
        by_how_many[len(holders)] = by_how_many.get(len(holders), 0) + 1
    if not rows:
        return None
    plan, record = choose(torch.cat(rows), first.class_names)
    record["chosen_on"] = (
        f"{len(rows)} validation case(s) of the ensemble's members, each predicted by the "
        + ", ".join(
            f"{n} member(s) holding it out ({count} cases)"
            for n, count in sorted(by_how_many.items())
        )  # fmt: skip
    )
    return trainer.strategy.broadcast((plan, record), src=0)
