"""CAPTURE (CAPTURE paper, §3.2 and appendix B): detail-caption evaluation by matching scene-graph elements."""
from metrics.capture.capture import CONVENTIONS, CaptureConventions, CaptureScorer, capture_score
from metrics.capture.factual_parser import FactualSceneGraphParser, parse_factual_output
from metrics.capture.scene_graph import SceneGraph, SpacySceneGraphParser

__all__ = ["CONVENTIONS", "CaptureConventions", "CaptureScorer", "capture_score", "FactualSceneGraphParser",
           "parse_factual_output", "SceneGraph", "SpacySceneGraphParser"]
