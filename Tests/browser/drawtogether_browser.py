#!/usr/bin/env python3
"""DrawTogether in real browsers: headless Chromium, driven by Selenium, on `drawtogether serve` pages.

Starts two Huddle nodes (ann, ben) with a `drawtogether serve` each, opens both pages, draws a stroke
with mouse pointer events on ann's page and checks ben's page shows it (in the page's canvas model
and by pixels in a screenshot), and back with a finger (touch pointer events); drops an image on ann's page; then starts a third node (cat) late
with its own page, which must show both strokes and the image; a reset on ben's page clears all three.
Then (issue 38, item 5): ben's page sees ann's pointer, sent at 20 Hz at most; an image chosen with
ann's file picker shows on ben's page fitted, with its aspect ratio; a text file chosen is refused
with a message; a page from another origin (a second HTTP server on its own port, opened in ann's
browser, which holds ann's cookie) can neither open /ws nor add an image; cat's pointer goes from
ann's page when cat's program is killed.
Screenshots go to --out (their paths are printed). Exits 0 when every check passed, 1 otherwise.

Usage: drawtogether_browser.py --bin DIR (holding huddle and drawtogether) --out DIR
       [--chromium /usr/bin/chromium] [--chromedriver /usr/bin/chromedriver]
Every port is chosen by the kernel (port 0): runs in parallel do not collide.
"""
import argparse, base64, http.server, io, json, math, os, re, shutil, signal, struct, subprocess, sys, tempfile, threading, time, zlib

from PIL import Image
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.actions import interaction
from selenium.webdriver.common.actions.action_builder import ActionBuilder
from selenium.webdriver.common.actions.pointer_input import PointerInput
from selenium.webdriver.common.by import By

RED, GREEN, BLUE = (0xE6, 0x19, 0x4B), (0x3C, 0xB4, 0x4B), (0x10, 0x50, 0xC0)
DEADLINE = 90  # seconds for any one condition: the machine is small and shared


class Failed(Exception):
    pass


def wait_for(what, condition, seconds=DEADLINE):
    end = time.monotonic() + seconds
    last = None
    while time.monotonic() < end:
        try:
            value = condition()
            if value:
                return value
        except Exception as e:  # a page still loading, a process not answering yet
            last = e
        time.sleep(0.1)
    raise Failed(f"timed out after {seconds} s waiting for {what}" + (f" (last error: {last})" if last else ""))


def png(width, height, rgb, frame=True):
    """A PNG of one colour, with a darker frame (unless not `frame`), made by hand (no image library needed to make it)."""
    dark = tuple(c // 2 for c in rgb) if frame else rgb
    rows = b"".join(b"\0" + b"".join(bytes(dark if x < 4 or y < 4 or x >= width - 4 or y >= height - 4 else rgb)
                                      for x in range(width)) for y in range(height))
    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


class Session:
    """The nodes and `serve` processes of this run, in a temporary directory; `close` ends them all."""

    def __init__(self, bin_dir):
        self.huddle = os.path.join(bin_dir, "huddle")
        self.draw = os.path.join(bin_dir, "drawtogether")
        self.dir = tempfile.mkdtemp(prefix="dt-browser-")
        self.key = os.path.join(self.dir, "session.key")
        self.processes = []
        self.servers = {}
        self.first_addr = None
        subprocess.run([self.huddle, "keygen", "--out", self.key], check=True, stdout=subprocess.DEVNULL)

    def node(self, name):
        control = os.path.join(self.dir, name + ".sock")
        args = [self.huddle, "run", "--key", self.key, "--listen", "127.0.0.1:0", "--name", name,
                "--control", control, "--data-dir", os.path.join(self.dir, name + ".data")]
        if self.first_addr:
            args += ["--join", self.first_addr]
        log = open(os.path.join(self.dir, name + ".log"), "w")
        self.processes.append(subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log))
        status = wait_for(f"{name} to answer status", lambda: self.status(control))
        if not self.first_addr:
            self.first_addr = status["addr"]
        return control

    def status(self, control):
        out = subprocess.run([self.huddle, "status", "--json", "--control", control], capture_output=True, text=True, timeout=30)
        return json.loads(out.stdout) if out.returncode == 0 else None

    def serve(self, name, control, color):
        out_path = os.path.join(self.dir, name + ".serve")
        out = open(out_path, "w")
        self.processes.append(subprocess.Popen([self.draw, "serve", "--control", control, "--http", "127.0.0.1:0", "--color", color],
                                               stdout=out, stderr=subprocess.STDOUT))
        self.servers[name] = self.processes[-1]
        def url():
            m = re.search(r"serving (http://127\.0\.0\.1:\d+/\?token=[0-9a-f]+)", open(out_path).read())
            return m and m.group(1)
        return wait_for(f"{name}'s page to be served", url)

    def logs(self):
        text = []
        for f in sorted(os.listdir(self.dir)):
            if f.endswith((".log", ".serve")):
                text.append(f"--- {f}\n" + open(os.path.join(self.dir, f)).read()[-3000:])
        return "\n".join(text)

    def close(self):
        for p in reversed(self.processes):
            if p.poll() is None:
                p.terminate()
        for p in self.processes:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


