// The notebook view: an MCP App (ext-apps `App`) that shows one kernel's cells, plan, outputs and
// state, and calls ipykeep's tools back through the host on the person's clicks. Opened as a
// page of its own (`ipykeep view`), it shows the snapshot embedded in it, without controls.
import { App } from "@modelcontextprotocol/ext-apps";
import type { CallToolResult } from "@modelcontextprotocol/core";
import "./style.css";

type Reason = { kind: string; message: string };
type Cell = {
  cell_id: string;
  index: number;
  cell_type: string;
  state: string;
  handle?: string;
  execution_count?: number;
  paused?: string;
  first_line: string;
  reasons: Reason[];
};
type PlanEntry = {
  cell_id: string;
  index: number;
  reasons: Reason[];
  last_duration_s?: number | null;
  condition?: string;
};
type Plan = {
  order: PlanEntry[];
  conditional: PlanEntry[];
  blocked: PlanEntry[];
  cost?: { plan_s?: number; unmeasured?: string[]; fresh_s?: number | null; fresh_is_cheaper?: boolean } | null;
};
type Output = {
  handle: string;
  state?: string;
  text: string;
  truncated: boolean;
  uri?: string;
  duration_s?: number;
  images: { uri: string; mime?: string; data?: string }[];
  error?: { ename: string; evalue: string; line?: string | null; traceback: string };
};
type Snapshot = {
  taken_at: number;
  kernel: { kernel_id: string; state?: string; notebook?: string; running?: string[] };
  notebook?: string | null;
  cells: Cell[];
  plan: Plan | null;
  progress: { done: number; total: number; current?: string | null; remaining_s?: number | null } | null;
  outputs: Record<string, Output>;
};

const STATE_TOOL = "notebook_view";
const POLL_MS = 1000;
const STATE_WORDS: Record<string, string> = {
  ok: "ok",
  stale: "stale",
  failed: "failed",
  running: "running",
  never_run: "never run",
  markdown: "markdown",
};

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;

function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: { className?: string; text?: string; attrs?: Record<string, string> } = {},
  ...children: (Node | null)[]
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (props.className) node.className = props.className;
  if (props.text !== undefined) node.textContent = props.text;
  for (const [k, v] of Object.entries(props.attrs ?? {})) node.setAttribute(k, v);
  for (const child of children) if (child) node.appendChild(child);
  return node;
}

function secs(value: number | null | undefined): string {
  if (value === null || value === undefined) return "";
  return value < 10 ? `${value.toFixed(2)} s` : `${Math.round(value)} s`;
}

function reasonList(reasons: Reason[]): HTMLElement | null {
  if (!reasons.length) return null;
  const list = el("ul", { className: "reasons" });
  for (const r of reasons) list.appendChild(el("li", { text: `${r.kind}: ${r.message}` }));
  return list;
}

// -- state -----------------------------------------------------------------------------------
let snapshot: Snapshot | null = null;
let kernelId: string | null = null;
let pending = 0; // calls in flight (the host's linked call, the person's clicks)
let polling = false;
let touched = new Set<string>();
let handlesAtCallStart: Record<string, string | undefined> = {};
let app: App | null = null;

function setStatus(text: string, error = false): void {
  const status = $("status");
  status.textContent = text;
  status.classList.toggle("error", error);
}

function render(): void {
  if (!snapshot) return;
  const s = snapshot;
  const kernel = s.kernel;
  $("kernel-name").textContent = `${kernel.kernel_id}${s.notebook ? " · " + s.notebook.split(/[\\/]/).pop() : " · scratch"}`;
  const ks = $("kernel-state");
  ks.textContent = kernel.state ?? "";
  ks.className = `badge state-${kernel.state ?? ""}`;
  ks.dataset.state = kernel.state ?? "";
  const name = $("notebook-name");
  name.textContent = s.notebook ? `(${s.notebook.split(/[\\/]/).pop()})` : "";
  name.title = s.notebook ?? "";
  renderPlan(s);
  renderCells(s);
  const busy = pending > 0 || (kernel.running?.length ?? 0) > 0;
  ($("run-plan") as HTMLButtonElement).disabled = busy || !s.plan || s.plan.order.length === 0;
  ($("interrupt") as HTMLButtonElement).disabled = !busy;
  ($("refresh") as HTMLButtonElement).disabled = false;
  document.querySelectorAll<HTMLButtonElement>("button.cell-action").forEach((b) => (b.disabled = busy));
  $("view").dataset.busy = busy ? "true" : "false";
}

