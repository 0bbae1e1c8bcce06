"""gpuscope's Grafana dashboard (deploy/grafana/gpuscope.json): its JSON model (a datasource variable every
panel uses, label_values variables, a grid without overlaps), every series it names is one the exporter
writes, and end to end: two simulated agents (one polling a real HTTP server that speaks vLLM's /metrics,
for TTFT and the KV cache) scraped by a real Prometheus at 1 s, where every panel query, with the template
variables substituted as Grafana would for "All", returns data."""

from __future__ import annotations

import http.server
import json
import re
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import (
    HttpServer,
    needs_prometheus,
    prom_query,
    run_frames,
    start_agent,
    start_prometheus,
    stop_agent,
    stop_prometheus,
)

from gpuscope.core import catalogue
from gpuscope.core.findings import Finding
from gpuscope.outputs.prometheus import HISTOGRAM_FAMILIES, Renderer
from gpuscope.sources.groups import with_groups
from gpuscope.sources.live import open_source

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "gpuscope.json"
DS_UID = "${datasource}"
VARIABLES = {"instance", "gpu", "endpoint"}
# Grafana's built-in interval variables, as it would set them on a 1 s scrape (rate() wants ≥ 2 samples)
BUILTINS = {"__rate_interval": "15s", "__interval": "5s", "__range": "1m"}


def load() -> dict:
    return json.loads(DASHBOARD.read_text())


def all_panels(dash: dict) -> Iterator[dict]:
    for p in dash["panels"]:
        yield p
        yield from p.get("panels", [])  # a collapsed row keeps its panels inside it


def targets(dash: dict) -> list[tuple[str, str, str]]:
    """(panel title, refId, expr) of every query."""
    return [(p["title"], t["refId"], t["expr"]) for p in all_panels(dash) for t in p.get("targets", [])]


