"""python -m segnet.export, evaluate.py on exported files, segnet.predict."""

import json

import numpy as np
import pytest
from PIL import Image

from segnet.pipeline import evaluate, train
from segnet.predict import Predictor
from segnet.predict import main as predict_main
from tests.conftest import REPO, TINY_CAMVID, compose, run_cli

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
    return ckpt, out, metrics, proc.stdout


def test_export_writes_every_format_and_a_model_card(exported):
    ckpt, out, _, stdout = exported
    for name in ("model.safetensors", "model.onnx", "model.pt2", "model.json"):
        assert (out / name).is_file(), name
    for fmt in ("safetensors", "onnx", "pt2"):
        assert f"{fmt}" in stdout and "largest difference on reload" in stdout
    card = json.loads((out / "model.json").read_text())
    assert card["output"]["classes"][3] == "Road"
    assert card["output"]["palette"][3] == [128, 64, 128]
    assert card["input"]["normalization"]["mean"] == [0.485, 0.456, 0.406]
    assert card["input"]["trained_input_size"] == [24, 32]
    assert card["net"]["name"] == "segnet_basic"
    assert "val/miou" in card["metrics"]
    assert max(card["verified_max_abs_diff"].values()) < 1e-3


def test_export_never_overwrites(exported):
    from segnet.export import export_checkpoint

    ckpt, out, _, _ = exported
    with pytest.raises(FileExistsError, match="never overwritten"):
        export_checkpoint(ckpt, out, ("onnx",))


@pytest.mark.parametrize("name", ["model.onnx", "model.safetensors", "model.pt2"])
def test_evaluate_an_exported_model_gives_the_checkpoint_metrics(exported, name, tmp_path):
    ckpt, out, metrics, _ = exported
    cfg = compose("evaluate", [f"ckpt_path={out / name}", "trainer.accelerator=cpu"], tmp_path)
    ev, _ = evaluate(cfg)
    for key in ("test/miou", "test/global_acc", "test/class_acc"):
        assert ev[key] == pytest.approx(metrics[key], abs=1e-3), key


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
    # the same mask from the checkpoint through evaluate.py's saved predictions
    cfg = compose(
        "evaluate",
        [f"ckpt_path={ckpt}", "save_predictions=true", "trainer.accelerator=cpu"],
        tmp_path / "ev",
    )
    evaluate(cfg)
    reference = np.asarray(Image.open(tmp_path / "ev" / "predictions" / "test_000.png"))
    assert (mask == reference).mean() > 0.999
    # API on an array, from safetensors
    api = Predictor(out / "model.safetensors").predict_image(np.asarray(Image.open(image)))
    assert (api == reference).mean() > 0.999


def test_predict_volume_from_exported_3d_model(tmp_path):
    """Export a volumetric checkpoint and predict a NIfTI file in its source space."""
    import nibabel as nib

    from segnet.export import export_checkpoint
    from tests.helpers import ODD_AFFINE, nifti_dataset

    root = nifti_dataset(tmp_path / "d", "msd", n=6, affine=ODD_AFFINE)
    cfg = compose(
        "train",
        [
            "experiment=hippocampus_unet3d",
            f"data.root={root}",
            "data.patch_size=[16,16,16]",
            "data.num_workers=0",
            "model.net.features=[4,8]",
            "trainer.max_epochs=1",
            "trainer.check_val_every_n_epoch=1",
            "trainer.accelerator=cpu",
            "data.val_fraction=0.2",
            "data.test_fraction=0.2",
        ],
        tmp_path / "run",
    )
    train(cfg)
    export_checkpoint(tmp_path / "run" / "checkpoints" / "best.ckpt", tmp_path / "exp", ("onnx",))
    written = Predictor(tmp_path / "exp" / "model.onnx").predict_file(
        root / "imagesTr" / "case_000.nii.gz", tmp_path / "out"
    )
    saved, source = nib.load(str(written[0])), nib.load(str(root / "imagesTr" / "case_000.nii.gz"))
    assert saved.shape == source.shape
    np.testing.assert_allclose(saved.affine, source.affine)
    # the wrong kind of input is refused, naming the file and what the model takes
    predictor = Predictor(tmp_path / "exp" / "model.onnx")
    png = tmp_path / "frame.png"
    Image.fromarray(np.zeros((40, 40, 3), np.uint8)).save(png)
    with pytest.raises(ValueError, match=r"frame\.png: this model segments NIfTI volumes"):
        predictor.predict_file(png, tmp_path / "out2")
    two = nifti_dataset(tmp_path / "two", "msd", n=1, channels=2)
    with pytest.raises(
        ValueError, match=r"case_000\.nii\.gz has 2 channel\(s\); the model takes 1"
    ):
        predictor.predict_file(two / "imagesTr" / "case_000.nii.gz", tmp_path / "out3")
    # a case smaller than the network's deepest stage is padded, not garbage or a crash
    tiny = tmp_path / "tiny.nii.gz"
    nib.save(nib.Nifti1Image(np.random.rand(6, 6, 6).astype(np.float32), np.eye(4)), str(tiny))
    (mask,) = predictor.predict_file(tiny, tmp_path / "out4")
    assert nib.load(str(mask)).shape == (6, 6, 6)


def test_a_2d_model_refuses_a_volume(exported, tmp_path):
    from tests.helpers import nifti_dataset

    _, out, _, _ = exported
    root = nifti_dataset(tmp_path / "v", "msd", n=1)
    with pytest.raises(ValueError, match=r"this model segments 2D images"):
        Predictor(out / "model.onnx").predict_file(root / "imagesTr" / "case_000.nii.gz", tmp_path)
