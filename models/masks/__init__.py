"""Masks for grounded phrases from their boxes (segmentation by box prompts): SAM 2 video mode
(:class:`SAM2VideoMasker`: prompted on each phrase's most confident frame, propagated over the clip,
re-prompted where box and mask part ways) and the cheaper frame-by-frame mode with SAM 2
(:class:`SAM2FrameMasker`) or the original SAM (:class:`SAMFrameMasker`).
Usable without Lightning; ``models.grove.processing.predict_clips`` runs one when given."""
from models.masks.box_masker import BoxMasker
from models.masks.clip_frames import read_clip_frames
from models.masks.sam2_frame_masker import SAM2FrameMasker
from models.masks.sam2_video_masker import SAM2VideoMasker
from models.masks.sam_frame_masker import SAMFrameMasker

__all__ = ["BoxMasker", "SAM2FrameMasker", "SAM2VideoMasker", "SAMFrameMasker", "read_clip_frames"]
