"""test_link_hostile.py — the host relay (`sbx-vm relay`, src/vm/link.h)
against a hostile guest, with no VM: the test holds the link's guest end
and the daemon's end of the sandbox channel, and plays a guest that sends
malformed frames, breaks its window, names channels it must not, floods,
or stops reading.  Each time the relay must end the link (exit 1, the
daemon's channel at EOF) or keep serving without blocking — never hang,
never take more than its windows' worth of memory.

Needs only the build's sbx-vm (SANDBOXD_BUILD or ./build)."""
import os
import resource
import socket
import struct
import subprocess
import time

import pytest

BUILD = os.environ.get("SANDBOXD_BUILD", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
SBX_VM = os.path.join(BUILD, "src", "vm", "sbx-vm")

MSG, OPEN, DATA, EOF, CLOSE, CREDIT = 1, 2, 3, 4, 5, 6
WINDOW = 256 * 1024
PROTO_PING, PROTO_PONG = 2, 3

pytestmark = pytest.mark.skipif(not os.access(SBX_VM, os.X_OK), reason=f"{SBX_VM} not built")


def frame(kind, chan, payload=b"", flags=0, aux=0, zero=0):
    return struct.pack("<BBHIII", kind, flags, zero, chan, len(payload), aux) + payload


def proto(type_, id_, payload=b""):
    return struct.pack("<IIII", type_, id_, 0, len(payload)) + payload


class Relay:
    """A host relay between a daemon end (self.chan, SOCK_SEQPACKET) and a
    guest end (self.link, SOCK_STREAM) the test plays."""

    def __init__(self):
        self.chan, chan_far = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.link, link_far = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.proc = subprocess.Popen(
            [SBX_VM, "relay", "--chan-fd", str(chan_far.fileno()), "--link-fd",
             str(link_far.fileno())],
            pass_fds=[chan_far.fileno(), link_far.fileno()], stderr=subprocess.PIPE)
        chan_far.close()
        link_far.close()

    def ended(self, timeout=5):
        """The relay's exit status and stderr once it ended (None if not)."""
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None, ""
        return rc, self.proc.stderr.read().decode()

    def chan_eof(self, timeout=5):
        """Whether the daemon's channel reaches EOF (after what the relay
        delivered before it ended)."""
        self.chan.settimeout(timeout)
        try:
            while self.chan.recv(65536) != b"":
                pass
            return True
        except (socket.timeout, ConnectionResetError):
            return False

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.chan.close()
        self.link.close()


@pytest.fixture
def relay():
    r = Relay()
    yield r
    r.close()


def assert_link_ended(relay, what):
    rc, err = relay.ended()
    assert rc == 1, f"{what}: the relay did not end the link (rc={rc})"
    assert "broke the link protocol" in err, err
    assert relay.chan_eof(), f"{what}: the daemon's channel is not at EOF"


def next_frame(sock, skip=(CREDIT,)):
    """The next frame from the relay whose kind is not in skip."""
    sock.settimeout(5)
    buf = b""
    while True:
        while len(buf) >= 16:
            kind, _f, _z, chan, length, aux = struct.unpack_from("<BBHIII", buf)
            if len(buf) < 16 + length:
                break
            body, buf = buf[16:16 + length], buf[16 + length:]
            if kind not in skip:
                return kind, chan, body
        buf += sock.recv(65536)


def test_a_well_behaved_guest_is_relayed(relay):
    # READY-like datagram from the guest reaches the daemon as one datagram.
    relay.link.sendall(frame(MSG, 0, struct.pack("<I", 0) + proto(PROTO_PONG, 7)))
    relay.chan.settimeout(5)
    assert relay.chan.recv(4096) == proto(PROTO_PONG, 7)
    # The daemon's request reaches the guest as a MSG frame on channel 0.
    relay.chan.send(proto(PROTO_PING, 8))
    kind, chan, body = next_frame(relay.link)
    assert (kind, chan) == (MSG, 0) and body[4:] == proto(PROTO_PING, 8)


@pytest.mark.parametrize("what,data", [
    ("unknown kind", frame(9, 0)),
    ("nonzero reserved field", frame(CREDIT, 0, zero=1)),
    ("length over the limit", struct.pack("<BBHIII", DATA, 0, 0, 0, 1 << 24, 0)),
    ("DATA on a channel never opened", frame(DATA, 5, b"x")),
    ("OPEN from the guest", frame(OPEN, 3, struct.pack("<Q", 0), flags=1)),
    ("MSG naming channels", frame(MSG, 0, struct.pack("<II", 1, 3) + proto(PROTO_PONG, 1))),
    ("CREDIT past the window", frame(CREDIT, 0, aux=WINDOW)),
    ("CLOSE of the main channel", frame(CLOSE, 0)),
    ("DATA on the main channel", frame(DATA, 0, b"junk")),
    ("MSG shorter than a datagram header", frame(MSG, 0, struct.pack("<I", 0) + b"abc")),
])
def test_a_malformed_frame_ends_the_link(relay, what, data):
    relay.link.sendall(data)
    assert_link_ended(relay, what)


def test_a_guest_past_its_window_ends_the_link(relay):
    # Datagrams the daemon never reads, sent with no regard for CREDIT:
    # the relay grants only what it could hand on (its window plus what
    # the daemon's socket buffer took), so a guest that keeps sending is
    # past it soon.
    dgram = proto(PROTO_PONG, 1, b"x" * 60000)
    body = frame(MSG, 0, struct.pack("<I", 0) + dgram)
    relay.link.settimeout(10)
    sent = 0
    try:
        while sent < 64 * WINDOW:
            relay.link.sendall(body)
            sent += len(body) - 16
    except (BrokenPipeError, ConnectionResetError):
        pass
    assert_link_ended(relay, "a guest past its window")


def test_a_guest_that_stops_reading_does_not_block_the_relay(relay):
    # The guest never reads the link: the relay buffers what the windows
    # allow, then stops taking the daemon's datagrams (backpressure on this
    # sandbox only) — and still ends at once when the daemon closes.
    relay.chan.setblocking(False)
    sent = 0
    t0 = time.monotonic()
    while time.monotonic() - t0 < 5:
        try:
            relay.chan.send(proto(PROTO_PING, sent + 1, b"p" * 30000))
            sent += 1
        except BlockingIOError:
            break
    assert sent < 200, "the relay took datagrams past its window without the guest reading"
    rss = int(open(f"/proc/{relay.proc.pid}/status").read().split("VmRSS:")[1].split()[0])
    assert rss < 32 * 1024, f"the relay holds {rss} KiB for a stalled guest"
    relay.chan.close()
    rc, _ = relay.ended()
    assert rc == 0, "the relay did not end when the daemon closed the channel"


def test_a_guest_that_closes_the_link_is_a_lost_sandbox(relay):
    relay.link.close()
    rc, _ = relay.ended()
    assert rc == 0
    assert relay.chan_eof()
