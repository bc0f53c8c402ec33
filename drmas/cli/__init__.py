"""The `drmas` command line: the entry point (`main.py`), one module per family of subcommands, and the checks of a job's input files (`inputs.py`)."""
