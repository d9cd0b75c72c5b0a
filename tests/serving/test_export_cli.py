"""python -m segnet.export, evaluate.py on exported files, segnet.serving.predict."""

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch
from PIL import Image

from segnet.commands.evaluate import evaluate
from segnet.commands.predict import main as predict_main
from segnet.commands.predict import model_paths
from segnet.commands.train import train
from segnet.serving.predict import Predictor
from tests.conftest import REPO, TINY_CAMVID, compose, run_cli
from tests.test_imports import TRAINING_STACK

pytest.importorskip("onnxruntime")


@pytest.fixture(scope="module")
def exported(tiny_camvid, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("export")
    cfg = compose(
        "train", TINY_CAMVID + [f"data.root={tiny_camvid}", "data.image_size=[24,32]"], tmp / "run"
    )
    metrics, _ = train(cfg)
    ckpt = tmp / "run" / "checkpoints" / "best.ckpt"
    out = tmp / "export"
    proc = run_cli(["-m", "segnet.export", f"ckpt_path={ckpt}", f"hydra.run.dir={out}"], cwd=REPO)
    return ckpt, out, metrics, proc.stdout + proc.stderr


def test_export_writes_every_format_and_a_model_card(exported):
    ckpt, out, _, stdout = exported
    for name in ("model.safetensors", "model.onnx", "model.pt2", "model.json"):
        assert (out / name).is_file(), name
    for fmt in ("safetensors", "onnx", "pt2"):
        assert f"{fmt}" in stdout and "largest difference on reload" in stdout
    # the exporter's internals stay quiet: one line per format and the card
    assert "onnxscript" not in stdout and "onnx_ir" not in stdout, stdout
    # ... and the export's log file keeps that report
    log = (out / "export.log").read_text()
    assert "largest difference on reload" in log and str(out / "model.json") in log
    card = json.loads((out / "model.json").read_text())
    assert card["output"]["classes"][3] == "Road"
    assert card["output"]["palette"][3] == [128, 64, 128]
    assert card["input"]["normalization"]["mean"] == [0.485, 0.456, 0.406]
    assert card["input"]["trained_input_size"] == [24, 32]
    assert card["net"]["name"] == "segnet_basic"
    assert card["module"]["tta"] is False  # how the recipe tested: no mirroring here
    assert "val/miou" in card["metrics"]
    assert max(card["verified_max_abs_diff"].values()) < 1e-3


def test_export_never_overwrites(exported):
    from segnet.serving.export import export_checkpoint

    ckpt, out, _, _ = exported
    with pytest.raises(FileExistsError, match="never overwritten"):
        export_checkpoint(ckpt, out, ("onnx",))


def test_a_file_that_reloads_to_other_logits_is_refused_and_removed(
    exported, tmp_path, monkeypatch
):
    """The reload check decides: a format whose file computes something else (here the
    safetensors reloader made to add 0.1) is not written as verified, and the export's
    files go, its model card with them. (That the files of formats written before it go
    too: test_a_failed_write_leaves_no_file_of_the_export.)"""
    import segnet.serving.export
    from segnet.serving.export import export_checkpoint

    ckpt, _, _, _ = exported
    load = segnet.serving.export.LOADERS["safetensors"]
    off = {
        **segnet.serving.export.LOADERS,
        "safetensors": lambda path: lambda x: load(path)(x) + 0.1,
    }
    monkeypatch.setattr(segnet.serving.export, "LOADERS", off)
    with pytest.raises(
        ValueError, match=r"model\.safetensors: reloaded, it gives logits up to 0\.1"
    ):
        export_checkpoint(ckpt, tmp_path / "out", ("safetensors",))
    assert not any((tmp_path / "out").iterdir())
    monkeypatch.undo()
    export_checkpoint(ckpt, tmp_path / "out", ("safetensors",))  # the folder is free again


def test_a_failed_write_leaves_no_file_of_the_export(exported, tmp_path, monkeypatch):
    """Whatever stops an export midway (here the ONNX writer failing after it began the
    file), none of its files is left to pass for a model."""
    import segnet.serving.export
    from segnet.serving.export import export_checkpoint

    ckpt, _, _, _ = exported

    def broken(net, path, example):
        path.write_bytes(b"half a file")
        raise RuntimeError("the writer failed")

    monkeypatch.setattr(
        segnet.serving.export, "WRITERS", {**segnet.serving.export.WRITERS, "onnx": broken}
    )
    with pytest.raises(RuntimeError, match="the writer failed"):
        export_checkpoint(ckpt, tmp_path / "out", ("safetensors", "onnx"))
    assert not any((tmp_path / "out").iterdir())


# the ONNX one exports a model to refuse: seconds, in the slow suite
@pytest.mark.parametrize("name", [pytest.param("model.onnx", marks=pytest.mark.slow), "model.pt2"])
def test_an_exported_program_is_not_exported_again(exported, name, tmp_path):
    """A .onnx or .pt2 holds a traced graph, not the network: refused before anything is
    written, naming the .safetensors beside it, from which an export works."""
    from segnet.serving.export import export_checkpoint, export_ensemble

    _, out, _, _ = exported
    with pytest.raises(ValueError, match=r"exported program.*model\.safetensors"):
        export_checkpoint(out / name, tmp_path / "again", ("safetensors",))
    with pytest.raises(ValueError, match="exported program"):
        export_ensemble([out / "model.safetensors", out / name], tmp_path / "ens", ("onnx",))
    assert not (tmp_path / "again").exists() and not (tmp_path / "ens").exists()
    # from the .safetensors beside it, an export works: to ONNX once (its trace from a
    # .safetensors source), to safetensors for the other
    fmt = "onnx" if name == "model.onnx" else "safetensors"
    export_checkpoint(out / "model.safetensors", tmp_path / "again", (fmt,))
    assert (tmp_path / "again" / f"model.{fmt}").is_file()


def test_one_format_named_without_brackets_is_that_format_and_none_is_refused(exported, tmp_path):
    from segnet.commands.export import export
    from segnet.serving.export import export_checkpoint

    ckpt, _, _, _ = exported
    out = tmp_path / "one"
    export(compose("export", [f"ckpt_path={ckpt}", "formats=safetensors"], out))
    assert sorted(p.name for p in out.glob("model.*")) == ["model.json", "model.safetensors"]
    with pytest.raises(ValueError, match=r"formats=\[\]: name at least one"):
        export_checkpoint(ckpt, tmp_path / "none", ())
    assert not (tmp_path / "none").exists()


@pytest.mark.parametrize(
    "size,message",
    [
        ([8, 8], "at least"),  # below the smallest input: torch.export failed in its trace
        (64, "one whole number per spatial axis"),
        ([64, 64, 64], "one whole number per spatial axis of this 2D network"),
        ([64.5, 64], "one whole number"),
    ],
)
def test_an_example_size_the_network_cannot_take_is_refused_before_writing(
    exported, tmp_path, size, message
):
    from segnet.serving.export import export_checkpoint

    ckpt, _, _, _ = exported
    with pytest.raises(ValueError, match=rf"example_size=.*{message}"):
        export_checkpoint(ckpt, tmp_path / "out", ("onnx",), size)
    assert not (tmp_path / "out").exists()


def test_export_into_a_run_folder_is_refused_before_hydra_writes_there(exported):
    """The training run's folder keeps its own config: an export named into it stops
    before Hydra would replace .hydra/ with the export's."""
    ckpt, _, _, _ = exported
    run = ckpt.parent.parent
    with pytest.raises(AssertionError, match="already holds a run's outputs"):
        run_cli(
            ["-m", "segnet.export", f"ckpt_path={ckpt}", f"paths.output_dir={run}"],
            cwd=REPO,
        )
    assert not (run / ".hydra").exists() and not (run / "model.json").exists()


@pytest.mark.parametrize("name", ["model.onnx", "model.safetensors", "model.pt2"])
def test_evaluate_an_exported_model_gives_the_checkpoint_metrics(exported, name, tmp_path):
    ckpt, out, metrics, _ = exported
    cfg = compose("evaluate", [f"ckpt_path={out / name}", "trainer.accelerator=cpu"], tmp_path)
    ev, _ = evaluate(cfg)
    for key in ("test/miou", "test/global_acc", "test/class_acc"):
        assert ev[key] == pytest.approx(metrics[key], abs=1e-3), key


@pytest.mark.parametrize("name", ["model.onnx", "model.pt2"])
def test_recompute_bn_on_an_exported_program_is_refused(exported, name, tmp_path):
    """Its BatchNorm statistics are part of the program: recomputing them cannot happen,
    so it is refused before any data is read rather than reported as done."""
    _, out, _, _ = exported
    cfg = compose("evaluate", [f"ckpt_path={out / name}", "recompute_bn=true"], tmp_path)
    with pytest.raises(ValueError, match=rf"recompute_bn=true: .*{name} is an exported program"):
        evaluate(cfg)
    assert not (tmp_path / "metrics.json").exists()


def test_predict_cli_and_api_match_evaluate(exported, tiny_camvid, tmp_path):
    ckpt, out, _, _ = exported
    image = tiny_camvid / "test" / "test_000.png"
    predict_main([str(out / "model.onnx"), str(image), "--out", str(tmp_path / "masks")])
    mask = np.asarray(Image.open(tmp_path / "masks" / "test_000.png"))
    assert mask.shape == (45, 61)
    assert np.asarray(Image.open(tmp_path / "masks" / "test_000_color.png")).shape == (45, 61, 3)
    # the same command again: refused before the model is even loaded, nothing rewritten
    before = (tmp_path / "masks" / "test_000.png").stat().st_mtime_ns
    with pytest.raises(SystemExit, match="never overwritten"):
        predict_main([str(out / "model.onnx"), str(image), "--out", str(tmp_path / "masks")])
    assert (tmp_path / "masks" / "test_000.png").stat().st_mtime_ns == before
    # inputs that cannot all be written are refused before any is: one missing, or two
    # of the same name (from different folders) that would write the same mask
    fresh = tmp_path / "fresh"
    with pytest.raises(SystemExit, match="nope.png: no such file"):
        predict_main([str(out / "model.onnx"), str(image), "nope.png", "--out", str(fresh)])
    twin = tmp_path / "elsewhere" / image.name
    twin.parent.mkdir()
    twin.write_bytes(image.read_bytes())
    with pytest.raises(SystemExit, match="would both write"):
        predict_main([str(out / "model.onnx"), str(image), str(twin), "--out", str(fresh)])
    # an image that does not decode whole, a text file named .png, a 16-bit grey image
    # (which RGB conversion would turn white): refused, naming it, before any is written
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "cut.png").write_bytes(image.read_bytes()[:-200])
    (bad / "notes.png").write_text("not an image")
    Image.fromarray(np.full((45, 61), 40000, np.uint16)).save(bad / "wide.png")
    for name, message in (("cut", "cannot read"), ("notes", "cannot read"), ("wide", "16-bit")):
        with pytest.raises(SystemExit, match=f"{name}.png.*{message}|{message}.*{name}.png"):
            predict_main([str(out / "model.onnx"), str(image), str(bad / f"{name}.png"),
                          "--out", str(fresh)])  # fmt: skip
    assert not fresh.exists()
    fresh.write_text("a user's file")
    with pytest.raises(SystemExit, match="is a file; give a folder"):
        predict_main([str(out / "model.onnx"), str(image), "--out", str(fresh)])
    assert fresh.read_text() == "a user's file"
    # the same mask from the checkpoint through evaluate.py's saved predictions
    cfg = compose(
        "evaluate",
        [f"ckpt_path={ckpt}", "save_predictions=true", "trainer.accelerator=cpu"],
        tmp_path / "ev",
    )
    evaluate(cfg)
    reference = np.asarray(Image.open(tmp_path / "ev" / "predictions" / "test_000.png"))
    assert (mask == reference).mean() > 0.999
    # the checkpoint and its export, or an export and its copy, are one model: averaged
    # with itself it would report one model's score as an ensemble's
    both = [f"ckpt_path=[{ckpt},{out / 'model.safetensors'}]", "trainer.accelerator=cpu"]
    with pytest.raises(ValueError, match=r"model\.safetensors and .*best\.ckpt hold the same"):
        evaluate(compose("evaluate", both, tmp_path / "ev2"))
    shutil.copytree(out, tmp_path / "copy")
    with pytest.raises(ValueError, match="hold the same weights"):
        Predictor([out / "model.safetensors", tmp_path / "copy" / "model.safetensors"])
    # API on an array, from safetensors
    predictor = Predictor(out / "model.safetensors")
    api = predictor.predict_image(np.asarray(Image.open(image)))
    assert (api == reference).mean() > 0.999
    # a PIL image is the same picture; a float or wider array would be scaled as another
    # range (to near black): refused, with the conversion to make
    with Image.open(image) as im:
        assert np.array_equal(predictor.predict_image(im), api)
    for dtype in (np.float32, np.int64):
        with pytest.raises(ValueError, match=f"got a {np.dtype(dtype)} array: convert it"):
            predictor.predict_image(np.asarray(Image.open(image)).astype(dtype))


