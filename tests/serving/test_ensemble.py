"""evaluate.py with several checkpoints: each member applied as it was validated, the
probabilities averaged, and members that cannot be averaged or scored fairly refused."""

import json
import logging
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from segnet.commands.evaluate import evaluate
from segnet.commands.train import train
from segnet.data.info import DataInfo
from segnet.runs.folders import refuse_existing_run_dir
from segnet.serving.ensemble import check_members, checkpoint_paths, unfinished
from tests.conftest import compose
from tests.helpers import data_info, nifti_dataset

WINDOW = {"roi_size": [8, 8, 8], "overlap": 0.5, "mode": "gaussian", "sw_batch_size": 2}


def volume_module(window: dict, seed: int, mirror_axes: list[int] | None = None):
    from segnet.training.module import SegmentationModule

    torch.manual_seed(seed)
    info = {**data_info(3, spatial_dims=3), "sliding_window": window, "mirror_axes": mirror_axes}
    return SegmentationModule({"name": "unet", "features": [4, 8]}, info).eval()


def test_members_mirror_their_own_axes_and_one_trained_without_flips_is_named():
    from segnet.commands.evaluate import set_mirroring

    first, keeps_lr = volume_module(WINDOW, 0), volume_module(WINDOW, 1, mirror_axes=[1, 2])
    unflipped = volume_module(WINDOW, 2, mirror_axes=[])
    set_mirroring([first, keeps_lr], [Path("a.ckpt"), Path("b.ckpt")], True)
    assert first.tta and keeps_lr.tta
    assert first.mirror_axes == [0, 1, 2] and keeps_lr.mirror_axes == [1, 2]
    keeps_lr.sliding_window = {**WINDOW, "roi_size": [12] * 3}  # evaluate's data.sw_roi_size
    assert keeps_lr.mirror_axes == [1, 2]
    set_mirroring([first, unflipped], [Path("a.ckpt"), Path("c.ckpt")], False)
    assert not unflipped.tta
    with pytest.raises(ValueError, match=r"c\.ckpt was trained without flips"):
        set_mirroring([first, unflipped], [Path("a.ckpt"), Path("c.ckpt")], True)


def test_an_ensemble_averages_each_members_own_probabilities():
    first, second = volume_module(WINDOW, 0), volume_module({**WINDOW, "roi_size": [12] * 3}, 1)
    x = torch.randn(1, 1, 13, 14, 12)
    with torch.no_grad():
        # each with its own window (8^3 against 12^3 voxels) and mirroring
        p_first = first.predict_logits(x, tta=True).softmax(1)
        p_second = second.predict_logits(x, tta=True).softmax(1)
        first.ensemble_members.append(second)
        first.tta = True  # the first member's setting is the ensemble's
        averaged = first.predict_logits(x)
    assert not torch.equal(p_first.argmax(1), p_second.argmax(1))  # two different models
    torch.testing.assert_close(averaged.exp(), (p_first + p_second) / 2)
    assert averaged.shape == (1, 3, 13, 14, 12)


def test_checkpoint_paths_take_files_runs_and_multiruns_in_job_order(tmp_path):
    for job in ("0", "1", "2", "10"):
        (tmp_path / "sweep" / job / "checkpoints").mkdir(parents=True)
        (tmp_path / "sweep" / job / "checkpoints" / "best.ckpt").touch()
    jobs = checkpoint_paths(str(tmp_path / "sweep"))
    assert [p.parent.parent.name for p in jobs] == ["0", "1", "2", "10"]
    run = tmp_path / "sweep" / "1"
    assert checkpoint_paths([str(run)]) == [run / "checkpoints" / "best.ckpt"]
    assert checkpoint_paths("a.ckpt") == [Path("a.ckpt")]
    with pytest.raises(ValueError, match=r"sweep/1/checkpoints/best.ckpt is given twice"):
        checkpoint_paths([str(tmp_path / "sweep"), str(run / "checkpoints" / "best.ckpt")])
    with pytest.raises(FileNotFoundError, match="neither checkpoints/best.ckpt"):
        checkpoint_paths([str(tmp_path)])


