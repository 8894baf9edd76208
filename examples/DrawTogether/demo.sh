#!/usr/bin/env bash
# DrawTogether on Huddle: three participants draw on one canvas at once, one drops an image and
# leaves, a fourth joins late, and every canvas renders to the same SVG; then a web page for two of
# them (drawtogether serve), whose URLs it prints last. On a terminal it stays up until Ctrl-C.
# Usage: examples/DrawTogether/demo.sh [BIN_DIR]   (BIN_DIR holds `huddle` and `drawtogether`)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$(realpath "${1:-$here/../../.build/debug}")
HUDDLE=$bin/huddle DRAW=$bin/drawtogether
work=$(mktemp -d /tmp/drawtogether-demo-XXXXXX)
out=/tmp/drawtogether-$$.svg
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

"$HUDDLE" keygen --out "$work/session.key" >/dev/null
base=$(( 20000 + RANDOM % 20000 ))
node() { # node NAME INDEX — starts `huddle run` for NAME, joining the first node
  local args=(run --key "$work/session.key" --listen "127.0.0.1:$((base + $2))" --name "$1" --control "$work/$1.sock")
  [ "$2" -gt 0 ] && args+=(--join "127.0.0.1:$base")
  "$HUDDLE" "${args[@]}" 2>"$work/$1.log" &
  pids+=($!)
  until "$HUDDLE" status --control "$work/$1.sock" >/dev/null 2>&1; do sleep 0.1; done
}
# shape KIND CX CY R — one `stroke` line: a circle, a wave or a star of points
shape() {
  awk -v kind="$1" -v cx="$2" -v cy="$3" -v r="$4" 'BEGIN {
    n = 40; line = "stroke"
    for (i = 0; i <= n; i++) {
      t = i / n * 6.283185
      if (kind == "circle") { x = cx + r * cos(t); y = cy + r * sin(t) }
      else if (kind == "wave") { x = cx - r + 2 * r * i / n; y = cy + r / 3 * sin(3 * t) }
      else { k = (i % 2) ? r / 2.5 : r; x = cx + k * sin(t); y = cy - k * cos(t) }
      line = line sprintf(" %.1f,%.1f", x, y)
    }
    print line }'
}

say "DrawTogether: three nodes (ann, ben, cat), one participant on each"
for i in 0 1 2; do node "$(echo ann ben cat | cut -d' ' -f$((i + 1)))" "$i"; done

# A small real PNG for cat to drop on the canvas.
python3 - "$work/photo.png" <<'PY'
import struct, sys, zlib
w, h = 160, 100
rows = b"".join(b"\0" + bytes(v for x in range(w) for v in (40 + x, 120 + y, 220 - x // 2)) for y in range(h))
def chunk(t, d): return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
open(sys.argv[1], "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                               + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
PY

{ echo "color #e6194b"; echo "wait members 3"; shape circle 220 220 120; shape circle 220 220 60; echo "wait points 205"; echo stay; } >"$work/ann.script"
{ echo "color #3cb44b"; echo "wait members 3"; shape wave 520 480 180; shape wave 520 540 180; echo "wait points 205"; echo stay; } >"$work/ben.script"
{ echo "color #4363d8"; echo "wait members 3"; shape star 780 200 110; echo "image $work/photo.png 760 520" | sed 's/ \([0-9]*\) \([0-9]*\)$/ \1,\2/';
  echo "wait images 1"; echo "wait points 205"; echo leave; } >"$work/cat.script"
say "ann, ben and cat draw at the same time; cat drops a photo and leaves"
for n in ann ben cat; do "$DRAW" script "$work/$n.script" --control "$work/$n.sock" >"$work/$n.draw" 2>&1 & pids+=($!); done
cat_pid=${pids[-1]}
wait "$cat_pid" || { echo "cat's participant failed:"; cat "$work/cat.draw"; exit 1; }
echo "cat left the session (its node handed off what only it held)"

say "dan joins late: the canvas comes from ann and ben (directed catch-ups), the photo from whoever holds it"
node dan 3
{ echo "color #f58231"; echo "wait points 205"; echo "wait images 1"; shape star 500 200 70; echo stay; } >"$work/dan.script"
"$DRAW" script "$work/dan.script" --control "$work/dan.sock" >"$work/dan.draw" 2>&1 & pids+=($!)

say "every remaining participant renders its canvas"
deadline=$((SECONDS + 90))
while :; do
  ok=1
  for n in ann ben dan; do
    "$DRAW" render "$work/$n.svg" --control "$work/$n.sock" >"$work/$n.render" 2>&1 || ok=0
    grep -q "246 points, 1 image" "$work/$n.render" || ok=0
  done
  [ $ok = 1 ] && cmp -s "$work/ann.svg" "$work/ben.svg" && cmp -s "$work/ann.svg" "$work/dan.svg" && break
  [ $SECONDS -lt $deadline ] || { echo "the canvases did not converge in 90 s:"; cat "$work"/*.render; exit 1; }
  sleep 0.3
done
for n in ann ben dan; do sed "s|$work/||" "$work/$n.render"; done
cp "$work/ann.svg" "$out"
echo "ann, ben and dan rendered byte-identical canvases: $(sha256sum "$out" | cut -c1-16)…"
say "DrawTogether done: open $out to see the shared canvas"

say "Now draw yourself: a web page for ann and one for ben (drawtogether serve)"
for n in ann ben; do
  "$DRAW" serve --control "$work/$n.sock" --http 127.0.0.1:0 >"$work/$n.serve" 2>&1 & pids+=($!)
done
urls=()
for n in ann ben; do
  deadline=$((SECONDS + 60))
  until url=$(grep -o 'http://127\.0\.0\.1:[0-9]*/?token=[0-9a-f]*' "$work/$n.serve" 2>/dev/null | head -1) && [ -n "$url" ]; do
    [ $SECONDS -lt $deadline ] || { echo "$n's page did not start:"; cat "$work/$n.serve"; exit 1; }
    sleep 0.2
  done
  urls+=("$url")
done
echo "ann's page: ${urls[0]}"
echo "ben's page: ${urls[1]}"
if [ -t 0 ]; then
  echo "Open both in a browser and draw in one: the other shows it. Drop an image on a canvas to share it. Ctrl-C to stop."
  trap 'exit 0' INT TERM HUP
  while :; do sleep 1; done
fi
