import json

import numpy as np
import pytest
import torch
from PIL import Image

from segnet.data import camvid
from segnet.data.camvid_datamodule import CamVidDataModule
from tests.helpers import camvid_like


@pytest.fixture
def root(tmp_path):
    return camvid_like(tmp_path / "CamVid")


def test_list_files_resolve_against_the_root(root):
    pairs = camvid.split_pairs(root, "train")
    assert len(pairs) == 6
    assert pairs[0] == (root / "train" / "train_000.png", root / "trainannot" / "train_000.png")


def test_pairs_by_name_without_list_files(tmp_path):
    root = camvid_like(tmp_path / "c", list_files=False)
    assert [p[0].name for p in camvid.split_pairs(root, "val")] == [
        "val_000.png",
        "val_001.png",
        "val_002.png",
    ]


def test_split_is_decoded_once(root, monkeypatch):
    dm = CamVidDataModule(str(root), num_workers=0)
    calls = []
    real = camvid._read_png
    monkeypatch.setattr(camvid, "_read_png", lambda p, m: calls.append(p) or real(p, m))
    images, labels, names = dm.raw("train")
    dm.raw("train")
    dm.setup("fit")
    assert images.shape == (6, 3, 45, 61) and images.dtype == torch.uint8
    assert labels.shape == (6, 45, 61)
    assert len(calls) == 2 * 6 + 2 * 3  # train once, val once (image + label each)


@pytest.mark.parametrize(
    "breakage,match",
    [
        ("no_label", r"train_001.png has no label: expected .*trainannot/train_001.png"),
        ("size", r"train_002.png is 61x45 but its label .*train_002.png is 30x20"),
        ("value", r"label .*train_003.png holds values \[12, 200\]"),
        ("corrupt", r"cannot read .*train_004.png"),
        ("empty", r"split 'train' under .* is empty"),
        ("rgb_label", r"label map .*train_000.png is a RGB image"),
    ],
)
def test_bad_data_errors_name_the_file(root, breakage, match):
    if breakage == "no_label":
        (root / "trainannot" / "train_001.png").unlink()
    elif breakage == "size":
        Image.fromarray(np.zeros((20, 30), np.uint8)).save(root / "trainannot" / "train_002.png")
    elif breakage == "value":
        label = np.zeros((45, 61), np.uint8)
        label[0, :2] = [12, 200]
        Image.fromarray(label).save(root / "trainannot" / "train_003.png")
    elif breakage == "corrupt":
        (root / "train" / "train_004.png").write_bytes(b"\x89PNG\r\n\x1a\n truncated")
    elif breakage == "empty":
        (root / "train.txt").write_text("\n")
    elif breakage == "rgb_label":
        Image.fromarray(np.zeros((45, 61, 3), np.uint8)).save(root / "trainannot" / "train_000.png")
    with pytest.raises(camvid.CamVidDataError, match=match):
        camvid.load_split(root, "train")


def test_missing_data_names_the_path_and_both_ways(tmp_path):
    dm = CamVidDataModule(str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError) as err:
        dm.prepare_data()
    text = str(err.value)
    assert str((tmp_path / "nowhere").resolve()) in text
    assert "data.download=true" in text and "data.root=" in text


def test_a_volume_dataset_given_to_an_image_model_is_named_as_such(tmp_path):
    from tests.helpers import nifti_dataset

    volumes = nifti_dataset(tmp_path / "Task04", "msd", n=2)
    with pytest.raises(FileNotFoundError, match=r"holds a volume dataset \(dataset.json, imagesTr"):
        CamVidDataModule(str(volumes)).prepare_data()


@pytest.mark.parametrize("mode", ["P", "I;16"])
def test_labels_keep_their_class_indices_in_palette_and_16_bit_pngs(root, mode):
    indices = (np.arange(45 * 61) % 12).reshape(45, 61).astype(np.uint8)
    path = root / "trainannot" / "train_000.png"
    if mode == "P":  # indices stored with the CamVid colours as the palette
        im = Image.fromarray(indices, mode="P")
        im.putpalette(np.asarray(camvid.PALETTE, np.uint8).ravel().tolist())
    else:
        im = Image.fromarray(indices.astype(np.uint16))
    im.save(path)
    assert Image.open(path).mode == mode
    _, labels, names = camvid.load_split(root, "train")
    assert labels.dtype == torch.uint8
    assert np.array_equal(labels[names.index("train_000.png")].numpy(), indices)