def test_a_multirun_folder_of_several_settings_is_refused_and_a_missing_job_named(tmp_path, caplog):
    sweep = tmp_path / "sweep"
    for job, lr in enumerate(("0.01", "0.01", "0.001")):
        (sweep / str(job) / ".hydra").mkdir(parents=True)
        overrides = f"- data.fold={job % 2}\n- model.optimizer.lr={lr}\n"
        (sweep / str(job) / ".hydra" / "overrides.yaml").write_text(overrides)
        if job != 1:
            (sweep / str(job) / "checkpoints").mkdir()
            (sweep / str(job) / "checkpoints" / "best.ckpt").touch()
    with pytest.raises(ValueError, match=r"differ in more than data.fold \(jobs 0, 1: model"):
        checkpoint_paths(str(sweep))
    (sweep / "2" / ".hydra" / "overrides.yaml").write_text(
        "- data.fold=2\n- model.optimizer.lr=0.01\n"
    )
    with caplog.at_level(logging.WARNING):
        found = checkpoint_paths(str(sweep))
    assert [p.parent.parent.name for p in found] == ["0", "2"]
    assert "job(s) 1 have no checkpoints/best.ckpt" in caplog.text
    for job in ("0", "2"):  # every job failed: said so, not "holds neither ..."
        (sweep / job / "checkpoints" / "best.ckpt").unlink()
    with pytest.raises(FileNotFoundError, match=r"3 job\(s\) \(0, 1, 2\) have no checkpoints"):
        checkpoint_paths(str(sweep))


def member(class_names=("bg", "a"), spatial_dims=3, input_size=(16, 16, 16), **data_cfg):
    info = SimpleNamespace(
        spatial_dims=spatial_dims, in_channels=1, class_names=list(class_names),
        ignore_index=None, input_size=list(input_size),
        normalization={"kind": "zscore_per_volume", "clip": None, "spacing": None},
    )  # fmt: skip
    cfg = {"_target_": "segnet.data.nifti_datamodule.NiftiDataModule", "test_fraction": 0.2,
           "seed": 0, "fold": 0, "num_folds": 5, **data_cfg}  # fmt: skip
    net = torch.nn.Sequential(torch.nn.Conv3d(1, 2, 1))  # no BatchNorm: nothing to recompute
    return SimpleNamespace(data_info=info, hparams={"data_cfg": cfg}, net=net, bn_recomputed=None)


@pytest.mark.parametrize(
    ("second", "split", "message"),
    [
        (member(["bg", "b"]), "test", r"b.ckpt and a.ckpt differ in class_names"),
        (member(seed=1), "test", r"b.ckpt was trained with data.seed=1 .* test splits differ"),
        (member(fold=1), "val", r"data.split=val: b.ckpt and a.ckpt were validated on different"),
        # images are resized to the first member's input size before any network sees them
        (member(spatial_dims=2, input_size=(90, 120)), "test", r"differ in input_size"),
    ],
)
def test_members_that_cannot_be_averaged_or_scored_fairly_are_refused(second, split, message):
    two_d = second.data_info.spatial_dims == 2
    first = member(spatial_dims=2, input_size=(360, 480)) if two_d else member()
    with pytest.raises(ValueError, match=message):
        check_members([first, second], [Path("a.ckpt"), Path("b.ckpt")], split)


def test_members_of_regions_in_another_order_are_refused():
    """Regions are the outputs in their order: {whole, core} and {core, whole} are other
    networks' channels, though equal as dicts."""
    first, second = member(), member()
    first.data_info.regions = {"whole": [1, 2], "core": [2]}
    second.data_info.regions = {"core": [2], "whole": [1, 2]}
    with pytest.raises(ValueError, match=r"b.ckpt and a.ckpt differ in regions"):
        check_members([first, second], [Path("a.ckpt"), Path("b.ckpt")], "test")
    second.data_info.regions = {"whole": [1, 2], "core": [2]}
    check_members([first, second], [Path("a.ckpt"), Path("b.ckpt")], "test")


