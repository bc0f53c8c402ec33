"""Where the repository's own files are (profiles, benchmarks, the Snakefile): found from
this file, not from the installed package, so the tests also run against a non-editable
`pip install .`."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
