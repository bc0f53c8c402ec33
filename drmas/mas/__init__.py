"""The multi-agent systems, one folder each (ARCHITECTURE.md, "How to add a MAS").

A MAS folder holds its agents (one module per role), its orchestra (the control flow,
registered in `drmas.registry.MAS` under the name benchmark files use as `mas:`), its prompt
sets (`prompts.py`), its warm-start demonstrations (`demos.py`, registered in
`drmas.registry.DEMONSTRATIONS` under the same name) and its episode stats with their table
labels (`stats.py`). Adding a MAS is adding a folder: the registries find it on their own.
"""
