"""House-wide checks: layering, import cycles, linters, docs, ./run, packaging, deployment, benchmarks, the fakes."""