def weights(root, **kwargs):
    """The class weights a training run gets (computed in setup("fit"))."""
    dm = CamVidDataModule(str(root), **kwargs)
    dm.setup("fit")
    return None if dm.class_weights is None else torch.tensor(dm.class_weights)


def weight_cache(cache_dir):
    (entry,) = (cache_dir / "segnet").glob("camvid_weights_*.json")
    return entry


def test_class_weights_cached_and_recomputed_when_data_changes(root, statistics_cache):
    """Kept in the statistics cache ($XDG_CACHE_HOME/segnet, a test session's folder
    here), never in the data folder; changed data is computed again."""
    for old in (statistics_cache / "segnet").glob("camvid_weights_*.json"):
        old.unlink()
    w1 = weights(root)
    cache = weight_cache(statistics_cache)
    assert not [p for p in root.iterdir() if p.name.startswith(".segnet")]
    # same data: the cached numbers are used (tamper with them to prove it)
    cached = json.loads(cache.read_text())
    cached["weights"][0] = 123456.0
    cache.write_text(json.dumps(cached))
    assert weights(root)[0] == 123456.0
    # changed data: recomputed
    label = np.zeros((45, 61), np.uint8)
    Image.fromarray(label).save(root / "trainannot" / "train_000.png")
    w2 = weights(root)
    assert not torch.allclose(w1, w2)
    assert len(w2) == 11 and (w2[:11] > 0).all()


def test_an_unreadable_class_weight_cache_is_computed_again(root, statistics_cache):
    computed = weights(root)
    cache = next(
        p for p in (statistics_cache / "segnet").glob("camvid_weights_*.json")
        if np.allclose(json.loads(p.read_text()).get("weights"), computed.tolist())
    )  # fmt: skip
    for broken in ('{"key": "', "[]", '{"key": null}'):  # cut short, or not the cache's shape
        cache.write_text(broken)
        torch.testing.assert_close(weights(root), computed)
        assert np.allclose(json.loads(cache.read_text())["weights"], computed.tolist())


def test_a_read_only_data_folder_is_never_written_to(root, tmp_path, monkeypatch):
    import errno
    from pathlib import Path

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    write, unlink = Path.write_text, Path.unlink

    def read_only(method):  # what a read-only mount answers for files in the data folder
        def wrapped(self, *args, **kwargs):
            if root in self.parents:
                raise OSError(errno.EROFS, "Read-only file system", str(self))
            return method(self, *args, **kwargs)

        return wrapped

    monkeypatch.setattr(Path, "write_text", read_only(write))
    monkeypatch.setattr(Path, "unlink", read_only(unlink))
    computed = weights(root)
    cached = json.loads(weight_cache(tmp_path / "cache").read_text())
    assert np.allclose(cached["weights"], computed.tolist())


