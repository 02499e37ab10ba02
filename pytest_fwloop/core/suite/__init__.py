"""Which tests run and how they count: results, environment failures, flaky reruns, focus
reruns, collection, known failures, failure signatures, per-test history."""
