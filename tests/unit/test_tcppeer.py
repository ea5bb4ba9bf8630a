"""The peer of a loopback TCP connection, from the kernel's socket table: the
table's encoding, and a real connection of this process."""

from __future__ import annotations

import ipaddress
import os
import socket

from bashrpc.server.daemon import tcppeer

# As /proc/net/tcp has it (the columns after the inode left out).
TABLE = (
    "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt"
    "   uid  timeout inode\n"
    "   0: 0100007F:1F90 0100007F:C350 01 00000000:00000000 00:00000000 00000000"
    "  1000        0 4242\n"
    "   1: 0100007F:C350 0100007F:1F90 01 00000000:00000000 00:00000000 00000000"
    "     0        0 4343\n"
)


def test_addresses_decode_as_the_kernel_writes_them() -> None:
    assert tcppeer.decode_address("0100007F:1F90") == (ipaddress.ip_address("127.0.0.1"), 8080)
    v6 = "00000000000000000000000001000000:0050"
    assert tcppeer.decode_address(v6) == (ipaddress.ip_address("::1"), 80)
    mapped = "0000000000000000FFFF00000100007F:0050"
    assert tcppeer.decode_address(mapped) == (ipaddress.ip_address("127.0.0.1"), 80)


def test_the_row_of_the_peers_end_gives_its_owner() -> None:
    peer, ours = tcppeer.address("127.0.0.1", 8080), tcppeer.address("127.0.0.1", 50000)
    assert tcppeer.find_owner(TABLE, peer, ours) == tcppeer.SocketOwner(1000, 4242)
    assert tcppeer.find_owner(TABLE, ours, peer) == tcppeer.SocketOwner(0, 4343)
    assert tcppeer.find_owner(TABLE, peer, peer) is None


def test_a_connection_of_this_process_is_its_own_uids() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        accepted, _ = server.accept()
        with client, accepted:
            peer = tcppeer.address(*accepted.getpeername()[:2])
            ours = tcppeer.address(*accepted.getsockname()[:2])
            assert tcppeer.own_unsandboxed(peer, ours)
            assert tcppeer.own_unsandboxed(ours, peer)  # the accepted end is ours too
            missing = tcppeer.address("127.0.0.1", 1)
            assert not tcppeer.own_unsandboxed(missing, ours)


def test_the_holder_of_a_socket_is_found_and_asked_first_next_time() -> None:
    holders = tcppeer.Holders()
    with socket.socket() as sock:
        inode = os.fstat(sock.fileno()).st_ino
        assert holders.pid(inode) == os.getpid()
        assert holders.pid(inode) == os.getpid()
    assert holders.pid(inode) is None
