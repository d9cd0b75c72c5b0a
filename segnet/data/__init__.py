"""Datasets and their LightningDataModules.

``camvid`` and ``nifti`` read files; ``camvid_datamodule`` and ``nifti_datamodule`` turn
them into loaders for training. Importing this package imports none of them (serving
code reads ``nifti`` and ``camvid`` without Lightning).
"""
