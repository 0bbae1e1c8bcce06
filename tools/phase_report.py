"""Per-phase means of what gpuscope read during tools/load_phases.py, beside what the load measured.

    python tools/phase_report.py RECORDING [phases.json]
"""

from __future__ import annotations

import json
import sys

import numpy as np

from gpuscope.sources.recording import open_recording

FIELDS = (("util %", "util_gpu_pct", 1), ("SM act %", "sm_active_pct", 1), ("tensor %", "tensor_active_pct", 1),
          ("PCIe TX GB/s", "pcie_tx_bytes_per_s", 1e9), ("PCIe RX GB/s", "pcie_rx_bytes_per_s", 1e9),
          ("NVL TX GB/s", "nvlink_tx_bytes_per_s", 1e9), ("NVL RX GB/s", "nvlink_rx_bytes_per_s", 1e9),
          ("power W", "power_w", 1), ("SM MHz", "sm_clock_mhz", 1), ("gen", "pcie_gen", 1))


def main() -> int:
    rec = open_recording(sys.argv[1])
    marks = [(e.t, e.text) for e in rec.events if e.kind == "marker" and e.text.startswith("phase:")]
    ends = [t for t, _ in marks[1:]] + [rec.times[-1] + 1]
    n = len(rec.inventory.devices)
    print(f"recording: {rec.n_frames} frames, {rec.duration_s:.0f} s, {n} GPUs, problems: {rec.problems or 'none'}")
    head = f"{'phase':<44} {'GPU':>3} " + " ".join(f"{h:>12}" for h, _a, _s in FIELDS)
    print(head)
    for (t0, text), t1 in zip(marks, ends):
        # skip the first 2 s of a phase (ramp-up) and GPM's first interval
        frames = [rec.frame(i) for i in range(rec.n_frames) if t0 + 2.0 <= rec.times[i] < t1]
        for g in range(n):
            cells = []
            for _h, attr, scale in FIELDS:
                vals = [getattr(f.gpus[g], attr) for f in frames if not f.gpus[g].lost]
                vals = [v for v in vals if v is not None]
                cells.append(f"{np.mean(vals) / scale:>12.1f}" if vals else f"{'-':>12}")
            print(f"{text[7:51]:<44} {g:>3} " + " ".join(cells))
    if len(sys.argv) > 2:
        try:
            with open(sys.argv[2]) as f:
                print("measured by the load itself:", json.dumps(json.load(f)["results"], indent=1))
        except OSError as e:
            print("no phases.json:", e)
    return 0


if __name__ == "__main__":
    sys.exit(main())
