"""Ablation sweeps: a grid of overrides on base configs, each point fitted and tested in its own run
folder, then tabulated (``grove sweep``)."""