class Page:
    """One participant's page in its own headless Chromium."""

    def __init__(self, name, url, args):
        self.name = name
        options = Options()
        options.binary_location = args.chromium
        for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,960",
                     "--force-device-scale-factor=1", f"--user-data-dir={tempfile.mkdtemp(prefix='dt-chromium-')}"):
            options.add_argument(flag)
        self.driver = webdriver.Chrome(service=Service(args.chromedriver), options=options)
        self.driver.set_page_load_timeout(60)
        self.driver.get(url)
        wait_for(f"{name}'s page to connect", lambda: self.js("return window.drawTogether && window.drawTogether.connected && window.drawTogether.model !== null"))
        self.canvas = self.driver.find_element(By.ID, "board")

    def js(self, script, *args):
        return self.driver.execute_script(script, *args)

    @property
    def model(self):
        return self.js("return window.drawTogether.model")

    def draw(self, points, touch=False):
        """A stroke through `points` (canvas units) with real input events, a mouse's or (`touch`) a
        finger's: press, moves, release — the page sees them as pointer events."""
        rect = self.js("const r = arguments[0].getBoundingClientRect(); return [r.width, r.height];", self.canvas)
        scale = rect[0] / 1000.0
        def offset(p):  # Selenium 4 offsets are from the element's centre
            return int(p[0] * scale - rect[0] / 2), int(p[1] * scale - rect[1] / 2)
        if touch:
            builder = ActionBuilder(self.driver, mouse=PointerInput(interaction.POINTER_TOUCH, "finger"), duration=20)
            finger = builder.pointer_action
            finger.move_to(self.canvas, *offset(points[0])).pointer_down()
            for p in points[1:]:
                finger.move_to(self.canvas, *offset(p))
            finger.pointer_up()
            builder.perform()
            return
        chain = ActionChains(self.driver, duration=20)
        chain.move_to_element_with_offset(self.canvas, *offset(points[0])).click_and_hold()
        for p in points[1:]:
            chain.move_to_element_with_offset(self.canvas, *offset(p))
        chain.release().perform()

    def drop(self, data, name, at):
        """Drops a file on the canvas at `at` (canvas units), as the browser does for a dragged file."""
        self.js("""
            const [canvas, b64, name, x, y] = arguments;
            const bytes = Uint8Array.from(atob(b64), c => c.charCodeAt(0));
            const transfer = new DataTransfer();
            transfer.items.add(new File([bytes], name, { type: "image/png" }));
            const r = canvas.getBoundingClientRect();
            const at = { clientX: r.left + x * r.width / 1000, clientY: r.top + y * r.height / 700, bubbles: true, cancelable: true, dataTransfer: transfer };
            canvas.dispatchEvent(new DragEvent("dragover", at));
            canvas.dispatchEvent(new DragEvent("drop", at));
        """, self.canvas, base64.b64encode(data).decode(), name, at[0], at[1])

    def pick(self, path):
        """Chooses the file at `path` with the page's file picker (<input type=file>)."""
        self.driver.find_element(By.ID, "picker").send_keys(path)

    def point_at(self, p):
        """Moves the mouse over the canvas to `p` (canvas units), without pressing."""
        r = self.js("const r = arguments[0].getBoundingClientRect(); return [r.width, r.height];", self.canvas)
        ActionChains(self.driver, duration=10).move_to_element_with_offset(
            self.canvas, int(p[0] * r[0] / 1000 - r[0] / 2), int(p[1] * r[1] / 700 - r[1] / 2)).perform()

    def pointer_off(self):
        """Moves the mouse off the canvas (onto the page's title): its pointer leaves the others' pages."""
        ActionChains(self.driver, duration=10).move_to_element(self.driver.find_element(By.TAG_NAME, "h1")).perform()

    @property
    def received(self):
        """How many messages of each type the page got from the server."""
        return self.js("return Object.assign({}, window.drawTogether.received)")

    def cursor(self, name):
        return next((c for c in self.model["cursors"] if c["name"] == name), None)

    def canvas_pixels(self):
        return Image.open(io.BytesIO(self.canvas.screenshot_as_png)).convert("RGB")

    def save(self, path):
        self.driver.save_screenshot(path)
        return path

    def close(self):
        try:
            self.driver.quit()
        except Exception:
            pass