def test_a_photo_is_segmented_upright_as_its_exif_orientation_shows_it(
    exported, tiny_camvid, tmp_path
):
    """A phone photo stored sideways with an EXIF orientation tag: the mask lies over the
    picture as viewers show it."""
    _, out, _, _ = exported
    upright = Image.open(tiny_camvid / "test" / "test_000.png")
    sideways = tmp_path / "in" / "photo.png"
    sideways.parent.mkdir()
    exif = Image.Exif()
    exif[0x0112] = 6  # orientation: turn 90 degrees clockwise to view
    upright.transpose(Image.Transpose.ROTATE_90).save(sideways, exif=exif)
    predict_main([str(out / "model.onnx"), str(sideways), "--out", str(tmp_path / "masks")])
    predictor = Predictor(out / "model.onnx")
    expected = predictor.predict_image(np.asarray(upright.convert("RGB")))
    mask = np.asarray(Image.open(tmp_path / "masks" / "photo.png"))
    assert mask.shape == (45, 61)
    assert (mask == expected).mean() > 0.999


def test_predicting_with_an_exported_model_imports_no_training_stack(
    exported, tiny_camvid, tmp_path
):
    """Each format predicted in turn in one interpreter: what none of them loads, no one
    of them loads alone either."""
    _, out, _, _ = exported
    image = tiny_camvid / "test" / "test_000.png"
    formats = ("model.onnx", "model.safetensors", "model.pt2")
    code = "import sys; from segnet.commands.predict import main\n" + "".join(
        f"main([{str(out / name)!r}, {str(image)!r}, '--out', {str(tmp_path / name)!r}])\n"
        for name in formats
    )
    code += f"print(sorted(m for m in sys.modules if m.split('.')[0] in {TRAINING_STACK!r}))"
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
    )
    assert proc.stdout.strip().splitlines()[-1] == "[]", proc.stdout
    for name in formats:
        assert np.asarray(Image.open(tmp_path / name / "test_000.png")).shape == (45, 61), name


