"""Region networks end to end, 2D and 3D: trained from the command line's settings
(data.regions), scored per region and per label, their probabilities saved, exported and
predicted, with every path giving the same label maps."""

from __future__ import annotations

import csv
import json

import nibabel as nib
import numpy as np
import pytest
import torch
from PIL import Image

from segnet.commands.evaluate import evaluate
from segnet.commands.train import train
from segnet.data.regions import region_targets, to_label_map
from tests.commands.test_train_volumes import FAST
from tests.conftest import compose
from tests.helpers import ODD_AFFINE, nifti_dataset

VOLUMES = ["experiment=hippocampus_unet3d", *FAST, "data.regions={whole:[1,2],two:[2]}"]


@pytest.fixture(scope="module")
def volume_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("regions3d")
    root = nifti_dataset(tmp / "data", "msd", n=10, shape=(19, 23, 17), affine=ODD_AFFINE)
    metrics, _ = train(compose("train", [f"data.root={root}", *VOLUMES], tmp / "run"))
    return root, tmp / "run", metrics


def test_a_region_run_scores_each_region_and_each_label(volume_run):
    _, run, metrics = volume_run
    saved = json.loads((run / "metrics.json").read_text())
    assert saved["regions"]["definition"] == {"whole": [1, 2], "two": [2]}
    for name in ("whole", "two"):
        entry = saved["regions"]["mean"][name]
        assert {"dice", "iou", "hd95", "nsd"} <= set(entry), entry
        assert metrics[f"test/region_dice/{name}"] == pytest.approx(entry["dice"], abs=1e-6)
    # the label map the regions turn back into, scored as a softmax run's would be
    assert {"test/dice/one", "test/dice/two", "val/region_dice", "test/region_dice"} <= set(metrics)
    rows = list(csv.DictReader((run / "per_case.csv").open()))
    assert {"dice_one", "region_dice_whole", "region_hd95_two", "region_nsd_whole"} <= set(rows[0])
    best = torch.load(run / "checkpoints" / "best.ckpt", map_location="cpu", weights_only=False)
    assert best["hyper_parameters"]["data"]["regions"] == {"whole": [1, 2], "two": [2]}


def test_region_probabilities_threshold_to_the_saved_label_maps_and_predict_agrees(
    volume_run, tmp_path
):
    from segnet.serving.export import export_checkpoint
    from segnet.serving.predict import Predictor

    root, run, _ = volume_run
    best = run / "checkpoints" / "best.ckpt"
    out = tmp_path / "ev"
    evaluate(compose("evaluate", [f"ckpt_path={best}", "save_probabilities=true", "postprocess=false",
                                  "trainer.accelerator=cpu", "data.num_workers=0"], out))  # fmt: skip
    saved = sorted((out / "predictions").glob("*_probabilities.nii.gz"))
    assert len(saved) == 2
    for path in saved:
        probs = np.asarray(nib.load(str(path)).dataobj)  # (X, Y, Z, regions): sigmoids
        label = np.asarray(
            nib.load(str(path.with_name(path.name.replace("_probabilities", "")))).dataobj
        )
        assert probs.shape == (*label.shape, 2) and probs.min() >= 0 and probs.max() <= 1
        inside = torch.from_numpy(probs > 0.5).permute(3, 0, 1, 2)[None]
        assert np.array_equal(to_label_map(inside, [[1, 2], [2]], None, 3)[0].numpy(), label)
    case = root / "imagesTr" / "case_000.nii.gz"
    from_ckpt = Predictor(best, postprocess=False).predict_volume(case)[0]
    export_checkpoint(best, tmp_path / "export", formats=("onnx",))
    card = json.loads((tmp_path / "export" / "model.json").read_text())
    assert card["output"]["regions"] == {"whole": [1, 2], "two": [2]}
    assert "sigmoid per region" in card["deployment"]["onnx"]["mirroring"]["combine"]
    assert any(s["step"] == "regions_to_labels" for s in card["deployment"]["postprocess"])
    exported = Predictor(tmp_path / "export" / "model.onnx", postprocess=False).predict_volume(
        case
    )[0]
    assert (exported == from_ckpt).mean() > 0.999  # ONNX arithmetic, at region borders


