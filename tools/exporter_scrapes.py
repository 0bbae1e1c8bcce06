"""Check the scrapes of `tools/gpu_machine.sh exporter` (a real GPU's exporter text, one per second): the families
dcgm-exporter's defaults alert on are there, in both name sets, and the energy counter advances every frame at
the rate of the power it reports.

    python tools/exporter_scrapes.py DIR        (DIR: the unpacked exporter/ folder of exporter.tgz)
"""
from __future__ import annotations

import sys
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

WANT = ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_RESERVED", "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "DCGM_FI_DEV_ROW_REMAP_FAILURE", "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "DCGM_FI_DEV_GPU_UTIL_RATIO", "DCGM_FI_DEV_GPU_TEMP_CELSIUS", "DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL")


def values(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:  # a counter's sample is named with _total by the parser: keep the family's name too
            out.setdefault(s.name, []).append((s.labels, s.value))
            if s.name != fam.name and s.name == fam.name + "_total":
                out.setdefault(fam.name, []).append((s.labels, s.value))
    return out


def main(d: Path) -> int:
    times = {int(a): float(b) for a, b in (ln.split() for ln in (d / "scrape_times.txt").read_text().splitlines())}
    scrapes = [(times[i], values((d / f"scrape_{i:03d}.txt").read_text())) for i in sorted(times)]
    last = scrapes[-1][1]
    print(f"{len(scrapes)} scrapes; families present in the last one:")
    for name in WANT:
        got = last.get(name)
        print(f"  {name:45s} {'MISSING' if not got else got[0][1]}")
    labels = last["DCGM_FI_DEV_POWER_USAGE"][0][0]
    print("labels of a DCGM series:", labels)

    def first(v: dict[str, list[tuple[dict[str, str], float]]], name: str) -> float:
        return v[name][0][1]

    e = [(t, first(v, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"), first(v, "DCGM_FI_DEV_POWER_USAGE")) for t, v in scrapes]
    moved = sum(1 for a, b in zip(e, e[1:]) if b[1] != a[1])
    back = sum(1 for a, b in zip(e, e[1:]) if b[1] < a[1])
    print(f"energy counter moved in {moved} of {len(e) - 1} scrape intervals, stepped back {back} times")
    print("window  energy-rate W  mean power W  ratio")
    for k in range(0, len(e) - 10, 5):
        (t0, e0, _), (t1, e1, _) = e[k], e[k + 10]
        p = sum(x[2] for x in e[k:k + 11]) / 11
        rate = (e1 - e0) / 1e3 / (t1 - t0)
        print(f"{k:3d}-{k + 10:3d}  {rate:12.1f}  {p:12.1f}  {rate / p:5.3f}")
    gr = [first(v, "DCGM_FI_PROF_GR_ENGINE_ACTIVE") for _, v in scrapes if "DCGM_FI_PROF_GR_ENGINE_ACTIVE" in v]
    if gr:
        print(f"GR_ENGINE_ACTIVE min {min(gr):.3f} max {max(gr):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
