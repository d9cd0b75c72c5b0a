"""Volume file formats besides NIfTI, one module each; ``segnet.data.volume_files``
imports every module here, and each registers its suffixes with it."""
