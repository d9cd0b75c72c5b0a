"""Run-length CSVs (Kaggle's ``train.csv`` of ``EncodedPixels``) train with no conversion:
each row's runs drawn into its image's mask, in the pixel order the masks themselves
tell, the class from a class column or the id."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from PIL import Image

from segnet.data import run_length
from segnet.data.errors import ImageDataError
from tests.data.test_images import prepared

H, W = 24, 32


def encoded(mask: np.ndarray, order: str = "columns") -> str:
    """``mask``'s runs as Kaggle writes them: ``start length`` pairs, pixels numbered
    from 1, column by column (``columns``) or row by row."""
    flat = (mask.T if order == "columns" else mask).reshape(-1).astype(np.int8)
    change = np.diff(np.concatenate([[0], flat, [0]]))
    starts, ends = np.flatnonzero(change == 1), np.flatnonzero(change == -1)
    return " ".join(f"{s + 1} {e - s}" for s, e in zip(starts, ends, strict=True))


def blob(k: int, size=(H, W)) -> np.ndarray:
    """An object that is not its own transpose, moved with ``k``."""
    mask = np.zeros(size, bool)
    mask[2 + k % 5 : 9 + k % 5, 3 + k % 7 : 18 + k % 7] = True
    return mask


def photo(mask: np.ndarray, seed: int, flat: bool = False) -> Image.Image:
    """An image whose object is brighter than around it (all one grey where ``flat``)."""
    rng = np.random.default_rng(seed)
    pixels = 60 + rng.integers(0, 20, mask.shape) + (0 if flat else 120) * mask
    return Image.fromarray(pixels.astype(np.uint8), "L").convert("RGB")


def kaggle_folder(root, masks, order="columns", header="ImageId,EncodedPixels", flat=False,
                  labels=None, unlisted=0):  # fmt: skip
    """``train_images/`` and ``train.csv`` of one row per mask (``labels``: a class cell
    each), ``unlisted`` images more that no row names; a sample submission beside."""
    (root / "train_images").mkdir(parents=True)
    rows = []
    for k, mask in enumerate(masks):
        photo(mask, k, flat).save(root / "train_images" / f"{k:03d}.jpg", quality=95)
        cells = [f"{k:03d}.jpg", *([labels[k]] if labels else []), encoded(mask, order)]
        rows.append(",".join(cells))
    for k in range(len(masks), len(masks) + unlisted):
        photo(np.zeros_like(masks[0]), k).save(root / "train_images" / f"{k:03d}.jpg")
    (root / "train.csv").write_text("\n".join([header, *rows]) + "\n")
    (root / "sample_submission.csv").write_text("ImageId,EncodedPixels\n000.jpg,1 1\n")
    return root


def mask_of(dm, name: str) -> np.ndarray:
    return np.array(Image.open(next(p.label for p in dm.pairs if p.name == name)))


def test_a_severstal_folder_trains_its_numbered_classes_and_unlisted_images(tmp_path, caplog):
    """``ImageId,ClassId,EncodedPixels`` with only images that hold a defect listed: the
    classes are numbered, the unlisted images have no object, the sample submission is
    not read, nothing is written into the user's folder."""
    masks = [blob(k) for k in range(8)]
    lower = [m & (np.arange(H)[:, None] >= 5 + k % 5) for k, m in enumerate(masks)]
    labels = ["1" if k % 2 else "3" for k in range(8)]
    root = kaggle_folder(tmp_path / "steel", lower, header="ImageId,ClassId,EncodedPixels",
                         labels=labels, unlisted=3)  # fmt: skip
    with caplog.at_level(logging.INFO):
        dm = prepared(root)
    assert dm.info().class_names == ["background", "class1", "class3"]
    assert len(dm.pairs) == 11
    assert (mask_of(dm, "001.jpg") == lower[1]).all()  # class1: value 1
    assert (mask_of(dm, "000.jpg") == 2 * lower[0]).all()  # class3: value 2
    assert not mask_of(dm, "009.jpg").any()
    assert "3 image(s) beside those" in caplog.text and "they have none" in caplog.text
    assert "number the pixels column by column" in caplog.text
    assert not list(root.rglob("*.png"))


