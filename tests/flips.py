"""Single-byte flips of a file: each loads to the same numbers, or is refused as a FileFormatError."""

import numpy as np

import fastcep


def flip_bytes(path, flipped, n_flips, load, numbers, seed=0):
    """Flip one random bit in each of ``n_flips`` distinct bytes of ``path`` (one flip per copy,
    written to ``flipped``) and ``load`` each copy. A copy that loads must give ``numbers`` of the
    original's result (a list of arrays, dicts and tuples), bit for bit. Returns (loaded,
    refused)."""
    good = path.read_bytes()
    ref = numbers(load(path))
    rng = np.random.default_rng(seed)
    loaded = refused = 0
    for pos in rng.choice(len(good), n_flips, replace=False):
        data = bytearray(good)
        data[pos] ^= 1 << int(rng.integers(8))
        flipped.write_bytes(bytes(data))
        try:
            res = load(flipped)
        except fastcep.FileFormatError:
            refused += 1
            continue
        loaded += 1  # (a flip in unused bytes): the same numbers
        for a, b in zip(numbers(res), ref, strict=True):
            if isinstance(a, (dict, tuple)):
                assert a == b
            else:
                np.testing.assert_array_equal(a, b)
    return loaded, refused
