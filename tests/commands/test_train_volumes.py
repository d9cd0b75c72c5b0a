"""End-to-end on small generated NIfTI data: train, evaluate, predictions in source space."""

import csv
import json
import logging

import nibabel as nib
import numpy as np
import pytest
import torch

from segnet.commands.evaluate import evaluate
from segnet.commands.train import train
from tests.conftest import compose
from tests.helpers import ODD_AFFINE, data_info, nifti_dataset

FAST = [
    "data.patch_size=[16,16,16]",
    "data.batch_size=2",
    "data.num_workers=0",
    "data.val_fraction=0.2",
    "data.test_fraction=0.2",
    "model.net.features=[4,8,8]",
    "trainer.max_epochs=2",
    "trainer.check_val_every_n_epoch=1",
    "trainer.accelerator=cpu",
]


@pytest.fixture(
    scope="module",
    params=["hippocampus_unet3d", "hippocampus_unet3d_unpool", "hippocampus_segnet3d"],
)
def trained(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(request.param)
    root = nifti_dataset(tmp / "data", "msd", n=10, shape=(19, 23, 17), affine=ODD_AFFINE)
    overrides = [f"experiment={request.param}", f"data.root={root}", *FAST]
    if "segnet" in request.param:
        overrides[-4] = "model.net.features=[4,8]"
        overrides.append("model.net.convs=[2,2]")
    metrics, objects = train(compose("train", overrides, tmp / "run"))
    return root, tmp / "run", metrics, objects


def test_volume_run_reports_per_case_dice(trained):
    root, out, metrics, _ = trained
    saved = json.loads((out / "metrics.json").read_text())
    for key in ("test/dice", "test/dice/one", "test/dice/two", "test/miou"):
        assert 0.0 <= saved["metrics"][key] <= 1.0, key
    assert "val/dice_best" in metrics
    rows = list(csv.DictReader((out / "per_case.csv").open()))
    # the split drawn from the folder, by name, as the checkpoint records it
    split = json.loads((out / "splits.json").read_text())
    best = torch.load(out / "checkpoints" / "best.ckpt", map_location="cpu", weights_only=False)
    assert split == best["segnet"]["splits"] and sorted(split) == ["test", "train", "val"]
    assert sorted(sum(split.values(), [])) == sorted(p.name[:-7] for p in root.glob("imagesTr/*"))
    assert sorted(r["case"] for r in rows) == sorted(split["test"])
    assert len(rows) == 2 and set(rows[0]) == {
        "case",
        *("dice_background", "dice_one", "dice_two"),
        *("hd95_one", "hd95_two", "nsd_one", "nsd_two"),
    }
    # the summary is the mean over cases of the per-case values (Decathlon convention)
    for metric in ("dice", "nsd"):
        per_class = np.nanmean(
            [[float(r[f"{metric}_one"]), float(r[f"{metric}_two"])] for r in rows], axis=0
        )
        assert saved["metrics"][f"test/{metric}"] == pytest.approx(per_class.mean(), abs=1e-5)
        assert saved["cases"]["mean"]["one"][metric] == pytest.approx(per_class[0], abs=1e-5)
    hd = [float(r[f"hd95_{c}"]) for r in rows for c in ("one", "two")]
    assert all(h >= 0 for h in hd)  # mm, or inf where a class is in one mask only
    # the mean leaves the infinite ones out, and the count of them stands beside it
    assert saved["metrics"]["test/hd95_infinite"] == sum(np.isinf(hd))
    assert saved["cases"]["surface_tolerance_mm"] == 1.0
    assert saved["tta"] is True  # the Hippocampus recipes test with mirroring, as nnU-Net
    assert saved["mirror_axes"] == [0]  # the recipes flip left-right only
    assert set(saved["cases"]["foreground_mean"]) == {"dice", "hd95", "nsd"}
    # val/* are the last epoch's (epoch 1 of 2); best.ckpt is from one of the two epochs
    assert saved["epochs_trained"] == 2 and saved["best_epoch"] in (0, 1)
    assert saved["best_epoch"] == best["epoch"]
    # the post-processing chosen on validation, with the scores it was chosen on, and
    # kept in the checkpoint evaluate and predict read
    chosen = saved["postprocessing"]
    assert chosen["chosen_on"] == f"{len(split['val'])} validation case(s)"
    assert chosen["val_dice_with"] >= chosen["val_dice_without"]
    assert (chosen["val_dice_with"] > chosen["val_dice_without"]) == (
        chosen["foreground"] or bool(chosen["classes"])
    )
    kept = best["hyper_parameters"]["postprocessing"]
    assert (kept or {}).get("foreground", False) == chosen["foreground"]
    assert {k: v for k, v in chosen.items() if k != "applied"} == best["postprocessing_choice"]


@pytest.mark.parametrize("trained", ["hippocampus_segnet3d"], indirect=True)  # BatchNorm
def test_batchnorm_is_recomputed_on_what_inference_feeds_the_network(trained):
    """Volumes larger than the window go through in windows of its size, and one too small
    for the network is padded, as in inference (whole, it would not fit)."""
    _, _, _, objects = trained
    module, dm = objects["module"], objects["datamodule"]
    norms = [m for m in module.net.modules() if isinstance(m, torch.nn.BatchNorm3d)]
    shapes = []
    hook = module.net.register_forward_pre_hook(lambda _, args: shapes.append(args[0].shape[2:]))
    try:
        assert module.recompute_batchnorm(dm.bn_dataloader()) == len(dm.volumes("train"))
        assert set(shapes) == {torch.Size(module.sliding_window["roi_size"])}
        before = norms[0].running_mean.clone()
        shapes.clear()
        small = [{"image": torch.randn(1, 1, 2, 20, 20)}]  # 2 voxels deep
        assert module.recompute_batchnorm(small) == 1
    finally:
        hook.remove()
    assert shapes[0][0] > 2 and not torch.equal(norms[0].running_mean, before)


def test_batchnorm_recompute_pads_a_deeply_supervised_network():
    """In training mode such a network returns a list of logits; the padding and cropping
    that inference does on a small input take its full-resolution head."""
    from segnet.models import create_model
    from segnet.serving.inference import Inference
    from segnet.training.module import full_resolution

    net = create_model(
        "segnet", spatial_dims=3, in_channels=1, out_channels=2, features=[4, 8],
        convs=[2, 1], norm="batch", deep_supervision=1,
    )  # fmt: skip
    net.train()
    x = torch.randn(1, 1, 2, 12, 12)  # 2 voxels deep: padded to the smallest input
    inference = Inference.for_net(net)
    assert isinstance(net(inference_padded(x, inference.min_input)), (list, tuple))
    with torch.no_grad():
        out = inference.logits(full_resolution(net), x, tta=False)
    assert out.shape == (1, 2, 2, 12, 12)


def test_batchnorm_is_recomputed_with_dropout_off_as_inference_runs():
    """Statistics for inference come from the activations inference produces: a network
    with dropout recomputes the same statistics as the same weights without it."""
    from segnet.training.module import SegmentationModule

    info = {**data_info(3, spatial_dims=3), "sliding_window": {"roi_size": [8, 8, 8]}}
    net = {"name": "segnet", "features": [4, 8], "convs": [2, 1], "norm": "batch"}
    torch.manual_seed(0)
    with_dropout = SegmentationModule({**net, "dropout": 0.5}, info)
    without = SegmentationModule(net, info)
    without.net.load_state_dict(with_dropout.net.state_dict())  # dropout has no weights
    batches = [{"image": torch.randn(2, 1, 8, 8, 8)} for _ in range(3)]
    for module in (with_dropout, without):
        assert module.recompute_batchnorm(batches) == 3
        assert module.net.training  # left in the mode it was in
    stats = [
        {k: v for k, v in m.net.state_dict().items() if "running" in k}
        for m in (with_dropout, without)
    ]
    assert stats[0].keys() == stats[1].keys() and len(stats[0]) > 4
    for key, value in stats[0].items():
        torch.testing.assert_close(value, stats[1][key], msg=key)


def inference_padded(x: torch.Tensor, size: int) -> torch.Tensor:
    pad = [p for s in reversed(x.shape[2:]) for p in (0, max(0, size - s))]
    return torch.nn.functional.pad(x, pad)


def test_volume_tensorboard_shows_three_orientations(trained):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    _, out, _, objects = trained
    acc = EventAccumulator(str(out / "tensorboard"), size_guidance={"images": 0}).Reload()
    # per-case Dice too: the scores a monitor is checked against before any data is read
    reported = {t for t in acc.Tags()["scalars"] if t.startswith("val/") and "_best" not in t}
    assert reported == set(objects["module"].validation_scores())
    panel = acc.Images("val/predictions")[-1]
    # 2 val cases x 3 orientations (axial, coronal, sagittal), each input | truth | prediction
    assert panel.height > 2 * 3 * 17


def test_evaluate_writes_nifti_in_the_source_space(trained, tmp_path):
    root, out, metrics, _ = trained
    cfg = compose(
        "evaluate",
        [
            f"ckpt_path={out}/checkpoints/best.ckpt",
            "save_predictions=true",
            "trainer.accelerator=cpu",
            "data.num_workers=0",
        ],
        tmp_path,
    )
    ev, objects = evaluate(cfg)
    assert ev["test/dice"] == pytest.approx(metrics["test/dice"], abs=1e-6)
    # tta=null follows the checkpoint's recipe: the same mirrored test figures
    assert json.loads((tmp_path / "metrics.json").read_text())["tta"] is True
    preds = sorted((tmp_path / "predictions").glob("*.nii.gz"))
    assert len(preds) == 2
    for pred in preds:
        source = nib.load(str(root / "imagesTr" / pred.name))
        saved = nib.load(str(pred))
        assert saved.shape == source.shape
        np.testing.assert_allclose(saved.affine, source.affine)
        assert set(np.unique(np.asarray(saved.dataobj))) <= {0, 1, 2}
    assert (tmp_path / "per_case.csv").is_file()


def components(label: np.ndarray) -> int:
    from scipy import ndimage

    full = ndimage.generate_binary_structure(label.ndim, label.ndim)
    return ndimage.label(label > 0, structure=full)[1]


@pytest.mark.parametrize("trained", ["hippocampus_unet3d"], indirect=True)
def test_a_chosen_postprocessing_is_applied_by_evaluate_and_predict(trained, tmp_path):
    """A checkpoint whose training chose to keep the foreground's largest component:
    evaluate's predictions and scores, and segnet.predict's masks, have one part;
    postprocess=false (--no-postprocess) gives the network's maps as they are."""
    from segnet.serving.predict import Predictor

    root, out, _, _ = trained
    ckpt = torch.load(out / "checkpoints" / "best.ckpt", map_location="cpu", weights_only=False)
    ckpt["hyper_parameters"]["postprocessing"] = {"foreground": True, "classes": []}
    chosen = tmp_path / "chosen.ckpt"
    torch.save(ckpt, chosen)
    runs = {}
    for use in ("true", "false"):
        where = tmp_path / f"postprocess_{use}"
        cfg = compose("evaluate", [f"ckpt_path={chosen}", "save_predictions=true", f"postprocess={use}",
                                   "trainer.accelerator=cpu", "data.num_workers=0"], where)  # fmt: skip
        runs[use] = evaluate(cfg)[0]
        applied = json.loads((where / "metrics.json").read_text())["postprocessing"]["applied"]
        assert applied == (
            "largest connected component of the foreground's" if use == "true" else "none"
        )
        parts = [
            components(np.asarray(nib.load(str(p)).dataobj))
            for p in (where / "predictions").glob("*.nii.gz")
        ]
        assert parts and (use == "false" or max(parts) <= 1), parts
    case = root / "imagesTr" / "case_000.nii.gz"
    assert components(Predictor(chosen).predict_volume(case)[0]) <= 1
    plain = Predictor(chosen, postprocess=False).predict_volume(case)[0]
    assert np.array_equal(
        plain,
        Predictor(out / "checkpoints" / "best.ckpt", postprocess=False).predict_volume(case)[0],
    )


@pytest.mark.parametrize("trained", ["hippocampus_unet3d"], indirect=True)
def test_probabilities_are_saved_in_the_source_space_beside_the_label_maps(trained, tmp_path):
    """save_probabilities=true: a float NIfTI per case (X, Y, Z, classes) on the source
    image's grid and affine (an oblique, non-RAS one here), summing to one, whose arg-max
    is the saved label map; segnet.predict writes the same."""
    from segnet.serving.predict import Predictor

    root, out, _, _ = trained
    best = out / "checkpoints" / "best.ckpt"
    cfg = compose("evaluate", [f"ckpt_path={best}", "save_probabilities=true", "postprocess=false",
                               "trainer.accelerator=cpu", "data.num_workers=0"], tmp_path / "ev")  # fmt: skip
    evaluate(cfg)
    saved = sorted((tmp_path / "ev" / "predictions").glob("*_probabilities.nii.gz"))
    assert len(saved) == 2
    for path in saved:
        case = path.name.removesuffix("_probabilities.nii.gz")
        probs, label = nib.load(str(path)), nib.load(str(path.with_name(f"{case}.nii.gz")))
        source = nib.load(str(root / "imagesTr" / f"{case}.nii.gz"))
        assert probs.shape == (*source.shape, 3) and probs.get_data_dtype() == np.float32
        np.testing.assert_allclose(probs.affine, source.affine)
        p = np.asarray(probs.dataobj)
        np.testing.assert_allclose(p.sum(-1), 1.0, atol=1e-5)
        assert np.array_equal(p.argmax(-1), np.asarray(label.dataobj))
    case = root / "imagesTr" / "case_000.nii.gz"
    written = Predictor(best, postprocess=False).predict_file(
        case, tmp_path / "pred", probabilities=True
    )
    assert [w.name for w in written] == ["case_000.nii.gz", "case_000_probabilities.nii.gz"]
    p = np.asarray(nib.load(str(written[1])).dataobj)
    assert np.array_equal(p.argmax(-1), np.asarray(nib.load(str(written[0])).dataobj))


def test_evaluate_all_cases_of_a_plain_folder(trained, tmp_path, caplog):
    """evaluate.py on a folder without dataset.json pairs files by name; split=all."""
    root, out, _, _ = trained
    plain = tmp_path / "plain"
    (plain / "images").mkdir(parents=True)
    (plain / "labels").mkdir()
    for f in sorted((root / "imagesTr").iterdir())[:3]:
        (plain / "images" / f.name).write_bytes(f.read_bytes())
        (plain / "labels" / f.name).write_bytes((root / "labelsTr" / f.name).read_bytes())
    cfg = compose(
        "evaluate",
        [
            f"ckpt_path={out}/checkpoints/best.ckpt",
            f"data.root={plain}",
            "data.split=all",
            "trainer.accelerator=cpu",
            "tta=false",
        ],
        tmp_path / "ev",
    )
    with caplog.at_level(logging.WARNING, logger="segnet.commands.train"):
        ev, objects = evaluate(cfg)
    assert len(objects["datamodule"].datasets["test"]) == 3
    assert 0 <= ev["test/dice"] <= 1
    assert "data.split=all scores them all" not in caplog.text
    assert "voxel sizes outside" not in caplog.text  # the training cases' own grid
    # tta=false overrides the recipe's mirroring, and the record says so
    assert objects["module"].tta is False
    assert json.loads((tmp_path / "ev" / "metrics.json").read_text())["tta"] is False


@pytest.mark.parametrize("trained", ["hippocampus_unet3d"], indirect=True)  # one network
def test_cases_of_another_voxel_size_are_named_where_nothing_resamples_them(
    trained, tmp_path, caplog
):
    """A network trained on each case's own grid (data.spacing null) meets cases of
    another voxel size: evaluate and predict segment them, and say the network sees them
    at a scale it never met."""
    from segnet.serving.predict import Predictor

    root, out, _, objects = trained
    info = objects["module"].data_info
    assert info.voxel_sizes == [[2.5, 0.8, 1.2], [2.5, 0.8, 1.2]]  # ODD_AFFINE, RAS order
    other = nifti_dataset(tmp_path / "iso", "msd", n=2, shape=(19, 23, 17))  # 1 mm
    best = out / "checkpoints" / "best.ckpt"
    ev = [f"ckpt_path={best}", f"data.root={other}", "data.split=all"]
    ev += ["trainer.accelerator=cpu", "tta=false", "data.num_workers=0"]
    with caplog.at_level(logging.WARNING, logger="segnet.commands.train"):
        metrics, _ = evaluate(compose("evaluate", ev, tmp_path / "ev"))
    assert 0 <= metrics["test/dice"] <= 1  # scored all the same
    assert "2 of 2 volume(s) have voxel sizes outside the training cases'" in caplog.text
    assert "case_000 at [1, 1, 1] mm" in caplog.text and "data.spacing=median" in caplog.text
    caplog.clear()
    predictor = Predictor(best)
    with caplog.at_level(logging.WARNING, logger="segnet.data.formats"):
        predictor.predict_volume(root / "imagesTr" / "case_000.nii.gz")
        assert not caplog.text  # a training case's voxel size
        predictor.predict_volume(other / "imagesTr" / "case_000.nii.gz")
    assert "1 of 1 volume(s) have voxel sizes outside" in caplog.text


def test_evaluate_on_new_cases_without_a_split_says_it_scores_only_a_part(
    trained, tmp_path, caplog
):
    """The checkpoint's split settings re-split a new folder: the user is told, and how to
    score every case."""
    root, out, _, _ = trained
    cases = len(list((root / "imagesTr").iterdir()))
    cfg = compose(
        "evaluate",
        [
            f"ckpt_path={out}/checkpoints/best.ckpt",
            f"data.root={root}",
            "trainer.accelerator=cpu",
            "tta=false",
        ],
        tmp_path / "ev",
    )
    with caplog.at_level(logging.WARNING, logger="segnet.commands.train"):
        _, objects = evaluate(cfg)
    assert len(objects["datamodule"].datasets["test"]) < cases
    assert "not every case; data.split=all scores them all" in caplog.text


def test_evaluate_applies_the_window_it_is_given(trained, tmp_path):
    """data.sw_* in evaluate.py change how the checkpoint is applied (and the record says
    so); the others stay as the checkpoint was validated with."""
    _, out, metrics, _ = trained
    common = [f"ckpt_path={out}/checkpoints/best.ckpt", "trainer.accelerator=cpu"]
    ev, objects = evaluate(
        compose(
            "evaluate",
            [*common, "data.sw_roi_size=[24,24,24]", "data.sw_overlap=0.25"],
            tmp_path / "whole",
        )
    )
    window = json.loads((tmp_path / "whole" / "metrics.json").read_text())["sliding_window"]
    # the generated cases (19x23x17) fit in the window: one pass each, not 16^3 windows
    assert window == {
        "roi_size": [24, 24, 24],
        "overlap": 0.25,
        "mode": "gaussian",
        "sw_batch_size": 4,
    }
    assert objects["module"].tta is True  # the recipe's mirroring is kept
    assert ev["test/loss"] != pytest.approx(metrics["test/loss"], abs=1e-7)
    # without them, the checkpoint's window and its training's test figures (a training
    # setting given as it was trained is accepted: it changes nothing)
    ev, _ = evaluate(compose("evaluate", [*common, "+data.flip=[0]"], tmp_path / "as_trained"))
    window = json.loads((tmp_path / "as_trained" / "metrics.json").read_text())["sliding_window"]
    assert window["roi_size"] == [16, 16, 16] and window["overlap"] == 0.5
    assert ev["test/loss"] == pytest.approx(metrics["test/loss"], abs=1e-6)


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("data.sw_roi_size=[24,24]", "sw_roi_size.*3 whole numbers of at least 1"),
        ("data.sw_roi_size=[24,0,24]", "sw_roi_size.*3 whole numbers of at least 1"),
        ("data.sw_overlap=1.0", "sw_overlap=1.0 must be in 0..1"),
        ("data.sw_mode=linear", "sw_mode='linear'.*gaussian"),
        ("data.sw_roi_size=24", "sw_roi_size=24 must be 3 whole numbers"),
        ("+data.patch_size=[24,24,24]", "patch_size.*does not change an evaluation.*sw_roi_size"),
        ("+data.flip=false", r"data.flip=false: settings of training .*tta=true or false"),
        (
            "data.sw_roi_size=[2,2,2]",
            r"sw_roi_size=\[2, 2, 2\] is too small for this network, which takes at least",
        ),
    ],
)
def test_evaluate_refuses_a_bad_window_before_testing(trained, tmp_path, setting, message):
    _, out, _, _ = trained
    cfg = compose(
        "evaluate",
        [f"ckpt_path={out}/checkpoints/best.ckpt", "trainer.accelerator=cpu", setting],
        tmp_path,
    )
    with pytest.raises(Exception, match=message):
        evaluate(cfg)
    assert not (tmp_path / "metrics.json").exists()