# The start of a deployment script: the training stack and this package cannot be imported
WITHOUT_TRAINING_STACK = """
import sys

class Blocked:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("segnet", "torch", "torchvision", "monai", "lightning"):
            raise ImportError(f"{name} is not available in this deployment")

sys.meta_path.insert(0, Blocked())
"""

# A deployment that has only onnxruntime, numpy and Pillow: it follows model.json's steps.
DEPLOY = (
    WITHOUT_TRAINING_STACK
    + """
import json
import numpy as np
import onnxruntime as ort
from PIL import Image

card = json.load(open(sys.argv[1]))
pre, post, onnx = (card["deployment"][k] for k in ("preprocess", "postprocess", "onnx"))
steps = {s["step"]: s for s in pre}
image = Image.open(sys.argv[2]).convert(steps["decode"]["channel_order"])
original_hw = image.size[::-1]
if "resize" in steps:
    h, w = steps["resize"]["size_hw"]
    image = image.resize((w, h), Image.BILINEAR)
x = np.asarray(image, np.float32) * steps["scale"]["multiply_by"]
x = (x - steps["normalize"]["subtract"]) / steps["normalize"]["divide_by"]
x = x.transpose(2, 0, 1)[None].astype(np.float32)
session = ort.InferenceSession(sys.argv[3], providers=["CPUExecutionProvider"])
(logits,) = session.run([onnx["output_name"]], {onnx["input_name"]: x})


def resize_axis(a, size, axis):
    # bilinear with half-pixel centres (align_corners=False), one axis at a time
    n = a.shape[axis]
    pos = np.clip((np.arange(size) + 0.5) * n / size - 0.5, 0, n - 1)
    lo = np.floor(pos).astype(int)
    hi = np.minimum(lo + 1, n - 1)
    frac = (pos - lo).reshape([-1 if i == axis else 1 for i in range(a.ndim)])
    return np.take(a, lo, axis) * (1 - frac) + np.take(a, hi, axis) * frac


if logits.shape[2:] != tuple(original_hw):
    logits = resize_axis(resize_axis(logits, original_hw[0], 2), original_hw[1], 3)
np.save(sys.argv[4], logits.argmax(1)[0].astype(np.uint8))
"""
)


