"""The server table (sources/endpoint.py SERVER_SPECS): typed, complete, and the same as the dicts it replaced."""

from __future__ import annotations

import dataclasses

import pytest

from gpuscope.core.vocab import SERVER_KINDS
from gpuscope.sources.endpoint import (
    COUNTER_KEYS,
    GAUGE_KEYS,
    HIST_KEYS,
    PREFIXES,
    SERVER_SPECS,
    EndpointTracker,
    Labelled,
    ServerSpec,
    detect_kind,
    metrics_url,
)

L = Labelled

# What each kind read before the table was typed (the old SPEC dicts, role by role): the typed table must
# read exactly these names, in this order (first present wins), and nothing else.
OLD_TABLE: list[tuple[str, str, tuple[str | Labelled, ...]]] = [
    ("vllm", "gen", ("vllm:generation_tokens_total",)),
    ("vllm", "prompt", ("vllm:prompt_tokens_total",)),
    ("vllm", "running", ("vllm:num_requests_running",)),
    ("vllm", "waiting", ("vllm:num_requests_waiting",)),
    ("vllm", "kv", ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")),
    ("vllm", "ttft", ("vllm:time_to_first_token_seconds",)),
    ("vllm", "itl", ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds")),
    ("vllm", "spec_accepted", ("vllm:spec_decode_num_accepted_tokens_total",)),
    ("vllm", "spec_drafts", ("vllm:spec_decode_num_drafts_total",)),
    ("vllm", "spec_draft_tokens", ("vllm:spec_decode_num_draft_tokens_total",)),
    ("vllm", "prompt_computed", (L("vllm:prompt_tokens_by_source_total", "source", "local_compute"),)),
    ("vllm", "prompt_cached", (L("vllm:prompt_tokens_by_source_total", "source", "local_cache_hit"),)),
    ("vllm", "cache_hits", ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total")),
    ("vllm", "cache_queries", ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total")),
    ("vllm", "preemptions", ("vllm:num_preemptions_total",)),
    ("vllm", "queue", ("vllm:request_queue_time_seconds",)),
    ("vllm", "prefill", ("vllm:request_prefill_time_seconds",)),
    ("sglang", "gen", ("sglang:generation_tokens_total",)),
    ("sglang", "prompt", ("sglang:prompt_tokens_total",)),
    ("sglang", "gen_gauge", ("sglang:gen_throughput",)),
    ("sglang", "running", ("sglang:num_running_reqs",)),
    ("sglang", "waiting", ("sglang:num_queue_reqs",)),
    ("sglang", "kv", ("sglang:token_usage",)),
    ("sglang", "ttft", ("sglang:time_to_first_token_seconds",)),
    ("sglang", "itl", ("sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds")),
    ("sglang", "spec_len_gauge", ("sglang:spec_accept_length",)),
    ("sglang", "spec_rate_gauge", ("sglang:spec_accept_rate",)),
    ("sglang", "cache_hit_gauge", ("sglang:cache_hit_rate",)),
    ("sglang", "queue", ("sglang:queue_time_seconds",)),
    ("tgi", "gen", ("tgi_request_generated_tokens_sum",)),
    ("tgi", "prompt", ("tgi_request_input_length_sum",)),
    ("tgi", "running", ("tgi_batch_current_size",)),
    ("tgi", "waiting", ("tgi_queue_size",)),
    ("tgi", "itl", ("tgi_request_mean_time_per_token_duration",)),
    ("llamacpp", "gen", ("llamacpp:tokens_predicted_total",)),
    ("llamacpp", "prompt", ("llamacpp:prompt_tokens_total",)),
    ("llamacpp", "running", ("llamacpp:requests_processing",)),
    ("llamacpp", "waiting", ("llamacpp:requests_deferred",)),
    ("llamacpp", "spec_accepted", ("llamacpp:spec_decode_num_accepted_tokens_total",)),
    ("llamacpp", "spec_drafts", ("llamacpp:spec_decode_num_drafts_total",)),
    ("llamacpp", "spec_draft_tokens", ("llamacpp:spec_decode_num_draft_tokens_total",)),
    ("trtllm", "gen", ("trtllm_generation_tokens_total",)),
    ("trtllm", "prompt", ("trtllm_prompt_tokens_total",)),
    ("trtllm", "running", ("trtllm_num_requests_running",)),
    ("trtllm", "waiting", ("trtllm_num_requests_waiting",)),
    ("trtllm", "kv", ("trtllm_kv_cache_utilization",)),
    ("trtllm", "ttft", ("trtllm_time_to_first_token_seconds",)),
    ("trtllm", "itl", ("trtllm_time_per_output_token_seconds",)),
    ("trtllm", "spec_len_gauge", ("trtllm_spec_decode_acceptance_length",)),
    ("trtllm", "spec_accepted", ("trtllm_spec_decode_num_accepted_tokens_total",)),
    ("trtllm", "spec_draft_tokens", ("trtllm_spec_decode_num_draft_tokens_total",)),
    ("triton", "gen", ("nv_llm_output_token_len_sum",)),
    ("triton", "prompt", ("nv_llm_input_token_len_sum",)),
    ("triton", "running", (L("nv_trt_llm_request_metrics", "request_type", "active"),)),
    ("triton", "waiting", (L("nv_trt_llm_request_metrics", "request_type", "waiting"),)),
    ("triton", "kv", (L("nv_trt_llm_kv_cache_block_metrics", "kv_cache_block_type", "fraction"),)),
    ("lmdeploy", "gen", ("lmdeploy:generation_tokens_total",)),
    ("lmdeploy", "prompt", ("lmdeploy:prompt_tokens_total",)),
    ("lmdeploy", "running", ("lmdeploy:num_requests_running",)),
    ("lmdeploy", "waiting", ("lmdeploy:num_requests_waiting",)),
    ("lmdeploy", "kv", ("lmdeploy:gpu_cache_usage_perc",)),
    ("lmdeploy", "ttft", ("lmdeploy:time_to_first_token_seconds",)),
    ("lmdeploy", "itl", ("lmdeploy:time_per_output_token_seconds",)),
    ("lmdeploy", "spec_len_gauge", ("lmdeploy:spec_decode_mean_accept_length",)),
    ("lmdeploy", "spec_accepted", ("lmdeploy:spec_decode_num_accepted_tokens_total",)),
    ("lmdeploy", "spec_drafts", ("lmdeploy:spec_decode_num_drafts_total",)),
    ("lmdeploy", "spec_draft_tokens", ("lmdeploy:spec_decode_num_draft_tokens_total",)),
]
KV_FRACTION = {"vllm": True, "sglang": True, "tgi": False, "llamacpp": False, "trtllm": True, "triton": True,
               "lmdeploy": True}
ROLES = (*COUNTER_KEYS, *HIST_KEYS, *GAUGE_KEYS)


def test_one_spec_per_server_kind_in_vocabulary_order():
    assert tuple(SERVER_SPECS) == SERVER_KINDS
    assert all(SERVER_SPECS[k].kind == k for k in SERVER_KINDS)


@pytest.mark.parametrize("kind,role,names", OLD_TABLE)
def test_each_role_reads_what_the_old_table_read(kind, role, names):
    assert getattr(SERVER_SPECS[kind], role) == names


@pytest.mark.parametrize("kind", SERVER_KINDS)
def test_roles_not_in_the_old_table_are_empty(kind):
    listed = {role for k, role, _n in OLD_TABLE if k == kind}
    spec = SERVER_SPECS[kind]
    assert {role for role in ROLES if getattr(spec, role)} == listed
    assert spec.kv_fraction is KV_FRACTION[kind]


def test_the_role_keys_are_exactly_the_specs_series_fields():
    fields = {f.name for f in dataclasses.fields(ServerSpec)}
    assert set(ROLES) == fields - {"kind", "prefixes", "metrics_path", "kv_fraction"}
    assert len(set(ROLES)) == len(ROLES)


@pytest.mark.parametrize("kind", SERVER_KINDS)
def test_every_series_is_named_with_its_own_kinds_prefix(kind):
    spec = SERVER_SPECS[kind]
    for n in spec.series():
        name = n.name if isinstance(n, Labelled) else n
        assert name.startswith(spec.prefixes), (kind, name)
        assert detect_kind([name]) == kind


def test_a_misspelt_role_is_an_error_and_a_spec_cannot_change():
    with pytest.raises(TypeError):
        ServerSpec("vllm", ("vllm:",), gne=("vllm:generation_tokens_total",))  # type: ignore[call-arg]
    with pytest.raises(dataclasses.FrozenInstanceError):
        SERVER_SPECS["vllm"].gen = ()  # type: ignore[misc]


@pytest.mark.parametrize("prefix,kind", [
    ("vllm:", "vllm"), ("sglang:", "sglang"), ("tgi_", "tgi"), ("llamacpp:", "llamacpp"), ("trtllm_", "trtllm"),
    ("nv_trt_llm_", "triton"), ("nv_llm_", "triton"), ("nv_inference_", "triton"), ("lmdeploy:", "lmdeploy"),
])
def test_detection_prefixes_in_the_old_order(prefix, kind):
    assert (prefix, kind) in PREFIXES
    assert detect_kind([prefix + "anything"]) == kind
    assert detect_kind(["unrelated_metric", prefix + "x", prefix + "y"]) == kind


def test_prefix_order_is_unchanged():
    assert [p for p, _k in PREFIXES] == ["vllm:", "sglang:", "tgi_", "llamacpp:", "trtllm_", "nv_trt_llm_", "nv_llm_",
                                         "nv_inference_", "lmdeploy:"]


@pytest.mark.parametrize("kind,path", [(k, "/prometheus/metrics" if k == "trtllm" else "/metrics") for k in SERVER_KINDS]
                         + [(None, "/metrics")])
def test_metrics_path_per_kind(kind, path):
    assert metrics_url("http://h:1", kind) == "http://h:1" + path
    assert metrics_url("http://h:1/custom", kind) == "http://h:1/custom"


@pytest.mark.parametrize("kind", SERVER_KINDS)
def test_the_forced_kind_parses_only_its_specs_names(kind):
    tr = EndpointTracker(url="http://x", kind=kind)
    wanted = tr._wanted()
    assert wanted is not None
    for n in SERVER_SPECS[kind].series():
        base = n.name if isinstance(n, Labelled) else n
        assert all(wanted(base + s) for s in ("", "_bucket", "_sum", "_count"))
    assert wanted("process_start_time_seconds")
    assert not wanted("some_other_server:generation_tokens_total")
