"""Agreement of caption metrics with human ratings: the evaluation of the VC-Inspector and CAPTURE
papers as one suite. Benchmark readers (:mod:`agreement.benchmarks`), metric adapters with one
small interface (:mod:`agreement.scorers`), the papers' statistics (:mod:`agreement.statistics`)
and ``grove agreement run --config CONFIG --out DIR``."""
