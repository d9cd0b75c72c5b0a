"""The yardstick for experiment=images_quick: a bare PyTorch U-Net given the same minutes.

Four stages of 16-128 features, random 96x96 crops with flips, AdamW at 2e-3 decayed
linearly over the time budget, cross-entropy + soft Dice; then each held-out image whole.
It reads the split a training run recorded, so both are scored on the same images:

    python benchmarks/unet_yardstick.py --run outputs/train/runs/<run> --minutes 15

and prints the mean foreground Dice over the test images, as ``test/dice`` is defined.
"""

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
from torch import nn


def block(i, o):
    return nn.Sequential(
        nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU(inplace=True),
        nn.Conv2d(o, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU(inplace=True),
    )  # fmt: skip


class UNet(nn.Module):
    def __init__(self, cin, classes, f=(16, 32, 64, 128)):
        super().__init__()
        self.down = nn.ModuleList([block(a, b) for a, b in zip((cin, *f[:-1]), f, strict=True)])
        self.up = nn.ModuleList(
            [nn.ConvTranspose2d(b, a, 2, 2) for a, b in zip(f[:-1], f[1:], strict=True)]
        )
        self.dec = nn.ModuleList([block(2 * a, a) for a in f[:-1]])
        self.head = nn.Conv2d(f[0], classes, 1)

    def forward(self, x):
        skips = []
        for i, d in enumerate(self.down):
            x = d(x if i == 0 else F.max_pool2d(x, 2))
            skips.append(x)
        for up, dec, skip in zip(
            reversed(self.up), reversed(self.dec), reversed(skips[:-1]), strict=True
        ):
            x = dec(torch.cat([up(x), skip], 1))
        return self.head(x)


def load(image, label, values):
    x = np.asarray(Image.open(image).convert("L"), np.float32)[None]
    y = np.asarray(Image.open(label))
    out = np.zeros(y.shape, np.int64)
    for cls, v in enumerate(values):
        out[y == v] = cls
    return torch.from_numpy(x), torch.from_numpy(out)


def main():
    p = argparse.ArgumentParser()
    p.add_argument(
        "--run", required=True, help="a train.py run folder (its splits.json and config)"
    )
    p.add_argument("--minutes", type=float, default=15.0)
    a = p.parse_args()
    run = Path(a.run)
    import yaml

    data = yaml.safe_load((run / ".hydra" / "config.yaml").read_text())["data"]
    root, values = Path(data["root"]), data["label_values"]
    splits = json.loads((run / "splits.json").read_text())
    pairs = {s: [load(root / "images" / n, root / "labels" / n, values) for n in splits[s]]
             for s in ("train", "test")}  # fmt: skip
    mean = torch.cat([x.flatten() for x, _ in pairs["train"]]).mean()
    std = torch.cat([x.flatten() for x, _ in pairs["train"]]).std()
    classes = len(values)
    torch.manual_seed(0)
    net, budget = UNet(1, classes), a.minutes * 60
    opt = torch.optim.AdamW(net.parameters(), lr=2e-3)
    start, steps = time.monotonic(), 0
    while (elapsed := time.monotonic() - start) < budget:
        for g in opt.param_groups:
            g["lr"] = 2e-3 * (1 - elapsed / budget)
        xs, ys = [], []
        for _ in range(8):
            x, y = pairs["train"][torch.randint(len(pairs["train"]), ()).item()]
            i, j = (torch.randint(s - 96 + 1, ()).item() for s in y.shape)
            x, y = x[:, i : i + 96, j : j + 96], y[i : i + 96, j : j + 96]
            for axis in (0, 1):
                if torch.rand(()) < 0.5:
                    x, y = x.flip(1 + axis), y.flip(axis)
            xs.append((x - mean) / std)
            ys.append(y)
        x, y = torch.stack(xs), torch.stack(ys)
        logits = net(x)
        prob = logits.softmax(1)
        onehot = F.one_hot(y, classes).permute(0, 3, 1, 2).float()
        dice = 1 - (2 * (prob * onehot).sum((0, 2, 3)) + 1) / ((prob + onehot).sum((0, 2, 3)) + 1)
        loss = F.cross_entropy(logits, y) + dice.mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        steps += 1
    net.eval()
    scores = []
    with torch.no_grad():
        for x, y in pairs["test"]:
            pred = net(((x - mean) / std)[None]).argmax(1)[0]
            per = [2 * ((pred == c) & (y == c)).sum() / ((pred == c).sum() + (y == c).sum())
                   for c in range(1, classes) if (pred == c).any() or (y == c).any()]  # fmt: skip
            scores.append(torch.stack(per).mean().item())
    print(f"yardstick U-Net: {steps} steps in {a.minutes:g} min; test Dice "
          f"{np.mean(scores):.4f} over {len(scores)} images")  # fmt: skip


if __name__ == "__main__":
    main()
