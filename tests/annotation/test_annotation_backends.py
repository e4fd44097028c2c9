"""The model backends run their real code on tiny random models built here (no download): a GIT
captioner + OWLv2 detector Stage 1, a causal-LM chat backend, and the OpenAI-compatible backend
against a local HTTP server that serves scripted chat completions."""
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from annotation.clips import ClipSpec
from annotation.llm.chat import ChatBackendError
from annotation.llm.openai_chat import OpenAIChat
from annotation.llm.prompts import STAGE2_SYSTEM, stage2_messages
from annotation.stage1.decoding import DecodedClip
from annotation.stage2.caption_aggregation import LLMCaptionAggregator
from tests.fixtures.tiny_detail_models import save_tiny_detail_models

ROOT = Path(__file__).resolve().parents[2]
NO_SYSTEM_TEMPLATE = ("{% for m in messages %}{% if m['role'] == 'system' %}{{ raise_exception('no system role') }}"
                      "{% endif %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}<|assistant|>")


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory):
    """Folders of a tiny GIT captioner, a tiny OWLv2 detector and a tiny Llama chat model (and SAM)."""
    root = tmp_path_factory.mktemp("tiny_models")
    save_tiny_detail_models(root)
    return root


def decoded_clip(num_frames=3, height=40, width=56):
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 255, size=(num_frames, height, width, 3), dtype=np.uint8)
    return DecodedClip(ClipSpec("v.mp4", "v", "0", 0, num_frames - 1, 5.0), 5.0, 0, num_frames - 1, width, height,
                       np.arange(num_frames), frames)


def test_captioner_detector_stage1_runs_the_real_models(tiny_models):
    from annotation.stage1.captioner_detector import CaptionerDetectorFrameAnnotator

    stage1 = CaptionerDetectorFrameAnnotator(str(tiny_models / "captioner"), str(tiny_models / "detector"),
                                             max_new_tokens=6, box_threshold=0.0, device="cpu")
    clip = decoded_clip()
    frames, = stage1.annotate([clip])
    assert [f.frame for f in frames] == [0, 1, 2] and all(isinstance(f.caption, str) for f in frames)
    for f in frames:
        assert all(p.lower() in f.caption.lower() for p in f.phrases)  # phrases come from the caption
    # detection with given queries: a query per detection, boxes inside the (non-square) image
    queries = [["a red circle", "a very long phrase that is longer than sixteen tokens"], [], ["a wall"]]
    found = stage1.detect(list(clip.frames), queries)
    assert found[1][0] == [] and found[1][1].shape == (0, 4)
    for (phrases, boxes, scores), q in zip(found, queries):
        assert set(phrases) <= set(q) and boxes.shape == (len(phrases), 4) and scores.shape == (len(phrases),)
        assert (boxes >= 0).all() and (boxes[:, [0, 2]] <= 56).all() and (boxes[:, [1, 3]] <= 40).all()
    assert len(found[0][0]) > 0  # threshold 0: the 2x2 patches of the tiny detector all report a box
    with pytest.raises(FileNotFoundError, match="stage1.captioner .*no config.json"):
        CaptionerDetectorFrameAnnotator(str(tiny_models / "nowhere"), str(tiny_models / "detector"))


def test_transformers_chat_renders_the_template_and_random_answers_are_rejected(tiny_models):
    from annotation.llm.transformers_chat import TransformersChat
    from annotation.stage1.frame_annotations import ClipFrameAnnotations, FrameAnnotation

    chat = TransformersChat(str(tiny_models / "llm"), max_new_tokens=8, batch_size=2, device="cpu")
    messages = stage2_messages([[["red circle", "moving up"]]])
    prompt = chat.render(messages)
    assert prompt.startswith(f"<|system|>{STAGE2_SYSTEM}\n") and prompt.endswith("<|assistant|>")
    answers = chat.complete([messages, messages[:1] + messages[-1:], messages], attempt=0)
    assert len(answers) == 3 and all(isinstance(a, str) for a in answers)
    assert answers[0] == answers[2]  # greedy: the same conversation gets the same answer in another batch slot
    assert chat.complete([messages], attempt=0) == answers[:1]
    frames = [FrameAnnotation(i, "A red circle is moving up.", [], np.zeros((0, 4)), []) for i in range(2)]
    clip = ClipFrameAnnotations(ClipSpec("v.mp4", "v", "0", 0, 1, 5.0), 5.0, 0, 1, 8, 8, frames)
    rejected, = LLMCaptionAggregator(chat, max_retries=1).aggregate([clip])
    assert rejected.stage == "stage2" and "after 2 tries" in rejected.reason and not rejected.retryable
    # a template that refuses the system turn gets the instructions in the first user turn
    chat.tokenizer.chat_template = NO_SYSTEM_TEMPLATE
    assert chat.render(messages).startswith(f"<|user|>{STAGE2_SYSTEM}\n\nSVO: ")


