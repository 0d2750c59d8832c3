"""A Service for scripts/failover: listens on one port and hands each connection to the first of
the backends that accepts it, starting from the next one each time (round robin that skips a
replica which is down). Usage: python3 tcp-proxy.py LISTEN_PORT BACKEND_PORT..."""
import itertools
import socket
import sys
import threading

listen, backends = int(sys.argv[1]), [int(p) for p in sys.argv[2:]]
turn = itertools.count()


def pipe(src, dst):
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def serve(client):
    start = next(turn)
    for i in range(len(backends)):
        port = backends[(start + i) % len(backends)]
        try:
            upstream = socket.create_connection(("127.0.0.1", port), timeout=1)
            upstream.settimeout(None)
        except OSError:
            continue
        threading.Thread(target=pipe, args=(client, upstream), daemon=True).start()
        pipe(upstream, client)
        upstream.close()
        break
    client.close()


server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", listen))
server.listen(256)
while True:
    conn, _ = server.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
