#!/usr/bin/env bash
# A Huddle session on three "hosts" — Linux network namespaces, each with its own address on a
# private bridge — paired with one generated key, driven with the `huddle` CLI, then torn down.
# It is what you would do on three real machines, with `ip netns exec HOST` standing for "on HOST".
#
# Usage (as root): examples/hosts.sh [path/to/huddle]
# It creates only namespaces named huddle-ex-<pid>-* and the 10.213.<x>.0/24 addresses inside
# them, and removes everything on exit (also on Ctrl-C).
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "hosts.sh: network namespaces need root; run it with sudo" >&2; exit 2; }
HUDDLE=$(realpath "${1:-$(dirname "$0")/../.build/debug/huddle}")
[ -x "$HUDDLE" ] || { echo "hosts.sh: no huddle binary at $HUDDLE (run 'swift build' first)" >&2; exit 2; }

tag="huddle-ex-$$"
net="10.213.$(( $$ % 250 ))"
hosts=(alice bob carol)
work=$(mktemp -d "/tmp/$tag-XXXXXX")
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
on() { local host=$1; shift; ip netns exec "$tag-$host" "$@"; }   # "run this on HOST"
ctl() { local host=$1; shift; "$HUDDLE" "$@" --control "$work/$host.sock"; }

cleanup() {
  for h in "${hosts[@]}" switch; do
    for p in $(ip netns pids "$tag-$h" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
    ip netns del "$tag-$h" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT

say "three hosts on a private network: ${hosts[*]} at $net.1-3 (a bridge in its own namespace)"
ip netns add "$tag-switch"
ip -n "$tag-switch" link add br0 type bridge
ip -n "$tag-switch" link set br0 up
for i in 0 1 2; do
  h=${hosts[$i]}
  ip netns add "$tag-$h"
  ip -n "$tag-$h" link set lo up
  ip link add eth0 netns "$tag-$h" type veth peer name "port$i" netns "$tag-switch"
  ip -n "$tag-switch" link set "port$i" master br0 up
  ip -n "$tag-$h" addr add "$net.$((i + 1))/24" dev eth0
  ip -n "$tag-$h" link set eth0 up
done

say "one session key, copied to every host (here: one file all three can read)"
"$HUDDLE" keygen --out "$work/session.key"

say "each host runs 'huddle run' on port 7400; bob and carol join through alice"
for i in 0 1 2; do
  h=${hosts[$i]}
  args=(run --key "$work/session.key" --listen "$net.$((i + 1)):7400" --name "$h" --control "$work/$h.sock")
  [ "$i" -gt 0 ] && args+=(--join "$net.1:7400")
  on "$h" "$HUDDLE" "${args[@]}" 2>"$work/$h.log" &
done
deadline=$((SECONDS + 60))
for h in "${hosts[@]}"; do
  until ctl "$h" status --json 2>/dev/null | grep -q '"members":3'; do
    [ $SECONDS -lt $deadline ] || { echo "hosts.sh: $h did not see 3 members in 60 s; its log:"; cat "$work/$h.log"; exit 1; }
    sleep 0.2
  done
done
ctl alice members

say "messages: each host broadcasts one; every host receives all three"
for h in "${hosts[@]}"; do ctl "$h" events --topics messages >"$work/$h.events" 2>/dev/null & done
sleep 0.5
for h in "${hosts[@]}"; do ctl "$h" send "hello from $h at $(on "$h" ip -4 -o addr show eth0 | awk '{print $4}')"; done
deadline=$((SECONDS + 30))
for h in "${hosts[@]}"; do
  until [ "$(grep -c '"event":"message"' "$work/$h.events" || true)" -ge 3 ]; do
    [ $SECONDS -lt $deadline ] || { echo "hosts.sh: $h did not receive 3 messages"; exit 1; }
    sleep 0.2
  done
  echo "$h received: $(grep -o '"text":"[^"]*"' "$work/$h.events" | cut -d'"' -f4 | paste -sd ';' -)"
done

say "a file: carol shares 8 MB; alice and bob fetch it from whoever holds chunks"
head -c 8000000 /dev/urandom >"$work/photo.bin"
ctl carol attach add "$work/photo.bin" --meta '{"location":[10,20]}'
id=$(ctl carol attach list --json | grep -o '"id":"[^"]*"' | head -1 | cut -d'"' -f4)
for h in alice bob; do ctl "$h" attach get "$id" "$work/$h-photo.bin"; done
cmp "$work/photo.bin" "$work/alice-photo.bin" && cmp "$work/photo.bin" "$work/bob-photo.bin" \
  && echo "alice and bob hold byte-identical copies"

say "carol leaves; her file stays available from alice and bob"
ctl carol leave
ctl alice attach list
for h in alice bob; do ctl "$h" leave >/dev/null; done
say "done: three hosts paired by one key file, messaged, shared a file and left; tearing down"
