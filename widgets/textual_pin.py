"""Which Textual is installed, and whether gpuscope's patches to it apply (widgets/textual_private.py).

Pure: reads the installed Textual's metadata and the environment; imports none of Textual's private modules."""

from __future__ import annotations

import os
from collections.abc import Mapping

WRITTEN_FOR = "8.2.8"  # the Textual the patches were written against and checked on: pyproject.toml's pin
SWITCH = "GPUSCOPE_TEXTUAL_PATCHES"  # "0" (or off/false/no): Textual's public paths only


def textual_version() -> str:
    """The installed Textual's version, from the ``Version:`` line of its ``dist-info/METADATA`` beside the package:
    what ``importlib.metadata`` answers, without loading it (1.4 MB of the live screen's RSS), which is asked only
    where there is no such file (another kind of install)."""
    import textual

    site = os.path.dirname(os.path.dirname(os.path.abspath(textual.__file__)))
    names = [n for n in os.listdir(site) if n.startswith("textual-") and n.endswith(".dist-info")]
    if len(names) == 1:
        with open(os.path.join(site, names[0], "METADATA"), encoding="utf-8") as f:
            for line in f:
                if line.startswith("Version:"):
                    return line.split(":", 1)[1].strip()
                if not line.strip():  # the end of the headers
                    break
    from importlib.metadata import version

    return version("textual")


def applies(textual: str, environ: Mapping[str, str]) -> bool:
    """Whether the patches apply: on exactly :data:`WRITTEN_FOR`, and not switched off in ``environ``."""
    return textual == WRITTEN_FOR and environ.get(SWITCH, "1").strip().lower() not in ("0", "off", "false", "no")
