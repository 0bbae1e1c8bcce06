"""The inference panel: tok/s of the inference server(s) on the GPU graphs' time axis.

Every number says what it is: rates name their window ("10 s rate"), latencies are exact means from
the histograms' sums and counts, a quantile appears only as the bucket it lies in when the buckets
are too coarse ("p50 10–25 ms"), the probe's own measurement is labelled "probe", and unknown is "–"
(never 0). Lines fit 80 columns without cutting a number.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

from rich.cells import cell_len
from rich.text import Text
from textual.widgets import Static

from gpuscope.core.group_paths import group_line
from gpuscope.core.group_traffic import group_traffic, traffic_line
from gpuscope.core.history import carry_span, resample
from gpuscope.core.link_cost import evidence_text
from gpuscope.core.link_verdict import link_verdicts, verdict_id, verdict_text
from gpuscope.core.model import EndpointReading, Frame, Inventory, ServingGroup
from gpuscope.core.redact import public_url
from gpuscope.core.text import clean, count
from gpuscope.core.units import NONE
from gpuscope.core.view import ViewState
from gpuscope.core.vocab import EndpointState
from gpuscope.widgets.fit import fit_words, middle_cut
from gpuscope.widgets.style import ACCENT, BAD, DIM, WARN, fmt_num, set_content, sparkline

INDENT = " " * 9
UNREACHABLE, BAD_RESPONSE = EndpointState.UNREACHABLE, EndpointState.BAD_RESPONSE


def fmt_ms(s: float | None) -> str:
    """Seconds as milliseconds, 3 significant figures-ish: 0.0137 → 13.7 ms, 1.823 → 1823 ms; None → –."""
    if s is None:
        return NONE
    ms = s * 1000
    return f"{ms:.1f} ms" if ms < 100 else f"{ms:,.0f} ms"


def fmt_bounds(q: str, value_s: float | None, bounds: tuple[float, ...] | None) -> str:
    """A quantile: its value when the histogram supports one, else its bucket ("p50 10–25 ms", "p95 > 80 s")."""
    if value_s is not None:
        return f"{q} {fmt_ms(value_s)}"
    if not bounds:
        return ""
    if len(bounds) == 1:
        return f"{q} > {_short(bounds[0])}"
    lo, hi = bounds[0], bounds[-1]
    if lo == 0 or _unit(lo) == _unit(hi):
        return f"{q} {_short(lo, unit=False)}–{_short(hi)}"
    return f"{q} {_short(lo)}–{_short(hi)}"


def _unit(s: float) -> str:
    return "s" if s >= 1 else "ms"


def _short(s: float, unit: bool = True) -> str:
    if s >= 1:
        v = f"{s:g}"
        return v + (" s" if unit else "")
    v = f"{s * 1000:g}"
    return v + (" ms" if unit else "")


def header_line(eps: Sequence[EndpointReading]) -> tuple[str, str]:
    """(total gen tok/s, what it is): "– tok/s" while no endpoint has a rate, with the reason."""
    rates = [e.gen_tokens_per_s for e in eps if e.state is not UNREACHABLE and e.gen_tokens_per_s is not None]
    if not rates:
        if eps and all(e.state is UNREACHABLE for e in eps):
            return "– tok/s", "  unreachable"
        if eps and all(e.state in (UNREACHABLE, BAD_RESPONSE) for e in eps):  # waiting won't help
            return "– tok/s", "  no endpoint answers with metrics"
        return "– tok/s", "  waiting for two scrapes"
    windows = [e.rate_window_s for e in eps
               if e.state is not UNREACHABLE and e.gen_tokens_per_s is not None and e.rate_window_s]
    probe = any("gen_tokens_per_s" in e.probe_fields for e in eps)
    what = f"  {max(windows):.0f} s rate" if windows else ""
    return f"{sum(rates):,.0f} tok/s", what + ("  (probe)" if probe else "")


def prompt_split(e: EndpointReading) -> str:
    """Where the prompt tokens came from, the parts the server reports (``prompt computed 120 cached 380
    tok/s``; ``of which`` when the total is on the head line); "" when it reports neither."""
    parts = [f"{name} {fmt_num(x)}" for name, x in (("computed", e.prompt_computed_tokens_per_s),
                                                     ("cached", e.prompt_cached_tokens_per_s)) if x is not None]
    if not parts:
        return ""
    return ("prompt: " if e.prompt_tokens_per_s is not None else "prompt ") + " ".join(parts) + " tok/s"


def prompt_head(e: EndpointReading) -> str:
    """The prompt rate on the head line: its number when known; nothing when only its parts are known
    (the next line shows them: never ``prompt –`` above ``prompt computed 0``); ``–`` when neither is."""
    if e.prompt_tokens_per_s is not None:
        return f" prompt {fmt_num(e.prompt_tokens_per_s)}"
    return "" if prompt_split(e) else " prompt –"


NAME_W = 40  # the endpoint and model column of an endpoint's first line, at most (80 columns: 36)
NAME_MIN = 16
RATES_W = 24  # what the name column leaves for the rates (``gen 1,234 prompt 567 tok/s``) on a narrow panel


def name_width(width: int) -> int:
    """The name column of the endpoints' first lines in a panel ``width`` cells wide: the same for every
    endpoint (their rates line up), between :data:`NAME_MIN` and :data:`NAME_W`."""
    return max(NAME_MIN, min(NAME_W, width - 9 - 1 - RATES_W))


def endpoint_where(url: str) -> str:
    """Which server a reading is from, as ``host:port`` (``http://user:pw@gpu-1:8000/metrics?token=t`` →
    ``gpu-1:8000``; the scheme's port when the URL names none; an IPv6 host in brackets): never its user info,
    path or query, and sanitised for the screen. A URL that cannot be split is shown redacted and cleaned."""
    public = clean(public_url(url), 200)
    try:
        parts = urlsplit(public if "://" in public else "//" + public)
        host, port = parts.hostname, parts.port
    except ValueError:  # a port that is not a number
        return clean(public, 40)
    if not host:
        return clean(public, 40)
    host = f"[{host}]" if ":" in host else host
    port = port or {"http": 80, "https": 443}.get(parts.scheme)
    return clean(f"{host}:{port}" if port else host, 60)


def endpoint_name(e: EndpointReading, width: int) -> Text:
    """An endpoint's name on its first line, in ``width`` cells: ``host:port`` (dim), then its model (cut with
    ``…`` first: several servers on one host differ by their port, which stays)."""
    where = endpoint_where(e.url)
    out = Text(middle_cut(where, width) if cell_len(where) > width else where, style=DIM)
    room = width - out.cell_len - 1
    if e.model and room >= 4:
        out.append(" " + clean(e.model, room))
    return out


def endpoint_lines(e: EndpointReading, width: int = 76) -> list[Text]:
    """The lines of one endpoint/model in a panel ``width`` cells wide (76: 80 columns less border and
    padding): the numbers fit 76 for any realistic reading; why an endpoint is down or gives no rate is
    cut to the room left on its line (at least 10 characters), not to a fixed length."""
    if e.models_dropped and e.model is None:  # the models beyond the per-endpoint cap, together
        return _together_lines(e)
    name_w = name_width(width)
    head = Text(f"{clean(e.kind or '?', 8):<8} ")
    head.append_text(endpoint_name(e, name_w))
    if e.state is UNREACHABLE:  # why, in all the room its line has
        head.append(" ")
        head.append(clean(e.error or "unreachable", max(10, width - len(head))), style=BAD)
        return [fit_words(head, max(width, len(head)))]
    head.append(" " * (name_w - head.cell_len + 9) + " ")  # the rates line up under each other
    gen_src = " (probe)" if "gen_tokens_per_s" in e.probe_fields else ""
    head.append(f"gen {fmt_num(e.gen_tokens_per_s)}{gen_src}{prompt_head(e)} tok/s")
    lines = [head, _state_line(e, width)]
    work = _work_text(e)
    if work:
        lines.append(Text(INDENT + work))
    lines += [_ttft_line(e), _itl_line(e)]
    if e.probe_ttft_s is not None or e.probe_decode_tokens_per_s is not None:
        lines.append(Text(INDENT + f"probe (one request): TTFT {fmt_ms(e.probe_ttft_s)}, decode "
                          f"{fmt_num(e.probe_decode_tokens_per_s)} tok/s", style=DIM))
    if e.probe_error and e.probe_error != e.error:  # the head line says it already where no metrics are read
        lines.append(Text(INDENT + clean(e.probe_error, max(10, width - len(INDENT))), style=BAD))
    return [fit_words(t, width) for t in lines]  # one row each: whole words, never a cut number


def _together_lines(e: EndpointReading) -> list[Text]:
    """The reading of an endpoint's models beyond the per-endpoint cap, read together: their rates and queue."""
    rest = Text(f"{clean(e.kind or '?', 8):<8} {'+' + count(e.models_dropped, 'model'):<28} ", style=DIM)
    rest.append(f"gen {fmt_num(e.gen_tokens_per_s)} prompt {fmt_num(e.prompt_tokens_per_s)} tok/s", style=DIM)
    return [rest, Text(INDENT + f"run {fmt_num(e.requests_running)} wait {fmt_num(e.requests_waiting)}  "
                       "(together: not read one by one)", style=DIM)]


