"""Progress reporting to the workflow's terminal: status files written by the bars, the
watcher's table of running jobs."""

import io
import json
import time

from rich.console import Console

from drmas.status.progress import STATUS_ENV, bar
from drmas.status.watch import Watcher, eta_s, running, table


def render(jobs):
    console = Console(file=io.StringIO(), width=120)
    console.print(table(jobs))
    return console.file.getvalue()


def test_bars_write_status_and_the_watcher_lists_running_jobs(tmp_path, monkeypatch):
    monkeypatch.setenv(STATUS_ENV, str(tmp_path))
    train = bar(total=20, job="train math/shared/grpo/seed0", status_every=0)
    for _ in range(5):
        train.update(1)
    seen = []
    for i, _ in enumerate(bar(range(8), job="eval math/shared/base/seed0", status_every=0, mininterval=0)):
        if i == 3:
            seen = running(tmp_path)
    assert [j["job"] for j in seen] == ["train math/shared/grpo/seed0", "eval math/shared/base/seed0"]
    assert seen[0]["n"] == 5 and seen[0]["total"] == 20 and seen[1]["n"] >= 2
    assert [j["job"] for j in running(tmp_path)] == ["train math/shared/grpo/seed0"]   # loop over
    text = render(seen)
    assert "train math/shared/grpo/seed0" in text and "5/20" in text and "25" in text
    train.close()
    assert running(tmp_path) == []


def test_eta_is_the_remaining_steps_at_the_mean_rate():
    assert eta_s({"n": 5, "total": 20, "elapsed": 10.0}) == 30.0
    assert eta_s({"n": 0, "total": 20, "elapsed": 3.0}) is None
    assert eta_s({"n": 12, "initial": 10, "total": 20, "elapsed": 4.0}) == 16.0   # resumed at 10


def test_dead_or_stale_jobs_are_not_running(tmp_path):
    now = time.time()
    base = {"job": "x", "n": 1, "total": 2, "started": now, "elapsed": 1, "done": False}
    import socket
    (tmp_path / "dead.json").write_text(json.dumps({**base, "host": socket.gethostname(),
                                                    "pid": 2 ** 22 + 7, "updated": now}))
    (tmp_path / "stale.json").write_text(json.dumps({**base, "host": "elsewhere", "pid": 1,
                                                     "updated": now - 3600}))
    (tmp_path / "remote.json").write_text(json.dumps({**base, "job": "remote", "host": "elsewhere",
                                                      "pid": 1, "updated": now}))
    assert [j["job"] for j in running(tmp_path, now)] == ["remote"]



def test_a_fifo_or_a_non_status_file_is_skipped_unread(tmp_path):
    """A FIFO named *.json would block a read forever; a JSON list or a large file is no status."""
    import os

    now = time.time()
    os.mkfifo(tmp_path / "pipe.json")
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "big.json").write_text(" " * (2 << 20))
    (tmp_path / "job.json").write_text(json.dumps({"job": "j", "n": 1, "total": 2, "started": now,
                                                   "elapsed": 1, "done": False, "host": "elsewhere",
                                                   "pid": 1, "updated": now}))
    assert [j["job"] for j in running(tmp_path, now)] == ["j"]


def test_watcher_prints_at_its_interval(tmp_path, monkeypatch):
    monkeypatch.setenv(STATUS_ENV, str(tmp_path))
    (tmp_path / "old.json").write_text("{}")            # left by an earlier run: cleared
    out = io.StringIO()
    watcher = Watcher(tmp_path, interval=0.05, console=Console(file=out, width=120)).start()
    assert not (tmp_path / "old.json").exists()
    job = bar(total=4, job="warmstart search/small", status_every=0)
    job.update(1)
    time.sleep(0.4)
    watcher.stop()
    job.close()
    assert "warmstart search/small" in out.getvalue() and "1/4" in out.getvalue()


def test_watching_a_results_folder_that_does_not_exist_is_one_line(tmp_path, capsys):
    """A typo in the folder would otherwise show an empty table forever."""
    from drmas.cli.main import main

    assert main(["watch", str(tmp_path / "results" / "defualt"), "--once"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("drmas watch: error: ") and "no results folder" in err[0]
    (tmp_path / "results" / "default").mkdir(parents=True)
    assert main(["watch", str(tmp_path / "results" / "default"), "--once"]) == 0