@pytest.mark.slow
def test_the_gpu_recipe_tests_and_evaluates_the_averaged_weights(tmp_path):
    """hippocampus_gpu averages the weights (EMA): its best checkpoint holds the average
    (the raw weights ride along as Lightning's ``current_model_state``), training tests that
    average, and evaluate.py on the checkpoint gives the same numbers."""
    root = nifti_dataset(tmp_path / "data", "msd", n=10, shape=(19, 23, 17), affine=ODD_AFFINE)
    overrides = [
        "experiment=hippocampus_gpu",
        "trainer=cpu",
        f"data.root={root}",
        *FAST,
        "trainer.max_epochs=3",
        "callbacks.ema.decay=0.5",  # an average far from the last weights in a few steps
        "model.tta=false",
    ]
    metrics, _ = train(compose("train", overrides, tmp_path / "run"))
    ckpt = torch.load(
        tmp_path / "run/checkpoints/best.ckpt", map_location="cpu", weights_only=False
    )
    average, current = ckpt["state_dict"], ckpt["current_model_state"]
    assert any(not torch.equal(average[k], current[k]) for k in average)
    cfg = compose(
        "evaluate",
        [f"ckpt_path={tmp_path}/run/checkpoints/best.ckpt", "trainer.accelerator=cpu"],
        tmp_path / "ev",
    )
    ev, objects = evaluate(cfg)
    assert ev["test/dice"] == pytest.approx(metrics["test/dice"], abs=1e-6)
    assert ev["test/loss"] == pytest.approx(metrics["test/loss"], abs=1e-6)
    loaded = objects["module"].state_dict()
    assert all(torch.equal(loaded[k].cpu(), average[k]) for k in average)


