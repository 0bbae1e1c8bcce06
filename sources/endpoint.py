"""Inference endpoints: parse Prometheus `/metrics`, detect the server, turn counters into rates.

Pure parts (tested with tables): :func:`parse_metrics`, :func:`detect_kind`, :func:`counter_rate`,
:func:`histogram_quantile`, :func:`busiest`, :func:`model_rates`, :class:`EndpointTracker`. :class:`EndpointPoller` polls over HTTP with
httpx on its own thread (timeouts, backoff, headers, TLS verification on), never blocking a UI.
Metric names per server: the ServerSpec table below (docs/serving.md says what each reading means).
"""

from __future__ import annotations

import asyncio
import errno
import heapq
import math
import re
import socket
import ssl
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, NamedTuple, get_args

from gpuscope.core.errors import GpuscopeError
from gpuscope.core.groups import parallel_from_metrics
from gpuscope.core.model import HISTOGRAM_KEYS, EndpointReading
from gpuscope.core.redact import Endpoint, split_endpoint
from gpuscope.core.text import count
from gpuscope.core.vocab import SERVER_KINDS, EndpointState, state_of

KINDS = SERVER_KINDS
MAX_BODY = 8 * 1024 * 1024  # a /metrics larger than this is refused (hostile or broken server)
MAX_MODELS = 8  # readings per endpoint per frame: the rest of the served models are counted, not read
CounterKey = Literal["gen", "prompt", "prompt_computed", "prompt_cached", "cache_hits", "cache_queries", "preemptions",
                     "spec_accepted", "spec_drafts", "spec_draft_tokens"]
HistKey = Literal["ttft", "itl", "queue", "prefill"]
GaugeKey = Literal["running", "waiting", "kv", "gen_gauge", "spec_len_gauge", "spec_rate_gauge", "cache_hit_gauge"]
COUNTER_KEYS: tuple[CounterKey, ...] = get_args(CounterKey)
HIST_KEYS: tuple[HistKey, ...] = get_args(HistKey)
GAUGE_KEYS: tuple[GaugeKey, ...] = get_args(GaugeKey)
SUPPORTED_BUCKET = 0.2  # a quantile is given as a value only when its bucket is narrower than 20 % of its lower bound
START_TIME = "process_start_time_seconds"
# config "info" gauges whose labels may carry TP/PP sizes (parsed after the kind is known too)
PARALLEL_INFO = ("vllm:parallel_config_info", "vllm:cache_config_info", "vllm:model_config_info")


class Labelled(NamedTuple):
    """A series picked by one label's value: ``Labelled("nv_trt_llm_request_metrics", "request_type", "active")``
    reads ``nv_trt_llm_request_metrics{request_type="active",…}`` only."""

    name: str
    label: str
    value: str


Series = str | Labelled  # a sample name (``_total``, ``_sum`` kept), or a name and one label's value
Names = tuple[Series, ...]  # the first of these present is read (newer names first, then older aliases)


@dataclass(frozen=True, slots=True)
class ServerSpec:
    """What to read from one kind of inference server's /metrics, by role (every role a typed field, so a
    misspelt role is an error, not a silent miss). Each role lists sample names, newest first: the first
    one present is read. Counters are summed over every label set (engines, data-parallel ranks); their
    rates come from the scrapes' deltas. Histograms (``ttft``…) name the family (``_bucket``, ``_sum`` and
    ``_count`` are added). Gauges are read as they are (``kv``: the largest over label sets)."""

    kind: str  # one of core.vocab.SERVER_KINDS
    prefixes: tuple[str, ...]  # metric-name prefixes that identify the server (detect_kind)
    metrics_path: str = "/metrics"  # where the Prometheus text is served when the URL gives no path
    # counters (CounterKey)
    gen: Names = ()  # generated tokens
    prompt: Names = ()  # prompt tokens
    prompt_computed: Names = ()  # prompt tokens prefilled
    prompt_cached: Names = ()  # prompt tokens served from the prefix cache
    cache_hits: Names = ()  # prefix-cache lookups that hit …
    cache_queries: Names = ()  # … of all lookups (tokens)
    preemptions: Names = ()
    spec_accepted: Names = ()  # speculative decoding: accepted draft tokens,
    spec_drafts: Names = ()  # drafts,
    spec_draft_tokens: Names = ()  # draft tokens proposed
    # histograms (HistKey), seconds
    ttft: Names = ()
    itl: Names = ()
    queue: Names = ()
    prefill: Names = ()
    # gauges (GaugeKey)
    running: Names = ()  # requests running
    waiting: Names = ()  # requests queued
    kv: Names = ()  # KV-cache usage: a fraction when ``kv_fraction``, else a percentage
    gen_gauge: Names = ()  # the server's own gen tok/s, read only when it exports no gen counter (0 when none runs)
    spec_len_gauge: Names = ()  # mean acceptance length, when the counters cannot give it
    spec_rate_gauge: Names = ()  # acceptance rate (0-1), when the counters cannot give it
    cache_hit_gauge: Names = ()  # prefix-cache hit rate (0-1), when the counters cannot give it
    kv_fraction: bool = False

    def series(self) -> tuple[Series, ...]:
        """Every series this spec reads, in every role."""
        return tuple(n for key in (*COUNTER_KEYS, *HIST_KEYS, *GAUGE_KEYS) for n in getattr(self, key))


