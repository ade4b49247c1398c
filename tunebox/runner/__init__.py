"""Runners: evaluate compiled variants on a GPU worker process, or replay recorded measurements."""
