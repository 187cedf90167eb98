// The dashboard in headless Chromium (Debian's), driven by playwright-core: every page loads
// without console errors (screenshots written for people), a workload submitted during the
// test shows on the workloads page within 2 s without a reload, a workload's timeline opens,
// and a tenant's pages show no other namespace. Run by tests/ui/ui_test.sh.
import { execFileSync } from "node:child_process";
import { mkdirSync } from "node:fs";
import { createRequire } from "node:module";

// playwright-core as installed into NODE_DIR (build/ui-node) by ui_test.sh.
const { chromium } = createRequire(process.env.NODE_DIR + "/")("playwright-core");

const { URL, OPERATOR_TOKEN, TENANT_TOKEN, TENANT_NS, SHOTS, SUBMIT } = process.env;
mkdirSync(SHOTS, { recursive: true });
const failures = [];
const fail = (m) => { failures.push(m); console.error("FAIL: " + m); };

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});

async function signedIn(token, label) {
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  const page = await context.newPage();
  const errors = [];
  page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
  page.on("pageerror", (e) => errors.push(String(e)));
  let navigations = 0;
  page.on("framenavigated", (f) => { if (f === page.mainFrame()) navigations++; });
  await page.goto(URL + "/#overview");
  await page.waitForSelector("#login:not([hidden])");
  await page.fill("#token", token);
  await page.click("#login button");
  await page.waitForSelector("#pending-total", { timeout: 5000 });
  return { page, errors, navigations: () => navigations, label };
}

// Operator: every page.
const op = await signedIn(OPERATOR_TOKEN, "operator");
const pages = { overview: "#pending-total", workloads: "tr[data-workload]", cohorts: "ul.tree",
                checks: "table", audit: "#audit-head" };
for (const [name, selector] of Object.entries(pages)) {
  await op.page.goto(URL + "/#" + name);
  try {
    await op.page.waitForSelector(selector, { timeout: 5000 });
  } catch (e) {
    fail(`page ${name}: ${selector} did not appear`);
  }
  await op.page.waitForTimeout(300);
  await op.page.screenshot({ path: `${SHOTS}/${name}.png`, fullPage: true });
}

// Budgets: the policy the test applied, with the job charged to it committed (8 GPUs x 12 h).
await op.page.goto(URL + "/#overview");
try {
  await op.page.waitForSelector('#budgets tr[data-budget="research-month"]', { timeout: 5000 });
} catch (e) {
  fail("the overview shows no budget research-month");
}
const budgetRow = await op.page.$$eval('#budgets tr[data-budget="research-month"] td',
                                      (tds) => tds.map((td) => td.textContent.trim()));
if (budgetRow[1] !== "namespace research" || budgetRow[6] !== "96") {
  fail(`the budget row lacks its scope or the 96 committed GPU-hours: ${budgetRow}`);
}
await op.page.screenshot({ path: `${SHOTS}/budgets.png`, fullPage: true });

// Topology: per level of the TAS flavor, the largest free domain (GPUs) and the domains that
// could hold the largest pending request (2 pods of 8 GPUs in one rack).
const tasRow = async (level) => {
  const sel = `#topology tr[data-tas-flavor="tas-gpu"][data-tas-level="${level}"] td`;
  try {
    await op.page.waitForSelector(sel, { timeout: 5000 });
  } catch (e) {
    fail(`the overview shows no topology row for tas-gpu ${level}`);
  }
  return op.page.$$eval(sel, (tds) => tds.map((td) => td.textContent.trim()));
};
const want = { "example.com/block": ["1", "16", "1"], "example.com/rack": ["2", "16", "1"],
               "kubernetes.io/hostname": ["4", "8", "0"] };
for (const [level, [domains, free, fitting]] of Object.entries(want)) {
  const row = await tasRow(level);
  if (row[1] !== domains || row[2].split(" ")[0] !== free || row[3] !== fitting) {
    fail(`topology row ${level}: ${row}, expected ${domains} domains, ${free} free, ${fitting} fitting`);
  }
}
await op.page.screenshot({ path: `${SHOTS}/topology.png`, fullPage: true });

// Live: a workload submitted now appears without a reload, within 2 s.
await op.page.goto(URL + "/#workloads");
await op.page.waitForSelector("tr[data-workload]");
await op.page.waitForSelector("#live.on", { timeout: 5000 });
const before = op.navigations();
const live = SUBMIT.split(" ")[0];
execFileSync("/bin/sh", ["-c", SUBMIT.slice(live.length + 1)], { stdio: "inherit" });
const t0 = Date.now();
try {
  await op.page.waitForSelector(`tr[data-workload="${live}"]`, { timeout: 2000 });
  console.log(`live: ${live} shown ${Date.now() - t0} ms after its submission`);
} catch (e) {
  fail(`${live} did not appear on the workloads page within 2 s`);
}
if (op.navigations() !== before) fail("the page reloaded to show the new workload");
await op.page.screenshot({ path: `${SHOTS}/workloads-live.png`, fullPage: true });