def substitute(expr: str, names: set[str]) -> str:
    """``expr`` as Grafana sends it with every variable on "All" (allValue ``.*``) and 1 s-scrape intervals.
    An unknown variable is an error: the dashboard would send it literally."""
    def one(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        if name in BUILTINS:
            return BUILTINS[name]
        if name not in names:
            raise AssertionError(f"{expr}: unknown variable ${name}")
        return ".*"
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", one, expr)


@pytest.mark.parametrize("expr,want", [
    ('gpuscope_pcie_link_generation{instance=~"$instance",gpu=~"$gpu"}',
     'gpuscope_pcie_link_generation{instance=~".*",gpu=~".*"}'),
    ("rate(x{instance=~\"${instance}\"}[$__rate_interval])", 'rate(x{instance=~".*"}[15s])'),
    ("max_over_time(x[$__interval])", "max_over_time(x[5s])"),
])
def test_substitute(expr, want):
    assert substitute(expr, VARIABLES) == want


def test_substitute_refuses_an_unknown_variable():
    with pytest.raises(AssertionError, match=r"unknown variable \$host"):
        substitute('x{instance=~"$host"}', VARIABLES)


def test_json_model():
    dash = load()
    assert dash["schemaVersion"] >= 36 and dash["uid"] and dash["title"]
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    assert set(variables) == {"datasource"} | VARIABLES
    for name in VARIABLES:
        v = variables[name]
        assert v["type"] == "query" and v["datasource"]["uid"] == DS_UID
        assert v["includeAll"] and v["allValue"] == ".*" and v["multi"]
        assert re.fullmatch(rf"label_values\(\w+(\{{[^}}]*\}})?, {name}\)", v["query"]["query"]), v["query"]
        assert v["definition"] == v["query"]["query"]
    ids = [p["id"] for p in all_panels(dash)]
    assert len(ids) == len(set(ids))
    cells: set[tuple[int, int]] = set()
    for p in all_panels(dash):
        g = p["gridPos"]
        assert g["x"] >= 0 and g["w"] > 0 and g["x"] + g["w"] <= 24 and g["h"] > 0, p["title"]
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not mine & cells, f"{p['title']} overlaps another panel"
        cells |= mine
        if p["type"] == "row":
            continue
        assert p["datasource"]["uid"] == DS_UID and p.get("description"), p["title"]
        assert p["targets"] and all(t["datasource"]["uid"] == DS_UID for t in p["targets"]), p["title"]
        assert len({t["refId"] for t in p["targets"]}) == len(p["targets"]), p["title"]
    assert len(targets(dash)) >= 20


def exported_families() -> set[str]:
    """The families the exporter writes: the catalogue's, and those the renderer writes for a simulated
    machine with serving groups, a finding and the sampler's health."""
    src = with_groups(open_source("mixed-4", virtual_at=20.0), "mixed-4")
    try:
        frame = run_frames(src, 20.0, 26.0)[-1]  # NVLink rates come on the 5 s slow path
        finding = Finding("x:gpu0", "link_saturated", "warning", "GPU0", "busy", {}, 0.0, 0.0)
        text = Renderer(src.inventory).render(frame, [finding])
    finally:
        src.close()
    declared = {s.name for m in catalogue.METRICS for s in (m.dcgm, m.prom) if s is not None}
    histograms = {f"{name}{part}" for name, _help in HISTOGRAM_FAMILIES.values() for part in ("_bucket", "_sum", "_count")}
    return declared | histograms | set(re.findall(r"^# TYPE (\S+)", text, re.M))


def test_every_series_the_dashboard_names_is_exported():
    dash = load()
    exprs = [e for _t, _r, e in targets(dash)]
    exprs += [v["query"]["query"] for v in dash["templating"]["list"] if v["type"] == "query"]
    named = {n for e in exprs for n in re.findall(r"\b((?:gpuscope|DCGM)_\w+)", e)}
    assert named and named <= exported_families(), sorted(named - exported_families())
    # what the dashboard is for: links against their ceilings, generation now vs max, findings, serving groups
    for need in ("gpuscope_pcie_link_capacity_bytes_per_second", "gpuscope_pcie_link_max_capacity_bytes_per_second",
                 "gpuscope_nvlink_capacity_bytes_per_second", "gpuscope_pcie_link_generation_gpu_max",
                 "gpuscope_findings_active", "gpuscope_serving_group_generated_tokens_per_second",
                 "gpuscope_serving_group_bytes_per_token", "gpuscope_endpoint_server_time_to_first_token_seconds_bucket",
                 "gpuscope_endpoint_server_inter_token_latency_seconds_bucket",
                 "gpuscope_endpoint_kv_cache_usage_ratio"):
        assert need in named, need


# ---- end to end: a real Prometheus scraping simulated agents ----

# TTFT buckets each narrower than 20 % of their lower bound, so gpuscope gives p50 and p95 as values
TTFT_LE = (0.1, 0.115, 0.13, 0.15, 0.17, 0.2, 0.23, 0.26, 0.3, 0.35, 0.4)
TTFT_CDF = (0.05, 0.15, 0.3, 0.45, 0.6, 0.75, 0.85, 0.92, 0.96, 0.99, 1.0)


def vllm_metrics(t: float) -> str:
    """vLLM's /metrics ``t`` seconds after start: 800 tok/s, 4 requests/s with fixed TTFT and ITL
    distributions, 12 running, 3 waiting, 63 % of the KV cache."""
    n = 4.0 * t
    lines = ['# TYPE vllm:generation_tokens_total counter', f'vllm:generation_tokens_total{{model_name="m"}} {800 * t}',
             '# TYPE vllm:prompt_tokens_total counter', f'vllm:prompt_tokens_total{{model_name="m"}} {3000 * t}',
             '# TYPE vllm:num_requests_running gauge', 'vllm:num_requests_running{model_name="m"} 12',
             '# TYPE vllm:num_requests_waiting gauge', 'vllm:num_requests_waiting{model_name="m"} 3',
             '# TYPE vllm:kv_cache_usage_perc gauge', 'vllm:kv_cache_usage_perc{model_name="m"} 0.63']
    for name, scale in (("vllm:time_to_first_token_seconds", 1.0), ("vllm:inter_token_latency_seconds", 0.1)):
        lines.append(f"# TYPE {name} histogram")
        lines += [f'{name}_bucket{{model_name="m",le="{le * scale:g}"}} {n * c}' for le, c in zip(TTFT_LE, TTFT_CDF)]
        lines += [f'{name}_bucket{{model_name="m",le="+Inf"}} {n}', f'{name}_count{{model_name="m"}} {n}',
                  f'{name}_sum{{model_name="m"}} {n * 0.2 * scale}']
    return "\n".join(lines) + "\n"


class VllmServer(HttpServer):
    """A real HTTP server answering /metrics as vLLM would, its counters advancing with the wall clock."""

    def __init__(self) -> None:
        t0 = time.monotonic()

        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                body = vllm_metrics(time.monotonic() - t0).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a: object) -> None:
                pass

        HttpServer.__init__(self, H)