def test_class_weight_options(root):
    assert weights(root, class_weights="none") is None
    assert weights(root, class_weights=[1.0] * 11).tolist() == [1.0] * 11
    sqrt = weights(root, class_weights="median_frequency_sqrt")
    torch.testing.assert_close(sqrt, weights(root).sqrt())
    # a power between the paper's weights (1) and their square root (0.5)
    power = weights(root, class_weights="median_frequency", class_weights_power=0.625)
    torch.testing.assert_close(power, weights(root).pow(0.625))
    torch.testing.assert_close(
        weights(root, class_weights="median_frequency", class_weights_power=0.5), sqrt
    )
    # wrong settings are refused when the DataModule is made, before any data is read
    with pytest.raises(ValueError, match="has 3 entries; the data has 11 classes"):
        CamVidDataModule(str(root), class_weights=[1, 2, 3])
    with pytest.raises(ValueError, match="class_weights='median'"):
        CamVidDataModule(str(root), class_weights="median")
    for bad in ([-1.0] + [1.0] * 10, [0.0] * 11, [float("nan")] + [1.0] * 10):
        with pytest.raises(ValueError, match="each 0 or above .* not all 0"):
            CamVidDataModule(str(root), class_weights=bad)
    # a power with weights it cannot apply to is refused, not ignored
    with pytest.raises(ValueError, match="class_weights_power=0.5 applies to"):
        CamVidDataModule(str(root), class_weights="median_frequency_sqrt", class_weights_power=0.5)
    with pytest.raises(ValueError, match="class_weights_power=0.5 applies to"):
        CamVidDataModule(str(root), class_weights=[1.0] * 11, class_weights_power=0.5)
    with pytest.raises(ValueError, match="class_weights_power=-1"):
        CamVidDataModule(str(root), class_weights_power=-1)
    # a misspelt rule is named as such, even beside a power (as in camvid_quick)
    with pytest.raises(ValueError, match="class_weights='median_frequncy': use"):
        CamVidDataModule(str(root), class_weights="median_frequncy", class_weights_power=0.625)


def test_augmentation_moves_image_and_mask_together(tmp_path):
    """Labels are recoverable from colours, so after augmentation every non-void pixel's
    colour must still decode to its label."""
    root = camvid_like(tmp_path / "c", counts={"train": 2, "val": 1})
    dm = CamVidDataModule(
        str(root),
        image_size=(32, 48),
        num_workers=0,
        scale=(0.6, 1.6),
        mean=(0, 0, 0),
        std=(1, 1, 1),
        class_weights="none",
    )
    dm.setup("fit")
    colours = np.random.default_rng(0).integers(0, 256, size=(12, 3)) / 255.0
    torch.manual_seed(0)
    agree, misaligned = [], []
    for _ in range(10):
        s = dm.datasets["train"][0]
        assert s["image"].shape == (3, 32, 48) and s["label"].shape == (32, 48)
        img = s["image"].permute(1, 2, 0).numpy()
        lab = s["label"].numpy()
        dist = ((img[:, :, None, :] - colours[None, None]) ** 2).sum(-1)
        decoded = dist.argmin(-1)
        inner = lab != camvid.VOID
        agree.append((decoded[inner] == lab[inner]).mean())
        shifted = np.flip(lab, 1)  # what a mask that did not follow a flip would look like
        keep = shifted != camvid.VOID
        misaligned.append((decoded[keep] == shifted[keep]).mean())
    # resampling and noise blur class borders, but aligned pairs stay far above misaligned
    assert np.mean(agree) > 0.6
    assert np.mean(misaligned) < 0.3


def test_validation_keeps_native_labels_with_reduced_input(root):
    dm = CamVidDataModule(str(root), image_size=(24, 32), num_workers=0)
    dm.setup("fit")
    s = dm.datasets["val"][0]
    assert s["image"].shape == (3, 24, 32)
    assert s["label"].shape == (45, 61)


@pytest.mark.parametrize("setting", ["batch_size", "eval_batch_size", "num_workers"])
def test_bad_counts_are_refused_before_any_data_is_read(setting, tmp_path):
    from segnet.data.camvid_datamodule import CamVidDataModule

    with pytest.raises(ValueError, match=rf"data\.{setting}='abc': expected a whole number"):
        CamVidDataModule(tmp_path / "nowhere", **{setting: "abc"})


def test_training_crops_are_cut_from_frames_at_the_image_size(root):
    dm = CamVidDataModule(
        str(root), image_size=(30, 40), crop_size=(16, 24), scale=(1.0, 1.0), num_workers=0
    )
    dm.setup("fit")
    train = dm.datasets["train"][0]
    assert train["image"].shape == (3, 16, 24) and train["label"].shape == (16, 24)
    # evaluation sees whole frames at image_size, labels at native size
    val = dm.datasets["val"][0]
    assert val["image"].shape == (3, 30, 40) and val["label"].shape == (45, 61)
    assert dm.info().input_size == [30, 40]


