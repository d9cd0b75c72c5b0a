"""Class lists shipped beside the data (Roboflow's ``_classes.csv``, a ``class_dict.csv``,
CVAT's ``labelmap.txt``, labelme's ``class_names.txt``) name the classes, so such a folder
trains with no class settings; void names are void; settings given win."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from PIL import Image

from segnet.data.class_files import ClassFileError, read_class_file, shipped_classes
from segnet.data.images import colour_code
from tests.data.test_images import blob_label, make_folder, prepared, train_labels

COLOURS = {0: (0, 0, 0), 1: (250, 50, 83), 2: (128, 128, 128)}


def colour_folder(root, n: int = 6, void: bool = True):
    """RGB masks: background black, a disc red, a void band grey at the top."""
    for folder in ("images", "labels"):
        (root / folder).mkdir(parents=True)
    for k in range(n):
        label = blob_label(24, 32, seed=k)
        if void:
            label[:3] = 2
        mask = np.zeros((*label.shape, 3), np.uint8)
        for value, colour in COLOURS.items():
            mask[label == value] = colour
        Image.fromarray((label * 100 + 20).astype(np.uint8)).save(root / "images" / f"{k}.png")
        Image.fromarray(mask).save(root / "labels" / f"{k}.png")
    return root


def value_folder(root, n: int = 6, value: int = 1):
    """Grey masks holding 0 and ``value``."""
    for folder in ("images", "labels"):
        (root / folder).mkdir(parents=True)
    for k in range(n):
        label = blob_label(24, 32, seed=k)
        Image.fromarray((label * 100 + 20).astype(np.uint8)).save(root / "images" / f"{k}.png")
        Image.fromarray((label * value).astype(np.uint8)).save(root / "labels" / f"{k}.png")
    return root


def test_a_class_dict_names_the_classes_by_colour_and_void_is_void(tmp_path, caplog):
    root = colour_folder(tmp_path / "d")
    (root / "class_dict.csv").write_text(
        "name,r,g,b\nBackground,0,0,0\nDisc,250,50,83\nVoid,128,128,128\n"
    )
    with caplog.at_level(logging.INFO):
        dm = prepared(root)
    info = dm.info()
    assert info.class_names == ["Background", "Disc"]
    assert info.palette == [[0, 0, 0], [250, 50, 83]]  # the file's colours show the classes
    assert "void (neither trained nor scored): Void" in caplog.text
    labels = train_labels(dm)
    assert set(np.unique(labels)) == {0, 1, info.ignore_index}


def test_roboflow_classes_csv_in_each_split_folder_gives_the_values(tmp_path):
    root = tmp_path / "export"
    for split in ("train", "valid"):
        value_folder(root / split, n=4, value=2)
        (root / split / "_classes.csv").write_text("Pixel Value, Class\n0, background\n2, crack\n")
    dm = prepared(root)
    assert dm.info().class_names == ["background", "crack"]
    assert set(np.unique(train_labels(dm))) == {0, 1}


def test_split_folders_listing_other_classes_are_refused_naming_both(tmp_path):
    root = tmp_path / "export"
    for split, second in (("train", "crack"), ("valid", "hole")):
        value_folder(root / split, n=4)
        (root / split / "_classes.csv").write_text(f"Pixel Value,Class\n0,background\n1,{second}\n")
    with pytest.raises(ClassFileError, match=r"train/_classes.csv and .*valid/_classes.csv"):
        prepared(root)


def test_cvat_labelmap_gives_names_and_colours(tmp_path):
    root = colour_folder(tmp_path / "d", void=False)
    (root / "labelmap.txt").write_text(
        "# label:color_rgb:parts:actions\nbackground:0,0,0::\ndisc:250,50,83::\n"
    )
    dm = prepared(root)
    assert dm.info().class_names == ["background", "disc"]
    assert set(np.unique(train_labels(dm))) == {0, 1}


def test_labelme_class_names_are_the_values_in_order(tmp_path):
    root = value_folder(tmp_path / "d")
    (root / "class_names.txt").write_text("_background_\nleaf\n")
    assert prepared(root).info().class_names == ["_background_", "leaf"]
    (root / "class_names.txt").write_text("leaf\nstem\n")  # not labelme's: which is 0?
    with pytest.raises(ClassFileError, match="does not start with _background_"):
        prepared(root)


def test_settings_given_win_over_the_file_which_is_then_not_even_read(tmp_path, caplog):
    root = value_folder(tmp_path / "d", value=255)
    (root / "_classes.csv").write_text("Pixel Value,Class\n0,background\n1,cell\n")
    with caplog.at_level(logging.INFO):
        dm = prepared(root, class_names=["bg", "membrane"], label_values=[0, 255])
    assert dm.info().class_names == ["bg", "membrane"]
    assert "data.class_names and data.label_values given: the class lists" in caplog.text
    (root / "class_names.txt").write_text("cat\ndog\n")  # someone's own list, not labelme's
    dm = prepared(root, class_names=["bg", "membrane"], label_values=[0, 255])
    assert set(np.unique(train_labels(dm))) == {0, 1}


def test_class_names_alone_given_read_index_masks_not_the_files_codes(tmp_path):
    """Names equal to the file's with label_values null mean index masks, as before class
    lists were read: the file's colours are not applied to them."""
    root = value_folder(tmp_path / "d", value=1)
    (root / "label_class_dict.csv").write_text(
        "name,r,g,b\nbackground,0,0,0\nbuilding,255,255,255\n"
    )
    dm = prepared(root, class_names=["background", "building"])
    assert set(np.unique(train_labels(dm))) == {0, 1}


