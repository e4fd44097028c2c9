"""Long videos: clips cut on the 5-fps grid or at shot boundaries, decoded in one streaming pass,
their phrases linked into video-level entities (one id, one name, one tube each) and written as a
timeline next to the per-clip predictions."""
