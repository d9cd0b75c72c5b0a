"""Train a segmentation network: ``python train.py [overrides]`` (see configs/train.yaml).
The same command as ``segnet-train`` (``segnet/cli.py``)."""

from segnet.cli import train as main

if __name__ == "__main__":
    main()