def test_a_run_records_the_classes_it_read_so_evaluation_reads_the_masks_alike(tmp_path):
    root = colour_folder(tmp_path / "d")
    (root / "class_dict.csv").write_text(
        "name,r,g,b\nDisc,250,50,83\nBackground,0,0,0\nVoid,128,128,128\n"
    )
    dm = prepared(root, ignore_values=[[1, 2, 3]])
    first = train_labels(dm)
    assert dm.settings_found() == {
        "class_names": ["Background", "Disc"],
        "label_values": None,
        "palette": [[0, 0, 0], [250, 50, 83]],
        "ignore_values": [[1, 2, 3], [128, 128, 128]],
    }
    (root / "class_dict.csv").unlink()  # the data read again elsewhere, as recorded
    again = prepared(root, **dm.settings_found())
    assert np.array_equal(train_labels(again), first)
    assert set(np.unique(first)) == {0, 1, again.info().ignore_index}


def test_a_checkpoint_scores_the_data_alike_with_its_class_list_gone(tmp_path):
    """evaluate.py reads the class settings the run recorded, not the folder's list."""
    from segnet.commands.evaluate import evaluate
    from segnet.commands.train import train
    from tests.commands.test_train_images import QUICK
    from tests.conftest import compose

    root = colour_folder(tmp_path / "d", n=8)
    (root / "class_dict.csv").write_text(
        "name,r,g,b\nDisc,250,50,83\nBackground,0,0,0\nVoid,128,128,128\n"
    )
    train(compose("train", [*QUICK, f"data.root={root}"], tmp_path / "run"))
    best = tmp_path / "run" / "checkpoints" / "best.ckpt"
    args = [f"ckpt_path={best}", "data.num_workers=0"]
    with_list, _ = evaluate(compose("evaluate", args, tmp_path / "a"))
    (root / "class_dict.csv").unlink()
    without, _ = evaluate(compose("evaluate", args, tmp_path / "b"))
    assert without == pytest.approx(with_list, nan_ok=True) and "test/dice/Disc" in without


@pytest.mark.parametrize(
    ("name", "text", "match"),
    [
        ("class_dict.csv", "name,r,g\nsky,0,0\n", "r, g, b columns"),
        ("class_dict.csv", "name,r,g,b\nsky,0,0,x\n", "line 2"),
        ("_classes.csv", "Pixel Value,Class\n0,a\n0,b\n", "the value 0"),
        ("labelmap.txt", "background 0 0 0\n", "not 'name:r,g,b::'"),
        ("_classes.csv", "Pixel Value,Class\n", "lists no class"),
    ],
)
def test_a_class_file_that_cannot_be_read_is_refused_naming_the_line(tmp_path, name, text, match):
    (tmp_path / name).write_text(text)
    with pytest.raises(ClassFileError, match=match):
        read_class_file(tmp_path / name)


def test_class_files_are_found_in_the_root_and_its_data_folders_only(tmp_path):
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    (deep / "labelmap.txt").write_text("x:1,2,3::\n")
    assert shipped_classes(tmp_path) is None
    (tmp_path / "labels").mkdir()
    (tmp_path / "labels" / "Kaggle_class_dict.csv").write_text("name,r,g,b\nsky,0,0,255\n")
    found = shipped_classes(tmp_path)
    assert found.class_names == ["sky"] and found.by_colour


