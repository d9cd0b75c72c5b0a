"""Your own images and masks (segnet.data.images, ImageFolderDataModule), on small
generated folders in every layout and mask form a user brings."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch
from PIL import Image

from segnet.data.images import ImageDataError, find_pairs
from segnet.data.images_datamodule import (
    ImageFolderDataModule,
    Loaded,
    PatchDataset,
    plan_patch,
)
from segnet.data.patch_plan import plan_batch_size


def blob_label(h: int, w: int, seed: int) -> np.ndarray:
    """0 background, 1 a disc somewhere: what the image shows."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[:h, :w]
    cy, cx = rng.integers(h // 4, 3 * h // 4), rng.integers(w // 4, 3 * w // 4)
    return (((yy - cy) ** 2 + (xx - cx) ** 2) < (min(h, w) // 4) ** 2).astype(np.uint8)


def make_folder(
    root,
    n: int = 8,
    size=(40, 48),
    values=(0, 255),
    image_mode: str = "L",
    mask_mode: str = "L",
    image_name: str = "{}",
    label_name: str = "{}",
    image_ext: str = ".png",
    label_ext: str = ".png",
    palette=None,
    sizes=None,
):
    (root / "images").mkdir(parents=True, exist_ok=True)
    (root / "labels").mkdir(exist_ok=True)
    for i in range(n):
        h, w = sizes[i % len(sizes)] if sizes else size
        label = blob_label(h, w, i)
        base = label * 120.0 + 60 + np.random.default_rng(i).normal(0, 10, (h, w))
        if image_mode == "I;16":
            image = Image.fromarray((base * 200).clip(0, 65535).astype(np.uint16))
        elif image_mode == "L":
            image = Image.fromarray(base.clip(0, 255).astype(np.uint8))
        else:
            channels = {"RGB": 3, "RGBA": 4}[image_mode]
            rgb = np.stack([base * (k + 1) / channels for k in range(channels)], -1)
            if channels == 4:
                rgb[..., 3] = 255
            image = Image.fromarray(rgb.clip(0, 255).astype(np.uint8), image_mode)
        image.save(root / "images" / (image_name.format(i) + image_ext))
        if mask_mode == "RGB":
            mask = Image.fromarray(np.array(palette, np.uint8)[label], "RGB")
        elif mask_mode == "1":
            mask = Image.fromarray(label.astype(bool))
        elif mask_mode == "P":
            mask = Image.fromarray(label, "P")
            mask.putpalette([0, 0, 0, 255, 0, 0] + [0] * 762)
        else:
            mask = Image.fromarray(np.array(values, np.uint8)[label])
        mask.save(root / "labels" / (label_name.format(i) + label_ext))
    return root


def prepared(root=None, **settings) -> ImageFolderDataModule:
    settings.setdefault("num_workers", 0)
    dm = ImageFolderDataModule(str(root) if root else None, **settings)
    dm.prepare_data()
    return dm


def train_labels(dm: ImageFolderDataModule) -> np.ndarray:
    dm.setup("fit")
    return np.concatenate([it.label.numpy().ravel() for it in dm.load("train")])


def test_binary_masks_in_0_255_train_as_two_classes_with_label_values(tmp_path):
    root = make_folder(tmp_path / "d")
    dm = prepared(root, class_names=["background", "disc"], label_values=[0, 255])
    info = dm.info()
    assert info.class_names == ["background", "disc"] and info.in_channels == 1
    assert info.ignore_index == 2 and info.spatial_dims == 2 and info.input_size is None
    assert set(np.unique(train_labels(dm))) == {0, 1}
    batch = next(iter(dm.train_dataloader()))
    assert batch["image"].shape[1:] == (1, *dm.patch_size)
    assert batch["label"].dtype == torch.long


def test_0_255_masks_with_two_names_alone_read_black_and_white_as_those_two(tmp_path, caplog):
    """Two names and black-and-white masks: black the first, white the second (the
    values' order, as for class numbers), said with the setting that swaps them, and
    recorded for evaluation; masks of 0 and 1 stay class numbers; three names with no
    values are refused with the settings that fit."""
    root = make_folder(tmp_path / "d")
    with caplog.at_level(logging.WARNING):
        dm = prepared(root, class_names=["background", "disc"])
        labels = train_labels(dm)
    assert set(np.unique(labels)) == {0, 1}
    assert dm.settings_found()["label_values"] == [0, 255]
    assert "read as background (0) and disc (255); 'data.label_values=[255,0]'" in caplog.text
    numbers = make_folder(tmp_path / "n", values=(0, 1))
    dm = prepared(numbers, class_names=["background", "disc"])
    assert set(np.unique(train_labels(dm))) == {0, 1} and dm.settings_found() == {}
    with pytest.raises(ImageDataError) as caught:
        prepared(root, class_names=["background", "disc", "rim"])
    message = str(caught.value)
    assert "labels/" in message and "holds 255" in message


@pytest.mark.parametrize("values", [(0, 255), (0, 1)])
def test_masks_of_0_and_one_value_with_no_class_named_are_background_and_foreground(
    tmp_path, caplog, values
):
    """Never 256 classes, never 255 read as void in silence: 0 and the other value are
    the two classes, said with the settings that swap them, and recorded for evaluation."""
    root = make_folder(tmp_path / "d", values=values)
    with caplog.at_level(logging.WARNING):
        dm = prepared(root)
        info = dm.info()
    assert info.class_names == ["background", "foreground"] and info.monitor == "val/dice"
    assert set(np.unique(train_labels(dm))) == {0, 1}
    assert f"'data.label_values=[{values[0]},{values[1]}]'" in caplog.text
    assert dm.settings_found()["label_values"] == list(values)


def test_masks_of_two_values_without_0_are_still_refused(tmp_path):
    for values in ((1, 2), (100, 255)):
        root = make_folder(tmp_path / f"d{values[0]}", values=values)
        with pytest.raises(ValueError, match="data.class_names is not set"):
            prepared(root).info()


@pytest.mark.parametrize("mask_mode", ["index", "1", "P"])
def test_index_bool_and_palette_masks_need_no_mapping(tmp_path, mask_mode):
    if mask_mode == "index":
        root = make_folder(tmp_path / "d", values=(0, 1))
    else:
        root = make_folder(tmp_path / "d", mask_mode=mask_mode)
    dm = prepared(root, class_names=["background", "disc"])
    assert set(np.unique(train_labels(dm))) == {0, 1}


def test_colour_masks_through_a_palette_and_ignored_colours(tmp_path):
    palette = [[0, 0, 0], [255, 0, 0]]
    root = make_folder(tmp_path / "d", mask_mode="RGB", palette=palette)
    dm = prepared(root, class_names=["background", "disc"], palette=palette)
    assert set(np.unique(train_labels(dm))) == {0, 1}
    assert dm.info().palette == palette
    # the red disc marked void instead: only background and void remain
    dm = prepared(
        root, class_names=["background", "other"], palette=[[0, 0, 0], [0, 255, 0]],
        ignore_values=[[255, 0, 0]],
    )  # fmt: skip
    assert set(np.unique(train_labels(dm))) == {0, 2}
    with pytest.raises(ImageDataError, match=r"holds \[255,0,0\].*data.palette"):
        prepared(root, class_names=["background", "disc"], palette=[[0, 0, 0], [0, 0, 255]])


def test_ignore_values_are_void_in_loss_and_metrics(tmp_path):
    root = make_folder(tmp_path / "d", values=(0, 200))
    dm = prepared(root, class_names=["background"], ignore_values=[200])
    assert set(np.unique(train_labels(dm))) == {0, 1}  # 1: void for a single class


def test_names_that_differ_pair_by_a_rule_across_formats(tmp_path, caplog):
    root = make_folder(
        tmp_path / "d", image_name="{}_training", label_name="{}_manual1",
        image_ext=".tif", label_ext=".gif",
    )  # fmt: skip
    rule = "'data.image_name={id}_training' 'data.label_name={id}_manual1'"
    two = {"class_names": ["background", "disc"], "label_values": [0, 255]}
    with caplog.at_level(logging.INFO, logger="segnet.data.image_pairs"):
        found = prepared(root, **two)  # the one rule that pairs every file: used, and said
    assert rule in caplog.text
    dm = prepared(root, image_name="{id}_training", label_name="{id}_manual1", **two)
    assert sorted(p.name for p in dm.pairs)[0] == "0_training.tif"
    assert [p.label for p in dm.pairs] == [p.label for p in found.pairs]
    assert set(np.unique(train_labels(dm))) == {0, 1}
    Image.fromarray(np.zeros((8, 8), np.uint8)).save(root / "images" / "99_training.tif")
    with pytest.raises(ImageDataError, match="no image in .* pairs with a mask") as caught:
        prepared(root, **two)  # a rule that pairs only some: nothing guessed, the rule shown
    assert rule in str(caught.value)


def test_a_csv_with_relative_paths_and_a_region_of_interest(tmp_path):
    root = make_folder(tmp_path / "d", n=6)
    (root / "roi").mkdir()
    rows = ["image,label,roi"]
    for i in range(6):
        roi = np.zeros((40, 48), np.uint8)
        roi[:, :24] = 255  # the right half outside the field of view
        Image.fromarray(roi).save(root / "roi" / f"{i}.png")
        rows.append(f"images/{i}.png,labels/{i}.png,roi/{i}.png")
    (root / "list.csv").write_text("\n".join(rows) + "\n")
    dm = prepared(
        csv=str(root / "list.csv"), class_names=["background", "disc"], label_values=[0, 255],
        val_fraction=0.2, test_fraction=0.2,
    )  # fmt: skip
    dm.setup("fit")
    for item in dm.load("train"):
        assert (item.label[:, 24:] == 2).all() and (item.label[:, :24] < 2).all()


def test_given_split_folders_are_kept_and_val_drawn_from_train_where_missing(tmp_path):
    for split, n in (("train", 6), ("test", 2)):
        make_folder(tmp_path / "d" / split, n=n)
    dm = prepared(tmp_path / "d", class_names=["background", "disc"], label_values=[0, 255])
    names = dm.split_names()
    assert len(names["test"]) == 2 and len(names["val"]) >= 1
    assert len(names["train"]) + len(names["val"]) == 6


def test_images_of_several_sizes_16_bit_and_rgba(tmp_path):
    sizes = [(40, 48), (56, 36), (64, 64)]
    root = make_folder(tmp_path / "d", image_mode="I;16", sizes=sizes, n=9)
    dm = prepared(root, class_names=["background", "disc"], label_values=[0, 255])
    assert dm.info().normalization["color_mode"] == "L"
    assert dm.info().normalization["mean"][0] > 1000  # 16-bit units, not cut to 8 bits
    dm.setup("fit")
    assert {tuple(it.image.shape[1:]) for it in dm.load("val") + dm.load("train")} <= set(sizes)
    root = make_folder(tmp_path / "rgba", image_mode="RGBA")
    dm = prepared(root, class_names=["background", "disc"], label_values=[0, 255])
    assert dm.info().in_channels == 4


@pytest.mark.parametrize("image_mode,held", [("RGB", torch.uint8), ("I;16", torch.float32)])
def test_8_bit_images_are_held_as_bytes_and_read_as_if_normalised_first(tmp_path, image_mode, held):
    """A folder is held in memory through training: 8-bit images as uint8, a quarter of
    float32, normalised as they are read. Network input is what normalising the whole
    image first gives, to the bit; 16-bit images keep float32 (their values need it)."""
    from segnet.data import images as img

    root = make_folder(tmp_path / "d", image_mode=image_mode)
    dm = prepared(root, class_names=["background", "disc"], label_values=[0, 255])
    dm.setup("fit")
    norm = dm.info().normalization
    mean, std = (np.asarray(norm[k], np.float32) for k in ("mean", "std"))
    for it in dm.load("train"):
        assert it.raw.dtype == held
        pair = next(p for p in dm.pairs if p.name == it.name)
        as_before = (img.read_image(pair.image, norm["color_mode"]) - mean) / std
        expected = torch.from_numpy(as_before.transpose(2, 0, 1).copy())
        assert it.image.dtype == torch.float32 and torch.equal(it.image, expected)
        assert torch.equal(it.normalised(slice(3, 9), slice(5, 7)), expected[:, 3:9, 5:7])
    patch = dm.datasets["train"][0]["image"]
    assert patch.dtype == torch.float32 and patch.shape[0] == len(mean)


def test_a_folder_that_would_not_fit_in_memory_is_refused_before_decoding(tmp_path, monkeypatch):
    from segnet.data import images as img
    from segnet.data import images_datamodule as module

    root = make_folder(tmp_path / "d", n=6, size=(40, 50), image_mode="RGB")

    def decode(*args, **kwargs):
        raise RuntimeError("decoding started")

    monkeypatch.setattr(img, "read_image", decode)
    # 6 RGB images of 40x50: 3 bytes a pixel, 1 of label, 4 while reading: 96,000 bytes
    assert module.held_bytes([img.header(p) for p in sorted(root.glob("images/*"))], 3) == (
        6 * 40 * 50 * (3 + 1 + 4)
    )
    monkeypatch.setattr(module, "available_bytes", lambda: module.SPARE_BYTES + 95_000)
    # refused from the files' headers alone, before any image is decoded
    with pytest.raises(ImageDataError, match=r"6 images of .* need about 0\.0 GB.*Downscale"):
        prepared(root, class_names=["background", "disc"], label_values=[0, 255])
    monkeypatch.setattr(module, "available_bytes", lambda: module.SPARE_BYTES + 96_000)
    with pytest.raises(RuntimeError, match="decoding started"):  # it fits: reading starts
        prepared(root, class_names=["background", "disc"], label_values=[0, 255])
    # 16-bit images are held as float32: four bytes a value
    wide = make_folder(tmp_path / "w", n=1, size=(10, 10), image_mode="I;16")
    headers = [img.header(p) for p in wide.glob("images/*")]
    assert headers[0].channel_bytes == 4 and module.held_bytes(headers, 1) == 100 * (4 + 1 + 4)


def test_the_patch_is_planned_from_the_median_image_size():
    assert plan_patch([(512, 512)] * 3, 128) == (128, 128)
    assert plan_patch([(100, 300), (110, 310), (90, 290)], 256) == (96, 256)
    assert plan_patch([(20, 20)], 256) == (32, 32)  # smaller images are padded


def test_the_batch_is_planned_from_a_pixel_budget_within_nnunet_bounds():
    budget = 8 * 128 * 128
    # images_quick on 22 frames of 512x512: its 8 patches of 128x128
    assert plan_batch_size((128, 128), [(512, 512)] * 22, budget) == 8
    # small images: four times as many patches a quarter the size, the same pixels a step
    assert plan_batch_size((64, 64), [(64, 64)] * 1000, budget) == 32
    # at most 5% of the training pixels: 200 images of 64x64 allow 10 patches
    assert plan_batch_size((64, 64), [(64, 64)] * 200, budget) == 10
    # and at least 2, however few the images
    assert plan_batch_size((512, 512), [(512, 512)] * 3, budget) == 2


def test_an_epoch_is_steps_of_the_planned_batch_or_given_patches(tmp_path):
    root = make_folder(tmp_path / "d", n=40, size=(64, 64))
    classes = dict(class_names=["background", "disc"], label_values=[0, 255])
    dm = prepared(root, max_patch=32, batch_pixels=4 * 32 * 32, steps_per_epoch=3, **classes)
    dm.setup("fit")
    assert dm.batch_size == 4 and len(dm.datasets["train"]) == 12
    # a budget of 16 patches that the 5% bound cuts to 5: the epoch keeps 3 steps' worth
    # of the budget's patches (48), in more steps of 5
    dm = prepared(root, max_patch=32, batch_pixels=16 * 32 * 32, steps_per_epoch=3, **classes)
    dm.setup("fit")
    assert dm.batch_size == 5 and len(dm.datasets["train"]) == 48
    dm = prepared(root, max_patch=32, batch_size=5, patches_per_epoch=7, **classes)
    dm.setup("fit")
    assert dm.batch_size == 5 and len(dm.datasets["train"]) == 7
    with pytest.raises(ValueError, match="give one length of an epoch"):
        ImageFolderDataModule(str(root), patches_per_epoch=7, steps_per_epoch=3, **classes)


def test_centred_patches_draw_a_class_first_so_a_thin_class_is_seen_as_often():
    # a road of 8,000 pixels and a sign of 4: drawn by pixel, the sign would centre one
    # patch in 2,000; drawn by class first, half of them (void and class 0 never centre)
    label = torch.zeros(100, 100, dtype=torch.uint8)
    label[20:, :] = 1
    label[5:7, 50:52] = 2
    label[:2, :] = 9
    data = PatchDataset([Loaded("a", torch.zeros(1, 100, 100), label)], (16, 16), 1, void=9,
                        flip_axes=(), scale=(1, 1), foreground_ratio=1.0, intensity=0.0)  # fmt: skip
    torch.manual_seed(0)
    centres = [data._centre(0, 100, 100) for _ in range(2000)]
    classes = torch.tensor([int(label[y, x]) for y, x in centres])
    assert (classes != 0).all() and (classes != 9).all()
    assert 800 < int((classes == 2).sum()) < 1200


@pytest.mark.parametrize(
    ("breakage", "message"),
    [
        ("mask_without_image", "mask .*has no image"),
        ("image_without_mask", "image .*has no mask"),
        ("other_size", "is 10x10 and its image"),
        ("unreadable", "cannot read"),
        ("empty_val", "'val' split .* is empty"),
    ],
)
def test_bad_input_is_refused_before_training_naming_the_file(tmp_path, breakage, message):
    root = make_folder(tmp_path / "d", n=4)
    settings = dict(class_names=["background", "disc"], label_values=[0, 255])
    if breakage == "mask_without_image":
        (root / "images" / "2.png").unlink()
    elif breakage == "image_without_mask":
        (root / "labels" / "2.png").unlink()
    elif breakage == "other_size":
        Image.fromarray(np.zeros((10, 10), np.uint8)).save(root / "labels" / "1.png")
    elif breakage == "unreadable":
        (root / "images" / "3.png").write_bytes(b"not a png")
    elif breakage == "empty_val":
        settings.update(val_fraction=0.0)
    with pytest.raises((ImageDataError, ValueError), match=message):
        dm = prepared(root, **settings)
        dm.setup("fit")
        dm.read_split("test")


def test_a_csv_row_without_a_label_is_named(tmp_path):
    root = make_folder(tmp_path / "d", n=2)
    (root / "a.csv").write_text("image,label\nimages/0.png,labels/0.png\nimages/1.png,\n")
    with pytest.raises(ImageDataError, match=r"a\.csv, line 3: no label"):
        find_pairs(root, str(root / "a.csv"))
    (root / "b.csv").write_text("image,outline\nimages/0.png,labels/0.png\n")
    with pytest.raises(
        ImageDataError, match="masks in a 'label' column .* it has neither .*'outline'"
    ):
        find_pairs(root, str(root / "b.csv"))


def test_each_training_file_is_decoded_once(tmp_path, monkeypatch):
    """The statistics and the mask-value check decode the training images and masks;
    training then takes them as decoded rather than reading each file again."""
    from segnet.data import images as img

    root = make_folder(tmp_path / "d", n=10)
    reads: list[str] = []
    for name in ("read_image", "read_mask"):
        real = getattr(img, name)
        monkeypatch.setattr(
            img, name, lambda p, *a, real=real, **k: reads.append(p.name) or real(p, *a, **k)
        )
    dm = prepared(root, class_names=["background", "disc"], label_values=[0, 255])
    train_labels(dm)
    # training reads the train and val splits: one image and one mask each, once; the
    # mask-value check reads the test split's masks too (test images are not read)
    read = [dm.pairs[i] for split in ("train", "val") for i in dm.splits[split]]
    test = [dm.pairs[i].label.name for i in dm.splits["test"]]
    assert len(read) > len(dm.splits["train"]) > 0 and test
    expected = [p.image.name for p in read] + [p.label.name for p in read] + test
    assert sorted(reads) == sorted(expected)
    # the data as read once is the data as read afresh
    fresh = prepared(root, class_names=["background", "disc"], label_values=[0, 255])
    fresh._decoded_images.clear()
    fresh._decoded_masks.clear()
    a, b = dm.load("train"), fresh.load("train")
    assert all(
        torch.equal(x.image, y.image) and torch.equal(x.label, y.label)
        for x, y in zip(a, b, strict=True)
    )


def test_training_statistics_are_cached_until_a_file_changes(tmp_path, monkeypatch, caplog):
    """The next run on the same files reads the mean, std and mask values from the cache
    (the files are decoded once, for training); a changed file is scanned afresh."""
    import logging

    from segnet.data import images as img

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    root = make_folder(tmp_path / "d", n=10)
    settings = dict(class_names=["background", "disc"], label_values=[0, 255])
    first = prepared(root, **settings).info()
    assert len(list((tmp_path / "cache" / "segnet").glob("images_*.json"))) == 1
    reads: list[str] = []
    for name in ("read_image", "read_mask"):
        real = getattr(img, name)
        monkeypatch.setattr(
            img, name, lambda p, *a, real=real, **k: reads.append(p.name) or real(p, *a, **k)
        )
    with caplog.at_level(logging.INFO):
        again = prepared(root, **settings)
        assert again.info().normalization == first.normalization and reads == []
    assert "statistics of the training set from" in caplog.text
    assert "mask values over the" in caplog.text  # the values are still logged and checked
    # a mask of the training set changed: its values are checked again
    train_mask = again.pairs[again.splits["train"][0]].label
    Image.fromarray(np.full((40, 48), 128, np.uint8)).save(train_mask)
    with pytest.raises(img.ImageDataError, match=r"holds 128"):
        prepared(root, **settings).info()
    assert reads  # decoded, not taken from the cache


def test_masks_of_no_named_class_are_decoded_once_and_then_not_again(tmp_path, monkeypatch):
    """With no class named, every mask is decoded once to count its values (settling the
    background and foreground) and those same codes serve the statistics and training;
    the next run on the same files counts them from the cache."""
    from segnet.data import images as img

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    root = make_folder(tmp_path / "d", n=10)
    reads: list[str] = []
    real = img.read_mask
    monkeypatch.setattr(
        img, "read_mask", lambda p, *a, **k: reads.append(p.name) or real(p, *a, **k)
    )
    dm = prepared(root)
    assert dm.info().class_names == ["background", "foreground"]
    assert sorted(reads) == sorted(f"{i}.png" for i in range(10))  # each once
    dm.setup("fit")
    assert len(reads) == 10  # training and validation load the masks kept
    for i, loaded in zip(dm.splits["train"], dm.load("train"), strict=True):
        mask = np.array(Image.open(dm.pairs[i].label))  # 0 and 255: classes 0 and 1
        assert np.array_equal(loaded.label.numpy(), mask // 255)
    reads.clear()
    again = prepared(root)
    assert again.info().class_names == ["background", "foreground"] and reads == []


def test_a_spreadsheets_csv_of_images_reads_as_meant(tmp_path):
    """The one case-list reader: a byte-order mark and spaces around names and cells are
    not part of them, for images as for volumes."""
    from segnet.data.image_pairs import csv_pairs

    table = tmp_path / "cases.csv"
    table.write_text("\ufeffimage , label ,split\n a.png , masks/a.png , val \n\nb.png,b_m.png,\n")
    pairs = csv_pairs(table)
    assert [(p.image.name, p.label, p.split) for p in pairs] == [
        ("a.png", tmp_path / "masks" / "a.png", "val"),
        ("b.png", tmp_path / "b_m.png", None),
    ]


def test_csv_columns_and_splits_named_in_other_words_read_as_meant(tmp_path, caplog):
    """image_path and mask_path, Image and Mask with a subset column of training and
    validation, and paths written on Windows: read as the columns, splits and paths they
    mean, said; masks per class (label_<class>) and channels (image_<channel>) stay."""
    import logging

    from segnet.data.case_table import column_names
    from segnet.data.image_pairs import csv_pairs

    (tmp_path / "masks").mkdir()
    (tmp_path / "masks" / "a.png").touch()
    table = tmp_path / "cases.csv"
    table.write_text("Image_Path,mask_path,subset\nimgs\\a.png,masks\\a.png,validation\n"
                     "b.png,b_m.png,training\n")  # fmt: skip
    with caplog.at_level(logging.INFO):
        pairs = csv_pairs(table)
    assert [(p.image, p.label, p.split) for p in pairs] == [
        (tmp_path / "imgs" / "a.png", tmp_path / "masks" / "a.png", "val"),
        (tmp_path / "b.png", tmp_path / "b_m.png", "train"),
    ]
    assert "column 'mask_path' read as 'label'" in caplog.text
    assert column_names(["image", "label_vessel", "label_artery"]) == {}
    assert column_names(["image_t1", "image_t2", "label"]) == {}
    assert column_names(["image", "mask", "gt"]) == {}  # two say masks: neither is read
    assert column_names(["img", "label_file"]) == {"img": "image", "label_file": "label"}
    sites = tmp_path / "sites.csv"  # a set column of sites, not splits: stays as it is
    sites.write_text("image,label,set\na.png,masks/a.png,siteA\nb.png,b_m.png,siteB\n")
    assert [p.split for p in csv_pairs(sites)] == [None, None]


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        (
            {"sw_roi_size": [16, 64]},
            r"sw_roi_size=\[16, 64\] must be 2 whole numbers of at least 32",
        ),
        ({"sw_roi_size": [64, 64, 64]}, r"must be 2 whole numbers .*twice the training patch"),
        ({"sw_overlap": 1.0}, r"data.sw_overlap=1.0 must be in 0..1"),
        ({"sw_mode": "mean"}, r"data.sw_mode='mean': choose one of"),
        ({"flip": [0, 2]}, r"data.flip=\[0, 2\]: .*\(0 up-down, 1 left-right\)"),
        ({"val_fraction": 0.6, "test_fraction": 0.4}, r"leave no case to train on"),
        ({"num_folds": 1}, r"data.num_folds=1: expected a whole number >= 2"),
    ],
)
def test_window_flip_and_split_settings_are_refused_as_for_volumes(tmp_path, setting, message):
    with pytest.raises(ValueError, match=message):
        ImageFolderDataModule(str(tmp_path), class_names=["a", "b"], **setting)


def test_a_photo_turned_by_its_exif_orientation_lies_under_its_mask(tmp_path):
    """Viewers and labelling tools show a phone photo turned by its EXIF orientation, and
    its mask is drawn over the picture as shown: the photo is read turned so, and its
    size from the header is the size shown."""
    from segnet.data import images as img

    root = tmp_path / "d"
    make_folder(root, n=6, size=(40, 48))
    turned = root / "images" / "0.jpg"
    upright = np.asarray(Image.open(root / "images" / "0.png"))
    (root / "images" / "0.png").unlink()
    # stored a quarter turn back, with orientation 6 (shown turned 90 degrees clockwise)
    exif = Image.Exif()
    exif[img.ORIENTATION] = 6
    Image.fromarray(np.rot90(upright, 1)).save(turned, exif=exif, quality=95)
    assert Image.open(turned).size == (40, 48)  # stored 48 high, 40 wide
    assert img.header(turned)[1:3] == (40, 48)
    dm = prepared(root, class_names=["background", "disc"], label_values=[0, 255])
    dm.setup("fit")
    item = next(
        it for split in ("train", "val", "test") for it in dm.load(split) if it.name == "0.jpg"
    )
    assert tuple(item.raw.shape[1:]) == (40, 48)
    read = item.raw[0].numpy().astype(float)
    assert np.abs(read - upright).mean() < 3  # the picture as shown (JPEG's noise aside)


def test_colour_masks_beside_palette_files_are_counted_as_colours_once(tmp_path, monkeypatch):
    """Half the masks RGB, half palette files of the same red: with no class named, the
    colours are counted as a viewer shows them (red is one value, not a colour and a
    palette index), in the refusal's table and its suggestion."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    root = make_folder(tmp_path / "d", n=10, mask_mode="RGB", palette=[[0, 0, 0], [255, 0, 0]])
    for i in range(0, 10, 2):
        mask = Image.fromarray(blob_label(40, 48, i), "P")
        mask.putpalette([0, 0, 0, 255, 0, 0] + [0] * 762)
        mask.save(root / "labels" / f"{i}.png")
    for _ in range(2):  # counted, then from the cache: the same
        with pytest.raises(ValueError, match=r"data.class_names is not set") as refused:
            prepared(root)
        assert "class_2" not in str(refused.value)
        assert "'data.palette=[[0,0,0],[255,0,0]]'" in str(refused.value)


def test_images_far_larger_than_the_patch_are_said_to_be(tmp_path, caplog):
    """Photos of many megapixels in patches of 128, kept at native size: a warning says
    what that costs and the way out; read downscaled (the default), or near the patch's
    size, they are not warned of."""
    large = make_folder(tmp_path / "large", n=4, size=(700, 700))
    names = dict(class_names=["background", "disc"], label_values=[0, 255], max_patch=64)
    with caplog.at_level(logging.WARNING):
        prepared(large, downscale=1, **names).info()
    assert "(median 700x700 as trained) are over 100 times the 64x64 training patch" in caplog.text
    assert "data.downscale=<factor>" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        prepared(large, **names).info()
    assert "training patch: an object" not in caplog.text
    caplog.clear()
    small = make_folder(tmp_path / "small", n=4, size=(96, 96))
    with caplog.at_level(logging.WARNING):
        prepared(
            small, class_names=["background", "disc"], label_values=[0, 255], max_patch=64
        ).info()
    assert "training patch: an object" not in caplog.text


def test_two_names_beside_a_class_number_or_a_void_white_are_no_black_and_white(tmp_path):
    """Masks of 0, a class 1 and 255 with two names: 255 is no second class (a void band
    around the class, say): refused as before; given as void, 0 and 1 are the classes."""
    root = make_folder(tmp_path / "d", values=(0, 255))
    for path in (root / "labels").iterdir():
        mask = np.asarray(Image.open(path)).copy()
        mask[:2] = 1  # a thin class 1 beside the white band
        Image.fromarray(mask).save(path)
    with pytest.raises(ImageDataError, match="holds 255"):
        prepared(root, class_names=["background", "crack"])
    dm = prepared(root, class_names=["background", "crack"], ignore_values=[255])
    assert set(np.unique(train_labels(dm))) == {0, 1, 2}  # 2: void