def deploy(script_text: str, export_dir, source, tmp_path) -> np.ndarray:
    """Run a deployment script (only onnxruntime, numpy and Pillow or nibabel) on
    ``source`` with the model and card in ``export_dir``; what it saved."""
    script, out = tmp_path / "deploy.py", tmp_path / "m.npy"
    script.write_text(script_text)
    args = [str(export_dir / "model.json"), str(source), str(export_dir / "model.onnx"), str(out)]
    subprocess.run([sys.executable, str(script), *args], check=True, cwd=tmp_path)
    return np.load(out)


def test_model_card_is_enough_to_deploy_with_onnxruntime_numpy_and_pillow(
    exported, tiny_camvid, tmp_path
):
    _, out, _, _ = exported
    image = tiny_camvid / "test" / "test_000.png"
    deployed = deploy(DEPLOY, out, image, tmp_path)
    reference = Predictor(out / "model.onnx").predict_image(np.asarray(Image.open(image)))
    assert deployed.shape == reference.shape == (45, 61)
    # Pillow's and torchvision's antialiased resizes round differently in a few pixels
    assert (deployed == reference).mean() > 0.98


def test_exported_files_get_normal_permissions(exported):
    import os
    import stat

    _, out, _, _ = exported
    umask = os.umask(0)
    os.umask(umask)
    for name in ("model.safetensors", "model.onnx", "model.pt2", "model.json"):
        mode = stat.S_IMODE((out / name).stat().st_mode)
        assert mode == 0o666 & ~umask, (name, oct(mode))


@pytest.fixture(scope="module")
def exported_3d(tmp_path_factory):
    """A volumetric checkpoint (16^3 windows; trained flipping two of the three axes, so
    mirroring TTA flips those two) exported to ONNX."""
    from segnet.serving.export import export_checkpoint
    from tests.helpers import ODD_AFFINE, nifti_dataset

    tmp = tmp_path_factory.mktemp("export_3d")
    root = nifti_dataset(tmp / "d", "msd", n=6, affine=ODD_AFFINE)
    cfg = compose(
        "train",
        [
            "experiment=hippocampus_unet3d",
            f"data.root={root}",
            "data.patch_size=[16,16,16]",
            "data.num_workers=0",
            "model.net.features=[4,8,8]",
            "trainer.max_epochs=1",
            "trainer.check_val_every_n_epoch=1",
            "trainer.accelerator=cpu",
            "data.val_fraction=0.2",
            "data.test_fraction=0.2",
            "data.flip=[1,2]",
        ],
        tmp / "run",
    )
    train(cfg)
    export_checkpoint(tmp / "run" / "checkpoints" / "best.ckpt", tmp / "exp", ("onnx",))
    return root, tmp / "exp"


