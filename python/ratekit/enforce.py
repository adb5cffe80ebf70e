"""Enforcers over numpy arrays, and ``replay`` of a DataFrame or arrivals CSV."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional, Union

import numpy as np
import pandas as pd

from ratekit import _native
from ratekit._text import PathOrText, read_text

#: Verdict codes in the arrays ``Enforcer.run`` returns, and their names in replay's output.
VERDICTS = np.array(["pass", "drop", "held"], dtype=object)


@dataclass(frozen=True)
class Verdicts:
    """What an enforcer did to each packet, in input order.

    ``verdict``: 0 pass, 1 drop, 2 held (still inside a queueing enforcer when the trace ended).
    ``departure_ns``: when the packet's last bit left a queueing enforcer's link, -1 for none
    (dropped, held, or a policer).
    """

    verdict: np.ndarray
    departure_ns: np.ndarray
    queueing: bool

    def names(self) -> np.ndarray:
        """The verdicts as "pass" / "drop" / "held" strings."""
        return VERDICTS[self.verdict]


class Enforcer:
    """One enforcer config (the TOML of ``ratekit replay --config``), run over arrays.

    Each aggregate gets its own enforcer instance, as in ``ratekit replay``; a queueing enforcer
    (shaper, fifo, red, cpq, dscd) feeds a link of ``link_rate`` (tc units, e.g. "10mbit").
    """

    def __init__(self, config: PathOrText, link_rate: Optional[str] = None) -> None:
        self.config_text, self.config_name = read_text(config, "config")
        try:
            self.kind, self.queueing = _native.check_config(self.config_text)
        except ValueError as e:
            raise ValueError(f"config {self.config_name}: {e}") from None
        self.link_rate = link_rate

    def run(
        self,
        time_ns: np.ndarray,
        aggregate: np.ndarray,
        flow: np.ndarray,
        bytes: np.ndarray,
        class_: Optional[np.ndarray] = None,
    ) -> Verdicts:
        """Replays one whole trace from a fresh state (rows sorted by ``time_ns``).

        ``aggregate`` and ``flow`` are integer ids (the flow id is the key the enforcer hashes, as
        the CLI uses an integer flow column); ``bytes`` are packet lengths in 1..=65535;
        ``class_`` the packet classes (default 0). Raises ValueError on bad input.
        """
        as_u64 = lambda a, name: _unsigned(a, np.uint64, name)  # noqa: E731
        verdict, departure, queueing = _native.enforce(
            self.config_text,
            as_u64(time_ns, "time_ns"),
            as_u64(aggregate, "aggregate"),
            as_u64(flow, "flow"),
            _unsigned(bytes, np.uint32, "bytes"),
            None if class_ is None else _unsigned(class_, np.uint16, "class"),
            self.link_rate,
        )
        return Verdicts(verdict, departure, queueing)


def _unsigned(a: np.ndarray, dtype: type, name: str) -> np.ndarray:
    a = np.asarray(a)
    if a.dtype.kind == "i" and a.size and a.min() < 0:
        raise ValueError(f"field '{name}': negative values")
    if a.dtype.kind not in "iu":
        raise ValueError(f"field '{name}': must be integers, got {a.dtype}")
    if a.size and a.max() > np.iinfo(dtype).max:
        raise ValueError(f"field '{name}': {a.max()} does not fit in {np.dtype(dtype).name}")
    return np.ascontiguousarray(a, dtype=dtype)


def _flow_keys(col: pd.Series) -> np.ndarray:
    if col.dtype.kind in "iu" and (col.size == 0 or col.min() >= 0):
        return col.to_numpy(dtype=np.uint64)
    return _native.flow_keys(col.astype(str).tolist())


def replay(
    config: PathOrText,
    arrivals: Union[pd.DataFrame, str, "os.PathLike[str]"],
    link_rate: Optional[str] = None,
) -> pd.DataFrame:
    """``ratekit replay`` as a function: the arrivals (a DataFrame, or an arrivals CSV path) with
    ``verdict`` ("pass"/"drop"/"held") appended, and ``departure_ns`` (nullable Int64) for
    queueing enforcers: the same rows and values as the CLI's verdicts CSV read by pandas.

    Columns: ``time_ns``, ``aggregate``, ``flow``, ``bytes`` and optionally ``class``; others are
    carried through. Aggregates and flows may be numbers or text.
    """
    enforcer = Enforcer(config, link_rate)
    df = arrivals if isinstance(arrivals, pd.DataFrame) else pd.read_csv(arrivals)
    missing = [c for c in ("time_ns", "aggregate", "flow", "bytes") if c not in df.columns]
    if missing:
        raise ValueError(f"arrivals: missing column(s) {', '.join(missing)}")
    for c in ("verdict", "departure_ns"):
        if c in df.columns:
            raise ValueError(f"arrivals: already has an output column '{c}'")
    aggregate, _ = pd.factorize(df["aggregate"])  # dense ids in order of first appearance, as the CLI
    classes = None
    if "class" in df.columns:  # an empty class is class 0, as in the CLI
        classes = df["class"].fillna(0)
        if classes.dtype.kind == "f":
            if not (classes == classes.round()).all():
                raise ValueError("arrivals: field 'class' must hold integers")
            classes = classes.astype(np.int64)
    v = enforcer.run(
        df["time_ns"].to_numpy(),
        aggregate,
        _flow_keys(df["flow"]),
        df["bytes"].to_numpy(),
        None if classes is None else classes.to_numpy(),
    )
    out = df.copy()
    out["verdict"] = v.names()
    if v.queueing:
        out["departure_ns"] = pd.array(np.where(v.departure_ns >= 0, v.departure_ns, 0), dtype="Int64")
        out.loc[v.departure_ns < 0, "departure_ns"] = pd.NA
    return out