def test_numbered_classes_take_the_names_given_by_number(tmp_path, caplog):
    """``data.class_names[n]`` names class number ``n``; a checkpoint's ``class<n>``
    names its numbers alike (a number it has no name for is background, said); too few
    names, or one name twice, are refused."""
    masks = [blob(k) for k in range(6)]
    root = kaggle_folder(tmp_path / "steel", masks, header="ImageId,ClassId,EncodedPixels",
                         labels=["2", "4.0"] * 3)  # fmt: skip
    dm = prepared(root, class_names=["background", "a", "pitting", "c", "scratch"])
    assert dm.info().class_names == ["background", "a", "pitting", "c", "scratch"]
    assert (mask_of(dm, "001.jpg") == 4 * masks[1]).all()
    assert (mask_of(dm, "000.jpg") == 2 * masks[0]).all()
    with pytest.raises(
        ImageDataError, match="names 2 classes after the background, and .* up to 4"
    ):
        prepared(root, class_names=["background", "pitting", "scratch"])
    with pytest.raises(ImageDataError, match="names pitting twice"):
        prepared(root, class_names=["background", "x", "pitting", "y", "pitting"])
    with caplog.at_level(logging.INFO):
        dm = prepared(root, class_names=["background", "class4"])  # as a checkpoint names them
    assert (mask_of(dm, "001.jpg") == masks[1]).all() and not mask_of(dm, "000.jpg").any()
    assert "class2" in caplog.text


@pytest.mark.parametrize("size", [(H, W), (W, W)], ids=["not square", "square"])
@pytest.mark.parametrize("order", ["columns", "rows"])
def test_the_pixel_order_is_told_from_the_masks(tmp_path, caplog, size, order):
    """Runs written row by row or column by column draw the same masks: on images that
    are not square by the stripes the wrong order tears, on square ones by the image's
    edges the right order follows."""
    masks = [blob(k, size) for k in range(6)]
    root = kaggle_folder(tmp_path / "d", masks, order=order)
    with caplog.at_level(logging.INFO):
        dm = prepared(root)
    for k, mask in enumerate(masks):
        assert (mask_of(dm, f"{k:03d}.jpg") == mask).all()
    told = "0 of 6 images fit column by column, 6 row by row" if order == "rows" else "6 of 6"
    assert told in caplog.text


def test_square_images_that_do_not_tell_the_order_are_refused_naming_the_setting(tmp_path):
    masks = [blob(k, (W, W)) for k in range(4)]
    root = kaggle_folder(tmp_path / "d", masks, order="rows", flat=True)
    with pytest.raises(ImageDataError, match="give data.rle_order=columns or data.rle_order=rows"):
        prepared(root)
    dm = prepared(root, rle_order="rows")
    assert (mask_of(dm, "002.jpg") == masks[2]).all()


def test_an_order_given_that_the_masks_contradict_is_warned_of(tmp_path, caplog):
    masks = [blob(k) for k in range(4)]
    root = kaggle_folder(tmp_path / "d", masks, order="rows")
    with caplog.at_level(logging.WARNING):
        prepared(root, rle_order="columns")
    assert "data.rle_order=columns, and the masks of" in caplog.text
    with pytest.raises(ValueError, match="data.rle_order='diagonal'"):
        prepared(root, rle_order="diagonal")


def test_ids_without_a_suffix_and_empty_rows_leave_unlisted_images_out(tmp_path, caplog):
    """TGS Salt's ``id,rle_mask``: ids name images without their suffix, an empty cell
    is an image with no object; listing those, the file leaves an unlisted image
    unannotated: left out, warned."""
    root = tmp_path / "salt"
    masks = [blob(k) for k in range(5)] + [np.zeros((H, W), bool)]
    kaggle_folder(root, masks, header="id,rle_mask", unlisted=1)
    text = (root / "train.csv").read_text().replace(".jpg", "")
    (root / "train.csv").write_text(text)
    with caplog.at_level(logging.WARNING):
        dm = prepared(root)
    assert sorted(p.name for p in dm.pairs) == [f"{k:03d}.jpg" for k in range(6)]
    assert not mask_of(dm, "005.jpg").any() and (mask_of(dm, "003.jpg") == masks[3]).all()
    assert "1 image(s) beside those" in caplog.text and "left out" in caplog.text