def test_evaluate_refuses_other_regions_than_the_network_was_trained_for(volume_run, tmp_path):
    _, run, _ = volume_run
    cfg = compose("evaluate", [f"ckpt_path={run / 'checkpoints' / 'best.ckpt'}",
                               "+data.regions={whole:[1,2]}", "trainer.accelerator=cpu"], tmp_path)  # fmt: skip
    with pytest.raises(
        ValueError, match=r"data.regions=.*outputs are the regions it was trained with"
    ):
        evaluate(cfg)


def two_nested_discs(root, n: int = 10):
    """Grey images of a disc with a brighter core; masks 0 (outside), 128 (ring), 255 (core)."""
    (root / "images").mkdir(parents=True)
    (root / "labels").mkdir()
    yy, xx = np.mgrid[:40, :48]
    for i in range(n):
        rng = np.random.default_rng(i)
        cy, cx = rng.integers(14, 26), rng.integers(14, 34)
        d = (yy - cy) ** 2 + (xx - cx) ** 2
        mask = np.where(d < 49, 255, np.where(d < 144, 128, 0)).astype(np.uint8)
        image = mask * 0.6 + 40 + rng.normal(0, 8, mask.shape)
        Image.fromarray(image.clip(0, 255).astype(np.uint8)).save(root / "images" / f"{i}.png")
        Image.fromarray(mask).save(root / "labels" / f"{i}.png")
    return root


def test_a_2d_region_run_trains_evaluates_exports_and_predicts(tmp_path):
    from segnet.serving.export import export_checkpoint
    from segnet.serving.predict import Predictor

    root = two_nested_discs(tmp_path / "data")
    settings = [
        "experiment=images_quick", f"data.root={root}", "data.class_names=[outside,ring,core]",
        "data.label_values=[0,128,255]", "data.regions={disc:[1,2],core:[2]}",
        "data.max_patch=32", "data.steps_per_epoch=4", "data.batch_size=4", "data.num_workers=0",
        "model.net.features=[4,8,8,8,8]", "trainer.max_epochs=2",
        "trainer.check_val_every_n_epoch=1", "trainer.accelerator=cpu",
    ]  # fmt: skip
    metrics, _ = train(compose("train", settings, tmp_path / "run"))
    assert {"test/region_dice/disc", "test/region_iou/core", "test/dice/ring"} <= set(metrics)
    best = tmp_path / "run" / "checkpoints" / "best.ckpt"
    ev, _ = evaluate(compose("evaluate", [f"ckpt_path={best}", "save_predictions=true",
                                          "trainer.accelerator=cpu"], tmp_path / "ev"))  # fmt: skip
    assert ev["test/region_dice/disc"] == pytest.approx(metrics["test/region_dice/disc"], abs=1e-6)
    # the weights alone (ONNX exports of regions: the tests above and below)
    export_checkpoint(best, tmp_path / "export", formats=("safetensors",))
    image = root / "images" / "3.png"
    written = Predictor(tmp_path / "export").predict_file(
        image, tmp_path / "masks", probabilities=True
    )
    mask = np.asarray(Image.open(written[0]))
    assert mask.shape == (40, 48) and set(np.unique(mask)) <= {0, 1, 2}
    with np.load(written[-1]) as f:
        assert f["classes"].tolist() == ["disc", "core"] and f["probabilities"].shape == (2, 40, 48)
    direct = Predictor(best).predict_file(image, tmp_path / "masks_ckpt")
    assert (np.asarray(Image.open(direct[0])) == mask).mean() > 0.99
    # the regions of a label map are what the loss trains on
    assert region_targets(torch.tensor([[0, 1, 2]]), [[1, 2], [2]]).int().tolist() == [
        [[0, 1, 1], [0, 0, 1]]
    ]


