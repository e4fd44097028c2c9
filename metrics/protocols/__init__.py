"""Benchmark protocols, each as its official evaluation defines it: VidSTG (TubeDETR),
ActivityNet-Entities, the GROVE release's iGround script, the pointing games, the Center set-up
and the objectness-threshold sweep of the GROVE paper."""