def test_a_bad_test_case_stops_training_before_the_first_step(tmp_path):
    from segnet.data.nifti import NiftiDataError
    from segnet.data.nifti_datamodule import NiftiDataModule

    root = nifti_dataset(tmp_path / "data", "msd", n=10)
    dm = NiftiDataModule(str(root), val_fraction=0.2, test_fraction=0.2)
    dm.prepare_data()
    bad = dm.cases[dm.splits["test"][0]].label
    img = nib.load(str(bad))
    label = np.asarray(img.dataobj).copy()
    label[0, 0, 0] = 9  # no such class
    nib.save(nib.Nifti1Image(label, img.affine), str(bad))
    cfg = compose(
        "train", ["experiment=hippocampus_unet3d", f"data.root={root}", *FAST], tmp_path / "run"
    )
    with pytest.raises(NiftiDataError, match=rf"{bad.name} holds values \[9\]"):
        train(cfg)
    assert not (tmp_path / "run" / "checkpoints").exists()  # no training step was taken


def test_a_resampled_run_is_scored_evaluated_and_deployed_on_each_cases_grid(tmp_path):
    """data.spacing=median: trained on one grid, scored on each case's own; evaluate and
    an exported model resample as training did, whatever data they are given."""
    from segnet.serving.checkpoints import CheckpointError
    from segnet.serving.export import export_checkpoint
    from segnet.serving.predict import Predictor
    from tests.helpers import spaced_dataset

    spacings = [(1.0, 1.25, 1.0), (1.0, 1.0, 2.0), (1.5, 1.0, 1.25)] * 3
    root = spaced_dataset(tmp_path / "data", spacings, shape=(24, 24, 20))
    cfg_overrides = ["experiment=hippocampus_unet3d", f"data.root={root}", *FAST]
    cfg = compose("train", [*cfg_overrides, "data.spacing=median"], tmp_path / "run")
    metrics, objects = train(cfg)
    dm, module = objects["datamodule"], objects["module"]
    spacing = module.data_info.normalization["spacing"]
    assert spacing == pytest.approx(np.median([spacings[i] for i in dm.splits["train"]], 0))
    resampled = [v for v in dm.datasets["train"].volumes if v.grid_label is not None]
    assert resampled and all(v.image.shape[1:] != v.label.shape for v in resampled)
    best = objects["best_ckpt"]
    ev_cfg = [f"ckpt_path={best}", "save_predictions=true", "trainer.accelerator=cpu"]
    ev, _ = evaluate(compose("evaluate", [*ev_cfg, "data.num_workers=0"], tmp_path / "ev"))
    assert ev["test/dice"] == pytest.approx(metrics["test/dice"], abs=1e-6)
    predictions = sorted((tmp_path / "ev" / "predictions").glob("*.nii.gz"))
    assert len(predictions) == len(dm.splits["test"]) == 2
    for pred in predictions:
        assert nib.load(str(pred)).shape == nib.load(str(root / "imagesTr" / pred.name)).shape
    with pytest.raises(ValueError, match=r"data\.spacing=.* is refused: .* trained at"):
        evaluate(compose("evaluate", [*ev_cfg, "+data.spacing=[1,1,1]"], tmp_path / "ev2"))
    # new cases of another voxel size are resampled to the spacing trained at, not to
    # their own median
    other = spaced_dataset(tmp_path / "other", [(2.0, 2.0, 2.0)] * 2, shape=(24, 24, 20))
    new_cases = [f"ckpt_path={best}", f"data.root={other}", "data.split=all"]
    new_cases += ["trainer.accelerator=cpu", "data.num_workers=0"]
    _, ev_objects = evaluate(compose("evaluate", new_cases, tmp_path / "ev3"))
    assert ev_objects["datamodule"].info().normalization["spacing"] == pytest.approx(spacing)
    volume = ev_objects["datamodule"].datasets["test"].volumes[0]
    assert volume.label.shape == (12, 12, 10) and volume.image.shape[1:] != (12, 12, 10)
    # a resume goes on at the spacing it started at: the setting, and (for a checkpoint
    # from before checkpoints stored their settings, or a median of other cases) the figure
    last = tmp_path / "run" / "checkpoints" / "last.ckpt"
    resume = [f"ckpt_path={last}", "data.spacing=[1,1,1]"]
    with pytest.raises(CheckpointError, match=r"data.spacing: 'median' in the run, \[1, 1, 1\]"):
        train(compose("train", [*cfg_overrides, *resume], tmp_path / "run2"))
    stored = torch.load(last, weights_only=False)
    del stored["segnet"]["settings"]
    torch.save(stored, last)
    with pytest.raises(CheckpointError, match=r"resampled to \[.*\] mm; this run resamples to"):
        train(compose("train", [*cfg_overrides, *resume], tmp_path / "run3"))
    # the exported model's card says how to resample, and predict does it (the weights
    # alone: a traced format's export takes ten times as long, and resamples the same way)
    export_checkpoint(best, tmp_path / "exp", ("safetensors",))
    card = json.loads((tmp_path / "exp" / "model.json").read_text())["deployment"]
    (step,) = [s for s in card["preprocess"] if s["step"] == "resample"]
    assert step["spacing_mm"] == pytest.approx(spacing)
    predictor = Predictor(tmp_path / "exp" / "model.safetensors")
    mask, _ = predictor.predict_volume(root / "imagesTr" / predictions[0].name)
    saved = np.asarray(nib.load(str(predictions[0])).dataobj)  # diagonal affine: RAS already
    assert mask.shape == saved.shape and (mask == saved).mean() > 0.999


