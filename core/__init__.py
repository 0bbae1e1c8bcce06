"""The Textual-free domain: model, metric catalogue, topology, findings, history, session, stats, codec.

Nothing here does I/O or imports Textual, Rich, NVML, HTTP or MQTT (tests/test_layout.py enforces it)."""
