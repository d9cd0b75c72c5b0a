from segnet.callbacks.tensorboard import ConfusionMatrixFigure, PredictionImages

__all__ = ["ConfusionMatrixFigure", "PredictionImages"]