def test_a_model_trained_from_a_csv_scores_the_folder_it_is_given(tmp_path):
    """evaluate.py data.root=<new cases> on a checkpoint trained from a CSV: the new
    folder's cases are scored, not the CSV's (which would win over the folder)."""
    listed = nifti_dataset(tmp_path / "listed", "csv", n=6, shape=(19, 23, 17))
    overrides = [
        "experiment=hippocampus_unet3d", f"data.csv={listed / 'cases.csv'}",
        "data.class_names=[background,one,two]", *FAST, "trainer.max_epochs=1", "test=false",
    ]  # fmt: skip
    train(compose("train", overrides, tmp_path / "run"))
    other = nifti_dataset(tmp_path / "other", "folders", n=3, shape=(19, 23, 17))
    for case in (other / "images").iterdir():  # names the CSV's cases do not have
        case.rename(case.with_name("new_" + case.name))
    for case in (other / "labels").iterdir():
        case.rename(case.with_name("new_" + case.name))
    best = tmp_path / "run" / "checkpoints" / "best.ckpt"
    ev = [f"ckpt_path={best}", f"data.root={other}", "data.split=all", "trainer.accelerator=cpu"]
    evaluate(compose("evaluate", ev, tmp_path / "ev"))
    rows = list(csv.DictReader((tmp_path / "ev" / "per_case.csv").open()))
    assert sorted(r["case"] for r in rows) == ["new_case_000", "new_case_001", "new_case_002"]