function renderPlan(s: Snapshot): void {
  const list = $("plan");
  list.replaceChildren();
  const estimate = $("plan-estimate");
  const empty = $("plan-empty");
  if (s.progress) {
    const p = s.progress;
    estimate.textContent = `running: ${p.done}/${p.total}${p.current ? ", now " + p.current : ""}${p.remaining_s ? `, ~${secs(p.remaining_s)} left` : ""}`;
    empty.hidden = true;
    return;
  }
  const plan = s.plan;
  if (!plan) {
    estimate.textContent = "(worked out when the kernel is free)";
    empty.hidden = true;
    return;
  }
  const cost = plan.cost;
  let est = "";
  if (plan.order.length) {
    est = `${plan.order.length} cell(s)`;
    if (cost?.plan_s !== undefined) est += `, estimated ~${secs(cost.plan_s)}`;
    if (cost?.unmeasured?.length) est += ` + ${cost.unmeasured.length} never run`;
    if (cost?.fresh_s !== undefined && cost?.fresh_s !== null) est += ` (fresh run ~${secs(cost.fresh_s)})`;
  }
  estimate.textContent = est;
  estimate.dataset.cells = String(plan.order.length);
  empty.hidden = plan.order.length + plan.blocked.length + plan.conditional.length > 0;
  plan.order.forEach((e, i) => {
    const took = e.last_duration_s !== null && e.last_duration_s !== undefined ? ` (${secs(e.last_duration_s)} last run)` : "";
    list.appendChild(
      el(
        "li",
        { attrs: { "data-cell-id": e.cell_id } },
        el("span", { className: "step", text: `${i + 1}.` }),
        el("span", { text: `[${e.index}] ${e.cell_id}${took}` }),
        reasonList(e.reasons),
      ),
    );
  });
  for (const e of plan.conditional) {
    list.appendChild(
      el("li", { attrs: { "data-cell-id": e.cell_id, "data-conditional": "true" } },
        el("span", { className: "step", text: "if" }),
        el("span", { text: `[${e.index}] ${e.cell_id}: ${e.condition ?? "runs only if its inputs change"}` }),
        reasonList(e.reasons)),
    );
  }
  for (const e of plan.blocked) {
    list.appendChild(
      el("li", { attrs: { "data-cell-id": e.cell_id, "data-blocked": "true" } },
        el("span", { className: "step", text: "✗" }),
        el("span", { text: `[${e.index}] ${e.cell_id}: not run (would fail in a fresh run)` }),
        reasonList(e.reasons)),
    );
  }
}

function renderOutput(out: Output): HTMLElement {
  const box = el("div", { className: "output", attrs: { "data-handle": out.handle } });
  if (out.error) {
    box.appendChild(el("div", { className: "error", text: `${out.error.ename}: ${out.error.evalue}` }));
    if (out.error.line) box.appendChild(el("div", { className: "line", text: `line ${out.error.line}` }));
  }
  if (out.text) box.appendChild(el("pre", { text: out.text }));
  for (const img of out.images) {
    if (img.data) {
      box.appendChild(el("img", { attrs: { src: `data:${img.mime ?? "image/png"};base64,${img.data}`, alt: img.uri } }));
    } else {
      box.appendChild(el("div", { className: "note", text: `image not embedded: ${img.uri}` }));
    }
  }
  if (out.error?.traceback) {
    box.appendChild(el("details", {}, el("summary", { text: "traceback" }), el("pre", { text: out.error.traceback })));
  }
  if (out.truncated && out.uri) box.appendChild(el("div", { className: "note", text: `cut; all of it: ${out.uri}` }));
  return box;
}

