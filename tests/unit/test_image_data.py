"""Image datasets: synthetic_images, digits' image_shape and the user's arrays (dpaudit.data.arrays)."""

import numpy as np
import pytest

from dpaudit.data.arrays import inspect_arrays, prepare_arrays
from dpaudit.data.datasets import members_before_download, prepare_dataset
from dpaudit.data.examples import features


def _columns(table):
    return (table.column("example_id").to_numpy(), np.asarray(table.column("split").to_pylist()),
            table.column("label").to_numpy(), features(table))


def test_synthetic_images_are_class_dependent_blobs_with_their_shape():
    table, info = prepare_dataset("synthetic_images", {}, {"n": 400, "image_size": 12, "classes": 4, "seed": 1})
    _, split, y, x = _columns(table)
    assert info["image_shape"] == [12, 12, 1] and info["d"] == 144 and x.shape == (400, 144)
    assert np.bincount(y).tolist() == [100] * 4
    assert members_before_download("synthetic_images", {"n": 400, "classes": 4}) == info["n_members"]
    # Class-dependent: nearest class mean of the members labels the test images far above chance (1/4).
    train, test = split == "train", split == "test"
    means = np.stack([x[train & (y == c)].mean(axis=0) for c in range(4)])
    guess = np.argmin(((x[test][:, None, :] - means[None]) ** 2).sum(-1), axis=1)
    assert np.mean(guess == y[test]) > 0.8
    # and a different seed gives other images
    other, _ = prepare_dataset("synthetic_images", {}, {"n": 400, "image_size": 12, "classes": 4, "seed": 2})
    assert not np.array_equal(features(other), x)


def test_digits_records_its_8x8_image_shape():
    _, info = prepare_dataset("digits", {}, {})
    assert info["image_shape"] == [8, 8, 1] and info["d"] == 64


def _npz(tmp_path, **arrays):
    path = tmp_path / "images.npz"
    np.savez(path, **arrays)
    return path


def _images(n=24, h=3, w=4, c=2, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, h, w, c)), np.array(["cat", "dog", "emu"] * (n // 3))


def test_arrays_become_standardized_row_major_rows_with_ids_and_label_names(tmp_path):
    x, y = _images()
    ids = np.arange(24) * 7 + 100
    path = _npz(tmp_path, x=x, y=y, ids=ids)
    assert inspect_arrays("mine", {"path": str(path)}).image_shape == (3, 4, 2)
    table, info = prepare_arrays("mine", path, {})
    example_id, split, label, rows = _columns(table)
    assert info["image_shape"] == [3, 4, 2] and info["label_names"] == ["cat", "dog", "emu"]
    assert example_id.tolist() == ids.tolist()
    np.testing.assert_array_equal(label, np.array([0, 1, 2] * 8))
    # Feature h·W·C + w·C + c holds pixel (h, w, c), standardized on the members (ddof 0).
    flat = x.reshape(24, -1)
    members = split == "train"
    expected = (flat - flat[members].mean(0)) / flat[members].std(0)
    np.testing.assert_allclose(rows, expected, rtol=1e-5, atol=1e-5)
    assert rows[5, 1 * 8 + 2 * 2 + 1] == pytest.approx(expected[5, 13], abs=1e-5)


def test_grey_images_of_rank_3_get_one_channel(tmp_path):
    x, y = _images()
    table, info = prepare_arrays("grey", _npz(tmp_path, x=x[..., 0], y=y), {})
    assert info["image_shape"] == [3, 4, 1] and features(table).shape == (24, 12)
    assert table.column("example_id").to_numpy().tolist() == list(range(24))


def _refusal(tmp_path, words, **arrays):
    path = _npz(tmp_path, **arrays)
    with pytest.raises(ValueError) as err:
        inspect_arrays("mine", {"path": str(path)})
    for word in words:
        assert word in str(err.value)


def test_arrays_refusals_name_the_array_the_index_and_the_fix(tmp_path):
    x, y = _images()
    _refusal(tmp_path, ["array x", "rank 2", "[N, H, W]"], x=x.reshape(24, -1), y=y)
    bad = x.copy()
    bad[3, 1, 2, 0], bad[9, 0, 0, 1] = np.nan, np.inf
    _refusal(tmp_path, ["array x", "2 non-finite", "index [3, 1, 2, 0]", "replace those pixels"], x=bad, y=y)
    _refusal(tmp_path, ["array y", "one class", "at least 2"], x=x, y=np.zeros(24))
    _refusal(tmp_path, ["array y", "[23]", "24 images", "one label per image"], x=x, y=y[:23])
    _refusal(tmp_path, ["no array 'y'", "found ['x']"], x=x)
    _refusal(tmp_path, ["array ids", "repeats id 5", "indices 2 and 7"], x=x, y=y, ids=np.where(
        np.isin(np.arange(24), [2, 7]), 5, np.arange(24) + 10))
    labels = np.array([0.0] * 12 + [1.0] * 12)
    labels[4] = np.nan
    _refusal(tmp_path, ["array y", "missing label", "index 4"], x=x, y=labels)
    _refusal(tmp_path, ["class 'b'", "2 image(s)", "at least 4"], x=x, y=np.array(["a"] * 22 + ["b"] * 2))
    _refusal(tmp_path, ["array x", "bool"], x=x > 0, y=y)
    with pytest.raises(ValueError, match="no such file"):
        inspect_arrays("mine", {"path": str(tmp_path / "absent.npz")})
    np.save(tmp_path / "one.npy", x)
    with pytest.raises(ValueError, match="not a .npz archive|single .npy"):
        inspect_arrays("mine", {"path": str(tmp_path / "one.npy")})


def test_prepare_dataset_reads_source_arrays_from_its_raw_file(tmp_path):
    x, y = _images()
    path = _npz(tmp_path, x=x, y=y)
    table, info = prepare_dataset("mine", {"arrays": path}, {"source": "arrays", "path": str(path)})
    assert info["source"]["kind"] == "arrays" and info["raw_files"]["arrays"]["bytes"] == path.stat().st_size
    assert table.num_rows == 24