@pytest.mark.slow
def test_flips_that_keep_left_and_right_let_the_network_tell_them_apart(tmp_path):
    """Two identical balls, one labelled left and one right: flipped left-right in training
    (and mirrored at test, data.flip=[0,1,2]), the network cannot learn which is which;
    with data.flip=true, which keeps to the other axes because the classes name both
    sides, it can, and the recipe's mirrored test keeps them apart too."""
    from tests.helpers import left_right_dataset

    root = left_right_dataset(tmp_path / "data")
    dice = {}
    for name, flip in (("all", "[0,1,2]"), ("keep_lr", "true")):
        overrides = [
            "experiment=hippocampus_unet3d", f"data.root={root}", f"data.flip={flip}",
            "data.patch_size=[24,24,24]", "model.net.features=[8,16,32]", "data.num_workers=0",
            "trainer.max_epochs=20", "trainer.check_val_every_n_epoch=5",
            "trainer.accelerator=cpu",
        ]  # fmt: skip
        metrics, _ = train(compose("train", overrides, tmp_path / name))
        dice[name] = metrics["test/dice"]
    assert dice["all"] < 0.6 and dice["keep_lr"] > 0.9, dice


def test_the_split_record_is_the_runs_first_and_a_resume_says_when_cases_changed(tmp_path, caplog):
    from types import SimpleNamespace

    from segnet.runs.folders import refuse_run_folder_in_use
    from segnet.runs.records import record_split

    first = {"train": ["a", "b"], "val": ["c"], "test": ["d"]}
    data = lambda names: SimpleNamespace(split_names=lambda: names)  # noqa: E731
    record_split(tmp_path, data(first))
    assert json.loads((tmp_path / "splits.json").read_text()) == first
    # a new run is never started over a folder holding one (a run's, or the user's own)
    with pytest.raises(FileExistsError, match="splits.json"):
        refuse_run_folder_in_use(tmp_path, "a new training run")
    with caplog.at_level(logging.WARNING, logger="segnet.commands.train"):
        record_split(tmp_path, data(first), resumed=True)
        assert "differ" not in caplog.text
        changed = {**first, "train": ["a", "b", "e"]}
        record_split(tmp_path, data(changed), resumed=True)
    assert "differ from those this run started with" in caplog.text
    assert json.loads((tmp_path / "splits.json").read_text()) == first  # kept
    # the resumed part's own cases beside it, as its checkpoints record them
    assert json.loads((tmp_path / "splits.resumed.json").read_text()) == changed
    record_split(tmp_path / "camvid", SimpleNamespace(split_names=lambda: None))
    assert not (tmp_path / "camvid").exists()  # fixed split files: nothing to record