class ScriptedServer:
    """A local OpenAI-compatible endpoint; ``reply(body) -> (status, text)`` decides each answer."""

    def __init__(self, reply):
        self.requests, outer = [], self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append((self.path, dict(self.headers), body))
                status, text = reply(body)
                payload = json.dumps({"choices": [{"message": {"role": "assistant", "content": text}}]}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def synthetic_llm(body):
    """Answers Stage 2 with the first subject of the SVO input, Stage 3 with the category equal to the phrase."""
    last = body["messages"][-1]["content"]
    if last.startswith("SVO: "):
        subject = re.search(r"\[\['([^']+)'", last).group(1)  # the first triplet's subject
        article = "an" if subject[0] in "aeiou" else "a"
        return 200, f"Here you go: {{'CAPTION': '<p>{article} {subject}</p> moves'}}"
    phrase = re.search(r"Input: '([^']*)'", last).group(1)
    categories = re.findall(r"'([^']*)'", last.split("Categories:")[1])
    return 200, "{'CATEGORY': '%s'}" % (phrase if phrase in categories else "None")


def test_openai_backend_speaks_chat_completions_and_retries_server_errors(monkeypatch):
    failures = iter([500, 200, 200, 200])
    server = ScriptedServer(lambda body: (next(failures), "{'CATEGORY': 'None'}"))
    monkeypatch.setenv("TEST_ANNOTATION_KEY", "secret-123")
    try:
        chat = OpenAIChat(server.url, "tiny-model", max_tokens=20, http_retries=2, api_key_env="TEST_ANNOTATION_KEY",
                          retry_temperature=0.9)
        conversation = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
        assert chat.complete([conversation]) == ["{'CATEGORY': 'None'}"]
        assert chat.complete([conversation, conversation], attempt=1) == ["{'CATEGORY': 'None'}"] * 2
        path, headers, body = server.requests[0]
        assert path == "/v1/chat/completions" and headers["Authorization"] == "Bearer secret-123"
        assert body["model"] == "tiny-model" and body["messages"] == conversation and body["temperature"] == 0.0
        assert server.requests[1][2] == body  # the 500 was retried with the same request
        assert [r[2]["temperature"] for r in server.requests[2:]] == [0.9, 0.9]
    finally:
        server.close()
    down = OpenAIChat(server.url, "tiny-model", http_retries=1, timeout_s=2)
    with pytest.raises(ChatBackendError, match="chat/completions"):
        down.complete([conversation])


def test_pipeline_with_an_openai_endpoint_for_stages_2_and_3(tmp_path):
    from annotation.commands.run import run_annotation
    from annotation.config import load_config
    from datamodules.synthetic import generate_synthetic_dataset
    from formats.records import read_records

    paths = generate_synthetic_dataset(tmp_path / "syn", num_train=0, num_val=0, num_test=2, seed=0, workers=1,
                                       duration_s=2.0)
    server = ScriptedServer(synthetic_llm)
    try:
        overlay = tmp_path / "endpoint.yaml"
        overlay.write_text(f"llm:\n  backend: openai\n  url: {server.url}\n  model: tiny\nstage2:\n  backend: llm\n"
                           "stage3:\n  backend: llm\n")
        files = [ROOT / "configs" / "annotation" / "synthetic.yaml",
                 ROOT / "configs" / "annotation" / "synthetic_oracle.yaml", overlay]
        config = load_config(files)
        report = run_annotation(config, [str(f) for f in files], tmp_path / "syn" / "videos", tmp_path / "out",
                                paths["test"], progress=False)
    finally:
        server.close()
    assert report["clips"]["accepted"] == 2
    truth = {r.key: r for r in read_records(paths["test"])}
    for record in read_records(tmp_path / "out" / "annotations"):
        (phrase,) = record.phrases
        t = truth[record.key]
        # the scripted LLM names the first subject of the first frame; its boxes are that object's
        assert phrase in t.phrases and record.tagged_caption == f"<p>{phrase}</p> moves"
        for pb, pl, tb, tl in zip(record.bboxes, record.labels, t.bboxes, t.labels):
            want = [b for b, l in zip(tb.tolist(), tl) if l == phrase]
            assert pb.tolist() == want and pl == [phrase] * len(want)
