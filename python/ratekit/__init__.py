"""ratekit from Python: enforcers over numpy arrays, trace replay, simulation, policing detection,
and sweeps and trace batches on Dask.

The heavy lifting is the same Rust code as the ``ratekit`` command line; every call here works on
whole arrays or files, so no Python code runs per packet.
"""

from ratekit.enforce import Enforcer, replay
from ratekit.sim import SimResult, simulate
from ratekit.detect import detect, rate_clusters
from ratekit.scale import detect_many, sweep

__all__ = [
    "Enforcer",
    "replay",
    "SimResult",
    "simulate",
    "detect",
    "rate_clusters",
    "sweep",
    "detect_many",
]
