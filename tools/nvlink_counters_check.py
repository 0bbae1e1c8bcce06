"""What a real GPU answers for the NVLink error counters gpuscope reads (docs/real-gpus.md): NVML's all-links
fields 38/45/52/59, the per-link ``nvmlDeviceGetNvLinkErrorCounter`` for each active link, their cost, and what
one ``NvmlSource`` sample carries. Only reads.

    python3 tools/nvlink_counters_check.py
"""

from __future__ import annotations

import time

import pynvml as N

FIELDS = {38: "CRC_FLIT total", 45: "CRC_DATA total", 52: "REPLAY total", 59: "RECOVERY total"}
COUNTERS = {"DL_REPLAY": 0, "DL_RECOVERY": 1, "DL_CRC_FLIT": 2, "DL_CRC_DATA": 3}


def main() -> None:
    N.nvmlInit()
    print("driver", N.nvmlSystemGetDriverVersion())
    for i in range(N.nvmlDeviceGetCount()):
        h = N.nvmlDeviceGetHandleByIndex(i)
        links = []
        for link in range(18):
            try:
                if N.nvmlDeviceGetNvLinkState(h, link):
                    links.append(link)
            except N.NVMLError as e:
                if link == 0:
                    print(f"GPU{i} link 0 state: {e}")
                break
        print(f"GPU{i} {N.nvmlDeviceGetName(h)} active NVLinks {len(links)}: {links}")
        t0 = time.perf_counter()
        try:
            vals = N.nvmlDeviceGetFieldValues(h, list(FIELDS))
            for fid, v in zip(FIELDS, vals):
                print(f"  field {fid} {FIELDS[fid]}: ret {v.nvmlReturn} value {v.value.ullVal}")
        except N.NVMLError as e:
            print(f"  field values: {e}")
        print(f"  all-links fields: {(time.perf_counter() - t0) * 1e6:.0f} µs")
        t0 = time.perf_counter()
        for name, c in COUNTERS.items():
            got = []
            for link in links:
                try:
                    got.append(N.nvmlDeviceGetNvLinkErrorCounter(h, link, c))
                except N.NVMLError as e:
                    got.append(str(e))
            print(f"  per link {name}: {got}")
        print(f"  per-link calls: {(time.perf_counter() - t0) * 1e6:.0f} µs for {len(links)} links")
    N.nvmlShutdown()
    from gpuscope.sources.live import open_source

    src = open_source()
    for _ in range(3):
        f = src.sample()
        time.sleep(1)
    for r in f.gpus:
        print(f"gpuscope GPU{r.index}: crc_flit {r.nvlink_crc_flit_count} crc_data {r.nvlink_crc_data_count} "
              f"replay {r.nvlink_replay_count} recovery {r.nvlink_recovery_count} pcie replay {r.pcie_replay_count}")
    src.close()


if __name__ == "__main__":
    main()
