"""Loopback receivers for the notification tests: an SMTP server (aiosmtpd) and an HTTP
server that records each POST (a Slack incoming webhook's stand-in), and the Airflow
connections (AIRFLOW_CONN_*) that point the notifiers at them, as a user would set them."""

from __future__ import annotations

import http.server
import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage
from typing import Any

SLACK_CONN = "reckon_slack"


@dataclass
class Received:
    """What the receivers got: each mail (parsed) and each webhook body (parsed JSON)."""

    mails: list[EmailMessage] = field(default_factory=list)
    hooks: list[dict[str, Any]] = field(default_factory=list)
    smtp_port: int = 0
    http_port: int = 0

    def env(self) -> dict[str, str]:
        """The Airflow connections and reckon settings that send every notice to us."""
        smtp = {"conn_type": "smtp", "host": "127.0.0.1", "port": self.smtp_port,
                "extra": {"disable_tls": True, "disable_ssl": True, "retry_limit": 1,
                          "timeout": 10, "from_email": "reckon@localhost"}}
        slack = {"conn_type": "slackwebhook",
                 "password": f"http://127.0.0.1:{self.http_port}/hook"}
        return {"AIRFLOW_CONN_SMTP_DEFAULT": json.dumps(smtp),
                f"AIRFLOW_CONN_{SLACK_CONN.upper()}": json.dumps(slack),
                "RECKON_NOTIFY_EMAIL": "finance@example.com",
                "RECKON_NOTIFY_SLACK_CONN": SLACK_CONN}

    def subjects(self) -> list[str]:
        return [str(m["Subject"]) for m in self.mails]

    def body(self, mail: EmailMessage) -> str:
        part = mail.get_body(("html", "plain"))
        return "" if part is None else str(part.get_content())

    def wait(self, mails: int, hooks: int, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while (len(self.mails) < mails or len(self.hooks) < hooks) \
                and time.monotonic() < deadline:
            time.sleep(0.5)


@contextmanager
def receivers() -> Iterator[Received]:
    """Start both receivers on free loopback ports; stop them on exit."""
    from aiosmtpd.controller import Controller

    got = Received()

    class Mailbox:
        async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
            got.mails.append(message_from_bytes(envelope.content, policy=policy.default))
            return "250 OK"

    class Hook(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            got.hooks.append(json.loads(raw or b"{}"))
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *_args: Any) -> None:
            pass

    with socket.socket() as probe:  # aiosmtpd's start needs a real port to check itself
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    smtp = Controller(Mailbox(), hostname="127.0.0.1", port=port)
    smtp.start()
    web = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=web.serve_forever, daemon=True).start()
    got.smtp_port, got.http_port = port, web.server_port
    try:
        yield got
    finally:
        web.shutdown()
        smtp.stop()
