#!/usr/bin/python3
"""libtorrent comparison for huddle-bench's attachment scenario.

One seeder and PEERS - 1 leechers, each its own libtorrent session in this process, listening on
127.0.0.1 only; every peer is connected to every other directly (no tracker, DHT, LSD, UPnP).
Pieces are 256 KiB, like Huddle's chunks. The clock starts when every torrent is added and the
connections are requested, and stops when every leecher has the whole file.

Prints one JSON line: {"seconds", "ratio" (seeder payload uploaded / size), "seeder_upload_bytes",
"size", "peers", "super_seeding"} or {"error": "..."}.
Needs Debian's python3-libtorrent (apt-get install python3-libtorrent).
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time

PIECE = 256 * 1024


def fail(message):
    print(json.dumps({"error": message}))
    sys.exit(1)


def new_session(lt):
    settings = {
        "listen_interfaces": "127.0.0.1:0",
        "enable_dht": False,
        "enable_lsd": False,
        "enable_upnp": False,
        "enable_natpmp": False,
        "allow_multiple_connections_per_ip": True,
        "alert_mask": 0,
        "upload_rate_limit": 0,
        "download_rate_limit": 0,
        "connections_limit": 1000,
        "unchoke_slots_limit": -1,
    }
    return lt.session(settings)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--file", required=True, help="the file to distribute")
    parser.add_argument("--peers", type=int, required=True, help="members in total, the seeder included")
    parser.add_argument("--super-seeding", action="store_true", help="the seeder super-seeds")
    parser.add_argument("--timeout", type=float, default=300, help="give up after this many seconds")
    args = parser.parse_args()
    try:
        import libtorrent as lt
    except ImportError:
        fail("python3-libtorrent is not installed (apt-get install python3-libtorrent)")
    if args.peers < 2:
        fail("--peers must be at least 2")
    path = os.path.abspath(args.file)
    size = os.path.getsize(path)

    fs = lt.file_storage()
    lt.add_files(fs, path)
    torrent = lt.create_torrent(fs, PIECE, flags=lt.create_torrent.v1_only)
    lt.set_piece_hashes(torrent, os.path.dirname(path))
    info = lt.torrent_info(torrent.generate())

    work = tempfile.mkdtemp(prefix="huddle-lt-")
    try:
        sessions = [new_session(lt) for _ in range(args.peers)]
        handles = []
        for i, ses in enumerate(sessions):
            params = lt.add_torrent_params()
            params.ti = info
            if i == 0:
                params.save_path = os.path.dirname(path)
                params.flags |= lt.torrent_flags.seed_mode
                if args.super_seeding:
                    params.flags |= lt.torrent_flags.super_seeding
            else:
                params.save_path = os.path.join(work, str(i))
                os.makedirs(params.save_path)
            handles.append(ses.add_torrent(params))
        ports = [ses.listen_port() for ses in sessions]
        started = time.monotonic()
        for i, handle in enumerate(handles):
            for j, port in enumerate(ports):
                if j > i:
                    handle.connect_peer(("127.0.0.1", port))
        while True:
            statuses = [h.status() for h in handles]
            if all(s.is_seeding for s in statuses[1:]):
                break
            if time.monotonic() - started > args.timeout:
                done = sum(1 for s in statuses[1:] if s.is_seeding)
                fail(f"only {done} of {args.peers - 1} leechers finished in {args.timeout:.0f} s")
            time.sleep(0.02)
        seconds = time.monotonic() - started
        uploaded = handles[0].status().total_payload_upload
        print(json.dumps({
            "seconds": round(seconds, 3),
            "ratio": round(uploaded / size, 3),
            "seeder_upload_bytes": uploaded,
            "size": size,
            "peers": args.peers,
            "super_seeding": args.super_seeding,
        }))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
