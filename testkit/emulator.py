"""moto's server for the tests (testkit/src/emulator.rs), run with the project's `.venv` python.

    emulator.py serve
        moto's WSGI application (the one `moto_server` serves) on 127.0.0.1, port 0, one request
        at a time; prints the port, and exits when its standard input closes or reads `stop`.
    emulator.py zygote SOCKET
        Listens on the Unix socket SOCKET and, for each connection, forks a server like `serve`
        whose port it writes back on that connection; the server exits when the connection
        closes or reads `stop`. moto, its web stack and the three services nib uses (DynamoDB,
        S3, KMS) are imported once, here, instead of in every test process: about half a CPU
        second per server, and nextest starts ~140 of them (tests/lib/with-emulator.sh starts
        the zygote for `make test`). Each forked server starts with moto's state as a fresh
        process has it: nothing has been served before the fork, and moto's random source is
        reseeded in the server. The zygote exits when its parent does, or on SIGTERM.

One request at a time: DynamoDB applies each request atomically, and a single-threaded server is
how moto does that too (its threaded server may interleave two conditional writes). Port 0
avoids racing other processes for a free port.

A server acknowledges `stop` by exiting: it closes its listening socket first, so once the
reader sees the end of the stream, new connections are refused.
"""

import logging
import os
import signal
import socket
import sys
import threading

logging.getLogger("werkzeug").setLevel(logging.ERROR)

from werkzeug.serving import make_server  # noqa: E402
from moto.moto_server.werkzeug_app import (  # noqa: E402
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)

SERVICES = ("dynamodb", "s3", "kms")


def application():
    app = DomainDispatcherApplication(create_backend_app)
    # What the first request to each service would build (its Flask app and URL map).
    for service in SERVICES:
        app.app_instances[service] = app.create_app(service)
    return app


def serve(app, announce, wait_for_stop):
    """Serves `app` until `wait_for_stop()` returns; `announce(port)` first."""
    server = make_server("127.0.0.1", 0, app, threaded=False, request_handler=MotoRequestHandler)
    # A burst of concurrent clients waits in the backlog, not in SYN retries.
    server.socket.listen(1024)

    def stop_when_told():
        wait_for_stop()
        server.socket.close()
        os._exit(0)

    threading.Thread(target=stop_when_told, daemon=True).start()
    announce(server.server_address[1])
    server.serve_forever()


def until_stop(readline):
    def wait():
        while True:
            line = readline()
            if not line or line.strip() == b"stop":
                return

    return wait


def announce_on_stdout(port):
    print(port, flush=True)


def zygote(path):
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    listener.settimeout(1.0)
    app = application()
    parent = os.getppid()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the servers
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print("ready", flush=True)
    os.dup2(2, 1)  # whoever waited for "ready" may stop reading; anything moto prints goes to stderr
    try:
        while os.getppid() == parent:
            try:
                conn, _ = listener.accept()
            except socket.timeout:
                continue
            if os.fork() == 0:
                listener.close()
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                from moto.moto_api._internal import mock_random

                mock_random.seed()  # from os.urandom, as in a process of its own
                conn.settimeout(None)
                stream = conn.makefile("rb")
                serve(app, lambda port: conn.sendall(f"{port}\n".encode()),
                      until_stop(stream.readline))
                os._exit(0)
            conn.close()
    finally:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def main():
    if sys.argv[1:2] == ["serve"]:
        serve(application(), announce_on_stdout, until_stop(sys.stdin.buffer.readline))
    elif sys.argv[1:2] == ["zygote"] and len(sys.argv) == 3:
        zygote(sys.argv[2])
    else:
        sys.exit("usage: emulator.py serve | emulator.py zygote SOCKET")


if __name__ == "__main__":
    main()
