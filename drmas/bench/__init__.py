"""Benchmarks and hardware checks: `drmas perf …` against peers measured in the same run, and `drmas check gpu`."""
