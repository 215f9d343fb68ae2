"""bench.cp_count_drift's moves: which training entries carry a count fit's stopping measure."""

import types

import numpy as np

from bench.cp_count_drift import moved, moving_classes


def test_the_classes_partition_the_entries_and_their_shares_add_up_to_the_change():
    # object 2 of mode 0 has zero counts only: its entries are the zero slices'
    coords = np.array([[0, 0], [0, 1], [1, 0], [1, 1], [2, 0], [2, 1]])
    values = np.array([3.0, 0.0, 0.0, 1.0, 0.0, 0.0])
    train = types.SimpleNamespace(coords=coords, values=values, shape=(3, 2))
    classes = moving_classes(train)
    assert classes["zero_slices"].tolist() == [False, False, False, False, True, True]
    assert classes["other_zeros"].tolist() == [False, True, True, False, False, False]
    assert classes["nonzero"].tolist() == [True, False, False, True, False, False]
    f_old = np.array([1.0, -0.5, -0.2, 0.3, -4.0, -6.0])
    f = f_old + np.array([0.01, -0.02, 0.03, 0.0, -0.5, -0.4])
    out = moved(f, f_old, classes)
    change = np.sqrt(np.mean((f - f_old) ** 2) / np.mean(f**2))  # (the engine's prediction_change)
    np.testing.assert_allclose(np.sqrt(sum(c["rms"] ** 2 for c in out.values())), change, rtol=1e-14)
    assert out["zero_slices"]["net"] == -1.0 and out["other_zeros"]["net"] == 0.0
    assert out["nonzero"]["net"] == 0.5
