"""A browser demo of a GROVE checkpoint: drop in a video, watch its grounded caption frame by frame.

``grove webdemo --config CONFIG --ckpt-path CKPT`` serves a Gradio page on 127.0.0.1. The page
runs the same predict path as ``cli.py predict`` (the project's datamodule, LightningModule and
prediction writers) on one uploaded video and shows the annotated video, the caption with each
phrase in its colour, any frame at full size with its boxes and scores, and each phrase's
objectness over time. Nothing in the project imports this package.
"""
import os

# The demo runs offline: no usage analytics from the Gradio server.
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
