"""One black-and-white mask per class, classes that overlap (segnet.data.class_masks): a
folder of masks per class or CSV columns label_<class>, combined into a label map of bits
with one region per class; on small generated folders."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from PIL import Image

from segnet.data import class_masks
from segnet.data.images import ImageDataError, find_pairs
from segnet.data.images_datamodule import ImageFolderDataModule
from tests.data.test_images import prepared


def overlapping(h: int, w: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A vessel (a horizontal band) and an artery (a disc) that overlap in part."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[:h, :w]
    top = int(rng.integers(8, h - 16))
    vessel = (yy >= top) & (yy < top + 10)
    cy, cx = top + 5, int(rng.integers(12, w - 12))
    artery = (yy - cy) ** 2 + (xx - cx) ** 2 < 64
    return vessel, artery


def class_folders(
    root, n: int = 8, size=(40, 48), white=(255, 255), one_bit: bool = False, nested=False
):
    """images/<i>.png with masks/vessel/<i>.png and masks/artery/<i>.png (the classes'
    whites ``white``; 1-bit vessel files where ``one_bit``; the artery only inside the
    vessel where ``nested``)."""
    for d in ("images", "masks/vessel", "masks/artery"):
        (root / d).mkdir(parents=True, exist_ok=True)
    for i in range(n):
        vessel, artery = overlapping(*size, seed=i)
        artery = artery & vessel if nested else artery
        base = 50 + 80 * vessel + 60 * artery + np.random.default_rng(i).normal(0, 6, size)
        Image.fromarray(base.clip(0, 255).astype(np.uint8)).save(root / "images" / f"{i}.png")
        for mask, name, value in ((vessel, "vessel", white[0]), (artery, "artery", white[1])):
            if one_bit and name == "vessel":
                im = Image.fromarray(mask)
            else:
                im = Image.fromarray(mask.astype(np.uint8) * value)
            im.save(root / "masks" / name / f"{i}.png")
    return root


def test_combinations_are_named_by_their_bits_and_each_class_is_a_region():
    names = ["vessel", "artery", "vein"]
    combos = class_masks.combination_names(range(8), names)
    assert combos[:4] == ["background", "vessel", "artery", "vessel+artery"] and len(combos) == 8
    assert class_masks.combination_regions(range(8), names)["vein"] == [4, 5, 6, 7]
    # nested classes: "artery only" never occurs, so it is no class
    assert class_masks.combination_regions([0, 1, 3], names[:2]) == {
        "vessel": [1, 2],
        "artery": [2],
    }
    # a checkpoint keeps the combinations as its class names: their bits come back from them
    assert class_masks.combination_codes(["background", "vessel", "vessel+artery"], names[:2]) == [
        0,
        1,
        3,
    ]
    assert class_masks.combination_codes(["background", "artery+vessel"], names[:2]) == [0, 3]
    assert class_masks.combination_codes(["background", "vein"], names[:2]) is None
    assert class_masks.is_combination_run(["background", "vessel", "vessel+artery"],
                                          {"vessel": [1, 2], "artery": [2]})  # fmt: skip
    assert not class_masks.is_combination_run(["background", "ring", "core"],
                                              {"disc": [1, 2], "core": [2]})  # fmt: skip
    assert class_masks.combination_codes(["vessel", "artery"], names[:2]) is None


def test_masks_combine_into_bits_with_void_where_any_mask_is_ignored(tmp_path):
    a = np.array([[0, 255, 255, 0]])
    b = np.array([[0, 0, 7, 128]])
    label = class_masks.combine([a, b], [tmp_path / "a", tmp_path / "b"], ["a", "b"], [128])
    assert label.tolist() == [[0, 1, 3, 4]]
    with pytest.raises(class_masks.ClassMaskError, match=r"b \(class b\) holds 2 values"):
        class_masks.combine([a, b], [tmp_path / "a", tmp_path / "b"], ["a", "b"], [])
    with pytest.raises(class_masks.ClassMaskError, match="'\\+'"):
        class_masks.check_mask_classes(["a+b"], "here")


def test_a_folder_per_class_trains_overlapping_classes_as_regions(tmp_path):
    # one-bit vessel masks beside 8-bit artery masks holding 1: both read as they look
    root = class_folders(tmp_path / "d", white=(255, 1), one_bit=True)
    dm = prepared(root, image_dir="images", label_dir="masks")
    dm.setup("fit")
    info = dm.info()
    # folders in the order of their names unless data.class_names orders them
    assert info.class_names == ["background", "artery", "vessel", "artery+vessel"]
    assert info.regions == {"artery": [1, 3], "vessel": [2, 3]}
    assert info.out_channels == 2 and info.monitor == "val/region_dice"
    item = dm.load("train")[0]
    k = dm.splits["train"][0]
    vessel, artery = overlapping(40, 48, seed=k)
    assert (item.label.numpy() == artery * 1 + vessel * 2).all()
    ordered = prepared(
        root, image_dir="images", label_dir="masks", class_names=["vessel", "artery"]
    )
    assert ordered.info().class_names == ["background", "vessel", "artery", "vessel+artery"]
    # as a checkpoint gives them back to an evaluation
    again = prepared(root, image_dir="images", label_dir="masks", class_names=info.class_names)
    assert again.info().regions == info.regions


def test_a_class_whose_masks_are_all_black_is_refused_before_training(tmp_path):
    """An output never on, and no region to score it by (evaluation would refuse its empty
    region): refused at once, naming the class."""
    root = class_folders(tmp_path / "d")
    for f in (root / "masks" / "artery").iterdir():
        Image.new("L", (48, 40)).save(f)
    with pytest.raises(ValueError, match="the masks of artery are black in every image"):
        prepared(root, image_dir="images", label_dir="masks").info()


def test_csv_columns_per_class_and_given_splits(tmp_path):
    root = class_folders(tmp_path / "d", n=6)
    rows = [f"images/{i}.png,masks/vessel/{i}.png,masks/artery/{i}.png,"
            f"{(['train'] * 4 + ['val', 'test'])[i]}" for i in range(6)]  # fmt: skip
    (root / "list.csv").write_text("image,label_vessel,label_artery,split\n" + "\n".join(rows))
    dm = ImageFolderDataModule(csv=str(root / "list.csv"), num_workers=0)
    dm.prepare_data()
    assert dm.info().regions == {"vessel": [1, 3], "artery": [2, 3]}
    assert dm.splits["test"] == [5]
    dm.setup("test")
    vessel, artery = overlapping(40, 48, seed=5)
    assert (dm.load("test")[0].label.numpy() == vessel * 1 + artery * 2).all()


@pytest.mark.parametrize(
    "breakage, message",
    [
        ("missing", r"image .*3\.png has no mask in .*artery"),
        ("grey", r"artery.3\.png \(class artery\) holds 2 values besides black"),
        ("label_values", "data.label_values: the masks of .* are given one per class"),
        ("names", r"name exactly these"),
        ("csv_both", "a 'label' column .* it has both"),
        ("split_kinds", "not of one kind in every split"),
    ],
)
def test_class_masks_that_cannot_combine_are_refused_naming_the_file(tmp_path, breakage, message):
    root = class_folders(tmp_path / "d", n=6)
    settings = {"image_dir": "images", "label_dir": "masks"}
    if breakage == "missing":
        (root / "masks/artery/3.png").unlink()
    elif breakage == "grey":
        grey = np.array(Image.open(root / "masks/artery/3.png"))
        grey[:2, :2] = 128
        Image.fromarray(grey).save(root / "masks/artery/3.png")
    elif breakage == "label_values":
        settings.update(class_names=["vessel", "artery"], label_values=[0, 255])
    elif breakage == "names":
        settings.update(class_names=["vessel", "vein"])
    elif breakage == "csv_both":
        (root / "b.csv").write_text("image,label,label_vessel\nimages/0.png,a.png,b.png\n")
        with pytest.raises(ImageDataError, match=message):
            find_pairs(root, str(root / "b.csv"))
        return
    elif breakage == "split_kinds":
        root = tmp_path / "splits"  # train/ and test/ alone: an images/ beside them would win
        for split in ("train", "test"):
            class_folders(root / split, n=3)
        shutil.rmtree(root / "test/masks/artery")
        settings = {}
    with pytest.raises((ImageDataError, ValueError), match=message):
        dm = prepared(root, **settings)
        dm.setup("fit")


def test_ignored_values_are_void_in_every_class(tmp_path):
    root = class_folders(tmp_path / "d", n=6)
    mask = np.array(Image.open(root / "masks/vessel/2.png"))
    mask[:3] = 128
    Image.fromarray(mask).save(root / "masks/vessel/2.png")
    dm = prepared(root, image_dir="images", label_dir="masks", ignore_values=[128], split="all")
    dm.setup("test")
    label = dm.load("all")[dm.splits["all"].index(2)].label.numpy()
    assert (label[:3] == 4).all() and (label[3:] < 4).all()


def test_nested_classes_train_only_the_combinations_their_masks_hold(tmp_path):
    """An artery only ever inside a vessel: "artery only" is no class of the label map
    (never predicted, never scored); an evaluation on masks that hold it is refused."""
    root = class_folders(tmp_path / "nested", nested=True)
    dm = prepared(root, class_names=["vessel", "artery"])
    info = dm.info()
    assert info.class_names == ["background", "vessel", "vessel+artery"]
    assert info.regions == {"vessel": [1, 2], "artery": [2]}
    other = class_folders(tmp_path / "other")  # arteries outside vessels too
    # what an evaluation reads the data with: the checkpoint's classes, not the new masks'
    checkpoint_like = ImageFolderDataModule.settings_from_info(info)
    assert checkpoint_like["class_names"] == info.class_names
    with pytest.raises(
        ImageDataError, match=r"overlap as artery, which is none of the label map's classes"
    ):
        prepared(other, split="all", **checkpoint_like).setup("test")
    again = prepared(root, split="all", **checkpoint_like)
    # the checkpoint's outputs' order, not the folders' (artery/ before vessel/)
    assert list(again.info().regions.items()) == list(info.regions.items())
    assert again.info().class_names == info.class_names


def instance_folder(root, n: int = 4, objects: int = 30):
    """16-bit masks of one value per object (1..objects), as cellpose and StarDist keep them."""
    rng = np.random.default_rng(0)
    (root / "images").mkdir(parents=True)
    (root / "masks").mkdir()
    yy, xx = np.mgrid[:64, :64]
    for k in range(n):
        mask = np.zeros((64, 64), np.uint16)
        for i in range(1, objects + 1):
            cy, cx = rng.integers(4, 60, 2)
            mask[((yy - cy) ** 2 + (xx - cx) ** 2) < 9] = i
        image = ((mask > 0) * 120 + 60).astype(np.uint8)
        Image.fromarray(image).save(root / "images" / f"{k}.png")
        Image.fromarray(mask).save(root / "masks" / f"{k}.png")
    return root


def test_instance_masks_are_suggested_and_read_as_background_and_object(tmp_path):
    root = instance_folder(tmp_path / "cells")
    with pytest.raises(
        ValueError, match=r"data.instance_masks=true, where the masks hold one value per object"
    ):
        prepared(root)
    dm = prepared(root, class_names=["background", "cell"], instance_masks=True)
    dm.setup("fit")
    label = dm.load("train")[0].label.numpy()
    assert set(np.unique(label)) == {0, 1}
    expected = np.array(Image.open(dm.pairs[dm.splits["train"][0]].label)) > 0
    assert np.array_equal(label == 1, expected)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (dict(class_names=["a", "b", "c"]), "give two class names"),
        (dict(class_names=["a", "b"], ignore_values=[255]), "leave out data.ignore_values"),
        (dict(class_names=["a", "b"], palette=[[0, 0, 0], [255, 0, 0]]), "leave out data.palette"),
        (dict(class_names=["a", "b"], instance_masks="yes"), "true .* or false"),
    ],
)
def test_instance_masks_with_settings_they_contradict_are_refused(tmp_path, settings, message):
    root = instance_folder(tmp_path / "cells", n=2)
    with pytest.raises(ValueError, match=message):
        prepared(root, **{"instance_masks": True, **settings})


def test_instance_masks_take_label_values_0_and_1_only(tmp_path):
    root = instance_folder(tmp_path / "cells", n=2)
    with pytest.raises(ValueError, match="leave out data.label_values"):
        prepared(root, class_names=["a", "b"], label_values=[0, 255], instance_masks=True)
    assert prepared(root, class_names=["a", "b"], label_values=[0, 1], instance_masks=True)


def test_jpeg_noise_around_two_values_is_no_instance_mask():
    from segnet.data.images import suggestion

    counts = {
        0: 50000,
        255: 30000,
        **{v: 3 for v in range(1, 15)},
        **{v: 3 for v in range(240, 255)},
    }
    text = suggestion(counts, None)
    assert "instance_masks" not in text and "label_values=[0,255]" in text


def test_instance_masks_and_masks_per_class_are_refused_together(tmp_path):
    root = class_folders(tmp_path / "d", n=2)
    with pytest.raises(
        ValueError, match=r"data.instance_masks: the masks of .* are given one per class"
    ):
        prepared(root, instance_masks=True)
