"""Evaluation: sampling n answers per test problem through the MAS (`runner.py`) and the avg@k / pass@k metrics (`metrics.py`, pure)."""
