"""Persistent storage: the append-only evaluation log, the SQLite winners database and the sweep
directory's lock."""
