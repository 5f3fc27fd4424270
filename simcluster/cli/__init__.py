"""The `simcluster` command (`main.py`: run a script on a simulated cluster, print a
history) and its progress display (`progress.py`). Runs in the user's shell process; uses
simcluster's public API only.
"""