def _state_line(e: EndpointReading, width: int) -> Text:
    """Requests running and waiting, KV cache use, speculative acceptance; the rates' window, or why there
    is no rate (every answer refused or unreadable, or too early)."""
    state = Text(INDENT + f"run {fmt_num(e.requests_running)} wait {fmt_num(e.requests_waiting)}  "
                 f"KV {fmt_num(e.kv_cache_pct, '%', 1 if e.kv_cache_pct and 99 < e.kv_cache_pct < 100 else 0)}")
    if e.spec_accept_length is not None:
        state.append(f"  accept {e.spec_accept_length:.2f}")
    if e.rate_window_s:
        state.append(f"  rates over {e.rate_window_s:.0f} s", style=DIM)
    elif e.gen_tokens_per_s is None:
        bad = e.state is BAD_RESPONSE
        room = max(10, width - len(state) - 2)
        why = clean(e.error or "bad response", room) if bad else "rates: waiting for two scrapes"
        state.append("  " + why, style=BAD if bad else DIM)
    return state


def _work_text(e: EndpointReading) -> str:
    """The prompt's split, prefix-cache hits and preemptions, those the server reports ("" when none)."""
    work = []
    parts = prompt_split(e)
    if parts:
        work.append(parts)
    if e.prefix_cache_hit_pct is not None:
        work.append(f"hit {e.prefix_cache_hit_pct:.0f}%")
    if e.preemptions_per_min is not None:
        work.append(f"preempt {e.preemptions_per_min:.0f}/min")
    return "  ".join(work)


