"""The data formats that flow between packages, at the bottom of the house: the grounded-clip
record and its readers and writers (:mod:`formats.records`: project JSON, one pickle, per-clip
folders), the restricted unpickler (:mod:`formats.safe_pickle`), the predictions file
(:mod:`formats.predictions`), video decoding
(:mod:`formats.video_reader`), frame folders (:mod:`formats.frame_folder`), finding and probing
video files (:mod:`formats.video_files`), the one H.264 writer (:mod:`formats.video_writer`) and
the frame grids clips are annotated and scored on (:mod:`formats.frame_grids`)."""
