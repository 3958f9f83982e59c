"""pnp_recon's SSIM and PSNR against scikit-image, the independent reference: for each output
file, /metrics/ssim and /metrics/psnr at the last iteration must equal
skimage.metrics.structural_similarity(gaussian_weights=True, sigma=1.5, use_sample_covariance=False,
data_range = the truth's range) and peak_signal_noise_ratio of /reconstruction against
/ground_truth. The image must have content (not flattened by the clamp).
usage: check_ssim.py OUT.h5 ..."""
import sys

import h5py
import numpy as np
from skimage.metrics import peak_signal_noise_ratio, structural_similarity

for path in sys.argv[1:]:
    with h5py.File(path, "r") as f:
        x = f["/reconstruction"][()].astype(np.float64)
        gt = f["/ground_truth"][()].astype(np.float64)
        ssim = f["/metrics/ssim"][()]
        psnr = f["/metrics/psnr"][()]
        final_ssim = f["/metrics"].attrs["final_ssim"]
    rng = gt.max() - gt.min()
    assert np.std(x) > 0.1 * np.std(gt), f"{path}: the reconstruction has no content"
    ref = structural_similarity(x, gt, gaussian_weights=True, sigma=1.5, use_sample_covariance=False, data_range=rng)
    ref_psnr = peak_signal_noise_ratio(gt, x, data_range=rng)
    print(f"{path}: SSIM {ssim[-1]:.10f} (skimage {ref:.10f}), PSNR {psnr[-1]:.8f} dB (skimage {ref_psnr:.8f})")
    assert 0.05 < ref < 0.999, f"{path}: SSIM {ref} says the images are unrelated or identical"
    assert abs(ssim[-1] - ref) < 1e-6, f"{path}: SSIM {ssim[-1]} differs from skimage's {ref}"
    assert final_ssim == ssim[-1]
    assert abs(psnr[-1] - ref_psnr) < 1e-4, f"{path}: PSNR {psnr[-1]} differs from skimage's {ref_psnr}"
    assert np.isfinite(ssim).sum() == np.isfinite(psnr).sum(), "SSIM and PSNR are computed in the same iterations"
print("SSIM and PSNR match scikit-image")
