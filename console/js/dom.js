// Small pieces every view uses: building elements, showing times in the
// viewer's zone, state badges and the two charts (SVG, no library).

/** An element: `h("a", {href: "#/"}, "text", child)`. Text is never parsed as HTML. */
export function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) element.addEventListener(name.slice(2), value);
    else if (name === "dataset") Object.assign(element.dataset, value);
    else if (value === true) element.setAttribute(name, "");
    else element.setAttribute(name, value);
  }
  append(element, children);
  return element;
}

function append(element, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replaces what `element` shows. */
export function show(element, ...children) {
  element.replaceChildren();
  append(element, children);
  return element;
}

/** A time in the viewer's time zone; "—" for none. */
export function when(iso) {
  if (!iso) return "—";
  return new Date(iso).toLocaleString(undefined, {
    month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit",
  });
}

/** How long ago, short: "12 s ago", "3 min ago". */
export function ago(iso) {
  if (!iso) return "never";
  return `${duration((Date.now() - new Date(iso).getTime()) / 1000)} ago`;
}

/** A span of seconds, short: "45 s", "3 min", "2 h 5 min". */
export function duration(secs) {
  secs = Math.max(0, Math.round(secs));
  if (secs < 60) return `${secs} s`;
  if (secs < 3600) return `${Math.floor(secs / 60)} min`;
  const hours = Math.floor(secs / 3600);
  const minutes = Math.floor((secs % 3600) / 60);
  return minutes ? `${hours} h ${minutes} min` : `${hours} h`;
}

/** A share as a percentage; "—" when there is none. */
export function percent(share) {
  return share === null || share === undefined ? "—" : `${Math.round(share * 100)} %`;
}

/** A time with its tooltip in full. */
export function time(iso) {
  return h("time", { datetime: iso || "", title: iso ? new Date(iso).toString() : "" }, when(iso));
}

/** A run's state as a coloured badge. */
export function stateBadge(state) {
  return h("span", { class: `badge state-${state}`, dataset: { state } }, state.replace("_", " "));
}

/** A `<select>` of `options` ([value, label] pairs) with an "any" first choice. */
export function select(name, options, { any = "any", value = "", id } = {}) {
  return h("select", { name, id: id || name },
    any === null ? null : h("option", { value: "" }, any),
    options.map(([v, label]) => h("option", { value: v, selected: String(v) === String(value) }, label)));
}

const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attributes = {}, ...children) {
  const element = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, value);
  for (const child of children) element.append(child);
  return element;
}

/**
 * Stacked bars per minute: completed (below) and failed (above), oldest left.
 * `minutes`: [{minute, completed, failed}].
 */
export function minuteChart(minutes) {
  const width = 600, height = 120;
  const most = Math.max(1, ...minutes.map((m) => m.completed + m.failed));
  const bar = width / Math.max(1, minutes.length);
  const scale = (n) => (n / most) * (height - 4);
  // Stretched to the panel's width: bars only, no text to distort.
  const chart = svg("svg", { viewBox: `0 0 ${width} ${height}`, class: "chart", role: "img", preserveAspectRatio: "none",
    "aria-label": "completed and failed runs per minute over the last hour" });
  minutes.forEach((m, i) => {
    const x = i * bar;
    const done = scale(m.completed), failed = scale(m.failed);
    const title = svg("title");
    title.textContent = `${when(m.minute)}: ${m.completed} completed, ${m.failed} failed`;
    const group = svg("g", {}, title);
    group.append(svg("rect", { x, y: height - done, width: Math.max(1, bar - 1), height: done, class: "completed" }));
    group.append(svg("rect", { x, y: height - done - failed, width: Math.max(1, bar - 1), height: failed, class: "failed" }));
    chart.append(group);
  });
  const total = (key) => minutes.reduce((sum, m) => sum + m[key], 0);
  const first = minutes[0]?.minute, last = minutes[minutes.length - 1]?.minute;
  return h("figure", { class: "minute-chart" }, chart,
    h("figcaption", { class: "muted" },
      h("span", { class: "legend completed" }, `${total("completed")} completed`), " · ",
      h("span", { class: "legend failed" }, `${total("failed")} failed`),
      ` · busiest minute ${most} · ${first ? when(first) : ""} – ${last ? when(last) : ""}`));
}

/** A small line of numbers (items per run), oldest left, with its lowest, highest and last in words. */
export function sparkline(values, label) {
  const width = 120, height = 28;
  const chart = svg("svg", { viewBox: `0 0 ${width} ${height}`, class: "sparkline", role: "img", "aria-label": label });
  if (values.length === 0) return h("span", { class: "spark muted" }, "no runs yet");
  const figures = h("span", { class: "spark-figures muted" },
    `min ${Math.min(...values)} · max ${Math.max(...values)} · last ${values[values.length - 1]}`);
  return h("span", { class: "spark" }, drawLine(chart, values, label, width, height), figures);
}

function drawLine(chart, values, label, width, height) {
  const most = Math.max(1, ...values);
  const step = values.length > 1 ? width / (values.length - 1) : 0;
  const points = values.map((v, i) => `${(i * step).toFixed(1)},${(height - 2 - (v / most) * (height - 4)).toFixed(1)}`);
  chart.append(svg("polyline", { points: points.join(" "), class: "line" }));
  const title = svg("title");
  title.textContent = `${label}: ${values.join(", ")}`;
  chart.append(title);
  return chart;
}

/** A message where the view's data would be, when it could not be read. */
export function failure(error) {
  return h("p", { class: "error", role: "alert" }, error.message || String(error));
}

/** A site's status (`healthy`, `degraded`, `failing`, `blocked`, `unknown`), or a degraded run, as a badge. */
export const healthBadge = (status, title) =>
  (status ? h("span", { class: `badge health-${status}`, title: title || "" }, status) : null);
