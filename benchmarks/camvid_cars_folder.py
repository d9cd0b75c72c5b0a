"""A second 'your own images' dataset for checking experiment=images_quick away from membrane:
CamVid's frames as a user with a car-detection task might bring them. Unlike membrane it
is RGB, JPEG-compressed, 480x360 (not square), its masks are named differently from the
images, the class of interest is small (about 4% of the pixels), and unlabelled pixels
carry a third mask value meant to be scored as void:

    python benchmarks/camvid_cars_folder.py ../shared/data/CamVid/val /tmp/cars
    python train.py experiment=images_quick data.root=/tmp/cars \
      data.image_dir=photos data.label_dir=masks data.label_name='{id}_car' \
      'data.class_names=[background,car]' 'data.label_values=[0,255]' 'data.ignore_values=[128]'

It writes ``photos/<name>.jpg`` (quality 90) and ``masks/<name>_car.png``: 255 car, 0 any
other class, 128 CamVid's unlabelled pixels.
"""

import numpy as np
from camvid_frames import frames_to_write
from PIL import Image

CAR, VOID = 8, 11  # CamVid's label values


def main():
    out, frames = frames_to_write(__doc__.split("\n\n")[0], "photos", "masks")
    count = 0
    for frame, label in frames:
        mask = np.where(label == CAR, 255, np.where(label == VOID, 128, 0)).astype(np.uint8)
        Image.open(frame).convert("RGB").save(out / "photos" / f"{frame.stem}.jpg", quality=90)
        Image.fromarray(mask).save(out / "masks" / f"{frame.stem}_car.png")
        count += 1
    print(f"{count} photos and masks in {out}")


if __name__ == "__main__":
    main()