def _ttft_line(e: EndpointReading) -> Text:
    """The mean time to first token, with its queue and prefill parts where the server reports them."""
    ttft = Text(INDENT + f"TTFT mean {fmt_ms(e.ttft_mean_s)}")
    split = [f"queue {fmt_ms(e.queue_mean_s)}" if e.queue_mean_s is not None else "",
             f"prefill {fmt_ms(e.prefill_mean_s)}" if e.prefill_mean_s is not None else ""]
    if any(split):
        ttft.append(" (" + ", ".join(x for x in split if x) + ")")
    return ttft


def _itl_line(e: EndpointReading) -> Text:
    """The mean inter-token latency and its median (or the bucket the median lies in)."""
    itl = Text(INDENT + f"ITL mean {fmt_ms(e.itl_mean_s)}")
    q = fmt_bounds("p50", e.itl_p50_s, e.itl_p50_bounds_s)
    if q:
        itl.append(f" ({q})", style=DIM)
    return itl


def unsummed_models(eps: Sequence[EndpointReading]) -> list[tuple[str, int]]:
    """(kind, how many) of the models not shown for each endpoint whose readings carry the count on every
    model's reading but have no reading of their own (recordings made before there was one): said once per
    endpoint, and the header's total leaves them out."""
    rest = {e.url for e in eps if e.models_dropped and e.model is None}
    out: dict[str, tuple[str, int]] = {}
    for e in eps:
        if e.models_dropped and e.url not in rest:
            out.setdefault(e.url, (e.kind or "?", e.models_dropped))
    return list(out.values())


