"""Your own images from the command line, end to end: train with experiment=images_quick
on a generated folder of 0/255 masks, evaluate a CSV of new images at native size with
saved predictions, export, and predict with the exported model."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from tests.conftest import REPO, compose, run_cli, shared_dataset
from tests.data.test_images import make_folder

QUICK = [
    "experiment=images_quick",
    "data.max_patch=32",
    "data.steps_per_epoch=4",
    "data.batch_size=4",
    "data.num_workers=0",
    "model.net.features=[4,8,8,8,8]",
    "trainer.max_epochs=2",
    "trainer.check_val_every_n_epoch=1",
    "trainer.accelerator=cpu",
]
CLASSES = ["'data.class_names=[background,disc]'", "'data.label_values=[0,255]'"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    from segnet.commands.train import train

    tmp = tmp_path_factory.mktemp("own")
    root = make_folder(tmp / "data", n=10, sizes=[(40, 48), (52, 44)])
    settings = [s.strip("'") for s in CLASSES]
    run = tmp / "run"
    metrics, _ = train(compose("train", [*QUICK, f"data.root={root}", *settings], run))
    return root, run, metrics


def test_training_scores_per_class_and_image_and_records_the_split(trained):
    _, run, metrics = trained
    for key in ("test/dice/disc", "test/iou/disc", "test/precision/disc", "test/recall/disc"):
        assert 0 <= metrics[key] <= 1, key
    cases = (run / "per_case.csv").read_text().splitlines()
    columns = [
        f"{m}_{c}" for m in ("dice", "iou", "precision", "recall") for c in ("background", "disc")
    ]
    assert cases[0] == ",".join(["case", *columns]) and len(cases) == 1 + 2
    splits = json.loads((run / "splits.json").read_text())
    assert sum(len(v) for v in splits.values()) == 10


def test_the_network_depth_is_planned_from_the_patch(trained):
    """A 32x32 patch through the recipe's four poolings would be 2x2 at the bottom: the
    plan keeps three (4x4), and the checkpoint records the network as planned."""
    import torch

    _, run, _ = trained
    ckpt = torch.load(run / "checkpoints" / "best.ckpt", weights_only=True)
    assert ckpt["hyper_parameters"]["net"]["features"] == [4, 8, 8, 8]
    assert ckpt["hyper_parameters"]["data"]["patch_size"] == [32, 32]


def test_planned_depth_keeps_what_fits_and_leaves_other_networks():
    from segnet.data.info import DataInfo
    from segnet.runs.building import planned_net
    from tests.helpers import data_info

    def info(patch):
        return DataInfo.from_dict({**data_info(), "patch_size": patch})

    unet = {"name": "unet", "features": [16, 32, 64, 128, 256], "convs": [1, 1, 1, 1, 2]}
    for patch, levels in (([128, 128], 5), ([64, 96], 5), ([48, 64], 4), ([32, 32], 4)):
        planned = planned_net(unet, info(patch))
        assert len(planned["features"]) == len(planned["convs"]) == levels, patch
    assert planned_net(unet, info(None)) is unet  # no training patch (CamVid)
    segnet_basic = {"name": "segnet_basic", "features": [24, 24, 24, 24]}
    assert planned_net(segnet_basic, info([32, 32])) is segnet_basic


def test_evaluate_a_csv_of_new_images_at_native_size_and_save_predictions(trained, tmp_path):
    root, run, _ = trained
    new = make_folder(tmp_path / "new", n=3, sizes=[(70, 90)])
    (new / "test.csv").write_text(
        "image,label\n" + "".join(f"images/{i}.png,labels/{i}.png\n" for i in range(3))
    )
    from segnet.commands.evaluate import evaluate

    out = tmp_path / "ev"
    # in this process: the command line's own path is the README's, tested in test_cli
    settings = [f"ckpt_path={run / 'checkpoints' / 'best.ckpt'}", f"data.csv={new / 'test.csv'}",
                "data.split=all", "save_predictions=true", "trainer.accelerator=cpu"]  # fmt: skip
    evaluate(compose("evaluate", settings, out))
    saved = sorted(p.name for p in (out / "predictions").iterdir())
    assert saved == [f"{i}{kind}.png" for i in range(3) for kind in ("", "_color")]
    mask = np.asarray(Image.open(out / "predictions" / "0.png"))
    assert mask.shape == (70, 90) and set(np.unique(mask)) <= {0, 1}
    # the coloured copy shows each class in its colour (no data.palette: the panels'), as
    # predict writes it
    from segnet.data.palette import label_palette

    palette = label_palette(2)
    coloured = np.asarray(Image.open(out / "predictions" / "0_color.png"))
    assert coloured.shape == (70, 90, 3)
    assert (coloured == np.asarray(palette, np.uint8)[mask]).all()
    scored = json.loads((out / "metrics.json").read_text())
    # normalised with the training set's statistics, which the checkpoint keeps
    assert scored["split"] == "all" and "test/dice/disc" in scored["metrics"]


def test_probabilities_are_saved_beside_the_masks_they_give(trained, tmp_path):
    """evaluate save_probabilities=true and predict --save-probabilities: per image a
    compressed NumPy file of (classes, H, W) softmax probabilities at its own size, which
    sum to one and whose arg-max is the saved mask (post-processing off)."""
    from segnet.commands.evaluate import evaluate
    from segnet.serving.predict import Predictor

    root, run, _ = trained
    best = run / "checkpoints" / "best.ckpt"
    out = tmp_path / "ev"
    evaluate(compose("evaluate", [f"ckpt_path={best}", "save_probabilities=true",
                                  "postprocess=false", "trainer.accelerator=cpu"], out))  # fmt: skip
    saved = sorted((out / "predictions").glob("*_probabilities.npz"))
    assert len(saved) == 2  # the test split's two images, each beside its mask
    for path in saved:
        with np.load(path) as f:
            probs, classes = f["probabilities"], f["classes"].tolist()
        mask = np.asarray(
            Image.open(path.with_name(path.name.replace("_probabilities.npz", ".png")))
        )
        assert classes == ["background", "disc"] and probs.dtype == np.float32
        assert probs.shape == (2, *mask.shape)
        np.testing.assert_allclose(probs.sum(0), 1.0, atol=1e-5)
        assert np.array_equal(probs.argmax(0), mask)
    predictor = Predictor(best, postprocess=False)
    written = predictor.predict_file(
        root / "images" / "1.png", tmp_path / "masks", probabilities=True
    )
    assert [p.name for p in written] == ["1.png", "1_color.png", "1_probabilities.npz"]
    with np.load(written[-1]) as f:
        assert np.array_equal(f["probabilities"].argmax(0), np.asarray(Image.open(written[0])))
    with pytest.raises(FileExistsError, match="never overwritten"):
        predictor.predict_file(root / "images" / "1.png", tmp_path / "masks", probabilities=True)


@pytest.mark.slow
def test_export_and_predict_at_native_size(trained, tmp_path):
    root, run, _ = trained
    out = tmp_path / "export"
    run_cli(
        ["-m", "segnet.export", f"ckpt_path={run / 'checkpoints' / 'best.ckpt'}",
         "formats=[onnx]", f"hydra.run.dir={out}"],
        cwd=REPO,
    )  # fmt: skip
    card = json.loads((out / "model.json").read_text())
    assert card["input"]["normalization"]["kind"] == "image_mean_std"
    run_cli(  # key=value, as every other command
        ["-m", "segnet.predict", f"model={out / 'model.onnx'}",
         f"inputs=[{root / 'images' / '1.png'}]", f"out={tmp_path / 'masks'}"],
        cwd=REPO,
    )  # fmt: skip
    mask = np.asarray(Image.open(tmp_path / "masks" / "1.png"))
    assert mask.shape == (52, 44)


@pytest.mark.slow
def test_membrane_trains_evaluates_exports_and_predicts_from_the_command_line(tmp_path):
    """The shared membrane folder as a user brings it: two folders, 0/255 masks where the
    dark class is the one of interest."""
    root = shared_dataset("membrane")
    run = tmp_path / "run"
    run_cli(
        ["train.py", "experiment=images_quick", f"data.root={root}",
         "data.class_names=[cell,membrane]", "data.label_values=[255,0]",
         "trainer.max_epochs=2", "data.steps_per_epoch=8", "trainer.check_val_every_n_epoch=1",
         f"hydra.run.dir={run}"],
        cwd=REPO,
    )  # fmt: skip
    log = (run / "train.log").read_text()
    assert "training patch 128x128" in log and "-> membrane" in log  # the plan, the values
    assert "network plan: unet, 4 poolings" in log and "is 8x8 at the bottom" in log
    assert "batch plan: 8 inputs of 128x128" in log  # the recipe's batch fits
    metrics = json.loads((run / "metrics.json").read_text())["metrics"]
    assert metrics["test/dice/membrane"] > 0.3  # two short epochs: learning, not converged
    out = tmp_path / "export"
    run_cli(
        ["-m", "segnet.export", f"ckpt_path={run / 'checkpoints' / 'best.ckpt'}",
         "formats=[safetensors]", f"hydra.run.dir={out}"],
        cwd=REPO,
    )  # fmt: skip
    run_cli(
        ["-m", "segnet.predict", str(out / "model.safetensors"), str(root / "images" / "0.png"),
         "--out", str(tmp_path / "masks")],
        cwd=REPO,
    )  # fmt: skip
    assert np.asarray(Image.open(tmp_path / "masks" / "0.png")).shape == (512, 512)


@pytest.mark.parametrize("named_by", ["setting", "classes.txt"])
def test_black_and_white_masks_of_two_names_alone_evaluate_as_trained(tmp_path, named_by):
    """Two names alone (a setting, or a classes.txt beside the masks) with 0/255 masks:
    the run records the values it read them by, so that evaluate.py, which is given
    neither, reads the masks as training did and scores the same."""
    from segnet.commands.evaluate import evaluate
    from segnet.commands.train import train

    root = make_folder(tmp_path / "data", n=10)
    names = ["data.class_names=[sky,disc]"]
    if named_by == "classes.txt":
        (root / "labels" / "classes.txt").write_text("sky\ndisc\n")
        names = []
    metrics, _ = train(compose("train", [*QUICK, f"data.root={root}", *names], tmp_path / "run"))
    assert "test/dice/disc" in metrics
    best = tmp_path / "run" / "checkpoints" / "best.ckpt"
    ev, _ = evaluate(compose("evaluate", [f"ckpt_path={best}", "trainer.accelerator=cpu"],
                             tmp_path / "ev"))  # fmt: skip
    assert ev["test/dice/disc"] == pytest.approx(metrics["test/dice/disc"], abs=1e-6)


@pytest.fixture(scope="module")
def downscaled(tmp_path_factory):
    """A run on images of about 47 of its 32x32 patches: read 2.42 times smaller."""
    from segnet.commands.train import train

    tmp = tmp_path_factory.mktemp("large")
    root = make_folder(tmp / "data", n=10, size=(200, 240))
    settings = [*QUICK, f"data.root={root}", *(s.strip("'") for s in CLASSES)]
    metrics, _ = train(compose("train", settings, tmp / "run"))
    return root, tmp / "run", metrics


def test_large_images_train_downscaled_and_are_scored_and_predicted_at_native_size(
    downscaled, tmp_path
):
    """data.downscale=auto on images over 8 patches: trained smaller, the test split and
    evaluate.py scored on the masks as they are, predictions at each image's own size,
    the same from the checkpoint as from evaluation."""
    import torch

    from segnet.commands.evaluate import evaluate
    from segnet.serving.predict import Predictor

    root, run, metrics = downscaled
    best = run / "checkpoints" / "best.ckpt"
    ckpt = torch.load(best, map_location="cpu", weights_only=False)
    assert ckpt["hyper_parameters"]["data"]["normalization"]["downscale"] == pytest.approx(2.42)
    out = tmp_path / "ev"
    evaluate(compose("evaluate", [f"ckpt_path={best}", "save_predictions=true",
                                  "trainer.accelerator=cpu"], out))  # fmt: skip
    scored = json.loads((out / "metrics.json").read_text())["metrics"]
    assert scored["test/dice/disc"] == pytest.approx(metrics["test/dice/disc"], abs=1e-6)
    saved = sorted((out / "predictions").glob("*_color.png"))
    assert len(saved) == 2 and all(Image.open(p).size == (240, 200) for p in saved)
    name = saved[0].name.removesuffix("_color.png")
    written = Predictor(best).predict_file(root / "images" / f"{name}.png", tmp_path / "masks")
    predicted = np.asarray(Image.open(written[0]))
    assert predicted.shape == (200, 240)
    assert np.array_equal(predicted, np.asarray(Image.open(out / "predictions" / f"{name}.png")))
    # given to evaluate.py, another scale is refused: the network reads images as trained
    with pytest.raises(ValueError, match=r"data.downscale=1: .* \(.*downscale=2.42\)"):
        evaluate(compose("evaluate", [f"ckpt_path={best}", "+data.downscale=1"], tmp_path / "e2"))


@pytest.mark.slow
def test_an_exported_downscaled_model_predicts_as_its_checkpoint(downscaled, tmp_path):
    """The model card's resize step before the network and resize_logits after it; the
    ONNX model's masks are its checkpoint's, at each image's own size."""
    from segnet.serving.export import export_checkpoint
    from segnet.serving.predict import Predictor

    root, run, _ = downscaled
    best = run / "checkpoints" / "best.ckpt"
    export_checkpoint(best, tmp_path / "exp", ("onnx",))
    card = json.loads((tmp_path / "exp" / "model.json").read_text())
    steps = [s["step"] for s in card["deployment"]["preprocess"]]
    assert card["card_version"] == 5 and steps.index("downscale") < steps.index("normalize")
    assert card["deployment"]["preprocess"][steps.index("downscale")]["factor"] == 2.42
    assert card["deployment"]["postprocess"][0]["step"] == "resize_logits"
    image = root / "images" / "3.png"
    onnx = Predictor(tmp_path / "exp" / "model.onnx").predict_file(image, tmp_path / "a")[0]
    ckpt = Predictor(best).predict_file(image, tmp_path / "b")[0]
    a, b = np.asarray(Image.open(onnx)), np.asarray(Image.open(ckpt))
    assert a.shape == (200, 240) and (a == b).mean() > 0.999
