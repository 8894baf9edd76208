#!/usr/bin/env python3
"""An independent Noise_XXpsk0_25519_ChaChaPoly_BLAKE2b initiator or responder (the `noiseprotocol`
package), for NoiseInteropTests: it opens a Huddle link to a real node over TCP, or (--listen) is
dialed by one.

Link framing: every handshake message and transport record is `u16 big-endian length | bytes`.
The script sends message 1 (empty payload), reads message 2 and decrypts it. Given --static and
--payload3 it sends message 3, then each --send record encrypted with the transport cipher, and
reads and decrypts the node's transport frames until one starts with --until (hex). It prints one
JSON line on stdout and, with --hold, keeps the link open until its standard input closes.

Outcomes ("outcome" in the JSON):
  message2  the node answered message 1; "payload" (message 2's decrypted payload) and
            "remote_static" (the node's Noise static key, learned in message 2) are hex
  eof       the node closed the connection without answering message 1
  reset     the node reset the connection without answering message 1
  timeout   no answer within --timeout seconds
  undecryptable  the node answered with a message 2 that does not decrypt
Exit status 0 when the run went as asked; 2 for a usage or protocol error (message 2 that does not
decrypt, no transport record matching --until), with the reason on stderr and, once the node has
answered, in the JSON line's "error" (the line then still carries what message 2 held).

As the responder (--listen HOST:PORT, port 0 for a free one): the script prints {"listening": PORT}
first, accepts one connection, reads message 1, sends message 2 with --payload2 (and --static as its
static key), reads message 3 and decrypts it. Then --send and --until work as for the initiator.
Outcomes: "message3" with "payload" (message 3's decrypted payload) and "remote_static" (the
node's Noise static key, learned in message 3); "eof", "reset" or "timeout" when no message 1 or 3
came; "undecryptable" when one did not decrypt.
"""
import argparse
import json
import os
import socket
import sys
import time

try:
    from noise.connection import Keypair, NoiseConnection
except ImportError as error:
    sys.exit(f"noise_xxpsk0: {sys.executable} has no noiseprotocol ({error}): "
             "run `make test` (scripts/noise-venv.sh makes .build/noise-venv) or `pip install noiseprotocol`")

PROTOCOL = b"Noise_XXpsk0_25519_ChaChaPoly_BLAKE2b"
PROLOGUE = b"huddle link v1"


# What this run found; printed as the JSON line.
result = {}


def fail(message):
    """Exits with status 2; after message 2, prints what was found so far with an "error" field."""
    print(f"noise_xxpsk0: {message}", file=sys.stderr)
    if "outcome" in result:
        result["error"] = message
        print(json.dumps(result), flush=True)
    sys.exit(2)


def read_exactly(sock, count, deadline):
    """Returns `count` bytes, None at EOF before the first byte, or raises socket.timeout."""
    out = bytearray()
    while len(out) < count:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise socket.timeout()
        sock.settimeout(remaining)
        chunk = sock.recv(count - len(out))
        if not chunk:
            if out:
                fail(f"connection closed inside a frame ({len(out)} of {count} bytes)")
            return None
        out += chunk
    return bytes(out)


def read_frame(sock, deadline):
    header = read_exactly(sock, 2, deadline)
    if header is None:
        return None
    body = read_exactly(sock, int.from_bytes(header, "big"), deadline)
    if body is None:
        fail("connection closed between a frame's length and its body")
    return body


def handshake_frame(sock, deadline):
    """The next handshake message, or None once the outcome (timeout, reset, eof) is printed."""
    try:
        frame = read_frame(sock, deadline)
    except socket.timeout:
        frame, result["outcome"] = None, "timeout"
    except ConnectionResetError:
        frame, result["outcome"] = None, "reset"
    if frame is None:
        result.setdefault("outcome", "eof")
        print(json.dumps(result), flush=True)
    return frame


def write_frame(sock, data):
    if len(data) > 0xFFFF:
        fail(f"frame of {len(data)} bytes is too long")
    sock.sendall(len(data).to_bytes(2, "big") + bytes(data))


def transport(sock, noise, args):
    """After the handshake: sends each --send record, then reads records until --until matches."""
    result["handshake_hash"] = bytes(noise.get_handshake_hash()).hex()
    for record in args.send:
        write_frame(sock, noise.encrypt(bytes.fromhex(record)))
    records = []
    if args.until is not None:
        until = bytes.fromhex(args.until)
        deadline = time.monotonic() + args.timeout
        while True:
            try:
                frame = read_frame(sock, deadline)
            except socket.timeout:
                fail(f"no transport record starting with {args.until} within {args.timeout} s; got {records}")
            if frame is None:
                fail(f"the node closed the link before a record starting with {args.until}; got {records}")
            try:
                record = bytes(noise.decrypt(frame))
            except Exception as e:  # noqa: BLE001
                fail(f"transport frame of {len(frame)} bytes does not decrypt: {e!r}")
            records.append(record.hex())
            if record.startswith(until):
                break
    result["records"] = records


