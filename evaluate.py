"""Evaluate a checkpoint: ``python evaluate.py ckpt_path=... [data.split=test]``.
The same command as ``segnet-evaluate`` (``segnet/cli.py``)."""

from segnet.cli import evaluate as main

if __name__ == "__main__":
    main()
