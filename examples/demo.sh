#!/usr/bin/env bash
# make demo: a real three-node Huddle session on this machine (loopback), driven with the CLI.
# Usage: examples/demo.sh [path/to/huddle]
set -euo pipefail
HUDDLE=${1:-$(dirname "$0")/../.build/debug/huddle}
work=$(mktemp -d /tmp/huddle-demo-XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
field() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }

say "a session key (mode 0600), shared by every node"
"$HUDDLE" keygen --out "$work/session.key"

base=$(( 20000 + RANDOM % 20000 ))
names=(alice bob carol)
for i in 0 1 2; do
  n=${names[$i]}
  args=(run --key "$work/session.key" --listen "127.0.0.1:$((base + i))" --name "$n" --control "$work/$n.sock")
  [ "$i" -gt 0 ] && args+=(--join "127.0.0.1:$base")
  "$HUDDLE" "${args[@]}" 2>"$work/$n.log" &
  pids+=($!)
done

say "three nodes on 127.0.0.1:$base..$((base + 2)); waiting until each sees 3 alive members"
deadline=$((SECONDS + 60))
for n in "${names[@]}"; do
  until [ "$("$HUDDLE" status --json --control "$work/$n.sock" 2>/dev/null | field "['members']" 2>/dev/null || echo 0)" = 3 ]; do
    [ $SECONDS -lt $deadline ] || { echo "demo: $n did not see 3 members in 60 s; its log:"; cat "$work/$n.log"; exit 1; }
    sleep 0.2
  done
done
"$HUDDLE" status --control "$work/alice.sock"
echo
"$HUDDLE" members --control "$work/alice.sock"

for n in "${names[@]}"; do
  "$HUDDLE" events --topics messages --control "$work/$n.sock" >"$work/$n.events" 2>/dev/null &
  pids+=($!)
done
sleep 0.5

say "each node sends one reliable broadcast; alice also sends a directed message to carol only"
for n in "${names[@]}"; do "$HUDDLE" send "hello from $n" --control "$work/$n.sock"; done
carol=$("$HUDDLE" status --json --control "$work/carol.sock" | field "['member']")
"$HUDDLE" send "a secret for carol" --to "$carol" --control "$work/alice.sock"

deadline=$((SECONDS + 30))
for n in "${names[@]}"; do
  want=3; [ "$n" = carol ] && want=4
  until [ "$(grep -c '"event":"message"' "$work/$n.events" || true)" -ge $want ]; do
    [ $SECONDS -lt $deadline ] || { echo "demo: $n did not receive $want messages"; exit 1; }
    sleep 0.2
  done
done
say "what each node's event stream delivered (end-to-end encrypted on every link)"
for n in "${names[@]}"; do
  echo "$n:"
  python3 - "$work/$n.events" "$work" <<'PY'
import json, sys
names = {}
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e.get("event") == "message":
        to = " (directed)" if e["to"] else ""
        print(f"  seq={e['seq']!s:>4}  from {e['from']}  {e['text']!r}{to}")
PY
done

say "the session's activity: set on two nodes at once, every node converges on one value"
"$HUDDLE" activity set '{"game":"chess","by":"alice"}' --control "$work/alice.sock" &
setter=$!
"$HUDDLE" activity set '{"game":"go","by":"carol"}' --control "$work/carol.sock"
wait "$setter"
sleep 0.5
for n in "${names[@]}"; do printf '%-6s ' "$n:"; "$HUDDLE" activity get --control "$work/$n.sock"; done

say "bob shares a 20 MB file; alice and carol fetch it (chunks come from any holder)"
head -c 20000000 /dev/urandom > "$work/photo.bin"
"$HUDDLE" attach add "$work/photo.bin" --meta '{"location":[120,80]}' --control "$work/bob.sock"
id=$("$HUDDLE" attach list --json --control "$work/bob.sock" | field "['attachments'][0]['id']")
for n in alice carol; do "$HUDDLE" attach get "$id" "$work/$n-photo.bin" --control "$work/$n.sock"; done
cmp "$work/photo.bin" "$work/alice-photo.bin" && cmp "$work/photo.bin" "$work/carol-photo.bin" && echo "alice and carol hold byte-identical copies"

say "bob leaves; the others see him as left, and his file stays available from them"
"$HUDDLE" leave --control "$work/bob.sock"
sleep 0.5
"$HUDDLE" members --control "$work/alice.sock"
"$HUDDLE" attach list --control "$work/alice.sock"
"$HUDDLE" stats --control "$work/alice.sock"
"$HUDDLE" leave --control "$work/alice.sock" >/dev/null
"$HUDDLE" leave --control "$work/carol.sock" >/dev/null
say "demo done: 3 nodes joined, messaged (broadcast + directed), agreed on an activity, shared a file, and left"
echo "next: DrawTogether, an app built on the control socket (examples/DrawTogether/demo.sh)"
