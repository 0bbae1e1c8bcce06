"""Headless commands (record, agent, topo, summary, export, compare) and the command-line parser.

Nothing here imports Textual or Rich; the TUI is loaded only by the commands that show it."""
