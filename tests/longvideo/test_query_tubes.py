"""A query's tube across a long video: every grid frame answered once, by the clip that owns it, with the
boxes that clip's own grounding gives."""
import core  # noqa: F401

import numpy as np
import pytest
import torch

from formats.video_writer import write_video
from longvideo.query_tubes import ground_video_queries
from models.grove import Grove
from models.grove.configuration import tiny_configs
from models.grove.processing import GroveProcessor
from models.grove.query_grounding import query_key
from models.tiny_tokenizer import build_tiny_tokenizer


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    torch.manual_seed(0)
    return Grove(**tiny_configs(), tokenizer=build_tiny_tokenizer(tmp_path_factory.mktemp("tok") / "tiny")).eval()


def test_each_grid_frame_takes_the_answer_of_the_clip_that_owns_it(model, tmp_path):
    frames = np.random.default_rng(1).integers(0, 256, (50, 48, 64, 3), dtype=np.uint8)
    video = write_video(tmp_path / "long.mp4", frames, fps=25)
    processor = GroveProcessor({"num_frames": 2, "global_image_size": 64, "grounding_image_size": 128},
                               {"objectness_threshold": 0.0})
    queries = ["the red circle", "<p>a blue square</p> and <p>a star</p>"]
    tubes = ground_video_queries(model, processor, video, queries, clip_seconds=0.8)
    assert list(tubes) == ["long#query0", "long#query1"]
    grid = list(range(0, 50, 5))
    # 4 grid frames a clip (source frames 0-19, 20-39), and the last aligned to the end (30-49)
    assert tubes["long#query0"]["clips"] == [[0, 19], [20, 39], [30, 49]]
    owner = {0: 0, 5: 0, 10: 0, 15: 0, 20: 1, 25: 1, 30: 1, 35: 2, 40: 2, 45: 2}  # 30: centre 29.5 beats 39.5
    clips = [processor.ground(model, str(video), queries, start, end) for start, end in tubes["long#query0"]["clips"]]
    for i in range(2):
        entry = tubes[f"long#query{i}"]
        assert [f["frame"] for f in entry["frames"]] == grid and entry["objectness"]["frames"] == grid
        for frame in entry["frames"]:
            c = owner[frame["frame"]]
            own = clips[c][query_key("long_0", i)]  # a clip grounded alone is the video's clip 0
            expected = next(f for f in own["frames"] if f["frame"] == frame["frame"])
            assert frame["boxes"] == expected["boxes"] and frame["labels"] == expected["labels"]
    assert tubes["long#query1"]["referent"] == "a blue square"
