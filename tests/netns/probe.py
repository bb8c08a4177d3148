"""Tiny multicast probe for lab self-tests (run inside lab namespaces only).

    python probe.py recv GROUP PORT IFACE   # prints {"data": n, "end": true} at the first END,
                                            # {"data": n} on SIGTERM
    python probe.py send GROUP PORT IFACE N # N numbered datagrams, then END fifty times
"""

from __future__ import annotations

import json
import signal
import socket
import struct
import sys

SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)  # Linux; not exported by Python


def main() -> int:
    mode, group, port_text, iface = sys.argv[1:5]
    port = int(port_text)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(iface))
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 1)
    if mode == "send":
        for i in range(int(sys.argv[5])):
            sock.sendto(struct.pack(">I", i), (group, port))
        for _ in range(50):
            sock.sendto(b"END", (group, port))
        return 0
    # Room for every datagram of a test even if this process is slow to be scheduled
    # (root in the lab may exceed net.core.rmem_max).
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 8 << 20)
    except OSError:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    sock.bind((group, port))
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP,
                    socket.inet_aton(group) + socket.inet_aton(iface))
    seen: set[int] = set()
    ended = False

    def report(*_: object) -> None:
        print(json.dumps({"data": len(seen)}), flush=True)
        sys.exit(0)

    signal.signal(signal.SIGTERM, report)
    print("ready", flush=True)
    while True:
        datagram = sock.recv(64)
        if datagram == b"END":
            if not ended:
                ended = True
                print(json.dumps({"data": len(seen), "end": True}), flush=True)
        elif len(datagram) == 4:
            seen.add(struct.unpack(">I", datagram)[0])


if __name__ == "__main__":
    sys.exit(main())