# bf16 emulated on a CPU without bf16 units takes 18 s: that half runs in `make test-slow`
@pytest.mark.parametrize("units", [pytest.param(True, marks=pytest.mark.slow), False])
def test_bf16_on_a_cpu_trains_and_warns_only_without_bf16_units(
    units, tmp_path, caplog, monkeypatch
):
    """trainer.precision=bf16-mixed on the CPU (docs/performance.md: 1.7x faster 3D
    training where the CPU has bf16 units) trains, validates and tests through the same
    code; on a CPU without bf16 units, which would emulate it many times slower, the run
    trains in fp32 instead, saying so."""
    from segnet.runs import building

    monkeypatch.setattr(building, "cpu_has_bf16_units", lambda: units)
    root = nifti_dataset(tmp_path / "data", "msd", n=6, shape=(19, 23, 17))
    overrides = [
        "experiment=hippocampus_unet3d",
        f"data.root={root}",
        "data.patch_size=[16,16,16]",
        "data.batch_size=2",
        "data.num_workers=0",
        "trainer.max_epochs=1",
        "trainer.check_val_every_n_epoch=1",
        "trainer.accelerator=cpu",
        "trainer.precision=bf16-mixed",
        "model.tta=false",
    ]  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="segnet.commands.train"):
        metrics, objects = train(
            compose("train", [*overrides, "trainer.max_epochs=1"], tmp_path / "run")
        )
    assert 0.0 <= metrics["test/dice"] <= 1.0 and "val/dice_best" in metrics
    assert str(objects["trainer"].precision) == ("bf16-mixed" if units else "32-true")
    assert ("CPU without bf16 units" in caplog.text) is not units