@pytest.mark.parametrize(
    "crop, image_size, match",
    [
        ((40, 24), (30, 40), r"data\.crop_size=\[40, 24\] is larger than the frames"),
        ((16,), (30, 40), r"data\.crop_size=\[16\]: give \[H, W\]"),
        ((50, 24), None, r"data\.crop_size=\[50, 24\] is larger than the frames .*\[45, 61\]"),
    ],
)
def test_a_crop_larger_than_its_frames_is_refused(root, crop, image_size, match):
    with pytest.raises(ValueError, match=match):
        dm = CamVidDataModule(str(root), image_size=image_size, crop_size=crop, num_workers=0)
        dm.setup("fit")


@pytest.mark.parametrize(
    "setting, match",
    [
        ({"image_size": (64,)}, r"data\.image_size=\[64\]: give \[H, W\]"),
        ({"image_size": (0, 96)}, r"data\.image_size=\[0, 96\]: give \[H, W\]"),
        ({"mean": (0.5,)}, r"data\.mean=\[0\.5\]: give one value per image channel \(3\)"),
        ({"std": (0.2, 0.2, 0.0)}, r"data\.std=.*above 0"),
        ({"scale": (1.5, 1.0)}, r"data\.scale=\[1\.5, 1\.0\]: give \[min, max\]"),
        ({"color_jitter": -1.0}, r"data\.color_jitter=-1\.0"),
    ],
)
def test_preprocessing_and_augmentation_settings_are_checked_before_the_data(setting, match):
    """Each would otherwise train silently wrong (one mean for three channels, no jitter) or
    fail only at the first step, after every frame was read."""
    with pytest.raises(ValueError, match=match):
        CamVidDataModule("nowhere", num_workers=0, **setting)


def test_a_missing_test_split_falls_back_to_val_and_an_unknown_one_is_refused(tmp_path, caplog):
    root = camvid_like(tmp_path / "c", counts={"train": 2, "val": 2})  # as the shared copy
    dm = CamVidDataModule(str(root), num_workers=0, split="test")
    with caplog.at_level("WARNING"):
        assert dm.test_split() == "val"
    assert "testing on 'val' instead" in caplog.text
    dm = CamVidDataModule(str(root), num_workers=0, split="tset")
    with pytest.raises(ValueError, match=r"data.split='tset'.*it has train, val\)"):
        dm.test_split()


def one_pixel_line(column: int) -> torch.Tensor:
    """A 6x6 frame of class 0 crossed by a one-pixel vertical line of class 1."""
    labels = torch.zeros(1, 6, 6, dtype=torch.uint8)
    labels[0, :, column] = 1
    return labels


def test_rare_first_keeps_a_thin_line_that_nearest_sampling_drops():
    from segnet.data.transforms import resize_labels

    labels = one_pixel_line(column=3)  # between nearest's samples (columns 1 and 4)
    assert not (resize_labels(labels, (2, 2)) == 1).any()
    kept = resize_labels(labels, (2, 2), priority=[1.0, 5.0])
    assert kept.tolist() == [[[0, 1], [0, 1]]] and kept.dtype == labels.dtype
    # the same line, ranked below the background, gives way to it
    assert resize_labels(labels, (2, 2), priority=[5.0, 1.0]).tolist() == [[[0, 0], [0, 0]]]


def test_rare_first_ranks_void_last_and_falls_back_to_the_most_common_value():
    from segnet.data.transforms import resize_labels

    void_line = one_pixel_line(column=3) * camvid.VOID
    assert resize_labels(void_line, (2, 2), priority=[1.0]).tolist() == [[[0, 0], [0, 0]]]
    # a 3x3 block of nine values, none covering a third: the most common (class 4, 2/9) wins
    block = torch.tensor([[[4, 4, 0], [1, 2, 3], [5, 6, 7]]], dtype=torch.uint8)
    assert resize_labels(block, (1, 1), priority=list(range(8))).item() == 4


