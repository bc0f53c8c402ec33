"""drmas: a reproducibility harness for Dr. MAS (arXiv 2602.08847)."""

__version__ = "0.1.0"
