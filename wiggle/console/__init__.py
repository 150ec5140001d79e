"""The web console: instances, their live graphs and why they wait, flows and workers.

    backend = Backend("127.0.0.1:7233", token=None)
    app = create_app(backend)                    # an ASGI app (Starlette)
    ConsoleServer(backend, "127.0.0.1", 8080).run()

It talks to a Wiggle server over the same gRPC API as the CLI; `wiggle console` and
`wiggle run --console` are the command-line ways in (docs/console.md).
"""

from __future__ import annotations

from wiggle.console._app import ConsoleSettings, create_app
from wiggle.console._backend import Backend, Unsupported
from wiggle.console._serve import ConsoleServer, parse_listen, settings_for

__all__ = [
    "Backend",
    "ConsoleServer",
    "ConsoleSettings",
    "Unsupported",
    "create_app",
    "parse_listen",
    "settings_for",
]
