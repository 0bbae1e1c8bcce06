"""What a board's name says about its memory: HBM (the data-centre parts) or not (GDDR, LPDDR)."""

from __future__ import annotations

import re

# NVML names of boards with HBM: A100/A800/A30 (HBM2e), H100/H800/H20/H200/GH200 (HBM3/3e), B100/B200/B300 and
# GB200/GB300 (HBM3e), V100/V100S/Quadro GV100 and TITAN V (HBM2), P100/Quadro GP100 (HBM2); any name that says HBM. Not the RTX/L/T parts
# (GDDR): RTX A6000, A10, A40, L40S, RTX PRO 6000 Blackwell; not GB10 (LPDDR5x).
_HBM = re.compile(r"\b(?:G?H(?:100|200|800|20)|A(?:100|800|30)|G?B(?:100|200|300)|G?V100S?|G?P100|TITAN V)\b|HBM",
                  re.IGNORECASE)


def has_hbm(name: str | None) -> bool:
    """True when the board named ``name`` (NVML's ``nvmlDeviceGetName``) has HBM; False when unknown."""
    return bool(name) and _HBM.search(name or "") is not None


def memory_temp_label(name: str | None) -> str:
    """The word for a board's memory temperature on screen: ``HBM`` on an HBM board, else ``VRAM`` (never
    ``mem``: that word is the memory use on the same line)."""
    return "HBM" if has_hbm(name) else "VRAM"
