"""sbert's benchmarks: one script per experiment, each run from the repository root as
``python -m benchmarks.NAME`` (``--help`` lists its options). The code they share is in ``benchmarks.lib``;
the tables they write, with the command of each, are indexed in benchmarks/results/README.md."""
