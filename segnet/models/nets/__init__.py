from segnet.models.nets.base import SegmentationNet
from segnet.models.nets.segnet import SegNet, SegNetBasic
from segnet.models.nets.unet import UNet

__all__ = ["SegmentationNet", "SegNet", "SegNetBasic", "UNet"]