def test_predict_volume_from_exported_3d_model(exported_3d, tmp_path):
    """Export a volumetric checkpoint and predict a NIfTI file in its source space."""
    import nibabel as nib

    from tests.helpers import nifti_dataset

    root, exp = exported_3d
    written = Predictor(exp / "model.onnx").predict_file(
        root / "imagesTr" / "case_000.nii.gz", tmp_path / "out"
    )
    saved, source = nib.load(str(written[0])), nib.load(str(root / "imagesTr" / "case_000.nii.gz"))
    assert saved.shape == source.shape
    np.testing.assert_allclose(saved.affine, source.affine)
    # the recipe tests with mirroring: the card says how, and predict does it unless told not
    card = json.loads((exp / "model.json").read_text())
    mirroring = card["deployment"]["onnx"]["mirroring"]
    assert card["module"]["tta"] is True and card["data"]["mirror_axes"] == [1, 2]
    assert mirroring["axes"] == [3, 4] and "4 runs" in mirroring["run_on"]
    assert Predictor(exp / "model.onnx").model.inference.tta is True
    assert Predictor(exp / "model.onnx", tta=False).model.inference.tta is False
    # the wrong kind of input is refused, naming the file and what the model takes
    predictor = Predictor(exp / "model.onnx")
    png = tmp_path / "frame.png"
    Image.fromarray(np.zeros((40, 40, 3), np.uint8)).save(png)
    with pytest.raises(ValueError, match=r"frame\.png: this model segments 3D volumes \(NIfTI"):
        predictor.predict_file(png, tmp_path / "out2")
    two = nifti_dataset(tmp_path / "two", "msd", n=1, channels=2)
    with pytest.raises(
        ValueError, match=r"case_000\.nii\.gz has shape .*: 2 channel\(s\), and the model takes 1"
    ):
        predictor.predict_file(two / "imagesTr" / "case_000.nii.gz", tmp_path / "out3")
    # ... by the command line before any input is predicted: nothing is written
    from segnet.commands.predict import main as predict_main

    good = root / "imagesTr" / "case_000.nii.gz"
    bad = two / "imagesTr" / "case_000.nii.gz"
    two_inputs = [str(exp / "model.onnx"), str(good), str(tmp_path / "b" / "x.nii.gz")]
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "x.nii.gz").write_bytes(bad.read_bytes())
    with pytest.raises(SystemExit, match=r"x\.nii\.gz has shape .*2 channel"):
        predict_main([*two_inputs, "--out", str(tmp_path / "out5")])
    assert not (tmp_path / "out5").exists()
    if not torch.cuda.is_available():
        with pytest.raises(SystemExit, match="--device cuda: this machine has no cuda device"):
            predict_main(
                [
                    str(exp / "model.onnx"),
                    str(good),
                    "--out",
                    str(tmp_path / "o6"),
                    "--device",
                    "cuda",
                ]
            )
    # a case smaller than the network's deepest stage is padded, not garbage or a crash
    tiny = tmp_path / "tiny.nii.gz"
    nib.save(nib.Nifti1Image(np.random.rand(6, 6, 6).astype(np.float32), np.eye(4)), str(tiny))
    (mask,) = predictor.predict_file(tiny, tmp_path / "out4")
    assert nib.load(str(mask)).shape == (6, 6, 6)


def test_a_folder_expands_to_the_images_and_volumes_in_it(tmp_path):
    from segnet.serving.predict import expand_inputs

    for name in ("a.JPG", "b.png", "c.nii.gz", "d.nii", ".e.png", "notes.txt", "f.nii.gz.bak"):
        (tmp_path / name).write_bytes(b"x")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "g.png").write_bytes(b"x")
    single = tmp_path / "sub" / "g.png"
    found = expand_inputs([str(tmp_path), str(single)])
    assert {p.name for p, _ in found} == {"a.JPG", "b.png", "c.nii.gz", "d.nii", "g.png"}
    assert len(found) == 5 and {str(sub) for _, sub in found} == {"."}


def test_labels_beside_their_images_are_not_predicted(tmp_path):
    """A folder per case of imaging.nii.gz and segmentation.nii.gz (KiTS19), or frames
    beside their _gt labels (ACDC): the files named as labels are no inputs; a folder
    whose every file is named so is taken whole (its names say nothing then)."""
    from segnet.serving.predict import expand_inputs

    for case in ("case_0", "case_1"):
        for name in ("imaging.nii.gz", "segmentation.nii.gz"):
            (tmp_path / "kits" / case).mkdir(parents=True, exist_ok=True)
            (tmp_path / "kits" / case / name).write_bytes(b"x")
    for name in ("p1_frame01.nii.gz", "p1_frame01_gt.nii.gz"):
        (tmp_path / "acdc" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "acdc" / name).write_bytes(b"x")
    (tmp_path / "masks").mkdir()
    (tmp_path / "masks" / "a_mask.png").write_bytes(b"x")
    found = expand_inputs([str(tmp_path / d) for d in ("kits", "acdc", "masks")])
    assert sorted(f"{sub}/{p.name}" for p, sub in found) == [
        "./a_mask.png", "./p1_frame01.nii.gz", "case_0/imaging.nii.gz", "case_1/imaging.nii.gz",
    ]  # fmt: skip


