"""Writes a DXchange sinogram file with h5py, as another program would (test fixture)."""
import sys

import h5py
import numpy as np

path = sys.argv[1]
rng = np.random.default_rng(7)
with h5py.File(path, "w") as f:
    f["/exchange/data"] = rng.random((12, 17), dtype=np.float32) + 0.5
    f["/exchange/theta"] = np.linspace(0.0, 180.0, 12, endpoint=False)  # float64 degrees
    f["/exchange/ground_truth"] = np.arange(144, dtype=np.float64).reshape(12, 12)  # stored as float64
    f["/custom/sino"] = np.full((3, 5), 2.5, dtype=np.float64)
    f.attrs["creator"] = "h5py"