def test_folds_of_one_split_pass_on_test():
    # an older checkpoint's description: its normalisation does not name a spacing (read as
    # None), and for volumes each member keeps its own training patch (its window)
    described = {**data_info(2, spatial_dims=3), "class_names": ["bg", "a"]}
    described["normalization"] = {"kind": "zscore_per_volume", "clip": None}
    described["input_size"] = [32, 48, 32]
    older = member(fold=1)
    older.data_info = DataInfo.from_dict(described)
    check_members([member(), older], [Path("a.ckpt"), Path("b.ckpt")], "test", True)


@pytest.fixture(scope="module")
def two_folds(tmp_path_factory):
    """Two tiny models of one split, trained on folds 0 and 1, laid out as a multirun."""
    tmp = tmp_path_factory.mktemp("folds")
    root = nifti_dataset(tmp / "data", "msd", n=10, shape=(19, 23, 17))
    for fold in (0, 1):
        overrides = [
            "experiment=hippocampus_unet3d", f"data.root={root}", f"data.fold={fold}",
            "data.num_folds=2", "data.patch_size=[16,16,16]", "data.batch_size=2",
            "data.num_workers=0", "data.test_fraction=0.2", "model.net.features=[4,8,8]",
            "model.net.norm=batch",
            "trainer.max_epochs=2", "trainer.accelerator=cpu", "trainer.log_every_n_steps=1",
            f"seed={fold}",
        ]  # fmt: skip
        train(compose("train", overrides, tmp / "sweep" / str(fold)))
    return tmp / "sweep"


def test_an_ensemble_of_folds_is_scored_on_the_test_split(two_folds, tmp_path):
    ckpts = [str(two_folds / f / "checkpoints" / "best.ckpt") for f in ("0", "1")]
    common = ["trainer.accelerator=cpu", "tta=false"]
    listed, objects = evaluate(
        compose("evaluate", [f"ckpt_path=[{','.join(ckpts)}]", *common], tmp_path / "list")
    )
    record = json.loads((tmp_path / "list" / "metrics.json").read_text())
    assert record["ckpt_path"] == ckpts and record["split"] == "test"
    assert [m["ckpt_path"] for m in record["members"]] == ckpts
    assert record["members"][1]["sliding_window"]["roi_size"] == [16, 16, 16]
    assert len(objects["module"].ensemble_members) == 1
    assert (tmp_path / "list" / "per_case.csv").is_file()
    # the ensemble's post-processing is chosen on its out-of-fold predictions: each of the
    # 8 cases outside the test split predicted by the one fold that held it out
    chosen = record["postprocessing"]
    assert chosen["chosen_on"].startswith("8 validation case(s)"), chosen
    assert "by the 1 member(s) holding it out (8 cases)" in chosen["chosen_on"]
    assert {"val_dice_without", "val_dice_with", "applied"} <= set(chosen)
    # the multirun folder stands for the same two checkpoints, in job order
    folder, _ = evaluate(compose("evaluate", [f"ckpt_path={two_folds}", *common], tmp_path / "dir"))
    assert folder == pytest.approx(listed, abs=1e-6, nan_ok=True)  # a class never predicted: nan
    single, _ = evaluate(compose("evaluate", [f"ckpt_path={ckpts[0]}", *common], tmp_path / "one"))
    assert single["test/loss"] != pytest.approx(listed["test/loss"], abs=1e-6)


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("data.split=val", "validated on different cases"),
        ("recompute_bn=true", "recompute_bn=true with an ensemble: .*best.ckpt"),
        ("data.split=all", "data.split=all: .* validated on different cases"),
        # no test cases: the data falls back to val, which is refused once resolved
        ("+data.test_fraction=0.0", "data.split=val: .* validated on different cases"),
    ],
)
def test_an_ensemble_of_folds_refuses_before_testing(two_folds, tmp_path, setting, message):
    cfg = compose(
        "evaluate", [f"ckpt_path={two_folds}", "trainer.accelerator=cpu", setting], tmp_path
    )
    with pytest.raises(ValueError, match=message):
        evaluate(cfg)
    assert not (tmp_path / "metrics.json").exists()