def test_a_folder_of_subfolders_expands_to_theirs_in_the_same_subfolders(tmp_path):
    """A folder per city or patient, as training reads them: masks land in the same
    subfolders of the output, so one name in two subfolders is two outputs."""
    from segnet.serving.predict import expand_inputs

    for name in ("aachen/0.png", "bremen/0.png", "bremen/night/1.png", "__MACOSX/aachen/._0.png"):
        (tmp_path / "test" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "test" / name).write_bytes(b"x")
    found = expand_inputs([str(tmp_path / "test")])
    assert sorted((p.name, sub.as_posix()) for p, sub in found) == [
        ("0.png", "aachen"), ("0.png", "bremen"), ("1.png", "bremen/night")
    ]  # fmt: skip
    with pytest.raises(SystemExit, match="no images .* in it or below it"):
        expand_inputs([str(tmp_path / "test" / "__MACOSX")])
    # an earlier run's masks written inside the folder are no inputs
    (tmp_path / "test" / "pred" / "aachen").mkdir(parents=True)
    (tmp_path / "test" / "pred" / "aachen" / "0.png").write_bytes(b"x")
    again = expand_inputs([str(tmp_path / "test")], out=tmp_path / "test" / "pred")
    assert sorted(p.as_posix() for p, _ in again) == sorted(p.as_posix() for p, _ in found)
    with pytest.raises(SystemExit, match="is the folder of inputs"):
        expand_inputs([str(tmp_path / "test")], out=tmp_path / "test")


def test_predict_a_folder_of_volumes(exported_3d, tmp_path):
    """A folder stands for the volumes in it (as nnU-Net predicts a folder): one mask per
    case, each on its source grid; hidden files and subfolders are not inputs."""
    import shutil

    import nibabel as nib

    root, exp = exported_3d
    cases = tmp_path / "imagesTs"
    shutil.copytree(root / "imagesTr", cases)
    (cases / "._case_000.nii.gz").write_bytes(b"\x00resource fork")  # a copy tool's leftover
    (cases / "notes").mkdir()
    (cases / "notes" / "other.nii.gz").write_bytes((cases / "case_000.nii.gz").read_bytes())
    predict_main([str(exp / "model.onnx"), str(cases), "--out", str(tmp_path / "pred")])
    names = {p.name for p in (cases).glob("case_*.nii.gz")}
    assert len(names) == 6
    assert {p.name for p in (tmp_path / "pred").iterdir()} == names
    for name in names:
        source, mask = nib.load(str(cases / name)), nib.load(str(tmp_path / "pred" / name))
        assert mask.shape == source.shape
        np.testing.assert_allclose(mask.affine, source.affine)
    expected, _ = Predictor(exp / "model.onnx").predict_volume(cases / "case_003.nii.gz")
    written = nib.as_closest_canonical(nib.load(str(tmp_path / "pred" / "case_003.nii.gz")))
    np.testing.assert_array_equal(np.asarray(written.dataobj), expected)
    # a folder with nothing to predict, or one that does not exist: refused by name
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit, match=r"empty: a folder with no images .* or NIfTI volumes"):
        predict_main([str(exp / "model.onnx"), str(tmp_path / "empty"), "--out", str(tmp_path)])
    with pytest.raises(SystemExit, match=r"gone: no such file or folder"):
        predict_main([str(exp / "model.onnx"), str(tmp_path / "gone"), "--out", str(tmp_path)])
    # a truncated volume, or one with NaN voxels, among good ones: named, nothing written
    source = nib.load(str(cases / "case_000.nii.gz"))
    for name, make in (
        ("zz_cut.nii.gz", lambda p: p.write_bytes((cases / "case_000.nii.gz").read_bytes()[:-300])),
        ("zz_nan.nii.gz", lambda p: nib.save(
            nib.Nifti1Image(np.full(source.shape, np.nan, np.float32), source.affine), str(p))),
    ):  # fmt: skip
        bad = tmp_path / f"bad_{name}"
        shutil.copytree(root / "imagesTr", bad)
        make(bad / name)
        with pytest.raises(SystemExit, match=name):
            predict_main([str(exp / "model.onnx"), str(bad), "--out", str(tmp_path / "none")])
        assert not (tmp_path / "none").exists()


def test_a_2d_model_refuses_a_volume(exported, tmp_path):
    from tests.helpers import nifti_dataset

    _, out, _, _ = exported
    root = nifti_dataset(tmp_path / "v", "msd", n=1)
    volume = root / "imagesTr" / "case_000.nii.gz"
    with pytest.raises(ValueError, match=r"this model segments 2D images"):
        Predictor(out / "model.onnx").predict_file(volume, tmp_path)
    # the command line refuses a mixed list before it writes the image's mask
    frame = tmp_path / "frame.png"
    Image.fromarray(np.zeros((45, 61, 3), np.uint8)).save(frame)
    with pytest.raises(SystemExit, match=r"case_000.nii.gz: this model segments 2D images"):
        predict_main(
            [str(out / "model.onnx"), str(frame), str(volume), "--out", str(tmp_path / "m")]
        )
    assert not (tmp_path / "m").exists()


