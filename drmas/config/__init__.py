"""Configuration: the profile dataclasses and their loading (`profile.py`), the layers, the JSON-Schema, `config show`, benchmark suites, stage keys and group planning."""