def clouds(root, images: int, overlapping: int):
    """Understanding Clouds' ``Image_Label``: ``<image>_<class>``, a row per class (an
    empty one for a class not there); ``overlapping`` images' two classes overlap, the
    others' lie apart."""
    (root / "train_images").mkdir(parents=True)
    rows, shapes = ["Image_Label,EncodedPixels"], {}
    for k in range(images):
        big, small = np.zeros((H, W), bool), np.zeros((H, W), bool)
        big[2:20, 2 + k % 4 : 28] = True
        small[5:9, 6 + k % 4 : 12] = True
        if k >= overlapping:
            big[:, :14] = False  # beside the small one, not over it
        photo(big | small, k).save(root / "train_images" / f"c{k}.jpg")
        rows += [f"c{k}.jpg_Sugar,{encoded(big)}", f"c{k}.jpg_Fish,{encoded(small)}",
                 f"c{k}.jpg_Gravel,"]  # fmt: skip
        shapes[f"c{k}.jpg"] = big, small
    (root / "train.csv").write_text("\n".join(rows) + "\n")
    return shapes


def test_overlapping_classes_are_a_mask_each_and_a_region_each(tmp_path, caplog):
    """Classes that overlap (cloud forms): each class a mask of its own and a sigmoid
    output of its own (a region), as masks given one per class train; the label map's
    classes the combinations that occur."""
    shapes = clouds(tmp_path / "clouds", 4, overlapping=4)
    with caplog.at_level(logging.INFO):
        dm = prepared(tmp_path / "clouds")
    info = dm.info()
    assert info.class_names == ["background", "Sugar", "Fish+Sugar"]
    assert info.regions == {"Fish": [2], "Sugar": [1, 2]}
    pair = next(p for p in dm.pairs if p.name == "c3.jpg")
    masks = {c: np.array(Image.open(m)) > 0 for c, m in pair.class_masks}
    big, small = shapes["c3.jpg"]
    assert (masks["Sugar"] == big).all() and (masks["Fish"] == small).all()
    assert "they overlap on 4 of the 4 images holding two or more" in caplog.text
    assert (
        "the classes Gravel of" in caplog.text
        and "none of their rows holds an object" in caplog.text
    )
    assert "rle_order" in dm.settings_found()


def test_classes_that_seldom_overlap_stay_one_label_map(tmp_path, caplog):
    """One image in 25 with overlapping classes: a label map, the smaller object's class
    kept where they overlap, said."""
    shapes = clouds(tmp_path / "clouds", 25, overlapping=1)
    with caplog.at_level(logging.INFO):
        dm = prepared(tmp_path / "clouds")
    assert dm.info().class_names == ["background", "Fish", "Gravel", "Sugar"]
    big, small = shapes["c0.jpg"]
    mask = mask_of(dm, "c0.jpg")
    assert (mask[small] == 1).all() and (mask[big & ~small] == 3).all() and not mask[~big].any()
    assert "in 1 image(s) of" in caplog.text and "objects of two classes overlap" in caplog.text


def test_runs_past_their_image_and_sizes_that_differ_are_refused_by_line(tmp_path):
    root = kaggle_folder(tmp_path / "d", [blob(k) for k in range(3)])
    with open(root / "train.csv", "a") as f:
        Image.new("RGB", (W, H)).save(root / "train_images" / "late.jpg")
        f.write("late.jpg,700 90\n")
    with pytest.raises(ImageDataError, match=r"train.csv, line 5: its runs reach pixel 789"):
        prepared(root)
    sized = tmp_path / "sized"
    kaggle_folder(sized, [blob(k) for k in range(3)])
    rows = (sized / "train.csv").read_text().splitlines()
    sized_rows = ["id,width,height,annotation"] + [
        f"{r.split(',')[0]},{W},{H + (k == 2)},{r.split(',')[1]}" for k, r in enumerate(rows[1:])
    ]
    (sized / "train.csv").write_text("\n".join(sized_rows) + "\n")
    with pytest.raises(ImageDataError, match=r"gives 002.jpg the size 32x25, and .* is 32x24"):
        prepared(sized)


def test_an_image_in_two_files_is_refused_and_other_csvs_are_not_run_lengths(tmp_path):
    root = kaggle_folder(tmp_path / "d", [blob(k) for k in range(3)])
    (root / "val.csv").write_text(f"ImageId,EncodedPixels\n001.jpg,{encoded(blob(1))}\n")
    with pytest.raises(ImageDataError, match="is named in .*train.csv and again in .*val.csv"):
        prepared(root)
    assert run_length.table(root / "sample_submission.csv") is None
    paths = tmp_path / "pairs.csv"
    paths.write_text("image,mask\nimages/0.png,masks/0.png\n")
    assert run_length.table(paths) is None
    header_only = tmp_path / "train_masks.csv"  # Carvana's, beside its mask images
    header_only.write_text("img,rle_mask\n")
    assert run_length.table(header_only) is None


