"""`gpuscope probe --group NAME`: which serving group a name means, and the plan over its GPUs
(core/probe_plan.py)."""

from __future__ import annotations

import pytest

from gpuscope.core.errors import GpuscopeError
from gpuscope.core.model import ServingGroup
from gpuscope.core.probe_plan import group_gpus, make_plan, match_group, port_of

QWEN = ServingGroup("vLLM", kind="vllm", endpoint="http://localhost:8000", model="Qwen/Qwen2.5-32B-Instruct",
                    port=8000, gpus=(0, 1), tp=2)
MISTRAL = ServingGroup("vLLM", kind="vllm", endpoint="http://localhost:8001",
                       model="mistralai/Mistral-Small-24B-Instruct-2501", port=8001, gpus=(2, 3), tp=2)
NOTEBOOK = ServingGroup("python3 -m ipykernel_launcher", gpus=(3,))
REMOTE = ServingGroup("SGLang", kind="sglang", endpoint="http://10.0.0.9:30000", port=30000, local=False)
GROUPS = (QWEN, MISTRAL, NOTEBOOK, REMOTE)


@pytest.mark.parametrize("name,group", [
    ("vLLM :8000 Qwen2.5-32B-Instruct", QWEN),  # the inference panel's label
    ("vllm :8000 qwen2.5-32b-instruct", QWEN),  # any case
    ("  vLLM   :8001  Mistral-Small-24B-Instruct-2501 ", MISTRAL),  # spaces as typed
    (":8000", QWEN),
    ("8001", MISTRAL),
    ("http://localhost:8000", QWEN),  # the endpoint URL
    ("http://localhost:8000/", QWEN),
    ("localhost:8001", MISTRAL),
    ("http://127.0.0.1:8001/metrics", MISTRAL),  # a URL with that port
    ("python3 -m ipykernel_launcher", NOTEBOOK),  # a group by program: its name
    ("python3", NOTEBOOK),  # a unique start of its label
    ("vLLM :8001", MISTRAL),
])
def test_a_name_means_one_group(name: str, group: ServingGroup) -> None:
    assert match_group(GROUPS, name) is group


@pytest.mark.parametrize("name,words", [
    ("nope", "--group 'nope': no such serving group here (groups: vLLM :8000 Qwen2.5-32B-Instruct (GPU0+GPU1), "
             "vLLM :8001 Mistral-Small-24B-Instruct-2501 (GPU2+GPU3), python3 -m ipykernel_launcher (GPU3), "
             "SGLang :30000 (no GPU))"),
    (":9999", "no such serving group here"),
    ("vLLM", "--group 'vLLM' names 2 groups (vLLM :8000 Qwen2.5-32B-Instruct (GPU0+GPU1), vLLM :8001 "
             "Mistral-Small-24B-Instruct-2501 (GPU2+GPU3)): give its port or its whole label"),
    (":30000", "SGLang :30000 has no GPU to probe here (its endpoint is on another host)"),
])
def test_unknown_ambiguous_or_gpu_less_names_are_one_line(name: str, words: str) -> None:
    with pytest.raises(GpuscopeError) as e:
        match_group(GROUPS, name)
    assert str(e.value) == words or words in str(e.value)
    assert "\n" not in str(e.value)


def test_no_group_at_all_says_none_found() -> None:
    with pytest.raises(GpuscopeError, match=r"no such serving group here \(groups: none found\)"):
        match_group((), ":8000")


@pytest.mark.parametrize("name,port", [(":8000", 8000), ("8000", 8000), ("localhost:8000", 8000),
                                       ("http://h:8001/v1", 8001), ("https://h", 443), ("vLLM :8000 q", None),
                                       ("vLLM", None), (":0", None), ("70000", None), ("python3", None)])
def test_port_of(name: str, port: int | None) -> None:
    assert port_of(name) == port


def test_plan_of_a_group_on_the_simulated_mixed_4() -> None:
    """mixed-4: two TP=2 vLLM replicas on NVLinked pairs; the group on :8001 is GPU2+GPU3 and their one pair."""
    from helpers import sim_source

    from gpuscope.sources.groups import with_groups

    src = with_groups(sim_source("mixed-4", at=5.0), "mixed-4")
    try:
        frame = src.sample()
        g = match_group(frame.groups, ":8001")
        gpus = group_gpus(src.inventory, g)
        plan = make_plan(src.inventory, frame, gpus, 1 << 30, 5)
    finally:
        src.close()
    assert gpus == [2, 3] and plan.gpus == (2, 3) and plan.pairs == ((2, 3),)
    assert plan.announce().startswith("probe: 2 GPUs, 1 pair, 5 × 256 MiB")


def test_group_gpus_not_here() -> None:
    from helpers import sim_source

    src = sim_source("mixed-4")
    try:
        with pytest.raises(GpuscopeError, match="none of its GPUs"):
            group_gpus(src.inventory, ServingGroup("vLLM", gpus=(7,), port=8000))
        assert group_gpus(src.inventory, ServingGroup("vLLM", gpus=(3, 1, 9))) == [1, 3]
    finally:
        src.close()
