"""An application with Wiggle embedded (wiggle.embedded.Engine), for the fault suite: the node,
its worker (fault_handlers.py's activities) and the starts, in one process to kill.

    python embedded_app.py DATABASE_URL [FLOW_FILE N]

With FLOW_FILE and N: deploys the flow and starts N instances `emb-0` .. `emb-{N-1}` (input
{"sleep": 0.05}), then serves. Without: serves only, taking over what a killed one left. Prints
"serving" once its worker runs; SIGTERM or SIGINT closes the engine (a drain)."""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path

from wiggle.embedded import Engine
from wiggle.worker import load_handlers


def main() -> int:
    url = sys.argv[1]
    done = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: done.set())
    handlers = load_handlers(Path(__file__).with_name("fault_handlers.py"))
    with Engine(url, activities=handlers, concurrency=8) as app:
        print("serving", flush=True)
        if len(sys.argv) > 2:
            flow = app.deploy(Path(sys.argv[2]))
            for i in range(int(sys.argv[3])):
                app.start(flow.name, {"sleep": 0.05}, instance_id=f"emb-{i}")
            print("started", flush=True)
        while not done.wait(0.5):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
