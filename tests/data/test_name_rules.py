"""Where no name rule is given and one alone pairs every image with its mask (masks
beside their images as ``scan_1_mask.png``; a mask folder of ``s0_L.png``), it is used
and said; where none or several fit, nothing is guessed and the refusal shows the rule."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from segnet.data.image_pairs import ImageDataError, find_pairs
from segnet.data.name_rules import beside_rule, key_of, name_pattern
from tests.data.test_images import blob_label, prepared


def files(*stems: str, folder: str = "d") -> list[Path]:
    return [Path(folder) / f"{s}.png" for s in stems]


@pytest.mark.parametrize(
    ("stems", "rule"),
    [
        (("scan_1", "scan_1_mask", "scan_2", "scan_2_mask"), "{id}_mask"),
        (("1", "1_mask", "10", "10_mask"), "{id}_mask"),  # 10 is an image, not 1's mask
        (("a.rf.9f", "a.rf.9f_mask", "b.rf.00", "b.rf.00_mask"), "{id}_mask"),
        (("mask_a", "a", "mask_b", "b"), "mask_{id}"),
        (("1", "10", "2", "20"), None),  # digits added are other images
        (("a", "a_mask", "b"), None),  # an image without its mask: not this layout
        (("a", "a_mask", "b", "b_gt"), None),  # two rules, each fitting half
        (("a", "b", "c", "d"), None),
        # further masks of some images (BUSI's a_mask_1 beside a_mask): the set is found
        (("a", "a_mask", "a_mask_1", "b", "b_mask"), "{id}_mask"),
        (("a", "a_mask", "b", "c_mask_1"), None),  # c_mask_1 is no further mask of a mask
    ],
)
def test_the_rule_of_masks_beside_their_images_is_found_only_where_one_fits_all(stems, rule):
    assert beside_rule(files(*stems)) == (("{id}", rule, []) if rule else None)


@pytest.mark.parametrize(
    ("stems", "rules"),
    [
        (("119_sat", "119_mask", "120_sat", "120_mask"), ("{id}_sat", "{id}_mask")),  # DeepGlobe
        (("a_b_img", "a_b_gt", "c_img", "c_gt"), ("{id}_img", "{id}_gt")),  # last separator
        (("a-img", "a-label", "b-img", "b-label"), ("{id}-img", "{id}-label")),
        (("1_sat", "1_mask", "2_sat"), None),  # an image without its mask
        (("a_x", "a_y", "b_x", "b_y"), None),  # neither says mask
        (("a_mask", "a_gt", "b_mask", "b_gt"), None),  # both say mask
        (("a_sat", "a_mask", "a_weight", "b_sat", "b_mask", "b_weight"), None),  # three kinds
        (("a_sat", "a_mask", "b_sat", "c_mask"), None),  # the ids differ
        (("0_roi", "0_mask", "1_roi", "1_mask"), None),  # a region of interest is no image
        (("0_pred", "0_gt", "1_pred", "1_gt"), None),  # nor is a text that does not say so
    ],
)
def test_images_and_masks_each_named_with_their_own_text_pair_where_one_says_mask(stems, rules):
    found = beside_rule(files(*stems))
    assert found == ((*rules, []) if rules else None)


@pytest.mark.parametrize(
    ("stems", "found"),
    [
        # two observers: the first one's read, the second's said
        (
            ("a", "a_1stHO", "a_2ndHO", "b", "b_1stHO", "b_2ndHO"),
            ("{id}", "{id}_1stHO", ["{id}_2ndHO"]),
        ),  # fmt: skip
        # masks and weight maps: the rule whose text says mask
        (
            ("a", "a_mask", "a_weight", "b", "b_mask", "b_weight"),
            ("{id}", "{id}_mask", ["{id}_weight"]),
        ),  # fmt: skip
        (("a", "a_mask", "a_gt", "b", "b_mask", "b_gt"), None),  # two kinds of mask: not guessed
    ],
)
def test_where_several_sets_of_masks_lie_beside_the_images_one_is_read_only_if_preferred(
    stems, found
):
    assert beside_rule(files(*stems)) == found


def test_masks_in_other_folders_of_a_patient_do_not_pair_across_folders():
    pairs = (
        files("a", "a_mask", folder="p1") + files("b", folder="p2") + files("b_mask", folder="p3")
    )
    assert beside_rule(pairs) is None


def write_pairs(folder: Path, stems, mask_suffix: str, n_ext: str = ".png") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for k, stem in enumerate(stems):
        label = blob_label(24, 32, seed=k)
        Image.fromarray((label * 100 + 20).astype(np.uint8)).save(folder / f"{stem}{n_ext}")
        Image.fromarray(label * 255).save(folder / f"{stem}{mask_suffix}.png")


def test_a_roboflow_export_trains_from_its_root(tmp_path, caplog):
    """train/ valid/ test/, each with x.jpg beside x_mask.png and a _classes.csv."""
    root = tmp_path / "export"
    for split, n in (("train", 5), ("valid", 2), ("test", 2)):
        write_pairs(root / split, [f"{split}{k}_jpg.rf.{k:04x}" for k in range(n)], "_mask", ".jpg")
        (root / split / "_classes.csv").write_text("Pixel Value, Class\n0, background\n255, leaf\n")
    with caplog.at_level(logging.INFO):
        dm = prepared(root)
    names = dm.split_names()
    assert [len(names[s]) for s in ("train", "val", "test")] == [5, 2, 2]
    assert dm.info().class_names == ["background", "leaf"]
    assert "'data.label_name={id}_mask'" in caplog.text  # said, to be given or changed


def mask_folder(root: Path, stems) -> Path:
    """images/<stem>.png with labels/<stem>_L.png."""
    write_pairs(root / "images", stems, "_L")
    (root / "labels").mkdir()
    for f in (root / "images").glob("*_L.png"):
        f.rename(root / "labels" / f.name)
    return root


def test_a_mask_folder_named_by_a_suffix_pairs_and_is_said(tmp_path, caplog):
    root = mask_folder(tmp_path / "d", ["s0", "s1", "s2"])
    with caplog.at_level(logging.INFO):
        pairs = find_pairs(root, None)
    assert sorted((p.image.stem, p.label.stem) for p in pairs) == [
        ("s0", "s0_L"), ("s1", "s1_L"), ("s2", "s2_L")
    ]  # fmt: skip
    assert "'data.label_name={id}_L'" in caplog.text


def test_a_rule_that_pairs_only_some_is_not_guessed_and_the_refusal_shows_it(tmp_path):
    root = mask_folder(tmp_path / "d", ["s0", "s1"])
    Image.fromarray(np.zeros((24, 32), np.uint8)).save(root / "labels" / "extra_L.png")
    with pytest.raises(ImageDataError, match=r"To pair them: 'data.label_name=\{id\}_L'"):
        find_pairs(root, None)


def test_a_rule_given_is_kept_even_where_another_would_pair(tmp_path):
    root = mask_folder(tmp_path / "d", ["s0", "s1"])
    with pytest.raises(ImageDataError, match=r"looked for s0_mask\.\*"):
        find_pairs(root, None, label_name="{id}_mask")


@pytest.mark.parametrize(
    ("rule", "name", "key"),
    [
        ("{id}.png", "0001.png", "0001"),
        ("{id}.png", "0001.PNG", "0001"),  # the suffix in any case
        ("{id}.png", "0001.jpg", None),
        ("{id}_mask.tif", "a.b_mask.tif", "a.b"),
        ("{id}_mask", "a_mask.tif", "a"),  # no suffix named: any suffix
    ],
)
def test_a_rule_that_names_a_suffix_matches_whole_file_names(rule, name, key):
    assert key_of(Path("d") / name, name_pattern(rule, "data.label_name"), Path("d")) == key


def write_of_two_kinds(folder: Path, images: str = ".jpg", masks: str = ".png", n: int = 6):
    for k in range(n):
        label = blob_label(24, 32, k)
        picture = label * 120 + 60 + np.random.default_rng(k).normal(0, 10, label.shape)
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(picture.clip(0, 255).astype(np.uint8)).save(folder / f"{k:04d}{images}")
        Image.fromarray(label * 255).save(folder / f"{k:04d}{masks}")


def test_images_and_masks_of_one_name_and_two_kinds_of_file_pair_by_what_they_hold(
    tmp_path, caplog
):
    """0000.jpg beside 0000.png: the PNGs hold two values, the JPEGs many: masks and images."""
    write_of_two_kinds(tmp_path / "flat")
    with caplog.at_level(logging.INFO):
        dm = prepared(tmp_path / "flat")
    assert {(p.image.suffix, p.label.suffix) for p in dm.pairs} == {(".jpg", ".png")}
    assert len(dm.pairs) == 6 and dm.info().class_names == ["background", "foreground"]
    assert "'data.image_name={id}.jpg' 'data.label_name={id}.png'" in caplog.text
    # the other way round: pictures in PNG files, masks in BMP files
    write_of_two_kinds(tmp_path / "other", images=".png", masks=".bmp")
    assert {p.label.suffix for p in prepared(tmp_path / "other").pairs} == {".bmp"}


def test_two_kinds_of_file_that_both_hold_pictures_are_not_guessed(tmp_path, caplog):
    write_of_two_kinds(tmp_path / "flat")
    for k in range(6):  # the PNGs become pictures too
        Image.open(tmp_path / "flat" / f"{k:04d}.jpg").save(tmp_path / "flat" / f"{k:04d}.png")
    with pytest.raises(FileNotFoundError), caplog.at_level(logging.WARNING):
        prepared(tmp_path / "flat")
    assert "'data.image_name={id}.jpg' 'data.label_name={id}.png' reads the .png" in caplog.text
    pairs = find_pairs(tmp_path / "flat", None, image_dir=".", label_dir=".",
                       image_name="{id}.jpg", label_name="{id}.png")  # fmt: skip
    assert [(p.image.suffix, p.label.suffix) for p in pairs] == [(".jpg", ".png")] * 6


def test_files_of_two_kinds_with_a_mask_missing_are_refused_naming_the_file_looked_for(tmp_path):
    write_of_two_kinds(tmp_path / "flat", n=8)
    (tmp_path / "flat" / "0003.png").unlink()
    with pytest.raises(ImageDataError, match=r"0003.jpg has no mask .*looked for 0003.png\)"):
        prepared(tmp_path / "flat")


def test_regions_of_interest_of_another_kind_pair_with_images_named_by_a_suffix(tmp_path):
    """data.image_name={id}.jpg: the regions of interest (GIFs) are keyed by {id} alone."""
    root = tmp_path / "d"
    write_of_two_kinds(root / "images", n=4)
    (root / "fov").mkdir()
    for k in range(4):
        Image.open(root / "images" / f"{k:04d}.png").save(root / "fov" / f"{k:04d}.gif")
    pairs = find_pairs(root, None, image_dir="images", label_dir="images", roi_dir="fov",
                       image_name="{id}.jpg", label_name="{id}.png")  # fmt: skip
    assert [p.roi.name for p in pairs] == [f"{k:04d}.gif" for k in range(4)]