function renderCells(s: Snapshot): void {
  const list = $("cells");
  list.replaceChildren();
  for (const cell of s.cells) {
    const state = cell.state;
    const badge = el("span", { className: `badge state-${state}`, text: STATE_WORDS[state] ?? state });
    const actions = el("span", { className: "actions" });
    if (cell.cell_type === "code") {
      const run = el("button", { className: "small cell-action", text: "Run", attrs: { type: "button", "data-action": "run" } });
      run.addEventListener("click", () => void runCell(cell.cell_id));
      actions.appendChild(run);
    }
    if (state === "failed") {
      const dbg = el("button", { className: "small cell-action", text: "Debug", attrs: { type: "button", "data-action": "debug" } });
      dbg.addEventListener("click", () => void debugCell(cell.cell_id));
      actions.appendChild(dbg);
    }
    const item = el(
      "li",
      { className: "cell", attrs: { "data-cell-id": cell.cell_id, "data-state": state } },
      el(
        "div",
        { className: "row" },
        el("span", { className: "idx", text: cell.execution_count ? `[${cell.execution_count}]` : `#${cell.index}` }),
        badge,
        el("code", { className: "src", text: cell.first_line || "(empty)", attrs: { title: cell.cell_id } }),
        el("span", { className: "cid", text: cell.cell_id }),
        actions,
      ),
      state === "stale" ? reasonList(cell.reasons) : null,
    );
    const out = s.outputs[cell.cell_id];
    if (out && (out.text || out.images.length || out.error)) {
      if (touched.has(cell.cell_id) || touched.size === 0) {
        item.appendChild(renderOutput(out));
      } else {
        const folded = el("details", { className: "output" }, el("summary", { text: "earlier output" }));
        folded.appendChild(renderOutput(out));
        item.appendChild(folded);
      }
    }
    if (touched.has(cell.cell_id)) item.classList.add("touched");
    list.appendChild(item);
  }
}

// -- talking to the server through the host ------------------------------------------------------
async function fetchState(): Promise<void> {
  if (!app || !kernelId) return;
  const result = await app.callServerTool({ name: STATE_TOOL, arguments: { kernel_id: kernelId } });
  if (result.isError) {
    setStatus(textOf(result) || "the view could not read the kernel's state", true);
    return;
  }
  const next = result.structuredContent as Snapshot | undefined;
  if (!next) return;
  // cells the call touched: those whose latest execution changed since it began
  for (const [id, out] of Object.entries(next.outputs)) {
    if (id in handlesAtCallStart && handlesAtCallStart[id] !== out.handle) touched.add(id);
  }
  for (const c of next.cells) if (c.state === "running") touched.add(c.cell_id);
  snapshot = next;
  render();
}