def test_label_resize_option_reaches_the_training_labels_only(root):
    nearest = CamVidDataModule(str(root), image_size=(15, 20), scale=(1.0, 1.0), num_workers=0)
    rare = CamVidDataModule(
        str(root), image_size=(15, 20), scale=(1.0, 1.0), num_workers=0, label_resize="rare_first"
    )
    for dm in (nearest, rare):
        dm.setup("fit")
    labels = {name: dm.datasets["train"].labels for name, dm in (("n", nearest), ("r", rare))}
    assert labels["n"].shape == labels["r"].shape == (6, 15, 20)
    assert not torch.equal(labels["n"], labels["r"])  # 3x3 blocks straddle the 8-px regions
    assert torch.equal(nearest.datasets["val"].labels, rare.datasets["val"].labels)
    with pytest.raises(ValueError, match=r"data\.label_resize='mode': use one of nearest, rare"):
        CamVidDataModule(str(root), label_resize="mode")


def test_loaders_shared_by_more_processes_than_items(root, monkeypatch):
    """Four processes: 6 training frames give each one a batch (not none, as dropping the
    last partial batch of each process's share would); 3 validation frames are refused
    with what to do, instead of Lightning's sampler failing an assertion in one process."""
    import torch.distributed as dist

    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_world_size", lambda *a: 4)
    monkeypatch.setattr(dist, "get_rank", lambda *a: 0)
    dm = CamVidDataModule(str(root), batch_size=4, num_workers=0)
    dm.setup("fit")
    assert len(dm.train_dataloader()) == 1
    with pytest.raises(ValueError, match=r"3 evaluation item\(s\) cannot be shared by 4 processes"):
        dm.val_dataloader()


def test_the_mirror_axis_recorded_is_the_width_when_training_flips_it(tmp_path):
    # what test-time mirroring flips: (height, width) -> the width, or nothing to mirror
    assert CamVidDataModule(str(tmp_path)).describe().mirror_axes == [1]
    assert CamVidDataModule(str(tmp_path), hflip=False).describe().mirror_axes == []


def test_a_split_of_mixed_image_sizes_names_an_odd_frame(root):
    from segnet.data.camvid import CamVidDataError, load_split

    for folder in ("train", "trainannot"):
        frame = root / folder / "train_004.png"
        Image.open(frame).resize((30, 20)).save(frame)
    with pytest.raises(
        CamVidDataError,
        match=r"mixes image sizes: 5 frames at 61x45 \(W x H\), 1 at 30x20, e\.g\. .*train_004",
    ):
        load_split(root, "train")


def test_a_copy_of_some_splits_says_which_it_has_and_what_to_set(tmp_path):
    """Only val/ (frames to score): not "CamVid not found", but the split to name. Only
    train/: testing has neither test nor val, and training needs val to validate on."""
    only_val = camvid_like(tmp_path / "v", counts={"val": 2})
    with pytest.raises(FileNotFoundError, match=r"has CamVid's val split.*set data\.split=val"):
        CamVidDataModule(str(only_val), num_workers=0).prepare_data()
    CamVidDataModule(str(only_val), num_workers=0, split="val").prepare_data()  # scores val
    only_train = camvid_like(tmp_path / "t", counts={"train": 2})
    dm = CamVidDataModule(str(only_train), num_workers=0)
    with pytest.raises(ValueError, match=r"neither that split nor val .*give training a val"):
        dm.test_split()


def test_missing_camvid_names_the_download_as_each_command_takes_it(tmp_path):
    """train.py takes data.download=true; evaluate.py (whose data keys are its own) needs
    the leading +, and the message says both rather than advise what evaluate refuses."""
    with pytest.raises(FileNotFoundError, match=r"data\.download=true .*\+data\.download=true"):
        CamVidDataModule(str(tmp_path / "nothing"), num_workers=0).prepare_data()


def test_an_nnunet_dataset_of_2d_images_points_at_the_own_images_recipe(tmp_path):
    from tests.data.test_nnunet_images import nnunet_2d

    images = nnunet_2d(tmp_path / "Dataset120", n=2)
    with pytest.raises(
        FileNotFoundError, match=r"nnU-Net dataset of 2D images \(.png\).*images_quick"
    ):
        CamVidDataModule(str(images)).prepare_data()