def test_a_folder_counts_as_new_cases_only_when_no_member_trained_from_it(tmp_path):
    from segnet.serving.ensemble import scores_other_data

    def member(root):
        return SimpleNamespace(hparams={"data_cfg": {"root": root}})

    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    assert not scores_other_data({"root": a}, [member(a), member(b)])  # the first's folder
    assert scores_other_data({"root": str(tmp_path / "c")}, [member(a), member(b)])
    # recorded relative to wherever training ran (paths.data_dir: data)
    assert not scores_other_data({"root": "/srv/seg/data/CamVid"}, [member("data/CamVid")])
    assert scores_other_data({"root": "/srv/seg/data/CamVid2"}, [member("data/CamVid")])
    assert not scores_other_data({"split": "val"}, [member(a)])  # no folder given


@pytest.mark.parametrize("split", ["val", "all"])
def test_the_training_folder_named_again_is_no_way_around_the_split_checks(
    two_folds, tmp_path, split, monkeypatch
):
    """data.root scores new cases without the checks on the members' splits only when it
    is another folder than the one they trained from, not the same one given again (here
    as a relative path)."""
    root = two_folds.parent / "data"
    monkeypatch.chdir(root.parent)
    overrides = [f"ckpt_path={two_folds}", "trainer.accelerator=cpu", f"data.split={split}"]
    cfg = compose("evaluate", [*overrides, "data.root=data/."], tmp_path)
    with pytest.raises(ValueError, match=f"data.split={split}: .* validated on different cases"):
        evaluate(cfg)
    assert not (tmp_path / "metrics.json").exists()
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)  # another folder: its cases are taken as new
    index = json.loads((copy / "dataset.json").read_text())
    swapped = {**index, "labels": {"0": "background", "1": "two", "2": "one"}}
    (copy / "dataset.json").write_text(json.dumps(swapped))
    cfg = compose("evaluate", [*overrides, f"data.root={copy}"], tmp_path / "swapped")
    with pytest.raises(ValueError, match=r"names the label values \['background', 'two', 'one'\]"):
        evaluate(cfg)
    (copy / "dataset.json").write_text(json.dumps(index))
    evaluate(compose("evaluate", [*overrides, f"data.root={copy}", "tta=false"], tmp_path / "ev"))
    assert json.loads((tmp_path / "ev" / "metrics.json").read_text())["split"] == split


def test_a_member_whose_run_stopped_early_is_named(two_folds, tmp_path, caplog):
    """A multirun folder takes every job's best.ckpt, an interrupted job's too: evaluate
    says which member did not train to its end, and not one that early stopping or
    trainer.max_time ended as asked."""
    sweep = tmp_path / "sweep"
    shutil.copytree(two_folds, sweep, ignore=shutil.ignore_patterns("tensorboard"))
    for job, stopping in (("0", True), ("1", False)):  # both after 2 of 5 epochs
        last = sweep / job / "checkpoints" / "last.ckpt"
        ckpt = torch.load(last, map_location="cpu", weights_only=False)
        ckpt["segnet"] = {"max_epochs": 5, "stopping": stopping}
        torch.save(ckpt, last)
    cfg = compose("evaluate", [f"ckpt_path={sweep}", "trainer.accelerator=cpu"], tmp_path / "ev")
    with caplog.at_level(logging.WARNING):
        evaluate(cfg)
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("1/checkpoints/best.ckpt: its run's last checkpoint is from epoch 2 of the 5" in w
               for w in warned)  # fmt: skip
    assert not any("0/checkpoints/best.ckpt" in w for w in warned)