def test_decoding_follows_the_order_and_checks_the_runs():
    def runs(text, relative=False):
        return run_length.runs_of(run_length.Row(2, "x", "", text, relative=relative), H, W, "here")

    mask = blob(3)
    for order in ("columns", "rows"):
        assert (run_length.decode(runs(encoded(mask, order)), H, W, order) == mask).all()
    with pytest.raises(ImageDataError, match="pixels are numbered from 1"):
        runs("0 4")
    with pytest.raises(ImageDataError, match="not pairs of whole numbers"):
        runs("1 4 9")
    assert runs(" -1").shape == (0, 2)
    with pytest.raises(ImageDataError, match="starts before the one ahead of it ends"):
        runs("10 4 2 3")
    # SIIM's: from 0, each start counted from the last run's end
    assert runs("10 4 2 3", relative=True).tolist() == [[10, 4], [16, 3]]
    with pytest.raises(ImageDataError, match="counted from the last run's end.*reach pixel 800"):
        runs("700 90 5 5", relative=True)
    assert not run_length.ascending("10 4 2 3") and run_length.ascending("1 4 9 2")


def test_the_order_told_is_recorded_and_full_height_bands_are_told_by_edges(tmp_path):
    """A band from top to bottom is one piece in either order (the wrong one moves it to
    a band across): the image's edges tell; the run records the order told."""
    masks = []
    for k in range(5):
        band = np.zeros((H, W), bool)
        band[:, 4 + 3 * k : 10 + 3 * k] = True
        masks.append(band)
    root = kaggle_folder(tmp_path / "d", masks, order="columns")  # each band one run
    dm = prepared(root)
    for k, mask in enumerate(masks):
        assert (mask_of(dm, f"{k:03d}.jpg") == mask).all()
    dm.info()
    assert dm.settings_found()["rle_order"] == "columns"
    assert "rle_order" not in prepared(root, rle_order="columns").settings_found()


def test_csv_quirks_long_cells_and_short_rows(tmp_path):
    """Cells of a megabyte, ``NA`` and short rows for no object, a space before a quote:
    read; Severstal's old ``ImageId_ClassId`` gives the class after the name."""
    root = tmp_path / "d"
    (root / "train_images").mkdir(parents=True)
    many = np.zeros((400, 500), bool)
    many[:, ::4] = True  # 500 / 4 runs of 400 pixels by columns: 125 runs ...
    many[::3, :] = True  # ... broken up by every third row: thousands of runs
    Image.fromarray((many * 200).astype(np.uint8)).save(root / "train_images" / "big.png")
    for k in range(3):
        photo(blob(k), k).save(root / "train_images" / f"{k}.png")
    rows = ["ImageId_ClassId,EncodedPixels", f'big.png_1, "{encoded(many)}"']
    rows += [f"{k}.png_2,{encoded(blob(k))}" for k in range(3)] + ["0.png_1,NA", "1.png_1"]
    (root / "train.csv").write_text("\n".join(rows) + "\n")
    assert len(encoded(many)) > 131072
    dm = prepared(root, rle_order="columns")
    assert dm.info().class_names == ["background", "class1", "class2"]
    assert (mask_of(dm, "big.png") == many).all() and (mask_of(dm, "1.png") == 2 * blob(1)).all()


def test_a_broken_csv_beside_mask_images_leaves_them_read(tmp_path):
    root = tmp_path / "d"
    for folder in ("images", "masks"):
        (root / folder).mkdir(parents=True)
    for k in range(4):
        photo(blob(k), k).save(root / "images" / f"{k}.png")
        Image.fromarray(blob(k).astype(np.uint8) * 255).save(root / "masks" / f"{k}.png")
    (root / "train.csv").write_text("id,rle_mask\n0,1 5\n1\n2,3 4\n")  # 1: no object
    dm = prepared(root)
    assert len(dm.pairs) == 4 and dm.pairs[0].label.parent == root / "masks"


