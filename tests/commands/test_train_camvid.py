"""End-to-end on a small generated CamVid: train, TensorBoard, checkpoints, evaluate."""

import json
import logging

import numpy as np
import pytest
import torch
from PIL import Image

from segnet.commands.evaluate import evaluate
from segnet.commands.train import train
from tests.conftest import TINY_CAMVID, compose
from tests.helpers import camvid_like

FAST = TINY_CAMVID


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One reduced-resolution training run shared by the tests below."""
    tmp = tmp_path_factory.mktemp("camvid_run")
    root = camvid_like(tmp / "CamVid")
    out = tmp / "run"
    cfg = compose("train", FAST + [f"data.root={root}", "data.image_size=[24,32]"], out)
    metrics, objects = train(cfg)
    return root, out, metrics, objects


def test_run_writes_checkpoints_and_test_metrics(trained):
    _, out, metrics, objects = trained
    assert (out / "checkpoints" / "best.ckpt").is_file()
    assert (out / "checkpoints" / "last.ckpt").is_file()
    saved = json.loads((out / "metrics.json").read_text())
    assert saved["split"] == "test"
    assert saved["ckpt_path"].endswith("best.ckpt")
    for key in ("test/global_acc", "test/class_acc", "test/miou", "test/iou/Bicyclist"):
        assert 0.0 <= saved["metrics"][key] <= 1.0
    assert saved["metrics"]["test/miou"] == pytest.approx(metrics["test/miou"])
    assert "val/miou_best" in metrics


def test_tensorboard_has_scalars_images_confusion_and_hparams(trained):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    _, out, _, _ = trained
    # the folder, as `tensorboard --logdir` reads it (fit and test write separate files)
    acc = EventAccumulator(
        str(out / "tensorboard"), size_guidance={"images": 0, "scalars": 0}
    ).Reload()
    scalars = set(acc.Tags()["scalars"])
    for tag in (
        "train/loss_step",
        "val/miou",
        "val/miou_best",
        "val/global_acc",
        "val/class_acc",
        "val/iou/Road",
        "test/miou",
        "lr-AdamW",
    ):
        assert tag in scalars, f"{tag} missing from {sorted(scalars)}"
    assert len(acc.Scalars("val/miou")) == 2  # one per epoch
    # the scores validation reports are the ones a monitor is checked against before data
    reported = {t for t in scalars if t.startswith("val/") and not t.endswith("_best")}
    assert reported == set(trained[3]["module"].validation_scores())
    images = set(acc.Tags()["images"])
    assert {"val/predictions", "val/confusion_matrix", "test/confusion_matrix"} <= images
    panel = acc.Images("val/predictions")[-1]
    # the 3 val samples stacked (4 asked), each input | truth | prediction at 45x61 in a
    # grid with 4-pixel gaps, below column titles and above the 11-class legend
    assert panel.width == 3 * 61 + 4 * 4
    assert panel.height > 3 * 45 + 4 * 4 + 2 * 22
    # hparams session with the final metrics, as TensorBoard's HPARAMS tab reads it
    plugins = {m.plugin_data.plugin_name for m in acc.summary_metadata.values()}
    assert "hparams" in plugins
    assert "hp/test/miou" in scalars and "hp/val/miou_best" in scalars


def test_evaluate_reproduces_the_test_metrics_and_saves_predictions(trained, tmp_path, monkeypatch):
    from segnet.training.module import SegmentationModule

    root, out, metrics, _ = trained
    passes = []  # the network applied to the split once: the masks come from the test step
    original = SegmentationModule.predict_logits
    monkeypatch.setattr(
        SegmentationModule,
        "predict_logits",
        lambda self, *a, **k: passes.append(1) or original(self, *a, **k),
    )
    cfg = compose(
        "evaluate",
        [
            f"ckpt_path={out}/checkpoints/best.ckpt",
            "data.split=test",
            "save_predictions=true",
            "trainer.accelerator=cpu",
        ],
        tmp_path,
    )
    ev, objects = evaluate(cfg)
    for key, value in metrics.items():
        if key.startswith("test/"):
            assert ev[key] == pytest.approx(value, abs=1e-6), key
    assert len(passes) == len(objects["datamodule"].test_dataloader())
    files = sorted((tmp_path / "predictions").iterdir())
    assert [f.name for f in files[:2]] == ["test_000.png", "test_000_color.png"]
    index_map = np.asarray(Image.open(tmp_path / "predictions" / "test_000.png"))
    colour = np.asarray(Image.open(tmp_path / "predictions" / "test_000_color.png"))
    assert index_map.shape == (45, 61) and index_map.max() <= 10  # the label's native size
    assert colour.shape == (45, 61, 3)
    # evaluating again into the same folder stops before any work, overwriting nothing
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    with pytest.raises(FileExistsError, match="never overwrites"):
        evaluate(cfg)
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


def test_evaluate_refuses_test_by_name_on_data_without_it(trained, tmp_path, caplog):
    """A copy without a test split: the checkpoint's own split falls back to val with a
    warning, but data.split=test asked for by name is refused, not scored on val."""
    _, out, _, _ = trained
    root = camvid_like(tmp_path / "CamVid", counts={"train": 2, "val": 2})  # as the shared copy
    ckpt = f"ckpt_path={out}/checkpoints/best.ckpt"
    asked = [ckpt, f"data.root={root}", "data.split=test", "trainer.accelerator=cpu"]
    with pytest.raises(ValueError, match=r"data.split=test: .*CamVid has no test split.*split=val"):
        evaluate(compose("evaluate", asked, tmp_path / "refused"))
    with caplog.at_level(logging.INFO):
        scored, objects = evaluate(compose("evaluate", asked[:2] + asked[3:], tmp_path / "ev"))
    assert "testing on 'val' instead" in caplog.text
    # the summary says where the files went
    assert f"metrics: {tmp_path / 'ev' / 'metrics.json'}" in caplog.text
    saved = json.loads((tmp_path / "ev" / "metrics.json").read_text())
    assert saved["split"] == "val" and 0 <= scored["test/miou"] <= 1


def test_evaluate_with_missing_checkpoint_says_so(tmp_path):
    cfg = compose("evaluate", [f"ckpt_path={tmp_path}/nope.ckpt"], tmp_path)
    with pytest.raises(FileNotFoundError, match="nope.ckpt.*no such file"):
        evaluate(cfg)


def test_evaluate_refuses_window_settings_for_an_image_model(trained, tmp_path):
    _, out, _, _ = trained
    cfg = compose(
        "evaluate", [f"ckpt_path={out}/checkpoints/best.ckpt", "data.sw_overlap=0.25"], tmp_path
    )
    with pytest.raises(ValueError, match="data.sw_overlap.*whole images"):
        evaluate(cfg)
    assert not (tmp_path / "metrics.json").exists()


def test_evaluate_keeps_the_trained_normalisation_and_says_when_the_input_size_changes(
    trained, tmp_path, caplog, monkeypatch
):
    _, out, _, _ = trained
    ckpt = f"ckpt_path={out}/checkpoints/best.ckpt"
    for setting in ("+data.mean=[0.5,0.5,0.5]", "+data.std=[0.5,0.5,0.5]"):
        cfg = compose("evaluate", [ckpt, setting], tmp_path / "refused")
        with pytest.raises(ValueError, match=r"takes its input as it was trained \(mean=\[0\.485"):
            evaluate(cfg)
    assert not (tmp_path / "refused" / "metrics.json").exists()
    # given as trained: accepted; another input size: scored, said, and recorded
    monkeypatch.chdir(out.parent)  # a relative ckpt_path is recorded absolute
    relative = f"ckpt_path={out.name}/checkpoints/best.ckpt"
    cfg = compose(
        "evaluate",
        [relative, "+data.mean=[0.485,0.456,0.406]", "+data.image_size=[16,24]"],
        tmp_path / "smaller",
    )
    with caplog.at_level(logging.WARNING):
        evaluate(cfg)
    assert "data.image_size=[16, 24]: the network sees the images at this size, not at the" \
        " [24, 32] it was trained at" in caplog.text  # fmt: skip
    saved = json.loads((tmp_path / "smaller" / "metrics.json").read_text())
    assert saved["image_size"] == [16, 24]
    assert saved["ckpt_path"] == str(out / "checkpoints" / "best.ckpt")


def test_checkpoint_loads_with_weights_only_and_no_hydra(trained):
    _, out, _, _ = trained
    ckpt = torch.load(out / "checkpoints" / "best.ckpt", weights_only=True)
    info = ckpt["hyper_parameters"]["data"]
    assert info["class_names"][3] == "Road" and info["ignore_index"] == 11
    assert ckpt["hyper_parameters"]["net"]["name"] == "segnet_basic"
    # the class weights the training labels gave (median frequency), which the module is
    # given once the data is read, are the loss's and the checkpoint's
    weights = trained[3]["datamodule"].class_weights
    assert weights is not None and len(weights) == 11 and len(set(weights)) > 1
    assert ckpt["hyper_parameters"]["class_weights"] == pytest.approx(weights)
    assert ckpt["state_dict"]["ce.weight"].tolist() == pytest.approx(weights)


def test_recompute_bn_changes_statistics_deterministically(trained):
    root, out, _, objects = trained
    module, dm = objects["module"], objects["datamodule"]
    bn = next(m for m in module.net.modules() if isinstance(m, torch.nn.BatchNorm2d))
    before = bn.running_mean.clone()
    n = module.recompute_batchnorm(dm.bn_dataloader())
    first = bn.running_mean.clone()
    module.recompute_batchnorm(dm.bn_dataloader())
    assert n == 3  # 6 training images, batches of 2
    assert not torch.allclose(before, first)
    torch.testing.assert_close(bn.running_mean, first)  # exact average: order-independent
    assert bn.momentum == 0.1  # restored


def test_two_runs_in_the_same_second_get_their_own_directories():
    from tests.conftest import compose_config

    a = compose_config("train", hydra=True).hydra.run.dir
    b = compose_config("train", hydra=True).hydra.run.dir
    assert a != b and a.startswith("outputs/train/runs/")


@pytest.mark.slow
def test_compiled_network_trains_and_saves_plain_keys(tiny_camvid, tmp_path):
    """model.compile=true (torch.compile, in place): checkpoints keep the plain keys that
    export and evaluate expect."""
    cfg = compose(
        "train",
        FAST + [f"data.root={tiny_camvid}", "model.compile=true", "trainer.max_epochs=1"],
        tmp_path,
    )
    metrics, _ = train(cfg)
    state = torch.load(tmp_path / "checkpoints" / "best.ckpt", weights_only=True)["state_dict"]
    assert state and not any("_orig_mod" in k for k in state)
    assert 0 <= metrics["test/miou"] <= 1


def test_recomputed_batchnorm_is_stored_so_evaluate_gives_the_same_numbers(tmp_path):
    """recompute_bn=true: training recomputes once, stores the statistics in best.ckpt
    (marked), and evaluate.py on that checkpoint reproduces the training run's test metrics,
    whether or not it is asked to recompute."""
    root = camvid_like(tmp_path / "CamVid")
    out = tmp_path / "run"
    overrides = FAST + [f"data.root={root}", "data.image_size=[24,32]", "recompute_bn=true"]
    metrics, _ = train(compose("train", overrides, out))
    ckpt = torch.load(out / "checkpoints" / "best.ckpt", weights_only=True)
    assert ckpt["bn_recomputed"] == {"batches": 3, "samples": 6}
    tested = {k: v for k, v in metrics.items() if k.startswith("test/")}
    assert tested
    for flag in ("false", "true"):
        ev, _ = evaluate(
            compose(
                "evaluate",
                [
                    f"ckpt_path={out}/checkpoints/best.ckpt",
                    f"recompute_bn={flag}",
                    "trainer.accelerator=cpu",
                ],
                tmp_path / f"eval_{flag}",
            )
        )
        for key, value in tested.items():
            assert ev[key] == pytest.approx(value, abs=1e-6), (flag, key)


def test_a_checkpoint_from_before_the_data_description_still_evaluates(trained, tmp_path):
    """Checkpoints written before DataInfo (their sizes, classes and normalisation as
    separate hyperparameters) evaluate and load for prediction as they did."""
    from segnet.serving.loading import load_model

    _, out, metrics, _ = trained
    ckpt = torch.load(out / "checkpoints" / "best.ckpt", weights_only=True)
    hp = ckpt["hyper_parameters"]
    data = hp.pop("data")
    norm = data["normalization"]
    hp.update(
        num_classes=len(data["class_names"]),
        in_channels=data["in_channels"],
        spatial_dims=data["spatial_dims"],
        ignore_index=data["ignore_index"],
        class_names=data["class_names"],
        inferer=None,
        per_case_dice=False,
        data_info={
            "class_names": data["class_names"],
            "palette": data["palette"],
            "ignore_index": data["ignore_index"],
            "spatial_dims": 2,
            "in_channels": 3,
            "normalization": {"mean": norm["mean"], "std": norm["std"]},
            "input_size": data["input_size"],
            "data_cfg": hp.pop("data_cfg"),
        },
    )
    old = tmp_path / "old.ckpt"
    torch.save(ckpt, old)
    cfg = compose("evaluate", [f"ckpt_path={old}", "trainer.accelerator=cpu"], tmp_path / "ev")
    ev, _ = evaluate(cfg)
    for key in ("test/miou", "test/global_acc"):
        assert ev[key] == pytest.approx(metrics[key], abs=1e-6), key
    model = load_model(old)
    assert model.info.normalization["kind"] == "rgb_mean_std" and model.info.input_size == [24, 32]


def test_deep_supervision_trains_a_2d_segnet_and_evaluates_as_trained(tmp_path):
    """model.net.deep_supervision on SegNet-Basic in 2D: the training-mode list of outputs
    goes through the loss and the BatchNorm recomputation; testing and evaluate.py see the
    full-resolution logits alone, and agree."""
    root = camvid_like(tmp_path / "CamVid")
    out = tmp_path / "run"
    overrides = FAST + [
        f"data.root={root}",
        "data.image_size=[24,32]",
        "model.net.deep_supervision=2",
        "recompute_bn=true",
    ]
    metrics, objects = train(compose("train", overrides, out))
    assert len(objects["module"].net.aux_heads) == 2
    state = torch.load(out / "checkpoints" / "best.ckpt", weights_only=True)["state_dict"]
    assert any(k.startswith("net.aux_heads.1.") for k in state)
    ev, _ = evaluate(
        compose(
            "evaluate",
            [f"ckpt_path={out}/checkpoints/best.ckpt", "trainer.accelerator=cpu"],
            tmp_path / "eval",
        )
    )
    tested = {k: v for k, v in metrics.items() if k.startswith("test/")}
    assert tested
    for key, value in tested.items():
        assert ev[key] == pytest.approx(value, abs=1e-6), key


def test_evaluate_scores_new_labelled_frames_without_a_training_split(trained, tmp_path):
    """A folder of new labelled frames (test/, testannot/) is all an evaluation needs: its
    missing train/ is not taken for a missing dataset."""
    import shutil

    root, out, _, _ = trained
    new = tmp_path / "New"
    for name in ("test", "testannot", "test.txt"):
        source = root / name
        if source.is_dir():
            shutil.copytree(source, new / name)
        elif source.is_file():
            new.mkdir(exist_ok=True)
            shutil.copy(source, new / name)
    ckpt = out / "checkpoints" / "best.ckpt"
    cfg = compose(
        "evaluate", [f"ckpt_path={ckpt}", f"data.root={new}", "data.split=test"], tmp_path / "ev"
    )
    metrics, _ = evaluate(cfg)
    assert 0.0 <= metrics["test/miou"] <= 1.0


def test_a_test_of_part_of_the_split_says_so_and_records_it(tiny_camvid, tmp_path, caplog):
    """trainer.limit_test_batches (a debug setting) tests part of the split: the run says
    so, and metrics.json records the limit beside the split's name."""

    overrides = [*TINY_CAMVID, f"data.root={tiny_camvid}", "trainer.max_epochs=1"]
    cfg = compose("train", [*overrides, "trainer.limit_test_batches=1"], tmp_path / "run")
    with caplog.at_level(logging.INFO):  # the warning and the run's summary
        train(cfg)
    assert "the test metrics cover 1 of the 'test' split's 2 batches" in caplog.text
    assert "(part of it: trainer.limit_test_batches=1)" in caplog.text
    saved = json.loads((tmp_path / "run" / "metrics.json").read_text())
    limit = {"tested": 1, "of": 2, "by": "trainer.limit_test_batches=1"}
    assert saved["split"] == "test" and saved["tested_batches"] == limit
    caplog.clear()  # a limit above the split's batches tests it whole: nothing to say
    cfg = compose("train", [*overrides, "trainer.limit_test_batches=5"], tmp_path / "run2")
    with caplog.at_level(logging.WARNING, logger="segnet.commands.train"):
        train(cfg)
    assert "limit_test_batches" not in caplog.text
    assert "tested_batches" not in json.loads((tmp_path / "run2" / "metrics.json").read_text())