def test_the_class_file_names_are_what_evaluation_checks_a_checkpoint_against(tmp_path):
    from segnet.data.images_datamodule import ImageFolderDataModule

    root = value_folder(tmp_path / "d")
    (root / "_classes.csv").write_text("Pixel Value,Class\n0,background\n1,crack\n")
    named = ImageFolderDataModule.class_names_in_data({"root": str(root), "csv": None})
    assert named == ["background", "crack"]


def test_the_background_is_class_0_wherever_the_file_lists_it(tmp_path):
    root = value_folder(tmp_path / "d", value=1)
    (root / "_classes.csv").write_text("Pixel Value,Class\n1,crack\n0,Background\n")
    dm = prepared(root)
    assert dm.info().class_names == ["Background", "crack"] and dm.info().monitor == "val/dice"
    assert set(np.unique(train_labels(dm))) == {0, 1}  # value 1 is the crack, class 1


def test_a_list_without_a_background_picks_the_checkpoint_by_the_miou_of_every_class(tmp_path):
    root = colour_folder(tmp_path / "d")
    (root / "class_dict.csv").write_text(
        "name,r,g,b\nurban_land,0,0,0\nwater,250,50,83\nunknown,128,128,128\n"
    )
    info = prepared(root).info()
    assert info.class_names == ["urban_land", "water"] and info.monitor == "val/miou"


def test_void_given_adds_to_the_files_void(tmp_path):
    root = colour_folder(tmp_path / "d")
    (root / "class_dict.csv").write_text(
        "name,r,g,b\nbackground,0,0,0\ndisc,250,50,83\nvoid,128,128,128\n"
    )
    with pytest.raises(ValueError, match="also a class's value"):
        prepared(root, ignore_values=[[250, 50, 83]])  # a class's colour: either, not both
    dm = prepared(root, ignore_values=[[1, 2, 3]])
    codes = [colour_code(c, "") for c in ([1, 2, 3], [128, 128, 128])]
    assert dm.mapping.ignore == codes


def test_patient_folders_are_not_looked_in(tmp_path):
    (tmp_path / "patient1").mkdir()
    (tmp_path / "patient1" / "_classes.csv").write_text("Pixel Value,Class\n0,a\n")
    assert shipped_classes(tmp_path) is None
    (tmp_path / "Masks").mkdir()
    (tmp_path / "Masks" / "_classes.csv").write_text("Pixel Value,Class\n0,a\n")
    assert shipped_classes(tmp_path).class_names == ["a"]


def test_masks_given_one_per_class_leave_a_class_list_beside_them_unread(tmp_path):
    from tests.data.test_class_masks import class_folders

    root = class_folders(tmp_path / "d", n=6)
    (root / "labelmap.txt").write_text("background:0,0,0::\nvessel:255,255,255::\n")
    info = prepared(root).info()
    assert info.regions == {"artery": [1, 3], "vessel": [2, 3]}


def test_grey_masks_beside_a_list_of_colours_hold_its_row_numbers_semantic_drone_style(
    tmp_path, caplog
):
    """label_images_semantic/ of class numbers beside class_dict_seg.csv's colours: a grey
    file holds no colour, so value k is the class of row k (row 0 unlabeled: void), and
    the run records it so; a list of greys alone is still read by colour."""
    root = value_folder(tmp_path / "d", value=2)
    (root / "class_dict_seg.csv").write_text(
        "name, r, g, b\nunlabeled, 0, 0, 0\nroof, 70, 70, 70\npaved-area, 128, 64, 128\n"
    )
    with caplog.at_level(logging.INFO):
        dm = prepared(root)
    assert dm.info().class_names == ["roof", "paved-area"]
    labels = train_labels(dm)
    assert set(np.unique(labels)) == {1, dm.info().ignore_index}  # value 2: row 2
    assert "by row (the masks hold one channel: row k is value k)" in caplog.text
    said = [r.message for r in caplog.records if r.message.startswith("classes from")]
    assert len(said) == 1 and "1 roof, 2 paved-area" in said[0]  # once, never as colours
    assert dm.settings_found()["label_values"] == [1, 2]
    assert np.array_equal(train_labels(prepared(root, **dm.settings_found())), labels)
    (root / "class_dict_seg.csv").write_text("name,r,g,b\nbackground,0,0,0\nwhite,2,2,2\n")
    assert set(np.unique(train_labels(prepared(root)))) == {0, 1}  # greys: read by colour


