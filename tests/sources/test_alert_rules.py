"""The alert rules (docs/prometheus-alerts.yml) under promtool: `check rules`, their unit tests
(docs/prometheus-alerts.test.yml: a link saturated 52 s of every minute fires the warning, a quiet or
blipping one does not), and the same tests against the plain `expr == 1`-style rules they replaced, which
must fail: that shows the test series really have the gaps that restart a plain rule's `for:`.
Skipped, with the reason, where promtool is absent; CI installs Debian's `prometheus` package."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import needs_promtool

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "docs" / "prometheus-alerts.yml"
RULE_TESTS = ROOT / "docs" / "prometheus-alerts.test.yml"

pytestmark = needs_promtool


def promtool(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["promtool", *args], capture_output=True, text=True, timeout=60, cwd=cwd)


def test_rules_check():
    p = promtool("check", "rules", str(RULES))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "SUCCESS: 9 rules found" in p.stdout + p.stderr


@pytest.mark.slow
def test_rule_unit_tests_pass():
    p = promtool("test", "rules", str(RULE_TESTS))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "SUCCESS" in p.stdout


# (alert, the expression shipped, the plain one it replaced). Every rule with a `for:` bridges gaps.
PLAIN = [
    ("GpuscopeFindingWarning", 'max_over_time(gpuscope_finding{severity="warning"}[2m]) == 1',
     'gpuscope_finding{severity="warning"} == 1'),
    ("GpuscopeFindingCritical", 'max_over_time(gpuscope_finding{severity="critical"}[30s]) == 1',
     'gpuscope_finding{severity="critical"} == 1'),
    ("GpuscopeAgentDown", 'avg_over_time(up{job="gpuscope"}[2m]) < 0.5', 'up{job="gpuscope"} == 0'),
    ("GpuscopeFramesStale", "time() - max_over_time(gpuscope_last_frame_timestamp_seconds[2m]) > 30",
     "time() - gpuscope_last_frame_timestamp_seconds > 30"),
    ("GpuscopeEndpointDown", "avg_over_time(gpuscope_endpoint_up[2m]) < 0.5", "gpuscope_endpoint_up == 0"),
    ("GpuscopeGroupLinkAtRisk", "max_over_time(gpuscope_serving_group_link_verdict[20s]) == 2",
     "gpuscope_serving_group_link_verdict == 2"),
]


@pytest.mark.slow
@pytest.mark.parametrize("alert,shipped,plain", PLAIN, ids=[a for a, _, _ in PLAIN])
def test_a_plain_rule_never_fires_on_the_same_gappy_series(tmp_path, alert, shipped, plain):
    rules = RULES.read_text()
    assert rules.count(f"expr: {shipped}\n") == 1  # the shipped rule is still this one
    (tmp_path / RULES.name).write_text(rules.replace(f"expr: {shipped}\n", f"expr: {plain}\n"))
    shutil.copy(RULE_TESTS, tmp_path / RULE_TESTS.name)
    p = promtool("test", "rules", RULE_TESTS.name, cwd=tmp_path)
    out = p.stdout + p.stderr
    assert p.returncode == 1, out
    # every failure is this alert expected firing and got nothing: the gaps restarted its `for:`
    failed = re.findall(r"alertname: (\w+), time: (\S+), \n\s+exp:\[(.*?)\],\s+got:\[(.*?)\]", out, re.S)
    assert failed and {a for a, *_ in failed} == {alert}, out
    assert all(exp.strip() and not got.strip() for _a, _t, exp, got in failed), out