async function poll(): Promise<void> {
  if (polling) return;
  polling = true;
  try {
    while (pending > 0) {
      try {
        await fetchState();
      } catch (err) {
        setStatus(`could not refresh: ${String(err)}`, true);
      }
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
  } finally {
    polling = false;
  }
}

function callStarted(): void {
  pending += 1;
  if (pending === 1) {
    touched = new Set();
    handlesAtCallStart = Object.fromEntries((snapshot?.cells ?? []).map((c) => [c.cell_id, c.handle]));
  }
  render();
  void poll();
}

async function callEnded(): Promise<void> {
  pending = Math.max(0, pending - 1);
  try {
    await fetchState();
  } catch (err) {
    setStatus(`could not refresh: ${String(err)}`, true);
  }
}

function textOf(result: CallToolResult): string {
  return (result.content ?? [])
    .map((b) => (b.type === "text" ? b.text : ""))
    .filter(Boolean)
    .join("\n");
}

/** The result's closing line (a batch ends with what became of its cells), bounded. */
function lastLine(result: CallToolResult): string {
  const lines = textOf(result).split("\n").map((l) => l.trim()).filter(Boolean);
  const last = lines[lines.length - 1] ?? "done";
  return last.length > 200 ? last.slice(0, 199) + "…" : last;
}

function errorMessage(result: CallToolResult): string {
  const env = result.structuredContent as { message?: string; hint?: string } | undefined;
  if (env?.message) return env.hint ? `${env.message} (${env.hint})` : env.message;
  return textOf(result);
}

async function click(what: string, name: string, args: Record<string, unknown>): Promise<CallToolResult | null> {
  if (!app || !kernelId) return null;
  setStatus(`${what}…`);
  callStarted();
  try {
    const result = await app.callServerTool({ name, arguments: { kernel_id: kernelId, ...args } });
    setStatus(result.isError ? `${what} failed: ${errorMessage(result)}` : `${what}: ${lastLine(result)}`, result.isError === true);
    return result;
  } catch (err) {
    setStatus(`${what} failed: ${String(err)}`, true);
    return null;
  } finally {
    await callEnded();
  }
}

async function runPlan(): Promise<void> {
  await click("running the plan", "run_stale", { execute: true });
}

async function runCell(cellId: string): Promise<void> {
  await click(`running ${cellId}`, "run_cells", { cells: [cellId] });
}

async function interrupt(): Promise<void> {
  if (!app || !kernelId) return;
  setStatus("interrupting…");
  const result = await app.callServerTool({ name: "interrupt", arguments: { kernel_id: kernelId } });
  setStatus(result.isError ? `interrupt failed: ${errorMessage(result)}` : textOf(result), result.isError === true);
}

async function debugCell(cellId: string): Promise<void> {
  const result = await click(`re-running ${cellId} under the debugger`, "debug", { command: `replay ${cellId}` });
  if (result) {
    $("debug-section").hidden = false;
    $("debug-output").textContent = result.isError ? errorMessage(result) : textOf(result);
  }
}

function kernelFrom(args: Record<string, unknown> | undefined, result?: CallToolResult): string | null {
  const fromArgs = args?.kernel_id;
  if (typeof fromArgs === "string" && fromArgs) return fromArgs;
  const sc = result?.structuredContent as { kernel_id?: unknown } | undefined;
  if (typeof sc?.kernel_id === "string") return sc.kernel_id;
  const match = result ? /"kernel_id"\s*:\s*"(k\d+)"|^(k\d+)\b/m.exec(textOf(result)) : null;
  return match ? (match[1] ?? match[2]) : null;
}

// -- start -------------------------------------------------------------------------------------
function startSnapshot(data: Snapshot): void {
  document.body.classList.add("snapshot");
  snapshot = data;
  kernelId = data.kernel.kernel_id;
  render();
  setStatus(`snapshot of ${data.kernel.kernel_id}, taken ${new Date(data.taken_at * 1000).toLocaleString()}`);
}

async function startApp(): Promise<void> {
  app = new App({ name: "ipykeep-notebook", version: "1.0.0" }, {}, { autoResize: true });
  app.ontoolinput = (params) => {
    const id = kernelFrom(params.arguments as Record<string, unknown> | undefined);
    if (id) kernelId = id;
    setStatus("the agent's call is running…");
    callStarted();
  };
  app.ontoolresult = (result) => {
    const id = kernelFrom(undefined, result as CallToolResult);
    if (!kernelId && id) kernelId = id;
    const failed = (result as CallToolResult).isError === true;
    setStatus(failed ? `the call failed: ${errorMessage(result as CallToolResult)}` : "the agent's call finished", failed);
    if (pending === 0) callStarted(); // a result without its input (a host that sends only results)
    void callEnded();
  };
  app.ontoolcancelled = () => {
    setStatus("the agent's call was cancelled");
    void callEnded();
  };
  $("run-plan").addEventListener("click", () => void runPlan());
  $("interrupt").addEventListener("click", () => void interrupt());
  $("refresh").addEventListener("click", () => void fetchState());
  $("debug-close").addEventListener("click", () => ($("debug-section").hidden = true));
  await app.connect();
}

const embedded = document.getElementById("ipykeep-snapshot");
if (embedded?.textContent) {
  startSnapshot(JSON.parse(embedded.textContent) as Snapshot);
} else {
  startApp().catch((err) => setStatus(`could not connect to the host: ${String(err)}`, true));
}
