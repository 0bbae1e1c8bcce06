"""The Prometheus text format's escaping, shared by the exporter (``outputs/prometheus.py``) and the
kubelet's pod labels (``sources/kubelet.py``), which the exporter writes: its own module so that neither
imports the other for it."""

from __future__ import annotations

from collections.abc import Iterable

from gpuscope.core.text import clean


def escape_label(value: str) -> str:
    """A label value as the text format wants it, made safe for whoever reads it in a terminal (``curl``):
    escape sequences and control characters removed (:func:`clean`, 256 characters at most: a model name
    from an endpoint or a host name from a broker is outside text), then backslash and double quote escaped.
    """
    return clean(value, 256).replace("\\", "\\\\").replace('"', '\\"')


def escape_help(text: str) -> str:
    """HELP text: backslash and newline escaped (quotes stay)."""
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def labels(pairs: Iterable[tuple[str, object]]) -> str:
    """``{a="x",b="y"}`` (empty string for no labels); values are escaped."""
    body = ",".join(f'{k}="{escape_label(str(v))}"' for k, v in pairs)
    return "{" + body + "}" if body else ""
