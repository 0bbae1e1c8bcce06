"""The exporter's serving-group series: labelled by the server and its GPUs, never by PID."""

from __future__ import annotations

import re

from gpuscope.sources.groups import with_groups
from gpuscope.sources.live import open_source
from gpuscope.sources.prometheus import Renderer


def test_serving_group_series_for_the_design_story():
    src = with_groups(open_source("a6000-tp2-pcie-gen1", virtual_at=30.0), "a6000-tp2-pcie-gen1")
    try:
        frame = src.sample()
        text = Renderer(src.inventory).render(frame)
    finally:
        src.close()
    (info,) = re.findall(r"^gpuscope_serving_group_info\{(.*)\} 1$", text, re.M)
    assert 'server="vLLM"' in info and 'endpoint="http://localhost:8000"' in info and 'gpus="0,1"' in info
    assert 'tp="2"' in info and 'pp=""' in info and 'path="SYS"' in info and 'simulated="true"' in info
    assert "pid" not in info and "2811" not in text.split("gpuscope_serving_group")[1]
    key = '{server="vLLM",endpoint="http://localhost:8000",gpus="0,1"}'
    tok = float(re.search(r"^gpuscope_serving_group_generated_tokens_per_second" + re.escape(key) + r" (\S+)$", text,
                          re.M).group(1))
    per = float(re.search(r"^gpuscope_serving_group_bytes_per_token" + re.escape(key) + r" (\S+)$", text, re.M).group(1))
    pcie = float(re.search(r"^gpuscope_serving_group_pcie_bytes_per_second" + re.escape(key) + r" (\S+)$", text,
                           re.M).group(1))
    assert 50 < tok < 60 and per * tok == __import__("pytest").approx(pcie, rel=1e-3)
    assert "gpuscope_serving_group_nvlink_bytes_per_second" not in text  # A6000 without NVLink: absent, not 0
