# importing the nets registers them (segnet.models.nets.base.register)
from segnet.models.nets.base import MODELS, SegmentationNet
from segnet.models.nets.segnet import SegNet, SegNetBasic
from segnet.models.nets.unet import UNet

__all__ = ["MODELS", "SegmentationNet", "SegNet", "SegNetBasic", "UNet"]