def test_one_mask_per_class_trains_evaluates_exports_and_predicts(tmp_path):
    """Overlapping classes as users keep them, a folder of black-and-white masks per class:
    trained as one region each from the command line with no class settings, scored per
    class, evaluated from the checkpoint alone, exported and predicted (label maps in bits,
    probabilities per class)."""
    from segnet.serving.export import export_checkpoint
    from segnet.serving.predict import Predictor
    from tests.data.test_class_masks import class_folders

    root = class_folders(tmp_path / "data", n=10)
    settings = [
        "experiment=images_quick", f"data.root={root}", "data.label_dir=masks",
        "data.max_patch=32", "data.steps_per_epoch=4", "data.batch_size=4", "data.num_workers=0",
        "model.net.features=[4,8,8,8,8]", "trainer.max_epochs=2",
        "trainer.check_val_every_n_epoch=1", "trainer.accelerator=cpu",
    ]  # fmt: skip
    metrics, _ = train(compose("train", settings, tmp_path / "run"))
    assert {"test/region_dice/artery", "test/region_dice/vessel", "val/region_dice_best"} <= set(
        metrics
    )
    saved = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert saved["regions"]["definition"] == {"artery": [1, 3], "vessel": [2, 3]}
    best = tmp_path / "run" / "checkpoints" / "best.ckpt"
    ev, _ = evaluate(compose("evaluate", [f"ckpt_path={best}", "save_probabilities=true",
                                          "trainer.accelerator=cpu"], tmp_path / "ev"))  # fmt: skip
    assert ev["test/region_dice/vessel"] == pytest.approx(
        metrics["test/region_dice/vessel"], abs=1e-6
    )
    export_checkpoint(best, tmp_path / "export", formats=("onnx",))
    card = json.loads((tmp_path / "export" / "model.json").read_text())
    assert card["output"]["regions"] == {"artery": [1, 3], "vessel": [2, 3]}
    # the probabilities are before post-processing: compared with the label map without it
    written = Predictor(tmp_path / "export", postprocess=False).predict_file(
        root / "images" / "3.png", tmp_path / "masks", probabilities=True
    )
    mask = np.asarray(Image.open(written[0]))
    assert mask.shape == (40, 48) and set(np.unique(mask)) <= {0, 1, 2, 3}
    with np.load(written[-1]) as f:
        probs, classes = f["probabilities"], f["classes"].tolist()
    assert classes == ["artery", "vessel"] and probs.shape == (2, 40, 48)
    # the bits of the label map are the classes whose probability passes one half
    assert ((probs[0] > 0.5) * 1 + (probs[1] > 0.5) * 2 == mask).all()


def test_regions_a_dataset_json_gave_are_read_back_by_an_evaluation(tmp_path):
    """nnU-Net's region labels in dataset.json are not recorded (read again where no class
    is given); an evaluation gives the checkpoint's classes, so it takes its regions too,
    and reads the data as the network's outputs, on this folder or another."""
    from segnet.commands.evaluate import settle_data
    from segnet.runs.building import build_datamodule, build_module

    root = nifti_dataset(tmp_path / "data", n=8)
    index = json.loads((root / "dataset.json").read_text())
    index.update(labels={"background": 0, "whole": [1, 2], "two": 2}, regions_class_order=[1, 2])
    (root / "dataset.json").write_text(json.dumps(index))
    cfg = compose("train", ["experiment=hippocampus_unet3d", f"data.root={root}", *FAST],
                  tmp_path / "train")  # fmt: skip
    dm = build_datamodule(cfg)
    dm.prepare_data()
    module = build_module(cfg, dm)
    assert module.data_info.regions == {"whole": [1, 2], "two": [2]}
    for extra in ([], [f"+data.root={root}"]):
        ev = compose("evaluate", ["ckpt_path=x.ckpt", "trainer.accelerator=cpu", *extra],
                     tmp_path / f"ev{len(extra)}")  # fmt: skip
        read, _ = settle_data(ev, [module], [tmp_path / "x.ckpt"])
        assert list(read.info().regions.items()) == list(module.data_info.regions.items())
        assert read.info().regions_class_order == [1, 2]