# What to read per server, in SERVER_KINDS order (the servers' own metric names).
SERVER_SPECS: dict[str, ServerSpec] = {s.kind: s for s in (
    ServerSpec(
        "vllm", ("vllm:",), gen=("vllm:generation_tokens_total",), prompt=("vllm:prompt_tokens_total",),
        running=("vllm:num_requests_running",), waiting=("vllm:num_requests_waiting",),
        kv=("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"), kv_fraction=True,
        ttft=("vllm:time_to_first_token_seconds",),
        itl=("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
        spec_accepted=("vllm:spec_decode_num_accepted_tokens_total",),
        spec_drafts=("vllm:spec_decode_num_drafts_total",),
        spec_draft_tokens=("vllm:spec_decode_num_draft_tokens_total",),
        prompt_computed=(Labelled("vllm:prompt_tokens_by_source_total", "source", "local_compute"),),
        prompt_cached=(Labelled("vllm:prompt_tokens_by_source_total", "source", "local_cache_hit"),),
        cache_hits=("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
        cache_queries=("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
        preemptions=("vllm:num_preemptions_total",),
        queue=("vllm:request_queue_time_seconds",), prefill=("vllm:request_prefill_time_seconds",)),
    ServerSpec(
        "sglang", ("sglang:",), gen=("sglang:generation_tokens_total",), prompt=("sglang:prompt_tokens_total",),
        gen_gauge=("sglang:gen_throughput",),
        running=("sglang:num_running_reqs",), waiting=("sglang:num_queue_reqs",),
        kv=("sglang:token_usage",), kv_fraction=True,
        ttft=("sglang:time_to_first_token_seconds",),
        itl=("sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds"),
        spec_len_gauge=("sglang:spec_accept_length",), spec_rate_gauge=("sglang:spec_accept_rate",),
        cache_hit_gauge=("sglang:cache_hit_rate",), queue=("sglang:queue_time_seconds",)),
    ServerSpec(
        "tgi", ("tgi_",), gen=("tgi_request_generated_tokens_sum",), prompt=("tgi_request_input_length_sum",),
        running=("tgi_batch_current_size",), waiting=("tgi_queue_size",),
        itl=("tgi_request_mean_time_per_token_duration",)),
    ServerSpec(
        "llamacpp", ("llamacpp:",), gen=("llamacpp:tokens_predicted_total",), prompt=("llamacpp:prompt_tokens_total",),
        running=("llamacpp:requests_processing",), waiting=("llamacpp:requests_deferred",),
        spec_accepted=("llamacpp:spec_decode_num_accepted_tokens_total",),
        spec_drafts=("llamacpp:spec_decode_num_drafts_total",),
        spec_draft_tokens=("llamacpp:spec_decode_num_draft_tokens_total",)),
    ServerSpec(
        "trtllm", ("trtllm_",), metrics_path="/prometheus/metrics",
        gen=("trtllm_generation_tokens_total",), prompt=("trtllm_prompt_tokens_total",),
        running=("trtllm_num_requests_running",), waiting=("trtllm_num_requests_waiting",),
        kv=("trtllm_kv_cache_utilization",), kv_fraction=True,
        ttft=("trtllm_time_to_first_token_seconds",), itl=("trtllm_time_per_output_token_seconds",),
        spec_len_gauge=("trtllm_spec_decode_acceptance_length",),
        spec_accepted=("trtllm_spec_decode_num_accepted_tokens_total",),
        spec_draft_tokens=("trtllm_spec_decode_num_draft_tokens_total",)),
    ServerSpec(
        "triton", ("nv_trt_llm_", "nv_llm_", "nv_inference_"),
        gen=("nv_llm_output_token_len_sum",), prompt=("nv_llm_input_token_len_sum",),
        running=(Labelled("nv_trt_llm_request_metrics", "request_type", "active"),),
        waiting=(Labelled("nv_trt_llm_request_metrics", "request_type", "waiting"),),
        kv=(Labelled("nv_trt_llm_kv_cache_block_metrics", "kv_cache_block_type", "fraction"),), kv_fraction=True),
    ServerSpec(
        "lmdeploy", ("lmdeploy:",), gen=("lmdeploy:generation_tokens_total",), prompt=("lmdeploy:prompt_tokens_total",),
        running=("lmdeploy:num_requests_running",), waiting=("lmdeploy:num_requests_waiting",),
        kv=("lmdeploy:gpu_cache_usage_perc",), kv_fraction=True,
        ttft=("lmdeploy:time_to_first_token_seconds",), itl=("lmdeploy:time_per_output_token_seconds",),
        spec_len_gauge=("lmdeploy:spec_decode_mean_accept_length",),
        spec_accepted=("lmdeploy:spec_decode_num_accepted_tokens_total",),
        spec_drafts=("lmdeploy:spec_decode_num_drafts_total",),
        spec_draft_tokens=("lmdeploy:spec_decode_num_draft_tokens_total",)),
)}
# (prefix, kind) in SERVER_KINDS order: a name is counted for the first kind whose prefix it starts with
PREFIXES: tuple[tuple[str, str], ...] = tuple((p, s.kind) for s in SERVER_SPECS.values() for p in s.prefixes)


class MetricsError(GpuscopeError, ValueError):
    """Text that is not Prometheus exposition format."""


Samples = dict[str, list[tuple[dict[str, str], float]]]


_NAME_RE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
_LABEL_RE = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(,|\Z)')
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


REASON_MAX = 240  # characters of why an endpoint failed, at most (front ends cut it to the room they have; a
# recording keeps 300 of the reading's error, which adds "unreachable since HH:MM:SS (…)")


# Why a TLS handshake failed, by OpenSSL's verify code (ssl.SSLCertVerificationError.verify_code)
TLS_VERIFY_REASONS = {10: "TLS error: certificate expired", 9: "TLS error: certificate not yet valid",
                      18: "TLS error: self-signed certificate", 19: "TLS error: self-signed certificate in the chain",
                      20: "TLS error: certificate of an unknown issuer", 21: "TLS error: certificate of an unknown issuer",
                      62: "TLS error: certificate for another host name"}
# errno of an OSError in a failed connection → what is said
_ERRNO_REASONS = {errno.ECONNREFUSED: "connection refused", errno.ECONNRESET: "connection reset",
                  errno.ENETUNREACH: "network unreachable", errno.EHOSTUNREACH: "host unreachable",
                  errno.ETIMEDOUT: "timed out", errno.ECONNABORTED: "connection reset"}


def _chain(e: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    c: BaseException | None = e
    while c is not None and len(chain) < 8:
        chain.append(c)
        c = c.__cause__ or c.__context__
    return chain


def connect_reason(e: BaseException) -> str:
    """Why a connection failed, as a fixed phrase chosen by the types in the exception's chain (``connection
    refused``, ``host name not found``, ``TLS error: self-signed certificate``, … else ``cannot connect``).
    Never the exceptions' text: it may quote a header's value (a token) or a URL."""
    chain = _chain(e)
    for x in chain:
        if isinstance(x, ssl.SSLCertVerificationError):
            return TLS_VERIFY_REASONS.get(x.verify_code, "TLS error: certificate not trusted")
    for x in chain:
        if isinstance(x, ssl.SSLError):
            return "TLS error"
        if isinstance(x, socket.gaierror):
            return "host name not found"
        if isinstance(x, OSError) and x.errno in _ERRNO_REASONS:
            return _ERRNO_REASONS[x.errno]
        if isinstance(x, ConnectionRefusedError):
            return "connection refused"
    return "cannot connect"


def transport_reason(e: BaseException) -> str:
    """Why a request failed, as a fixed phrase chosen by the exception's type (never its text, which may quote
    a header's value or a URL): ``bad header``, ``connection lost``, ``too many redirects``, …, the phrases of
    :func:`connect_reason` for a failed connection, else ``request failed (TypeName)``. Timeouts are the
    caller's (it knows the deadline)."""
    import httpx

    for types, why in ((httpx.LocalProtocolError, "bad header"),
                       (httpx.ConnectError, None),
                       (httpx.ProxyError, "proxy error"),
                       (httpx.RemoteProtocolError, "connection closed, or the answer is not HTTP"),
                       ((httpx.ReadError, httpx.WriteError, httpx.CloseError), "connection lost"),
                       (httpx.TooManyRedirects, "too many redirects"),
                       (httpx.UnsupportedProtocol, "redirected to a URL that is not http(s)"),
                       (httpx.DecodingError, "the answer could not be decoded"),
                       (httpx.InvalidURL, "redirected to a bad URL"),
                       ((httpx.TimeoutException, asyncio.TimeoutError, TimeoutError), "timed out"),
                       ((UnicodeError, httpx.CookieConflict), "bad header")):
        if isinstance(e, types):
            return why or connect_reason(e)
    if isinstance(e, httpx.TransportError):
        return connect_reason(e) if connect_reason(e) != "cannot connect" else "connection failed"
    return f"request failed ({type(e).__name__})"


def what_is_wrong(line: str, why: str) -> str:
    """What a line that is not exposition format looks like, in words (``"looks like HTML"``), for
    :func:`bad_line`; ``why`` is what the parser found wrong when nothing more telling fits."""
    s = line.lstrip()
    if "\ufffd" in s or any(not c.isprintable() and c != "\t" for c in s):
        return "is binary data, not text"
    if s[:1] == "<":
        return "looks like HTML or XML"
    if s.startswith(("{", "[")):
        return "looks like JSON"
    return why


_HTTP_STATUS_RE = re.compile(r"\b([1-5][0-9]{2}) ([A-Z][A-Za-z]*(?: [A-Z][A-Za-z]*){0,3})\b")


def bad_line(n: int, line: str, why: str) -> MetricsError:
    """The error for line ``n`` (1-based) of a /metrics body: what is wrong, in words, never the line's text (a
    server may echo the request's Authorization header, or anything, in its answer: that text would reach the
    screen, the log and every recorded frame). Only an HTTP status a proxy's page names is quoted, as its number
    and reason: ``not Prometheus text: line 1 looks like HTML or XML (it says 502 Bad Gateway)``."""
    what = what_is_wrong(line, why)
    page = line.lstrip()[:1] == "<" and not what.startswith("is binary")  # an HTML page, as text
    status = _HTTP_STATUS_RE.search(line) if page else None
    said = f" (it says {status.group(1)} {status.group(2)})" if status else ""
    return MetricsError(f"not Prometheus text: line {n} {what}{said}")


def _labels(body: str, line: str, n: int = 1) -> dict[str, str]:
    body = body.strip()
    if "\\" not in body and body.endswith('"'):  # the common case: no escapes
        out: dict[str, str] = {}
        for part in body[:-1].split('",'):
            k, sep, v = part.partition('="')
            k = k.strip()
            if not sep or not k.isidentifier() or '"' in v:
                break
            out[k] = v
        else:
            return out
    out = {}
    pos = 0
    while pos < len(body):
        m = _LABEL_RE.match(body, pos)
        if m is None:
            raise bad_line(n, line, "has labels that are not name=\"value\" pairs")
        v = m.group(2)
        if "\\" in v:
            v = re.sub(r"\\[\\\"n]", lambda x: _UNESCAPE[x.group(0)], v)
        out[m.group(1)] = v
        pos = m.end()
    return out


def parse_metrics(text: str, wanted: Callable[[str], bool] | None = None) -> Samples:
    """Prometheus text → {sample name: [(labels, value)]}.

    A line-by-line parser of the exposition format (written for speed: prometheus_client's parser
    took 33 ms on a 2,000-line vLLM /metrics, this one ~2 ms; tests check both agree on every
    capture). Sample names keep their suffixes (``_total``, ``_bucket``, ``_sum``); values in any
    float format (``1.90511e+06``, ``NaN``, ``+Inf``); optional timestamps are ignored.
    Raises :class:`MetricsError` on a line that is not exposition format (HTML, JSON, cut lines).
    ``wanted``: keep only the samples whose name it accepts (labels of others are not parsed).
    """
    out: Samples = {}
    good_names: set[str] = set()
    for n, line in enumerate(text.splitlines(), 1):
        if not line or line[0] == "#":
            continue
        if line[0].isspace() or line[-1].isspace():
            line = line.strip()
            if not line or line[0] == "#":
                continue
        brace = line.find("{")
        if brace >= 0:
            close = line.rfind("}")
            if close < brace:
                raise bad_line(n, line, "has a '{' with no '}' after it")
            name = line[:brace].strip()
            keep = wanted is None or wanted(name)
            labels = _labels(line[brace + 1:close], line, n) if keep and close > brace + 1 else {}
            rest = line[close + 1:].split()
        else:
            parts = line.split()
            name, labels, rest = parts[0], {}, parts[1:]
            keep = wanted is None or wanted(name)
        if name not in good_names:
            if not _NAME_RE.match(name):
                raise bad_line(n, line, "does not start with a metric name")
            good_names.add(name)
        if not 1 <= len(rest) <= 2:
            raise bad_line(n, line, "has no value" if not rest else "has more than a value and a timestamp")
        try:
            value = float(rest[0])
        except ValueError:
            raise bad_line(n, line, "has a value that is not a number") from None
        if keep:
            out.setdefault(name, []).append((labels, value))
        elif name not in out:
            out[name] = []  # seen (for detection), not kept
    return out


def detect_kind(names: Iterable[str]) -> str | None:
    """The server behind a set of metric names, by prefix (vllm:, sglang:, tgi_, llamacpp:, …)."""
    votes: dict[str, int] = {}
    for n in names:
        for prefix, kind in PREFIXES:
            if n.startswith(prefix):
                votes[kind] = votes.get(kind, 0) + 1
                break
    if not votes:
        return None
    return max(votes, key=lambda k: votes[k])


def _select(samples: Samples, names: Sequence[Series]) -> list[tuple[dict[str, str], float]]:
    for n in names:
        if isinstance(n, tuple):
            name, label, value = n
            rows = [(lab, v) for lab, v in samples.get(name, []) if lab.get(label) == value]
        else:
            rows = samples.get(n, [])
        if rows:
            return rows
    return []


def total(samples: Samples, names: Sequence[Series]) -> float | None:
    """Sum of the first present metric over all its label sets (engines, ranks); None if absent."""
    rows = [v for _lab, v in _select(samples, names) if math.isfinite(v)]
    return sum(rows) if rows else None


Hist = tuple[dict[float, float], float | None, float]  # ({le: cumulative count}, sum or None, count)


def buckets(samples: Samples, names: Sequence[Series]) -> Hist | None:
    """Cumulative histogram buckets summed over label sets: ({le: count}, sum, count). The sum is None
    when the server exports no ``_sum`` (a mean cannot be known: "–", never 0 ms); the count is the
    ``+Inf`` bucket's when there is no ``_count``."""
    for n in names:
        if isinstance(n, tuple):  # no server's histogram is picked by a label
            continue
        rows = samples.get(n + "_bucket")
        if not rows:
            continue
        b: dict[float, float] = {}
        for lab, v in rows:
            try:
                le = float(lab.get("le", "nan"))
            except ValueError:
                continue
            if not math.isnan(le):
                b[le] = b.get(le, 0.0) + v
        sums = samples.get(n + "_sum")
        counts = samples.get(n + "_count")
        s = sum(v for _l, v in sums) if sums else None
        c = sum(v for _l, v in counts) if counts else b.get(math.inf, 0.0)
        return b, s, c
    return None


def counter_rate(points: list[tuple[float, float]]) -> float | None:
    """Rate of a counter over (t, value) points, Prometheus-style: a drop is a reset (restart), the
    value after it counts from zero. None with fewer than two points or no elapsed time."""
    if len(points) < 2:
        return None
    dt = points[-1][0] - points[0][0]
    if dt <= 0:
        return None
    inc = 0.0
    for (_t0, a), (_t1, b) in zip(points, points[1:]):
        inc += b - a if b >= a else b
    return inc / dt


def histogram_quantile(q: float, cumulative: dict[float, float]) -> float | None:
    """The q-quantile of cumulative buckets {le: count}, interpolated linearly as Prometheus does."""
    if not cumulative:
        return None
    les = sorted(cumulative)
    total_n = cumulative[les[-1]]
    if total_n <= 0:
        return None
    rank = q * total_n
    prev_le, prev_n = 0.0, 0.0
    for le in les:
        n = cumulative[le]
        if n >= rank:
            if math.isinf(le):
                return prev_le
            if n == prev_n:
                return le
            return prev_le + (le - prev_le) * (rank - prev_n) / (n - prev_n)
        prev_le, prev_n = le, n
    return les[-1] if not math.isinf(les[-1]) else prev_le


def quantile_bucket(q: float, cumulative: dict[float, float]) -> tuple[float, float] | None:
    """The bucket (lower, upper] that holds the q-quantile of cumulative buckets {le: count};
    upper is ``inf`` when it lies in the +Inf bucket. None with no observations."""
    if not cumulative:
        return None
    les = sorted(cumulative)
    total_n = cumulative[les[-1]]
    if total_n <= 0:
        return None
    rank = q * total_n
    prev_le = 0.0
    for le in les:
        if cumulative[le] >= rank and cumulative[le] > 0:
            return prev_le, le
        prev_le = le
    return prev_le, math.inf


def quantile_with_bounds(q: float, cumulative: dict[float, float]) -> tuple[float | None, tuple[float, ...] | None]:
    """(value, bounds) of the q-quantile: the interpolated value only when the histogram supports
    it (its bucket narrower than :data:`SUPPORTED_BUCKET` of the lower bound), else None; the bucket
    bounds always, ``(lo,)`` for "above lo" (the +Inf bucket). (None, None) with no observations."""
    b = quantile_bucket(q, cumulative)
    if b is None:
        return None, None
    lo, hi = b
    if math.isinf(hi):
        return None, (lo,)
    if lo > 0 and hi - lo <= SUPPORTED_BUCKET * lo:
        return histogram_quantile(q, cumulative), (lo, hi)
    return None, (lo, hi)


@dataclass
class _Snap:
    t: float
    counters: dict[str | None, dict[str, float]]  # model → counter key → value
    hists: dict[str | None, dict[str, Hist]]
    start: tuple[float, ...] | None = None  # process_start_time_seconds of the server's processes


def model_of(labels: dict[str, str]) -> str | None:
    return labels.get("model_name") or labels.get("model")


def split_by_model(samples: Samples, models: list[str | None]) -> dict[str | None, Samples]:
    """{model: its samples} for the models asked for, in one pass (None: every sample)."""
    if models == [None]:
        return {None: samples}
    out: dict[str | None, Samples] = {m: {} for m in models}
    for name, rows in samples.items():
        for lab, v in rows:
            d = out.get(model_of(lab))
            if d is not None:
                d.setdefault(name, []).append((lab, v))
    return out


def reset_reason(prev: _Snap | None, new: _Snap, was_down: bool) -> str | None:
    """Why the rate window must start afresh before ``new`` (None: it need not).

    After an outage (the old scrapes predate downtime), when the server's process start time
    changed (a restart), or when any counter or histogram count went down (a reset)."""
    if prev is None:
        return None
    if was_down:
        return "recovered from an outage"
    if prev.start is not None and new.start is not None and prev.start != new.start:
        return "server restarted (process start time changed)"
    if new.t < prev.t:
        return "clock stepped back"
    for m, c in new.counters.items():
        old = prev.counters.get(m, {})
        if any(k in old and v < old[k] for k, v in c.items()):
            return "counter reset (server restarted)"
    for m, h in new.hists.items():
        old_h = prev.hists.get(m, {})
        if any(k in old_h and v[2] < old_h[k][2] for k, v in h.items()):
            return "counter reset (server restarted)"
    return None


def model_rates(snaps: Sequence[_Snap], models: Iterable[str], key: str) -> dict[str, float | None]:
    """Each model's rate of counter ``key`` over a window's scrapes (None: none yet, or not in the newest
    scrape). From the first and the newest scrape when both have it: no counter goes down inside a window
    (:func:`reset_reason` starts a new one), so that is :func:`counter_rate`'s answer, and a page of 5,000
    models costs two looks per model, not one per model and scrape; from every scrape that has it otherwise."""
    if len(snaps) < 2 or snaps[-1].t <= snaps[0].t:
        return dict.fromkeys(models)
    first, last = snaps[0].counters, snaps[-1].counters
    dt = snaps[-1].t - snaps[0].t
    out: dict[str, float | None] = {}
    for m in models:
        b = last.get(m, {}).get(key)
        a = first.get(m, {}).get(key)
        if b is None:
            out[m] = None
        elif a is not None:
            out[m] = (b - a if b >= a else b) / dt
        else:  # came in during the window
            out[m] = counter_rate([(x.t, c[key]) for x in snaps if key in (c := x.counters.get(m, {}))])
    return out


def trim_window(snaps: deque[_Snap], t: float, window_s: float) -> None:
    """Keep the scrapes that span the last ``window_s`` (one older point to anchor the rate), and
    never any older than 2 × ``window_s``: a gap in the scrapes shows as no rate, not a long average."""
    while len(snaps) > 2 and snaps[1].t <= t - window_s:
        snaps.popleft()
    while snaps and snaps[0].t < t - 2 * window_s:
        snaps.popleft()


REST_KEYS: tuple[CounterKey, ...] = ("gen", "prompt")  # the counters read of the models not shown


def read_counters(samples: Samples, spec: ServerSpec, keys: Sequence[CounterKey]) -> dict[str, float]:
    """{counter key: its total over label sets} of the ``keys`` the samples have."""
    out: dict[str, float] = {}
    for key in keys:
        v = total(samples, getattr(spec, key))
        if v is not None:
            out[key] = v
    return out


def per_model(samples: Samples, names: Sequence[Series]) -> dict[str, float]:
    """{model: the first present of ``names`` summed over that model's label sets}, in one pass over the
    series (a page of 5,000 served models is not split into 5,000 pages for two numbers each)."""
    out: dict[str, float] = {}
    for lab, v in _select(samples, names):
        m = model_of(lab)
        if m and math.isfinite(v):
            out[m] = out.get(m, 0.0) + v
    return out


def summed(values: Iterable[float | None]) -> float | None:
    """The sum of the known values (None when none is known)."""
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def busiest(gen_rates: Mapping[str, float | None], running: Mapping[str, float], n: int) -> list[str]:
    """The ``n`` models of an endpoint to show, in name order: those generating the most tokens over the
    window (``gen_rates``, tok/s); a model without a rate yet ranks after those with one, by its requests
    running (absent: 0), then by name."""
    def rank(m: str) -> tuple[bool, float, float, str]:
        r = gen_rates.get(m)
        return r is None, -(r or 0.0), -running.get(m, 0.0), m

    return sorted(heapq.nsmallest(n, set(gen_rates) | set(running), key=rank))


def next_backoff(prev_s: float, interval_s: float) -> float:
    """The wait before retrying a failed endpoint: doubling from the interval, capped at
    max(5 s, 2 × interval) so a recovered server is seen within seconds."""
    cap = max(5.0, 2 * interval_s)
    return min(cap, max(interval_s, prev_s * 2 if prev_s > 0 else interval_s))


@dataclass
class EndpointTracker:
    """Keeps a window of scrapes of one endpoint and turns them into an :class:`EndpointReading`.

    The window starts afresh (see :func:`reset_reason`) after an outage, a restart or a counter
    reset, so rates are "–" (None) until two fresh scrapes exist, then right again."""

    url: str
    kind: str | None = None  # forced kind, or detected
    window_s: float = 10.0
    snaps: deque[_Snap] = field(default_factory=deque)
    garbage: int = 0
    scrapes: int = 0
    resets: int = 0
    last_error: str | None = None
    down_since: float | None = None
    model: str | None = None
    models: list[str | None] = field(default_factory=lambda: [None])
    models_dropped: int = 0
    dropped: list[str] = field(default_factory=list)  # served models beyond MAX_MODELS (the least busy)
    _last: dict[str | None, Samples] = field(default_factory=dict)
    _rest_gauges: tuple[float | None, float | None] = (None, None)  # requests running, waiting of ``dropped``
    _rest_rates: tuple[float | None, ...] = ()  # their gen and prompt tok/s (REST_KEYS), each model's own rate
    _wanted_names: set[str] | None = None
    parallel: tuple[int | None, int | None] = (None, None)  # TP/PP sizes its metrics tell (core/groups.py)

    def feed(self, t: float, text: str) -> None:
        """One successful HTTP response body. Garbage is counted, never raised."""
        parsed = self._parsed(text)
        if parsed is None:
            return
        samples, kind = parsed
        was_down = self.down_since is not None
        self.down_since = None
        spec = SERVER_SPECS[kind]
        every = sorted({m for rows in samples.values() for lab, _v in rows if (m := model_of(lab))})
        keys, counters = self._pick_models(t, samples, spec, every)
        many = len(every) > MAX_MODELS  # the models beyond those shown are read as one
        by_model = split_by_model(samples, keys)
        counters.update({m: read_counters(by_model[m], spec, COUNTER_KEYS) for m in keys})
        self.models = list(keys)
        self.models_dropped = len(self.dropped)
        self.model = every[0][:60] if len(every) == 1 else None
        starts = tuple(sorted(v for _l, v in samples.get(START_TIME, []) if math.isfinite(v)))
        self._push(_Snap(t, counters, _hists(by_model, self.models, spec), starts or None), was_down)
        self._last = by_model
        self._rest_rates = tuple(summed(model_rates(self.snaps, self.dropped, key).values())
                                 for key in REST_KEYS) if many else ()

    def _parsed(self, text: str) -> tuple[Samples, str] | None:
        """(the samples of a response body, the server's kind, now known and set); None for garbage (counted)."""
        wanted = self._wanted()
        try:
            samples = parse_metrics(text, wanted)
            if wanted is None:
                kind = self.kind or detect_kind(samples)
                if kind is not None:
                    self.kind = kind
        except MetricsError as e:
            self.garbage += 1
            self.last_error = str(e)
            return None
        tp_pp = parallel_from_metrics(samples)
        if tp_pp != (None, None):
            self.parallel = tp_pp
        kind = self.kind or detect_kind(samples)
        if kind is None:
            self.garbage += 1
            self.last_error = "no known inference-server metrics in the response"
            return None
        self.kind = kind
        self.scrapes += 1
        self.last_error = None
        return samples, kind

    def _pick_models(self, t: float, samples: Samples, spec: ServerSpec, every: list[str]
                     ) -> tuple[list[str | None], dict[str | None, dict[str, float]]]:
        """(the models to read, the counters read so far) at time ``t``: every served model (one reading when it
        serves one), or past :data:`MAX_MODELS` the busiest, the rest in :attr:`dropped` with their requests
        running and waiting summed."""
        keys: list[str | None] = list(every) if len(every) > 1 else [None]  # one model: no need to split
        self.dropped, self._rest_gauges = [], (None, None)
        if len(keys) <= MAX_MODELS:
            return keys, {}
        # every model's gen and prompt counters, in one pass over their series: the busiest are picked by them
        # and the rest's rates summed from them; the other counters of those shown only
        base = {key: per_model(samples, getattr(spec, key)) for key in REST_KEYS}
        counters: dict[str | None, dict[str, float]] = {
            m: {key: v for key in REST_KEYS if (v := base[key].get(m)) is not None} for m in every}
        running, waiting = per_model(samples, spec.running), per_model(samples, spec.waiting)
        upto_now = [*self.snaps, _Snap(t, counters, {})]
        keys = list(busiest(model_rates(upto_now, every, "gen"), running, MAX_MODELS))
        chosen = set(keys)
        self.dropped = [m for m in every if m not in chosen]
        self._rest_gauges = (sum(running[m] for m in self.dropped if m in running) if running else None,
                             sum(waiting[m] for m in self.dropped if m in waiting) if waiting else None)
        return keys, counters

    def _push(self, snap: _Snap, was_down: bool) -> None:
        """Add a scrape to the window: a fresh window after an outage, a restart or a counter reset."""
        if reset_reason(self.snaps[-1] if self.snaps else None, snap, was_down) is not None:
            self.snaps.clear()
            self.resets += 1
        self.snaps.append(snap)
        trim_window(self.snaps, snap.t, self.window_s)

    def _wanted(self) -> Callable[[str], bool] | None:
        """Once the kind is known, only its metrics are parsed in full."""
        if self.kind is None:
            return None
        if self._wanted_names is None:
            names: set[str] = {START_TIME, *PARALLEL_INFO}
            for n in SERVER_SPECS[self.kind].series():
                base = n.name if isinstance(n, Labelled) else n
                names |= {base, base + "_bucket", base + "_sum", base + "_count"}
            self._wanted_names = names
        return self._wanted_names.__contains__

    def failed(self, t: float, why: str) -> None:
        if self.down_since is None:
            self.down_since = t
        self.last_error = why

    def readings(self) -> list[EndpointReading]:
        """One reading per model the server serves (one in all when it serves one; past :data:`MAX_MODELS`,
        the busiest, then one reading for the rest, see :meth:`rest_reading`)."""
        if self.down_since is not None or not self.snaps:
            return [self.reading()]
        return [self.reading(m) for m in self.models] + ([self.rest_reading()] if self.dropped else [])

    def rest_reading(self) -> EndpointReading:
        """The served models beyond :data:`MAX_MODELS` as one reading: ``model`` None, ``models_dropped``
        their number, and their rates and request counts summed (each model's rate from its own counter,
        so a model appearing or going away is not a reset), so that a sum over an endpoint's readings is
        its true total. Latencies, KV and the rest are not read for them (None)."""
        span = self.snaps[-1].t - self.snaps[0].t if len(self.snaps) >= 2 else None
        gen, prompt = self._rest_rates or (None, None)
        return EndpointReading(
            url=self.url, kind=self.kind, model=None, up=True, gen_tokens_per_s=gen, prompt_tokens_per_s=prompt,
            requests_running=self._rest_gauges[0], requests_waiting=self._rest_gauges[1],
            rate_window_s=span, resets=self.resets, models_dropped=self.models_dropped,
            state=state_of(True, self.garbage > 0, gen, span))

    def reading(self, model: str | None = None) -> EndpointReading:
        """The reading of ``model`` (None: every model together) over the window of scrapes."""
        if self.down_since is not None:
            since = time.strftime("%H:%M:%S", time.localtime(self.down_since))
            return EndpointReading(url=self.url, kind=self.kind, model=self.model, up=False, resets=self.resets,
                                   error=f"unreachable since {since} ({self.last_error})",
                                   state=EndpointState.UNREACHABLE)
        if not self.snaps:
            err = f"{bad_responses(self.garbage)}: {self.last_error}" if self.garbage else self.last_error
            # no answer yet: whether it is up is not known (None); answers that were not metrics: it is up
            return EndpointReading(url=self.url, kind=self.kind, up=True if self.garbage else None,
                                   error=err or "waiting for the first scrape",
                                   state=EndpointState.BAD_RESPONSE if self.garbage else EndpointState.STARTING)
        spec = SERVER_SPECS[self.kind or "vllm"]
        s = self._samples_of(model)
        pts = list(self.snaps)
        span = pts[-1].t - pts[0].t if len(pts) >= 2 else None

        def rate(key: CounterKey) -> float | None:
            return _window_rate(pts, model, key)

        running = total(s, spec.running)
        gen = _gen_rate(rate("gen"), s, spec, running, counted="gen" in pts[-1].counters.get(model, {}))
        accept_len, accept_rate = _spec_decoding(rate, s, spec)
        pre = rate("preemptions")
        return EndpointReading(
            url=self.url, kind=self.kind, model=model or self.model, up=True,
            error=bad_responses(self.garbage) + (f": {self.last_error}" if self.last_error else "")
            if self.garbage else None,
            gen_tokens_per_s=gen, prompt_tokens_per_s=rate("prompt"),
            requests_running=running, requests_waiting=total(s, spec.waiting), kv_cache_pct=_kv_pct(s, spec),
            spec_accept_length=accept_len, spec_accept_rate=accept_rate,
            rate_window_s=span, prompt_computed_tokens_per_s=rate("prompt_computed"),
            prompt_cached_tokens_per_s=rate("prompt_cached"), prefix_cache_hit_pct=_prefix_hit_pct(rate, s, spec),
            preemptions_per_min=None if pre is None else pre * 60.0, resets=self.resets,
            state=state_of(True, self.garbage > 0, gen, span), **_latencies(pts, model),
            histograms=cumulative_histograms(pts[-1].hists.get(model, {})),
        )

    def _samples_of(self, model: str | None) -> Samples:
        """The last scrape's samples of ``model``; of every model together when it is not one of them."""
        if model in self._last:
            return self._last[model]
        s: Samples = {}
        for part in self._last.values():
            for name, part_rows in part.items():
                s.setdefault(name, []).extend(part_rows)
        return s


def _hists(by_model: dict[str | None, Samples], models: list[str | None], spec: ServerSpec
           ) -> dict[str | None, dict[str, Hist]]:
    """{model: {histogram key: its buckets}} of the ``models`` shown."""
    hists: dict[str | None, dict[str, Hist]] = {}
    for m in models:
        hh = hists.setdefault(m, {})
        for hkey in HIST_KEYS:
            b = buckets(by_model[m], getattr(spec, hkey))
            if b is not None:
                hh[hkey] = b
    return hists


def cumulative_histograms(hists: dict[str, Hist]) -> tuple[tuple[str, tuple[float, ...], tuple[float, ...], float | None,
                                                               float], ...]:
    """TTFT's and ITL's buckets as the server's last scrape had them (cumulative since it started), for the exporter
    (:attr:`~gpuscope.core.model.EndpointReading.histograms`): (key, finite bounds, their counts, sum, count). The
    buckets are already parsed for the window's quantiles, so this costs a sort of ~20 bounds per histogram."""
    out = []
    for key in HISTOGRAM_KEYS:
        h = hists.get(key)
        if h is None:
            continue
        cum, total, count = h
        les = sorted(le for le in cum if math.isfinite(le))
        out.append((key, tuple(les), tuple(cum[le] for le in les), total, count))
    return tuple(out)


def _window_rate(pts: list[_Snap], model: str | None, key: CounterKey) -> float | None:
    """The rate of ``model``'s counter ``key`` over the scrapes ``pts`` (per second)."""
    return counter_rate([(x.t, x.counters[model][key]) for x in pts if key in x.counters.get(model, {})])


def _gen_rate(gen: float | None, s: Samples, spec: ServerSpec, running: float | None, counted: bool) -> float | None:
    """Generated tok/s: the counter's rate ``gen``, else (no gen counter ``counted`` in the last scrape) the
    server's own gauge where it has one, 0 while no request runs (SGLang's gauge keeps its last value when idle)."""
    if spec.gen_gauge and not counted:  # the counter's rate wins
        g = total(s, spec.gen_gauge)
        if g is not None:
            return 0.0 if running == 0 else g
    return gen


def _kv_pct(s: Samples, spec: ServerSpec) -> float | None:
    """KV-cache usage (%): the largest over label sets."""
    rows = [v for _l, v in _select(s, spec.kv) if math.isfinite(v)]
    if not rows:
        return None
    return max(rows) * (100.0 if spec.kv_fraction else 1.0)


def _spec_decoding(rate: Callable[[CounterKey], float | None], s: Samples, spec: ServerSpec
                   ) -> tuple[float | None, float | None]:
    """(mean acceptance length, acceptance rate) of speculative decoding: from the counters' rates, else the
    server's gauges."""
    acc, drafts, dtok = rate("spec_accepted"), rate("spec_drafts"), rate("spec_draft_tokens")
    accept_len = 1 + acc / drafts if acc is not None and drafts else None
    accept_rate = acc / dtok if acc is not None and dtok else None
    if accept_len is None and spec.spec_len_gauge:
        accept_len = total(s, spec.spec_len_gauge)
    if accept_rate is None and spec.spec_rate_gauge:
        accept_rate = total(s, spec.spec_rate_gauge)
    return accept_len, accept_rate


def _prefix_hit_pct(rate: Callable[[CounterKey], float | None], s: Samples, spec: ServerSpec) -> float | None:
    """Prefix-cache hits (% of queries): from the counters' rates, else the server's gauge."""
    hits, queries = rate("cache_hits"), rate("cache_queries")
    if hits is not None and queries:
        return 100.0 * hits / queries
    if spec.cache_hit_gauge:
        g = total(s, spec.cache_hit_gauge)
        return 100.0 * g if g is not None else None
    return None


def _latencies(pts: list[_Snap], model: str | None) -> dict[str, Any]:
    """The histograms' means over the window (``ttft_mean_s`` …), and TTFT's and ITL's p50 and p95 with their
    bucket bounds; None where the window has no observation."""
    lat: dict[str, Any] = {}
    for key in HIST_KEYS:
        first = pts[0].hists.get(model, {}).get(key) if len(pts) >= 2 else None
        last = pts[-1].hists.get(model, {}).get(key)
        mean, qs = _hist_window(first, last)
        lat[f"{key}_mean_s"] = mean
        if key in ("ttft", "itl"):
            for q in ("p50", "p95"):
                lat[f"{key}_{q}_s"], lat[f"{key}_{q}_bounds_s"] = qs.get(q, (None, None))
    return lat


def _hist_window(first: Hist | None, last: Hist | None
                 ) -> tuple[float | None, dict[str, tuple[float | None, tuple[float, ...] | None]]]:
    """(mean, {"p50"/"p95": (quantile, its bounds)}) of the observations between two scrapes of a histogram;
    (None, {}) without any (no mean without ``_sum``: never 0 ms)."""
    if first is None or last is None or last[2] < first[2]:
        return None, {}
    dn = last[2] - first[2]
    if not dn > 0:
        return None, {}
    mean = (last[1] - first[1]) / dn if last[1] is not None and first[1] is not None else None
    delta = {le: last[0].get(le, 0.0) - first[0].get(le, 0.0) for le in last[0]}
    return mean, {"p50": quantile_with_bounds(0.5, delta), "p95": quantile_with_bounds(0.95, delta)}


def metrics_url(url: str, kind: str | None) -> str:
    """The URL to poll: as given when it has a path, else ``/metrics`` (trtllm-serve: /prometheus/metrics);
    the query is kept either way (``http://h:8000?token=t`` → ``http://h:8000/metrics?token=t``)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url if "://" in url else "http://" + url)
    base = f"{parts.scheme}://{parts.netloc}"
    query = f"?{parts.query}" if parts.query else ""
    if parts.path not in ("", "/"):
        return base + parts.path + query
    spec = SERVER_SPECS.get(kind) if kind is not None else None
    return base + (spec.metrics_path if spec is not None else "/metrics") + query


def probe_base(metrics: str) -> tuple[str, str]:
    """(base, query) of the probe's requests for a :func:`metrics_url`: its path less the last part (and
    less ``/prometheus``), and its query (``?token=t``, sent with the probe's requests too, or "")."""
    path, sep, query = metrics.partition("?")
    return path.rsplit("/", 1)[0].replace("/prometheus", ""), sep + query


def httpx_auth(auth: tuple[str, str] | None) -> Any:
    """httpx's Basic auth for an endpoint's ``(user, password)``, or None (no auth)."""
    if auth is None:
        return None
    import httpx

    return httpx.BasicAuth(*auth)


class EndpointPoller:
    """Polls every endpoint every ``interval_s`` on a background thread (asyncio + httpx).

    Built so that no endpoint can hurt the GPU sampling that calls :meth:`latest`: the body is read
    streaming and dropped as soon as it passes 8 MB; the whole response must arrive within
    ``timeout_s`` (a server that drips bytes is cut off); parsing happens on this thread, outside the
    lock; :meth:`latest` only returns the readings made after the last scrape (at most
    :data:`MAX_MODELS` per endpoint). After a failure the retry waits double the interval, up to
    max(5 s, 2 × interval). TLS verification stays on unless ``verify=False``.
    """

    def __init__(self, urls: Sequence[str | Endpoint], *, kind: str | None = None, interval_s: float = 1.0,
                 timeout_s: float = 2.0, window_s: float = 10.0, headers: dict[str, str] | None = None,
                 verify: bool = True, probe_every_s: float | None = None, probe_model: str | None = None,
                 max_body: int = MAX_BODY):
        # each URL split (core/redact.py): readings carry only the public URL; the credentials go in requests
        targets = [u if isinstance(u, Endpoint) else split_endpoint(u) for u in urls]
        self.trackers = [EndpointTracker(url=t.url, kind=kind, window_s=window_s) for t in targets]
        self.urls = [metrics_url(t.request_url, kind) for t in targets]
        self._auth = [httpx_auth(t.auth) for t in targets]
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.max_body = max_body
        self.headers = headers or {}
        self.verify = verify
        self.probe_every_s = probe_every_s
        self.probe_model = probe_model
        self.probes: list[ProbeResult | None] = [None] * len(urls)
        self._bases = [probe_base(u) for u in self.urls]
        self._lock = threading.Lock()
        self._ready: list[tuple[EndpointReading, ...]] = [tuple(t.readings()) for t in self.trackers]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gpuscope-endpoints", daemon=True)

    def start(self) -> EndpointPoller:
        self._thread.start()
        return self

    def parallel(self, url: str) -> tuple[int | None, int | None]:
        """(TP, PP) sizes endpoint ``url`` exports in its metrics, where it does ((None, None) otherwise)."""
        for t in self.trackers:
            if t.url == url:
                return t.parallel
        return None, None

    def latest(self) -> tuple[EndpointReading, ...]:
        """The newest reading of every endpoint (made on the polling thread: this never parses and
        never waits on a network). With --probe, the probe's TTFT and single-stream decode tok/s are
        added in their own fields, and fill gen tok/s only where the server has no metrics (named in
        ``probe_fields``)."""
        with self._lock:
            ready = list(self._ready)
            probes = list(self.probes)
        return tuple(self._with_probe(r, pr) for rs, pr in zip(ready, probes) for r in rs)

    @staticmethod
    def _with_probe(r: EndpointReading, pr: ProbeResult | None) -> EndpointReading:
        """Add the probe's measurement; fill gen tok/s from it only when the metrics are missing."""
        if pr is not None and pr.error is None:
            missing_metrics = not r.up or r.kind is None
            filled = ("gen_tokens_per_s",) if missing_metrics and pr.decode_tokens_per_s is not None else ()
            gen = r.gen_tokens_per_s if not missing_metrics else pr.decode_tokens_per_s
            # no metrics: the endpoint answers the probe, so it is up (or starting, with no decode rate yet)
            state = state_of(True, False, gen, r.rate_window_s) if missing_metrics else r.state
            return replace(r, up=True, probe=True, kind=r.kind or "probe", error=None if missing_metrics else r.error,
                           probe_ttft_s=pr.ttft_s, probe_decode_tokens_per_s=pr.decode_tokens_per_s,
                           probe_fields=filled, gen_tokens_per_s=gen, state=state)
        if pr is not None:  # probe_error says why the probe failed (a fixed phrase); the state stays the server's
            return replace(r, probe_error=pr.error, error=pr.error if r.kind is None else r.error)
        return r

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self.timeout_s + 1)

    def _run(self) -> None:
        asyncio.run(self._main())

    def _publish(self, k: int) -> None:
        rs = tuple(self.trackers[k].readings())
        with self._lock:
            self._ready[k] = rs

    async def _main(self) -> None:
        import httpx

        try:
            client = httpx.AsyncClient(timeout=self.timeout_s, headers=self.headers, verify=self.verify,
                                       follow_redirects=True)
        except (UnicodeError, ValueError, TypeError) as e:  # a header httpx cannot encode: said, never quoted
            for k, tr in enumerate(self.trackers):
                tr.failed(time.time(), transport_reason(e))
                self._publish(k)
            return
        async with client:
            backoff = [0.0] * len(self.urls)
            next_at = [0.0] * len(self.urls)
            if self.probe_every_s:
                asyncio.get_running_loop().create_task(self._probe_loop(client))
            while not self._stop.is_set():
                now = time.monotonic()
                due = [k for k in range(len(self.urls)) if next_at[k] <= now]
                results = await asyncio.gather(*(self._poll(client, k) for k in due))
                for k, ok in zip(due, results):
                    backoff[k] = 0.0 if ok else next_backoff(backoff[k], self.interval_s)
                    next_at[k] = now + (self.interval_s if ok else backoff[k])
                wait = max(0.05, min(next_at) - time.monotonic()) if next_at else self.interval_s
                await asyncio.get_running_loop().run_in_executor(None, self._stop.wait, min(wait, 1.0))

    async def _probe_loop(self, client: Any) -> None:
        while not self._stop.is_set():
            for k, (base, query) in enumerate(self._bases):
                res = await probe_chat(client, base, self.probe_model, auth=self._auth[k], query=query,
                                       timeout_s=self.timeout_s)
                with self._lock:
                    self.probes[k] = res
            await asyncio.sleep(self.probe_every_s or 10.0)

    async def _fetch(self, client: Any, url: str, auth: Any = None) -> tuple[int, bytes | None, float]:
        """(status, body, when) with the size cap enforced as the bytes arrive: body None past ``max_body``.

        ``when`` is the wall time the response headers arrived: the server had read its counters just
        before, so rates are not skewed by connection set-up (the first scrape's TCP connect made a 4 s
        window read 3 % low under load when the request's start time was used)."""
        async with client.stream("GET", url, auth=auth) as r:
            when = time.time()
            buf = bytearray()
            async for chunk in r.aiter_bytes():
                buf += chunk
                if len(buf) > self.max_body or (r.status_code != 200 and len(buf) > 4096):
                    if r.status_code != 200:
                        break
                    return r.status_code, None, when
            return r.status_code, bytes(buf), when

    async def _poll(self, client: Any, k: int) -> bool:
        import httpx

        tr = self.trackers[k]
        t = time.time()
        why: str
        try:
            status, raw, t = await asyncio.wait_for(self._fetch(client, self.urls[k], self._auth[k]), self.timeout_s)
            if raw is None:
                tr.garbage += 1
                tr.last_error = f"response larger than {self.max_body / 2**20:g} MB refused"
                self._publish(k)
                return False  # retried with backoff, as an unreachable server is
            body = raw.decode("utf-8", "replace")  # not r.text: charset sniffing of 150 KB costs ms
            if status != 200:
                hint = " (llama.cpp: start it with --metrics)" if "--metrics" in body[:500] else ""
                tr.failed(t, f"HTTP {status}{hint}")
                self._publish(k)
                return False
            garbage = tr.garbage
            tr.feed(t, body)
            self._publish(k)
            return tr.garbage == garbage  # an answer that is not metrics is retried with backoff
        except (httpx.TimeoutException, asyncio.TimeoutError):  # the deadline covers the whole response
            why = f"no answer in {self.timeout_s:g} s"
        except Exception as e:  # noqa: BLE001 - any failure is this endpoint's, said by type: never its text
            why = transport_reason(e)
        tr.failed(t, why)
        self._publish(k)
        return False


# ------------------------------------------------------------------ active probe (--probe)
@dataclass
class ProbeResult:
    """One streamed chat completion, measured the way vLLM's benchmark does."""

    ttft_s: float | None = None
    decode_tokens_per_s: float | None = None
    completion_tokens: int | None = None
    error: str | None = None


def sse_events(lines: Iterable[str]) -> Iterable[dict[str, Any]]:
    """JSON objects from Server-Sent-Events lines: ``data:`` lines, ``:`` pings skipped, up to [DONE]."""
    import json

    for line in lines:
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            return
        try:
            obj = json.loads(data)
        except ValueError:
            continue
        if isinstance(obj, dict):
            yield obj


def measure_stream(events: Iterable[tuple[float, dict[str, Any]]], t_start: float) -> ProbeResult:
    """TTFT = first chunk that carries content; decode tok/s = (completion_tokens − 1) / (t_last − t_first).

    ``completion_tokens`` comes from ``usage`` (include_usage) or llama.cpp's ``timings.predicted_n``;
    chunks are never counted as tokens (one chunk may carry several)."""
    t_first = t_last = None
    tokens = None
    for t, ev in events:
        for ch in ev.get("choices") or []:
            delta = ch.get("delta") or {}
            if delta.get("content") or delta.get("reasoning_content"):
                if t_first is None:
                    t_first = t
                t_last = t
        usage = ev.get("usage")
        if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
            tokens = usage["completion_tokens"]
        timings = ev.get("timings")
        if tokens is None and isinstance(timings, dict) and isinstance(timings.get("predicted_n"), int):
            tokens = timings["predicted_n"]
    if t_first is None:
        return ProbeResult(error="the stream carried no tokens")
    rate = (tokens - 1) / (t_last - t_first) if tokens and tokens > 1 and t_last and t_last > t_first else None
    return ProbeResult(ttft_s=t_first - t_start, decode_tokens_per_s=rate, completion_tokens=tokens)


# what a refused probe may mean, by HTTP status (vLLM started with --api-key answers 401)
PROBE_STATUS_HINTS = {401: " (needs a token?)", 403: " (token refused?)", 404: " (no such path or model?)"}


def probe_status_error(status: int) -> str:
    """The probe's fixed phrase for an HTTP status other than 200: ``probe: HTTP 401 (needs a token?)``."""
    return f"probe: HTTP {status}{PROBE_STATUS_HINTS.get(status, '')}"


async def probe_chat(client: Any, base_url: str, model: str | None = None, max_tokens: int = 64,
                     auth: Any = None, query: str = "", timeout_s: float | None = None) -> ProbeResult:
    """POST a streamed OpenAI-compatible chat completion with ``include_usage`` and time it (``auth``: the
    endpoint's Basic auth, :func:`httpx_auth`; ``query``: the endpoint URL's ``?…``, sent with each request).
    A failure is a fixed phrase starting ``probe:`` in ``error`` (:func:`probe_status_error`, the phrases of
    :func:`transport_reason`), never an exception's text."""
    import httpx

    try:
        if model is None:
            r = await client.get(base_url + "/v1/models" + query, auth=auth)
            data = r.json().get("data") if r.status_code == 200 else None
            model = data[0]["id"] if data else "default"
        body = {"model": model, "stream": True, "stream_options": {"include_usage": True}, "max_tokens": max_tokens,
                "temperature": 0, "messages": [{"role": "user", "content": "Count from 1 to 100, one number per line."}]}
        t0 = time.perf_counter()
        got: list[tuple[float, dict[str, Any]]] = []
        async with client.stream("POST", base_url + "/v1/chat/completions" + query, json=body, auth=auth) as resp:
            if resp.status_code != 200:
                return ProbeResult(error=probe_status_error(resp.status_code))
            async for line in resp.aiter_lines():
                for ev in sse_events([line]):
                    got.append((time.perf_counter(), ev))
        res = measure_stream(got, t0)
        return res if res.error is None else replace(res, error=f"probe: {res.error}")
    except (httpx.TimeoutException, asyncio.TimeoutError):
        return ProbeResult(error="probe: timed out" if timeout_s is None else f"probe: no answer in {timeout_s:g} s")
    except httpx.HTTPError as e:
        return ProbeResult(error=f"probe: {transport_reason(e)}")
    except (ValueError, KeyError, IndexError, TypeError):  # /v1/models' JSON not as OpenAI's
        return ProbeResult(error="probe: bad answer from /v1/models")
    except Exception as e:  # noqa: BLE001 - said by type, never by text
        return ProbeResult(error=f"probe: {transport_reason(e)}")


def bad_responses(n: int) -> str:
    """``1 bad response``, ``3 bad responses``: how many answers were not metrics (core/vocab reads it)."""
    return count(n, "bad response")