def test_early_stopping_marks_the_last_checkpoint_as_a_stop_on_purpose(tmp_path):
    root = nifti_dataset(tmp_path / "data", "msd", n=6, shape=(19, 23, 17))
    overrides = [
        "experiment=hippocampus_unet3d", f"data.root={root}", "data.patch_size=[16,16,16]",
        "data.batch_size=2", "data.num_workers=0", "data.test_fraction=0.2",
        "model.net.features=[4,8,8]", "trainer.accelerator=cpu", "trainer.max_epochs=20",
        "trainer.check_val_every_n_epoch=1", "test=false",
        # no validation can improve by half a Dice point over the last: stops at epoch 2
        "callbacks=early_stopping", "callbacks.early_stopping.patience=1",
        "callbacks.early_stopping.min_delta=0.5",
    ]  # fmt: skip
    train(compose("train", overrides, tmp_path / "run"))
    last = tmp_path / "run" / "checkpoints" / "last.ckpt"
    ckpt = torch.load(last, map_location="cpu", weights_only=False)
    assert ckpt["epoch"] + 1 < 20
    assert ckpt["segnet"]["max_epochs"] == 20 and ckpt["segnet"]["stopping"] is True
    assert unfinished(tmp_path / "run" / "checkpoints" / "best.ckpt") is None
    # untested, the run still records its best validation score for sweeps and searches
    from hydra_plugins.segnet_parallel.launcher import best_metric

    record = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert record["split"] is None and record["monitor"] == "val/dice"
    assert record["ckpt_path"] == str(tmp_path / "run" / "checkpoints" / "best.ckpt")
    assert not any(k.startswith("test/") for k in record["metrics"])
    assert best_metric(tmp_path / "run") == record["metrics"]["val/dice_best"] > 0


def test_predict_averages_the_same_members_as_evaluate(two_folds, tmp_path):
    """segnet.serving.predict with comma-separated models writes the masks evaluate.py saves for
    the same ensemble: one way of averaging, whichever entry point."""
    import nibabel as nib

    from segnet.commands.predict import main as predict_main

    ckpts = [str(two_folds / f / "checkpoints" / "best.ckpt") for f in ("0", "1")]
    cfg = compose(
        "evaluate",
        [f"ckpt_path={two_folds}", "trainer.accelerator=cpu", "save_predictions=true"],
        tmp_path / "ev",
    )
    evaluate(cfg)
    saved = sorted((tmp_path / "ev" / "predictions").glob("*.nii.gz"))
    assert len(saved) == 2
    images = two_folds.parent / "data" / "imagesTr"
    predict_main(
        [",".join(ckpts), *[str(images / p.name) for p in saved], "--out", str(tmp_path / "p")]
    )
    for path in saved:
        by_evaluate = np.asarray(nib.load(str(path)).dataobj)
        by_predict = np.asarray(nib.load(str(tmp_path / "p" / path.name)).dataobj)
        assert (by_evaluate == by_predict).mean() > 0.999
    # and unlike either member alone, somewhere
    predict_main([ckpts[0], str(images / saved[0].name), "--out", str(tmp_path / "one")])
    alone = np.asarray(nib.load(str(tmp_path / "one" / saved[0].name)).dataobj)
    assert not np.array_equal(alone, np.asarray(nib.load(str(saved[0])).dataobj))


@pytest.mark.parametrize(
    ("should_stop", "can_stop", "sigterm", "expected"),
    [
        (True, True, False, True),  # early stopping or max_time, and allowed to stop
        (True, False, False, False),  # asked before trainer.min_epochs: training goes on
        (True, True, True, False),  # SIGTERM or Ctrl+C: interrupted
        (False, True, False, False),  # still training
    ],
)
def test_only_a_stop_the_trainer_carries_out_counts_as_on_purpose(
    should_stop, can_stop, sigterm, expected
):
    from segnet.training.module import stopping_on_purpose

    trainer = SimpleNamespace(
        should_stop=should_stop,
        received_sigterm=sigterm,
        fit_loop=SimpleNamespace(_can_stop_early=can_stop),
    )
    assert stopping_on_purpose(trainer) is expected


def test_an_ensemble_that_would_mirror_a_member_trained_without_flips_is_not_exported(
    tmp_path, monkeypatch
):
    import segnet.serving.export
    from segnet.serving.export import export_ensemble

    paths = []
    for i, (axes, tta) in enumerate((([1, 2], True), ([], False))):
        module = volume_module(WINDOW, i, mirror_axes=axes)
        module.hparams["tta"] = tta  # the recipe's model.tta, as training records it
        paths.append(tmp_path / f"member{i}.ckpt")
        torch.save(
            {"state_dict": module.state_dict(), "hyper_parameters": dict(module.hparams)}, paths[-1]
        )
    with pytest.raises(ValueError, match=r"member1\.ckpt was trained without flips"):
        export_ensemble(paths, tmp_path / "out", ("safetensors",))
    assert not (tmp_path / "out").exists()  # refused before anything was written
    read = []
    load = segnet.serving.export.load_model
    monkeypatch.setattr(segnet.serving.export, "load_model", lambda p: read.append(p) or load(p))
    export_ensemble(paths[::-1], tmp_path / "out", ("safetensors",))  # tested unmirrored
    assert read == paths[::-1]  # each member's checkpoint read once, for checks and export
    card = json.loads((tmp_path / "out" / "member_1" / "model.json").read_text())
    assert card["deployment"]["onnx"]["mirroring"] == {
        "as_tested": True,  # this member's own recipe; the ensemble follows its first
        "axes": [3, 4],
        "run_on": "the input flipped along every subset of the axes [3, 4] of the NCDHW "
        "layout (4 runs, the unflipped input included)",
        "combine": "flip each output back, softmax over classes, average; logits = log(mean)",
    }


