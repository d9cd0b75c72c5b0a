from segnet.training.callbacks.tensorboard import ConfusionMatrixFigure, PredictionImages

__all__ = ["ConfusionMatrixFigure", "PredictionImages"]