// A workload's timeline: explain -o html's page, from the workloads page's link and from the
// address docs/dashboard.md gives (/#explain/NS/NAME, the slash not encoded).
async function timeline(open, how) {
  await open();
  try {
    await op.page.waitForSelector("iframe#explain", { timeout: 10000 });
    const text = await op.page.textContent("#page");
    if (!text.includes("Timeline of " + live)) fail(`the timeline page (${how}): ` + text.slice(0, 200));
    const frame = await (await op.page.$("iframe#explain")).contentFrame();
    const body = await frame.textContent("body");
    if (!body.includes(live.split("/")[1])) fail(`the timeline (${how}) does not name ${live}: ` + body.slice(0, 200));
  } catch (e) {
    fail(`the timeline did not open (${how}): ${e.message}`);
  }
}
await timeline(() => op.page.click(`tr[data-workload="${live}"] a`), "link");
await op.page.screenshot({ path: `${SHOTS}/timeline.png`, fullPage: true });
await op.page.goto(URL + "/#overview");
await op.page.waitForSelector("#pending-total");
await timeline(() => op.page.goto(URL + "/#explain/" + live), "address");

// Quantities for people: memory in Kubernetes form (64Gi), never a count of bytes.
await op.page.goto(URL + "/#overview");
await op.page.waitForSelector("#pending-total");
const overview = await op.page.textContent("#page");
if (/\d{10,}/.test(overview)) fail("the overview shows a raw count: " + overview.match(/.{0,40}\d{10,}.{0,20}/)[0]);
if (!/\d+[GT]i\b/.test(overview)) fail("the overview shows no memory in Gi or Ti");

// Audit: a verify and a replay of the whole ledger run in the daemon and show their results.
await op.page.goto(URL + "/#audit");
await op.page.waitForSelector("#audit-head");
for (const what of ["verify", "replay"]) {
  await op.page.click(`button[data-audit="${what}"]`);
  try {
    await op.page.waitForFunction((id) => document.getElementById(id)?.textContent.startsWith("ok: "),
                                  "last-" + what, { timeout: 20000 });
  } catch (e) {
    fail(`audit ${what}: ${await op.page.textContent("#page")}`);
  }
}
await op.page.screenshot({ path: `${SHOTS}/audit-run.png`, fullPage: true });

// Tenant: only its namespace. On the way, overlapping renders: the overview's data held back
// 1 s, the user moves on to the workloads page before it arrives, and the stale overview must
// not replace the workloads page when it lands (seen in CI, from a live refresh's render).
const tenant = await signedIn(TENANT_TOKEN, "tenant");
await tenant.page.goto(URL + "/#audit");
await tenant.page.waitForSelector("#audit-head");
await tenant.page.route("**/api/overview", async (route) => {
  await new Promise((res) => setTimeout(res, 1000));
  await route.continue();
});
await tenant.page.goto(URL + "/#overview");
await tenant.page.goto(URL + "/#workloads");
await tenant.page.waitForSelector("tr[data-workload]");
await tenant.page.waitForTimeout(1500);
await tenant.page.unroute("**/api/overview");
if (!(await tenant.page.$("tr[data-workload]"))) {
  fail(`a stale render replaced the workloads page: ${(await tenant.page.textContent("#page")).slice(0, 120)}`);
}
const namespaces = await tenant.page.$$eval("tr[data-workload]", (rows) =>
  [...new Set(rows.map((r) => r.dataset.workload.split("/")[0]))]);
if (namespaces.length !== 1 || namespaces[0] !== TENANT_NS) {
  fail(`the tenant's workloads page shows namespaces ${JSON.stringify(namespaces)}, want only ${TENANT_NS}`);
}
await tenant.page.screenshot({ path: `${SHOTS}/tenant-workloads.png`, fullPage: true });
// A tenant may not run the audit's whole-ledger reads, and is not offered the buttons.
await tenant.page.goto(URL + "/#audit");
await tenant.page.waitForSelector("#audit-head");
if (await tenant.page.$("button[data-audit]")) fail("the tenant is shown Verify and Replay buttons");
const refused = (await fetch(URL + "/api/audit/verify",
                             { method: "POST", headers: { Authorization: "Bearer " + TENANT_TOKEN } })).status;
if (refused !== 403) fail(`a tenant's verify: HTTP ${refused}, want 403`);

for (const s of [op, tenant]) {
  if (s.errors.length) fail(`${s.label}: console errors: ${s.errors.join(" | ")}`);
}
await browser.close();
if (failures.length) process.exit(1);
console.log(`dashboard: ${Object.keys(pages).length} pages, live update, timeline, tenant scope: all passed; screenshots in ${SHOTS}`);
