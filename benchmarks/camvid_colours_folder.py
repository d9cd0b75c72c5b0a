"""A multi-class 'your own images' folder with colour masks, for checking
experiment=images_quick on the kind of folder aerial and street-scene sets ship: CamVid's
frames with masks in CamVid's own colour code, half of them saved as RGB PNGs and half as
palette PNGs holding the same colours (as masks edited in two tools come), one class grey
(Sky, [128,128,128]) and unlabelled pixels black, given as void:

    python benchmarks/camvid_colours_folder.py ../shared/data/CamVid/val /tmp/streets
    python train.py experiment=images_quick data.root=/tmp/streets \
      'data.class_names=[sky,building,pole,road,pavement,tree,sign,fence,car,pedestrian,bicyclist]' \
      'data.palette=[[128,128,128],[128,0,0],[192,192,128],[128,64,128],[60,40,222],[128,128,0],[192,128,128],[64,64,128],[64,0,128],[64,64,0],[0,128,192]]' \
      'data.ignore_values=[[0,0,0]]'

It writes ``images/<name>.png`` and ``labels/<name>.png``. Scores are those of every class
but the first (Sky), as test/dice counts the first class as background.
"""

import numpy as np
from camvid_frames import frames_to_write
from PIL import Image

# CamVid's colour code, by label value 0..10; 11 (unlabelled) is black
COLOURS = [(128, 128, 128), (128, 0, 0), (192, 192, 128), (128, 64, 128), (60, 40, 222),
           (128, 128, 0), (192, 128, 128), (64, 64, 128), (64, 0, 128), (64, 64, 0),
           (0, 128, 192), (0, 0, 0)]  # fmt: skip


def main():
    out, frames = frames_to_write(__doc__.split("\n\n")[0], "images", "labels")
    table = np.array(COLOURS, np.uint8)
    count = 0
    for i, (frame, label) in enumerate(frames):
        Image.open(frame).convert("RGB").save(out / "images" / frame.name)
        if i % 2:  # a palette PNG: the label values as indices into the colour table
            mask = Image.fromarray(label.astype(np.uint8), mode="P")
            mask.putpalette(table.ravel().tolist())
        else:
            mask = Image.fromarray(table[label.astype(np.int64)])
        mask.save(out / "labels" / frame.name)
        count += 1
    print(f"{count} frames and colour masks in {out}")


if __name__ == "__main__":
    main()
