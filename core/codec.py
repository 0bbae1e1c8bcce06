"""The one JSON codec: records ⇄ plain dicts, shared by recordings and MQTT payloads.

Encoding omits fields that hold ``None`` (not supported) or their default, so payloads stay small;
decoding restores them. Decoding validates every field's type and raises :class:`CodecError`
with the path of the offending field; it never trusts its input (MQTT payloads can be hostile).
"""

from __future__ import annotations

import dataclasses
import enum
import math
import types
import typing
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, Union, cast

from gpuscope.core.errors import GpuscopeError
from gpuscope.core.model import (
    DeviceInfo,
    EndpointReading,
    Event,
    Frame,
    GpuReading,
    Inventory,
    PairLink,
    ProcessInfo,
    ServingGroup,
    XidCount,
)
from gpuscope.core.validate import Tally, ValidationError, check_frame, check_inventory

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T", bound="DataclassInstance")  # the codec decodes dataclasses only


class CodecError(GpuscopeError, ValueError):
    """A dict that does not decode to the record asked for (the message names the field)."""


_RECORDS = (DeviceInfo, PairLink, Inventory, ProcessInfo, XidCount, GpuReading, EndpointReading, ServingGroup, Event,
            Frame)
_HINTS: dict[type, dict[str, Any]] = {cls: typing.get_type_hints(cls) for cls in _RECORDS}
_DEFAULTS: dict[type, dict[str, Any]] = {}
for _cls in _RECORDS:
    d: dict[str, Any] = {}
    for f in dataclasses.fields(_cls):
        if f.default is not dataclasses.MISSING:
            d[f.name] = f.default
    _DEFAULTS[_cls] = d


def _is_enum(tp: Any) -> bool:
    """An Enum type, or an optional one."""
    args = typing.get_args(tp) if typing.get_origin(tp) in (Union, types.UnionType) else (tp,)
    return any(isinstance(a, type) and issubclass(a, enum.Enum) for a in args)


_ENUM_FIELDS: dict[type, tuple[str, ...]] = {
    cls: tuple(name for name, tp in _HINTS[cls].items() if _is_enum(tp)) for cls in _RECORDS}


def _round(x: float) -> float | int:
    """Keep 4 significant digits for small values (0.003712 → 0.003712, 45.678 → 45.68), whole
    numbers from 1000 up (counters such as energy keep every joule)."""
    if not math.isfinite(x):
        return x
    if x == int(x) and abs(x) < 2**53:
        return int(x)
    if abs(x) >= 1000:
        return round(x)
    return float(f"{x:.4g}")


def to_dict(rec: Any) -> Any:
    """Encode a record (or a tuple/list/dict of them) into JSON-ready Python values."""
    if dataclasses.is_dataclass(rec) and not isinstance(rec, type):
        out: dict[str, Any] = {}
        defaults = _DEFAULTS[type(rec)]
        for f in dataclasses.fields(rec):
            v = getattr(rec, f.name)
            if v is None:
                if defaults.get(f.name) is not None:  # unknown where the default is not (``up``): say null
                    out[f.name] = None
                continue
            if f.name in defaults and v == defaults[f.name] and f.name not in _ALWAYS:
                continue
            if f.name == "t" and isinstance(v, float):
                out[f.name] = round(v, 3)  # timestamps keep milliseconds
            else:
                out[f.name] = to_dict(v)
        for name in _ENUM_FIELDS[type(rec)]:  # none but EndpointReading.state: no cost to the others
            if name in out:
                out[name] = out[name].value  # EndpointState.UP → "up"
        return out
    if isinstance(rec, (tuple, list)):
        return [to_dict(v) for v in rec]
    if isinstance(rec, dict):
        return {str(k): to_dict(v) for k, v in rec.items()}
    if isinstance(rec, float):
        return _round(rec)
    return rec


_ALWAYS = {"index", "t"}


def _check(tp: Any, v: Any, path: str) -> Any:
    """``v`` read as a value of the type hint ``tp``; a :class:`CodecError` naming ``path`` when it is not one.
    Generic hints (unions, tuples, dicts) by their origin, plain types by a table, then records and enums."""
    generic = _BY_ORIGIN.get(typing.get_origin(tp))
    if generic is not None:
        return generic(tp, v, path)
    if tp is Any:
        return v
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):  # a dataclass type (hints are never instances)
        return _from(tp, v, path)
    scalar = _SCALARS.get(tp)
    if scalar is not None:
        return scalar(v, path)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _check_enum(tp, v, path)
    raise CodecError(f"{path}: unsupported type {tp}")  # pragma: no cover - programming error


