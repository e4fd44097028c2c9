"""The shared chat-completions request against a local HTTP server with scripted replies."""
from core.chat_completions import chat_completions_url, post_chat_completion

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest


@pytest.fixture()
def server():
    replies, seen = [], []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's name)
            seen.append((self.path, self.headers.get("Authorization"),
                         json.loads(self.rfile.read(int(self.headers["Content-Length"])))))
            body = replies.pop(0).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    httpd = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_port}/v1/", replies, seen
    httpd.shutdown()


def test_post_returns_the_message_content_and_sends_the_key(server):
    base, replies, seen = server
    endpoint = chat_completions_url(base)
    assert endpoint.endswith("/v1/chat/completions")
    replies += [json.dumps({"choices": [{"message": {"content": "4\n\nfine"}}]}),
                json.dumps({"choices": [{"message": {"content": None}}]})]
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    assert post_chat_completion(endpoint, body, api_key="k") == "4\n\nfine"
    assert post_chat_completion(endpoint, body) == ""
    assert seen[0] == ("/v1/chat/completions", "Bearer k", body) and seen[1][1] is None


@pytest.mark.parametrize("reply", ["not json", json.dumps({"choices": []}), json.dumps({"error": "x"})])
def test_a_reply_without_content_is_an_error_naming_the_endpoint(server, reply):
    base, replies, _ = server
    replies.append(reply)
    with pytest.raises(ValueError, match="chat/completions answered without choices"):
        post_chat_completion(chat_completions_url(base), {"model": "m", "messages": []})
