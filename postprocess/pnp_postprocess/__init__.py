"""pnp_postprocess: figures and CSV tables from pnp_recon and pnp_bench HDF5 outputs.

    from pnp_postprocess import make_figure, plot_reconstruction, table, read_recon
    make_figure("compile-speedup", files, "figures")   # figures/compile-speedup.{png,pdf,csv}
    plot_reconstruction(files)                          # images, truth, error: a Figure

Command line: ``python3 -m pnp_postprocess FIGURE FILES... --out DIR``.
"""
from .api import FIGURES, Outputs, make_figure, plot, read_csv, table, write_csv
from .images import ReconImage, plot_reconstruction, read_image
from .io import (BenchFile, ReconRun, RunKey, SchemaError, gpu_label, gpu_type, is_ceilings,
                 is_scaling, read_bench, read_ceilings, read_recon, read_scaling, ridge_point)
from .schema import COMPILE_MODES, PHASES, RIDGE_FLOP_PER_BYTE

__all__ = ["FIGURES", "Outputs", "make_figure", "plot", "read_csv", "table", "write_csv",
           "ReconImage", "plot_reconstruction", "read_image", "BenchFile",
           "ReconRun", "RunKey", "SchemaError", "gpu_label", "gpu_type", "is_ceilings", "read_bench",
           "read_ceilings", "read_recon", "ridge_point", "is_scaling", "read_scaling", "COMPILE_MODES", "PHASES", "RIDGE_FLOP_PER_BYTE"]
__version__ = "0.1.0"