def test_unlisted_images_of_a_folder_two_files_name_are_left_out(tmp_path, caplog):
    root = kaggle_folder(tmp_path / "d", [blob(k) for k in range(8)], unlisted=2)
    rows = (root / "train.csv").read_text().splitlines()
    (root / "train.csv").write_text("\n".join(rows[:5]) + "\n")
    (root / "val.csv").write_text("\n".join(rows[:1] + rows[5:]) + "\n")
    with caplog.at_level(logging.WARNING):
        dm = prepared(root)
    assert len(dm.pairs) == 8
    assert "2 image(s) of" in caplog.text and "left out (in which split?)" in caplog.text


def test_empty_class_cells(tmp_path):
    masks = [blob(k) for k in range(4)]
    root = kaggle_folder(tmp_path / "d", masks, header="ImageId,ClassId,EncodedPixels",
                         labels=["1", "3", "1", "3"])  # fmt: skip
    with open(root / "train.csv", "a") as f:
        Image.new("RGB", (W, H)).save(root / "train_images" / "none.jpg")
        f.write("none.jpg,,\n")
    assert prepared(root).info().class_names == ["background", "class1", "class3"]
    with open(root / "train.csv", "a") as f:
        f.write(f"none.jpg,,{encoded(blob(0))}\n")
    with pytest.raises(ImageDataError, match="line 7: runs with an empty class cell"):
        prepared(root)


def relative(mask: np.ndarray) -> str:
    """``mask``'s runs as SIIM writes them: column by column, from 0, each start counted
    from the last run's end."""
    pairs = np.asarray(encoded(mask).split(), int).reshape(-1, 2)
    if not len(pairs):
        return "-1"
    pairs[:, 0] -= 1
    ends = np.concatenate([[0], (pairs[:, 0] + pairs[:, 1])[:-1]])
    return " ".join(f"{s - e} {n}" for (s, n), e in zip(pairs, ends, strict=True))


def test_runs_counted_from_the_last_ones_end_are_read_so_said(tmp_path, caplog):
    """SIIM-ACR's ``ImageId, EncodedPixels`` (a space after the comma, `` -1`` for no
    object, an object per row): a row whose starts do not ascend shows the file counts
    each start from the last run's end."""
    root = tmp_path / "siim"
    (root / "images").mkdir(parents=True)
    rows = ["ImageId, EncodedPixels"]
    masks = []
    for k in range(5):
        left, right = blob(k), np.zeros((H, W), bool)
        right[14:20, 24:30] = k % 2 == 0
        masks.append(left | right)
        photo(left | right, k).save(root / "images" / f"1.2.276.{k}.png")
        rows += [f"1.2.276.{k}, {relative(left)}"] + [f"1.2.276.{k}, {relative(right)}"] * (
            k % 2 == 0
        )
    rows.append("1.2.276.9, -1")
    photo(np.zeros((H, W), bool), 9).save(root / "images" / "1.2.276.9.png")
    (root / "train-rle.csv").write_text("\n".join(rows) + "\n")
    with caplog.at_level(logging.INFO):
        dm = prepared(root)
    for k, mask in enumerate(masks):
        assert (mask_of(dm, f"1.2.276.{k}.png") == mask).all()
    assert "each start is read as counted from the last run's end" in caplog.text


def test_one_row_out_of_order_is_refused_by_line_not_read_as_counted(tmp_path):
    """A file whose runs ascend but in one row (objects joined out of order) keeps its
    pixel numbers: that row is refused, named."""
    masks = [blob(k) for k in range(6)]
    root = kaggle_folder(tmp_path / "d", masks)
    rows = (root / "train.csv").read_text().splitlines()
    name, cells = rows[3].split(",")
    pairs = cells.split()
    rows[3] = f"{name},{' '.join(pairs[2:] + pairs[:2])}"  # the first run last
    (root / "train.csv").write_text("\n".join(rows) + "\n")
    with pytest.raises(ImageDataError, match="line 4: a run starts before the one ahead"):
        prepared(root, rle_order="columns")


def test_more_overlapping_classes_than_masks_take_stay_one_label_map(tmp_path, caplog):
    root = tmp_path / "many"
    (root / "train_images").mkdir(parents=True)
    rows = ["ImageId,ClassId,EncodedPixels"]
    for k in range(3):
        photo(blob(k), k).save(root / "train_images" / f"{k}.jpg")
        for c in range(1, 9):  # eight classes, each over the last
            part = np.zeros((H, W), bool)
            part[2 + c : 12 + c, 3 * c : 3 * c + 8] = True
            rows.append(f"{k}.jpg,{c},{encoded(part)}")
    (root / "train.csv").write_text("\n".join(rows) + "\n")
    with caplog.at_level(logging.WARNING):
        dm = prepared(root, rle_order="columns")
    assert len(dm.info().class_names) == 9 and not dm.pairs[0].class_masks
    assert "they are 8, more than masks of their own take (7)" in caplog.text


