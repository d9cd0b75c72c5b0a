# GPU training image. Build:  docker build -t segnet .
# Train:  docker run --gpus all --shm-size 8g -v $PWD/data:/app/data -v $PWD/outputs:/app/outputs \
#           segnet experiment=camvid_quick trainer=gpu
# pip keeps the base image's torch: the package takes torch 2.11 and later (pyproject.toml).
ARG BASE_IMAGE=pytorch/pytorch:2.14.1-cuda13.0-cudnn9-runtime
FROM ${BASE_IMAGE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

# Dependencies first, from pyproject.toml alone, so code changes do not rebuild this layer.
# pyproject.toml's dependencies, around the base image's torch.
COPY pyproject.toml README.md ./
# hadolint ignore=DL3013
RUN mkdir segnet && touch segnet/__init__.py \
    && pip install ".[export]" \
    && pip uninstall -y segnet \
    && rm -rf segnet

COPY segnet ./segnet
COPY hydra_plugins ./hydra_plugins
COPY configs ./configs
COPY train.py evaluate.py ./
RUN pip install --no-deps -e . \
    && useradd --create-home --uid 1000 segnet \
    && mkdir -p /app/data /app/outputs \
    && chown -R segnet:segnet /app

USER 1000:1000
ENTRYPOINT ["python", "train.py"]
