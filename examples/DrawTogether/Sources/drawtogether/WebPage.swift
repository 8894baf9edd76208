/// The page `drawtogether serve` sends: HTML, CSS and JavaScript in one string, nothing fetched
/// from elsewhere. The script keeps the canvas in `window.drawTogether.model` (the tests read it
/// there): the snapshot the server sends when the WebSocket opens, with every change it sends
/// after (`PageMessage`) applied; `received` counts the messages by type.
enum WebPage {
    static let html = #"""
<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>DrawTogether on Huddle</title>
<style>
  body { margin: 0; font: 15px system-ui, sans-serif; background: #eef0f3; color: #222; }
  header { display: flex; align-items: center; gap: 12px; padding: 8px 14px; background: #fff; border-bottom: 1px solid #ccd; }
  header h1 { font-size: 17px; margin: 0; flex: 1; }
  #swatch { width: 22px; height: 22px; border-radius: 50%; border: 2px solid #fff; box-shadow: 0 0 0 1px #999; }
  #status { font-size: 13px; color: #777; }
  button { font: inherit; padding: 5px 14px; border-radius: 6px; border: 1px solid #b33; background: #fff; color: #b33; cursor: pointer; }
  main { display: flex; gap: 14px; padding: 14px; align-items: flex-start; }
  #board { background: #fff; box-shadow: 0 1px 4px #0003; touch-action: none; width: min(1000px, calc(100vw - 250px)); cursor: crosshair; display: block; }
  #board.dropping { outline: 3px dashed #4363d8; }
  #add { border-color: #4363d8; color: #4363d8; }
  #picker { display: none; }
  #message { color: #b33; font-size: 13px; }
  #message:empty { display: none; }
  aside { width: 190px; background: #fff; padding: 10px 12px; box-shadow: 0 1px 4px #0002; }
  aside h2 { font-size: 14px; margin: 0 0 6px; }
  #participants { list-style: none; margin: 0; padding: 0; }
  #participants li { padding: 3px 0; }
  #participants li.you { font-weight: 600; }
  #participants .dot { display: inline-block; width: 10px; height: 10px; border-radius: 50%; margin-right: 7px; border: 1px solid #ccc; }
  aside p { font-size: 12px; color: #777; }
</style>
</head>
<body>
<header>
  <span id="swatch" title="your color"></span>
  <h1>DrawTogether <span id="status">connecting…</span></h1>
  <span id="message" role="alert"></span>
  <button id="add" title="share an image from this device">Add image…</button>
  <input id="picker" type="file" accept="image/png,image/jpeg,image/gif,image/webp">
  <button id="reset" title="a fresh canvas for everyone">Reset</button>
</header>
<main>
  <canvas id="board" width="1000" height="700"></canvas>
  <aside>
    <h2>Participants</h2>
    <ul id="participants"></ul>
    <p>Draw with the mouse, a pen or a finger. Drop an image on the canvas to share it where you drop it, or add one from this device (it goes in the middle of what you see).</p>
  </aside>
</main>
<script>
"use strict";
const board = document.getElementById("board");
const ctx = board.getContext("2d");
const dt = window.drawTogether = { model: null, connected: false, updates: 0, sent: 0, received: {} };
const pictures = new Map();   // attachment id -> Image
let socket = null, stroke = null, pending = [];

function render() {
  const m = dt.model;
  ctx.fillStyle = "#fff";
  ctx.fillRect(0, 0, board.width, board.height);
  if (!m) return;
  for (const im of m.images) {
    let pic = pictures.get(im.id);
    if (!pic) { pic = new Image(); pic.onload = render; pic.src = im.url; pictures.set(im.id, pic); }
    if (pic.complete && pic.naturalWidth > 0) ctx.drawImage(pic, im.x - im.width / 2, im.y - im.height / 2, im.width, im.height);
  }
  const lines = m.strokes.map(s => ({ color: s.color, points: s.points }));
  if (stroke) lines.push({ color: m.color, points: stroke.points });
  ctx.lineWidth = 4; ctx.lineCap = "round"; ctx.lineJoin = "round";
  for (const s of lines) {
    if (s.points.length === 0) continue;
    ctx.strokeStyle = s.color;
    ctx.beginPath();
    ctx.moveTo(s.points[0][0], s.points[0][1]);
    if (s.points.length === 1) ctx.lineTo(s.points[0][0] + 0.01, s.points[0][1]);
    for (const p of s.points.slice(1)) ctx.lineTo(p[0], p[1]);
    ctx.stroke();
  }
  ctx.font = "13px system-ui, sans-serif";
  for (const c of m.cursors) {   // the others' pointers: an arrow and a name
    ctx.fillStyle = c.color || "#888888";
    ctx.beginPath();
    ctx.moveTo(c.x, c.y); ctx.lineTo(c.x + 4, c.y + 16); ctx.lineTo(c.x + 11, c.y + 11);
    ctx.closePath(); ctx.fill();
    ctx.fillText(c.name, c.x + 12, c.y + 24);
  }
}

function showPeople() {
  const list = document.getElementById("participants");
  list.replaceChildren(...dt.model.participants.map(p => {
    const li = document.createElement("li");
    const dot = document.createElement("span");
    dot.className = "dot";
    dot.style.background = p.color || "transparent";
    li.append(dot, p.name + (p.isLocal ? " (you)" : ""));
    li.className = p.isLocal ? "you" : "";
    return li;
  }));
}

// One change from the server (PageMessage): the whole canvas, or what changed in it.
function apply(msg) {
  dt.received[msg.type] = (dt.received[msg.type] || 0) + 1;
  const m = dt.model;
  if (msg.type === "snapshot") {
    dt.model = msg;
    document.getElementById("swatch").style.background = msg.color;
    showPeople();
  } else if (!m) {
    return;
  } else if (msg.type === "points") {
    let s = m.strokes.find(s => s.id === msg.stroke);
    if (!s) { s = { id: msg.stroke, color: msg.color, points: [] }; m.strokes.push(s); }
    if (msg.replace) s.points = msg.points; else for (const p of msg.points) s.points.push(p);
  } else if (msg.type === "image") {
    m.images = m.images.filter(i => i.id !== msg.image.id).concat([msg.image]);
  } else if (msg.type === "imageGone") {
    m.images = m.images.filter(i => i.id !== msg.id);
  } else if (msg.type === "participants") {
    m.participants = msg.participants;
    showPeople();
  } else if (msg.type === "cursors") {
    m.cursors = msg.cursors;
  }
}

function connect() {
  socket = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws");
  socket.onopen = () => { dt.connected = true; status("connected"); for (const c of pending) socket.send(c); pending = []; };
  socket.onmessage = e => { for (const msg of JSON.parse(e.data)) apply(msg); dt.updates += 1; render(); };
  socket.onclose = () => { dt.connected = false; status("reconnecting…"); setTimeout(connect, 1000); };
}
function status(text) { document.getElementById("status").textContent = text; }
function say(text) { document.getElementById("message").textContent = text; }
function send(command, queue = true) {
  const text = JSON.stringify(command);
  dt.sent += 1;
  if (socket && socket.readyState === WebSocket.OPEN) socket.send(text); else if (queue) pending.push(text);
}

function at(e) {
  const r = board.getBoundingClientRect();
  return [(e.clientX - r.left) * board.width / r.width, (e.clientY - r.top) * board.height / r.height];
}
const tenth = v => Math.round(v * 10) / 10;
function addPoint(p) {
  const last = stroke.points[stroke.points.length - 1];
  if (last && Math.hypot(p[0] - last[0], p[1] - last[1]) < 1.5) return;
  stroke.points.push(p);
  send({ op: "point", stroke: stroke.id, x: tenth(p[0]), y: tenth(p[1]) });
  render();
}
board.addEventListener("pointerdown", e => {
  if (e.button !== 0) return;
  board.setPointerCapture(e.pointerId);
  stroke = { id: Math.random().toString(16).slice(2) + Date.now().toString(16), points: [] };
  addPoint(at(e));
  e.preventDefault();
});
board.addEventListener("pointermove", e => {
  const [x, y] = at(e);
  send({ op: "cursor", x: tenth(x), y: tenth(y) }, false);   // the server sends it on at 20 Hz at most
  if (!stroke) return;
  const events = e.getCoalescedEvents ? e.getCoalescedEvents() : [e];
  for (const c of (events.length ? events : [e])) addPoint(at(c));
});
board.addEventListener("pointerleave", () => send({ op: "cursor" }, false));
for (const end of ["pointerup", "pointercancel"]) board.addEventListener(end, () => { stroke = null; render(); });

document.getElementById("reset").addEventListener("click", () => send({ op: "reset" }));

// Shares a file at (x, y); the server reads what it is and refuses anything but an image.
function share(file, x, y) {
  say("");
  status("sharing " + file.name + "…");
  fetch("/image?x=" + x.toFixed(1) + "&y=" + y.toFixed(1) + "&name=" + encodeURIComponent(file.name), { method: "POST", body: file })
    .then(r => r.ok ? status("connected") : r.text().then(t => { status("connected"); say(t.trim() || "could not share " + file.name); }))
    .catch(err => { status("connected"); say("could not share " + file.name + ": " + err); });
}

board.addEventListener("dragover", e => { e.preventDefault(); board.classList.add("dropping"); });
board.addEventListener("dragleave", () => board.classList.remove("dropping"));
board.addEventListener("drop", e => {
  e.preventDefault();
  board.classList.remove("dropping");
  const file = e.dataTransfer && e.dataTransfer.files[0];
  if (file) share(file, ...at(e));
});

// The picker puts the image in the middle of the part of the canvas that is on screen.
const picker = document.getElementById("picker");
document.getElementById("add").addEventListener("click", () => picker.click());
picker.addEventListener("change", () => {
  const file = picker.files[0];
  if (!file) return;
  const r = board.getBoundingClientRect();
  const left = Math.max(r.left, 0), right = Math.min(r.right, window.innerWidth);
  const top = Math.max(r.top, 0), bottom = Math.min(r.bottom, window.innerHeight);
  const [x, y] = at({ clientX: right > left ? (left + right) / 2 : r.left + r.width / 2,
                      clientY: bottom > top ? (top + bottom) / 2 : r.top + r.height / 2 });
  share(file, x, y);
  picker.value = "";
});

render();
connect();
</script>
</body>
</html>
"""#
}
