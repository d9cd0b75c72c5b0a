"""The predict command: masks for images or volumes from a trained or exported model.
``key=value``, as every other command (``segnet-predict`` is the same)::

    python -m segnet.predict model=export/model.onnx 'inputs=[a.png,b.png]' out=masks/
    python -m segnet.predict model=export/model.onnx inputs=imagesTs/ out=predictions/
    python -m segnet.predict model=fold0/model.onnx,fold1/model.onnx inputs=imagesTs/ out=ens/
    python -m segnet.predict ... device=cuda tta=false

The flag form (``python -m segnet.predict export/model.onnx a.png --out masks/``) works too.
Every input and output is checked before the model is loaded; nothing here imports
Lightning or Hydra."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from segnet.data import formats
from segnet.data.errors import DataError
from segnet.serving.predict import Predictor, expand_inputs

# what the command takes as key=value (inputs also as input=)
KEYS = ("model", "inputs", "out", "device", "tta", "postprocess", "save_probabilities")


def model_paths(arg: str) -> list[str]:
    """The models named on the command line: one file, or several comma-separated (an
    ensemble). A file that exists under the whole name is one model, commas and all."""
    return [arg] if Path(arg).exists() else arg.split(",")


def check_device(device: str) -> None:
    """``--device`` names a device this machine has, before any model is loaded."""
    try:
        kind = torch.device(device).type
    except RuntimeError as err:
        raise SystemExit(f"--device {device}: {err}") from None
    missing = {
        "cuda": not torch.cuda.is_available(),
        "mps": not (hasattr(torch.backends, "mps") and torch.backends.mps.is_available()),
    }
    if missing.get(kind):
        raise SystemExit(f"--device {device}: this machine has no {kind} device; use --device cpu.")


def from_key_values(argv: list[str]) -> list[str]:
    """``model=... inputs=[a,b] out=... device=... tta=...`` as the flag form argparse
    reads; arguments in the flag form pass through. A key that is no setting is refused,
    naming those that are."""
    if not any("=" in a and not a.startswith("-") for a in argv):
        return argv
    given: dict[str, str] = {}
    rest = []
    for arg in argv:
        key, sep, value = arg.partition("=")
        if not sep or arg.startswith("-"):
            rest.append(arg)
            continue
        if key not in KEYS and key != "input":
            raise SystemExit(
                f"{key}={value}: python -m segnet.predict takes {', '.join(s + '=' for s in KEYS)}."
            )
        given["inputs" if key == "input" else key] = value
    if "model" not in given:
        raise SystemExit("model=...: give the model (a .onnx, .safetensors, .pt2 or .ckpt).")
    inputs = given.get("inputs", "")
    items = [i.strip() for i in inputs.strip("[]").split(",") if i.strip()] if inputs else []
    out = [given["model"], *items, *rest]
    if "out" in given:
        out += ["--out", given["out"]]
    if "device" in given:
        out += ["--device", given["device"]]
    if "tta" in given:
        tta = given["tta"].lower()
        if tta not in ("true", "false", "null"):
            raise SystemExit(f"tta={given['tta']}: true, false or null (as the model's recipe).")
        out += [] if tta == "null" else ["--tta" if tta == "true" else "--no-tta"]
    for key, on, off in (
        ("postprocess", "--postprocess", "--no-postprocess"),
        ("save_probabilities", "--save-probabilities", None),
    ):
        if key in given:
            value = given[key].lower()
            if value not in ("true", "false"):
                raise SystemExit(f"{key}={given[key]}: true or false.")
            out += [on] if value == "true" else ([off] if off else [])
    return out


def main(argv: list[str] | None = None) -> None:
    args = parse_args(from_key_values(list(sys.argv[1:] if argv is None else argv)))
    check_device(args.device)
    # every input (and where it writes) is checked before anything is predicted, so a bad
    # one never leaves the folder half written
    inputs = expand_inputs(args.inputs, Path(args.out))
    check_inputs_decode([item for item, _ in inputs])
    try:  # a missing model, or members that cannot be averaged: a message, not a traceback
        predictor = Predictor(
            model_paths(args.model), args.device, args.tta, postprocess=args.postprocess
        )
    except (ValueError, FileNotFoundError) as err:
        raise SystemExit(str(err)) from None
    # nnU-Net's further channel files are read with their case's channel 0000 file
    given = {item for item, _ in inputs}
    inputs = [(item, sub) for item, sub in inputs if not predictor.read_with_another(item, given)]
    # the model names what it writes (a case of channel files by its case)
    check_outputs(inputs, Path(args.out), predictor, args.save_probabilities)
    for item, _ in inputs:  # a volume among images (or the reverse) before any is written
        try:
            predictor.check_kind(item)
        except ValueError as err:
            raise SystemExit(str(err)) from None
    for item, subfolder in inputs:
        out = Path(args.out) / subfolder
        for written in predictor.predict_file(item, out, args.save_probabilities):
            print(written)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m segnet.predict",
        description=__doc__.split("\n")[0],
        epilog="The same as key=value: model=export/model.onnx 'inputs=[a.png,b.png]' "
        "out=masks/ device=cuda tta=false postprocess=false save_probabilities=true",
    )
    parser.add_argument(
        "model",
        help=".ckpt, or an exported .safetensors/.onnx/.pt2 with model.json, or an "
        "export folder (an exported ensemble's included); several, comma-separated "
        "(a.onnx,b.onnx), predict as an ensemble",
    )
    parser.add_argument(
        "inputs", nargs="+", help="PNG/JPEG images or NIfTI volumes, or folders of them"
    )
    parser.add_argument("--out", required=True, help="folder for the masks (out=...)")
    parser.add_argument(
        "--device", default="cpu", help="cpu, cuda, cuda:1 or mps (device=...; default cpu)"
    )
    parser.add_argument(
        "--tta",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="mirroring test-time augmentation (default: as the model's recipe tested)",
    )
    parser.add_argument(
        "--save-probabilities",
        action="store_true",
        help="also each input's class probabilities (save_probabilities=true): "
        "<name>_probabilities.npz for images, <case>_probabilities.nii.gz for volumes",
    )
    parser.add_argument(
        "--postprocess",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the post-processing training chose on validation, as the model records it "
        "(largest connected components; --no-postprocess: the network's label maps as they are)",
    )
    return parser.parse_args(argv)


def check_outputs(
    inputs: list[tuple[Path, Path]], out: Path, predictor: Predictor, probabilities: bool = False
) -> None:
    """No two inputs (each with its subfolder of ``out``) write one file, and none writes
    over a file already there: predictions are never overwritten."""
    writers: dict[Path, list[Path]] = {}
    for item, subfolder in inputs:
        for target in predictor.targets(item, out / subfolder, probabilities):
            writers.setdefault(target, []).append(item)
    clash = next(((t, w) for t, w in writers.items() if len(w) > 1), None)
    if clash:
        raise SystemExit(
            f"{' and '.join(map(str, clash[1]))} would both write {clash[0]}; predict them "
            "into separate --out folders."
        )
    existing = [t for t in writers if t.exists()]
    if existing:
        raise SystemExit(
            f"{existing[0]} exists ({len(existing)} output(s) in all); predictions are never "
            "overwritten: choose another --out folder."
        )
    if out.exists() and not out.is_dir():
        raise SystemExit(f"--out {out} is a file; give a folder for the masks.")


def check_inputs_decode(inputs: list[Path]) -> None:
    """Every input decodes whole (a truncated file, a text file, NaN voxels), one at a
    time: reading each twice costs less than a folder half predicted."""
    for item in inputs:
        try:
            formats.decode_whole(item)  # what kind the model takes: Predictor.check_kind
        except DataError as err:
            raise SystemExit(str(err)) from None


if __name__ == "__main__":
    main()