def test_the_volume_recipe_plans_patch_batch_and_poolings_and_keeps_them(tmp_path, caplog):
    """experiment=volumes_quick on thick slices (0.5 mm pixels, 2 mm apart): the patch,
    the batch and a network that halves the slices later than the pixels, all planned
    from the cases, said in the log and kept by the checkpoint: evaluate.py scores it
    as the run's test did, and a resume trains on in the same plan."""
    from tests.helpers import spaced_dataset, stopping_after

    root = spaced_dataset(tmp_path / "data", [(0.5, 0.5, 2.0)] * 8, shape=(24, 24, 20))
    overrides = [
        "experiment=volumes_quick", f"data.root={root}", "train_minutes=null",
        "trainer.check_val_every_n_epoch=1", "trainer.accelerator=cpu",
        "data.num_workers=0", "data.val_fraction=0.2", "data.test_fraction=0.2",
        "data.max_patch_voxels=8192", "data.batch_voxels=16384", "data.steps_per_epoch=2",
        "model.net.features=[4,8,8,8,8]", "trainer.max_epochs=2",
    ]  # fmt: skip
    with caplog.at_level(logging.INFO), stopping_after(1):  # as if stopped, to resume
        metrics, objects = train(compose("train", overrides, tmp_path / "run"))
    dm, module = objects["datamodule"], objects["module"]
    patch = list(dm.patch_size)
    assert patch[2] < patch[0] and dm.batch_size == 2  # the slices fewer, the batch filled
    pools = module.hparams["net"]["pools"]
    assert pools[0] == [2, 2, 1] and [2, 2, 2] in pools  # slices halved later
    assert "network plan: unet" in caplog.text and "halving 2x2x1 then" in caplog.text
    assert len(dm.train_dataloader()) == 2
    best = objects["best_ckpt"]
    stored = torch.load(best, weights_only=False)["hyper_parameters"]["data_cfg"]
    assert stored["patch_size"] == patch and stored["batch_size"] == 2
    ev_cfg = [f"ckpt_path={best}", "trainer.accelerator=cpu", "data.num_workers=0"]
    ev, _ = evaluate(compose("evaluate", ev_cfg, tmp_path / "ev"))
    assert ev["test/dice"] == pytest.approx(metrics["test/dice"], abs=1e-6)
    last = tmp_path / "run" / "checkpoints" / "last.ckpt"
    resume = [*overrides, f"ckpt_path={last}"]
    _, resumed = train(compose("train", resume, tmp_path / "run2"))
    assert list(resumed["datamodule"].patch_size) == patch
    assert resumed["module"].hparams["net"]["pools"] == pools