def test_an_ensemble_whose_member_fails_its_reload_check_leaves_nothing(tmp_path, monkeypatch):
    """member_0 exported whole, then member_1's file computes other logits: no ensemble is
    written, member_0's folder goes too, and the same export can be run again."""
    import segnet.serving.export
    from segnet.serving.export import export_ensemble

    paths = []
    for i in range(2):
        paths.append(tmp_path / f"member{i}.ckpt")
        module = volume_module(WINDOW, i)
        torch.save(
            {"state_dict": module.state_dict(), "hyper_parameters": dict(module.hparams)}, paths[-1]
        )
    load = segnet.serving.export.LOADERS["safetensors"]

    def off_for_the_second(path):
        net = load(path)
        return (lambda x: net(x) + 1.0) if "member_1" in str(path) else net

    out = tmp_path / "out"
    with monkeypatch.context() as patched:
        patched.setitem(segnet.serving.export.LOADERS, "safetensors", off_for_the_second)
        with pytest.raises(ValueError, match=r"member_1.*reloaded, it gives logits up to 1"):
            export_ensemble(paths, out, ("safetensors",))
    assert list(out.iterdir()) == []
    export_ensemble(paths, out, ("safetensors",))
    assert (out / "ensemble.json").is_file()


def test_an_exported_ensemble_folder_predicts_and_scores_as_its_checkpoints(two_folds, tmp_path):
    """python -m segnet.export with a multirun folder of folds writes one folder that
    segnet.serving.predict and evaluate.py take as the ensemble of its members: the same masks
    and metrics as the checkpoints themselves, and the folder is never written over."""
    import nibabel as nib

    from segnet.commands.predict import main as predict_main
    from segnet.serving.export import export_ensemble
    from segnet.serving.loading import load_model

    ckpts = checkpoint_paths(str(two_folds))
    out = tmp_path / "export"
    export_ensemble(ckpts, out, ("safetensors",))
    listing = json.loads((out / "ensemble.json").read_text())
    assert listing["members"] == ["member_0", "member_1"]
    assert listing["checkpoints"] == [str(p) for p in ckpts]
    assert checkpoint_paths(str(out)) == [out / f"member_{i}" / "model.safetensors" for i in (0, 1)]
    with pytest.raises(FileExistsError, match="never overwritten"):
        export_ensemble(ckpts, out, ("safetensors",))
    with pytest.raises(ValueError, match="exported ensemble of 2 models"):
        load_model(out)
    # no other command takes the folder as its run folder (a single model's export there
    # would sit beside the ensemble that predict reads, with the folder's record rewritten)
    with pytest.raises(SystemExit, match=r"already holds a run's outputs \(ensemble\.json"):
        refuse_existing_run_dir([f"ckpt_path={ckpts[0]}", f"hydra.run.dir={out}"])
    (out / "ensemble.json").unlink()  # an ensemble export stopped before its listing
    with pytest.raises(SystemExit, match=r"outputs \(member_0\)"):
        refuse_existing_run_dir([f"hydra.run.dir={out}"])
    (out / "ensemble.json").write_text(json.dumps(listing))
    # the same model twice is one model, whichever command meets it first
    with pytest.raises(ValueError, match="hold the same weights"):
        export_ensemble([ckpts[0], ckpts[0]], tmp_path / "twice", ("safetensors",))
    assert not (tmp_path / "twice").exists()
    with pytest.raises(ValueError, match=r"example_size=\[4, 4, 4\]: this network takes"):
        export_ensemble(ckpts, tmp_path / "small", ("onnx",), [4, 4, 4])
    assert not (tmp_path / "small").exists()

    images = sorted((two_folds.parent / "data" / "imagesTr").glob("*.nii.gz"))[:2]
    inputs = [str(p) for p in images]
    predict_main([",".join(map(str, ckpts)), *inputs, "--out", str(tmp_path / "by_ckpts")])
    predict_main([str(out), *inputs, "--out", str(tmp_path / "by_export")])
    for image in images:
        by_ckpts = np.asarray(nib.load(str(tmp_path / "by_ckpts" / image.name)).dataobj)
        by_export = np.asarray(nib.load(str(tmp_path / "by_export" / image.name)).dataobj)
        assert np.array_equal(by_ckpts, by_export)
    with pytest.raises(SystemExit, match="a folder without model.json or ensemble.json"):
        predict_main([str(tmp_path / "by_ckpts"), inputs[0], "--out", str(tmp_path / "none")])

    common = ["trainer.accelerator=cpu", "tta=false"]
    evaluate(compose("evaluate", [f"ckpt_path={two_folds}", *common], tmp_path / "ev_ckpts"))
    evaluate(compose("evaluate", [f"ckpt_path={out}", *common], tmp_path / "ev_export"))
    scores = [
        json.loads((tmp_path / run / "metrics.json").read_text())["metrics"]
        for run in ("ev_ckpts", "ev_export")
    ]
    assert scores[0]["test/dice"] == pytest.approx(scores[1]["test/dice"], abs=1e-6)


