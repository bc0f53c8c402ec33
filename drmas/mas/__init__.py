"""The multi-agent systems, one folder each (ARCHITECTURE.md, "How to add a MAS").

A MAS folder holds its agents (one module per role), its orchestra (the control flow,
registered in `drmas.registry.MAS` under the name benchmark files use as `mas:`), its prompt
sets (`prompts.py`), its warm-start demonstrations (`demos.py`, registered in
`drmas.registry.DEMONSTRATIONS` under the same name) and its episode stats with their table
labels (`stats.py`). Its options (a `MasOptions` dataclass, drmas/mas/base.py) are set in a
benchmark file's `mas_options:` and checked by the MAS. Adding a MAS, options included, is
adding a folder: the registries find it on their own.
"""