def _as_recorded_before_pools(run, ckpt_path) -> None:
    """The run and checkpoint as a version before ``model.net.pools`` wrote them: no
    such key in the run's config records, the checkpoint's settings or its network."""
    import yaml

    for record in run.glob(".hydra*/config.yaml"):
        config = yaml.safe_load(record.read_text())
        config["model"]["net"].pop("pools", None)
        record.write_text(yaml.safe_dump(config))
    stored = torch.load(ckpt_path, weights_only=False)
    stored["hyper_parameters"]["net"].pop("pools", None)
    stored["segnet"]["settings"]["model"]["net"].pop("pools", None)
    torch.save(stored, ckpt_path)


def test_runs_recorded_before_planned_pooling_resume_with_the_network_they_have(tmp_path, caplog):
    """A run of an earlier version resumes: its records lack model.net.pools, and on
    thick slices its network halved every axis where this version would plan the slices
    halved later; it goes on with the network it has, said in the log."""
    from tests.helpers import spaced_dataset, stopping_after

    root = spaced_dataset(tmp_path / "data", [(1.0, 1.0, 3.0)] * 8, shape=(24, 24, 36))
    run_args = ["experiment=hippocampus_unet3d", f"data.root={root}", *FAST]
    built_as_before = ["model.net.pools=[[2,2,2],[2,2,2]]"]
    with stopping_after(1):
        train(compose("train", [*run_args, *built_as_before], tmp_path / "run"))
    last = tmp_path / "run" / "checkpoints" / "last.ckpt"
    _as_recorded_before_pools(tmp_path / "run", last)
    resume = [*run_args, f"ckpt_path={last}"]
    with caplog.at_level(logging.INFO):
        _, objects = train(compose("train", resume, tmp_path / "run2"))
    assert "resuming a network built as configured" in caplog.text
    assert objects["trainer"].current_epoch == 2
    assert objects["module"].net.encoder.kernels == [2, 2]
