"""MNIST (LeCun et al.): the four IDX ``.gz`` files, their reader and preparation.

IDX format: a big-endian header ``0x00 0x00 <type> <ndim>``, then ``ndim`` uint32
dimensions, then the values (type 0x08 = uint8 for both images and labels). The
reader checks the magic, the dimensions against the payload length and the
gzip stream's integrity, and refuses a truncated or padded file with its name.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

MNIST_FILES = {
    "train_images": "train-images-idx3-ubyte.gz",
    "train_labels": "train-labels-idx1-ubyte.gz",
    "test_images": "t10k-images-idx3-ubyte.gz",
    "test_labels": "t10k-labels-idx1-ubyte.gz",
}
# Mirrors and published md5 live in the download registry (dpaudit.data.download).
_UINT8 = 0x08


def read_idx(path: str | Path) -> np.ndarray:
    """The array stored in a gzip-compressed IDX file (uint8 payloads only)."""
    path = Path(path)
    try:
        with gzip.open(path, "rb") as handle:
            data = handle.read()
    except (OSError, EOFError, zlib.error) as exc:
        raise ValueError(f"{path}: not a complete gzip stream ({type(exc).__name__}: {exc}); "
                         "the download is truncated or damaged, delete it to fetch it again") from exc
    if len(data) < 4:
        raise ValueError(f"{path}: {len(data)} bytes, too short for an IDX header")
    zero, dtype, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype != _UINT8 or ndim not in (1, 3):
        raise ValueError(f"{path}: bad IDX magic {data[:4].hex()} (expected 0000 08 01 or 0000 08 03)")
    header = 4 + 4 * ndim
    if len(data) < header:
        raise ValueError(f"{path}: truncated IDX header")
    shape = struct.unpack(f">{ndim}I", data[4:header])
    expected = int(np.prod(shape, dtype=np.int64))
    payload = len(data) - header
    if payload != expected:
        raise ValueError(f"{path}: IDX header declares shape {shape} ({expected} values) but the file "
                         f"holds {payload}; the file is truncated or padded")
    return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(shape)


def load_mnist(raw_files: Mapping[str, Path]) -> dict[str, np.ndarray]:
    missing = sorted(set(MNIST_FILES.values()) - set(raw_files))
    if missing:
        raise ValueError(f"mnist needs raw files {missing}")
    out = {key: read_idx(raw_files[name]) for key, name in MNIST_FILES.items()}
    for part in ("train", "test"):
        images, labels = out[f"{part}_images"], out[f"{part}_labels"]
        if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
            raise ValueError(f"mnist {part}: {images.shape} images do not match {labels.shape} labels")
        if labels.max(initial=0) > 9:
            raise ValueError(f"mnist {part}: labels outside 0..9")
    return out


def mnist_arrays(raw_files: Mapping[str, Path]) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
    """(x in [0, 1] as pixels/255, labels, split, preprocessing): the 60,000 training
    images are members (``train``), the 10,000 test images are non-members and the
    utility set (``holdout``), as for Adult."""
    arrays = load_mnist(raw_files)
    images = np.concatenate([arrays["train_images"], arrays["test_images"]])
    labels = np.concatenate([arrays["train_labels"], arrays["test_labels"]]).astype(np.int64)
    n_train = len(arrays["train_images"])
    split = np.where(np.arange(len(labels)) < n_train, "train", "holdout")
    x = images.reshape(len(images), -1).astype(np.float64) / 255.0
    preprocessing = {
        "pixels": "uint8 / 255 (the authors' scaling), flattened row-major",
        "pixel_scale": 255.0,
        "image_shape": list(images.shape[1:]),
        "standardize": None,
        "split": {"train": "train-images (members)", "holdout": "t10k (non-members, also the utility set)"},
        "example_id": "train images 0..59,999 then test images",
    }
    return x, labels, split, preprocessing