def test_loveda_layout_has_its_seven_classes_and_no_data_void(tmp_path, caplog):
    root = tmp_path / "LoveDA"
    for domain in ("Urban", "Rural"):
        folder = value_folder(root / "Train" / domain, n=3, value=3)  # 0 no data, 3 road
        (folder / "images").rename(folder / "images_png")
        (folder / "labels").rename(folder / "masks_png")
    with caplog.at_level(logging.INFO):
        dm = prepared(root)
    info = dm.info()
    assert info.class_names[:3] == ["background", "building", "road"] and len(info.class_names) == 7
    assert set(np.unique(train_labels(dm))) == {2, info.ignore_index}
    assert "void (neither trained nor scored): no-data" in caplog.text
    assert shipped_classes(tmp_path / "elsewhere") is None


def test_grey_masks_of_the_lists_grey_levels_are_still_read_by_colour(tmp_path):
    """0/255 grey masks beside black, white and red: the masks show black and white, so
    they are read by colour, not by row (where 255 is no row)."""
    root = value_folder(tmp_path / "d", value=255)
    (root / "class_dict.csv").write_text(
        "name,r,g,b\nbackground,0,0,0\nbuilding,255,255,255\nroad,255,0,0\n"
    )
    dm = prepared(root)
    assert dm.info().class_names == ["background", "building", "road"]
    assert set(np.unique(train_labels(dm))) == {0, 1}


def test_a_classes_txt_beside_the_masks_names_the_classes_by_value(tmp_path, caplog):
    """A classes.txt of names alone, one a line (numbered or not): index masks hold their
    numbers, black-and-white masks of two names read black the first; recorded for
    evaluation. Two that differ, or a name twice, are refused naming the file."""
    from segnet.data.class_files import names_of

    index = make_folder(tmp_path / "i", values=(0, 1))
    (index / "classes.txt").write_text("# the classes\nbackground\n\ndisc\n")
    with caplog.at_level(logging.INFO):
        dm = prepared(index)
    assert dm.info().class_names == ["background", "disc"]
    assert dm.settings_found()["class_names"] == ["background", "disc"]
    assert f"the classes of {index / 'classes.txt'}" in caplog.text
    white = make_folder(tmp_path / "w", values=(0, 255))
    (white / "labels" / "classes.txt").write_text("0 sky\n1: cloud\n")
    dm = prepared(white)
    assert dm.info().class_names == ["sky", "cloud"] and set(np.unique(train_labels(dm))) == {0, 1}
    assert dm.settings_found()["label_values"] == [0, 255]
    (white / "classes.txt").write_text("sky\nsea\n")
    with pytest.raises(ClassFileError, match="list different classes"):
        prepared(white)
    (tmp_path / "twice.txt").write_text("a\nb\na\n")
    with pytest.raises(ClassFileError, match="the class 'a' twice"):
        names_of(tmp_path / "twice.txt")
    given = prepared(index, class_names=["bg", "fg"])  # a setting wins over the file
    assert given.info().class_names == ["bg", "fg"]


def test_a_classes_txt_that_does_not_fit_the_masks_is_not_read(tmp_path, caplog):
    """A classes.txt of something else (labelImg's box classes beside black-and-white
    masks, one name with the background implied) or not names alone (numbers from 1,
    colours) is left unread, said, and the folder reads as it did without it; a void
    name's line is void."""
    from segnet.data.class_files import names_of

    white = make_folder(tmp_path / "w", values=(0, 255))
    for listed in ("person\ncar\ndog\n", "crack\n"):
        (white / "labels" / "classes.txt").write_text(listed)
        with caplog.at_level(logging.INFO):
            dm = prepared(white)
        assert dm.info().class_names == ["background", "foreground"]
        assert "it is not read" in caplog.text
    for listed in ("1 crack\n2 spall\n", "background 0 0 0\nroad 128 64 128\n"):
        (tmp_path / "other.txt").write_text(listed)
        assert names_of(tmp_path / "other.txt") is None
    index = make_folder(tmp_path / "i", values=(0, 1))
    (index / "classes.txt").write_text("background\ndisc\nunlabelled\n")
    dm = prepared(index)
    assert dm.info().class_names == ["background", "disc"]
    assert dm.settings_found()["ignore_values"] == [2]