def _check_union(tp: Any, v: Any, path: str) -> Any:
    """The first member of the union that reads ``v`` (null only where the union holds None)."""
    args = typing.get_args(tp)
    if v is None:
        if type(None) in args:
            return None
        raise CodecError(f"{path}: must not be null")
    errors = []
    for a in args:
        if a is type(None):
            continue
        try:
            return _check(a, v, path)
        except CodecError as e:
            errors.append(str(e))
    raise CodecError(errors[0] if errors else f"{path}: bad value")


def _check_tuple(tp: Any, v: Any, path: str) -> Any:
    """``tuple[X, ...]`` from a JSON list, each item read as X."""
    if not isinstance(v, list):
        raise CodecError(f"{path}: expected a list")
    (inner, _ell) = typing.get_args(tp)
    return tuple(_check(inner, x, f"{path}[{i}]") for i, x in enumerate(v))


def _check_dict(_tp: Any, v: Any, path: str) -> Any:
    if not isinstance(v, dict):
        raise CodecError(f"{path}: expected an object")
    return dict(v)


def _check_bool(v: Any, path: str) -> Any:
    if not isinstance(v, bool):
        raise CodecError(f"{path}: expected true/false")
    return v


def _check_int(v: Any, path: str) -> Any:
    if isinstance(v, bool) or not isinstance(v, int):
        if isinstance(v, float) and v.is_integer():
            return int(v)
        if isinstance(v, float) and not math.isfinite(v):
            return v  # the validation gate turns it into "unknown" (counted) or rejects the record
        raise CodecError(f"{path}: expected an integer")
    return v


def _check_float(v: Any, path: str) -> Any:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise CodecError(f"{path}: expected a number")
    return float(v)


def _check_str(v: Any, path: str) -> Any:
    if not isinstance(v, str):
        raise CodecError(f"{path}: expected a string")
    return v


def _check_enum(tp: type[enum.Enum], v: Any, path: str) -> Any:
    if not isinstance(v, str):
        raise CodecError(f"{path}: expected a string")
    try:
        return tp(v)
    except ValueError:
        return None  # a value from a newer writer: the record derives it (EndpointReading.state)


# how :func:`_check` reads each kind of hint: generic ones by their origin, plain types by the type
_BY_ORIGIN: dict[Any, Callable[[Any, Any, str], Any]] = {
    Union: _check_union, types.UnionType: _check_union, tuple: _check_tuple, dict: _check_dict}
_SCALARS: dict[Any, Callable[[Any, str], Any]] = {
    bool: _check_bool, int: _check_int, float: _check_float, str: _check_str}


def _from(cls: type[T], d: Any, path: str) -> T:
    if not isinstance(d, dict):
        raise CodecError(f"{path}: expected an object")
    hints = _HINTS[cls]
    kwargs: dict[str, Any] = {}
    for name, v in d.items():
        if name not in hints:
            continue  # fields from a newer minor writer are ignored
        kwargs[name] = _check(hints[name], v, f"{path}.{name}")
    try:
        return cls(**kwargs)
    except TypeError as e:
        missing = [
            f.name
            for f in dataclasses.fields(cls)
            if f.name not in kwargs and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        ]
        raise CodecError(f"{path}: missing field {', '.join(missing) or e}") from None


def from_dict(cls: type[T], d: Any, path: str | None = None) -> T:
    """Decode ``d`` into ``cls``; raises :class:`CodecError` naming the bad field."""
    return _from(cls, d, path or cls.__name__.lower())


def frame_to_dict(frame: Frame) -> dict[str, Any]:
    return cast("dict[str, Any]", to_dict(frame))  # a record (dataclass) encodes to a dict


def frame_from_dict(d: Any, inventory: Inventory | None = None, tally: Tally | None = None) -> Frame:
    """Decode a frame and pass it through the validation gate (:func:`gpuscope.core.validate.check_frame`):
    out-of-range readings become None (counted in ``tally``); a non-finite ``t``, duplicate GPUs or more
    GPUs than ``inventory`` lists raise :class:`CodecError`."""
    f = from_dict(Frame, d, "frame")
    try:
        return check_frame(f, inventory, tally)
    except ValidationError as e:
        raise CodecError(str(e)) from None


def inventory_to_dict(inv: Inventory) -> dict[str, Any]:
    return cast("dict[str, Any]", to_dict(inv))  # a record (dataclass) encodes to a dict


def inventory_from_dict(d: Any, tally: Tally | None = None) -> Inventory:
    """Decode an inventory through the gate (:func:`gpuscope.core.validate.check_inventory`): no GPUs, a GPU
    listed twice or indices other than 0…n−1 raise :class:`CodecError`."""
    inv = from_dict(Inventory, d, "inventory")
    try:
        return check_inventory(inv, tally)
    except ValidationError as e:
        raise CodecError(str(e)) from None