def test_a_checkpoint_of_a_mask_per_class_reads_other_data_so(tmp_path):
    """Evaluation gives back the combinations and regions a run of a mask per class
    trained: data whose classes do not overlap, or that lacks one of its classes, is
    read as a mask per class too (a class the data lacks blank), not as a label map its
    outputs do not match."""
    clouds(tmp_path / "over", 6, overlapping=3)
    info = prepared(tmp_path / "over").info()
    assert info.class_names == ["background", "Fish", "Sugar", "Fish+Sugar"]
    shapes = clouds(tmp_path / "apart", 6, overlapping=0)
    text = (tmp_path / "apart" / "train.csv").read_text().splitlines()
    no_fish = [row.split(",")[0] + "," if "_Fish," in row else row for row in text]
    (tmp_path / "apart" / "train.csv").write_text("\n".join(no_fish) + "\n")
    dm = prepared(tmp_path / "apart", class_names=info.class_names, regions=info.regions)
    assert dm.info().class_names == info.class_names and dm.info().regions == info.regions
    masks = {c: np.array(Image.open(m)) > 0 for c, m in dm.pairs[0].class_masks}
    big, _ = shapes[dm.pairs[0].name]
    assert (masks["Sugar"] == big).all() and not masks["Fish"].any()
    own = prepared(tmp_path / "apart").info()  # read for itself: one class, no overlap
    assert own.class_names == ["background", "Fish", "Gravel", "Sugar"] and not own.regions


def test_class_names_of_one_class_per_pixel_keep_overlapping_classes_one_label_map(
    tmp_path, caplog
):
    """A run of one label map (or a user naming its classes with the background first)
    reads overlapping classes as that label map, warned, not as masks its outputs lack."""
    clouds(tmp_path / "over", 4, overlapping=4)
    with caplog.at_level(logging.WARNING):
        dm = prepared(tmp_path / "over", class_names=["background", "Fish", "Sugar"])
    assert not dm.pairs[0].class_masks and dm.info().class_names == ["background", "Fish", "Sugar"]
    assert "are one per pixel" in caplog.text


def test_ids_of_a_folder_and_the_start_of_a_name(tmp_path, caplog):
    """UW-Madison GI's ``id,class,segmentation``: ``case1_day0_slice_0003`` names
    ``train/case1/case1_day0/scans/slice_0003_24_32_1.50_1.50.png`` (16-bit), a row per
    class, the runs row by row, the organs overlapping."""
    root = tmp_path / "uw"
    rows = ["id,class,segmentation"]
    shapes = {}
    for case in range(2):
        scans = root / "train" / f"case{case}" / f"case{case}_day0" / "scans"
        scans.mkdir(parents=True)
        for k in range(1, 5):
            big, small = np.zeros((H, W), bool), np.zeros((H, W), bool)
            big[2:20, 2 + k : 28] = True
            small[5:9, 6 + k : 12] = True
            pixels = (3000 + 9000 * big + 9000 * small).astype(np.uint16)
            Image.fromarray(pixels).save(scans / f"slice_{k:04d}_{H}_{W}_1.50_1.50.png")
            slice_id = f"case{case}_day0_slice_{k:04d}"
            rows += [f"{slice_id},large_bowel,", f"{slice_id},small_bowel,{encoded(small, 'rows')}",
                     f"{slice_id},stomach,{encoded(big, 'rows')}"]  # fmt: skip
            shapes[slice_id] = big, small
    (root / "train.csv").write_text("\n".join(rows) + "\n")
    with caplog.at_level(logging.INFO):
        dm = prepared(root)
    assert len(dm.pairs) == 8 and dm.info().regions.keys() == {"small_bowel", "stomach"}
    pair = next(p for p in dm.pairs if "case1/case1_day0/scans/slice_0002" in p.name)
    masks = {c: np.array(Image.open(m)) > 0 for c, m in pair.class_masks}
    big, small = shapes["case1_day0_slice_0002"]
    assert (masks["stomach"] == big).all() and (masks["small_bowel"] == small).all()
    assert "number the pixels row by row" in caplog.text
