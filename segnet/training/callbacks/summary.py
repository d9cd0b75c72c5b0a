"""The model summary at the start of training, without Lightning's FLOPs column: it counts
FLOPs only with an ``example_input_array``, whose extra forward pass would compile the
network a second time on a GPU; it printed zeros. ``python -m segnet.bench`` reports the
measured FLOP rate instead."""

from __future__ import annotations

import logging
from typing import Any

from lightning.pytorch.callbacks import ModelSummary as LightningModelSummary
from lightning.pytorch.utilities.model_summary import get_human_readable_count

log = logging.getLogger(__name__)


class ModelSummary(LightningModelSummary):
    @staticmethod
    def summarize(
        summary_data: list[tuple[str, list[str]]],
        total_parameters: int,
        trainable_parameters: int,
        model_size: float,
        total_training_modes: dict[str, int],
        total_flops: int = 0,
        **kwargs: Any,
    ) -> None:
        columns = [(name, values) for name, values in summary_data if name != "FLOPs"]
        widths = [max(len(name), *(len(str(v)) for v in values)) for name, values in columns]
        rows = [" | ".join(n.ljust(w) for (n, _), w in zip(columns, widths, strict=True))]
        rows.append("-" * len(rows[0]))
        for i in range(len(columns[0][1]) if columns else 0):
            cells = [
                str(values[i]).ljust(w) for (_, values), w in zip(columns, widths, strict=True)
            ]
            rows.append(" | ".join(cells))
        rows += [
            f"parameters: {get_human_readable_count(total_parameters)} "
            f"({get_human_readable_count(trainable_parameters)} trainable), "
            f"{model_size:.1f} MB",
        ]
        log.info("model\n%s", "\n".join(rows))
