"""The offline evaluator: a predictions file (or in-memory predictions) against ground-truth
records, streamed clip by clip, with the checks that predictions can be scored."""