def count(image, rgb, tolerance=40):
    """How many pixels are within `tolerance` of `rgb` on every channel."""
    data = image.convert("RGB").tobytes()
    r, g, b = rgb
    return sum(1 for i in range(0, len(data), 3)
               if abs(data[i] - r) <= tolerance and abs(data[i + 1] - g) <= tolerance and abs(data[i + 2] - b) <= tolerance)


def bounds(image, rgb, tolerance=12):
    """The bounding box (left, top, right, bottom) of the pixels within `tolerance` of `rgb`, or None."""
    rgb_image = image.convert("RGB")
    data = rgb_image.tobytes()
    w = rgb_image.width
    xs, ys = [], []
    r, g, b = rgb
    for i in range(0, len(data), 3):
        if abs(data[i] - r) <= tolerance and abs(data[i + 1] - g) <= tolerance and abs(data[i + 2] - b) <= tolerance:
            xs.append((i // 3) % w)
            ys.append((i // 3) // w)
    return (min(xs), min(ys), max(xs) + 1, max(ys) + 1) if xs else None


class OtherSite:
    """A second local web server on its own port (another origin, the same host): its page tries to
    open the canvas's WebSocket and to POST an image to it, as any site open in the browser could."""

    def __init__(self, target_port, image):
        page = ATTACK_PAGE.replace("PORT", str(target_port)).replace("IMAGE", base64.b64encode(image).decode()).encode()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(page)))
                self.end_headers()
                self.wfile.write(page)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


ATTACK_PAGE = """<!doctype html><meta charset="utf-8"><title>another site</title><script>
window.result = { ws: "pending", post: "pending" };
const ws = new WebSocket("ws://127.0.0.1:PORT/ws");
ws.onopen = () => { window.result.ws = "open"; };
ws.onmessage = () => { window.result.ws = "open"; };
ws.onclose = e => { window.result.wsClose = e.code; if (window.result.ws !== "open") window.result.ws = "refused"; };
const bytes = Uint8Array.from(atob("IMAGE"), c => c.charCodeAt(0));
fetch("http://127.0.0.1:PORT/image?x=500&y=350&name=evil.png", { method: "POST", mode: "no-cors", credentials: "include", body: new Blob([bytes]) })
  .then(() => { window.result.post = "answered"; }, e => { window.result.post = "failed: " + e; });
</script>"""


def check(condition, message):
    if not condition:
        raise Failed(message)
    print(f"ok: {message}", flush=True)


def wave(x0, y0, width, height, n=36):
    """A wave of `n` segments from (x0, y0), `width` wide, `height` from crest to trough."""
    return [(x0 + width * i / n, y0 + height / 2 * (1 - math.cos(i / n * 4 * math.pi))) for i in range(n + 1)]


def loop(cx, cy, r, n=40):
    """A spiral loop around (cx, cy)."""
    return [(cx + r * (0.55 + 0.45 * i / n) * math.cos(i / n * 2.2 * math.pi), cy + r * (0.55 + 0.45 * i / n) * math.sin(i / n * 2.2 * math.pi)) for i in range(n + 1)]


def run(args):
    os.makedirs(args.out, exist_ok=True)
    session = Session(args.bin)
    pages = []
    shots = []
    try:
        ann = session.node("ann")
        ben = session.node("ben")
        wait_for("ann and ben to see each other", lambda: session.status(ann)["members"] == 2 and session.status(ben)["members"] == 2)
        a = Page("ann", session.serve("ann", ann, "#e6194b"), args); pages.append(a)
        b = Page("ben", session.serve("ben", ben, "#3cb44b"), args); pages.append(b)
        wait_for("both pages to list two participants", lambda: len(a.model["participants"]) == 2 and len(b.model["participants"]) == 2)
        check(a.model["color"] == "#e6194b" and b.model["color"] == "#3cb44b", "each participant draws in its own color")

        a.draw(wave(110, 130, 400, 200))
        wait_for("ann's stroke on ann's page", lambda: len(a.model["strokes"]) == 1 and len(a.model["strokes"][0]["points"]) >= 10)
        drawn = a.model["strokes"][0]
        wait_for("ann's stroke on ben's page, every point",
                 lambda: [s["points"] for s in b.model["strokes"]] == [drawn["points"]])
        check(b.model["strokes"][0]["color"] == "#e6194b", f"ben's page has ann's stroke ({len(drawn['points'])} points, red) in its canvas model")
        got = b.received
        check(got.get("snapshot") == 1 and got.get("points", 0) >= 1,
              f"ben's page got the canvas once, then the stroke's points as they came: {got}")
        red = wait_for("red pixels on ben's canvas", lambda: count(b.canvas_pixels(), RED) > 300 and count(b.canvas_pixels(), RED))
        check(red > 300, f"ben's screenshot shows ann's stroke: {red} red pixels")

        b.draw(loop(700, 470, 150), touch=True)
        wait_for("ben's stroke (drawn with a finger) on ann's page", lambda: len(a.model["strokes"]) == 2)
        check(len(b.model["strokes"]) == 2 and min(len(s["points"]) for s in a.model["strokes"]) >= 10,
              "ben's touch stroke reached ann's page whole")
        green = wait_for("green pixels on ann's canvas", lambda: count(a.canvas_pixels(), GREEN) > 300 and count(a.canvas_pixels(), GREEN))
        check(green > 300, f"ann's screenshot shows ben's stroke: {green} green pixels")

        photo = png(120, 80, BLUE)
        a.drop(photo, "photo.png", (700, 160))
        wait_for("the dropped image on both pages", lambda: len(a.model["images"]) == 1 and len(b.model["images"]) == 1)
        image = b.model["images"][0]
        check(abs(image["x"] - 700) < 2 and abs(image["y"] - 160) < 2 and (image["width"], image["height"]) == (120, 80),
              "the image lies where it was dropped, at its own size, on ben's page")
        blue = wait_for("the image's pixels on ben's canvas", lambda: count(b.canvas_pixels(), BLUE, 20) > 5000 and count(b.canvas_pixels(), BLUE, 20))
        check(blue > 5000, f"ben's screenshot shows the image: {blue} blue pixels")

        time.sleep(0.5)  # let the last pushes paint before the pictures are kept
        shots.append(a.save(os.path.join(args.out, "drawtogether-ann.png")))
        shots.append(b.save(os.path.join(args.out, "drawtogether-ben.png")))
        pair = [Image.open(p) for p in shots]
        both = Image.new("RGB", (sum(p.width for p in pair) + 12, max(p.height for p in pair)), "#888888")
        both.paste(pair[0], (0, 0))
        both.paste(pair[1], (pair[0].width + 12, 0))
        shots.append(os.path.join(args.out, "drawtogether-two-pages.png"))
        both.save(shots[-1])

        cat = session.node("cat")
        wait_for("cat to join", lambda: session.status(cat)["members"] == 3)
        c = Page("cat", session.serve("cat", cat, "#4363d8"), args); pages.append(c)
        wait_for("cat's page to show both strokes and the image (catch-up and journal)",
                 lambda: sorted(len(s["points"]) for s in c.model["strokes"]) == sorted(len(s["points"]) for s in a.model["strokes"])
                 and len(c.model["images"]) == 1)
        check(len(c.model["participants"]) == 3, "cat's page lists three participants")
        # A participant's color is known from its live strokes (a catch-up does not say who drew what).
        colors = wait_for("the participants' colors on ann's page", lambda: (lambda m: m if m.get("ann") == "#e6194b" and m.get("ben") == "#3cb44b" else None)(
            {p["name"]: p["color"] for p in a.model["participants"]}))
        check(bool(colors), f"ann's list shows the color of each participant who drew: {colors}")
        items = c.js("return [...document.querySelectorAll('#participants li')].map(li => li.textContent)")
        check(sorted(items) == ["ann", "ben", "cat (you)"], f"cat's page shows the list: {items}")
        pixels = wait_for("cat's canvas to paint", lambda: (lambda p: count(p, RED) > 300 and count(p, GREEN) > 300 and count(p, BLUE, 20) > 5000 and p)(c.canvas_pixels()))
        check(True, f"cat's screenshot shows both strokes and the image ({count(pixels, RED)} red, {count(pixels, GREEN)} green, {count(pixels, BLUE, 20)} blue pixels)")
        shots.append(c.save(os.path.join(args.out, "drawtogether-cat-late.png")))

        for p in (a, b, c):
            p.pointer_off()  # so that no pointer is drawn on the blank canvases below
        before = a.model["canvas"]
        b.driver.find_element(By.ID, "reset").click()
        for p in (a, b, c):
            wait_for(f"{p.name}'s page to show a fresh canvas",
                     lambda p=p: p.model["canvas"] != before and p.model["strokes"] == [] and p.model["images"] == [])
        for p in (a, b, c):
            pixels = wait_for(f"{p.name}'s canvas to be blank", lambda p=p: (lambda px: count(px, RED) + count(px, GREEN) + count(px, BLUE, 20) == 0 and px)(p.canvas_pixels()))
            check(bool(pixels), f"after the reset {p.name}'s screenshot has no stroke or image pixels")
        shots.append(c.save(os.path.join(args.out, "drawtogether-cat-after-reset.png")))

        # Pointers: ann's reaches ben's page, at 20 Hz at most however fast the mouse moves.
        a.point_at((300, 200))
        seen = wait_for("ann's pointer on ben's page", lambda: (lambda c: c if c and abs(c["x"] - 300) < 3 and abs(c["y"] - 200) < 3 else None)(b.cursor("ann")))
        check(seen["color"] == "#e6194b", f"ben's page shows ann's pointer where it is, in her color: {seen}")
        # 400 moves at about 200 a second (pointer events made in the page, faster than a driver can).
        before, start = b.received.get("cursors", 0), time.monotonic()
        a.js("""const board = arguments[0];
            const r = board.getBoundingClientRect();
            let i = 0;
            const timer = setInterval(() => {
              board.dispatchEvent(new PointerEvent("pointermove", { clientX: r.left + (200 + i) * r.width / 1000, clientY: r.top + 400 * r.height / 700, bubbles: true }));
              if (++i === 400) { clearInterval(timer); window.movesDone = true; }
            }, 5);""", a.canvas)
        wait_for("the page's moves to be made", lambda: a.js("return window.movesDone === true"))
        wait_for("ann's last position on ben's page", lambda: (lambda c: c and abs(c["x"] - 599) < 3)(b.cursor("ann")))
        elapsed, updates = time.monotonic() - start, b.received.get("cursors", 0) - before
        check(1 <= updates <= elapsed * 20 + 3 and updates < 400,
              f"400 pointer moves in {elapsed:.2f} s reached ben's page as {updates} updates (at most 20 a second, the latest position)")

        # The file picker: a 480 x 240 PNG lands in the middle of what ann sees, fitted to 300 x 150.
        orange = (0xF5, 0x82, 0x31)
        wide = os.path.join(session.dir, "wide.png")
        with open(wide, "wb") as f:
            f.write(png(480, 240, orange, frame=False))
        centre = a.js("""const r = arguments[0].getBoundingClientRect();
            const l = Math.max(r.left, 0), rt = Math.min(r.right, innerWidth), t = Math.max(r.top, 0), bt = Math.min(r.bottom, innerHeight);
            return [((l + rt) / 2 - r.left) * 1000 / r.width, ((t + bt) / 2 - r.top) * 700 / r.height];""", a.canvas)
        a.pick(wide)
        wait_for("the picked image on both pages", lambda: len(a.model["images"]) == 1 and len(b.model["images"]) == 1)
        image = b.model["images"][0]
        check((image["width"], image["height"]) == (300, 150) and abs(image["x"] - centre[0]) < 2 and abs(image["y"] - centre[1]) < 2,
              f"the picked image is fitted to 300 x 150 and centred on what ann sees ({centre[0]:.0f}, {centre[1]:.0f}) on ben's page: {image}")
        box = wait_for("the picked image's pixels on ben's canvas", lambda: (lambda bx: bx if bx and bx[2] - bx[0] > 100 else None)(bounds(b.canvas_pixels(), orange)))
        ratio = (box[2] - box[0]) / (box[3] - box[1])
        check(abs(ratio / 2.0 - 1) <= 0.02, f"ben's screenshot shows it {box[2] - box[0]} x {box[3] - box[1]} px: aspect ratio {ratio:.3f} (the file's: 2.000)")

        # A file that is no image, chosen with the picker, is refused with a message.
        notes = os.path.join(session.dir, "notes.png")  # named like an image: its bytes say otherwise
        with open(notes, "w") as f:
            f.write("shopping list: milk, eggs\n")
        a.pick(notes)
        said = wait_for("ann's page to say the file was refused", lambda: (lambda t: t if "not an image" in t else None)(a.driver.find_element(By.ID, "message").text))
        check(len(a.model["images"]) == 1 and len(b.model["images"]) == 1 and a.driver.find_element(By.ID, "message").is_displayed(),
              f"the text file was refused and ann's page says so: {said!r}")

        # Another origin, in ann's browser (which holds ann's cookie: the same site), can neither
        # open the WebSocket nor add an image.
        port = int(re.search(r":(\d+)/", a.driver.current_url).group(1))
        other = OtherSite(port, png(64, 64, BLUE))
        home = a.driver.current_window_handle
        try:
            a.driver.switch_to.new_window("tab")
            a.driver.get(other.url)
            result = wait_for("the other site's attempts to end", lambda: (lambda r: r if r and r["ws"] != "pending" and r["post"] != "pending" else None)(
                a.js("return window.result")))
            a.driver.close()
            a.driver.switch_to.window(home)
        finally:
            other.close()
        check(result["ws"] == "refused", f"a page of another origin could not open /ws: {result}")
        time.sleep(2)  # an upload let through would be on both pages by now (it took well under this above)
        check(len(a.model["images"]) == 1 and len(b.model["images"]) == 1 and a.model["images"][0]["id"] == image["id"],
              f"the other origin's POST added no image (its request was {result['post']})")
        shots.append(b.save(os.path.join(args.out, "drawtogether-ben-picked-image-and-pointer.png")))

        # A departed participant's pointer goes: cat's program is killed (no goodbye).
        c.point_at((800, 600))
        wait_for("cat's pointer on ann's page", lambda: b.cursor("cat") and a.cursor("cat"))
        killed = time.monotonic()
        session.servers["cat"].send_signal(signal.SIGKILL)
        wait_for("cat's pointer to leave ann's page", lambda: a.cursor("cat") is None)
        gone = time.monotonic() - killed
        check(True, f"cat's pointer left ann's page {gone:.1f} s after cat's program was killed (issue: within 3 s)")
        for s in shots:
            print(f"screenshot: {s}")
        print("PASS: DrawTogether in three browsers")
        return 0
    except Failed as e:
        print(f"FAIL: {e}", file=sys.stderr)
        for p in pages:
            try:
                path = p.save(os.path.join(args.out, f"drawtogether-{p.name}-failure.png"))
                print(f"screenshot: {path}", file=sys.stderr)
                print(f"{p.name}'s model: {json.dumps(p.model)[:1500]}", file=sys.stderr)
            except Exception:
                pass
        print(session.logs(), file=sys.stderr)
        return 1
    finally:
        for p in pages:
            p.close()
        session.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--chromedriver", default="/usr/bin/chromedriver")
    sys.exit(run(parser.parse_args()))
