"""Datasets and their LightningDataModules.

``camvid``, ``nifti`` and ``images`` read files; ``camvid_datamodule``,
``nifti_datamodule`` and ``images_datamodule`` turn them into loaders for training.
Importing this package imports none of them (serving code reads ``nifti``, ``camvid``
and ``images`` without Lightning). May import the loose modules alone; anything may
import it.
"""