# A volume deployment that has only onnxruntime, numpy and nibabel, following model.json:
# small-input padding, the sliding window and its blending, mirroring.
DEPLOY_3D = (
    WITHOUT_TRAINING_STACK
    + """
import itertools, json
import nibabel as nib
import numpy as np
import onnxruntime as ort

card = json.load(open(sys.argv[1]))
onnx = card["deployment"]["onnx"]
session = ort.InferenceSession(sys.argv[3], providers=["CPUExecutionProvider"])
image = nib.as_closest_canonical(nib.load(sys.argv[2]))
x = image.get_fdata(dtype=np.float32)[None]
x = (x - x.mean()) / x.std()
x = x[None].astype(np.float32)
source_shape = x.shape[2:]


def resize(a, size):  # linear along each axis in turn (= trilinear), half-voxel centres
    for axis, out in zip((2, 3, 4), size):
        n = a.shape[axis]
        src = np.maximum((np.arange(out) + 0.5) * n / out - 0.5, 0)
        low = np.floor(src).astype(int)
        high = np.minimum(low + 1, n - 1)
        w = (src - low).reshape([out if i == axis else 1 for i in range(a.ndim)])
        a = np.take(a, low, axis) * (1 - w) + np.take(a, high, axis) * w
    return a


resample = [s for s in card["deployment"]["preprocess"] if s["step"] == "resample"]
if resample:
    sizes = np.sqrt((image.affine[:3, :3] ** 2).sum(0))
    target = resample[0]["spacing_mm"]
    grid = [max(1, round(n * s / t)) for n, s, t in zip(source_shape, sizes, target)]
    x = resize(x, grid).astype(np.float32)


def net(a):
    return session.run([onnx["output_name"]], {onnx["input_name"]: a.astype(np.float32)})[0]


def pad_to(a, size, value):
    short = [max(s - n, 0) for s, n in zip(size, a.shape[2:])]
    pads = [(0, 0), (0, 0)] + [(d // 2, d - d // 2) for d in short]
    return np.pad(a, pads, constant_values=value), [p[0] for p in pads[2:]]


def crop(a, before, shape):
    return a[(..., *[slice(b, b + n) for b, n in zip(before, shape)])]


def windowed(a):
    w = onnx["sliding_window"]
    roi, shape = w["roi_size"], a.shape[2:]
    if all(n <= r for n, r in zip(shape, roi)):
        return net(a)
    a, before = pad_to(a, roi, w["cval"])
    starts = []
    for n, r in zip(a.shape[2:], roi):
        s = r if n == r else max(1, int(r * (1 - w["overlap"])))
        axis = []
        for i in itertools.count():
            axis.append(min(i * s, n - r))
            if i * s + r >= n:
                break
        starts.append(axis)
    g = [np.exp(-((np.arange(r) - (r - 1) / 2) ** 2) / (2 * (w["sigma_scale"] * r) ** 2)) for r in roi]
    weight = g[0][:, None, None] * g[1][None, :, None] * g[2][None, None, :]
    weight = np.maximum(weight, max(weight.min(), 1e-3))
    total, norm = None, np.zeros(a.shape[2:])
    for corner in itertools.product(*starts):
        box = tuple(slice(c, c + r) for c, r in zip(corner, roi))
        out = net(a[(..., *box)])
        if total is None:
            total = np.zeros(out.shape[:2] + a.shape[2:])
        total[(..., *box)] += out * weight
        norm[box] += weight
    return crop(total / norm, before, shape)


def run(a):
    small = onnx["small_inputs"]
    shape = a.shape[2:]
    padded, before = pad_to(a, [small["min_size"]] * 3, 0.0)
    return crop(windowed(padded), before, shape)


probs, mirror = 0, onnx["mirroring"]["axes"]
runs = [c for k in range(len(mirror) + 1) for c in itertools.combinations(mirror, k)]
for axes in runs:
    out = np.flip(run(np.flip(x, axes)), axes)
    e = np.exp(out - out.max(1, keepdims=True))
    probs = probs + e / e.sum(1, keepdims=True)
probs = probs / len(runs)
if resample:  # the log-probabilities back to the source grid
    probs = np.exp(resize(np.log(np.maximum(probs, 1e-8)), source_shape))
np.save(sys.argv[4], probs[0])
"""
)


def card_cleanup(label: np.ndarray, step: dict | None, class_names: list[str]) -> np.ndarray:
    """The card's label_map_cleanup, as its text says, with SciPy alone."""
    from scipy import ndimage

    if step is None:
        return label
    full = ndimage.generate_binary_structure(label.ndim, label.ndim)

    def keep_largest(label, where):
        parts, n = ndimage.label(where, structure=full)
        if n > 1:
            largest = 1 + np.bincount(parts.ravel())[1:].argmax()
            label = np.where(where & (parts != largest), 0, label)
        return label

    if step["foreground"]:
        label = keep_largest(label, label > 0)
    for name in step["classes"]:
        label = keep_largest(label, label == class_names.index(name))
    return label