def test_scoring_every_case_says_which_trained_the_checkpoint(two_folds, tmp_path, caplog):
    """evaluate.py data.split=all scores the training and validation cases too: the
    figures are not held out, and the log says so."""
    best = two_folds / "0" / "checkpoints" / "best.ckpt"
    ev = [f"ckpt_path={best}", "data.split=all", "trainer.accelerator=cpu", "tta=false"]
    with caplog.at_level(logging.WARNING):
        evaluate(compose("evaluate", ev, tmp_path / "ev"))
    assert "data.split=all: " in caplog.text
    assert "their scores are not held-out figures" in caplog.text


def test_checkpoints_record_their_split_and_an_evaluation_refuses_their_training_cases(
    two_folds, caplog
):
    """A split drawn from a folder changes when cases are added to it: each checkpoint
    keeps its cases by name, and scoring one it trained or was validated on is refused."""
    from segnet.commands.evaluate import load_module
    from segnet.serving.ensemble import check_recorded_splits

    paths = [two_folds / f / "checkpoints" / "best.ckpt" for f in ("0", "1")]
    modules = [load_module(str(p)) for p in paths]
    first, second = (m.recorded_splits for m in modules)
    assert first["test"] == second["test"] and len(first["test"]) == 2
    assert set(first["val"]) <= set(second["train"])  # folds: one's val, the other's train
    check_recorded_splits(modules, paths, "test", first["test"])  # as trained: fine
    with pytest.raises(ValueError, match=r"1 of the 2 cases to score .* trained or validated"):
        check_recorded_splits(modules, paths, "test", [first["test"][0], first["val"][0]])
    # another folder (data.root=...) or every case (data.split=all): scored, but a case
    # named as one the checkpoint trained or validated on is said not to be held out
    with caplog.at_level(logging.WARNING):
        check_recorded_splits(modules[:1], paths[:1], "test", first["test"], new_cases=True)
        assert "not held-out" not in caplog.text
        check_recorded_splits(modules[:1], paths[:1], "test", first["train"], new_cases=True)
        assert f"{len(first['train'])} of the {len(first['train'])} cases scored" in caplog.text
        caplog.clear()
        every = sorted(first["train"] + first["val"] + first["test"])
        check_recorded_splits(modules[:1], paths[:1], "all", every)
    count = len(first["train"]) + len(first["val"])
    assert f"data.split=all: {count} of the {len(every)} cases scored" in caplog.text
    assert "their scores are not held-out figures" in caplog.text
