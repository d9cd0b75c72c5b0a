"""The yardstick for experiment=images_quick: a bare PyTorch U-Net given the same minutes.

Four stages of 16-128 features, random 96x96 crops with flips, AdamW at 2e-3 decayed
linearly over the time budget, cross-entropy + soft Dice; then each held-out image whole.
It reads the run's data through the run's own DataModule (the same pairs, split, mask
mapping, void pixels and normalisation), so both are scored on the same held-out images:

    python benchmarks/unet_yardstick.py --run outputs/train/runs/<run> --minutes 15

and prints the test Dice as ``test/dice`` is defined (each foreground class's mean over the
images where it is defined, then their mean), void pixels left out.
"""

import argparse
import json
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from segnet.training.metrics import per_case_dice


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


def crop(x, y, size, void):
    """A random ``size`` x ``size`` crop, images smaller than that padded (label void)."""
    ph, pw = (max(0, size - s) for s in y.shape)
    if ph or pw:
        x = F.pad(x, (0, pw, 0, ph))
        y = F.pad(y, (0, pw, 0, ph), value=void)
    i, j = (torch.randint(s - size + 1, ()).item() for s in y.shape)
    return x[:, i : i + size, j : j + size], y[i : i + size, j : j + size]


def run_data(run: Path):
    """The run's own training and test images, read and normalised by its DataModule (the
    same pairs, split, mask mapping, void pixels and training-set mean and std)."""
    import yaml
    from hydra.utils import instantiate

    config = yaml.safe_load((run / ".hydra" / "config.yaml").read_text())
    dm = instantiate(config["data"])
    dm.prepare_data()
    info = dm.info()
    splits = json.loads((run / "splits.json").read_text())
    if dm.split_names() != {k: splits[k] for k in dm.split_names()}:
        raise SystemExit(f"{run}/splits.json differs from the split drawn now: a changed folder?")
    return dm.load("train"), dm.load(dm.split), info


def main():
    p = argparse.ArgumentParser()
    p.add_argument(
        "--run", required=True, help="a train.py run folder (its splits.json and config)"
    )
    p.add_argument("--minutes", type=float, default=15.0)
    a = p.parse_args()
    train, test, info = run_data(Path(a.run))
    # network input made once and held, as a hand-written loop would (the DataModule holds
    # 8-bit images as bytes and normalises what it reads)
    train_images = [item.image for item in train]
    classes, void = len(info.class_names), info.ignore_index
    torch.manual_seed(0)
    net, budget = UNet(info.in_channels, classes), a.minutes * 60
    opt = torch.optim.AdamW(net.parameters(), lr=2e-3)
    start, steps = time.monotonic(), 0
    while (elapsed := time.monotonic() - start) < budget:
        for g in opt.param_groups:
            g["lr"] = 2e-3 * (1 - elapsed / budget)
        xs, ys = [], []
        for _ in range(8):
            k = torch.randint(len(train), ()).item()
            x, y = crop(train_images[k], train[k].label, 96, void)
            for axis in (0, 1):
                if torch.rand(()) < 0.5:
                    x, y = x.flip(1 + axis), y.flip(axis)
            xs.append(x)
            ys.append(y)
        x, y = torch.stack(xs), torch.stack(ys).long()
        logits = net(x)
        valid = (y != void).unsqueeze(1).float()
        prob = logits.softmax(1) * valid
        onehot = F.one_hot(y.clamp(max=classes - 1), classes).permute(0, 3, 1, 2).float() * valid
        dice = 1 - (2 * (prob * onehot).sum((0, 2, 3)) + 1) / ((prob + onehot).sum((0, 2, 3)) + 1)
        loss = F.cross_entropy(logits, y, ignore_index=void) + dice.mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        steps += 1
    net.eval()
    rows = []
    with torch.no_grad():
        for item in test:
            x = item.image[None]
            h, w = x.shape[2:]
            x = F.pad(x, (0, -w % 8, 0, -h % 8))  # three poolings: multiples of 8
            pred = net(x).argmax(1)[:, :h, :w]
            rows.append(per_case_dice(pred, item.label[None], classes, void)[0])
    per_class = torch.stack(rows).nanmean(0)  # as test/dice: each class over the images
    scores = zip(info.class_names, per_class.tolist(), strict=True)
    print(f"yardstick U-Net: {steps} steps in {a.minutes:g} min; test Dice "
          f"{per_class[1:].nanmean():.4f} over {len(rows)} images; per class "
          + ", ".join(f"{n} {d:.4f}" for n, d in scores))  # fmt: skip


if __name__ == "__main__":
    main()