def test_model_card_is_enough_to_deploy_a_volume_model_with_numpy(exported_3d, tmp_path):
    """Without torch or MONAI, the card's steps give what segnet.serving.predict gives: on a case
    that takes 8 overlapping windows and on one with an axis the network is too deep for."""
    import nibabel as nib
    import torch

    from segnet.data import nifti

    root, exp = exported_3d
    card = json.loads((exp / "model.json").read_text())["deployment"]["onnx"]
    assert card["sliding_window"]["roi_size"] == [16, 16, 16]
    assert card["sliding_window"]["sigma_scale"] == 0.125
    assert "exp(-d**2" in card["sliding_window_steps"]["blend"]
    assert card["small_inputs"]["min_size"] > 3
    thin = tmp_path / "thin.nii.gz"
    rng = np.random.default_rng(0)
    nib.save(nib.Nifti1Image(rng.random((3, 20, 18), dtype=np.float32), np.eye(4)), str(thin))
    predictor = Predictor(exp / "model.onnx")
    for case in (root / "imagesTr" / "case_000.nii.gz", thin):
        # class probabilities, mirrored runs averaged
        deployed = deploy(DEPLOY_3D, exp, case, tmp_path)
        volume = nifti.load_volume(nifti.Case(case.name, case, None))
        x = torch.from_numpy(nifti.normalize_intensity(volume.image, None))[None]
        with torch.no_grad():
            reference = predictor.model.logits(x).exp()[0].numpy()
        assert deployed.shape == reference.shape
        np.testing.assert_allclose(deployed, reference, atol=1e-4)
        mask, _ = predictor.predict_volume(case)
        whole = json.loads((exp / "model.json").read_text())
        cleanup = whole["deployment"]["label_map_cleanup"]
        label = card_cleanup(deployed.argmax(0), cleanup, whole["output"]["classes"])
        assert (label == mask).all(), case.name


def test_a_card_of_a_newer_version_is_refused_not_half_followed(exported_3d, tmp_path):
    import shutil

    _, exp = exported_3d
    newer = shutil.copytree(exp, tmp_path / "newer")
    card = json.loads((newer / "model.json").read_text())
    from segnet.serving.model_card import CARD_VERSION

    # version 5 is written only where images are read downscaled: a reader of 4 reads it
    assert card["card_version"] == 4 and CARD_VERSION == 5
    card["card_version"] = CARD_VERSION + 1
    (newer / "model.json").write_text(json.dumps(card))
    with pytest.raises(ValueError, match=r"model card version 6, written by a newer segnet"):
        Predictor(newer / "model.onnx")


@pytest.mark.slow  # trains and exports a model of its own; the unresampled card's test stays
def test_model_card_is_enough_to_deploy_a_resampled_volume_model_with_numpy(tmp_path):
    """A model trained at data.spacing: the card's resample and resize_logits steps, in
    numpy, give what segnet.serving.predict gives, on a case in a non-RAS orientation whose grid
    is refined along one axis and coarsened along the others."""
    from segnet.data import nifti
    from segnet.serving.export import export_checkpoint
    from tests.helpers import ODD_AFFINE, nifti_dataset

    root = nifti_dataset(tmp_path / "d", "msd", n=6, affine=ODD_AFFINE)
    overrides = ["experiment=hippocampus_unet3d", f"data.root={root}", "data.spacing=[1.5,1,1.5]"]
    overrides += ["data.patch_size=[16,16,16]", "data.num_workers=0", "model.net.features=[4,8,8]"]
    overrides += [
        "trainer.max_epochs=1",
        "trainer.check_val_every_n_epoch=1",
        "trainer.accelerator=cpu",
    ]
    train(
        compose(
            "train",
            [*overrides, "data.val_fraction=0.2", "data.test_fraction=0.2"],
            tmp_path / "run",
        )
    )
    exp = tmp_path / "exp"
    export_checkpoint(tmp_path / "run" / "checkpoints" / "best.ckpt", exp, ("onnx",))
    card = json.loads((exp / "model.json").read_text())["deployment"]
    assert [s["step"] for s in card["preprocess"]][-1] == "resample"
    assert card["postprocess"][0]["step"] == "resize_logits"
    case = root / "imagesTr" / "case_000.nii.gz"
    deployed = deploy(DEPLOY_3D, exp, case, tmp_path)
    predictor = Predictor(exp / "model.onnx")
    volume = nifti.load_volume(nifti.Case(case.name, case, None))
    source_shape = volume.image.shape[1:]
    volume.image = nifti.normalize_intensity(volume.image, None)
    resampled = nifti.resample_to_spacing(volume, (1.5, 1.0, 1.5))
    assert resampled.image.shape[1:] == (28, 15, 18)  # from RAS (17, 19, 23) at (2.5, 0.8, 1.2)
    with torch.no_grad():
        x = torch.from_numpy(resampled.image)[None]
        reference = predictor.model.logits(x, source_shape).exp()[0].numpy()
    assert deployed.shape == reference.shape == (3, *source_shape)
    np.testing.assert_allclose(deployed, reference, atol=1e-4)
    mask, _ = predictor.predict_volume(case)
    whole = json.loads((exp / "model.json").read_text())
    cleanup = whole["deployment"]["label_map_cleanup"]
    assert (card_cleanup(deployed.argmax(0), cleanup, whole["output"]["classes"]) == mask).all()


def test_a_model_file_with_a_comma_in_its_name_is_one_model(tmp_path):
    named = tmp_path / "fold0,fold1.onnx"
    named.write_bytes(b"")
    assert model_paths(str(named)) == [str(named)]
    a, b = tmp_path / "a.onnx", tmp_path / "b.onnx"
    assert model_paths(f"{a},{b}") == [str(a), str(b)]  # no file of that whole name
