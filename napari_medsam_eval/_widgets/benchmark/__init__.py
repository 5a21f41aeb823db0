"""The Benchmark dock: settings, the run, the results table, two runs, opening a row."""
