"""``segnet-replay <run>`` (or ``python -m segnet.commands.replay <run>``): send the
run's trackers (MLflow) what they missed while they were away, from the run folder."""

from __future__ import annotations

import argparse
import logging

from segnet.runs.replay import replay


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="segnet-replay",
        description="Send a run's trackers what they missed (metrics, settings, files, "
        "pictures, the run's end), from the run folder's trackers/*.jsonl journals. "
        "What was sent is journalled: running it again sends only the rest.",
    )
    parser.add_argument("run", help="the run folder (outputs/train/runs/<run>)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    for line in replay(args.run):
        print(line)


if __name__ == "__main__":
    main()