def group_lines(g: ServingGroup, inv: Inventory, frame: Frame | None, width: int = 76,
                findings: Sequence[Any] = ()) -> list[Text]:
    """A serving group's lines, aligned with the endpoint lines above: ``group    vLLM :8000 qwen3-27b · TP=2
    on GPU0+GPU1 · SYS, Gen1×16`` (the model left out when the line would not fit: the endpoint's line names
    it; SIMULATED for a scenario's server), then its traffic both ways over its GPUs and, for an endpoint's
    group, interconnect bytes per generated token (its tok/s is on the endpoint's line), then what the link
    costs each token (the link-cost finding's figures, in ``findings``); each cut to ``width``."""
    sim = "SIMULATED " if g.simulated else ""
    head = f"{'group':<8} {sim}{group_line(g, inv, frame)}"
    if len(head) > width and g.model:
        head = f"{'group':<8} {sim}{group_line(g, inv, frame, model=False)}"
    lines = [Text(clean(head, width), style=ACCENT if g.gpus else DIM)]
    if g.gpus and frame is not None:
        t = group_traffic(g, frame, inv)
        lines.append(Text(clean(INDENT + traffic_line(t, tokens=False, per_token=bool(g.endpoint)), width), style=DIM))
    cost = next((evidence_text(f.evidence) for f in findings if f.rule == "link_cost"
                 and f.evidence.get("endpoint") == g.endpoint and g.endpoint), "")
    if cost:
        lines.append(Text(clean(INDENT + cost, width), style=DIM))
    verdict = verdict_line(g, inv, frame, findings)
    if verdict is not None:
        lines.append(Text(clean(INDENT + verdict[0], width), style=verdict[1]))
    return lines


def verdict_line(g: ServingGroup, inv: Inventory, frame: Frame | None, findings: Sequence[Any]) -> tuple[str, str] | None:
    """The group's link verdict (core/link_verdict.py) and its style: the raised ``link_verdict`` finding's words
    (degraded or at risk, held like every finding), else this frame's verdict (healthy, or unknown); None for a
    group with no GPUs here. As the exporter's ``gpuscope_serving_group_link_verdict`` reads it."""
    if frame is None or not g.gpus or not g.local:
        return None
    raised = next((f for f in findings if f.rule == "link_verdict" and f.id == verdict_id(g)), None)
    if raised is not None:
        return raised.message.partition(": ")[2] or raised.message, BAD if raised.severity == "critical" else WARN
    v = next(iter(link_verdicts(inv, (replace(frame, groups=(g,)),))), None)  # this group's alone
    return (verdict_text(v, advice=False), DIM) if v is not None else None


