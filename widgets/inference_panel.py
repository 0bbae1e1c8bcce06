"""The inference panel: tok/s of the inference server(s) on the GPU graphs' time axis."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from gpuscope.core.history import resample
from gpuscope.core.text import clean
from gpuscope.core.view import ViewState
from gpuscope.widgets.style import ACCENT, BAD, DIM, fmt_num, set_content, sparkline


class InferencePanel(Static):
    DEFAULT_CSS = "InferencePanel { height: auto; border: round $primary-darken-2; padding: 0 1; }"

    def __init__(self, **kw: object):
        super().__init__(**kw)
        self.border_title = "Inference"

    def show(self, v: ViewState) -> None:
        eps = v.frame.endpoints if v.frame else ()
        if not eps:
            set_content(self, Text("no inference endpoint: add one with --endpoint URL (vLLM, SGLang, TGI, llama.cpp, "
                             "TRT-LLM, LMDeploy, Ollama)", style=DIM))
            return
        width = max(40, self.size.width - 4 if self.size.width else 76)
        prefix = 36  # the graph starts where the GPU panels' graphs start: one time axis
        lines = []
        total = sum(e.gen_tokens_per_s or 0 for e in eps)
        t = Text()
        t.append(f"{total:,.0f} tok/s", style=f"bold {ACCENT}")
        t.append(f"  over {int(v.window_s // 60)} min", style=DIM)
        t.pad_right(prefix - len(t))
        times, vals = v.history.window("tok_s", None, v.window_s, v.now or None)
        t.append(sparkline(resample(times, vals, v.now or 0, v.window_s, width - prefix)), style=ACCENT)
        lines.append(t)
        for e in eps:
            t = Text(f"{clean(e.kind or '?', 8):<8} {clean(e.model or e.url, 30):<30} ")
            if not e.up:
                t.append(clean(e.error or "unreachable", 200), style=BAD)
            else:
                t.append(f"gen {fmt_num(e.gen_tokens_per_s)} prompt {fmt_num(e.prompt_tokens_per_s)} tok/s  "
                         f"run {fmt_num(e.requests_running)} wait {fmt_num(e.requests_waiting)}  "
                         f"KV {fmt_num(e.kv_cache_pct, '%')}  TTFT {fmt_num((e.ttft_p50_s or 0) * 1000 if e.ttft_p50_s is not None else None, 'ms')} "
                         f"ITL {fmt_num((e.itl_p50_s or 0) * 1000 if e.itl_p50_s is not None else None, 'ms', 1)}")
                if e.spec_accept_length is not None:
                    t.append(f"  accept {e.spec_accept_length:.2f}")
                if e.probe:
                    t.append("  (probe)", style=DIM)
            lines.append(t)
        set_content(self, Text("\n").join(lines))
