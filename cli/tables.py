"""How ``export`` writes its tables so that other tools read them together and safely.

* **Parquet: one fixed schema.** A column's type comes from the reading's declared type (``GpuReading``,
  ``EndpointReading``), never from the values in one file: an unknown reading is a null of its own type
  (nullable ``int64``, ``float64``, ``bool`` or ``string``), never Arrow's ``null`` type, which a file whose
  column happened to be all unknown used to get. ``t`` is a UTC timestamp (microseconds). So the files of
  two recordings, of any machines, share one schema: ``duckdb``'s ``read_parquet([a, b])`` and
  ``pyarrow.dataset`` read them together without ``union_by_name``. The file's key-value metadata holds
  ``gpuscope.host``, ``gpuscope.version``, ``gpuscope.recording``, ``gpuscope.simulated`` and
  ``gpuscope.units`` (JSON: column → unit, the unit being what the name's suffix says).
* **CSV: text cells escaped against formula injection.** A text cell (a URL, a server kind, a model name:
  text that came from outside) beginning with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return gets a
  leading ``'`` so that a spreadsheet shows it instead of evaluating it (OWASP's advice). Numbers are
  never escaped: ``-3.5`` in a numeric column stays a number. ``t`` stays unix seconds in CSV.
"""

from __future__ import annotations

import csv
import json
import sys
import typing
from collections.abc import Iterable, Sequence
from typing import Any

from gpuscope import __version__
from gpuscope.core import catalogue
from gpuscope.core.errors import GpuscopeError
from gpuscope.core.model import EndpointReading, GpuReading

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
LEAD_TYPES = {"t": "timestamp", "gpu": "int64", "lost": "bool", "url": "string", "kind": "string", "model": "string"}
UNIT_SUFFIXES = (("_bytes_per_s", "bytes/s"), ("tokens_per_s", "tokens/s"), ("_per_min", "1/min"), ("_pct", "%"),
                 ("_mhz", "MHz"), ("_bytes", "bytes"), ("_w", "W"), ("_c", "°C"), ("_j", "J"), ("_s", "s"))


def csv_cell(v: Any) -> Any:
    """A value as a CSV cell: None empty, a text beginning like a formula escaped with ``'``, anything
    else (numbers, booleans) as it is."""
    if v is None:
        return ""
    if isinstance(v, str) and v.startswith(FORMULA_START):
        return "'" + v
    return v


def _kind(tp: Any) -> str | None:
    args = set(typing.get_args(tp)) or {tp}
    args.discard(type(None))
    for py, arrow in ((bool, "bool"), (int, "int64"), (float, "float64"), (str, "string")):
        if args == {py}:
            return arrow
    return "float64" if args == {int, float} else None


_HINTS = {**typing.get_type_hints(EndpointReading), **typing.get_type_hints(GpuReading)}


def column_types(columns: Sequence[str]) -> dict[str, str]:
    """Each column's fixed type (``timestamp``, ``int64``, ``float64``, ``bool``, ``string``), from the
    reading's declared type; a column the catalogue derives (a yes/no flag as 1.0/0.0) or sums is ``float64``."""
    derived = {m.name for scope in ("gpu", "endpoint") for m in catalogue.metrics(scope) if m.read is not None}
    return {c: LEAD_TYPES.get(c) or ("float64" if c in derived else _kind(_HINTS.get(c))) or "float64"
            for c in columns}


def column_unit(name: str) -> str:
    """A column's unit as its name says it (``pcie_rx_bytes_per_s`` → ``bytes/s``); "" for a count."""
    if name == "t":
        return "UTC timestamp"
    return next((unit for suffix, unit in UNIT_SUFFIXES if name.endswith(suffix)), "")


def write_table(out: str, columns: list[str], rows: Iterable[Sequence[Any]], parquet: bool, force: bool = True,
                meta: dict[str, Any] | None = None) -> int:
    """Write rows as CSV (``-`` for stdout) or Parquet; returns the row count. Raises OSError
    (FileExistsError when ``out`` exists and not ``force``). ``meta``: the Parquet file's metadata
    (``gpuscope.`` is put before each key; ``version`` and ``units`` are added)."""
    if not parquet:
        n = 0
        f = sys.stdout if out == "-" else open(out, "w" if force else "x", newline="")  # noqa: SIM115
        try:
            w = csv.writer(f)
            w.writerow(columns)
            for row in rows:
                w.writerow([csv_cell(v) for v in row])
                n += 1
        finally:
            if f is not sys.stdout:
                f.close()
        return n
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise GpuscopeError("--parquet needs pyarrow: pip install 'gpuscope-inference[parquet]'") from None
    data = list(rows)
    types = {"timestamp": pa.timestamp("us", tz="UTC"), "int64": pa.int64(), "float64": pa.float64(),
             "bool": pa.bool_(), "string": pa.string()}
    kinds = column_types(columns)
    arrays = []
    for k, c in enumerate(columns):
        vals = [r[k] for r in data]
        if kinds[c] == "timestamp":
            vals = [None if v is None else round(v * 1e6) for v in vals]
        elif kinds[c] == "int64":
            vals = [None if v is None else int(v) for v in vals]
        elif kinds[c] == "float64":
            vals = [None if v is None else float(v) for v in vals]
        arrays.append(pa.array(vals, type=types[kinds[c]]))
    schema = pa.schema([pa.field(c, types[kinds[c]]) for c in columns])
    info = {"version": __version__, **(meta or {}), "units": json.dumps({c: column_unit(c) for c in columns})}
    schema = schema.with_metadata({f"gpuscope.{k}": v if isinstance(v, str) else json.dumps(v) for k, v in info.items()})
    pq.write_table(pa.Table.from_arrays(arrays, schema=schema), out)
    return len(data)
