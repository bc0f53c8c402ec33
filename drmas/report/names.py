"""The names of the figures a suite's report draws, apart from the code that draws them: the
Snakefile lists the figure files of every suite when it parses (dry runs included), and
importing `figures.py` for four names would load matplotlib, seaborn and pandas each time."""

#: one `<suite>_<name>.png` each, drawn by `figures.py`, captioned by `captions/<name>.rst`
FIGURES = ("grad_norm", "team_reward", "theory_check", "diagnostics")
