from sweep_fixtures import recording, sweep_file  # noqa: F401  (fixtures shared by the unit tests)
