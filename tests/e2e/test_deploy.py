"""deploy/: the Kubernetes manifests against the Kubernetes schemas, offline, and against each other; the
commands they and the Containerfile run against gpuscope's own parser.

* DaemonSet and Service: kubernetes-validate (the API's OpenAPI schemas for each release, bundled in
  the package; no network), strict (an unknown field fails), for the oldest and the newest release it
  has.
* ServiceMonitor, a CRD the Kubernetes schemas do not have (and no well-kept PyPI package bundles): the
  validators of @kubernetes-models/prometheus-operator (npm; generated from the Prometheus Operator's CRD
  schemas: types, enums, patterns, required fields; not unknown fields), run by node from
  tools/crd-check/ once ``npm ci --prefix tools/crd-check`` installed it (.ci/run does).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from gpuscope.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[2]
KUBE = ROOT / "deploy" / "kubernetes"
CONTAINERFILE = ROOT / "deploy" / "Containerfile"
CRD_CHECK = ROOT / "tools" / "crd-check"
needs_crd_check = pytest.mark.skipif(
    shutil.which("node") is None or not (CRD_CHECK / "node_modules").is_dir(),
    reason="the ServiceMonitor check needs node and `npm ci --prefix tools/crd-check` (.ci/run runs it)")


def load(name: str) -> dict[str, Any]:
    (doc,) = list(yaml.safe_load_all((KUBE / name).read_text()))
    return doc


def kube_versions() -> list[str]:
    v = sorted(kubernetes_validate.utils.all_versions(), key=lambda s: tuple(int(x) for x in s.split(".")))
    return [v[0], v[-1]]


@pytest.mark.parametrize("version", kube_versions())
@pytest.mark.parametrize("name", ["daemonset.yaml", "service.yaml"])
def test_manifest_is_valid_for_kubernetes(name, version):
    kubernetes_validate.validate(load(name), version, strict=True)


@pytest.mark.parametrize("mutate,what", [
    (lambda d: d["spec"]["template"]["spec"]["containers"][0].update(imagePullPolicyy="Always"), "unknown field"),
    (lambda d: d["spec"]["template"]["spec"]["containers"][0]["ports"][0].update(containerPort="19400"), "a string port"),
    (lambda d: d["spec"].pop("selector"), "no selector"),
])
def test_the_validator_rejects_a_broken_daemonset(mutate, what):
    d = load("daemonset.yaml")
    mutate(d)
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(d, kube_versions()[-1], strict=True)


def servicemonitor_verdicts(docs: list[dict[str, Any]]) -> list[str]:
    """tools/crd-check's verdict on each ServiceMonitor: "ok" or "invalid: …"."""
    p = subprocess.run(["node", "check.mjs"], cwd=CRD_CHECK, input=json.dumps(docs), capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout.splitlines()


@needs_crd_check
def test_servicemonitor_is_valid_for_the_prometheus_operator_and_broken_ones_are_not():
    good = load("servicemonitor.yaml")
    broken = []
    for mutate in (lambda e: e.update(interval="15 seconds"),  # not a duration
                   lambda e: e.update(honorLabels="yes"),
                   lambda e: e.update(scheme="gopher"),
                   lambda e: e["relabelings"][0].update(action="rename")):
        d = json.loads(json.dumps(good))
        mutate(d["spec"]["endpoints"][0])
        broken.append(d)
    verdicts = servicemonitor_verdicts([good, *broken])
    assert verdicts[0] == "ok"
    assert all(v.startswith("invalid: ") for v in verdicts[1:]), verdicts


def test_manifests_agree_with_each_other():
    ds, svc, sm = load("daemonset.yaml"), load("service.yaml"), load("servicemonitor.yaml")
    pod = ds["spec"]["template"]
    (ctr,) = pod["spec"]["containers"]
    assert ds["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert svc["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    ports = {p["name"]: p["containerPort"] for p in ctr["ports"]}
    (sp,) = svc["spec"]["ports"]
    assert sp["targetPort"] in ports and sp["port"] == ports[sp["targetPort"]] == 19400
    assert [e["port"] for e in sm["spec"]["endpoints"]] == [sp["name"]]
    # the kubelet's folder, read-only, and the socket the agent is told about inside it
    (mount,) = ctr["volumeMounts"]
    (vol,) = pod["spec"]["volumes"]
    assert mount["readOnly"] is True and mount["name"] == vol["name"]
    assert vol["hostPath"]["path"] == mount["mountPath"] == "/var/lib/kubelet/pod-resources"
    args = ctr["args"]
    assert args[args.index("--kubelet-socket") + 1] == mount["mountPath"] + "/kubelet.sock"
    env = {e["name"]: e for e in ctr["env"]}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    res = ctr["resources"]
    assert res["requests"]["memory"] and res["limits"]["memory"] and res["requests"]["cpu"]


def _containerfile_command() -> list[str]:
    """ENTRYPOINT + CMD of the Containerfile (exec form)."""
    text = CONTAINERFILE.read_text()
    entry = next(line for line in text.splitlines() if line.startswith("ENTRYPOINT "))
    cmd = next(line for line in text.splitlines() if line.startswith("CMD "))
    return yaml.safe_load(entry.split(" ", 1)[1]) + yaml.safe_load(cmd.split(" ", 1)[1])


def test_the_commands_are_gpuscope_commands():
    """The image's default command and the DaemonSet's arguments parse with gpuscope's own parser."""
    parsers = build_parser()
    command = _containerfile_command()
    assert command[:2] == ["gpuscope", "agent"]
    ns = parsers["agent"].parse_args(command[2:])
    assert ns.prometheus == ":19400"
    (ctr,) = load("daemonset.yaml")["spec"]["template"]["spec"]["containers"]
    assert ctr["args"][0] == "agent"
    ns = parsers["agent"].parse_args(ctr["args"][1:])
    assert ns.prometheus == ":19400" and ns.kubelet_socket == "/var/lib/kubelet/pod-resources/kubelet.sock"


def test_the_image_installs_the_wheel_with_the_kubernetes_extra_as_a_user():
    """What the image is made of (no image is built here: CI has no container engine)."""
    lines = CONTAINERFILE.read_text().splitlines()
    assert [line for line in lines if line.startswith("FROM ")] == ["FROM python:3.12-slim"]
    assert any('pip install --no-cache-dir "${wheel}[kubernetes]"' in line for line in lines)
    users = [line.split()[1] for line in lines if line.startswith("USER ")]
    assert users and not users[-1].startswith(("0", "root"))
