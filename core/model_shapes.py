"""The shapes of common served models (hidden size, layers) and what tensor parallelism makes them move: the
all-reduces a decode step makes and their bytes per generated token. Pure; every figure here is an
estimate and says so where it is shown.

The model (Megatron-style tensor parallelism, as vLLM, SGLang and TensorRT-LLM run it): each transformer
layer all-reduces its activations twice (after attention, after the MLP); a generated token's activation
is ``hidden`` values of ``dtype_bytes`` (bf16: 2); a ring all-reduce over N GPUs sends and receives
2(N−1)/N of the buffer on each GPU. So each GPU sends (and receives) per generated token::

    2 · layers/PP · hidden · dtype_bytes · 2(TP−1)/TP

e.g. gemma-2-27b (hidden 4608, 46 layers) at TP=2: 2 · 46 · 4608 · 2 · 1 ≈ 0.85 MB each way. Batching
does not change the figure per token (a step of B tokens all-reduces B activations). Speculative decoding,
custom all-reduce kernels, fp8 communication and MoE expert parallelism change it; the link-cost model
uses the measured traffic, and this one only to check scenarios and count the all-reduces of a step.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True, slots=True)
class Shape:
    """A model's hidden size and number of transformer layers (from its published config.json)."""

    hidden: int
    layers: int


# Lower-case name fragments (the served model's name without its organisation) → shape. First match wins,
# so the more specific names come first.
SHAPES: tuple[tuple[str, Shape], ...] = (
    ("gemma-2-27b", Shape(4608, 46)),
    ("gemma-2-9b", Shape(3584, 42)),
    ("gemma-3-27b", Shape(5376, 62)),
    ("qwen2.5-72b", Shape(8192, 80)),
    ("qwen2.5-32b", Shape(5120, 64)),
    ("qwen2.5-14b", Shape(5120, 48)),
    ("qwen2.5-7b", Shape(3584, 28)),
    ("qwen3-32b", Shape(5120, 64)),
    ("qwen3-14b", Shape(5120, 40)),
    ("qwen3-8b", Shape(4096, 36)),
    ("mistral-small-24b", Shape(5120, 40)),
    ("mistral-large", Shape(12288, 88)),
    ("mixtral-8x7b", Shape(4096, 32)),
    ("mixtral-8x22b", Shape(6144, 56)),
    ("llama-3.1-405b", Shape(16384, 126)),
    ("llama-3.1-70b", Shape(8192, 80)),
    ("llama-3.3-70b", Shape(8192, 80)),
    ("llama-3-70b", Shape(8192, 80)),
    ("llama-3.1-8b", Shape(4096, 32)),
    ("llama-3-8b", Shape(4096, 32)),
    ("llama-2-70b", Shape(8192, 80)),
    ("deepseek-v3", Shape(7168, 61)),
    ("deepseek-r1", Shape(7168, 61)),
    ("gpt-oss-120b", Shape(2880, 36)),
    ("gpt-oss-20b", Shape(2880, 24)),
)
_WORDS = re.compile(r"[^a-z0-9.]+")


@lru_cache(maxsize=128)
def shape_of(model: str | None) -> Shape | None:
    """The shape of a served model by its name (``google/gemma-2-27b-it``, ``Meta-Llama-3.1-70B-Instruct``),
    or None when gpuscope's table does not know it."""
    if not model:
        return None
    name = _WORDS.sub("-", model.rsplit("/", 1)[-1].lower()).replace("meta-", "")
    return next((s for key, s in SHAPES if key in name), None)


def allreduces_per_step(shape: Shape, pp: int | None = None) -> int:
    """The tensor-parallel all-reduces one decode step makes on each GPU: two per layer of its pipeline stage."""
    return 2 * max(1, shape.layers // max(1, pp or 1))


def ring_share(tp: int) -> float:
    """What a ring all-reduce over ``tp`` GPUs sends (and receives) on each GPU, as a share of the buffer."""
    return 2 * (tp - 1) / tp if tp > 1 else 0.0


def allreduce_bytes_per_token(shape: Shape, tp: int, pp: int | None = None, dtype_bytes: int = 2) -> float:
    """Bytes each GPU sends (and receives) for the all-reduces of one generated token (an estimate, see the
    module docstring); 0 at TP=1."""
    return allreduces_per_step(shape, pp) * shape.hidden * dtype_bytes * ring_share(tp)
