// The what-if report's page in headless Chromium (Debian's), driven by playwright-core: it loads
// from file:// without console errors, its groups table has a recorded and a simulated row per
// group, each ClusterQueue has a wait and a usage plot with lines drawn, and its screenshot is
// not blank (decoded here: many colours, the recorded and simulated line colours among them).
// Run by tests/ui/whatif_report_test.sh.
import { mkdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import { inflateSync } from "node:zlib";

const { chromium } = createRequire(process.env.NODE_DIR + "/")("playwright-core");
const { REPORT, SHOTS } = process.env;
mkdirSync(SHOTS, { recursive: true });
const failures = [];
const fail = (m) => { failures.push(m); console.error("FAIL: " + m); };

// The pixels of an 8-bit RGB or RGBA, non-interlaced PNG (what Chromium writes), as RGBA.
function decodePng(bytes) {
  let at = 8, width = 0, height = 0, channels = 0;
  const idat = [];
  while (at < bytes.length) {
    const length = bytes.readUInt32BE(at), type = bytes.toString("latin1", at + 4, at + 8);
    const data = bytes.subarray(at + 8, at + 8 + length);
    if (type === "IHDR") {
      width = data.readUInt32BE(0), height = data.readUInt32BE(4);
      if (data[8] !== 8 || ![2, 6].includes(data[9]) || data[12] !== 0) {
        throw new Error(`unexpected PNG: depth ${data[8]}, colour type ${data[9]}, ` +
                        `interlace ${data[12]}`);
      }
      channels = data[9] === 6 ? 4 : 3;
    } else if (type === "IDAT") {
      idat.push(data);
    }
    at += 12 + length;
  }
  const raw = inflateSync(Buffer.concat(idat)), stride = width * channels;
  const px = Buffer.alloc(height * stride);
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)];
    for (let x = 0; x < stride; x++) {
      const v = raw[y * (stride + 1) + 1 + x];
      const a = x >= channels ? px[y * stride + x - channels] : 0;
      const b = y > 0 ? px[(y - 1) * stride + x] : 0;
      const c = x >= channels && y > 0 ? px[(y - 1) * stride + x - channels] : 0;
      const p = a + b - c, pa = Math.abs(p - a), pb = Math.abs(p - b), pc = Math.abs(p - c);
      const paeth = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
      const pred = [0, a, b, (a + b) >> 1, paeth][filter];
      if (pred === undefined) throw new Error(`PNG filter ${filter} on row ${y}`);
      px[y * stride + x] = (v + pred) & 0xff;
    }
  }
  return { width, height, channels, px };
}

// The distinct colours of a screenshot, and whether each of `wanted` (#rrggbb) is among them.
function colours(png, wanted) {
  const seen = new Set();
  for (let i = 0; i < png.px.length; i += png.channels) {
    seen.add((png.px[i] << 16) | (png.px[i + 1] << 8) | png.px[i + 2]);
  }
  const found = wanted.filter((hex) => seen.has(parseInt(hex.slice(1), 16)));
  return { count: seen.size, found };
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"],
});
const page = await (await browser.newContext({ viewport: { width: 1200, height: 800 } })).newPage();
const errors = [], requests = [];
page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
page.on("pageerror", (e) => errors.push(String(e)));
page.on("request", (r) => { if (!r.url().startsWith("file:")) requests.push(r.url()); });
await page.goto(pathToFileURL(REPORT).href);
await page.waitForSelector("#groups");

// The groups table: a recorded and a simulated row for each group.
const rows = await page.$$eval("#groups tr", (trs) =>
  trs.slice(1).map((tr) => [...tr.querySelectorAll("td")].map((td) => td.textContent.trim())));
const sides = rows.map((r) => r[1]);
const recorded = sides.filter((s) => s === "recorded").length;
const simulated = sides.filter((s) => s === "simulated").length;
if (recorded === 0 || recorded !== simulated) {
  fail(`#groups: ${recorded} recorded and ${simulated} simulated rows: ${JSON.stringify(rows)}`);
}
const clusterQueues = rows.filter((r) => r[0].startsWith("ClusterQueue "))
  .map((r) => r[0].slice("ClusterQueue ".length)).filter((name) => name !== "(none)");
if (clusterQueues.length === 0) fail(`#groups names no ClusterQueue: ${JSON.stringify(rows)}`);

// Per ClusterQueue: both plots, each with at least one line that has points. The usage plot's
// steps spread over its width (its time axis is the report's range, not from the epoch).
for (const cq of clusterQueues) {
  for (const kind of ["wait", "usage"]) {
    const selector = `svg.plot.${kind}[data-cq="${cq}"]`;
    const plot = await page.$$eval(selector, (svgs) => svgs.map((svg) => ({
      width: Number(svg.getAttribute("width")),
      lines: [...svg.querySelectorAll("polyline")].map((p) =>
        p.getAttribute("points").trim().split(/\s+/).map((xy) => Number(xy.split(",")[0]))),
    })));
    if (plot.length !== 1) {
      fail(`ClusterQueue ${cq}: ${plot.length} ${selector}`);
      continue;
    }
    const { width, lines } = plot[0];
    if (!lines.some((xs) => xs.length >= 2)) fail(`${selector}: no polyline with points`);
    if (kind !== "usage") continue;
    // The steps: the points between the line's fixed start (the axis) and end (the right edge).
    const spans = lines.map((xs) => xs.slice(1, -1)).filter((xs) => xs.length > 0)
      .map((xs) => Math.max(...xs) - Math.min(...xs));
    if (!spans.some((span) => span >= width / 4)) {
      fail(`${selector}: its steps span ${spans} px of ${width}: squeezed to one side`);
    }
  }
}
const calibration = await page.textContent("#calibration");
if (!/^\d+ workloads; \d+ with the recorded outcome exactly/.test(calibration)) {
  fail(`#calibration: ${calibration}`);
}
if ((await page.$$("#changed tr")).length < 2) fail("#changed lists no workload");

// The screenshot, and that it shows something: many colours, both sides' line colours.
const shot = `${SHOTS}/whatif-report.png`;
await page.screenshot({ path: shot, fullPage: true });
const png = decodePng(readFileSync(shot));
const seen = colours(png, ["#2f6fb3", "#e07b24"]);
if (seen.count < 16) fail(`the screenshot has ${seen.count} colours: blank?`);
if (seen.found.length !== 2) fail(`the screenshot shows only line colours ${seen.found}`);

if (errors.length) fail(`console errors: ${errors.join(" | ")}`);
if (requests.length) fail(`the page is not self-contained: it requested ${requests.join(", ")}`);
await browser.close();
if (failures.length) process.exit(1);
console.log(`whatif report: ${rows.length} group rows, plots of ${clusterQueues.join(", ")}, ` +
            `screenshot ${png.width}x${png.height} with ${seen.count} colours: all passed ` +
            `(${shot})`);
