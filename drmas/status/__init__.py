"""Job status: progress bars that jobs write to status files (`progress.py`) and the watcher that prints them (`watch.py`)."""
