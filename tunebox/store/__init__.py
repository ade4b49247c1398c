"""Persistent storage: the append-only evaluation log and the SQLite winners database."""
