"""The garbage collector for a long run (the live screen, replay, record, the agent).

CPython collects its youngest generation every 700 net container allocations: about once a second on the live
screen (Textual's messages, strips and segments), 0.2-0.3 ms each, plus a middle-generation pass every ten
(1.7 ms): 0.35 ms of CPU a second in all, 7 % of the screen's cost at one GPU (docs/performance.md). Once a
command has started, :func:`settle_gc` collects once, freezes what is alive (the imported modules and their
classes, the source and its inventory: never garbage, never traversed again) and raises the youngest
generation's threshold to :data:`GC_THRESHOLD` (a pass every ~20 s, ~2 ms): 0.1 ms a second. Reference
counting still frees everything that is not in a cycle at once; cycles wait a little longer.

Frozen objects are never collected, even once unreachable: a screen that ends calls :func:`unsettle_gc`, so
that the fleet's next visit (a new App each time) can collect the one before.
"""

from __future__ import annotations

import gc

GC_THRESHOLD = (10_000, 10, 10)


def settle_gc() -> None:
    """Collect, freeze the survivors and raise the collection thresholds (call once, after start-up)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLD)


def unsettle_gc() -> None:
    """Undo :func:`settle_gc`'s freeze (the thresholds stay): what was frozen may be collected again."""
    gc.unfreeze()