@pytest.mark.parametrize(
    "trainer,reason",
    [
        ({"max_epochs": 1, "check_val_every_n_epoch": 2}, "max_epochs=1 ends before the first"),
        ({"max_epochs": 4, "check_val_every_n_epoch": 2, "limit_val_batches": 0}, "=0 turns"),
        ({"max_epochs": 2, "check_val_every_n_epoch": 2}, None),
        ({"max_epochs": 1, "check_val_every_n_epoch": 2, "fast_dev_run": True}, None),
        ({"max_epochs": -1, "check_val_every_n_epoch": 2}, None),  # unlimited
    ],
)
def test_settings_that_never_validate_are_known_before_training(trainer, reason):
    from segnet.runs.checks import never_validates

    said = never_validates(trainer)
    assert (said is None) if reason is None else (reason in said)


def test_a_run_that_will_not_validate_says_so_before_training(tiny_camvid, tmp_path, caplog):
    """A recipe that validates every 2 epochs, cut to 1 for a quick try: no best.ckpt will
    exist, which the run says before it trains, not only when its test finds none."""
    overrides = [*TINY_CAMVID, f"data.root={tiny_camvid}", "trainer.max_epochs=1"]
    cfg = compose("train", [*overrides, "trainer.check_val_every_n_epoch=2"], tmp_path / "run")
    with caplog.at_level(logging.INFO):
        train(cfg)
    said = caplog.text
    warned = said.index("ends before the first validation")
    assert warned < said.index("testing") and "no best.ckpt" in said
    assert "no validation reported val/miou" in said
    assert not (tmp_path / "run" / "checkpoints" / "best.ckpt").exists()


def test_an_untested_run_still_names_its_best_checkpoint_and_score(tiny_camvid, tmp_path, caplog):
    """test=false (choosing on val, a search): the summary names the best checkpoint, its
    epoch and the monitored score, as metrics.json records them."""
    overrides = [*TINY_CAMVID, f"data.root={tiny_camvid}", "trainer.max_epochs=1", "test=false"]
    with caplog.at_level(logging.INFO, logger="segnet.runs.console"):
        train(compose("train", overrides, tmp_path / "run"))
    saved = json.loads((tmp_path / "run" / "metrics.json").read_text())
    best = tmp_path / "run" / "checkpoints" / "best.ckpt"
    shown = f"best checkpoint: {best} (epoch 0, val/miou {saved['metrics']['val/miou_best']:.4f})"
    assert shown in caplog.text and "tested on" not in caplog.text
