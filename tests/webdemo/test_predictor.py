"""The demo's predict path against ``cli.py predict``, the objectness it reports, and queued requests."""
import json
import threading

import numpy as np
import pytest

from models.grove import Grove
from tests.webdemo.fixed_caption_server import fixed_generate_captions
from tests.webdemo.tiny_model import DEMO_CONFIG, TINY_MODEL_ARGS, predict_with_cli
from webdemo.predictor import DemoPredictor
from webdemo.workspace import Workspace


@pytest.fixture(scope="module")
def predictor(tiny_checkpoint, tiny_synthetic_root):
    clip = sorted((tiny_synthetic_root / "videos").glob("synthtest*.mp4"))[0]
    return DemoPredictor([DEMO_CONFIG], tiny_checkpoint, clip, TINY_MODEL_ARGS)


@pytest.fixture
def clips(tiny_synthetic_root):
    return sorted((tiny_synthetic_root / "videos").glob("synthtest*.mp4"))


@pytest.mark.slow
def test_the_predictions_file_is_the_one_cli_predict_writes(predictor, tiny_checkpoint, clips, tmp_path):
    with Workspace(parent=tmp_path) as workspace:
        result = predictor.predict(clips[0], predictor.defaults, workspace.new_run())
        page_json = result.predictions_path.read_text()
        assert result.annotated_path is not None and result.annotated_path.stat().st_size > 0
    expected = predict_with_cli(tiny_checkpoint, clips[0], tmp_path / "cli")
    assert page_json == json.dumps(expected)
    assert [c.key for c in result.clips] == list(expected)


@pytest.mark.slow
def test_kept_boxes_are_those_whose_objectness_reaches_the_threshold(predictor, clips, tmp_path, monkeypatch):
    monkeypatch.setattr(Grove, "generate_captions", fixed_generate_captions)  # two phrases to ground
    with Workspace(parent=tmp_path) as workspace:
        for threshold in (0.0, 0.5, 0.7):
            settings = predictor.defaults.__class__(threshold, "interleaved", 8.0, None, 6)
            result = predictor.predict(clips[0], settings, workspace.new_run())
            (clip,) = result.clips
            frames, scores = clip.objectness["frames"], np.array(clip.objectness["scores"])
            assert frames == clip.grid and scores.shape == (len(clip.grid), 2)
            kept = {(f["frame"], label): s for f in clip.prediction["frames"]
                    for label, s in zip(f["labels"], f["scores"])}
            expected = {(frame, phrase): scores[i, j] for i, frame in enumerate(frames)
                        for j, phrase in enumerate(clip.prediction["phrases"]) if scores[i, j] >= threshold}
            assert kept.keys() == expected.keys()
            assert all(kept[k] == pytest.approx(expected[k], abs=1e-7) for k in kept)
    assert predictor.module.report_objectness is False  # left as the command line has it


@pytest.mark.slow
def test_two_requests_at_once_queue_and_keep_their_own_outputs(predictor, clips, tmp_path):
    with Workspace(parent=tmp_path) as workspace:
        alone = [predictor.predict(c, predictor.defaults, workspace.new_run()).predictions_path.read_text()
                 for c in clips[:2]]
        results = [None, None]

        def request(i):
            results[i] = predictor.predict(clips[i], predictor.defaults, workspace.new_run())

        threads = [threading.Thread(target=request, args=(i,)) for i in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert [r.predictions_path.read_text() for r in results] == alone
        assert results[0].predictions_path.parent != results[1].predictions_path.parent


class _Parsed(Exception):
    pass


def test_the_config_s_datasets_are_not_needed_to_serve_uploads(tmp_path):
    """The released model's config names iGround's files; the demo serves without them."""
    from tests.fixtures.paths import ROOT
    from webdemo.predictor import _LoadingCLI

    class ParseOnly(_LoadingCLI):
        def instantiate_classes(self) -> None:
            raise _Parsed(self.config[self.config.subcommand])

    clip = tmp_path / "upload.mp4"  # parsing only checks that it exists
    clip.write_bytes(b"")
    with pytest.raises(_Parsed) as parsed:
        ParseOnly(subclass_mode_model=True, subclass_mode_data=True, parser_kwargs={"parser_mode": "omegaconf"},
                  args=["predict", "--config", str(ROOT / "configs" / "official" / "grove.yaml"),
                        f"--data.init_args.videos={clip}", "--model.init_args.global_encoder.checkpoint=null",
                        "--model.init_args.grounding_encoder.checkpoint=null",
                        "--model.init_args.decoder.checkpoint=null",
                        "--model.init_args.language_model.path=null",
                        "--model.init_args.language_model.tokenizer_path=null"],
                  run=True)
    data = parsed.value.args[0].data.init_args
    assert data.train_annotations is None and data.test_annotations is None and data.video_root is None
    assert data.videos == str(clip)