class InferencePanel(Static):
    DEFAULT_CSS = "InferencePanel { height: auto; border: round $primary-darken-2; padding: 0 1; }"

    def __init__(self, **kw: Any):
        super().__init__(**kw)
        self.border_title = "Inference"
        self.budget: int | None = None  # lines the layout gave it (None: as many as it wants)
        self.wanted = 0  # lines it wanted at the last show(): the layout compares it with its plan

    def lines_wanted(self, v: ViewState, width: int) -> int:
        """Lines the panel would show for ``v`` at ``width`` (the layout's question, before it is drawn)."""
        return 1 + len(body_lines(v, max(40, width)))

    def show(self, v: ViewState) -> None:
        eps = v.frame.endpoints if v.frame else ()
        width = max(40, self.size.width or 76)  # the content area (inside border and padding)
        if not eps:
            groups = v.frame.groups if v.frame else ()
            others = [ln for g in groups if not g.endpoint for ln in group_lines(g, v.inventory, v.frame, width)]
            set_content(self, Text("\n").join([Text("no inference endpoint: add one with --endpoint URL (vLLM, SGLang, "
                                                    "TGI, llama.cpp, TRT-LLM, LMDeploy, Ollama)", style=DIM), *others]))
            return
        prefix = 36  # the graph starts where the GPU panels' graphs start: one time axis
        lines: list[tuple[int, Text]] = []
        num, what = header_line(eps)
        t = Text()
        t.append(num, style=f"bold {ACCENT}")
        t.append(what, style=DIM)
        t.append(f"  graph {int(v.window_s // 60)} min", style=DIM)
        t.pad_right(prefix - len(t))
        cols = max(0, width - len(t))
        # cells pinned to the clock as the GPU panels' graphs are (History.cells): one time axis; a window
        # further back for the carry into the first cells
        times, vals = v.history.window("tok_s", None, carry_span(v.window_s, cols), v.now or None)
        t.append(sparkline(resample(times, vals, v.now or 0, v.window_s, cols, pinned=True)), style=ACCENT)
        lines.append((0, t))
        lines.extend(body_lines(v, width))
        self.wanted = len(lines)
        # one row each, whatever a server sends: a wrapped line would take a row the layout gave the GPUs
        set_content(self, Text("\n").join(fit_words(t, width) for t in fit_budget(lines, self.budget)))


def _ranked(lines: list[Text], first: int = 1) -> list[tuple[int, Text]]:
    """A block's first line ranks ``first`` (an endpoint's model and rates 1, a group's GPUs and path 2), its
    details 3: on a short terminal every server shows before any group, every group before any detail."""
    return [(first if k == 0 else 3, ln) for k, ln in enumerate(lines)]


def body_lines(v: ViewState, width: int) -> list[tuple[int, Text]]:
    """The panel's lines under its tok/s line, each with its rank (:func:`fit_budget` keeps rank 1 first):
    each endpoint's (its serving group's after its first line), the models not shown, then the groups no
    endpoint claims."""
    eps = v.frame.endpoints if v.frame else ()
    groups = v.frame.groups if v.frame else ()
    lines: list[tuple[int, Text]] = []
    named: set[str] = set()
    for e in eps:
        el = _ranked(endpoint_lines(e, width))
        g = next((g for g in groups if g.endpoint == e.url), None)
        if g is not None and e.url not in named:  # a server with several models: its group once
            named.add(e.url)
            el[1:1] = _ranked(group_lines(g, v.inventory, v.frame, width, v.findings), 2)
        lines.extend(el)
    lines.extend((1, Text(f"{clean(kind, 8):<8} +{count(n, 'model')} not shown", style=DIM))
                 for kind, n in unsummed_models(eps))
    for g in groups:
        if not g.endpoint:
            lines.extend(_ranked(group_lines(g, v.inventory, v.frame, width, v.findings), 2))
    return lines


def fit_budget(lines: list[tuple[int, Text]], budget: int | None) -> list[Text]:
    """``lines`` (rank, text) cut to ``budget`` (the rows the layout gave the panel): the lines of the best
    rank first (each endpoint's and group's first line before their details), in their order, and a last line
    saying how many more a taller terminal shows; all of them when they fit or no budget is set."""
    if budget is None or len(lines) <= budget:
        return [t for _, t in lines]
    if budget <= 1:
        return [lines[0][1]]
    keep = sorted(sorted(range(len(lines)), key=lambda k: (lines[k][0], k))[:budget - 1])
    hidden = len(lines) - len(keep)
    return [*(lines[k][1] for k in keep),
            Text(f"… {count(hidden, 'more line')}: a taller terminal shows them", style=DIM)]
