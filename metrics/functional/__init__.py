"""The metrics' maths as plain functions: ``*_update`` turns inputs into a small state,
``*_compute`` turns a state into scores. The torchmetrics classes and the offline evaluator call
these same pairs, so online and offline figures cannot drift apart."""