@needs_prometheus
@pytest.mark.slow
def test_every_panel_query_returns_data_from_a_real_prometheus(tmp_path):
    """mixed-4 (NVLink, two serving groups and a group by process, an info finding) and a6000-tp2-pcie-gen1
    (a link at Gen1 of Gen4, critical findings) polling a vLLM /metrics for TTFT, ITL and the KV cache."""
    dash = load()
    queries = [(title, ref, substitute(e, VARIABLES)) for title, ref, e in targets(dash)]
    queries += [(f"variable {v['name']}", "", v["query"]["query"].replace("$instance", ".*"))
                for v in dash["templating"]["list"] if v["type"] == "query"]
    vllm = VllmServer()
    agents = [start_agent(scenario="mixed-4"),
              start_agent("--endpoint", vllm.url, "--endpoint-window", "3", scenario="a6000-tp2-pcie-gen1")]
    prom = None
    try:
        targets_ = ", ".join(f"'{urllib.parse.urlparse(url).netloc}'" for _p, url in agents)
        cfg = tmp_path / "prometheus.yml"
        cfg.write_text("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n"
                       f"  - job_name: gpuscope\n    static_configs:\n      - targets: [{targets_}]\n")
        prom, base = start_prometheus(tmp_path, cfg)

        def empty() -> list[str]:
            return [f"{title} [{ref}]: {q}" for title, ref, q in queries if not _values(base, q)]

        deadline = time.monotonic() + 30
        while (missing := empty()) and time.monotonic() < deadline:
            time.sleep(1)
        assert not missing, "queries without data:\n" + "\n".join(missing)
        # the data is the scenarios', not any data: each agent answered, Gen1 of Gen4 shows, TTFT is the server's
        up = prom_query(base, 'up{job="gpuscope"}')
        assert len(up) == 2 and all(x["value"][1] == "1" for x in up)
        gen = {x["metric"]["gpu"]: x["value"][1] for x in prom_query(base, "gpuscope_pcie_link_generation")
               if x["metric"]["instance"] == urllib.parse.urlparse(agents[1][1]).netloc}
        assert gen == {"0": "1", "1": "1"}
        p50 = prom_query(base, 'gpuscope_endpoint_time_to_first_token_seconds{stat="p50"}')
        assert len(p50) == 1 and 0.15 <= float(p50[0]["value"][1]) <= 0.17  # the server's p50 bucket
        # the panels' query, on the server's own buckets: histogram_quantile over the exported histogram
        q50 = prom_query(base, "histogram_quantile(0.5, sum by (le) (rate("
                         "gpuscope_endpoint_server_time_to_first_token_seconds_bucket[15s])))")
        assert len(q50) == 1 and 0.15 <= float(q50[0]["value"][1]) <= 0.17
        groups = prom_query(base, "gpuscope_serving_group_info")
        assert {(g["metric"]["server"], g["metric"]["gpus"]) for g in groups} >= {("vLLM", "0,1"), ("vLLM", "2,3")}
    finally:
        if prom is not None:
            stop_prometheus(prom)
        for p, _url in agents:
            stop_agent(p)
        vllm.close()


def _values(base: str, q: str) -> list[dict]:
    """An instant query's result, or (for a label_values variable) the label's values."""
    m = re.fullmatch(r"label_values\((.+), (\w+)\)", q)
    if m:
        return [x for x in prom_query(base, f"count by ({m.group(2)}) ({m.group(1)})") if m.group(2) in x["metric"]]
    return prom_query(base, q)
