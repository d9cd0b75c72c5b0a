"""images_quick against the yardstick U-Net, same minutes, same machine, over several
folders as users bring them; one table: per folder both test Dice figures and the margin,
then the mean and the worst margin (defaults are chosen by the worst, not one folder).

    python benchmarks/any_folder.py --minutes 15 --out /tmp/any_folder
    python benchmarks/any_folder.py --minutes 2 --folders membrane horses   # a quick look

Each folder trains ``experiment=images_quick train_minutes=<minutes>`` with the one
command line docs/data-images.md gives for it, then ``benchmarks/unet_yardstick.py --run <run>
--minutes <minutes>`` on the same split; the two run one after the other, never together
(on 2 cores a second process slows the first). The cars, streets and slices folders are written
first from ../shared/data (``camvid_cars_folder.py``, ``camvid_colours_folder.py``,
``hippocampus_slices_folder.py``).
Run it with nothing else busy on the machine. To try a change to the recipe, the yardstick's
figures of an earlier run can be reused (``--yardstick-from <out>/table.json``): it reads the
same split and does not change with the recipe, but not with the machine's speed, which on a
shared machine can change by the hour (compare the steps its logs give before trusting a margin).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"

# name -> (data settings as docs/data-images.md gives them, how the folder is made or None)
FOLDERS = {
    "membrane": (["data.root={shared}/membrane", "data.class_names=[cell,membrane]",
                  "data.label_values=[255,0]"], None),
    "nuclei": (["data.root={shared}/nuclei", "data.class_names=[background,nucleus]",
                "data.label_values=[0,255]"], None),
    "horses": (["data.root={shared}/horses", "data.class_names=[background,horse]",
                "data.label_values=[0,255]"], None),
    "cars": (["data.root={out}/cars", "data.image_dir=photos", "data.label_dir=masks",
              "data.label_name={{id}}_car", "data.class_names=[background,car]",
              "data.label_values=[0,255]", "data.ignore_values=[128]"],
             ["camvid_cars_folder.py", "{shared}/CamVid/val", "{out}/cars"]),
    "streets": (["data.root={out}/streets",
                 "data.class_names=[sky,building,pole,road,pavement,tree,sign,fence,car,"
                 "pedestrian,bicyclist]",
                 "data.palette=[[128,128,128],[128,0,0],[192,192,128],[128,64,128],[60,40,222],"
                 "[128,128,0],[192,128,128],[64,64,128],[64,0,128],[64,64,0],[0,128,192]]",
                 "data.ignore_values=[[0,0,0]]"],
                ["camvid_colours_folder.py", "{shared}/CamVid/val", "{out}/streets"]),
    "slices": (["data.root={out}/slices", "data.image_name={{id}}_t1",
                "data.label_name={{id}}_seg", "data.class_names=[background,anterior,posterior]"],
               ["hippocampus_slices_folder.py", "{shared}/Task04_Hippocampus", "{out}/slices"]),
}  # fmt: skip


def run(cmd: list[str], log: Path) -> str:
    """``cmd`` in the checkout, its output kept in ``log``; stops the benchmark on failure."""
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    log.write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}); its output: {log}")
    return proc.stdout + proc.stderr


def one_folder(
    name: str, minutes: float, out: Path, shared: Path, extra: list[str], earlier: dict
) -> dict:
    settings, maker = FOLDERS[name]
    fill = {"shared": shared, "out": out}
    if maker and not (out / name).is_dir():
        script, *args = maker
        run([sys.executable, str(ROOT / "benchmarks" / script),
             *(a.format(**fill) for a in args)], out / f"{name}_make.log")  # fmt: skip
    run_dir = out / f"{name}_run"
    run([sys.executable, "train.py", "experiment=images_quick", f"train_minutes={minutes}",
         *(s.format(**fill) for s in settings), *extra, f"hydra.run.dir={run_dir}"],
        out / f"{name}_train.log")  # fmt: skip
    recipe = json.loads((run_dir / "metrics.json").read_text())
    row = {"folder": name, "recipe": recipe["metrics"]["test/dice"],
           "epochs": recipe.get("epochs_trained"), "best_epoch": recipe.get("best_epoch")}  # fmt: skip
    if name in earlier:  # the yardstick does not change with the recipe: its earlier figure
        return {**row, "yardstick": earlier[name], "yardstick_earlier": True}
    said = run([sys.executable, str(ROOT / "benchmarks" / "unet_yardstick.py"),
                "--run", str(run_dir), "--minutes", str(minutes)], out / f"{name}_yardstick.log")  # fmt: skip
    return {**row, "yardstick": float(re.search(r"test Dice ([0-9.]+)", said).group(1))}


def table(rows: list[dict], minutes: float) -> str:
    lines = [f"images_quick against the yardstick U-Net, {minutes:g} minutes each, test Dice",
             f"{'folder':<10} {'images_quick':>12} {'yardstick':>10} {'margin':>8}"]  # fmt: skip
    for r in rows:
        lines.append(f"{r['folder']:<10} {r['recipe']:>12.4f} {r['yardstick']:>10.4f} "
                     f"{r['recipe'] - r['yardstick']:>+8.4f}"
                     + ("  (yardstick from --yardstick-from)" if r.get("yardstick_earlier") else ""))  # fmt: skip
    margins = [r["recipe"] - r["yardstick"] for r in rows]
    mean = sum(r["recipe"] for r in rows) / len(rows)
    mean_y = sum(r["yardstick"] for r in rows) / len(rows)
    lines.append(f"{'mean':<10} {mean:>12.4f} {mean_y:>10.4f} {mean - mean_y:>+8.4f}")
    lines.append(
        f"worst margin {min(margins):+.4f} ({rows[margins.index(min(margins))]['folder']})"
    )
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=15.0, help="each side's budget")
    p.add_argument("--out", type=Path, default=Path("outputs/any_folder"))
    p.add_argument("--folders", nargs="+", default=list(FOLDERS), choices=list(FOLDERS))
    p.add_argument("--shared", type=Path, default=SHARED, help="the shared data folder")
    p.add_argument(
        "--yardstick-from",
        type=Path,
        nargs="+",
        default=[],
        help="table.json files of earlier runs of this benchmark (same folders, same --minutes,"
        " same machine): their yardstick figures are reused rather than re-run, as the"
        " yardstick does not change with the recipe; the table marks them. A shared machine's"
        " speed can change by hours (its yardstick logs say the steps it took): compare"
        " like with like before choosing by these",
    )
    p.add_argument("overrides", nargs="*", help="more key=value settings for images_quick")
    a = p.parse_args()
    earlier = {r["folder"]: r["yardstick"] for f in a.yardstick_from
               for r in json.loads(f.read_text())}  # fmt: skip
    a.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in a.folders:
        rows.append(one_folder(name, a.minutes, a.out.resolve(), a.shared.resolve(), a.overrides,
                               earlier))  # fmt: skip
        print(f"{name}: images_quick {rows[-1]['recipe']:.4f}, yardstick {rows[-1]['yardstick']:.4f}",
              flush=True)  # fmt: skip
    text = table(rows, a.minutes)
    (a.out / "table.txt").write_text(text + "\n")
    (a.out / "table.json").write_text(json.dumps(rows, indent=2) + "\n")
    print(text)


if __name__ == "__main__":
    main()
