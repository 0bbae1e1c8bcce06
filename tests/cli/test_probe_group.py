"""`gpuscope probe --group NAME` from the command line (cli/probe.py, cli/probe_args.py): one serving group's
links on the simulated mixed-4 machine, its unknown-name error, and the flag's parser."""

from __future__ import annotations

import argparse
import json

import pytest

from gpuscope.cli.main import main
from gpuscope.cli.probe_args import group_name


def test_group_by_port_probes_its_gpus_and_their_pair(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["probe", "--simulate", "mixed-4", "--group", ":8001"]) == 0
    cap = capsys.readouterr()
    assert cap.err.splitlines()[0] == ("group vLLM :8001 Mistral-Small-24B-Instruct-2501: GPU2+GPU3 and the pairs "
                                       "among them")
    assert "2 GPUs, 1 pair" in cap.err
    rows = [x.split()[0] for x in cap.out.splitlines() if x.startswith("GPU")]
    assert set(rows) == {"GPU2", "GPU3", "GPU2←GPU3", "GPU2→GPU3", "GPU2↔GPU3"}
    assert "serving group vLLM :8001 Mistral-Small-24B-Instruct-2501" in cap.out
    assert all(len(x) <= 80 for x in cap.out.splitlines())


def test_group_json_names_the_group(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["probe", "--simulate", "mixed-4", "--group", "vLLM :8000 Qwen2.5-32B-Instruct", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["group"] == "vLLM :8000 Qwen2.5-32B-Instruct"
    assert [g["index"] for g in d["gpus"]] == [0, 1] and [(p["a"], p["b"]) for p in d["pairs"]] == [(0, 1)]
    assert d["pairs"][0]["read"]["method"].startswith("simulated")


def test_unknown_group_is_one_line_listing_the_groups(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["probe", "--simulate", "mixed-4", "--group", "llama"]) == 1
    err = capsys.readouterr().err
    assert err == ("gpuscope: error: --group 'llama': no such serving group here (groups: vLLM :8000 "
                   "Qwen2.5-32B-Instruct (GPU0+GPU1), vLLM :8001 Mistral-Small-24B-Instruct-2501 (GPU2+GPU3), "
                   "python3 -m ipykernel_launcher (GPU3))\n")


def test_a_scenario_without_servers_has_no_group(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["probe", "--simulate", "slot-limited", "--group", ":8000"]) == 1
    assert "no such serving group here (groups: none found)" in capsys.readouterr().err


def test_group_and_gpus_together_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["probe", "--simulate", "mixed-4", "--group", ":8000", "--gpus", "0,1"])
    assert e.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


@pytest.mark.parametrize("text,name", [(":8000", ":8000"), ("  vLLM   :8000 qwen ", "vLLM :8000 qwen"),
                                       ("http://localhost:8000", "http://localhost:8000")])
def test_group_names(text: str, name: str) -> None:
    assert group_name(text) == name


@pytest.mark.parametrize("text,words", [("", "no group given"), ("   ", "no group given"),
                                        ("x" * 201, "at most 200 characters"),
                                        ("vllm\x1b[31m", "control characters")])
def test_bad_group_names(text: str, words: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=words):
        group_name(text)


@pytest.mark.parametrize("name,url", [(":8000", "http://localhost:8000"), ("8000", "http://localhost:8000"),
                                      ("localhost:8001", "http://localhost:8001"),
                                      ("http://10.0.0.5:8002/v1", "http://10.0.0.5:8002/v1"), ("vLLM", None)])
def test_on_real_gpus_a_name_with_a_port_is_looked_up_as_that_endpoint(monkeypatch: pytest.MonkeyPatch, name: str,
                                                                       url: str | None) -> None:
    """Headless, without --endpoint: /proc's groups (as the live view finds them), and a NAME with a port asks the
    finder for that port's listener, so `--group :8000` finds the server listening there without polling it."""
    from gpuscope.cli.probe import find_groups
    from gpuscope.core.model import Frame, ServingGroup
    from gpuscope.sources import groups as groups_mod

    seen = []
    found = (ServingGroup("vLLM", port=8000, gpus=(0,)),)

    def fake_groups(self: object, frame: Frame) -> tuple[ServingGroup, ...]:
        seen.append([e.url for e in frame.endpoints])
        return found

    monkeypatch.setattr(groups_mod.GroupFinder, "groups", fake_groups)
    assert find_groups(None, None, Frame(t=0.0, gpus=()), name) == found
    assert seen == [[url] if url else []]
