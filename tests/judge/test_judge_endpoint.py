"""The OpenAI-compatible endpoint judge against a local HTTP server: same prompt, frames as images, greedy."""
import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from judge.model.endpoint import EndpointJudge
from judge.model.prompt_format import JUDGE_INSTRUCTION, SYSTEM_PROMPT
from tests.judge.judge_fixtures import random_frames


@pytest.fixture()
def server():
    requests = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802  (the http.server hook's name)
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            requests.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
            caption = body["messages"][1]["content"][-1]["text"]
            if "broken" in caption:
                self.send_response(500)
                self.end_headers()
                return
            answer = "2\n\nThe objects (cross) are incorrect." if "cross" in caption else "no score here"
            reply = json.dumps({"choices": [{"message": {"role": "assistant", "content": answer}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args):
            pass

    httpd = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", requests
    httpd.shutdown()


def test_endpoint_sends_the_judge_prompt_and_parses_answers(server):
    url, requests = server
    judge = EndpointJudge(url, "vc-inspector-3b", api_key="secret", concurrency=2)
    frames = [random_frames(0, t=3, size=32), random_frames(1, t=3, size=32), random_frames(2, t=2, size=32)]
    answers = judge.score(frames, ["a red cross.", "a blue circle.", "a broken caption."], max_new_tokens=50)
    assert (answers[0].score, answers[0].explanation, answers[0].error) == (
        2, "The objects (cross) are incorrect.", None)
    assert answers[1].score is None and "no score line" in answers[1].error
    assert answers[2].score is None and answers[2].error.startswith("endpoint: HTTPError")
    assert len(requests) == 3
    first = next(r for r in requests if "red cross" in r["body"]["messages"][1]["content"][-1]["text"])
    body = first["body"]
    assert first["path"] == "/v1/chat/completions" and first["auth"] == "Bearer secret"
    assert body["model"] == "vc-inspector-3b" and body["temperature"] == 0.0 and body["max_tokens"] == 50
    assert body["messages"][0] == {"role": "system", "content": SYSTEM_PROMPT}
    content = body["messages"][1]["content"]
    assert [c["type"] for c in content] == ["image_url"] * 3 + ["text"]
    assert all(c["image_url"]["url"].startswith("data:image/png;base64,") for c in content[:3])
    assert content[-1]["text"] == JUDGE_INSTRUCTION.format(caption="a red cross.")


def test_an_unreachable_endpoint_is_an_error_per_pair():
    judge = EndpointJudge("http://127.0.0.1:9/v1", "m", timeout_s=2)
    answer = judge.score([random_frames(0, t=2, size=16)], ["a cross."])[0]
    assert answer.score is None and answer.error.startswith("endpoint: ")