def respond(args, psk):
    """The responder's run (--listen)."""
    if args.static is None or args.payload2 is None:
        fail("--listen needs --static and --payload2")
    host, _, port = args.listen.rpartition(":")
    noise = NoiseConnection.from_name(PROTOCOL)
    noise.set_as_responder()
    noise.set_prologue(PROLOGUE)
    noise.set_psks(psk=psk)
    noise.set_keypair_from_private_bytes(Keypair.STATIC, bytes.fromhex(args.static))
    noise.start_handshake()

    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind((host, int(port)))
    server.listen(1)
    print(json.dumps({"listening": server.getsockname()[1]}), flush=True)
    server.settimeout(args.timeout)
    try:
        sock, _ = server.accept()
    except socket.timeout:
        result["outcome"] = "timeout"
        print(json.dumps(result), flush=True)
        return
    server.close()
    deadline = time.monotonic() + args.timeout
    message1 = handshake_frame(sock, deadline)
    if message1 is None:
        return
    try:
        noise.read_message(message1)
    except Exception as e:  # noqa: BLE001
        result.update(outcome="undecryptable", message1_length=len(message1))
        fail(f"message 1 ({len(message1)} bytes) does not decrypt: {e!r}")
    write_frame(sock, noise.write_message(bytes.fromhex(args.payload2)))
    message3 = handshake_frame(sock, deadline)
    if message3 is None:
        return
    # The handshake state goes away once message 3 finishes the handshake: keep it to read rs.
    handshake_state = noise.noise_protocol.handshake_state
    try:
        payload = noise.read_message(message3)
    except Exception as e:  # noqa: BLE001
        result.update(outcome="undecryptable", message3_length=len(message3))
        fail(f"message 3 ({len(message3)} bytes) does not decrypt: {e!r}")
    if not noise.handshake_finished:
        fail("the handshake did not finish after message 3")
    remote_static = handshake_state.rs.public_bytes
    result.update(outcome="message3", message3_length=len(message3), payload=bytes(payload).hex(),
                  remote_static=bytes(remote_static).hex())
    transport(sock, noise, args)
    print(json.dumps(result), flush=True)
    if args.hold:
        sys.stdin.read()
    sock.close()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--addr", help="the node's HOST:PORT (the initiator)")
    p.add_argument("--listen", help="HOST:PORT to be dialed on, as the responder (port 0: a free one, printed first)")
    p.add_argument("--payload2", help="message 2's payload, hex (the responder's identity binding and member record)")
    p.add_argument("--psk", required=True, help="the 32-byte PSK (the session key's handshake subkey), hex")
    p.add_argument("--static", help="this side's X25519 private key, hex (needed for message 3)")
    p.add_argument("--payload3", help="message 3's payload, hex (identity binding and member record)")
    p.add_argument("--send", action="append", default=[], help="a transport record to send after message 3, hex")
    p.add_argument("--until", help="read transport records until one starts with these bytes, hex")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for message 2, and for --until")
    p.add_argument("--hold", action="store_true", help="keep the link open until standard input closes")
    args = p.parse_args()

    psk = bytes.fromhex(args.psk)
    if len(psk) != 32:
        fail("the PSK must be 32 bytes")
    if args.listen is not None:
        respond(args, psk)
        return
    if args.addr is None:
        fail("give --addr (initiator) or --listen (responder)")
    host, _, port = args.addr.rpartition(":")

    noise = NoiseConnection.from_name(PROTOCOL)
    noise.set_as_initiator()
    noise.set_prologue(PROLOGUE)
    noise.set_psks(psk=psk)
    if args.static:
        noise.set_keypair_from_private_bytes(Keypair.STATIC, bytes.fromhex(args.static))
    else:
        # XX needs a static key even when the run stops after message 2.
        noise.set_keypair_from_private_bytes(Keypair.STATIC, os.urandom(32))
    noise.start_handshake()

    sock = socket.create_connection((host, int(port)), timeout=args.timeout)
    write_frame(sock, noise.write_message(b""))
    message2 = handshake_frame(sock, time.monotonic() + args.timeout)
    if message2 is None:
        return
    try:
        payload = noise.read_message(message2)
    except Exception as e:  # noqa: BLE001 - any failure here is the finding
        result.update(outcome="undecryptable", message2_length=len(message2))
        fail(f"message 2 ({len(message2)} bytes) does not decrypt: {e!r}")
    remote_static = noise.noise_protocol.handshake_state.rs.public_bytes
    result.update(outcome="message2", message2_length=len(message2), payload=bytes(payload).hex(),
                  remote_static=bytes(remote_static).hex())

    if args.payload3 is not None:
        write_frame(sock, noise.write_message(bytes.fromhex(args.payload3)))
        if not noise.handshake_finished:
            fail("the handshake did not finish after message 3")
        transport(sock, noise, args)
    print(json.dumps(result), flush=True)
    if args.hold:
        sys.stdin.read()
    sock.close()


if __name__ == "__main__":
    main()
